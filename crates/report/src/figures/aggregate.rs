//! The aggregator: listens to a run's finished jobs (live, or replayed from the journal) and
//! builds everything the reports need in one pass: the summary's totals, the per-case
//! scores behind the paired statistics, the latencies behind the charts, the cases where
//! variants disagree, the failed jobs, and (with `--junit`) the test cases. Renderers only
//! render its [`RunResult`]; none reads the journal.
//!
//! Memory stays bounded by what a report shows: per job only numbers are kept; answers are
//! kept for cases where the variants disagree (report.html), for the first 500 failed jobs,
//! and the JUnit test cases go to a spool file beside the journal.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::compare::{
    CaseTable, Comparison, CorrectedDifference, Detectable, Paired, compare, decide,
};
use crate::job_rows::JobRows;
use crate::junit::JunitSpool;
use crate::labels::{JudgedScores, Labels, corrected_difference, judged_pairs};
use crate::parts::{PartFigures, PartTables};
use crate::result::RunResult;
use crate::sinks::Sink;
use crate::sinks::failed::FailedJobs;
use crate::sinks::shown::ShownAnswers;
use crate::summary::{
    Acc, ArmPrices, ArmScores, Latencies, Percentiles, ReplicaSummary, SCHEMA, SCHEMA_GRID,
    SCHEMA_SCORED, Summary, slices,
};
use crate::{RunInfo, VariantSummary};
use promptgauge_runner::journal::{Audit, JobRecord, JobStatus};
use promptgauge_runner::sequential::{Counts, Sequential, SequentialSummary};
use promptgauge_suite::Price;

/// What the aggregator needs to know before the first record.
pub struct AggregatorSettings {
    pub run: RunInfo,
    /// The run's variants, the baseline first.
    pub variants: Vec<String>,
    /// A run of several endpoints: their names, the baseline first (empty: one endpoint).
    /// The figures are then per arm, `ENDPOINT/VARIANT`.
    pub endpoints: Vec<String>,
    pub price: Option<Price>,
    /// Each arm's price, when arms differ (a run of several endpoints); empty: `price`.
    pub arm_prices: Vec<Option<Price>>,
    /// Jobs the plan holds: the run is complete when each has a record.
    pub planned: usize,
    /// Collect JUnit test cases into a spool at this path.
    pub junit_spool: Option<PathBuf>,
    /// What the judge's tokens cost, when known.
    pub judge_price: Option<Price>,
    /// People's labels of judged answers (`labels.jsonl`), by job.
    pub labels: Labels,
}

/// Builds a [`RunResult`] from finished jobs: the run's figures (the summary, the case
/// table behind the paired statistics, the latencies), and the fan-out to its other
/// outputs ([`crate::sinks`]). With `--until-decided`, it stands behind the sequential
/// tests (`runner::sequential::Decider`), which decide which records it counts.
pub struct Aggregator {
    run: RunInfo,
    /// What the figures are kept for: the variants, or each (variant, endpoint) by
    /// `ENDPOINT/VARIANT`.
    variants: Vec<String>,
    /// A run of several endpoints: the grid's shape, for the arms' names and the two
    /// families of comparisons.
    grid: Option<Grid>,
    arm: HashMap<String, usize>,
    /// Each arm's price.
    prices: Vec<Option<Price>>,
    planned: usize,
    accs: Vec<Acc>,
    cases: CaseTable,
    replica_latency: Vec<Vec<f64>>,
    replica_counts: Vec<(u64, u64)>,
    finished: usize,
    failed: usize,
    torn: usize,
    duplicates: usize,
    outside_plan: usize,
    judge_price: Option<Price>,
    /// Some score was neither 0 nor 1: the run is scored, not binary.
    scored: bool,
    labels: Labels,
    /// With labels: per variant, the judged scores, labelled or not, by case.
    judged: Vec<JudgedScores>,
    /// The run's other outputs, each hearing every counted record.
    sinks: Vec<Box<dyn Sink>>,
    /// The scores' named parts, each its own case table.
    parts: PartTables,
}

