//! Paired comparison of a variant with the baseline, case by case (DESIGN §5).

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};
use statrs::function::beta::beta_reg;

use super::{wilson, z_for};

/// The 2×2 table of one variant against the baseline over the cases both graded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Table {
    pub both_right: u64,
    pub only_variant: u64,
    pub only_baseline: u64,
    pub both_wrong: u64,
}

impl Table {
    /// How many cases the table holds.
    pub fn n(&self) -> u64 {
        self.both_right + self.only_variant + self.only_baseline + self.both_wrong
    }

    /// Adds one case.
    pub fn add(&mut self, variant_right: bool, baseline_right: bool) {
        match (variant_right, baseline_right) {
            (true, true) => self.both_right += 1,
            (true, false) => self.only_variant += 1,
            (false, true) => self.only_baseline += 1,
            (false, false) => self.both_wrong += 1,
        }
    }
}

/// Exact McNemar test: two-sided binomial test of the discordant pairs against p = ½, as
/// statsmodels' `mcnemar(table, exact=True)`: `min(1, 2·P(X ≤ min(b, c)))`, X ~ Bin(b + c, ½).
pub fn mcnemar_exact(only_variant: u64, only_baseline: u64) -> f64 {
    let n = only_variant + only_baseline;
    let k = only_variant.min(only_baseline);
    if n == 0 || 2 * k == n {
        return 1.0;
    }
    // P(X ≤ k) = I_{1/2}(n − k, k + 1), the regularised incomplete beta.
    let tail = beta_reg((n - k) as f64, (k + 1) as f64, 0.5);
    (2.0 * tail).min(1.0)
}

