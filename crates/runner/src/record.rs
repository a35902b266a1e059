//! `run.json`: what a run measured, against what, with which settings; enough to resume it
//! and to refuse a resume whose bench changed. Typed end to end: no field is read by a
//! string key, and a field missing in a folder written by an older version reads as its
//! default.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use promptgauge_grade::GradeSpec;
use promptgauge_suite::{Bench, Fingerprint, Limits, Price, Shard, Variant};

/// The plan-shaping flags a run was started with; a resume reuses them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanSettings {
    pub limit: Option<u64>,
    /// Selected variant names in order; the first is the baseline.
    pub variants: Vec<String>,
    pub repeats: u32,
    /// Set when this run is one shard of a larger plan.
    #[serde(default)]
    pub shard: Option<Shard>,
    /// Set for `run --until-decided`: the case order and when to stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<promptgauge_suite::plan::SequentialPlan>,
    /// A run of several endpoints: their names, the baseline endpoint first (absent: the
    /// run has one endpoint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// A run that may stop early (`--budget`): its cases go out in this seeded random
    /// order, so the cases it measured are a random sample (`--until-decided` keeps its
    /// own in `sequential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_seed: Option<u64>,
    /// `--fetch-urls`: the URLs the cases attach were downloaded and sent as bytes (a
    /// resume does the same, so its requests are the ones the run began with).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fetch_urls: bool,
    /// A `--best` shard run `--after` a merge of earlier shards: the arms that merge showed
    /// out, none of whose jobs this shard plans.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arms_out: Vec<String>,
}

impl PlanSettings {
    /// What the run compares: its variants, or with several endpoints each
    /// `ENDPOINT/VARIANT` (see `suite::plan::arm_names`), the baseline first.
    pub fn arms(&self) -> Vec<String> {
        promptgauge_suite::plan::arm_names(&self.variants, &self.endpoints)
    }
}

/// The tool that wrote a run folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

