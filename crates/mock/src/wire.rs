//! What the simulator's files share: its configuration ([`MockConfig`]), its counters
//! ([`Stats`]), a request as it arrives ([`MockRequest`]), the reply it gets
//! ([`MockReply`], a script of [`ReplyStep`]s) and the faults a reply may meet. Which
//! protocol a request speaks is `served.rs`'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;

use super::answers;

/// How a 429 says when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    Seconds(u64),
    /// An HTTP date this many seconds ahead.
    Date(u64),
    Millis(u64),
}

/// Where usage is reported, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageMode {
    /// A final chunk with empty `choices`, when the client asked with `stream_options`.
    Separate,
    /// Inside the chunk that carries `finish_reason`.
    InLastChunk,
    /// Never while streaming.
    None,
}

/// Per-attempt probabilities of each fault; they are tried in this order.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    pub rate_429: f64,
    pub rate_5xx: f64,
    pub hang: f64,
    pub reset: f64,
    pub cut: f64,
    pub stall: f64,
    pub error_event: f64,
    /// Ends mid-answer with the protocol's failed ending: `response.failed` in the
    /// Responses API, an error chunk in chat completions.
    pub failed: f64,
    /// Ends mid-answer with `finish_reason: content_filter`.
    pub content_filter: f64,
    /// Ends mid-answer with `finish_reason: abort` (as vLLM does when it drops a request):
    /// not a finish. On `/v1/messages`, `stop_reason: abort`, a word off Anthropic's list.
    pub abort: f64,
    /// HTTP 529 with an `overloaded_error`, Anthropic's answer when it is busy.
    pub overloaded: f64,
    /// Breaks the stream after the whole answer, before the event that ends it: no usage
    /// chunk and no `[DONE]` (still a whole answer, its finish_reason out); no
    /// `response.completed`, no `message_stop` (cut ones).
    pub cut_before_end: f64,
}

/// How an agent the simulator plays behaves: its hostile modes for tool loops, and
/// parallel calls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AgentModes {
    /// Makes every call of its script in its first answer (parallel calls), then answers.
    pub parallel: bool,
    /// The chance a call names a tool no bench declares (`no_such_tool`).
    pub wrong_tool: f64,
    /// The chance a call's arguments are not JSON (cut short).
    pub bad_json: f64,
    /// Never answers: once its script is done, it calls its last tool again, every turn.
    pub endless: bool,
}

