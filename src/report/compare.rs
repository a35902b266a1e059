//! Paired comparisons and verdicts in words, from per-case scores. Used for each variant
//! against the baseline of a run, and for the same variant across two runs (`compare`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::cluster::CaseScore;
use crate::stats::paired::{
    Table, cases_needed, detectable_difference, holm, mcnemar_exact, newcombe_paired, paired_means,
};

/// The power the detectable difference and the cases-needed figures are computed for.
pub const POWER: f64 = 0.8;

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

/// One arm against a reference arm, paired by case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub variant: String,
    /// What it is compared with: the baseline variant, or the same variant in the other run.
    pub against: String,
    /// Cases graded in both arms.
    pub cases: u64,
    /// `mcnemar_exact+newcombe` (one sample per case) or `paired_t_on_case_means` (repeats).
    pub method: String,
    /// With one sample per case: the 2×2 table.
    pub table: Option<PairTable>,
    /// Accuracy difference, variant minus reference, as a share (0.05 = 5 points).
    pub difference: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub p_value: Option<f64>,
    /// Holm-adjusted across the comparisons made together.
    pub p_holm: Option<f64>,
    pub verdict: Verdict,
    /// Cases needed to detect a difference the size of the one observed, with 80% power.
    pub cases_needed: Option<u64>,
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
    /// The verdict as a sentence.
    pub sentence: String,
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
                (Some(lo), Some(hi)) => format!("[{:+.1}, {:+.1}]", lo * 100.0, hi * 100.0),
                _ => "–".into(),
            },
            p_cell(self.p_holm),
            self.verdict.words().to_string(),
        ]
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
    /// The smallest difference detectable with that power, as a share; `None` if even the
    /// largest possible difference is out of reach.
    pub difference: Option<f64>,
}

impl Detectable {
    /// What `cases` cases can detect at 80% power, from a reference accuracy.
    pub fn new(cases: u64, reference_accuracy: f64, confidence: f64) -> Self {
        Detectable {
            cases,
            reference_accuracy,
            power: POWER,
            difference: detectable_difference(cases, reference_accuracy, confidence, POWER),
        }
    }

