//! The commands, one file each: each turns plain settings from [`crate::cli`] into library
//! calls and returns an exit code (or a [`Failure`], whose type is the exit code).

/// Prints a line to stdout; a closed pipe (`promptgauge run | head`) is not an error.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // What a server or a model wrote may be in it: shown, never obeyed.
        let _ = writeln!(
            std::io::stdout(),
            "{}",
            ::promptgauge_report::terminal::shown(
                ::promptgauge_report::terminal::Stream::Stdout,
                &format!($($arg)*)
            )
        );
    }};
}

/// Prints a line to stderr, ignoring a closed pipe.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "{}",
            ::promptgauge_report::terminal::shown(
                ::promptgauge_report::terminal::Stream::Stderr,
                &format!($($arg)*)
            )
        );
    }};
}

mod after;
mod attachments;
mod baseline;
mod budget;
mod check;
mod compare;
mod fetch;
mod finish;
mod history;
mod import;
mod init;
mod label;
mod merge;
mod mock;
mod plan;
mod preflight;
mod report;
mod results;
mod run;
mod schema;
mod settings;
mod shell;
mod source;
mod view;

pub use check::check;
pub use compare::compare;
pub use history::{history, index, runs};
pub use import::import;
pub use init::init;
pub use label::label;
pub use merge::merge;
pub use mock::mock;
pub use plan::plan;
pub use report::report;
pub use results::import_results;
pub use run::run;
pub use schema::schema;
pub(crate) use settings::Prepared;
pub use settings::{Env, resolve_shard};
pub use shell::{completions, man};
pub use view::view;

pub use crate::error::{Exit, Failure};

/// Writes generated text (a completion script, a manual page, a schema) to stdout as it
/// is, neither wrapped nor filtered as messages are; a closed pipe is not an error.
fn print_verbatim(bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::Input(
            anyhow::anyhow!("cannot write to stdout: {e}"),
        )),
        _ => Ok(()),
    }
}

pub(crate) use promptgauge_report::text::count;

/// The bench `run` and `check` use when none is named.
pub(crate) const DEFAULT_BENCH: &str = "promptgauge.yaml";

const SIMULATED_BANNER: &str = "\
================================================================================
  SIMULATED PROVIDER — promptgauge's built-in simulator is answering (no base
  URL is configured, or it is `mock`) with a deterministic fake model. The
  numbers below do not describe any real model. To measure one, pass
  --base-url URL (or set PROMPTGAUGE_BASE_URL / endpoint.base_url) and --model.
================================================================================";

/// Base URLs as they may be shown and stored: without credentials.
fn shown_urls(urls: &[String]) -> Vec<String> {
    urls.iter()
        .map(|u| promptgauge_client::secrets::redact_url(u))
        .collect()
}

/// The command that continues a run folder.
fn resume_command(dir: &std::path::Path) -> String {
    format!(
        "promptgauge run --resume {}",
        promptgauge_report::shell_path(dir)
    )
}

/// The outputs that hear every counted job, one line each (the JUnit spool lives in the
/// run folder and is the aggregator's own; the Markdown is written from the summary).
fn sinks(
    outputs: &crate::cli::OutputArgs,
    record: &promptgauge_runner::record::RunRecord,
) -> Vec<Box<dyn promptgauge_report::sinks::Sink>> {
    let mut sinks: Vec<Box<dyn promptgauge_report::sinks::Sink>> = Vec::new();
    if let Some(path) = &outputs.jobs_csv {
        sinks.push(Box::new(promptgauge_report::jobs_csv::JobsCsv::create(
            path,
            record.arm_prices(),
            !record.plan.endpoints.is_empty(),
        )));
    }
    sinks
}

/// The aggregator for a run's reports (with a JUnit spool in the run folder when asked),
/// with the folder's labels, if people have labelled any answers.
fn aggregator(
    dir: &promptgauge_runner::RunDir,
    record: &promptgauge_runner::record::RunRecord,
    outputs: &crate::cli::OutputArgs,
) -> Result<Figures, crate::error::UsageError> {
    aggregator_with(dir, record, outputs, None)
}

