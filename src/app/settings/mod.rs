//! The settings factory: the flags, the bench and its endpoints resolved once into one
//! value, [`RunSettings`], that builds the components a run needs — its lanes' clients,
//! the judge's, the outputs it writes — as ripgrep resolves its flags once into `HiArgs`,
//! which builds the searcher and the printer (the runner's options are built beside the
//! sending, `app/run/send.rs`, from these settings and what the journal decides).
//!
//! Its parts, each built once and read only: `env.rs` the environment (captured once),
//! `prepare.rs` the bench planned from the plan flags ([`Prepared`]), `endpoint.rs` each
//! endpoint (base URLs, model, protocol, key, headers), `judge.rs` who judges
//! ([`ResolvedJudge`]), `client.rs` what one client is built from ([`ClientSettings`]),
//! for the run's lanes, each endpoint of a grid and the judge; `shard.rs` `--shard auto`,
//! `store.rs` the history store's location. A run's steps (`app/run/`) read these
//! settings and never change them.

mod client;
mod endpoint;
mod env;
mod judge;
mod prepare;
mod shard;
mod store;

use client::ClientSettings;
pub(crate) use endpoint::Endpoint;
pub use env::Env;
pub(in crate::app) use judge::ResolvedJudge;
pub(crate) use prepare::{Prepared, bench_file, serve_mcp_tools};
pub use shard::resolve_shard;
pub(crate) use store::store_location;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use super::Failure;
use crate::cli::{BatchArgs, GateArgs, OutputArgs, PlanArgs, RunArgs};
use crate::error::BeforeSend;
use promptgauge_client::Client;
use promptgauge_report::ProviderInfo;
use promptgauge_runner as runner;
use promptgauge_runner::record::RunRecord;

/// A bench planned from the plan flags, resolved once: the jobs and where each goes, where
/// the answers come from, and who judges. `check` shows it; `run` resolves it into its
/// [`RunSettings`] and sends from it.
pub(super) struct Planned {
    /// The bench with the flags applied: the jobs, the endpoint (or the grid's), the
    /// scorers.
    pub plan: Prepared,
    /// Where the answers come from, as shown and stored (the baseline endpoint's).
    pub provider: ProviderInfo,
    /// Who judges, when a scorer asks a model.
    pub judge: Option<ResolvedJudge>,
}

impl Planned {
    /// Loads and plans the bench the flags name, and resolves its endpoint and judge. No
    /// network; every error is exit 2.
    pub(super) fn resolve(plan: &PlanArgs, env: &Env) -> Result<Planned, Failure> {
        let p = prepare::prepare(plan, env)?;
        let provider = p.endpoint.info();
        let judge = judge::resolve(&p, plan, env)?;
        Ok(Planned {
            plan: p,
            provider,
            judge,
        })
    }
}

/// A run's settings, resolved once from the flags, the bench and its endpoints: the plan
/// (the jobs and where each goes), who judges, and what the flags ask of the components.
/// The steps of `run` after it read their flags here.
pub(super) struct RunSettings {
    /// The bench with the flags applied: the jobs, the endpoint (or the grid's), the
    /// scorers.
    pub plan: Prepared,
    /// Where the answers come from, as shown and stored (the baseline endpoint's).
    pub provider: ProviderInfo,
    /// Who judges, when a scorer asks a model.
    pub judge: Option<ResolvedJudge>,
    /// `--quiet`: nothing said but errors.
    pub quiet: bool,
    /// `--verbose`: every attempt said.
    pub verbose: bool,
    /// The live progress line: not `--quiet`, standard error a terminal, not CI.
    pub live: bool,
    /// `--cache`: answers kept and reused.
    pub cache: bool,
    /// `--grace`: how long a stop waits for the requests in flight.
    pub grace: Duration,
    /// How `--batch` waits for the provider's batches.
    pub batch: BatchArgs,
    /// `--budget`: the most the run may spend, in USD (a resume's, when given again).
    pub budget: Option<f64>,
    /// `--run-to-budget`: a plan that may cost more is sent until the budget is reached.
    pub run_to_budget: bool,
    /// `--out`: where a new run's folder is made (and its response cache).
    pub out: std::path::PathBuf,
    /// `--limit`: the first cases only (as the record keeps it).
    pub limit: Option<u64>,
    /// `--shard`: this run's share of the jobs (as the record keeps it).
    pub shard: Option<promptgauge_suite::Shard>,
    /// `--fetch-urls` (a resume's, as the record keeps it).
    pub fetch_urls: bool,
    /// The gates asked for (`--allow-failures` recorded with the run).
    pub gates: GateArgs,
    /// The files the run writes besides its folder (`--junit`, `--markdown`, …).
    outputs: OutputArgs,
    /// `--no-store`: the run is recorded in no history store.
    pub no_store: bool,
    /// `--retry-failed`: which failed jobs of the journal are sent again.
    pub retry_failed: Option<crate::cli::RetryFailed>,
    /// The bench's MCP servers, once started (their tools are then in the plan's bench).
    pub mcp: Option<Arc<runner::mcp::McpServers>>,
}

