//! Statistics against reference values computed independently (tests/fixtures/*.py).

use promptgauge::stats::wilson;

#[test]
fn wilson_matches_statsmodels_to_1e_9() {
    let text = include_str!("fixtures/wilson.csv");
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (c, n): (u64, u64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        let conf: f64 = f[2].parse().unwrap();
        let (lo, hi): (f64, f64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
        let (got_lo, got_hi) = wilson(c, n, conf).unwrap();
        assert!((got_lo - lo).abs() < 1e-9, "{line}: low {got_lo}");
        assert!((got_hi - hi).abs() < 1e-9, "{line}: high {got_hi}");
        checked += 1;
    }
    assert_eq!(checked, 100);
}
