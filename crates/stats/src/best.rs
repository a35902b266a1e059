//! Best of many (`run --best`, docs/dev/statistics.md §9): K arms — variants, or endpoints —
//! see the cases in one seeded order. Each case goes to the *contenders*: the leader (the
//! arm in play with the highest mean) and every arm in play the leader is not yet confirmed
//! against. An arm shown not to be the best is put out; the search ends when one arm is
//! left, when the leader is confirmed against every arm in play (it is the best or within ε
//! of it), or when the cases left cannot separate the leader from a contender ("the best is
//! one of …").
//!
//! Each case t gives every contender a score in [0, 1] (a case mean with repeats). For each
//! ordered pair of contenders (i, j), dₜ = xᵢ − xⱼ ∈ [−1, 1], and one-sided tests of a mean
//! run on the pair's cases, each a test supermartingale (betting wealth)
//! Wₜ = Π (1 + λₛ (dₛ − c)) with λₛ ≥ 0 fixed from the cases before s:
//!
//! - **better** (c = 0): "i is no better than j" (E d ≤ 0).
//! - **within** (c = −ε): "j is more than ε better than i" (E d ≤ −ε). Its wealth reaching
//!   its bar says j is not: i is *confirmed* against j, for good.
//!
//! Which arms hear a case is decided from the cases before it, and a pair's tests hear only
//! the cases both arms were sent: each test's wealth stays a supermartingale under its null
//! (optional skipping), so Ville's inequality holds at whatever case anyone looks.
//!
//! **Out.** Under "j is the best", every better test (i, j) has a true null, so the mean of
//! their wealths over the K − 1 rivals, Eⱼ = Σᵢ Wᵢⱼ/(K − 1), is an e-process too: j is put
//! out when Eⱼ ≥ 1/α_out. The evidence of all its rivals together counts, not the strongest
//! rival's alone, and a best arm a* is put out with probability at most α_out.
//!
//! **Confirmed.** An arm b named while μₐ* − μ_b > ε needs the within test of (b, a*) crossed
//! under a true null: K − 1 such tests, each at α_in = α_conf/(K − 1).
//!
//! With α_out = [`OUT_SHARE`]·(1 − confidence) and α_conf = the rest, P(wrong) ≤
//! 1 − confidence at whatever case the run stops, for any correlation between arms and any
//! scores in [0, 1]. Tests of pairs without a* can only make wrong calls about arms that are
//! not the answer. The split only moves error between the two ways of being wrong; any
//! split keeps the guarantee, and once cases go to the contenders most runs end by
//! confirming, so most of it goes there.
//!
//! Groups of cases (`group:`) are heard whole, each a unit weighing its cases: a group of n
//! cases bets on w·(dₜ − c), w = n / (the largest group's n), so every test and every mean
//! is of the mean over cases — the estimand of every other figure of the report — with
//! groups as the sampling unit ([`BestArm::hear_unit`]).
//!
//! The bets. A better test bets the growth-rate-optimal bet for the mean and second moment
//! of d − c seen so far (shrunk toward no bet by [`PRIOR_CASES`]), at most
//! [`MAX_BET`]/(1 + c) — a plug-in of the kind Waudby-Smith and Ramdas (2024, "Estimating
//! means of bounded random variables by betting", JRSS B) call aGRAPA. A within test's null
//! is ε away, a distance the early cases cannot tell from noise, so its wealth is a mixture
//! ([`WITHIN_MIX`]): the plug-in held near the bet that is best when the arms do not differ
//! (by [`WITHIN_PRIOR_CASES`]), the plug-in unshrunk, and a few fixed bets. A mixture of
//! test supermartingales with fixed weights is one; any predictable λ keeps the guarantee,
//! the choice only sets how fast the wealth grows when the null is false. Paired bets use
//! what the arms share: two arms right and wrong on the same cases have d = 0 there, a small
//! second moment, and large bets.
//!
//! **Futility.** When the bench's size is known, the search also stops when even an
//! optimistic projection — each open test growing for every case left at the best constant
//! bet's rate for its mean seen plus [`FUTILITY_Z`] standard errors — crosses no bar that
//! would settle a contender against the leader. Stopping early keeps the guarantee; the
//! answer is then the contenders ([`BestVerdict::OneOf`]).
//!
//! How far below the winner an eliminated arm is: the better test runs at a few margins
//! c ∈ [`MARGINS`] too; the largest c whose wealth reached the pair's bar 1/α_in is a lower
//! bound on μᵢ − μⱼ (the tests inverted into a confidence sequence), said with the
//! elimination.

use serde::{Deserialize, Serialize};

