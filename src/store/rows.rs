//! What the store keeps of a run's jobs, collected as the run's records arrive (live, or
//! replayed from a journal by `index`): numbers only, one compact row per job (48 bytes;
//! a missing number is NaN); case ids stay in run.json. The answers stay in the journal.

use std::collections::HashMap;

use crate::client::{Outcome, Usage};
use crate::runner::journal::{JobRecord, JobStatus};
use crate::suite::Price;

/// One job as the store keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobRow {
    /// The case's position in the run's case ids.
    pub case: u32,
    pub repeat: u32,
    /// Index into the run's variants (the plan's order; 0 is the baseline).
    pub variant: u16,
    pub attempts: u16,
    pub graded: bool,
    pub cached: bool,
    pub outcome: Option<Outcome>,
    pub tokens_in: u32,
    pub tokens_cached: u32,
    pub tokens_out: u32,
    /// NaN when the job failed.
    score: f64,
    /// NaN when not measured (failed before an answer, or from the cache).
    latency_ms: f32,
    ttft_ms: f32,
}

impl JobRow {
    /// The score in [0, 1]; `None` when the job failed.
    pub fn score(&self) -> Option<f64> {
        (!self.score.is_nan()).then_some(self.score)
    }

    /// The answering attempt's latency; `None` when not measured.
    pub fn latency_ms(&self) -> Option<f64> {
        (!self.latency_ms.is_nan()).then_some(f64::from(self.latency_ms))
    }

    /// The time to the first token; `None` when not measured.
    pub fn ttft_ms(&self) -> Option<f64> {
        (!self.ttft_ms.is_nan()).then_some(f64::from(self.ttft_ms))
    }

    /// What the answer cost at `price` (graded jobs only).
    pub fn cost_usd(&self, price: Option<&Price>) -> Option<f64> {
        let usage = Usage {
            prompt_tokens: u64::from(self.tokens_in),
            completion_tokens: u64::from(self.tokens_out),
            cached_tokens: u64::from(self.tokens_cached),
            ..Usage::default()
        };
        price
            .filter(|_| self.graded)
            .map(|p| crate::report::summary::cost(&usage, p))
    }
}

/// Every job of a run, as rows. Cases are named by their position in the run's case ids
/// (run.json's `bench.case_ids`), found by a hash of the id: no id is held twice.
#[derive(Debug, Default)]
pub struct JobRows {
    variants: HashMap<String, u16>,
    /// Hash of a case id → its position.
    index: HashMap<u64, u32>,
    /// Ids whose hash another id shares (none, in practice), by id.
    collided: HashMap<String, u32>,
    /// The groups of the cases that have one, by position.
    groups: HashMap<u32, Box<str>>,
    pub rows: Vec<JobRow>,
}

