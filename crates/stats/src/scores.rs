//! Mean scores for scored runs (scores anywhere in [0, 1]; docs/dev/statistics.md §3).
//!
//! The case is the unit. Each case's repeats are first averaged into one case mean; the
//! variant's score is the mean of its case means (every case weighs one, as in the paired
//! comparison, which works on case means too), with a floored quasi-binomial Wilson
//! interval on them ([`mean_score`]): Wilson's for 0/1 scores, near the t interval for
//! scores spread widely inside [0, 1], bounded like Wilson's near 0 and 1, where the t
//! interval undercovers, and never narrower than an outcome the cases have not shown
//! allows (cases that all scored 0.9 are not proof that no case scores 0). Cases in
//! groups: Wilson's at the cluster-robust effective size ([`mean_score_clustered`]).
//!
//! Paired: the mean of the per-case differences with a paired t interval and p-value
//! (scipy `ttest_rel`), and the sign-flip test and interval of [`crate::permutation`], whose
//! verdict does not lean on normality and is exact McNemar for 0/1 scores.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::bounded::{effective_cases, parts, rare_widened, t_critical};
use crate::permutation::{Interval, SignFlip, sign_flip_interval, sign_flip_test};

/// A mean of case means with its interval (`None` with fewer than two cases).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanScore {
    pub(crate) cases: usize,
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

/// The mean of per-case mean scores with an interval valid for any scores in [0, 1]:
/// Wilson's score interval at the mean over an effective number of cases n / φ,
/// φ = (SS + K) / (SS + W + K), where SS = Σ (xᵢ − m)² is the spread between cases,
/// W = Σ xᵢ(1 − xᵢ) what scores inside [0, 1] could spread at most beyond it (the variance
/// of a score in [0, 1] is at most m(1 − m): φ = 1 is that bound), and K =
/// [`unseen_spread`](crate::bounded::unseen_spread), what an outcome the cases have not
/// shown could add. The critical value
/// runs from z (φ = 1: 0/1 scores, where this is exactly Wilson's interval) to t with n − 1
/// degrees of freedom as φ → 0 (scores spread inside [0, 1], as the t interval does). φ is
/// continuous in SS, so rounding (ten cases at 0.7 sum to 7.000000000000001) changes
/// nothing. Checked against tests/fixtures/bounded_interval_ref.py; coverage in
/// docs/dev/statistics.md §3. `None` for no cases, a confidence outside (0, 1) (no interval),
/// or a score that is not in [0, 1]; the interval is `None` with one case.
pub fn mean_score(case_means: &[f64], confidence: f64) -> Option<MeanScore> {
    let (n, m, _, within) = parts(case_means)?;
    // 0/1 scores keep Wilson's interval exactly (an accuracy is one); other scores get the
    // rare-outcome bound.
    let binary = within == 0.0;
    let interval = effective_cases(case_means, confidence).map(|(m, ne, c)| {
        let wilson = crate::wilson_c(m, ne, c);
        if binary {
            wilson
        } else {
            rare_widened(m, ne, confidence, wilson)
        }
    });
    Some(MeanScore {
        cases: n,
        mean: m,
        interval,
    })
}

/// [`mean_score`] with cases clustered: `groups[i]` names case i's group. The estimate is
/// still the mean over cases; the interval is Wilson's at the cluster-robust effective size
/// p̂(1 − p̂)/V_CR2 with a t critical value at Imbens & Kolesár's degrees of freedom
/// ([`crate::cluster::ClusterMean::wilson`]), which keeps its coverage with groups of
/// unequal sizes (95.2–99.9% for 5–40 groups, also when the large groups are the hard ones;
/// tests/fixtures/groups_variant.py),
/// capped by the ungrouped effective size n/φ of [`mean_score`] (grouping never narrows the
/// interval; near-constant groups no longer give a near-zero width). Groups of one case give
/// [`mean_score`]'s interval. No interval below two groups.
pub fn mean_score_clustered(
    case_means: &[f64],
    groups: &[String],
    confidence: f64,
) -> Option<MeanScore> {
    if groups.len() != case_means.len() {
        return None;
    }
    let plain = mean_score(case_means, confidence)?;
    let mut by: std::collections::BTreeMap<&str, (f64, f64)> = Default::default();
    for (g, x) in groups.iter().zip(case_means) {
        let unit = by.entry(g.as_str()).or_default();
        unit.0 += x;
        unit.1 += 1.0;
    }
    if by.values().all(|u| u.1 == 1.0) {
        return Some(plain);
    }
    // Never narrower than the cases alone would give: the ungrouped effective size n/φ
    // caps the grouped one (and stands in where the groups show no spread).
    let interval = effective_cases(case_means, confidence)
        .and_then(|(_, cap, _)| {
            crate::cluster::ClusterMean::of(by.into_values())?.wilson(confidence, Some(cap))
        })
        .map(|(lo, hi, _)| (lo, hi));
    Some(MeanScore { interval, ..plain })
}

