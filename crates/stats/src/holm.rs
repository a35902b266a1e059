//! Intervals that agree with Holm's verdicts (docs/dev/statistics.md, "Intervals that agree with Holm").
//!
//! Holm rejects comparison i at α when its adjusted p-value p̃ᵢ < α. Since p̃ᵢ ≥ pᵢ, that is
//! the same as pᵢ < αᵢ with αᵢ = α·pᵢ/p̃ᵢ. An interval that inverts the same test at level
//! 1 − αᵢ excludes 0 exactly when pᵢ < αᵢ ([`crate::paired::exact_paired_interval`],
//! [`crate::betting::BoundedMean::interval`]), so
//! reporting each comparison's interval at 1 − αᵢ makes "the interval excludes 0" and "Holm
//! says better/worse" the same statement. αᵢ lies between α/m (the smallest p-value, Holm's
//! Bonferroni step) and α (the last step), so each interval is at least the plain
//! 1 − α interval (per-comparison coverage ≥ 1 − α) and at most the Bonferroni one.

pub use crate::paired::holm;

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
        // The ratio first: α·p_raw underflows to 0 for a subnormal p (1,073 one-sided
        // discordant pairs), which made the level 100% and the interval boundless.
        if p_holm == 0.0 {
            alpha / comparisons as f64
        } else {
            (alpha * (p_raw / p_holm)).max(p_raw * (1.0 + 1e-9))
        }
    } else {
        // Not rejected: p_raw ≥ α' keeps 0 inside.
        (alpha * (p_raw / p_holm)).min(p_raw * (1.0 - 1e-9))
    };
    Some(1.0 - level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnormal_p_values_keep_their_level() {
        // 1,073 discordant pairs all one way: p = 2·½¹⁰⁷³, a subnormal number.
        let p = 2.0 * 0.5f64.powi(1073);
        assert!(p > 0.0 && !p.is_normal());
        assert_eq!(holm_level(0.05, p, p, 1), Some(0.95));
        let level = holm_level(0.05, p, 3.0 * p, 3).unwrap();
        assert!((level - (1.0 - 0.05 / 3.0)).abs() < 1e-12, "{level}");
    }

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
}
