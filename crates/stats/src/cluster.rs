//! Repeats: several samples per case are not independent. The case is the unit; Wilson's
//! interval uses the effective sample size n / deff, with Kish's design effect
//! deff = 1 + (m̄ − 1)·ρ and ρ the intra-class correlation of the 0/1 outcomes (one-way
//! ANOVA estimator). With one sample per case deff = 1 and this is plain Wilson. When no
//! case's samples disagree (every case all right or all wrong) ρ is taken as 1: the repeats
//! add no information, so the interval is the one the cases alone give. The effective size
//! is never above the case means' own ([`clustered_wilson`]).

use super::wilson_n;

/// One case's samples: the sum of their scores (for 0/1 scores: how many were correct),
/// the sum of their squares, and how many were graded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CaseScore {
    pub score: f64,
    pub squares: f64,
    pub graded: u64,
}

impl CaseScore {
    /// Its samples right (of 0/1 scores: their sum).
    pub fn correct(&self) -> u64 {
        self.score.round() as u64
    }

    /// `correct` of `graded` samples scored 0 or 1.
    pub fn binary(correct: u64, graded: u64) -> CaseScore {
        CaseScore {
            score: correct as f64,
            squares: correct as f64,
            graded,
        }
    }

    /// Adds one sample's score.
    pub fn add(&mut self, value: f64) {
        self.score += value;
        self.squares += value * value;
        self.graded += 1;
    }

    /// Adds another's samples (a group's cases pooled into one unit, repeats merged).
    pub fn pool(&mut self, other: CaseScore) {
        self.score += other.score;
        self.squares += other.squares;
        self.graded += other.graded;
    }

    /// The mean score over the samples; `None` without any.
    pub fn mean(&self) -> Option<f64> {
        (self.graded > 0).then(|| self.score / self.graded as f64)
    }
}

/// The ANOVA estimate of the intra-class correlation, clipped to [0, 1]; 0 when undefined.
pub fn icc(cases: &[CaseScore]) -> f64 {
    let cases: Vec<&CaseScore> = cases.iter().filter(|c| c.graded > 0).collect();
    let k = cases.len() as f64;
    let n: f64 = cases.iter().map(|c| c.graded as f64).sum();
    if k < 2.0 || n <= k {
        return 0.0;
    }
    let mean = cases.iter().map(|c| c.score).sum::<f64>() / n;
    // Between cases: Σ mᵢ (ȳᵢ − ȳ)²; within: Σ (yᵢⱼ²) − (Σ yᵢⱼ)²/mᵢ, which for 0/1
    // outcomes is mᵢ ȳᵢ (1 − ȳᵢ).
    let ssb: f64 = cases
        .iter()
        .map(|c| {
            let m = c.graded as f64;
            m * (c.score / m - mean).powi(2)
        })
        .sum();
    let ssw: f64 = cases
        .iter()
        .map(|c| {
            let (m, y) = (c.graded as f64, c.score);
            c.squares - y * y / m
        })
        .sum();
    let msb = ssb / (k - 1.0);
    let msw = ssw / (n - k);
    // No case's samples disagree: repeats carry nothing new, whatever the cases do.
    if msw == 0.0 {
        return 1.0;
    }
    let m0 = (n - cases.iter().map(|c| (c.graded as f64).powi(2)).sum::<f64>() / n) / (k - 1.0);
    let denom = msb + (m0 - 1.0) * msw;
    if denom <= 0.0 {
        return if msb > 0.0 { 1.0 } else { 0.0 };
    }
    ((msb - msw) / denom).clamp(0.0, 1.0)
}

/// Kish's design effect for these clusters.
pub fn design_effect(cases: &[CaseScore]) -> f64 {
    let graded: Vec<&CaseScore> = cases.iter().filter(|c| c.graded > 0).collect();
    if graded.is_empty() {
        return 1.0;
    }
    let n: f64 = graded.iter().map(|c| c.graded as f64).sum();
    let mean_size = n / graded.len() as f64;
    1.0 + (mean_size - 1.0) * icc(cases)
}