/// The mean of per-case differences with an interval that agrees with the sign-flip test
/// about 0 (excludes it exactly when [`sign_flip_test`] is below 1 − confidence) and, unlike
/// inverting that test on all the differences, is not pinned to 0 by cases with no
/// difference: under a shift every tied case would look like evidence of one sign. As the
/// exact McNemar interval does for 0/1 answers, it works on the cases that differ: the
/// sign-flip interval for their mean μ, times the share D of such cases, each bound taking
/// the end of D's Wilson interval that makes it widest. Returns (mean, low, high).
pub fn paired_interval(differences: &[f64], confidence: f64) -> Option<(f64, f64, f64)> {
    if differences.is_empty() || differences.iter().any(|d| !d.is_finite()) {
        return None;
    }
    let n = differences.len();
    let mean = differences.iter().sum::<f64>() / n as f64;
    let moved: Vec<f64> = differences.iter().copied().filter(|&d| d != 0.0).collect();
    let (d_lo, d_hi) = crate::wilson(moved.len() as u64, n as u64, confidence)?;
    if moved.is_empty() {
        return Some((mean, -d_hi, d_hi));
    }
    let mu = sign_flip_interval(&moved, confidence)?;
    let bound = |x: f64, outward: f64| {
        if x * outward > 0.0 {
            x * d_hi
        } else {
            x * d_lo
        }
    };
    Some((mean, bound(mu.low, -1.0), bound(mu.high, 1.0)))
}

/// A variant against the baseline on per-case mean scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedScores {
    pub(crate) cases: usize,
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
/// sign-flip test and interval. With no spread in the differences (within rounding) the t
/// statistic is undefined: no t interval and no t p-value. `None` for no cases, unequal
/// lengths or a non-finite score.
pub fn paired_scores(variant: &[f64], baseline: &[f64], confidence: f64) -> Option<PairedScores> {
    let t = paired_t(variant, baseline, confidence)?;
    let d: Vec<f64> = variant.iter().zip(baseline).map(|(v, b)| v - b).collect();
    Some(PairedScores {
        cases: d.len(),
        mean: t.mean,
        t_interval: t.t_interval,
        t_p_value: t.t_p_value,
        sign_flip: sign_flip_test(&d)?,
        sign_flip_interval: sign_flip_interval(&d, confidence)?,
    })
}

/// The paired t-test alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedT {
    pub(crate) mean: f64,
    pub t_interval: Option<(f64, f64)>,
    pub t_p_value: Option<f64>,
}

