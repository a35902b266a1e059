//! `--fetch-urls` (docs/guide/attachments.md, "URLs"), against file servers on loopback:
//! what a URL must hold to be sent (never a page or an SVG, by its `Content-Type` or its
//! first element, sniffed as a case's own files are), no signed URL's signature in any
//! output when its download fails, and Ctrl-C while the files download.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::attachments::{USER, one_case, said, serve, served_files};
use crate::common::*;
use promptgauge::mock::MockConfig;

/// `promptgauge COMMAND bench.yaml --fetch-urls` in `d` against the simulator at `url`.
fn fetching(d: &std::path::Path, command: &str, url: &str) -> std::process::Output {
    let mut cmd = promptgauge(d);
    cmd.args([command, "bench.yaml", "--fetch-urls"]);
    if command == "run" {
        cmd.args(["--quiet", "--no-store", "--model", "m", "--base-url", url]);
    }
    cmd.output().unwrap()
}

/// An SVG whose `<svg` tag comes after 3 KiB of prolog: what a look at the first kilobyte
/// takes for plain text.
fn late_svg() -> Vec<u8> {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- {} -->\n<!DOCTYPE note>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>\n",
        "drawn by hand; ".repeat(200)
    )
    .into_bytes()
}

#[test]
fn a_page_served_as_html_and_an_svg_past_its_first_kilobytes_are_refused_with_the_reason() {
    let (rt, server) = start_mock(MockConfig::default());
    let (web, hits) = served_files(
        &rt,
        vec![
            // Text to the bytes, but the server says it is a page (a sign-in page's text).
            (
                "/total.txt",
                "text/html; charset=utf-8",
                b"Total: 42 (sign in to see more)".to_vec(),
            ),
            ("/logo.png", "application/octet-stream", late_svg()),
        ],
    );
    for (files, expected) in [
        (
            format!(r#"[{{"url": "{web}/total.txt"}}]"#),
            "/total.txt is served as text/html",
        ),
        (
            format!(r#"["{web}/logo.png"]"#),
            "/logo.png is an SVG image",
        ),
    ] {
        let bench = one_case(&files, USER, "");
        for command in ["run", "check"] {
            let out = fetching(bench.path(), command, &server.base_url());
            assert_eq!(out.status.code(), Some(2), "{command}: {}", said(&out));
            assert!(
                said(&out).contains("case `c1`") && said(&out).contains(expected),
                "{command}, {expected}: {}",
                said(&out)
            );
        }
    }
    assert_eq!(hits.load(Ordering::SeqCst), 4);
    // The same SVG as a case's own file: the same sniffer, the same reason.
    let bench = one_case(r#"["f/logo.txt"]"#, USER, "");
    std::fs::write(bench.path().join("f/logo.txt"), late_svg()).unwrap();
    let out = promptgauge(bench.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("f/logo.txt is an SVG image, which no provider takes"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, 0);
}

#[test]
fn a_signed_url_s_signature_is_in_no_output_when_its_download_fails() {
    let (rt, server) = start_mock(MockConfig::default());
    // A server that sends every request back to itself: the HTTP client gives up, naming
    // the URL it was sent to last.
    let hits = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/loop.png",
        axum::routing::get(|| async {
            (
                axum::http::StatusCode::FOUND,
                [(
                    axum::http::header::LOCATION,
                    "/loop.png?X-Amz-Signature=SIGSECRET456",
                )],
            )
        }),
    );
    let (web, _) = serve(&rt, app, hits);
    // And a port nobody listens on: the connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    for (url, said_there) in [
        (
            format!("{gone}/r.png?X-Amz-Signature=SIGSECRET123&X-Amz-Credential=AKIDSECRET789"),
            "could not be fetched",
        ),
        (
            format!("{web}/loop.png?X-Amz-Signature=SIGSECRET123"),
            "redirect",
        ),
    ] {
        let bench = one_case(&format!(r#"["{url}"]"#), USER, "");
        for command in ["run", "check"] {
            let out = fetching(bench.path(), command, &server.base_url());
            let all = said(&out);
            assert_eq!(out.status.code(), Some(2), "{command}: {all}");
            assert!(all.contains(said_there), "{command}: {all}");
            assert!(
                all.contains("X-Amz-Signature=[redacted]"),
                "{command}: {all}"
            );
            for secret in ["SIGSECRET123", "SIGSECRET456", "AKIDSECRET789"] {
                assert!(!all.contains(secret), "{command} shows {secret}: {all}");
            }
            assert!(!bench.path().join("reports").exists(), "{command}");
        }
    }
    assert_eq!(server.provider.stats().requests, 0);
}

#[cfg(unix)]
#[test]
fn ctrl_c_while_the_files_download_ends_the_run_at_once_with_exit_130() {
    let (rt, server) = start_mock(MockConfig::default());
    // Sixteen files whose bodies never come.
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().route(
        "/slow/{n}",
        axum::routing::get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async {
                let never = futures_util::stream::pending::<Result<Vec<u8>, std::io::Error>>();
                (
                    [(axum::http::header::CONTENT_TYPE, "image/png")],
                    axum::body::Body::from_stream(never),
                )
            }
        }),
    );
    let (web, hits) = serve(&rt, app, hits);
    let files: Vec<String> = (0..16).map(|n| format!("\"{web}/slow/{n}.png\"")).collect();
    let bench = one_case(&format!("[{}]", files.join(", ")), USER, "");
    let d = bench.path();
    let url = server.base_url();
    let (mut child, heard) = spawned_heard(
        d,
        &[
            "run",
            "bench.yaml",
            "--fetch-urls",
            "--no-store",
            "--model",
            "m",
            "--base-url",
            &url,
        ],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while hits.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(hits.load(Ordering::SeqCst) > 0, "no download started");
    let interrupted = std::time::Instant::now();
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    heard.wait_for("interrupted while --fetch-urls downloaded");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    // At once: not after the downloads' 30 s.
    assert!(
        interrupted.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        interrupted.elapsed()
    );
    assert_eq!(server.provider.stats().requests, 0);
    assert!(!d.join("reports").exists());
}
