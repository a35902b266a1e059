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
use crate::report::html::esc;
use crate::report::rows::{RunRow, VariantRow};
use crate::store::Filter;

/// The runs list's filters, as query parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunsQuery {
    bench: Option<String>,
    branch: Option<String>,
    model: Option<String>,
    /// `complete`, `stopped` or `failed`.
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
            && !matches!(s, "complete" | "stopped" | "failed")
        {
            return Some(format!(
                "status={s}: give complete, stopped or failed (with failed jobs)"
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

/// A variant's headline figure: its mean score (accuracy when scores are 0 or 1) and
/// interval.
fn headline(v: &VariantRow, scored: bool) -> String {
    let (x, lo, hi) = if scored {
        (v.mean_score, v.score_ci_low, v.score_ci_high)
    } else {
        (v.accuracy, v.ci_low, v.ci_high)
    };
    let name = match &v.endpoint {
        Some(e) => format!("{e}/{}", v.variant),
        None => v.variant.clone(),
    };
    match (x, lo, hi) {
        (Some(x), Some(lo), Some(hi)) => format!(
            "{} {:.1}% <span class=\"muted\">[{:.1}, {:.1}]</span>",
            esc(&name),
            x * 100.0,
            lo * 100.0,
            hi * 100.0
        ),
        (Some(x), _, _) => format!("{} {:.1}%", esc(&name), x * 100.0),
        _ => format!("{} —", esc(&name)),
    }
}

/// A run's state in words.
fn state(r: &RunRow) -> &'static str {
    if r.complete {
        "complete"
    } else if r.stopped.is_some() {
        "stopped"
    } else {
        "incomplete"
    }
}

/// Every run, newest first, with the filters as a form, runs in progress above them, and
/// two to compare chosen by their boxes.
pub(super) async fn page(
    State(shared): State<Arc<Shared>>,
    Checked(query): Checked<RunsQuery>,
) -> Response {
    let (runs, variants) = match runs_of(&shared, &query).await {
        Ok(r) => r,
        Err(e) => return e,
    };
    let field = |name: &str, value: &Option<String>| text_field(name, given(value).unwrap_or(""));
    let status = given(&query.status).unwrap_or("");
    let option = |v: &str, label: &str| {
        let selected = if v == status { " selected" } else { "" };
        format!("<option value=\"{v}\"{selected}>{label}</option>")
    };
    let mut rows = String::new();
    for r in &runs {
        let figures: Vec<String> = variants
            .get(&r.run_id)
            .map(|vs| vs.iter().map(|v| headline(v, r.scored)).collect())
            .unwrap_or_default();
        rows.push_str(&format!(
            "<tr><td><input type=\"checkbox\" name=\"run\" value=\"{run}\" aria-label=\"compare {run}\"></td><td><a href=\"/runs/{id}/\">{run}</a></td><td><a href=\"/history/{bench_id}\">{bench}</a></td><td>{model}</td><td>{branch}</td><td>{started}</td><td>{state}</td><td class=\"n\">{done}/{planned}</td><td class=\"n\">{failed}</td><td>{figures}</td></tr>\n",
            id = url_segment(&r.run_id),
            run = esc(&r.run_id),
            bench_id = url_segment(&r.bench),
            bench = esc(&r.bench),
            model = esc(&r.model),
            branch = esc(r.git_branch.as_deref().unwrap_or("")),
            started = esc(&r.started_at),
            state = state(r),
            done = r.jobs_finished,
            planned = r.jobs_planned,
            failed = r.jobs_failed,
            figures = figures.join("<br>"),
        ));
    }
    let body = format!(
        "<h1>Runs</h1>\n<div id=\"live\" class=\"live\" hidden></div>\n<form method=\"get\" action=\"/\">{bench}{branch}{model}<label>status <select name=\"status\">{any}{complete}{stopped}{failed}</select></label><label>since <input name=\"since\" type=\"date\" value=\"{since}\"></label>{q}<button>Filter</button></form>\n<form method=\"get\" action=\"/compare\">\n<p>{count}. <button id=\"compare\">Compare the two ticked</button></p>\n<table id=\"runs\"><thead><tr><th></th><th>run</th><th>bench</th><th>model</th><th>branch</th><th>started</th><th>status</th><th>jobs</th><th>failed</th><th>figure per variant [interval]</th></tr></thead><tbody>\n{rows}</tbody></table></form>\n<script>{LIVE_LIST}</script>",
        bench = field("bench", &query.bench),
        branch = field("branch", &query.branch),
        model = field("model", &query.model),
        q = field("q", &query.q),
        since = esc(given(&query.since).unwrap_or("")),
        any = option("", "any"),
        complete = option("complete", "complete"),
        stopped = option("stopped", "stopped"),
        failed = option("failed", "with failed jobs"),
        count = match runs.len() {
            1 => "1 run".to_string(),
            n => format!("{n} runs"),
        },
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
