//! A finished job's record, as the journal keeps it (`results.jsonl`, a line each), and
//! what every reader asks of it: what it cost, why it failed, its key in the plan.

use serde::{Deserialize, Serialize};

use promptgauge_client::{Attempt, Outcome, Usage};

/// One finished job, as written to `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Position in the plan.
    pub job: usize,
    pub case_id: String,
    pub variant: String,
    /// The endpoint that answered, by name, when the run has several (absent: the run's
    /// one endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub repeat: u32,
    /// `graded` (an answer was scored), `failed` (no answer; never counted as wrong) or
    /// `filtered` (the provider withheld the answer; counted apart).
    pub status: JobStatus,
    /// The final attempt's outcome.
    pub outcome: Option<Outcome>,
    /// The answer that was graded; empty when the job failed.
    pub output: String,
    /// Text received before a failure, for diagnosis only; never graded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_output: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    pub finish_reason: Option<String>,
    /// Tool calls the model made, assembled from the stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<promptgauge_client::ToolCall>,
    pub expected: Vec<String>,
    /// What the variant's `extract:` read from `output`: the text its scorer saw
    /// (docs/guide/scorers.md, "A variant reads its own answer"). Absent when the variant
    /// reads the whole answer, or when its reading found nothing (then `not_found` says
    /// what it looked for, and the answer scored 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<String>,
    pub extracted: Option<String>,
    /// What the scorer looked for and found none of in this answer (`a number`, `an
    /// option letter`, `JSON`): a graded answer with nothing to compare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_found: Option<String>,
    /// Whether the answer passed, as journals written before scores existed say it (read,
    /// never written: [`JobRecord::score`] is the one figure).
    #[serde(default, skip_serializing)]
    pub correct: Option<bool>,
    /// The score in [0, 1]; `None` when the job failed. Journals written before scores
    /// existed lack it: [`JobRecord::score`] reads `correct` then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Why, in the scorer's terms (per-field results, a schema violation, judges' reasons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_detail: Option<serde_json::Value>,
    /// The score's named parts, each in [0, 1], in the bench's order (docs/guide/scorers.md,
    /// "Parts"): each gets its own figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartScore>,
    /// Every call a judge made for this job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judge: Vec<promptgauge_grade::scorer::JudgeCall>,
    /// Tokens the judge spent on this job, costed apart from the answer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub attempts: Vec<Attempt>,
    pub ttft_ms: Option<f64>,
    pub latency_ms: Option<f64>,
    /// From the first attempt sent to the answer, retries and backoff included (the last
    /// attempt alone is `latency_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_ms: Option<f64>,
    pub usage: Usage,
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The case's group (`group:`), when it has one: tests treat the group as the unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The answer came from the response cache (`--cache`): nothing was sent, and its
    /// latency is not measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// Sent again after it failed (`run --resume --retry-failed`): the round, 1 for the first
    /// resend. Such a record takes the place of the job's failed one, which stays in the
    /// journal as its history; 0 (not written) for a job's first record.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub resent: u32,
    /// The provider batch that answered it (`--batch`), by the provider's id: priced at the
    /// batch price, and in no latency figure (nobody waited on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// The model declined to answer (a protocol's refusal): graded, scored 0 whatever the
    /// scorer would say, and counted per variant and endpoint. `output` holds what it said.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
    /// The provider billed usage the request could not have produced (more output tokens
    /// than its `max_tokens`): what it reported is kept and spent, and flagged with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_anomaly: Option<String>,
    /// `--budget`: what was held back for it before it was sent, in tokens; an overspend
    /// is said by what of its bill passed this (docs/guide/budget.md). Absent without a
    /// budget, and for an agent loop (held step by step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldBack>,
    /// The files its request carried (docs/guide/attachments.md): where each came from,
    /// its kind, size and hash — never its bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileNote>,
    /// An agent loop's tool calls, in order (docs/guide/tools.md): its trajectory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<ToolStep>,
    /// An agent loop's requests, in order: what each cost (its usage, attempts and time
    /// are summed above).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<LoopTurn>,
}

pub use promptgauge_suite::tools::ToolStep;

