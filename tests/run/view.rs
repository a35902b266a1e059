//! `promptgauge view` over HTTP, a real server on a free port: the runs list and its
//! filters, a run's report, and the refusals that keep it safe (a foreign Host, a path
//! outside the run folders, a non-loopback bind without --public, a public server without
//! its token).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};

use crate::common::*;
use promptgauge::mock::MockConfig;

/// A `view` process and the URL it printed.
struct View {
    child: Child,
    url: String,
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn view(d: &Path, args: &[&str]) -> View {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .current_dir(d)
        .args(["view", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("promptgauge view: ")
        .unwrap_or_else(|| panic!("no URL: {line:?}"))
        .to_string();
    View { child, url }
}

/// `GET path` with a `Host` header: (status, body).
fn get(url: &str, path: &str, host: Option<&str>) -> (u16, String) {
    let address = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut stream = TcpStream::connect(&address).unwrap();
    let host = host.unwrap_or(&address);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Two recorded runs of the arithmetic bench on the simulator, one per model.
fn recorded() -> tempfile::TempDir {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(6, 2, "");
    for model in ["alpha", "beta"] {
        let out = promptgauge(bench.path())
            .args([
                "run",
                "bench.yaml",
                "--quiet",
                "--base-url",
                &server.base_url(),
            ])
            .args(["--model", model])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    bench
}

#[test]
fn view_lists_the_runs_filters_them_and_serves_each_report() {
    let bench = recorded();
    let d = bench.path();
    let v = view(d, &[]);
    assert!(v.url.starts_with("http://127.0.0.1:"), "{}", v.url);
    let (status, page) = get(&v.url, "/", None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("2 runs") && page.contains("alpha") && page.contains("beta"));
    // Filtered by model, server-side, in the page and as JSON.
    let (_, page) = get(&v.url, "/?model=beta", None);
    assert!(
        page.contains("1 run") && !page.contains(">alpha<"),
        "{page}"
    );
    let (status, json) = get(&v.url, "/api/runs?q=alpha", None);
    assert_eq!(status, 200);
    let runs: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{json}");
    assert_eq!(runs[0]["model"], "alpha");
    // A run's report, as report.html is.
    let id = runs[0]["run_id"].as_str().unwrap();
    let (status, report) = get(&v.url, &format!("/runs/{id}/"), None);
    assert_eq!(status, 200);
    let on_disk =
        std::fs::read_to_string(Path::new(runs[0]["folder"].as_str().unwrap()).join("report.html"))
            .unwrap();
    assert_eq!(report, on_disk);
    let (status, summary) = get(&v.url, &format!("/runs/{id}/summary.json"), None);
    assert_eq!(status, 200);
    assert!(summary.contains("\"variants\""));
}

#[test]
fn view_refuses_foreign_hosts_paths_outside_the_runs_and_an_open_bind() {
    let bench = recorded();
    let d = bench.path();
    let v = view(d, &[]);
    // DNS rebinding: a page elsewhere whose name resolves to 127.0.0.1.
    let (status, _) = get(&v.url, "/", Some("evil.example:8741"));
    assert_eq!(status, 403);
    let (status, _) = get(&v.url, "/api/runs", Some("evil.example"));
    assert_eq!(status, 403);
    // Only a run's own reports, by name: nothing else of its folder, nothing outside it.
    let (_, json) = get(&v.url, "/api/runs", None);
    let runs: serde_json::Value = serde_json::from_str(&json).unwrap();
    let id = runs[0]["run_id"].as_str().unwrap().to_string();
    for path in [
        format!("/runs/{id}/results.jsonl"),
        format!("/runs/{id}/run.json"),
        format!("/runs/{id}/..%2F..%2Fbench.yaml"),
        format!("/runs/{id}/../../bench.yaml"),
        "/runs/..%2F..%2Fetc/passwd".to_string(),
        "/../../etc/passwd".to_string(),
        "/runs/no-such-run/report.html".to_string(),
    ] {
        let (status, body) = get(&v.url, &path, None);
        assert!(status == 404 || status == 400, "{path}: {status} {body}");
        assert!(
            !body.contains("root:") && !body.contains("cases.jsonl"),
            "{path}"
        );
    }
    drop(v);
    // Another address than loopback: refused before anything listens.
    let out = promptgauge(d)
        .args(["view", "--port", "0", "--bind", "0.0.0.0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("not a loopback address") && said.contains("--public"),
        "{said}"
    );
    // With --public: every request needs the token it printed.
    let v = view(d, &["--bind", "0.0.0.0", "--public"]);
    let token = v.url.split("token=").nth(1).unwrap().to_string();
    assert_eq!(token.len(), 32);
    let (status, _) = get(&v.url, "/", None);
    assert_eq!(status, 401);
    let (status, page) = get(&v.url, &format!("/?token={token}"), None);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&format!("token={token}")),
        "links carry the token"
    );
}

#[test]
fn a_run_s_answers_are_filtered_and_paged_by_the_server() {
    let bench = recorded();
    let d = bench.path();
    let v = view(d, &[]);
    let (_, json) = get(&v.url, "/api/runs?model=alpha", None);
    let runs: serde_json::Value = serde_json::from_str(&json).unwrap();
    let id = runs[0]["run_id"].as_str().unwrap().to_string();
    let jobs = |query: &str| -> serde_json::Value {
        let (status, body) = get(&v.url, &format!("/api/runs/{id}/jobs?{query}"), None);
        assert_eq!(status, 200, "{query}: {body}");
        serde_json::from_str(&body).unwrap()
    };
    // 6 cases × 2 variants; the careful variant's, three at a time.
    let all = jobs("");
    assert_eq!(all["matched"], 12);
    let first = jobs("variant=careful&limit=3");
    assert_eq!(first["matched"], 6);
    let page: Vec<&serde_json::Value> = first["jobs"].as_array().unwrap().iter().collect();
    assert_eq!(page.len(), 3);
    assert!(page.iter().all(|j| j["variant"] == "careful"));
    let second = jobs("variant=careful&limit=3&offset=3");
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["case_id"].as_str().unwrap().to_string())
            .collect()
    };
    let (a, b) = (ids(&first), ids(&second));
    assert_eq!(b.len(), 3);
    assert!(a.iter().all(|c| !b.contains(c)), "{a:?} {b:?}");
    // By case id or answer text, by score, by status, by tag.
    assert_eq!(jobs("q=add-01")["matched"], 2);
    assert_eq!(jobs("status=failed")["matched"], 0);
    assert_eq!(jobs("tag=add")["matched"], 12);
    assert_eq!(jobs("tag=nope")["matched"], 0);
    let right = jobs("min=1")["matched"].as_u64().unwrap();
    let wrong = jobs("max=0")["matched"].as_u64().unwrap();
    assert_eq!(right + wrong, 12);
    let (status, _) = get(&v.url, "/api/runs/no-such-run/jobs", None);
    assert_eq!(status, 404);
}

#[test]
fn a_run_s_answers_page_pages_and_filters() {
    let bench = recorded();
    let d = bench.path();
    let v = view(d, &[]);
    let (_, json) = get(&v.url, "/api/runs?model=alpha", None);
    let runs: serde_json::Value = serde_json::from_str(&json).unwrap();
    let id = runs[0]["run_id"].as_str().unwrap().to_string();
    let (status, page) = get(&v.url, &format!("/runs/{id}/answers?limit=5"), None);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("5 of 12 answers that match, from 1."),
        "{page}"
    );
    assert!(
        page.contains("offset=5") && page.contains(">next<"),
        "{page}"
    );
    let (_, page) = get(
        &v.url,
        &format!("/runs/{id}/answers?variant=careful&q=add-02"),
        None,
    );
    assert!(page.contains("1 of 1 answers"), "{page}");
    assert!(
        page.contains("add-02") && !page.contains("add-03"),
        "{page}"
    );
}