/// Accuracy over all samples with a Wilson interval on the effective sample size.
/// Returns (accuracy, low, high, design effect N/n_eff behind the interval).
///
/// With one sample per case: plain Wilson. With repeats, n_eff is Kish's N/deff, never above
/// the effective number of cases n/φ that the case means' own interval uses
/// ([`crate::scores::mean_score`]), with t at n − 1 degrees of freedom (n cases) and
/// a bound resting on at most five outcomes at its end widened to the Poisson bound
/// ([`crate::bounded::rare_widened`]). Kish's ρ̂ is noisy at few cases, and a sample
/// with no hard case (every case near-perfect) looks like independent repeats: Kish with z
/// covered 91.2% at 20 cases, and with t alone 92.1% (accuracy 90%, ρ 0.5); bounded by the
/// case means it covers ≥ 94.7% at 20, 60 and 300 cases (tests/fixtures/bounded_coverage.py,
/// part B). Repeats that always agree (ρ = 1) make the case means 0/1, where §3's critical
/// value is z: Wilson on the cases, which covered 92.45% at 20 cases and 95% accuracy (17 of
/// 20 gave [63.96, 94.76]); with t and the rare-outcome bound, ≥ 94.6% at every accuracy
/// from 50% to 99.9% (part C).
pub fn clustered_wilson(cases: &[CaseScore], confidence: f64) -> Option<(f64, f64, f64, f64)> {
    let total: f64 = cases.iter().map(|c| c.score).sum();
    let n: u64 = cases.iter().map(|c| c.graded).sum();
    if n == 0 {
        return None;
    }
    let p = total / n as f64;
    let kish = n as f64 / design_effect(cases);
    let means: Vec<f64> = cases.iter().filter_map(CaseScore::mean).collect();
    let repeated = cases.iter().any(|c| c.graded > 1);
    let (lo, hi, n_eff) = match crate::bounded::effective_cases(&means, confidence) {
        Some((_, cases_eff, _)) if repeated => {
            let n_eff = kish.min(cases_eff);
            let t = crate::bounded::t_critical(confidence, (means.len() - 1) as f64)?;
            let wilson = super::wilson_c(p, n_eff, t);
            let (lo, hi) = crate::bounded::rare_widened(p, n_eff, confidence, wilson);
            (lo, hi, n_eff)
        }
        _ => {
            let (lo, hi) = wilson_n(p, kish, confidence);
            (lo, hi, kish)
        }
    };
    Some((p, lo, hi, n as f64 / n_eff))
}

/// A mean over the cases of units (groups) of unequal sizes, with the small-sample
/// cluster-robust pieces an interval needs: the estimate p̂ = Σy/N, the CR2 variance
/// V = Σ a_g (y_g − n_g p̂)²/N² with a_g = 1/(1 − n_g/N) (Bell & McCaffrey), and
/// Imbens & Kolesár's degrees of freedom N²/[Σ a_g² n_g² (1 − 2h_g) + (Σ a_g n_g²)²/N²]
/// (h_g = n_g/N), which lie in [1, G − 1] and equal G − 1 for equal sizes (the paired
/// difference's repair uses these). One variant's interval ([`ClusterMean::wilson`]) uses
/// the more cautious pair: the CR3 (jackknife) variance Σ a_g² (y_g − n_g p̂)²/N², and Imbens
/// & Kolesár's degrees of freedom under the working model of groups as units (a group's
/// total varies as n_g²), fewer where sizes are skewed; with CR2 and independent cases it
/// covered 93.3% for 40 skewed groups at 90% (tests/fixtures/groups_variant.py).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClusterMean {
    pub(crate) groups: usize,
    pub cases: f64,
    pub mean: f64,
    pub variance: f64,
    pub df: f64,
    /// The CR3 (jackknife) variance of the mean.
    pub jackknife_variance: f64,
    /// Imbens & Kolesár's degrees of freedom with groups as units (working ρ = 1).
    pub unit_df: f64,
}

