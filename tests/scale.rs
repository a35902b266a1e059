//! Throughput and scale: the response cache, replicas with work stealing and benching, and
//! adaptive concurrency.

mod common;

use common::*;
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
