//! The run's folder and its `run.json`: a resumed run's brought up to date, or a new one.

use std::path::Path;

use super::resume::{check_batches_stay, check_resumable};
use crate::app::finish::in_use;
use crate::app::settings::Env;
use crate::app::settings::RunSettings;
use crate::app::{Failure, Prepared};
use crate::error::UsageError;
use promptgauge_base::clock::utc_now;
use promptgauge_report::ProviderInfo;
use promptgauge_runner::RunDir;
use promptgauge_runner::record::{BenchRecord, PlanSettings, RunRecord, Tool};
use promptgauge_suite::Fingerprint;

/// The run's folder and record: a resumed run's, brought up to date, or a new one (its
/// record not written yet: that waits until the client is built).
pub(super) fn open_folder(
    resumed: Option<(RunDir, RunRecord, promptgauge_runner::lock::RunLock)>,
    settings: &RunSettings,
    env: &Env,
    store: &Result<promptgauge_store::Location, UsageError>,
) -> Result<(RunDir, RunRecord, promptgauge_runner::lock::RunLock), Failure> {
    let (p, provider) = (&settings.plan, &settings.provider);
    let judge_info = settings.judge.as_ref().map(|j| &j.info);
    Ok(match resumed {
        Some((dir, mut record, lock)) => {
            let grid = grid_infos(p);
            check_resumable(&record, p, provider, &grid)?;
            check_batches_stay(&dir, &record, provider, &grid)?;
            record.resumed_at.push(utc_now());
            record.finished_at = None;
            record.stopped = None;
            record.endpoint = provider.clone();
            record.endpoints = grid;
            record.judge = judge_info.cloned();
            record.allowed_failures = settings.gates.allow_failures;
            (dir, record, lock)
        }
        None => {
            let started_at = utc_now();
            let name = match settings.shard {
                Some(s) => format!("{}-shard{}of{}", p.bench.name, s.index, s.count),
                None => p.bench.name.clone(),
            };
            let dir = RunDir::create(&settings.out, &name, &started_at).map_err(|e| {
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
            let mut record = new_record(settings, &dir, started_at);
            record.judge = judge_info.cloned();
            let bench_dir = record.bench_path.parent().unwrap_or(Path::new("."));
            record.source = crate::app::source::capture(bench_dir, env);
            record.store = match (&store, settings.no_store) {
                (Ok(location), false) => Some(stored_as(location)),
                _ => None,
            };
            (dir, record, lock)
        }
    })
}

/// A new run's record, as its settings say: the plan, the bench, where it is sent, the
/// failures allowed and the budget (`open_folder` adds the judge, the source and the store).
pub(super) fn new_record(settings: &RunSettings, dir: &RunDir, started_at: String) -> RunRecord {
    let p = &settings.plan;
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
            limit: settings.limit,
            variants: p.variant_names(),
            repeats: bench.repeats,
            shard: settings.shard,
            sequential: p.recorded_sequential(),
            endpoints: p.endpoint_names(),
            order_seed: p.order_seed,
            fetch_urls: settings.fetch_urls,
            arms_out: p.arms_out.clone(),
        },
        fingerprint: Fingerprint::of(bench, &p.variants),
        jobs_planned: p.jobs.len(),
        endpoint: settings.provider.clone(),
        endpoints: grid_infos(p),
        judge: None,
        bench: BenchRecord::of(bench, &p.variants),
        source: None,
        store: None,
        merged_from: Vec::new(),
        merged_shards: Vec::new(),
        allowed_failures: settings.gates.allow_failures,
        budget_usd: settings.budget,
    }
}

/// Each endpoint of a run of several, with its price, as run.json records them.
pub(super) fn grid_infos(p: &Prepared) -> Vec<ProviderInfo> {
    p.grid
        .iter()
        .map(|g| ProviderInfo {
            price: g.price.clone(),
            ..g.endpoint.info()
        })
        .collect()
}

/// The store as run.json remembers it: a SQLite file by its absolute path, a PostgreSQL
/// URL without its password.
pub(super) fn stored_as(location: &promptgauge_store::Location) -> String {
    match location {
        promptgauge_store::Location::Sqlite(p) => std::path::absolute(p)
            .unwrap_or_else(|_| p.clone())
            .display()
            .to_string(),
        promptgauge_store::Location::Postgres(_) => location.shown(),
    }
}

/// A run's record says which endpoints batch: a resume that adds `--batch` says so too
/// (and a resume of a batched run batches the rest, whatever its flags).
pub(super) fn mark_batched(record: &mut RunRecord, p: &Prepared) {
    if p.grid.is_empty() {
        record.endpoint.batch |= p.endpoint.batch;
    } else {
        for (info, g) in record.endpoints.iter_mut().zip(&p.grid) {
            info.batch |= g.endpoint.batch;
        }
    }
}