impl Aggregator {
    /// An aggregator that has heard nothing yet.
    pub fn new(settings: AggregatorSettings) -> Aggregator {
        let AggregatorSettings {
            run,
            variants,
            endpoints,
            price,
            arm_prices,
            planned,
            junit_spool,
            judge_price,
            labels,
        } = settings;
        let grid = (!endpoints.is_empty()).then(|| Grid {
            variants: variants.clone(),
            endpoints: endpoints.clone(),
        });
        let variants = promptgauge_suite::plan::arm_names(&variants, &endpoints);
        let prices = if arm_prices.len() == variants.len() {
            arm_prices
        } else {
            vec![price; variants.len()]
        };
        let replicas = run.provider.replicas.len();
        let mut sinks: Vec<Box<dyn Sink>> = vec![
            Box::new(ShownAnswers::new(variants.len())),
            Box::new(FailedJobs::default()),
        ];
        if let Some(path) = junit_spool {
            sinks.push(Box::new(JunitSpool::create(
                path,
                &run.bench,
                run.repeats > 1,
            )));
        }
        Aggregator {
            arm: variants
                .iter()
                .enumerate()
                .map(|(i, v)| (v.clone(), i))
                .collect(),
            accs: variants.iter().map(|_| Acc::default()).collect(),
            cases: CaseTable::new(variants.len()),
            parts: PartTables::new(variants.len()),
            variants,
            grid,
            prices,
            planned,
            replica_latency: vec![Vec::new(); replicas],
            replica_counts: vec![(0, 0); replicas],
            run,
            finished: 0,
            failed: 0,
            torn: 0,
            duplicates: 0,
            outside_plan: 0,
            judge_price,
            scored: false,
            labels,
            judged: Vec::new(),
            sinks,
        }
    }

    /// Also keeps one row per job of these cases (the run's), for the history store: in
    /// a spool file at `spool` (a live run), else in memory.
    pub fn keep_rows(&mut self, case_ids: &[String], spool: Option<PathBuf>) {
        self.add_sink(Box::new(match spool {
            Some(path) => JobRows::spooled(&self.variants, case_ids, path),
            None => JobRows::new(&self.variants, case_ids),
        }));
    }

    /// Adds an output that hears every counted record from now on (a `--jobs-csv` file).
    pub fn add_sink(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
    }

    /// The run as it ended (its end time, why it stopped), for the summary.
    /// The run as it ended (its stop, its end time); the folder it was given stays.
    pub fn set_run(&mut self, run: RunInfo) {
        let folder = self.run.folder.take();
        self.run = run;
        self.run.folder = self.run.folder.take().or(folder);
    }

    /// Counts what a journal replay found beside the records it passed on.
    pub fn note_audit(&mut self, audit: &Audit) {
        self.torn += audit.stats.torn;
        self.duplicates += audit.duplicates;
        self.outside_plan += audit.outside_plan + audit.foreign;
    }

    /// A job no decision needed: what it cost is spent; it is in no figure.
    fn unused(&mut self, r: &JobRecord) {
        self.finished += 1;
        if let Some(arm) = self.arm_of(r) {
            self.accs[arm].add_unused(r, self.prices[arm].as_ref());
        }
    }

    /// Adds one job to every figure.
    fn count(&mut self, r: &JobRecord) {
        let names = self.replica_counts.len();
        for a in &r.attempts {
            if let Some(i) = a.replica.filter(|&i| i < names) {
                // A withheld answer (content filter) was served: the replica worked.
                if a.outcome.finished() {
                    self.replica_counts[i].0 += 1;
                    self.replica_latency[i].push(a.latency_ms);
                } else {
                    self.replica_counts[i].1 += 1;
                }
            }
        }
        self.finished += 1;
        let arm = self.arm_of(r);
        for sink in &mut self.sinks {
            sink.counted(arm, r);
        }
        let Some(arm) = arm else {
            return;
        };
        if r.status == JobStatus::Failed {
            self.failed += 1;
        }
        if let Some(group) = &r.group {
            self.cases.set_group(&r.case_id, group);
        }
        if let Some(score) = r.score() {
            self.scored |= !promptgauge_grade::scorer::is_binary(score);
            self.cases.add(&r.case_id, &r.tags, arm, score);
            if !r.judge.is_empty() && !self.labels.is_empty() {
                self.judged_by(arm, r, score);
            }
        }
        self.parts.add(r, arm);
        self.accs[arm].add(r, self.prices[arm].as_ref(), self.judge_price.as_ref());
    }