/// The paired t-test and interval of [`paired_scores`], without the sign-flip test.
pub fn paired_t(variant: &[f64], baseline: &[f64], confidence: f64) -> Option<PairedT> {
    if variant.len() != baseline.len() {
        return None;
    }
    let d: Vec<f64> = variant.iter().zip(baseline).map(|(v, b)| v - b).collect();
    let (mean, se, df) = mean_and_se(&d)?;
    // Every difference the same (within rounding: ten differences of 0.3 have a standard
    // error of about 1e-17): the t statistic is undefined, not infinite. No interval and no
    // p-value rather than a point or a p of 0; the sign-flip test decides.
    let no_spread = se <= 1e-12 * mean.abs().max(1.0);
    let (t_interval, t_p_value) = if df < 1.0 || no_spread {
        (None, None)
    } else {
        let half = t_critical(confidence, df)? * se;
        let t = StudentsT::new(0.0, 1.0, df).ok()?;
        let p = (2.0 * t.sf((mean / se).abs())).min(1.0);
        (
            Some(((mean - half).max(-1.0), (mean + half).min(1.0))),
            Some(p),
        )
    };
    Some(PairedT {
        mean,
        t_interval,
        t_p_value,
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
    fn clustering_by_singletons_changes_little_and_by_groups_widens() {
        let means = [1.0, 0.5, 0.0, 0.25, 1.0, 0.75];
        let own: Vec<String> = (0..6).map(|i| i.to_string()).collect();
        let plain = mean_score(&means, 0.95).unwrap();
        let same = mean_score_clustered(&means, &own, 0.95).unwrap();
        let (a, b) = (plain.interval.unwrap(), same.interval.unwrap());
        // The cluster-robust spread has the small-sample factor G/(G − 1) and t: a little
        // wider, never narrower.
        assert!(b.0 <= a.0 + 1e-12 && b.1 >= a.1 - 1e-12, "{a:?} {b:?}");
        assert!((b.1 - b.0) < 1.3 * (a.1 - a.0), "{a:?} {b:?}");
        // Alike cases in the same group: fewer independent units, a wider interval.
        let groups: Vec<String> = ["x", "y", "z", "z", "x", "y"].map(String::from).to_vec();
        let grouped = mean_score_clustered(&means, &groups, 0.95).unwrap();
        let c = grouped.interval.unwrap();
        assert_eq!(grouped.mean, plain.mean);
        assert!(c.1 - c.0 > a.1 - a.0, "{c:?} vs {a:?}");
    }

    #[test]
    fn grouping_never_narrows_a_mean_score_interval() {
        // Ten cases at 0.70 and 0.71 in five pairs: the groups show almost no spread, which
        // once gave an interval eight times narrower than the cases alone.
        let means: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 0.70 } else { 0.71 })
            .collect();
        let pairs: Vec<String> = (0..10).map(|i| (i / 2).to_string()).collect();
        let plain = mean_score(&means, 0.95).unwrap().interval.unwrap();
        let grouped = mean_score_clustered(&means, &pairs, 0.95)
            .unwrap()
            .interval
            .unwrap();
        assert!(
            grouped.1 - grouped.0 >= plain.1 - plain.0 - 1e-12,
            "{grouped:?} vs {plain:?}"
        );
        // Exactly constant groups: the same, not a jump to a wide interval.
        let flat = mean_score_clustered(&[0.7; 10], &pairs, 0.95)
            .unwrap()
            .interval
            .unwrap();
        let alone = mean_score(&[0.7; 10], 0.95).unwrap().interval.unwrap();
        assert!(
            (flat.1 - flat.0) < 2.0 * (alone.1 - alone.0),
            "{flat:?} vs {alone:?}"
        );
    }

    #[test]
    fn the_paired_interval_agrees_with_the_test_and_is_not_pinned_by_ties() {
        // 5 wins, 1 loss, 58 ties: inverting the sign-flip test on all 64 cases puts the
        // lower bound at exactly 0 (any negative shift turns the ties into 58 wins).
        let mut d = vec![1.0; 5];
        d.push(-1.0);
        d.extend(vec![0.0; 58]);
        let all = sign_flip_interval(&d, 0.95).unwrap();
        assert_eq!(all.low, 0.0);
        let (mean, lo, hi) = paired_interval(&d, 0.95).unwrap();
        assert!((mean - 4.0 / 64.0).abs() < 1e-12);
        assert!(lo < -0.01 && hi > mean, "[{lo}, {hi}]");
        // Fractional case means: the interval excludes 0 exactly when the test rejects.
        let mut seed = 3u64;
        for _ in 0..40 {
            let d: Vec<f64> = (0..9)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    [
                        -1.0,
                        -2.0 / 3.0,
                        -1.0 / 3.0,
                        0.0,
                        0.0,
                        1.0 / 3.0,
                        2.0 / 3.0,
                        1.0,
                        1.0,
                    ][(seed >> 60) as usize % 9]
                })
                .collect();
            let p = sign_flip_test(&d).unwrap().p_value;
            let (_, lo, hi) = paired_interval(&d, 0.9).unwrap();
            assert_eq!(lo > 0.0 || hi < 0.0, p < 0.1, "{d:?}: p {p}, [{lo}, {hi}]");
        }
    }

    #[test]
    fn cases_that_all_scored_the_same_still_get_a_width() {
        let m = mean_score(&[1.0, 1.0, 1.0], 0.95).unwrap();
        let (lo, hi) = m.interval.unwrap();
        assert!(lo < 0.5 && hi == 1.0, "{lo} {hi}");
        assert_eq!((lo, hi), crate::wilson(3, 3, 0.95).unwrap());
        // Ten cases at 0.7 sum to 7.000000000000001: rounding leaves a spread of 1e-31,
        // which a test for "exactly no spread" misses. The width is there all the same.
        let m = mean_score(&[0.7; 10], 0.95).unwrap();
        let (lo, hi) = m.interval.unwrap();
        assert!(hi - lo > 0.09, "[{lo}, {hi}]");
        let nudged: Vec<f64> = (0..10).map(|i| 0.7 + (i as f64 - 4.5) * 1e-16).collect();
        let n = mean_score(&nudged, 0.95).unwrap().interval.unwrap();
        assert!((n.0 - lo).abs() < 1e-12 && (n.1 - hi).abs() < 1e-12);
        // 0/1 scores are exactly Wilson's interval.
        let binary = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0];
        assert_eq!(
            mean_score(&binary, 0.9).unwrap().interval,
            crate::wilson(5, 7, 0.9)
        );
        // Scores outside [0, 1] are no scores.
        assert_eq!(mean_score(&[0.5, 1.5], 0.95), None);
    }

    #[test]
    fn a_rare_outcome_among_partial_scores_gets_the_poisson_bound() {
        // Issue 50: one case of 20 at 0.9 gave [0.75%, 22.7%] (covered 85.2%): one outcome
        // cannot put the mean above 0.0075. The exact bound for 1 of 20 is 0.9 × 0.00127.
        let mut one = vec![0.0; 19];
        one.push(0.9);
        let (lo, hi) = mean_score(&one, 0.95).unwrap().interval.unwrap();
        assert!(lo < 0.9 * 0.00127 && hi > 0.2, "[{lo}, {hi}]");
        // 19 cases at 1.0 and one at 0.5 (covered 90.5%): the upper bound is near 1.
        let mut near = vec![1.0; 19];
        near.push(0.5);
        let (lo, hi) = mean_score(&near, 0.95).unwrap().interval.unwrap();
        assert!(hi > 0.999 && lo < 0.9, "[{lo}, {hi}]");
        // Many outcomes on each side: Wilson's bounds, untouched.
        let spread: Vec<f64> = (0..40).map(|i| f64::from(i % 5) / 4.0).collect();
        let m = mean_score(&spread, 0.95).unwrap();
        let (_, ne, c) = crate::bounded::effective_cases(&spread, 0.95).unwrap();
        assert_eq!(m.interval, Some(crate::wilson_c(m.mean, ne, c)));
    }

    #[test]
    fn paired_edges() {
        assert_eq!(paired_scores(&[0.5], &[0.5, 0.1], 0.95), None);
        assert_eq!(paired_scores(&[], &[], 0.95), None);
        // A constant difference has no spread: the t statistic is undefined, so neither a
        // zero-width interval nor a p of 0 (also when rounding leaves a spread of 1e-17).
        let p = paired_scores(&[0.5, 0.75], &[0.25, 0.5], 0.95).unwrap();
        assert_eq!((p.t_interval, p.t_p_value), (None, None));
        let q = paired_scores(&[1.0; 10], &[0.7; 10], 0.95).unwrap();
        assert_eq!((q.t_interval, q.t_p_value), (None, None));
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
