//! The runs: every recorded run, newest first, filtered by the server; any two compared;
//! a bench's history.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::page::{Checked, NAV, failed, given, refuse, shell, text_field, url_segment};
use super::shared::Shared;
use promptgauge_report::html::esc;
use promptgauge_report::rows::{RunRow, VariantRow};
use promptgauge_store::Filter;

/// The runs list's filters, as query parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunsQuery {
    bench: Option<String>,
    branch: Option<String>,
    model: Option<String>,
    /// `complete`, `stopped`, `failed` (with failed jobs), `finished` (complete, none
    /// failed) or `partial` (not every job finished, none failed): the last three are the
    /// words of the list's status badges.
    status: Option<String>,
    /// Runs started on or after this day (`2026-11-01`, UTC).
    since: Option<String>,
    /// Words every shown run's bench, model, endpoint (its base URL), branch, commit or id
    /// contains.
    q: Option<String>,
    /// Only these runs, by id, comma-separated.
    ids: Option<String>,
    limit: Option<usize>,
    /// `--public`'s access token (read by the guard).
    #[allow(dead_code)]
    token: Option<String>,
}

impl RunsQuery {
    fn filter(&self) -> Filter {
        Filter {
            bench: given(&self.bench).map(String::from),
            branch: given(&self.branch).map(String::from),
            model: given(&self.model).map(String::from),
            ..Filter::default()
        }
    }

    /// What is wrong with a filter's value, if anything.
    fn problem(&self) -> Option<String> {
        if let Some(s) = given(&self.status)
            && !matches!(
                s,
                "complete" | "stopped" | "failed" | "finished" | "partial"
            )
        {
            return Some(format!(
                "status={s}: give complete, stopped or failed (with failed jobs), finished (complete, none failed) or partial (not every job finished)"
            ));
        }
        if let Some(d) = given(&self.since) {
            let b = d.as_bytes();
            let day = b.len() == 10
                && b[4] == b'-'
                && b[7] == b'-'
                && b.iter()
                    .enumerate()
                    .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
            if !day {
                return Some(format!("since={d}: give a day, 2026-11-01 (UTC)"));
            }
        }
        None
    }

    /// How many runs are shown (500 unless asked).
    fn limit(&self) -> usize {
        self.limit.unwrap_or(500).clamp(1, 10_000)
    }

    /// Whether `run` passes the filters the store cannot apply.
    fn keeps(&self, run: &RunRow) -> bool {
        let status_ok = match given(&self.status).unwrap_or("") {
            "complete" => run.complete,
            "stopped" => run.stopped.is_some(),
            "failed" => run.jobs_failed > 0,
            "finished" => run.complete && run.jobs_failed == 0,
            "partial" => !run.complete && run.jobs_failed == 0,
            _ => true,
        };
        let since_ok = given(&self.since).is_none_or(|d| run.started_at.as_str() >= d);
        let words_ok = given(&self.q).unwrap_or("").split_whitespace().all(|w| {
            let w = w.to_lowercase();
            [
                run.bench.as_str(),
                run.model.as_str(),
                run.base_url.as_str(),
                run.run_id.as_str(),
                run.git_branch.as_deref().unwrap_or(""),
                run.git_commit.as_deref().unwrap_or(""),
            ]
            .iter()
            .any(|f| f.to_lowercase().contains(&w))
        });
        let ids_ok = given(&self.ids).is_none_or(|ids| ids.split(',').any(|id| id == run.run_id));
        status_ok && since_ok && words_ok && ids_ok
    }
}

/// The runs that pass `query`, newest first, with their variants' figures.
async fn runs_of(
    shared: &Shared,
    query: &RunsQuery,
) -> Result<(Vec<RunRow>, HashMap<String, Vec<VariantRow>>), Response> {
    if let Some(why) = query.problem() {
        return Err(refuse(StatusCode::BAD_REQUEST, &why));
    }
    let filter = query.filter();
    let mut runs = shared.store.runs(&filter).await.map_err(failed)?;
    runs.retain(|r| query.keeps(r));
    runs.reverse();
    runs.truncate(query.limit());
    let variants = shared.store.variants(&filter).await.map_err(failed)?;
    Ok((runs, variants))
}

