//! The end of a run (or of `merge`): check the gates, write every report that can be
//! written, print the table, and decide the exit code.

use std::path::Path;

use super::baseline::{Reference, load_reference};
use super::compare::compare_results;
use super::{Exit, resume_command};
use crate::cli::GateArgs;
use crate::error::UsageError;
use promptgauge_report::{self as report, Output, RunReport, RunResult};
use promptgauge_runner::RunDir;
use promptgauge_runner::record::RunRecord;
use promptgauge_store::{Location, Recording, Store};

/// Where a finished run's results go besides its folder, and what it must pass.
pub(super) struct Outputs<'a> {
    pub gates: &'a GateArgs,
    /// The run `--baseline` named, found before anything was sent.
    pub baseline: Option<&'a Reference>,
    /// The history store to record the run in (`None`: `--no-store`).
    pub store: Option<Location>,
    /// The files the flags name besides the folder (`--junit`, `--markdown`).
    pub asked: report::Asked,
    pub quiet: bool,
    /// Whether this command sent requests: a report it cannot write is then exit 3 (the
    /// answers are paid for and journaled), else exit 2.
    pub sent: bool,
}

impl<'a> Outputs<'a> {
    /// What the flags of `run` or `merge` ask to be written (the store is added once it is
    /// known to be usable; `sent` is set by a command that sent nothing).
    pub(super) fn of(
        gates: &'a GateArgs,
        files: &'a crate::cli::OutputArgs,
        baseline: Option<&'a Reference>,
        quiet: bool,
    ) -> Outputs<'a> {
        Outputs {
            gates,
            baseline,
            store: None,
            asked: promptgauge_report::Asked {
                quiet,
                ..files.asked()
            },
            quiet,
            sent: true,
        }
    }

    /// [`Outputs::of`] for a command that sends nothing (`merge`, `import-results`): its
    /// store, unless `--no-store` (an unusable one is the error it was); a report it cannot
    /// write is an input error.
    pub(super) fn offline(
        gates: &'a GateArgs,
        files: &'a crate::cli::OutputArgs,
        baseline: Option<&'a Reference>,
        quiet: bool,
        no_store: bool,
        store: Result<promptgauge_store::Location, UsageError>,
    ) -> Result<Outputs<'a>, UsageError> {
        Ok(Outputs {
            store: if no_store { None } else { Some(store?) },
            sent: false,
            ..Outputs::of(gates, files, baseline, quiet)
        })
    }
}

/// How the sending ended: one of these, decided once from what the run saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Ending {
    /// Every job was sent (or not needed), whatever each one's fate.
    #[default]
    Finished,
    /// The provider stopped the run (401/403/402), or its first jobs all failed alike.
    Aborted,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The server looked down (most jobs failed the same passing way at once): the rest
    /// were not sent, for a resume with `--retry-failed` once it is back.
    Outage,
    /// The journal could not be written (a full disk).
    JournalFailed,
    /// `--batch`: batches still running when `--batch-wait` passed, for a resume.
    BatchesRunning,
    /// `--budget`: the next job could have passed it; the rest were not sent.
    BudgetReached,
}

/// The prompts report.html shows beside the answers, rendered again from the bench file
/// when it still measures what the run measured (its fingerprint); otherwise none are
/// shown. (`report` reads the bench again for this; a run passes the bench it ran.)
pub(super) fn attach_prompts(
    result: &mut RunResult,
    record: &promptgauge_runner::record::RunRecord,
) {
    if let Some(prompts) = promptgauge_report::prompts::Prompts::of_run(record) {
        attach(result, &prompts);
    }
}

/// [`attach_prompts`] from a bench in memory; `check` compares its fingerprint with the
/// run's first (a bench read again from disk may have changed).
pub(super) fn attach_prompts_from(
    result: &mut RunResult,
    record: &promptgauge_runner::record::RunRecord,
    bench: &promptgauge_suite::Bench,
    check: bool,
) {
    let borrowed = promptgauge_report::prompts::Held::Borrowed(bench);
    if let Some(prompts) = promptgauge_report::prompts::Prompts::new(borrowed, record, check) {
        attach(result, &prompts);
    }
}

