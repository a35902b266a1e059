//! The client against the simulator, in memory, on tokio's paused clock: timeouts and
//! backoff are exercised in virtual time and the tests finish in milliseconds.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use promptgauge::client::attachment::{
    Attachment, FileBytes, FileSource, FileTokens, Kind, Placed, Recent, sha256_hex,
};
use promptgauge::client::{Client, ClientConfig, JobRequest, Outcome, ProtocolKind};
use promptgauge::mock::memory::MemoryTransport;
use promptgauge::mock::{Faults, MockConfig, Provider, RetryAfter, UsageMode};
use promptgauge::suite::ChatMessage;
use serde_json::{Map, json};
use tokio::time::Instant;

/// The same against the simulator's Anthropic messages endpoint.
mod anthropic;

fn provider(config: MockConfig) -> Arc<Provider> {
    Arc::new(Provider::new(config))
}

fn client(p: &Arc<Provider>, tweak: impl FnOnce(&mut ClientConfig)) -> Client {
    let mut config = ClientConfig::new("http://sim/v1", "mock-model");
    config.limits.first_token_timeout = Duration::from_secs(10);
    config.limits.idle_timeout = Duration::from_secs(5);
    config.limits.total_timeout = Duration::from_secs(60);
    config.seed = Some(7);
    tweak(&mut config);
    Client::new(Arc::new(MemoryTransport::new(p.clone())), config)
}

fn job(user: &str, key: &str) -> JobRequest {
    JobRequest {
        messages: vec![ChatMessage::new("user", user)],
        params: Map::new(),
        idempotency_key: key.into(),
        reserve_tokens: 10,
    }
}

fn first_attempt_fault(faults: Faults) -> MockConfig {
    MockConfig {
        faults,
        fault_attempts: Some(1),
        ..MockConfig::default()
    }
}

fn outcomes(r: &promptgauge::client::JobResult) -> Vec<Outcome> {
    r.attempts.iter().map(|a| a.outcome).collect()
}

