//! CI gates: conditions a run must meet. Each ends passed, failed or inconclusive (the data
//! cannot tell at this size), with a line that says why and what it would take to decide
//! (docs/guide/ci.md, "Three outcomes").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Summary;
use crate::compare::{RunComparison, Verdict};
pub use crate::summary::{GateOutcome, GateResult};

/// `--min-accuracy [VARIANT=]P`; in a run of several endpoints VARIANT may be
/// `ENDPOINT/VARIANT` (one cell), a variant (at every endpoint) or an endpoint (every
/// variant at it). `@PART=P` holds every variant's part PART (a `fields` key, a scorer's
/// `name:`, a judge's criterion), `VARIANT@PART=P` one variant's (docs/guide/ci.md,
/// "Gates").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinAccuracy {
    /// `None`: every variant.
    pub variant: Option<String>,
    /// The part after the name's last `@`; `None`: the whole score. A variant's name may
    /// hold an `@` too: [`MinAccuracy::target`] reads the name against what the run has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// A share, 0–1.
    pub threshold: f64,
}

impl std::str::FromStr for MinAccuracy {
    type Err = String;

    /// `0.8`, `80%`, `plain=0.9`, `step-by-step=92.5%`, `@category=0.9`,
    /// `plain@category=90%`
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, value) = match s.rsplit_once('=') {
            Some((v, p)) if !v.trim().is_empty() => (Some(v.trim()), p),
            Some((_, p)) => (None, p),
            None => (None, s),
        };
        let value = value.trim();
        let threshold = match value.strip_suffix('%') {
            Some(pct) => pct.trim().parse::<f64>().map(|x| x / 100.0),
            None => value.parse::<f64>(),
        }
        .map_err(|_| {
            format!("`{s}` is not an accuracy; write 0.8, 80%, VARIANT=0.8 or VARIANT@PART=0.8")
        })?;
        if !(0.0..=1.0).contains(&threshold) {
            return Err(format!(
                "`{s}`: an accuracy is between 0 and 1 (or 0% and 100%)"
            ));
        }
        let (variant, part) = match name.and_then(|n| n.rsplit_once('@')) {
            Some((v, p)) if !p.trim().is_empty() => {
                let v = v.trim();
                (
                    (!v.is_empty()).then(|| v.to_string()),
                    Some(p.trim().to_string()),
                )
            }
            _ => (name.map(str::to_string), None),
        };
        Ok(MinAccuracy {
            variant,
            part,
            threshold,
        })
    }
}

/// What a `[VARIANT][@PART]=P` gate holds: a variant (`None`: every one) and a part of its
/// score (`None`: the whole score).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateTarget {
    pub variant: Option<String>,
    pub part: Option<String>,
}

impl std::fmt::Display for GateTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.variant, &self.part) {
            (None, None) => f.write_str("every variant"),
            (Some(v), None) => write!(f, "the variant `{v}`"),
            (None, Some(p)) => write!(f, "the part `{p}` of every variant"),
            (Some(v), Some(p)) => write!(f, "the part `{p}` of `{v}`"),
        }
    }
}

/// Why a gate's name reads as nothing the run has, or as two things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// No variant (cell, endpoint) is named so.
    Variant(String),
    /// The variant is there; the score has no part named so.
    Part(String),
    /// The name (before `=`) reads as each of these: a variant whose name holds an `@`,
    /// and a part.
    Both(String, Vec<GateTarget>),
}

impl MinAccuracy {
    /// The text before `=` as given: `plain`, `@category`, `plain@category`.
    pub fn name(&self) -> Option<String> {
        match (&self.variant, &self.part) {
            (v, Some(p)) => Some(format!("{}@{p}", v.as_deref().unwrap_or_default())),
            (v, None) => v.clone(),
        }
    }

    /// Every way its name reads: the whole of it a variant, and at each `@` a variant
    /// before it (or every one) and a part after it.
    fn readings(&self) -> Vec<GateTarget> {
        let Some(name) = self.name() else {
            return vec![GateTarget {
                variant: None,
                part: None,
            }];
        };
        let mut out = vec![GateTarget {
            variant: Some(name.clone()),
            part: None,
        }];
        for (i, _) in name.match_indices('@') {
            let (v, p) = (name[..i].trim(), name[i + 1..].trim());
            if !p.is_empty() {
                out.push(GateTarget {
                    variant: (!v.is_empty()).then(|| v.to_string()),
                    part: Some(p.to_string()),
                });
            }
        }
        out
    }

    /// The one reading of its name that names a variant `is_variant` knows (or every one)
    /// and a part `is_part` knows (or the whole score). A variant may have an `@` in its
    /// name, so `a@b` is the variant `a@b` when there is one and no part `b`; both there is
    /// [`Unresolved::Both`].
    pub fn target(
        &self,
        is_variant: impl Fn(&str) -> bool,
        is_part: impl Fn(&str) -> bool,
    ) -> Result<GateTarget, Unresolved> {
        let mut found: Vec<GateTarget> = self
            .readings()
            .into_iter()
            .filter(|t| t.variant.as_deref().is_none_or(&is_variant))
            .filter(|t| t.part.as_deref().is_none_or(&is_part))
            .collect();
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(match (&self.variant, &self.part) {
                (Some(v), _) if !is_variant(v) => Unresolved::Variant(v.clone()),
                (_, Some(p)) => Unresolved::Part(p.clone()),
                (v, None) => Unresolved::Variant(v.clone().unwrap_or_default()),
            }),
            _ => Err(Unresolved::Both(self.name().unwrap_or_default(), found)),
        }
    }

    /// The gate's name in its lines: `min-accuracy plain=90.0%`, and for a part
    /// `min-accuracy 90.0% on category`, `min-accuracy plain=90.0% on category`.
    fn gate_name(&self, kind: &str, target: Option<&GateTarget>) -> String {
        let (variant, part) = match target {
            Some(t) => (t.variant.clone(), t.part.clone()),
            None => (self.name(), None),
        };
        let named = variant.map(|v| format!("{v}=")).unwrap_or_default();
        let on = part.map(|p| format!(" on {p}")).unwrap_or_default();
        format!("{kind} {named}{:.1}%{on}", self.threshold * 100.0)
    }
}