/// Each shown answer's prompt, cut at SHOWN_PROMPT_BYTES; once the page's budget is spent,
/// left out.
fn attach(result: &mut RunResult, prompts: &promptgauge_report::prompts::Prompts<'_>) {
    use promptgauge_report::result::{SHOWN_PROMPT_BYTES, SHOWN_PROMPTS_BUDGET};
    let mut spent = 0;
    let cases: Vec<String> = result.answers.keys().cloned().collect();
    for case_id in cases {
        for arm in 0..prompts.variants() {
            if spent >= SHOWN_PROMPTS_BUDGET {
                result.prompts_left_out += 1;
                continue;
            }
            let Some(text) = prompts.render(&case_id, arm) else {
                continue;
            };
            let shown = if text.len() > SHOWN_PROMPT_BYTES {
                result.prompts_cut += 1;
                format!(
                    "{}\n[cut here: the prompt is {} bytes; the bench renders it in full]",
                    promptgauge_client::protocol::truncate(&text, SHOWN_PROMPT_BYTES),
                    text.len()
                )
            } else {
                text
            };
            spent += shown.len();
            result.prompts.insert((case_id.clone(), arm), shown);
        }
    }
}

/// Writes each of `outputs` for the run `run` reports: one that cannot be written is a
/// problem said with the others, and does not stop the rest.
pub(super) fn write_outputs(
    outputs: &[Box<dyn Output>],
    dir: &RunDir,
    run: &mut RunReport<'_>,
) -> Vec<anyhow::Error> {
    outputs
        .iter()
        .filter_map(|output| report::render::write(output.as_ref(), run, dir).err())
        .map(anyhow::Error::new)
        .collect()
}

/// The gates the run was asked to pass (the budget it ran to among them), and each one
/// checked against it.
fn gates_of(
    outputs: &Outputs<'_>,
    record: &RunRecord,
    result: &RunResult,
    baseline: Option<&report::compare::RunComparison>,
) -> (report::gates::Gates, Vec<report::gates::GateResult>) {
    let mut gates = outputs.gates.gates();
    gates.budget_usd = record.budget_usd;
    let checked = report::gates::evaluate(&gates, &result.summary, baseline, &result.latencies);
    (gates, checked)
}

/// Checks the gates, writes every report it can, prints the table, and decides the exit
/// code: 4 aborted by the provider, 130 interrupted, 3 incomplete (or a report or the
/// journal could not be written), 1 a gate failed, 5 a gate inconclusive, else 0. A report that cannot be written
/// does not stop the others, nor hide a failed gate.
pub(super) async fn conclude(
    dir: &RunDir,
    record: &RunRecord,
    mut result: RunResult,
    ending: Ending,
    outputs: &Outputs<'_>,
    mut problems: Vec<anyhow::Error>,
    bench: Option<&promptgauge_suite::Bench>,
) -> Exit {
    // An output that could not be written (a per-job file) is said like a report's.
    problems.extend(result.problems.drain(..).map(anyhow::Error::new));
    let baseline =
        compare_with_baseline(outputs.baseline, dir, record, &result, &mut problems).await;
    let (gates, checked) = gates_of(outputs, record, &result, baseline.as_ref());
    result.summary.gates = checked;
    // A run renders the prompts from the bench it ran (never read twice: a large bench is
    // the run's largest allocation); a merge has no bench in memory and shows none.
    if let Some(bench) = bench {
        attach_prompts_from(&mut result, record, bench, false);
    }
    // The run folder's reports are written before the run is recorded; then the terminal
    // table and the files the flags name.
    let (in_folder, named): (Vec<_>, Vec<_>) = report::outputs(&outputs.asked)
        .into_iter()
        .partition(|o| o.destination().in_folder());
    let mut run = RunReport {
        result: &mut result,
        bench_text: &record.bench.text,
        baseline: baseline.as_ref(),
    };
    problems.extend(write_outputs(&in_folder, dir, &mut run));
    let recorded = record_if_asked(outputs, record, &mut result, dir).await;
    if let Some(b) = &baseline {
        warn_if_nothing_compared(b);
    }
    let mut run = RunReport {
        result: &mut result,
        bench_text: &record.bench.text,
        baseline: baseline.as_ref(),
    };
    problems.extend(write_outputs(&named, dir, &mut run));
    say_gates_not_passed(&result.summary, &gates);
    // Said even when quiet: the run folder is under the current directory, not the
    // bench's (`run b --quiet` from b's parent writes ./reports), so one line says where.
    note!("reports: {}", dir.path().display());
    // Said after the reports line; a store that could not be written, even when quiet.
    match recorded {
        Some(Ok(line)) if !outputs.quiet => note!("{line}"),
        Some(Err(line)) => note!("{line}"),
        _ => {}
    }
    for e in &problems {
        note!("error: {e:#}");
    }
    exit_of(
        dir,
        record,
        &result,
        ending,
        outputs,
        &gates,
        !problems.is_empty(),
    )
}

