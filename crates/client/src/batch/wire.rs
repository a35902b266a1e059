//! What every batch API shares: a batch's state in OpenAI's words, the errors of a call, the
//! HTTP calls at one endpoint (its key, headers, deadline and size limits), and the lines
//! of the result files.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;

use crate::transport::{HttpMethod, HttpRequest, Transport};

/// The most a batch's output or error file may hold when read back.
pub const MAX_FILE_BYTES: usize = 512 * 1024 * 1024;

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
        Value::String(s) => promptgauge_base::clock::parse_utc(&s).unwrap_or(0.0),
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
    /// The endpoint's protocol has no batch API.
    #[error("{0} has no batch API")]
    Absent(&'static str),
}

impl BatchError {
    /// Whether asking again cannot help: the request or the key is at fault (400, 401,
    /// 403, 404, 422), or the answer was not what the API sends.
    pub fn is_final(&self) -> bool {
        match self {
            BatchError::Http { status, .. } => matches!(status, 400 | 401 | 403 | 404 | 422),
            BatchError::Transport(_) => false,
            BatchError::Invalid(_) | BatchError::Absent(_) => true,
        }
    }
}

/// The HTTP calls of a batch API at one endpoint: its base URL, key and headers, and the
/// total deadline each call has.
pub struct Http {
    pub(super) transport: Arc<dyn Transport>,
    pub(super) base_url: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) deadline: std::time::Duration,
}

impl Http {
    /// One call's answer, refused beyond `limit` bytes or when it is not a 200.
    pub(crate) async fn call(
        &self,
        method: HttpMethod,
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
            body: body.into(),
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
                let message = crate::error_message(&bytes);
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

    /// A JSON call (no body for `Value::Null`), its answer parsed.
    pub(crate) async fn json(
        &self,
        method: HttpMethod,
        path: &str,
        body: Value,
    ) -> Result<Value, BatchError> {
        let body = match body {
            Value::Null => Bytes::new(),
            v => Bytes::from(v.to_string()),
        };
        let bytes = self
            .call(method, path, "application/json", body, 16 * 1024 * 1024)
            .await?;
        serde_json::from_slice(&bytes).map_err(|e| BatchError::Invalid(format!("{path}: {e}")))
    }

    /// A file read at `path`, refused beyond `limit`.
    pub(crate) async fn read(&self, path: &str, limit: usize) -> Result<Bytes, BatchError> {
        self.call(
            HttpMethod::Get,
            path,
            "application/json",
            Bytes::new(),
            limit,
        )
        .await
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
