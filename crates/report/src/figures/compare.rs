//! Paired comparisons and verdicts in words, from per-case scores. Used for each variant
//! against the baseline of a run, and for the same variant across two runs (`compare`).
//!
//! One test for every kind of run (docs/dev/statistics.md §1): the sign-flip permutation test
//! on the per-case differences of mean score (exact McNemar with one 0/1 answer per case;
//! the same numbers however often every answer is repeated), its signs flipped by group
//! when cases carry `group:`, Holm across the comparisons made together, and the interval
//! that inverts the same test at the level where it agrees with Holm's verdict.

use crate::text::count;
use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

pub use super::run_comparison::RunComparison;
pub use super::run_comparison::{CaseSide, ComparedRun, Flip, RunSide, VariantPair, same_case};

use promptgauge_base::ids::Ids;
use promptgauge_stats::betting::BoundedMean;
use promptgauge_stats::cluster::CaseScore;
use promptgauge_stats::holm::{holm, holm_level};
use promptgauge_stats::paired::PairedTable;
use promptgauge_stats::paired::exact_paired_interval;
use promptgauge_stats::permutation::sign_flip_test;
use promptgauge_stats::power::{self, Assumptions};

/// The power the detectable difference and the cases-needed figures are computed for.
pub(crate) const POWER: f64 = 0.8;

/// A comparison's verdict, at the run's confidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    NotDistinguishable,
    /// No case was graded for both.
    NoData,
}

impl Verdict {
    /// The verdict as people say it.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NotDistinguishable => "not distinguishable",
            Verdict::NoData => "no data",
        }
    }
}

/// What a comparison's test works on, kept until Holm's adjustment fixes the level of its
/// interval: one signed sum of per-case differences and its number of cases per unit (a
/// case, or a group of cases whose signs flip together).
#[derive(Debug, Clone, Default, PartialEq)]
struct Units {
    sums: Vec<f64>,
    sizes: Vec<f64>,
}

/// What a comparison's interval is computed from, once Holm's adjustment fixes its level.
#[derive(Debug, Clone, Default, PartialEq)]
enum Basis {
    #[default]
    None,
    /// Every case mean 0 or 1 (one answer per case, or repeats that always agree): the
    /// paired 2×2 table, the interval that inverts exact McNemar.
    Table(PairedTable),
    /// Fractional case means: the betting test of equal means and the interval inverting
    /// it, its bets sized at the run's confidence (docs/dev/statistics.md §3b).
    Means { confidence: f64 },
    /// Grouped cases: the sign-flip test by group inverted on the group sums.
    Groups,
}

/// How the arms disagree, for the cases a difference would need.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
enum Spread {
    #[default]
    None,
    /// One 0/1 answer per case: the share of cases where exactly one arm was right.
    Discordance(f64),
    /// Case means: the variance of the per-case differences.
    Variance(f64),
}

/// One arm against a reference arm, paired by case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub variant: String,
    /// What it is compared with: the baseline variant, or the same variant in the other run.
    pub against: String,
    /// Cases graded in both arms.
    pub cases: u64,
    /// `sign_flip_on_case_means` (0/1 case means; `_by_group` when cases carry groups),
    /// `betting_on_case_means` (fractional case means, docs/dev/statistics.md §3b), with
    /// `+labels_ppi` when people's labels corrected a judge.
    pub method: String,
    /// With one sample per case: the 2×2 table.
    pub table: Option<PairTable>,
    /// Mean-score difference, variant minus reference, as a share (0.05 = 5 points): the
    /// mean of the per-case differences, so `variant_mean − reference_mean`.
    pub difference: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// The interval's confidence level: the run's confidence, raised as far as Holm's
    /// adjustment requires for the interval to exclude 0 exactly when the verdict is
    /// better or worse (between confidence and 1 − (1 − confidence)/comparisons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_level: Option<f64>,
    pub p_value: Option<f64>,
    /// Holm-adjusted across the comparisons made together.
    pub p_holm: Option<f64>,
    pub verdict: Verdict,
    /// Cases needed to detect a difference the size of the one observed, with 80% power,
    /// by the test and Holm family actually used.
    pub cases_needed: Option<u64>,
    /// Each arm's mean over the paired cases, every case counting once (its repeats
    /// averaged). They differ from the arms' accuracies when some cases were not answered
    /// by both or have unequal repeats; the sentence then says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_mean: Option<f64>,
    /// With `group:` on cases: the groups whose signs flip together, and how much the
    /// grouping inflates the variance of the difference (1: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_effect: Option<f64>,
    /// Scored runs: the paired t-test beside the sign-flip test that decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_p_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ci_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ci_high: Option<f64>,
    /// With labels from people on both arms: the difference as people would score it
    /// (prediction-powered), which then decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected: Option<CorrectedDifference>,
    /// Why the difference is not the difference of the accuracies shown, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The verdict as a sentence.
    pub sentence: String,
    /// In a run of several endpoints: which question it answers, and so with which
    /// comparisons Holm adjusted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    #[serde(skip)]
    units: Units,
    #[serde(skip)]
    basis: Basis,
    #[serde(skip)]
    spread: Spread,
    /// The standard error of a labels-corrected difference (normal interval).
    #[serde(skip)]
    corrected_se: Option<f64>,
}

/// One question a run of several endpoints answers, with its own Holm family: the variants
/// against the baseline variant at one endpoint ("which prompt"), or the endpoints against
/// the baseline endpoint for one variant ("which model").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Family {
    /// `variants` or `endpoints`: what is compared.
    pub axis: Axis,
    /// Where the comparison is held still: the endpoint (axis `variants`) or the variant
    /// (axis `endpoints`).
    pub within: String,
}

/// What a family compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// Which prompt: variants at one endpoint.
    Variants,
    /// Which model: endpoints for one variant.
    Endpoints,
}

impl Axis {
    /// Both axes, "which prompt" first.
    pub(crate) const BOTH: [Axis; 2] = [Axis::Variants, Axis::Endpoints];

    /// What the axis asks, and how its Holm families are formed.
    pub(crate) fn heading(self) -> &'static str {
        match self {
            Axis::Variants => {
                "Which prompt: each variant against the baseline variant at the same endpoint (Holm within each endpoint)"
            }
            Axis::Endpoints => {
                "Which model: each endpoint against the baseline endpoint with the same variant (Holm within each variant)"
            }
        }
    }
}

impl Family {
    /// The variants at endpoint `name`.
    pub(crate) fn variants_at(name: &str) -> Family {
        Family {
            axis: Axis::Variants,
            within: name.to_string(),
        }
    }

    /// The endpoints for variant `name`.
    pub(crate) fn endpoints_for(name: &str) -> Family {
        Family {
            axis: Axis::Endpoints,
            within: name.to_string(),
        }
    }

    /// The question, as a heading says it: `which prompt, at hosted`, `which model, for
    /// concise`.
    pub fn question(&self) -> String {
        match self.axis {
            Axis::Variants => format!("which prompt, at {}", self.within),
            Axis::Endpoints => format!("which model, for {}", self.within),
        }
    }
}

impl Comparison {
    /// The table cells every report shows: both right, only the variant, only the
    /// reference, both wrong, difference, interval, p (Holm), verdict.
    pub(crate) fn cells(&self) -> [String; 8] {
        let count = |f: fn(&PairTable) -> u64| {
            self.table
                .as_ref()
                .map_or("–".to_string(), |t| f(t).to_string())
        };
        [
            count(|t| t.both_right),
            count(|t| t.only_variant),
            count(|t| t.only_reference),
            count(|t| t.both_wrong),
            self.difference
                .map_or("–".into(), |d| format!("{:+.1}", d * 100.0)),
            match (self.ci_low, self.ci_high) {
                (Some(lo), Some(hi)) => format!("[{}, {}]", bound(lo), bound(hi)),
                _ => "–".into(),
            },
            p_cell(self.p_holm),
            self.verdict.words().to_string(),
        ]
    }

