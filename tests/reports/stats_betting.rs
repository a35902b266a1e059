//! The paired test of scored runs (crates/stats/src/betting.rs) against fixtures/betting.csv, its
//! line-by-line Python copy (fixtures/betting.py, whose simulation is betting_sim.txt).

use promptgauge::stats::betting::BoundedMean;

#[test]
fn the_betting_test_matches_its_python_copy() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/betting.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut rows = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let d: Vec<f64> = f[0].split(';').map(|x| x.parse().unwrap()).collect();
        let want: Vec<f64> = f[1..].iter().map(|x| x.parse().unwrap()).collect();
        let t = BoundedMean::new(&d, 0.95).unwrap();
        let p = t.p_value(0.0);
        assert!(
            (p - want[0]).abs() <= 1e-9 * want[0].max(1e-300) + 1e-15,
            "{line}: p {p}"
        );
        let (lo95, hi95) = t.interval(0.95).unwrap();
        let (lo99, hi99) = t.interval(0.99).unwrap();
        for (got, want) in [lo95, hi95, lo99, hi99].iter().zip(&want[1..]) {
            assert!((got - want).abs() < 1e-8, "{line}: {got} want {want}");
        }
        rows += 1;
    }
    assert!(rows >= 20, "{rows} rows");
}
