//! Statistics: Wilson intervals, percentiles, the paired comparison and clustering; the
//! sign-flip test and its interval, Holm-consistent levels, scored runs, prediction-powered
//! inference, exact power, and sequential tests. docs/dev/statistics.md explains each in words;
//! every figure is checked against scipy, statsmodels, ppi-python or a seeded simulation
//! committed with its script (tests/fixtures/).
//!
//! Invariant: arithmetic on scores; knows no bench, request or file, and depends on no
//! other crate of the workspace (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod best;
pub mod betting;
pub(crate) mod bounded;
pub mod cluster;
pub mod holm;
pub mod paired;
pub mod passk;
pub mod permutation;
pub mod power;
pub mod ppi;
pub mod scores;
pub mod sequential;

use statrs::distribution::{ContinuousCDF, Normal};

/// The two-sided critical value of the standard normal for a confidence level.
pub fn z_for(confidence: f64) -> f64 {
    let normal = Normal::standard();
    normal.inverse_cdf(1.0 - (1.0 - confidence) / 2.0)
}

/// Wilson score interval for `correct` of `n`, as statsmodels'
/// `proportion_confint(count, nobs, alpha=1-confidence, method="wilson")`. `None` when n = 0.
pub fn wilson(correct: u64, n: u64, confidence: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    Some(wilson_n(correct as f64 / n as f64, n as f64, confidence))
}

/// Wilson's interval for a proportion `p` over a (possibly effective, fractional) size `n`.
pub(crate) fn wilson_n(p: f64, n: f64, confidence: f64) -> (f64, f64) {
    wilson_c(p, n, z_for(confidence))
}

/// Wilson's interval for `p` over an effective size `n` with the critical value `z` given
/// (a t quantile where the variance is estimated from few units).
pub(crate) fn wilson_c(p: f64, n: f64, z: f64) -> (f64, f64) {
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((center - half).max(0.0), (center + half).min(1.0))
}

/// The p-th quantile (0–100) by linear interpolation between order statistics, as numpy's
/// default `percentile(..., method="linear")`. `sorted` must be ascending.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&xs, 50.0), Some(2.5));
        assert_eq!(percentile(&xs, 0.0), Some(1.0));
        assert_eq!(percentile(&xs, 100.0), Some(4.0));
        assert!((percentile(&xs, 90.0).unwrap() - 3.7).abs() < 1e-12);
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
    }

    #[test]
    fn wilson_has_no_interval_without_data() {
        assert_eq!(wilson(0, 0, 0.95), None);
        let (lo, hi) = wilson(0, 10, 0.95).unwrap();
        assert!(lo.abs() < 1e-15 && hi > 0.2);
    }
}
