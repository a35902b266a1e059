//! Runs by name: `--baseline` and `compare` take a run folder, a run id, `latest` or
//! `latest:BRANCH`, resolved through the history store. A stored run whose folder is gone
//! still compares: its summary and per-job scores in the store suffice for the paired
//! comparison (report.html's answers, which live in the journal, are then not shown).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::{Failure, load};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_report::RunResult;
use promptgauge_report::compare::CaseTable;
use promptgauge_report::summary::{Latencies, Summary};
use promptgauge_runner::record::RunRecord;
use promptgauge_store::{Filter, Location, RunRow, Store};

/// A run, found.
#[derive(Debug, Clone)]
pub(super) enum Reference {
    /// A run folder on this machine.
    Folder(PathBuf),
    /// A run the store holds and whose folder is not here.
    Stored {
        location: Location,
        run: Box<RunRow>,
        /// Its run.json and summary, read (and checked) when it was found.
        documents: Box<(RunRecord, Summary)>,
    },
}

impl Reference {
    /// What it measured, as the figures name it (its variants, or `ENDPOINT/VARIANT` for a
    /// run of several endpoints); `None` when its run.json cannot be read here.
    pub(super) fn arms(&self) -> Option<Vec<String>> {
        match self {
            Reference::Folder(p) => promptgauge_runner::RunDir::at(p)
                .read_record()
                .ok()
                .map(|r| r.plan.arms()),
            Reference::Stored { documents, .. } => Some(documents.0.plan.arms()),
        }
    }

    /// As reports name it.
    pub(super) fn shown(&self) -> String {
        match self {
            Reference::Folder(p) => p.display().to_string(),
            Reference::Stored { run, .. } => format!("{} (from the history store)", run.run_id),
        }
    }
}

/// Whether `name` is one the store resolves rather than a path.
fn by_name(name: &str) -> bool {
    name == "latest" || name.starts_with("latest:")
}

/// Finds the run `name` means: a folder when one is there, else the store's run. `bench`
/// is the bench `latest` is the latest of (`None`: the store's only bench).
pub(super) async fn resolve(
    name: &str,
    bench: Option<&str>,
    location: &Result<Location, UsageError>,
    what: &str,
) -> Result<Reference, Failure> {
    let path = Path::new(name);
    if !by_name(name) && (path.join("run.json").is_file() || path.is_dir()) {
        return Ok(Reference::Folder(path.to_path_buf()));
    }
    if name == "latest:" {
        return Err(UsageError::with_fix(
            format!("{what} {name} names no branch"),
            "write latest:BRANCH (e.g. latest:main), or latest for any branch",
        )
        .into());
    }
    // Only a name the store resolves needs the store's address to be right.
    let location = location.as_ref().map_err(UsageError::clone)?;
    if let Some(file) = location.file()
        && !file.is_file()
    {
        let looked = if by_name(name) {
            format!(
                "{what} {name} is looked up in the history store, and there is none at {}",
                file.display()
            )
        } else {
            format!(
                "{what} {name}: no run folder there, and no history store at {} to look the run id up in",
                file.display()
            )
        };
        return Err(UsageError::with_fix(
            looked,
            "name a run folder, or the store runs were recorded in (--store, $PROMPTGAUGE_STORE; a run records into promptgauge.db beside its run folder)",
        )
        .into());
    }
    let store = Store::open_existing(location).await.before_send()?;
    let found = find(&store, name, bench, what).await;
    // Its folder, when it is still here and still holds this run.
    let in_folder = |run: &RunRow| {
        promptgauge_runner::RunDir::at(&run.folder)
            .read_record()
            .is_ok_and(|r| r.run_id == run.run_id)
    };
    // A run only the store holds must be readable now: nothing is sent for a baseline
    // that is not.
    let documents = match &found {
        Ok(run) if !in_folder(run) => Some(
            store
                .documents(&run.run_id)
                .await
                .map_err(|e| Failure::from(UsageError(format!("{what} {name}: {e:#}")))),
        ),
        _ => None,
    };
    store.close().await;
    let run = found?;
    if by_name(name) {
        note!(
            "{what} {name}: run {} of {}{}",
            run.run_id,
            run.started_at,
            run.git_branch
                .as_deref()
                .map(|b| format!(" on {b}"))
                .unwrap_or_default()
        );
    }
    Ok(match documents {
        None => Reference::Folder(PathBuf::from(&run.folder)),
        Some(documents) => Reference::Stored {
            location: location.clone(),
            run: Box::new(run),
            documents: Box::new(documents?),
        },
    })
}

