//! One table model, drawn in four syntaxes (hyperfine's markup exporter). A table is built
//! once from the figures — its columns, its rows, which cells are text someone else wrote —
//! and the terminal, Markdown, HTML and CSV only draw it: what differs between them is
//! syntax (escaping, alignment marks, how the baseline is marked, a narrow terminal's
//! shorter header), never which numbers a row holds.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table as Drawn};

use super::escape::{esc, md_text};

/// Where a table is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Terminal,
    Markdown,
    Html,
    Csv,
}

/// One column: its header, alignment, and how readily a narrow terminal gives it up.
pub(crate) struct Column {
    header: String,
    /// A header that reads differently in one syntax (a terminal's `tokens in/out`).
    renamed: Vec<(Syntax, String)>,
    right: bool,
    /// 0: always shown; otherwise dropped on a narrow terminal, highest first, until the
    /// table fits (a column holding nothing is left out first).
    drop: u8,
    /// Syntaxes that leave the column out (report.html shows latency and cost in tables
    /// of their own beside their charts).
    not_in: Vec<Syntax>,
}

impl Column {
    /// A column of text, aligned left.
    pub(crate) fn left(header: impl Into<String>) -> Self {
        Column {
            header: header.into(),
            renamed: Vec::new(),
            right: false,
            drop: 0,
            not_in: Vec::new(),
        }
    }

    /// A column of figures, aligned right.
    pub(crate) fn right(header: impl Into<String>) -> Self {
        Column {
            right: true,
            ..Column::left(header)
        }
    }

    /// Dropped on a narrow terminal at this rank (higher goes first; one rank goes together).
    pub(crate) fn drop(mut self, rank: u8) -> Self {
        self.drop = rank;
        self
    }

    /// Headed differently in `syntax`.
    pub(crate) fn called(mut self, syntax: Syntax, header: impl Into<String>) -> Self {
        self.renamed.push((syntax, header.into()));
        self
    }

    /// Left out of `syntax`.
    pub(crate) fn not_in(mut self, syntax: Syntax) -> Self {
        self.not_in.push(syntax);
        self
    }

    /// Shown only in `syntax`.
    pub(crate) fn only_in(mut self, syntax: Syntax) -> Self {
        self.not_in = [
            Syntax::Terminal,
            Syntax::Markdown,
            Syntax::Html,
            Syntax::Csv,
        ]
        .into_iter()
        .filter(|&s| s != syntax)
        .collect();
        self
    }

    fn header_in(&self, syntax: Syntax) -> &str {
        self.renamed
            .iter()
            .find(|(s, _)| *s == syntax)
            .map_or(&self.header, |(_, h)| h)
    }

    fn shown_in(&self, syntax: Syntax) -> bool {
        !self.not_in.contains(&syntax)
    }
}

/// One cell.
#[derive(Default)]
pub(crate) struct Cell {
    text: String,
    /// Written by a user, a server or a model (a variant's name, a tag): escaped in
    /// Markdown. Figures promptgauge writes itself are drawn as they are.
    written: bool,
    /// Emphasised: bold in Markdown (a verdict).
    strong: bool,
    /// An HTML class (a verdict's colour, `text` for a left-aligned cell in HTML).
    class: Option<String>,
    /// An HTML data attribute carrying the exact value (`data-accuracy="0.875"`).
    data: Option<(&'static str, String)>,
    /// A link in HTML (a run's report); plain text elsewhere.
    link: Option<String>,
    /// A remark after the text: ` (incomplete)`, muted in HTML.
    aside: Option<String>,
}

impl Cell {
    /// A figure promptgauge wrote: drawn as it is in every syntax but HTML's escaping.
    pub(crate) fn figure(text: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            ..Cell::default()
        }
    }

    /// Text someone else wrote (a name, a tag, a model): escaped in Markdown too.
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Cell {
            written: true,
            ..Cell::figure(text)
        }
    }

    pub(crate) fn strong(mut self) -> Self {
        self.strong = true;
        self
    }

    pub(crate) fn class(mut self, class: impl Into<String>) -> Self {
        self.class = Some(class.into());
        self
    }

    pub(crate) fn data(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.data = Some((name, value.into()));
        self
    }

    pub(crate) fn link(mut self, href: Option<String>) -> Self {
        self.link = href;
        self
    }

    pub(crate) fn aside(mut self, aside: Option<&str>) -> Self {
        self.aside = aside.map(String::from);
        self
    }

    /// The cell as plain text: the terminal's and CSV's.
    fn plain(&self) -> String {
        match &self.aside {
            Some(a) => format!("{} ({a})", self.text),
            None => self.text.clone(),
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell::figure(text)
    }
}

/// One row: its cells in column order, the key HTML tags it with, and whether it is the
/// baseline (marked ` *` on a terminal, ` (baseline)` elsewhere).
pub(crate) struct Row {
    cells: Vec<Cell>,
    data: Vec<(&'static str, String)>,
    baseline: bool,
}

impl Row {
    pub(crate) fn new(cells: impl IntoIterator<Item = Cell>) -> Self {
        Row {
            cells: cells.into_iter().collect(),
            data: Vec::new(),
            baseline: false,
        }
    }

