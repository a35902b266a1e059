//! A lane's workers: each pulls the lane's next job, waits for the sequential tests'
//! horizon, renders it, holds its budget and asks the lane's answer sources; a job answered
//! now is recorded, one a source took (a provider batch) is recorded by that source later.
//! Streaming and batch lanes run the same workers: only their last source differs. When
//! every worker waits (on the horizon, or has no job left), the sources are told
//! ([`Parking`]), so a source that gathers jobs sends what it holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent::{AgentLoop, run_loop};
use super::lane::{Lane, Message, RunOptions};
use super::scoring::{JobEnd, request_of, run_job};
use super::source::{self, AnswerSource};
use promptgauge_suite::{Bench, Job};

/// A lane's sources, in the order they are asked.
pub(super) type Sources = Arc<[Arc<dyn AnswerSource>]>;

/// Where a streaming lane's answers come from: the answers already held (the cache, the
/// run's own sources), then the lane's streamed client, which always answers.
pub(super) fn streamed_sources(lane: &Lane, options: &RunOptions) -> Sources {
    let mut sources = lane.held_sources(options);
    sources.push(Arc::new(source::Live(lane.client.clone())));
    sources.into()
}

/// One lane's workers: each pulls the lane's next job until none is left or the run stops.
#[derive(Clone)]
pub(super) struct Workers {
    pub bench: Arc<Bench>,
    pub sources: Sources,
    pub jobs: Arc<Vec<Job>>,
    pub next: Arc<AtomicUsize>,
    pub active: Arc<AtomicUsize>,
    pub lane: Lane,
    pub tx: mpsc::UnboundedSender<Message>,
    /// The run's dispatch: the first Ctrl-C stops every lane's workers.
    pub dispatch: CancellationToken,
    /// This lane's workers only: an outage at the endpoint, or its batches stopped.
    pub halt: CancellationToken,
    pub options: RunOptions,
    pub parking: Arc<Parking>,
}

impl Workers {
    /// Starts up to `most` workers (one a job at most, at least one when there are jobs)
    /// into `tasks`.
    pub(super) fn spawn(self, most: usize, tasks: &mut tokio::task::JoinSet<()>) {
        let count = most
            .max(1)
            .min(self.jobs.len())
            .max(usize::from(!self.jobs.is_empty()));
        self.parking.started(count);
        for _ in 0..count {
            tasks.spawn(self.clone().work());
        }
        if count == 0 {
            // No worker will ever say the lane is idle: say it now.
            self.parking.idle(&self.sources);
        }
    }

    fn stopped(&self) -> bool {
        self.dispatch.is_cancelled()
            || self.halt.is_cancelled()
            || self.lane.client.stop_token().is_cancelled()
            || self.options.out_of_budget()
    }

    async fn work(self) {
        while !self.stopped() {
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(job) = self.jobs.get(i) else { break };
            if !self.wait_for_horizon(job).await {
                break;
            }
            if self.options.decided(&self.bench, job) {
                continue;
            }
            let record = match request_of(&self.bench, job, &self.lane, &self.options) {
                Ok(request) => {
                    if !self.options.afford(&self.bench, job, &request, &self.lane) {
                        // The budget is reached: workers of every lane waiting on the
                        // tests' horizon look again, and stop.
                        if let Some((h, _)) = &self.options.horizon {
                            h.notify.notify_waiters();
                        }
                        break;
                    }
                    self.active.fetch_add(1, Ordering::SeqCst);
                    let _ = self.tx.send(Message::Started(*job));
                    let (bench, sources) = (&self.bench, &self.sources);
                    let (lane, options) = (&self.lane, &self.options);
                    // A bench with tools runs each job as an agent loop of requests.
                    let end = if !bench.has_tools() {
                        run_job(bench, job, &request, sources, lane, options).await
                    } else {
                        let agent = AgentLoop {
                            bench,
                            job,
                            sources,
                            lane,
                            options,
                            tx: &self.tx,
                        };
                        run_loop(&agent, &request).await
                    };
                    match end {
                        // Its source records it, and counts it out of the jobs in flight.
                        JobEnd::Later => continue,
                        JobEnd::Record(record) => {
                            self.active.fetch_sub(1, Ordering::SeqCst);
                            record
                        }
                        JobEnd::Stopped => {
                            self.active.fetch_sub(1, Ordering::SeqCst);
                            if self.lane.batch {
                                // Never handed over: its batch lane had stopped.
                                self.options.release(job);
                            }
                            break;
                        }
                    }
                }
                Err(failed) => {
                    let _ = self.tx.send(Message::Started(*job));
                    failed
                }
            };
            self.options.settle(&record);
            if self.tx.send(Message::Finished(record)).is_err() {
                break;
            }
        }
        self.parking.exited(&self.sources);
    }

