//! Streams that lie, stutter or overflow, played byte for byte by a scripted server: each has
//! one defined outcome (documented in README.md, "Hostile streams").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use promptgauge::client::transport::BoxFuture;
use promptgauge::client::{
    Client, ClientConfig, HttpRequest, HttpResponse, JobRequest, JobResult, Outcome, Transport,
    TransportError,
};
use promptgauge::suite::ChatMessage;
use serde_json::Map;

/// Answers each attempt with the next script (the last one repeats): 200 and these chunks.
struct Scripted {
    scripts: Mutex<Vec<Vec<Vec<u8>>>>,
}

impl Transport for Scripted {
    fn send(&self, _: HttpRequest) -> BoxFuture<Result<HttpResponse, TransportError>> {
        let chunks = {
            let mut s = self.scripts.lock().unwrap();
            if s.len() > 1 {
                s.remove(0)
            } else {
                s[0].clone()
            }
        };
        Box::pin(async move {
            let items: Vec<Result<Bytes, TransportError>> =
                chunks.into_iter().map(|c| Ok(Bytes::from(c))).collect();
            Ok(HttpResponse {
                status: 200,
                headers: vec![],
                body: Box::pin(futures_util::stream::iter(items)),
            })
        })
    }
}

fn chunk(delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_string(), |f| format!("\"{f}\""));
    format!(r#"data: {{"choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#)
}

const USAGE: &str = r#"data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":2}}}"#;

async fn play(scripts: Vec<Vec<String>>, tweak: impl FnOnce(&mut ClientConfig)) -> JobResult {
    let scripts = scripts
        .into_iter()
        .map(|s| s.into_iter().map(String::into_bytes).collect())
        .collect();
    play_bytes(scripts, tweak).await
}

async fn play_bytes(
    scripts: Vec<Vec<Vec<u8>>>,
    tweak: impl FnOnce(&mut ClientConfig),
) -> JobResult {
    let mut config = ClientConfig::new("http://scripted/v1", "m");
    config.max_attempts = 2;
    config.backoff_base = Duration::from_millis(1);
    tweak(&mut config);
    let client = Client::new(
        Arc::new(Scripted {
            scripts: Mutex::new(scripts),
        }),
        config,
    );
    client
        .execute(&JobRequest {
            messages: vec![ChatMessage {
                role: "user".into(),
                content: "x".into(),
            }],
            params: Map::new(),
            idempotency_key: "k".into(),
            reserve_tokens: 0,
        })
        .await
}

fn outcomes(r: &JobResult) -> Vec<Outcome> {
    r.attempts.iter().map(|a| a.outcome).collect()
}

fn lines(events: &[&str]) -> Vec<String> {
    vec![events.iter().map(|e| format!("{e}\n\n")).collect()]
}

const GOOD_END: [&str; 2] = [USAGE, "data: [DONE]"];

#[tokio::test(start_paused = true)]
async fn duplicated_finish_reason_keeps_the_first() {
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"B"}"#, None),
            &chunk("{}", Some("stop")),
            &chunk("{}", Some("length")),
            &chunk("{}", Some("stop")),
            GOOD_END[0],
            GOOD_END[1],
        ])],
        |_| {},
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(
        (r.text.as_str(), r.finish_reason.as_deref()),
        ("B", Some("stop"))
    );
}

#[tokio::test(start_paused = true)]
async fn usage_before_finish_reason_is_kept() {
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"B"}"#, None),
            USAGE,
            &chunk("{}", Some("stop")),
            "data: [DONE]",
        ])],
        |_| {},
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.usage.unwrap().prompt_tokens, 5);
}

