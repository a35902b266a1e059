//! Dispatch: workers pull jobs from one queue, send them through the client and score the
//! answers. Everything that happens is an event ([`events::RunEvent`]) delivered in order,
//! from one task, to the run's listeners: the journal, the progress line, the verbose log
//! and the aggregator that builds the reports. The runner knows none of them.
//!
//! Invariant: a finished job is journaled as it arrives, so a killed run loses none of them;
//! the runner renders nothing and knows no report (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

mod agent;
pub mod batch;
pub mod budget;
pub mod events;
pub mod folder;
pub mod job_record;
pub mod journal;
mod lane;
pub mod lock;
pub mod mcp;
pub mod record;
mod scoring;
pub mod sequential;
pub mod source;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod tool_program;
mod workers;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use events::{Listener, RunEvent, RunTally};
pub use folder::RunDir;
pub use job_record::{JobRecord, JobStatus, StepLine};
pub use journal::Journal;
pub use lane::{Lane, RunOptions};

use lane::{Message, job_key};
use promptgauge_client::ClientEvent;
use promptgauge_suite::{Bench, Job};
use scoring::request_of;
use workers::Workers;

/// Runs `jobs` through their endpoints' clients (`lanes`, by `Job::endpoint`), telling
/// `listener` everything in order. `dispatch` stops new jobs from starting (first Ctrl-C);
/// the clients' stop tokens abort in-flight ones. A listener error (the journal cannot be
/// written) stops the run: what it cannot keep would be lost; it is returned in the tally.
pub async fn run(
    bench: Arc<Bench>,
    jobs: Vec<Job>,
    lanes: &[Lane],
    options: &RunOptions,
    dispatch: CancellationToken,
    listener: &mut dyn Listener,
) -> RunTally {
    let total = jobs.len();
    let mut tally = RunTally::default();
    let started = RunEvent::Started {
        planned: total + options.already,
        already: options.already,
    };
    if let Err(e) = listener.on(&started) {
        tally.journal_error = Some(e);
        tally.not_run = total;
        return tally;
    }
    let active = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let by_lane = by_lane(jobs, lanes.len());
    reserve_adopted(&bench, lanes, &by_lane, options);
    let start = Start {
        bench,
        options,
        tx,
        dispatch: dispatch.clone(),
        active: active.clone(),
    };
    let tasks = start.lanes(lanes, by_lane);
    let mut delivery = Delivery {
        listener,
        options,
        total,
        active,
        tally,
    };
    delivery.until_done(rx, tasks, lanes, &dispatch).await;
    let mut tally = delivery.tally;
    tally.not_run = total - tally.finished;
    let _ = delivery.listener.on(&RunEvent::Finished { tally: &tally });
    tally
}

/// The run's jobs, lane by lane (by `Job::endpoint`).
fn by_lane(jobs: Vec<Job>, lanes: usize) -> Vec<Vec<Job>> {
    let mut by_lane: Vec<Vec<Job>> = vec![Vec::new(); lanes];
    for job in jobs {
        if let Some(list) = by_lane.get_mut(usize::from(job.endpoint)) {
            list.push(job);
        }
    }
    by_lane
}

/// What every lane's tasks are started with.
struct Start<'a> {
    bench: Arc<Bench>,
    options: &'a RunOptions,
    tx: mpsc::UnboundedSender<Message>,
    dispatch: CancellationToken,
    active: Arc<AtomicUsize>,
}

