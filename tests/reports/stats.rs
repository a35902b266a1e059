//! Statistics against reference values computed independently (tests/fixtures/*.py).

use promptgauge::stats::wilson;

#[test]
fn wilson_matches_statsmodels_to_1e_9() {
    let text = include_str!("../fixtures/wilson.csv");
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

use promptgauge::stats::paired::{Table, holm, mcnemar_exact, newcombe_paired};

#[test]
fn paired_statistics_match_the_references() {
    let text = include_str!("../fixtures/paired.csv");
    let mut tables = 0;
    let mut holms = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[0] == "holm" {
            let ps: Vec<f64> = f[1].split(';').map(|x| x.parse().unwrap()).collect();
            let want: Vec<f64> = f[2].split(';').map(|x| x.parse().unwrap()).collect();
            let got = holm(&ps);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "{line}: {got:?}");
            }
            holms += 1;
            continue;
        }
        let n: Vec<u64> = f[..4].iter().map(|x| x.parse().unwrap()).collect();
        let x: Vec<f64> = f[4..].iter().map(|x| x.parse().unwrap()).collect();
        let t = Table {
            both_right: n[0],
            only_variant: n[1],
            only_baseline: n[2],
            both_wrong: n[3],
        };
        let p = mcnemar_exact(t.only_variant, t.only_baseline);
        assert!((p - x[1]).abs() < 1e-9, "{line}: p {p}");
        let (est, lo, hi) = newcombe_paired(&t, x[0]).unwrap();
        assert!((est - x[2]).abs() < 1e-12, "{line}: estimate {est}");
        assert!((lo - x[3]).abs() < 1e-9, "{line}: low {lo}");
        assert!((hi - x[4]).abs() < 1e-9, "{line}: high {hi}");
        tables += 1;
    }
    assert_eq!((tables, holms), (45, 5));
}

#[test]
fn newcombe_reproduces_the_published_example() {
    // Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (2017), §8:
    // Cavo et al. (2012), estimate -0.0621, 95% CI -0.1186 to -0.0046.
    let t = Table {
        both_right: 59,
        only_variant: 6,
        only_baseline: 16,
        both_wrong: 80,
    };
    let (est, lo, hi) = newcombe_paired(&t, 0.95).unwrap();
    let round = |x: f64| (x * 1e4).round() / 1e4;
    assert_eq!(
        (round(est), round(lo), round(hi)),
        (-0.0621, -0.1186, -0.0046)
    );
}

use promptgauge::stats::cluster::{CaseScore, clustered_wilson, icc};

#[test]
fn clustered_accuracy_matches_the_references() {
    let text = include_str!("../fixtures/cluster.csv");
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let cases: Vec<CaseScore> = f[1]
            .split(';')
            .map(|s| {
                let (c, m) = s.split_once('/').unwrap();
                CaseScore::binary(c.parse().unwrap(), m.parse().unwrap())
            })
            .collect();
        let x: Vec<f64> = f[2..].iter().map(|v| v.parse().unwrap()).collect();
        assert!((icc(&cases) - x[1]).abs() < 1e-9, "{line}: icc");
        let (p, lo, hi, deff) = clustered_wilson(&cases, x[0]).unwrap();
        assert!((deff - x[2]).abs() < 1e-9, "{line}: deff {deff}");
        assert!((p - x[3]).abs() < 1e-12);
        assert!((lo - x[4]).abs() < 1e-9, "{line}: low {lo}");
        assert!((hi - x[5]).abs() < 1e-9, "{line}: high {hi}");
        checked += 1;
    }
    assert_eq!(checked, 10);
}
