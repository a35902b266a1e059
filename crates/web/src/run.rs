//! A recorded run: its report (report.html as the run wrote it), its answers filtered and
//! paged by the server over an index of the journal, and a job's whole record.

use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::index::{RunIndex, Stamp, Wanted};
use super::page::{
    Checked, failed, given, no_run, pre_text, refuse, shell, text_field, url_segment,
};
use super::shared::Shared;
use promptgauge_report::html::esc;
use promptgauge_runner::journal::{JobRecord, JobStatus};
use promptgauge_runner::{RunDir, record::RunRecord};

/// The files of a run folder the server shows, and their types: nothing else is served.
const RUN_FILES: [(&str, &str); 4] = [
    ("report.html", "text/html; charset=utf-8"),
    ("summary.json", "application/json"),
    ("summary.md", "text/markdown; charset=utf-8"),
    ("summary.csv", "text/csv; charset=utf-8"),
];

/// How many runs' indexes are kept.
const INDEXES_KEPT: usize = 8;

/// `/runs/ID/`: the run's report.html, with the application's links put in.
pub(super) async fn report(State(shared): State<Arc<Shared>>, Path(run): Path<String>) -> Response {
    let Some(folder) = shared.folder_of(&run).await else {
        return no_run();
    };
    if !folder.join("run.json").is_file() {
        return gone(&folder);
    }
    match promptgauge_base::files::read_capped(&folder.join("report.html"), 256 * 1024 * 1024) {
        Ok(bytes) => {
            let mut html = String::from_utf8_lossy(&bytes).into_owned();
            // A score with named parts: their table, in place of the report's own.
            let mut parts_link = "";
            if let Some(section) = super::parts::summary_in(&folder)
                .as_ref()
                .and_then(super::parts::run_section)
            {
                html = super::parts::with_section(&html, &section);
                parts_link = "<a href=\"#parts\">Parts</a>";
            }
            let id = url_segment(&run);
            let links = format!(
                "<nav><a href=\"/\">Runs</a><a href=\"/runs/{id}/answers\">Answers</a><a href=\"/runs/{id}/matrix\">Matrix</a><a href=\"/runs/{id}/label\">Label</a>{parts_link}<a href=\"/runs/{id}/summary.json\">summary.json</a></nav>"
            );
            super::runs::with_nav(&html, &links)
        }
        Err(_) => refuse(StatusCode::NOT_FOUND, "this run has no report.html"),
    }
}

/// `/runs/ID`: its page is `/runs/ID/`.
pub(super) async fn without_slash(Path(run): Path<String>) -> Response {
    axum::response::Redirect::permanent(&format!("/runs/{}/", url_segment(&run))).into_response()
}

/// `/runs/ID/NAME`: one of a run's summaries, by a name from [`RUN_FILES`]: the only files
/// ever served.
pub(super) async fn file(
    State(shared): State<Arc<Shared>>,
    Path((run, name)): Path<(String, String)>,
) -> Response {
    let not_found = || refuse(StatusCode::NOT_FOUND, "no such run or file");
    let Some(&(file, content_type)) = RUN_FILES.iter().find(|(f, _)| *f == name) else {
        return not_found();
    };
    let Some(folder) = shared.folder_of(&run).await else {
        return not_found();
    };
    match promptgauge_base::files::read_capped(&folder.join(file), 256 * 1024 * 1024) {
        Ok(bytes) => {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            (headers, bytes).into_response()
        }
        Err(_) => not_found(),
    }
}

/// The store records a run whose folder is gone (moved, deleted).
pub(super) fn gone(folder: &std::path::Path) -> Response {
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    refuse(
        StatusCode::NOT_FOUND,
        &format!(
            "the history store records this run, but its folder ({name}) is gone: restore it, or rebuild the store from the folders there are (`promptgauge index`)"
        ),
    )
}

/// A run's folder, record and answer index (built once per state of its journal).
pub(super) struct Indexed {
    pub(super) folder: PathBuf,
    pub(super) record: RunRecord,
    pub(super) index: Arc<RunIndex>,
}

impl Indexed {
    pub(super) fn journal(&self) -> PathBuf {
        RunDir::at(&self.folder).journal_path()
    }
}

