//! The history store end to end: runs record themselves (SQLite beside the run folders, or
//! PostgreSQL with --store), `history` marks the steps `compare` would call significant,
//! `index` rebuilds a deleted store to the same history, runs recording at once lose
//! nothing, and baselines resolve by name, also once their folder is gone.
//!
//! PostgreSQL: `.ci/run` starts a server and sets PROMPTGAUGE_TEST_POSTGRES (an admin URL;
//! each test makes its own database). Without it the PostgreSQL tests say loudly that they
//! did not run, and fail in CI.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;
use promptgauge::mock::{Faults, MockConfig};
use serde_json::Value;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `promptgauge ARGS` in `dir`, with extra environment.
fn pg(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = promptgauge(dir);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn ok(o: Output) -> Output {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    o
}

/// A run of the arithmetic bench on the simulator as `model`.
fn run(dir: &Path, url: &str, model: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec![
        "run",
        "bench.yaml",
        "--quiet",
        "--base-url",
        url,
        "--model",
        model,
    ];
    args.extend_from_slice(extra);
    pg(dir, &args, env)
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// SQL against a store, through the same driver promptgauge uses: rows as strings.
fn sql(url: &str, query: &str) -> Vec<Vec<String>> {
    use sqlx::{Column, Row, TypeInfo};
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(url).await.unwrap();
        let rows = sqlx::query(sqlx::AssertSqlSafe(query.to_string()))
            .fetch_all(&pool)
            .await
            .unwrap_or_else(|e| panic!("{query}: {e}"));
        let out = rows
            .iter()
            .map(|r| {
                r.columns()
                    .iter()
                    .map(|c| {
                        let i = c.ordinal();
                        let text = match c.type_info().name() {
                            "TEXT" | "VARCHAR" => r.try_get::<Option<String>, _>(i).ok().flatten(),
                            "DOUBLE" | "REAL" | "FLOAT8" | "NUMERIC" => r
                                .try_get::<Option<f64>, _>(i)
                                .ok()
                                .flatten()
                                .map(|x| x.to_string()),
                            _ => r
                                .try_get::<Option<i64>, _>(i)
                                .ok()
                                .flatten()
                                .map(|x| x.to_string())
                                .or_else(|| {
                                    r.try_get::<Option<f64>, _>(i)
                                        .ok()
                                        .flatten()
                                        .map(|x| x.to_string())
                                })
                                .or_else(|| r.try_get::<Option<String>, _>(i).ok().flatten()),
                        };
                        text.unwrap_or_else(|| "NULL".into())
                    })
                    .collect()
            })
            .collect();
        pool.close().await;
        out
    })
}

fn sqlite_url(file: &Path) -> String {
    format!("sqlite://{}", file.canonicalize().unwrap().display())
}

/// The PostgreSQL server the CI started, with a fresh database for this test.
fn postgres(test: &str) -> Option<String> {
    let Ok(admin) = std::env::var("PROMPTGAUGE_TEST_POSTGRES") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "PROMPTGAUGE_TEST_POSTGRES is not set: .ci/run starts PostgreSQL for this test"
        );
        eprintln!(
            "\n*** SKIPPED {test}: PROMPTGAUGE_TEST_POSTGRES is not set, so the store was NOT tested on PostgreSQL.\n*** Start one with: eval \"$(.ci/postgres start /tmp/pg)\"\n"
        );
        return None;
    };
    let name = format!("pg_{}_{}", test, std::process::id());
    sql(&admin, &format!("DROP DATABASE IF EXISTS {name}"));
    sql(&admin, &format!("CREATE DATABASE {name}"));
    let base = admin.rsplit_once('/').unwrap().0;
    Some(format!("{base}/{name}"))
}

