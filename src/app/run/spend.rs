//! `--budget`: the plan's estimate before the folder is made, and what a resume has left to
//! spend.

use std::collections::HashSet;
use std::path::Path;

use super::cache::cached_answers;
use super::continued::Continued;
use crate::app::Failure;
use crate::app::settings::RunSettings;
use crate::error::UsageError;
use promptgauge_runner::record::RunRecord;
use promptgauge_runner::{self as runner, RunDir};
use promptgauge_suite::Job;

/// `--budget` (or the budget the resumed run was started with), once every price it needs
/// is known.
pub(super) struct PlannedBudget {
    /// The most the run may spend, in USD.
    pub(super) limit: f64,
    /// The prices it holds jobs at.
    pub(super) prices: runner::budget::Prices,
}

/// `--budget` (or the budget the resumed run was started with): its limit and the prices
/// it holds jobs at, once every price it needs is known; a new run whose plan may cost
/// more is refused here, before its folder is made.
pub(super) fn plan_budget(
    settings: &RunSettings,
    resumed: Option<&RunRecord>,
) -> Result<Option<PlannedBudget>, Failure> {
    let p = &settings.plan;
    let Some(limit) = settings
        .budget
        .or_else(|| resumed.and_then(|r| r.budget_usd))
    else {
        if settings.run_to_budget {
            return Err(UsageError::with_fix(
                "--run-to-budget says what to do when the plan may cost more than the budget, and there is no budget",
                "add --budget USD, or drop --run-to-budget",
            )
            .into());
        }
        return Ok(None);
    };
    let prices = crate::app::budget::prices(p, settings.judge.as_ref());
    // Answers the cache holds cost nothing (a fresh run's cache is under --out; a resume
    // weighs its own once its journal is read).
    let cached = cached_answers(
        p,
        settings.cache && resumed.is_none(),
        &settings.out,
        &settings.provider.base_url,
    )?;
    // The whole plan's estimate says whether scorers call models (as `check` reads it).
    let e = crate::app::budget::estimate(p, &p.jobs, &prices, &*cached)?;
    crate::app::budget::check_priced(p, &prices, e.judge_unpriced)?;
    if resumed.is_none() {
        let line = crate::app::budget::check_estimate(&e, limit, 0.0, settings.run_to_budget)?;
        if !settings.quiet {
            note!("{line}");
        }
    }
    Ok(Some(PlannedBudget { limit, prices }))
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
    for b in promptgauge_runner::batch::open_batches(&continued.carried.batches) {
        collecting |= !waiting.is_empty() && !b.keys.is_empty();
        let jobs: Vec<usize> = b
            .keys
            .iter()
            .filter_map(|k| runner::job_of_key(k, run_id).map(|(index, _)| index))
            .filter(|i| waiting.contains(i))
            .collect();
        if let Some(usd) = b.reserved_usd.filter(|_| !b.keys.is_empty()) {
            reserved += usd * jobs.len() as f64 / b.keys.len() as f64;
        }
        adopted.extend(jobs);
    }
    (adopted, reserved, collecting)
}

/// A run under a budget records it; a resume weighs what is left to send against what is
/// left of it.
pub(super) fn hold_to_budget(
    settings: &RunSettings,
    dir: &RunDir,
    record: &mut RunRecord,
    continued: &Continued,
    budget: Option<&PlannedBudget>,
) -> Result<(), Failure> {
    let Some(budget) = budget else {
        return Ok(());
    };
    record.budget_usd = Some(budget.limit);
    if record.resumed_at.is_empty() {
        return Ok(());
    }
    weigh_what_is_left(settings, dir, record, continued, budget)
}

/// A resume under a budget weighs what is left to send against what is left of it. Jobs in
/// batches the provider already holds are collected whatever the budget says; what they
/// were held for counts against it before anything new.
fn weigh_what_is_left(
    settings: &RunSettings,
    dir: &RunDir,
    record: &RunRecord,
    continued: &Continued,
    budget: &PlannedBudget,
) -> Result<(), Failure> {
    let p = &settings.plan;
    let PlannedBudget { limit, prices } = budget;
    let limit = *limit;
    let (adopted, reserved, collecting) = in_open_batches(continued, &record.run_id);
    let fresh: Vec<Job> = continued
        .jobs
        .iter()
        .filter(|j| !adopted.contains(&j.index))
        .copied()
        .collect();
    if collecting && !settings.quiet {
        note!(
            "collecting {} already submitted in batches the provider holds ({} held for them): never refused by the budget",
            crate::app::count(adopted.len() as u64, "job", "jobs"),
            promptgauge_report::usd(Some(reserved))
        );
    }
    if continued.spent >= limit && !fresh.is_empty() && !collecting {
        return Err(UsageError::with_fix(
            format!(
                "the run has spent {} already, and the budget is {}: nothing more could be sent",
                promptgauge_report::usd(Some(continued.spent)),
                promptgauge_report::usd(Some(limit))
            ),
            "resume with a larger --budget",
        )
        .into());
    }
    let root = dir.path().parent().unwrap_or(Path::new("."));
    let cached = cached_answers(p, settings.cache, root, &record.endpoint.base_url)?;
    let e = crate::app::budget::estimate(p, &fresh, prices, &*cached)?;
    // With batches to collect the resume goes on, the rest sent only while the budget
    // lasts (as with --run-to-budget).
    let line = crate::app::budget::check_estimate(
        &e,
        limit,
        continued.spent + reserved,
        settings.run_to_budget || collecting,
    )?;
    if !settings.quiet {
        note!("{line}");
    }
    Ok(())
}
