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
    config.limits.first_token_timeout = Duration::from_secs(10);
    config.limits.idle_timeout = Duration::from_secs(10);
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
        c.limits.first_token_timeout = Duration::from_millis(300)
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
        c.limits.idle_timeout = Duration::from_millis(300)
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
        c.limits.concurrency = 4;
        c.limits.max_attempts = 20;
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
        c.limits.max_attempts = 3
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

// ---- Redirects: a POST is never turned into a GET without its prompt ----

/// A request as a scripted HTTP server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// A one-request-per-connection HTTP server: `route` answers each path with a raw response.
async fn scripted_http(
    route: impl Fn(&str) -> String + Send + Sync + 'static,
) -> (String, Arc<std::sync::Mutex<Vec<Seen>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (log, route) = (seen.clone(), Arc::new(route));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (log, route) = (log.clone(), route.clone());
            tokio::spawn(async move {
                let mut raw = Vec::new();
                let mut buf = [0u8; 4096];
                let head_end = loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    raw.extend_from_slice(&buf[..n]);
                    if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
                let mut lines = head.lines();
                let mut first = lines.next().unwrap_or("").split(' ');
                let (method, path) = (
                    first.next().unwrap_or("").to_string(),
                    first.next().unwrap_or("").to_string(),
                );
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                    .collect();
                let length: usize = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                while raw.len() < head_end + length {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    raw.extend_from_slice(&buf[..n]);
                }
                let body = raw[head_end..].to_vec();
                let reply = route(&path);
                log.lock().unwrap().push(Seen {
                    method,
                    path,
                    headers,
                    body,
                });
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (origin, seen)
}

fn redirect(status: u16, to: &str) -> String {
    format!(
        "HTTP/1.1 {status} Moved\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

const ANSWER: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"42\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

#[tokio::test]
async fn a_301_302_or_303_is_not_followed_and_fails_the_job_naming_where_it_points() {
    for status in [301, 302, 303] {
        let (origin, seen) = scripted_http(move |path| {
            if path.starts_with("/old/") {
                redirect(status, "/new/v1/chat/completions?key=sk-in-the-location")
            } else {
                // A GET here would be answered, and its reply graded: it must never come.
                ANSWER.to_string()
            }
        })
        .await;
        let r = client(&format!("{origin}/old/v1"), |c| c.limits.max_attempts = 3)
            .execute(&job("x", "k"))
            .await;
        assert_eq!(outcomes(&r), [Outcome::HttpError], "{status}: not retried");
        assert!(!r.answered());
        let failure = r.failure.clone().unwrap_or_default();
        assert!(
            failure.contains(&format!("HTTP {status}"))
                && failure.contains("would turn the POST into a GET")
                && failure.contains("/new/v1/chat/completions"),
            "{failure}"
        );
        assert!(!failure.contains("sk-in-the-location"), "{failure}");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{status}: only the POST, no GET: {seen:?}");
        assert_eq!(seen[0].method, "POST");
    }
}

#[tokio::test]
async fn a_307_or_308_keeps_the_post_and_its_body_and_credentials_stay_with_their_origin() {
    let (elsewhere, far) = scripted_http(|_| ANSWER.to_string()).await;
    for status in [307, 308] {
        let far_url = format!("{elsewhere}/far/v1/chat/completions");
        let (origin, seen) = scripted_http(move |path| {
            if path.starts_with("/old/") {
                redirect(status, "/new/v1/chat/completions")
            } else if path.starts_with("/new/") {
                redirect(status, &far_url)
            } else {
                ANSWER.to_string()
            }
        })
        .await;
        let r = client(&format!("{origin}/old/v1"), |c| {
            c.api_key = Some(promptgauge::client::ApiKey::new(
                "sk-the-secret-key-1".into(),
            ));
            // An endpoint's own headers, named in any case: one filled from a variable,
            // a cookie, and a credential header spelled as a user might.
            c.headers = vec![
                ("OpenAI-Organization".into(), "org-from-a-variable".into()),
                ("Cookie".into(), "session=the-cookie".into()),
                ("X-Api-Key".into(), "sk-the-second-key".into()),
            ];
        })
        .execute(&job("the prompt", "k"))
        .await;
        assert_eq!(outcomes(&r), [Outcome::Complete], "{status}");
        assert_eq!(r.text, "42");
        let here = seen.lock().unwrap().clone();
        assert_eq!(here.len(), 2, "{here:?}");
        let there = far.lock().unwrap().pop().unwrap();
        for s in here.iter().chain([&there]) {
            assert_eq!(s.method, "POST", "{status} {}", s.path);
            assert!(
                String::from_utf8_lossy(&s.body).contains("Echo: the prompt"),
                "{status}: the body follows to {}",
                s.path
            );
        }
        let auth = |s: &Seen| s.headers.iter().any(|(k, _)| k == "authorization");
        assert!(
            auth(&here[0]) && auth(&here[1]),
            "same origin keeps the key"
        );
        assert!(!auth(&there), "another origin never sees it");
        let named =
            |s: &Seen, name: &str| s.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        for name in ["openai-organization", "cookie", "x-api-key"] {
            assert!(named(&here[1], name), "{status}: same origin keeps {name}");
            assert!(!named(&there, name), "{status}: another origin got {name}");
        }
        let raw = format!("{:?}", there.headers);
        for secret in [
            "org-from-a-variable",
            "the-cookie",
            "sk-the-second-key",
            "sk-the-secret",
        ] {
            assert!(!raw.contains(secret), "{status}: {secret} reached {raw}");
        }
        assert!(
            named(&there, "idempotency-key"),
            "{status}: the key of the job follows"
        );
    }
}
