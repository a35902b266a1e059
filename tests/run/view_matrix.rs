//! `view`'s runs list at a glance and a run's matrix: over HTTP (status and gates, the
//! filters, the pages, an answer's markup shown as text), and in headless Chromium at
//! 1,400 and 800 pixels wide — no sideways scrolling, the figures and cells in sight, the
//! filters kept over a reload — with screenshots checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::view::{browser, first_run, get, refused, view};
use crate::common::*;
use promptgauge::mock::{Faults, MockConfig};

/// The text of case 3: markup a model may well write back.
const MARKUP: &str = "<script>alert(1)</script>";

/// An echo bench of `cases` cases and two variants (the simulator writes each case's text
/// back, or says it does not know): case 3's text is markup, and is its expected answer;
/// case 5 fails whatever is said; the others pass. Tags `even` and `odd`.
fn echo_bench(cases: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: String = (0..cases)
        .map(|i| {
            let text = if i == 3 {
                MARKUP.to_string()
            } else {
                format!("answer number {i} is here")
            };
            let tag = if i % 2 == 0 { "even" } else { "odd" };
            // Whatever the simulator says passes (an echo, or that it does not know), but
            // in case 3 (only its markup) and case 5 (nothing it says).
            let expected = match i {
                3 => serde_json::json!(MARKUP),
                5 => serde_json::json!("never said"),
                _ => serde_json::json!(["is here", "know"]),
            };
            let case = serde_json::json!({"id": format!("c{i:02}"), "vars": {"text": text}, "expected": expected, "tags": [tag]});
            format!("{case}\n")
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), lines).unwrap();
    std::fs::write(d.join("a.txt"), "Echo: {{ text }}").unwrap();
    std::fs::write(d.join("b.md"), "Please echo this: {{ text }}").unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        "name: echo\ncases: cases.jsonl\nvariants: [a.txt, b.md]\ngrade: { kind: contains }\nlimits: { max_attempts: 1 }\n",
    )
    .unwrap();
    dir
}

/// `run` of the bench in `d` as `model`, whatever its exit (a gate may fail it).
fn run_as(d: &Path, base_url: &str, model: &str, extra: &[&str]) {
    promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--model", model])
        .args(["--base-url", base_url])
        .args(extra)
        .output()
        .unwrap();
}

/// The case ids of a matrix page's rows, in order.
fn rows(page: &str) -> Vec<String> {
    page.split("<tr data-case=\"")
        .skip(1)
        .map(|r| r.split('"').next().unwrap().to_string())
        .collect()
}

/// Each case's scores by arm (`None`: no score), from the run's jobs as JSON.
fn scores(url: &str, id: &str) -> BTreeMap<String, Vec<Option<f64>>> {
    let (_, body) = get(url, &format!("/api/runs/{id}/jobs?limit=500"), None);
    let jobs: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut by_case: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for j in jobs["jobs"].as_array().unwrap() {
        by_case
            .entry(j["case_id"].as_str().unwrap().to_string())
            .or_default()
            .push(j["score"].as_f64());
    }
    by_case
}

