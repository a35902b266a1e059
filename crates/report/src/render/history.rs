//! history.html: a bench's runs over time, drawn as charts and the history table.

use std::fmt::Write as _;

// `report::history` is this file: the figures it draws, and the page.
pub use crate::figures::history::*;

use super::html::{colour, esc, nice_step, page};
use crate::compare::Verdict;
use crate::rows::RunRow;
use crate::text::{pct, usd};

/// history.html: the shown figure with its interval over time per variant, each point a
/// link to its run's report.html; cost and p90 latency beneath; then the table.
/// `link(run)` gives the href of a run's report (`None`: its folder is not here).
pub fn render_html(h: &History, link: &dyn Fn(&RunRow) -> Option<String>) -> String {
    let scored = h.runs.iter().any(|r| r.run.scored);
    let measure = if scored { "mean score" } else { "accuracy" };
    let title = title(h);
    let marks = match &h.part {
        None => "▲/▼ mark a step that is significant against the complete run before it (paired by case, Holm across variants)".to_string(),
        Some(p) => format!(
            "each variant's {measure} of the part `{}` alone; steps between runs are not tested for a part (the store keeps each job's whole score, not its parts')",
            esc(p)
        ),
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>{} — history</h1><p class=\"muted\">{} runs{}. Each point is a run, its bar the {measure}'s interval; {marks}. Click a point for its report.</p>",
        esc(&title),
        h.runs.len(),
        match (h.runs.first(), h.runs.last()) {
            (Some(a), Some(z)) => format!(
                ", {} to {}",
                esc(&short_time(&a.run.started_at)),
                esc(&short_time(&z.run.started_at))
            ),
            _ => String::new(),
        }
    );
    let _ = write!(b, "<p>");
    for (i, v) in h.variants.iter().enumerate() {
        let _ = write!(
            b,
            "<span class=\"swatch\" style=\"background:{}\"></span>{} &nbsp; ",
            colour(i),
            esc(v)
        );
    }
    b.push_str("</p>");
    b.push_str(&format!(
        "<h2>{}</h2>",
        if scored { "Mean score" } else { "Accuracy" }
    ));
    b.push_str(&time_chart(h, "history-chart", measure, true, link, |v| {
        let (x, lo, hi) = v.result.shown();
        x.map(|x| (x, lo, hi))
    }));
    b.push_str("<h2>Cost</h2>");
    b.push_str(&time_chart(
        h,
        "cost-chart",
        "cost (USD)",
        false,
        link,
        |v| {
            v.result
                .spent_usd
                .or(v.result.cost_usd)
                .map(|c| (c, None, None))
        },
    ));
    b.push_str("<h2>Latency p90</h2>");
    b.push_str(&time_chart(
        h,
        "latency-chart",
        "p90 latency (ms)",
        false,
        link,
        |v| v.result.latency_p90_ms.map(|l| (l, None, None)),
    ));
    parts_charts(&mut b, h, link);
    let steps = step_sentences(h);
    if !steps.is_empty() {
        b.push_str("<h2>Significant steps</h2><ul>");
        for s in steps {
            let _ = write!(b, "<li>{}</li>", esc(&s));
        }
        b.push_str("</ul>");
    }
    b.push_str("<h2>Runs</h2>");
    b.push_str(&super::tables::history(h, link).html());
    page(&format!("{title} — history"), &b)
}

/// The history's name: the bench, and the part it shows (`history --part`).
fn title(h: &History) -> String {
    match &h.part {
        Some(p) => format!("{} · part {p}", h.bench),
        None => h.bench.clone(),
    }
}

