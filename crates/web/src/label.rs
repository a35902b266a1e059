//! Labelling in the page: `label`'s workflow in the browser. A seeded sample of a run's
//! judged answers, each shown without the judge's verdict; a person's score is written to
//! the run's labels.jsonl exactly as `promptgauge label` writes it (under the run folder's
//! lock, one line at a time), the run's reports are written again, and the page shows the
//! judge against people — agreement, kappa, each variant's corrected score — as they now
//! stand.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::guard::same_secret;
use super::page::{Checked, Refused, failed, pre_text, refuse, shell, url_segment};
use super::run::{Indexed, indexed};
use super::shared::Shared;
use promptgauge_report::html::esc;
use promptgauge_report::labels;
use promptgauge_runner::RunDir;
use promptgauge_runner::journal::JobRecord;

/// Which sample, and how far into it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LabelQuery {
    /// The sample's seed (as `label --seed`, 1 by default).
    #[serde(default = "default_seed")]
    seed: u64,
    /// How many answers the sample holds (as `label --sample`).
    #[serde(default = "default_sample")]
    sample: usize,
    /// Answers skipped so far.
    #[serde(default)]
    at: usize,
    /// `--public`'s access token (read by the guard).
    #[allow(dead_code)]
    token: Option<String>,
}

/// `label`'s defaults.
fn default_seed() -> u64 {
    1
}

fn default_sample() -> usize {
    30
}

/// `/runs/ID/label`: the next answer of the sample not labelled yet, and the judge
/// against people so far.
pub(super) async fn page_(
    shared: Arc<Shared>,
    run: String,
    query: LabelQuery,
) -> Result<Response, Response> {
    let indexed = indexed(&shared, &run).await?;
    let (index, journal) = (indexed.index.clone(), indexed.journal());
    let judged = tokio::task::spawn_blocking(move || index.judged(&journal))
        .await
        .map_err(failed)?
        .map_err(failed)?;
    let id = url_segment(&run);
    if judged.is_empty() {
        let body = format!(
            "<h1><a href=\"/runs/{id}/\">{}</a>: label</h1><p>This run has no judged answers to label: label a run whose bench scores with <code>kind: judge</code>.</p>",
            esc(&run)
        );
        return Ok(shell(&format!("{run} — label"), &body));
    }
    let dir = RunDir::at(&indexed.folder);
    let (already, _) = labels::of_run(&dir.labels()).map_err(failed)?;
    let labelled = already.len();
    // The sample is drawn once from every judged answer (the same for the same seed, as
    // the page is reloaded); those labelled since leave it.
    let drawn = labels::sample(judged, &labels::Labels::new(), query.seed, query.sample);
    let size = drawn.len();
    let sample: Vec<_> = drawn
        .into_iter()
        .filter(|r| !already.contains_key(&r.key()))
        .collect();
    let mut b = format!(
        "<h1><a href=\"/runs/{id}/\">{}</a>: label</h1>\n<p class=\"muted\">A seeded sample (seed {}) of the judged answers, without the judge's verdict; each labelled answer leaves it. Keys: <kbd>y</kbd> right, <kbd>n</kbd> wrong, <kbd>0</kbd>–<kbd>9</kbd> a score of 0.0 to 0.9, <kbd>s</kbd> skip. {labelled} labelled so far.</p>\n",
        esc(&run),
        query.seed
    );
    match sample.get(query.at) {
        None => {
            let _ = write!(
                b,
                "<p id=\"done\">Nothing left to label in this sample of {size}: <a href=\"/runs/{id}/label?seed={}&amp;sample={}\">a larger sample</a>.</p>",
                query.seed,
                query.sample * 2
            );
        }
        Some(r) => {
            let skip = format!(
                "/runs/{id}/label?seed={}&sample={}&at={}",
                query.seed,
                query.sample,
                query.at + 1
            );
            let _ = write!(
                b,
                "<div id=\"item\"><p>{} left of a sample of {size} · case {} · variant {} · repeat {}</p><h3>Question</h3><pre id=\"question\">{}</pre><h3>Expected</h3><pre>{}</pre><h3>Answer</h3><pre id=\"answer\">{}</pre>\n<form id=\"label\" method=\"post\" action=\"/runs/{id}/label?seed={}&amp;sample={}&amp;at={}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><input type=\"hidden\" name=\"job\" value=\"{}\"><input type=\"hidden\" id=\"score\" name=\"score\" value=\"\"><button type=\"submit\" id=\"yes\" data-score=\"1\">y · right</button> <button type=\"submit\" id=\"no\" data-score=\"0\">n · wrong</button> <a id=\"skip\" href=\"{}\">s · skip</a></form></div>",
                sample.len() - query.at,
                esc(&r.case_id),
                esc(&r.arm()),
                r.repeat,
                pre_text(&labels::question(r), 100_000),
                pre_text(&r.expected.join("\n"), 100_000),
                pre_text(&r.output, 100_000),
                query.seed,
                query.sample,
                query.at,
                esc(&shared.csrf),
                r.job,
                esc(&skip),
            );
        }
    }
    b.push_str(&agreement(&dir));
    b.push_str(&format!("<script>{KEYS}</script>"));
    Ok(shell(&format!("{run} — label"), &b))
}

