//! `run --best --shard i/n --after MERGED`: what a merge of a search's earlier shards tells
//! the next shard (docs/guide/best.md, "In shards").

use std::path::Path;

use super::Failure;
use crate::error::UsageError;
use promptgauge_runner::RunDir;

/// The largest summary.json `--after` reads.
const SUMMARY_CAP: u64 = 64 << 20;

/// `run --best --shard i/n --after MERGED`: the arms the merge of this search's earlier
/// shards showed out, which this shard does not send. Refused when `after` is not a merge
/// of this plan (the bench, its variants and the search's order must be the same), and
/// when the search ended there: nothing is left to send.
pub(super) fn arms_out_after(
    after: &Path,
    shard: Option<promptgauge_suite::Shard>,
    bench: &promptgauge_suite::Bench,
    variants: &[usize],
    plan: &promptgauge_suite::plan::SequentialPlan,
) -> Result<Vec<String>, Failure> {
    let refuse = |why: String, fix: &str| -> Failure {
        UsageError::with_fix(format!("--after {}: {why}", after.display()), fix).into()
    };
    let dir = RunDir::at(after);
    let record = dir
        .read_record()
        .map_err(|e| refuse(format!("{e:#}"), "name the folder `merge` wrote"))?;
    if record.merged_from.is_empty() {
        return Err(refuse(
            "it is not a merged run".into(),
            "merge the earlier shards first (promptgauge merge reports/NAME-shard*), and name the folder it writes",
        ));
    }
    if let Some(why) = another_plan(
        &record,
        promptgauge_suite::Fingerprint::of(bench, variants),
        plan,
    ) {
        return Err(refuse(
            format!("it merged another plan: {why}"),
            "run the shards of one search with the same bench, variants, --seed and --epsilon",
        ));
    }
    check_shard(&record.merged_shards, shard).map_err(|(why, fix)| refuse(why, &fix))?;
    let summary: promptgauge_report::Summary =
        promptgauge_base::files::read_capped(&dir.file("summary.json"), SUMMARY_CAP)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| {
                refuse(
                    "its summary.json is missing or unreadable".into(),
                    "run `promptgauge report` on it, or merge the shards again",
                )
            })?;
    let Some(best) = summary.sequential.and_then(|s| s.best) else {
        return Err(refuse(
            "its summary has no search".into(),
            "merge the shards again",
        ));
    };
    if best.outcome != "open" {
        return Err(refuse(
            format!(
                "the search already ended there ({} the answer, after {} cases): this shard has nothing to send",
                best.named.join(", "),
                best.cases
            ),
            "read the answer in that merged run; run no more shards",
        ));
    }
    Ok(best.eliminated.into_iter().map(|e| e.variant).collect())
}

/// This run's shard must be of the same count as the merge's, and not one it combined.
fn check_shard(
    merged: &[promptgauge_suite::Shard],
    shard: Option<promptgauge_suite::Shard>,
) -> Result<(), (String, String)> {
    let (Some(shard), Some(first)) = (shard, merged.first()) else {
        return Ok(());
    };
    let next = (1..=first.count)
        .find(|i| !merged.iter().any(|m| m.index == *i))
        .map_or_else(String::new, |i| {
            format!(" (the next is {i}/{})", first.count)
        });
    if shard.count != first.count {
        return Err((
            format!(
                "it merged shards of {}, and this run is shard {shard}",
                first.count
            ),
            format!("run a shard of {}{next}", first.count),
        ));
    }
    if merged.iter().any(|m| m.index == shard.index) {
        return Err((
            format!("shard {shard} is in that merge already: its cases were searched"),
            format!("run a shard that merge did not combine{next}"),
        ));
    }
    Ok(())
}

/// How the merge's plan differs from this run's, said: `None` when it is the same.
fn another_plan(
    merged: &promptgauge_runner::record::RunRecord,
    fingerprint: promptgauge_suite::Fingerprint,
    plan: &promptgauge_suite::plan::SequentialPlan,
) -> Option<String> {
    let Some(theirs) = merged.plan.sequential.as_ref() else {
        return Some("it searched nothing".into());
    };
    let epsilon =
        |p: &promptgauge_suite::plan::SequentialPlan| p.best.map_or(0.0, |b| b.epsilon * 100.0);
    if merged.fingerprint != fingerprint {
        Some("its bench or variants differ from this run's".into())
    } else if theirs.seed != plan.seed {
        Some(format!(
            "it drew its order with seed {}, this run with {}",
            theirs.seed, plan.seed
        ))
    } else if epsilon(theirs) != epsilon(plan) {
        Some(format!(
            "its ε is {} points, this run's {}",
            epsilon(theirs),
            epsilon(plan)
        ))
    } else if !same_search(theirs, plan) {
        Some("its search's settings differ from this run's".into())
    } else {
        None
    }
}

/// Whether two plans search alike: how far a run's workers went ahead (recorded at its
/// first start, from its concurrency) is not part of the search a shard joins.
fn same_search(
    a: &promptgauge_suite::plan::SequentialPlan,
    b: &promptgauge_suite::plan::SequentialPlan,
) -> bool {
    let without_ahead = |p: &promptgauge_suite::plan::SequentialPlan| {
        let mut p = p.clone();
        if let Some(best) = &mut p.best {
            best.ahead = None;
        }
        p
    };
    without_ahead(a) == without_ahead(b)
}
