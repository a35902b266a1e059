//! The client speaking Anthropic messages to the simulator's `POST /v1/messages`, in memory
//! on tokio's paused clock: the same model and faults, and Anthropic's own misbehaviours.

use super::*;
use promptgauge::client::{ApiKey, JobResult};
use promptgauge::grade::Shape;
use promptgauge::mock::answers::{Hint, Oracle};

fn anthropic(c: &mut ClientConfig) {
    c.protocol = ProtocolKind::AnthropicMessages;
}

/// Echoes `a b c d` over `protocol` from a simulator whose first attempt at it has `faults`.
async fn echo_after(faults: Faults, protocol: ProtocolKind) -> (Arc<Provider>, JobResult) {
    let p = provider(first_attempt_fault(faults));
    let r = client(&p, |c| c.protocol = protocol)
        .execute(&job("Echo: a b c d", "k"))
        .await;
    (p, r)
}

/// The error the `i`th attempt ended with.
fn error_of(r: &JobResult, i: usize) -> &str {
    r.attempts[i].error.as_deref().unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn a_whole_answer_over_messages_with_the_key_in_x_api_key() {
    let p = provider(MockConfig {
        api_key: Some("sk-ant-right-key".into()),
        ..MockConfig::default()
    });
    let c = client(&p, |c| {
        anthropic(c);
        c.api_key = Some(ApiKey::new("sk-ant-right-key".into()));
    });
    let mut j = job("Echo: héllo wörld", "k1");
    j.messages.insert(0, ChatMessage::new("system", "Repeat."));
    let r = c.execute(&j).await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(
        (r.text.as_str(), r.finish_reason.as_deref()),
        ("héllo wörld", Some("end_turn"))
    );
    let u = r.usage.expect("usage from message_start and message_delta");
    // 11 characters, about 4 a token (docs/guide/simulator.md).
    assert_eq!((u.completion_tokens, u.estimated), (3, false));
    let stats = p.stats();
    assert_eq!(
        (
            stats.anthropic_messages,
            stats.status_401,
            stats.generations
        ),
        (1, 0, 1)
    );
    let body = &p.bodies()[0];
    assert_eq!(body["system"], "Repeat.");
    assert_eq!(body["max_tokens"], 4096);
    assert!(body.get("stream_options").is_none());
    // A wrong key is refused with Anthropic's error, and stops the run.
    let c = client(&p, |c| {
        anthropic(c);
        c.api_key = Some(ApiKey::new("sk-ant-wrong-key".into()));
    });
    let r = c.execute(&job("Echo: x", "k2")).await;
    assert_eq!(r.attempts[0].status, Some(401));
    assert!(error_of(&r, 0).contains("authentication_error"), "{r:?}");
    assert!(c.fatal().is_some());
}

#[tokio::test(start_paused = true)]
async fn cached_prompts_and_thinking_over_messages() {
    let p = provider(MockConfig {
        reasoning: true,
        ..MockConfig::default()
    });
    let c = client(&p, anthropic);
    let mut cached = Vec::new();
    for key in ["a", "b"] {
        let mut j = job("What is 2 + 3?", key);
        j.messages.insert(
            0,
            ChatMessage::new(
                "system",
                "You are a careful calculator. Think step by step.",
            ),
        );
        let r = c.execute(&j).await;
        assert_eq!(outcomes(&r), [Outcome::Complete]);
        assert!(!r.reasoning.is_empty(), "thinking is kept apart");
        let u = r.usage.unwrap();
        assert_eq!(u.reasoning_tokens, 0, "Anthropic does not split it out");
        assert!(u.prompt_tokens > u.cached_tokens);
        cached.push(u.cached_tokens);
    }
    assert_eq!(cached[0], 0);
    assert!(
        cached[1] > 0,
        "the system prompt seen before is read from cache"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_before_message_stop_is_retried_and_never_kept() {
    let cut = Faults {
        cut_before_end: 1.0,
        ..Faults::default()
    };
    let (p, r) = echo_after(cut, ProtocolKind::AnthropicMessages).await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert!(error_of(&r, 0).contains("\"end_turn\""), "{r:?}");
    assert_eq!(r.text, "a b c d");
    assert_eq!((p.stats().cuts, p.stats().generations), (1, 1));
    // Over chat completions the same break (after the finish, before [DONE]) is a whole answer.
    let (_, r) = echo_after(cut, ProtocolKind::OpenaiChat).await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_error_event_mid_stream_is_retried() {
    let error_event = Faults {
        error_event: 1.0,
        ..Faults::default()
    };
    let (_, r) = echo_after(error_event, ProtocolKind::AnthropicMessages).await;
    assert_eq!(outcomes(&r), [Outcome::StreamError, Outcome::Complete]);
    assert_eq!(error_of(&r, 0), "overloaded_error: Overloaded");
    assert_eq!(r.text, "a b c d");
}

#[tokio::test(start_paused = true)]
async fn an_unknown_stop_reason_is_no_finish_and_retried() {
    let abort = Faults {
        abort: 1.0,
        ..Faults::default()
    };
    let (_, r) = echo_after(abort, ProtocolKind::AnthropicMessages).await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert!(error_of(&r, 0).contains("\"abort\", which is not a finish"));
    assert_eq!(r.text, "a b c d");
}

#[tokio::test(start_paused = true)]
async fn max_tokens_truncates_and_a_refusal_is_an_answer_marked_refused() {
    let p = provider(MockConfig::default());
    let mut j = job("Echo: one two three four five", "k");
    j.params.insert("max_tokens".into(), json!(2));
    let r = client(&p, anthropic).execute(&j).await;
    assert_eq!(outcomes(&r), [Outcome::Truncated]);
    assert!(r.answered());
    assert_eq!(
        (r.text.as_str(), r.finish_reason.as_deref()),
        ("one two", Some("max_tokens"))
    );
    let refusal = Faults {
        content_filter: 1.0,
        ..Faults::default()
    };
    let (_, r) = echo_after(refusal, ProtocolKind::AnthropicMessages).await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert!(r.answered() && !r.filtered());
    assert_eq!(r.refusal.as_deref(), Some(r.text.as_str()));
    assert_eq!(r.finish_reason.as_deref(), Some("refusal"));
}

#[tokio::test(start_paused = true)]
async fn http_529_is_retried_after_backoff_and_a_429_after_its_retry_after() {
    let p = provider(MockConfig {
        faults: Faults {
            overloaded: 1.0,
            ..Faults::default()
        },
        fault_attempts: Some(2),
        ..MockConfig::default()
    });
    let r = client(&p, |c| {
        anthropic(c);
        c.backoff_base = Duration::from_secs(1);
    })
    .execute(&job("Echo: x", "k"))
    .await;
    assert_eq!(
        outcomes(&r),
        [Outcome::HttpError, Outcome::HttpError, Outcome::Complete]
    );
    assert_eq!(r.attempts[0].status, Some(529));
    assert_eq!(error_of(&r, 0), "HTTP 529: overloaded_error: Overloaded");
    let waited: f64 = r.attempts.iter().filter_map(|a| a.wait_ms).sum();
    assert!(waited > 0.0, "backoff, not a tight loop");
    assert_eq!(p.stats().status_5xx, 2);
    // A 429's retry-after is a floor.
    let p = provider(MockConfig {
        retry_after: RetryAfter::Seconds(4),
        ..first_attempt_fault(Faults {
            rate_429: 1.0,
            ..Faults::default()
        })
    });
    let r = client(&p, anthropic).execute(&job("Echo: x", "k")).await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::Complete]);
    assert!(error_of(&r, 0).contains("rate_limit_error"));
    assert!(r.attempts[0].wait_ms.unwrap() >= 4000.0);
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_arrives_in_pieces_and_adds_up() {
    let expected = json!({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}});
    let hint = Hint {
        case: "weather".into(),
        expected: vec![expected.to_string()],
        expected_json: Some(expected),
        shape: Shape::ToolCall,
        others: Arc::new(Vec::new()),
        files: 0,
        tool_script: Vec::new(),
        reading: None,
    };
    let p = provider(MockConfig {
        oracle: Some(Oracle(Arc::new(move |_| Some(hint.clone())))),
        ..MockConfig::default()
    });
    let mut j = job("What is the weather in Oslo?", "k");
    j.params.insert(
        "tools".into(),
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]),
    );
    let r = client(&p, anthropic).execute(&j).await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].name, "get_weather");
    let args: serde_json::Value = serde_json::from_str(&r.tool_calls[0].arguments).unwrap();
    assert!(args.get("city").is_some(), "{args}");
    // The tool went out in Anthropic's shape.
    assert_eq!(p.bodies()[0]["tools"][0]["name"], "get_weather");
}