impl Start<'_> {
    /// Starts each lane's tasks: its workers, asking the lane's sources (a batch lane's
    /// last source its provider's batch, `--batch`); each client's events are sent on the
    /// run's channel.
    fn lanes(self, lanes: &[Lane], by_lane: Vec<Vec<Job>>) -> tokio::task::JoinSet<()> {
        let mut tasks = tokio::task::JoinSet::new();
        for (lane, jobs) in lanes.iter().zip(by_lane) {
            // The client's events travel on the same channel as its workers' own messages,
            // so a job's attempts come after its start and before its end.
            let client_tx = self.tx.clone();
            lane.client.subscribe(
                Some(Arc::new(move |e| {
                    let _ = client_tx.send(Message::Client(e));
                })),
                self.options.attempts,
            );
            if lane.batch {
                let workers = self.workers(lane, jobs, Arc::new([]), lane.dispatch.child_token());
                tasks.spawn(batch::run_lane(workers));
                continue;
            }
            // As many workers as the lane's gate lets requests be in flight.
            let sources = workers::streamed_sources(lane, self.options);
            self.workers(lane, jobs, sources, lane.dispatch.clone())
                .spawn(lane.client.capacity(), &mut tasks);
        }
        tasks
    }

    fn workers(
        &self,
        lane: &Lane,
        jobs: Vec<Job>,
        sources: workers::Sources,
        halt: CancellationToken,
    ) -> Workers {
        Workers {
            bench: self.bench.clone(),
            sources,
            jobs: Arc::new(jobs),
            next: Arc::new(AtomicUsize::new(0)),
            active: self.active.clone(),
            lane: lane.clone(),
            tx: self.tx.clone(),
            dispatch: self.dispatch.clone(),
            halt,
            options: self.options.clone(),
            parking: Default::default(),
        }
    }
}

/// The run's one event loop: every message the lanes send, delivered to the listener in
/// order, and counted in the tally.
struct Delivery<'a> {
    listener: &'a mut dyn Listener,
    options: &'a RunOptions,
    total: usize,
    active: Arc<AtomicUsize>,
    tally: RunTally,
}

impl Delivery<'_> {
    /// Delivers messages until every task is done and the channel is empty. A message the
    /// listener cannot keep stops the run: nothing more is delivered.
    async fn until_done(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Message>,
        mut tasks: tokio::task::JoinSet<()>,
        lanes: &[Lane],
        dispatch: &CancellationToken,
    ) {
        let unsubscribe = || {
            for lane in lanes {
                lane.client.subscribe(None, false);
            }
        };
        let mut workers_done = false;
        loop {
            // The clients hold a sender while subscribed: once every worker is done, let
            // them go, and the channel ends after their last message.
            let message = tokio::select! {
                m = rx.recv() => match m {
                    Some(m) => m,
                    None => break,
                },
                _ = all_done(&mut tasks), if !workers_done => {
                    workers_done = true;
                    unsubscribe();
                    continue;
                }
            };
            if self.tally.journal_error.is_some() {
                continue;
            }
            if let Err(e) = self.deliver(message) {
                // Nothing more can be kept: stop sending, abandon what is in flight.
                dispatch.cancel();
                for lane in lanes {
                    lane.client.stop_token().cancel();
                }
                self.tally.journal_error = Some(e);
            }
        }
        while tasks.join_next().await.is_some() {}
        unsubscribe();
        while let Ok(m) = rx.try_recv() {
            if self.tally.journal_error.is_none()
                && let Err(err) = self.deliver(m)
            {
                self.tally.journal_error = Some(err);
            }
        }
    }

    /// One message, to the listener.
    fn deliver(&mut self, message: Message) -> std::io::Result<()> {
        let listener = &mut *self.listener;
        match message {
            Message::Started(job) => listener.on(&RunEvent::JobStarted { job: &job }),
            Message::Client(ClientEvent::Attempt(a)) => listener.on(&RunEvent::AttemptFinished(&a)),
            Message::Client(ClientEvent::Pool(p)) => listener.on(&RunEvent::PoolChanged(&p)),
            Message::Batch(b, ack) => {
                if b.step == batch::BatchStep::Left {
                    self.tally.batches_left += 1;
                }
                let kept = listener.on(&RunEvent::Batch(&b));
                if let Some(ack) = ack {
                    let _ = ack.send(kept.is_ok());
                }
                kept
            }
            Message::Step(step, ack) => {
                let kept = listener.on(&RunEvent::Step(&step));
                let _ = ack.send(kept.is_ok());
                kept
            }
            Message::Barrier(ack) => {
                let _ = ack.send(());
                Ok(())
            }
            Message::Finished(record) => self.finished(&record),
        }
    }

    /// A finished job's record, counted once its listeners have it: a record the journal
    /// could not keep did not finish, as far as anyone will ever know.
    fn finished(&mut self, record: &JobRecord) -> std::io::Result<()> {
        let tally = &mut self.tally;
        self.listener.on(&RunEvent::JobFinished {
            record,
            done: self.options.already + tally.finished + 1,
            total: self.total + self.options.already,
            in_flight: self.active.load(Ordering::SeqCst),
        })?;
        tally.finished += 1;
        match record.status {
            JobStatus::Graded => tally.graded += 1,
            JobStatus::Failed => tally.failed += 1,
            JobStatus::Filtered => tally.filtered += 1,
        }
        Ok(())
    }
}

