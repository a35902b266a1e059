//! Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023,
//! "Prediction-powered inference", Science 382; power tuning: Angelopoulos, Duchi & Zrnic
//! 2023, "PPI++", arXiv:2311.01453) for a mean score when a judge scores every case and
//! people label a few: the judge's mean over the unlabelled cases, corrected by the judge's
//! average error on the labelled ones.
//!
//!   θ̂ = λ·mean(Ŷᵤ) + mean(Y − λŶ),   se² = Var(λŶᵤ)/N + Var(Y − λŶ)/n   (variances /N, /n)
//!
//! and the interval θ̂ ± z·se, exactly as `ppi_py.ppi_mean_pointestimate` / `ppi_mean_ci`
//! (ppi-python 0.2.3). λ = 1 is classic PPI; ppi_py's default (`lam=None`) tunes
//! λ = Cov(Y, Ŷ)/((1 + n/N)·Var(Ŷ ∪ Ŷᵤ)) clipped to [0, 1] (covariance /n, variance /(n+N−1)),
//! which is never much worse than labels alone when the judge is poor; see docs/dev/statistics.md for the
//! choice. Reports show [`corrected_mean`] and [`corrected_difference`]: the same estimate with
//! the rectifier's spread floored, valid at few labels and near 0 and 1 (§4). Also Cohen's κ
//! and raw agreement (with Wilson's interval) between two 0/1 raters.

use statrs::distribution::{ContinuousCDF, Normal};

/// How the judge's scores are weighted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuning {
    /// λ = 1: classic prediction-powered inference.
    Classic,
    /// λ estimated to minimise the variance, as ppi_py's default (PPI++).
    PowerTuned,
}

/// A prediction-powered mean with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PpiMean {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// The weight λ given to the judge (1 for `Classic`).
    pub lambda: f64,
    pub(crate) labelled: usize,
    pub(crate) unlabelled: usize,
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Population variance (divisor n), as numpy's default `std(...)**2`.
fn var0(x: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = x.clone().count() as f64;
    let m = x.clone().sum::<f64>() / n;
    x.map(|v| (v - m).powi(2)).sum::<f64>() / n
}

/// ppi_py's power-tuning λ (`_calc_lam_glm` for the mean, clipped to [0, 1]).
fn tuned_lambda(labels: &[f64], judged: &[f64], unlabelled: &[f64]) -> f64 {
    let n = labels.len() as f64;
    let big_n = unlabelled.len() as f64;
    let (my, mh) = (mean(labels), mean(judged));
    let cov = labels
        .iter()
        .zip(judged)
        .map(|(y, h)| (y - my) * (h - mh))
        .sum::<f64>()
        / n;
    let all = judged.iter().chain(unlabelled).copied();
    let count = n + big_n;
    let m_all = all.clone().sum::<f64>() / count;
    let var_all = all.map(|v| (v - m_all).powi(2)).sum::<f64>() / (count - 1.0);
    if var_all <= 0.0 {
        return 0.0;
    }
    // num = 2·cov, denom = 2·(1 + n/N)·var, as in ppi_py.
    (cov / ((1.0 + n / big_n) * var_all)).clamp(0.0, 1.0)
}

/// The prediction-powered estimate of the mean of Y and its two-sided interval at
/// `confidence`, matching `ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=1-confidence,
/// lam=1 | None)` and `ppi_mean_pointestimate` to 1e-9 (tests/fixtures/ppi.csv). `labels[i]` and
/// `judged[i]` are the person's and the judge's scores of labelled case i; `unlabelled` the
/// judge's scores of every other case. `None` with fewer than 2 labelled cases, no
/// unlabelled case, unequal lengths or a non-finite score.
pub fn ppi_mean(
    labels: &[f64],
    judged: &[f64],
    unlabelled: &[f64],
    confidence: f64,
    tuning: Tuning,
) -> Option<PpiMean> {
    let finite = |x: &[f64]| x.iter().all(|v| v.is_finite());
    if labels.len() < 2
        || labels.len() != judged.len()
        || unlabelled.is_empty()
        || !(finite(labels) && finite(judged) && finite(unlabelled))
        || !(confidence > 0.0 && confidence < 1.0)
    {
        return None;
    }
    let lambda = match tuning {
        Tuning::Classic => 1.0,
        Tuning::PowerTuned => tuned_lambda(labels, judged, unlabelled),
    };
    let (n, big_n) = (labels.len() as f64, unlabelled.len() as f64);
    let rectifier = labels.iter().zip(judged).map(|(y, h)| y - lambda * h);
    let estimate = lambda * mean(unlabelled) + rectifier.clone().sum::<f64>() / n;
    let imputed_var = var0(unlabelled.iter().map(|h| lambda * h)) / big_n;
    let rectifier_var = var0(rectifier) / n;
    let se = (imputed_var + rectifier_var).sqrt();
    let z = Normal::standard().inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    Some(PpiMean {
        estimate,
        low: estimate - z * se,
        high: estimate + z * se,
        lambda,
        labelled: labels.len(),
        unlabelled: unlabelled.len(),
    })
}

