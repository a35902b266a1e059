//! The table printed at the end of a run.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use super::compare::{RunComparison, RunSide};
use super::{Summary, interval, millis, notes, pct, usd};

/// Where a line is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
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
pub(crate) fn shown(stream: Stream, text: &str) -> String {
    let safe = super::terminal_safe(text);
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

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One column of a terminal table.
struct Column {
    header: String,
    cells: Vec<String>,
    right: bool,
    /// 0: always shown; otherwise dropped, highest first, until the table fits.
    drop: u8,
}

impl Column {
    fn new(header: impl Into<String>, right: bool, drop: u8) -> Self {
        Column {
            header: header.into(),
            cells: Vec::new(),
            right,
            drop,
        }
    }
}

/// Adds one row: a cell to each column, in order.
fn push_row(columns: &mut [Column], cells: impl IntoIterator<Item = String>) {
    for (c, cell) in columns.iter_mut().zip(cells) {
        c.cells.push(cell);
    }
}

fn widest_line(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// The table with every cell on one line (`width` `None`), or wrapped to `width`. Without a
/// width the table is laid out at its natural size: comfy-table would otherwise fit it to
/// the terminal it finds on stdout by wrapping cells (`accura|cy`), before a column could
/// be dropped instead.
fn draw(columns: &[Column], width: Option<usize>) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_header(columns.iter().map(|c| c.header.clone()).collect::<Vec<_>>());
    match width {
        Some(w) => {
            t.set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(w.min(u16::MAX as usize) as u16);
        }
        None => {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    let rows = columns.first().map_or(0, |c| c.cells.len());
    for r in 0..rows {
        t.add_row(
            columns
                .iter()
                .map(|c| c.cells[r].clone())
                .collect::<Vec<_>>(),
        );
    }
    for (i, c) in columns.iter().enumerate() {
        if c.right
            && let Some(col) = t.column_mut(i)
        {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
}

/// The table at `width`: columns that hold nothing are left out, then the least useful
/// are dropped until it fits (and a line says which); only then do cells wrap.
fn fit(columns: Vec<Column>, width: Option<usize>) -> String {
    fit_saying(columns, width, "summary.md has every column")
}

/// [`fit`], saying where the columns left out can be read.
fn fit_saying(columns: Vec<Column>, width: Option<usize>, elsewhere: &str) -> String {
    let names: Vec<String> = columns
        .iter()
        .filter(|c| c.cells.iter().any(|x| x != "–" && !x.is_empty()))
        .map(|c| c.header.clone())
        .collect();
    let (table, kept) = fit_columns(columns, width);
    // The columns really left out: those with something to show that the table lost.
    let dropped: Vec<&str> = names
        .iter()
        .filter(|n| !kept.contains(n))
        .map(String::as_str)
        .collect();
    if dropped.is_empty() {
        table
    } else {
        format!(
            "{table}\n(left out to fit {} columns: {}; {elsewhere})",
            width.unwrap_or(0),
            dropped.join(", ")
        )
    }
}

/// The table and the headers of the columns it kept.
fn fit_columns(columns: Vec<Column>, width: Option<usize>) -> (String, Vec<String>) {
    let mut columns: Vec<Column> = columns
        .into_iter()
        .filter(|c| c.drop == 0 || c.cells.iter().any(|x| x != "–" && !x.is_empty()))
        .collect();
    let kept = |columns: &[Column]| columns.iter().map(|c| c.header.clone()).collect();
    loop {
        let text = draw(&columns, None);
        let Some(w) = width else {
            return (text, kept(&columns));
        };
        if widest_line(&text) <= w {
            return (text, kept(&columns));
        }
        // Columns of one rank go together (both "only" counts of a pair, say).
        let Some(rank) = columns.iter().map(|c| c.drop).filter(|&d| d > 0).max() else {
            return (draw(&columns, Some(w)), kept(&columns));
        };
        columns.retain(|c| c.drop != rank);
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

/// [`render`] at a given width (`None`: no limit).
pub(crate) fn render_at(s: &Summary, width: Option<usize>) -> String {
    let conf = (s.run.confidence * 100.0).round();
    let mut cols = vec![
        Column::new("variant", false, 0),
        Column::new(s.measure(), true, 0),
        Column::new(format!("{conf}% CI"), true, 0),
        Column::new(s.count_label(), true, 4),
        Column::new("failed", true, 0),
        Column::new("TTFT p50", true, 7),
        Column::new("latency p50/p90/p99", true, 3),
        Column::new("tok/s", true, 9),
        Column::new("tokens in/out", true, 6),
        Column::new("cost", true, 5),
        Column::new("$/correct", true, 8),
    ];
    for v in &s.variants {
        let est = if v.tokens.estimated { "~" } else { "" };
        let cells = [
            format!("{}{}", v.name, if v.baseline { " *" } else { "" }),
            pct(v.headline().0),
            interval(v.headline().1, v.headline().2),
            format!("{}/{}", v.correct, v.n),
            v.failed.to_string(),
            millis(v.ttft_ms.p50),
            format!(
                "{} / {} / {}",
                millis(v.latency_ms.p50),
                millis(v.latency_ms.p90),
                millis(v.latency_ms.p99)
            ),
            v.output_tokens_per_s
                .map_or_else(|| "–".into(), |x| format!("{x:.0}")),
            format!("{est}{} / {est}{}", v.tokens.prompt, v.tokens.completion),
            usd(v.cost_usd),
            usd(v.cost_per_correct_usd),
        ];
        push_row(&mut cols, cells);
    }
    let table = fit(cols, width);
    let mut out = format!(
        "{}: {} × {}, model {} at {}\n{table}\n* baseline\n",
        s.run.bench,
        plural(s.run.cases, "case", "cases"),
        plural(s.variants.len(), "variant", "variants"),
        s.run.provider.model,
        s.run.provider.base_url
    );
    if !s.comparisons.is_empty() {
        out.push_str(&comparison_table(s, width));
        out.push('\n');
        for c in &s.comparisons {
            out.push_str(&c.sentence);
            out.push('\n');
        }
        if let Some(note) = super::compare::levels_note(&s.comparisons, s.run.confidence) {
            out.push_str(&note);
            out.push('\n');
        }
    }
    if let Some(d) = &s.detectable {
        out.push_str(&d.sentence(s.run.confidence));
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
        for line in super::causes::lines(&s.failures) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    wrap(&out, width)
}

fn comparison_table(s: &Summary, width: Option<usize>) -> String {
    let baseline = s.variants.first().map_or("baseline", |v| v.name.as_str());
    let mut cols = vec![
        Column::new(format!("vs {baseline}"), false, 0),
        Column::new("both right", true, 6),
        Column::new("only variant", true, 4),
        Column::new(format!("only {baseline}"), true, 4),
        Column::new("both wrong", true, 6),
        Column::new("difference", true, 0),
        Column::new(
            super::compare::ci_header(&s.comparisons, s.run.confidence),
            true,
            0,
        ),
        Column::new("p (Holm)", true, 3),
        Column::new("verdict", false, 0),
    ];
    for c in &s.comparisons {
        let mut row = vec![c.variant.clone()];
        row.extend(c.cells());
        push_row(&mut cols, row);
    }
    fit(cols, width)
}

/// Who judged, what it cost, and (with labels) how it fared against people.
fn judge_table(s: &Summary, judge: &super::ProviderInfo, width: Option<usize>) -> String {
    let labelled = s.variants.iter().any(|v| v.labelled.is_some());
    let mut cols = vec![
        Column::new("judged by", false, 0),
        Column::new("calls", true, 0),
        Column::new("tokens in/out", true, 6),
        Column::new("cost", true, 5),
        Column::new("votes agree", true, 4),
    ];
    if labelled {
        cols.extend([
            Column::new("labels", true, 3),
            Column::new("agrees with people", true, 0),
            Column::new("κ", true, 2),
            Column::new(format!("{} as people would score", s.measure()), true, 0),
        ]);
    }
    for v in &s.variants {
        let tokens = v.judge_tokens.unwrap_or_default();
        let mut row = vec![
            format!("{} ← {}", v.name, judge.model),
            v.judge_calls.to_string(),
            format!("{} / {}", tokens.prompt, tokens.completion),
            usd(v.judge_cost_usd),
            pct(v.judge_agreement),
        ];
        if labelled {
            match &v.labelled {
                Some(l) => row.extend([
                    l.labels.to_string(),
                    format!(
                        "{} {}",
                        pct(l.agreement),
                        interval(l.agreement_low, l.agreement_high)
                    ),
                    l.kappa.map_or("–".into(), |k| format!("{k:.2}")),
                    format!(
                        "{} {}",
                        pct(l.corrected),
                        interval(l.corrected_low, l.corrected_high)
                    ),
                ]),
                None => row.extend(["0".to_string(), "–".into(), "–".into(), "–".into()]),
            }
        }
        push_row(&mut cols, row);
    }
    fit(cols, width)
}

fn slice_table(s: &Summary, width: Option<usize>) -> String {
    let chunks: Vec<_> = s.slices.chunks(s.variants.len().max(1)).collect();
    let build = |with_interval: bool| {
        let mut cols = vec![Column::new("tag", false, 0)];
        cols.extend(
            s.variants
                .iter()
                .map(|v| Column::new(v.name.clone(), false, 0)),
        );
        for chunk in &chunks {
            cols[0].cells.push(chunk[0].tag.clone());
            for (i, sl) in chunk.iter().enumerate() {
                let cell = if with_interval {
                    format!(
                        "{} {} n={}",
                        pct(sl.accuracy),
                        interval(sl.ci_low, sl.ci_high),
                        sl.n
                    )
                } else {
                    format!("{} n={}", pct(sl.accuracy), sl.n)
                };
                cols[i + 1].cells.push(cell);
            }
        }
        cols
    };
    let full = fit(build(true), None);
    match width {
        Some(w) if widest_line(&full) > w => fit(build(false), Some(w)),
        _ => full,
    }
}

/// Renders `promptgauge compare` for a terminal.
pub(crate) fn render_comparison(c: &RunComparison) -> String {
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
    let mut cols = vec![
        Column::new("variant", false, 0),
        Column::new("accuracy A", true, 0),
        Column::new("accuracy B", true, 0),
        Column::new("B − A", true, 0),
        Column::new(
            super::compare::ci_header(c.variants.iter().map(|v| &v.comparison), c.confidence),
            true,
            0,
        ),
        Column::new("p (Holm)", true, 3),
        Column::new("verdict", false, 0),
        Column::new("latency p50 A / B", true, 4),
        Column::new("p90 A / B", true, 6),
        Column::new("cost A / B", true, 5),
    ];
    for v in &c.variants {
        let [.., difference, ci, p, verdict] = v.comparison.cells();
        let row = [
            v.name.clone(),
            format!(
                "{} {}",
                pct(v.a.accuracy),
                interval(v.a.ci_low, v.a.ci_high)
            ),
            format!(
                "{} {}",
                pct(v.b.accuracy),
                interval(v.b.ci_low, v.b.ci_high)
            ),
            difference,
            ci,
            p,
            verdict,
            format!(
                "{} / {}",
                millis(v.a.latency_ms.p50),
                millis(v.b.latency_ms.p50)
            ),
            format!(
                "{} / {}",
                millis(v.a.latency_ms.p90),
                millis(v.b.latency_ms.p90)
            ),
            format!("{} / {}", usd(v.a.cost_usd), usd(v.b.cost_usd)),
        ];
        push_row(&mut cols, row);
    }
    let width = width();
    out.push_str(&fit(cols, width));
    out.push('\n');
    for v in &c.variants {
        out.push_str(&v.comparison.sentence);
        out.push('\n');
    }
    if let Some(note) =
        super::compare::levels_note(c.variants.iter().map(|v| &v.comparison), c.confidence)
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
pub(crate) fn render_history(h: &super::history::History) -> String {
    use super::history::{short_time, source_label, step_cell};
    let scored = h.runs.iter().any(|r| r.run.scored);
    let mut columns = vec![
        // The run id holds its start time: `started` goes first when narrow.
        Column::new("started", false, 7),
        Column::new("run", false, 0),
        Column::new("source", false, 3),
        Column::new("model", false, 2),
        Column::new("variant", false, 0),
        Column::new(if scored { "score" } else { "accuracy" }, true, 0),
        Column::new("CI", true, 0),
        Column::new("n", true, 4),
        Column::new("step", true, 0),
        Column::new("cost", true, 5),
        Column::new("p90", true, 6),
    ];
    for r in &h.runs {
        for (k, v) in r.variants.iter().enumerate() {
            let first = k == 0;
            let (x, lo, hi) = v.result.shown();
            let run = if r.run.complete {
                r.run.run_id.clone()
            } else {
                format!("{} (incomplete)", r.run.run_id)
            };
            let cells = [
                if first {
                    short_time(&r.run.started_at)
                } else {
                    String::new()
                },
                if first { run } else { String::new() },
                if first {
                    source_label(&r.run)
                } else {
                    String::new()
                },
                if first {
                    r.run.model.clone()
                } else {
                    String::new()
                },
                v.result.variant.clone(),
                pct(x),
                interval(lo, hi),
                v.result.n.to_string(),
                step_cell(v.step.as_ref()),
                usd(v.result.cost_usd.or(v.result.spent_usd)),
                millis(v.result.latency_p90_ms),
            ];
            push_row(&mut columns, cells);
        }
    }
    let mut levels: Vec<u64> = h.runs.iter().map(|r| r.run.confidence.to_bits()).collect();
    levels.dedup();
    let level = match (levels.len(), h.runs.first()) {
        (1, Some(r)) => format!("{}% intervals", r.run.confidence * 100.0),
        _ => "intervals at each run's own confidence level".to_string(),
    };
    let mut out = format!(
        "{}: {} ({level}; step: the change from the complete run before, paired by case; ▲/▼ significant, Holm across variants)\n",
        h.bench,
        plural(h.runs.len(), "run", "runs")
    );
    out.push_str(&fit_saying(columns, width(), "--json has every column"));
    let steps = super::history::step_sentences(h);
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
pub(crate) fn render_runs(runs: &[super::rows::RunRow]) -> String {
    use super::history::{short_time, source_label};
    let mut columns = vec![
        Column::new("started", false, 8),
        Column::new("run", false, 0),
        Column::new("bench", false, 0),
        Column::new("model", false, 2),
        Column::new("source", false, 3),
        Column::new("kind", false, 4),
        Column::new("status", false, 0),
        Column::new("jobs", true, 5),
        Column::new("cost", true, 6),
        Column::new("folder", false, 7),
    ];
    for r in runs {
        let missing = (r.jobs_planned - r.jobs_finished).max(0);
        let status = if r.complete {
            "complete".to_string()
        } else if let Some(s) = &r.stopped {
            format!("stopped: {s}")
        } else if missing > 0 {
            format!("incomplete: {missing} not run, {} failed", r.jobs_failed)
        } else {
            format!("{} failed", r.jobs_failed)
        };
        let cells = [
            short_time(&r.started_at),
            r.run_id.clone(),
            r.bench.clone(),
            r.model.clone(),
            source_label(r),
            r.kind.to_string(),
            status,
            format!("{}/{}", r.jobs_finished, r.jobs_planned),
            usd(r.cost_usd),
            r.folder.clone(),
        ];
        push_row(&mut columns, cells);
    }
    fit_saying(columns, width(), "--json has every column")
}

#[cfg(test)]
mod tests {
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
