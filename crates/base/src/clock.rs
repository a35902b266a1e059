//! The wall clock, as the reports and the store write it, on tokio's clock (the one every
//! deadline, backoff and poll of the client and the runner waits on): a test that pauses
//! tokio's time moves the wall clock as it moves them, so the times written and compared
//! (a batch's age, a `Retry-After` date) agree with the waits, and nothing sleeps for real.

use std::time::SystemTime;

/// Now: the system's time, moved as far as tokio's clock stands from the system's
/// monotonic clock (nowhere, unless a test paused or advanced it).
pub fn now() -> SystemTime {
    let tokio = tokio::time::Instant::now().into_std();
    let system = std::time::Instant::now();
    let wall = SystemTime::now();
    match tokio.checked_duration_since(system) {
        Some(ahead) => wall + ahead,
        None => wall - system.duration_since(tokio),
    }
}

/// Now, in UTC, to the second (RFC 3339): `2026-12-01T07:14:54Z`.
pub fn utc_now() -> String {
    humantime::format_rfc3339_seconds(now()).to_string()
}

/// Seconds since 1970 of an RFC 3339 time (`2026-12-01T07:14:54Z`, fractions allowed).
pub fn parse_utc(s: &str) -> Option<f64> {
    humantime::parse_rfc3339_weak(s.trim_end_matches('Z'))
        .or_else(|_| humantime::parse_rfc3339(s))
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
}

/// Now, in seconds since 1970.
pub fn now_seconds() -> f64 {
    now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn outside_a_paused_clock_it_is_the_system_s() {
        let system = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!((now_seconds() - system).abs() < 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn on_a_paused_clock_it_moves_as_tokio_s_time_moves() {
        let real = std::time::Instant::now();
        let before = now_seconds();
        let written = parse_utc(&utc_now()).unwrap();
        tokio::time::advance(Duration::from_secs(3 * 3600)).await;
        assert!((now_seconds() - before - 10_800.0).abs() < 1.0);
        assert!((parse_utc(&utc_now()).unwrap() - written - 10_800.0).abs() <= 1.0);
        // A sleep on the paused clock is over at once, and the wall clock saw it pass.
        let slept = now_seconds();
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert!((now_seconds() - slept - 90.0).abs() < 1.0);
        assert!(real.elapsed() < Duration::from_secs(2), "slept for real");
    }
}
