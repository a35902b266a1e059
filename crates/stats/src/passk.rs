//! pass@k and pass^k over cases answered `k` times (`repeats: k`; docs/dev/statistics.md,
//! "pass@k and pass^k").
//!
//! For a case answered n times, c of them right: pass@k, the chance that at least one of k
//! answers drawn without replacement is right, by the unbiased estimator of Chen et al.
//! (2021), 1 − C(n − c, k) / C(n, k); pass^k, the chance that all k are right, by
//! C(c, k) / C(n, k) (Yao et al. 2024, τ-bench). With n = k they are whether any answer was
//! right and whether every one was. A variant's figure is the mean over its cases, with
//! [`mean_score`]'s interval over cases (the case is the unit). Checked against
//! tests/fixtures/passk.py.

use serde::{Deserialize, Serialize};

use super::scores::mean_score;

/// 1 − C(n − c, k) / C(n, k), as the product Chen et al. give (no large binomials); `None`
/// when k is 0 or more than n, or c more than n.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let none: f64 = (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product();
    Some(1.0 - none)
}

/// C(c, k) / C(n, k): all of k answers drawn without replacement right; `None` as
/// [`pass_at_k`].
pub fn pass_all_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if c < k {
        return Some(0.0);
    }
    Some((0..k).map(|i| (c - i) as f64 / (n - i) as f64).product())
}

/// A variant's pass@k and pass^k over its cases, each with its interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassK {
    /// The k: the run's repeats.
    pub k: u64,
    /// Cases answered at least k times (a case some of whose repeats failed is left out).
    pub cases: u64,
    /// The share of cases with at least one right answer in k.
    pub pass_at_k: f64,
    pub pass_at_k_ci_low: Option<f64>,
    pub pass_at_k_ci_high: Option<f64>,
    /// The share of cases answered right all k times.
    pub pass_all_k: f64,
    pub pass_all_k_ci_low: Option<f64>,
    pub pass_all_k_ci_high: Option<f64>,
}

impl PassK {
    /// From each case's (answers graded, answers right); `None` below k = 2 or with no case
    /// answered k times.
    pub fn of(cases: &[(u64, u64)], k: u64, confidence: f64) -> Option<PassK> {
        if k < 2 {
            return None;
        }
        let at: Vec<f64> = cases
            .iter()
            .filter_map(|&(n, c)| pass_at_k(n, c, k))
            .collect();
        let all: Vec<f64> = cases
            .iter()
            .filter_map(|&(n, c)| pass_all_k(n, c, k))
            .collect();
        let at = mean_score(&at, confidence)?;
        let all = mean_score(&all, confidence)?;
        Some(PassK {
            k,
            cases: at.cases as u64,
            pass_at_k: at.mean,
            pass_at_k_ci_low: at.interval.map(|i| i.0),
            pass_at_k_ci_high: at.interval.map(|i| i.1),
            pass_all_k: all.mean,
            pass_all_k_ci_low: all.interval.map(|i| i.0),
            pass_all_k_ci_high: all.interval.map(|i| i.1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tests/fixtures/passk.csv: n, c, k, pass@k, pass^k from tests/fixtures/passk.py
    /// (exact binomials in Python's integers).
    #[test]
    fn the_estimators_agree_with_the_reference() {
        let text = include_str!("../../../tests/fixtures/passk.csv");
        let mut rows = 0;
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            let (n, c, k): (u64, u64, u64) = (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            );
            let (at, all): (f64, f64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
            assert!((pass_at_k(n, c, k).unwrap() - at).abs() < 1e-12, "{line}");
            assert!((pass_all_k(n, c, k).unwrap() - all).abs() < 1e-12, "{line}");
            rows += 1;
        }
        assert!(rows > 50);
        assert_eq!(pass_at_k(3, 0, 4), None);
        assert_eq!(pass_all_k(3, 4, 2), None);
    }

    #[test]
    fn with_n_equal_k_they_are_any_right_and_all_right() {
        let cases = [(3, 0), (3, 1), (3, 3), (3, 3), (2, 2)];
        let p = PassK::of(&cases, 3, 0.95).unwrap();
        assert_eq!(p.cases, 4, "a case answered twice is left out");
        assert!((p.pass_at_k - 0.75).abs() < 1e-12);
        assert!((p.pass_all_k - 0.5).abs() < 1e-12);
        let (lo, hi) = (p.pass_all_k_ci_low.unwrap(), p.pass_all_k_ci_high.unwrap());
        assert!(lo < 0.5 && hi > 0.5);
        assert_eq!(PassK::of(&cases, 1, 0.95), None);
    }
}
