//! The paired sign-flip permutation test on per-case differences, and the interval that
//! inverts it (docs/dev/statistics.md §1: at one answer per case, the paired sign-flip test is exact McNemar).
//!
//! Input: one difference per case, dᵢ = (variant's mean score over its repeats) − (the
//! baseline's mean score over its repeats), so repeats never count as extra cases. Under the
//! null hypothesis the two arms are exchangeable within a case, so each dᵢ is as likely to
//! have either sign. The statistic is S = Σ dᵢ (equivalently the mean); the two-sided p-value
//! is P(|S*| ≥ |S|) with S* = Σ εᵢ dᵢ over independent fair signs εᵢ. That null is symmetric,
//! so this equals scipy's `2·min(P(S* ≤ S), P(S* ≥ S))` clipped to 1, and with 0/1 scores at
//! k = 1 it is exactly statsmodels' `mcnemar(table, exact=True)`: S* = 2X − (b + c) with
//! X ~ Bin(b + c, ½).
//!
//! How the null distribution is computed, first that applies:
//! 1. *Exact on a grid*: every dᵢ is j/L for a common L ≤ [`MAX_GRID`] (the case means of
//!    repeat counts k and k' give L = lcm(k, k')): count the sign patterns by convolving the
//!    binomial distributions of equal magnitudes over integer sums (log-free f64, tails below
//!    1e-300 dropped), within a work budget.
//! 2. *Exact enumeration*: at most [`MAX_ENUMERATED`] non-zero differences: all 2ⁿ patterns.
//! 3. *Monte Carlo*: [`MONTE_CARLO_DRAWS`] random sign patterns from the fixed seed
//!    [`SEED`], p = (b + 1)/(m + 1) (never 0, valid at any m), fewer draws only when the
//!    differences take more than 2,000 distinct values (see [`draws_for`]).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use statrs::function::beta::beta_reg;
use statrs::function::gamma::ln_gamma;

/// Largest common denominator L for which differences are treated as lying on a grid j/L
/// (5040 = lcm(1..=10): any mix of repeat counts up to 10, and scores in tenths).
const MAX_GRID: u64 = 5040;
/// Largest number of non-zero differences whose sign patterns are enumerated (2²⁰ patterns).
const MAX_ENUMERATED: usize = 20;
/// Random sign patterns drawn when neither exact method applies.
const MONTE_CARLO_DRAWS: u64 = 200_000;
/// The fixed seed of every Monte Carlo draw here, so a report is reproducible.
const SEED: u64 = 0x5eed_f11b;
/// Work budget of the grid convolution (multiply-adds); above it the next method is used.
const GRID_WORK: f64 = 1e9;
/// Work budget of the Monte Carlo draws (groups of equal values visited, summed over draws).
const MONTE_CARLO_WORK: f64 = 4e8;

/// How a p-value or interval was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Exact null distribution over integer multiples of 1/`grid`.
    ExactGrid { grid: u64 },
    /// All 2ⁿ sign patterns of the non-zero differences.
    ExactEnumeration,
    /// Random sign patterns from [`SEED`]; p = (b + 1)/(draws + 1).
    MonteCarlo { draws: u64 },
}

/// A sign-flip test of "no difference" on per-case differences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignFlip {
    /// Mean of the per-case differences.
    pub(crate) mean: f64,
    /// Two-sided p-value P(|S*| ≥ |S|).
    pub p_value: f64,
    pub method: Method,
}

