//! Sequential stopping for `run --until-decided`: one variant against the baseline, case by
//! case, deciding as soon as the evidence allows (see docs/dev/statistics.md §6).
//!
//! Per case t the pair (variant score, baseline score) gives dₜ = variant − baseline in
//! [−1, 1]. Two one-sided tests of "no difference" run side by side, one for a gain and one
//! for a loss, each a test martingale (betting wealth) Wₜ = Π (1 ± λₛ dₛ) with λₛ fixed
//! from the cases before s (predictable), so under "no difference" P(sup Wₜ ≥ 1/a) ≤ a at
//! any stopping time (Ville's inequality). The error budget 1 − confidence is split over the
//! two directions and the `comparisons` variants: a = (1 − confidence)/(2·comparisons).
//!
//! With 0/1 scores (`ScoreKind::Binary`) only discordant cases move the wealth, and
//! 1 + λd is the likelihood ratio of a discordant win probability q = (1 + λ)/2 against ½:
//! the test is the sequential probability ratio test on the discordant pairs. The planned
//! alternative is a difference of `detect` at the discordance seen so far:
//! q = ½ + detect/(2D̂), D̂ the share of discordant cases so far, shrunk toward the value
//! for independent errors at the baseline's accuracy so far, 2p̂(1 − p̂) + detect², with a
//! weight of [`PRIOR_CASES`] cases. For rejecting "no difference" the bet may grow beyond
//! the plan when the observed wins say so (shrunk toward the plan by [`ADAPT_PAIRS`]).
//!
//! Futility: a direction closes when a betting test rejects "a difference of `detect`" at
//! level β = [`FUTILITY_SLACK`]·(1 − power): the wealth Π(1 − μ(d − detect)) (for a gain; Π(1 + μ(d + detect))
//! for a loss), a supermartingale for every distribution of d with mean ≥ detect, so a real
//! difference of `detect` or more closes its direction with probability ≤ β at any stopping
//! time (Ville), for 0/1 and scored cases alike and whatever the correlation of the
//! variants. (A tie is evidence against a difference: it multiplies the wealth by 1 + μ·detect.)
//! A closed direction stays closed. When both are closed the verdict is "no difference of
//! `detect` points or more".
//!
//! With `--max-drop M` a third question runs on the same cases ([`NonInferiority`]): is the
//! variant at most M worse than the baseline?

/// Cases of prior weight given to the independent-errors guess of the discordance.
const PRIOR_CASES: f64 = 60.0;
/// Discordant pairs of prior weight holding the rejecting bet to the planned alternative.
const ADAPT_PAIRS: f64 = 30.0;
/// Default floor on the cases of any verdict: early futility crossings made on a handful of
/// discordant pairs are forgiven (simulated: +0.6 to +1.3 points of power at the planned
/// difference, under 1 point more cases under no difference).
pub const DEFAULT_MIN_CASES: u64 = 40;
/// Largest bet: the wealth never moves by more than this share of itself in one case.
const MAX_BET: f64 = 0.8;
/// The futility tests close at 1/(FUTILITY_SLACK·(1 − power)): a real difference of `detect`
/// ends in futility with probability ≤ 1.2·(1 − power) by Ville (24% at 80% power), 18.2% in
/// simulation (power 81.8% at +10 points from 70%; tests/fixtures/sequential.py parts 3
/// and 8). With 1 (the guarantee exactly 1 − power) no-difference runs used 58.8% of
/// `plan`'s design; with 1.2 and [`FUTILITY_BET`], 54.6% (65.8% of the gain-only design).
pub const FUTILITY_SLACK: f64 = 1.2;
/// The futility bet as a share of the growth-optimal one under no difference,
/// detect/(m̂₂ + detect²): smaller bets lose less when a real difference looks null early
/// (power +0.9 points at the same slack, for 2.3% more cases under no difference).
const FUTILITY_BET: f64 = 0.7;

/// The fixed design's cases for these settings, exactly as `promptgauge plan` sizes them:
/// the fewest cases with which the exact McNemar test (Holm over `comparisons`) has `power`
/// at a difference of `detect` either way from a baseline accuracy `baseline` — the harder
/// direction ([`crate::power::cases_either_way`]). The default `max_cases` is twice
/// this at a baseline of ½. `None` when no number of cases up to 1,000,000 suffices.
pub fn fixed_design_cases(
    detect: f64,
    baseline: f64,
    power: f64,
    confidence: f64,
    comparisons: usize,
) -> Option<u64> {
    let mut a = crate::power::Assumptions::new(baseline, 1.0 - confidence);
    a.comparisons = comparisons;
    crate::power::cases_either_way(detect, power, &a)
}