async fn find(
    store: &Store,
    name: &str,
    bench: Option<&str>,
    what: &str,
) -> Result<RunRow, Failure> {
    if !by_name(name) {
        let runs = store
            .runs(&Filter {
                run_id: Some(name.to_string()),
                ..Filter::default()
            })
            .await
            .before_send()?;
        if let Some(run) = runs.into_iter().next() {
            return Ok(run);
        }
        // A run folder's name, as `ls reports` shows it, names its run too.
        let all = store.runs(&Filter::default()).await.before_send()?;
        let mut named = all
            .into_iter()
            .filter(|r| Path::new(&r.folder).file_name().and_then(|f| f.to_str()) == Some(name));
        return match (named.next(), named.next()) {
            (Some(run), None) => Ok(run),
            (Some(_), Some(_)) => Err(UsageError::with_fix(
                format!("{what} {name}: several stored runs had a folder of that name"),
                "name the run by its id (promptgauge runs lists them)",
            )
            .into()),
            (None, _) => Err(not_found(store, name, what)),
        };
    }
    let bench = match bench {
        Some(b) => b.to_string(),
        None => only_bench(store, what, "--bench NAME").await?,
    };
    let branch = name.strip_prefix("latest:").map(String::from);
    let filter = Filter {
        bench: Some(bench.clone()),
        branch: branch.clone(),
        ..Filter::default()
    };
    let runs = store.runs(&filter).await.before_send()?;
    let variants = store.variants(&filter).await.before_send()?;
    let mut passed_over = None;
    for run in runs.into_iter().rev() {
        match untrusted(&run, variants.get(&run.run_id).map_or(&[], Vec::as_slice)) {
            None => return Ok(run),
            Some(why) => {
                passed_over.get_or_insert((run.run_id, why));
            }
        }
    }
    let on = branch
        .map(|b| format!(" on branch {b}"))
        .unwrap_or_default();
    let newest = passed_over
        .map(|(id, why)| format!("; the newest, {id}, {why}"))
        .unwrap_or_default();
    Err(UsageError::with_fix(
        format!(
            "{what} {name}: the history store {} has no run of bench `{bench}`{on} that a gate can trust (finished, whole, with graded answers in every variant and no more failed jobs than it allowed){newest}",
            store.shown()
        ),
        "run the bench there first (a run records itself unless --no-store), or name a run folder or run id",
    )
    .into())
}

/// Why a stored run is no baseline a gate can trust, if it is not: it did not finish
/// (stopped, or jobs missing), it is a shard (part of the cases), more of its jobs failed
/// than it allowed, or a variant has no graded answer (a comparison with it would compare
/// nothing, and a gate that compared nothing would pass).
fn untrusted(r: &RunRow, variants: &[promptgauge_store::VariantRow]) -> Option<String> {
    if r.kind == promptgauge_report::rows::RunKind::Shard {
        return Some("is a shard (part of the cases)".into());
    }
    if let Some(why) = &r.stopped {
        return Some(format!("stopped early ({why})"));
    }
    if !r.complete && r.jobs_finished < r.jobs_planned {
        return Some(format!(
            "finished {} of its {} jobs",
            r.jobs_finished, r.jobs_planned
        ));
    }
    if r.jobs_failed > r.allowed_failures {
        return Some(format!(
            "had {} failed jobs of {} ({} allowed)",
            r.jobs_failed, r.jobs_finished, r.allowed_failures
        ));
    }
    if variants.is_empty() {
        return Some("has no variants recorded".into());
    }
    let empty: Vec<&str> = variants
        .iter()
        .filter(|v| v.n == 0)
        .map(|v| v.variant.as_str())
        .collect();
    if !empty.is_empty() {
        return Some(format!("graded no answer of {}", empty.join(", ")));
    }
    None
}

/// The bench a command names, checked against the store; with none named, the store's
/// only bench. A bench the store lacks, or several to choose from, is an error that
/// lists them; `how` says how the command takes a bench name.
pub(super) async fn bench_in(
    store: &Store,
    named: Option<&str>,
    what: &str,
    how: &str,
) -> Result<String, Failure> {
    let Some(name) = named else {
        return only_bench(store, what, how).await;
    };
    let benches = store.benches().await.before_send()?;
    if benches.iter().any(|(b, _)| b == name) {
        return Ok(name.to_string());
    }
    Err(UsageError::with_fix(
        format!(
            "{what}: the history store {} has no run of bench `{name}`{}",
            store.shown(),
            listing(&benches)
        ),
        format!("name one of them ({how})"),
    )
    .into())
}

