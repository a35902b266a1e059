//! `promptgauge view`: a local web application over the history store and the run folders
//! it records (docs/guide/view.md). It serves the runs, newest first and filterable; each run's
//! own report (the page `report.html` is, rendered by the same code, never a fork); its
//! answers, filtered and paged by the server from an index of the journal; a job's whole
//! record; runs in progress, live; any two runs compared and a bench's history (by the
//! same code as `compare` and `history`, which `app` lends it: [`Commands`]); and people's
//! labels of judged answers, written as `label` writes them.
//!
//! Safe by default: it binds loopback, and every request carries a random access token
//! (in the URL it prints, then a cookie) unless `--no-token` is asked on loopback; another
//! address needs `--public`, and then TLS (a certificate and key given) or
//! `--insecure-http` said out loud. Each connection has a deadline for its request's
//! headers, their size and its body are bounded, and connections beyond a cap are closed
//! at once: slow clients cannot hold the server. Every request's `Host` must name the
//! server itself (a page on another site that resolves its name to 127.0.0.1 — DNS rebinding — is
//! refused), every request that changes something carries the page's CSRF token, and no
//! file is served but a run folder's own reports, by a fixed list of names: no path from a
//! request ever reaches the file system.

mod bundle;
mod index;
mod label;
mod live;
mod run;
mod runs;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub use bundle::{BundleError, Bundled, JOB_PAGES, bundle};

use crate::store::{Filter, Store};

/// The pages' Content-Security-Policy: report.html's own (no network request but to the
/// server itself, inline styles and scripts only).
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The pages' own style (report.html brings its own).
const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}nav{margin-bottom:1em}nav a{margin-right:1em}table{border-collapse:collapse}td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}td.n{text-align:right}pre{white-space:pre-wrap;margin:0;max-width:60em}form label{margin-right:.8em}.muted{color:#777}.live{background:#fff8e0;padding:.5em 1em;border:1px solid #eed}.bar{background:#eee;height:.8em;width:20em;display:inline-block}.bar span{background:#4a7;height:100%;display:block}kbd{border:1px solid #bbb;border-radius:3px;padding:0 .3em}";

/// What the pages show that the commands above compute: `app` lends its `compare`,
/// `history` and `report` so each figure has one implementation (`web` cannot reach
/// `app`: it lies above).
pub trait Commands: Send + Sync {
    /// compare.html of the run in folder `b` against the run in folder `a` (folders the
    /// store records), or why not.
    fn compare<'a>(&'a self, a: &'a std::path::Path, b: &'a std::path::Path) -> Answer<'a, String>;
    /// history.html of `bench`, each run linked by `link` (from its run id), or why not.
    fn history<'a>(
        &'a self,
        bench: &'a str,
        link: &'a (dyn Fn(&str) -> String + Sync),
    ) -> Answer<'a, String>;
    /// Writes a run folder's reports again (after labels were added).
    fn report<'a>(&'a self, folder: &'a std::path::Path) -> Answer<'a, ()>;
}

/// What a [`Commands`] call comes to: a value, or the message a person reads.
pub type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// How long a connection may take to send a request's headers (the first, or the next on
/// a kept-alive connection) before it is closed.
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Connections served at once; one more is closed as soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 256;

/// The largest request body (a label's form is a few hundred bytes).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The largest request head (its line and headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A certificate chain and its private key, PEM files, to serve HTTPS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// How `view` serves.
pub struct ViewConfig {
    /// Where to listen; loopback unless `public`.
    pub bind: SocketAddr,
    /// Listen on an address other than loopback (every request then needs the token, and
    /// the server needs `tls` or `insecure_http`).
    pub public: bool,
    /// Every request carries the random access token (refused off with `public`).
    pub token: bool,
    /// Serve HTTPS with these files.
    pub tls: Option<TlsFiles>,
    /// `--public` over plain HTTP, asked for by name: the token travels in clear.
    pub insecure_http: bool,
    /// See [`HEADER_TIMEOUT`].
    pub header_timeout: std::time::Duration,
    /// See [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// The folder of run folders: runs the store records by a relative path are found
    /// under it, and runs in progress are looked for in it.
    pub reports: PathBuf,
    pub commands: Arc<dyn Commands>,
}

