//! The summary of a run: what `summary.json` (schema `promptgauge.summary/1`) holds. It is
//! built by the [`crate::aggregate::Aggregator`] from the run's records, live or replayed
//! from the journal, so a resumed or re-read run gives the same numbers.

use serde::{Deserialize, Serialize};

use crate::compare::{CaseTable, Comparison, Detectable};
use promptgauge_client::Outcome;
use promptgauge_runner::journal::{JobRecord, JobStatus};
use promptgauge_stats as stats;
use promptgauge_stats::cluster::{CaseScore, clustered_wilson, consistency};
use promptgauge_suite::Price;

/// The schema id of `summary.json` (docs/summary.schema.json).
pub(crate) const SCHEMA: &str = "promptgauge.summary/1";

/// The schema id of a *scored* run's `summary.json` (some score is neither 0 nor 1): the
/// accuracy fields are empty and `mean_score` carries the result.
pub(crate) const SCHEMA_SCORED: &str = "promptgauge.summary/2";

/// The schema id of a run of several endpoints: its `variants` are arms (a variant at an
/// endpoint, `ENDPOINT/VARIANT`, each naming its `variant` and `endpoint`), `run.endpoints`
/// lists the endpoints, each comparison names its `family`, and `scored` says what schema
/// 2 says by its id.
pub(crate) const SCHEMA_GRID: &str = "promptgauge.summary/3";

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub use promptgauge_runner::record::{ProviderInfo, RunInfo};

/// The 50th, 90th and 99th percentiles (numpy's linear interpolation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
}

impl Percentiles {
    pub(crate) fn of(mut xs: Vec<f64>) -> Self {
        xs.sort_by(f64::total_cmp);
        Self::of_sorted(&xs)
    }

    fn of_sorted(xs: &[f64]) -> Self {
        Percentiles {
            p50: stats::percentile(xs, 50.0),
            p90: stats::percentile(xs, 90.0),
            p99: stats::percentile(xs, 99.0),
        }
    }
}

/// Token totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
    pub reasoning: u64,
    /// True when some counts are estimates because the server sent no `usage`.
    pub estimated: bool,
    /// True when a total reached u64::MAX and stopped there: a server reported absurd
    /// counts, and the totals are not to be trusted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saturated: bool,
}

impl Tokens {
    /// Adds one job's usage; totals stop at u64::MAX (and say so) rather than wrap.
    pub(crate) fn add(&mut self, u: &promptgauge_client::Usage) {
        let mut add = |total: &mut u64, n: u64| match total.checked_add(n) {
            Some(t) => *total = t,
            None => {
                *total = u64::MAX;
                self.saturated = true;
            }
        };
        add(&mut self.prompt, u.prompt_tokens);
        add(&mut self.completion, u.completion_tokens);
        // Cached tokens are part of the prompt: a server that reports more is held to it.
        add(&mut self.cached, u.cached_tokens.min(u.prompt_tokens));
        add(&mut self.reasoning, u.reasoning_tokens);
        self.estimated |= u.estimated;
    }
}

/// What a variant's repeats show, with `repeats: k ≥ 2` (docs/dev/statistics.md, §3c).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RepeatFigures {
    /// Of 0/1 scores: pass@k (a case right at least once in k) and pass^k (right all k
    /// times), each over cases with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_k: Option<promptgauge_stats::passk::PassK>,
    /// The cases whose repeats disagree (some right, some not), by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<String>,
}

