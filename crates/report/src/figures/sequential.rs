//! How the reports word `--until-decided`'s decisions (made in [`promptgauge_runner::sequential`]).

pub use promptgauge_runner::sequential::{DropSummary, SequentialSummary, SequentialVerdict};

/// Replaces a comparison's fixed-sample verdict (not valid after stopping early) by the
/// sequential one; the difference and interval stay, as a description of the cases run.
pub(crate) fn apply(c: &mut crate::compare::Comparison, s: &SequentialSummary) {
    let Some(v) = s
        .variants
        .iter()
        .find(|v| v.variant == c.variant && v.against.as_ref().is_none_or(|a| *a == c.against))
    else {
        return;
    };
    let (verdict, sentence) = worded(c, s, v);
    c.method = if s_binary(c) {
        "sequential_probability_ratio_test".into()
    } else {
        "sequential_betting_test".into()
    };
    c.verdict = verdict;
    c.sentence = sentence;
    // A fixed-sample p-value, and an interval at a level chosen to match it, are not
    // valid after optional stopping.
    c.p_value = None;
    c.p_holm = None;
    c.ci_level = None;
    c.cases_needed = None;
}

/// The sequential verdict on `c` (`v`'s), and the sentence that says it with what the
/// cases the test used show.
fn worded(
    c: &crate::compare::Comparison,
    s: &SequentialSummary,
    v: &SequentialVerdict,
) -> (crate::compare::Verdict, String) {
    use crate::compare::{Verdict, points};
    // In a run of several endpoints a cell may be counted for another test after this one
    // decided: the figures then cover more cases than this test used.
    let over = if v.against.is_some() && c.cases != v.cases {
        format!(
            "over the {} paired cases counted (this test decided on {})",
            c.cases, v.cases
        )
    } else {
        format!("over the {} paired cases the test used", c.cases)
    };
    let described = match (c.difference, c.ci_low, c.ci_high) {
        (Some(d), Some(lo), Some(hi)) => format!(
            "; {over}, {} [{}, {}] (a description of those cases, not a confidence interval after stopping early)",
            points(d),
            crate::compare::bound(lo),
            crate::compare::bound(hi)
        ),
        (Some(d), ..) => format!("; {over}, {}", points(d)),
        _ => String::new(),
    };
    let evidence = format!(
        "log evidence {:.2} against a threshold of {:.2}",
        v.statistic, v.threshold
    );
    match v.verdict.as_str() {
        "better" | "worse" => (
            if v.verdict == "better" {
                Verdict::Better
            } else {
                Verdict::Worse
            },
            format!(
                "{} is {} than {}: decided by the sequential test after {} cases ({evidence}){described}.",
                c.variant, v.verdict, c.against, v.cases
            ),
        ),
        "no_difference" => (
            Verdict::NotDistinguishable,
            format!(
                "{} and {} differ by less than {} points: decided by the sequential test after {} cases ({evidence}){described}.",
                c.variant, c.against, s.detect, v.cases
            ),
        ),
        "undecided" => (
            Verdict::NotDistinguishable,
            format!(
                "{} is not distinguishable from {}: undecided at max_cases ({} cases){described}.",
                c.variant, c.against, v.cases
            ),
        ),
        _ => (
            Verdict::NotDistinguishable,
            format!(
                "{} is not yet distinguishable from {}: the run ended after {} cases, before a decision; resume it to go on{described}.",
                c.variant, c.against, v.cases
            ),
        ),
    }
}

fn s_binary(c: &crate::compare::Comparison) -> bool {
    c.table.is_some()
}

/// A verdict's subject: the variant, and in a run of several endpoints what it was tested
/// against (`local/careful against local/plain`).
fn named(v: &promptgauge_runner::sequential::SequentialVerdict) -> String {
    match &v.against {
        Some(a) => format!("{} against {a}", v.variant),
        None => v.variant.clone(),
    }
}

