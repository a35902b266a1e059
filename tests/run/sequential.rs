//! `run --until-decided` end to end on the simulator: cases in a seeded random order, each
//! variant stopped when decided, the jobs not needed never sent, and the same decisions
//! again from `report` and from a resumed run.

use std::path::Path;

use crate::common::*;
use promptgauge::mock::MockConfig;
use promptgauge::report::Summary;

/// The run's summary.json is what the committed schema describes.
fn assert_follows_schema(run: &Path) {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/summary.schema.json")).unwrap(),
    )
    .unwrap();
    let instance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let errors: Vec<String> = jsonschema::validator_for(&schema)
        .unwrap()
        .iter_errors(&instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", run.display());
}

fn summary(dir: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn a_clear_gain_stops_the_run_early_and_the_decision_replays() {
    // Some 429s with a short Retry-After: early cases are sometimes slow, which must not
    // let the workers run far ahead of the tests.
    let (_rt, server) = start_mock(MockConfig {
        faults: promptgauge::mock::Faults {
            rate_429: 0.05,
            ..Default::default()
        },
        retry_after: promptgauge::mock::RetryAfter::Millis(100),
        ..MockConfig::default()
    });
    // 600 arithmetic cases; "careful" is about 11 points better on the simulator.
    // A fixed seed: the same case order, and so the same decision, on every machine.
    let dir = arithmetic_bench(600, 2, "sequential: { seed: 7 }\nendpoint: { model: m }\n");
    let d = dir.path();
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--until-decided",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--max-drop",
            "10",
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
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let s = summary(&run);
    let seq = s.sequential.clone().expect("a sequential summary");
    let v = &seq.variants[0];
    assert_eq!(
        (v.variant.as_str(), v.verdict.as_str()),
        ("careful", "better"),
        "{seq:?}"
    );
    assert!(v.statistic >= v.threshold);
    assert!(v.cases >= seq.min_cases && v.cases < 300, "{v:?}");
    // Only what the decision needed was sent, and the few cases the workers may run
    // ahead of the tests (about concurrency / jobs per case): the rest of the 1200 jobs
    // never were.
    let sent = server.provider.stats().generations as usize;
    let sent_by_run = sent;
    assert!(
        server.provider.stats().status_429 > 0,
        "some were throttled"
    );
    assert!(
        sent <= 2 * (v.cases as usize + 10),
        "{sent} generations, decided after {} cases",
        v.cases
    );
    assert_eq!(s.jobs_finished, sent);
    assert!(s.complete, "jobs not needed are not missing");
    assert_eq!(s.jobs_finished + seq.jobs_not_needed, 1200);
    // Savings against the fixed design at the baseline accuracy seen (which may be none
    // when that design is small): what it would send, less what was sent.
    let fixed = seq.jobs_fixed_design.unwrap();
    assert_eq!(
        seq.jobs_saved,
        Some(fixed.saturating_sub(s.jobs_finished as u64))
    );
    assert_eq!(
        seq.cost_saved_usd.is_some_and(|c| c > 0.0),
        seq.jobs_saved > Some(0)
    );
    // The verdict is the sequential one, and the fixed-sample p-value is gone.
    let c = &s.comparisons[0];
    assert_eq!(c.verdict, promptgauge::report::compare::Verdict::Better);
    assert!(c.p_holm.is_none() && c.sentence.contains("decided by the sequential test"));
    assert!(stdout.contains("Stopped when decided"), "{stdout}");
    // --max-drop takes the sequential verdict: better passes.
    assert!(
        s.gates.iter().any(|g| g.gate == "max-drop" && g.passed),
        "{:?}",
        s.gates
    );
    // `check` shows the plan before anything is sent.
    let check = promptgauge(d)
        .args(["check", "bench.yaml", "--until-decided"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&check.stdout);
    assert!(
        shown.contains("--until-decided: cases in a seeded random order")
            && shown.contains("at most 600 cases"),
        "{shown}"
    );
    // The cases ran in the seeded order, not the bench's: every case answered lies near
    // the front of that order.
    let journal = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let seed = record["plan"]["sequential"]["seed"].as_u64().unwrap();
    let order = promptgauge::suite::plan::case_order(600, seed);
    let position = |case: &str| {
        let i: usize = case.trim_start_matches("add-").parse::<usize>().unwrap() - 1;
        order.iter().position(|&o| o == i).unwrap()
    };
    let furthest = journal
        .lines()
        .filter(|l| !l.starts_with("{\"event\":"))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| position(r["case_id"].as_str().unwrap()))
        .max()
        .unwrap();
    assert!(
        furthest < v.cases as usize + 50,
        "{furthest} vs {} cases",
        v.cases
    );
    let bench_order_prefix =
        (1..=v.cases as usize).all(|i| journal.contains(&format!("\"add-{i:02}\"")));
    assert!(!bench_order_prefix);

    // The summary with its sequential part is what the committed schema describes.
    assert_follows_schema(&run);

    // The decision was journaled when it was reached: one line, after the records the
    // tests had heard then.
    let decided = promptgauge::runner::journal::read(&run.join("results.jsonl"), |_| {})
        .unwrap()
        .decided;
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        (
            decided[0].variant.as_str(),
            decided[0].verdict.as_str(),
            decided[0].cases
        ),
        ("careful", "better", v.cases)
    );
    let at = journal
        .lines()
        .position(|l| l.starts_with("{\"event\":\"decided\""))
        .unwrap();
    assert!(
        at as u64 >= decided[0].jobs_heard,
        "written after what it heard"
    );

    // `report` replays the journal to the same decisions, and says when it stopped live.
    let reported = promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(reported.status.code(), Some(0));
    let said = String::from_utf8_lossy(&reported.stderr);
    assert!(
        said.contains(&format!(
            "decided live: careful better after {} cases",
            v.cases
        )),
        "{said}"
    );
    assert_eq!(summary(&run).sequential.unwrap().variants, seq.variants);

    // A run killed anywhere and resumed goes on from the same place: the journal a kill
    // leaves (a prefix: what had finished) is replayed into the same tests, and the
    // reports equal the uninterrupted run's — every figure counts only what the tests
    // used, not the jobs the workers happened to send ahead of a decision. The
    // simulator answers a job the same way every time.
    let lines: Vec<&str> = journal.lines().collect();
    let figures = |s: &Summary| {
        let variants: Vec<_> = s
            .variants
            .iter()
            .map(|v| (v.n, v.correct, v.accuracy, v.ci_low, v.ci_high, v.failed))
            .collect();
        let comparisons: Vec<_> = s
            .comparisons
            .iter()
            .map(|c| {
                (
                    c.cases,
                    c.difference,
                    c.ci_low,
                    c.ci_high,
                    c.sentence.clone(),
                )
            })
            .collect();
        (
            variants,
            comparisons,
            s.sequential.clone().unwrap().variants,
        )
    };
    for (i, keep) in [
        lines.len() / 6,
        lines.len() / 3,
        lines.len() / 2,
        lines.len() - 3,
    ]
    .into_iter()
    .enumerate()
    {
        let copy = d.join("reports").join(format!("cut-{i}"));
        std::fs::create_dir(&copy).unwrap();
        std::fs::copy(run.join("run.json"), copy.join("run.json")).unwrap();
        let kept: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(copy.join("results.jsonl"), kept).unwrap();
        let before = server.provider.stats().generations as usize;
        promptgauge(d)
            .args([
                "run",
                "--resume",
                copy.to_str().unwrap(),
                "--base-url",
                &server.base_url(),
            ])
            .assert()
            .success();
        let resumed = summary(&copy);
        assert_eq!(figures(&resumed), figures(&s), "cut after {keep} records");
        // The decision is journaled once, whether the cut journal held it or not.
        let decided = promptgauge::runner::journal::read(&copy.join("results.jsonl"), |_| {})
            .unwrap()
            .decided;
        assert_eq!(decided.len(), 1, "cut after {keep}: {decided:?}");
        // It sends what the decision still needs (and the few cases the workers may run
        // ahead), never more than the whole run did.
        let sent = server.provider.stats().generations as usize - before;
        assert!(
            keep + sent <= sent_by_run + 2 * 10,
            "cut after {keep}: {sent} more sent, the whole run sent {sent_by_run}"
        );
    }
}

