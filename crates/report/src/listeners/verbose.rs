//! `--verbose`: one line per attempt on stderr, from the run's attempt events. Nothing in
//! an event is secret: headers are redacted, URLs shown without credentials, and what the
//! server said is scrubbed before the event exists.

use promptgauge_runner::events::{Listener, RunEvent};

/// Prints each attempt as it ends.
pub struct VerboseLog;

impl Listener for VerboseLog {
    fn on(&mut self, event: &RunEvent<'_>) -> std::io::Result<()> {
        let RunEvent::AttemptFinished(log) = event else {
            return Ok(());
        };
        let a = &log.attempt;
        let headers: Vec<String> = log
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let line = format!(
            "[{}] attempt {}: POST {} ({}) → {}{} {:.0} ms{}{}",
            log.idempotency_key,
            log.number,
            log.url,
            headers.join(", "),
            serde_json::to_value(a.outcome)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            a.status.map(|s| format!(" HTTP {s}")).unwrap_or_default(),
            a.latency_ms,
            a.error
                .as_deref()
                .map(|e| format!(" — {e}"))
                .unwrap_or_default(),
            a.wait_ms
                .map(|w| format!("; retry in {w:.0} ms"))
                .unwrap_or_default(),
        );
        use std::io::Write as _;
        // A closed stderr is no reason to stop the run.
        let _ = writeln!(std::io::stderr(), "{}", crate::terminal_safe(&line));
        Ok(())
    }
}
