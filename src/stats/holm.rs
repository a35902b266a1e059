//! Intervals that agree with Holm's verdicts (docs/statistics.md, "Intervals that agree with Holm").
//!
//! Holm rejects comparison i at α when its adjusted p-value p̃ᵢ < α. Since p̃ᵢ ≥ pᵢ, that is
//! the same as pᵢ < αᵢ with αᵢ = α·pᵢ/p̃ᵢ. An interval that inverts the same test at level
//! 1 − αᵢ excludes 0 exactly when pᵢ < αᵢ ([`crate::stats::permutation::sign_flip_interval`]), so
//! reporting each comparison's interval at 1 − αᵢ makes "the interval excludes 0" and "Holm
//! says better/worse" the same statement. αᵢ lies between α/m (the smallest p-value, Holm's
//! Bonferroni step) and α (the last step), so each interval is at least the plain
//! 1 − α interval (per-comparison coverage ≥ 1 − α) and at most the Bonferroni one.

pub use crate::stats::paired::holm;
use crate::stats::permutation::{Interval, sign_flip_interval, sign_flip_test};

/// The confidence level 1 − α·p_raw/p_holm at which a test-inverted interval excludes 0
/// exactly when Holm rejects (p_holm < α). Edge cases: p_holm = 0 (then p_raw = 0) gives
/// 1 − α/comparisons; the level is nudged by a relative 1e-9 where needed so that rounding
/// in 1 − level can never flip the comparison with p_raw. `None` for p-values outside
/// [0, 1], p_raw > p_holm, α outside (0, 1) or no comparisons.
pub fn holm_level(alpha: f64, p_raw: f64, p_holm: f64, comparisons: usize) -> Option<f64> {
    let unit = |p: f64| (0.0..=1.0).contains(&p);
    let valid = alpha > 0.0 && alpha < 1.0 && unit(p_raw) && unit(p_holm) && p_raw <= p_holm;
    if !valid || comparisons == 0 {
        return None;
    }
    let level = if p_holm < alpha {
        // Rejected: the interval must exclude 0, so p_raw < α'.
        if p_holm == 0.0 {
            alpha / comparisons as f64
        } else {
            (alpha * p_raw / p_holm).max(p_raw * (1.0 + 1e-9))
        }
    } else {
        // Not rejected: p_raw ≥ α' keeps 0 inside.
        (alpha * p_raw / p_holm).min(p_raw * (1.0 - 1e-9))
    };
    Some(1.0 - level)
}

/// One comparison's test, Holm verdict and Holm-consistent interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HolmComparison {
    pub p_value: f64,
    pub p_holm: f64,
    /// Holm rejects "no difference" at α.
    pub rejected: bool,
    /// The confidence level of `interval` (between 1 − α and 1 − α/m).
    pub level: f64,
    pub interval: Interval,
}

/// Sign-flip tests of several variants against the baseline (one slice of per-case
/// differences each), Holm's adjustment at `alpha`, and each interval at its
/// [`holm_level`]. `None` for a comparison with no cases; those are left out of Holm's m.
pub fn holm_comparisons(comparisons: &[&[f64]], alpha: f64) -> Vec<Option<HolmComparison>> {
    let tests: Vec<Option<f64>> = comparisons
        .iter()
        .map(|d| sign_flip_test(d).map(|t| t.p_value))
        .collect();
    let tested: Vec<f64> = tests.iter().flatten().copied().collect();
    let m = tested.len();
    let mut adjusted = holm(&tested).into_iter();
    tests
        .iter()
        .zip(comparisons)
        .map(|(p, d)| {
            let p = (*p)?;
            let p_holm = adjusted.next()?;
            let level = holm_level(alpha, p, p_holm, m)?;
            let interval = sign_flip_interval(d, level)?;
            Some(HolmComparison {
                p_value: p,
                p_holm,
                rejected: p_holm < alpha,
                level,
                interval,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_sit_between_plain_and_bonferroni() {
        let ps = [0.01, 0.04, 0.03];
        let adj = holm(&ps);
        for (p, a) in ps.iter().zip(&adj) {
            let level = holm_level(0.05, *p, *a, 3).unwrap();
            assert!(
                (0.95 - 1e-12..=1.0 - 0.05 / 3.0 + 1e-12).contains(&level),
                "{level}"
            );
            // The rule it encodes: p < 1 − level ⇔ Holm rejects.
            assert_eq!(*p < 1.0 - level, *a < 0.05, "{p} {a} {level}");
        }
        assert_eq!(holm_level(0.05, 0.0, 0.0, 4), Some(1.0 - 0.0125));
        assert_eq!(holm_level(0.05, 1.0, 1.0, 2), Some(0.95));
        assert_eq!(holm_level(0.05, 0.2, 0.1, 2), None);
        assert_eq!(holm_level(0.0, 0.2, 0.3, 2), None);
    }

    #[test]
    fn boundary_p_values_do_not_flip() {
        // p_holm exactly α: not rejected, the interval must keep 0.
        let level = holm_level(0.05, 0.025, 0.05, 2).unwrap();
        assert!(0.025 >= 1.0 - level);
        // Just under α: rejected.
        let level = holm_level(0.05, 0.0249999, 0.0499998, 2).unwrap();
        assert!(0.0249999 < 1.0 - level);
    }

    #[test]
    fn intervals_exclude_zero_exactly_when_holm_rejects() {
        let mk = |b: usize, c: usize, t: usize| {
            let mut d = vec![1.0; b];
            d.extend(vec![-1.0; c]);
            d.extend(vec![0.0; t]);
            d
        };
        let (a, b, c) = (mk(14, 3, 47), mk(9, 2, 53), mk(6, 5, 53));
        let out = holm_comparisons(&[&a, &b, &c, &[]], 0.05);
        assert!(out[3].is_none());
        for r in out.iter().flatten() {
            let excludes = r.interval.low > 0.0 || r.interval.high < 0.0;
            assert_eq!(excludes, r.rejected, "{r:?}");
        }
        assert!(out[0].unwrap().rejected);
    }
}
