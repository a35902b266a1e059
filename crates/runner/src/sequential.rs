//! `run --until-decided`: each variant's sequential test against the baseline, fed case by
//! case in the plan's (seeded random) order as cases complete, whatever order their jobs
//! finish in. Live, a decision sets the variant's stop flag so the runner sends none of its
//! later jobs; replayed from the journal (`report`, `--resume`), the same records in the
//! same order reach the same decisions. The statistics are in [`promptgauge_stats::sequential`];
//! how the reports word them, in `report::sequential`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::journal::JobRecord;
use promptgauge_stats::cluster::CaseScore;
use promptgauge_stats::sequential::{
    Conclusion, Decision, DropDecision, DropVerdict, NonInferiority, ScoreKind, SequentialParams,
    SequentialTest,
};
use promptgauge_suite::plan::SequentialPlan;

/// Where records go once the sequential tests have decided whether they count: the run's
/// figures (`report::Aggregator`).
pub trait Counts {
    /// What the figures come to.
    type Result;
    /// A record that counts in every figure.
    fn counted(&mut self, r: &JobRecord);
    /// A record no decision needed (answered after its variant was decided): what it cost
    /// is spent; it is in no figure.
    fn unused(&mut self, r: &JobRecord);
    /// Every record is in; `tests` (with `--until-decided`) say what they decided.
    fn finish(self, tests: Option<&Sequential>) -> Self::Result;
}

/// `--until-decided`'s tests as a stage of their own in front of the figures: they hear
/// each finished job (live as a listener, or replayed from the journal by `report`,
/// `--resume`, `merge` and `index`), hold it until its case can be judged, and pass it on as
/// counted or unused. Without tests every record counts.
pub struct Decider<C> {
    tests: Option<Sequential>,
    figures: C,
}

impl<C: Counts> Decider<C> {
    /// `figures`, behind `tests` when the run stops when decided.
    pub fn new(tests: Option<Sequential>, figures: C) -> Self {
        Decider { tests, figures }
    }

    /// Hears one finished job (each planned job once).
    pub fn add(&mut self, r: &JobRecord) {
        let Some(tests) = &mut self.tests else {
            self.figures.counted(r);
            return;
        };
        let (now, settled) = tests.hear(r);
        match now {
            Some(true) => self.figures.counted(r),
            Some(false) => self.figures.unused(r),
            None => {}
        }
        self.pass_on(settled);
    }

    fn pass_on(&mut self, settled: Vec<(JobRecord, bool)>) {
        for (r, counted) in settled {
            if counted {
                self.figures.counted(&r);
            } else {
                self.figures.unused(&r);
            }
        }
    }

    /// Whether `--best`'s search has reached its answer (the jobs after it are not needed).
    pub fn search_ended(&self) -> bool {
        self.tests
            .as_ref()
            .and_then(|t| t.best.as_ref())
            .is_some_and(|s| s.ended_at.is_some())
    }

    /// The figures behind the tests, for what is not a record (the audit of a replay, the
    /// run's end). Records go through [`Decider::add`], never to the figures directly.
    pub fn figures(&mut self) -> &mut C {
        &mut self.figures
    }

    /// The figures, once every record is in (those still held are passed on first).
    pub fn finish(mut self) -> C::Result {
        let held = self
            .tests
            .as_mut()
            .map(Sequential::release)
            .unwrap_or_default();
        self.pass_on(held);
        self.figures.finish(self.tests.as_ref())
    }
}

impl<C: Counts> crate::events::Listener for Decider<C> {
    fn on(&mut self, event: &crate::events::RunEvent<'_>) -> std::io::Result<()> {
        if let crate::events::RunEvent::JobFinished { record, .. } = event {
            self.add(record);
        }
        Ok(())
    }
}

/// Per variant (by bench variant index): stop sending its jobs.
pub type StopFlags = Arc<Vec<AtomicBool>>;

/// `--best`: from which position on, which arms (by flag, or by arm) a case goes to; each
/// step holds until the next.
type SentTo = Vec<(usize, Vec<bool>)>;

/// How far ahead of the tests the runner may send: a case whose plan position is beyond
/// `limit` waits until the tests have caught up (a slow or retried early case would
/// otherwise let every worker send cases no decision may need).
#[derive(Clone)]
pub struct Horizon {
    pub limit: Arc<std::sync::atomic::AtomicUsize>,
    pub notify: Arc<tokio::sync::Notify>,
    /// Cases that may run ahead of the last case fed to the tests.
    pub ahead: usize,
    /// `--best`: from which case position (in plan order) which arms a case is sent to, by
    /// stop flag (bench variant, endpoint by endpoint); each entry holds until the next.
    /// Written before the limit lets any worker reach its position.
    sent_to: Arc<std::sync::RwLock<SentTo>>,
}

impl Horizon {
    /// A horizon `ahead` cases beyond the start.
    pub fn new(ahead: usize) -> Self {
        Horizon {
            limit: Arc::new(std::sync::atomic::AtomicUsize::new(ahead)),
            notify: Arc::new(tokio::sync::Notify::new()),
            ahead,
            sent_to: Arc::default(),
        }
    }

    /// `--best`: whether the case at plan position `position` goes to the arm of stop flag
    /// `flag` (every arm, until the search first sets one aside).
    pub fn sends(&self, position: usize, flag: usize) -> bool {
        let Ok(steps) = self.sent_to.read() else {
            return true;
        };
        let at = steps.partition_point(|(from, _)| *from <= position);
        at == 0 || steps[at - 1].1.get(flag).copied().unwrap_or(true)
    }

    /// From case position `from` on, cases go to the arms of these flags.
    fn send_from(&self, from: usize, flags: Vec<bool>) {
        if let Ok(mut steps) = self.sent_to.write() {
            steps.push((from, flags));
        }
    }

