//! Dispatch: workers pull jobs from one queue, send them through the client and score the
//! answers. Everything that happens is an event ([`events::RunEvent`]) delivered in order,
//! from one task, to the run's listeners: the journal, the progress line, the verbose log
//! and the aggregator that builds the reports. The runner knows none of them.

pub mod batch;
pub mod budget;
pub mod events;
pub mod folder;
pub mod journal;
pub mod lock;
pub mod record;
pub mod sequential;
pub mod source;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::cache::Cache;
pub use events::{Listener, RunEvent, RunTally};
pub use folder::RunDir;
pub use journal::{JobRecord, JobStatus, Journal};

use crate::client::ChatMessage;
use crate::client::{Client, ClientEvent, JobRequest, JobResult, Usage};
use crate::grade::{Answer, Score, ScoreContext, ScoreInput};
use crate::suite::{Bench, Job};

/// What the workers share besides the client.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Each case's scorer, in the bench's case order.
    pub scorers: Arc<crate::grade::Scorers>,
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
    pub horizon: Option<(crate::runner::sequential::Horizon, usize)>,
    /// `--retry-failed`: jobs (by plan position) sent again after they failed, with the
    /// round; each is a new logical request (its own idempotency key) and its record says
    /// the round, so it takes the failed record's place.
    pub resend: std::collections::HashMap<usize, u32>,
    /// Answer sources asked after the cache and before the streamed client (a provider's
    /// batch results): see [`source`].
    pub sources: Vec<Arc<dyn source::AnswerSource>>,
    /// `--batch`: how batch lanes poll and wait.
    pub batch: Option<batch::BatchSettings>,
    /// `--resume` of a batch run: the batch lines its journal holds, for the lanes to adopt
    /// what they had submitted.
    pub batches: Arc<Vec<batch::BatchRecord>>,
    /// Provider batch ids claimed by a lane (journaled, created or adopted): a batch found
    /// by a guess is never one another lane has.
    pub batch_claims: Arc<Mutex<std::collections::HashSet<String>>>,
    /// `--budget`: what the run may still spend; a job that does not fit is not sent.
    pub budget: Option<Arc<budget::Budget>>,
}

impl RunOptions {
    /// `--budget`: holds back the most `job` may cost before it is sent; `false` when it
    /// does not fit (the budget is reached, and nothing more is sent).
    fn afford(&self, bench: &Bench, job: &Job, request: &Rendered, lane: &Lane) -> bool {
        self.budget.as_ref().is_none_or(|b| {
            let ceiling = self.ceiling(b, bench, job, request, lane);
            b.hold(job.index, usize::from(job.endpoint), ceiling)
        })
    }

    /// `--budget`: holds what a job already sent may cost, whatever is left (a batch a
    /// resume adopts is collected, never refused).
    fn reserve(&self, bench: &Bench, job: &Job, request: &Rendered, lane: &Lane) {
        if let Some(b) = &self.budget {
            let ceiling = self.ceiling(b, bench, job, request, lane);
            b.reserve(job.index, usize::from(job.endpoint), ceiling);
        }
    }