/// What one test decided, in a few words, with its drop check's.
fn decided(s: &SequentialSummary, v: &SequentialVerdict) -> String {
    let name = named(v);
    let line = match v.verdict.as_str() {
        "better" | "worse" => match &v.against {
            Some(a) => format!(
                "{} {} than {a} after {} cases",
                v.variant, v.verdict, v.cases
            ),
            None => format!("{} {} after {} cases", name, v.verdict, v.cases),
        },
        "no_difference" => format!(
            "{}: no difference of {} points or more, after {} cases",
            name, s.detect, v.cases
        ),
        "undecided" => format!("{} undecided at max_cases ({})", name, v.cases),
        _ => format!(
            "{} not decided when the run ended ({} cases)",
            name, v.cases
        ),
    };
    match (&v.drop, s.max_drop) {
        (Some(d), Some(m)) => format!(
            "{line}, {}",
            match d.verdict.as_str() {
                "pass" => format!("at most {m} points worse (shown after {} cases)", d.cases),
                "fail" => format!("looks worse than the baseline (after {} cases)", d.cases),
                "running" => format!("a drop of {m} points not yet ruled out ({} cases)", d.cases),
                _ => format!("a drop of {m} points not ruled out ({} cases)", d.cases),
            }
        ),
        _ => line,
    }
}

/// What stopping early saved against the fixed design for the same power, or why the
/// bench stopped before every variant was decided.
fn saved(s: &SequentialSummary, all_decided: bool) -> String {
    match (s.jobs_fixed_design, s.jobs_saved, s.fixed_design_cases) {
        (_, _, Some(cases)) if !all_decided && s.max_cases < cases => format!(
            " The bench stopped at {} cases (its max_cases) before every variant was decided; the fixed design for the same power needs {cases}: add cases, or raise sequential.detect.",
            s.max_cases
        ),
        (Some(_), Some(0), Some(cases)) if all_decided => format!(
            " The fixed design for the same power ({cases} cases at the baseline accuracy seen, as `promptgauge plan` sizes it) would not have sent more: stopping early saved nothing here."
        ),
        (Some(fixed), Some(saved), Some(cases)) if all_decided => {
            let money = s
                .cost_saved_usd
                .map(|c| format!(", about {}", crate::usd(Some(c))))
                .unwrap_or_default();
            let beyond = if cases > s.max_cases {
                " (more cases than the bench has)"
            } else {
                ""
            };
            let what = match s.max_drop {
                Some(m) => format!(
                    "a difference of {} points either way, and a drop of {m}",
                    s.detect
                ),
                None => format!("a difference of {} points either way", s.detect),
            };
            format!(
                " The fixed design for the same power ({cases} cases{beyond} for {what} at the baseline accuracy seen, as `promptgauge plan` sizes it) would send {fixed} jobs: {saved} fewer were sent{money}."
            )
        }
        _ => String::new(),
    }
}

/// `n` cases, or groups of them: "1 case", "35 groups".
fn units(n: u64, grouped: bool) -> String {
    match (n, grouped) {
        (1, false) => "1 case".into(),
        (1, true) => "1 group".into(),
        (n, false) => format!("{n} cases"),
        (n, true) => format!("{n} groups"),
    }
}

/// `--best`'s answer with its guarantee, as a sentence without its full stop.
pub(crate) fn best_answer(b: &promptgauge_runner::sequential::BestSummary) -> String {
    let arms = b.remaining.len() + b.eliminated.len();
    let confidence = b.confidence * 100.0;
    let within = if b.epsilon > 0.0 {
        format!(", or within {} points of it,", b.epsilon)
    } else {
        String::new()
    };
    match (b.outcome.as_str(), b.named.as_slice()) {
        ("one" | "within_epsilon", [one]) => format!(
            "{one} is the best of {arms}{within} with {confidence:.0}% confidence (after {})",
            units(b.cases, b.grouped)
        ),
        ("within_epsilon", many) => format!(
            "{} are each the best of {arms}{within} with {confidence:.0}% confidence (after {})",
            many.join(", "),
            units(b.cases, b.grouped)
        ),
        ("one_of", left) => {
            let more = match b.more_cases {
                Some(1) => format!(
                    "about 1 more {} would",
                    if b.grouped { "group" } else { "case" }
                ),
                Some(n) => format!(
                    "about {n} more {} would",
                    if b.grouped { "groups" } else { "cases" }
                ),
                None => "the differences seen would not settle them on any number".into(),
            };
            format!(
                "the best of {arms}{within} is one of {}, with {confidence:.0}% confidence; the bench's {} cannot tell them apart ({more})",
                left.join(", "),
                if b.grouped { "groups" } else { "cases" }
            )
        }
        (_, left) => format!(
            "the best of {arms}{within} is one of {}, with {confidence:.0}% confidence: the run ended after {}, before the search did",
            left.join(", "),
            units(b.cases, b.grouped)
        ),
    }
}