/// One variant's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantSummary {
    /// The variant's name; in a run of several endpoints its arm's, `ENDPOINT/VARIANT`.
    pub name: String,
    /// In a run of several endpoints: the variant and the endpoint of this arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub baseline: bool,
    /// Jobs finished (graded + failed + filtered + unused).
    pub jobs: usize,
    /// Graded jobs: the denominator of accuracy.
    pub n: u64,
    pub correct: u64,
    pub accuracy: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Jobs with no answer (retries exhausted, fatal errors); not counted as wrong.
    pub failed: u64,
    /// Answers the provider withheld (`finish_reason: content_filter`): neither right,
    /// wrong nor failed, and left out of the comparisons.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub filtered: u64,
    /// Graded answers the model declined to give (a protocol's refusal): scored 0, in
    /// every figure; counted here per variant (and per endpoint, in a run of several).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused: u64,
    /// Jobs billed for more output tokens than their `max_tokens` allows (a provider
    /// accounting anomaly): their reported usage is in what was spent, flagged.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub usage_anomalies: u64,
    /// The first of them, with its case: `add-03: the provider billed …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_anomaly_example: Option<String>,
    /// `--budget`: what its jobs were billed past what was held back for them, by cause
    /// (what an overspend is said by); absent when nothing passed its hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub past_holds: Option<crate::figures::holds::PastHolds>,
    /// `--until-decided`: jobs answered after the variant was decided (sent before the
    /// decision reached the workers). No decision used them: they count in what was
    /// spent, not in any figure, so the figures do not depend on timing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unused: u64,
    /// Graded answers cut by the token ceiling (`finish_reason: length`).
    pub truncated: u64,
    /// Answers taken from the response cache: not sent, not in the latency figures.
    #[serde(default)]
    pub cached: u64,
    pub attempts: u64,
    pub ttft_ms: Percentiles,
    /// The answering attempt alone, from its request to its last event.
    pub latency_ms: Percentiles,
    /// Time to answer: from the first attempt sent to the answer, retries and backoff
    /// included (answers from the cache are not timed).
    #[serde(default)]
    pub answer_ms: Percentiles,
    /// Completion tokens per second of generation (after the first token), over all jobs.
    pub output_tokens_per_s: Option<f64>,
    pub tokens: Tokens,
    /// What the graded answers cost at list price (cached ones included): what the same
    /// answers would cost again.
    pub cost_usd: Option<f64>,
    pub cost_per_correct_usd: Option<f64>,
    /// A scored run's cost per point of score: the graded answers' cost over the sum of
    /// their scores (an answer scored 0.5 earns half a point). What `$/correct` means when
    /// answers earn part marks; absent on a run scored 0 or 1, where it is
    /// `cost_per_correct_usd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_point_usd: Option<f64>,
    /// What this run paid for: every attempt the server answered (retried and failed ones
    /// included, by their usage or an estimate), answers from the cache free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_usd: Option<f64>,
    /// Some attempt's usage was estimated (the server reported none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spent_estimated: bool,
    /// Graded jobs answered through the provider's batch API (`--batch`), costed at the
    /// batch price in `cost_usd`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batched: u64,
    /// What those batched answers cost (at the batch price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batched_cost_usd: Option<f64>,
    /// What those batched answers would have cost streamed (at the streaming price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batched_streaming_cost_usd: Option<f64>,
    /// With repeats: the design effect behind the interval, N/n_eff (Kish's, or more where
    /// the case means bound the effective size; 1 = samples independent).
    pub design_effect: Option<f64>,
    /// With repeats: the share of cases whose samples all agree.
    pub consistency: Option<f64>,
    /// With repeats: pass@k, pass^k and the flaky cases.
    #[serde(flatten)]
    pub repeats: RepeatFigures,
    /// Agent loops (docs/guide/tools.md): their requests and tool calls, and the calls given
    /// back to the model as errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loops: Option<LoopFigures>,
    /// Scored runs: the mean of the per-case mean scores, with its interval (docs/dev/statistics.md §3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_ci_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_ci_high: Option<f64>,
    /// Calls a judge made for this variant's answers (retries of unreadable replies
    /// included).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub judge_calls: u64,
    /// The judge's tokens, apart from the answers'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_tokens: Option<Tokens>,
    /// What the judge cost (needs a price for the judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_cost_usd: Option<f64>,
    /// With several votes: the mean share of votes that agreed with the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_agreement: Option<f64>,
    /// With labels from people: the judge against them, and the score as people would
    /// give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labelled: Option<crate::labels::Labelled>,
    /// Graded answers in which the scorer found nothing to compare (no number, option
    /// letter, JSON): a format mismatch shows itself here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nothing_found: Option<NothingFound>,
}

/// Answers a scorer found nothing in: how many, what it looked for, and the first one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NothingFound {
    pub answers: u64,
    /// `a number`, `an option letter`, `JSON`, …
    pub looked_for: String,
    /// The first such answer, cut to 120 characters, control characters shown.
    pub example: String,
}

/// How one replica did, from the attempts it served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaSummary {
    pub base_url: String,
    pub attempts: u64,
    /// Attempts that ended in an answer.
    pub answered: u64,
    /// Attempts that ended otherwise (errors, cuts, timeouts, 429s).
    pub failed: u64,
    /// Over answered attempts.
    pub latency_ms: Percentiles,
}

