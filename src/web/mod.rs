//! `promptgauge view`: a local web application over the history store and the run folders
//! it records (docs/view.md). It serves the runs, newest first and filterable, and each
//! run's own report (the page `report.html` is, rendered by the same code, never a fork).
//!
//! Safe by default: it binds loopback; another address needs `--public`, and then every
//! request carries a random access token. Every request's `Host` must name the server
//! itself (a page on another site that resolves its name to 127.0.0.1 — DNS rebinding — is
//! refused), and no file is served but a run folder's own reports, by a fixed list of
//! names: no path from a request ever reaches the file system.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::report::rows::RunRow;
use crate::store::{Filter, Store};

/// The pages' Content-Security-Policy: report.html's own (no network request, inline
/// styles and scripts only).
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; connect-src 'self'";

/// The files of a run folder the server shows, and their types: nothing else is served.
const RUN_FILES: [(&str, &str); 4] = [
    ("report.html", "text/html; charset=utf-8"),
    ("summary.json", "application/json"),
    ("summary.md", "text/markdown; charset=utf-8"),
    ("summary.csv", "text/csv; charset=utf-8"),
];

/// How `view` serves.
pub struct ViewConfig {
    /// Where to listen; loopback unless `public`.
    pub bind: SocketAddr,
    /// Listen on an address other than loopback (then every request needs `token`).
    pub public: bool,
    /// Run folders recorded with a relative path are found under this folder.
    pub reports: PathBuf,
}

/// What the handlers share.
struct Shared {
    store: Store,
    reports: PathBuf,
    /// Every `Host` a request may name.
    hosts: Vec<String>,
    /// `--public`: the access token every request carries.
    token: Option<String>,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error(
        "{0} is not a loopback address: the pages would be open to the network; pass --public to serve them there (every request then needs the random token printed at start)"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
}

/// A server listening, not yet serving: its address, and the URL to open (with the token
/// when public).
pub struct Listening {
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    pub address: SocketAddr,
    pub url: String,
}

/// Binds the server (refusing a non-loopback address without `public`).
pub async fn listen(config: ViewConfig, store: Store) -> Result<Listening, ViewError> {
    if !config.bind.ip().is_loopback() && !config.public {
        return Err(ViewError::NotLoopback(config.bind));
    }
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|e| ViewError::Bind(config.bind, e))?;
    let address = listener
        .local_addr()
        .map_err(|e| ViewError::Bind(config.bind, e))?;
    let port = address.port();
    let hosts = vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    let token = config
        .public
        .then(|| format!("{:032x}", rand::random::<u128>()));
    let shown = if address.ip().is_loopback() || address.ip().is_unspecified() {
        format!("http://127.0.0.1:{port}/")
    } else {
        format!("http://{address}/")
    };
    let url = match &token {
        Some(t) => format!("{shown}?token={t}"),
        None => shown,
    };
    Ok(Listening {
        listener,
        shared: Arc::new(Shared {
            store,
            reports: config.reports,
            hosts,
            token,
        }),
        address,
        url,
    })
}

