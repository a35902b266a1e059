//! The paired test of scored runs: a betting test of "the mean difference is δ" for
//! per-case differences in [−1, 1] (docs/dev/statistics.md §3b), and the interval that
//! inverts it.
//!
//! Why not the sign-flip test: its null is that each difference is as likely to have either
//! sign (symmetry), not that the means are equal. With skewed differences — a variant that
//! scores 0.1 on every case against a baseline right on 10% of cases, equal means — it
//! called one better in 12–13% of runs at 20 and 50 cases (20 cases of +0.1 and none of
//! −0.9 happen 12% of the time, and look like a sure gain to a test of symmetry).
//! Studentising does not help: under sign flips Σ(εd)² = Σd², so the t statistic is a
//! monotone function of |Σεd| and the studentised test is the same test.
//!
//! The test (Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by
//! betting", JRSS B 86(1), the hedged capital process with predictable plug-in bets for a
//! fixed n): two bettors, one on "above δ", one on "below δ", each stake a share λ of
//! their wealth on every case in a fixed seeded order:
//!
//!   K⁺ₜ = Π (1 + λᵢ⁺ (dᵢ − δ)),  K⁻ₜ = Π (1 − λᵢ⁻ (dᵢ − δ)),  Kₜ = ½ K⁺ₜ + ½ K⁻ₜ,
//!
//! λᵢ = √(2 log(2/α) / (n σ̂²ᵢ₋₁)), σ̂² the running variance of the cases before i (with a
//! prior of [`PRIOR_VARIANCE`], one case's weight), capped at [`CAP`]/(1 ± δ) so no factor
//! falls below 1 − CAP whatever the next difference in [−1, 1]. When the mean is δ (and the
//! cases are independent draws in an order that does not depend on their scores) Kₜ is a
//! nonnegative martingale starting at 1, so by Ville's inequality P(maxₜ Kₜ ≥ 1/α) ≤ α for
//! every α and every distribution on [−1, 1]: p = min(1, 1/maxₜ Kₜ) is a valid p-value of
//! equal means, with no assumption of symmetry or normality. α in the bets is the run's
//! 1 − confidence; the p-value is valid at any level (Holm's included).
//!
//! The price: the bets cannot stake more than a case at −1 (or +1) could cost, which is
//! what protects against an outcome the cases have not shown; at 100 cases a difference of
//! a few points between close judges needs about twice the cases the sign-flip test needed
//! (tests/fixtures/betting.py, its output tests/fixtures/betting_sim.txt).

/// Largest stake, as a share of what keeps every factor ≥ 0 for a difference in [−1, 1].
const CAP: f64 = 0.9;
/// The variance the bets assume before any case (with one case's weight).
const PRIOR_VARIANCE: f64 = 0.05;
/// The seed of the fixed order the cases are bet on (the order of a bench is not random:
/// cases sorted by difficulty must not steer the bets).
const SEED: u64 = 0x5eed_be77;

