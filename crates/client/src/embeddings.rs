//! `POST …/embeddings`, OpenAI's shape (vLLM, llama.cpp's server, LiteLLM and the
//! simulator speak it too): vectors for texts, sent with the client's key and headers,
//! retried as answers are (full-jitter backoff, `Retry-After` a floor; 400/401/403/404/422
//! never retried), within the endpoint's total deadline, its reply read up to a size limit.
//! Its waits, deadlines and latencies are on tokio's clock, and a `Retry-After` date is
//! read against [`promptgauge_base::clock`], as the client's answers are.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::transport::{HttpMethod, HttpRequest};
use super::{Client, Usage, retry};

/// The largest reply read: 1,000 vectors of 3,072 numbers fit.
pub(crate) const MAX_EMBEDDINGS_BYTES: usize = 64 << 20;

/// Vectors for texts, in their order.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    pub vectors: Vec<Vec<f64>>,
    pub usage: Option<Usage>,
    /// Attempts it took.
    pub attempts: usize,
    pub latency_ms: f64,
}

/// Why texts got no vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedError {
    pub message: String,
    /// The last attempt's HTTP status, when it got one.
    pub status: Option<u16>,
    pub attempts: usize,
    /// The run stopped while it waited.
    pub stopped: bool,
}

/// How one attempt ended.
enum Tried {
    Done(Vec<Vec<f64>>, Option<Usage>),
    /// Worth another attempt: a status (408, 429, 5xx) or no answer; the wait a server
    /// asked for.
    Again(String, Option<u16>, Option<Duration>),
    /// Never better by waiting.
    Fail(String, Option<u16>),
}

impl Client {
    /// The vectors of `inputs` from `model` at this client's endpoint (its first base URL).
    pub async fn embed(&self, model: &str, inputs: &[String]) -> Result<Embedded, EmbedError> {
        let started = Instant::now();
        let stop = self.stop_token();
        let body = Bytes::from(json!({"model": model, "input": inputs}).to_string());
        let mut attempts = 0;
        loop {
            attempts += 1;
            let tried = tokio::select! {
                t = tokio::time::timeout(self.config.limits.total_timeout, self.embed_once(body.clone(), inputs.len())) => {
                    t.unwrap_or_else(|_| Tried::Again(format!(
                        "no answer within {}",
                        humantime::format_duration(self.config.limits.total_timeout)
                    ), None, None))
                }
                _ = stop.cancelled() => Tried::Fail("the run stopped".into(), None),
            };
            let fail = |message: String, status| EmbedError {
                message: self.secrets.scrub(&message).into_owned(),
                status,
                attempts,
                stopped: stop.is_cancelled(),
            };
            match tried {
                Tried::Done(vectors, usage) => {
                    return Ok(Embedded {
                        vectors,
                        usage,
                        attempts,
                        latency_ms: super::ms(started.elapsed()),
                    });
                }
                Tried::Fail(why, status) => return Err(fail(why, status)),
                Tried::Again(why, status, _)
                    if attempts >= self.config.limits.max_attempts as usize =>
                {
                    return Err(fail(format!("{why} (after {attempts} attempts)"), status));
                }
                Tried::Again(why, status, asked) => {
                    let wait = self
                        .retry_wait(attempts, asked, false)
                        .map_err(|e| fail(format!("{why}; {e}"), status))?;
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stop.cancelled() => return Err(fail("the run stopped".into(), status)),
                    }
                }
            }
        }
    }

    async fn embed_once(&self, body: Bytes, count: usize) -> Tried {
        let mut headers = self.protocol.key_headers(self.config.api_key.as_ref());
        headers.extend(self.config.headers.iter().cloned());
        headers.push(("content-type".into(), "application/json".into()));
        let request = HttpRequest {
            method: HttpMethod::Post,
            url: format!("{}/embeddings", self.config.base_url.trim_end_matches('/')),
            headers,
            body: body.into(),
        };
        let response = match self.transport.send(request).await {
            Ok(r) => r,
            Err(e) => return Tried::Again(format!("no answer: {e}"), None, None),
        };
        let status = response.status;
        let asked = retry::retry_after(&response.headers, promptgauge_base::clock::now());
        let mut bytes = Vec::new();
        let mut stream = response.body;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) if bytes.len() + c.len() > MAX_EMBEDDINGS_BYTES => {
                    return Tried::Fail(
                        format!("the embeddings reply is longer than {MAX_EMBEDDINGS_BYTES} bytes"),
                        Some(status),
                    );
                }
                Ok(c) => bytes.extend_from_slice(&c),
                Err(e) => {
                    return Tried::Again(format!("the reply was cut: {e}"), Some(status), None);
                }
            }
        }
        if status != 200 {
            let message = super::error_message(&bytes);
            let why = format!("the embeddings endpoint answered {status}: {message}");
            return match status {
                408 | 429 | 500..=599 => Tried::Again(why, Some(status), asked),
                _ => Tried::Fail(why, Some(status)),
            };
        }
        read_vectors(&bytes, count).map_or_else(
            |why| Tried::Fail(format!("the embeddings reply {why}"), Some(status)),
            |(v, u)| Tried::Done(v, u),
        )
    }
}

