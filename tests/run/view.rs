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
pub(super) struct View {
    child: Child,
    pub(super) url: String,
}

impl View {
    /// The server's address without the token (the browser keeps it in a cookie after the
    /// first page, so later pages are addressed without it).
    pub(super) fn base(&self) -> String {
        let url = self.url.split('?').next().unwrap_or(&self.url);
        url.trim_end_matches('/').to_string()
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn view(d: &Path, args: &[&str]) -> View {
    view_with(d, args, &[])
}

/// [`view`] with these environment variables set.
fn view_with(d: &Path, args: &[&str], env: &[(&str, &str)]) -> View {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"))
        .current_dir(d)
        .args(["view", "--port", "0"])
        .args(args)
        .envs(env.iter().copied())
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
pub(super) fn get(url: &str, path: &str, host: Option<&str>) -> (u16, String) {
    let (status, _, body) = request(url, "GET", path, &[("Host", host)], "");
    (status, body)
}

/// One HTTP request; `None` headers take the server's own address (`Host`) or are left
/// out. The token of the URL goes in `x-promptgauge-token` unless the headers name it
/// (`None`: sent without): (status, response headers, body).
fn request(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, Option<&str>)],
    body: &str,
) -> (u16, String, String) {
    let address = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut stream = TcpStream::connect(&address).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    let mut host_given = false;
    if let Some(token) = url.split("token=").nth(1)
        && !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("x-promptgauge-token"))
    {
        head.push_str(&format!("x-promptgauge-token: {token}\r\n"));
    }
    for (name, value) in headers {
        match (name.eq_ignore_ascii_case("host"), value) {
            (true, Some(v)) => {
                host_given = true;
                head.push_str(&format!("Host: {v}\r\n"));
            }
            (_, Some(v)) => head.push_str(&format!("{name}: {v}\r\n")),
            _ => {}
        }
    }
    if !host_given {
        head.push_str(&format!("Host: {address}\r\n"));
    }
    if method != "GET" {
        head.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    write!(stream, "{head}\r\n{body}").unwrap();
    // Bytes, as a served file's are not text: shown as text, invalid bytes replaced.
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let response = String::from_utf8_lossy(&raw).into_owned();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (status, head.to_string(), body.to_string())
}

/// `GET path` is a 400 whose words include `said`.
pub(super) fn refused(v: &View, path: &str, said: &str) {
    let (status, body) = get(&v.url, path, None);
    assert_eq!(status, 400, "{path}: {body}");
    assert!(body.contains(said), "{path}: {body}");
}

/// Two recorded runs of the arithmetic bench on the simulator, one per model.
fn recorded() -> tempfile::TempDir {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = arithmetic_bench(6, 2, "");
    for model in ["alpha", "beta"] {
        run_on(bench.path(), &server.base_url(), model, &[]);
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
    for (query, said) in [
        (
            "status=bogus",
            "status=bogus: give complete, stopped or failed",
        ),
        ("since=yesterday", "since=yesterday: give a day"),
        ("limit=abc", "limit"),
    ] {
        refused(&v, &format!("/?{query}"), said);
    }
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
    // report.html as the run wrote it, with the application's links after <body>.
    let nav_start = report.find("<nav>").unwrap();
    let nav_end = report.find("</nav>").unwrap() + "</nav>".len();
    assert!(report[nav_start..nav_end].contains("/answers"));
    assert_eq!(
        format!("{}{}", &report[..nav_start], &report[nav_end..]),
        on_disk
    );
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
    let (id, _) = first_run(&v, "");
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
    // Another loopback address: the URL printed is the one it listens on, and it answers
    // requests for it.
    let v = view(d, &["--bind", "127.0.0.2"]);
    assert!(v.url.starts_with("http://127.0.0.2:"), "{}", v.url);
    let (status, _) = get(&v.url, "/", None);
    assert_eq!(status, 200);
    drop(v);
    // With --public: every request needs the token it printed.
    let v = view(d, &["--bind", "0.0.0.0", "--public", "--insecure-http"]);
    let token = v.url.split("token=").nth(1).unwrap().to_string();
    assert_eq!(token.len(), 32);
    let bare = ("x-promptgauge-token", None);
    let (status, _, _) = request(&v.url, "GET", "/", &[bare], "");
    assert_eq!(status, 401);
    let (status, _, page) = request(&v.url, "GET", &format!("/?token={token}"), &[bare], "");
    assert_eq!(status, 200, "{page}");
    // The browser keeps it (HttpOnly, this site only): every link works without it.
    let (status, head, _) = request(&v.url, "GET", &format!("/?token={token}"), &[bare], "");
    assert_eq!(status, 200);
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect("the token is set as a cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let (status, _, _) = request(
        &v.url,
        "GET",
        "/api/runs",
        &[("Cookie", Some(pair)), bare],
        "",
    );
    assert_eq!(status, 200);
    let wrong = format!("{}=0123", pair.split('=').next().unwrap());
    let (status, _, _) = request(
        &v.url,
        "GET",
        "/api/runs",
        &[("Cookie", Some(&wrong)), bare],
        "",
    );
    assert_eq!(status, 401);
}

#[test]
fn a_run_s_answers_are_filtered_and_paged_by_the_server() {
    let bench = recorded();
    let d = bench.path();
    let v = view(d, &[]);
    let (id, _) = first_run(&v, "model=alpha");
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
    let (status, body) = get(&v.url, &format!("/api/runs/{id}/jobs?tag=nope"), None);
    assert_eq!(status, 400, "a tag the run has not: said, {body}");
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
    let (id, _) = first_run(&v, "model=alpha");
    let (status, page) = get(&v.url, &format!("/runs/{id}/answers?limit=5"), None);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("5 of 12 answers that match, from 1 (12 planned jobs have a record)."),
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

/// The judged arithmetic bench: the simulator's judge scores each answer.
fn judged(cases: usize, variants: usize) -> tempfile::TempDir {
    let bench = arithmetic_bench(cases, variants, "");
    let d = bench.path();
    let text = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace("grade: { kind: number }", "grade: { kind: judge }");
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    bench
}

/// `run` of the bench in `d` as `model` at `base_url` (with `extra` flags), which succeeds.
fn run_on(d: &Path, base_url: &str, model: &str, extra: &[&str]) {
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--quiet", "--model", model])
        .args(["--base-url", base_url])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(super) fn first_run(v: &View, query: &str) -> (String, String) {
    let (_, json) = get(&v.url, &format!("/api/runs?{query}"), None);
    let runs: serde_json::Value = serde_json::from_str(&json).unwrap();
    (
        runs[0]["run_id"].as_str().unwrap().to_string(),
        runs[0]["folder"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_job_s_page_shows_its_whole_record_and_disagreeing_answers_filter() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = judged(6, 2);
    let d = bench.path();
    run_on(d, &server.base_url(), "alpha", &[]);
    let v = view(d, &[]);
    let (id, folder) = first_run(&v, "");
    let records = journal(Path::new(&folder));
    // Cases whose two variants scored differently, from the journal itself.
    let score = |case: &str, variant: &str| {
        records
            .iter()
            .find(|r| r["case_id"] == case && r["variant"] == variant)
            .map(|r| r["score"].as_f64())
    };
    let split = (1..=6)
        .map(|i| format!("add-{i:02}"))
        .filter(|c| score(c, "plain") != score(c, "careful"))
        .count();
    assert!(split > 0, "the simulator's variants disagree somewhere");
    let (status, body) = get(&v.url, &format!("/api/runs/{id}/jobs?disagreeing=1"), None);
    assert_eq!(status, 200);
    let page: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(page["matched"], 2 * split as u64, "{body}");
    // A job's page: the prompt sent, its attempts, the judge's call and reason, the answer.
    let r = &records[0];
    let (status, job) = get(&v.url, &format!("/runs/{id}/jobs/{}", r["job"]), None);
    assert_eq!(status, 200, "{job}");
    let question = r["case_id"].as_str().unwrap().trim_start_matches("add-");
    let n: u32 = question.parse().unwrap();
    assert!(
        job.contains(&format!("What is {n} + {n}?")),
        "the prompt: {job}"
    );
    assert!(job.contains("id=\"attempts\"") && job.contains("<td>200</td>"));
    assert!(
        job.contains("Judge calls (1)") && job.contains("reply:"),
        "{job}"
    );
    let answer = crate::view::html_escaped(r["output"].as_str().unwrap());
    assert!(job.contains(&answer), "{job}");
    // Its prompt is rendered from its case read alone, and only while that case is what
    // the run sent: another case changed does not matter, this one changed hides it.
    let cases = d.join("cases.jsonl");
    let text = std::fs::read_to_string(&cases).unwrap();
    let other = if n == 1 { 2 } else { 1 };
    let edit = |from: String, to: String| {
        std::fs::write(&cases, text.replace(&from, &to)).unwrap();
    };
    edit(
        format!("What is {other} + {other}?"),
        format!("What is {other} plus {other}?"),
    );
    let (_, job) = get(&v.url, &format!("/runs/{id}/jobs/{}", r["job"]), None);
    assert!(job.contains("<pre id=\"prompt\">"), "{job}");
    edit(
        format!("What is {n} + {n}?"),
        format!("What is {n} plus {n}?"),
    );
    let (status, job) = get(&v.url, &format!("/runs/{id}/jobs/{}", r["job"]), None);
    assert_eq!(status, 200);
    assert!(
        !job.contains("<pre id=\"prompt\">") && job.contains("cannot be rendered again"),
        "a changed case's prompt is not shown as the one sent: {job}"
    );
    std::fs::write(&cases, &text).unwrap();
    let (status, _) = get(&v.url, &format!("/runs/{id}/jobs/99999"), None);
    assert_eq!(status, 404);
    // A bad filter is said, not guessed at.
    for (query, said) in [
        ("min=high", "min=high: give a score from 0 to 1"),
        ("min=2", "min=2: give a score from 0 to 1"),
        ("min=NaN", "min=NaN"),
        ("min=0.5&max=0.2", "is above max"),
        (
            "variant=nope",
            "variant=nope: this run has no such variant (it has: ",
        ),
        ("disagree=1", "unknown parameter `disagree`"),
        ("offset=-5", "offset"),
    ] {
        refused(&v, &format!("/api/runs/{id}/jobs?{query}"), said);
    }
    let (status, body) = get(&v.url, &format!("/runs/{id}/jobs/-1"), None);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no such job"), "{body}");
    // A run's page is at its folder-like address; without the slash it is sent there.
    let (status, head, _) = request(&v.url, "GET", &format!("/runs/{id}"), &[], "");
    assert_eq!(status, 308, "{head}");
    assert!(head.contains(&format!("location: /runs/{id}/")), "{head}");
    // The store records the run, its folder is gone: said on every page of it.
    std::fs::rename(&folder, format!("{folder}.moved")).unwrap();
    for page in ["/", "/answers", "/jobs/0", "/label"] {
        let (status, body) = get(&v.url, &format!("/runs/{id}{page}"), None);
        assert_eq!(status, 404, "{page}: {body}");
        assert!(
            body.contains("its folder") && body.contains("is gone"),
            "{body}"
        );
        assert!(!body.contains("os error"), "{body}");
    }
}

/// Text as the pages escape it.
pub(crate) fn html_escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A job's page shows the files its request carried (the receipt as a thumbnail, each by
/// name, size and hash), and serves each file with the type its bytes are — while its bytes
/// are still the ones sent.
#[test]
fn a_job_s_page_shows_and_serves_the_files_it_was_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in [
        "receipts.yaml",
        "cases.jsonl",
        "prompts/plain.txt",
        "prompts/photo-first.yaml",
        "prompts/no-photo.yaml",
        "receipts/r-001.png",
    ] {
        let to = d.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join("examples/receipts").join(f), to).unwrap();
    }
    // One case: the first receipt.
    let cases = std::fs::read_to_string(d.join("cases.jsonl")).unwrap();
    std::fs::write(d.join("cases.jsonl"), cases.lines().next().unwrap()).unwrap();
    std::fs::rename(d.join("receipts.yaml"), d.join("bench.yaml")).unwrap();
    run_on(d, &server.base_url(), "m", &[]);
    let v = view(d, &[]);
    let (id, _) = first_run(&v, "");
    // Job 0: the case at the baseline, `plain`, which places the receipt.
    let (status, page) = get(&v.url, &format!("/runs/{id}/jobs/0"), None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Files sent"), "{page}");
    assert!(page.contains("url(\"data:image/png;base64,"), "{page}");
    assert!(page.contains("class=\"thumb f-"), "{page}");
    assert!(
        page.contains("receipts/r-001.png</a> — a PNG image, 140 bytes, sha256 "),
        "{page}"
    );
    let (status, head, body) = request(
        &v.url,
        "GET",
        &format!("/runs/{id}/jobs/0/files/0"),
        &[("Host", None)],
        "",
    );
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_lowercase().contains("content-type: image/png"),
        "{head}"
    );
    assert!(
        head.to_lowercase()
            .contains("x-content-type-options: nosniff"),
        "{head}"
    );
    assert!(body.starts_with("\u{FFFD}PNG"), "the PNG's bytes");
    // The no-photo variant's job carried none; a file changed since is not served.
    let (_, none) = get(&v.url, &format!("/runs/{id}/jobs/2"), None);
    assert!(!none.contains("Files sent"), "{none}");
    std::fs::write(d.join("receipts/r-001.png"), b"\x89PNG\r\n\x1a\nother").unwrap();
    let (status, body) = get(&v.url, &format!("/runs/{id}/jobs/0/files/0"), None);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no longer the ones sent"), "{body}");
}

#[test]
fn compare_and_history_pages_say_what_the_commands_say() {
    let bench = recorded();
    let d = bench.path();
    let v = view(d, &[]);
    let (a, folder_a) = first_run(&v, "model=alpha");
    let (b, folder_b) = first_run(&v, "model=beta");
    let (status, page) = get(&v.url, &format!("/compare?run={b}&run={a}"), None);
    assert_eq!(status, 200, "{page}");
    // The same comparison `compare` writes, word for word.
    let out = promptgauge(d)
        .args(["compare", &folder_a, &folder_b, "--out", "cmp"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let written = std::fs::read_to_string(d.join("cmp/compare.html")).unwrap();
    let verdicts = |html: &str| {
        let start = html.find("<table").unwrap();
        html[start..].split("</table>").next().unwrap().to_string()
    };
    assert_eq!(verdicts(&page), verdicts(&written));
    // Neither a run the store does not hold nor a folder by its path.
    let (status, _) = get(&v.url, &format!("/compare?a={a}&b=..%2F..%2Fetc"), None);
    assert_eq!(status, 404);
    let (status, _) = get(&v.url, "/compare?run=only-one", None);
    assert_eq!(status, 400);
    // History: history.html's page for the bench, each run linked to its page here.
    let (status, page) = get(&v.url, "/history/arithmetic", None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("arithmetic — history"), "{page}");
    assert!(page.contains(&format!("/runs/{a}/")), "{page}");
    let (status, _) = get(&v.url, "/history/no-such-bench", None);
    assert_eq!(status, 404);
}

/// The cells of the parts table's row for `part` and `arm` (names as the bench gives
/// them), as text.
fn part_row(page: &str, part: &str, arm: &str) -> Vec<String> {
    let start = format!(
        "<tr data-part=\"{}\" data-variant=\"{}\">",
        html_escaped(part),
        html_escaped(arm)
    );
    let at = page
        .find(&start)
        .unwrap_or_else(|| panic!("no parts row {start}: {page}"));
    let row = page[at..].split("</tr>").next().unwrap();
    row.split("<td")
        .skip(1)
        .map(|c| {
            let c = &c[c.find('>').unwrap() + 1..];
            c.split("</td>").next().unwrap().to_string()
        })
        .collect()
}

/// `x` as the pages show a share: `62.5%`.
fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A run whose score has named parts: its page holds a Parts table with each part's mean
/// per variant as the journal adds up, its interval and its verdict against the baseline,
/// the names escaped; the compare page sets both runs' figures side by side; the history
/// page draws a chart per part.
#[test]
fn a_run_with_parts_shows_each_part_per_variant_and_compare_shows_both_runs() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = parts_bench(8, 2);
    let d = bench.path();
    for model in ["alpha", "beta"] {
        run_on(d, &server.base_url(), model, &[]);
    }
    let v = view(d, &[]);
    let (a, folder_a) = first_run(&v, "model=alpha");
    let (b, folder_b) = first_run(&v, "model=beta");
    let (status, page) = get(&v.url, &format!("/runs/{a}/"), None);
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page.matches("id=\"parts\"").count(),
        1,
        "the run page's parts table takes the place of the report's: {page}"
    );
    assert!(page.contains("<a href=\"#parts\">Parts</a>"), "{page}");
    assert!(
        !page.contains("has <1>"),
        "a part's name is text, never markup"
    );
    let means = part_means(Path::new(&folder_a));
    assert_eq!(means.len(), 4, "two parts, two variants: {means:?}");
    for ((part, arm), mean) in &means {
        let cells = part_row(&page, part, arm);
        assert_eq!(cells[0], html_escaped(part));
        // The cases the part scored, on its first arm's row.
        let cases = if arm == "plain" { "8" } else { "" };
        assert_eq!(cells[1], cases, "{part} {arm}: {cells:?}");
        assert_eq!(cells[3], percent(*mean), "{part} {arm}: {cells:?}");
        assert!(cells[4].starts_with('['), "{cells:?}");
        assert_eq!(cells[5], "8", "{cells:?}");
    }
    assert_eq!(part_row(&page, "number", "plain")[6], "baseline");
    let verdict = &part_row(&page, "number", "careful")[6];
    assert!(
        verdict.contains("than plain") || verdict.contains("from plain"),
        "{verdict}"
    );
    // The compare page: A's figures, then B's.
    let (status, page) = get(&v.url, &format!("/compare?a={a}&b={b}"), None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<a href=\"#parts\">Parts</a>"), "{page}");
    let means_b = part_means(Path::new(&folder_b));
    for ((part, arm), mean) in &means {
        let cells = part_row(&page, part, arm);
        assert_eq!(cells[2], percent(*mean), "{part} {arm}: {cells:?}");
        assert_eq!(
            cells[4],
            percent(means_b[&(part.clone(), arm.clone())]),
            "{part} {arm}: {cells:?}"
        );
    }
    // The history page: a chart per part.
    let (status, page) = get(&v.url, "/history/arithmetic", None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("id=\"part-chart-0\""), "{page}");
    assert!(page.contains("id=\"part-chart-1\""), "{page}");
    assert!(page.contains("<h3>has &lt;1&gt;</h3>"), "{page}");
    // A run without parts has no table.
    let plain = recorded();
    let v = view(plain.path(), &[]);
    let (a, _) = first_run(&v, "model=alpha");
    let (_, page) = get(&v.url, &format!("/runs/{a}/"), None);
    assert!(!page.contains("id=\"parts\""), "{page}");
}

#[test]
fn labels_from_the_page_are_written_as_label_writes_them_and_need_the_csrf_token() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = judged(4, 1);
    let d = bench.path();
    run_on(d, &server.base_url(), "alpha", &[]);
    let v = view(d, &[]);
    let (id, folder) = first_run(&v, "");
    let (status, page) = get(&v.url, &format!("/runs/{id}/label"), None);
    assert_eq!(status, 200, "{page}");
    // Shown without the judge's verdict.
    assert!(!page.contains("Judge calls") && !page.contains("score 1.00"));
    let field = |page: &str, name: &str| -> String {
        let at = page
            .find(&format!("name=\"{name}\" value=\""))
            .unwrap_or_else(|| panic!("{name}: {page}"));
        let rest = &page[at + name.len() + 15..];
        rest[..rest.find('"').unwrap()].to_string()
    };
    let (csrf, job) = (field(&page, "csrf"), field(&page, "job"));
    let path = format!("/runs/{id}/label");
    // Without the page's token, or from another site's page: refused, nothing written.
    let (status, _, _) = request(&v.url, "POST", &path, &[], &format!("job={job}&score=1"));
    assert_eq!(status, 403);
    let (status, _, _) = request(
        &v.url,
        "POST",
        &path,
        &[],
        &format!("csrf=0000&job={job}&score=1"),
    );
    assert_eq!(status, 403);
    let (status, _, _) = request(
        &v.url,
        "POST",
        &path,
        &[("Origin", Some("http://evil.example"))],
        &format!("csrf={csrf}&job={job}&score=1"),
    );
    assert_eq!(status, 403);
    let labels = Path::new(&folder).join("labels.jsonl");
    assert!(!labels.exists());
    // With it: one line, as `promptgauge label` writes it, and the next answer is shown.
    let (status, head, _) = request(
        &v.url,
        "POST",
        &path,
        &[],
        &format!("csrf={csrf}&job={job}&score=0"),
    );
    assert_eq!(status, 303, "{head}");
    let r = journal(Path::new(&folder))
        .into_iter()
        .find(|r| r["job"].as_u64().map(|n| n.to_string()).as_deref() == Some(job.as_str()))
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&labels).unwrap(),
        format!(
            "{{\"case\":\"{}\",\"variant\":\"plain\",\"repeat\":0,\"score\":0.0}}\n",
            r["case_id"].as_str().unwrap()
        )
    );
    // Sent again (a second press, Back and resend): refused, one line still.
    let (status, _, body) = request(
        &v.url,
        "POST",
        &path,
        &[],
        &format!("csrf={csrf}&job={job}&score=1"),
    );
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("labelled already"), "{body}");
    assert_eq!(std::fs::read_to_string(&labels).unwrap().lines().count(), 1);
    let (_, page) = get(&v.url, &path, None);
    assert!(page.contains("1 labelled so far"), "{page}");
    assert_ne!(
        field(&page, "job"),
        job,
        "the labelled answer is not asked again"
    );
    // The reports were written again with it: the judge against one person.
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&folder).join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["variants"][0]["labelled"]["labels"], 1);
    // A run folder another process writes is not labelled into.
    let lock = promptgauge::runner::RunDir::at(&folder).lock().unwrap();
    let next = field(&page, "job");
    let (status, _, body) = request(
        &v.url,
        "POST",
        &path,
        &[],
        &format!("csrf={csrf}&job={next}&score=1"),
    );
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("in use"), "{body}");
    drop(lock);
    // Not a judged answer of this run: refused.
    let (status, _, _) = request(
        &v.url,
        "POST",
        &path,
        &[],
        &format!("csrf={csrf}&job=9999&score=1"),
    );
    assert_eq!(status, 400);
    assert_eq!(std::fs::read_to_string(&labels).unwrap().lines().count(), 1);
}

