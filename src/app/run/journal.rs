//! Where the run stands: the journal read once (its jobs heard by the aggregator) and
//! opened to append, and the jobs still to send.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;

use super::continued::{Continued, JournalDecides};
use crate::app::settings::RunSettings;
use crate::app::{Failure, Prepared};
use crate::error::BeforeSend;
use promptgauge_runner::RunDir;
use promptgauge_runner::record::RunRecord;
use promptgauge_suite::Job;

/// Reads the journal once, if it exists (the aggregator hears every job it holds), and
/// opens it to append; works out the jobs still to send.
pub(super) fn continue_journal(
    settings: &RunSettings,
    dir: &RunDir,
    record: &RunRecord,
    budget: Option<&promptgauge_runner::budget::Prices>,
) -> Result<Continued, Failure> {
    let p = &settings.plan;
    let keys = record.plan_keys();
    let per_case = p.variants.len() * p.grid.len().max(1) * p.bench.repeats as usize;
    let until = UntilDecided::of(p, record.plan.shard.is_some());
    let mut agg = crate::app::aggregator_with(dir, record, settings.files(), until.live(p))?;
    if !settings.no_store {
        agg.figures()
            .keep_rows(&record.bench.case_ids, Some(dir.store_spool()));
    }
    let mut spent = budget.map(|prices| (prices, 0.0));
    let (audit, journal) = replay_journal(
        p,
        settings.retry_failed,
        dir,
        &keys,
        &mut agg,
        &mut spent,
        &until,
    )?;
    let (jobs, resend) = jobs_left(p, &keys, &audit);
    // A resumed agent loop takes the steps it had finished from the journal.
    let loop_steps = if !p.bench.has_tools() {
        Default::default()
    } else {
        // Runs before steps.jsonl kept their steps among the journal's records.
        let journal = Some(dir.journal_path()).filter(|_| audit.stats.events > 0);
        let steps = dir.steps_path();
        let paths: Vec<&std::path::Path> = [Some(&steps), journal.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| p.as_path())
            .collect();
        promptgauge_runner::journal::loop_steps(&paths)
            .with_context(|| format!("cannot read the steps in {}", dir.path().display()))
            .before_send()?
    };
    // `--budget`: the finished steps of loops not yet recorded were paid for too.
    if let Some((prices, usd)) = spent.as_mut() {
        *usd += unfinished_steps_cost(&loop_steps, &jobs, &resend, &record.run_id, prices);
    }
    if settings.retry_failed.is_some() && !settings.quiet {
        say_resending(settings.retry_failed, resend.len());
    }
    Ok(Continued {
        agg,
        journal,
        carried: JournalDecides {
            already: p.jobs.len() - jobs.len(),
            resend,
            stop: until.stop,
            horizon: until.horizon,
            per_case,
            batches: audit.stats.batches.clone(),
            loop_steps,
        },
        jobs,
        spent: spent.map_or(0.0, |(_, usd)| usd),
    })
}

/// What the journaled steps of loops still to finish were billed: their jobs have no
/// record yet (a failed round's steps are in its record), at each job's endpoint's price.
fn unfinished_steps_cost(
    steps: &HashMap<String, promptgauge_runner::StepLine>,
    jobs: &[Job],
    resend: &HashMap<usize, u32>,
    run_id: &str,
    prices: &promptgauge_runner::budget::Prices,
) -> f64 {
    let left: HashMap<usize, usize> = jobs
        .iter()
        .map(|j| (j.index, usize::from(j.endpoint)))
        .collect();
    steps
        .values()
        .filter_map(|s| {
            let (index, round) = promptgauge_runner::job_of_key(&s.key, run_id)?;
            let lane = left.get(&index)?;
            (round == resend.get(&index).copied())
                .then(|| prices.attempts_billed(&s.attempts, *lane))
        })
        .sum()
}

/// What `--until-decided` shares with the workers and the journal while the run goes on.
pub(super) struct UntilDecided {
    /// A decided variant's jobs are not sent (flags by bench variant).
    stop: Option<promptgauge_runner::sequential::StopFlags>,
    /// None is sent far ahead of the cases the tests have seen.
    horizon: Option<promptgauge_runner::sequential::Horizon>,
    /// The decisions the tests reach, for the journal to write.
    decisions: promptgauge_runner::sequential::Decisions,
}