/// The interval promptgauge shows for a mean score corrected by people's labels: the
/// power-tuned estimate of [`ppi_mean`] with the rectifier's spread floored as the scored
/// intervals' is (docs/dev/statistics.md §4). ppi_py's interval estimates the spread of the
/// judge's error from the labels alone, so labels that show none (ten labels, all agreeing)
/// gave a zero width, and 10–50 labels covered 4–31% near accuracies of 97–99%
/// (tests/fixtures/ppi_small.py). An outcome the n labels have not shown (a disagreement
/// of the judge with people) may have a probability up to about z²/n; one at the far end of
/// the rectifier's range, d from its mean, adds z²·d² to its sum of squares:
///
///   se² = Var(λŶᵤ)/N + (Σ (rᵢ − r̄)² + z²·d²)/n²,   rᵢ = Yᵢ − λŶᵢ,   θ̂ ± z·se clipped to [0, 1]
///
/// With λ = 0 (a judge that tells nothing, or one with no spread to estimate λ from) the
/// rectifier is the labels themselves and this is the labels' own floored interval.
/// `None` as [`ppi_mean`], and for a score outside [0, 1].
pub fn corrected_mean(
    labels: &[f64],
    judged: &[f64],
    unlabelled: &[f64],
    confidence: f64,
) -> Option<PpiMean> {
    floored(labels, judged, unlabelled, confidence, (0.0, 1.0)).map(|(m, _)| m)
}

/// [`corrected_mean`]'s rule for scores in `range` (lowest, highest), with its standard
/// error.
fn floored(
    labels: &[f64],
    judged: &[f64],
    unlabelled: &[f64],
    confidence: f64,
    range: (f64, f64),
) -> Option<(PpiMean, f64)> {
    let (lo, hi) = range;
    let inside = |x: &[f64]| x.iter().all(|v| (lo..=hi).contains(v));
    if !(inside(labels) && inside(judged) && inside(unlabelled)) {
        return None;
    }
    let tuned = ppi_mean(labels, judged, unlabelled, confidence, Tuning::PowerTuned)?;
    let lambda = tuned.lambda;
    let (n, big_n) = (labels.len() as f64, unlabelled.len() as f64);
    let rectifier: Vec<f64> = labels
        .iter()
        .zip(judged)
        .map(|(y, h)| y - lambda * h)
        .collect();
    let r_mean = mean(&rectifier);
    let squares = rectifier.iter().map(|r| (r - r_mean).powi(2)).sum::<f64>();
    // Y − λŶ lies in [lo − λ·hi, hi − λ·lo]: the unseen outcome sits at its far end.
    let d = (r_mean - (lo - lambda * hi)).max((hi - lambda * lo) - r_mean);
    let z = Normal::standard().inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    let imputed_var = var0(unlabelled.iter().map(|h| lambda * h)) / big_n;
    let se = (imputed_var + (squares + z * z * d * d) / (n * n)).sqrt();
    let estimate = tuned.estimate;
    let corrected = PpiMean {
        low: (estimate - z * se).max(lo),
        high: (estimate + z * se).min(hi),
        ..tuned
    };
    Some((corrected, se))
}

/// One arm of a paired PPI comparison: people's and the judge's scores on the labelled
/// cases, and the judge's scores on the unlabelled ones, in the same case order for both
/// arms.
#[derive(Debug, Clone, Copy)]
pub struct Arm<'a> {
    pub labels: &'a [f64],
    pub judged: &'a [f64],
    pub unlabelled: &'a [f64],
}

/// The corrected estimate of the difference `variant − baseline` when both arms are
/// labelled on the same cases: [`corrected_mean`]'s rule on the per-case differences
/// (labels, judge on labelled cases, judge on unlabelled cases), whose range is [−1, 1].
/// Working on differences carries the pairing: the covariance between the arms on a case
/// is inside Var(Y_A − Y_B), so nothing is assumed independent (coverage simulated in
/// tests/fixtures/ppi_sim.txt and ppi_small_sim.txt). Also the standard error behind the
/// interval (before clipping), for the comparison's p-value. `None` when the arms' lengths
/// differ or [`corrected_mean`] would be `None`.
pub fn corrected_difference(
    variant: Arm,
    baseline: Arm,
    confidence: f64,
) -> Option<(PpiMean, f64)> {
    let diff = |a: &[f64], b: &[f64]| -> Option<Vec<f64>> {
        (a.len() == b.len()).then(|| a.iter().zip(b).map(|(x, y)| x - y).collect())
    };
    let labels = diff(variant.labels, baseline.labels)?;
    let judged = diff(variant.judged, baseline.judged)?;
    let unlabelled = diff(variant.unlabelled, baseline.unlabelled)?;
    floored(&labels, &judged, &unlabelled, confidence, (-1.0, 1.0))
}

