//! The real binary, end to end: against the built-in simulator, against a simulator this
//! test starts on port 0 (so it can see what the provider saw), and with bad input.

use std::path::Path;

use crate::common::*;
use promptgauge::mock::{Faults, MockConfig};
use promptgauge::report::Summary;
use serde_json::{Value, json};

#[test]
fn the_example_bench_runs_on_the_built_in_simulator() {
    let out = tempfile::tempdir().unwrap();
    let assert = promptgauge(&repo())
        .args(["run", "--limit", "12", "--out"])
        .arg(out.path())
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("SIMULATED PROVIDER"), "{stderr}");
    for name in [
        "plain",
        "step-by-step",
        "deep-breath",
        "tip",
        "95% CI",
        "SIMULATED",
    ] {
        assert!(stdout.contains(name), "{name} missing from:\n{stdout}");
    }
    let dirs = run_dirs(out.path());
    assert_eq!(dirs.len(), 1);
    let dir = &dirs[0];
    assert!(
        dir.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("routing-")
    );
    for f in [
        "results.jsonl",
        "summary.json",
        "summary.csv",
        "summary.md",
        "run.json",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let records = journal(dir);
    assert_eq!(records.len(), 48);
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary.run.provider.simulated);
    assert!(summary.complete);
    assert_eq!(summary.variants.len(), 4);
    // The summary agrees with the journal, variant by variant.
    for v in &summary.variants {
        let mine: Vec<&Value> = records
            .iter()
            .filter(|r| r["variant"] == v.name.as_str())
            .collect();
        let correct = mine.iter().filter(|r| r["score"] == 1.0).count() as u64;
        // One figure per job: the score (journals before it held `correct`, still read).
        assert!(mine.iter().all(|r| r.get("correct").is_none()));
        assert_eq!((v.n, v.correct), (mine.len() as u64, correct), "{}", v.name);
        assert!(
            v.ci_low.unwrap() <= v.accuracy.unwrap() && v.accuracy.unwrap() <= v.ci_high.unwrap()
        );
        assert!(v.cost_usd.unwrap() > 0.0);
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("SIMULATED PROVIDER"));
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5);
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["endpoint"]["simulated"], true);
    assert_eq!(run["bench"]["name"], "routing");
    assert!(run["finished_at"].is_string());
}

