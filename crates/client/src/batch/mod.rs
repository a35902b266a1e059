//! Provider batch APIs, the client's side (docs/guide/batch.md): a lane's jobs as the lines of a
//! batch (each `custom_id` the job's idempotency key, each body the request streaming would
//! send, not streamed), submitted, polled, and read back. Each API is a [`BatchApi`], in a
//! file of its own: OpenAI's (`openai.rs`: a JSONL file uploaded to `/v1/files`, submitted
//! to `/v1/batches`, its output and error files read back) and Anthropic's Message Batches
//! (`anthropic.rs`: `/v1/messages/batches`, its results read back as JSONL); an endpoint's
//! protocol picks one ([`Client::batch_api`]). Every call has the endpoint's key and
//! headers, a time limit (the total deadline) and a size limit; results are only ever read
//! from the endpoint's own base URL.

mod anthropic;
mod api;
mod none;
mod openai;
mod wire;

use bytes::Bytes;
use serde_json::Value;

pub(crate) use anthropic::AnthropicBatches;
pub(crate) use api::BatchApi;
pub use none::NoBatchApi;
pub(crate) use openai::OpenAiBatches;
pub use wire::{BatchError, BatchState};
pub use wire::{EachLine, Http, MAX_FILE_BYTES};

use super::protocol::{BatchApiKind, BatchRoute};
use super::transport::HttpMethod;
use super::{Client, JobRequest, JobResult, Streamed};

/// The batch API at one endpoint.
pub struct Batches {
    pub api: &'static dyn BatchApi,
    http: Http,
    /// The most a batch's result files may hold, all together.
    file_limit: usize,
}

impl Client {
    /// Its provider's batch API and where a batch's requests go, as its protocol says;
    /// `None` when it has none (`--batch` is refused before anything is sent).
    pub fn batch_route(&self) -> Option<BatchRoute> {
        self.protocol.batch()
    }

    /// The batch API this client's endpoint has; a protocol without one gets
    /// [`NoBatchApi`], whose every call fails (a run checks [`Client::batch_route`] first).
    pub fn batch_api(&self) -> &'static dyn BatchApi {
        // Every batch API decides (no wildcard): a new one names its implementation here.
        match self.batch_route().map(|r| r.api) {
            Some(BatchApiKind::Anthropic) => &AnthropicBatches,
            Some(BatchApiKind::OpenAi) => &OpenAiBatches,
            None => &NoBatchApi,
        }
    }

    /// The batch API at this client's endpoint (its first base URL), with its key and
    /// headers.
    pub fn batches(&self) -> Batches {
        let mut headers = self.protocol.key_headers(self.config.api_key.as_ref());
        headers.extend(self.config.headers.iter().cloned());
        Batches {
            api: self.batch_api(),
            http: Http {
                transport: self.transport.clone(),
                base_url: self.config.base_url.trim_end_matches('/').to_string(),
                headers,
                deadline: self.config.limits.total_timeout,
            },
            file_limit: MAX_FILE_BYTES,
        }
    }

    /// The `custom_id` a job has in a batch: its idempotency key, unless the API cannot
    /// take it (Anthropic's are 1–64 of `[A-Za-z0-9_-]`): then a stable hash of it.
    pub fn batch_custom_id(&self, key: &str) -> String {
        self.batch_api().custom_id(key)
    }

    /// A job as one request of a batch: its `custom_id` (the idempotency key), and the body
    /// streaming would send (this client's model, protocol and parameters), not streamed.
    pub fn batch_line(&self, job: &JobRequest) -> Value {
        let body = self
            .protocol
            .body(&self.config.model, job, super::Dialect::default());
        let mut body: Value = serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null);
        if let Some(o) = body.as_object_mut() {
            o.remove("stream");
            o.remove("stream_options");
        }
        let custom_id = self.batch_custom_id(&job.idempotency_key);
        self.batch_api()
            .line(custom_id, body, self.batch_endpoint())
    }

    /// The path a batch's requests go to: the protocol's, under `/v1`.
    pub fn batch_endpoint(&self) -> &'static str {
        self.batch_route().map_or("", |r| r.url)
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
        let result = match self.batch_api().answer(self.protocol.as_ref(), line) {
            Ok(body) => {
                let mut s = Streamed::default();
                self.protocol.whole(&mut s, body);
                self.whole_result(s)
            }
            Err((status, why)) => self.failed_result(status, why),
        };
        (custom_id, result)
    }
}

