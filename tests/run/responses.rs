//! A bench whose endpoint speaks OpenAI's Responses API (`protocol: openai-responses`), end
//! to end: the binary against simulators on port 0, which say what they were sent.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;
use promptgauge::mock::MockConfig;
use promptgauge::report::Summary;
use serde_json::Value;

const KEY: &str = "sk-end-to-end-responses-key";

/// Runs `bench.yaml` in `dir` against `base_url` with the key; returns the run's folder.
fn run(dir: &Path, base_url: &str) -> std::path::PathBuf {
    let out = promptgauge(dir)
        .args(["run", "bench.yaml", "--base-url", base_url, "--model", "m"])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    run_dirs(&dir.join("reports")).pop().unwrap()
}

/// Each job's score, by case and variant.
fn scores(run: &Path) -> BTreeMap<(String, String), Value> {
    journal(run)
        .into_iter()
        .map(|r| {
            let key = (r["case_id"].to_string(), r["variant"].to_string());
            (key, r["score"].clone())
        })
        .collect()
}

#[test]
fn a_bench_speaking_the_responses_api_is_answered_graded_and_resumed_only_through_it() {
    let keyed = || MockConfig {
        api_key: Some(KEY.into()),
        ..MockConfig::default()
    };
    let (_rt, server) = start_mock(keyed());
    let dir = bench_dir("endpoint: { protocol: openai-responses, model: m }\n");
    let d = dir.path();
    let folder = run(d, &server.base_url());

    // The simulator heard every job on /v1/responses, with the key as a bearer token
    // (it refuses any other) and the bench's params in the API's words.
    let stats = server.provider.stats();
    assert_eq!(
        (
            stats.requests,
            stats.responses_requests,
            stats.generations,
            stats.status_401
        ),
        (24, 24, 24, 0)
    );
    let bearer = ("authorization".to_string(), format!("Bearer {KEY}"));
    assert_eq!(server.provider.headers().len(), 24);
    for headers in server.provider.headers() {
        assert!(headers.contains(&bearer), "{headers:?}");
    }
    for body in server.provider.bodies() {
        assert!(
            body["input"].is_array() && body.get("messages").is_none(),
            "{body}"
        );
        assert_eq!(
            (&body["max_output_tokens"], &body["stream"]),
            (&100.into(), &true.into())
        );
    }

    // Every answer is graded, and the figures are the journal's.
    let records = journal(&folder);
    assert_eq!(records.len(), 24);
    for r in &records {
        assert_eq!(
            (&r["status"], &r["outcome"], &r["finish_reason"]),
            (&"graded".into(), &"complete".into(), &"completed".into()),
            "{r}"
        );
    }
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(folder.join("summary.json")).unwrap())
            .unwrap();
    assert!(summary.complete);
    for v in &summary.variants {
        let correct = records
            .iter()
            .filter(|r| r["variant"] == v.name.as_str() && r["score"] == 1.0)
            .count() as u64;
        assert_eq!((v.n, v.correct), (12, correct), "{}", v.name);
        assert!(v.cost_usd.unwrap() > 0.0, "usage came with the answers");
    }
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["endpoint"]["protocol"], "openai-responses");

    // The same bench through chat completions: the same answers, graded the same.
    let (_rt_chat, chat) = start_mock(keyed());
    let chat_dir = bench_dir("");
    let chat_folder = run(chat_dir.path(), &chat.base_url());
    assert_eq!(chat.provider.stats().responses_requests, 0);
    assert_eq!(scores(&folder), scores(&chat_folder));

    // One run's answers come through one protocol: a resume naming another is refused
    // before anything is sent.
    let out = promptgauge(d)
        .args(["run", "--resume", folder.to_str().unwrap()])
        .args(["--protocol", "openai-chat"])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("openai-responses") && stderr.contains("openai-chat"),
        "{stderr}"
    );
    assert_eq!(server.provider.stats().requests, 24);
}