#[test]
fn a_run_in_progress_is_listed_and_followed_until_it_ends() {
    let gate = Gate::default();
    let (_rt, server) = start_mock(MockConfig {
        oracle: Some(gate.oracle()),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(6, 2, "");
    let d = bench.path();
    let text = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        format!("{text}limits: {{ concurrency: 1 }}\n"),
    )
    .unwrap();
    // The store exists before the run: view serves it.
    run_on(d, &server.base_url(), "alpha", &[]);
    let v = view(d, &[]);
    gate.arm(3);
    let mut run = spawned(
        d,
        &[
            "run",
            "bench.yaml",
            "--quiet",
            "--model",
            "alpha",
            "--base-url",
            &server.base_url(),
        ],
    );
    // Listed while it runs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let live = loop {
        let (_, json) = get(&v.url, "/api/live", None);
        let runs: serde_json::Value = serde_json::from_str(&json).unwrap();
        if let Some(r) = runs.as_array().unwrap().first() {
            break r.clone();
        }
        assert!(std::time::Instant::now() < deadline, "never listed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(live["planned"], 12);
    let name = live["name"].as_str().unwrap().to_string();
    // Its events: progress as the journal grows, then the end with its report's address.
    let address = v
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    let token = v.url.split("token=").nth(1).unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET /api/live/{name}/events HTTP/1.1\r\nHost: {address}\r\nx-promptgauge-token: {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    // The first events, while the simulator holds the rest of the run.
    let mut reader = BufReader::new(stream);
    let mut events = String::new();
    while !events.contains("\"done\":3") {
        assert!(reader.read_line(&mut events).unwrap() > 0, "{events}");
    }
    gate.open();
    reader.read_to_string(&mut events).unwrap();
    assert!(run.wait().unwrap().success());
    let done: Vec<u64> = events
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|d| d["done"].as_u64())
        .collect();
    assert!(done.len() >= 2, "{events}");
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "{done:?}");
    assert_eq!(*done.last().unwrap(), 12, "{events}");
    let (id, _) = first_run(&v, "");
    assert!(
        events.contains("event: end") && events.contains(&format!("/runs/{id}/")),
        "{events}"
    );
    // Once it ended, its live page is its report.
    let (status, head, _) = request(&v.url, "GET", &format!("/live/{name}"), &[], "");
    assert_eq!(status, 303, "{head}");
    let (_, json) = get(&v.url, "/api/live", None);
    assert_eq!(json, "[]");
}

/// A WebDriver session in headless Chromium, driven through Debian's chromedriver (the
/// W3C protocol is plain JSON over HTTP on loopback: a few calls are all a test needs).
pub(super) mod browser {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    pub struct Browser {
        driver: Child,
        port: u16,
        session: String,
        _profile: tempfile::TempDir,
    }

    /// How the W3C protocol names an element reference (`element-6066-…`).
    const ELEMENT: &str = "element-6066";

    impl Drop for Browser {
        fn drop(&mut self) {
            // Closing the session closes the browser (its answer is not waited for: the
            // driver may keep the connection open).
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = write!(
                    s,
                    "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
                    self.session
                );
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = s.read(&mut [0u8; 256]);
            }
            let _ = self.driver.kill();
            let _ = self.driver.wait();
        }
    }

    /// Chromium or chromedriver is missing: said, and a failure under CI (`.ci/run`
    /// installs both); a test then has nothing to drive.
    pub fn missing() -> bool {
        if available() {
            return false;
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium and chromedriver are missing: .ci/run installs them"
        );
        eprintln!(
            "skipped: no chromium/chromedriver here (apt-get install chromium chromium-driver)"
        );
        true
    }

    /// Chromium and chromedriver, when this machine has them (`.ci/run` installs both).
    pub fn available() -> bool {
        std::path::Path::new("/usr/bin/chromium").exists()
            && std::path::Path::new("/usr/bin/chromedriver").exists()
    }

    impl Browser {
        /// chromedriver on a port of its choosing, and that port: started again (up to three
        /// times) when it ends without saying one, as it now and then does when several
        /// tests start it at once.
        fn driver() -> (std::process::Child, u16) {
            for _ in 0..3 {
                let mut driver = Command::new("/usr/bin/chromedriver")
                    .arg("--port=0")
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("chromedriver starts");
                let mut reader = BufReader::new(driver.stdout.take().unwrap());
                let mut port = None;
                let mut line = String::new();
                while port.is_none() && reader.read_line(&mut line).unwrap_or(0) > 0 {
                    port = line
                        .split("started successfully on port ")
                        .nth(1)
                        .and_then(|p| p.trim().trim_end_matches('.').parse().ok());
                    line.clear();
                }
                // The rest of its output is drained, so it never blocks on a full pipe.
                std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
                match port {
                    Some(port) => return (driver, port),
                    None => {
                        let _ = driver.kill();
                        let _ = driver.wait();
                    }
                }
            }
            panic!("chromedriver never said its port, three times over")
        }

        pub fn start() -> Browser {
            let (driver, port) = Browser::driver();
            let profile = tempfile::tempdir().unwrap();
            let mut b = Browser {
                driver,
                port,
                session: String::new(),
                _profile: profile,
            };
            let args = json!([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1280,900",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                format!("--user-data-dir={}", b._profile.path().display()),
            ]);
            let caps = json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}
            }}});
            let v = b.call("POST", "/session", Some(caps));
            b.session = v["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("no session: {v}"))
                .to_string();
            b
        }

        /// One WebDriver call: its `value`.
        fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
            let body = body.map(|b| b.to_string()).unwrap_or_default();
            let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            write!(
                stream,
                "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                self.port,
                body.len()
            )
            .unwrap();
            // chromedriver may keep the connection open: read the body by its length.
            let mut reader = BufReader::new(stream);
            let mut length = 0usize;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let json = String::from_utf8_lossy(&body);
            let v: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
            v["value"].clone()
        }

        fn session(&self, rest: &str) -> String {
            format!("/session/{}{rest}", self.session)
        }

        pub fn go(&self, url: &str) {
            self.call("POST", &self.session("/url"), Some(json!({"url": url})));
        }

        pub fn url(&self) -> String {
            self.call("GET", &self.session("/url"), None)
                .as_str()
                .unwrap_or("")
                .to_string()
        }

        /// The first element `css` selects, if any.
        pub fn find(&self, css: &str) -> Option<String> {
            let v = self.call(
                "POST",
                &self.session("/element"),
                Some(json!({"using": "css selector", "value": css})),
            );
            v.as_object()
                .and_then(|o| o.iter().find(|(k, _)| k.starts_with(ELEMENT)))
                .and_then(|(_, id)| id.as_str())
                .map(String::from)
        }

        /// The element `css` selects, waited for (the page may still be drawing it).
        pub fn wait(&self, css: &str) -> String {
            self.wait_until(css, |_| true)
        }

        /// Waits until the element `css` selects has a text `ready` accepts.
        pub fn wait_until(&self, css: &str, ready: impl Fn(&str) -> bool) -> String {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(e) = self.find(css)
                    && ready(&self.text_of(&e))
                {
                    return e;
                }
                assert!(
                    Instant::now() < deadline,
                    "timed out waiting for {css} on {}: {}",
                    self.url(),
                    self.source()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        pub fn text_of(&self, element: &str) -> String {
            self.call(
                "GET",
                &self.session(&format!("/element/{element}/text")),
                None,
            )
            .as_str()
            .unwrap_or("")
            .to_string()
        }

        pub fn text(&self, css: &str) -> String {
            let e = self.wait(css);
            self.text_of(&e)
        }

        pub fn click(&self, css: &str) {
            let e = self.wait(css);
            self.call(
                "POST",
                &self.session(&format!("/element/{e}/click")),
                Some(json!({})),
            );
        }

        /// Types `text` into the element `css` selects (keys go where a person's would).
        pub fn type_into(&self, css: &str, text: &str) {
            let e = self.wait(css);
            self.call(
                "POST",
                &self.session(&format!("/element/{e}/value")),
                Some(json!({"text": text})),
            );
        }

        pub fn source(&self) -> String {
            self.call("GET", &self.session("/source"), None)
                .as_str()
                .unwrap_or("")
                .chars()
                .take(3000)
                .collect()
        }

        /// A PNG of the window, saved when `PROMPTGAUGE_SCREENSHOTS` names a folder (the
        /// pictures under docs/guide/view/ are made so).
        pub fn screenshot(&self, name: &str) {
            let Some(dir) = std::env::var_os("PROMPTGAUGE_SCREENSHOTS") else {
                return;
            };
            std::fs::write(std::path::Path::new(&dir).join(name), self.png()).unwrap();
        }

        /// A PNG of the window, as taken.
        pub fn png(&self) -> Vec<u8> {
            let v = self.call("GET", &self.session("/screenshot"), None);
            let png = base64_decode(v.as_str().unwrap());
            assert!(png.starts_with(b"\x89PNG"));
            png
        }

        /// Sizes the window (its outer size, in CSS pixels).
        pub fn resize(&self, width: u32, height: u32) {
            let rect = json!({"width": width, "height": height});
            self.call("POST", &self.session("/window/rect"), Some(rect));
        }

        /// What `script` (a function body: `return …`) gives, run in the page.
        pub fn script(&self, script: &str) -> Value {
            let body = json!({"script": script, "args": []});
            self.call("POST", &self.session("/execute/sync"), Some(body))
        }

        /// Loads the page again, as a person's reload does.
        pub fn reload(&self) {
            self.call("POST", &self.session("/refresh"), Some(json!({})));
        }
    }

    fn base64_decode(text: &str) -> Vec<u8> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let digits: Vec<u8> = text
            .bytes()
            .filter(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
            .map(value)
            .collect();
        let mut out = Vec::with_capacity(digits.len() * 3 / 4);
        for chunk in digits.chunks(4) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, d)| n | (u32::from(*d) << (18 - 6 * i)));
            let bytes = n.to_be_bytes();
            out.extend_from_slice(&bytes[1..chunk.len()]);
        }
        out
    }
}