#[test]
fn a_run_against_a_given_url_journals_every_job_and_respects_concurrency() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: std::time::Duration::from_millis(20),
        ..MockConfig::default()
    });
    let dir = bench_dir("limits: { concurrency: 3 }\n");
    let assert = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &server.base_url(),
            "--model",
            "test-model",
        ])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout);
    assert!(!stdout.contains("SIMULATED"), "{stdout}");
    let stats = server.provider.stats();
    assert_eq!(stats.requests, 24);
    assert_eq!(stats.generations, 24);
    assert!(stats.max_in_flight <= 3, "{stats:?}");
    let body = &server.provider.bodies()[0];
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 100);
    let dirs = run_dirs(&dir.path().join("reports"));
    let records = journal(&dirs[0]);
    assert_eq!(records.len(), 24);
    let jobs: std::collections::HashSet<u64> =
        records.iter().map(|r| r["job"].as_u64().unwrap()).collect();
    assert_eq!(jobs.len(), 24, "every job once");
    for r in &records {
        assert_eq!(r["status"], "graded");
        assert!(r["extracted"].is_string(), "{r}");
        assert_eq!(r["attempts"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn failed_jobs_make_the_run_incomplete_and_are_not_graded() {
    let (_rt, server) = start_mock(MockConfig {
        faults: Faults {
            cut: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let dir = bench_dir("limits: { max_attempts: 2 }\n");
    let assert = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--limit",
            "3",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .assert()
        .code(3);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout);
    assert!(stdout.contains("INCOMPLETE"), "{stdout}");
    let records = journal(&run_dirs(&dir.path().join("reports"))[0]);
    assert_eq!(records.len(), 6);
    for r in &records {
        assert_eq!(r["status"], "failed");
        assert_eq!(r["score"], Value::Null);
        assert_eq!(r["output"], "");
        assert_eq!(r["attempts"].as_array().unwrap().len(), 2);
    }
    assert_eq!(server.provider.stats().generations, 0);
}

#[test]
fn answers_a_content_filter_withholds_are_counted_apart_never_graded_nor_failed() {
    let (_rt, server) = start_mock(MockConfig {
        faults: Faults {
            content_filter: 0.3,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let dir = bench_dir("");
    let assert = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--junit",
            "junit.xml",
        ])
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout);
    let run = &run_dirs(&dir.path().join("reports"))[0];
    let records = journal(run);
    let filtered: Vec<&Value> = records
        .iter()
        .filter(|r| r["status"] == "filtered")
        .collect();
    let seen = server.provider.stats().content_filters;
    assert!(
        seen > 0 && filtered.len() as u64 == seen,
        "{seen} filtered by the server"
    );
    for r in &filtered {
        assert_eq!(
            (r["score"].clone(), r["outcome"].as_str()),
            (Value::Null, Some("filtered"))
        );
        assert_eq!(r["attempts"].as_array().unwrap().len(), 1, "never retried");
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["complete"], true);
    assert_eq!(summary["jobs_failed"], 0);
    let per_variant: u64 = summary["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["filtered"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(per_variant, seen);
    for v in summary["variants"].as_array().unwrap() {
        let f = v["filtered"].as_u64().unwrap_or(0);
        assert_eq!(
            v["n"].as_u64().unwrap() + f,
            v["jobs"].as_u64().unwrap(),
            "{v}"
        );
    }
    // Only cases both variants answered are paired.
    let filtered_cases: std::collections::HashSet<&str> = filtered
        .iter()
        .map(|r| r["case_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        summary["comparisons"][0]["cases"].as_u64().unwrap(),
        12 - filtered_cases.len() as u64
    );
    assert!(
        stdout.contains(&format!(
            "{seen} answers were withheld by the provider's content filter"
        )),
        "{stdout}"
    );
    // JUnit: skipped test cases, counted, never failures or errors.
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    assert!(
        junit.contains(&format!("errors=\"0\" skipped=\"{seen}\">")),
        "{junit}"
    );
    assert_eq!(junit.matches("<skipped message=").count() as u64, seen);
}

#[test]
fn a_scorer_that_finds_nothing_in_most_answers_says_so_with_an_example() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The model answers sums with a number; the cases (as a bad import might) read an
    // option letter.
    let lines: String = (1..=10)
        .map(|i| format!("{{\"id\": \"c{i}\", \"vars\": {{\"question\": \"What is {i} + {i}?\"}}, \"expected\": \"B\"}}\n"))
        .collect();
    std::fs::write(d.join("cases.jsonl"), lines).unwrap();
    std::fs::write(d.join("plain.txt"), "{{ question }}").unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        "name: letters\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: { kind: choice }\n",
    )
    .unwrap();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", "mock", "--no-store"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("plain: the scorer found no option letter in 10 of 10 answers, e.g. \""),
        "{stdout}"
    );
    let run = &run_dirs(&d.join("reports"))[0];
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let found = &summary["variants"][0]["nothing_found"];
    assert_eq!(found["answers"], 10);
    assert_eq!(found["looked_for"], "an option letter");
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("found no option letter"), "{md}");
    for r in journal(run) {
        assert_eq!(r["not_found"], "an option letter");
    }
}

#[test]
fn a_refused_key_stops_the_run_with_exit_4_and_never_prints_the_key() {
    // A server whose model list is open (some proxies): the first job finds the refusal.
    let (_rt, server) = start_mock(MockConfig {
        api_key: Some("the-right-key".into()),
        open_models: true,
        ..MockConfig::default()
    });
    let dir = bench_dir("endpoint: { api_key_env: BENCH_KEY }\nlimits: { concurrency: 2 }\n");
    let assert = promptgauge(dir.path())
        .env("BENCH_KEY", "sk-planted-SECRET-1234")
        .args([
            "run",
            "bench.yaml",
            "--verbose",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .assert()
        .code(4);
    let out = assert.get_output();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("$BENCH_KEY"), "{stderr}");
    assert!(
        stderr.contains("→ http_error HTTP 401"),
        "verbose logs each attempt: {stderr}"
    );
    assert!(
        server.provider.stats().requests <= 2,
        "{:?}",
        server.provider.stats()
    );
    let mut everything = String::from_utf8_lossy(&out.stdout).to_string() + &stderr;
    for path in run_dirs(&run_dirs(&dir.path().join("reports"))[0]) {
        everything.push_str(&std::fs::read_to_string(path).unwrap());
    }
    assert!(!everything.contains("SECRET"), "the key leaked");

    // A server that wants the key for its model list too (OpenAI's): the preflight finds
    // the refusal, and nothing is sent.
    let (_rt2, strict) = start_mock(MockConfig {
        api_key: Some("the-right-key".into()),
        ..MockConfig::default()
    });
    let out = promptgauge(dir.path())
        .env("BENCH_KEY", "sk-planted-SECRET-1234")
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &strict.base_url(),
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("refused the API key") && stderr.contains("$BENCH_KEY"),
        "{stderr}"
    );
    assert!(!stderr.contains("SECRET"), "{stderr}");
    assert_eq!(strict.provider.stats().requests, 0);
}

#[test]
fn check_validates_and_sends_nothing() {
    // The bench's price is model m's.
    let dir = bench_dir("endpoint: { model: m }\n");
    // Pointed at a port where nothing listens: check must not even try it.
    let out = promptgauge(dir.path())
        .args([
            "check",
            "bench.yaml",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("12 cases × 2 variants × 1 repeat = 24 jobs"),
        "{text}"
    );
    assert!(text.contains("estimated cost"), "{text}");
    assert!(!dir.path().join("reports").exists());
}

/// Runs a broken bench and returns stderr; asserts exit 2.
fn broken(setup: impl FnOnce(&Path)) -> String {
    let dir = bench_dir("");
    setup(dir.path());
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(
        !dir.path().join("reports").exists(),
        "nothing is written for bad input"
    );
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn bad_input_exits_2_naming_file_line_and_fix() {
    let e = broken(|d| {
        let b = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
        std::fs::write(d.join("bench.yaml"), b + "limits: { concurency: 4 }\n").unwrap();
    });
    assert!(
        e.contains("bench.yaml:7") && e.contains("did you mean `concurrency`"),
        "{e}"
    );

    let e = broken(|d| {
        let mut c = std::fs::read_to_string(d.join("cases.jsonl")).unwrap();
        c = c.replacen("\"question\"", "\"q\"", 1);
        std::fs::write(d.join("cases.jsonl"), c).unwrap();
    });
    assert!(
        e.contains("cases.jsonl:1") && e.contains("no variable `question`"),
        "{e}"
    );

    let e = broken(|d| std::fs::write(d.join("cases.jsonl"), "").unwrap());
    assert!(e.contains("cases.jsonl") && e.contains("no cases"), "{e}");

    let e = broken(|d| {
        let c = std::fs::read_to_string(d.join("cases.jsonl")).unwrap();
        std::fs::write(d.join("cases.jsonl"), c.replace("add-05", "add-04")).unwrap();
    });
    assert!(
        e.contains("cases.jsonl:5")
            && e.contains("duplicate case id `add-04`")
            && e.contains("cases.jsonl:4"),
        "{e}"
    );

    let e = broken(|d| {
        std::fs::write(
            d.join("careful.yaml"),
            "name: careful\nmessages:\n  - role: user\n   content: x\n",
        )
        .unwrap()
    });
    assert!(e.contains("careful.yaml:"), "{e}");

    let e = broken(|d| std::fs::write(d.join("plain.txt"), "{{ question ").unwrap());
    assert!(
        e.contains("plain.txt:1") && e.contains("syntax error"),
        "{e}"
    );
}

#[test]
fn bad_flags_exit_2() {
    let dir = bench_dir("");
    let out = promptgauge(dir.path())
        .args(["run", "bench.yaml", "--variants", "plain,nope"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("`nope`") && e.contains("known variants: plain, careful"),
        "{e}"
    );
    promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            "localhost:8000/v1",
            "--model",
            "m",
        ])
        .assert()
        .code(2);
    promptgauge(dir.path())
        .args(["run", "missing.yaml"])
        .assert()
        .code(2);
    let out = promptgauge(dir.path())
        .args(["run", "bench.yaml", "--base-url", "http://127.0.0.1:9/v1"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--model"));
}

#[test]
fn help_teaches() {
    let out = promptgauge(&repo())
        .arg("--help")
        .assert()
        .success()
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stdout);
    for s in ["run", "check", "mock", "Exit codes", "PROMPTGAUGE_BASE_URL"] {
        assert!(text.contains(s), "{s}");
    }
}

#[test]
fn missing_usage_is_estimated_and_marked() {
    let (_rt, server) = start_mock(MockConfig {
        usage: promptgauge::mock::UsageMode::None,
        ..MockConfig::default()
    });
    let dir = bench_dir("");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--limit",
            "2",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("token counts are estimates"), "{stdout}");
    let run = &run_dirs(&dir.path().join("reports"))[0];
    for r in journal(run) {
        assert_eq!(r["usage"]["estimated"], true);
        assert!(r["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    }
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert!(summary.variants.iter().all(|v| v.tokens.estimated));
}

#[test]
fn the_mock_command_serves_and_checks_keys() {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .args(["mock", "--port", "0", "--api-key", "k1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.split_whitespace().last().unwrap().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"),
        "{line}"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (bad, good) = rt.block_on(async {
        let http = reqwest::Client::new();
        let body =
            r#"{"model":"m","messages":[{"role":"user","content":"Echo: hi"}],"stream":true}"#;
        let send = |key: &'static str| {
            http.post(format!("{url}/chat/completions"))
                .header("content-type", "application/json")
                .header("authorization", format!("Bearer {key}"))
                .body(body)
                .send()
        };
        let bad = send("nope").await.unwrap().status().as_u16();
        let good = send("k1").await.unwrap().text().await.unwrap();
        (bad, good)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(bad, 401);
    assert!(
        good.contains(r#""content":"hi""#) && good.contains("[DONE]"),
        "{good}"
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_dispatch_writes_reports_and_exits_130() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: std::time::Duration::from_millis(100),
        ..MockConfig::default()
    });
    let dir = bench_dir("limits: { concurrency: 1 }\n");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .current_dir(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the run is under way (its first job journaled), then interrupt it.
    let reports = dir.path().join("reports");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let started = run_dirs(&reports)
            .first()
            .and_then(|d| std::fs::read_to_string(d.join("results.jsonl")).ok())
            .is_some_and(|j| !j.is_empty());
        if started {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let run = &run_dirs(&reports)[0];
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert!(!summary.complete);
    assert_eq!(
        summary.run.stopped,
        Some(promptgauge::runner::record::StopReason::Interrupted)
    );
    let finished = journal(run).len();
    assert!((1..24).contains(&finished), "{finished}");
    assert_eq!(summary.jobs_finished, finished);
}

#[test]
fn the_api_key_never_appears_in_any_byte_written() {
    const KEY: &str = "sk-PLANTED-7f3a9c41e8-SECRET";
    let (_rt, server) = start_mock(MockConfig {
        api_key: Some(KEY.into()),
        faults: Faults {
            cut: 1.0,
            rate_5xx: 0.0,
            ..Faults::default()
        },
        fault_attempts: Some(1),
        ..MockConfig::default()
    });
    let dir = bench_dir("endpoint: { api_key_env: PLANTED_KEY }\n");
    let out = promptgauge(dir.path())
        .env("PLANTED_KEY", KEY)
        .args([
            "run",
            "bench.yaml",
            "--verbose",
            "--limit",
            "3",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    assert_eq!(
        server.provider.stats().status_401,
        0,
        "the key was sent and accepted"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("authorization: [redacted]"),
        "verbose shows the header, redacted: {stderr}"
    );
    let mut written: Vec<(String, Vec<u8>)> = vec![
        ("stdout".into(), out.stdout.clone()),
        ("stderr".into(), out.stderr.clone()),
    ];
    let mut stack = vec![dir.path().join("reports")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            written.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
    }
    assert!(written.len() >= 7);
    for (name, bytes) in &written {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains("7f3a9c41e8"), "the key leaked into {name}");
    }
}

/// A raw HTTP server that answers the n-th request with `replies[n]` (the last repeats),
/// where `{AUTH}` is replaced by the Authorization header it received (`{AUTH_U}` by the
/// same with every character as a JSON `\uXXXX` escape): a server that echoes
/// credentials back, as some proxies and error pages do.
fn echo_server(replies: Vec<(&'static str, &'static str, String)>) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut auth, mut length) = (String::new(), 0usize);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if lower.starts_with("authorization:") {
                    auth = line["authorization:".len()..].trim().to_string();
                }
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (status, content_type, body) = &replies[n.min(replies.len() - 1)];
            let body = body
                .replace("{AUTH_U}", &unicode_escaped(&auth))
                .replace("{AUTH}", &auth);
            let reply = http(status, content_type, &body);
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    format!("http://{addr}/v1")
}

/// Every character as a JSON `\uXXXX` escape: what a JSON encoder that escapes
/// everything sends, and what a scrubber looking for the plain text would miss.
fn unicode_escaped(text: &str) -> String {
    text.encode_utf16().map(|u| format!("\\u{u:04x}")).collect()
}

fn http(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Every byte a run wrote: stdout, stderr and every file under `root`.
fn everything_written(out: &std::process::Output, root: &Path) -> Vec<(String, String)> {
    let mut written = vec![
        (
            "stdout".to_string(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ),
        (
            "stderr".to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
    ];
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if p.exists() {
            written.push((
                p.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned(),
            ));
        }
    }
    written
}

#[test]
fn a_key_the_server_echoes_back_is_scrubbed_from_every_byte_written() {
    const KEY: &str = "sk-ECHOED-5be0c2d7a1-SECRET";
    let sse =
        |events: &[&str]| -> String { events.iter().map(|e| format!("data: {e}\n\n")).collect() };
    let url = echo_server(vec![
        (
            "500 Internal Server Error",
            "text/plain",
            "upstream refused {AUTH}".into(),
        ),
        (
            "200 OK",
            "text/event-stream",
            sse(&[r#"{"error":{"message":"bad credentials: {AUTH}"}}"#]),
        ),
        (
            "200 OK",
            "text/event-stream",
            sse(&[
                r#"{"model":"{AUTH}","choices":[{"index":0,"delta":{"content":"4 ({AUTH})"},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ]),
        ),
        (
            "402 Payment Required",
            "application/json",
            r#"{"error":{"message":"no credit left for {AUTH}"}}"#.into(),
        ),
    ]);
    let dir = bench_dir("endpoint: { api_key_env: PLANTED_KEY }\nlimits: { concurrency: 1 }\n");
    let out = promptgauge(dir.path())
        .env("PLANTED_KEY", KEY)
        .args([
            "run",
            "bench.yaml",
            "--verbose",
            "--limit",
            "2",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The first job needed three attempts and was graded; the second ran out of credit.
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let journal =
        std::fs::read_to_string(run_dirs(&dir.path().join("reports"))[0].join("results.jsonl"))
            .unwrap();
    assert!(journal.contains("Bearer [redacted]"), "{journal}");
    let written = everything_written(&out, &dir.path().join("reports"));
    assert!(written.len() >= 7);
    for (name, text) in &written {
        assert!(
            !text.contains("5be0c2d7a1"),
            "the echoed key leaked into {name}"
        );
    }
}

#[test]
fn terminal_escapes_a_server_writes_are_shown_never_obeyed() {
    // An OSC 52 clipboard write, a window title, a clear screen, a carriage return that
    // would overwrite the line with "all good", a C1 CSI and a right-to-left override.
    const HOSTILE: &str = "upstream \u{1b}]52;c;cHduZWQ=\u{7}\u{1b}]0;owned\u{7}\u{1b}[2J\rall good \u{9b}31m \u{202e}evil \u{200f}\u{61c}\u{2028}marks [click](https://evil.example) <img src=x> @octocat";
    let url = echo_server(vec![
        ("500 Internal Server Error", "text/plain", HOSTILE.into()),
        ("400 Bad Request", "text/plain", HOSTILE.into()),
    ]);
    let dir = bench_dir("limits: { concurrency: 1, max_attempts: 2 }\n");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--verbose",
            "--limit",
            "6",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        for c in [
            '\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{202e}', '\u{200f}', '\u{61c}', '\u{2028}',
        ] {
            assert!(
                !text.contains(c),
                "{name} holds U+{:04X}:\n{text}",
                c as u32
            );
        }
    }
    // Shown, not dropped, in the stopped-early line, "why jobs failed" and --verbose: the
    // reader sees that the server tried.
    assert!(stderr.contains("\\u{1b}]52;c;cHduZWQ="), "{stderr}");
    assert!(stdout.contains("Why jobs failed"), "{stdout}");
    assert!(stdout.contains("\\u{d}all good"), "{stdout}");
    assert!(stdout.contains("The run stopped early"), "{stdout}");
    // summary.md (a pull request comment) shows it as text: no link, image or mention.
    let md = std::fs::read_to_string(run_dirs(&dir.path().join("reports"))[0].join("summary.md"))
        .unwrap();
    assert!(md.contains("Why jobs failed"), "{md}");
    for markup in ["[click](", "<img", "@octocat", "\u{1b}"] {
        assert!(!md.contains(markup), "{markup} in summary.md:\n{md}");
    }
    // The journal keeps what the server said (it is data, escaped by JSON).
    let journal =
        std::fs::read_to_string(run_dirs(&dir.path().join("reports"))[0].join("results.jsonl"))
            .unwrap();
    assert!(journal.contains("all good"), "{journal}");
}

#[test]
fn basic_credentials_echoed_plain_or_escaped_are_scrubbed_from_every_byte_written() {
    const PASSWORD: &str = "pw-81d2e6a9c3";
    let sse =
        |events: &[&str]| -> String { events.iter().map(|e| format!("data: {e}\n\n")).collect() };
    let url = echo_server(vec![
        (
            "500 Internal Server Error",
            "text/plain",
            "upstream refused {AUTH}".into(),
        ),
        (
            "200 OK",
            "text/event-stream",
            sse(&[r#"{"error":{"message":"bad credentials: {AUTH_U}"}}"#]),
        ),
        (
            "200 OK",
            "text/event-stream",
            sse(&[
                r#"{"model":"{AUTH_U}","choices":[{"index":0,"delta":{"content":"4 ({AUTH_U})"},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ]),
        ),
        (
            "402 Payment Required",
            "application/json",
            r#"{"error":{"message":"no credit left for {AUTH_U}"}}"#.into(),
        ),
    ])
    .replace("http://", &format!("http://bob:{PASSWORD}@"));
    let dir = bench_dir("limits: { concurrency: 1 }\n");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--verbose",
            "--limit",
            "2",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let journal =
        std::fs::read_to_string(run_dirs(&dir.path().join("reports"))[0].join("results.jsonl"))
            .unwrap();
    // The server did echo something, and it was replaced.
    assert!(journal.contains("[redacted]"), "{journal}");
    // `bob:pw-81d2e6a9c3` as a Basic authorization.
    let basic = "Ym9iOnB3LTgxZDJlNmE5YzM=";
    let escaped = unicode_escaped(PASSWORD);
    let written = everything_written(&out, &dir.path().join("reports"));
    assert!(written.len() >= 7);
    for (name, text) in &written {
        for leak in [PASSWORD, basic, &basic[..16], &escaped] {
            assert!(!text.contains(leak), "{leak} leaked into {name}:\n{text}");
        }
    }
}

#[test]
fn credentials_in_the_base_url_are_shown_and_stored_nowhere() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server
        .base_url()
        .replace("http://", "http://alice:pw-4c9e1f7b2d@");
    let dir = bench_dir("");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--verbose",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        server.provider.stats().generations,
        24,
        "the URL still works"
    );
    let written = everything_written(&out, &dir.path().join("reports"));
    for (name, text) in &written {
        assert!(
            !text.contains("pw-4c9e1f7b2d"),
            "the password leaked into {name}"
        );
    }
    let run = &run_dirs(&dir.path().join("reports"))[0];
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert!(
        record["endpoint"]["base_url"]
            .as_str()
            .unwrap()
            .starts_with("http://[redacted]@127.0.0.1:"),
        "{record}"
    );
}

#[test]
fn a_key_with_a_trailing_newline_is_trimmed_and_one_with_a_space_is_refused() {
    let (_rt, server) = start_mock(MockConfig {
        api_key: Some("sk-test-newline-1234".into()),
        ..MockConfig::default()
    });
    let dir = bench_dir("");
    let url = server.base_url();
    let out = promptgauge(dir.path())
        .env("OPENAI_API_KEY", "sk-test-newline-1234\n")
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: $OPENAI_API_KEY has leading or trailing whitespace"),
        "{stderr}"
    );
    assert_eq!(server.provider.stats().status_401, 0);

    let sent = server.provider.stats().requests;
    let out = promptgauge(dir.path())
        .env("OPENAI_API_KEY", "sk-test new")
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("$OPENAI_API_KEY contains a space"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-test new"), "{stderr}");
    assert_eq!(server.provider.stats().requests, sent, "nothing sent");
}

#[test]
fn an_unwritable_report_path_is_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let dir = bench_dir("");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--junit",
            "no/such/folder/junit.xml",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no/such/folder/junit.xml") && stderr.contains("fix:"),
        "{stderr}"
    );
    assert_eq!(server.provider.stats().requests, 0);
    assert!(!dir.path().join("reports").exists());
}

/// A server whose `GET /models` sends its headers and then a body that never ends — fast
/// (`trickle` false: 64 KiB at a time) or one byte every 50 ms — and that answers every POST
/// with the streamed answer `4`.
fn endless_models_server(trickle: bool) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                if first.starts_with("GET") {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"data\": [",
                    );
                    let chunk = vec![b' '; if trickle { 1 } else { 64 << 10 }];
                    while stream.write_all(&chunk).is_ok() {
                        if trickle {
                            std::thread::sleep(std::time::Duration::from_millis(50));
                        }
                    }
                } else {
                    let event = r#"{"choices":[{"index":0,"delta":{"content":"4"},"finish_reason":"stop"}]}"#;
                    let _ = stream.write_all(
                        http(
                            "200 OK",
                            "text/event-stream",
                            &format!("data: {event}\n\ndata: [DONE]\n\n"),
                        )
                        .as_bytes(),
                    );
                }
            });
        }
    });
    format!("http://{addr}/v1")
}

#[test]
fn the_preflight_reads_a_bounded_model_list_within_a_deadline() {
    // A model list that never ends, fast: cut at 4 MiB, the run goes on.
    let url = endless_models_server(false);
    let dir = bench_dir("");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--limit",
            "1",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("model list is longer than 4 MiB"),
        "{stderr}"
    );
    assert_eq!(
        journal(&run_dirs(&dir.path().join("reports"))[0]).len(),
        2,
        "{stderr}"
    );
    // One that trickles: given up at the bench's first-token timeout (here 300 ms).
    let url = endless_models_server(true);
    let dir = bench_dir("limits: { first_token_timeout: 300ms }\n");
    let started = std::time::Instant::now();
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--limit",
            "1",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("model list did not arrive within 300ms"),
        "{stderr}"
    );
    assert_eq!(
        journal(&run_dirs(&dir.path().join("reports"))[0]).len(),
        2,
        "{stderr}"
    );
    // Not a timing assertion: the 15 s the preflight once waited would be a hang here.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn a_dead_replica_among_live_ones_is_benched_with_a_warning_not_fatal() {
    let (_rt, server) = start_mock(MockConfig::default());
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}/v1", l.local_addr().unwrap().port())
    };
    let dir = bench_dir("");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &server.base_url(),
            "--base-url",
            &dead,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("warning: replica {dead} refused the connection"))
            && stderr.contains("benched"),
        "{stderr}"
    );
    assert_eq!(
        server.provider.stats().generations,
        24,
        "the live one answered all"
    );
    let journal =
        std::fs::read_to_string(run_dirs(&dir.path().join("reports"))[0].join("results.jsonl"))
            .unwrap();
    assert!(
        journal.contains("no answer to the preflight"),
        "journaled as a pool event"
    );
    // Every replica dead: still exit 4, nothing sent.
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &dead,
            "--base-url",
            &dead,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn a_dead_server_or_a_wrong_model_is_said_at_once() {
    // Nothing listens on this port: the preflight says so, exit 4, no run folder.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = bench_dir("");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &format!("http://127.0.0.1:{port}/v1"),
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("refused the connection") && stderr.contains("nothing was sent"),
        "{stderr}"
    );
    assert!(!dir.path().join("reports").exists());

    // A server that serves one model, asked for another: the preflight names the models
    // it lists, and the first jobs' identical 404s stop the run with the cause and a hint.
    let (_rt, server) = start_mock(MockConfig {
        strict_model: true,
        ..MockConfig::default()
    });
    let dir = arithmetic_bench(60, 2, "limits: { concurrency: 4 }\n");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &server.base_url(),
            "--model",
            "tiny",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("lists the models mock-model, not `tiny`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the first 4 jobs all failed the same way"),
        "{stderr}"
    );
    assert!(stderr.contains("GET <base URL>/models"), "{stderr}");
    // Only the first jobs (and those the workers took before the stop) were sent, not all
    // 120; how many more depends on scheduling, not on the rule.
    let sent = server.provider.stats().requests;
    assert!(sent <= 24, "{sent} requests");
    assert!(
        stdout.contains("Why jobs failed:") && stdout.contains("HTTP 404"),
        "{stdout}"
    );
    let run = &run_dirs(&dir.path().join("reports"))[0];
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["failures"][0]["status"], 404);
    assert!(
        summary["failures"][0]["hint"]
            .as_str()
            .unwrap()
            .contains("/models")
    );
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(md.contains("## Why jobs failed"), "{md}");

    // A base URL without its /v1: no models list and no chat/completions there, so the
    // preflight stops the run before any job.
    let (_rt2, plain) = start_mock(MockConfig::default());
    let bare = plain.base_url().trim_end_matches("/v1").to_string();
    let dir = arithmetic_bench(30, 2, "limits: { concurrency: 3 }\n");
    let out = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &bare,
            "--model",
            "mock-model",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("chat/completions answered 404 to an empty request for `mock-model` (and")
            && stderr.contains("probably lacks /v1")
            && stderr.contains("Nothing was sent"),
        "{stderr}"
    );
    assert_eq!(plain.provider.stats().requests, 0, "no job was sent");
}

