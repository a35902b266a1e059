//! `view`: serves the history store's runs and their reports in the browser until Ctrl-C
//! (the server is `promptgauge_web`).

use std::net::SocketAddr;
use std::path::Path;

use super::{Exit, Failure};
use crate::app::settings::Env;
use crate::cli::ViewArgs;
use crate::error::BeforeSend;
use crate::error::UsageError;

/// `view`: serves until Ctrl-C or SIGTERM.
pub async fn view(args: &ViewArgs, env: &Env) -> Result<Exit, Failure> {
    let (location, named) = crate::app::settings::store_location(
        args.store.as_deref(),
        env,
        Path::new(super::history::REPORTS),
    )?;
    let store = super::history::open_existing(&location, named).await?;
    let config = config_of(args, &location);
    let listening = promptgauge_web::listen(config, store)
        .await
        .map_err(not_listening)?;
    if let Some(dir) = &args.bundle {
        return write_bundle(listening, dir, &args.runs).await;
    }
    out!("promptgauge view: {}", listening.url);
    out!("  the history store {}; Ctrl-C to stop", location.shown());
    // Removed when the server stops (its link is spent at the browser's first visit).
    let _opener = match args.open {
        true => open_browser(&listening, env),
        false => None,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(cancel_on_signal(stop.clone()));
    listening.serve(stop).await.before_send()?;
    Ok(Exit::Success)
}

/// The server's settings from the flags; a bundle asks a server of its own, on a free
/// loopback port without TLS, for every page.
fn config_of(
    args: &ViewArgs,
    location: &promptgauge_store::Location,
) -> promptgauge_web::ViewConfig {
    let bind = match &args.bundle {
        Some(_) => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), 0),
        None => SocketAddr::new(args.bind, args.port),
    };
    promptgauge_web::ViewConfig {
        bind,
        public: args.public && args.bundle.is_none(),
        token: !args.no_token,
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) if args.bundle.is_none() => Some(promptgauge_web::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        },
        insecure_http: args.insecure_http,
        header_timeout: promptgauge_web::HEADER_TIMEOUT,
        max_connections: promptgauge_web::MAX_CONNECTIONS,
        reports: args.reports.clone(),
        commands: std::sync::Arc::new(Lent {
            location: location.clone(),
        }),
    }
}

/// Why the server could not listen, with the fix for what the flags can mend.
fn not_listening(e: promptgauge_web::ViewError) -> Failure {
    let fix = match &e {
        promptgauge_web::ViewError::NotLoopback(_) => {
            "serve on 127.0.0.1 (the default), or pass --public to serve on the network with an access token"
        }
        promptgauge_web::ViewError::PlainPublic => {
            "give a certificate and its key (--tls-cert cert.pem --tls-key key.pem), or pass --insecure-http on a network you trust"
        }
        promptgauge_web::ViewError::Tls(_) => {
            "name a PEM certificate chain and its private key, e.g. made by `openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -subj /CN=localhost`"
        }
        _ => return Failure::Input(anyhow::anyhow!(e)),
    };
    UsageError::with_fix(e.to_string(), fix).into()
}

/// `view --bundle DIR`: the pages of `runs` (else the newest) written as files into `dir`.
async fn write_bundle(
    listening: promptgauge_web::Listening,
    dir: &Path,
    runs: &[String],
) -> Result<Exit, Failure> {
    let bundled = promptgauge_web::bundle(listening, dir, runs)
        .await
        .map_err(|e| match e {
            e @ (promptgauge_web::BundleError::NoRun(_) | promptgauge_web::BundleError::Empty) => {
                Failure::from(UsageError::with_fix(
                    e.to_string(),
                    "name runs the store holds (`promptgauge runs` lists them), or leave out --run for the newest 20",
                ))
            }
            e @ promptgauge_web::BundleError::NotEmpty(_) => Failure::from(UsageError::with_fix(
                e.to_string(),
                "choose a new or empty folder for --bundle",
            )),
            e => Failure::Input(e.into()),
        })?;
    out!(
        "bundle written to {}: {} run(s), {} files; open {}",
        dir.display(),
        bundled.runs,
        bundled.files,
        dir.join("index.html").display()
    );
    if bundled.jobs_left_out > 0 {
        note!(
            "note: {} jobs have no page of their own (at most {} per run); their answers are in the answers pages",
            bundled.jobs_left_out,
            promptgauge_web::JOB_PAGES
        );
    }
    note!("note: the filters, live runs and labelling need `promptgauge view` itself");
    Ok(Exit::Success)
}

