//! The streaming chat client: one job in, one answer (or a clear failure) out.
//!
//! It owns every deadline (first token, idle, total), the concurrency gate, the retry loop
//! and the API key. Time is tokio's clock, which tests pause and advance, so backoff and
//! timeout tests run in milliseconds.
//!
//! Invariant: speaks to servers and knows no bench, case or score; stands only on
//! promptgauge-base (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

mod anthropic;
pub mod attachment;
pub mod batch;
pub mod cache;
pub mod embeddings;
pub mod limits;
mod message;
mod openai;
pub mod pool;
pub mod protocol;
mod request;
mod responses;
pub(crate) mod retry;
pub mod secrets;
pub mod sse;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod transport;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, timeout_at};
use tokio_util::sync::CancellationToken;

pub(crate) use anthropic::AnthropicMessages;
pub use cache::Cache;
pub use limits::Limits;
pub use message::ChatMessage;
pub use openai::OpenAiChat;
pub use protocol::{Dialect, FinishKind, Protocol, ProtocolKind, Streamed, ToolCall, Usage};
pub use request::{ApiKey, JobRequest, KeyHeader};
pub(crate) use responses::OpenAiResponses;
pub use retry::Outcome;
pub(crate) use secrets::Secrets;
pub use transport::{HttpRequest, HttpResponse, ReqwestTransport, Transport, TransportError};

impl ProtocolKind {
    /// The protocol's implementation.
    /// Whether this protocol can carry a file of `kind` (by URL when `by_url`) in a turn of
    /// `role`; why not, in words that name the protocol and what it does take.
    pub fn carries(self, kind: attachment::Kind, role: &str, by_url: bool) -> Result<(), String> {
        self.build().carries(kind, role, by_url)
    }

    pub fn build(self) -> Arc<dyn Protocol> {
        match self {
            ProtocolKind::OpenaiChat => Arc::new(OpenAiChat),
            ProtocolKind::OpenaiResponses => Arc::new(OpenAiResponses),
            ProtocolKind::AnthropicMessages => Arc::new(AnthropicMessages),
        }
    }
}

/// Everything the client needs, resolved from the bench and flags.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The `…/v1` URL; the protocol appends its path (`/chat/completions`).
    pub base_url: String,
    /// The wire protocol the endpoint speaks.
    pub protocol: ProtocolKind,
    /// Further replicas serving the same model; each gets its own gate of `concurrency`.
    pub replicas: Vec<String>,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// Name of the variable the key came from, for error messages.
    pub api_key_env: String,
    /// Its gate per replica, deadlines, attempts, rate limits and the largest answer (the
    /// bench's `limits:` under the flags).
    pub limits: Limits,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// After a `finish_reason`, how long to wait for a usage chunk or the end of the stream;
    /// the answer is complete either way.
    pub finish_grace: Duration,
    /// Seed for the backoff jitter; `None` draws one from the OS.
    pub seed: Option<u64>,
    /// Extra headers on every request (an endpoint's `headers:`, e.g. OpenAI-Organization).
    pub headers: Vec<(String, String)>,
    /// Values scrubbed from everything shown, like the key (headers read from variables).
    pub hidden: Vec<String>,
}

impl ClientConfig {
    /// Defaults (the limits docs/guide/files.md's "The bench" lists) for a base URL and model.
    pub fn new(base_url: &str, model: &str) -> Self {
        ClientConfig {
            base_url: base_url.trim_end_matches('/').to_string(),
            protocol: ProtocolKind::default(),
            replicas: Vec::new(),
            model: model.to_string(),
            api_key: None,
            api_key_env: "OPENAI_API_KEY".into(),
            limits: Limits::default(),
            backoff_base: Duration::from_millis(250),
            backoff_cap: Duration::from_secs(20),
            finish_grace: FINISH_GRACE,
            seed: None,
            headers: Vec::new(),
            hidden: Vec::new(),
        }
    }
}

/// What happened in one attempt, as recorded in the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From request sent to the first answer or reasoning token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    pub latency_ms: f64,
    /// What the server asked us to wait, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<f64>,
    /// How long we waited before the next attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<f64>,
    /// Whether the request asked for usage in the stream (OpenAI's `stream_options`); false
    /// after a server refused that and the request was sent without it.
    pub stream_options: bool,
    /// Which replica answered (an index into the run's base URLs), when there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<usize>,
    /// `data:` payloads that were not JSON and were skipped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ignored_events: u64,
    /// What this attempt is billed for, when the server started answering (HTTP 200): the
    /// usage it reported, or an estimate from the prompt and the text received (marked).
    /// Refused attempts (429, 5xx, 4xx, no connection) are not billed and carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why the whole run must stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fatal {
    #[error(
        "the provider refused the API key (HTTP {status}): check the key in ${env} (its value is not shown) and that it may use this model"
    )]
    Unauthorized { status: u16, env: String },
    #[error("the provider says the account is out of credit (HTTP 402): {message}")]
    PaymentRequired { message: String },
}