impl Unresolved {
    /// What is wrong, in a gate's line.
    pub fn said(&self, parts: &[String]) -> String {
        match self {
            Unresolved::Variant(v) => format!("no variant is named `{v}`"),
            Unresolved::Part(p) if parts.is_empty() => {
                format!("no part is named `{p}`: the score has no parts")
            }
            Unresolved::Part(p) => {
                format!("no part is named `{p}`; the parts: {}", parts.join(", "))
            }
            Unresolved::Both(name, readings) => format!(
                "`{name}` reads as {}",
                readings
                    .iter()
                    .map(GateTarget::to_string)
                    .collect::<Vec<_>>()
                    .join(" and as ")
            ),
        }
    }
}

/// The gates a run was asked to pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gates {
    pub fail_if_worse: bool,
    /// `--fail-if-not-best`: the baseline must be in `--best`'s answer.
    pub fail_if_not_best: bool,
    /// `--max-drop`: the largest drop (a share) the data must rule out.
    pub max_drop: Option<f64>,
    pub min_accuracy: Vec<MinAccuracy>,
    /// `--min-pass-all`: pass^k (right all k repeats) at least P.
    pub min_pass_all: Vec<MinAccuracy>,
    pub max_cost_usd: Option<f64>,
    /// `--max-cost-per-job`: a variant's mean cost per job at most this.
    pub max_cost_per_job_usd: Option<f64>,
    /// `--budget` (or the resumed run's): spending past it fails the `budget` gate.
    pub budget_usd: Option<f64>,
    pub max_p90_latency: Option<Duration>,
    /// `--max-latency`: every job's end-to-end latency at most this.
    pub max_latency: Option<Duration>,
    /// Failed jobs tolerated before the run counts as incomplete.
    pub allow_failures: u64,
    /// `--on-inconclusive pass`: a gate the data cannot decide does not fail the run.
    pub inconclusive_passes: bool,
    /// `--baseline`: `--fail-if-worse` and `--max-drop` hold each variant to itself in that
    /// earlier run, not to the baseline variant (sized apart: [`size_against_earlier`]).
    pub against_earlier: bool,
}

/// What the run spent: every billed attempt of the answers, and the judge's calls.
fn spent_usd(s: &Summary) -> (f64, f64) {
    let answers: f64 = s
        .variants
        .iter()
        .filter_map(|v| v.spent_usd.or(v.cost_usd))
        .sum();
    let judge: f64 = s.variants.iter().filter_map(|v| v.judge_cost_usd).sum();
    (answers, judge)
}

/// `--budget`: a run that spent past its budget fails the `budget` gate, saying by how
/// much, how many times over, and what took it there: each cause that took bills past
/// their holds (holds bound everything else), the largest first, with its cost — prompts
/// billed past what was held (a file the run could not size), usage past `max_tokens`,
/// retries billed again, a judge asked again, a `command` scorer's own calls. `None`
/// within the budget.
fn overspent(s: &Summary, limit: f64) -> Option<GateResult> {
    let (answers, judge) = spent_usd(s);
    let total = answers + judge;
    if total <= limit {
        return None;
    }
    let over = total - limit;
    let ratio = if limit > 0.0 {
        format!("{:.1}×", total / limit)
    } else {
        "any spending is over a budget of $0".to_string()
    };
    let anomalies: u64 = s.variants.iter().map(|v| v.usage_anomalies).sum();
    let mut past = crate::figures::holds::PastHolds::default();
    for held in s.variants.iter().filter_map(|v| v.past_holds.as_ref()) {
        past.merge(held);
    }
    let causes = past.causes(&usd, anomalies);
    let why = if causes.is_empty() {
        // Jobs with no hold recorded: an agent loop's steps, or a journal from before
        // holds were recorded.
        "what no record's hold says: an agent loop's steps (held step by step), or jobs journaled before holds were recorded".to_string()
    } else {
        causes.join("; ")
    };
    Some(result(
        "budget",
        false,
        format!(
            "the run spent {}, over its --budget of {} by {} ({ratio}): {why}",
            usd(total),
            usd(limit),
            usd(over)
        ),
    ))
}

pub fn usd(x: f64) -> String {
    crate::usd(Some(x))
}

fn result(gate: &str, passed: bool, reason: String) -> GateResult {
    let outcome = if passed {
        GateOutcome::Passed
    } else {
        GateOutcome::Failed
    };
    ended(gate, outcome, reason, None)
}

fn ended(gate: &str, outcome: GateOutcome, reason: String, cases: Option<u64>) -> GateResult {
    GateResult {
        gate: gate.to_string(),
        passed: outcome == GateOutcome::Passed,
        outcome,
        reason,
        cases_needed: cases,
    }
}

/// The power a "cases needed" is sized for: as `plan` and the detectable difference.
const POWER: f64 = 0.8;

/// About how many cases an interval now reaching from `center` to `near` (on `cases`
/// cases, at `level`) needs for its end to stay on `center`'s side of `bound` with 80%
/// power, if `center` and the spread seen hold: its half-width shrinks as 1/√cases. `None`
/// when `center` is not on the passing side of `bound`, or the interval has no width.
pub fn cases_to_clear(
    cases: u64,
    (center, near): (f64, f64),
    bound: f64,
    level: f64,
) -> Option<u64> {
    let (half, gap) = ((center - near).abs(), (center - bound).abs());
    let passing_side = (near < center) == (bound < center);
    if !passing_side || half <= 0.0 || gap <= 0.0 || cases == 0 {
        return None;
    }
    let z = promptgauge_stats::z_for(level);
    let z_power = promptgauge_stats::z_for(2.0 * POWER - 1.0);
    let need = cases as f64 * ((z + z_power) / z * half / gap).powi(2);
    (need < 1e7).then(|| (need.ceil() as u64).max(cases + 1))
}

/// What an undecided `--max-drop` comparison would take: about how many cases would show
/// a drop of no more than `max` at what was seen, and the words that say so.
fn drop_needs(
    c: &crate::compare::Comparison,
    (lo, hi): (f64, f64),
    max: f64,
    level: f64,
) -> (Option<u64>, String) {
    let limit = max * 100.0;
    let seen = c.difference.unwrap_or((lo + hi) / 2.0);
    let (needed, disagree) = match &c.table {
        // 0/1 answers, one each: the paired difference's variance per case is the share
        // that disagree less the difference squared (the normal approximation, which the
        // score interval approaches as cases grow).
        Some(t) => {
            let n = t.both_right + t.only_variant + t.only_reference + t.both_wrong;
            let share = (t.only_variant + t.only_reference) as f64 / n.max(1) as f64;
            // No case disagreeing yet: the interval seen, narrowing as 1/√cases.
            let needed = paired_cases(share, seen, max, level)
                .or_else(|| cases_to_clear(c.cases, (seen, lo), -max, level))
                .map(|x| x.max(c.cases + 1));
            let said = format!(
                "the difference and the disagreement seen here ({:.0}% of cases)",
                100.0 * share
            );
            (needed, said)
        }
        // Scores, repeats, groups: the interval seen, narrowing as 1/√cases.
        None => (
            cases_to_clear(c.cases, (seen, lo), -max, level),
            "the difference and the spread seen here".to_string(),
        ),
    };
    let would = match needed {
        Some(n) => {
            format!("about {n} cases would show a drop of no more than {limit:.1} at {disagree}")
        }
        None if seen <= -max => format!(
            "the difference seen ({:+.1} points) is itself a drop of {limit:.1} or more: more cases would more likely show the drop than rule it out",
            seen * 100.0
        ),
        None => "more cases would decide".to_string(),
    };
    (needed, would)
}

