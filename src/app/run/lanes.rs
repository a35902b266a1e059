//! The clients the jobs go through, one lane per endpoint, and the built-in simulator when
//! an endpoint or the judge has no server.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use super::cache::lane_cache_keys;
use crate::app::settings::RunSettings;
use crate::app::{Failure, Prepared, SIMULATED_BANNER};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_mock::Provider;
use promptgauge_mock::server::MockServer;
use promptgauge_report::ProviderInfo;
use promptgauge_runner as runner;
use promptgauge_runner::record::RunRecord;

/// The clients a run sends through: its lanes, and the built-in simulator that answers
/// those without a server (stopped once the sending ends).
pub(super) struct Clients {
    /// One lane per endpoint, the first the run's.
    pub(super) lanes: Vec<runner::Lane>,
    /// The built-in simulator, when an endpoint or the judge has no server.
    pub(super) simulator: Option<MockServer>,
}

/// The clients the jobs go through, one lane per endpoint (to the built-in simulator when
/// an endpoint or the judge has no server), with the replicas the preflight found dead
/// benched; said first: a judge that is the model under test, a key that is not set. The
/// lanes stop together: a key refused anywhere stops the run, and Ctrl-C drains them all.
pub(super) async fn start_client(
    settings: &RunSettings,
    record: &RunRecord,
    dead_replicas: &[Vec<(usize, String)>],
) -> Result<Clients, Failure> {
    let (p, provider, judge) = (&settings.plan, &settings.provider, settings.judge.as_ref());
    if record.self_judged() {
        note!(
            "warning: the judge is the model under test ({}): models tend to favour their own answers (self-preference bias); set judge.model (and judge.base_url) to another model",
            provider.model
        );
    }
    let simulator = start_simulator(p, record, judge, settings.quiet).await?;
    say_before_sending(p, provider, settings.quiet);
    let keys = lane_cache_keys(p, &record.endpoint.base_url);
    let lanes = settings
        .lanes(
            record,
            simulator.as_ref().map(|s| s.base_url()).as_deref(),
            &keys,
        )
        .before_send()?;
    for (lane, dead) in lanes.iter().zip(dead_replicas) {
        for (i, why) in dead {
            lane.client
                .bench_replica(*i, &format!("no answer to the preflight: {why}"));
        }
    }
    link_lanes(&lanes);
    check_batch_apis(p, &lanes).await?;
    Ok(Clients { lanes, simulator })
}