/// `run`'s folder, record and index.
pub(super) async fn indexed(shared: &Arc<Shared>, run: &str) -> Result<Indexed, Response> {
    let Some(folder) = shared.folder_of(run).await else {
        return Err(no_run());
    };
    if !folder.join("run.json").is_file() {
        return Err(gone(&folder));
    }
    let shared = shared.clone();
    let run = run.to_string();
    let built = tokio::task::spawn_blocking(move || {
        let dir = RunDir::at(&folder);
        let record = dir.read_record().map_err(|e| e.to_string())?;
        let journal = dir.journal_path();
        let cached = shared
            .indexes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&run)
            .cloned();
        let index = match cached {
            Some(i) if i.stamp == Stamp::of(&journal) => i,
            _ => {
                let i = Arc::new(
                    RunIndex::build(&journal, &record.plan_keys()).map_err(|e| e.to_string())?,
                );
                let mut kept = shared.indexes.lock().unwrap_or_else(|p| p.into_inner());
                if kept.len() >= INDEXES_KEPT && !kept.contains_key(&run) {
                    let some = kept.keys().next().cloned();
                    if let Some(k) = some {
                        kept.remove(&k);
                    }
                }
                kept.insert(run, i.clone());
                i
            }
        };
        Ok::<_, String>(Indexed {
            folder,
            record,
            index,
        })
    })
    .await;
    match built {
        Ok(Ok(i)) => Ok(i),
        Ok(Err(e)) => Err(failed(e)),
        Err(e) => Err(failed(e)),
    }
}

/// A run's answers, filtered and paged server-side.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JobsQuery {
    variant: Option<String>,
    endpoint: Option<String>,
    tag: Option<String>,
    /// `graded`, `failed` or `filtered`.
    status: Option<String>,
    /// Scores from `min` to `max`, both included.
    min: Option<String>,
    max: Option<String>,
    /// Only the answers of cases whose arms scored differently (`1`, `on`).
    disagreeing: Option<String>,
    /// Words the case id or the answer contains (case aside).
    q: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
    /// `--public`'s access token (read by the guard).
    #[allow(dead_code)]
    token: Option<String>,
}

fn status_name(s: JobStatus) -> &'static str {
    match s {
        JobStatus::Graded => "graded",
        JobStatus::Failed => "failed",
        JobStatus::Filtered => "filtered",
    }
}

impl JobsQuery {
    /// The filters, or what is wrong with one.
    fn wanted(&self) -> Result<Wanted, String> {
        let number = |name: &str, v: &Option<String>| -> Result<Option<f64>, String> {
            match given(v) {
                None => Ok(None),
                Some(t) => match t.trim().parse::<f64>() {
                    Ok(x) if (0.0..=1.0).contains(&x) => Ok(Some(x)),
                    _ => Err(format!("{name}={t}: give a score from 0 to 1")),
                },
            }
        };
        let status = match given(&self.status) {
            None => None,
            Some("graded") => Some(JobStatus::Graded),
            Some("failed") => Some(JobStatus::Failed),
            Some("filtered") => Some(JobStatus::Filtered),
            Some(other) => {
                return Err(format!("status={other}: give graded, failed or filtered"));
            }
        };
        let (min, max) = (number("min", &self.min)?, number("max", &self.max)?);
        if let (Some(lo), Some(hi)) = (min, max)
            && lo > hi
        {
            return Err(format!("min={lo} is above max={hi}: no score is both"));
        }
        Ok(Wanted {
            variant: given(&self.variant).map(String::from),
            endpoint: given(&self.endpoint).map(String::from),
            tag: given(&self.tag).map(String::from),
            status,
            min,
            max,
            disagreeing: super::page::ticked(&self.disagreeing),
            words: super::page::words(&self.q),
        })
    }

    fn offset(&self) -> usize {
        self.offset.unwrap_or(0)
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or(50).clamp(1, 500)
    }
}

/// One page of a run's answers that pass the filters, and how many pass in all.
async fn page_of(
    shared: &Arc<Shared>,
    run: &str,
    query: &JobsQuery,
) -> Result<(Indexed, Vec<JobRecord>, usize), Response> {
    let wanted = query
        .wanted()
        .map_err(|e| refuse(StatusCode::BAD_REQUEST, &e))?;
    let indexed = indexed(shared, run).await?;
    let (variants, endpoints, tags) = indexed.index.names();
    for (what, wanted, known) in [
        ("variant", &wanted.variant, &variants),
        ("endpoint", &wanted.endpoint, &endpoints),
        ("tag", &wanted.tag, &tags),
    ] {
        if let Some(w) = wanted
            && !known.contains(&w.as_str())
        {
            let known = if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            };
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!("{what}={w}: this run has no such {what} (it has: {known})"),
            ));
        }
    }
    let (offset, limit) = (query.offset(), query.limit());
    let (index, journal) = (indexed.index.clone(), indexed.journal());
    let read =
        tokio::task::spawn_blocking(move || index.page(&journal, &wanted, offset, limit)).await;
    match read {
        Ok(Ok((jobs, matched))) => Ok((indexed, jobs, matched)),
        Ok(Err(e)) => Err(failed(e)),
        Err(e) => Err(failed(e)),
    }
}

