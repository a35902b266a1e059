//! `--fetch-urls`: every URL a bench's cases attach, downloaded once before anything is
//! sent (docs/guide/attachments.md, "URLs"). A fetched file is then a file like any other:
//! its kind from its bytes (and never an HTML page or an SVG image, by its `Content-Type`
//! or its first element: `Kind::of_file`, the sniffer a case's own files go through), its
//! cost from its pixels or pages, its cache key its SHA-256, and it is sent as its bytes —
//! so a protocol that takes a kind only as bytes (a PDF on OpenAI chat completions) can
//! carry it. Each read is held to a size (the largest file a case may attach,
//! `limits.max_file_bytes` or 32 MiB) and a time (10 s to connect, 30 s in all); the
//! fetched files of a run are held in memory, at most 1 GiB together, counted as the bytes
//! arrive: the download that crosses it stops there, and no other starts. Ctrl-C (or
//! SIGTERM) stops the downloads at once: nothing was sent, exit 130.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::Failure;
use promptgauge_client::attachment::{
    Attachment, FileBytes, FileSource, FileTokens, Kind, sha256_hex,
};
use promptgauge_suite::error::shown_size;
use promptgauge_suite::{Bench, InputError, InputErrors};

/// How long one file may take, from the request to its last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest fetched file, unless `limits.max_file_bytes` says otherwise.
const MOST_BYTES: u64 = 32 * 1024 * 1024;
/// What a run holds of fetched files in all.
const MOST_TOTAL: u64 = 1 << 30;
/// Files fetched at once.
const AT_ONCE: usize = 8;

/// Why `--fetch-urls` left the bench without its files.
#[derive(Debug)]
pub(crate) enum NotFetched {
    /// URLs that failed or hold no file promptgauge sends, each naming its case.
    Refused(InputErrors),
    /// Ctrl-C or SIGTERM while the files downloaded.
    Interrupted,
}

impl From<NotFetched> for Failure {
    fn from(e: NotFetched) -> Failure {
        match e {
            NotFetched::Refused(errors) => Failure::from(errors),
            NotFetched::Interrupted => Failure::Interrupted(anyhow::anyhow!(
                "interrupted while --fetch-urls downloaded the cases' files: nothing was sent"
            )),
        }
    }
}

/// What the downloads are held to.
#[derive(Debug, Clone, Copy)]
struct Caps {
    /// One file's bytes.
    file: u64,
    /// Every file's together, counted as they arrive.
    total: u64,
    /// Downloads at once.
    at_once: usize,
}

/// Replaces every URL the cases attach (their `files:` and their history's) by its bytes.
pub(crate) fn fetch_urls(bench: &mut Bench) -> Result<(), NotFetched> {
    let caps = Caps {
        file: bench.limits.max_file_bytes.map_or(MOST_BYTES, |b| b as u64),
        total: MOST_TOTAL,
        at_once: AT_ONCE,
    };
    let wanted = wanted(bench);
    if wanted.is_empty() {
        return Ok(());
    }
    let urls: Vec<String> = wanted.iter().map(|(u, _)| u.clone()).collect();
    // Its own thread and runtime: a command's runtime is already running this one.
    let downloads = std::thread::scope(|s| {
        s.spawn(|| download_all(&urls, caps))
            .join()
            .unwrap_or_else(|_| {
                Ok(vec![
                    Some(Err(Why::Failed("the download failed".into())));
                    urls.len()
                ])
            })
    })
    .map_err(|Interrupted| NotFetched::Interrupted)?;
    let got = checked(bench, &wanted, downloads, caps).map_err(NotFetched::Refused)?;
    let fetched = |f: &Arc<Attachment>| -> Arc<Attachment> {
        let Some(got) = f.url().and_then(|u| got.get(u)) else {
            return f.clone();
        };
        Arc::new(Attachment {
            kind: got.kind,
            size: got.size,
            sha256: Some(got.sha256.clone()),
            tokens: if f.detail.as_deref() == Some("low") {
                got.tokens_low
            } else {
                got.tokens
            },
            source: Some(FileSource::Bytes(got.held.clone())),
            ..(**f).clone()
        })
    };
    for case in &mut bench.cases {
        for f in &mut case.files {
            *f = fetched(f);
        }
        for placed in case.messages.iter_mut().flat_map(|m| m.files.iter_mut()) {
            placed.file = fetched(&placed.file);
        }
    }
    Ok(())
}

