//! The client speaking Anthropic messages to the simulator's `POST /v1/messages`, in memory
//! on tokio's paused clock: the same model and faults, and Anthropic's own misbehaviours.

use super::*;
use promptgauge::client::{ApiKey, ProtocolKind};
use promptgauge::grade::Shape;
use promptgauge::mock::answers::{Hint, Oracle};

fn anthropic(c: &mut ClientConfig) {
    c.protocol = ProtocolKind::AnthropicMessages;
}

fn on_first_attempt(faults: Faults) -> Arc<Provider> {
    provider(first_attempt_fault(faults))
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
    assert_eq!((u.completion_tokens, u.estimated), (2, false));
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
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("authentication_error"),
        "{:?}",
        r.attempts[0]
    );
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
    let p = on_first_attempt(Faults {
        cut_before_end: 1.0,
        ..Faults::default()
    });
    let r = client(&p, anthropic)
        .execute(&job("Echo: one two three four", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert_eq!(r.text, "one two three four");
    assert_eq!((p.stats().cuts, p.stats().generations), (1, 1));
    // Over chat completions the same break (after the finish, before [DONE]) is a whole answer.
    let p = on_first_attempt(Faults {
        cut_before_end: 1.0,
        ..Faults::default()
    });
    let r = client(&p, |_| {})
        .execute(&job("Echo: one two three four", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_error_event_mid_stream_is_retried() {
    let p = on_first_attempt(Faults {
        error_event: 1.0,
        ..Faults::default()
    });
    let r = client(&p, anthropic)
        .execute(&job("Echo: a b c d", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::StreamError, Outcome::Complete]);
    assert_eq!(
        r.attempts[0].error.as_deref(),
        Some("overloaded_error: Overloaded")
    );
    assert_eq!(r.text, "a b c d");
}

#[tokio::test(start_paused = true)]
async fn http_529_is_retried_after_backoff() {
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
    assert_eq!(
        r.attempts[0].error.as_deref(),
        Some("HTTP 529: overloaded_error: Overloaded")
    );
    let waited: f64 = r.attempts.iter().filter_map(|a| a.wait_ms).sum();
    assert!(waited > 0.0, "backoff, not a tight loop");
    assert_eq!(p.stats().status_5xx, 2);
}

#[tokio::test(start_paused = true)]
async fn a_429_waits_its_retry_after_over_messages() {
    let p = provider(MockConfig {
        retry_after: RetryAfter::Seconds(4),
        ..first_attempt_fault(Faults {
            rate_429: 1.0,
            ..Faults::default()
        })
    });
    let r = client(&p, |c| {
        anthropic(c);
        c.backoff_base = Duration::from_millis(1);
    })
    .execute(&job("Echo: x", "k"))
    .await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::Complete]);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("rate_limit_error")
    );
    assert!((4000.0..4002.0).contains(&r.attempts[0].wait_ms.unwrap()));
}

#[tokio::test(start_paused = true)]
async fn max_tokens_truncates_and_a_refusal_withholds() {
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
    let p = on_first_attempt(Faults {
        content_filter: 1.0,
        ..Faults::default()
    });
    let r = client(&p, anthropic)
        .execute(&job("Echo: a b c d", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Filtered]);
    assert_eq!(r.finish_reason.as_deref(), Some("refusal"));
}

#[tokio::test(start_paused = true)]
async fn an_unknown_stop_reason_is_no_finish_and_retried() {
    let p = on_first_attempt(Faults {
        abort: 1.0,
        ..Faults::default()
    });
    let r = client(&p, anthropic)
        .execute(&job("Echo: a b c d", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("\"abort\", which is not a finish")
    );
    assert_eq!(r.text, "a b c d");
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

#[tokio::test(start_paused = true)]
async fn message_streams_complete_however_they_are_written() {
    for config in [
        MockConfig {
            usage: UsageMode::None,
            ..MockConfig::default()
        },
        MockConfig {
            crlf: true,
            keepalive: true,
            split_utf8: true,
            ..MockConfig::default()
        },
        MockConfig {
            first_token_delay: Duration::from_secs(2),
            token_delay: Duration::from_millis(300),
            ..MockConfig::default()
        },
    ] {
        let label = format!("{config:?}");
        let none = config.usage == UsageMode::None;
        let p = provider(config);
        let r = client(&p, anthropic)
            .execute(&job("Echo: ça → été", "k"))
            .await;
        assert_eq!(outcomes(&r), [Outcome::Complete], "{label}");
        assert_eq!(r.text, "ça → été", "{label}");
        assert_eq!(r.usage.is_none(), none, "{label}");
    }
}