impl Listening {
    /// Serves until `stop` is cancelled.
    pub async fn serve(self, stop: tokio_util::sync::CancellationToken) -> std::io::Result<()> {
        let app = Router::new()
            .route("/", get(runs_page))
            .route("/api/runs", get(runs_json))
            .route("/api/runs/{run}/jobs", get(run_jobs))
            .route("/runs/{run}/answers", get(answers_page))
            .route("/runs/{run}/", get(run_report))
            .route("/runs/{run}/{file}", get(run_file))
            .layer(middleware::from_fn_with_state(self.shared.clone(), guard))
            .with_state(self.shared);
        axum::serve(self.listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    }
}

/// Refuses a request whose `Host` is not the server's own (DNS rebinding) and, when
/// public, one without the token (in `?token=` or the `x-promptgauge-token` header): a
/// public server is reached by names it cannot know, and the token, which no other site
/// has, stands in for the `Host` check.
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if shared.token.is_none() && !shared.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return (
            StatusCode::FORBIDDEN,
            "promptgauge view answers only requests for its own address (Host header)\n",
        )
            .into_response();
    }
    if let Some(token) = &shared.token {
        let from_query = request.uri().query().is_some_and(|q| {
            q.split('&')
                .any(|kv| kv.strip_prefix("token=") == Some(token.as_str()))
        });
        let from_header = request
            .headers()
            .get("x-promptgauge-token")
            .and_then(|h| h.to_str().ok())
            == Some(token.as_str());
        if !from_query && !from_header {
            return (
                StatusCode::UNAUTHORIZED,
                "this promptgauge view needs its access token (the URL it printed at start)\n",
            )
                .into_response();
        }
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

impl Shared {
    /// A form's hidden field carrying the access token (when public), so a filter keeps it.
    fn token_field(&self) -> String {
        self.token
            .as_ref()
            .map(|t| {
                format!(
                    "<input type=\"hidden\" name=\"token\" value=\"{}\">",
                    crate::report::html::esc(t)
                )
            })
            .unwrap_or_default()
    }
}

/// A filter's text field, labelled with its name.
fn text_field(name: &str, value: &str) -> String {
    format!(
        "<label>{name} <input name=\"{name}\" value=\"{}\"></label>",
        crate::report::html::esc(value)
    )
}

/// The runs list's filters, as query parameters.
#[derive(Debug, Default, Deserialize)]
struct RunsQuery {
    bench: Option<String>,
    branch: Option<String>,
    model: Option<String>,
    /// `complete`, `stopped` or `failed`.
    status: Option<String>,
    /// Words every shown run's bench, model, branch, commit or id contains.
    q: Option<String>,
    limit: Option<usize>,
}

impl RunsQuery {
    fn filter(&self) -> Filter {
        Filter {
            bench: self.bench.clone().filter(|b| !b.is_empty()),
            branch: self.branch.clone().filter(|b| !b.is_empty()),
            model: self.model.clone().filter(|m| !m.is_empty()),
            limit: Some(self.limit.unwrap_or(500).clamp(1, 10_000)),
            ..Filter::default()
        }
    }

    /// Whether `run` passes the filters the store cannot apply.
    fn keeps(&self, run: &RunRow) -> bool {
        let status_ok = match self.status.as_deref().unwrap_or("") {
            "complete" => run.complete,
            "stopped" => run.stopped.is_some(),
            "failed" => run.jobs_failed > 0,
            _ => true,
        };
        let words_ok = self.q.as_deref().unwrap_or("").split_whitespace().all(|w| {
            let w = w.to_lowercase();
            [
                run.bench.as_str(),
                run.model.as_str(),
                run.run_id.as_str(),
                run.git_branch.as_deref().unwrap_or(""),
                run.git_commit.as_deref().unwrap_or(""),
            ]
            .iter()
            .any(|f| f.to_lowercase().contains(&w))
        });
        status_ok && words_ok
    }
}

/// The runs that pass `query`, newest first.
async fn runs_of(shared: &Shared, query: &RunsQuery) -> Result<Vec<RunRow>, Response> {
    let mut runs = shared
        .store
        .runs(&query.filter())
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())?;
    runs.retain(|r| query.keeps(r));
    runs.reverse();
    Ok(runs)
}

async fn runs_json(State(shared): State<Arc<Shared>>, Query(query): Query<RunsQuery>) -> Response {
    match runs_of(&shared, &query).await {
        Ok(runs) => axum::Json(runs).into_response(),
        Err(e) => e,
    }
}

