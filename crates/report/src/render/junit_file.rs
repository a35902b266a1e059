//! The `--junit` file as one of the run's outputs, written from the spool its sink kept
//! (`junit.rs` holds the spool and writes the XML).

use std::path::PathBuf;

use super::output::{Body, Destination, Output, RunReport};
use crate::ReportError;

/// The `--junit` file: the spooled test cases, one suite per variant.
pub(crate) struct JunitFile(pub(super) PathBuf);

impl Output for JunitFile {
    fn destination(&self) -> Destination {
        Destination::File(self.0.clone())
    }

    /// Takes the spool: the file is written once, copied from it, and the spool removed.
    fn render<'r>(&self, run: &'r mut RunReport<'_>) -> Result<Option<Body<'r>>, ReportError> {
        let Some(spool) = run.result.junit.take() else {
            return Ok(None);
        };
        let summary = &run.result.summary;
        Ok(Some(Body::Stream(Box::new(move |out| {
            spool.write_to(summary, out)
        }))))
    }
}
