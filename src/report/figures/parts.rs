//! Named parts' figures (docs/guide/scorers.md, "Parts"): a score with parts — a `fields`
//! scorer's fields, an `all`/`any`/`mean`'s scorers, a judge's criteria, an agent's answer
//! and trajectory — gets, for each part, each arm's mean with its interval and each arm
//! against the baseline, by the same statistics as the whole score: exact McNemar and
//! Wilson for a part scored 0 or 1, the betting test and the mean's interval otherwise;
//! Holm within each part's family of comparisons.

use serde::{Deserialize, Serialize};

use crate::report::compare::{CaseTable, Comparison, Family, Paired, compare, decide};
use crate::runner::journal::{JobRecord, JobStatus};
use crate::stats::cluster::{clustered_wilson, grouped_wilson};

/// One part's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartFigures {
    pub name: String,
    /// Every score of the part was 0 or 1: each mean is an accuracy, with Wilson's
    /// interval (design-effect widened for repeats and groups), compared by exact McNemar.
    pub binary: bool,
    /// Each arm's figures, in the run's order (the baseline first).
    pub variants: Vec<PartVariant>,
    /// Each arm against its baseline, paired by case, as the whole score's comparisons.
    pub comparisons: Vec<Comparison>,
}

/// One arm's figures for one part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartVariant {
    /// The arm: a variant, or `ENDPOINT/VARIANT` in a run of several endpoints.
    pub name: String,
    /// Graded answers that gave the part a score.
    pub n: u64,
    /// The mean score (an accuracy when the part is binary); `None` with no answer.
    pub mean: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

impl PartFigures {
    /// The arm's figures, by name.
    pub(crate) fn variant(&self, name: &str) -> Option<&PartVariant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The comparison of the arm named `name` against its baseline.
    pub(crate) fn comparison(&self, name: &str) -> Option<&Comparison> {
        self.comparisons.iter().find(|c| c.variant == name)
    }
}

/// Comparisons made together (arm, against), with the question they answer in a grid.
pub(crate) type Families = (Vec<(usize, usize)>, Option<Family>);

/// Per part, the case table behind its figures, filled as records arrive.
#[derive(Debug, Default)]
pub(crate) struct PartTables {
    arms: usize,
    /// Part names in first-seen order (the bench's), each with its table and whether a
    /// score other than 0 or 1 came.
    parts: Vec<(String, CaseTable, bool)>,
    /// Refused answers (scored 0 whatever the scorer would say, so never asked of it):
    /// each part counts them 0 once the parts are known.
    partless: Vec<(String, Vec<String>, usize)>,
}

impl PartTables {
    pub(crate) fn new(arms: usize) -> Self {
        PartTables {
            arms,
            ..PartTables::default()
        }
    }

    /// Records a graded record's parts for `arm`; a part outside [0, 1] (a journal edited
    /// by hand) is left out.
    pub(crate) fn add(&mut self, r: &JobRecord, arm: usize) {
        if r.status != JobStatus::Graded || r.score().is_none() {
            return;
        }
        if r.refused {
            self.partless.push((r.case_id.clone(), r.tags.clone(), arm));
            return;
        }
        for p in r.parts.iter().filter(|p| (0.0..=1.0).contains(&p.score)) {
            let i = match self.parts.iter().position(|(n, _, _)| *n == p.name) {
                Some(i) => i,
                None => {
                    self.parts
                        .push((p.name.clone(), CaseTable::new(self.arms), false));
                    self.parts.len() - 1
                }
            };
            let (_, table, scored) = &mut self.parts[i];
            *scored |= !crate::grade::scorer::is_binary(p.score);
            if let Some(group) = &r.group {
                table.set_group(&r.case_id, group);
            }
            table.add(&r.case_id, &r.tags, arm, p.score);
        }
    }

    /// Each part's figures: `names` the arms, `families` the comparisons made together (arm,
    /// against), `groups` each case's group from the whole score's table.
    pub(crate) fn figures(
        mut self,
        names: &[String],
        families: &[Families],
        whole: &CaseTable,
        confidence: f64,
    ) -> Vec<PartFigures> {
        let partless = std::mem::take(&mut self.partless);
        self.parts
            .into_iter()
            .map(|(name, mut table, scored)| {
                for (case, tags, arm) in &partless {
                    if let Some(g) = whole.group(case) {
                        table.set_group(case, g);
                    }
                    table.add(case, tags, *arm, 0.0);
                }
                let variants = names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| arm_figures(n, &table, i, scored, confidence))
                    .collect();
                let mut comparisons = Vec::new();
                for (family, axis) in families {
                    let mut made: Vec<Comparison> = family
                        .iter()
                        .map(|&(i, against)| {
                            let (pairs, groups) = table.paired(i, against);
                            let paired = Paired {
                                pairs: &pairs,
                                groups: groups.as_deref(),
                                scored,
                            };
                            let mut c = compare(&names[i], &names[against], paired, confidence);
                            c.family = axis.clone();
                            c
                        })
                        .collect();
                    decide(&mut made, confidence);
                    comparisons.extend(made);
                }
                PartFigures {
                    name,
                    binary: !scored,
                    variants,
                    comparisons,
                }
            })
            .collect()
    }
}

/// One arm's mean and interval for a part, as the whole score's: Wilson (widened for
/// repeats and groups) for 0/1 scores, the mean of case means with its interval otherwise.
fn arm_figures(
    name: &str,
    table: &CaseTable,
    arm: usize,
    scored: bool,
    confidence: f64,
) -> PartVariant {
    let cases = table.arm(arm);
    let n: u64 = cases.iter().map(|s| s.graded).sum();
    let mut v = PartVariant {
        name: name.to_string(),
        n,
        mean: None,
        ci_low: None,
        ci_high: None,
    };
    if n == 0 {
        return v;
    }
    if scored {
        let (means, groups) = table.arm_means(arm);
        let m = match &groups {
            Some(g) => crate::stats::scores::mean_score_clustered(&means, g, confidence),
            None => crate::stats::scores::mean_score(&means, confidence),
        };
        if let Some(m) = m {
            v.mean = Some(m.mean);
            v.ci_low = m.interval.map(|i| i.0);
            v.ci_high = m.interval.map(|i| i.1);
        }
    } else {
        let correct: u64 = cases.iter().map(|s| s.correct()).sum();
        v.mean = Some(correct as f64 / n as f64);
        let units = table.arm_by_group(arm);
        let ci = if table.grouped() {
            grouped_wilson(&units, confidence)
        } else {
            clustered_wilson(&units, confidence)
        };
        v.ci_low = ci.map(|c| c.1);
        v.ci_high = ci.map(|c| c.2);
    }
    v
}
