//! OpenAI's Responses API (`protocol: openai-responses`): streams scripted byte by byte (each
//! way a stream can end, docs/guide/client.md, "Hostile streams"), and the simulator answering on
//! `/v1/responses` in memory. Time is tokio's paused clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use promptgauge::client::{
    ApiKey, Client, ClientConfig, ClientEvent, Fatal, HttpRequest, JobRequest, JobResult, Outcome,
    ProtocolKind, Transport,
};
use promptgauge::grade::Shape;
use promptgauge::mock::answers::{Hint, Oracle};
use promptgauge::mock::memory::MemoryTransport;
use promptgauge::mock::{Faults, MockConfig, Provider, RetryAfter};
use promptgauge::suite::ChatMessage;
use serde_json::{Map, Value, json};

use super::hostile::{Reply, Scripted};

const KEY: &str = "sk-responses-test-key";

fn outcomes(r: &JobResult) -> Vec<Outcome> {
    r.attempts.iter().map(|a| a.outcome).collect()
}

fn job(messages: Vec<ChatMessage>, params: Value) -> JobRequest {
    JobRequest {
        messages,
        params: params.as_object().cloned().unwrap_or_default(),
        idempotency_key: "k".into(),
        reserve_tokens: 0,
    }
}

fn user(text: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::new("user", text)]
}

/// One event as servers send it: its name on an `event:` line, `type` in its data.
fn event(kind: &str, mut data: Value) -> String {
    data["type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n")
}