/// A simulator's gate: once armed with `passes`, it lets that many requests through and
/// holds every other until it opens — a run that stays in progress until the test lets it
/// finish, however fast the machine.
#[derive(Clone, Default)]
struct Gate(std::sync::Arc<(std::sync::Mutex<Option<usize>>, std::sync::Condvar)>);

impl Gate {
    /// The oracle that consults the gate (it names no case: answers are as without one).
    fn oracle(&self) -> promptgauge::mock::answers::Oracle {
        let gate = self.0.clone();
        promptgauge::mock::answers::Oracle(std::sync::Arc::new(move |_: &str| {
            let (passes, turn) = &*gate;
            let mut passes = passes.lock().unwrap();
            loop {
                match *passes {
                    None => return None,
                    Some(0) => passes = turn.wait(passes).unwrap(),
                    Some(n) => {
                        *passes = Some(n - 1);
                        return None;
                    }
                }
            }
        }))
    }

    fn arm(&self, passes: usize) {
        *self.0.0.lock().unwrap() = Some(passes);
    }

    fn open(&self) {
        *self.0.0.lock().unwrap() = None;
        self.0.1.notify_all();
    }
}

#[test]
fn in_a_real_browser_the_runs_a_run_its_answers_a_comparison_labels_and_a_live_run() {
    if browser::missing() {
        return;
    }
    let gate = Gate::default();
    let (_rt, server) = start_mock(MockConfig {
        oracle: Some(gate.oracle()),
        ..MockConfig::default()
    });
    let bench = judged(6, 2);
    let d = bench.path();
    for model in ["alpha", "beta"] {
        run_on(d, &server.base_url(), model, &[]);
    }
    let v = view(d, &[]);
    let b = browser::Browser::start();
    // The URL view prints carries its token; the browser keeps it in a cookie after the
    // first page, so later pages are addressed without it.
    let base = v.base();
    // The runs, newest first, each variant's figure with its interval.
    b.go(&v.url);
    b.wait_until("#runs tbody", |t| t.contains("alpha") && t.contains("beta"));
    assert!(b.text("#runs tbody").contains('['), "intervals shown");
    b.screenshot("view-runs.png");
    // Filtered by model.
    b.type_into("input[name=model]", "beta");
    b.click("form[action='/'] button");
    b.wait_until("#runs tbody", |t| {
        t.contains("beta") && !t.contains("alpha")
    });
    // A run: its report, as report.html.
    b.click("#runs tbody a");
    b.wait("#headline");
    assert!(b.url().contains("/runs/"), "{}", b.url());
    b.screenshot("view-run.png");
    // Its answers, paged and filtered by the server.
    b.click("nav a[href$='/answers']");
    b.wait_until("#count", |t| t.contains("12 answers that match"));
    let run_url = b.url();
    b.go(&format!("{run_url}?limit=5"));
    b.wait_until("#count", |t| t.starts_with("5 of 12"));
    b.click("#next");
    b.wait_until("#count", |t| t.contains("from 6"));
    b.go(&run_url);
    b.type_into("input[name=q]", "add-03");
    b.click("form button");
    b.wait_until("#count", |t| t.starts_with("2 of 2"));
    b.screenshot("view-answers.png");
    // Two runs compared, ticked in the list.
    b.go(&v.url);
    b.wait("#runs tbody input");
    for i in 1..=2 {
        b.click(&format!(
            "#runs tbody tr:nth-child({i}) input[type=checkbox]"
        ));
    }
    b.click("#compare");
    b.wait_until("h1", |t| t.to_lowercase().contains("compar"));
    b.screenshot("view-compare.png");
    // Labels: three answers, by the keys, of a run of three judged cases; once every one
    // is labelled, the judge's score is corrected by people's.
    let limited = ["--limit", "3", "--variants", "plain"];
    run_on(d, &server.base_url(), "delta", &limited);
    let (id, folder) = first_run(&v, "model=delta");
    b.go(&format!("{base}/runs/{id}/label?sample=3"));
    b.wait("#answer");
    let before = b.text("#agreement td.corrected");
    assert!(before.starts_with('—'), "{before}");
    for key in ["n", "n", "n"] {
        let answer = b.text("#item p");
        b.type_into("body", key);
        b.wait_until("body", |t| !t.contains(&answer));
    }
    b.wait_until("#done", |t| t.contains("Nothing left"));
    // People failed all three: the corrected score is theirs, whatever the judge said.
    let after = b.text("#agreement td.corrected");
    assert!(after.starts_with("0.0%"), "{after}");
    let labels = std::fs::read_to_string(Path::new(&folder).join("labels.jsonl")).unwrap();
    assert_eq!(labels.lines().count(), 3, "{labels}");
    assert!(
        labels.lines().all(|l| l.ends_with("\"score\":0.0}")),
        "{labels}"
    );
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&folder).join("summary.json")).unwrap(),
    )
    .unwrap();
    let labelled = &summary["variants"][0]["labelled"];
    assert_eq!(labelled["labels"], 3);
    assert_eq!(labelled["corrected"], 0.0, "{labelled}");
    b.screenshot("view-label.png");
    // A run started after the page opened: it appears, updates live, then finishes. The
    // simulator answers its first few requests, then holds the rest until the page showed
    // them (one at a time: a held request holds the simulator).
    b.go(&v.url);
    b.wait("#runs");
    gate.arm(6);
    let mut run = spawned(
        d,
        &[
            "run",
            "bench.yaml",
            "--quiet",
            "--model",
            "gamma",
            "--concurrency",
            "1",
            "--base-url",
            &server.base_url(),
        ],
    );
    b.click("#live a.live-run");
    let progress = b.wait_until("#progress", |t| {
        t.ends_with(" of 12 jobs") && !t.starts_with("0 ")
    });
    let shown = b.text_of(&progress);
    assert!(!b.text("#newest tbody").is_empty(), "the newest answers");
    b.screenshot("view-live.png");
    gate.open();
    b.wait_until("#headline", |_| true);
    assert!(!shown.starts_with("12 "), "seen while running: {shown}");
    assert!(run.wait().unwrap().success());
    assert!(b.url().contains("/runs/"), "{}", b.url());
    let report = b.text("body");
    assert!(report.contains("gamma"), "{report:.2000}");
}