pub(super) async fn page(
    State(shared): State<Arc<Shared>>,
    Path(run): Path<String>,
    Checked(query): Checked<LabelQuery>,
) -> Response {
    page_(shared, run, query).await.unwrap_or_else(|e| e)
}

/// The judge against people per variant, from the run's summary.json as its reports were
/// last written.
fn agreement(dir: &RunDir) -> String {
    let summary: Option<promptgauge_report::summary::Summary> =
        promptgauge_base::files::read_capped(&dir.file("summary.json"), 256 * 1024 * 1024)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(summary) = summary else {
        return String::new();
    };
    let pct = |x: Option<f64>| x.map(|v| format!("{:.1}%", v * 100.0)).unwrap_or_default();
    let mut b = String::from(
        "<h2>The judge against people</h2>\n<table id=\"agreement\"><thead><tr><th>variant</th><th>labels</th><th>agreement</th><th>kappa</th><th>judge's score</th><th>corrected score</th></tr></thead><tbody>",
    );
    for v in &summary.variants {
        let not_yet = format!(
            "— (needs {} labelled cases, or every judged case labelled)",
            labels::MIN_LABELS
        );
        let Some(l) = &v.labelled else {
            let _ = write!(
                b,
                "<tr><td>{}</td><td class=\"n\">0</td><td></td><td></td><td>{}</td><td class=\"corrected\">{not_yet}</td></tr>",
                esc(&v.name),
                pct(v.mean_score.or(v.accuracy))
            );
            continue;
        };
        let interval = |x: Option<f64>, lo: Option<f64>, hi: Option<f64>| match (x, lo, hi) {
            (Some(_), Some(lo), Some(hi)) => {
                format!("{} [{}, {}]", pct(x), pct(Some(lo)), pct(Some(hi)))
            }
            (Some(_), _, _) => pct(x),
            _ => String::new(),
        };
        let corrected = match l.corrected {
            Some(_) => interval(l.corrected, l.corrected_low, l.corrected_high),
            None => not_yet.clone(),
        };
        let _ = write!(
            b,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"corrected\">{corrected}</td></tr>",
            esc(&v.name),
            l.labels,
            interval(l.agreement, l.agreement_low, l.agreement_high),
            l.kappa.map(|k| format!("{k:.2}")).unwrap_or_default(),
            pct(v.mean_score.or(v.accuracy)),
        );
    }
    b.push_str("</tbody></table>");
    b
}

/// The page's keys: y, n, 0–9 submit a score; s skips.
const KEYS: &str = r#"
(function(){
  var form=document.getElementById('label');if(!form)return;
  var score=document.getElementById('score');
  form.querySelectorAll('button[data-score]').forEach(function(b){b.addEventListener('click',function(){score.value=b.dataset.score;});});
  document.addEventListener('keydown',function(e){
    if(e.ctrlKey||e.metaKey||e.altKey)return;
    var k=e.key;
    if(k==='y'){score.value='1';form.submit();}
    else if(k==='n'){score.value='0';form.submit();}
    else if(/^[0-9]$/.test(k)){score.value=(Number(k)/10).toString();form.submit();}
    else if(k==='s'){location.href=document.getElementById('skip').href;}
  });
})();
"#;