/// The answer to a job, or why there is none.
#[derive(Debug, Clone, Default)]
pub struct JobResult {
    pub attempts: Vec<Attempt>,
    /// The final attempt's stream; only trustworthy when `answered()`.
    pub text: String,
    pub reasoning: String,
    /// The model declined to answer: what it said (chat completions' `refusal`, a Responses
    /// refusal part, the text before Anthropic's `stop_reason: refusal`). Such an answer is
    /// scored as failed with the cause `refused`, on every protocol and the batch path.
    pub refusal: Option<String>,
    /// Tool calls the final attempt's stream made.
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
    /// From the first attempt sent to the end of the last, retries and waits included: the
    /// time the answer took, as a user of the prompt would wait for it.
    pub answer_ms: Option<f64>,
    /// Set when the job ended without an answer.
    pub failure: Option<String>,
    /// The run was stopped (Ctrl-C, fatal error) before this job finished; not journaled.
    pub aborted: bool,
}

impl JobResult {
    /// The final attempt's outcome.
    pub fn outcome(&self) -> Option<Outcome> {
        self.attempts.last().map(|a| a.outcome)
    }

    /// Whether there is a whole answer to score (complete or truncated).
    pub fn answered(&self) -> bool {
        self.failure.is_none() && !self.aborted && self.outcome().is_some_and(Outcome::answered)
    }

    /// Whether the provider withheld the answer (`content_filter`): nothing to score, and
    /// nothing failed.
    pub fn filtered(&self) -> bool {
        self.failure.is_none() && !self.aborted && self.outcome() == Some(Outcome::Filtered)
    }
}

/// One attempt, as `--verbose` shows it. It holds nothing secret: headers are redacted
/// and the URL is shown without credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptEvent {
    pub idempotency_key: String,
    /// 1 for the first attempt of the job.
    pub number: usize,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub attempt: Attempt,
}

/// What the client tells a run while it works.
#[derive(Debug, Clone)]
pub enum ClientEvent {
    /// An attempt ended (sent only to subscribers that asked for attempts).
    Attempt(AttemptEvent),
    /// A gate resized or a replica benched.
    Pool(pool::PoolEvent),
}

/// Hears the client's events, on the task that made them.
pub(crate) type EventSink = Arc<dyn Fn(ClientEvent) + Send + Sync>;

/// Where the client sends its events, and whether attempts are wanted.
struct Subscriber {
    sink: EventSink,
    attempts: bool,
}

/// Sends jobs to an endpoint (or its replicas) and brings back whole answers.
pub struct Client {
    transport: Arc<dyn Transport>,
    protocol: Arc<dyn Protocol>,
    config: ClientConfig,
    pool: pool::Pool,
    throttle: limits::Throttle,
    /// The dialect every job starts with: plainer once a server refused an optional feature
    /// and accepted the request without it.
    dialect: AtomicU8,
    rng: Mutex<rand::rngs::StdRng>,
    /// Cancelled on the first Ctrl-C: no new attempt starts and waits end at once; attempts
    /// in flight go on within their deadlines.
    drain: CancellationToken,
    stop: CancellationToken,
    secrets: Secrets,
    fatal: Mutex<Option<Fatal>>,
    subscriber: Mutex<Option<Subscriber>>,
}

/// What one attempt produced, before triage.
struct AttemptResult {
    attempt: Attempt,
    stream: Streamed,
    retry_after: Option<Duration>,
    /// False when trying again would fail the same way (an oversized response).
    retryable: bool,
    /// Requests left in the provider's rate-limit window, when it said (the protocol
    /// reads its own header for it).
    remaining_requests: Option<u64>,
}

/// How long to wait for the end of a body after a whole answer, to keep the connection.
const DRAIN: Duration = Duration::from_millis(50);

/// After a `finish_reason`, how long a usage chunk (or `[DONE]`, or the end of the body)
/// may take to follow before the answer is taken as complete without it.
pub const FINISH_GRACE: Duration = Duration::from_millis(250);

/// A deadline `d` after `t`; a duration too long for the clock is "never" (tokio's far
/// future, 30 years), not a panic.
pub(crate) fn deadline_after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .unwrap_or_else(|| t + Duration::from_secs(86_400 * 365 * 30))
}

/// What an attempt says of the replica that served it: throttled (a 429, or no requests
/// left in the provider's window while its gate is above one), fine, neither (a 4xx other
/// than 408: the request's fault), or failing, with why.
fn health_of(
    attempt: &Attempt,
    remaining_requests: Option<u64>,
    limit: usize,
) -> (pool::Health, String) {
    match (attempt.outcome, attempt.status) {
        (_, Some(429)) => (pool::Health::Throttled, "429".to_string()),
        (o, _) if o.finished() => match remaining_requests {
            // The provider says the window is spent: ease off before the 429s come.
            Some(0) if limit > 1 => (
                pool::Health::Throttled,
                "no requests left in the provider's rate-limit window".to_string(),
            ),
            _ => (pool::Health::Ok, String::new()),
        },
        (Outcome::HttpError, Some(s)) if s < 500 && s != 408 => {
            (pool::Health::Neutral, String::new())
        }
        _ => (
            pool::Health::Failed,
            attempt.error.clone().unwrap_or_default(),
        ),
    }
}

/// What the model said in declining, when it declined: a protocol's refusal text, or the
/// text before a refusal finish.
fn refusal_of(stream: &Streamed) -> Option<String> {
    match (&stream.refusal, &stream.finish) {
        (Some(r), _) => Some(r.clone()),
        (None, Some(f)) if f.kind == FinishKind::Refused => Some(stream.text.clone()),
        _ => None,
    }
}

