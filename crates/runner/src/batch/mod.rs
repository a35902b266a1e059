//! `--batch`: a lane whose answers come from its endpoint's batch API instead of streamed
//! (docs/guide/batch.md). The provider's batch is the lane's last answer source
//! ([`BatchSource`], where a streaming lane has its streamed client): the lane's workers
//! run as they do in any lane — the sequential tests' horizon, the budget's hold, the
//! request rendered, the held sources (the cache, the run's own) asked first — and hand
//! the batch source what none of those answered. The source's collector fills a batch up
//! to the provider's limits and creates it when it is full or when every worker waits
//! (`submit.rs`: every submission journaled before anything depends on it), polls the
//! batches with a growing wait until they end or the wall-clock limit passes, and records
//! their answers by the same function as streamed ones (`results.rs`). A killed run's
//! `--resume` adopts what it had submitted and never pays for a job twice (`adopt.rs`).
//!
//! With `--until-decided`, jobs go out in waves: the workers take the cases up to the
//! sequential tests' horizon and wait; when all wait, what they handed over is one wave,
//! drawn after every record before it has reached the tests, so a variant decided
//! meanwhile is not in it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

mod adopt;
mod collector;
mod record;
mod results;
mod submit;

pub use record::BatchSettings;
pub use record::{BatchRecord, BatchStep, open_batches};

use super::source::{AnswerSource, Ask, SourceFuture, SourceReply};
use super::workers::Workers;
use collector::{Collector, Halt};
use promptgauge_client::Client;
use promptgauge_suite::Job;
use submit::Want;

/// A provider's batch as a lane's answer source: it takes every job it is asked about and
/// answers later, when the job's batch ends.
struct BatchSource {
    client: Arc<Client>,
    wants: mpsc::Sender<Want>,
    idle: Arc<Notify>,
}

impl AnswerSource for BatchSource {
    fn answer<'a>(&'a self, ask: &'a Ask<'a>) -> SourceFuture<'a> {
        let custom_id = self.client.batch_custom_id(&ask.request.idempotency_key);
        let mut line = serde_json::to_vec(&self.client.batch_line(ask.request)).unwrap_or_default();
        line.push(b'\n');
        let want = Want {
            custom_id,
            job: ask.job,
            line,
        };
        Box::pin(async move {
            match self.wants.send(want).await {
                Ok(()) => SourceReply::Later,
                // The lane's batches stopped: nothing more is taken.
                Err(_) => SourceReply::Pass,
            }
        })
    }

    fn idle(&self) {
        self.idle.notify_one();
    }
}

/// Runs a batch lane: adopts what a resumed run had submitted, then starts the lane's
/// workers (`workers`, with no sources yet) on the rest, with the batch as their last
/// source, and collects until every job handed over has its record or the lane stops.
pub(super) async fn run_lane(mut workers: Workers) {
    let mut collector = collector_of(&workers);
    let adopted = match collector.adopt(&workers.jobs).await {
        Ok(adopted) => adopted,
        Err(_) => return,
    };
    if !adopted.is_empty() {
        let rest = workers
            .jobs
            .iter()
            .filter(|j| !adopted.contains(&j.index))
            .copied()
            .collect();
        workers.jobs = Arc::new(rest);
    }
    // Bounded: the workers go no faster than batches are filled.
    let (wants, taken) = mpsc::channel(1024);
    let idle = Arc::new(Notify::new());
    let mut sources = workers.lane.held_sources(&workers.options);
    sources.push(Arc::new(BatchSource {
        client: workers.lane.client.clone(),
        wants,
        idle: idle.clone(),
    }));
    workers.sources = sources.into();
    // One worker: the jobs are handed over in the plan's order, so each batch holds the
    // plan's next jobs, and its answers come back in the order the tests take them.
    let mut tasks = tokio::task::JoinSet::new();
    workers.spawn(1, &mut tasks);
    collector.collect(taken, &idle).await;
    while tasks.join_next().await.is_some() {}
}

fn collector_of(w: &Workers) -> Collector {
    let settings = w.options.batch.clone().unwrap_or_default();
    let now = tokio::time::Instant::now();
    Collector {
        bench: w.bench.clone(),
        lane: w.lane.clone(),
        options: w.options.clone(),
        tx: w.tx.clone(),
        dispatch: w.dispatch.clone(),
        halt: w.halt.clone(),
        active: w.active.clone(),
        parking: w.parking.clone(),
        api: w.lane.client.batches(),
        wait: settings.poll,
        next_poll: now,
        deadline: now + settings.wait,
        settings,
        all_handed: false,
        waiting: Default::default(),
        filling: Default::default(),
        open: Vec::new(),
    }
}

impl Collector {
    /// Takes what the workers hand over, creates batches, polls them and records their
    /// answers, until the workers are done and every batch has ended — or the lane stops,
    /// when its workers are stopped too.
    async fn collect(&mut self, mut taken: mpsc::Receiver<Want>, idle: &Notify) {
        let mut more = true;
        let mut wants = Vec::with_capacity(256);
        let halt = loop {
            if self.stopped() {
                break Some(Halt::Stopped);
            }
            if !more && self.filling.is_empty() && self.open.is_empty() {
                break None;
            }
            let step = tokio::select! {
                _ = self.until_stopped() => Err(Halt::Stopped),
                // Many at a time: a job handed over costs the loop one push, not one turn.
                n = taken.recv_many(&mut wants, 256), if more => match n {
                    // Every worker is done: what is gathered goes out.
                    0 => {
                        more = false;
                        self.all_handed = true;
                        self.send_gathered().await
                    }
                    _ => self.take_all(&mut wants).await,
                },
                _ = idle.notified(), if more => self.on_idle(&mut taken).await,
                _ = tokio::time::sleep_until(self.next_poll), if !self.open.is_empty() => {
                    self.poll_round().await
                }
            };
            if let Err(h) = step {
                break Some(h);
            }
            if let Err(h) = self.after_step(more, &mut taken).await {
                break Some(h);
            }
        };
        if let Some(h) = halt {
            self.halt.cancel();
            self.let_go_unsent(&mut taken);
            self.halted(h).await;
        }
    }