#[test]
fn a_bundle_is_the_pages_as_static_files_every_link_leading_to_one() {
    let bench = recorded();
    let d = bench.path();
    let v = view(d, &[]);
    let (a, _) = first_run(&v, "model=alpha");
    let (b, _) = first_run(&v, "model=beta");
    drop(v);
    let out = promptgauge(d)
        .args(["view", "--bundle", "site", "--run", &a, "--run", &b])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site = d.join("site");
    for file in [
        "index.html".to_string(),
        "compare.html".to_string(),
        "history/arithmetic.html".to_string(),
        format!("runs/{a}/index.html"),
        format!("runs/{a}/answers-1.html"),
        format!("runs/{a}/summary.json"),
        format!("runs/{b}/jobs/0.html"),
    ] {
        assert!(site.join(&file).is_file(), "{file}");
    }
    // Every link of every page leads to a file of the bundle; nothing asks a server.
    let mut pages = 0;
    let mut stack = vec![site.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "html") {
                continue;
            }
            pages += 1;
            let html = std::fs::read_to_string(&path).unwrap();
            assert!(!html.contains("href=\"/"), "{}", path.display());
            assert!(!html.contains("/api/"), "{}", path.display());
            for link in html.split("href=\"").skip(1) {
                let target = link.split('"').next().unwrap();
                if target.starts_with('#') || target.starts_with("data:") {
                    continue;
                }
                let file = path
                    .parent()
                    .unwrap()
                    .join(target.split('#').next().unwrap());
                assert!(file.is_file(), "{}: {target}", path.display());
            }
        }
    }
    assert!(pages >= 2 * 12 + 6, "{pages} pages");
    // The list holds the bundled runs, and the comparison is `compare`'s.
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains("2 runs") && index.contains(&a) && index.contains(&b));
    let compare = std::fs::read_to_string(site.join("compare.html")).unwrap();
    assert!(compare.contains("paired"), "{compare:.500}");
    assert!(
        index.contains("href=\"compare.html\""),
        "the comparison is linked"
    );
    assert!(
        !index.contains("type=\"checkbox\""),
        "nothing asks the server to compare"
    );
    // Bundled again into the same folder, with one run: the other's pages are gone.
    let out = promptgauge(d)
        .args(["view", "--bundle", "site", "--run", &a])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!site.join(format!("runs/{b}")).exists());
    assert!(!site.join("compare.html").exists());
    // A folder holding anything else is not written into.
    std::fs::create_dir_all(d.join("mine")).unwrap();
    std::fs::write(d.join("mine/notes.txt"), "mine").unwrap();
    let out = promptgauge(d)
        .args(["view", "--bundle", "mine"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("is not empty"), "{said}");
    assert_eq!(std::fs::read_dir(d.join("mine")).unwrap().count(), 1);
    // A run the store does not hold: said, nothing written.
    let out = promptgauge(d)
        .args(["view", "--bundle", "other", "--run", "no-such-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no run no-such-run"), "{said}");
    assert!(!d.join("other").exists());
}

