//! Regression runs in CI: each gate passing and failing against the simulator, JUnit and
//! Markdown outputs, the summary's JSON Schema, plain output under CI, and shard + merge.

use std::path::{Path, PathBuf};

use crate::common::*;
use promptgauge::mock::{Faults, MockConfig};
use promptgauge::report::Summary;

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    dir: PathBuf,
}

/// Runs the example bench (first `limit` cases) with extra flags into a fresh folder.
/// promptgauge.yaml's price, for the model the tests name.
const ROUTING_PRICE: &str = "0.15,0.60,0.075";

fn run(url: &str, model: &str, flags: &[&str]) -> (tempfile::TempDir, Ran) {
    let out = tempfile::tempdir().unwrap();
    let mut args = vec![
        "run",
        "--base-url",
        url,
        "--model",
        model,
        // The repository's bench prices no model in particular (docs/guide/endpoints.md).
        "--price",
        ROUTING_PRICE,
        "--out",
        out.path().to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let o = promptgauge(&repo()).args(&args).output().unwrap();
    let dir = run_dirs(out.path()).pop().expect("a run folder");
    let ran = Ran {
        code: o.status.code().unwrap(),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
        dir,
    };
    (out, ran)
}

fn summary(dir: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// The lines of gates that did not pass: failed, or inconclusive.
fn failing_gates(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("gate failed: ") || l.starts_with("gate inconclusive: "))
        .collect()
}

#[test]
fn fail_if_worse_fails_only_on_a_significant_drop() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    // plain is significantly worse than step-by-step (7 discordant cases, all one way).
    let (_t, r) = run(
        &url,
        "m",
        &["--variants", "step-by-step,plain", "--fail-if-worse"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines = failing_gates(&r.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("fail-if-worse: plain is worse than step-by-step"),
        "{lines:?}"
    );
    // tip is lower on 20 cases but not significantly: a lower point estimate never fails.
    let (_t, r) = run(
        &url,
        "m",
        &[
            "--variants",
            "tip,plain",
            "--limit",
            "20",
            "--fail-if-worse",
        ],
    );
    let s = summary(&r.dir);
    assert!(
        s.variants[1].accuracy < s.variants[0].accuracy,
        "the point estimate is lower"
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(s.gates.iter().all(|g| g.passed));
}

#[test]
fn baseline_run_gate_compares_with_an_earlier_run() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let (_a, before) = run(
        &url,
        "large-model",
        &["--variants", "plain,step-by-step", "--quiet"],
    );
    let base = before.dir.to_str().unwrap().to_string();
    // The same model again: nothing dropped.
    let (_b, same) = run(
        &url,
        "large-model",
        &[
            "--variants",
            "plain,step-by-step",
            "--baseline",
            &base,
            "--fail-if-worse",
        ],
    );
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(same.stdout.contains("against the baseline run"));
    assert!(same.dir.join("baseline.json").is_file());
    // A weaker model: both variants drop significantly.
    let (_c, worse) = run(
        &url,
        "small-model",
        &[
            "--variants",
            "plain,step-by-step",
            "--baseline",
            &base,
            "--fail-if-worse",
        ],
    );
    assert_eq!(worse.code, 1, "{}", worse.stderr);
    let lines = failing_gates(&worse.stderr);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("--baseline") && l.contains("plain in B is worse than plain in A")),
        "{lines:?}"
    );
}

