//! The simulated provider (docs/guide/simulator.md, "The simulator"): an OpenAI-compatible chat endpoint
//! (and the Responses API's, and Anthropic messages', [`anthropic`]) with a deterministic
//! model that misbehaves on demand and counts what it did.
//!
//! [`Provider::respond`] turns a request into a [`MockReply`]: a script of writes, pauses, stalls,
//! resets and ends. The TCP server ([`server`]) plays scripts onto sockets; the in-memory
//! transport ([`memory`]) plays them into the client directly, on tokio's (pausable) clock.
//!
//! Each protocol it serves is one type implementing `Served` in its own file (`chat.rs`,
//! `responses.rs`, `anthropic.rs`), listed once in `PROTOCOLS`: routing, batch lines, key
//! checks, error bodies and content parts read the list or ask the protocol at hand, and
//! nothing matches over protocols (docs/dev/architecture.md, "A fourth protocol").
//!
//! Invariant: a provider, not a part of the tool: it stands beside the runner and is
//! reached only over HTTP or the client's transport, never by a layer that measures
//! (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod answers;
pub mod anthropic;
pub mod batch;
mod chat;
mod dress;
pub mod embeddings;
mod files;
#[cfg(test)]
mod fourth;
pub mod memory;
pub mod model;
mod responses;
mod route;
mod script;
mod served;
pub mod server;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde_json::{Value, json};

use promptgauge_client::ChatMessage;
use script::{Script, StreamPlan};
use served::Served;
use wire::Fault;
pub use wire::{AgentModes, Faults, MockConfig, RetryAfter, StatsSnapshot, UsageMode};
pub(crate) use wire::{InFlight, MockReply, MockRequest, ReplyStep, Stats};

/// Every protocol the simulator serves, one line each (a type implementing [`Served`], in
/// its own file): routing, batch lines, key checks and error bodies read this list, and
/// nothing else names a protocol but where one is meant by name (embeddings and OpenAI's
/// batch API are chat completions', Message Batches Anthropic's). Its first answers what
/// names none (the in-memory transport's other paths, the models list).
pub(crate) const PROTOCOLS: &[&dyn Served] = &[
    &chat::ServedChat,
    &responses::ServedResponses,
    &anthropic::ServedMessages,
];

/// The simulated provider: answers requests and counts what it did.
pub struct Provider {
    config: MockConfig,
    stats: Arc<Stats>,
    attempts: Mutex<HashMap<String, u32>>,
    completed: Mutex<HashMap<String, (String, Vec<answers::Call>)>>,
    seen_prefixes: Mutex<HashSet<u64>>,
    serial: AtomicU64,
    bodies: Mutex<Vec<Value>>,
    /// The headers of the requests whose bodies are kept, in the same order.
    headers: Mutex<Vec<Vec<(String, String)>>>,
    /// Set once the outage (`outage_after`) is over.
    outage_over: std::sync::atomic::AtomicBool,
    /// The batch API's files and batches.
    batches: batch::BatchStore,
    /// The protocols it serves: [`PROTOCOLS`], but in a test that adds one.
    protocols: &'static [&'static dyn Served],
}

impl Provider {
    /// A simulator with this configuration.
    pub fn new(config: MockConfig) -> Self {
        Self::serving(config, PROTOCOLS)
    }