/// Cases for a paired difference of 0/1 answers, `share` of cases disagreeing and
/// `difference` seen, to show with 80% power that it is above −`max`: (z + z_power)² ×
/// (share − difference²) / (difference + max)². `None` when the difference seen is not
/// above −`max`.
fn paired_cases(share: f64, difference: f64, max: f64, level: f64) -> Option<u64> {
    let gap = difference + max;
    let variance = share - difference * difference;
    if gap <= 0.0 || variance <= 0.0 {
        return None;
    }
    let z = promptgauge_stats::z_for(level) + promptgauge_stats::z_for(2.0 * POWER - 1.0);
    let need = z * z * variance / (gap * gap);
    (need < 1e7).then(|| need.ceil() as u64)
}

/// Several lines of one gate as one result: failed if any failed, else inconclusive if
/// any could not tell (the most cases any needs), else passed; the line says the worst.
fn combined(gate: &str, lines: Vec<(GateOutcome, String, Option<u64>)>) -> GateResult {
    let worst = if lines.iter().any(|l| l.0 == GateOutcome::Failed) {
        GateOutcome::Failed
    } else if lines.iter().any(|l| l.0 == GateOutcome::Inconclusive) {
        GateOutcome::Inconclusive
    } else {
        GateOutcome::Passed
    };
    let cases = lines
        .iter()
        .filter(|l| l.0 == GateOutcome::Inconclusive)
        .filter_map(|l| l.2)
        .max();
    // A failed gate says what failed first, then what could not tell.
    let mut said: Vec<&str> = lines
        .iter()
        .filter(|l| l.0 == worst)
        .map(|l| l.1.as_str())
        .collect();
    if worst == GateOutcome::Failed {
        said.extend(
            lines
                .iter()
                .filter(|l| l.0 == GateOutcome::Inconclusive)
                .map(|l| l.1.as_str()),
        );
    }
    ended(gate, worst, said.join("; "), cases)
}

/// `--max-drop` after `--until-decided`: the fixed-sample intervals are not valid after
/// stopping early; the sequential drop check decides. A variant passes when its check
/// passed: a drop of `max` or more passes that way with probability at most
/// (1 − confidence)/(2m), however early it came. A check the cases or the run ended before
/// it decided is inconclusive.
pub fn sequential_drop(max: f64, seq: &crate::sequential::SequentialSummary) -> GateResult {
    let limit = max * 100.0;
    let fixed = seq.fixed_design_cases;
    let sized = match fixed {
        Some(n) => format!(" (the fixed design needs about {n} cases)"),
        None => String::new(),
    };
    let mut lines = Vec::new();
    for v in &seq.variants {
        let Some(d) = &v.drop else {
            lines.push((
                GateOutcome::Failed,
                format!(
                    "{}: no sequential drop check at {limit:.1} points was run",
                    v.variant
                ),
                None,
            ));
            continue;
        };
        lines.push(match d.verdict.as_str() {
            "pass" => (
                GateOutcome::Passed,
                format!(
                    "{} is at most {limit:.1} points worse: shown by the sequential test after {} cases",
                    v.variant, d.cases
                ),
                None,
            ),
            "fail" => (
                GateOutcome::Failed,
                format!(
                    "{} looks worse than the baseline after {} cases (log evidence {:.2} ≥ {:.2}): a drop of {limit:.1} points is not ruled out",
                    v.variant, d.cases, d.statistic, d.threshold
                ),
                None,
            ),
            "running" => (
                GateOutcome::Inconclusive,
                format!(
                    "{}: the run ended after {} cases, before a drop of more than {limit:.1} points was ruled out; resume it to go on{sized}",
                    v.variant, d.cases
                ),
                fixed,
            ),
            _ => (
                GateOutcome::Inconclusive,
                format!(
                    "{}: a drop of more than {limit:.1} points was not ruled out within {} cases; more cases (sequential.max_cases, or the bench's) would decide{sized}",
                    v.variant, d.cases
                ),
                fixed,
            ),
        });
    }
    if lines.is_empty() {
        return result(
            "max-drop",
            false,
            "nothing was compared with the baseline".into(),
        );
    }
    combined("max-drop", lines)
}

/// `--max-drop`: passes when every comparison's interval shows the variant is at most
/// `max` worse than what it is compared with; fails when an interval lies wholly below
/// −`max`; else inconclusive, saying about how many cases would show it.
fn non_inferior<'a>(
    gate: &str,
    max: f64,
    comparisons: impl Iterator<Item = &'a crate::compare::Comparison>,
    against: &str,
    confidence: f64,
) -> GateResult {
    let lines: Vec<_> = comparisons.map(|c| drop_line(c, max, confidence)).collect();
    if lines.is_empty() {
        return result(gate, false, format!("nothing was compared with {against}"));
    }
    combined(gate, lines)
}

/// One comparison against `--max-drop`: its outcome, its line, and the cases it needs.
fn drop_line(
    c: &crate::compare::Comparison,
    max: f64,
    confidence: f64,
) -> (GateOutcome, String, Option<u64>) {
    let limit = max * 100.0;
    let level = c.ci_level.unwrap_or(confidence);
    let at = format!(" at {:.1}%", level * 100.0);
    let (Some(lo), Some(hi)) = (c.ci_low, c.ci_high) else {
        return (
            GateOutcome::Failed,
            format!(
                "{} has no case graded alongside {}: nothing shows it did not drop",
                c.variant, c.against
            ),
            None,
        );
    };
    let interval = format!("[{:+.1}, {:+.1}]{at}", lo * 100.0, hi * 100.0);
    if lo >= -max {
        return (
            GateOutcome::Passed,
            format!(
                "{} is at most {:.1} points below {} ({interval})",
                c.variant,
                (-lo * 100.0).max(0.0),
                c.against
            ),
            None,
        );
    }
    if hi < -max {
        return (
            GateOutcome::Failed,
            format!(
                "{} is more than {limit:.1} points below {} ({interval}): the whole interval is past the limit",
                c.variant, c.against
            ),
            None,
        );
    }
    let (needed, would) = drop_needs(c, (lo, hi), max, level);
    (
        GateOutcome::Inconclusive,
        format!(
            "{} may be up to {:.1} points below {} ({interval}): the data allow a drop of up to {:.1} points on {} cases; {would}",
            c.variant,
            -lo * 100.0,
            c.against,
            -lo * 100.0,
            c.cases
        ),
        needed,
    )
}