/// Prior weight (in cases) of the non-inferiority bets' second moment: the 0/1 guess
/// overstates the spread of case means, so it weighs less than [`PRIOR_CASES`].
const NI_PRIOR_CASES: f64 = 5.0;

/// Whether per-case scores are 0/1 (one answer per case) or anywhere in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreKind {
    Binary,
    Scored,
}

/// Settings of one variant's sequential comparison with the baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SequentialParams {
    /// Smallest difference worth detecting, as a share (0.10 = 10 points).
    pub detect: f64,
    /// Chance of deciding "better"/"worse" when the difference is `detect`; 1 − power is
    /// the futility budget.
    pub power: f64,
    /// 1 − confidence bounds the chance of any false better/worse verdict over the run.
    pub confidence: f64,
    /// Variants compared with the baseline in the run; the error budget is split over them.
    pub comparisons: usize,
    /// Never stop before this many cases (0: no minimum).
    pub min_cases: u64,
    /// Stop undecided at this many cases.
    pub max_cases: u64,
    pub scores: ScoreKind,
    /// `--max-drop`: also check, on the same cases, that the variant is at most this much
    /// worse (a share); the variant stops once both questions are settled.
    pub max_drop: Option<f64>,
}

impl SequentialParams {
    /// The defaults: detect 10 points, 80% power, 95% confidence, one comparison, at least
    /// [`DEFAULT_MIN_CASES`] cases, and `max_cases` cases at most.
    pub fn new(max_cases: u64, scores: ScoreKind) -> Self {
        SequentialParams {
            detect: 0.10,
            power: 0.8,
            confidence: 0.95,
            comparisons: 1,
            min_cases: DEFAULT_MIN_CASES,
            max_cases,
            scores,
            max_drop: None,
        }
    }
}

/// What the comparison concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    Better,
    Worse,
    /// Both directions ruled out a difference of `detect` or more.
    NoDifferenceOfDetect,
    /// `max_cases` reached with nothing decided.
    Undecided,
}

/// A verdict, when it was reached, and the evidence that reached it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub verdict: Conclusion,
    /// Cases observed when it was reached.
    pub cases: u64,
    /// The natural log of the deciding wealth (for `Undecided`: the larger rejecting one).
    pub statistic: f64,
    /// The natural log of the threshold it crossed (or had to cross).
    pub threshold: f64,
}

/// What the non-inferiority check (`--max-drop`) concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropVerdict {
    /// The variant is at most `max_drop` worse: shown at the run's confidence.
    Pass,
    /// The variant looks worse than the baseline (a variant as good as the baseline ends
    /// here with probability ≤ 1 − power).
    Fail,
    /// `max_cases` reached with neither shown.
    NotShown,
}

/// A non-inferiority verdict and the evidence that reached it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropDecision {
    pub verdict: DropVerdict,
    pub cases: u64,
    /// Natural log of the deciding wealth (`NotShown`: the passing one).
    pub statistic: f64,
    pub threshold: f64,
}

/// The sequential non-inferiority check of `--max-drop M`, fed the same cases as the
/// difference test: two betting wealths with λ = min(M/(m̂₂ + M²), 0.8) from the cases
/// before (m̂₂ the second moment of d, shrunk with [`NI_PRIOR_CASES`] cases of prior).
/// - pass when Π(1 + λ(d + M)) ≥ 2m/(1 − confidence): under a drop of M or more it is a
///   supermartingale, so a variant that dropped ≥ M passes with probability ≤
///   (1 − confidence)/(2m) at any stopping time — the level of each side of the
///   difference test and of the fixed run's interval end that `--max-drop` reads;
/// - fail when Π(1 − λd) ≥ 1/(1 − power): a supermartingale when the variant is at least as
///   good as the baseline, so such a variant fails with probability ≤ 1 − power.
///
/// 0/1 and scored cases use the same formulas (with 0/1 scores a tie counts: it is evidence
/// that the variant did not drop).
#[derive(Debug, Clone)]
pub struct NonInferiority {
    max_drop: f64,
    detect: f64,
    min_cases: u64,
    max_cases: u64,
    pass_threshold: f64,
    fail_threshold: f64,
    cases: u64,
    baseline_sum: f64,
    sum_squares: f64,
    passing: f64,
    failing: f64,
    decision: Option<DropDecision>,
}