#[test]
fn the_view_needs_its_token_on_loopback_too_unless_asked_and_the_network_needs_tls() {
    let bench = recorded();
    let d = bench.path();
    // Loopback: the URL printed carries the token; without it nothing is served.
    let v = view(d, &[]);
    let token = v
        .url
        .split("token=")
        .nth(1)
        .expect("a token in the URL")
        .to_string();
    assert_eq!(token.len(), 32, "{}", v.url);
    let bare = ("x-promptgauge-token", None);
    for path in ["/", "/api/runs", "/api/live"] {
        let (status, _, _) = request(&v.url, "GET", path, &[bare], "");
        assert_eq!(status, 401, "{path}");
    }
    // A token one character off, or of another length: refused alike.
    let mut off = token.clone();
    off.replace_range(31.., if token.ends_with('0') { "1" } else { "0" });
    for wrong in [off.as_str(), &token[..31], "x"] {
        let (status, _, _) = request(
            &v.url,
            "GET",
            "/api/runs",
            &[("x-promptgauge-token", Some(wrong))],
            "",
        );
        assert_eq!(status, 401, "{wrong}");
    }
    // The token is checked first: a foreign Host without it learns nothing more.
    let (status, _, _) = request(
        &v.url,
        "GET",
        "/",
        &[bare, ("Host", Some("evil.example"))],
        "",
    );
    assert_eq!(status, 401);
    // With it, the Host check still holds on loopback.
    let (status, _) = get(&v.url, "/", Some("evil.example"));
    assert_eq!(status, 403);
    let (status, _, _) = request(&v.url, "GET", &format!("/?token={token}"), &[bare], "");
    assert_eq!(status, 200);
    drop(v);
    // --no-token: asked by name, loopback only.
    let v = view(d, &["--no-token"]);
    assert!(!v.url.contains("token="), "{}", v.url);
    let (status, _, _) = request(&v.url, "GET", "/", &[bare], "");
    assert_eq!(status, 200);
    drop(v);
    let out = promptgauge(d)
        .args([
            "view",
            "--port",
            "0",
            "--public",
            "--no-token",
            "--insecure-http",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // On the network: plain HTTP only when asked for by name.
    let out = promptgauge(d)
        .args(["view", "--port", "0", "--bind", "0.0.0.0", "--public"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("in clear")
            && said.contains("--tls-cert")
            && said.contains("--insecure-http"),
        "{said}"
    );
    let help = promptgauge(d).args(["view", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--tls-cert", "--tls-key", "--insecure-http", "--no-token"] {
        assert!(help.contains(flag), "{flag} in --help: {help}");
    }
    // A key that is not a key: an input error naming the file.
    let tls = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let (cert, key) = (tls.join("cert.pem"), tls.join("key.pem"));
    let out = promptgauge(d)
        .args(["view", "--port", "0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&cert)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cert.pem"));
    // HTTPS from a certificate and its key: the pages answer over TLS, the token with them,
    // and the cookie is Secure.
    let v = view(
        d,
        &[
            "--bind",
            "0.0.0.0",
            "--public",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(v.url.starts_with("https://127.0.0.1:"), "{}", v.url);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(
                &std::fs::read(tls.join("ca.pem")).unwrap(),
            )
            .unwrap()])
            .build()
            .unwrap();
        let r = client.get(&v.url).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(
            cookie.contains("Secure") && cookie.contains("HttpOnly"),
            "{cookie}"
        );
        assert!(r.text().await.unwrap().contains("<table"));
        let bare = v.url.split('?').next().unwrap().to_string();
        let r = client.get(&bare).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401);
        // Plain HTTP to the same port is no page.
        let plain = bare.replace("https://", "http://");
        let r = reqwest::Client::new().get(&plain).send().await;
        assert!(r.map_or(true, |r| !r.status().is_success()));
    });
}

#[test]
fn slow_connections_are_cut_and_capped_and_the_page_still_answers() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let bench = recorded();
    let store = bench.path().join("reports/promptgauge.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = promptgauge::store::Store::open_existing(
            &promptgauge::store::Location::Sqlite(store),
        )
        .await
        .unwrap();
        struct NoCommands;
        impl promptgauge::web::Commands for NoCommands {
            fn compare<'a>(&'a self, _: &'a Path, _: &'a Path) -> promptgauge::web::Reply<'a, String> {
                Box::pin(async { Err("no".to_string()) })
            }
            fn history<'a>(
                &'a self,
                _: &'a str,
                _: &'a (dyn Fn(&str) -> String + Sync),
            ) -> promptgauge::web::Reply<'a, String> {
                Box::pin(async { Err("no".to_string()) })
            }
            fn report<'a>(&'a self, _: &'a Path) -> promptgauge::web::Reply<'a, ()> {
                Box::pin(async { Err("no".to_string()) })
            }
        }
        let header_timeout = Duration::from_millis(300);
        let listening = promptgauge::web::listen(
            promptgauge::web::ViewConfig {
                bind: "127.0.0.1:0".parse().unwrap(),
                public: false,
                token: true,
                tls: None,
                insecure_http: false,
                header_timeout,
                max_connections: 16,
                reports: bench.path().join("reports"),
                commands: std::sync::Arc::new(NoCommands),
            },
            store,
        )
        .await
        .unwrap();
        let address = listening.address;
        let url = listening.url.clone();
        let stop = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(listening.serve(stop.clone()));
        // Twice the cap in connections that never finish their headers, and some that
        // send nothing at all.
        let mut slow = Vec::new();
        for i in 0..40 {
            let mut s = tokio::net::TcpStream::connect(address).await.unwrap();
            if i % 2 == 0 {
                s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.unwrap();
            }
            slow.push(s);
        }
        // The page answers, within a few header deadlines, while they are held open.
        let token = url.split("token=").nth(1).unwrap().to_string();
        let started = Instant::now();
        let answered = loop {
            let mut s = tokio::net::TcpStream::connect(address).await.unwrap();
            let ask = format!(
                "GET /api/runs HTTP/1.1\r\nHost: {address}\r\nx-promptgauge-token: {token}\r\nConnection: close\r\n\r\n"
            );
            let mut reply = Vec::new();
            let ok = s.write_all(ask.as_bytes()).await.is_ok()
                && tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut reply))
                    .await
                    .is_ok_and(|r| r.is_ok());
            if ok && reply.starts_with(b"HTTP/1.1 200") {
                break true;
            }
            if started.elapsed() > Duration::from_secs(10) {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(answered, "the page never answered past the slow connections");
        // Every slow one was closed by the server: at its header deadline, or at once
        // beyond the cap.
        for (i, mut s) in slow.into_iter().enumerate() {
            let mut rest = Vec::new();
            let closed = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
            assert!(closed.is_ok(), "slow connection {i} still open");
        }
        // A body beyond the limit is refused, not read to its end.
        let mut s = tokio::net::TcpStream::connect(address).await.unwrap();
        let big = promptgauge::web::MAX_BODY_BYTES + 1;
        let ask = format!(
            "POST /runs/x/label HTTP/1.1\r\nHost: {address}\r\nx-promptgauge-token: {token}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {big}\r\nConnection: close\r\n\r\n{}",
            "a".repeat(big)
        );
        let _ = s.write_all(ask.as_bytes()).await;
        let mut reply = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut reply)).await;
        assert!(reply.starts_with(b"HTTP/1.1 413"), "{}", String::from_utf8_lossy(&reply));
        stop.cancel();
        server.await.unwrap().unwrap();
    });
}

