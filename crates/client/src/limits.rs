//! The client's limits — its gate, its deadlines, its attempts, its rate limits — as the
//! bench, its endpoints and the flags set them (`Limits`, read by the client and recorded in
//! `run.json`), and the requests-per-minute and tokens-per-minute budgets they ask for
//! (`Throttle`, `governor`'s GCRA), on tokio's clock so tests can pause it. A job reserves
//! its estimated prompt tokens plus `max_tokens` before each attempt is sent; the wait is
//! not latency.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use serde::{Deserialize, Deserializer, Serialize};

/// The client's limits, with the defaults docs/guide/files.md's "The bench" lists. Recorded in `run.json`; a field missing there
/// (a run folder from an older version) reads as its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    pub concurrency: usize,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    pub max_attempts: u32,
    #[serde(with = "humantime_serde_lite")]
    pub connect_timeout: Duration,
    #[serde(with = "humantime_serde_lite")]
    pub first_token_timeout: Duration,
    #[serde(with = "humantime_serde_lite")]
    pub idle_timeout: Duration,
    #[serde(with = "humantime_serde_lite")]
    pub total_timeout: Duration,
    /// A streamed response larger than this fails its job.
    pub max_response_bytes: usize,
    /// A `Retry-After` longer than this fails the job instead of waiting.
    #[serde(with = "humantime_serde_lite")]
    pub max_retry_after: Duration,
    /// The largest file a case may attach; `None`: the strictest of the major providers'
    /// limits for its kind (`attachment::Kind::default_limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<usize>,
    /// The most a request's files may add to its body (base64 included): Anthropic's
    /// 32 MB request limit by default.
    pub max_request_bytes: usize,
    /// The most pages of a PDF the provider reads in one request: what a PDF given by URL
    /// (whose pages are not known before it is sent) is held and estimated at. OpenAI's and
    /// Anthropic's 100 by default.
    pub max_pdf_pages: u32,
    /// Halve a replica's concurrency on 429s, grow it back after sustained success.
    pub adaptive: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            concurrency: 8,
            requests_per_minute: None,
            tokens_per_minute: None,
            max_attempts: 6,
            connect_timeout: Duration::from_secs(10),
            first_token_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            total_timeout: Duration::from_secs(300),
            max_response_bytes: 4 * 1024 * 1024,
            max_retry_after: Duration::from_secs(300),
            max_file_bytes: None,
            max_request_bytes: 32 * 1024 * 1024,
            max_pdf_pages: crate::attachment::PDF_PAGES_READ,
            adaptive: false,
        }
    }
}

