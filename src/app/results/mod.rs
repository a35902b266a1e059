//! `import-results FORMAT FILE…`: another tool's per-sample results as a run folder —
//! run.json, the journal, the reports, the history store — so `compare`, `history`, the
//! gates and every report work on them unchanged (docs/guide/import-results.md). Each reader
//! turns its files into [`Imported`]: variants (a file each, or a promptfoo file's
//! columns), each with its samples by case and repeat; whatever it cannot carry over is a
//! note, said and written to IMPORT-NOTES.md in the run folder.

mod imported;
mod inspect;
mod lmeval;
mod promptfoo;
mod read;

use std::collections::HashMap;

use anyhow::Context;

use self::imported::{Imported, ImportedArm, Sample, clean_name};
use super::finish::{Ending, Outputs, conclude};
use super::{Exit, Failure, aggregator};
use crate::cli::{ImportResultsArgs, ResultsFormat};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_base::clock::utc_now;
use promptgauge_client::Outcome;
use promptgauge_runner::RunDir;
use promptgauge_runner::journal::{JobRecord, JobStatus};
use promptgauge_runner::record::{BenchRecord, PlanSettings, ProviderInfo, RunRecord, Tool};
use promptgauge_suite::{Fingerprint, GradeSpec, Limits, Variant};