/// One line for each gate that did not pass, and whether an inconclusive one fails the run.
fn say_gates_not_passed(summary: &report::Summary, gates: &report::gates::Gates) {
    for g in summary.gates.iter().filter(|g| !g.passed) {
        let policy = match g.outcome {
            report::gates::GateOutcome::Inconclusive if gates.inconclusive_passes => {
                " (--on-inconclusive pass: it does not fail the run)"
            }
            _ => "",
        };
        note!(
            "gate {}: {}: {}{policy}",
            g.outcome.word(),
            g.gate,
            g.reason
        );
    }
}

/// Records the run in the history store when one is asked for, once the reports are
/// written (the rows wait in their spool, not in memory, and the store's buffers never sit
/// beside report.html's); then the spool goes. What to say of it, when it was recorded.
async fn record_if_asked(
    outputs: &Outputs<'_>,
    record: &RunRecord,
    result: &mut RunResult,
    dir: &RunDir,
) -> Option<Result<String, String>> {
    let mut jobs = result.jobs.take()?;
    let recorded = match &outputs.store {
        Some(location) => {
            Some(record_in_store(location, record, &result.summary, &jobs, dir.path()).await)
        }
        None => None,
    };
    jobs.discard();
    recorded
}

/// Why the run stopped, as said after `error:`.
fn stop_reason(record: &RunRecord) -> String {
    record
        .stopped
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The exit code, and the lines that say why and what to do next: the provider stopped
/// the run (4), it was interrupted (130), incomplete (3: an outage, a full disk, failed or
/// missing jobs, a report not written), a gate failed (1), a gate could not tell and
/// `--on-inconclusive` is `fail` (5), else 0.
fn exit_of(
    dir: &RunDir,
    record: &RunRecord,
    result: &RunResult,
    ending: Ending,
    outputs: &Outputs<'_>,
    gates: &report::gates::Gates,
    problems: bool,
) -> Exit {
    if let Some(exit) = exit_of_ending(dir, record, ending) {
        return exit;
    }
    if incomplete(dir, result, gates) {
        return Exit::Incomplete;
    }
    if problems {
        if outputs.sent {
            note!(
                "the answers are in the journal; rewrite the reports with: promptgauge report {} (or {})",
                promptgauge_report::shell_path(dir.path()),
                resume_command(dir.path())
            );
            return Exit::Incomplete;
        }
        return Exit::Input;
    }
    let ended = |o| result.summary.gates.iter().any(|g| g.outcome == o);
    if ended(report::gates::GateOutcome::Failed) {
        return Exit::GateFailed;
    }
    if ended(report::gates::GateOutcome::Inconclusive) && !gates.inconclusive_passes {
        return Exit::GateInconclusive;
    }
    Exit::Success
}

/// The exit code of a run whose sending did not finish, and what to do next; `None` for
/// one that finished.
fn exit_of_ending(dir: &RunDir, record: &RunRecord, ending: Ending) -> Option<Exit> {
    let resume = || resume_command(dir.path());
    match ending {
        Ending::Finished => return None,
        Ending::Aborted => {
            note!("error: {}", stop_reason(record));
            return Some(Exit::Aborted);
        }
        Ending::Interrupted => {
            note!("resume with: {}", resume());
            return Some(Exit::Interrupted);
        }
        Ending::Outage => {
            note!("error: {}", stop_reason(record));
            note!(
                "once the server is back, send the rest and the failed jobs again: {} --retry-failed",
                resume()
            );
        }
        Ending::BatchesRunning => {
            note!("{}", stop_reason(record));
            note!(
                "collect them later (nothing is sent or paid again): {}",
                resume()
            );
        }
        Ending::BudgetReached => {
            note!("{}", stop_reason(record));
            note!(
                "send the rest with a larger budget (the run's spending so far counts): {} --budget USD",
                resume()
            );
        }
        Ending::JournalFailed => {
            note!(
                "error: {}; the jobs in the journal are kept",
                stop_reason(record)
            );
            note!("free some space, then resume with: {}", resume());
        }
    }
    Some(Exit::Incomplete)
}

/// Whether more jobs failed than `--allow-failures` allows, or some did not run; if so,
/// says so, and how to send again those that failed a passing way.
fn incomplete(dir: &RunDir, result: &RunResult, gates: &report::gates::Gates) -> bool {
    let summary = &result.summary;
    let not_needed = summary.sequential.as_ref().map_or(0, |s| s.jobs_not_needed);
    let missing = summary
        .run
        .jobs_planned
        .saturating_sub(summary.jobs_finished)
        .saturating_sub(not_needed);
    if summary.jobs_failed as u64 <= gates.allow_failures && missing == 0 {
        return false;
    }
    note!(
        "incomplete: {} jobs failed ({} allowed) and {missing} did not run; see {}",
        summary.jobs_failed,
        gates.allow_failures,
        dir.journal_path().display()
    );
    // Jobs a passing cause failed (a 5xx, a timeout, a cut stream) may answer now.
    let transient = result
        .failed
        .iter()
        .filter(|r| r.failed_transiently())
        .count();
    if transient > 0 && summary.sequential.is_none() {
        let of = if result.failed_total > result.failed.len() {
            format!("of the first {} failed", result.failed.len())
        } else {
            "of them".to_string()
        };
        note!(
            "{transient} {of} failed a passing way (an outage, overload or timeout); send them again with: {} --retry-failed",
            resume_command(dir.path())
        );
    }
    true
}

/// Records a finished run in the history store; says where (`Ok`) or, as a warning, why
/// not (`Err`). A store that cannot be written does not fail the run: the folder holds
/// everything, and `index` adds it later.
pub(super) async fn record_in_store(
    location: &Location,
    record: &RunRecord,
    summary: &promptgauge_report::Summary,
    jobs: &promptgauge_store::JobRows,
    folder: &Path,
) -> Result<String, String> {
    let recorded = async {
        let store = Store::open(location).await?;
        let done = store
            .record(&Recording {
                record,
                summary,
                jobs,
                folder,
            })
            .await;
        store.close().await;
        done
    }
    .await;
    // Commands that read the store find it without --store only where runs record.
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let flag_unless = |default: Option<std::path::PathBuf>| match (location.file(), default) {
        (Some(file), Some(d)) if canonical(file) == canonical(&d) => String::new(),
        (Some(file), _) => format!(" --store {}", promptgauge_report::shell_path(file)),
        // Its password is not shown: the user names it as they did.
        (None, _) => " --store URL (or with $PROMPTGAUGE_STORE set)".to_string(),
    };
    let file = promptgauge_store::DEFAULT_FILE;
    match recorded {
        Ok(()) => Ok(format!(
            "history: recorded in {}\n  see it with: promptgauge history{}",
            location.shown(),
            flag_unless(Some(Path::new(super::history::REPORTS).join(file)))
        )),
        Err(e) => Err(format!(
            "warning: {e:#}\n  the run folder holds everything: add it later with: promptgauge index {}{}",
            promptgauge_report::shell_path(folder),
            flag_unless(folder.parent().map(|root| root.join(file)))
        )),
    }
}

/// A usage error for a folder another process holds (or that cannot be locked).
pub(super) fn in_use(e: promptgauge_runner::lock::LockError) -> crate::error::Failure {
    crate::error::Failure::Input(UsageError(e.to_string()).into())
}

/// `--baseline`: this run against the earlier one; a baseline that cannot be read or
/// compared is a problem said with the others, and the gates that need it fail.
async fn compare_with_baseline(
    baseline: Option<&Reference>,
    dir: &RunDir,
    record: &RunRecord,
    result: &RunResult,
    problems: &mut Vec<anyhow::Error>,
) -> Option<report::compare::RunComparison> {
    match baseline {
        Some(base) => {
            // The levels were checked to agree before anything was sent.
            let compared =
                load_reference(base)
                    .await
                    .and_then(|(base, base_record, base_result)| {
                        compare_results(
                            (&base, &base_record, &base_result),
                            (dir.path(), record, result),
                            record.bench.confidence,
                        )
                    });
            match compared {
                Ok(b) => Some(b),
                Err(e) => {
                    problems.push(e.context("cannot compare with the baseline run"));
                    None
                }
            }
        }
        None => None,
    }
}

/// A baseline run that shares no graded case compared nothing: said, not left to look
/// like "no difference" (the comparison itself is the terminal table's, and baseline.json
/// the run folder's).
fn warn_if_nothing_compared(b: &report::compare::RunComparison) {
    if b.variants.iter().all(|v| v.comparison.cases == 0) {
        note!(
            "warning: the baseline run {} shares no graded case with this run: nothing was compared",
            b.run_a.dir
        );
    }
}
