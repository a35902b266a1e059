//! report.html in a real browser: headless Chromium loads it from file://, and the DOM it
//! builds must show the run's numbers; Chromium's network log must show no request made by
//! the page (a control page with one external image proves the log would show it).
//!
//! Needs Debian's `chromium` (`.ci/run` installs it). Without it the test says so and
//! passes, except under CI, where a missing browser is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use promptgauge::mock::{Faults, MockConfig};
use promptgauge::report::Summary;
use regex::Regex;

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Loads `page` headless; returns the DOM and the URLs the page itself requested.
fn load(browser: &Path, page: &Path) -> (String, Vec<String>) {
    load_url(browser, &format!("file://{}", page.display()))
}

fn load_url(browser: &Path, url: &str) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let netlog = profile.path().join("netlog.json");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            // Nothing resolves but loopback: Chromium's own background calls go nowhere.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&netlog).unwrap()).unwrap();
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .unwrap();
    // The browser's own requests have no origin; the page's carry its (opaque) origin.
    let from_page = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start_job))
        .filter(|e| {
            e["params"]["initiator"]
                .as_str()
                .is_some_and(|i| i != "not an origin")
        })
        .filter_map(|e| e["params"]["url"].as_str().map(String::from))
        .filter(|u| !u.starts_with("file:") && !u.starts_with("data:"))
        .collect();
    (String::from_utf8_lossy(&out.stdout).into(), from_page)
}

fn count(dom: &str, pattern: &str) -> usize {
    Regex::new(pattern).unwrap().find_iter(dom).count()
}