/// The vectors of an OpenAI-shaped reply, by `index`, and its usage.
fn read_vectors(bytes: &[u8], count: usize) -> Result<(Vec<Vec<f64>>, Option<Usage>), String> {
    let reply: Value = serde_json::from_slice(bytes).map_err(|e| format!("is not JSON: {e}"))?;
    let data = reply
        .get("data")
        .and_then(Value::as_array)
        .ok_or("has no `data` list")?;
    let mut vectors: Vec<Option<Vec<f64>>> = vec![None; count];
    for (i, item) in data.iter().enumerate() {
        let at = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(i, |n| n as usize);
        let v: Vec<f64> = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                format!("item {at} has no `embedding` list (a base64 one is not asked for)")
            })?
            .iter()
            .map(|x| x.as_f64().filter(|f| f.is_finite()))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("item {at} holds something that is not a number"))?;
        match vectors.get_mut(at) {
            Some(slot) if slot.is_none() => *slot = Some(v),
            _ => return Err(format!("names item {at} twice or out of range")),
        }
    }
    let vectors: Vec<Vec<f64>> = vectors
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| format!("holds {} vectors for {count} texts", data.len()))?;
    if vectors.windows(2).any(|w| w[0].len() != w[1].len()) || vectors.iter().any(Vec::is_empty) {
        return Err("holds vectors of different lengths, or empty ones".into());
    }
    let usage = reply.get("usage").and_then(|u| {
        Some(Usage {
            prompt_tokens: u.get("prompt_tokens")?.as_u64()?,
            ..Usage::default()
        })
    });
    Ok((vectors, usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{BoxFuture, HttpResponse, Transport, TransportError};
    use crate::{ClientConfig, HttpRequest};
    use std::sync::{Arc, Mutex};

    /// A reply: its status, headers and body.
    type Reply = (u16, Vec<(String, String)>, &'static str);

    /// Answers each request with the next reply; with none left, it never answers.
    struct Scripted(Mutex<Vec<Reply>>);

    impl Transport for Scripted {
        fn send(&self, _: HttpRequest) -> BoxFuture<Result<HttpResponse, TransportError>> {
            let next = {
                let mut replies = self.0.lock().unwrap();
                (!replies.is_empty()).then(|| replies.remove(0))
            };
            Box::pin(async move {
                let Some((status, headers, body)) = next else {
                    return std::future::pending().await;
                };
                let chunk: Result<Bytes, TransportError> = Ok(Bytes::from_static(body.as_bytes()));
                Ok(HttpResponse {
                    status,
                    headers,
                    body: Box::pin(futures_util::stream::iter([chunk])),
                })
            })
        }
    }

    fn client(replies: Vec<Reply>) -> Client {
        let mut config = ClientConfig::new("http://scripted/v1", "m");
        config.limits.max_attempts = 2;
        config.limits.total_timeout = Duration::from_secs(60);
        Client::new(Arc::new(Scripted(Mutex::new(replies))), config)
    }

    const VECTORS: &str = r#"{"data": [{"index": 0, "embedding": [1, 0]}]}"#;

    /// Embeds one text; the result, and how long it took on tokio's clock (paused: no test
    /// sleeps for real).
    async fn embed(client: &Client) -> (Result<Embedded, EmbedError>, Duration) {
        let start = Instant::now();
        let real = std::time::Instant::now();
        let got = client.embed("e", &["x".to_string()]).await;
        assert!(real.elapsed() < Duration::from_secs(2), "slept for real");
        (got, start.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_date_is_read_on_the_injected_clock_and_waited_on_tokio_s() {
        // Tokio's clock an hour on: a date 45 s after it is 45 s away, not an hour and 45 s
        // (which limits.max_retry_after would refuse).
        tokio::time::advance(Duration::from_secs(3600)).await;
        let date =
            httpdate::fmt_http_date(promptgauge_base::clock::now() + Duration::from_secs(45));
        let client = client(vec![
            (503, vec![("retry-after".into(), date)], "{}"),
            (200, Vec::new(), VECTORS),
        ]);
        let (got, took) = embed(&client).await;
        let got = got.unwrap();
        assert_eq!((got.attempts, got.vectors.len()), (2, 1));
        assert!(
            took >= Duration::from_secs(44) && took < Duration::from_secs(47),
            "{took:?}"
        );
        assert!(got.latency_ms >= 44_000.0, "{}", got.latency_ms);
    }

    #[tokio::test(start_paused = true)]
    async fn an_embeddings_endpoint_that_never_answers_fails_at_its_deadline_each_attempt() {
        let (got, took) = embed(&client(Vec::new())).await;
        let e = got.unwrap_err();
        assert_eq!(e.attempts, 2);
        assert!(e.message.contains("no answer within 1m"), "{}", e.message);
        // Two deadlines of a minute, and a backoff between them.
        assert!(
            took >= Duration::from_secs(120) && took < Duration::from_secs(145),
            "{took:?}"
        );
    }

    #[test]
    fn vectors_are_read_by_index_and_checked() {
        let reply = br#"{"data": [{"index": 1, "embedding": [0, 1]}, {"index": 0, "embedding": [1, 0]}], "usage": {"prompt_tokens": 7}}"#;
        let (v, u) = read_vectors(reply, 2).unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert_eq!(u.unwrap().prompt_tokens, 7);
        assert!(
            read_vectors(reply, 3)
                .unwrap_err()
                .contains("2 vectors for 3 texts")
        );
        let short =
            br#"{"data": [{"index": 0, "embedding": [1, 0]}, {"index": 1, "embedding": [1]}]}"#;
        assert!(read_vectors(short, 2).is_err());
        let twice =
            br#"{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]}"#;
        assert!(read_vectors(twice, 2).unwrap_err().contains("twice"));
        assert!(read_vectors(b"{\"data\": [{\"embedding\": \"AAAA\"}]}", 1).is_err());
    }
}
