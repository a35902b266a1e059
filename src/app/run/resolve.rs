//! A run resolved before anything is sent: its settings (the plan, the endpoint, the
//! judge), the history store and the baseline, every mistake an input error.

use std::path::Path;

use anyhow::Context;

use super::embeddings::check_embedding_endpoints;
use super::resume::{check_resume_flags, resumed_plan};
use crate::app::finish::in_use;
use crate::app::settings::Env;
use crate::app::settings::RunSettings;
use crate::app::{Failure, Prepared};
use crate::cli::{PlanArgs, RunArgs};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_report::gates::Unresolved;
use promptgauge_runner::RunDir;
use promptgauge_runner::record::RunRecord;

/// Resolves flags, bench, environment and the run folder being resumed into [`Resolved`]
/// (the flags, the bench and its endpoints once, into its [`RunSettings`]) and checks what
/// it asks; every error is an input error (nothing sent).
pub(super) async fn resolve(args: &RunArgs, env: &Env) -> Result<Resolved, Failure> {
    // A run folder is written by one process: take it before reading anything in it.
    let resumed = match &args.resume {
        Some(path) => {
            let dir = RunDir::at(path);
            let lock = dir.lock().map_err(in_use)?;
            let record = dir
                .read_record()
                .map_err(|e| UsageError(format!("{e:#}")))?;
            Some((dir, record, lock))
        }
        None => None,
    };
    let plan_args = match &resumed {
        Some((_, record, _)) => resumed_plan(&args.plan, record),
        None => PlanArgs {
            // Points on the command line; a share in the plan.
            max_drop: args.gates.max_drop.map(|p| p / 100.0),
            ..args.plan.clone()
        },
    };
    if let Some((dir, record, _)) = &resumed {
        check_resume_flags(args, dir, record)?;
    }
    let settings = RunSettings::resolve(&plan_args, args, env).await?;
    let p = &settings.plan;
    check_gates(p, &settings.gates)?;
    check_embedding_endpoints(p)?;
    // Every report file must be writable, and the baseline run readable, before a single
    // request is paid for.
    for path in args.outputs.files() {
        check_writable(path).before_send()?;
    }
    // The history store: beside the run folders unless named.
    let root = match &args.resume {
        Some(path) => path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        None => args.out.clone(),
    };
    let store = crate::app::settings::store_location(args.store.store.as_deref(), env, &root).map(
        |(location, named)| match (&resumed, named) {
            // A resumed run goes where it was first recorded, unless told otherwise.
            (Some((_, record, _)), false) => recorded_store(record).unwrap_or(location),
            _ => location,
        },
    );
    // A store that cannot be named right is said before anything is done.
    if let (false, Err(e)) = (args.store.no_store, &store) {
        return Err(e.clone().into());
    }
    let baseline = baseline_of(
        args.gates.baseline.as_deref(),
        &p.bench.name,
        p.bench.confidence,
        &store,
    )
    .await?;
    check_baseline_pairs(p, baseline.as_ref())?;
    Ok(Resolved {
        resumed,
        settings,
        against: Against { store, baseline },
    })
}

/// What a run is, resolved before anything is sent: the folder to resume (locked), the
/// run's settings (the plan, the endpoint, the judge), the history store and the baseline.
pub(super) struct Resolved {
    pub(super) resumed: Option<(RunDir, RunRecord, promptgauge_runner::lock::RunLock)>,
    pub(super) settings: RunSettings,
    pub(super) against: Against,
}

/// What the run's end is recorded in and held against.
pub(super) struct Against {
    /// The history store (`--store`, …); a store that cannot be named is the error it was,
    /// said only when the run is recorded.
    pub(super) store: Result<promptgauge_store::Location, UsageError>,
    /// The earlier run `--baseline` names.
    pub(super) baseline: Option<crate::app::baseline::Reference>,
}

