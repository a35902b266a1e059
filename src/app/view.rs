//! `view`: serves the history store's runs and their reports in the browser until Ctrl-C
//! (the server is `crate::web`).

use std::net::SocketAddr;
use std::path::Path;

use super::{Exit, Failure};
use crate::cli::{Env, UsageError, ViewArgs};
use crate::error::BeforeSend;

/// `view`: serves until Ctrl-C or SIGTERM.
pub async fn view(args: &ViewArgs, env: &Env) -> Result<Exit, Failure> {
    let (location, named) = crate::cli::store_location(
        args.store.as_deref(),
        env,
        Path::new(super::history::REPORTS),
    )?;
    let store = super::history::open_existing(&location, named).await?;
    let config = crate::web::ViewConfig {
        bind: SocketAddr::new(args.bind, args.port),
        public: args.public,
        reports: args.reports.clone(),
    };
    let listening = match crate::web::listen(config, store).await {
        Ok(l) => l,
        Err(e @ crate::web::ViewError::NotLoopback(_)) => {
            return Err(UsageError::with_fix(
                e.to_string(),
                "serve on 127.0.0.1 (the default), or pass --public to serve on the network with an access token",
            )
            .into());
        }
        Err(e) => return Err(anyhow::anyhow!(e)).before_send(),
    };
    out!("promptgauge view: {}", listening.url);
    out!("  the history store {}; Ctrl-C to stop", location.shown());
    if args.open {
        // Best effort: the URL is printed above either way.
        let opener = if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        };
        let _ = std::process::Command::new(opener)
            .arg(&listening.url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        stopper.cancel();
    });
    listening.serve(stop).await.before_send()?;
    Ok(Exit::Success)
}
