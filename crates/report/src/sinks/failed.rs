//! The failed jobs report.html shows, and their causes grouped for every report.

use crate::error::ReportError;
use crate::figures::causes::Causes;
use crate::figures::result::{FAILED_SHOWN, RunResult};
use promptgauge_runner::journal::JobRecord;

/// The failed jobs report.html shows (the first [`FAILED_SHOWN`]) and
/// their causes, grouped, for every report.
#[derive(Default)]
pub(crate) struct FailedJobs {
    shown: Vec<JobRecord>,
    causes: Causes,
}

impl crate::sinks::Sink for FailedJobs {
    fn counted(&mut self, arm: Option<usize>, r: &JobRecord) {
        if arm.is_none() || r.status != promptgauge_runner::journal::JobStatus::Failed {
            return;
        }
        self.causes.add(r);
        if self.shown.len() < FAILED_SHOWN {
            self.shown.push(r.clone());
        }
    }

    fn finish(self: Box<Self>, result: &mut RunResult) -> Result<(), ReportError> {
        result.failed = self.shown;
        result.summary.failures = self.causes.finish();
        Ok(())
    }
}