/// What an attempt's stream came to. A finish_reason means the answer is whole, whatever
/// broke after it (e.g. before [DONE]); without one, the way the stream ended is the
/// outcome. A reason the protocol does not count as a finish (`abort`, `error`, …) is named
/// with the cut.
fn outcome_of(stream: &Streamed, end: Result<(), (Outcome, String)>) -> (Outcome, Option<String>) {
    let not_a_finish = |e: String| match &stream.unrecognised_finish {
        Some(r) => format!("{e} (finish_reason {r:?} is not a finish)"),
        None => e,
    };
    match (&stream.finish, end) {
        (Some(f), _) => match f.kind {
            FinishKind::Stopped | FinishKind::Refused => (Outcome::Complete, None),
            FinishKind::Truncated => (Outcome::Truncated, None),
            FinishKind::Filtered => (
                Outcome::Filtered,
                Some(format!(
                    "the provider withheld the answer (finish_reason {:?})",
                    f.reason
                )),
            ),
        },
        (None, Err((outcome, e))) => (outcome, Some(not_a_finish(e))),
        (None, Ok(())) => (
            Outcome::Cut,
            Some(
                match (&stream.unconfirmed_finish, &stream.unrecognised_finish) {
                    (Some(f), _) => format!(
                        "the stream ended after finish reason {:?}, before the event that confirms it",
                        f.reason
                    ),
                    (None, Some(r)) => {
                        format!("the stream ended with finish_reason {r:?}, which is not a finish")
                    }
                    (None, None) => "the stream ended without a finish_reason".to_string(),
                },
            ),
        ),
    }
}

/// Caps what is read of an error response body.
const ERROR_BODY_CAP: usize = 64 * 1024;

impl Client {
    /// A client speaking the endpoint's protocol (`config.protocol`).
    pub fn new(transport: Arc<dyn Transport>, config: ClientConfig) -> Self {
        let protocol = config.protocol.build();
        Client::speaking(transport, config, protocol)
    }

    /// A client speaking `protocol` (which `config.protocol` then does not name).
    pub(crate) fn speaking(
        transport: Arc<dyn Transport>,
        config: ClientConfig,
        protocol: Arc<dyn Protocol>,
    ) -> Self {
        let rng = match config.seed {
            Some(s) => rand::rngs::StdRng::seed_from_u64(s),
            None => rand::make_rng(),
        };
        let base_urls: Vec<String> = std::iter::once(config.base_url.clone())
            .chain(
                config
                    .replicas
                    .iter()
                    .map(|r| r.trim_end_matches('/').to_string()),
            )
            .collect();
        let mut secrets = Secrets::new(config.api_key.as_ref().map(ApiKey::expose), &base_urls);
        for value in &config.hidden {
            secrets.hide(value);
        }
        Client {
            secrets,
            pool: pool::Pool::new(
                &base_urls
                    .iter()
                    .map(|b| (b.clone(), protocol.url(b, &config.model)))
                    .collect::<Vec<_>>(),
                config.limits.concurrency,
                config.limits.adaptive,
            ),
            protocol,
            throttle: limits::Throttle::new(
                config.limits.requests_per_minute,
                config.limits.tokens_per_minute,
            ),
            transport,
            config,
            dialect: AtomicU8::new(0),
            rng: Mutex::new(rng),
            drain: CancellationToken::new(),
            stop: CancellationToken::new(),
            fatal: Mutex::new(None),
            subscriber: Mutex::new(None),
        }
    }

    /// From now on, calls `sink` with pool events (and, with `attempts`, one event per
    /// attempt), on the task that made them, so they stay in order with that task's own
    /// messages; `None` stops.
    pub fn subscribe(&self, sink: Option<EventSink>, attempts: bool) {
        if let Ok(mut s) = self.subscriber.lock() {
            *s = sink.map(|sink| Subscriber { sink, attempts });
        }
    }

    fn wants_attempts(&self) -> bool {
        self.subscriber
            .lock()
            .ok()
            .is_some_and(|s| s.as_ref().is_some_and(|s| s.attempts))
    }