    /// Replaces the test by a difference people's labels corrected (prediction-powered),
    /// with its standard error and two-sided normal p-value.
    pub(crate) fn correct(&mut self, d: CorrectedDifference, se: f64, p: f64) {
        self.method = format!("{}+labels_ppi", self.method);
        self.difference = Some(d.difference);
        self.ci_low = Some(d.ci_low);
        self.ci_high = Some(d.ci_high);
        self.p_value = Some(p);
        self.corrected_se = Some(se);
        self.spread = Spread::None;
        self.corrected = Some(d);
    }

    /// Says why the difference is not `variant − reference` of the accuracies a report
    /// shows beside it, when it is not (to the 0.1 point they are printed with).
    pub(crate) fn explain_against(&mut self, variant: Option<f64>, reference: Option<f64>) {
        let (Some(vm), Some(rm)) = (self.variant_mean, self.reference_mean) else {
            return;
        };
        let apart = |shown: Option<f64>, mean: f64| shown.is_some_and(|s| (s - mean).abs() >= 5e-4);
        if self.corrected.is_none() && (apart(variant, vm) || apart(reference, rm)) {
            self.note = Some(format!(
                "the difference is between {:.1}% and {:.1}%, each of the {} cases both answered counting once",
                vm * 100.0,
                rm * 100.0,
                self.cases
            ));
        }
    }
}

/// The paired 2×2 table: both right, only one, both wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairTable {
    pub both_right: u64,
    pub only_variant: u64,
    pub only_reference: u64,
    pub both_wrong: u64,
}

/// What a comparison over this many cases could find at all.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Detectable {
    pub cases: u64,
    /// The reference accuracy assumed (the baseline's, or ½ before a run).
    pub reference_accuracy: f64,
    pub power: f64,
    /// Variants compared with the baseline together (Holm's family).
    #[serde(default = "one")]
    pub comparisons: usize,
    /// The smallest difference detectable with that power, as a share; `None` if even the
    /// largest possible difference is out of reach.
    pub difference: Option<f64>,
    /// Answers per case, when more than one: the test is then on case means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
    /// A run of several endpoints: the family is the larger axis' comparisons, not only
    /// variants.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grid: bool,
    /// With repeats: how alike a case's answers are (the intra-class correlation the figure
    /// assumes, the run's estimate on the baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra_class_correlation: Option<f64>,
}

fn one() -> usize {
    1
}

impl Detectable {
    /// What `cases` cases can detect at 80% power, from a reference accuracy, with the
    /// exact test and Holm's adjustment over `comparisons` variants.
    pub fn new(cases: u64, reference_accuracy: f64, confidence: f64, comparisons: usize) -> Self {
        let mut a = Assumptions::new(reference_accuracy, 1.0 - confidence);
        a.comparisons = comparisons.max(1);
        Detectable {
            cases,
            reference_accuracy,
            power: POWER,
            comparisons: comparisons.max(1),
            difference: power::detectable_difference(cases, POWER, &a),
            repeats: None,
            intra_class_correlation: None,
            grid: false,
        }
    }

    /// Said of a run of several endpoints (its family is a question's, not only variants).
    pub fn in_grid(mut self, grid: bool) -> Self {
        self.grid = grid;
        self
    }

    /// The same for `k` answers per case, the test being on case means: the case mean of k
    /// answers whose intra-class correlation is ρ has the variance of one answer times
    /// (1 + (k − 1)ρ)/k, so the detectable difference shrinks by its square root (ρ = 1,
    /// repeats that always agree: no change). Checked by simulation of the sign-flip test
    /// on case means (tests/fixtures/detectable_repeats.py: 79–87% power at the figure
    /// over 48 settings, against 87–100% at the one-answer figure).
    pub(crate) fn with_repeats(mut self, k: u32, icc: f64) -> Self {
        if k > 1 {
            let rho = icc.clamp(0.0, 1.0);
            let shrink = ((1.0 + (f64::from(k) - 1.0) * rho) / f64::from(k)).sqrt();
            self.difference = self.difference.map(|d| d * shrink);
            self.repeats = Some(k);
            self.intra_class_correlation = Some(rho);
        }
        self
    }

    /// The figure as a sentence a user can act on.
    pub fn sentence(&self, confidence: f64) -> String {
        let conf = (confidence * 100.0).round();
        let family = match self.comparisons {
            1 => String::new(),
            m if self.grid => format!(", Holm over {m} comparisons (the larger question's family)"),
            m => format!(", Holm over {m} variants"),
        };
        let (cases, repeats) = match (self.repeats, self.intra_class_correlation) {
            (Some(k), Some(rho)) => (
                format!("{} of {k} answers each", count(self.cases, "case", "cases")),
                format!(
                    ", a case's answers alike with intra-class correlation {rho:.2}, the test on case means"
                ),
            ),
            _ => (count(self.cases, "case", "cases"), String::new()),
        };
        match self.difference {
            Some(d) => format!(
                "With {cases}, the paired test at {conf}% confidence{family} detects differences of about {:.0} points or more with 80% power (reference accuracy {:.0}%{repeats}, assuming the variants' errors are independent: variants that fail on the same cases need fewer cases, variants that fail on different cases more). Smaller real differences will mostly read as noise; `promptgauge plan` sizes a bench for the difference you care about.",
                d * 100.0,
                self.reference_accuracy * 100.0
            ),
            None => format!(
                "With {}, no difference in accuracy can be detected reliably (80% power at {conf}% confidence{family}); `promptgauge plan` says how many cases would.",
                count(self.cases, "case", "cases")
            ),
        }
    }
}

/// An interval bound in points: `+2.5`, and `>0` or `<0` for one that would round to 0.0
/// but is not 0 (which side of 0 it lies on is the verdict).
pub(crate) fn bound(x: f64) -> String {
    let p = x * 100.0;
    if x != 0.0 && p.abs() < 0.05 {
        if x > 0.0 { ">0".into() } else { "<0".into() }
    } else {
        format!("{p:+.1}")
    }
}

/// `+6.2 points`
pub fn points(x: f64) -> String {
    format!("{:+.1} points", x * 100.0)
}

/// A difference corrected by people's labels (prediction-powered inference).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CorrectedDifference {
    pub difference: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Cases both arms had labelled.
    pub labelled_cases: u64,
    /// Every judged case was labelled on both sides: the comparison is of people's
    /// scores, by the usual exact test (no judge in it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_labelled: bool,
}

/// The cases two arms both graded, as a comparison takes them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paired<'a> {
    /// (variant, reference) per case.
    pub pairs: &'a [(CaseScore, CaseScore)],
    /// Each case's group (a case without one is its own), aligned with `pairs`; `None`
    /// when no case has a group.
    pub groups: Option<&'a [String]>,
    /// Scores other than 0/1 occur: report the paired t-test beside the sign-flip test.
    pub scored: bool,
}

impl<'a> Paired<'a> {
    #[cfg(test)]
    /// Ungrouped, binary.
    pub(crate) fn cases(pairs: &'a [(CaseScore, CaseScore)]) -> Self {
        Paired {
            pairs,
            groups: None,
            scored: false,
        }
    }
}