/// Cases of prior weight holding the bets toward zero: a bet made on a handful of cases
/// would swing with each.
const PRIOR_CASES: f64 = 8.0;
/// Cases of prior weight holding the cautious part of a within test's bet at the one that
/// is best when the two arms do not differ (ε over the second moment).
const WITHIN_PRIOR_CASES: f64 = 200.0;
/// Largest bet, as a share of what 1 + λ(d − c) ≥ 0 allows.
const MAX_BET: f64 = 0.8;
/// A within test's mixture: the weight of its cautious plug-in, of its unshrunk plug-in, and
/// of each fixed bet (as a share of the largest bet allowed).
const WITHIN_MIX: (f64, f64, [(f64, f64); 5]) = (
    0.3,
    0.2,
    [(0.1, 0.05), (0.1, 0.1), (0.1, 0.2), (0.1, 0.45), (0.1, 1.0)],
);
/// The share of the error spent on putting arms out; the rest confirms the leader.
pub const OUT_SHARE: f64 = 0.2;
/// Standard errors of optimism in the futility projection.
const FUTILITY_Z: f64 = 1.5;
/// Units a pair hears before the futility projection trusts its mean and spread.
const FUTILITY_MIN_UNITS: f64 = 30.0;
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
    /// The units (cases, or groups) the bench holds, when the search may stop once the rest
    /// cannot decide it; `None`: it runs until it decides or the caller stops.
    #[serde(default)]
    pub units: Option<u64>,
}

fn yes() -> bool {
    true
}

impl BestSettings {
    /// The level of putting a best arm out (one pooled test per arm).
    pub fn alpha_out(&self) -> f64 {
        OUT_SHARE * (1.0 - self.confidence)
    }

    /// Each pair's level: a within test's, and the margins' that bound a gap.
    pub fn alpha_in(&self) -> f64 {
        (1.0 - OUT_SHARE) * (1.0 - self.confidence) / (self.arms.max(2) - 1) as f64
    }
}

/// The fixed design with a search's guarantee: the cases each of `arms` arms needs so the
/// highest mean is within `epsilon` of the best with probability `confidence` when the
/// best is more than ε ahead — z²·Var(d)/ε², z at 1 − (1 − confidence)/(K − 1) (Bechhofer's
/// indifference zone, Bonferroni across the others; docs/dev/statistics.md §9).
pub fn fixed_design_cases(arms: usize, confidence: f64, variance: f64, epsilon: f64) -> u64 {
    let z = crate::z_for(1.0 - 2.0 * (1.0 - confidence) / (arms.max(2) - 1) as f64);
    (z * z * variance / (epsilon * epsilon)).ceil() as u64
}

/// An arm eliminated: after how many cases, by which arm, and by at least how much it is
/// below that arm (at the pair's level).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Elimination {
    pub arm: usize,
    /// The rival whose evidence against it was strongest.
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
    /// The cases left cannot separate these contenders (the leader first): the best, or an
    /// arm within ε of it, is one of them.
    OneOf(Vec<usize>),
}

/// How a bet is sized before each unit.
#[derive(Debug, Clone, Copy)]
enum Sizing {
    /// The growth-optimal bet for the pair's mean and second moment of d − c so far, shrunk
    /// toward a prior mean of d with the weight of `cases` cases.
    PlugIn { prior_mean: f64, cases: f64 },
    /// A fixed share of the largest bet allowed.
    Fixed(f64),
}

/// One one-sided betting test of "E d ≤ c" on a pair's cases.
#[derive(Debug, Clone, Copy)]
struct Bet {
    c: f64,
    sizing: Sizing,
    wealth: f64,
}

impl Bet {
    /// The better test's bet: no edge assumed before the cases say.
    fn better(c: f64) -> Bet {
        Bet {
            c,
            sizing: Sizing::PlugIn {
                prior_mean: c,
                cases: PRIOR_CASES,
            },
            wealth: 1.0,
        }
    }

    /// The bet on the next unit, from the pair's sums so far: growth-optimal for
    /// y = w·(d − c), the mean of y over its second moment, each shrunk toward the prior
    /// (at the mean weight seen), or the fixed share. With every w = 1 (cases, or groups
    /// of one size) y = d − c.
    fn size(&self, s: &Sums) -> f64 {
        let c = self.c;
        let cap = MAX_BET / (1.0 + c);
        let (prior_mean, prior_cases) = match self.sizing {
            Sizing::Fixed(share) => return share * cap,
            Sizing::PlugIn { prior_mean, cases } => (prior_mean, cases),
        };
        let w_bar = if s.n > 0.0 { s.w / s.n } else { 1.0 };
        let (sum, sum2) = s.of(c);
        let mean = (sum + prior_cases * w_bar * (prior_mean - c)) / (s.n + prior_cases);
        let m2 = (sum2 + PRIOR_CASES * 0.25 * w_bar * w_bar) / (s.n + PRIOR_CASES);
        if mean <= 0.0 || m2 <= 0.0 {
            return 0.0;
        }
        (mean / m2).min(cap)
    }

    /// Bets on the unit's y = w·(d − c) ≥ −(1 + c), so 1 + λy ≥ 1 − [`MAX_BET`].
    /// Returns the unit's factor, 1 + λy.
    fn hear(&mut self, sums: &Sums, d: f64, w: f64) -> f64 {
        let lambda = self.size(sums);
        let factor = 1.0 + lambda * w * (d - self.c);
        self.wealth *= factor;
        factor
    }
}

/// The within test's wealth: a fixed-weight mixture of bets on "E d ≤ −ε", which is a test
/// supermartingale as each part is.
#[derive(Debug, Clone)]
struct Within {
    parts: Vec<(f64, Bet)>,
    crossed: bool,
}