    fn emit(&self, event: ClientEvent) {
        let sink = self
            .subscriber
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.sink.clone()));
        if let Some(sink) = sink {
            sink(event);
        }
    }

    /// The settings it was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// How many attempts may be in flight at once, over all replicas.
    pub fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// Benches replica `i` (by its place in the base URLs) before the first attempt: it did
    /// not answer the preflight while others did. Journaled as a pool event.
    pub fn bench_replica(&self, i: usize, why: &str) {
        self.pool.bench(i, why);
    }

    /// Cancelled when the run must stop; in-flight attempts are abandoned.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Cancelled when the run should wind down (first Ctrl-C): no job starts a new attempt,
    /// waits for a retry or a permit end at once, and attempts in flight finish.
    pub fn drain_token(&self) -> CancellationToken {
        self.drain.clone()
    }

    /// The reason the run was stopped by the provider, if it was.
    pub fn fatal(&self) -> Option<Fatal> {
        self.fatal.lock().ok().and_then(|f| f.clone())
    }

    fn stop_run(&self, fatal: Fatal) {
        if let Ok(mut f) = self.fatal.lock()
            && f.is_none()
        {
            *f = Some(fatal);
        }
        self.stop.cancel();
    }

    fn request(&self, url: &str, job: &JobRequest, dialect: Dialect) -> HttpRequest {
        HttpRequest {
            method: Default::default(),
            url: url.to_string(),
            headers: self
                .protocol
                .headers(job, self.config.api_key.as_ref())
                .into_iter()
                .chain(self.config.headers.iter().cloned())
                .collect(),
            body: self.protocol.body(&self.config.model, job, dialect),
        }
    }

    /// Runs one job to an answer or a failure, retrying as the policy says.
    pub async fn execute(&self, job: &JobRequest) -> JobResult {
        let mut run = JobRun::new(job, Dialect(self.dialect.load(Ordering::Relaxed)));
        if let Err(Aborted) = self.attempts(&mut run).await {
            run.result.aborted = true;
        }
        run.into_result()
    }

    /// Waits for `work`, unless the run stops or winds down first.
    async fn unless_winding_down<T>(&self, work: impl Future<Output = T>) -> Result<T, Aborted> {
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => Err(Aborted),
            _ = self.drain.cancelled() => Err(Aborted),
            r = work => Ok(r),
        }
    }

    /// The attempts of one job, until one ends it with an answer or a failure.
    async fn attempts(&self, run: &mut JobRun<'_>) -> Result<(), Aborted> {
        loop {
            // Winding down: no new attempt; the job is left for a resume, not failed.
            if self.drain.is_cancelled() || self.stop.is_cancelled() {
                return Err(Aborted);
            }
            if !self.throttle.is_empty()
                && let Err(e) = self
                    .unless_winding_down(self.throttle.reserve(run.job.reserve_tokens))
                    .await?
            {
                run.result.failure = Some(e.to_string());
                return Ok(());
            }
            let (replica, permit) = self.unless_winding_down(self.pool.acquire()).await?;
            let request = self.request(&self.pool.replicas[replica].url, run.job, run.dialect);
            // Keys by name, and every value a variable gave (an endpoint's `${VAR}` header).
            let shown_headers = self.wants_attempts().then(|| {
                let mut headers = request.redacted_headers();
                for (_, value) in &mut headers {
                    self.secrets.scrub_in_place(value);
                }
                headers
            });
            run.sending();
            // Winding down lets an attempt in flight finish; only a stop abandons it.
            let sent = tokio::select! {
                biased;
                _ = self.stop.cancelled() => return Err(Aborted),
                r = self.attempt(request) => r,
            };
            drop(permit);
            let Some(wait) = self.conclude(run, replica, sent, shown_headers) else {
                return Ok(());
            };
            self.unless_winding_down(tokio::time::sleep(wait)).await?;
        }
    }

    /// Everything after an attempt came back: it goes on the record and its replica hears
    /// how it went; the job keeps what it answered and the policy says what follows. Returns
    /// the wait before the next attempt, or `None` when the job is over.
    fn conclude(
        &self,
        run: &mut JobRun<'_>,
        replica: usize,
        sent: AttemptResult,
        shown_headers: Option<Vec<(String, String)>>,
    ) -> Option<Duration> {
        let AttemptResult {
            mut attempt,
            mut stream,
            retry_after,
            retryable,
            remaining_requests,
        } = sent;
        self.record(run, replica, &mut attempt, &mut stream);
        self.report_health(replica, &attempt, remaining_requests);
        let (next, immediate) = self.next_step(run, &attempt, retryable);
        run.keep(stream);
        let number = run.result.attempts.len() + 1;
        let wait = match self.follow_up(next, number, &attempt, retry_after, immediate) {
            Ok(wait) => wait,
            Err(failure) => {
                run.result.failure = Some(failure);
                None
            }
        };
        attempt.wait_ms = wait.map(ms);
        if let Some(headers) = shown_headers {
            self.emit(ClientEvent::Attempt(AttemptEvent {
                idempotency_key: run.job.idempotency_key.clone(),
                number,
                url: self.pool.replicas[replica].shown_url.clone(),
                headers,
                attempt: attempt.clone(),
            }));
        }
        run.result.attempts.push(attempt);
        wait
    }

    /// Puts an attempt on the record: scrubbed, marked with the dialect it spoke, billed,
    /// and with the replica that served it.
    fn record(
        &self,
        run: &JobRun<'_>,
        replica: usize,
        attempt: &mut Attempt,
        stream: &mut Streamed,
    ) {
        // What the server sent back may quote the key (an echoed header in an error
        // body, an answer that repeats it): nothing it said leaves here unscrubbed.
        self.scrub(attempt, stream);
        attempt.stream_options = self.protocol.asks_for_usage(run.dialect);
        // The server started answering: this attempt is billed, whole or not.
        if attempt.status == Some(200) {
            attempt.usage = Some(stream.usage.unwrap_or_else(|| {
                let prompt: usize = run
                    .job
                    .messages
                    .iter()
                    .map(|m| m.content.chars().count())
                    .sum();
                Usage::estimate(prompt, &stream.text, &stream.reasoning)
            }));
        }
        if self.pool.replicas.len() > 1 {
            attempt.replica = Some(replica);
        }
    }

    /// Tells the replica's gate how the attempt went, and passes on what the pool did.
    fn report_health(&self, replica: usize, attempt: &Attempt, remaining_requests: Option<u64>) {
        let limit = self.pool.replicas[replica].gate.limit();
        let (health, why) = health_of(attempt, remaining_requests, limit);
        self.pool.report(replica, health, &why);
        for event in self.pool.take_events() {
            self.emit(ClientEvent::Pool(event));
        }
    }

    /// What the policy says follows the attempt, and whether it is a retry at once in a
    /// plainer dialect: the server may only not know an optional feature, so the job tries
    /// once without it. Each step is plainer than the last, so this ends.
    fn next_step(
        &self,
        run: &mut JobRun<'_>,
        attempt: &Attempt,
        retryable: bool,
    ) -> (retry::Next, bool) {
        let status = attempt.status;
        let next = match retry::next_step(attempt.outcome, status) {
            retry::Next::Retry if !retryable => retry::Next::Fail,
            next => next,
        };
        if let Some(plainer) = status.and_then(|s| self.protocol.fallback(run.job, run.dialect, s))
        {
            run.refused = status;
            run.dialect = plainer;
            return (retry::Next::Retry, true);
        }
        if run.refused.is_some() && status != run.refused {
            // Not refused again: the plainer form is the run's from now on.
            self.dialect.store(run.dialect.0, Ordering::Relaxed);
        }
        (next, false)
    }

    /// After attempt `number`, whose policy step is `next`: the wait before the next attempt,
    /// `None` when the job is done, or why it failed.
    fn follow_up(
        &self,
        next: retry::Next,
        number: usize,
        attempt: &Attempt,
        retry_after: Option<Duration>,
        immediate: bool,
    ) -> Result<Option<Duration>, String> {
        match next {
            retry::Next::Done => Ok(None),
            retry::Next::StopRun => Err(self.stop_for(attempt)),
            retry::Next::Fail => Err(describe_failure(attempt)),
            retry::Next::Retry if number as u32 >= self.config.limits.max_attempts => Err(format!(
                "gave up after {number} attempts; last: {}",
                describe_failure(attempt)
            )),
            retry::Next::Retry => self.retry_wait(number, retry_after, immediate).map(Some),
        }
    }

    /// Stops the run for what `attempt` was refused (the key, or credit), and says why.
    fn stop_for(&self, attempt: &Attempt) -> String {
        let fatal = match attempt.status {
            Some(402) => Fatal::PaymentRequired {
                message: attempt.error.clone().unwrap_or_default(),
            },
            status => Fatal::Unauthorized {
                status: status.unwrap_or(401),
                env: self.config.api_key_env.clone(),
            },
        };
        let why = self.secrets.scrub(&fatal.to_string()).into_owned();
        self.stop_run(fatal);
        why
    }

    /// The wait before retrying after attempt `number`: none for a plainer dialect, else the
    /// jittered backoff or what the server asked, whichever is longer. A server asking for
    /// more than `max_retry_after` fails the job instead.
    fn retry_wait(
        &self,
        number: usize,
        retry_after: Option<Duration>,
        immediate: bool,
    ) -> Result<Duration, String> {
        match retry_after {
            Some(ra) if ra > self.config.limits.max_retry_after => Err(format!(
                "the provider asked to wait {}, more than limits.max_retry_after ({})",
                if ra >= Duration::from_secs(86_400 * 365) {
                    "more than a year".to_string()
                } else {
                    human(ra)
                },
                human(self.config.limits.max_retry_after)
            )),
            _ if immediate => Ok(Duration::ZERO),
            ra => {
                let unit: f64 = self.rng.lock().map(|mut r| r.random()).unwrap_or(0.5);
                let retries_so_far = number as u32 - 1;
                let b = retry::backoff(
                    retries_so_far,
                    self.config.backoff_base,
                    self.config.backoff_cap,
                    unit,
                );
                // Retry-After is a floor, not advice.
                Ok(ra.map_or(b, |ra| ra.max(b)))
            }
        }
    }

    /// A whole, non-streamed answer's result (a batch's), judged like a stream's end: one
    /// attempt, with no latency (nothing was waited for by anyone), scrubbed of secrets.
    pub(crate) fn whole_result(&self, mut stream: Streamed) -> JobResult {
        let end = match stream.error.clone() {
            Some(e) => Err((Outcome::StreamError, e)),
            None => Ok(()),
        };
        let (outcome, error) = outcome_of(&stream, end);
        let mut attempt = Attempt {
            ignored_events: stream.ignored,
            usage: stream.usage,
            ..Attempt::unmeasured(outcome, Some(200), error)
        };
        self.scrub(&mut attempt, &mut stream);
        let failure = (!outcome.answered() && outcome != Outcome::Filtered)
            .then(|| attempt.error.clone().unwrap_or_else(|| "no answer".into()));
        JobResult {
            attempts: vec![attempt],
            refusal: refusal_of(&stream),
            text: stream.text,
            reasoning: stream.reasoning,
            tool_calls: stream.tool_calls,
            finish_reason: stream.finish.map(|f| f.reason),
            usage: stream.usage,
            model: stream.model,
            answer_ms: None,
            failure,
            aborted: false,
        }
    }

    /// A job a batch did not answer: `error` (scrubbed) is its cause, `status` the HTTP
    /// status the provider gave the request, when it gave one.
    pub(crate) fn failed_result(&self, status: Option<u16>, error: String) -> JobResult {
        let mut attempt = Attempt::unmeasured(Outcome::HttpError, status, Some(error));
        self.scrub(&mut attempt, &mut Streamed::default());
        JobResult {
            failure: attempt.error.clone(),
            attempts: vec![attempt],
            ..JobResult::default()
        }
    }

    /// Removes every secret from what an attempt brought back, then cuts error messages to
    /// length (after, so no fragment of a secret survives the cut).
    fn scrub(&self, attempt: &mut Attempt, stream: &mut Streamed) {
        self.scrub_secrets(attempt, stream);
        for error in [attempt.error.as_mut(), stream.error.as_mut()]
            .into_iter()
            .flatten()
        {
            if error.len() > 500 {
                *error = protocol::truncate(error, 500);
            }
        }
    }

    fn scrub_secrets(&self, attempt: &mut Attempt, stream: &mut Streamed) {
        if self.secrets.is_empty() {
            return;
        }
        let s = &self.secrets;
        for text in [&mut stream.text, &mut stream.reasoning]
            .into_iter()
            .chain(stream.refusal.as_mut())
            .chain(attempt.error.as_mut())
            .chain(stream.model.as_mut())
            .chain(stream.error.as_mut())
            .chain(stream.finish.as_mut().map(|f| &mut f.reason))
            .chain(stream.unrecognised_finish.as_mut())
            // A key echoed into a tool call's arguments may span the pieces it came in:
            // each event was scrubbed, the assembled call is scrubbed again.
            .chain(
                stream
                    .tool_calls
                    .iter_mut()
                    .flat_map(|c| [&mut c.arguments, &mut c.name, &mut c.id]),
            )
        {
            s.scrub_in_place(text);
        }
    }

    /// A response that is not a 2xx: what it says (`HTTP 429: …`, its body read until
    /// `read_until`, secrets scrubbed before and after reading and only then cut to
    /// length, so no part of a secret survives the cut) and how long it asks to wait.
    async fn refusal(
        &self,
        response: HttpResponse,
        read_until: Instant,
    ) -> (String, Option<Duration>) {
        let retry_after = retry::retry_after(&response.headers, promptgauge_base::clock::now());
        let body = read_error_body(response.body, read_until).await;
        let body = self.secrets.scrub(&body);
        let message = match redirect_message(response.status, &response.headers) {
            Some(m) => protocol::truncate(&self.secrets.scrub(&m), 300),
            None => protocol::truncate(
                &self.secrets.scrub(&self.protocol.error_message(&body)),
                300,
            ),
        };
        let e = format!(
            "HTTP {}{}",
            response.status,
            if message.is_empty() {
                String::new()
            } else {
                format!(": {message}")
            }
        );
        (e, retry_after)
    }

    /// One HTTP request, under the first-token, idle and total deadlines.
    async fn attempt(&self, request: HttpRequest) -> AttemptResult {
        let clock = AttemptClock::start(&self.config);
        let mut attempt = Attempt::unsent();
        let response = match self.connect(request, &clock).await {
            Ok(response) => response,
            Err((outcome, e)) => {
                let latency_ms = clock.latency_ms(None);
                return AttemptResult::ended(
                    attempt,
                    Streamed::default(),
                    outcome,
                    Some(e),
                    latency_ms,
                );
            }
        };
        attempt.status = Some(response.status);
        let remaining_requests = self.protocol.remaining_requests(&response.headers);
        if !(200..300).contains(&response.status) {
            let read_until = clock
                .first
                .max(deadline_after(
                    Instant::now(),
                    self.config.limits.idle_timeout,
                ))
                .min(clock.total);
            let (e, retry_after) = self.refusal(response, read_until).await;
            attempt.retry_after_ms = retry_after.map(ms);
            let latency_ms = clock.latency_ms(None);
            let mut result = AttemptResult::ended(
                attempt,
                Streamed::default(),
                Outcome::HttpError,
                Some(e),
                latency_ms,
            );
            result.retry_after = retry_after;
            return result;
        }

        let mut body = response.body;
        let mut read = StreamRead::new(clock.sent);
        let end = self.read_stream(&mut body, &mut read, &clock).await;
        attempt.ttft_ms = read.ttft_ms;
        if let Some(e) = read.stream.error.clone() {
            let latency_ms = clock.latency_ms(None);
            let retryable = !read.stream.error_is_final;
            let mut result = AttemptResult::ended(
                attempt,
                read.stream,
                Outcome::StreamError,
                Some(e),
                latency_ms,
            );
            // The provider said the request is at fault: it would fail the same way again.
            result.retryable = retryable;
            return result;
        }
        let (outcome, error) = outcome_of(&read.stream, end);
        let oversized = outcome == Outcome::StreamError
            && read.received > self.config.limits.max_response_bytes;
        let whole = outcome.finished() && !read.ended;
        let latency_ms = clock.latency_ms(read.complete_at);
        let mut result = AttemptResult::ended(attempt, read.stream, outcome, error, latency_ms);
        result.retryable = !oversized;
        result.remaining_requests = remaining_requests;
        if whole {
            // Read the body's end (it follows at once) so the connection is reused; a server
            // that keeps it open just loses the connection.
            let _ = timeout_at(Instant::now() + DRAIN, async {
                while let Some(Ok(_)) = body.next().await {}
            })
            .await;
        }
        result
    }

    /// Sends the request and waits for the response to begin, until the first-token deadline.
    async fn connect(
        &self,
        request: HttpRequest,
        clock: &AttemptClock,
    ) -> Result<HttpResponse, (Outcome, String)> {
        match timeout_at(clock.first, self.transport.send(request)).await {
            Err(_) => Err((
                Outcome::NoFirstToken,
                format!("no response within {}", human(clock.first - clock.sent)),
            )),
            Ok(Err(e)) => Err((Outcome::HttpError, format!("connection failed: {e}"))),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// Reads the answer's events until it is whole (and its usage came, or the grace ran
    /// out), the stream ends, or a deadline passes or the stream breaks: `Err` says which.
    async fn read_stream(
        &self,
        body: &mut transport::BodyStream,
        read: &mut StreamRead,
        clock: &AttemptClock,
    ) -> Result<(), (Outcome, String)> {
        let mut decoder = sse::Decoder::new();
        let mut events = Vec::new();
        loop {
            let deadline = read.deadline(clock, &self.config);
            let chunk = match timeout_at(deadline, body.next()).await {
                Err(_) => return read.timed_out(deadline, clock, &self.config),
                Ok(None) => {
                    decoder.finish();
                    read.ended = true;
                    return Ok(());
                }
                Ok(Some(Err(e))) => return Err((Outcome::Cut, format!("stream broke: {e}"))),
                Ok(Some(Ok(chunk))) => chunk,
            };
            read.received += chunk.len();
            if read.received > self.config.limits.max_response_bytes {
                return Err((
                    Outcome::StreamError,
                    format!(
                        "the response exceeded max_response_bytes ({} bytes); not retried",
                        self.config.limits.max_response_bytes
                    ),
                ));
            }
            decoder.feed(&chunk, &mut events);
            if !events.is_empty() && self.take_events(read, &mut events, clock.sent) {
                return Ok(());
            }
        }
    }

    /// Decodes events into the stream, each scrubbed of secrets first. True when nothing
    /// more is awaited: the stream said it failed or ended, or the answer is whole with its
    /// usage.
    fn take_events(
        &self,
        read: &mut StreamRead,
        events: &mut Vec<sse::Event>,
        sent: Instant,
    ) -> bool {
        read.first_event = true;
        read.last_event = Instant::now();
        let had_usage = read.stream.usage.is_some();
        for event in events.drain(..) {
            let data = self.secrets.scrub(&event.data);
            if self.protocol.decode(&mut read.stream, &event.event, &data) && read.ttft_ms.is_none()
            {
                read.ttft_ms = Some(ms(sent.elapsed()));
            }
        }
        if read.stream.error.is_some() || read.stream.done {
            return true;
        }
        read.note_whole(had_usage)
    }
}

/// The run stopped, or is winding down, before the job's next step: the job is left for a
/// resume, not failed.
struct Aborted;

/// One job on its way to an answer: what it has so far, and how it asks now.
struct JobRun<'a> {
    job: &'a JobRequest,
    result: JobResult,
    /// The dialect the next attempt speaks.
    dialect: Dialect,
    /// The status that made this job fall back to a plainer dialect, if one did.
    refused: Option<u16>,
    /// When the first attempt was sent.
    first_sent: Option<Instant>,
    /// When the last attempt was sent.
    last_sent: Option<Instant>,
}

