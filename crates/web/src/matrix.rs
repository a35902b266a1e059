//! `/runs/ID/matrix`: a run's answers as a matrix — cases down, arms (variants, and
//! endpoints in a run of several) across, each cell the answer with its score, coloured
//! by outcome — filtered (arms disagree, failures, tag, words) and paged by the server over
//! the run's answer index, so only the page's records are read (docs/guide/view.md).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::index::{MatrixRow, RowsWanted};
use super::page::{
    Checked, failed, given, pre_text, refuse, shell, text_field, ticked, url_segment, words,
};
use super::run::{indexed, select};
use super::shared::Shared;
use promptgauge_report::html::{colour, esc, mark};
use promptgauge_runner::journal::{JobRecord, JobStatus};
use promptgauge_runner::record::RunRecord;

/// The most cases a page holds (docs/guide/view.md): more is refused, not cut.
const MAX_LIMIT: usize = 200;

/// The matrix's filters and page, as query parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MatrixQuery {
    /// Only the cases with this tag.
    tag: Option<String>,
    /// Only the cases whose arms scored differently (`1`, `on`).
    disagreeing: Option<String>,
    /// Only the cases some arm did not pass (a score below 1, a failed or withheld answer).
    failing: Option<String>,
    /// Words the case id or one of its answers contains (case aside).
    q: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
    /// `--public`'s access token (read by the guard).
    #[allow(dead_code)]
    token: Option<String>,
}

impl MatrixQuery {
    fn wanted(&self) -> RowsWanted {
        RowsWanted {
            tag: given(&self.tag).map(String::from),
            disagreeing: ticked(&self.disagreeing),
            failing: ticked(&self.failing),
            words: words(&self.q),
        }
    }

    fn offset(&self) -> usize {
        self.offset.unwrap_or(0)
    }

    /// Cases a page: 50 unless asked (a `limit` outside 1 to [`MAX_LIMIT`] is refused).
    fn limit(&self) -> usize {
        self.limit.unwrap_or(50).clamp(1, MAX_LIMIT)
    }

    /// Why its `limit` is refused: not 1 to [`MAX_LIMIT`] cases a page.
    fn bad_limit(&self) -> Option<String> {
        self.limit
            .filter(|l| !(1..=MAX_LIMIT).contains(l))
            .map(|l| format!("limit={l}: a matrix page holds 1 to {MAX_LIMIT} cases"))
    }

