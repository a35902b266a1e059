//! Prediction-powered inference and rater agreement against ppi_py, scikit-learn and
//! statsmodels (fixtures/ppi.csv; see fixtures/ppi.py).

use promptgauge::stats::ppi::{Tuning, agreement, cohen_kappa, ppi_mean};

fn floats(s: &str) -> Vec<f64> {
    s.split(';').map(|x| x.parse().unwrap()).collect()
}

#[test]
fn ppi_and_kappa_match_the_references() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ppi.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut counts = [0; 3];
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let conf: f64 = f[1].parse().unwrap();
        let x: Vec<f64> = f[5..].iter().map(|v| v.parse().unwrap()).collect();
        match f[0] {
            "classic" | "tuned" => {
                let tuning = if f[0] == "classic" {
                    Tuning::Classic
                } else {
                    Tuning::PowerTuned
                };
                let r =
                    ppi_mean(&floats(f[2]), &floats(f[3]), &floats(f[4]), conf, tuning).unwrap();
                assert!((r.estimate - x[0]).abs() < 1e-9, "{r:?} vs {x:?}");
                assert!(
                    (r.low - x[1]).abs() < 1e-9 && (r.high - x[2]).abs() < 1e-9,
                    "{r:?} vs {x:?}"
                );
                assert!((r.lambda - x[3]).abs() < 1e-9, "{r:?} vs {x:?}");
                counts[usize::from(f[0] == "tuned")] += 1;
            }
            "kappa" => {
                let a: Vec<bool> = floats(f[2]).iter().map(|v| *v == 1.0).collect();
                let b: Vec<bool> = floats(f[3]).iter().map(|v| *v == 1.0).collect();
                let k = cohen_kappa(&a, &b).unwrap();
                assert!((k - x[0]).abs() < 1e-12, "{k} vs {}", x[0]);
                let (p, lo, hi) = agreement(&a, &b, conf).unwrap();
                assert!((p - x[3]).abs() < 1e-12);
                assert!((lo - x[1]).abs() < 1e-9 && (hi - x[2]).abs() < 1e-9);
                counts[2] += 1;
            }
            other => panic!("unknown row {other}"),
        }
    }
    assert_eq!(counts, [12, 12, 4]);
}