/// A chart per named part of the score (none for a score without parts, nor for the
/// history of one part): each variant's mean of the part over time with its interval.
fn parts_charts(b: &mut String, h: &History, link: &dyn Fn(&RunRow) -> Option<String>) {
    if h.part.is_some() || h.parts.is_empty() {
        return;
    }
    let _ = write!(
        b,
        "<h2 id=\"parts\">Parts</h2><p class=\"muted\">Each named part of the score over time, per variant (an accuracy for a part scored 0 or 1, else its mean score), with its interval; steps between runs are tested for the whole score only. <code>promptgauge history --part NAME</code> shows one part's table.</p>"
    );
    for (i, name) in h.parts.iter().enumerate() {
        let part = |v: &HistoryVariant| v.parts.iter().find(|p| &p.part == name).cloned();
        let binary = h
            .runs
            .iter()
            .flat_map(|r| &r.variants)
            .filter_map(part)
            .all(|p| p.binary);
        let _ = write!(b, "<h3>{}</h3>", esc(name));
        b.push_str(&time_chart(
            h,
            &format!("part-chart-{i}"),
            if binary { "accuracy" } else { "mean score" },
            false,
            link,
            |v| part(v).and_then(|p| p.mean.map(|m| (m, p.ci_low, p.ci_high))),
        ));
    }
}

/// `history --part NAME` in the terminal: the history table of one part's figures.
pub fn render_part(h: &History) -> String {
    let scored = h.runs.iter().any(|r| r.run.scored);
    let mut levels: Vec<u64> = h.runs.iter().map(|r| r.run.confidence.to_bits()).collect();
    levels.dedup();
    let level = match (levels.len(), h.runs.first()) {
        (1, Some(r)) => format!("{}% intervals", r.run.confidence * 100.0),
        _ => "intervals at each run's own confidence level".to_string(),
    };
    let runs = match h.runs.len() {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    format!(
        "{}: {runs} ({level}; each variant's {} of this part alone; no step between runs is tested for a part)\n{}",
        crate::terminal_safe(&title(h)),
        if scored { "mean score" } else { "accuracy" },
        super::tables::history(h, &|_| None).terminal(super::terminal::width())
    )
}

/// A chart's point: the run's position, the run, its variant, and the value with its
/// interval.
struct Point<'a> {
    at: usize,
    run: &'a HistoryRun,
    variant: &'a HistoryVariant,
    value: Value,
}

/// A value on a chart with its interval, when it has one.
type Value = (f64, Option<f64>, Option<f64>);

/// A chart's plot area, and where run `i` and value `v` fall in it.
struct Frame {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    /// Runs across.
    n: usize,
    /// The values at the bottom and the top.
    y0: f64,
    y1: f64,
}

impl Frame {
    fn x(&self, i: usize) -> f64 {
        if self.n == 1 {
            self.left + self.width / 2.0
        } else {
            self.left + self.width * i as f64 / (self.n - 1) as f64
        }
    }

    fn y(&self, v: f64) -> f64 {
        self.top + self.height - (v - self.y0) / (self.y1 - self.y0) * self.height
    }
}

/// How a chart shows its points: `label` names the figure, `marks` puts the tested
/// steps on it, `link` gives each run's report.
struct Look<'a> {
    label: &'a str,
    marks: bool,
    link: &'a dyn Fn(&RunRow) -> Option<String>,
}

impl Look<'_> {
    fn percent(&self) -> bool {
        self.label == "accuracy" || self.label == "mean score"
    }
}

/// One chart over the runs: per variant, a line through its points (with interval bars
/// when `value` gives them), each point a link to its run's report.
fn time_chart(
    h: &History,
    id: &str,
    label: &str,
    marks: bool,
    link: &dyn Fn(&RunRow) -> Option<String>,
    value: impl Fn(&HistoryVariant) -> Option<Value>,
) -> String {
    let (left, top, width, height) = (70.0, 12.0, 820.0, 220.0);
    let Some((lo_all, hi_all)) = value_range(h, &value) else {
        let why = if label.starts_with("cost") {
            "no cost: the bench sets no price"
        } else {
            "no data"
        };
        return format!("<p class=\"muted\" id=\"{id}\">{why}</p>");
    };
    let total_h = top + height + 44.0;
    let mut svg = format!(
        "<svg id=\"{id}\" role=\"img\" aria-label=\"{} over time\" width=\"{}\" height=\"{total_h}\" viewBox=\"0 0 {} {total_h}\">",
        esc(label),
        left + width + 90.0,
        left + width + 90.0
    );
    // A little room around the data; a flat series gets a band of its own.
    let span = (hi_all - lo_all).max(hi_all.abs() * 0.1).max(1e-9);
    let (y0, y1) = ((lo_all - span * 0.1).max(0.0), hi_all + span * 0.1);
    let frame = Frame {
        left,
        top,
        width,
        height,
        n: h.runs.len().max(1),
        y0,
        y1,
    };
    let look = Look { label, marks, link };
    value_axis(&mut svg, &frame, label);
    time_axis(&mut svg, &frame, h);
    for (k, name) in h.variants.iter().enumerate() {
        series(&mut svg, &frame, h, k, name, &look, &value);
    }
    svg.push_str("</svg>");
    svg
}

