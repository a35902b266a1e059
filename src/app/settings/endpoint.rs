//! An endpoint resolved from the flags, the environment and the bench: its base URLs
//! (docs/guide/real-model.md, "Base URL precedence"), model, protocol, key and headers.

use super::env::Env;
use crate::cli::PlanArgs;
use crate::error::UsageError;

/// The endpoint's base URLs and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseUrl {
    /// Empty: the simulator. Several: replicas of one model.
    pub urls: Vec<String>,
    pub source: &'static str,
}

/// docs/guide/real-model.md, "Base URL precedence": flags, PROMPTGAUGE_BASE_URL, bench, OPENAI_BASE_URL, LLM_BASE_URL.
/// The value `mock` selects the simulator.
pub(crate) fn resolve_base_url(flags: &[String], env: &Env, bench: &[String]) -> BaseUrl {
    let one = |v: Option<&str>| v.map(|u| vec![u.to_string()]).unwrap_or_default();
    let candidates = [
        (flags.to_vec(), "--base-url"),
        (
            one(env.get("PROMPTGAUGE_BASE_URL")),
            "$PROMPTGAUGE_BASE_URL",
        ),
        (bench.to_vec(), "the bench's endpoint.base_url"),
        (one(env.get("OPENAI_BASE_URL")), "$OPENAI_BASE_URL"),
        (one(env.get("LLM_BASE_URL")), "$LLM_BASE_URL"),
    ];
    for (values, source) in candidates {
        let urls: Vec<String> = values
            .iter()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if !urls.is_empty() {
            return BaseUrl {
                urls: urls.into_iter().filter(|u| u != "mock").collect(),
                source,
            };
        }
    }
    BaseUrl {
        urls: Vec::new(),
        source: "no base URL configured",
    }
}

/// The endpoint a run talks to, resolved from flags, environment and bench.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// Empty: the built-in simulator. Several: replicas of one model.
    pub base_urls: Vec<String>,
    pub source: &'static str,
    pub model: String,
    /// The wire protocol: `--protocol`, else the bench's `endpoint.protocol`, else
    /// `openai-chat`.
    pub protocol: promptgauge_client::ProtocolKind,
    pub api_key: Option<promptgauge_client::ApiKey>,
    pub api_key_env: String,
    /// Worth saying before the run (a key that had to be trimmed).
    pub warnings: Vec<String>,
    /// The bench's name for it, when it is one of `endpoints:`.
    pub name: Option<String>,
    /// Extra request headers, variables read; each with whether it came from a variable
    /// (then scrubbed from everything shown, like a key).
    pub headers: Vec<(String, String, bool)>,
    /// Its jobs go through its batch API (`--batch`, or `batch: true`).
    pub batch: bool,
}

impl Endpoint {
    /// The endpoint as shown and stored (no credentials).
    pub(crate) fn info(&self) -> promptgauge_report::ProviderInfo {
        let shown = crate::app::shown_urls(&self.base_urls);
        let replicas = if shown.len() > 1 {
            shown.clone()
        } else {
            Vec::new()
        };
        promptgauge_report::ProviderInfo {
            replicas,
            endpoint: self.name.clone(),
            batch: self.batch,
            ..promptgauge_report::ProviderInfo::of(
                shown,
                &self.model,
                &self.api_key_env,
                self.protocol,
            )
        }
    }
}

/// What the bench says about its endpoint, for [`resolve_endpoint`].
pub(crate) struct BenchEndpoint<'a> {
    pub base_urls: Vec<String>,
    pub model: Option<&'a str>,
    pub api_key_env: Option<&'a str>,
    pub protocol: Option<promptgauge_client::ProtocolKind>,
    /// `api-key`: the key goes in that header (Azure OpenAI).
    pub key_header: Option<promptgauge_client::KeyHeader>,
    /// One of the bench's named `endpoints:`: its base URL is its own, beating the
    /// environment's (only --base-url overrides it).
    pub named: Option<&'a promptgauge_suite::endpoints::NamedEndpoint>,
    /// `batch: true`.
    pub batch: bool,
}

