//! What every per-run output is: a file rendered from the run's figures.

use crate::report::Summary;
use crate::report::error::ReportError;

/// Writes a summary in one format.
pub trait Exporter {
    /// The file the format is written to in a run folder.
    fn file_name(&self) -> &'static str;
    /// The summary in this format.
    fn render(&self, summary: &Summary) -> Result<String, ReportError>;
}