    /// The record's arm: its variant's, or in a run of several endpoints its
    /// `ENDPOINT/VARIANT`'s (`None` for a record of no arm the run has).
    fn arm_of(&self, r: &JobRecord) -> Option<usize> {
        self.arm.get(r.arm().as_ref()).copied()
    }

    /// Keeps a judged score for comparing the judge with people's labels.
    fn judged_by(&mut self, arm: usize, r: &JobRecord, score: f64) {
        let arms = self.variants.len();
        if self.judged.is_empty() {
            self.judged = vec![JudgedScores::default(); arms];
        }
        let person = self.labels.get(&r.key()).copied();
        self.judged[arm].add(&r.case_id, score, person);
    }

    #[cfg(test)]
    /// The result, once every record is in.
    pub(crate) fn finish(self) -> RunResult {
        Counts::finish(self, None)
    }

    /// The figures, once every record is in (the outputs add theirs).
    fn figures(mut self, tests: Option<&Sequential>) -> RunResult {
        self.cases.shrink_to_fit();
        let accs = std::mem::take(&mut self.accs);
        let (summaries, latencies) = self.variant_summaries(accs);
        let mut comparisons = self.comparisons(&summaries);
        let parts = self.part_figures();
        let sequential = tests.map(|s| self.sequential_summary(s, &summaries));
        if let Some(seq) = &sequential {
            for c in &mut comparisons {
                crate::sequential::apply(c, seq);
            }
        }
        // After stopping early the fixed design's power figure does not apply.
        let detectable = self.detectable(&summaries, sequential.is_none());
        let mut result = self.result(RunFigures {
            summaries,
            comparisons,
            detectable,
            sequential,
            latencies,
        });
        result.summary.parts = parts;
        result
    }

    /// Each variant's (each arm's) summary and latencies, in order.
    fn variant_summaries(&self, accs: Vec<Acc>) -> (Vec<VariantSummary>, Vec<Latencies>) {
        let (confidence, cases) = (self.run.confidence, &self.cases);
        let mut summaries: Vec<VariantSummary> = Vec::with_capacity(self.variants.len());
        let mut latencies = Vec::with_capacity(self.variants.len());
        for (i, (name, acc)) in self.variants.iter().zip(accs).enumerate() {
            let arm = cases.arm(i);
            let units = cases.arm_by_group(i);
            let grouped = cases.grouped();
            let scores = ArmScores {
                cases: &arm,
                units: &units,
                grouped,
            };
            let prices = ArmPrices {
                model: self.prices[i].as_ref(),
                judge: self.judge_price.as_ref(),
            };
            let (mut summary, lat) = acc.finish(name, i == 0, scores, confidence, prices);
            if let Some(g) = &self.grid {
                let (e, v) = (i / g.variants.len(), i % g.variants.len());
                summary.variant = Some(g.variants[v].clone());
                summary.endpoint = Some(g.endpoints[e].clone());
            }
            if self.scored {
                score_summary(&mut summary, cases.arm_mean_score(i, confidence));
                let points: f64 = arm.iter().map(|s| s.score).sum();
                summary.cost_per_point_usd = super::summary::cost_per(summary.cost_usd, points);
            } else {
                let by_id = cases.arm_by_id(i);
                repeats_summary(&mut summary, &by_id, self.run.repeats, confidence);
            }
            summary.labelled = self.judged.get(i).and_then(|j| j.summarise(confidence));
            summaries.push(summary);
            latencies.push(lat);
        }
        (summaries, latencies)
    }

    /// Every comparison the run makes, family by family (Holm over each: the comparisons
    /// that answer one question together).
    fn comparisons(&self, summaries: &[VariantSummary]) -> Vec<Comparison> {
        let mut comparisons: Vec<Comparison> = Vec::new();
        for family in self.families() {
            let mut made: Vec<Comparison> = family
                .pairs
                .iter()
                .map(|&(i, against)| {
                    let mut c = self.comparison(i, against, summaries);
                    c.family = family.axis.clone();
                    c
                })
                .collect();
            decide(&mut made, self.run.confidence);
            comparisons.extend(made);
        }
        for c in &mut comparisons {
            people_scores_own_interval(c);
        }
        comparisons
    }

