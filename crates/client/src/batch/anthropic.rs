//! Anthropic's Message Batches: the requests in the batch itself
//! (`POST /v1/messages/batches`), its state in Anthropic's words (mapped to OpenAI's), its
//! results read back as JSONL from `…/{id}/results`. It keeps no metadata, and its
//! `custom_id`s are 1–64 of `[A-Za-z0-9_-]`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::api::{BatchApi, Pending};
use super::wire::{BatchError, BatchState, Http, RequestCounts};
use crate::protocol::Protocol;
use crate::transport::HttpMethod;

/// `/v1/messages/batches`.
pub(crate) struct AnthropicBatches;

impl BatchApi for AnthropicBatches {
    fn limits(&self) -> (usize, usize) {
        (100_000, 256 * 1024 * 1024)
    }

    fn path(&self) -> &'static str {
        "/messages/batches"
    }

    fn keeps_names(&self) -> bool {
        false
    }

    /// The idempotency key when it fits, else a stable hash of it.
    fn custom_id(&self, key: &str) -> String {
        let fits = key.len() <= 64
            && !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if fits {
            return key.to_string();
        }
        let mut h = promptgauge_base::hash::StableHasher::default();
        h.write(key.as_bytes());
        format!("pg-{:016x}", h.finish())
    }

    /// Its requests name no URL.
    fn line(&self, custom_id: String, body: Value, _url: &'static str) -> Value {
        json!({"custom_id": custom_id, "params": body})
    }

    fn after(&self, id: &str) -> String {
        format!("&after_id={id}")
    }

    /// Anthropic's description, in the words of OpenAI's.
    fn state(&self, v: Value) -> Result<BatchState, BatchError> {
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
                .and_then(promptgauge_base::clock::parse_utc)
                .unwrap_or(0.0),
        })
    }

    /// Nothing to upload: the batch takes its requests itself.
    fn prepare<'a>(
        &'a self,
        _http: &'a Http,
        _name: &'a str,
        _jsonl: &'a [u8],
    ) -> Pending<'a, Option<String>> {
        Box::pin(async { Ok(None) })
    }

    /// With its `jsonl` requests; it keeps no metadata.
    fn submit<'a>(
        &'a self,
        http: &'a Http,
        _file: Option<&'a str>,
        jsonl: &'a [u8],
        _endpoint: &'a str,
        _metadata: Value,
    ) -> Pending<'a, BatchState> {
        Box::pin(async move {
            let requests = jsonl
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    serde_json::from_slice::<Value>(l)
                        .map_err(|e| BatchError::Invalid(e.to_string()))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let v = http
                .json(
                    HttpMethod::Post,
                    "/messages/batches",
                    json!({"requests": requests}),
                )
                .await?;
            self.state(v)
        })
    }

    fn result_files<'a>(
        &'a self,
        http: &'a Http,
        batch: &'a BatchState,
        limit: usize,
    ) -> Pending<'a, Vec<Bytes>> {
        Box::pin(async move {
            let path = format!("/messages/batches/{}/results", batch.id);
            Ok(vec![http.read(&path, limit).await?])
        })
    }

    fn answer<'a>(
        &self,
        protocol: &dyn Protocol,
        line: &'a Value,
    ) -> Result<&'a Value, (Option<u16>, String)> {
        match line.pointer("/result/type").and_then(Value::as_str) {
            Some("succeeded") => Ok(line.pointer("/result/message").unwrap_or(&Value::Null)),
            Some("errored") => {
                let err = line
                    .pointer("/result/error/error")
                    .or_else(|| line.pointer("/result/error"))
                    .unwrap_or(&Value::Null);
                let message = protocol.error_message(&json!({"error": err}).to_string());
                Err((
                    status_of(err["type"].as_str()),
                    format!("the batch's request failed: {message}"),
                ))
            }
            Some(kind @ ("canceled" | "expired")) => {
                Err((None, format!("the batch did not run it ({kind})")))
            }
            other => Err((
                None,
                format!("the batch gave no result ({})", other.unwrap_or("no type")),
            )),
        }
    }
}

/// The status an error's type stands for, so a request at fault is not taken for an outage.
fn status_of(kind: Option<&str>) -> Option<u16> {
    match kind {
        Some("invalid_request_error") => Some(400),
        Some("authentication_error") => Some(401),
        Some("permission_error") => Some(403),
        Some("not_found_error") => Some(404),
        Some("request_too_large") => Some(413),
        Some("rate_limit_error") => Some(429),
        Some("api_error") => Some(500),
        Some("overloaded_error") => Some(529),
        _ => None,
    }
}