#[test]
fn until_decided_needs_two_variants_and_a_sane_sequential_block() {
    let dir = arithmetic_bench(20, 1, "");
    let o = promptgauge(dir.path())
        .args(["run", "bench.yaml", "--until-decided", "--base-url", "mock"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("this run has one variant"));
    let dir = arithmetic_bench(20, 2, "sequential: { detect: 150 }\n");
    let o = promptgauge(dir.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bench.yaml:7") && err.contains("sequential.detect must be between 0 and 100"),
        "{err}"
    );
}

#[test]
fn too_few_cases_are_refused_and_failed_jobs_still_end_in_a_verdict() {
    // Fewer cases than min_cases: no verdict could ever come.
    let dir = arithmetic_bench(30, 2, "");
    let o = promptgauge(dir.path())
        .args(["run", "bench.yaml", "--until-decided", "--base-url", "mock"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("min_cases (40)") && err.contains("this run has 30"),
        "{err}"
    );

    // One attempt per job and broken streams: some jobs fail, and their cases tell the
    // test nothing. When every case has been heard the verdict is "undecided" (or
    // decided), never left "running".
    let (_rt, server) = start_mock(MockConfig {
        faults: promptgauge::mock::Faults {
            cut: 0.2,
            ..Default::default()
        },
        ..MockConfig::default()
    });
    let dir = arithmetic_bench(60, 2, "limits: { max_attempts: 1 }\n");
    let o = promptgauge(dir.path())
        .args([
            "run",
            "bench.yaml",
            "--until-decided",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = summary(&run_dirs(&dir.path().join("reports"))[0]);
    let seq = s.sequential.unwrap();
    assert!(s.jobs_failed > 0);
    assert_ne!(seq.variants[0].verdict, "running", "{seq:?}");
    if seq.variants[0].verdict == "undecided" {
        assert_eq!(seq.jobs_saved, None, "nothing is saved without a verdict");
    }
}

#[test]
fn with_max_drop_the_sequential_test_decides_the_drop_itself() {
    let (_rt, server) = start_mock(MockConfig::default());
    let dir = arithmetic_bench(600, 3, "sequential: { seed: 7 }\n");
    let d = dir.path();
    let run = |variants: &str, drop: &str| {
        let out = promptgauge(d)
            .args([
                "run",
                "bench.yaml",
                "--until-decided",
                "--base-url",
                &server.base_url(),
                "--model",
                "m",
                "--variants",
                variants,
                "--max-drop",
                drop,
                "--no-store",
            ])
            .output()
            .unwrap();
        (out, summary(&run_dirs(&d.join("reports")).pop().unwrap()))
    };
    // "polite" is about as good as "plain": no difference of 10 points, and not 10 points
    // worse — shown by the drop check itself (before, only a variant decided "better" could
    // pass, so a variant as good as the baseline failed the gate).
    let (out, s) = run("plain,polite", "10");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seq = s.sequential.clone().unwrap();
    assert_eq!(seq.max_drop, Some(10.0));
    let v = &seq.variants[0];
    assert_eq!(v.verdict, "no_difference", "{v:?}");
    let drop = v.drop.clone().unwrap();
    assert_eq!(drop.verdict, "pass", "{drop:?}");
    assert!(drop.statistic >= drop.threshold);
    let gate = s.gates.iter().find(|g| g.gate == "max-drop").unwrap();
    assert!(
        gate.passed && gate.reason.contains("shown by the sequential test"),
        "{gate:?}"
    );
    // The variant ran until both questions were settled, and no further.
    assert_eq!(
        s.variants[1].n,
        v.cases.max(drop.cases),
        "{:?}",
        s.variants[1]
    );
    // Against "careful" (about 11 points better), "plain" looks worse: the gate fails.
    let (out, s) = run("careful,plain", "5");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = &s.sequential.clone().unwrap().variants[0];
    assert_eq!(v.drop.clone().unwrap().verdict, "fail", "{v:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("gate failed: max-drop: plain looks worse")
    );
    // The drop check is part of the plan: a resume cannot check another drop by going on.
    let last = run_dirs(&d.join("reports")).pop().unwrap();
    let sent = server.provider.stats().requests;
    let out = promptgauge(d)
        .args(["run", "--resume", last.to_str().unwrap(), "--max-drop", "7"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ran --until-decided with --max-drop 5"),
        "{stderr}"
    );
    assert_eq!(server.provider.stats().requests, sent);
}

/// `--until-decided` on a grid: every cell tested on both axes (which prompt at each
/// endpoint, which model for each variant), a cell's jobs stopped once every test it is in
/// has decided, and the same decisions again from `report`.
#[test]
fn a_grid_until_decided_tests_both_axes_and_stops_each_cell_when_settled() {
    let (_a, big) = start_mock(MockConfig::default());
    let (_b, tiny) = start_mock(MockConfig::default());
    let extra = format!(
        "sequential: {{ seed: 11 }}\nendpoints:\n  - {{ name: big, base_url: \"{}\", model: big-model }}\n  - {{ name: tiny, base_url: \"{}\", model: tiny-model, protocol: openai-responses }}\n",
        big.base_url(),
        tiny.base_url()
    );
    let dir = arithmetic_bench(400, 2, &extra);
    let d = dir.path();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--until-decided", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let s = summary(&run);
    assert_eq!(s.schema, "promptgauge.summary/3");
    let seq = s.sequential.clone().expect("a sequential summary");
    let tested: Vec<(&str, &str)> = seq
        .variants
        .iter()
        .map(|v| (v.variant.as_str(), v.against.as_deref().unwrap()))
        .collect();
    assert_eq!(
        tested,
        [
            ("big/careful", "big/plain"),
            ("tiny/careful", "tiny/plain"),
            ("tiny/plain", "big/plain"),
            ("tiny/careful", "big/careful"),
        ]
    );
    // The careful prompt is clearly better on both: decided, long before 400 cases.
    for v in &seq.variants[..2] {
        assert_eq!(v.verdict, "better", "{v:?}");
        assert!(v.cases < 200, "{v:?}");
    }
    // Each comparison in the figures carries its own sequential verdict.
    for c in &s.comparisons {
        let v = seq
            .variants
            .iter()
            .find(|v| v.variant == c.variant && v.against.as_deref() == Some(c.against.as_str()))
            .unwrap();
        assert!(
            c.sentence.contains("sequential") || c.sentence.contains("log evidence"),
            "{}: {}",
            v.verdict,
            c.sentence
        );
    }
    // Nothing was sent past what the tests needed (and the few cases workers run ahead).
    let sent = big.provider.stats().generations + tiny.provider.stats().generations;
    assert_eq!(s.jobs_finished as u64, sent);
    assert_eq!(s.jobs_finished + seq.jobs_not_needed, 1600);
    let furthest = seq.variants.iter().map(|v| v.cases).max().unwrap();
    if seq
        .variants
        .iter()
        .all(|v| v.verdict != "running" && v.verdict != "undecided")
    {
        assert!(
            sent < 4 * (furthest + 20),
            "{sent} sent, the last decision after {furthest} cases"
        );
    }
    // The journal keeps each decision with what it was against; `report` decides the same.
    let journal = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert!(
        journal.contains("\"against\":\"big/plain\""),
        "the decisions say against what"
    );
    let before = std::fs::read_to_string(run.join("summary.json")).unwrap();
    let out = promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = summary(&run);
    assert_eq!(again.sequential, s.sequential);
    assert_eq!(
        again
            .variants
            .iter()
            .map(|v| (v.n, v.correct))
            .collect::<Vec<_>>(),
        s.variants
            .iter()
            .map(|v| (v.n, v.correct))
            .collect::<Vec<_>>()
    );
    let _ = before;
}

/// A bench of `cases` sums and one variant per accuracy (the simulator scores a prompt
/// that says "simulated accuracy N%" about that well).
pub(crate) fn best_bench(cases: usize, accuracies: &[u32]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: String = (0..cases)
        .map(|i| {
            let (a, b) = (i % 97 + 3, i / 97 + 11);
            format!(
                "{{\"id\": \"s-{i}\", \"vars\": {{\"q\": \"What is {a} + {b}?\"}}, \"expected\": \"{}\"}}\n",
                a + b
            )
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), lines).unwrap();
    let mut variants = String::new();
    for (i, acc) in accuracies.iter().enumerate() {
        std::fs::write(
            d.join(format!("v{i}.yaml")),
            format!("name: v{i}\nmessages:\n  - {{ role: system, content: \"Answer with a number only (simulated accuracy {acc}%).\" }}\n  - {{ role: user, content: \"{{{{ q }}}}\" }}\n"),
        )
        .unwrap();
        variants.push_str(&format!("  - v{i}.yaml\n"));
    }
    std::fs::write(
        d.join("bench.yaml"),
        format!("name: best\ncases: cases.jsonl\nvariants:\n{variants}grade: {{ kind: number }}\nlimits: {{ concurrency: 12 }}\n"),
    )
    .unwrap();
    dir
}

#[test]
fn best_over_grouped_cases_counts_groups_and_sends_each_group_whole() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(900, &[62, 82, 66]);
    let d = b.path();
    // Groups of three cases (cases 0–2 share a passage, and so on).
    group_cases(d, 3);
    let (code, said) = search(d, &server.base_url(), &["--seed", "4"]);
    assert!(code.is_some_and(|c| c < 2), "{said}");
    assert!(
        said.contains("groups of cases, by `group:`, in a seeded random order"),
        "{said}"
    );
    assert!(said.contains("v1 is the best of 3"), "{said}");
    assert!(
        said.lines().any(
            |l| (l.starts_with("v0 out after ") && l.ends_with(" groups: below v1"))
                || (l.starts_with("v0 set aside after ") && l.contains(" groups: v1 leads"))
        ),
        "{said}"
    );
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    assert_follows_schema(&run);
    let best = summary(&run).sequential.unwrap().best.unwrap();
    assert!(best.grouped);
    assert_eq!(best.named, vec!["v1".to_string()]);
    assert!(best.cases < 300, "{best:?}");
    let lines = journal(&run);
    let cases_of = |variant: &str| -> std::collections::BTreeMap<String, usize> {
        let mut groups = std::collections::BTreeMap::new();
        for r in lines
            .iter()
            .filter(|r| r["variant"] == variant && r["case_id"].is_string())
        {
            let case: usize = r["case_id"].as_str().unwrap()[2..].parse().unwrap();
            *groups.entry(format!("g{}", case / 3)).or_insert(0) += 1;
        }
        groups
    };
    // The answer's arm heard whole groups: each of its groups has its three cases, but for
    // those still in flight when the search ended (at most the concurrency's worth).
    let winner = cases_of("v1");
    let partial = winner.values().filter(|&&n| n != 3).count();
    assert!(partial <= 4, "{partial} partial groups: {winner:?}");
    assert!(winner.len() as u64 >= best.cases);
    // An arm that stopped getting groups (out, or set aside) got few after: its standing
    // counts the groups it shared with the answer.
    let stopped = best
        .eliminated
        .iter()
        .map(|e| (e.variant.clone(), e.cases))
        .chain(best.standing.iter().map(|a| (a.variant.clone(), a.cases)));
    for (variant, at) in stopped {
        assert!(at <= best.cases);
        let groups = cases_of(&variant);
        assert!(groups.len() as u64 <= at + 5, "{variant}: {}", groups.len());
    }
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "decided" && l["unit"] == "groups")
    );
    assert_eq!(
        server.provider.stats().requests as usize,
        lines.iter().filter(|r| r["case_id"].is_string()).count()
    );
}

#[test]
fn best_over_groups_of_unequal_sizes_names_the_arm_the_report_finds_better() {
    // 400 groups of one case and 400 of nine. "a" is right 90% of the time on one-case
    // groups and 55% on nine-case ones, "b" 50% and 75%: over cases b is 14 points better
    // (72.5% against 58.5%), over groups, each weighing one, a would be 10 points better.
    // The search names b, and the report's comparison of the same jobs agrees.
    let (_rt, server) = start_mock(MockConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut lines = String::new();
    let mut case = 0;
    for g in 0..800 {
        let (size, a, b) = if g % 2 == 0 { (1, 90, 50) } else { (9, 55, 75) };
        for _ in 0..size {
            let (x, y) = (case % 97 + 3, case / 97 + 11);
            lines.push_str(&format!(
                "{{\"id\": \"s-{case}\", \"group\": \"g{g}\", \"vars\": {{\"q\": \"What is {x} + {y}?\", \"a\": \"{a}\", \"b\": \"{b}\"}}, \"expected\": \"{}\"}}\n",
                x + y
            ));
            case += 1;
        }
    }
    std::fs::write(d.join("cases.jsonl"), lines).unwrap();
    for v in ["a", "b"] {
        std::fs::write(
            d.join(format!("{v}.yaml")),
            format!("name: {v}\nmessages:\n  - {{ role: system, content: \"Answer with a number only (simulated accuracy {{{{ {v} }}}}%).\" }}\n  - {{ role: user, content: \"{{{{ q }}}}\" }}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        d.join("bench.yaml"),
        "name: unequal\ncases: cases.jsonl\nvariants:\n  - a.yaml\n  - b.yaml\ngrade: { kind: number }\nlimits: { concurrency: 12 }\n",
    )
    .unwrap();
    let (code, said) = search(d, &server.base_url(), &["--seed", "3"]);
    assert!(code.is_some_and(|c| c < 2), "{said}");
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let s = summary(&run);
    let best = s.sequential.as_ref().unwrap().best.as_ref().unwrap();
    assert!(best.grouped);
    assert_eq!(best.named, vec!["b".to_string()], "{said}");
    // a went out below b, or stands behind it over cases: the mean searched is over cases.
    match best.eliminated.first() {
        Some(e) => {
            assert_eq!((e.variant.as_str(), e.by.as_str()), ("a", "b"), "{best:?}");
            assert!(e.gap_seen > 0.0, "{best:?}");
        }
        None => {
            let a = &best.standing[0];
            assert_eq!((a.variant.as_str(), a.against.as_str()), ("a", "b"));
            assert!(a.gap_seen < 0.0, "{best:?}");
        }
    }
    // The table: b against the baseline a, over the same cases, is better.
    let c = s
        .comparisons
        .iter()
        .find(|c| c.variant == "b" && c.against == "a")
        .unwrap();
    assert!(c.difference.unwrap() > 0.0, "{c:?}");
    assert_eq!(
        c.verdict,
        promptgauge::report::compare::Verdict::Better,
        "{said}"
    );
}

/// Puts the cases of `dir`'s cases.jsonl in groups of `size`, in file order (g0, g1, …).
fn group_cases(dir: &Path, size: usize) {
    let path = dir.join("cases.jsonl");
    let grouped: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "{}, \"group\": \"g{}\"}}\n",
                l.trim_end_matches('}'),
                i / size
            )
        })
        .collect();
    std::fs::write(path, grouped).unwrap();
}

/// The answer of a `--best` run's summary: (outcome, named, each elimination as
/// (variant, by, cases), cases).
/// `run bench.yaml --best` on the simulator at `url`, with `extra`: its exit code and what
/// it said on both streams.
fn search(d: &Path, url: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--best", "--no-store"])
        .args(["--base-url", url, "--model", "m"])
        .args(extra)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), said)
}

