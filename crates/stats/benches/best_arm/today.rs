//! `run --best`'s search as it was before issue 54 (crates/stats/src/best.rs at 61dc2e0), kept
//! unchanged but for its tests so the simulation compares the two on the same cases.
#![allow(dead_code, unreachable_pub)]

use serde::{Deserialize, Serialize};

/// Cases of prior weight holding the bets toward zero: a bet made on a handful of cases
/// would swing with each.
const PRIOR_CASES: f64 = 8.0;
/// Cases of prior weight holding a within test's bet at the one that is best when the two
/// arms do not differ (ε over the second moment): its null is ε away, a distance the
/// early cases' mean cannot tell from noise.
const WITHIN_PRIOR_CASES: f64 = 200.0;
/// Largest bet, as a share of what 1 + λ(d − c) ≥ 0 allows.
const MAX_BET: f64 = 0.8;
/// Margins (in score units) of the extra better tests that bound an eliminated arm's gap.
pub const MARGINS: [f64; 6] = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2];

/// What the tests are asked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BestSettings {
    /// The arms (variants, endpoints, or variant × endpoint cells).
    pub arms: usize,
    /// How close to the best counts as the best (in score units: 0.02 is 2 points).
    pub epsilon: f64,
    /// The chance the answer is right (the best arm is in it, or it is within ε of the best).
    pub confidence: f64,
    /// Bound each eliminated arm's gap ([`MARGINS`]); a simulation that needs only the
    /// decisions leaves it off (the decisions are the same).
    #[serde(default = "yes")]
    pub gap_bounds: bool,
}

fn yes() -> bool {
    true
}

impl BestSettings {
    /// Each test's level: the error shared over the 2(K − 1) tests a wrong answer needs.
    pub fn alpha(&self) -> f64 {
        (1.0 - self.confidence) / (2.0 * (self.arms.max(2) - 1) as f64)
    }
}

/// An arm eliminated: after how many cases, by which arm, and by at least how much it is
/// below that arm (at the tests' level).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Elimination {
    pub arm: usize,
    pub by: usize,
    pub cases: u64,
    /// The largest of [`MARGINS`] the arm is shown to be below `by` by (0: below, by an
    /// amount not yet bounded).
    pub gap_at_least: f64,
    /// How far below `by` it scored on the cases both were sent.
    pub gap_seen: f64,
}

/// Where the search stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BestVerdict {
    /// Arms are still in play and not all confirmed.
    Open,
    /// One arm is left: the best, or within ε of it.
    One(usize),
    /// These arms (highest mean first; at least one) are each confirmed against every arm
    /// left: each is the best or within ε of it. The others left may be too, or not.
    WithinEpsilon(Vec<usize>),
}

/// One one-sided betting test of "E d ≤ c" on a pair's cases.
#[derive(Debug, Clone, Copy)]
struct Bet {
    c: f64,
    /// What the mean of d is taken to be before the cases say (and with what weight, in
    /// cases): a better test assumes no edge (d's mean at c), a within test no difference
    /// (d's mean at 0, an edge of ε over its null).
    prior_mean: f64,
    prior_cases: f64,
    wealth: f64,
    crossed: bool,
}

impl Bet {
    fn better(c: f64) -> Bet {
        Bet {
            c,
            prior_mean: c,
            prior_cases: PRIOR_CASES,
            wealth: 1.0,
            crossed: false,
        }
    }

    fn within(epsilon: f64) -> Bet {
        Bet {
            c: -epsilon,
            prior_mean: 0.0,
            prior_cases: WITHIN_PRIOR_CASES,
            wealth: 1.0,
            crossed: false,
        }
    }

    /// The bet on the next unit, from the pair's sums so far: growth-optimal for
    /// y = w·(d − c), the mean of y over its second moment, each shrunk toward the prior
    /// (at the mean weight seen). With every w = 1 (cases, or groups of one size) y = d − c.
    fn size(&self, s: &Sums) -> f64 {
        let c = self.c;
        let w_bar = if s.n > 0.0 { s.w / s.n } else { 1.0 };
        let sum = s.wd - c * s.w;
        let sum2 = s.w2d2 - 2.0 * c * s.w2d + c * c * s.w2;
        let mean =
            (sum + self.prior_cases * w_bar * (self.prior_mean - c)) / (s.n + self.prior_cases);
        let m2 = (sum2 + PRIOR_CASES * 0.25 * w_bar * w_bar) / (s.n + PRIOR_CASES);
        if mean <= 0.0 || m2 <= 0.0 {
            return 0.0;
        }
        (mean / m2).min(MAX_BET / (1.0 + c))
    }