impl NonInferiority {
    /// The check for a drop of `max_drop` (a share in (0, 1)) with `params`' confidence,
    /// power, comparisons and case limits.
    pub(crate) fn new(max_drop: f64, params: &SequentialParams) -> Result<Self, SequentialError> {
        if !(max_drop > 0.0 && max_drop < 1.0) {
            return Err(SequentialError::BadParams);
        }
        let test = SequentialTest::new(SequentialParams {
            max_drop: None,
            ..*params
        })?;
        Ok(NonInferiority {
            max_drop,
            detect: params.detect,
            min_cases: params.min_cases,
            max_cases: params.max_cases,
            pass_threshold: test.reject_threshold(),
            fail_threshold: (1.0 / (1.0 - params.power)).ln(),
            cases: 0,
            baseline_sum: 0.0,
            sum_squares: 0.0,
            passing: 0.0,
            failing: 0.0,
            decision: None,
        })
    }

    /// The decision, once reached.
    pub fn decision(&self) -> Option<DropDecision> {
        self.decision
    }

    /// The log threshold the passing wealth must reach: ln(2m/(1 − confidence)).
    pub fn pass_threshold(&self) -> f64 {
        self.pass_threshold
    }

    /// Cases observed so far, and the log wealths (passing, failing).
    pub fn state(&self) -> (u64, f64, f64) {
        (self.cases, self.passing, self.failing)
    }

    /// Records one case: the variant's and the baseline's score (case means in [0, 1]);
    /// cases after a decision, and scores outside [0, 1], are ignored.
    pub(crate) fn feed(&mut self, variant: f64, baseline: f64) {
        if !(0.0..=1.0).contains(&variant) || !(0.0..=1.0).contains(&baseline) {
            return;
        }
        if self.decision.is_some() {
            return;
        }
        let (m, d) = (self.max_drop, variant - baseline);
        let t = self.cases as f64;
        let p = (self.baseline_sum + 1.0) / (t + 2.0);
        let guess = 2.0 * p * (1.0 - p) + self.detect * self.detect;
        let second = (self.sum_squares + NI_PRIOR_CASES * guess) / (t + NI_PRIOR_CASES);
        let lambda = (m / (second + m * m)).min(MAX_BET);
        self.passing += (1.0 + lambda * (d + m)).ln();
        self.failing += (1.0 - lambda * d).ln();
        self.cases += 1;
        self.baseline_sum += baseline;
        self.sum_squares += d * d;
        let n = self.cases;
        if n >= self.min_cases {
            if self.passing >= self.pass_threshold {
                self.decision = Some(DropDecision {
                    verdict: DropVerdict::Pass,
                    cases: n,
                    statistic: self.passing,
                    threshold: self.pass_threshold,
                });
            } else if self.failing >= self.fail_threshold {
                self.decision = Some(DropDecision {
                    verdict: DropVerdict::Fail,
                    cases: n,
                    statistic: self.failing,
                    threshold: self.fail_threshold,
                });
            }
        }
        if self.decision.is_none() && n >= self.max_cases {
            self.decision = Some(DropDecision {
                verdict: DropVerdict::NotShown,
                cases: n,
                statistic: self.passing,
                threshold: self.pass_threshold,
            });
        }
    }
}

/// Why a setting or an observation was refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SequentialError {
    /// detect, power or confidence outside (0, 1), no comparisons or no cases allowed.
    BadParams,
    /// A score outside [0, 1], or not 0/1 in a binary comparison.
    BadScore(f64),
}

impl std::fmt::Display for SequentialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SequentialError::BadParams => write!(
                f,
                "sequential settings need detect, power and confidence in (0, 1), at least one comparison and max_cases ≥ 1"
            ),
            SequentialError::BadScore(s) => write!(f, "score {s} is not a valid score here"),
        }
    }
}

impl std::error::Error for SequentialError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Open,
    Closed,
}

