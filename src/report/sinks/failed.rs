//! The failed jobs report.html shows, and their causes grouped for every report.

use crate::report::error::ReportError;
use crate::report::figures::causes::Causes;
use crate::report::figures::result::{FAILED_SHOWN, RunResult};
use crate::runner::journal::JobRecord;

/// The failed jobs report.html shows (the first [`FAILED_SHOWN`]) and
/// their causes, grouped, for every report.
#[derive(Default)]
pub(crate) struct FailedJobs {
    shown: Vec<JobRecord>,
    causes: Causes,
}

impl crate::report::sinks::Sink for FailedJobs {
    fn counted(&mut self, arm: Option<usize>, r: &JobRecord) {
        if arm.is_none() || r.status != crate::runner::journal::JobStatus::Failed {
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
