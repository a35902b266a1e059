//! `import-results`: other tools' results — written by those tools themselves
//! (tests/fixtures/results, made by the scripts in made-by/) — as run folders that
//! `compare`, `report`, the gates and the store take as they take a run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

fn fixtures() -> PathBuf {
    repo().join("tests/fixtures/results")
}

/// Every file under `dir` whose name matches.
fn files(dir: &str, matching: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(fixtures().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && matching(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    out.sort();
    out
}

struct Imported {
    /// The folder imported into, when the import made its own.
    _kept: Option<tempfile::TempDir>,
    code: i32,
    stderr: String,
    stdout: String,
    dir: Option<PathBuf>,
}

fn import(out: &Path, format: &str, files: &[PathBuf], extra: &[&str]) -> Imported {
    let o = promptgauge(out)
        .args(["import-results", format])
        .args(files)
        .args(["--out", "reports", "--no-store"])
        .args(extra)
        .output()
        .unwrap();
    Imported {
        _kept: None,
        code: o.status.code().unwrap(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        dir: run_dirs(&out.join("reports")).pop(),
    }
}

/// [`import`] into a folder of its own, kept as long as the result.
fn import_fresh(format: &str, files: &[PathBuf], extra: &[&str]) -> Imported {
    let kept = tempfile::tempdir().unwrap();
    Imported {
        _kept: None,
        ..import(kept.path(), format, files, extra)
    }
    .keeping(kept)
}

impl Imported {
    fn keeping(mut self, dir: tempfile::TempDir) -> Self {
        self._kept = Some(dir);
        self
    }
}

/// Each job's (status, score) by (case, variant, repeat).
fn scores(dir: &Path) -> HashMap<(String, String, u64), (String, Option<f64>)> {
    journal(dir)
        .iter()
        .map(|r| {
            (
                (
                    r["case_id"].as_str().unwrap().to_string(),
                    r["variant"].as_str().unwrap().to_string(),
                    r["repeat"].as_u64().unwrap(),
                ),
                (
                    r["status"].as_str().unwrap().to_string(),
                    r["score"].as_f64(),
                ),
            )
        })
        .collect()
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

fn variant<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no variant {name} in {s}"))
}

#[test]
fn inspect_logs_become_a_run_paired_by_sample_with_epochs_as_repeats() {
    let out = tempfile::tempdir().unwrap();
    let evals = files("inspect", |n| n.ends_with(".eval"));
    let r = import(out.path(), "inspect", &evals, &["--allow-failures", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let dir = r.dir.unwrap();
    let s = summary(&dir);
    // The fixtures (FORMATS.md): terse misses q3 and q6 in both epochs; cot misses q6 and
    // its q5 errored in epoch 1.
    let terse = variant(&s, "variant-terse");
    let cot = variant(&s, "variant-cot");
    assert_eq!(
        (terse["correct"].as_u64(), terse["failed"].as_u64()),
        (Some(8), Some(0))
    );
    assert_eq!(
        (cot["correct"].as_u64(), cot["failed"].as_u64()),
        (Some(9), Some(1))
    );
    let jobs = scores(&dir);
    assert_eq!(jobs.len(), 24);
    let job =
        |case: &str, v: &str, repeat| jobs[&(case.to_string(), v.to_string(), repeat)].clone();
    assert_eq!(job("q3", "variant-terse", 1), ("graded".into(), Some(0.0)));
    assert_eq!(job("q5", "variant-cot", 0).0, "failed");
    assert_eq!(job("q5", "variant-cot", 1), ("graded".into(), Some(1.0)));
    let failed = journal(&dir)
        .into_iter()
        .find(|r| r["status"] == "failed")
        .unwrap();
    assert!(
        failed["error"].as_str().unwrap().contains(
            "the sample errored in inspect: RuntimeError('simulated tool failure on sample q5')"
        ),
        "{failed}"
    );
    // What could not be carried over is said, and written beside the run.
    let notes = std::fs::read_to_string(dir.join("IMPORT-NOTES.md")).unwrap();
    assert!(notes.contains("inspect's epoch reducers") && notes.contains("transcripts"));
    assert!(
        r.stderr
            .contains("not carried over: inspect's other scores")
    );

    // The same logs as .json, and as the DEFLATE archives inspect wrote before 0.3.206:
    // the same jobs, score for score.
    for (dir_name, ext) in [("inspect", ".json"), ("inspect/deflate_legacy", ".eval")] {
        let other = tempfile::tempdir().unwrap();
        let r = import(
            other.path(),
            "inspect",
            &files(dir_name, |n| n.ends_with(ext)),
            &["--allow-failures", "1", "--quiet"],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(scores(&r.dir.unwrap()), jobs, "{dir_name} {ext}");
    }
}

#[test]
fn an_inspect_score_is_read_as_inspect_reads_it_and_unscored_is_never_a_zero() {
    let out = tempfile::tempdir().unwrap();
    let edge = files("inspect/edge", |n| n.ends_with(".json"));
    // The headline scorer, `overlap`: fractional; sample 2 left unscored (NaN).
    let r = import(out.path(), "inspect", &edge, &["--allow-failures", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let jobs = scores(r.dir.as_ref().unwrap());
    let v = "mockllm/model";
    assert_eq!(
        jobs[&("1".into(), v.into(), 0)],
        ("graded".into(), Some(1.0))
    );
    assert_eq!(jobs[&("2".into(), v.into(), 0)].0, "failed");
    let third = jobs[&("3".into(), v.into(), 0)].1.unwrap();
    assert!((third - 1.0 / 3.0).abs() < 1e-12, "{third}");
    let record = journal(r.dir.as_ref().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "3")
        .unwrap();
    // A list target: any of them is expected.
    assert_eq!(
        record["expected"],
        serde_json::json!(["Paris Berlin", "Rome Madrid"])
    );
    // One key of a dict-valued score, by the name inspect's results give it.
    let other = tempfile::tempdir().unwrap();
    let r = import(
        other.path(),
        "inspect",
        &edge,
        &["--score", "mentions_paris"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let jobs = scores(r.dir.as_ref().unwrap());
    let got: Vec<Option<f64>> = ["1", "2", "3"]
        .iter()
        .map(|c| jobs[&(c.to_string(), v.into(), 0)].1)
        .collect();
    assert_eq!(got, [Some(1.0), Some(0.0), Some(1.0)]);
    // A score the log does not have: refused, with those it has.
    let r = import_fresh("inspect", &edge, &["--score", "nope"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("has no score `nope`")
            && r.stderr.contains("overlap, mentions_paris, short"),
        "{}",
        r.stderr
    );
}

#[test]
fn lm_eval_samples_become_a_run_of_one_variant_per_model() {
    let out = tempfile::tempdir().unwrap();
    let gsm8k: Vec<PathBuf> = ["fixture-org__tiny-a", "fixture-org__tiny-b"]
        .iter()
        .flat_map(|m| {
            files(&format!("lm-eval/output/{m}"), |n| {
                n.starts_with("samples_gsm8k_")
            })
        })
        .collect();
    let r = import(out.path(), "lm-eval", &gsm8k, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = summary(r.dir.as_ref().unwrap());
    // strict-match (the first filter): tiny-a 4/6, tiny-b 3/6 (FORMATS.md).
    assert_eq!(variant(&s, "fixture-org/tiny-a")["correct"], 4);
    assert_eq!(variant(&s, "fixture-org/tiny-b")["correct"], 3);
    assert!(
        r.stderr.contains("other filters' lines (flexible-extract)"),
        "{}",
        r.stderr
    );
    let r = import_fresh(
        "lm-eval",
        &gsm8k,
        &["--filter", "flexible-extract", "--variants", "a,b"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = summary(r.dir.as_ref().unwrap());
    assert_eq!(
        (
            variant(&s, "a")["correct"].as_u64(),
            variant(&s, "b")["correct"].as_u64()
        ),
        (Some(5), Some(4))
    );

    // Multiple choice: acc and acc_norm are two scores of one document.
    let arc: Vec<PathBuf> = ["fixture-org__tiny-a", "fixture-org__tiny-b"]
        .iter()
        .flat_map(|m| {
            files(&format!("lm-eval/output/{m}"), |n| {
                n.starts_with("samples_arc_easy_")
            })
        })
        .collect();
    let by = |metric: &str| {
        let r = import_fresh("lm-eval", &arc, &["--score", metric]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        scores(r.dir.as_ref().unwrap())
    };
    let (acc, norm) = (by("acc"), by("acc_norm"));
    let tiny_a = |m: &HashMap<(String, String, u64), (String, Option<f64>)>, doc: &str| {
        m[&(doc.to_string(), "fixture-org/tiny-a".to_string(), 0)].1
    };
    assert_eq!(
        (tiny_a(&acc, "1"), tiny_a(&norm, "1")),
        (Some(1.0), Some(0.0))
    );
    assert_eq!(
        (tiny_a(&acc, "5"), tiny_a(&norm, "5")),
        (Some(0.0), Some(1.0))
    );
    // The answer shown is the choice it scored highest.
    let shown = journal(&run_dirs(&out.path().join("reports")).pop().unwrap());
    assert!(
        shown
            .iter()
            .all(|r| !r["output"].as_str().unwrap().is_empty())
    );
}

#[test]
fn lm_eval_files_of_other_documents_or_tasks_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let a = files("lm-eval/output/fixture-org__tiny-a", |n| {
        n.starts_with("samples_gsm8k_")
    });
    let b = files("lm-eval/output/fixture-org__tiny-b", |n| {
        n.starts_with("samples_gsm8k_")
    });
    // The second model's file, its first document's hash changed: another document.
    let text = std::fs::read_to_string(&b[0]).unwrap();
    let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let hash = line["doc_hash"].as_str().unwrap();
    let changed = d.path().join(b[0].file_name().unwrap());
    std::fs::write(&changed, text.replacen(hash, &"0".repeat(hash.len()), 1)).unwrap();
    let r = import(d.path(), "lm-eval", &[a[0].clone(), changed], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is not the document 0 of"),
        "{}",
        r.stderr
    );
    let arc = files("lm-eval/output/fixture-org__tiny-b", |n| {
        n.starts_with("samples_arc_easy_")
    });
    let r = import(d.path(), "lm-eval", &[a[0].clone(), arc[0].clone()], &[]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("a run compares variants of one task"),
        "{}",
        r.stderr
    );
    assert!(
        run_dirs(&d.path().join("reports")).is_empty(),
        "nothing written"
    );
}

#[test]
fn inspect_image_content_arrives_as_the_files_of_each_job() {
    // Logs inspect_ai wrote of a vision task (made-by/make_inspect_vision.py): each sample's
    // input a text and a PNG, which the log keeps as `attachment://HASH`.
    let logs = files("inspect/vision", |n| n.ends_with(".json"));
    let r = import_fresh("inspect", &logs, &["--quiet"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let dir = r.dir.clone().unwrap();
    let s = summary(&dir);
    assert_eq!(variant(&s, "variant-careful")["correct"].as_u64(), Some(4));
    assert_eq!(variant(&s, "variant-glance")["correct"].as_u64(), Some(2));
    let records: Vec<Value> = journal(&dir)
        .into_iter()
        .filter(|r| r["case_id"].is_string())
        .collect();
    assert_eq!(records.len(), 8);
    let mut hashes = std::collections::HashSet::new();
    for r in &records {
        let files = r["files"].as_array().expect("files in every record");
        assert_eq!(files.len(), 1, "{r}");
        let f = &files[0];
        assert_eq!(
            (f["name"].as_str(), f["kind"].as_str()),
            (Some("image-1"), Some("png"))
        );
        assert_eq!(f["origin"], "data:image/png");
        assert!(f["bytes"].as_u64().unwrap() > 60, "{f}");
        hashes.insert(f["sha256"].as_str().unwrap().to_string());
    }
    // One image per receipt, the same in both logs.
    assert_eq!(hashes.len(), 4);
}

#[test]
fn promptfoo_results_become_a_run_of_its_prompt_columns() {
    let out = tempfile::tempdir().unwrap();
    let results = vec![fixtures().join("promptfoo/results.json")];
    let r = import(
        out.path(),
        "promptfoo",
        &results,
        &["--allow-failures", "2"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let jobs = scores(r.dir.as_ref().unwrap());
    assert_eq!(jobs.len(), 10);
    // `gold` failed one assertion for terse ("Ag"): not a success; the provider error is a
    // failed job in both columns, never a 0.
    assert_eq!(
        jobs[&("gold".into(), "terse".into(), 0)],
        ("graded".into(), Some(0.0))
    );
    assert_eq!(
        jobs[&("gold".into(), "friendly".into(), 0)],
        ("graded".into(), Some(1.0))
    );
    for v in ["terse", "friendly"] {
        assert_eq!(
            jobs[&("provider-error".into(), v.into(), 0)],
            ("failed".into(), None)
        );
    }
    let record = journal(r.dir.as_ref().unwrap())
        .into_iter()
        .find(|r| r["case_id"] == "gold" && r["variant"] == "terse")
        .unwrap();
    assert_eq!(record["output"], "Ag");
    assert!(record["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(record["latency_ms"].as_f64().is_some());
    // promptfoo's fractional score: the weighted mean of its assertions (one of two passed).
    let r = import_fresh(
        "promptfoo",
        &results,
        &["--score", "score", "--allow-failures", "2"],
    );
    assert_eq!(
        scores(r.dir.as_ref().unwrap())[&("gold".into(), "terse".into(), 0)].1,
        Some(0.5)
    );
    // A named score.
    let r = import_fresh(
        "promptfoo",
        &results,
        &["--score", "brevity", "--allow-failures", "2"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // --repeat 2: each test's copies are its repeats, paired across the columns.
    let r = import_fresh(
        "promptfoo",
        &[fixtures().join("promptfoo/results_repeat2.json")],
        &["--allow-failures", "4"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let jobs = scores(r.dir.as_ref().unwrap());
    assert_eq!(jobs.len(), 20);
    assert!(jobs.contains_key(&("france".into(), "terse".into(), 1)));
    assert!(r.stdout.contains("5 cases × 2 variants"), "{}", r.stdout);
}

#[test]
fn imported_runs_are_runs_compare_report_and_the_store_take_them() {
    let out = tempfile::tempdir().unwrap();
    let store = out.path().join("history.db");
    let evals = files("inspect", |n| n.ends_with(".eval"));
    // Each variant imported alone: two runs of the same cases, compared by `compare`.
    let mut dirs = Vec::new();
    for file in &evals {
        let o = promptgauge(out.path())
            .args(["import-results", "inspect"])
            .arg(file)
            .args([
                "--variants",
                "arith",
                "--allow-failures",
                "1",
                "--quiet",
                "--store",
            ])
            .arg(&store)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut all = run_dirs(&out.path().join("reports"));
        all.retain(|d| !dirs.contains(d));
        dirs.push(all.pop().unwrap());
    }
    let o = promptgauge(out.path())
        .args(["compare"])
        .args(&dirs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The same verdict as the two variants imported into one run: +16.7 over 6 cases.
    assert!(
        stdout.contains("+16.7 points [-53.5, +56.4]") && stdout.contains("6 paired cases"),
        "{stdout}"
    );
    // `report` rebuilds the same summary from the journal.
    let before = std::fs::read_to_string(dirs[0].join("summary.json")).unwrap();
    let o = promptgauge(out.path())
        .arg("report")
        .arg(&dirs[0])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = std::fs::read_to_string(dirs[0].join("summary.json")).unwrap();
    let strip = |t: &str| {
        let mut v: Value = serde_json::from_str(t).unwrap();
        v["run"]["finished_at"] = Value::Null;
        v
    };
    assert_eq!(strip(&before), strip(&after));
    // The store holds both, as runs of the task.
    let o = promptgauge(out.path())
        .args(["runs", "--json", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let runs: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|r| r["bench"] == "arith"), "{runs:?}");
    // A gate on an imported run decides the exit code as on a run.
    let o = promptgauge(out.path())
        .args(["import-results", "inspect"])
        .args(&evals)
        .args([
            "--no-store",
            "--allow-failures",
            "1",
            "--min-accuracy",
            "0.9",
            "--quiet",
        ])
        .output()
        .unwrap();
    // Below 90% on a handful of cases, with intervals across it: inconclusive.
    assert_eq!(
        o.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn what_is_not_a_result_file_is_refused_with_the_fix() {
    let d = tempfile::tempdir().unwrap();
    let bench = repo().join("promptgauge.yaml");
    for format in ["inspect", "promptfoo"] {
        let r = import(d.path(), format, std::slice::from_ref(&bench), &[]);
        assert_eq!(r.code, 2, "{format}: {}", r.stderr);
        assert!(
            r.stderr.contains("is not JSON") || r.stderr.contains("not"),
            "{}",
            r.stderr
        );
    }
    let r = import(d.path(), "lm-eval", &[bench], &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("samples_TASK_DATE.jsonl"), "{}", r.stderr);
    let evals = files("inspect", |n| n.ends_with(".eval"));
    let r = import(d.path(), "inspect", &evals, &["--variants", "one"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("--variants names 1 variants, and the files hold 2"),
        "{}",
        r.stderr
    );
    let edge = files("inspect/edge", |n| n.ends_with(".eval"));
    let r = import(
        d.path(),
        "inspect",
        &[evals[0].clone(), edge[0].clone()],
        &[],
    );
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is of task `capitals`"), "{}", r.stderr);
    assert!(
        run_dirs(&d.path().join("reports")).is_empty(),
        "nothing written"
    );
}

fn openai(file: &str) -> PathBuf {
    fixtures().join("openai-evals").join(file)
}

fn import_evals(out: &Path, args: &[&str]) -> std::process::Output {
    promptgauge(out)
        .args(["import", "openai-evals"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn an_openai_eval_export_becomes_a_bench_with_each_criterion_translated_or_listed() {
    let d = tempfile::tempdir().unwrap();
    let eval = openai("eval.json");
    let run = openai("run_create_request.completions.json");
    let o = import_evals(
        d.path(),
        &[
            eval.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
            "--out",
            "bench",
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bench = d.path().join("bench");
    let yaml = std::fs::read_to_string(bench.join("promptgauge.yaml")).unwrap();
    // Every item passes only when every criterion does, as OpenAI counts it: string_check
    // `ilike` → contains; label_model → a judge with its labels; score_model → a judge with
    // its range and threshold; python → the grader's own code as a command scorer.
    let grade: Value = serde_json::from_str(
        yaml.lines()
            .find_map(|l| l.strip_prefix("grade: "))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(grade["kind"], "all");
    let kinds: Vec<&str> = grade["of"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["contains", "judge", "judge", "command"]);
    assert_eq!(grade["of"][0]["case_sensitive"], false);
    assert_eq!(
        grade["of"][1]["labels"],
        serde_json::json!(["polite", "neutral", "rude"])
    );
    assert_eq!(
        grade["of"][1]["passing_labels"],
        serde_json::json!(["polite", "neutral"])
    );
    assert_eq!(grade["of"][2]["range"], serde_json::json!([0.0, 10.0]));
    assert_eq!(grade["of"][2]["pass_threshold"], 7.0);
    // The judge is the first grader's model; the endpoint the run's, its parameters the
    // variant's.
    assert!(
        yaml.contains("\"model\":\"gpt-4o-mini-2024-07-18\""),
        "{yaml}"
    );
    assert!(
        yaml.contains("\"model\":\"gpt-4.1-mini-2025-04-14\""),
        "{yaml}"
    );
    let prompt = std::fs::read_to_string(bench.join("prompts/gpt-4-1-mini-prompt-v3.yaml"))
        .or_else(|_| {
            let dir = std::fs::read_dir(bench.join("prompts")).unwrap();
            std::fs::read_to_string(dir.map(|e| e.unwrap().path()).next().unwrap())
        })
        .unwrap();
    assert!(
        prompt.contains("\"{{ question }}\"") && prompt.contains("\"temperature\": 0.2"),
        "{prompt}"
    );
    let judge = std::fs::read_to_string(bench.join("judges/Tone.j2")).unwrap();
    assert!(
        judge.contains("Customer question: {{ vars.question }}\nReply: {{ answer }}"),
        "{judge}"
    );
    // Each item is a case; the string_check's reference, `{{ item.product }}`, its expected.
    let cases: Vec<Value> = std::fs::read_to_string(bench.join("cases.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cases.len(), 5);
    assert_eq!(cases[0]["id"], "t-001");
    assert_eq!(cases[0]["expected"], "Acme Cloud Billing");
    assert_eq!(
        cases[0]["vars"]["question"],
        "How do I download last month's invoice?"
    );
    // Dropped, and said: fuzzy_match has no equivalent; the second grader model.
    let notes = std::fs::read_to_string(bench.join("IMPORT-NOTES.md")).unwrap();
    assert!(notes.contains("text_similarity `Close to reference` (fuzzy_match ≥ 0.6): promptgauge has no fuzzy_match; left out"), "{notes}");
    assert!(
        notes.contains("graded with `o4-mini-2025-04-16`"),
        "{notes}"
    );
    assert!(
        stdout.contains("runs the eval's own grader code on your machine"),
        "{stdout}"
    );
    // Every program the bench will run is named, with what it sees of the environment.
    assert!(
        stdout.contains("programs the bench will run to score answers")
            && stdout.contains(
                "  - `python3 scorers/Under-400-characters.py` (it sees PATH, HOME, LANG, TMPDIR and no other variable)"
            ),
        "{stdout}"
    );
    // The bench is valid as written.
    let o = promptgauge(d.path())
        .args(["check", "bench/promptgauge.yaml"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The python grader runs as OpenAI ran it: grade(sample, item) ≥ pass_threshold.
    let scorer = bench.join("scorers/Under-400-characters.py");
    let ask = |answer: &str| -> Value {
        let mut child = std::process::Command::new("python3")
            .arg(&scorer)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let request = serde_json::json!({"id": 3, "case": {"vars": cases[0]["vars"]}, "answer": answer,
            "finish_reason": "stop", "tool_calls": []});
        std::io::Write::write_all(
            child.stdin.as_mut().unwrap(),
            format!("{request}\n").as_bytes(),
        )
        .unwrap();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(ask("Short.")["score"], 1.0);
    assert_eq!(ask(&"x".repeat(401))["score"], 0.0);
    assert_eq!(ask("Short.")["id"], 3);
}

#[test]
fn an_export_in_either_shape_gives_the_same_bench_and_what_it_lacks_is_asked_for() {
    let d = tempfile::tempdir().unwrap();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    // The run as exported (GET) reads its items from a file at OpenAI: --items gives them.
    let o = import_evals(
        d.path(),
        &[
            &path(&openai("eval.json")),
            "--run",
            &path(&openai("run.json")),
            "--out",
            "a",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("reads its items from the file file-7QmXb2kLd9TfHs4RzPq1Vw at OpenAI")
            && stderr.contains("--items"),
        "{stderr}"
    );
    assert!(!d.path().join("a").exists());
    let o = import_evals(
        d.path(),
        &[
            &path(&openai("eval.json")),
            "--run",
            &path(&openai("run.json")),
            "--items",
            &path(&openai("items.jsonl")),
            "--out",
            "a",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The eval as it was created (item_schema, plain messages) and the run's create body.
    let o = import_evals(
        d.path(),
        &[
            &path(&openai("eval_create_request.json")),
            "--run",
            &path(&openai("run_create_request.completions.json")),
            "--out",
            "b",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |dir: &str, f: &str| {
        std::fs::read_to_string(d.path().join(dir).join(f))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for f in [
        "promptgauge.yaml",
        "cases.jsonl",
        "judges/Tone.j2",
        "judges/Helpfulness.j2",
    ] {
        assert_eq!(read("a", f), read("b", f), "{f}");
    }
    // No run: the prompt is not in an eval.
    let o = import_evals(d.path(), &[&path(&openai("eval.json")), "--out", "c"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("add --run RUN.json"));
    // A jsonl run has answers, not a prompt.
    let o = import_evals(
        d.path(),
        &[
            &path(&openai("eval.json")),
            "--run",
            &path(&openai("run_create_request.jsonl.json")),
            "--out",
            "c",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("import-results"));
}

#[test]
fn an_imported_string_check_eval_runs_on_the_simulator() {
    let d = tempfile::tempdir().unwrap();
    let mut eval: Value =
        serde_json::from_str(&std::fs::read_to_string(openai("eval.json")).unwrap()).unwrap();
    // The string checks alone: `ilike` the product, and a `ne` that cannot carry over.
    let first = eval["testing_criteria"][0].clone();
    let mut ne = first.clone();
    ne["name"] = "Not empty".into();
    ne["operation"] = "ne".into();
    ne["reference"] = "".into();
    eval["testing_criteria"] = serde_json::json!([first, ne]);
    std::fs::write(d.path().join("eval.json"), eval.to_string()).unwrap();
    let run = openai("run_create_request.completions.json");
    let o = import_evals(
        d.path(),
        &[
            "eval.json",
            "--run",
            run.to_str().unwrap(),
            "--out",
            "bench",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let notes = std::fs::read_to_string(d.path().join("bench/IMPORT-NOTES.md")).unwrap();
    assert!(
        notes.contains("`ne`: the answer must differ): promptgauge has no negated scorer"),
        "{notes}"
    );
    let o = promptgauge(d.path())
        .args([
            "run",
            "bench/promptgauge.yaml",
            "--base-url",
            "mock",
            "--quiet",
            "--model",
            "mock-model",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = journal(&run_dirs(&d.path().join("reports")).pop().unwrap());
    assert_eq!(records.len(), 5);
    assert!(records.iter().all(|r| r["status"] == "graded"));
}

#[test]
fn a_task_or_sample_id_from_a_file_never_names_a_path_nor_counts_twice() {
    let d = tempfile::tempdir().unwrap();
    let edge = files("inspect/edge", |n| n.ends_with(".json"));
    let mut log: Value = serde_json::from_str(
        &std::fs::read_to_string(&edge[0])
            .unwrap()
            .replace("NaN", "null"),
    )
    .unwrap();
    // A task named as a path: the run folder stays under --out.
    log["eval"]["task"] = "../../escaped/<b>x</b>".into();
    let hostile = d.path().join("hostile.json");
    std::fs::write(&hostile, log.to_string()).unwrap();
    let deep = d.path().join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let r = import(
        &deep,
        "inspect",
        std::slice::from_ref(&hostile),
        &["--allow-failures", "1"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let dir = r.dir.unwrap();
    assert_eq!(dir.parent().unwrap(), deep.join("reports"));
    assert!(
        dir.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("escaped-b-x-b-imported-"),
        "{}",
        dir.display()
    );
    assert!(!d.path().join("escaped").exists());
    // A sample id twice: refused, nothing written.
    log["eval"]["task"] = "capitals".into();
    log["samples"][1]["id"] = log["samples"][0]["id"].clone();
    std::fs::write(&hostile, log.to_string()).unwrap();
    let other = d.path().join("c");
    std::fs::create_dir_all(&other).unwrap();
    let r = import(&other, "inspect", &[hostile], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("holds case `1` twice"), "{}", r.stderr);
    assert!(run_dirs(&other.join("reports")).is_empty());
}

#[test]
fn an_openai_prompt_promptgauge_cannot_fill_is_refused_not_kept_as_text() {
    let d = tempfile::tempdir().unwrap();
    let mut run: Value = serde_json::from_str(
        &std::fs::read_to_string(openai("run_create_request.completions.json")).unwrap(),
    )
    .unwrap();
    let eval = openai("eval.json");
    for (template, said) in [
        ("{{ item.missing_field }}", "cannot be filled from item"),
        (r#"{{ item["question"] }}"#, "which is neither"),
        ("{{ not_an_item }}", "which is neither"),
    ] {
        run["data_source"]["input_messages"]["template"][1]["content"] = template.into();
        std::fs::write(d.path().join("run.json"), run.to_string()).unwrap();
        let o = import_evals(
            d.path(),
            &[
                eval.to_str().unwrap(),
                "--run",
                "run.json",
                "--out",
                "bench",
            ],
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{template}: {stderr}");
        assert!(stderr.contains(said), "{template}: {stderr}");
        assert!(!d.path().join("bench").exists());
    }
}

#[test]
fn imported_runs_bundle_for_the_browser_as_runs_do() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("history.db");
    let evals = files("inspect", |n| n.ends_with(".eval"));
    let promptfoo = vec![fixtures().join("promptfoo/results.json")];
    // Two runs of two benches, neither complete (failed samples): no history page and no
    // comparison to bundle, and the bundle is written all the same.
    for (format, files) in [("inspect", &evals), ("promptfoo", &promptfoo)] {
        let o = promptgauge(d.path())
            .args(["import-results", format])
            .args(files.iter())
            .args(["--quiet", "--store"])
            .arg(&store)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = promptgauge(d.path())
        .args(["view", "--bundle", "out", "--reports", "reports", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.path().join("out");
    assert!(out.join("index.html").is_file());
    assert!(!out.join("compare.html").exists());
    // Every link of the runs list leads to a file of the bundle.
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    let links = regex::Regex::new(r##"href="([^"#]+)""##).unwrap();
    for c in links.captures_iter(&index) {
        let target = &c[1];
        if target.starts_with("http") {
            continue;
        }
        assert!(out.join(target).exists(), "{target} is not in the bundle");
    }
}
