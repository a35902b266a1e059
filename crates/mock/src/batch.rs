//! OpenAI's batch API, simulated: `POST /v1/files` (a JSONL of requests, purpose `batch`),
//! `POST /v1/batches`, `GET /v1/batches/{id}` (with its request counts), `GET /v1/batches`
//! (to find a run's batches by their metadata), `POST /v1/batches/{id}/cancel` and
//! `GET /v1/files/{id}/content` (the output and error files). A batch completes
//! [`MockConfig::batch_delay`] after it was created, on tokio's clock (so tests jump through
//! it); each of its requests is answered by the same code as a streamed one (the
//! non-streamed reply of `Provider::answer`, its idempotency key the request's
//! `custom_id`), so a batched answer is the one streaming would have given.
//! [`MockConfig::batch_expires`] makes a batch expire with half its requests answered.
//!
//! Anthropic's Message Batches too: `POST /v1/messages/batches` (the requests in the body),
//! `GET /v1/messages/batches[/{id}]`, `POST …/{id}/cancel` and `GET …/{id}/results`, in
//! Anthropic's words (`processing_status`, `succeeded`/`errored`/`canceled`/`expired`).
//!
//! [`MockConfig::batch_delay`]: super::MockConfig::batch_delay
//! [`MockConfig::batch_expires`]: super::MockConfig::batch_expires

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde_json::{Value, json};

use super::anthropic::ServedMessages;
use super::chat::ServedChat;
use super::served::Served;
use super::wire::{InFlight, MockConfig, MockReply, MockRequest, ReplyStep, Stats};

/// The largest input file the simulator takes (OpenAI's limit), and requests per batch.
pub(crate) const MAX_FILE_BYTES: usize = 200 * 1024 * 1024;
pub(crate) const MAX_REQUESTS: usize = 50_000;
/// How often the simulated provider tries a batch's request that met a passing fault.
const BATCH_ATTEMPTS: usize = 4;

/// Files and batches held by one simulator.
#[derive(Default)]
pub(crate) struct BatchStore {
    files: Mutex<HashMap<String, File>>,
    batches: Mutex<HashMap<String, Batch>>,
    /// Ids handed out, in order.
    next: AtomicU64,
    /// Batches created (for tests: a resume must not create one twice).
    pub(crate) created: AtomicU64,
    /// Looks at one batch's state (`GET …/batches/{id}`).
    polls: AtomicU64,
    /// Requests answered in batches, by `custom_id`: how many times each.
    answered: Mutex<HashMap<String, u32>>,
    /// Every batch is due now, whatever its delay (`Provider::release_batches`).
    released: std::sync::atomic::AtomicBool,
}

struct File {
    purpose: String,
    bytes: Bytes,
}

struct Batch {
    /// Anthropic's Message Batches (else OpenAI's).
    anthropic: bool,
    /// When it was created, as the provider writes it.
    created_at: String,
    id: String,
    input_file_id: String,
    endpoint: String,
    metadata: Value,
    created: tokio::time::Instant,
    /// `in_progress`, `completed`, `expired`, `cancelling`, `cancelled`.
    status: &'static str,
    total: usize,
    completed: usize,
    failed: usize,
    output_file_id: Option<String>,
    error_file_id: Option<String>,
}

impl Batch {
    /// A batch created now, in progress.
    fn new(
        id: String,
        input_file_id: String,
        endpoint: String,
        metadata: Value,
        total: usize,
        anthropic: bool,
    ) -> Self {
        Batch {
            anthropic,
            created_at: promptgauge_base::clock::utc_now(),
            id,
            input_file_id,
            endpoint,
            metadata,
            created: tokio::time::Instant::now(),
            status: "in_progress",
            total,
            completed: 0,
            failed: 0,
            output_file_id: None,
            error_file_id: None,
        }
    }

    fn json(&self) -> Value {
        if self.anthropic {
            return self.anthropic_json();
        }
        json!({
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "created_at": promptgauge_base::clock::parse_utc(&self.created_at).map_or(0, |t| t as u64),
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "metadata": self.metadata,
            "request_counts": {
                "total": self.total,
                "completed": self.completed,
                "failed": self.failed,
            },
        })
    }
}