#[test]
fn a_run_s_matrix_is_cases_down_arms_across_filtered_and_paged_by_the_server() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = echo_bench(12);
    let d = bench.path();
    run_as(d, &server.base_url(), "m1", &[]);
    let v = view(d, &[]);
    let (id, _) = first_run(&v, "");
    let matrix = |query: &str| {
        let (status, page) = get(&v.url, &format!("/runs/{id}/matrix?{query}"), None);
        assert_eq!(status, 200, "{query}: {page}");
        page
    };
    // Every case down, both variants across, each cell linked to its job.
    let page = matrix("");
    let all: Vec<String> = (0..12).map(|i| format!("c{i:02}")).collect();
    assert_eq!(rows(&page), all, "{page}");
    assert!(page.contains("12 of 12 cases that match, from 1 · page 1 of 1."));
    assert!(page.contains("</span>a</th>") && page.contains("</span>b</th>"));
    assert_eq!(page.matches("<td class=\"cell ").count(), 24, "{page}");
    assert!(page.contains(&format!("href=\"/runs/{id}/jobs/0\"")));
    // The case's variables and expected answer are at hand.
    assert!(page.contains("<summary>variables</summary><pre>text: answer number 5 is here</pre>"));
    assert!(page.contains("expected: is here | know"), "{page}");
    // A model's markup is text: escaped in the answer, the expected answer and the variables.
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    assert!(!page.contains(MARKUP), "{page}");
    assert!(page.matches(escaped).count() >= 2, "{page}");
    // Paged: 5 a page, the links keeping the filters.
    let page = matrix("limit=5");
    assert_eq!(rows(&page), all[..5]);
    assert!(page.contains("5 of 12 cases that match, from 1 · page 1 of 3."));
    assert!(page.contains("offset=5&amp;limit=5\">next</a>"), "{page}");
    let page = matrix("limit=5&offset=10");
    assert_eq!(rows(&page), all[10..]);
    assert!(page.contains(">previous</a>") && !page.contains(">next</a>"));
    let page = matrix("tag=odd&limit=2");
    assert!(
        page.contains("tag=odd&amp;offset=2&amp;limit=2\">next</a>"),
        "{page}"
    );
    // By tag, by words (the case id or an answer).
    let odd: Vec<String> = all.iter().skip(1).step_by(2).cloned().collect();
    assert_eq!(rows(&matrix("tag=odd")), odd);
    assert_eq!(rows(&matrix("q=c07")), ["c07"]);
    assert_eq!(rows(&matrix("q=script")), ["c03"]);
    // Failures and disagreement, as the jobs' own scores say.
    let scores = scores(&v.url, &id);
    let failing: Vec<String> = scores
        .iter()
        .filter(|(_, s)| s.iter().any(|x| x.is_none_or(|x| x < 1.0)))
        .map(|(c, _)| c.clone())
        .collect();
    let disagreeing: Vec<String> = scores
        .iter()
        .filter(|(_, s)| {
            let graded: Vec<f64> = s.iter().flatten().copied().collect();
            graded.iter().any(|x| graded.iter().any(|y| x != y))
        })
        .map(|(c, _)| c.clone())
        .collect();
    assert!(failing.contains(&"c05".to_string()), "{scores:?}");
    assert!(!disagreeing.contains(&"c05".to_string()) && failing.len() < 12);
    assert_eq!(rows(&matrix("failing=1")), failing, "{scores:?}");
    assert_eq!(rows(&matrix("disagreeing=1")), disagreeing, "{scores:?}");
    // Refused, saying why.
    let path = |q: &str| format!("/runs/{id}/matrix?{q}");
    refused(
        &v,
        &path("tag=nope"),
        "tag=nope: this run has no such tag (it has: even, odd)",
    );
    refused(&v, &path("limit=many"), "limit");
    // A page holds 1 to 200 cases: outside that, refused (not cut to fit).
    refused(
        &v,
        &path("limit=0"),
        "limit=0: a matrix page holds 1 to 200 cases",
    );
    refused(
        &v,
        &path("limit=500"),
        "limit=500: a matrix page holds 1 to 200 cases",
    );
    let page = matrix("limit=200");
    assert_eq!(rows(&page), all);
    assert!(page.contains("12 of 12 cases that match, from 1 · page 1 of 1."));
    assert_eq!(rows(&matrix("limit=1")), all[..1]);
    refused(&v, &path("colour=red"), "unknown parameter");
    assert_eq!(get(&v.url, "/runs/no-such-run/matrix", None).0, 404);
    // Linked from the run's page and from the runs list.
    let link = format!("href=\"/runs/{id}/matrix\"");
    assert!(get(&v.url, &format!("/runs/{id}/"), None).1.contains(&link));
    assert!(get(&v.url, "/", None).1.contains(&link));
}