/// The sign-flip test of mean difference 0, two-sided, as scipy's
/// `permutation_test((x, y), lambda x, y: mean(x - y), permutation_type="samples",
/// n_resamples=inf)` and, for 0/1 scores at k = 1, statsmodels' `mcnemar(exact=True)`.
/// Zero differences contribute nothing. `None` for no cases or a non-finite difference.
pub fn sign_flip_test(differences: &[f64]) -> Option<SignFlip> {
    if differences.is_empty() || differences.iter().any(|d| !d.is_finite()) {
        return None;
    }
    let mean = differences.iter().sum::<f64>() / differences.len() as f64;
    let nonzero: Vec<f64> = differences.iter().copied().filter(|&d| d != 0.0).collect();
    if nonzero.is_empty() {
        return Some(SignFlip {
            mean,
            p_value: 1.0,
            method: Method::ExactEnumeration,
        });
    }
    if let Some(grid) = common_grid(&nonzero)
        && let Some(p) = grid_p_value(&nonzero, grid)
    {
        return Some(SignFlip {
            mean,
            p_value: p,
            method: Method::ExactGrid { grid },
        });
    }
    let null = NullSet::new(&nonzero);
    let method = null.method;
    Some(SignFlip {
        mean,
        p_value: null.p_value(&nonzero, 0.0),
        method,
    })
}

/// A difference in means with an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub(crate) estimate: f64,
    pub low: f64,
    pub high: f64,
    /// How the p-values of the shifted data were computed (the test at 0 may be exact).
    pub method: Method,
}

/// The interval for the mean difference that inverts the sign-flip test: the shifts δ in
/// [−1, 1] for which the test on dᵢ − δ does not reject at level 1 − `confidence`
/// (p ≥ 1 − confidence). Its bounds are found by bisection between a shift the test accepts
/// and one it rejects; 0 is always one of the bracket ends when it lies on that side, and its
/// label is [`sign_flip_test`]'s p-value, so "the interval excludes 0" holds exactly when
/// that p-value is below 1 − confidence. Shifted data leave the grid, so the other shifts
/// are tested on all 2ⁿ patterns (n ≤ 20 cases) or on common random sign patterns (Monte
/// Carlo); where the acceptance set is not an interval (possible, rare), a bound is one of
/// its edges. No published reference computes this; see docs/dev/statistics.md for the checks.
pub fn sign_flip_interval(differences: &[f64], confidence: f64) -> Option<Interval> {
    let test = sign_flip_test(differences)?;
    if !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let alpha = 1.0 - confidence;
    let mean = test.mean;
    let null = NullSet::new(differences);
    let accepted = |delta: f64| -> bool {
        if delta == 0.0 {
            test.p_value >= alpha
        } else {
            null.p_value(differences, delta) >= alpha
        }
    };
    let bound = |outward: f64| inverted_bound(mean, outward, &accepted);
    Some(Interval {
        estimate: mean,
        low: bound(-1.0),
        high: bound(1.0),
        method: null.method,
    })
}

/// One end of an interval found by inverting a test: the shift δ between `estimate` and
/// `far` (±1, the scale's end) where `accepted(δ)` turns to a rejection, by bisection to
/// 1e-10. The bracket runs from an accepted shift to a rejected one; 0 is used as one end
/// whenever it lies on that side, so its verdict is the test's. Returns `far` when even
/// that is accepted.
fn inverted_bound(estimate: f64, far: f64, accepted: &impl Fn(f64) -> bool) -> f64 {
    let (mut inside, mut outside) = if (0.0 - estimate) * far > 0.0 {
        if accepted(0.0) {
            (0.0, far)
        } else {
            (estimate, 0.0)
        }
    } else {
        (estimate, far)
    };
    if outside == far && accepted(far) {
        return far;
    }
    for _ in 0..200 {
        let mid = 0.5 * (inside + outside);
        if mid == inside || mid == outside || (outside - inside).abs() < 1e-10 {
            break;
        }
        if accepted(mid) {
            inside = mid;
        } else {
            outside = mid;
        }
    }
    inside
}