/// One variant's sequential test against the baseline, fed one case at a time.
#[derive(Debug, Clone)]
pub struct SequentialTest {
    params: SequentialParams,
    cases: u64,
    baseline_sum: f64,
    sum: f64,
    sum_squares: f64,
    /// Log wealth of the rejecting tests (gain, loss) and of the futility tests.
    reject: [f64; 2],
    futile: [f64; 2],
    sides: [Side; 2],
    decision: Option<Decision>,
    /// `--max-drop`: the non-inferiority check on the same cases.
    drop: Option<NonInferiority>,
}

impl SequentialTest {
    /// A fresh test; `Err(BadParams)` for settings outside their ranges.
    pub fn new(params: SequentialParams) -> Result<Self, SequentialError> {
        let unit = |x: f64| x > 0.0 && x < 1.0;
        if !(unit(params.detect) && unit(params.power) && unit(params.confidence))
            || params.comparisons == 0
            || params.max_cases == 0
        {
            return Err(SequentialError::BadParams);
        }
        Ok(SequentialTest {
            params,
            cases: 0,
            baseline_sum: 0.0,
            sum: 0.0,
            sum_squares: 0.0,
            reject: [0.0; 2],
            futile: [0.0; 2],
            sides: [Side::Open; 2],
            decision: None,
            drop: match params.max_drop {
                Some(m) => Some(NonInferiority::new(
                    m,
                    &SequentialParams {
                        max_drop: None,
                        ..params
                    },
                )?),
                None => None,
            },
        })
    }

    /// The non-inferiority decision (`--max-drop`), once reached.
    pub fn drop_decision(&self) -> Option<DropDecision> {
        self.drop.as_ref().and_then(NonInferiority::decision)
    }

    /// The non-inferiority check, when there is one.
    pub fn drop_check(&self) -> Option<&NonInferiority> {
        self.drop.as_ref()
    }

    /// Whether the variant needs no more cases: its difference is decided and (with
    /// `--max-drop`) so is its drop check.
    pub fn finished(&self) -> bool {
        self.decision.is_some() && self.drop.as_ref().is_none_or(|d| d.decision.is_some())
    }

    /// The log threshold a rejecting wealth must reach: ln(2·comparisons/(1 − confidence)).
    pub fn reject_threshold(&self) -> f64 {
        (2.0 * self.params.comparisons as f64 / (1.0 - self.params.confidence)).ln()
    }

    /// The log threshold of the futility tests: ln(1/([`FUTILITY_SLACK`]·(1 − power))).
    fn futility_threshold(&self) -> f64 {
        (1.0 / (FUTILITY_SLACK * (1.0 - self.params.power))).ln()
    }

    /// Cases observed so far (those after a decision are not counted).
    pub fn cases(&self) -> u64 {
        self.cases
    }

    /// The decision, once reached; `None` while the test is still running.
    pub fn decision(&self) -> Option<Decision> {
        self.decision
    }

    /// The bets for the next case, from the cases before it:
    /// (planned λ, rejecting λ for a gain, rejecting λ for a loss, futility μ).
    fn bets(&self) -> (f64, f64, f64, f64) {
        let delta = self.params.detect;
        let t = self.cases as f64;
        let p = (self.baseline_sum + 1.0) / (t + 2.0);
        let guess = 2.0 * p * (1.0 - p) + delta * delta;
        let second = (self.sum_squares + PRIOR_CASES * guess) / (t + PRIOR_CASES);
        let planned = (delta / second).min(MAX_BET);
        let adapt = |sum: f64| {
            let observed = (sum + ADAPT_PAIRS * planned) / (self.sum_squares + ADAPT_PAIRS);
            observed.max(planned).min(MAX_BET)
        };
        let mu = (FUTILITY_BET * delta / (second + delta * delta)).min(MAX_BET);
        (planned, adapt(self.sum), adapt(-self.sum), mu)
    }