    /// A simulator serving these protocols (the first answers what names none).
    pub(crate) fn serving(config: MockConfig, protocols: &'static [&'static dyn Served]) -> Self {
        Provider {
            config,
            stats: Arc::new(Stats::default()),
            attempts: Mutex::new(HashMap::new()),
            completed: Mutex::new(HashMap::new()),
            seen_prefixes: Mutex::new(HashSet::new()),
            serial: AtomicU64::new(0),
            bodies: Mutex::new(Vec::new()),
            headers: Mutex::new(Vec::new()),
            outage_over: std::sync::atomic::AtomicBool::new(false),
            batches: batch::BatchStore::default(),
            protocols,
        }
    }

    /// The protocol a request on a path they share (the models list) speaks, by its
    /// headers: the one they name, else the first.
    fn named_by(&self, headers: &[(String, String)]) -> &'static dyn Served {
        let named = self.protocols.iter().find(|p| p.named_by(headers));
        named
            .or(self.protocols.first())
            .copied()
            .unwrap_or(&chat::ServedChat)
    }

    /// Ends the outage `outage_after` began: requests are answered again.
    pub fn end_outage(&self) {
        self.outage_over.store(true, Ordering::SeqCst);
    }

    /// What it did so far.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Its configuration.
    pub(crate) fn config(&self) -> &MockConfig {
        &self.config
    }

    /// How many requests carried this idempotency key.
    pub fn attempts_for(&self, key: &str) -> u32 {
        self.attempts
            .lock()
            .map(|a| a.get(key).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Bodies of the first requests received, in order (for tests that check what was sent).
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// The headers of the requests [`Provider::bodies`] holds, in the same order.
    pub fn headers(&self) -> Vec<Vec<(String, String)>> {
        self.headers.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// Answers a request on the batch API's paths ([`batch`]); `None` for a path it does
    /// not own.
    pub(crate) fn batch_api(
        &self,
        method: &str,
        path: &str,
        request: &MockRequest,
    ) -> Option<MockReply> {
        self.batching().batch_api(method, path, request)
    }

    /// The batch API, answering its requests through this provider.
    fn batching(&self) -> batch::Batching<'_> {
        batch::Batching {
            store: &self.batches,
            provider: self,
        }
    }

    /// Batches created so far.
    pub fn batches_created(&self) -> u64 {
        self.batches.batches_created()
    }

    /// Looks at a batch's state so far (each list entry counts one too).
    pub fn batch_polls(&self) -> u64 {
        self.batches.batch_polls()
    }

    /// Each batch's status now, by id (in the order created).
    pub fn batch_statuses(&self) -> Vec<(String, String)> {
        self.batches.batch_statuses()
    }

    /// Ends every batch at its next look, whatever `batch_delay` says (a test's way to let
    /// a long batch finish once the run that submitted it was killed).
    pub fn release_batches(&self) {
        self.batches.release_batches()
    }

    /// Requests answered inside batches so far, by their `custom_id`s, with how often each
    /// was answered (a job paid for twice shows 2).
    pub fn batched_requests(&self) -> HashMap<String, u32> {
        self.batches.batched_requests()
    }

    /// A generation was streamed to its end.
    pub(crate) fn generated(&self, key: Option<String>, text: String, calls: Vec<answers::Call>) {
        self.stats.generations.fetch_add(1, Ordering::SeqCst);
        if let (Some(key), Ok(mut done)) = (key, self.completed.lock()) {
            done.insert(key, (text, calls));
        }
    }

    fn json_reply(
        &self,
        status: u16,
        body: Value,
        extra: Vec<(String, String)>,
        in_flight: InFlight,
    ) -> MockReply {
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        headers.extend(extra);
        MockReply::Respond {
            status,
            headers,
            steps: vec![ReplyStep::Write(Bytes::from(body.to_string()))],
            in_flight,
        }
    }

    /// An error reply, its body as `protocol` writes it.
    fn error(
        &self,
        status: u16,
        message: &str,
        kind: &str,
        extra: Vec<(String, String)>,
        protocol: &dyn Served,
        in_flight: InFlight,
    ) -> MockReply {
        let body = protocol.error_body(status, message, kind);
        self.json_reply(status, body, extra, in_flight)
    }

    /// Whether a request's headers carry the key the simulator requires (any, without one),
    /// where `protocol` sends it.
    fn accepts_key(&self, protocol: &dyn Served, headers: &[(String, String)]) -> bool {
        match &self.config.api_key {
            Some(key) => protocol.carries_key(headers, key),
            None => true,
        }
    }

    /// Decides how to answer one request on `protocol`'s path (`POST /v1/chat/completions`),
    /// counted under its own counter too.
    pub(crate) fn respond(&self, protocol: &dyn Served, request: &MockRequest) -> MockReply {
        if let Some(counter) = protocol.counter(&self.stats) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        self.answer(protocol, request)
    }

    /// Answers a request that came in speaking `protocol`: read into the chat-completions
    /// form the model answers, and streamed back in the protocol's own events.
    fn answer(&self, protocol: &dyn Served, request: &MockRequest) -> MockReply {
        self.stats.requests.fetch_add(1, Ordering::SeqCst);
        let in_flight = InFlight::new(&self.stats);
        let serial = self.serial.fetch_add(1, Ordering::SeqCst);
        let key = request.header("idempotency-key").map(String::from);
        let asked = match self.read(protocol, request) {
            Ok(asked) => asked,
            Err(rejection) => return self.reject(rejection, protocol, in_flight),
        };
        let fault = match self.admit(key.as_deref(), serial) {
            Ok(fault) => fault,
            Err(rejection) => return self.reject(rejection, protocol, in_flight),
        };
        let said = self.say(&asked, key.as_deref());
        let plan = self.plan(&asked, said, key, fault);
        if asked.stream {
            self.streamed(protocol, serial, plan, in_flight)
        } else {
            self.whole(protocol, serial, plan, in_flight)
        }
    }

    /// Reads a request into the chat-completions form the model answers, keeping its body
    /// for tests, or turns it away when the key is wrong or the body unreadable.
    fn read(&self, protocol: &dyn Served, request: &MockRequest) -> Result<Asked, Rejection> {
        if !self.accepts_key(protocol, &request.headers) {
            return Err(Rejection::Unauthorized);
        }
        let body = serde_json::from_slice::<Value>(&request.body)
            .map_err(|e| Rejection::BadRequest(format!("invalid JSON body: {e}")))?;
        self.keep(&body, request);
        let mut files = served::FilesRead::default();
        let body = protocol
            .common_form(request, body, &mut files)
            .map_err(Rejection::BadRequest)?;
        self.stats.files.fetch_add(files.count, Ordering::SeqCst);
        if let Some(most) = self.config.max_image_bytes
            && files.largest_image > most
        {
            // As Anthropic words it (OpenAI's is alike): never better on a retry.
            return Err(Rejection::BadRequest(format!(
                "image exceeds {} MB maximum: {} bytes > {most} bytes",
                most as f64 / 1_048_576.0,
                files.largest_image
            )));
        }
        let messages: Vec<ChatMessage> =
            match body.get("messages").cloned().map(serde_json::from_value) {
                Some(Ok(m)) => m,
                _ => {
                    return Err(Rejection::BadRequest(
                        "`messages` must be a list of {role, content}".into(),
                    ));
                }
            };
        self.check(&body)?;
        Ok(Asked {
            files: files.count,
            url_documents: files.url_documents,
            ..Asked::of(&body, messages)
        })
    }

    /// Keeps the first `kept_bodies` bodies (at most [`wire::KEPT_BYTES`] of them), and
    /// their headers, for tests to read; none for a simulator serving runs.
    fn keep(&self, body: &Value, request: &MockRequest) {
        let size = request.body.len() as u64;
        let kept = self.stats.kept_bytes.load(Ordering::SeqCst);
        if let Ok(mut bodies) = self.bodies.lock()
            && bodies.len() < self.config.kept_bodies
            && kept + size <= wire::KEPT_BYTES
        {
            self.stats.kept_bytes.fetch_add(size, Ordering::SeqCst);
            bodies.push(body.clone());
            if let Ok(mut headers) = self.headers.lock() {
                headers.push(request.headers.clone());
            }
        }
    }

    /// Turns away what a real server refuses: another model under `strict_model`,
    /// `stream_options` where they are rejected, a `max_tokens` that is not positive.
    fn check(&self, body: &Value) -> Result<(), Rejection> {
        if self.config.strict_model {
            let asked = body.get("model").and_then(Value::as_str).unwrap_or("");
            if asked != self.config.model {
                return Err(Rejection::UnknownModel(asked.to_string()));
            }
        }
        if self.config.reject_stream_options && body.get("stream_options").is_some() {
            return Err(Rejection::BadRequest(
                "Unrecognized request argument supplied: stream_options".into(),
            ));
        }
        if let Some(max) = body
            .get("max_tokens")
            .or_else(|| body.get("max_completion_tokens"))
            && max.as_u64().is_none_or(|m| m == 0)
        {
            return Err(Rejection::BadRequest(
                "max_tokens must be a positive integer".into(),
            ));
        }
        Ok(())
    }

    /// Counts the attempt, then turns it away as a full, down or failing server does; a
    /// fault it lets through strikes mid-stream.
    fn admit(&self, key: Option<&str>, serial: u64) -> Result<Option<Fault>, Rejection> {
        let attempt = {
            let id = key.map_or_else(|| format!("serial-{serial}"), String::from);
            let mut attempts = self.attempts.lock().unwrap_or_else(|p| p.into_inner());
            let n = attempts.entry(id).or_insert(0);
            *n += 1;
            *n
        };
        if let Some(cap) = self.config.capacity
            && self.stats.in_flight.load(Ordering::SeqCst) > cap as u64
        {
            return Err(Rejection::TooMany);
        }
        let down = self.config.outage_after.is_some_and(|n| serial > n)
            && !self.outage_over.load(Ordering::SeqCst);
        if down {
            return Err(Rejection::Outage);
        }
        match self.pick_fault(key.unwrap_or(""), attempt, serial) {
            Some(Fault::TooMany) => Err(Rejection::TooMany),
            Some(Fault::ServerError) => Err(Rejection::ServerError(
                [500, 502, 503][(serial % 3) as usize],
            )),
            Some(Fault::Hang) => Err(Rejection::Hang),
            Some(Fault::Overloaded) => Err(Rejection::Overloaded),
            fault => Ok(fault),
        }
    }

    /// Answers a request turned away, in its protocol's words, and counts it.
    fn reject(
        &self,
        rejection: Rejection,
        protocol: &dyn Served,
        in_flight: InFlight,
    ) -> MockReply {
        let count = |counter: &AtomicU64| counter.fetch_add(1, Ordering::SeqCst);
        let stats = &self.stats;
        let invalid = "invalid_request_error";
        match rejection {
            Rejection::Unauthorized => {
                count(&stats.status_401);
                let message = "Incorrect API key provided.";
                self.error(401, message, invalid, vec![], protocol, in_flight)
            }
            Rejection::BadRequest(message) => {
                count(&stats.status_400);
                self.error(400, &message, invalid, vec![], protocol, in_flight)
            }
            Rejection::UnknownModel(asked) => {
                let message =
                    format!("The model `{asked}` does not exist or you do not have access to it.");
                self.error(404, &message, invalid, vec![], protocol, in_flight)
            }
            Rejection::TooMany => {
                count(&stats.status_429);
                self.too_many(protocol, in_flight)
            }
            Rejection::Outage => {
                count(&stats.status_5xx);
                let message = "The service is temporarily unavailable.";
                self.error(503, message, "server_error", vec![], protocol, in_flight)
            }
            Rejection::ServerError(status) => {
                count(&stats.status_5xx);
                let message = "The server had an error while processing your request.";
                self.error(status, message, "server_error", vec![], protocol, in_flight)
            }
            Rejection::Overloaded => {
                count(&stats.status_5xx);
                self.error(
                    529,
                    "Overloaded",
                    "overloaded_error",
                    vec![],
                    protocol,
                    in_flight,
                )
            }
            Rejection::Hang => {
                count(&stats.hangs);
                MockReply::Hang(in_flight)
            }
        }
    }

    /// What the model says: a finished answer again for a key it has seen, else a new one
    /// — in JSON when asked for, and refused when the prompt holds `refuse_on`.
    fn say(&self, asked: &Asked, key: Option<&str>) -> Said {
        let replayed = key.and_then(|k| self.completed.lock().ok().and_then(|c| c.get(k).cloned()));
        let replay = replayed.is_some();
        let (generation, mut calls) = match replayed {
            Some((text, calls)) => {
                self.stats.replays.fetch_add(1, Ordering::SeqCst);
                (plain(text), calls)
            }
            None => self.generate(asked, key),
        };
        let generation = if asked.json_mode && calls.is_empty() && !generation.text.is_empty() {
            model::Generation {
                text: answers::as_json(&generation.text),
                ..generation
            }
        } else {
            generation
        };
        // A refusal: the model's words, and the wire's refusal mark (finish `refusal`
        // here, written in each wire's way).
        let refused = !replay
            && self
                .config
                .refuse_on
                .as_deref()
                .is_some_and(|w| asked.prompt.contains(w));
        let generation = if refused {
            calls.clear();
            plain(REFUSAL.to_string())
        } else {
            generation
        };
        Said {
            generation,
            calls,
            refused,
            replay,
        }
    }

    /// A new answer and its tool calls: a judge's verdict, the model's own answer to a task
    /// it knows, or one of the shape the case expects (its oracle's hint).
    fn generate(
        &self,
        asked: &Asked,
        key: Option<&str>,
    ) -> (model::Generation, Vec<answers::Call>) {
        let hint = key.and_then(|k| self.config.oracle.as_ref().and_then(|o| (o.0)(k)));
        let tools = asked.tools.as_ref();
        let (prompt, model_name, seed) = (&asked.prompt, asked.model.as_str(), &asked.seed);
        if answers::is_judge_prompt(prompt) {
            let verdict = answers::judge(prompt, self.config.judge_error, asked.json_mode);
            return (plain(verdict), Vec::new());
        }
        // A judge call (its key says so) whose prompt the simulator cannot read.
        if key.is_some_and(|k| k.contains("-judge-")) {
            return (plain("The promptgauge simulator judges a prompt only when it marks the reference answer with <reference>…</reference> and the answer to grade with <answer>…</answer>, as the built-in judge prompt does; add them to your judge prompt to run it on the simulator.".into()), Vec::new());
        }
        match (model::generate(&asked.messages, model_name, seed), &hint) {
            // The model knows the task (the example's routing, arithmetic, echo) —
            // unless the case asks for another shape: a date in an extraction task is
            // not a sum to work out.
            (g, h)
                if g.text != model::UNKNOWN
                    && tools.is_none()
                    && h.as_ref().is_none_or(|h| {
                        matches!(
                            h.shape,
                            promptgauge_grade::Shape::Number | promptgauge_grade::Shape::Choice
                        )
                    }) =>
            {
                (g, Vec::new())
            }
            // A standalone agent of a fixed number of steps (bench/run's loop figure).
            (g, None) if tools.is_some() && self.config.agent_steps > 0 => {
                let results = tool_results(&asked.messages).len();
                let steps = self.config.agent_steps as usize;
                if results < steps || self.config.agent_modes.endless {
                    let mut calls = answers::first_tool(tools).calls;
                    // `--agent-parallel`: every call in the first answer.
                    if self.config.agent_modes.parallel && results == 0 {
                        calls = calls.iter().cycle().take(steps).cloned().collect();
                    }
                    (plain(String::new()), self.spoiled(calls, seed, results))
                } else {
                    (g, Vec::new())
                }
            }
            // An agent loop the case scripts: the next scripted call, one a request, then
            // an answer from what the calls returned.
            (_, Some(h)) if tools.is_some() && !h.tool_script.is_empty() => {
                let wrong = model::wrong(prompt, &h.case, model_name, seed);
                let (g, calls) = agent_step(h, &asked.messages, wrong, self.config.agent_modes);
                let turn = tool_results(&asked.messages).len();
                (g, self.spoiled(calls, seed, turn))
            }
            // A case with nothing to answer to (no `expected`: an imported test read for
            // its answers): what the model says of the prompt, never an empty answer.
            (g, Some(h))
                if tools.is_none()
                    && h.expected.is_empty()
                    && h.expected_json.is_none()
                    && matches!(h.shape, promptgauge_grade::Shape::Text) =>
            {
                (g, Vec::new())
            }
            // It does not, but it is told the case: an answer of the expected shape —
            // wrong when the case's files were not sent (what they show cannot be known).
            (_, Some(h)) => {
                let wrong = model::wrong(prompt, &h.case, model_name, seed)
                    || (h.files > 0 && asked.files == 0);
                let made = answers::answer(h, wrong, tools);
                (plain(made.text), made.calls)
            }
            (_, None) if tools.is_some() => {
                (plain(String::new()), answers::first_tool(tools).calls)
            }
            (g, None) => (g, Vec::new()),
        }
    }

    /// Cuts what the model said into tokens, stopping at `max_tokens`, and counts its usage:
    /// the plan each wire streams, or sends whole.
    fn plan(
        &self,
        asked: &Asked,
        said: Said,
        key: Option<String>,
        fault: Option<Fault>,
    ) -> StreamPlan {
        let mut pieces = split_tokens(&said.generation.text);
        let reasoning = if self.config.reasoning {
            split_tokens(&said.generation.reasoning)
        } else {
            Vec::new()
        };
        let mut finish = if said.refused {
            "refusal"
        } else if said.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        // Tokens are counted as prompts are, about 4 characters a token: a compact JSON
        // answer of 60 characters is 15 tokens, not the one word it is.
        let thought = tokens(&reasoning.concat()) as usize;
        if let Some(max) = asked.max_tokens.map(|m| m as usize)
            && thought + tokens(&pieces.concat()) as usize > max
        {
            cut_to_tokens(&mut pieces, max.saturating_sub(thought));
            finish = "length";
        }
        let text: String = pieces.concat();
        let usage = self.usage(asked, thought + tokens(&text) as usize, thought);
        StreamPlan {
            reasoning,
            pieces,
            calls: said.calls,
            finish,
            usage,
            include_usage: asked.include_usage,
            fault,
            replay: said.replay,
            key,
            text,
            refused: said.refused,
        }
    }

    /// Sends the answer in one JSON body, in the protocol's shape; it is generated once
    /// sent.
    fn whole(
        &self,
        protocol: &dyn Served,
        serial: u64,
        plan: StreamPlan,
        in_flight: InFlight,
    ) -> MockReply {
        let extra = replayed_header(plan.replay);
        if !plan.replay {
            self.generated(plan.key.clone(), plan.text.clone(), plan.calls.clone());
        }
        let reply = protocol.whole(&self.config, serial, &plan);
        self.json_reply(200, reply, extra, in_flight)
    }

    /// Streams the answer in the protocol's events, broken off where its fault strikes.
    fn streamed(
        &self,
        protocol: &dyn Served,
        serial: u64,
        plan: StreamPlan,
        in_flight: InFlight,
    ) -> MockReply {
        let mut headers = vec![
            ("content-type".to_string(), "text/event-stream".to_string()),
            ("cache-control".to_string(), "no-cache".to_string()),
        ];
        headers.extend(replayed_header(plan.replay));
        let fault = plan.fault;
        let script = Script {
            config: &self.config,
            id: format!("chatcmpl-mock-{serial}"),
            steps: Vec::new(),
        };
        let steps = protocol.stream(script, serial, plan);
        self.count_stream_fault(fault);
        MockReply::Respond {
            status: 200,
            headers,
            steps,
            in_flight,
        }
    }

    /// Counts a fault that struck a stream, under its kind.
    fn count_stream_fault(&self, fault: Option<Fault>) {
        let stats = &self.stats;
        let counter = match fault {
            Some(Fault::Reset) => &stats.resets,
            Some(Fault::Cut | Fault::CutBeforeEnd) => &stats.cuts,
            Some(Fault::Stall) => &stats.stalls,
            Some(Fault::ErrorEvent | Fault::Failed) => &stats.error_events,
            Some(Fault::ContentFilter) => &stats.content_filters,
            Some(Fault::Abort) => &stats.aborts,
            _ => return,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    fn too_many(&self, protocol: &dyn Served, in_flight: InFlight) -> MockReply {
        let header = match self.config.retry_after {
            RetryAfter::Seconds(s) => ("retry-after".to_string(), s.to_string()),
            RetryAfter::Date(s) => (
                "retry-after".to_string(),
                // A date beyond what the clock holds is sent as the furthest one it can.
                httpdate::fmt_http_date(
                    promptgauge_base::clock::now()
                        .checked_add(Duration::from_secs(s))
                        .unwrap_or(SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799)),
                ),
            ),
            RetryAfter::Millis(ms) => ("retry-after-ms".to_string(), ms.to_string()),
        };
        self.error(
            429,
            "Rate limit reached; please retry later.",
            "rate_limit_error",
            vec![header],
            protocol,
            in_flight,
        )
    }

    fn pick_fault(&self, key: &str, attempt: u32, serial: u64) -> Option<Fault> {
        if self.config.fault_attempts.is_some_and(|n| attempt > n) {
            return None;
        }
        let f = &self.config.faults;
        let id = if key.is_empty() {
            serial.to_string()
        } else {
            key.to_string()
        };
        let u = model::unit(&[&self.config.seed.to_string(), &id, &attempt.to_string()]);
        let mut edge = 0.0;
        for (rate, fault) in [
            (f.rate_429, Fault::TooMany),
            (f.rate_5xx, Fault::ServerError),
            (f.hang, Fault::Hang),
            (f.reset, Fault::Reset),
            (f.cut, Fault::Cut),
            (f.stall, Fault::Stall),
            (f.error_event, Fault::ErrorEvent),
            (f.failed, Fault::Failed),
            (f.content_filter, Fault::ContentFilter),
            (f.abort, Fault::Abort),
            (f.overloaded, Fault::Overloaded),
            (f.cut_before_end, Fault::CutBeforeEnd),
        ] {
            edge += rate;
            if u < edge {
                return Some(fault);
            }
        }
        None
    }

    fn usage(&self, asked: &Asked, completion: usize, reasoning: usize) -> Value {
        let messages = &asked.messages;
        let completion = self
            .config
            .report_output_tokens
            .map_or(completion, |n| n as usize);
        // A PDF given by URL, read by the provider: billed by its pages.
        let documents = self
            .config
            .url_document_pages
            .map_or(0, |pages| asked.url_documents * pages * 3_000);
        let prompt: u64 = messages.iter().map(|m| tokens(&m.content) + 3).sum::<u64>() + documents;
        // Prefix caching: a system prompt seen before is served from cache.
        let cached = match messages.first().filter(|m| m.role == "system") {
            Some(system) => {
                let h = model::unit(&[&system.content]).to_bits();
                let seen = self
                    .seen_prefixes
                    .lock()
                    .map(|mut s| !s.insert(h))
                    .unwrap_or(false);
                if seen { tokens(&system.content) } else { 0 }
            }
            None => 0,
        };
        json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion as u64,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        })
    }
}