/// The built-in simulator, started when the run or its judge has no server (said loudly;
/// under `--quiet`, by the one line under the table).
pub(super) async fn start_simulator(
    p: &Prepared,
    record: &RunRecord,
    judge: Option<&crate::app::settings::ResolvedJudge>,
    quiet: bool,
) -> Result<Option<MockServer>, Failure> {
    let judge_simulated = judge.as_ref().is_some_and(|j| j.base_urls.is_empty());
    let simulated = if p.grid.is_empty() {
        p.endpoint.base_urls.is_empty()
    } else {
        p.grid.iter().any(|g| g.endpoint.base_urls.is_empty())
    };
    Ok(if simulated || judge_simulated {
        if simulated {
            if !quiet {
                note!("{SIMULATED_BANNER}");
            }
        } else {
            note!("note: the built-in SIMULATOR judges the answers (judge.base_url: mock)");
        }
        let mut config = promptgauge_mock::MockConfig::demo();
        config.oracle = Some(oracle(p, &record.run_id));
        let sim = Arc::new(Provider::new(config));
        let server = MockServer::start(sim, SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("cannot start the built-in simulator")
            .before_send()?;
        Some(server)
    } else {
        None
    })
}

/// Tells the built-in simulator the case behind each job's idempotency key, so it can
/// answer any bench in the shape its scorer expects (and the run stays marked simulated).
pub(super) fn oracle(p: &Prepared, run_id: &str) -> promptgauge_mock::answers::Oracle {
    use promptgauge_mock::answers::{Hint, Oracle};
    let bench = p.bench.clone();
    let mut case_of = vec![(usize::MAX, 0); p.jobs.iter().map(|j| j.index + 1).max().unwrap_or(0)];
    for j in &p.jobs {
        case_of[j.index] = (j.case, j.variant);
    }
    let others: Arc<Vec<String>> = Arc::new(
        bench
            .cases
            .iter()
            .filter_map(|c| c.expected.first().cloned())
            .collect(),
    );
    let run_id = run_id.to_string();
    Oracle(Arc::new(move |key: &str| {
        // Judge calls (`…-judge-0`) are answered from their prompt, not from the case.
        let (index, _) = promptgauge_runner::job_of_key(key, &run_id)?;
        let (case, variant) = *case_of.get(index)?;
        let case = bench.cases.get(case)?;
        Some(Hint {
            case: case.id.clone(),
            expected: case.expected.clone(),
            expected_json: case.expected_json.clone(),
            shape: promptgauge_grade::SpecExt::shape(case.grade.as_ref().unwrap_or(&bench.grade)),
            others: others.clone(),
            files: case.files.len() + case.messages.iter().map(|m| m.files.len()).sum::<usize>(),
            tool_script: agent_plan(case, case.grade.as_ref().unwrap_or(&bench.grade)),
            reading: bench.variants.get(variant).and_then(|v| v.extract.clone()),
        })
    }))
}

/// The calls the simulator's agent makes for `case`: its `tool_results:` lines in order,
/// then each call its `tool_args` scorers expect of a tool no line scripts (a program's or
/// an MCP server's tool).
fn agent_plan(
    case: &promptgauge_suite::Case,
    grade: &promptgauge_suite::GradeSpec,
) -> Vec<(String, serde_json::Value)> {
    let mut plan: Vec<(String, serde_json::Value)> = case
        .tool_script
        .iter()
        .map(|l| {
            let args = l.args.clone().filter(serde_json::Value::is_object);
            (
                l.tool.clone(),
                args.unwrap_or_else(|| serde_json::json!({})),
            )
        })
        .collect();
    for (tool, args) in grade.expected_calls() {
        if !case.tool_script.iter().any(|l| l.tool == tool) {
            plan.push((tool, args));
        }
    }
    plan
}

/// The lanes stop as one: the first's stop and drain reach the others, and any other's
/// stop (a refused key) reaches the first, and so every lane.
pub(super) fn link_lanes(lanes: &[runner::Lane]) {
    let Some((first, rest)) = lanes.split_first() else {
        return;
    };
    for lane in rest {
        for (from, to) in [
            (first.client.stop_token(), lane.client.stop_token()),
            (lane.client.stop_token(), first.client.stop_token()),
            (first.client.drain_token(), lane.client.drain_token()),
        ] {
            tokio::spawn(async move {
                from.cancelled().await;
                to.cancel()
            });
        }
    }
}

/// Each endpoint that batches must have a batch API: asked (a list of its batches, which
/// costs nothing) before anything is sent, so `--batch` at a server without one is a clear
/// error, not a run of failed jobs.
pub(super) async fn check_batch_apis(p: &Prepared, lanes: &[runner::Lane]) -> Result<(), Failure> {
    for (i, lane) in lanes.iter().enumerate().filter(|(_, l)| l.batch) {
        let who = match p.grid.get(i) {
            Some(g) => format!("{} ({})", g.role(), lane.client.config().base_url),
            None => format!("the endpoint {}", lane.client.config().base_url),
        };
        if lane.client.batch_route().is_none() {
            let protocol = lane.client.config().protocol;
            return Err(UsageError::with_fix(
                format!("{who} speaks {protocol}, whose provider has no batch API: --batch (or `batch: true`) cannot send its jobs; nothing was sent"),
                "run without --batch (stream the jobs)",
            )
            .into());
        }
        let api = lane.client.batches();
        let Err(e) = api.probe().await else { continue };
        let path = format!(
            "{}{}",
            lane.client.config().base_url.trim_end_matches('/'),
            api.api.path()
        );
        return Err(match e {
            promptgauge_client::batch::BatchError::Http { status: 401 | 403, message } => {
                Failure::Provider(anyhow::anyhow!(
                    "{who} refused the key at its batch API (GET {path}): {message}"
                ))
            }
            promptgauge_client::batch::BatchError::Http { status: 404 | 405, .. } => UsageError::with_fix(
                format!("{who} has no batch API: GET {path} answered 404, so --batch (or `batch: true`) cannot send its jobs; nothing was sent"),
                "run without --batch (stream the jobs), or point it at a provider with one: OpenAI's /v1/batches (chat completions, Responses) or Anthropic's /v1/messages/batches. Self-hosted servers (vLLM, llama.cpp, Ollama, text-generation-inference, transformers serve) have none; vLLM's `run-batch` is an offline command, not an HTTP API (docs/guide/batch.md)",
            )
            .into(),
            other => Failure::Provider(anyhow::anyhow!(
                "{who}: its batch API did not answer as one (GET {path}): {other}; nothing was sent"
            )),
        });
    }
    Ok(())
}

/// Notes said before anything is sent: a key that is not set, repeats that measure little.
pub(super) fn say_before_sending(p: &Prepared, provider: &ProviderInfo, quiet: bool) {
    let userinfo = p
        .endpoint
        .base_urls
        .iter()
        .any(|u| promptgauge_client::secrets::redact_url(u) != *u);
    if !provider.simulated && p.endpoint.api_key.is_none() && !userinfo && !quiet {
        note!(
            "note: ${} is not set; sending no Authorization header (fine for most self-hosted servers)",
            p.endpoint.api_key_env
        );
    }
    if let Some(w) = p.greedy_repeats_warning().filter(|_| !quiet) {
        note!("warning: {w}");
    }
    // An unpriced run is said before it is sent, not found out from an empty cost column.
    for u in p.unpriced.iter().filter(|_| !quiet && !provider.simulated) {
        note!(
            "note: unpriced: {}: its answers get no cost; price it with {}",
            u.said(),
            u.fix()
        );
    }
    if !quiet {
        for line in p.bench.programs_said() {
            note!("{line}");
        }
    }
}