/// Imbens & Kolesár's degrees of freedom tr(K)²/tr(K²) for a mean over (sum, size) units
/// with CR2 weights a_g and the working model λ_g = n_g(1 − ρ) + n_g²ρ, in closed form:
/// K = A^½ M A^½, M = Λ − (nλᵀ + λnᵀ)/N + nnᵀ·Σλ/N² (tests/fixtures/groups_variant.py
/// `ik_df`, checked there against the matrix form).
fn ik_df(units: &[(f64, f64)], rho: f64) -> f64 {
    let n: f64 = units.iter().map(|u| u.1).sum();
    let a = |size: f64| 1.0 / (1.0 - size / n);
    let lambda = |size: f64| size * (1.0 - rho) + size * size * rho;
    let c = units.iter().map(|u| lambda(u.1)).sum::<f64>() / (n * n);
    let weighted = |f: &dyn Fn(f64) -> f64| units.iter().map(|u| a(u.1) * f(u.1)).sum::<f64>();
    let diagonal = |size: f64| -2.0 * size * lambda(size) / n + size * size * c;
    let trace = weighted(&|s| lambda(s) + diagonal(s));
    let (s_nn, s_ll, s_nl) = (
        weighted(&|s| s * s),
        weighted(&|s| lambda(s).powi(2)),
        weighted(&|s| s * lambda(s)),
    );
    let squares = units
        .iter()
        .map(|u| a(u.1).powi(2) * (lambda(u.1).powi(2) + 2.0 * lambda(u.1) * diagonal(u.1)))
        .sum::<f64>()
        + 2.0 * s_nn * s_ll / (n * n)
        + 2.0 * s_nl * s_nl / (n * n)
        + c * c * s_nn * s_nn
        - 4.0 * c * s_nn * s_nl / n;
    trace * trace / squares
}

impl ClusterMean {
    /// From (sum, size) per unit; units of size 0 are left out. `None` below two units.
    pub fn of(units: impl IntoIterator<Item = (f64, f64)>) -> Option<ClusterMean> {
        let units: Vec<(f64, f64)> = units.into_iter().filter(|u| u.1 > 0.0).collect();
        let g = units.len();
        if g < 2 || units.iter().any(|(y, n)| !y.is_finite() || !n.is_finite()) {
            return None;
        }
        let n: f64 = units.iter().map(|u| u.1).sum();
        let mean = units.iter().map(|u| u.0).sum::<f64>() / n;
        let a = |size: f64| 1.0 / (1.0 - size / n);
        let variance = units
            .iter()
            .map(|&(y, size)| a(size) * (y - size * mean).powi(2))
            .sum::<f64>()
            / (n * n);
        let squares: f64 = units
            .iter()
            .map(|&(_, size)| a(size).powi(2) * size * size * (1.0 - 2.0 * size / n))
            .sum();
        let cross: f64 = units.iter().map(|&(_, size)| a(size) * size * size).sum();
        let df = n * n / (squares + cross * cross / (n * n));
        let jackknife_variance = units
            .iter()
            .map(|&(y, size)| a(size).powi(2) * (y - size * mean).powi(2))
            .sum::<f64>()
            / (n * n);
        Some(ClusterMean {
            groups: g,
            cases: n,
            mean,
            variance,
            df,
            jackknife_variance,
            unit_df: ik_df(&units, 1.0),
        })
    }

