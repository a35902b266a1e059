//! A live run's journal, read so far ([`Tally`]: its running figures and newest answers,
//! read on from where the last read ended), and the runs in progress found at the last
//! look ([`Scan`]).

use std::collections::{HashMap, VecDeque};
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::time::Instant;

use promptgauge_runner::RunDir;
use promptgauge_runner::journal::{self, JobRecord, JobStatus};

/// How many of the newest answers a live page shows.
const NEWEST: usize = 8;

/// One arm's running figures.
#[derive(Debug, Clone, Default, Serialize)]
struct ArmTally {
    name: String,
    graded: u64,
    failed: u64,
    filtered: u64,
    score_sum: f64,
    /// Mean score and its running Wilson interval, once something was graded.
    mean: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
}

/// One of the newest answers (text cut short; shown as text).
#[derive(Debug, Clone, Serialize)]
struct Newest {
    job: usize,
    case: String,
    arm: String,
    status: &'static str,
    score: Option<f64>,
    answer: String,
}

/// A live run's journal, read so far.
#[derive(Debug, Serialize)]
pub(super) struct Tally {
    pub(super) run_id: String,
    pub(super) bench: String,
    pub(super) started_at: String,
    pub(super) planned: usize,
    pub(super) done: usize,
    confidence: f64,
    arms: Vec<ArmTally>,
    newest: VecDeque<Newest>,
    /// Where the next read starts.
    #[serde(skip)]
    offset: u64,
    /// Each job's record so far, by (case, arm, repeat): its status and score.
    #[serde(skip)]
    seen: HashMap<(String, String, u32), (JobStatus, Option<f64>)>,
    #[serde(skip)]
    arm_of: HashMap<String, usize>,
}

impl Tally {
    pub(super) fn new(record: &promptgauge_runner::record::RunRecord) -> Tally {
        let arms = record.plan.arms();
        Tally {
            run_id: record.run_id.clone(),
            bench: record.bench.name.clone(),
            started_at: record.started_at.clone(),
            planned: record.plan_keys().planned(),
            done: 0,
            confidence: record.bench.confidence,
            arm_of: arms
                .iter()
                .enumerate()
                .map(|(i, a)| (a.clone(), i))
                .collect(),
            arms: arms
                .into_iter()
                .map(|name| ArmTally {
                    name,
                    ..ArmTally::default()
                })
                .collect(),
            newest: VecDeque::new(),
            offset: 0,
            seen: HashMap::new(),
        }
    }

    /// Reads what the journal gained since the last read; whether anything was.
    pub(super) fn advance(&mut self, path: &FsPath) -> std::io::Result<bool> {
        if !path.exists() {
            return Ok(false);
        }
        let mut records = Vec::new();
        let stats = journal::read_from(path, self.offset, |_, r| records.push(r))?;
        self.offset += stats.complete_bytes;
        let changed = !records.is_empty();
        for r in records {
            self.add(r);
        }
        if changed {
            for a in &mut self.arms {
                a.mean = (a.graded > 0).then(|| a.score_sum / a.graded as f64);
                let bounds = promptgauge_stats::wilson(
                    a.score_sum.round() as u64,
                    a.graded,
                    self.confidence,
                );
                a.low = bounds.map(|b| b.0);
                a.high = bounds.map(|b| b.1);
            }
        }
        Ok(changed)
    }

    /// One record, as the reports count it: a job's first record, or a resend in place of
    /// its failure; a duplicate is left out.
    fn add(&mut self, r: JobRecord) {
        let arm = r.arm().into_owned();
        let Some(&i) = self.arm_of.get(&arm) else {
            return;
        };
        let key = (r.case_id.clone(), arm.clone(), r.repeat);
        match self.seen.get(&key) {
            Some((JobStatus::Failed, _)) if r.resent > 0 => {
                self.arms[i].failed -= 1;
                self.done -= 1;
            }
            Some(_) => return,
            None => {}
        }
        self.seen.insert(key, (r.status, r.score()));
        self.done += 1;
        let a = &mut self.arms[i];
        match r.status {
            JobStatus::Graded => {
                a.graded += 1;
                a.score_sum += r.score().unwrap_or(0.0);
            }
            JobStatus::Failed => a.failed += 1,
            JobStatus::Filtered => a.filtered += 1,
        }
        self.newest.push_front(Newest {
            job: r.job,
            case: r.case_id.clone(),
            arm,
            status: match r.status {
                JobStatus::Graded => "graded",
                JobStatus::Failed => "failed",
                JobStatus::Filtered => "filtered",
            },
            score: r.score(),
            answer: promptgauge_report::visible(&r.output, 300),
        });
        self.newest.truncate(NEWEST);
    }
}

/// The live runs found at the last look, and when it was (looked again at most every
/// quarter second, however many pages ask).
#[derive(Default)]
pub(super) struct Scan {
    pub(super) at: Option<Instant>,
    pub(super) runs: Vec<(String, PathBuf)>,
    pub(super) tallies: HashMap<String, Arc<Mutex<Tally>>>,
}

/// Whether another process holds `folder` (a run writing it).
pub(super) fn held(folder: &FsPath) -> bool {
    folder.join(promptgauge_runner::lock::FILE).is_file()
        && matches!(
            RunDir::at(folder).read_lock(),
            Err(promptgauge_runner::lock::LockError::InUse { .. })
        )
}

/// The run folders under `reports` another process holds, by name.
pub(super) fn look(reports: &FsPath) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(reports) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let path = e.path();
            (path.join("run.json").is_file() && held(&path)).then_some((name, path))
        })
        .collect();
    found.sort();
    found
}
