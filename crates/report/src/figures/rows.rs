//! The history's rows: what the store reads back of each recorded run, and what `runs`,
//! `history` and the baseline lookup show. The store fills them (store/mod.rs); the reports
//! read them without knowing where they came from.

use serde::Serialize;

/// What kind of run a stored run was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// One run, start to end.
    Run,
    /// A run continued with `--resume`.
    Resumed,
    /// Shards combined with `merge`.
    Merged,
    /// One shard (`--shard i/n`): part of a run, never a baseline on its own.
    Shard,
}

impl RunKind {
    /// As the store writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Run => "run",
            RunKind::Resumed => "resumed",
            RunKind::Merged => "merged",
            RunKind::Shard => "shard",
        }
    }
}

impl std::str::FromStr for RunKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [
            RunKind::Run,
            RunKind::Resumed,
            RunKind::Merged,
            RunKind::Shard,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
        .ok_or_else(|| format!("unknown run kind `{s}` in the store"))
    }
}

impl std::fmt::Display for RunKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored run, as `runs` and `history` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub run_id: String,
    pub bench: String,
    pub model: String,
    pub base_url: String,
    pub simulated: bool,
    pub tool_version: String,
    pub git_commit: Option<String>,
    pub git_branch: Option<String>,
    pub git_dirty: Option<bool>,
    pub started_at: String,
    pub finished_at: Option<String>,
    #[serde(skip)]
    pub started_unix_ms: i64,
    pub complete: bool,
    pub stopped: Option<promptgauge_runner::record::StopReason>,
    /// `run`, `resumed`, `merged` or `shard`.
    pub kind: RunKind,
    pub shard: Option<String>,
    pub cases: i64,
    pub repeats: i64,
    pub confidence: f64,
    pub jobs_planned: i64,
    pub jobs_finished: i64,
    pub jobs_failed: i64,
    pub scored: bool,
    pub cost_usd: Option<f64>,
    pub folder: String,
    /// Failed jobs the run was allowed (`--allow-failures`).
    #[serde(skip_serializing_if = "is_zero")]
    pub allowed_failures: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One variant of a stored run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantRow {
    #[serde(skip)]
    pub run_id: String,
    pub variant: String,
    #[serde(skip)]
    pub position: i64,
    pub baseline: bool,
    pub n: i64,
    pub correct: i64,
    pub failed: i64,
    pub accuracy: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub mean_score: Option<f64>,
    pub score_ci_low: Option<f64>,
    pub score_ci_high: Option<f64>,
    pub cost_usd: Option<f64>,
    pub spent_usd: Option<f64>,
    pub tokens_in: i64,
    pub tokens_out: i64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p90_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p90_ms: Option<f64>,
    /// In a run of several endpoints: the endpoint of this row (its `variant` is then
    /// `ENDPOINT/VARIANT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// ... and the model that answered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl VariantRow {
    /// The figure shown: mean score for a scored run, else accuracy; with its interval.
    pub(crate) fn shown(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        match self.mean_score {
            Some(m) => (Some(m), self.score_ci_low, self.score_ci_high),
            None => (self.accuracy, self.ci_low, self.ci_high),
        }
    }
}

/// One named part's figures for one variant of a stored run (docs/guide/scorers.md,
/// "Parts"): what `history` shows of a part over time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartRow {
    #[serde(skip)]
    pub run_id: String,
    /// The part's name, as the bench gives it.
    #[serde(rename = "name")]
    pub part: String,
    /// The arm: a variant, or `ENDPOINT/VARIANT` in a run of several endpoints.
    #[serde(skip)]
    pub variant: String,
    /// The part's place among the run's parts (the bench's order).
    #[serde(skip)]
    pub position: i64,
    /// Every score of the part was 0 or 1: its mean is an accuracy.
    pub binary: bool,
    pub n: i64,
    pub mean: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

/// One stored job's score (graded jobs; failed ones have none).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreRow {
    pub case_id: String,
    pub variant: String,
    pub case_hash: Option<u64>,
    pub group: Option<String>,
    pub score: Option<f64>,
    pub latency_ms: Option<f64>,
}