/// `POST /runs/ID/label`: one person's score of one judged answer (`job`, `score`), with
/// the page's CSRF token. Written under the run folder's lock; then the run's reports are
/// written again, and the page shows the next answer.
pub(super) async fn save(
    State(shared): State<Arc<Shared>>,
    Path(run): Path<String>,
    Checked(query): Checked<LabelQuery>,
    body: String,
) -> Response {
    let (job, score) = match read_form(&shared, &body) {
        Ok(form) => form,
        Err((status, why)) => return refuse(status, why),
    };
    let indexed = match indexed(&shared, &run).await {
        Ok(i) => i,
        Err(e) => return e,
    };
    let record = match judged(&indexed, job).await {
        Ok(record) => record,
        Err(refused) => return refused,
    };
    let _one = shared.labelling.lock().await;
    let label = labels::label_of(&record, score);
    if let Err(refused) = append(indexed.folder.clone(), label).await {
        return refused;
    }
    if let Err(e) = shared.commands.report(&indexed.folder).await {
        return failed(format!(
            "the label was written, but the reports could not be: {e}"
        ));
    }
    Redirect::to(&format!(
        "/runs/{}/label?seed={}&sample={}&at={}",
        url_segment(&run),
        query.seed,
        query.sample,
        query.at
    ))
    .into_response()
}

/// The form's job and score, once its CSRF token is the page's; or why it is refused.
fn read_form(shared: &Shared, body: &str) -> Result<(u32, f64), Refused> {
    let fields = super::runs::form_urlencoded(body);
    let field = |k: &str| {
        fields
            .iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.as_str())
    };
    if !field("csrf").is_some_and(|f| same_secret(f, &shared.csrf)) {
        return Err((
            StatusCode::FORBIDDEN,
            "this request lacks the page's CSRF token: label from the page itself",
        ));
    }
    let score = match field("score").map(str::trim).map(str::parse::<f64>) {
        Some(Ok(s)) if (0.0..=1.0).contains(&s) => s,
        _ => {
            return Err((StatusCode::BAD_REQUEST, "score: give a number from 0 to 1"));
        }
    };
    let Some(Ok(job)) = field("job").map(str::parse::<u32>) else {
        return Err((StatusCode::BAD_REQUEST, "job: give the answer's job number"));
    };
    Ok((job, score))
}

/// Job `job` of the run, when it is a judged answer (only those are labelled).
async fn judged(indexed: &Indexed, job: u32) -> Result<JobRecord, Response> {
    let (index, journal) = (indexed.index.clone(), indexed.journal());
    match tokio::task::spawn_blocking(move || index.job(&journal, job)).await {
        Ok(Ok(Some(r))) if !r.judge.is_empty() && r.score.is_some() => Ok(r),
        Ok(Ok(_)) => Err(refuse(
            StatusCode::BAD_REQUEST,
            "that job is not a judged answer of this run",
        )),
        Ok(Err(e)) => Err(failed(e)),
        Err(e) => Err(failed(e)),
    }
}

/// Appends the label to the run's labels.jsonl under the run folder's lock, as
/// `promptgauge label` does; an answer labelled already is refused.
async fn append(folder: std::path::PathBuf, label: labels::Label) -> Result<(), Response> {
    let written = tokio::task::spawn_blocking(move || {
        let dir = RunDir::at(&folder);
        let lock = dir
            .lock()
            .map_err(|e| (StatusCode::CONFLICT, e.to_string()))?;
        let (mut appender, already, _) = labels::Appender::open(&dir.labels())
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        // A second press, or a form sent again after Back: one label per answer.
        if already.contains_key(&label.key()) {
            return Err((
                StatusCode::CONFLICT,
                "this answer is labelled already (labels.jsonl keeps one label per answer here; `promptgauge label --from FILE` replaces labels)".to_string(),
            ));
        }
        appender
            .append(&label)
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        drop(lock);
        Ok::<_, (StatusCode, String)>(())
    })
    .await;
    match written {
        Ok(Ok(())) => Ok(()),
        Ok(Err((status, why))) => Err(refuse(status, &why)),
        Err(e) => Err(failed(e)),
    }
}
