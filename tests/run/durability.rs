//! Runs that are killed, interrupted and resumed: nothing finished is lost, nothing is
//! recorded twice, and the final summary is the one an uninterrupted run gives.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use promptgauge::mock::{Faults, MockConfig};
use promptgauge::report::Summary;
use serde_json::Value;

/// Waits until `ready` holds, failing the test after a generous bound.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn journal_lines(run: &Path) -> usize {
    std::fs::read_to_string(run.join("results.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn summary(run: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
}

/// (case, variant, repeat) → (score, extracted), and no key twice.
fn results(run: &Path) -> HashMap<(String, String, u64), (Value, Value)> {
    let mut out = HashMap::new();
    for r in journal(run) {
        let key = (
            r["case_id"].as_str().unwrap().to_string(),
            r["variant"].as_str().unwrap().to_string(),
            r["repeat"].as_u64().unwrap(),
        );
        let prev = out.insert(key.clone(), (r["score"].clone(), r["extracted"].clone()));
        assert!(prev.is_none(), "{key:?} recorded twice");
    }
    out
}

fn only_run(root: &Path) -> PathBuf {
    let dirs = run_dirs(root);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn kill_9_halfway_then_resume_matches_an_uninterrupted_run() {
    let (_rt, server) = start_mock(MockConfig {
        token_delay: Duration::from_millis(2),
        ..MockConfig::default()
    });
    let url = server.base_url();
    let bench = arithmetic_bench(150, 4, "limits: { concurrency: 4 }\n");
    let d = bench.path();

    promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--out",
            "whole",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .assert()
        .success();
    let whole = only_run(&d.join("whole"));

    let mut child = spawned(
        d,
        &[
            "run",
            "bench.yaml",
            "--quiet",
            "--out",
            "killed",
            "--base-url",
            &url,
            "--model",
            "m",
        ],
    );
    wait_for("half the jobs", || {
        run_dirs(&d.join("killed"))
            .first()
            .is_some_and(|r| journal_lines(r) >= 300)
    });
    child.kill().unwrap(); // SIGKILL: no handler runs, no report is written
    child.wait().unwrap();
    let killed = only_run(&d.join("killed"));
    let before = journal_lines(&killed);
    assert!(
        (300..600).contains(&before),
        "{before} jobs finished before the kill"
    );
    assert!(!killed.join("summary.json").exists());
    // A crash can also tear the line being written; resume must drop it.
    let mut j = std::fs::OpenOptions::new()
        .append(true)
        .open(killed.join("results.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut j, br#"{"job":599,"case_id":"add-150","vari"#).unwrap();
    drop(j);

    let requests_before = server.provider.stats().requests;
    let out = promptgauge(d)
        .args([
            "run",
            "--resume",
            killed.to_str().unwrap(),
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("torn line"), "{stderr}");
    assert!(
        stderr.contains(&format!("resuming: {} of 600 jobs", 600 - before)),
        "{stderr}"
    );
    let sent = server.provider.stats().requests - requests_before;
    assert_eq!(
        sent as usize,
        600 - before,
        "only the missing jobs are sent"
    );

    let (a, b) = (results(&whole), results(&killed));
    assert_eq!(a.len(), 600);
    assert_eq!(a, b, "job for job");
    let (sa, sb) = (summary(&whole), summary(&killed));
    assert!(sb.complete);
    assert_eq!(sb.torn_lines, 0);
    for (va, vb) in sa.variants.iter().zip(&sb.variants) {
        assert_eq!(
            (&va.name, va.n, va.correct, va.failed),
            (&vb.name, vb.n, vb.correct, vb.failed)
        );
        assert_eq!((va.ci_low, va.ci_high), (vb.ci_low, vb.ci_high));
        assert_eq!(va.tokens.prompt, vb.tokens.prompt);
    }
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(killed.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["resumed_at"].as_array().unwrap().len(), 1);
}

#[test]
fn resume_refuses_a_changed_bench_or_model() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(6, 2, "");
    let d = bench.path();
    promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--limit",
            "3",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .assert()
        .success();
    let run = only_run(&d.join("reports"));
    let run = run.to_str().unwrap();

    // Same bench and model: nothing left to send, exit 0, the plan kept its --limit.
    let before = server.provider.stats().requests;
    promptgauge(d)
        .args(["run", "--resume", run, "--base-url", &url, "--model", "m"])
        .assert()
        .success();
    assert_eq!(server.provider.stats().requests, before);

    let out = promptgauge(d)
        .args([
            "run",
            "--resume",
            run,
            "--base-url",
            &url,
            "--model",
            "other",
        ])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("two models"));

    std::fs::write(d.join("plain.txt"), "Q: {{ question }}").unwrap();
    let out = promptgauge(d)
        .args(["run", "--resume", run, "--base-url", &url, "--model", "m"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("changed since this run started") && e.contains("variants"),
        "{e}"
    );

    let cases = std::fs::read_to_string(d.join("cases.jsonl")).unwrap();
    std::fs::write(d.join("plain.txt"), "{{ question }}").unwrap();
    std::fs::write(d.join("cases.jsonl"), cases.replace("\"2\"", "\"3\"")).unwrap();
    let out = promptgauge(d)
        .args(["run", "--resume", run, "--base-url", &url, "--model", "m"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("its cases"));

    promptgauge(d)
        .args([
            "run",
            "--resume",
            d.to_str().unwrap(),
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .assert()
        .code(2);
    assert_eq!(
        server.provider.stats().requests,
        before,
        "refused resumes send nothing"
    );
}

#[cfg(unix)]
fn signal(child: &Child, name: &str) {
    std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
}

#[cfg(unix)]
#[test]
fn a_second_interrupt_aborts_jobs_in_flight_and_still_reports() {
    // Every request hangs: the first interrupt alone would wait out first_token_timeout.
    let (_rt, server) = start_mock(MockConfig {
        faults: Faults {
            hang: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { concurrency: 2, first_token_timeout: 600s }\n");
    let d = bench.path();
    let url = server.base_url();
    let (mut child, heard) = spawned_heard(
        d,
        &["run", "bench.yaml", "--base-url", &url, "--model", "m"],
    );
    wait_for("two requests in flight", || {
        server.provider.stats().in_flight >= 2
    });
    signal(&child, "INT");
    heard.wait_for("interrupt again to abort them");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first interrupt waits for jobs in flight"
    );
    signal(&child, "INT");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let run = only_run(&d.join("reports"));
    let s = summary(&run);
    assert_eq!(s.jobs_finished, 0);
    assert!(!s.complete);
    assert_eq!(
        server.provider.stats().requests,
        2,
        "nothing new was dispatched"
    );
}

#[cfg(unix)]
#[test]
fn sigterm_stops_like_a_first_interrupt() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: Duration::from_millis(50),
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { concurrency: 1 }\n");
    let d = bench.path();
    let mut child = spawned(
        d,
        &[
            "run",
            "bench.yaml",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ],
    );
    wait_for("the first job", || {
        run_dirs(&d.join("reports"))
            .first()
            .is_some_and(|r| journal_lines(r) >= 1)
    });
    signal(&child, "TERM");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let run = only_run(&d.join("reports"));
    let s = summary(&run);
    assert!(
        s.jobs_finished >= 1 && s.jobs_finished < 24,
        "{}",
        s.jobs_finished
    );
    assert_eq!(
        s.run.stopped,
        Some(promptgauge::runner::record::StopReason::Interrupted)
    );
    assert_eq!(
        std::fs::read_to_string(run.join("summary.json"))
            .unwrap()
            .matches(r#""stopped": "interrupted""#)
            .count(),
        1,
        "written as the sentence it always was"
    );
    // The job in flight when the signal came finished and was journaled.
    assert_eq!(
        journal_lines(&run) as u64,
        server.provider.stats().generations
    );
    let keys: HashSet<String> = journal(&run).iter().map(|r| r["job"].to_string()).collect();
    assert_eq!(keys.len(), s.jobs_finished);
}

#[cfg(unix)]
#[test]
fn sigterm_during_the_preflight_says_nothing_was_sent() {
    // A server that accepts and never answers: the preflight waits on it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let _ = tx.send(());
            held.push(stream);
        }
    });
    let bench = bench_dir("");
    let d = bench.path();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .current_dir(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .env("CI", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the preflight connects");
    signal(&child, "TERM");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("terminated (SIGTERM) during the preflight: nothing was sent"),
        "{stderr}"
    );
    assert!(!d.join("reports").exists());
}

// ---- One process per run folder; the journal is trusted by key ----

#[test]
fn a_second_process_cannot_write_a_run_folder_that_is_being_written() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: Duration::from_millis(20),
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { concurrency: 1 }\n");
    let d = bench.path();
    let url = server.base_url();
    let mut first = spawned(
        d,
        &["run", "bench.yaml", "--base-url", &url, "--model", "m"],
    );
    wait_for("the first job", || {
        run_dirs(&d.join("reports"))
            .first()
            .is_some_and(|r| journal_lines(r) >= 1)
    });
    let run = only_run(&d.join("reports"));
    let before = server.provider.stats().requests;
    for args in [
        vec!["run", "--resume", run.to_str().unwrap()],
        vec!["report", run.to_str().unwrap()],
    ] {
        let out = promptgauge(d).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("is in use by another promptgauge process (pid"),
            "{stderr}"
        );
        assert!(stderr.contains("fix:"), "{stderr}");
    }
    // The second process sent nothing: the first alone accounts for every request.
    assert_eq!(first.wait().unwrap().code(), Some(0));
    assert_eq!(journal_lines(&run), 24, "one line per job, none twice");
    let s = summary(&run);
    assert!(s.complete);
    assert_eq!(s.variants.iter().map(|v| v.n).sum::<u64>(), 24);
    assert!(server.provider.stats().requests >= before);
    assert_eq!(server.provider.stats().generations, 24);
    // Once the owner is gone (here: it finished) the folder is free again.
    let out = promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_journal_with_duplicates_strangers_and_a_gap_is_not_complete() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = bench_dir("");
    let d = bench.path();
    let url = server.base_url();
    promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .assert()
        .code(0);
    let run = only_run(&d.join("reports"));
    // 24 lines for 24 jobs, but: one job twice, one job missing, one job from elsewhere.
    let text = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let missing: Value = serde_json::from_str(lines[5]).unwrap();
    let stranger = lines[6].replace("\"case_id\":\"add-", "\"case_id\":\"other-");
    let mut doctored: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    doctored[5] = lines[0].to_string();
    doctored.push(stranger);
    std::fs::write(run.join("results.jsonl"), doctored.join("\n") + "\n").unwrap();

    let out = promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("journal: 23 of 24 planned jobs recorded"),
        "{stderr}"
    );
    assert!(stderr.contains("1 duplicate record"), "{stderr}");
    assert!(
        stderr.contains("1 record(s) of jobs this run did not plan"),
        "{stderr}"
    );
    let s = summary(&run);
    assert!(!s.complete, "25 lines are not 24 jobs");
    assert_eq!(
        (s.jobs_finished, s.duplicate_records, s.records_outside_plan),
        (23, 1, 1)
    );
    assert_eq!(s.variants.iter().map(|v| v.n).sum::<u64>(), 23);

    // The resume sends exactly the missing job, and says what it found.
    let sent = server.provider.stats().requests;
    let out = promptgauge(d)
        .args(["run", "--resume", run.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 duplicate record"), "{stderr}");
    assert!(stderr.contains("resuming: 1 of 24 jobs"), "{stderr}");
    assert_eq!(server.provider.stats().requests, sent + 1);
    let s = summary(&run);
    assert!(s.complete);
    let redone = journal(&run).pop().unwrap();
    assert_eq!(
        (&redone["case_id"], &redone["variant"]),
        (&missing["case_id"], &missing["variant"])
    );

    // A score promptgauge never writes (7.0 would make a mean of 1.3) is refused as a
    // record this run did not write: the figures leave it out, and a resume redoes its job.
    let text = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut forged: Value = serde_json::from_str(&lines[2]).unwrap();
    forged["score"] = serde_json::json!(7.0);
    lines[2] = forged.to_string();
    std::fs::write(run.join("results.jsonl"), lines.join("\n") + "\n").unwrap();
    let out = promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 record(s) with a score outside [0, 1]"),
        "{stderr}"
    );
    let s = summary(&run);
    assert!(!s.complete);
    for v in &s.variants {
        assert!(
            v.accuracy.unwrap() <= 1.0 && v.ci_high.unwrap() <= 1.0,
            "{v:?}"
        );
    }
    let sent = server.provider.stats().requests;
    let out = promptgauge(d)
        .args(["run", "--resume", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(server.provider.stats().requests, sent + 1);
    assert!(summary(&run).complete);
}

// ---- Stopping: no new attempts after the first signal, a bounded grace for the rest ----

#[cfg(unix)]
#[test]
fn the_first_signal_ends_retry_waits_at_once_and_starts_no_new_attempt() {
    // Every attempt is a 429 asking for 30 s: before, each job slept it out and tried again.
    let (_rt, server) = start_mock(MockConfig {
        retry_after: promptgauge::mock::RetryAfter::Seconds(30),
        faults: Faults {
            rate_429: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { concurrency: 2 }\n");
    let d = bench.path();
    let url = server.base_url();
    let mut child = spawned(
        d,
        &["run", "bench.yaml", "--base-url", &url, "--model", "m"],
    );
    wait_for("two 429s", || server.provider.stats().status_429 >= 2);
    let sent = server.provider.stats().requests;
    let signalled = Instant::now();
    signal(&child, "TERM");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "{:?}",
        signalled.elapsed()
    );
    assert_eq!(
        server.provider.stats().requests,
        sent,
        "no attempt after the signal"
    );
    let run = only_run(&d.join("reports"));
    assert!(run.join("summary.json").exists());
    assert_eq!(
        journal_lines(&run),
        0,
        "nothing finished; all of it is left for a resume"
    );
}

#[cfg(unix)]
#[test]
fn attempts_in_flight_are_abandoned_after_the_grace_period() {
    let (_rt, server) = start_mock(MockConfig {
        faults: Faults {
            hang: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { concurrency: 2, first_token_timeout: 600s }\n");
    let d = bench.path();
    let url = server.base_url();
    let mut child = spawned(
        d,
        &[
            "run",
            "bench.yaml",
            "--base-url",
            &url,
            "--model",
            "m",
            "--grace",
            "300ms",
        ],
    );
    wait_for("two requests in flight", || {
        server.provider.stats().in_flight >= 2
    });
    signal(&child, "TERM");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let run = only_run(&d.join("reports"));
    assert!(run.join("summary.json").exists(), "reports written");
    assert_eq!(server.provider.stats().requests, 2);
}

// ---- A full disk, and where the run can be resumed from ----

#[cfg(unix)]
#[test]
fn a_full_disk_mid_run_is_exit_3_with_what_fits_written_and_the_resume_command() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(60, 2, "limits: { concurrency: 2 }\n");
    let d = bench.path();
    let url = server.base_url();
    // Files may not grow past 24 KiB: the journal (about 1 KiB a job) runs out mid-run;
    // the summaries still fit. The limit's signal (SIGXFSZ) is left at its default, which
    // kills a process that does not catch it: promptgauge catches it, and the write fails
    // with EFBIG as on a full disk.
    let bin = assert_cmd::cargo::cargo_bin("promptgauge");
    let out = std::process::Command::new("sh")
        .current_dir(d)
        .env("CI", "true")
        .args([
            "-c",
            &format!(
                "ulimit -f 24; exec '{}' run bench.yaml --base-url {url} --model m",
                bin.display()
            ),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let run = only_run(&d.join("reports"));
    assert!(stderr.contains("could not be written"), "{stderr}");
    let name = run.file_name().unwrap().to_str().unwrap();
    let resume = format!("promptgauge run --resume reports/{name}");
    assert!(stderr.contains(&resume), "{stderr}");
    assert!(run.join("summary.json").exists(), "what fits is written");
    let kept = journal_lines(&run);
    assert!(kept > 0 && kept < 120, "{kept}");
    assert!(
        !run.join(".store.spool").exists(),
        "the store's spool is not left behind"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // With room again, the printed command finishes the run.
    let args: Vec<&str> = resume.split(' ').skip(1).collect();
    let out = promptgauge(d).args(&args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&run);
    assert!(s.complete);
    assert_eq!(journal_lines(&run), 120);

    // `report` under a limit report.html does not fit in: exit 2 (nothing was sent; the
    // path cannot be written), and the report.html that was there is kept whole (never
    // half a page).
    let before = std::fs::read(run.join("report.html")).unwrap();
    let out = std::process::Command::new("sh")
        .current_dir(d)
        .env("CI", "true")
        .args([
            "-c",
            &format!(
                "ulimit -f {}; exec '{}' report '{}'",
                before.len() / 1024 / 2,
                bin.display(),
                run.display()
            ),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("report.html: File too large"), "{stderr}");
    assert_eq!(std::fs::read(run.join("report.html")).unwrap(), before);
    assert!(
        !std::fs::read_dir(&run).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")),
        "no temporary file is left"
    );
}

#[cfg(unix)]
#[test]
fn the_printed_resume_command_works_after_a_run_with_base_url_and_model_flags() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: Duration::from_millis(20),
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { concurrency: 1 }\n");
    let d = bench.path();
    let url = server.base_url();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .current_dir(d)
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &url,
            "--model",
            "qwen-7b",
        ])
        .env("CI", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the first job", || {
        run_dirs(&d.join("reports"))
            .first()
            .is_some_and(|r| journal_lines(r) >= 1)
    });
    signal(&child, "INT");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let printed = stderr
        .lines()
        .find_map(|l| l.strip_prefix("resume with: "))
        .unwrap_or_else(|| panic!("no resume command in {stderr}"));
    let args: Vec<&str> = printed.split(' ').skip(1).collect();
    let out = promptgauge(d).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "`{printed}`: {stderr}");
    let s = summary(&only_run(&d.join("reports")));
    assert!(s.complete);
    assert_eq!(s.run.provider.model, "qwen-7b");
    assert_eq!(
        server.provider.stats().generations,
        24,
        "all to the same server"
    );
}

#[cfg(unix)]
#[test]
fn the_printed_resume_command_is_one_shell_word_per_argument_whatever_the_names() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: Duration::from_millis(20),
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { concurrency: 1 }\n");
    let d = bench.path();
    // A bench named to run a command when pasted, into a folder with a space and a quote.
    let yaml = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        yaml.replace("name: arithmetic", "name: \"b $(touch PWNED) it's\""),
    )
    .unwrap();
    let url = server.base_url();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .current_dir(d)
        .args([
            "run",
            "bench.yaml",
            "--out",
            "my reports",
            "--base-url",
            &url,
            "--model",
            "m",
        ])
        .env("CI", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let root = d.join("my reports");
    wait_for("the first job", || {
        run_dirs(&root)
            .first()
            .is_some_and(|r| journal_lines(r) >= 1)
    });
    signal(&child, "INT");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let printed = stderr
        .lines()
        .find_map(|l| l.strip_prefix("resume with: "))
        .unwrap_or_else(|| panic!("no resume command in {stderr}"));
    // Pasted into a shell, as a person would.
    let binary = assert_cmd::cargo::cargo_bin("promptgauge");
    let pasted = printed.replacen(
        "promptgauge",
        &format!("'{}'", binary.display().to_string().replace('\'', "'\\''")),
        1,
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&pasted)
        .current_dir(d)
        .env("CI", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!d.join("PWNED").exists(), "`{printed}` ran a command");
    assert_eq!(out.status.code(), Some(0), "`{printed}`: {stderr}");
    let s = summary(&only_run(&root));
    assert!(s.complete, "`{printed}` resumed the run");
    assert_eq!(server.provider.stats().generations, 24);
}

// ---- One pass: a live run never reads its journal; `report` reads it once ----

#[test]
fn a_live_run_opens_its_journal_once_to_append_and_report_reads_it_once() {
    use clap::Parser;
    use promptgauge::app::Env;
    use promptgauge::cli::{Cli, Command};
    use promptgauge::runner::folder::journal_opens;
    let bench = bench_dir("");
    let d = bench.path();
    let out = d.join("reports");
    let cli = Cli::try_parse_from([
        "promptgauge",
        "run",
        d.join("bench.yaml").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--junit",
        d.join("junit.xml").to_str().unwrap(),
        "--quiet",
    ])
    .unwrap();
    let Command::Run(args) = cli.command else {
        panic!("run")
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let exit = rt.block_on(promptgauge::app::run(&args, &Env::default()));
    assert_eq!(exit.unwrap(), promptgauge::Exit::Success);
    let run = only_run(&out);
    assert_eq!(journal(&run).len(), 24);
    let path = run.join("results.jsonl");
    let opens = journal_opens(&path);
    assert_eq!((opens.appends, opens.reads), (1, 0), "{opens:?}");
    assert!(d.join("junit.xml").exists() && run.join("report.html").exists());
    assert!(!run.join(".junit.spool").exists(), "the spool is removed");

    let report = promptgauge::cli::ReportArgs {
        run: run.clone(),
        jobs_csv: None,
    };
    assert_eq!(
        promptgauge::app::report(&report).unwrap(),
        promptgauge::Exit::Success
    );
    let opens = journal_opens(&path);
    assert_eq!((opens.appends, opens.reads), (1, 1), "{opens:?}");
}

#[test]
fn a_run_folder_written_by_0_1_0_still_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("old-run");
    std::fs::create_dir(&run).unwrap();
    let fixture = repo().join("tests/fixtures/run-0.1.0");
    for f in ["run.json", "results.jsonl"] {
        std::fs::copy(fixture.join(f), run.join(f)).unwrap();
    }
    let out = promptgauge(tmp.path())
        .args(["report", "old-run"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The journal has no `score` field (0.1.0 wrote `correct` only) and its attempts no
    // usage: the same numbers, the answers' cost standing for what was spent. The verdicts'
    // intervals and power figures are computed differently since 0.2; their tests agree.
    let mut then: Summary =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("summary.json")).unwrap())
            .unwrap();
    for v in &mut then.variants {
        v.spent_usd = v.cost_usd;
    }
    let now = summary(&run);
    assert_eq!(now.variants, then.variants);
    assert_eq!(now.slices, then.slices);
    assert_eq!(now.comparisons.len(), then.comparisons.len());
    for (a, b) in now.comparisons.iter().zip(&then.comparisons) {
        assert_eq!(
            (a.verdict, a.difference, a.p_value, a.p_holm, a.table),
            (b.verdict, b.difference, b.p_value, b.p_holm, b.table)
        );
    }
    assert!(run.join("report.html").exists());
}

// ---- An outage mid-run: stop sending, then resend on resume ----

#[test]
fn an_outage_mid_run_stops_sending_and_a_resume_sends_the_failed_jobs_again() {
    // The server goes down after 40 requests: every request then gets 503.
    let (_rt, server) = start_mock(MockConfig {
        outage_after: Some(40),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(100, 2, "limits: { concurrency: 4, max_attempts: 2 }\n");
    let d = bench.path();
    let url = server.base_url();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("the server looks down"), "{stderr}");
    let sent = server.provider.stats().requests;
    assert!(
        sent < 100,
        "the outage stopped the run instead of spending every job's attempts: {sent} requests for 200 jobs"
    );
    let run = only_run(&d.join("reports"));
    let first = summary(&run);
    assert!(
        first.jobs_failed > 0 && !first.complete,
        "{}",
        first.jobs_failed
    );
    // The printed command, pasted once the server is back.
    let printed = stderr
        .lines()
        .find_map(|l| {
            l.split_once("once the server is back, send the rest and the failed jobs again: ")
        })
        .map(|(_, c)| c.to_string())
        .unwrap_or_else(|| panic!("no resume command in {stderr}"));
    assert!(printed.ends_with("--retry-failed"), "{printed}");
    server.provider.end_outage();
    let args: Vec<&str> = printed.split(' ').skip(1).collect();
    let out = promptgauge(d).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "`{printed}`: {stderr}");
    assert!(stderr.contains("sending again"), "{stderr}");
    let s = summary(&run);
    assert!(s.complete, "every job answered");
    assert_eq!(s.jobs_failed, 0);
    assert_eq!(
        server.provider.stats().generations,
        200,
        "each job answered once"
    );
    // The first failures stay in the journal as each job's history; the resends say so.
    let records = journal(&run);
    let failed = records.iter().filter(|r| r["status"] == "failed").count();
    let resent = records.iter().filter(|r| r["resent"] == 1).count();
    assert_eq!(failed, first.jobs_failed, "the failures are kept");
    assert_eq!(resent, failed, "each failed job was sent once more");
    // And `report` reads the journal the same way: the resends take the failures' place.
    let o = promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let again = summary(&run);
    assert_eq!((again.jobs_failed, again.complete), (0, true));
    assert_eq!(
        serde_json::to_value(&again.variants).unwrap(),
        serde_json::to_value(&s.variants).unwrap()
    );
}