impl<'a> JobRun<'a> {
    fn new(job: &'a JobRequest, dialect: Dialect) -> Self {
        JobRun {
            job,
            result: JobResult::default(),
            dialect,
            refused: None,
            first_sent: None,
            last_sent: None,
        }
    }

    /// Notes that an attempt is sent now.
    fn sending(&mut self) {
        let now = Instant::now();
        self.first_sent.get_or_insert(now);
        self.last_sent = Some(now);
    }

    /// Keeps what an attempt's stream said: the job's answer, if it is the last.
    fn keep(&mut self, stream: Streamed) {
        self.result.refusal = refusal_of(&stream);
        self.result.text = stream.text;
        self.result.reasoning = stream.reasoning;
        self.result.tool_calls = stream.tool_calls;
        self.result.finish_reason = stream.finish.map(|f| f.reason);
        self.result.usage = stream.usage;
        self.result.model = stream.model;
    }

    /// The job's result, with the time its answer took: from the first attempt sent to the
    /// end of the last attempt's answer, as its latency measures it (not the wait for the
    /// connection to close after it).
    fn into_result(self) -> JobResult {
        let mut result = self.result;
        if let (Some(first), Some(last), Some(a)) =
            (self.first_sent, self.last_sent, result.attempts.last())
        {
            result.answer_ms = Some(ms(last - first) + a.latency_ms);
        }
        result
    }
}