impl Batch {
    /// As Anthropic describes a message batch.
    fn anthropic_json(&self) -> Value {
        let status = match self.status {
            "in_progress" => "in_progress",
            "cancelling" => "canceling",
            _ => "ended",
        };
        let ended = status == "ended";
        let (expired, canceled) = match self.status {
            "expired" => (self.failed, 0),
            "cancelled" => (0, self.failed),
            _ => (0, 0),
        };
        let errored = if ended {
            self.failed - expired - canceled
        } else {
            0
        };
        json!({
            "id": self.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": {
                "processing": if ended { 0 } else { self.total },
                "succeeded": self.completed,
                "errored": errored,
                "canceled": canceled,
                "expired": expired,
            },
            "created_at": self.created_at,
            "results_url": ended.then(|| format!("/v1/messages/batches/{}/results", self.id)),
        })
    }
}

/// What a route of the batch API answers: status and JSON (or a file's bytes).
pub(crate) enum BatchReply {
    Json(u16, Value),
    Bytes(Bytes),
}

/// What a path nobody serves answers.
pub(crate) fn not_found(path: &str) -> MockReply {
    BatchReply::error(404, &format!("Invalid URL (GET {path})")).reply()
}

impl BatchReply {
    fn error(status: u16, message: &str) -> BatchReply {
        BatchReply::Json(
            status,
            json!({"error": {"message": message, "type": "invalid_request_error", "code": status}}),
        )
    }

    /// As the simulator's reply.
    pub(crate) fn reply(self) -> MockReply {
        let stats = std::sync::Arc::new(Stats::default());
        let (status, content_type, body) = match self {
            BatchReply::Json(status, v) => (status, "application/json", Bytes::from(v.to_string())),
            BatchReply::Bytes(b) => (200, "application/jsonl", b),
        };
        MockReply::Respond {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            steps: vec![ReplyStep::Write(body)],
            in_flight: InFlight::new(&stats),
        }
    }
}

/// What the batch API asks of the provider it is part of: its configuration, its key
/// check, the protocols it serves (a batch line names one by its path), and each batched
/// request answered as its streamed twin would be.
pub(crate) trait Answers: Send + Sync {
    fn config(&self) -> &MockConfig;

    /// The protocols it serves.
    fn protocols(&self) -> &[&'static dyn Served];

    /// Whether a request's headers carry the key, where `protocol` sends it.
    fn accepts_key(&self, protocol: &dyn Served, headers: &[(String, String)]) -> bool;

    /// Answers a request that came in speaking `protocol`.
    fn answer(&self, protocol: &dyn Served, request: &MockRequest) -> MockReply;

    /// A generation reached its end (counted, and kept for an idempotent replay).
    fn generated(&self, key: Option<String>, text: String, calls: Vec<super::answers::Call>);
}

/// The batch API of one provider: its store, and the provider its requests are answered by.
pub(crate) struct Batching<'a> {
    pub(crate) store: &'a BatchStore,
    pub(crate) provider: &'a dyn Answers,
}