/// Accuracy of one variant on the cases carrying one tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    pub tag: String,
    pub variant: String,
    pub n: u64,
    pub correct: u64,
    pub accuracy: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

/// Everything a run's reports say: `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema: String,
    /// Schema 3 (several endpoints): some score was neither 0 nor 1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scored: bool,
    pub run: RunInfo,
    pub jobs_finished: usize,
    pub jobs_failed: usize,
    /// False when any planned job failed or never ran.
    pub complete: bool,
    /// Journal lines skipped because a crash tore them.
    pub torn_lines: usize,
    /// Further records of a job already recorded (the first counts; these are ignored).
    #[serde(default)]
    pub duplicate_records: usize,
    /// Records of jobs this run did not plan, or that it never wrote (a score outside
    /// [0, 1]): ignored.
    #[serde(default)]
    pub records_outside_plan: usize,
    /// A run whose cases went out in a seeded random order (`run.order_seed`): how many
    /// cases it measured (of `run.cases`), a random sample of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases_measured: Option<usize>,
    pub variants: Vec<VariantSummary>,
    /// Each variant against the baseline, paired by case.
    pub comparisons: Vec<Comparison>,
    /// What differences this many cases can detect at all.
    pub detectable: Option<Detectable>,
    /// Accuracy per case tag and variant.
    pub slices: Vec<Slice>,
    /// With several replicas: what each served.
    #[serde(default)]
    pub replicas: Vec<ReplicaSummary>,
    /// CI gates checked on this run, if any were asked for.
    #[serde(default)]
    pub gates: Vec<GateResult>,
    /// `run --until-decided`: each variant's sequential verdict and what stopping saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<crate::sequential::SequentialSummary>,
    /// Why jobs failed, by cause, most frequent first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<crate::causes::FailureCause>,
    /// The score's named parts (a `fields` scorer's fields, an `all`'s scorers, a judge's
    /// criteria), each with its own figures and comparisons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<crate::parts::PartFigures>,
}

/// One variant's running totals, as records arrive.
#[derive(Default)]
pub(crate) struct Acc {
    judge_calls: u64,
    judge_tokens: Option<Tokens>,
    judge_cost: Billed,
    agreement: (f64, u64),
    jobs: usize,
    n: u64,
    correct: u64,
    failed: u64,
    filtered: u64,
    refused: u64,
    usage_anomalies: u64,
    /// The first anomaly's words and its case, for the note.
    anomaly_example: Option<(String, String)>,
    /// What bills passed their `--budget` holds, by cause.
    past_holds: crate::figures::holds::PastHolds,
    truncated: u64,
    cached: u64,
    attempts: u64,
    ttft: Vec<f64>,
    latency: Vec<f64>,
    answer: Vec<f64>,
    spent: Billed,
    /// What batched jobs' attempts billed (priced at the batch price).
    spent_batched: Billed,
    spent_estimated: bool,
    /// Graded jobs answered through a batch, and what they would have cost streamed.
    batched: u64,
    batched_cost: f64,
    batched_at_streaming: f64,
    gen_tokens: u64,
    gen_seconds: f64,
    tokens: Tokens,
    cost: f64,
    nothing_found: Option<NothingFound>,
    unused: u64,
    loops: Option<LoopFigures>,
}

/// What a variant's agent loops did, over its jobs (failed ones too: a loop stopped by a
/// limit made its calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopFigures {
    /// Jobs that ran as loops.
    pub jobs: u64,
    /// Requests to the model, over those jobs.
    pub requests: u64,
    /// Tool calls, over those jobs.
    pub calls: u64,
    /// Calls given back to the model as errors (an unknown tool, arguments that are no
    /// JSON object or do not match the schema, a tool's own error).
    pub call_errors: u64,
}

/// One arm's per-case scores as its summary reads them: each case's, and each unit's (a
/// group's, when the table has groups), with whether it has.
pub(crate) struct ArmScores<'a> {
    pub(crate) cases: &'a [CaseScore],
    pub(crate) units: &'a [CaseScore],
    pub(crate) grouped: bool,
}

/// What an arm's tokens cost, when known: its model's price and its judge's.
#[derive(Clone, Copy)]
pub(crate) struct ArmPrices<'a> {
    pub(crate) model: Option<&'a Price>,
    pub(crate) judge: Option<&'a Price>,
}

