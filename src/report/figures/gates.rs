//! CI gates: conditions a run must meet, each failing with a one-line reason (exit code 1).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::report::Summary;
use crate::report::compare::{RunComparison, Verdict};
pub(crate) use crate::report::summary::GateResult;

/// `--min-accuracy [VARIANT=]P`; in a run of several endpoints VARIANT may be
/// `ENDPOINT/VARIANT` (one cell), a variant (at every endpoint) or an endpoint (every
/// variant at it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinAccuracy {
    /// `None`: every variant.
    pub variant: Option<String>,
    /// A share, 0–1.
    pub threshold: f64,
}

impl std::str::FromStr for MinAccuracy {
    type Err = String;

    /// `0.8`, `80%`, `plain=0.9`, `step-by-step=92.5%`
    fn from_str(s: &str) -> Result<Self, String> {
        let (variant, value) = match s.rsplit_once('=') {
            Some((v, p)) if !v.trim().is_empty() => (Some(v.trim().to_string()), p),
            Some((_, p)) => (None, p),
            None => (None, s),
        };
        let value = value.trim();
        let threshold = match value.strip_suffix('%') {
            Some(pct) => pct.trim().parse::<f64>().map(|x| x / 100.0),
            None => value.parse::<f64>(),
        }
        .map_err(|_| format!("`{s}` is not an accuracy; write 0.8, 80% or VARIANT=0.8"))?;
        if !(0.0..=1.0).contains(&threshold) {
            return Err(format!(
                "`{s}`: an accuracy is between 0 and 1 (or 0% and 100%)"
            ));
        }
        Ok(MinAccuracy { variant, threshold })
    }
}

/// The gates a run was asked to pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Gates {
    pub fail_if_worse: bool,
    /// `--fail-if-not-best`: the baseline must be in `--best`'s answer.
    pub fail_if_not_best: bool,
    /// `--max-drop`: the largest drop (a share) the data must rule out.
    pub max_drop: Option<f64>,
    pub min_accuracy: Vec<MinAccuracy>,
    /// `--min-pass-all`: pass^k (right all k repeats) at least P.
    pub min_pass_all: Vec<MinAccuracy>,
    pub max_cost_usd: Option<f64>,
    /// `--budget` (or the resumed run's): spending past it fails the `budget` gate.
    pub budget_usd: Option<f64>,
    pub max_p90_latency: Option<Duration>,
    /// Failed jobs tolerated before the run counts as incomplete.
    pub allow_failures: u64,
}

impl Gates {}

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
    let mut past = crate::report::figures::holds::PastHolds::default();
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

fn usd(x: f64) -> String {
    crate::report::usd(Some(x))
}

fn result(gate: &str, passed: bool, reason: String) -> GateResult {
    GateResult {
        gate: gate.to_string(),
        passed,
        reason,
    }
}

/// `--max-drop` after `--until-decided`: the fixed-sample intervals are not valid after
/// stopping early; the sequential drop check decides. A variant passes when its check
/// passed: a drop of `max` or more passes that way with probability at most
/// (1 − confidence)/(2m), however early it came.
fn sequential_drop(max: f64, seq: &crate::report::sequential::SequentialSummary) -> GateResult {
    let limit = max * 100.0;
    let mut shown = Vec::new();
    let mut unshown = Vec::new();
    for v in &seq.variants {
        let Some(d) = &v.drop else {
            unshown.push(format!(
                "{}: no sequential drop check at {limit:.1} points was run",
                v.variant
            ));
            continue;
        };
        match d.verdict.as_str() {
            "pass" => shown.push(format!(
                "{} is at most {limit:.1} points worse: shown by the sequential test after {} cases",
                v.variant, d.cases
            )),
            "fail" => unshown.push(format!(
                "{} looks worse than the baseline after {} cases (log evidence {:.2} ≥ {:.2}): a drop of {limit:.1} points is not ruled out",
                v.variant, d.cases, d.statistic, d.threshold
            )),
            "running" => unshown.push(format!(
                "{}: the run ended after {} cases, before a drop of more than {limit:.1} points was ruled out; resume it to go on",
                v.variant, d.cases
            )),
            _ => unshown.push(format!(
                "{}: a drop of more than {limit:.1} points was not ruled out within {} cases",
                v.variant, d.cases
            )),
        }
    }
    if shown.is_empty() && unshown.is_empty() {
        return result(
            "max-drop",
            false,
            "nothing was compared with the baseline".into(),
        );
    }
    if unshown.is_empty() {
        result("max-drop", true, shown.join("; "))
    } else {
        result("max-drop", false, unshown.join("; "))
    }
}