/// Each URL the cases attach once, with the first case that names it (for the messages).
fn wanted(bench: &Bench) -> Vec<(String, usize)> {
    let mut wanted: Vec<(String, usize)> = Vec::new();
    for (i, case) in bench.cases.iter().enumerate() {
        let history = case
            .messages
            .iter()
            .flat_map(|m| m.files.iter().map(|p| &p.file));
        for f in case.files.iter().chain(history) {
            if let Some(url) = f.url()
                && !wanted.iter().any(|(u, _)| u == url)
            {
                wanted.push((url.to_string(), i));
            }
        }
    }
    wanted
}

/// The downloads, each a file promptgauge sends; an error for each that is not, naming the
/// first case that attaches it. A URL not fetched (`None`: the downloads stopped at the
/// total) is said once, by the error of the download that crossed it.
fn checked(
    bench: &Bench,
    wanted: &[(String, usize)],
    downloads: Vec<Option<Result<Fetched, Why>>>,
    caps: Caps,
) -> Result<HashMap<String, Fetched>, InputErrors> {
    let mut errors = Vec::new();
    let mut got: HashMap<String, Fetched> = HashMap::new();
    let not_fetched = downloads.iter().filter(|d| d.is_none()).count();
    for ((url, case), download) in wanted.iter().zip(downloads) {
        let case = &bench.cases[*case];
        let fail = |why: String| {
            InputError::new(
                case.location.clone(),
                format!(
                    "case `{}`: {} {why}",
                    case.id,
                    promptgauge_client::secrets::redact_url(url)
                ),
            )
        };
        match download {
            None => {}
            Some(Ok(file)) => {
                got.insert(url.clone(), file);
            }
            Some(Err(Why::PastTotal)) => errors.push(
                fail(format!(
                    "takes the fetched files past {}, the most a run holds: the downloads stopped there ({not_fetched} URLs not fetched)",
                    shown_size(caps.total)
                ))
                .fix("download the files and name their paths: they are then read per request, not held"),
            ),
            Some(Err(Why::NotAFile(not))) => errors.push(fail(not.to_string()).fix(not.fix())),
            Some(Err(Why::Failed(why))) => errors.push(fail(why).fix(
                "check the URL (or download the file and name its path), or run without --fetch-urls to give the provider the URL",
            )),
        }
    }
    if errors.is_empty() {
        Ok(got)
    } else {
        Err(InputErrors(errors))
    }
}

/// A URL's file, downloaded: what a case's attachment of it becomes.
#[derive(Debug, Clone)]
struct Fetched {
    kind: Kind,
    size: u64,
    sha256: String,
    /// Its prompt tokens, and at `detail: low`.
    tokens: FileTokens,
    tokens_low: FileTokens,
    held: Arc<FileBytes>,
}

impl Fetched {
    /// `bytes` served as `served_as` (the response's `Content-Type`), when they are a file
    /// promptgauge sends: its kind, hash and tokens, and its bytes held encoded (the raw
    /// bytes are let go of here).
    fn of(bytes: Vec<u8>, served_as: Option<&str>) -> Result<Fetched, Why> {
        let kind = Kind::of_file(&bytes, served_as).map_err(Why::NotAFile)?;
        Ok(Fetched {
            kind,
            size: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            tokens: FileTokens::of(kind, Some(&bytes), None),
            tokens_low: FileTokens::of(kind, Some(&bytes), Some("low")),
            held: FileBytes::new(bytes, kind),
        })
    }
}

