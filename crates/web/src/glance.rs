//! A recorded run at a glance, as the runs list shows it: its status in a word, its gates'
//! outcomes (when summary.json recorded any), and each arm's figure as a small interval
//! bar drawn as report.html draws its intervals.

use std::fmt::Write as _;
use std::path::Path;

use promptgauge_report::html::{colour, esc, interval_marks};
use promptgauge_report::rows::{RunRow, VariantRow};

/// A run's status in a word, and its badge's class: finished (every planned job, none
/// failed), failed (some jobs failed), partial (stopped, or not every job finished).
pub(super) fn status(r: &RunRow) -> (&'static str, &'static str) {
    if r.jobs_failed > 0 {
        ("failed", "failed")
    } else if r.complete {
        ("finished", "finished")
    } else {
        ("partial", "partial")
    }
}

/// The status badge, with what it stands for in its title.
pub(super) fn status_badge(r: &RunRow) -> String {
    let (word, class) = status(r);
    let why = match (word, r.stopped.is_some()) {
        ("failed", _) => format!("{} of {} jobs failed", r.jobs_failed, r.jobs_planned),
        ("partial", true) => format!(
            "stopped after {} of {} jobs",
            r.jobs_finished, r.jobs_planned
        ),
        ("partial", false) => format!("{} of {} jobs finished", r.jobs_finished, r.jobs_planned),
        _ => format!("all {} jobs finished", r.jobs_planned),
    };
    format!("<span class=\"badge {class}\" title=\"{why}\">{word}</span>")
}

/// A gate as the list shows it: its name and outcome.
#[derive(Debug, serde::Deserialize)]
struct Gate {
    gate: String,
    passed: bool,
    #[serde(default)]
    outcome: Option<promptgauge_report::GateOutcome>,
}

/// The gates summary.json recorded (none: no gate was asked for, or no summary).
#[derive(Debug, Default, serde::Deserialize)]
struct Gates {
    #[serde(default)]
    gates: Vec<Gate>,
}

/// The gates a run folder's summary.json recorded, as one badge (empty: none recorded):
/// the worst outcome among them (failed, then inconclusive, then passed), each gate's own
/// in its title. Only the `gates` field is kept of the file.
pub(super) fn gate_badge(folder: &Path) -> String {
    let Ok(file) = std::fs::File::open(folder.join("summary.json")) else {
        return String::new();
    };
    let gates: Gates = serde_json::from_reader(std::io::BufReader::new(file)).unwrap_or_default();
    let words: Vec<(&str, &'static str)> = gates
        .gates
        .iter()
        .map(|g| {
            let word = match g.outcome {
                Some(o) => o.word(),
                None if g.passed => "passed",
                None => "failed",
            };
            (g.gate.as_str(), word)
        })
        .collect();
    let Some(worst) = ["failed", "inconclusive", "passed"]
        .into_iter()
        .find(|w| words.iter().any(|(_, x)| x == w))
    else {
        return String::new();
    };
    let each: Vec<String> = words.iter().map(|(g, w)| format!("{g}: {w}")).collect();
    let said = if worst == "passed" && words.len() > 1 {
        "gates passed".to_string()
    } else {
        format!("gate {worst}")
    };
    format!(
        "<span class=\"badge {worst}\" title=\"{}\">{said}</span>",
        esc(&each.join("; "))
    )
}

/// The width of a figure's bar, in pixels (0 to 100%).
const BAR: f64 = 120.0;

/// Each arm's figure (mean score in a scored run, else accuracy) as a small interval bar
/// on a 0–100% axis, with the figure and interval in numbers beside it, under what the
/// figure is (`accuracy`, `mean score`: report.html's words).
pub(super) fn figures(variants: &[VariantRow], scored: bool) -> String {
    let measure = if scored { "mean score" } else { "accuracy" };
    let mut out = format!("<div class=\"measure muted\">{measure}</div>");
    for (i, v) in variants.iter().enumerate() {
        let (x, lo, hi) = if scored {
            (v.mean_score, v.score_ci_low, v.score_ci_high)
        } else {
            (v.accuracy, v.ci_low, v.ci_high)
        };
        let name = match &v.endpoint {
            Some(e) => format!("{e}/{}", v.variant),
            None => v.variant.clone(),
        };
        let mut svg = format!(
            "<svg width=\"{w}\" height=\"14\" viewBox=\"0 0 {w} 14\" role=\"img\" aria-label=\"{name}: {measure} with its interval\"><line class=\"axis\" x1=\"6\" x2=\"{end}\" y1=\"7\" y2=\"7\"/>",
            w = BAR + 12.0,
            end = BAR + 6.0,
            name = esc(&name),
        );
        let at = |p: f64| 6.0 + p.clamp(0.0, 1.0) * BAR;
        if let (Some(x), Some(lo), Some(hi)) = (x, lo, hi) {
            interval_marks(&mut svg, (at(lo), at(x), at(hi)), 7.0, colour(i));
        } else if let Some(x) = x {
            let _ = write!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"7\" r=\"5\" fill=\"{}\"/>",
                at(x),
                colour(i)
            );
        }
        svg.push_str("</svg>");
        let numbers = match (x, lo, hi) {
            (Some(x), Some(lo), Some(hi)) => format!(
                "{:.1}% <span class=\"muted\">[{:.1}, {:.1}]</span>",
                x * 100.0,
                lo * 100.0,
                hi * 100.0
            ),
            (Some(x), _, _) => format!("{:.1}%", x * 100.0),
            _ => "—".to_string(),
        };
        let _ = write!(
            out,
            "<div class=\"fig\"><span class=\"arm\">{}</span>{svg}<span>{numbers}</span></div>",
            esc(&name)
        );
    }
    out
}