impl Acc {
    /// A job answered after its variant was decided (`--until-decided`): no decision used
    /// it, so it is in no figure, but what it cost was spent.
    pub(crate) fn add_unused(&mut self, r: &JobRecord, price: Option<&Price>) {
        self.jobs += 1;
        self.unused += 1;
        self.attempts += r.attempts.len() as u64;
        self.add_spent(r, price);
        self.past_holds.add(r, price, None);
    }

    /// What the provider billed for a job: every attempt it answered (a batched job's at
    /// the batch price).
    fn add_spent(&mut self, r: &JobRecord, price: Option<&Price>) {
        let spent = if r.batch.is_some() {
            &mut self.spent_batched
        } else {
            &mut self.spent
        };
        for u in r.billed() {
            self.spent_estimated |= u.estimated;
            if price.is_some() {
                spent.add(u);
            }
        }
    }

    pub(crate) fn add(
        &mut self,
        r: &JobRecord,
        price: Option<&Price>,
        judge_price: Option<&Price>,
    ) {
        self.jobs += 1;
        self.attempts += r.attempts.len() as u64;
        if !r.turns.is_empty() || !r.steps.is_empty() {
            let l = self.loops.get_or_insert_with(LoopFigures::default);
            l.jobs += 1;
            l.requests += r.turns.len() as u64;
            l.calls += r.steps.len() as u64;
            l.call_errors += r.steps.iter().filter(|s| s.error).count() as u64;
        }
        self.add_judge(r, judge_price);
        self.add_spent(r, price);
        self.past_holds.add(r, price, judge_price);
        if let Some(why) = &r.usage_anomaly {
            self.usage_anomalies += 1;
            self.anomaly_example
                .get_or_insert_with(|| (r.case_id.clone(), why.clone()));
        }
        match r.status {
            JobStatus::Failed => {
                self.failed += 1;
                return;
            }
            JobStatus::Filtered => {
                self.filtered += 1;
                return;
            }
            JobStatus::Graded => {}
        }
        self.add_graded(r);
        self.add_cost(r, price);
    }

    /// The judge's calls (those it answered from the cache cost nothing), its tokens, and
    /// how far its votes agreed.
    fn add_judge(&mut self, r: &JobRecord, judge_price: Option<&Price>) {
        self.judge_calls += r.judge.iter().filter(|c| !c.cached).count() as u64;
        for u in r.judge_billed() {
            self.judge_tokens.get_or_insert_with(Tokens::default).add(u);
            if judge_price.is_some() {
                self.judge_cost.add(u);
            }
        }
        if let Some(a) = r
            .score_detail
            .as_ref()
            .and_then(|d| d.get("agreement"))
            .and_then(serde_json::Value::as_f64)
            .filter(|_| r.judge.len() > 1)
        {
            self.agreement.0 += a;
            self.agreement.1 += 1;
        }
    }

    /// A graded answer's counts and times.
    fn add_graded(&mut self, r: &JobRecord) {
        self.n += 1;
        if let Some(what) = &r.not_found {
            let seen = self.nothing_found.get_or_insert_with(|| NothingFound {
                answers: 0,
                looked_for: what.clone(),
                example: crate::visible(&r.output, 120),
            });
            seen.answers += 1;
        }
        if let Some(t) = r.answer_ms.filter(|_| !r.cached) {
            self.answer.push(t);
        }
        self.cached += u64::from(r.cached);
        self.refused += u64::from(r.refused);
        self.correct += u64::from(r.score() == Some(1.0));
        self.truncated += u64::from(r.outcome == Some(Outcome::Truncated));
        if let Some(t) = r.ttft_ms {
            self.ttft.push(t);
        }
        if let Some(l) = r.latency_ms {
            self.latency.push(l);
            if let Some(t) = r.ttft_ms
                && l > t
            {
                self.gen_tokens = self.gen_tokens.saturating_add(r.usage.completion_tokens);
                self.gen_seconds += (l - t) / 1000.0;
            }
        }
    }

    /// A graded answer's tokens and list price (the batch price for a batched one).
    fn add_cost(&mut self, r: &JobRecord, price: Option<&Price>) {
        let u = &r.usage;
        self.tokens.add(u);
        if r.batch.is_some() {
            self.batched += 1;
        }
        if let Some(p) = price {
            if r.batch.is_some() {
                let c = p.batched().cost(u);
                self.cost += c;
                self.batched_cost += c;
                self.batched_at_streaming += p.cost(u);
            } else {
                self.cost += p.cost(u);
            }
        }
    }

