//! Throughput and scale: the response cache, replicas with work stealing and benching, and
//! adaptive concurrency.

use crate::common::*;
use promptgauge::mock::MockConfig;
use promptgauge::report::Summary;

fn summary(dir: &std::path::Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn a_second_run_with_cache_sends_nothing_and_reports_the_same() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(20, 3, "");
    let d = bench.path();
    let args = [
        "run",
        "bench.yaml",
        "--cache",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
    ];
    let first = promptgauge(d).args(args).output().unwrap();
    assert!(first.status.success());
    let sent = server.provider.stats().requests;
    assert_eq!(sent, 60);
    let second = promptgauge(d).args(args).output().unwrap();
    assert!(second.status.success());
    assert_eq!(
        server.provider.stats().requests,
        sent,
        "nothing sent the second time"
    );
    let runs = run_dirs(&d.join("reports"));
    let (a, b) = (summary(&runs[0]), summary(&runs[1]));
    for (x, y) in a.variants.iter().zip(&b.variants) {
        assert_eq!(
            (x.n, x.correct, x.ci_low, x.ci_high),
            (y.n, y.correct, y.ci_low, y.ci_high)
        );
        assert_eq!(x.tokens, y.tokens);
        assert_eq!((x.cached, y.cached), (0, 20));
        assert!(
            x.latency_ms.p50.is_some() && y.latency_ms.p50.is_none(),
            "cached jobs have no latency"
        );
    }
    assert_eq!(a.comparisons, b.comparisons);
    assert!(
        journal(&runs[1])
            .iter()
            .all(|r| r["cached"] == true && r["attempts"].as_array().unwrap().is_empty())
    );
    assert!(String::from_utf8_lossy(&second.stdout).contains("came from the response cache"));
    // Without --cache everything is sent again; with another model nothing matches.
    promptgauge(d)
        .args(&args[..2])
        .args(["--base-url", &server.base_url(), "--model", "m"])
        .assert()
        .success();
    assert_eq!(server.provider.stats().requests, sent * 2);
    promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--cache",
            "--base-url",
            &server.base_url(),
            "--model",
            "other",
        ])
        .assert()
        .success();
    assert_eq!(server.provider.stats().requests, sent * 3);
}

#[test]
fn replicas_and_adaptive_concurrency_end_to_end() {
    let (_rt_a, a) = start_mock(MockConfig {
        capacity: Some(2),
        retry_after: promptgauge::mock::RetryAfter::Millis(20),
        first_token_delay: std::time::Duration::from_millis(10),
        ..MockConfig::default()
    });
    let (_rt_b, b) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(
        30,
        2,
        "limits: { concurrency: 6, adaptive: true, max_attempts: 20 }\n",
    );
    let d = bench.path();
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &a.base_url(),
            "--base-url",
            &b.base_url(),
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = &run_dirs(&d.join("reports"))[0];
    let s = summary(run);
    assert_eq!(s.run.provider.replicas, vec![a.base_url(), b.base_url()]);
    assert_eq!(s.replicas.len(), 2);
    let answered: u64 = s.replicas.iter().map(|r| r.answered).sum();
    assert_eq!(answered, 60);
    assert_eq!(
        a.provider.stats().generations + b.provider.stats().generations,
        60
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("replica {}", a.base_url())));
    // Replica a turned work away with 429s; its gate was cut, and the journal says so.
    let text = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert!(a.provider.stats().status_429 > 0);
    assert!(
        text.lines()
            .any(|l| l.starts_with("{\"event\":\"concurrency\"") && l.contains("\"replica\":0")),
        "no gate change journaled"
    );
    assert_eq!(s.jobs_finished, 60, "event lines are not jobs");
}

mod library {
    use std::sync::Arc;
    use std::time::Duration;

    use promptgauge::client::{Client, ClientConfig, JobRequest, JobResult};
    use promptgauge::mock::memory::MemoryTransport;
    use promptgauge::mock::{Faults, MockConfig, Provider, RetryAfter};
    use promptgauge::suite::ChatMessage;
    use serde_json::Map;
    use tokio::time::Instant;

    fn job(i: usize) -> JobRequest {
        JobRequest {
            messages: vec![ChatMessage::new("user", format!("Echo: job {i}"))],
            params: Map::new(),
            idempotency_key: format!("job-{i}"),
            reserve_tokens: 0,
        }
    }