    /// Bets `lambda` on the unit's y = w·(d − c) ≥ −(1 + c), so 1 + λy ≥ 1 − [`MAX_BET`].
    fn hear(&mut self, lambda: f64, y: f64, threshold: f64) {
        if self.crossed {
            return;
        }
        self.wealth *= 1.0 + lambda * y;
        if self.wealth >= threshold {
            self.crossed = true;
        }
    }
}

/// The tests of one ordered pair (i, j), on d = xᵢ − xⱼ, each unit weighted by w (its
/// cases over the largest unit's): the sums of w, w·d, w², w²·d and w²·d² the bets need.
#[derive(Debug, Clone)]
struct Pair {
    n: f64,
    w: f64,
    wd: f64,
    w2: f64,
    w2d: f64,
    w2d2: f64,
    /// "i is no better than j" at each of [`MARGINS`]; the first (c = 0) eliminates j.
    better: Vec<Bet>,
    /// "j is more than ε better than i": crossed confirms i against j.
    within: Bet,
}

impl Pair {
    fn new(epsilon: f64, gap_bounds: bool) -> Pair {
        Pair {
            n: 0.0,
            w: 0.0,
            wd: 0.0,
            w2: 0.0,
            w2d: 0.0,
            w2d2: 0.0,
            better: MARGINS[..if gap_bounds { MARGINS.len() } else { 1 }]
                .iter()
                .map(|&c| Bet::better(c))
                .collect(),
            within: Bet::within(epsilon),
        }
    }

    fn hear(&mut self, d: f64, w: f64, threshold: f64) {
        let sums = Sums {
            n: self.n,
            w: self.w,
            wd: self.wd,
            w2: self.w2,
            w2d: self.w2d,
            w2d2: self.w2d2,
        };
        for bet in self
            .better
            .iter_mut()
            .chain(std::iter::once(&mut self.within))
        {
            let lambda = bet.size(&sums);
            bet.hear(lambda, w * (d - bet.c), threshold);
        }
        self.n += 1.0;
        self.w += w;
        self.wd += w * d;
        self.w2 += w * w;
        self.w2d += w * w * d;
        self.w2d2 += w * w * d * d;
    }

    /// The mean of d over the cases heard (each unit weighing its cases).
    fn mean(&self) -> f64 {
        if self.w > 0.0 { self.wd / self.w } else { 0.0 }
    }
}

/// A pair's sums before the unit being bet on.
struct Sums {
    n: f64,
    w: f64,
    wd: f64,
    w2: f64,
    w2d: f64,
    w2d2: f64,
}

/// The search for the best of K arms, case by case.
#[derive(Debug, Clone)]
pub struct BestArm {
    settings: BestSettings,
    threshold: f64,
    alive: Vec<bool>,
    cases: u64,
    /// Each arm's weighted score sum and weight heard while it was in play (weights are
    /// cases, as a share of the largest unit's: the mean is over cases).
    sums: Vec<(f64, f64)>,
    pairs: Vec<Pair>,
    eliminated: Vec<Elimination>,
}

impl BestArm {
    pub fn new(settings: BestSettings) -> BestArm {
        let k = settings.arms;
        BestArm {
            settings,
            threshold: 1.0 / settings.alpha(),
            alive: vec![true; k],
            cases: 0,
            sums: vec![(0.0, 0.0); k],
            pairs: (0..k * k)
                .map(|_| Pair::new(settings.epsilon, settings.gap_bounds))
                .collect(),
            eliminated: Vec::new(),
        }
    }

    /// Whether `arm` is still sent cases.
    pub fn alive(&self, arm: usize) -> bool {
        self.alive.get(arm).copied().unwrap_or(false)
    }

    /// The arms still in play.
    pub fn remaining(&self) -> Vec<usize> {
        (0..self.settings.arms).filter(|&a| self.alive[a]).collect()
    }

    /// Cases heard.
    pub fn cases(&self) -> u64 {
        self.cases
    }

    /// Each arm's mean score over the cases it was sent, every case weighing one (a group
    /// weighs its cases); `None` before any.
    pub fn means(&self) -> Vec<Option<f64>> {
        self.sums
            .iter()
            .map(|&(s, w)| (w > 0.0).then(|| s / w))
            .collect()
    }

    /// The eliminations so far, in order.
    pub fn eliminated(&self) -> &[Elimination] {
        &self.eliminated
    }

