//! What scores in [0, 1] allow a mean's interval: the spread an unseen outcome could add and
//! the effective number of cases (docs/dev/statistics.md §3). Below both the mean scores of
//! [`crate::scores`] and the clustered ones of [`crate::cluster`], which share it.

use statrs::distribution::{ContinuousCDF, Gamma, StudentsT};

/// The two-sided t critical value for `confidence` with `df` degrees of freedom.
pub(super) fn t_critical(confidence: f64, df: f64) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
}

/// The spread an outcome the cases have not shown could add, as a sum over cases:
/// K = z²·d², d = max(m, 1 − m) the distance from the mean to the far end of [0, 1]. n cases
/// can all miss an outcome of probability up to about z²/n (Wilson's upper bound for 0 of n);
/// one at the far end adds about d²·z²/n to a case's variance, z²·d² to the sum of squares.
/// Without it, cases that all scored 0.9 (a pass scored 0.9, the fails not drawn) gave an
/// interval a few points wide around 0.9 and covered 46–92% (tests/fixtures/
/// bounded_coverage.py); the fixed floor it replaces (0.05, "one more case 0.22 from the
/// mean") could not see that far.
pub(super) fn unseen_spread(mean: f64, z: f64) -> f64 {
    let d = mean.max(1.0 - mean);
    z * z * d * d
}

/// (n, mean clamped to [0, 1], Σ (x − m)², Σ x(1 − x)) of scores in [0, 1]; `None` when
/// empty or when a score is not finite or outside [0, 1].
pub(crate) fn parts(values: &[f64]) -> Option<(usize, f64, f64, f64)> {
    if values.is_empty() || values.iter().any(|v| !(0.0..=1.0).contains(v)) {
        return None;
    }
    let n = values.len();
    let m = (values.iter().sum::<f64>() / n as f64).clamp(0.0, 1.0);
    let between = values.iter().map(|x| (x - m).powi(2)).sum::<f64>();
    let within = values.iter().map(|x| x * (1.0 - x)).sum::<f64>();
    Some((n, m, between, within))
}

/// The effective size and critical value of [`crate::scores::mean_score`]'s interval for these case means:
/// (mean, n/φ, c). `None` as [`crate::scores::mean_score`]'s interval is.
pub(super) fn effective_cases(case_means: &[f64], confidence: f64) -> Option<(f64, f64, f64)> {
    let (n, m, between, within) = parts(case_means)?;
    if n < 2 || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let z = crate::z_for(confidence);
    let floor = unseen_spread(m, z);
    let phi = (between + floor) / (between + within + floor);
    let t = t_critical(confidence, (n - 1) as f64)?;
    let c = (z * z + (t * t - z * z) * (1.0 - phi)).sqrt();
    Some((m, n as f64 / phi, c))
}

/// Outcomes at one end of [0, 1] (m·n_eff towards 0, (1 − m)·n_eff towards 1) up to which
/// [`rare_widened`] replaces Wilson's bound on that side.
const RARE: f64 = 5.0;

/// Wilson's interval `(low, high)` at mean `m` over `n_eff`, with a bound that rests on a
/// handful of outcomes at its end of [0, 1] widened to the exact Poisson bound for that many,
/// x = m·n_eff ≤ 5: low = min(low, G⁻¹ₓ(α/2)/n_eff), G the Gamma(x, 1) distribution (½χ²₂ₓ, for
/// a fractional count), and high likewise from 1. Wilson's bound is too tight there: one
/// case of 20 scoring 0.9 gave [0.75%, 22.7%], which covered 85.2% of the time (Brown, Cai &
/// DasGupta 2001, "Interval estimation for a binomial proportion", §4.1.1, replace it for
/// x ≤ 2–3; scores and repeats need 5 at 300 cases: tests/fixtures/bounded_coverage.py,
/// part C). Below x = 0.1 the Poisson bound is under 10⁻¹⁶·n_eff⁻¹: 0.
pub(crate) fn rare_widened(
    m: f64,
    n_eff: f64,
    confidence: f64,
    interval: (f64, f64),
) -> (f64, f64) {
    let (low, high) = interval;
    if !(n_eff.is_finite() && n_eff > 0.0 && confidence > 0.0 && confidence < 1.0) {
        return interval;
    }
    let alpha = 1.0 - confidence;
    let poisson = |x: f64| -> Option<f64> {
        if !(x > 0.0 && x <= RARE) {
            return None;
        }
        if x < 0.1 {
            return Some(0.0);
        }
        Some(Gamma::new(x, 1.0).ok()?.inverse_cdf(alpha / 2.0) / n_eff)
    };
    let low = poisson(m * n_eff).map_or(low, |b| low.min(b));
    let high = poisson((1.0 - m) * n_eff).map_or(high, |b| high.max(1.0 - b));
    (low.max(0.0), high.min(1.0))
}