/// What the handlers share.
struct Shared {
    store: Store,
    reports: PathBuf,
    /// Every `Host` a request may name.
    hosts: Vec<String>,
    /// The access token every request carries (none: `--no-token` on loopback).
    token: Option<String>,
    /// On the network: reached by names it cannot know, so the token stands in for the
    /// `Host` and `Origin` checks.
    public: bool,
    /// `https` or `http`.
    scheme: &'static str,
    /// The port it listens on (its cookie's name holds it).
    port: u16,
    /// The token every state-changing request carries (from the page that makes it).
    csrf: String,
    commands: Arc<dyn Commands>,
    /// Runs' answer indexes, by run id, while their journals stay as they were.
    indexes: Mutex<HashMap<String, Arc<index::RunIndex>>>,
    /// One label written at a time by this server (the run folder's lock keeps out others).
    labelling: tokio::sync::Mutex<()>,
    /// The runs in progress, as last looked for.
    scan: Mutex<live::Scan>,
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
    #[error(
        "--public over plain HTTP would send the access token and every page in clear to anyone on the network"
    )]
    PlainPublic,
    #[error(
        "--no-token cannot go with --public: on the network the token is all that keeps the pages private"
    )]
    PublicWithoutToken,
    #[error("TLS: {0}")]
    Tls(String),
}

/// A server listening, not yet serving: its address, and the URL to open (with the token
/// when it has one).
pub struct Listening {
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    header_timeout: std::time::Duration,
    max_connections: usize,
    shared: Arc<Shared>,
    pub address: SocketAddr,
    pub url: String,
}

/// A random 128-bit token, as hex.
fn random_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Whether two secrets are equal, in a time that depends on their length only.
pub(crate) fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// The TLS acceptor for a certificate chain and key in PEM files.
fn tls_acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, ViewError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect())
        .map_err(|e| ViewError::Tls(format!("{}: {e}", files.cert.display())))?;
    if certs.is_empty() {
        return Err(ViewError::Tls(format!(
            "{} holds no certificate (a PEM file, -----BEGIN CERTIFICATE-----)",
            files.cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| ViewError::Tls(format!("{}: {e}", files.key.display())))?;
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ViewError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| {
        ViewError::Tls(format!(
            "{} and {} do not make a certificate and its key: {e}",
            files.cert.display(),
            files.key.display()
        ))
    })?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Binds the server (refusing a non-loopback address without `public`, a public one
/// without TLS or `insecure_http`, or without its token).
pub async fn listen(config: ViewConfig, store: Store) -> Result<Listening, ViewError> {
    if !config.bind.ip().is_loopback() && !config.public {
        return Err(ViewError::NotLoopback(config.bind));
    }
    if config.public && !config.token {
        return Err(ViewError::PublicWithoutToken);
    }
    if config.public && config.tls.is_none() && !config.insecure_http {
        return Err(ViewError::PlainPublic);
    }
    map_large_blocks();
    let tls = config.tls.as_ref().map(tls_acceptor).transpose()?;
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|e| ViewError::Bind(config.bind, e))?;
    let address = listener
        .local_addr()
        .map_err(|e| ViewError::Bind(config.bind, e))?;
    let port = address.port();
    let mut hosts = vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    // Bound to another loopback address (127.0.0.2, ::1): it is reached by that one.
    if !address.ip().is_unspecified() && !hosts.contains(&address.to_string()) {
        hosts.push(address.to_string());
    }
    let token = (config.token || config.public).then(random_token);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let shown = if address.ip().is_unspecified() {
        format!("{scheme}://127.0.0.1:{port}/")
    } else {
        format!("{scheme}://{address}/")
    };
    let url = match &token {
        Some(t) => format!("{shown}?token={t}"),
        None => shown,
    };
    Ok(Listening {
        listener,
        tls,
        header_timeout: config.header_timeout,
        max_connections: config.max_connections.max(1),
        shared: Arc::new(Shared {
            store,
            reports: config.reports,
            hosts,
            token,
            public: config.public,
            scheme,
            port,
            csrf: random_token(),
            commands: config.commands,
            indexes: Mutex::new(HashMap::new()),
            labelling: tokio::sync::Mutex::new(()),
            scan: Mutex::new(live::Scan::default()),
        }),
        address,
        url,
    })
}

/// Blocks of 256 KiB and more (a 200,000-job run's score vectors) are mapped each on its own
/// and unmapped when freed. glibc otherwise raises this threshold after the first such free,
/// so later large blocks land in the heap among small ones that outlive them and pin their
/// pages: after a compare and a history the server held 60 MB where it now holds 31
/// (docs/dev/performance.md, figure p).
fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets one of the allocator's parameters; any value is valid for it.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

/// After a page is made, the memory its making freed goes back to the system: glibc keeps
/// freed memory in each thread's arena, so a server that once compared two 200,000-job runs
/// would hold their peak for good (docs/dev/performance.md, figure p).
async fn give_back(response: axum::response::Response) -> axum::response::Response {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
    response
}

impl Listening {
    /// Serves until `stop` is cancelled.
    pub async fn serve(self, stop: tokio_util::sync::CancellationToken) -> std::io::Result<()> {
        let app = Router::new()
            .route("/", get(runs::page))
            .route("/api/runs", get(runs::json))
            .route("/api/live", get(live::list))
            .route("/api/live/{name}/events", get(live::events))
            .route("/live/{name}", get(live::page))
            .route("/compare", get(runs::compare))
            .route("/history/{bench}", get(runs::history))
            .route("/api/runs/{run}/jobs", get(run::jobs_json))
            .route("/runs/{run}/answers", get(run::answers))
            .route("/runs/{run}/jobs/{job}", get(run::job))
            .route("/runs/{run}/label", get(label::page).post(label::save))
            .route("/runs/{run}", get(run::without_slash))
            .route("/runs/{run}/", get(run::report))
            .route("/runs/{run}/{file}", get(run::file))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
            .layer(middleware::map_response(give_back))
            .layer(middleware::from_fn_with_state(self.shared.clone(), guard))
            .with_state(self.shared);
        let open = Arc::new(tokio::sync::Semaphore::new(self.max_connections));
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    // Out of descriptors, a connection reset before it was taken: the
                    // next one may do.
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                },
                _ = stop.cancelled() => break,
            };
            // Beyond the cap: closed at once, never queued.
            let Ok(permit) = open.clone().try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let app = app.clone();
            let tls = self.tls.clone();
            let header_timeout = self.header_timeout;
            let stop = stop.clone();
            connections.spawn(async move {
                let _permit = permit;
                match tls {
                    None => serve_connection(stream, app, header_timeout, stop).await,
                    Some(tls) => {
                        // The handshake has the headers' deadline too.
                        let Ok(Ok(stream)) =
                            tokio::time::timeout(header_timeout, tls.accept(stream)).await
                        else {
                            return;
                        };
                        serve_connection(stream, app, header_timeout, stop).await
                    }
                }
            });
            // Ended connections are let go of as they end.
            while connections.try_join_next().is_some() {}
        }
        connections.shutdown().await;
        Ok(())
    }
}