/// The interval for the mean over cases, Σ sums / Σ sizes, of units (groups of cases) whose
/// signs flip together, inverting the sign-flip test on the group sums shifted by each
/// group's size: the shifts δ for which the test on S_g − n_g·δ does not reject at level
/// 1 − confidence (the statistic |Σ S − N·δ|, the patterns' A − δ·B with B = Σ ε_g·n_g).
/// The estimate and the test are about the same sums as the verdict's, so "the interval
/// excludes 0" holds exactly when `p_value` (the test by group, the label of δ = 0) is
/// below 1 − confidence. All 2^G patterns for G ≤ 20 groups, else Monte Carlo draws that
/// flip equal (sum, size) units together. Bisection to 1e-10. Returns (estimate, low,
/// high); `None` for no units, unequal lengths, non-finite values or sizes ≤ 0.
fn grouped_sign_flip_interval(
    sums: &[f64],
    sizes: &[f64],
    p_value: f64,
    confidence: f64,
) -> Option<(f64, f64, f64)> {
    if sums.is_empty()
        || sums.len() != sizes.len()
        || sums.iter().chain(sizes).any(|x| !x.is_finite())
        || sizes.iter().any(|&n| n <= 0.0)
        || !(confidence > 0.0 && confidence < 1.0)
    {
        return None;
    }
    let alpha = 1.0 - confidence;
    let n: f64 = sizes.iter().sum();
    let total: f64 = sums.iter().sum();
    let estimate = total / n;
    let null = NullSet::weighted(sums, sizes);
    let accepted = |delta: f64| -> bool {
        if delta == 0.0 {
            p_value >= alpha
        } else {
            null.p_value_of((total - n * delta).abs(), delta) >= alpha
        }
    };
    let bound = |far: f64| inverted_bound(estimate, far, &accepted);
    Some((estimate, bound(-1.0), bound(1.0)))
}

/// The interval a grouped comparison reports: [`grouped_sign_flip_interval`], repaired
/// where ties of the sums make the inversion degenerate, and always agreeing with the test
/// by group (`p_value`) about 0:
/// - one group: [−1, 1] (the test can never reject);
/// - no spread (every S_g = n_g·d̄, all-zero sums included): closed forms with c the t
///   critical value at Imbens & Kolesár's degrees of freedom: d̄ = 0 → ±c²/(G + c²); a
///   test that keeps 0 → [−1, 1]; else from d̄·G/(G + c²) to d̄;
/// - a bound pinned within 1e-9 of 0 by ties while d̄ ≠ 0 and the test keeps 0: moved
///   outward to the cluster-robust (CR2) t bound d̄ ∓ c·√V when that lies beyond.
///
/// Coverage with 40 groups of unequal sizes 94–95% (the interval on unweighted group means
/// used before: 75–90%, and it missed its own estimate in up to 8.5% of runs;
/// tests/fixtures/groups.py). Returns (estimate, low, high).
pub fn grouped_paired_interval(
    sums: &[f64],
    sizes: &[f64],
    p_value: f64,
    confidence: f64,
) -> Option<(f64, f64, f64)> {
    if sums.is_empty() || sums.len() != sizes.len() || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let alpha = 1.0 - confidence;
    let n: f64 = sizes.iter().sum();
    let d = sums.iter().sum::<f64>() / n;
    let g = sums.len() as f64;
    if sums.len() == 1 {
        return Some((d, -1.0, 1.0));
    }
    let cluster = super::cluster::ClusterMean::of(sums.iter().copied().zip(sizes.iter().copied()))?;
    let c = cluster.critical(confidence)?;
    let scale = sums.iter().map(|s| s.abs()).sum::<f64>().max(1.0);
    let spread = sums
        .iter()
        .zip(sizes)
        .map(|(s, w)| (s - w * d).abs())
        .fold(0.0, f64::max);
    if spread <= 1e-12 * scale {
        let edge = c * c / (g + c * c);
        return Some(if d == 0.0 {
            (d, -edge, edge)
        } else if p_value >= alpha {
            (d, -1.0, 1.0)
        } else {
            let near = d * g / (g + c * c);
            (d, near.min(d), near.max(d))
        });
    }
    let (d, mut lo, mut hi) = grouped_sign_flip_interval(sums, sizes, p_value, confidence)?;
    if d != 0.0 && p_value >= alpha {
        let half = c * cluster.variance.sqrt();
        if d > 0.0 && lo.abs() < 1e-9 {
            lo = lo.min((d - half).max(-1.0));
        }
        if d < 0.0 && hi.abs() < 1e-9 {
            hi = hi.max((d + half).min(1.0));
        }
    }
    Some((d, lo, hi))
}

