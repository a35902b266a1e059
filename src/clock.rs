//! The wall clock, as the reports and the store write it.

use std::time::SystemTime;

/// Now, in UTC, to the second (RFC 3339): `2026-12-01T07:14:54Z`.
pub(crate) fn utc_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}