/// `--fail-if-worse`: passes when no comparison is significantly worse — and every one
/// compared something: a comparison with no case graded on both sides has not shown that
/// nothing dropped, and a gate that compared nothing has not passed.
fn not_worse<'a>(
    gate: &str,
    comparisons: impl Iterator<Item = &'a crate::compare::Comparison>,
    against: &str,
    passed: String,
) -> GateResult {
    let mut worse = Vec::new();
    let mut empty = Vec::new();
    let mut lower = Vec::new();
    let mut compared = 0;
    for c in comparisons {
        if c.cases == 0 || c.verdict == Verdict::NoData {
            empty.push(format!(
                "{} has no case graded alongside {}: nothing was compared",
                c.variant, c.against
            ));
            continue;
        }
        compared += 1;
        if c.verdict == Verdict::Worse {
            worse.push(c.sentence.clone());
        } else if let (Some(d), Some(n)) = (c.difference, c.cases_needed)
            && d < 0.0
            && n > c.cases
        {
            // Not shown worse, but lower: what would tell whether that drop is real.
            lower.push(format!(
                "{} is {:.1} points below {} on {} cases, not significantly: about {n} cases would show a drop of that size",
                c.variant,
                -d * 100.0,
                c.against,
                c.cases
            ));
        }
    }
    if !worse.is_empty() {
        return result(gate, false, worse.join(" "));
    }
    if compared == 0 && empty.is_empty() {
        return result(gate, false, format!("nothing was compared with {against}"));
    }
    if !empty.is_empty() {
        return result(gate, false, empty.join("; "));
    }
    let passed = std::iter::once(passed).chain(lower).collect::<Vec<_>>();
    result(gate, true, passed.join("; "))
}

/// Checks every gate against the run (and, with `--baseline`, its comparison); each
/// variant's latencies, in order, are what `--max-latency` reads.
pub fn evaluate(
    gates: &Gates,
    s: &Summary,
    baseline: Option<&RunComparison>,
    latencies: &[crate::figures::summary::Latencies],
) -> Vec<GateResult> {
    let mut out = Vec::new();
    if gates.fail_if_worse {
        fail_if_worse(s, baseline, &mut out);
    }
    if let Some(max) = gates.max_drop {
        max_drop(max, s, baseline, &mut out);
    }
    if gates.fail_if_not_best {
        out.push(baseline_best(s));
    }
    for min in &gates.min_accuracy {
        min_accuracy(min, s, &mut out);
    }
    for min in &gates.min_pass_all {
        min_pass_all(min, s, &mut out);
    }
    if let Some(limit) = gates.budget_usd {
        out.extend(overspent(s, limit));
    }
    if let Some(max) = gates.max_cost_usd {
        out.push(max_cost(max, s));
    }
    if let Some(max) = gates.max_cost_per_job_usd {
        max_cost_per_job(max, s, &mut out);
    }
    if let Some(max) = gates.max_p90_latency {
        max_p90_latency(max, s, &mut out);
    }
    if let Some(max) = gates.max_latency {
        max_latency(max, s, latencies, &mut out);
    }
    out
}

/// `--fail-if-not-best`: the baseline arm is in `--best`'s answer (or, the cases run out,
/// among the arms left). A run that searched nothing has not passed.
fn baseline_best(s: &Summary) -> GateResult {
    let best = s.best();
    let baseline = s
        .variants
        .first()
        .map(|v| v.name.as_str())
        .unwrap_or_default();
    let Some(b) = best else {
        return result(
            "fail-if-not-best",
            false,
            "no --best search ran: nothing says what is best".into(),
        );
    };
    let undecided = matches!(b.outcome.as_str(), "open" | "one_of");
    let (set, what) = if undecided {
        (&b.named, "the arms the search could not separate")
    } else {
        (&b.named, "the best, or within ε of it")
    };
    let passed = set.iter().any(|a| a == baseline);
    if passed && undecided && set.len() > 1 {
        let unit = if b.grouped { "groups" } else { "cases" };
        return ended(
            "fail-if-not-best",
            GateOutcome::Inconclusive,
            format!(
                "the {unit} ran out after {} with the baseline {baseline} among the arms left ({}): the data cannot tell whether it is the best; more {unit} would (`promptgauge plan --best {}` sizes the search)",
                b.cases,
                set.join(", "),
                set.len()
            ),
            None,
        );
    }
    let reason = if passed {
        format!(
            "the baseline {baseline} is among {what}: {}",
            set.join(", ")
        )
    } else {
        let unit = if b.grouped { "groups" } else { "cases" };
        let out = match b.eliminated.iter().find(|e| e.variant == baseline) {
            Some(e) => format!("went out after {} {unit}, below {}", e.cases, e.by),
            None => "was not ruled out, nor shown within ε of the answer".into(),
        };
        format!("the baseline {baseline} {out}; {what}: {}", set.join(", "))
    };
    result("fail-if-not-best", passed, reason)
}

/// `--fail-if-worse`: within the run; with `--baseline`, each variant against itself in
/// that run instead. A regression gate asks whether a change broke what was there, not
/// whether the bench's variants differ (a bench may keep a weaker variant on purpose, and
/// its unchanged pull request must pass): the within-run verdicts stay in the report.
fn fail_if_worse(s: &Summary, baseline: Option<&RunComparison>, out: &mut Vec<GateResult>) {
    if baseline.is_none() {
        out.push(not_worse(
            "fail-if-worse",
            s.comparisons.iter(),
            "the baseline",
            "no variant is significantly worse than the baseline".into(),
        ));
    }
    if let Some(b) = baseline {
        out.push(not_worse(
            "fail-if-worse --baseline",
            b.variants.iter().map(|v| &v.comparison),
            &format!("its run in {}", b.run_a.dir),
            format!("no variant dropped significantly against {}", b.run_a.dir),
        ));
    }
}