    /// The two-sided t critical value at `confidence` with these degrees of freedom.
    pub fn critical(&self, confidence: f64) -> Option<f64> {
        use statrs::distribution::{ContinuousCDF, StudentsT};
        let t = StudentsT::new(0.0, 1.0, self.df.max(1.0)).ok()?;
        Some(t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
    }

    /// Wilson's interval at the effective size n_eff = p̂(1 − p̂)/V with the t critical value
    /// (Korn & Graubard's degrees-of-freedom-adjusted effective size), V the jackknife
    /// variance and t at the groups-as-units degrees of freedom, never above `cap`
    /// (N for 0/1 scores; for scores in [0, 1] the ungrouped effective size, so grouping
    /// never narrows an interval; `None`: no cap). At p̂ of 0 or 1, or with no spread (within
    /// rounding), n_eff is the cap (or N): the limit as the spread vanishes, so the interval
    /// moves smoothly with the data (199 of 200 right never gets a higher lower bound than
    /// 200 of 200). Returns (low, high, n_eff).
    pub fn wilson(&self, confidence: f64, cap: Option<f64>) -> Option<(f64, f64, f64)> {
        if !(confidence > 0.0 && confidence < 1.0) || cap.is_some_and(|c| c.is_nan() || c <= 0.0) {
            return None;
        }
        let p = self.mean.clamp(0.0, 1.0);
        let spread = self.jackknife_variance * self.cases * self.cases;
        let n_eff = if p <= 0.0 || p >= 1.0 || spread <= 1e-12 * self.cases {
            cap.unwrap_or(self.cases)
        } else {
            (p * (1.0 - p) / self.jackknife_variance).min(cap.unwrap_or(f64::INFINITY))
        };
        let t = crate::bounded::t_critical(confidence, self.unit_df.max(1.0))?;
        let (lo, hi) = super::wilson_c(p, n_eff, t);
        Some((lo, hi, n_eff))
    }
}

/// Accuracy over cases in groups of unequal sizes (`group:`): Wilson's interval at the
/// cluster-robust effective size with a t critical value ([`ClusterMean::wilson`]), in place
/// of Kish's design effect, which undercovers with unequal group sizes (85–91% at 95% for
/// 40 skewed groups; tests/fixtures/groups.py; this: 95.6–99.6% for 5–40 groups,
/// tests/fixtures/groups_variant.py). Groups of one case give
/// plain Wilson. Returns (accuracy, low, high, design effect N/n_eff); `None` with no
/// graded unit, or one (a single group carries no spread to estimate).
pub fn grouped_wilson(units: &[CaseScore], confidence: f64) -> Option<(f64, f64, f64, f64)> {
    let graded: Vec<&CaseScore> = units.iter().filter(|u| u.graded > 0).collect();
    let n: u64 = graded.iter().map(|u| u.graded).sum();
    if n == 0 {
        return None;
    }
    let p = graded.iter().map(|u| u.score).sum::<f64>() / n as f64;
    if graded.iter().all(|u| u.graded == 1) {
        let (lo, hi) = wilson_n(p, n as f64, confidence);
        return Some((p, lo, hi, 1.0));
    }
    let c = ClusterMean::of(graded.iter().map(|u| (u.score, u.graded as f64)))?;
    let (lo, hi, n_eff) = c.wilson(confidence, Some(n as f64))?;
    Some((p, lo, hi, n as f64 / n_eff))
}

/// The share of cases whose graded samples all agree (all right or all wrong).
pub fn consistency(cases: &[CaseScore]) -> Option<f64> {
    let multi: Vec<&CaseScore> = cases.iter().filter(|c| c.graded > 1).collect();
    if multi.is_empty() {
        return None;
    }
    let agree = multi
        .iter()
        .filter(|c| c.score == 0.0 || c.score == c.graded as f64)
        .count();
    Some(agree as f64 / multi.len() as f64)
}

/// A variant's interval and design effect, the case (or the group of cases, when cases
/// carry `group:`) the unit: repeats widen the interval by Kish's design effect (cases of
/// one size), bounded by what the case means support; groups, of any sizes, by the
/// cluster-robust effective size.
pub fn wilson_by_unit(
    units: &[CaseScore],
    grouped: bool,
    confidence: f64,
) -> Option<(f64, f64, f64, f64)> {
    if grouped {
        grouped_wilson(units, confidence)
    } else {
        clustered_wilson(units, confidence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(v: &[(u64, u64)]) -> Vec<CaseScore> {
        v.iter()
            .map(|&(correct, graded)| CaseScore::binary(correct, graded))
            .collect()
    }

    #[test]
    fn one_sample_per_case_is_plain_wilson() {
        let cases = cs(&[(1, 1), (0, 1), (1, 1), (1, 1)]);
        let (p, lo, hi, deff) = clustered_wilson(&cases, 0.95).unwrap();
        assert_eq!(deff, 1.0);
        assert_eq!((lo, hi), crate::wilson(3, 4, 0.95).unwrap());
        assert_eq!(p, 0.75);
    }

    #[test]
    fn perfectly_consistent_repeats_count_once() {
        // Every case answers the same way 5 times: 5 samples carry one case's information.
        let cases = cs(&[(5, 5), (0, 5), (5, 5), (5, 5)]);
        let (_, lo, hi, deff) = clustered_wilson(&cases, 0.95).unwrap();
        assert!((deff - 5.0).abs() < 1e-9, "{deff}");
        // Four cases' worth, with t at 3 degrees of freedom and the rare-outcome bounds: no
        // narrower than Wilson's 3 of 4.
        let (plo, phi) = crate::wilson(3, 4, 0.95).unwrap();
        assert!(lo < plo && hi > phi, "[{lo}, {hi}] vs [{plo}, {phi}]");
        assert_eq!(consistency(&cases), Some(1.0));
    }

    #[test]
    fn repeats_that_always_agree_cover_at_twenty_cases() {
        // Issue 50: 17 of 20 cases right on all 3 repeats gave Wilson's [63.96, 94.76], which
        // excludes 95% (covered 92.45% at 95% accuracy).
        let mut cases = cs(&[(3, 3); 17]);
        cases.extend(cs(&[(0, 3); 3]));
        let (p, lo, hi, deff) = clustered_wilson(&cases, 0.95).unwrap();
        assert!((p - 0.85).abs() < 1e-12 && (deff - 3.0).abs() < 1e-9);
        assert!(hi > 0.95 && lo < 0.6396, "[{lo}, {hi}]");
        // One answer per case stays Wilson's interval.
        let single = cs(&[(1, 1); 17]
            .iter()
            .chain(&[(0, 1); 3])
            .copied()
            .collect::<Vec<_>>());
        let (_, slo, shi, _) = clustered_wilson(&single, 0.95).unwrap();
        assert_eq!((slo, shi), crate::wilson(17, 20, 0.95).unwrap());
    }

    #[test]
    fn grouped_accuracy_moves_with_the_data() {
        // 40 groups of 5: one miss, then none. The perfect variant's lower bound is never
        // below the one with a miss.
        let mut units = vec![CaseScore::binary(5, 5); 40];
        let all = grouped_wilson(&units, 0.95).unwrap();
        units[0] = CaseScore::binary(4, 5);
        let one_miss = grouped_wilson(&units, 0.95).unwrap();
        assert!(all.1 >= one_miss.1, "{all:?} vs {one_miss:?}");
        assert_eq!(all.0, 1.0);
        // Groups of one case: plain Wilson.
        let singles = vec![
            CaseScore::binary(1, 1),
            CaseScore::binary(0, 1),
            CaseScore::binary(1, 1),
        ];
        let (p, lo, hi, deff) = grouped_wilson(&singles, 0.95).unwrap();
        assert_eq!((lo, hi), crate::wilson(2, 3, 0.95).unwrap());
        assert_eq!((p, deff), (2.0 / 3.0, 1.0));
        // One group has no spread to estimate: no interval.
        assert_eq!(grouped_wilson(&[CaseScore::binary(3, 5)], 0.95), None);
    }

    #[test]
    fn skewed_groups_widen_one_variants_interval() {
        // Issue 50: with CR2 and independent-case degrees of freedom, 40 skewed groups at 90%
        // covered 93.3%. Groups of 1–20 cases, the large ones harder.
        let sizes = [1, 2, 1, 3, 20, 1, 5, 2, 1, 12, 4, 1, 2, 8, 1, 3];
        let units: Vec<CaseScore> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let missed = if n >= 8 { n / 3 } else { u64::from(i % 5 == 0) };
                CaseScore::binary(n - missed.min(n), n)
            })
            .collect();
        let c = ClusterMean::of(units.iter().map(|u| (u.score, u.graded as f64))).unwrap();
        // Large groups carry the spread: fewer degrees of freedom, a larger variance.
        assert!(
            c.unit_df < c.df && c.jackknife_variance > c.variance,
            "{c:?}"
        );
        let (p, lo, hi, _) = grouped_wilson(&units, 0.95).unwrap();
        let cr2 = crate::wilson_c(p, p * (1.0 - p) / c.variance, c.critical(0.95).unwrap());
        assert!(lo < cr2.0 && hi > cr2.1, "[{lo}, {hi}] vs CR2 {cr2:?}");
        // Equal sizes: G − 1 degrees of freedom either way.
        let equal =
            ClusterMean::of([(18.0, 20.0), (17.0, 20.0), (20.0, 20.0), (15.0, 20.0)]).unwrap();
        assert!((equal.unit_df - 3.0).abs() < 1e-9 && (equal.df - 3.0).abs() < 1e-9);
    }

    #[test]
    fn all_right_repeats_count_once() {
        let cases = cs(&[(3, 3), (3, 3), (3, 3)]);
        assert_eq!(icc(&cases), 1.0);
        assert_eq!(design_effect(&cases), 3.0);
    }

    #[test]
    fn independent_looking_repeats_do_not_inflate() {
        let cases = cs(&[(2, 4), (2, 4), (2, 4), (2, 4)]);
        assert_eq!(icc(&cases), 0.0);
        assert_eq!(design_effect(&cases), 1.0);
        assert_eq!(consistency(&cases), Some(0.0));
    }
}