#[test]
fn init_writes_a_bench_of_each_task_that_runs_at_once_on_the_simulator() {
    for task in ["choice", "number", "json", "free", "vision", "agent"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("my-bench");
        let out = promptgauge(dir.path())
            .args(["init", d.to_str().unwrap(), "--task", task])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{task}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("promptgauge run"));
        let bench = std::fs::read_to_string(d.join("promptgauge.yaml")).unwrap();
        assert!(
            bench.contains("name: my-bench") && bench.contains("# "),
            "{bench}"
        );
        // No made-up model name a real server would refuse: a judged bench says how to
        // pin the judge instead.
        assert!(!bench.contains("model: judge-model"), "{bench}");
        if task == "free" {
            assert!(
                bench.contains("--judge-base-url URL --judge-model NAME"),
                "{bench}"
            );
        }
        let out = promptgauge(&d).args(["run", "--quiet"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{task}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The simulator answered in the task's shape: some answers right, none "I don't know".
        let run = &run_dirs(&d.join("reports"))[0];
        let journal = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
        assert!(!journal.contains("I don't know"), "{task}");
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap())
                .unwrap();
        let headline = |v: &serde_json::Value| v["accuracy"].as_f64().or(v["mean_score"].as_f64());
        assert!(
            s["variants"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| v["name"] != "no-image")
                .all(|v| headline(v).unwrap() > 0.0),
            "{task}: {s}"
        );
        if task == "agent" {
            // Each job a loop: the order looked up, the carrier asked (both scripted), then
            // how it delivers, which tools/carrier_info.sh answers.
            for line in journal.lines() {
                let r: serde_json::Value = serde_json::from_str(line).unwrap();
                if r["case_id"].is_string() {
                    assert_eq!(r["steps"][0]["tool"], "lookup_order", "{r}");
                    assert_eq!(r["steps"][1]["tool"], "shipping_eta", "{r}");
                    assert_eq!(r["steps"][2]["tool"], "carrier_info", "{r}");
                    assert!(
                        r["steps"][2]["result"]
                            .as_str()
                            .unwrap()
                            .starts_with("DHL delivers"),
                        "{r}"
                    );
                }
            }
        }
        if task == "vision" {
            // Ten pictures, sent by the two variants that place them, never by no-image.
            assert_eq!(std::fs::read_dir(d.join("images")).unwrap().count(), 10);
            for line in journal.lines() {
                let r: serde_json::Value = serde_json::from_str(line).unwrap();
                if r["case_id"].is_string() {
                    assert_eq!(r["files"].is_array(), r["variant"] != "no-image", "{r}");
                }
            }
        }
        // Never over an existing bench.
        let again = promptgauge(dir.path())
            .args(["init", d.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(again.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&again.stderr).contains("never overwrites"));
    }
    // Nor through a symlink that points nowhere (a write would create its target).
    #[cfg(unix)]
    {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("b");
        std::fs::create_dir(&d).unwrap();
        let target = dir.path().join("elsewhere.txt");
        std::os::unix::fs::symlink(&target, d.join("promptgauge.yaml")).unwrap();
        let out = promptgauge(dir.path())
            .args(["init", d.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("never overwrites"));
        assert!(!target.exists(), "nothing written through the symlink");
    }
}

/// As an unprivileged user (uid 10001, the Docker image's) in a folder owned by another —
/// the image's user in a folder mounted from the host — and as that folder's owner, as
/// `docker run --user "$(id -u):$(id -g)"` makes it. `None` where this machine cannot
/// switch users (not root, no setpriv), said loudly.
#[cfg(target_os = "linux")]
fn as_another_user(owner_is_user: bool) -> Option<(std::process::Output, tempfile::TempDir)> {
    use std::os::unix::fs::PermissionsExt;
    let bench = bench_dir("");
    let d = bench.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in std::fs::read_dir(d).unwrap() {
        std::fs::set_permissions(f.unwrap().path(), std::fs::Permissions::from_mode(0o644))
            .unwrap();
    }
    if owner_is_user {
        let chowned = std::process::Command::new("chown")
            .args(["-R", "10001:10001"])
            .arg(d)
            .status();
        if !chowned.is_ok_and(|s| s.success()) {
            eprintln!("SKIPPED: cannot chown here: the container-user test did not run");
            return None;
        }
    }
    let bin = assert_cmd::cargo::cargo_bin("promptgauge");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=10001", "--regid=10001", "--clear-groups"])
        .arg(&bin)
        .args(["run", "bench.yaml", "--quiet"])
        .current_dir(d)
        .env("CI", "true")
        .env("HOME", "/nonexistent")
        .output();
    match out {
        Ok(o)
            if o.status.code() != Some(127)
                && !String::from_utf8_lossy(&o.stderr).contains("setpriv:") =>
        {
            Some((o, bench))
        }
        _ => {
            eprintln!(
                "SKIPPED: cannot run as another user here (setpriv): the container-user test did not run"
            );
            None
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_container_user_in_a_folder_it_cannot_write_is_told_how_to_run_as_its_own() {
    let Some((o, _keep)) = as_another_user(false) else {
        return;
    };
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("Permission denied"), "{e}");
    assert!(e.contains("docker run --user \"$(id -u):$(id -g)\""), "{e}");
    // Run as the folder's owner, as that flag makes it, the same bench runs (no home
    // folder needed).
    let (o, bench) = as_another_user(true).unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(run_dirs(&bench.path().join("reports")).len(), 1);
}

/// Runs promptgauge in a real pseudo-terminal of `columns` columns (util-linux `script`,
/// the size set with `stty`; at 80 columns the terminal reports 0 rows, as `script` and
/// some `docker exec` sessions do), with no `$COLUMNS` — shells do not export it, so the width is
/// known only from the terminal. Outside CI, so the live progress line draws too. Returns
/// the exit code and every line the terminal showed: each `\r`-separated frame of the
/// progress line counts as a line, escape sequences removed.
/// `word` as one word of a POSIX shell.
#[cfg(unix)]
fn sh_word(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(unix)]
fn in_a_terminal(columns: usize, dir: &Path, args: &[&str]) -> (Option<i32>, Vec<String>) {
    let bin = assert_cmd::cargo::cargo_bin("promptgauge");
    let quoted: Vec<String> = args.iter().map(|a| sh_word(a)).collect();
    let rows = if columns == 80 { 0 } else { 50 };
    let script = format!(
        "stty cols {columns} rows {rows}; {} {}",
        sh_word(&bin.display().to_string()),
        quoted.join(" ")
    );
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-q", "-e", "-c", &script, "/dev/null"])
        .current_dir(dir)
        .env_remove("COLUMNS")
        .env_remove("CI")
        .env_remove("PROMPTGAUGE_BASE_URL")
        .env_remove("OPENAI_API_KEY");
    for var in STORE_VARIABLES {
        cmd.env_remove(var);
    }
    let out = cmd
        .output()
        .expect("util-linux `script` runs a pseudo-terminal");
    let text = String::from_utf8_lossy(&out.stdout);
    let escapes = regex::Regex::new(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07)").unwrap();
    let plain = escapes.replace_all(&text, "");
    let lines = plain
        .split(['\n', '\r'])
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect();
    (out.status.code(), lines)
}

#[cfg(unix)]
#[test]
fn every_line_fits_a_real_80_or_100_column_terminal() {
    let (_rt, server) = start_mock(MockConfig {
        token_delay: std::time::Duration::from_millis(2),
        ..MockConfig::default()
    });
    let root = tempfile::tempdir().unwrap();
    let d = root.path();
    for f in ["promptgauge.yaml", "cases", "prompts"] {
        let from = repo().join(f);
        let status = std::process::Command::new("cp")
            .args(["-r"])
            .arg(&from)
            .arg(d)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let url = server.base_url();
    let run = [
        "run",
        "--base-url",
        url.as_str(),
        "--model",
        "m",
        "--concurrency",
        "2",
    ];
    // The layout a wide terminal gets is wider than 100 columns: there is something to fit.
    let (code, wide) = in_a_terminal(200, d, &run);
    assert_eq!(code, Some(0), "{wide:#?}");
    let widest = |lines: &[String]| lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest(&wide) > 120, "{wide:#?}");
    for columns in [80usize, 100] {
        for args in [&run[..], &["history"][..]] {
            let (code, lines) = in_a_terminal(columns, d, args);
            assert_eq!(code, Some(0), "{args:?}: {lines:#?}");
            let over: Vec<&String> = lines
                .iter()
                .filter(|l| l.chars().count() > columns)
                .collect();
            assert!(over.is_empty(), "{args:?} at {columns} columns: {over:#?}");
            let text = lines.join("\n");
            // No cell broken inside a word.
            for broken in ["differenc", "disti", "accura\n", "p9\n"] {
                for line in &lines {
                    let cells: Vec<&str> = line.split(['│', '┆']).map(str::trim).collect();
                    assert!(
                        !cells.iter().any(|c| *c == broken.trim_end_matches('\n')),
                        "a wrapped cell `{broken}` at {columns}:\n{text}"
                    );
                }
            }
            if args[0] == "run" {
                for needed in ["step-by-step", "better", "not distinguishable", "87.5%"] {
                    assert!(text.contains(needed), "{columns}: {needed}\n{text}");
                }
                assert!(text.contains("ETA"), "the progress line drew:\n{text}");
                // The note names only columns that really are not in the table.
                if let Some(note) = lines.iter().position(|l| l.starts_with("(left out to fit")) {
                    let said = lines[note..]
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" ");
                    let table_header = lines[..note]
                        .iter()
                        .rev()
                        .find(|l| l.starts_with('│') && l.contains("variant"))
                        .unwrap();
                    let named = said.split_once(": ").unwrap().1.split(';').next().unwrap();
                    for column in named.split(", ") {
                        assert!(
                            !table_header.contains(column.trim()),
                            "`{column}` is said left out but is in {table_header}"
                        );
                    }
                }
            }
        }
    }
    // compare too.
    let dirs = run_dirs(&d.join("reports"));
    let (code, lines) = in_a_terminal(
        80,
        d,
        &[
            "compare",
            dirs[0].to_str().unwrap(),
            dirs[1].to_str().unwrap(),
            "--out",
            "cmp",
        ],
    );
    assert_eq!(code, Some(0), "{lines:#?}");
    let over: Vec<&String> = lines.iter().filter(|l| l.chars().count() > 80).collect();
    assert!(over.is_empty(), "compare at 80 columns: {over:#?}");
}

#[cfg(unix)]
#[test]
fn a_best_run_in_a_terminal_says_each_arm_out_above_the_line_marks_it_and_ends_its_eta() {
    let (_rt, server) = start_mock(MockConfig {
        token_delay: std::time::Duration::from_millis(1),
        ..MockConfig::default()
    });
    let b = crate::sequential::best_bench(1500, &[70, 84, 55, 68]);
    let url = server.base_url();
    let args = [
        "run",
        "bench.yaml",
        "--best",
        "--seed",
        "5",
        "--no-store",
        "--base-url",
        &url,
        "--model",
        "m",
    ];
    for columns in [80usize, 100] {
        let (code, lines) = in_a_terminal(columns, b.path(), &args);
        // A line said above the live bar is padded to the terminal's width, and the bar
        // drawn after it on the next row (the terminal wraps there): split it there.
        let lines: Vec<String> = lines
            .iter()
            .flat_map(|l| {
                let chars: Vec<char> = l.chars().collect();
                if chars.len() > columns && chars[columns - 1] == ' ' {
                    let head: String = chars[..columns].iter().collect();
                    vec![
                        head.trim_end().to_string(),
                        chars[columns..].iter().collect(),
                    ]
                } else {
                    vec![l.clone()]
                }
            })
            .collect();
        let text = lines.join("\n");
        assert!(code.is_some_and(|c| c < 2), "{text}");
        let over: Vec<&String> = lines
            .iter()
            .filter(|l| l.chars().count() > columns)
            .collect();
        assert!(over.is_empty(), "at {columns} columns: {over:#?}");
        // Each arm out or set aside is said once, on a line of its own above the live line.
        let out: Vec<&String> = lines
            .iter()
            .filter(|l| {
                (l.starts_with("v2 out after ") && l.ends_with(" cases: below v1"))
                    || (l.starts_with("v2 set aside after ")
                        && l.ends_with(" cases: v1 leads and is shown no more than ε behind it"))
            })
            .collect();
        assert_eq!(out.len(), 1, "{text}");
        let answer = lines
            .iter()
            .position(|l| l.starts_with("v1: the best, or within ε of it, after "))
            .unwrap_or_else(|| panic!("{text}"));
        // The live line marks it, and once the answer is in its ETA is spent.
        assert!(
            lines.iter().any(|l| l.contains("· ETA ")
                && l.contains("v2 ")
                && (l.contains("% out") || l.contains("% aside"))),
            "{text}"
        );
        let last_frame = lines[answer..].iter().rfind(|l| l.contains("· ETA "));

        let frame = last_frame.unwrap_or_else(|| panic!("no frame after the answer: {text}"));
        assert!(frame.contains("ETA 0s"), "{frame}");
        // The note wraps to the terminal.
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("v1 is the best of 4"), "{text}");
    }
}

#[test]
fn a_promptfoo_suite_that_uses_its_vars_in_asserts_imports_exactly_and_says_what_it_did_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("cases.csv"),
        "id,question,expected\nsum-3-4,What is 3 + 4?,7\nsum-5-5,What is 5 + 5?,10\nsum-2-9,What is 2 + 9?,11\n",
    )
    .unwrap();
    std::fs::write(
        d.join("promptfooconfig.yaml"),
        r#"description: sums
prompts:
  - "{{question}}"
  - "Think, then answer: {{question}}"
providers:
  - id: openai:chat:gpt-4o-mini
    config: { apiKey: sk-live-in-the-config-123456, apiKeyEnvar: MY_KEY, apiBaseUrl: "https://gateway.example/v1" }
defaultTest:
  vars: { unit: apples }
  assert:
    - type: contains
      value: "{{expected}}"
tests:
  - file://cases.csv
  - vars: { question: "What is 6 + 6?", expected: "12" }
    assert:
      - type: regex
        value: "(\\d+) {{unit}}?"
        weight: 2
  - vars: { question: "Why is the sky blue?", expected: "Rayleigh" }
    assert: [{ type: llm-rubric, value: "Mentions {{expected}} scattering" }]
  - vars: { question: "Name a colour." }
    assert: [{ type: contains, value: "{{colour}}" }]
"#,
    )
    .unwrap();
    let out = promptgauge(d)
        .args([
            "import",
            "promptfoo",
            "promptfooconfig.yaml",
            "--out",
            "bench",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let cases: Vec<Value> = std::fs::read_to_string(d.join("bench/cases.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The CSV's ids are the case ids; `{{expected}}` became each test's own answer.
    let ids: Vec<&str> = cases.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(&ids[..3], ["sum-3-4", "sum-5-5", "sum-2-9"]);
    assert_eq!(
        cases
            .iter()
            .take(3)
            .map(|c| c["expected"].clone())
            .collect::<Vec<_>>(),
        [json!("7"), json!("10"), json!("11")]
    );
    assert!(
        !std::fs::read_to_string(d.join("bench/cases.jsonl"))
            .unwrap()
            .contains("{{")
    );
    // A regex with a group still passes on a match: the group no longer captures.
    let regex = cases[3]["grade"]["of"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == "regex")
        .unwrap()
        .clone();
    assert_eq!(regex["pattern"], "(?:\\d+) apples?");
    // An llm-rubric is the judge's rubric, not its reference answer.
    let rubric = &cases[4]["grade"]["of"][1];
    assert_eq!(
        (rubric["kind"].as_str(), rubric["rubric"].as_str()),
        (Some("judge"), Some("Mentions Rayleigh scattering"))
    );
    // What could not be translated is listed; the key is never copied.
    for said in [
        "`apiKey`",
        "model `gpt-4o-mini` at https://gateway.example/v1",
        "`weight` was not carried over",
        "cannot be filled from the test's vars",
    ] {
        assert!(stdout.contains(said), "{said}: {stdout}");
    }
    let notes = std::fs::read_to_string(d.join("bench/IMPORT-NOTES.md")).unwrap();
    assert!(!notes.contains("Everything was carried over"), "{notes}");
    let bench = std::fs::read_to_string(d.join("bench/promptgauge.yaml")).unwrap();
    assert!(bench.contains("\"api_key_env\":\"MY_KEY\""), "{bench}");
    for file in ["promptgauge.yaml", "cases.jsonl", "IMPORT-NOTES.md"] {
        let text = std::fs::read_to_string(d.join("bench").join(file)).unwrap();
        assert!(!text.contains("sk-live-in-the-config"), "{file}");
    }
    // The bench runs on the simulator and scores what the tests meant, not 0%.
    let run = promptgauge(&d.join("bench"))
        .args(["run", "--base-url", "mock", "--no-store"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let reports = run_dirs(&d.join("bench/reports"));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(reports[0].join("summary.json")).unwrap())
            .unwrap();
    for v in summary["variants"].as_array().unwrap() {
        let score = v["accuracy"].as_f64().or(v["mean_score"].as_f64()).unwrap();
        assert!(score > 0.3, "{v}");
    }
}

#[test]
fn an_import_reads_only_regular_files_beside_the_config_unless_told_otherwise() {
    let root = tempfile::tempdir().unwrap();
    let d = root.path().join("suite");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(root.path().join("secret.txt"), "the secret outside").unwrap();
    std::fs::write(d.join("inside.txt"), "Answer: {{question}}").unwrap();
    std::os::unix::fs::symlink(root.path().join("secret.txt"), d.join("link.txt")).unwrap();
    let secret = root.path().join("secret.txt");
    let import = |prompt: &str, extra: &[&str]| {
        let name = format!("c{}.yaml", prompt.len() + extra.len());
        std::fs::write(
            d.join(&name),
            format!(
                "prompts: [\"{prompt}\"]\nproviders: [{{ id: \"openai:chat:m\", config: {{ apiBaseUrl: \"https://attacker.example/v1\" }} }}]\ntests:\n  - vars: {{ question: q }}\n    assert: [{{ type: equals, value: a }}]\n"
            ),
        )
        .unwrap();
        let out_dir = format!("out-{}", name.trim_end_matches(".yaml"));
        let o = promptgauge(&d)
            .args(["import", "promptfoo", &name, "--out", &out_dir])
            .args(extra)
            .output()
            .unwrap();
        (o, d.join(out_dir))
    };
    let secret_uri = format!("file://{}", secret.display());
    let missing_uri = format!("file://{}", root.path().join("nothing.txt").display());
    std::os::unix::fs::symlink(root.path().join("nothing.txt"), d.join("dangling.txt")).unwrap();
    // Refused alike whether the file exists or not: the message is no oracle for what
    // is on the machine.
    let mut said = std::collections::BTreeSet::new();
    for prompt in [
        "file://../secret.txt",
        "file://../nothing.txt",
        secret_uri.as_str(),
        missing_uri.as_str(),
        "file://link.txt",
        "file://dangling.txt",
        "file:///dev/zero",
        "file:///no/such/dir/zero",
    ] {
        let (o, out) = import(prompt, &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{prompt}: {stderr}");
        assert!(
            stderr.contains("not a file inside the config's folder"),
            "{prompt}: {stderr}"
        );
        assert!(!out.exists(), "{prompt}: nothing written");
        said.insert(stderr.replace(prompt, "REF"));
    }
    assert_eq!(
        said.len(),
        1,
        "one message for every refused path: {said:#?}"
    );
    let (o, _) = import("file://../secret.txt", &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--allow-outside-files"),
        "the refusal says how to allow it"
    );
    // With the flag the file is read, and /dev/zero is still refused.
    let (o, out) = import("file://../secret.txt", &["--allow-outside-files"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let prompts: String = std::fs::read_dir(out.join("prompts"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(prompts.contains("the secret outside"));
    let (o, _) = import("file:///dev/zero", &["--allow-outside-files"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
    // Too large: refused without reading it all.
    std::fs::write(d.join("huge.txt"), vec![b'x'; (16 << 20) + 1]).unwrap();
    let (o, _) = import("file://huge.txt", &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("larger than 16 MiB"), "{stderr}");
    // Within the limit one by one, past the import's total when named again and again.
    std::fs::write(d.join("big.txt"), vec![b'x'; 15 << 20]).unwrap();
    std::fs::write(
        d.join("many.yaml"),
        format!(
            "prompts: [{}]\ntests:\n  - vars: {{ question: q }}\n    assert: [{{ type: equals, value: a }}]\n",
            vec!["\"file://big.txt\""; 40].join(", ")
        ),
    )
    .unwrap();
    let o = promptgauge(&d)
        .args(["import", "promptfoo", "many.yaml", "--out", "out-many"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("past 64 MiB in all"), "{stderr}");
    assert!(!d.join("out-many").exists(), "nothing written");
    // A file beside the config is read; the imported endpoint is named for review, in the
    // terminal and the notes, and the notes never say everything was carried over.
    let (o, out) = import("file://inside.txt", &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("review before running") && stdout.contains("https://attacker.example/v1"),
        "{stdout}"
    );
    let notes = std::fs::read_to_string(out.join("IMPORT-NOTES.md")).unwrap();
    assert!(
        notes.contains("## Review before running") && notes.contains("https://attacker.example/v1"),
        "{notes}"
    );
    assert!(!notes.contains("Everything was carried over"), "{notes}");
    // A variable promptfoo would read from a file is read, not silently kept as text.
    std::fs::write(
        d.join("vars.yaml"),
        "prompts: [\"{{doc}}\"]\ntests:\n  - vars: { doc: \"file://inside.txt\" }\n    assert: [{ type: equals, value: a }]\n",
    )
    .unwrap();
    let o = promptgauge(&d)
        .args(["import", "promptfoo", "vars.yaml", "--out", "out-vars"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A variable promptfoo reads from a file holds the file's text, as promptfoo sends it.
    let cases = std::fs::read_to_string(d.join("out-vars/cases.jsonl")).unwrap();
    assert!(
        cases.contains("\"doc\":\"Answer: {{question}}\""),
        "{cases}"
    );
}

#[test]
fn a_promptfoo_config_imports_into_a_bench_that_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("prompts")).unwrap();
    std::fs::write(d.join("prompts/terse.txt"), "Answer briefly: {{question}}").unwrap();
    std::fs::write(
        d.join("prompts/chat.json"),
        r#"[{"role": "system", "content": "You are careful."}, {"role": "user", "content": "{{question}}"}]"#,
    )
    .unwrap();
    std::fs::write(
        d.join("more.csv"),
        "question,__expected\nWhat is 3 + 4?,contains: 7\nCapital of Italy?,Rome\n",
    )
    .unwrap();
    std::fs::write(
        d.join("promptfooconfig.yaml"),
        r#"description: Geography and sums
prompts:
  - "Q: {{question}}"
  - file://prompts/terse.txt
  - file://prompts/chat.json
providers:
  - id: openai:chat:gpt-4o-mini
    config: { temperature: 0, max_tokens: 200, apiBaseUrl: "http://127.0.0.1:9/v1", frequency_penalty: 0.1 }
  - anthropic:messages:claude-3-5-haiku
defaultTest:
  assert:
    - type: javascript
      value: output.length < 500
tests:
  - vars: { question: "Capital of France?" }
    assert: [{ type: equals, value: Paris }]
  - vars: { question: "Capital of Spain?" }
    assert: [{ type: icontains, value: madrid }]
  - vars: { question: "Capital of Japan?" }
    assert: [{ type: contains, value: Tokyo }, { type: regex, value: "^[A-Z]" }]
  - vars: { question: "Give a JSON object with a key city." }
    assert: [{ type: is-json }]
  - vars: { question: "Why is the sky blue?" }
    assert: [{ type: llm-rubric, value: Mentions Rayleigh scattering }]
  - vars: { question: "Name a prime." }
    assert: [{ type: similar, value: "7" }]
  - vars: { question: "Greet me." }
    assert: [{ type: starts-with, value: Hello }]
  - vars: { question: "Who wrote Hamlet?" }
    assert: [{ type: factuality, value: William Shakespeare wrote Hamlet }]
  - file://more.csv
"#,
    )
    .unwrap();
    let out = promptgauge(d)
        .args([
            "import",
            "promptfoo",
            "promptfooconfig.yaml",
            "--out",
            "bench",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("imported 3 prompts and 10 tests"),
        "{stdout}"
    );
    // Tests and asserts counted apart: 8 tests and the CSV's 2; defaultTest's assert once.
    assert!(
        stdout.contains("10 tests of the config: 10 cases scored by the bench; 12 asserts (12 became scorers or gates)"),
        "{stdout}"
    );
    // What has no equivalent is said, not dropped.
    for said in ["2 providers became 2 endpoints", "frequency_penalty"] {
        assert!(stdout.contains(said), "{said}: {stdout}");
    }
    let notes = std::fs::read_to_string(d.join("bench/IMPORT-NOTES.md")).unwrap();
    assert!(notes.contains("frequency_penalty"), "{notes}");
    let bench = std::fs::read_to_string(d.join("bench/promptgauge.yaml")).unwrap();
    assert!(
        bench.contains("gpt-4o-mini") && bench.contains("http://127.0.0.1:9/v1"),
        "{bench}"
    );
    // Both providers, side by side: the Anthropic one through its own protocol, each with
    // its own parameters.
    assert!(bench.contains("endpoints:"), "{bench}");
    assert!(
        bench.contains("\"name\":\"claude-3-5-haiku\"")
            && bench.contains("\"protocol\":\"anthropic-messages\"")
            && bench.contains("\"api_key_env\":\"ANTHROPIC_API_KEY\""),
        "{bench}"
    );
    assert!(
        bench.contains("\"params\":{\"max_tokens\":200,\"temperature\":0}"),
        "{bench}"
    );
    let cases = std::fs::read_to_string(d.join("bench/cases.jsonl")).unwrap();
    for kind in [
        "\"expr\"",
        "\"contains\"",
        "\"regex\"",
        "\"embedding\"",
        "\"judge\"",
        "\"all\"",
    ] {
        assert!(cases.contains(kind), "{kind}: {cases}");
    }
    // The bench checks, and runs on the simulator.
    let check = promptgauge(&d.join("bench"))
        .args(["check"])
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // --base-url mock puts every endpoint on the simulator: one run, both providers.
    let run = promptgauge(&d.join("bench"))
        .args(["run", "--quiet", "--base-url", "mock"])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ran = run_dirs(&d.join("bench/reports")).remove(0);
    let s: promptgauge::report::Summary =
        serde_json::from_str(&std::fs::read_to_string(ran.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s.run.endpoints.len(), 2);
    assert!(s.run.endpoints.iter().all(|e| e.simulated));
    // Never over an existing bench.
    let again = promptgauge(d)
        .args([
            "import",
            "promptfoo",
            "promptfooconfig.yaml",
            "--out",
            "bench",
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
}

#[test]
fn repeats_at_temperature_0_are_said_to_cost_more_and_measure_little() {
    let (_rt, server) = start_mock(MockConfig::default());
    let dir = bench_dir("");
    let d = dir.path();
    let url = server.base_url();
    let args = [
        "run",
        "bench.yaml",
        "--repeats",
        "3",
        "--limit",
        "2",
        "--base-url",
        &url,
        "--model",
        "m",
    ];
    let out = promptgauge(d).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: 3 repeats at temperature 0 (every variant)")
            && stderr.contains("costs 3× as much"),
        "{stderr}"
    );
    // `check` says it before anything is spent.
    let out = promptgauge(d)
        .args(["check", "bench.yaml", "--repeats", "3"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("3 repeats at temperature 0"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Sampling at a temperature above 0: repeats measure something, nothing is said.
    let yaml = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        yaml.replace("temperature: 0,", "temperature: 0.7,"),
    )
    .unwrap();
    let out = promptgauge(d).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("repeats at temperature 0"), "{stderr}");
}

#[test]
fn the_protocol_is_chosen_per_endpoint_kept_with_the_run_and_checked_on_resume() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    // Named in the bench: the run speaks it, and the provider hears chat completions.
    let dir = bench_dir("");
    let d = dir.path();
    let bench = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        format!("{bench}endpoint: {{ protocol: openai-chat }}\n"),
    )
    .unwrap();
    let o = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .args(["--protocol", "openai-chat"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(server.provider.stats().requests > 0);
    // A name this version does not speak: an input error at the bench's line, and a usage
    // error for the flag, each naming the protocols it knows; nothing is sent.
    let sent = server.provider.stats().requests;
    std::fs::write(
        d.join("bench.yaml"),
        format!("{bench}endpoint: {{ protocol: smoke-signals }}\n"),
    )
    .unwrap();
    let o = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("bench.yaml:") && e.contains("openai-chat"),
        "{e}"
    );
    std::fs::write(d.join("bench.yaml"), &bench).unwrap();
    let o = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .args(["--protocol", "smoke-signals"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("unknown protocol `smoke-signals`") && e.contains("`openai-chat`"),
        "{e}"
    );
    assert_eq!(server.provider.stats().requests, sent);
    // A run answered through another protocol (a record from a newer version) is not
    // resumed through this one: the record says which, and nothing is sent.
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let record = std::fs::read_to_string(run.join("run.json")).unwrap();
    let mut doctored: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert!(
        doctored["endpoint"].get("protocol").is_none(),
        "the default is left unwritten, so older records read as they were"
    );
    doctored["endpoint"]["protocol"] = "carrier-pigeon".into();
    std::fs::write(run.join("run.json"), doctored.to_string()).unwrap();
    let o = promptgauge(d)
        .args(["run", "--resume", run.to_str().unwrap()])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("carrier-pigeon"), "{e}");
    assert_eq!(server.provider.stats().requests, sent);
}

/// A run of several endpoints in a real terminal: the header naming each endpoint, the
/// per-cell table, the grid and both axes' tables fit 80 and 100 columns.
#[cfg(unix)]
#[test]
fn a_grid_fits_a_real_80_or_100_column_terminal() {
    let servers: Vec<_> = (0..3).map(|_| start_mock(MockConfig::default())).collect();
    let extra = format!(
        "endpoints:\n  - {{ name: hosted-frontier, base_url: \"{}\", model: big-frontier-model-2026-11 }}\n  - {{ name: responses, base_url: \"{}\", model: mid-model, protocol: openai-responses }}\n  - {{ name: local-qwen, base_url: \"{}\", model: Qwen/Qwen2.5-7B-Instruct-tiny, protocol: anthropic-messages }}\n",
        servers[0].1.base_url(),
        servers[1].1.base_url(),
        servers[2].1.base_url()
    );
    let bench = arithmetic_bench(30, 3, &extra);
    let d = bench.path();
    for columns in [80usize, 100] {
        let (code, lines) = in_a_terminal(columns, d, &["run", "bench.yaml", "--no-store"]);
        assert!(code.is_some_and(|c| c <= 1), "{lines:#?}");
        let over: Vec<&String> = lines
            .iter()
            .filter(|l| l.chars().count() > columns)
            .collect();
        assert!(over.is_empty(), "at {columns} columns: {over:#?}");
        let text = lines.join("\n");
        // No verdict broken over two lines.
        for line in &lines {
            let cells: Vec<&str> = line.split(['│', '┆']).map(str::trim).collect();
            assert!(
                !cells.contains(&"not"),
                "a wrapped verdict at {columns}:\n{text}"
            );
        }
        for needed in [
            "local-qwen",
            "Which prompt",
            "Which model",
            "local-qwen/careful",
            "hosted-frontier/plain",
        ] {
            assert!(text.contains(needed), "{columns}: {needed}\n{text}");
        }
    }
}

/// A score with parts in a real terminal: a `fields` bench of four variants, whose parts
/// (each field, a list's items together) get a row each with every variant's figure, and
/// every line fits 80 and 100 columns.
#[cfg(unix)]
#[test]
fn a_bench_with_parts_fits_a_real_80_or_100_column_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: String = (1..=100)
        .map(|i| {
            let (category, country) = [("billing", "DE"), ("login", "US"), ("bug", "FR")][i % 3];
            let (priority, label) = [("low", "web"), ("high", "api")][i % 2];
            let case = serde_json::json!({
                "id": format!("t-{i:02}"),
                "vars": {"ticket": format!("ticket {i}")},
                "expected": {
                    "category": category,
                    "priority": priority,
                    "customer": {"country_code": country},
                    "labels": ["refund", label],
                },
            });
            format!("{case}\n")
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), lines).unwrap();
    let prompts = [
        ("plain", "Triage as JSON."),
        ("step-by-step", "Think step by step, then answer as JSON."),
        (
            "few-shot-examples",
            "Answer as JSON (simulated accuracy 50%).",
        ),
        ("terse", "JSON only (simulated accuracy 85%)."),
    ];
    for (name, system) in prompts {
        std::fs::write(
            d.join(format!("{name}.yaml")),
            format!("name: {name}\nmessages:\n  - {{ role: system, content: \"{system}\" }}\n  - {{ role: user, content: \"{{{{ ticket }}}}\" }}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        d.join("bench.yaml"),
        "name: triage\ncases: cases.jsonl\nvariants: [plain.yaml, step-by-step.yaml, few-shot-examples.yaml, terse.yaml]\ngrade: { kind: fields }\nparams: { temperature: 0, max_tokens: 100, response_format: { type: json_object } }\n",
    )
    .unwrap();
    for columns in [80usize, 100] {
        let (code, lines) = in_a_terminal(columns, d, &["run", "bench.yaml", "--no-store"]);
        assert_eq!(code, Some(0), "{lines:#?}");
        let over: Vec<&String> = lines
            .iter()
            .filter(|l| l.chars().count() > columns)
            .collect();
        assert!(over.is_empty(), "at {columns} columns: {over:#?}");
        let text = lines.join("\n");
        assert!(
            text.contains("Parts (per-part figures of the same answers)"),
            "{columns}:\n{text}"
        );
        // Each part a row of its own, every variant's figure on it, none broken.
        for part in ["category", "priority", "customer.country_code", "labels[]"] {
            let row = lines
                .iter()
                .find(|l| {
                    l.split('│')
                        .nth(1)
                        .is_some_and(|c| c.trim().starts_with(part))
                })
                .unwrap_or_else(|| panic!("{columns}: no row for {part}:\n{text}"));
            assert_eq!(row.matches('%').count(), 4, "{columns}: {row}\n{text}");
        }
        assert!(
            lines.iter().any(|l| l.starts_with('│') && l.contains('▼')),
            "a worse variant is marked:\n{text}"
        );
    }
    // A grid: a row per part and variant, a column per endpoint.
    std::fs::write(
        d.join("grid.yaml"),
        "name: triage-grid\ncases: cases.jsonl\nvariants: [plain.yaml, step-by-step.yaml]\ngrade: { kind: fields }\nparams: { temperature: 0, max_tokens: 100, response_format: { type: json_object } }\nendpoints:\n  - { name: hosted-frontier, base_url: mock, model: big-model }\n  - { name: local-tiny, base_url: mock, model: tiny-model }\n",
    )
    .unwrap();
    for columns in [80usize, 100] {
        let (code, lines) = in_a_terminal(columns, d, &["run", "grid.yaml", "--no-store"]);
        assert_eq!(code, Some(0), "{lines:#?}");
        let over: Vec<&String> = lines
            .iter()
            .filter(|l| l.chars().count() > columns)
            .collect();
        assert!(over.is_empty(), "grid at {columns} columns: {over:#?}");
        let text = lines.join("\n");
        let cells = |l: &str| -> Vec<String> {
            l.split(['│', '┆'])
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        };
        let rows: Vec<Vec<String>> = lines
            .iter()
            .skip_while(|l| !l.starts_with("Parts ("))
            .filter(|l| l.starts_with('│'))
            .map(|l| cells(l))
            .take(3)
            .collect();
        assert_eq!(rows.len(), 3, "{columns}:\n{text}");
        assert_eq!(
            rows[0],
            ["part", "variant", "hosted-frontier", "local-tiny"],
            "{text}"
        );
        assert_eq!(rows[1][..2], ["category", "plain"], "{text}");
        assert_eq!(rows[2][0], "step-by-step", "{text}");
    }
}

/// A batched run in a real terminal: the live line shows the batches' state and requests
/// done, and every line fits 80 and 100 columns.
#[cfg(unix)]
#[test]
fn a_batched_run_s_live_line_shows_its_batches_and_fits_a_real_terminal() {
    let (_rt, server) = start_mock(MockConfig {
        batch_delay: std::time::Duration::from_millis(400),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(30, 2, "");
    let d = bench.path();
    let url = server.base_url();
    for columns in [80usize, 100] {
        let out = format!("r{columns}");
        let (code, lines) = in_a_terminal(
            columns,
            d,
            &[
                "run",
                "bench.yaml",
                "--base-url",
                &url,
                "--model",
                "m",
                "--out",
                &out,
                "--batch",
                "--batch-size",
                "20",
                "--batch-poll",
                "20ms",
            ],
        );
        assert_eq!(code, Some(0), "{lines:#?}");
        let over: Vec<&String> = lines
            .iter()
            .filter(|l| l.chars().count() > columns)
            .collect();
        assert!(over.is_empty(), "{columns} columns: {over:#?}");
        let text = lines.join("\n");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("batches: ") && l.contains("in_progress")),
            "the live line shows the batches:\n{text}"
        );
        assert!(
            text.contains("60 answers came through the provider's batch API"),
            "{text}"
        );
    }
}

/// A folder with no bench says how to start one; a folder holding promptgauge.yaml (what
/// `init` and `import` write) is taken for its bench by `check`, `run` and `plan`
/// (issue 52, item 5).
#[test]
fn a_folder_without_a_bench_says_how_to_start_and_a_bench_s_folder_is_its_bench() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for command in ["run", "check", "plan"] {
        let out = promptgauge(d).arg(command).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("no bench here") && stderr.contains("promptgauge init"),
            "{command}: {stderr}"
        );
    }
    std::fs::create_dir(d.join("empty")).unwrap();
    let out = promptgauge(d).args(["check", "empty"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("empty is a folder with no promptgauge.yaml")
            && stderr.contains("promptgauge init empty"),
        "{stderr}"
    );
    promptgauge(d).args(["init", "mybench"]).assert().success();
    let out = promptgauge(d).args(["check", "mybench"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("promptgauge.yaml): ok"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = promptgauge(d)
        .args(["run", "mybench", "--limit", "2", "--no-store", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--quiet` prints the variants' table, the verdicts and the gates' lines: not the
/// simulator's banner, the paired table or the notes (issue 52, item 5).
#[test]
fn quiet_prints_the_one_table_the_verdicts_and_the_gates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    promptgauge(d).arg("init").assert().success();
    // The careful prompt answers about 40% right: its gate fails.
    let careful = d.join("prompts/careful.yaml");
    let text = std::fs::read_to_string(&careful).unwrap();
    std::fs::write(
        &careful,
        text.replace(
            "Think step by step",
            "simulated accuracy 40%. Think step by step",
        ),
    )
    .unwrap();
    let out = promptgauge(d)
        .args(["run", "--quiet", "--no-store", "--min-accuracy", "0.9"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout.contains("accuracy") && stdout.contains("careful"),
        "{stdout}"
    );
    assert!(stdout.contains("careful is "), "the verdict: {stdout}");
    assert!(!stdout.contains("both right"), "no paired table: {stdout}");
    assert!(
        !stdout.contains("detects differences"),
        "no notes: {stdout}"
    );
    assert_eq!(stdout.matches('┌').count(), 1, "one table: {stdout}");
    assert!(
        stdout.contains("SIMULATED PROVIDER: these numbers"),
        "{stdout}"
    );
    assert!(!stderr.contains("====="), "no banner: {stderr}");
    assert!(stderr.contains("gate "), "the gate's line: {stderr}");
    assert_eq!(
        stderr.matches("reports:").count(),
        1,
        "where the reports went: {stderr}"
    );
}

/// `run b --quiet` from b's parent writes the run folder under the current directory (as
/// reports.md says: `reports/` where promptgauge runs, not beside the bench), and says
/// where in one line even when quiet (issue 52, tryout 13).
#[test]
fn a_quiet_run_of_a_bench_elsewhere_says_where_its_reports_went() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    promptgauge(d).args(["init", "b"]).assert().success();
    let out = promptgauge(d)
        .args(["run", "b", "--quiet", "--no-store", "--limit", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("reports: "))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    let run = d.join(said[0].trim_start_matches("reports: "));
    assert!(run.join("summary.json").is_file(), "{}", run.display());
    assert_eq!(run.parent().unwrap(), d.join("reports"));
    assert!(!d.join("b/reports").exists());
}

/// `plan` right after a run whose baseline got every answer right sizes from that run (at
/// the end of its interval nearest 50%) and says what a bench at 100% can show, rather
/// than that it found no run (issue 52, item 5).
#[test]
fn plan_after_a_run_at_100_percent_uses_it_and_says_what_it_can_show() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    promptgauge(d).arg("init").assert().success();
    promptgauge(d)
        .args(["run", "--quiet", "--no-store"])
        .assert()
        .success();
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let baseline = &summary.variants[0];
    assert_eq!(
        baseline.accuracy,
        Some(1.0),
        "the simulator answers this bench right"
    );
    let out = promptgauge(d)
        .args(["plan", "--detect", "10"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(!stdout.contains("no earlier run"), "{stdout}");
    let low = baseline.ci_low.unwrap() * 100.0;
    assert!(
        stdout.contains(&format!(
            "baseline accuracy {low:.1}% (the baseline got every answer right in"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("can only show itself worse"), "{stdout}");
}