/// `view --open` in `d`, with `$BROWSER` a launcher that writes down the command line it
/// was given (what any local user would read with `ps`) and `$TMPDIR` the folder `tmp`:
/// the server, and that command line once the launcher ran.
#[cfg(unix)]
fn opened(d: &Path) -> (View, String) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(d.join("tmp")).unwrap();
    let launcher = d.join("browser.sh");
    let argv = d.join("argv.txt");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > {0}.part && mv {0}.part {0}\n",
            argv.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let v = view_with(
        d,
        &["--open"],
        &[
            ("BROWSER", launcher.to_str().unwrap()),
            ("TMPDIR", d.join("tmp").to_str().unwrap()),
        ],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !argv.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let command_line = std::fs::read_to_string(&argv).expect("the browser was started");
    (v, command_line)
}

#[cfg(unix)]
#[test]
fn open_hands_the_browser_a_one_time_link_and_never_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let bench = recorded();
    let d = bench.path();
    let temp = d.join("tmp");
    let (mut v, command_line) = opened(d);
    let token = v.url.split("token=").nth(1).unwrap().to_string();
    assert!(!command_line.contains(&token), "{command_line}");
    // It was given a page only this user can read, in a folder only this user can enter.
    let page = Path::new(command_line.lines().nth(1).unwrap()).to_path_buf();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&page), 0o600);
    assert_eq!(mode(page.parent().unwrap()), 0o700);
    assert!(page.starts_with(&temp), "{}", page.display());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains(&token), "{html}");
    let link = html
        .split("url=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let path = &link[link.find("/open/").expect("a one-time path")..];
    // Its first visit, without the token, gets the token's cookie and goes on to the runs…
    let bare = ("x-promptgauge-token", None);
    let (status, head, body) = request(&v.url, "GET", path, &[bare], "");
    assert_eq!(status, 200, "{head}{body}");
    let port = v.url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let cookie = format!("promptgauge_token_{port}={token}");
    assert!(head.contains(&cookie), "{head}");
    assert!(body.contains("content=\"0;url=/\""), "{body}");
    let (status, _, body) = request(&v.url, "GET", "/", &[bare, ("Cookie", Some(&cookie))], "");
    assert_eq!(status, 200);
    assert!(body.contains("arithmetic"), "{body}");
    // …and it is spent: a second visit (or another code) gets nothing.
    for again in [path.to_string(), format!("/open/{}", "0".repeat(32))] {
        let (status, head, _) = request(&v.url, "GET", &again, &[bare], "");
        assert_eq!(status, 401, "{again}");
        assert!(!head.contains(&token), "{head}");
    }
    // The page goes when the server stops.
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(v.child.id() as i32, libc::SIGTERM);
    }
    v.child.wait().unwrap();
    assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 0);
}