    /// The figure as a sentence a user can act on.
    pub fn sentence(&self, confidence: f64) -> String {
        let conf = (confidence * 100.0).round();
        match self.difference {
            Some(d) => format!(
                "With {} cases, a paired comparison at {conf}% confidence reliably detects differences of about {:.0} points or more (80% power, reference accuracy {:.0}%, variants erring independently; variants that fail on the same cases do better). Smaller real differences will mostly read as noise.",
                self.cases,
                d * 100.0,
                self.reference_accuracy * 100.0
            ),
            None => format!(
                "With {} cases, no difference in accuracy can be detected reliably (80% power at {conf}% confidence).",
                self.cases
            ),
        }
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
}

/// Compares mean scores (a scored run): the mean of the per-case differences, decided by
/// the sign-flip test on them with its inverted interval; the paired t-test beside it.
pub fn compare_scored(
    variant: &str,
    against: &str,
    pairs: &[(CaseScore, CaseScore)],
    confidence: f64,
) -> Comparison {
    let mut c = compare(variant, against, &[], confidence);
    c.cases = pairs.len() as u64;
    let mean = |s: &CaseScore| s.mean().unwrap_or(0.0);
    let v: Vec<f64> = pairs.iter().map(|(v, _)| mean(v)).collect();
    let b: Vec<f64> = pairs.iter().map(|(_, b)| mean(b)).collect();
    if let Some(p) = crate::stats::scores::paired_scores(&v, &b, confidence) {
        c.method = "sign_flip_on_case_means".into();
        c.difference = Some(p.mean);
        c.ci_low = Some(p.sign_flip_interval.low);
        c.ci_high = Some(p.sign_flip_interval.high);
        c.p_value = Some(p.sign_flip.p_value);
        c.t_p_value = p.t_p_value;
        c.t_ci_low = p.t_interval.map(|i| i.0);
        c.t_ci_high = p.t_interval.map(|i| i.1);
    }
    c
}

/// Compares `variant` with `against` over the cases both graded (`pairs`).
pub fn compare(
    variant: &str,
    against: &str,
    pairs: &[(CaseScore, CaseScore)],
    confidence: f64,
) -> Comparison {
    let mut c = Comparison {
        variant: variant.to_string(),
        against: against.to_string(),
        cases: pairs.len() as u64,
        method: String::new(),
        table: None,
        difference: None,
        ci_low: None,
        ci_high: None,
        p_value: None,
        p_holm: None,
        verdict: Verdict::NoData,
        cases_needed: None,
        t_p_value: None,
        t_ci_low: None,
        t_ci_high: None,
        corrected: None,
        sentence: String::new(),
    };
    if pairs.is_empty() {
        return c;
    }
    let single = pairs.iter().all(|(v, r)| v.graded == 1 && r.graded == 1);
    if single {
        let mut t = Table::default();
        for (v, r) in pairs {
            t.add(v.score == 1.0, r.score == 1.0);
        }
        c.method = "mcnemar_exact+newcombe".into();
        c.table = Some(PairTable {
            both_right: t.both_right,
            only_variant: t.only_variant,
            only_reference: t.only_baseline,
            both_wrong: t.both_wrong,
        });
        c.p_value = Some(mcnemar_exact(t.only_variant, t.only_baseline));
        if let Some((d, lo, hi)) = newcombe_paired(&t, confidence) {
            c.difference = Some(d);
            c.ci_low = Some(lo);
            c.ci_high = Some(hi);
            let discordant = (t.only_variant + t.only_baseline) as f64 / t.n() as f64;
            c.cases_needed = cases_needed(d, discordant, confidence, POWER);
        }
    } else {
        c.method = "paired_t_on_case_means".into();
        let diffs: Vec<f64> = pairs
            .iter()
            .map(|(v, r)| v.score / v.graded as f64 - r.score / r.graded as f64)
            .collect();
        if let Some((d, lo, hi, p)) = paired_means(&diffs, confidence) {
            c.difference = Some(d);
            c.ci_low = Some(lo);
            c.ci_high = Some(hi);
            c.p_value = Some(p);
            let var =
                diffs.iter().map(|x| (x - d).powi(2)).sum::<f64>() / (diffs.len() as f64 - 1.0);
            // Normal approximation: the spread of the case differences stands in for ψ.
            c.cases_needed = cases_needed(d, var + d * d, confidence, POWER);
        } else {
            c.difference = Some(diffs.iter().sum::<f64>() / diffs.len() as f64);
        }
    }
    c
}

/// Adjusts the p-values of comparisons made together (Holm) and writes their verdicts.
pub(crate) fn decide(comparisons: &mut [Comparison], confidence: f64) {
    let alpha = 1.0 - confidence;
    let tested: Vec<usize> = (0..comparisons.len())
        .filter(|&i| comparisons[i].p_value.is_some())
        .collect();
    let adjusted = holm(
        &tested
            .iter()
            .map(|&i| comparisons[i].p_value.unwrap_or(1.0))
            .collect::<Vec<_>>(),
    );
    for (&i, p) in tested.iter().zip(adjusted) {
        comparisons[i].p_holm = Some(p);
    }
    for c in comparisons.iter_mut() {
        c.verdict = match (c.p_holm, c.difference) {
            (Some(p), Some(d)) if p < alpha && d > 0.0 => Verdict::Better,
            (Some(p), Some(d)) if p < alpha && d < 0.0 => Verdict::Worse,
            (Some(_), _) => Verdict::NotDistinguishable,
            _ if c.cases > 0 => Verdict::NotDistinguishable,
            _ => Verdict::NoData,
        };
        c.sentence = sentence(c, confidence);
    }
}

fn sentence(c: &Comparison, confidence: f64) -> String {
    let conf = (confidence * 100.0).round();
    let numbers = match (c.difference, c.ci_low, c.ci_high, c.p_holm) {
        (Some(d), Some(lo), Some(hi), Some(p)) => format!(
            "{} [{:+.1}, {:+.1}] at {conf}%, {} (Holm), {} paired cases",
            points(d),
            lo * 100.0,
            hi * 100.0,
            p_text(p),
            c.cases
        ),
        (Some(d), ..) => format!("{} over {} paired cases", points(d), c.cases),
        _ => String::new(),
    };
    let numbers = match &c.corrected {
        Some(d) => format!(
            "{numbers}, as people would score it (judge corrected by labels on {} cases)",
            d.labelled_cases
        ),
        None => numbers,
    };
    match c.verdict {
        Verdict::Better => format!("{} is better than {}: {numbers}.", c.variant, c.against),
        Verdict::Worse => format!("{} is worse than {}: {numbers}.", c.variant, c.against),
        Verdict::NotDistinguishable => {
            let need = match (c.cases_needed, c.difference) {
                (Some(n), Some(d)) => format!(
                    "; telling a difference of {:.1} points from noise would take about {n} cases",
                    d.abs() * 100.0
                ),
                (None, Some(0.0)) => "; no difference was observed".to_string(),
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
#[derive(Debug, Default, Clone)]
pub struct CaseTable {
    /// case id → (tags, one score per arm)
    pub cases: BTreeMap<String, (Vec<String>, Vec<CaseScore>)>,
    pub arms: usize,
}

impl CaseTable {
    /// An empty table with `arms` arms (variants, or runs).
    pub fn new(arms: usize) -> Self {
        CaseTable {
            cases: BTreeMap::new(),
            arms,
        }
    }

    /// Records one graded sample of `arm` for `case`, with its score.
    pub fn add(&mut self, case: &str, tags: &[String], arm: usize, score: f64) {
        let arms = self.arms;
        let entry = self
            .cases
            .entry(case.to_string())
            .or_insert_with(|| (tags.to_vec(), vec![CaseScore::default(); arms]));
        entry.1[arm].add(score);
    }

    /// Sets `arm`'s scores for `case` at once (pairing two runs' tables).
    pub(crate) fn set(&mut self, case: &str, tags: &[String], arm: usize, score: CaseScore) {
        let arms = self.arms;
        let entry = self
            .cases
            .entry(case.to_string())
            .or_insert_with(|| (tags.to_vec(), vec![CaseScore::default(); arms]));
        entry.1[arm] = score;
    }

    /// One arm's scores over the cases it graded.
    pub(crate) fn arm(&self, arm: usize) -> Vec<CaseScore> {
        self.cases
            .values()
            .map(|(_, s)| s[arm])
            .filter(|s| s.graded > 0)
            .collect()
    }

    /// Cases graded in both arms.
    pub fn pairs(&self, arm: usize, reference: usize) -> Vec<(CaseScore, CaseScore)> {
        self.cases
            .values()
            .map(|(_, s)| (s[arm], s[reference]))
            .filter(|(a, r)| a.graded > 0 && r.graded > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(correct: bool) -> CaseScore {
        CaseScore::binary(u64::from(correct), 1)
    }

    #[test]
    fn a_clear_gain_is_better_and_noise_is_not() {
        // 40 cases: the variant fixes 12 the baseline missed and breaks none.
        let mut pairs = vec![(one(true), one(false)); 12];
        pairs.extend(vec![(one(true), one(true)); 20]);
        pairs.extend(vec![(one(false), one(false)); 8]);
        let mut cs = vec![compare("b", "a", &pairs, 0.95)];
        // 2 fixed, 1 broken: noise.
        let mut noisy = vec![(one(true), one(false)); 2];
        noisy.push((one(false), one(true)));
        noisy.extend(vec![(one(true), one(true)); 17]);
        cs.push(compare("c", "a", &noisy, 0.95));
        decide(&mut cs, 0.95);
        assert_eq!(cs[0].verdict, Verdict::Better);
        assert!(
            cs[0]
                .sentence
                .starts_with("b is better than a: +30.0 points"),
            "{}",
            cs[0].sentence
        );
        assert_eq!(cs[1].verdict, Verdict::NotDistinguishable);
        assert!(
            cs[1].sentence.contains("would take about"),
            "{}",
            cs[1].sentence
        );
        // Holm: the smaller p is multiplied by 2.
        let raw = mcnemar_exact(12, 0);
        assert!((cs[0].p_holm.unwrap() - 2.0 * raw).abs() < 1e-15);
    }

    #[test]
    fn repeats_use_case_means() {
        let s = CaseScore::binary;
        let pairs = vec![(s(3, 3), s(1, 3)), (s(2, 3), s(2, 3)), (s(3, 3), s(0, 3))];
        let mut cs = vec![compare("b", "a", &pairs, 0.95)];
        decide(&mut cs, 0.95);
        assert_eq!(cs[0].method, "paired_t_on_case_means");
        assert!((cs[0].difference.unwrap() - (2.0 / 3.0 + 0.0 + 1.0) / 3.0).abs() < 1e-12);
        assert!(cs[0].table.is_none());
    }

    #[test]
    fn no_pairs_no_verdict() {
        let mut cs = vec![compare("b", "a", &[], 0.95)];
        decide(&mut cs, 0.95);
        assert_eq!(cs[0].verdict, Verdict::NoData);
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
    pub variants_only_in_a: Vec<String>,
    pub variants_only_in_b: Vec<String>,
    pub variants: Vec<VariantPair>,
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
    pub a: super::summary::VariantSummary,
    pub b: super::summary::VariantSummary,
    /// B against A, paired by case.
    pub comparison: Comparison,
}

impl RunComparison {
    /// Pairs the per-variant summaries of two runs and compares B with A case by case.
    /// `cases` holds, per shared variant, the per-case scores with arm 0 = A, arm 1 = B.
    pub fn build(
        run_a: RunSide,
        run_b: RunSide,
        summaries: (&super::Summary, &super::Summary),
        cases: &BTreeMap<String, CaseTable>,
        planned: (&[String], &[String]),
    ) -> RunComparison {
        let (sa, sb) = summaries;
        let confidence = sa.run.confidence;
        let names_b: Vec<&str> = sb.variants.iter().map(|v| v.name.as_str()).collect();
        let names_a: Vec<&str> = sa.variants.iter().map(|v| v.name.as_str()).collect();
        let mut variants = Vec::new();
        let mut comparisons = Vec::new();
        for va in &sa.variants {
            let Some(vb) = sb.variants.iter().find(|v| v.name == va.name) else {
                continue;
            };
            let pairs = cases
                .get(&va.name)
                .map(|t| t.pairs(1, 0))
                .unwrap_or_default();
            comparisons.push(compare(
                &format!("{} in B", va.name),
                &format!("{} in A", va.name),
                &pairs,
                confidence,
            ));
            variants.push((va.clone(), vb.clone()));
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
                })
                .collect(),
        }
    }
}
