//! Power of the exact McNemar test with Holm against fixtures/power.csv (scipy's exact sum
//! and a simulation of the whole procedure; see fixtures/power.py).

use promptgauge::stats::power::{Assumptions, cases_needed, detectable_difference, power};

#[test]
fn power_matches_the_exact_sum_and_the_simulation() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/power.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut counts = [0; 4];
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let a = Assumptions {
            baseline: f[2].parse().unwrap(),
            alpha: 0.05,
            comparisons: f[4].parse().unwrap(),
            correlation: f[5].parse().unwrap(),
            discordance: None,
        };
        let value: f64 = f[6].parse().unwrap();
        match f[0] {
            "exact" | "sim" => {
                let n: u64 = f[1].parse().unwrap();
                let got = power(n, f[3].parse().unwrap(), &a).unwrap();
                if f[0] == "exact" {
                    assert!((got - value).abs() < 1e-9, "{line}: {got}");
                    counts[0] += 1;
                } else {
                    assert!((got - value).abs() < 0.03, "{line}: {got}");
                    counts[1] += 1;
                }
            }
            "needed" => {
                let got = cases_needed(f[3].parse().unwrap(), 0.8, &a).unwrap();
                assert_eq!(got, value as u64, "{line}");
                counts[2] += 1;
            }
            "detectable" => {
                let got = detectable_difference(f[1].parse().unwrap(), 0.8, &a).unwrap();
                assert!((got - value).abs() < 2e-4, "{line}: {got}");
                counts[3] += 1;
            }
            other => panic!("unknown row {other}"),
        }
    }
    assert_eq!(counts, [14, 13, 4, 7]);
}