impl Tool {
    /// This promptgauge, as the run folders it writes name it.
    pub fn promptgauge() -> Tool {
        Tool {
            name: "promptgauge".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// The bench as loaded: its text, cases, variants and settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    pub name: String,
    /// The bench file as written.
    #[serde(default)]
    pub text: String,
    /// How many cases the plan took (after `--limit`).
    pub cases: usize,
    /// Their ids, in bench order: the plan's cases.
    pub case_ids: Vec<String>,
    /// Each case's content hash ([`promptgauge_suite::plan::case_hash`]), aligned with
    /// `case_ids`; empty in runs from before 0.2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub case_hashes: Vec<u64>,
    /// The selected variants, baseline first.
    #[serde(default)]
    pub variants: Vec<Variant>,
    #[serde(default)]
    pub params: Map<String, Value>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub price: Option<Price>,
    pub repeats: u32,
    pub confidence: f64,
    #[serde(default)]
    pub grade: GradeSpec,
    /// The bench's `judge:` block, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<promptgauge_suite::JudgeSettings>,
}

impl BenchRecord {
    /// The record of a bench with these variants selected.
    pub fn of(bench: &Bench, variants: &[usize]) -> BenchRecord {
        BenchRecord {
            name: bench.name.clone(),
            // Credentials in a base URL are never stored.
            text: promptgauge_client::secrets::redact_urls_in(&bench.text),
            cases: bench.cases.len(),
            case_ids: bench.cases.iter().map(|c| c.id.clone()).collect(),
            case_hashes: bench
                .cases
                .iter()
                .map(promptgauge_suite::plan::case_hash)
                .collect(),
            variants: variants
                .iter()
                .map(|&v| bench.variants[v].clone())
                .collect(),
            params: bench.params.clone(),
            limits: bench.limits.clone(),
            price: bench.price.clone(),
            repeats: bench.repeats,
            confidence: bench.confidence,
            grade: bench.grade.clone(),
            // A judge's base URL is a URL like the others: its credentials are not kept.
            judge: bench.judge.clone().map(|mut j| {
                j.base_url = j
                    .base_url
                    .map(|u| promptgauge_client::secrets::redact_url(&u));
                j
            }),
        }
    }
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub tool: Tool,
    pub run_id: String,
    pub started_at: String,
    /// The start in Unix milliseconds: orders runs started within one second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_ms: Option<i64>,
    pub finished_at: Option<String>,
    /// Why the run stopped early, if it did.
    pub stopped: Option<StopReason>,
    /// When the run was resumed, each time.
    #[serde(default)]
    pub resumed_at: Vec<String>,
    /// The bench file, absolute, as it was found.
    pub bench_path: PathBuf,
    pub plan: PlanSettings,
    pub fingerprint: Fingerprint,
    pub jobs_planned: usize,
    /// Where the answers came from; in a run of several endpoints, the baseline endpoint.
    pub endpoint: ProviderInfo,
    /// A run of several endpoints: each (with its price), in `plan.endpoints`' order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<ProviderInfo>,
    /// Who judged, when a scorer asked a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<ProviderInfo>,
    pub bench: BenchRecord,
    /// The checkout and CI job the run was started from, when it was started in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// The history store the run is recorded in (a SQLite file's path; a PostgreSQL URL
    /// without its password), for a resume to record there again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// A merged run: the run ids of its shards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    /// A merged run: which shards it combined (for `run --best --shard --after` it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_shards: Vec<Shard>,
    /// Failed jobs the run was allowed (`--allow-failures`): a run with more is no
    /// baseline a gate can trust (`--baseline latest` passes it over).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub allowed_failures: u64,
    /// `--budget`: what the run may spend in all, in USD (a resume keeps it, or takes a
    /// new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a run was started from: the git commit and branch of the bench's checkout, and
/// the CI job's variables. The history store files runs by them (`history --branch`,
/// `--baseline latest:main`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The checkout had uncommitted changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,
    /// CI variables that name the job (`GITHUB_RUN_ID`, `CI_PIPELINE_URL`, …).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub ci: std::collections::BTreeMap<String, String>,
}

impl Source {
    /// Nothing known.
    pub fn is_empty(&self) -> bool {
        self.commit.is_none() && self.branch.is_none() && self.ci.is_empty()
    }
}

impl RunRecord {
    /// The record without its case ids and hashes (a large bench's largest part), for the
    /// history store, whose per-job rows hold them already.
    pub fn without_cases(&self) -> RunRecord {
        let b = &self.bench;
        RunRecord {
            tool: self.tool.clone(),
            run_id: self.run_id.clone(),
            started_at: self.started_at.clone(),
            started_unix_ms: self.started_unix_ms,
            finished_at: self.finished_at.clone(),
            stopped: self.stopped.clone(),
            resumed_at: self.resumed_at.clone(),
            bench_path: self.bench_path.clone(),
            plan: self.plan.clone(),
            fingerprint: self.fingerprint.clone(),
            jobs_planned: self.jobs_planned,
            endpoint: self.endpoint.clone(),
            endpoints: self.endpoints.clone(),
            judge: self.judge.clone(),
            bench: BenchRecord {
                name: b.name.clone(),
                text: b.text.clone(),
                cases: b.cases,
                case_ids: Vec::new(),
                case_hashes: Vec::new(),
                variants: b.variants.clone(),
                params: b.params.clone(),
                limits: b.limits.clone(),
                price: b.price.clone(),
                repeats: b.repeats,
                confidence: b.confidence,
                grade: b.grade.clone(),
                judge: b.judge.clone(),
            },
            source: self.source.clone(),
            store: self.store.clone(),
            merged_from: self.merged_from.clone(),
            merged_shards: self.merged_shards.clone(),
            allowed_failures: self.allowed_failures,
            budget_usd: self.budget_usd,
        }
    }

    /// What the reports say about this run.
    pub fn info(&self) -> RunInfo {
        RunInfo {
            bench: self.bench.name.clone(),
            run_id: self.run_id.clone(),
            tool_version: self.tool.version.clone(),
            started_at: self.started_at.clone(),
            finished_at: self.finished_at.clone(),
            provider: self.endpoint.clone(),
            confidence: self.bench.confidence,
            repeats: self.plan.repeats,
            cases: self.planned_cases(),
            jobs_planned: self.jobs_planned,
            stopped: self.stopped.clone(),
            endpoints: self.endpoints.clone(),
            judge: self.judge.clone(),
            self_judged: self.self_judged(),
            order_seed: self
                .plan
                .order_seed
                .or(self.plan.sequential.as_ref().map(|s| s.seed)),
            search_shard: self
                .plan
                .shard
                .filter(|_| {
                    self.plan
                        .sequential
                        .as_ref()
                        .is_some_and(|s| s.shards_in_blocks())
                })
                .map(|shard| SearchShard {
                    shard,
                    arms_out: self.plan.arms_out.clone(),
                }),
            folder: None,
        }
    }

    /// The judge is the model under test (same model at the same endpoint).
    pub fn self_judged(&self) -> bool {
        self.judge
            .as_ref()
            .is_some_and(|j| j.same_model(&self.endpoint))
    }

    /// What the judge's tokens cost: the judge's own price, or the bench's when the judge
    /// is the model under test.
    pub fn judge_price(&self) -> Option<Price> {
        let own = self.bench.judge.as_ref().and_then(|j| j.price.clone());
        own.or_else(|| {
            self.self_judged()
                .then(|| self.bench.price.clone())
                .flatten()
        })
    }

    /// The jobs this run planned, by key.
    pub fn plan_keys(&self) -> crate::journal::PlanKeys {
        // `--until-decided` plans only the first max_cases cases of its seeded order.
        let chosen: Vec<String>;
        let mut shard = self.plan.shard;
        let ids: &[String] = match &self.plan.sequential {
            Some(s) => {
                // A `--best` shard is a block of the order.
                if s.shards_in_blocks() {
                    shard = None;
                }
                chosen = s
                    .sent(self.bench.case_ids.len(), self.plan.shard)
                    .into_iter()
                    .map(|i| self.bench.case_ids[i].clone())
                    .collect();
                &chosen
            }
            None => &self.bench.case_ids,
        };
        let arms: Vec<String> = self
            .plan
            .arms()
            .into_iter()
            .filter(|a| !self.plan.arms_out.contains(a))
            .collect();
        crate::journal::PlanKeys::new(ids, &arms, self.plan.repeats, shard)
    }

    /// What each arm's answers cost (in `plan.arms()`' order): its endpoint's price in a run
    /// of several (none: unpriced, never the bench's), else the bench's as the run priced it.
    pub fn arm_prices(&self) -> Vec<Option<Price>> {
        if self.plan.endpoints.is_empty() {
            return vec![self.bench.price.clone(); self.plan.variants.len()];
        }
        self.plan
            .endpoints
            .iter()
            .flat_map(|name| {
                let price = self
                    .endpoints
                    .iter()
                    .find(|e| e.endpoint.as_deref() == Some(name.as_str()))
                    .and_then(|e| e.price.clone());
                std::iter::repeat_n(price, self.plan.variants.len())
            })
            .collect()
    }

    /// The cases the plan holds: a shard's share, a sequential plan's max_cases, else all.
    pub(crate) fn planned_cases(&self) -> usize {
        let n = self.bench.case_ids.len();
        match (&self.plan.sequential, self.plan.shard) {
            (Some(s), _) => n.min(s.max_cases as usize),
            (None, Some(shard)) => (0..n)
                .filter(|&i| i as u64 % u64::from(shard.count) == u64::from(shard.index - 1))
                .count(),
            (None, None) => n,
        }
    }
}

/// Why a run stopped before every job was sent. Written in run.json and summary.json as the
/// sentence it says (`"interrupted"`, or what went wrong), and read back from it: the
/// sentences are the format, so records written before the type existed read the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum StopReason {
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The journal could not be written (a full disk): the sentence says which file and why.
    JournalFailed(String),
    /// The provider refused the run (a refused key, no credit), or the first jobs all
    /// failed the same way.
    Refused(String),
    /// The server looked down: most of the latest jobs failed the same way.
    Outage(String),
    /// A merge of shards that lacks some of them: which.
    ShardsMissing(String),
    /// `--batch`: the wall-clock limit passed with batches still running at the provider
    /// (a resume collects them, paying nothing again).
    BatchesRunning(String),
    /// `--budget`: the next job would have passed it; the rest were not sent.
    Budget(String),
}

impl StopReason {
    const INTERRUPTED: &'static str = "interrupted";
    const JOURNAL: &'static str = "the journal ";
    const OUTAGE: &'static str = "the server looks down: ";
    const SHARDS: &'static str = "shards missing from the merge: ";
    const BATCHES: &'static str = "batches still running at the provider: ";
    const BUDGET: &'static str = "the budget is reached: ";