/// `--max-drop POINTS`: within the run (sequentially, after `--until-decided`); with
/// `--baseline`, each variant against itself in that run instead (as `--fail-if-worse`).
pub fn max_drop(
    max: f64,
    s: &Summary,
    baseline: Option<&RunComparison>,
    out: &mut Vec<GateResult>,
) {
    if baseline.is_none() {
        out.push(match &s.sequential {
            Some(seq) => sequential_drop(max, seq),
            None => non_inferior(
                "max-drop",
                max,
                s.comparisons.iter(),
                "the baseline",
                s.run.confidence,
            ),
        });
    }
    if let Some(b) = baseline {
        out.push(non_inferior(
            "max-drop --baseline",
            max,
            b.variants.iter().map(|v| &v.comparison),
            &format!("its run in {}", b.run_a.dir),
            b.confidence,
        ));
    }
}

/// The variants a gate holds (`target.variant`, or every one); a name no variant answers
/// to fails the gate there.
fn named_variants<'s>(
    gate: &str,
    target: &GateTarget,
    s: &'s Summary,
    out: &mut Vec<GateResult>,
) -> Vec<&'s crate::summary::VariantSummary> {
    let variants: Vec<_> = s
        .variants
        .iter()
        .filter(|v| {
            target
                .variant
                .as_ref()
                .is_none_or(|name| v.answers_to(name))
        })
        .collect();
    if variants.is_empty() {
        out.push(result(
            gate,
            false,
            Unresolved::Variant(target.variant.clone().unwrap_or_default()).said(&[]),
        ));
    }
    variants
}

/// `--min-pass-all [VARIANT=]P`: each variant's pass^k (its cases right all k repeats)
/// against P, said with its interval, as `--min-accuracy` says accuracy. A part has no
/// pass^k: the whole name before `=` is the variant's.
fn min_pass_all(min: &MinAccuracy, s: &Summary, out: &mut Vec<GateResult>) {
    let whole = GateTarget {
        variant: min.name(),
        part: None,
    };
    let gate = min.gate_name("min-pass-all", Some(&whole));
    for v in named_variants(&gate, &whole, s, out) {
        let Some(p) = &v.repeats.pass_k else {
            out.push(result(
                &gate,
                false,
                format!(
                    "{}: no pass^k (it needs repeats: k ≥ 2 and answers scored 0 or 1)",
                    v.name
                ),
            ));
            continue;
        };
        let figure = Gated {
            called: format!("pass^{} ", p.k),
            value: Some(p.pass_all_k),
            low: p.pass_all_k_ci_low,
            high: p.pass_all_k_ci_high,
        };
        let mut held = hold(
            &gate,
            &v.name,
            figure,
            p.cases,
            min.threshold,
            s.run.confidence,
        );
        if let (false, [first, ..]) = (held.passed, v.repeats.flaky.as_slice()) {
            let flaky = v.repeats.flaky.len();
            held.reason += &format!("; {flaky} flaky cases (repeats disagree), e.g. {first}");
        }
        out.push(held);
    }
}

/// What a `--min-accuracy` gate names in this run: its variants and part, read against
/// the run's variants and parts (docs/guide/ci.md, "Gates").
fn target_in(min: &MinAccuracy, s: &Summary) -> Result<GateTarget, Unresolved> {
    min.target(
        |name| s.variants.iter().any(|v| v.answers_to(name)),
        |part| s.parts.iter().any(|p| p.name == part),
    )
}

/// `--min-accuracy [VARIANT][@PART]=P`: each variant it names against P, on its whole
/// score or on the part named. On a scored run (some score neither 0 nor 1) "accuracy" is
/// the mean score, with its interval, and the line says so (docs/guide/ci.md, "Gates").
fn min_accuracy(min: &MinAccuracy, s: &Summary, out: &mut Vec<GateResult>) {
    let target = match target_in(min, s) {
        Ok(t) => t,
        Err(e) => {
            let parts: Vec<String> = s.parts.iter().map(|p| p.name.clone()).collect();
            let gate = min.gate_name("min-accuracy", None);
            let rename = match e {
                Unresolved::Both(..) => ": rename one (the variant's `name:`, or the part's)",
                _ => "",
            };
            out.push(result(&gate, false, format!("{}{rename}", e.said(&parts))));
            return;
        }
    };
    let gate = min.gate_name("min-accuracy", Some(&target));
    let part = target
        .part
        .as_ref()
        .and_then(|name| s.parts.iter().find(|p| p.name == *name));
    for v in named_variants(&gate, &target, s, out) {
        out.push(match part {
            None => held_to(v, min.threshold, s, &gate),
            Some(part) => part_held_to(part, v, min.threshold, s, &gate),
        });
    }
}

/// One variant's part against `--min-accuracy VARIANT@PART=P`, as [`held_to`] holds the
/// whole score: the part's accuracy, or its mean score when some score of it was neither 0
/// nor 1.
fn part_held_to(
    part: &crate::parts::PartFigures,
    v: &crate::summary::VariantSummary,
    t: f64,
    s: &Summary,
    gate: &str,
) -> GateResult {
    let Some(f) = part.variant(&v.name) else {
        return result(gate, false, format!("{}: no graded answers", v.name));
    };
    let cases = f.n / u64::from(s.run.repeats.max(1));
    hold(
        gate,
        &v.name,
        part_figure(part, f),
        cases,
        t,
        s.run.confidence,
    )
}

/// The figure a part gate holds an arm to: its mean and interval, named a mean score when
/// the part is scored.
pub fn part_figure(part: &crate::parts::PartFigures, f: &crate::parts::PartVariant) -> Gated {
    Gated {
        called: if part.binary { "" } else { "mean score " }.into(),
        value: f.mean,
        low: f.ci_low,
        high: f.ci_high,
    }
}

/// One variant against `--min-accuracy`'s P: passed at or above it; failed when the whole
/// interval is below; inconclusive when the interval straddles it, with the cases that
/// would decide.
pub fn held_to(v: &crate::summary::VariantSummary, t: f64, s: &Summary, gate: &str) -> GateResult {
    // Cases, not answers: repeats of a case are one unit.
    let cases = v.n / u64::from(s.run.repeats.max(1));
    let figure = gated_figure(v, s.is_scored());
    hold(gate, &v.name, figure, cases, t, s.run.confidence)
}