/// The lowest and highest values the chart shows, intervals included; `None`: no run has
/// one.
fn value_range(
    h: &History,
    value: &impl Fn(&HistoryVariant) -> Option<Value>,
) -> Option<(f64, f64)> {
    let mut lo_all = f64::INFINITY;
    let mut hi_all = f64::NEG_INFINITY;
    for r in &h.runs {
        for v in &r.variants {
            if let Some((x, lo, hi)) = value(v) {
                lo_all = lo_all.min(lo.unwrap_or(x)).min(x);
                hi_all = hi_all.max(hi.unwrap_or(x)).max(x);
            }
        }
    }
    lo_all.is_finite().then_some((lo_all, hi_all))
}

/// The value axis: a grid line and a label at each round step.
fn value_axis(svg: &mut String, frame: &Frame, label: &str) {
    let Frame {
        left,
        width,
        y0,
        y1,
        ..
    } = *frame;
    let step = nice_step(y1 - y0);
    let mut tick = (y0 / step).ceil() * step;
    let percent = label == "accuracy" || label == "mean score";
    while tick <= y1 + 1e-12 {
        let text = if percent {
            format!("{:.0}%", tick * 100.0)
        } else if label.starts_with("cost") {
            usd(Some(tick))
        } else if tick >= 1000.0 {
            format!("{:.1} s", tick / 1000.0)
        } else {
            format!("{tick:.0} ms")
        };
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{left}\" x2=\"{0}\" y1=\"{1:.1}\" y2=\"{1:.1}\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\">{4}</text>",
            left + width,
            frame.y(tick),
            left - 6.0,
            frame.y(tick) + 4.0,
            esc(&text)
        );
        tick += step;
    }
}

/// Dates under the first, last and a few runs between, as precise as it takes to tell
/// them apart (runs of one CI job start in the same minute).
fn time_axis(svg: &mut String, frame: &Frame, h: &History) {
    let n = frame.n;
    let every = n.div_ceil(6).max(1);
    let shown: Vec<usize> = (0..n)
        .filter(|&i| i % every == 0 || i + 1 == n)
        .filter(|&i| i < h.runs.len())
        .collect();
    let labels = axis_labels(
        &shown
            .iter()
            .map(|&i| h.runs[i].run.started_at.as_str())
            .collect::<Vec<_>>(),
    );
    for (&i, label) in shown.iter().zip(labels) {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            frame.x(i),
            frame.top + frame.height + 18.0,
            esc(&label)
        );
    }
}

/// Variant `k`'s series: its lines, one per branch, and its points.
fn series(
    svg: &mut String,
    frame: &Frame,
    h: &History,
    k: usize,
    name: &str,
    look: &Look<'_>,
    value: &impl Fn(&HistoryVariant) -> Option<Value>,
) {
    let c = colour(k);
    let variants = h.variants.len().max(1) as f64;
    // Variants side by side at each run, so their intervals do not hide each other.
    let dodge = (k as f64 - (variants - 1.0) / 2.0) * 7.0;
    let x = |i: usize| frame.x(i) + dodge;
    let points: Vec<Point<'_>> = h
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let v = r.variants.iter().find(|v| v.result.variant == name)?;
            Some(Point {
                at: i,
                run: r,
                variant: v,
                value: value(v)?,
            })
        })
        .collect();
    for (line, path) in &branch_lines(&points, &x, frame) {
        if path.len() > 1 {
            let _ = write!(
                svg,
                "<polyline class=\"line\" data-line=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"1.5\" opacity=\"0.6\"{} points=\"{}\"/>",
                esc(line.as_deref().unwrap_or("main")),
                if line.is_some() {
                    " stroke-dasharray=\"4 3\""
                } else {
                    ""
                },
                path.join(" ")
            );
        }
    }
    for point in &points {
        let g = point_mark(point, name, c, look, &x, frame);
        match (look.link)(&point.run.run) {
            Some(href) => {
                let _ = write!(svg, "<a href=\"{}\">{g}</a>", esc(&href));
            }
            None => svg.push_str(&g),
        }
    }
}