    /// Tags the row in HTML (`data-variant="plain"`), for scripts and tests to find it.
    pub(crate) fn data(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.data.push((name, value.into()));
        self
    }

    pub(crate) fn baseline(mut self, baseline: bool) -> Self {
        self.baseline = baseline;
        self
    }
}

/// A table: columns and rows, drawn by [`Table::terminal`], [`Table::markdown`],
/// [`Table::html`] or [`Table::csv`].
pub(crate) struct Table {
    id: &'static str,
    columns: Vec<Column>,
    rows: Vec<Row>,
    /// Where a terminal that left columns out says they can be read.
    elsewhere: &'static str,
}

impl Table {
    /// A table with these columns; `id` names it in HTML.
    pub(crate) fn new(id: &'static str, columns: Vec<Column>) -> Self {
        Table {
            id,
            columns,
            rows: Vec::new(),
            elsewhere: "summary.md has every column",
        }
    }

    /// Says where the columns a narrow terminal leaves out can be read.
    pub(crate) fn elsewhere(mut self, elsewhere: &'static str) -> Self {
        self.elsewhere = elsewhere;
        self
    }

    pub(crate) fn push(&mut self, row: Row) {
        debug_assert_eq!(row.cells.len(), self.columns.len(), "table {}", self.id);
        self.rows.push(row);
    }

    /// The columns (with their index) shown in `syntax`.
    fn shown(&self, syntax: Syntax) -> impl Iterator<Item = (usize, &Column)> {
        self.columns
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.shown_in(syntax))
    }

    /// Markdown (GitHub's tables): text others wrote escaped, figures as they are.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::from("|");
        for (_, c) in self.shown(Syntax::Markdown) {
            out.push(' ');
            out.push_str(&md_text(c.header_in(Syntax::Markdown)));
            out.push_str(" |");
        }
        out.push_str("\n|");
        for (_, c) in self.shown(Syntax::Markdown) {
            out.push_str(if c.right { "---:|" } else { "---|" });
        }
        out.push('\n');
        for row in &self.rows {
            out.push('|');
            for (i, _) in self.shown(Syntax::Markdown) {
                let cell = &row.cells[i];
                let mut text = if cell.written {
                    md_text(&cell.text)
                } else {
                    cell.text.clone()
                };
                if let Some(a) = &cell.aside {
                    text = format!("{text} ({})", md_text(a));
                }
                if i == 0 && row.baseline {
                    text.push_str(" (baseline)");
                }
                if cell.strong {
                    text = format!("**{text}**");
                }
                out.push(' ');
                out.push_str(&text);
                out.push_str(" |");
            }
            out.push('\n');
        }
        out
    }

    /// HTML: every header and cell escaped; rows tagged with their data attributes.
    pub(crate) fn html(&self) -> String {
        use std::fmt::Write;
        let mut out = format!("<table id=\"{}\"><thead><tr>", self.id);
        for (_, c) in self.shown(Syntax::Html) {
            let _ = write!(out, "<th>{}</th>", esc(c.header_in(Syntax::Html)));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr");
            for (name, value) in &row.data {
                let _ = write!(out, " {name}=\"{}\"", esc(value));
            }
            out.push('>');
            for (i, _) in self.shown(Syntax::Html) {
                let cell = &row.cells[i];
                out.push_str("<td");
                if let Some(class) = &cell.class {
                    let _ = write!(out, " class=\"{}\"", esc(class));
                }
                if let Some((name, value)) = &cell.data {
                    let _ = write!(out, " {name}=\"{}\"", esc(value));
                }
                out.push('>');
                match &cell.link {
                    Some(href) => {
                        let _ = write!(out, "<a href=\"{}\">{}</a>", esc(href), esc(&cell.text));
                    }
                    None => out.push_str(&esc(&cell.text)),
                }
                if let Some(a) = &cell.aside {
                    let _ = write!(out, " <span class=\"muted\">({})</span>", esc(a));
                }
                if i == 0 && row.baseline {
                    out.push_str(" <span class=\"muted\">(baseline)</span>");
                }
                out.push_str("</td>");
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>");
        out
    }

    /// CSV: a header line and a line per row, the cells as shown (quoted where needed).
    pub(crate) fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let header: Vec<&str> = self
            .shown(Syntax::Csv)
            .map(|(_, c)| c.header_in(Syntax::Csv))
            .collect();
        // Writing to a Vec cannot fail.
        let _ = w.write_record(&header);
        for row in &self.rows {
            let cells: Vec<String> = self
                .shown(Syntax::Csv)
                .map(|(i, _)| {
                    let mut text = row.cells[i].plain();
                    if i == 0 && row.baseline {
                        text.push_str(" (baseline)");
                    }
                    text
                })
                .collect();
            let _ = w.write_record(&cells);
        }
        String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
    }

    /// The terminal: columns that hold nothing left out, then the least useful dropped until
    /// the table fits `width` (and a line says which, and where to read them); only then do
    /// cells wrap. `None`: no limit.
    pub(crate) fn terminal(&self, width: Option<usize>) -> String {
        let columns: Vec<Strip> = self
            .shown(Syntax::Terminal)
            .map(|(i, c)| Strip {
                header: c.header_in(Syntax::Terminal).to_string(),
                right: c.right,
                drop: c.drop,
                cells: self
                    .rows
                    .iter()
                    .map(|r| {
                        let mut text = r.cells[i].plain();
                        if i == 0 && r.baseline {
                            text.push_str(" *");
                        }
                        text
                    })
                    .collect(),
            })
            .collect();
        fit(columns, width, self.elsewhere)
    }
}