    /// What job may cost at most (its answer nothing when the cache holds it).
    fn ceiling(
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

    /// What the budget holds for job `index`, when there is a budget.
    fn held_for(&self, index: usize) -> Option<f64> {
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

    /// `--until-decided`: the job's variant (at its endpoint) is decided, so the job is
    /// never sent. The flags are per bench variant, endpoint by endpoint.
    pub(crate) fn decided(&self, bench: &Bench, job: &Job) -> bool {
        let flag = usize::from(job.endpoint) * bench.variants.len() + job.variant;
        self.skip
            .as_ref()
            .and_then(|s| s.get(flag))
            .is_some_and(|f| f.load(Ordering::SeqCst))
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
    /// batch API ([`batch`]), not streamed.
    pub batch: bool,
}

impl Lane {
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
enum Message {
    Started(Job),
    Finished(Box<JobRecord>),
    Client(ClientEvent),
    /// A provider batch's step; a journaled one is acknowledged once the listeners have it
    /// (`true`) or could not keep it (`false`), since what follows depends on it.
    Batch(
        Box<batch::BatchRecord>,
        Option<tokio::sync::oneshot::Sender<bool>>,
    ),
    /// Acknowledged once everything sent before it was delivered.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

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
    sources.push(Arc::new(source::Streamed(lane.client.clone())));
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

/// Asks the sources for one job's answer and scores it; `None` when the run was stopped
/// before it finished.
async fn run_job(
    bench: &Bench,
    job: &Job,
    request: &Rendered,
    sources: &[Arc<dyn source::AnswerSource>],
    lane: &Lane,
    options: &RunOptions,
) -> Option<JobRecord> {
    let ask = request.ask(lane, job);
    let answer = source::answer(sources, &ask).await?;
    score(bench, job, request, answer, lane, options).await
}

/// A job's request as its lane sends it, and the length of its prompt.
struct Rendered {
    request: JobRequest,
    prompt_chars: usize,
}

impl Rendered {
    /// What the answer sources are asked.
    fn ask<'a>(&'a self, lane: &'a Lane, job: &Job) -> source::Ask<'a> {
        source::Ask {
            request: &self.request,
            model: lane.client.config().model.as_str(),
            repeat: job.repeat,
            cache_key: Default::default(),
        }
    }
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

/// A job's idempotency key: one per logical request, the same on its retries (and its
/// `custom_id` in a provider batch). A resend is a new logical request: a key of its own.
fn job_key(job: &Job, options: &RunOptions) -> String {
    match options.resend.get(&job.index) {
        Some(round) => format!("pg-{}-{}-resend{round}", options.run_id, job.index),
        None => format!("pg-{}-{}", options.run_id, job.index),
    }
}

/// Renders a job's request at its lane; a template that fails is the job's failed record.
fn request_of(
    bench: &Bench,
    job: &Job,
    lane: &Lane,
    options: &RunOptions,
) -> Result<Rendered, Box<JobRecord>> {
    let messages = match bench.render_job(job) {
        Ok(m) => m,
        Err(e) => {
            let mut r = failed_record(bench, job, format!("template failed: {e}"), None);
            r.endpoint = lane.name.clone();
            r.resent = options.resend.get(&job.index).copied().unwrap_or(0);
            return Err(Box::new(r));
        }
    };
    let prompt_chars: usize = messages.iter().map(|m| m.content.chars().count()).sum();
    let reserve_tokens = bench
        .reservation(job.variant, &messages)
        .min(u64::from(u32::MAX)) as u32;
    Ok(Rendered {
        request: JobRequest {
            reserve_tokens,
            messages,
            params: bench.params_at(job.variant, &lane.params),
            idempotency_key: job_key(job, options),
        },
        prompt_chars,
    })
}

/// Scores an answer, whatever its source, into the job's record; `None` when the run was
/// stopped before it was scored (or the answer was aborted).
async fn score(
    bench: &Bench,
    job: &Job,
    rendered: &Rendered,
    answer: source::Sourced,
    lane: &Lane,
    options: &RunOptions,
) -> Option<JobRecord> {
    if answer.result.aborted {
        return None;
    }
    let scoring = Scoring {
        scorers: &options.scorers,
        key: &rendered.request.idempotency_key,
        messages: &rendered.request.messages,
        prompt_chars: rendered.prompt_chars,
        context: &options.scoring,
    };
    let mut r = record(bench, job, answer, &scoring).await?;
    r.usage_anomaly = usage_anomaly(&r, bench.max_tokens_at(job.variant, &lane.params));
    r.endpoint = lane.name.clone();
    r.resent = options.resend.get(&job.index).copied().unwrap_or(0);
    Some(r)
}

/// Usage no request of this job could have produced: an attempt billed for more output
/// tokens than its `max_tokens` (reasoning included, as every protocol counts it). The
/// provider's word is what is spent; this says it cannot be right.
fn usage_anomaly(r: &JobRecord, max_tokens: Option<u64>) -> Option<String> {
    let max = max_tokens?;
    // Only what the provider reported: an estimate (no usage sent) is no accounting.
    let most = r
        .billed()
        .iter()
        .filter(|u| !u.estimated)
        .map(|u| u.completion_tokens)
        .max()?;
    (most > max).then(|| {
        format!(
            "the provider billed {most} output tokens for a request capped at max_tokens {max}: a provider accounting anomaly"
        )
    })
}

/// What scoring a job needs besides its answer.
struct Scoring<'a> {
    scorers: &'a crate::grade::Scorers,
    key: &'a str,
    messages: &'a [ChatMessage],
    prompt_chars: usize,
    context: &'a ScoreContext,
}

fn failed_record(bench: &Bench, job: &Job, error: String, result: Option<JobResult>) -> JobRecord {
    let case = &bench.cases[job.case];
    let (attempts, partial, model, answer_ms) = match result {
        Some(r) => (
            r.attempts,
            Some(r.text).filter(|t| !t.is_empty()),
            r.model,
            r.answer_ms,
        ),
        None => (Vec::new(), None, None, None),
    };
    JobRecord {
        job: job.index,
        case_id: case.id.clone(),
        variant: bench.variants[job.variant].name.clone(),
        endpoint: None,
        repeat: job.repeat,
        status: JobStatus::Failed,
        outcome: attempts.last().map(|a| a.outcome),
        output: String::new(),
        partial_output: partial,
        reasoning: String::new(),
        finish_reason: None,
        tool_calls: Vec::new(),
        expected: case.expected.clone(),
        extracted: None,
        not_found: None,
        correct: None,
        score: None,
        score_detail: None,
        judge: Vec::new(),
        judge_usage: None,
        error: Some(error),
        attempts,
        ttft_ms: None,
        latency_ms: None,
        answer_ms,
        usage: Usage::default(),
        model,
        tags: case.tags.clone(),
        group: case.group.clone(),
        cached: false,
        resent: 0,
        batch: None,
        refused: false,
        usage_anomaly: None,
    }
}

/// The record of a finished job, whatever source answered it; `None` when the run stopped
/// before it was scored.
async fn record(
    bench: &Bench,
    job: &Job,
    answer: source::Sourced,
    s: &Scoring<'_>,
) -> Option<JobRecord> {
    let result = answer.result;
    if answer.cached {
        // Kept only when it came whole: it is scored as the complete answer it was.
        let mut r = graded_record(bench, job, result, s).await?;
        r.cached = true;
        r.outcome = Some(crate::client::Outcome::Complete);
        return Some(r);
    }
    if result.filtered() {
        let error = result
            .attempts
            .last()
            .and_then(|a| a.error.clone())
            .unwrap_or_else(|| "the provider withheld the answer".to_string());
        let finish = result.finish_reason.clone();
        let mut r = failed_record(bench, job, error, Some(result));
        r.status = JobStatus::Filtered;
        r.finish_reason = finish;
        return Some(r);
    }
    if !result.answered() {
        let error = result
            .failure
            .clone()
            .unwrap_or_else(|| "no answer".to_string());
        return Some(failed_record(bench, job, error, Some(result)));
    }
    graded_record(bench, job, result, s).await
}

/// Scores an answer known to be whole (streamed to its finish_reason, or cached); `None`
/// when the run stopped while a judge was being asked.
///
/// A refusal, on any protocol, is an answer that failed with the cause `refused`: score 0,
/// never passed to the scorer (a refusal that happens to contain the expected words is no
/// pass), its words the output. It stays in every figure, so a variant that makes the
/// model refuse scores lower; leaving it out, as a filtered answer is, would raise it
/// (docs/dev/design-notes.md, "Client", on refusals).
async fn graded_record(
    bench: &Bench,
    job: &Job,
    result: JobResult,
    s: &Scoring<'_>,
) -> Option<JobRecord> {
    let case = &bench.cases[job.case];
    let refused = result.refusal.is_some();
    let answer = Answer {
        text: match result.refusal {
            Some(said) if !said.is_empty() => said,
            _ => result.text,
        },
        reasoning: result.reasoning,
        finish_reason: result.finish_reason,
        tool_calls: result.tool_calls,
    };
    let input = ScoreInput {
        key: s.key,
        case,
        messages: s.messages,
        answer: &answer,
    };
    let scorer = &s.scorers[job.case];
    let scored = if refused {
        Ok(Score {
            value: 0.0,
            extracted: None,
            usage: None,
            detail: Some(serde_json::json!({"refused": true})),
            judge: Vec::new(),
        })
    } else {
        scorer.score(input, s.context).await
    };
    let score = match scored {
        Ok(score) => score,
        Err(e) if e.stopped => return None,
        Err(e) => {
            let mut failed = failed_record(bench, job, format!("could not be scored: {e}"), None);
            // The answer itself arrived whole and was paid for: keep what it cost and took.
            failed.usage = result.usage.unwrap_or_else(|| {
                Usage::estimate(s.prompt_chars, &answer.text, &answer.reasoning)
            });
            failed.ttft_ms = result.attempts.last().and_then(|a| a.ttft_ms);
            failed.latency_ms = result.attempts.last().map(|a| a.latency_ms);
            failed.answer_ms = result.answer_ms;
            failed.model = result.model.clone();
            failed.attempts = result.attempts;
            failed.partial_output = Some(answer.text).filter(|t| !t.is_empty());
            failed.judge = e.judge;
            failed.judge_usage = e.usage;
            return Some(failed);
        }
    };
    let result_attempts = result.attempts;
    let last = result_attempts.last();
    let usage = result
        .usage
        .unwrap_or_else(|| Usage::estimate(s.prompt_chars, &answer.text, &answer.reasoning));
    Some(JobRecord {
        job: job.index,
        case_id: case.id.clone(),
        variant: bench.variants[job.variant].name.clone(),
        endpoint: None,
        repeat: job.repeat,
        status: JobStatus::Graded,
        outcome: last.map(|a| a.outcome),
        ttft_ms: last.and_then(|a| a.ttft_ms),
        latency_ms: last.map(|a| a.latency_ms),
        answer_ms: result.answer_ms,
        output: answer.text,
        partial_output: None,
        reasoning: answer.reasoning,
        finish_reason: answer.finish_reason,
        tool_calls: answer.tool_calls,
        expected: case.expected.clone(),
        correct: None,
        score: Some(score.value),
        score_detail: score.detail,
        judge: score.judge,
        judge_usage: score.usage,
        not_found: scorer
            .looks_for(case)
            .filter(|_| score.extracted.is_none() && !refused)
            .map(String::from),
        extracted: score.extracted,
        error: None,
        attempts: result_attempts,
        usage,
        model: result.model,
        tags: case.tags.clone(),
        group: case.group.clone(),
        cached: false,
        resent: 0,
        batch: None,
        refused,
        usage_anomaly: None,
    })
}