/// One named part of a job's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartScore {
    pub name: String,
    /// In [0, 1].
    pub score: f64,
}

/// What `--budget` held back for a job before it was sent (`runner::budget::Prices::held`),
/// in tokens: its request's prompt (its files by the rule that counts most, a file by URL
/// at its endpoint's limit), its answer at its ceiling, and its scorer's model calls with
/// their replies at the judge's ceiling. A bill past it is what no hold bounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBack {
    /// Nothing when the cache held the answer.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub scorer_calls: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub scorer_prompt_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub scorer_completion_tokens: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// One request of an agent loop, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopTurn {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// From the request sent to its answer's end, over its attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_ms: Option<f64>,
    pub attempts: u32,
    /// Answered by the response cache (`--cache`): paid for by an earlier run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// Taken from the journal by a resume: sent, and paid for, before the run was stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

/// An agent loop's step, journaled the moment its calls have their results
/// (`{"event":"step",…}`): a resumed loop takes its finished steps from here — the model's
/// answer and what each call got back — and sends, and runs, none of them again
/// (docs/guide/tools.md, "Killed and resumed").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLine {
    /// Always `step` (the journal's event lines start with their kind).
    pub event: String,
    /// The idempotency key of the request this step answered: a resume finds it by the
    /// key its loop would send.
    pub key: String,
    pub turn: u32,
    pub text: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// The calls the answer made, each with its id as the conversation carries it.
    pub tool_calls: Vec<promptgauge_client::ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// What each of `tool_calls` got back, in the same order.
    pub results: Vec<ToolStep>,
}

impl JobRecord {
    /// What every reader of a record relies on, checked once where the journal is read: a
    /// line that breaks it was written or changed by something else (docs/guide/resume.md).
    /// The error names the field.
    pub(crate) fn check(&self) -> Result<(), String> {
        let time = |what: &str, ms: Option<f64>| match ms {
            Some(ms) if !(ms.is_finite() && ms >= 0.0) => {
                Err(format!("`{what}` is {ms}, not a duration in milliseconds"))
            }
            _ => Ok(()),
        };
        time("ttft_ms", self.ttft_ms)?;
        time("latency_ms", self.latency_ms)?;
        time("answer_ms", self.answer_ms)?;
        for (i, a) in self.attempts.iter().enumerate() {
            time(&format!("attempts[{i}].ttft_ms"), a.ttft_ms)?;
            time(&format!("attempts[{i}].latency_ms"), Some(a.latency_ms))?;
        }
        for (i, t) in self.turns.iter().enumerate() {
            time(&format!("turns[{i}].answer_ms"), t.answer_ms)?;
        }
        if u32::try_from(self.job).is_err() {
            return Err(format!("`job` is {}, past any plan", self.job));
        }
        for (i, f) in self.files.iter().enumerate() {
            if let Some(h) = &f.sha256
                && !is_sha256(h)
            {
                let shown: String = h.chars().take(80).collect();
                return Err(format!(
                    "`files[{i}].sha256` is {shown:?}, not a SHA-256 (64 hexadecimal digits)"
                ));
            }
        }
        Ok(())
    }
}

