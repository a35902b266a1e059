//! The table printed at the end of a run.

use crate::compare::{RunComparison, RunSide};
use crate::table::widest_line;
use crate::text::count;
use crate::{Summary, millis, notes, tables};

/// Where a line is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How wide the terminal is: `$COLUMNS` when set, else the terminal's own width (asked of the
/// terminal: shells do not export `$COLUMNS`) when stdout is one; `None` (no limit) in a log.
pub(crate) fn width() -> Option<usize> {
    width_of(Stream::Stdout)
}

/// [`width`] for a stream: stderr's terminal may differ from stdout's (`run | tee log`).
pub(crate) fn width_of(stream: Stream) -> Option<usize> {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c >= 40)
    {
        return Some(c);
    }
    // Not a terminal, or one that reports no width: no limit.
    columns_of(stream).filter(|&w| w >= 40)
}

/// The terminal's own column count. A terminal may report its columns and 0 rows (`script`,
/// some `docker exec` and `kubectl exec` sessions): the columns are what matters here.
#[cfg(unix)]
fn columns_of(stream: Stream) -> Option<usize> {
    let fd = match stream {
        Stream::Stdout => libc::STDOUT_FILENO,
        Stream::Stderr => libc::STDERR_FILENO,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct passed; `fd` is a descriptor
    // this process has open (a failed call leaves the zeroed struct and returns -1).
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: as above: `size` is a `winsize` the call may write whole.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

#[cfg(not(unix))]
fn columns_of(stream: Stream) -> Option<usize> {
    let term = match stream {
        Stream::Stdout => console::Term::stdout(),
        Stream::Stderr => console::Term::stderr(),
    };
    term.size_checked().map(|(_, columns)| usize::from(columns))
}

/// A line (or lines) as printed on `stream`: control characters shown, never obeyed, and
/// prose wrapped at spaces to the terminal's width (tables are fitted when drawn; a command
/// to paste goes whole on a line of its own).
pub fn shown(stream: Stream, text: &str) -> String {
    let safe = crate::terminal_safe(text);
    match width_of(stream) {
        Some(w) => {
            let mut wrapped = wrap(&safe, Some(w));
            if !text.ends_with('\n') {
                wrapped.pop();
            }
            wrapped
        }
        None => safe.into_owned(),
    }
}

/// Wraps the lines of prose (not table rows) at `width`, at spaces.
pub(crate) fn wrap(text: &str, width: Option<usize>) -> String {
    let Some(w) = width else {
        return text.to_string();
    };
    let mut out = String::new();
    for line in text.lines() {
        let table_row = line.starts_with(['┌', '│', '╞', '├', '└', '╭', '╰']);
        if table_row || line.chars().count() <= w {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        let more = format!("{indent}  ");
        // A command to paste ("resume with: promptgauge run …", up to a `;` or the end) is
        // never broken: the words around it wrap, and it goes whole on a line of its own.
        let (before, command, after) = match line.find(": promptgauge ") {
            Some(at) => {
                let rest = &line[at + 2..];
                let end = rest.find("; ").map_or(rest.len(), |e| e + 1);
                (&line[..=at], Some(&rest[..end]), rest[end..].trim_start())
            }
            None => (line, None, ""),
        };
        let mut current = String::new();
        let words = |text: &str, current: &mut String, out: &mut String| {
            for word in text.split(' ').filter(|w| !w.is_empty()) {
                let len = current.chars().count();
                if len > 0 && len + 1 + word.chars().count() > w {
                    out.push_str(current);
                    out.push('\n');
                    *current = more.clone();
                } else if len > 0 && !current.ends_with(' ') {
                    current.push(' ');
                } else if len == 0 {
                    current.push_str(&indent);
                }
                current.push_str(word);
            }
        };
        words(before, &mut current, &mut out);
        if let Some(command) = command {
            out.push_str(&current);
            out.push('\n');
            out.push_str(&more);
            out.push_str(command);
            out.push('\n');
            current = String::new();
            if !after.is_empty() {
                current = more.clone();
                words(after, &mut current, &mut out);
            }
        }
        if !current.is_empty() {
            out.push_str(&current);
            out.push('\n');
        }
    }
    out
}

/// Renders the summary for a terminal (or a log when not one), fitted to its width.
pub(crate) fn render(s: &Summary) -> String {
    render_at(s, width())
}

/// [`render`] at a given width (`None`: no limit): what `run` prints at the end, for a
/// test to pin.
pub fn render_at(s: &Summary, width: Option<usize>) -> String {
    let mut out = headline(s, width);
    comparisons(&mut out, s, width);
    if let Some(note) = crate::compare::levels_note(&s.comparisons, s.run.confidence) {
        out.push_str(&note);
        out.push('\n');
    }
    if let Some(d) = &s.detectable {
        out.push_str(&d.sentence(s.run.confidence));
        out.push('\n');
    }
    if !s.parts.is_empty() {
        out.push_str(&parts_table(s, width));
        out.push('\n');
    }
    if !s.slices.is_empty() {
        out.push_str(&slice_table(s, width));
        out.push('\n');
    }
    if let Some(judge) = &s.run.judge {
        out.push_str(&judge_table(s, judge, width));
        out.push('\n');
    }
    for r in &s.replicas {
        out.push_str(&format!(
            "replica {}: {} attempts, {} answered, {} failed, latency p50 {} p90 {}\n",
            r.base_url,
            r.attempts,
            r.answered,
            r.failed,
            millis(r.latency_ms.p50),
            millis(r.latency_ms.p90)
        ));
    }
    for note in notes(s) {
        out.push_str(&note);
        out.push('\n');
    }
    if !s.failures.is_empty() {
        out.push_str("Why jobs failed:\n");
        for line in crate::causes::lines(&s.failures) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    wrap(&out, width)
}

/// What `run --quiet` prints: the variants' table and the verdicts (each comparison's
/// sentence; `--until-decided`'s and `--best`'s decision), and on the simulator the line
/// that says so. The gates' lines follow it on standard error.
pub(crate) fn render_quiet_at(s: &Summary, width: Option<usize>) -> String {
    let mut out = format!(
        "{}
",
        tables::variants(s).terminal(width)
    );
    if !s.searched() {
        for c in &s.comparisons {
            out.push_str(&c.sentence);
            out.push('\n');
        }
    }
    if let Some(q) = &s.sequential {
        out.push_str(&crate::figures::sequential::note(q));
        out.push('\n');
    }
    if s.run.provider.simulated {
        out.push_str(super::notes::SIMULATED_NOTE);
        out.push('\n');
    }
    wrap(&out, width)
}

/// What was run where, and the variants' table (and the grid's, in a run of several
/// endpoints).
fn headline(s: &Summary, width: Option<usize>) -> String {
    let table = tables::variants(s).terminal(width);
    if s.is_grid() {
        format!(
            "{}: {}: {}\n{table}\n* baseline\n{}\n",
            s.run.bench,
            s.shape(),
            s.endpoint_list().join("; "),
            tables::grid(s).terminal(width)
        )
    } else {
        format!(
            "{}: {} × {}, {}model {} at {}\n{table}\n* baseline\n",
            s.run.bench,
            count(s.run.cases, "case", "cases"),
            count(s.variants.len(), "variant", "variants"),
            s.run
                .provider
                .endpoint
                .as_ref()
                .map_or_else(String::new, |n| format!("endpoint {n}: ")),
            s.run.provider.model,
            s.run.provider.base_url
        )
    }
}

/// The paired comparisons' tables and their verdicts, on each axis of a grid. Under
/// `--best` the search's answer is the verdict: the tables stay, their sentences go to
/// summary.md and report.html.
fn comparisons(out: &mut String, s: &Summary, width: Option<usize>) {
    if s.searched() {
        let shard = s.run.search_shard.is_some();
        let tables = if s.is_grid() {
            crate::compare::Axis::BOTH
                .iter()
                .filter(|&&axis| s.on_axis(axis).next().is_some())
                .map(|&axis| {
                    format!(
                        "{}\n{}\n",
                        axis.heading(),
                        tables::paired_axis(s, axis).terminal(width)
                    )
                })
                .collect()
        } else if s.comparisons.is_empty() {
            String::new()
        } else {
            format!("{}\n", tables::paired(s).terminal(width))
        };
        out.push_str(&tables);
        if !tables.is_empty() {
            out.push_str(if shard {
                "(a shard of a --best search: `merge` gives the verdict; these comparisons with the baseline are descriptions, each in words in summary.md)\n"
            } else {
                "(--best: the search's answer below is the verdict; these comparisons with the baseline are descriptions, each in words in summary.md)\n"
            });
        }
        return;
    }
    if s.is_grid() {
        for axis in crate::compare::Axis::BOTH {
            if s.on_axis(axis).next().is_none() {
                continue;
            }
            out.push_str(axis.heading());
            out.push('\n');
            out.push_str(&tables::paired_axis(s, axis).terminal(width));
            out.push('\n');
            for c in s.on_axis(axis) {
                out.push_str(&c.sentence);
                out.push('\n');
            }
        }
    } else if !s.comparisons.is_empty() {
        out.push_str(&tables::paired(s).terminal(width));
        out.push('\n');
        for c in &s.comparisons {
            out.push_str(&c.sentence);
            out.push('\n');
        }
    }
}

/// Who judged, what it cost, and (with labels) how it fared against people.
fn judge_table(s: &Summary, judge: &crate::ProviderInfo, width: Option<usize>) -> String {
    format!(
        "judged by {} at {}:\n{}",
        judge.model,
        judge.base_url,
        tables::judge(s).terminal(width)
    )
}

/// Each tag's figures, a column per variant: with intervals when they fit.
fn slice_table(s: &Summary, width: Option<usize>) -> String {
    let full = tables::by_tag_across(s, true).terminal(None);
    match width {
        Some(w) if widest_line(&full) > w => tables::by_tag_across(s, false).terminal(Some(w)),
        _ => full,
    }
}

/// Each named part's figures, compactly: a column per variant (a grid's: per endpoint, a
/// row per variant), marked where a variant is significantly better or worse than the
/// baseline, with intervals when they fit (long names then wrap in their headers).
fn parts_table(s: &Summary, width: Option<usize>) -> String {
    let compact = |with_intervals: bool| {
        if s.is_grid() {
            tables::parts_grid(s, with_intervals)
        } else {
            tables::parts_across(s, with_intervals)
        }
    };
    let with_intervals = compact(true).terminal(None);
    let (table, intervals) = if width.is_none_or(|w| widest_line(&with_intervals) <= w) {
        let conf = (s.run.confidence * 100.0).round();
        (with_intervals, format!("{conf}% intervals"))
    } else {
        (
            compact(false).terminal(width),
            "intervals in summary.md".to_string(),
        )
    };
    let against = if s.is_grid() {
        "the baseline variant at its endpoint (against the baseline endpoint: summary.md)"
            .to_string()
    } else {
        let baseline = s
            .variants
            .first()
            .map_or("the baseline", |v| v.name.as_str());
        format!("{baseline} (paired by case, Holm within each part)")
    };
    let marks = if s.parts.iter().any(|p| !p.comparisons.is_empty()) {
        format!("; ▲/▼ significantly better/worse than {against}")
    } else {
        String::new()
    };
    let measure = match tables::parts_measure(s) {
        (_, true) => "accuracy (mean score where marked so)",
        (measure, false) => measure,
    };
    let mut out =
        format!("Parts (per-part figures of the same answers): {measure}, {intervals}{marks}.\n");
    if let Some(line) = super::notes::parts_sequential(s) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&table);
    out
}

/// Renders `promptgauge compare` for a terminal.
pub fn render_comparison(c: &RunComparison) -> String {
    let side = |label: &str, s: &RunSide| {
        format!(
            "{label}: {} — model {}{} at {} ({})\n",
            s.dir,
            s.model,
            if s.simulated { " (SIMULATED)" } else { "" },
            s.base_url,
            s.started_at
        )
    };
    let mut out = side("A", &c.run_a) + &side("B", &c.run_b);
    let width = width();
    out.push_str(&tables::comparison(c).terminal(width));
    out.push('\n');
    for v in &c.variants {
        out.push_str(&v.comparison.sentence);
        out.push('\n');
    }
    if let Some(note) =
        crate::compare::levels_note(c.variants.iter().map(|v| &v.comparison), c.confidence)
    {
        out.push_str(&note);
        out.push('\n');
    }
    for line in coverage_notes(c) {
        out.push_str(&line);
        out.push('\n');
    }
    wrap(&out, width)
}

/// What the two runs do not share, said out loud.
pub(crate) fn coverage_notes(c: &RunComparison) -> Vec<String> {
    let list = |ids: &[String]| {
        let shown: Vec<&str> = ids.iter().take(10).map(String::as_str).collect();
        let more = if ids.len() > 10 {
            format!(" and {} more", ids.len() - 10)
        } else {
            String::new()
        };
        format!("{}{more}", shown.join(", "))
    };
    let mut notes = Vec::new();
    if !c.cases_only_in_a.is_empty() {
        notes.push(format!(
            "{} cases only in A, not compared: {}",
            c.cases_only_in_a.len(),
            list(&c.cases_only_in_a)
        ));
    }
    if !c.cases_only_in_b.is_empty() {
        notes.push(format!(
            "{} cases only in B, not compared: {}",
            c.cases_only_in_b.len(),
            list(&c.cases_only_in_b)
        ));
    }
    if !c.cases_changed.is_empty() {
        notes.push(format!(
            "WARNING: {} cases have the same id but different content in A and B (variables, expected answer, grader, history or group): they would pair different questions, so they are left out: {}",
            c.cases_changed.len(),
            list(&c.cases_changed)
        ));
    }
    if !c.variants_only_in_a.is_empty() {
        notes.push(format!(
            "variants only in A: {}",
            c.variants_only_in_a.join(", ")
        ));
    }
    if !c.variants_only_in_b.is_empty() {
        notes.push(format!(
            "variants only in B: {}",
            c.variants_only_in_b.join(", ")
        ));
    }
    if c.run_a.simulated || c.run_b.simulated {
        notes.push("A SIMULATED run is part of this comparison.".to_string());
    }
    notes
}

/// `history`: a row per run and variant, with the step from the run before.
pub fn render_history(h: &crate::history::History) -> String {
    let mut levels: Vec<u64> = h.runs.iter().map(|r| r.run.confidence.to_bits()).collect();
    levels.dedup();
    let level = match (levels.len(), h.runs.first()) {
        (1, Some(r)) => format!("{}% intervals", r.run.confidence * 100.0),
        _ => "intervals at each run's own confidence level".to_string(),
    };
    let mut out = format!(
        "{}: {} ({level}; step: the change from the complete run before, paired by case; ▲/▼ significant, Holm across variants)\n",
        h.bench,
        count(h.runs.len(), "run", "runs")
    );
    out.push_str(&tables::history(h, &|_| None).terminal(width()));
    let steps = crate::history::step_sentences(h);
    if steps.is_empty() {
        out.push_str("\nno significant step between consecutive runs");
    } else {
        out.push_str("\nsignificant steps:");
        for s in steps {
            out.push_str("\n  ");
            out.push_str(&s);
        }
    }
    out
}

/// `runs`: one row per stored run, newest last.
pub fn render_runs(runs: &[crate::rows::RunRow]) -> String {
    tables::runs(runs).terminal(width())
}

#[cfg(test)]
mod tests {
    use crate::Summary;

    /// The golden run with parts (tests/golden/parts), its variants renamed by `rename`.
    fn with_parts(rename: impl Fn(&str) -> String) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../../../tests/golden/parts/summary.json"))
                .expect("the golden summary reads");
        for v in &mut s.variants {
            v.name = rename(&v.name);
        }
        for p in &mut s.parts {
            for v in &mut p.variants {
                v.name = rename(&v.name);
            }
            for c in &mut p.comparisons {
                (c.variant, c.against) = (rename(&c.variant), rename(&c.against));
            }
        }
        s
    }

    #[test]
    fn parts_are_a_part_by_variant_table_that_gives_up_intervals_then_columns_to_fit() {
        let s = with_parts(str::to_string);
        let wide = super::render_at(&s, Some(120));
        assert!(wide.contains("95% intervals; ▲/▼ significantly"), "{wide}");
        assert!(wide.contains("│ category              ┆ 96.7% [91.7, 98.7] ┆ 100.0% [96.9, 100.0] ┆ 81.7% [73.8, 87.6] ▼ │"), "{wide}");
        let narrow = super::render_at(&s, Some(80));
        assert!(
            narrow.contains("│ category              ┆ 96.7% ┆ 100.0%  ┆ 81.7% ▼ │"),
            "{narrow}"
        );
        // Names too long for a column each wrap in their headers; the figures stay whole.
        let s = with_parts(|n| format!("{n}-with-a-long-descriptive-name"));
        let long = super::render_at(&s, Some(80));
        assert!(long.contains("intervals in summary.md"), "{long}");
        assert!(long.contains("81.7% ▼"), "{long}");
        assert!(long.lines().all(|l| l.chars().count() <= 80), "{long}");
    }

    #[test]
    fn a_command_inside_prose_goes_whole_on_a_line_of_its_own() {
        let line = "To see how often, label a sample yourself: promptgauge label 'my reports/run-1' --sample 30; the reports then show how far the judge agrees with you.";
        let wrapped = super::wrap(line, Some(40));
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(
            lines.contains(&"  promptgauge label 'my reports/run-1' --sample 30;"),
            "{wrapped}"
        );
        for l in &lines {
            assert!(
                l.chars().count() <= 40 || l.trim_start().starts_with("promptgauge"),
                "{l}"
            );
        }
        assert!(wrapped.contains("the reports then show"), "{wrapped}");
    }
}
