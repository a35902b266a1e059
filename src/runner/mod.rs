//! Dispatch: workers pull jobs from one queue, send them through the client and score the
//! answers. Everything that happens is an event ([`events::RunEvent`]) delivered in order,
//! from one task, to the run's listeners: the journal, the progress line, the verbose log
//! and the aggregator that builds the reports. The runner knows none of them.

pub mod batch;
pub mod budget;
pub mod events;
pub mod folder;
pub mod job_record;
pub mod journal;
mod lane;
pub mod lock;
pub mod record;
mod scoring;
pub mod sequential;
pub mod source;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use events::{Listener, RunEvent, RunTally};
pub use folder::RunDir;
pub use job_record::{JobRecord, JobStatus};
pub use journal::Journal;
pub use lane::{Lane, RunOptions};

use crate::client::ClientEvent;
use crate::suite::{Bench, Job};
use lane::{Message, job_key};
use scoring::{request_of, run_job};

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
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let stop_all = || {
        for lane in lanes {
            lane.client.stop_token().cancel();
        }
    };
    let mut tasks = tokio::task::JoinSet::new();
    let mut by_lane: Vec<Vec<Job>> = vec![Vec::new(); lanes.len()];
    for job in jobs {
        if let Some(list) = by_lane.get_mut(usize::from(job.endpoint)) {
            list.push(job);
        }
    }
    reserve_adopted(&bench, lanes, &by_lane, options);
    for (lane, jobs) in lanes.iter().zip(by_lane) {
        // The client's events travel on the same channel as its workers' own messages, so
        // a job's attempts come after its start and before its end.
        let client_tx = tx.clone();
        lane.client.subscribe(
            Some(Arc::new(move |e| {
                let _ = client_tx.send(Message::Client(e));
            })),
            options.attempts,
        );
        if lane.batch {
            let driver = batch::Driver {
                bench: bench.clone(),
                lane: lane.clone(),
                jobs,
                options: options.clone(),
                tx: tx.clone(),
                dispatch: dispatch.clone(),
                active: active.clone(),
            };
            tasks.spawn(driver.drive());
            continue;
        }
        let workers = Workers {
            bench: bench.clone(),
            sources: sources_of(lane, options),
            jobs: Arc::new(jobs),
            next: Arc::new(AtomicUsize::new(0)),
            active: active.clone(),
            lane: lane.clone(),
            tx: tx.clone(),
            dispatch: dispatch.clone(),
            options: options.clone(),
        };
        let count = lane.client.capacity().max(1).min(workers.jobs.len().max(1));
        for _ in 0..count {
            tasks.spawn(workers.clone().work());
        }
    }
    drop(tx);
    let mut deliver = |message: Message, tally: &mut RunTally| -> std::io::Result<()> {
        match message {
            Message::Started(job) => listener.on(&RunEvent::JobStarted { job: &job }),
            Message::Client(ClientEvent::Attempt(a)) => listener.on(&RunEvent::AttemptFinished(&a)),
            Message::Client(ClientEvent::Pool(p)) => listener.on(&RunEvent::PoolChanged(&p)),
            Message::Batch(b, ack) => {
                if b.step == batch::BatchStep::Left {
                    tally.batches_left += 1;
                }
                let kept = listener.on(&RunEvent::Batch(&b));
                if let Some(ack) = ack {
                    let _ = ack.send(kept.is_ok());
                }
                kept
            }
            Message::Barrier(ack) => {
                let _ = ack.send(());
                Ok(())
            }
            Message::Finished(record) => {
                listener.on(&RunEvent::JobFinished {
                    record: &record,
                    done: options.already + tally.finished + 1,
                    total: total + options.already,
                    in_flight: active.load(Ordering::SeqCst),
                })?;
                // Counted once its listeners have it: a record the journal could not keep
                // did not finish, as far as anyone will ever know.
                tally.finished += 1;
                match record.status {
                    JobStatus::Graded => tally.graded += 1,
                    JobStatus::Failed => tally.failed += 1,
                    JobStatus::Filtered => tally.filtered += 1,
                }
                Ok(())
            }
        }
    };
    let unsubscribe = || {
        for lane in lanes {
            lane.client.subscribe(None, false);
        }
    };
    let mut workers_done = false;
    loop {
        // The clients hold a sender while subscribed: once every worker is done, let them
        // go, and the channel ends after their last message.
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
        if tally.journal_error.is_some() {
            continue;
        }
        if let Err(e) = deliver(message, &mut tally) {
            // Nothing more can be kept: stop sending, abandon what is in flight.
            dispatch.cancel();
            stop_all();
            tally.journal_error = Some(e);
        }
    }
    while tasks.join_next().await.is_some() {}
    unsubscribe();
    while let Ok(m) = rx.try_recv() {
        if tally.journal_error.is_none()
            && let Err(err) = deliver(m, &mut tally)
        {
            tally.journal_error = Some(err);
        }
    }
    tally.not_run = total - tally.finished;
    let _ = listener.on(&RunEvent::Finished { tally: &tally });
    tally
}

