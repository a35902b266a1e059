//! The history store's rows: one per counted job, kept (spooled in a live run) until the
//! run is recorded.

use crate::figures::job_rows::JobRows;
use crate::figures::result::RunResult;
use crate::sinks::Sink;
use promptgauge_runner::journal::JobRecord;

impl Sink for JobRows {
    fn counted(&mut self, _: Option<usize>, r: &JobRecord) {
        self.add(r);
    }

    /// The rows go to the store with the run (app/finish.rs).
    fn finish(mut self: Box<Self>, result: &mut RunResult) -> Result<(), crate::ReportError> {
        self.flush();
        result.jobs = Some(*self);
        Ok(())
    }
}