    fn advance_to(&self, next: usize) {
        self.limit.store(next + self.ahead, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn open(&self) {
        self.limit.store(usize::MAX, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

/// One variant's sequential verdict, as the summary states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialVerdict {
    pub variant: String,
    /// In a run of several endpoints: what it was tested against (a cell is tested on both
    /// axes); absent when the baseline is meant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    /// `better`, `worse`, `no_difference` (none of `detect` points or more), `undecided`
    /// (max_cases reached) or `running` (the run ended before a decision).
    pub verdict: String,
    /// Cases the decision used.
    pub cases: u64,
    /// Natural log of the deciding evidence (the test's wealth) and of the threshold it
    /// crossed (or had to cross).
    pub statistic: f64,
    pub threshold: f64,
    /// With `--max-drop`: the sequential check that the variant is at most that much worse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop: Option<DropSummary>,
}

/// The sequential `--max-drop` check of one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DropSummary {
    /// `pass` (at most max_drop worse, shown at the run's confidence), `fail` (looks worse
    /// than the baseline), `not_shown` (max_cases reached, or the bench's cases ran out)
    /// or `running` (the run ended first).
    pub verdict: String,
    pub cases: u64,
    /// Natural log of the deciding wealth and of the threshold it crossed (or had to).
    pub statistic: f64,
    pub threshold: f64,
}

impl DropSummary {
    fn of(d: DropDecision) -> DropSummary {
        DropSummary {
            verdict: match d.verdict {
                DropVerdict::Pass => "pass",
                DropVerdict::Fail => "fail",
                DropVerdict::NotShown => "not_shown",
            }
            .into(),
            cases: d.cases,
            statistic: d.statistic,
            threshold: d.threshold,
        }
    }
}

/// What stopping early did, for the summary and the reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialSummary {
    /// In points.
    pub detect: f64,
    pub power: f64,
    pub min_cases: u64,
    pub max_cases: u64,
    pub seed: u64,
    /// `--max-drop`, in points: the drop each variant's sequential check ruled out (or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drop: Option<f64>,
    /// The cases the fixed design needs for the same questions, as `promptgauge plan` sizes
    /// it: a difference of `detect` either way (the harder direction) at the baseline
    /// accuracy this run measured, and with `--max-drop` the non-inferiority check's.
    pub fixed_design_cases: Option<u64>,
    pub variants: Vec<SequentialVerdict>,
    /// Planned jobs no decision needed (never sent, or answered after their variant was
    /// decided and not used).
    pub jobs_not_needed: usize,
    /// Jobs the fixed design would run, and how many fewer this run sent.
    pub jobs_fixed_design: Option<u64>,
    pub jobs_saved: Option<u64>,
    /// The saving in money at this run's average cost per job.
    pub cost_saved_usd: Option<f64>,
    /// `--best`: what the search found (the pairwise `variants` are then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<BestSummary>,
}

/// What `--best` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestSummary {
    /// In points.
    pub epsilon: f64,
    pub confidence: f64,
    /// `one` (one arm left), `within_epsilon` (the named arms are each the best or within
    /// ε of it), `one_of` (the bench's cases, or those left, cannot separate the named
    /// arms: the best, or an arm within ε of it, is one of them), `open` (the run ended
    /// first: the best, or one within ε of it, is one of the arms still contending).
    pub outcome: String,
    /// The arms the answer names: the best (or within ε of it), or — open — those left.
    pub named: Vec<String>,
    /// The arms still in play when it ended.
    pub remaining: Vec<String>,
    /// Cases the search used (groups, when `grouped`).
    pub cases: u64,
    /// The unit is the group: the cases carry `group:`, and each count here (and each
    /// elimination's) is of groups.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grouped: bool,
    pub eliminated: Vec<BestElimination>,
    /// The arms in play the answer does not name, each as it stands against the first arm
    /// named (or the leader): set aside once the leader was shown not worse than them by
    /// more than ε, or still contending when the search stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standing: Vec<BestStanding>,
    /// `one_of`: about how many more cases (groups, when `grouped`) would settle the arms
    /// named, were the differences seen the true ones; absent when they never would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_cases: Option<u64>,
    /// The jobs of the whole bench, every arm on every case: what the search is measured
    /// against first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_bench: Option<u64>,
    /// The jobs the run sent.
    #[serde(default)]
    pub jobs_sent: u64,
}

/// An arm in play the answer does not name, by what the data show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestStanding {
    pub variant: String,
    /// The arm it is measured against.
    pub against: String,
    /// Its score minus `against`'s, in points, on the cases both were sent.
    pub gap_seen: f64,
    /// Those cases (groups, when grouped).
    pub cases: u64,
}

/// An arm `--best` sent no more cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestElimination {
    pub variant: String,
    /// The arm shown better than it.
    pub by: String,
    /// After how many cases.
    pub cases: u64,
    /// Below `by` by at least this many points, at the search's level (0: below, by an
    /// amount not yet bounded).
    pub gap_at_least: f64,
    /// Below `by` by this many points on the cases both were sent.
    pub gap_seen: f64,
}

/// The state of every variant's test.
pub struct Sequential {
    plan: SequentialPlan,
    /// Variant names (arms: `ENDPOINT/VARIANT` in a run of several endpoints), baseline
    /// first.
    variants: Vec<String>,
    /// What is tested: (arm, the arm it is compared with). Each variant against the
    /// baseline; in a run of several endpoints, both axes (see [`Sequential::grid`]).
    pairs: Vec<(usize, usize)>,
    /// The pairs name what they are tested against (a run of several endpoints).
    named_against: bool,
    arm: HashMap<String, usize>,
    /// Bench variant index per arm, for the stop flags.
    bench_index: Vec<usize>,
    repeats: u32,
    /// Case id → position of its unit (the case, or its group under `--best`) in the
    /// plan's order.
    position: HashMap<String, usize>,
    /// Per unit position, where its cases start in the plan's order, and the end of the
    /// last: the horizon is counted in cases.
    starts: Vec<usize>,
    /// Per unit position and arm: records heard and their scores.
    heard: Vec<Vec<u32>>,
    scores: Vec<Vec<CaseScore>>,
    /// The next position to feed to the tests.
    next: usize,
    /// Per pair: the test, and its decision with the position it was reached at.
    tests: Vec<Option<SequentialTest>>,
    decided: Vec<Option<(Decision, usize)>>,
    stop: Option<StopFlags>,
    horizon: Option<Horizon>,
    confidence: f64,
    /// Records whose case the tests have not reached yet; they count once it is known
    /// whether a decision needed them. Few: the workers never run more than
    /// `Horizon::ahead` cases (about concurrency / jobs per case) past the tests.
    held: Vec<JobRecord>,
    /// A live run's decisions, to be journaled.
    decisions: Option<Decisions>,
    /// Finished jobs heard so far.
    jobs_heard: u64,
    /// `--best`: the search among the arms (no pairs are tested then).
    best: Option<Search>,
}