mod humantime_serde_lite {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// `limits:` — the client's gate, attempts, deadlines and rate limits, on the bench, its
/// judge or one of its endpoints (docs/guide/client.md).
// Each field unset, or as written, checked only for its form.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Limits")]
pub struct RawLimits {
    /// Requests in flight at once, per replica [default: 8].
    #[schemars(range(min = 1, max = MAX_CONCURRENCY))]
    concurrency: Option<i64>,
    /// Requests a minute, spaced evenly [default: no limit].
    #[schemars(range(min = 1, max = MAX_REQUESTS_PER_MINUTE))]
    requests_per_minute: Option<i64>,
    /// Tokens a minute: each request reserves its prompt's and `max_tokens` [default: no
    /// limit].
    #[schemars(range(min = 1, max = MAX_TOKENS_PER_MINUTE))]
    tokens_per_minute: Option<i64>,
    /// Attempts per job, the first included: retries on 429, 5xx and broken streams, with
    /// full-jitter backoff [default: 6].
    #[schemars(range(min = 1, max = MAX_ATTEMPTS))]
    max_attempts: Option<i64>,
    /// Connecting to the server [default: 10s].
    #[serde(default, deserialize_with = "duration")]
    #[schemars(schema_with = "duration_schema")]
    connect_timeout: Option<Duration>,
    /// Request sent to first event [default: 60s].
    #[serde(default, deserialize_with = "duration")]
    #[schemars(schema_with = "duration_schema")]
    first_token_timeout: Option<Duration>,
    /// The longest silence between events [default: 30s].
    #[serde(default, deserialize_with = "duration")]
    #[schemars(schema_with = "duration_schema")]
    idle_timeout: Option<Duration>,
    /// One whole attempt [default: 300s].
    #[serde(default, deserialize_with = "duration")]
    #[schemars(schema_with = "duration_schema")]
    total_timeout: Option<Duration>,
    /// A larger streamed response fails its job [default: 4MiB].
    #[serde(default, deserialize_with = "byte_size")]
    #[schemars(schema_with = "size_schema")]
    max_response_bytes: Option<usize>,
    /// The longest `Retry-After` a server may ask for before the job fails instead
    /// [default: 300s].
    #[serde(default, deserialize_with = "duration")]
    #[schemars(schema_with = "duration_schema")]
    max_retry_after: Option<Duration>,
    /// A larger attached file is an error at load [default: its kind's strictest provider
    /// limit].
    #[serde(default, deserialize_with = "byte_size")]
    #[schemars(schema_with = "size_schema")]
    max_file_bytes: Option<usize>,
    /// A request's files together, base64 included [default: 32MiB].
    #[serde(default, deserialize_with = "byte_size")]
    #[schemars(schema_with = "size_schema")]
    max_request_bytes: Option<usize>,
    /// The most pages of a PDF the provider reads in a request: a PDF given by URL, whose
    /// pages are not known before it is sent, is held and estimated at this many
    /// [default: 100, OpenAI's and Anthropic's limit].
    #[schemars(range(min = 1, max = MAX_PDF_PAGES))]
    max_pdf_pages: Option<i64>,
    /// Halve the concurrency on 429s and grow it back after sustained success [default:
    /// false].
    #[serde(default)]
    adaptive: Option<bool>,
}

/// The largest values the integer limits take (a larger one is a typo).
const MAX_CONCURRENCY: i64 = 4096;
const MAX_REQUESTS_PER_MINUTE: i64 = 10_000_000;
const MAX_TOKENS_PER_MINUTE: i64 = 4_000_000_000;
const MAX_ATTEMPTS: i64 = 100;
const MAX_PDF_PAGES: i64 = 100_000;

/// What [`duration`] reads, for editors.
pub fn duration_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A duration: `10s`, `500ms`, `2m`, `1h 30m`, or a number of seconds (at most a day).",
        "anyOf": [
            { "type": "string", "examples": ["10s", "500ms", "2m"] },
            { "type": "number", "exclusiveMinimum": 0, "maximum": MAX_DURATION.as_secs() }
        ]
    })
}

/// What [`byte_size`] reads, for editors.
fn size_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A size: `4MiB`, `512KiB`, `1GiB`, `5MB`, or a number of bytes.",
        "anyOf": [
            { "type": "string", "pattern": "^\\s*[0-9]+\\s*([bB]|[kKmM][bB]|[kKmMgG]([iI][bB])?)?\\s*$", "examples": ["4MiB", "512KiB"] },
            { "type": "integer", "minimum": 1 }
        ]
    })
}

