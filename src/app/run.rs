//! `run`: send every job not yet in the journal, let every listener hear each as it
//! finishes, write the reports, return the exit code. With `--resume DIR`, continue that
//! run: its journal is read once, through the same aggregator.

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::finish::{Ending, Outputs, conclude, in_use};
use super::settings::ClientSettings;
use super::{Exit, Failure, Prepared, SIMULATED_BANNER, demo_mock_config, prepare, shown_urls};
use crate::cli::{Env, PlanArgs, RunArgs, UsageError};
use crate::client::Client;
use crate::clock::utc_now;
use crate::error::BeforeSend;
use crate::mock::Provider;
use crate::mock::server::MockServer;
use crate::report::ProviderInfo;
use crate::report::progress::Progress;
use crate::report::verbose::VerboseLog;
use crate::runner::events::{Fanout, Listener};
use crate::runner::record::{BenchRecord, PlanSettings, RunRecord, StopReason, Tool};
use crate::runner::{self, RunDir};
use crate::suite::{Fingerprint, Job};

/// `run`: runs a bench (or resumes one with `--resume`) and reports on it.
pub async fn run(args: &RunArgs, env: &Env) -> Result<Exit, Failure> {
    let Resolved {
        resumed,
        p,
        provider,
        judge,
        store,
        baseline,
    } = resolve(args, env).await?;
    let judge_info = judge.as_ref().map(|j| j.info.clone());
    let budget = plan_budget(
        args,
        resumed.as_ref().map(|(_, record, _)| record),
        &p,
        judge.as_ref(),
    )?;

    let mut signals = Signals::watch().before_send()?;
    let Some(dead_replicas) = look_at_server(&p, judge.as_ref(), args.quiet, &mut signals).await?
    else {
        return Ok(Exit::Interrupted);
    };

    let (dir, mut record, _lock) = open_folder(
        resumed,
        &p,
        args,
        env,
        (&provider, judge_info.as_ref()),
        &store,
    )?;
    let continued = continue_journal(&p, args, &dir, &record, budget.as_ref().map(|b| &b.1))?;
    if let Some((limit, prices)) = &budget {
        record.budget_usd = Some(*limit);
        if !record.resumed_at.is_empty() {
            // Jobs in batches the provider already holds are collected whatever the budget
            // says; what they were held for counts against it before anything new.
            let (adopted, reserved, collecting) = in_open_batches(&continued, &record.run_id);
            let fresh: Vec<Job> = continued
                .jobs
                .iter()
                .filter(|j| !adopted.contains(&j.index))
                .copied()
                .collect();
            if collecting && !args.quiet {
                note!(
                    "collecting {} already submitted in batches the provider holds ({} held for them): never refused by the budget",
                    super::count(adopted.len() as u64, "job", "jobs"),
                    crate::report::usd(Some(reserved))
                );
            }
            if continued.spent >= *limit && !fresh.is_empty() && !collecting {
                return Err(UsageError::with_fix(
                    format!(
                        "the run has spent {} already, and the budget is {}: nothing more could be sent",
                        crate::report::usd(Some(continued.spent)),
                        crate::report::usd(Some(*limit))
                    ),
                    "resume with a larger --budget",
                )
                .into());
            }
            // A resume weighs what is left against what is left of the budget.
            let root = dir.path().parent().unwrap_or(Path::new("."));
            let cached = cached_answers(&p, args.cache, root, &record.endpoint.base_url)?;
            let e = super::budget::estimate(&p, &fresh, prices, &*cached)?;
            // With batches to collect the resume goes on, the rest sent only while the
            // budget lasts (as with --run-to-budget).
            let line = super::budget::check_estimate(
                &e,
                *limit,
                continued.spent + reserved,
                args.plan.run_to_budget || collecting,
            )?;
            if !args.quiet {
                note!("{line}");
            }
        }
    }
    mark_batched(&mut record, &p);
    if args.retry_failed.is_none() && !args.quiet {
        say_open_resends(&continued.batches, &dir);
    }

    let (simulator, lanes) = start_client(
        &p,
        &record,
        &provider,
        judge.as_ref(),
        &dead_replicas,
        args.quiet,
    )
    .await?;
    dir.write_record(&record).before_send()?;
    if !args.quiet {
        say_what_runs(&p, &provider, &record, &dir, continued.jobs.len());
    }

    let budget = budget.map(|(limit, prices)| {
        Arc::new(runner::budget::Budget::new(limit, continued.spent, prices))
    });
    let sent = send_jobs(
        &p,
        args,
        env,
        (&dir, &record),
        (&lanes, simulator.as_ref(), judge.as_ref()),
        signals,
        (continued, budget.clone()),
    )
    .await?;
    drop(simulator);

    let (ending, stopped) = ending_of(
        &sent.tally,
        &sent.dispatch,
        (&lanes, sent.judge.as_deref()),
        (&sent.first, &sent.outage),
        &dir,
        (Some(args.batch.batch_wait), budget.as_deref()),
    );
    record.finished_at = Some(utc_now());
    record.stopped = stopped;
    let mut problems = Vec::new();
    if let Err(e) = dir.write_record(&record) {
        problems.push(e.into());
    }
    // The summary says when and why the run ended.
    let mut agg = sent.agg;
    agg.figures().set_run(record.info());
    let result = agg.finish();
    let outputs = Outputs {
        store: if args.store.no_store {
            None
        } else {
            Some(store?)
        },
        ..Outputs::of(&args.gates, &args.outputs, baseline.as_ref(), args.quiet)
    };
    Ok(conclude(
        &dir,
        &record,
        result,
        ending,
        &outputs,
        problems,
        Some(&p.bench),
    )
    .await)
}

/// What the sending leaves: its tally, the listeners that may have stopped it, the
/// aggregator that heard every job, and the judge's client (a refused judge key stops the
/// run too).
struct Sent {
    tally: runner::RunTally,
    dispatch: CancellationToken,
    first: FirstFailures,
    outage: Outage,
    agg: super::Figures,
    judge: Option<Arc<crate::grade::judge::JudgeService>>,
}

/// Sends every job left, every listener hearing each as it finishes, until all are sent
/// or the sending is stopped: by a signal, by the first jobs all failing alike, by an
/// outage, or by the provider.
async fn send_jobs(
    p: &Prepared,
    args: &RunArgs,
    env: &Env,
    (dir, record): (&RunDir, &RunRecord),
    (lanes, simulator, judge): (
        &[runner::Lane],
        Option<&MockServer>,
        Option<&super::judge::Judge>,
    ),
    signals: Signals,
    (continued, budget): (Continued, Option<Arc<runner::budget::Budget>>),
) -> Result<Sent, Failure> {
    let Continued {
        mut agg,
        mut journal,
        jobs,
        already,
        resend,
        stop,
        horizon,
        per_case,
        batches,
        spent: _,
    } = continued;
    let client = &lanes[0].client;
    let dispatch = client.drain_token();
    let signals = watch_signals(signals, dispatch.clone(), client.stop_token(), args.grace);
    let live = !args.quiet && std::io::stderr().is_terminal() && !env.is_ci();
    let mut progress = Progress::new(p.jobs.len(), already, record.plan.arms(), live);
    let cache = open_cache(args.cache, dir, args.quiet)?;
    let judge = judge_service_for(
        judge,
        simulator.map(|s| s.base_url()).as_deref(),
        cache.clone(),
        client,
    )?;
    let embeddings = embedding_services(p, lanes, cache.clone());
    let options = runner::RunOptions {
        cache,
        scoring: crate::grade::ScoreContext {
            judge: judge.clone(),
            embeddings,
            stop: Some(client.stop_token()),
        },
        skip: stop,
        horizon: horizon.map(|h| (h, per_case)),
        resend,
        batch: lanes.iter().any(|l| l.batch).then(|| args.batch.settings()),
        batches: Arc::new(batches),
        budget,
        ..run_options(p, record, args.verbose, already)
    };
    let mut verbose = VerboseLog;
    // Without the live line (not a terminal, or CI), each batch's submission and end are
    // said as they happen: batches take hours, and a log should show them.
    let mut batch_notes = BatchNotes;
    let (mut first, mut outage) = watchers(p, &dispatch, lanes);
    // The journal first: nothing is reported that it did not keep.
    let mut listeners: Vec<&mut dyn Listener> = vec![
        &mut journal,
        &mut agg,
        &mut progress,
        &mut first,
        &mut outage,
    ];
    if args.verbose {
        listeners.push(&mut verbose);
    }
    if !live && !args.quiet && lanes.iter().any(|l| l.batch) {
        listeners.push(&mut batch_notes);
    }
    let tally = runner::run(
        p.bench.clone(),
        jobs,
        lanes,
        &options,
        dispatch.clone(),
        &mut Fanout(listeners),
    )
    .await;
    signals.abort();
    progress.finish();
    drop(journal);
    Ok(Sent {
        tally,
        dispatch,
        first,
        outage,
        agg,
        judge,
    })
}