/// The smallest L ≤ [`MAX_GRID`] with every value a multiple of 1/L (to 1e-9), if any.
fn common_grid(values: &[f64]) -> Option<u64> {
    let mut distinct: Vec<f64> = values.iter().map(|v| v.abs()).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let mut grid: u64 = 1;
    for &v in &distinct {
        if on_grid(v, grid) {
            continue;
        }
        let q = denominator(v)?;
        grid = lcm(grid, q);
        if grid > MAX_GRID {
            return None;
        }
    }
    Some(grid)
}

fn on_grid(v: f64, grid: u64) -> bool {
    let x = v * grid as f64;
    (x - x.round()).abs() < 1e-9 * grid as f64
}

/// The denominator (≤ MAX_GRID) of the continued-fraction convergent of `v` within 1e-9.
fn denominator(v: f64) -> Option<u64> {
    let (mut h0, mut h1, mut k0, mut k1) = (0.0_f64, 1.0_f64, 1.0_f64, 0.0_f64);
    let mut x = v;
    for _ in 0..64 {
        let a = x.floor();
        let (h2, k2) = (a * h1 + h0, a * k1 + k0);
        if k2 > MAX_GRID as f64 {
            return None;
        }
        if (h2 / k2 - v).abs() < 1e-10 {
            return Some(k2 as u64);
        }
        (h0, h1, k0, k1) = (h1, h2, k1, k2);
        let frac = x - a;
        if frac < 1e-12 {
            return None;
        }
        x = 1.0 / frac;
    }
    None
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

/// The binomial(c, ½) probabilities from `lo` to `hi` (inclusive) around the centre, with
/// everything below 1e-300 left out; returns (lo, probabilities).
fn half_binomial(c: u64) -> (u64, Vec<f64>) {
    let cf = c as f64;
    // 38 standard deviations reach below 1e-300; the tails beyond cannot move an f64 sum.
    let width = (19.0 * cf.sqrt()).ceil() as u64 + 2;
    let lo = (c / 2).saturating_sub(width);
    let hi = (c / 2 + width).min(c);
    let ln_norm = ln_gamma(cf + 1.0) - cf * std::f64::consts::LN_2;
    let probs = (lo..=hi)
        .map(|k| {
            let kf = k as f64;
            (ln_norm - ln_gamma(kf + 1.0) - ln_gamma(cf - kf + 1.0)).exp()
        })
        .collect();
    (lo, probs)
}

/// Exact two-sided p-value for differences on the grid j/`grid`: Y = Σ vᵢ·[εᵢ = +1] over the
/// magnitudes vᵢ = |jᵢ|, S* = 2Y − W. `None` if the convolution would exceed its budget.
fn grid_p_value(nonzero: &[f64], grid: u64) -> Option<f64> {
    let g = grid as f64;
    let mut s: i64 = 0;
    let mut magnitudes: Vec<u64> = Vec::with_capacity(nonzero.len());
    for &d in nonzero {
        let j = (d * g).round() as i64;
        s += j;
        magnitudes.push(j.unsigned_abs());
    }
    if s == 0 {
        return Some(1.0);
    }
    magnitudes.sort_unstable();
    let mut groups: Vec<(u64, u64)> = Vec::new();
    for v in magnitudes {
        match groups.last_mut() {
            Some((w, c)) if *w == v => *c += 1,
            _ => groups.push((v, 1)),
        }
    }
    let total: u64 = groups.iter().map(|(v, c)| v * c).sum();
    // S* ≥ |s| ⇔ Y ≥ (W + |s|)/2; W and s have the same parity.
    let threshold = (total + s.unsigned_abs()) / 2;
    if let [(v, c)] = groups[..] {
        // One magnitude: a binomial tail, P(X ≥ k) = I_½(k, c − k + 1).
        let k = threshold.div_ceil(v);
        let tail = if k == 0 {
            1.0
        } else if k > c {
            0.0
        } else {
            beta_reg(k as f64, (c - k + 1) as f64, 0.5)
        };
        return Some((2.0 * tail).min(1.0));
    }
    // Work: each group's pruned atoms times the running support.
    let mut work = 0.0;
    let mut span = 0.0;
    for &(v, c) in &groups {
        let atoms = (38.0 * (c as f64).sqrt() + 5.0).min(c as f64 + 1.0);
        span += v as f64 * atoms;
        work += span * atoms;
    }
    if work > GRID_WORK {
        return None;
    }
    // dist[i] = P(Y = offset + i)
    let mut offset: u64 = 0;
    let mut dist: Vec<f64> = vec![1.0];
    for &(v, c) in &groups {
        let (lo, probs) = half_binomial(c);
        let len = dist.len() + v as usize * (probs.len() - 1);
        let mut next = vec![0.0; len];
        for (a, &pa) in dist.iter().enumerate() {
            if pa == 0.0 {
                continue;
            }
            for (k, &pk) in probs.iter().enumerate() {
                next[a + k * v as usize] += pa * pk;
            }
        }
        offset += lo * v;
        // Trim what cannot matter to an f64 sum.
        let first = next.iter().position(|&x| x > 1e-300).unwrap_or(0);
        let last = next.iter().rposition(|&x| x > 1e-300).unwrap_or(0);
        offset += first as u64;
        dist = next[first..=last.max(first)].to_vec();
    }
    let tail: f64 = if threshold <= offset {
        1.0
    } else {
        let start = (threshold - offset) as usize;
        dist.iter().skip(start).rev().sum()
    };
    Some((2.0 * tail).min(1.0))
}

/// Random bits, handed out a few at a time, from a seeded generator.
struct Bits {
    rng: StdRng,
    word: u64,
    left: u32,
}

impl Bits {
    fn new(seed: u64) -> Self {
        Bits {
            rng: StdRng::seed_from_u64(seed),
            word: 0,
            left: 0,
        }
    }

    /// How many of `count` fresh fair coins come up heads.
    fn heads(&mut self, mut count: u64) -> u64 {
        let mut heads = 0;
        while count >= 64 {
            heads += u64::from(self.rng.next_u64().count_ones());
            count -= 64;
        }
        if count == 0 {
            return heads;
        }
        let c = count as u32;
        if self.left < c {
            self.word = self.rng.next_u64();
            self.left = 64;
        }
        heads += u64::from((self.word & ((1u64 << c) - 1)).count_ones());
        self.word = if c == 64 { 0 } else { self.word >> c };
        self.left -= c;
        heads
    }
}

/// Monte Carlo draws used for `distinct` distinct values of a null set.
fn draws_for(distinct: usize) -> u64 {
    let affordable = (MONTE_CARLO_WORK / distinct.max(1) as f64) as u64;
    MONTE_CARLO_DRAWS.min(affordable.max(10_000))
}

/// Sign patterns of the null distribution, each kept as A = Σ εᵢdᵢ and B = Σ εᵢ, so the
/// statistic of the data shifted by δ is A − δB for every δ at no extra cost.
struct NullSet {
    a: Vec<f64>,
    b: Vec<f64>,
    method: Method,
    /// Scale of the data, for the tolerance of ties.
    scale: f64,
}

impl NullSet {
    fn new(values: &[f64]) -> Self {
        NullSet::weighted(values, &vec![1.0; values.len()])
    }

    /// The patterns of units with these values and weights: A = Σ εᵢ·valueᵢ and
    /// B = Σ εᵢ·weightᵢ, so the statistic of the values shifted by δ·weight is A − δ·B.
    fn weighted(values: &[f64], weights: &[f64]) -> Self {
        let n = values.len();
        let scale = values.iter().map(|d| d.abs()).sum::<f64>().max(1.0);
        if n <= MAX_ENUMERATED {
            let count = 1usize << n;
            let mut a = Vec::with_capacity(count);
            let mut b = Vec::with_capacity(count);
            for mask in 0..count {
                let (mut sa, mut sb) = (0.0, 0.0);
                for (i, (&d, &w)) in values.iter().zip(weights).enumerate() {
                    if mask >> i & 1 == 1 {
                        sa += d;
                        sb += w;
                    } else {
                        sa -= d;
                        sb -= w;
                    }
                }
                a.push(sa);
                b.push(sb);
            }
            return NullSet {
                a,
                b,
                method: Method::ExactEnumeration,
                scale,
            };
        }
        // Equal (value, weight) units flip as a binomial count: one draw per kind.
        let mut sorted: Vec<(f64, f64)> = values
            .iter()
            .copied()
            .zip(weights.iter().copied())
            .collect();
        sorted.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
        let mut groups: Vec<(f64, f64, u64)> = Vec::new();
        for (v, w) in sorted {
            match groups.last_mut() {
                Some((gv, gw, c)) if *gv == v && *gw == w => *c += 1,
                _ => groups.push((v, w, 1)),
            }
        }
        let draws = draws_for(groups.len());
        let mut bits = Bits::new(SEED);
        let mut a = Vec::with_capacity(draws as usize);
        let mut b = Vec::with_capacity(draws as usize);
        for _ in 0..draws {
            let (mut sa, mut sb) = (0.0, 0.0);
            for &(v, w, c) in &groups {
                let plus = (2 * bits.heads(c)) as f64 - c as f64;
                sa += v * plus;
                sb += w * plus;
            }
            a.push(sa);
            b.push(sb);
        }
        NullSet {
            a,
            b,
            method: Method::MonteCarlo { draws },
            scale,
        }
    }

    /// The two-sided p-value of the data shifted by `delta`.
    fn p_value(&self, values: &[f64], delta: f64) -> f64 {
        let n = values.len() as f64;
        self.p_value_of((values.iter().sum::<f64>() - n * delta).abs(), delta)
    }

    /// The two-sided p-value of an observed statistic |Σ value − δ·Σ weight|.
    fn p_value_of(&self, observed: f64, delta: f64) -> f64 {
        let tolerance = 1e-10 * self.scale;
        let extreme = self
            .a
            .iter()
            .zip(&self.b)
            .filter(|&(&a, &b)| (a - delta * b).abs() >= observed - tolerance)
            .count() as f64;
        match self.method {
            Method::MonteCarlo { draws } => (extreme + 1.0) / (draws as f64 + 1.0),
            _ => extreme / self.a.len() as f64,
        }
        .min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mcnemar(b: u64, c: u64) -> f64 {
        let n = b + c;
        let k = b.min(c);
        if n == 0 || 2 * k == n {
            return 1.0;
        }
        (2.0 * beta_reg((n - k) as f64, (k + 1) as f64, 0.5)).min(1.0)
    }

    fn binary(b: usize, c: usize, ties: usize) -> Vec<f64> {
        let mut d = vec![1.0; b];
        d.extend(vec![-1.0; c]);
        d.extend(vec![0.0; ties]);
        d
    }

    #[test]
    fn binary_differences_are_exact_mcnemar() {
        for (b, c, t) in [(0, 5, 3), (12, 0, 28), (7, 3, 10), (40, 61, 200), (5, 5, 2)] {
            let r = sign_flip_test(&binary(b, c, t)).unwrap();
            assert_eq!(r.method, Method::ExactGrid { grid: 1 });
            assert!(
                (r.p_value - mcnemar(b as u64, c as u64)).abs() < 1e-14,
                "{b} {c}"
            );
        }
    }

    #[test]
    fn two_perfect_cases_are_not_significant() {
        // Variant 3/3 and baseline 0/3 on two cases: only 4 sign patterns, p = 2/4.
        let r = sign_flip_test(&[1.0, 1.0]).unwrap();
        assert!((r.p_value - 0.5).abs() < 1e-12, "{}", r.p_value);
    }

    #[test]
    fn repeats_average_before_testing() {
        // k = 3 on both sides: thirds; the same differences whatever the repeat count.
        let d = [2.0 / 3.0, -1.0 / 3.0, 1.0, 1.0 / 3.0, 0.0, 2.0 / 3.0];
        let r = sign_flip_test(&d).unwrap();
        assert_eq!(r.method, Method::ExactGrid { grid: 3 });
        // Enumerated by hand: equals the brute-force count over 2^5 non-zero patterns.
        let nz: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0).collect();
        let s: f64 = nz.iter().sum();
        let mut extreme = 0;
        for mask in 0..(1 << nz.len()) {
            let t: f64 = nz
                .iter()
                .enumerate()
                .map(|(i, x)| if mask >> i & 1 == 1 { *x } else { -x })
                .sum();
            if t.abs() >= s.abs() - 1e-12 {
                extreme += 1;
            }
        }
        assert!((r.p_value - extreme as f64 / 32.0).abs() < 1e-12);
    }

    #[test]
    fn large_grid_data_stay_exact_and_fast() {
        // 100,000 cases in thirds, differences centred near 0.
        let d: Vec<f64> = (0..100_000)
            .map(|i| ((i * 7919) % 7) as f64 / 3.0 - 1.0)
            .collect();
        let d: Vec<f64> = d.into_iter().map(|x| x.clamp(-1.0, 1.0)).collect();
        let r = sign_flip_test(&d).unwrap();
        assert!(
            matches!(r.method, Method::ExactGrid { .. }),
            "{:?}",
            r.method
        );
        assert!(r.p_value >= 0.0 && r.p_value <= 1.0);
    }

    #[test]
    fn off_grid_small_samples_are_enumerated_and_large_ones_sampled() {
        let d = [0.123456789, -0.5, 0.31415926, 0.2718281828];
        assert_eq!(sign_flip_test(&d).unwrap().method, Method::ExactEnumeration);
        let d: Vec<f64> = (0..30)
            .map(|i| ((i as f64) * 0.7137).sin() * 0.3 + 0.05)
            .collect();
        let r = sign_flip_test(&d).unwrap();
        assert_eq!(
            r.method,
            Method::MonteCarlo {
                draws: MONTE_CARLO_DRAWS
            }
        );
        assert!(r.p_value > 0.0);
    }

    #[test]
    fn nothing_to_test() {
        assert_eq!(sign_flip_test(&[]), None);
        assert_eq!(sign_flip_test(&[f64::NAN]), None);
        assert_eq!(sign_flip_test(&[0.0, 0.0]).unwrap().p_value, 1.0);
        assert_eq!(sign_flip_interval(&[], 0.95), None);
        assert_eq!(sign_flip_interval(&[0.5], 1.0), None);
    }

    #[test]
    fn interval_agrees_with_the_test_at_zero() {
        for (b, c, t) in [(10, 2, 52), (9, 2, 53), (8, 2, 54), (3, 3, 58), (0, 6, 10)] {
            let d = binary(b, c, t);
            let p = sign_flip_test(&d).unwrap().p_value;
            for conf in [0.9, 0.95, 0.99] {
                let i = sign_flip_interval(&d, conf).unwrap();
                let excludes = i.low > 0.0 || i.high < 0.0;
                assert_eq!(excludes, p < 1.0 - conf, "{b} {c} {conf}: {i:?} p={p}");
                assert!(i.low <= i.estimate && i.estimate <= i.high);
            }
        }
    }

    #[test]
    fn interval_widens_with_confidence() {
        let d = binary(14, 5, 45);
        let a = sign_flip_interval(&d, 0.8).unwrap();
        let b = sign_flip_interval(&d, 0.99).unwrap();
        assert!(b.low < a.low && a.high < b.high, "{a:?} {b:?}");
    }
}
