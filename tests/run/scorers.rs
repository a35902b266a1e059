//! `{kind: command}`: a scorer in another language, as a pool of long-lived processes.
//! One that crashes, hangs, or replies garbage fails that job with its cause (never a 0),
//! keeps its stderr in the record, and is replaced; the examples in Python and JavaScript
//! score a run alike.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use crate::common::*;
use promptgauge::mock::MockConfig;

/// A scorer that misbehaves on chosen cases: it crashes on add-03, hangs on add-05,
/// writes a line that is not JSON on add-07, scores 1.5 on add-09, refuses add-11; the
/// rest it scores by the expected answer, saying its pid.
const FAULTY: &str = r#"
import json, os, sys, time
for line in sys.stdin:
    req = json.loads(line)
    case = req["case"]["id"]
    if case == "add-03":
        sys.stderr.write("crashing on add-03\n"); sys.stderr.flush()
        sys.exit(3)
    if case == "add-05":
        sys.stderr.write("hanging on add-05\n"); sys.stderr.flush()
        time.sleep(600)
    if case == "add-07":
        print("the answer looks fine to me", flush=True)
        continue
    if case == "add-09":
        print(json.dumps({"id": req["id"], "score": 1.5}), flush=True)
        continue
    if case == "add-11":
        print(json.dumps({"id": req["id"], "error": "no rubric for add-11"}), flush=True)
        continue
    right = req["case"]["expected"][0] in req["answer"]
    sys.stderr.write(f"scored {case}\n")
    print(json.dumps({"id": req["id"], "score": 1 if right else 0,
                      "extracted": req["answer"].strip(),
                      "detail": {"pid": os.getpid(), "turns": len(req["messages"])}}), flush=True)
"#;

