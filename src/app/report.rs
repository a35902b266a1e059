//! `report DIR`: rebuilds a run folder's reports from its journal, read once (gates are not
//! re-checked).

use anyhow::Context;

use super::finish::{in_use, write_outputs};
use super::{Exit, Failure, aggregator};
use crate::cli::ReportArgs;
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_report as report;
use promptgauge_runner::RunDir;

/// `report DIR`: rebuilds a run folder's reports from its journal, read once.
pub fn report(args: &ReportArgs) -> Result<Exit, Failure> {
    let (mut result, audit, record) = rebuild(args)?;
    let keys = record.plan_keys();
    // The terminal table, once the folder's files are rewritten: the same output a run
    // prints, on standard output (printing cannot fail: a closed pipe is not an error).
    let mut run = report::RunReport {
        result: &mut result,
        bench_text: &record.bench.text,
        baseline: None,
    };
    let _ = report::render::write(
        &report::render::TerminalTable::default(),
        &mut run,
        &RunDir::at(&args.run),
    );
    note!(
        "journal: {} of {} planned jobs recorded{}",
        audit.finished,
        keys.planned(),
        if audit.stats.torn > 0 {
            "; a torn last line (from a crash) was skipped"
        } else {
            ""
        }
    );
    if let Some(found) = audit.findings() {
        note!("note: {found}");
    }
    // `--until-decided`: when each variant stopped in the live run, as its journal says.
    if record.plan.sequential.is_some() {
        for d in &audit.stats.decided {
            note!(
                "decided live: {}{} {} after {} cases ({} jobs heard)",
                d.variant,
                d.against
                    .as_ref()
                    .map_or_else(String::new, |a| format!(" (against {a})")),
                d.verdict.replace('_', " "),
                d.cases,
                d.jobs_heard
            );
        }
    }
    note!(
        "reports rebuilt in {} (report.html, summary.json, summary.csv, summary.md)",
        args.run.display()
    );
    Ok(Exit::Success)
}

/// Writes a run folder's reports again from its journal (under the folder's lock): what
/// they add up to, what reading the journal found, and the run's record.
pub(super) fn rebuild(
    args: &ReportArgs,
) -> Result<
    (
        promptgauge_report::RunResult,
        promptgauge_runner::journal::Audit,
        promptgauge_runner::record::RunRecord,
    ),
    Failure,
> {
    let dir = RunDir::at(&args.run);
    // Its reports are rewritten: the folder must not be in the middle of a run.
    let _lock = dir.lock().map_err(in_use)?;
    let record = dir
        .read_record()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let keys = record.plan_keys();
    let outputs = crate::cli::OutputArgs {
        jobs_csv: args.jobs_csv.clone(),
        ..Default::default()
    };
    let mut agg = aggregator(&dir, &record, &outputs)?;
    let (audit, _) = dir
        .replay(&keys, |r| agg.add(&r))
        .with_context(|| format!("cannot read {}", dir.journal_path().display()))
        .before_send()?;
    agg.figures().note_audit(&audit);
    let mut result = agg.finish();
    // An output the flags asked for that could not be written (`--jobs-csv`).
    if let Some(e) = result.problems.drain(..).next() {
        return Err(Failure::Input(e.into()));
    }
    super::finish::attach_prompts(&mut result, &record);
    // The run folder's reports: the flags `report` takes name no other file.
    let mut run = report::RunReport {
        result: &mut result,
        bench_text: &record.bench.text,
        baseline: None,
    };
    let outputs = report::outputs(&report::Asked::default());
    if let Some(e) = write_outputs(&outputs, &dir, &mut run).into_iter().next() {
        return Err(Failure::Input(e));
    }
    Ok((result, audit, record))
}