    /// The comparisons made together, family by family: per endpoint and per variant in a
    /// run of several endpoints, else every variant against the baseline.
    fn families(&self) -> Vec<Family> {
        match &self.grid {
            Some(g) => g.families(),
            None => vec![Family {
                pairs: (1..self.variants.len()).map(|i| (i, 0)).collect(),
                axis: None,
            }],
        }
    }

    /// Each named part's figures, compared in the families the whole score is.
    fn part_figures(&mut self) -> Vec<PartFigures> {
        let families: Vec<_> = self
            .families()
            .into_iter()
            .map(|f| (f.pairs, f.axis))
            .collect();
        let parts = std::mem::take(&mut self.parts);
        parts.figures(&self.variants, &families, &self.cases, self.run.confidence)
    }

    /// Arm `i` against arm `against`, paired by case (corrected by people's labels, when
    /// there are some).
    fn comparison(&self, i: usize, against: usize, summaries: &[VariantSummary]) -> Comparison {
        let (confidence, scored) = (self.run.confidence, self.scored);
        let (pairs, groups) = self.cases.paired(i, against);
        let paired = Paired {
            pairs: &pairs,
            groups: groups.as_deref(),
            scored,
        };
        let variants = &self.variants;
        let mut c = compare(&variants[i], &variants[against], paired, confidence);
        let shown = |v: &VariantSummary| v.accuracy.or(v.mean_score);
        c.explain_against(shown(&summaries[i]), shown(&summaries[against]));
        if !self.judged.is_empty() {
            correct_with_labels(
                &mut c,
                &self.judged,
                &self.cases,
                i,
                against,
                scored,
                confidence,
            );
        }
        c
    }

    /// What the sequential tests decided, with what the run cost.
    fn sequential_summary(
        &self,
        tests: &Sequential,
        summaries: &[VariantSummary],
    ) -> SequentialSummary {
        let cost = summaries
            .iter()
            .map(|v| v.spent_usd.or(v.cost_usd))
            .sum::<Option<f64>>();
        // The baseline's accuracy, as `plan` reads it from summary.json (none for a
        // scored run: `plan` then assumes ½, and so does the yardstick).
        let baseline = summaries.first().and_then(|b| b.accuracy);
        tests.summary(self.finished, cost, baseline)
    }

    /// The smallest difference the run could detect, for a fixed design of 0/1 answers.
    fn detectable(&self, summaries: &[VariantSummary], fixed: bool) -> Option<Detectable> {
        let cases = &self.cases;
        summaries
            .first()
            .filter(|_| !self.scored && fixed)
            .and_then(|b| {
                let n = cases.arm(0).len() as u64;
                // The largest family a verdict is adjusted in.
                let m = match &self.grid {
                    Some(g) => {
                        promptgauge_suite::plan::largest_family(g.variants.len(), g.endpoints.len())
                    }
                    None => promptgauge_suite::plan::largest_family(self.variants.len(), 1),
                };
                let repeats = self.run.repeats;
                let icc = promptgauge_stats::cluster::icc(&cases.arm(0));
                b.accuracy.map(|p| {
                    Detectable::new(n, p, self.run.confidence, m)
                        .with_repeats(repeats, icc)
                        .in_grid(self.grid.is_some())
                })
            })
    }

    /// Each replica's attempts and latencies.
    fn replica_summaries(&mut self) -> Vec<ReplicaSummary> {
        let counts = std::mem::take(&mut self.replica_counts);
        let latency = std::mem::take(&mut self.replica_latency);
        self.run
            .provider
            .replicas
            .iter()
            .zip(counts)
            .zip(latency)
            .map(|((base_url, (answered, failed)), latency)| ReplicaSummary {
                base_url: base_url.clone(),
                attempts: answered + failed,
                answered,
                failed,
                latency_ms: Percentiles::of(latency),
            })
            .collect()
    }

