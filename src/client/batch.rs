//! Provider batch APIs, the client's side (docs/guide/batch.md): a lane's jobs as the lines of a
//! batch (each `custom_id` the job's idempotency key, each body the request streaming would
//! send, not streamed), submitted, polled, and read back. Two APIs: OpenAI's (a JSONL file
//! uploaded to `/v1/files`, submitted to `/v1/batches`, its output and error files read
//! back) and Anthropic's Message Batches (`/v1/messages/batches`, its results read back as
//! JSONL). Every call has the endpoint's key and headers, a time limit (the total deadline)
//! and a size limit; results are only ever read from the endpoint's own base URL.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{HttpRequest, Method, Transport};
use super::{Client, JobRequest, JobResult, ProtocolKind, Streamed};

/// The most a batch's output or error file may hold when read back.
pub const MAX_FILE_BYTES: usize = 512 * 1024 * 1024;

/// Which batch API an endpoint speaks (its protocol's provider's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchApi {
    /// `/v1/files` and `/v1/batches`, for chat completions and Responses.
    OpenAi,
    /// `/v1/messages/batches`.
    Anthropic,
}

impl BatchApi {
    /// The most requests one batch may hold, and the most bytes its requests may take.
    pub fn limits(self) -> (usize, usize) {
        match self {
            BatchApi::OpenAi => (50_000, 200 * 1024 * 1024),
            BatchApi::Anthropic => (100_000, 256 * 1024 * 1024),
        }
    }

    /// Where the API lives under the base URL, for messages.
    pub fn path(self) -> &'static str {
        match self {
            BatchApi::OpenAi => "/batches",
            BatchApi::Anthropic => "/messages/batches",
        }
    }
}

/// A batch as the provider describes it (Anthropic's words mapped to OpenAI's: `ended` is
/// its one terminal state, `canceling` is `cancelling`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BatchState {
    pub id: String,
    /// `validating`, `in_progress`, `finalizing`, `completed`, `failed`, `expired`,
    /// `cancelling`, `cancelled`; Anthropic's `ended`.
    pub status: String,
    #[serde(default)]
    pub input_file_id: String,
    #[serde(default)]
    pub output_file_id: Option<String>,
    #[serde(default)]
    pub error_file_id: Option<String>,
    #[serde(default)]
    pub request_counts: RequestCounts,
    #[serde(default)]
    pub metadata: Value,
    /// When the provider created it, in seconds since 1970 (0 when it does not say).
    #[serde(default, deserialize_with = "seconds")]
    pub created_at: f64,
}

/// A time as seconds since 1970: OpenAI writes a number, Anthropic an RFC 3339 string.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => crate::clock::parse_utc(&s).unwrap_or(0.0),
        _ => 0.0,
    })
}

impl BatchState {
    /// Whether the provider is done with it (its results are final).
    pub fn ended(&self) -> bool {
        matches!(
            self.status.as_str(),
            "completed" | "failed" | "expired" | "cancelled" | "ended"
        )
    }

    /// Anthropic's description, in the words of OpenAI's.
    fn from_anthropic(v: &Value) -> Result<BatchState, BatchError> {
        let count = |k: &str| {
            v.pointer(&format!("/request_counts/{k}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let (processing, succeeded) = (count("processing"), count("succeeded"));
        let failed = count("errored") + count("canceled") + count("expired");
        let status = match v["processing_status"].as_str() {
            Some("canceling") => "cancelling",
            Some(s) => s,
            None => {
                return Err(BatchError::Invalid(
                    "not a message batch: no processing_status".into(),
                ));
            }
        };
        let id = v["id"]
            .as_str()
            .ok_or_else(|| BatchError::Invalid("not a message batch: no id".into()))?;
        Ok(BatchState {
            id: id.to_string(),
            status: status.to_string(),
            input_file_id: String::new(),
            output_file_id: None,
            error_file_id: None,
            request_counts: RequestCounts {
                total: processing + succeeded + failed,
                completed: succeeded,
                failed,
            },
            metadata: Value::Null,
            created_at: v["created_at"]
                .as_str()
                .and_then(crate::clock::parse_utc)
                .unwrap_or(0.0),
        })
    }
}

/// How many of a batch's requests are done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct RequestCounts {
    pub total: u64,
    pub completed: u64,
    pub failed: u64,
}

/// A call to the batch API that did not give what it should.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    #[error("HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error("{0}")]
    Transport(String),
    #[error("{0}")]
    Invalid(String),
}

impl BatchError {
    /// Whether asking again cannot help: the request or the key is at fault (400, 401,
    /// 403, 404, 422), or the answer was not what the API sends.
    pub fn is_final(&self) -> bool {
        match self {
            BatchError::Http { status, .. } => matches!(status, 400 | 401 | 403 | 404 | 422),
            BatchError::Transport(_) => false,
            BatchError::Invalid(_) => true,
        }
    }
}

/// The batch API at one endpoint.
pub struct Batches {
    pub api: BatchApi,
    transport: Arc<dyn Transport>,
    base_url: String,
    headers: Vec<(String, String)>,
    deadline: std::time::Duration,
    /// The most a batch's result files may hold, all together.
    file_limit: usize,
}

impl Client {
    /// The batch API this client's endpoint would have: Anthropic's for the Messages
    /// protocol, OpenAI's for the other two.
    pub fn batch_api(&self) -> BatchApi {
        // Every protocol decides (no wildcard): a new one must say which batch API it has.
        match self.config.protocol {
            ProtocolKind::AnthropicMessages => BatchApi::Anthropic,
            ProtocolKind::OpenaiChat | ProtocolKind::OpenaiResponses => BatchApi::OpenAi,
        }
    }

