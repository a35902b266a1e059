//! The retry policy: what an attempt's outcome means, how long to wait, and whether to go on.
//! Retries live here and nowhere else.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The outcome of one attempt (docs/guide/client.md, "The client's rules"), exactly one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A finish reason that ends an answer arrived (`stop`, `tool_calls`, …).
    Complete,
    /// `finish_reason: length`: a real answer, cut by the token ceiling.
    Truncated,
    /// The stream ended without a `finish_reason`; its text is never scored.
    Cut,
    /// No event for `idle_timeout` once streaming began (or `total_timeout` ran out).
    Stalled,
    /// Nothing within `first_token_timeout`.
    NoFirstToken,
    /// A non-2xx status, or no response at all (connection failed).
    HttpError,
    /// An `error` object in the stream.
    StreamError,
    /// `finish_reason: content_filter`: the provider withheld the answer. Not retried, never
    /// graded as right or wrong; counted apart.
    Filtered,
}

impl Outcome {
    /// Every outcome, in a fixed order (a byte in the history store's spool is its place).
    pub const ALL: [Outcome; 8] = [
        Outcome::Complete,
        Outcome::Truncated,
        Outcome::Cut,
        Outcome::Stalled,
        Outcome::NoFirstToken,
        Outcome::HttpError,
        Outcome::StreamError,
        Outcome::Filtered,
    ];

    /// Its name, as the journal writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::Truncated => "truncated",
            Outcome::Cut => "cut",
            Outcome::Stalled => "stalled",
            Outcome::NoFirstToken => "no_first_token",
            Outcome::HttpError => "http_error",
            Outcome::StreamError => "stream_error",
            Outcome::Filtered => "filtered",
        }
    }

    /// Whether the attempt produced an answer that can be graded.
    pub fn answered(self) -> bool {
        matches!(self, Outcome::Complete | Outcome::Truncated)
    }

    /// Whether the stream reached a real finish: an answer, or one the provider withheld.
    pub fn finished(self) -> bool {
        self.answered() || self == Outcome::Filtered
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    Done,
    Retry,
    /// The job fails; waiting would not help.
    Fail,
    /// The whole run must stop (401/403: bad key; 402: out of credit).
    StopRun,
}

/// Status triage (docs/guide/client.md, "The client's rules"). `status` is `None` when no response arrived at all.
pub(crate) fn next_step(outcome: Outcome, status: Option<u16>) -> Next {
    match outcome {
        Outcome::Complete | Outcome::Truncated | Outcome::Filtered => Next::Done,
        Outcome::Cut | Outcome::Stalled | Outcome::NoFirstToken | Outcome::StreamError => {
            Next::Retry
        }
        Outcome::HttpError => match status {
            None => Next::Retry,
            Some(401..=403) => Next::StopRun,
            Some(408 | 409 | 425 | 429) => Next::Retry,
            Some(s) if s >= 500 => Next::Retry,
            Some(_) => Next::Fail,
        },
    }
}

/// Full-jitter backoff: `uniform(0, min(cap, base·2^retry))`; `unit` is the uniform draw in [0, 1).
pub(crate) fn backoff(retry: u32, base: Duration, cap: Duration, unit: f64) -> Duration {
    let ceiling = base
        .checked_mul(1u32.checked_shl(retry.min(30)).unwrap_or(u32::MAX))
        .unwrap_or(cap)
        .min(cap);
    ceiling.mul_f64(unit.clamp(0.0, 1.0))
}

/// The wait a server asked for: `retry-after-ms`, or `Retry-After` as seconds or an HTTP date.
/// Header names are lowercase.
pub(crate) fn retry_after(headers: &[(String, String)], now: SystemTime) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms >= 0.0
    {
        return Some(seconds(ms / 1000.0));
    }
    let value = get("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs >= 0.0).then(|| seconds(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Seconds as a duration, saturating: `1e30` (or infinity) is `Duration::MAX`, which every
/// sane limit then refuses, instead of a panic.
pub(crate) fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(if secs > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_names_are_the_journal_s() {
        for o in Outcome::ALL {
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
    }

    #[test]
    fn triage_by_status() {
        use Next::*;
        let h = |s| next_step(Outcome::HttpError, Some(s));
        assert_eq!([h(429), h(408), h(409), h(500), h(503), h(529)], [Retry; 6]);
        assert_eq!([h(400), h(404), h(422)], [Fail; 3]);
        assert_eq!([h(401), h(403), h(402)], [StopRun; 3]);
        assert_eq!(next_step(Outcome::HttpError, None), Retry);
        assert_eq!(next_step(Outcome::Cut, None), Retry);
        assert_eq!(next_step(Outcome::Truncated, None), Done);
    }

    #[test]
    fn backoff_is_full_jitter_under_a_cap() {
        let base = Duration::from_millis(250);
        let cap = Duration::from_secs(20);
        assert_eq!(backoff(0, base, cap, 0.0), Duration::ZERO);
        assert_eq!(backoff(0, base, cap, 0.5), Duration::from_millis(125));
        assert_eq!(backoff(3, base, cap, 0.5), Duration::from_millis(1000));
        assert_eq!(backoff(10, base, cap, 0.5), Duration::from_secs(10));
        assert_eq!(backoff(40, base, cap, 0.5), Duration::from_secs(10));
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let h = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(
            retry_after(&h("retry-after", "3"), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&h("retry-after-ms", "150"), now),
            Some(Duration::from_millis(150))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(
            retry_after(&h("retry-after", &date), now),
            Some(Duration::from_secs(7))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(
            retry_after(&h("retry-after", &past), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&h("retry-after", "soon"), now), None);
        // Absurd values saturate instead of panicking; the client then refuses to wait.
        assert_eq!(
            retry_after(&h("retry-after", "1e30"), now),
            Some(Duration::MAX)
        );
        assert_eq!(
            retry_after(&h("retry-after-ms", "1e300"), now),
            Some(Duration::MAX)
        );
        assert_eq!(
            retry_after(&h("retry-after", "inf"), now),
            Some(Duration::MAX)
        );
        assert_eq!(retry_after(&h("retry-after", "NaN"), now), None);
        assert_eq!(retry_after(&h("retry-after", "-3"), now), None);
        assert_eq!(retry_after(&[], now), None);
    }
}