/// `/api/runs/ID/jobs`: the run's job records that pass the filters, `limit` (at most 500)
/// from `offset`, in journal order, with how many pass in all. Each planned job once, as
/// every report reads the journal (a resend in its failure's place).
pub(super) async fn jobs_json(
    State(shared): State<Arc<Shared>>,
    Path(run): Path<String>,
    Checked(query): Checked<JobsQuery>,
) -> Response {
    match page_of(&shared, &run, &query).await {
        Ok((_, jobs, matched)) => axum::Json(serde_json::json!({
            "matched": matched, "offset": query.offset(), "limit": query.limit(), "jobs": jobs,
        }))
        .into_response(),
        Err(e) => e,
    }
}

/// A select of `names` (and "any"), `chosen` selected.
pub(super) fn select(name: &str, names: &[&str], chosen: Option<&str>) -> String {
    let mut s = format!("<label>{name} <select name=\"{name}\"><option value=\"\">any</option>");
    for n in names {
        let selected = if Some(*n) == chosen { " selected" } else { "" };
        let _ = write!(
            s,
            "<option value=\"{v}\"{selected}>{v}</option>",
            v = esc(n)
        );
    }
    s + "</select></label>"
}

/// `/runs/ID/answers`: a run's answers as a page, filtered and paged by the server (the
/// filters of `/api/runs/ID/jobs` as a form). Every answer is shown as text.
pub(super) async fn answers(
    State(shared): State<Arc<Shared>>,
    Path(run): Path<String>,
    Checked(query): Checked<JobsQuery>,
) -> Response {
    let (indexed, jobs, matched) = match page_of(&shared, &run, &query).await {
        Ok(p) => p,
        Err(e) => return e,
    };
    let fields = query.form_fields(&indexed.index);
    let id = url_segment(&run);
    let rows = answer_rows(&id, &jobs);
    let nav = query.nav(&id, jobs.len(), matched);
    let offset = query.offset();
    let body = format!(
        "<h1><a href=\"/runs/{id}/\">{run}</a>: answers</h1>\n<form method=\"get\">{fields}<button>Filter</button></form>\n<p id=\"count\">{shown} of {matched} answers that match, from {from} ({all} planned jobs have a record). {nav}</p>\n<table id=\"answers\"><thead><tr><th>case</th><th>variant</th><th>repeat</th><th>status</th><th>score</th><th>answer</th><th>why</th></tr></thead><tbody>\n{rows}</tbody></table>",
        run = esc(&run),
        shown = jobs.len(),
        from = if jobs.is_empty() { offset } else { offset + 1 },
        all = indexed.index.len(),
    );
    shell(&format!("{run} — answers"), &body)
}

impl JobsQuery {
    /// The filter form's fields, each showing what this query asks for (a select only for
    /// the endpoints and tags the run has).
    fn form_fields(&self, index: &RunIndex) -> String {
        let (variants, endpoints, tags) = index.names();
        let mut fields = select("variant", &variants, given(&self.variant));
        if !endpoints.is_empty() {
            fields.push_str(&select("endpoint", &endpoints, given(&self.endpoint)));
        }
        if !tags.is_empty() {
            fields.push_str(&select("tag", &tags, given(&self.tag)));
        }
        fields.push_str(&select(
            "status",
            &["graded", "failed", "filtered"],
            given(&self.status),
        ));
        let _ = write!(
            fields,
            "<label>score from <input name=\"min\" size=\"4\" value=\"{}\"></label><label>to <input name=\"max\" size=\"4\" value=\"{}\"></label><label><input type=\"checkbox\" name=\"disagreeing\" value=\"1\"{}> arms disagree</label>",
            esc(given(&self.min).unwrap_or("")),
            esc(given(&self.max).unwrap_or("")),
            if given(&self.disagreeing).is_some() {
                " checked"
            } else {
                ""
            }
        );
        fields.push_str(&text_field("q", given(&self.q).unwrap_or("")));
        fields
    }