/// How the simulator answers and misbehaves.
#[derive(Debug, Clone)]
pub struct MockConfig {
    pub model: String,
    /// Serve only `model`: a request for another gets 404, as vLLM and OpenAI answer.
    pub strict_model: bool,
    /// When set, a request without `Authorization: Bearer <key>` gets 401.
    pub api_key: Option<String>,
    /// Serve `/v1/models` without the key (as some proxies do): a refused key is then
    /// found by the first job, not by the preflight.
    pub open_models: bool,
    /// At most this many requests in flight; more get 429.
    pub capacity: Option<usize>,
    pub retry_after: RetryAfter,
    pub faults: Faults,
    /// Faults strike only the first N attempts of each idempotency key (None: every attempt).
    pub fault_attempts: Option<u32>,
    pub keepalive: bool,
    pub crlf: bool,
    pub split_utf8: bool,
    pub usage: UsageMode,
    pub no_done: bool,
    pub reject_stream_options: bool,
    /// Request bodies kept for tests to read (`Provider::bodies`): the first this many, and
    /// at most [`KEPT_BYTES`] of them. 0 for a simulator that serves runs (`promptgauge
    /// mock`, the built-in one): it then holds only the request it is answering.
    pub kept_bodies: usize,
    /// A request carrying an image larger than this (decoded) gets 400, as a provider
    /// answers one over its limit (Anthropic's 5 MB).
    pub max_image_bytes: Option<usize>,
    /// Not told the case (a standalone simulator), play an agent of this many steps: while
    /// a conversation that offers tools holds fewer tool results, call the first tool; then
    /// answer (0: off).
    pub agent_steps: u32,
    /// How the agents it plays behave and go wrong.
    pub agent_modes: AgentModes,
    /// Emit `reasoning_content` deltas before the answer.
    pub reasoning: bool,
    pub first_token_delay: Duration,
    pub token_delay: Duration,
    pub seed: u64,
    /// How often the simulated judge gets a verdict wrong.
    pub judge_error: f64,
    /// The cases behind the requests, when the simulator runs inside `promptgauge run`: it
    /// then answers any bench (see [`answers`]).
    pub oracle: Option<answers::Oracle>,
    /// An outage: every chat request after the first N gets 503, until
    /// [`Provider::end_outage`](super::Provider::end_outage).
    pub outage_after: Option<u64>,
    /// The batch API ([`batch`](super::batch)): how long a batch takes to complete, on
    /// tokio's clock.
    pub batch_delay: Duration,
    /// Batches expire with half their requests answered.
    pub batch_expires: bool,
    /// No batch API: its paths answer 404 (a self-hosted server).
    pub no_batch_api: bool,
    /// The answer to creating a batch is lost: the batch is created, and the request
    /// answered 502 (the client must find it rather than create it again).
    pub batch_lose_create: bool,
    /// The answer to creating a batch comes this long after the batch was created (a
    /// client killed meanwhile never learns its id).
    pub batch_create_delay: Duration,
    /// A batch's results give its first request twice (a provider's duplicated line).
    pub batch_duplicate: bool,
    /// A prompt holding this word is refused, in each wire's own way: chat completions'
    /// `refusal` field, the Responses API's refusal part, Anthropic's `stop_reason: refusal`.
    pub refuse_on: Option<String>,
    /// Reports this many output tokens for every answer, whatever it generated and
    /// whatever `max_tokens` allowed (a provider's accounting gone wrong).
    pub report_output_tokens: Option<u64>,
    /// Bills each PDF given by URL as this many pages (3,000 prompt tokens a page, as
    /// promptgauge counts them): a provider that read a document whose pages the run could
    /// not know before it was sent.
    pub url_document_pages: Option<u64>,
}

impl MockConfig {
    /// The simulator a run uses when no base URL is set: mildly unreliable (2% 429s with a
    /// Retry-After, 1% streams cut), so the retries show.
    pub fn demo() -> MockConfig {
        MockConfig {
            retry_after: RetryAfter::Millis(100),
            faults: Faults {
                rate_429: 0.02,
                cut: 0.01,
                ..Faults::default()
            },
            first_token_delay: Duration::from_millis(30),
            token_delay: Duration::from_millis(3),
            judge_error: 0.1,
            kept_bodies: 0,
            ..MockConfig::default()
        }
    }
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            model: "mock-model".into(),
            strict_model: false,
            refuse_on: None,
            report_output_tokens: None,
            url_document_pages: None,
            api_key: None,
            open_models: false,
            capacity: None,
            retry_after: RetryAfter::Seconds(1),
            faults: Faults::default(),
            fault_attempts: None,
            keepalive: false,
            crlf: false,
            split_utf8: false,
            usage: UsageMode::Separate,
            no_done: false,
            reject_stream_options: false,
            max_image_bytes: None,
            kept_bodies: 10_000,
            agent_steps: 0,
            agent_modes: AgentModes::default(),
            reasoning: false,
            first_token_delay: Duration::ZERO,
            token_delay: Duration::ZERO,
            seed: 0,
            judge_error: 0.0,
            oracle: None,
            outage_after: None,
            batch_delay: Duration::ZERO,
            batch_expires: false,
            no_batch_api: false,
            batch_lose_create: false,
            batch_create_delay: Duration::ZERO,
            batch_duplicate: false,
        }
    }
}

/// What the provider did, for tests and `GET /stats`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub requests: AtomicU64,
    pub status_429: AtomicU64,
    pub status_5xx: AtomicU64,
    pub status_401: AtomicU64,
    pub status_400: AtomicU64,
    pub hangs: AtomicU64,
    pub resets: AtomicU64,
    pub cuts: AtomicU64,
    pub stalls: AtomicU64,
    pub error_events: AtomicU64,
    /// Requests on the Responses API's path (`POST /v1/responses`).
    pub responses_requests: AtomicU64,
    pub content_filters: AtomicU64,
    pub aborts: AtomicU64,
    /// Requests on `POST /v1/messages` (Anthropic's wire).
    pub anthropic_messages: AtomicU64,
    /// Generations streamed to the end with a `finish_reason`.
    pub generations: AtomicU64,
    pub replays: AtomicU64,
    pub in_flight: AtomicU64,
    pub max_in_flight: AtomicU64,
    /// Requests on `POST /v1/embeddings`, and the texts they asked for.
    pub embedding_requests: AtomicU64,
    pub embedded_inputs: AtomicU64,
    /// Files requests carried (images, documents, audio), each counted once per request.
    pub files: AtomicU64,
    /// Bytes of the request bodies kept for tests (`MockConfig::kept_bodies`).
    pub kept_bytes: AtomicU64,
}