type Search = (String, Vec<String>, Vec<(String, String, u64)>, u64);

fn search_of(run: &Path) -> Search {
    let best = summary(run).sequential.unwrap().best.unwrap();
    let out = best
        .eliminated
        .iter()
        .map(|e| (e.variant.clone(), e.by.clone(), e.cases))
        .collect();
    (best.outcome, best.named, out, best.cases)
}

#[test]
fn best_in_shards_merged_searches_as_one_run_and_a_later_shard_skips_the_arms_out() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(900, &[70, 80, 5, 72]);
    let d = b.path();
    let url = server.base_url();
    // Runs the command, and returns the run folder it made and what it said.
    let made = |cmd: &mut assert_cmd::Command| {
        let before = run_dirs(&d.join("reports"));
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let dir = run_dirs(&d.join("reports"))
            .into_iter()
            .find(|r| !before.contains(r));
        (out.status.code(), dir, said)
    };
    let run = |extra: &[&str]| {
        made(
            promptgauge(d)
                .args(["run", "bench.yaml", "--best", "--no-store", "--quiet"])
                .args(["--base-url", &url, "--model", "m"])
                .args(extra),
        )
    };
    let merge = |shards: &[&Path]| {
        let (code, dir, said) = made(promptgauge(d).arg("merge").args(shards).arg("--no-store"));
        assert!(code.is_some_and(|c| c != 2), "{said}");
        (dir.unwrap(), format!("exit {code:?}\n{said}"))
    };

    // One run, then the same search in three shards run side by side: the merge searches
    // their blocks in order and finds what the run found, at the same cases.
    let (code, whole, said) = run(&["--seed", "7"]);
    assert!(code.is_some_and(|c| c < 2), "{said}");
    let whole = search_of(&whole.unwrap());
    assert_eq!(whole.1, vec!["v1".to_string()], "{whole:?}");
    assert!(!whole.2.is_empty());
    let before = server.provider.stats().requests;
    let mut shards = Vec::new();
    for i in 1..=3 {
        let (code, dir, said) = run(&["--seed", "7", "--shard", &format!("{i}/3")]);
        assert!(code.is_some_and(|c| c < 2), "{said}");
        shards.push(dir.unwrap());
    }
    // Each shard sent its block whole: 300 cases × 4 arms.
    assert_eq!(server.provider.stats().requests - before, 3600);
    assert_follows_schema(&shards[1]);
    let note = std::fs::read_to_string(shards[1].join("summary.md")).unwrap();
    assert!(note.contains("Shard 2/3 of a --best search"), "{note}");
    let refs: Vec<&Path> = shards.iter().map(|p| p.as_path()).collect();
    let (merged, _) = merge(&refs);
    assert_follows_schema(&merged);
    assert_eq!(search_of(&merged), whole);

    // One shard at a time, each after the merge of those before: shard 2 sends no case of
    // the arm the first merge showed out, and once the search has ended a later shard is
    // refused before it sends anything.
    let sixth = |i: u32, after: Option<&Path>| {
        let shard = format!("{i}/6");
        let mut args = vec!["--seed", "7", "--shard", &shard];
        if let Some(after) = after {
            args.extend(["--after", after.to_str().unwrap()]);
        }
        run(&args)
    };
    let (code, one, said) = sixth(1, None);
    assert!(code.is_some_and(|c| c < 2), "{said}");
    let one = one.unwrap();
    let (first, said) = merge(&[&one]);
    assert!(said.starts_with("exit Some(3)"), "incomplete: {said}");
    assert!(said.contains("went through shard 1/6"), "{said}");
    assert!(said.contains("--shard 2/6 --seed 7 --after "), "{said}");
    let (outcome, _, out, _) = search_of(&first);
    assert_eq!(outcome, "open");
    assert_eq!(out.len(), 1, "{out:?}");
    let before = server.provider.stats().requests;
    let (code, two, said) = sixth(2, Some(&first));
    assert!(code.is_some_and(|c| c < 2), "{said}");
    let sent = server.provider.stats().requests - before;
    assert_eq!(sent, 150 * 3, "the arm out is not sent");
    let two = two.unwrap();
    assert_follows_schema(&two);
    // Its pairwise lines are descriptions: the merge gives the verdict.
    let md = std::fs::read_to_string(two.join("summary.md")).unwrap();
    assert!(
        md.contains("### Against the baseline (descriptions"),
        "{md}"
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(two.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["plan"]["arms_out"][0], out[0].0.as_str());
    assert_eq!(record["jobs_planned"], 450);
    let (both, said) = merge(&[&one, &two]);
    assert_eq!(search_of(&both), whole, "the same answer as one run");
    // Answered: the shards not run are not needed, and the merged run is complete.
    assert!(
        said.contains("shards 3/6, 4/6, 5/6, 6/6 are not needed"),
        "{said}"
    );
    assert!(summary(&both).complete, "{said}");
    let before = server.provider.stats().requests;
    let (code, _, said) = sixth(3, Some(&both));
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("the search already ended there (v1 the answer"),
        "{said}"
    );

    // --after names a merge of this search, nothing else, and this shard is one it did
    // not combine, of the same count.
    for (after, expected) in [
        (two.clone(), "it is not a merged run"),
        (d.join("nowhere"), "--after "),
    ] {
        let (code, _, said) = sixth(3, Some(&after));
        assert_eq!(code, Some(2), "{said}");
        assert!(said.contains(expected), "{said}");
    }
    let (code, _, said) = sixth(1, Some(&first));
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("shard 1/6 is in that merge already"),
        "{said}"
    );
    assert!(said.contains("the next is 2/6"), "{said}");
    for (seed, shard, expected) in [
        (
            "7",
            "2/4",
            "it merged shards of 6, and this run is shard 2/4",
        ),
        (
            "8",
            "2/6",
            "it merged another plan: it drew its order with seed 7, this run with 8",
        ),
    ] {
        let after = first.to_str().unwrap();
        let (code, _, said) = run(&["--seed", seed, "--shard", shard, "--after", after]);
        assert_eq!(code, Some(2), "{said}");
        assert!(said.contains(expected), "{said}");
    }

    // A shard that did not finish (stopped by Ctrl-C, say) is resumed before the next.
    let record_path = one.join("run.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record_path).unwrap()).unwrap();
    record["stopped"] = "interrupted".into();
    std::fs::write(&record_path, record.to_string()).unwrap();
    let (_, said) = merge(&[&one]);
    assert!(said.contains("shard 1/6 did not finish"), "{said}");
    assert!(said.contains("promptgauge run --resume "), "{said}");
    assert!(!said.contains("--shard 2/6"), "{said}");
    let (code, _, said) = made(
        promptgauge(d)
            .args(["run", "bench.yaml", "--no-store", "--shard", "2/6"])
            .args(["--after", first.to_str().unwrap()])
            .args(["--base-url", &url, "--model", "m"]),
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("this run does not search for the best"),
        "{said}"
    );
    assert_eq!(server.provider.stats().requests, before, "nothing sent");
}

