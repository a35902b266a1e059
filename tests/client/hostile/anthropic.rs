//! Anthropic messages streams, scripted byte for byte (`protocol: anthropic-messages`): each
//! has one defined outcome (docs/guide/client.md, "Hostile streams").

use super::*;
use promptgauge::client::{ApiKey, ClientEvent, ProtocolKind};

/// One event as Anthropic writes it: its name, and its JSON.
fn ev(data: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    format!("event: {}\ndata: {data}", v["type"].as_str().unwrap())
}

const START: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":7,"cache_read_input_tokens":30,"cache_creation_input_tokens":2,"output_tokens":1}}}"#;
const PING: &str = r#"{"type":"ping"}"#;
const TEXT_BLOCK: &str =
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
const BLOCK_STOP: &str = r#"{"type":"content_block_stop","index":0}"#;
const STOP: &str = r#"{"type":"message_stop"}"#;

fn text(t: &str) -> String {
    format!(
        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{t}"}}}}"#
    )
}

fn stop_reason(reason: &str) -> String {
    format!(
        r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}","stop_sequence":null}},"usage":{{"output_tokens":9}}}}"#
    )
}

/// A whole message answering `words`, ended by `reason`, with or without its `message_stop`.
fn message(words: &[&str], reason: &str, stopped: bool) -> Vec<String> {
    let mut events = vec![ev(START), ev(PING), ev(TEXT_BLOCK)];
    events.extend(words.iter().map(|w| ev(&text(w))));
    events.push(ev(BLOCK_STOP));
    events.push(ev(&stop_reason(reason)));
    if stopped {
        events.push(ev(STOP));
    }
    events
}