impl UntilDecided {
    /// A `--best` shard does not search (`merge` does): it sends its block whole.
    fn of(p: &Prepared, sharded: bool) -> Self {
        let bench = &p.bench;
        let endpoints = p.grid.len().max(1);
        let live = p
            .sequential
            .as_ref()
            .filter(|s| !(sharded && s.shards_in_blocks()));
        let stop = live.map(|_| {
            Arc::new(
                (0..bench.variants.len() * endpoints)
                    .map(|_| std::sync::atomic::AtomicBool::new(false))
                    .collect(),
            )
        });
        // Batches go out in waves of cases; streamed jobs a little ahead of the tests.
        let horizon = live
            .and_then(|_| p.ahead())
            .map(promptgauge_runner::sequential::Horizon::new);
        UntilDecided {
            stop,
            horizon,
            decisions: Default::default(),
        }
    }

    /// What the live sequential tests use, when the run goes until decided.
    fn live(&self, p: &Prepared) -> Option<promptgauge_runner::sequential::Steering> {
        match (&self.stop, &self.horizon) {
            (Some(stop), Some(horizon)) => Some(promptgauge_runner::sequential::Steering {
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
pub(super) fn replay_journal(
    p: &Prepared,
    retry_failed: Option<crate::cli::RetryFailed>,
    dir: &RunDir,
    keys: &promptgauge_runner::journal::PlanKeys,
    agg: &mut crate::app::Figures,
    spent: &mut Option<(&promptgauge_runner::budget::Prices, f64)>,
    until: &UntilDecided,
) -> Result<
    (
        promptgauge_runner::journal::Audit,
        promptgauge_runner::Journal,
    ),
    Failure,
> {
    let pick = |r: &promptgauge_runner::JobRecord| match retry_failed {
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
                !kept.iter().any(|k| {
                    k.variant == d.variant
                        && k.against == d.against
                        && k.verdict == d.verdict
                        && k.cases == d.cases
                })
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

/// The lane (endpoint) a job's record was answered at: its position among the run's
/// endpoints, the first when the run has one.
pub(super) fn lane_of(p: &Prepared, r: &promptgauge_runner::JobRecord) -> usize {
    r.endpoint
        .as_deref()
        .and_then(|name| p.grid.iter().position(|g| g.name() == name))
        .unwrap_or(0)
}

/// The plan's jobs the journal does not hold as done, and of those the ones sent again
/// (`--retry-failed`), by plan position, with their round.
pub(super) fn jobs_left(
    p: &Prepared,
    keys: &promptgauge_runner::journal::PlanKeys,
    audit: &promptgauge_runner::journal::Audit,
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
pub(super) fn say_resending(retry_failed: Option<crate::cli::RetryFailed>, resent: usize) {
    note!(
        "sending again {} that failed ({}); their failures stay in the journal",
        crate::app::count(resent as u64, "job", "jobs"),
        match retry_failed {
            Some(crate::cli::RetryFailed::All) => "all of them",
            _ =>
                "those a server outage, overload or timeout failed; --retry-failed all sends every one",
        }
    );
}

/// Batches of jobs an earlier `--retry-failed` sent again, still open at the provider: a
/// resume without the flag does not collect them (their jobs' records are failures), so it
/// says how to.
pub(super) fn say_open_resends(batches: &[promptgauge_runner::batch::BatchRecord], dir: &RunDir) {
    let resent: usize = promptgauge_runner::batch::open_batches(batches)
        .filter(|b| b.keys.iter().any(|k| k.contains("-resend")))
        .map(|b| b.keys.len())
        .sum();
    if resent > 0 {
        note!(
            "note: {} sent again by an earlier --retry-failed wait in batches still open at the provider; collect them (nothing is paid again) with: {} --retry-failed",
            crate::app::count(resent as u64, "job", "jobs"),
            crate::app::resume_command(dir.path())
        );
    }
}