/// When an attempt was sent, and its deadlines.
struct AttemptClock {
    sent: Instant,
    /// For the response and its first event.
    first: Instant,
    total: Instant,
}

impl AttemptClock {
    /// The deadlines of an attempt sent now.
    fn start(config: &ClientConfig) -> Self {
        let sent = Instant::now();
        let total = deadline_after(sent, config.limits.total_timeout);
        AttemptClock {
            sent,
            first: deadline_after(sent, config.limits.first_token_timeout).min(total),
            total,
        }
    }

    /// From sending to `ended` (now, when `None`).
    fn latency_ms(&self, ended: Option<Instant>) -> f64 {
        ms(ended.unwrap_or_else(Instant::now) - self.sent)
    }
}

/// An answer's stream as it is read.
struct StreamRead {
    stream: Streamed,
    ttft_ms: Option<f64>,
    first_event: bool,
    last_event: Instant,
    /// Bytes received so far.
    received: usize,
    /// The body ended (rather than the reading stopping early).
    ended: bool,
    /// When the answer was whole: its finish_reason (or the usage chunk that followed
    /// within the grace). Latency ends there, not when the server closes the stream.
    complete_at: Option<Instant>,
}

impl StreamRead {
    fn new(sent: Instant) -> Self {
        StreamRead {
            stream: Streamed::default(),
            ttft_ms: None,
            first_event: false,
            last_event: sent,
            received: 0,
            ended: false,
            complete_at: None,
        }
    }

