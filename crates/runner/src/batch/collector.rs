//! A batch lane's collector: what it holds (the jobs its workers handed it and no record
//! has yet, the batch being filled, the batches the provider holds) and the steps every
//! part of it takes the same way — a journaled line waited for, a record sent, a refused
//! key, a sleep that a stop ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::record::{BatchRecord, BatchSettings};
use crate::job_record::JobRecord;
use crate::lane::{Lane, Message, RunOptions, job_key};
use crate::scoring::failed_record;
use crate::workers::Parking;
use promptgauge_client::batch::{BatchError, BatchState, Batches};
use promptgauge_suite::{Bench, Job};

/// A batch the provider holds for this lane, until it ends and its results are read.
pub(super) struct Open {
    pub name: String,
    pub id: String,
    /// Its requests' `custom_id`s still without a record.
    pub keys: Vec<String>,
    /// Its state when last polled.
    pub last: Option<BatchState>,
    /// One of the batches that may be `name` (an API that keeps no metadata: found by size
    /// and time): its results say whether it is.
    pub guessed: bool,
}

/// Why the lane stopped before every batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Halt {
    /// Ctrl-C, SIGTERM, a refused key elsewhere, or an outage: stop at once.
    Stopped,
    /// The wall-clock limit passed.
    OutOfTime,
    /// The journal could not keep a batch's line: nothing more may depend on it.
    Journal,
}

/// The requests gathered for the next batch: their lines, one after another, and each
/// one's `custom_id`, job and where its line ends.
#[derive(Default)]
pub(super) struct Filling {
    pub lines: Vec<u8>,
    pub jobs: Vec<(String, Job, usize)>,
}

impl Filling {
    pub(super) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub(super) fn push(&mut self, custom_id: String, job: Job, line: &[u8]) {
        self.lines.extend_from_slice(line);
        self.jobs.push((custom_id, job, self.lines.len()));
    }

    /// Keeps only the requests `keep` says yes to; the others are returned.
    pub(super) fn retain(&mut self, keep: impl Fn(&Job) -> bool) -> Vec<(String, Job)> {
        let old = std::mem::take(self);
        let mut dropped = Vec::new();
        let mut start = 0;
        for (id, job, end) in old.jobs {
            if keep(&job) {
                self.push(id, job, &old.lines[start..end]);
            } else {
                dropped.push((id, job));
            }
            start = end;
        }
        dropped
    }
}

/// One batch lane's collector: it gathers the jobs the lane's workers hand its
/// `BatchSource`, submits them in batches, polls them, and records their answers.
pub(super) struct Collector {
    pub bench: Arc<Bench>,
    pub lane: Lane,
    pub options: RunOptions,
    pub tx: mpsc::UnboundedSender<Message>,
    pub dispatch: CancellationToken,
    /// Stops the lane's workers when the batches stop.
    pub halt: CancellationToken,
    pub active: Arc<AtomicUsize>,
    pub parking: Arc<Parking>,
    pub api: Batches,
    pub settings: BatchSettings,
    /// Every job handed over (or adopted) by its `custom_id`, until it has a record.
    pub waiting: HashMap<String, Job>,
    /// The next batch, being filled.
    pub filling: Filling,
    /// The batches the provider holds.
    pub open: Vec<Open>,
    /// The wait before the open batches are looked at again; it doubles while none ends.
    pub wait: Duration,
    pub next_poll: tokio::time::Instant,
    /// When the batches still running are left to a resume (once every job was handed
    /// over and gathered into a batch: nothing is left unsubmitted for lack of time).
    pub deadline: tokio::time::Instant,
    /// The workers are done: every job was handed over.
    pub all_handed: bool,
}

impl Collector {
    /// The first wait before asking the batch API again (it doubles, up to a minute): a
    /// second, or the polling interval when that is shorter.
    pub(super) fn first_wait(&self) -> Duration {
        self.settings.poll.min(Duration::from_secs(1))
    }

    pub(super) fn custom_id(&self, job: &Job) -> String {
        self.lane
            .client
            .batch_custom_id(&job_key(job, &self.options))
    }

    pub(super) fn stopped(&self) -> bool {
        self.dispatch.is_cancelled()
            || self.lane.dispatch.is_cancelled()
            || self.lane.client.stop_token().is_cancelled()
    }

    /// Waits until the run stops (a signal, a refused key, an outage).
    pub(super) async fn until_stopped(&self) {
        let stop = self.lane.client.stop_token();
        tokio::select! {
            _ = self.dispatch.cancelled() => {}
            _ = self.lane.dispatch.cancelled() => {}
            _ = stop.cancelled() => {}
        }
    }

    /// A refused key (401, 403) stops the whole run at once, as a streamed job's would.
    pub(super) fn refused(&self, e: &BatchError) -> bool {
        let refused = matches!(
            e,
            BatchError::Http {
                status: 401 | 403,
                ..
            }
        );
        if refused {
            self.lane.client.stop_token().cancel();
        }
        refused
    }

    /// Sleeps `d` unless the run stops first; `false` when it stopped.
    pub(super) async fn sleep(&self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = self.until_stopped() => false,
        }
    }

    /// Sends a message to the event loop and waits until its listeners have it (the
    /// journal wrote the line); `Halt::Journal` when they could not.
    pub(super) async fn journaled(&self, record: BatchRecord) -> Result<(), Halt> {
        let (ack, heard) = oneshot::channel();
        let sent = self
            .tx
            .send(Message::Batch(Box::new(record), Some(ack)))
            .is_ok();
        match (sent, heard.await) {
            (true, Ok(true)) => Ok(()),
            _ => Err(Halt::Journal),
        }
    }

    /// Waits until the event loop has delivered everything sent before.
    pub(super) async fn barrier(&self) {
        barrier(&self.tx).await;
    }

    /// Sends a handed job's record to the event loop: it is no longer in flight.
    pub(super) fn finished(&self, record: JobRecord) {
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.options.settle(&record);
        let _ = self.tx.send(Message::Finished(Box::new(record)));
    }

    /// A handed job without an answer, as its failed record (with the batch it was in,
    /// if any).
    pub(super) fn fail(
        &self,
        job: &Job,
        result: promptgauge_client::JobResult,
        batch: Option<&str>,
    ) {
        let error = result.failure.clone().unwrap_or_else(|| "no answer".into());
        let mut r = failed_record(&self.bench, job, error, Some(result));
        r.endpoint = self.lane.name.clone();
        r.batch = batch.map(String::from);
        r.resent = self.options.resend.get(&job.index).copied().unwrap_or(0);
        self.finished(r);
    }

    /// Fails the jobs of `keys` still without a record.
    pub(super) fn fail_rest(
        &mut self,
        keys: &[String],
        batch: Option<&str>,
        status: Option<u16>,
        why: &str,
    ) {
        for key in keys {
            if let Some(job) = self.waiting.remove(key) {
                let result = self.lane.client.batch_failure(status, why);
                self.fail(&job, result, batch);
            }
        }
    }
}

/// Waits until the event loop has delivered everything sent on `tx` before.
pub(super) async fn barrier(tx: &mpsc::UnboundedSender<Message>) {
    let (ack, heard) = oneshot::channel();
    if tx.send(Message::Barrier(ack)).is_ok() {
        let _ = heard.await;
    }
}