/// One line per branch, as its points: the main line, and a pull request's branch from its
/// base (the run its first step was measured from), never drawn into the main line.
fn branch_lines(
    points: &[Point<'_>],
    x: &dyn Fn(usize) -> f64,
    frame: &Frame,
) -> Vec<(Option<String>, Vec<String>)> {
    let mut lines: Vec<(Option<String>, Vec<String>)> = Vec::new();
    for point in points {
        let (r, (v, _, _)) = (point.run, point.value);
        let line = line_of(&r.run);
        let at = format!("{:.1},{:.1}", x(point.at), frame.y(v));
        match lines.iter_mut().find(|(l, _)| *l == line) {
            Some((_, path)) => path.push(at),
            None => {
                let mut path = Vec::new();
                // A branch starts from its base on the main line.
                if line.is_some()
                    && let Some(base) = r
                        .previous
                        .as_ref()
                        .and_then(|p| points.iter().find(|b| &b.run.run.run_id == p))
                {
                    path.push(format!("{:.1},{:.1}", x(base.at), frame.y(base.value.0)));
                }
                path.push(at);
                lines.push((line, path));
            }
        }
    }
    lines
}

/// A point of variant `name` (drawn in colour `c`): its interval bar, its dot with what it
/// says on hover, and the step it marks.
fn point_mark(
    point: &Point<'_>,
    name: &str,
    c: &str,
    look: &Look<'_>,
    x: &dyn Fn(usize) -> f64,
    frame: &Frame,
) -> String {
    let Point {
        at: i,
        run: r,
        variant: v,
        value: (val, lo, hi),
    } = *point;
    let y = |v: f64| frame.y(v);
    // Steps are marked where they were tested: on the accuracy (or score) chart.
    let mark = v
        .step
        .as_ref()
        .filter(|s| look.marks && s.significant())
        .map(|s| {
            if s.verdict == Verdict::Better {
                "▲"
            } else {
                "▼"
            }
        });
    let mut g = format!(
        "<g class=\"point\" data-run=\"{}\" data-variant=\"{}\" data-value=\"{val}\"{}>",
        esc(&r.run.run_id),
        esc(name),
        mark.map(|m| format!(" data-step=\"{m}\""))
            .unwrap_or_default()
    );
    if let (Some(lo), Some(hi)) = (lo, hi) {
        let _ = write!(
            g,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"{c}\" stroke-width=\"5\" opacity=\"0.3\" stroke-linecap=\"round\"/>",
            x(i),
            y(lo),
            y(hi)
        );
    }
    let _ = write!(
        g,
        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"{}\" stroke=\"{c}\"{}><title>{} · {} · {}{}</title></circle>",
        x(i),
        y(val),
        // A branch's runs are hollow: off the main line.
        if line_of(&r.run).is_some() {
            "white"
        } else {
            c
        },
        if r.run.complete {
            ""
        } else {
            " fill-opacity=\"0.3\""
        },
        esc(name),
        esc(&r.run.run_id),
        esc(&if look.percent() {
            pct(Some(val))
        } else {
            format!("{val:.4}")
        }),
        esc(&line_of(&r.run)
            .map(|b| format!(" · branch {b}"))
            .unwrap_or_default())
    );
    if let Some(m) = mark {
        let _ = write!(
            g,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"{}\">{m}</text>",
            x(i),
            y(val) - 9.0,
            if m == "▲" { "better" } else { "worse" }
        );
    }
    g.push_str("</g>");
    g
}
