//! Verdicts end to end: the example bench on the simulator, a 20-case subset that cannot
//! tell the variants apart, repeats, slices, `check`'s detectable difference, and `compare`.

use crate::common::*;
use promptgauge::mock::MockConfig;
use promptgauge::report::Summary;
use promptgauge::report::compare::{RunComparison, Verdict};
use serde_json::Value;

fn summary(run: &std::path::Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
}

fn run_example(out: &std::path::Path, extra: &[&str], url: &str, model: &str) -> (String, Summary) {
    let mut args = vec![
        "run",
        "--quiet",
        "--base-url",
        url,
        "--model",
        model,
        "--out",
    ];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(extra);
    let o = promptgauge(&repo())
        .args(&args)
        .assert()
        .success()
        .get_output()
        .clone();
    let dir = run_dirs(out).pop().unwrap();
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        summary(&dir),
    )
}

#[test]
fn the_example_ends_with_a_verdict_per_variant() {
    let (_rt, server) = start_mock(MockConfig::default());
    let out = tempfile::tempdir().unwrap();
    let (stdout, s) = run_example(out.path(), &[], &server.base_url(), "mock-model");
    assert_eq!(s.comparisons.len(), 3);
    for c in &s.comparisons {
        assert!(stdout.contains(&c.sentence), "{} missing", c.sentence);
        let t = c.table.unwrap();
        assert_eq!(
            t.both_right + t.only_variant + t.only_reference + t.both_wrong,
            64
        );
        // One 0/1 answer per case: the sign-flip test is exact McNemar.
        assert_eq!(c.method, "sign_flip_on_case_means");
        let exact = promptgauge::stats::paired::mcnemar_exact(t.only_variant, t.only_reference);
        assert!((c.p_value.unwrap() - exact).abs() < 1e-12);
        // Three comparisons: each interval is at the level that agrees with Holm.
        let level = c.ci_level.unwrap();
        assert!((0.95 - 1e-9..=1.0 - 0.05 / 3.0 + 1e-9).contains(&level));
        let excludes = c.ci_low.unwrap() > 0.0 || c.ci_high.unwrap() < 0.0;
        assert_eq!(excludes, c.verdict != Verdict::NotDistinguishable);
    }
    // The simulator's "step by step" fixes errors and breaks none: a real gain.
    let step = &s.comparisons[0];
    assert_eq!(
        (step.variant.as_str(), step.verdict),
        ("step-by-step", Verdict::Better)
    );
    let d = s.detectable.unwrap();
    assert_eq!((d.cases, d.comparisons), (64, 3));
    // Said in summary.md (under --quiet the terminal has the table and the verdicts).
    let md =
        std::fs::read_to_string(run_dirs(out.path()).pop().unwrap().join("summary.md")).unwrap();
    assert!(md.contains("With 64 cases"), "{md}");
    // Slices: one row per tag and variant, and they add up to the whole.
    assert_eq!(s.slices.len(), 16);
    for v in &s.variants {
        let n: u64 = s
            .slices
            .iter()
            .filter(|sl| sl.variant == v.name)
            .map(|sl| sl.n)
            .sum();
        assert_eq!(n, v.n);
    }
    let md = std::fs::read_to_string(run_dirs(out.path())[0].join("summary.md")).unwrap();
    assert!(md.contains("### Paired against plain") && md.contains("### By tag"));
    let csv = std::fs::read_to_string(run_dirs(out.path())[0].join("summary.csv")).unwrap();
    assert!(csv.lines().nth(2).unwrap().contains(",better,"), "{csv}");
}

#[test]
fn twenty_cases_cannot_tell_the_variants_apart_and_say_how_many_would() {
    let (_rt, server) = start_mock(MockConfig::default());
    let out = tempfile::tempdir().unwrap();
    let (stdout, s) = run_example(
        out.path(),
        &["--limit", "20"],
        &server.base_url(),
        "mock-model",
    );
    for c in &s.comparisons {
        assert_eq!(c.verdict, Verdict::NotDistinguishable, "{}", c.sentence);
        assert!(c.cases_needed.unwrap() > 20, "{}", c.sentence);
        assert!(c.sentence.contains("would take about"), "{}", c.sentence);
    }
    assert!(stdout.contains("not distinguishable"));
    let d = s.detectable.unwrap().difference.unwrap();
    assert!(d > 0.3, "20 cases detect only large differences: {d}");
}

#[test]
fn check_says_what_the_bench_can_detect_before_spending() {
    let out = promptgauge(&repo())
        .args(["check", "--limit", "20"])
        .assert()
        .success()
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("With 20 cases") && text.contains("reference accuracy 50%"),
        "{text}"
    );
    let points: f64 = text
        .split("differences of about ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!((40.0..50.0).contains(&points), "{points}");
}

