//! Who judges: the bench's `judge:` block over the run's endpoint, resolved before anything
//! is sent, and the judge's own client (its gate, limits and key).

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::client::ClientSettings;
use super::env::Env;
use super::prepare::Prepared;
use crate::app::shown_urls;
use crate::cli::PlanArgs;
use crate::error::UsageError;
use promptgauge_client::ApiKey;
use promptgauge_client::Cache;
use promptgauge_client::Limits;
use promptgauge_grade::judge::JudgeService;
use promptgauge_report::ProviderInfo;
use promptgauge_suite::JudgeSettings;

/// The judge, resolved.
pub(in crate::app) struct ResolvedJudge {
    /// Empty: the built-in simulator answers.
    pub base_urls: Vec<String>,
    pub model: String,
    pub api_key: Option<ApiKey>,
    pub api_key_env: String,
    pub params: Map<String, Value>,
    pub limits: Limits,
    /// The endpoint's extra headers when the judge answers there (none elsewhere).
    pub headers: Vec<(String, String, bool)>,
    /// Worth saying before the run (a key variable that is not set).
    pub warnings: Vec<String>,
    /// As shown and stored.
    pub info: ProviderInfo,
}

/// The bench's `judge:` with the `--judge-*` flags over it: `None` when neither says
/// anything. A flag's base URL is checked as the bench's is.
fn pinned(p: &Prepared, flags: &PlanArgs) -> Result<Option<JudgeSettings>, UsageError> {
    let any_flag = flags.judge_base_url.is_some()
        || flags.judge_model.is_some()
        || flags.judge_key_env.is_some()
        || flags.judge_protocol.is_some();
    let Some(mut settings) = p.bench.judge.clone().or_else(|| {
        any_flag.then(|| JudgeSettings {
            endpoint: None,
            headers: Vec::new(),
            base_url: None,
            model: None,
            api_key_env: None,
            protocol: None,
            params: Map::new(),
            limits: p.bench.limits.clone(),
            price: None,
        })
    }) else {
        return Ok(None);
    };
    if let Some(url) = &flags.judge_base_url {
        let protocol = flags
            .judge_protocol
            .or(settings.protocol)
            .unwrap_or_default();
        if url != "mock" {
            promptgauge_suite::check_base_url(url, protocol).map_err(|e| {
                UsageError::with_fix(
                    format!("--judge-base-url: {e}"),
                    "write the full URL, e.g. http://127.0.0.1:8000/v1, or `mock`",
                )
            })?;
        }
        settings.base_url = Some(url.clone());
    }
    if let Some(model) = &flags.judge_model {
        settings.model = Some(model.clone());
    }
    if let Some(var) = &flags.judge_key_env {
        settings.api_key_env = Some(var.clone());
    }
    if let Some(protocol) = flags.judge_protocol {
        settings.protocol = Some(protocol);
    }
    Ok(Some(settings))
}