    /// This query's filters, as its page links carry them.
    fn filters(&self) -> [(&'static str, &Option<String>); 4] {
        [
            ("tag", &self.tag),
            ("disagreeing", &self.disagreeing),
            ("failing", &self.failing),
            ("q", &self.q),
        ]
    }

    /// The filter form's fields, each showing what this query asks for.
    fn form_fields(&self, tags: &[&str]) -> String {
        let mut fields = String::new();
        if !tags.is_empty() {
            fields.push_str(&select("tag", tags, given(&self.tag)));
        }
        let check = |name: &str, on: bool, label: &str| {
            let checked = if on { " checked" } else { "" };
            format!(
                "<label><input type=\"checkbox\" name=\"{name}\" value=\"1\"{checked}> {label}</label>"
            )
        };
        fields.push_str(&check(
            "disagreeing",
            ticked(&self.disagreeing),
            "arms disagree",
        ));
        fields.push_str(&check("failing", ticked(&self.failing), "some arm failed"));
        fields.push_str(&text_field("q", given(&self.q).unwrap_or("")));
        if let Some(limit) = self.limit {
            let _ = write!(
                fields,
                "<input type=\"hidden\" name=\"limit\" value=\"{limit}\">"
            );
        }
        fields
    }
}

/// `/runs/ID/matrix`: one page of the run's matrix.
pub(super) async fn page(
    State(shared): State<Arc<Shared>>,
    Path(run): Path<String>,
    Checked(query): Checked<MatrixQuery>,
) -> Response {
    if let Some(why) = query.bad_limit() {
        return refuse(StatusCode::BAD_REQUEST, &why);
    }
    let indexed = match indexed(&shared, &run).await {
        Ok(i) => i,
        Err(e) => return e,
    };
    let (_, _, tags) = indexed.index.names();
    let tags: Vec<String> = tags.into_iter().map(String::from).collect();
    let wanted = query.wanted();
    if let Some(t) = &wanted.tag
        && !tags.contains(t)
    {
        let known = if tags.is_empty() {
            "none".to_string()
        } else {
            tags.join(", ")
        };
        return refuse(
            StatusCode::BAD_REQUEST,
            &format!("tag={t}: this run has no such tag (it has: {known})"),
        );
    }
    let (offset, limit) = (query.offset(), query.limit());
    let (index, journal) = (indexed.index.clone(), indexed.journal());
    let record = indexed.record.clone();
    let read = tokio::task::spawn_blocking(move || {
        let (rows, matched) = index.rows(&journal, &wanted, offset, limit)?;
        let vars = vars_of(&record, &rows);
        Ok::<_, std::io::Error>((rows, matched, vars))
    })
    .await;
    let (rows, matched, vars) = match read {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return failed(e),
        Err(e) => return failed(e),
    };
    let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
    let body = Matrix {
        run: &run,
        id: url_segment(&run),
        record: &indexed.record,
        several: !indexed.record.plan.endpoints.is_empty(),
        vars: &vars,
    }
    .body(&query, &tags, &rows, matched);
    shell(&format!("{run} — matrix"), &body)
}

/// A case's variables as the matrix shows them (`name: value` lines), or why not.
type Shown = Result<String, &'static str>;

/// The variables of the page's cases, read from the bench (only those cases), each only
/// while its content is the one the run was sent (its hash in run.json).
fn vars_of(record: &RunRecord, rows: &[MatrixRow]) -> HashMap<String, Shown> {
    let wanted: HashSet<&str> = rows.iter().map(|r| r.case.as_str()).collect();
    let unknown = "the run kept no hash of its cases: their variables cannot be checked";
    if record.bench.case_hashes.is_empty() {
        return wanted
            .iter()
            .map(|c| (c.to_string(), Err(unknown)))
            .collect();
    }
    let bench =
        promptgauge_suite::Bench::load_some(&record.bench_path, &|id| wanted.contains(id)).ok();
    let hashes: HashMap<&str, u64> = record
        .bench
        .case_ids
        .iter()
        .zip(&record.bench.case_hashes)
        .filter(|(id, _)| wanted.contains(id.as_str()))
        .map(|(id, h)| (id.as_str(), *h))
        .collect();
    let mut out: HashMap<String, Shown> = wanted
        .iter()
        .map(|c| {
            let gone = "the bench file is gone or measures something else now: its variables cannot be shown";
            (c.to_string(), Err(gone))
        })
        .collect();
    for case in bench.iter().flat_map(|b| &b.cases) {
        if hashes.get(case.id.as_str()) != Some(&promptgauge_suite::plan::case_hash(case)) {
            continue;
        }
        let lines: Vec<String> = case
            .vars
            .0
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
            })
            .collect();
        out.insert(case.id.clone(), Ok(lines.join("\n")));
    }
    out
}

/// What a page of the matrix is drawn from.
struct Matrix<'a> {
    run: &'a str,
    /// The run id as a URL segment.
    id: String,
    record: &'a RunRecord,
    /// The run has several endpoints: the head groups the arms by endpoint.
    several: bool,
    vars: &'a HashMap<String, Shown>,
}