fn delta(text: &str) -> String {
    event(
        "response.output_text.delta",
        json!({"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text}),
    )
}

fn ended(kind: &str, response: Value) -> String {
    event(kind, json!({"response": response}))
}

fn completed() -> String {
    ended(
        "response.completed",
        json!({"status": "completed", "usage": {"input_tokens": 11, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 3}, "output_tokens_details": {"reasoning_tokens": 2}}}),
    )
}

/// A body sent one byte at a time.
fn bytewise(events: &[String]) -> Reply {
    Reply::ok(
        events
            .concat()
            .into_bytes()
            .into_iter()
            .map(|b| vec![b])
            .collect(),
    )
}

fn whole(events: &[String]) -> Reply {
    Reply::ok(vec![events.concat().into_bytes()])
}

fn status(code: u16, headers: &[(&str, &str)], body: Value) -> Reply {
    Reply {
        status: code,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        chunks: vec![body.to_string().into_bytes()],
        hang: false,
    }
}

/// A client speaking the Responses API to scripted replies.
fn scripted(replies: Vec<Reply>, tweak: impl FnOnce(&mut ClientConfig)) -> (Client, Arc<Scripted>) {
    let mut config = ClientConfig::new("http://scripted/v1", "m");
    config.protocol = ProtocolKind::OpenaiResponses;
    config.api_key = Some(ApiKey::new(KEY.into()));
    config.limits.max_attempts = 3;
    config.backoff_base = Duration::from_secs(1);
    tweak(&mut config);
    let transport = Arc::new(Scripted {
        replies: Mutex::new(replies),
        ..Scripted::default()
    });
    (Client::new(transport.clone(), config), transport)
}

/// Plays replies to one job; returns its result and the requests sent.
async fn play(replies: Vec<Reply>, job: &JobRequest) -> (JobResult, Vec<HttpRequest>) {
    let (client, transport) = scripted(replies, |_| {});
    let r = client.execute(job).await;
    let seen = std::mem::take(&mut *transport.seen.lock().unwrap());
    (r, seen)
}

fn body(request: &HttpRequest) -> Value {
    serde_json::from_slice(&request.body.to_bytes()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn responses_text_byte_by_byte_completes_with_its_usage_and_the_key_as_bearer() {
    let (r, seen) = play(
        vec![bytewise(&[
            ended(
                "response.created",
                json!({"status": "in_progress", "model": "m-2025"}),
            ),
            delta("4"),
            delta("2"),
            completed(),
        ])],
        &job(
            vec![
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("user", "6×7?"),
            ],
            json!({"max_tokens": 20}),
        ),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(
        (
            r.text.as_str(),
            r.finish_reason.as_deref(),
            r.model.as_deref()
        ),
        ("42", Some("completed"), Some("m-2025"))
    );
    let u = r.usage.unwrap();
    assert_eq!(
        (
            u.prompt_tokens,
            u.completion_tokens,
            u.cached_tokens,
            u.reasoning_tokens,
            u.estimated
        ),
        (11, 5, 3, 2, false)
    );
    assert_eq!(seen[0].url, "http://scripted/v1/responses");
    let header = |name: &str| {
        seen[0]
            .headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header("authorization"), Some(format!("Bearer {KEY}")));
    assert_eq!(header("idempotency-key").as_deref(), Some("k"));
    let b = body(&seen[0]);
    assert_eq!(
        b["input"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6×7?"}])
    );
    assert_eq!(
        (&b["max_output_tokens"], &b["stream"]),
        (&json!(20), &json!(true))
    );
    assert!(
        b.get("messages").is_none() && b.get("max_tokens").is_none(),
        "{b}"
    );
}

#[tokio::test(start_paused = true)]
async fn responses_cut_before_completed_is_retried_and_its_text_never_kept() {
    let (r, _) = play(
        vec![
            bytewise(&[delta("4"), delta("1")]),
            whole(&[delta("42"), completed()]),
        ],
        &job(user("6×7?"), json!({})),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert_eq!(r.text, "42");
    assert!(
        r.attempts[0].error.as_deref().unwrap().contains("without"),
        "{:?}",
        r.attempts[0]
    );
}

#[tokio::test(start_paused = true)]
async fn responses_an_error_event_mid_stream_is_retried_after_full_jitter_backoff() {
    let overloaded = event(
        "error",
        json!({"code": "server_error", "message": "The model is overloaded.", "param": null}),
    );
    let (r, _) = play(
        vec![
            whole(&[delta("4"), overloaded.clone()]),
            whole(&[delta("4"), overloaded]),
            whole(&[delta("42"), completed()]),
        ],
        &job(user("6×7?"), json!({})),
    )
    .await;
    assert_eq!(
        outcomes(&r),
        [
            Outcome::StreamError,
            Outcome::StreamError,
            Outcome::Complete
        ]
    );
    assert_eq!(r.text, "42", "the text before the error is not kept");
    assert_eq!(
        r.attempts[0].error.as_deref(),
        Some("server_error: The model is overloaded.")
    );
    // Full jitter under base·2^retry: at most 1 s, then at most 2 s, in virtual time.
    let waits: Vec<f64> = r.attempts[..2].iter().map(|a| a.wait_ms.unwrap()).collect();
    assert!(waits[0] <= 1000.0 && waits[1] <= 2000.0, "{waits:?}");
}

#[tokio::test(start_paused = true)]
async fn responses_failed_as_overloaded_is_retried_but_a_failure_blaming_the_request_is_not() {
    let failed = |code: &str| {
        ended(
            "response.failed",
            json!({"status": "failed", "error": {"code": code, "message": "It failed."}}),
        )
    };
    let (r, _) = play(
        vec![
            whole(&[delta("4"), failed("server_error")]),
            whole(&[delta("42"), completed()]),
        ],
        &job(user("6×7?"), json!({})),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::StreamError, Outcome::Complete]);
    let (r, seen) = play(
        vec![whole(&[failed("invalid_prompt")])],
        &job(user("6×7?"), json!({})),
    )
    .await;
    assert_eq!((outcomes(&r), seen.len()), (vec![Outcome::StreamError], 1));
    assert!(!r.answered());
    assert!(
        r.failure
            .as_deref()
            .unwrap()
            .contains("invalid_prompt: It failed."),
        "{:?}",
        r.failure
    );
}

#[tokio::test(start_paused = true)]
async fn responses_incomplete_at_max_output_tokens_is_a_truncated_answer_that_is_graded() {
    let (r, _) = play(
        vec![bytewise(&[
            delta("The answer is"),
            ended(
                "response.incomplete",
                json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}),
            ),
        ])],
        &job(user("6×7?"), json!({"max_tokens": 3})),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Truncated]);
    assert!(r.answered());
    assert_eq!(
        (r.text.as_str(), r.finish_reason.as_deref()),
        ("The answer is", Some("max_output_tokens"))
    );
}

#[tokio::test(start_paused = true)]
async fn responses_withheld_by_the_content_filter_is_not_retried() {
    let (r, seen) = play(
        vec![whole(&[
            delta("Here is"),
            ended(
                "response.incomplete",
                json!({"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}),
            ),
        ])],
        &job(user("x"), json!({})),
    )
    .await;
    assert_eq!((outcomes(&r), seen.len()), (vec![Outcome::Filtered], 1));
    assert!(r.filtered() && !r.answered());
}

#[tokio::test(start_paused = true)]
async fn responses_a_function_call_streamed_in_pieces_byte_by_byte() {
    let piece = |d: &str| {
        event(
            "response.function_call_arguments.delta",
            json!({"item_id": "fc_1", "output_index": 0, "delta": d}),
        )
    };
    let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_7", "name": "get_weather", "arguments": ""});
    let mut events = vec![event(
        "response.output_item.added",
        json!({"output_index": 0, "item": item}),
    )];
    events.extend(["{\"ci", "ty\"", ":", "\"Os", "lo\"", "}"].map(piece));
    events.push(event(
        "response.function_call_arguments.done",
        json!({"item_id": "fc_1", "output_index": 0, "arguments": "{\"city\":\"Oslo\"}"}),
    ));
    events.push(completed());
    let (r, seen) = play(
        vec![bytewise(&events)],
        &job(
            user("Weather in Oslo?"),
            json!({"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}),
        ),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.tool_calls.len(), 1);
    let call = &r.tool_calls[0];
    assert_eq!(
        (
            call.id.as_str(),
            call.name.as_str(),
            call.arguments.as_str()
        ),
        ("call_7", "get_weather", r#"{"city":"Oslo"}"#)
    );
    assert!(
        r.attempts[0].ttft_ms.is_some(),
        "a call's first piece is the first token"
    );
    assert_eq!(
        body(&seen[0])["tools"],
        json!([{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}])
    );
}

#[tokio::test(start_paused = true)]
async fn responses_an_unknown_terminal_status_is_no_finish_and_is_retried_like_a_cut() {
    let (r, _) = play(
        vec![
            whole(&[
                delta("42"),
                ended("response.completed", json!({"status": "paused"})),
            ]),
            whole(&[delta("42"), completed()]),
        ],
        &job(user("6×7?"), json!({})),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("\"paused\""),
        "{:?}",
        r.attempts[0]
    );
}

#[tokio::test(start_paused = true)]
async fn responses_http_errors_are_read_from_their_body_and_triaged() {
    let error = |message: &str, kind: &str| json!({"error": {"message": message, "type": kind, "code": null}});
    // 400: the request's fault, failed at once with the server's words.
    let (r, seen) = play(
        vec![status(
            400,
            &[],
            error("Unsupported parameter: 'seed'.", "invalid_request_error"),
        )],
        &job(user("x"), json!({"seed": 1})),
    )
    .await;
    assert_eq!(seen.len(), 1);
    assert_eq!(
        r.failure.as_deref(),
        Some("http_error: HTTP 400: Unsupported parameter: 'seed'.")
    );
    // 429: Retry-After is a floor under the backoff.
    let (r, _) = play(
        vec![
            status(
                429,
                &[("retry-after", "7")],
                error("Rate limit reached.", "rate_limit_error"),
            ),
            whole(&[delta("42"), completed()]),
        ],
        &job(user("x"), json!({})),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::Complete]);
    assert!(
        r.attempts[0].wait_ms.unwrap() >= 7000.0,
        "{:?}",
        r.attempts[0]
    );
    // 401: the run stops, naming the variable and never the key.
    let (client, _) = scripted(
        vec![status(
            401,
            &[],
            error(
                &format!("Incorrect API key provided: {KEY}."),
                "invalid_request_error",
            ),
        )],
        |_| {},
    );
    let r = client.execute(&job(user("x"), json!({}))).await;
    assert_eq!(r.attempts.len(), 1);
    assert!(matches!(
        client.fatal(),
        Some(Fatal::Unauthorized { status: 401, .. })
    ));
    assert!(!format!("{r:?}").contains(KEY));
}

#[tokio::test(start_paused = true)]
async fn responses_json_mode_refused_is_asked_again_without_text_format_and_remembered() {
    let mut params = Map::new();
    ProtocolKind::OpenaiResponses
        .build()
        .ask_for_json(&mut params);
    let asks = job(user("Reply in JSON."), Value::Object(params));
    let refused = status(
        400,
        &[],
        json!({"error": {"message": "Unknown parameter: 'text.format'.", "type": "invalid_request_error"}}),
    );
    let answer = whole(&[delta("{}"), completed()]);
    let (client, transport) = scripted(vec![refused, answer.clone(), answer], |_| {});
    let r = client.execute(&asks).await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::Complete]);
    assert_eq!(r.attempts[0].wait_ms, Some(0.0), "tried again at once");
    client.execute(&asks).await;
    let seen = transport.seen.lock().unwrap();
    let formats: Vec<Value> = seen
        .iter()
        .map(|s| {
            body(s)
                .pointer("/text/format")
                .cloned()
                .unwrap_or(Value::Null)
        })
        .collect();
    assert_eq!(
        formats,
        [json!({"type": "json_object"}), Value::Null, Value::Null],
        "the plainer request is the run's from then on"
    );
}

#[tokio::test(start_paused = true)]
async fn responses_rate_limit_headers_ease_the_gate_before_any_429() {
    let mut spent = whole(&[delta("ok"), completed()]);
    spent.headers = vec![("x-ratelimit-remaining-requests".into(), "0".into())];
    let (client, _) = scripted(vec![spent], |c| {
        c.limits.concurrency = 8;
        c.limits.adaptive = true;
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    client.subscribe(
        Some(Arc::new(move |e| {
            let _ = tx.send(e);
        })),
        false,
    );
    assert!(client.execute(&job(user("x"), json!({}))).await.answered());
    let mut changes = Vec::new();
    while let Ok(ClientEvent::Pool(p)) = rx.try_recv() {
        changes.push((p.from, p.to));
    }
    assert_eq!(changes, [(Some(8), Some(4))]);
}

// ---- the simulator, on /v1/responses ----

fn simulated(config: MockConfig) -> (Arc<Provider>, Client) {
    simulated_with_key(config, None)
}

fn simulated_with_key(config: MockConfig, key: Option<&str>) -> (Arc<Provider>, Client) {
    let provider = Arc::new(Provider::new(config));
    let mut config = ClientConfig::new("http://sim/v1", "mock-model");
    config.protocol = ProtocolKind::OpenaiResponses;
    config.api_key = key.map(|k| ApiKey::new(k.into()));
    config.seed = Some(7);
    config.limits.idle_timeout = Duration::from_secs(5);
    let client = Client::new(Arc::new(MemoryTransport::new(provider.clone())), config);
    (provider, client)
}

fn first_attempt(faults: Faults) -> MockConfig {
    MockConfig {
        faults,
        fault_attempts: Some(1),
        ..MockConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn the_simulator_answers_on_its_own_path_with_cached_and_reasoning_tokens() {
    let (p, client) = simulated(MockConfig {
        reasoning: true,
        ..MockConfig::default()
    });
    let messages = vec![
        ChatMessage::new("system", "You are a careful calculator."),
        ChatMessage::new("user", "What is 3 + 4?"),
    ];
    let first = client.execute(&job(messages.clone(), json!({}))).await;
    let mut again = job(messages, json!({}));
    again.idempotency_key = "k2".into();
    let second = client.execute(&again).await;
    assert_eq!(outcomes(&first), [Outcome::Complete]);
    assert_eq!(first.finish_reason.as_deref(), Some("completed"));
    assert!(!first.reasoning.is_empty() && !first.text.contains("Compute"));
    let (u1, u2) = (first.usage.unwrap(), second.usage.unwrap());
    assert!(!u1.estimated && u1.reasoning_tokens > 0, "{u1:?}");
    assert_eq!(u1.cached_tokens, 0);
    assert!(
        u2.cached_tokens > 0,
        "the system prompt is cached the second time: {u2:?}"
    );
    let stats = p.stats();
    assert_eq!(
        (stats.requests, stats.responses_requests, stats.generations),
        (2, 2, 2)
    );
    let b = &p.bodies()[0];
    assert!(b["input"].is_array() && b.get("messages").is_none(), "{b}");
}

#[tokio::test(start_paused = true)]
async fn the_simulator_s_faults_end_responses_streams_their_own_ways() {
    let cases: [(Faults, Outcome, &str); 4] = [
        (
            Faults {
                cut: 1.0,
                ..Faults::default()
            },
            Outcome::Cut,
            "without",
        ),
        (
            Faults {
                error_event: 1.0,
                ..Faults::default()
            },
            Outcome::StreamError,
            "overloaded",
        ),
        (
            Faults {
                failed: 1.0,
                ..Faults::default()
            },
            Outcome::StreamError,
            "server_error",
        ),
        (
            Faults {
                abort: 1.0,
                ..Faults::default()
            },
            Outcome::Cut,
            "\"cancelled\"",
        ),
    ];
    for (faults, outcome, says) in cases {
        let (p, client) = simulated(first_attempt(faults));
        let r = client
            .execute(&job(user("Echo: one two three four"), json!({})))
            .await;
        assert_eq!(outcomes(&r), [outcome, Outcome::Complete], "{faults:?}");
        assert!(
            r.attempts[0].error.as_deref().unwrap().contains(says),
            "{:?}",
            r.attempts[0]
        );
        assert_eq!(r.text, "one two three four");
        assert_eq!(p.stats().generations, 1);
    }
    let (p, client) = simulated(first_attempt(Faults {
        content_filter: 1.0,
        ..Faults::default()
    }));
    let r = client
        .execute(&job(user("Echo: one two three four"), json!({})))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Filtered]);
    assert_eq!(p.stats().content_filters, 1);
}

#[tokio::test(start_paused = true)]
async fn the_simulator_stops_at_max_output_tokens_with_a_truncated_answer() {
    let (p, client) = simulated(MockConfig::default());
    let r = client
        .execute(&job(
            user("Echo: one two three four"),
            json!({"max_tokens": 2}),
        ))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Truncated]);
    assert_eq!(
        (r.text.as_str(), r.finish_reason.as_deref()),
        ("one two", Some("max_output_tokens"))
    );
    assert_eq!(p.bodies()[0]["max_output_tokens"], 2);
}

#[tokio::test(start_paused = true)]
async fn the_simulator_streams_a_call_s_arguments_in_many_pieces() {
    let hint = Hint {
        case: "weather".into(),
        expected: Vec::new(),
        expected_json: Some(
            json!({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}),
        ),
        shape: Shape::ToolCall,
        others: Arc::new(Vec::new()),
        files: 0,
        tool_script: Vec::new(),
        reading: None,
    };
    let config = MockConfig {
        oracle: Some(Oracle(Arc::new(move |_| Some(hint.clone())))),
        ..MockConfig::default()
    };
    let tools = json!({"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]});
    let (p, client) = simulated(config.clone());
    let r = client
        .execute(&job(user("What is the weather in Oslo?"), tools.clone()))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    let call = &r.tool_calls[0];
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("call_0", "get_weather")
    );
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
    // Right or (as the simulator sometimes is) with one argument changed: whole JSON.
    assert!(
        arguments["city"].as_str().unwrap().starts_with("Oslo"),
        "{arguments}"
    );
    assert_eq!(p.bodies()[0]["tools"][0]["name"], "get_weather");
    // What went over the wire: the arguments in many pieces.
    let protocol = ProtocolKind::OpenaiResponses.build();
    let mut request = job(user("What is the weather in Oslo?"), tools);
    request.idempotency_key = "raw".into();
    let transport = MemoryTransport::new(Arc::new(Provider::new(config)));
    let response = transport
        .send(HttpRequest {
            method: Default::default(),
            url: protocol.url("http://sim/v1", "m"),
            headers: protocol.headers(&request, None),
            body: protocol.body("mock-model", &request, Default::default()),
        })
        .await
        .unwrap();
    let bytes: Vec<Bytes> = response.body.map(|c| c.unwrap()).collect().await;
    let text = String::from_utf8(bytes.concat()).unwrap();
    let pieces = text
        .matches("event: response.function_call_arguments.delta")
        .count();
    assert!(pieces >= 5, "{pieces} pieces in:\n{text}");
}

#[tokio::test(start_paused = true)]
async fn the_simulator_s_rate_limits_and_key_apply_on_its_path() {
    let (p, client) = simulated(MockConfig {
        retry_after: RetryAfter::Seconds(3),
        ..first_attempt(Faults {
            rate_429: 1.0,
            ..Faults::default()
        })
    });
    let r = client.execute(&job(user("Echo: a b"), json!({}))).await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::Complete]);
    assert_eq!(r.attempts[0].status, Some(429));
    assert!(r.attempts[0].wait_ms.unwrap() >= 3000.0);
    assert_eq!(p.stats().status_429, 1);
    let keyed = || MockConfig {
        api_key: Some(KEY.into()),
        ..MockConfig::default()
    };
    let (p, client) = simulated_with_key(keyed(), Some(KEY));
    assert!(
        client
            .execute(&job(user("Echo: a b"), json!({})))
            .await
            .answered()
    );
    assert_eq!(p.stats().status_401, 0);
    let (p, client) = simulated_with_key(keyed(), Some("sk-another-key-entirely"));
    let r = client.execute(&job(user("Echo: a b"), json!({}))).await;
    assert_eq!(r.attempts[0].status, Some(401));
    assert!(client.fatal().is_some());
    assert_eq!(p.stats().status_401, 1);
}
