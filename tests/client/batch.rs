//! The simulator's OpenAI batch API (issue 23's first step), over the in-memory transport
//! on a paused clock: files, batches, their request counts, output and error files,
//! cancellation, expiry, the key — and a batched answer equal to the streamed one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use promptgauge::client::transport::{HttpMethod, HttpRequest, Transport};
use promptgauge::client::{ChatMessage, Client, ClientConfig, JobRequest};
use promptgauge::mock::memory::MemoryTransport;
use promptgauge::mock::{MockConfig, Provider};
use serde_json::{Value, json};

const BASE: &str = "http://sim/v1";
const BOUNDARY: &str = "pg-boundary-42";

/// Sends one request; (status, body).
async fn call(
    t: &MemoryTransport,
    method: HttpMethod,
    path: &str,
    body: Bytes,
    content_type: &str,
) -> (u16, Bytes) {
    let response = t
        .send(HttpRequest {
            method,
            url: format!("{BASE}{path}"),
            headers: vec![
                ("content-type".into(), content_type.into()),
                ("authorization".into(), "Bearer sk-batch".into()),
            ],
            body: body.into(),
        })
        .await
        .unwrap();
    let mut body = Vec::new();
    let mut stream = response.body;
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk.unwrap());
    }
    (response.status, Bytes::from(body))
}

async fn json_call(
    t: &MemoryTransport,
    method: HttpMethod,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let (status, bytes) = call(
        t,
        method,
        path,
        Bytes::from(body.to_string()),
        "application/json",
    )
    .await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Uploads `lines` as a batch input file; its id.
async fn upload(t: &MemoryTransport, lines: &[Value]) -> String {
    let jsonl: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let form = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"jobs.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n{jsonl}\r\n--{BOUNDARY}--\r\n"
    );
    let (status, bytes) = call(
        t,
        HttpMethod::Post,
        "/files",
        Bytes::from(form),
        &format!("multipart/form-data; boundary={BOUNDARY}"),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let file: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(file["purpose"], "batch");
    assert_eq!(file["bytes"], jsonl.len());
    assert_eq!(file["filename"], "jobs.jsonl");
    file["id"].as_str().unwrap().to_string()
}

fn question(i: usize) -> String {
    format!("What is {i} + {i}?")
}

fn line(i: usize) -> Value {
    json!({
        "custom_id": format!("pg-run-{i}"),
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "mock-model", "messages": [{"role": "user", "content": question(i)}], "max_tokens": 100},
    })
}