/// `--best`'s search, and where in the plan's order each arm stopped being needed.
struct Search {
    arms: promptgauge_stats::best::BestArm,
    /// Per arm: the position of the case that eliminated it.
    out_at: Vec<Option<usize>>,
    /// The position of the case the search ended on.
    ended_at: Option<usize>,
    /// The cases of the bench's largest unit (1 ungrouped): a unit weighs its cases over
    /// these. Counted over the whole bench, so every shard weighs a group alike.
    largest_unit: f64,
    /// From which unit position which arms each unit is sent to (the contenders as they
    /// stood when the workers could first reach it); each entry holds until the next.
    sent_to: SentTo,
    /// The cases the workers run ahead of the search ([`promptgauge_suite::plan::BestPlan::ahead`]).
    ahead: usize,
}

impl Search {
    /// Whether the unit at `pos` was sent to `arm`.
    fn sends(&self, arm: usize, pos: usize) -> bool {
        let at = self.sent_to.partition_point(|(from, _)| *from <= pos);
        at == 0 || self.sent_to[at - 1].1.get(arm).copied().unwrap_or(true)
    }
}

/// The cases of the largest unit of `--best` over groups ([`SequentialPlan::units`]: each
/// case's unit); 1 when the cases are the units.
fn largest_unit(units: &[u32]) -> f64 {
    let mut sizes: HashMap<u32, u32> = HashMap::new();
    for &u in units {
        *sizes.entry(u).or_default() += 1;
    }
    f64::from(sizes.into_values().max().unwrap_or(1))
}

/// The name a verdict has in the summary and the journal.
fn verdict_name(v: Conclusion) -> &'static str {
    match v {
        Conclusion::Better => "better",
        Conclusion::Worse => "worse",
        Conclusion::NoDifferenceOfDetect => "no_difference",
        Conclusion::Undecided => "undecided",
    }
}

/// A decision as the journal keeps it, one line when it is reached in a live run:
/// `{"event":"decided","variant":"v","verdict":"better","cases":37,"jobs_heard":80}`.
/// Readers of job records skip it; `report` says it beside the replayed figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decided {
    /// Always `decided` (the journal's event lines start with their kind).
    pub event: String,
    pub variant: String,
    /// In a run of several endpoints: what it was tested against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    /// `better`, `worse`, `no_difference` or `undecided`; under `--best`, `eliminated`,
    /// `set_aside` (the leader, `against`, is shown no more than ε behind it: it is sent no
    /// more cases while that arm leads), `back` (sent cases again under the leader
    /// `against`), then `best` or `one_of`.
    pub verdict: String,
    /// Cases the decision used (groups, when `unit` says so).
    pub cases: u64,
    /// `groups` when `--best` counts groups of cases (cases that carry `group:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Finished jobs the tests had heard when it came.
    pub jobs_heard: u64,
}

/// Decisions reached in a live run and not yet journaled (the journal writes them with the
/// next event it keeps).
pub type Decisions = Arc<std::sync::Mutex<Vec<Decided>>>;

/// What a live run's tests steer: the stop flags (indexed by the bench's variant index,
/// `bench_index[arm]` for each arm) and the horizon.
pub struct Steering {
    pub stop: StopFlags,
    pub bench_index: Vec<usize>,
    pub horizon: Horizon,
    /// Where decisions go to be journaled.
    pub decisions: Decisions,
}

impl Sequential {
    /// The tests of a run whose plan orders `case_ids` (bench order) by `plan.seed`;
    /// `live` when they steer a running run (not when a journal is replayed).
    pub fn new(
        plan: &SequentialPlan,
        case_ids: &[String],
        variants: &[String],
        repeats: u32,
        confidence: f64,
        live: Option<Steering>,
    ) -> Sequential {
        let (stop, bench_index, horizon, decisions) = match live {
            Some(l) => (
                Some(l.stop),
                l.bench_index,
                Some(l.horizon),
                Some(l.decisions),
            ),
            None => (None, Vec::new(), None, None),
        };
        let order = plan.order(case_ids.len());
        let starts = plan.unit_starts(&order, case_ids.len());
        let units = starts.len() - 1;
        // Each case's unit: the last that starts at or before it.
        let position = order
            .iter()
            .enumerate()
            .map(|(at, &i)| {
                (
                    case_ids[i].clone(),
                    starts.partition_point(|&s| s <= at) - 1,
                )
            })
            .collect();
        let arms = variants.len();
        let mut tests = Sequential {
            plan: plan.clone(),
            arm: variants
                .iter()
                .enumerate()
                .map(|(i, v)| (v.clone(), i))
                .collect(),
            variants: variants.to_vec(),
            pairs: Vec::new(),
            named_against: false,
            bench_index,
            repeats,
            position,
            starts,
            heard: vec![vec![0; arms]; units],
            scores: vec![vec![CaseScore::default(); arms]; units],
            next: 0,
            tests: Vec::new(),
            decided: Vec::new(),
            stop,
            horizon,
            confidence,
            held: Vec::new(),
            decisions,
            jobs_heard: 0,
            best: plan.best.map(|b| Search {
                arms: promptgauge_stats::best::BestArm::new(
                    promptgauge_stats::best::BestSettings {
                        arms,
                        epsilon: b.epsilon,
                        confidence,
                        gap_bounds: true,
                        units: Some(units as u64),
                    },
                ),
                out_at: vec![None; arms],
                ended_at: None,
                largest_unit: largest_unit(&plan.units),
                sent_to: Vec::new(),
                ahead: b.ahead.unwrap_or(0),
            }),
        };
        if tests.best.is_none() {
            // Each variant against the baseline.
            tests.test((1..arms).map(|a| (a, 0)).collect(), false);
        }
        tests.pace();
        tests
    }

