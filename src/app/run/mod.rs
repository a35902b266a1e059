//! `run`: send every job not yet in the journal, let every listener hear each as it
//! finishes, write the reports, return the exit code. With `--resume DIR`, continue that
//! run: its journal is read once, through the same aggregator. [`run`] reads as its steps,
//! one file each: `resolve` (flags, bench, endpoints and judge once into the run's
//! `app::settings::RunSettings`, which builds the lanes' clients, the judge's and the
//! outputs; then the store and the baseline; `resume.rs` what a resume keeps and
//! refuses), `look_at_server` (`server.rs`), `open_folder` (`folder.rs`),
//! `continue_journal` (`journal.rs`: where the run stands, `continued.rs`; `spend.rs` the
//! budget), `start_client` (`lanes.rs`: the lanes and the simulator; `cache.rs` the
//! response cache), the sending (`send.rs`: the runner's options, from the settings and
//! what the journal decides, moved in whole; the listeners that stop it early in
//! `watch.rs` and the signals in `signals.rs`; `embeddings.rs` the `embedding` scorers'
//! clients), `ending_of` (`ending.rs`), then `finish::conclude`.

mod cache;
mod continued;
mod embeddings;
mod ending;
mod folder;
mod journal;
mod lanes;
mod resolve;
mod resume;
mod send;
mod server;
mod signals;
mod spend;
mod watch;

pub(super) use embeddings::check_embedding_endpoints;
pub(super) use resolve::{baseline_of, check_gates};

use std::sync::Arc;

use crate::app::finish::{Outputs, conclude};
use crate::app::settings::Env;
use crate::app::settings::RunSettings;
use crate::app::{Exit, Failure};
use crate::cli::RunArgs;
use crate::error::BeforeSend;
use ending::ending_of;
use folder::{mark_batched, open_folder};
use journal::{continue_journal, say_open_resends};
use lanes::{Clients, start_client};
use promptgauge_base::clock::utc_now;
use promptgauge_runner::record::RunRecord;
use promptgauge_runner::{self as runner, RunDir};
use resolve::{Against, Resolved, resolve};
use send::{Sent, say_what_runs, send_jobs};
use server::look_at_server;
use signals::Signals;
use spend::{hold_to_budget, plan_budget};

/// `run`: runs a bench (or resumes one with `--resume`) and reports on it. The flags, the
/// bench and its endpoints are resolved once, into the run's [`RunSettings`], which the
/// steps after take: it builds the lanes' clients, the runner's options and the outputs.
pub async fn run(args: &RunArgs, env: &Env) -> Result<Exit, Failure> {
    let Resolved {
        resumed,
        settings,
        against,
    } = resolve(args, env).await?;
    let (p, judge) = (&settings.plan, settings.judge.as_ref());
    let budget = plan_budget(&settings, resumed.as_ref().map(|(_, record, _)| record))?;

    let mut signals = Signals::watch().before_send()?;
    let Some(dead_replicas) = look_at_server(p, judge, settings.quiet, &mut signals).await? else {
        return Ok(Exit::Interrupted);
    };

    let (dir, mut record, _lock) = open_folder(resumed, &settings, env, &against.store)?;
    // A `--best` run recorded before the search kept its workers' reach takes this
    // session's, and keeps it (the record is written below), so its replays send alike.
    if let Some(best) = record
        .plan
        .sequential
        .as_mut()
        .and_then(|s| s.best.as_mut())
        && best.ahead.is_none()
        && record.plan.shard.is_none()
    {
        best.ahead = p.ahead();
    }
    let prices = budget.as_ref().map(|b| &b.prices);
    let continued = continue_journal(&settings, &dir, &record, prices)?;
    hold_to_budget(&settings, &dir, &mut record, &continued, budget.as_ref())?;
    mark_batched(&mut record, p);
    if settings.retry_failed.is_none() && !settings.quiet {
        say_open_resends(&continued.carried.batches, &dir);
    }

    let clients = start_client(&settings, &record, &dead_replicas).await?;
    dir.write_record(&record).before_send()?;
    if !settings.quiet {
        say_what_runs(p, &settings.provider, &record, &dir, continued.jobs.len());
    }

    let budget = budget.map(|b| {
        Arc::new(runner::budget::Budget::new(
            b.limit,
            continued.spent,
            b.prices,
        ))
    });
    let sent = send_jobs(
        &settings,
        &dir,
        &record,
        &clients,
        signals,
        continued,
        budget.clone(),
    )
    .await?;
    let Clients { lanes, simulator } = clients;
    drop(simulator);

    finish_run(
        &settings,
        &dir,
        record,
        sent,
        &lanes,
        budget.as_deref(),
        against,
    )
    .await
}

/// How the sending ended, in the record and every report, and the exit code that says so.
/// A record that cannot be written is one of the problems the ending says.
async fn finish_run(
    settings: &RunSettings,
    dir: &RunDir,
    mut record: RunRecord,
    sent: Sent,
    lanes: &[runner::Lane],
    budget: Option<&runner::budget::Budget>,
    against: Against,
) -> Result<Exit, Failure> {
    let (ending, stopped) = ending_of(&sent, lanes, dir, Some(settings.batch.batch_wait), budget);
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
    // With `--no-store` the run is recorded nowhere; a store that cannot be named is the
    // error it was.
    let outputs = Outputs {
        store: if settings.no_store {
            None
        } else {
            Some(against.store?)
        },
        ..Outputs::of(
            &settings.gates,
            settings.files(),
            against.baseline.as_ref(),
            settings.quiet,
        )
    };
    Ok(conclude(
        dir,
        &record,
        result,
        ending,
        &outputs,
        problems,
        Some(&settings.plan.bench),
    )
    .await)
}
