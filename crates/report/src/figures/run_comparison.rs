//! Two runs compared: the same variant in each, paired by case (`compare`, `--baseline`),
//! with what each run's report kept of its answers.

use promptgauge_stats::cluster::CaseScore;

use serde::{Deserialize, Serialize};

use super::compare::{CaseTable, Comparison, Paired, compare, decide, unit_of};
use super::summary::{Summary, VariantSummary};

/// One variant in two runs' tables (its arm in A's, its arm in B's), paired by case in id
/// order: (B, A) for each case both graded, with each one's unit when any case either run
/// graded has a group (A's group first, as each run's own report counts it). Cases in
/// `changed` pair with nothing. Walks the two tables side by side: a comparison of two
/// 100,000-case runs makes no third table.
pub(crate) fn pair_runs(
    (ta, va): (&CaseTable, usize),
    (tb, vb): (&CaseTable, usize),
    changed: &std::collections::HashSet<String>,
) -> (Vec<(CaseScore, CaseScore)>, Option<Vec<String>>) {
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
    fn arm(&self, variant: &str) -> Option<(&'a CaseTable, usize)> {
        let i = self.arms.iter().position(|a| a == variant)?;
        Some((self.table, i))
    }
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
    /// Pairs the per-variant summaries of two runs and compares B with A case by case.
    /// `cases` are the two runs' per-case scores, `changed` the cases whose content
    /// differs between them.
    pub fn build(
        run_a: RunSide,
        run_b: RunSide,
        summaries: (&Summary, &Summary),
        cases: (CaseSide<'_>, CaseSide<'_>),
        changed: &std::collections::HashSet<String>,
        planned: (&[String], &[String]),
        confidence: f64,
    ) -> RunComparison {
        let (sa, sb) = summaries;
        let names_b: Vec<&str> = sb.variants.iter().map(|v| v.name.as_str()).collect();
        let names_a: Vec<&str> = sa.variants.iter().map(|v| v.name.as_str()).collect();
        let mut variants = Vec::new();
        let mut comparisons = Vec::new();
        for va in &sa.variants {
            let Some(vb) = sb.variants.iter().find(|v| v.name == va.name) else {
                continue;
            };
            let arms = (cases.0.arm(&va.name), cases.1.arm(&va.name));
            let c = compared((va, vb), arms, changed, confidence);
            comparisons.push(c);
            variants.push((
                at_level(va, sa.run.confidence, arms.0, confidence),
                at_level(vb, sb.run.confidence, arms.1, confidence),
            ));
        }
        decide(&mut comparisons, confidence);
        let only = |x: &[String], y: &[String]| -> Vec<String> {
            let ys: std::collections::HashSet<&String> = y.iter().collect();
            x.iter().filter(|c| !ys.contains(c)).cloned().collect()
        };
        RunComparison {
            schema: "promptgauge.compare/1".into(),
            run_a,
            run_b,
            confidence,
            cases_only_in_a: only(planned.0, planned.1),
            cases_only_in_b: only(planned.1, planned.0),
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

/// A variant's arm in a run's case table.
type Arm<'a> = (&'a CaseTable, usize);

/// Variant B against itself in A, paired by case (`changed` cases left out).
fn compared(
    (va, vb): (&VariantSummary, &VariantSummary),
    arms: (Option<Arm<'_>>, Option<Arm<'_>>),
    changed: &std::collections::HashSet<String>,
    confidence: f64,
) -> Comparison {
    let (pairs, groups) = match arms {
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
/// another; `side` is the variant's arm in that run's case table.
fn at_level(
    v: &VariantSummary,
    own: f64,
    side: Option<Arm<'_>>,
    confidence: f64,
) -> VariantSummary {
    let mut v = v.clone();
    if (own - confidence).abs() > 1e-12
        && let Some((table, i)) = side
    {
        let scores = table.arm(i);
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