    /// The batch API at this client's endpoint (its first base URL), with its key and
    /// headers.
    pub fn batches(&self) -> Batches {
        let mut headers = self.protocol.key_headers(self.config.api_key.as_ref());
        headers.extend(self.config.headers.iter().cloned());
        Batches {
            api: self.batch_api(),
            transport: self.transport.clone(),
            base_url: self.config.base_url.trim_end_matches('/').to_string(),
            headers,
            deadline: self.config.limits.total_timeout,
            file_limit: MAX_FILE_BYTES,
        }
    }

    /// The `custom_id` a job has in a batch: its idempotency key, unless the API cannot
    /// take it (Anthropic's are 1–64 of `[A-Za-z0-9_-]`): then a stable hash of it.
    pub fn batch_custom_id(&self, key: &str) -> String {
        let fits = key.len() <= 64
            && !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if self.batch_api() == BatchApi::OpenAi || fits {
            return key.to_string();
        }
        let mut h = crate::hash::StableHasher::default();
        h.write(key.as_bytes());
        format!("pg-{:016x}", h.finish())
    }

    /// A job as one request of a batch: its `custom_id` (the idempotency key), and the body
    /// streaming would send (this client's model, protocol and parameters), not streamed.
    pub fn batch_line(&self, job: &JobRequest) -> Value {
        let body = self
            .protocol
            .body(&self.config.model, job, super::Dialect::default());
        let mut body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if let Some(o) = body.as_object_mut() {
            o.remove("stream");
            o.remove("stream_options");
        }
        let custom_id = self.batch_custom_id(&job.idempotency_key);
        match self.batch_api() {
            BatchApi::OpenAi => json!({
                "custom_id": custom_id,
                "method": "POST",
                "url": self.batch_endpoint(),
                "body": body,
            }),
            BatchApi::Anthropic => json!({"custom_id": custom_id, "params": body}),
        }
    }

    /// The path an OpenAI batch's requests go to: the protocol's, under `/v1`.
    pub fn batch_endpoint(&self) -> &'static str {
        match self.config.protocol {
            ProtocolKind::OpenaiResponses => "/v1/responses",
            ProtocolKind::OpenaiChat => "/v1/chat/completions",
            // Its batches are Anthropic's, whose requests name no URL.
            ProtocolKind::AnthropicMessages => "/v1/messages",
        }
    }

    /// A job a batch did not answer, with `why` as its cause and the HTTP status behind
    /// it, if any (a 400 or 404 is no passing failure, to `--retry-failed`).
    pub fn batch_failure(&self, status: Option<u16>, why: &str) -> JobResult {
        self.failed_result(status, why.to_string())
    }

