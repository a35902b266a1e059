//! A bench whose endpoint speaks Anthropic messages (`endpoint: {protocol:
//! anthropic-messages}`), end to end: the binary against a simulator on port 0, which sees
//! every job on `POST /v1/messages` with the key in `x-api-key`.

use std::path::Path;

use crate::common::*;
use promptgauge::mock::MockConfig;
use serde_json::Value;

const KEY: &str = "sk-ant-e2e-0123456789abcdef";

/// The bench's endpoint: Anthropic messages, the key in `$ANTHROPIC_API_KEY`.
const ENDPOINT: &str =
    "endpoint: { protocol: anthropic-messages, api_key_env: ANTHROPIC_API_KEY }\n";

/// Runs the binary in `d` with the key in `$ANTHROPIC_API_KEY`; returns what it wrote to
/// stderr, once its exit code is `code`.
fn run_with_key(d: &Path, args: &[&str], code: i32) -> String {
    let o = promptgauge(d)
        .args(args)
        .env("ANTHROPIC_API_KEY", KEY)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "{stderr}");
    stderr
}

/// Runs the bench in `d` against the simulator at `url`, which must succeed.
fn run_bench(d: &Path, url: &str) {
    run_with_key(
        d,
        &[
            "run",
            "bench.yaml",
            "--base-url",
            url,
            "--model",
            "mock-model",
        ],
        0,
    );
}

fn summary(run: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
}

/// Each variant's figures that do not depend on timing.
fn figures(summary: &Value) -> Vec<Value> {
    summary["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            serde_json::json!([
                v["name"],
                v["n"],
                v["correct"],
                v["accuracy"],
                v["failed"],
                v["tokens"],
                v["cost_usd"]
            ])
        })
        .collect()
}

/// Every file of a run folder, as text.
fn everything_in(run: &Path) -> String {
    std::fs::read_dir(run)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap_or_default())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect()
}

#[test]
fn a_bench_over_anthropic_messages_is_graded_as_over_chat_completions_and_keeps_its_protocol() {
    let (_rt, server) = start_mock(MockConfig {
        api_key: Some(KEY.into()),
        ..MockConfig::default()
    });
    let dir = bench_dir(ENDPOINT);
    let d = dir.path();
    run_bench(d, &server.base_url());

    // The simulator heard every job on /v1/messages, with the key where Anthropic wants it
    // (a bearer would have been refused) and the bench's system prompt and ceiling.
    let stats = server.provider.stats();
    assert_eq!(
        (stats.requests, stats.anthropic_messages, stats.status_401),
        (24, 24, 0)
    );
    assert_eq!(stats.generations, 24);
    for headers in server.provider.headers() {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(
            (header("x-api-key"), header("anthropic-version")),
            (Some(KEY), Some("2023-06-01"))
        );
        assert_eq!(header("authorization"), None, "no bearer");
    }
    let bodies = server.provider.bodies();
    for b in &bodies {
        assert_eq!(
            (&b["max_tokens"], &b["temperature"]),
            (&100.into(), &0.into()),
            "{b}"
        );
        assert!(b.get("stream_options").is_none() && b.get("response_format").is_none());
        assert!(
            b["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["role"] == "user"),
            "{b}"
        );
    }
    assert_eq!(
        bodies
            .iter()
            .filter(|b| b["system"] == "Think step by step.")
            .count(),
        12,
        "the careful variant's system message, apart"
    );

    // Every answer was whole, graded, and recorded under its protocol.
    let run = &run_dirs(&d.join("reports"))[0];
    let records = journal(run);
    assert_eq!(records.len(), 24);
    for r in &records {
        assert_eq!(
            (r["status"].as_str(), r["finish_reason"].as_str()),
            (Some("graded"), Some("end_turn")),
            "{r}"
        );
        assert_eq!(r["usage"]["estimated"], false, "{r}");
    }
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["endpoint"]["protocol"], "anthropic-messages");
    assert!(
        !everything_in(run).contains(KEY),
        "the key is never written"
    );

    // The report is right: the same simulated model over chat completions gives the same
    // accuracy, tokens (cached ones too) and cost.
    let (_rt2, openai) = start_mock(MockConfig::default());
    let other = bench_dir("");
    promptgauge(other.path())
        .args(["run", "bench.yaml", "--base-url", &openai.base_url()])
        .args(["--model", "mock-model"])
        .assert()
        .success();
    let baseline = summary(&run_dirs(&other.path().join("reports"))[0]);
    assert_eq!(openai.provider.stats().anthropic_messages, 0);
    let ours = summary(run);
    assert_eq!(figures(&ours), figures(&baseline));
    assert!(ours["variants"][1]["tokens"]["cached"].as_u64().unwrap() > 0);

    // A resume keeps the run's protocol and refuses another; nothing is sent.
    let sent = server.provider.stats().requests;
    let run_path = run.to_str().unwrap();
    let e = run_with_key(
        d,
        &["run", "--resume", run_path, "--protocol", "openai-chat"],
        2,
    );
    assert!(
        e.contains("anthropic-messages")
            && e.contains("one run's answers come through one protocol"),
        "{e}"
    );
    assert_eq!(server.provider.stats().requests, sent);
}

#[test]
fn a_judge_at_an_anthropic_endpoint_is_read_from_its_reply_without_json_mode() {
    let (_rt, server) = start_mock(MockConfig {
        api_key: Some(KEY.into()),
        judge_error: 0.0,
        ..MockConfig::default()
    });
    let dir = arithmetic_bench(6, 2, ENDPOINT);
    let d = dir.path();
    let bench = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace("grade: { kind: number }", "grade: { kind: judge }");
    std::fs::write(d.join("bench.yaml"), bench).unwrap();
    run_bench(d, &server.base_url());
    let stats = server.provider.stats();
    assert_eq!(stats.requests, stats.anthropic_messages, "the judge too");
    assert!(stats.requests > 12, "{stats:?}");
    // Anthropic has no JSON mode: nothing asks for one.
    assert!(
        server
            .provider
            .bodies()
            .iter()
            .all(|b| b.get("response_format").is_none())
    );
    let records = journal(&run_dirs(&d.join("reports"))[0]);
    assert_eq!(records.len(), 12);
    for r in &records {
        assert_eq!(r["status"], "graded", "{r}");
        assert!(r["score"].is_number(), "{r}");
    }
}

#[test]
fn a_refused_key_stops_the_run_at_the_models_list_before_any_job() {
    let (_rt, server) = start_mock(MockConfig {
        api_key: Some("sk-ant-another-key-0000".into()),
        ..MockConfig::default()
    });
    let dir = bench_dir(ENDPOINT);
    let url = server.base_url();
    let args = [
        "run",
        "bench.yaml",
        "--base-url",
        &url,
        "--model",
        "mock-model",
    ];
    let e = run_with_key(dir.path(), &args, 4);
    assert!(e.contains("$ANTHROPIC_API_KEY") && !e.contains(KEY), "{e}");
    assert_eq!(server.provider.stats().requests, 0);
}
