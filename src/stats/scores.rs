//! Mean scores for scored runs (scores anywhere in [0, 1]; DESIGN §9 "scored").
//!
//! The case is the unit. Each case's repeats are first averaged into one case mean; the
//! variant's score is the mean of its case means, with a Student t interval on them
//! (n − 1 degrees of freedom). That is the cluster-robust interval with the case as
//! cluster: with equal repeats per case its standard error is exactly statsmodels'
//! `OLS(y, 1).fit(cov_type="cluster")` on the raw samples (checked in tests/fixtures/scores.py),
//! and unlike Kish's design effect it needs no model of the within-case correlation.
//! With unequal repeats it weighs every case equally (the same weighting as the paired
//! comparison, which works on case means too).
//!
//! Paired: the mean of the per-case differences with a paired t interval and p-value
//! (scipy `ttest_rel`), and the sign-flip test and interval of [`crate::stats::permutation`], whose
//! verdict does not lean on normality and is exact McNemar for 0/1 scores.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::stats::permutation::{Interval, SignFlip, sign_flip_interval, sign_flip_test};

/// A mean of case means with its t interval (`None` with fewer than two cases).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanScore {
    pub cases: usize,
    pub mean: f64,
    pub interval: Option<(f64, f64)>,
}

/// (mean, standard error, degrees of freedom) of finite values; `None` when empty.
fn mean_and_se(values: &[f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return Some((mean, f64::NAN, 0.0));
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, (var / n).sqrt(), n - 1.0))
}

/// The two-sided t critical value for `confidence` with `df` degrees of freedom.
fn t_critical(confidence: f64, df: f64) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
}

/// The mean of per-case mean scores with a Student t interval, as scipy's
/// `t.interval(confidence, n - 1, loc=mean, scale=sem)`, clipped to [0, 1]. `None` for no
/// cases or a non-finite score; the interval is `None` with one case.
pub fn mean_score(case_means: &[f64], confidence: f64) -> Option<MeanScore> {
    let (mean, se, df) = mean_and_se(case_means)?;
    let interval = if df < 1.0 || !(confidence > 0.0 && confidence < 1.0) {
        None
    } else {
        let half = t_critical(confidence, df)? * se;
        Some(((mean - half).max(0.0), (mean + half).min(1.0)))
    };
    Some(MeanScore {
        cases: case_means.len(),
        mean,
        interval,
    })
}

/// A variant against the baseline on per-case mean scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedScores {
    pub cases: usize,
    /// Mean of the per-case differences (variant − baseline).
    pub mean: f64,
    /// Paired t interval, clipped to [−1, 1] (`None` with one case).
    pub t_interval: Option<(f64, f64)>,
    /// Paired t-test p-value, two-sided (`None` with one case).
    pub t_p_value: Option<f64>,
    /// The sign-flip test: the p-value to decide with.
    pub sign_flip: SignFlip,
    /// The interval inverting the sign-flip test (agrees with its p-value about 0).
    pub sign_flip_interval: Interval,
}

/// Paired comparison of per-case mean scores, `variant[i]` and `baseline[i]` being the same
/// case: paired t as scipy's `ttest_rel` (with t.interval on the differences), and the
/// sign-flip test and interval. With no spread in the differences the t interval is the
/// point and its p-value 1 (mean 0) or 0. `None` for no cases, unequal lengths or a
/// non-finite score.
pub fn paired_scores(variant: &[f64], baseline: &[f64], confidence: f64) -> Option<PairedScores> {
    if variant.len() != baseline.len() {
        return None;
    }
    let d: Vec<f64> = variant.iter().zip(baseline).map(|(v, b)| v - b).collect();
    let (mean, se, df) = mean_and_se(&d)?;
    let (t_interval, t_p_value) = if df < 1.0 {
        (None, None)
    } else if se == 0.0 {
        (
            Some((mean, mean)),
            Some(if mean == 0.0 { 1.0 } else { 0.0 }),
        )
    } else {
        let half = t_critical(confidence, df)? * se;
        let t = StudentsT::new(0.0, 1.0, df).ok()?;
        let p = (2.0 * t.sf((mean / se).abs())).min(1.0);
        (
            Some(((mean - half).max(-1.0), (mean + half).min(1.0))),
            Some(p),
        )
    };
    Some(PairedScores {
        cases: d.len(),
        mean,
        t_interval,
        t_p_value,
        sign_flip: sign_flip_test(&d)?,
        sign_flip_interval: sign_flip_interval(&d, confidence)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_case_has_a_mean_but_no_interval() {
        let m = mean_score(&[0.4], 0.95).unwrap();
        assert_eq!((m.cases, m.mean, m.interval), (1, 0.4, None));
        assert_eq!(mean_score(&[], 0.95), None);
        assert_eq!(mean_score(&[f64::NAN, 0.2], 0.95), None);
    }

    #[test]
    fn paired_edges() {
        assert_eq!(paired_scores(&[0.5], &[0.5, 0.1], 0.95), None);
        assert_eq!(paired_scores(&[], &[], 0.95), None);
        let p = paired_scores(&[0.5, 0.75], &[0.25, 0.5], 0.95).unwrap();
        assert_eq!(p.t_interval, Some((p.mean, p.mean)));
        assert_eq!(p.t_p_value, Some(0.0));
        // Two cases can never be significant for the sign-flip test: p = 2/4.
        assert!((p.sign_flip.p_value - 0.5).abs() < 1e-12);
    }

    #[test]
    fn repeats_do_not_shrink_the_interval() {
        // The same case means whatever the number of repeats behind them.
        let means = [1.0, 2.0 / 3.0, 0.0, 1.0 / 3.0, 1.0];
        let a = mean_score(&means, 0.95).unwrap();
        let b = mean_score(&means, 0.95).unwrap();
        assert_eq!(a, b);
        let (lo, hi) = a.interval.unwrap();
        assert!(lo < a.mean && a.mean < hi);
    }
}