pub(super) async fn json(
    State(shared): State<Arc<Shared>>,
    Checked(query): Checked<RunsQuery>,
) -> Response {
    match runs_of(&shared, &query).await {
        Ok((runs, _)) => axum::Json(runs).into_response(),
        Err(e) => e,
    }
}

/// One run's row: its tick (to compare), id with its start and matrix, bench with its
/// model and branch, status and gates at a glance, jobs, and each arm's figure as a small
/// interval bar.
fn run_row(r: &RunRow, variants: Option<&Vec<VariantRow>>, gates: &str) -> String {
    let branch = match r.git_branch.as_deref() {
        Some(b) if !b.is_empty() => format!("<div class=\"muted\">branch {}</div>", esc(b)),
        _ => String::new(),
    };
    format!(
        "<tr><td><input type=\"checkbox\" name=\"run\" value=\"{run}\" aria-label=\"compare {run}\"></td><td><a href=\"/runs/{id}/\">{run}</a><div class=\"muted\">{started} · <a class=\"matrix\" href=\"/runs/{id}/matrix\">matrix</a></div></td><td><a href=\"/history/{bench_id}\">{bench}</a><div class=\"muted\">{model}</div>{branch}</td><td>{status}{gates}</td><td class=\"n\">{done}/{planned}</td><td>{figures}</td></tr>\n",
        id = url_segment(&r.run_id),
        run = esc(&r.run_id),
        bench_id = url_segment(&r.bench),
        bench = esc(&r.bench),
        model = esc(&r.model),
        started = esc(&r.started_at.replace('T', " ")),
        status = super::glance::status_badge(r),
        done = r.jobs_finished,
        planned = r.jobs_planned,
        figures = variants.map_or(String::new(), |vs| super::glance::figures(vs, r.scored)),
    )
}

/// The filter form's fields, each showing what `query` asks for.
fn filter_fields(query: &RunsQuery) -> String {
    let field = |name: &str, value: &Option<String>| text_field(name, given(value).unwrap_or(""));
    let status = given(&query.status).unwrap_or("");
    let option = |v: &str, label: &str| {
        let selected = if v == status { " selected" } else { "" };
        format!("<option value=\"{v}\"{selected}>{label}</option>")
    };
    let options: String = [
        ("", "any"),
        ("finished", "finished"),
        ("partial", "partial"),
        ("complete", "complete"),
        ("stopped", "stopped"),
        ("failed", "with failed jobs"),
    ]
    .iter()
    .map(|(v, l)| option(v, l))
    .collect();
    format!(
        "{bench}{branch}{model}<label>status <select name=\"status\">{options}</select></label><label>since <input name=\"since\" type=\"date\" value=\"{since}\"></label>{q}<button>Filter</button>",
        bench = field("bench", &query.bench),
        branch = field("branch", &query.branch),
        model = field("model", &query.model),
        q = field("q", &query.q),
        since = esc(given(&query.since).unwrap_or("")),
    )
}