#[test]
fn min_accuracy_says_whether_the_shortfall_is_certain() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    // plain: 87.5% [77.2, 93.5] on 64 cases: below, but the data cannot tell (exit 5).
    let (_t, r) = run(&url, "m", &["--variants", "plain", "--min-accuracy", "0.9"]);
    assert_eq!(r.code, 5);
    assert!(
        failing_gates(&r.stderr)[0].starts_with("gate inconclusive: min-accuracy 90.0%: plain: 87.5% [77.2, 93.5] is below 90.0% but the interval straddles it (uncertain) on 64 cases: about "),
        "{}",
        r.stderr
    );
    let (_t, r) = run(
        &url,
        "m",
        &["--variants", "plain", "--min-accuracy", "plain=95%"],
    );
    assert_eq!(r.code, 1);
    assert!(
        failing_gates(&r.stderr)[0].contains("(certain: the whole interval is below it)"),
        "{}",
        r.stderr
    );
    let (_t, r) = run(
        &url,
        "m",
        &[
            "--variants",
            "plain,step-by-step",
            "--min-accuracy",
            "0.5",
            "--min-accuracy",
            "step-by-step=0.95",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(summary(&r.dir).gates.len(), 3);
}

#[test]
fn cost_and_latency_budgets() {
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: std::time::Duration::from_millis(20),
        ..MockConfig::default()
    });
    let url = server.base_url();
    let flags = ["--variants", "plain", "--limit", "8"];
    let (_t, r) = run(
        &url,
        "m",
        &[
            &flags[..],
            &["--max-cost", "0.0000001", "--max-p90-latency", "5ms"],
        ]
        .concat(),
    );
    assert_eq!(r.code, 1);
    let lines = failing_gates(&r.stderr);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("gate failed: max-cost: the run spent $")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("max-p90-latency 5ms: plain: p90 latency")),
        "{lines:?}"
    );
    let (_t, r) = run(
        &url,
        "m",
        &[&flags[..], &["--max-cost", "1", "--max-p90-latency", "60s"]].concat(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn failed_jobs_are_incomplete_unless_allowed() {
    // Three in ten jobs fail: some fail in every run but one in 4,500, and thirteen of
    // sixteen together (an outage, which stops the run) in one in 7,000 (at half, one in 30).
    let (_rt, server) = start_mock(MockConfig {
        faults: Faults {
            cut: 0.3,
            ..Faults::default()
        },
        seed: 5,
        ..MockConfig::default()
    });
    let bench = bench_dir("limits: { max_attempts: 1 }\n");
    let d = bench.path();
    // Which jobs fail varies from run to run (the idempotency keys do); allow them all.
    let args = [
        "run",
        "bench.yaml",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
    ];
    let o = promptgauge(d).args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    let failed = summary(&run_dirs(&d.join("reports"))[0]).jobs_failed;
    assert!(failed > 0);
    // A cut stream may come through whole next time: the resume that sends it is printed.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{failed} of them failed a passing way"))
            && err.contains("--retry-failed"),
        "{err}"
    );
    let o = promptgauge(d)
        .args(args)
        .args(["--allow-failures", "24"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn junit_counts_cases_failures_and_errors() {
    let (_rt, server) = start_mock(MockConfig {
        // Half the attempts cut, two attempts a job: about a quarter of the jobs fail.
        faults: Faults {
            cut: 0.5,
            ..Faults::default()
        },
        seed: 9,
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(16, 4, "limits: { max_attempts: 2 }\n");
    let d = bench.path();
    let path = d.join("junit.xml");
    promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--base-url",
            &server.base_url(),
            "--model",
            "small-model",
        ])
        .args(["--junit", path.to_str().unwrap(), "--allow-failures", "64"])
        .assert()
        .success();
    let xml = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let s = summary(&run_dirs(&d.join("reports"))[0]);
    let attr = |n: roxmltree::Node, a: &str| n.attribute(a).unwrap().parse::<u64>().unwrap();
    assert_eq!(attr(root, "tests"), 64);
    let wrong: u64 = s.variants.iter().map(|v| v.n - v.correct).sum();
    let failed: u64 = s.variants.iter().map(|v| v.failed).sum();
    assert_eq!(attr(root, "failures"), wrong);
    assert_eq!(attr(root, "errors"), failed);
    assert!(
        failed > 0 && wrong > 0,
        "some jobs fail and some answers are wrong"
    );
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 4);
    for (suite, v) in suites.iter().zip(&s.variants) {
        assert_eq!(suite.attribute("name"), Some(v.name.as_str()));
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 16);
        assert_eq!(attr(*suite, "failures"), v.n - v.correct);
        assert_eq!(attr(*suite, "errors"), v.failed);
        for c in &cases {
            if let Some(f) = c.children().find(|k| k.has_tag_name("failure")) {
                let m = f.attribute("message").unwrap();
                assert!(
                    m.starts_with("expected ") && m.contains(", extracted "),
                    "{m}"
                );
            }
        }
    }
}

#[test]
fn markdown_is_appended_for_the_step_summary() {
    let (_rt, server) = start_mock(MockConfig::default());
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "# Earlier step\n").unwrap();
    let path = file.path().to_str().unwrap();
    let (_t, r) = run(
        &server.base_url(),
        "m",
        &["--limit", "8", "--markdown", path, "--min-accuracy", "0.1"],
    );
    assert_eq!(r.code, 0);
    let md = std::fs::read_to_string(file.path()).unwrap();
    assert!(
        md.starts_with("# Earlier step\n## promptgauge: routing"),
        "{md}"
    );
    assert!(
        md.contains("### Paired against plain") && md.contains("### Gates"),
        "{md}"
    );
    // What a reviewer needs first: the gates, then the verdicts, then the tables.
    let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} in {md}"));
    assert!(at("### Gates") < at("### Verdicts"), "{md}");
    assert!(at("### Verdicts") < at("### Variants"), "{md}");
    assert!(at("### Variants") < at("### Paired against plain"), "{md}");
    // One title per run, no level-1 heading inside it.
    assert_eq!(
        md.lines().filter(|l| l.starts_with("# ")).count(),
        1,
        "{md}"
    );
}

#[test]
fn a_baseline_comparison_nests_under_the_run_and_server_text_is_not_markup() {
    let (_rt, server) = start_mock(MockConfig::default());
    let (_t, first) = run(&server.base_url(), "m", &["--limit", "8"]);
    assert_eq!(first.code, 0);
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    let (_t2, r) = run(
        &server.base_url(),
        "m",
        &[
            "--limit",
            "8",
            "--markdown",
            path,
            "--baseline",
            first.dir.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0);
    let md = std::fs::read_to_string(file.path()).unwrap();
    assert!(md.contains("### Against the baseline run"), "{md}");
    assert!(
        !md.contains("# promptgauge compare"),
        "no nested title: {md}"
    );
    assert!(md.lines().all(|l| !l.starts_with("# ")), "{md}");
}

#[test]
fn summary_json_validates_against_the_committed_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/summary.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let (_rt, server) = start_mock(MockConfig::default());
    // With gates and repeats, so the optional parts are present too.
    let (_t, r) = run(
        &server.base_url(),
        "m",
        &["--limit", "6", "--repeats", "2", "--min-accuracy", "0.1"],
    );
    let (_t2, r1) = run(&server.base_url(), "m", &["--limit", "6"]);
    for dir in [&r.dir, &r1.dir] {
        let instance: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }
    // The schema is strict enough to catch drift: an unknown field fails it.
    let mut instance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.dir.join("summary.json")).unwrap())
            .unwrap();
    instance["variants"][0]["surprise"] = serde_json::json!(1);
    assert!(!validator.is_valid(&instance));
}