/// A variant's `figure` on `cases` cases against a floor `t`: passed at or above it; failed
/// when the whole interval is below; inconclusive when the interval straddles it, with the
/// cases that would decide. `--min-accuracy` and `--min-pass-all` alike.
fn hold(gate: &str, name: &str, figure: Gated, cases: u64, t: f64, level: f64) -> GateResult {
    let Gated {
        called: what,
        value: Some(acc),
        low,
        high,
    } = figure
    else {
        return result(gate, false, format!("{name}: no graded answers"));
    };
    let ci = format!(
        "[{:.1}, {:.1}]",
        low.unwrap_or(acc) * 100.0,
        high.unwrap_or(acc) * 100.0
    );
    let figure = format!("{name}: {what}{:.1}% {ci}", acc * 100.0);
    if acc >= t {
        // Above, but the interval reaches below: what would put it all above.
        let sure = low
            .filter(|lo| *lo < t)
            .and_then(|lo| cases_to_clear(cases, (acc, lo), t, level))
            .map(|n| {
                format!("; the interval reaches below it: about {n} cases would put it all above")
            })
            .unwrap_or_default();
        return result(gate, true, format!("{figure} ≥ {:.1}%{sure}", t * 100.0));
    }
    if high.is_none_or(|hi| hi < t) {
        let why = match high {
            Some(_) => "certain: the whole interval is below it",
            None => "with no interval to say more",
        };
        return result(
            gate,
            false,
            format!("{figure} is below {:.1}% ({why})", t * 100.0),
        );
    }
    let needed = high.and_then(|hi| cases_to_clear(cases, (acc, hi), t, level));
    let would = match needed {
        Some(n) => format!("about {n} cases would show whether it is below, at the figure seen"),
        None => "more cases would decide".to_string(),
    };
    ended(
        gate,
        GateOutcome::Inconclusive,
        format!(
            "{figure} is below {:.1}% but the interval straddles it (uncertain) on {cases} cases: {would}",
            t * 100.0
        ),
        needed,
    )
}

/// The figure `--min-accuracy` holds a variant to: what the line calls it, the figure and
/// its interval.
pub struct Gated {
    called: String,
    value: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
}

/// People's score where they labelled a judge's answers (the judge's, corrected), else
/// the mean score on a scored run, else accuracy.
pub fn gated_figure(v: &crate::summary::VariantSummary, scored: bool) -> Gated {
    if let Some(l) = &v.labelled
        && let Some(c) = l.corrected
    {
        return Gated {
            called: "score as people would give it ".into(),
            value: Some(c),
            low: l.corrected_low,
            high: l.corrected_high,
        };
    }
    let (value, low, high) = v.headline();
    Gated {
        // Partial scores: the figure is the mean score, and the line names it.
        called: if scored { "mean score " } else { "" }.into(),
        value,
        low,
        high,
    }
}

/// `--max-cost USD`: what the run spent, every billed attempt (retries included, cache
/// hits free) and the judge's calls.
fn max_cost(max: f64, s: &Summary) -> GateResult {
    let (answers, judge) = spent_usd(s);
    let total = answers + judge;
    let priced = s.variants.iter().any(|v| v.cost_usd.is_some());
    let parts = if judge > 0.0 {
        format!(" (answers ${answers:.4}, judge ${judge:.4})")
    } else {
        String::new()
    };
    let estimated = if s.variants.iter().any(|v| v.spent_estimated) {
        ", partly estimated"
    } else {
        ""
    };
    if !priced {
        result(
            "max-cost",
            false,
            "the bench has no `price`, so the cost is unknown".into(),
        )
    } else if total <= max {
        result(
            "max-cost",
            true,
            format!("spent ${total:.4}{parts}{estimated} ≤ ${max:.4}"),
        )
    } else {
        result(
            "max-cost",
            false,
            format!("the run spent ${total:.4}{parts}{estimated}, over ${max:.4}"),
        )
    }
}

/// `--max-p90-latency DURATION`: each variant's p90 end-to-end latency.
fn max_p90_latency(max: Duration, s: &Summary, out: &mut Vec<GateResult>) {
    let limit = max.as_secs_f64() * 1000.0;
    for v in &s.variants {
        let gate = format!("max-p90-latency {}", humantime::format_duration(max));
        out.push(match v.latency_ms.p90 {
            None => result(&gate, false, format!("{}: no latency measured", v.name)),
            Some(p90) if p90 <= limit => result(
                &gate,
                true,
                format!("{}: p90 {p90:.0} ms ≤ {limit:.0} ms", v.name),
            ),
            Some(p90) => result(
                &gate,
                false,
                format!("{}: p90 latency {p90:.0} ms is over {limit:.0} ms", v.name),
            ),
        });
    }
}

/// `--max-latency DURATION`: each variant's slowest job, end to end (answers from the
/// cache are not timed).
fn max_latency(
    max: Duration,
    s: &Summary,
    latencies: &[crate::figures::summary::Latencies],
    out: &mut Vec<GateResult>,
) {
    let limit = max.as_secs_f64() * 1000.0;
    let gate = format!("max-latency {}", humantime::format_duration(max));
    for (i, v) in s.variants.iter().enumerate() {
        let measured = latencies.get(i).map_or(&[][..], |l| &l.latency_ms[..]);
        let slowest = measured
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        out.push(match slowest {
            None => result(&gate, false, format!("{}: no latency measured", v.name)),
            Some(worst) if worst <= limit => result(
                &gate,
                true,
                format!(
                    "{}: every job within {limit:.0} ms (slowest {worst:.0} ms)",
                    v.name
                ),
            ),
            Some(worst) => {
                let over = measured.iter().filter(|x| **x > limit).count();
                result(
                    &gate,
                    false,
                    format!(
                        "{}: {over} of {} jobs took over {limit:.0} ms (slowest {worst:.0} ms)",
                        v.name,
                        measured.len()
                    ),
                )
            }
        });
    }
}

/// `--max-cost-per-job USD`: each variant's mean cost per job (what it spent, every billed
/// attempt, over its jobs).
fn max_cost_per_job(max: f64, s: &Summary, out: &mut Vec<GateResult>) {
    let gate = format!("max-cost-per-job ${max}");
    for v in &s.variants {
        let spent = v.spent_usd.or(v.cost_usd);
        out.push(match spent {
            None => result(
                &gate,
                false,
                "the bench has no `price`, so the cost is unknown".into(),
            ),
            Some(_) if v.jobs == 0 => result(&gate, false, format!("{}: no job finished", v.name)),
            Some(usd) => {
                let mean = usd / v.jobs as f64;
                let said = format!("{}: ${mean:.6} a job over {} jobs", v.name, v.jobs);
                if mean <= max {
                    result(&gate, true, format!("{said} ≤ ${max}"))
                } else {
                    result(&gate, false, format!("{said}, over ${max}"))
                }
            }
        });
    }
}