#[test]
fn best_over_groups_larger_than_the_workers_run_ahead_still_ends() {
    // Groups of 30 cases at concurrency 3: each group must go out whole, though the
    // workers otherwise keep only a case or two ahead of the search.
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(1200, &[60, 85]);
    let d = b.path();
    group_cases(d, 30);
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--best",
            "--seed",
            "2",
            "--no-store",
            "--concurrency",
            "4",
        ])
        .args(["--base-url", &server.base_url(), "--model", "m"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c < 2), "{said}");
    let best = summary(&run_dirs(&d.join("reports")).pop().unwrap())
        .sequential
        .unwrap()
        .best
        .unwrap();
    assert!(best.grouped);
    assert_eq!(best.named, vec!["v1".to_string()], "{best:?}");
}

#[test]
fn best_by_a_judge_says_so_and_people_s_labels_can_overrule_it() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(600, &[62, 84, 70]);
    let d = b.path();
    let path = d.join("bench.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "grade: { kind: number }",
        "grade: { kind: judge }\njudge: { model: judge-model }",
    );
    std::fs::write(&path, text).unwrap();
    let (code, said) = search(d, &server.base_url(), &["--seed", "3"]);
    assert!(code.is_some_and(|c| c < 2), "{said}");
    assert!(said.contains("v1 is the best of 3"), "{said}");
    assert!(
        said.contains("The search ranked the judge's scores: its answer is the judge's best"),
        "{said}"
    );
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let records: Vec<serde_json::Value> = journal(&run)
        .into_iter()
        .filter(|r| r["case_id"].is_string() && r["score"].is_number())
        .collect();
    // People label `n` answers of each arm: `agree` gives the judge's own score, else the
    // opposite of it.
    let label = |agree: bool, n: usize| {
        let mut lines = String::new();
        for arm in ["v0", "v1", "v2"] {
            for r in records.iter().filter(|r| r["variant"] == arm).take(n) {
                let judge = r["score"].as_f64().unwrap();
                let person = if agree { judge } else { 1.0 - judge };
                lines.push_str(&format!(
                    "{{\"case\": {}, \"variant\": \"{arm}\", \"repeat\": 0, \"score\": {person}}}\n",
                    r["case_id"]
                ));
            }
        }
        std::fs::write(d.join("people.jsonl"), lines).unwrap();
        let out = promptgauge(d)
            .arg("label")
            .arg(&run)
            .args(["--from", "people.jsonl"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(run.join("summary.md")).unwrap()
    };
    let agreed = label(true, 30);
    assert!(
        agreed.contains("As people would score them (corrected by their labels"),
        "{agreed}"
    );
    assert!(
        agreed.contains("no arm's lies wholly above the answer's"),
        "{agreed}"
    );
    // People who fail what the judge passes (every answer) put the judge's losers above
    // its best.
    let overruled = label(false, usize::MAX);
    assert!(
        overruled.contains("lies wholly above the answer's: the judge's best is not people's")
            || overruled
                .contains("lie wholly above the answer's: the judge's best is not people's"),
        "{overruled}"
    );
}

#[test]
fn best_of_six_finds_the_best_drops_the_losers_early_and_sends_nothing_twice() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(2000, &[70, 70, 60, 80, 70, 62]);
    let d = b.path();
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--best",
            "--seed",
            "3",
            "--no-store",
            "--fail-if-not-best",
        ])
        .args(["--base-url", &server.base_url(), "--model", "m"])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // Each arm that stops getting cases is said as it goes (a log's line each): out, or set
    // aside by the leader; then the answer.
    assert!(
        said.lines().any(
            |l| (l.starts_with("v2 out after ") && l.ends_with(" cases: below v3"))
                || (l.starts_with("v2 set aside after ")
                    && l.ends_with(" cases: v3 leads and is shown no more than ε behind it"))
        ),
        "{said}"
    );
    assert!(
        said.lines()
            .any(|l| l.starts_with("v3: the best, or within ε of it, after ")),
        "{said}"
    );
    // The baseline, v0, is not the best: the gate fails, saying where it went.
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("fail-if-not-best: the baseline v0 ")
            && said.contains("; the best, or within ε of it: v3"),
        "{said}"
    );
    assert!(
        said.contains("v3 is the best of 6, or within 2 points of it, with 95% confidence"),
        "{said}"
    );
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let s = summary(&run);
    let seq = s.sequential.as_ref().expect("the search's account");
    let best = seq.best.as_ref().unwrap();
    assert_eq!(best.named, vec!["v3".to_string()]);
    // The two weakest stop getting cases first, out or set aside, each said in the journal.
    let lines = journal(&run);
    let left: Vec<(String, u64)> = lines
        .iter()
        .filter(|l| {
            l["event"] == "decided" && (l["verdict"] == "eliminated" || l["verdict"] == "set_aside")
        })
        .map(|l| {
            (
                l["variant"].as_str().unwrap_or_default().to_string(),
                l["cases"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let first: Vec<&str> = left.iter().take(2).map(|(v, _)| v.as_str()).collect();
    assert!(first.contains(&"v2") && first.contains(&"v5"), "{left:?}");
    assert!(
        best.eliminated
            .iter()
            .all(|e| e.by == "v3" || e.gap_seen > 0.0)
    );
    // Every arm not named stood behind v3 when the search ended, by what the data show.
    assert_eq!(best.standing.len() + best.eliminated.len(), 5, "{best:?}");
    assert!(
        best.standing
            .iter()
            .all(|a| a.against == "v3" && a.gap_seen < 0.0),
        "{best:?}"
    );
    // Far fewer jobs than the fixed design, and than the bench's 12,000; the savings line
    // counts the bench's jobs first.
    let records: Vec<serde_json::Value> = lines
        .iter()
        .filter(|r| r["case_id"].is_string())
        .cloned()
        .collect();
    assert!(records.len() < 3000, "{} jobs", records.len());
    assert!(seq.jobs_fixed_design.unwrap() > 10 * records.len() as u64);
    assert_eq!(best.jobs_bench, Some(12_000));
    assert_eq!(best.jobs_sent, records.len() as u64);
    assert!(
        said.contains(&format!(
            "It sent {} of the bench's 12000 jobs",
            records.len()
        )),
        "{said}"
    );
    // Every request sent is a record, and an arm that stopped getting cases got few after.
    assert_eq!(server.provider.stats().requests as usize, records.len());
    for (arm, at) in &left {
        let sent = records
            .iter()
            .filter(|r| r["variant"] == arm.as_str())
            .count() as u64;
        assert!(sent <= at + 12, "{arm} sent {sent} after stopping at {at}");
    }
    // report.html (and so `view`) leads with the answer and charts where each arm went.
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("<p id=\"headline\"><b>v3 is the best of 6, or within 2 points of it"),
        "{html}"
    );
    assert!(html.contains("id=\"search-chart\""));
    for e in &best.eliminated {
        let mark = format!(
            "data-arm=\"{}\" data-state=\"out\" data-cases=\"{}\"",
            e.variant, e.cases
        );
        assert!(html.contains(&mark), "{mark}");
        assert!(html.contains(&format!("out after {} cases: below {}", e.cases, e.by)));
    }
    assert!(html.contains(&format!(
        "data-arm=\"v3\" data-state=\"best\" data-cases=\"{}\"",
        best.cases
    )));
    for a in &best.standing {
        let mark = format!(
            "data-arm=\"{}\" data-state=\"in-play\" data-cases=\"{}\"",
            a.variant, a.cases
        );
        assert!(html.contains(&mark), "{mark}");
    }
    // Each step is in the journal, for a resume and the report.
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "decided" && l["verdict"] == "best" && l["variant"] == "v3")
    );
}