/// `--max-drop`: passes only when every comparison's interval shows the variant is at
/// most `max` worse than what it is compared with.
fn non_inferior<'a>(
    gate: &str,
    max: f64,
    comparisons: impl Iterator<Item = &'a crate::report::compare::Comparison>,
    against: &str,
) -> GateResult {
    let limit = max * 100.0;
    let mut shown = Vec::new();
    let mut unshown = Vec::new();
    for c in comparisons {
        let level = c
            .ci_level
            .map(|l| format!(" at {:.1}%", l * 100.0))
            .unwrap_or_default();
        match (c.ci_low, c.ci_high) {
            (Some(lo), Some(hi)) if lo >= -max => shown.push(format!(
                "{} is at most {:.1} points below {} ([{:+.1}, {:+.1}]{level})",
                c.variant,
                (-lo * 100.0).max(0.0),
                c.against,
                lo * 100.0,
                hi * 100.0
            )),
            (Some(lo), Some(hi)) => {
                let more = if hi > -max {
                    " (more cases narrow the interval)"
                } else {
                    ""
                };
                unshown.push(format!(
                    "{} may be up to {:.1} points below {} ([{:+.1}, {:+.1}]{level}): the data do not rule out a drop of more than {limit:.1} points{more}",
                    c.variant,
                    -lo * 100.0,
                    c.against,
                    lo * 100.0,
                    hi * 100.0
                ))
            }
            _ => unshown.push(format!(
                "{} has no case graded alongside {}: nothing shows it did not drop",
                c.variant, c.against
            )),
        }
    }
    if shown.is_empty() && unshown.is_empty() {
        return result(gate, false, format!("nothing was compared with {against}"));
    }
    match unshown.is_empty() {
        true => result(gate, true, shown.join("; ")),
        false => result(gate, false, unshown.join("; ")),
    }
}

/// `--fail-if-worse`: passes when no comparison is significantly worse — and every one
/// compared something: a comparison with no case graded on both sides has not shown that
/// nothing dropped, and a gate that compared nothing has not passed.
fn not_worse<'a>(
    gate: &str,
    comparisons: impl Iterator<Item = &'a crate::report::compare::Comparison>,
    against: &str,
    passed: String,
) -> GateResult {
    let mut worse = Vec::new();
    let mut empty = Vec::new();
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
    result(gate, true, passed)
}