impl Matrix<'_> {
    /// The page: its heading, the filters, the count and page links, and the table.
    fn body(
        &self,
        query: &MatrixQuery,
        tags: &[&str],
        rows: &[MatrixRow],
        matched: usize,
    ) -> String {
        let (offset, limit) = (query.offset(), query.limit());
        let path = format!("/runs/{}/matrix", self.id);
        let nav = super::page::pager(&path, &query.filters(), offset, limit, rows.len(), matched);
        let pages = matched.div_ceil(limit).max(1);
        let mut b = format!(
            "<h1><a href=\"/runs/{id}/\">{run}</a>: matrix</h1>\n<p class=\"muted\">Cases down, arms across; each cell the answer and its score (✓ passed, ✗ failed, a partial score in %), coloured by outcome. Open a case for its variables; a mark opens the job's whole record. <a href=\"/runs/{id}/answers\">Answers as a list</a>.</p>\n<form method=\"get\">{fields}<button>Filter</button></form>\n<p id=\"count\">{shown} of {matched} cases that match, from {from} · page {page} of {pages}. {nav}</p>\n<div class=\"scroll\"><table id=\"matrix\">",
            id = self.id,
            run = esc(self.run),
            fields = query.form_fields(tags),
            shown = rows.len(),
            from = if rows.is_empty() { offset } else { offset + 1 },
            page = offset / limit + 1,
        );
        self.head(&mut b);
        b.push_str("<tbody>\n");
        let arms = self.record.plan.arms();
        for row in rows {
            self.row(&mut b, &arms, row);
        }
        b.push_str("</tbody></table></div>");
        b
    }

    /// The head: a column per arm, the baseline first; grouped by endpoint in a run of
    /// several.
    fn head(&self, b: &mut String) {
        let plan = &self.record.plan;
        let swatch = |i: usize, name: &str| {
            format!(
                "<th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>",
                colour(i),
                esc(name)
            )
        };
        b.push_str("<thead>");
        if self.several {
            b.push_str("<tr><th rowspan=\"2\">case</th>");
            for e in &plan.endpoints {
                let _ = write!(b, "<th colspan=\"{}\">{}</th>", plan.variants.len(), esc(e));
            }
            b.push_str("</tr><tr>");
            for (i, v) in plan
                .endpoints
                .iter()
                .flat_map(|_| plan.variants.iter().enumerate())
            {
                b.push_str(&swatch(i, v));
            }
        } else {
            b.push_str("<tr><th>case</th>");
            for (i, v) in plan.variants.iter().enumerate() {
                b.push_str(&swatch(i, v));
            }
        }
        b.push_str("</tr></thead>");
    }

    /// One case (and repeat): what it is, then each arm's answer.
    fn row(&self, b: &mut String, arms: &[String], row: &MatrixRow) {
        let repeat = if self.record.plan.repeats > 1 {
            format!(" <span class=\"muted\">repeat {}</span>", row.repeat + 1)
        } else {
            String::new()
        };
        let first = row.records.first();
        let expected = first.map_or(String::new(), |r| r.expected.join(" | "));
        let tags = first.map_or(String::new(), |r| r.tags.join(", "));
        let vars = match self.vars.get(&row.case) {
            Some(Ok(v)) => format!("<pre>{}</pre>", pre_text(v, 2000)),
            Some(Err(why)) => format!("<p class=\"muted\">{why}</p>"),
            None => String::new(),
        };
        let _ = write!(
            b,
            "<tr data-case=\"{case}\"><td><strong>{case}</strong>{repeat}<div class=\"muted\">expected: {expected}</div>{tags}<details class=\"vars\"><summary>variables</summary>{vars}</details></td>",
            case = esc(&row.case),
            expected = pre_text(&expected, 300),
            tags = if tags.is_empty() {
                String::new()
            } else {
                format!("<div class=\"muted\">tags: {}</div>", esc(&tags))
            },
        );
        for arm in arms {
            match row.records.iter().find(|r| r.arm() == arm.as_str()) {
                Some(r) => self.cell(b, r),
                None => b.push_str("<td class=\"muted\">–</td>"),
            }
        }
        b.push_str("</tr>\n");
    }

    /// One arm's answer: its mark (linked to the job's page) and score, the answer as text,
    /// the cell coloured by its outcome.
    fn cell(&self, b: &mut String, r: &JobRecord) {
        let (class, shown) = mark(r.score(), r.status == JobStatus::Filtered);
        let outcome = if class.is_empty() { "part" } else { class };
        let score = r.score().map_or(String::new(), |s| {
            format!(" <span class=\"muted\">{s:.2}</span>")
        });
        let text = match (&r.error, r.output.is_empty()) {
            (Some(e), true) => format!("<p class=\"muted\">{}</p>", pre_text(e, 300)),
            _ => format!("<pre>{}</pre>", pre_text(&r.output, 600)),
        };
        // What the variant's `extract:` read of it, which its scorer saw.
        let read = r.read.as_ref().map_or_else(String::new, |read| {
            format!(
                "<div class=\"muted\">read: <code>{}</code></div>",
                pre_text(read, 300)
            )
        });
        let _ = write!(
            b,
            "<td class=\"cell {outcome}\"><a class=\"{class}\" href=\"/runs/{id}/jobs/{job}\">{shown}</a>{score}{parts}{text}{read}</td>",
            id = self.id,
            job = r.job,
            parts = short_parts(r),
        );
    }
}

/// Which parts of a score with named parts fell short: each part below 1, by name (as text),
/// with its score — ✗ for 0 — so a partial score says which check failed; empty when
/// every part passed or the score has no parts.
fn short_parts(r: &JobRecord) -> String {
    let short: Vec<String> = r
        .parts
        .iter()
        .filter(|p| p.score < 1.0)
        .map(|p| {
            let (class, mark) = if p.score <= 0.0 {
                ("no", "✗ ")
            } else {
                ("part", "")
            };
            format!(
                "<span class=\"{class}\">{mark}{} {:.2}</span>",
                pre_text(&p.name, 80),
                p.score
            )
        })
        .collect();
    if short.is_empty() {
        return String::new();
    }
    format!(
        "<div class=\"parts\">{} of {} parts below 1: {}</div>",
        short.len(),
        r.parts.len(),
        short.join(", ")
    )
}