#[test]
fn a_best_of_search_killed_and_resumed_ends_as_an_uninterrupted_one_and_pays_nothing_twice() {
    let (_rt, server) = start_mock(MockConfig {
        token_delay: std::time::Duration::from_millis(3),
        ..MockConfig::default()
    });
    let b = best_bench(2000, &[70, 70, 60, 80, 70, 62]);
    let d = b.path();
    let url = server.base_url();
    let args = [
        "--best",
        "--seed",
        "3",
        "--no-store",
        "--model",
        "m",
        "--base-url",
        url.as_str(),
    ];
    let whole = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--out", "whole"])
        .args(args)
        .output()
        .unwrap();
    assert!(whole.status.code().is_some_and(|c| c < 2));
    let whole = summary(&run_dirs(&d.join("whole")).pop().unwrap());
    let sent_whole = server.provider.stats().requests;

    let mut child = spawned(
        d,
        &[
            &["run", "bench.yaml", "--quiet", "--out", "killed"],
            &args[..],
        ]
        .concat(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut run = None;
    while run.is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
        run = run_dirs(&d.join("killed")).pop().filter(|r| {
            std::fs::read_to_string(r.join("results.jsonl")).is_ok_and(|t| t.lines().count() >= 150)
        });
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let run = run.expect("150 jobs within a minute");
    let before = server.provider.stats().requests;
    let out = promptgauge(d)
        .args(["run", "--resume", run.to_str().unwrap(), "--quiet"])
        .args(["--base-url", &url, "--model", "m"])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resumed = summary(&run);
    let (a, b) = (
        whole.sequential.as_ref().unwrap().best.as_ref().unwrap(),
        resumed.sequential.as_ref().unwrap().best.as_ref().unwrap(),
    );
    // The same answer, the same eliminations at the same cases.
    assert_eq!(a.named, b.named);
    assert_eq!(a.eliminated, b.eliminated);
    // No job recorded twice, and the two sessions sent about what one run did (the jobs
    // in flight at the kill are sent again).
    let records: Vec<serde_json::Value> = journal(&run)
        .into_iter()
        .filter(|r| r["case_id"].is_string())
        .collect();
    let mut keys: Vec<String> = records
        .iter()
        .map(|r| format!("{}/{}", r["case_id"], r["variant"]))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), records.len());
    let sent = server.provider.stats().requests - sent_whole;
    assert!(
        sent <= sent_whole + 24,
        "{sent} sent against {sent_whole} (resumed at {})",
        before - sent_whole
    );
}

