//! The JUnit test cases: each counted job's, spooled beside the journal for the `--junit`
//! file (`render/junit.rs` writes it from the spool and the summary).

use crate::figures::result::RunResult;
use crate::render::junit::JunitSpool;
use crate::sinks::Sink;
use promptgauge_runner::journal::JobRecord;

impl Sink for JunitSpool {
    fn counted(&mut self, arm: Option<usize>, r: &JobRecord) {
        if let Some(arm) = arm {
            self.add(arm, r);
        }
    }

    /// The spool is assembled into the `--junit` file with the summary (app/finish.rs).
    fn finish(self: Box<Self>, result: &mut RunResult) -> Result<(), crate::ReportError> {
        result.junit = Some(*self);
        Ok(())
    }
}