    /// The tests of a run of several endpoints (arm `e × variants + v`): on both axes, as
    /// the figures compare — each variant against the baseline variant at each endpoint,
    /// each endpoint against the baseline endpoint for each variant.
    pub fn grid(mut self, variants: usize, endpoints: usize) -> Sequential {
        // `--best` searches every cell at once.
        if self.best.is_some() {
            return self;
        }
        let arm = |e: usize, v: usize| e * variants + v;
        let pairs = (0..endpoints)
            .flat_map(|e| (1..variants).map(move |v| (arm(e, v), arm(e, 0))))
            .chain((0..variants).flat_map(|v| (1..endpoints).map(move |e| (arm(e, v), arm(0, v)))))
            .collect();
        self.test(pairs, true);
        self
    }

    /// Tests these pairs (arm, what it is tested against), each from the start;
    /// `named_against` when the decisions say what they were against.
    fn test(&mut self, pairs: Vec<(usize, usize)>, named_against: bool) {
        let params = self.params();
        self.tests = pairs
            .iter()
            .map(|_| SequentialTest::new(params).ok())
            .collect();
        self.decided = vec![None; pairs.len()];
        self.pairs = pairs;
        self.named_against = named_against;
    }

    /// The parameters every test runs with.
    fn params(&self) -> SequentialParams {
        let plan = &self.plan;
        SequentialParams {
            detect: plan.detect,
            power: plan.power,
            confidence: self.confidence,
            comparisons: plan.comparisons.max(1),
            min_cases: plan.min_cases,
            max_cases: plan.max_cases,
            scores: if plan.binary {
                ScoreKind::Binary
            } else {
                ScoreKind::Scored
            },
            max_drop: plan.max_drop,
        }
    }

    /// Hears a finished job, and says what the run's figures may take now: this record
    /// (`Some(counted)`) when whether a decision needed it is known, and the held records
    /// that became known, in plan order. A record not known yet is held.
    pub(crate) fn hear(&mut self, r: &JobRecord) -> (Option<bool>, Vec<(JobRecord, bool)>) {
        self.add(r);
        let now = self.counts(r);
        let mut settled = Vec::new();
        let mut i = 0;
        while i < self.held.len() {
            match self.counts(&self.held[i]) {
                Some(counted) => settled.push((self.held.swap_remove(i), counted)),
                None => i += 1,
            }
        }
        if now.is_none() {
            self.held.push(r.clone());
        }
        // Released in plan order, whatever order they were heard in.
        settled.sort_by_key(|(h, _)| h.job);
        (now, settled)
    }

    /// Once every record is in: the held records, in plan order, and whether each counts.
    pub(crate) fn release(&mut self) -> Vec<(JobRecord, bool)> {
        let mut held = std::mem::take(&mut self.held);
        held.sort_by_key(|h| h.job);
        held.into_iter()
            .map(|h| {
                let counted = self.counts_at_end(&h);
                (h, counted)
            })
            .collect()
    }

    /// Hears one finished job.
    pub(crate) fn add(&mut self, r: &JobRecord) {
        self.jobs_heard += 1;
        let (Some(arm), Some(&pos)) = (self.arm_of(r), self.position.get(&r.case_id)) else {
            return;
        };
        self.heard[pos][arm] += 1;
        if let Some(score) = r.score() {
            self.scores[pos][arm].add(score);
        }
        self.advance();
    }

    /// Whether a record counts in the run's figures: `Some(true)` when its case was (or
    /// will be) fed to a test that needed it, `Some(false)` when no decision needed it
    /// (answered after its variant was decided), `None` while that is not known yet (its
    /// case lies beyond the cases fed so far). Counting only what the tests used makes the
    /// reports a function of the answers, not of how far the workers ran ahead of the
    /// decision: a resumed run reports what the uninterrupted one does.
    pub(crate) fn counts(&self, r: &JobRecord) -> Option<bool> {
        let (Some(arm), Some(&pos)) = (self.arm_of(r), self.position.get(&r.case_id)) else {
            return Some(true);
        };
        // Once a variant is decided, the cases after its decision are never needed again;
        // before the frontier, need is settled.
        let needed = self.needs(arm, pos);
        (pos < self.next || !needed).then_some(needed)
    }

    /// [`Sequential::counts`] once every record is in: what is still open counts when a
    /// test would still need it.
    pub(crate) fn counts_at_end(&self, r: &JobRecord) -> bool {
        self.counts(r)
            .unwrap_or_else(|| match (self.arm_of(r), self.position.get(&r.case_id)) {
                (Some(arm), Some(&pos)) => self.needs(arm, pos),
                _ => true,
            })
    }

    /// The record's arm: its variant's, or its `ENDPOINT/VARIANT`'s.
    fn arm_of(&self, r: &JobRecord) -> Option<usize> {
        self.arm.get(r.arm().as_ref()).copied()
    }

    /// Whether `arm` still needs its jobs of the case at `pos`: while a test it is in (as
    /// the variant tested, or what it is tested against) needs that case.
    fn needs(&self, arm: usize, pos: usize) -> bool {
        if let Some(search) = &self.best {
            let until = |at: Option<usize>| at.is_none_or(|at| pos <= at);
            return until(search.ended_at)
                && until(search.out_at.get(arm).copied().flatten())
                && search.sends(arm, pos);
        }
        self.pairs
            .iter()
            .enumerate()
            .any(|(i, &(a, b))| (a == arm || b == arm) && self.pair_needs(i, pos))
    }

    /// Whether pair `i`'s test needs the case at `pos`.
    fn pair_needs(&self, i: usize, pos: usize) -> bool {
        match self.decided[i] {
            Some((_, at)) => pos <= at,
            None => self.tests[i].is_some(),
        }
    }