fn config(delay: Duration) -> MockConfig {
    MockConfig {
        api_key: Some("sk-batch".into()),
        batch_delay: delay,
        ..MockConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_batch_completes_after_its_delay_with_the_answers_streaming_gives() {
    let provider = Arc::new(Provider::new(config(Duration::from_secs(600))));
    let t = MemoryTransport::new(provider.clone());
    let lines: Vec<Value> = (1..=5).map(line).collect();
    let file = upload(&t, &lines).await;
    let (status, batch) = json_call(
        &t,
        HttpMethod::Post,
        "/batches",
        json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": {"promptgauge_run": "run-7"}}),
    )
    .await;
    assert_eq!(status, 200, "{batch}");
    let id = batch["id"].as_str().unwrap().to_string();
    assert_eq!(batch["status"], "in_progress");
    assert_eq!(batch["request_counts"]["total"], 5);
    assert_eq!(provider.batches_created(), 1);
    // Not before its time.
    tokio::time::sleep(Duration::from_secs(599)).await;
    let (_, batch) = json_call(&t, HttpMethod::Get, &format!("/batches/{id}"), Value::Null).await;
    assert_eq!(batch["status"], "in_progress");
    assert_eq!(provider.stats().generations, 0, "nothing answered yet");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, batch) = json_call(&t, HttpMethod::Get, &format!("/batches/{id}"), Value::Null).await;
    assert_eq!(batch["status"], "completed", "{batch}");
    assert_eq!(
        batch["request_counts"],
        json!({"total": 5, "completed": 5, "failed": 0})
    );
    assert!(batch["error_file_id"].is_null());
    // Found by its metadata in the list.
    let (_, list) = json_call(&t, HttpMethod::Get, "/batches?limit=100", Value::Null).await;
    assert_eq!(list["data"][0]["metadata"]["promptgauge_run"], "run-7");
    // The output file: a line per request, by custom_id, as a chat completion.
    let output = batch["output_file_id"].as_str().unwrap();
    let (status, bytes) = call(
        &t,
        HttpMethod::Get,
        &format!("/files/{output}/content"),
        Bytes::new(),
        "application/json",
    )
    .await;
    assert_eq!(status, 200);
    let answers: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 5);
    // The same requests streamed by the client from a fresh simulator: the same answers.
    let streamed = Arc::new(Provider::new(config(Duration::ZERO)));
    let mut c = ClientConfig::new(BASE, "mock-model");
    c.api_key = Some(promptgauge::client::ApiKey::new("sk-batch".into()));
    let client = Client::new(Arc::new(MemoryTransport::new(streamed)), c);
    for (i, a) in (1..=5).zip(&answers) {
        assert_eq!(a["custom_id"], format!("pg-run-{i}"));
        assert_eq!(a["response"]["status_code"], 200);
        let body = &a["response"]["body"];
        assert_eq!(body["object"], "chat.completion");
        let result = client
            .execute(&JobRequest {
                messages: vec![ChatMessage::new("user", question(i))],
                params: serde_json::from_value(json!({"max_tokens": 100})).unwrap(),
                idempotency_key: format!("pg-run-{i}"),
                reserve_tokens: 0,
            })
            .await;
        assert_eq!(
            body["choices"][0]["message"]["content"],
            result.text.as_str()
        );
        assert_eq!(
            body["choices"][0]["finish_reason"],
            result.finish_reason.as_deref().unwrap()
        );
        assert_eq!(
            body["usage"]["completion_tokens"],
            result.usage.unwrap().completion_tokens
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_batch_and_an_expired_one_say_which_requests_were_not_run() {
    let provider = Arc::new(Provider::new(config(Duration::from_secs(60))));
    let t = MemoryTransport::new(provider.clone());
    let file = upload(&t, &(1..=4).map(line).collect::<Vec<_>>()).await;
    let create = json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let (_, batch) = json_call(&t, HttpMethod::Post, "/batches", create.clone()).await;
    let id = batch["id"].as_str().unwrap();
    let (_, cancelled) = json_call(
        &t,
        HttpMethod::Post,
        &format!("/batches/{id}/cancel"),
        Value::Null,
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["request_counts"],
        json!({"total": 4, "completed": 0, "failed": 4})
    );
    let errors = cancelled["error_file_id"].as_str().unwrap();
    let (_, bytes) = call(
        &t,
        HttpMethod::Get,
        &format!("/files/{errors}/content"),
        Bytes::new(),
        "application/json",
    )
    .await;
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(text.matches("batch_cancelled").count(), 4, "{text}");
    assert_eq!(provider.stats().generations, 0);

    // Expiring: half answered, half in the error file.
    let expiring = Arc::new(Provider::new(MockConfig {
        batch_expires: true,
        ..config(Duration::from_secs(60))
    }));
    let t = MemoryTransport::new(expiring.clone());
    let file = upload(&t, &(1..=4).map(line).collect::<Vec<_>>()).await;
    let create = json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let (_, batch) = json_call(&t, HttpMethod::Post, "/batches", create).await;
    let id = batch["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    let (_, batch) = json_call(&t, HttpMethod::Get, &format!("/batches/{id}"), Value::Null).await;
    assert_eq!(batch["status"], "expired");
    assert_eq!(
        batch["request_counts"],
        json!({"total": 4, "completed": 2, "failed": 2})
    );
    assert_eq!(expiring.stats().generations, 2);
}

#[tokio::test(start_paused = true)]
async fn the_batch_api_wants_the_key_and_refuses_what_it_cannot_run() {
    let provider = Arc::new(Provider::new(config(Duration::ZERO)));
    let t = MemoryTransport::new(provider.clone());
    let response = t
        .send(HttpRequest {
            method: HttpMethod::Get,
            url: format!("{BASE}/batches"),
            headers: vec![("authorization".into(), "Bearer wrong".into())],
            body: Bytes::new().into(),
        })
        .await
        .unwrap();
    assert_eq!(response.status, 401);
    let file = upload(&t, &[line(1)]).await;
    let (status, e) = json_call(
        &t,
        HttpMethod::Post,
        "/batches",
        json!({"input_file_id": file, "endpoint": "/v1/embeddings"}),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    let (status, _) = json_call(
        &t,
        HttpMethod::Post,
        "/batches",
        json!({"input_file_id": "file-none", "endpoint": "/v1/chat/completions"}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = json_call(&t, HttpMethod::Get, "/batches/batch-none", Value::Null).await;
    assert_eq!(status, 404);
    assert_eq!(provider.batches_created(), 0);
}

/// The client's side: a lane's jobs as a batch's lines, uploaded, submitted with the run's
/// id, polled until done and read back — each answer by its job's key.
#[tokio::test(start_paused = true)]
async fn the_client_submits_polls_and_reads_a_batch_back() {
    let provider = Arc::new(Provider::new(config(Duration::from_secs(300))));
    let mut c = ClientConfig::new(BASE, "mock-model");
    c.api_key = Some(promptgauge::client::ApiKey::new("sk-batch".into()));
    let client = Client::new(Arc::new(MemoryTransport::new(provider.clone())), c);
    let jobs: Vec<JobRequest> = (1..=3)
        .map(|i| JobRequest {
            messages: vec![ChatMessage::new("user", question(i))],
            params: serde_json::from_value(json!({"max_tokens": 100})).unwrap(),
            idempotency_key: format!("pg-run-7-{i}"),
            reserve_tokens: 0,
        })
        .collect();
    let jsonl: String = jobs
        .iter()
        .map(|j| format!("{}\n", client.batch_line(j)))
        .collect();
    assert!(
        !jsonl.contains("\"stream\""),
        "a batch's requests are not streamed"
    );
    let api = client.batches();
    let file = api.upload("run-7.jsonl", jsonl.as_bytes()).await.unwrap();
    let batch = api
        .create(
            &file,
            client.batch_endpoint(),
            json!({"promptgauge_run": "run-7"}),
        )
        .await
        .unwrap();
    assert_eq!(batch.request_counts.total, 3);
    assert!(!batch.ended());
    // A resume finds it by the run's id.
    let found = api.list().await.unwrap();
    assert!(
        found
            .iter()
            .any(|b| b.id == batch.id && b.metadata["promptgauge_run"] == "run-7")
    );
    let mut state = batch;
    while !state.ended() {
        tokio::time::sleep(Duration::from_secs(60)).await;
        state = api.retrieve(&state.id).await.unwrap();
    }
    assert_eq!(state.status, "completed");
    let lines = api
        .content(state.output_file_id.as_deref().unwrap())
        .await
        .unwrap();
    let mut keys: Vec<&str> = lines
        .iter()
        .map(|l| l["custom_id"].as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["pg-run-7-1", "pg-run-7-2", "pg-run-7-3"]);
    for l in &lines {
        let i: usize = l["custom_id"]
            .as_str()
            .unwrap()
            .rsplit('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            l["response"]["body"]["choices"][0]["message"]["content"],
            (2 * i).to_string()
        );
    }
    assert_eq!(provider.batches_created(), 1);
    // A wrong key is an HTTP error, said with the provider's message.
    let mut bad = ClientConfig::new(BASE, "mock-model");
    bad.api_key = Some(promptgauge::client::ApiKey::new("sk-wrong".into()));
    let wrong = Client::new(Arc::new(MemoryTransport::new(provider)), bad);
    let e = wrong.batches().retrieve(&state.id).await.unwrap_err();
    assert!(
        matches!(
            e,
            promptgauge::client::batch::BatchError::Http { status: 401, .. }
        ),
        "{e}"
    );
}

/// A batch's result lines, read by each protocol's own decoder: the same closed list of
/// finishes as a stream's (an answer without a real finish is no answer), and the
/// provider's per-request failures as failures with their cause and status.
#[test]
fn a_batch_s_results_are_read_as_streams_are() {
    use promptgauge::client::{Outcome, ProtocolKind};
    let client = |protocol: ProtocolKind| {
        let mut config = ClientConfig::new(BASE, "m");
        config.protocol = protocol;
        let provider = Arc::new(Provider::new(MockConfig::default()));
        Client::new(Arc::new(MemoryTransport::new(provider)), config)
    };
    let chat = client(ProtocolKind::OpenaiChat);
    let ok = |finish: &str| {
        json!({"custom_id": "k", "response": {"status_code": 200, "body": {
            "model": "m-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "42",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            "finish_reason": finish}], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}}, "error": null})
    };
    let (id, r) = chat.batch_result(&ok("stop"));
    assert_eq!(id, "k");
    assert!(r.answered() && r.failure.is_none(), "{r:?}");
    assert_eq!((r.text.as_str(), r.model.as_deref()), ("42", Some("m-1")));
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.usage.unwrap().prompt_tokens, 9);
    assert_eq!(r.attempts[0].latency_ms, 0.0);
    assert_eq!(
        chat.batch_result(&ok("length")).1.outcome(),
        Some(Outcome::Truncated)
    );
    assert!(chat.batch_result(&ok("content_filter")).1.filtered());
    for no_finish in ["", "abort", "cancelled"] {
        let (_, r) = chat.batch_result(&ok(no_finish));
        assert!(!r.answered() && r.failure.is_some(), "{no_finish:?}: {r:?}");
    }
    // A request the provider refused, and one the batch never ran.
    let refused = json!({"custom_id": "k", "response": {"status_code": 400,
        "body": {"error": {"message": "Invalid 'max_tokens'", "type": "invalid_request_error"}}}, "error": null});
    let (_, r) = chat.batch_result(&refused);
    assert_eq!(r.attempts[0].status, Some(400));
    assert!(
        r.failure
            .as_deref()
            .unwrap()
            .contains("Invalid 'max_tokens'"),
        "{r:?}"
    );
    let expired = json!({"custom_id": "k", "response": null,
        "error": {"code": "batch_expired", "message": "not run in time"}});
    let r = chat.batch_result(&expired).1;
    assert!(
        r.failure.as_deref().unwrap().contains("batch_expired"),
        "{r:?}"
    );

    // The Responses API: a response object whose status says how it ended.
    let responses = client(ProtocolKind::OpenaiResponses);
    let body = |status: &str, reason: &str| {
        json!({"custom_id": "r", "response": {"status_code": 200, "body": {
        "status": status, "incomplete_details": {"reason": reason}, "model": "m",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "Paris"}]}],
        "usage": {"input_tokens": 5, "output_tokens": 1}}}})
    };
    let r = responses.batch_result(&body("completed", "")).1;
    assert!(r.answered() && r.text == "Paris", "{r:?}");
    assert_eq!(
        responses
            .batch_result(&body("incomplete", "max_output_tokens"))
            .1
            .outcome(),
        Some(Outcome::Truncated)
    );
    assert!(
        !responses
            .batch_result(&body("in_progress", ""))
            .1
            .answered()
    );

    // Anthropic's results: a message, an error, an expired or cancelled request.
    let anthropic = client(ProtocolKind::AnthropicMessages);
    let message = |stop: Value| {
        json!({"custom_id": "a", "result": {"type": "succeeded", "message": {
        "id": "msg", "type": "message", "role": "assistant", "model": "claude",
        "content": [{"type": "text", "text": "Canberra"}], "stop_reason": stop,
        "usage": {"input_tokens": 7, "output_tokens": 3}}}})
    };
    let r = anthropic.batch_result(&message(json!("end_turn"))).1;
    assert!(r.answered() && r.text == "Canberra", "{r:?}");
    assert_eq!(r.usage.unwrap().completion_tokens, 3);
    assert_eq!(
        anthropic
            .batch_result(&message(json!("max_tokens")))
            .1
            .outcome(),
        Some(Outcome::Truncated)
    );
    assert!(!anthropic.batch_result(&message(Value::Null)).1.answered());
    let errored = json!({"custom_id": "a", "result": {"type": "errored", "error": {"type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}}});
    let r = anthropic.batch_result(&errored).1;
    assert_eq!(r.attempts[0].status, Some(400));
    assert!(
        r.failure
            .as_deref()
            .unwrap()
            .contains("max_tokens: too large"),
        "{r:?}"
    );
    for kind in ["expired", "canceled"] {
        let r = anthropic
            .batch_result(&json!({"custom_id": "a", "result": {"type": kind}}))
            .1;
        assert!(r.failure.as_deref().unwrap().contains(kind), "{r:?}");
    }
    // A key the provider echoes into an answer is scrubbed, as from a stream.
    let mut config = ClientConfig::new(BASE, "m");
    config.api_key = Some(promptgauge::client::ApiKey::new(
        "sk-secret-123456789".into(),
    ));
    let provider = Arc::new(Provider::new(MockConfig::default()));
    let keyed = Client::new(Arc::new(MemoryTransport::new(provider)), config);
    let leak = json!({"custom_id": "k", "response": {"status_code": 500,
        "body": {"error": {"message": "bad key sk-secret-123456789"}}}});
    let r = keyed.batch_result(&leak).1;
    assert!(
        !r.failure
            .as_deref()
            .unwrap()
            .contains("sk-secret-123456789"),
        "{r:?}"
    );
}