    /// What the run paid at `price` (batched attempts at its batch price).
    fn spent_usd(&self, price: Option<&Price>) -> Option<f64> {
        price.map(|p| self.spent.cost(p) + self.spent_batched.cost(&p.batched()))
    }

    /// The variant's summary, and its TTFT and end-to-end latencies, sorted (for charts).
    pub(crate) fn finish(
        mut self,
        name: &str,
        baseline: bool,
        scores: ArmScores<'_>,
        confidence: f64,
        prices: ArmPrices<'_>,
    ) -> (VariantSummary, Latencies) {
        let ArmScores {
            cases: scores,
            units,
            grouped,
        } = scores;
        let (priced, judge_priced) = (prices.model.is_some(), prices.judge.is_some());
        self.ttft.sort_by(f64::total_cmp);
        self.latency.sort_by(f64::total_cmp);
        let clustered = stats::cluster::wilson_by_unit(units, grouped, confidence);
        let ci = clustered.map(|(_, lo, hi, _)| (lo, hi));
        let repeated = units.iter().any(|s| s.graded > 1);
        let cost = priced.then_some(self.cost);
        // Batched answers' costs, when the run has a price and some.
        let batched = prices.model.filter(|_| self.batched > 0);
        let spent = self.spent_usd(prices.model);
        let summary = VariantSummary {
            name: name.to_string(),
            variant: None,
            endpoint: None,
            baseline,
            jobs: self.jobs,
            n: self.n,
            correct: self.correct,
            accuracy: (self.n > 0).then(|| self.correct as f64 / self.n as f64),
            ci_low: ci.map(|c| c.0),
            ci_high: ci.map(|c| c.1),
            failed: self.failed,
            filtered: self.filtered,
            refused: self.refused,
            usage_anomalies: self.usage_anomalies,
            usage_anomaly_example: self
                .anomaly_example
                .as_ref()
                .map(|(c, w)| format!("{c}: {w}")),
            past_holds: self.past_holds.any().then(|| self.past_holds.clone()),
            unused: self.unused,
            truncated: self.truncated,
            cached: self.cached,
            attempts: self.attempts,
            ttft_ms: Percentiles::of_sorted(&self.ttft),
            latency_ms: Percentiles::of_sorted(&self.latency),
            answer_ms: Percentiles::of(self.answer),
            output_tokens_per_s: (self.gen_seconds > 0.0)
                .then(|| self.gen_tokens as f64 / self.gen_seconds),
            tokens: self.tokens,
            cost_usd: cost,
            cost_per_correct_usd: cost_per(cost, self.correct as f64),
            cost_per_point_usd: None,
            spent_usd: spent,
            batched: self.batched,
            batched_cost_usd: batched.map(|_| self.batched_cost),
            batched_streaming_cost_usd: batched.map(|_| self.batched_at_streaming),
            spent_estimated: self.spent_estimated,
            design_effect: clustered.filter(|_| repeated || grouped).map(|c| c.3),
            consistency: consistency(scores),
            repeats: RepeatFigures::default(),
            mean_score: None,
            score_ci_low: None,
            score_ci_high: None,
            judge_calls: self.judge_calls,
            judge_cost_usd: (judge_priced && self.judge_tokens.is_some())
                .then(|| prices.judge.map_or(0.0, |p| self.judge_cost.cost(p))),
            judge_tokens: self.judge_tokens,
            judge_agreement: (self.agreement.1 > 0)
                .then(|| self.agreement.0 / self.agreement.1 as f64),
            labelled: None,
            nothing_found: self.nothing_found,
            loops: self.loops,
        };
        let latencies = Latencies {
            ttft_ms: self.ttft,
            latency_ms: self.latency,
        };
        (summary, latencies)
    }
}

impl Summary {
    /// `--best`'s answer, when the run searched.
    pub fn best(&self) -> Option<&promptgauge_runner::sequential::BestSummary> {
        self.sequential.as_ref().and_then(|q| q.best.as_ref())
    }

    /// A `--best` search, or one of its shards: the pairwise lines are descriptions.
    pub(crate) fn searched(&self) -> bool {
        self.best().is_some() || self.run.search_shard.is_some()
    }

