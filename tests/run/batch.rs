//! `run --batch` end to end on the simulator's batch APIs: a batched run answers as the
//! streamed run does, job for job; a run killed at any point of a batch's life resumes
//! without paying twice; expired jobs are sent again only when asked; waves stop sending a
//! decided variant's cases; an endpoint without a batch API is refused before anything is
//! sent. Assertions are on what the simulator saw (batches created, requests answered in
//! batches and how often each) as well as on what the tool wrote.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use promptgauge::mock::MockConfig;
use promptgauge::mock::server::MockServer;
use serde_json::Value;

fn run(d: &Path, server: &MockServer, out: &str, extra: &[&str]) -> std::process::Output {
    let url = server.base_url();
    promptgauge(d)
        .args(run_args(&url, out, extra))
        .output()
        .unwrap()
}

fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Starts `promptgauge ARGS` in `d` as CI would, its stdout dropped (and its stderr, unless
/// `keep_stderr`), to be killed.
fn spawn(d: &Path, args: &[&str], keep_stderr: bool) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .current_dir(d)
        .args(args)
        .env("CI", "true")
        .stdout(Stdio::null())
        .stderr(if keep_stderr {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()
        .unwrap()
}

/// `run`'s arguments in these tests: the bench, quiet, into `out`, at `url` as model `m`.
fn run_args<'a>(url: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "bench.yaml",
        "--quiet",
        "--out",
        out,
        "--base-url",
        url,
        "--model",
        "m",
    ];
    args.extend_from_slice(extra);
    args
}

/// Starts `run` as [`run`] would, to be killed.
fn start(
    d: &Path,
    server: &MockServer,
    out: &str,
    extra: &[&str],
    keep_stderr: bool,
) -> std::process::Child {
    let url = server.base_url();
    spawn(d, &run_args(&url, out, extra), keep_stderr)
}