/// Compares `variant` with `against` over the cases both graded. The verdict and the
/// interval are set by [`decide`], once every comparison made together is known.
pub(crate) fn compare(
    variant: &str,
    against: &str,
    paired: Paired<'_>,
    confidence: f64,
) -> Comparison {
    let pairs = paired.pairs;
    let mut c = no_data(variant, against, pairs.len() as u64);
    if pairs.is_empty() {
        return c;
    }
    let n = pairs.len() as f64;
    let mean = |s: &CaseScore| s.mean().unwrap_or(0.0);
    let diffs: Vec<f64> = pairs.iter().map(|(v, r)| mean(v) - mean(r)).collect();
    let d = diffs.iter().sum::<f64>() / n;
    c.difference = Some(d);
    c.variant_mean = Some(pairs.iter().map(|(v, _)| mean(v)).sum::<f64>() / n);
    c.reference_mean = Some(pairs.iter().map(|(_, r)| mean(r)).sum::<f64>() / n);
    set_basis(&mut c, pairs, &diffs, d);
    c.units = units_of(&mut c, paired.groups, &diffs, d);
    c.p_value = match c.basis {
        // Fractional case means: a test of equal means for scores in [0, 1]; the sign-flip
        // test's null is symmetry, which skewed differences break (docs/dev/statistics.md §3b).
        Basis::Means { .. } => {
            c.basis = Basis::Means { confidence };
            c.method = "betting_on_case_means".into();
            BoundedMean::new(&c.units.sums, confidence).map(|t| t.p_value(0.0))
        }
        _ => sign_flip_test(&c.units.sums).map(|t| t.p_value),
    };
    if paired.scored && paired.groups.is_none() {
        paired_t(&mut c, pairs, confidence);
    }
    c
}

/// A comparison of `variant` with `against` over `cases` paired cases, nothing yet known.
fn no_data(variant: &str, against: &str, cases: u64) -> Comparison {
    Comparison {
        variant: variant.to_string(),
        against: against.to_string(),
        cases,
        method: String::new(),
        table: None,
        difference: None,
        ci_low: None,
        ci_high: None,
        ci_level: None,
        p_value: None,
        p_holm: None,
        verdict: Verdict::NoData,
        cases_needed: None,
        variant_mean: None,
        reference_mean: None,
        groups: None,
        design_effect: None,
        t_p_value: None,
        t_ci_low: None,
        t_ci_high: None,
        corrected: None,
        note: None,
        sentence: String::new(),
        family: None,
        units: Units::default(),
        basis: Basis::None,
        spread: Spread::None,
        corrected_se: None,
    }
}

/// What the test rests on: the 2×2 table of case means of 0 or 1 on both sides, else the
/// means; and the spread the cases needed for a difference are reckoned from.
fn set_basis(c: &mut Comparison, pairs: &[(CaseScore, CaseScore)], diffs: &[f64], d: f64) {
    let n = pairs.len() as f64;
    let mean = |s: &CaseScore| s.mean().unwrap_or(0.0);
    // Case means of 0 or 1 on both sides: one answer per case, or repeats that agree (the
    // same evidence, so the same table and numbers).
    let zero_one = |s: &CaseScore| matches!(s.mean(), Some(m) if m == 0.0 || m == 1.0);
    if pairs.iter().all(|(v, r)| zero_one(v) && zero_one(r)) {
        let mut t = PairedTable::default();
        for (v, r) in pairs {
            t.add(mean(v) == 1.0, mean(r) == 1.0);
        }
        c.basis = Basis::Table(t);
        c.table = Some(PairTable {
            both_right: t.both_right,
            only_variant: t.only_variant,
            only_reference: t.only_baseline,
            both_wrong: t.both_wrong,
        });
        c.spread = Spread::Discordance((t.only_variant + t.only_baseline) as f64 / n);
    } else {
        let var = diffs.iter().map(|x| (x - d).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        c.spread = Spread::Variance(var);
        c.basis = Basis::Means { confidence: 0.95 };
    }
}

/// The units whose signs the test flips: each case's difference, or each group's sum
/// (with the design effect of the grouping).
fn units_of(c: &mut Comparison, groups: Option<&[String]>, diffs: &[f64], d: f64) -> Units {
    match groups {
        Some(groups) => {
            let mut by: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
            for (g, x) in groups.iter().zip(diffs) {
                let e = by.entry(g.as_str()).or_default();
                e.0 += x;
                e.1 += 1.0;
            }
            let (sums, sizes): (Vec<f64>, Vec<f64>) = by.into_values().unzip();
            // Var of the mean with and without the grouping (moment estimators).
            let iid: f64 = diffs.iter().map(|x| (x - d).powi(2)).sum();
            let grouped: f64 = sums
                .iter()
                .zip(&sizes)
                .map(|(s, w)| (s - w * d).powi(2))
                .sum();
            c.groups = Some(sums.len() as u64);
            c.design_effect = (iid > 0.0).then(|| grouped / iid);
            c.method = "sign_flip_on_case_means_by_group".into();
            c.basis = Basis::Groups;
            Units { sums, sizes }
        }
        None => {
            c.method = "sign_flip_on_case_means".into();
            Units {
                sizes: vec![1.0; diffs.len()],
                sums: diffs.to_vec(),
            }
        }
    }
}

/// A scored run's paired t interval beside the sign-flip test.
fn paired_t(c: &mut Comparison, pairs: &[(CaseScore, CaseScore)], confidence: f64) {
    let mean = |s: &CaseScore| s.mean().unwrap_or(0.0);
    let v: Vec<f64> = pairs.iter().map(|(v, _)| mean(v)).collect();
    let b: Vec<f64> = pairs.iter().map(|(_, r)| mean(r)).collect();
    if let Some(p) = promptgauge_stats::scores::paired_t(&v, &b, confidence) {
        c.t_p_value = p.t_p_value;
        c.t_ci_low = p.t_interval.map(|i| i.0);
        c.t_ci_high = p.t_interval.map(|i| i.1);
    }
}

/// Adjusts the p-values of comparisons made together (Holm), sets each interval at the
/// level that agrees with Holm's verdict, and writes the verdicts and the cases a
/// difference would need.
pub(crate) fn decide(comparisons: &mut [Comparison], confidence: f64) {
    decide_with(comparisons, confidence, true);
}

/// [`decide`]; `power: false` leaves out the cases a difference would need (a search over
/// exact power, the costly part), as `history` does for its many steps.
pub(crate) fn decide_with(comparisons: &mut [Comparison], confidence: f64, power: bool) {
    let alpha = 1.0 - confidence;
    let tested: Vec<usize> = (0..comparisons.len())
        .filter(|&i| comparisons[i].p_value.is_some())
        .collect();
    let m = tested.len();
    let adjusted = holm(
        &tested
            .iter()
            .map(|&i| comparisons[i].p_value.unwrap_or(1.0))
            .collect::<Vec<_>>(),
    );
    for (&i, p_holm) in tested.iter().zip(adjusted) {
        let c = &mut comparisons[i];
        c.p_holm = Some(p_holm);
        let p = c.p_value.unwrap_or(1.0);
        let Some(level) = holm_level(alpha, p, p_holm, m) else {
            continue;
        };
        c.ci_level = Some(level);
        if let Some((lo, hi)) = interval(c, level) {
            c.ci_low = Some(lo);
            c.ci_high = Some(hi);
        }
    }
    for c in comparisons.iter_mut() {
        c.verdict = match (c.p_holm, c.difference) {
            (Some(p), Some(d)) if p < alpha && d > 0.0 => Verdict::Better,
            (Some(p), Some(d)) if p < alpha && d < 0.0 => Verdict::Worse,
            (Some(_), _) => Verdict::NotDistinguishable,
            _ if c.cases > 0 => Verdict::NotDistinguishable,
            _ => Verdict::NoData,
        };
        let needed = if power && c.verdict == Verdict::NotDistinguishable {
            cases_needed(c, alpha, m.max(1))
        } else {
            Needed::Unknown
        };
        c.cases_needed = match needed {
            Needed::Cases(n) => Some(n),
            _ => None,
        };
        c.sentence = sentence(c, confidence, m, needed);
    }
}

/// The comparison's interval at `level`, from its basis.
pub fn interval(c: &Comparison, level: f64) -> Option<(f64, f64)> {
    let d = c.difference?;
    let clip = |(lo, hi): (f64, f64)| (lo.max(-1.0), hi.min(1.0));
    if let Some(se) = c.corrected_se {
        let half = promptgauge_stats::z_for(level) * se;
        return Some(clip((d - half, d + half)));
    }
    let units = &c.units;
    match &c.basis {
        Basis::None => None,
        Basis::Table(t) => exact_paired_interval(t, level).map(|(_, lo, hi)| (lo, hi)),
        Basis::Means { confidence } => {
            BoundedMean::new(&units.sums, *confidence).and_then(|t| t.interval(level))
        }
        Basis::Groups => {
            // The groups are the units: the sign-flip test by group inverted on the same
            // sums the verdict tests, for the same estimate (the mean over cases), so the
            // interval excludes 0 exactly when the test rejects at this level.
            promptgauge_stats::permutation::grouped_paired_interval(
                &units.sums,
                &units.sizes,
                c.p_value?,
                level,
            )
            .map(|(_, lo, hi)| (lo, hi))
        }
    }
}

/// How many cases telling the observed difference from noise would take.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Needed {
    Cases(u64),
    /// More than a million: out of reach in practice.
    BeyondAMillion,
    /// Not computed (`history` skips it), not computable (no spread to go on, an
    /// impossible accuracy), or no more than the cases already run (the exact test is
    /// conservative at few cases; such a figure says nothing useful): nothing is said.
    Unknown,
}

