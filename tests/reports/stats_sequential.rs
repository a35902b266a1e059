//! SequentialTest replayed on the seeded sequences of fixtures/sequential.csv, against the
//! decisions of the Python reference `Seq` (fixtures/sequential.py).

use promptgauge::stats::sequential::{ScoreKind, SequentialParams, SequentialTest, Verdict};

#[test]
fn sequential_test_matches_the_reference_on_seeded_sequences() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sequential.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(',').collect();
        let scores = if f[0] == "binary" {
            ScoreKind::Binary
        } else {
            ScoreKind::Scored
        };
        let mut p = SequentialParams::new(f[3].parse().unwrap(), scores);
        p.comparisons = f[1].parse().unwrap();
        p.min_cases = f[2].parse().unwrap();
        let verdict = match f[4] {
            "better" => Verdict::Better,
            "worse" => Verdict::Worse,
            "no_difference" => Verdict::NoDifferenceOfDetect,
            _ => Verdict::Undecided,
        };
        let cases: u64 = f[5].parse().unwrap();
        let (statistic, threshold): (f64, f64) = (f[6].parse().unwrap(), f[7].parse().unwrap());
        let mut t = SequentialTest::new(p).unwrap();
        let mut got = None;
        for pair in f[8].split(';') {
            let (v, b) = pair.split_once(':').unwrap();
            let d = t.observe(v.parse().unwrap(), b.parse().unwrap()).unwrap();
            assert!(got.is_none() || d.is_none());
            got = got.or(d);
        }
        let d = got.unwrap_or_else(|| panic!("no decision: {}", &line[..60]));
        assert_eq!((d.verdict, d.cases), (verdict, cases), "{}", &line[..80]);
        assert!(
            (d.statistic - statistic).abs() < 1e-9,
            "{d:?} vs {statistic}"
        );
        assert!((d.threshold - threshold).abs() < 1e-12);
        assert_eq!(t.decision(), Some(d));
        checked += 1;
    }
    assert_eq!(checked, 12);
}
