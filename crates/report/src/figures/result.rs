//! What a run folder's reports are made of: the figures the aggregator builds in one pass,
//! and what its sinks kept for the outputs (the answers report.html shows, the failed
//! jobs, the JUnit test cases, the store's rows). Every output renders from this.

use std::collections::{BTreeMap, HashMap};

use crate::compare::CaseTable;
use crate::error::ReportError;
use crate::job_rows::JobRows;
use crate::render::junit::JunitSpool;
use crate::summary::{Latencies, Summary};
use promptgauge_runner::journal::JobRecord;

/// Failed jobs shown in full in report.html; the rest are counted.
pub(crate) const FAILED_SHOWN: usize = 500;

/// Cases whose answers report.html shows in full (the first this many heard).
pub(crate) const SHOWN_CASES: usize = 2000;
/// Characters of one answer shown in report.html.
pub(crate) const SHOWN_CHARS: usize = 4000;
/// Bytes of one rendered prompt shown in report.html (a few-shot prompt fits; a 4 MB
/// document pasted into every case does not, 200 times over).
pub const SHOWN_PROMPT_BYTES: usize = 16 << 10;
/// Bytes of prompts one report.html holds in all; the rest are left out, and the page says
/// so. With the answers' own caps, a page stays within tens of megabytes at any size.
pub const SHOWN_PROMPTS_BUDGET: usize = 8 << 20;

/// One variant's answer to a case, as report.html shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownAnswer {
    pub output: String,
    /// What the variant's `extract:` read from the answer, which its scorer saw.
    pub read: Option<String>,
    pub extracted: Option<String>,
    pub score: Option<f64>,
    /// Why: the judge's reasons, a schema violation, the error of a failed job.
    pub reason: Option<String>,
    /// The provider withheld the answer (`content_filter`): no score, and no failure.
    pub filtered: bool,
    /// The files its request carried.
    pub files: Vec<promptgauge_runner::job_record::FileNote>,
    /// An agent loop's first calls (at most [`SHOWN_STEPS`]), and how many it made.
    pub steps: Vec<promptgauge_suite::tools::ToolStep>,
    pub steps_made: usize,
    /// Its requests' figures (at most [`SHOWN_STEPS`]).
    pub turns: Vec<promptgauge_runner::job_record::LoopTurn>,
}

/// The calls of an agent loop a page shows, at most.
pub const SHOWN_STEPS: usize = 50;

/// A case's expected answers and each variant's first answer.
pub(crate) type ShownCase = (Vec<String>, Vec<Option<ShownAnswer>>);

/// Per case: the expected answers and, per variant, (extracted, score) of its first
/// scored sample.
pub(crate) type CaseAnswers = (Vec<String>, Vec<Option<(String, f64)>>);

/// What a run folder's reports are made of.
pub struct RunResult {
    pub summary: Summary,
    /// Per case and variant: the scores behind the paired comparisons.
    pub cases: CaseTable,
    /// Per variant, in order: latencies for the charts.
    pub latencies: Vec<Latencies>,
    /// Cases where the variants disagree, by case id.
    pub disagreements: BTreeMap<String, CaseAnswers>,
    /// The first failed jobs, in journal order, and how many failed in all.
    pub failed: Vec<JobRecord>,
    pub failed_total: usize,
    /// The JUnit test cases, when asked for.
    pub junit: Option<JunitSpool>,
    /// Full answers of the first [`SHOWN_CASES`] cases, by case id, and how many cases
    /// there were in all.
    pub answers: BTreeMap<String, ShownCase>,
    pub answers_total: usize,
    /// Each shown (case, variant)'s rendered prompt, when the bench could be read again,
    /// each cut at [`SHOWN_PROMPT_BYTES`] and all within [`SHOWN_PROMPTS_BUDGET`].
    pub prompts: HashMap<(String, usize), String>,
    /// Prompts cut short, and prompts left out once the page's budget was spent.
    pub prompts_cut: usize,
    pub prompts_left_out: usize,
    /// One row per job for the history store, when asked for ([`crate::Aggregator::keep_rows`]).
    pub jobs: Option<JobRows>,
    /// Outputs that could not be written (a `--jobs-csv` file on a full disk).
    pub problems: Vec<ReportError>,
}