#[test]
fn under_ci_output_is_plain_and_stable() {
    let (_rt, server) = start_mock(MockConfig::default());
    let (_a, a) = run(&server.base_url(), "m", &["--limit", "8"]);
    let (_b, b) = run(&server.base_url(), "m", &["--limit", "8"]);
    for r in [&a, &b] {
        assert!(
            !r.stderr.contains('\r') && !r.stdout.contains('\r'),
            "no progress animation"
        );
        assert!(
            !r.stdout.contains('\u{1b}') && !r.stderr.contains('\u{1b}'),
            "no colour"
        );
    }
    // Same inputs, same rows in the same order (latency aside).
    let rows = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.contains('┆'))
            .map(|l| l.split('┆').take(5).collect::<Vec<_>>().join("|"))
            .collect()
    };
    assert_eq!(rows(&a.stdout), rows(&b.stdout));
    let (_q, quiet) = run(&server.base_url(), "m", &["--limit", "8", "--quiet"]);
    // Quiet: one line on stderr, where the reports went.
    let said: Vec<&str> = quiet
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(said.len(), 1, "{}", quiet.stderr);
    assert!(said[0].starts_with("reports: "), "{}", quiet.stderr);
}

#[test]
fn four_shards_merge_into_the_unsharded_run() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(30, 3, "");
    let d = bench.path();
    let base = ["--base-url", url.as_str(), "--model", "m", "--quiet"];
    promptgauge(d)
        .args(["run", "bench.yaml", "--out", "whole"])
        .args(base)
        .assert()
        .success();
    // Three shards numbered by a scheduler (`--shard auto`), one given: the four must be
    // the four shards, or the merge would not equal the whole run.
    let numbered: [(&str, &[(&str, &str)]); 4] = [
        ("auto/4", &[("JOB_COMPLETION_INDEX", "0")]),
        (
            "auto",
            &[
                ("SLURM_ARRAY_TASK_ID", "2"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
            ],
        ),
        ("auto", &[("CI_NODE_INDEX", "3"), ("CI_NODE_TOTAL", "4")]),
        ("4/4", &[]),
    ];
    for (i, (shard, vars)) in numbered.iter().enumerate() {
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--out", "shards", "--shard", shard])
            .args(base)
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.success());
        if !vars.is_empty() {
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(said.contains(&format!("shard {}/4 from", i + 1)), "{said}");
        }
    }
    let shards = run_dirs(&d.join("shards"));
    assert_eq!(shards.len(), 4);
    let sizes: Vec<usize> = shards.iter().map(|s| journal(s).len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 90);
    assert!(sizes.iter().all(|&n| n == 24 || n == 21), "{sizes:?}");
    let shard_args: Vec<String> = shards.iter().map(|p| p.display().to_string()).collect();
    promptgauge(d)
        .arg("merge")
        .args(&shard_args)
        .args(["--out", "merged"])
        .assert()
        .success();

    let whole = summary(&run_dirs(&d.join("whole"))[0]);
    let merged = summary(&run_dirs(&d.join("merged"))[0]);
    assert!(merged.complete);
    assert_eq!(merged.jobs_finished, 90);
    assert_eq!(merged.run.jobs_planned, whole.run.jobs_planned);
    for (w, m) in whole.variants.iter().zip(&merged.variants) {
        assert_eq!(
            (&w.name, w.n, w.correct, w.ci_low, w.ci_high),
            (&m.name, m.n, m.correct, m.ci_low, m.ci_high)
        );
        assert_eq!(w.tokens.prompt, m.tokens.prompt);
    }
    for (w, m) in whole.comparisons.iter().zip(&merged.comparisons) {
        assert_eq!(
            (w.table, w.p_holm, w.verdict),
            (m.table, m.p_holm, m.verdict)
        );
    }
    assert_eq!(whole.slices, merged.slices);

    // Overlapping shards and shards of another bench are refused.
    let o = promptgauge(d)
        .arg("merge")
        .args([&shard_args[0], &shard_args[0]])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("given twice"));
    let other = arithmetic_bench(30, 2, "");
    promptgauge(other.path())
        .args(["run", "bench.yaml", "--out", "s", "--shard", "2/4"])
        .args(base)
        .assert()
        .success();
    let foreign = run_dirs(&other.path().join("s"))[0].display().to_string();
    let o = promptgauge(d)
        .arg("merge")
        .args([&shard_args[0], &foreign])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bench differs"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A missing shard merges, but the run says it is incomplete.
    let o = promptgauge(d)
        .arg("merge")
        .args(&shard_args[..3])
        .args(["--out", "partial"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("shards 4/4 were not given"));
    let partial = summary(&run_dirs(&d.join("partial"))[0]);
    // The missing shard's jobs are counted as not run, and the header counts its cases.
    assert_eq!(partial.run.jobs_planned, 90);
    assert_eq!(partial.run.cases, 30);
    let one = summary(&shards[0]);
    assert!(one.run.cases < 30 && one.run.cases * 3 == one.run.jobs_planned);
    // `merge shards/*` beside a comparison: what is not a shard is skipped with a note.
    promptgauge(d)
        .args(["compare", &shard_args[0], &shard_args[1]])
        .assert()
        .success();
    let everything: Vec<String> = std::fs::read_dir(d.join("shards"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    // Four shards, a comparison, and the history store the shards recorded in.
    assert_eq!(everything.len(), 6, "{everything:?}");
    assert!(everything.iter().any(|p| p.ends_with("promptgauge.db")));
    let o = promptgauge(d)
        .arg("merge")
        .args(&everything)
        .args(["--out", "again"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("(not a run folder)"), "{stderr}");
    assert!(
        !stderr.contains("shards/promptgauge.db"),
        "the store is skipped quietly: {stderr}"
    );
}

#[test]
fn spent_counts_every_billed_attempt_and_answers_from_the_cache_are_free() {
    // Half the first two attempts' streams are cut before their finish: each is retried,
    // and each cut one streamed text the provider bills for. The run id is random, so the
    // draws are too: no stream is cut three times (none fails), and all 16 jobs come
    // through uncut once in 65,536 runs.
    let (_rt, server) = start_mock(MockConfig {
        faults: Faults {
            cut: 0.5,
            ..Faults::default()
        },
        fault_attempts: Some(2),
        seed: 5,
        ..MockConfig::default()
    });
    let url = server.base_url();
    let out = tempfile::tempdir().unwrap();
    let run_cached = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--base-url",
            url.as_str(),
            "--model",
            "m",
            "--price",
            ROUTING_PRICE,
            "--out",
            out.path().to_str().unwrap(),
            "--variants",
            "plain",
            "--limit",
            "16",
            "--cache",
        ];
        args.extend_from_slice(extra);
        promptgauge(&repo()).args(&args).output().unwrap()
    };
    let first = run_cached(&[]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let dirs = run_dirs(out.path());
    let s1 = summary(&dirs[0]);
    let v = &s1.variants[0];
    assert!(
        v.attempts > 16,
        "some streams were cut and retried: {}",
        v.attempts
    );
    let (list, spent) = (v.cost_usd.unwrap(), v.spent_usd.unwrap());
    assert!(spent > list * 1.05, "spent {spent} vs list {list}");
    assert!(v.spent_estimated, "cut streams report no usage");
    // Time to answer includes the failed attempts and the backoff before the answer.
    assert!(v.answer_ms.p90.unwrap() > v.latency_ms.p90.unwrap());
    let sent = server.provider.stats().requests;

    // Again from the cache: nothing is sent and nothing is spent, so a budget of a
    // millionth of a dollar holds; the answers still cost what they cost.
    let second = run_cached(&["--max-cost", "0.000001"]);
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(server.provider.stats().requests, sent);
    let dirs = run_dirs(out.path());
    let s2 = dirs
        .iter()
        .map(|d| summary(d))
        .find(|s| s.variants[0].cached == 16)
        .expect("the cached run");
    let v2 = &s2.variants[0];
    assert_eq!(v2.spent_usd, Some(0.0));
    assert!((v2.cost_usd.unwrap() - list).abs() < 1e-12);
    assert!(s2.gates[0].passed, "{:?}", s2.gates);
}

#[test]
fn max_drop_passes_only_when_the_data_rule_out_a_larger_drop() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    // step-by-step against plain on all 64 cases: a clear gain, so no drop of 5 points.
    let (_t, r) = run(
        &url,
        "m",
        &["--variants", "plain,step-by-step", "--max-drop", "5"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = summary(&r.dir);
    let gate = &s.gates[0];
    assert!(
        gate.passed && gate.reason.contains("step-by-step is at most"),
        "{gate:?}"
    );
    // The other way round plain is 10.9 points below, its interval reaching from past 5
    // points below to less: not decided (exit 5), and more cases would more likely show
    // the drop.
    let (_t, r) = run(
        &url,
        "m",
        &["--variants", "step-by-step,plain", "--max-drop", "5"],
    );
    assert_eq!(r.code, 5, "{}", r.stderr);
    let lines = failing_gates(&r.stderr);
    assert!(
        lines[0].contains("gate inconclusive: max-drop: plain may be up to ")
            && lines[0]
                .contains("the difference seen (-10.9 points) is itself a drop of 5.0 or more"),
        "{lines:?}"
    );
    // Held to half a point, the whole interval ([-20.9, -1.0]) is past the limit: the
    // gate fails.
    let (_t, r) = run(
        &url,
        "m",
        &["--variants", "step-by-step,plain", "--max-drop", "0.5"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines = failing_gates(&r.stderr);
    assert!(
        lines[0]
            .contains("gate failed: max-drop: plain is more than 0.5 points below step-by-step"),
        "{lines:?}"
    );
    // tip on 12 cases: not distinguishable, so --fail-if-worse passes; but twelve cases
    // cannot show that tip lost less than 5 points: --max-drop is inconclusive (exit 5),
    // never passed. Absence of evidence is not evidence.
    let (_t, r) = run(
        &url,
        "m",
        &[
            "--variants",
            "plain,tip",
            "--limit",
            "12",
            "--max-drop",
            "5",
            "--fail-if-worse",
        ],
    );
    assert_eq!(r.code, 5, "{}", r.stderr);
    let s = summary(&r.dir);
    let by = |name: &str| s.gates.iter().find(|g| g.gate == name).unwrap();
    assert!(by("fail-if-worse").passed);
    assert!(!by("max-drop").passed);
    assert_eq!(
        by("max-drop").outcome,
        promptgauge::report::GateOutcome::Inconclusive
    );
    assert!(
        by("max-drop").reason.contains("on 12 cases; about "),
        "{:?}",
        by("max-drop")
    );
}

#[test]
fn gates_that_cannot_be_evaluated_are_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let dir = arithmetic_bench(10, 2, "");
    let d = dir.path();
    // No price in this bench.
    let bench = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    let unpriced: String = bench
        .lines()
        .filter(|l| !l.starts_with("price:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("bench.yaml"), unpriced).unwrap();
    let refused = |flags: &[&str], says: &str| {
        let mut args = vec![
            "run",
            "bench.yaml",
            "--base-url",
            url.as_str(),
            "--model",
            "m",
        ];
        args.extend_from_slice(flags);
        let o = promptgauge(d).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("fix:"),
            "{flags:?}: {stderr}"
        );
    };
    refused(&["--max-cost", "1"], "the bench has no `price`");
    refused(
        &["--min-accuracy", "plian=0.5"],
        "`plian`, which is not a variant",
    );
    refused(
        &["--variants", "plain", "--max-drop", "5"],
        "this run has one variant",
    );
    refused(
        &["--variants", "plain", "--fail-if-worse"],
        "this run has one variant",
    );
    assert_eq!(server.provider.stats().requests, 0);
}

#[test]
fn the_github_action_and_the_release_agree_and_use_real_flags() {
    let read = |p: &str| std::fs::read_to_string(repo().join(p)).unwrap();
    let action: serde_json::Value = serde_saphyr::from_str(&read("action.yml")).unwrap();
    assert_eq!(action["runs"]["using"], "composite");
    let inputs = action["inputs"].as_object().unwrap();
    let text = read("action.yml");
    // Every input the steps use is declared.
    let used = regex::Regex::new(r"inputs\.([a-z-]+)").unwrap();
    for m in used.captures_iter(&text) {
        assert!(
            inputs.contains_key(&m[1]),
            "inputs.{} is used but not declared",
            &m[1]
        );
    }
    // The flags it passes are promptgauge's.
    let help = promptgauge(&repo())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--markdown",
        "--junit",
        "--cache",
        "--base-url",
        "--model",
        "--max-drop",
        "--baseline",
    ] {
        assert!(help.contains(flag), "{flag} is not a run flag");
    }
    // The action downloads what the release workflow uploads.
    let release = read(".github/workflows/release.yml");
    for target in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "aarch64-apple-darwin",
        "x86_64-apple-darwin",
    ] {
        assert!(
            release.contains(target) && text.contains(target),
            "{target}"
        );
    }
    assert!(release.contains("promptgauge-${{ matrix.target }}.tar.gz"));
    assert!(text.contains("promptgauge-$target.tar.gz"));
    // The Dockerfile builds the binary and runs it unprivileged.
    let docker = read("Dockerfile");
    assert!(docker.contains("--locked") && docker.contains("USER promptgauge"));
}

/// A stand-in for github.com's release downloads: serves files under `root` over HTTP on
/// loopback and keeps the paths it was asked for.
fn file_server(root: PathBuf) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // The headers, up to the blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request.split(' ').nth(1).unwrap_or("/").to_string();
            log.lock().unwrap().push(path.clone());
            let reply = match std::fs::read(root.join(path.trim_start_matches('/'))) {
                Ok(body) => {
                    let mut r = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    r.extend(body);
                    r
                }
                Err(_) => {
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .to_vec()
                }
            };
            let _ = stream.write_all(&reply);
        }
    });
    (base, asked)
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn the_action_installs_only_a_release_that_matches_its_published_checksum() {
    let action: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join("action.yml")).unwrap())
            .unwrap();
    let install = action["runs"]["steps"][0]["run"]
        .as_str()
        .unwrap()
        .to_string();
    let root = tempfile::tempdir().unwrap();
    let (base, asked) = file_server(root.path().to_path_buf());
    // The install step as GitHub runs it, with github.com standing in at `base`.
    let script = install.replace("https://github.com/", &base);
    let target = "x86_64-unknown-linux-gnu";
    let publish = |version: &str, tamper: bool| {
        let dir = root
            .path()
            .join(format!("o/pg/releases/download/{version}"));
        let stage = root
            .path()
            .join(format!("stage-{version}/promptgauge-{target}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&stage).unwrap();
        std::fs::write(stage.join("promptgauge"), "#!/bin/sh\necho promptgauge 9\n").unwrap();
        let archive = dir.join(format!("promptgauge-{target}.tar.gz"));
        let ok = std::process::Command::new("tar")
            .args(["czf", archive.to_str().unwrap(), "-C"])
            .arg(stage.parent().unwrap())
            .arg(format!("promptgauge-{target}"))
            .status()
            .unwrap();
        assert!(ok.success());
        let sum = std::process::Command::new("sha256sum")
            .arg(&archive)
            .output()
            .unwrap();
        let sum = String::from_utf8_lossy(&sum.stdout).to_string();
        let sum = if tamper {
            format!("{}{}", "0".repeat(64), &sum[64..])
        } else {
            sum
        };
        std::fs::write(dir.join(format!("promptgauge-{target}.tar.gz.sha256")), sum).unwrap();
    };
    let install_with = |version: &str, action_ref: &str| {
        let temp = tempfile::tempdir().unwrap();
        let action_path = temp.path().join("action");
        std::fs::create_dir_all(&action_path).unwrap();
        std::fs::write(
            action_path.join("Cargo.toml"),
            "[package]\nname = \"promptgauge\"\nversion = \"9.9.7\"\n",
        )
        .unwrap();
        let path_file = temp.path().join("github_path");
        let out = std::process::Command::new("bash")
            .args(["-e", "-c", &script])
            .env("VERSION", version)
            .env("ACTION_REF", action_ref)
            .env("REPO", "o/pg")
            .env("RUNNER_TEMP", temp.path())
            .env("GITHUB_PATH", &path_file)
            .env("GITHUB_ACTION_PATH", &action_path)
            .output()
            .unwrap();
        let installed = temp.path().join("promptgauge/promptgauge").is_file();
        (out, installed, temp)
    };
    // A release whose archive matches its published checksum is installed.
    publish("v9.9.9", false);
    let (out, installed, _t) = install_with("v9.9.9", "main");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(installed);
    // One that does not is refused, and nothing is unpacked.
    publish("v9.9.8", true);
    let (out, installed, _t) = install_with("v9.9.8", "main");
    assert!(!out.status.success());
    assert!(!installed);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("does not match its published SHA-256"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Pinned by commit, the action installs the version that commit describes, not latest.
    publish("v9.9.7", false);
    let (out, installed, _t) = install_with("", &"a".repeat(40));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(installed);
    let asked = asked.lock().unwrap().clone();
    assert!(
        asked.iter().any(|p| p.contains("/download/v9.9.7/")),
        "{asked:?}"
    );
    assert!(!asked.iter().any(|p| p.contains("latest")), "{asked:?}");
}

/// The outputs a step wrote to `$GITHUB_OUTPUT`, read as GitHub reads them: `name=value`,
/// or `name<<DELIM` then lines up to one that is exactly `DELIM`.
fn step_outputs(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((name, delim)) = line.split_once("<<") {
            let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delim).collect();
            out.push((name.to_string(), value.join("\n")));
        } else if let Some((name, value)) = line.split_once('=') {
            out.push((name.to_string(), value.to_string()));
        }
    }
    out
}

