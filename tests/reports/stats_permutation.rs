//! The sign-flip test and its interval against fixtures/permutation.csv (scipy, statsmodels,
//! exact integer counts); see fixtures/permutation.py.

use promptgauge::stats::permutation::{Method, sign_flip_interval, sign_flip_test};

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn floats(s: &str) -> Vec<f64> {
    s.split(';').map(|x| x.parse().unwrap()).collect()
}

#[test]
fn sign_flip_matches_the_references() {
    let text = fixture("permutation.csv");
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        *counts.entry(f[0]).or_insert(0) += 1;
        match f[0] {
            "scipy" | "exact" => {
                let d = floats(f[1]);
                let want: f64 = f[2].parse().unwrap();
                let got = sign_flip_test(&d).unwrap();
                assert!(
                    (got.p_value - want).abs() < 1e-9,
                    "{line}: {got:?} want {want}"
                );
                if f[0] == "exact" {
                    let grid: u64 = f[3].parse().unwrap();
                    assert_eq!(got.method, Method::ExactGrid { grid }, "{line}");
                }
            }
            "mcnemar" => {
                let n: Vec<usize> = f[1].split(';').map(|x| x.parse().unwrap()).collect();
                let mut d = vec![1.0; n[0]];
                d.extend(vec![-1.0; n[1]]);
                d.extend(vec![0.0; n[2]]);
                let want: f64 = f[2].parse().unwrap();
                if d.is_empty() {
                    continue;
                }
                let got = sign_flip_test(&d).unwrap();
                assert!((got.p_value - want).abs() < 1e-12, "{line}: {got:?}");
            }
            "enumerated" => {
                let d = floats(f[1]);
                let want: f64 = f[2].parse().unwrap();
                let got = sign_flip_test(&d).unwrap();
                let Method::MonteCarlo { draws } = got.method else {
                    panic!("{:?}", got.method)
                };
                let se = (want * (1.0 - want) / draws as f64).sqrt().max(1e-6);
                assert!(
                    (got.p_value - want).abs() < 4.5 * se,
                    "{line}: {} vs {want}",
                    got.p_value
                );
            }
            "interval" => {
                let d = floats(f[1]);
                let conf: f64 = f[2].parse().unwrap();
                let x = floats(f[3]);
                let got = sign_flip_interval(&d, conf).unwrap();
                assert_eq!(got.method, Method::ExactEnumeration);
                if x[2] == 1.0 {
                    assert!((got.low - x[0]).abs() < 1e-7, "{line}: {got:?}");
                    assert!((got.high - x[1]).abs() < 1e-7, "{line}: {got:?}");
                }
            }
            other => panic!("unknown row kind {other}"),
        }
    }
    let want: Vec<(&str, i32)> = vec![
        ("enumerated", 3),
        ("exact", 8),
        ("interval", 12),
        ("mcnemar", 40),
        ("scipy", 19),
    ];
    assert_eq!(counts.into_iter().collect::<Vec<_>>(), want);
}

#[test]
fn duplicating_every_answer_changes_nothing() {
    // Case i: the variant right c_v of k times, the baseline c_b of k; then every answer
    // repeated r times (c·r of k·r): the case means, and so p and the interval, are equal.
    let counts = [
        (2, 1),
        (3, 0),
        (1, 1),
        (0, 2),
        (3, 1),
        (2, 2),
        (3, 2),
        (1, 0),
    ];
    for r in [1u32, 2, 3, 5] {
        let k = f64::from(3 * r);
        let d: Vec<f64> = counts
            .iter()
            .map(|&(v, b)| f64::from(v * r) / k - f64::from(b * r) / k)
            .collect();
        let base: Vec<f64> = counts
            .iter()
            .map(|&(v, b)| f64::from(v) / 3.0 - f64::from(b) / 3.0)
            .collect();
        assert_eq!(sign_flip_test(&d), sign_flip_test(&base), "r = {r}");
        assert_eq!(
            sign_flip_interval(&d, 0.9),
            sign_flip_interval(&base, 0.9),
            "r = {r}"
        );
    }
}