    /// Whether every test `arm` is in has decided.
    fn settled(&self, arm: usize) -> bool {
        self.pairs
            .iter()
            .enumerate()
            .all(|(i, &(a, b))| (a != arm && b != arm) || self.decided[i].is_some())
    }

    /// Lets the workers send up to the last case of the unit the tests wait for next, and
    /// the horizon's few cases beyond: a group larger than the horizon goes out whole
    /// (else the tests would wait for cases the workers wait to send).
    fn pace(&self) {
        if let Some(h) = &self.horizon {
            let last = self.starts[(self.next + 1).min(self.starts.len() - 1)];
            h.advance_to(last.saturating_sub(1).max(self.starts[self.next]));
        }
    }

    /// Whether the unit is the group (`--best` over cases that carry `group:`).
    fn grouped(&self) -> bool {
        !self.plan.units.is_empty()
    }

    /// The jobs an arm has at unit position `pos`: each of its cases' repeats.
    fn jobs_of(&self, pos: usize) -> u32 {
        let cases = self.starts[pos + 1] - self.starts[pos];
        self.repeats * u32::try_from(cases).unwrap_or(u32::MAX)
    }

    /// Feeds every case that has become complete, in plan order.
    fn advance(&mut self) {
        while self.next < self.heard.len() {
            let pos = self.next;
            let complete = (0..self.variants.len())
                .all(|a| !self.needs(a, pos) || self.heard[pos][a] >= self.jobs_of(pos));
            if !complete {
                return;
            }
            if self.best.is_some() {
                self.feed_best(pos);
            } else {
                self.feed_pairs(pos);
            }
            self.next += 1;
            self.pace();
        }
    }

    /// Feeds the case at `pos` to every pair's test not yet decided.
    fn feed_pairs(&mut self, pos: usize) {
        for i in 0..self.pairs.len() {
            if self.decided[i].is_some() {
                continue;
            }
            let (arm, against) = self.pairs[i];
            let (v, b) = (
                self.scores[pos][arm].mean(),
                self.scores[pos][against].mean(),
            );
            let Some(test) = self.tests[i].as_mut() else {
                continue;
            };
            // A case with a failed job on either side tells nothing about the pair.
            let (Some(v), Some(b)) = (v, b) else { continue };
            // Done when the difference is decided and (with --max-drop) the drop check
            // settled too.
            if test.observe(v, b).is_ok()
                && test.finished()
                && let Some(decision) = test.decision()
            {
                self.decided[i] = Some((decision, pos));
                for side in [arm, against] {
                    if self.settled(side) {
                        self.flag(side);
                    }
                }
                if let Some(queue) = &self.decisions
                    && let Ok(mut queue) = queue.lock()
                {
                    queue.push(Decided {
                        event: "decided".into(),
                        variant: self.variants[arm].clone(),
                        against: self.named_against.then(|| self.variants[against].clone()),
                        verdict: verdict_name(decision.verdict).into(),
                        cases: decision.cases,
                        unit: None,
                        jobs_heard: self.jobs_heard,
                    });
                }
            }
        }
        if self.decided.iter().all(Option::is_some) {
            self.flag(0);
            if let Some(h) = &self.horizon {
                // Everything left is skipped: let the waiting workers see it.
                h.open();
            }
        }
    }

    /// `--best`: feeds the case at `pos` to the search; an arm it eliminates is sent no
    /// more cases, an arm the leader is confirmed against none while it leads, and once it
    /// ends every arm is stopped. Each elimination and the end are decisions the journal
    /// keeps.
    fn feed_best(&mut self, pos: usize) {
        use promptgauge_stats::best::BestVerdict;
        let arms = self.variants.len();
        let unit = self.grouped().then(|| "groups".to_string());
        let Some(search) = self.best.as_mut() else {
            return;
        };
        if search.ended_at.is_some() {
            return;
        }
        // The unit went to the arms in play it was sent to. One with a failed job of such
        // an arm tells nothing: it is not heard. A group weighs its cases, so the search is
        // of the mean over cases, as every figure is.
        let sent: Vec<usize> = (0..arms)
            .filter(|&a| search.arms.alive(a) && search.sends(a, pos))
            .collect();
        let failed = sent.iter().any(|&a| self.scores[pos][a].mean().is_none());
        let scores: Vec<Option<f64>> = (0..arms)
            .map(|a| {
                (!failed && sent.contains(&a))
                    .then(|| self.scores[pos][a].mean())
                    .flatten()
            })
            .collect();
        let weight = (self.starts[pos + 1] - self.starts[pos]) as f64 / search.largest_unit;
        let out = search.arms.hear_unit(&scores, weight);
        for e in &out {
            search.out_at[e.arm] = Some(pos);
        }
        let verdict = search.arms.verdict();
        let mut decided: Vec<Decided> = out
            .iter()
            .map(|e| Decided {
                event: "decided".into(),
                variant: self.variants[e.arm].clone(),
                against: Some(self.variants[e.by].clone()),
                verdict: "eliminated".into(),
                cases: e.cases,
                unit: unit.clone(),
                jobs_heard: self.jobs_heard,
            })
            .collect();
        let (named, word) = match &verdict {
            BestVerdict::Open => (Vec::new(), ""),
            BestVerdict::One(a) => (vec![*a], "best"),
            BestVerdict::WithinEpsilon(arms) => (arms.clone(), "best"),
            BestVerdict::OneOf(arms) => (arms.clone(), "one_of"),
        };
        if !named.is_empty() {
            search.ended_at = Some(pos);
            let cases = search.arms.cases();
            decided.extend(named.iter().map(|&a| Decided {
                event: "decided".into(),
                variant: self.variants[a].clone(),
                against: None,
                verdict: word.into(),
                cases,
                unit: unit.clone(),
                jobs_heard: self.jobs_heard,
            }));
        } else {
            self.send_to_contenders(pos);
        }
        for e in &out {
            self.flag(e.arm);
        }
        if !named.is_empty() {
            (0..arms).for_each(|a| self.flag(a));
            if let Some(h) = &self.horizon {
                h.open();
            }
        }
        if let Some(queue) = &self.decisions
            && let Ok(mut queue) = queue.lock()
        {
            queue.extend(decided);
        }
    }