/// Why a URL gave no file.
#[derive(Debug, Clone)]
enum Why {
    /// It could not be fetched, answered an error, or was larger than a file may be.
    Failed(String),
    /// It is no file promptgauge sends (an HTML page, an SVG image, none of the kinds).
    NotAFile(promptgauge_client::attachment::NotAFile),
    /// Its bytes took the files fetched past [`Caps::total`].
    PastTotal,
}

/// Ctrl-C or SIGTERM came while the files downloaded.
#[derive(Debug)]
struct Interrupted;

fn too_large(most: u64) -> Why {
    Why::Failed(format!(
        "is larger than {:.1} MiB, the most a fetched file may be (limits.max_file_bytes raises it)",
        most as f64 / 1_048_576.0
    ))
}

/// Downloads `urls`, [`Caps::at_once`] at a time, each within the caps and the timeouts;
/// each URL's file or why not, in order (`None`: never fetched, the downloads having
/// stopped at the total). Stops at Ctrl-C or SIGTERM, whose handlers are in place before
/// the first request.
fn download_all(
    urls: &[String],
    caps: Caps,
) -> Result<Vec<Option<Result<Fetched, Why>>>, Interrupted> {
    let failed = |why: String| Ok(vec![Some(Err(Why::Failed(why))); urls.len()]);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return failed(e.to_string()),
    };
    runtime.block_on(async {
        let mut stop = Stop::watch();
        let http = match reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
        {
            Ok(h) => h,
            Err(e) => return failed(promptgauge_client::transport::describe(&e)),
        };
        tokio::select! {
            done = each_download(&http, urls, caps) => Ok(done),
            () = stop.next() => Err(Interrupted),
        }
    })
}

/// The downloads themselves (see [`download_all`]).
async fn each_download(
    http: &reqwest::Client,
    urls: &[String],
    caps: Caps,
) -> Vec<Option<Result<Fetched, Why>>> {
    use futures_util::StreamExt;
    let total = AtomicU64::new(0);
    let mut done: Vec<Option<Result<Fetched, Why>>> = vec![None; urls.len()];
    let mut downloads = futures_util::stream::iter(urls.iter().enumerate())
        .map(|(i, url)| {
            let total = &total;
            async move { (i, download(http, url, caps, total).await) }
        })
        .buffer_unordered(caps.at_once);
    while let Some((i, result)) = downloads.next().await {
        let crossed = matches!(result, Err(Why::PastTotal));
        done[i] = Some(result);
        if crossed {
            // The downloads in flight are dropped with the stream, and none starts.
            break;
        }
    }
    done
}

/// One URL's file, its bytes counted into `total` as they arrive (and out again when they
/// make no file).
async fn download(
    http: &reqwest::Client,
    url: &str,
    caps: Caps,
    total: &AtomicU64,
) -> Result<Fetched, Why> {
    use futures_util::StreamExt;
    if total.load(Ordering::SeqCst) > caps.total {
        return Err(Why::PastTotal);
    }
    let response = http.get(url).send().await.map_err(|e| {
        Why::Failed(format!(
            "could not be fetched: {}",
            promptgauge_client::transport::describe(&e)
        ))
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(Why::Failed(format!("answered {status}")));
    }
    let served_as = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    // A page is refused by what it is served as before its bytes are read.
    if let Some(not) = served_as
        .as_deref()
        .and_then(promptgauge_client::attachment::NotAFile::served)
    {
        return Err(Why::NotAFile(not));
    }
    if response.content_length().is_some_and(|n| n > caps.file) {
        return Err(too_large(caps.file));
    }
    let mut bytes = Vec::new();
    let mut body = response.bytes_stream();
    let read = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                Why::Failed(format!(
                    "broke off: {}",
                    promptgauge_client::transport::describe(&e)
                ))
            })?;
            let n = chunk.len() as u64;
            if bytes.len() as u64 + n > caps.file {
                return Err(too_large(caps.file));
            }
            if total.fetch_add(n, Ordering::SeqCst) + n > caps.total {
                return Err(Why::PastTotal);
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(())
    };
    let file = read
        .await
        .and_then(|()| Fetched::of(std::mem::take(&mut bytes), served_as.as_deref()));
    if let Err(why) = &file
        && !matches!(why, Why::PastTotal)
    {
        // Not held: its bytes leave the total.
        total.fetch_sub(bytes.len() as u64, Ordering::SeqCst);
    }
    file
}

