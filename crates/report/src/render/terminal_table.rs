//! The terminal table as an output: the run's figures and, with `--baseline`, the
//! comparison with that run, on standard output. Above `terminal.rs`, which draws it, and
//! `output.rs`, which prints it.

use super::output::{Body, Destination, Output, RunReport};
use super::terminal::{render, render_comparison, render_quiet_at, width};
use crate::ReportError;

/// The terminal table, listed in `render::outputs` when the command prints one; `quiet`
/// (`run --quiet`): the variants' table and the verdicts alone.
#[derive(Default)]
pub struct TerminalTable {
    pub quiet: bool,
}

impl Output for TerminalTable {
    fn destination(&self) -> Destination {
        Destination::Stdout
    }

    fn render<'r>(&self, run: &'r mut RunReport<'_>) -> Result<Option<Body<'r>>, ReportError> {
        let mut text = if self.quiet {
            render_quiet_at(&run.result.summary, width())
        } else {
            render(&run.result.summary)
        };
        if let Some(b) = run.baseline {
            text.push_str(&format!(
                "\nagainst the baseline run {}:\n{}",
                b.run_a.dir,
                render_comparison(b)
            ));
        }
        Ok(Some(Body::Text(text)))
    }
}