#[test]
fn repeats_treat_the_case_as_the_unit() {
    // The simulator answers a prompt the same way every time: repeats add no information,
    // so with the design effect the intervals are never narrower than the single-sample
    // ones (a little wider: t at n − 1 degrees of freedom, and Poisson's bound where few
    // answers lie at an end, since Wilson's on the cases covered 92.45% at 20 cases).
    let (_rt, server) = start_mock(MockConfig::default());
    let (one, three) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_, s1) = run_example(
        one.path(),
        &["--limit", "24"],
        &server.base_url(),
        "mock-model",
    );
    let (_, s3) = run_example(
        three.path(),
        &["--limit", "24", "--repeats", "3"],
        &server.base_url(),
        "mock-model",
    );
    for (a, b) in s1.variants.iter().zip(&s3.variants) {
        assert_eq!(b.n, 3 * a.n);
        assert_eq!(a.accuracy, b.accuracy);
        let (one, three) = (
            (a.ci_low.unwrap(), a.ci_high.unwrap()),
            (b.ci_low.unwrap(), b.ci_high.unwrap()),
        );
        assert!(
            three.0 <= one.0 && three.1 >= one.1 && three.1 - three.0 < 1.2 * (one.1 - one.0),
            "{}: {three:?} vs {one:?}",
            a.name
        );
        assert_eq!(b.consistency, Some(1.0));
        assert!((b.design_effect.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(a.design_effect, None);
    }
    // The same answers three times are the same evidence: the same verdicts, p-values and
    // intervals as one answer per case.
    for (c1, c3) in s1.comparisons.iter().zip(&s3.comparisons) {
        assert_eq!(c3.method, "sign_flip_on_case_means");
        assert_eq!(c3.cases, 24);
        assert_eq!(c1.verdict, c3.verdict);
        assert_eq!(c1.p_value, c3.p_value);
        assert_eq!(c1.p_holm, c3.p_holm);
        assert_eq!((c1.ci_low, c1.ci_high), (c3.ci_low, c3.ci_high));
    }
    // Repeats that always agree (intra-class correlation 1) detect what one answer does,
    // and the sentence says which test the figure is for.
    let (d1, d3) = (s1.detectable.unwrap(), s3.detectable.unwrap());
    assert_eq!(d3.repeats, Some(3));
    assert_eq!(d3.intra_class_correlation, Some(1.0));
    assert!((d1.difference.unwrap() - d3.difference.unwrap()).abs() < 1e-12);
    assert!(d3.sentence(0.95).contains("24 cases of 3 answers each"));
}

#[test]
fn compare_pairs_two_runs_and_reports_cases_only_in_one() {
    let (_rt, server) = start_mock(MockConfig::default());
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = server.base_url();
    run_example(a.path(), &[], &url, "large-model");
    run_example(
        b.path(),
        &["--limit", "60", "--variants", "plain,tip"],
        &url,
        "small-model",
    );
    let (run_a, run_b) = (
        run_dirs(a.path()).pop().unwrap(),
        run_dirs(b.path()).pop().unwrap(),
    );
    let out = tempfile::tempdir().unwrap();
    let o = promptgauge(&repo())
        .args([
            "compare",
            run_a.to_str().unwrap(),
            run_b.to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("4 cases only in A, not compared: r-061, r-062, r-063, r-064"),
        "{stdout}"
    );
    assert!(
        stdout.contains("variants only in A: step-by-step, deep-breath"),
        "{stdout}"
    );
    let c: RunComparison =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(c.variants.len(), 2);
    for v in &c.variants {
        assert_eq!(v.comparison.cases, 60);
        // The simulator's "small" model errs more: B is worse.
        assert_eq!(
            v.comparison.verdict,
            Verdict::Worse,
            "{}",
            v.comparison.sentence
        );
        assert!(stdout.contains(&v.comparison.sentence));
    }
    assert_eq!(c.run_b.model, "small-model");
    assert!(
        std::fs::read_to_string(out.path().join("compare.md"))
            .unwrap()
            .contains("| plain |")
    );
    // Runs sharing no variant cannot be compared.
    let none = tempfile::tempdir().unwrap();
    run_example(
        none.path(),
        &["--limit", "4", "--variants", "deep-breath"],
        &url,
        "m",
    );
    let run_n = run_dirs(none.path()).pop().unwrap();
    let o = promptgauge(&repo())
        .args(["compare", run_b.to_str().unwrap(), run_n.to_str().unwrap()])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let e: Value = Value::String(String::from_utf8_lossy(&o.stderr).to_string());
    assert!(e.as_str().unwrap().contains("share no variant"), "{e}");
}

#[test]
fn compare_refuses_mixed_confidence_and_warns_of_changed_cases() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let work = tempfile::tempdir().unwrap();
    let copy = |dir: &std::path::Path| {
        for sub in ["cases", "prompts/routing"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for f in [
            "promptgauge.yaml",
            "cases/routing.jsonl",
            "prompts/routing/plain.yaml",
            "prompts/routing/step-by-step.yaml",
            "prompts/routing/deep-breath.yaml",
            "prompts/routing/tip.yaml",
        ] {
            std::fs::copy(repo().join(f), dir.join(f)).unwrap();
        }
    };
    let (a, b) = (work.path().join("a"), work.path().join("b"));
    copy(&a);
    copy(&b);
    // B: a 90% bench, and case r-003 now expects another answer.
    let bench = std::fs::read_to_string(b.join("promptgauge.yaml")).unwrap();
    assert!(bench.contains("confidence: 0.95"));
    std::fs::write(
        b.join("promptgauge.yaml"),
        bench.replace("confidence: 0.95", "confidence: 0.9"),
    )
    .unwrap();
    let cases = std::fs::read_to_string(b.join("cases/routing.jsonl")).unwrap();
    let changed: Vec<String> = cases
        .lines()
        .map(|l| {
            if l.contains("\"r-003\"") {
                let v: Value = serde_json::from_str(l).unwrap();
                let other = if v["expected"] == "A" { "B" } else { "A" };
                l.replace(
                    &format!("\"expected\": {}", v["expected"]),
                    &format!("\"expected\": \"{other}\""),
                )
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_ne!(changed.join("\n"), cases.trim_end());
    std::fs::write(b.join("cases/routing.jsonl"), changed.join("\n") + "\n").unwrap();
    for dir in [&a, &b] {
        let run = |bench: &str| {
            let args = [
                "run",
                bench,
                "--quiet",
                "--base-url",
                &url,
                "--model",
                "m",
                "--limit",
                "10",
                "--variants",
                "plain,tip",
            ];
            promptgauge(dir).args(args).assert().success();
        };
        // A run at 90% against a 95% baseline is refused before anything is sent.
        if dir == &b {
            let sent = server.provider.stats().requests;
            let base = run_dirs(&a.join("reports")).pop().unwrap();
            let o = promptgauge(dir)
                .args([
                    "run",
                    "--base-url",
                    &url,
                    "--model",
                    "m",
                    "--limit",
                    "10",
                    "--variants",
                    "plain,tip",
                    "--baseline",
                    base.to_str().unwrap(),
                ])
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2));
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(
                stderr.contains("95% confidence and this bench is at 90%"),
                "{stderr}"
            );
            assert_eq!(server.provider.stats().requests, sent);
        }
        run("promptgauge.yaml");
    }
    let (run_a, run_b) = (
        run_dirs(&a.join("reports")).pop().unwrap(),
        run_dirs(&b.join("reports")).pop().unwrap(),
    );
    let compare = |extra: &[&str]| {
        let mut args = vec!["compare", run_a.to_str().unwrap(), run_b.to_str().unwrap()];
        args.extend_from_slice(extra);
        promptgauge(work.path()).args(&args).output().unwrap()
    };
    let o = compare(&[]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("at 95% confidence and") && stderr.contains("--confidence 0.95"),
        "{stderr}"
    );
    let out = work.path().join("cmp");
    let o = compare(&["--confidence", "0.9", "--out", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("WARNING: 1 cases have the same id but different content")
            && stdout.contains("r-003"),
        "{stdout}"
    );
    let c: RunComparison =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(c.confidence, 0.9);
    assert_eq!(c.cases_changed, vec!["r-003".to_string()]);
    // The changed case counts in each run's figures and pairs with nothing.
    for v in &c.variants {
        assert_eq!(v.comparison.cases, v.a.n - 1, "{}", v.name);
    }
    // Every interval of the table at the one level: A's (run at 95%) is recomputed at 90%.
    for v in &c.variants {
        for side in [&v.a, &v.b] {
            let (lo, hi) = promptgauge::stats::wilson(side.correct, side.n, 0.9).unwrap();
            assert!(
                (side.ci_low.unwrap() - lo).abs() < 1e-12
                    && (side.ci_high.unwrap() - hi).abs() < 1e-12,
                "{}: {:?}",
                v.name,
                (side.ci_low, side.ci_high)
            );
        }
    }
    assert!(
        c.variants[0].comparison.sentence.contains("at 90%"),
        "{}",
        c.variants[0].comparison.sentence
    );
}

#[test]
fn plan_sizes_a_bench_by_the_power_of_the_test_the_reports_use() {
    use promptgauge::stats::power::{Assumptions, cases_needed, detectable_difference};
    let (_rt, server) = start_mock(MockConfig::default());
    let work = tempfile::tempdir().unwrap();
    let d = work.path();
    for sub in ["cases", "prompts/routing"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    for f in [
        "promptgauge.yaml",
        "cases/routing.jsonl",
        "prompts/routing/plain.yaml",
        "prompts/routing/step-by-step.yaml",
        "prompts/routing/deep-breath.yaml",
        "prompts/routing/tip.yaml",
    ] {
        std::fs::copy(repo().join(f), d.join(f)).unwrap();
    }
    let plan = |args: &[&str]| {
        let o = promptgauge(d).arg("plan").args(args).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Before any run: ½, the most demanding baseline; Holm over the three variants.
    let mut a = Assumptions::new(0.5, 0.05);
    a.comparisons = 3;
    let out = plan(&[]);
    assert!(
        out.contains("Holm over 3") && out.contains("no earlier run"),
        "{out}"
    );
    let ten = cases_needed(0.10, 0.8, &a).unwrap();
    assert!(out.contains(&format!(" 10 points   {ten} cases")), "{out}");
    let d64 = detectable_difference(64, 0.8, &a).unwrap();
    assert!(
        out.contains(&format!(
            "64 cases detect a difference of about {:.1} points",
            d64 * 100.0
        )),
        "{out}"
    );
    // A given baseline and difference: the harder direction (a drop from 70%).
    let mut a7 = Assumptions::new(0.7, 0.05);
    a7.comparisons = 3;
    let need = cases_needed(-0.10, 0.8, &a7)
        .unwrap()
        .max(cases_needed(0.10, 0.8, &a7).unwrap());
    let out = plan(&["--detect", "10", "--baseline-accuracy", "0.7"]);
    assert!(
        out.contains(&format!(
            "to detect a difference of 10 points: {need} cases"
        )),
        "{out}"
    );
    // After a run, its baseline's accuracy is the plan's.
    promptgauge(d)
        .args([
            "run",
            "--quiet",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .assert()
        .success();
    let s = summary(&run_dirs(&d.join("reports")).pop().unwrap());
    let p0 = s.variants[0].accuracy.unwrap();
    let out = plan(&["--cases", "500"]);
    assert!(
        out.contains(&format!(
            "baseline accuracy {:.1}% (the baseline's accuracy in reports",
            p0 * 100.0
        )),
        "{out}"
    );
    // Bad input is refused by name.
    let o = promptgauge(d)
        .args(["plan", "--detect", "150"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a difference in points"));
}

#[test]
fn grouped_cases_are_tested_and_intervalled_by_group() {
    let (_rt, server) = start_mock(MockConfig::default());
    let dir = arithmetic_bench(48, 2, "");
    let d = dir.path();
    // Four questions share each passage: twelve groups, named by text or by number.
    let cases = std::fs::read_to_string(d.join("cases.jsonl")).unwrap();
    let grouped: String = cases
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let group = if (i / 4) % 2 == 0 {
                format!("{}", i / 4)
            } else {
                format!("\"p-{}\"", i / 4)
            };
            format!(
                "{}, \"group\": {group}}}\n",
                l.trim_end().trim_end_matches('}')
            )
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), grouped).unwrap();
    let run = |out: &str| {
        promptgauge(d)
            .args([
                "run",
                "bench.yaml",
                "--quiet",
                "--base-url",
                &server.base_url(),
                "--model",
                "m",
                "--out",
                out,
            ])
            .assert()
            .success();
        summary(&run_dirs(&d.join(out)).pop().unwrap())
    };
    let s = run("grouped");
    let c = &s.comparisons[0];
    assert_eq!(c.groups, Some(12), "{}", c.sentence);
    assert_eq!(c.method, "sign_flip_on_case_means_by_group");
    assert!(
        c.sentence.contains("48 paired cases in 12 groups"),
        "{}",
        c.sentence
    );
    // The accuracy interval treats each group as one unit: a design effect is reported.
    assert!(s.variants.iter().all(|v| v.design_effect.is_some()));
    // Without the groups the same answers give the per-case test.
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    let plain = run("plain");
    assert_eq!(plain.comparisons[0].groups, None);
    assert_eq!(plain.comparisons[0].difference, c.difference);
    // A group that is neither text nor a number is refused with its line.
    let bad = std::fs::read_to_string(d.join("cases.jsonl"))
        .unwrap()
        .replacen("}\n", ", \"group\": [1]}\n", 1);
    std::fs::write(d.join("cases.jsonl"), bad).unwrap();
    let o = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cases.jsonl:1") && err.contains("`group` must be"),
        "{err}"
    );
}
