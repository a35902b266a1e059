//! Paired comparison of a variant with the baseline, case by case (docs/dev/statistics.md §1–2).

use statrs::function::beta::beta_reg;

use super::wilson;

/// The 2×2 table of one variant against the baseline over the cases both graded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PairedTable {
    pub both_right: u64,
    pub only_variant: u64,
    pub only_baseline: u64,
    pub both_wrong: u64,
}

impl PairedTable {
    /// How many cases the table holds.
    pub(crate) fn n(&self) -> u64 {
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

/// The inverse of the regularised incomplete beta in x: the x with I_x(a, b) = target, by
/// bisection to machine precision (a, b > 0).
fn beta_quantile(a: f64, b: f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if beta_reg(a, b, mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Clopper–Pearson interval for a binomial proportion: `k` of `n` at `confidence`.
fn clopper_pearson(k: u64, n: u64, confidence: f64) -> Option<(f64, f64)> {
    if n == 0 || k > n || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let tail = (1.0 - confidence) / 2.0;
    let (k, n) = (k as f64, n as f64);
    let lo = if k == 0.0 {
        0.0
    } else {
        beta_quantile(k, n - k + 1.0, tail)
    };
    let hi = if k == n {
        1.0
    } else {
        beta_quantile(k + 1.0, n - k, 1.0 - tail)
    };
    Some((lo, hi))
}

/// The difference of paired proportions (variant − baseline) with the interval that
/// inverts the exact McNemar test: the discordant cases split b : c, and the share q of
/// them the variant wins has a Clopper–Pearson interval, which excludes ½ exactly when
/// [`mcnemar_exact`] is below 1 − confidence (both invert the same binomial tails). The
/// difference is D·(2q − 1) with D the share of discordant cases; each bound takes the end
/// of D's Wilson interval that makes it widest, so the sign of each bound is q's and the
/// interval excludes 0 exactly when the exact test rejects. Returns (difference, low, high).
pub fn exact_paired_interval(t: &PairedTable, confidence: f64) -> Option<(f64, f64, f64)> {
    let n = t.n();
    if n == 0 {
        return None;
    }
    let (b, c) = (t.only_variant, t.only_baseline);
    let m = b + c;
    let estimate = (b as f64 - c as f64) / n as f64;
    let (d_lo, d_hi) = wilson(m, n, confidence)?;
    if m == 0 {
        return Some((estimate, -d_hi, d_hi));
    }
    let (q_lo, q_hi) = clopper_pearson(b, m, confidence)?;
    let bound = |q: f64, outward: f64| {
        let s = 2.0 * q - 1.0;
        // Outward from the estimate: the larger D when the bound points away from 0's side
        // it is on, the smaller when it points toward it.
        if s * outward > 0.0 {
            s * d_hi
        } else {
            s * d_lo
        }
    };
    Some((estimate, bound(q_lo, -1.0), bound(q_hi, 1.0)))
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
pub fn newcombe_paired(t: &PairedTable, confidence: f64) -> Option<(f64, f64, f64)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_interval_excludes_zero_exactly_when_mcnemar_rejects() {
        for n in [10u64, 30, 64, 200] {
            for b in 0..=12u64 {
                for c in 0..=12u64 {
                    if b + c > n {
                        continue;
                    }
                    let t = PairedTable {
                        both_right: n - b - c,
                        only_variant: b,
                        only_baseline: c,
                        both_wrong: 0,
                    };
                    for conf in [0.9, 0.95, 0.99] {
                        let (d, lo, hi) = exact_paired_interval(&t, conf).unwrap();
                        assert!(lo <= d && d <= hi, "{b} {c} {n}");
                        let rejects = mcnemar_exact(b, c) < 1.0 - conf;
                        assert_eq!(
                            lo > 0.0 || hi < 0.0,
                            rejects,
                            "{b} {c} {n} {conf}: [{lo}, {hi}]"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn clopper_pearson_matches_scipy() {
        // scipy.stats.binomtest(7, 20).proportion_ci(0.95, method="exact")
        let (lo, hi) = clopper_pearson(7, 20, 0.95).unwrap();
        assert!(
            (lo - 0.153_909_204_784_541_2).abs() < 1e-9
                && (hi - 0.592_188_534_532_828_3).abs() < 1e-9,
            "{lo} {hi}"
        );
        assert_eq!(clopper_pearson(0, 5, 0.95).unwrap().0, 0.0);
        assert_eq!(clopper_pearson(5, 5, 0.95).unwrap().1, 1.0);
    }

    #[test]
    fn mcnemar_edges() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        // 0 vs 5: 2 · (1/2)^5
        assert!((mcnemar_exact(0, 5) - 0.0625).abs() < 1e-15);
    }
}