    /// One line of a batch's results (output or error file, or Anthropic's results) as
    /// the job's result: its `custom_id`, and the answer read by the protocol's own decoder
    /// (the same closed list of finishes as a stream's), or the failure the provider gave.
    /// A batched answer has one attempt, with no latency.
    pub fn batch_result(&self, line: &Value) -> (String, JobResult) {
        let custom_id = line["custom_id"].as_str().unwrap_or_default().to_string();
        let failed = |status, error| self.failed_result(status, error);
        let body = match self.batch_api() {
            BatchApi::OpenAi => {
                if let Some(err) = line.get("error").filter(|e| !e.is_null()) {
                    let code = err["code"].as_str().unwrap_or("error");
                    let message = err["message"].as_str().unwrap_or_default();
                    return (
                        custom_id,
                        failed(
                            None,
                            format!("the batch did not run it ({code}): {message}"),
                        ),
                    );
                }
                let status = line
                    .pointer("/response/status_code")
                    .and_then(Value::as_u64)
                    .map_or(0, |s| s.min(999) as u16);
                let body = line.pointer("/response/body").unwrap_or(&Value::Null);
                if status != 200 {
                    let message = self.protocol.error_message(&body.to_string());
                    return (
                        custom_id,
                        failed(
                            Some(status),
                            format!("the batch's request failed: HTTP {status}: {message}"),
                        ),
                    );
                }
                body
            }
            BatchApi::Anthropic => match line.pointer("/result/type").and_then(Value::as_str) {
                Some("succeeded") => line.pointer("/result/message").unwrap_or(&Value::Null),
                Some("errored") => {
                    let err = line
                        .pointer("/result/error/error")
                        .or_else(|| line.pointer("/result/error"))
                        .unwrap_or(&Value::Null);
                    let message = self
                        .protocol
                        .error_message(&json!({"error": err}).to_string());
                    // The status the error's type stands for, so a request at fault is
                    // not taken for an outage.
                    let status = match err["type"].as_str() {
                        Some("invalid_request_error") => Some(400),
                        Some("authentication_error") => Some(401),
                        Some("permission_error") => Some(403),
                        Some("not_found_error") => Some(404),
                        Some("request_too_large") => Some(413),
                        Some("rate_limit_error") => Some(429),
                        Some("api_error") => Some(500),
                        Some("overloaded_error") => Some(529),
                        _ => None,
                    };
                    return (
                        custom_id,
                        failed(status, format!("the batch's request failed: {message}")),
                    );
                }
                Some(kind @ ("canceled" | "expired")) => {
                    return (
                        custom_id,
                        failed(None, format!("the batch did not run it ({kind})")),
                    );
                }
                other => {
                    return (
                        custom_id,
                        failed(
                            None,
                            format!("the batch gave no result ({})", other.unwrap_or("no type")),
                        ),
                    );
                }
            },
        };
        let mut s = Streamed::default();
        self.protocol.whole(&mut s, body);
        (custom_id, self.whole_result(s))
    }
}

