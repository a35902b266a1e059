//! What a run's bills took past what `--budget` held back for them, by cause
//! (docs/guide/budget.md, "Usage no request could produce, and every overspend"): a run
//! keeps its budget through its holds, so an overspend is exactly what passed them, and
//! the `budget` gate says which of these it was — never a list of what might have been.

use serde::{Deserialize, Serialize};

use promptgauge_client::Usage;
use promptgauge_runner::JobRecord;
use promptgauge_suite::Price;

/// What passed the holds, by cause, in USD, over the jobs a hold was recorded for
/// (`JobRecord::held`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PastHolds {
    /// Prompts billed for more tokens than their hold counted: a file the run could not
    /// size (a PDF given by URL with more pages than `limits.max_pdf_pages`), text that
    /// takes more than a token for four characters.
    #[serde(default, skip_serializing_if = "is_nothing")]
    pub prompts_usd: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_jobs: u64,
    /// The job whose prompt passed its hold most: `doc-1: 1200012 prompt tokens billed,
    /// 300012 held`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_example: Option<String>,
    /// Answers billed for more output tokens than their ceiling (a provider accounting
    /// anomaly: `usage_anomalies`).
    #[serde(default, skip_serializing_if = "is_nothing")]
    pub answers_usd: f64,
    /// Attempts billed besides the one each job was held for: retries after a cut stream.
    #[serde(default, skip_serializing_if = "is_nothing")]
    pub retries_usd: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u64,
    /// A judge's calls past what was held: asked again after a reply it could not read.
    #[serde(default, skip_serializing_if = "is_nothing")]
    pub judge_usd: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub judge_asked_again: u64,
    /// A `command` scorer's own model calls (its replies' `usage`): never held, since they
    /// cannot be known before.
    #[serde(default, skip_serializing_if = "is_nothing")]
    pub command_usd: f64,
    /// The prompt tokens the example passed its hold by (which job is the example).
    #[serde(skip)]
    most_past: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_nothing(x: &f64) -> bool {
    *x == 0.0
}

impl PastHolds {
    /// Adds what job `r` was billed past its hold, at its endpoint's `price` (its batch
    /// price when it was batched) and the judge's.
    pub(crate) fn add(&mut self, r: &JobRecord, price: Option<&Price>, judge: Option<&Price>) {
        let Some(held) = r.held else {
            return;
        };
        let price = price.map(|p| match r.batch {
            Some(_) => p.batched(),
            None => p.clone(),
        });
        let billed = r.billed();
        if let (Some(p), Some((last, retried))) = (&price, billed.split_last()) {
            self.retries += retried.len() as u64;
            self.retries_usd += retried.iter().map(|u| p.cost(u)).sum::<f64>();
            let prompt = last.prompt_tokens.saturating_sub(held.prompt_tokens);
            if prompt > 0 {
                self.prompts_usd += prompt as f64 * p.input_per_mtok / 1e6;
                self.prompt_jobs += 1;
                if prompt > self.most_past {
                    self.most_past = prompt;
                    self.prompt_example = Some(prompt_example(r, last, held.prompt_tokens));
                }
            }
            let output = last
                .completion_tokens
                .saturating_sub(held.completion_tokens);
            self.answers_usd += output as f64 * p.output_per_mtok / 1e6;
        }
        let Some(judge) = judge else {
            return;
        };
        let billed: f64 = r.judge_billed().into_iter().map(|u| judge.cost(u)).sum();
        let held_cost = judge.cost(&Usage {
            prompt_tokens: held.scorer_prompt_tokens,
            completion_tokens: held.scorer_completion_tokens,
            ..Usage::default()
        });
        let past = (billed - held_cost).max(0.0);
        if r.judge.is_empty() {
            self.command_usd += past;
        } else {
            let sent = r.judge.iter().filter(|c| !c.cached).count() as u64;
            self.judge_asked_again += sent.saturating_sub(held.scorer_calls);
            self.judge_usd += past;
        }
    }

    /// Another variant's, added.
    pub(crate) fn merge(&mut self, other: &PastHolds) {
        self.prompts_usd += other.prompts_usd;
        self.prompt_jobs += other.prompt_jobs;
        if other.prompt_example.is_some() && other.most_past >= self.most_past {
            self.most_past = other.most_past;
            self.prompt_example.clone_from(&other.prompt_example);
        }
        self.answers_usd += other.answers_usd;
        self.retries_usd += other.retries_usd;
        self.retries += other.retries;
        self.judge_usd += other.judge_usd;
        self.judge_asked_again += other.judge_asked_again;
        self.command_usd += other.command_usd;
    }

    /// Whether any bill passed its hold.
    pub(crate) fn any(&self) -> bool {
        self.prompts_usd + self.answers_usd + self.retries_usd + self.judge_usd + self.command_usd
            > 0.0
    }

    /// Each cause that took bills past their holds, the largest first, with what it cost:
    /// `usd` writes the amounts, `anomalies` is how many jobs were billed past
    /// `max_tokens` (the note that says so is elsewhere).
    pub(crate) fn causes(&self, usd: &dyn Fn(f64) -> String, anomalies: u64) -> Vec<String> {
        let mut causes: Vec<(f64, String)> = Vec::new();
        if self.prompts_usd > 0.0 {
            causes.push((
                self.prompts_usd,
                format!(
                    "{} jobs' prompts were billed for more tokens than their holds counted, {} (e.g. {})",
                    self.prompt_jobs,
                    usd(self.prompts_usd),
                    self.prompt_example.as_deref().unwrap_or("?")
                ),
            ));
        }
        if self.answers_usd > 0.0 || anomalies > 0 {
            causes.push((
                self.answers_usd,
                format!(
                    "{anomalies} jobs were billed for more output tokens than their max_tokens allows, {} (a provider accounting anomaly: see the note)",
                    usd(self.answers_usd)
                ),
            ));
        }
        if self.retries_usd > 0.0 {
            causes.push((
                self.retries_usd,
                format!(
                    "{} retries were billed besides the attempts held for, {}",
                    self.retries,
                    usd(self.retries_usd)
                ),
            ));
        }
        if self.judge_usd > 0.0 {
            causes.push((
                self.judge_usd,
                format!(
                    "the judge was asked {} times more than held for, {}",
                    self.judge_asked_again,
                    usd(self.judge_usd)
                ),
            ));
        }
        if self.command_usd > 0.0 {
            causes.push((
                self.command_usd,
                format!(
                    "a command scorer's own model calls, which no hold can know before, {}",
                    usd(self.command_usd)
                ),
            ));
        }
        causes.sort_by(|a, b| b.0.total_cmp(&a.0));
        causes.into_iter().map(|(_, said)| said).collect()
    }
}

/// `doc-1: 1200012 prompt tokens billed, 300012 held`, and why a file by URL was held at
/// what it was.
fn prompt_example(r: &JobRecord, billed: &Usage, held: u64) -> String {
    let by_url = r
        .files
        .iter()
        .any(|f| f.sha256.is_none() && f.origin.contains("://"));
    format!(
        "{}: {} prompt tokens billed, {held} held{}",
        r.case_id,
        billed.prompt_tokens,
        if by_url {
            "; its files given by URL were held at their endpoint's limits, a PDF at limits.max_pdf_pages pages: raise it to what the provider reads, or run with --fetch-urls to count their real pages"
        } else {
            ""
        }
    )
}
