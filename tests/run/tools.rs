//! Tools a bench declares (docs/guide/tools.md): `tools:` offered to the model on every
//! protocol in its own form, each case's `tool_results:` checked against them at load, and
//! the mistakes a bench can make said with the file, the line and the fix before anything
//! is sent.

use std::path::Path;

use crate::common::*;
use promptgauge::mock::MockConfig;
use serde_json::Value;

const BENCH: &str = "name: agent
cases: cases.jsonl
variants: [v.yaml]
grade: { kind: tool_call }
tools:
  - name: get_weather
    description: The weather in a city now.
    parameters: { type: object, properties: { city: { type: string } }, required: [city] }
  - name: search
    default: no results
loop: { max_turns: 4, max_tool_calls: 6 }
";

fn bench(cases: &str, bench: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("bench.yaml"), bench).unwrap();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    std::fs::write(
        d.join("v.yaml"),
        "messages:\n  - { role: user, content: \"{{ q }}\" }\n",
    )
    .unwrap();
    dir
}

const CASE: &str = r#"{"id": "w1", "vars": {"q": "Weather in Oslo?"}, "expected": {"name": "get_weather", "arguments": {"city": "Oslo"}}, "tool_results": [{"tool": "get_weather", "args": {"city": "Oslo"}, "result": "3 °C, rain"}]}
"#;

fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run(d: &Path, url: &str, protocol: &str) -> std::process::Output {
    promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
        .args(["--base-url", url, "--protocol", protocol])
        .output()
        .unwrap()
}

#[test]
fn declared_tools_are_offered_on_every_protocol_in_its_own_form() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = bench(CASE, BENCH);
    let d = b.path();
    let out = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    for (protocol, name_at) in [
        ("openai-chat", "/tools/0/function/name"),
        ("openai-responses", "/tools/0/name"),
        ("anthropic-messages", "/tools/0/name"),
    ] {
        let before = server.provider.bodies().len();
        let out = run(d, &server.base_url(), protocol);
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        let bodies = server.provider.bodies();
        let body: &Value = bodies[before..]
            .iter()
            .find(|b| b.get("tools").is_some())
            .expect("a request offering the tools");
        assert_eq!(
            body.pointer(name_at).unwrap(),
            "get_weather",
            "{protocol}: {body}"
        );
        assert_eq!(body["tools"].as_array().unwrap().len(), 2, "{protocol}");
    }
}

#[test]
fn a_bench_s_tool_mistakes_are_said_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    for (cases, bench_text, expected) in [
        (
            CASE.replace(r#""tool": "get_weather""#, r#""tool": "book_flight""#),
            BENCH.to_string(),
            "cases.jsonl:1: case `w1`: its tool_results script `book_flight`, which the bench's `tools:` does not declare",
        ),
        (
            CASE.replace(
                r#""args": {"city": "Oslo"}, "result""#,
                r#""args": "(", "match": "pattern", "result""#,
            ),
            BENCH.to_string(),
            "is not a regular expression",
        ),
        (
            CASE.to_string(),
            BENCH.replace("- name: search", "- name: web search"),
            "bench.yaml:5: the tool name `web search` is not 1 to 64 letters",
        ),
        (
            CASE.to_string(),
            format!("{BENCH}params: {{ tools: [] }}\n"),
            "also `params.tools`",
        ),
        (
            CASE.replace(r#""result": "3"#, r#""matching": "exact", "result": "3"#),
            BENCH.to_string(),
            "cases.jsonl:1",
        ),
    ] {
        let b = bench(&cases, &bench_text);
        let out = run(b.path(), &server.base_url(), "openai-chat");
        assert_eq!(out.status.code(), Some(2), "{}", said(&out));
        assert!(said(&out).contains(expected), "{expected}: {}", said(&out));
        assert_eq!(server.provider.stats().requests, 0, "nothing sent");
    }
}