/// A column as the terminal draws it.
struct Strip {
    header: String,
    cells: Vec<String>,
    right: bool,
    drop: u8,
}

impl Strip {
    fn holds_something(&self) -> bool {
        self.cells.iter().any(|x| x != "–" && !x.is_empty())
    }
}

/// The widest line of `text`, in characters.
pub(crate) fn widest_line(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// The table with every cell on one line (`width` `None`), or wrapped to `width`. Without a
/// width the table is laid out at its natural size: comfy-table would otherwise fit it to
/// the terminal it finds on stdout by wrapping cells (`accura|cy`), before a column could
/// be dropped instead.
fn draw(columns: &[Strip], width: Option<usize>) -> String {
    let mut t = Drawn::new();
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

/// The table at `width`, saying which columns were left out and where they can be read.
fn fit(columns: Vec<Strip>, width: Option<usize>, elsewhere: &str) -> String {
    let names: Vec<String> = columns
        .iter()
        .filter(|c| c.holds_something())
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
fn fit_columns(columns: Vec<Strip>, width: Option<usize>) -> (String, Vec<String>) {
    let mut columns: Vec<Strip> = columns
        .into_iter()
        .filter(|c| c.drop == 0 || c.holds_something())
        .collect();
    let kept = |columns: &[Strip]| columns.iter().map(|c| c.header.clone()).collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(
            "sample",
            vec![
                Column::left("variant"),
                Column::right("tokens in / out").called(Syntax::Terminal, "tokens in/out"),
                Column::right("truncated").only_in(Syntax::Html),
                Column::left("verdict"),
            ],
        );
        t.push(
            Row::new([
                Cell::text("a|b*"),
                Cell::figure("~12 / 3"),
                Cell::figure("0"),
                Cell::figure("better").strong().class("better"),
            ])
            .data("data-variant", "a|b*")
            .baseline(true),
        );
        t.push(Row::new([
            Cell::text("<c>").aside(Some("incomplete")),
            Cell::figure("4 / 5"),
            Cell::figure("1"),
            Cell::figure("worse").strong().class("worse"),
        ]));
        t
    }

    #[test]
    fn every_syntax_draws_the_same_rows() {
        let t = sample();
        assert_eq!(
            t.markdown(),
            "| variant | tokens in / out | verdict |\n|---|---:|---|\n\
             | a\\|b\\* (baseline) | ~12 / 3 | **better** |\n\
             | &lt;c&gt; (incomplete) | 4 / 5 | **worse** |\n"
        );
        assert_eq!(
            t.html(),
            "<table id=\"sample\"><thead><tr><th>variant</th><th>tokens in / out</th><th>truncated</th><th>verdict</th></tr></thead><tbody>\
             <tr data-variant=\"a|b*\"><td>a|b* <span class=\"muted\">(baseline)</span></td><td>~12 / 3</td><td>0</td><td class=\"better\">better</td></tr>\
             <tr><td>&lt;c&gt; <span class=\"muted\">(incomplete)</span></td><td>4 / 5</td><td>1</td><td class=\"worse\">worse</td></tr></tbody></table>"
        );
        assert_eq!(
            t.csv(),
            "variant,tokens in / out,verdict\na|b* (baseline),~12 / 3,better\n<c> (incomplete),4 / 5,worse\n"
        );
        let drawn = t.terminal(None);
        assert!(drawn.contains("tokens in/out"), "{drawn}");
        assert!(drawn.contains("a|b* *"), "{drawn}");
        assert!(drawn.contains("<c> (incomplete)"), "{drawn}");
        assert!(!drawn.contains("truncated"), "{drawn}");
    }

    #[test]
    fn a_narrow_terminal_drops_the_least_useful_columns_and_says_so() {
        let mut t = Table::new(
            "t",
            vec![
                Column::left("variant"),
                Column::right("a long column of figures").drop(2),
                Column::right("empty").drop(1),
            ],
        );
        t.push(Row::new([
            Cell::text("x"),
            Cell::figure("123456789"),
            Cell::figure("–"),
        ]));
        let wide = t.terminal(None);
        assert!(
            wide.contains("a long column") && !wide.contains("empty"),
            "{wide}"
        );
        let narrow = t.terminal(Some(20));
        assert!(
            widest_line(narrow.lines().next().unwrap()) <= 20,
            "{narrow}"
        );
        assert!(
            narrow.contains(
                "left out to fit 20 columns: a long column of figures; summary.md has every column"
            ),
            "{narrow}"
        );
    }
}