#[tokio::test(start_paused = true)]
async fn usage_without_finish_reason_is_a_cut() {
    let r = play(
        vec![
            lines(&[&chunk(r#"{"content":"B"}"#, None), USAGE, "data: [DONE]"]),
            lines(&[&chunk(r#"{"content":"C"}"#, Some("stop")), "data: [DONE]"]),
        ],
        |_| {},
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete]);
    assert_eq!(r.text, "C", "the cut attempt's text is never the answer");
}

#[tokio::test(start_paused = true)]
async fn reasoning_is_kept_apart_and_counted() {
    let r = play(
        vec![lines(&[
            &chunk(r#"{"reasoning_content":"The customer "}"#, None),
            &chunk(r#"{"reasoning":"wants a refund."}"#, None),
            &chunk(r#"{"content":"A"}"#, Some("stop")),
            GOOD_END[0],
            GOOD_END[1],
        ])],
        |_| {},
    )
    .await;
    assert_eq!(r.text, "A");
    assert_eq!(r.reasoning, "The customer wants a refund.");
    assert_eq!(r.usage.unwrap().reasoning_tokens, 2);
    // TTFT counts the first reasoning token: the model was already answering.
    assert!(r.attempts[0].ttft_ms.is_some());
}

#[tokio::test(start_paused = true)]
async fn done_without_a_trailing_blank_line_still_completes() {
    let body = format!(
        "{}\n\n{}\n\ndata: [DONE]",
        chunk(r#"{"content":"B"}"#, None),
        chunk("{}", Some("stop"))
    );
    let r = play(vec![vec![body]], |_| {}).await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.text, "B");
}

#[tokio::test(start_paused = true)]
async fn a_final_chunk_without_its_blank_line_is_discarded() {
    // The finish_reason sits in an event the stream never terminated: it did not arrive.
    let body = format!(
        "{}\n\n{}",
        chunk(r#"{"content":"B"}"#, None),
        chunk("{}", Some("stop"))
    );
    let r = play(vec![vec![body]], |c| c.max_attempts = 1).await;
    assert_eq!(outcomes(&r), [Outcome::Cut]);
    assert!(!r.answered());
}

#[tokio::test(start_paused = true)]
async fn non_json_data_lines_are_skipped_and_counted() {
    let r = play(
        vec![lines(&[
            "data: hello there",
            &chunk(r#"{"content":"B"}"#, None),
            "data: {truncated",
            &chunk("{}", Some("stop")),
            "data: [DONE]",
        ])],
        |_| {},
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.text, "B");
    assert_eq!(r.attempts[0].ignored_events, 2);
}

#[tokio::test(start_paused = true)]
async fn an_error_event_mid_stream_is_a_stream_error_even_after_text() {
    let r = play(
        vec![
            lines(&[
                &chunk(r#"{"content":"par"}"#, None),
                r#"data: {"error":{"message":"upstream died","type":"server_error"}}"#,
            ]),
            lines(&[&chunk(r#"{"content":"whole"}"#, Some("stop"))]),
        ],
        |_| {},
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::StreamError, Outcome::Complete]);
    assert_eq!(r.attempts[0].error.as_deref(), Some("upstream died"));
    assert_eq!(r.text, "whole");
}

#[tokio::test(start_paused = true)]
async fn an_oversized_response_fails_the_job_without_retrying() {
    let big = chunk(&format!(r#"{{"content":"{}"}}"#, "x".repeat(2000)), None);
    let r = play(
        vec![lines(&[&big, &big, &big, &chunk("{}", Some("stop"))])],
        |c| {
            c.max_response_bytes = 4096;
            c.max_attempts = 5;
        },
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::StreamError]);
    assert!(!r.answered());
    assert!(
        r.failure.as_deref().unwrap().contains("max_response_bytes"),
        "{:?}",
        r.failure
    );
}

#[tokio::test(start_paused = true)]
async fn every_byte_split_of_a_stream_gives_the_same_answer() {
    let whole = lines(&[
        &chunk(r#"{"content":"Ça → "}"#, None),
        &chunk(r#"{"content":"東京"}"#, Some("stop")),
        "data: [DONE]",
    ])
    .remove(0)
    .replace("\n", "\r\n");
    let bytes = whole.as_bytes();
    for cut in 0..=bytes.len() {
        let script = vec![vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]];
        let r = play_bytes(script, |_| {}).await;
        assert_eq!(r.text, "Ça → 東京", "cut at {cut}");
    }
}