/// Every run, newest first, with the filters as a form.
async fn runs_page(State(shared): State<Arc<Shared>>, Query(query): Query<RunsQuery>) -> Response {
    let runs = match runs_of(&shared, &query).await {
        Ok(runs) => runs,
        Err(e) => return e,
    };
    let esc = crate::report::html::esc;
    let token = shared
        .token
        .as_ref()
        .map(|t| format!("?token={t}"))
        .unwrap_or_default();
    let field =
        |name: &str, value: &Option<String>| text_field(name, value.as_deref().unwrap_or(""));
    let status = query.status.as_deref().unwrap_or("");
    let option = |v: &str, label: &str| {
        let selected = if v == status { " selected" } else { "" };
        format!("<option value=\"{v}\"{selected}>{label}</option>")
    };
    let mut rows = String::new();
    for r in &runs {
        let state = if r.complete {
            "complete"
        } else if r.stopped.is_some() {
            "stopped"
        } else if r.finished_at.is_none() {
            "running"
        } else {
            "incomplete"
        };
        rows.push_str(&format!(
            "<tr><td><a href=\"/runs/{id}/{token}\">{run}</a></td><td>{bench}</td><td>{model}</td><td>{branch}</td><td>{started}</td><td>{state}</td><td class=\"n\">{done}/{planned}</td><td class=\"n\">{failed}</td></tr>\n",
            id = url_segment(&r.run_id),
            run = esc(&r.run_id),
            bench = esc(&r.bench),
            model = esc(&r.model),
            branch = esc(r.git_branch.as_deref().unwrap_or("")),
            started = esc(&r.started_at),
            done = r.jobs_finished,
            planned = r.jobs_planned,
            failed = r.jobs_failed,
        ));
    }
    let hidden_token = shared.token_field();
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>promptgauge view</title>\n<style>body{{font:14px system-ui,sans-serif;margin:1.5em}}table{{border-collapse:collapse}}td,th{{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left}}td.n{{text-align:right}}form label{{margin-right:.8em}}</style></head>\n<body><h1>Runs</h1>\n<form method=\"get\" action=\"/\">{hidden_token}{bench}{branch}{model}<label>status <select name=\"status\">{any}{complete}{stopped}{failed}</select></label>{q}<button>Filter</button></form>\n<p>{count}</p>\n<table><thead><tr><th>run</th><th>bench</th><th>model</th><th>branch</th><th>started</th><th>status</th><th>jobs</th><th>failed</th></tr></thead><tbody>\n{rows}</tbody></table></body></html>\n",
        bench = field("bench", &query.bench),
        branch = field("branch", &query.branch),
        model = field("model", &query.model),
        q = field("q", &query.q),
        any = option("", "any"),
        complete = option("complete", "complete"),
        stopped = option("stopped", "stopped"),
        failed = option("failed", "with failed jobs"),
        count = match runs.len() {
            1 => "1 run".to_string(),
            n => format!("{n} runs"),
        },
    );
    Html(page).into_response()
}

/// A run id (or a filter's value) as one URL path segment or query value.
fn url_segment(text: &str) -> String {
    crate::report::html::percent_encode(text, b"")
}

async fn run_report(State(shared): State<Arc<Shared>>, Path(run): Path<String>) -> Response {
    serve_run_file(&shared, &run, "report.html").await
}

async fn run_file(
    State(shared): State<Arc<Shared>>,
    Path((run, file)): Path<(String, String)>,
) -> Response {
    serve_run_file(&shared, &run, &file).await
}

/// A recorded run's folder, by its run id (the store says where it is).
async fn folder_of(shared: &Shared, run_id: &str) -> Option<PathBuf> {
    let filter = Filter {
        run_id: Some(run_id.to_string()),
        ..Filter::default()
    };
    let runs = shared.store.runs(&filter).await.ok()?;
    let run = runs.into_iter().find(|r| r.run_id == run_id)?;
    let folder = PathBuf::from(&run.folder);
    Some(if folder.is_absolute() {
        folder
    } else {
        shared.reports.join(folder)
    })
}