/// `view --open`: the pages in the browser, at best effort (the URL is printed either
/// way). A browser's command line is any local user's to read (`ps`), so it is given no
/// secret: a file only this user can read, in a folder of its own, holding the server's
/// one-time link ([`promptgauge_web::Listening::one_time_url`]), spent at the browser's first
/// visit. The folder, removed when it is dropped; `None` when nothing was opened.
fn open_browser(listening: &promptgauge_web::Listening, env: &Env) -> Option<Opener> {
    let url = listening.one_time_url();
    let opener = match Opener::write(&env.temp_dir(), &url) {
        Ok(o) => o,
        Err(e) => {
            note!("note: --open: the page to open cannot be written ({e}): open the URL above");
            return None;
        }
    };
    let page = opener.page().display().to_string();
    let mut command = match env.browser() {
        Some(browser) => {
            let mut words = browser.split_whitespace();
            let mut command = std::process::Command::new(words.next().unwrap_or(browser));
            let mut placed = false;
            for word in words {
                placed |= word.contains("%s");
                command.arg(word.replace("%s", &page));
            }
            if !placed {
                command.arg(&page);
            }
            command
        }
        None => {
            let mut command = std::process::Command::new(if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            });
            command.arg(&page);
            command
        }
    };
    let started = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = started {
        // Reaped when it ends, whenever that is: no zombie while the server runs.
        std::thread::spawn(move || child.wait());
    }
    Some(opener)
}

/// The page `view --open` hands the browser: in a folder only this user may enter, a file
/// only this user may read, forwarding to the one-time link.
struct Opener {
    folder: std::path::PathBuf,
}

impl Opener {
    fn write(temp: &Path, url: &str) -> std::io::Result<Opener> {
        let folder = temp.join(format!("promptgauge-view-{:016x}", rand::random::<u64>()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        // A new folder, never one that was there (nor a link someone left in its place).
        builder.create(&folder)?;
        let opener = Opener { folder };
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let esc = promptgauge_report::html::esc;
        std::io::Write::write_all(
            &mut options.open(opener.page())?,
            format!(
                "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>promptgauge view</title></head>\n<body><a href=\"{url}\">Open promptgauge view</a> (a one-time link: once used, open the URL promptgauge view printed)</body></html>\n",
                url = esc(url)
            )
            .as_bytes(),
        )?;
        Ok(opener)
    }

    fn page(&self) -> std::path::PathBuf {
        self.folder.join("open.html")
    }
}

impl Drop for Opener {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// Cancels `stop` on Ctrl-C (or, on unix, SIGTERM).
async fn cancel_on_signal(stop: tokio_util::sync::CancellationToken) {
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
    stop.cancel();
}

/// What the pages borrow from the commands: `compare`, `history` and `report`, the same
/// code the command line runs.
struct Lent {
    location: promptgauge_store::Location,
}

impl promptgauge_web::Commands for Lent {
    fn compare<'a>(&'a self, a: &'a Path, b: &'a Path) -> promptgauge_web::Reply<'a, String> {
        Box::pin(async move {
            let mut sides = Vec::new();
            for folder in [a, b] {
                let reference = super::baseline::Reference::Folder(folder.to_path_buf());
                let side = super::baseline::load_reference(&reference)
                    .await
                    .map_err(|e| format!("{e:#}"))?;
                sides.push(side);
            }
            let (pa, ra, sa) = &sides[0];
            let (pb, rb, sb) = &sides[1];
            let (side_a, side_b) = ((pa.as_path(), ra, sa), (pb.as_path(), rb, sb));
            let level =
                super::compare::confidence(side_a, side_b, None).map_err(|e| e.to_string())?;
            let comparison = super::compare::compare_results(side_a, side_b, level)
                .map_err(|e| format!("{e:#}"))?;
            Ok(promptgauge_report::html::render_compare(&comparison))
        })
    }

    fn history<'a>(
        &'a self,
        bench: &'a str,
        link: &'a (dyn Fn(&str) -> String + Sync),
    ) -> promptgauge_web::Reply<'a, String> {
        Box::pin(async move {
            let store = promptgauge_store::Store::open_existing(&self.location)
                .await
                .map_err(|e| e.to_string())?;
            let filter = promptgauge_store::Filter {
                bench: Some(bench.to_string()),
                complete: true,
                ..promptgauge_store::Filter::default()
            };
            let h = super::history::history_of(&store, bench, filter).await;
            store.close().await;
            let h = h.map_err(|e| e.to_string())?;
            if h.runs.is_empty() {
                return Err(format!(
                    "no complete run of bench `{bench}` in the history store"
                ));
            }
            Ok(promptgauge_report::history::render_html(&h, &|r| {
                Some(link(&r.run_id))
            }))
        })
    }

    fn report<'a>(&'a self, folder: &'a Path) -> promptgauge_web::Reply<'a, ()> {
        Box::pin(async move {
            let args = crate::cli::ReportArgs {
                run: folder.to_path_buf(),
                jobs_csv: None,
            };
            tokio::task::spawn_blocking(move || super::report::rebuild(&args).map(|_| ()))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
        })
    }
}