/// Cases past which a figure is "more than a million".
const MILLION: f64 = 1_000_000.0;

/// The cases with which the test and Holm family used here would detect the observed
/// difference with 80% power: exact for one 0/1 answer per case (at the observed
/// disagreement), a normal approximation for case means and for a difference corrected by
/// labels (at the same share of labelled cases, from its standard error); times the design
/// effect of groups.
fn cases_needed(c: &Comparison, alpha: f64, comparisons: usize) -> Needed {
    let Some(d) = c.difference.filter(|d| *d != 0.0) else {
        return Needed::Unknown;
    };
    use statrs::distribution::{ContinuousCDF, Normal};
    let z = Normal::standard();
    let z_ab = z.inverse_cdf(1.0 - alpha / (2.0 * comparisons as f64)) + z.inverse_cdf(POWER);
    let deff = c.design_effect.unwrap_or(1.0).max(1.0);
    let n = match (c.corrected_se, c.spread) {
        (Some(se), _) if se > 0.0 => c.cases as f64 * (z_ab * se / d).powi(2),
        (_, Spread::Discordance(discordance)) => {
            let Some(reference) = c.reference_mean else {
                return Needed::Unknown;
            };
            if !(0.0..=1.0).contains(&(reference + d)) {
                return Needed::Unknown;
            }
            let mut a = Assumptions::new(reference, alpha);
            a.comparisons = comparisons;
            a.discordance = Some(discordance);
            match power::cases_needed(d, POWER, &a) {
                Some(n) => n as f64,
                None => return Needed::BeyondAMillion,
            }
        }
        (_, Spread::Variance(var)) => {
            // The betting test (docs/dev/statistics.md §3b) with bets sized at α rejects at
            // level α' about when √n·|d̄|/σ ≥ (log(2/α') + log(2/α)) / √(2 log(2/α)).
            let bet = (2.0 / alpha).ln();
            let level = (2.0 * comparisons as f64 / alpha).ln();
            let z_b = (level + bet) / (2.0 * bet).sqrt() + z.inverse_cdf(POWER);
            (z_b * z_b * var / (d * d)).ceil()
        }
        _ => return Needed::Unknown,
    };
    let n = (n * deff).ceil();
    if !n.is_finite() || n > MILLION {
        return Needed::BeyondAMillion;
    }
    let n = n as u64;
    if n > c.cases {
        Needed::Cases(n)
    } else {
        Needed::Unknown
    }
}

/// The interval column's header: `95% CI`, or `CI (Holm)` when the comparisons' intervals
/// are at levels Holm's adjustment raised.
pub(crate) fn ci_header<'a>(
    comparisons: impl IntoIterator<Item = &'a Comparison>,
    confidence: f64,
) -> String {
    match levels(comparisons, confidence) {
        Some(_) => "CI (Holm)".to_string(),
        None => format!("{}% CI", (confidence * 100.0).round()),
    }
}

/// What the intervals' levels are, when Holm raised some above the run's confidence.
pub(crate) fn levels_note<'a>(
    comparisons: impl IntoIterator<Item = &'a Comparison>,
    confidence: f64,
) -> Option<String> {
    let (lo, hi) = levels(comparisons, confidence)?;
    let range = if level_text(lo) == level_text(hi) {
        level_text(lo)
    } else {
        format!("{} to {}", level_text(lo), level_text(hi))
    };
    Some(format!(
        "Intervals are at {range}: the level at which each agrees with its Holm-adjusted verdict, so an interval excludes 0 exactly when the verdict is better or worse."
    ))
}

fn levels<'a>(
    comparisons: impl IntoIterator<Item = &'a Comparison>,
    confidence: f64,
) -> Option<(f64, f64)> {
    let levels: Vec<f64> = comparisons.into_iter().filter_map(|c| c.ci_level).collect();
    let lo = levels.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = levels.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (!levels.is_empty() && level_text(hi) != level_text(confidence)).then_some((lo, hi))
}

fn level_text(level: f64) -> String {
    let pct = level * 100.0;
    if (pct - pct.round()).abs() < 0.05 {
        format!("{:.0}%", pct.round())
    } else {
        format!("{pct:.1}%")
    }
}

fn sentence(c: &Comparison, confidence: f64, comparisons: usize, needed: Needed) -> String {
    let level = c.ci_level.unwrap_or(confidence);
    let at = if comparisons > 1 {
        format!(
            "at {} (the level that agrees with Holm over {comparisons} comparisons)",
            level_text(level)
        )
    } else {
        format!("at {}", level_text(level))
    };
    let unit = match c.groups {
        Some(g) => format!(
            "{} in {} (design effect {:.2})",
            count(c.cases, "paired case", "paired cases"),
            count(g, "group", "groups"),
            c.design_effect.unwrap_or(1.0)
        ),
        None => count(c.cases, "paired case", "paired cases"),
    };
    let numbers = match (c.difference, c.ci_low, c.ci_high, c.p_holm) {
        (Some(d), Some(lo), Some(hi), Some(p)) => {
            format!(
                "{} [{}, {}] {at}, {} (Holm), {unit}",
                points(d),
                bound(lo),
                bound(hi),
                p_text(p),
            )
        }
        (Some(d), ..) => format!("{} over {unit}", points(d)),
        _ => String::new(),
    };
    let numbers = match (&c.corrected, &c.note) {
        (Some(d), _) if d.all_labelled => format!(
            "{numbers}, as people scored it (every judged answer labelled, {} cases)",
            d.labelled_cases
        ),
        (Some(d), _) => format!(
            "{numbers}, as people would score it (judge corrected by labels on {} cases)",
            d.labelled_cases
        ),
        (None, Some(note)) => format!("{numbers}; {note}"),
        (None, None) => numbers,
    };
    match c.verdict {
        Verdict::Better => format!("{} is better than {}: {numbers}.", c.variant, c.against),
        Verdict::Worse => format!("{} is worse than {}: {numbers}.", c.variant, c.against),
        Verdict::NotDistinguishable => {
            let labels = if c.corrected.is_some_and(|d| !d.all_labelled) {
                " (at the same share of labelled cases)"
            } else {
                ""
            };
            let need = match (needed, c.difference) {
                (_, Some(0.0)) => "; no difference was observed".to_string(),
                (Needed::Cases(n), Some(d)) => format!(
                    "; telling a difference of {:.1} points from noise would take about {n} cases{labels}",
                    d.abs() * 100.0
                ),
                (Needed::BeyondAMillion, Some(d)) => format!(
                    "; telling a difference of {:.1} points from noise would take more than a million cases",
                    d.abs() * 100.0
                ),
                _ => String::new(),
            };
            format!(
                "{} is not distinguishable from {}: {numbers}{need}.",
                c.variant, c.against
            )
        }
        Verdict::NoData => format!(
            "{} has no case graded alongside {}: nothing to compare.",
            c.variant, c.against
        ),
    }
}

