//! OpenAI's batch API, the client's side (issue 23, docs to come with `--batch`): a lane's
//! jobs as the lines of a JSONL file (each `custom_id` the job's idempotency key, each body
//! the request streaming would send, not streamed), uploaded to `/v1/files`, submitted to
//! `/v1/batches`, polled, and its output and error files read back. Every call has the
//! endpoint's key and headers, a time limit (the total deadline) and a size limit.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{HttpRequest, Method, Transport};
use super::{Client, JobRequest};

/// The most a batch's output or error file may hold when read back.
pub const MAX_FILE_BYTES: usize = 512 * 1024 * 1024;

/// A batch as the provider describes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BatchState {
    pub id: String,
    /// `validating`, `in_progress`, `finalizing`, `completed`, `failed`, `expired`,
    /// `cancelling`, `cancelled`.
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
}

impl BatchState {
    /// Whether the provider is done with it (its files are final).
    pub fn ended(&self) -> bool {
        matches!(
            self.status.as_str(),
            "completed" | "failed" | "expired" | "cancelled"
        )
    }
}

/// How many of a batch's requests are done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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

/// The batch API at one endpoint.
pub struct Batches {
    transport: Arc<dyn Transport>,
    base_url: String,
    headers: Vec<(String, String)>,
    deadline: std::time::Duration,
}

impl Client {
    /// The batch API at this client's endpoint (its first base URL), with its key and
    /// headers.
    pub fn batches(&self) -> Batches {
        let mut headers = self.protocol.key_headers(self.config.api_key.as_ref());
        headers.extend(self.config.headers.iter().cloned());
        Batches {
            transport: self.transport.clone(),
            base_url: self.config.base_url.trim_end_matches('/').to_string(),
            headers,
            deadline: self.config.total_timeout,
        }
    }

    /// A job as one line of a batch's input file: its idempotency key as `custom_id`, the
    /// body streaming would send (this client's model, protocol and parameters), not
    /// streamed.
    pub fn batch_line(&self, job: &JobRequest) -> Value {
        let body = self
            .protocol
            .body(&self.config.model, job, super::Dialect::default());
        let mut body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if let Some(o) = body.as_object_mut() {
            o.remove("stream");
            o.remove("stream_options");
        }
        json!({
            "custom_id": job.idempotency_key,
            "method": "POST",
            "url": self.batch_endpoint(),
            "body": body,
        })
    }

    /// The path a batch's requests go to: the protocol's, under `/v1`.
    pub fn batch_endpoint(&self) -> &'static str {
        match self.config.protocol {
            super::ProtocolKind::OpenaiResponses => "/v1/responses",
            _ => "/v1/chat/completions",
        }
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
            let mut bytes = Vec::new();
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
                let text = String::from_utf8_lossy(&bytes);
                let message = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| {
                        v.pointer("/error/message")
                            .and_then(Value::as_str)
                            .map(String::from)
                    })
                    .unwrap_or_else(|| text.chars().take(300).collect());
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

    fn state(v: Value) -> Result<BatchState, BatchError> {
        serde_json::from_value(v).map_err(|e| BatchError::Invalid(format!("not a batch: {e}")))
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

    /// Submits an uploaded file as a batch to `endpoint`, with `metadata` (the run's id, so
    /// a resume finds it).
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
        Self::state(v)
    }

    /// A batch's state now.
    pub async fn retrieve(&self, id: &str) -> Result<BatchState, BatchError> {
        Self::state(
            self.json(Method::Get, &format!("/batches/{id}"), Value::Null)
                .await?,
        )
    }

    /// The batches the provider lists (the newest page).
    pub async fn list(&self) -> Result<Vec<BatchState>, BatchError> {
        let v = self
            .json(Method::Get, "/batches?limit=100", Value::Null)
            .await?;
        serde_json::from_value(v["data"].clone())
            .map_err(|e| BatchError::Invalid(format!("not a list of batches: {e}")))
    }

    /// Asks the provider to cancel a batch.
    pub async fn cancel(&self, id: &str) -> Result<BatchState, BatchError> {
        Self::state(
            self.json(Method::Post, &format!("/batches/{id}/cancel"), Value::Null)
                .await?,
        )
    }

    /// An output or error file's lines.
    pub async fn content(&self, file_id: &str) -> Result<Vec<Value>, BatchError> {
        let bytes = self
            .call(
                Method::Get,
                &format!("/files/{file_id}/content"),
                "application/json",
                Bytes::new(),
                MAX_FILE_BYTES,
            )
            .await?;
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .map(|l| {
                serde_json::from_slice(l)
                    .map_err(|e| BatchError::Invalid(format!("a line of {file_id}: {e}")))
            })
            .collect()
    }
}
