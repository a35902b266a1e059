//! Why jobs failed, grouped: the same cause (HTTP status and the first line of the error)
//! counted once with an example and, for the usual mistakes, a hint at the fix. Shown in
//! the terminal, summary.md/json, report.html and JUnit, so a red CI step explains itself.

use serde::{Deserialize, Serialize};

use promptgauge_runner::journal::JobRecord;

/// Causes kept (the rest are counted under the last).
const MAX_CAUSES: usize = 20;

/// One cause of failed jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureCause {
    /// The HTTP status of the last attempt, when there was one.
    pub status: Option<u16>,
    /// The error's first line, as the jobs reported it (numbers and ids kept).
    pub cause: String,
    pub jobs: u64,
    /// One job that failed this way: case and variant.
    pub example: String,
    /// What usually fixes it, when the cause is a common one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The first line of a job's error, without the "after N attempts" noise that differs.
fn first_line(error: &str) -> String {
    let line = error.lines().next().unwrap_or("").trim();
    promptgauge_client::protocol::truncate(line, 300)
}

/// The fix for a usual cause, if this is one.
pub fn hint(status: Option<u16>, cause: &str) -> Option<String> {
    let lower = cause.to_ascii_lowercase();
    let model_problem = lower.contains("model")
        && [
            "not found",
            "does not exist",
            "pinned",
            "unknown",
            "not serve",
            "invalid model",
            "no such",
        ]
        .iter()
        .any(|w| lower.contains(w));
    // The answer came; the judge's call failed: the judge's settings are what to fix.
    if lower.contains("the judge failed") {
        return Some(match status {
            _ if model_problem => "the judge's server does not serve the judge's model: GET <its base URL>/models lists the models it does; set --judge-model (or judge.model) to one of them, or --judge-base-url to a server that serves it".into(),
            Some(401) | Some(403) => "the judge's key was refused: check the variable named by --judge-key-env (or judge.api_key_env)".into(),
            Some(404) => "404 from the judge: its base URL probably lacks /v1; set --judge-base-url (or judge.base_url)".into(),
            _ => return None,
        });
    }
    // A provider batch's request: nothing was retried, and no limit would have helped.
    if lower.contains("the batch") {
        return Some(match status {
            _ if lower.contains("does not know batch") => "the provider has no such batch (another account or base URL, or it was deleted): its answers cannot be collected; `run --resume DIR --retry-failed all` sends the jobs again".into(),
            _ if model_problem => "the provider does not serve this model: set --model (or the endpoint's model) to one it does".into(),
            Some(401) | Some(403) => "the key was refused: check the variable named by endpoint.api_key_env".into(),
            Some(400) | Some(404) | Some(422) => "the provider refused the request itself: fix it, then send those jobs again with `run --resume DIR --retry-failed all`".into(),
            _ => "a batch request is not retried by the provider: send those jobs again in a new batch with `run --resume DIR --retry-failed`".into(),
        });
    }
    Some(match status {
        _ if model_problem => "the server does not serve this model: GET <base URL>/models lists the models it does; set --model (or endpoint.model) to one of them".into(),
        Some(404) => "404 on every job usually means the base URL lacks its /v1 (promptgauge appends /chat/completions to it): try --base-url http://host:port/v1".into(),
        Some(401) | Some(403) => "the key was refused: check the variable named by endpoint.api_key_env".into(),
        Some(429) => "rate limited even after retries: lower limits.concurrency, or set limits.requests_per_minute".into(),
        Some(400) | Some(422) if lower.contains("max_tokens") || lower.contains("context") => "the request is too large for the model: lower max_tokens, or shorten the prompt".into(),
        Some(s) if s >= 500 => "the server failed (5xx) on every attempt: check its logs; promptgauge retried with backoff".into(),
        _ if lower.contains("connection refused") || lower.contains("connect error") || lower.contains("error trying to connect") => "nothing answers at the base URL: is the server running, and on that port?".into(),
        _ if lower.contains("first token") || lower.contains("no_first_token") => "no token came within limits.first_token_timeout: a cold or overloaded server; raise the timeout or lower limits.concurrency".into(),
        _ if lower.contains("dns") || lower.contains("resolve") => "the host name does not resolve: check the base URL".into(),
        _ => return None,
    })
}

/// Counts failed jobs by cause as they arrive.
#[derive(Debug, Default)]
pub(crate) struct Causes {
    causes: Vec<FailureCause>,
}

impl Causes {
    pub(crate) fn add(&mut self, r: &JobRecord) {
        let status = r.failure_status();
        let cause = first_line(r.error.as_deref().unwrap_or("no answer"));
        if let Some(c) = self
            .causes
            .iter_mut()
            .find(|c| c.status == status && c.cause == cause)
        {
            c.jobs += 1;
            return;
        }
        if self.causes.len() >= MAX_CAUSES {
            if let Some(last) = self.causes.last_mut() {
                last.jobs += 1;
            }
            return;
        }
        self.causes.push(FailureCause {
            status,
            hint: hint(status, &cause),
            cause,
            jobs: 1,
            example: match &r.endpoint {
                Some(e) => format!("case {}, variant {}, endpoint {e}", r.case_id, r.variant),
                None => format!("case {}, variant {}", r.case_id, r.variant),
            },
        });
    }