    /// The summary and the result around it, the figures made.
    fn result(mut self, figures: RunFigures) -> RunResult {
        let RunFigures {
            summaries,
            comparisons,
            detectable,
            sequential,
            latencies,
        } = figures;
        let (scored, answers_total) = (self.scored, self.cases.len());
        let slices = slices(&self.cases, &self.variants, self.run.confidence, scored);
        // Jobs a sequential decision made unnecessary are not missing.
        let not_needed = sequential.as_ref().map_or(0, |s| s.jobs_not_needed);
        let missing = self
            .planned
            .saturating_sub(self.finished)
            .saturating_sub(not_needed);
        let summary = Summary {
            schema: match (&self.grid, scored) {
                (Some(_), _) => SCHEMA_GRID,
                (None, true) => SCHEMA_SCORED,
                (None, false) => SCHEMA,
            }
            .to_string(),
            scored: scored && self.grid.is_some(),
            complete: self.failed == 0 && missing == 0 && self.run.stopped.is_none(),
            jobs_finished: self.finished,
            jobs_failed: self.failed,
            torn_lines: self.torn,
            duplicate_records: self.duplicates,
            records_outside_plan: self.outside_plan,
            cases_measured: self.run.order_seed.map(|_| answers_total),
            replicas: self.replica_summaries(),
            run: self.run,
            variants: summaries,
            comparisons,
            detectable,
            slices,
            gates: Vec::new(),
            sequential,
            failures: Vec::new(),
            parts: Vec::new(),
        };
        RunResult {
            summary,
            cases: self.cases,
            latencies,
            disagreements: BTreeMap::new(),
            failed: Vec::new(),
            failed_total: self.failed,
            junit: None,
            answers_total,
            answers: BTreeMap::new(),
            prompts: HashMap::new(),
            prompts_cut: 0,
            prompts_left_out: 0,
            jobs: None,
            problems: Vec::new(),
        }
    }
}

/// The figures a run's records made, before the summary is put around them.
struct RunFigures {
    summaries: Vec<VariantSummary>,
    comparisons: Vec<Comparison>,
    detectable: Option<Detectable>,
    sequential: Option<SequentialSummary>,
    latencies: Vec<Latencies>,
}

/// People's scores compared by the usual test (every judged answer labelled): the
/// corrected figures are its own (none without an interval, never a point).
fn people_scores_own_interval(c: &mut Comparison) {
    if c.corrected.is_some_and(|d| d.all_labelled) {
        match (c.ci_low, c.ci_high) {
            (Some(lo), Some(hi)) => {
                if let Some(d) = c.corrected.as_mut() {
                    d.ci_low = lo;
                    d.ci_high = hi;
                }
            }
            _ => c.corrected = None,
        }
    }
}

/// The shape of a run of several endpoints: arm `e × variants + v` is variant `v` at
/// endpoint `e`.
struct Grid {
    variants: Vec<String>,
    endpoints: Vec<String>,
}

/// Comparisons made and Holm-adjusted together: (arm, the arm it is compared with).
struct Family {
    pairs: Vec<(usize, usize)>,
    axis: Option<crate::compare::Family>,
}

impl Grid {
    /// The two axes' families, each paired by case: per endpoint, its variants against
    /// the baseline variant ("which prompt", the endpoints in order); then per variant, the
    /// endpoints against the baseline endpoint ("which model"). A family is one question
    /// answered by itself, so Holm adjusts within it (docs/dev/statistics.md).
    fn families(&self) -> Vec<Family> {
        let v = self.variants.len();
        let arm = |e: usize, i: usize| e * v + i;
        let prompts = self.endpoints.iter().enumerate().map(|(e, name)| Family {
            pairs: (1..v).map(|i| (arm(e, i), arm(e, 0))).collect(),
            axis: Some(crate::compare::Family::variants_at(name)),
        });
        let models = self.variants.iter().enumerate().map(|(i, name)| Family {
            pairs: (1..self.endpoints.len())
                .map(|e| (arm(e, i), arm(0, i)))
                .collect(),
            axis: Some(crate::compare::Family::endpoints_for(name)),
        });
        prompts
            .chain(models)
            .filter(|f| !f.pairs.is_empty())
            .collect()
    }
}

/// A scored run's variant: the mean of its case means with its interval, in place of
/// accuracy and Wilson's interval.
/// With repeats of 0/1 scores: pass@k and pass^k at k = the repeats, and the cases whose
/// repeats disagree.
fn repeats_summary(
    v: &mut VariantSummary,
    cases: &[(&str, promptgauge_stats::cluster::CaseScore)],
    repeats: u32,
    confidence: f64,
) {
    if repeats < 2 {
        return;
    }
    let counts: Vec<(u64, u64)> = cases.iter().map(|(_, s)| (s.graded, s.correct())).collect();
    v.repeats.pass_k = promptgauge_stats::passk::PassK::of(&counts, u64::from(repeats), confidence);
    v.repeats.flaky = cases
        .iter()
        .filter(|(_, s)| s.graded > 1 && s.correct() > 0 && s.correct() < s.graded)
        .map(|(id, _)| (*id).to_string())
        .collect();
}

