//! Tools that act on the world (docs/guide/tools.md): a tool's schema, and an MCP
//! server's listing, cost what the limits allow; a loop that can make no call is refused.

use std::path::Path;
use std::time::{Duration, Instant};

use super::tools::{bench, run, said, scripted_mock};
use crate::common::*;
use serde_json::{Value, json};

/// `n` cases the scripted agent answers "bring an umbrella" to.
fn cases(n: usize) -> String {
    (1..=n)
        .map(|i| {
            format!(
                "{{\"id\": \"a{i}\", \"vars\": {{\"q\": \"Advice {i}?\"}}, \"expected\": \"bring an umbrella\"}}\n"
            )
        })
        .collect()
}

/// Waits (a minute at most) until `ready`.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The child's exit, if it comes within `secs`; killed otherwise.
fn exit_within(child: &mut std::process::Child, secs: u64) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

/// A bench whose tools the plain MCP server (tests/fixtures/mcp/plain_server.py) answers,
/// started with `modes`.
fn plain_mcp_bench(cases_text: &str, modes: &str, extra: &str) -> tempfile::TempDir {
    let b = bench(
        cases_text,
        &format!(
            "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: exact }}\nmcp:\n  - run: [python3, plain_server.py{modes}]\n    timeout: 20s\nlimits: {{ concurrency: 1 }}\n{extra}"
        ),
    );
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/plain_server.py"),
        b.path().join("plain_server.py"),
    )
    .unwrap();
    b
}

/// A JSON Schema of `levels` levels of `$ref`s, each naming the one below twice: checking
/// a value against it visits 2^levels schemas.
fn schema_bomb(levels: usize) -> Value {
    let mut defs = serde_json::Map::new();
    defs.insert("d0".into(), json!({"type": "string"}));
    for i in 1..=levels {
        let below = json!({"$ref": format!("#/$defs/d{}", i - 1)});
        defs.insert(format!("d{i}"), json!({"allOf": [below, below]}));
    }
    json!({"type": "object", "properties": {"x": {"$ref": format!("#/$defs/d{levels}")}}, "$defs": defs})
}

#[test]
fn a_tool_schema_whose_refs_expand_without_bound_is_refused_at_load_with_the_reason() {
    let (_rt, server) = scripted_mock(vec![("deep", json!({"x": "a"}))]);
    let b = bench(
        &cases(1),
        &format!(
            "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: exact }}\ntools:\n  - name: deep\n    default: fine\n    parameters: {}\n",
            schema_bomb(31)
        ),
    );
    let d = b.path();
    let started = Instant::now();
    let out = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("bench.yaml:5")
            && said(&out).contains("the parameters of `deep`")
            && said(&out).contains("expand"),
        "{}",
        said(&out)
    );
    let out = run(d, &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
    assert!(started.elapsed() < Duration::from_secs(30));

    // The same schema listed by an MCP server: the server is named, and nothing is sent.
    let b = plain_mcp_bench(&cases(1), ", bomb, 31", "");
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("the MCP server `plain_server.py`")
            && said(&out).contains("the parameters of `deep`")
            && said(&out).contains("expand"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
    // A schema of a few levels is fine.
    let b = plain_mcp_bench(&cases(1), ", bomb, 4", "");
    let out = promptgauge(b.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
}

/// A bench whose tool `tree`'s schema applies itself twice to its field `a`: accepted (its
/// refs are recursion), but checking arguments nested `depth` deep visits 2^depth schemas.
fn costly_check_bench(extra: &str) -> tempfile::TempDir {
    let schema = json!({"type": "object", "allOf": [
        {"properties": {"a": {"$ref": "#"}}},
        {"properties": {"a": {"$ref": "#"}}},
    ]});
    bench(
        &cases(1),
        &format!(
            "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: exact }}\ntools:\n  - name: tree\n    default: fine\n    parameters: {schema}\n{extra}"
        ),
    )
}

/// Arguments nested `depth` levels under `a`.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!({}), |inner, _| json!({"a": inner}))
}

#[test]
fn a_costly_argument_check_ends_at_the_loop_s_deadline_and_at_a_second_ctrl_c() {
    let (_rt, server) = scripted_mock(vec![("tree", nested(40))]);
    let b = costly_check_bench("loop: { deadline: 500ms }\n");
    let d = b.path();
    let url = server.base_url();
    let args = ["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"];
    let mut child = spawned(d, &[&args[..], &["--base-url", url.as_str()]].concat());
    let status = exit_within(&mut child, 60).expect("the run ended at its loop's deadline");
    assert_eq!(status.code(), Some(3));
    let r = journal(&run_dirs(&d.join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    assert_eq!(
        r["error"], "loop deadline reached (500ms, loop.deadline)",
        "{r}"
    );

    // Without a deadline, a second Ctrl-C ends the run at once.
    let b = costly_check_bench("");
    let d = b.path();
    let before = server.provider.stats().requests;
    let (mut child, heard) = spawned_heard(
        d,
        &[
            "run",
            "bench.yaml",
            "--no-store",
            "--model",
            "m",
            "--base-url",
            &url,
        ],
    );
    wait_until("the call's answer", || {
        server.provider.stats().requests > before
    });
    let interrupt = |child: &std::process::Child| {
        // SAFETY: kill(2) on the child this test started.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
    };
    interrupt(&child);
    heard.wait_for("interrupt again");
    interrupt(&child);
    let status = exit_within(&mut child, 60).expect("a second Ctrl-C ended the run");
    assert_eq!(status.code(), Some(130));
}

#[test]
fn an_mcp_server_whose_tool_listing_never_ends_is_refused_with_what_it_did() {
    let (_rt, server) = scripted_mock(vec![]);
    let b = plain_mcp_bench(&cases(1), ", endless", "");
    let d = b.path();
    std::fs::write(
        d.join("bench.yaml"),
        std::fs::read_to_string(d.join("bench.yaml"))
            .unwrap()
            .replace("timeout: 20s", "timeout: 3s"),
    )
    .unwrap();
    // (Its listing would go on until the server's 3 s to start are over.)
    let out = run(d, &server.base_url(), "openai-chat");
    let stderr = said(&out);
    let status = out.status;
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the MCP server `plain_server.py`")
            && stderr.contains("every page named a next one")
            && !stderr.contains("did not start within"),
        "{stderr}"
    );
    // A listing that names the same page again is said as such.
    let b = plain_mcp_bench(&cases(1), ", circle", "");
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("listed its tools in a circle: page 2 named as next a page it had named before (cursor `again`)"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
}

#[test]
fn a_loop_that_may_make_no_tool_call_is_refused_at_load() {
    let (_rt, server) = scripted_mock(vec![]);
    let b = bench(
        &cases(1),
        "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: { kind: exact }\ntools:\n  - name: search\n    default: no results\nloop: { max_tool_calls: 0 }\n",
    );
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("bench.yaml:8")
            && said(&out).contains("loop.max_tool_calls is 0")
            && said(&out).contains("fix: max_tool_calls: 16"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
}