#[test]
fn best_of_one_a_bad_epsilon_or_by_batch_is_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(50, &[70, 80]);
    let url = server.base_url();
    for (extra, expected) in [
        (
            vec!["--variants", "v0"],
            "--best finds the best of several variants",
        ),
        (
            vec!["--epsilon", "80"],
            "--epsilon 80 is not a number of points",
        ),
        (vec!["--until-decided"], "cannot be used with"),
    ] {
        let out = promptgauge(b.path())
            .args([
                "run",
                "bench.yaml",
                "--best",
                "--no-store",
                "--model",
                "m",
                "--base-url",
                &url,
            ])
            .args(&extra)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {said}");
        assert!(said.contains(expected), "{extra:?}: {said}");
    }
    let out = promptgauge(b.path())
        .args([
            "run",
            "bench.yaml",
            "--fail-if-not-best",
            "--no-store",
            "--model",
            "m",
        ])
        .args(["--base-url", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("add --best"));
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
}

/// [`best_bench`] priced at $100 a million tokens either way, answers capped at 10 tokens,
/// on model m: a search a `--budget` can stop.
fn priced_best_bench(cases: usize, accuracies: &[u32]) -> tempfile::TempDir {
    let b = best_bench(cases, accuracies);
    let path = b.path().join("bench.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        format!("{text}endpoint: {{ model: m }}\nprice: {{ input_per_mtok: 100, output_per_mtok: 100 }}\nparams: {{ max_tokens: 10 }}\n"),
    )
    .unwrap();
    b
}

