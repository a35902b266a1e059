//! `view --bundle DIR`: the application's pages as static files. The server is started on
//! a free loopback port and asked for each page, as a browser would, so the files are the
//! pages themselves; links between them are made relative, and what needs the server (the
//! filters, live runs, labelling) is left out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Listening;
use super::page::url_segment;
use super::shared::Shared;

/// Answers per page in a bundle.
const PAGE: usize = 100;
/// Job pages written per run, at most (the first in journal order).
pub const JOB_PAGES: usize = 5_000;

/// What a bundle holds.
#[derive(Debug, Default)]
pub struct Bundled {
    pub runs: usize,
    pub files: usize,
    /// Runs with more jobs than [`JOB_PAGES`]: their other jobs have no page.
    pub jobs_left_out: usize,
}

/// Why a bundle could not be written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("the history store holds no run {0}")]
    NoRun(String),
    #[error("the history store holds no run to bundle")]
    Empty,
    #[error("{} is not empty, and not an earlier bundle: a bundle is written into a folder of its own", .0.display())]
    NotEmpty(PathBuf),
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("the page {path} could not be made: {why}")]
    Page { path: String, why: String },
}

/// What the bundle holds: its runs, and the jobs that have a page.
struct Held {
    runs: BTreeSet<String>,
    jobs: BTreeSet<(String, u64)>,
    /// Benches whose history page is bundled: those with a complete run among the runs
    /// (a history shows complete runs only; a bench without one has no page).
    histories: BTreeSet<String>,
}

/// A page's address → its file in the bundle (`None`: a page the bundle does not hold).
fn file_of(path: &str, held: &Held) -> Option<String> {
    let path = path.replace("&amp;", "&");
    let (path, query) = path.split_once('?').unwrap_or((&path, ""));
    let decoded: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(super::runs::percent_decode)
        .collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let param = |name: &str| {
        super::runs::form_urlencoded(query)
            .into_iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<usize>().ok())
    };
    if let ["runs", run, ..] = segments.as_slice()
        && !held.runs.contains(*run)
    {
        return None;
    }
    match segments.as_slice() {
        [""] => Some("index.html".into()),
        ["runs", run, ""] => Some(format!("runs/{}/index.html", safe(run))),
        ["runs", run, "answers"] => {
            let page = param("offset").unwrap_or(0) / param("limit").unwrap_or(PAGE).max(1) + 1;
            Some(format!("runs/{}/answers-{page}.html", safe(run)))
        }
        ["runs", run, "jobs", n] => {
            let n: u64 = n.parse().ok()?;
            held.jobs
                .contains(&(run.to_string(), n))
                .then(|| format!("runs/{}/jobs/{n}.html", safe(run)))
        }
        [
            "runs",
            run,
            file @ ("summary.json" | "summary.md" | "summary.csv"),
        ] => Some(format!("runs/{}/{file}", safe(run))),
        ["history", bench] => held
            .histories
            .contains(*bench)
            .then(|| format!("history/{}.html", safe(bench))),
        _ => None,
    }
}

/// A name as one file name: letters, digits, `-`, `_` and `.` kept, the rest `_`.
fn safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.trim_start_matches('.').to_string()
}