/// What a bench is sized against before a run (`check`, `plan`): its cases, how many
/// variants are compared with the baseline, its confidence, and the newest complete run
/// of it with where that run is, when there is one.
pub struct Sizing<'a> {
    pub cases: u64,
    pub compared: usize,
    pub confidence: f64,
    pub last: Option<(&'a Summary, String)>,
}

/// Each gate the flags name, sized before anything is sent: how many cases it needs to
/// decide at what the last run of the bench showed (or, with none, at no difference and
/// the most disagreement), against the cases the bench has. One line each.
pub fn sized(gates: &Gates, z: &Sizing<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if gates.against_earlier && (gates.max_drop.is_some() || gates.fail_if_worse) {
        size_against_earlier(gates.max_drop, z, &mut out);
    } else if let Some(max) = gates.max_drop {
        size_max_drop(max, z, &mut out);
    }
    for min in &gates.min_accuracy {
        size_min_accuracy(min, z, &mut out);
    }
    if gates.fail_if_worse && !gates.against_earlier {
        size_fail_if_worse(z, &mut out);
    }
    out
}

/// The share of cases whose answer changes between two runs of one prompt that the
/// sizing against an earlier run assumes when it cannot know it.
const CHANGED_BETWEEN_RUNS: f64 = 0.10;

/// `--fail-if-worse`/`--max-drop` with `--baseline`: each variant against itself in the
/// earlier run. An unchanged prompt differs there only where its answers vary from run to
/// run, which no single run shows: the line says so, and what a drop gate needs at
/// [`CHANGED_BETWEEN_RUNS`] of cases changing and no difference.
fn size_against_earlier(max: Option<f64>, z: &Sizing<'_>, out: &mut Vec<String>) {
    let level = 1.0 - (1.0 - z.confidence) / z.compared.max(1) as f64;
    let changed = CHANGED_BETWEEN_RUNS * 100.0;
    let base = "against the --baseline run each variant is held to itself there, not to the baseline variant, so the within-run differences of earlier runs do not size it; an unchanged prompt differs only where its answers change from run to run (none at temperature 0 on a deterministic server)";
    out.push(match max {
        Some(max) => {
            let limit = max * 100.0;
            match paired_cases(CHANGED_BETWEEN_RUNS, 0.0, max, level) {
                Some(n) => format!(
                    "max-drop {limit:.1}: {base}; with {changed:.0}% of cases changing and no difference, about {n} cases show a drop of no more than {limit:.1}; {}",
                    enough(z, Some(n))
                ),
                None => format!("max-drop {limit:.1}: {base}"),
            }
        }
        None => format!("fail-if-worse: {base}; it fails only on a significant drop, so an unchanged prompt passes at any size"),
    });
}

/// What a bench of `z.cases` cases makes of a gate that needs `need`.
fn enough(z: &Sizing<'_>, need: Option<u64>) -> String {
    match need {
        Some(n) if n <= z.cases => format!("the bench's {} are enough", z.cases),
        Some(_) => format!(
            "the bench has {}: expect inconclusive (exit 5) unless the difference is larger",
            z.cases
        ),
        None => String::new(),
    }
}

/// `--max-drop`, sized for each comparison of the last run (or, with none, at no difference
/// and the most disagreement).
fn size_max_drop(max: f64, z: &Sizing<'_>, out: &mut Vec<String>) {
    // Holm's level for the family: the level a verdict's interval reaches.
    let level = 1.0 - (1.0 - z.confidence) / z.compared.max(1) as f64;
    let verdict = |need: Option<u64>| enough(z, need);
    let limit = max * 100.0;
    match &z.last {
        Some((s, dir)) if !s.comparisons.is_empty() => {
            for c in &s.comparisons {
                let seen = c.difference.unwrap_or(0.0);
                let level = c.ci_level.unwrap_or(level);
                let (need, how) = match &c.table {
                    Some(t) => {
                        let n = t.both_right + t.only_variant + t.only_reference + t.both_wrong;
                        let share = (t.only_variant + t.only_reference) as f64 / n.max(1) as f64;
                        (
                            paired_cases(share, seen, max, level),
                            format!("{:.0}% of cases disagreeing", share * 100.0),
                        )
                    }
                    None => (
                        c.ci_low
                            .and_then(|lo| cases_to_clear(c.cases, (seen, lo), -max, level)),
                        "the spread".to_string(),
                    ),
                };
                out.push(match need {
                    Some(n) => format!(
                        "max-drop {limit:.1} on {}: at the last run's difference ({:+.1} points) and {how} ({dir}), about {n} cases would show a drop of no more than {limit:.1}; {}",
                        c.variant,
                        seen * 100.0,
                        verdict(Some(n))
                    ),
                    None => format!(
                        "max-drop {limit:.1} on {}: the last run ({dir}) saw a difference of {:+.1} points: no number of cases would show a drop of no more than {limit:.1} if that holds",
                        c.variant,
                        seen * 100.0
                    ),
                });
            }
        }
        _ => {
            // No run to go by: no difference, and half the cases disagreeing (two
            // independent variants at 50%), which needs the most cases.
            let n = paired_cases(0.5, 0.0, max, level);
            out.push(format!(
                "max-drop {limit:.1}: with no earlier run of the bench under reports/, at no difference and half the cases disagreeing (the most), about {} cases would show a drop of no more than {limit:.1}; {} (run the bench once: check and plan then size it from what the run saw)",
                n.unwrap_or(0),
                verdict(n)
            ));
        }
    }
}