/// `import-results`: reads the files, writes the run folder, its reports and (unless
/// `--no-store`) its row in the history store; the gates decide the exit code as a run's.
pub async fn import_results(
    args: &ImportResultsArgs,
    env: &crate::app::settings::Env,
) -> Result<Exit, Failure> {
    let mut imported = match args.format {
        ResultsFormat::Inspect => inspect::read(args)?,
        ResultsFormat::LmEval => lmeval::read(args)?,
        ResultsFormat::Promptfoo => promptfoo::read(args)?,
    };
    name_arms(&mut imported, &args.variants)?;
    check_samples(&imported)?;
    // The task names the run's folder: never a path (`../x`, `/abs`), never markup.
    imported.name = folder_name(&imported.name);
    let store = crate::app::settings::store_location(args.store.store.as_deref(), env, &args.out)
        .map(|s| s.0);
    if let (false, Err(e)) = (args.store.no_store, &store) {
        return Err(e.clone().into());
    }
    let baseline =
        super::run::baseline_of(args.gates.baseline.as_deref(), &imported.name, 0.95, &store)
            .await?;
    let dir = RunDir::create(
        &args.out,
        &format!("{}-imported", imported.name),
        &utc_now(),
    )
    .before_send()?;
    let _lock = dir.lock().map_err(super::finish::in_use)?;
    let (mut record, records) = run_of(&imported, &dir);
    record.allowed_failures = args.gates.allow_failures;
    let mut journal = dir
        .append_journal()
        .with_context(|| format!("cannot create the journal in {}", dir.path().display()))
        .before_send()?;
    let mut agg = aggregator(&dir, &record, &args.outputs)?;
    if !args.store.no_store {
        agg.figures()
            .keep_rows(&record.bench.case_ids, Some(dir.store_spool()));
    }
    for r in &records {
        journal
            .append(r)
            .with_context(|| format!("cannot write {}", dir.journal_path().display()))
            .before_send()?;
        agg.add(r);
    }
    drop(journal);
    dir.write_record(&record).before_send()?;
    write_notes(&dir, &imported, args)?;
    if !args.quiet {
        for n in &imported.notes {
            note!("not carried over: {n}");
        }
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
    Ok(conclude(
        &dir,
        &record,
        agg.finish(),
        Ending::default(),
        &outputs,
        Vec::new(),
        None,
    )
    .await)
}

/// The variants' names: `--variants` in order, else what was found, made unique; names
/// that cannot be told apart are refused with the fix.
fn name_arms(imported: &mut Imported, given: &[String]) -> Result<(), UsageError> {
    if !given.is_empty() {
        if given.len() != imported.arms.len() {
            return Err(UsageError::with_fix(
                format!(
                    "--variants names {} variants, and the files hold {}: {}",
                    given.len(),
                    imported.arms.len(),
                    imported
                        .arms
                        .iter()
                        .map(|a| format!("{} ({})", a.name, a.file.display()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "give one name per variant, in that order",
            ));
        }
        for (arm, name) in imported.arms.iter_mut().zip(given) {
            arm.name = name.clone();
        }
    }
    for arm in &mut imported.arms {
        arm.name = clean_name(&arm.name);
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for arm in &imported.arms {
        *seen.entry(arm.name.clone()).or_default() += 1;
    }
    if let Some((name, _)) = seen.iter().find(|(_, n)| **n > 1) {
        return Err(UsageError::with_fix(
            format!(
                "two variants would be named `{name}`: nothing in the files tells them apart ({})",
                imported
                    .arms
                    .iter()
                    .map(|a| a.file.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "name them with --variants A,B (in the order of the files)",
        ));
    }
    Ok(())
}

/// A run folder's name from a task's: letters, digits, `-`, `_` (others become `-`), at
/// most 48, never empty.
fn folder_name(name: &str) -> String {
    let plain: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    match clean_name(&plain).trim_matches(['-', '.']) {
        "" => "imported".into(),
        n => n.to_string(),
    }
}

/// Refuses a variant holding one case and repeat twice (a sample id given twice, a
/// document twice) or a case without an id: each would count twice, or pair with nothing.
fn check_samples(imported: &Imported) -> Result<(), UsageError> {
    for arm in &imported.arms {
        let mut seen = std::collections::HashSet::new();
        for s in &arm.samples {
            if s.case.is_empty() || s.case == "null" {
                return Err(UsageError::with_fix(
                    format!("{} has a sample without an id", arm.file.display()),
                    "give every sample an id (the case it answers)",
                ));
            }
            if !seen.insert((s.case.as_str(), s.repeat)) {
                return Err(UsageError::with_fix(
                    format!(
                        "{} holds case `{}`{} twice",
                        arm.file.display(),
                        s.case,
                        if s.repeat > 0 {
                            format!(" (repeat {})", s.repeat + 1)
                        } else {
                            String::new()
                        }
                    ),
                    "each sample id (or document) once per epoch: import files that were not appended to or merged",
                ));
            }
        }
    }
    Ok(())
}

/// The run's record and its jobs' records: the cases in the order the first variant gives
/// them (then any others'), every variant over every case and repeat.
fn run_of(imported: &Imported, dir: &RunDir) -> (RunRecord, Vec<JobRecord>) {
    let cases = Cases::of(imported);
    let repeats = imported
        .arms
        .iter()
        .flat_map(|a| a.samples.iter().map(|s| s.repeat + 1))
        .max()
        .unwrap_or(1);
    let per_case = imported.arms.len() * repeats as usize;
    let records = job_records(imported, &cases, repeats);
    let case_hashes: Vec<u64> = cases
        .ids
        .iter()
        .map(|id| {
            let s = cases.first_of[id];
            digest(&(id, &s.input, &s.expected))
        })
        .collect();
    let record = RunRecord {
        tool: Tool::promptgauge(),
        run_id: dir.new_run_id("imported"),
        started_at: imported.started_at.clone().unwrap_or_else(utc_now),
        started_unix_ms: None,
        finished_at: Some(utc_now()),
        stopped: None,
        resumed_at: Vec::new(),
        bench_path: imported
            .arms
            .first()
            .map(|a| a.file.clone())
            .unwrap_or_default(),
        plan: PlanSettings {
            limit: None,
            variants: imported.arms.iter().map(|a| a.name.clone()).collect(),
            repeats,
            shard: None,
            sequential: None,
            endpoints: Vec::new(),
            order_seed: None,
            fetch_urls: false,
            arms_out: Vec::new(),
        },
        fingerprint: fingerprint_of(imported, &case_hashes, repeats),
        jobs_planned: cases.ids.len() * per_case,
        endpoint: provider_of(imported),
        endpoints: Vec::new(),
        judge: None,
        bench: BenchRecord {
            name: imported.name.clone(),
            text: String::new(),
            cases: cases.ids.len(),
            case_ids: cases.ids,
            case_hashes,
            variants: variants_of(imported),
            params: Default::default(),
            limits: Limits::default(),
            price: None,
            repeats,
            confidence: 0.95,
            grade: GradeSpec::default(),
            judge: None,
        },
        source: None,
        store: None,
        merged_from: Vec::new(),
        merged_shards: Vec::new(),
        allowed_failures: 0,
        budget_usd: None,
    };
    (record, records)
}

/// The run's cases, in the order the variants first give them.
struct Cases<'a> {
    ids: Vec<String>,
    /// A case's place in `ids`.
    position: HashMap<String, usize>,
    /// The first sample of each case: what its hash is made of.
    first_of: HashMap<String, &'a Sample>,
}

impl<'a> Cases<'a> {
    fn of(imported: &'a Imported) -> Self {
        let mut cases = Cases {
            ids: Vec::new(),
            position: HashMap::new(),
            first_of: HashMap::new(),
        };
        for s in imported.arms.iter().flat_map(|a| &a.samples) {
            if !cases.position.contains_key(&s.case) {
                cases.position.insert(s.case.clone(), cases.ids.len());
                cases.ids.push(s.case.clone());
                cases.first_of.insert(s.case.clone(), s);
            }
        }
        cases
    }
}

/// Every sample as a job's record, numbered as the plan numbers jobs (case, then variant,
/// then repeat), in that order.
fn job_records(imported: &Imported, cases: &Cases, repeats: u32) -> Vec<JobRecord> {
    let per_case = imported.arms.len() * repeats as usize;
    let mut records = Vec::new();
    for (a, arm) in imported.arms.iter().enumerate() {
        for s in &arm.samples {
            let job = cases.position[&s.case] * per_case + a * repeats as usize + s.repeat as usize;
            records.push(job_record(job, arm, s));
        }
    }
    records.sort_by_key(|r| r.job);
    records
}

/// The variants as the bench holds them: each a user message of its prompt (or where it
/// came from, when the tool recorded none).
fn variants_of(imported: &Imported) -> Vec<Variant> {
    imported
        .arms
        .iter()
        .map(|a| Variant {
            name: a.name.clone(),
            messages: vec![promptgauge_suite::prompts::MessageTemplate {
                role: "user".into(),
                content: if a.prompt.is_empty() {
                    format!("(imported from {})", a.file.display())
                } else {
                    a.prompt.clone()
                },
                line: None,
                history: false,
            }],
            params: Default::default(),
            path: a.file.clone(),
            no_files: false,
            extract: None,
        })
        .collect()
}

/// What identifies the import: its cases, its variants (name, model, prompt), the tool
/// and the repeats.
fn fingerprint_of(imported: &Imported, case_hashes: &[u64], repeats: u32) -> Fingerprint {
    let variants: Vec<_> = imported
        .arms
        .iter()
        .map(|a| (&a.name, &a.model, &a.prompt))
        .collect();
    Fingerprint {
        cases: format!("{:016x}", digest(case_hashes)),
        variants: format!("{:016x}", digest(&variants)),
        settings: format!("{:016x}", digest(&(&imported.tool, repeats))),
    }
}

/// The endpoint the run names: the tool, and the variants' model (or their models).
fn provider_of(imported: &Imported) -> ProviderInfo {
    let models: Vec<&str> = imported.arms.iter().map(|a| a.model.as_str()).collect();
    ProviderInfo {
        base_url: format!("imported from {}", imported.tool),
        model: if models.windows(2).all(|w| w[0] == w[1]) {
            models.first().map_or(String::new(), |m| m.to_string())
        } else {
            models.join(", ")
        },
        simulated: false,
        api_key_env: None,
        replicas: Vec::new(),
        protocol: Default::default(),
        endpoint: None,
        price: None,
        batch: false,
    }
}

/// A sample as a job's record: graded with its score, or failed with why it has none.
fn job_record(job: usize, arm: &ImportedArm, s: &Sample) -> JobRecord {
    let (status, score, error) = match &s.score {
        Ok(v) => (JobStatus::Graded, Some(*v), None),
        Err(why) => (JobStatus::Failed, None, Some(why.clone())),
    };
    JobRecord {
        job,
        case_id: s.case.clone(),
        variant: arm.name.clone(),
        endpoint: None,
        repeat: s.repeat,
        status,
        outcome: (status == JobStatus::Graded).then_some(Outcome::Complete),
        output: if status == JobStatus::Graded {
            s.output.clone()
        } else {
            String::new()
        },
        partial_output: (status != JobStatus::Graded && !s.output.is_empty())
            .then(|| s.output.clone()),
        reasoning: String::new(),
        finish_reason: None,
        tool_calls: Vec::new(),
        expected: s.expected.clone(),
        read: None,
        extracted: None,
        not_found: None,
        correct: None,
        score,
        score_detail: None,
        parts: Vec::new(),
        judge: Vec::new(),
        judge_usage: None,
        error,
        attempts: Vec::new(),
        ttft_ms: None,
        latency_ms: s.latency_ms,
        answer_ms: None,
        usage: s.usage.unwrap_or_default(),
        model: Some(arm.model.clone()).filter(|m| !m.is_empty()),
        tags: s.tags.clone(),
        group: None,
        cached: false,
        resent: 0,
        batch: None,
        refused: false,
        usage_anomaly: None,
        held: None,
        files: s.files.clone(),
        steps: Vec::new(),
        turns: Vec::new(),
    }
}

/// IMPORT-NOTES.md in the run folder: where the results came from, and everything not
/// carried over.
fn write_notes(dir: &RunDir, imported: &Imported, args: &ImportResultsArgs) -> Result<(), Failure> {
    let mut text = format!(
        "# Imported results\n\n{} results of `{}`, imported by `promptgauge import-results` into this run folder.\n\nVariants:\n\n",
        imported.tool, imported.name
    );
    for a in &imported.arms {
        text.push_str(&format!(
            "- `{}`: {} ({} samples, model `{}`)\n",
            a.name,
            a.file.display(),
            a.samples.len(),
            a.model
        ));
    }
    if let Some(score) = &args.score {
        text.push_str(&format!("\nScore taken: `{score}`.\n"));
    }
    text.push_str("\n## Not carried over\n\n");
    if imported.notes.is_empty() {
        text.push_str(
            "Nothing: every sample's answer, score, tokens and time were carried over.\n",
        );
    }
    for n in &imported.notes {
        text.push_str(&format!("- {n}\n"));
    }
    let path = dir.file("IMPORT-NOTES.md");
    promptgauge_base::files::write_atomically(&path, text)
        .with_context(|| format!("cannot write {}", path.display()))
        .before_send()?;
    Ok(())
}

/// A stable hash of what identifies a case or a variant.
fn digest<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    let mut h = promptgauge_base::hash::StableHasher::default();
    let _ = serde_json::to_writer(&mut h, value);
    h.finish()
}