    /// `--budget`: `spent` of `limit` spent (as written: `$0.0125`), `not_sent` jobs not sent.
    pub fn budget(spent: &str, limit: &str, not_sent: usize) -> Self {
        StopReason::Budget(format!(
            "{}{spent} of {limit} spent, and the next job could cost more than is left; {not_sent} {} not sent",
            Self::BUDGET,
            if not_sent == 1 {
                "job was"
            } else {
                "jobs were"
            }
        ))
    }

    /// `jobs` jobs wait in batches still running at the provider after `waited`.
    pub fn batches_running(jobs: usize, waited: &str) -> Self {
        StopReason::BatchesRunning(format!(
            "{}{jobs} jobs wait in them after {waited} (--batch-wait)",
            Self::BATCHES
        ))
    }

    /// The journal at `path` could not be written.
    pub fn journal_failed(path: &std::path::Path, error: impl std::fmt::Display) -> Self {
        StopReason::JournalFailed(format!(
            "{}{} could not be written: {error}",
            Self::JOURNAL,
            path.display()
        ))
    }

    /// The server looked down: `detail` says how many failed, how fast, and the cause.
    pub fn outage(detail: impl std::fmt::Display) -> Self {
        StopReason::Outage(format!("{}{detail}", Self::OUTAGE))
    }