    /// Until when to wait for the next chunk.
    fn deadline(&self, clock: &AttemptClock, config: &ClientConfig) -> Instant {
        match self.complete_at {
            // The answer is whole; wait only a moment for its usage or its end.
            Some(at) => deadline_after(at, config.finish_grace)
                .min(deadline_after(self.last_event, config.limits.idle_timeout))
                .min(clock.total),
            None if self.first_event => {
                deadline_after(self.last_event, config.limits.idle_timeout).min(clock.total)
            }
            None => clock.first,
        }
    }

    /// What it means that `deadline` passed: the grace after a whole answer is over, or the
    /// attempt stalled (no first event, past its total timeout, or idle too long).
    fn timed_out(
        &self,
        deadline: Instant,
        clock: &AttemptClock,
        config: &ClientConfig,
    ) -> Result<(), (Outcome, String)> {
        if self.complete_at.is_some() {
            Ok(())
        } else if !self.first_event {
            Err((
                Outcome::NoFirstToken,
                format!("no first event within {}", human(clock.first - clock.sent)),
            ))
        } else if deadline >= clock.total {
            Err((
                Outcome::Stalled,
                format!(
                    "attempt exceeded total_timeout {}",
                    human(config.limits.total_timeout)
                ),
            ))
        } else {
            Err((
                Outcome::Stalled,
                format!("no event for {}", human(config.limits.idle_timeout)),
            ))
        }
    }

