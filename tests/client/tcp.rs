//! The client over real HTTP against the simulator's TCP server: what the bytes on a socket
//! do (resets, split characters, CRLF, keep-alives, refused connections). Deadlines here are
//! a few hundred milliseconds and only ever expire on faults that never end by themselves.

use std::sync::Arc;
use std::time::Duration;

use promptgauge::client::{Client, ClientConfig, JobRequest, Outcome, ReqwestTransport};
use promptgauge::mock::server::MockServer;
use promptgauge::mock::{Faults, MockConfig, Provider, RetryAfter, UsageMode};
use promptgauge::suite::ChatMessage;
use serde_json::Map;

async fn start(config: MockConfig) -> MockServer {
    MockServer::start(
        Arc::new(Provider::new(config)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn client(base_url: &str, tweak: impl FnOnce(&mut ClientConfig)) -> Client {
    let mut config = ClientConfig::new(base_url, "m");
    config.first_token_timeout = Duration::from_secs(10);
    config.idle_timeout = Duration::from_secs(10);
    config.backoff_base = Duration::from_millis(1);
    tweak(&mut config);
    let transport = ReqwestTransport::new(Duration::from_secs(2), 8).unwrap();
    Client::new(Arc::new(transport), config)
}

fn job(text: &str, key: &str) -> JobRequest {
    JobRequest {
        messages: vec![ChatMessage::new("user", format!("Echo: {text}"))],
        params: Map::new(),
        idempotency_key: key.into(),
        reserve_tokens: 10,
    }
}

fn outcomes(r: &promptgauge::client::JobResult) -> Vec<Outcome> {
    r.attempts.iter().map(|a| a.outcome).collect()
}

fn once(faults: Faults) -> MockConfig {
    MockConfig {
        faults,
        fault_attempts: Some(1),
        ..MockConfig::default()
    }
}

#[tokio::test]
async fn split_utf8_crlf_and_keepalives_decode_exactly() {
    let server = start(MockConfig {
        crlf: true,
        keepalive: true,
        split_utf8: true,
        ..MockConfig::default()
    })
    .await;
    let text = "naïve café → 東京 🎉 done";
    let r = client(&server.base_url(), |_| {})
        .execute(&job(text, "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.text, text);
    assert!(r.usage.is_some());
}

#[tokio::test]
async fn a_reset_mid_stream_is_cut_and_retried() {
    let server = start(once(Faults {
        reset: 1.0,
        ..Faults::default()
    }))
    .await;
    let r = client(&server.base_url(), |_| {})
        .execute(&job("one two three four", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert_eq!(r.text, "one two three four");
    let stats = server.provider.stats();
    assert_eq!((stats.resets, stats.generations, stats.requests), (1, 1, 2));
}

#[tokio::test]
async fn a_clean_cut_is_never_complete() {
    let server = start(once(Faults {
        cut: 1.0,
        ..Faults::default()
    }))
    .await;
    let r = client(&server.base_url(), |_| {})
        .execute(&job("one two three four", "k"))
        .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("without a finish_reason")
    );
}

#[tokio::test]
async fn an_accepted_socket_that_never_answers_times_out() {
    let server = start(once(Faults {
        hang: 1.0,
        ..Faults::default()
    }))
    .await;
    let r = client(&server.base_url(), |c| {
        c.first_token_timeout = Duration::from_millis(300)
    })
    .execute(&job("x", "k"))
    .await;
    assert_eq!(outcomes(&r), [Outcome::NoFirstToken, Outcome::Complete]);
    assert_eq!(server.provider.stats().hangs, 1);
}

#[tokio::test]
async fn a_stall_after_some_text_times_out_on_idle() {
    let server = start(once(Faults {
        stall: 1.0,
        ..Faults::default()
    }))
    .await;
    let r = client(&server.base_url(), |c| {
        c.idle_timeout = Duration::from_millis(300)
    })
    .execute(&job("a b c d", "k"))
    .await;
    assert_eq!(outcomes(&r), [Outcome::Stalled, Outcome::Complete]);
}

#[tokio::test]
async fn rate_limits_with_retry_after_ms_and_capacity() {
    let server = start(MockConfig {
        capacity: Some(2),
        retry_after: RetryAfter::Millis(20),
        first_token_delay: Duration::from_millis(30),
        ..MockConfig::default()
    })
    .await;
    let c = Arc::new(client(&server.base_url(), |c| {
        c.concurrency = 4;
        c.max_attempts = 20;
    }));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let c = c.clone();
        tasks.spawn(async move { c.execute(&job("x", &format!("k{i}"))).await });
    }
    let mut waited = Vec::new();
    while let Some(r) = tasks.join_next().await {
        let r = r.unwrap();
        assert!(r.answered(), "{:?}", r.failure);
        waited.extend(
            r.attempts
                .iter()
                .filter(|a| a.status == Some(429))
                .map(|a| a.wait_ms.unwrap()),
        );
    }
    let stats = server.provider.stats();
    assert!(
        stats.status_429 > 0,
        "over capacity must be refused: {stats:?}"
    );
    assert_eq!(stats.generations, 12);
    assert!(
        waited.iter().all(|w| *w >= 20.0),
        "Retry-After is a floor: {waited:?}"
    );
}

#[tokio::test]
async fn no_done_and_usage_placements_over_http() {
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
    ] {
        let none = config.usage == UsageMode::None;
        let server = start(config).await;
        let r = client(&server.base_url(), |_| {})
            .execute(&job("a b", "k"))
            .await;
        assert_eq!(outcomes(&r), [Outcome::Complete]);
        assert_eq!(r.usage.is_none(), none);
    }
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_fails() {
    // Bind and drop a listener: its port is free and nothing answers there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = client(&format!("http://127.0.0.1:{port}/v1"), |c| {
        c.max_attempts = 3
    })
    .execute(&job("x", "k"))
    .await;
    assert_eq!(outcomes(&r), [Outcome::HttpError; 3]);
    assert!(r.attempts.iter().all(|a| a.status.is_none()));
    assert!(
        r.failure.as_deref().unwrap().contains("connection failed"),
        "{:?}",
        r.failure
    );
}

#[tokio::test]
async fn stats_are_served_over_http() {
    let server = start(MockConfig::default()).await;
    let _ = client(&server.base_url(), |_| {})
        .execute(&job("x", "k"))
        .await;
    let body = reqwest::get(format!("http://{}/stats", server.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let stats: promptgauge::mock::StatsSnapshot = serde_json::from_str(&body).unwrap();
    assert_eq!((stats.requests, stats.generations), (1, 1));
}