fn score_summary(v: &mut VariantSummary, m: Option<promptgauge_stats::scores::MeanScore>) {
    if let Some(m) = m {
        v.mean_score = Some(m.mean);
        v.score_ci_low = m.interval.map(|i| i.0);
        v.score_ci_high = m.interval.map(|i| i.1);
    }
    v.accuracy = None;
    v.ci_low = None;
    v.ci_high = None;
    v.design_effect = None;
    v.consistency = None;
}

/// With labels on both arms: the difference as people would score it decides the verdict.
/// Some judged cases unlabelled: prediction-powered inference on the case-level arrays
/// (the case is the unit). Every judged case labelled: people's scores are plain scores,
/// and the comparison is the usual one on them (exact McNemar for 0/1, the sign-flip test
/// otherwise, Holm's level for the interval), with the judge left out.
fn correct_with_labels(
    c: &mut Comparison,
    judged: &[JudgedScores],
    cases: &CaseTable,
    arm: usize,
    base: usize,
    scored: bool,
    confidence: f64,
) {
    let pairs = judged_pairs(&judged[arm], &judged[base]);
    if pairs.labelled.is_empty() {
        return;
    }
    if pairs.unlabelled.is_empty() {
        let (v, b) = (&judged[arm].cases, &judged[base].cases);
        let ids = cases.paired_ids(arm, base);
        let (mut people, groups) = cases.paired(arm, base);
        for (pair, id) in people.iter_mut().zip(&ids) {
            if let (Some(vp), Some(bp)) = (
                v.get(*id).and_then(|x| x.people()),
                b.get(*id).and_then(|x| x.people()),
            ) {
                *pair = (vp, bp);
            }
        }
        let mut p = compare(
            &c.variant,
            &c.against,
            Paired {
                pairs: &people,
                groups: groups.as_deref(),
                scored,
            },
            confidence,
        );
        p.method = format!("{}+labels_people", p.method);
        p.corrected = p.difference.map(|d| CorrectedDifference {
            difference: d,
            ci_low: d,
            ci_high: d,
            labelled_cases: pairs.labelled.len() as u64,
            all_labelled: true,
        });
        *c = p;
        return;
    }
    let Some((d, se)) = corrected_difference(&pairs, confidence) else {
        return;
    };
    // The p-value of the interval's own normal statistic (its bounds clipped to [−1, 1]).
    let p = if se > 0.0 {
        let normal = statrs::distribution::Normal::standard();
        2.0 * (1.0 - statrs::distribution::ContinuousCDF::cdf(&normal, (d.difference / se).abs()))
    } else if d.difference == 0.0 {
        1.0
    } else {
        0.0
    };
    c.correct(d, se, p);
}

/// Some variants passed the case and some did not.
impl Counts for Aggregator {
    type Result = RunResult;

    fn counted(&mut self, r: &JobRecord) {
        self.count(r);
    }

    fn unused(&mut self, r: &JobRecord) {
        Aggregator::unused(self, r);
    }

