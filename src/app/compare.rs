//! `compare RUN_A RUN_B`: the same cases on two runs, variant by variant, paired by case.
//! Also what `--baseline RUN_DIR` checks a run against.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use super::{Exit, Failure, load, utc_now};
use crate::cli::{CompareArgs, UsageError};
use crate::error::BeforeSend;
use crate::report::compare::{CaseTable, RunComparison, RunSide};
use crate::report::{self, RunResult};
use crate::runner::RunDir;
use crate::runner::record::RunRecord;

/// One side of a comparison: a run folder, its record, and its aggregated result.
pub(super) type Side<'a> = (&'a Path, &'a RunRecord, &'a RunResult);

/// Run B against run A, variant by variant, paired by case.
pub(super) fn compare_results(a: Side<'_>, b: Side<'_>) -> anyhow::Result<RunComparison> {
    let side = |(dir, r, _): Side<'_>| RunSide {
        dir: dir.display().to_string(),
        bench: r.bench.name.clone(),
        model: r.endpoint.model.clone(),
        base_url: r.endpoint.base_url.clone(),
        simulated: r.endpoint.simulated,
        started_at: r.started_at.clone(),
    };
    // Per shared variant: arm 0 = A's per-case scores, arm 1 = B's.
    let mut cases: BTreeMap<String, CaseTable> = BTreeMap::new();
    for (arm, (_, record, result)) in [(0, a), (1, b)] {
        for (v, name) in record.plan.variants.iter().enumerate() {
            let table = cases
                .entry(name.clone())
                .or_insert_with(|| CaseTable::new(2));
            for (case, (tags, scores)) in &result.cases.cases {
                if scores[v].graded > 0 {
                    table.set(case, tags, arm, scores[v]);
                }
            }
        }
    }
    let comparison = RunComparison::build(
        side(a),
        side(b),
        (&a.2.summary, &b.2.summary),
        &cases,
        (&a.1.bench.case_ids, &b.1.bench.case_ids),
    );
    if comparison.variants.is_empty() {
        return Err(UsageError::with_fix(
            format!(
                "the two runs share no variant (A: {}; B: {})",
                a.1.plan.variants.join(", "),
                b.1.plan.variants.join(", ")
            ),
            "compare runs of the same bench",
        )
        .into());
    }
    Ok(comparison)
}

/// `compare`: two runs over the same cases, variant by variant, paired by case.
pub fn compare(args: &CompareArgs) -> Result<Exit, Failure> {
    let (_, ra, sa) = load(&args.run_a).before_send()?;
    let (_, rb, sb) = load(&args.run_b).before_send()?;
    let comparison =
        compare_results((&args.run_a, &ra, &sa), (&args.run_b, &rb, &sb)).before_send()?;
    out!("{}", report::terminal::render_comparison(&comparison));
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => {
            let root = args.run_a.parent().unwrap_or(Path::new("."));
            RunDir::create(root, "compare", &utc_now())
                .before_send()?
                .path()
                .to_path_buf()
        }
    };
    let write = || -> anyhow::Result<()> {
        std::fs::create_dir_all(&out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        let files = [
            (
                "compare.json",
                serde_json::to_string_pretty(&comparison)? + "\n",
            ),
            (
                "compare.md",
                report::markdown::render_comparison(&comparison),
            ),
            ("compare.html", report::html::render_compare(&comparison)),
        ];
        for (name, text) in files {
            let path = out.join(name);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(())
    };
    write().before_send()?;
    note!("comparison written to {}", out.display());
    Ok(Exit::Success)
}
