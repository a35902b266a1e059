//! The outputs a run's records feed besides its figures, each a [`Sink`] of its own: the
//! answers report.html shows (`shown.rs`), the failed jobs and their causes (`failed.rs`),
//! the JUnit test cases spooled (`junit.rs`), the store's rows (`job_rows.rs`), the per-job
//! CSV (`jobs_csv.rs`). The [`crate::Aggregator`] is their fan-out: a live run,
//! `report`, `--resume`, `merge` and `index` all feed records through it, so every output
//! hears the same records in the same order — those the figures count (after
//! `--until-decided`'s tests say a decision needed them). A new per-job output is one file
//! here implementing `Sink`, its module line, and one line where the flags' list is built
//! (`OutputArgs::sinks`, cli.rs); what it keeps for a per-run file goes into the
//! `RunResult`, and `render::outputs` writes it.

pub(crate) mod failed;
pub(crate) mod job_rows;
pub mod jobs_csv;
pub(crate) mod junit;
pub(crate) mod shown;

use crate::figures::result::RunResult;
use promptgauge_runner::journal::JobRecord;

/// One output of a run.
pub trait Sink: Send {
    /// Hears a job the figures count (each planned job once); `arm` is its variant's
    /// position in the run (baseline first), `None` for a variant the run does not have.
    fn counted(&mut self, arm: Option<usize>, r: &JobRecord);

    /// Once every record is in: adds what it kept to the run's result, or writes its file.
    /// A file it cannot write is an error the run reports (exit 3), never a panic.
    fn finish(self: Box<Self>, result: &mut RunResult) -> Result<(), crate::ReportError>;
}