/// The simulator's token count of a text, for prompts and answers alike: about 4
/// characters a token (docs/guide/simulator.md).
fn tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(4) as u64
}

/// Cuts the pieces of an answer to its first `most` tokens (4 characters each), the last
/// piece kept cut short as a real model stops mid-word (a word's leading space alone is
/// not kept).
fn cut_to_tokens(pieces: &mut Vec<String>, most: usize) {
    let mut room = most * 4;
    let mut kept = 0;
    for piece in pieces.iter_mut() {
        let chars = piece.chars().count();
        if chars > room {
            let start: String = piece.chars().take(room).collect();
            if !start.trim().is_empty() {
                *piece = start;
                kept += 1;
            }
            break;
        }
        room -= chars;
        kept += 1;
    }
    pieces.truncate(kept);
}

/// Splits text into token-like pieces, each a word with its leading space.
fn split_tokens(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        let space = c.is_whitespace();
        if space && in_word && !current.is_empty() {
            pieces.push(std::mem::take(&mut current));
        }
        in_word = !space;
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Why a request is answered before the model is asked, and how: an error, or silence.
enum Rejection {
    /// 401: no key, or not the one required.
    Unauthorized,
    /// 400: a body the simulator cannot read, or a setting it refuses.
    BadRequest(String),
    /// 404: another model than the one `strict_model` serves.
    UnknownModel(String),
    /// 429: over `capacity`, or the fault.
    TooMany,
    /// 503: the outage `outage_after` began.
    Outage,
    /// 500, 502 or 503: the fault.
    ServerError(u16),
    /// 529: Anthropic's busy answer.
    Overloaded,
    /// Accepted and never answered.
    Hang,
}

/// A request in chat-completions form: what the model reads, and how it is asked to answer.
struct Asked {
    messages: Vec<ChatMessage>,
    /// The messages' contents, one a line: what the judge and refusals look at.
    prompt: String,
    model: String,
    seed: String,
    tools: Option<Value>,
    json_mode: bool,
    max_tokens: Option<u64>,
    stream: bool,
    include_usage: bool,
    /// The files its parts carried.
    files: u64,
    /// The PDFs among them given by URL.
    url_documents: u64,
}

impl Asked {
    /// The settings a chat-completions body asks for, around its messages.
    fn of(body: &Value, messages: Vec<ChatMessage>) -> Self {
        let prompt = messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        Asked {
            prompt,
            messages,
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            seed: body.get("seed").map(|s| s.to_string()).unwrap_or_default(),
            tools: body
                .get("tools")
                .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
                .cloned(),
            json_mode: body
                .pointer("/response_format/type")
                .and_then(Value::as_str)
                == Some("json_object"),
            max_tokens: body
                .get("max_completion_tokens")
                .or_else(|| body.get("max_tokens"))
                .and_then(Value::as_u64),
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            include_usage: body
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            files: 0,
            url_documents: 0,
        }
    }
}

/// One step of a scripted agent: the case's next tool call while the conversation holds
/// fewer results than the script has calls (`endless`: its last call, again and again);
/// then a result as the answer — the last that holds the expected answer, else the last
/// (so an answer is right only when the results flowed back) — or another case's when
/// `wrong`.
fn agent_step(
    h: &answers::Hint,
    messages: &[ChatMessage],
    wrong: bool,
    modes: AgentModes,
) -> (model::Generation, Vec<answers::Call>) {
    let results = tool_results(messages);
    if modes.parallel && results.is_empty() {
        let calls = h
            .tool_script
            .iter()
            .map(|(name, args)| answers::Call {
                name: name.clone(),
                arguments: args.to_string(),
            })
            .collect();
        return (plain(String::new()), calls);
    }
    let next = match h.tool_script.get(results.len()) {
        None if modes.endless => h.tool_script.last(),
        next => next,
    };
    if let Some((name, args)) = next {
        let call = answers::Call {
            name: name.clone(),
            arguments: args.to_string(),
        };
        return (plain(String::new()), vec![call]);
    }
    // The last result that holds the expected answer (the other calls looked things up),
    // else the last.
    let holds = |r: &&&str| {
        h.expected
            .iter()
            .any(|e| !e.is_empty() && r.contains(e.as_str()))
    };
    let from = results.iter().rev().find(holds).or(results.last());
    let text = match (wrong, from) {
        (false, Some(last)) => last.to_string(),
        _ => h
            .others
            .iter()
            .find(|o| !h.expected.contains(o))
            .cloned()
            .unwrap_or_default(),
    };
    (plain(text), Vec::new())
}

/// What the tools returned so far in a conversation, in order (every wire's results are
/// `tool` turns in the common form).
fn tool_results(messages: &[ChatMessage]) -> Vec<&str> {
    messages
        .iter()
        .filter(|m| m.role == "tool")
        .map(|m| m.content.as_str())
        .collect()
}

impl Provider {
    /// `calls` as a hostile agent makes them: a tool that does not exist, or arguments that
    /// are not JSON, each with its chance (seeded by the sample and the turn).
    fn spoiled(&self, calls: Vec<answers::Call>, seed: &str, turn: usize) -> Vec<answers::Call> {
        let faults = self.config.agent_modes;
        let turn = turn.to_string();
        calls
            .into_iter()
            .map(|mut c| {
                if model::unit(&[seed, &turn, "wrong-tool"]) < faults.wrong_tool {
                    c.name = "no_such_tool".into();
                }
                if model::unit(&[seed, &turn, "bad-json"]) < faults.bad_json {
                    c.arguments = c.arguments.chars().take(c.arguments.len() / 2).collect();
                    c.arguments.push_str("{,");
                }
                c
            })
            .collect()
    }
}

/// What the model says to one request, before it is cut into tokens.
struct Said {
    generation: model::Generation,
    calls: Vec<answers::Call>,
    refused: bool,
    /// A finished answer given again: nothing new is generated.
    replay: bool,
}

/// A generation with no reasoning before its text.
fn plain(text: String) -> model::Generation {
    model::Generation {
        reasoning: String::new(),
        text,
    }
}

/// The header that marks an answer given again for an idempotency key, when it is one.
fn replayed_header(replay: bool) -> Vec<(String, String)> {
    if replay {
        vec![("idempotent-replayed".to_string(), "true".to_string())]
    } else {
        Vec::new()
    }
}

impl batch::Answers for Provider {
    fn config(&self) -> &MockConfig {
        &self.config
    }

    fn protocols(&self) -> &[&'static dyn Served] {
        self.protocols
    }

    fn accepts_key(&self, protocol: &dyn Served, headers: &[(String, String)]) -> bool {
        Provider::accepts_key(self, protocol, headers)
    }

    fn answer(&self, protocol: &dyn Served, request: &MockRequest) -> MockReply {
        Provider::answer(self, protocol, request)
    }

    fn generated(&self, key: Option<String>, text: String, calls: Vec<answers::Call>) {
        Provider::generated(self, key, text, calls)
    }
}

/// What the simulated model says when it refuses.
pub const REFUSAL: &str = "I can't help with that request.";

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulator serving runs holds no request it has answered, and one serving tests at
    /// most [`wire::KEPT_BYTES`] of them, however large its images (issue 50, item 24).
    #[test]
    fn what_the_simulator_keeps_of_requests_is_bounded() {
        use base64::Engine;
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.resize(1 << 20, 0);
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        );
        let body = json!({"model": "mock-model", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is in it?"},
            {"type": "image_url", "image_url": {"url": url}}]}]});
        let request = MockRequest {
            headers: vec![("content-type".into(), "application/json".into())],
            body: Bytes::from(body.to_string()),
        };
        let served = |kept_bodies: usize| {
            let p = Provider::new(MockConfig {
                kept_bodies,
                ..MockConfig::default()
            });
            for _ in 0..60 {
                let _ = p.serve(
                    "POST",
                    "/v1/chat/completions",
                    &request,
                    route::Matching::End,
                );
            }
            assert_eq!(p.stats().requests, 60);
            (p.stats().kept_bytes, p.bodies().len())
        };
        assert_eq!(served(0), (0, 0));
        assert_eq!(
            MockConfig::demo().kept_bodies,
            0,
            "the built-in simulator keeps none"
        );
        let (bytes, bodies) = served(10_000);
        assert!(
            bytes <= wire::KEPT_BYTES && bodies > 0 && bodies < 60,
            "{bytes} {bodies}"
        );
    }

    /// An answer's tokens are counted as a prompt's, about 4 characters a token: a compact
    /// JSON answer is its length's worth, not the one word it is (issue 52, item 5), and
    /// `max_tokens` cuts it mid-word at that count.
    #[test]
    fn an_answer_s_tokens_are_counted_as_a_prompt_s_and_max_tokens_cuts_at_that_count() {
        let p = Provider::new(MockConfig::default());
        let json = r#"{"category":"billing","priority":"high","reply":"refund sent"}"#;
        assert_eq!(json.len(), 62);
        let said = |text: &str| Said {
            generation: plain(text.to_string()),
            calls: Vec::new(),
            refused: false,
            replay: false,
        };
        let asked =
            |max: Option<u64>| Asked::of(&json!({"model": "m", "max_tokens": max}), Vec::new());
        let whole = p.plan(&asked(None), said(json), None, None);
        assert_eq!(whole.usage["completion_tokens"], 16);
        assert_eq!((whole.text.as_str(), whole.finish), (json, "stop"));
        let cut = p.plan(&asked(Some(5)), said(json), None, None);
        assert_eq!(cut.usage["completion_tokens"], 5);
        assert_eq!((cut.text.as_str(), cut.finish), (&json[..20], "length"));
        let words = p.plan(&asked(Some(2)), said("Answer: B is right"), None, None);
        assert_eq!(words.text, "Answer:");
        assert_eq!(words.usage["completion_tokens"], 2);
        let cut = p.plan(&asked(Some(3)), said("Answer: Bravo"), None, None);
        assert_eq!(cut.text, "Answer: Brav");
        let short = p.plan(&asked(Some(100)), said("B"), None, None);
        assert_eq!(short.usage["completion_tokens"], 1);
    }

    #[test]
    fn tokens_keep_their_spaces() {
        assert_eq!(split_tokens("Answer: B"), vec!["Answer:", " B"]);
        assert_eq!(split_tokens("  a b"), vec!["  a", " b"]);
        assert_eq!(split_tokens("").len(), 0);
    }
}