/// Cohen's κ between two raters' 0/1 verdicts on the same items, as sklearn's
/// `cohen_kappa_score`: (p_o − p_e)/(1 − p_e). `None` for no items, unequal lengths, or
/// when chance agreement is certain (both raters give one same verdict throughout).
pub fn cohen_kappa(a: &[bool], b: &[bool]) -> Option<f64> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let n = a.len() as f64;
    let agree = a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / n;
    let pa = a.iter().filter(|x| **x).count() as f64 / n;
    let pb = b.iter().filter(|x| **x).count() as f64 / n;
    let chance = pa * pb + (1.0 - pa) * (1.0 - pb);
    if chance >= 1.0 {
        return None;
    }
    Some((agree - chance) / (1.0 - chance))
}

/// The share of items on which two raters agree, with Wilson's interval at `confidence`
/// (statsmodels `proportion_confint(method="wilson")`). `None` for no items or unequal
/// lengths.
pub fn agreement(a: &[bool], b: &[bool], confidence: f64) -> Option<(f64, f64, f64)> {
    if a.is_empty() || a.len() != b.len() || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let n = a.len() as f64;
    let p = a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / n;
    let z = Normal::standard().inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some((p, (center - half).max(0.0), (center + half).min(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_perfect_judge_needs_no_correction() {
        let y = [1.0, 0.0, 1.0, 1.0];
        let u = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0];
        let r = ppi_mean(&y, &y, &u, 0.95, Tuning::Classic).unwrap();
        // Rectifier is 0 with no spread: the interval is the judge's alone.
        assert!((r.estimate - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(r.lambda, 1.0);
    }

    #[test]
    fn refuses_what_it_cannot_estimate() {
        assert!(ppi_mean(&[1.0], &[1.0], &[1.0], 0.95, Tuning::Classic).is_none());
        assert!(ppi_mean(&[1.0, 0.0], &[1.0], &[1.0], 0.95, Tuning::Classic).is_none());
        assert!(ppi_mean(&[1.0, 0.0], &[1.0, 0.0], &[], 0.95, Tuning::Classic).is_none());
        assert_eq!(cohen_kappa(&[], &[]), None);
        assert_eq!(cohen_kappa(&[true, true], &[true, true]), None);
        assert_eq!(agreement(&[true], &[true, false], 0.95), None);
    }

    #[test]
    fn the_difference_is_the_corrected_mean_on_per_case_differences() {
        let (ya, yb) = ([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0]);
        let (ha, hb) = ([1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]);
        let (ua, ub) = ([1.0, 0.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0, 0.0]);
        let arm = |labels, judged, unlabelled| Arm {
            labels,
            judged,
            unlabelled,
        };
        let (got, se) = corrected_difference(arm(&ya, &ha, &ua), arm(&yb, &hb, &ub), 0.95).unwrap();
        let d = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>();
        let (dy, dh, du) = (d(&ya, &yb), d(&ha, &hb), d(&ua, &ub));
        let plain = ppi_mean(&dy, &dh, &du, 0.95, Tuning::PowerTuned).unwrap();
        // The same estimate and λ as ppi_py's, a floored spread: wider, within [−1, 1].
        assert_eq!((got.estimate, got.lambda), (plain.estimate, plain.lambda));
        assert!(
            got.low <= plain.low && got.high >= plain.high,
            "{got:?} {plain:?}"
        );
        assert!(got.low >= -1.0 && got.high <= 1.0 && se > 0.0);
        assert!(corrected_difference(arm(&ya, &ha, &ua), arm(&yb, &hb, &ub[..2]), 0.95).is_none());
    }

    #[test]
    fn labels_that_all_agree_leave_the_width_the_labels_allow() {
        // Ten labels, all right, the judge agreeing on each: ppi_py's interval is a point.
        let unlabelled: Vec<f64> = (0..300).map(|i| f64::from(u8::from(i % 3 != 0))).collect();
        let plain = ppi_mean(
            &[1.0; 10],
            &[1.0; 10],
            &unlabelled,
            0.95,
            Tuning::PowerTuned,
        )
        .unwrap();
        assert_eq!((plain.low, plain.high), (1.0, 1.0));
        let c = corrected_mean(&[1.0; 10], &[1.0; 10], &unlabelled, 0.95).unwrap();
        // λ cannot be estimated (no spread in the labels): the labels' own floored interval,
        // 1 − z²/n.
        let z2 = 1.959_963_984_540_054_f64.powi(2);
        assert_eq!((c.estimate, c.lambda, c.high), (1.0, 0.0, 1.0));
        assert!((c.low - (1.0 - z2 / 10.0)).abs() < 1e-9, "{c:?}");
        // Scores outside [0, 1] are refused.
        assert!(corrected_mean(&[1.0, 2.0], &[1.0, 1.0], &[1.0], 0.95).is_none());
    }

    #[test]
    fn kappa_edges() {
        assert_eq!(cohen_kappa(&[true, false], &[true, false]), Some(1.0));
        assert_eq!(cohen_kappa(&[true, false], &[false, true]), Some(-1.0));
    }
}
