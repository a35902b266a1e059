//! Tools that act on the world (docs/guide/tools.md, "Tools with side effects"): the
//! processes a loop starts end with promptgauge however it ends, and everything they start
//! with them; each call carries an id that is the same when a resume makes it again; a
//! call's input never waits on its output; a tool's schema, and an MCP server's listing,
//! cost what the limits allow; a loop that can make no call is refused.

use std::path::Path;
use std::time::{Duration, Instant};

use super::tools::{Mock, alive, bench, journal_so_far, run, said, scripted_mock};
use crate::common::*;
use serde_json::{Value, json};

const PROTOCOLS: [&str; 3] = ["openai-chat", "openai-responses", "anthropic-messages"];

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

/// The lines of `file` in `d` (none when it is not there).
fn lines(d: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(d.join(file))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
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

/// A tool that acts once per call: it notes the call's id and its pid in started.log,
/// starts a process in a session of its own (its pid in left.pids), waits until the test
/// writes `go` (or its folder is gone), then acts — a line in done.log — and answers.
const ACT: &str = r#"read -r call
echo "started $PROMPTGAUGE_CALL_ID $$" >> started.log
setsid sleep 73 &
echo $! >> left.pids
while [ ! -e go ] && [ -e act.sh ]; do sleep 0.01; done
echo "$PROMPTGAUGE_CALL_ID" >> done.log
echo '{"result": "bring an umbrella"}'
"#;

const ACT_BENCH: &str = "name: agent
cases: cases.jsonl
variants: [v.yaml]
grade: { kind: exact }
tools:
  - name: act
    run: [sh, act.sh]
    timeout: 60s
limits: { concurrency: 1 }
";

/// Runs the bench in `d` on `protocol`, kills it with SIGKILL while its first call waits,
/// and checks that the call did not act and everything it started is gone; then lets
/// calls act, resumes, and returns the id of the call that was killed.
fn kill_9_mid_call_then_resume(d: &Path, server: &Mock, protocol: &str) -> String {
    let url = server.1.base_url();
    let args = ["--base-url", url.as_str(), "--model", "m", "--no-store"];
    let mut child = spawned(
        d,
        &[
            &["run", "bench.yaml", "--quiet", "--out", "out"][..],
            &args[..],
            &["--protocol", protocol][..],
        ]
        .concat(),
    );
    wait_until("a call to start", || !lines(d, "started.log").is_empty());
    child.kill().unwrap(); // SIGKILL: nothing of promptgauge runs after it
    child.wait().unwrap();
    let started = lines(d, "started.log");
    let [_, killed_id, pid] = started[0].split(' ').collect::<Vec<_>>()[..] else {
        panic!("{started:?}")
    };
    // The tool, and what it started in a session of its own, ended with promptgauge.
    assert!(!alive(pid), "{protocol}: the tool outlived promptgauge");
    for left in lines(d, "left.pids") {
        assert!(
            !alive(&left),
            "{protocol}: what the tool started outlived promptgauge"
        );
    }
    // Were it still running, it would act now.
    std::fs::write(d.join("go"), "").unwrap();
    assert!(!alive(pid));
    assert!(
        lines(d, "done.log").is_empty(),
        "{protocol}: the killed call acted"
    );
    let run = run_dirs(&d.join("out")).pop().unwrap();
    let out = promptgauge(d)
        .args(["run", "--resume", run.to_str().unwrap(), "--quiet"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{protocol}: {}", said(&out));
    // The step in flight at the kill was sent again, and made the same call.
    let (step_key, _) = killed_id
        .rsplit_once("-call")
        .unwrap_or_else(|| panic!("{protocol}: a call id names its step: {killed_id}"));
    assert_eq!(server.1.provider.attempts_for(step_key), 2, "{protocol}");
    let records: Vec<Value> = journal_so_far(&run)
        .into_iter()
        .filter(|r| r["case_id"].is_string())
        .collect();
    assert!(
        records.iter().all(|r| r["score"] == 1.0),
        "{protocol}: {records:?}"
    );
    killed_id.to_string()
}

#[test]
fn a_tool_call_killed_with_promptgauge_acts_once_after_the_resume_under_the_same_id() {
    let server = scripted_mock(vec![("act", json!({"n": 1})), ("act", json!({"n": 2}))]);
    for protocol in PROTOCOLS {
        let b = bench(&cases(3), ACT_BENCH);
        let d = b.path();
        std::fs::write(d.join("act.sh"), ACT).unwrap();
        let killed = kill_9_mid_call_then_resume(d, &server, protocol);
        // Three loops of two calls: six acts, each call once, the killed one among them
        // under the id it had when it was killed.
        let done = lines(d, "done.log");
        assert_eq!(done.len(), 6, "{protocol}: {done:?}");
        let ids: std::collections::BTreeSet<&String> = done.iter().collect();
        assert_eq!(ids.len(), 6, "{protocol}: {done:?}");
        assert!(done.contains(&killed), "{protocol}: {killed} {done:?}");
        // Seven starts: the killed call started twice, acted once.
        assert_eq!(lines(d, "started.log").len(), 7, "{protocol}");
    }
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

#[test]
fn an_mcp_server_that_ignores_the_end_of_its_input_ends_with_a_killed_run() {
    let server = scripted_mock(vec![("act", json!({"n": 1})), ("act", json!({"n": 2}))]);
    let b = plain_mcp_bench(&cases(2), ", act, ignore-eof", "");
    let d = b.path();
    let killed = kill_9_mid_call_then_resume(d, &server, "openai-chat");
    let pids = lines(d, "server.pid");
    assert_eq!(pids.len(), 2, "the run's server and the resume's");
    assert!(!alive(&pids[0]), "the server outlived promptgauge");
    // Two loops of two calls, each acted once; the call killed mid-way acted after the
    // resume, under its id, passed in the request's `_meta`.
    let done = lines(d, "done.log");
    assert_eq!(done.len(), 4, "{done:?}");
    let ids: std::collections::BTreeSet<&String> = done.iter().collect();
    assert_eq!(ids.len(), 4, "{done:?}");
    assert!(done.contains(&killed), "{killed} {done:?}");
}

#[test]
fn what_a_tool_or_an_mcp_server_starts_in_a_session_of_its_own_ends_with_the_run() {
    let server = scripted_mock(vec![("leaves", json!({}))]);
    // The tool answers at once, leaving two processes outside its process group: one in a
    // session of its own, one whose parent (a shell) exited (neither holding its stdout).
    let b = bench(
        &cases(1),
        "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: { kind: exact }\ntools:\n  - name: leaves\n    run: [sh, leaves.sh]\n",
    );
    let d = b.path();
    std::fs::write(
        d.join("leaves.sh"),
        "read -r call\nsetsid sleep 74 >/dev/null &\necho $! >> left.pids\nsh -c 'setsid sleep 75 >/dev/null & echo $! >> left.pids'\necho '{\"result\": \"bring an umbrella\"}'\n",
    )
    .unwrap();
    let out = run(d, &server.1.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let left = lines(d, "left.pids");
    assert_eq!(left.len(), 2);
    for pid in &left {
        assert!(!alive(pid), "{pid}, started by the tool, outlived its call");
    }

    // An MCP server that starts the same two at its start: they end with the run.
    let server = scripted_mock(vec![]);
    let b = plain_mcp_bench(&cases(1), ", setsid", "");
    let d = b.path();
    let out = run(d, &server.1.base_url(), "openai-chat");
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", said(&out));
    let left = lines(d, "left.pids");
    assert_eq!(left.len(), 2);
    for pid in &left {
        assert!(
            !alive(pid),
            "{pid}, started by the MCP server, outlived the run"
        );
    }
    assert!(!alive(&lines(d, "server.pid")[0]));
}

#[test]
fn a_tool_that_answers_before_reading_a_call_of_a_mebibyte_is_not_held_up() {
    let server = scripted_mock(vec![("echo", json!({}))]);
    let blob = "x".repeat(1024 * 1024);
    let case = format!(
        "{{\"id\": \"w1\", \"vars\": {{\"q\": \"How long?\", \"blob\": \"{blob}\"}}, \"expected\": \"read 1048576 bytes\"}}\n"
    );
    let b = bench(
        &case,
        "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: { kind: exact }\ntools:\n  - name: echo\n    run: [python3, echo.py]\n    timeout: 10s\n",
    );
    let d = b.path();
    // 200 KB written before a byte of the call is read: more than a pipe holds.
    std::fs::write(
        d.join("echo.py"),
        "import json, sys\nsys.stdout.write(' ' * 200000)\nsys.stdout.flush()\ncall = json.loads(sys.stdin.readline())\nprint(json.dumps({'result': f\"read {len(call['vars']['blob'])} bytes\"}))\n",
    )
    .unwrap();
    let out = run(d, &server.1.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let r = journal(&run_dirs(&d.join("reports")).pop().unwrap())
        .into_iter()
        .find(|r| r["case_id"].is_string())
        .unwrap();
    assert_eq!(r["steps"][0]["result"], "read 1048576 bytes", "{r}");
    // The model was given the result.
    let last = server.1.provider.bodies().last().unwrap().to_string();
    assert!(last.contains("read 1048576 bytes"), "{last}");
    assert_eq!(r["score"], 1.0, "{r}");
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
    // The server keeps the bench's 20 s to start: Python's start alone can take 3 s on a
    // loaded machine, and the bound on pages ends an endless listing long before 20 s.
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
