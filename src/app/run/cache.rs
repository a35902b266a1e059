//! The response cache (`--cache`): where it lies, and what it keys each lane's answers on.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use crate::app::{Failure, Prepared, shown_urls};
use crate::error::BeforeSend;
use promptgauge_report::ProviderInfo;
use promptgauge_runner::RunDir;
use promptgauge_suite::Job;

/// What `--cache` keys an endpoint's answers on besides the request: its base URL as shown,
/// and — when they are not the defaults — its protocol and extra headers (another protocol
/// or a header that picks an adapter may answer differently). The key is hashed before it
/// is stored, so a header's value is never written.
/// Each lane's endpoint as the response cache keys it, in lane order; `base_url` is the
/// run's endpoint as recorded (a run of one endpoint).
pub(super) fn lane_cache_keys(p: &Prepared, base_url: &str) -> Vec<String> {
    if p.grid.is_empty() {
        return vec![cache_key(base_url, &p.endpoint)];
    }
    p.grid
        .iter()
        .map(|g| {
            let shown = shown_urls(&g.endpoint.base_urls);
            let url = if shown.is_empty() {
                ProviderInfo::SIMULATED.to_string()
            } else {
                shown.join(", ")
            };
            cache_key(&url, &g.endpoint)
        })
        .collect()
}

pub(super) fn cache_key(shown_url: &str, e: &crate::app::settings::Endpoint) -> String {
    let mut key = shown_url.to_string();
    if !e.protocol.is_default() {
        key.push_str(&format!(" protocol={}", e.protocol));
    }
    for (name, value, _) in &e.headers {
        key.push_str(&format!(" {}={value}", name.to_ascii_lowercase()));
    }
    key
}

/// `--cache`: the response cache beside the run folders.
pub(super) fn open_cache(
    cache: bool,
    dir: &RunDir,
    quiet: bool,
) -> Result<Option<Arc<std::sync::Mutex<promptgauge_client::Cache>>>, Failure> {
    Ok(if cache {
        let root = dir.path().parent().unwrap_or(Path::new("."));
        let path = promptgauge_client::Cache::path_under(root);
        let cache = promptgauge_client::Cache::open(&path)
            .with_context(|| format!("cannot open the response cache {}", path.display()))
            .before_send()?;
        if !quiet {
            note!("cache: {} ({} answers)", path.display(), cache.len());
        }
        Some(Arc::new(std::sync::Mutex::new(cache)))
    } else {
        None
    })
}

/// `--budget --cache`: a test of whether the response cache (under `root`) holds a job's
/// answer, for the estimate to count it free; one that says no without `--cache`.
pub(super) fn cached_answers(
    p: &Prepared,
    cache: bool,
    root: &Path,
    base_url: &str,
) -> Result<crate::app::budget::CachedTest, Failure> {
    if !cache {
        return Ok(Box::new(|_, _| false));
    }
    let path = promptgauge_client::Cache::path_under(root);
    let cache = promptgauge_client::Cache::open(&path)
        .with_context(|| format!("cannot open the response cache {}", path.display()))
        .before_send()?;
    let keys = lane_cache_keys(p, base_url);
    let lanes: Vec<(String, serde_json::Map<String, serde_json::Value>)> = if p.grid.is_empty() {
        vec![(p.endpoint.model.clone(), Default::default())]
    } else {
        p.grid
            .iter()
            .map(|g| (g.endpoint.model.clone(), g.params.clone()))
            .collect()
    };
    let bench = p.bench.clone();
    Ok(Box::new(
        move |job: &Job, messages: &[promptgauge_client::ChatMessage]| {
            let lane = usize::from(job.endpoint);
            let (Some(endpoint), Some((model, params))) = (keys.get(lane), lanes.get(lane)) else {
                return false;
            };
            let key = promptgauge_client::cache::key(
                endpoint,
                model,
                messages,
                &bench.params_at(job.variant, params),
                job.repeat,
            );
            cache.get(&key).is_some()
        },
    ))
}
