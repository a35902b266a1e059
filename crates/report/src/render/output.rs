//! What every per-run output is: a file rendered from the run's figures ([`RunReport`]),
//! written where its [`Destination`] says. The list of them is `render::outputs`; a command
//! writes each through [`write`], so a report that cannot be written is one
//! [`ReportError`] among the others, never a stop.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::Summary;
use crate::error::ReportError;
use crate::figures::result::RunResult;
use crate::figures::run_comparison::RunComparison;
use promptgauge_runner::RunDir;

/// Writes a summary in one format.
pub trait Exporter {
    /// The file the format is written to in a run folder.
    fn file_name(&self) -> &'static str;
    /// The summary in this format.
    fn render(&self, summary: &Summary) -> Result<String, ReportError>;
}

/// One output of a run, rendered from its figures.
pub trait Output {
    /// Where it is written.
    fn destination(&self) -> Destination;
    /// The output for this run; `None`: this run has nothing to write there (no baseline,
    /// or no JUnit test cases spooled).
    fn render<'r>(&self, run: &'r mut RunReport<'_>) -> Result<Option<Body<'r>>, ReportError>;
}

/// Where an output is written.
pub enum Destination {
    /// A summary format's file in the run folder, by its name.
    Named(&'static str),
    /// A file of the run folder, as the folder names it (`RunDir::report_html`).
    Folder(fn(&RunDir) -> PathBuf),
    /// A file a flag names, written whole (`--junit`).
    File(PathBuf),
    /// A file a flag names, appended to (`--markdown`, as `$GITHUB_STEP_SUMMARY` expects).
    Append(PathBuf),
    /// Standard output (the terminal table), shown as data: what a server or a model wrote
    /// in it is never obeyed as terminal control. A closed pipe is not an error.
    Stdout,
}

impl Destination {
    /// Whether it lies in the run folder (written before the run is recorded, and again
    /// by `report DIR`), not at a path a flag names.
    pub fn in_folder(&self) -> bool {
        matches!(self, Destination::Named(_) | Destination::Folder(_))
    }
}

/// An output, rendered.
pub enum Body<'r> {
    Text(String),
    /// Written straight into the file, for an output too large to hold (the JUnit XML,
    /// copied from its spool).
    Stream(Writer<'r>),
}

/// What writes a streamed output into its file.
pub(crate) type Writer<'r> = Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()> + 'r>;

/// What a per-run output renders: the run's figures, its bench as written (report.html
/// shows it), and the comparison with `--baseline`'s run. The result is lent mutably so
/// that an output written once from what a sink kept (the JUnit spool) can take it.
pub struct RunReport<'a> {
    pub result: &'a mut RunResult,
    pub bench_text: &'a str,
    pub baseline: Option<&'a RunComparison>,
}

/// A summary format as an output: its file in the run folder.
pub(super) struct SummaryFile(pub(super) Box<dyn Exporter>);

impl Output for SummaryFile {
    fn destination(&self) -> Destination {
        Destination::Named(self.0.file_name())
    }

    fn render<'r>(&self, run: &'r mut RunReport<'_>) -> Result<Option<Body<'r>>, ReportError> {
        self.0
            .render(&run.result.summary)
            .map(|t| Some(Body::Text(t)))
    }
}

/// Renders `output` and writes it where it goes (`dir`: the run folder): a whole file
/// renamed into place, or appended to.
pub fn write(
    output: &dyn Output,
    run: &mut RunReport<'_>,
    dir: &RunDir,
) -> Result<(), ReportError> {
    let place = output.destination();
    let Some(body) = output.render(run)? else {
        return Ok(());
    };
    match place {
        Destination::Named(name) => whole(&dir.file(name), body),
        Destination::Folder(path_in) => whole(&path_in(dir), body),
        Destination::File(path) => whole(&path, body),
        Destination::Append(path) => append(&path, body),
        Destination::Stdout => {
            print(body);
            Ok(())
        }
    }
}

/// `body` on standard output, as the commands print every line (`promptgauge run | head`
/// closing the pipe early is not an error).
fn print(body: Body<'_>) {
    let mut out = std::io::stdout();
    match body {
        Body::Text(text) => {
            let shown = super::terminal::shown(super::terminal::Stream::Stdout, &text);
            let _ = writeln!(out, "{shown}");
        }
        Body::Stream(write) => {
            let _ = write(&mut out);
        }
    }
}

/// `body` as the whole of `path`, renamed into place once written.
fn whole(path: &Path, body: Body<'_>) -> Result<(), ReportError> {
    match body {
        Body::Text(text) => promptgauge_base::files::write_atomically(path, text),
        Body::Stream(write) => {
            promptgauge_base::files::write_atomically_with(path, |file| write(file))
        }
    }
    .map_err(|e| ReportError::write(path, e))
}

/// `body` added at the end of `path` (created if missing).
fn append(path: &Path, body: Body<'_>) -> Result<(), ReportError> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| ReportError::open(path, e))?;
    match body {
        Body::Text(text) => file.write_all(text.as_bytes()),
        Body::Stream(write) => write(&mut file),
    }
    .map_err(|e| ReportError::write(path, e))
}