impl RawLimits {
    /// These limits over `base` (the defaults, or the bench's for its judge and its
    /// endpoints): a field left unset is `base`'s, but the rate limits, which are only ever
    /// the ones written.
    pub fn over(self, base: &Limits) -> Result<Limits, OutOfRange> {
        let d = base.clone();
        let positive = |key: &'static str, v: Option<i64>, max: i64| match v {
            Some(found) if found < 1 || found > max => Err(OutOfRange { key, max, found }),
            v => Ok(v),
        };
        Ok(Limits {
            concurrency: positive("concurrency", self.concurrency, MAX_CONCURRENCY)?
                .map_or(d.concurrency, |x| x as usize),
            requests_per_minute: positive(
                "requests_per_minute",
                self.requests_per_minute,
                MAX_REQUESTS_PER_MINUTE,
            )?
            .map(|x| x as u32),
            tokens_per_minute: positive(
                "tokens_per_minute",
                self.tokens_per_minute,
                MAX_TOKENS_PER_MINUTE,
            )?
            .map(|x| x as u32),
            max_attempts: positive("max_attempts", self.max_attempts, MAX_ATTEMPTS)?
                .map_or(d.max_attempts, |x| x as u32),
            connect_timeout: self.connect_timeout.unwrap_or(d.connect_timeout),
            first_token_timeout: self.first_token_timeout.unwrap_or(d.first_token_timeout),
            idle_timeout: self.idle_timeout.unwrap_or(d.idle_timeout),
            total_timeout: self.total_timeout.unwrap_or(d.total_timeout),
            max_response_bytes: self.max_response_bytes.unwrap_or(d.max_response_bytes),
            max_retry_after: self.max_retry_after.unwrap_or(d.max_retry_after),
            max_file_bytes: self.max_file_bytes.or(d.max_file_bytes),
            max_request_bytes: self.max_request_bytes.unwrap_or(d.max_request_bytes),
            max_pdf_pages: positive("max_pdf_pages", self.max_pdf_pages, MAX_PDF_PAGES)?
                .map_or(d.max_pdf_pages, |x| x as u32),
            adaptive: self.adaptive.unwrap_or(d.adaptive),
        })
    }
}

/// A whole-number limit outside what promptgauge takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limits.{key} must be between 1 and {max}, found {found}")]
pub struct OutOfRange {
    /// The field, as the bench names it under `limits:`.
    pub key: &'static str,
    pub max: i64,
    pub found: i64,
}

/// `4MiB`, `512KiB`, `1MB`, or a bare number of bytes.
fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bytes(u64),
        Text(String),
    }
    let bytes = match Raw::deserialize(d)? {
        Raw::Bytes(b) => b,
        Raw::Text(t) => parse_bytes(&t).map_err(serde::de::Error::custom)?,
    };
    if bytes == 0 {
        return Err(serde::de::Error::custom("a size must be positive"));
    }
    Ok(Some(bytes as usize))
}

/// Why a size (`4MiB`) could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("`{0}` is not a size; write e.g. 4MiB, 512KiB or 1000000")]
    NotASize(String),
    #[error("unknown size unit `{unit}` in `{text}`; use KiB, MiB or GiB")]
    Unit { unit: String, text: String },
    #[error("`{0}` is too large")]
    TooLarge(String),
}

pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| SizeError::NotASize(text.to_string()))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" | "k" => 1 << 10,
        "mb" => 1_000_000,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        other => {
            return Err(SizeError::Unit {
                unit: other.to_string(),
                text: text.to_string(),
            });
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| SizeError::TooLarge(text.to_string()))
}

/// `10s`, `500ms`, `2m`, or a bare number of seconds.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(f64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Seconds(s) if s.is_finite() && s > 0.0 && s <= MAX_DURATION.as_secs_f64() => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Raw::Seconds(s) if s > 0.0 => Err(serde::de::Error::custom(DurationError::TooLong(
            s.to_string(),
        ))),
        Raw::Seconds(s) => Err(serde::de::Error::custom(format!(
            "a duration must be positive, found {s}"
        ))),
        Raw::Text(t) => parse_duration(&t)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// The longest duration a bench or flag may set: a day. Longer is a typo, and would
/// overflow the clock's arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(86_400);

/// Why a user's duration (`30s`) could not be taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    #[error(
        "`{0}` is longer than a day, the longest duration promptgauge accepts; write e.g. 30s, 10m or 2h"
    )]
    TooLong(String),
    #[error("`{text}` is not a duration ({reason}); write e.g. 30s, 500ms or 2m")]
    NotADuration {
        text: String,
        reason: humantime::DurationError,
    },
    #[error("a duration must be positive, found `{0}`")]
    Zero(String),
}

