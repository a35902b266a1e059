//! What every page shares: the shell (title, style, the way back), text shown as data,
//! the query read strictly, and the refusals and failures as responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// What `view`'s own pages add to the reports' style (report.html's visual language, one
/// stylesheet: [`promptgauge_report::html::STYLE`]): the way back, the filters, status at a
/// glance, small interval bars, and the matrix's cells coloured by outcome. Wide tables
/// scroll in their own box, so a narrow window never scrolls the page sideways.
const STYLE: &str = "body{max-width:none}a{color:var(--accent)}\
th,td{text-align:left}td.n,th.n{text-align:right}pre{white-space:pre-wrap;margin:0;max-width:60em;overflow-wrap:anywhere}\
form[method=get]:not([action=\"/compare\"]){display:flex;flex-wrap:wrap;gap:8px 14px;align-items:center;background:var(--band);padding:10px 12px;border-radius:6px;margin:12px 0}\
input,select{font:inherit;padding:3px 6px;border:1px solid var(--line);border-radius:4px;background:#fff;max-width:100%}button{font:inherit;padding:4px 12px;border:1px solid var(--accent);background:var(--accent);color:#fff;border-radius:4px;cursor:pointer}\
.scroll{overflow-x:auto;max-width:100%}.muted{color:var(--muted)}.live{background:#fff8e0;padding:.5em 1em;border:1px solid #eed;border-radius:6px;margin:8px 0}\
.bar{background:#eee;height:.8em;width:20em;max-width:100%;display:inline-block}.bar span{background:#4a7;height:100%;display:block}kbd{border:1px solid #bbb;border-radius:3px;padding:0 .3em}.thumb{display:inline-block;width:96px;height:96px;margin:2px;background:center/contain no-repeat}\
.badge{display:inline-block;padding:1px 8px;margin:1px 2px 1px 0;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap}.badge.finished,.badge.passed{background:#e3f4ec;color:var(--good)}.badge.partial,.badge.inconclusive{background:#fff4e5;color:#9a5b00}.badge.failed{background:#fdecea;color:var(--bad)}.badge.running{background:#e8edfb;color:var(--accent)}\
.fig{display:flex;align-items:center;gap:6px;white-space:nowrap;font-size:13px;line-height:1.2}.fig svg{flex:none}.fig .arm{min-width:5em}.fig .axis{stroke:var(--line)}.measure{font-size:12px}\
#matrix td{min-width:10em;max-width:26em}#matrix td.cell{color:var(--fg)}#matrix td.cell a{font-weight:600;text-decoration:none}#matrix td.cell.ok{background:#eef8f3}#matrix td.cell.no{background:#fdf0ec}#matrix td.cell.part{background:#fff8e6}#matrix td.cell.fail{background:#f2f4f7}#matrix pre{font-size:12px;max-height:14em;overflow:auto;background:transparent;padding:0;margin:2px 0}#matrix .vars,#matrix .parts{font-size:12px}\
@media (max-width:900px){body{padding:16px}#runs td,#runs th{padding:4px 6px}.fig .arm{min-width:2em}.fig svg{width:66px}}";

/// The application's links, on its own pages and on those a command rendered whole
/// (report.html, compare.html, history.html: their stylesheet knows no `nav`).
pub(super) const NAV_STYLE: &str = "nav{display:flex;flex-wrap:wrap;gap:4px 18px;margin:0 0 14px;padding-bottom:8px;border-bottom:1px solid var(--line)}nav a{color:var(--accent);text-decoration:none;font-weight:600}";

/// A page of the application: its title, and the body under the navigation.
pub(super) fn shell(title: &str, body: &str) -> Response {
    let esc = promptgauge_report::html::esc;
    axum::response::Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title>\n<style>{REPORT}{NAV_STYLE}{STYLE}</style></head>\n<body>{nav}\n{body}\n</body></html>\n",
        title = esc(title),
        nav = NAV,
        REPORT = promptgauge_report::html::STYLE,
    ))
    .into_response()
}

/// Every page's way back.
pub(super) const NAV: &str = "<nav><a href=\"/\">Runs</a></nav>";