/// Holm's step-down adjustment, as statsmodels' `multipletests(p, method="holm")`.
pub fn holm(pvalues: &[f64]) -> Vec<f64> {
    let m = pvalues.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| pvalues[a].total_cmp(&pvalues[b]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * pvalues[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// The accuracy difference (variant − baseline) with Newcombe's hybrid score interval for
/// paired proportions (Newcombe 1998, method 10; φ corrected as in Fagerland, Lydersen &
/// Laake 2014). `None` with no pairs.
pub fn newcombe_paired(t: &Table, confidence: f64) -> Option<(f64, f64, f64)> {
    let n = t.n();
    if n == 0 {
        return None;
    }
    let (a, b, c, d) = (
        t.both_right as f64,
        t.only_variant as f64,
        t.only_baseline as f64,
        t.both_wrong as f64,
    );
    let nf = n as f64;
    let variant_right = t.both_right + t.only_variant;
    let baseline_right = t.both_right + t.only_baseline;
    let (p1, p2) = (variant_right as f64 / nf, baseline_right as f64 / nf);
    let (l1, u1) = wilson(variant_right, n, confidence)?;
    let (l2, u2) = wilson(baseline_right, n, confidence)?;
    let margins = [a + b, c + d, a + c, b + d];
    let phi = if margins.contains(&0.0) {
        0.0
    } else {
        let det = a * d - b * c;
        let den = margins.iter().product::<f64>().sqrt();
        if det > nf / 2.0 {
            (det - nf / 2.0) / den
        } else if det >= 0.0 {
            0.0
        } else {
            det / den
        }
    };
    let estimate = p1 - p2;
    let below = (p1 - l1).powi(2) + (u2 - p2).powi(2) - 2.0 * phi * (p1 - l1) * (u2 - p2);
    let above = (p2 - l2).powi(2) + (u1 - p1).powi(2) - 2.0 * phi * (p2 - l2) * (u1 - p1);
    Some((
        estimate,
        (estimate - below.max(0.0).sqrt()).max(-1.0),
        (estimate + above.max(0.0).sqrt()).min(1.0),
    ))
}

/// Power of the McNemar test (normal approximation of Connor 1987) to detect a difference
/// `delta` when a share `discordant` of cases disagree, with `n` cases.
pub(crate) fn mcnemar_power(n: f64, delta: f64, discordant: f64, confidence: f64) -> f64 {
    let delta = delta.abs();
    if discordant <= delta * delta || discordant <= 0.0 {
        return 1.0;
    }
    let z = z_for(confidence);
    let normal = Normal::standard();
    normal.cdf((n.sqrt() * delta - z * discordant.sqrt()) / (discordant - delta * delta).sqrt())
}

/// The share of discordant cases when a baseline right with probability `p` and a variant
/// right with probability `p + delta` err independently: the conservative (largest) case.
fn independent_discordance(p: f64, delta: f64) -> f64 {
    let q = p + delta;
    p * (1.0 - q) + (1.0 - p) * q
}

/// The smallest accuracy difference (as a share, e.g. 0.17) that a paired comparison over
/// `n` cases would detect with the given power, when the baseline's accuracy is `p`.
/// Assumes the two variants err independently, so real, correlated variants do a little
/// better. Looks in the direction with more room (up from p ≤ ½, down from p > ½).
pub(crate) fn detectable_difference(n: u64, p: f64, confidence: f64, power: f64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let p = p.clamp(0.0, 1.0);
    let sign = if p <= 0.5 { 1.0 } else { -1.0 };
    let room = if p <= 0.5 { 1.0 - p } else { p };
    let powered = |delta: f64| {
        let discordant = independent_discordance(p, sign * delta);
        mcnemar_power(n as f64, delta, discordant, confidence) >= power
    };
    if !powered(room) {
        return None;
    }
    let (mut lo, mut hi) = (0.0, room);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if powered(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Cases needed to detect a difference `delta` with the given power when a share
/// `discordant` of cases disagree (Connor 1987). `None` when there is no difference to find.
pub fn cases_needed(delta: f64, discordant: f64, confidence: f64, power: f64) -> Option<u64> {
    let delta = delta.abs();
    if delta == 0.0 || discordant <= delta * delta {
        return None;
    }
    let z_a = z_for(confidence);
    let z_b = Normal::standard().inverse_cdf(power);
    let n = (z_a * discordant.sqrt() + z_b * (discordant - delta * delta).sqrt()).powi(2)
        / (delta * delta);
    Some(n.ceil() as u64)
}

/// With repeats, the case is the unit: the mean of the per-case differences with a
/// t interval, and a paired t-test. Returns (estimate, low, high, p-value).
pub(crate) fn paired_means(differences: &[f64], confidence: f64) -> Option<(f64, f64, f64, f64)> {
    let n = differences.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let mean = differences.iter().sum::<f64>() / nf;
    let var = differences.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    let se = (var / nf).sqrt();
    if se == 0.0 {
        let p = if mean == 0.0 { 1.0 } else { 0.0 };
        return Some((mean, mean, mean, p));
    }
    let t = StudentsT::new(0.0, 1.0, nf - 1.0).ok()?;
    let crit = t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    let p = 2.0 * (1.0 - t.cdf((mean / se).abs()));
    Some((
        mean,
        (mean - crit * se).max(-1.0),
        (mean + crit * se).min(1.0),
        p.min(1.0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcnemar_edges() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        // 0 vs 5: 2 · (1/2)^5
        assert!((mcnemar_exact(0, 5) - 0.0625).abs() < 1e-15);
    }

    #[test]
    fn detectable_difference_shrinks_with_more_cases() {
        let d20 = detectable_difference(20, 0.5, 0.95, 0.8).unwrap();
        let d64 = detectable_difference(64, 0.5, 0.95, 0.8).unwrap();
        let d1000 = detectable_difference(1000, 0.5, 0.95, 0.8).unwrap();
        assert!(d20 > 0.35 && d20 < 0.5, "{d20}");
        assert!(d20 > d64 && d64 > d1000, "{d64} {d1000}");
        // At the detectable difference the power is 80%, by construction.
        let psi = independent_discordance(0.5, d64);
        assert!((mcnemar_power(64.0, d64, psi, 0.95) - 0.8).abs() < 1e-6);
        // Round trip with the sample-size formula.
        let n = cases_needed(d64, psi, 0.95, 0.8).unwrap();
        assert!((63..=65).contains(&n), "{n}");
    }

    #[test]
    fn paired_means_of_constant_differences() {
        let (m, lo, hi, p) = paired_means(&[0.5, 0.5, 0.5], 0.95).unwrap();
        assert_eq!((m, lo, hi, p), (0.5, 0.5, 0.5, 0.0));
        assert!(paired_means(&[0.1], 0.95).is_none());
    }
}