    /// Records one case: the variant's and the baseline's score (each a case mean in
    /// [0, 1]; 0 or 1 in a binary comparison). Returns the decision if this case reached
    /// one. Cases after a decision are ignored.
    pub fn observe(
        &mut self,
        variant: f64,
        baseline: f64,
    ) -> Result<Option<Decision>, SequentialError> {
        for s in [variant, baseline] {
            let binary_ok = self.params.scores == ScoreKind::Scored || s == 0.0 || s == 1.0;
            if !(0.0..=1.0).contains(&s) || !binary_ok {
                return Err(SequentialError::BadScore(s));
            }
        }
        // The drop check goes on while it is open, whatever the difference test did.
        if let Some(drop) = &mut self.drop {
            drop.feed(variant, baseline);
        }
        if self.decision.is_some() {
            return Ok(None);
        }
        let d = variant - baseline;
        let (_, gain, loss, mu) = self.bets();
        let delta = self.params.detect;
        // A closed direction is finished: its statistics stay as they were when it closed.
        let futile = [(1.0 - mu * (d - delta)).ln(), (1.0 + mu * (d + delta)).ln()];
        let reject = [(1.0 + gain * d).ln(), (1.0 - loss * d).ln()];
        for side in 0..2 {
            if self.sides[side] == Side::Open {
                self.reject[side] += reject[side];
                self.futile[side] += futile[side];
            }
        }
        self.cases += 1;
        self.baseline_sum += baseline;
        self.sum += d;
        self.sum_squares += d * d;
        self.decision = self.decide();
        Ok(self.decision)
    }

