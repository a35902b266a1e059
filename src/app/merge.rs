//! `merge`: the run folders of one plan's shards combined into one run folder. Each shard's
//! journal is read once: its records go to the merged journal and the aggregator together.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::finish::{Ending, Outputs, conclude};
use super::{Exit, Failure, aggregator};
use crate::cli::MergeArgs;
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_base::clock::utc_now;
use promptgauge_runner::RunDir;
use promptgauge_runner::record::RunRecord;

/// `merge`: combines the run folders of `run --shard i/n` into one run.
pub async fn merge(args: &MergeArgs, env: &crate::app::settings::Env) -> Result<Exit, Failure> {
    let runs = shard_folders(&args.runs)?;
    let args = &MergeArgs {
        runs,
        ..args.clone()
    };
    let shards: Vec<RunDir> = args.runs.iter().map(RunDir::at).collect();
    // Held until the merge is written: no shard may be resumed while it is read.
    let (_locks, records) = read_shards(&shards)?;
    let first = &records[0];
    let (count, seen) = check_shards(&args.runs, &records)?;
    let root = root_of(args);
    let missing = missing_shards(count, &seen);
    let mut record = merged_record(&records, &missing);
    record.allowed_failures = args.gates.allow_failures;

    let store =
        crate::app::settings::store_location(args.store.store.as_deref(), env, &root).map(|s| s.0);
    // A store that cannot be named right is said before anything is done.
    if let (false, Err(e)) = (args.store.no_store, &store) {
        return Err(e.clone().into());
    }
    let baseline = super::run::baseline_of(
        args.gates.baseline.as_deref(),
        &first.bench.name,
        first.bench.confidence,
        &store,
    )
    .await?;
    check_folder_name(&first.bench.name)?;
    let (dir, _lock, mut journal) = create_folder(&root, &first.bench.name)?;
    // The merged run is a run of its own.
    record.run_id = dir.new_run_id("merged");
    let mut agg = aggregator(&dir, &record, &args.outputs)?;
    if !args.store.no_store {
        agg.figures()
            .keep_rows(&record.bench.case_ids, Some(dir.store_spool()));
    }
    combine_journals(&shards, &records, &dir, &mut journal, &mut agg)?;
    drop(journal);
    // A search answered in the shards given needs none of the others.
    let answered = agg.search_ended();
    if answered {
        record.stopped = None;
    }
    dir.write_record(&record).before_send()?;
    say_missing(&missing, answered);
    if !answered {
        say_search_reach(&records, &args.runs, count, &dir);
    }
    agg.figures().set_run(record.info());
    let outputs = Outputs::offline(
        &args.gates,
        &args.outputs,
        baseline.as_ref(),
        args.quiet,
        args.store.no_store,
        store,
    )?;
    let exit = conclude(
        &dir,
        &record,
        agg.finish(),
        Ending::default(),
        &outputs,
        Vec::new(),
        None,
    )
    .await;
    // A missing shard is an incomplete run, whatever the jobs that ran did (unless the
    // search it was part of had its answer without it).
    Ok(if missing.is_empty() || answered || exit != Exit::Success {
        exit
    } else {
        Exit::Incomplete
    })
}

/// Where the merged run's folder goes: `--out`, else beside the first shard's.
fn root_of(args: &MergeArgs) -> PathBuf {
    match &args.out {
        Some(d) => d.clone(),
        None => args.runs[0]
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    }
}

/// Refuses a bench name that cannot name the merged folder: run.json is a file like any
/// other, and its name makes a folder only if it can.
fn check_folder_name(name: &str) -> Result<(), UsageError> {
    if promptgauge_suite::is_folder_safe(name) {
        return Ok(());
    }
    Err(UsageError::with_fix(
        format!(
            "the shards' run.json names the bench `{}`, which cannot name a folder (a slash, a leading `.`, a control character, or over 100 bytes)",
            name.escape_debug()
        ),
        "merge shards of a bench run by promptgauge, whose names are checked when it loads",
    ))
}