/// `view --open` in a real browser: the page the launcher was given opens the runs, through
/// the one-time link and the cookie it sets (SameSite=Strict: sent on the server's own
/// page's navigation onward); opened again, the link is spent.
#[cfg(unix)]
#[test]
fn in_a_real_browser_open_s_page_opens_the_runs_once() {
    if browser::missing() {
        return;
    }
    let bench = recorded();
    let d = bench.path();
    let (v, command_line) = opened(d);
    let page = command_line.lines().nth(1).unwrap().to_string();
    let token = v.url.split("token=").nth(1).unwrap().to_string();
    let b = browser::Browser::start();
    b.go(&format!("file://{page}"));
    b.wait_until("#runs tbody", |t| t.contains("alpha") && t.contains("beta"));
    let at = b.url();
    assert!(at.ends_with('/') && !at.contains(&token), "{at}");
    // The cookie holds: the server's pages, addressed without the token.
    b.go(&format!("{}?model=beta", v.url.split('?').next().unwrap()));
    b.wait_until("#runs tbody", |t| {
        t.contains("beta") && !t.contains("alpha")
    });
    // The page again: its link was spent.
    b.go(&format!("file://{page}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !b.source().contains("used already") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(b.source().contains("used already"), "{}", b.source());
}

/// In a real browser, a run's parts table reads as text (a part named `has <1>` shows so),
/// and the Parts link leads to it.
#[test]
fn in_a_real_browser_a_run_s_parts_table_shows_the_names_as_written() {
    if browser::missing() {
        return;
    }
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = parts_bench(4, 2);
    let d = bench.path();
    run_on(d, &server.base_url(), "alpha", &[]);
    let v = view(d, &[]);
    let (a, folder) = first_run(&v, "");
    let b = browser::Browser::start();
    b.go(&v.url);
    b.wait("#runs tbody");
    let base = v.url.split('?').next().unwrap().trim_end_matches('/');
    b.go(&format!("{base}/runs/{a}/"));
    b.wait("#parts-table");
    b.click("nav a[href='#parts']");
    assert!(b.url().ends_with("#parts"), "{}", b.url());
    let text = b.text("#parts-table");
    assert!(text.contains("has <1>"), "{text}");
    let mean = part_means(Path::new(&folder))[&("has <1>".to_string(), "careful".to_string())];
    assert!(text.contains(&percent(mean)), "{text}");
}