    /// Notes when the answer became whole: at its finish_reason, or at the usage chunk that
    /// followed it. True once the usage is in too: nothing more to wait for.
    fn note_whole(&mut self, had_usage: bool) -> bool {
        match self.complete_at {
            None if self.stream.finish.is_some() => {
                self.complete_at = Some(self.last_event);
                // Usage came first (or with the finish): nothing more to wait for.
                self.stream.usage.is_some()
            }
            Some(_) if !had_usage && self.stream.usage.is_some() => {
                self.complete_at = Some(self.last_event);
                true
            }
            _ => false,
        }
    }
}

impl Attempt {
    /// An attempt not yet answered.
    fn unsent() -> Self {
        Attempt {
            outcome: Outcome::HttpError,
            status: None,
            error: None,
            ttft_ms: None,
            latency_ms: 0.0,
            retry_after_ms: None,
            wait_ms: None,
            stream_options: false,
            ignored_events: 0,
            usage: None,
            replica: None,
        }
    }

    /// An attempt nobody waited on (a batch's): its outcome, status and error, no latency.
    fn unmeasured(outcome: Outcome, status: Option<u16>, error: Option<String>) -> Self {
        Attempt {
            outcome,
            status,
            error,
            ..Attempt::unsent()
        }
    }
}

impl AttemptResult {
    /// An attempt that ended with `outcome` (and `error`) after `latency_ms`.
    fn ended(
        mut attempt: Attempt,
        stream: Streamed,
        outcome: Outcome,
        error: Option<String>,
        latency_ms: f64,
    ) -> Self {
        attempt.outcome = outcome;
        attempt.error = error;
        attempt.latency_ms = latency_ms;
        attempt.ignored_events = stream.ignored;
        AttemptResult {
            attempt,
            stream,
            retry_after: None,
            retryable: true,
            remaining_requests: None,
        }
    }
}

/// What a redirect the transport did not follow means: a 301, 302 or 303 would turn the
/// POST into a GET without the prompt (and a GET's reply would be graded as the answer);
/// a 307 or 308 that is still here went on too long or left HTTP. The target is shown
/// without credentials or query values.
fn redirect_message(status: u16, headers: &[(String, String)]) -> Option<String> {
    if !(300..400).contains(&status) {
        return None;
    }
    let to = headers
        .iter()
        .find(|(k, _)| k == "location")
        .map(|(_, v)| format!(" to {}", secrets::redact_url(v.trim())))
        .unwrap_or_default();
    Some(match status {
        307 | 308 => format!(
            "the server redirects{to} once too often (more than 5 times, or away from HTTP); not followed"
        ),
        _ => format!(
            "the server redirects{to}, which would turn the POST into a GET without the prompt; not followed: use the URL it points to as the base URL"
        ),
    })
}

fn describe_failure(a: &Attempt) -> String {
    let what = serde_json::to_value(a.outcome)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    match &a.error {
        Some(e) => format!("{what}: {e}"),
        None => what,
    }
}

async fn read_error_body(mut body: transport::BodyStream, deadline: Instant) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY_CAP {
        match timeout_at(deadline, body.next()).await {
            Ok(Some(Ok(chunk))) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(ERROR_BODY_CAP);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What an error body says: its `error.message` (OpenAI's and Anthropic's shape), else its
/// first 300 characters.
pub(crate) fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(serde_json::Value::as_str)
                .map(String::from)
        })
        .unwrap_or_else(|| protocol::truncate(text.trim(), 300).to_string())
}

/// A duration in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}
