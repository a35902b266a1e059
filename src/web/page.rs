//! What every page shares: the shell (title, style, the way back), text shown as data,
//! the query read strictly, and the refusals and failures as responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// The pages' own style (report.html brings its own).
const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}nav{margin-bottom:1em}nav a{margin-right:1em}table{border-collapse:collapse}td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}td.n{text-align:right}pre{white-space:pre-wrap;margin:0;max-width:60em}form label{margin-right:.8em}.muted{color:#777}.live{background:#fff8e0;padding:.5em 1em;border:1px solid #eed}.bar{background:#eee;height:.8em;width:20em;display:inline-block}.bar span{background:#4a7;height:100%;display:block}kbd{border:1px solid #bbb;border-radius:3px;padding:0 .3em}.thumb{display:inline-block;width:96px;height:96px;margin:2px;background:center/contain no-repeat}";

/// A page of the application: its title, and the body under the navigation.
pub(super) fn shell(title: &str, body: &str) -> Response {
    let esc = crate::report::html::esc;
    axum::response::Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{STYLE}</style></head>\n<body>{nav}\n{body}\n</body></html>\n",
        title = esc(title),
        nav = NAV,
    ))
    .into_response()
}

/// Every page's way back.
pub(super) const NAV: &str = "<nav><a href=\"/\">Runs</a></nav>";

/// A filter's text field, labelled with its name.
pub(super) fn text_field(name: &str, value: &str) -> String {
    format!(
        "<label>{name} <input name=\"{name}\" value=\"{}\"></label>",
        crate::report::html::esc(value)
    )
}

/// A run id (or a filter's value) as one URL path segment or query value.
pub(super) fn url_segment(text: &str) -> String {
    crate::report::html::percent_encode(text, b"")
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
    let scrubbed = crate::client::secrets::redact_urls_in(&cut);
    crate::report::html::esc(&crate::report::terminal_safe(&scrubbed))
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