/// `--best`'s sentences: the answer with its guarantee, then where each arm went out.
fn best_note(s: &SequentialSummary, b: &promptgauge_runner::sequential::BestSummary) -> String {
    let answer = best_answer(b);
    let out: Vec<String> = b
        .eliminated
        .iter()
        .map(|e| {
            let bound = if e.gap_at_least > 0.0 {
                let points = e.gap_at_least;
                format!(
                    " by ≥ {points} point{}",
                    if points == 1.0 { "" } else { "s" }
                )
            } else {
                String::new()
            };
            format!(
                "{} out after {}: below {}{bound} ({:+.1} points on the same cases)",
                e.variant,
                units(e.cases, b.grouped),
                e.by,
                -e.gap_seen
            )
        })
        .collect();
    // The arms in play not named, by what the data show.
    let unsettled = if b.standing.is_empty() {
        String::new()
    } else {
        let each: Vec<String> = b
            .standing
            .iter()
            .map(|a| {
                format!(
                    "{}: {:.1} points {} {} on the same {}",
                    a.variant,
                    a.gap_seen.abs(),
                    if a.gap_seen <= 0.0 {
                        "behind"
                    } else {
                        "ahead of"
                    },
                    a.against,
                    units(a.cases, b.grouped)
                )
            })
            .collect();
        format!(
            " Not ruled out at the search's confidence: {}.",
            each.join("; ")
        )
    };
    let bench = match b.jobs_bench {
        Some(all) if all > 0 => {
            let sent = b.jobs_sent;
            format!(
                " It sent {sent} of the bench's {all} jobs ({:.0}%).",
                100.0 * sent as f64 / all as f64
            )
        }
        _ => String::new(),
    };
    let saved = match (s.jobs_fixed_design, s.jobs_saved) {
        (Some(fixed), Some(saved)) => format!(
            "{bench} The fixed design with the same guarantee (every arm on {}: arms as far apart as ε at the baseline's accuracy seen) would send {fixed} jobs: {saved} fewer were sent.",
            units(s.fixed_design_cases.unwrap_or(0), b.grouped)
        ),
        _ => bench,
    };
    format!(
        "Best of many (--best: ε {} points, {} in a seeded random order): {answer}.{unsettled}{}{saved} The guarantee holds however early the search stopped; the accuracies and intervals in the table describe the cases each arm was sent, and the comparisons with the baseline are fixed-sample tests on cases the search chose when to stop: read them as descriptions, not verdicts.",
        b.epsilon,
        if b.grouped {
            "groups of cases, by `group:`,"
        } else {
            "cases"
        },
        if out.is_empty() {
            String::new()
        } else {
            format!(" {}.", out.join("; "))
        }
    )
}

/// The summary's sentence about stopping early.
pub(crate) fn note(s: &SequentialSummary) -> String {
    if let Some(b) = &s.best {
        return best_note(s, b);
    }
    let each: Vec<String> = s.variants.iter().map(|v| decided(s, v)).collect();
    let all_decided = s
        .variants
        .iter()
        .all(|v| matches!(v.verdict.as_str(), "better" | "worse" | "no_difference"));
    let saved = saved(s, all_decided);
    let drop = match s.max_drop {
        Some(m) => format!(
            " With --max-drop each variant ran until its drop check was settled too: \"at most {m} points worse\" holds at the run's confidence; a variant as good as the baseline \"looks worse\" at most {:.0}% of the time.",
            (1.0 - s.power) * 100.0
        ),
        None => String::new(),
    };
    format!(
        "Stopped when decided (--until-decided: detect {} points, {:.0}% power, cases in a seeded random order): {}.{saved} A better or worse verdict holds at the run's confidence however early it came; \"no difference of {} points\" is wrong at most {:.0}% of the time when the true difference is that large (about {:.0}% in simulation), whatever the correlation of the variants.{drop} The differences and intervals beside them describe the cases the tests used and are not confidence intervals after stopping early.",
        s.detect,
        s.power * 100.0,
        each.join("; "),
        s.detect,
        promptgauge_stats::sequential::FUTILITY_SLACK * (1.0 - s.power) * 100.0,
        (1.0 - s.power) * 100.0
    )
}