#[test]
fn a_best_search_over_its_budget_says_it_may_stop_early_and_runs_to_the_budget() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = priced_best_bench(1000, &[70, 80, 60]);
    let run = |extra: &[&str]| {
        promptgauge(b.path())
            .args(["run", "bench.yaml", "--best", "--seed", "2", "--no-store"])
            .args(["--budget", "0.5"])
            .args(["--base-url", &server.base_url(), "--model", "m"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("a --best search usually stops well before its last job"),
        "{said}"
    );
    assert_eq!(server.provider.stats().requests, 0);
    let out = run(&["--run-to-budget"]);
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stopped at the budget: {said}");
    let s = summary(&run_dirs(&b.path().join("reports")).pop().unwrap());
    let best = s.sequential.unwrap().best.unwrap();
    assert_eq!(best.outcome, "open", "{best:?}");
    assert!(best.remaining.contains(&"v1".to_string()), "{best:?}");
    assert!(
        said.contains("the best of 3, or within 2 points of it, is one of")
            && said.contains("the run ended after"),
        "{said}"
    );
}

#[test]
fn a_best_run_recorded_before_the_search_kept_its_reach_resumes_and_replays_alike() {
    // A search stopped at its budget, its run.json as a version before `best.ahead` wrote
    // it: the resume takes its own reach, keeps it, and `report` replays the same answer.
    let (_rt, server) = start_mock(MockConfig::default());
    let b = priced_best_bench(600, &[70, 85, 60]);
    let out = promptgauge(b.path())
        .args([
            "run",
            "bench.yaml",
            "--best",
            "--seed",
            "2",
            "--no-store",
            "--quiet",
        ])
        .args(["--budget", "0.2", "--run-to-budget"])
        .args(["--base-url", &server.base_url(), "--model", "m"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_dirs(&b.path().join("reports")).pop().unwrap();
    let record_path = run.join("run.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record_path).unwrap()).unwrap();
    let best = &mut record["plan"]["sequential"]["best"];
    assert!(
        best["ahead"].is_u64(),
        "a new run records its reach: {best}"
    );
    best.as_object_mut().unwrap().remove("ahead");
    std::fs::write(&record_path, serde_json::to_string_pretty(&record).unwrap()).unwrap();
    let out = promptgauge(b.path())
        .args([
            "run",
            "--resume",
            run.to_str().unwrap(),
            "--budget",
            "100",
            "--quiet",
        ])
        .args(["--base-url", &server.base_url()])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record_path).unwrap()).unwrap();
    let plan = &record["plan"];
    assert!(plan["sequential"]["best"]["ahead"].is_u64(), "kept: {plan}");
    let live = summary(&run).sequential.unwrap().best.unwrap();
    assert_ne!(live.outcome, "open", "{live:?}");
    let out = promptgauge(b.path())
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(summary(&run).sequential.unwrap().best.unwrap(), live);
}

/// The example a user with twelve prompts starts from: `run --best` as its README says.
#[test]
fn the_twelve_prompts_example_finds_a_step_by_step_prompt_for_a_fraction_of_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_dir(&repo().join("examples/twelve-prompts"), d);
    let out = promptgauge(d)
        .args(["run", "--best", "--seed", "1", "--no-store"])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let run = run_dirs(&d.join("reports")).remove(0);
    let s = summary(&run);
    let seq = s.sequential.unwrap();
    let best = seq.best.as_ref().unwrap();
    assert_ne!(best.outcome, "open", "{best:?}");
    assert!(
        best.named
            .iter()
            .all(|n| n == "step-by-step" || n == "show-work"),
        "{best:?}"
    );
    // Every other prompt went out or stood behind the answer, each said by its gap.
    assert_eq!(best.eliminated.len() + best.standing.len(), 11, "{best:?}");
    assert!(best.standing.iter().all(|a| a.gap_seen < 0.0), "{best:?}");
    // Far fewer jobs than the 12 × 900 the bench holds, and than the fixed design.
    assert!(s.jobs_finished < 2500, "{}", s.jobs_finished);
    assert!(seq.jobs_fixed_design.unwrap() > 10 * s.jobs_finished as u64);
    // The terminal keeps the pairwise table but leaves its sentences to summary.md.
    assert!(
        said.contains("(--best: the search's answer below is the verdict"),
        "{said}"
    );
    assert!(
        !said.contains("is not distinguishable from bookkeeper"),
        "{said}"
    );
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        md.contains("### Against the baseline (descriptions"),
        "{md}"
    );
    assert!(
        md.contains("is not distinguishable from bookkeeper"),
        "{md}"
    );
}

