//! One endpoint of a run (its [`Lane`]), what every lane's workers share ([`RunOptions`]:
//! the scorers, the cache, the budget, the sequential tests' horizon, the batches a resume
//! adopts), the messages they send the run's event loop, and a job's request as its lane
//! renders it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::batch::{BatchRecord, BatchSettings};
use super::job_record::{JobRecord, StepLine};
use super::{budget, source};
use promptgauge_client::cache::Cache;
use promptgauge_client::{Client, ClientEvent, JobRequest};
use promptgauge_grade::ScoreContext;
use promptgauge_suite::{Bench, Job};

/// What the workers share besides the client.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Each case's scorer, in the bench's case order.
    pub scorers: Arc<promptgauge_grade::Scorers>,
    /// Makes idempotency keys unique to this run (and kept by its resumes).
    pub run_id: String,
    /// `--cache`: answers already paid for, and where new ones go.
    pub cache: Option<Arc<Mutex<Cache>>>,
    /// Observe every attempt (`--verbose`); otherwise only pool changes are events.
    pub attempts: bool,
    /// Jobs of the plan already finished before this process (a resume), for `Started`.
    pub already: usize,
    /// What scorers may use (a judge's client).
    pub scoring: ScoreContext,
    /// `--until-decided`: per bench variant (endpoint by endpoint: `endpoint × bench
    /// variants + variant`), whether its jobs are no longer needed. A skipped job is neither
    /// sent nor recorded.
    pub skip: Option<Arc<Vec<std::sync::atomic::AtomicBool>>>,
    /// `--until-decided`: how far ahead of the tests jobs may be sent, and the jobs per
    /// case (plan positions are `job.index / jobs_per_case`).
    pub horizon: Option<(crate::sequential::Horizon, usize)>,
    /// `--retry-failed`: jobs (by plan position) sent again after they failed, with the
    /// round; each is a new logical request (its own idempotency key) and its record says
    /// the round, so it takes the failed record's place.
    pub resend: std::collections::HashMap<usize, u32>,
    /// Answer sources asked after the cache and before the streamed client (a provider's
    /// batch results): see [`source`].
    pub sources: Vec<Arc<dyn source::AnswerSource>>,
    /// `--batch`: how batch lanes poll and wait.
    pub batch: Option<BatchSettings>,
    /// `--resume` of a batch run: the batch lines its journal holds, for the lanes to adopt
    /// what they had submitted.
    pub batches: Arc<Vec<BatchRecord>>,
    /// Provider batch ids claimed by a lane (journaled, created or adopted): a batch found
    /// by a guess is never one another lane has.
    pub batch_claims: Arc<Mutex<std::collections::HashSet<String>>>,
    /// `--budget`: what the run may still spend; a job that does not fit is not sent.
    pub budget: Option<Arc<budget::Budget>>,
    /// `--resume` of a run with tools: the agent loops' steps its journal holds, by the
    /// idempotency key of the request each answered; a loop takes them rather than send.
    pub loop_steps: Arc<std::collections::HashMap<String, StepLine>>,
    /// The bench's MCP servers, started: they answer the calls of the tools they listed.
    pub mcp: Option<Arc<super::mcp::McpServers>>,
}

impl RunOptions {
    /// `--budget`: holds back the most `job` may cost before it is sent; `false` when it
    /// does not fit (the budget is reached, and nothing more is sent).
    pub(super) fn afford(&self, bench: &Bench, job: &Job, request: &Rendered, lane: &Lane) -> bool {
        self.budget.as_ref().is_none_or(|b| {
            let ceiling = self.ceiling(b, bench, job, request, lane);
            b.hold(job.index, usize::from(job.endpoint), ceiling)
        })
    }

    /// `--budget`: holds what an agent loop's next step may cost, its request as it now
    /// stands; `false` when it does not fit (the loop stops, to be resumed from its last
    /// journaled step).
    pub(super) fn afford_step(
        &self,
        bench: &Bench,
        job: &Job,
        request: &Rendered,
        lane: &Lane,
    ) -> bool {
        self.budget.as_ref().is_none_or(|b| {
            let ceiling = self.ceiling(b, bench, job, request, lane);
            b.hold_more(job.index, usize::from(job.endpoint), ceiling)
        })
    }

    /// `--budget`: holds what a job already sent may cost, whatever is left (a batch a
    /// resume adopts is collected, never refused).
    pub(super) fn reserve(&self, bench: &Bench, job: &Job, request: &Rendered, lane: &Lane) {
        if let Some(b) = &self.budget {
            let ceiling = self.ceiling(b, bench, job, request, lane);
            b.reserve(job.index, usize::from(job.endpoint), ceiling);
        }
    }

    /// What job may cost at most (its answer nothing when the cache holds it).
    pub(super) fn ceiling(
        &self,
        b: &budget::Budget,
        bench: &Bench,
        job: &Job,
        request: &Rendered,
        lane: &Lane,
    ) -> f64 {
        // An answer the cache holds costs nothing: only its scorer's calls are held.
        let cached = self.cache.as_ref().is_some_and(|cache| {
            source::Cached {
                cache: cache.clone(),
                endpoint: lane.cache_key.clone(),
            }
            .holds(&request.ask(lane, job))
        });
        b.prices().ceiling(
            bench,
            job,
            &request.request.messages,
            self.scorers[job.case].as_ref(),
            cached,
        )
    }