impl Batching<'_> {
    /// Answers a request on the batch API's paths; `None` for a path it does not own.
    pub(crate) fn batch_api(
        &self,
        method: &str,
        path: &str,
        request: &MockRequest,
    ) -> Option<MockReply> {
        if self.provider.config().no_batch_api {
            return None;
        }
        let path = path.split('?').next().unwrap_or(path);
        let rest = path.strip_prefix("/v1/")?;
        let segments: Vec<&str> = rest.split('/').collect();
        if let ["messages", "batches", rest @ ..] = segments.as_slice() {
            return self.message_batches(method, rest, request);
        }
        let owned = matches!(
            (method, segments.as_slice()),
            ("POST", ["files"])
                | ("GET", ["files", _, "content"])
                | ("POST", ["batches"])
                | ("GET", ["batches"])
                | ("GET", ["batches", _])
                | ("POST", ["batches", _, "cancel"])
        );
        if !owned {
            return None;
        }
        if !self.provider.accepts_key(&ServedChat, &request.headers) {
            return Some(BatchReply::error(401, "Incorrect API key provided.").reply());
        }
        let answer = match (method, segments.as_slice()) {
            ("POST", ["files"]) => self.upload(request),
            ("GET", ["files", id, "content"]) => self.file_content(id),
            ("POST", ["batches"]) => return Some(self.created(self.create_batch(request))),
            ("GET", ["batches"]) => self.list_batches(false),
            ("GET", ["batches", id]) => self.retrieve_batch(id),
            (_, [.., id, _]) => self.cancel_batch(id),
            _ => return None,
        };
        Some(answer.reply())
    }

    /// The answer to creating a batch (created at once), sent after
    /// [`MockConfig::batch_create_delay`](super::wire::MockConfig::batch_create_delay).
    fn created(&self, answer: BatchReply) -> MockReply {
        let mut reply = answer.reply();
        if let MockReply::Respond { steps, .. } = &mut reply
            && !self.provider.config().batch_create_delay.is_zero()
        {
            steps.insert(
                0,
                ReplyStep::Sleep(self.provider.config().batch_create_delay),
            );
        }
        reply
    }

    /// Anthropic's Message Batches (`/v1/messages/batches/…`, `rest` after it).
    fn message_batches(
        &self,
        method: &str,
        rest: &[&str],
        request: &MockRequest,
    ) -> Option<MockReply> {
        if !matches!(
            (method, rest),
            ("POST", [])
                | ("GET", [])
                | ("GET", [_])
                | ("POST", [_, "cancel"])
                | ("GET", [_, "results"])
        ) {
            return None;
        }
        if !self.provider.accepts_key(&ServedMessages, &request.headers) {
            return Some(
                BatchReply::Json(
                    401,
                    json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
                )
                .reply(),
            );
        }
        let answer = match (method, rest) {
            ("POST", []) => return Some(self.created(self.create_message_batch(request))),
            ("GET", []) => self.list_batches(true),
            ("GET", [id]) => self.retrieve_batch(id),
            ("POST", [id, "cancel"]) => self.cancel_batch(id),
            (_, [id, _]) => self.message_batch_results(id),
            _ => return None,
        };
        Some(answer.reply())
    }

    /// `POST /v1/messages/batches`: `{requests: [{custom_id, params}]}`, kept as an input
    /// file of OpenAI-shaped lines so one code answers both.
    fn create_message_batch(&self, request: &MockRequest) -> BatchReply {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return BatchReply::error(400, "invalid JSON body");
        };
        let Some(requests) = body["requests"].as_array() else {
            return BatchReply::error(400, "requests: Field required");
        };
        if requests.is_empty() || requests.len() > 100_000 {
            return BatchReply::error(400, "requests: a batch holds 1 to 100,000 requests");
        }
        let mut lines = String::new();
        for r in requests {
            let id = r["custom_id"].as_str().unwrap_or("");
            let fits = !id.is_empty()
                && id.len() <= 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !fits {
                return BatchReply::error(400, "custom_id: must match ^[a-zA-Z0-9_-]{1,64}$");
            }
            lines.push_str(&json!({"custom_id": id, "body": r["params"]}).to_string());
            lines.push('\n');
        }
        let input = self.keep_file("anthropic_batch".into(), Bytes::from(lines));
        let id = self.id("msgbatch");
        self.create(Batch::new(
            id,
            input,
            "/v1/messages".into(),
            Value::Null,
            requests.len(),
            true,
        ))
    }

    /// `GET /v1/messages/batches/{id}/results`: one line per request, in Anthropic's words.
    fn message_batch_results(&self, id: &str) -> BatchReply {
        let file = self.store.batches.lock().ok().and_then(|b| {
            b.get(id)
                .filter(|b| b.anthropic && b.output_file_id.is_some())
                .and_then(|b| b.output_file_id.clone())
        });
        match file {
            Some(file) => self.file_content(&file),
            None => BatchReply::error(404, &format!("no results for {id} (yet)")),
        }
    }

    /// Keeps a file (an upload, a batch's input or output) under a new id, and gives the id.
    fn keep_file(&self, purpose: String, bytes: Bytes) -> String {
        let id = self.id("file");
        if let Ok(mut files) = self.store.files.lock() {
            files.insert(id.clone(), File { purpose, bytes });
        }
        id
    }

    fn id(&self, prefix: &str) -> String {
        format!(
            "{prefix}-{}",
            self.store.next.fetch_add(1, Ordering::SeqCst)
        )
    }

    /// `POST /v1/files`: a multipart form with `purpose` and `file`.
    fn upload(&self, request: &MockRequest) -> BatchReply {
        let Some(boundary) = request
            .header("content-type")
            .and_then(|t| t.split("boundary=").nth(1))
            .map(|b| b.trim_matches('"').to_string())
        else {
            return BatchReply::error(400, "expected a multipart/form-data body");
        };
        let parts = multipart(&request.body, &boundary);
        let field = |name: &str| parts.iter().find(|p| p.name == name);
        let Some(file) = field("file") else {
            return BatchReply::error(400, "the form has no `file`");
        };
        let purpose = field("purpose")
            .map(|p| String::from_utf8_lossy(&p.body).trim().to_string())
            .unwrap_or_default();
        if purpose != "batch" {
            return BatchReply::error(400, "purpose must be `batch`");
        }
        if file.body.len() > MAX_FILE_BYTES {
            return BatchReply::error(400, "the file is larger than 200 MB");
        }
        let id = self.keep_file(purpose.clone(), file.body.clone());
        let object = json!({
            "id": id, "object": "file", "bytes": file.body.len(), "created_at": 0,
            "filename": file.filename, "purpose": purpose,
        });
        BatchReply::Json(200, object)
    }

    fn file_content(&self, id: &str) -> BatchReply {
        match self
            .store
            .files
            .lock()
            .ok()
            .and_then(|f| f.get(id).map(|f| f.bytes.clone()))
        {
            Some(bytes) => BatchReply::Bytes(bytes),
            None => BatchReply::error(404, &format!("No such File object: {id}")),
        }
    }

    /// `POST /v1/batches`: `{input_file_id, endpoint, completion_window, metadata}`.
    fn create_batch(&self, request: &MockRequest) -> BatchReply {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return BatchReply::error(400, "invalid JSON body");
        };
        let input = body["input_file_id"].as_str().unwrap_or("").to_string();
        let endpoint = body["endpoint"].as_str().unwrap_or("").to_string();
        if !matches!(endpoint.as_str(), "/v1/chat/completions" | "/v1/responses") {
            return BatchReply::error(
                400,
                "endpoint must be /v1/chat/completions or /v1/responses",
            );
        }
        let lines = match self.store.files.lock().ok().and_then(|f| {
            f.get(&input)
                .filter(|f| f.purpose == "batch")
                .map(|f| f.bytes.clone())
        }) {
            Some(bytes) => bytes,
            None => return BatchReply::error(404, &format!("No such File object: {input}")),
        };
        let total = lines
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        if total > MAX_REQUESTS {
            return BatchReply::error(400, "a batch holds at most 50,000 requests");
        }
        let metadata = body.get("metadata").cloned().unwrap_or(Value::Null);
        let id = self.id("batch");
        self.create(Batch::new(id, input, endpoint, metadata, total, false))
    }

    /// Keeps a new batch and answers with it (or loses the answer: `batch_lose_create`).
    fn create(&self, batch: Batch) -> BatchReply {
        self.store.created.fetch_add(1, Ordering::SeqCst);
        let json = batch.json();
        if let Ok(mut batches) = self.store.batches.lock() {
            batches.insert(batch.id.clone(), batch);
        }
        if self.provider.config().batch_lose_create {
            return BatchReply::error(502, "Bad gateway: the upstream answer was lost");
        }
        BatchReply::Json(200, json)
    }

    fn list_batches(&self, anthropic: bool) -> BatchReply {
        let ids: Vec<String> = match self.store.batches.lock() {
            Ok(b) => b
                .values()
                .filter(|b| b.anthropic == anthropic)
                .map(|b| b.id.clone())
                .collect(),
            Err(_) => Vec::new(),
        };
        let mut data: Vec<Value> = ids
            .iter()
            .filter_map(|id| match self.retrieve_batch(id) {
                BatchReply::Json(200, v) => Some(v),
                _ => None,
            })
            .collect();
        // Newest first, as OpenAI and Anthropic list them.
        data.sort_by_key(|b| {
            std::cmp::Reverse(
                b["id"]
                    .as_str()
                    .and_then(|id| id.rsplit('-').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0),
            )
        });
        BatchReply::Json(
            200,
            json!({"object": "list", "data": data, "has_more": false}),
        )
    }

    /// `GET /v1/batches/{id}`: its state, completing it once its time has come.
    fn retrieve_batch(&self, id: &str) -> BatchReply {
        self.store.polls.fetch_add(1, Ordering::SeqCst);
        let due = {
            let Ok(batches) = self.store.batches.lock() else {
                return BatchReply::error(500, "poisoned");
            };
            let Some(b) = batches.get(id) else {
                return BatchReply::error(404, &format!("No such Batch object: {id}"));
            };
            matches!(b.status, "in_progress" | "cancelling")
                && (b.status == "cancelling"
                    || b.created.elapsed() >= self.provider.config().batch_delay
                    || self.store.released.load(Ordering::SeqCst))
        };
        if due {
            self.finish_batch(id);
        }
        match self
            .store
            .batches
            .lock()
            .ok()
            .and_then(|b| b.get(id).map(Batch::json))
        {
            Some(v) => BatchReply::Json(200, v),
            None => BatchReply::error(404, &format!("No such Batch object: {id}")),
        }
    }

    fn cancel_batch(&self, id: &str) -> BatchReply {
        if let Ok(mut batches) = self.store.batches.lock()
            && let Some(b) = batches.get_mut(id)
            && b.status == "in_progress"
        {
            b.status = "cancelling";
        }
        self.retrieve_batch(id)
    }

    /// Answers a batch's requests (all of them; half when it expires, none when cancelled)
    /// and writes its output and error files.
    fn finish_batch(&self, id: &str) {
        let Some((input, batch)) = self.finishing(id) else {
            return;
        };
        let bytes = self
            .store
            .files
            .lock()
            .ok()
            .and_then(|f| f.get(&input).map(|f| f.bytes.clone()))
            .unwrap_or_default();
        let lines: Vec<&[u8]> = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let answered = if batch.cancelled {
            0
        } else if self.provider.config().batch_expires {
            lines.len() / 2
        } else {
            lines.len()
        };
        let mut results = Results::default();
        for (i, line) in lines.iter().enumerate() {
            let request: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
            let custom_id = request["custom_id"].as_str().unwrap_or("");
            let body = (i < answered).then_some(&request["body"]);
            if batch.anthropic {
                self.message_result(&batch, &mut results, custom_id, body);
            } else {
                self.batch_result(&batch, &mut results, i, custom_id, body);
            }
        }
        if self.provider.config().batch_duplicate
            && let Some(first) = results.output.lines().next().map(|l| format!("{l}\n"))
        {
            results.output.push_str(&first);
        }
        self.close_batch(id, batch.cancelled, results);
    }

    /// The input file of a batch about to be finished, and what finishing it needs.
    fn finishing(&self, id: &str) -> Option<(String, Finishing)> {
        let batches = self.store.batches.lock().ok()?;
        let b = batches.get(id)?;
        let finishing = Finishing {
            endpoint: b.endpoint.clone(),
            cancelled: b.status == "cancelling",
            anthropic: b.anthropic,
        };
        Some((b.input_file_id.clone(), finishing))
    }

    /// One request's line in Anthropic's results: its answer (`body` is there when it is
    /// run), or why it was not run.
    fn message_result(
        &self,
        batch: &Finishing,
        results: &mut Results,
        custom_id: &str,
        body: Option<&Value>,
    ) {
        let result = match body {
            None => json!({"type": if batch.cancelled { "canceled" } else { "expired" }}),
            Some(body) => {
                self.count_answered(custom_id);
                match self.answer_one(&batch.endpoint, custom_id, body) {
                    (200, message) => json!({"type": "succeeded", "message": message}),
                    (_, error) => json!({"type": "errored", "error": error}),
                }
            }
        };
        if result["type"] == "succeeded" {
            results.completed += 1;
        } else {
            results.failed += 1;
        }
        results.output.push_str(&format!(
            "{}\n",
            json!({"custom_id": custom_id, "result": result})
        ));
    }

    /// The `i`th request's line in OpenAI's output file (answered 200) or error file (any
    /// other answer, or not run: `body` is there when it is run).
    fn batch_result(
        &self,
        batch: &Finishing,
        results: &mut Results,
        i: usize,
        custom_id: &str,
        body: Option<&Value>,
    ) {
        let Some(body) = body else {
            results.not_run(i, custom_id, batch.cancelled);
            return;
        };
        let (status, body) = self.answer_one(&batch.endpoint, custom_id, body);
        self.count_answered(custom_id);
        let line = json!({
            "id": format!("batch_req_{i}"), "custom_id": custom_id,
            "response": {"status_code": status, "request_id": format!("req_{i}"), "body": body},
            "error": null,
        });
        if status == 200 {
            results.output.push_str(&format!("{line}\n"));
            results.completed += 1;
        } else {
            results.errors.push_str(&format!("{line}\n"));
            results.failed += 1;
        }
    }

    /// Counts a request answered in a batch, by its `custom_id` (`Provider::batched_requests`).
    fn count_answered(&self, custom_id: &str) {
        if let Ok(mut a) = self.store.answered.lock() {
            *a.entry(custom_id.to_string()).or_default() += 1;
        }
    }

    /// Writes a finished batch's files and gives it its final status and counts.
    fn close_batch(&self, id: &str, cancelled: bool, results: Results) {
        let output_file_id = self.store_output(results.output);
        let error_file_id = self.store_output(results.errors);
        if let Ok(mut batches) = self.store.batches.lock()
            && let Some(b) = batches.get_mut(id)
        {
            b.status = if cancelled {
                "cancelled"
            } else if self.provider.config().batch_expires {
                "expired"
            } else {
                "completed"
            };
            b.completed = results.completed;
            b.failed = results.failed;
            b.output_file_id = output_file_id;
            b.error_file_id = error_file_id;
        }
    }

    /// Keeps a batch's output (or error) file, and gives its id; none for an empty one.
    fn store_output(&self, text: String) -> Option<String> {
        if text.is_empty() {
            return None;
        }
        Some(self.keep_file("batch_output".into(), Bytes::from(text)))
    }

    /// One request of a batch, answered as the same request streamed would be (not
    /// streamed; its idempotency key the request's `custom_id`): (status, body).
    fn answer_one(&self, endpoint: &str, custom_id: &str, body: &Value) -> (u16, Value) {
        let mut body = body.clone();
        if let Some(o) = body.as_object_mut() {
            o.insert("stream".into(), Value::Bool(false));
            o.remove("stream_options");
        }
        // The batch's own request carried the version: each request inside it has it too.
        let mut headers = vec![
            ("idempotency-key".to_string(), custom_id.to_string()),
            ("anthropic-version".to_string(), "2023-06-01".to_string()),
        ];
        if let Some(key) = &self.provider.config().api_key {
            headers.push(("authorization".into(), format!("Bearer {key}")));
            headers.push(("x-api-key".into(), key.clone()));
        }
        let request = MockRequest {
            headers,
            body: Bytes::from(body.to_string()),
        };
        // The protocol the line's `url` names (`/v1` and its path).
        let served = self.provider.protocols().iter().copied().find(|p| {
            endpoint
                .strip_prefix("/v1")
                .is_some_and(|path| path == p.path())
        });
        let Some(protocol) = served else {
            // As OpenAI's batches answer a line whose `url` they do not serve.
            return (
                400,
                json!({"error": {"message": format!("unsupported url for a batch request: {endpoint}"), "type": "invalid_request_error"}}),
            );
        };
        // A provider retries a batch's request that met a passing fault (a 429, a 5xx, a
        // hang) itself, a few times: what is left is the batch's partial failures.
        let mut last = (500, Value::Null);
        for _ in 0..BATCH_ATTEMPTS {
            last = match self.provider.answer(protocol, &request) {
                MockReply::Respond { status, steps, .. } => {
                    let mut bytes = Vec::new();
                    for step in steps {
                        match step {
                            ReplyStep::Write(b) => bytes.extend_from_slice(&b),
                            ReplyStep::Generated { key, text, calls } => {
                                self.provider.generated(key, text, calls)
                            }
                            _ => {}
                        }
                    }
                    (
                        status,
                        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                    )
                }
                MockReply::Hang(_) => (
                    500,
                    json!({"error": {"message": "The request timed out.", "type": "server_error"}}),
                ),
            };
            if !(last.0 == 429 || last.0 >= 500) {
                break;
            }
        }
        last
    }
}