impl Within {
    fn new(epsilon: f64) -> Within {
        let c = -epsilon;
        let plug_in = |cases| Bet {
            c,
            sizing: Sizing::PlugIn {
                prior_mean: 0.0,
                cases,
            },
            wealth: 1.0,
        };
        let (cautious, unshrunk, fixed) = WITHIN_MIX;
        let mut parts = vec![
            (cautious, plug_in(WITHIN_PRIOR_CASES)),
            (unshrunk, plug_in(PRIOR_CASES)),
        ];
        parts.extend(fixed.iter().map(|&(weight, share)| {
            let bet = Bet {
                c,
                sizing: Sizing::Fixed(share),
                wealth: 1.0,
            };
            (weight, bet)
        }));
        Within {
            parts,
            crossed: false,
        }
    }

    fn wealth(&self) -> f64 {
        self.parts.iter().map(|(w, b)| w * b.wealth).sum()
    }
}

/// The tests of one ordered pair (i, j), on d = xᵢ − xⱼ, each unit weighted by w (its
/// cases over the largest unit's).
#[derive(Debug, Clone)]
struct Pair {
    sums: Sums,
    /// "i is no better than j" at each of [`MARGINS`]; the first (c = 0) is the one that
    /// counts toward putting j out.
    better: Vec<Bet>,
    /// Which margins' wealth reached the pair's bar (once reached, for good).
    margin_crossed: Vec<bool>,
    /// "j is more than ε better than i": crossed confirms i against j.
    within: Within,
}

impl Pair {
    fn new(epsilon: f64, gap_bounds: bool) -> Pair {
        let margins = &MARGINS[..if gap_bounds { MARGINS.len() } else { 1 }];
        Pair {
            sums: Sums::default(),
            better: margins.iter().map(|&c| Bet::better(c)).collect(),
            margin_crossed: vec![false; margins.len()],
            within: Within::new(epsilon),
        }
    }

    /// Hears one unit; `bar` is the pair's bar (1/α_in). Returns the better test's factor
    /// (c = 0) for the unit.
    fn hear(&mut self, d: f64, w: f64, bar: f64) -> f64 {
        let sums = self.sums;
        let mut first = 1.0;
        for (m, (bet, crossed)) in self
            .better
            .iter_mut()
            .zip(&mut self.margin_crossed)
            .enumerate()
        {
            let factor = bet.hear(&sums, d, w);
            if m == 0 {
                first = factor;
            }
            *crossed |= bet.wealth >= bar;
        }
        if !self.within.crossed {
            for (_, bet) in &mut self.within.parts {
                bet.hear(&sums, d, w);
            }
            self.within.crossed = self.within.wealth() >= bar;
        }
        self.sums.add(d, w);
        first
    }

    /// The evidence that i is better than j (c = 0).
    fn better_wealth(&self) -> f64 {
        self.better[0].wealth
    }

    /// The mean of d over the cases heard (each unit weighing its cases).
    fn mean(&self) -> f64 {
        self.sums.mean()
    }
}

/// A pair's sums: of w, w·d, w², w²·d and w²·d² over its units, which the bets need.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    n: f64,
    w: f64,
    wd: f64,
    w2: f64,
    w2d: f64,
    w2d2: f64,
}

impl Sums {
    fn add(&mut self, d: f64, w: f64) {
        self.n += 1.0;
        self.w += w;
        self.wd += w * d;
        self.w2 += w * w;
        self.w2d += w * w * d;
        self.w2d2 += w * w * d * d;
    }

    /// Σy and Σy² for y = w·(d − c).
    fn of(&self, c: f64) -> (f64, f64) {
        (
            self.wd - c * self.w,
            self.w2d2 - 2.0 * c * self.w2d + c * c * self.w2,
        )
    }

    fn mean(&self) -> f64 {
        if self.w > 0.0 { self.wd / self.w } else { 0.0 }
    }

    /// How fast, per unit, a test of "E d ≤ c" grows if y = w·(d − c) keeps the mean and
    /// spread seen (the best constant bet's rate, natural log); `None` when it would not.
    fn growth_seen(&self, c: f64) -> Option<f64> {
        if self.n < 2.0 {
            return None;
        }
        let (sum, sum2) = self.of(c);
        let rate = constant_bet_growth(sum / self.n, sum2 / self.n, c);
        (rate > 0.0).then_some(rate)
    }

    /// The most a test of "E d ≤ c" could grow by over `units` more units if y = w·(d − c)
    /// kept its spread and its mean were [`FUTILITY_Z`] standard errors above the one seen:
    /// `units` × the best constant bet's rate (natural log). `None` before
    /// [`FUTILITY_MIN_UNITS`].
    fn optimistic_growth(&self, c: f64, units: f64) -> Option<f64> {
        if self.n < FUTILITY_MIN_UNITS {
            return None;
        }
        let (sum, sum2) = self.of(c);
        let mean = sum / self.n;
        let var = (sum2 / self.n - mean * mean).max(0.0);
        let m = mean + FUTILITY_Z * (var / self.n).sqrt();
        Some(units * constant_bet_growth(m, var + m * m, c))
    }
}