/// A filter's text field, labelled with its name.
pub(super) fn text_field(name: &str, value: &str) -> String {
    format!(
        "<label>{name} <input name=\"{name}\" value=\"{}\"></label>",
        promptgauge_report::html::esc(value)
    )
}

/// A run id (or a filter's value) as one URL path segment or query value.
pub(super) fn url_segment(text: &str) -> String {
    promptgauge_report::html::percent_encode(text, b"")
}

/// A checkbox filter asks for its filter unless its value is `0` or `false`.
pub(super) fn ticked(v: &Option<String>) -> bool {
    given(v).is_some_and(|d| d != "0" && d != "false")
}

/// A words filter's words (`q`), split at white space.
pub(super) fn words(q: &Option<String>) -> Vec<String> {
    given(q)
        .unwrap_or("")
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// A filter's value, when one was given (an empty field is none).
pub(super) fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

/// Text a model or a server wrote, for a `<pre>`: cut at `max` characters (`…` said),
/// line breaks kept, every character a browser or terminal would obey (bidi overrides,
/// escapes) shown as `\u{…}`, URLs' secrets scrubbed as the reports scrub them, and
/// escaped: data, never markup.
pub(super) fn pre_text(text: &str, max: usize) -> String {
    let cut: String = match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    };
    let scrubbed = promptgauge_client::secrets::redact_urls_in(&cut);
    promptgauge_report::html::esc(&promptgauge_report::terminal_safe(&scrubbed))
}

/// A request's query as `T`; a query that is not one is refused with a 400 that names the
/// parameter and what it takes (never the framework's own words).
pub(super) struct Checked<T>(pub(super) T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S>
    for Checked<T>
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Response> {
        axum::extract::Query::<T>::try_from_uri(&parts.uri)
            .map(|q| Checked(q.0))
            .map_err(|e| {
                let text = e.body_text();
                let why = text
                    .strip_prefix("Failed to deserialize query string: ")
                    .unwrap_or(&text);
                let why = match why.split_once("unknown field ") {
                    Some((_, rest)) => format!(
                        "unknown parameter {}",
                        rest.replace("expected one of", "the parameters are")
                    ),
                    None => format!("{why} (numbers here are whole and at least 0)"),
                };
                refuse(StatusCode::BAD_REQUEST, &format!("the query: {why}"))
            })
    }
}

/// A refusal not yet answered: its status and a sentence, for [`refuse`].
pub(super) type Refused = (StatusCode, &'static str);

/// A refusal: its status and a sentence.
pub(super) fn refuse(status: StatusCode, why: &str) -> Response {
    (status, format!("{why}\n")).into_response()
}

/// A server error as a response.
pub(super) fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response()
}

/// "no such run".
pub(super) fn no_run() -> Response {
    refuse(StatusCode::NOT_FOUND, "no such run")
}

/// A filtered list's page of `path`: its filters given (`k=v`, in order), then `offset`
/// and `limit`, so a page link keeps every filter.
pub(super) fn page_link(
    path: &str,
    filters: &[(&str, &Option<String>)],
    offset: usize,
    limit: usize,
) -> String {
    let mut q: Vec<String> = filters
        .iter()
        .filter_map(|(k, v)| given(v).map(|v| format!("{k}={}", url_segment(v))))
        .collect();
    q.push(format!("offset={offset}"));
    q.push(format!("limit={limit}"));
    format!("{path}?{}", q.join("&"))
}

/// The links to a filtered list's previous and next pages, where there are such pages
/// (`shown` of `matched` from `offset`, `limit` a page).
pub(super) fn pager(
    path: &str,
    filters: &[(&str, &Option<String>)],
    offset: usize,
    limit: usize,
    shown: usize,
    matched: usize,
) -> String {
    let esc = promptgauge_report::html::esc;
    let mut nav = String::new();
    if offset > 0 {
        let back = offset.saturating_sub(limit);
        nav.push_str(&format!(
            "<a id=\"previous\" href=\"{}\">previous</a> ",
            esc(&page_link(path, filters, back, limit))
        ));
    }
    if offset + shown < matched {
        nav.push_str(&format!(
            "<a id=\"next\" href=\"{}\">next</a>",
            esc(&page_link(path, filters, offset + limit, limit))
        ));
    }
    nav
}