/// 64 lower-case hexadecimal digits, as [`promptgauge_client::attachment::sha256_hex`] writes.
pub fn is_sha256(h: &str) -> bool {
    h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A file a job's request carried, as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileNote {
    /// The case's name for it.
    pub name: String,
    /// Its path as the case wrote it (relative to the case file), its URL, or `data:…`.
    pub origin: String,
    pub kind: promptgauge_client::attachment::Kind,
    pub bytes: u64,
    /// SHA-256 of its bytes; absent for a URL the provider was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Where it was read from (the whole path), so the reports can show it: read back only
    /// while its bytes still have this hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl FileNote {
    /// Its bytes, read back from its path while they still have its hash; `None` once the
    /// file is gone or changed (or for a URL or a data URL, which left no path).
    pub fn bytes_again(&self, most: u64) -> Option<Vec<u8>> {
        let bytes =
            promptgauge_base::files::read_capped(std::path::Path::new(self.path.as_ref()?), most)
                .ok()?;
        (Some(promptgauge_client::attachment::sha256_hex(&bytes)) == self.sha256).then_some(bytes)
    }

    /// The note of each file `messages` carry, in order, each once.
    pub fn of(messages: &[promptgauge_client::ChatMessage]) -> Vec<FileNote> {
        let mut notes: Vec<FileNote> = Vec::new();
        for f in messages
            .iter()
            .flat_map(|m| m.files.iter().map(|p| &p.file))
        {
            if notes
                .iter()
                .any(|n| n.origin == f.origin && n.name == f.name)
            {
                continue;
            }
            notes.push(FileNote {
                name: f.name.clone(),
                origin: f.origin.clone(),
                kind: f.kind,
                bytes: f.size,
                sha256: f.sha256.clone(),
                path: f.path.as_ref().map(|p| p.display().to_string()),
            });
        }
        notes
    }
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// Whether a job was scored, failed, or withheld by the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Graded,
    Failed,
    /// The provider's content filter withheld the answer (`finish_reason: content_filter`):
    /// the job finished, but there is nothing to grade. Counted apart: neither right, wrong
    /// nor failed.
    Filtered,
}

/// Whether an attempt that ended so failed for a reason that passes (a server down,
/// overloaded or unreachable).
pub fn passing(outcome: promptgauge_client::Outcome, status: Option<u16>) -> bool {
    use promptgauge_client::Outcome;
    match outcome {
        Outcome::Cut | Outcome::Stalled | Outcome::NoFirstToken | Outcome::StreamError => true,
        Outcome::HttpError => {
            status.is_none_or(|s| s == 408 || s == 429 || (500..600).contains(&s))
        }
        Outcome::Complete | Outcome::Truncated | Outcome::Filtered => false,
    }
}

/// Identifies a job within a plan, across the runs that resume it.
pub type JobKey = (String, String, u32);

impl JobRecord {
    /// The usage the provider billed for the job's answer: every attempt it answered (a
    /// journal from before attempts carried usage has only the answer's); none when it
    /// came from the cache.
    pub fn billed(&self) -> Vec<&Usage> {
        if self.cached {
            return Vec::new();
        }
        let billed: Vec<&Usage> = self
            .attempts
            .iter()
            .filter_map(|a| a.usage.as_ref())
            .collect();
        if billed.is_empty() && self.status == JobStatus::Graded {
            vec![&self.usage]
        } else {
            billed
        }
    }

    /// The usage of the calls its scorer made to a model (a judge's) that were sent, not
    /// answered from the cache: per call when the calls say, else the job's judge usage.
    pub fn judge_billed(&self) -> Vec<&Usage> {
        if self.judge.is_empty() {
            // A scorer that called a model of its own (a `command` reporting `usage`).
            return self.judge_usage.iter().collect();
        }
        let sent: Vec<&promptgauge_grade::JudgeCall> =
            self.judge.iter().filter(|c| !c.cached).collect();
        if sent.iter().any(|c| c.usage.is_some()) {
            sent.iter().filter_map(|c| c.usage.as_ref()).collect()
        } else {
            self.judge_usage
                .as_ref()
                .filter(|_| !sent.is_empty())
                .into_iter()
                .collect()
        }
    }

    /// What the job cost in USD: its billed answer at `price` (the batch price when it was
    /// batched), and its scorer's model calls at `judge_price`; an unknown price counts 0.
    pub(crate) fn cost_usd(
        &self,
        price: Option<&promptgauge_suite::Price>,
        judge_price: Option<&promptgauge_suite::Price>,
    ) -> f64 {
        let answer = price.map_or(0.0, |p| {
            let p = if self.batch.is_some() {
                p.batched()
            } else {
                p.clone()
            };
            self.billed().into_iter().map(|u| p.cost(u)).sum()
        });
        let judged = judge_price.map_or(0.0, |p| {
            self.judge_billed().into_iter().map(|u| p.cost(u)).sum()
        });
        answer + judged
    }

    /// The HTTP status the job's failure came with: its judge's, when the answer came and
    /// the judge's call failed (a judge that is not there fails every job the same way),
    /// else its answer's last attempt's.
    pub fn failure_status(&self) -> Option<u16> {
        self.failure_outcome().1
    }

