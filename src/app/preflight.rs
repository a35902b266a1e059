//! Before the first job: one `GET <base URL>/models` per endpoint, so a dead server, a
//! refused key or a model the server does not list is said at once, not after every job
//! has spent its retries. A server without `/models` (some proxies) is not an error: the
//! first jobs then tell, and a run whose first jobs all fail the same way stops.

use std::time::Duration;

use serde_json::Value;

use crate::client::ApiKey;

/// What the preflight found: nothing wrong, a reason to stop, or things to mention.
#[derive(Debug, Default)]
pub(crate) struct Preflight {
    /// Stop before dispatch: exit 4 with this.
    pub stop: Option<String>,
    pub warnings: Vec<String>,
}

/// Asks each base URL for its models.
pub(crate) async fn check(
    base_urls: &[String],
    model: &str,
    key: Option<&ApiKey>,
    key_env: &str,
    connect_timeout: Duration,
) -> Preflight {
    let mut out = Preflight::default();
    let client = match reqwest::Client::builder()
        .connect_timeout(connect_timeout.min(Duration::from_secs(10)))
        .timeout(Duration::from_secs(15))
        .build()
    {
        Ok(c) => c,
        Err(_) => return out,
    };
    for base in base_urls {
        let url = crate::client::secrets::join_path(base, "/models");
        let shown = crate::client::secrets::redact_url(&url);
        let mut request = client.get(&url).header("accept", "application/json");
        if let Some(key) = key {
            request = request.bearer_auth(key.expose());
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() || e.is_timeout() => {
                let why = if e.is_timeout() {
                    "did not answer in time"
                } else {
                    "refused the connection (or its host does not resolve)"
                };
                out.stop = Some(format!(
                    "{} {why}: nothing was sent. Is the server running, and is the base URL right?",
                    crate::client::secrets::redact_url(base)
                ));
                return out;
            }
            // Anything else (TLS, a proxy's oddity): let the jobs tell.
            Err(_) => continue,
        };
        let status = response.status().as_u16();
        match status {
            401 | 403 => {
                out.stop = Some(format!(
                    "{shown} refused the API key (HTTP {status}): check the key in ${key_env} (its value is not shown); nothing was sent"
                ));
                return out;
            }
            200 => {
                let body = response.bytes().await.unwrap_or_default();
                let listed: Vec<String> = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|v| v.get("data").and_then(Value::as_array).cloned())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|m| m.get("id").and_then(Value::as_str).map(String::from))
                    .collect();
                if !listed.is_empty() && !listed.iter().any(|m| m == model) {
                    let shown_models: Vec<&str> =
                        listed.iter().take(10).map(String::as_str).collect();
                    out.warnings.push(format!(
                        "{} lists the models {}{}, not `{model}`: if the jobs fail, set --model to one of them (some servers answer to any name)",
                        crate::client::secrets::redact_url(base),
                        shown_models.join(", "),
                        if listed.len() > 10 { ", …" } else { "" }
                    ));
                }
            }
            404 if !base.trim_end_matches('/').ends_with("/v1") => out.warnings.push(format!(
                "{shown} answered 404: if the jobs fail with 404 too, the base URL probably lacks /v1"
            )),
            _ => {}
        }
    }
    out
}
