//! Named parts' figures (docs/guide/scorers.md, "Parts"): a score with parts — a `fields`
//! scorer's fields, an `all`/`any`/`mean`'s scorers, a judge's criteria, an agent's answer
//! and trajectory — gets, for each part, each arm's mean with its interval and each arm
//! against the baseline, by the same statistics as the whole score: exact McNemar and
//! Wilson for a part scored 0 or 1, the betting test and the mean's interval otherwise;
//! Holm within each part's family of comparisons.

use serde::{Deserialize, Serialize};

use crate::compare::{CaseTable, Comparison, Family, Paired, compare, decide};
use promptgauge_runner::journal::{JobRecord, JobStatus};
use promptgauge_stats::cluster::wilson_by_unit;

/// One part's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartFigures {
    pub name: String,
    /// The cases the part scored (in any arm): the cases its check applies to, when cases
    /// carry scorers of their own (an imported promptfoo config's asserts).
    #[serde(default)]
    pub cases: u64,
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
    pub fn variant(&self, name: &str) -> Option<&PartVariant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The comparison of the arm named `name` against its baseline.
    pub fn comparison(&self, name: &str) -> Option<&Comparison> {
        self.comparisons.iter().find(|c| c.variant == name)
    }
}

/// Comparisons made together (arm, against), with the question they answer in a grid.
pub(crate) type Families = (Vec<(usize, usize)>, Option<Family>);

/// Per part, the case table behind its figures, filled as records arrive.
#[derive(Debug, Default)]
pub(crate) struct PartTables {
    arms: usize,
    /// Part names, each with its table, whether a score other than 0 or 1 came, and where
    /// it was first seen in the plan (the earliest job, then its place in that job's parts):
    /// the order the figures are in, whatever order the records came in.
    parts: Vec<(String, CaseTable, bool, (usize, usize))>,
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
        for (place, p) in r.parts.iter().enumerate() {
            if !(0.0..=1.0).contains(&p.score) {
                continue;
            }
            let i = match self.parts.iter().position(|(n, ..)| *n == p.name) {
                Some(i) => i,
                None => {
                    let table = CaseTable::new(self.arms);
                    self.parts
                        .push((p.name.clone(), table, false, (r.job, place)));
                    self.parts.len() - 1
                }
            };
            let (_, table, scored, first) = &mut self.parts[i];
            *first = (*first).min((r.job, place));
            *scored |= !promptgauge_grade::scorer::is_binary(p.score);
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
        self.parts.sort_by_key(|p| p.3);
        self.parts
            .into_iter()
            .map(|(name, mut table, scored, _)| {
                for (case, tags, arm) in &partless {
                    if let Some(g) = whole.group(case) {
                        table.set_group(case, g);
                    }
                    table.add(case, tags, *arm, 0.0);
                }
                let cases = table.len() as u64;
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
                    cases,
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
        if let Some(m) = table.arm_mean_score(arm, confidence) {
            v.mean = Some(m.mean);
            v.ci_low = m.interval.map(|i| i.0);
            v.ci_high = m.interval.map(|i| i.1);
        }
    } else {
        let correct: u64 = cases.iter().map(|s| s.correct()).sum();
        v.mean = Some(correct as f64 / n as f64);
        let ci = wilson_by_unit(&table.arm_by_group(arm), table.grouped(), confidence);
        v.ci_low = ci.map(|c| c.1);
        v.ci_high = ci.map(|c| c.2);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Aggregator, AggregatorSettings, ProviderInfo, RunInfo};
    use promptgauge_runner::sequential::Counts;

    fn aggregator(variants: &[&str], endpoints: &[&str]) -> Aggregator {
        Aggregator::new(AggregatorSettings {
            run: RunInfo {
                bench: "b".into(),
                run_id: "r".into(),
                tool_version: "t".into(),
                started_at: "s".into(),
                finished_at: None,
                provider: ProviderInfo {
                    base_url: "u".into(),
                    model: "m".into(),
                    simulated: true,
                    api_key_env: None,
                    replicas: vec![],
                    protocol: Default::default(),
                    endpoint: None,
                    price: None,
                    batch: false,
                },
                confidence: 0.95,
                repeats: 1,
                cases: 20,
                jobs_planned: 40,
                stopped: None,
                endpoints: vec![],
                judge: None,
                self_judged: false,
                order_seed: None,
                search_shard: None,
                folder: None,
            },
            variants: variants.iter().map(|v| v.to_string()).collect(),
            endpoints: endpoints.iter().map(|e| e.to_string()).collect(),
            price: None,
            arm_prices: vec![],
            planned: 40,
            junit_spool: None,
            judge_price: None,
            labels: Default::default(),
        })
    }

    /// A graded record of `case` for `variant` (at `endpoint`), its whole score `score`
    /// and its parts `parts`.
    struct Rec<'a> {
        case: &'a str,
        variant: &'a str,
        endpoint: Option<&'a str>,
        score: f64,
        parts: Vec<(&'a str, f64)>,
        group: Option<&'a str>,
        refused: bool,
    }

    impl Rec<'_> {
        fn record(&self) -> JobRecord {
            let mut r = serde_json::json!({
                "job": 0, "case_id": self.case, "variant": self.variant, "repeat": 0,
                "status": "graded", "outcome": "complete", "output": "x",
                "finish_reason": "stop", "expected": ["x"], "extracted": null,
                "score": self.score, "error": null, "attempts": [], "ttft_ms": null,
                "latency_ms": null, "model": null,
                "parts": self.parts.iter().map(|(n, s)| serde_json::json!({"name": n, "score": s})).collect::<Vec<_>>(),
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
                          "reasoning_tokens": 0, "estimated": false}
            });
            if let Some(e) = self.endpoint {
                r["endpoint"] = e.into();
            }
            if let Some(g) = self.group {
                r["group"] = g.into();
            }
            if self.refused {
                r["refused"] = true.into();
                r["parts"] = serde_json::json!([]);
            }
            serde_json::from_value(r).unwrap()
        }
    }

