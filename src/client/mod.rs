//! The streaming chat client: one job in, one answer (or a clear failure) out.
//!
//! It owns every deadline (first token, idle, total), the concurrency gate, the retry loop
//! and the API key. Time is tokio's clock, which tests pause and advance, so backoff and
//! timeout tests run in milliseconds.

pub mod cache;
pub(crate) mod limits;
mod message;
mod openai;
pub mod pool;
pub mod protocol;
pub(crate) mod retry;
pub(crate) mod secrets;
pub mod sse;
pub mod transport;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::time::{Instant, timeout_at};
use tokio_util::sync::CancellationToken;

pub use cache::Cache;
pub use message::ChatMessage;
pub use openai::OpenAiChat;
pub use protocol::{Dialect, FinishKind, Protocol, ProtocolKind, Streamed, ToolCall, Usage};
pub use retry::Outcome;
pub use secrets::Secrets;
pub use transport::{HttpRequest, HttpResponse, ReqwestTransport, Transport, TransportError};

/// An API key. It is sent in one header and shown nowhere else.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key read from the environment.
    pub fn new(key: String) -> Self {
        ApiKey(key)
    }

    /// The value, for the one header that carries it and for [`Secrets`].
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(redacted)")
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
    /// Shrink a replica's gate on 429s and grow it back after sustained success.
    pub adaptive: bool,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// Name of the variable the key came from, for error messages.
    pub api_key_env: String,
    pub concurrency: usize,
    pub max_attempts: u32,
    pub first_token_timeout: Duration,
    pub idle_timeout: Duration,
    pub total_timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// A `Retry-After` longer than this fails the job instead of waiting.
    pub max_retry_after: Duration,
    /// After a `finish_reason`, how long to wait for a usage chunk or the end of the stream;
    /// the answer is complete either way.
    pub finish_grace: Duration,
    /// A streamed response larger than this fails the job (a runaway generation).
    pub max_response_bytes: usize,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// Seed for the backoff jitter; `None` draws one from the OS.
    pub seed: Option<u64>,
}

impl ClientConfig {
    /// Defaults (the limits README.md's "Files in brief" lists) for a base URL and model.
    pub fn new(base_url: &str, model: &str) -> Self {
        ClientConfig {
            base_url: base_url.trim_end_matches('/').to_string(),
            protocol: ProtocolKind::default(),
            replicas: Vec::new(),
            adaptive: false,
            model: model.to_string(),
            api_key: None,
            api_key_env: "OPENAI_API_KEY".into(),
            concurrency: 8,
            max_attempts: 6,
            first_token_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            total_timeout: Duration::from_secs(300),
            backoff_base: Duration::from_millis(250),
            backoff_cap: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(300),
            finish_grace: FINISH_GRACE,
            max_response_bytes: 4 * 1024 * 1024,
            requests_per_minute: None,
            tokens_per_minute: None,
            seed: None,
        }
    }
}

/// One logical request.
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub messages: Vec<ChatMessage>,
    pub params: Map<String, Value>,
    /// Reused by every attempt of this job, so a server can deduplicate.
    pub idempotency_key: String,
    /// Tokens reserved against tokens_per_minute before each attempt: the estimated
    /// prompt tokens plus `max_tokens`.
    pub reserve_tokens: u32,
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
#[derive(Debug, Clone)]
pub struct JobResult {
    pub attempts: Vec<Attempt>,
    /// The final attempt's stream; only trustworthy when `answered()`.
    pub text: String,
    pub reasoning: String,
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
pub type EventSink = Arc<dyn Fn(ClientEvent) + Send + Sync>;

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
    limits: limits::Limits,
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
            FinishKind::Stopped => (Outcome::Complete, None),
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
            Some(match &stream.unrecognised_finish {
                Some(r) => {
                    format!("the stream ended with finish_reason {r:?}, which is not a finish")
                }
                None => "the stream ended without a finish_reason".to_string(),
            }),
        ),
    }
}

/// Caps what is read of an error response body.
const ERROR_BODY_CAP: usize = 64 * 1024;