/// Waits for every worker.
async fn all_done(tasks: &mut tokio::task::JoinSet<()>) {
    while tasks.join_next().await.is_some() {}
}

/// `--budget` on a resume: the jobs in batches the journal holds open are paid for
/// already, so they are held whatever the budget says, and before any lane starts: what is
/// sent after them, by a streaming lane beside a batching one too, counts them
/// (docs/guide/budget.md, "Batches").
fn reserve_adopted(bench: &Bench, lanes: &[Lane], by_lane: &[Vec<Job>], options: &RunOptions) {
    if options.budget.is_none() || options.batches.is_empty() {
        return;
    }
    for (lane, jobs) in lanes.iter().zip(by_lane).filter(|(l, _)| l.batch) {
        let open: std::collections::HashSet<&str> = batch::open_batches(&options.batches)
            .filter(|b| b.endpoint == lane.name)
            .flat_map(|b| b.keys.iter().map(String::as_str))
            .collect();
        for job in jobs {
            let id = lane.client.batch_custom_id(&job_key(job, options));
            if !open.contains(id.as_str()) {
                continue;
            }
            if let Ok(rendered) = request_of(bench, job, lane, options) {
                options.reserve(bench, job, &rendered, lane);
            }
        }
    }
}

/// The job (plan position) whose idempotency key is `key` in run `run_id`, and its resend
/// round — also for one of an agent loop's later steps (`…-stepN`, docs/guide/tools.md);
/// `None` for a key of another form (another run's, a judge call's `…-judge-0`).
pub fn job_of_key(key: &str, run_id: &str) -> Option<(usize, Option<u32>)> {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let rest = key
        .strip_prefix("pg-")?
        .strip_prefix(run_id)?
        .strip_prefix('-')?;
    let rest = match rest.rsplit_once("-step") {
        Some((r, n)) if digits(n) => r,
        _ => rest,
    };
    let (index, round) = match rest.rsplit_once("-resend") {
        Some((i, r)) if digits(r) => (i, r.parse().ok()),
        _ => (rest, None),
    };
    Some((index.parse().ok()?, round))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_reads_back_as_its_job_round_and_step() {
        let of = |k: &str| super::job_of_key(k, "bench-20261205T1500Z-ab12");
        assert_eq!(of("pg-bench-20261205T1500Z-ab12-7"), Some((7, None)));
        assert_eq!(
            of("pg-bench-20261205T1500Z-ab12-7-resend2"),
            Some((7, Some(2)))
        );
        assert_eq!(of("pg-bench-20261205T1500Z-ab12-7-step3"), Some((7, None)));
        assert_eq!(
            of("pg-bench-20261205T1500Z-ab12-7-resend1-step2"),
            Some((7, Some(1)))
        );
        assert_eq!(of("pg-bench-20261205T1500Z-ab12-7-judge-0"), None);
        assert_eq!(of("pg-other-run-7"), None);
    }
}