/// Every run, newest first, with the filters as a form (their state in the URL's query,
/// so a reload or a shared link keeps them), runs in progress above them, and two to
/// compare chosen by their boxes.
pub(super) async fn page(
    State(shared): State<Arc<Shared>>,
    Checked(query): Checked<RunsQuery>,
) -> Response {
    let (runs, variants) = match runs_of(&shared, &query).await {
        Ok(r) => r,
        Err(e) => return e,
    };
    let count = match runs.len() {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    // The gates each run's summary.json recorded: files read off the async threads.
    let reader = shared.clone();
    let rows = tokio::task::spawn_blocking(move || {
        let mut rows = String::new();
        for r in &runs {
            let gates = super::glance::gate_badge(&reader.resolve(&r.folder));
            rows.push_str(&run_row(r, variants.get(&r.run_id), &gates));
        }
        rows
    })
    .await
    .unwrap_or_default();
    let body = format!(
        "<h1>Runs</h1>\n<div id=\"live\" class=\"live\" hidden></div>\n<form method=\"get\" action=\"/\">{fields}</form>\n<form method=\"get\" action=\"/compare\">\n<p>{count}, newest first. <button id=\"compare\">Compare the two ticked</button></p>\n<div class=\"scroll\"><table id=\"runs\"><thead><tr><th></th><th>run, started (UTC)</th><th>bench, model</th><th>status</th><th class=\"n\">jobs</th><th>accuracy or mean score per arm [interval]</th></tr></thead><tbody>\n{rows}</tbody></table></div></form>\n<script>{LIVE_LIST}</script>",
        fields = filter_fields(&query),
    );
    shell("promptgauge view", &body)
}

/// The runs page asks twice a second which runs are in progress, and lists them above the
/// recorded ones (text only: names are set as text, never as markup).
const LIVE_LIST: &str = r#"
(function(){
  var box=document.getElementById('live');
  function show(runs){
    box.textContent='';
    box.hidden=runs.length===0;
    if(!runs.length)return;
    var h=document.createElement('strong');h.textContent='Running now: ';box.appendChild(h);
    runs.forEach(function(r){
      var a=document.createElement('a');a.href='/live/'+encodeURIComponent(r.name);a.className='live-run';
      a.textContent=r.name+' ('+r.bench+', '+r.done+'/'+r.planned+')';
      box.appendChild(a);box.appendChild(document.createTextNode(' '));
    });
  }
  function poll(){fetch('/api/live').then(function(r){return r.json()}).then(show).catch(function(){});}
  poll();setInterval(poll,500);
})();
"#;

/// `/compare?run=A&run=B` (or `a=`/`b=`): run B against run A, as `compare` writes
/// compare.html.
pub(super) async fn compare(State(shared): State<Arc<Shared>>, RawQuery(q): RawQuery) -> Response {
    let q = q.unwrap_or_default();
    let mut picked: Vec<String> = Vec::new();
    let (mut a, mut b) = (None, None);
    for (k, v) in form_urlencoded(&q) {
        match k.as_str() {
            "run" => picked.push(v),
            "a" => a = Some(v),
            "b" => b = Some(v),
            _ => {}
        }
    }
    // Ticked in the list (newest first): the older is A.
    if let [newer, older] = picked.as_slice() {
        a = Some(older.clone());
        b = Some(newer.clone());
    }
    let (Some(a), Some(b)) = (a, b) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "tick two runs to compare (or give ?a=RUN_ID&b=RUN_ID)",
        );
    };
    // Runs the store records, by id: a request never names a folder.
    let (Some(fa), Some(fb)) = (shared.folder_of(&a).await, shared.folder_of(&b).await) else {
        return refuse(StatusCode::NOT_FOUND, "no such run in the history store");
    };
    match shared.commands.compare(&fa, &fb).await {
        Ok(html) => {
            // Scores with named parts: each part's figures in both runs, side by side.
            let (sa, sb) = (super::parts::summary_in(&fa), super::parts::summary_in(&fb));
            let section = match (&sa, &sb) {
                (Some(sa), Some(sb)) if !super::parts::has_section(&html) => {
                    super::parts::compare_section(sa, sb)
                }
                _ => None,
            };
            match section {
                Some(section) => with_nav(
                    &super::parts::with_section(&html, &section),
                    "<nav><a href=\"/\">Runs</a><a href=\"#parts\">Parts</a></nav>",
                ),
                None => with_nav(&html, NAV),
            }
        }
        Err(e) => refuse(StatusCode::UNPROCESSABLE_ENTITY, &e),
    }
}

/// `/history/BENCH`: the bench's history, as `history` writes history.html.
pub(super) async fn history(
    State(shared): State<Arc<Shared>>,
    Path(bench): Path<String>,
) -> Response {
    let link = |run: &str| format!("/runs/{}/", url_segment(run));
    match shared.commands.history(&bench, &link).await {
        Ok(html) => with_nav(&html, NAV),
        Err(e) => refuse(StatusCode::NOT_FOUND, &e),
    }
}

/// A page a command rendered whole (report.html, compare.html, history.html), with the
/// application's links (`nav`) put in after its `<body>`: the page itself is the command's.
pub(super) fn with_nav(html: &str, nav: &str) -> Response {
    // The page's own stylesheet knows no `nav`: the links bring their look with them.
    let nav = nav.replacen(
        "<nav>",
        &format!("<nav><style>{}</style>", super::page::NAV_STYLE),
        1,
    );
    let html = match html.find("<body>") {
        Some(i) => {
            let at = i + "<body>".len();
            format!("{}{nav}{}", &html[..at], &html[at..])
        }
        None => html.to_string(),
    };
    Html(html).into_response()
}

/// `k=v&…` pairs, decoded.
pub(super) fn form_urlencoded(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// `%XX` and `+` decoded (bad escapes kept as written).
pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