/// The endpoint from the flags, the environment and the bench (docs/guide/real-model.md, "Base URL precedence"),
/// with the key read from its variable and checked. Errors are usage errors with a fix.
pub(crate) fn resolve_endpoint(
    args: &PlanArgs,
    env: &Env,
    bench: BenchEndpoint<'_>,
) -> Result<Endpoint, UsageError> {
    let base = endpoint_base_url(args, env, &bench);
    let protocol = args.protocol.or(bench.protocol).unwrap_or_default();
    for url in &base.urls {
        promptgauge_suite::check_base_url(url, protocol).map_err(|m| {
            UsageError::with_fix(
                format!("{m} (from {})", base.source),
                "write the full URL, e.g. http://127.0.0.1:8000/v1",
            )
        })?;
    }
    let model = endpoint_model(args, &bench, base.urls.is_empty())?;
    let key = endpoint_key(env, &bench, !base.urls.is_empty())?;
    let headers = match bench.named {
        Some(n) => read_headers(&format!("endpoint {}", n.name), &n.headers, env)?,
        None => Vec::new(),
    };
    Ok(Endpoint {
        base_urls: base.urls,
        source: base.source,
        model,
        protocol,
        api_key: key.key,
        api_key_env: key.env,
        warnings: key.warning.into_iter().collect(),
        name: bench.named.map(|n| n.name.clone()),
        headers,
        batch: args.batch || bench.batch,
    })
}

/// Where the endpoint sends: a named endpoint's own URLs (only --base-url overrides them),
/// else --base-url, the environment, the bench.
fn endpoint_base_url(args: &PlanArgs, env: &Env, bench: &BenchEndpoint<'_>) -> BaseUrl {
    match bench.named {
        Some(n) if args.base_url.is_empty() && !bench.base_urls.is_empty() => BaseUrl {
            urls: bench
                .base_urls
                .iter()
                .filter(|u| *u != "mock")
                .cloned()
                .collect(),
            source: if args.endpoint.iter().any(|e| e.name == n.name) {
                "--endpoint"
            } else {
                "the bench's endpoints"
            },
        },
        _ => resolve_base_url(&args.base_url, env, &bench.base_urls),
    }
}

/// The model: --model, else the bench's, else the simulator's own when nothing is sent to
/// a server; a server with no model named, or an empty name, is an error with its fix.
fn endpoint_model(
    args: &PlanArgs,
    bench: &BenchEndpoint<'_>,
    simulated: bool,
) -> Result<String, UsageError> {
    let model = match (&args.model, bench.model, simulated) {
        (Some(m), _, _) => m.clone(),
        (None, Some(m), _) => m.to_string(),
        (None, None, true) => "mock-model".to_string(),
        (None, None, false) => {
            return Err(match bench.named {
                Some(n) => UsageError::with_fix(
                    format!("endpoint {} names no model", n.name),
                    "add `model:` to it in the bench's endpoints, model= to --endpoint, or pass --model NAME",
                ),
                None => UsageError::with_fix(
                    "no model is named for this endpoint",
                    "set endpoint.model in the bench, or pass --model NAME",
                ),
            });
        }
    };
    if model.trim().is_empty() {
        return Err(UsageError::with_fix(
            format!(
                "the model name of {} is empty",
                bench.named.map_or_else(
                    || "the endpoint".to_string(),
                    |n| format!("endpoint {}", n.name)
                )
            ),
            "name the model the server serves: --model NAME, the endpoint's `model:`, or model= in --endpoint",
        ));
    }
    Ok(model)
}

/// An endpoint's key as read: the variable it comes from, the key (checked, sent as the
/// endpoint says), and what was said when it had to be cleaned.
struct ReadKey {
    env: String,
    key: Option<promptgauge_client::ApiKey>,
    warning: Option<String>,
}