/// A run's figures behind its sequential tests (with `--until-decided`; else every record
/// counts): what every way of reading a run feeds its records to.
pub(super) type Figures = promptgauge_runner::sequential::Decider<promptgauge_report::Aggregator>;

/// [`aggregator`] for a live `--until-decided` run, whose tests also pace the runner.
pub(super) fn aggregator_with(
    dir: &promptgauge_runner::RunDir,
    record: &promptgauge_runner::record::RunRecord,
    outputs: &crate::cli::OutputArgs,
    live: Option<promptgauge_runner::sequential::Steering>,
) -> Result<Figures, crate::error::UsageError> {
    let (labels, torn) = promptgauge_report::labels::of_run(&dir.labels()).map_err(|m| {
        crate::error::UsageError::with_fix(m, "fix the line, or remove it from labels.jsonl")
    })?;
    if let Some(torn) = torn {
        note!(
            "note: {}",
            promptgauge_report::labels::torn_note(&dir.labels(), torn)
        );
    }
    let mut agg = promptgauge_report::Aggregator::new(promptgauge_report::AggregatorSettings {
        run: promptgauge_report::RunInfo {
            folder: Some(promptgauge_report::shell_path(dir.path())),
            ..record.info()
        },
        variants: record.plan.variants.clone(),
        endpoints: record.plan.endpoints.clone(),
        price: record.bench.price.clone(),
        arm_prices: record.arm_prices(),
        planned: record.plan_keys().planned(),
        junit_spool: outputs.junit.is_some().then(|| dir.junit_spool()),
        judge_price: record.judge_price(),
        labels,
    });
    // The run's other outputs, as the flags ask for them.
    for sink in sinks(outputs, record) {
        agg.add_sink(sink);
    }
    // A `--best` shard's records are one block of the search's order: `merge` searches.
    let searched_elsewhere = record.plan.shard.is_some();
    let tests = record
        .plan
        .sequential
        .as_ref()
        .filter(|plan| !(searched_elsewhere && plan.shards_in_blocks()))
        .map(|plan| {
            let tests = promptgauge_runner::sequential::Sequential::new(
                plan,
                &record.bench.case_ids,
                &record.plan.arms(),
                record.plan.repeats,
                record.bench.confidence,
                live,
            );
            match record.plan.endpoints.len() {
                0 => tests,
                endpoints => tests.grid(record.plan.variants.len(), endpoints),
            }
        });
    Ok(promptgauge_runner::sequential::Decider::new(tests, agg))
}

/// Reads a finished run folder once: its record and what its journal adds up to.
fn load(
    path: &std::path::Path,
) -> anyhow::Result<(
    promptgauge_runner::RunDir,
    promptgauge_runner::record::RunRecord,
    promptgauge_report::RunResult,
)> {
    load_with(path, false)
}

/// [`load`], keeping one row per job for the history store when `rows`.
fn load_with(
    path: &std::path::Path,
    rows: bool,
) -> anyhow::Result<(
    promptgauge_runner::RunDir,
    promptgauge_runner::record::RunRecord,
    promptgauge_report::RunResult,
)> {
    use anyhow::Context;
    let dir = promptgauge_runner::RunDir::at(path);
    let _reading = dir
        .read_lock()
        .map_err(|e| crate::error::UsageError(e.to_string()))?;
    let record = dir
        .read_record()
        .map_err(|e| crate::error::UsageError(format!("{e:#}")))?;
    let mut agg = aggregator(&dir, &record, &Default::default())?;
    if rows {
        agg.figures().keep_rows(&record.bench.case_ids, None);
    }
    let (audit, _) = dir
        .replay(&record.plan_keys(), |r| agg.add(&r))
        .with_context(|| format!("cannot read the journal in {}", path.display()))?;
    agg.figures().note_audit(&audit);
    Ok((dir, record, agg.finish()))
}