impl RunSettings {
    /// Resolves `plan` (the command line's plan flags, or a resumed run's) and the rest of
    /// `flags`: the bench loaded and planned, its endpoint's and the judge's warnings said,
    /// its MCP servers started (their tools join the plan's bench). No other network; every
    /// error is exit 2.
    pub(super) async fn resolve(
        plan: &PlanArgs,
        flags: &RunArgs,
        env: &Env,
    ) -> Result<Self, Failure> {
        let Planned {
            plan: mut p,
            provider,
            judge,
        } = Planned::resolve(plan, env)?;
        for w in &p.endpoint.warnings {
            note!("warning: {w}");
        }
        for w in judge.iter().flat_map(|j| &j.warnings) {
            note!("warning: the judge: {w}");
        }
        // The bench's `gates:`, each unless its flag is given.
        let gates = flags.gates.or_bench(&p.bench.gates);
        let mcp = serve_mcp_tools(&mut p).await?;
        Ok(RunSettings {
            plan: p,
            provider,
            judge,
            quiet: flags.quiet,
            verbose: flags.verbose,
            live: !flags.quiet && std::io::stderr().is_terminal() && !env.is_ci(),
            cache: flags.cache,
            grace: flags.grace,
            batch: flags.batch.clone(),
            budget: flags.plan.budget,
            run_to_budget: flags.plan.run_to_budget,
            out: flags.out.clone(),
            limit: flags.plan.limit,
            shard: flags.plan.shard,
            fetch_urls: plan.fetch_urls,
            gates,
            outputs: flags.outputs.clone(),
            no_store: flags.store.no_store,
            retry_failed: flags.retry_failed,
            mcp,
        })
    }

    /// The lanes the jobs go through, one per endpoint, each with its client (sent to
    /// `simulator` when the endpoint has no server), its parameters and its cache key
    /// (`keys`, one per lane); batched as the run's record says.
    pub(super) fn lanes(
        &self,
        record: &RunRecord,
        simulator: Option<&str>,
        keys: &[String],
    ) -> anyhow::Result<Vec<runner::Lane>> {
        let p = &self.plan;
        let simulated = |urls: &[String]| match simulator {
            Some(s) if urls.is_empty() => vec![s.to_string()],
            _ => urls.to_vec(),
        };
        if p.grid.is_empty() {
            let urls = simulated(&p.endpoint.base_urls);
            let client = ClientSettings::of(&p.endpoint, &p.bench.limits, &urls).client()?;
            return Ok(vec![runner::Lane {
                batch: record.endpoint.batch,
                ..runner::Lane::single(Arc::new(client), keys[0].clone())
            }]);
        }
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
                    dispatch: tokio_util::sync::CancellationToken::new(),
                    batch: record.endpoints.get(i).is_some_and(|info| info.batch),
                })
            })
            .collect()
    }

    /// The judge's client and how to ask it (to `simulator` when the judge has no server),
    /// when a scorer asks a model; it stops with the run's client, and the run's client with
    /// it.
    pub(super) fn judge_service(
        &self,
        simulator: Option<&str>,
        cache: Option<Arc<std::sync::Mutex<promptgauge_client::Cache>>>,
        client: &Client,
    ) -> Result<Option<Arc<promptgauge_grade::judge::JudgeService>>, Failure> {
        Ok(match &self.judge {
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

    /// The files the run writes besides its folder (`--junit`, `--markdown`, `--jobs-csv`).
    pub(super) fn files(&self) -> &OutputArgs {
        &self.outputs
    }
}
