//! The guard every request passes ([`guard`]): the access token (constant time), the
//! `Host` (DNS rebinding) and `Origin`, and the headers every answer carries.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::page::{Refused, refuse};
use super::shared::Shared;

/// The pages' Content-Security-Policy: report.html's own (no network request but to the
/// server itself, inline styles and scripts only).
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Whether two secrets are equal, in a time that depends on their length only.
pub(super) fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// The cookie a browser keeps a server's token in, once it came in the URL; named by the
/// port, since a browser keeps one jar for every port of 127.0.0.1.
fn token_cookie(shared: &Shared) -> String {
    format!("promptgauge_token_{}", shared.port)
}

/// Refuses, in this order: a request without the token (in `?token=`, the
/// `x-promptgauge-token` header, or the cookie a first visit with it sets), compared in
/// constant time and before anything else is looked at; one whose `Host` is not the
/// server's own (DNS rebinding); one that changes something from another site's page
/// (`Origin`, when sent, is the server; its handler checks the CSRF token). A public
/// server is reached by names it cannot know: there the token stands in for the `Host`
/// and `Origin` checks.
pub(super) async fn guard(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(code) = request.uri().path().strip_prefix("/open/") {
        return opened(&shared, &request, code);
    }
    let set_cookie = match carries_token(&shared, &request) {
        Ok(set_cookie) => set_cookie,
        Err((status, why)) => return refuse(status, why),
    };
    if let Err((status, why)) = from_own_address(&shared, &request) {
        return refuse(status, why);
    }
    let mut response = next.run(request).await;
    secure(&shared, &mut response, set_cookie);
    response
}

/// `/open/CODE`, the one-time path `view --open` gives the browser: the first visit with
/// the code (compared in constant time, then spent) and the server's own `Host` gets the
/// token's cookie and a page that goes on to the runs (a page, not a redirect: the way on
/// is then a navigation of the server's own page, on which a browser sends a
/// SameSite=Strict cookie, where a redirect in a chain that began at a file may go without
/// it); any other is refused.
fn opened(shared: &Shared, request: &Request, code: &str) -> Response {
    let mut opener = shared.opener.lock().unwrap_or_else(|e| e.into_inner());
    if !opener.as_deref().is_some_and(|c| same_secret(code, c)) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "this one-time link was used already: open the URL promptgauge view printed",
        );
    }
    if let Err((status, why)) = from_own_address(shared, request) {
        return refuse(status, why);
    }
    *opener = None;
    drop(opener);
    let mut response = axum::response::Html(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=/\"><title>promptgauge view</title></head><body><a href=\"/\">the runs</a></body></html>\n",
    )
    .into_response();
    secure(shared, &mut response, true);
    response
}

/// A header's value as text ("" when absent or not text).
fn header_text(headers: &axum::http::HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
}

/// Whether the request carries the server's token (always, without one), in constant
/// time; `Ok(true)` when it came in the URL only, so the answer sets the cookie.
fn carries_token(shared: &Shared, request: &Request) -> Result<bool, Refused> {
    let Some(token) = &shared.token else {
        return Ok(false);
    };
    let headers = request.headers();
    let cookie_name = token_cookie(shared);
    let from_query = request.uri().query().is_some_and(|q| {
        q.split('&')
            .filter_map(|kv| kv.strip_prefix("token="))
            .any(|t| same_secret(t, token))
    });
    let from_header = headers
        .get("x-promptgauge-token")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|t| same_secret(t, token));
    let from_cookie = header_text(headers, header::COOKIE).split(';').any(|c| {
        c.trim()
            .strip_prefix(cookie_name.as_str())
            .and_then(|v| v.strip_prefix('='))
            .is_some_and(|t| same_secret(t, token))
    });
    if !from_query && !from_header && !from_cookie {
        return Err((
            StatusCode::UNAUTHORIZED,
            "this promptgauge view needs its access token (the URL it printed at start)",
        ));
    }
    Ok(from_query && !from_cookie)
}

/// Refuses a request for another `Host` (DNS rebinding), and a change asked from another
/// site's page (`Origin`); a public server checks neither.
fn from_own_address(shared: &Shared, request: &Request) -> Result<(), Refused> {
    let headers = request.headers();
    let host = header_text(headers, header::HOST);
    if !shared.public && !shared.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Err((
            StatusCode::FORBIDDEN,
            "promptgauge view answers only requests for its own address (Host header)",
        ));
    }
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    let origin = header_text(headers, header::ORIGIN);
    if changes && !origin.is_empty() && !shared.public {
        let own = shared
            .hosts
            .iter()
            .any(|h| origin.eq_ignore_ascii_case(&format!("{}://{h}", shared.scheme)));
        if !own {
            return Err((
                StatusCode::FORBIDDEN,
                "a request from another site's page was refused (Origin)",
            ));
        }
    }
    Ok(())
}

/// The headers every answer carries (no scripts from elsewhere, no sniffing, no framing,
/// no address in a referrer), and the token's cookie when `set_cookie`.
fn secure(shared: &Shared, response: &mut Response, set_cookie: bool) {
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
        // Links to other sites carry no address (nor a token); the pages' own forms keep
        // their Origin, which a state-changing request must name.
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if set_cookie
        && let Some(token) = &shared.token
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{}={token}; Path=/; HttpOnly; SameSite=Strict{}",
            token_cookie(shared),
            if shared.scheme == "https" {
                "; Secure"
            } else {
                ""
            }
        ))
    {
        h.insert(header::SET_COOKIE, v);
    }
}