/// Every gate asked for must be one the run can evaluate: known before anything is sent.
pub(crate) fn check_gates(p: &Prepared, gates: &crate::cli::GateArgs) -> Result<(), UsageError> {
    // A gate the bench's `gates:` sets is asked as its flag is.
    for (flag, asked, what) in [
        (
            "--max-cost",
            gates.max_cost.is_some(),
            "the whole run's cost",
        ),
        (
            "--max-cost-per-job",
            gates.max_cost_per_job.is_some(),
            "each job's cost",
        ),
    ] {
        if asked && let Some((said, fix)) = p.unpriced_said() {
            return Err(UsageError::with_fix(
                format!("{flag} needs {what}, and {said}"),
                format!("{fix}; or drop {flag} (or the bench's `gates:` entry)"),
            ));
        }
    }
    if !gates.min_pass_all.is_empty() && p.bench.repeats < 2 {
        return Err(UsageError::with_fix(
            format!(
                "--min-pass-all gates pass^k, the share of cases right all k repeats, and this run answers each case {} time",
                p.bench.repeats
            ),
            "set `repeats: 3` in the bench (or --repeats 3), or drop --min-pass-all",
        ));
    }
    let arms = ArmNames::of(p);
    check_gate_names(p, gates, &arms)?;
    if gates.fail_if_not_best && p.sequential.as_ref().is_none_or(|s| s.best.is_none()) {
        return Err(UsageError::with_fix(
            "--fail-if-not-best asks whether the baseline is in --best's answer, and this run searches nothing",
            "add --best",
        ));
    }
    let compared = arms.cells.len() > 1 || gates.baseline.is_some();
    for (flag, asked) in [
        ("--max-drop", gates.max_drop.is_some()),
        ("--fail-if-worse", gates.fail_if_worse),
    ] {
        if asked && !compared {
            return Err(UsageError::with_fix(
                format!("{flag} compares variants with the baseline, and this run has one variant"),
                "run two or more variants (the first is the baseline), or give --baseline RUN_DIR",
            ));
        }
    }
    Ok(())
}

/// The names a gate may give the run's variants: a variant's, and in a run of several
/// endpoints a cell's (`ENDPOINT/VARIANT`) or an endpoint's.
struct ArmNames {
    variants: Vec<String>,
    endpoints: Vec<String>,
    cells: Vec<String>,
}

impl ArmNames {
    fn of(p: &Prepared) -> ArmNames {
        let (variants, endpoints) = (p.variant_names(), p.endpoint_names());
        let cells = promptgauge_suite::plan::arm_names(&variants, &endpoints);
        ArmNames {
            variants,
            endpoints,
            cells,
        }
    }

    fn has(&self, name: &str) -> bool {
        [&self.variants, &self.cells, &self.endpoints]
            .into_iter()
            .flatten()
            .any(|n| n == name)
    }

    /// `flag` names `name`, which is none of them: the names it may give.
    fn refused(&self, flag: &str, name: &str, also: &str) -> UsageError {
        UsageError::with_fix(
            format!("{flag} names `{name}`, which is not a variant of this run{also}"),
            if self.endpoints.is_empty() {
                format!("variants: {}", self.variants.join(", "))
            } else {
                format!(
                    "name a variant ({}), an endpoint ({}) or one of them at one endpoint (e.g. {})",
                    self.variants.join(", "),
                    self.endpoints.join(", "),
                    self.cells.last().map_or("", String::as_str)
                )
            },
        )
    }
}

/// Each `--min-accuracy` names variants and a part the run has, read one way
/// (docs/guide/ci.md, "A gate on a part"); each `--min-pass-all` a variant.
fn check_gate_names(
    p: &Prepared,
    gates: &crate::cli::GateArgs,
    arms: &ArmNames,
) -> Result<(), UsageError> {
    let parts = promptgauge_grade::part_names(&p.bench);
    for min in &gates.min_accuracy {
        match min.target(|v| arms.has(v), |part| parts.iter().any(|n| n == part)) {
            Ok(_) => {}
            Err(Unresolved::Variant(v)) => return Err(arms.refused("--min-accuracy", &v, "")),
            Err(Unresolved::Part(part)) => return Err(no_such_part(&part, &parts)),
            Err(e @ Unresolved::Both(..)) => {
                return Err(UsageError::with_fix(
                    format!("--min-accuracy {}", e.said(&parts)),
                    "rename the variant (its `name:`) or the part (a scorer's `name:`, a criterion's, a field), so that the name reads one way",
                ));
            }
        }
    }
    // pass^k is the whole score's: the whole name before `=` is a variant's.
    for min in &gates.min_pass_all {
        if let Some(v) = min.name()
            && !arms.has(&v)
        {
            let also = match &min.part {
                Some(part) if parts.contains(part) => {
                    " (a part has no pass^k: --min-accuracy VARIANT@PART=P holds a part)"
                }
                _ => "",
            };
            return Err(arms.refused("--min-pass-all", &v, also));
        }
    }
    Ok(())
}