#[test]
fn the_action_s_outputs_hold_a_folder_name_with_a_newline_as_one_value() {
    let action: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join("action.yml")).unwrap())
            .unwrap();
    let step = action["runs"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "run")
        .expect("the run step")["run"]
        .as_str()
        .unwrap()
        .to_string();
    // A promptgauge that leaves a folder whose name would add an output of its own.
    let temp = tempfile::tempdir().unwrap();
    let bin = temp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("promptgauge");
    std::fs::write(
        &fake,
        "#!/bin/sh\nmkdir -p 'reports/x\nexit-code=0'\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let outputs = temp.path().join("github_output");
    let status = std::process::Command::new("bash")
        .args(["-e", "-c", &step])
        .current_dir(temp.path())
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("GITHUB_OUTPUT", &outputs)
        .env("GITHUB_STEP_SUMMARY", temp.path().join("summary.md"))
        .env("BENCH", "bench.yaml")
        .status()
        .unwrap();
    assert!(status.success());
    let written = std::fs::read_to_string(&outputs).unwrap();
    assert_eq!(
        step_outputs(&written),
        vec![
            ("run-dir".to_string(), "reports/x\nexit-code=0".to_string()),
            ("exit-code".to_string(), "1".to_string()),
            ("gates".to_string(), String::new()),
        ],
        "{written}"
    );
}