    /// `--until-decided`: waits until the tests let `job`'s case go; `false` when the run
    /// stopped meanwhile. A worker that waits is parked, so the lane knows when every
    /// worker waits.
    async fn wait_for_horizon(&self, job: &Job) -> bool {
        let Some((h, per_case)) = &self.options.horizon else {
            return true;
        };
        let position = job.index / (*per_case).max(1);
        if position <= h.limit.load(Ordering::SeqCst) {
            return true;
        }
        let stop = self.lane.client.stop_token();
        self.parking.park(position, &self.sources);
        loop {
            let waiting = h.notify.notified();
            tokio::pin!(waiting);
            waiting.as_mut().enable();
            if position <= h.limit.load(Ordering::SeqCst)
                || self.dispatch.is_cancelled()
                || self.halt.is_cancelled()
                || stop.is_cancelled()
                || self.options.out_of_budget()
            {
                break;
            }
            tokio::select! {
                _ = waiting => {}
                _ = self.dispatch.cancelled() => {}
                _ = self.halt.cancelled() => {}
                _ = stop.cancelled() => {}
            }
        }
        self.parking.unpark(position);
        !(self.dispatch.is_cancelled()
            || self.halt.is_cancelled()
            || stop.is_cancelled()
            || self.options.out_of_budget())
    }
}

/// Where a lane's workers are: how many still run, and the case positions those that wait
/// on the sequential tests' horizon wait for.
#[derive(Default)]
pub(super) struct Parking {
    state: Mutex<Parked>,
}

#[derive(Default)]
struct Parked {
    live: usize,
    waiting_at: Vec<usize>,
}

impl Parking {
    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn started(&self, count: usize) {
        self.lock().live += count;
    }

    fn park(&self, position: usize, sources: &Sources) {
        let idle = {
            let mut p = self.lock();
            p.waiting_at.push(position);
            p.waiting_at.len() == p.live
        };
        if idle {
            self.idle(sources);
        }
    }

    fn unpark(&self, position: usize) {
        let mut p = self.lock();
        if let Some(i) = p.waiting_at.iter().position(|&at| at == position) {
            p.waiting_at.swap_remove(i);
        }
    }

    fn exited(&self, sources: &Sources) {
        let idle = {
            let mut p = self.lock();
            p.live = p.live.saturating_sub(1);
            p.waiting_at.len() == p.live
        };
        if idle {
            self.idle(sources);
        }
    }

    fn idle(&self, sources: &Sources) {
        for s in sources.iter() {
            s.idle();
        }
    }

    /// Whether no worker can go on until the horizon passes `limit`: each has exited or
    /// waits for a case beyond it.
    pub(super) fn still(&self, limit: usize) -> bool {
        let p = self.lock();
        p.waiting_at.len() == p.live && p.waiting_at.iter().all(|&at| at > limit)
    }

    /// The nearest case a waiting worker waits for.
    pub(super) fn nearest(&self) -> Option<usize> {
        self.lock().waiting_at.iter().copied().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Told(AtomicUsize);

    impl AnswerSource for Told {
        fn answer<'a>(&'a self, _: &'a source::Ask<'a>) -> source::SourceFuture<'a> {
            Box::pin(async { source::SourceReply::Pass })
        }
        fn idle(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_sources_hear_when_the_last_worker_waits_or_leaves() {
        let told = Arc::new(Told(AtomicUsize::new(0)));
        let sources: Sources = vec![told.clone() as Arc<dyn AnswerSource>].into();
        let heard = || told.0.load(Ordering::SeqCst);
        let p = Parking::default();
        p.started(2);
        p.park(5, &sources);
        assert_eq!(heard(), 0);
        assert!(!p.still(10));
        p.park(7, &sources);
        assert_eq!(heard(), 1);
        // Both wait beyond 4; the horizon at 5 lets one go.
        assert!(p.still(4));
        assert!(!p.still(5));
        assert_eq!(p.nearest(), Some(5));
        p.unpark(5);
        p.exited(&sources);
        assert_eq!(heard(), 2);
        p.unpark(7);
        p.exited(&sources);
        assert_eq!(heard(), 3);
        assert!(p.still(0));
    }
}