#[test]
fn history_marks_the_step_compare_calls_significant() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(200, 2, "");
    let d = bench.path();
    // Each model priced on the command line: the bench prices none in particular.
    for model in ["large-model", "large-model", "small-model"] {
        ok(run(d, &url, model, &["--price", "1,2"], &[]));
    }
    let sent = server.provider.stats().requests;
    assert_eq!(sent, 3 * 400);
    assert!(d.join("reports/promptgauge.db").is_file());

    let listed = json_lines(&stdout(&ok(pg(d, &["runs", "--json"], &[]))));
    assert_eq!(listed.len(), 3);
    for r in &listed {
        assert_eq!(r["complete"], true);
        assert_eq!(r["kind"], "run");
        assert_eq!(r["jobs_finished"], 400);
        assert_eq!(r["variants"].as_array().unwrap().len(), 2);
    }
    let ids: Vec<&str> = listed
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();

    let o = ok(pg(d, &["history", "--json"], &[]));
    let h: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(h["schema"], "promptgauge.history/1");
    assert_eq!(h["bench"], "arithmetic");
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(
        runs.iter()
            .map(|r| r["run_id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ids,
        "oldest first, as `runs` lists them"
    );
    assert!(runs[0]["previous"].is_null());
    assert_eq!(runs[1]["previous"], ids[0]);
    assert_eq!(runs[2]["previous"], ids[1]);
    for v in runs[0]["variants"].as_array().unwrap() {
        assert!(v["step"].is_null());
    }
    // The same model twice: the same answers, no step.
    for v in runs[1]["variants"].as_array().unwrap() {
        assert_eq!(v["step"]["verdict"], "not_distinguishable");
        assert_eq!(v["step"]["difference"], 0.0);
        assert_eq!(v["step"]["cases"], 200);
    }
    // The small model errs more: a drop, marked as `compare` would call it.
    let compare = ok(pg(d, &["compare", ids[1], ids[2], "--out", "cmp"], &[]));
    assert!(stderr(&compare).contains("comparison written"));
    let c: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("cmp/compare.json")).unwrap())
            .unwrap();
    assert_eq!(c["variants"].as_array().unwrap().len(), 2);
    for (v, pair) in runs[2]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .zip(c["variants"].as_array().unwrap())
    {
        assert_eq!(v["variant"], pair["name"]);
        let step = &v["step"];
        let cmp = &pair["comparison"];
        assert_eq!(step["verdict"], "worse", "{step}");
        for key in [
            "difference",
            "ci_low",
            "ci_high",
            "p_value",
            "p_holm",
            "verdict",
            "cases",
        ] {
            assert_eq!(step[key], cmp[key], "{key}: history and compare agree");
        }
        assert!(step["difference"].as_f64().unwrap() < -0.05);
    }
    // The table says it in words, and history.html is written beside the store.
    let table = ok(pg(d, &["history"], &[]));
    let text = stdout(&table);
    assert!(text.contains("▼"), "{text}");
    assert!(text.contains("significant steps:"), "{text}");
    assert!(text.contains(&format!("from run {}", ids[1])), "{text}");
    let page = std::fs::read_to_string(d.join("reports/history.html")).unwrap();
    assert_eq!(
        page.matches("<g class=\"point\"").count(),
        3 * 2 * 3,
        "a point per run and variant in the accuracy, cost and p90 charts"
    );
    assert!(page.contains("data-step=\"▼\""));
    let folder = runs[2]["folder"].as_str().unwrap();
    let name = Path::new(folder).file_name().unwrap().to_str().unwrap();
    assert!(
        page.contains(&format!("href=\"{name}/report.html\"")),
        "links are relative to the page"
    );
    // Filters: the large model alone has no step at all.
    let only = ok(pg(d, &["history", "--json", "--model", "large-model"], &[]));
    let only: Value = serde_json::from_str(&stdout(&only)).unwrap();
    assert_eq!(only["runs"].as_array().unwrap().len(), 2);
    let future = ok(pg(d, &["history", "--since", "2099-01-01"], &[]));
    assert!(stderr(&future).contains("no complete run of bench `arithmetic`"));
    let recent = ok(pg(
        d,
        &["runs", "--json", "--since", "1h", "--limit", "2"],
        &[],
    ));
    assert_eq!(json_lines(&stdout(&recent)).len(), 2, "the newest two");
    // Reading the history sends nothing.
    assert_eq!(server.provider.stats().requests, sent);
}

#[test]
fn a_pull_requests_runs_are_a_line_of_their_own_and_every_run_gets_its_own_time() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(20, 2, "");
    let d = bench.path();
    let main = [("GITHUB_REF_NAME", "main")];
    let pr = [("GITHUB_HEAD_REF", "try-shorter-prompt")];
    // main, a pull request's run, main again — all within the same minute.
    ok(run(d, &url, "m", &[], &main));
    ok(run(d, &url, "m", &[], &pr));
    ok(run(d, &url, "m", &[], &main));
    let o = ok(pg(d, &["history", "arithmetic", "--json"], &[]));
    let h: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let runs = h["runs"].as_array().unwrap();
    let id = |i: usize| runs[i]["run_id"].clone();
    assert_eq!(
        runs[1]["previous"],
        id(0),
        "the pull request steps from its base"
    );
    assert_eq!(
        runs[2]["previous"],
        id(0),
        "main steps from main, never from a pull request's run"
    );
    ok(pg(d, &["history", "arithmetic", "--html", "h.html"], &[]));
    let html = std::fs::read_to_string(d.join("h.html")).unwrap();
    let points = |line: &str| -> Vec<usize> {
        html.match_indices(&format!("data-line=\"{line}\""))
            .map(|(at, _)| {
                let rest = &html[at..];
                let pts = rest.split("points=\"").nth(1).unwrap();
                pts[..pts.find('"').unwrap()].split(' ').count()
            })
            .collect()
    };
    // Per variant on the accuracy chart: main's two runs; the branch from its base.
    assert!(
        points("main").iter().all(|&n| n == 2),
        "{:?}",
        points("main")
    );
    assert!(!points("main").is_empty());
    assert!(
        points("try-shorter-prompt").iter().all(|&n| n == 2)
            && !points("try-shorter-prompt").is_empty(),
        "{:?}",
        points("try-shorter-prompt")
    );
    assert!(html.contains("stroke-dasharray"));
    // The three runs' axis labels differ (to the second, as the runs were that close).
    let axis: Vec<&str> = html
        .split("text-anchor=\"middle\">")
        .skip(1)
        .map(|t| &t[..t.find('<').unwrap()])
        .filter(|t| t.starts_with("20"))
        .collect();
    let first_chart: Vec<&str> = axis.iter().take(3).copied().collect();
    let distinct: std::collections::HashSet<&&str> = first_chart.iter().collect();
    assert_eq!(distinct.len(), 3, "{axis:?}");
}

