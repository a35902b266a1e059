//! Renderers: each draws the figures in one syntax (the terminal, JSON, CSV, Markdown,
//! JUnit, HTML pages), through one table model (`table.rs`) and every table defined once
//! (`tables.rs`). Every file a run writes from its figures is an [`Output`]
//! (`output.rs`), listed once in [`outputs`].

pub mod csv;
pub(crate) mod escape;
pub mod history;
pub mod html;
pub mod json;
pub mod junit;
mod junit_file;
pub mod markdown;
pub mod notes;
pub mod output;
pub mod table;
pub mod tables;
pub mod terminal;
mod terminal_table;

pub use output::Exporter;
pub use output::{Output, RunReport, write};
pub use terminal::render_at as terminal_text;
pub use terminal_table::TerminalTable;

/// Every summary format written into a run folder.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(json::Json),
        Box::new(csv::Csv),
        Box::new(markdown::Markdown),
    ]
}

/// Files the flags name besides the run folder, each an output of its own.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    /// `--junit FILE`.
    pub junit: Option<std::path::PathBuf>,
    /// `--markdown FILE`.
    pub markdown: Option<std::path::PathBuf>,
    /// The terminal table on standard output (`report DIR` prints it apart, once the
    /// folder's files are rewritten).
    pub terminal: bool,
    /// `--quiet`: the terminal table is the variants' table and the verdicts alone.
    pub quiet: bool,
}

/// Every output of a run, in the order they are written: the summary formats and
/// report.html in the run folder (with `--baseline`, baseline.json), then the files the
/// flags name. A new output is its file and one line here (with a flag, its field in
/// [`Asked`] too).
pub fn outputs(asked: &Asked) -> Vec<Box<dyn Output>> {
    let mut outputs: Vec<Box<dyn Output>> = exporters()
        .into_iter()
        .map(|e| Box::new(output::SummaryFile(e)) as Box<dyn Output>)
        .collect();
    outputs.push(Box::new(html::ReportHtml));
    outputs.push(Box::new(json::BaselineJson));
    if asked.terminal {
        outputs.push(Box::new(terminal_table::TerminalTable {
            quiet: asked.quiet,
        }));
    }
    if let Some(path) = &asked.junit {
        outputs.push(Box::new(junit_file::JunitFile(path.clone())));
    }
    if let Some(path) = &asked.markdown {
        outputs.push(Box::new(markdown::Appended(path.clone())));
    }
    outputs
}

/// Every file `compare` writes, by name, rendered from the two runs' comparison.
pub fn comparison_files(
    c: &crate::compare::RunComparison,
) -> Result<[(&'static str, String); 4], serde_json::Error> {
    Ok([
        ("compare.json", serde_json::to_string_pretty(c)? + "\n"),
        ("compare.md", markdown::render_comparison(c)),
        ("compare.html", html::render_compare(c)),
        // The table compare.md shows, for a spreadsheet.
        ("compare.csv", tables::comparison(c).csv()),
    ])
}