    /// Runs `jobs` jobs through the client at once (the pool decides where each goes).
    async fn run_all(client: Arc<Client>, jobs: usize) -> Vec<JobResult> {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..jobs {
            let c = client.clone();
            tasks.spawn(async move { c.execute(&job(i)).await });
        }
        let mut out = Vec::new();
        while let Some(r) = tasks.join_next().await {
            out.push(r.unwrap());
        }
        out
    }

    fn replicas(
        a: MockConfig,
        b: MockConfig,
        tweak: impl FnOnce(&mut ClientConfig),
    ) -> (Arc<Provider>, Arc<Provider>, Arc<Client>) {
        let (pa, pb) = (Arc::new(Provider::new(a)), Arc::new(Provider::new(b)));
        let transport = MemoryTransport::routes(vec![
            ("http://a/v1".into(), pa.clone()),
            ("http://b/v1".into(), pb.clone()),
        ]);
        let mut config = ClientConfig::new("http://a/v1", "m");
        config.replicas = vec!["http://b/v1".into()];
        config.seed = Some(1);
        tweak(&mut config);
        (pa, pb, Arc::new(Client::new(Arc::new(transport), config)))
    }

    fn delay(ms: u64) -> MockConfig {
        MockConfig {
            first_token_delay: Duration::from_millis(ms),
            ..MockConfig::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_replica_never_holds_a_backlog() {
        // Alone, the fast replica does 42 jobs two at a time in 21 × 100 ms = 2.1 s.
        let (fast, slow, client) = replicas(delay(100), delay(1000), |c| c.limits.concurrency = 2);
        let start = Instant::now();
        let results = run_all(client.clone(), 42).await;
        let wall = start.elapsed();
        assert!(results.iter().all(|r| r.answered()));
        assert!(wall <= Duration::from_millis(2100), "{wall:?}");
        let (f, s) = (fast.stats().generations, slow.stats().generations);
        assert_eq!(f + s, 42);
        // Ten times slower, so about a tenth of the fast one's share.
        assert!(s <= 6 && f >= 36, "fast {f}, slow {s}");
        let replicas: Vec<usize> = results
            .iter()
            .map(|r| r.attempts[0].replica.unwrap())
            .collect();
        assert_eq!(replicas.iter().filter(|&&i| i == 1).count() as u64, s);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_failing_every_request_is_benched_and_the_run_completes() {
        let broken = MockConfig {
            faults: Faults {
                rate_5xx: 1.0,
                ..Faults::default()
            },
            ..MockConfig::default()
        };
        let (good, bad, client) = replicas(delay(50), broken, |c| {
            c.limits.concurrency = 2;
            c.backoff_base = Duration::from_millis(10);
        });
        let mut rx = listen(&client);
        let results = run_all(client.clone(), 60).await;
        assert!(
            results.iter().all(|r| r.answered()),
            "every job gets through on the good replica"
        );
        assert_eq!(good.stats().generations, 60);
        let events = pool_events(&mut rx);
        assert!(
            events
                .iter()
                .any(|e| e.event == "benched" && e.replica == 1),
            "{events:?}"
        );
        // Benched after 3 failures, it sees only a handful of the 60 jobs' attempts.
        assert!(bad.stats().requests < 15, "{:?}", bad.stats());
    }

    async fn capacity_run(
        adaptive: bool,
    ) -> (
        Duration,
        u64,
        usize,
        Vec<promptgauge::client::pool::PoolEvent>,
    ) {
        let provider = Arc::new(Provider::new(MockConfig {
            capacity: Some(4),
            retry_after: RetryAfter::Seconds(1),
            first_token_delay: Duration::from_millis(200),
            ..MockConfig::default()
        }));
        let mut config = ClientConfig::new("http://sim/v1", "m");
        config.limits.concurrency = 16;
        config.limits.max_attempts = 30;
        config.limits.adaptive = adaptive;
        config.seed = Some(3);
        let client = Arc::new(Client::new(
            Arc::new(MemoryTransport::new(provider.clone())),
            config,
        ));
        let mut rx = listen(&client);
        let start = Instant::now();
        let results = run_all(client.clone(), 200).await;
        let failed = results.iter().filter(|r| !r.answered()).count();
        (
            start.elapsed(),
            provider.stats().status_429,
            failed,
            pool_events(&mut rx),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn adaptive_concurrency_beats_a_fixed_over_provisioned_gate() {
        let (fixed_wall, fixed_429, fixed_failed, _) = capacity_run(false).await;
        let (adaptive_wall, adaptive_429, adaptive_failed, events) = capacity_run(true).await;
        eprintln!(
            "fixed: {fixed_wall:?}, {fixed_429} 429s; adaptive: {adaptive_wall:?}, {adaptive_429} 429s, {} changes",
            events.len()
        );
        assert_eq!((fixed_failed, adaptive_failed), (0, 0));
        assert!(
            adaptive_429 * 4 < fixed_429,
            "429s: adaptive {adaptive_429}, fixed {fixed_429}"
        );
        assert!(
            adaptive_wall < fixed_wall,
            "wall: adaptive {adaptive_wall:?}, fixed {fixed_wall:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| e.event == "concurrency" && e.to < e.from),
            "{events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| e.event == "concurrency" && e.to > e.from),
            "it grows back"
        );
    }

    /// Subscribes to the client's events.
    fn listen(
        client: &Client,
    ) -> tokio::sync::mpsc::UnboundedReceiver<promptgauge::client::ClientEvent> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        client.subscribe(
            Some(std::sync::Arc::new(move |e| {
                let _ = tx.send(e);
            })),
            false,
        );
        rx
    }

    /// The pool changes heard so far.
    fn pool_events(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<promptgauge::client::ClientEvent>,
    ) -> Vec<promptgauge::client::pool::PoolEvent> {
        let mut events = Vec::new();
        while let Ok(e) = rx.try_recv() {
            if let promptgauge::client::ClientEvent::Pool(p) = e {
                events.push(p);
            }
        }
        events
    }

    /// Answers every request at once, saying the rate-limit window is spent.
    struct Spent;

    impl promptgauge::client::Transport for Spent {
        fn send(
            &self,
            _: promptgauge::client::HttpRequest,
        ) -> promptgauge::client::transport::BoxFuture<
            Result<promptgauge::client::HttpResponse, promptgauge::client::TransportError>,
        > {
            Box::pin(async {
                let body = bytes::Bytes::from_static(
                    b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
                );
                Ok(promptgauge::client::HttpResponse {
                    status: 200,
                    headers: vec![("x-ratelimit-remaining-requests".into(), "0".into())],
                    body: Box::pin(futures_util::stream::iter([Ok(body)])),
                })
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_rate_limit_window_cuts_the_gate_before_any_429() {
        let mut config = ClientConfig::new("http://x/v1", "m");
        config.limits.concurrency = 8;
        config.limits.adaptive = true;
        let client = Client::new(Arc::new(Spent), config);
        let mut rx = listen(&client);
        assert!(client.execute(&job(0)).await.answered());
        let events = pool_events(&mut rx);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!((events[0].from, events[0].to), (Some(8), Some(4)));
        assert!(events[0].reason.contains("rate-limit window"), "{events:?}");
    }
}

#[test]
fn report_html_holds_a_bounded_share_of_huge_prompts_and_says_so() {
    // 40 cases whose prompt carries a 256 KiB document, 2 variants: 20 MiB of prompts,
    // which report.html once embedded in full (a 4 MB document in 50 cases: a 200 MB page).
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(40, 2, "");
    let d = bench.path();
    let doc = "lorem ipsum ".repeat((256 << 10) / 12);
    let cases: String = (1..=40)
        .map(|i| {
            serde_json::json!({"id": format!("add-{i:02}"), "vars": {"question": format!("What is {i} + {i}?"), "doc": doc}, "expected": (2 * i).to_string()})
                .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    std::fs::write(d.join("plain.txt"), "{{ doc }}\n{{ question }}").unwrap();
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = &run_dirs(&d.join("reports"))[0];
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.len() < 4 << 20, "report.html is {} bytes", html.len());
    assert!(
        html.contains("prompts at 16 KiB each") && html.contains("40 cut, 0 left out"),
        "the page says what it cut"
    );
    assert!(html.contains("[cut here: the prompt is"));
    // The short variant's prompts are whole.
    assert!(html.contains("Think step by step."));
}