/// What `history --json` and `runs --json` say, the store's own path left out.
fn views(d: &Path, store: &[&str]) -> (String, String) {
    let mut h = vec!["history", "arithmetic", "--json", "--all"];
    h.extend_from_slice(store);
    let mut r = vec!["runs", "--json", "--limit", "1000"];
    r.extend_from_slice(store);
    (stdout(&ok(pg(d, &h, &[]))), stdout(&ok(pg(d, &r, &[]))))
}

#[test]
fn a_deleted_store_rebuilt_with_index_gives_the_same_history() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(40, 2, "");
    let d = bench.path();
    let main = [
        ("GITHUB_REF_NAME", "main"),
        ("GITHUB_SHA", "0123456789abcdef"),
    ];
    ok(run(d, &url, "large-model", &[], &main));
    ok(run(
        d,
        &url,
        "small-model",
        &["--repeats", "2"],
        &[("GITHUB_HEAD_REF", "try-small")],
    ));
    // Shards, and their merge: each recorded, the merge as a run of its own.
    for i in 1..=2 {
        let shard = format!("{i}/2");
        ok(run(d, &url, "large-model", &["--shard", &shard], &main));
    }
    let shards: Vec<String> = run_dirs(&d.join("reports"))
        .iter()
        .filter(|p| p.to_string_lossy().contains("shard"))
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(shards.len(), 2);
    let mut merge = vec!["merge"];
    merge.extend(shards.iter().map(String::as_str));
    ok(pg(d, &merge, &[]));
    // A run of fewer cases.
    ok(run(d, &url, "large-model", &["--limit", "5"], &[]));

    let before = views(d, &[]);
    let runs = json_lines(&before.1);
    let kinds: Vec<&str> = runs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    // A merge starts when its first shard did.
    assert_eq!(kinds, ["run", "run", "merged", "shard", "shard", "run"]);
    assert_eq!(runs[0]["git_branch"], "main");
    assert_eq!(runs[0]["git_commit"], "0123456789abcdef");
    assert_eq!(
        runs[1]["git_branch"], "try-small",
        "a pull request's own branch"
    );
    assert_eq!(runs[1]["repeats"], 2);
    assert_eq!(runs[2]["jobs_finished"], 80);
    let history: Value = serde_json::from_str(&before.0).unwrap();
    assert_eq!(
        history["runs"].as_array().unwrap().len(),
        4,
        "shards are parts of a run, not runs of the bench"
    );

    for run in run_dirs(&d.join("reports")) {
        assert!(!run.join(".store.spool").exists(), "{}", run.display());
    }
    for f in ["promptgauge.db", "promptgauge.db-wal", "promptgauge.db-shm"] {
        let _ = std::fs::remove_file(d.join("reports").join(f));
    }
    let o = ok(pg(d, &["index", "reports"], &[]));
    assert!(
        stderr(&o).contains("6 runs recorded in reports/promptgauge.db"),
        "{}",
        stderr(&o)
    );
    let after = views(d, &[]);
    assert_eq!(before.0, after.0, "history --json");
    assert_eq!(before.1, after.1, "runs --json");
    // Indexing again replaces, never doubles.
    ok(pg(d, &["index", "reports"], &[]));
    assert_eq!(views(d, &[]), after);
    let file = sqlite_url(&d.join("reports/promptgauge.db"));
    // 80 + 160 (two repeats) + 2 × 40 (shards) + 80 (merged) + 10 (five cases).
    assert_eq!(
        sql(&file, "SELECT COUNT(*) FROM run_jobs"),
        [vec!["410".to_string()]]
    );

    // A copied run folder is the same run: recorded once, counted once, said.
    let first = run_dirs(&d.join("reports"))[0].clone();
    let copy = d.join("reports/zz-copy");
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(&first).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
    }
    let o = ok(pg(d, &["index", "reports"], &[]));
    assert!(
        stderr(&o).contains("6 runs recorded in reports/promptgauge.db; 1 skipped")
            && stderr(&o).contains("the same run"),
        "{}",
        stderr(&o)
    );
    assert_eq!(views(d, &[]), after);
    std::fs::remove_dir_all(&copy).unwrap();

    // A FIFO named results.jsonl is refused at once (it would wait forever for a writer).
    #[cfg(unix)]
    {
        let fifo = d.join("reports/zz-fifo");
        std::fs::create_dir(&fifo).unwrap();
        std::fs::copy(first.join("run.json"), fifo.join("run.json")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(fifo.join("results.jsonl"))
            .status()
            .unwrap();
        assert!(made.success());
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
            .current_dir(d)
            .env("CI", "true")
            .args(["index", fifo.to_str().unwrap(), "--store", "fifo.db"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("index hangs on a FIFO");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let mut e = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e).unwrap();
        assert_eq!(status.code(), Some(2), "{e}");
        assert!(e.contains("not a regular file"), "{e}");
    }
}

/// Starts `n` runs at once into one store, and waits for them.
fn at_once(d: &Path, url: &str, n: usize, store: Option<&str>) {
    let children: Vec<_> = (0..n)
        .map(|i| {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_promptgauge"));
            cmd.current_dir(d)
                .args(["run", "bench.yaml", "--quiet", "--base-url", url])
                .args([
                    "--model",
                    if i % 2 == 0 {
                        "large-model"
                    } else {
                        "small-model"
                    },
                ])
                .env("CI", "true")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            for var in STORE_VARIABLES {
                cmd.env_remove(var);
            }
            if let Some(s) = store {
                cmd.args(["--store", s]);
            }
            cmd.spawn().unwrap()
        })
        .collect();
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    }
}

