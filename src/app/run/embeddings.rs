//! The `embedding` scorers' clients: each asks its endpoint's lane (the run's first when it
//! names none).

use std::sync::Arc;

use crate::app::Prepared;
use crate::error::UsageError;
use promptgauge_runner as runner;

/// The `embedding` scorers' specs in the bench (its `grade` and its cases'), each once:
/// their `endpoint` and `model` as written.
pub(super) fn embedding_specs(p: &Prepared) -> Vec<(Option<String>, Option<String>)> {
    let mut specs = p.bench.grade.embeddings();
    for case in &p.bench.cases {
        if let Some(g) = &case.grade {
            specs.extend(g.embeddings());
        }
    }
    specs.sort();
    specs.dedup();
    specs
}

/// The lane an `embedding` scorer's `endpoint` names: the run's (first) endpoint when it
/// names none; `None` when the run does not use the one it names.
pub(super) fn embedding_lane<'a>(
    p: &Prepared,
    lanes: &'a [runner::Lane],
    endpoint: Option<&str>,
) -> Option<&'a runner::Lane> {
    match endpoint {
        None => lanes.first(),
        Some(name) if p.grid.is_empty() => {
            (p.endpoint.name.as_deref() == Some(name)).then(|| lanes.first())?
        }
        Some(name) => lanes.iter().find(|l| l.name.as_deref() == Some(name)),
    }
}

/// Refuses, before anything is sent, an `embedding` scorer naming an endpoint the run does
/// not use.
pub(in crate::app) fn check_embedding_endpoints(p: &Prepared) -> Result<(), UsageError> {
    for (endpoint, _) in embedding_specs(p) {
        let Some(name) = endpoint else { continue };
        let used = if p.grid.is_empty() {
            p.endpoint.name.as_deref() == Some(name.as_str())
        } else {
            p.grid.iter().any(|g| g.name() == name)
        };
        if !used {
            return Err(UsageError::with_fix(
                format!(
                    "the `embedding` scorer asks endpoint `{name}` for its vectors, and this run does not use it"
                ),
                "name one of the run's endpoints (--endpoints), or drop the scorer's `endpoint` to use the run's",
            ));
        }
    }
    Ok(())
}

/// Where each `embedding` scorer gets its vectors: its endpoint's client (the run's lane,
/// the simulator when the lane is), its model or the endpoint's.
pub(in crate::app) fn embedding_services(
    p: &Prepared,
    lanes: &[runner::Lane],
    cache: Option<Arc<std::sync::Mutex<promptgauge_client::Cache>>>,
) -> promptgauge_grade::embedding::EmbeddingServices {
    embedding_specs(p)
        .into_iter()
        .filter_map(|(endpoint, model)| {
            let lane = embedding_lane(p, lanes, endpoint.as_deref())?;
            let service = promptgauge_grade::embedding::EmbeddingService::new(
                lane.client.clone(),
                model
                    .clone()
                    .unwrap_or_else(|| lane.client.config().model.clone()),
                lane.cache_key.clone(),
                cache.clone(),
            );
            Some(((endpoint, model), Arc::new(service)))
        })
        .collect()
}