/// The growth rate (natural log, per unit) of the best constant bet on y with mean `m` and
/// second moment `m2`, a bet no larger than the search's largest on a test at margin `c`:
/// λm − λ²m2/2 at λ = min(m/m2, [`MAX_BET`]/(1 + c)); 0 when m ≤ 0.
fn constant_bet_growth(m: f64, m2: f64, c: f64) -> f64 {
    if m <= 0.0 {
        return 0.0;
    }
    let cap = MAX_BET / (1.0 + c);
    let lambda = if m2 > 0.0 { (m / m2).min(cap) } else { cap };
    (lambda * m - lambda * lambda * m2 / 2.0).max(0.0)
}

/// The search for the best of K arms, case by case.
#[derive(Debug, Clone)]
pub struct BestArm {
    settings: BestSettings,
    /// 1/α_out: the bar of an arm's pooled evidence against it.
    out_bar: f64,
    /// 1/α_in: a pair's bar.
    pair_bar: f64,
    alive: Vec<bool>,
    /// Units heard.
    cases: u64,
    /// Units offered, heard or not (the bench's units left are counted from them).
    offered: u64,
    /// Each arm's weighted score sum and weight heard while it was a contender (weights are
    /// cases, as a share of the largest unit's: the mean is over cases).
    sums: Vec<(f64, f64)>,
    pairs: Vec<Pair>,
    /// Per arm, the pooled evidence that it is not the best (see [`BestArm::hear_unit`]).
    out_wealth: Vec<f64>,
    eliminated: Vec<Elimination>,
    /// Set once the cases left cannot decide the search.
    futile: bool,
}

impl BestArm {
    pub fn new(settings: BestSettings) -> BestArm {
        let k = settings.arms;
        BestArm {
            settings,
            out_bar: 1.0 / settings.alpha_out(),
            pair_bar: 1.0 / settings.alpha_in(),
            alive: vec![true; k],
            cases: 0,
            offered: 0,
            sums: vec![(0.0, 0.0); k],
            pairs: (0..k * k)
                .map(|_| Pair::new(settings.epsilon, settings.gap_bounds))
                .collect(),
            out_wealth: vec![1.0; k],
            eliminated: Vec::new(),
            futile: false,
        }
    }

    /// Whether `arm` is still in play (not put out; it may be set aside, see
    /// [`BestArm::contenders`]).
    pub fn alive(&self, arm: usize) -> bool {
        self.alive.get(arm).copied().unwrap_or(false)
    }

    /// The arms still in play.
    pub fn remaining(&self) -> Vec<usize> {
        (0..self.settings.arms).filter(|&a| self.alive[a]).collect()
    }

    /// The arm in play with the highest mean (the lowest index among equals; arm 0's
    /// place before any case).
    pub fn leader(&self) -> Option<usize> {
        let means = self.means();
        self.remaining().into_iter().max_by(|&a, &b| {
            let m = |x: usize| means[x].unwrap_or(0.0);
            m(a).total_cmp(&m(b)).then(b.cmp(&a))
        })
    }

    /// The arms the next case goes to: the leader, and every arm in play it is not
    /// confirmed against. Decided from the cases heard so far, so every test stays valid.
    pub fn contenders(&self) -> Vec<usize> {
        let Some(leader) = self.leader() else {
            return Vec::new();
        };
        let k = self.settings.arms;
        self.remaining()
            .into_iter()
            .filter(|&j| j == leader || !self.pairs[leader * k + j].within.crossed)
            .collect()
    }