/// `html` as the file `at` holds it: every link to a page of the application made relative
/// to it (or taken out, for pages that need the server), the filter forms and scripts that
/// ask the server left out.
fn relative(html: &str, at: &str, held: &Held) -> String {
    let up = "../".repeat(at.matches('/').count());
    let links = regex::Regex::new(r#"href="(/[^"]*)""#).expect("a fixed pattern");
    let html = links.replace_all(html, |c: &regex::Captures<'_>| match file_of(&c[1], held) {
        Some(file) => format!("href=\"{up}{file}\""),
        None => "title=\"needs promptgauge view\"".to_string(),
    });
    // What asks the server: the filters (a GET form to the page itself), the comparison of
    // two ticked runs, the runs list's live poll.
    let forms = regex::Regex::new(r#"(?s)<form method="get"( action="/")?>.*?</form>"#)
        .expect("a fixed pattern");
    let html = forms.replace_all(&html, "");
    let compare = regex::Regex::new(r#"<button id="compare">[^<]*</button>"#).expect("fixed");
    let html = compare.replace_all(&html, "");
    let ticks = regex::Regex::new(r#"<input type="checkbox" name="run"[^>]*>"#).expect("fixed");
    let html = ticks.replace_all(&html, "");
    let html = html
        .replace("<form method=\"get\" action=\"/compare\">", "<div>")
        .replace("</table></div></form>", "</table></div></div>");
    let live = regex::Regex::new(r#"(?s)<script>\s*\(function\(\)\{\s*var box=document.getElementById\('live'\).*?</script>"#)
        .expect("fixed");
    live.replace_all(&html, "").into_owned()
}

/// The file that marks a folder as a bundle (written again, it is emptied first).
const MARK: &str = ".promptgauge-bundle";

/// Makes `dir` ready: created, or emptied when it holds an earlier bundle; a folder that
/// holds anything else is refused (nothing of it is touched).
fn prepare(dir: &Path) -> Result<(), BundleError> {
    let write = |error| BundleError::Write {
        path: dir.to_path_buf(),
        error,
    };
    if dir.exists() {
        let empty = std::fs::read_dir(dir).map_err(write)?.next().is_none();
        if !empty {
            if !dir.join(MARK).is_file() {
                return Err(BundleError::NotEmpty(dir.to_path_buf()));
            }
            std::fs::remove_dir_all(dir).map_err(write)?;
        }
    }
    std::fs::create_dir_all(dir).map_err(write)?;
    std::fs::write(
        dir.join(MARK),
        "written by `promptgauge view --bundle`; bundling into this folder again empties it\n",
    )
    .map_err(write)
}

/// The running server, asked for pages as a browser would (with its token).
struct Pages {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Pages {
    /// The page at `path`, or why it could not be had (a status that is no success too).
    async fn get(&self, path: String) -> Result<Vec<u8>, BundleError> {
        let fail = |why: String| BundleError::Page {
            path: path.clone(),
            why,
        };
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header("x-promptgauge-token", self.token.as_str())
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| fail(e.to_string()))?;
        if !status.is_success() {
            return Err(fail(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body).trim()
            )));
        }
        Ok(body.to_vec())
    }
}

/// Writes the bundle of `runs` (run ids; none: the newest 20) into `dir`.
pub async fn bundle(
    listening: Listening,
    dir: &Path,
    runs: &[String],
) -> Result<Bundled, BundleError> {
    let shared = listening.shared.clone();
    let pages = Pages {
        client: reqwest::Client::new(),
        base: format!("http://{}", listening.address),
        token: shared.token.clone().unwrap_or_default(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(listening.serve(stop.clone()));
    let result = write_bundle(&shared, &pages, dir, runs).await;
    stop.cancel();
    let _ = server.await;
    result
}

/// Asks the server for every page the bundle holds, and writes each as its file.
async fn write_bundle(
    shared: &Shared,
    pages: &Pages,
    dir: &Path,
    runs: &[String],
) -> Result<Bundled, BundleError> {
    let chosen = choose(shared, runs).await?;
    prepare(dir)?;
    let mut bundled = Bundled {
        runs: chosen.len(),
        ..Bundled::default()
    };
    // Every job page the bundle holds, known before any link is written.
    let mut held = Held {
        runs: chosen.iter().map(|r| r.run_id.clone()).collect(),
        jobs: BTreeSet::new(),
        histories: chosen
            .iter()
            .filter(|r| r.complete)
            .map(|r| r.bench.clone())
            .collect(),
    };
    let mut paths: Vec<(String, String)> = Vec::new();
    for r in &chosen {
        let jobs = list_jobs(pages, &r.run_id, &mut held, &mut bundled).await?;
        paths.extend(run_paths(&r.run_id, jobs));
    }
    // Two runs of one bench: their comparison too (runs of two benches share no
    // case to compare).
    let compared = matches!(chosen.as_slice(), [b, a] if a.bench == b.bench);
    paths.extend(held_paths(&chosen, &held, compared));
    for (path, named) in paths {
        let file = if named.is_empty() {
            file_of(&path, &held).unwrap_or_default()
        } else {
            named
        };
        let body = pages.get(path).await?;
        let body = as_file(body, &file, &held, compared);
        write_file(&dir.join(&file), body)?;
        bundled.files += 1;
    }
    Ok(bundled)
}

/// The runs to bundle, newest first: those named (each must be in the store), or the
/// newest 20.
async fn choose(
    shared: &Shared,
    runs: &[String],
) -> Result<Vec<promptgauge_report::rows::RunRow>, BundleError> {
    let all = shared
        .store
        .runs(&promptgauge_store::Filter::default())
        .await
        .map_err(|e| BundleError::Page {
            path: "/api/runs".into(),
            why: e.to_string(),
        })?;
    let chosen: Vec<promptgauge_report::rows::RunRow> = if runs.is_empty() {
        all.into_iter().rev().take(20).collect()
    } else {
        let mut chosen = Vec::new();
        for id in runs {
            match all.iter().find(|r| &r.run_id == id) {
                Some(r) => chosen.push(r.clone()),
                None => return Err(BundleError::NoRun(id.clone())),
            }
        }
        chosen
    };
    if chosen.is_empty() {
        return Err(BundleError::Empty);
    }
    Ok(chosen)
}

/// Lists a run's jobs, 500 at a time: the first [`JOB_PAGES`] are held (they get a page),
/// the others counted as left out. Gives how many jobs the run has.
async fn list_jobs(
    pages: &Pages,
    run_id: &str,
    held: &mut Held,
    bundled: &mut Bundled,
) -> Result<usize, BundleError> {
    let id = url_segment(run_id);
    let mut offset = 0;
    let mut kept = 0;
    loop {
        let body = pages
            .get(format!("/api/runs/{id}/jobs?limit=500&offset={offset}"))
            .await?;
        let page: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let listed = page["jobs"].as_array().cloned().unwrap_or_default();
        for j in &listed {
            if let Some(n) = j["job"].as_u64() {
                if kept < JOB_PAGES {
                    held.jobs.insert((run_id.to_string(), n));
                    kept += 1;
                } else {
                    bundled.jobs_left_out += 1;
                }
            }
        }
        let matched = page["matched"].as_u64().unwrap_or(0) as usize;
        offset += listed.len();
        if listed.is_empty() || offset >= matched {
            return Ok(offset);
        }
    }
}

/// A run's pages (each with no file name: its address gives it): the run, its summary in
/// each format, and its answers, [`PAGE`] to a page.
fn run_paths(run_id: &str, jobs: usize) -> Vec<(String, String)> {
    let id = url_segment(run_id);
    let mut paths = vec![(format!("/runs/{id}/"), String::new())];
    for file in ["summary.json", "summary.md", "summary.csv"] {
        paths.push((format!("/runs/{id}/{file}"), String::new()));
    }
    let answers = jobs.div_ceil(PAGE).max(1);
    for p in 0..answers {
        paths.push((
            format!("/runs/{id}/answers?offset={}&limit={PAGE}", p * PAGE),
            String::new(),
        ));
    }
    paths
}

/// The pages across runs: each held job's, each bench history's, the runs list (as
/// `index.html`), and the two runs' comparison when they are `compared`.
fn held_paths(
    chosen: &[promptgauge_report::rows::RunRow],
    held: &Held,
    compared: bool,
) -> Vec<(String, String)> {
    let mut paths = Vec::new();
    for (run, n) in &held.jobs {
        paths.push((
            format!("/runs/{}/jobs/{n}", url_segment(run)),
            String::new(),
        ));
    }
    for b in &held.histories {
        paths.push((format!("/history/{}", url_segment(b)), String::new()));
    }
    let ids: Vec<String> = chosen.iter().map(|r| r.run_id.clone()).collect();
    paths.push((
        format!("/?ids={}&limit=10000", url_segment(&ids.join(","))),
        "index.html".into(),
    ));
    if let [b, a] = chosen
        && compared
    {
        paths.push((
            format!(
                "/compare?a={}&b={}",
                url_segment(&a.run_id),
                url_segment(&b.run_id)
            ),
            "compare.html".into(),
        ));
    }
    paths
}

/// A page as the bundle's `file` holds it: an HTML page's links made relative, and the
/// runs list linking the two runs' comparison when there is one.
fn as_file(body: Vec<u8>, file: &str, held: &Held, compared: bool) -> Vec<u8> {
    if !file.ends_with(".html") {
        return body;
    }
    let mut html = relative(&String::from_utf8_lossy(&body), file, held);
    // The two runs' comparison, from the list.
    if file == "index.html" && compared {
        html = html.replacen(
            "<h1>Runs</h1>",
            "<h1>Runs</h1>\n<p><a id=\"compare\" href=\"compare.html\">The two runs compared</a></p>",
            1,
        );
    }
    html.into_bytes()
}

/// Writes one file of the bundle, and the folders it goes in.
fn write_file(target: &Path, body: Vec<u8>) -> Result<(), BundleError> {
    let write = |path: &Path, error| BundleError::Write {
        path: path.to_path_buf(),
        error,
    };
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| write(parent, e))?;
    }
    promptgauge_base::files::write_atomically(target, body).map_err(|e| write(target, e))
}
