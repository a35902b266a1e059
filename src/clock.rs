//! The wall clock, as the reports and the store write it.

use std::time::SystemTime;

/// Now, in UTC, to the second (RFC 3339): `2026-12-01T07:14:54Z`.
pub(crate) fn utc_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Seconds since 1970 of an RFC 3339 time (`2026-12-01T07:14:54Z`, fractions allowed).
pub(crate) fn parse_utc(s: &str) -> Option<f64> {
    humantime::parse_rfc3339_weak(s.trim_end_matches('Z'))
        .or_else(|_| humantime::parse_rfc3339(s))
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
}

/// Now, in seconds since 1970.
pub(crate) fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
