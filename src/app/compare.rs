//! `compare RUN_A RUN_B`: the same cases on two runs, variant by variant, paired by case.
//! Also what `--baseline RUN_DIR` checks a run against.

use std::path::Path;

use anyhow::Context;

use super::{Exit, Failure};
use crate::cli::CompareArgs;
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_base::clock::utc_now;
use promptgauge_report::compare::{CaseSide, ComparedRun, RunComparison, RunSide};
use promptgauge_report::{self as report, RunResult};
use promptgauge_runner::RunDir;
use promptgauge_runner::record::RunRecord;

/// One side of a comparison: a run folder, its record, and its aggregated result.
pub(super) type Side<'a> = (&'a Path, &'a RunRecord, &'a RunResult);

/// The confidence a comparison of two runs uses: `given`, or the runs' own when they agree.
/// Two runs at different levels are refused: one table must not mix them.
pub(super) fn confidence(a: Side<'_>, b: Side<'_>, given: Option<f64>) -> Result<f64, UsageError> {
    let (ca, cb) = (a.1.bench.confidence, b.1.bench.confidence);
    match given {
        Some(c) => Ok(c),
        None if (ca - cb).abs() < 1e-12 => Ok(ca),
        None => Err(UsageError::with_fix(
            format!(
                "{} was run at {}% confidence and {} at {}%: a comparison needs one level",
                a.0.display(),
                ca * 100.0,
                b.0.display(),
                cb * 100.0
            ),
            format!("choose it: --confidence {ca} (or {cb})"),
        )),
    }
}

/// Case ids whose content differs between the runs (both recorded a hash for them).
fn changed_cases(a: &RunRecord, b: &RunRecord) -> Vec<String> {
    fn hashes(r: &RunRecord) -> std::collections::HashMap<&str, u64> {
        r.bench
            .case_ids
            .iter()
            .zip(&r.bench.case_hashes)
            .map(|(id, h)| (id.as_str(), *h))
            .collect()
    }
    let (ha, hb) = (hashes(a), hashes(b));
    let mut changed: Vec<String> = a
        .bench
        .case_ids
        .iter()
        .filter(|id| {
            !promptgauge_report::compare::same_case(
                ha.get(id.as_str()).copied(),
                hb.get(id.as_str()).copied(),
            )
        })
        .cloned()
        .collect();
    changed.sort();
    changed
}

/// Run B against run A, variant by variant, paired by case, at `confidence`.
pub(super) fn compare_results(
    a: Side<'_>,
    b: Side<'_>,
    confidence: f64,
) -> anyhow::Result<RunComparison> {
    // A case whose content changed pairs two different questions: it is left out (and
    // named), as in `history`.
    let changed = changed_cases(a.1, b.1);
    let (arms_a, arms_b) = (a.1.plan.arms(), b.1.plan.arms());
    let (run_a, run_b) = (compared(a, &arms_a), compared(b, &arms_b));
    let changed_set = changed.iter().cloned().collect();
    let mut comparison = RunComparison::build(run_a, run_b, &changed_set, confidence);
    comparison.cases_changed = changed;
    for pair in &mut comparison.variants {
        let arm = |r: &RunRecord| r.plan.arms().iter().position(|v| *v == pair.name);
        let (Some(ia), Some(ib)) = (arm(a.1), arm(b.1)) else {
            continue;
        };
        compare_answers(pair, a.2, ia, b.2, ib);
        let latencies = |result: &RunResult, i: usize| {
            result
                .latencies
                .get(i)
                .map(|l| l.latency_ms.clone())
                .unwrap_or_default()
        };
        comparison
            .latencies
            .push((pair.name.clone(), latencies(a.2, ia), latencies(b.2, ib)));
    }
    if comparison.variants.is_empty() {
        return Err(UsageError::with_fix(
            format!(
                "the two runs share no variant (A: {}; B: {})",
                a.1.plan.arms().join(", "),
                b.1.plan.arms().join(", ")
            ),
            "compare runs of the same bench",
        )
        .into());
    }
    Ok(comparison)
}

