//! Streams that lie, stutter or overflow, played byte for byte by a scripted server: each has
//! one defined outcome (documented in docs/guide/client.md, "Hostile streams").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use promptgauge::client::transport::BoxFuture;
use promptgauge::client::{
    Client, ClientConfig, HttpRequest, HttpResponse, JobRequest, JobResult, Outcome, Transport,
    TransportError,
};
use promptgauge::suite::ChatMessage;
use serde_json::Map;

/// The same rules for Anthropic messages' streams.
mod anthropic;

/// One scripted answer: a status, headers and these chunks; then the body ends, or (with
/// `hang`) stays open forever.
#[derive(Clone, Default)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) chunks: Vec<Vec<u8>>,
    pub(crate) hang: bool,
}

impl Reply {
    pub(crate) fn ok(chunks: Vec<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            chunks,
            ..Reply::default()
        }
    }
}

/// Answers each attempt with the next reply (the last one repeats), and keeps the URLs
/// and headers it was sent.
#[derive(Default)]
pub(crate) struct Scripted {
    pub(crate) replies: Mutex<Vec<Reply>>,
    pub(crate) seen: Mutex<Vec<HttpRequest>>,
}

impl Transport for Scripted {
    fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, TransportError>> {
        self.seen.lock().unwrap().push(request);
        let reply = {
            let mut s = self.replies.lock().unwrap();
            if s.len() > 1 {
                s.remove(0)
            } else {
                s[0].clone()
            }
        };
        Box::pin(async move {
            let items: Vec<Result<Bytes, TransportError>> = reply
                .chunks
                .into_iter()
                .map(|c| Ok(Bytes::from(c)))
                .collect();
            let body = futures_util::stream::iter(items);
            Ok(HttpResponse {
                status: reply.status,
                headers: reply.headers,
                body: if reply.hang {
                    Box::pin(body.chain(futures_util::stream::pending()))
                } else {
                    Box::pin(body)
                },
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
    play_replies(scripts.into_iter().map(Reply::ok).collect(), tweak)
        .await
        .0
}

/// A client (two attempts, then as `tweak` says) to a server that plays `replies`.
fn scripted_client(
    replies: Vec<Reply>,
    tweak: impl FnOnce(&mut ClientConfig),
) -> (Client, Arc<Scripted>) {
    let mut config = ClientConfig::new("http://scripted/v1", "m");
    config.limits.max_attempts = 2;
    config.backoff_base = Duration::from_millis(1);
    tweak(&mut config);
    let transport = Arc::new(Scripted {
        replies: Mutex::new(replies),
        ..Scripted::default()
    });
    (Client::new(transport.clone(), config), transport)
}

/// The one job the scripts answer.
fn the_job() -> JobRequest {
    JobRequest {
        messages: vec![ChatMessage::new("user", "x")],
        params: Map::new(),
        idempotency_key: "k".into(),
        reserve_tokens: 0,
    }
}

/// Plays replies to one job; returns its result and the requests the client sent.
async fn play_replies(
    replies: Vec<Reply>,
    tweak: impl FnOnce(&mut ClientConfig),
) -> (JobResult, Vec<HttpRequest>) {
    let (client, transport) = scripted_client(replies, tweak);
    let result = client.execute(&the_job()).await;
    let seen = std::mem::take(&mut *transport.seen.lock().unwrap());
    (result, seen)
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
    let r = play(vec![vec![body]], |c| c.limits.max_attempts = 1).await;
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
            c.limits.max_response_bytes = 4096;
            c.limits.max_attempts = 5;
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

// ---- Finish reasons that are not, text after the end, and servers that never close ----

#[tokio::test(start_paused = true)]
async fn an_empty_finish_reason_is_no_finish_so_a_broken_stream_is_cut() {
    // Some Ollama and SGLang versions send `"finish_reason": ""` on every chunk.
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"4"}"#, Some("")),
            &chunk(r#"{"content":"2"}"#, Some("")),
        ])],
        |c| c.limits.max_attempts = 1,
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Cut]);
    assert!(!r.answered(), "never graded");
}

#[tokio::test(start_paused = true)]
async fn a_finish_reason_outside_the_closed_list_is_no_finish_and_is_retried_like_a_cut() {
    // vLLM's `abort`, OpenRouter's `error`, `cancelled`, the string "null", anything unknown:
    // the partial text before it is never graded.
    for reason in ["abort", "error", "cancelled", "null", "STOP", "made_up"] {
        let r = play(
            vec![
                lines(&[
                    &chunk(r#"{"content":"4"}"#, None),
                    &chunk("{}", Some(reason)),
                    GOOD_END[0],
                    GOOD_END[1],
                ]),
                lines(&[
                    &chunk(r#"{"content":"42"}"#, None),
                    &chunk("{}", Some("stop")),
                    GOOD_END[0],
                    GOOD_END[1],
                ]),
            ],
            |_| {},
        )
        .await;
        assert_eq!(outcomes(&r), [Outcome::Cut, Outcome::Complete], "{reason}");
        let first = r.attempts[0].error.as_deref().unwrap_or_default();
        assert!(
            first.contains(&format!("{reason:?}")) && first.contains("not a finish"),
            "the value is recorded with the cut: {first}"
        );
        assert_eq!((r.text.as_str(), r.answered()), ("42", true), "{reason}");
    }
    // With no attempt left, the job fails: the partial "4" is not an answer.
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"4"}"#, None),
            &chunk("{}", Some("abort")),
        ])],
        |c| c.limits.max_attempts = 1,
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Cut]);
    assert!(!r.answered());
    assert!(
        r.failure
            .as_deref()
            .unwrap_or_default()
            .contains("\"abort\"")
    );
}