/// `p = 0.047`, or `p < 0.001`.
fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".to_string()
    } else {
        format!("p = {p:.3}")
    }
}

/// A p-value for a table cell: `0.047`, `<0.001`.
pub(crate) fn p_cell(p: Option<f64>) -> String {
    match p {
        None => "–".into(),
        Some(p) if p < 0.001 => "<0.001".into(),
        Some(p) => format!("{p:.3}"),
    }
}

/// Per-case scores of several arms, keyed by case id, for pairing.
///
/// Compact, since `compare` and `view` hold several of these for runs of 100,000 cases:
/// the case ids in one [`Ids`] (a case's number is its row), every case's scores in one
/// flat vector, its tags and group as numbers into the few distinct sets a bench has.
#[derive(Debug, Default, Clone)]
pub struct CaseTable {
    arms: usize,
    /// Case ids; case r's number is its row.
    ids: Ids,
    /// The rows in case id order, made when first read after a case was added.
    order: std::sync::OnceLock<Vec<u32>>,
    /// Row r's scores: `scores[r * arms..(r + 1) * arms]`.
    scores: Vec<CaseScore>,
    /// Row r's tag set (in `tag_sets`), [`UNSET`] until a graded sample brings it.
    row_tags: Vec<u32>,
    /// Row r's group (its number in `groups`), or [`UNSET`].
    row_groups: Vec<u32>,
    tag_sets: Vec<Vec<String>>,
    tag_ids: HashMap<Vec<String>, u32>,
    groups: Ids,
}

/// No tag set or group (yet).
const UNSET: u32 = u32::MAX;

/// The unit a case is counted in when cases are grouped: `group:G`, or `case:ID`.
pub(crate) fn unit_of(id: &str, group: Option<&str>) -> String {
    group.map_or_else(|| format!("case:{id}"), |g| format!("group:{g}"))
}

impl CaseTable {
    /// An empty table with `arms` arms (variants, or runs).
    pub fn new(arms: usize) -> Self {
        CaseTable {
            arms,
            ..CaseTable::default()
        }
    }

    /// `case`'s row, made (with no score) when it has none.
    fn row(&mut self, case: &str) -> usize {
        let r = self.ids.intern(case) as usize;
        if r < self.row_tags.len() {
            return r;
        }
        self.order = std::sync::OnceLock::new();
        self.scores
            .extend(std::iter::repeat_n(CaseScore::default(), self.arms));
        self.row_tags.push(UNSET);
        self.row_groups.push(UNSET);
        r
    }

    /// The row's tags, from the first graded sample that brings any.
    fn tag_row(&mut self, r: usize, tags: &[String]) {
        if self.row_tags[r] != UNSET {
            return;
        }
        self.row_tags[r] = match self.tag_ids.get(tags) {
            Some(&id) => id,
            None => {
                let id = self.tag_sets.len() as u32;
                self.tag_sets.push(tags.to_vec());
                self.tag_ids.insert(tags.to_vec(), id);
                id
            }
        };
    }

    /// Records one graded sample of `arm` for `case`, with its score.
    pub fn add(&mut self, case: &str, tags: &[String], arm: usize, score: f64) {
        let r = self.row(case);
        self.tag_row(r, tags);
        self.scores[r * self.arms + arm].add(score);
    }

    /// Puts `case` in `group` (cases without one are each their own); the first group
    /// given stays.
    pub fn set_group(&mut self, case: &str, group: &str) {
        let r = self.row(case);
        if self.row_groups[r] == UNSET {
            self.row_groups[r] = self.groups.intern(group);
        }
    }

