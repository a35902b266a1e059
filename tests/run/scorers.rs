//! `{kind: command}`: a scorer in another language, as a pool of long-lived processes.
//! One that crashes, hangs, or replies garbage fails that job with its cause (never a 0),
//! keeps its stderr in the record, and is replaced; the examples in Python and JavaScript
//! score a run alike. A score's parts (a `fields` scorer's fields, an `all`'s scorers) each
//! get their figures and verdicts in summary.json, and a bad part name is said by `check`.

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
    let Scored {
        records,
        stderr,
        code,
        requests,
    } = scored_run(
        FAULTY,
        // 3 s: a replaced process's start (Python's, on a loaded machine) counts against
        // its first reply, and must not be what fails it.
        "{ kind: command, run: [python3, score.py], workers: 2, timeout: 3s, binary: true }",
        (12, 2, ""),
        &["--allow-failures", "10"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(records.len(), 24);
    // Every answer was asked for once, whatever its scorer did.
    assert_eq!(requests, 24);
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
            "did not reply within 3s",
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
fn the_python_javascript_and_expr_examples_score_a_run_alike() {
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
    // The same scorer as one expression (examples/expr, its `mentions` part) scores alike.
    let out = tempfile::tempdir().unwrap();
    let o = promptgauge(&repo().join("examples/expr"))
        .args([
            "run",
            "support.yaml",
            "--base-url",
            "mock",
            "--quiet",
            "--out",
        ])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut mentions: Vec<(String, String, f64)> = journal(&run_dirs(out.path()).pop().unwrap())
        .iter()
        .map(|r| {
            let part = r["parts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "mentions")
                .unwrap();
            (
                r["case_id"].as_str().unwrap().to_string(),
                r["variant"].as_str().unwrap().to_string(),
                part["score"].as_f64().unwrap(),
            )
        })
        .collect();
    mentions.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let python: Vec<(String, String, f64)> = scores[0]
        .iter()
        .map(|(c, v, s, _)| (c.clone(), v.clone(), *s))
        .collect();
    assert_eq!(mentions, python);
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
    // A scorer with a syntax error dies before reading a line.
    let r = scored_run(
        "import sys\ndef broken(:\n",
        "{ kind: command, run: [python3, score.py] }",
        (60, 1, ""),
        &["--concurrency", "4"],
    );
    assert_eq!(r.code, Some(4), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the first 4 jobs all failed the same way")
            && r.stderr.contains("exited with status 1 before replying"),
        "{}",
        r.stderr
    );
    let first = &r.records[0];
    assert!(
        first["error"].as_str().unwrap().contains("SyntaxError"),
        "its stderr is kept: {first}"
    );
    // The answers after those in flight were never bought.
    assert!(
        r.requests < 20,
        "{} answers bought for a scorer that cannot score",
        r.requests
    );
}

/// The cosine of two texts as the simulator embeds them.
fn simulated_cosine(a: &str, b: &str) -> f64 {
    use promptgauge::mock::embeddings::vector;
    promptgauge::grade::embedding::cosine(&vector(a), &vector(b)).unwrap()
}

/// A bench whose answers are known: the simulator echoes what follows `Echo:`, so each
/// answer is the case's `say` (and, for the second variant, one word more).
fn echo_bench(grade: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        (
            "same",
            "Refunds reach your card within 5 business days.",
            "Refunds reach your card within 5 business days.",
        ),
        (
            "close",
            "Refunds reach your card in 5 business days.",
            "Refunds reach your card within 5 business days.",
        ),
        (
            "other",
            "The warranty covers defects for two years.",
            "Exchanges are free within 30 days.",
        ),
        (
            "half",
            "Print the return label from your order page.",
            "The return label is free: print it from your order page.",
        ),
        (
            "apart",
            "We ship to 30 countries.",
            "Store credit never expires.",
        ),
        (
            "twice",
            "Refunds reach your card within 5 business days.",
            "Refunds reach your card within 5 business days.",
        ),
    ];
    let lines: String = cases
        .iter()
        .map(|(id, say, expected)| {
            format!(
                "{}\n",
                serde_json::json!({"id": id, "vars": {"say": say}, "expected": expected})
            )
        })
        .collect();
    std::fs::write(d.path().join("cases.jsonl"), lines).unwrap();
    std::fs::write(d.path().join("plain.txt"), "Echo: {{ say }}").unwrap();
    std::fs::write(d.path().join("more.txt"), "Echo: {{ say }} Indeed").unwrap();
    std::fs::write(
        d.path().join("bench.yaml"),
        format!("name: echo\ncases: cases.jsonl\nvariants: [plain.txt, more.txt]\ngrade: {grade}\nparams: {{ max_tokens: 50 }}\n"),
    )
    .unwrap();
    d
}

#[test]
fn the_embedding_scorer_compares_by_meaning_journals_each_call_and_buys_each_vector_once() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = echo_bench("{ kind: embedding, threshold: 0.8, model: embedder-1 }");
    let run = || {
        let o = promptgauge(b.path())
            .args([
                "run",
                "bench.yaml",
                "--quiet",
                "--cache",
                "--concurrency",
                "1",
            ])
            .args(["--model", "m", "--base-url"])
            .arg(server.base_url())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        run_dirs(&b.path().join("reports")).pop().unwrap()
    };
    let dir = run();
    let records = journal(&dir);
    assert_eq!(records.len(), 12);
    let mut passed = HashSet::new();
    for r in &records {
        let (answer, expected) = (
            r["output"].as_str().unwrap(),
            r["expected"][0].as_str().unwrap(),
        );
        // The score is the simulator's cosine of the two texts against the threshold.
        let similarity = simulated_cosine(answer, expected);
        let detail = &r["score_detail"];
        assert!(
            (detail["similarity"].as_f64().unwrap() - similarity).abs() < 1e-9,
            "{r}"
        );
        assert_eq!(detail["threshold"], 0.8);
        assert_eq!(detail["model"], "embedder-1");
        assert_eq!(r["score"], if similarity >= 0.8 { 1.0 } else { 0.0 }, "{r}");
        if similarity >= 0.8 {
            passed.insert(format!(
                "{}/{}",
                r["case_id"].as_str().unwrap(),
                r["variant"].as_str().unwrap()
            ));
        }
        // Journaled like a judge's call: what was embedded, the verdict, the tokens.
        let call = &r["judge"][0];
        assert_eq!(call["request"][0]["content"], answer);
        assert_eq!(call["request"][1]["content"], expected);
        assert!(
            call["reply"]
                .as_str()
                .unwrap()
                .starts_with("cosine similarity")
        );
        if call["cached"] != true {
            assert!(call["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "{r}");
        }
    }
    let mut passed: Vec<String> = passed.into_iter().collect();
    passed.sort();
    assert_eq!(
        passed,
        [
            "close/more",
            "close/plain",
            "half/more",
            "half/plain",
            "same/more",
            "same/plain",
            "twice/more",
            "twice/plain"
        ]
    );
    // Each distinct text was embedded once: an expected answer once for both variants
    // and for both cases that share it (the run's memory, then the cache).
    let texts: HashSet<&str> = records
        .iter()
        .flat_map(|r| {
            [
                r["output"].as_str().unwrap(),
                r["expected"][0].as_str().unwrap(),
            ]
        })
        .collect();
    let stats = server.provider.stats();
    assert_eq!(stats.embedded_inputs as usize, texts.len());
    let sent = records
        .iter()
        .filter(|r| r["judge"][0]["cached"] != true)
        .count();
    assert_eq!(stats.embedding_requests as usize, sent);
    assert!(sent >= 8, "{sent}");
    // Again with --cache: no vector is bought twice.
    let again = run();
    assert_ne!(again, dir);
    assert_eq!(
        server.provider.stats().embedding_requests as usize,
        sent,
        "every vector came from the cache"
    );
    assert!(
        journal(&again)
            .iter()
            .all(|r| r["judge"][0]["cached"] == true),
        "the calls say they were cached"
    );
}

#[test]
fn the_embedding_example_runs_on_the_simulator() {
    let out = tempfile::tempdir().unwrap();
    let o = promptgauge(&repo().join("examples/scorers"))
        .args([
            "run",
            "embedding.yaml",
            "--base-url",
            "mock",
            "--quiet",
            "--out",
        ])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = journal(&run_dirs(out.path()).pop().unwrap());
    assert!(records.iter().all(|r| r["status"] == "graded"));
    assert!(records.iter().any(|r| r["score"] == 1.0));
}

#[test]
fn an_embedding_scorer_naming_an_endpoint_the_run_does_not_use_is_refused() {
    let examples = repo().join("examples/scorers");
    let d = tempfile::tempdir().unwrap();
    for f in ["cases.jsonl", "prompts/terse.txt", "prompts/policy.yaml"] {
        let to = d.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(examples.join(f), to).unwrap();
    }
    let text = std::fs::read_to_string(examples.join("embedding.yaml"))
        .unwrap()
        .replace("# endpoint: embedder ", "endpoint: embedder ");
    std::fs::write(d.path().join("bench.yaml"), text).unwrap();
    let o = promptgauge(d.path())
        .args(["run", "bench.yaml", "--base-url", "mock"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("asks endpoint `embedder` for its vectors"),
        "{stderr}"
    );
    assert!(run_dirs(&d.path().join("reports")).is_empty());
}

/// A run of the arithmetic bench scored by a script, against the simulator in this process.
struct Scored {
    records: Vec<Value>,
    stderr: String,
    code: Option<i32>,
    /// The requests the simulator saw.
    requests: u64,
}

/// Runs the arithmetic bench (`cases` × `variants`, `bench_extra` added to it) scored by
/// `script` as `spec`, with `extra` flags.
fn scored_run(
    script: &str,
    spec: &str,
    (cases, variants, bench_extra): (usize, usize, &str),
    extra: &[&str],
) -> Scored {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = arithmetic_bench(cases, variants, bench_extra);
    scored_by(b.path(), script, spec);
    let o = promptgauge(b.path())
        .args(["run", "bench.yaml", "--quiet", "--model", "m", "--base-url"])
        .arg(server.base_url())
        .args(extra)
        .output()
        .unwrap();
    let records = run_dirs(&b.path().join("reports"))
        .pop()
        .map(|d| journal(&d))
        .unwrap_or_default();
    Scored {
        records,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        code: o.status.code(),
        requests: server.provider.stats().requests,
    }
}

#[test]
fn a_scorer_out_of_step_is_replaced_and_what_it_started_is_stopped_with_it() {
    // Each request answered twice: the second line would answer the next job. It never
    // does: a reply carries its request's id; the process is replaced (before the next
    // request when its line is already there, else when its reply names another).
    let twice = r#"
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    right = req["case"]["expected"][0] in req["answer"]
    for _ in range(2):
        print(json.dumps({"id": req["id"], "score": 1 if right else 0, "detail": {"case": req["case"]["id"]}}), flush=True)
"#;
    let Scored {
        records, stderr, ..
    } = scored_run(
        twice,
        "{ kind: command, run: [python3, score.py], workers: 1 }",
        (8, 1, ""),
        &["--concurrency", "1", "--allow-failures", "8"],
    );
    assert_eq!(records.len(), 8, "{stderr}");
    let mut graded = 0;
    for r in &records {
        if r["status"] == "graded" {
            graded += 1;
            assert_eq!(r["score_detail"]["detail"]["case"], r["case_id"], "{r}");
        } else {
            assert!(r["error"].as_str().unwrap().contains("out of step"), "{r}");
        }
    }
    assert!(graded >= 4, "{graded} graded");
    // A reply without the request's id: the job fails, and says why.
    let no_id = "import json, sys\nfor line in sys.stdin:\n    print(json.dumps({'score': 1}), flush=True)\n";
    let Scored { records, .. } = scored_run(
        no_id,
        "{ kind: command, run: [python3, score.py], workers: 1 }",
        (2, 1, ""),
        &["--allow-failures", "2"],
    );
    assert!(
        records[0]["error"]
            .as_str()
            .unwrap()
            .contains("replied without the request's `id`"),
        "{}",
        records[0]
    );
    // A scorer that starts a process of its own and exits: the job fails with what
    // happened, and the process it started does not outlive the run.
    let forks = r#"
import json, subprocess, sys
for line in sys.stdin:
    subprocess.Popen(["sleep", "7771"])
    sys.exit(0)
"#;
    let Scored {
        records, stderr, ..
    } = scored_run(
        forks,
        "{ kind: command, run: [python3, score.py], workers: 1, timeout: 3s }",
        (2, 1, ""),
        &["--concurrency", "1", "--allow-failures", "5"],
    );
    assert!(!records.is_empty(), "{stderr}");
    let error = records[0]["error"].as_str().unwrap();
    assert!(error.contains("exited"), "{error}");
    let left = std::process::Command::new("pgrep")
        .args(["-f", "sleep 7771"])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn a_scorer_that_is_not_executable_is_refused_before_anything_is_sent() {
    let r = scored_run(
        "print('hi')\n",
        "{ kind: command, run: [./score.py] }",
        (4, 1, ""),
        &[],
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("`./score.py` is not executable"),
        "{}",
        r.stderr
    );
    assert_eq!(r.requests, 0);
}

#[cfg(unix)]
#[test]
fn a_second_ctrl_c_abandons_a_scorer_that_is_still_thinking() {
    let b = arithmetic_bench(6, 1, "");
    // It says when it has a request (a file beside the bench), then thinks for ten minutes.
    scored_by(
        b.path(),
        "import sys, time\nfor line in sys.stdin:\n    open('scoring', 'w').close()\n    time.sleep(600)\n",
        "{ kind: command, run: [python3, score.py], workers: 1, timeout: 600s }",
    );
    let (mut child, heard) = spawned_heard(
        b.path(),
        &[
            "run",
            "bench.yaml",
            "--base-url",
            "mock",
            "--concurrency",
            "1",
            "--grace",
            "1s",
        ],
    );
    // The first answer is being scored.
    let started = std::time::Instant::now();
    while !b.path().join("scoring").exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the scorer was never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = |name: &str| {
        std::process::Command::new("kill")
            .args([&format!("-{name}"), &child.id().to_string()])
            .status()
            .unwrap();
    };
    kill("INT");
    // The first is heard (the run says so) before the second is sent.
    heard.wait_for("interrupt again to abort them");
    kill("INT");
    let waited = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(20),
            "still scoring after two Ctrl-Cs"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
}

#[test]
fn what_a_command_scorer_spends_counts_against_the_budget() {
    // A scorer that calls a model of its own: 1,000,000 tokens an answer, at the judge's
    // price of $1 a million: $1 an answer, against a budget of $2.5.
    let spends = r#"
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({"id": req["id"], "score": 1, "usage": {"prompt_tokens": 1000000, "completion_tokens": 0}}), flush=True)
"#;
    let r = scored_run(
        spends,
        "{ kind: command, run: [python3, score.py], workers: 1 }",
        (
            12,
            1,
            // The bench's price is model m's, the one the run names.
            "endpoint: { model: m }\njudge: { price: { input_per_mtok: 1.0, output_per_mtok: 1.0 } }\n",
        ),
        &["--concurrency", "1", "--budget", "2.5"],
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    // The third answer's scorer spending took it past $2.5: nothing after it was sent.
    assert_eq!(r.records.len(), 3, "{}", r.stderr);
    assert_eq!(r.requests, 3);
}

#[test]
fn a_scorer_sees_only_the_variables_it_is_given_and_check_says_what_runs() {
    // It replies with the names of the variables it sees.
    let tells = r#"
import json, os, sys
for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({"id": req["id"], "score": 1, "detail": {"env": sorted(os.environ)}}), flush=True)
"#;
    let (_rt, server) = start_mock(MockConfig::default());
    let b = arithmetic_bench(2, 1, "");
    scored_by(
        b.path(),
        tells,
        "{ kind: command, run: [python3, score.py], env: [PG_GIVEN_TO_SCORER] }",
    );
    let line = std::fs::read_to_string(b.path().join("bench.yaml"))
        .unwrap()
        .lines()
        .position(|l| l.starts_with("grade:"))
        .unwrap()
        + 1;
    let check = promptgauge(b.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        said.contains(&format!(
            "scores with `python3 score.py` (bench.yaml line {line}); it sees PATH, HOME, LANG, TMPDIR, PG_GIVEN_TO_SCORER and no other variable"
        )),
        "{said}"
    );
    let o = promptgauge(b.path())
        .args(["run", "bench.yaml", "--model", "m", "--base-url"])
        .arg(server.base_url())
        .env("OPENAI_API_KEY", "sk-never-for-the-scorer")
        .env("PG_SECRET_TOKEN", "t")
        .env("PG_GIVEN_TO_SCORER", "yes")
        .env("PATH", std::env::var("PATH").unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("scores with `python3 score.py` (bench.yaml line"),
        "{stderr}"
    );
    let records = journal(&run_dirs(&b.path().join("reports")).pop().unwrap());
    assert_eq!(records.len(), 2);
    for r in &records {
        let env: Vec<&str> = r["score_detail"]["detail"]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            env.contains(&"PG_GIVEN_TO_SCORER") && env.contains(&"PATH"),
            "{env:?}"
        );
        for hidden in ["OPENAI_API_KEY", "PG_SECRET_TOKEN", "CI"] {
            assert!(
                !env.contains(&hidden),
                "{hidden} reached the scorer: {env:?}"
            );
        }
        // What an interpreter or its wrapper adds on its own (LC_CTYPE, PWD, SHLVL, _, a
        // pyenv shim's PYENV_*), and
        // nothing else beyond the allow-list.
        let own = ["LC_CTYPE", "PWD", "OLDPWD", "SHLVL", "_"];
        for name in &env {
            assert!(
                ["PATH", "HOME", "LANG", "TMPDIR", "PG_GIVEN_TO_SCORER"].contains(name)
                    || own.contains(name)
                    || name.trim_start_matches('_').starts_with("PYENV"),
                "{name} reached the scorer"
            );
        }
    }
    // A name that is not a variable's is refused at load, with nothing sent.
    scored_by(
        b.path(),
        tells,
        "{ kind: command, run: [python3, score.py], env: [\"A=1\"] }",
    );
    let o = promptgauge(b.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a variable's name"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn what_a_scorer_starts_in_a_session_of_its_own_ends_with_the_run() {
    // Each answer starts two processes that leave the scorer's process group: one as its
    // own child in a new session, one whose parent (a shell) exits at once.
    let escapes = r#"
import json, subprocess, sys
for line in sys.stdin:
    req = json.loads(line)
    subprocess.Popen(["setsid", "sleep", "7772"])
    subprocess.run(["sh", "-c", "setsid sleep 7773 &"])
    print(json.dumps({"id": req["id"], "score": 1}), flush=True)
"#;
    let Scored {
        records,
        stderr,
        code,
        ..
    } = scored_run(
        escapes,
        "{ kind: command, run: [python3, score.py], workers: 2 }",
        (3, 1, ""),
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(records.len(), 3, "{stderr}");
    for pattern in ["sleep 7772", "sleep 7773"] {
        let left = std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .unwrap();
        assert!(
            left.stdout.is_empty(),
            "{pattern} left running: {}",
            String::from_utf8_lossy(&left.stdout)
        );
    }
}

#[test]
fn an_all_zero_embedding_fails_the_answer_with_its_own_cause_never_a_zero() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = echo_bench("{ kind: embedding, threshold: 0.8 }");
    // An answer with no words: the simulator's vector for it is all zeros.
    std::fs::write(
        b.path().join("cases.jsonl"),
        "{\"id\": \"words\", \"vars\": {\"say\": \"Refunds take 5 days.\"}, \"expected\": \"Refunds take 5 days.\"}\n{\"id\": \"none\", \"vars\": {\"say\": \"?!\"}, \"expected\": \"Refunds take 5 days.\"}\n",
    )
    .unwrap();
    std::fs::write(
        b.path().join("bench.yaml"),
        "name: echo\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: { kind: embedding, threshold: 0.8 }\n",
    )
    .unwrap();
    let o = promptgauge(b.path())
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--allow-failures",
            "1",
            "--model",
            "m",
            "--base-url",
        ])
        .arg(server.base_url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let records = journal(&run_dirs(&b.path().join("reports")).pop().unwrap());
    let by_id = |id: &str| records.iter().find(|r| r["case_id"] == id).unwrap().clone();
    assert_eq!(by_id("words")["status"], "graded", "{stderr}");
    let none = by_id("none");
    assert_eq!(none["status"], "failed", "{none}");
    assert!(none.get("score").is_none_or(Value::is_null), "{none}");
    let error = none["error"].as_str().unwrap();
    assert!(
        error.contains("the answer's embedding is all zeros") && error.contains("not scored 0"),
        "{error}"
    );
    // The call it paid for is kept with it.
    assert_eq!(none["judge"].as_array().map(Vec::len), Some(1), "{none}");
}

/// A triage bench in a temp folder: `n` tickets answered as JSON `{category, priority}` by
/// two prompts of known accuracy (`sure` ~95%, `unsure` ~45%), scored by `grade`.
fn triage(n: usize, grade: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let categories = ["billing", "shipping", "account", "technical"];
    let priorities = ["low", "normal", "high"];
    let cases: String = (0..n)
        .map(|i| {
            format!(
                "{{\"id\": \"t-{i:02}\", \"vars\": {{\"ticket\": \"ticket {i}\"}}, \"expected\": {{\"category\": \"{}\", \"priority\": \"{}\"}}}}\n",
                categories[i % 4],
                priorities[i % 3]
            )
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    for (name, accuracy) in [("sure", 95), ("unsure", 45)] {
        std::fs::write(
            d.join(format!("{name}.yaml")),
            format!("name: {name}\nmessages:\n  - {{ role: system, content: \"Reply in JSON. simulated accuracy {accuracy}%\" }}\n  - {{ role: user, content: \"{{{{ ticket }}}}\" }}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        d.join("bench.yaml"),
        format!(
            "name: triage\ncases: cases.jsonl\nvariants: [sure.yaml, unsure.yaml]\ngrade: {grade}\n"
        ),
    )
    .unwrap();
    dir
}

/// Runs `bench.yaml` in `d` on the built-in simulator; its summary.json and journal.
fn run_parts(d: &Path, extra: &[&str]) -> (Value, Vec<Value>) {
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--no-store"])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    // What summary.schema.json describes, parts and all.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/summary.schema.json")).unwrap(),
    )
    .unwrap();
    let errors: Vec<String> = jsonschema::validator_for(&schema)
        .unwrap()
        .iter_errors(&summary)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    (summary, journal(&run))
}

/// The part `name` of a summary.
fn part<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["parts"]
        .as_array()
        .unwrap_or_else(|| panic!("no parts: {s}"))
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no part {name}: {}", s["parts"]))
}

/// Each arm's mean of the part `name`.
fn means(s: &Value, name: &str) -> Vec<f64> {
    part(s, name)["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["mean"].as_f64().unwrap())
        .collect()
}

#[test]
fn a_fields_bench_gives_each_field_its_figures_and_its_verdict_against_the_baseline() {
    let bench = triage(40, "{ kind: fields }");
    let d = bench.path();
    let (s, records) = run_parts(d, &[]);
    let names: Vec<&str> = s["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["category", "priority"]);
    for name in names {
        let p = part(&s, name);
        assert_eq!(p["binary"], true, "{p}");
        for (v, arm) in p["variants"]
            .as_array()
            .unwrap()
            .iter()
            .zip(["sure", "unsure"])
        {
            assert_eq!((v["name"].as_str(), v["n"].as_u64()), (Some(arm), Some(40)));
            let (low, mean, high) = (
                v["ci_low"].as_f64().unwrap(),
                v["mean"].as_f64().unwrap(),
                v["ci_high"].as_f64().unwrap(),
            );
            assert!(low <= mean && mean <= high && low < high, "{v}");
        }
        let c = &p["comparisons"].as_array().unwrap()[0];
        assert_eq!(
            (&c["variant"], &c["against"]),
            (&"unsure".into(), &"sure".into())
        );
        assert!(c["p_value"].is_number() && c["verdict"].is_string(), "{c}");
        let t = &c["table"];
        let cells: u64 = ["both_right", "only_variant", "only_reference", "both_wrong"]
            .iter()
            .map(|k| t[k].as_u64().unwrap())
            .sum();
        assert_eq!(cells, 40, "{c}");
    }
    // A wrong answer gets one field wrong: the whole is the mean of the two fields, and
    // the unsure prompt's fields are wrong more often than the sure one's.
    let (category, priority) = (means(&s, "category"), means(&s, "priority"));
    for (i, v) in s["variants"].as_array().unwrap().iter().enumerate() {
        let whole = v["mean_score"].as_f64().unwrap();
        assert!(
            (whole - (category[i] + priority[i]) / 2.0).abs() < 1e-9,
            "{v}: {category:?} {priority:?}"
        );
    }
    assert!(category[1] + priority[1] < category[0] + priority[0] - 0.3);
    assert!(
        category[1] < 1.0 && priority[1] < 1.0,
        "each field is wrong at times"
    );
    // Each job journals its fields' results as its parts.
    for r in &records {
        let parts = r["parts"].as_array().unwrap();
        assert_eq!(parts.len(), 2, "{r}");
        let mean =
            (parts[0]["score"].as_f64().unwrap() + parts[1]["score"].as_f64().unwrap()) / 2.0;
        assert_eq!(r["score"].as_f64().unwrap(), mean, "{r}");
    }
}

#[test]
fn an_all_bench_gives_each_named_part_its_figures_and_a_bad_name_is_said_by_check() {
    let bench = triage(
        24,
        "{ kind: all, of: [{ kind: fields, name: both fields }, { kind: json_schema, schema: { type: object, required: [category] } }, { kind: json_schema, name: known priority, schema: { properties: { priority: { enum: [low, normal, high] } } } }] }",
    );
    let d = bench.path();
    let (s, _) = run_parts(d, &[]);
    let names: Vec<&str> = s["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    // The named parts, the unnamed one by its kind, then the fields' own parts.
    assert_eq!(
        names,
        [
            "both fields",
            "json_schema",
            "known priority",
            "category",
            "priority"
        ]
    );
    assert_eq!(part(&s, "both fields")["binary"], false);
    assert_eq!(means(&s, "json_schema"), [1.0, 1.0]);
    // The whole is every part passing: never above its lowest part.
    for (i, v) in s["variants"].as_array().unwrap().iter().enumerate() {
        let whole = v["accuracy"].as_f64().or(v["mean_score"].as_f64()).unwrap();
        assert!(whole <= means(&s, "known priority")[i] + 1e-9, "{v}");
        assert!(whole <= means(&s, "both fields")[i] + 1e-9, "{v}");
    }

    // A name a gate could not name, or two parts of one name: `check` says where and how
    // to fix it, and nothing runs.
    for (grade, said) in [
        (
            "{ kind: all, of: [{ kind: fields, name: \"category=ok\" }] }",
            "the part name \"category=ok\" holds `=`",
        ),
        (
            "{ kind: mean, of: [{ kind: fields, name: x }, { kind: exact, name: x }] }",
            "two parts are named `x`",
        ),
        (
            "{ kind: all, of: [{ kind: fields, name: x, requird: [category] }] }",
            "unknown key `requird`",
        ),
    ] {
        let bad = triage(4, grade);
        let out = promptgauge(bad.path())
            .args(["check", "bench.yaml"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("bench.yaml:4") && stderr.contains(said) && stderr.contains("fix"),
            "{stderr}"
        );
    }
}

/// The triage example, as its comment says to run it: `check` passes, and the run gives
/// each field of its answers its own figures for each of its three prompts.
#[test]
fn the_triage_example_checks_and_runs_with_each_field_s_figures() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("triage");
    copy_dir(&repo().join("examples/triage"), &d);
    let out = promptgauge(dir.path())
        .args(["check", "triage/triage.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("30 cases × 3 variants"), "{said}");
    let out = promptgauge(dir.path())
        .args(["run", "triage/triage.yaml", "--quiet", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_dirs(&dir.path().join("reports")).pop().unwrap();
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    for field in ["category", "priority"] {
        let p = part(&s, field);
        let arms: Vec<&str> = p["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(arms, ["plain", "defined", "careful"]);
        assert_eq!(p["comparisons"].as_array().unwrap().len(), 2, "{p}");
    }
}

/// On a bench whose answers earn part marks, cost is said per point of score (`$/point`:
/// the cost over the sum of the scores), not per "correct" answer, which has no one
/// meaning there (issue 52, item 5).
#[test]
fn a_scored_bench_says_its_cost_per_point_not_per_correct_answer() {
    let bench = triage(20, "{ kind: fields }");
    let d = bench.path();
    let mut text = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    text.push_str("price: { input_per_mtok: 1.0, output_per_mtok: 2.0 }\n");
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("$/point"), "{stdout}");
    assert!(!stdout.contains("$/correct"), "{stdout}");
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        md.contains("cost per point") && !md.contains("cost per correct"),
        "{md}"
    );
    let csv = std::fs::read_to_string(run.join("summary.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().contains("cost_per_point_usd"),
        "{csv}"
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let records = journal(&run);
    for v in summary["variants"].as_array().unwrap() {
        let points: f64 = records
            .iter()
            .filter(|r| r["variant"] == v["name"])
            .map(|r| r["score"].as_f64().unwrap())
            .sum();
        let cost = v["cost_usd"].as_f64().unwrap();
        let per_point = v["cost_per_point_usd"].as_f64().unwrap();
        assert!((per_point - cost / points).abs() < 1e-12, "{v}");
    }
}

/// `{kind: expr}` scores each answer in-process by its expression, as a part of a `mean`
/// under its name; the answers are the simulator's echo, so each score is known.
#[test]
fn expr_parts_score_each_answer_by_their_expressions() {
    let b = echo_bench(
        "{ kind: mean, of: [{ kind: expr, name: exact, expr: \"output|trim == expected\" }, { kind: expr, name: short, expr: \"1 - (output|wordcount) / 20\" }, { kind: expr, expr: \"vars.say|wordcount == output|wordcount and 'Indeed' not in output\" }] }",
    );
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let (s, records) = run_parts(b.path(), &["--model", "m", "--base-url", url.as_str()]);
    let names: Vec<&str> = s["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["exact", "short", "expr"]);
    assert_eq!(records.len(), 12);
    for r in &records {
        let output = r["output"].as_str().unwrap().trim();
        let expected = match r["case_id"].as_str().unwrap() {
            "same" | "twice" => "Refunds reach your card within 5 business days.",
            _ => "",
        };
        let words = output.split_whitespace().count() as f64;
        let plain = r["variant"] == "plain";
        let parts = [
            f64::from(u8::from(output == expected)),
            1.0 - words / 20.0,
            f64::from(u8::from(plain)),
        ];
        let got: Vec<f64> = r["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["score"].as_f64().unwrap())
            .collect();
        assert_eq!(got, parts, "{r}");
        let mean = parts.iter().sum::<f64>() / 3.0;
        assert!((r["score"].as_f64().unwrap() - mean).abs() < 1e-12, "{r}");
    }
    // plain echoes `say`: its exact part is right on the two cases whose answer is `say`.
    assert_eq!(means(&s, "exact"), [2.0 / 6.0, 0.0]);
    assert_eq!(means(&s, "expr"), [1.0, 0.0]);
}

/// A broken expression is refused by `check` and `run` before anything is sent, naming the
/// bench file, the expression's line and the failing part; an expression that fails on an
/// answer fails that job with its cause, never a 0.
#[test]
fn a_broken_expr_sends_nothing_and_one_failing_on_an_answer_fails_its_job() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = echo_bench(
        "\n  kind: all\n  of:\n    - { kind: exact }\n    - kind: expr\n      expr: \"'Refunds' in output and output|length >> 3\"",
    );
    for command in ["check", "run"] {
        let o = promptgauge(b.path())
            .args([command, "bench.yaml", "--base-url"])
            .arg(server.base_url())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("bench.yaml:9")
                && stderr.contains("does not compile")
                && stderr.contains("at `> 3` (column 40)"),
            "{stderr}"
        );
    }
    let typo = echo_bench("{ kind: expr, expr: \"'Refunds' in ouptut\" }");
    let o = promptgauge(typo.path())
        .args(["run", "bench.yaml", "--base-url"])
        .arg(server.base_url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did you mean `output`?"), "{stderr}");
    assert_eq!(server.provider.stats().requests, 0);

    // `check` says what scores the answers.
    let fine = echo_bench("{ kind: expr, expr: \"'Refunds' in output\" }");
    let o = promptgauge(fine.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("scores with the expression `'Refunds' in output` (in-process"),
        "{stdout}"
    );

    // A score outside [0, 1] fails the job, naming the case: never clamped, never a 0.
    let out_of_range = echo_bench("{ kind: expr, expr: \"(output|wordcount) / 6\" }");
    let o = promptgauge(out_of_range.path())
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--no-store",
            "--allow-failures",
            "100",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run = run_dirs(&out_of_range.path().join("reports"))
        .pop()
        .unwrap();
    let records = journal(&run);
    let failed: Vec<&Value> = records.iter().filter(|r| r["status"] == "failed").collect();
    assert!(!failed.is_empty() && failed.len() < records.len());
    for r in failed {
        assert!(r["score"].is_null(), "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains("outside [0, 1]") && error.contains("(output|wordcount) / 6"),
            "{error}"
        );
    }
}

/// An expression that fails on every answer alike (a type error) stops the run after its
/// first jobs, as a `command` scorer that cannot score does: the rest are not bought.
#[test]
fn an_expr_that_fails_every_answer_alike_stops_the_run_early() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = arithmetic_bench(30, 2, "");
    scored_by(b.path(), "", "{ kind: expr, expr: \"output + 1 > 0\" }");
    let o = promptgauge(b.path())
        .args(["run", "bench.yaml", "--concurrency", "1", "--model", "m"])
        .arg("--base-url")
        .arg(server.base_url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("all failed the same way")
            && stderr.contains("the expression `output + 1 > 0` failed on this answer"),
        "{stderr}"
    );
    let sent = server.provider.stats().requests;
    assert!(sent < 20, "{sent}");
    // It says how many were sent and how many were not, as counted.
    assert!(
        stderr.contains(&format!(
            "so the run stopped: {sent} of its 60 jobs were sent and answered, {} not sent",
            60 - sent
        )),
        "{stderr}"
    );
}

/// A run small enough that every job was sent before its first jobs' failures were all in
/// (2 cases × 2 variants, 4 at once) says so: none is said "not sent" (issue 52, tryout 6).
#[test]
fn an_expr_failing_every_answer_of_a_run_sent_whole_claims_none_unsent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = arithmetic_bench(2, 2, "");
    scored_by(b.path(), "", "{ kind: expr, expr: \"output + 1 > 0\" }");
    let o = promptgauge(b.path())
        .args(["run", "bench.yaml", "--concurrency", "4", "--model", "m"])
        .args(["--no-store", "--quiet", "--base-url"])
        .arg(server.base_url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert_eq!(server.provider.stats().requests, 4);
    assert!(
        stderr.contains(
            "the first 4 jobs all failed the same way (all 4 jobs of the run were sent and answered): could not be scored: the expression `output + 1 > 0`"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("not sent"), "{stderr}");
    let run = run_dirs(&b.path().join("reports")).pop().unwrap();
    let record = std::fs::read_to_string(run.join("run.json")).unwrap();
    assert!(
        record.contains("all 4 jobs of the run were sent and answered")
            && !record.contains("not sent"),
        "{record}"
    );
}

/// A multiple-choice bench whose variants answer in different formats, each read its own
/// way (`extract:`) and all scored by one `exact` against the same letters: a letter, JSON
/// read at `/answer`, a tagged answer (with a few-shot example), and a reading the
/// simulator's plain answers never satisfy (a template over JSON that is not there).
fn formats_bench() -> tempfile::TempDir {
    const LETTERS: [&str; 4] = ["A", "B", "C", "D"];
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: String = (0..8)
        .map(|i| {
            format!(
                "{}\n",
                serde_json::json!({"id": format!("q-{i}"), "vars": {"question": format!("Question {i}: A, B, C or D?")}, "expected": LETTERS[i % 4]})
            )
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    let prompt = |name: &str, ask: &str, extract: &str| {
        std::fs::write(
            d.join(format!("{name}.yaml")),
            format!("name: {name}\nmessages:\n  - {{ role: system, content: \"{ask} simulated accuracy 100%\" }}\n{}  - {{ role: user, content: \"{{{{ question }}}}\" }}\n{extract}",
                if name == "tagged" { "  - { role: user, content: \"Which is prime: A) 4 B) 6 C) 7 D) 8?\" }\n  - { role: assistant, content: \"7 is prime.\\n<answer>C</answer>\" }\n" } else { "" }),
        )
        .unwrap();
    };
    prompt("letter", "Answer with the letter alone.", "");
    prompt(
        "json",
        "Answer in JSON: {\\\"answer\\\": letter}.",
        "extract: { json: /answer }\n",
    );
    prompt(
        "tagged",
        "Think, then answer in <answer></answer>.",
        "extract: { tag: answer }\n",
    );
    prompt(
        "unread",
        "Answer with the letter alone.",
        "extract: { template: \"{{ json.answer }}\" }\n",
    );
    std::fs::write(
        d.join("bench.yaml"),
        "name: formats\ncases: cases.jsonl\nvariants: [letter.yaml, json.yaml, tagged.yaml, unread.yaml]\ngrade: { kind: exact }\n",
    )
    .unwrap();
    dir
}

#[test]
fn variants_of_different_formats_each_read_their_answer_and_are_scored_on_the_same_expected() {
    let b = formats_bench();
    let d = b.path();
    let check = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        said.contains("json: reads /answer as a JSON pointer"),
        "{said}"
    );
    assert!(
        said.contains("tagged: reads the last <answer>…</answer> (extract: {tag: \"answer\"})"),
        "{said}"
    );
    assert!(
        said.contains("reads as \"C\""),
        "the few-shot example read: {said}"
    );
    assert!(!said.contains("letter: reads"), "{said}");

    let (summary, records) = run_parts(d, &[]);
    let accuracy: Vec<f64> = summary["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["accuracy"].as_f64().unwrap())
        .collect();
    assert_eq!(accuracy, [1.0, 1.0, 1.0, 0.0], "{summary}");
    // Each line, `read` and all, is what docs/results.schema.json describes.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/results.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for r in &records {
        let found: Vec<String> = validator.iter_errors(r).map(|e| e.to_string()).collect();
        assert!(found.is_empty(), "{found:?}: {r}");
    }
    let records = by_case(&records);
    for i in 0..8 {
        let letter = ["A", "B", "C", "D"][i % 4];
        let at = |v: &str| records[&(format!("q-{i}"), v.to_string())];
        // The letter variant reads its whole answer: no `read`.
        assert_eq!(at("letter")["output"], letter);
        assert!(at("letter").get("read").is_none(), "{}", at("letter"));
        // The raw answer is kept, and what was read beside it is what the scorer saw.
        let json = at("json");
        let raw: Value = serde_json::from_str(json["output"].as_str().unwrap()).unwrap();
        assert_eq!(raw, serde_json::json!({"answer": letter}));
        assert_eq!(
            (&json["read"], &json["score"]),
            (&Value::from(letter), &Value::from(1.0))
        );
        let tagged = at("tagged");
        assert!(
            tagged["output"]
                .as_str()
                .unwrap()
                .contains(&format!("<answer>{letter}</answer>")),
            "{tagged}"
        );
        assert_eq!(tagged["read"], letter);
        // Found nothing: wrong, saying why, never scored on the raw text.
        let unread = at("unread");
        assert_eq!(unread["output"], letter);
        assert_eq!(unread["score"], 0.0);
        assert!(unread.get("read").is_none());
        assert!(
            unread["not_found"].as_str().unwrap().contains("extract"),
            "{unread}"
        );
        assert!(
            unread["score_detail"]["error"]
                .as_str()
                .unwrap()
                .contains("found nothing"),
            "{unread}"
        );
    }
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("read: <code>B</code>"),
        "report.html shows what was read"
    );
    assert!(html.contains("answer as given (before extract:)"));
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        md.contains("unread: its extract: found no text from its template in 8 of 8 answers"),
        "{md}"
    );
}

#[test]
fn the_formats_example_reads_each_variant_s_answer_its_own_way() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("examples/formats"), dir.path());
    let check = promptgauge(dir.path())
        .args(["check", "formats.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(said.contains("its example answer"), "{said}");
    assert!(!said.contains("warning"), "{said}");
    std::fs::rename(
        dir.path().join("formats.yaml"),
        dir.path().join("bench.yaml"),
    )
    .unwrap();
    let (summary, records) = run_parts(dir.path(), &[]);
    assert_eq!(summary["variants"].as_array().unwrap().len(), 4);
    for r in &records {
        let reads = r["variant"] != "letter";
        assert_eq!(r.get("read").is_some(), reads, "{r}");
        // The simulator answered each in its format: nothing went unread.
        assert!(r.get("not_found").is_none(), "{r}");
    }
}

/// A variant whose prompt never asks for the format its `extract:` reads — JSON never
/// named, the tag never written — gets a warning from `check`, which says the simulator
/// cannot show it (it answers in the reading's format whatever the prompt asks); the
/// formats example, whose prompts all ask for their format, gets none (issue 52,
/// tryout 10).
#[test]
fn check_warns_of_a_variant_whose_prompt_never_asks_for_the_format_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("examples/formats"), dir.path());
    let edit = |file: &str, from: &str, to: &str| {
        let path = dir.path().join("prompts").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    };
    edit(
        "json.yaml",
        r#"'Reply with JSON only: {"answer": "<letter of the right option>"}.'"#,
        "\"Answer with the letter of the right option.\"",
    );
    edit(
        "json.yaml",
        "params: { response_format: { type: json_object } }\n",
        "",
    );
    edit("tagged.yaml", "inside <answer></answer>", "at the end");
    edit("tagged.yaml", "<answer>C</answer>", "So: C");
    let check = promptgauge(dir.path())
        .args(["check", "formats.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{said}");
    let warnings: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("warning:") && l.contains("prompt never"))
        .collect();
    assert_eq!(warnings.len(), 2, "{said}");
    assert!(
        warnings[0].contains("json's prompt never mentions JSON")
            && warnings[0].contains("reads /answer as a JSON pointer")
            && warnings[0].contains("the simulator answers in the format extract: reads"),
        "{said}"
    );
    assert!(
        warnings[1].contains("tagged's prompt never writes the tag <answer>"),
        "{said}"
    );
    // Asking for JSON by `response_format` alone is asking for it.
    edit(
        "json.yaml",
        "extract:",
        "params: { response_format: { type: json_object } }\nextract:",
    );
    let check = promptgauge(dir.path())
        .args(["check", "formats.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(!said.contains("json's prompt never"), "{said}");
    assert!(said.contains("tagged's prompt never"), "{said}");
}

/// `check` shows a regex reading as written in the prompt file — `\s` is `\s`, not the
/// doubled `\\s` of Rust's debug form — and its YAML reads back as the same regex
/// (issue 52, tryout 9).
#[test]
fn check_shows_a_regex_reading_as_written() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("examples/formats"), dir.path());
    let prompt = dir.path().join("prompts/answer-line.yaml");
    let text = std::fs::read_to_string(&prompt).unwrap().replace(
        "extract: { regex: \"Answer: ([A-D])\" }",
        r"extract: { regex: 'Answer:\s*([A-D])\b' }",
    );
    assert!(text.contains(r"'Answer:\s*([A-D])\b'"));
    std::fs::write(&prompt, text).unwrap();
    let check = promptgauge(dir.path())
        .args(["check", "formats.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(
        said.contains(
            r"answer-line: reads the first group of the regex `Answer:\s*([A-D])\b` (extract: {regex: 'Answer:\s*([A-D])\b'})"
        ),
        "{said}"
    );
    assert!(!said.contains(r"\\"), "{said}");
}

#[test]
fn a_reading_changes_no_request_so_the_cache_answers_a_variant_whose_reading_changed() {
    let b = formats_bench();
    let d = b.path();
    let (_, first) = run_parts(d, &["--cache"]);
    assert!(first.iter().all(|r| r.get("cached").is_none()));
    // The JSON variant now reads its answer through a template, lower-cased.
    let json = std::fs::read_to_string(d.join("json.yaml")).unwrap();
    let json = json.replace(
        "extract: { json: /answer }",
        "extract: { template: \"{{ json.answer | lower }}\" }",
    );
    std::fs::write(d.join("json.yaml"), json).unwrap();
    let (summary, again) = run_parts(d, &["--cache"]);
    // Every request was the same: every answer came from the cache, read anew.
    assert!(again.iter().all(|r| r["cached"] == true), "{again:?}");
    let json: Vec<&Value> = again.iter().filter(|r| r["variant"] == "json").collect();
    assert_eq!(json.len(), 8);
    for r in json {
        let raw: Value = serde_json::from_str(r["output"].as_str().unwrap()).unwrap();
        assert_eq!(r["read"], raw["answer"].as_str().unwrap().to_lowercase());
        assert_eq!(r["score"], 1.0, "exact ignores case by default: {r}");
    }
    assert_eq!(summary["variants"][1]["accuracy"], 1.0);
}

#[test]
fn view_shows_what_each_variant_read_beside_its_answer() {
    let b = formats_bench();
    let d = b.path();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = super::view::view(d, &[]);
    let (id, _) = super::view::first_run(&v, "");
    let json_read = "<pre>{&quot;answer&quot;:&quot;A&quot;}</pre><div class=\"muted\">read: <code>A</code></div>";
    for page in ["matrix", "answers"] {
        let (status, body) =
            super::view::get(&v.url, &format!("/runs/{id}/{page}?limit=100"), None);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(json_read), "{page}: {body}");
    }
    let records = journal(&run_dirs(&d.join("reports")).pop().unwrap());
    let job = records.iter().find(|r| r["variant"] == "tagged").unwrap()["job"].clone();
    let (_, body) = super::view::get(&v.url, &format!("/runs/{id}/jobs/{job}"), None);
    assert!(body.contains("<th>read (extract:)</th>"), "{body}");
}