fn script(events: &[String]) -> Vec<String> {
    lines(&events.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A 200 whose body is these events.
fn streamed(events: &[String]) -> Reply {
    Reply::ok(script(events).into_iter().map(String::into_bytes).collect())
}

fn anthropic(c: &mut ClientConfig) {
    c.protocol = ProtocolKind::AnthropicMessages;
}

#[tokio::test(start_paused = true)]
async fn a_whole_message_is_complete_with_cached_tokens_in_the_prompt() {
    let (r, seen) = play_replies(
        vec![streamed(&message(&["Fo", "ur"], "end_turn", true))],
        |c| {
            anthropic(c);
            c.api_key = Some(ApiKey::new("sk-ant-test-0123456789".into()));
        },
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(
        (
            r.text.as_str(),
            r.finish_reason.as_deref(),
            r.model.as_deref()
        ),
        ("Four", Some("end_turn"), Some("claude-test"))
    );
    let u = r.usage.unwrap();
    assert_eq!(
        (
            u.prompt_tokens,
            u.cached_tokens,
            u.completion_tokens,
            u.estimated
        ),
        (39, 30, 9, false)
    );
    // The request: its path, the key in x-api-key beside the version, no bearer.
    assert_eq!(seen[0].url, "http://scripted/v1/messages");
    let header = |name: &str| {
        seen[0]
            .headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(header("x-api-key"), Some("sk-ant-test-0123456789"));
    assert_eq!(header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(header("authorization"), None);
    let body: serde_json::Value = serde_json::from_slice(&seen[0].body.to_bytes()).unwrap();
    assert_eq!(
        (&body["max_tokens"], &body["stream"]),
        (&serde_json::json!(4096), &serde_json::json!(true))
    );
}

#[tokio::test(start_paused = true)]
async fn every_byte_split_of_a_message_gives_the_same_answer() {
    let whole = script(&message(&["Ça → ", "東京"], "end_turn", true))
        .remove(0)
        .replace('\n', "\r\n");
    let bytes = whole.as_bytes();
    for cut in 0..=bytes.len() {
        let (r, _) = play_replies(
            vec![Reply::ok(vec![
                bytes[..cut].to_vec(),
                bytes[cut..].to_vec(),
            ])],
            anthropic,
        )
        .await;
        assert_eq!(
            (r.text.as_str(), r.outcome()),
            ("Ça → 東京", Some(Outcome::Complete)),
            "cut at {cut}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_after_its_stop_reason_but_before_message_stop_is_cut() {
    let r = play(
        vec![
            script(&message(&["Fo"], "end_turn", false)),
            script(&message(&["Four"], "end_turn", true)),
        ],
        anthropic,
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    let why = r.attempts[0].error.as_deref().unwrap();
    assert!(
        why.contains("\"end_turn\"") && why.contains("before the event that confirms it"),
        "{why}"
    );
    assert_eq!(r.text, "Four", "the cut attempt's text is never the answer");
    // With no attempt left the job fails: "Fo" is not an answer.
    let r = play(vec![script(&message(&["Fo"], "end_turn", false))], |c| {
        anthropic(c);
        c.limits.max_attempts = 1;
    })
    .await;
    assert!(!r.answered() && r.failure.is_some());
}

#[tokio::test(start_paused = true)]
async fn max_tokens_is_a_truncated_answer_and_graded() {
    let r = play(
        vec![script(&message(&["The answer is"], "max_tokens", true))],
        |c| {
            anthropic(c);
            c.limits.max_attempts = 1;
        },
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Truncated]);
    assert!(r.answered());
    assert_eq!(r.finish_reason.as_deref(), Some("max_tokens"));
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_an_answer_marked_refused_and_never_retried() {
    let r = play(
        vec![
            script(&message(&["Here is how"], "refusal", true)),
            script(&message(&["B"], "end_turn", true)),
        ],
        |c| {
            anthropic(c);
            c.limits.max_attempts = 3;
        },
    )
    .await;
    // The model's answer, marked: the runner scores it 0 with the cause `refused`.
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert!(r.answered() && !r.filtered() && r.failure.is_none());
    assert_eq!(r.refusal.as_deref(), Some("Here is how"));
}

#[tokio::test(start_paused = true)]
async fn a_stop_reason_off_the_list_is_no_finish_and_is_retried() {
    for reason in ["pause_turn", "abort", "made_up"] {
        let r = play(
            vec![
                script(&message(&["4"], reason, true)),
                script(&message(&["42"], "end_turn", true)),
            ],
            anthropic,
        )
        .await;
        assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete], "{reason}");
        let why = r.attempts[0].error.as_deref().unwrap();
        assert!(
            why.contains(&format!("{reason:?}")) && why.contains("not a finish"),
            "{why}"
        );
        assert_eq!(r.text, "42");
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_stop_reason_ends_the_answer() {
    let mut events = message(&["B"], "end_turn", false);
    events.push(ev(&text(" — no wait, A")));
    events.push(ev(&stop_reason("max_tokens")));
    events.push(ev(STOP));
    let r = play(vec![script(&events)], anthropic).await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(
        (r.text.as_str(), r.finish_reason.as_deref()),
        ("B", Some("end_turn"))
    );
    assert_eq!(r.attempts[0].ignored_events, 1, "the text after it");
}

#[tokio::test(start_paused = true)]
async fn thinking_is_kept_apart_and_counted_inside_the_output() {
    let events = [
        ev(START),
        ev(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        ),
        ev(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The customer wants a refund."}}"#,
        ),
        ev(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
        ),
        ev(r#"{"type":"content_block_stop","index":0}"#),
        ev(r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#),
        ev(r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"A"}}"#),
        ev(r#"{"type":"content_block_stop","index":1}"#),
        ev(&stop_reason("end_turn")),
        ev(STOP),
    ];
    let r = play(vec![script(&events)], anthropic).await;
    assert_eq!(
        (r.text.as_str(), r.reasoning.as_str()),
        ("A", "The customer wants a refund.")
    );
    // Anthropic counts thinking in output_tokens and does not split it out.
    let u = r.usage.unwrap();
    assert_eq!((u.completion_tokens, u.reasoning_tokens), (9, 0));
    assert!(r.attempts[0].ttft_ms.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_is_assembled_from_its_input_pieces() {
    let mut events = vec![
        ev(START),
        ev(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}"#,
        ),
    ];
    for piece in ["", "{\\\"ci", "ty\\\": ", "\\\"Os", "lo\\\"", "}"] {
        events.push(ev(&format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":"{piece}"}}}}"#
        )));
    }
    events.push(ev(BLOCK_STOP));
    events.push(ev(&stop_reason("tool_use")));
    events.push(ev(STOP));
    let r = play(vec![script(&events)], anthropic).await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.tool_calls.len(), 1);
    let call = &r.tool_calls[0];
    assert_eq!(
        (
            call.id.as_str(),
            call.name.as_str(),
            call.arguments.as_str()
        ),
        ("toolu_01", "get_weather", r#"{"city": "Oslo"}"#)
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_error_event_mid_stream_is_a_stream_error_and_retried() {
    let mut broken = message(&["par"], "end_turn", false);
    broken.truncate(4);
    broken.push(ev(
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    let r = play(
        vec![
            script(&broken),
            script(&message(&["whole"], "end_turn", true)),
        ],
        anthropic,
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::StreamError, Outcome::Complete]);
    assert_eq!(
        r.attempts[0].error.as_deref(),
        Some("overloaded_error: Overloaded")
    );
    assert_eq!(r.text, "whole");
}

#[tokio::test(start_paused = true)]
async fn an_error_event_that_blames_the_request_fails_the_job_at_once() {
    let blamed = [
        ev(START),
        ev(
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}"#,
        ),
    ];
    let r = play(
        vec![script(&blamed), script(&message(&["B"], "end_turn", true))],
        |c| {
            anthropic(c);
            c.limits.max_attempts = 3;
        },
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::StreamError], "not retried");
    assert!(
        r.failure
            .unwrap()
            .contains("invalid_request_error: prompt is too long")
    );
}

#[tokio::test(start_paused = true)]
async fn error_bodies_are_read_and_triaged_by_status() {
    let refused = |status: u16, kind: &str, headers: Vec<(String, String)>| Reply {
        status,
        headers,
        chunks: vec![
            format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"said {status}"}}}}"#)
                .into_bytes(),
        ],
        ..Reply::default()
    };
    let good = streamed(&message(&["B"], "end_turn", true));
    // 529 overloaded: retried after backoff; 429: Retry-After is a floor.
    let retry_after = vec![("retry-after".to_string(), "3".to_string())];
    let (r, _) = play_replies(
        vec![
            refused(529, "overloaded_error", vec![]),
            refused(429, "rate_limit_error", retry_after),
            good,
        ],
        |c| {
            anthropic(c);
            c.limits.max_attempts = 3;
        },
    )
    .await;
    assert_eq!(
        outcomes(&r),
        [Outcome::HttpError, Outcome::HttpError, Outcome::Complete]
    );
    assert_eq!(
        r.attempts[0].error.as_deref(),
        Some("HTTP 529: overloaded_error: said 529")
    );
    assert!(r.attempts[1].wait_ms.unwrap() >= 3000.0);
    // 400 and 404 never get better by waiting: the job fails at once.
    for (status, kind) in [(400, "invalid_request_error"), (404, "not_found_error")] {
        let (r, seen) = play_replies(vec![refused(status, kind, vec![])], |c| {
            anthropic(c);
            c.limits.max_attempts = 5;
        })
        .await;
        assert_eq!(seen.len(), 1, "{status}: no second attempt");
        assert!(
            r.failure
                .unwrap()
                .contains(&format!("{kind}: said {status}"))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_key_stops_the_run_and_an_echoed_one_is_scrubbed() {
    const KEY: &str = "sk-ant-echo-0123456789abcdef";
    let (client, _) = scripted_client(
        vec![
            streamed(&[ev(START), ev(&format!(
                r#"{{"type":"error","error":{{"type":"api_error","message":"bad x-api-key {KEY}"}}}}"#
            ))]),
            Reply {
                status: 401,
                chunks: vec![br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#.to_vec()],
                ..Reply::default()
            },
        ],
        |c| {
            anthropic(c);
            c.limits.max_attempts = 6;
            c.api_key = Some(ApiKey::new(KEY.into()));
            c.api_key_env = "ANTHROPIC_API_KEY".into();
        },
    );
    let r = client.execute(&the_job()).await;
    assert_eq!(outcomes(&r), [Outcome::StreamError, Outcome::HttpError]);
    let kept = format!("{:?} {:?}", r.attempts, r.failure);
    assert!(
        !kept.contains(&KEY[..12]) && kept.contains("[redacted]"),
        "{kept}"
    );
    let fatal = client
        .fatal()
        .expect("a refused key stops the run")
        .to_string();
    assert!(fatal.contains("$ANTHROPIC_API_KEY"), "{fatal}");
    assert!(client.stop_token().is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn a_spent_rate_limit_window_eases_the_gate() {
    let spent = Reply {
        headers: vec![(
            "anthropic-ratelimit-requests-remaining".to_string(),
            "0".to_string(),
        )],
        ..streamed(&message(&["ok"], "end_turn", true))
    };
    let (client, _) = scripted_client(vec![spent], |c| {
        anthropic(c);
        c.limits.concurrency = 8;
        c.limits.adaptive = true;
    });
    let heard = Arc::new(Mutex::new(Vec::new()));
    let sink = heard.clone();
    client.subscribe(
        Some(Arc::new(move |e| {
            if let ClientEvent::Pool(p) = e {
                sink.lock().unwrap().push((p.from, p.to));
            }
        })),
        false,
    );
    let r = client.execute(&the_job()).await;
    assert!(r.answered());
    assert_eq!(*heard.lock().unwrap(), [(Some(8), Some(4))]);
}
