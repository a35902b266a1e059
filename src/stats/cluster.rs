//! Repeats: several samples per case are not independent. The case is the unit; Wilson's
//! interval uses the effective sample size n / deff, with Kish's design effect
//! deff = 1 + (m̄ − 1)·ρ and ρ the intra-class correlation of the 0/1 outcomes (one-way
//! ANOVA estimator). With one sample per case deff = 1 and this is plain Wilson. When no
//! case's samples disagree (every case all right or all wrong) ρ is taken as 1: the repeats
//! add no information, so the interval is the one the cases alone give.

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
/// Returns (accuracy, low, high, design effect).
pub fn clustered_wilson(cases: &[CaseScore], confidence: f64) -> Option<(f64, f64, f64, f64)> {
    let total: f64 = cases.iter().map(|c| c.score).sum();
    let n: u64 = cases.iter().map(|c| c.graded).sum();
    if n == 0 {
        return None;
    }
    let deff = design_effect(cases);
    let p = total / n as f64;
    let (lo, hi) = wilson_n(p, n as f64 / deff, confidence);
    Some((p, lo, hi, deff))
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
        assert_eq!((lo, hi), crate::stats::wilson(3, 4, 0.95).unwrap());
        assert_eq!(p, 0.75);
    }

    #[test]
    fn perfectly_consistent_repeats_count_once() {
        // Every case answers the same way 5 times: 5 samples carry one case's information.
        let cases = cs(&[(5, 5), (0, 5), (5, 5), (5, 5)]);
        let (_, lo, hi, deff) = clustered_wilson(&cases, 0.95).unwrap();
        assert!((deff - 5.0).abs() < 1e-9, "{deff}");
        let (plo, phi) = crate::stats::wilson(3, 4, 0.95).unwrap();
        assert!((lo - plo).abs() < 1e-9 && (hi - phi).abs() < 1e-9);
        assert_eq!(consistency(&cases), Some(1.0));
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
