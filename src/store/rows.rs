//! What the store keeps of a run's jobs, collected as the run's records arrive (live, or
//! replayed from a journal by `index`): numbers only, one compact row per job, with each
//! case's id, group and tags kept once. The answers stay in the journal.

use std::collections::HashMap;

use crate::client::Outcome;
use crate::runner::journal::{JobRecord, JobStatus};
use crate::suite::Price;

/// One job as the store keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobRow {
    /// Index into [`JobRows`]'s cases.
    pub case: u32,
    /// Index into the run's variants (the plan's order; 0 is the baseline).
    pub variant: u16,
    pub repeat: u32,
    pub graded: bool,
    pub outcome: Option<Outcome>,
    pub score: Option<f64>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub latency_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub cost_usd: Option<f64>,
    pub cached: bool,
    pub attempts: u32,
}

/// A case as the rows name it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaseInfo {
    pub id: String,
    pub group: Option<String>,
    pub tags: Vec<String>,
}

/// Every job of a run, as rows.
#[derive(Debug, Default)]
pub struct JobRows {
    variants: HashMap<String, u16>,
    price: Option<Price>,
    index: HashMap<String, u32>,
    pub cases: Vec<CaseInfo>,
    pub rows: Vec<JobRow>,
}

impl JobRows {
    /// Rows for a run of these variants (in plan order), costed at `price`.
    pub fn new(variants: &[String], price: Option<Price>) -> JobRows {
        JobRows {
            variants: variants
                .iter()
                .enumerate()
                .map(|(i, v)| (v.clone(), i as u16))
                .collect(),
            price,
            ..JobRows::default()
        }
    }

    /// Adds one finished job (records of variants outside the plan are skipped).
    pub fn add(&mut self, r: &JobRecord) {
        let Some(&variant) = self.variants.get(&r.variant) else {
            return;
        };
        let case = match self.index.get(&r.case_id) {
            Some(&i) => i,
            None => {
                let i = self.cases.len() as u32;
                self.index.insert(r.case_id.clone(), i);
                self.cases.push(CaseInfo {
                    id: r.case_id.clone(),
                    group: r.group.clone(),
                    tags: r.tags.clone(),
                });
                i
            }
        };
        let graded = r.status == JobStatus::Graded;
        self.rows.push(JobRow {
            case,
            variant,
            repeat: r.repeat,
            graded,
            outcome: r.outcome,
            score: r.score(),
            tokens_in: r.usage.prompt_tokens,
            tokens_out: r.usage.completion_tokens,
            latency_ms: r.latency_ms.filter(|_| !r.cached),
            ttft_ms: r.ttft_ms.filter(|_| !r.cached),
            cost_usd: self
                .price
                .as_ref()
                .filter(|_| graded)
                .map(|p| crate::report::summary::cost(&r.usage, p)),
            cached: r.cached,
            attempts: r.attempts.len() as u32,
        });
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
