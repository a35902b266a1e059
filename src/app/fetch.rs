//! `--fetch-urls`: every URL a bench's cases attach, downloaded once before anything is
//! sent (docs/guide/attachments.md, "URLs"). A fetched file is then a file like any other:
//! its kind from its bytes, its cost from its pixels or pages, its cache key its SHA-256,
//! and it is sent as its bytes — so a protocol that takes a kind only as bytes (a PDF on
//! OpenAI chat completions) can carry it. Each read is held to a size (the largest file a
//! case may attach, `limits.max_file_bytes` or 32 MiB) and a time (10 s to connect, 30 s
//! in all); the fetched files of a run are held in memory, at most 1 GiB together.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::client::attachment::{Attachment, FileBytes, FileSource, FileTokens, Kind, sha256_hex};
use crate::suite::{Bench, InputError, InputErrors};

/// How long one file may take, from the request to its last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest fetched file, unless `limits.max_file_bytes` says otherwise.
const MOST_BYTES: u64 = 32 * 1024 * 1024;
/// What a run holds of fetched files in all.
const MOST_TOTAL: u64 = 1 << 30;
/// Files fetched at once.
const AT_ONCE: usize = 8;

/// Replaces every URL the cases attach (their `files:` and their history's) by its bytes.
pub(crate) fn fetch_urls(bench: &mut Bench) -> Result<(), InputErrors> {
    let most = bench.limits.max_file_bytes.map_or(MOST_BYTES, |b| b as u64);
    let wanted = wanted(bench);
    if wanted.is_empty() {
        return Ok(());
    }
    let urls: Vec<String> = wanted.iter().map(|(u, _)| u.clone()).collect();
    let fetched = std::thread::scope(|s| {
        s.spawn(|| download_all(&urls, most))
            .join()
            .unwrap_or_else(|_| vec![Err("the download failed".into()); urls.len()])
    });
    let got = checked(bench, &wanted, fetched)?;
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

/// The downloads, each a file promptgauge sends, within the total held; an error for each
/// that is not, naming the first case that attaches it.
fn checked(
    bench: &Bench,
    wanted: &[(String, usize)],
    fetched: Vec<Result<Vec<u8>, String>>,
) -> Result<HashMap<String, Fetched>, InputErrors> {
    let mut errors = Vec::new();
    let mut got: HashMap<String, Fetched> = HashMap::new();
    let mut total = 0u64;
    for ((url, case), result) in wanted.iter().zip(fetched) {
        let case = &bench.cases[*case];
        let shown = crate::client::secrets::redact_url(url);
        let fail = |why: String| {
            InputError::new(
                case.location.clone(),
                format!("case `{}`: {shown} {why}", case.id),
            )
        };
        match result.and_then(|bytes| kind_of(&bytes).map(|k| (k, bytes))) {
            Ok((kind, bytes)) => {
                total += bytes.len() as u64;
                if total > MOST_TOTAL {
                    errors.push(fail(format!("takes the fetched files past {} GiB", MOST_TOTAL >> 30))
                        .fix("download the files and name their paths: they are then read per request, not held"));
                    break;
                }
                got.insert(
                    url.clone(),
                    Fetched {
                        kind,
                        size: bytes.len() as u64,
                        sha256: sha256_hex(&bytes),
                        tokens: FileTokens::of(kind, Some(&bytes), None),
                        tokens_low: FileTokens::of(kind, Some(&bytes), Some("low")),
                        held: FileBytes::new(bytes, kind),
                    },
                );
            }
            Err(why) => errors.push(fail(why).fix(
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
struct Fetched {
    kind: Kind,
    size: u64,
    sha256: String,
    /// Its prompt tokens, and at `detail: low`.
    tokens: FileTokens,
    tokens_low: FileTokens,
    held: Arc<FileBytes>,
}

/// What a fetched file is, from its bytes; an SVG (text to the sniffer) is refused.
fn kind_of(bytes: &[u8]) -> Result<Kind, String> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    if head.contains("<svg") || head.contains("<html") || head.contains("<!doctype") {
        return Err("is an SVG image or an HTML page, which promptgauge does not send".into());
    }
    Kind::sniff(bytes).ok_or_else(|| {
        "is not a file promptgauge can send (PNG, JPEG, WebP, GIF, PDF, plain text, WAV, MP3)"
            .into()
    })
}

fn too_large(most: u64) -> String {
    format!(
        "is larger than {:.1} MiB, the most a fetched file may be (limits.max_file_bytes raises it)",
        most as f64 / 1_048_576.0
    )
}

/// Downloads `urls`, [`AT_ONCE`] at a time, each within `most` bytes and the timeouts.
fn download_all(urls: &[String], most: u64) -> Vec<Result<Vec<u8>, String>> {
    use futures_util::StreamExt;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return vec![Err(e.to_string()); urls.len()],
    };
    runtime.block_on(async {
        let http = match reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
        {
            Ok(h) => h,
            Err(e) => return vec![Err(e.to_string()); urls.len()],
        };
        futures_util::stream::iter(urls)
            .map(|u| download(&http, u, most))
            .buffered(AT_ONCE)
            .collect()
            .await
    })
}

async fn download(http: &reqwest::Client, url: &str, most: u64) -> Result<Vec<u8>, String> {
    use futures_util::StreamExt;
    let response = http.get(url).send().await.map_err(|e| {
        format!(
            "could not be fetched: {}",
            crate::client::transport::describe(&e)
        )
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("answered {status}"));
    }
    if response.content_length().is_some_and(|n| n > most) {
        return Err(too_large(most));
    }
    let mut bytes = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk =
            chunk.map_err(|e| format!("broke off: {}", crate::client::transport::describe(&e)))?;
        if (bytes.len() + chunk.len()) as u64 > most {
            return Err(too_large(most));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