    /// Gives back the room kept for more cases (a table kept after its run is read).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.ids.shrink_to_fit();
        self.scores.shrink_to_fit();
        self.row_tags.shrink_to_fit();
        self.row_groups.shrink_to_fit();
    }

    /// Whether any case has a group.
    pub(crate) fn grouped(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Row r's group, if it has one.
    fn group_of_row(&self, r: usize) -> Option<&str> {
        let g = self.row_groups[r];
        (g != UNSET).then(|| self.groups.id(g))
    }

    /// `case`'s group, if it has one.
    pub(crate) fn group(&self, case: &str) -> Option<&str> {
        self.group_of_row(self.ids.get(case)? as usize)
    }

    /// Every case with a graded sample, in id order: its id, tags and per-arm scores.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (&str, &[String], &[CaseScore])> + '_ {
        self.all_rows()
            .filter(|(_, _, s)| s.iter().any(|s| s.graded > 0))
    }

    /// Every case, graded or not (a group given alone makes a row), in id order.
    fn all_rows(&self) -> impl Iterator<Item = (&str, &[String], &[CaseScore])> + '_ {
        self.in_order().map(|(id, r)| {
            let tags = self
                .tag_sets
                .get(self.row_tags[r] as usize)
                .map_or(&[][..], Vec::as_slice);
            (id, tags, &self.scores[r * self.arms..(r + 1) * self.arms])
        })
    }

    /// Every case's id and row, in id order.
    fn in_order(&self) -> impl Iterator<Item = (&str, usize)> + '_ {
        let order = self.order.get_or_init(|| self.ids.sorted());
        order.iter().map(|&r| (self.ids.id(r), r as usize))
    }

    /// Every case in id order: its id, per-arm scores and group.
    pub(super) fn entries(&self) -> impl Iterator<Item = (&str, &[CaseScore], Option<&str>)> + '_ {
        self.in_order().map(|(id, r)| {
            let scores = &self.scores[r * self.arms..(r + 1) * self.arms];
            (id, scores, self.group_of_row(r))
        })
    }

    /// How many cases have a graded sample.
    pub(crate) fn len(&self) -> usize {
        self.rows().count()
    }

    /// Whether no case has a graded sample.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.rows().next().is_none()
    }

    /// The tags any case carries, sorted, each once.
    pub(crate) fn tags(&self) -> Vec<&String> {
        let mut tags: Vec<&String> = self.tag_sets.iter().flatten().collect();
        tags.sort();
        tags.dedup();
        tags
    }

    /// `id`'s unit when cases are grouped ([`unit_of`]).
    fn unit(&self, id: &str) -> String {
        unit_of(id, self.group(id))
    }

    /// One arm's scores over the cases it graded, each with its case's id.
    pub(crate) fn arm_by_id(&self, arm: usize) -> Vec<(&str, CaseScore)> {
        self.all_rows()
            .map(|(id, _, s)| (id, s[arm]))
            .filter(|(_, s)| s.graded > 0)
            .collect()
    }

    /// One arm's scores over the cases it graded.
    pub(crate) fn arm(&self, arm: usize) -> Vec<CaseScore> {
        self.all_rows()
            .map(|(_, _, s)| s[arm])
            .filter(|s| s.graded > 0)
            .collect()
    }

    /// Cases graded in both arms, with each one's group when any case has one (a case
    /// without a group is its own, named by its id).
    pub(crate) fn paired(
        &self,
        arm: usize,
        reference: usize,
    ) -> (Vec<(CaseScore, CaseScore)>, Option<Vec<String>>) {
        let pairs = self.pairs(arm, reference);
        if !self.grouped() {
            return (pairs, None);
        }
        let groups = self
            .paired_ids(arm, reference)
            .into_iter()
            .map(|id| self.unit(id))
            .collect();
        (pairs, Some(groups))
    }

    /// One arm's scores by group: each group's cases pooled into one unit (cases without a
    /// group are their own). The same as [`CaseTable::arm`] when no case has a group.
    pub(crate) fn arm_by_group(&self, arm: usize) -> Vec<CaseScore> {
        if !self.grouped() {
            return self.arm(arm);
        }
        let mut by: BTreeMap<String, CaseScore> = BTreeMap::new();
        for (id, _, s) in self.all_rows() {
            let s = s[arm];
            if s.graded == 0 {
                continue;
            }
            by.entry(self.unit(id)).or_default().pool(s);
        }
        by.into_values().collect()
    }

    /// One arm's case means, with each case's group when any case has one.
    pub(crate) fn arm_means(&self, arm: usize) -> (Vec<f64>, Option<Vec<String>>) {
        let graded = || self.all_rows().filter(move |(_, _, s)| s[arm].graded > 0);
        let means = graded().filter_map(|(_, _, s)| s[arm].mean()).collect();
        if !self.grouped() {
            return (means, None);
        }
        let groups = graded().map(|(id, _, _)| self.unit(id)).collect();
        (means, Some(groups))
    }

    /// The arm's mean of its case means with its interval: the groups the units when cases
    /// carry groups (what a scored variant, or a scored part, reports).
    pub(crate) fn arm_mean_score(
        &self,
        arm: usize,
        confidence: f64,
    ) -> Option<promptgauge_stats::scores::MeanScore> {
        let (means, groups) = self.arm_means(arm);
        match &groups {
            Some(g) => promptgauge_stats::scores::mean_score_clustered(&means, g, confidence),
            None => promptgauge_stats::scores::mean_score(&means, confidence),
        }
    }

    /// The ids of the cases graded in both arms, aligned with [`CaseTable::pairs`].
    pub(crate) fn paired_ids(&self, arm: usize, reference: usize) -> Vec<&str> {
        self.all_rows()
            .filter(|(_, _, s)| s[arm].graded > 0 && s[reference].graded > 0)
            .map(|(id, _, _)| id)
            .collect()
    }

    /// Cases graded in both arms.
    pub(crate) fn pairs(&self, arm: usize, reference: usize) -> Vec<(CaseScore, CaseScore)> {
        self.all_rows()
            .map(|(_, _, s)| (s[arm], s[reference]))
            .filter(|(a, r)| a.graded > 0 && r.graded > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::run_comparison::{TableArm, pair_runs};
    use promptgauge_stats::paired::mcnemar_exact;

    fn one(correct: bool) -> CaseScore {
        CaseScore::binary(u64::from(correct), 1)
    }

    /// Two runs' tables walked side by side: only cases both graded pair, a changed case
    /// pairs with nothing, a case's unit is A's group, else B's, else its own.
    #[test]
    fn two_runs_pair_by_case_without_a_third_table() {
        let (mut a, mut b) = (CaseTable::new(2), CaseTable::new(1));
        for (case, score) in [("c1", 1.0), ("c2", 0.0), ("c3", 1.0), ("c5", 1.0)] {
            a.add(case, &[], 1, score);
        }
        a.add("c4", &[], 0, 1.0);
        a.set_group("c2", "ga");
        for (case, score) in [
            ("c0", 1.0),
            ("c2", 1.0),
            ("c3", 0.0),
            ("c4", 1.0),
            ("c5", 0.0),
        ] {
            b.add(case, &[], 0, score);
        }
        b.set_group("c2", "gb");
        b.set_group("c3", "gb");
        let changed = std::collections::HashSet::from(["c5".to_string()]);
        let arm = |table, index| TableArm { table, index };
        let (pairs, units) = pair_runs(arm(&a, 1), arm(&b, 0), &changed);
        // c2 and c3 pair; c1 and c0 are in one run only, c4 A never graded in arm 1.
        assert_eq!(
            pairs,
            vec![(one(true), one(false)), (one(false), one(true))]
        );
        assert_eq!(units.unwrap(), vec!["group:ga", "group:gb"]);
        let (_, units) = pair_runs(arm(&a, 0), arm(&CaseTable::new(1), 0), &changed);
        assert_eq!(units, None);
    }

    /// The compact table keeps the old map's meaning: a group given alone counts no case,
    /// the first graded sample's tags and the first group stay, rows come in id order.
    #[test]
    fn a_case_table_counts_graded_cases_with_their_first_tags_and_group() {
        let tags = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut t = CaseTable::new(2);
        t.set_group("c3", "g1");
        assert!(t.is_empty() && t.grouped());
        t.add("c2", &tags(&["x"]), 0, 1.0);
        t.add("c2", &tags(&["y"]), 1, 0.0);
        t.add("c1", &tags(&["x", "z"]), 1, 1.0);
        t.set_group("c2", "g1");
        t.set_group("c2", "g2");
        t.add("c3", &[], 0, 1.0);
        t.add("c3", &[], 1, 0.5);
        let rows: Vec<(&str, Vec<String>)> = t.rows().map(|(id, t, _)| (id, t.to_vec())).collect();
        assert_eq!(
            rows,
            vec![
                ("c1", tags(&["x", "z"])),
                ("c2", tags(&["x"])),
                ("c3", vec![])
            ]
        );
        // "y" came after c2 had its tags: no case carries it.
        assert_eq!(t.len(), 3);
        assert_eq!(t.tags(), tags(&["x", "z"]).iter().collect::<Vec<_>>());
        assert_eq!(t.group("c2"), Some("g1"));
        assert_eq!(t.group("c1"), None);
        let (pairs, units) = t.paired(1, 0);
        assert_eq!(
            pairs,
            vec![
                (one(false), one(true)),
                (
                    CaseScore {
                        score: 0.5,
                        squares: 0.25,
                        graded: 1
                    },
                    one(true)
                )
            ]
        );
        assert_eq!(
            units,
            Some(vec!["group:g1".to_string(), "group:g1".to_string()])
        );
        assert_eq!(t.paired_ids(1, 0), vec!["c2", "c3"]);
        // Arm 0 graded c2 and c3, both in g1: one unit of two samples.
        assert_eq!(t.arm(0).len(), 2);
        assert_eq!(t.arm_by_group(0), vec![CaseScore::binary(2, 2)]);
        let (means, units) = t.arm_means(1);
        assert_eq!(means, vec![1.0, 0.0, 0.5]);
        assert_eq!(units.unwrap(), vec!["case:c1", "group:g1", "group:g1"]);
    }

    /// A 2×2 table as pairs: both right, only the variant, only the reference, both wrong;
    /// every answer given `k` times.
    pub(crate) fn table(
        both: usize,
        only_v: usize,
        only_r: usize,
        neither: usize,
        k: u64,
    ) -> Vec<(CaseScore, CaseScore)> {
        let s = |right: bool| CaseScore::binary(if right { k } else { 0 }, k);
        let mut pairs = vec![(s(true), s(true)); both];
        pairs.extend(vec![(s(true), s(false)); only_v]);
        pairs.extend(vec![(s(false), s(true)); only_r]);
        pairs.extend(vec![(s(false), s(false)); neither]);
        pairs
    }

    fn decided(tables: &[Vec<(CaseScore, CaseScore)>]) -> Vec<Comparison> {
        let mut cs: Vec<Comparison> = tables
            .iter()
            .enumerate()
            .map(|(i, t)| compare(&format!("v{i}"), "base", Paired::cases(t), 0.95))
            .collect();
        decide(&mut cs, 0.95);
        cs
    }

    #[test]
    fn a_clear_gain_is_better_and_noise_is_not() {
        // 40 cases: the variant fixes 12 the baseline missed and breaks none.
        let mut pairs = vec![(one(true), one(false)); 12];
        pairs.extend(vec![(one(true), one(true)); 20]);
        pairs.extend(vec![(one(false), one(false)); 8]);
        // 2 fixed, 1 broken: noise.
        let mut noisy = vec![(one(true), one(false)); 2];
        noisy.push((one(false), one(true)));
        noisy.extend(vec![(one(true), one(true)); 17]);
        let cs = decided(&[pairs, noisy]);
        assert_eq!(cs[0].verdict, Verdict::Better);
        assert!(
            cs[0]
                .sentence
                .starts_with("v0 is better than base: +30.0 points"),
            "{}",
            cs[0].sentence
        );
        assert_eq!(cs[1].verdict, Verdict::NotDistinguishable);
        assert!(
            cs[1].sentence.contains("would take about"),
            "{}",
            cs[1].sentence
        );
        // With one 0/1 answer per case the sign-flip test is exact McNemar; Holm doubles
        // the smaller p.
        assert!((cs[0].p_value.unwrap() - mcnemar_exact(12, 0)).abs() < 1e-12);
        assert!((cs[0].p_holm.unwrap() - 2.0 * mcnemar_exact(12, 0)).abs() < 1e-12);
    }

    #[test]
    fn copying_every_answer_k_times_changes_no_verdict_p_value_or_interval() {
        // The table: 56 both right, 4 only the variant, 0 only the baseline, 4
        // both wrong. Exact McNemar: p = 0.125, not distinguishable, at any k.
        let tables = [(56, 4, 0, 4), (40, 14, 3, 7), (20, 5, 6, 9), (30, 9, 1, 0)];
        let at = |k: u64| -> Vec<Comparison> {
            decided(
                &tables
                    .iter()
                    .map(|&(a, b, c, d)| table(a, b, c, d, k))
                    .collect::<Vec<_>>(),
            )
        };
        let once = at(1);
        assert!((once[0].p_value.unwrap() - 0.125).abs() < 1e-12);
        assert_eq!(once[0].verdict, Verdict::NotDistinguishable);
        for k in [2, 3, 5] {
            for (a, b) in once.iter().zip(at(k)) {
                assert_eq!(a.verdict, b.verdict, "k = {k}");
                assert_eq!(a.p_value, b.p_value, "k = {k}");
                assert_eq!(a.p_holm, b.p_holm, "k = {k}");
                assert_eq!((a.ci_low, a.ci_high), (b.ci_low, b.ci_high), "k = {k}");
                assert_eq!(a.difference, b.difference, "k = {k}");
            }
        }
    }

    #[test]
    fn the_cases_a_difference_needs_are_computed_or_not_claimed() {
        // A difference corrected by labels: computed from its standard error, never "more
        // than a million" for want of a spread.
        let pairs = table(50, 6, 3, 5, 1);
        let mut c = compare("v", "base", Paired::cases(&pairs), 0.95);
        c.correct(
            CorrectedDifference {
                difference: 0.05,
                ci_low: -0.03,
                ci_high: 0.13,
                labelled_cases: 20,
                all_labelled: false,
            },
            0.04,
            0.21,
        );
        let mut cs = vec![c];
        decide(&mut cs, 0.95);
        assert_eq!(cs[0].verdict, Verdict::NotDistinguishable);
        // 64 cases · ((1.96 + 0.84) · 0.04 / 0.05)² ≈ 321.
        let n = cs[0].cases_needed.unwrap();
        assert!((300..340).contains(&n), "{n}");
        assert!(
            cs[0].sentence.contains(&format!(
                "would take about {n} cases (at the same share of labelled cases)"
            )),
            "{}",
            cs[0].sentence
        );
        assert!(!cs[0].sentence.contains("million"));
        // Without the power search (as history does), nothing is claimed at all.
        let mut cs = vec![compare("v", "base", Paired::cases(&pairs), 0.95)];
        decide_with(&mut cs, 0.95, false);
        assert_eq!(cs[0].cases_needed, None);
        assert!(!cs[0].sentence.contains("would take"), "{}", cs[0].sentence);
        // A difference of a fraction of a point is out of reach, and says so.
        let tiny = table(9000, 4001, 4000, 1000, 1);
        let cs = decided(&[tiny]);
        assert!(
            cs[0].sentence.contains("more than a million"),
            "{}",
            cs[0].sentence
        );
    }

    #[test]
    fn repeats_that_disagree_detect_smaller_differences_on_case_means() {
        let one = Detectable::new(64, 0.7, 0.95, 1);
        let d1 = one.difference.unwrap();
        // Five answers a case, correlated 0.5: the case mean's variance is 3/5 of one
        // answer's, so the figure shrinks by √0.6.
        let five = Detectable::new(64, 0.7, 0.95, 1).with_repeats(5, 0.5);
        assert!((five.difference.unwrap() - d1 * 0.6f64.sqrt()).abs() < 1e-12);
        assert!(five.sentence(0.95).contains("64 cases of 5 answers each"));
        assert!(five.sentence(0.95).contains("intra-class correlation 0.50"));
        // One answer a case, or answers that always agree: the exact McNemar figure.
        assert_eq!(one.with_repeats(1, 0.2), one);
        assert_eq!(one.with_repeats(4, 1.0).difference, one.difference);
    }

    #[test]
    fn a_subnormal_p_value_keeps_its_interval() {
        // 1,060 discordant pairs all one way: p = 2^-1059, subnormal.
        let cs = decided(&[table(10, 1060, 0, 10, 1)]);
        let c = &cs[0];
        assert!(c.p_value.unwrap() > 0.0 && !c.p_value.unwrap().is_normal());
        assert_eq!(c.verdict, Verdict::Better);
        assert_eq!(c.ci_level, Some(0.95));
        let (lo, hi) = (c.ci_low.unwrap(), c.ci_high.unwrap());
        assert!(lo > 0.9 && hi <= 1.0 && lo < hi, "[{lo}, {hi}]");
        assert!(c.sentence.contains("at 95%"), "{}", c.sentence);
    }

    #[test]
    fn skewed_scores_with_equal_means_are_not_called_different() {
        // 20 cases: the variant scores 0.1 on each, the baseline 0 (a baseline right on 10%
        // of cases misses 20 in a row 12% of the time, with equal means). The sign-flip
        // test said "better, p = 2/2²⁰"; the betting test of equal means does not.
        let score = |x: f64| {
            let mut s = CaseScore::default();
            s.add(x);
            s
        };
        let pairs = vec![(score(0.1), score(0.0)); 20];
        let cs = decided(&[pairs]);
        let c = &cs[0];
        assert_eq!(c.method, "betting_on_case_means");
        assert_eq!(c.verdict, Verdict::NotDistinguishable, "{c:?}");
        assert!(
            c.ci_low.unwrap() < 0.0 && c.ci_high.unwrap() >= 0.1,
            "{c:?}"
        );
        // 200 cases of a clear gain (+0.2 on 60%, −0.1 on the rest): better, and the
        // interval agrees.
        let pairs: Vec<_> = (0..200)
            .map(|i| {
                if i % 5 < 3 {
                    (score(0.6), score(0.4))
                } else {
                    (score(0.4), score(0.5))
                }
            })
            .collect();
        let cs = decided(&[pairs]);
        assert_eq!(cs[0].verdict, Verdict::Better, "{:?}", cs[0]);
        assert!(cs[0].ci_low.unwrap() > 0.0, "{:?}", cs[0]);
    }

    #[test]
    fn no_spread_is_no_certainty() {
        // Two cases, the variant 3/3 and the baseline 0/3 on each: the same evidence as
        // two discordant pairs, p = 0.5 (it was "better, p < 0.001" under a t-test).
        let pairs = vec![(CaseScore::binary(3, 3), CaseScore::binary(0, 3)); 2];
        let cs = decided(&[pairs]);
        assert!(
            (cs[0].p_value.unwrap() - 0.5).abs() < 1e-12,
            "{:?}",
            cs[0].p_value
        );
        assert_eq!(cs[0].verdict, Verdict::NotDistinguishable);
        assert!(cs[0].ci_low.unwrap() < 0.0, "{:?}", cs[0].ci_low);
    }

    #[test]
    fn every_interval_excludes_zero_exactly_when_holm_decides() {
        // Seeded tables of 3 variants; intervals at Holm's level never contradict it.
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % n) as usize
        };
        let mut disagreed_at_plain_level = 0;
        // Small tables, so every p-value is exact and the test stays quick.
        for _ in 0..60 {
            let tables: Vec<_> = (0..3)
                .map(|_| table(next(3), next(9), next(3), 1 + next(2), 1))
                .collect();
            for c in decided(&tables) {
                let (lo, hi) = (c.ci_low.unwrap(), c.ci_high.unwrap());
                let excludes = lo > 0.0 || hi < 0.0;
                let decided = matches!(c.verdict, Verdict::Better | Verdict::Worse);
                assert_eq!(excludes, decided, "{}", c.sentence);
                let level = c.ci_level.unwrap();
                assert!((0.95 - 1e-9..=1.0 - 0.05 / 3.0 + 1e-9).contains(&level));
                // Where the raw p is below 5% but Holm's is not, a plain 95% interval would
                // have excluded 0 beside "not distinguishable".
                if c.p_value.unwrap() < 0.05 && !decided {
                    disagreed_at_plain_level += 1;
                }
            }
        }
        assert!(disagreed_at_plain_level > 0, "the seeds exercise the case");
    }

    #[test]
    fn every_scored_interval_excludes_zero_exactly_when_holm_decides() {
        // Seeded scored comparisons of 3 variants (case means of 3 repeats, 60 cases, gains
        // of 0 to 23 points): the betting test's intervals at Holm's level never contradict
        // its verdicts.
        let mut seed = 11u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let (mut decided_seen, mut open_seen) = (0, 0);
        for _ in 0..20 {
            let arms: Vec<Vec<(CaseScore, CaseScore)>> = (0..3)
                .map(|_| {
                    let gain = next(8);
                    (0..60)
                        .map(|_| {
                            let base = next(4);
                            // ±1 answer of 3 at random, one more right with chance gain/10.
                            let step = next(3) as i64 - 1 + i64::from(next(10) < gain);
                            let variant = (base as i64 + step).clamp(0, 3) as u64;
                            (CaseScore::binary(variant, 3), CaseScore::binary(base, 3))
                        })
                        .collect()
                })
                .collect();
            for c in decided(&arms) {
                assert_eq!(c.method, "betting_on_case_means");
                let (lo, hi) = (c.ci_low.unwrap(), c.ci_high.unwrap());
                let decided = matches!(c.verdict, Verdict::Better | Verdict::Worse);
                assert_eq!(lo > 0.0 || hi < 0.0, decided, "{}", c.sentence);
                assert!(lo <= c.difference.unwrap() && c.difference.unwrap() <= hi);
                decided_seen += usize::from(decided);
                open_seen += usize::from(!decided);
            }
        }
        assert!(
            decided_seen > 0 && open_seen > 0,
            "{decided_seen} {open_seen}"
        );
    }

    #[test]
    fn unequal_repeats_make_the_difference_the_difference_of_case_means_and_say_so() {
        // Case 1: variant 1/1 (two jobs failed), baseline 1/3; case 2: 0/3 and 0/3; case 3:
        // 1/3 and 1/3. Pooled accuracies 2/7 and 2/9; case means 4/9 and 2/9.
        let s = CaseScore::binary;
        let pairs = vec![(s(1, 1), s(1, 3)), (s(0, 3), s(0, 3)), (s(1, 3), s(1, 3))];
        let mut c = compare("v", "b", Paired::cases(&pairs), 0.95);
        c.explain_against(Some(2.0 / 7.0), Some(2.0 / 9.0));
        let mut cs = vec![c];
        decide(&mut cs, 0.95);
        let c = &cs[0];
        let (vm, rm) = (c.variant_mean.unwrap(), c.reference_mean.unwrap());
        assert!((vm - (1.0 + 0.0 + 1.0 / 3.0) / 3.0).abs() < 1e-12);
        assert!((c.difference.unwrap() - (vm - rm)).abs() < 1e-12);
        assert!(c.table.is_none());
        assert!(
            c.sentence.contains("the difference is between 44.4% and 22.2%, each of the 3 cases both answered counting once"),
            "{}",
            c.sentence
        );
    }

    #[test]
    fn groups_flip_together_and_widen_the_interval() {
        // 12 cases in 3 groups of 4; the gain sits in two groups.
        let t = table(0, 8, 0, 4, 1);
        let groups: Vec<String> = (0..12).map(|i| format!("g{}", i / 4)).collect();
        let mut plain = vec![compare("v", "b", Paired::cases(&t), 0.95)];
        let mut grouped = vec![compare(
            "v",
            "b",
            Paired {
                pairs: &t,
                groups: Some(&groups),
                scored: false,
            },
            0.95,
        )];
        decide(&mut plain, 0.95);
        decide(&mut grouped, 0.95);
        assert_eq!(plain[0].verdict, Verdict::Better);
        // Group sums 4, 4, 0: two groups that moved, and 2 of their 4 sign patterns are as
        // extreme (p = 0.5), where 8 independent cases would give p = 2/2⁸.
        assert_eq!(grouped[0].verdict, Verdict::NotDistinguishable);
        assert!((grouped[0].p_value.unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(grouped[0].groups, Some(3));
        assert!(grouped[0].design_effect.unwrap() > 1.0);
        assert!(
            grouped[0].sentence.contains("in 3 groups"),
            "{}",
            grouped[0].sentence
        );
    }

    #[test]
    fn few_groups_give_wide_intervals_never_zero_width_ones() {
        // Two groups, each 5 wins, 5 losses, 10 ties: group means of exactly 0.
        let mut one = table(0, 5, 5, 10, 1);
        one.extend(table(0, 5, 5, 10, 1));
        let groups: Vec<String> = (0..40).map(|i| format!("g{}", i / 20)).collect();
        for g in [&groups[..], &vec!["all".to_string(); 40][..]] {
            let mut cs = vec![compare(
                "v",
                "b",
                Paired {
                    pairs: &one,
                    groups: Some(g),
                    scored: false,
                },
                0.95,
            )];
            decide(&mut cs, 0.95);
            let (lo, hi) = (cs[0].ci_low.unwrap(), cs[0].ci_high.unwrap());
            assert!(lo < -0.3 && hi > 0.3, "[{lo}, {hi}]");
            assert_eq!(cs[0].verdict, Verdict::NotDistinguishable);
        }
        // Four identical groups each +0.2: not significant, so the interval holds 0.
        let four: Vec<_> = (0..4).flat_map(|_| table(0, 2, 0, 8, 1)).collect();
        let g4: Vec<String> = (0..40).map(|i| format!("g{}", i / 10)).collect();
        let mut cs = vec![compare(
            "v",
            "b",
            Paired {
                pairs: &four,
                groups: Some(&g4),
                scored: false,
            },
            0.95,
        )];
        decide(&mut cs, 0.95);
        assert!((cs[0].p_value.unwrap() - 0.125).abs() < 1e-12);
        assert!(cs[0].ci_low.unwrap() <= 0.0 && cs[0].ci_high.unwrap() > 0.2);
    }

    #[test]
    fn no_pairs_no_verdict() {
        let mut cs = vec![compare("b", "a", Paired::cases(&[]), 0.95)];
        decide(&mut cs, 0.95);
        assert_eq!(cs[0].verdict, Verdict::NoData);
    }
}