    /// A merge lacks these shards (`2/4`).
    pub fn shards_missing(shards: &[String]) -> Self {
        StopReason::ShardsMissing(format!("{}{}", Self::SHARDS, shards.join(", ")))
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Interrupted => f.write_str(Self::INTERRUPTED),
            StopReason::JournalFailed(s)
            | StopReason::Refused(s)
            | StopReason::Outage(s)
            | StopReason::ShardsMissing(s)
            | StopReason::BatchesRunning(s)
            | StopReason::Budget(s) => f.write_str(s),
        }
    }
}

impl From<StopReason> for String {
    fn from(r: StopReason) -> String {
        r.to_string()
    }
}

impl From<String> for StopReason {
    /// The reason a written sentence states.
    fn from(s: String) -> Self {
        if s == Self::INTERRUPTED {
            StopReason::Interrupted
        } else if s.starts_with(Self::JOURNAL) {
            StopReason::JournalFailed(s)
        } else if s.starts_with(Self::OUTAGE) {
            StopReason::Outage(s)
        } else if s.starts_with(Self::SHARDS) {
            StopReason::ShardsMissing(s)
        } else if s.starts_with(Self::BATCHES) {
            StopReason::BatchesRunning(s)
        } else if s.starts_with(Self::BUDGET) {
            StopReason::Budget(s)
        } else {
            StopReason::Refused(s)
        }
    }
}

/// Where the answers came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderInfo {
    pub base_url: String,
    pub model: String,
    /// True when the built-in simulator answered: these are not a real model's numbers.
    pub simulated: bool,
    /// The variable the API key was read from (never the key).
    pub api_key_env: Option<String>,
    /// With several replicas: their base URLs, in the order attempts' `replica` refers to.
    #[serde(default)]
    pub replicas: Vec<String>,
    /// The wire protocol it spoke; unwritten for the default, `openai-chat` (so older
    /// records read as what they were).
    #[serde(
        default,
        skip_serializing_if = "promptgauge_client::ProtocolKind::is_default"
    )]
    pub protocol: promptgauge_client::ProtocolKind,
    /// The bench's name for the endpoint, when it is one of `endpoints:` (a resume runs on
    /// the same one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// What its answers cost, in a run of several endpoints (each has its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Its jobs went through its batch API (a resume sends the rest the same way).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batch: bool,
}

impl ProviderInfo {
    /// The same model at the same server (both the simulator, or the same base URL): a
    /// judge that is the model under test.
    pub fn same_model(&self, other: &ProviderInfo) -> bool {
        self.model == other.model
            && self.simulated == other.simulated
            && (self.simulated || self.base_url == other.base_url)
    }

