//! Two runs compared: the same variant in each, paired by case (`compare`, `--baseline`),
//! with what each run's report kept of its answers.

use promptgauge_stats::cluster::CaseScore;

use serde::{Deserialize, Serialize};

use super::compare::{CaseTable, Comparison, Paired, compare, decide, unit_of};
use super::summary::{Summary, VariantSummary};

/// A variant's arm in a run's case table: the table, and the arm's place in it.
#[derive(Clone, Copy)]
pub(crate) struct TableArm<'a> {
    pub(crate) table: &'a CaseTable,
    pub(crate) index: usize,
}

/// One variant in two runs' tables (its arm in A's, its arm in B's), paired by case in id
/// order: (B, A) for each case both graded, with each one's unit when any case either run
/// graded has a group (A's group first, as each run's own report counts it). Cases in
/// `changed` pair with nothing. Walks the two tables side by side: a comparison of two
/// 100,000-case runs makes no third table.
pub(crate) fn pair_runs(
    a: TableArm<'_>,
    b: TableArm<'_>,
    changed: &std::collections::HashSet<String>,
) -> (Vec<(CaseScore, CaseScore)>, Option<Vec<String>>) {
    let (
        TableArm {
            table: ta,
            index: va,
        },
        TableArm {
            table: tb,
            index: vb,
        },
    ) = (a, b);
    fn graded(
        t: &CaseTable,
        v: usize,
    ) -> impl Iterator<Item = (&str, CaseScore, Option<&str>)> + '_ {
        t.entries()
            .filter(move |(_, s, _)| s[v].graded > 0)
            .map(move |(id, s, g)| (id, s[v], g))
    }
    let grouped = graded(ta, va).any(|e| e.2.is_some()) || graded(tb, vb).any(|e| e.2.is_some());
    let (mut a, mut b) = (graded(ta, va).peekable(), graded(tb, vb).peekable());
    let (mut pairs, mut units) = (Vec::new(), Vec::new());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        match x.0.cmp(y.0) {
            std::cmp::Ordering::Less => {
                a.next();
            }
            std::cmp::Ordering::Greater => {
                b.next();
            }
            std::cmp::Ordering::Equal => {
                if !changed.contains(x.0) {
                    pairs.push((y.1, x.1));
                    if grouped {
                        units.push(unit_of(x.0, x.2.or(y.2)));
                    }
                }
                a.next();
                b.next();
            }
        }
    }
    (pairs, grouped.then_some(units))
}

/// Whether a case of one id is the same question in two runs: its content hashes agree,
/// or a run does not know its hash (runs from before hashes were kept pair as before).
pub fn same_case(a: Option<u64>, b: Option<u64>) -> bool {
    !matches!((a, b), (Some(x), Some(y)) if x != y)
}

/// One run's per-case scores, as a comparison of two runs reads them: its table, and the
/// name of each of the table's arms.
#[derive(Clone, Copy)]
pub struct CaseSide<'a> {
    pub table: &'a CaseTable,
    pub arms: &'a [String],
}

impl<'a> CaseSide<'a> {
    /// The table and the arm of `variant` in it.
    fn arm(&self, variant: &str) -> Option<TableArm<'a>> {
        let index = self.arms.iter().position(|a| a == variant)?;
        Some(TableArm {
            table: self.table,
            index,
        })
    }
}

/// One run as a comparison reads it: how the reports name it, its summary, its per-case
/// scores, and the cases it planned.
pub struct ComparedRun<'a> {
    pub side: RunSide,
    pub summary: &'a Summary,
    pub cases: CaseSide<'a>,
    pub planned: &'a [String],
}

/// Two runs over the same cases, variant by variant (`promptgauge compare`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    pub schema: String,
    pub run_a: RunSide,
    pub run_b: RunSide,
    pub confidence: f64,
    /// Planned in one run only; never silently dropped.
    pub cases_only_in_a: Vec<String>,
    pub cases_only_in_b: Vec<String>,
    /// Cases with the same id whose content (variables, expected answer, grader, history,
    /// group) differs between the runs: their pairing compares different questions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases_changed: Vec<String>,
    pub variants_only_in_a: Vec<String>,
    pub variants_only_in_b: Vec<String>,
    pub variants: Vec<VariantPair>,
    /// Per variant, A's and B's end-to-end latencies, for compare.html's chart.
    #[serde(skip)]
    pub latencies: Vec<(String, Vec<f64>, Vec<f64>)>,
}

/// One run of a comparison, as the reports name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSide {
    pub dir: String,
    pub bench: String,
    pub model: String,
    pub base_url: String,
    pub simulated: bool,
    pub started_at: String,
}

/// One variant in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantPair {
    pub name: String,
    pub a: VariantSummary,
    pub b: VariantSummary,
    /// B against A, paired by case.
    pub comparison: Comparison,
    /// Of the cases whose answers both runs' reports kept: how many answers were the same
    /// text, and the cases whose outcome flipped.
    #[serde(default)]
    pub identical_outputs: u64,
    #[serde(default)]
    pub different_outputs: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flipped: Vec<Flip>,
}