    /// The first line of the job's error (empty when it has none): what tells failures
    /// apart when they are grouped or compared.
    pub fn error_line(&self) -> &str {
        self.error
            .as_deref()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
    }

    /// Whether the job failed for a reason that passes — a server down, overloaded or
    /// unreachable, the endpoint's or the judge's: the last attempt (of the answer, or of
    /// the judge's failed call) was refused with 408, 429 or a 5xx, found no server, or its
    /// stream was cut, stalled, never started or broke with an error event. A 4xx such as a
    /// wrong model, a template, or a judge reply that could not be read, is not.
    pub fn failed_transiently(&self) -> bool {
        if self.status != JobStatus::Failed {
            return false;
        }
        let (outcome, status) = self.failure_outcome();
        match outcome {
            Some(o) => passing(o, status),
            None => false,
        }
    }

    /// How the attempt the job failed on ended, with its status: the judge's failed call's,
    /// when the answer came and the judge's call failed, else the answer's last attempt's.
    pub fn failure_outcome(&self) -> (Option<promptgauge_client::Outcome>, Option<u16>) {
        if let Some(call) = self
            .judge
            .iter()
            .rev()
            .find(|c| c.error.is_some() && c.outcome.is_some())
        {
            return (call.outcome, call.status);
        }
        let last = self.attempts.last();
        (last.map(|a| a.outcome), last.and_then(|a| a.status))
    }

    /// The job's score: its `score`, or 1/0 from `correct` in older journals.
    pub fn score(&self) -> Option<f64> {
        self.score
            .or_else(|| self.correct.map(|c| if c { 1.0 } else { 0.0 }))
    }

    /// The job's key in the plan: (case, arm, repeat).
    pub fn key(&self) -> JobKey {
        (self.case_id.clone(), self.arm().into_owned(), self.repeat)
    }

    /// The (variant, endpoint) cell the job belongs to, by name: its variant (borrowed:
    /// what every reader of a one-endpoint run's records looks up, record by record), or
    /// `ENDPOINT/VARIANT` in a run of several endpoints.
    pub fn arm(&self) -> std::borrow::Cow<'_, str> {
        match &self.endpoint {
            None => std::borrow::Cow::Borrowed(&self.variant),
            Some(e) => {
                std::borrow::Cow::Owned(promptgauge_suite::plan::arm_name(&self.variant, Some(e)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(parts: serde_json::Value) -> serde_json::Value {
        let mut r = serde_json::json!({
            "job": 3, "case_id": "t-01", "variant": "plain", "repeat": 0,
            "status": "graded", "outcome": "complete", "output": "{}",
            "finish_reason": "stop", "expected": ["{}"], "extracted": null, "score": 0.5, "error": null,
            "attempts": [], "ttft_ms": null, "latency_ms": null, "model": null,
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "cached_tokens": 0,
                      "reasoning_tokens": 0, "estimated": false}
        });
        if !parts.is_null() {
            r["parts"] = parts;
        }
        r
    }

    #[test]
    fn a_record_s_parts_are_journaled_by_name_and_read_back_alike() {
        let line = record(serde_json::json!([
            {"name": "category", "score": 1.0},
            {"name": "items[].sku", "score": 0.5}
        ]));
        let r: JobRecord = serde_json::from_value(line).unwrap();
        assert_eq!(
            r.parts,
            [
                PartScore {
                    name: "category".into(),
                    score: 1.0
                },
                PartScore {
                    name: "items[].sku".into(),
                    score: 0.5
                }
            ]
        );
        let written = serde_json::to_value(&r).unwrap();
        assert_eq!(
            written["parts"],
            serde_json::json!([{"name": "category", "score": 1.0}, {"name": "items[].sku", "score": 0.5}])
        );
        let again: JobRecord = serde_json::from_value(written).unwrap();
        assert_eq!(again, r);
        // A journal written before parts existed reads as a record without them, and a
        // record without parts writes none: its line is as it was.
        let old: JobRecord = serde_json::from_value(record(serde_json::Value::Null)).unwrap();
        assert!(old.parts.is_empty());
        assert!(serde_json::to_value(&old).unwrap().get("parts").is_none());
    }
}