/// `--min-accuracy [VARIANT][@PART]=P`, sized for each variant it names in the last run, on
/// its whole score or the part named.
fn size_min_accuracy(min: &MinAccuracy, z: &Sizing<'_>, out: &mut Vec<String>) {
    let t = min.threshold;
    let Some((s, dir)) = &z.last else {
        let half = promptgauge_stats::z_for(z.confidence) * (0.25 / z.cases.max(1) as f64).sqrt();
        let on = min
            .part
            .as_ref()
            .map(|p| format!(" on {p}"))
            .unwrap_or_default();
        out.push(format!(
            "min-accuracy {:.1}%{on}: no earlier run of the bench under reports/ to size it from; on {} cases an interval is up to ±{:.1} points wide, so a variant within that of {:.1}% is likely inconclusive",
            t * 100.0,
            z.cases,
            half * 100.0,
            t * 100.0
        ));
        return;
    };
    let target = match target_in(min, s) {
        Ok(target) => target,
        Err(e) => {
            let parts: Vec<String> = s.parts.iter().map(|p| p.name.clone()).collect();
            out.push(format!(
                "{}: the last run ({dir}) cannot size it: {}",
                min.gate_name("min-accuracy", None),
                e.said(&parts)
            ));
            return;
        }
    };
    let part = target
        .part
        .as_ref()
        .and_then(|name| s.parts.iter().find(|p| p.name == *name));
    let repeats = u64::from(s.run.repeats.max(1));
    for v in s.variants.iter().filter(|v| {
        target
            .variant
            .as_ref()
            .is_none_or(|name| v.answers_to(name))
    }) {
        let (g, cases, on) = match part {
            None => (
                gated_figure(v, s.is_scored()),
                v.n / repeats,
                v.name.clone(),
            ),
            Some(p) => {
                let Some(f) = p.variant(&v.name) else {
                    continue;
                };
                (
                    part_figure(p, f),
                    f.n / repeats,
                    format!("{} of {}", p.name, v.name),
                )
            }
        };
        let Some(acc) = g.value else { continue };
        let near = if acc >= t { g.low } else { g.high };
        let need = near.and_then(|x| cases_to_clear(cases, (acc, x), t, z.confidence));
        let head = format!(
            "min-accuracy {:.1}% on {on}: the last run's {}{:.1}% ({dir})",
            t * 100.0,
            g.called,
            acc * 100.0
        );
        out.push(match (acc >= t, need) {
            (true, Some(n)) => format!(
                "{head} passes it; about {n} cases would put its whole interval above it"
            ),
            (true, None) => format!("{head} passes it"),
            (false, Some(n)) if n > z.cases => format!(
                "{head} is below it: expect inconclusive (exit 5) on the bench's {} cases; about {n} would show it below (failed)",
                z.cases
            ),
            (false, _) => format!("{head} is below it: expect failed (exit 1)"),
        });
    }
}

/// `--fail-if-worse`, for each variant the last run saw below what it is compared with.
fn size_fail_if_worse(z: &Sizing<'_>, out: &mut Vec<String>) {
    let Some((s, dir)) = &z.last else { return };
    for c in &s.comparisons {
        if let (Some(d), Some(n)) = (c.difference, c.cases_needed)
            && d < 0.0
        {
            out.push(format!(
                "fail-if-worse on {}: the last run ({dir}) saw it {:.1} points below {}; about {n} cases would show a drop of that size (the bench has {})",
                c.variant,
                -d * 100.0,
                c.against,
                z.cases
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_accuracy_forms() {
        let m: MinAccuracy = "0.8".parse().unwrap();
        assert_eq!((m.variant, m.threshold), (None, 0.8));
        let m: MinAccuracy = "step-by-step=92.5%".parse().unwrap();
        assert_eq!(m.variant.as_deref(), Some("step-by-step"));
        assert!((m.threshold - 0.925).abs() < 1e-12);
        assert!("1.5".parse::<MinAccuracy>().is_err());
        assert!("plain=lots".parse::<MinAccuracy>().is_err());
        let m: MinAccuracy = "@category=0.9".parse().unwrap();
        assert_eq!((m.variant, m.part.as_deref()), (None, Some("category")));
        let m: MinAccuracy = "local/plain@items[].sku=90%".parse().unwrap();
        assert_eq!(m.variant.as_deref(), Some("local/plain"));
        assert_eq!(m.part.as_deref(), Some("items[].sku"));
        // Nothing after the `@`: the whole of it names a variant.
        let m: MinAccuracy = "plain@=0.9".parse().unwrap();
        assert_eq!((m.variant.as_deref(), m.part), (Some("plain@"), None));
    }

    fn target(text: &str, variants: &[&str], parts: &[&str]) -> Result<GateTarget, Unresolved> {
        let m: MinAccuracy = text.parse().unwrap();
        m.target(|v| variants.contains(&v), |p| parts.contains(&p))
    }

    fn to(variant: Option<&str>, part: Option<&str>) -> GateTarget {
        GateTarget {
            variant: variant.map(str::to_string),
            part: part.map(str::to_string),
        }
    }

    #[test]
    fn a_gate_s_name_reads_against_the_run_s_variants_and_parts() {
        let (v, p) = (["plain", "a@b", "x"], ["category", "b", "@type"]);
        assert_eq!(target("0.9", &v, &p), Ok(to(None, None)));
        assert_eq!(target("plain=0.9", &v, &p), Ok(to(Some("plain"), None)));
        assert_eq!(
            target("@category=0.9", &v, &p),
            Ok(to(None, Some("category")))
        );
        assert_eq!(
            target("plain@category=0.9", &v, &p),
            Ok(to(Some("plain"), Some("category")))
        );
        // A part whose name starts with `@` (JSON-LD's `@type`).
        assert_eq!(target("@@type=0.9", &v, &p), Ok(to(None, Some("@type"))));
        assert_eq!(
            target("plain@@type=0.9", &v, &p),
            Ok(to(Some("plain"), Some("@type")))
        );
        // `a@b`: no variant `a`, so the variant `a@b`.
        assert_eq!(target("a@b=0.9", &v, &p), Ok(to(Some("a@b"), None)));
        assert_eq!(
            target("a@b@category=0.9", &v, &p),
            Ok(to(Some("a@b"), Some("category")))
        );
        // With a variant `a` too, `a@b` reads two ways.
        let both = target("a@b=0.9", &["a", "a@b"], &p).unwrap_err();
        assert_eq!(
            both,
            Unresolved::Both(
                "a@b".into(),
                vec![to(Some("a@b"), None), to(Some("a"), Some("b"))]
            )
        );
        assert_eq!(
            both.said(&[]),
            "`a@b` reads as the variant `a@b` and as the part `b` of `a`"
        );
        assert_eq!(
            target("plain@categry=0.9", &v, &p),
            Err(Unresolved::Part("categry".into()))
        );
        assert_eq!(
            target("plian@category=0.9", &v, &p),
            Err(Unresolved::Variant("plian".into()))
        );
        assert_eq!(
            target("plian=0.9", &v, &p),
            Err(Unresolved::Variant("plian".into()))
        );
    }
}