    fn finish(mut self, tests: Option<&Sequential>) -> RunResult {
        let sinks = std::mem::take(&mut self.sinks);
        let mut result = self.figures(tests);
        for sink in sinks {
            if let Err(e) = sink.finish(&mut result) {
                result.problems.push(e);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ProviderInfo, RunInfo};

    fn judged_record(case: &str, variant: &str, score: f64) -> JobRecord {
        serde_json::from_value(serde_json::json!({
            "job": 0, "case_id": case, "variant": variant, "repeat": 0,
            "status": "graded", "outcome": "complete", "output": "x", "finish_reason": "stop",
            "expected": ["x"], "extracted": null, "correct": score == 1.0, "score": score,
            "error": null, "attempts": [], "ttft_ms": null, "latency_ms": null, "model": null,
            "judge": [{"vote": 0, "request": [], "reply": "VERDICT: yes", "score": score,
                       "usage": null, "latency_ms": null, "attempts": 1}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
                      "reasoning_tokens": 0, "estimated": false}
        }))
        .unwrap()
    }

    fn aggregator(labels: Labels) -> Aggregator {
        Aggregator::new(AggregatorSettings {
            run: RunInfo {
                bench: "b".into(),
                run_id: "r".into(),
                tool_version: "t".into(),
                started_at: "s".into(),
                finished_at: None,
                provider: ProviderInfo {
                    base_url: "u".into(),
                    model: "m".into(),
                    simulated: true,
                    api_key_env: None,
                    replicas: vec![],
                    protocol: Default::default(),
                    endpoint: None,
                    price: None,
                    batch: false,
                },
                confidence: 0.95,
                repeats: 1,
                cases: 64,
                jobs_planned: 128,
                stopped: None,
                endpoints: vec![],
                judge: None,
                self_judged: false,
                order_seed: None,
                search_shard: None,
                folder: None,
            },
            variants: vec!["base".into(), "v".into()],
            endpoints: vec![],
            price: None,
            arm_prices: vec![],
            planned: 128,
            junit_spool: None,
            judge_price: None,
            labels,
        })
    }

    #[test]
    fn variants_disagree_when_their_scores_differ_not_only_on_full_marks() {
        let mut agg = aggregator(Labels::new());
        for (case, base, v) in [
            ("partial", 0.9, 0.4),
            ("same", 0.6, 0.6),
            ("full", 1.0, 0.0),
            ("both", 1.0, 1.0),
        ] {
            agg.counted(&judged_record(case, "base", base));
            agg.counted(&judged_record(case, "v", v));
        }
        let result = agg.finish();
        let cases: Vec<&str> = result.disagreements.keys().map(String::as_str).collect();
        assert_eq!(cases, ["full", "partial"]);
        let scores: Vec<f64> = result.disagreements["partial"]
            .1
            .iter()
            .map(|a| a.as_ref().unwrap().1)
            .collect();
        assert_eq!(scores, [0.9, 0.4]);
        // And report.html shows the partial credit beside the answers.
        let page = crate::html::render_run(&result, "");
        assert!(
            page.contains("\"text part\">0.90 ") && page.contains("\"text part\">0.40 "),
            "partial scores shown"
        );
    }

    #[test]
    fn every_judged_answer_labelled_takes_the_exact_test_on_peoples_scores() {
        // People: the variant wins 5 cases, loses none, 59 ties. The judge says otherwise
        // (it passes everything), but every answer is labelled, so people's scores are the
        // data: exact McNemar gives p = 2·(½)⁵ = 0.0625, not the normal approximation's 0.032.
        let mut labels = Labels::new();
        let mut agg = aggregator(Labels::new());
        let mut records = Vec::new();
        for i in 0..64 {
            let case = format!("c{i:02}");
            let (v, b) = match i {
                0..5 => (1.0, 0.0),
                5..40 => (1.0, 1.0),
                _ => (0.0, 0.0),
            };
            labels.insert((case.clone(), "v".into(), 0), v);
            labels.insert((case.clone(), "base".into(), 0), b);
            records.push(judged_record(&case, "base", 1.0));
            records.push(judged_record(&case, "v", 1.0));
        }
        agg.labels = labels;
        for r in &records {
            agg.counted(r);
        }
        let s = agg.finish().summary;
        let c = &s.comparisons[0];
        let exact = promptgauge_stats::paired::mcnemar_exact(5, 0);
        assert!((exact - 0.0625).abs() < 1e-12);
        assert!((c.p_value.unwrap() - exact).abs() < 1e-12, "{c:?}");
        assert_eq!(c.verdict, crate::compare::Verdict::NotDistinguishable);
        assert!((c.difference.unwrap() - 5.0 / 64.0).abs() < 1e-12);
        assert!(c.sentence.contains("as people scored it"), "{}", c.sentence);
        let d = c.corrected.unwrap();
        assert!(d.all_labelled && d.labelled_cases == 64);
        assert_eq!(
            (d.ci_low, d.ci_high),
            (c.ci_low.unwrap(), c.ci_high.unwrap())
        );
        // The interval agrees with the exact test: it reaches 0.
        assert!(c.ci_low.unwrap() <= 0.0 && c.ci_high.unwrap() > 0.0);
    }
}