/// How a comparison names a run.
/// One run of a comparison as the report's comparison reads it: its side, summary, case
/// table with its `arms`, and planned cases.
fn compared<'a>(run: Side<'a>, arms: &'a [String]) -> ComparedRun<'a> {
    ComparedRun {
        side: run_side(run),
        summary: &run.2.summary,
        cases: CaseSide {
            table: &run.2.cases,
            arms,
        },
        planned: &run.1.bench.case_ids,
    }
}

fn run_side((dir, r, _): Side<'_>) -> RunSide {
    RunSide {
        dir: dir.display().to_string(),
        bench: r.bench.name.clone(),
        model: r.endpoint.model.clone(),
        base_url: r.endpoint.base_url.clone(),
        simulated: r.endpoint.simulated,
        started_at: r.started_at.clone(),
    }
}

/// What report.html kept of each run's answers for one variant (at its place in each
/// run: `ia` in `a`, `ib` in `b`): identical texts, and flipped cases.
fn compare_answers(
    pair: &mut promptgauge_report::compare::VariantPair,
    a: &RunResult,
    ia: usize,
    b: &RunResult,
    ib: usize,
) {
    const FLIPS_SHOWN: usize = 200;
    for (case, (expected, answers_a)) in &a.answers {
        let Some((_, answers_b)) = b.answers.get(case) else {
            continue;
        };
        let (Some(Some(x)), Some(Some(y))) = (answers_a.get(ia), answers_b.get(ib)) else {
            continue;
        };
        if x.output == y.output {
            pair.identical_outputs += 1;
        } else {
            pair.different_outputs += 1;
        }
        let right = |s: Option<f64>| s.map(|s| s >= 1.0);
        let direction = match (right(x.score), right(y.score)) {
            (Some(false), Some(true)) => "fixed",
            (Some(true), Some(false)) => "broken",
            _ => continue,
        };
        if pair.flipped.len() < FLIPS_SHOWN {
            pair.flipped.push(promptgauge_report::compare::Flip {
                case: case.clone(),
                expected: expected.clone(),
                direction: direction.to_string(),
                a: x.output.clone(),
                b: y.output.clone(),
            });
        }
    }
}

/// `compare`: two runs over the same cases, variant by variant, paired by case. Each run
/// is a folder, a run id or `latest[:BRANCH]` from the history store.
pub async fn compare(args: &CompareArgs, env: &crate::app::settings::Env) -> Result<Exit, Failure> {
    let store = crate::app::settings::store_location(
        args.store.as_deref(),
        env,
        Path::new(super::history::REPORTS),
    )
    .map(|s| s.0);
    let mut sides = Vec::new();
    for name in [&args.run_a, &args.run_b] {
        let reference =
            super::baseline::resolve(name, args.bench.as_deref(), &store, "compare").await?;
        sides.push(
            super::baseline::load_reference(&reference)
                .await
                .before_send()?,
        );
    }
    let (pa, ra, sa) = &sides[0];
    let (pb, rb, sb) = &sides[1];
    if ra.run_id == rb.run_id {
        note!(
            "warning: {} and {} are the same run ({}): every difference is zero",
            args.run_a,
            args.run_b,
            ra.run_id
        );
    }
    let (side_a, side_b) = ((pa.as_path(), ra, sa), (pb.as_path(), rb, sb));
    let level = confidence(side_a, side_b, args.confidence)?;
    let comparison = compare_results(side_a, side_b, level).before_send()?;
    out!("{}", report::terminal::render_comparison(&comparison));
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => {
            // Beside run A's folder; beside the store's runs when A came from the store.
            let root = match pa.parent() {
                Some(p) if pa.is_dir() => p.to_path_buf(),
                _ => store
                    .as_ref()
                    .ok()
                    .and_then(|s| s.file())
                    .and_then(Path::parent)
                    .unwrap_or(Path::new("."))
                    .to_path_buf(),
            };
            let root = root.as_path();
            RunDir::create(root, "compare", &utc_now())
                .before_send()?
                .path()
                .to_path_buf()
        }
    };
    let write = || -> anyhow::Result<()> {
        std::fs::create_dir_all(&out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        let files = report::comparison_files(&comparison)?;
        for (name, text) in files {
            let path = out.join(name);
            promptgauge_base::files::write_atomically(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(())
    };
    write().before_send()?;
    note!("comparison written to {}", out.display());
    Ok(Exit::Success)
}
