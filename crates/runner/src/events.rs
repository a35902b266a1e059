//! What a run tells its listeners, in order, from one place: the journal writer, the
//! progress line, the `--verbose` log and the aggregator that builds every report all
//! subscribe to the same stream. `report DIR`, `--resume` and `merge` replay a journal's
//! records through the same listeners.

use super::journal::JobRecord;
pub(crate) use promptgauge_client::AttemptEvent;
use promptgauge_client::pool::PoolEvent;
use promptgauge_suite::Job;

/// How a run's sending ended.
#[derive(Debug, Default)]
pub struct RunTally {
    pub finished: usize,
    pub graded: usize,
    pub failed: usize,
    /// Answers the provider withheld (`content_filter`).
    pub filtered: usize,
    /// Jobs never finished (stopped by Ctrl-C, a fatal provider error, or the journal).
    pub not_run: usize,
    /// `--batch`: batches still running at the provider when the run stopped waiting for
    /// them (`--batch-wait`), left to a resume.
    pub batches_left: usize,
    /// A listener that keeps the run's record (the journal) could not write (a full disk):
    /// the run stopped there, and every job not in the journal is left for a resume.
    pub journal_error: Option<std::io::Error>,
}

/// What listeners hear, in this order: `Started`, then per job `JobStarted`, its
/// `AttemptFinished`s (when attempts are observed) and `JobFinished`, with `PoolChanged`
/// whenever a gate or replica changes, and `Finished` last.
#[derive(Debug)]
pub enum RunEvent<'a> {
    Started {
        /// Jobs in the plan.
        planned: usize,
        /// Of which already finished (a resume).
        already: usize,
    },
    JobStarted {
        job: &'a Job,
    },
    AttemptFinished(&'a AttemptEvent),
    /// A gate resized or a replica benched.
    PoolChanged(&'a PoolEvent),
    /// `--batch`: a provider batch was submitted, polled or ended (docs/guide/batch.md).
    Batch(&'a super::batch::BatchRecord),
    /// An agent loop's step ended: its answer, and what its calls got back
    /// (docs/guide/tools.md).
    Step(&'a super::job_record::StepLine),
    JobFinished {
        record: &'a JobRecord,
        /// Jobs finished so far in this process (live) or in the journal (replayed).
        done: usize,
        total: usize,
        /// Jobs being worked on right now (sending, streaming or waiting to retry).
        in_flight: usize,
    },
    Finished {
        tally: &'a RunTally,
    },
}

/// Hears a run. Only a listener that keeps the run's record (the journal) returns errors:
/// one stops the run, since what it cannot keep would be lost.
pub trait Listener {
    /// Hears one event; an error (from the journal) stops the run.
    fn on(&mut self, event: &RunEvent<'_>) -> std::io::Result<()>;
}

/// Several listeners as one, in order. An event a listener could not take goes no
/// further: put the journal first, and nothing is reported that it did not keep.
pub struct Fanout<'a>(pub Vec<&'a mut dyn Listener>);

impl Listener for Fanout<'_> {
    fn on(&mut self, event: &RunEvent<'_>) -> std::io::Result<()> {
        for l in self.0.iter_mut() {
            l.on(event)?;
        }
        Ok(())
    }
}

/// A closure as a listener, for tests and small tools.
pub struct OnEvent<F>(pub F);

impl<F: FnMut(&RunEvent<'_>)> Listener for OnEvent<F> {
    fn on(&mut self, event: &RunEvent<'_>) -> std::io::Result<()> {
        (self.0)(event);
        Ok(())
    }
}