    /// Most frequent first.
    pub(crate) fn finish(mut self) -> Vec<FailureCause> {
        self.causes.sort_by_key(|c| std::cmp::Reverse(c.jobs));
        self.causes
    }
}

/// Lines for the terminal and Markdown: `9 jobs: HTTP 404: … (e.g. case r-001, variant
/// plain) — hint`.
pub(crate) fn lines(causes: &[FailureCause]) -> Vec<String> {
    causes
        .iter()
        .map(|c| {
            // "HTTP 404: http_error: HTTP 404: Not Found" says the status once.
            let cause = c
                .status
                .and_then(|s| {
                    c.cause
                        .split_once(&format!("HTTP {s}: "))
                        .map(|(before, after)| {
                            format!("{}{after}", before.trim_end_matches("http_error: "))
                        })
                })
                .unwrap_or_else(|| c.cause.clone());
            let status = c
                .status
                .filter(|&s| s >= 400)
                .map(|s| format!("HTTP {s}: "))
                .unwrap_or_default();
            let hint = c
                .hint
                .as_ref()
                .map(|h| format!("\n    → {h}"))
                .unwrap_or_default();
            format!(
                "{} {}: {status}{cause} (e.g. {}){hint}",
                c.jobs,
                if c.jobs == 1 { "job" } else { "jobs" },
                c.example
            )
        })
        .collect()
}

/// Why a job scored as it did, in words: the judge's reasons (each vote's), a schema
/// violation, the fields a `fields` scorer found wrong, a scorer's error, each part's of an
/// `all`/`any`/`mean`, or why a job failed.
pub fn reason_of(r: &promptgauge_runner::journal::JobRecord) -> Option<String> {
    use promptgauge_runner::journal::JobStatus;
    if r.status != JobStatus::Graded {
        return r.error.clone();
    }
    r.score_detail.as_ref().and_then(detail_reason)
}

/// A score detail's why, in words (`None` when it says nothing).
fn detail_reason(d: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let votes: Vec<String> = d
        .get("votes")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(|x| x.get("reason").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if !votes.is_empty() {
        return Some(format!("judge: {}", votes.join(" / ")));
    }
    if let Some(v) = d.get("violation") {
        return Some(match (v.get("path"), v.get("message")) {
            (Some(path), Some(message)) => format!("{}: {}", text(path), text(message)),
            _ => text(v),
        });
    }
    if let Some(e) = d.get("error").and_then(Value::as_str) {
        return Some(e.to_string());
    }
    if let Some(fields) = d.get("fields").and_then(Value::as_array) {
        let wrong: Vec<String> = fields
            .iter()
            .filter(|f| f.get("ok").and_then(Value::as_bool) == Some(false))
            .map(|f| {
                let field = f.get("field").map(text).unwrap_or_default();
                let want = f.get("expected").map(|v| v.to_string()).unwrap_or_default();
                match f.get("got").filter(|g| !g.is_null()) {
                    Some(got) => format!("{field}: expected {want}, got {got}"),
                    None => format!("{field}: expected {want}, missing"),
                }
            })
            .collect();
        let required = d
            .get("required_wrong")
            .and_then(Value::as_array)
            .filter(|r| !r.is_empty())
            .map(|r| {
                let names: Vec<String> = r.iter().map(text).collect();
                format!(" (required {} wrong: scored 0)", names.join(", "))
            })
            .unwrap_or_default();
        return (!wrong.is_empty()).then(|| format!("{}{required}", wrong.join("; ")));
    }
    let parts: Vec<String> = d
        .get("of")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(|p| p.get("detail").and_then(detail_reason))
        .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_score_s_detail_says_why_in_words() {
        let why = |d: serde_json::Value| detail_reason(&d);
        let fields = serde_json::json!({"fields": [
            {"field": "category", "expected": "billing", "got": "billing", "ok": true},
            {"field": "priority", "expected": "high", "got": "high (unsure)", "ok": false},
            {"field": "team", "expected": "ops", "got": null, "ok": false},
        ], "required_wrong": ["team"]});
        assert_eq!(
            why(fields.clone()).unwrap(),
            "priority: expected \"high\", got \"high (unsure)\"; team: expected \"ops\", missing (required team wrong: scored 0)"
        );
        assert_eq!(
            why(serde_json::json!({"violation": {"path": "/total", "message": "\"x\" is not a number"}})).unwrap(),
            "/total: \"x\" is not a number"
        );
        let of = serde_json::json!({"of": [
            {"score": 1.0, "detail": null},
            {"score": 0.5, "detail": fields},
        ]});
        assert!(why(of).unwrap().starts_with("priority: expected"));
        let right =
            serde_json::json!({"fields": [{"field": "a", "expected": 1, "got": 1, "ok": true}]});
        assert_eq!(why(right), None);
    }

    #[test]
    fn usual_causes_get_hints() {
        assert!(
            hint(Some(404), "HTTP 404: Not Found")
                .unwrap()
                .contains("/v1")
        );
        assert!(
            hint(
                Some(400),
                "Server is pinned to 'tiny-model', not model 'big'"
            )
            .unwrap()
            .contains("/models")
        );
        assert!(
            hint(None, "error sending request: connection refused")
                .unwrap()
                .contains("server running")
        );
        assert_eq!(hint(Some(418), "I'm a teapot"), None);
    }
}