#[test]
fn report_html_renders_the_numbers_and_requests_nothing() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing: .ci/run installs it (apt-get install chromium)"
        );
        eprintln!("skipped: no chromium on this machine (apt-get install chromium)");
        return;
    };
    let (_rt, server) = start_mock(MockConfig {
        faults: Faults {
            cut: 0.4,
            ..Faults::default()
        },
        seed: 3,
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(24, 3, "limits: { max_attempts: 2 }\n");
    let d = bench.path();
    promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--allow-failures",
            "72",
            "--base-url",
            &server.base_url(),
            "--model",
            "small-model",
        ])
        .assert()
        .success();
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let s: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let page = run.join("report.html");

    // The control: a page with one external image shows up in the log.
    let control = d.join("control.html");
    std::fs::write(
        &control,
        "<html><body><img src=\"http://127.0.0.1:9/x.png\"></body></html>",
    )
    .unwrap();
    let (_, requested) = load(&browser, &control);
    assert_eq!(
        requested,
        vec!["http://127.0.0.1:9/x.png".to_string()],
        "the network log must see page requests"
    );

    let (dom, requested) = load(&browser, &page);
    assert!(requested.is_empty(), "report.html requested {requested:?}");
    assert!(dom.contains("default-src 'none'"), "the CSP is in force");

    // One interval per variant on the accuracy chart, at the summary's numbers.
    assert_eq!(count(&dom, r#"<g class="interval""#), 3);
    for v in &s.variants {
        let acc = v.accuracy.unwrap();
        let mark = format!(
            r#"<g class="interval" data-variant="{}" data-accuracy="{acc}" data-low="{}" data-high="{}""#,
            v.name,
            v.ci_low.unwrap(),
            v.ci_high.unwrap()
        );
        assert!(dom.contains(&mark), "missing {mark}");
        let cell = format!(r#"<td data-accuracy="{acc}">{:.1}%</td>"#, acc * 100.0);
        assert!(dom.contains(&cell), "missing {cell}");
    }
    // Latency boxes: TTFT and end to end for each variant.
    assert_eq!(count(&dom, r#"<g class="box""#), 6);
    // The verdicts, the disagreements and the failed jobs with their attempts.
    for c in &s.comparisons {
        assert!(
            dom.contains(&format!("<li>{}</li>", c.sentence.replace('\'', "&#39;")))
                || dom.contains(&c.variant)
        );
        assert!(dom.contains(c.verdict.words()));
    }
    let failed: u64 = s.variants.iter().map(|v| v.failed).sum();
    assert!(failed > 0, "the run should have failed jobs to show");
    assert_eq!(count(&dom, r#"<details class="failed-job""#) as u64, failed);
    let shown: usize = Regex::new(r#"<span id="disagreements-count">(\d+)</span>"#)
        .unwrap()
        .captures(&dom)
        .unwrap()[1]
        .parse()
        .unwrap();
    assert_eq!(count(&dom, r#"<tr data-case="#), shown);
    assert!(dom.contains(&format!("promptgauge {}", env!("CARGO_PKG_VERSION"))));
    // Every case's answers, in full, with the prompt that was sent: 24 cases, and in each
    // row a cell per variant.
    assert_eq!(count(&dom, r#"<tr data-answers="#), 24);
    assert_eq!(count(&dom, r#"<summary>answer</summary>"#), 72);
    assert_eq!(count(&dom, r#"<summary>prompt</summary>"#), 72);
    assert!(
        dom.contains("<pre>user: What is 1 + 1?</pre>"),
        "a rendered prompt"
    );
    // Showing only the cases where the variants disagree, from the link.
    let disagree = count(&dom, r#"<tr data-answers="[^"]+" class="disagree""#);
    let (only, _) = load_url(
        &browser,
        &format!("file://{}#answers=disagree", page.display()),
    );
    assert!(
        only.contains(&format!(r#"<span id="answers-count">{disagree}</span>"#)),
        "the disagreement filter did not run"
    );

    // The filter works in the browser: one case named in the link leaves one row shown.
    let first_case = Regex::new(r#"<tr data-case="([^"]+)""#)
        .unwrap()
        .captures(&dom)
        .unwrap()[1]
        .to_string();
    let (filtered, _) = load_url(
        &browser,
        &format!("file://{}#filter={first_case}", page.display()),
    );
    assert!(
        filtered.contains(r#"<span id="disagreements-count">1</span>"#),
        "filter did not run"
    );
    assert_eq!(
        count(&filtered, r#"<tr data-case="[^"]+" style="display: none;""#),
        shown - 1
    );

    // `promptgauge report` rebuilds the same page from the journal.
    let before = std::fs::read_to_string(&page).unwrap();
    std::fs::remove_file(&page).unwrap();
    promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&page).unwrap(), before);
}

#[test]
fn compare_html_renders_both_runs() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing: .ci/run installs it"
        );
        return;
    };
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(20, 2, "");
    let d = bench.path();
    for (out, model) in [("a", "large-model"), ("b", "small-model")] {
        promptgauge(d)
            .args([
                "run",
                "bench.yaml",
                "--quiet",
                "--out",
                out,
                "--base-url",
                &server.base_url(),
                "--model",
                model,
            ])
            .assert()
            .success();
    }
    let (a, b) = (
        run_dirs(&d.join("a")).pop().unwrap(),
        run_dirs(&d.join("b")).pop().unwrap(),
    );
    promptgauge(d)
        .args([
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--out",
            "cmp",
        ])
        .assert()
        .success();
    // compare.csv is compare.md's table: the same header and cells, in CSV's syntax.
    let csv = std::fs::read_to_string(d.join("cmp/compare.csv")).unwrap();
    let md = std::fs::read_to_string(d.join("cmp/compare.md")).unwrap();
    let md_rows: Vec<Vec<String>> = md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("|---"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('*').to_string())
                .collect()
        })
        .collect();
    let csv_rows: Vec<Vec<String>> = csv::Reader::from_reader(csv.as_bytes())
        .into_records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    assert_eq!(csv_rows.len(), 2, "{csv}");
    assert_eq!(md_rows[1..], csv_rows[..], "{md}\n{csv}");
    assert!(
        csv.starts_with("variant,accuracy A,accuracy B,B − A,"),
        "{csv}"
    );
    let (dom, requested) = load(&browser, &d.join("cmp/compare.html"));
    assert!(requested.is_empty(), "{requested:?}");
    assert_eq!(
        count(&dom, r#"<g class="interval""#),
        4,
        "A and B for each of 2 variants"
    );
    // The verdict table, latency, cost and outputs tables: a row per variant in each.
    assert_eq!(count(&dom, r#"<tr data-variant="#), 2 * 4);
    assert!(dom.contains("small-model") && dom.contains("large-model"));
    // The cases that flipped, with both answers, as compare.json lists them.
    let c: promptgauge::report::compare::RunComparison =
        serde_json::from_str(&std::fs::read_to_string(d.join("cmp/compare.json")).unwrap())
            .unwrap();
    let flips: usize = c.variants.iter().map(|v| v.flipped.len()).sum();
    assert!(flips > 0, "the small model answers some cases differently");
    assert_eq!(count(&dom, r#"<tr data-flip="#), flips);
    let f = &c
        .variants
        .iter()
        .find(|v| !v.flipped.is_empty())
        .unwrap()
        .flipped[0];
    assert!(dom.contains(&format!(r#"<tr data-flip="{}">"#, f.case)));
    assert!(
        dom.contains(&format!("<pre>{}</pre>", f.b)),
        "B's answer is shown"
    );
    for v in &c.variants {
        assert_eq!(v.identical_outputs + v.different_outputs, 20);
    }
    // Both runs' latency, side by side on one chart.
    assert_eq!(count(&dom, r#"<g class="box""#), 4);
}

#[test]
fn history_html_draws_every_run_and_links_to_its_report() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing: .ci/run installs it"
        );
        return;
    };
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(200, 2, "");
    let d = bench.path();
    let models = ["large-model", "large-model", "small-model", "large-model"];
    for model in models {
        promptgauge(d)
            .args([
                "run",
                "bench.yaml",
                "--quiet",
                "--base-url",
                &server.base_url(),
            ])
            // Each model priced on the command line: the bench prices none in particular.
            .args(["--model", model, "--price", "1,2"])
            .assert()
            .success();
    }
    let out = promptgauge(d)
        .args(["history", "--html", "pages/history.html"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (dom, requested) = load(&browser, &d.join("pages/history.html"));
    assert!(requested.is_empty(), "{requested:?}");
    // A point per run and variant in each of the three charts.
    assert_eq!(count(&dom, r#"<g class="point""#), 4 * 2 * 3);
    let accuracy = &dom[dom.find(r#"id="history-chart""#).unwrap()..];
    let accuracy = &accuracy[..accuracy.find("</svg>").unwrap()];
    assert_eq!(count(accuracy, r#"<g class="point""#), 4 * 2);
    // The small model's run falls, the next run rises back: both marked, nothing else.
    assert_eq!(count(accuracy, r#"data-step="▼""#), 2, "both variants fall");
    assert_eq!(count(accuracy, r#"data-step="▲""#), 2, "and rise again");
    // Each point links to its run's report.html, relative to the page, and the link works.
    let links: Vec<String> = Regex::new(r#"<a href="([^"]+)">"#)
        .unwrap()
        .captures_iter(accuracy)
        .map(|c| c[1].to_string())
        .collect();
    assert_eq!(links.len(), 4 * 2);
    for link in &links {
        assert!(
            link.starts_with("../reports/") && link.ends_with("/report.html"),
            "{link}"
        );
        assert!(d.join("pages").join(link).is_file(), "{link}");
    }
    // The table: a row per run and variant.
    assert_eq!(count(&dom, r#"<tr data-run="#), 4 * 2);
}

#[test]
fn a_grid_report_html_shows_every_cell_and_both_axes() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing: .ci/run installs it (apt-get install chromium)"
        );
        eprintln!("skipped: no chromium on this machine (apt-get install chromium)");
        return;
    };
    let bench = arithmetic_bench(
        16,
        2,
        "endpoints:\n  - { name: big, base_url: mock, model: big-model }\n  - { name: mini, base_url: mock, model: mini-model, price: { input_per_mtok: 0, output_per_mtok: 0 } }\n",
    );
    let d = bench.path();
    promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--no-store"])
        .assert()
        .success();
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let s: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let page = run.join("report.html");
    let (dom, requested) = load(&browser, &page);
    assert!(requested.is_empty(), "report.html requested {requested:?}");
    // An interval per cell on the chart, at the summary's numbers.
    assert_eq!(count(&dom, r#"<g class="interval""#), 4);
    for v in &s.variants {
        let mark = format!(
            r#"<g class="interval" data-variant="{}" data-accuracy="{}""#,
            v.name,
            v.accuracy.unwrap()
        );
        assert!(dom.contains(&mark), "missing {mark}");
    }
    // The grid: a row per variant, a column per endpoint (and its cost).
    assert!(dom.contains("<h2>Variants × endpoints</h2>"));
    for name in ["plain", "careful"] {
        assert!(dom.contains(&format!(r#"data-variant="{name}""#)), "{name}");
    }
    assert!(
        dom.contains("<th>mini cost</th>") || dom.contains(">mini cost<"),
        "the costs"
    );
    // Both axes, each with its table and sentences.
    for heading in ["Which prompt: each variant", "Which model: each endpoint"] {
        assert!(dom.contains(heading), "{heading}");
    }
    for c in &s.comparisons {
        assert!(dom.contains(&c.against), "{}", c.against);
        assert!(dom.contains(c.verdict.words()));
    }
    // The settings name both endpoints; `report` rebuilds the same page from the journal.
    assert!(
        dom.contains("endpoint big at simulated") && dom.contains("endpoint mini at simulated")
    );
    let before = std::fs::read_to_string(&page).unwrap();
    std::fs::remove_file(&page).unwrap();
    promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&page).unwrap(), before);
}

/// The receipts example's report in the browser: each thumbnail an element whose class's
/// background is a data URL holding a receipt's bytes as they are (PNG, never SVG), each
/// image once in the page, and the page asks for nothing.
#[test]
fn report_html_shows_the_thumbnails_of_the_files_an_answer_was_given() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing: .ci/run installs it (apt-get install chromium)"
        );
        eprintln!("skipped: no chromium on this machine (apt-get install chromium)");
        return;
    };
    let (_rt, server) = start_mock(MockConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let example = repo().join("examples/receipts");
    std::fs::create_dir_all(d.join("receipts")).unwrap();
    std::fs::create_dir_all(d.join("prompts")).unwrap();
    for sub in ["", "receipts", "prompts"] {
        for e in std::fs::read_dir(example.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), d.join(sub).join(e.file_name())).unwrap();
            }
        }
    }
    promptgauge(d)
        .args(["run", "receipts.yaml", "--quiet", "--no-store"])
        .args(["--base-url", &server.base_url(), "--model", "m"])
        .assert()
        .success();
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let (dom, requested) = load(&browser, &run.join("report.html"));
    assert!(requested.is_empty(), "the page asked for {requested:?}");
    let style =
        Regex::new(r#"\.(f-[0-9a-f]+)\{background-image:url\("data:(image/[a-z]+);base64,([A-Za-z0-9+/=]+)"\)\}"#)
            .unwrap();
    let mut classes = Vec::new();
    let shown: Vec<(String, Vec<u8>)> = style
        .captures_iter(&dom)
        .map(|c| {
            use base64::Engine;
            classes.push(c[1].to_string());
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&c[3])
                .unwrap();
            (c[2].to_string(), bytes)
        })
        .collect();
    assert!(!shown.is_empty(), "no thumbnail in the DOM");
    let mut distinct = classes.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), classes.len(), "each image once");
    // Every thumbnail shown is of an image the page holds.
    let thumbs = Regex::new(r#"class="thumb (f-[0-9a-f]+)""#).unwrap();
    let used: Vec<String> = thumbs
        .captures_iter(&dom)
        .map(|c| c[1].to_string())
        .collect();
    assert!(used.len() > classes.len(), "{} thumbnails", used.len());
    assert!(used.iter().all(|c| classes.contains(c)));
    let receipts: Vec<Vec<u8>> = (1..=12)
        .map(|i| std::fs::read(d.join(format!("receipts/r-{i:03}.png"))).unwrap())
        .collect();
    for (media, bytes) in &shown {
        assert_eq!(media, "image/png");
        assert!(receipts.contains(bytes), "a thumbnail that is no receipt");
    }
    assert!(!dom.contains("image/svg"));
}
