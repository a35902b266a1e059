//! How the sending ended, and why the run stopped early, from what the clients and the
//! listeners saw.

use std::time::Duration;

use super::send::Sent;
use crate::app::finish::Ending;
use promptgauge_runner::record::StopReason;
use promptgauge_runner::{self as runner, RunDir};

/// How the sending ended, and why the run stopped early (as run.json and the summary
/// say it), from what the clients (`lanes`, the judge's in `sent`) and the listeners saw;
/// `batch_wait` is `--batch-wait`, `budget` `--budget`'s account.
pub(super) fn ending_of(
    sent: &Sent,
    lanes: &[runner::Lane],
    dir: &RunDir,
    batch_wait: Option<Duration>,
    budget: Option<&runner::budget::Budget>,
) -> (Ending, Option<StopReason>) {
    let Sent {
        tally,
        dispatch,
        first,
        outage,
        judge,
        ..
    } = sent;
    let judge = judge.as_deref();
    let fatal = lanes
        .iter()
        .find_map(|l| l.client.fatal())
        .or_else(|| judge.and_then(|j| j.client.fatal()))
        .map(|f| StopReason::Refused(f.to_string()))
        .or_else(|| first.reason(tally));
    let interrupted = dispatch.is_cancelled()
        && tally.journal_error.is_none()
        && !first.stopped()
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
                    let usd = |x| promptgauge_report::usd(Some(x));
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
