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
//!
//! Invariant: knows no command line; a page and a command share one implementation
//! (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod bundle;
mod glance;
mod guard;
mod index;
mod label;
mod live;
mod matrix;
mod page;
mod parts;
mod run;
mod runs;
mod shared;
mod tally;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::middleware;
use axum::routing::get;

pub use bundle::{BundleError, JOB_PAGES, bundle};
use shared::Shared;
pub use shared::{Commands, Reply};

use promptgauge_store::Store;

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
            opener: Mutex::new(None),
            commands: config.commands,
            indexes: Mutex::new(HashMap::new()),
            labelling: tokio::sync::Mutex::new(()),
            scan: Mutex::new(tally::Scan::default()),
        }),
        address,
        url,
    })
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
    /// A URL that opens the pages once and carries no lasting secret, for a browser started
    /// by `view --open` (its command line is any local user's to read): a one-time path,
    /// `/open/CODE`, whose first visit sets the access token's cookie and whose code is
    /// then spent (a second visit is refused). A new one replaces the last. Without a
    /// token, the URL itself.
    pub fn one_time_url(&self) -> String {
        if self.shared.token.is_none() {
            return self.url.clone();
        }
        let code = random_token();
        let base = self.url.split('?').next().unwrap_or(&self.url);
        let url = format!("{base}open/{code}");
        *self.shared.opener.lock().unwrap_or_else(|e| e.into_inner()) = Some(code);
        url
    }

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
            .route("/runs/{run}/matrix", get(matrix::page))
            .route("/runs/{run}/jobs/{job}", get(run::job))
            .route("/runs/{run}/jobs/{job}/files/{n}", get(run::job_file))
            .route("/runs/{run}/label", get(label::page).post(label::save))
            .route("/runs/{run}", get(run::without_slash))
            .route("/runs/{run}/", get(run::report))
            .route("/runs/{run}/{file}", get(run::file))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
            .layer(middleware::map_response(give_back))
            .layer(middleware::from_fn_with_state(
                self.shared.clone(),
                guard::guard,
            ))
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