/// The `embedding` scorers' specs in the bench (its `grade` and its cases'), each once:
/// their `endpoint` and `model` as written.
fn embedding_specs(p: &Prepared) -> Vec<(Option<String>, Option<String>)> {
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
fn embedding_lane<'a>(
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
pub(super) fn check_embedding_endpoints(p: &Prepared) -> Result<(), UsageError> {
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
fn embedding_services(
    p: &Prepared,
    lanes: &[runner::Lane],
    cache: Option<Arc<std::sync::Mutex<crate::client::Cache>>>,
) -> crate::grade::embedding::EmbeddingServices {
    embedding_specs(p)
        .into_iter()
        .filter_map(|(endpoint, model)| {
            let lane = embedding_lane(p, lanes, endpoint.as_deref())?;
            let service = crate::grade::embedding::EmbeddingService::new(
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

/// The judge's client and how to ask it, when a scorer asks a model; it stops with the
/// run's client, and the run's client with it.
fn judge_service_for(
    judge: Option<&super::judge::Judge>,
    simulator: Option<&str>,
    cache: Option<Arc<std::sync::Mutex<crate::client::Cache>>>,
    client: &Client,
) -> Result<Option<Arc<crate::grade::judge::JudgeService>>, Failure> {
    Ok(match judge {
        Some(j) => {
            let service = j.service(simulator, cache).before_send()?;
            // One stop for both: a refused judge key stops the run, and so do two Ctrl-Cs.
            let (main, judged) = (client.stop_token(), service.client.stop_token());
            let (m2, j2) = (main.clone(), judged.clone());
            tokio::spawn(async move {
                m2.cancelled().await;
                j2.cancel()
            });
            tokio::spawn(async move {
                judged.cancelled().await;
                main.cancel()
            });
            Some(service)
        }
        None => None,
    })
}

/// What the workers share that a run's record and plan decide.
fn run_options(
    p: &Prepared,
    record: &RunRecord,
    verbose: bool,
    already: usize,
) -> runner::RunOptions {
    runner::RunOptions {
        scorers: p.scorers.clone(),
        run_id: record.run_id.clone(),
        attempts: verbose,
        already,
        ..Default::default()
    }
}

/// The listeners that stop sending early: when the first jobs all fail the same way
/// (a wrong model, URL or key), and when most jobs fail the same passing way (an outage).
/// In a run of several endpoints an outage is watched per endpoint, and stops only that
/// endpoint's lane: the others go on.
fn watchers(
    p: &Prepared,
    dispatch: &CancellationToken,
    lanes: &[runner::Lane],
) -> (FirstFailures, Outage) {
    let gates = p.gates();
    let outage = if p.grid.is_empty() {
        Outage::new((2 * gates).clamp(8, 32), dispatch.clone())
    } else {
        Outage::per_endpoint(
            p.grid
                .iter()
                .zip(lanes)
                .map(|(g, lane)| {
                    let window = (2 * g.gates()).clamp(8, 32);
                    (g.name().to_string(), window, lane.dispatch.clone())
                })
                .collect(),
        )
    };
    (
        FirstFailures::new(gates.clamp(3, 32), dispatch.clone()),
        outage,
    )
}

/// What a run is, resolved before anything is sent: the folder to resume (locked), the
/// plan, the endpoint, the judge, the history store and the baseline.
struct Resolved {
    resumed: Option<(RunDir, RunRecord, crate::runner::lock::RunLock)>,
    p: Prepared,
    provider: ProviderInfo,
    judge: Option<super::judge::Judge>,
    store: Result<crate::store::Location, UsageError>,
    baseline: Option<super::baseline::Reference>,
}

/// Resolves flags, bench, environment and the run folder being resumed into [`Resolved`];
/// every error is an input error (nothing sent).
async fn resolve(args: &RunArgs, env: &Env) -> Result<Resolved, Failure> {
    // A run folder is written by one process: take it before reading anything in it.
    let resumed = match &args.resume {
        Some(path) => {
            let dir = RunDir::at(path);
            let lock = dir.lock().map_err(in_use)?;
            let record = dir
                .read_record()
                .map_err(|e| UsageError(format!("{e:#}")))?;
            Some((dir, record, lock))
        }
        None => None,
    };
    let plan_args = match &resumed {
        Some((_, record, _)) => resumed_plan(&args.plan, record),
        None => PlanArgs {
            // Points on the command line; a share in the plan.
            max_drop: args.gates.max_drop.map(|p| p / 100.0),
            ..args.plan.clone()
        },
    };
    if let Some((dir, record, _)) = &resumed {
        check_resume_flags(args, dir, record)?;
    }
    let p = prepare(&plan_args, env)?;
    for w in &p.endpoint.warnings {
        note!("warning: {w}");
    }
    let provider = super::budget::provider_info(&p);
    let judge = super::judge::resolve(&p, &plan_args, env)?;
    for w in judge.iter().flat_map(|j| &j.warnings) {
        note!("warning: the judge: {w}");
    }
    check_gates(&p, &args.gates)?;
    check_embedding_endpoints(&p)?;
    // Every report file must be writable, and the baseline run readable, before a single
    // request is paid for.
    for path in args.outputs.files() {
        check_writable(path).before_send()?;
    }
    // The history store: beside the run folders unless named.
    let root = match &args.resume {
        Some(path) => path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        None => args.out.clone(),
    };
    let store = crate::cli::store_location(args.store.store.as_deref(), env, &root).map(
        |(location, named)| match (&resumed, named) {
            // A resumed run goes where it was first recorded, unless told otherwise.
            (Some((_, record, _)), false) => recorded_store(record).unwrap_or(location),
            _ => location,
        },
    );
    // A store that cannot be named right is said before anything is done.
    if let (false, Err(e)) = (args.store.no_store, &store) {
        return Err(e.clone().into());
    }
    let baseline = baseline_of(
        args.gates.baseline.as_deref(),
        &p.bench.name,
        p.bench.confidence,
        &store,
    )
    .await?;
    check_baseline_pairs(&p, baseline.as_ref())?;
    Ok(Resolved {
        resumed,
        p,
        provider,
        judge,
        store,
        baseline,
    })
}

/// The clients the jobs go through, one lane per endpoint (to the built-in simulator when
/// an endpoint or the judge has no server), with the replicas the preflight found dead
/// benched; said first: a judge that is the model under test, a key that is not set. The
/// lanes stop together: a key refused anywhere stops the run, and Ctrl-C drains them all.
async fn start_client(
    p: &Prepared,
    record: &RunRecord,
    provider: &ProviderInfo,
    judge: Option<&super::judge::Judge>,
    dead_replicas: &[Vec<(usize, String)>],
    quiet: bool,
) -> Result<(Option<MockServer>, Vec<runner::Lane>), Failure> {
    if record.self_judged() {
        note!(
            "warning: the judge is the model under test ({}): models tend to favour their own answers (self-preference bias); set judge.model (and judge.base_url) to another model",
            provider.model
        );
    }
    let simulator = start_simulator(p, record, judge).await?;
    let simulated = |urls: &[String]| match &simulator {
        Some(s) if urls.is_empty() => vec![s.base_url()],
        _ => urls.to_vec(),
    };
    say_before_sending(p, provider, quiet);
    let keys = lane_cache_keys(p, &record.endpoint.base_url);
    let lanes: Vec<runner::Lane> = if p.grid.is_empty() {
        let urls = simulated(&p.endpoint.base_urls);
        let client = ClientSettings::of(&p.endpoint, &p.bench.limits, &urls)
            .client()
            .before_send()?;
        vec![runner::Lane {
            batch: record.endpoint.batch,
            ..runner::Lane::single(Arc::new(client), keys[0].clone())
        }]
    } else {
        p.grid
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let e = &g.endpoint;
                let urls = simulated(&e.base_urls);
                let client = ClientSettings::of(e, &g.limits, &urls).client()?;
                Ok(runner::Lane {
                    client: Arc::new(client),
                    name: Some(g.name().to_string()),
                    params: Arc::new(g.params.clone()),
                    cache_key: keys[i].clone(),
                    dispatch: CancellationToken::new(),
                    batch: record.endpoints.get(i).is_some_and(|info| info.batch),
                })
            })
            .collect::<anyhow::Result<_>>()
            .before_send()?
    };
    for (lane, dead) in lanes.iter().zip(dead_replicas) {
        for (i, why) in dead {
            lane.client
                .bench_replica(*i, &format!("no answer to the preflight: {why}"));
        }
    }
    link_lanes(&lanes);
    check_batch_apis(p, &lanes).await?;
    Ok((simulator, lanes))
}

/// Batches of jobs an earlier `--retry-failed` sent again, still open at the provider: a
/// resume without the flag does not collect them (their jobs' records are failures), so it
/// says how to.
fn say_open_resends(batches: &[crate::runner::batch::BatchRecord], dir: &RunDir) {
    let resent: usize = crate::runner::batch::open_batches(batches)
        .filter(|b| b.keys.iter().any(|k| k.contains("-resend")))
        .map(|b| b.keys.len())
        .sum();
    if resent > 0 {
        note!(
            "note: {} sent again by an earlier --retry-failed wait in batches still open at the provider; collect them (nothing is paid again) with: {} --retry-failed",
            super::count(resent as u64, "job", "jobs"),
            super::resume_command(dir.path())
        );
    }
}

/// A run's record says which endpoints batch: a resume that adds `--batch` says so too
/// (and a resume of a batched run batches the rest, whatever its flags).
fn mark_batched(record: &mut RunRecord, p: &Prepared) {
    if p.grid.is_empty() {
        record.endpoint.batch |= p.endpoint.batch;
    } else {
        for (info, g) in record.endpoints.iter_mut().zip(&p.grid) {
            info.batch |= g.endpoint.batch;
        }
    }
}

/// Each endpoint that batches must have a batch API: asked (a list of its batches, which
/// costs nothing) before anything is sent, so `--batch` at a server without one is a clear
/// error, not a run of failed jobs.
async fn check_batch_apis(p: &Prepared, lanes: &[runner::Lane]) -> Result<(), Failure> {
    for (i, lane) in lanes.iter().enumerate().filter(|(_, l)| l.batch) {
        let api = lane.client.batches();
        let Err(e) = api.probe().await else { continue };
        let who = match p.grid.get(i) {
            Some(g) => format!("{} ({})", g.role(), lane.client.config().base_url),
            None => format!("the endpoint {}", lane.client.config().base_url),
        };
        let path = format!(
            "{}{}",
            lane.client.config().base_url.trim_end_matches('/'),
            api.api.path()
        );
        return Err(match e {
            crate::client::batch::BatchError::Http { status: 401 | 403, message } => {
                Failure::Provider(anyhow::anyhow!(
                    "{who} refused the key at its batch API (GET {path}): {message}"
                ))
            }
            crate::client::batch::BatchError::Http { status: 404 | 405, .. } => UsageError::with_fix(
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

/// What `--cache` keys an endpoint's answers on besides the request: its base URL as shown,
/// and — when they are not the defaults — its protocol and extra headers (another protocol
/// or a header that picks an adapter may answer differently). The key is hashed before it
/// is stored, so a header's value is never written.
/// Each lane's endpoint as the response cache keys it, in lane order; `base_url` is the
/// run's endpoint as recorded (a run of one endpoint).
fn lane_cache_keys(p: &Prepared, base_url: &str) -> Vec<String> {
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

/// `--budget --cache`: a test of whether the response cache (under `root`) holds a job's
/// answer, for the estimate to count it free; one that says no without `--cache`.
fn cached_answers(
    p: &Prepared,
    cache: bool,
    root: &Path,
    base_url: &str,
) -> Result<super::budget::CachedTest, Failure> {
    if !cache {
        return Ok(Box::new(|_, _| false));
    }
    let path = crate::client::Cache::path_under(root);
    let cache = crate::client::Cache::open(&path)
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
        move |job: &Job, messages: &[crate::client::ChatMessage]| {
            let lane = usize::from(job.endpoint);
            let (Some(endpoint), Some((model, params))) = (keys.get(lane), lanes.get(lane)) else {
                return false;
            };
            let key = crate::client::cache::key(
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

fn cache_key(shown_url: &str, e: &crate::cli::Endpoint) -> String {
    let mut key = shown_url.to_string();
    if !e.protocol.is_default() {
        key.push_str(&format!(" protocol={}", e.protocol));
    }
    for (name, value, _) in &e.headers {
        key.push_str(&format!(" {}={value}", name.to_ascii_lowercase()));
    }
    key
}

/// The lanes stop as one: the first's stop and drain reach the others, and any other's
/// stop (a refused key) reaches the first, and so every lane.
fn link_lanes(lanes: &[runner::Lane]) {
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

/// How the sending ended, and why the run stopped early (as run.json and the summary
/// say it), from what the client, the judge's client and the listeners saw.
fn ending_of(
    tally: &runner::RunTally,
    dispatch: &CancellationToken,
    (lanes, judge): (&[runner::Lane], Option<&crate::grade::judge::JudgeService>),
    (first, outage): (&FirstFailures, &Outage),
    dir: &RunDir,
    (batch_wait, budget): (Option<Duration>, Option<&runner::budget::Budget>),
) -> (Ending, Option<StopReason>) {
    let fatal = lanes
        .iter()
        .find_map(|l| l.client.fatal())
        .or_else(|| judge.and_then(|j| j.client.fatal()))
        .map(|f| StopReason::Refused(f.to_string()))
        .or_else(|| first.stopped.clone());
    let interrupted = dispatch.is_cancelled()
        && tally.journal_error.is_none()
        && first.stopped.is_none()
        && outage.stopped.is_none();
    // A batch lane stops on its own only when --batch-wait passed.
    let waited = batch_wait.filter(|_| {
        tally.batches_left > 0
            && !interrupted
            && fatal.is_none()
            && outage.stopped.is_none()
            && tally.journal_error.is_none()
    });
    // The budget stops the sending on its own only when nothing else did.
    let spent_out = budget.filter(|b| {
        b.reached()
            && tally.not_run > 0
            && !interrupted
            && fatal.is_none()
            && outage.stopped.is_none()
            && tally.journal_error.is_none()
    });
    let stopped = match (&tally.journal_error, &fatal, interrupted) {
        (Some(e), _, _) => Some(StopReason::journal_failed(&dir.journal_path(), e)),
        (None, Some(f), _) => Some(f.clone()),
        (None, None, true) => Some(StopReason::Interrupted),
        _ => outage
            .stopped
            .clone()
            .or_else(|| {
                waited.map(|w| {
                    StopReason::batches_running(
                        tally.not_run,
                        &humantime::format_duration(w).to_string(),
                    )
                })
            })
            .or_else(|| {
                spent_out.map(|b| {
                    let usd = |x| crate::report::usd(Some(x));
                    StopReason::budget(&usd(b.spent()), &usd(b.limit()), tally.not_run)
                })
            }),
    };
    let ending = if fatal.is_some() {
        Ending::Aborted
    } else if interrupted {
        Ending::Interrupted
    } else if outage.stopped.is_some() {
        Ending::Outage
    } else if tally.journal_error.is_some() {
        Ending::JournalFailed
    } else if waited.is_some() {
        Ending::BatchesRunning
    } else if spent_out.is_some() {
        Ending::BudgetReached
    } else {
        Ending::Finished
    };
    (ending, stopped)
}

/// Notes said before anything is sent: a key that is not set, repeats that measure little.
fn say_before_sending(p: &Prepared, provider: &ProviderInfo, quiet: bool) {
    let userinfo = p
        .endpoint
        .base_urls
        .iter()
        .any(|u| crate::client::secrets::redact_url(u) != *u);
    if !provider.simulated && p.endpoint.api_key.is_none() && !userinfo && !quiet {
        note!(
            "note: ${} is not set; sending no Authorization header (fine for most self-hosted servers)",
            p.endpoint.api_key_env
        );
    }
    if let Some(w) = p.greedy_repeats_warning().filter(|_| !quiet) {
        note!("warning: {w}");
    }
    if !quiet {
        for line in p.bench.programs_said() {
            note!("{line}");
        }
    }
}

/// The line that says what runs, against what, and where it is written.
fn say_what_runs(
    p: &Prepared,
    provider: &ProviderInfo,
    record: &RunRecord,
    dir: &RunDir,
    to_send: usize,
) {
    let verb = if record.resumed_at.is_empty() {
        "running"
    } else {
        "resuming:"
    };
    let (endpoints, against) = if p.grid.is_empty() {
        (String::new(), provider.base_url.clone())
    } else {
        (
            format!(
                " × {}",
                super::count(p.grid.len() as u64, "endpoint", "endpoints")
            ),
            p.endpoint_names().join(", "),
        )
    };
    note!(
        "{verb} {} of {} ({} × {}{endpoints} × {}) against {against}\n  writing {}",
        to_send,
        super::count(p.jobs.len() as u64, "job", "jobs"),
        super::count(p.bench.cases.len() as u64, "case", "cases"),
        super::count(p.variants.len() as u64, "variant", "variants"),
        super::count(p.bench.repeats, "repeat", "repeats"),
        dir.path().display()
    );
}

/// `--cache`: the response cache beside the run folders.
fn open_cache(
    cache: bool,
    dir: &RunDir,
    quiet: bool,
) -> Result<Option<Arc<std::sync::Mutex<crate::client::Cache>>>, Failure> {
    Ok(if cache {
        let root = dir.path().parent().unwrap_or(Path::new("."));
        let path = crate::client::Cache::path_under(root);
        let cache = crate::client::Cache::open(&path)
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

/// The built-in simulator, started when the run or its judge has no server (said loudly).
async fn start_simulator(
    p: &Prepared,
    record: &RunRecord,
    judge: Option<&super::judge::Judge>,
) -> Result<Option<MockServer>, Failure> {
    let judge_simulated = judge.as_ref().is_some_and(|j| j.base_urls.is_empty());
    let simulated = if p.grid.is_empty() {
        p.endpoint.base_urls.is_empty()
    } else {
        p.grid.iter().any(|g| g.endpoint.base_urls.is_empty())
    };
    Ok(if simulated || judge_simulated {
        if simulated {
            note!("{SIMULATED_BANNER}");
        } else {
            note!("note: the built-in SIMULATOR judges the answers (judge.base_url: mock)");
        }
        let mut config = demo_mock_config();
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

/// Where the run stands: the journal read once (its jobs heard by the aggregator) and
/// opened to append, the jobs still to send, and `--until-decided`'s stop flags and horizon.
struct Continued {
    agg: super::Figures,
    journal: crate::runner::Journal,
    jobs: Vec<Job>,
    /// Jobs of the plan the journal already holds.
    already: usize,
    /// `--retry-failed`: jobs sent again, by plan position, with their round.
    resend: HashMap<usize, u32>,
    stop: Option<crate::runner::sequential::StopFlags>,
    horizon: Option<crate::runner::sequential::Horizon>,
    /// Jobs per case (variants × repeats): plan positions are `job.index / per_case`.
    per_case: usize,
    /// `--batch`: the batches the journal holds, for the lanes to adopt.
    batches: Vec<crate::runner::batch::BatchRecord>,
    /// `--budget`: what the jobs in the journal cost (earlier sessions of the run).
    spent: f64,
}

/// The jobs still without a record that wait in batches the journal holds open (by plan
/// position), what those batches were held back for (`reserved_usd`, the share of their
/// jobs still waiting), and whether any batch holds such a job. A `custom_id` made from a
/// key too long for the API (a hash) names no job here: its job is estimated as one to
/// send, which errs on the side of the budget.
fn in_open_batches(continued: &Continued, run_id: &str) -> (HashSet<usize>, f64, bool) {
    let waiting: HashSet<usize> = continued.jobs.iter().map(|j| j.index).collect();
    let mut adopted = HashSet::new();
    let mut reserved = 0.0;
    // Any open batch may hold jobs the resume collects, named or hashed.
    let mut collecting = false;
    for b in crate::runner::batch::open_batches(&continued.batches) {
        collecting |= !waiting.is_empty() && !b.keys.is_empty();
        let jobs: Vec<usize> = b
            .keys
            .iter()
            .filter_map(|k| runner::job_of_key(k, run_id))
            .filter(|i| waiting.contains(i))
            .collect();
        if let Some(usd) = b.reserved_usd.filter(|_| !b.keys.is_empty()) {
            reserved += usd * jobs.len() as f64 / b.keys.len() as f64;
        }
        adopted.extend(jobs);
    }
    (adopted, reserved, collecting)
}

/// Reads the journal once, if it exists (the aggregator hears every job it holds), and
/// opens it to append; works out the jobs still to send.
fn continue_journal(
    p: &Prepared,
    args: &RunArgs,
    dir: &RunDir,
    record: &RunRecord,
    budget: Option<&crate::runner::budget::Prices>,
) -> Result<Continued, Failure> {
    let keys = record.plan_keys();
    let per_case = p.variants.len() * p.grid.len().max(1) * p.bench.repeats as usize;
    let until = UntilDecided::of(p, per_case);
    let mut agg = super::aggregator_with(dir, record, &args.outputs, until.live(p))?;
    if !args.store.no_store {
        agg.figures()
            .keep_rows(&record.bench.case_ids, Some(dir.store_spool()));
    }
    let mut spent = budget.map(|prices| (prices, 0.0));
    let (audit, journal) = replay_journal(
        p,
        args.retry_failed,
        dir,
        &keys,
        (&mut agg, &mut spent),
        &until,
    )?;
    let (jobs, resend) = jobs_left(p, &keys, &audit);
    if args.retry_failed.is_some() && !args.quiet {
        say_resending(args.retry_failed, resend.len());
    }
    Ok(Continued {
        agg,
        already: p.jobs.len() - jobs.len(),
        journal,
        jobs,
        resend,
        stop: until.stop,
        horizon: until.horizon,
        per_case,
        batches: audit.stats.batches.clone(),
        spent: spent.map_or(0.0, |(_, usd)| usd),
    })
}

/// What `--until-decided` shares with the workers and the journal while the run goes on.
struct UntilDecided {
    /// A decided variant's jobs are not sent (flags by bench variant).
    stop: Option<crate::runner::sequential::StopFlags>,
    /// None is sent far ahead of the cases the tests have seen.
    horizon: Option<crate::runner::sequential::Horizon>,
    /// The decisions the tests reach, for the journal to write.
    decisions: crate::runner::sequential::Decisions,
}

impl UntilDecided {
    /// `per_case` is the jobs per case (variants × repeats).
    fn of(p: &Prepared, per_case: usize) -> Self {
        let bench = &p.bench;
        let endpoints = p.grid.len().max(1);
        let stop = p.sequential.as_ref().map(|_| {
            Arc::new(
                (0..bench.variants.len() * endpoints)
                    .map(|_| std::sync::atomic::AtomicBool::new(false))
                    .collect(),
            )
        });
        let horizon = p.sequential.as_ref().map(|plan| {
            // Batches go out in waves of cases; streamed jobs a little ahead of the tests.
            let ahead = if p.batched() {
                plan.wave_cases()
            } else {
                p.gates().div_ceil(per_case.max(1)) + 1
            };
            crate::runner::sequential::Horizon::new(ahead)
        });
        UntilDecided {
            stop,
            horizon,
            decisions: Default::default(),
        }
    }

    /// What the live sequential tests use, when the run goes until decided.
    fn live(&self, p: &Prepared) -> Option<crate::runner::sequential::Live> {
        match (&self.stop, &self.horizon) {
            (Some(stop), Some(horizon)) => Some(crate::runner::sequential::Live {
                stop: stop.clone(),
                // Each arm's flag: its bench variant, endpoint by endpoint.
                bench_index: (0..p.grid.len().max(1))
                    .flat_map(|e| {
                        p.variants
                            .iter()
                            .map(move |&v| e * p.bench.variants.len() + v)
                    })
                    .collect(),
                horizon: horizon.clone(),
                decisions: self.decisions.clone(),
            }),
            _ => None,
        }
    }
}

/// Replays the journal into the aggregator and reopens it to append; says what the
/// replay found (a torn last line, anything odd). `--retry-failed`: the failed jobs it
/// picks are left open, to be sent again.
fn replay_journal(
    p: &Prepared,
    retry_failed: Option<crate::cli::RetryFailed>,
    dir: &RunDir,
    keys: &crate::runner::journal::PlanKeys,
    (agg, spent): (
        &mut super::Figures,
        &mut Option<(&crate::runner::budget::Prices, f64)>,
    ),
    until: &UntilDecided,
) -> Result<(crate::runner::journal::Audit, crate::runner::Journal), Failure> {
    let pick = |r: &crate::runner::JobRecord| match retry_failed {
        Some(crate::cli::RetryFailed::All) => true,
        Some(crate::cli::RetryFailed::Transient) => r.failed_transiently(),
        None => false,
    };
    let (audit, mut journal) = dir
        .resume_resending(keys, &pick, |r| {
            if let Some((prices, usd)) = spent.as_mut() {
                *usd += prices.billed(&r, lane_of(p, &r));
            }
            agg.add(&r)
        })
        .with_context(|| format!("cannot read the journal {}", dir.journal_path().display()))
        .before_send()?;
    agg.figures().note_audit(&audit);
    // A resume's replay reaches again the decisions the journal already holds (read in
    // the same pass): only those it lacks (the process stopped before writing them) are
    // written.
    if p.sequential.is_some() {
        let kept = &audit.stats.decided;
        if let Ok(mut queue) = until.decisions.lock() {
            queue.retain(|d| {
                !kept
                    .iter()
                    .any(|k| k.variant == d.variant && k.against == d.against)
            });
        }
        journal.keep_decisions(until.decisions.clone());
    }
    if audit.stats.torn_bytes > 0 {
        note!(
            "note: {} ended in a torn line ({} bytes, from a crash); it was not a finished job and was removed",
            dir.journal_path().display(),
            audit.stats.torn_bytes
        );
    }
    if let Some(found) = audit.findings() {
        note!("note: {}: {found}", dir.journal_path().display());
    }
    Ok((audit, journal))
}

/// `--budget` (or the budget the resumed run was started with): its limit and the prices
/// it holds jobs at, once every price it needs is known; a new run whose plan may cost
/// more is refused here, before its folder is made.
fn plan_budget(
    args: &RunArgs,
    resumed: Option<&RunRecord>,
    p: &Prepared,
    judge: Option<&super::judge::Judge>,
) -> Result<Option<(f64, runner::budget::Prices)>, Failure> {
    let Some(limit) = args
        .plan
        .budget
        .or_else(|| resumed.and_then(|r| r.budget_usd))
    else {
        if args.plan.run_to_budget {
            return Err(UsageError::with_fix(
                "--run-to-budget says what to do when the plan may cost more than the budget, and there is no budget",
                "add --budget USD, or drop --run-to-budget",
            )
            .into());
        }
        return Ok(None);
    };
    let prices = super::budget::prices(p, judge);
    // Answers the cache holds cost nothing (a fresh run's cache is under --out; a resume
    // weighs its own once its journal is read).
    let cached = cached_answers(
        p,
        args.cache && resumed.is_none(),
        &args.out,
        &super::budget::provider_info(p).base_url,
    )?;
    // The whole plan's estimate says whether scorers call models (as `check` reads it).
    let e = super::budget::estimate(p, &p.jobs, &prices, &*cached)?;
    super::budget::check_priced(p, &prices, e.judge_unpriced)?;
    if resumed.is_none() {
        let line = super::budget::check_estimate(&e, limit, 0.0, args.plan.run_to_budget)?;
        if !args.quiet {
            note!("{line}");
        }
    }
    Ok(Some((limit, prices)))
}

/// The lane (endpoint) a job's record was answered at: its position among the run's
/// endpoints, the first when the run has one.
fn lane_of(p: &Prepared, r: &crate::runner::JobRecord) -> usize {
    r.endpoint
        .as_deref()
        .and_then(|name| p.grid.iter().position(|g| g.name() == name))
        .unwrap_or(0)
}

/// The plan's jobs the journal does not hold as done, and of those the ones sent again
/// (`--retry-failed`), by plan position, with their round.
fn jobs_left(
    p: &Prepared,
    keys: &crate::runner::journal::PlanKeys,
    audit: &crate::runner::journal::Audit,
) -> (Vec<Job>, HashMap<usize, u32>) {
    let slot = |j: &Job| keys.slot(&p.bench.cases[j.case].id, &p.arm_name(j), j.repeat);
    let jobs: Vec<Job> = p
        .jobs
        .iter()
        .filter(|j| slot(j).is_none_or(|slot| !audit.done[slot]))
        .copied()
        .collect();
    let rounds: HashMap<usize, u32> = audit.to_resend.iter().copied().collect();
    let resend = jobs
        .iter()
        .filter_map(|j| rounds.get(&slot(j)?).map(|&round| (j.index, round)))
        .collect();
    (jobs, resend)
}

/// `--retry-failed`: how many failed jobs are sent again, and which.
fn say_resending(retry_failed: Option<crate::cli::RetryFailed>, resent: usize) {
    note!(
        "sending again {} that failed ({}); their failures stay in the journal",
        super::count(resent as u64, "job", "jobs"),
        match retry_failed {
            Some(crate::cli::RetryFailed::All) => "all of them",
            _ =>
                "those a server outage, overload or timeout failed; --retry-failed all sends every one",
        }
    );
}

/// A resume may not move an endpoint whose batches are still open at the provider: they
/// are collected where they were submitted (elsewhere they could not be, and their jobs
/// would be paid for again).
fn check_batches_stay(
    dir: &RunDir,
    record: &RunRecord,
    provider: &ProviderInfo,
    grid: &[ProviderInfo],
) -> Result<(), Failure> {
    let moved: Vec<(Option<String>, String, String)> = if record.endpoints.is_empty() {
        vec![(
            None,
            record.endpoint.base_url.clone(),
            provider.base_url.clone(),
        )]
    } else {
        record
            .endpoints
            .iter()
            .filter_map(|was| {
                let now = grid.iter().find(|g| g.endpoint == was.endpoint)?;
                Some((
                    was.endpoint.clone(),
                    was.base_url.clone(),
                    now.base_url.clone(),
                ))
            })
            .collect()
    };
    let moved: Vec<_> = moved
        .into_iter()
        .filter(|(_, was, now)| was != now)
        .collect();
    if moved.is_empty() || !dir.journal_path().exists() {
        return Ok(());
    }
    let stats = crate::runner::journal::read(&dir.journal_path(), |_| {})
        .with_context(|| format!("cannot read the journal {}", dir.journal_path().display()))
        .before_send()?;
    for (endpoint, was, now) in moved {
        let open: Vec<&str> = crate::runner::batch::open_batches(&stats.batches)
            .filter(|b| b.endpoint == endpoint)
            .map(|b| b.name.as_str())
            .collect();
        if open.is_empty() {
            continue;
        }
        let who = endpoint.map_or_else(|| "the run".to_string(), |e| format!("endpoint {e}"));
        return Err(UsageError::with_fix(
            format!(
                "{who} has {} still open at {was}: a resume at {now} could not collect {}, and would pay for {} jobs again; nothing was sent",
                super::count(open.len() as u64, "batch", "batches"),
                if open.len() == 1 { "it" } else { "them" },
                if open.len() == 1 { "its" } else { "their" },
            ),
            format!(
                "resume where the batches were submitted (without --base-url or --endpoint for {who}); once they have ended, a later resume may move"
            ),
        )
        .into());
    }
    Ok(())
}

/// The run's folder and record: a resumed run's, brought up to date, or a new one (its
/// record not written yet: that waits until the client is built).
fn open_folder(
    resumed: Option<(RunDir, RunRecord, crate::runner::lock::RunLock)>,
    p: &Prepared,
    args: &RunArgs,
    env: &Env,
    (provider, judge_info): (&ProviderInfo, Option<&ProviderInfo>),
    store: &Result<crate::store::Location, UsageError>,
) -> Result<(RunDir, RunRecord, crate::runner::lock::RunLock), Failure> {
    Ok(match resumed {
        Some((dir, mut record, lock)) => {
            check_resumable(&record, p, provider)?;
            check_batches_stay(&dir, &record, provider, &grid_infos(p))?;
            record.resumed_at.push(utc_now());
            record.finished_at = None;
            record.stopped = None;
            record.endpoint = provider.clone();
            record.endpoints = grid_infos(p);
            record.judge = judge_info.cloned();
            record.allowed_failures = args.gates.allow_failures;
            (dir, record, lock)
        }
        None => {
            let started_at = utc_now();
            let name = match args.plan.shard {
                Some(s) => format!("{}-shard{}of{}", p.bench.name, s.index, s.count),
                None => p.bench.name.clone(),
            };
            let dir = RunDir::create(&args.out, &name, &started_at).map_err(|e| {
                if e.permission_denied() {
                    // The usual cause: a container's user in a folder mounted from the host.
                    Failure::from(UsageError::with_fix(
                        e.to_string(),
                        "write the reports where you may (--out DIR); in Docker, run as your own user so the mounted folder is writable: docker run --user \"$(id -u):$(id -g)\" -v \"$PWD:/work\" …",
                    ))
                } else {
                    Failure::Input(e.into())
                }
            })?;
            let lock = dir.lock().map_err(in_use)?;
            let mut record = new_record(p, &dir, args, started_at, provider.clone());
            record.judge = judge_info.cloned();
            let bench_dir = record.bench_path.parent().unwrap_or(Path::new("."));
            record.source = super::source::capture(bench_dir, env);
            record.store = match (&store, args.store.no_store) {
                (Ok(location), false) => Some(stored_as(location)),
                _ => None,
            };
            (dir, record, lock)
        }
    })
}

/// One look at the server before the first job: a dead server, a refused key or an
/// unlisted model is said now, not after every job has spent its retries. A dead replica
/// among live ones is benched, not fatal: returned with why. `None` when a signal came
/// first (nothing was sent).
async fn look_at_server(
    p: &Prepared,
    judge: Option<&super::judge::Judge>,
    quiet: bool,
    signals: &mut Signals,
) -> Result<Option<Vec<Vec<(usize, String)>>>, Failure> {
    let (endpoints, judge) = super::preflight::looks(p, judge);
    let nothing = vec![Vec::new(); endpoints.len()];
    if endpoints.iter().all(Option::is_none) && judge.is_none() {
        return Ok(Some(nothing));
    }
    let checking = async {
        let (runs, judged) = tokio::join!(
            futures_util::future::join_all(endpoints.into_iter().map(super::preflight::check_if)),
            super::preflight::check_if(judge)
        );
        (runs, judged)
    };
    // Ctrl-C or SIGTERM while the server is being looked at: nothing was sent, and the
    // run says so (the signal watcher proper starts with the first job).
    let (runs, judged) = tokio::select! {
        pre = checking => pre,
        why = signals.next() => {
            note!("{why} during the preflight: nothing was sent");
            return Ok(None);
        }
    };
    let mut dead = Vec::with_capacity(runs.len());
    let mut judged = Some(judged);
    for (i, run) in runs.into_iter().enumerate() {
        // The judge's findings are said once, with the first endpoint's.
        let pre = super::preflight::Preflight::both(run, judged.take().unwrap_or_default());
        for w in pre.warnings.iter().filter(|_| !quiet) {
            note!("warning: {w}");
        }
        if let Some(why) = pre.stop {
            return Err(Failure::Provider(anyhow::anyhow!(why)));
        }
        let urls = p
            .grid
            .get(i)
            .map_or(&p.endpoint.base_urls, |g| &g.endpoint.base_urls);
        let live = urls.len() - pre.dead.len();
        for (_, why) in pre.dead.iter().filter(|_| !quiet) {
            note!(
                "warning: replica {why}: benched; jobs go to the {} that answered, and it is tried again when its rest ends",
                super::count(live as u64, "replica", "replicas")
            );
        }
        dead.push(pre.dead);
    }
    Ok(Some(dead))
}

/// Flags a resume cannot take: another protocol, another judge or endpoint,
/// `--retry-failed` on a run `--until-decided`, another `--max-drop` than its plan's.
fn check_resume_flags(args: &RunArgs, dir: &RunDir, record: &RunRecord) -> Result<(), Failure> {
    check_same_judge(&args.plan, record)?;
    check_same_endpoint(&args.plan, record)?;
    if args.retry_failed.is_some() && record.plan.sequential.is_some() {
        return Err(UsageError::with_fix(
            "--retry-failed cannot resume a run --until-decided: its sequential tests have already seen which jobs failed, and a resend would change what they tested",
            "resume without --retry-failed, or start a new run",
        )
        .into());
    }
    // The answers of one run come through one protocol.
    if let Some(asked) = args.plan.protocol
        && asked != record.endpoint.protocol
    {
        return Err(UsageError::with_fix(
            format!(
                "{} was answered through the {} protocol, not {asked}: one run's answers come through one protocol",
                dir.path().display(),
                record.endpoint.protocol
            ),
            "resume without --protocol, or start a new run to measure the other protocol",
        )
        .into());
    }
    if let Some(plan) = &record.plan.sequential {
        // The drop check ran (or not) at the plan's --max-drop from the first case; another
        // value could be checked only over the cases already fed, and never settled by going on.
        let asked = args.gates.max_drop.map(|p| p / 100.0);
        if asked.is_some() && asked != plan.max_drop {
            let was = plan.max_drop.map_or("without --max-drop".to_string(), |m| {
                format!("with --max-drop {}", m * 100.0)
            });
            return Err(UsageError::with_fix(
                format!(
                    "{} ran --until-decided {was}: its sequential drop check is part of the plan, and another --max-drop cannot be checked by going on",
                    dir.path().display()
                ),
                "resume with the run's own --max-drop (or none), or start a new run",
            )
            .into());
        }
    }
    Ok(())
}

/// The store as run.json remembers it: a SQLite file by its absolute path, a PostgreSQL
/// URL without its password.
fn stored_as(location: &crate::store::Location) -> String {
    match location {
        crate::store::Location::Sqlite(p) => std::path::absolute(p)
            .unwrap_or_else(|_| p.clone())
            .display()
            .to_string(),
        crate::store::Location::Postgres(_) => location.shown(),
    }
}

/// The store a run was first recorded in, when a resume can record there again: a SQLite
/// file. A PostgreSQL store's password was not kept: the resume says how to name it.
fn recorded_store(record: &RunRecord) -> Option<crate::store::Location> {
    let text = record.store.as_deref()?;
    match crate::store::Location::parse(text) {
        Ok(crate::store::Location::Sqlite(p)) => Some(crate::store::Location::Sqlite(p)),
        _ => {
            note!(
                "note: this run was recorded in {text}; pass --store URL (or set $PROMPTGAUGE_STORE) to record the resumed run there too"
            );
            None
        }
    }
}

/// The run `--baseline NAME` means (`None` without the flag), found and checked before
/// anything is sent: it must be readable and measured at this run's confidence level.
pub(super) async fn baseline_of(
    name: Option<&str>,
    bench: &str,
    confidence: f64,
    store: &Result<crate::store::Location, UsageError>,
) -> Result<Option<super::baseline::Reference>, Failure> {
    use super::baseline::Reference;
    let Some(name) = name else {
        return Ok(None);
    };
    let what = "--baseline";
    let reference = super::baseline::resolve(name, Some(bench), store, what).await?;
    let earlier = match &reference {
        Reference::Folder(path) => {
            let dir = RunDir::at(path);
            let _reading = dir.read_lock().map_err(|e| UsageError(e.to_string()))?;
            dir.read_record()
                .map_err(|e| {
                    UsageError::with_fix(
                        format!("{what}: {e:#}"),
                        "name the folder of an earlier run of this bench",
                    )
                })?
                .bench
                .confidence
        }
        Reference::Stored { run, .. } => run.confidence,
    };
    if (earlier - confidence).abs() > 1e-12 {
        return Err(UsageError::with_fix(
            format!(
                "{what} {} was run at {}% confidence and this bench is at {}%: a comparison needs one level",
                reference.shown(),
                earlier * 100.0,
                confidence * 100.0
            ),
            format!(
                "set `confidence: {earlier}` in the bench, or compare later with `promptgauge compare --confidence`"
            ),
        )
        .into());
    }
    Ok(Some(reference))
}

/// Says each provider batch's submission and end on stderr.
struct BatchNotes;

impl Listener for BatchNotes {
    fn on(&mut self, event: &runner::RunEvent<'_>) -> std::io::Result<()> {
        use crate::runner::batch::BatchStep;
        let runner::RunEvent::Batch(b) = event else {
            return Ok(());
        };
        let id = crate::report::visible(b.id.as_deref().unwrap_or(&b.name), 80);
        let at = b
            .endpoint
            .as_ref()
            .map(|e| format!(" at endpoint {e}"))
            .unwrap_or_default();
        match b.step {
            BatchStep::Submitted => note!("batch {id}{at}: submitted"),
            BatchStep::Ended => {
                let [done, failed, total] = b.counts.unwrap_or_default();
                let status = crate::report::visible(b.status.as_deref().unwrap_or(""), 40);
                note!("batch {id}{at}: {status}, {done} of {total} answered, {failed} failed");
            }
            BatchStep::Left => {
                note!("batch {id}{at}: still running when --batch-wait passed; left for a resume")
            }
            BatchStep::Disowned => note!(
                "batch {id}{at}: found by its size and time, but its results are not this run's; its jobs are submitted again"
            ),
            BatchStep::Polled | BatchStep::Submitting => {}
        }
        Ok(())
    }
}

/// How a job's error begins when its `command` scorer failed it.
const COMMAND_SCORER_FAILED: &str = "could not be scored: the scorer `";

/// Stops a run whose first jobs all failed the same way for a reason waiting will not
/// cure (a 4xx other than 408/429: a wrong model, a wrong path, a bad parameter; a
/// `command` scorer that fails every answer alike): the rest would fail the same way, at
/// the same cost in time (and, for the scorer, in answers paid for and thrown away).
struct FirstFailures {
    watch: usize,
    seen: Vec<(Option<u16>, String)>,
    dispatch: tokio_util::sync::CancellationToken,
    stopped: Option<StopReason>,
}

impl FirstFailures {
    fn new(watch: usize, dispatch: tokio_util::sync::CancellationToken) -> Self {
        FirstFailures {
            watch,
            seen: Vec::new(),
            dispatch,
            stopped: None,
        }
    }
}

impl Listener for FirstFailures {
    fn on(&mut self, event: &runner::RunEvent<'_>) -> std::io::Result<()> {
        let runner::RunEvent::JobFinished { record, .. } = event else {
            return Ok(());
        };
        // A batch's results come all at once, long after it was sent: its own failures
        // (a refused batch, an expired one) are said with it.
        if record.batch.is_some() {
            return Ok(());
        }
        if self.seen.len() >= self.watch || self.stopped.is_some() {
            return Ok(());
        }
        let status = record.failure_status();
        // A scorer of the bench's own that cannot score (a `command` that crashes at
        // start) fails every answer after it was paid for.
        let scorer_broken = record.error_line().starts_with(COMMAND_SCORER_FAILED);
        let lasting = scorer_broken
            || matches!(status, Some(s) if (400..500).contains(&s) && s != 408 && s != 429);
        if record.status != crate::runner::journal::JobStatus::Failed || !lasting {
            // One job that got through (or failed for a passing reason) ends the watch.
            self.watch = 0;
            return Ok(());
        }
        self.seen.push((status, record.error_line().to_string()));
        if self.seen.len() == self.watch && self.seen.iter().all(|c| *c == self.seen[0]) {
            let (status, cause) = &self.seen[0];
            let hint = crate::report::causes::hint(*status, cause)
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            self.stopped = Some(StopReason::Refused(format!(
                "the first {} jobs all failed the same way, so the rest were not sent: {cause}{hint}",
                self.watch
            )));
            self.dispatch.cancel();
        }
        Ok(())
    }
}

/// How close together the failures that stop a run as an outage must be.
const OUTAGE_SPAN: Duration = Duration::from_secs(120);

/// Stops sending when the server looks down: of the last `window` jobs, at least four in
/// five failed the same passing way (the same 5xx, no connection, the same timeout) within
/// [`OUTAGE_SPAN`]. Otherwise every remaining job would spend its attempts in seconds and
/// be final; stopped, they are sent by `--resume --retry-failed` once the server is back.
/// With one endpoint the whole run stops; in a run of several, each endpoint is watched
/// over its own latest jobs and only its lane stops (the others go on).
struct Outage {
    /// Per endpoint (one, unnamed, with one endpoint): its window of latest jobs.
    watched: Vec<Watched>,
    /// Each outage seen, as said.
    whys: Vec<String>,
    stopped: Option<StopReason>,
}

/// One endpoint's latest jobs, and what stops its sending.
struct Watched {
    /// Its name in records (`None`: the run's one endpoint).
    endpoint: Option<String>,
    window: usize,
    /// The last jobs: each a transient failure's (signature, when, cause), or `None`.
    recent: std::collections::VecDeque<Option<(String, tokio::time::Instant, String)>>,
    dispatch: CancellationToken,
    stopped: bool,
}

impl Outage {
    fn new(window: usize, dispatch: CancellationToken) -> Self {
        Outage {
            watched: vec![Watched::new(None, window, dispatch)],
            whys: Vec::new(),
            stopped: None,
        }
    }

    /// Each endpoint by its name, with its window and its lane's dispatch token.
    fn per_endpoint(endpoints: Vec<(String, usize, CancellationToken)>) -> Self {
        Outage {
            watched: endpoints
                .into_iter()
                .map(|(name, window, dispatch)| Watched::new(Some(name), window, dispatch))
                .collect(),
            whys: Vec::new(),
            stopped: None,
        }
    }
}

impl Watched {
    fn new(endpoint: Option<String>, window: usize, dispatch: CancellationToken) -> Self {
        Watched {
            endpoint,
            window,
            recent: std::collections::VecDeque::new(),
            dispatch,
            stopped: false,
        }
    }

    /// Hears one of its jobs; says why it stopped, when this job showed an outage.
    fn hear(&mut self, record: &crate::runner::JobRecord) -> Option<String> {
        let entry = record.failed_transiently().then(|| {
            let (outcome, status) = record.failure_outcome();
            let signature = format!("{status:?}/{}", outcome.map_or("", |o| o.as_str()));
            (
                signature,
                tokio::time::Instant::now(),
                record.error_line().to_string(),
            )
        });
        self.recent.push_back(entry);
        if self.recent.len() > self.window {
            self.recent.pop_front();
        }
        if self.recent.len() < self.window {
            return None;
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (sig, _, _) in self.recent.iter().flatten() {
            *counts.entry(sig.as_str()).or_default() += 1;
        }
        let (sig, n) = counts.into_iter().max_by_key(|(_, n)| *n)?;
        if 5 * n < 4 * self.window {
            return None;
        }
        let same: Vec<&(String, tokio::time::Instant, String)> = self
            .recent
            .iter()
            .flatten()
            .filter(|(s, _, _)| s == sig)
            .collect();
        let (first, last) = (same[0].1, same[same.len() - 1].1);
        let span = last.duration_since(first);
        if span > OUTAGE_SPAN {
            return None;
        }
        let cause = same[same.len() - 1].2.clone();
        self.stopped = true;
        self.dispatch.cancel();
        Some(match &self.endpoint {
            None => format!(
                "{n} of the last {} jobs failed the same way within {:.0} s, so the rest were not sent: {cause}",
                self.window,
                span.as_secs_f64().ceil()
            ),
            Some(name) => format!(
                "endpoint {name}: {n} of its last {} jobs failed the same way within {:.0} s, so its other jobs were not sent (the other endpoints' were): {cause}",
                self.window,
                span.as_secs_f64().ceil()
            ),
        })
    }
}

impl Listener for Outage {
    fn on(&mut self, event: &runner::RunEvent<'_>) -> std::io::Result<()> {
        let runner::RunEvent::JobFinished { record, .. } = event else {
            return Ok(());
        };
        if record.cached || record.batch.is_some() {
            return Ok(());
        }
        let Some(watched) = self
            .watched
            .iter_mut()
            .find(|w| w.endpoint == record.endpoint)
        else {
            return Ok(());
        };
        if watched.stopped {
            return Ok(());
        }
        if let Some(why) = watched.hear(record) {
            // Each endpoint's outage is said, the first first.
            self.whys.push(why);
            self.stopped = Some(StopReason::outage(self.whys.join("; ")));
        }
        Ok(())
    }
}

/// Every gate asked for must be one the run can evaluate: known before anything is sent.
fn check_gates(p: &Prepared, gates: &crate::cli::GateArgs) -> Result<(), UsageError> {
    let priced = p.bench.price.is_some() || p.grid.iter().any(|g| g.price.is_some());
    let unpriced = p.unpriced();
    if gates.max_cost.is_some() && priced && !unpriced.is_empty() {
        return Err(UsageError::with_fix(
            format!(
                "--max-cost needs the whole run's cost, and {} no price",
                match unpriced.as_slice() {
                    [one] => format!("endpoint {one} has"),
                    many => format!("endpoints {} have", many.join(", ")),
                }
            ),
            "add `price:` to each endpoint (or to the bench, for those without their own), or drop --max-cost",
        ));
    }
    if gates.max_cost.is_some() && !priced {
        return Err(UsageError::with_fix(
            "--max-cost needs the cost, and the bench has no `price`",
            "add `price: { input_per_mtok: …, output_per_mtok: … }` (USD per million tokens) to the bench, or drop --max-cost",
        ));
    }
    let names = p.variant_names();
    let endpoints = p.endpoint_names();
    // In a run of several endpoints a gate may name a cell, a variant or an endpoint.
    let arms = crate::suite::plan::arm_names(&names, &endpoints);
    for min in &gates.min_accuracy {
        if let Some(v) = &min.variant
            && !names.contains(v)
            && !arms.contains(v)
            && !endpoints.contains(v)
        {
            return Err(UsageError::with_fix(
                format!("--min-accuracy names `{v}`, which is not a variant of this run"),
                if endpoints.is_empty() {
                    format!("variants: {}", names.join(", "))
                } else {
                    format!(
                        "name a variant ({}), an endpoint ({}) or one of them at one endpoint (e.g. {})",
                        names.join(", "),
                        endpoints.join(", "),
                        arms.last().map_or("", String::as_str)
                    )
                },
            ));
        }
    }
    let compared = arms.len() > 1 || gates.baseline.is_some();
    for (flag, asked) in [
        ("--max-drop", gates.max_drop.is_some()),
        ("--fail-if-worse", gates.fail_if_worse),
    ] {
        if asked && !compared {
            return Err(UsageError::with_fix(
                format!("{flag} compares variants with the baseline, and this run has one variant"),
                "run two or more variants (the first is the baseline), or give --baseline RUN_DIR",
            ));
        }
    }
    Ok(())
}

/// A baseline run that shares no cell with this run could never be compared: refused
/// before anything is bought (a run of several endpoints names its cells
/// `ENDPOINT/VARIANT`; a run of one names its variants).
fn check_baseline_pairs(
    p: &Prepared,
    baseline: Option<&super::baseline::Reference>,
) -> Result<(), UsageError> {
    let Some((b, theirs)) = baseline.and_then(|b| Some((b, b.arms()?))) else {
        return Ok(());
    };
    let ours = crate::suite::plan::arm_names(&p.variant_names(), &p.endpoint_names());
    if ours.iter().any(|a| theirs.contains(a)) {
        return Ok(());
    }
    let grid = |arms: &[String]| arms.iter().any(|a| a.contains('/'));
    Err(UsageError::with_fix(
        format!(
            "--baseline {} measured {}; this run measures {}: no variant of one is a variant of the other, so nothing could be compared",
            b.shown(),
            theirs.join(", "),
            ours.join(", ")
        ),
        if grid(&theirs) != grid(&ours) {
            "a run of several endpoints names its variants ENDPOINT/VARIANT: compare it with a run of the same endpoints (or a run of one endpoint with another of one endpoint)"
        } else {
            "name a baseline run of the same bench and variants"
        },
    ))
}

/// Tells the built-in simulator the case behind each job's idempotency key, so it can
/// answer any bench in the shape its scorer expects (and the run stays marked simulated).
fn oracle(p: &Prepared, run_id: &str) -> crate::mock::answers::Oracle {
    use crate::mock::answers::{Hint, Oracle};
    let bench = p.bench.clone();
    let mut case_of = vec![usize::MAX; p.jobs.iter().map(|j| j.index + 1).max().unwrap_or(0)];
    for j in &p.jobs {
        case_of[j.index] = j.case;
    }
    let others: Arc<Vec<String>> = Arc::new(
        bench
            .cases
            .iter()
            .filter_map(|c| c.expected.first().cloned())
            .collect(),
    );
    let prefix = format!("pg-{run_id}-");
    Oracle(Arc::new(move |key: &str| {
        // Judge calls (`…-judge-0`) are answered from their prompt, not from the case.
        // A resend's key ends `-resendN`; a judge call's (`…-judge-0`) is not a job's.
        let rest = key.strip_prefix(prefix.as_str())?;
        let index = match rest.split_once("-resend") {
            Some((i, round)) if round.bytes().all(|b| b.is_ascii_digit()) => i,
            _ => rest,
        };
        let index: usize = index.parse().ok()?;
        let case = bench.cases.get(*case_of.get(index)?)?;
        Some(Hint {
            case: case.id.clone(),
            expected: case.expected.clone(),
            expected_json: case.expected_json.clone(),
            shape: crate::grade::SpecExt::shape(case.grade.as_ref().unwrap_or(&bench.grade)),
            others: others.clone(),
        })
    }))
}

/// A resume keeps the plan it started with, the endpoint and model it was answered by
/// unless a flag says otherwise, and its judge (where and with which model it judged,
/// whatever the bench or --base-url now say); only where and how fast to send may change.
fn resumed_plan(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    if !record.plan.endpoints.is_empty() {
        return resumed_grid(flags, record);
    }
    let e = &record.endpoint;
    // Credentials are never stored: such a URL must come from the flags or the
    // environment again.
    let recorded_urls = e.recorded_urls();
    let usable = recorded_urls.is_some();
    let recorded_urls = recorded_urls.unwrap_or_default();
    PlanArgs {
        base_url: if !flags.base_url.is_empty() || !usable {
            flags.base_url.clone()
        } else {
            recorded_urls
        },
        model: flags.model.clone().or_else(|| Some(e.model.clone())),
        protocol: Some(e.protocol),
        endpoints: e
            .endpoint
            .clone()
            .map_or_else(|| flags.endpoints.clone(), |n| vec![n]),
        // A batched run's rest goes by batch too (its submitted batches are adopted).
        batch: flags.batch || e.batch,
        ..kept_plan(flags, record)
    }
}

/// What a resume keeps whatever its flags say: the bench (unless named again), the plan
/// and the judge.
fn kept_plan(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    PlanArgs {
        bench: Some(
            flags
                .bench
                .clone()
                .unwrap_or_else(|| record.bench_path.clone()),
        ),
        limit: record.plan.limit,
        variants: record.plan.variants.clone(),
        repeats: Some(record.plan.repeats),
        shard: record.plan.shard,
        until_decided: record.plan.sequential.is_some(),
        sequential: record.plan.sequential.clone(),
        seed: record.plan.order_seed,
        order_kept: true,
        ..judged_as_before(flags, record)
    }
}

/// [`resumed_plan`] of a run of several endpoints: the same endpoints, in the same order,
/// each where and with the model and protocol it was answered by (`--endpoint NAME=URL`
/// may move one, as when the run started; its price, parameters and limits stay the
/// bench's).
fn resumed_grid(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    let recorded = record.endpoints.iter().filter_map(|e| {
        let name = e.endpoint.clone()?;
        // Credentials are never stored: such an endpoint is found in the bench again.
        let urls = e.recorded_urls()?;
        Some(crate::suite::endpoints::AdHocEndpoint {
            name,
            spec: crate::suite::EndpointSpec {
                base_url: Some(match urls.len() {
                    1 => crate::suite::UrlList::One(urls[0].clone()),
                    _ => crate::suite::UrlList::Many(urls),
                }),
                model: Some(e.model.clone()),
                api_key_env: e.api_key_env.clone(),
                protocol: Some(e.protocol),
                key_header: None,
                batch: e.batch.then_some(true),
            },
        })
    });
    PlanArgs {
        endpoints: record.plan.endpoints.clone(),
        endpoint: recorded.chain(flags.endpoint.iter().cloned()).collect(),
        ..kept_plan(flags, record)
    }
}

/// A resume keeps the run's judge: a flag naming another model, protocol or server is
/// refused (half the run would be graded by one judge, half by another).
fn check_same_judge(flags: &PlanArgs, record: &RunRecord) -> Result<(), Failure> {
    let Some(j) = &record.judge else {
        return Ok(());
    };
    let same_url = |u: &str| {
        if u == "mock" {
            return j.simulated;
        }
        let shown = crate::client::secrets::redact_url(u);
        let shown = shown.trim_end_matches('/');
        !j.simulated
            && (j.base_url.trim_end_matches('/') == shown
                || j.replicas.iter().any(|r| r.trim_end_matches('/') == shown)
                || j.base_url
                    .split(", ")
                    .any(|r| r.trim_end_matches('/') == shown))
    };
    let other = flags.judge_model.as_ref().is_some_and(|m| *m != j.model)
        || flags.judge_protocol.is_some_and(|p| p != j.protocol)
        || flags
            .judge_base_url
            .as_deref()
            .is_some_and(|u| !same_url(u));
    if other {
        return Err(UsageError::with_fix(
            format!(
                "a resume keeps the run's judge ({} at {}): the --judge-* flags cannot name another",
                j.model, j.base_url
            ),
            "resume without them (--judge-key-env may change: the key, not the judge), or start a new run",
        )
        .into());
    }
    Ok(())
}

/// A resume runs on the run's endpoint: `--endpoints` or `--endpoint` naming another is
/// refused.
fn check_same_endpoint(flags: &PlanArgs, record: &RunRecord) -> Result<(), Failure> {
    let recorded: Vec<&str> = if record.plan.endpoints.is_empty() {
        record.endpoint.endpoint.as_deref().into_iter().collect()
    } else {
        record.plan.endpoints.iter().map(String::as_str).collect()
    };
    let named = flags
        .endpoints
        .iter()
        .map(String::as_str)
        .chain(flags.endpoint.iter().map(|e| e.name.as_str()));
    for name in named {
        if !recorded.contains(&name.trim()) {
            return Err(UsageError::with_fix(
                format!(
                    "a resume runs on the run's {} ({}): --endpoints and --endpoint cannot name `{name}`",
                    if recorded.len() > 1 {
                        "endpoints"
                    } else {
                        "endpoint"
                    },
                    if recorded.is_empty() {
                        "the bench's `endpoint:`".to_string()
                    } else {
                        recorded.join(", ")
                    }
                ),
                "resume without them, or start a new run on that endpoint",
            )
            .into());
        }
    }
    // A run of several endpoints resumes on all of them, in their order (the first is
    // the baseline): --endpoints cannot narrow or reorder it.
    if record.plan.endpoints.len() > 1
        && !flags.endpoints.is_empty()
        && !flags.endpoints.iter().map(|n| n.trim()).eq(record
            .plan
            .endpoints
            .iter()
            .map(String::as_str))
    {
        return Err(UsageError::with_fix(
            format!(
                "a resume runs on every endpoint of the run, in its order ({}): --endpoints cannot leave some out or reorder them",
                recorded.join(", ")
            ),
            "resume without --endpoints",
        )
        .into());
    }
    Ok(())
}

/// The `--judge-*` flags of a resume: the run's own judge where a flag does not say
/// otherwise (a judge that moved would grade half the run differently).
fn judged_as_before(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    let Some(j) = &record.judge else {
        return flags.clone();
    };
    let url = if j.simulated {
        Some("mock".to_string())
    } else if j.base_url == record.endpoint.base_url {
        // It judged at the run's endpoint (its replicas too): it still does.
        None
    } else {
        // Credentials are never stored: such a URL must come from the flags again.
        Some(j.base_url.clone()).filter(|u| !u.contains(crate::client::secrets::REDACTED))
    };
    PlanArgs {
        judge_base_url: flags.judge_base_url.clone().or(url),
        judge_model: flags.judge_model.clone().or_else(|| Some(j.model.clone())),
        judge_key_env: flags
            .judge_key_env
            .clone()
            .or_else(|| j.api_key_env.clone()),
        judge_protocol: flags.judge_protocol.or(Some(j.protocol)),
        ..flags.clone()
    }
}

/// Each endpoint of a run of several, with its price, as run.json records them.
fn grid_infos(p: &Prepared) -> Vec<ProviderInfo> {
    p.grid
        .iter()
        .map(|g| ProviderInfo {
            price: g.price.clone(),
            ..super::budget::endpoint_info(&g.endpoint)
        })
        .collect()
}

fn new_record(
    p: &Prepared,
    dir: &RunDir,
    args: &RunArgs,
    started_at: String,
    endpoint: ProviderInfo,
) -> RunRecord {
    let bench = &p.bench;
    RunRecord {
        tool: Tool::promptgauge(),
        run_id: dir.new_run_id("run"),
        started_at,
        started_unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as i64),
        finished_at: None,
        stopped: None,
        resumed_at: Vec::new(),
        bench_path: std::fs::canonicalize(&bench.path).unwrap_or_else(|_| bench.path.clone()),
        plan: PlanSettings {
            limit: args.plan.limit,
            variants: p.variant_names(),
            repeats: bench.repeats,
            shard: args.plan.shard,
            sequential: p.sequential.clone(),
            endpoints: p.endpoint_names(),
            order_seed: p.order_seed,
        },
        fingerprint: Fingerprint::of(bench, &p.variants),
        jobs_planned: p.jobs.len(),
        endpoint,
        endpoints: grid_infos(p),
        judge: None,
        bench: BenchRecord::of(bench, &p.variants),
        source: None,
        store: None,
        merged_from: Vec::new(),
        allowed_failures: args.gates.allow_failures,
        budget_usd: args.plan.budget,
    }
}

/// Refuses to resume when the bench no longer measures what the run started measuring.
fn check_resumable(
    record: &RunRecord,
    p: &Prepared,
    provider: &ProviderInfo,
) -> Result<(), UsageError> {
    let now = Fingerprint::of(&p.bench, &p.variants);
    let was = &record.fingerprint;
    let changed = if now.cases != was.cases {
        Some("its cases (ids, variables, expected answers, graders or tags)")
    } else if now.variants != was.variants {
        Some("its variants (names, messages or parameters)")
    } else if now.settings != was.settings {
        Some("its request parameters, default grader or repeats")
    } else {
        None
    };
    if let Some(what) = changed {
        return Err(UsageError::with_fix(
            format!(
                "{} changed since this run started: {what} differ; resuming would mix results of two different benches",
                p.bench.path.display()
            ),
            "start a new run (without --resume), or restore the bench as it was",
        ));
    }
    if record.plan.endpoints != p.endpoint_names() {
        return Err(UsageError::with_fix(
            format!(
                "this run was answered by {}; resuming on {} would mix two grids",
                describe_endpoints(&record.plan.endpoints),
                describe_endpoints(&p.endpoint_names())
            ),
            "resume without --endpoints, or start a new run",
        ));
    }
    if record.plan.endpoints.is_empty() {
        return check_same_provider(&record.endpoint, provider);
    }
    for (was, now) in record.endpoints.iter().zip(grid_infos(p)) {
        check_same_provider(was, &now).map_err(|e| {
            UsageError(format!(
                "endpoint {}: {}",
                now.endpoint.as_deref().unwrap_or("?"),
                e.0
            ))
        })?;
    }
    Ok(())
}

/// `endpoints hosted, local`, or `its one endpoint`.
fn describe_endpoints(names: &[String]) -> String {
    if names.is_empty() {
        "its one endpoint".to_string()
    } else {
        format!("endpoints {}", names.join(", "))
    }
}

/// Refuses to resume an endpoint on another model, or one whose credentials in its URL
/// would be lost.
fn check_same_provider(was: &ProviderInfo, provider: &ProviderInfo) -> Result<(), UsageError> {
    let record_endpoint = was;
    let redacted = crate::client::secrets::REDACTED;
    if record_endpoint.base_url.contains(redacted) && provider.base_url != record_endpoint.base_url
    {
        return Err(UsageError::with_fix(
            format!(
                "this run was sent to {}, whose credentials are never stored; resuming would send to {}",
                record_endpoint.base_url, provider.base_url
            ),
            "resume with --base-url and the URL with its credentials (or set them in the environment as before)",
        ));
    }
    if provider.model != record_endpoint.model || provider.simulated != record_endpoint.simulated {
        return Err(UsageError::with_fix(
            format!(
                "this run was answered by `{}`{}; resuming with `{}`{} would mix two models' answers",
                record_endpoint.model,
                if record_endpoint.simulated {
                    " (simulated)"
                } else {
                    ""
                },
                provider.model,
                if provider.simulated {
                    " (simulated)"
                } else {
                    ""
                },
            ),
            match &record_endpoint.endpoint {
                Some(name) => format!(
                    "resume with --endpoint {name}=URL,model={} (or the bench's endpoint as it was), or start a new run",
                    record_endpoint.model
                ),
                None => format!(
                    "resume with --model {} and the same provider, or start a new run",
                    record_endpoint.model
                ),
            },
        ));
    }
    Ok(())
}

/// Fails when a report file cannot be written (its folder is missing or read-only), so the
/// run is refused before anything is sent rather than losing the report after.
fn check_writable(path: &Path) -> anyhow::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .with_context(|| {
            format!(
                "cannot write {}\n  fix: create its folder, or name a file you can write",
                path.display()
            )
        })
}

/// Listens for SIGINT and SIGTERM. The first stops dispatch and drains the client: no new
/// attempt starts and waits end at once, while attempts in flight may finish within
/// `grace`; after it (or at a second signal) they are abandoned. The handlers are installed
/// before this returns, so no signal is missed.
/// SIGINT and SIGTERM (Ctrl-C elsewhere), watched from the preflight on: a signal that
/// arrives between the preflight and the first job is held, never lost (nor fatal).
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn watch() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                int: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
                term: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// The next signal, named.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => "interrupted",
                _ = self.term.recv() => "terminated (SIGTERM)",
            }
        }
        #[cfg(not(unix))]
        {
            match tokio::signal::ctrl_c().await {
                Ok(()) => "interrupted",
                Err(_) => std::future::pending().await,
            }
        }
    }
}

fn watch_signals(
    mut signals: Signals,
    dispatch: CancellationToken,
    abort: CancellationToken,
    grace: Duration,
) -> tokio::task::JoinHandle<()> {
    let first = move || {
        dispatch.cancel();
        note!(
            "\ninterrupted: no new jobs or retries; letting the attempts in flight finish for up to {} (interrupt again to abort them)",
            humantime::format_duration(grace)
        );
    };
    let second = move |why: &str| {
        note!("{why}: aborting the attempts in flight");
        abort.cancel();
    };
    tokio::spawn(async move {
        signals.next().await;
        first();
        tokio::select! {
            _ = signals.next() => second("interrupted again"),
            _ = tokio::time::sleep(grace) => second("the grace period is over"),
        }
    })
}