/// A count as a row keeps it (a job's tokens fit; absurd counts stop at the top).
fn small(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn nan_or(x: Option<f64>) -> f32 {
    x.map_or(f32::NAN, |x| x as f32)
}

fn id_hash(id: &str) -> u64 {
    crate::hash::hash_parts(&[id])
}

impl JobRows {
    /// Rows for a run of these variants (in plan order) over these cases.
    pub fn new(variants: &[String], case_ids: &[String]) -> JobRows {
        let mut index = HashMap::with_capacity(case_ids.len());
        let mut collided = HashMap::new();
        let mut clashing = std::collections::HashSet::new();
        for (i, id) in case_ids.iter().enumerate() {
            if index.insert(id_hash(id), i as u32).is_some() {
                clashing.insert(id_hash(id));
            }
        }
        for (i, id) in case_ids.iter().enumerate() {
            if clashing.contains(&id_hash(id)) {
                collided.insert(id.clone(), i as u32);
            }
        }
        JobRows {
            variants: variants
                .iter()
                .enumerate()
                .map(|(i, v)| (v.clone(), i as u16))
                .collect(),
            index,
            collided,
            ..JobRows::default()
        }
    }

    fn position(&self, id: &str) -> Option<u32> {
        if self.collided.is_empty() {
            return self.index.get(&id_hash(id)).copied();
        }
        match self.collided.get(id) {
            Some(&i) => Some(i),
            None => self.index.get(&id_hash(id)).copied(),
        }
    }

    /// Adds one finished job (jobs of variants or cases outside the plan are skipped).
    pub fn add(&mut self, r: &JobRecord) {
        let (Some(&variant), Some(case)) =
            (self.variants.get(&r.variant), self.position(&r.case_id))
        else {
            return;
        };
        if let Some(g) = &r.group {
            self.groups.entry(case).or_insert_with(|| g.as_str().into());
        }
        self.rows.push(JobRow {
            case,
            repeat: r.repeat,
            variant,
            attempts: u16::try_from(r.attempts.len()).unwrap_or(u16::MAX),
            graded: r.status == JobStatus::Graded,
            cached: r.cached,
            outcome: r.outcome,
            tokens_in: small(r.usage.prompt_tokens),
            tokens_cached: small(r.usage.cached_tokens),
            tokens_out: small(r.usage.completion_tokens),
            score: r.score().unwrap_or(f64::NAN),
            latency_ms: nan_or(r.latency_ms.filter(|_| !r.cached)),
            ttft_ms: nan_or(r.ttft_ms.filter(|_| !r.cached)),
        });
    }

    /// A case's group, by position.
    pub fn group(&self, case: u32) -> Option<&str> {
        self.groups.get(&case).map(|g| &**g)
    }

    /// How many jobs.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no job was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// An outcome's name, as the journal writes it.
pub fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Complete => "complete",
        Outcome::Truncated => "truncated",
        Outcome::Cut => "cut",
        Outcome::Stalled => "stalled",
        Outcome::NoFirstToken => "no_first_token",
        Outcome::HttpError => "http_error",
        Outcome::StreamError => "stream_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_small_and_keeps_what_it_was_given() {
        assert!(std::mem::size_of::<JobRow>() <= 48);
        let record: JobRecord = serde_json::from_value(serde_json::json!({
            "job": 0, "case_id": "c1", "variant": "b", "repeat": 1, "status": "graded",
            "outcome": "truncated", "output": "x", "finish_reason": "length",
            "expected": ["x"], "extracted": "x", "correct": null, "score": 0.25,
            "attempts": [], "ttft_ms": 12.5, "latency_ms": 40.0,
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "cached_tokens": 40,
                      "reasoning_tokens": 0, "estimated": false},
            "model": null, "group": "g"
        }))
        .unwrap();
        let mut rows = JobRows::new(&["a".into(), "b".into()], &["c0".into(), "c1".into()]);
        rows.add(&record);
        rows.add(&JobRecord {
            variant: "not planned".into(),
            ..record.clone()
        });
        assert_eq!(rows.len(), 1);
        let r = rows.rows[0];
        assert_eq!((r.variant, r.repeat, r.score()), (1, 1, Some(0.25)));
        assert_eq!((r.latency_ms(), r.ttft_ms()), (Some(40.0), Some(12.5)));
        assert_eq!(r.case, 1);
        assert_eq!((rows.group(0), rows.group(1)), (None, Some("g")));
        let price = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 10.0,
            cached_input_per_mtok: Some(0.5),
        };
        let want = (60.0 + 40.0 * 0.5 + 70.0) / 1e6;
        assert!((r.cost_usd(Some(&price)).unwrap() - want).abs() < 1e-15);
        // A failed job has no score, and costs nothing as an answer.
        let mut failed = record;
        failed.status = JobStatus::Failed;
        failed.score = None;
        failed.correct = None;
        failed.latency_ms = None;
        rows.add(&failed);
        let f = rows.rows[1];
        assert_eq!(
            (f.score(), f.latency_ms(), f.cost_usd(Some(&price))),
            (None, None, None)
        );
    }
}