#[tokio::test(start_paused = true)]
async fn after_a_reason_that_is_no_finish_the_first_real_one_ends_the_answer() {
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"4"}"#, Some("null")),
            &chunk(r#"{"content":"2"}"#, Some("stop")),
            &chunk(r#"{"content":"!"}"#, Some("length")),
            "data: [DONE]",
        ])],
        |c| c.limits.max_attempts = 1,
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(
        (r.text.as_str(), r.finish_reason.as_deref()),
        ("42", Some("stop"))
    );
}

#[tokio::test(start_paused = true)]
async fn every_finish_on_the_list_ends_an_answer() {
    for (reason, outcome) in [
        ("stop", Outcome::Complete),
        ("tool_calls", Outcome::Complete),
        ("function_call", Outcome::Complete),
        ("eos_token", Outcome::Complete),
        ("stop_sequence", Outcome::Complete),
        ("length", Outcome::Truncated),
    ] {
        let r = play(
            vec![lines(&[
                &chunk(r#"{"content":"B"}"#, None),
                &chunk("{}", Some(reason)),
                "data: [DONE]",
            ])],
            |c| c.limits.max_attempts = 1,
        )
        .await;
        assert_eq!(outcomes(&r), [outcome], "{reason}");
        assert!(r.answered(), "{reason}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_content_filter_is_its_own_outcome_never_graded_and_never_retried() {
    let r = play(
        vec![
            lines(&[
                &chunk(r#"{"content":"Here is how to"}"#, None),
                &chunk("{}", Some("content_filter")),
                GOOD_END[0],
                GOOD_END[1],
            ]),
            lines(&[&chunk(r#"{"content":"B"}"#, Some("stop")), "data: [DONE]"]),
        ],
        |c| c.limits.max_attempts = 3,
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Filtered], "not retried");
    assert!(!r.answered() && r.filtered() && r.failure.is_none());
    assert_eq!(r.finish_reason.as_deref(), Some("content_filter"));
    // The provider answered (HTTP 200): the attempt is billed.
    assert!(r.attempts[0].usage.is_some());
}

#[tokio::test(start_paused = true)]
async fn length_after_empty_finish_reasons_is_truncation() {
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"4"}"#, Some("")),
            &chunk(r#"{"content":"2"}"#, Some("length")),
            "data: [DONE]",
        ])],
        |_| {},
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Truncated]);
    assert_eq!(r.text, "42");
}

#[tokio::test(start_paused = true)]
async fn text_after_the_first_finish_reason_is_ignored_and_counted() {
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"B"}"#, Some("stop")),
            &chunk(r#"{"content":" — no wait, A"}"#, None),
            &chunk(r#"{"content":"!"}"#, Some("stop")),
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
async fn a_finish_then_an_open_connection_completes_at_once() {
    // No [DONE], no close: the answer is whole at its finish_reason; latency ends there.
    let start = tokio::time::Instant::now();
    let (r, _) = play_replies(
        vec![Reply {
            hang: true,
            ..Reply::ok(vec![
                lines(&[
                    &chunk(r#"{"content":"B"}"#, None),
                    &chunk("{}", Some("stop")),
                ])
                .remove(0)
                .into_bytes(),
            ])
        }],
        |c| c.limits.idle_timeout = Duration::from_secs(30),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.text, "B");
    assert_eq!(r.attempts[0].latency_ms, 0.0, "not the 30 s idle timeout");
    assert!(
        start.elapsed() <= promptgauge::client::FINISH_GRACE + Duration::from_millis(100),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_usage_chunk_right_after_the_finish_is_kept_though_the_stream_stays_open() {
    let start = tokio::time::Instant::now();
    let (r, _) = play_replies(
        vec![Reply {
            hang: true,
            ..Reply::ok(vec![
                lines(&[&chunk(r#"{"content":"B"}"#, Some("stop"))])
                    .remove(0)
                    .into_bytes(),
                lines(&[USAGE]).remove(0).into_bytes(),
            ])
        }],
        |_| {},
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.usage.unwrap().prompt_tokens, 5);
    assert_eq!(r.attempts[0].latency_ms, 0.0, "not the idle timeout");
    assert!(start.elapsed() <= promptgauge::client::FINISH_GRACE + Duration::from_millis(100));
}

// ---- Values no clock can hold ----

#[tokio::test(start_paused = true)]
async fn an_absurd_retry_after_fails_the_job_with_the_reason_instead_of_panicking() {
    for (name, value) in [("retry-after", "1e30"), ("retry-after-ms", "1e300")] {
        let (r, seen) = play_replies(
            vec![Reply {
                status: 429,
                headers: vec![(name.to_string(), value.to_string())],
                ..Reply::default()
            }],
            |c| c.limits.max_attempts = 5,
        )
        .await;
        assert_eq!(seen.len(), 1, "{name}: no second attempt");
        let why = r.failure.unwrap();
        assert!(
            why.contains("more than a year") && why.contains("max_retry_after"),
            "{name}: {why}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn timeouts_too_long_for_the_clock_do_not_overflow() {
    let r = play(
        vec![lines(&[
            &chunk(r#"{"content":"B"}"#, Some("stop")),
            "data: [DONE]",
        ])],
        |c| {
            c.limits.first_token_timeout = Duration::MAX;
            c.limits.idle_timeout = Duration::MAX;
            c.limits.total_timeout = Duration::MAX;
        },
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
}

// ---- Secrets the server echoes back ----

#[tokio::test(start_paused = true)]
async fn a_key_echoed_by_the_server_is_scrubbed_from_everything_kept() {
    const KEY: &str = "sk-test-echo-0123456789abcdef";
    let echo = |s: &str| s.replace("KEY", KEY);
    let (r, seen) = play_replies(
        vec![
            // An error body quoting the header, long enough that a cut at 300 characters
            // would split the key if it were cut before scrubbing.
            Reply {
                status: 500,
                chunks: vec![
                    format!(
                        "{}Authorization: Bearer {KEY} was rejected upstream",
                        "x".repeat(290)
                    )
                    .into_bytes(),
                ],
                ..Reply::default()
            },
            Reply::ok(vec![
                lines(&[&echo(
                    r#"data: {"error":{"message":"bad header Bearer KEY"}}"#,
                )])
                .remove(0)
                .into_bytes(),
            ]),
            // An answer that repeats the key, split across two deltas.
            Reply::ok(vec![
                lines(&[
                    &chunk(
                        &format!(r#"{{"content":"your key is {}"}}"#, &KEY[..10]),
                        None,
                    ),
                    &chunk(&format!(r#"{{"content":"{}"}}"#, &KEY[10..]), Some("stop")),
                    "data: [DONE]",
                ])
                .remove(0)
                .into_bytes(),
            ]),
        ],
        |c| {
            c.limits.max_attempts = 3;
            c.api_key = Some(promptgauge::client::ApiKey::new(KEY.into()));
        },
    )
    .await;
    assert_eq!(seen.len(), 3);
    assert!(
        seen[0]
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v.ends_with(KEY)),
        "the key is still sent"
    );
    let kept = format!("{:?} {:?} {}", r.attempts, r.failure, r.text);
    assert!(!kept.contains(&KEY[..12]), "{kept}");
    assert!(kept.contains("[redacted]"), "{kept}");
    assert_eq!(r.text, "your key is [redacted]");
}

#[tokio::test(start_paused = true)]
async fn a_key_echoed_into_a_tool_call_across_its_pieces_is_scrubbed() {
    const KEY: &str = "sk-test-echo-0123456789abcdef";
    let piece = |args: &str, first: bool| {
        let call = if first {
            format!(
                r#"{{"index":0,"id":"c1","type":"function","function":{{"name":"f","arguments":"{args}"}}}}"#
            )
        } else {
            format!(r#"{{"index":0,"function":{{"arguments":"{args}"}}}}"#)
        };
        chunk(&format!(r#"{{"tool_calls":[{call}]}}"#), None)
    };
    let (r, _) = play_replies(
        vec![Reply::ok(vec![
            lines(&[
                &piece(&format!(r#"{{\"key\": \"{}"#, &KEY[..10]), true),
                &piece(&format!(r#"{}\"}}"#, &KEY[10..]), false),
                &chunk("{}", Some("tool_calls")),
                "data: [DONE]",
            ])
            .remove(0)
            .into_bytes(),
        ])],
        |c| c.api_key = Some(promptgauge::client::ApiKey::new(KEY.into())),
    )
    .await;
    assert_eq!(outcomes(&r), [Outcome::Complete]);
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].arguments, r#"{"key": "[redacted]"}"#);
}

// ---- URLs ----

#[tokio::test(start_paused = true)]
async fn a_query_string_stays_after_the_path() {
    let (r, seen) = play_replies(
        vec![Reply::ok(
            lines(&[&chunk(r#"{"content":"B"}"#, Some("stop"))])
                .into_iter()
                .map(String::into_bytes)
                .collect(),
        )],
        |c| {
            *c = ClientConfig::new(
                "https://x.openai.azure.com/openai/deployments/gpt?api-version=2024-06-01",
                "m",
            )
        },
    )
    .await;
    assert!(r.answered());
    assert_eq!(
        seen[0].url,
        "https://x.openai.azure.com/openai/deployments/gpt/chat/completions?api-version=2024-06-01"
    );
}

/// A batch that ended with an output file, as the provider describes it.
fn ended_batch() -> promptgauge::client::batch::BatchState {
    serde_json::from_value(serde_json::json!({
        "id": "batch-1", "status": "completed",
        "output_file_id": "file-out", "error_file_id": "file-err",
    }))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_batch_s_result_files_are_read_within_a_size_limit_and_a_deadline() {
    // Each file is 6 KB; together they pass the limit of 10 KB, though neither alone does.
    let line = format!("{}\n", "x".repeat(1023));
    let (client, seen) = scripted_client(vec![Reply::ok(vec![line.into_bytes(); 6])], |_| {});
    let e = client
        .batches()
        .with_file_limit(10 * 1024)
        .result_files(&ended_batch())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("answered more than"), "{e}");
    assert!(
        e.is_final(),
        "never readable: its jobs fail, it is not polled forever"
    );
    assert_eq!(seen.seen.lock().unwrap().len(), 2);
    // A file that never ends: the endpoint's total deadline ends the read.
    let (client, _) = scripted_client(
        vec![Reply {
            hang: true,
            ..Reply::ok(vec![b"{\"custom_id\": \"a\"}\n".to_vec()])
        }],
        |c| c.limits.total_timeout = Duration::from_secs(30),
    );
    let started = tokio::time::Instant::now();
    let e = client
        .batches()
        .result_files(&ended_batch())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no answer within"), "{e}");
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}