#[tokio::test(start_paused = true)]
async fn complete_answer_with_usage() {
    let p = provider(MockConfig::default());
    let r = client(&p, |_| {})
        .execute(&job("Echo: héllo wörld", "k1"))
        .await;
    assert!(r.answered());
    assert_eq!(r.text, "héllo wörld");
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    let u = r.usage.expect("usage from the separate chunk");
    // 11 characters, about 4 a token (docs/guide/simulator.md).
    assert_eq!(u.completion_tokens, 3);
    assert!(!u.estimated);
    let body = &p.bodies()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["model"], "mock-model");
    assert_eq!(p.stats().generations, 1);
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_is_retried_and_its_text_never_kept() {
    let p = provider(first_attempt_fault(Faults {
        cut: 1.0,
        ..Faults::default()
    }));
    let r = client(&p, |_| {})
        .execute(&job("Echo: one two three four", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert_eq!(r.text, "one two three four");
    assert_eq!(p.stats().cuts, 1);
    assert_eq!(p.stats().generations, 1);
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_every_attempt_is_cut_fails_without_an_answer() {
    let p = provider(MockConfig {
        faults: Faults {
            cut: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let r = client(&p, |c| c.limits.max_attempts = 3)
        .execute(&job("Echo: a b c d", "k"))
        .await;
    assert!(!r.answered());
    assert_eq!(outcomes(&r), [Outcome::Cut; 3]);
    assert!(
        r.failure
            .as_deref()
            .unwrap()
            .contains("gave up after 3 attempts"),
        "{:?}",
        r.failure
    );
    assert_eq!(p.stats().generations, 0);
    assert_eq!(p.attempts_for("k"), 3);
}

#[tokio::test(start_paused = true)]
async fn a_reset_counts_as_cut() {
    let p = provider(first_attempt_fault(Faults {
        reset: 1.0,
        ..Faults::default()
    }));
    let r = client(&p, |_| {}).execute(&job("Echo: a b c d", "k")).await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert!(r.attempts[0].error.as_deref().unwrap().contains("reset"));
}

#[tokio::test(start_paused = true)]
async fn a_stall_hits_the_idle_timeout_in_virtual_time() {
    let p = provider(first_attempt_fault(Faults {
        stall: 1.0,
        ..Faults::default()
    }));
    let started = Instant::now();
    let r = client(&p, |c| c.limits.idle_timeout = Duration::from_secs(30))
        .execute(&job("Echo: a b c d", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Stalled, Outcome::Complete]);
    let stalled = &r.attempts[0];
    assert!(stalled.latency_ms >= 30_000.0, "{stalled:?}");
    assert!(started.elapsed() >= Duration::from_secs(30));
    assert_eq!(p.stats().stalls, 1);
}

#[tokio::test(start_paused = true)]
async fn a_server_that_never_answers_hits_the_first_token_timeout() {
    let p = provider(first_attempt_fault(Faults {
        hang: 1.0,
        ..Faults::default()
    }));
    let r = client(&p, |c| {
        c.limits.first_token_timeout = Duration::from_secs(45)
    })
    .execute(&job("Echo: x", "k"))
    .await;
    assert_eq!(outcomes(&r), [Outcome::NoFirstToken, Outcome::Complete]);
    assert!(
        (r.attempts[0].latency_ms - 45_000.0).abs() < 1.0,
        "{:?}",
        r.attempts[0]
    );
    assert_eq!(p.stats().hangs, 1);
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_token_is_not_a_stall() {
    // First event after 20 s: within first_token_timeout (60 s) though longer than idle (5 s).
    let p = provider(MockConfig {
        first_token_delay: Duration::from_secs(20),
        token_delay: Duration::from_secs(1),
        ..MockConfig::default()
    });
    let r = client(&p, |c| {
        c.limits.first_token_timeout = Duration::from_secs(60)
    })
    .execute(&job("Echo: a b", "k"))
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert!(r.attempts[0].ttft_ms.unwrap() >= 20_000.0);
}

#[tokio::test(start_paused = true)]
async fn total_timeout_bounds_a_slow_trickle() {
    let p = provider(MockConfig {
        token_delay: Duration::from_secs(4),
        ..MockConfig::default()
    });
    let r = client(&p, |c| {
        c.limits.total_timeout = Duration::from_secs(10);
        c.limits.max_attempts = 1;
    })
    .execute(&job("Echo: a b c d e f g h", "k"))
    .await;
    assert_eq!(outcomes(&r), [Outcome::Stalled]);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("total_timeout")
    );
    assert!((r.attempts[0].latency_ms - 10_000.0).abs() < 1.0);
}

#[tokio::test(start_paused = true)]
async fn an_error_event_is_a_stream_error_and_retried() {
    let p = provider(first_attempt_fault(Faults {
        error_event: 1.0,
        ..Faults::default()
    }));
    let r = client(&p, |_| {}).execute(&job("Echo: a b c d", "k")).await;
    assert_eq!(outcomes(&r), [Outcome::StreamError, Outcome::Complete]);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("overloaded")
    );
}

async fn retry_after_wait(style: RetryAfter) -> f64 {
    let p = provider(MockConfig {
        retry_after: style,
        ..first_attempt_fault(Faults {
            rate_429: 1.0,
            ..Faults::default()
        })
    });
    let r = client(&p, |c| c.backoff_base = Duration::from_millis(1))
        .execute(&job("Echo: x", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::Complete]);
    assert_eq!(r.attempts[0].status, Some(429));
    assert_eq!(p.stats().status_429, 1);
    r.attempts[0].wait_ms.unwrap()
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_a_floor_in_every_form() {
    let w = retry_after_wait(RetryAfter::Seconds(7)).await;
    assert!((7000.0..7002.0).contains(&w), "{w}");
    let w = retry_after_wait(RetryAfter::Millis(1500)).await;
    assert!((1500.0..1502.0).contains(&w), "{w}");
    // An HTTP date has one-second resolution.
    let w = retry_after_wait(RetryAfter::Date(5)).await;
    assert!((3900.0..=5002.0).contains(&w), "{w}");
}

#[tokio::test(start_paused = true)]
async fn server_errors_back_off_with_full_jitter_under_the_cap() {
    let p = provider(MockConfig {
        faults: Faults {
            rate_5xx: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let r = client(&p, |c| c.limits.max_attempts = 6)
        .execute(&job("Echo: x", "k"))
        .await;
    assert!(!r.answered());
    assert_eq!(r.attempts.len(), 6);
    let waits: Vec<f64> = r.attempts.iter().filter_map(|a| a.wait_ms).collect();
    assert_eq!(waits.len(), 5);
    for (i, w) in waits.iter().enumerate() {
        let ceiling = 250.0 * 2f64.powi(i as i32);
        assert!(*w >= 0.0 && *w <= ceiling, "retry {i}: {w} > {ceiling}");
    }
    // Jitter: the waits are not all at their ceilings (as a fixed exponential backoff would be).
    assert!(
        waits
            .iter()
            .enumerate()
            .any(|(i, w)| *w < 0.9 * 250.0 * 2f64.powi(i as i32))
    );
    assert_eq!(p.stats().status_5xx, 6);
}

#[tokio::test(start_paused = true)]
async fn one_idempotency_key_across_attempts() {
    let p = provider(MockConfig {
        faults: Faults {
            cut: 1.0,
            ..Faults::default()
        },
        fault_attempts: Some(2),
        ..MockConfig::default()
    });
    let r = client(&p, |_| {})
        .execute(&job("Echo: a b c d", "job-42"))
        .await;
    assert_eq!(r.attempts.len(), 3);
    assert_eq!(p.attempts_for("job-42"), 3);
    assert_eq!(p.stats().requests, 3);
}

#[tokio::test(start_paused = true)]
async fn unauthorized_stops_the_run_and_names_the_variable_not_the_key() {
    let p = provider(MockConfig {
        api_key: Some("right-key".into()),
        ..MockConfig::default()
    });
    let c = client(&p, |c| {
        c.api_key = Some(promptgauge::client::ApiKey::new("sk-wrong-SECRET".into()));
        c.api_key_env = "MY_KEY_VAR".into();
    });
    let r = c.execute(&job("Echo: x", "k")).await;
    assert_eq!(r.attempts.len(), 1);
    assert_eq!(r.attempts[0].status, Some(401));
    let fatal = c.fatal().expect("fatal").to_string();
    assert!(fatal.contains("$MY_KEY_VAR"), "{fatal}");
    assert!(!fatal.contains("SECRET"));
    assert!(c.stop_token().is_cancelled());
    // Nothing more is sent once the run is stopped.
    let again = c.execute(&job("Echo: y", "k2")).await;
    assert!(again.aborted);
    assert_eq!(p.stats().requests, 1);
}

#[tokio::test(start_paused = true)]
async fn the_right_key_is_sent_as_bearer() {
    let p = provider(MockConfig {
        api_key: Some("right-key".into()),
        ..MockConfig::default()
    });
    let c = client(&p, |c| {
        c.api_key = Some(promptgauge::client::ApiKey::new("right-key".into()))
    });
    assert!(c.execute(&job("Echo: x", "k")).await.answered());
}

#[tokio::test(start_paused = true)]
async fn a_bad_request_is_tried_once_without_stream_options_then_fails() {
    let p = provider(MockConfig::default());
    let c = client(&p, |_| {});
    let mut bad = job("Echo: x", "k");
    bad.params.insert("max_tokens".into(), json!(-1));
    let r = c.execute(&bad).await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::HttpError]);
    assert_eq!(r.attempts[1].status, Some(400));
    assert!(
        r.failure.as_deref().unwrap().contains("max_tokens"),
        "{:?}",
        r.failure
    );
    assert_eq!(p.stats().requests, 2);
    // The 400 was not about stream_options, so later jobs still ask for usage.
    let ok = c.execute(&job("Echo: y", "k2")).await;
    assert!(ok.attempts[0].stream_options);
    assert!(ok.usage.is_some());
}

#[tokio::test(start_paused = true)]
async fn stream_options_rejected_falls_back_once_and_remembers() {
    let p = provider(MockConfig {
        reject_stream_options: true,
        ..MockConfig::default()
    });
    let c = client(&p, |_| {});
    let r = c.execute(&job("Echo: a b", "k1")).await;
    assert_eq!(outcomes(&r), [Outcome::HttpError, Outcome::Complete]);
    assert_eq!(r.attempts[0].status, Some(400));
    assert_eq!(r.attempts[1].wait_ms, None);
    assert!(!r.attempts[1].stream_options);
    assert_eq!(r.text, "a b");
    assert!(
        r.usage.is_none(),
        "without include_usage the server sends none"
    );
    let r2 = c.execute(&job("Echo: c", "k2")).await;
    assert_eq!(outcomes(&r2), [Outcome::Complete]);
    assert!(!r2.attempts[0].stream_options);
    let bodies = p.bodies();
    assert!(bodies[0].get("stream_options").is_some());
    assert!(bodies[1].get("stream_options").is_none());
    assert!(bodies[2].get("stream_options").is_none());
}

#[tokio::test(start_paused = true)]
async fn length_is_a_truncated_answer() {
    let p = provider(MockConfig::default());
    let c = client(&p, |_| {});
    let mut j = job("Echo: one two three four five", "k");
    j.params.insert("max_tokens".into(), json!(2));
    let r = c.execute(&j).await;
    assert_eq!(outcomes(&r), [Outcome::Truncated]);
    assert!(r.answered());
    assert_eq!(r.text, "one two");
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
}

#[tokio::test(start_paused = true)]
async fn stream_variants_all_complete_in_every_protocol() {
    for config in [
        MockConfig {
            no_done: true,
            ..MockConfig::default()
        },
        MockConfig {
            usage: UsageMode::InLastChunk,
            ..MockConfig::default()
        },
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
            reasoning: true,
            ..MockConfig::default()
        },
    ] {
        for protocol in ProtocolKind::ALL {
            let label = format!("{protocol} {config:?}");
            let p = provider(config.clone());
            let r = client(&p, |c| c.protocol = protocol)
                .execute(&job("Echo: ça → été", "k"))
                .await;
            assert_eq!(outcomes(&r), [Outcome::Complete], "{label}");
            assert_eq!(r.text, "ça → été", "{label}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_gate_caps_requests_in_flight() {
    let p = provider(MockConfig {
        first_token_delay: Duration::from_secs(1),
        ..MockConfig::default()
    });
    let c = Arc::new(client(&p, |c| c.limits.concurrency = 3));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let c = c.clone();
        tasks.spawn(async move { c.execute(&job("Echo: x", &format!("k{i}"))).await });
    }
    while let Some(r) = tasks.join_next().await {
        assert!(r.unwrap().answered());
    }
    assert_eq!(p.stats().max_in_flight, 3);
    assert_eq!(p.stats().requests, 20);
}

/// A server that answers every request with one fixed status.
struct FixedStatus(u16);

impl promptgauge::client::Transport for FixedStatus {
    fn send(
        &self,
        _: promptgauge::client::HttpRequest,
    ) -> promptgauge::client::transport::BoxFuture<
        Result<promptgauge::client::HttpResponse, promptgauge::client::TransportError>,
    > {
        let status = self.0;
        Box::pin(async move {
            let body =
                bytes::Bytes::from(r#"{"error":{"message":"You exceeded your current quota."}}"#);
            Ok(promptgauge::client::HttpResponse {
                status,
                headers: vec![],
                body: Box::pin(futures_util::stream::iter([Ok(body)])),
            })
        })
    }
}

#[tokio::test(start_paused = true)]
async fn out_of_credit_and_forbidden_stop_the_run_and_404_fails_the_job() {
    for (status, stops) in [(402, true), (403, true), (404, false), (422, false)] {
        let c = Client::new(
            Arc::new(FixedStatus(status)),
            ClientConfig::new("http://x/v1", "m"),
        );
        let r = c.execute(&job("Echo: x", "k")).await;
        assert!(!r.answered());
        assert_eq!(c.stop_token().is_cancelled(), stops, "{status}");
        // 404 and 422 are never retried (the once-without-stream_options retry is for 400).
        assert_eq!(r.attempts.len(), 1, "{status}");
        if status == 402 {
            let f = c.fatal().unwrap().to_string();
            assert!(f.contains("out of credit") && f.contains("quota"), "{f}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn rate_limits_space_requests_and_the_wait_is_not_latency() {
    let p = provider(MockConfig::default());
    let c = Arc::new(client(&p, |c| {
        c.limits.requests_per_minute = Some(30);
        c.limits.tokens_per_minute = Some(100_000);
        c.limits.concurrency = 8;
    }));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..4 {
        let c = c.clone();
        tasks.spawn(async move { c.execute(&job("Echo: x", &format!("k{i}"))).await });
    }
    while let Some(r) = tasks.join_next().await {
        let r = r.unwrap();
        assert!(r.answered());
        // Waiting for the limiter is not the server's latency.
        assert!(r.attempts[0].latency_ms < 100.0, "{:?}", r.attempts[0]);
    }
    // 30 a minute: one every 2 s, the first at once, so the fourth goes at 6 s.
    let elapsed = start.elapsed().as_secs_f64();
    assert!((6.0..6.5).contains(&elapsed), "{elapsed}");
    assert_eq!(p.stats().max_in_flight, 1);
}

/// A file's bytes go into a request body once encoded, as a piece of the body shared with
/// every other request that sends the file (docs/guide/attachments.md, "Limits").
#[test]
fn a_body_carries_each_file_s_one_encoding_as_a_piece_of_its_own() {
    let bytes = b"\x89PNG\r\n\x1a\nsome pixels".to_vec();
    let file = Arc::new(Attachment {
        name: "photo".into(),
        kind: Kind::Png,
        origin: "p.png".into(),
        size: bytes.len() as u64,
        sha256: Some(sha256_hex(&bytes)),
        detail: None,
        source: Some(FileSource::Bytes(FileBytes::new(bytes.clone(), Kind::Png))),
        path: None,
        recent: Recent::default(),
        tokens: FileTokens::default(),
    });
    let message = promptgauge::client::ChatMessage {
        role: "user".into(),
        content: "Look".into(),
        files: vec![Placed {
            at: 4,
            file: file.clone(),
        }],
        extra: Default::default(),
    };
    for protocol in [
        promptgauge::client::ProtocolKind::OpenaiChat,
        promptgauge::client::ProtocolKind::OpenaiResponses,
        promptgauge::client::ProtocolKind::AnthropicMessages,
    ] {
        let job = promptgauge::client::JobRequest {
            messages: vec![message.clone()],
            params: Default::default(),
            idempotency_key: "k".into(),
            reserve_tokens: 0,
        };
        let body = protocol
            .build()
            .body("m", &job, promptgauge::client::Dialect::default());
        // One piece is the file's encoding itself, the one the file holds.
        let held = match &file.source {
            Some(FileSource::Bytes(h)) => h.clone(),
            _ => unreachable!(),
        };
        let shared = body
            .pieces()
            .iter()
            .filter(|p| {
                held.data_url()
                    .as_bytes()
                    .as_ptr_range()
                    .contains(&p.as_ptr())
            })
            .count();
        assert_eq!(shared, 1, "{protocol:?}: {:?}", body.pieces());
        // Joined, the body is the JSON the provider reads, the file's bytes in it.
        let json: serde_json::Value = serde_json::from_slice(&body.to_bytes()).unwrap();
        let text = json.to_string();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert!(text.contains(&b64), "{protocol:?}: {text}");
        assert!(!text.contains("pgfile"), "no mark is left: {text}");
        assert_eq!(body.len(), body.to_bytes().len());
    }
}