impl Batches {
    async fn call(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
        limit: usize,
    ) -> Result<Bytes, BatchError> {
        let mut headers = self.headers.clone();
        headers.push(("content-type".into(), content_type.into()));
        let request = HttpRequest {
            method,
            url: format!("{}{path}", self.base_url),
            headers,
            body,
        };
        let read = async {
            let response = self
                .transport
                .send(request)
                .await
                .map_err(|e| BatchError::Transport(e.to_string()))?;
            // Sized once from the length the server says (within the limit): a 50 MB
            // results file is not grown by doubling.
            let length = response
                .headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .unwrap_or(0)
                .min(limit);
            let mut bytes = Vec::with_capacity(length);
            let mut stream = response.body;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| BatchError::Transport(e.to_string()))?;
                if bytes.len() + chunk.len() > limit {
                    return Err(BatchError::Invalid(format!(
                        "{path} answered more than {limit} bytes"
                    )));
                }
                bytes.extend_from_slice(&chunk);
            }
            if response.status != 200 {
                let message = super::error_message(&bytes);
                return Err(BatchError::Http {
                    status: response.status,
                    message,
                });
            }
            Ok(Bytes::from(bytes))
        };
        tokio::time::timeout(self.deadline, read)
            .await
            .map_err(|_| {
                BatchError::Transport(format!("{path}: no answer within {:?}", self.deadline))
            })?
    }

    async fn json(&self, method: Method, path: &str, body: Value) -> Result<Value, BatchError> {
        let body = match body {
            Value::Null => Bytes::new(),
            v => Bytes::from(v.to_string()),
        };
        let bytes = self
            .call(method, path, "application/json", body, 16 * 1024 * 1024)
            .await?;
        serde_json::from_slice(&bytes).map_err(|e| BatchError::Invalid(format!("{path}: {e}")))
    }

    fn state(&self, v: Value) -> Result<BatchState, BatchError> {
        match self.api {
            BatchApi::OpenAi => serde_json::from_value(v)
                .map_err(|e| BatchError::Invalid(format!("not a batch: {e}"))),
            BatchApi::Anthropic => BatchState::from_anthropic(&v),
        }
    }

    /// Whether the endpoint has this batch API: a list of its batches answers (a 404 or
    /// 405 says it has none). Asked before anything is sent.
    pub async fn probe(&self) -> Result<(), BatchError> {
        self.json(
            Method::Get,
            &format!("{}?limit=1", self.api.path()),
            Value::Null,
        )
        .await
        .map(drop)
    }

    /// Uploads a batch's input file (JSONL) where the API takes one (OpenAI's): its id.
    /// Anthropic's takes the requests in the batch itself: `None`.
    pub async fn prepare(&self, name: &str, jsonl: &[u8]) -> Result<Option<String>, BatchError> {
        match self.api {
            BatchApi::OpenAi => self.upload(name, jsonl).await.map(Some),
            BatchApi::Anthropic => Ok(None),
        }
    }

    /// Submits a batch: OpenAI's from its uploaded `file`, to `endpoint`, with `metadata`
    /// (the run's id, so a resume finds it); Anthropic's with its `jsonl` requests (it
    /// keeps no metadata).
    pub async fn submit(
        &self,
        file: Option<&str>,
        jsonl: &[u8],
        endpoint: &str,
        metadata: Value,
    ) -> Result<BatchState, BatchError> {
        match (self.api, file) {
            (BatchApi::OpenAi, Some(file)) => self.create(file, endpoint, metadata).await,
            (BatchApi::OpenAi, None) => Err(BatchError::Invalid("no input file to submit".into())),
            (BatchApi::Anthropic, _) => {
                let requests = jsonl
                    .split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                    .map(|l| {
                        serde_json::from_slice::<Value>(l)
                            .map_err(|e| BatchError::Invalid(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let v = self
                    .json(
                        Method::Post,
                        "/messages/batches",
                        json!({"requests": requests}),
                    )
                    .await?;
                self.state(v)
            }
        }
    }

    /// Uploads a batch's input file (JSONL); its id.
    pub async fn upload(&self, name: &str, jsonl: &[u8]) -> Result<String, BatchError> {
        let boundary = format!("promptgauge-{:016x}", rand::random::<u64>());
        let mut form = Vec::with_capacity(jsonl.len() + 400);
        form.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/jsonl\r\n\r\n"
            )
            .as_bytes(),
        );
        form.extend_from_slice(jsonl);
        form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let bytes = self
            .call(
                Method::Post,
                "/files",
                &format!("multipart/form-data; boundary={boundary}"),
                Bytes::from(form),
                1024 * 1024,
            )
            .await?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| BatchError::Invalid(format!("/files: {e}")))?;
        v["id"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| BatchError::Invalid("/files answered no file id".into()))
    }

    /// Submits an uploaded file as an OpenAI batch to `endpoint`, with `metadata`.
    pub async fn create(
        &self,
        file_id: &str,
        endpoint: &str,
        metadata: Value,
    ) -> Result<BatchState, BatchError> {
        let v = self
            .json(
                Method::Post,
                "/batches",
                json!({"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h", "metadata": metadata}),
            )
            .await?;
        self.state(v)
    }

    /// A batch's state now.
    pub async fn retrieve(&self, id: &str) -> Result<BatchState, BatchError> {
        let v = self
            .json(
                Method::Get,
                &format!("{}/{id}", self.api.path()),
                Value::Null,
            )
            .await?;
        self.state(v)
    }

    /// The batches the provider lists (the newest page).
    pub async fn list(&self) -> Result<Vec<BatchState>, BatchError> {
        self.list_since(f64::INFINITY).await
    }

    /// The batches the provider lists, newest first, page after page until one reaches
    /// back before `since` (seconds since 1970) or the list ends (at most 50 pages).
    pub async fn list_since(&self, since: f64) -> Result<Vec<BatchState>, BatchError> {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..50 {
            let cursor = match (&after, self.api) {
                (None, _) => String::new(),
                (Some(id), BatchApi::OpenAi) => format!("&after={id}"),
                (Some(id), BatchApi::Anthropic) => format!("&after_id={id}"),
            };
            let v = self
                .json(
                    Method::Get,
                    &format!("{}?limit=100{cursor}", self.api.path()),
                    Value::Null,
                )
                .await?;
            let page = v["data"]
                .as_array()
                .ok_or_else(|| BatchError::Invalid("not a list of batches".into()))?
                .iter()
                .map(|b| self.state(b.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            let reached = page
                .iter()
                .any(|b| b.created_at > 0.0 && b.created_at < since);
            after = v["last_id"]
                .as_str()
                .map(String::from)
                .or_else(|| page.last().map(|b| b.id.clone()));
            let more = v["has_more"].as_bool().unwrap_or(false) && !page.is_empty();
            all.extend(page);
            if !more || reached || since.is_infinite() {
                break;
            }
        }
        Ok(all)
    }

    /// Asks the provider to cancel a batch.
    pub async fn cancel(&self, id: &str) -> Result<BatchState, BatchError> {
        let v = self
            .json(
                Method::Post,
                &format!("{}/{id}/cancel", self.api.path()),
                Value::Null,
            )
            .await?;
        self.state(v)
    }

    /// An ended batch's result files as read (JSONL, one line per request): OpenAI's output
    /// and error files, Anthropic's results — read at the endpoint's own base URL, never at
    /// a URL the provider names, so the key goes nowhere else. They are read a line at a
    /// time ([`EachLine`]): a batch of 50,000 answers is never held as parsed JSON at once.
    pub async fn result_files(&self, batch: &BatchState) -> Result<Vec<Bytes>, BatchError> {
        let mut files = Vec::new();
        match self.api {
            BatchApi::OpenAi => {
                // The output and error files share one limit: two files never hold twice
                // what one may.
                let mut left = self.file_limit;
                for file in [&batch.output_file_id, &batch.error_file_id]
                    .into_iter()
                    .flatten()
                {
                    let bytes = self.file_within(file, left).await?;
                    left -= bytes.len();
                    files.push(bytes);
                }
            }
            BatchApi::Anthropic => {
                let path = format!("/messages/batches/{}/results", batch.id);
                files.push(
                    self.call(
                        Method::Get,
                        &path,
                        "application/json",
                        Bytes::new(),
                        self.file_limit,
                    )
                    .await?,
                );
            }
        }
        Ok(files)
    }

    /// The same API with another limit on what a batch's result files may hold (the
    /// default is [`MAX_FILE_BYTES`]).
    pub fn with_file_limit(mut self, bytes: usize) -> Batches {
        self.file_limit = bytes;
        self
    }

    /// A file's bytes.
    async fn file(&self, file_id: &str) -> Result<Bytes, BatchError> {
        self.file_within(file_id, self.file_limit).await
    }

    /// A file's bytes, refused beyond `limit`.
    async fn file_within(&self, file_id: &str, limit: usize) -> Result<Bytes, BatchError> {
        self.call(
            Method::Get,
            &format!("/files/{file_id}/content"),
            "application/json",
            Bytes::new(),
            limit,
        )
        .await
    }

    /// An output or error file's lines (a line that is not JSON is skipped, as when the
    /// results are read: [`EachLine`]).
    pub async fn content(&self, file_id: &str) -> Result<Vec<Value>, BatchError> {
        let file = [self.file(file_id).await?];
        Ok(EachLine::new(&file).collect())
    }
}

/// The lines of JSONL files, each parsed as it is reached; a line that is not JSON is
/// skipped (its request then has no result, and its job fails for that).
pub struct EachLine<'a> {
    files: &'a [Bytes],
    /// The file being read, and where in it.
    file: usize,
    at: usize,
}

impl<'a> EachLine<'a> {
    pub fn new(files: &'a [Bytes]) -> Self {
        EachLine {
            files,
            file: 0,
            at: 0,
        }
    }
}

impl Iterator for EachLine<'_> {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        loop {
            let bytes = self.files.get(self.file)?;
            if self.at >= bytes.len() {
                self.file += 1;
                self.at = 0;
                continue;
            }
            let rest = &bytes[self.at..];
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            self.at += end + 1;
            let line = &rest[..end];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Ok(v) = serde_json::from_slice(line) {
                return Some(v);
            }
        }
    }
}