#[test]
fn plan_best_sizes_a_search_against_the_fixed_design() {
    let b = best_bench(50, &[70, 80]);
    let out = promptgauge(b.path())
        .args([
            "plan",
            "bench.yaml",
            "--best",
            "8",
            "--baseline-accuracy",
            "0.7",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("best of 8 (run --best), ε 2 points, 95% confidence"),
        "{said}"
    );
    // A clear winner costs a small share of the fixed design (the simulation: 9–14%).
    let share: f64 = said
        .split("the search's average is ")
        .nth(1)
        .and_then(|t| t.split('%').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(100.0);
    assert!(share < 40.0, "{said}");
    // 50 cases cannot hold such a search: said.
    assert!(said.contains("the bench has 50 cases"), "{said}");
    assert!(said.contains("the bench has no price"), "{said}");
    // And sized on the bench itself: how often 50 cases name one arm, and what share of its
    // 400 jobs a search sends, stopping once the rest cannot decide.
    assert!(said.contains("on this bench's 50 cases"), "{said}");
    let line = |what: &str| -> (f64, f64) {
        let line = said.lines().find(|l| l.contains(what)).unwrap_or_default();
        let number = |after: &str| -> f64 {
            line.split(after)
                .nth(1)
                .and_then(|t| t.split('%').next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(f64::NAN)
        };
        (number("named in "), number("searches, "))
    };
    let (one, share) = line("every arm equal");
    assert_eq!(one, 0.0, "{said}");
    assert!(share > 0.0 && share < 100.0, "{said}");
    let (one, share) = line("the best 15 points ahead");
    assert!((0.0..=100.0).contains(&one) && share < 100.0, "{said}");

    // Priced, with a completion ceiling: both designs in dollars, at the same price a job.
    let bench = b.path().join("bench.yaml");
    let text = std::fs::read_to_string(&bench).unwrap();
    std::fs::write(
        &bench,
        format!("{text}price: {{ input_per_mtok: 1, output_per_mtok: 10 }}\n"),
    )
    .unwrap();
    for v in ["v0", "v1"] {
        let file = b.path().join(format!("{v}.yaml"));
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, format!("{text}params: {{ max_tokens: 10 }}\n")).unwrap();
    }
    let out = promptgauge(b.path())
        .args(["plan", "bench.yaml", "--best", "8"])
        .args(["--baseline-accuracy", "0.7"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    let number = |after: &str, until: char| -> f64 {
        said.split(after)
            .nth(1)
            .and_then(|t| t.split(until).next())
            .and_then(|n| n.trim_start_matches('$').replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("no {after:?} in {said}"))
    };
    let fixed_jobs = number("the fixed design with the same guarantee: ", ' ');
    let search_usd = number("at most about ", ' ');
    let fixed_usd = number("for the search on average, ", ' ');
    // A job: its prompt (some tens of tokens at $1/M) and 10 tokens at $10/M.
    let each = fixed_usd / fixed_jobs;
    assert!(each > 100e-6 && each < 200e-6, "{each}: {said}");
    let share = number("the search's average is ", '%');
    assert!(
        (100.0 * search_usd / fixed_usd - share).abs() < 2.0,
        "{search_usd} / {fixed_usd} vs {share}%: {said}"
    );

    // Grouped cases: the plan counts groups.
    group_cases(b.path(), 5);
    let out = promptgauge(b.path())
        .args(["plan", "bench.yaml", "--best", "8"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("a search counts groups"), "{said}");
    assert!(said.contains("the bench has 10 groups"), "{said}");
}

#[test]
fn best_of_a_bench_too_small_says_the_best_is_one_of_the_arms_left() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(60, &[70, 72, 80, 71]);
    let (code, said) = search(b.path(), &server.base_url(), &["--seed", "5"]);
    assert!(code.is_some_and(|c| c < 2), "{said}");
    let s = summary(&run_dirs(&b.path().join("reports")).pop().unwrap());
    let best = s.sequential.unwrap().best.unwrap();
    // It stops once the cases left cannot separate the arms, before the last, and says
    // about how many more would.
    assert_eq!(best.outcome, "one_of", "{best:?}");
    assert!(best.cases < 60, "{best:?}");
    assert!(best.named.contains(&"v2".to_string()), "{best:?}");
    let more = best.more_cases.expect("how many more cases would");
    assert!(more > 0, "{best:?}");
    assert!(
        said.contains(&format!(
            "is one of {}, with 95% confidence; the bench's cases cannot tell them apart (about {more} more cases would)",
            best.named.join(", ")
        )),
        "{said}"
    );
    assert!(best.jobs_sent < best.jobs_bench.unwrap(), "{best:?}");
}

#[test]
fn a_bench_that_decides_the_best_runs_as_best_without_the_flag() {
    let (_rt, server) = start_mock(MockConfig::default());
    let b = best_bench(600, &[70, 80, 60]);
    let path = b.path().join("bench.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}decide: best\nepsilon: 3\n")).unwrap();
    let out = promptgauge(b.path())
        .args(["run", "bench.yaml", "--seed", "2", "--no-store", "--quiet"])
        .args(["--base-url", &server.base_url(), "--model", "m"])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&run_dirs(&b.path().join("reports")).pop().unwrap());
    let best = s.sequential.unwrap().best.unwrap();
    assert_eq!(best.epsilon, 3.0);
    assert_eq!(best.named, vec!["v1".to_string()]);

    // check says what a run will do; --until-decided, --after without a search and a
    // plan at ε 0 are refused or said, never a hang or a panic.
    let check = promptgauge(b.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&check.stdout)
            .contains("--best: the best of 3 arms (or within 3 points of it)")
    );
    let out = promptgauge(b.path())
        .args(["run", "bench.yaml", "--no-store", "--until-decided"])
        .args(["--base-url", &server.base_url(), "--model", "m"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the bench decides the best"));
    let plan = promptgauge(b.path())
        .args([
            "plan",
            "bench.yaml",
            "--best",
            "4",
            "--epsilon",
            "0",
            "--baseline-accuracy",
            "0.7",
        ])
        .output()
        .unwrap();
    assert_eq!(plan.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&plan.stderr).contains("for an ε above 0 and below 50"));

    // `epsilon:` alone says nothing: refused with the fix; so is --epsilon without --best.
    std::fs::write(&path, text.clone()).unwrap();
    let out = promptgauge(b.path())
        .args(["run", "bench.yaml", "--epsilon", "3", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("add --best"));
    std::fs::write(&path, format!("{text}epsilon: 3\n")).unwrap();
    let out = promptgauge(b.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("add `decide: best`"));
    // A bad `epsilon:` names its line.
    std::fs::write(&path, format!("{text}decide: best\nepsilon: -1\n")).unwrap();
    let out = promptgauge(b.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    let line = text.lines().count() + 2;
    assert!(said.contains(&format!("bench.yaml:{line}")), "{said}");
    assert!(
        said.contains("`epsilon: -1` is not a number of points from 0 up to (not including) 50"),
        "{said}"
    );
}