    /// A run of several endpoints: its `variants` are arms, its comparisons on two axes.
    pub(crate) fn is_grid(&self) -> bool {
        !self.run.endpoints.is_empty()
    }

    /// What was run: `30 cases × 2 variants × 3 endpoints`, or `… × 2 variants` on one
    /// endpoint.
    pub(crate) fn shape(&self) -> String {
        let count =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let endpoints = self.run.endpoints.len();
        let variants = self.variants.len() / endpoints.max(1);
        let mut out = format!(
            "{} × {}",
            count(self.run.cases, "case", "cases"),
            count(variants, "variant", "variants")
        );
        if endpoints > 0 {
            out.push_str(&format!(" × {}", count(endpoints, "endpoint", "endpoints")));
        }
        out
    }

    /// A run of several endpoints: each as `NAME (MODEL at URL)`, the baseline first.
    pub(crate) fn endpoint_list(&self) -> Vec<String> {
        self.run
            .endpoints
            .iter()
            .map(|e| {
                format!(
                    "{} ({} at {})",
                    e.endpoint.as_deref().unwrap_or("?"),
                    e.model,
                    e.base_url
                )
            })
            .collect()
    }

    /// The comparisons on one axis of a run of several endpoints.
    pub(crate) fn on_axis(
        &self,
        axis: crate::compare::Axis,
    ) -> impl Iterator<Item = &crate::compare::Comparison> {
        self.comparisons
            .iter()
            .filter(move |c| c.family.as_ref().is_some_and(|f| f.axis == axis))
    }

    /// Some score was neither 0 nor 1: mean scores, not accuracy.
    pub(crate) fn is_scored(&self) -> bool {
        self.schema == SCHEMA_SCORED || self.scored
    }

    /// What the count column is called: answers fully right over graded (on a scored run
    /// a partial score is not "correct").
    pub(crate) fn count_label(&self) -> &'static str {
        if self.is_scored() {
            "full marks/n"
        } else {
            "correct/n"
        }
    }

    /// A variant's cost per correct answer, or on a scored run per point of score.
    pub(crate) fn cost_per(&self, v: &VariantSummary) -> Option<f64> {
        if self.is_scored() {
            v.cost_per_point_usd
        } else {
            v.cost_per_correct_usd
        }
    }

    /// What [`Summary::cost_per`]'s column is called: in the terminal, and elsewhere.
    pub(crate) fn cost_per_names(&self) -> (&'static str, &'static str) {
        if self.is_scored() {
            ("$/point", "cost per point")
        } else {
            ("$/correct", "cost per correct")
        }
    }

    /// What the headline column is called: accuracy, or the mean score.
    pub(crate) fn measure(&self) -> &'static str {
        if self.is_scored() {
            "score"
        } else {
            "accuracy"
        }
    }
}

impl VariantSummary {
    /// Whether a gate naming `name` means it: its own name (`ENDPOINT/VARIANT` in a run of
    /// several endpoints), or there its variant's or its endpoint's.
    pub(crate) fn answers_to(&self, name: &str) -> bool {
        self.name == name
            || self.variant.as_deref() == Some(name)
            || self.endpoint.as_deref() == Some(name)
    }

    /// The headline figure and its interval: accuracy with Wilson's, or (scored) the mean
    /// score with its interval.
    pub(crate) fn headline(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        match self.mean_score {
            Some(m) => (Some(m), self.score_ci_low, self.score_ci_high),
            None => (self.accuracy, self.ci_low, self.ci_high),
        }
    }
}

/// What `u` tokens cost at `p`, in USD.
/// Tokens billed, summed as whole numbers and priced once: the cost does not depend on the
/// order the jobs are read in (a resume reads failed jobs last).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Billed {
    fresh: u64,
    cached: u64,
    completion: u64,
}

impl Billed {
    pub(crate) fn add(&mut self, u: &promptgauge_client::Usage) {
        let cached = u.cached_tokens.min(u.prompt_tokens);
        self.fresh = self.fresh.saturating_add(u.prompt_tokens - cached);
        self.cached = self.cached.saturating_add(cached);
        self.completion = self.completion.saturating_add(u.completion_tokens);
    }

    pub(crate) fn cost(&self, p: &Price) -> f64 {
        let cached_price = p.cached_input_per_mtok.unwrap_or(p.input_per_mtok);
        (self.fresh as f64 * p.input_per_mtok
            + self.cached as f64 * cached_price
            + self.completion as f64 * p.output_per_mtok)
            / 1e6
    }
}