    /// The base URLs as recorded, to send to again (`mock` for the simulator; each
    /// replica); `None` when one had credentials, which are never stored.
    pub fn recorded_urls(&self) -> Option<Vec<String>> {
        let urls = if self.simulated {
            vec!["mock".to_string()]
        } else if self.replicas.is_empty() {
            vec![self.base_url.clone()]
        } else {
            self.replicas.clone()
        };
        let redacted = promptgauge_client::secrets::REDACTED;
        (!urls.iter().any(|u| u.contains(redacted))).then_some(urls)
    }

    /// What reports show as the base URL of the built-in simulated provider.
    pub const SIMULATED: &'static str = "simulated";

    /// The provider at `shown_urls` (already cleared of credentials; none: the simulator).
    pub fn of(
        shown_urls: Vec<String>,
        model: &str,
        api_key_env: &str,
        protocol: promptgauge_client::ProtocolKind,
    ) -> Self {
        let simulated = shown_urls.is_empty();
        ProviderInfo {
            base_url: if simulated {
                Self::SIMULATED.to_string()
            } else {
                shown_urls.join(", ")
            },
            model: model.to_string(),
            simulated,
            api_key_env: (!simulated && !api_key_env.is_empty()).then(|| api_key_env.to_string()),
            replicas: Vec::new(),
            protocol,
            endpoint: None,
            price: None,
            batch: false,
        }
    }
}

/// One shard of a `--best` search, as its reports say it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchShard {
    pub shard: Shard,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arms_out: Vec<String>,
}

/// What was run and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub bench: String,
    pub run_id: String,
    pub tool_version: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub provider: ProviderInfo,
    pub confidence: f64,
    pub repeats: u32,
    pub cases: usize,
    pub jobs_planned: usize,
    /// Why the run stopped early, if it did (Ctrl-C, a refused key, no credit).
    pub stopped: Option<StopReason>,
    /// A run of several endpoints: each (with its price), the baseline first; `provider`
    /// is the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<ProviderInfo>,
    /// Who judged the answers, when a scorer asked a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<ProviderInfo>,
    /// The judge is the model under test: it may favour its own answers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub self_judged: bool,
    /// The seed of the random order its cases were sent in (a run that may stop early:
    /// `--budget`, `--until-decided`); absent: the order of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_seed: Option<u64>,
    /// A shard of a `--best` search: which, and the arms it did not send (those the merge
    /// it ran `--after` had shown out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_shard: Option<SearchShard>,
    /// The run's folder as a command names it (shell-quoted), for the commands the reports
    /// suggest (`promptgauge label DIR`); not stored: a folder can move.
    #[serde(skip)]
    pub folder: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_written_by_0_1_0_reads_typed() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests/fixtures/run-0.1.0");
        let text = std::fs::read_to_string(dir.join("run.json")).unwrap();
        let r: RunRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(r.bench.name, "old");
        assert_eq!(r.bench.case_ids.len(), 8);
        assert_eq!(r.bench.price.as_ref().map(|p| p.input_per_mtok), Some(1.0));
        assert_eq!(r.bench.variants[1].name, "careful");
        assert_eq!(r.bench.limits.concurrency, 8);
        // A limit the old version did not record reads as its default.
        assert_eq!(
            r.bench.limits.max_retry_after,
            Limits::default().max_retry_after
        );
        assert_eq!(r.info().confidence, 0.95);
        assert_eq!(r.plan_keys().planned(), 16);
    }

    #[test]
    fn a_stop_reason_is_written_as_its_sentence_and_read_back_as_its_kind() {
        let reasons = [
            StopReason::Interrupted,
            StopReason::journal_failed(std::path::Path::new("r/journal.jsonl"), "disk full"),
            StopReason::outage("5 of the last 8 jobs failed"),
            StopReason::shards_missing(&["2/4".to_string()]),
            StopReason::Refused("401: the API key was refused".into()),
        ];
        for r in reasons {
            let written = serde_json::to_value(&r).unwrap();
            assert!(written.is_string(), "{written}");
            assert_eq!(serde_json::from_value::<StopReason>(written).unwrap(), r);
        }
        // Written before the type: the same sentences.
        let old: StopReason = serde_json::from_str(r#""interrupted""#).unwrap();
        assert_eq!(old, StopReason::Interrupted);
        let old: StopReason = serde_json::from_str(
            r#""the journal r/journal.jsonl could not be written: No space left on device""#,
        )
        .unwrap();
        assert!(matches!(old, StopReason::JournalFailed(_)), "{old:?}");
    }
}
