//! SIGINT and SIGTERM: the first drains the clients, a second (or the end of `--grace`)
//! abandons what is in flight.

use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

/// Listens for SIGINT and SIGTERM. The first stops dispatch and drains the client: no new
/// attempt starts and waits end at once, while attempts in flight may finish within
/// `grace`; after it (or at a second signal) they are abandoned. The handlers are installed
/// before this returns, so no signal is missed.
/// SIGINT and SIGTERM (Ctrl-C elsewhere), watched from the preflight on: a signal that
/// arrives between the preflight and the first job is held, never lost (nor fatal).
pub(super) struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn watch() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                int: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
                term: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// The next signal, named.
    pub(super) async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => "interrupted",
                _ = self.term.recv() => "terminated (SIGTERM)",
            }
        }
        #[cfg(not(unix))]
        {
            match tokio::signal::ctrl_c().await {
                Ok(()) => "interrupted",
                Err(_) => std::future::pending().await,
            }
        }
    }
}

pub(super) fn watch_signals(
    mut signals: Signals,
    dispatch: CancellationToken,
    abort: CancellationToken,
    grace: Duration,
) -> tokio::task::JoinHandle<()> {
    let first = move || {
        dispatch.cancel();
        note!(
            "\ninterrupted: no new jobs or retries; letting the attempts in flight finish for up to {} (interrupt again to abort them)",
            humantime::format_duration(grace)
        );
    };
    let second = move |why: &str| {
        note!("{why}: aborting the attempts in flight");
        abort.cancel();
    };
    tokio::spawn(async move {
        signals.next().await;
        first();
        tokio::select! {
            _ = signals.next() => second("interrupted again"),
            _ = tokio::time::sleep(grace) => second("the grace period is over"),
        }
    })
}