#[test]
fn the_action_says_how_the_gates_ended_passed_failed_or_inconclusive() {
    let action: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join("action.yml")).unwrap())
            .unwrap();
    let step = action["runs"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "run")
        .expect("the run step")["run"]
        .as_str()
        .unwrap()
        .to_string();
    for (outcomes, code, said) in [
        (r#"["passed", "inconclusive"]"#, 5, "inconclusive"),
        (r#"["inconclusive", "failed"]"#, 1, "failed"),
        (r#"["passed"]"#, 0, "passed"),
    ] {
        // A promptgauge that leaves a run whose summary holds these gates.
        let temp = tempfile::tempdir().unwrap();
        let bin = temp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let gates: Vec<String> = serde_json::from_str::<Vec<String>>(outcomes)
            .unwrap()
            .iter()
            .map(|o| {
                format!(
                    r#"{{"gate": "g", "passed": {}, "outcome": "{o}", "reason": "r"}}"#,
                    o == "passed"
                )
            })
            .collect();
        let fake = bin.join("promptgauge");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\nmkdir -p reports/run\necho '{{\"gates\": [{}]}}' > reports/run/summary.json\nexit {code}\n",
                gates.join(", ")
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let outputs = temp.path().join("github_output");
        let out = std::process::Command::new("bash")
            .args(["-e", "-c", &step])
            .current_dir(temp.path())
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .env("GITHUB_OUTPUT", &outputs)
            .env("GITHUB_STEP_SUMMARY", temp.path().join("summary.md"))
            .env("BENCH", "bench.yaml")
            .output()
            .unwrap();
        assert!(out.status.success());
        let written = step_outputs(&std::fs::read_to_string(&outputs).unwrap());
        assert!(
            written.contains(&("gates".to_string(), said.to_string()))
                && written.contains(&("exit-code".to_string(), code.to_string())),
            "{outcomes}: {written:?}"
        );
        let annotation = String::from_utf8_lossy(&out.stdout).to_string();
        match said {
            "inconclusive" => assert!(
                annotation.contains("::warning title=promptgauge::a gate was inconclusive"),
                "{annotation}"
            ),
            "failed" => assert!(
                annotation.contains("::error title=promptgauge::a gate failed"),
                "{annotation}"
            ),
            _ => assert!(!annotation.contains("::"), "{annotation}"),
        }
    }
}

#[test]
fn the_release_workflow_gives_write_access_only_to_the_job_that_runs_no_build() {
    let read = |p: &str| std::fs::read_to_string(repo().join(p)).unwrap();
    let release: serde_json::Value =
        serde_saphyr::from_str(&read(".github/workflows/release.yml")).unwrap();
    assert_eq!(release["permissions"]["contents"], "read");
    let jobs = release["jobs"].as_object().unwrap();
    for (name, job) in jobs {
        let writes = job["permissions"]["contents"] == "write";
        let runs_code = job["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s.get("run").is_some());
        assert!(!(writes && runs_code), "job {name} may write and runs code");
    }
    assert!(
        jobs.values()
            .any(|j| j["permissions"]["contents"] == "write")
    );
    // Every third-party action, in the workflow and in action.yml, is pinned by commit.
    let pinned = regex::Regex::new(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$").unwrap();
    for file in [".github/workflows/release.yml", "action.yml"] {
        let text = read(file);
        let uses: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().trim_start_matches("- ").strip_prefix("uses:"))
            .map(|u| u.split('#').next().unwrap().trim())
            .collect();
        assert!(!uses.is_empty(), "{file}");
        for u in uses {
            assert!(pinned.is_match(u), "{file}: {u} is not pinned by commit");
        }
    }
    // The pull-request comment updated is the token's own, not any that starts with the
    // marker.
    let action = read("action.yml");
    assert!(
        action.contains("c.user.login === me"),
        "the comment is matched by its author"
    );
}

#[test]
fn bench_run_leaves_no_simulator_running_when_it_ends() {
    // bench/run starts its simulators through bench/mock.sh, inside `$(…)`: they must be
    // killed when the script exits, whatever its own job table holds.
    let bin = assert_cmd::cargo::cargo_bin("promptgauge");
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let urls = scratch.path().join("urls");
    let script = format!(
        "set -eu; PG='{}'; WORK='{}'; source bench/mock.sh; echo \"$(start_mock)\" > '{1}/../urls'; echo \"$(start_mock --seed 2)\" >> '{1}/../urls'",
        bin.display(),
        work.display()
    );
    let status = std::process::Command::new("bash")
        .args(["-c", &script])
        .current_dir(repo())
        .status()
        .unwrap();
    assert!(status.success());
    let urls = std::fs::read_to_string(&urls).unwrap();
    let addrs: Vec<String> = urls
        .lines()
        .map(|u| {
            u.trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(addrs.len(), 2, "{urls}");
    for addr in &addrs {
        assert!(!addr.is_empty(), "{urls}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "a simulator still listens at {addr} after bench/run's helpers ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    assert!(!work.exists(), "the scratch folder is removed");
}

#[test]
fn jobs_csv_writes_one_row_per_job_with_what_the_journal_holds() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let out = tempfile::tempdir().unwrap();
    let csv_path = out.path().join("jobs.csv");
    let (_t, r) = run(
        &url,
        "m",
        &[
            "--variants",
            "plain,step-by-step",
            "--limit",
            "12",
            "--jobs-csv",
            csv_path.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        [
            "case_id",
            "variant",
            "repeat",
            "status",
            "cached",
            "score",
            "prompt_tokens",
            "completion_tokens",
            "tokens_estimated",
            "cost_usd",
            "latency_ms",
            "ttft_ms",
            "attempts"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 24, "one row per job");
    // Each row says what the journal says of its job.
    let journal = std::fs::read_to_string(r.dir.join("results.jsonl")).unwrap();
    let mut cost = 0.0;
    for line in journal.lines() {
        let j: serde_json::Value = serde_json::from_str(line).unwrap();
        let row = rows
            .iter()
            .find(|row| row[0] == j["case_id"] && row[1] == j["variant"])
            .unwrap();
        assert_eq!(&row[3], "graded");
        assert_eq!(row[5].parse::<f64>().unwrap(), j["score"].as_f64().unwrap());
        assert_eq!(row[6], j["usage"]["prompt_tokens"].to_string());
        assert!((row[10].parse::<f64>().unwrap() - j["latency_ms"].as_f64().unwrap()).abs() < 1e-9);
        cost += row[9].parse::<f64>().unwrap();
    }
    let s = summary(&r.dir);
    let listed: f64 = s.variants.iter().map(|v| v.cost_usd.unwrap()).sum();
    assert!((cost - listed).abs() < 1e-12, "{cost} vs {listed}");
    // `report` replays the journal through the same sink: the same file.
    let again = out.path().join("again.csv");
    let o = promptgauge(&repo())
        .args(["report", r.dir.to_str().unwrap(), "--jobs-csv"])
        .arg(&again)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        std::fs::read_to_string(&csv_path).unwrap()
    );
    // A file that cannot be written is refused before anything is sent.
    let sent = server.provider.stats().requests;
    let o = promptgauge(&repo())
        .args(["run", "--base-url", &url, "--model", "m", "--limit", "2"])
        .args(["--out", out.path().to_str().unwrap()])
        .args(["--jobs-csv", "/nonexistent-dir/jobs.csv"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(server.provider.stats().requests, sent);
}

#[test]
fn merge_refuses_a_bench_name_from_run_json_that_cannot_name_a_folder() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(4, 1, "");
    let d = bench.path();
    for shard in ["1/2", "2/2"] {
        promptgauge(d)
            .args(["run", "bench.yaml", "--out", "shards", "--shard", shard])
            .args([
                "--base-url",
                url.as_str(),
                "--model",
                "m",
                "--quiet",
                "--no-store",
            ])
            .assert()
            .success();
    }
    let shards = run_dirs(&d.join("shards"));
    for s in &shards {
        let path = s.join("run.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let tampered = text.replacen("\"name\": \"arithmetic\"", "\"name\": \"../../escaped\"", 1);
        assert_ne!(text, tampered, "the record names its bench");
        std::fs::write(&path, tampered).unwrap();
    }
    let out = promptgauge(d)
        .arg("merge")
        .args(&shards)
        .args(["--out", "merged", "--no-store"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot name a folder"), "{stderr}");
    assert!(!d.join("escaped-merged").exists() && !d.parent().unwrap().join("escaped").exists());
}

/// Shards whose answers came from different servers or protocols are not one run: the
/// merge names both endpoints and writes nothing (issue 50, item 20).
#[test]
fn merge_refuses_shards_run_over_different_endpoints() {
    let (_rt, server) = start_mock(MockConfig::default());
    let (_rt2, other) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(4, 1, "");
    let d = bench.path();
    let shard = |out: &str, i: &str, url: &str, protocol: &str| {
        promptgauge(d)
            .args(["run", "bench.yaml", "--out", out, "--shard", i])
            .args(["--base-url", url, "--model", "m", "--protocol", protocol])
            .args(["--quiet", "--no-store"])
            .assert()
            .success();
    };
    let (a, b) = (server.base_url(), other.base_url());
    shard("urls", "1/2", &a, "openai-chat");
    shard("urls", "2/2", &b, "openai-chat");
    shard("protocols", "1/2", &a, "openai-chat");
    shard("protocols", "2/2", &a, "anthropic-messages");
    for (folder, named) in [
        ("urls", [a.as_str(), b.as_str()]),
        ("protocols", ["openai-chat", "anthropic-messages"]),
    ] {
        let out = promptgauge(d)
            .arg("merge")
            .args(run_dirs(&d.join(folder)))
            .args(["--out", "merged", "--no-store"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        for name in named {
            assert!(stderr.contains(name), "{folder}: {stderr}");
        }
        assert!(!d.join("merged").exists() || run_dirs(&d.join("merged")).is_empty());
    }
    // The same server and protocol merge as before.
    shard("same", "1/2", &a, "openai-chat");
    shard("same", "2/2", &a, "openai-chat");
    promptgauge(d)
        .arg("merge")
        .args(run_dirs(&d.join("same")))
        .args(["--out", "merged", "--no-store", "--quiet"])
        .assert()
        .success();
}

/// With `repeats: k` each variant reports pass@k and pass^k over its cases, the flaky cases
/// (repeats disagree) in summary.json, summary.md and report.html, and `--min-pass-all`
/// gates pass^k.
#[test]
fn repeats_report_pass_at_k_pass_all_k_and_flaky_cases_and_min_pass_all_gates_them() {
    let bench = arithmetic_bench(40, 2, "repeats: 3\n");
    let d = bench.path();
    // Answers that flicker: a scorer that fails every fifth answer it is given (one at a
    // time), so some cases are right on every repeat and some on only some.
    std::fs::write(
        d.join("score.py"),
        "import json, sys\nn = 0\nfor line in sys.stdin:\n    req = json.loads(line)\n    n += 1\n    print(json.dumps({\"id\": req[\"id\"], \"score\": 0 if n % 5 == 0 else 1}), flush=True)\n",
    )
    .unwrap();
    let yaml = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace(
            "grade: { kind: number }",
            "grade: { kind: command, run: [python3, score.py], workers: 1 }",
        );
    std::fs::write(d.join("bench.yaml"), yaml).unwrap();
    let run = |args: &[&str]| {
        let out = promptgauge(d)
            .args([
                "run",
                "bench.yaml",
                "--base-url",
                "mock",
                "--no-store",
                "--concurrency",
                "1",
            ])
            .args(args)
            .output()
            .unwrap();
        let newest = run_dirs(&d.join("reports")).pop();
        (out, newest)
    };
    let (out, dir) = run(&[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = dir.unwrap();
    let s = summary(&dir);
    // Each case's repeats from the journal: pass@3 = any right, pass^3 = all right.
    let records = journal(&dir);
    for v in &s.variants {
        let mut cases: std::collections::BTreeMap<String, Vec<bool>> = Default::default();
        for r in records.iter().filter(|r| r["variant"] == v.name.as_str()) {
            cases
                .entry(r["case_id"].as_str().unwrap().to_string())
                .or_default()
                .push(r["score"] == 1.0);
        }
        let n = cases.len() as f64;
        let any = cases.values().filter(|c| c.iter().any(|x| *x)).count() as f64 / n;
        let all = cases.values().filter(|c| c.iter().all(|x| *x)).count() as f64 / n;
        let flaky: Vec<String> = cases
            .iter()
            .filter(|(_, c)| c.iter().any(|x| *x) && !c.iter().all(|x| *x))
            .map(|(id, _)| id.clone())
            .collect();
        let p = v.repeats.pass_k.as_ref().expect("pass@k with repeats");
        assert_eq!((p.k, p.cases), (3, 40));
        assert!((p.pass_at_k - any).abs() < 1e-12, "{p:?}");
        assert!((p.pass_all_k - all).abs() < 1e-12, "{p:?}");
        assert!(p.pass_all_k <= v.accuracy.unwrap() && v.accuracy.unwrap() <= p.pass_at_k);
        assert!(p.pass_all_k_ci_low.unwrap() < all && all < p.pass_all_k_ci_high.unwrap());
        assert_eq!(v.repeats.flaky, flaky);
        assert!(!flaky.is_empty(), "sampled answers flicker on some case");
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = &s.variants[0].repeats.flaky[0];
    for (what, text) in [
        ("summary.md", md.as_str()),
        ("report.html", &html),
        ("terminal", &stdout),
    ] {
        // Markdown keeps `@` from reading as a mention with a zero-width space.
        let text = &text.replace('\u{200b}', "");
        assert!(
            text.contains("pass@3")
                && text.contains("pass^3")
                && text.contains("flaky (repeats disagree)"),
            "{what}: {text}"
        );
        assert!(
            text.contains(first.as_str()),
            "{what} lists the flaky case {first}"
        );
    }
    // The gate: pass^3 against P, with its interval; refused without repeats.
    let (out, _) = run(&["--min-pass-all", "1.0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("min-pass-all 100.0%") && stderr.contains("pass^3"),
        "{stderr}"
    );
    let low = s
        .variants
        .iter()
        .map(|v| v.repeats.pass_k.as_ref().unwrap().pass_all_k)
        .fold(1.0, f64::min);
    let (out, _) = run(&["--min-pass-all", &format!("{}", low / 2.0)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Below P with an interval reaching above it: inconclusive (exit 5), as --min-accuracy.
    let v = &s.variants[0];
    let p = v.repeats.pass_k.as_ref().unwrap();
    let between = (p.pass_all_k + p.pass_all_k_ci_high.unwrap()) / 2.0;
    let (out, _) = run(&["--min-pass-all", &format!("{}={between}", v.name)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("straddles"), "{stderr}");
    let (out, _) = run(&["--repeats", "1", "--min-pass-all", "0.5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--min-pass-all gates pass^k"), "{stderr}");
}