#[test]
fn the_runs_list_shows_status_gates_and_figures_at_a_glance_and_filters_by_status() {
    let (_rt, server) = start_mock(MockConfig::default());
    let (_rt2, broken) = start_mock(MockConfig {
        faults: Faults {
            cut: 1.0,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let bench = echo_bench(6);
    let d = bench.path();
    run_as(d, &server.base_url(), "good", &["--min-accuracy", "0.99"]);
    run_as(d, &broken.base_url(), "broken", &[]);
    let v = view(d, &[]);
    let (_, page) = get(&v.url, "/", None);
    // Newest first: the broken run, every job of it failed; then the one whose gate failed.
    let broken_at = page.find(">broken<").unwrap();
    let good_at = page.find(">good<").unwrap();
    assert!(broken_at < good_at, "{page}");
    let (older, newer) = (&page[good_at..], &page[broken_at..good_at]);
    assert!(newer.contains("<span class=\"badge failed\""), "{newer}");
    assert!(older.contains(">finished</span>"), "{older}");
    assert!(older.contains(">gate failed</span>"), "{older}");
    // Each arm's figure as an interval bar, with its numbers.
    let bars = older.split("</tr>").next().unwrap();
    assert_eq!(bars.matches("<div class=\"fig\">").count(), 2, "{bars}");
    assert_eq!(
        bars.matches("stroke-linecap=\"round\"").count(),
        2,
        "{bars}"
    );
    // The status filter takes the badges' words.
    let (_, finished) = get(&v.url, "/?status=finished", None);
    assert!(finished.contains(">good<") && !finished.contains(">broken<"));
    let (_, failed) = get(&v.url, "/?status=failed", None);
    assert!(failed.contains(">broken<") && !failed.contains(">good<"));
    assert!(
        failed.contains("<option value=\"failed\" selected>"),
        "{failed}"
    );
}

/// A PNG's width and height, from its header.
fn png_size(png: &[u8]) -> (u32, u32) {
    let at = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    (at(16), at(20))
}

#[test]
fn in_a_real_browser_the_runs_list_and_the_matrix_fit_1400_and_800_pixels() {
    if browser::missing() {
        return;
    }
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = echo_bench(60);
    let d = bench.path();
    run_as(d, &server.base_url(), "m1", &[]);
    run_as(d, &server.base_url(), "m2", &["--min-accuracy", "0.99"]);
    let v = view(d, &[]);
    let (id, _) = first_run(&v, "model=m1");
    let base = v.base();
    let b = browser::Browser::start();
    let shots = tempfile::tempdir().unwrap();
    let fits = |what: &str| {
        let sizes = b.script(
            "return [document.documentElement.scrollWidth, window.innerWidth, document.body.scrollWidth]",
        );
        let (page, window) = (sizes[0].as_u64().unwrap(), sizes[1].as_u64().unwrap());
        assert!(
            page <= window,
            "{what}: the page is {page} px wide in a {window} px window"
        );
        assert!(sizes[2].as_u64().unwrap() <= window, "{what}: {sizes}");
        window as u32
    };
    // Whether every element `css` selects lies within the window's width.
    let in_sight = |css: &str| {
        b.script(&format!(
            "var all=[...document.querySelectorAll('{css}')];return all.length>0&&all.every(function(e){{var r=e.getBoundingClientRect();return r.width>0&&r.left>=0&&r.right<=window.innerWidth;}})"
        ))
        .as_bool()
            == Some(true)
    };
    b.go(&v.url);
    for width in [1400, 800] {
        b.resize(width, 900);
        b.go(&format!("{base}/"));
        b.wait_until("#runs tbody", |t| t.contains("m1") && t.contains("m2"));
        let window = fits(&format!("the runs at {width} px"));
        assert!(
            window <= width && window + 100 > width,
            "{window} px inside {width}"
        );
        assert!(
            in_sight("#runs .fig svg"),
            "the interval bars at {width} px"
        );
        assert!(in_sight("#runs .badge"), "the badges at {width} px");
        let png = b.png();
        assert_eq!(png_size(&png).0, window, "the runs at {width} px");
        std::fs::write(shots.path().join(format!("runs-{width}.png")), &png).unwrap();
        b.screenshot(&format!("view-runs-{width}.png"));
        b.go(&format!("{base}/runs/{id}/matrix"));
        b.wait_until("#count", |t| t.contains("of 60 cases that match"));
        let window = fits(&format!("the matrix at {width} px"));
        assert!(
            in_sight("#matrix tr:first-child td.cell"),
            "cells at {width} px"
        );
        let png = b.png();
        assert_eq!(png_size(&png).0, window, "the matrix at {width} px");
        std::fs::write(shots.path().join(format!("matrix-{width}.png")), &png).unwrap();
        b.screenshot(&format!("view-matrix-{width}.png"));
    }
    // The filters live in the URL: ticked, sent, and still there after a reload.
    b.click("input[name=failing]");
    b.type_into("input[name=q]", "number");
    b.click("form[method=get] button");
    b.wait_until("#count", |t| !t.contains("of 60 cases"));
    let count = b.text("#count");
    assert!(
        b.url().contains("failing=1") && b.url().contains("q=number"),
        "{}",
        b.url()
    );
    b.reload();
    b.wait_until("#count", |t| t == count);
    let kept = b.script(
        "return [document.querySelector('input[name=failing]').checked, document.querySelector('input[name=q]').value]",
    );
    assert_eq!(kept, serde_json::json!([true, "number"]));
    // Each row shown has an arm that did not pass.
    let passing_rows = b.script(
        "return [...document.querySelectorAll('#matrix tbody tr')].filter(function(r){return r.querySelectorAll('td.cell.ok').length===r.querySelectorAll('td.cell').length}).length",
    );
    assert_eq!(passing_rows, serde_json::json!(0));
    // The runs list's filter survives a reload too.
    b.go(&format!("{base}/?status=finished&q=m2"));
    b.reload();
    b.wait_until("#runs tbody", |t| t.contains("m2") && !t.contains("m1"));
    let chosen = b.script("return document.querySelector('select[name=status]').value");
    assert_eq!(chosen, serde_json::json!("finished"));
    let seen: BTreeSet<String> = std::fs::read_dir(shots.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(seen.len(), 4, "{seen:?}");
}

#[test]
fn a_matrix_of_several_endpoints_puts_each_endpoint_s_variants_under_its_name() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = echo_bench(4);
    let d = bench.path();
    let url = server.base_url();
    let endpoints = format!(
        "endpoints:\n  - {{ name: hosted, base_url: \"{url}\", model: big }}\n  - {{ name: local, base_url: \"{url}\", model: small }}\nrepeats: 2\n"
    );
    let text = std::fs::read_to_string(d.join("bench.yaml")).unwrap() + &endpoints;
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    promptgauge(d)
        .args(["run", "bench.yaml", "--quiet"])
        .assert()
        .success();
    let v = view(d, &[]);
    let (id, _) = first_run(&v, "");
    let (status, page) = get(&v.url, &format!("/runs/{id}/matrix"), None);
    assert_eq!(status, 200, "{page}");
    // Two endpoints of two variants each: four columns under two names.
    let head = page.split("<tbody>").next().unwrap();
    assert!(
        head.contains(
            "<th rowspan=\"2\">case</th><th colspan=\"2\">hosted</th><th colspan=\"2\">local</th>"
        ),
        "{head}"
    );
    assert_eq!(head.matches("class=\"swatch\"").count(), 4, "{head}");
    // A row is a case and repeat: 4 cases × 2 repeats, each with its 4 arms' answers.
    assert_eq!(rows(&page).len(), 8, "{page}");
    assert!(page.contains("repeat 2</span>"), "{page}");
    assert_eq!(page.matches("<td class=\"cell ").count(), 32, "{page}");
}

#[test]
fn a_partial_score_s_cell_names_the_parts_that_fell_short_and_the_runs_list_names_its_figure() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = echo_bench(6);
    let d = bench.path();
    run_as(d, &server.base_url(), "whole", &[]);
    // The same bench scored in two parts: what the answer contains, and a check no answer
    // passes, named with markup.
    let text = std::fs::read_to_string(d.join("bench.yaml")).unwrap().replace(
        "grade: { kind: contains }",
        "grade: { kind: mean, of: [{ kind: contains }, { name: \"<i>long</i>\", kind: expr, expr: \"output|length > 100000\" }] }",
    );
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    run_as(d, &server.base_url(), "parted", &[]);
    let v = view(d, &[]);
    let (id, _) = first_run(&v, "model=parted");
    let (status, page) = get(&v.url, &format!("/runs/{id}/matrix"), None);
    assert_eq!(status, 200, "{page}");
    // Every cell says the failing part by name, as text, with its score; a cell whose
    // `contains` failed too names both.
    let cells: Vec<&str> = page.split("<td class=\"cell ").skip(1).collect();
    assert_eq!(cells.len(), 12, "{page}");
    let named = "<span class=\"no\">✗ &lt;i&gt;long&lt;/i&gt; 0.00</span>";
    assert!(cells.iter().all(|c| c.contains(named)), "{page}");
    assert!(!page.contains("<i>long</i>"), "{page}");
    assert!(
        cells
            .iter()
            .any(|c| c.contains(&format!("1 of 2 parts below 1: {named}</div>"))),
        "{page}"
    );
    let c05 = page.split("<tr data-case=\"c05\"").nth(1).unwrap();
    assert!(
        c05.contains("2 of 2 parts below 1: <span class=\"no\">✗ contains 0.00</span>"),
        "{c05}"
    );
    // A whole score's cells name no part.
    let (whole, _) = first_run(&v, "model=whole");
    let (_, page) = get(&v.url, &format!("/runs/{whole}/matrix"), None);
    assert!(!page.contains("parts below 1"), "{page}");
    // The runs list says which figure each run's bars are: a mean score, or an accuracy.
    let (_, list) = get(&v.url, "/", None);
    let row = |model: &str| {
        let at = list.find(&format!(">{model}<")).unwrap();
        let start = list[..at].rfind("<tr>").unwrap();
        list[start..].split("</tr>").next().unwrap().to_string()
    };
    let parted = row("parted");
    assert!(
        parted.contains("<div class=\"measure muted\">mean score</div>"),
        "{parted}"
    );
    assert!(parted.contains("aria-label=\"a: mean score with its interval\""));
    let whole = row("whole");
    assert!(
        whole.contains("<div class=\"measure muted\">accuracy</div>"),
        "{whole}"
    );
}