    /// This query's filters, as its page links carry them.
    fn filters(&self) -> [(&'static str, &Option<String>); 8] {
        [
            ("variant", &self.variant),
            ("endpoint", &self.endpoint),
            ("tag", &self.tag),
            ("status", &self.status),
            ("min", &self.min),
            ("max", &self.max),
            ("disagreeing", &self.disagreeing),
            ("q", &self.q),
        ]
    }

    /// The links to the previous and next pages, where there are such pages.
    fn nav(&self, id: &str, shown: usize, matched: usize) -> String {
        super::page::pager(
            &format!("/runs/{id}/answers"),
            &self.filters(),
            self.offset(),
            self.limit(),
            shown,
            matched,
        )
    }
}

/// The answers table's rows: one job each, linked to its page.
fn answer_rows(id: &str, jobs: &[JobRecord]) -> String {
    let mut rows = String::new();
    for j in jobs {
        let _ = writeln!(
            rows,
            "<tr><td><a href=\"/runs/{id}/jobs/{job}\">{case}</a></td><td>{arm}</td><td>{repeat}</td><td>{status}</td><td class=\"n\">{score}</td><td><pre>{output}</pre>{read}</td><td>{why}</td></tr>",
            job = j.job,
            case = esc(&j.case_id),
            arm = esc(&j.arm()),
            repeat = j.repeat,
            status = status_name(j.status),
            score = j.score().map(|s| format!("{s:.2}")).unwrap_or_default(),
            output = pre_text(&j.output, 2000),
            read = j.read.as_ref().map_or_else(String::new, |read| format!(
                "<div class=\"muted\">read: <code>{}</code></div>",
                esc(&promptgauge_report::visible(read, 300))
            )),
            why = esc(&promptgauge_report::visible(
                &promptgauge_report::reason_of(j).unwrap_or_default(),
                300
            )),
        );
    }
    rows
}

/// `/runs/ID/jobs/N`: job N's whole record: what was asked (the prompt sent, rendered
/// again from the bench while it measures what the run measured), every attempt, the
/// answer, the score and why, every judge call with its reasons.
pub(super) async fn job(
    State(shared): State<Arc<Shared>>,
    Path((run, job)): Path<(String, String)>,
) -> Response {
    let Ok(job) = job.parse::<u32>() else {
        return refuse(
            StatusCode::NOT_FOUND,
            "no such job: a job is its place in the plan, a whole number from 0",
        );
    };
    let indexed = match indexed(&shared, &run).await {
        Ok(i) => i,
        Err(e) => return e,
    };
    let (index, journal) = (indexed.index.clone(), indexed.journal());
    let record = match tokio::task::spawn_blocking(move || index.job(&journal, job)).await {
        Ok(Ok(Some(r))) => r,
        Ok(Ok(None)) => return refuse(StatusCode::NOT_FOUND, "this run has no such job"),
        Ok(Err(e)) => return failed(e),
        Err(e) => return failed(e),
    };
    let variant = indexed
        .record
        .plan
        .variants
        .iter()
        .position(|v| *v == record.variant);
    let run_record = indexed.record.clone();
    let case = record.case_id.clone();
    let prompt = tokio::task::spawn_blocking(move || {
        // One case read, not the bench's every case (a 100,000-case bench held 176 MB).
        let prompts = if run_record.bench.case_hashes.is_empty() {
            // A run from before case hashes: only the whole bench can be checked.
            promptgauge_report::prompts::Prompts::of_run(&run_record)?
        } else {
            promptgauge_report::prompts::Prompts::of_case(&run_record, &case)?
        };
        prompts.render(&case, variant?)
    })
    .await
    .ok()
    .flatten();
    let body = job_body(&run, &record, prompt.as_deref());
    shell(&format!("{run} — {}", record.case_id), &body)
}

/// Text as a page shows it: control characters made visible, escaped, scrubbed of URLs'
/// secrets as the reports are.
fn shown(text: &str) -> String {
    pre_text(text, 200_000)
}

/// Job N's page: its record as a table, the prompt sent (when it can be rendered again),
/// the answer, every attempt and every judge call.
fn job_body(run: &str, r: &JobRecord, prompt: Option<&str>) -> String {
    let id = url_segment(run);
    let mut b = format!(
        "<h1><a href=\"/runs/{id}/\">{run}</a> · case {case}</h1>\n<table id=\"job\">",
        run = esc(run),
        case = esc(&r.case_id),
    );
    record_rows(&mut b, r);
    b.push_str("</table>\n");
    if !r.files.is_empty() {
        files_section(&mut b, &id, r);
    }
    b.push_str("<h2>Prompt sent</h2>\n");
    match prompt {
        Some(p) => {
            let _ = write!(b, "<pre id=\"prompt\">{}</pre>", shown(p));
        }
        None => b.push_str("<p class=\"muted\">The bench file is gone or measures something else now: the prompt cannot be rendered again.</p>"),
    }
    answer_sections(&mut b, r);
    attempts_table(&mut b, r);
    judge_calls(&mut b, r);
    b
}

/// The files the job's request carried: thumbnails of its images (data URLs, as
/// report.html has them), and each file by name, kind, size and hash, linked to its bytes.
fn files_section(b: &mut String, run: &str, r: &JobRecord) {
    b.push_str("<h2>Files sent</h2>\n");
    promptgauge_report::html::files_line(b, &r.files, &mut Default::default());
    b.push_str("<ul id=\"files\">");
    for (i, f) in r.files.iter().enumerate() {
        let _ = write!(
            b,
            "<li><a href=\"/runs/{run}/jobs/{}/files/{i}\">{}</a> — {}, {} bytes{}</li>",
            r.job,
            esc(&f.origin),
            f.kind.said(),
            f.bytes,
            f.sha256
                .as_deref()
                .map_or(String::new(), |h| format!(", sha256 {h}"))
        );
    }
    b.push_str("</ul>");
}

/// `/runs/ID/jobs/N/files/I`: the I-th file job N's request carried, read back from where
/// it was loaded while its bytes still have the journaled hash; served with the type its
/// bytes are (never HTML nor SVG: no such kind is taken), and as a download but for images.
pub(super) async fn job_file(
    State(shared): State<Arc<Shared>>,
    Path((run, job, n)): Path<(String, String, String)>,
) -> Response {
    let not_found = |why: &str| refuse(StatusCode::NOT_FOUND, why);
    let (Ok(job), Ok(n)) = (job.parse::<u32>(), n.parse::<usize>()) else {
        return not_found("no such file");
    };
    let indexed = match indexed(&shared, &run).await {
        Ok(i) => i,
        Err(e) => return e,
    };
    let (index, journal) = (indexed.index.clone(), indexed.journal());
    let record = match tokio::task::spawn_blocking(move || index.job(&journal, job)).await {
        Ok(Ok(Some(r))) => r,
        _ => return not_found("this run has no such job"),
    };
    let Some(note) = record.files.get(n).cloned() else {
        return not_found("this job's request carried no such file");
    };
    let most = promptgauge_suite::attachments::MAX_FILE_BYTES;
    let Ok(Some(bytes)) = tokio::task::spawn_blocking(move || note.bytes_again(most)).await else {
        return not_found(
            "the file is gone, or its bytes are no longer the ones sent (its hash differs): nothing is shown rather than something else",
        );
    };
    let f = &record.files[n];
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(f.kind.media_type()) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    let disposition = match f.kind.family() {
        promptgauge_client::attachment::FileFamily::Image => "inline",
        _ => "attachment",
    };
    if let Ok(v) = HeaderValue::from_str(disposition) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    (headers, bytes).into_response()
}

/// The job table's rows: how it was asked, how it was graded, what it cost.
fn record_rows(b: &mut String, r: &JobRecord) {
    let mut row = |k: &str, v: String| {
        let _ = write!(b, "<tr><th>{k}</th><td>{v}</td></tr>");
    };
    row("variant", esc(&r.arm()));
    row("repeat", r.repeat.to_string());
    row("status", status_name(r.status).to_string());
    row(
        "score",
        r.score().map(|s| format!("{s:.3}")).unwrap_or_default(),
    );
    row("expected", shown(&r.expected.join("\n")));
    if let Some(read) = &r.read {
        row("read (extract:)", shown(read));
    }
    if let Some(x) = &r.extracted {
        row("extracted", shown(x));
    }
    if let Some(x) = &r.not_found {
        row("not found", shown(x));
    }
    row(
        "finish",
        shown(
            r.finish_reason
                .as_deref()
                .unwrap_or("(none: the answer did not finish)"),
        ),
    );
    if let Some(e) = &r.error {
        row("why it failed", shown(e));
    }
    if let Some(d) = &r.score_detail {
        row(
            "score detail",
            format!(
                "<pre>{}</pre>",
                shown(&serde_json::to_string_pretty(d).unwrap_or_default())
            ),
        );
    }
    row(
        "tokens",
        format!(
            "{} in, {} out",
            r.usage.prompt_tokens, r.usage.completion_tokens
        ),
    );
    if let Some(l) = r.latency_ms {
        row("latency", format!("{l:.0} ms"));
    }
    if r.cached {
        row("from", "the response cache (nothing sent)".to_string());
    }
    if let Some(batch) = &r.batch {
        row("batch", shown(batch));
    }
    if !r.tags.is_empty() {
        row("tags", shown(&r.tags.join(", ")));
    }
}

/// The answer, and what came with it: text received before a failure, reasoning, tool calls.
fn answer_sections(b: &mut String, r: &JobRecord) {
    let _ = write!(
        b,
        "\n<h2>Answer</h2>\n<pre id=\"answer\">{}</pre>",
        shown(&r.output)
    );
    if let Some(p) = &r.partial_output {
        let _ = write!(
            b,
            "\n<h3>Received before the failure (never graded)</h3><pre>{}</pre>",
            shown(p)
        );
    }
    if !r.reasoning.is_empty() {
        let _ = write!(b, "\n<h3>Reasoning</h3><pre>{}</pre>", shown(&r.reasoning));
    }
    if !r.tool_calls.is_empty() {
        let calls = serde_json::to_string_pretty(&r.tool_calls).unwrap_or_default();
        let _ = write!(b, "\n<h3>Tool calls</h3><pre>{}</pre>", shown(&calls));
    }
    if !r.steps.is_empty() {
        b.push_str("\n<h3>Trajectory</h3>");
        let first = &r.steps[..r
            .steps
            .len()
            .min(promptgauge_report::figures::result::SHOWN_STEPS)];
        let turns = &r.turns[..r
            .turns
            .len()
            .min(promptgauge_report::figures::result::SHOWN_STEPS)];
        promptgauge_report::html::trajectory(b, first, turns, r.steps.len(), true);
    }
}

/// Every attempt: its outcome, status, timings and error.
fn attempts_table(b: &mut String, r: &JobRecord) {
    let _ = write!(
        b,
        "\n<h2>Attempts ({})</h2>\n<table id=\"attempts\"><thead><tr><th>#</th><th>outcome</th><th>HTTP</th><th>first token</th><th>latency</th><th>Retry-After</th><th>waited</th><th>error</th></tr></thead><tbody>",
        r.attempts.len()
    );
    let ms = |x: Option<f64>| x.map(|v| format!("{v:.0} ms")).unwrap_or_default();
    for (i, a) in r.attempts.iter().enumerate() {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0} ms</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            shown(&format!("{:?}", a.outcome)),
            a.status.map(|s| s.to_string()).unwrap_or_default(),
            ms(a.ttft_ms),
            a.latency_ms,
            ms(a.retry_after_ms),
            ms(a.wait_ms),
            shown(a.error.as_deref().unwrap_or("")),
        );
    }
    b.push_str("</tbody></table>\n");
}

/// Every judge call: the judge's prompt, its reply, the score read and why not.
fn judge_calls(b: &mut String, r: &JobRecord) {
    if r.judge.is_empty() {
        return;
    }
    let _ = writeln!(b, "<h2>Judge calls ({})</h2>", r.judge.len());
    for c in &r.judge {
        let asked: Vec<String> = c
            .request
            .iter()
            .map(|m| format!("{}: {}", m.role, m.content))
            .collect();
        let _ = writeln!(
            b,
            "<div class=\"judge\"><h3>vote {} · {}</h3><details><summary>the judge's prompt</summary><pre>{}</pre></details><p>reply:</p><pre>{}</pre>{}</div>",
            c.vote + 1,
            c.score
                .map(|s| format!("score {s:.2}"))
                .unwrap_or_else(|| "no score read".to_string()),
            shown(&asked.join("\n\n")),
            shown(&c.reply),
            c.error
                .as_deref()
                .map(|e| format!("<p>why: {}</p>", shown(e)))
                .unwrap_or_default(),
        );
    }
}