/// Parses a user's duration such as `30s` or `1m30s`: positive, at most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => DurationError::TooLong(text.to_string()),
        reason => DurationError::NotADuration {
            text: text.to_string(),
            reason,
        },
    })?;
    if d.is_zero() {
        return Err(DurationError::Zero(text.to_string()));
    }
    if d > MAX_DURATION {
        return Err(DurationError::TooLong(text.to_string()));
    }
    Ok(d)
}

/// governor's clock on tokio time: instants are durations since the limiter was made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokioClock {
    origin: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Duration>>;

/// A request that no wait would let through: it asks for more than a limit's whole budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NeverFits {
    #[error("insufficient capacity")]
    Capacity,
    #[error("a request reserving {tokens} tokens can never fit tokens_per_minute {per_minute}")]
    Tokens { tokens: u32, per_minute: u32 },
}

/// The requests-per-minute and tokens-per-minute budgets one client sends under.
pub(crate) struct Throttle {
    clock: TokioClock,
    requests: Option<Limiter>,
    tokens: Option<Limiter>,
    tokens_per_minute: Option<u32>,
}

impl Throttle {
    /// Requests are spaced evenly (no burst); tokens may burst up to a minute's budget.
    pub(crate) fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u32>) -> Self {
        let clock = TokioClock {
            origin: tokio::time::Instant::now(),
        };
        let requests = requests_per_minute
            .and_then(NonZeroU32::new)
            .and_then(|rpm| {
                Quota::with_period(Duration::from_secs(60) / rpm.get())
                    .map(|q| RateLimiter::direct_with_clock(q.allow_burst(NonZeroU32::MIN), clock))
            });
        let tokens = tokens_per_minute
            .and_then(NonZeroU32::new)
            .map(|tpm| RateLimiter::direct_with_clock(Quota::per_minute(tpm), clock));
        Throttle {
            clock,
            requests,
            tokens,
            tokens_per_minute,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_none() && self.tokens.is_none()
    }

    /// Waits until one request of `tokens` fits both budgets. Errs when it never can.
    pub(crate) async fn reserve(&self, tokens: u32) -> Result<(), NeverFits> {
        if let Some(limiter) = &self.requests {
            wait(limiter, NonZeroU32::MIN, &self.clock).await?;
        }
        if let (Some(limiter), Some(n)) = (&self.tokens, NonZeroU32::new(tokens)) {
            wait(limiter, n, &self.clock)
                .await
                .map_err(|_| NeverFits::Tokens {
                    tokens,
                    per_minute: self.tokens_per_minute.unwrap_or(0),
                })?;
        }
        Ok(())
    }
}

async fn wait(limiter: &Limiter, n: NonZeroU32, clock: &TokioClock) -> Result<(), NeverFits> {
    loop {
        match limiter.check_n(n) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(not_until)) => {
                let wait = not_until.wait_time_from(clock.now());
                tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
            }
            Err(_) => return Err(NeverFits::Capacity),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4MiB"), Ok(4 << 20));
        assert_eq!(parse_bytes("512 KiB"), Ok(512 << 10));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_spaced_evenly() {
        let limits = Throttle::new(Some(120), None);
        let start = tokio::time::Instant::now();
        let mut at = Vec::new();
        for _ in 0..5 {
            limits.reserve(1).await.unwrap();
            at.push(start.elapsed().as_millis());
        }
        // 120 a minute: one every 500 ms, the first at once.
        assert_eq!(at, vec![0, 500, 1000, 1500, 2000]);
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_burst_then_refill() {
        let limits = Throttle::new(None, Some(6000));
        let start = tokio::time::Instant::now();
        limits.reserve(6000).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        // The bucket is empty: 3000 more tokens take half a minute to come back.
        limits.reserve(3000).await.unwrap();
        let waited = start.elapsed().as_secs_f64();
        assert!((29.9..30.1).contains(&waited), "{waited}");
        assert!(limits.reserve(6001).await.is_err());
    }
}