    /// Whether `arm` is sent the next case.
    pub fn contends(&self, arm: usize) -> bool {
        self.contenders().contains(&arm)
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

    /// Hears one case: the score of each arm it was sent to (`scores[arm]`, in [0, 1];
    /// `None` for an arm not sent it). Returns the arms it eliminated. See
    /// [`BestArm::hear_unit`].
    pub fn hear(&mut self, scores: &[Option<f64>]) -> Vec<Elimination> {
        self.hear_unit(scores, 1.0)
    }

    /// Hears one unit of cases (a group): the mean score over its cases of each arm in
    /// play it was sent to, and its `weight` — its cases over the largest unit's, in
    /// (0, 1]. Which arms a unit is sent to must be decided before any of them is heard
    /// (the caller sends [`BestArm::contenders`] as they stood when it sent the unit): each
    /// pair of arms sent is heard, and each pair's tests stay valid. The tests are of the
    /// mean over cases, μ = E[Σ scores]/E[cases] with units drawn at random
    /// (docs/dev/statistics.md §9): each bets on w·(d − c), whose mean is ≤ 0 exactly when
    /// the case-weighted mean difference is ≤ c. A unit out of range, one with a score
    /// out of [0, 1], or one sent to fewer than two arms in play is not heard (it still
    /// counts as offered, against the bench's units).
    pub fn hear_unit(&mut self, scores: &[Option<f64>], weight: f64) -> Vec<Elimination> {
        if self.verdict() != BestVerdict::Open {
            return Vec::new();
        }
        self.offered += 1;
        let given = |a: usize| scores.get(a).copied().flatten();
        let sent: Vec<usize> = self
            .remaining()
            .into_iter()
            .filter(|&a| given(a).is_some())
            .collect();
        let score = |a: usize| given(a).filter(|x| (0.0..=1.0).contains(x));
        if !(weight > 0.0 && weight <= 1.0)
            || sent.len() < 2
            || sent.iter().any(|&a| score(a).is_none())
        {
            self.judge_futility();
            return Vec::new();
        }
        self.cases += 1;
        let k = self.settings.arms;
        let allocations: Vec<Vec<f64>> = sent.iter().map(|&j| self.allocation(j)).collect();
        for &a in &sent {
            let x = score(a).unwrap_or(0.0);
            self.sums[a].0 += weight * x;
            self.sums[a].1 += weight;
        }
        let mut factors = vec![1.0; k * k];
        for &i in &sent {
            for &j in &sent {
                if i != j {
                    let d = score(i).unwrap_or(0.0) - score(j).unwrap_or(0.0);
                    factors[i * k + j] = self.pairs[i * k + j].hear(d, weight, self.pair_bar);
                }
            }
        }
        for (&j, shares) in sent.iter().zip(&allocations) {
            let growth: f64 = (0..k).map(|i| shares[i] * factors[i * k + j]).sum();
            self.out_wealth[j] *= growth;
        }
        let out = self.eliminate(&sent);
        self.judge_futility();
        out
    }

    /// The pooled evidence that `j` is not the best.
    fn evidence_against(&self, j: usize) -> f64 {
        self.out_wealth[j]
    }

    /// How the pooled evidence against `j` stakes itself on the next unit across j's
    /// rivals' better tests (shares summing to 1, decided before the unit): half on the
    /// leader, when it is a rival, and the rest in proportion to each rival's wealth
    /// against j. A wealth so staked is a test supermartingale under "j is the best", when
    /// every rival's test has a true null; with every share in proportion to the wealths it
    /// is their mean.
    fn allocation(&self, j: usize) -> Vec<f64> {
        let k = self.settings.arms;
        let wealth = |i: usize| {
            if i == j {
                0.0
            } else {
                self.pairs[i * k + j].better_wealth()
            }
        };
        let total: f64 = (0..k).map(wealth).sum();
        let leader = self.leader().filter(|&l| l != j);
        let spread = if leader.is_some() { 0.5 } else { 1.0 };
        (0..k)
            .map(|i| {
                let share = if total > 0.0 {
                    spread * wealth(i) / total
                } else {
                    0.0
                };
                share + if Some(i) == leader { 1.0 - spread } else { 0.0 }
            })
            .collect()
    }

    /// Puts out every contender the pooled evidence shows is not the best.
    fn eliminate(&mut self, sent: &[usize]) -> Vec<Elimination> {
        let k = self.settings.arms;
        let mut out = Vec::new();
        for &j in sent {
            if self.evidence_against(j) < self.out_bar {
                continue;
            }
            // The rival in play whose evidence against j is strongest.
            let by = (0..k)
                .filter(|&i| i != j && self.alive[i])
                .max_by(|&a, &b| {
                    let w = |i: usize| self.pairs[i * k + j].better_wealth();
                    w(a).total_cmp(&w(b))
                });
            if let Some(by) = by {
                out.push(Elimination {
                    arm: j,
                    by,
                    cases: self.cases,
                    gap_at_least: self.gap_shown(by, j),
                    gap_seen: self.pairs[by * k + j].mean(),
                });
            }
        }
        // Never all: arms put out together (possible only by error) leave the one with the
        // best mean.
        let alive = self.remaining();
        if !out.is_empty() && out.len() == alive.len() {
            let keep = self.leader().unwrap_or(alive[0]);
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
            .zip(&pair.margin_crossed)
            .filter(|(_, crossed)| **crossed)
            .map(|(b, _)| b.c)
            .fold(0.0, f64::max)
    }

    /// Sets the search futile when the bench's units left cannot settle any contender
    /// against the leader ([`BestSettings::units`]).
    fn judge_futility(&mut self) {
        let Some(units) = self.settings.units else {
            return;
        };
        let left = units.saturating_sub(self.offered) as f64;
        let contenders = self.contenders();
        let Some(leader) = self.leader() else {
            return;
        };
        if contenders.len() < 2 || self.verdict() != BestVerdict::Open {
            return;
        }
        self.futile = contenders
            .iter()
            .filter(|&&j| j != leader)
            .all(|&j| !self.may_settle(leader, j, left));
    }

    /// Whether `left` more units could, at the most, settle contender `j` against the
    /// leader: the leader confirmed against it, either put out, or `j` confirmed against
    /// the leader (it would then lead).
    fn may_settle(&self, leader: usize, j: usize, left: f64) -> bool {
        let k = self.settings.arms;
        let (lj, jl) = (&self.pairs[leader * k + j], &self.pairs[j * k + leader]);
        let eps = self.settings.epsilon;
        let reaches = |now: f64, growth: Option<f64>, bar: f64| match growth {
            None => true,
            Some(g) => now.ln() + g >= bar.ln(),
        };
        let bar = self.pair_bar;
        // The pooled evidence against `loser` stakes at least about half on this rival.
        let out = |pair: &Pair, loser: usize| {
            let growth = pair.sums.optimistic_growth(0.0, left);
            growth.is_none_or(|g| self.out_wealth[loser] * 0.5 * (1.0 + g.exp()) >= self.out_bar)
        };
        reaches(
            lj.within.wealth(),
            lj.sums.optimistic_growth(-eps, left),
            bar,
        ) || reaches(
            jl.within.wealth(),
            jl.sums.optimistic_growth(-eps, left),
            bar,
        ) || out(lj, j)
            || out(jl, leader)
    }

    /// How `arm` stands against `other` on the units both were sent: the mean of
    /// (arm − other) over their cases, and the units.
    pub fn standing(&self, arm: usize, other: usize) -> (f64, u64) {
        let k = self.settings.arms;
        match self.pairs.get(arm * k + other) {
            Some(pair) if arm != other => (pair.mean(), pair.sums.n as u64),
            _ => (0.0, 0),
        }
    }

    /// About how many more units would settle every contender against the leader, were
    /// the differences seen so far the true ones: for each contender, the fewest units any
    /// of the ways to settle it needs at the rate its test grows now; the most of those.
    /// `None` when a contender's differences so far would never settle it (or before the
    /// search has heard enough).
    pub fn units_to_settle(&self) -> Option<u64> {
        let leader = self.leader()?;
        let k = self.settings.arms;
        let eps = self.settings.epsilon;
        let need = |now: f64, bar: f64, rate: Option<f64>| {
            let rate = rate?;
            Some(((bar.ln() - now.ln()).max(0.0) / rate).ceil())
        };
        let mut most: f64 = 0.0;
        for j in self.contenders().into_iter().filter(|&j| j != leader) {
            let (lj, jl) = (&self.pairs[leader * k + j], &self.pairs[j * k + leader]);
            let ways = [
                need(lj.within.wealth(), self.pair_bar, lj.sums.growth_seen(-eps)),
                need(jl.within.wealth(), self.pair_bar, jl.sums.growth_seen(-eps)),
                need(self.out_wealth[j], self.out_bar, lj.sums.growth_seen(0.0)),
                need(
                    self.out_wealth[leader],
                    self.out_bar,
                    jl.sums.growth_seen(0.0),
                ),
            ];
            let fewest = ways.into_iter().flatten().fold(f64::INFINITY, f64::min);
            if !fewest.is_finite() {
                return None;
            }
            most = most.max(fewest);
        }
        Some(most as u64)
    }

    /// Where the search stands.
    pub fn verdict(&self) -> BestVerdict {
        let alive = self.remaining();
        if alive.len() == 1 {
            return BestVerdict::One(alive[0]);
        }
        let confirmed = self.confirmed();
        if !confirmed.is_empty() {
            BestVerdict::WithinEpsilon(confirmed)
        } else if self.futile {
            BestVerdict::OneOf(self.contenders())
        } else {
            BestVerdict::Open
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A case's scores as a caller sends it: to the contenders only.
    fn sent(best: &BestArm, scores: &[Option<f64>]) -> Vec<Option<f64>> {
        let to = best.contenders();
        (0..scores.len())
            .map(|a| if to.contains(&a) { scores[a] } else { None })
            .collect()
    }

    fn settings(arms: usize) -> BestSettings {
        BestSettings {
            arms,
            epsilon: 0.02,
            confidence: 0.95,
            gap_bounds: true,
            units: None,
        }
    }

    #[test]
    fn a_clearly_better_arm_is_named_and_the_arms_put_out_say_by_how_much() {
        let mut best = BestArm::new(settings(3));
        // Arm 1 right on every case; arms 0 and 2 right on every other case.
        let mut t = 0;
        while best.verdict() == BestVerdict::Open && t < 1000 {
            let half = if t % 2 == 0 { 1.0 } else { 0.0 };
            best.hear(&sent(&best, &[Some(half), Some(1.0), Some(half)]));
            t += 1;
        }
        let named = match best.verdict() {
            BestVerdict::One(a) => vec![a],
            BestVerdict::WithinEpsilon(arms) => arms,
            other => panic!("{other:?}"),
        };
        assert_eq!(named, vec![1]);
        // Put out by arm 1, by about the 50 points they are behind; or never heard again
        // once arm 1 is confirmed against them.
        let out = best.eliminated();
        assert!(
            out.iter()
                .all(|e| e.by == 1 && (e.gap_seen - 0.5).abs() < 0.1 && e.gap_at_least > 0.0),
            "{out:?}"
        );
        // Fast: a 50-point gap needs few cases.
        assert!(best.cases() < 60, "{}", best.cases());
    }

    #[test]
    fn a_case_goes_to_the_leader_and_the_arms_it_is_not_confirmed_against() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut best = BestArm::new(settings(3));
        assert_eq!(best.contenders(), vec![0, 1, 2]);
        // Arms 0 and 1 agree on every case (d = 0: their edge over "more than ε apart" is
        // ε a case, hundreds of cases to confirm); arm 2 answers alone, 10 points behind:
        // the leader is confirmed against it sooner, and it hears no more cases.
        let mut set_aside_at = None;
        while best.verdict() == BestVerdict::Open && best.cases() < 20_000 {
            let x = f64::from(u8::from(rng.random::<f64>() < 0.7));
            let y = f64::from(u8::from(rng.random::<f64>() < 0.6));
            best.hear(&sent(&best, &[Some(x), Some(x), Some(y)]));
            if set_aside_at.is_none() && best.contenders() == vec![0, 1] {
                set_aside_at = Some(best.cases());
            }
        }
        let at = set_aside_at.expect("arm 2 set aside while arm 1 still contends");
        // Arm 2 heard the cases up to then, and was not put out; arm 0, the leader, heard
        // every case.
        assert_eq!(best.sums[2].1, at as f64);
        assert!(best.alive(2));
        assert_eq!(best.sums[0].1, best.cases() as f64);
        assert!(best.cases() > at, "{} {at}", best.cases());
        let named = match best.verdict() {
            BestVerdict::One(a) => vec![a],
            BestVerdict::WithinEpsilon(arms) => arms,
            other => panic!("{other:?}"),
        };
        assert!(named.contains(&0) && !named.contains(&2), "{named:?}");
    }

    #[test]
    fn a_bench_too_small_to_decide_stops_early_and_leaves_the_contenders() {
        use rand::{RngExt, SeedableRng};
        // Four equal arms at 70%, answering alone: 200 cases cannot confirm any against
        // the others (ε = 2 points needs thousands).
        let run = |units: Option<u64>| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(3);
            let mut best = BestArm::new(BestSettings {
                units,
                ..settings(4)
            });
            let mut offered = 0;
            while best.verdict() == BestVerdict::Open && offered < 200 {
                let case: Vec<Option<f64>> = (0..4)
                    .map(|_| Some(f64::from(u8::from(rng.random::<f64>() < 0.7))))
                    .collect();
                best.hear(&sent(&best, &case));
                offered += 1;
            }
            (best.verdict(), offered)
        };
        let (verdict, offered) = run(Some(200));
        match verdict {
            BestVerdict::OneOf(arms) => assert!(arms.len() >= 2, "{arms:?}"),
            other => panic!("{other:?}"),
        }
        assert!(offered < 150, "stopped after {offered} of 200 cases");
        // Not told the bench's size, the same search runs to the end, undecided.
        assert_eq!(run(None), (BestVerdict::Open, 200));
    }

    #[test]
    fn equal_arms_that_agree_are_declared_within_epsilon() {
        let mut best = BestArm::new(settings(4));
        let mut t = 0;
        while best.verdict() == BestVerdict::Open && t < 5000 {
            // Every arm right on the same three cases of four: d = 0 throughout.
            let x = if t % 4 == 3 { 0.0 } else { 1.0 };
            best.hear(&sent(&best, &[Some(x); 4]));
            t += 1;
        }
        // All agree on every case: each is confirmed against each at the same case.
        assert_eq!(best.verdict(), BestVerdict::WithinEpsilon(vec![0, 1, 2, 3]));
        assert!(best.eliminated().is_empty());
    }

    /// One seeded search on 0/1 answers, arm a right with probability `p[a]`
    /// (independently): the arms it names, and the cases it took.
    fn simulated(p: &[f64], epsilon: f64, seed: u64, limit: u64) -> (BestVerdict, u64) {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut best = BestArm::new(BestSettings {
            arms: p.len(),
            epsilon,
            confidence: 0.95,
            gap_bounds: false,
            units: None,
        });
        while best.verdict() == BestVerdict::Open && best.cases() < limit {
            let case: Vec<Option<f64>> = p
                .iter()
                .map(|&p| Some(f64::from(u8::from(rng.random::<f64>() < p))))
                .collect();
            best.hear(&sent(&best, &case));
        }
        (best.verdict(), best.cases())
    }

    #[test]
    fn just_outside_epsilon_the_search_is_wrong_at_most_as_often_as_it_says() {
        // The best 2.5 points ahead of three others, ε = 2: naming any other arm is wrong.
        // The nearest a bad answer comes; 100 seeded searches (the sweep over K, gaps, base
        // rates, correlation and repeats is benches/best_arm.rs, its output
        // tests/fixtures/best_arm_sim.txt).
        let p = [0.7, 0.675, 0.675, 0.675];
        let mut wrong = 0;
        for seed in 0..100 {
            let (verdict, _) = simulated(&p, 0.02, seed, 200_000);
            wrong += u32::from(match verdict {
                BestVerdict::One(a) => a != 0,
                BestVerdict::WithinEpsilon(arms) => arms.iter().any(|&a| a != 0),
                BestVerdict::Open | BestVerdict::OneOf(_) => true,
            });
        }
        // At most 5% by the guarantee; 11 of 100 would be 11% (p ≈ 0.01 if it held).
        assert!(wrong < 11, "{wrong} of 100 wrong");
    }

    #[test]
    fn a_clear_winner_is_found_in_far_fewer_cases_than_a_fixed_design_needs() {
        // +10 points at K = 8 from 70%: the fixed design guaranteeing ε = 2 points needs
        // z²·Var(d)/ε² ≈ 2.45²·0.44/0.0004 ≈ 6,600 cases an arm (benches/best_arm.rs).
        let mut p = [0.6; 8];
        p[3] = 0.7;
        let mut cases = 0;
        for seed in 0..20 {
            let (verdict, n) = simulated(&p, 0.02, seed, 100_000);
            let named = match verdict {
                BestVerdict::One(a) => vec![a],
                BestVerdict::WithinEpsilon(arms) => arms,
                BestVerdict::Open | BestVerdict::OneOf(_) => Vec::new(),
            };
            assert_eq!(named, vec![3], "seed {seed}");
            cases += n;
        }
        assert!(cases / 20 < 2_000, "{} cases on average", cases / 20);
    }

    #[test]
    fn scores_between_0_and_1_are_searched_as_well_as_0_1_answers() {
        // Case means of a judge's 0–10 scores, say: each arm's score spread evenly over
        // ±0.3 around its mean, the best 2.5 points ahead of three others (ε = 2), and a
        // case's difficulty shared by all arms (correlated). Naming another arm is wrong.
        use rand::{RngExt, SeedableRng};
        let means = [0.625, 0.6, 0.6, 0.6];
        let (mut wrong, mut open) = (0, 0);
        for seed in 0..100 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut best = BestArm::new(BestSettings {
                arms: 4,
                epsilon: 0.02,
                confidence: 0.95,
                gap_bounds: false,
                units: None,
            });
            while best.verdict() == BestVerdict::Open && best.cases() < 100_000 {
                let shared = rng.random::<f64>() - 0.5;
                let case: Vec<Option<f64>> = means
                    .iter()
                    .map(|m| {
                        let own = rng.random::<f64>() - 0.5;
                        Some((m + 0.3 * shared + 0.3 * own).clamp(0.0, 1.0))
                    })
                    .collect();
                best.hear(&sent(&best, &case));
            }
            match best.verdict() {
                BestVerdict::One(a) => wrong += u32::from(a != 0),
                BestVerdict::WithinEpsilon(arms) => wrong += u32::from(arms != vec![0]),
                BestVerdict::Open | BestVerdict::OneOf(_) => open += 1,
            }
        }
        assert!(wrong <= 5, "{wrong} of 100 wrong");
        assert_eq!(open, 0, "every search ended");
    }

    #[test]
    fn groups_of_unequal_sizes_are_searched_by_the_mean_over_cases() {
        // Half the groups one case, half nine. Arm 0 right 90% of the time on one-case
        // groups and 55% on nine-case ones; arm 1 50% and 75%. Over cases arm 1 is best
        // (72.5% against 58.5%); over groups, each weighing one, arm 0 would be (72.5%
        // against 62.5%). The search names arm 1, and its means are those over cases.
        use rand::{RngExt, SeedableRng};
        for seed in 0..20 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut best = BestArm::new(settings(2));
            let (mut cases, mut right) = (0.0, [0.0; 2]);
            while best.verdict() == BestVerdict::Open && best.cases() < 20_000 {
                let (size, p) = if rng.random::<f64>() < 0.5 {
                    (1, [0.9, 0.5])
                } else {
                    (9, [0.55, 0.75])
                };
                let mut scores = [0.0; 2];
                for (arm, score) in scores.iter_mut().enumerate() {
                    let hits = (0..size).filter(|_| rng.random::<f64>() < p[arm]).count();
                    *score = hits as f64 / f64::from(size);
                }
                // Open: both arms are in play and hear this group.
                cases += f64::from(size);
                right[0] += scores[0] * f64::from(size);
                right[1] += scores[1] * f64::from(size);
                best.hear_unit(&[Some(scores[0]), Some(scores[1])], f64::from(size) / 9.0);
            }
            let named = match best.verdict() {
                BestVerdict::One(a) => vec![a],
                BestVerdict::WithinEpsilon(arms) => arms,
                BestVerdict::Open | BestVerdict::OneOf(_) => Vec::new(),
            };
            assert_eq!(named, vec![1], "seed {seed}");
            // Its means, and the gap an elimination states, are over the cases heard.
            let means = best.means();
            assert!(
                (means[0].unwrap() - right[0] / cases).abs() < 1e-9,
                "{means:?}"
            );
            assert!(
                (means[1].unwrap() - right[1] / cases).abs() < 1e-9,
                "{means:?}"
            );
            if let Some(e) = best.eliminated().first() {
                assert_eq!((e.arm, e.by), (0, 1));
                let over_cases = (right[1] - right[0]) / cases;
                assert!((e.gap_seen - over_cases).abs() < 1e-9, "{e:?} {over_cases}");
            }
        }
    }

    #[test]
    fn a_unit_out_of_range_is_not_heard() {
        let mut best = BestArm::new(settings(2));
        best.hear_unit(&[Some(1.0), Some(0.0)], 0.0);
        best.hear_unit(&[Some(1.0), Some(0.0)], 1.5);
        best.hear_unit(&[Some(1.0), Some(0.0)], f64::NAN);
        assert_eq!(best.cases(), 0);
    }

    #[test]
    fn a_case_sent_to_one_arm_or_scored_out_of_range_is_not_heard() {
        let mut best = BestArm::new(settings(3));
        best.hear(&[Some(1.0), None, None]);
        best.hear(&[Some(1.0), Some(1.5), None]);
        assert_eq!(best.cases(), 0);
        // Sent to two of the three: that pair is heard, the third arm's means stay empty.
        best.hear(&[Some(1.0), None, Some(0.0)]);
        assert_eq!(best.cases(), 1);
        assert_eq!(best.means(), vec![Some(1.0), None, Some(0.0)]);
    }
}
