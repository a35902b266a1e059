//! OpenAI's batch API: a JSONL file uploaded to `/v1/files`, submitted to `/v1/batches`,
//! its output and error files read back from `/v1/files/{id}/content`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::api::{BatchApi, Pending};
use super::wire::{BatchError, BatchState, Http};
use crate::protocol::Protocol;
use crate::transport::HttpMethod;

/// `/v1/files` and `/v1/batches`, for chat completions and Responses.
pub(crate) struct OpenAiBatches;

impl BatchApi for OpenAiBatches {
    fn limits(&self) -> (usize, usize) {
        (50_000, 200 * 1024 * 1024)
    }

    fn path(&self) -> &'static str {
        "/batches"
    }

    fn keeps_names(&self) -> bool {
        true
    }

    fn custom_id(&self, key: &str) -> String {
        key.to_string()
    }

    fn line(&self, custom_id: String, body: Value, url: &'static str) -> Value {
        json!({
            "custom_id": custom_id,
            "method": "POST",
            "url": url,
            "body": body,
        })
    }

    fn after(&self, id: &str) -> String {
        format!("&after={id}")
    }

    fn state(&self, v: Value) -> Result<BatchState, BatchError> {
        serde_json::from_value(v).map_err(|e| BatchError::Invalid(format!("not a batch: {e}")))
    }

    fn prepare<'a>(
        &'a self,
        http: &'a Http,
        name: &'a str,
        jsonl: &'a [u8],
    ) -> Pending<'a, Option<String>> {
        Box::pin(async move { upload(http, name, jsonl).await.map(Some) })
    }

    fn submit<'a>(
        &'a self,
        http: &'a Http,
        file: Option<&'a str>,
        _jsonl: &'a [u8],
        endpoint: &'a str,
        metadata: Value,
    ) -> Pending<'a, BatchState> {
        Box::pin(async move {
            let Some(file) = file else {
                return Err(BatchError::Invalid("no input file to submit".into()));
            };
            create(http, file, endpoint, metadata).await
        })
    }

    fn result_files<'a>(
        &'a self,
        http: &'a Http,
        batch: &'a BatchState,
        limit: usize,
    ) -> Pending<'a, Vec<Bytes>> {
        Box::pin(async move {
            let mut files = Vec::new();
            // The output and error files share one limit: two files never hold twice what
            // one may.
            let mut left = limit;
            for file in [&batch.output_file_id, &batch.error_file_id]
                .into_iter()
                .flatten()
            {
                let bytes = http.read(&format!("/files/{file}/content"), left).await?;
                left -= bytes.len();
                files.push(bytes);
            }
            Ok(files)
        })
    }

    fn answer<'a>(
        &self,
        protocol: &dyn Protocol,
        line: &'a Value,
    ) -> Result<&'a Value, (Option<u16>, String)> {
        if let Some(err) = line.get("error").filter(|e| !e.is_null()) {
            let code = err["code"].as_str().unwrap_or("error");
            let message = err["message"].as_str().unwrap_or_default();
            return Err((
                None,
                format!("the batch did not run it ({code}): {message}"),
            ));
        }
        let status = line
            .pointer("/response/status_code")
            .and_then(Value::as_u64)
            .map_or(0, |s| s.min(999) as u16);
        let body = line.pointer("/response/body").unwrap_or(&Value::Null);
        if status != 200 {
            let message = protocol.error_message(&body.to_string());
            return Err((
                Some(status),
                format!("the batch's request failed: HTTP {status}: {message}"),
            ));
        }
        Ok(body)
    }
}

/// Uploads a batch's input file (JSONL); its id.
pub(super) async fn upload(http: &Http, name: &str, jsonl: &[u8]) -> Result<String, BatchError> {
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
    let bytes = http
        .call(
            HttpMethod::Post,
            "/files",
            &format!("multipart/form-data; boundary={boundary}"),
            Bytes::from(form),
            1024 * 1024,
        )
        .await?;
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| BatchError::Invalid(format!("/files: {e}")))?;
    v["id"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| BatchError::Invalid("/files answered no file id".into()))
}

/// Submits an uploaded file as a batch to `endpoint`, with `metadata`.
pub(super) async fn create(
    http: &Http,
    file_id: &str,
    endpoint: &str,
    metadata: Value,
) -> Result<BatchState, BatchError> {
    let v = http
        .json(
            HttpMethod::Post,
            "/batches",
            json!({"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h", "metadata": metadata}),
        )
        .await?;
    OpenAiBatches.state(v)
}
