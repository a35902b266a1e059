//! Tools a bench declares (docs/guide/tools.md): `tools:` offered to the model on every
//! protocol in its own form, each case's `tool_results:` checked against them at load, and
//! the mistakes a bench can make said with the file, the line and the fix before anything
//! is sent.

use std::path::Path;

use crate::common::*;
use promptgauge::mock::{AgentModes, MockConfig};
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

pub(crate) fn bench(cases: &str, bench: &str) -> tempfile::TempDir {
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

pub(crate) fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(crate) fn run(d: &Path, url: &str, protocol: &str) -> std::process::Output {
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
    assert!(
        said(&out).contains("each job is an agent loop of up to 4 requests (loop.max_turns)"),
        "{}",
        said(&out)
    );
    for (protocol, name_at) in [
        ("openai-chat", "/tools/0/function/name"),
        ("openai-responses", "/tools/0/name"),
        ("anthropic-messages", "/tools/0/name"),
    ] {
        let before = server.provider.bodies().len();
        let out = run(d, &server.base_url(), protocol);
        // This simulator, not told the case, calls the first tool with no arguments, which
        // the case does not script: the job fails with that cause (exit 3), after sending.
        assert_eq!(out.status.code(), Some(3), "{protocol}: {}", said(&out));
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

/// A loop bench: the weather and a search, the answer the last result (graded exactly).
const LOOP_BENCH: &str = "name: agent
cases: cases.jsonl
variants: [v.yaml]
grade: { kind: exact }
tools:
  - name: get_weather
    parameters: { type: object, properties: { city: { type: string } } }
  - name: search
    default: no results
loop: { max_turns: 4, max_tool_calls: 6 }
";

const LOOP_CASES: &str = r#"{"id": "w1", "vars": {"q": "Oslo, then advice?"}, "expected": "bring an umbrella", "tool_results": [{"tool": "get_weather", "args": {"city": "Oslo"}, "result": "3 °C, rain"}, {"tool": "search", "args": {"q": "rain"}, "match": "subset", "result": "bring an umbrella"}]}
{"id": "w2", "vars": {"q": "Lima?"}, "expected": "19 °C, sun", "tool_results": [{"tool": "get_weather", "args": {"city": "Lima"}, "result": "19 °C, sun"}]}
"#;

#[test]
fn a_loop_runs_its_tools_on_the_simulator_and_the_answer_comes_from_their_results() {
    let b = bench(LOOP_CASES, LOOP_BENCH);
    let d = b.path();
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--no-store",
            "--repeats",
            "3",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    // One line per job, every one a job record (the steps journaled for a resume are in
    // steps.jsonl), each valid under the schema docs/guide/reports.md points to.
    let records: Vec<Value> = journal(&run);
    assert_eq!(records.len(), 6, "{records:?}");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/results.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    for r in &records {
        let found: Vec<String> = validator.iter_errors(r).map(|e| e.to_string()).collect();
        assert!(found.is_empty(), "{found:?}: {r}");
        assert!(r["job"].is_u64() && r["outcome"].is_string() && r["score"].is_number());
    }
    let steps = std::fs::read_to_string(run.join("steps.jsonl")).unwrap();
    assert!(steps.lines().count() >= records.len(), "{steps}");
    assert!(
        steps.lines().all(|l| l.starts_with(r#"{"event":"step","#)),
        "{steps}"
    );
    for r in &records {
        let steps = r["steps"].as_array().expect("the trajectory");
        let (calls, answer) = if r["case_id"] == "w1" {
            (2, "bring an umbrella")
        } else {
            (1, "19 °C, sun")
        };
        assert_eq!(steps.len(), calls, "{r}");
        assert_eq!(steps[0]["tool"], "get_weather");
        assert_eq!(steps[calls - 1]["result"], answer);
        // One request a step, and the answer's: the attempts of every step are the job's.
        assert!(r["attempts"].as_array().unwrap().len() > calls, "{r}");
        if r["score"] == 1.0 {
            assert_eq!(r["output"], answer);
        }
    }
    assert!(
        records.iter().filter(|r| r["score"] == 1.0).count() >= 3,
        "mostly right: {records:?}"
    );
}

pub(crate) type Mock = (
    tokio::runtime::Runtime,
    promptgauge::mock::server::MockServer,
);

/// A simulator told every job is case `w1` of LOOP_CASES, with `calls` its agent makes.
pub(crate) fn scripted_mock(calls: Vec<(&str, Value)>) -> Mock {
    scripted_mock_with(calls, promptgauge::mock::AgentModes::default())
}

/// [`scripted_mock`] whose agent goes wrong as `faults` say.
fn scripted_mock_with(calls: Vec<(&str, Value)>, faults: promptgauge::mock::AgentModes) -> Mock {
    start_mock(MockConfig {
        agent_modes: faults,
        ..scripted(calls)
    })
}

/// A simulator's configuration told every job is case `w1` of LOOP_CASES, with `calls`
/// its agent makes.
fn scripted(calls: Vec<(&str, Value)>) -> MockConfig {
    use promptgauge::mock::answers::{Hint, Oracle};
    let hint = Hint {
        case: "w1".into(),
        expected: vec!["bring an umbrella".into()],
        expected_json: None,
        shape: promptgauge::grade::Shape::Text,
        others: std::sync::Arc::new(vec!["sunscreen".into()]),
        files: 0,
        tool_script: calls.into_iter().map(|(t, a)| (t.to_string(), a)).collect(),
        reading: None,
    };
    MockConfig {
        oracle: Some(Oracle(std::sync::Arc::new(move |_| Some(hint.clone())))),
        ..MockConfig::default()
    }
}

#[test]
fn each_protocol_gives_the_results_back_in_its_own_form_one_request_a_step() {
    let calls = vec![
        ("get_weather", serde_json::json!({"city": "Oslo"})),
        ("search", serde_json::json!({"q": "rain", "lang": "en"})),
    ];
    for (protocol, result_shape) in [
        ("openai-chat", r#""role":"tool""#),
        ("openai-responses", r#""type":"function_call_output""#),
        ("anthropic-messages", r#""type":"tool_result""#),
    ] {
        let (_rt, server) = scripted_mock(calls.clone());
        let b = bench(LOOP_CASES.lines().next().unwrap(), LOOP_BENCH);
        let out = run(b.path(), &server.base_url(), protocol);
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        let run_dir = run_dirs(&b.path().join("reports")).pop().unwrap();
        let r = journal(&run_dir)
            .into_iter()
            .find(|r| r["case_id"] == "w1")
            .unwrap();
        assert_eq!(r["steps"].as_array().unwrap().len(), 2, "{protocol}: {r}");
        assert_eq!(r["output"], "bring an umbrella", "{protocol}: {r}");
        assert_eq!(r["score"], 1.0, "{protocol}");
        // Three answers generated: two calls, then the answer; the last request carried both
        // results in the protocol's own form, with the ids the calls had.
        assert_eq!(server.provider.stats().generations, 3, "{protocol}");
        let bodies = server.provider.bodies();
        let last = bodies.last().unwrap().to_string();
        assert_eq!(last.matches(result_shape).count(), 2, "{protocol}: {last}");
        assert!(
            last.contains("3 °C, rain") && last.contains("bring an umbrella"),
            "{protocol}"
        );
        // Each step its own idempotency key: the job's, then -step1, -step2.
        let keys: Vec<String> = server
            .provider
            .headers()
            .iter()
            .filter_map(|h| {
                h.iter()
                    .find(|(k, _)| k == "idempotency-key")
                    .map(|(_, v)| v.clone())
            })
            .collect();
        assert!(
            keys.iter().any(|k| k.ends_with("-step2")),
            "{protocol}: {keys:?}"
        );
    }
}

#[test]
fn a_loop_that_goes_too_far_or_off_script_fails_with_its_cause_and_its_cost() {
    // Unscripted: Paris is in no line, and get_weather has no default.
    let (_rt, server) = scripted_mock(vec![("get_weather", serde_json::json!({"city": "Paris"}))]);
    let b = bench(LOOP_CASES.lines().next().unwrap(), LOOP_BENCH);
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "w1")
        .unwrap();
    assert_eq!(r["status"], "failed");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with(r#"unscripted tool call: get_weather({"city":"Paris"})"#),
        "{r}"
    );
    assert!(
        r["usage"]["prompt_tokens"].as_u64().unwrap() > 0,
        "its cost kept: {r}"
    );
    // A turn limit: five calls asked of a loop of four requests; an unknown tool is given
    // back to the model as an error, and counted in the trajectory.
    let (_rt, server) = scripted_mock(vec![
        ("search", serde_json::json!({"q": "a"})),
        ("book_flight", serde_json::json!({})),
        ("search", serde_json::json!({"q": "b"})),
        ("search", serde_json::json!({"q": "c"})),
        ("search", serde_json::json!({"q": "d"})),
    ]);
    let b = bench(LOOP_CASES.lines().next().unwrap(), LOOP_BENCH);
    let out = run(b.path(), &server.base_url(), "anthropic-messages");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "w1")
        .unwrap();
    assert_eq!(
        r["error"], "turn limit reached (4 requests, loop.max_turns)",
        "{r}"
    );
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    assert_eq!(steps[1]["error"], true);
    assert!(
        steps[1]["result"]
            .as_str()
            .unwrap()
            .contains("there is no tool `book_flight`")
    );
    assert_eq!(steps[0]["result"], "no results", "search's default");
    assert_eq!(
        server.provider.stats().generations,
        4,
        "never a fifth request"
    );
    // By batch: refused before anything is sent.
    let out = promptgauge(b.path())
        .args([
            "run",
            "bench.yaml",
            "--batch",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("cannot go by batch"), "{}", said(&out));
}

#[test]
fn two_prompts_for_an_agent_are_compared_on_the_answer_and_the_trajectory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: String = (1..=12)
        .map(|i| {
            format!(
                "{{\"id\": \"c{i}\", \"vars\": {{\"q\": \"Weather in city {i}, then what to wear?\"}}, \"expected\": \"wear {i}\", \"tool_results\": [{{\"tool\": \"get_weather\", \"args\": {{\"city\": \"city {i}\"}}, \"result\": \"{i} °C\"}}, {{\"tool\": \"search\", \"args\": {{\"q\": \"{i} °C\"}}, \"match\": \"subset\", \"result\": \"wear {i}\"}}]}}\n"
            )
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    std::fs::write(
        d.join("terse.yaml"),
        "messages:\n  - { role: system, content: \"Use the tools.\" }\n  - { role: user, content: \"{{ q }}\" }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("careful.yaml"),
        "messages:\n  - { role: system, content: \"Think step by step: look up the weather, then search what to wear, then answer.\" }\n  - { role: user, content: \"{{ q }}\" }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        "name: agent
cases: cases.jsonl
variants: [terse.yaml, careful.yaml]
grade:
  kind: all
  of:
    - { kind: exact }
    - { kind: tool_sequence, tools: [get_weather, search] }
    - { kind: max_steps, steps: 3 }
tools:
  - name: get_weather
    parameters: { type: object, properties: { city: { type: string } } }
  - name: search
    parameters: { type: object, properties: { q: { type: string } } }
",
    )
    .unwrap();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--no-store"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    // Both variants measured, compared case by case with the usual verdict.
    assert_eq!(s["variants"].as_array().unwrap().len(), 2);
    assert!(s["comparisons"][0]["verdict"].is_string(), "{s}");
    // And each part on its own: each scorer by its kind, then the answer (what `exact`
    // reads) and the trajectory (the calls: `tool_sequence` and `max_steps` together).
    let parts = s["parts"].as_array().unwrap();
    let names: Vec<&str> = parts.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "exact",
            "tool_sequence",
            "max_steps",
            "answer",
            "trajectory"
        ]
    );
    let means = |name: &str| -> Vec<f64> {
        parts.iter().find(|p| p["name"] == name).unwrap()["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["mean"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(means("answer"), means("exact"));
    for i in 0..2 {
        let trajectory = means("trajectory")[i];
        assert!(trajectory <= means("tool_sequence")[i] && trajectory <= means("max_steps")[i]);
        let whole = s["variants"][i]["accuracy"].as_f64().unwrap();
        assert!(whole <= trajectory && whole <= means("answer")[i], "{s}");
    }
    for p in parts {
        assert_eq!(p["binary"], true, "{p}");
        let c = &p["comparisons"][0];
        assert_eq!(
            (&c["variant"], &c["against"]),
            (&"careful".into(), &"terse".into()),
            "{p}"
        );
        assert!(c["verdict"].is_string(), "{p}");
    }
    // report.html shows each shown answer's trajectory: the calls, their arguments, what
    // they got back — as text, never markup.
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("trajectory (2 calls, 3 requests)"),
        "no trajectory"
    );
    // Each request with its own figures, its calls under it.
    assert!(
        regex::Regex::new(r#"<li><span class="muted">\d+ ms · \d+ → \d+ tokens · 1 attempt</span><ul><li><code>get_weather"#)
            .unwrap()
            .is_match(&html),
        "per-request figures"
    );
    assert!(
        html.contains("<code>get_weather({&quot;city&quot;:&quot;city "),
        "args shown"
    );
    for r in journal(&run).iter().filter(|r| r["case_id"].is_string()) {
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{r}");
        assert_eq!(r["turns"].as_array().unwrap().len(), 3, "{r}");
        // A right answer passes every part: the answer, the sequence, the step count.
        if r["output"] == r["expected"][0] {
            assert_eq!(r["score"], 1.0, "{r}");
        }
    }
}

#[test]
fn a_tool_a_program_answers_gets_each_call_and_no_secret_and_is_stopped_at_its_deadline() {
    let (_rt, server) = scripted_mock(vec![
        ("calc", serde_json::json!({"a": 2, "b": 3})),
        ("calc", serde_json::json!({"a": -1, "b": 0})),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The program adds; it reports which of promptgauge's variables it can see, and gives
    // back an error the model reads for a negative number.
    std::fs::write(
        d.join("calc.py"),
        "import json, os, sys\ncall = json.loads(sys.stdin.readline())\na, b = call['arguments']['a'], call['arguments']['b']\nif a < 0:\n    print(json.dumps({'error': 'negative numbers are not allowed'}))\nelse:\n    print(json.dumps({'result': f\"{a + b} (case {call['case']}, key seen: {'SECRET_KEY' in os.environ})\"}))\n",
    )
    .unwrap();
    std::fs::write(d.join("cases.jsonl"), LOOP_CASES.lines().next().unwrap()).unwrap();
    std::fs::write(
        d.join("v.yaml"),
        "messages:\n  - { role: user, content: \"{{ q }}\" }\n",
    )
    .unwrap();
    let bench = |timeout: &str| {
        format!(
            "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: exact }}\ntools:\n  - name: get_weather\n  - name: search\n  - name: calc\n    run: [python3, calc.py]\n    timeout: {timeout}\n"
        )
    };
    std::fs::write(d.join("bench.yaml"), bench("10s")).unwrap();
    let out = promptgauge(d)
        .env("SECRET_KEY", "sk-should-not-leak")
        .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
        .args(["--base-url", &server.base_url()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let r = journal(&run_dirs(&d.join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "w1")
        .unwrap();
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps[0]["result"], "5 (case w1, key seen: False)", "{r}");
    assert_eq!(steps[1]["error"], true);
    assert_eq!(
        steps[1]["result"],
        "error: negative numbers are not allowed"
    );
    // A program past its deadline is killed and fails the job with that cause.
    std::fs::write(d.join("calc.py"), "import time\ntime.sleep(30)\n").unwrap();
    std::fs::write(d.join("bench.yaml"), bench("300ms")).unwrap();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
        .args(["--base-url", &server.base_url(), "--out", "slow"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let r = journal(&run_dirs(&d.join("slow")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "w1")
        .unwrap();
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("took longer than 300ms"),
        "{r}"
    );
    // A program that is not there is said before anything is sent.
    std::fs::write(
        d.join("bench.yaml"),
        bench("1s").replace("[python3, calc.py]", "[./missing.py]"),
    )
    .unwrap();
    let out = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("the tool `calc`: cannot find the program `./missing.py`"),
        "{}",
        said(&out)
    );
}

#[test]
fn a_standalone_simulator_plays_an_agent_of_a_fixed_number_of_steps() {
    // `promptgauge mock --agent-steps 3`, as bench/loops.sh measures loops with.
    let (_rt, server) = start_mock(MockConfig {
        agent_steps: 3,
        ..MockConfig::default()
    });
    let b = bench(
        "{\"id\": \"e1\", \"vars\": {\"q\": \"Echo: hi\"}, \"expected\": \"hi\"}\n",
        "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: { kind: exact }\ntools:\n  - name: step\n    default: ok\n",
    );
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert!(out.status.success(), "{}", said(&out));
    let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "e1")
        .unwrap();
    assert_eq!(r["steps"].as_array().unwrap().len(), 3, "{r}");
    assert_eq!(r["output"], "hi");
    assert_eq!(r["score"], 1.0);
    assert_eq!(server.provider.stats().generations, 4);
    std::fs::remove_dir_all(b.path().join("reports")).unwrap();

    // `--agent-parallel`: the three calls in its first answer, then the answer.
    let (_rt, server) = start_mock(MockConfig {
        agent_steps: 3,
        agent_modes: AgentModes {
            parallel: true,
            ..AgentModes::default()
        },
        ..MockConfig::default()
    });
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert!(out.status.success(), "{}", said(&out));
    let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "e1")
        .unwrap();
    assert_eq!(r["steps"].as_array().unwrap().len(), 3, "{r}");
    assert_eq!(r["turns"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(server.provider.stats().generations, 2);
}

#[test]
fn a_hostile_agent_s_wrong_tools_bad_json_and_endless_calls_are_given_back_and_bounded() {
    let calls = vec![
        ("get_weather", serde_json::json!({"city": "Oslo"})),
        ("search", serde_json::json!({"q": "rain"})),
    ];
    for (faults, expected) in [
        (
            AgentModes {
                wrong_tool: 1.0,
                ..AgentModes::default()
            },
            "there is no tool `no_such_tool`",
        ),
        (
            AgentModes {
                bad_json: 1.0,
                ..AgentModes::default()
            },
            "must be a JSON object",
        ),
    ] {
        let (_rt, server) = scripted_mock_with(calls.clone(), faults);
        let b = bench(LOOP_CASES.lines().next().unwrap(), LOOP_BENCH);
        let out = run(b.path(), &server.base_url(), "openai-chat");
        assert!(out.status.success(), "{}", said(&out));
        let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
            .into_iter()
            .find(|r| r["case_id"] == "w1")
            .unwrap();
        // Every call given back as an error the model reads; the loop goes on, and its
        // answer (the last error) is graded wrong, not failed.
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{r}");
        assert!(steps.iter().all(|s| s["error"] == true), "{r}");
        assert!(
            steps[0]["result"].as_str().unwrap().contains(expected),
            "{r}"
        );
        assert_eq!(r["status"], "graded");
        assert_eq!(r["score"], 0.0);
    }
    // An agent that never answers is ended by the turn limit, its calls kept.
    let endless = AgentModes {
        endless: true,
        ..AgentModes::default()
    };
    let (_rt, server) = scripted_mock_with(calls, endless);
    let b = bench(LOOP_CASES.lines().next().unwrap(), LOOP_BENCH);
    let out = run(b.path(), &server.base_url(), "openai-responses");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "w1")
        .unwrap();
    assert_eq!(
        r["error"],
        "turn limit reached (4 requests, loop.max_turns)"
    );
    assert_eq!(r["steps"].as_array().unwrap().len(), 4);
    assert_eq!(server.provider.stats().generations, 4);
}

#[test]
fn parallel_calls_in_one_answer_are_each_answered_in_the_protocol_s_own_form() {
    let calls = vec![
        ("get_weather", serde_json::json!({"city": "Oslo"})),
        ("search", serde_json::json!({"q": "rain"})),
    ];
    for (protocol, result_shape) in [
        ("openai-chat", r#""role":"tool""#),
        ("openai-responses", r#""type":"function_call_output""#),
        ("anthropic-messages", r#""type":"tool_result""#),
    ] {
        let parallel = AgentModes {
            parallel: true,
            ..AgentModes::default()
        };
        let (_rt, server) = scripted_mock_with(calls.clone(), parallel);
        let b = bench(LOOP_CASES.lines().next().unwrap(), LOOP_BENCH);
        let out = run(b.path(), &server.base_url(), protocol);
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
            .into_iter()
            .find(|r| r["case_id"] == "w1")
            .unwrap();
        // Two calls in the first answer, both on turn 0; then the answer: two requests.
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{protocol}: {r}");
        assert!(steps.iter().all(|s| s["turn"] == 0), "{protocol}: {r}");
        assert_eq!(r["output"], "bring an umbrella", "{protocol}");
        assert_eq!(server.provider.stats().generations, 2, "{protocol}");
        let last = server.provider.bodies().last().unwrap().to_string();
        assert_eq!(last.matches(result_shape).count(), 2, "{protocol}: {last}");
    }
}

/// The journal's lines (a torn last one, from a kill, left out).
pub(crate) fn journal_so_far(run: &Path) -> Vec<Value> {
    lines_so_far(&run.join("results.jsonl"))
}

/// The agent loops' steps journaled so far (`steps.jsonl`; a torn last one left out).
fn steps_so_far(run: &Path) -> Vec<Value> {
    lines_so_far(&run.join("steps.jsonl"))
}

fn lines_so_far(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The job a step line belongs to: its key is `pg-RUN-JOB` or `pg-RUN-JOB-stepN`.
fn job_of_step(key: &str) -> u64 {
    let key = key.rsplit_once("-step").map_or(key, |(job, _)| job);
    key.rsplit('-').next().unwrap().parse().unwrap()
}

/// The run under `root` once a loop has finished a step but not its last (its step is
/// journaled and its job has no record), and three jobs have finished.
fn mid_way(root: &Path) -> Option<std::path::PathBuf> {
    let run = run_dirs(root).pop()?;
    let done: Vec<u64> = journal_so_far(&run)
        .iter()
        .filter_map(|l| l["job"].as_u64())
        .collect();
    let mid_way = steps_so_far(&run)
        .iter()
        .filter(|l| l["event"] == "step")
        .any(|s| !done.contains(&job_of_step(s["key"].as_str().unwrap())));
    (done.len() >= 3 && mid_way).then_some(run)
}

#[test]
fn a_loop_killed_mid_way_resumes_at_its_last_finished_step_and_sends_none_twice() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: std::time::Duration::from_millis(40),
        token_delay: std::time::Duration::from_millis(5),
        ..scripted(vec![
            ("get_weather", serde_json::json!({"city": "Oslo"})),
            ("search", serde_json::json!({"q": "rain"})),
        ])
    });
    let w1 = LOOP_CASES.lines().next().unwrap();
    let cases: String = (0..24)
        .map(|i| w1.replacen(r#""id": "w1""#, &format!(r#""id": "w1-{i}""#), 1) + "\n")
        .collect();
    let b = bench(
        &cases,
        &format!("{LOOP_BENCH}limits: {{ concurrency: 3 }}\n"),
    );
    let d = b.path();
    let url = server.base_url();
    let args = ["--base-url", url.as_str(), "--model", "m", "--no-store"];
    let mut child = spawned(
        d,
        &[&["run", "bench.yaml", "--quiet", "--out", "out"], &args[..]].concat(),
    );
    // Killed while a loop has finished a step but not its last: its step is journaled and
    // its job has no record.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut found = mid_way(&d.join("out"));
    while found.is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
        found = mid_way(&d.join("out"));
    }
    child.kill().unwrap(); // SIGKILL: nothing runs after it
    child.wait().unwrap();
    let run = found.expect("a loop mid-way within a minute");
    let before = steps_so_far(&run);
    let steps: Vec<String> = before
        .iter()
        .filter(|l| l["event"] == "step")
        .map(|l| l["key"].as_str().unwrap().to_string())
        .collect();
    let sent: Vec<u32> = steps
        .iter()
        .map(|k| server.provider.attempts_for(k))
        .collect();
    assert!(sent.iter().all(|&n| n >= 1), "{steps:?} {sent:?}");

    let out = promptgauge(d)
        .args(["run", "--resume", run.to_str().unwrap(), "--quiet"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", said(&out));
    // No finished step was sent again: the simulator heard each key as often as before.
    let again: Vec<u32> = steps
        .iter()
        .map(|k| server.provider.attempts_for(k))
        .collect();
    assert_eq!(sent, again, "{steps:?}");
    // The journal a user reads holds one record per job, the steps none of its lines.
    let records: Vec<Value> = journal(&run);
    assert_eq!(records.len(), 24);
    assert!(records.iter().all(|r| r["case_id"].is_string()));
    let resumed: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["turns"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["resumed"] == true)
        })
        .collect();
    assert!(!resumed.is_empty(), "a loop took steps from the journal");
    for r in &records {
        // Every loop whole: both calls and their results, one turn a request, as if never
        // stopped; the usage summed over its turns.
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{r}");
        assert_eq!(steps[1]["result"], "bring an umbrella", "{r}");
        let turns = r["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3, "{r}");
        let summed: u64 = turns
            .iter()
            .map(|t| t["usage"]["prompt_tokens"].as_u64().unwrap())
            .sum();
        assert_eq!(r["usage"]["prompt_tokens"].as_u64().unwrap(), summed, "{r}");
    }
}

#[test]
fn with_the_cache_each_step_is_kept_and_a_second_run_sends_no_step() {
    let (_rt, server) = scripted_mock(vec![
        ("get_weather", serde_json::json!({"city": "Oslo"})),
        ("search", serde_json::json!({"q": "rain"})),
    ]);
    let w1 = LOOP_CASES.lines().next().unwrap();
    let b = bench(&format!("{w1}\n"), LOOP_BENCH);
    let d = b.path();
    let url = server.base_url();
    let mut seen: Vec<std::path::PathBuf> = Vec::new();
    let twice: Vec<Vec<Value>> = (0..2)
        .map(|_| {
            let out = promptgauge(d)
                .args(["run", "bench.yaml", "--quiet", "--no-store", "--cache"])
                .args(["--base-url", &url, "--model", "m", "--repeats", "2"])
                .output()
                .unwrap();
            assert!(out.status.code().is_some_and(|c| c < 2), "{}", said(&out));
            let run = run_dirs(&d.join("reports"))
                .into_iter()
                .find(|r| !seen.contains(r))
                .unwrap();
            seen.push(run.clone());
            journal(&run)
                .into_iter()
                .filter(|r| r["case_id"].is_string())
                .collect()
        })
        .collect();
    // Two repeats of a 3-request loop: 6 requests, once.
    assert_eq!(server.provider.stats().requests, 6);
    for r in &twice[1] {
        let turns = r["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3, "{r}");
        assert!(turns.iter().all(|t| t["cached"] == true), "{r}");
        assert_eq!(r["steps"].as_array().unwrap().len(), 2, "{r}");
        assert_eq!(r["output"], twice[0][0]["output"], "{r}");
    }
}

/// A Python with the `mcp` SDK (2.x): `$PROMPTGAUGE_MCP_PYTHON` (`.ci/run` installs one), else
/// `python3` when it has the SDK. In CI its absence is a failure, elsewhere a skip.
fn mcp_python() -> Option<String> {
    let python = std::env::var("PROMPTGAUGE_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_sdk = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if has_sdk {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no Python with the mcp SDK: .ci/run installs one and sets PROMPTGAUGE_MCP_PYTHON"
    );
    eprintln!("skipped: no Python with the mcp SDK (pip install mcp; see .ci/run)");
    None
}

/// A bench whose tools a real MCP server (tests/fixtures/mcp/weather_server.py, the
/// Python SDK) lists and answers.
const MCP_BENCH: &str = "name: agent
cases: cases.jsonl
variants: [v.yaml]
grade: { kind: exact }
mcp:
  - run: [PYTHON, weather_server.py]
    timeout: 30s
loop: { max_turns: 5 }
";

#[test]
fn a_real_mcp_server_lists_the_tools_and_answers_each_call_on_every_protocol() {
    let Some(python) = mcp_python() else { return };
    let (_rt, server) = scripted_mock(vec![
        ("get_weather", serde_json::json!({"city": "Oslo"})),
        ("search", serde_json::json!({"q": "snow"})),
        ("search", serde_json::json!({"q": "rain"})),
    ]);
    let case =
        r#"{"id": "w1", "vars": {"q": "Oslo, then advice?"}, "expected": "bring an umbrella"}"#;
    let b = bench(&format!("{case}\n"), &MCP_BENCH.replace("PYTHON", &python));
    let d = b.path();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/weather_server.py"),
        d.join("weather_server.py"),
    )
    .unwrap();
    let out = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert!(
        said(&out).contains("MCP server weather_server.py")
            && said(&out).contains("2 tools — get_weather, search"),
        "{}",
        said(&out)
    );
    for (protocol, city_type) in [
        (
            "openai-chat",
            "/tools/0/function/parameters/properties/city/type",
        ),
        (
            "openai-responses",
            "/tools/0/parameters/properties/city/type",
        ),
        (
            "anthropic-messages",
            "/tools/0/input_schema/properties/city/type",
        ),
    ] {
        let before = server.provider.bodies().len();
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
            .args(["--base-url", &server.base_url(), "--protocol", protocol])
            .env("OPENAI_API_KEY", "sk-never-for-a-tool")
            .output()
            .unwrap();
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        // The model was offered the tools as the server lists them, schema and all.
        let bodies = server.provider.bodies();
        assert_eq!(
            bodies[before].pointer(city_type).unwrap(),
            "string",
            "{protocol}"
        );
        let run = run_dirs(&d.join("reports")).pop().unwrap();
        std::fs::rename(&run, d.join(format!("seen-{protocol}"))).unwrap();
        let r = journal(&d.join(format!("seen-{protocol}")))
            .into_iter()
            .find(|r| r["case_id"].is_string())
            .unwrap();
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 3, "{r}");
        assert_eq!(steps[0]["result"], "3 °C, rain", "{r}");
        // The server's error went back to the model as an error, and the loop went on.
        assert_eq!(steps[1]["error"], true, "{r}");
        assert!(
            steps[1]["result"]
                .as_str()
                .unwrap()
                .contains("no results for snow"),
            "{r}"
        );
        assert_eq!(r["output"], "bring an umbrella", "{r}");
        assert_eq!(r["score"], 1.0, "{r}");
    }
    // The server got each call, with no API key in its environment, and is gone.
    let log = std::fs::read_to_string(d.join("calls.log")).unwrap();
    assert_eq!(log.lines().count(), 9, "{log}");
    assert!(
        log.lines().all(|l| l.contains(r#""saw_key": false"#)),
        "{log}"
    );
    // Each call carried its id in `_meta`, where the SDK hands it to the tool: one id a call.
    let ids: std::collections::BTreeSet<String> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["call_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(ids.len(), 9, "{log}");
    assert!(
        ids.iter()
            .all(|id| id.starts_with("pg-") && id.contains("-call0-")),
        "{log}"
    );
    let pids = std::fs::read_to_string(d.join("server.pid")).unwrap();
    assert_eq!(pids.lines().count(), 4, "check and three runs: {pids}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for pid in pids.lines() {
        // Killed when its run ended; gone once reaped.
        while Path::new(&format!("/proc/{pid}")).exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "server {pid} still runs"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[test]
fn an_mcp_server_that_does_not_start_is_said_with_its_stderr_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let case = r#"{"id": "w1", "vars": {"q": "?"}, "expected": "x"}"#;
    for (program, expected) in [
        (
            r#"[sh, -c, "echo 'ImportError: no module named mcp' >&2; exit 3"]"#,
            "ImportError: no module named mcp",
        ),
        ("[no-such-mcp-server-program]", "no-such-mcp-server-program"),
    ] {
        let bench_text = format!(
            "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\nmcp:\n  - run: {program}\n    timeout: 10s\n"
        );
        let b = bench(&format!("{case}\n"), &bench_text);
        let out = run(b.path(), &server.base_url(), "openai-chat");
        assert_eq!(out.status.code(), Some(2), "{}", said(&out));
        assert!(said(&out).contains("the MCP server"), "{}", said(&out));
        assert!(said(&out).contains(expected), "{}", said(&out));
        assert!(said(&out).contains("fix:"), "{}", said(&out));
    }
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
}

#[test]
fn arguments_that_do_not_match_the_tool_s_schema_are_given_back_and_the_loop_goes_on() {
    let (_rt, server) = scripted_mock(vec![
        ("get_weather", serde_json::json!({"city": 3})),
        ("search", serde_json::json!({"q": "rain"})),
    ]);
    let w1 = LOOP_CASES.lines().next().unwrap();
    let b = bench(&format!("{w1}\n"), LOOP_BENCH);
    let out = promptgauge(b.path())
        .args(["run", "bench.yaml", "--no-store", "--model", "m"])
        .args(["--base-url", &server.base_url()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    // Counted: in the summary, and said under the table.
    assert!(
        said(&out).contains(
            "Agent loops: v 3.0 requests and 2.0 tool calls a job, 1 given back as errors."
        ),
        "{}",
        said(&out)
    );
    let run = run_dirs(&b.path().join("reports")).pop().unwrap();
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        s["variants"][0]["loops"],
        serde_json::json!({"jobs": 1, "requests": 3, "calls": 2, "call_errors": 1})
    );
    let r = journal(&run)
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps[0]["error"], true, "{r}");
    assert!(
        steps[0]["result"]
            .as_str()
            .unwrap()
            .contains("the arguments of `get_weather` do not match its schema"),
        "{r}"
    );
    assert_eq!(r["output"], "bring an umbrella", "{r}");
    // The model read the refusal: it is in the next request, as the tool's result.
    let bodies = server.provider.bodies();
    assert!(
        bodies[1].to_string().contains("do not match its schema"),
        "{}",
        bodies[1]
    );
}

#[test]
fn a_loop_past_its_deadline_fails_with_that_cause_and_keeps_its_steps() {
    // Each request takes 150 ms: the third cannot end within 400 ms.
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: std::time::Duration::from_millis(150),
        ..scripted(vec![
            ("get_weather", serde_json::json!({"city": "Oslo"})),
            ("search", serde_json::json!({"q": "rain"})),
        ])
    });
    let w1 = LOOP_CASES.lines().next().unwrap();
    let limited = LOOP_BENCH.replace(
        "loop: { max_turns: 4, max_tool_calls: 6 }",
        "loop: { max_turns: 4, max_tool_calls: 6, deadline: 400ms }",
    );
    let b = bench(&format!("{w1}\n"), &limited);
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let done = run_dirs(&b.path().join("reports")).pop().unwrap();
    let r = journal(&done)
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(
        r["error"], "loop deadline reached (400ms, loop.deadline)",
        "{r}"
    );
    assert_eq!(r["steps"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(r["turns"].as_array().unwrap().len(), 2, "{r}");

    // A deadline that does not read is said at load.
    let bad = bench(
        &format!("{w1}\n"),
        &LOOP_BENCH.replace("max_tool_calls: 6 }", "max_tool_calls: 6, deadline: soon }"),
    );
    let out = run(bad.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("loop.deadline"), "{}", said(&out));
}

#[test]
fn the_mcp_example_compares_two_prompts_on_answer_and_trajectory() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp-agent");
    for name in ["promptgauge.yaml", "cases.jsonl", "library_server.py"] {
        std::fs::copy(example.join(name), d.join(name)).unwrap();
    }
    std::fs::create_dir(d.join("prompts")).unwrap();
    for name in ["terse.yaml", "procedure.yaml"] {
        std::fs::copy(
            example.join("prompts").join(name),
            d.join("prompts").join(name),
        )
        .unwrap();
    }
    let bench = std::fs::read_to_string(d.join("promptgauge.yaml")).unwrap();
    std::fs::write(
        d.join("promptgauge.yaml"),
        bench.replace("run: [python3,", &format!("run: [{python},")),
    )
    .unwrap();
    for protocol in ["openai-chat", "anthropic-messages"] {
        let out = promptgauge(d)
            .args(["run", "--no-store", "--quiet", "--protocol", protocol])
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{protocol}: {}",
            said(&out)
        );
        let run = run_dirs(&d.join("reports")).pop().unwrap();
        let s: Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap())
                .unwrap();
        std::fs::rename(&run, d.join(format!("seen-{protocol}"))).unwrap();
        assert_eq!(s["comparisons"].as_array().unwrap().len(), 1, "{s}");
        for v in s["variants"].as_array().unwrap() {
            // Every job searched the catalogue, then asked for the book: the server's
            // answers reached the model, and most answers are right.
            assert_eq!(v["loops"]["requests"], 36, "{v}");
            assert_eq!(v["loops"]["calls"], 24, "{v}");
            assert_eq!(v["loops"]["call_errors"], 0, "{v}");
            assert!(v["accuracy"].as_f64().unwrap() >= 0.5, "{v}");
        }
    }
}

#[test]
fn a_budget_holds_each_step_and_a_resume_with_more_goes_on_from_the_last_one() {
    let (_rt, server) = scripted_mock(vec![
        ("get_weather", serde_json::json!({"city": "Oslo"})),
        ("search", serde_json::json!({"q": "rain"})),
    ]);
    let w1 = LOOP_CASES.lines().next().unwrap();
    // A request may cost about $0.11 (max_tokens 100 and a short prompt at $1,000 a
    // million): the first step fits in $0.15, the second does not.
    let priced = format!(
        "{LOOP_BENCH}endpoint: {{ model: m }}\nprice: {{ input_per_mtok: 1000, output_per_mtok: 1000 }}\nparams: {{ max_tokens: 100 }}\n"
    );
    let b = bench(&format!("{w1}\n"), &priced);
    let d = b.path();
    let url = server.base_url();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
        .args(["--base-url", &url, "--budget", "0.15", "--run-to-budget"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    // The step it sent was paid for, though the loop has no record yet: the budget says so.
    assert!(
        said(&out).contains("$0.00800 of $0.150 spent"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, 1, "one step sent");
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let lines = journal(&run);
    assert!(lines.is_empty(), "no record yet: {lines:?}");
    assert_eq!(steps_so_far(&run).len(), 1);

    let out = promptgauge(d)
        .args([
            "run",
            "--resume",
            run.to_str().unwrap(),
            "--quiet",
            "--budget",
            "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    // The loop went on from its journaled step: two more requests, none twice.
    assert_eq!(server.provider.stats().requests, 3);
    let r = journal(&run)
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    assert_eq!(r["turns"][0]["resumed"], true, "{r}");
    assert_eq!(r["output"], "bring an umbrella", "{r}");
}

/// A bench of case w1 whose `slow` tool `script.sh` answers (a POSIX shell script), with
/// `extra` lines for the bench.
fn slow_tool_bench(script: &str, timeout: &str, extra: &str) -> tempfile::TempDir {
    let w1 = r#"{"id": "w1", "vars": {"q": "Advice?"}, "expected": "bring an umbrella"}"#;
    let b = bench(
        &format!("{w1}\n"),
        &format!(
            "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: exact }}\ntools:\n  - name: slow\n    run: [sh, script.sh]\n    timeout: {timeout}\n{extra}"
        ),
    );
    std::fs::write(b.path().join("script.sh"), script).unwrap();
    b
}

/// Whether the process whose pid the file `at` holds still runs (waits up to 10 s for it
/// to go).
fn still_runs(at: &Path) -> bool {
    alive(&std::fs::read_to_string(at).unwrap())
}

/// Whether the process `pid` still runs (waits up to 10 s for it to go).
pub(crate) fn alive(pid: &str) -> bool {
    let proc = format!("/proc/{}", pid.trim());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Path::new(&proc).exists() {
        let state = std::fs::read_to_string(format!("{proc}/stat")).unwrap_or_default();
        // A zombie is dead: only its parent has yet to reap it.
        if state.split_whitespace().nth(2) == Some("Z") || std::time::Instant::now() > deadline {
            return state.split_whitespace().nth(2) != Some("Z");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

#[test]
fn a_tool_s_leftovers_neither_hold_its_answer_nor_outlive_the_loop_s_deadline() {
    let (_rt, server) = scripted_mock(vec![("slow", serde_json::json!({}))]);
    // It answers at once, leaving a child that holds its stdout: the answer is taken when
    // it exits, and the child killed.
    let b = slow_tool_bench(
        "read -r call\nsleep 30 &\necho $! > left.pid\necho '{\"result\": \"bring an umbrella\"}'\n",
        "20s",
        "",
    );
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert!(out.status.success(), "{}", said(&out));
    let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    assert_eq!(r["steps"][0]["result"], "bring an umbrella", "{r}");
    assert!(
        !still_runs(&b.path().join("left.pid")),
        "its child outlived the call"
    );

    // A tool still working at the loop's deadline: its whole group goes with the loop.
    let b = slow_tool_bench(
        "read -r call\nsleep 30 &\necho $! > left.pid\nwait\n",
        "20s",
        "loop: { deadline: 500ms }\n",
    );
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let r = journal(&run_dirs(&b.path().join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    assert_eq!(
        r["error"], "loop deadline reached (500ms, loop.deadline)",
        "{r}"
    );
    assert!(
        !still_runs(&b.path().join("left.pid")),
        "the tool's child outlived the deadline"
    );
}

#[cfg(unix)]
#[test]
fn a_stopped_run_waits_for_no_tool() {
    let (_rt, server) = scripted_mock(vec![("slow", serde_json::json!({}))]);
    let b = slow_tool_bench(
        "read -r call\nsleep 60 &\necho $! > left.pid\nwait\n",
        "60s",
        "",
    );
    let d = b.path();
    let url = server.base_url();
    let started = std::time::Instant::now();
    let mut child = spawned(
        d,
        &[
            "run",
            "bench.yaml",
            "--quiet",
            "--no-store",
            "--grace",
            "200ms",
            "--model",
            "m",
            "--base-url",
            &url,
        ],
    );
    let deadline = started + std::time::Duration::from_secs(30);
    while !d.join("left.pid").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    // Stopped after its grace, not after the tool's 60 s.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{status:?}"
    );
    assert!(!status.success(), "{status:?}");
    assert!(
        !still_runs(&d.join("left.pid")),
        "the tool's child outlived the run"
    );
}

#[test]
fn an_mcp_server_that_dies_fails_its_jobs_with_its_status_and_last_words() {
    let Some(python) = mcp_python() else { return };
    let (_rt, server) = scripted_mock(vec![
        ("get_weather", serde_json::json!({"city": "Oslo"})),
        ("get_weather", serde_json::json!({"city": "Lima"})),
    ]);
    let case = r#"{"id": "w1", "vars": {"q": "?"}, "expected": "bring an umbrella"}"#;
    let b = bench(&format!("{case}\n"), &MCP_BENCH.replace("PYTHON", &python));
    let d = b.path();
    // The weather server, but the second call kills it after a last word on stderr.
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/weather_server.py"),
    )
    .unwrap();
    let dying = source.replace(
        "    log(\"get_weather\", {\"city\": city}, ctx)\n",
        "    log(\"get_weather\", {\"city\": city}, ctx)\n    if city == \"Lima\":\n        import sys\n        print(\"crashing now: out of umbrellas\", file=sys.stderr, flush=True)\n        os._exit(3)\n",
    );
    assert_ne!(dying, source);
    std::fs::write(d.join("weather_server.py"), dying).unwrap();
    let out = run(d, &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let r = journal(&run_dirs(&d.join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("the MCP server `weather_server.py` could not answer `get_weather`"),
        "{r}"
    );
    assert!(error.contains("crashing now: out of umbrellas"), "{r}");
    // Both calls are in the trajectory, the last with why it ended the loop.
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{r}");
    assert_eq!(steps[1]["error"], true, "{r}");
}

#[test]
fn a_trajectory_scorer_naming_a_tool_the_model_is_not_offered_is_said_at_load() {
    let (_rt, server) = start_mock(MockConfig::default());
    let w1 = LOOP_CASES.lines().next().unwrap();
    for (grade, expected) in [
        (
            "grade: { kind: tool_sequence, tools: [get_weathr] }",
            "a trajectory scorer names the tool `get_weathr`, which the model is not offered",
        ),
        (
            "grade: { kind: all, of: [{ kind: exact }, { kind: tool_args, tool: serch, args: {} }] }",
            "names the tool `serch`",
        ),
        (
            "grade: { kind: tool_sequence, tools: [] }",
            "a tool_sequence names no tool",
        ),
    ] {
        let b = bench(
            &format!("{w1}\n"),
            &LOOP_BENCH.replace("grade: { kind: exact }", grade),
        );
        let out = run(b.path(), &server.base_url(), "openai-chat");
        assert_eq!(out.status.code(), Some(2), "{grade}: {}", said(&out));
        assert!(said(&out).contains(expected), "{grade}: {}", said(&out));
        assert!(
            said(&out).contains("bench.yaml:4"),
            "{grade}: {}",
            said(&out)
        );
        assert!(
            said(&out).contains("fix: name tools the model is offered: get_weather, search"),
            "{}",
            said(&out)
        );
    }
    let b = bench(
        &format!("{w1}\n"),
        &LOOP_BENCH.replace("max_turns: 4", "max_turns: 0"),
    );
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("loop.max_turns is 0"), "{}", said(&out));
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
}