/// Where a lane's answers come from: the cache first (a paid answer is never bought again),
/// then the run's own sources, then the lane's streamed client, which always answers.
fn sources_of(lane: &Lane, options: &RunOptions) -> Arc<[Arc<dyn source::AnswerSource>]> {
    let mut sources: Vec<Arc<dyn source::AnswerSource>> = Vec::new();
    if let Some(cache) = &options.cache {
        sources.push(Arc::new(source::Cached {
            cache: cache.clone(),
            endpoint: lane.cache_key.clone(),
        }));
    }
    sources.extend(options.sources.iter().cloned());
    sources.push(Arc::new(source::Live(lane.client.clone())));
    sources.into()
}

/// One lane's workers: each pulls the lane's next job until none is left or the run stops.
#[derive(Clone)]
struct Workers {
    bench: Arc<Bench>,
    sources: Arc<[Arc<dyn source::AnswerSource>]>,
    jobs: Arc<Vec<Job>>,
    next: Arc<AtomicUsize>,
    active: Arc<AtomicUsize>,
    lane: Lane,
    tx: mpsc::UnboundedSender<Message>,
    dispatch: CancellationToken,
    options: RunOptions,
}

impl Workers {
    async fn work(self) {
        let (dispatch, options) = (&self.dispatch, &self.options);
        let stop = self.lane.client.stop_token();
        let lane = self.lane.dispatch.clone();
        while !dispatch.is_cancelled()
            && !stop.is_cancelled()
            && !lane.is_cancelled()
            && !options.out_of_budget()
        {
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(job) = self.jobs.get(i) else { break };
            if let Some((h, per_case)) = &options.horizon
                && !wait_for_horizon(h, job.index / (*per_case).max(1), dispatch, &stop).await
            {
                break;
            }
            if options.decided(&self.bench, job) {
                continue;
            }
            let record = match request_of(&self.bench, job, &self.lane, options) {
                Ok(request) => {
                    if !options.afford(&self.bench, job, &request, &self.lane) {
                        break;
                    }
                    self.active.fetch_add(1, Ordering::SeqCst);
                    let _ = self.tx.send(Message::Started(*job));
                    let record = run_job(
                        &self.bench,
                        job,
                        &request,
                        &self.sources,
                        &self.lane,
                        options,
                    )
                    .await;
                    self.active.fetch_sub(1, Ordering::SeqCst);
                    record
                }
                Err(failed) => {
                    let _ = self.tx.send(Message::Started(*job));
                    Some(*failed)
                }
            };
            let Some(record) = record else {
                break;
            };
            options.settle(&record);
            if self.tx.send(Message::Finished(Box::new(record))).is_err() {
                break;
            }
        }
    }
}

/// `--until-decided`: waits until the tests let a job at case `position` go; `false` when
/// the run stopped meanwhile.
async fn wait_for_horizon(
    h: &crate::runner::sequential::Horizon,
    position: usize,
    dispatch: &CancellationToken,
    stop: &CancellationToken,
) -> bool {
    loop {
        let waiting = h.notify.notified();
        tokio::pin!(waiting);
        waiting.as_mut().enable();
        if position <= h.limit.load(Ordering::SeqCst)
            || dispatch.is_cancelled()
            || stop.is_cancelled()
        {
            break;
        }
        tokio::select! {
            _ = waiting => {}
            _ = dispatch.cancelled() => {}
            _ = stop.cancelled() => {}
        }
    }
    !(dispatch.is_cancelled() || stop.is_cancelled())
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

/// The job (plan position) whose idempotency key is `key` in run `run_id`, resends
/// included; `None` for a key of another form.
pub fn job_of_key(key: &str, run_id: &str) -> Option<usize> {
    let rest = key
        .strip_prefix("pg-")?
        .strip_prefix(run_id)?
        .strip_prefix('-')?;
    let index = rest.split_once("-resend").map_or(rest, |(i, _)| i);
    index.parse().ok()
}
