//! `--jobs-csv FILE`: one row per job — case, variant (and endpoint, in a run of several), repeat, status, cached, score, tokens, cost,
//! latency — for a spreadsheet or another tool's statistics. Rows are written as the jobs
//! are counted, to a file beside FILE that is renamed over it at the end: a run killed
//! half-way leaves the old file (or none), never half of the new one.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::render::csv::num;
use crate::result::RunResult;
use promptgauge_runner::journal::{JobRecord, JobStatus};
use promptgauge_suite::Price;

/// The columns, in order.
const HEADER: [&str; 13] = [
    "case_id",
    "variant",
    "repeat",
    "status",
    "cached",
    "score",
    "prompt_tokens",
    "completion_tokens",
    "tokens_estimated",
    "cost_usd",
    "latency_ms",
    "ttft_ms",
    "attempts",
];

/// A sink writing one CSV row per counted job.
pub struct JobsCsv {
    path: PathBuf,
    tmp: PathBuf,
    writer: Option<csv::Writer<BufWriter<File>>>,
    /// Each arm's price.
    prices: Vec<Option<Price>>,
    /// A run of several endpoints: an `endpoint` column after `variant`.
    endpoints: bool,
    /// The first write that failed; the file is then not renamed into place.
    error: Option<std::io::Error>,
}

impl JobsCsv {
    /// A CSV at `path`, each job costed at its arm's price (no cost without one); with an
    /// `endpoint` column when `endpoints` (a run of several).
    pub fn create(path: &Path, prices: Vec<Option<Price>>, endpoints: bool) -> JobsCsv {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let (writer, error) = match File::create(&tmp) {
            Ok(f) => {
                let mut w = csv::Writer::from_writer(BufWriter::new(f));
                let mut header = HEADER.to_vec();
                if endpoints {
                    header.insert(2, "endpoint");
                }
                match w.write_record(header) {
                    Ok(()) => (Some(w), None),
                    Err(e) => (None, Some(e.into())),
                }
            }
            Err(e) => (None, Some(e)),
        };
        JobsCsv {
            path: path.to_path_buf(),
            tmp,
            writer,
            prices,
            endpoints,
            error,
        }
    }
}

impl crate::sinks::Sink for JobsCsv {
    fn counted(&mut self, arm: Option<usize>, r: &JobRecord) {
        let Some(w) = &mut self.writer else { return };
        let status = match r.status {
            JobStatus::Graded => "graded",
            JobStatus::Failed => "failed",
            JobStatus::Filtered => "filtered",
        };
        // What the answer costs at its arm's prices (a cached one was paid for once).
        let cost = arm
            .and_then(|a| self.prices.get(a))
            .and_then(Option::as_ref)
            .map(|p| p.cost(&r.usage));
        let mut row = vec![
            r.case_id.clone(),
            r.variant.clone(),
            r.repeat.to_string(),
            status.to_string(),
            r.cached.to_string(),
            num(r.score()),
            r.usage.prompt_tokens.to_string(),
            r.usage.completion_tokens.to_string(),
            r.usage.estimated.to_string(),
            num(cost),
            num(r.latency_ms),
            num(r.ttft_ms),
            r.attempts.len().to_string(),
        ];
        if self.endpoints {
            row.insert(2, r.endpoint.clone().unwrap_or_default());
        }
        if let Err(e) = w.write_record(&row) {
            self.error = Some(e.into());
            self.writer = None;
        }
    }

    fn finish(mut self: Box<Self>, _: &mut RunResult) -> Result<(), crate::ReportError> {
        let copy = |e: &std::io::Error| std::io::Error::new(e.kind(), e.to_string());
        let written = match (self.writer.take(), self.error.take()) {
            (_, Some(e)) => Err(e),
            (Some(w), None) => w
                .into_inner()
                .map_err(|e| copy(e.error()))
                .and_then(|b| b.into_inner().map_err(|e| copy(e.error())))
                .and_then(|f| f.sync_all())
                .and_then(|()| std::fs::rename(&self.tmp, &self.path)),
            (None, None) => Ok(()),
        };
        if written.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        written.map_err(|e| crate::ReportError::write(&self.path, e))
    }
}