    /// Hears one case: each arm in play's score (`scores[arm]`, in [0, 1]; others ignored).
    /// Returns the arms it eliminated. An arm in play without a score is an error of the
    /// caller: the case is not heard.
    pub fn hear(&mut self, scores: &[Option<f64>]) -> Vec<Elimination> {
        self.hear_unit(scores, 1.0)
    }

    /// Hears one unit of cases (a group): each arm in play's mean score over its cases, and
    /// its `weight` — its cases over the largest unit's, in (0, 1]. The tests are of the mean
    /// over cases, μ = E[Σ scores]/E[cases] with units drawn at random (docs/dev/statistics.md
    /// §9): each bets on w·(d − c), whose mean is ≤ 0 exactly when the case-weighted mean
    /// difference is ≤ c. A unit out of range, like an arm in play without a score, is not
    /// heard.
    pub fn hear_unit(&mut self, scores: &[Option<f64>], weight: f64) -> Vec<Elimination> {
        let k = self.settings.arms;
        let alive = self.remaining();
        if alive.len() < 2
            || !(weight > 0.0 && weight <= 1.0)
            || alive.iter().any(|&a| {
                !scores
                    .get(a)
                    .copied()
                    .flatten()
                    .is_some_and(|x| (0.0..=1.0).contains(&x))
            })
        {
            return Vec::new();
        }
        self.cases += 1;
        for &a in &alive {
            let x = scores[a].unwrap_or(0.0);
            self.sums[a].0 += weight * x;
            self.sums[a].1 += weight;
        }
        for &i in &alive {
            for &j in &alive {
                if i != j {
                    let d = scores[i].unwrap_or(0.0) - scores[j].unwrap_or(0.0);
                    self.pairs[i * k + j].hear(d, weight, self.threshold);
                }
            }
        }
        self.eliminate(&alive)
    }

    /// Takes out every arm in play that an arm in play is shown better than.
    fn eliminate(&mut self, alive: &[usize]) -> Vec<Elimination> {
        let k = self.settings.arms;
        let mut out = Vec::new();
        for &j in alive {
            // The arm in play that beats j by the widest margin shown.
            let beaten_by = alive
                .iter()
                .filter(|&&i| i != j && self.pairs[i * k + j].better[0].crossed)
                .map(|&i| (i, self.gap_shown(i, j)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((by, gap)) = beaten_by {
                let pair = &self.pairs[by * k + j];
                out.push(Elimination {
                    arm: j,
                    by,
                    cases: self.cases,
                    gap_at_least: gap,
                    gap_seen: pair.mean(),
                });
            }
        }
        // Never all: arms eliminated by each other in one case (possible only by error)
        // leave the one with the best mean.
        if out.len() == alive.len() {
            let keep = alive
                .iter()
                .copied()
                .max_by(|&a, &b| {
                    let m = |x: usize| self.sums[x].0 / self.sums[x].1.max(f64::MIN_POSITIVE);
                    m(a).total_cmp(&m(b))
                })
                .unwrap_or(alive[0]);
            out.retain(|e| e.arm != keep);
        }
        for e in &out {
            self.alive[e.arm] = false;
        }
        self.eliminated.extend(out.iter().copied());
        out
    }

    /// The largest margin by which `i` is shown better than `j`.
    fn gap_shown(&self, i: usize, j: usize) -> f64 {
        let pair = &self.pairs[i * self.settings.arms + j];
        pair.better
            .iter()
            .filter(|b| b.crossed)
            .map(|b| b.c)
            .fold(0.0, f64::max)
    }

    /// Where the search stands.
    pub fn verdict(&self) -> BestVerdict {
        let alive = self.remaining();
        if alive.len() == 1 {
            return BestVerdict::One(alive[0]);
        }
        let confirmed = self.confirmed();
        if confirmed.is_empty() {
            BestVerdict::Open
        } else {
            BestVerdict::WithinEpsilon(confirmed)
        }
    }

    /// The arms in play confirmed against every other arm in play: each is the best or
    /// within ε of it. Highest mean first.
    pub fn confirmed(&self) -> Vec<usize> {
        let alive = self.remaining();
        let k = self.settings.arms;
        let mut confirmed: Vec<usize> = alive
            .iter()
            .copied()
            .filter(|&i| {
                alive
                    .iter()
                    .all(|&j| i == j || self.pairs[i * k + j].within.crossed)
            })
            .collect();
        let means = self.means();
        confirmed.sort_by(|&a, &b| means[b].unwrap_or(0.0).total_cmp(&means[a].unwrap_or(0.0)));
        confirmed
    }
}