/// `; it holds: a (3 runs), b (1 run)`.
fn listing(benches: &[(String, i64)]) -> String {
    if benches.is_empty() {
        return "; it holds no runs".into();
    }
    let list: Vec<String> = benches
        .iter()
        .map(|(b, n)| format!("{b} ({n} run{})", if *n == 1 { "" } else { "s" }))
        .collect();
    format!("; it holds: {}", list.join(", "))
}

/// A run id (or folder name) the store does not know.
fn not_found(store: &Store, name: &str, what: &str) -> Failure {
    UsageError::with_fix(
        format!(
            "{what} {name}: there is no run folder {name}, and the history store {} has no run with that id",
            store.shown()
        ),
        "name a run folder, `latest`, or a run id from `promptgauge runs`",
    )
    .into()
}

/// The store's one bench; several are an error that names them.
async fn only_bench(store: &Store, what: &str, how: &str) -> Result<String, Failure> {
    let benches = store.benches().await.before_send()?;
    match benches.as_slice() {
        [(one, _)] => Ok(one.clone()),
        [] => Err(UsageError::with_fix(
            format!("the history store {} holds no runs", store.shown()),
            "run a bench (runs record themselves), or build the store from run folders: promptgauge index reports",
        )
        .into()),
        many => Err(UsageError::with_fix(
            format!(
                "{what}: the history store {} holds several benches{}",
                store.shown(),
                listing(many)
            ),
            format!("name one ({how})"),
        )
        .into()),
    }
}

/// A found run's record and result: read from its folder, or rebuilt from the store.
pub(super) async fn load_reference(
    reference: &Reference,
) -> anyhow::Result<(PathBuf, RunRecord, RunResult)> {
    match reference {
        Reference::Folder(path) => {
            let (_, record, result) = load(path)?;
            Ok((path.clone(), record, result))
        }
        Reference::Stored {
            location,
            run,
            documents,
        } => {
            let store = Store::open_existing(location).await?;
            let jobs = store.jobs(&run.run_id).await;
            store.close().await;
            let jobs = jobs?;
            let (mut record, summary) = (**documents).clone();
            restore_cases(&mut record, &jobs);
            let result = stored_result(&record, summary, &jobs);
            Ok((
                PathBuf::from(format!("store:{}", run.run_id)),
                record,
                result,
            ))
        }
    }
}

/// A stored record's case ids and hashes, from its job rows (the store keeps them there).
fn restore_cases(record: &mut RunRecord, jobs: &[promptgauge_store::ScoreRow]) {
    if !record.bench.case_ids.is_empty() {
        return;
    }
    let mut cases: Vec<(&str, Option<u64>)> = jobs
        .iter()
        .map(|j| (j.case_id.as_str(), j.case_hash))
        .collect();
    cases.dedup_by(|a, b| a.0 == b.0);
    record.bench.case_ids = cases.iter().map(|c| c.0.to_string()).collect();
    // Hashes align with the ids, or are left out (runs from before they were kept).
    record.bench.case_hashes = cases
        .iter()
        .map(|c| c.1)
        .collect::<Option<_>>()
        .unwrap_or_default();
}

/// What a comparison needs of a run, from its stored summary and per-job rows.
pub(crate) fn stored_result(
    record: &RunRecord,
    summary: Summary,
    jobs: &[promptgauge_store::ScoreRow],
) -> RunResult {
    // The stored rows name their arm: the variant, or `ENDPOINT/VARIANT` in a grid.
    let names = record.plan.arms();
    let arms: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_str(), i))
        .collect();
    let mut cases = CaseTable::new(arms.len());
    let mut latencies = vec![Latencies::default(); arms.len()];
    for j in jobs {
        let Some(&arm) = arms.get(j.variant.as_str()) else {
            continue;
        };
        if let Some(g) = &j.group {
            cases.set_group(&j.case_id, g);
        }
        if let Some(score) = j.score {
            cases.add(&j.case_id, &[], arm, score);
        }
        if let Some(l) = j.latency_ms {
            latencies[arm].latency_ms.push(l);
        }
    }
    for l in &mut latencies {
        l.latency_ms.sort_by(f64::total_cmp);
    }
    RunResult {
        failed_total: summary.jobs_failed,
        summary,
        cases,
        latencies,
        disagreements: BTreeMap::new(),
        failed: Vec::new(),
        junit: None,
        answers: BTreeMap::new(),
        answers_total: 0,
        prompts: HashMap::new(),
        prompts_cut: 0,
        prompts_left_out: 0,
        jobs: None,
        problems: Vec::new(),
    }
}
