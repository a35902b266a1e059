//! `report.html` and `compare.html`: one self-contained page each (inline CSS, SVG and a few
//! lines of script; a Content-Security-Policy forbids every network request), readable from
//! `file://`.

use std::fmt::Write as _;

pub use super::escape::esc;
use crate::compare::RunComparison;
use crate::result::{RunResult, ShownAnswer};
use crate::{millis, pct, tables};
use promptgauge_stats::percentile;

/// `text` for a URL: each byte but letters, digits, `-._~` and those in `keep`
/// percent-encoded.
pub fn percent_encode(text: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The reports' style: `view` dresses its own pages in it too (docs/guide/view.md).
pub const STYLE: &str = r#"
:root { --fg:#1d2330; --muted:#667085; --line:#d0d5dd; --bg:#fff; --band:#f5f7fa; --good:#12805c; --bad:#c4320a; --accent:#3557c7; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); margin: 0; padding: 24px 32px 64px; max-width: 1200px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 32px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.muted { color: var(--muted); } .why { font-size: 0.85em; margin: 2px 0; } .banner { background: #fff4e5; border: 1px solid #f5b041; padding: 8px 12px; border-radius: 6px; margin: 12px 0; font-weight: 600; }
table { border-collapse: collapse; margin: 8px 0; } th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th:first-child, td:first-child { text-align: left; } th { background: var(--band); font-weight: 600; }
td.text { text-align: left; max-width: 420px; overflow-wrap: anywhere; }
.better { color: var(--good); font-weight: 600; } .worse { color: var(--bad); font-weight: 600; } .not_distinguishable, .no_data { color: var(--muted); }
.ok { color: var(--good); } .no { color: var(--bad); } .fail { color: var(--bad); }
svg text { font: 12px system-ui, sans-serif; fill: var(--fg); } svg .axis { stroke: var(--line); } svg .grid { stroke: #eef0f3; }
input[type=search] { padding: 4px 8px; width: 280px; border: 1px solid var(--line); border-radius: 4px; }
pre { background: var(--band); padding: 8px 12px; overflow-x: auto; font-size: 12px; }
details { margin: 4px 0; } summary { cursor: pointer; }
#answers td { vertical-align: top; } #answers pre { white-space: pre-wrap; max-width: 420px; margin: 4px 0; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
"#;

const SCRIPT: &str = r#"
function filterRows(input, id) {
  const q = input.value.toLowerCase();
  const only = document.getElementById(id + '-disagree');
  let shown = 0;
  for (const row of document.querySelectorAll('#' + id + ' tbody tr')) {
    const hit = row.textContent.toLowerCase().includes(q)
      && (!only || !only.checked || row.classList.contains('disagree'));
    row.style.display = hit ? '' : 'none';
    if (hit) shown++;
  }
  document.getElementById(id + '-count').textContent = shown;
}
// A link can carry a filter: report.html#filter=r-015
document.addEventListener('DOMContentLoaded', () => {
  const m = location.hash.match(/^#filter=(.*)$/);
  const input = document.getElementById('disagreements-filter');
  if (m && input) { input.value = decodeURIComponent(m[1]); filterRows(input, 'disagreements'); }
  // report.html#answers=disagree shows only the cases where the variants disagree.
  const only = document.getElementById('answers-disagree');
  if (location.hash === '#answers=disagree' && only) {
    only.checked = true;
    filterRows(document.getElementById('answers-filter'), 'answers');
  }
});
"#;

pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title><style>{STYLE}</style><script>{SCRIPT}</script></head>\n<body>\n{body}\n</body></html>\n",
        esc(title)
    )
}

/// One colour per variant, the same in every chart (baseline first).
const PALETTE: [&str; 8] = [
    "#3557c7", "#c4320a", "#12805c", "#8e44ad", "#b7791f", "#0e7490", "#be185d", "#4b5563",
];

pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Round tick steps for an axis up to `max`: 1, 2 or 5 times a power of ten, about four of
/// them.
pub(crate) fn nice_step(max: f64) -> f64 {
    let raw = max / 4.0;
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * power)
}

/// One row of the accuracy chart: a label, the accuracy and its interval.
type AccuracyRow = (String, Option<f64>, Option<f64>, Option<f64>);

/// Accuracy of each variant with its interval, on one 0–100% axis.
fn accuracy_chart(rows: &[AccuracyRow], colours_by_pair: bool) -> String {
    let (left, width, row_h) = (170.0, 640.0, 28.0);
    let height = 30.0 + row_h * rows.len() as f64;
    let x = |v: f64| left + v.clamp(0.0, 1.0) * width;
    let mut svg = format!(
        "<svg id=\"accuracy-chart\" role=\"img\" aria-label=\"accuracy with confidence intervals\" width=\"{0}\" height=\"{height}\" viewBox=\"0 0 {0} {height}\">",
        left + width + 70.0
    );
    for tick in 0..=10 {
        let v = tick as f64 / 10.0;
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"4\" y2=\"{1}\"/><text x=\"{0}\" y=\"{2}\" text-anchor=\"middle\">{3}%</text>",
            x(v),
            height - 18.0,
            height - 4.0,
            tick * 10
        );
    }
    for (i, (name, acc, lo, hi)) in rows.iter().enumerate() {
        let y = 16.0 + row_h * i as f64;
        let c = colour(if colours_by_pair { i / 2 } else { i });
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            left - 10.0,
            y + 4.0,
            esc(name)
        );
        if let (Some(a), Some(lo), Some(hi)) = (acc, lo, hi) {
            let _ = write!(
                svg,
                "<g class=\"interval\" data-variant=\"{}\" data-accuracy=\"{a}\" data-low=\"{lo}\" data-high=\"{hi}\">",
                esc(name),
            );
            interval_marks(&mut svg, (x(*lo), x(*a), x(*hi)), y, c);
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{}\">{}</text></g>",
                x(*hi) + 8.0,
                y + 4.0,
                pct(Some(*a))
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// An interval drawn at height `y`: a faint bar from its low end to its high end and a dot
/// at the figure (`x`: the three places on the chart), in `colour`. The accuracy chart and
/// `view`'s runs list draw every interval so.
pub fn interval_marks(svg: &mut String, x: (f64, f64, f64), y: f64, colour: &str) {
    let (lo, at, hi) = x;
    let _ = write!(
        svg,
        "<line x1=\"{lo:.1}\" x2=\"{hi:.1}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"6\" stroke-linecap=\"round\" opacity=\"0.35\"/>\
         <circle cx=\"{at:.1}\" cy=\"{y}\" r=\"5\" fill=\"{colour}\"/>"
    );
}

/// `--best`: where each arm stopped being sent cases — each a bar over the cases (or
/// groups) it was searched on, an arm out grey with who put it out, the answer's arms in
/// their colours — with the answer as the chart's caption.
fn search_chart(b: &promptgauge_runner::sequential::BestSummary, names: &[&str]) -> String {
    let unit = if b.grouped { "groups" } else { "cases" };
    let (left, width, row_h) = (170.0, 560.0, 26.0);
    let end = b.cases.max(1) as f64;
    let height = 34.0 + row_h * names.len() as f64;
    let x = |cases: u64| left + (cases as f64 / end).min(1.0) * width;
    let mut svg = format!(
        "<svg id=\"search-chart\" role=\"img\" aria-label=\"where each arm went out of the search\" width=\"{0}\" height=\"{height}\" viewBox=\"0 0 {0} {height}\">",
        left + width + 230.0
    );
    let step = nice_step(end).max(1.0);
    let mut tick = 0.0;
    while tick <= end {
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"4\" y2=\"{1}\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
            x(tick as u64),
            height - 20.0,
            height - 6.0,
            tick
        );
        tick += step;
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{}\">{unit} searched</text>",
        left + width + 24.0,
        height - 6.0
    );
    for (i, name) in names.iter().enumerate() {
        let y = 16.0 + row_h * i as f64;
        let (state, cases, fill, label) = arm_state(b, name, colour(i));
        let opacity = if state == "in-play" { 0.45 } else { 0.9 };
        let _ = write!(
            svg,
            "<g class=\"arm\" data-arm=\"{0}\" data-state=\"{state}\" data-cases=\"{cases}\">\
             <text x=\"{1}\" y=\"{2}\" text-anchor=\"end\">{0}</text>\
             <rect x=\"{left}\" y=\"{3}\" width=\"{4:.1}\" height=\"14\" fill=\"{fill}\" opacity=\"{opacity}\"/>\
             <text x=\"{5:.1}\" y=\"{2}\">{6}</text></g>",
            esc(name),
            left - 10.0,
            y + 4.0,
            y - 7.0,
            (x(cases) - left).max(1.0),
            x(cases) + 8.0,
            esc(&label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Where arm `name` stands in `--best`'s chart: its state (`out`, `best`, `in-play`), the
/// cases it was searched on, its fill (its `colour`, grey once out) and its label.
fn arm_state(
    b: &promptgauge_runner::sequential::BestSummary,
    name: &str,
    colour: &'static str,
) -> (&'static str, u64, &'static str, String) {
    let unit = if b.grouped { "groups" } else { "cases" };
    if let Some(e) = b.eliminated.iter().find(|e| e.variant == name) {
        let label = format!("out after {} {unit}: below {}", e.cases, e.by);
        return ("out", e.cases, "#9ca3af", label);
    }
    if b.named.iter().any(|n| n == name) {
        if matches!(b.outcome.as_str(), "open" | "one_of") {
            let label = "one of the arms the search could not separate";
            return ("in-play", b.cases, colour, label.to_string());
        }
        let label = if b.named.len() == 1 {
            "the best"
        } else {
            "the best, or within ε of it"
        };
        return ("best", b.cases, colour, label.to_string());
    }
    // Set aside, or still contending: its cases, and where it stood, are those it was sent.
    match b.standing.iter().find(|a| a.variant == name) {
        Some(a) => {
            let side = if a.gap_seen <= 0.0 {
                "behind"
            } else {
                "ahead of"
            };
            let label = format!(
                "{:.1} points {side} {}; not ruled out",
                a.gap_seen.abs(),
                a.against
            );
            ("in-play", a.cases, colour, label)
        }
        None => ("in-play", b.cases, colour, "not ruled out".to_string()),
    }
}

/// A sentence that starts with "the …" (not with a variant's name, which keeps its case)
/// starts with a capital.
fn sentence_case(text: &str) -> String {
    match text.strip_prefix("the ") {
        Some(rest) => format!("The {rest}"),
        None => text.to_string(),
    }
}

/// `--best`: the search's answer and its chart, before the figures.
fn search(b: &mut String, s: &crate::Summary, names: &[&str]) {
    let Some(best) = s.best() else {
        return;
    };
    let _ = write!(
        b,
        "<h2>Best of many</h2><p id=\"search-answer\">{}.</p>",
        esc(&sentence_case(&crate::figures::sequential::best_answer(
            best
        )))
    );
    b.push_str(&search_chart(best, names));
}

/// Box plots (p10–p90 whiskers, quartile box, median) of TTFT and end-to-end latency.
fn latency_chart(series: &[(String, Vec<f64>, Vec<f64>)]) -> String {
    let max = series
        .iter()
        .flat_map(|(_, a, b)| a.iter().chain(b))
        .fold(0.0f64, |m, v| m.max(*v));
    if max <= 0.0 {
        return "<p class=\"muted\">No latency was measured (every answer came from the cache, or none arrived).</p>".into();
    }
    let (left, width, row_h) = (170.0, 560.0, 22.0);
    let height = 34.0 + row_h * 2.0 * series.len() as f64;
    // The axis ends at a round number, ticked at round steps.
    let step = nice_step(max);
    let max = (max / step).ceil() * step;
    let x = |v: f64| left + v / max * width;
    let mut svg = format!(
        "<svg id=\"latency-chart\" role=\"img\" aria-label=\"latency distributions\" width=\"{}\" height=\"{height}\">",
        left + width + 40.0
    );
    for tick in 0..=((max / step).round() as usize) {
        let v = step * tick as f64;
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"4\" y2=\"{1}\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
            x(v),
            height - 18.0,
            height - 4.0,
            millis(Some(v))
        );
    }
    let mut row = 0.0;
    for (i, (name, ttft, e2e)) in series.iter().enumerate() {
        let c = colour(i);
        for (label, values, opacity) in [("TTFT", ttft, "0.45"), ("end to end", e2e, "1")] {
            let y = 14.0 + row_h * row;
            row += 1.0;
            let _ = write!(
                svg,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} · {label}</text>",
                left - 10.0,
                y + 4.0,
                esc(name)
            );
            let mut v = values.clone();
            v.sort_by(f64::total_cmp);
            let q = |p: f64| percentile(&v, p).unwrap_or(0.0);
            if v.is_empty() {
                continue;
            }
            let _ = write!(
                svg,
                "<g class=\"box\" data-variant=\"{}\" data-kind=\"{label}\" data-p50=\"{:.3}\" opacity=\"{opacity}\">\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y}\" y2=\"{y}\" stroke=\"{c}\"/>\
                 <rect x=\"{:.1}\" y=\"{}\" width=\"{:.1}\" height=\"12\" fill=\"{c}\" fill-opacity=\"0.35\" stroke=\"{c}\"/>\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"{c}\" stroke-width=\"2\"/></g>",
                esc(name),
                q(50.0),
                x(q(10.0)),
                x(q(90.0)),
                x(q(25.0)),
                y - 6.0,
                (x(q(75.0)) - x(q(25.0))).max(1.0),
                x(q(50.0)),
                x(q(50.0)),
                y - 6.0,
                y + 6.0
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Every shown case's answers in full: expected, and per variant the mark, what was
/// extracted, the answer, why (a judge's reasons, a violation, an error) and the prompt.
fn answers_section(b: &mut String, result: &RunResult, names: &[&str]) {
    let shown = &result.answers;
    if shown.is_empty() {
        return;
    }
    answers_intro(b, result);
    answers_head(b, names);
    let mut thumbnails = Thumbnails::default();
    for (case, (expected, answers)) in shown {
        let marks: Vec<bool> = answers
            .iter()
            .flatten()
            .filter_map(|a| a.score)
            .map(|s| s >= 1.0)
            .collect();
        let disagree = marks.iter().any(|&m| m) && marks.iter().any(|&m| !m);
        let _ = write!(
            b,
            "<tr data-answers=\"{0}\"{1}><td>{0}</td><td class=\"text\">{2}</td>",
            esc(case),
            if disagree { " class=\"disagree\"" } else { "" },
            esc(&expected.join(" | "))
        );
        for (arm, a) in answers.iter().enumerate() {
            match a {
                Some(a) => answer_cell(
                    b,
                    a,
                    result.prompts.get(&(case.clone(), arm)),
                    &mut thumbnails,
                ),
                None => b.push_str("<td class=\"muted\">–</td>"),
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table>");
}

/// The answers' heading: how many are shown, what is cut, and the filters.
fn answers_intro(b: &mut String, result: &RunResult) {
    let shown = &result.answers;
    let more = if result.answers_total > shown.len() {
        format!(
            " (the first {} of {} cases; the journal has the rest)",
            shown.len(),
            result.answers_total
        )
    } else {
        String::new()
    };
    let cut = if result.prompts_cut + result.prompts_left_out > 0 {
        format!(
            " Answers are cut at {} characters and prompts at {} each; one page holds at most {} of prompts: {} cut, {} left out (the journal has every answer in full, and the bench renders every prompt).",
            crate::result::SHOWN_CHARS,
            promptgauge_suite::error::shown_size(crate::result::SHOWN_PROMPT_BYTES as u64),
            promptgauge_suite::error::shown_size(crate::result::SHOWN_PROMPTS_BUDGET as u64),
            result.prompts_cut,
            result.prompts_left_out
        )
    } else {
        String::new()
    };
    let _ = write!(
        b,
        "<h2>Answers</h2><p class=\"muted\" id=\"answers-limits\">Each variant's answer to each case{more}; open a cell for the full answer, why it scored as it did, and the prompt sent.{cut}</p>\
         <p><input id=\"answers-filter\" type=\"search\" placeholder=\"search cases and answers…\" oninput=\"filterRows(this, 'answers')\"> \
         <label><input id=\"answers-disagree\" type=\"checkbox\" onchange=\"filterRows(document.getElementById('answers-filter'), 'answers')\"> only where the variants disagree</label> \
         <span class=\"muted\"><span id=\"answers-count\">{}</span> shown</span></p>",
        shown.len()
    );
}

/// The answers table's head: a column per variant, the baseline first.
fn answers_head(b: &mut String, names: &[&str]) {
    b.push_str("<table id=\"answers\"><thead><tr><th>case</th><th>expected</th>");
    for (i, n) in names.iter().enumerate() {
        let _ = write!(
            b,
            "<th><span class=\"swatch\" style=\"background:{}\"></span>{}{}</th>",
            colour(i),
            esc(n),
            if i == 0 {
                " <span class=\"muted\">(baseline)</span>"
            } else {
                ""
            }
        );
    }
    b.push_str("</tr></thead><tbody>");
}

/// A score's mark and its class (the colour of its outcome): ✓ passed, ✗ failed, a
/// partial score as a percentage; none: withheld by the provider, or a failed job.
pub fn mark(score: Option<f64>, filtered: bool) -> (&'static str, String) {
    match score {
        Some(s) if s >= 1.0 => ("ok", "✓".to_string()),
        Some(s) if s <= 0.0 => ("no", "✗".to_string()),
        Some(s) => ("", format!("{:.0}%", s * 100.0)),
        None if filtered => ("fail", "withheld".to_string()),
        None => ("fail", "failed".to_string()),
    }
}

/// One variant's answer to a case: its mark and what it extracted, why it scored as it
/// did, and the full answer and prompt inside.
fn answer_cell(
    b: &mut String,
    a: &ShownAnswer,
    prompt: Option<&String>,
    thumbnails: &mut Thumbnails,
) {
    let (class, mark) = mark(a.score, a.filtered);
    let _ = write!(
        b,
        "<td class=\"text\"><span class=\"{class}\">{mark}</span> {}",
        esc(a.extracted.as_deref().unwrap_or(""))
    );
    // What the variant's `extract:` read, beside the mark: the raw answer is inside.
    if let Some(read) = &a.read {
        let _ = write!(
            b,
            "<div class=\"read muted\">read: <code>{}</code></div>",
            esc(&crate::visible(read, 300))
        );
    }
    // Why (a judge's reasons, a violation, an error) beside the answer, readable
    // without opening anything; a long one in full inside.
    if let Some(reason) = &a.reason {
        let _ = write!(
            b,
            "<div class=\"why muted\">{}</div>",
            esc(&crate::visible(reason, 300))
        );
    }
    if !a.files.is_empty() {
        files_line(b, &a.files, thumbnails);
    }
    if a.steps_made > 0 {
        trajectory(b, &a.steps, &a.turns, a.steps_made, false);
    }
    let _ = write!(
        b,
        "<details><summary>{}</summary><pre>{}</pre>",
        if a.read.is_some() {
            "answer as given (before extract:)"
        } else {
            "answer"
        },
        esc(&a.output)
    );
    if let Some(reason) = a.reason.as_ref().filter(|r| r.chars().count() > 300) {
        let _ = write!(b, "<p class=\"muted\">{}</p>", esc(reason));
    }
    if let Some(prompt) = prompt {
        let _ = write!(
            b,
            "<details><summary>prompt</summary><pre>{}</pre></details>",
            esc(prompt)
        );
    }
    b.push_str("</details></td>");
}

/// The largest image shown as a thumbnail (read back into the page as a data URL); a
/// larger one, a document or a clip is named with its size and hash.
const THUMBNAIL_BYTES: u64 = 256 * 1024;

/// An agent loop's requests and calls: each request with what it cost (time, tokens,
/// attempts; taken from the cache or, on a resume, the journal) and under it each call —
/// the tool, its arguments and what it got back (each cut to 300 characters, the first
/// `SHOWN_STEPS` calls), an error marked; `open` shows them unfolded. A record without
/// its requests' figures (written before they were kept) shows its calls alone.
pub fn trajectory(
    b: &mut String,
    steps: &[promptgauge_suite::tools::ToolStep],
    turns: &[promptgauge_runner::job_record::LoopTurn],
    made: usize,
    open: bool,
) {
    let _ = write!(
        b,
        "<details class=\"trajectory\"{}><summary>trajectory ({made} call{}",
        if open { " open" } else { "" },
        if made == 1 { "" } else { "s" }
    );
    if !turns.is_empty() {
        let _ = write!(
            b,
            ", {} request{}",
            turns.len(),
            if turns.len() == 1 { "" } else { "s" }
        );
    }
    b.push_str(")</summary><ol>");
    if turns.is_empty() {
        steps.iter().for_each(|s| call_item(b, s));
    }
    for (i, turn) in turns.iter().enumerate() {
        let _ = write!(b, "<li><span class=\"muted\">{}</span>", turn_figures(turn));
        let calls: Vec<_> = steps.iter().filter(|s| s.turn as usize == i).collect();
        if !calls.is_empty() {
            b.push_str("<ul>");
            calls.into_iter().for_each(|s| call_item(b, s));
            b.push_str("</ul>");
        }
        b.push_str("</li>");
    }
    if made > steps.len() {
        let _ = write!(
            b,
            "<li class=\"muted\">… {} more calls, in results.jsonl</li>",
            made - steps.len()
        );
    }
    b.push_str("</ol></details>");
}

/// One tool call as a list item: `tool(arguments) → result`.
fn call_item(b: &mut String, s: &promptgauge_suite::tools::ToolStep) {
    let _ = write!(
        b,
        "<li><code>{}({})</code> → {}{}</li>",
        esc(&crate::visible(&s.tool, 64)),
        esc(&crate::visible(&s.arguments, 300)),
        if s.error {
            "<span class=\"fail\">error</span> "
        } else {
            ""
        },
        esc(&crate::visible(&s.result, 300))
    );
}

/// One request's figures: `812 ms · 120 → 30 tokens · 2 attempts · resumed`.
pub(crate) fn turn_figures(t: &promptgauge_runner::job_record::LoopTurn) -> String {
    let mut parts = Vec::new();
    if let Some(ms) = t.answer_ms {
        parts.push(format!("{ms:.0} ms"));
    }
    if let Some(u) = t.usage {
        parts.push(format!(
            "{} → {} tokens{}",
            u.prompt_tokens,
            u.completion_tokens,
            if u.estimated { " (estimated)" } else { "" }
        ));
    }
    parts.push(format!(
        "{} attempt{}",
        t.attempts,
        if t.attempts == 1 { "" } else { "s" }
    ));
    if t.cached {
        parts.push("from the cache".into());
    }
    if t.resumed {
        parts.push("resumed from the journal".into());
    }
    parts.join(" · ")
}

/// The thumbnails a page holds: each image once, however many answers show it (a class
/// whose background is its data URL), and at most [`PAGE_IMAGE_BYTES`] of them in all.
#[derive(Debug, Default)]
pub struct Thumbnails {
    embedded: std::collections::HashSet<String>,
    bytes: u64,
}

/// The most image bytes one page embeds; later images are named, not shown.
const PAGE_IMAGE_BYTES: u64 = 8 * 1024 * 1024;

/// The files a request carried: images as thumbnails (a data URL of the type their bytes
/// are, never SVG nor HTML; each image's bytes once a page), the others by name, size and
/// hash.
pub fn files_line(
    b: &mut String,
    files: &[promptgauge_runner::job_record::FileNote],
    shown: &mut Thumbnails,
) {
    use promptgauge_client::attachment::FileFamily;
    b.push_str("<div class=\"files\">");
    for f in files {
        // The journal's reader checked the hash; a record from elsewhere shows none.
        let sha256 = f
            .sha256
            .as_deref()
            .filter(|h| promptgauge_runner::job_record::is_sha256(h));
        let hash = sha256.map_or(String::new(), |h| format!(", sha256 {}…", &h[..12]));
        let title = format!("{} ({}, {} bytes{hash})", f.origin, f.kind.said(), f.bytes);
        let key = sha256.map(|h| h[..16].to_string());
        let image = f.kind.family() == FileFamily::Image;
        let known = key.as_ref().is_some_and(|k| shown.embedded.contains(k));
        if image
            && !known
            && shown.bytes + f.bytes <= PAGE_IMAGE_BYTES
            && let (Some(bytes), Some(k)) = (f.bytes_again(THUMBNAIL_BYTES), &key)
        {
            // The thumbnails' own rule comes with the first: a page without files is
            // unchanged.
            let rule = if shown.embedded.is_empty() {
                ".thumb{display:inline-block;width:96px;height:96px;margin:2px;background:center/contain no-repeat}"
            } else {
                ""
            };
            shown.bytes += bytes.len() as u64;
            shown.embedded.insert(k.clone());
            let _ = write!(
                b,
                "<style>{rule}.f-{k}{{background-image:url(\"data:{};base64,{}\")}}</style>",
                f.kind.media_type(),
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)
            );
        }
        match key.filter(|k| image && shown.embedded.contains(k)) {
            Some(k) => {
                let _ = write!(
                    b,
                    "<span class=\"thumb f-{k}\" role=\"img\" aria-label=\"{}\" title=\"{}\"></span>",
                    esc(&crate::visible(&f.name, 200)),
                    esc(&title)
                );
            }
            None => {
                let _ = write!(b, "<span class=\"file muted\">{}</span> ", esc(&title));
            }
        }
    }
    b.push_str("</div>");
}

/// `report.html`, from the run's figures and its bench as written.
pub(super) struct ReportHtml;

impl super::output::Output for ReportHtml {
    fn destination(&self) -> super::output::Destination {
        super::output::Destination::Folder(promptgauge_runner::RunDir::report_html)
    }

    fn render<'r>(
        &self,
        run: &'r mut super::output::RunReport<'_>,
    ) -> Result<Option<super::output::Body<'r>>, crate::ReportError> {
        let page = render_run(run.result, run.bench_text);
        Ok(Some(super::output::Body::Text(page)))
    }
}

/// `report.html` for a run, from its aggregated result; `bench_text` is the bench file
/// as written, shown under Settings.
pub fn render_run(result: &RunResult, bench_text: &str) -> String {
    let s = &result.summary;
    let names: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();

    let conf = (s.run.confidence * 100.0).round();
    let mut b = String::new();
    header(&mut b, s, &names);

    search(&mut b, s, &names);

    figures(&mut b, s, conf, &names);

    latency(&mut b, s, result, &names);

    tokens_and_cost(&mut b, s);

    disagreements(&mut b, result, &names);

    answers_section(&mut b, result, &names);

    failed_jobs(&mut b, result);

    let kind = |p: &crate::ProviderInfo| if p.simulated { "SIMULATED" } else { "real" };
    let endpoints = if s.is_grid() {
        s.run
            .endpoints
            .iter()
            .map(|e| {
                format!(
                    "endpoint {} at {} ({})",
                    e.endpoint.as_deref().unwrap_or("?"),
                    e.base_url,
                    kind(e)
                )
            })
            .collect::<Vec<_>>()
            .join(" · ")
    } else {
        format!(
            "endpoint {} ({})",
            s.run.provider.base_url,
            kind(&s.run.provider)
        )
    };
    let _ = write!(
        b,
        "<h2>Settings</h2><p class=\"muted\">promptgauge {} · run {} · {}</p><pre>{}</pre>",
        esc(&s.run.tool_version),
        esc(&s.run.run_id),
        esc(&endpoints),
        esc(bench_text)
    );
    page(&format!("promptgauge: {}", s.run.bench), &b)
}

/// The title, the notes, why jobs failed, and the headline.
fn header(b: &mut String, s: &crate::Summary, names: &[&str]) {
    if s.is_grid() {
        let _ = write!(
            b,
            "<h1>promptgauge: {}</h1><p class=\"muted\">{} · {} · {} to {} · promptgauge {}</p>",
            esc(&s.run.bench),
            esc(&s.shape()),
            esc(&s.endpoint_list().join("; ")),
            esc(&s.run.started_at),
            esc(s.run.finished_at.as_deref().unwrap_or("unfinished")),
            esc(&s.run.tool_version)
        );
    } else {
        header_line(b, s);
    }
    header_rest(b, s, names);
}

/// The line under a one-endpoint run's title.
fn header_line(b: &mut String, s: &crate::Summary) {
    let _ = write!(
        b,
        "<h1>promptgauge: {}</h1><p class=\"muted\">{} cases × {} variants · model <b>{}</b> at {} · {} to {} · promptgauge {}</p>",
        esc(&s.run.bench),
        s.run.cases,
        s.variants.len(),
        esc(&s.run.provider.model),
        esc(&s.run.provider.base_url),
        esc(&s.run.started_at),
        esc(s.run.finished_at.as_deref().unwrap_or("unfinished")),
        esc(&s.run.tool_version)
    );
}

/// The notes, why jobs failed, and the headline.
fn header_rest(b: &mut String, s: &crate::Summary, names: &[&str]) {
    for note in crate::notes(s) {
        let _ = write!(b, "<div class=\"banner\">{}</div>", esc(&note));
    }
    if !s.failures.is_empty() {
        b.push_str("<h2>Why jobs failed</h2><ul id=\"causes\">");
        for line in crate::causes::lines(&s.failures) {
            let _ = write!(b, "<li>{}</li>", esc(&line.replace("\n    → ", " — ")));
        }
        b.push_str("</ul>");
    }
    if let Some(search) = s.best() {
        // The search's answer is the verdict; the pairwise lines are descriptions.
        let _ = write!(
            b,
            "<p id=\"headline\"><b>{}.</b></p>",
            esc(&sentence_case(&crate::figures::sequential::best_answer(
                search
            )))
        );
    } else if s.is_grid() && s.comparisons.iter().any(|c| c.cases > 0) {
        // A grid answers two questions: each gets its line, every cell placed.
        b.push_str("<p id=\"headline\">");
        for line in grid_headline(s) {
            let _ = write!(b, "<b>{}</b><br>", esc(&line));
        }
        b.push_str("</p>");
    } else if let Some(best) = s
        .comparisons
        .iter()
        .find(|c| c.verdict == crate::compare::Verdict::Better)
    {
        let _ = write!(b, "<p id=\"headline\"><b>{}</b></p>", esc(&best.sentence));
    } else if s.comparisons.iter().any(|c| c.cases > 0) {
        let _ = write!(
            b,
            "<p id=\"headline\"><b>No variant is distinguishably better than {} on these cases.</b></p>",
            esc(names.first().copied().unwrap_or("the baseline"))
        );
    } else if !s.comparisons.is_empty() {
        b.push_str("<p id=\"headline\"><b>Nothing was compared: no case was graded for both the baseline and a variant.</b></p>");
    }
}

/// A grid's headline, one line per axis: which cells are better, worse and not
/// distinguishable from what they are compared with on it.
fn grid_headline(s: &crate::Summary) -> Vec<String> {
    use crate::compare::{Axis, Verdict};
    let mut lines = Vec::new();
    for axis in Axis::BOTH {
        let (question, against) = match axis {
            Axis::Variants => ("Which prompt", "the baseline variant at its endpoint"),
            Axis::Endpoints => ("Which model", "the baseline endpoint with its variant"),
        };
        let cells = |v: Verdict| -> Vec<String> {
            s.on_axis(axis)
                .filter(|c| c.verdict == v)
                .map(|c| format!("{} (against {})", c.variant, c.against))
                .collect()
        };
        let (better, worse, neither): (Vec<_>, Vec<_>, Vec<_>) = (
            cells(Verdict::Better),
            cells(Verdict::Worse),
            s.on_axis(axis)
                .filter(|c| !matches!(c.verdict, Verdict::Better | Verdict::Worse))
                .map(|c| c.variant.clone())
                .collect(),
        );
        if better.is_empty() && worse.is_empty() && neither.is_empty() {
            continue;
        }
        let mut parts = Vec::new();
        let list = |x: &[String]| x.join(", ");
        if !better.is_empty() {
            parts.push(format!("better than {against}: {}", list(&better)));
        }
        if !worse.is_empty() {
            parts.push(format!("worse than {against}: {}", list(&worse)));
        }
        if !neither.is_empty() {
            parts.push(format!("not distinguishable from it: {}", list(&neither)));
        }
        if better.is_empty() {
            parts.insert(
                0,
                format!("no cell is distinguishably better than {against}"),
            );
        }
        lines.push(format!("{question}: {}.", parts.join("; ")));
    }
    lines
}

/// Each variant's headline figure with its interval, and the comparisons.
fn figures(b: &mut String, s: &crate::Summary, conf: f64, names: &[&str]) {
    let title = if s.is_scored() {
        "Mean score"
    } else {
        "Accuracy"
    };
    let _ = write!(b, "<h2>{title} ({conf}% intervals)</h2>");
    let rows: Vec<_> = s
        .variants
        .iter()
        .map(|v| {
            let (m, lo, hi) = v.headline();
            (v.name.clone(), m, lo, hi)
        })
        .collect();
    b.push_str(&accuracy_chart(&rows, false));
    if s.is_grid() {
        let _ = write!(
            b,
            "<h2>Variants × endpoints</h2><p class=\"muted\">{}.</p>",
            esc(&s.endpoint_list().join("; "))
        );
        b.push_str(&tables::grid(s).html());
    }
    b.push_str(&tables::variants(s).html());
    if let Some(judge) = &s.run.judge {
        let _ = write!(
            b,
            "<h2>Judge</h2><p class=\"muted\">Judged by <b>{}</b> at {}.</p>",
            esc(&judge.model),
            esc(&judge.base_url)
        );
        b.push_str(&tables::judge(s).html());
    }

    comparisons(b, s, names);
    parts(b, s);
}

/// Each named part's figures per variant and its verdicts against the baseline.
fn parts(b: &mut String, s: &crate::Summary) {
    if s.parts.is_empty() {
        return;
    }
    let _ = write!(
        b,
        "<section id=\"parts\"><h2>Parts</h2><p class=\"muted\">{}",
        esc(&super::notes::parts_intro(s))
    );
    if let Some(line) = super::notes::parts_sequential(s) {
        let _ = write!(b, " {}", esc(&line));
    }
    b.push_str("</p>");
    b.push_str(&tables::parts(s).html());
    let comparisons = s.parts.iter().flat_map(|p| &p.comparisons);
    if let Some(note) = crate::compare::levels_note(comparisons, s.run.confidence) {
        let _ = write!(b, "<p class=\"muted\">{}</p>", esc(&note));
    }
    b.push_str("</section>");
}

/// The verdicts (each variant against the baseline; a grid's per axis), the levels and what
/// the bench could detect.
fn comparisons(b: &mut String, s: &crate::Summary, names: &[&str]) {
    if s.comparisons.is_empty() {
        return;
    }
    if s.is_grid() {
        for axis in crate::compare::Axis::BOTH {
            if s.on_axis(axis).next().is_some() {
                verdicts(
                    b,
                    axis.heading(),
                    &tables::paired_axis(s, axis),
                    s.on_axis(axis),
                );
            }
        }
    } else {
        let base = names.first().copied().unwrap_or("baseline");
        verdicts(
            b,
            &format!("Paired against {base} (case by case)"),
            &tables::paired(s),
            s.comparisons.iter(),
        );
    }
    if let Some(note) = crate::compare::levels_note(&s.comparisons, s.run.confidence) {
        let _ = write!(b, "<p class=\"muted\">{}</p>", esc(&note));
    }
    if let Some(d) = &s.detectable {
        let _ = write!(
            b,
            "<p class=\"muted\">{}</p>",
            esc(&d.sentence(s.run.confidence))
        );
    }
}

/// One table of verdicts under its heading, and their sentences.
fn verdicts<'a>(
    b: &mut String,
    heading: &str,
    table: &crate::table::Table,
    comparisons: impl Iterator<Item = &'a crate::compare::Comparison>,
) {
    let _ = write!(b, "<h2>{}</h2>", esc(heading));
    b.push_str(&table.html());
    b.push_str("<ul>");
    for c in comparisons {
        let _ = write!(b, "<li>{}</li>", esc(&c.sentence));
    }
    b.push_str("</ul>");
}

/// Latency: the chart and the table.
fn latency(b: &mut String, s: &crate::Summary, result: &RunResult, names: &[&str]) {
    b.push_str("<h2>Latency</h2><p class=\"muted\">From the request being sent; box: quartiles, line: median, whiskers: 10th to 90th percentile.</p>");
    let series: Vec<_> = names
        .iter()
        .zip(&result.latencies)
        .map(|(n, l)| (n.to_string(), l.ttft_ms.clone(), l.latency_ms.clone()))
        .collect();
    b.push_str(&latency_chart(&series));
    b.push_str(&tables::latency(s).html());
}

/// Tokens and what they cost.
fn tokens_and_cost(b: &mut String, s: &crate::Summary) {
    b.push_str("<h2>Tokens and cost</h2>");
    b.push_str(&tables::tokens_and_cost(s).html());
}

/// The cases where the variants' scores differ.
fn disagreements(b: &mut String, result: &RunResult, names: &[&str]) {
    let disagree: Vec<_> = result.disagreements.iter().collect();
    let _ = write!(
        b,
        "<h2>Cases where the variants disagree</h2><p><input id=\"disagreements-filter\" type=\"search\" placeholder=\"filter: case, answer…\" oninput=\"filterRows(this, 'disagreements')\"> <span class=\"muted\"><span id=\"disagreements-count\">{}</span> shown</span></p>",
        disagree.len()
    );
    b.push_str("<table id=\"disagreements\"><thead><tr><th>case</th><th>expected</th>");
    for n in names {
        let _ = write!(b, "<th>{}</th>", esc(n));
    }
    b.push_str("</tr></thead><tbody>");
    for (case, (expected, got)) in &disagree {
        let _ = write!(
            b,
            "<tr data-case=\"{}\"><td>{}</td><td class=\"text\">{}</td>",
            esc(case),
            esc(case),
            esc(&expected.join(" | "))
        );
        for g in got {
            match g {
                Some((x, score)) => {
                    // Full marks ✓, none ✗, partial credit its score.
                    let (class, mark) = if *score >= 1.0 {
                        ("ok", "✓".to_string())
                    } else if *score <= 0.0 {
                        ("no", "✗".to_string())
                    } else {
                        ("part", format!("{score:.2}"))
                    };
                    let _ = write!(b, "<td class=\"text {class}\">{mark} {}</td>", esc(x));
                }
                None => b.push_str("<td class=\"muted\">–</td>"),
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table>");
}

/// The failed jobs shown, each with its attempts.
fn failed_jobs(b: &mut String, result: &RunResult) {
    let failed = &result.failed;
    let _ = write!(b, "<h2>Failed jobs ({})</h2>", result.failed_total);
    if failed.is_empty() {
        b.push_str("<p class=\"muted\">None.</p>");
    }
    b.push_str("<div id=\"failed\">");
    for r in failed {
        let _ = write!(
            b,
            "<details class=\"failed-job\"><summary><b>{}</b> · {} · <span class=\"fail\">{}</span></summary><table><thead><tr><th>#</th><th>outcome</th><th>status</th><th>latency</th><th>wait</th><th>error</th></tr></thead><tbody>",
            esc(&r.case_id),
            esc(&r.arm()),
            esc(r.error.as_deref().unwrap_or("no answer"))
        );
        for (i, a) in r.attempts.iter().enumerate() {
            let outcome = serde_json::to_value(a.outcome)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td></tr>",
                i + 1,
                outcome,
                a.status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "–".into()),
                millis(Some(a.latency_ms)),
                millis(a.wait_ms),
                esc(a.error.as_deref().unwrap_or(""))
            );
        }
        b.push_str("</tbody></table></details>");
    }
    b.push_str("</div>");
}

/// `compare.html` for two runs.
pub fn render_compare(c: &RunComparison) -> String {
    let conf = (c.confidence * 100.0).round();
    let mut b = format!(
        "<h1>promptgauge compare</h1><p class=\"muted\"><b>A</b>: {} · model {} at {}<br><b>B</b>: {} · model {} at {}</p>",
        esc(&c.run_a.dir),
        esc(&c.run_a.model),
        esc(&c.run_a.base_url),
        esc(&c.run_b.dir),
        esc(&c.run_b.model),
        esc(&c.run_b.base_url)
    );
    for note in crate::terminal::coverage_notes(c) {
        let _ = write!(b, "<div class=\"banner\">{}</div>", esc(&note));
    }
    let mut rows = Vec::new();
    let mut scored = false;
    for v in &c.variants {
        scored |= v.a.mean_score.is_some() || v.b.mean_score.is_some();
        let ((a, a_lo, a_hi), (b_, b_lo, b_hi)) = (v.a.headline(), v.b.headline());
        rows.push((format!("{} · A", v.name), a, a_lo, a_hi));
        rows.push((format!("{} · B", v.name), b_, b_lo, b_hi));
    }
    // Partial scores: the chart is of mean scores.
    let measure = if scored { "Mean score" } else { "Accuracy" };
    let _ = write!(b, "<h2>{measure} ({conf}% intervals)</h2>");
    b.push_str(&accuracy_chart(&rows, true));
    b.push_str(&tables::comparison(c).html());
    b.push_str("<ul>");
    for v in &c.variants {
        let _ = write!(b, "<li>{}</li>", esc(&v.comparison.sentence));
    }
    b.push_str("</ul>");
    if let Some(note) =
        crate::compare::levels_note(c.variants.iter().map(|v| &v.comparison), c.confidence)
    {
        let _ = write!(b, "<p class=\"muted\">{}</p>", esc(&note));
    }

    compare_latency(&mut b, c);

    compare_cost(&mut b, c);

    compare_answers(&mut b, c);

    page("promptgauge compare", &b)
}

/// Latency side by side: TTFT and end to end of each variant in A and in B.
fn compare_latency(b: &mut String, c: &RunComparison) {
    // Latency side by side: TTFT and end to end of each variant in A and in B.
    b.push_str("<h2>Latency</h2>");
    b.push_str(&tables::compare_latency(c).html());
    let series: Vec<(String, Vec<f64>, Vec<f64>)> = c
        .latencies
        .iter()
        .map(|(name, a, bb)| (format!("{name} · A | B"), a.clone(), bb.clone()))
        .collect();
    if !series.is_empty() {
        b.push_str("<p class=\"muted\">Each variant: A faint, B solid (end to end).</p>");
        b.push_str(&latency_chart(&series));
    }
}

/// Tokens and cost, A beside B.
fn compare_cost(b: &mut String, c: &RunComparison) {
    // Tokens and cost.
    b.push_str("<h2>Tokens and cost</h2>");
    b.push_str(&tables::compare_cost(c).html());
}

/// Same answers or not, and the cases that flipped.
fn compare_answers(b: &mut String, c: &RunComparison) {
    // Same answers or not, and the cases that flipped.
    b.push_str("<h2>Answers</h2>");
    b.push_str(&tables::compare_outputs(c).html());
    let flips: usize = c.variants.iter().map(|v| v.flipped.len()).sum();
    let _ = write!(
        b,
        "<h3>Cases that flipped ({flips})</h3><p><input id=\"flipped-filter\" type=\"search\" placeholder=\"search cases and answers…\" oninput=\"filterRows(this, 'flipped')\"> <span class=\"muted\"><span id=\"flipped-count\">{flips}</span> shown</span></p>"
    );
    b.push_str("<table id=\"flipped\"><thead><tr><th>variant</th><th>case</th><th>expected</th><th>in B</th><th>answer in A</th><th>answer in B</th></tr></thead><tbody>");
    for v in &c.variants {
        for f in &v.flipped {
            let _ = write!(
                b,
                "<tr data-flip=\"{}\"><td>{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"{}\">{}</td><td class=\"text\"><pre>{}</pre></td><td class=\"text\"><pre>{}</pre></td></tr>",
                esc(&f.case),
                esc(&v.name),
                esc(&f.case),
                esc(&f.expected.join(" | ")),
                if f.direction == "fixed" { "ok" } else { "no" },
                if f.direction == "fixed" {
                    "fixed"
                } else {
                    "broken"
                },
                esc(&f.a),
                esc(&f.b)
            );
        }
    }
    b.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    /// A hash that is no SHA-256 (a record from elsewhere) is left out, never sliced.
    #[test]
    fn a_file_whose_hash_is_not_hex_is_shown_without_it() {
        let mut b = String::new();
        let note = promptgauge_runner::job_record::FileNote {
            name: "r".into(),
            origin: "r.png".into(),
            kind: promptgauge_client::attachment::Kind::Png,
            bytes: 10,
            sha256: Some("éééééééé\"}</style>".into()),
            path: None,
        };
        files_line(&mut b, &[note], &mut Thumbnails::default());
        assert!(
            b.contains("r.png") && !b.contains("sha256") && !b.contains("</style>"),
            "{b}"
        );
    }

    #[test]
    fn pages_forbid_the_network() {
        let p = page("t", "<p>x</p>");
        assert!(p.contains("default-src 'none'"));
        assert!(!p.contains("http://") && !p.contains("https://"));
    }
}