impl BatchStore {
    /// Batches created so far.
    pub(crate) fn batches_created(&self) -> u64 {
        self.created.load(Ordering::SeqCst)
    }

    /// Looks at a batch's state so far (each list entry counts one too).
    pub(crate) fn batch_polls(&self) -> u64 {
        self.polls.load(Ordering::SeqCst)
    }

    /// Each batch's status now, by id (in the order created).
    pub(crate) fn batch_statuses(&self) -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = self
            .batches
            .lock()
            .map(|b| {
                b.values()
                    .map(|b| (b.id.clone(), b.status.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        all.sort_by_key(|(id, _)| id.rsplit('-').next().and_then(|n| n.parse::<u64>().ok()));
        all
    }

    /// Ends every batch at its next look, whatever `batch_delay` says (a test's way to let
    /// a long batch finish once the run that submitted it was killed).
    pub(crate) fn release_batches(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    /// Requests answered inside batches so far, by their `custom_id`s, with how often each
    /// was answered (a job paid for twice shows 2).
    pub(crate) fn batched_requests(&self) -> HashMap<String, u32> {
        self.answered.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

/// A batch being finished: where its requests go, and whether it was cancelled.
struct Finishing {
    endpoint: String,
    cancelled: bool,
    anthropic: bool,
}

/// A finished batch's result lines, for its output and error files, and their counts.
#[derive(Default)]
struct Results {
    output: String,
    errors: String,
    completed: usize,
    failed: usize,
}

impl Results {
    /// The `i`th request's error line when the batch was cancelled or expired before it ran.
    fn not_run(&mut self, i: usize, custom_id: &str, cancelled: bool) {
        let (code, message) = if cancelled {
            (
                "batch_cancelled",
                "This request was not run: the batch was cancelled.",
            )
        } else {
            (
                "batch_expired",
                "This request could not be executed before the completion window expired.",
            )
        };
        self.errors.push_str(&format!(
            "{}\n",
            json!({"id": format!("batch_req_{i}"), "custom_id": custom_id, "response": null,
                   "error": {"code": code, "message": message}})
        ));
        self.failed += 1;
    }
}

/// One part of a multipart form.
struct Part {
    name: String,
    filename: String,
    body: Bytes,
}

/// The parts of a `multipart/form-data` body (what the simulator needs: each part's name,
/// file name and bytes).
fn multipart(body: &[u8], boundary: &str) -> Vec<Part> {
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    while let Some(start) = find(rest, delimiter.as_bytes()) {
        rest = &rest[start + delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        let Some(head_end) = find(rest, b"\r\n\r\n") else {
            break;
        };
        let head = String::from_utf8_lossy(&rest[..head_end]).to_string();
        let content = &rest[head_end + 4..];
        let Some(end) = find(content, format!("\r\n{delimiter}").as_bytes()) else {
            break;
        };
        // Its Content-Disposition line names it (other lines: its Content-Type).
        let disposition = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))
            .unwrap_or("");
        let attribute = |key: &str| {
            disposition
                .split(';')
                .find_map(|p| p.trim().strip_prefix(&format!("{key}=")))
                .map(|v| v.trim_matches('"').to_string())
                .unwrap_or_default()
        };
        parts.push(Part {
            name: attribute("name"),
            filename: attribute("filename"),
            body: Bytes::copy_from_slice(&content[..end]),
        });
        rest = &content[end + 2..];
    }
    parts
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}