/// The most request-body bytes a simulator keeps for tests to read, however many bodies
/// `kept_bodies` allows: a run of large images never piles up in it.
pub(crate) const KEPT_BYTES: u64 = 64 << 20;

/// What the simulator did so far, for tests and `GET /stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StatsSnapshot {
    pub requests: u64,
    pub status_429: u64,
    pub status_5xx: u64,
    pub status_401: u64,
    pub status_400: u64,
    pub hangs: u64,
    pub resets: u64,
    pub cuts: u64,
    pub stalls: u64,
    pub error_events: u64,
    #[serde(default)]
    pub responses_requests: u64,
    #[serde(default)]
    pub content_filters: u64,
    #[serde(default)]
    pub aborts: u64,
    #[serde(default)]
    pub anthropic_messages: u64,
    pub generations: u64,
    pub replays: u64,
    pub in_flight: u64,
    pub max_in_flight: u64,
    #[serde(default)]
    pub embedding_requests: u64,
    #[serde(default)]
    pub embedded_inputs: u64,
    #[serde(default)]
    pub files: u64,
    /// Bytes of request bodies it holds for tests (0 when it keeps none).
    #[serde(default)]
    pub kept_bytes: u64,
}

impl Stats {
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::SeqCst);
        StatsSnapshot {
            requests: g(&self.requests),
            status_429: g(&self.status_429),
            status_5xx: g(&self.status_5xx),
            status_401: g(&self.status_401),
            status_400: g(&self.status_400),
            hangs: g(&self.hangs),
            resets: g(&self.resets),
            cuts: g(&self.cuts),
            stalls: g(&self.stalls),
            error_events: g(&self.error_events),
            responses_requests: g(&self.responses_requests),
            content_filters: g(&self.content_filters),
            aborts: g(&self.aborts),
            anthropic_messages: g(&self.anthropic_messages),
            generations: g(&self.generations),
            replays: g(&self.replays),
            in_flight: g(&self.in_flight),
            max_in_flight: g(&self.max_in_flight),
            embedding_requests: g(&self.embedding_requests),
            embedded_inputs: g(&self.embedded_inputs),
            files: g(&self.files),
            kept_bytes: g(&self.kept_bytes),
        }
    }
}

/// A request being answered: counted as in flight until dropped.
pub(crate) struct InFlight {
    stats: Arc<Stats>,
}

impl InFlight {
    pub(crate) fn new(stats: &Arc<Stats>) -> Self {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight {
            stats: stats.clone(),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.stats.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One step of a scripted response body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReplyStep {
    Write(Bytes),
    Sleep(Duration),
    /// Send nothing more, but keep the connection open.
    Stall,
    /// Drop the connection abruptly (TCP RST).
    Reset,
    /// The generation reached its end; counted, and remembered for idempotent replay.
    Generated {
        key: Option<String>,
        text: String,
        /// Its tool calls, given again with the text on a replay.
        calls: Vec<super::answers::Call>,
    },
}

/// How the simulator answers one request: a script to play, or silence.
pub(crate) enum MockReply {
    /// Accept the request and never answer.
    Hang(InFlight),
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        steps: Vec<ReplyStep>,
        in_flight: InFlight,
    },
}

/// A request as the provider sees it. Header names are lowercase.
#[derive(Debug, Clone)]
pub(crate) struct MockRequest {
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl MockRequest {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    TooMany,
    ServerError,
    Hang,
    Reset,
    Cut,
    Stall,
    ErrorEvent,
    Failed,
    ContentFilter,
    Abort,
    Overloaded,
    CutBeforeEnd,
}