impl Client {
    /// A client speaking the endpoint's protocol (`config.protocol`).
    pub fn new(transport: Arc<dyn Transport>, config: ClientConfig) -> Self {
        let protocol = config.protocol.build();
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
        Client {
            secrets: Secrets::new(config.api_key.as_ref().map(ApiKey::expose), &base_urls),
            pool: pool::Pool::new(
                &base_urls
                    .iter()
                    .map(|b| (b.clone(), protocol.url(b)))
                    .collect::<Vec<_>>(),
                config.concurrency,
                config.adaptive,
            ),
            protocol,
            limits: limits::Limits::new(config.requests_per_minute, config.tokens_per_minute),
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
    pub(crate) fn drain_token(&self) -> CancellationToken {
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
            url: url.to_string(),
            headers: self.protocol.headers(job, self.config.api_key.as_ref()),
            body: self.protocol.body(&self.config.model, job, dialect),
        }
    }

    /// Runs one job to an answer or a failure, retrying as the policy says.
    pub async fn execute(&self, job: &JobRequest) -> JobResult {
        let mut sent = (None, None);
        let mut result = self.attempts(job, &mut sent).await;
        // To the end of the last attempt's answer, as its latency measures it (not the wait
        // for the connection to close after it).
        if let ((Some(first), Some(last)), Some(a)) = (sent, result.attempts.last()) {
            result.answer_ms = Some(ms(last - first) + a.latency_ms);
        }
        result
    }

    /// The attempts of one job; `sent` keeps when the first and the last were sent.
    async fn attempts(
        &self,
        job: &JobRequest,
        sent: &mut (Option<Instant>, Option<Instant>),
    ) -> JobResult {
        let mut result = JobResult {
            attempts: Vec::new(),
            text: String::new(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            finish_reason: None,
            usage: None,
            model: None,
            answer_ms: None,
            failure: None,
            aborted: false,
        };
        let mut dialect = Dialect(self.dialect.load(Ordering::Relaxed));
        // The status that made this job fall back to a plainer dialect, if one did.
        let mut refused: Option<u16> = None;
        loop {
            // Winding down: no new attempt; the job is left for a resume, not failed.
            if self.drain.is_cancelled() || self.stop.is_cancelled() {
                result.aborted = true;
                return result;
            }
            if !self.limits.is_empty() {
                let reserved = tokio::select! {
                    biased;
                    _ = self.stop.cancelled() => { result.aborted = true; return result; }
                    _ = self.drain.cancelled() => { result.aborted = true; return result; }
                    r = self.limits.reserve(job.reserve_tokens) => r,
                };
                if let Err(e) = reserved {
                    result.failure = Some(e);
                    return result;
                }
            }
            let (replica, permit) = tokio::select! {
                biased;
                _ = self.stop.cancelled() => { result.aborted = true; return result; }
                _ = self.drain.cancelled() => { result.aborted = true; return result; }
                p = self.pool.acquire() => p,
            };
            let url = &self.pool.replicas[replica].url;
            let request = self.request(url, job, dialect);
            let observed = self.wants_attempts();
            let shown_headers = if observed {
                request.redacted_headers()
            } else {
                Vec::new()
            };
            let now = Instant::now();
            sent.0.get_or_insert(now);
            sent.1 = Some(now);
            let outcome = tokio::select! {
                biased;
                _ = self.stop.cancelled() => { result.aborted = true; return result; }
                r = self.attempt(request) => r,
            };
            drop(permit);
            let AttemptResult {
                mut attempt,
                mut stream,
                retry_after,
                retryable,
                remaining_requests,
            } = outcome;
            // What the server sent back may quote the key (an echoed header in an error
            // body, an answer that repeats it): nothing it said leaves here unscrubbed.
            self.scrub(&mut attempt, &mut stream);
            attempt.stream_options = self.protocol.asks_for_usage(dialect);
            // The server started answering: this attempt is billed, whole or not.
            if attempt.status == Some(200) {
                attempt.usage = Some(stream.usage.unwrap_or_else(|| {
                    let prompt: usize =
                        job.messages.iter().map(|m| m.content.chars().count()).sum();
                    Usage::estimate(prompt, &stream.text, &stream.reasoning)
                }));
            }
            if self.pool.replicas.len() > 1 {
                attempt.replica = Some(replica);
            }
            let status = attempt.status;
            let limit = self.pool.replicas[replica].gate.limit();
            let (health, why) = health_of(&attempt, remaining_requests, limit);
            self.pool.report(replica, health, &why);
            for event in self.pool.take_events() {
                self.emit(ClientEvent::Pool(event));
            }
            let mut next = retry::next_step(attempt.outcome, status);
            if !retryable && next == retry::Next::Retry {
                next = retry::Next::Fail;
            }
            // The server may only not know an optional feature: try once without it, at once.
            // Each step is plainer than the last, so this ends.
            let plainer = status.and_then(|s| self.protocol.fallback(job, dialect, s));
            let immediate = plainer.is_some();
            if let Some(d) = plainer {
                refused = status;
                dialect = d;
                next = retry::Next::Retry;
            } else if refused.is_some() && status != refused {
                // Not refused again: the plainer form is the run's from now on.
                self.dialect.store(dialect.0, Ordering::Relaxed);
            }
            result.text = stream.text;
            result.reasoning = stream.reasoning;
            result.tool_calls = stream.tool_calls;
            result.finish_reason = stream.finish.map(|f| f.reason);
            result.usage = stream.usage;
            result.model = stream.model;

            let number = result.attempts.len() + 1;
            let mut wait = None;
            match next {
                retry::Next::Done => {}
                retry::Next::StopRun => {
                    let fatal = match status {
                        Some(402) => Fatal::PaymentRequired {
                            message: attempt.error.clone().unwrap_or_default(),
                        },
                        _ => Fatal::Unauthorized {
                            status: status.unwrap_or(401),
                            env: self.config.api_key_env.clone(),
                        },
                    };
                    result.failure = Some(self.secrets.scrub(&fatal.to_string()).into_owned());
                    self.stop_run(fatal);
                }
                retry::Next::Fail => {
                    result.failure = Some(describe_failure(&attempt));
                }
                retry::Next::Retry if number as u32 >= self.config.max_attempts => {
                    result.failure = Some(format!(
                        "gave up after {number} attempts; last: {}",
                        describe_failure(&attempt)
                    ));
                }
                retry::Next::Retry => match retry_after {
                    Some(ra) if ra > self.config.max_retry_after => {
                        result.failure = Some(format!(
                            "the provider asked to wait {}, more than limits.max_retry_after ({})",
                            if ra >= Duration::from_secs(86_400 * 365) {
                                "more than a year".to_string()
                            } else {
                                human(ra)
                            },
                            human(self.config.max_retry_after)
                        ));
                    }
                    _ if immediate => wait = Some(Duration::ZERO),
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
                        wait = Some(ra.map_or(b, |ra| ra.max(b)));
                    }
                },
            }
            attempt.wait_ms = wait.map(ms);
            if observed {
                self.emit(ClientEvent::Attempt(AttemptEvent {
                    idempotency_key: job.idempotency_key.clone(),
                    number,
                    url: self.pool.replicas[replica].shown_url.clone(),
                    headers: shown_headers,
                    attempt: attempt.clone(),
                }));
            }
            result.attempts.push(attempt);
            let Some(wait) = wait else {
                return result;
            };
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => { result.aborted = true; return result; }
                _ = self.drain.cancelled() => { result.aborted = true; return result; }
                _ = tokio::time::sleep(wait) => {}
            }
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
            .chain(attempt.error.as_mut())
            .chain(stream.model.as_mut())
            .chain(stream.error.as_mut())
            .chain(stream.finish.as_mut().map(|f| &mut f.reason))
            .chain(stream.unrecognised_finish.as_mut())
        {
            s.scrub_in_place(text);
        }
    }

    /// One HTTP request, under the first-token, idle and total deadlines.
    /// A response that is not a 2xx: what it says (`HTTP 429: …`, its body read until
    /// `read_until`, secrets scrubbed before and after reading and only then cut to
    /// length, so no part of a secret survives the cut) and how long it asks to wait.
    async fn refusal(
        &self,
        response: HttpResponse,
        read_until: Instant,
    ) -> (String, Option<Duration>) {
        let retry_after = retry::retry_after(&response.headers, SystemTime::now());
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

    async fn attempt(&self, request: HttpRequest) -> AttemptResult {
        let sent = Instant::now();
        let total_deadline = deadline_after(sent, self.config.total_timeout);
        let first_deadline =
            deadline_after(sent, self.config.first_token_timeout).min(total_deadline);
        let mut stream = Streamed::default();
        let mut attempt = Attempt {
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
        };
        // When the answer was whole: its finish_reason (or the usage chunk that followed
        // within the grace). Latency ends there, not when the server closes the stream.
        let mut complete_at: Option<Instant> = None;
        let finish = |mut attempt: Attempt,
                      stream: Streamed,
                      outcome,
                      error: Option<String>,
                      retry_after,
                      ended: Option<Instant>| {
            attempt.outcome = outcome;
            attempt.error = error;
            attempt.latency_ms = ms(ended.unwrap_or_else(Instant::now) - sent);
            attempt.ignored_events = stream.ignored;
            AttemptResult {
                attempt,
                stream,
                retry_after,
                retryable: true,
                remaining_requests: None,
            }
        };

        let response = match timeout_at(first_deadline, self.transport.send(request)).await {
            Err(_) => {
                let e = format!("no response within {}", human(first_deadline - sent));
                return finish(attempt, stream, Outcome::NoFirstToken, Some(e), None, None);
            }
            Ok(Err(e)) => {
                return finish(
                    attempt,
                    stream,
                    Outcome::HttpError,
                    Some(format!("connection failed: {e}")),
                    None,
                    None,
                );
            }
            Ok(Ok(r)) => r,
        };
        attempt.status = Some(response.status);
        let remaining_requests = self.protocol.remaining_requests(&response.headers);
        if !(200..300).contains(&response.status) {
            let read_until = first_deadline
                .max(deadline_after(Instant::now(), self.config.idle_timeout))
                .min(total_deadline);
            let (e, retry_after) = self.refusal(response, read_until).await;
            attempt.retry_after_ms = retry_after.map(ms);
            return finish(
                attempt,
                stream,
                Outcome::HttpError,
                Some(e),
                retry_after,
                None,
            );
        }

        let mut body = response.body;
        let mut decoder = sse::Decoder::new();
        let mut events = Vec::new();
        let mut first_event = false;
        let mut last_event = sent;
        let mut received = 0usize;
        let mut ended = false;
        let end = loop {
            let deadline = match complete_at {
                // The answer is whole; wait only a moment for its usage or its end.
                Some(at) => deadline_after(at, self.config.finish_grace)
                    .min(deadline_after(last_event, self.config.idle_timeout))
                    .min(total_deadline),
                None if first_event => {
                    deadline_after(last_event, self.config.idle_timeout).min(total_deadline)
                }
                None => first_deadline,
            };
            match timeout_at(deadline, body.next()).await {
                Err(_) if complete_at.is_some() => break Ok(()),
                Err(_) if !first_event => {
                    break Err((
                        Outcome::NoFirstToken,
                        format!("no first event within {}", human(first_deadline - sent)),
                    ));
                }
                Err(_) if deadline >= total_deadline => {
                    break Err((
                        Outcome::Stalled,
                        format!(
                            "attempt exceeded total_timeout {}",
                            human(self.config.total_timeout)
                        ),
                    ));
                }
                Err(_) => {
                    break Err((
                        Outcome::Stalled,
                        format!("no event for {}", human(self.config.idle_timeout)),
                    ));
                }
                Ok(None) => {
                    decoder.finish();
                    ended = true;
                    break Ok(());
                }
                Ok(Some(Err(e))) => break Err((Outcome::Cut, format!("stream broke: {e}"))),
                Ok(Some(Ok(chunk))) => {
                    received += chunk.len();
                    if received > self.config.max_response_bytes {
                        break Err((
                            Outcome::StreamError,
                            format!(
                                "the response exceeded max_response_bytes ({} bytes); not retried",
                                self.config.max_response_bytes
                            ),
                        ));
                    }
                    decoder.feed(&chunk, &mut events);
                    if events.is_empty() {
                        continue;
                    }
                    first_event = true;
                    last_event = Instant::now();
                    let had_usage = stream.usage.is_some();
                    for event in events.drain(..) {
                        let data = self.secrets.scrub(&event.data);
                        if self.protocol.decode(&mut stream, &event.event, &data)
                            && attempt.ttft_ms.is_none()
                        {
                            attempt.ttft_ms = Some(ms(sent.elapsed()));
                        }
                    }
                    if stream.error.is_some() || stream.done {
                        break Ok(());
                    }
                    match complete_at {
                        None if stream.finish.is_some() => {
                            complete_at = Some(last_event);
                            // Usage came first (or with the finish): nothing more to wait for.
                            if stream.usage.is_some() {
                                break Ok(());
                            }
                        }
                        Some(_) if !had_usage && stream.usage.is_some() => {
                            complete_at = Some(last_event);
                            break Ok(());
                        }
                        _ => {}
                    }
                }
            }
        };
        if let Some(e) = stream.error.clone() {
            return finish(attempt, stream, Outcome::StreamError, Some(e), None, None);
        }
        let (outcome, error) = outcome_of(&stream, end);
        let oversized =
            outcome == Outcome::StreamError && received > self.config.max_response_bytes;
        let whole = outcome.finished() && !ended;
        let mut result = finish(attempt, stream, outcome, error, None, complete_at);
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

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}