    /// `--best`, after the unit at `pos`: when the contenders changed, the units no worker
    /// can have reached yet — past the horizon the search set after that unit — go to them.
    /// The horizon's limit follows the search ([`Sequential::pace`]), so the first such unit
    /// is the same in a live run, a resumed one and a replay of its journal.
    fn send_to_contenders(&mut self, pos: usize) {
        let units = self.heard.len();
        let limit = self.horizon_after(pos);
        let Some(search) = self.best.as_mut() else {
            return;
        };
        let contenders = search.arms.contenders();
        let arms = self.variants.len();
        let now: Vec<bool> = (0..arms).map(|a| contenders.contains(&a)).collect();
        let last = search
            .sent_to
            .last()
            .map_or_else(|| vec![true; arms], |(_, to)| to.clone());
        if now == last {
            return;
        }
        let reach = limit.saturating_add(search.ahead).saturating_add(1);
        let from = self.starts[..units].partition_point(|&s| s < reach);
        if from >= units {
            return;
        }
        search.sent_to.push((from, now.clone()));
        // Said as it happens: an arm set aside by the leader, or sent cases again under
        // another.
        let leader = search.arms.leader().map(|l| self.variants[l].clone());
        let cases = search.arms.cases();
        let unit = (!self.plan.units.is_empty()).then(|| "groups".to_string());
        let changed: Vec<Decided> = (0..arms)
            .filter(|&a| now[a] != last[a] && search.arms.alive(a))
            .map(|a| Decided {
                event: "decided".into(),
                variant: self.variants[a].clone(),
                against: leader.clone(),
                verdict: if now[a] { "back" } else { "set_aside" }.into(),
                cases,
                unit: unit.clone(),
                jobs_heard: self.jobs_heard,
            })
            .collect();
        if let Some(queue) = &self.decisions
            && let Ok(mut queue) = queue.lock()
        {
            queue.extend(changed);
        }
        if let (Some(h), Some(stop)) = (&self.horizon, &self.stop) {
            let mut flags = vec![true; stop.len()];
            for (arm, &to) in now.iter().enumerate() {
                if let Some(&flag) = self.bench_index.get(arm).filter(|_| !to) {
                    flags[flag] = false;
                }
            }
            h.send_from(self.starts[from], flags);
        }
    }

    /// The last case position [`Sequential::pace`] lets the workers reach, less the
    /// horizon's cases ahead, once the unit at `pos` is fed.
    fn horizon_after(&self, pos: usize) -> usize {
        let next = pos + 1;
        let last = self.starts[(next + 1).min(self.starts.len() - 1)];
        last.saturating_sub(1)
            .max(self.starts[next.min(self.starts.len() - 1)])
    }