/// A run's answers, filtered and paged server-side.
#[derive(Debug, Default, Deserialize)]
struct JobsQuery {
    variant: Option<String>,
    endpoint: Option<String>,
    tag: Option<String>,
    /// `graded`, `failed` or `filtered`.
    status: Option<String>,
    /// Scores from `min` to `max`, both included.
    min: Option<f64>,
    max: Option<f64>,
    /// Words the case id or the answer contains (case aside).
    q: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// A filter's value, when one was given (an empty field is none).
fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

impl JobsQuery {
    fn keeps(&self, r: &crate::runner::JobRecord) -> bool {
        let status = match r.status {
            crate::runner::JobStatus::Graded => "graded",
            crate::runner::JobStatus::Failed => "failed",
            crate::runner::JobStatus::Filtered => "filtered",
        };
        given(&self.variant).is_none_or(|v| r.variant == v)
            && given(&self.endpoint).is_none_or(|e| r.endpoint.as_deref() == Some(e))
            && given(&self.tag).is_none_or(|t| r.tags.iter().any(|x| x == t))
            && given(&self.status).is_none_or(|s| s == status)
            && self.min.is_none_or(|m| r.score().is_some_and(|s| s >= m))
            && self.max.is_none_or(|m| r.score().is_some_and(|s| s <= m))
            && given(&self.q).is_none_or(|q| {
                q.split_whitespace().all(|w| {
                    let w = w.to_lowercase();
                    r.case_id.to_lowercase().contains(&w) || r.output.to_lowercase().contains(&w)
                })
            })
    }
}

/// `/api/runs/ID/jobs`: the run's job records that pass the filters, `limit` (at most 500)
/// from `offset`, in journal order, with how many pass in all. Each planned job once, as
/// every report reads the journal (a resend in its failure's place).
async fn run_jobs(
    State(shared): State<Arc<Shared>>,
    Path(run): Path<String>,
    Query(query): Query<JobsQuery>,
) -> Response {
    match page_of(&shared, &run, query).await {
        Ok(p) => axum::Json(serde_json::json!({
            "matched": p.matched, "offset": p.offset, "limit": p.limit, "jobs": p.jobs,
        }))
        .into_response(),
        Err(e) => e,
    }
}

/// One page of a run's answers that pass the filters.
struct Page {
    jobs: Vec<crate::runner::JobRecord>,
    /// How many pass, in all.
    matched: usize,
    offset: usize,
    limit: usize,
}

/// Reads `run`'s journal as the reports do, keeping the page `query` asks for.
async fn page_of(shared: &Shared, run: &str, query: JobsQuery) -> Result<Page, Response> {
    let Some(folder) = folder_of(shared, run).await else {
        return Err((StatusCode::NOT_FOUND, "no such run\n").into_response());
    };
    let read = tokio::task::spawn_blocking(move || {
        let dir = crate::runner::RunDir::at(folder);
        let record = dir.read_record().map_err(|e| e.to_string())?;
        let keys = record.plan_keys();
        let (offset, limit) = (
            query.offset.unwrap_or(0),
            query.limit.unwrap_or(50).min(500),
        );
        let (mut matched, mut jobs) = (0usize, Vec::new());
        dir.replay(&keys, |r| {
            if query.keeps(&r) {
                if matched >= offset && jobs.len() < limit {
                    jobs.push(r);
                }
                matched += 1;
            }
        })
        .map_err(|e| e.to_string())?;
        Ok::<_, String>(Page {
            jobs,
            matched,
            offset,
            limit,
        })
    })
    .await;
    match read {
        Ok(Ok(page)) => Ok(page),
        Ok(Err(e)) => Err((StatusCode::INTERNAL_SERVER_ERROR, e).into_response()),
        Err(_) => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            "the journal could not be read",
        )
            .into_response()),
    }
}