/// A case right in one run and wrong in the other, with both answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flip {
    pub case: String,
    pub expected: Vec<String>,
    /// `fixed` (wrong in A, right in B) or `broken` (right in A, wrong in B).
    pub direction: String,
    pub a: String,
    pub b: String,
}

impl RunComparison {
    /// Pairs the per-variant summaries of two runs and compares B with A case by case;
    /// `changed` are the cases whose content differs between them.
    pub fn build(
        a: ComparedRun<'_>,
        b: ComparedRun<'_>,
        changed: &std::collections::HashSet<String>,
        confidence: f64,
    ) -> RunComparison {
        let (sa, sb) = (a.summary, b.summary);
        let names_b: Vec<&str> = sb.variants.iter().map(|v| v.name.as_str()).collect();
        let names_a: Vec<&str> = sa.variants.iter().map(|v| v.name.as_str()).collect();
        let mut variants = Vec::new();
        let mut comparisons = Vec::new();
        for va in &sa.variants {
            let Some(vb) = sb.variants.iter().find(|v| v.name == va.name) else {
                continue;
            };
            let in_a = InRun {
                summary: va,
                arm: a.cases.arm(&va.name),
            };
            let in_b = InRun {
                summary: vb,
                arm: b.cases.arm(&va.name),
            };
            comparisons.push(compared(in_a, in_b, changed, confidence));
            variants.push((
                at_level(in_a, sa.run.confidence, confidence),
                at_level(in_b, sb.run.confidence, confidence),
            ));
        }
        decide(&mut comparisons, confidence);
        let only = |x: &[String], y: &[String]| -> Vec<String> {
            let ys: std::collections::HashSet<&String> = y.iter().collect();
            x.iter().filter(|c| !ys.contains(c)).cloned().collect()
        };
        RunComparison {
            schema: "promptgauge.compare/1".into(),
            run_a: a.side,
            run_b: b.side,
            confidence,
            cases_only_in_a: only(a.planned, b.planned),
            cases_only_in_b: only(b.planned, a.planned),
            cases_changed: Vec::new(),
            latencies: Vec::new(),
            variants_only_in_a: names_a
                .iter()
                .filter(|n| !names_b.contains(n))
                .map(|s| s.to_string())
                .collect(),
            variants_only_in_b: names_b
                .iter()
                .filter(|n| !names_a.contains(n))
                .map(|s| s.to_string())
                .collect(),
            variants: variants
                .into_iter()
                .zip(comparisons)
                .map(|((a, b), comparison)| VariantPair {
                    name: a.name.clone(),
                    a,
                    b,
                    comparison,
                    identical_outputs: 0,
                    different_outputs: 0,
                    flipped: Vec::new(),
                })
                .collect(),
        }
    }
}

/// One variant in one run: its summary, and its arm in the run's case table.
#[derive(Clone, Copy)]
struct InRun<'a> {
    summary: &'a VariantSummary,
    arm: Option<TableArm<'a>>,
}

/// Variant B against itself in A, paired by case (`changed` cases left out).
fn compared(
    a: InRun<'_>,
    b: InRun<'_>,
    changed: &std::collections::HashSet<String>,
    confidence: f64,
) -> Comparison {
    let (va, vb) = (a.summary, b.summary);
    let (pairs, groups) = match (a.arm, b.arm) {
        (Some(a), Some(b)) => pair_runs(a, b, changed),
        _ => Default::default(),
    };
    let scored = va.mean_score.is_some() || vb.mean_score.is_some();
    let mut c = compare(
        &format!("{} in B", va.name),
        &format!("{} in A", va.name),
        Paired {
            pairs: &pairs,
            groups: groups.as_deref(),
            scored,
        },
        confidence,
    );
    let shown = |v: &VariantSummary| v.accuracy.or(v.mean_score);
    c.explain_against(shown(vb), shown(va));
    c
}

/// Every interval in one table at one level: a run's own accuracy (or mean score)
/// interval recomputed at the comparison's `confidence` when the run (at `own`) used
/// another, from the variant's arm in that run's case table.
fn at_level(variant: InRun<'_>, own: f64, confidence: f64) -> VariantSummary {
    let mut v = variant.summary.clone();
    if (own - confidence).abs() > 1e-12
        && let Some(arm) = variant.arm
    {
        let scores = arm.table.arm(arm.index);
        if v.mean_score.is_some() {
            let means: Vec<f64> = scores.iter().filter_map(CaseScore::mean).collect();
            let m = promptgauge_stats::scores::mean_score(&means, confidence);
            v.score_ci_low = m.and_then(|m| m.interval.map(|i| i.0));
            v.score_ci_high = m.and_then(|m| m.interval.map(|i| i.1));
        } else if let Some((_, lo, hi, _)) =
            promptgauge_stats::cluster::clustered_wilson(&scores, confidence)
        {
            v.ci_low = Some(lo);
            v.ci_high = Some(hi);
        }
    }
    v
}