    /// After each step. With every job handed over, what was gathered again (a disowned
    /// batch's jobs) goes out as a wave's would. With `--until-decided` and nothing out,
    /// the workers may all be waiting on a horizon nothing else will move (an answer
    /// another lane will never send, a disowned batch's jobs gathered again): what they
    /// handed over goes out, or the horizon moves, as when they said they were idle.
    async fn after_step(
        &mut self,
        more: bool,
        taken: &mut mpsc::Receiver<Want>,
    ) -> Result<(), Halt> {
        if !more {
            return match self.filling.is_empty() {
                true => Ok(()),
                false => self.send_gathered().await,
            };
        }
        if self.options.horizon.is_some() && self.open.is_empty() {
            return self.on_idle(taken).await;
        }
        Ok(())
    }

    /// The lane stopped: the jobs gathered or still in the channel are never sent, so
    /// their holds are let go and they are no longer in flight.
    fn let_go_unsent(&mut self, taken: &mut mpsc::Receiver<Want>) {
        taken.close();
        let mut unsent: Vec<Job> = std::mem::take(&mut self.filling)
            .jobs
            .into_iter()
            .map(|(_, job, _)| job)
            .collect();
        while let Ok(want) = taken.try_recv() {
            unsent.push(want.job);
        }
        for job in unsent {
            self.waiting.remove(&self.custom_id(&job));
            self.options.release(&job);
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Every worker waits: what they handed over goes out as one batch (a wave, with
    /// `--until-decided`), unless the records sent before let a worker go on.
    async fn on_idle(&mut self, taken: &mut mpsc::Receiver<Want>) -> Result<(), Halt> {
        if self.options.horizon.is_some() && !self.open.is_empty() {
            // A wave goes once every batch out has ended and its records reached the
            // tests: a decision they bring keeps the next wave from asking for what it
            // decided. The step that empties `open` looks again.
            return Ok(());
        }
        let limit = match &self.options.horizon {
            Some((h, _)) => {
                self.barrier().await;
                h.limit.load(Ordering::SeqCst)
            }
            None => usize::MAX,
        };
        if !self.parking.still(limit) {
            // The records let some worker go on: it says when all wait again.
            return Ok(());
        }
        while let Ok(want) = taken.try_recv() {
            self.take(want).await?;
        }
        self.send_gathered().await
    }

    /// Creates the batch being filled, but for the jobs whose variant the tests decided
    /// meanwhile (every record sent before has reached them first). With nothing out and
    /// nothing to send, the tests wait on records that will not come: the next cases may
    /// go.
    async fn send_gathered(&mut self) -> Result<(), Halt> {
        if self.options.horizon.is_some() {
            self.barrier().await;
        }
        self.let_go_decided();
        if self.filling.is_empty() && self.open.is_empty() {
            self.move_horizon();
        }
        self.cut().await
    }

    /// `--until-decided`: the jobs gathered whose variant the tests decided meanwhile are
    /// never sent: their holds are let go, and they are no longer in flight.
    fn let_go_decided(&mut self) {
        if self.options.skip.is_none() {
            return;
        }
        let (bench, options) = (&self.bench, &self.options);
        for (key, job) in self.filling.retain(|j| !options.decided(bench, j)) {
            self.waiting.remove(&key);
            self.options.release(&job);
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// `--until-decided`, with nothing out and every worker waiting beyond the horizon:
    /// lets the nearest case they wait for go.
    fn move_horizon(&self) {
        if let (Some((h, _)), Some(next)) = (&self.options.horizon, self.parking.nearest())
            && next > h.limit.load(Ordering::SeqCst)
        {
            h.limit.store(next + h.ahead, Ordering::SeqCst);
            h.notify.notify_waiters();
        }
    }

    /// The lane stopped before its batches ended: with `--batch-cancel` they are
    /// cancelled (unless the journal failed); out of time, each is journaled as left to a
    /// resume.
    async fn halted(&self, halt: Halt) {
        if halt != Halt::Journal && self.settings.cancel_on_stop {
            // Only batches known to be this run's: a candidate may be another's.
            for batch in self.open.iter().filter(|b| !b.guessed) {
                // Best effort: what the provider ran is adopted by a resume all the same.
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), self.api.cancel(&batch.id)).await;
            }
        }
        if halt == Halt::OutOfTime {
            let mut said = std::collections::HashSet::new();
            for batch in &self.open {
                if !said.insert(&batch.name) {
                    continue;
                }
                let mut record =
                    BatchRecord::new(BatchStep::Left, &batch.name, self.lane.name.as_ref());
                // A candidate's id is not journaled: it may be another's, and a resume
                // looks for the batch again.
                record.id = (!batch.guessed).then(|| batch.id.clone());
                let _ = self
                    .tx
                    .send(super::lane::Message::Batch(Box::new(record), None));
            }
        }
    }
}