/// Checks every gate against the run (and, with `--baseline`, its comparison).
pub(crate) fn evaluate(
    gates: &Gates,
    s: &Summary,
    baseline: Option<&RunComparison>,
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
    if let Some(max) = gates.max_p90_latency {
        max_p90_latency(max, s, &mut out);
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
    let (set, what) = match b.outcome.as_str() {
        "open" => (&b.remaining, "the arms left when the cases ran out"),
        _ => (&b.named, "the best, or within ε of it"),
    };
    let passed = set.iter().any(|a| a == baseline);
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

/// `--fail-if-worse`: within the run, and against `--baseline`'s run.
fn fail_if_worse(s: &Summary, baseline: Option<&RunComparison>, out: &mut Vec<GateResult>) {
    // With one variant there is nothing within the run to compare: against an earlier
    // run, that comparison is the gate.
    if !(s.comparisons.is_empty() && baseline.is_some()) {
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

/// `--max-drop POINTS`: within the run (sequentially, after `--until-decided`), and
/// against `--baseline`'s run.
fn max_drop(max: f64, s: &Summary, baseline: Option<&RunComparison>, out: &mut Vec<GateResult>) {
    // With one variant there is nothing within the run to compare: against an earlier
    // run, that comparison is the gate.
    let within = !(s.comparisons.is_empty() && baseline.is_some());
    if within {
        out.push(match &s.sequential {
            Some(seq) => sequential_drop(max, seq),
            None => non_inferior("max-drop", max, s.comparisons.iter(), "the baseline"),
        });
    }
    if let Some(b) = baseline {
        out.push(non_inferior(
            "max-drop --baseline",
            max,
            b.variants.iter().map(|v| &v.comparison),
            &format!("its run in {}", b.run_a.dir),
        ));
    }
}

/// `--min-pass-all [VARIANT=]P`: each variant's pass^k (its cases right all k repeats)
/// against P, said with its interval, as `--min-accuracy` says accuracy.
fn min_pass_all(min: &MinAccuracy, s: &Summary, out: &mut Vec<GateResult>) {
    let gate = format!(
        "min-pass-all {}{:.1}%",
        min.variant
            .as_ref()
            .map(|v| format!("{v}="))
            .unwrap_or_default(),
        min.threshold * 100.0
    );
    let variants: Vec<_> = s
        .variants
        .iter()
        .filter(|v| min.variant.as_ref().is_none_or(|name| v.answers_to(name)))
        .collect();
    if variants.is_empty() {
        out.push(result(
            &gate,
            false,
            format!(
                "no variant is named `{}`",
                min.variant.clone().unwrap_or_default()
            ),
        ));
    }
    for v in variants {
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
        let (all, t, k) = (p.pass_all_k, min.threshold, p.k);
        let ci = crate::report::text::interval(p.pass_all_k_ci_low, p.pass_all_k_ci_high);
        out.push(if all >= t {
            result(
                &gate,
                true,
                format!(
                    "{}: pass^{k} {:.1}% {ci} ≥ {:.1}%",
                    v.name,
                    all * 100.0,
                    t * 100.0
                ),
            )
        } else {
            let flaky = match v.repeats.flaky.as_slice() {
                [] => String::new(),
                ids => format!(
                    "; {} flaky cases (repeats disagree), e.g. {}",
                    ids.len(),
                    ids[0]
                ),
            };
            result(
                &gate,
                false,
                format!(
                    "{}: pass^{k} {:.1}% {ci} is below {:.1}% (cases right all {k} times{flaky})",
                    v.name,
                    all * 100.0,
                    t * 100.0
                ),
            )
        });
    }
}

/// `--min-accuracy [VARIANT=]P`: each variant it names against P.
fn min_accuracy(min: &MinAccuracy, s: &Summary, out: &mut Vec<GateResult>) {
    let variants: Vec<_> = s
        .variants
        .iter()
        .filter(|v| min.variant.as_ref().is_none_or(|name| v.answers_to(name)))
        .collect();
    let gate = format!(
        "min-accuracy {}{:.1}%",
        min.variant
            .as_ref()
            .map(|v| format!("{v}="))
            .unwrap_or_default(),
        min.threshold * 100.0
    );
    if variants.is_empty() {
        out.push(result(
            &gate,
            false,
            format!(
                "no variant is named `{}`",
                min.variant.clone().unwrap_or_default()
            ),
        ));
    }
    for v in variants {
        let Some(acc) = v.accuracy else {
            out.push(result(
                &gate,
                false,
                format!("{}: no graded answers", v.name),
            ));
            continue;
        };
        let ci = format!(
            "[{:.1}, {:.1}]",
            v.ci_low.unwrap_or(acc) * 100.0,
            v.ci_high.unwrap_or(acc) * 100.0
        );
        let t = min.threshold;
        out.push(if acc >= t {
            result(
                &gate,
                true,
                format!("{}: {:.1}% {ci} ≥ {:.1}%", v.name, acc * 100.0, t * 100.0),
            )
        } else {
            let certainty = if v.ci_high.is_some_and(|hi| hi < t) {
                "certain: the whole interval is below it"
            } else {
                "uncertain: the interval straddles it"
            };
            result(
                &gate,
                false,
                format!(
                    "{}: {:.1}% {ci} is below {:.1}% ({certainty})",
                    v.name,
                    acc * 100.0,
                    t * 100.0
                ),
            )
        });
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
    }
}