impl Batches {
    /// Whether the endpoint has this batch API: a list of its batches answers (a 404 or
    /// 405 says it has none). Asked before anything is sent.
    pub async fn probe(&self) -> Result<(), BatchError> {
        self.http
            .json(
                HttpMethod::Get,
                &format!("{}?limit=1", self.api.path()),
                Value::Null,
            )
            .await
            .map(drop)
    }

    /// Uploads a batch's input file (JSONL) where the API takes one (OpenAI's): its id.
    /// Anthropic's takes the requests in the batch itself: `None`.
    pub async fn prepare(&self, name: &str, jsonl: &[u8]) -> Result<Option<String>, BatchError> {
        self.api.prepare(&self.http, name, jsonl).await
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
        self.api
            .submit(&self.http, file, jsonl, endpoint, metadata)
            .await
    }

    /// Uploads a batch's input file (JSONL) to OpenAI's `/v1/files`; its id.
    pub async fn upload(&self, name: &str, jsonl: &[u8]) -> Result<String, BatchError> {
        openai::upload(&self.http, name, jsonl).await
    }

    /// Submits an uploaded file as an OpenAI batch to `endpoint`, with `metadata`.
    pub async fn create(
        &self,
        file_id: &str,
        endpoint: &str,
        metadata: Value,
    ) -> Result<BatchState, BatchError> {
        openai::create(&self.http, file_id, endpoint, metadata).await
    }

    /// A batch's state now.
    pub async fn retrieve(&self, id: &str) -> Result<BatchState, BatchError> {
        let v = self
            .http
            .json(
                HttpMethod::Get,
                &format!("{}/{id}", self.api.path()),
                Value::Null,
            )
            .await?;
        self.api.state(v)
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
            let cursor = after
                .as_deref()
                .map_or(String::new(), |id| self.api.after(id));
            let v = self
                .http
                .json(
                    HttpMethod::Get,
                    &format!("{}?limit=100{cursor}", self.api.path()),
                    Value::Null,
                )
                .await?;
            let page = v["data"]
                .as_array()
                .ok_or_else(|| BatchError::Invalid("not a list of batches".into()))?
                .iter()
                .map(|b| self.api.state(b.clone()))
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
            .http
            .json(
                HttpMethod::Post,
                &format!("{}/{id}/cancel", self.api.path()),
                Value::Null,
            )
            .await?;
        self.api.state(v)
    }

    /// An ended batch's result files as read (JSONL, one line per request): OpenAI's output
    /// and error files, Anthropic's results — read at the endpoint's own base URL, never at
    /// a URL the provider names, so the key goes nowhere else. They are read a line at a
    /// time ([`EachLine`]): a batch of 50,000 answers is never held as parsed JSON at once.
    pub async fn result_files(&self, batch: &BatchState) -> Result<Vec<Bytes>, BatchError> {
        self.api
            .result_files(&self.http, batch, self.file_limit)
            .await
    }

    /// The same API with another limit on what a batch's result files may hold (the
    /// default is [`MAX_FILE_BYTES`]).
    pub fn with_file_limit(mut self, bytes: usize) -> Batches {
        self.file_limit = bytes;
        self
    }

    /// An output or error file's lines (a line that is not JSON is skipped, as when the
    /// results are read: [`EachLine`]).
    pub async fn content(&self, file_id: &str) -> Result<Vec<Value>, BatchError> {
        let file = [self
            .http
            .read(&format!("/files/{file_id}/content"), self.file_limit)
            .await?];
        Ok(EachLine::new(&file).collect())
    }
}