    fn flag(&self, arm: usize) {
        if let Some(stop) = &self.stop
            && let Some(flag) = self.bench_index.get(arm).and_then(|&i| stop.get(i))
        {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// Planned jobs (of the `heard` grid) that no decision needed and that were not heard.
    fn not_needed(&self) -> usize {
        let mut n = 0;
        for pos in 0..self.heard.len() {
            for arm in 0..self.variants.len() {
                if !self.needs(arm, pos) {
                    n += (self.jobs_of(pos).saturating_sub(self.heard[pos][arm])) as usize;
                }
            }
        }
        n
    }

    /// The summary's account: each variant's verdict, and what stopping saved.
    pub fn summary(
        &self,
        jobs_run: usize,
        cost: Option<f64>,
        baseline_accuracy: Option<f64>,
    ) -> SequentialSummary {
        // The fixed design at the baseline accuracy this run measured (½ when none).
        let p0 = baseline_accuracy
            .filter(|a| *a > 0.0 && *a < 1.0)
            .unwrap_or(0.5);
        if let Some(search) = &self.best {
            return self.best_summary(search, jobs_run, cost, p0);
        }
        let drop_at = self.plan.max_drop;
        let variants = (0..self.pairs.len()).map(|i| self.verdict(i)).collect();
        // Exactly as `plan` sizes it after this run: a difference of `detect` either way.
        let fixed_cases = self.fixed_design_cases(p0);
        let jobs_fixed =
            fixed_cases.map(|n| n * self.variants.len() as u64 * u64::from(self.repeats));
        let all_decided = self
            .decided
            .iter()
            .all(|d| d.is_some_and(|(d, _)| d.verdict != Conclusion::Undecided));
        // Savings only count when every verdict was reached.
        let saved = jobs_fixed
            .filter(|_| all_decided)
            .map(|f| f.saturating_sub(jobs_run as u64));
        SequentialSummary {
            detect: self.plan.detect * 100.0,
            power: self.plan.power,
            min_cases: self.plan.min_cases,
            max_cases: self.plan.max_cases,
            seed: self.plan.seed,
            max_drop: drop_at.map(|m| m * 100.0),
            fixed_design_cases: fixed_cases,
            variants,
            jobs_not_needed: self.not_needed(),
            jobs_fixed_design: jobs_fixed,
            jobs_saved: saved,
            cost_saved_usd: cost_saved(cost, saved, jobs_run),
            best: None,
        }
    }

    /// `--best`'s account: what it found, each elimination, and the jobs against the fixed
    /// design with the same guarantee (every arm on the cases that make picking the
    /// highest mean right with the run's confidence when the best is more than ε ahead:
    /// z²·Var(d)/ε², Bonferroni across the arms; Var(d) = 2·p0(1 − p0) for independent
    /// arms at the baseline's accuracy `p0`).
    fn best_summary(
        &self,
        search: &Search,
        jobs_run: usize,
        cost: Option<f64>,
        p0: f64,
    ) -> SequentialSummary {
        use promptgauge_stats::best::BestVerdict;
        let name = |a: usize| self.variants[a].clone();
        let (outcome, named) = match search.arms.verdict() {
            BestVerdict::One(a) => ("one", vec![a]),
            BestVerdict::WithinEpsilon(arms) => ("within_epsilon", arms),
            BestVerdict::OneOf(arms) => ("one_of", arms),
            BestVerdict::Open => ("open", search.arms.contenders()),
        };
        let arms = self.variants.len();
        let epsilon = self.plan.best.map_or(0.0, |b| b.epsilon);
        // Grouped, the fixed design's size turns on how alike a group's cases are, which
        // the search does not estimate: none is given.
        let fixed_cases = (epsilon > 0.0 && arms > 1 && !self.grouped()).then(|| {
            promptgauge_stats::best::fixed_design_cases(
                arms,
                self.confidence,
                2.0 * p0 * (1.0 - p0),
                epsilon,
            )
        });
        let jobs_fixed = fixed_cases.map(|n| n * arms as u64 * u64::from(self.repeats));
        let saved = jobs_fixed
            .filter(|_| outcome != "open")
            .map(|f| f.saturating_sub(jobs_run as u64));
        SequentialSummary {
            detect: epsilon * 100.0,
            power: self.plan.power,
            min_cases: 0,
            max_cases: self.plan.max_cases,
            seed: self.plan.seed,
            max_drop: None,
            fixed_design_cases: fixed_cases,
            variants: Vec::new(),
            jobs_not_needed: self.not_needed(),
            jobs_fixed_design: jobs_fixed,
            jobs_saved: saved,
            cost_saved_usd: cost_saved(cost, saved, jobs_run),
            best: Some(BestSummary {
                epsilon: epsilon * 100.0,
                confidence: self.confidence,
                outcome: outcome.into(),
                named: named.iter().map(|&a| name(a)).collect(),
                remaining: search.arms.remaining().into_iter().map(name).collect(),
                cases: search.arms.cases(),
                grouped: self.grouped(),
                eliminated: search
                    .arms
                    .eliminated()
                    .iter()
                    .map(|e| BestElimination {
                        variant: name(e.arm),
                        by: name(e.by),
                        cases: e.cases,
                        gap_at_least: e.gap_at_least * 100.0,
                        gap_seen: e.gap_seen * 100.0,
                    })
                    .collect(),
                standing: self.standing(search, &named),
                more_cases: (outcome == "one_of")
                    .then(|| search.arms.units_to_settle())
                    .flatten(),
                jobs_bench: Some(
                    (arms * self.starts.last().copied().unwrap_or(0)) as u64
                        * u64::from(self.repeats),
                ),
                jobs_sent: jobs_run as u64,
            }),
        }
    }

    /// `--best`: each arm in play the answer does not name, against the first named (the
    /// leader when the search is open).
    fn standing(&self, search: &Search, named: &[usize]) -> Vec<BestStanding> {
        let Some(against) = named.first().copied().or_else(|| search.arms.leader()) else {
            return Vec::new();
        };
        search
            .arms
            .remaining()
            .into_iter()
            .filter(|a| !named.contains(a))
            .map(|a| {
                let (gap, cases) = search.arms.standing(a, against);
                BestStanding {
                    variant: self.variants[a].clone(),
                    against: self.variants[against].clone(),
                    gap_seen: gap * 100.0,
                    cases,
                }
            })
            .collect()
    }

    /// Pair `i`'s verdict as the summary states it.
    fn verdict(&self, i: usize) -> SequentialVerdict {
        let exhausted = self.next >= self.heard.len();
        let (arm, against) = self.pairs[i];
        let test = self.tests[i].as_ref();
        let decided = test.and_then(SequentialTest::decision).or_else(|| {
            // The difference may be decided while the drop check runs on.
            self.decided[i].map(|(d, _)| d)
        });
        let (verdict, d) = match decided {
            Some(d) => (verdict_name(d.verdict), Some(d)),
            // Every planned case was heard and none decided it (failed jobs can leave a
            // test short of max_cases).
            None if exhausted => ("undecided", None),
            None => ("running", None),
        };
        SequentialVerdict {
            drop: test
                .and_then(SequentialTest::drop_check)
                .map(|check| drop_summary(check, exhausted)),
            variant: self.variants[arm].clone(),
            against: self.named_against.then(|| self.variants[against].clone()),
            verdict: verdict.to_string(),
            cases: d.map_or_else(|| test.map_or(0, SequentialTest::cases), |d| d.cases),
            statistic: d.map_or(0.0, |d| d.statistic),
            threshold: d.map_or_else(
                || test.map_or(0.0, SequentialTest::reject_threshold),
                |d| d.threshold,
            ),
        }
    }

    /// The cases a fixed design needs (the larger of the difference's and the drop
    /// check's) at baseline accuracy `p0`.
    fn fixed_design_cases(&self, p0: f64) -> Option<u64> {
        let drop_at = self.plan.max_drop;
        let m = self.plan.comparisons.max(1);
        let difference_cases = promptgauge_stats::sequential::fixed_design_cases(
            self.plan.detect,
            p0,
            self.plan.power,
            self.confidence,
            m,
        );
        let drop_cases = drop_at.and_then(|max_drop| {
            let mut a = promptgauge_stats::power::Assumptions::new(p0, 1.0 - self.confidence);
            a.comparisons = m;
            promptgauge_stats::power::non_inferiority_cases(max_drop, self.plan.power, &a)
        });
        match (difference_cases, drop_cases) {
            (Some(f), Some(d)) => Some(f.max(d)),
            (f, d) => f.or(d),
        }
    }
}

/// What the jobs not sent would have cost, at the mean cost of the `jobs_run` sent.
fn cost_saved(cost: Option<f64>, saved: Option<u64>, jobs_run: usize) -> Option<f64> {
    match (cost, saved) {
        (Some(c), Some(s)) if jobs_run > 0 => Some(c / jobs_run as f64 * s as f64),
        _ => None,
    }
}

/// A variant's drop check as the summary states it.
fn drop_summary(check: &NonInferiority, exhausted: bool) -> DropSummary {
    match check.decision() {
        Some(d) => DropSummary::of(d),
        None => {
            let (cases, passing, _) = check.state();
            DropSummary {
                // Every planned case was fed (or the bench ran out) and none settled it.
                verdict: if exhausted { "not_shown" } else { "running" }.into(),
                cases,
                statistic: passing,
                threshold: check.pass_threshold(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::JobStatus;

    fn record(case: &str, variant: &str, right: bool) -> JobRecord {
        let mut r: JobRecord = serde_json::from_value(serde_json::json!({
            "job": 0, "case_id": case, "variant": variant, "repeat": 0,
            "status": "graded", "outcome": "complete", "output": "", "finish_reason": "stop",
            "expected": [], "extracted": null, "correct": right, "error": null,
            "attempts": [], "ttft_ms": null, "latency_ms": null, "model": null,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "reasoning_tokens": 0, "estimated": false}
        }))
        .unwrap();
        r.score = Some(if right { 1.0 } else { 0.0 });
        r.status = JobStatus::Graded;
        r
    }

    fn plan(min_cases: u64) -> SequentialPlan {
        SequentialPlan {
            seed: 9,
            detect: 0.10,
            power: 0.8,
            min_cases,
            max_cases: 400,
            comparisons: 1,
            binary: true,
            fixed_design_cases: Some(400),
            max_drop: None,
            best: None,
            units: Vec::new(),
        }
    }

    #[test]
    fn cases_are_fed_in_plan_order_whatever_order_jobs_finish_in() {
        let ids: Vec<String> = (0..400).map(|i| format!("c{i}")).collect();
        let names = vec!["base".to_string(), "v".to_string()];
        let order = promptgauge_suite::plan::case_order(400, 9);
        // The variant wins every case: a gain decided early.
        let jobs: Vec<JobRecord> = order
            .iter()
            .flat_map(|&i| [record(&ids[i], "base", false), record(&ids[i], "v", true)])
            .collect();
        let decide = |records: &mut dyn Iterator<Item = &JobRecord>| {
            let flags: StopFlags = Arc::new(vec![AtomicBool::new(false), AtomicBool::new(false)]);
            let decisions = Decisions::default();
            let mut s = Sequential::new(
                &plan(0),
                &ids,
                &names,
                1,
                0.95,
                Some(Steering {
                    stop: flags.clone(),
                    bench_index: vec![0, 1],
                    horizon: Horizon::new(400),
                    decisions: decisions.clone(),
                }),
            );
            for r in records {
                s.add(r);
            }
            let decided = std::mem::take(&mut *decisions.lock().unwrap());
            (s.summary(0, None, None), flags, decided)
        };
        let (in_order, flags, decided) = decide(&mut jobs.iter());
        let (reversed, _, _) = decide(&mut jobs.iter().rev());
        // The decision is queued for the journal once, as the summary states it.
        assert_eq!(decided.len(), 1);
        assert_eq!(
            (decided[0].variant.as_str(), decided[0].verdict.as_str()),
            ("v", "better")
        );
        assert_eq!(decided[0].cases, in_order.variants[0].cases);
        assert_eq!(in_order.variants, reversed.variants);
        let v = &in_order.variants[0];
        assert_eq!(v.verdict, "better");
        assert!(v.cases < 20 && v.statistic >= v.threshold, "{v:?}");
        // Both flags are set: the variant is decided, and so nothing needs the baseline.
        assert!(flags.iter().all(|f| f.load(Ordering::SeqCst)));
        // Everything after the decision was not needed.
        assert_eq!(in_order.jobs_not_needed, 0, "all jobs were heard here");
    }

    #[test]
    fn a_case_waits_for_every_arm_still_open() {
        let ids: Vec<String> = (0..400).map(|i| format!("c{i}")).collect();
        let names = vec!["base".to_string(), "v".to_string()];
        let order = promptgauge_suite::plan::case_order(400, 9);
        let mut s = Sequential::new(&plan(0), &ids, &names, 1, 0.95, None);
        // Only the variant's answers: nothing can be fed.
        for &i in order.iter().take(30) {
            s.add(&record(&ids[i], "v", true));
        }
        assert_eq!(s.summary(30, None, None).variants[0].cases, 0);
        for &i in order.iter().take(30) {
            s.add(&record(&ids[i], "base", false));
        }
        assert_eq!(s.summary(60, None, None).variants[0].verdict, "better");
    }

    #[test]
    fn best_over_groups_hears_a_group_once_all_its_cases_are_in() {
        // 100 cases in 25 groups of 4; the arm "v" wins every case.
        let ids: Vec<String> = (0..100).map(|i| format!("c{i}")).collect();
        let names = vec!["base".to_string(), "v".to_string()];
        let mut p = plan(0);
        p.max_cases = 100;
        p.best = Some(promptgauge_suite::plan::BestPlan {
            epsilon: 0.02,
            ahead: None,
        });
        p.units = (0..100).map(|i| i / 4).collect();
        let order = p.order(100);
        let mut s = Sequential::new(&p, &ids, &names, 1, 0.95, None);
        let best_cases = |s: &Sequential| s.summary(0, None, None).best.unwrap().cases;
        // Three of the first group's four cases, both arms: nothing is heard yet.
        for &i in &order[..3] {
            s.add(&record(&ids[i], "base", false));
            s.add(&record(&ids[i], "v", true));
        }
        assert_eq!(best_cases(&s), 0);
        let i = order[3];
        s.add(&record(&ids[i], "base", false));
        s.add(&record(&ids[i], "v", true));
        assert_eq!(best_cases(&s), 1, "the whole group is one unit");
        for &i in &order[4..] {
            s.add(&record(&ids[i], "base", false));
            s.add(&record(&ids[i], "v", true));
        }
        let best = s.summary(200, None, None).best.unwrap();
        assert!(best.grouped);
        assert_eq!(best.named, vec!["v".to_string()]);
        // The baseline went out, or was set aside by the leader, at the last group heard.
        let stopped = best
            .eliminated
            .first()
            .map(|e| e.cases)
            .or_else(|| best.standing.first().map(|a| a.cases));
        assert!(best.cases <= 25 && stopped == Some(best.cases), "{best:?}");
    }
}