    /// `--budget`: lets go of what was held for a job that will not be sent after all (its
    /// variant was decided while it waited for its batch).
    pub(super) fn release(&self, job: &Job) {
        if let Some(b) = &self.budget {
            b.release(job.index);
        }
    }

    /// What the budget holds for job `index`, when there is a budget.
    pub(super) fn held_for(&self, index: usize) -> Option<f64> {
        self.budget.as_ref().and_then(|b| b.held_for(index))
    }

    /// `--budget`: a finished job's bill takes the place of what was held back for it.
    pub(crate) fn settle(&self, record: &JobRecord) {
        if let Some(b) = &self.budget {
            b.settle(record);
        }
    }

    /// Whether the budget was reached: nothing more is sent.
    pub(crate) fn out_of_budget(&self) -> bool {
        self.budget.as_ref().is_some_and(|b| b.reached())
    }

    /// `--until-decided`: the job's variant (at its endpoint) is decided, or — `--best` —
    /// set aside while the leader is confirmed against it, so the job is never sent. The
    /// flags are per bench variant, endpoint by endpoint.
    pub(crate) fn decided(&self, bench: &Bench, job: &Job) -> bool {
        let flag = usize::from(job.endpoint) * bench.variants.len() + job.variant;
        let stopped = self
            .skip
            .as_ref()
            .and_then(|s| s.get(flag))
            .is_some_and(|f| f.load(Ordering::SeqCst));
        let aside = self
            .horizon
            .as_ref()
            .is_some_and(|(h, per_case)| !h.sends(job.index / (*per_case).max(1), flag));
        stopped || aside
    }
}

/// One endpoint of a run, with its own workers: its client (its gate, limits, replicas and
/// protocol), the request parameters it adds, and its name. A run of several endpoints
/// sends each one's jobs from its own workers, so a slow endpoint holds back none of the
/// others.
#[derive(Clone)]
pub struct Lane {
    pub client: Arc<Client>,
    /// The endpoint's name in job records; `None` when the run has one endpoint (its records
    /// name none, as they always have).
    pub name: Option<String>,
    /// The endpoint's request parameters: over the bench's, under each variant's.
    pub params: Arc<serde_json::Map<String, serde_json::Value>>,
    /// The endpoint as the user named it (not the simulator's port), for cache keys.
    pub cache_key: String,
    /// Stops this lane's workers from taking more jobs (an outage at this endpoint), while
    /// the other lanes go on; the run's own dispatch token stops them all.
    pub dispatch: CancellationToken,
    /// `--batch` (or `batch: true` on its endpoint): its jobs go through the endpoint's
    /// batch API ([`batch`](super::batch)), not streamed.
    pub batch: bool,
}

impl Lane {
    /// The sources of answers already held, asked before anything is bought: the cache
    /// first (a paid answer is never bought again), then the run's own sources.
    pub(super) fn held_sources(&self, options: &RunOptions) -> Vec<Arc<dyn source::AnswerSource>> {
        let mut sources: Vec<Arc<dyn source::AnswerSource>> = Vec::new();
        if let Some(cache) = &options.cache {
            sources.push(Arc::new(source::Cached {
                cache: cache.clone(),
                endpoint: self.cache_key.clone(),
            }));
        }
        sources.extend(options.sources.iter().cloned());
        sources
    }

    /// The one endpoint of a run that has one.
    pub fn single(client: Arc<Client>, cache_key: impl Into<String>) -> Lane {
        Lane {
            client,
            name: None,
            params: Default::default(),
            cache_key: cache_key.into(),
            dispatch: CancellationToken::new(),
            batch: false,
        }
    }
}

/// What the workers send the event loop.
pub(super) enum Message {
    Started(Job),
    Finished(Box<JobRecord>),
    Client(ClientEvent),
    /// A provider batch's step; a journaled one is acknowledged once the listeners have it
    /// (`true`) or could not keep it (`false`), since what follows depends on it.
    Batch(Box<BatchRecord>, Option<tokio::sync::oneshot::Sender<bool>>),
    /// An agent loop's finished step, acknowledged once the journal kept it (`true`) or
    /// could not (`false`): its loop goes on only from a step a resume would find.
    Step(Box<StepLine>, tokio::sync::oneshot::Sender<bool>),
    /// Acknowledged once everything sent before it was delivered.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// A job's request as its lane sends it, and the length of its prompt.
pub(super) struct Rendered {
    pub(super) request: JobRequest,
    pub(super) prompt_chars: usize,
    /// An agent loop's calls before this request, and what each got back (empty for a job
    /// that is no loop).
    pub(super) steps: Vec<promptgauge_suite::tools::ToolStep>,
}

impl Rendered {
    /// What the answer sources are asked.
    pub(super) fn ask<'a>(&'a self, lane: &'a Lane, job: &Job) -> source::Ask<'a> {
        source::Ask {
            job: *job,
            request: &self.request,
            model: lane.client.config().model.as_str(),
            cache_key: Default::default(),
        }
    }
}

/// A job's idempotency key: one per logical request, the same on its retries (and its
/// `custom_id` in a provider batch). A resend is a new logical request: a key of its own.
pub(super) fn job_key(job: &Job, options: &RunOptions) -> String {
    match options.resend.get(&job.index) {
        Some(round) => format!("pg-{}-{}-resend{round}", options.run_id, job.index),
        None => format!("pg-{}-{}", options.run_id, job.index),
    }
}