/// Who judges this run, if any of its scorers asks a model: the bench's `judge:` under the
/// `--judge-*` flags. Unset fields come from the run's endpoint: by default the model under
/// test judges itself (said loudly).
pub(in crate::app) fn resolve(
    p: &Prepared,
    flags: &PlanArgs,
    env: &Env,
) -> Result<Option<ResolvedJudge>, UsageError> {
    if !p.scorers.iter().any(|s| s.uses_judge()) {
        return Ok(None);
    }
    let settings = pinned(p, flags)?;
    let run = &p.endpoint;
    let own_url = settings.as_ref().and_then(|j| j.base_url.clone());
    // At the run's endpoint the judge speaks its protocol; elsewhere its own, or the default.
    let protocol = match (settings.as_ref().and_then(|j| j.protocol), &own_url) {
        (Some(p), _) => p,
        (None, None) => run.protocol,
        (None, Some(_)) => promptgauge_client::ProtocolKind::default(),
    };
    let (base_urls, headers) = match own_url {
        Some(url) if url == "mock" => (Vec::new(), Vec::new()),
        Some(url) => (
            vec![url],
            super::endpoint::read_headers(
                "the judge",
                settings.as_ref().map_or(&[][..], |s| &s.headers),
                env,
            )?,
        ),
        None => (run.base_urls.clone(), run.headers.clone()),
    };
    let model = match settings.as_ref().and_then(|j| j.model.clone()) {
        Some(m) => m,
        None => run.model.clone(),
    };
    let mut warnings = Vec::new();
    let at_the_endpoint = base_urls == run.base_urls;
    let (api_key_env, api_key) = match settings.as_ref().and_then(|j| j.api_key_env.clone()) {
        Some(name) => {
            let key = own_key(&name, env, !base_urls.is_empty(), &mut warnings)?;
            (name, key)
        }
        // The run's key goes to the run's endpoint only: never to another server.
        None if at_the_endpoint => (run.api_key_env.clone(), run.api_key.clone()),
        None => (String::new(), None),
    };
    if model.trim().is_empty() {
        return Err(UsageError::with_fix(
            "the judge's model name is empty",
            "name the model that judges: --judge-model NAME, or judge.model",
        ));
    }
    // A judge answers with a verdict: deterministic, and in JSON where the server can.
    let mut params = Map::new();
    params.insert("temperature".into(), json!(0));
    protocol.build().ask_for_json(&mut params);
    if let Some(j) = &settings {
        for (k, v) in &j.params {
            params.insert(k.clone(), v.clone());
        }
    }
    let info = ProviderInfo {
        endpoint: settings.as_ref().and_then(|s| s.endpoint.clone()),
        ..ProviderInfo::of(shown_urls(&base_urls), &model, &api_key_env, protocol)
    };
    Ok(Some(ResolvedJudge {
        base_urls,
        model,
        api_key: if info.simulated { None } else { api_key },
        api_key_env,
        params,
        limits: settings.map_or_else(|| p.bench.limits.clone(), |j| j.limits),
        headers,
        warnings,
        info,
    }))
}

/// The key in the judge's own variable `name`, when it is sent to a server (`sent`); a
/// variable that is not set is a warning: no key is sent.
fn own_key(
    name: &str,
    env: &Env,
    sent: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<ApiKey>, UsageError> {
    Ok(match env.get(name) {
        Some(k) if sent => {
            let (k, _) = promptgauge_client::secrets::clean_api_key(k, name).map_err(|m| {
                UsageError::with_fix(m, format!("set ${name} to the judge's key alone"))
            })?;
            Some(ApiKey::new(k))
        }
        None if sent => {
            warnings.push(format!(
                "${name} is not set: the judge is sent no key (fine for most self-hosted servers)"
            ));
            None
        }
        _ => None,
    })
}

impl ResolvedJudge {
    /// Whether the judge asks the run's own endpoint (the same URLs and key): then the
    /// endpoint's preflight already looked at it.
    pub(in crate::app) fn is_endpoint(&self, p: &Prepared) -> bool {
        self.base_urls == p.endpoint.base_urls
            && self.api_key_env == p.endpoint.api_key_env
            && self.model == p.endpoint.model
            && self.info.protocol == p.endpoint.protocol
    }

    /// The judge's client and how to ask it. `simulator` is the built-in simulator's URL
    /// (when it runs); `cache` is `--cache`'s.
    pub(in crate::app) fn service(
        &self,
        simulator: Option<&str>,
        cache: Option<Arc<Mutex<Cache>>>,
    ) -> anyhow::Result<Arc<JudgeService>> {
        let urls: Vec<String> = match (self.base_urls.is_empty(), simulator) {
            (false, _) => self.base_urls.clone(),
            (true, Some(sim)) => vec![sim.to_string()],
            (true, None) => anyhow::bail!("the judge needs the simulator, which is not running"),
        };
        let client = ClientSettings {
            limits: &self.limits,
            base_urls: &urls,
            model: &self.model,
            protocol: self.info.protocol,
            api_key: (self.api_key.clone(), &self.api_key_env),
            headers: &self.headers,
        }
        .client()?;
        Ok(Arc::new(JudgeService {
            client: Arc::new(client),
            params: self.params.clone(),
            endpoint: self.info.base_url.clone(),
            cache,
        }))
    }
}