/// SIGINT and SIGTERM (Ctrl-C elsewhere), watched while the files download.
struct Stop {
    #[cfg(unix)]
    signals: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Stop {
    /// Handlers in place from now on (none, if they cannot be: a signal then ends the
    /// process as it would anyway).
    fn watch() -> Stop {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Stop {
                signals: signal(SignalKind::interrupt())
                    .and_then(|int| Ok((int, signal(SignalKind::terminate())?)))
                    .ok(),
            }
        }
        #[cfg(not(unix))]
        Stop {}
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        match &mut self.signals {
            Some((int, term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            None => std::future::pending().await,
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A loopback server of `count` files of `size` bytes each (`/0` …), sent in 64 KiB
    /// pieces, on a runtime of its own; counts the GETs it answered.
    fn files_served(
        count: usize,
        size: usize,
    ) -> (tokio::runtime::Runtime, Vec<String>, Arc<AtomicUsize>) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let app = axum::Router::new().route(
            "/{n}",
            axum::routing::get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async move {
                    let pieces = (0..size.div_ceil(65_536)).map(move |i| {
                        let n = 65_536.min(size - i * 65_536);
                        Ok::<_, std::io::Error>(vec![b'a'; n])
                    });
                    axum::body::Body::from_stream(futures_util::stream::iter(pieces))
                }
            }),
        );
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let at = listener.local_addr().unwrap();
        rt.spawn(async move { axum::serve(listener, app).await });
        let urls = (0..count).map(|n| format!("http://{at}/{n}")).collect();
        (rt, urls, hits)
    }

    #[test]
    fn the_total_is_counted_as_bytes_arrive_and_no_download_starts_past_it() {
        // 40 files of 1 MiB against a total of 3 MiB: today's 40 URLs of 30 MiB against
        // 1 GiB, scaled down.
        let (_rt, urls, hits) = files_served(40, 1 << 20);
        let caps = Caps {
            file: 2 << 20,
            total: 3 << 20,
            at_once: 4,
        };
        let done = download_all(&urls, caps).unwrap();
        let held: Vec<&Fetched> = done
            .iter()
            .flatten()
            .filter_map(|d| d.as_ref().ok())
            .collect();
        let past = done
            .iter()
            .flatten()
            .filter(|d| matches!(d, Err(Why::PastTotal)))
            .count();
        assert_eq!(past, 1, "{done:?}");
        assert!(held.len() <= 3, "{} held", held.len());
        assert!(held.iter().map(|f| f.size).sum::<u64>() <= caps.total);
        // Stopped fetching: the downloads in flight when it crossed, and none after.
        let asked = hits.load(Ordering::SeqCst);
        assert!(asked <= held.len() + caps.at_once, "{asked} GETs");
        assert!(done.iter().filter(|d| d.is_none()).count() >= 40 - asked);
    }

    #[test]
    fn a_file_larger_than_a_file_may_be_stops_at_its_limit_and_leaves_the_total() {
        let (_rt, urls, _) = files_served(2, 3 << 20);
        let caps = Caps {
            file: 1 << 20,
            total: 3 << 19,
            at_once: 1,
        };
        let done = download_all(&urls, caps).unwrap();
        // The first's megabyte leaves the total when it is refused: the second is read to
        // its own limit too, not stopped at the total.
        for d in &done {
            assert!(
                matches!(d, Some(Err(Why::Failed(why))) if why.contains("is larger than 1.0 MiB")),
                "{d:?}"
            );
        }
    }
}