#[test]
fn runs_recording_at_once_lose_nothing() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(60, 2, "");
    let d = bench.path();
    at_once(d, &url, 8, None);
    let file = sqlite_url(&d.join("reports/promptgauge.db"));
    let counts = sql(
        &file,
        "SELECT run_id, COUNT(*) FROM run_jobs GROUP BY run_id",
    );
    assert_eq!(counts.len(), 8, "{counts:?}");
    for c in &counts {
        assert_eq!(c[1], "120", "{c:?}");
    }
    assert_eq!(
        sql(&file, "SELECT COUNT(*) FROM run_variants"),
        [vec!["16".to_string()]]
    );
    assert_eq!(sql(&file, "PRAGMA journal_mode"), [vec!["wal".to_string()]]);
    let folders: Vec<PathBuf> = run_dirs(&d.join("reports"));
    assert_eq!(folders.len(), 8);
}

#[test]
fn baselines_resolve_by_name_even_once_their_folder_is_gone() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(200, 2, "");
    let d = bench.path();
    let main = [("GITHUB_REF_NAME", "main")];
    let feature = [
        ("GITHUB_REF_NAME", "42/merge"),
        ("GITHUB_HEAD_REF", "feature"),
    ];
    ok(run(d, &url, "large-model", &[], &main));
    ok(run(d, &url, "small-model", &[], &feature));
    let main_dir = run_dirs(&d.join("reports"))[0].clone();
    let main_id: String =
        serde_json::from_str::<Value>(&std::fs::read_to_string(main_dir.join("run.json")).unwrap())
            .unwrap()["run_id"]
            .as_str()
            .unwrap()
            .into();

    // latest:main is main's newest run, though the feature branch ran since.
    let o = run(
        d,
        &url,
        "small-model",
        &["--baseline", "latest:main", "--fail-if-worse"],
        &feature,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("--baseline latest:main: run {main_id}")),
        "{}",
        stderr(&o)
    );
    let newest = run_dirs(&d.join("reports")).pop().unwrap();
    let with_folder: Value =
        serde_json::from_str(&std::fs::read_to_string(newest.join("baseline.json")).unwrap())
            .unwrap();
    assert_eq!(with_folder["run_a"]["dir"], main_dir.display().to_string());
    // `latest` is the newest complete run of the bench, on any branch: the feature run.
    let o = run(
        d,
        &url,
        "small-model",
        &["--baseline", "latest", "--fail-if-worse"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The folder is gone: the store's rows stand in, with the same verdicts.
    std::fs::remove_dir_all(&main_dir).unwrap();
    let o = run(
        d,
        &url,
        "small-model",
        &["--baseline", &main_id, "--fail-if-worse"],
        &feature,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let newest = run_dirs(&d.join("reports")).pop().unwrap();
    let from_store: Value =
        serde_json::from_str(&std::fs::read_to_string(newest.join("baseline.json")).unwrap())
            .unwrap();
    assert_eq!(from_store["run_a"]["dir"], format!("store:{main_id}"));
    assert_eq!(with_folder["variants"].as_array().unwrap().len(), 2);
    assert_eq!(from_store["variants"].as_array().unwrap().len(), 2);
    for (a, b) in with_folder["variants"]
        .as_array()
        .unwrap()
        .iter()
        .zip(from_store["variants"].as_array().unwrap())
    {
        for key in [
            "cases",
            "difference",
            "ci_low",
            "ci_high",
            "p_value",
            "p_holm",
            "verdict",
        ] {
            assert_eq!(a["comparison"][key], b["comparison"][key], "{key}");
        }
    }
    // compare takes the same names.
    ok(pg(
        d,
        &["compare", "latest:main", "latest", "--out", "cmp"],
        &[],
    ));
    let c: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("cmp/compare.json")).unwrap())
            .unwrap();
    assert_eq!(c["run_a"]["dir"], format!("store:{main_id}"));

    // Names that resolve to nothing are refused before anything is sent.
    let sent = server.provider.stats().requests;
    let o = run(d, &url, "small-model", &["--baseline", "latest:nope"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no run of bench `arithmetic` on branch nope that a gate can trust"),
        "{}",
        stderr(&o)
    );
    let o = run(d, &url, "small-model", &["--baseline", "no-such-run"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("promptgauge runs"), "{}", stderr(&o));
    let o = run(
        d,
        &url,
        "small-model",
        &["--baseline", "latest", "--store", "elsewhere.db"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("there is none at elsewhere.db"),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.provider.stats().requests, sent);
    // --no-store records nothing.
    let before = sql(
        &sqlite_url(&d.join("reports/promptgauge.db")),
        "SELECT COUNT(*) FROM runs",
    );
    ok(run(d, &url, "large-model", &["--no-store"], &[]));
    let after = sql(
        &sqlite_url(&d.join("reports/promptgauge.db")),
        "SELECT COUNT(*) FROM runs",
    );
    assert_eq!(before, after);
}

#[test]
fn latest_passes_over_runs_a_gate_cannot_trust_and_a_gate_that_compared_nothing_fails() {
    let (_rt, server) = start_mock(MockConfig::default());
    let (_rt2, dead) = start_mock(MockConfig {
        faults: Faults {
            cut: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let (_rt3, flaky) = start_mock(MockConfig {
        faults: Faults {
            cut: 0.2,
            ..Faults::default()
        },
        seed: 5,
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(40, 2, "limits: { max_attempts: 1 }\n");
    let d = bench.path();
    let id_of = |dir: &Path| -> String {
        serde_json::from_str::<Value>(&std::fs::read_to_string(dir.join("run.json")).unwrap())
            .unwrap()["run_id"]
            .as_str()
            .unwrap()
            .into()
    };
    ok(run(d, &server.base_url(), "large-model", &[], &[]));
    let good = id_of(&run_dirs(&d.join("reports"))[0]);
    // Every job fails: recorded, but no baseline.
    let o = run(d, &dead.base_url(), "large-model", &[], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let failed_dir = run_dirs(&d.join("reports")).pop().unwrap();
    let failed = id_of(&failed_dir);
    let o = run(
        d,
        &server.base_url(),
        "small-model",
        &["--baseline", "latest", "--fail-if-worse"],
        &[],
    );
    assert!(
        stderr(&o).contains(&format!("--baseline latest: run {good}")),
        "the newest trusted run, not {failed}: {}",
        stderr(&o)
    );
    let compared: Value = serde_json::from_str(
        &std::fs::read_to_string(
            run_dirs(&d.join("reports"))
                .pop()
                .unwrap()
                .join("baseline.json"),
        )
        .unwrap(),
    )
    .unwrap();
    for v in compared["variants"].as_array().unwrap() {
        assert_eq!(v["comparison"]["cases"], 40, "the gate compared every case");
    }
    assert!(o.status.code() == Some(0) || o.status.code() == Some(1));

    // Failures within what the run allowed: trusted.
    let o = run(
        d,
        &flaky.base_url(),
        "large-model",
        &["--allow-failures", "40"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let allowed = id_of(&run_dirs(&d.join("reports")).pop().unwrap());
    let o = run(
        d,
        &server.base_url(),
        "large-model",
        &["--baseline", "latest"],
        &[],
    );
    assert!(
        stderr(&o).contains(&format!("--baseline latest: run {allowed}")),
        "{}",
        stderr(&o)
    );

    // A store whose only run failed everywhere: refused before anything is sent, saying why.
    let o = run(
        d,
        &dead.base_url(),
        "large-model",
        &["--store", "dead.db"],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    let only = id_of(&run_dirs(&d.join("reports")).pop().unwrap());
    let sent = server.provider.stats().requests;
    let o = run(
        d,
        &server.base_url(),
        "small-model",
        &[
            "--baseline",
            "latest",
            "--store",
            "dead.db",
            "--fail-if-worse",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // (Every job failing the same way at once, the run stopped sending: an outage.)
    assert!(
        stderr(&o).contains("that a gate can trust")
            && stderr(&o).contains(&format!(
                "the newest, {only}, stopped early (the server looks down"
            )),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.provider.stats().requests, sent);

    // Named by its folder, the failed run is taken as asked; the gate then compared
    // nothing, and fails.
    let o = run(
        d,
        &server.base_url(),
        "small-model",
        &[
            "--baseline",
            failed_dir.to_str().unwrap(),
            "--fail-if-worse",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("gate failed: fail-if-worse --baseline")
            && stderr(&o).contains("nothing was compared"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn store_commands_say_what_is_wrong_and_how_to_fix_it() {
    let empty = tempfile::tempdir().unwrap();
    let d = empty.path();
    let o = pg(d, &["history"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("no history store at reports/promptgauge.db yet"),
        "{e}"
    );
    assert!(e.contains("promptgauge index reports"), "{e}");
    assert!(!d.join("reports").exists(), "reading creates nothing");
    let o = pg(d, &["runs", "--store", "mysql://x/y"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not supported"), "{}", stderr(&o));
    let o = pg(d, &["index", "."], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no run folder"), "{}", stderr(&o));

    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(10, 2, "");
    let b = bench.path();
    ok(run(b, &server.base_url(), "m", &[], &[]));
    let o = pg(b, &["history", "--since", "last tuesday"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("30d"), "{}", stderr(&o));
    // A bench the store does not hold: the store's benches, by name.
    let o = pg(b, &["history", "nosuch"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("it holds: arithmetic (1 run)"),
        "{}",
        stderr(&o)
    );
    // A file that is not a database is said at once, not after a pool's timeout.
    std::fs::write(b.join("notes.db"), "not a database\n").unwrap();
    let started = std::time::Instant::now();
    let o = pg(b, &["runs", "--store", "notes.db"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is it a database?"), "{}", stderr(&o));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // Another program's database with a `runs` table is not taken for a store.
    let foreign = b.join("foreign.db");
    std::fs::File::create(&foreign).unwrap();
    sql(&sqlite_url(&foreign), "CREATE TABLE runs (id INTEGER)");
    let o = pg(b, &["runs", "--store", "foreign.db"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a promptgauge history store"),
        "{}",
        stderr(&o)
    );
    // Another program's SQLite file with no `runs` table: a run does not add promptgauge's
    // tables to it (it warns, and the run succeeds), and reading commands refuse it.
    let other = b.join("other.db");
    std::fs::File::create(&other).unwrap();
    sql(
        &sqlite_url(&other),
        "CREATE TABLE users (id INTEGER, name TEXT)",
    );
    let o = run(b, &server.base_url(), "m", &["--store", "other.db"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds tables promptgauge did not make (`users`)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        sql(
            &sqlite_url(&other),
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ),
        vec![vec!["users".to_string()]],
        "nothing was added to another program's database"
    );
    let o = pg(b, &["runs", "--store", "other.db"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a promptgauge history store"),
        "{}",
        stderr(&o)
    );
    // A store from a newer promptgauge is refused, not written.
    let file = sqlite_url(&b.join("reports/promptgauge.db"));
    sql(
        &file,
        "INSERT INTO promptgauge_migrations (version, applied_at) VALUES (99, 'later')",
    );
    let o = pg(b, &["runs"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("schema version 99"), "{}", stderr(&o));
    // A run whose store cannot be written still succeeds, and says how to add it later.
    let o = run(b, &server.base_url(), "m", &[], &[]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("promptgauge index"), "{}", stderr(&o));
}

/// Runs `script` in a private mount namespace where `dir` is mounted read-only, as a CI
/// cache or a shared volume is; `None` when this machine does not allow it (no
/// `unshare`, or not permitted), said loudly.
#[cfg(target_os = "linux")]
fn on_a_read_only_mount(dir: &Path, script: &str) -> Option<Output> {
    let d = dir.display();
    let probe = std::process::Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            &format!("mount --bind '{d}' '{d}' && mount -o remount,ro,bind '{d}'"),
        ])
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!(
            "SKIPPED: this machine cannot mount a folder read-only (unshare -m): the read-only store test did not run"
        );
        return None;
    }
    let bin = assert_cmd::cargo::cargo_bin("promptgauge");
    Some(
        std::process::Command::new("unshare")
            .args([
                "-m",
                "sh",
                "-c",
                &format!(
                    "mount --bind '{d}' '{d}' && mount -o remount,ro,bind '{d}' && cd '{d}' && PG='{}' && {script}",
                    bin.display()
                ),
            ])
            .env("CI", "true")
            .env_remove("PROMPTGAUGE_STORE")
            .output()
            .unwrap(),
    )
}

#[cfg(target_os = "linux")]
#[test]
fn a_store_on_a_read_only_mount_is_read_and_a_run_says_why_it_cannot_record() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(10, 2, "");
    let d = bench.path();
    ok(run(d, &server.base_url(), "m", &[], &[]));
    assert!(
        d.join("reports/promptgauge.db-wal").exists() || d.join("reports/promptgauge.db").exists()
    );
    // Reading commands read it where nothing can be written.
    let Some(o) = on_a_read_only_mount(d, "\"$PG\" runs --json") else {
        return;
    };
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json_lines(&stdout(&o)).len(), 1, "{}", stdout(&o));
    // A run there cannot record: it says so, and how to add it later; it succeeds.
    let url = server.base_url();
    let o = on_a_read_only_mount(
        d,
        &format!("\"$PG\" run bench.yaml --base-url {url} --model m --out /tmp/pg-ro-$$ --store reports/promptgauge.db"),
    )
    .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("is read-only (a read-only file or file system)"),
        "{e}"
    );
    assert!(!e.contains("is it a database?"), "{e}");
}

#[test]
fn secrets_stay_out_and_a_resume_records_where_the_run_did() {
    let (_rt, server) = start_mock(MockConfig::default());
    // A judge's URL with credentials, kept in run.json's copy of the bench settings.
    let bench = arithmetic_bench(
        10,
        2,
        "judge: { base_url: \"http://judge:hunter2hunter2@127.0.0.1:9/v1\", model: j }\n",
    );
    let d = bench.path();
    // Keys in the base URL's query and fragment are sent, never stored or shown, whatever
    // their names (Azure Functions' `code`, `pwd`, `jwt`); `api-version` is harmless.
    let url = format!(
        "{}?api_key=sekritsekrit&code=AzFuncKey0123456789&pwd=pwdpwdpwd1&jwt=eyJjwtjwt99&api-version=2024-02-01#token=fragfrag1234",
        server.base_url()
    );
    let first = ok(pg(
        d,
        &[
            "run",
            "bench.yaml",
            "--verbose",
            "--base-url",
            &url,
            "--model",
            "m",
            "--store",
            "custom.db",
        ],
        &[],
    ));
    let secrets = [
        "sekritsekrit",
        "hunter2hunter2",
        "AzFuncKey0123456789",
        "pwdpwdpwd1",
        "eyJjwtjwt99",
        "fragfrag1234",
    ];
    let terminal = format!("{}{}", stdout(&first), stderr(&first));
    for secret in secrets {
        assert!(!terminal.contains(secret), "{secret} shown:\n{terminal}");
    }
    let listed = json_lines(&stdout(&ok(pg(
        d,
        &["runs", "--json", "--store", "custom.db"],
        &[],
    ))));
    assert_eq!(listed.len(), 1);
    let shown = listed[0]["base_url"].as_str().unwrap();
    assert!(
        shown.ends_with(
            "?api_key=[redacted]&code=[redacted]&pwd=[redacted]&jwt=[redacted]&api-version=2024-02-01#[redacted]"
        ),
        "{shown}"
    );
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let store_files: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("custom.db"))
        .collect();
    assert!(!store_files.is_empty());
    for file in std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain(store_files)
    {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        for secret in secrets {
            assert!(!text.contains(secret), "{} holds {secret}", file.display());
        }
    }
    assert!(
        !dir.join(".store.spool").exists(),
        "the spool goes once recorded"
    );
    // Resumed without --store, the run is recorded again where it was first.
    let resume = ["run", "--resume", dir.to_str().unwrap(), "--base-url", &url];
    let o = ok(pg(d, &resume, &[]));
    assert!(stderr(&o).contains("recorded in"), "{}", stderr(&o));
    assert!(!d.join("reports/promptgauge.db").exists(), "{}", stderr(&o));
    let listed = json_lines(&stdout(&ok(pg(
        d,
        &["runs", "--json", "--store", "custom.db"],
        &[],
    ))));
    assert_eq!(listed.len(), 1, "recorded again, not twice");
    assert_eq!(listed[0]["kind"], "resumed");
}

#[test]
fn the_store_works_on_postgresql() {
    let Some(db) = postgres("store") else { return };
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(60, 2, "");
    let d = bench.path();
    let store = ["--store", db.as_str()];
    ok(run(
        d,
        &url,
        "large-model",
        &store,
        &[("GITHUB_REF_NAME", "main")],
    ));
    at_once(d, &url, 6, Some(&db));
    let counts = sql(&db, "SELECT run_id, COUNT(*) FROM run_jobs GROUP BY run_id");
    assert_eq!(counts.len(), 7, "{counts:?}");
    assert!(counts.iter().all(|c| c[1] == "120"), "{counts:?}");
    assert!(
        !d.join("reports/promptgauge.db").exists(),
        "--store replaces the default"
    );
    // A baseline by name, resolved in PostgreSQL.
    let o = run(
        d,
        &url,
        "small-model",
        &[
            "--store",
            &db,
            "--baseline",
            "latest:main",
            "--fail-if-worse",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The same folders indexed into SQLite give the same history and run list.
    let pg_views = views(d, &store);
    ok(pg(d, &["index", "reports", "--store", "copy.db"], &[]));
    let sqlite_views = views(d, &["--store", "copy.db"]);
    assert_eq!(pg_views.0, sqlite_views.0, "history --json on both");
    assert_eq!(pg_views.1, sqlite_views.1, "runs --json on both");
    // $PROMPTGAUGE_STORE names it too.
    let o = ok(pg(
        d,
        &["runs", "--json"],
        &[("PROMPTGAUGE_STORE", db.as_str())],
    ));
    assert_eq!(json_lines(&stdout(&o)).len(), 8);
    // docs/guide/store.md's queries run as written.
    for q in documented_queries() {
        sql(&db, &q);
        sql(&sqlite_url(&d.join("copy.db")), &q);
    }
}

/// The ```sql blocks of docs/guide/store.md.
fn documented_queries() -> Vec<String> {
    let doc = std::fs::read_to_string(repo().join("docs/guide/store.md")).unwrap();
    let mut out = Vec::new();
    let mut rest = doc.as_str();
    while let Some(start) = rest.find("```sql\n") {
        let body = &rest[start + 7..];
        let end = body.find("```").unwrap();
        out.push(body[..end].trim().trim_end_matches(';').to_string());
        rest = &body[end + 3..];
    }
    assert!(out.len() >= 3, "docs/guide/store.md shows its queries");
    out
}

#[test]
fn documented_queries_run_on_sqlite() {
    let (_rt, server) = start_mock(MockConfig::default());
    // Graded by named parts, so the query on `run_parts` has rows too.
    let bench = parts_bench(10, 2);
    let d = bench.path();
    ok(run(d, &server.base_url(), "m", &[], &[]));
    ok(run(d, &server.base_url(), "m", &[], &[]));
    let file = sqlite_url(&d.join("reports/promptgauge.db"));
    for q in documented_queries() {
        assert!(!sql(&file, &q).is_empty(), "{q} returns rows");
    }
}

#[test]
fn steps_skip_runs_at_another_level_and_one_variant_gates_on_its_baseline() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let bench = arithmetic_bench(200, 1, "");
    let d = bench.path();
    let yaml = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    ok(run(d, &url, "large-model", &[], &[]));
    // One variant: --max-drop compares it with its baseline run, and passes on the same answers.
    let o = ok(run(
        d,
        &url,
        "large-model",
        &["--baseline", "latest", "--max-drop", "5"],
        &[],
    ));
    assert!(!stderr(&o).contains("gate failed"), "{}", stderr(&o));
    // A run at another confidence level is not stepped from; the next at 95% steps from
    // the last run at 95%.
    std::fs::write(d.join("bench.yaml"), format!("{yaml}confidence: 0.9\n")).unwrap();
    ok(run(d, &url, "large-model", &[], &[]));
    std::fs::write(d.join("bench.yaml"), &yaml).unwrap();
    ok(run(d, &url, "small-model", &[], &[]));
    let h: Value = serde_json::from_str(&stdout(&ok(pg(d, &["history", "--json"], &[])))).unwrap();
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    assert!(runs[2]["previous"].is_null(), "the only run at 90%");
    assert_eq!(runs[3]["previous"], runs[1]["run_id"]);
    assert_eq!(runs[3]["variants"][0]["step"]["verdict"], "worse");
    let table = stdout(&ok(pg(d, &["history"], &[])));
    assert!(
        table.contains("intervals at each run's own confidence level"),
        "{table}"
    );
    assert!(
        table.contains("the model changed from large-model"),
        "{table}"
    );
}

/// A score with named parts: each run records its parts' figures per variant (`run_parts`),
/// `history --json` gives them per variant as the journal adds up, `history` names them,
/// `history --part NAME` shows one over time (terminal, JSON, history.html), and a part no
/// run has is refused with the names there are.
#[test]
fn history_shows_each_named_part_over_time() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = parts_bench(6, 2);
    let d = bench.path();
    ok(run(d, &server.base_url(), "m", &[], &[]));
    ok(run(d, &server.base_url(), "m", &[], &[]));
    let rows = sql(
        &sqlite_url(&d.join("reports/promptgauge.db")),
        "SELECT part, variant, n FROM run_parts",
    );
    assert_eq!(rows.len(), 8, "2 runs × 2 parts × 2 variants: {rows:?}");
    assert!(rows.iter().all(|r| r[2] == "6"), "{rows:?}");
    let o = ok(pg(d, &["history", "--json"], &[]));
    let h: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(h["parts"], serde_json::json!(["number", "has <1>"]));
    assert!(h.get("part").is_none());
    let mut means = std::collections::BTreeMap::new();
    for r in h["runs"].as_array().unwrap() {
        let folder = PathBuf::from(r["folder"].as_str().unwrap());
        let journal = part_means(&folder);
        for v in r["variants"].as_array().unwrap() {
            let arm = v["variant"].as_str().unwrap().to_string();
            let parts = v["parts"].as_array().unwrap();
            assert_eq!(parts.len(), 2, "{v}");
            for p in parts {
                let name = p["name"].as_str().unwrap().to_string();
                let mean = p["mean"].as_f64().unwrap();
                let want = journal[&(name.clone(), arm.clone())];
                assert!(
                    (mean - want).abs() < 1e-12,
                    "{name} {arm}: {mean} vs {want}"
                );
                assert_eq!(p["binary"], true);
                means.insert(
                    (r["run_id"].as_str().unwrap().to_string(), name, arm.clone()),
                    mean,
                );
            }
        }
    }
    // `history` names the parts, and how to see one.
    let o = ok(pg(d, &["history"], &[]));
    assert!(
        stderr(&o).contains("parts of the score: number, has <1> (add --part NAME"),
        "{}",
        stderr(&o)
    );
    // One part over time: its accuracy per variant in place of the whole score's.
    let o = ok(pg(
        d,
        &["history", "--part", "has <1>"],
        &[("COLUMNS", "200")],
    ));
    let text = stdout(&o);
    assert!(text.contains("arithmetic · part has <1>: 2 runs"), "{text}");
    for ((run_id, part, arm), mean) in &means {
        if part != "has <1>" {
            continue;
        }
        let line = text
            .lines()
            .skip_while(|l| !l.contains(run_id.as_str()))
            .find(|l| l.contains(&format!(" {arm} ")))
            .unwrap_or_else(|| panic!("{run_id} {arm}: {text}"));
        assert!(
            line.contains(&format!("{:.1}%", mean * 100.0)),
            "{line}\n{text}"
        );
    }
    let o = ok(pg(d, &["history", "--part", "number", "--json"], &[]));
    let h: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(h["part"], "number");
    for r in h["runs"].as_array().unwrap() {
        for v in r["variants"].as_array().unwrap() {
            let key = (
                r["run_id"].as_str().unwrap().to_string(),
                "number".to_string(),
                v["variant"].as_str().unwrap().to_string(),
            );
            assert_eq!(v["accuracy"].as_f64(), Some(means[&key]), "{v}");
            assert!(v["step"].is_null(), "no step is tested for a part: {v}");
        }
    }
    // Its page beside the whole history's, never over it.
    let html = std::fs::read_to_string(d.join("reports/history-part-number.html")).unwrap();
    assert!(
        html.contains("arithmetic · part number — history"),
        "{html}"
    );
    let whole = std::fs::read_to_string(d.join("reports/history.html")).unwrap();
    assert!(!whole.contains("part number — history"), "{whole}");
    // A part no run has: refused, naming those there are.
    let o = pg(d, &["history", "--part", "category"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let said = stderr(&o);
    assert!(
        said.contains("no run of bench `arithmetic` has a part named `category`")
            && said.contains("number, has <1>"),
        "{said}"
    );
    // And the whole history's page draws each part.
    ok(pg(d, &["history"], &[]));
    let html = std::fs::read_to_string(d.join("reports/history.html")).unwrap();
    assert!(html.contains("id=\"part-chart-1\""), "{html}");
}