    fn rec<'a>(case: &'a str, variant: &'a str, score: f64, parts: Vec<(&'a str, f64)>) -> Rec<'a> {
        Rec {
            case,
            variant,
            endpoint: None,
            score,
            parts,
            group: None,
            refused: false,
        }
    }

    /// The reference row of tests/fixtures/`file` (statsmodels, see its .py) whose first
    /// columns are `key`, at 95%.
    fn reference(file: &str, key: &str) -> Vec<f64> {
        let text = match file {
            "paired.csv" => include_str!("../../../../tests/fixtures/paired.csv"),
            _ => include_str!("../../../../tests/fixtures/wilson.csv"),
        };
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{key},0.95,")))
            .unwrap_or_else(|| panic!("{key} not in {file}"));
        line.split(',').map(|x| x.parse().unwrap()).collect()
    }

    /// The part `name` of a finished run, and the run's summary.
    fn part<'a>(s: &'a crate::Summary, name: &str) -> &'a PartFigures {
        s.parts
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no part {name}: {:?}", s.parts))
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.unwrap();
        assert!((a - b).abs() < 1e-9, "{a} ≠ {b}");
    }

    /// Asserts part `p`'s figures are the whole score's for the same data: each arm's
    /// mean and interval, each comparison's test, interval and verdict.
    fn same_as_whole(p: &PartFigures, s: &crate::Summary) {
        for (v, whole) in p.variants.iter().zip(&s.variants) {
            assert_eq!(v.name, whole.name);
            assert_eq!(v.n, whole.n, "{}", v.name);
            let (mean, low, high) = if p.binary {
                (whole.accuracy, whole.ci_low, whole.ci_high)
            } else {
                (whole.mean_score, whole.score_ci_low, whole.score_ci_high)
            };
            assert_eq!(
                (v.mean, v.ci_low, v.ci_high),
                (mean, low, high),
                "{}",
                v.name
            );
        }
        assert_eq!(p.comparisons.len(), s.comparisons.len());
        for (c, whole) in p.comparisons.iter().zip(&s.comparisons) {
            assert_eq!(
                (&c.variant, &c.against, c.p_value, c.p_holm),
                (&whole.variant, &whole.against, whole.p_value, whole.p_holm)
            );
            assert_eq!(
                (c.difference, c.ci_low, c.ci_high, &c.verdict, &c.family),
                (
                    whole.difference,
                    whole.ci_low,
                    whole.ci_high,
                    &whole.verdict,
                    &whole.family
                )
            );
        }
    }

    #[test]
    fn a_binary_part_gets_wilson_and_exact_mcnemar_as_the_whole_score_would() {
        // Paired table (both right, only v right, only base right, both wrong) = (7, 4, 0, 9)
        // for `category`; `priority` right everywhere but one baseline case.
        let mut agg = aggregator(&["base", "v"], &[]);
        let mut whole = aggregator(&["base", "v"], &[]);
        for i in 0..20 {
            let case = format!("c{i:02}");
            let (b, v) = match i {
                0..7 => (1.0, 1.0),
                7..11 => (0.0, 1.0),
                _ => (0.0, 0.0),
            };
            let p = if i == 0 { 0.0 } else { 1.0 };
            for (variant, cat, prio) in [("base", b, p), ("v", v, 1.0)] {
                let parts = vec![("category", cat), ("priority", prio)];
                agg.counted(&rec(&case, variant, (cat + prio) / 2.0, parts).record());
                whole.counted(&rec(&case, variant, cat, vec![]).record());
            }
        }
        let s = agg.finish().summary;
        let w = whole.finish().summary;
        let names: Vec<&str> = s.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["category", "priority"]);
        let cat = part(&s, "category");
        assert!(cat.binary);
        same_as_whole(cat, &w);
        // And against statsmodels: Wilson for 7 of 20, exact McNemar for b = 4, c = 0.
        let wilson = reference("wilson.csv", "7,20");
        let base = cat.variant("base").unwrap();
        assert_eq!((base.n, base.mean), (20, Some(0.35)));
        close(base.ci_low, wilson[3]);
        close(base.ci_high, wilson[4]);
        let paired = reference("paired.csv", "7,4,0,9");
        let c = cat.comparison("v").unwrap();
        close(c.p_value, paired[5]);
        close(c.difference, paired[6]);
        assert_eq!(c.against, "base");
        // The whole score here is the mean of the two fields: partial, so its figures are a
        // mean score's, while each field keeps its own accuracy.
        assert!(s.variants[0].mean_score.is_some());
        let prio = part(&s, "priority");
        assert!(prio.binary);
        close(prio.variant("base").unwrap().mean, 0.95);
        close(prio.variant("v").unwrap().mean, 1.0);
    }

    #[test]
    fn a_scored_part_gets_the_mean_score_s_figures_and_a_refused_answer_counts_0() {
        let mut agg = aggregator(&["base", "v"], &[]);
        let mut whole = aggregator(&["base", "v"], &[]);
        for i in 0..24 {
            let case = format!("c{i:02}");
            let b = [0.0, 0.5, 1.0, 0.25][i % 4];
            let v = [0.5, 1.0, 1.0, 0.75][(i / 2) % 4];
            for (variant, score) in [("base", b), ("v", v)] {
                // Case c05's answer for v was refused: scored 0 whatever the scorer says.
                let refused = i == 5 && variant == "v";
                let mut r = rec(
                    &case,
                    variant,
                    score,
                    vec![("items[].sku", score), ("id", 1.0)],
                );
                r.refused = refused;
                if refused {
                    r.score = 0.0;
                }
                agg.counted(&r.record());
                let mut w = rec(&case, variant, r.score, vec![]);
                w.refused = refused;
                whole.counted(&w.record());
            }
        }
        let s = agg.finish().summary;
        let w = whole.finish().summary;
        let sku = part(&s, "items[].sku");
        assert!(!sku.binary);
        same_as_whole(sku, &w);
        // The refused answer counts in every part, as 0: `id` is 1 everywhere else.
        let id = part(&s, "id");
        assert!(id.binary);
        let v = id.variant("v").unwrap();
        assert_eq!(v.n, 24);
        close(v.mean, 23.0 / 24.0);
        assert_eq!(id.variant("base").unwrap().mean, Some(1.0));
    }

    #[test]
    fn a_part_s_figures_treat_groups_as_the_whole_score_does() {
        let mut agg = aggregator(&["base", "v"], &[]);
        let mut whole = aggregator(&["base", "v"], &[]);
        for i in 0..30 {
            let case = format!("c{i:02}");
            let group = ["g1", "g2", "g3", "g4", "g5", "g6"][i % 6];
            let b = f64::from(u8::from(i % 3 == 0));
            let v = f64::from(u8::from(i % 3 != 2));
            for (variant, score) in [("base", b), ("v", v)] {
                let mut r = rec(&case, variant, score, vec![("right", score)]);
                r.group = Some(group);
                agg.counted(&r.record());
                let mut o = rec(&case, variant, score, vec![]);
                o.group = Some(group);
                whole.counted(&o.record());
            }
        }
        let s = agg.finish().summary;
        let w = whole.finish().summary;
        assert_eq!(w.comparisons[0].groups, Some(6));
        let p = part(&s, "right");
        same_as_whole(p, &w);
        assert_eq!(p.comparisons[0].groups, Some(6));
    }

    #[test]
    fn a_grid_s_parts_are_compared_in_the_grid_s_families() {
        let mut agg = aggregator(&["base", "v"], &["hosted", "local"]);
        let mut whole = aggregator(&["base", "v"], &["hosted", "local"]);
        for i in 0..20 {
            let case = format!("c{i:02}");
            for (endpoint, variant, right) in [
                ("hosted", "base", i % 4 != 0),
                ("hosted", "v", i % 5 != 0),
                ("local", "base", i % 2 == 0),
                ("local", "v", i % 3 == 0),
            ] {
                let score = f64::from(u8::from(right));
                let mut r = rec(&case, variant, score, vec![("field", score)]);
                r.endpoint = Some(endpoint);
                agg.counted(&r.record());
                let mut o = rec(&case, variant, score, vec![]);
                o.endpoint = Some(endpoint);
                whole.counted(&o.record());
            }
        }
        let s = agg.finish().summary;
        let w = whole.finish().summary;
        let p = part(&s, "field");
        assert_eq!(p.variants.len(), 4);
        assert!(w.comparisons.len() >= 2, "{:?}", w.comparisons);
        same_as_whole(p, &w);
        // Each comparison says its family, as the whole score's does.
        assert!(p.comparisons.iter().all(|c| c.family.is_some()));
    }

    #[test]
    fn parts_are_in_the_plan_s_order_whatever_order_the_answers_came_in() {
        let mut agg = aggregator(&["base", "v"], &[]);
        let mut late = rec("c2", "base", 1.0, vec![("zip", 1.0), ("city", 1.0)]).record();
        late.job = 2;
        let mut early = rec("c1", "base", 1.0, vec![("name", 1.0), ("zip", 1.0)]).record();
        early.job = 0;
        agg.counted(&late);
        agg.counted(&early);
        let s = agg.finish().summary;
        let names: Vec<&str> = s.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["name", "zip", "city"]);
    }

    #[test]
    fn a_run_without_parts_has_none_and_writes_none() {
        let mut agg = aggregator(&["base", "v"], &[]);
        agg.counted(&rec("c", "base", 1.0, vec![]).record());
        agg.counted(&rec("c", "v", 0.0, vec![]).record());
        let s = agg.finish().summary;
        assert!(s.parts.is_empty());
        assert!(serde_json::to_value(&s).unwrap().get("parts").is_none());
    }
}