/// The next value of a splitmix64 generator (Steele, Lea & Flood 2014): the same in the
/// Python copy (tests/fixtures/betting.py).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The fixed seeded order of `n` cases (Fisher–Yates on splitmix64).
fn order(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = SEED;
    for i in (1..n).rev() {
        let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// The test of scored runs on per-case differences.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundedMean {
    /// The differences in the order they are bet on.
    ordered: Vec<f64>,
    /// log(2/α) of the bets' size, α = 1 − confidence.
    log_two_over_alpha: f64,
    /// The mean difference.
    pub mean: f64,
}

impl BoundedMean {
    /// The test for `differences` (each in [−1, 1]) at a run's `confidence`. `None` for no
    /// cases, a difference outside [−1, 1] (rounding of 1e-9 is clamped) or not finite, or a
    /// confidence outside (0, 1).
    pub fn new(differences: &[f64], confidence: f64) -> Option<BoundedMean> {
        if differences.is_empty()
            || !(confidence > 0.0 && confidence < 1.0)
            || differences
                .iter()
                .any(|d| !d.is_finite() || d.abs() > 1.0 + 1e-9)
        {
            return None;
        }
        let mean = differences.iter().sum::<f64>() / differences.len() as f64;
        Some(BoundedMean {
            ordered: order(differences.len())
                .into_iter()
                .map(|i| differences[i].clamp(-1.0, 1.0))
                .collect(),
            log_two_over_alpha: (2.0 / (1.0 - confidence)).ln(),
            mean,
        })
    }

    /// The largest wealth of the hedged bettors against "the mean is `delta`".
    pub fn capital(&self, delta: f64) -> f64 {
        let n = self.ordered.len() as f64;
        let (up_cap, down_cap) = (CAP / (1.0 + delta), CAP / (1.0 - delta));
        let (mut up, mut down, mut best) = (1.0_f64, 1.0_f64, 1.0_f64);
        let (mut sum, mut squares) = (0.0, PRIOR_VARIANCE);
        for (i, &d) in self.ordered.iter().enumerate() {
            let variance = squares / (i as f64 + 1.0);
            let lambda = (2.0 * self.log_two_over_alpha / (n * variance)).sqrt();
            let x = d - delta;
            up *= 1.0 + lambda.min(up_cap) * x;
            down *= 1.0 - lambda.min(down_cap) * x;
            best = best.max(0.5 * (up + down));
            sum += d;
            let mean = sum / (i as f64 + 2.0);
            squares += (d - mean) * (d - mean);
        }
        best
    }

    /// The two-sided p-value of "the mean is `delta`": min(1, 1/max wealth).
    pub fn p_value(&self, delta: f64) -> f64 {
        (1.0 / self.capital(delta)).min(1.0)
    }

    /// The interval at `level`: the δ in [−1, 1] the test keeps (p ≥ 1 − level), by
    /// bisection to 1e-9 between the mean (always kept) and a rejected δ. 0 is a bracket
    /// end on its side whenever it lies there, so the interval excludes 0 exactly when
    /// [`BoundedMean::p_value`] at 0 is below 1 − level. `None` for a level outside (0, 1).
    pub fn interval(&self, level: f64) -> Option<(f64, f64)> {
        if !(level > 0.0 && level < 1.0) {
            return None;
        }
        let alpha = 1.0 - level;
        let kept = |delta: f64| self.p_value(delta) >= alpha;
        let mean = self.mean;
        let bound = |far: f64| -> f64 {
            let (mut inside, mut outside) = if (0.0 - mean) * far > 0.0 && !kept(0.0) {
                (mean, 0.0)
            } else if (0.0 - mean) * far > 0.0 {
                (0.0, far)
            } else {
                (mean, far)
            };
            if outside == far && kept(far) {
                return far;
            }
            while (outside - inside).abs() > 1e-9 {
                let mid = 0.5 * (inside + outside);
                if kept(mid) {
                    inside = mid;
                } else {
                    outside = mid;
                }
            }
            inside
        };
        Some((bound(-1.0), bound(1.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_difference_with_equal_means_is_not_called_a_gain() {
        // 20 cases where the variant scored 0.1 and the baseline 0 (a baseline right on 10%
        // of cases misses all 20 about 12% of the time): the sign-flip test said p = 2/2²⁰.
        let d = [0.1; 20];
        let t = BoundedMean::new(&d, 0.95).unwrap();
        assert!(t.p_value(0.0) > 0.05, "{}", t.p_value(0.0));
        let (lo, hi) = t.interval(0.95).unwrap();
        assert!(lo < 0.0 && hi >= 0.1, "[{lo}, {hi}]");
        let sign_flip = crate::permutation::sign_flip_test(&d).unwrap();
        assert!(sign_flip.p_value < 1e-5);
    }

    #[test]
    fn a_clear_gain_is_found_and_its_interval_agrees() {
        // 200 cases: +0.2 on 60% of them, −0.1 on the rest (mean +0.08).
        let d: Vec<f64> = (0..200)
            .map(|i| if i % 5 < 3 { 0.2 } else { -0.1 })
            .collect();
        let t = BoundedMean::new(&d, 0.95).unwrap();
        assert!(t.p_value(0.0) < 0.001, "{}", t.p_value(0.0));
        let (lo, hi) = t.interval(0.95).unwrap();
        assert!(lo > 0.0 && lo < 0.08 && hi > 0.08, "[{lo}, {hi}]");
    }

    #[test]
    fn the_interval_excludes_zero_exactly_when_the_test_rejects() {
        for k in 0..40 {
            let d: Vec<f64> = (0..60)
                .map(|i| ((i * 7 + k * 13) % 11) as f64 / 10.0 - 0.5 + 0.01 * k as f64)
                .map(|x: f64| x.clamp(-1.0, 1.0))
                .collect();
            let t = BoundedMean::new(&d, 0.95).unwrap();
            for level in [0.9, 0.95, 0.99] {
                let (lo, hi) = t.interval(level).unwrap();
                assert!(lo <= t.mean && t.mean <= hi, "{k}");
                assert_eq!(
                    lo > 0.0 || hi < 0.0,
                    t.p_value(0.0) < 1.0 - level,
                    "{k} {level}: [{lo}, {hi}] p = {}",
                    t.p_value(0.0)
                );
            }
        }
    }

    #[test]
    fn nothing_to_test() {
        assert!(BoundedMean::new(&[], 0.95).is_none());
        assert!(BoundedMean::new(&[f64::NAN], 0.95).is_none());
        assert!(BoundedMean::new(&[1.5], 0.95).is_none());
        assert!(BoundedMean::new(&[0.5], 1.0).is_none());
        let t = BoundedMean::new(&[0.0; 10], 0.95).unwrap();
        assert_eq!(t.p_value(0.0), 1.0);
        assert_eq!(t.interval(1.0), None);
    }
}