/// Each shard's record, its folder read-locked (the locks are held as long as they are
/// kept).
fn read_shards(
    shards: &[RunDir],
) -> Result<(Vec<promptgauge_runner::lock::ReadLock>, Vec<RunRecord>), Failure> {
    let locks = shards
        .iter()
        .map(|d| d.read_lock().map_err(|e| UsageError(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let records: Vec<RunRecord> = shards
        .iter()
        .map(|d| d.read_record().map_err(|e| UsageError(format!("{e:#}"))))
        .collect::<Result<_, _>>()?;
    Ok((locks, records))
}

/// The shards of `count` not given (`seen` by shard number), as `i/count`.
fn missing_shards(count: u32, seen: &[bool]) -> Vec<String> {
    (1..=count)
        .filter(|i| !seen[*i as usize - 1])
        .map(|i| format!("{i}/{count}"))
        .collect()
}

/// The merged run's folder under `root`, locked, with its journal open to append.
fn create_folder(
    root: &Path,
    bench: &str,
) -> Result<
    (
        RunDir,
        promptgauge_runner::lock::RunLock,
        promptgauge_runner::Journal,
    ),
    Failure,
> {
    let dir = RunDir::create(root, &format!("{bench}-merged"), &utc_now()).before_send()?;
    let lock = dir.lock().map_err(super::finish::in_use)?;
    let journal = dir
        .append_journal()
        .with_context(|| format!("cannot create the journal in {}", dir.path().display()))
        .before_send()?;
    Ok((dir, lock, journal))
}

/// Every shard's journal, replayed once into the merged journal and the aggregator; a job
/// in two shards stops the merge (and removes its folder).
fn combine_journals(
    shards: &[RunDir],
    records: &[RunRecord],
    dir: &RunDir,
    journal: &mut promptgauge_runner::Journal,
    agg: &mut super::Figures,
) -> Result<(), Failure> {
    let mut keys = std::collections::HashSet::new();
    for (shard, shard_record) in shards.iter().zip(records) {
        let mut overlap = None;
        let mut write_error = None;
        let (audit, _) = shard
            .replay(&shard_record.plan_keys(), |r| {
                if !keys.insert(r.key()) {
                    overlap = Some(r.key());
                } else if let Err(e) = journal.append(&r) {
                    write_error = Some(e);
                } else {
                    agg.add(&r);
                }
            })
            .with_context(|| format!("cannot read the journal in {}", shard.path().display()))
            .before_send()?;
        agg.figures().note_audit(&audit);
        if let Some(found) = audit.findings() {
            note!("note: {}: {found}", shard.path().display());
        }
        if let Some(e) = write_error {
            return Err(Failure::Input(
                anyhow::Error::new(e).context("cannot write the merged journal"),
            ));
        }
        if let Some((case, variant, repeat)) = overlap {
            let _ = std::fs::remove_dir_all(dir.path());
            return Err(UsageError(format!(
                "cannot merge {}: job ({case}, {variant}, repeat {repeat}) is in two shards",
                shard.path().display()
            ))
            .into());
        }
    }
    Ok(())
}

/// The folders given that hold a shard of a run; the rest are skipped with a note.
fn shard_folders(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    // `merge reports/*` also names comparisons, earlier merges and the cache: only the
    // folders of sharded runs are merged, the rest are skipped with a note.
    let mut runs = Vec::new();
    for path in paths {
        let record = RunDir::at(path).read_record().ok();
        match record.as_ref().map(|r| r.plan.shard) {
            Some(Some(_)) => runs.push(path.clone()),
            Some(None) => note!("note: skipping {} (a run, but not a shard)", path.display()),
            // The history store's files sit beside the run folders: `reports/*` names them.
            None if path.is_file() => {}
            None => note!("note: skipping {} (not a run folder)", path.display()),
        }
    }
    if runs.is_empty() {
        return Err(UsageError::with_fix(
            "none of the folders given is a shard of a run",
            "merge the folders written by `run --shard i/n`",
        )
        .into());
    }
    Ok(runs)
}

/// The shards are of one run of one bench, none twice: how many the run had, and which of
/// them are given.
fn check_shards(runs: &[PathBuf], records: &[RunRecord]) -> Result<(u32, Vec<bool>), Failure> {
    let first = &records[0];
    let Some(count) = first.plan.shard.map(|s| s.count) else {
        return Err(UsageError::with_fix(
            format!(
                "{} is not a shard (it was not run with --shard i/n)",
                runs[0].display()
            ),
            "merge the folders of `run --shard i/n`",
        )
        .into());
    };
    let mut seen = vec![false; count as usize];
    for (dir, r) in runs.iter().zip(records) {
        let refuse = |why: String| -> Failure {
            UsageError::with_fix(
                format!("cannot merge {}: {why}", dir.display()),
                "merge the shards of one run of one bench",
            )
            .into()
        };
        if r.fingerprint != first.fingerprint {
            return Err(refuse(format!(
                "its bench differs from {}'s",
                runs[0].display()
            )));
        }
        let (mut plan, mut first_plan) = (r.plan.clone(), first.plan.clone());
        // A `--best` shard run after a merge of earlier ones sends fewer arms: same plan.
        (plan.shard, plan.arms_out) = (None, Vec::new());
        (first_plan.shard, first_plan.arms_out) = (None, Vec::new());
        if plan != first_plan || r.endpoint.model != first.endpoint.model {
            return Err(refuse(
                "its plan (limit, variants, endpoints, repeats) or model differs".into(),
            ));
        }
        if let Some(why) = other_endpoint(first, r) {
            return Err(UsageError::with_fix(
                format!("cannot merge {}: {why}", dir.display()),
                "run every shard against the same endpoint; to compare endpoints, declare them in the bench's `endpoints:` and run them as a grid, whose cells stay apart (docs/guide/endpoints.md)",
            )
            .into());
        }
        let Some(shard) = r.plan.shard.filter(|s| s.count == count) else {
            return Err(refuse(format!("it is not one of {count} shards")));
        };
        if std::mem::replace(&mut seen[shard.index as usize - 1], true) {
            return Err(refuse(format!(
                "shard {shard} is given twice; shards must not overlap"
            )));
        }
    }
    Ok((count, seen))
}

/// Why shard `r` did not get its answers where the first shard did, if it did not: another
/// protocol or server (the simulator is one server wherever it ran), endpoint by endpoint
/// for a bench of several. Answers of two endpoints merged would be named after the first.
fn other_endpoint(first: &RunRecord, r: &RunRecord) -> Option<String> {
    let at = |p: &promptgauge_runner::record::ProviderInfo| {
        let server = if p.simulated {
            "the built-in simulator".to_string()
        } else {
            p.base_url.clone()
        };
        format!("{} at {server} ({})", p.model, p.protocol.name())
    };
    let same = |a: &promptgauge_runner::record::ProviderInfo,
                b: &promptgauge_runner::record::ProviderInfo| {
        a.same_model(b) && a.protocol == b.protocol
    };
    let pairs = std::iter::once((&first.endpoint, &r.endpoint))
        .chain(first.endpoints.iter().zip(&r.endpoints));
    for (a, b) in pairs {
        if !same(a, b) {
            let name = a
                .endpoint
                .as_deref()
                .map_or(String::new(), |n| format!(" of endpoint `{n}`"));
            return Some(format!(
                "its answers{name} came from {}, the first shard's from {}",
                at(b),
                at(a)
            ));
        }
    }
    (first.endpoints.len() != r.endpoints.len())
        .then(|| "it was run over other endpoints than the first shard".to_string())
}

/// The merged run's record: the first shard's, over the whole plan, from the earliest
/// start to the latest end, and stopped if a shard is missing or one stopped.
fn merged_record(records: &[RunRecord], missing: &[String]) -> RunRecord {
    let mut record = records[0].clone();
    record.plan.shard = None;
    record.plan.arms_out = Vec::new();
    record.merged_from = records.iter().map(|r| r.run_id.clone()).collect();
    record.merged_shards = records.iter().filter_map(|r| r.plan.shard).collect();
    record.merged_shards.sort_by_key(|s| s.index);
    // The whole plan, missing shards included: their jobs did not run.
    record.jobs_planned = record.plan_keys().planned();
    record.started_at = records
        .iter()
        .map(|r| r.started_at.clone())
        .min()
        .unwrap_or_default();
    record.started_unix_ms = records.iter().filter_map(|r| r.started_unix_ms).min();
    record.finished_at = records.iter().filter_map(|r| r.finished_at.clone()).max();
    record.resumed_at = Vec::new();
    // Each shard kept its own budget: the whole run's is their sum.
    record.budget_usd = records.iter().map(|r| r.budget_usd).sum();
    record.stopped = if missing.is_empty() {
        records.iter().find_map(|r| r.stopped.clone())
    } else {
        Some(promptgauge_runner::record::StopReason::shards_missing(
            missing,
        ))
    };
    record
}

/// The shards not given: not needed when a search reached its answer without them, else
/// the merged run is incomplete.
fn say_missing(missing: &[String], answered: bool) {
    if missing.is_empty() {
        return;
    }
    if answered {
        note!(
            "--best: the search reached its answer in the shards given; shards {} are not needed",
            missing.join(", ")
        );
    } else {
        note!(
            "warning: shards {} were not given; the merged run is incomplete",
            missing.join(", ")
        );
    }
}

/// A `--best` merge whose search has no answer yet: it reads the blocks in order, so it
/// went as far as the first shard missing or unfinished; that one is resumed, or the next
/// run `--after` this merge.
fn say_search_reach(records: &[RunRecord], runs: &[PathBuf], count: u32, dir: &RunDir) {
    let searched = records[0]
        .plan
        .sequential
        .as_ref()
        .is_some_and(|s| s.shards_in_blocks());
    if !searched {
        return;
    }
    let mut shards: Vec<Option<(bool, &Path)>> = vec![None; count as usize];
    for (r, path) in records.iter().zip(runs) {
        if let Some(s) = r.plan.shard {
            let finished = r.finished_at.is_some() && r.stopped.is_none();
            shards[s.index as usize - 1] = Some((finished, path.as_path()));
        }
    }
    let through = shards
        .iter()
        .take_while(|s| matches!(s, Some((true, _))))
        .count();
    let folder = promptgauge_report::shell_path(dir.path());
    let seed = records[0].plan.sequential.as_ref().map_or(0, |s| s.seed);
    match shards.get(through) {
        None => {}
        Some(Some((_, path))) => note!(
            "--best: shard {}/{count} did not finish, so the search went through shard {through}/{count} and part of it; resume it (promptgauge run --resume {}), then merge again",
            through + 1,
            promptgauge_report::shell_path(path)
        ),
        Some(None) if through == 0 => note!(
            "--best: the search reads the shards' blocks in order from shard 1/{count}, which is missing: it has heard nothing yet"
        ),
        Some(None) => note!(
            "--best: the search reads the shards' blocks in order, and went through shard {through}/{count}; run the next with what it showed: promptgauge run --best --shard {}/{count} --seed {seed} --after {folder} (with the shards' --variants, if they had any)",
            through + 1
        ),
    }
}