/// One connection, HTTP/1.1: its request heads within `header_timeout` and bounded in
/// size; shut down gracefully when the server stops.
async fn serve_connection<S>(
    stream: S,
    app: Router,
    header_timeout: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), connection).await;
        }
    }
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
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
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

/// A refusal not yet answered: its status and a sentence, for [`refuse`].
type Refused = (StatusCode, &'static str);

/// A refusal: its status and a sentence.
fn refuse(status: StatusCode, why: &str) -> Response {
    (status, format!("{why}\n")).into_response()
}

/// A page of the application: its title, and the body under the navigation.
fn shell(title: &str, body: &str) -> Response {
    let esc = crate::report::html::esc;
    axum::response::Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{STYLE}</style></head>\n<body>{nav}\n{body}\n</body></html>\n",
        title = esc(title),
        nav = NAV,
    ))
    .into_response()
}

/// Every page's way back.
const NAV: &str = "<nav><a href=\"/\">Runs</a></nav>";

/// A filter's text field, labelled with its name.
fn text_field(name: &str, value: &str) -> String {
    format!(
        "<label>{name} <input name=\"{name}\" value=\"{}\"></label>",
        crate::report::html::esc(value)
    )
}

/// A run id (or a filter's value) as one URL path segment or query value.
fn url_segment(text: &str) -> String {
    crate::report::html::percent_encode(text, b"")
}

/// A filter's value, when one was given (an empty field is none).
fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

impl Shared {
    /// A recorded run's folder, by its run id (the store says where it is).
    async fn folder_of(&self, run_id: &str) -> Option<PathBuf> {
        let filter = Filter {
            run_id: Some(run_id.to_string()),
            ..Filter::default()
        };
        let runs = self.store.runs(&filter).await.ok()?;
        let run = runs.into_iter().find(|r| r.run_id == run_id)?;
        Some(self.resolve(&run.folder))
    }

    /// A folder as the store records it: absolute, or under the folder of run folders.
    fn resolve(&self, folder: &str) -> PathBuf {
        let folder = PathBuf::from(folder);
        if folder.is_absolute() {
            folder
        } else {
            self.reports.join(folder)
        }
    }
}

/// Text a model or a server wrote, for a `<pre>`: cut at `max` characters (`…` said),
/// line breaks kept, every character a browser or terminal would obey (bidi overrides,
/// escapes) shown as `\u{…}`, URLs' secrets scrubbed as the reports scrub them, and
/// escaped: data, never markup.
fn pre_text(text: &str, max: usize) -> String {
    let cut: String = match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    };
    let scrubbed = crate::client::secrets::redact_urls_in(&cut);
    crate::report::html::esc(&crate::report::terminal_safe(&scrubbed))
}

/// A request's query as `T`; a query that is not one is refused with a 400 that names the
/// parameter and what it takes (never the framework's own words).
struct Checked<T>(T);

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

/// A server error as a response.
fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response()
}

/// "no such run".
fn no_run() -> Response {
    refuse(StatusCode::NOT_FOUND, "no such run")
}
