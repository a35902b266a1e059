//! The sending: every job left, every listener hearing each as it finishes.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::cache::open_cache;
use super::continued::{Continued, JournalDecides};
use super::embeddings::embedding_services;
use super::lanes::Clients;
use super::signals::{Signals, watch_signals};
use super::watch::{BatchNotes, FirstFailures, Outage, SearchNotes, watchers};
use crate::app::settings::RunSettings;
use crate::app::{Failure, Prepared};
use promptgauge_report::ProviderInfo;
use promptgauge_report::progress::Progress;
use promptgauge_report::verbose::VerboseLog;
use promptgauge_runner::events::{Fanout, Listener};
use promptgauge_runner::record::RunRecord;
use promptgauge_runner::{self as runner, RunDir};

/// What the sending leaves: its tally, the listeners that may have stopped it, the
/// aggregator that heard every job, and the judge's client (a refused judge key stops the
/// run too).
pub(super) struct Sent {
    pub(super) tally: runner::RunTally,
    pub(super) dispatch: CancellationToken,
    pub(super) first: FirstFailures,
    pub(super) outage: Outage,
    pub(super) agg: crate::app::Figures,
    pub(super) judge: Option<Arc<promptgauge_grade::judge::JudgeService>>,
}

/// Sends every job left, every listener hearing each as it finishes, until all are sent
/// or the sending is stopped: by a signal, by the first jobs all failing alike, by an
/// outage, or by the provider. `continued` is where the journal left the run; `budget`,
/// `--budget`'s account.
pub(super) async fn send_jobs(
    settings: &RunSettings,
    dir: &RunDir,
    record: &RunRecord,
    clients: &Clients,
    signals: Signals,
    continued: Continued,
    budget: Option<Arc<runner::budget::Budget>>,
) -> Result<Sent, Failure> {
    let lanes = &clients.lanes[..];
    let client = &lanes[0].client;
    let dispatch = client.drain_token();
    let signals = watch_signals(
        signals,
        dispatch.clone(),
        client.stop_token(),
        settings.grace,
    );
    let p = &settings.plan;
    let live = settings.live;
    let Continued {
        mut agg,
        mut journal,
        jobs,
        carried,
        ..
    } = continued;
    let mut progress = Progress::new(p.jobs.len(), carried.already, record.plan.arms(), live);
    let cache = open_cache(settings.cache, dir, settings.quiet)?;
    let judge = settings.judge_service(
        clients.simulator.as_ref().map(|s| s.base_url()).as_deref(),
        cache.clone(),
        client,
    )?;
    let options = run_options(
        settings,
        record,
        lanes,
        carried,
        judge.clone(),
        cache,
        budget,
    );
    let mut verbose = VerboseLog;
    // Without the live line, each batch's submission and end are said as they happen.
    let mut batch_notes = BatchNotes;
    let mut search_notes = follow_search(settings, &journal, &mut progress);
    let (mut first, mut outage) = watchers(p, &dispatch, lanes);
    // The journal first: nothing is reported that it did not keep.
    let mut listeners: Vec<&mut dyn Listener> = vec![
        &mut journal,
        &mut agg,
        &mut progress,
        &mut first,
        &mut outage,
    ];
    if settings.verbose {
        listeners.push(&mut verbose);
    }
    if !live && !settings.quiet && lanes.iter().any(|l| l.batch) {
        listeners.push(&mut batch_notes);
    }
    if let Some(notes) = search_notes.as_mut() {
        listeners.push(notes);
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

/// What the workers share: the plan's scorers, what the run's record, flags and journal
/// decide (`carried`: the jobs decided or sent again, the batches to adopt), the budget,
/// the response cache and the clients the scorers call (the judge's, the embeddings').
fn run_options(
    settings: &RunSettings,
    record: &RunRecord,
    lanes: &[runner::Lane],
    carried: JournalDecides,
    judge: Option<Arc<promptgauge_grade::judge::JudgeService>>,
    cache: Option<Arc<std::sync::Mutex<promptgauge_client::Cache>>>,
    budget: Option<Arc<runner::budget::Budget>>,
) -> runner::RunOptions {
    let p = &settings.plan;
    runner::RunOptions {
        scorers: p.scorers.clone(),
        run_id: record.run_id.clone(),
        attempts: settings.verbose,
        already: carried.already,
        scoring: promptgauge_grade::ScoreContext {
            judge,
            embeddings: embedding_services(p, lanes, cache.clone()),
            stop: Some(lanes[0].client.stop_token()),
        },
        cache,
        skip: carried.stop,
        horizon: carried.horizon.map(|h| (h, carried.per_case)),
        resend: carried.resend,
        batch: lanes
            .iter()
            .any(|l| l.batch)
            .then(|| settings.batch.settings()),
        batches: Arc::new(carried.batches),
        loop_steps: Arc::new(carried.loop_steps),
        mcp: settings.mcp.clone(),
        budget,
        ..Default::default()
    }
}

/// `--best`: each arm out is said as it goes — above the live line, or (no live line, not
/// `--quiet`) as a note, by the listener returned.
fn follow_search(
    settings: &RunSettings,
    journal: &runner::Journal,
    progress: &mut Progress,
) -> Option<SearchNotes> {
    let searching = settings
        .plan
        .sequential
        .as_ref()
        .is_some_and(|s| s.best.is_some());
    let queue = journal.decisions().filter(|_| searching)?;
    if settings.live {
        progress.follow(queue);
        return None;
    }
    (!settings.quiet).then_some(SearchNotes(queue))
}

/// The line that says what runs, against what, and where it is written.
pub(super) fn say_what_runs(
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
                crate::app::count(p.grid.len() as u64, "endpoint", "endpoints")
            ),
            p.endpoint_names().join(", "),
        )
    };
    // A search sends what it needs of its plan: `to_send` is a ceiling.
    let (verb, to_send) = match &p.sequential {
        Some(s) if s.best.is_some() && record.plan.shard.is_none() => (
            if record.resumed_at.is_empty() {
                "searching: at most"
            } else {
                "resuming the search: at most"
            },
            to_send,
        ),
        _ => (verb, to_send),
    };
    note!(
        "{verb} {} of {} ({} × {}{endpoints} × {}) against {against}\n  writing {}",
        to_send,
        crate::app::count(p.jobs.len() as u64, "job", "jobs"),
        crate::app::count(p.bench.cases.len() as u64, "case", "cases"),
        crate::app::count(p.variants.len() as u64, "variant", "variants"),
        crate::app::count(p.bench.repeats, "repeat", "repeats"),
        dir.path().display()
    );
}