/// The key's variable and the key read from it; no key when nothing is sent to a server.
fn endpoint_key(env: &Env, bench: &BenchEndpoint<'_>, sent: bool) -> Result<ReadKey, UsageError> {
    let (api_key_env, api_key) = match bench.api_key_env {
        Some(name) => (name.to_string(), env.get(name).map(String::from)),
        None => match (env.get("OPENAI_API_KEY"), env.get("LLM_API_KEY")) {
            (Some(k), _) => ("OPENAI_API_KEY".to_string(), Some(k.to_string())),
            (None, Some(k)) => ("LLM_API_KEY".to_string(), Some(k.to_string())),
            (None, None) => ("OPENAI_API_KEY".to_string(), None),
        },
    };
    let Some(key) = api_key.filter(|_| sent) else {
        return Ok(ReadKey {
            env: api_key_env,
            key: None,
            warning: None,
        });
    };
    let (key, warning) = promptgauge_client::secrets::clean_api_key(&key, &api_key_env).map_err(|m| {
        UsageError::with_fix(
            m,
            format!("set ${api_key_env} to the key alone, e.g. export {api_key_env}=\"$(tr -d '[:space:]' < key.txt)\""),
        )
    })?;
    let key = promptgauge_client::ApiKey::new(key).in_header(bench.key_header.unwrap_or_default());
    Ok(ReadKey {
        env: api_key_env,
        key: Some(key),
        warning,
    })
}

/// Headers with their variables read (each with whether it came from one); a variable
/// that is not set is an error before anything is sent. `owner` names whose they are.
pub(crate) fn read_headers(
    owner: &str,
    headers: &[(String, String)],
    env: &Env,
) -> Result<Vec<(String, String, bool)>, UsageError> {
    headers
        .iter()
        .map(|(name, value)| match promptgauge_suite::endpoints::variable_of(value) {
            None => Ok((name.clone(), value.clone(), false)),
            Some(var) => match env.get(var) {
                Some(v) if !v.trim().is_empty() && !v.contains(['\r', '\n']) => {
                    Ok((name.clone(), v.trim().to_string(), true))
                }
                _ => Err(UsageError::with_fix(
                    format!(
                        "{owner}: header {name} reads ${var}, which is not set (or is empty, or holds a line break)"
                    ),
                    format!("export {var}=…, or write the header's value in the bench"),
                )),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(b: BaseUrl) -> Option<String> {
        b.urls.first().cloned()
    }

    #[test]
    fn base_url_precedence() {
        let b = vec!["http://b/v1".to_string()];
        let f = vec!["http://f/v1".to_string()];
        let env = Env::from_pairs([
            ("OPENAI_BASE_URL", "http://o/v1"),
            ("LLM_BASE_URL", "http://l/v1"),
        ]);
        assert_eq!(
            first(resolve_base_url(&[], &env, &b)).as_deref(),
            Some("http://b/v1")
        );
        assert_eq!(
            first(resolve_base_url(&f, &env, &b)).as_deref(),
            Some("http://f/v1")
        );
        assert_eq!(
            first(resolve_base_url(&[], &env, &[])).as_deref(),
            Some("http://o/v1")
        );
        let env2 = Env::from_pairs([
            ("PROMPTGAUGE_BASE_URL", "http://p/v1"),
            ("LLM_BASE_URL", "http://l/v1"),
        ]);
        assert_eq!(
            first(resolve_base_url(&[], &env2, &b)).as_deref(),
            Some("http://p/v1")
        );
        let env3 = Env::from_pairs([("LLM_BASE_URL", "http://l/v1")]);
        assert_eq!(
            first(resolve_base_url(&[], &env3, &[])).as_deref(),
            Some("http://l/v1")
        );
        assert!(resolve_base_url(&[], &Env::default(), &[]).urls.is_empty());
        assert!(
            resolve_base_url(&["mock".into()], &env, &[])
                .urls
                .is_empty()
        );
        let two = vec!["http://a/v1".to_string(), "http://b/v1".to_string()];
        assert_eq!(resolve_base_url(&two, &env, &b).urls, two);
    }
}