/// `/runs/ID/answers`: a run's answers as a page, filtered and paged by the server (the
/// filters of `/api/runs/ID/jobs` as a form). Every answer is shown as text.
async fn answers_page(
    State(shared): State<Arc<Shared>>,
    Path(run): Path<String>,
    Query(query): Query<JobsQuery>,
) -> Response {
    let esc = crate::report::html::esc;
    let form: Vec<(&str, String)> = vec![
        ("variant", query.variant.clone().unwrap_or_default()),
        ("endpoint", query.endpoint.clone().unwrap_or_default()),
        ("tag", query.tag.clone().unwrap_or_default()),
        ("status", query.status.clone().unwrap_or_default()),
        ("q", query.q.clone().unwrap_or_default()),
    ];
    let page = match page_of(&shared, &run, query).await {
        Ok(p) => p,
        Err(e) => return e,
    };
    let token = shared.token_field();
    let fields: String = form
        .iter()
        .map(|(name, value)| text_field(name, value))
        .collect();
    let mut rows = String::new();
    for j in &page.jobs {
        rows.push_str(&format!(
            "<tr><td>{case}</td><td>{arm}</td><td>{status}</td><td class=\"n\">{score}</td><td><pre>{output}</pre></td><td>{why}</td></tr>\n",
            case = esc(&j.case_id),
            arm = esc(&j.arm()),
            status = match j.status {
                crate::runner::JobStatus::Graded => "graded",
                crate::runner::JobStatus::Failed => "failed",
                crate::runner::JobStatus::Filtered => "filtered",
            },
            score = j.score().map(|s| format!("{s:.2}")).unwrap_or_default(),
            output = esc(&crate::report::visible(&j.output, 2000)),
            why = esc(&crate::report::visible(j.error.as_deref().unwrap_or(""), 300)),
        ));
    }
    let link = |offset: usize| {
        let mut q: Vec<String> = form
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", url_segment(v)))
            .collect();
        q.push(format!("offset={offset}"));
        q.push(format!("limit={}", page.limit));
        if let Some(t) = &shared.token {
            q.push(format!("token={t}"));
        }
        format!("answers?{}", q.join("&"))
    };
    let mut nav = String::new();
    if page.offset > 0 {
        let back = page.offset.saturating_sub(page.limit);
        nav.push_str(&format!("<a href=\"{}\">previous</a> ", esc(&link(back))));
    }
    if page.offset + page.jobs.len() < page.matched {
        let next = page.offset + page.limit;
        nav.push_str(&format!("<a href=\"{}\">next</a>", esc(&link(next))));
    }
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{run} — answers</title>\n<style>body{{font:14px system-ui,sans-serif;margin:1.5em}}table{{border-collapse:collapse}}td,th{{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}}td.n{{text-align:right}}pre{{white-space:pre-wrap;margin:0;max-width:60em}}form label{{margin-right:.8em}}</style></head>\n<body><h1>{run}: answers</h1>\n<form method=\"get\">{token}{fields}<button>Filter</button></form>\n<p>{shown} of {matched} answers that match, from {from}. {nav}</p>\n<table><thead><tr><th>case</th><th>variant</th><th>status</th><th>score</th><th>answer</th><th>why</th></tr></thead><tbody>\n{rows}</tbody></table></body></html>\n",
        run = esc(&run),
        shown = page.jobs.len(),
        matched = page.matched,
        from = page.offset + 1,
    );
    Html(html).into_response()
}

/// One of a recorded run's reports, by its run id and a name from [`RUN_FILES`]: the only
/// files ever served.
async fn serve_run_file(shared: &Shared, run_id: &str, name: &str) -> Response {
    let not_found = || (StatusCode::NOT_FOUND, "no such run or file\n").into_response();
    let Some(&(file, content_type)) = RUN_FILES.iter().find(|(f, _)| *f == name) else {
        return not_found();
    };
    let Some(folder) = folder_of(shared, run_id).await else {
        return not_found();
    };
    match crate::files::read_capped(&folder.join(file), 256 * 1024 * 1024) {
        Ok(bytes) => {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            (headers, bytes).into_response()
        }
        Err(_) => not_found(),
    }
}