/// A gate naming a part the bench's score does not have, with the parts it has.
fn no_such_part(part: &str, parts: &[String]) -> UsageError {
    let fix = if parts.is_empty() {
        "this bench's score has no parts: they are a `fields` scorer's fields, the scorers of `all`/`any`/`mean` and a judge's `criteria` (docs/guide/scorers.md, \"Parts\"); gate the whole score with --min-accuracy [VARIANT=]P".to_string()
    } else {
        format!(
            "name one of the bench's parts: {} (`@PART=P` for every variant's, `VARIANT@PART=P` for one's)",
            parts.join(", ")
        )
    };
    UsageError::with_fix(
        format!("--min-accuracy names the part `{part}`, which this bench's score does not have"),
        fix,
    )
}

/// A baseline run that shares no cell with this run could never be compared: refused
/// before anything is bought (a run of several endpoints names its cells
/// `ENDPOINT/VARIANT`; a run of one names its variants).
pub(super) fn check_baseline_pairs(
    p: &Prepared,
    baseline: Option<&crate::app::baseline::Reference>,
) -> Result<(), UsageError> {
    let Some((b, theirs)) = baseline.and_then(|b| Some((b, b.arms()?))) else {
        return Ok(());
    };
    let ours = promptgauge_suite::plan::arm_names(&p.variant_names(), &p.endpoint_names());
    if ours.iter().any(|a| theirs.contains(a)) {
        return Ok(());
    }
    let grid = |arms: &[String]| arms.iter().any(|a| a.contains('/'));
    Err(UsageError::with_fix(
        format!(
            "--baseline {} measured {}; this run measures {}: no variant of one is a variant of the other, so nothing could be compared",
            b.shown(),
            theirs.join(", "),
            ours.join(", ")
        ),
        if grid(&theirs) != grid(&ours) {
            "a run of several endpoints names its variants ENDPOINT/VARIANT: compare it with a run of the same endpoints (or a run of one endpoint with another of one endpoint)"
        } else {
            "name a baseline run of the same bench and variants"
        },
    ))
}

/// Fails when a report file cannot be written (its folder is missing or read-only), so the
/// run is refused before anything is sent rather than losing the report after.
pub(super) fn check_writable(path: &Path) -> anyhow::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .with_context(|| {
            format!(
                "cannot write {}\n  fix: create its folder, or name a file you can write",
                path.display()
            )
        })
}

/// The store a run was first recorded in, when a resume can record there again: a SQLite
/// file. A PostgreSQL store's password was not kept: the resume says how to name it.
pub(super) fn recorded_store(record: &RunRecord) -> Option<promptgauge_store::Location> {
    let text = record.store.as_deref()?;
    match promptgauge_store::Location::parse(text) {
        Ok(promptgauge_store::Location::Sqlite(p)) => Some(promptgauge_store::Location::Sqlite(p)),
        _ => {
            note!(
                "note: this run was recorded in {text}; pass --store URL (or set $PROMPTGAUGE_STORE) to record the resumed run there too"
            );
            None
        }
    }
}

/// The run `--baseline NAME` means (`None` without the flag), found and checked before
/// anything is sent: it must be readable and measured at this run's confidence level.
pub(in crate::app) async fn baseline_of(
    name: Option<&str>,
    bench: &str,
    confidence: f64,
    store: &Result<promptgauge_store::Location, UsageError>,
) -> Result<Option<crate::app::baseline::Reference>, Failure> {
    use crate::app::baseline::Reference;
    let Some(name) = name else {
        return Ok(None);
    };
    let what = "--baseline";
    let reference = crate::app::baseline::resolve(name, Some(bench), store, what).await?;
    let earlier = match &reference {
        Reference::Folder(path) => {
            let dir = RunDir::at(path);
            let _reading = dir.read_lock().map_err(|e| UsageError(e.to_string()))?;
            dir.read_record()
                .map_err(|e| {
                    UsageError::with_fix(
                        format!("{what}: {e:#}"),
                        "name the folder of an earlier run of this bench",
                    )
                })?
                .bench
                .confidence
        }
        Reference::Stored { run, .. } => run.confidence,
    };
    if (earlier - confidence).abs() > 1e-12 {
        return Err(UsageError::with_fix(
            format!(
                "{what} {} was run at {}% confidence and this bench is at {}%: a comparison needs one level",
                reference.shown(),
                earlier * 100.0,
                confidence * 100.0
            ),
            format!(
                "set `confidence: {earlier}` in the bench, or compare later with `promptgauge compare --confidence`"
            ),
        )
        .into());
    }
    Ok(Some(reference))
}