    fn decide(&mut self) -> Option<Decision> {
        let cases = self.cases;
        let reject = self.reject_threshold();
        let futility = self.futility_threshold();
        if cases >= self.params.min_cases {
            for (side, verdict) in [(0, Conclusion::Better), (1, Conclusion::Worse)] {
                if self.sides[side] == Side::Open && self.reject[side] >= reject {
                    return Some(Decision {
                        verdict,
                        cases,
                        statistic: self.reject[side],
                        threshold: reject,
                    });
                }
            }
            for side in 0..2 {
                if self.sides[side] == Side::Open && self.futile[side] >= futility {
                    self.sides[side] = Side::Closed;
                }
            }
            if self.sides == [Side::Closed; 2] {
                return Some(Decision {
                    verdict: Conclusion::NoDifferenceOfDetect,
                    cases,
                    statistic: self.futile[0].min(self.futile[1]),
                    threshold: futility,
                });
            }
        }
        if cases >= self.params.max_cases {
            return Some(Decision {
                verdict: Conclusion::Undecided,
                cases,
                statistic: self.reject[0].max(self.reject[1]),
                threshold: reject,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SequentialParams {
        let mut p = SequentialParams::new(660, ScoreKind::Binary);
        p.min_cases = 0;
        p
    }

    #[test]
    fn the_fixed_design_is_plans_either_way() {
        // 10 points at 70%: a gain needs 313 cases, a drop 377; `plan` sizes the harder.
        assert_eq!(fixed_design_cases(0.10, 0.7, 0.8, 0.95, 1), Some(377));
        assert_eq!(fixed_design_cases(0.10, 0.743, 0.8, 0.95, 1), Some(353));
        assert_eq!(fixed_design_cases(0.10, 0.5, 0.8, 0.95, 1), Some(408));
    }

    #[test]
    fn refuses_bad_settings_and_scores() {
        let mut p = params();
        p.detect = 0.0;
        assert_eq!(
            SequentialTest::new(p).err(),
            Some(SequentialError::BadParams)
        );
        let mut t = SequentialTest::new(params()).unwrap();
        assert_eq!(t.observe(0.5, 1.0), Err(SequentialError::BadScore(0.5)));
        assert!(t.observe(f64::NAN, 1.0).is_err());
        assert_eq!(t.cases(), 0);
    }

    #[test]
    fn concordant_cases_reject_nothing_but_speak_against_a_difference() {
        let mut t = SequentialTest::new(params()).unwrap();
        for i in 0..20 {
            let s = f64::from(i % 2);
            t.observe(s, s).unwrap();
        }
        // No evidence of a difference: the rejecting wealths do not move.
        assert_eq!(t.reject, [0.0, 0.0]);
        // Every tie is evidence against a difference of 10 points either way.
        assert!(
            t.futile[0] > 0.0 && t.futile[0] == t.futile[1],
            "{:?}",
            t.futile
        );
        let d = (0..500).find_map(|i| {
            let s = f64::from(i % 2);
            t.observe(s, s).unwrap()
        });
        assert_eq!(d.map(|d| d.verdict), Some(Conclusion::NoDifferenceOfDetect));
    }

    fn drop_params(max_drop: f64) -> SequentialParams {
        let mut p = SequentialParams::new(3140, ScoreKind::Binary);
        p.max_drop = Some(max_drop);
        p
    }

    #[test]
    fn a_variant_no_worse_than_the_baseline_passes_the_drop_check_and_one_that_drops_does_not() {
        // Ties and wins: no drop. The check passes, and the variant stops only once its
        // difference is settled too.
        let mut t = SequentialTest::new(drop_params(0.05)).unwrap();
        let mut i = 0;
        while !t.finished() && i < 3140 {
            let (v, b) = if i % 10 == 0 { (1.0, 0.0) } else { (1.0, 1.0) };
            t.observe(v, b).unwrap();
            i += 1;
        }
        let drop = t.drop_decision().unwrap();
        assert_eq!(drop.verdict, DropVerdict::Pass);
        assert!(drop.statistic >= drop.threshold && drop.cases >= 40);
        assert!(t.decision().is_some());
        // Losses: it looks worse; it never passes.
        let mut t = SequentialTest::new(drop_params(0.05)).unwrap();
        for i in 0..3140 {
            let (v, b) = if i % 5 == 0 { (0.0, 1.0) } else { (1.0, 1.0) };
            t.observe(v, b).unwrap();
            if t.finished() {
                break;
            }
        }
        assert_eq!(t.drop_decision().unwrap().verdict, DropVerdict::Fail);
        // Without --max-drop there is no drop check, and a decision finishes the variant.
        let mut t = SequentialTest::new(params()).unwrap();
        let d = (0..100).find_map(|_| t.observe(1.0, 0.0).unwrap()).unwrap();
        assert!(t.finished() && t.drop_decision().is_none(), "{d:?}");
        assert!(NonInferiority::new(0.0, &params()).is_err());
    }

    #[test]
    fn a_run_of_wins_decides_better_and_losses_worse() {
        let mut t = SequentialTest::new(params()).unwrap();
        let mut last = None;
        for _ in 0..100 {
            if let Some(d) = t.observe(1.0, 0.0).unwrap() {
                last = Some(d);
                break;
            }
        }
        let d = last.unwrap();
        assert_eq!(d.verdict, Conclusion::Better);
        assert!(d.statistic >= d.threshold && d.cases < 20, "{d:?}");
        // After the decision nothing changes.
        assert_eq!(t.observe(0.0, 1.0).unwrap(), None);
        assert_eq!(t.decision(), Some(d));

        let mut t = SequentialTest::new(params()).unwrap();
        let d = (0..100).find_map(|_| t.observe(0.0, 1.0).unwrap()).unwrap();
        assert_eq!(d.verdict, Conclusion::Worse);
    }

    #[test]
    fn alternating_outcomes_end_in_no_difference() {
        let mut t = SequentialTest::new(params()).unwrap();
        let mut i = 0;
        let d = loop {
            let (v, b) = match i % 4 {
                0 => (1.0, 0.0),
                1 => (0.0, 1.0),
                _ => (1.0, 1.0),
            };
            i += 1;
            if let Some(d) = t.observe(v, b).unwrap() {
                break d;
            }
        };
        assert_eq!(d.verdict, Conclusion::NoDifferenceOfDetect, "{d:?}");
    }

    #[test]
    fn min_and_max_cases_hold() {
        let p = SequentialParams::new(660, ScoreKind::Binary);
        assert_eq!(p.min_cases, DEFAULT_MIN_CASES);
        let mut t = SequentialTest::new(p).unwrap();
        let d = (0..100).find_map(|_| t.observe(1.0, 0.0).unwrap()).unwrap();
        assert_eq!((d.verdict, d.cases), (Conclusion::Better, 40));

        let mut p = params();
        p.max_cases = 5;
        let mut t = SequentialTest::new(p).unwrap();
        let d = (0..10).find_map(|_| t.observe(1.0, 1.0).unwrap()).unwrap();
        assert_eq!((d.verdict, d.cases), (Conclusion::Undecided, 5));
    }

    #[test]
    fn scored_differences_are_accepted() {
        let mut p = SequentialParams::new(400, ScoreKind::Scored);
        p.min_cases = 0;
        let mut t = SequentialTest::new(p).unwrap();
        let d = (0..400)
            .find_map(|i| {
                let v = 0.6 + 0.3 * f64::from(i % 3) / 2.0;
                t.observe(v, 0.5).unwrap()
            })
            .unwrap();
        assert_eq!(d.verdict, Conclusion::Better);
    }
}