/// The newest run folder under `root` once its journal says `ready` (within 60 s, else
/// `what` fails the test): for a test that kills or signals a run at a chosen moment.
fn run_when(root: &Path, what: &str, ready: impl Fn(&str) -> bool) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "{what}");
        if let Some(run) = run_dirs(root).pop() {
            let text = std::fs::read_to_string(run.join("results.jsonl")).unwrap_or_default();
            if ready(&text) {
                return run;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn only_run(root: &Path) -> PathBuf {
    let dirs = run_dirs(root);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// The journal's job records (its event lines aside).
fn records(run: &Path) -> Vec<Value> {
    journal(run)
        .into_iter()
        .filter(|r| r.get("event").is_none())
        .collect()
}

/// The journal's batch lines.
fn batch_lines(run: &Path) -> Vec<Value> {
    journal(run)
        .into_iter()
        .filter(|r| r["event"] == "batch")
        .collect()
}

/// (case, variant) → (status, score, output, prompt tokens, completion tokens), each once.
fn answers(run: &Path) -> HashMap<(String, String), [Value; 5]> {
    let mut out = HashMap::new();
    for r in records(run) {
        let key = (
            r["case_id"].as_str().unwrap().to_string(),
            r["variant"].as_str().unwrap().to_string(),
        );
        let value = [
            r["status"].clone(),
            r["score"].clone(),
            r["output"].clone(),
            r["usage"]["prompt_tokens"].clone(),
            r["usage"]["completion_tokens"].clone(),
        ];
        assert!(out.insert(key.clone(), value).is_none(), "{key:?} twice");
    }
    out
}

/// No request was answered twice in a batch: nothing was paid for twice.
fn each_paid_once(server: &MockServer) -> usize {
    let answered = server.provider.batched_requests();
    let twice: Vec<_> = answered.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "answered more than once: {twice:?}");
    answered.len()
}

#[test]
fn a_batched_run_answers_as_the_streamed_run_job_for_job_in_each_protocol() {
    for protocol in ["openai-chat", "openai-responses", "anthropic-messages"] {
        let (_rt, server) = start_mock(MockConfig::default());
        let bench = arithmetic_bench(12, 2, "");
        let d = bench.path();
        let p = ["--protocol", protocol];
        let streamed = run(d, &server, "streamed", &p);
        assert!(streamed.status.success(), "{}", said(&streamed));
        let streamed_generations = server.provider.stats().generations;
        assert_eq!(server.provider.batches_created(), 0);

        let batched = run(
            d,
            &server,
            "batched",
            &[&p[..], &["--batch", "--batch-poll", "10ms"]].concat(),
        );
        assert!(batched.status.success(), "{protocol}: {}", said(&batched));
        // One batch of 24 requests, each answered once, and nothing streamed.
        assert_eq!(server.provider.batches_created(), 1, "{protocol}");
        assert_eq!(each_paid_once(&server), 24, "{protocol}");
        assert_eq!(
            server.provider.stats().generations,
            streamed_generations + 24,
            "{protocol}: the batch's answers are generations; no job was streamed"
        );
        let (s, b) = (only_run(&d.join("streamed")), only_run(&d.join("batched")));
        assert_eq!(answers(&s), answers(&b), "{protocol}");
        for r in records(&b) {
            assert!(r["batch"].as_str().is_some_and(|id| !id.is_empty()), "{r}");
            assert!(r["latency_ms"].is_null() && r["ttft_ms"].is_null(), "{r}");
        }
        // Every report reads the run the same way: the same accuracy as streamed.
        let summary = |run: &Path| -> Value {
            serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap())
                .unwrap()
        };
        let (ss, bs) = (summary(&s), summary(&b));
        for (a, b) in ss["variants"]
            .as_array()
            .unwrap()
            .iter()
            .zip(bs["variants"].as_array().unwrap())
        {
            assert_eq!(a["accuracy"], b["accuracy"], "{protocol}");
            // Cached prompt tokens aside: the simulator's prompt cache was warmed by the
            // streamed run.
            for t in ["prompt", "completion"] {
                assert_eq!(a["tokens"][t], b["tokens"][t], "{protocol}");
            }
        }
        let lines = batch_lines(&b);
        let steps: Vec<&str> = lines.iter().map(|l| l["step"].as_str().unwrap()).collect();
        assert_eq!(steps, ["submitting", "submitted", "ended"], "{protocol}");
        assert_eq!(lines[0]["keys"].as_array().unwrap().len(), 24);
    }
}

#[test]
fn batches_are_split_at_the_size_asked_for() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(15, 2, "");
    let d = bench.path();
    let out = run(
        d,
        &server,
        "r",
        &["--batch", "--batch-poll", "10ms", "--batch-size", "8"],
    );
    assert!(out.status.success(), "{}", said(&out));
    // 30 jobs in batches of at most 8: four batches.
    assert_eq!(server.provider.batches_created(), 4);
    assert_eq!(each_paid_once(&server), 30);
    let lines = batch_lines(&only_run(&d.join("r")));
    let sizes: Vec<usize> = lines
        .iter()
        .filter(|l| l["step"] == "submitting")
        .map(|l| l["keys"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [8, 8, 8, 6]);
}

/// Copies a run folder, keeping its journal's first `lines` lines: what a `kill -9` leaves
/// (the journal is appended in order and flushed line by line, so a killed run's journal
/// is a prefix of the uninterrupted run's).
fn cut(run: &Path, to: &Path, lines: usize) {
    copy_dir(run, to);
    let text = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let kept: String = text.lines().take(lines).map(|l| format!("{l}\n")).collect();
    std::fs::write(to.join("results.jsonl"), kept).unwrap();
}

fn resume(d: &Path, run: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--quiet", "--resume", run.to_str().unwrap()];
    args.extend_from_slice(extra);
    promptgauge(d).args(&args).output().unwrap()
}

#[test]
fn a_run_killed_at_any_point_of_its_batch_resumes_without_paying_twice() {
    // OpenAI's batch API keeps the batch's name in its metadata; Anthropic's keeps none, so
    // a batch whose id never reached the journal is found by its size and time.
    for protocol in ["openai-chat", "anthropic-messages"] {
        killed_at_any_point(protocol);
    }
}

fn killed_at_any_point(protocol: &str) {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(10, 2, "");
    let d = bench.path();
    let out = run(
        d,
        &server,
        "whole",
        &["--batch", "--batch-poll", "10ms", "--protocol", protocol],
    );
    assert!(out.status.success(), "{}", said(&out));
    let whole = only_run(&d.join("whole"));
    let expected = answers(&whole);
    let total = journal(&whole).len();
    // submitting, submitted, 20 records, ended.
    assert_eq!(total, 23);
    assert_eq!(server.provider.batches_created(), 1);

    // Killed after the journal said `submitting`: the provider had accepted the batch but
    // its id never reached the journal (found by its name in the provider's list);
    // after `submitted` (polling); after 7 of its answers were recorded (downloading);
    // after all of them, before `ended`.
    for (lines, moment) in [
        (1, "between the provider's accept and the journal's write"),
        (2, "while polling"),
        (9, "while downloading"),
        (22, "after the last answer"),
    ] {
        let killed = d.join(format!("killed-{lines}"));
        cut(&whole, &killed, lines);
        let out = resume(d, &killed, &["--batch-poll", "10ms"]);
        assert!(out.status.success(), "{protocol}, {moment}: {}", said(&out));
        assert_eq!(
            server.provider.batches_created(),
            1,
            "{protocol}, {moment}: no batch created again"
        );
        assert_eq!(each_paid_once(&server), 20, "{protocol}, {moment}");
        assert_eq!(answers(&killed), expected, "{protocol}, {moment}");
    }

    // Killed before the provider had it: no batch of that name in its list. The same run,
    // as if it had been sent to another simulator, which has seen none: the resume submits
    // one, once.
    let (_rt2, fresh) = start_mock(MockConfig::default());
    let killed = d.join("killed-before");
    cut(&whole, &killed, 1);
    let record = std::fs::read_to_string(killed.join("run.json"))
        .unwrap()
        .replace(&server.base_url(), &fresh.base_url());
    std::fs::write(killed.join("run.json"), record).unwrap();
    let out = resume(d, &killed, &["--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(fresh.provider.batches_created(), 1);
    assert_eq!(each_paid_once(&fresh), 20);
    assert_eq!(answers(&killed), expected);
}

#[test]
fn kill_9_while_a_batch_runs_then_resume_collects_it() {
    // A batch that takes an hour: the run is killed while it polls, the batch then ends,
    // and the resume collects it without submitting anything again.
    let (_rt, server) = start_mock(MockConfig {
        batch_delay: Duration::from_secs(3600),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(20, 2, "");
    let d = bench.path();
    let mut child = start(
        d,
        &server,
        "killed",
        &["--batch", "--batch-size", "15", "--batch-poll", "10ms"],
        false,
    );
    let killed = run_when(
        &d.join("killed"),
        "the batches were never submitted",
        |text| text.matches("\"step\":\"submitted\"").count() == 3,
    );
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    assert_eq!(server.provider.batches_created(), 3);
    assert!(records(&killed).is_empty(), "nothing had ended");
    server.provider.release_batches();
    let out = resume(d, &killed, &["--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        server.provider.batches_created(),
        3,
        "adopted, not created again"
    );
    assert_eq!(each_paid_once(&server), 40);
    let got = answers(&killed);
    assert_eq!(got.len(), 40);
    // The same answers streaming gives.
    let streamed = run(d, &server, "streamed", &[]);
    assert!(streamed.status.success());
    assert_eq!(got, answers(&only_run(&d.join("streamed"))));
}

#[test]
fn kill_9_while_a_batch_is_submitted_then_resume_finds_it() {
    // The provider creates the batch at once and answers only 30 s later: the run is
    // killed in between, its journal saying `submitting` and no id. The resume finds the
    // batch (by name; at Anthropic, by its results) and creates nothing again.
    for protocol in ["openai-chat", "anthropic-messages"] {
        let (_rt, server) = start_mock(MockConfig {
            batch_create_delay: Duration::from_secs(30),
            ..MockConfig::default()
        });
        let bench = arithmetic_bench(6, 2, "");
        let d = bench.path();
        let mut child = start(
            d,
            &server,
            "killed",
            &["--batch", "--batch-poll", "10ms", "--protocol", protocol],
            false,
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.provider.batches_created() == 0 {
            assert!(Instant::now() < deadline, "{protocol}: never submitted");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let killed = only_run(&d.join("killed"));
        let text = std::fs::read_to_string(killed.join("results.jsonl")).unwrap();
        assert!(
            text.contains("\"step\":\"submitting\""),
            "{protocol}: {text}"
        );
        assert!(
            !text.contains("\"step\":\"submitted\""),
            "{protocol}: {text}"
        );
        let out = resume(d, &killed, &["--batch-poll", "10ms"]);
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        assert_eq!(
            server.provider.batches_created(),
            1,
            "{protocol}: found, not created again"
        );
        assert_eq!(each_paid_once(&server), 12, "{protocol}");
        assert_eq!(records(&killed).len(), 12, "{protocol}");
    }
}

#[test]
fn kill_9_while_a_batch_s_answers_are_recorded_then_resume_records_the_rest() {
    // The answers are judged by a slow judge (another simulator, 150 ms a call, one at a
    // time), so the run is still recording the ended batch's answers when it is killed.
    let (_rt, server) = start_mock(MockConfig::default());
    let (_rt2, judge) = start_mock(MockConfig {
        first_token_delay: Duration::from_millis(150),
        ..MockConfig::default()
    });
    let extra = format!(
        "judge: {{ base_url: \"{}\", model: judge }}\nlimits: {{ concurrency: 1 }}\n",
        judge.base_url()
    );
    let bench = arithmetic_bench(10, 2, &extra);
    let d = bench.path();
    let yaml = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace("grade: { kind: number }", "grade: { kind: judge }");
    std::fs::write(d.join("bench.yaml"), yaml).unwrap();
    let mut child = start(
        d,
        &server,
        "killed",
        &["--batch", "--batch-poll", "10ms"],
        false,
    );
    let killed = run_when(&d.join("killed"), "no answer was recorded", |text| {
        // Whole lines only: the journal is read while it is written.
        let whole = text.rsplit_once('\n').map_or("", |(w, _)| w);
        whole
            .lines()
            .filter(|l| !l.starts_with("{\"event\""))
            .count()
            >= 3
    });
    child.kill().unwrap();
    child.wait().unwrap();
    // (A line the kill tore is cut off by the resume, which says so.)
    let text = std::fs::read_to_string(killed.join("results.jsonl")).unwrap();
    let before = text.lines().filter(|l| l.starts_with("{\"job\"")).count();
    assert!(before < 20, "killed while recording: {before} of 20");
    assert!(!text.contains("\"step\":\"ended\""));
    let out = resume(d, &killed, &["--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        server.provider.batches_created(),
        1,
        "the ended batch is read again"
    );
    assert_eq!(each_paid_once(&server), 20);
    let all = records(&killed);
    assert_eq!(all.len(), 20);
    assert!(
        all.iter()
            .all(|r| r["status"] == "graded" && r["batch"] == all[0]["batch"])
    );
}

#[test]
fn an_expired_batch_s_jobs_fail_with_their_cause_and_are_sent_again_only_when_asked() {
    let (_rt, server) = start_mock(MockConfig {
        batch_expires: true,
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(10, 2, "");
    let d = bench.path();
    let out = run(d, &server, "r", &["--batch", "--batch-poll", "10ms"]);
    let run_dir = only_run(&d.join("r"));
    assert!(
        !out.status.success(),
        "failed jobs fail the run: {}",
        said(&out)
    );
    let failed: Vec<Value> = records(&run_dir)
        .into_iter()
        .filter(|r| r["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 10, "half the batch expired");
    for r in &failed {
        let error = r["error"].as_str().unwrap();
        assert!(error.contains("batch_expired"), "{error}");
        assert!(r["batch"].as_str().is_some(), "{r}");
    }
    assert_eq!(server.provider.batches_created(), 1);

    // A resume without the retry flag sends nothing again.
    let out = resume(d, &run_dir, &["--batch-poll", "10ms"]);
    assert_eq!(server.provider.batches_created(), 1, "{}", said(&out));
    assert_eq!(records(&run_dir).len(), 20);

    // With it, one batch of exactly the failed jobs, each a new request.
    let out = resume(d, &run_dir, &["--retry-failed", "--batch-poll", "10ms"]);
    assert_eq!(server.provider.batches_created(), 2, "{}", said(&out));
    let submitted: Vec<Value> = batch_lines(&run_dir)
        .into_iter()
        .filter(|l| l["step"] == "submitting")
        .collect();
    let keys = submitted[1]["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 10);
    assert!(
        keys.iter()
            .all(|k| k.as_str().unwrap().ends_with("-resend1"))
    );
    each_paid_once(&server);
}

#[test]
fn waves_stop_sending_a_decided_variant_s_cases() {
    // 600 cases, three variants: on the simulator "careful" is about 11 points better than
    // "plain" (decided within a wave or two), "polite" about the same (it takes longer).
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(600, 3, "sequential: { seed: 7 }\n");
    let d = bench.path();
    let out = run(
        d,
        &server,
        "r",
        &["--batch", "--batch-poll", "10ms", "--until-decided"],
    );
    assert!(out.status.success(), "{}", said(&out));
    let run_dir = only_run(&d.join("r"));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    let seq = &summary["sequential"];
    assert_eq!(seq["variants"][0]["verdict"], "better", "{seq}");
    let lines = journal(&run_dir);
    let submitted: usize = lines
        .iter()
        .filter(|l| l["step"] == "submitting")
        .map(|l| l["keys"].as_array().unwrap().len())
        .sum();
    let waves = server.provider.batches_created();
    assert!(waves >= 2, "the cases went out in waves: {waves}");
    // Each wave's batch, and the variants it asked for.
    let mut asked: Vec<(String, std::collections::BTreeSet<String>)> = Vec::new();
    for r in records(&run_dir) {
        let batch = r["batch"].as_str().unwrap().to_string();
        let variant = r["variant"].as_str().unwrap().to_string();
        match asked.iter_mut().find(|(b, _)| *b == batch) {
            Some((_, v)) => {
                v.insert(variant);
            }
            None => asked.push((batch, [variant].into())),
        }
    }
    // A decided variant is in no wave after its decision.
    let decided_at = |variant: &str| {
        lines
            .iter()
            .position(|l| l["event"] == "decided" && l["variant"] == variant)
    };
    let careful = decided_at("careful").expect("careful decided");
    let later_waves = lines[careful..]
        .iter()
        .filter(|l| l["step"] == "submitting")
        .count();
    assert!(
        later_waves >= 1,
        "the run went on after careful was decided: {asked:?}"
    );
    for (batch, variants) in asked.iter().rev().take(later_waves) {
        assert!(
            !variants.contains("careful"),
            "{batch} asked careful after its decision"
        );
    }
    // Only the waves the decisions needed were sent, each job paid for once.
    assert_eq!(each_paid_once(&server), submitted);
    assert!(submitted < 1800, "{submitted} of 1800 jobs submitted");
    assert_eq!(
        summary["jobs_finished"].as_u64().unwrap() as usize,
        submitted
    );
}

/// Once every variant is decided, no wave goes out after the one the decisions fell in:
/// what the workers handed over meanwhile (the horizon moved as the wave's answers came
/// back) is let go, also when the last worker leaves as the decisions land.
#[test]
fn no_wave_goes_out_once_every_variant_is_decided() {
    let (_rt, server) = start_mock(MockConfig::default());
    let mut all_decided = 0;
    for seed in 1..=4 {
        let bench = arithmetic_bench(600, 3, &format!("sequential: {{ seed: {seed} }}\n"));
        let d = bench.path();
        let flags = ["--batch", "--batch-poll", "10ms", "--until-decided"];
        let out = run(d, &server, "r", &flags);
        assert!(out.status.success(), "{}", said(&out));
        let lines = journal(&only_run(&d.join("r")));
        let decided: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i]["event"] == "decided")
            .collect();
        let Some(&last) = decided.last().filter(|_| decided.len() == 2) else {
            continue;
        };
        all_decided += 1;
        let later: Vec<&Value> = lines[last..]
            .iter()
            .filter(|l| l["step"] == "submitting")
            .collect();
        assert!(
            later.is_empty(),
            "seed {seed}: a wave after every decision: {later:?}"
        );
        // Each batch holds the plan's next jobs, in the plan's order.
        for l in lines.iter().filter(|l| l["step"] == "submitting") {
            let jobs: Vec<u64> = l["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| {
                    k.as_str()
                        .unwrap()
                        .rsplit('-')
                        .next()
                        .unwrap()
                        .parse()
                        .unwrap()
                })
                .collect();
            assert!(jobs.is_sorted(), "seed {seed}: {jobs:?}");
        }
    }
    assert!(all_decided >= 1, "no seed decided every variant");
}

#[test]
fn batch_at_an_endpoint_without_a_batch_api_is_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig {
        no_batch_api: true,
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(5, 2, "");
    let d = bench.path();
    let out = run(d, &server, "r", &["--batch"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let text = said(&out);
    assert!(text.contains("has no batch API"), "{text}");
    assert!(text.contains("vLLM"), "{text}");
    assert_eq!(server.provider.stats().generations, 0);
    assert_eq!(server.provider.batches_created(), 0);
}

#[test]
fn batched_jobs_cost_the_batch_price_and_the_reports_say_what_streaming_would_have() {
    let (_rt, server) = start_mock(MockConfig::default());
    // The bench's price is model m's, the model the runs name.
    let bench = arithmetic_bench(12, 2, "endpoint: { model: m }\n");
    let d = bench.path();
    let yaml = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace(
            "price: { input_per_mtok: 1.0, output_per_mtok: 2.0 }",
            "price: { input_per_mtok: 1.0, output_per_mtok: 2.0, batch_discount: 0.5 }",
        );
    std::fs::write(d.join("bench.yaml"), yaml).unwrap();
    let check = promptgauge(d)
        .args(["check", "bench.yaml", "--batch"])
        .output()
        .unwrap();
    assert!(
        said(&check).contains("costed at its price"),
        "{}",
        said(&check)
    );
    assert!(run(d, &server, "s", &[]).status.success());
    let out = run(d, &server, "b", &["--batch", "--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    let summary = |run: &Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
    };
    let (s, b) = (only_run(&d.join("s")), only_run(&d.join("b")));
    let (ss, bs) = (summary(&s), summary(&b));
    for (streamed, batched) in ss["variants"]
        .as_array()
        .unwrap()
        .iter()
        .zip(bs["variants"].as_array().unwrap())
    {
        assert_eq!(batched["batched"], 12);
        assert!(streamed.get("batched").is_none());
        let full = batched["batched_streaming_cost_usd"].as_f64().unwrap();
        let paid = batched["batched_cost_usd"].as_f64().unwrap();
        let cost = batched["cost_usd"].as_f64().unwrap();
        assert!((paid - full / 2.0).abs() < 1e-12, "{paid} {full}");
        assert!((cost - paid).abs() < 1e-12);
        assert!(paid > 0.0);
        // Streamed, the same answers (no cached price: cached tokens at the input price)
        // cost what the batched run says streaming would have.
        let streamed_cost = streamed["cost_usd"].as_f64().unwrap();
        assert!(
            (streamed_cost - full).abs() < 1e-12,
            "{streamed_cost} {full}"
        );
        assert!((batched["spent_usd"].as_f64().unwrap() - paid).abs() < 1e-12);
    }
    let md = std::fs::read_to_string(b.join("summary.md")).unwrap();
    assert!(
        md.contains("24 answers came through the provider's batch API"),
        "{md}"
    );
    // Under --quiet the terminal holds the table and the verdicts; the note is in the reports.
    assert!(md.contains("where streaming them would have cost"), "{md}");
}

#[test]
fn batches_still_running_when_the_wait_ends_are_left_for_a_resume() {
    let (_rt, server) = start_mock(MockConfig {
        batch_delay: Duration::from_secs(3600),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(6, 2, "");
    let d = bench.path();
    let out = run(
        d,
        &server,
        "r",
        &["--batch", "--batch-poll", "10ms", "--batch-wait", "200ms"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("batches still running at the provider: 12 jobs"),
        "{text}"
    );
    assert!(text.contains("promptgauge run --resume"), "{text}");
    let dir = only_run(&d.join("r"));
    assert!(records(&dir).is_empty());
    server.provider.release_batches();
    let out = resume(d, &dir, &["--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.provider.batches_created(), 1);
    assert_eq!(each_paid_once(&server), 12);
    assert_eq!(records(&dir).len(), 12);
}

#[test]
fn sigterm_stops_polling_at_once_and_batch_cancel_cancels_what_runs() {
    let (_rt, server) = start_mock(MockConfig {
        batch_delay: Duration::from_secs(3600),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(6, 2, "");
    let d = bench.path();
    let url = server.base_url();
    for cancel in [false, true] {
        let out = format!("r{cancel}");
        let mut args = vec![
            "run",
            "bench.yaml",
            "--quiet",
            "--out",
            &out,
            "--base-url",
            &url,
            "--model",
            "m",
            "--batch",
            "--batch-poll",
            "10ms",
        ];
        if cancel {
            args.push("--batch-cancel");
        }
        let child = spawn(d, &args, true);
        run_when(&d.join(&out), "never submitted", |text| {
            text.contains("\"step\":\"submitted\"")
        });
        let stopped = Instant::now();
        std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(130), "{cancel}");
        // Polling stopped at once: no grace period, no wait for the hour-long batch.
        assert!(stopped.elapsed() < Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--resume"), "{stderr}");
        let status = server.provider.batch_statuses().last().unwrap().1.clone();
        let want = if cancel { "cancelled" } else { "in_progress" };
        assert_eq!(status, want, "--batch-cancel {cancel}");
    }
}

#[test]
fn the_batch_example_runs_every_job_by_batch_at_both_providers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = repo().join("examples/batch");
    std::fs::create_dir_all(d.join("prompts")).unwrap();
    for f in [
        "nightly.yaml",
        "cases.jsonl",
        "prompts/plain.yaml",
        "prompts/careful.yaml",
    ] {
        std::fs::copy(src.join(f), d.join(f)).unwrap();
    }
    let check = promptgauge(d)
        .args(["check", "nightly.yaml"])
        .output()
        .unwrap();
    assert!(
        said(&check).contains("costed at its price"),
        "{}",
        said(&check)
    );
    let out = promptgauge(d)
        .args(["run", "nightly.yaml", "--no-store", "--batch-poll", "10ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let run = only_run(&d.join("reports"));
    let all = records(&run);
    assert_eq!(all.len(), 240);
    assert!(
        all.iter().all(|r| r["batch"].is_string()),
        "every job by batch"
    );
    // One batch per endpoint: OpenAI's files and Anthropic's message batches.
    let lines = batch_lines(&run);
    let ends: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l["step"] == "ended")
        .map(|l| {
            (
                l["endpoint"].as_str().unwrap(),
                l["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert!(ends.contains(&("gpt", "completed")) && ends.contains(&("claude", "ended")));
    let text = said(&out);
    assert!(
        text.contains("240 answers came through the provider's batch API"),
        "{text}"
    );
}

#[test]
fn a_batch_whose_creation_answer_is_lost_is_found_not_created_twice() {
    // The provider creates each batch but its answer is lost (a 502): the client looks in
    // the list before creating again — by name in OpenAI's metadata; Anthropic keeps none,
    // so every batch of the size and time is a candidate until its results say whose it is.
    // Two Anthropic endpoints at one provider: their batches are alike, and each endpoint
    // records only its own requests.
    for protocol in ["openai-chat", "anthropic-messages"] {
        let (_rt, server) = start_mock(MockConfig {
            batch_lose_create: true,
            ..MockConfig::default()
        });
        let url = server.base_url();
        let extra = format!(
            "endpoints:\n  - {{ name: one, base_url: \"{url}\", model: m, protocol: {protocol}, batch: true }}\n  - {{ name: two, base_url: \"{url}\", model: m, protocol: {protocol}, batch: true }}\n"
        );
        let bench = arithmetic_bench(8, 2, &extra);
        let d = bench.path();
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--quiet", "--batch-poll", "10ms"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        assert_eq!(
            server.provider.batches_created(),
            2,
            "{protocol}: one per endpoint"
        );
        assert_eq!(each_paid_once(&server), 32, "{protocol}");
        let run = only_run(&d.join("reports"));
        let all = records(&run);
        assert_eq!(all.len(), 32, "{protocol}");
        assert!(all.iter().all(|r| r["status"] == "graded"), "{protocol}");
        // Each endpoint's answers from its own batch.
        let batch_of = |e: &str| -> std::collections::BTreeSet<String> {
            all.iter()
                .filter(|r| r["endpoint"] == e)
                .map(|r| r["batch"].as_str().unwrap().to_string())
                .collect()
        };
        let (one, two) = (batch_of("one"), batch_of("two"));
        assert_eq!((one.len(), two.len()), (1, 1), "{protocol}");
        assert_ne!(one, two, "{protocol}");
        // Each batch is journaled as the run's before any of its answers: a kill while
        // they are recorded leaves a resume that knows the batch.
        let lines = journal(&run);
        for e in ["one", "two"] {
            let submitted = lines
                .iter()
                .position(|l| l["step"] == "submitted" && l["endpoint"] == e)
                .unwrap_or_else(|| panic!("{protocol}: {e} never submitted"));
            let first = lines
                .iter()
                .position(|l| l.get("event").is_none() && l["endpoint"] == e)
                .unwrap();
            assert!(submitted < first, "{protocol}: {e}");
        }
    }
}

#[test]
fn a_candidate_batch_is_never_cancelled_nor_left_under_its_id() {
    // Anthropic's batches keep no metadata: a batch whose creation's answer was lost is
    // a candidate until its results say whose it is. Until then it may be another's: a
    // stop with --batch-cancel leaves it alone, and a run that stops waiting journals no
    // id for it, so the resume looks for it again (and finds it).
    let (_rt, server) = start_mock(MockConfig {
        batch_lose_create: true,
        batch_delay: Duration::from_secs(3600),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(5, 2, "");
    let d = bench.path();
    let p = [
        "--protocol",
        "anthropic-messages",
        "--batch",
        "--batch-poll",
        "10ms",
    ];
    let out = run(
        d,
        &server,
        "r",
        &[&p[..], &["--batch-wait", "300ms", "--batch-cancel"]].concat(),
    );
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    assert_eq!(server.provider.batches_created(), 1);
    let status = server.provider.batch_statuses()[0].1.clone();
    assert_eq!(status, "in_progress", "a candidate is not cancelled");
    let dir = only_run(&d.join("r"));
    let left: Vec<Value> = batch_lines(&dir)
        .into_iter()
        .filter(|l| l["step"] == "left")
        .collect();
    assert_eq!(left.len(), 1);
    assert!(left[0]["id"].is_null(), "{}", left[0]);
    server.provider.release_batches();
    let out = resume(d, &dir, &["--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        server.provider.batches_created(),
        1,
        "found again, not created again"
    );
    assert_eq!(each_paid_once(&server), 10);
    assert_eq!(records(&dir).len(), 10);
}

#[test]
fn a_resume_may_not_move_an_endpoint_whose_batches_are_still_open() {
    let (_rt, server) = start_mock(MockConfig {
        batch_delay: Duration::from_secs(3600),
        ..MockConfig::default()
    });
    let (_rt2, other) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(4, 2, "");
    let d = bench.path();
    let out = run(
        d,
        &server,
        "r",
        &["--batch", "--batch-poll", "10ms", "--batch-wait", "100ms"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let dir = only_run(&d.join("r"));
    let moved = promptgauge(d)
        .args([
            "run",
            "--resume",
            dir.to_str().unwrap(),
            "--base-url",
            &other.base_url(),
        ])
        .output()
        .unwrap();
    assert_eq!(moved.status.code(), Some(2), "{}", said(&moved));
    assert!(said(&moved).contains("still open at"), "{}", said(&moved));
    assert_eq!(other.provider.stats().requests, 0);
    assert_eq!(other.provider.batches_created(), 0);
    // Where they were submitted, they are collected.
    server.provider.release_batches();
    let out = resume(d, &dir, &["--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(records(&dir).len(), 8);
    assert_eq!(each_paid_once(&server), 8);
}

#[test]
fn batched_answers_go_to_the_cache_and_a_cached_job_is_never_submitted() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(6, 2, "");
    let d = bench.path();
    let first = run(
        d,
        &server,
        "r",
        &["--batch", "--batch-poll", "10ms", "--cache"],
    );
    assert!(first.status.success(), "{}", said(&first));
    assert_eq!(server.provider.batches_created(), 1);
    let again = run(
        d,
        &server,
        "r",
        &["--batch", "--batch-poll", "10ms", "--cache"],
    );
    assert!(again.status.success(), "{}", said(&again));
    assert_eq!(
        server.provider.batches_created(),
        1,
        "nothing left to submit"
    );
    assert_eq!(each_paid_once(&server), 12);
    let runs = run_dirs(&d.join("r"));
    let second = records(runs.last().unwrap());
    assert_eq!(second.len(), 12);
    assert!(
        second
            .iter()
            .all(|r| r["cached"] == true && r["batch"].is_null())
    );
}

#[test]
fn two_results_for_one_request_fail_that_job_and_both_are_kept() {
    for protocol in ["openai-chat", "anthropic-messages"] {
        let (_rt, server) = start_mock(MockConfig {
            batch_duplicate: true,
            ..MockConfig::default()
        });
        let bench = arithmetic_bench(6, 1, "");
        let d = bench.path();
        let out = run(
            d,
            &server,
            "r",
            &[
                "--protocol",
                protocol,
                "--batch",
                "--batch-poll",
                "10ms",
                "--allow-failures",
                "1",
            ],
        );
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        let all = records(&only_run(&d.join("r")));
        assert_eq!(all.len(), 6, "{protocol}: one record per job");
        let failed: Vec<&Value> = all.iter().filter(|r| r["status"] == "failed").collect();
        assert_eq!(failed.len(), 1, "{protocol}: {all:?}");
        let r = failed[0];
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains("provider returned two results"),
            "{protocol}: {error}"
        );
        assert!(r.get("score").is_none_or(Value::is_null), "{r}");
        let given = r["score_detail"]["results"].as_array().unwrap();
        assert_eq!(given.len(), 2, "{protocol}: both lines kept");
        // Each is billed: the usage of both.
        let one = &given[0];
        let tokens = if protocol == "openai-chat" {
            one["response"]["body"]["usage"]["completion_tokens"].as_u64()
        } else {
            one["result"]["message"]["usage"]["output_tokens"].as_u64()
        }
        .unwrap();
        assert_eq!(
            r["usage"]["completion_tokens"].as_u64(),
            Some(2 * tokens),
            "{r}"
        );
        assert_eq!(all.iter().filter(|r| r["status"] == "graded").count(), 5);
    }
}

#[test]
fn a_refusal_through_a_batch_is_the_answer_that_failed_it_is_when_streamed() {
    for protocol in ["openai-chat", "openai-responses", "anthropic-messages"] {
        let (_rt, server) = start_mock(MockConfig {
            refuse_on: Some("is 3 + 3?".into()),
            ..MockConfig::default()
        });
        let bench = arithmetic_bench(6, 1, "");
        let d = bench.path();
        let out = run(
            d,
            &server,
            "r",
            &["--protocol", protocol, "--batch", "--batch-poll", "10ms"],
        );
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{protocol}: {}",
            said(&out)
        );
        let all = records(&only_run(&d.join("r")));
        assert_eq!(all.len(), 6, "{protocol}");
        let refused: Vec<&Value> = all.iter().filter(|r| r["refused"] == true).collect();
        assert_eq!(refused.len(), 1, "{protocol}: {all:?}");
        let r = refused[0];
        assert_eq!(r["case_id"], "add-03", "{protocol}");
        assert_eq!(r["status"], "graded", "{protocol}: {r}");
        assert_eq!(r["score"], 0.0, "{protocol}: {r}");
        assert_eq!(r["output"], promptgauge::mock::REFUSAL, "{protocol}: {r}");
        assert!(r["batch"].is_string(), "{protocol}: answered by the batch");
        let s: Value = serde_json::from_str(
            &std::fs::read_to_string(only_run(&d.join("r")).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(s["variants"][0]["refused"], 1, "{protocol}");
        assert_eq!(s["variants"][0]["n"], 6, "{protocol}");
    }
}

#[test]
fn a_budget_resume_counts_the_batch_it_adopts_and_never_refuses_to_collect_it() {
    // A batch that takes an hour, under a budget that pays for about half the plan: the
    // run is killed while it polls. The resume (without --run-to-budget) collects the
    // batch, counts what it was held for, and sends nothing the budget cannot pay.
    let (_rt, server) = start_mock(MockConfig {
        batch_delay: Duration::from_secs(3600),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(40, 2, "endpoint: { model: m }\n");
    let d = bench.path();
    let mut child = start(
        d,
        &server,
        "killed",
        &[
            "--batch",
            "--batch-poll",
            "10ms",
            "--budget",
            "0.009",
            "--run-to-budget",
        ],
        false,
    );
    let killed = run_when(&d.join("killed"), "the batch was never submitted", |text| {
        text.contains("\"step\":\"submitted\"")
    });
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    let submitting: Vec<Value> = batch_lines(&killed)
        .into_iter()
        .filter(|l| l["step"] == "submitting")
        .collect();
    assert_eq!(submitting.len(), 1);
    let first = submitting[0]["keys"].as_array().unwrap().len();
    assert!(first > 20 && first < 80, "{first} jobs fit the budget");
    // The journal holds what the batch was held back for: about $0.00021 a job.
    let reserved = submitting[0]["reserved_usd"].as_f64().unwrap();
    assert!(
        reserved > 0.0002 * first as f64 && reserved <= 0.009,
        "{reserved}"
    );
    server.provider.release_batches();
    let out = promptgauge(d)
        .args(["run", "--resume", killed.to_str().unwrap()])
        .args(["--batch-poll", "10ms"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Collected (not refused), the rest not sent: the budget was held by the batch.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!("collecting {first} jobs already submitted")),
        "{stderr}"
    );
    assert_eq!(
        server.provider.batches_created(),
        1,
        "nothing new: {stderr}"
    );
    assert_eq!(each_paid_once(&server), first);
    assert_eq!(records(&killed).len(), first);
    assert!(stderr.contains("the budget is reached"), "{stderr}");
}

/// A batch lane in waves beside a lane that goes down: the cases the dead lane never
/// answers keep the tests' horizon where it is, so the batch lane's worker, waiting on it
/// with nothing out, is let go on (as the old driver moved the horizon after each wave),
/// and the run ends instead of waiting for ever.
#[test]
fn a_batch_lane_in_waves_goes_on_when_the_other_lane_goes_down() {
    let (_a, batched) = start_mock(MockConfig::default());
    let (_b, dying) = start_mock(MockConfig {
        outage_after: Some(6),
        ..MockConfig::default()
    });
    let extra = format!(
        "sequential: {{ seed: 5 }}\nlimits: {{ concurrency: 2, max_attempts: 2 }}\nendpoints:\n  - {{ name: batched, base_url: \"{}\", model: m, batch: true }}\n  - {{ name: dying, base_url: \"{}\", model: m }}\n",
        batched.base_url(),
        dying.base_url()
    );
    let bench = arithmetic_bench(300, 2, &extra);
    let d = bench.path();
    let mut child = spawn(
        d,
        &[
            "run",
            "bench.yaml",
            "--quiet",
            "--no-store",
            "--out",
            "r",
            "--until-decided",
            "--batch-poll",
            "10ms",
        ],
        false,
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the run did not end: the batch lane waits for ever");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3), "an incomplete run");
    // The batch lane went past its first wave.
    assert!(
        batched.provider.batches_created() >= 2,
        "{}",
        batched.provider.batches_created()
    );
}

#[test]
fn best_of_many_by_batch_goes_out_in_waves_that_leave_the_losers_out() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = crate::sequential::best_bench(600, &[70, 70, 60, 80, 70, 62]);
    let d = bench.path();
    let out = run(
        d,
        &server,
        "r",
        &["--batch", "--batch-poll", "10ms", "--best", "--seed", "3"],
    );
    assert!(out.status.success(), "{}", said(&out));
    let run_dir = only_run(&d.join("r"));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    let best = &summary["sequential"]["best"];
    assert_eq!(best["named"], serde_json::json!(["v3"]), "{best}");
    let lines = journal(&run_dir);
    let waves = server.provider.batches_created();
    assert!(waves >= 2, "the cases went out in waves: {waves}");
    // An arm out is in no wave submitted after it went.
    for e in best["eliminated"].as_array().unwrap() {
        let variant = e["variant"].as_str().unwrap();
        let out_at = lines
            .iter()
            .position(|l| l["event"] == "decided" && l["variant"] == variant)
            .expect("journaled");
        let later: Vec<&Value> = lines[out_at..]
            .iter()
            .filter(|l| l["step"] == "submitting")
            .collect();
        let later_batches: Vec<&str> = later.iter().filter_map(|l| l["name"].as_str()).collect();
        for r in records(&run_dir) {
            let in_later = r["batch"]
                .as_str()
                .is_some_and(|b| later_batches.contains(&b));
            assert!(
                !(in_later && r["variant"] == variant),
                "{variant} asked in a wave after it went out"
            );
        }
    }
    let submitted: usize = lines
        .iter()
        .filter(|l| l["step"] == "submitting")
        .map(|l| l["keys"].as_array().unwrap().len())
        .sum();
    assert_eq!(each_paid_once(&server), submitted);
    assert!(submitted < 3000, "{submitted} of 3600 jobs submitted");
}