fn scored_by(d: &Path, script: &str, spec: &str) {
    std::fs::write(d.join("score.py"), script).unwrap();
    let text: String = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("grade:") {
                format!("grade: {spec}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(d.join("bench.yaml"), text).unwrap();
}

fn by_case(records: &[Value]) -> HashMap<(String, String), &Value> {
    records
        .iter()
        .map(|r| {
            (
                (
                    r["case_id"].as_str().unwrap().to_string(),
                    r["variant"].as_str().unwrap().to_string(),
                ),
                r,
            )
        })
        .collect()
}

#[test]
fn a_scorer_that_crashes_hangs_or_replies_garbage_fails_that_job_and_is_replaced() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = arithmetic_bench(12, 2, "");
    let d = b.path();
    scored_by(
        d,
        FAULTY,
        "{ kind: command, run: [python3, score.py], workers: 2, timeout: 1s, binary: true }",
    );
    let o = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--base-url"])
        .arg(server.base_url())
        .args(["--model", "m", "--allow-failures", "10"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let records = journal(&dir);
    assert_eq!(records.len(), 24);
    // Every answer was asked for once, whatever its scorer did.
    assert_eq!(server.provider.stats().requests, 24);
    let jobs = by_case(&records);
    for variant in ["plain", "careful"] {
        let job = |case: &str| jobs[&(case.to_string(), variant.to_string())];
        let failed = |case: &str, why: &str, said: Option<&str>| {
            let r = job(case);
            assert_eq!(r["status"], "failed", "{case}: {r}");
            assert!(r["score"].is_null(), "never a 0: {r}");
            let error = r["error"].as_str().unwrap();
            assert!(
                error.contains("the scorer `python3 score.py`") && error.contains(why),
                "{case}: {error}"
            );
            if let Some(said) = said {
                assert!(error.contains(said), "stderr kept: {error}");
            }
            // The answer arrived and was paid for: it is kept.
            assert!(!r["partial_output"].is_null(), "{r}");
        };
        failed(
            "add-03",
            "exited with status 3 before replying",
            Some("crashing on add-03"),
        );
        failed(
            "add-05",
            "did not reply within 1s",
            Some("hanging on add-05"),
        );
        failed("add-07", "replied with a line that is not JSON", None);
        failed("add-09", "replied with score 1.5, outside [0, 1]", None);
        failed(
            "add-11",
            "said it cannot score this answer: no rubric for add-11",
            None,
        );
        for case in ["add-01", "add-02", "add-04", "add-12"] {
            let r = job(case);
            assert_eq!(r["status"], "graded", "{r}");
            let expected = r["expected"][0].as_str().unwrap();
            let right = r["output"].as_str().unwrap().contains(expected);
            assert_eq!(r["score"], if right { 1.0 } else { 0.0 }, "{r}");
            assert_eq!(
                r["score_detail"]["stderr"].as_str().unwrap(),
                format!("scored {case}\n"),
                "{r}"
            );
            // The messages as sent: careful's system message and the question.
            let turns = if variant == "plain" { 1 } else { 2 };
            assert_eq!(r["score_detail"]["detail"]["turns"], turns);
        }
    }
    // Long-lived: never more than two at once, each scoring many answers; a process that
    // broke was replaced (the crash, the hang and the garbage, for each variant).
    let pids: HashSet<i64> = records
        .iter()
        .filter_map(|r| r["score_detail"]["detail"]["pid"].as_i64())
        .collect();
    let graded = records.iter().filter(|r| r["status"] == "graded").count();
    assert_eq!(graded, 14);
    assert!(pids.len() <= 2 + 6, "{} processes for {graded}", pids.len());
    assert!(pids.len() >= 2, "the broken ones were replaced");
}

#[test]
fn a_scorer_that_cannot_be_found_is_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = arithmetic_bench(4, 1, "");
    let d = b.path();
    scored_by(d, "", "{ kind: command, run: [./scorers/missing.py] }");
    for command in ["check", "run"] {
        let o = promptgauge(d)
            .args([command, "bench.yaml", "--base-url"])
            .arg(server.base_url())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("cannot find the program `./scorers/missing.py`")
                && stderr.contains("bench.yaml:"),
            "{stderr}"
        );
    }
    scored_by(d, "", "{ kind: command, run: [no-such-scorer-here] }");
    let o = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url"])
        .arg(server.base_url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("on PATH"), "{stderr}");
    assert_eq!(server.provider.stats().requests, 0);
}

#[test]
fn the_python_and_javascript_examples_score_a_run_alike() {
    let examples = repo().join("examples/scorers");
    let mut scores = Vec::new();
    for bench in ["python.yaml", "javascript.yaml"] {
        let out = tempfile::tempdir().unwrap();
        let o = promptgauge(&examples)
            .args(["run", bench, "--base-url", "mock", "--quiet", "--out"])
            .arg(out.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{bench}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let dir = run_dirs(out.path()).pop().unwrap();
        let mut s: Vec<(String, String, f64, Value)> = journal(&dir)
            .iter()
            .map(|r| {
                (
                    r["case_id"].as_str().unwrap().to_string(),
                    r["variant"].as_str().unwrap().to_string(),
                    r["score"].as_f64().unwrap(),
                    r["score_detail"]["detail"]["missing"].clone(),
                )
            })
            .collect();
        s.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        scores.push(s);
    }
    assert_eq!(scores[0], scores[1]);
    // Partial credit: some answers miss some of what they must mention.
    assert!(
        scores[0].iter().any(|s| s.2 > 0.0 && s.2 < 1.0),
        "{:?}",
        scores[0]
    );
    assert!(scores[0].iter().any(|s| s.2 == 1.0));
}

#[test]
fn a_scorer_that_fails_every_answer_alike_stops_the_run_early() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = arithmetic_bench(60, 1, "");
    let d = b.path();
    // A scorer with a syntax error dies before reading a line.
    scored_by(
        d,
        "import sys\ndef broken(:\n",
        "{ kind: command, run: [python3, score.py] }",
    );
    let o = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--model",
            "m",
            "--concurrency",
            "4",
            "--base-url",
        ])
        .arg(server.base_url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("the first 4 jobs all failed the same way")
            && stderr.contains("exited with status 1 before replying"),
        "{stderr}"
    );
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let first = &journal(&dir)[0];
    assert!(
        first["error"].as_str().unwrap().contains("SyntaxError"),
        "its stderr is kept: {first}"
    );
    // The answers after those in flight were never bought.
    let seen = server.provider.stats().requests;
    assert!(
        seen < 20,
        "{seen} answers bought for a scorer that cannot score"
    );
}