/// A variant's measured latencies, ascending: what the charts draw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    pub ttft_ms: Vec<f64>,
    pub latency_ms: Vec<f64>,
}

/// A cost over a count of answers right (or points of score); none when there are none.
pub(crate) fn cost_per(cost: Option<f64>, units: f64) -> Option<f64> {
    cost.filter(|_| units > 0.0).map(|c| c / units)
}

/// Accuracy per tag and variant, tags in order, variants in bench order.
/// Accuracy (or, for a scored run, the mean case score) per tag and variant.
pub(crate) fn slices(
    cases: &CaseTable,
    variants: &[String],
    confidence: f64,
    scored: bool,
) -> Vec<Slice> {
    let mut out = Vec::new();
    for tag in cases.tags() {
        for (i, variant) in variants.iter().enumerate() {
            let scores: Vec<CaseScore> = cases
                .rows()
                .filter(|(_, t, _)| t.contains(tag))
                .map(|(_, _, s)| s[i])
                .filter(|s| s.graded > 0)
                .collect();
            let n: u64 = scores.iter().map(|s| s.graded).sum();
            let correct = scores.iter().map(|s| s.score).sum::<f64>() as u64;
            let ci = if scored {
                let means: Vec<f64> = scores.iter().filter_map(CaseScore::mean).collect();
                promptgauge_stats::scores::mean_score(&means, confidence)
                    .map(|m| (m.mean, m.interval.map(|i| i.0), m.interval.map(|i| i.1)))
            } else {
                clustered_wilson(&scores, confidence).map(|c| (c.0, Some(c.1), Some(c.2)))
            };
            out.push(Slice {
                tag: tag.clone(),
                variant: variant.clone(),
                n,
                correct,
                accuracy: ci.map(|c| c.0),
                ci_low: ci.and_then(|c| c.1),
                ci_high: ci.and_then(|c| c.2),
            });
        }
    }
    out
}

/// How a gate ended (docs/guide/ci.md, "Three outcomes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateOutcome {
    Passed,
    Failed,
    /// The data cannot tell at this size: the line says what it would take.
    Inconclusive,
}

impl GateOutcome {
    /// The word a line and a report use.
    pub fn word(self) -> &'static str {
        match self {
            GateOutcome::Passed => "passed",
            GateOutcome::Failed => "failed",
            GateOutcome::Inconclusive => "inconclusive",
        }
    }
}

/// One gate's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "GateRecord")]
pub struct GateResult {
    pub gate: String,
    /// True only when the gate passed (an inconclusive gate did not).
    pub passed: bool,
    pub outcome: GateOutcome,
    /// One line: why it passed, failed or could not tell, and what it would take.
    pub reason: String,
    /// Inconclusive (or passed on too few cases to be sure): about how many cases would
    /// decide it at what the data show now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases_needed: Option<u64>,
}

/// A gate as `summary.json` holds it; one written before gates had three outcomes has
/// only `passed`.
#[derive(Deserialize)]
struct GateRecord {
    gate: String,
    passed: bool,
    #[serde(default)]
    outcome: Option<GateOutcome>,
    reason: String,
    #[serde(default)]
    cases_needed: Option<u64>,
}

impl From<GateRecord> for GateResult {
    fn from(r: GateRecord) -> GateResult {
        GateResult {
            outcome: r.outcome.unwrap_or(if r.passed {
                GateOutcome::Passed
            } else {
                GateOutcome::Failed
            }),
            gate: r.gate,
            passed: r.passed,
            reason: r.reason,
            cases_needed: r.cases_needed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use promptgauge_client::Usage;

    #[test]
    fn token_totals_saturate_and_say_so_instead_of_wrapping() {
        let mut t = Tokens::default();
        let huge = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: 7,
            ..Usage::default()
        };
        t.add(&huge);
        assert!(!t.saturated);
        t.add(&huge);
        assert_eq!((t.prompt, t.completion, t.saturated), (u64::MAX, 14, true));
    }

    #[test]
    fn cached_tokens_never_exceed_the_prompt_they_are_part_of() {
        let mut t = Tokens::default();
        t.add(&Usage {
            prompt_tokens: 10,
            cached_tokens: 40,
            ..Usage::default()
        });
        assert_eq!((t.prompt, t.cached), (10, 10));
    }
}
