//! `summary.json`: the stable, documented form (schema `promptgauge.summary/1`); and
//! `baseline.json`, the comparison with `--baseline`'s run.

use super::output::{Body, Destination, Output, RunReport};
use crate::{Exporter, ReportError, Summary};
use promptgauge_runner::RunDir;

pub(super) struct Json;

impl Exporter for Json {
    fn file_name(&self) -> &'static str {
        "summary.json"
    }

    fn render(&self, summary: &Summary) -> Result<String, crate::ReportError> {
        Ok(serde_json::to_string_pretty(summary)? + "\n")
    }
}

/// `baseline.json`: this run against `--baseline`'s, as the terminal shows it.
pub(super) struct BaselineJson;

impl Output for BaselineJson {
    fn destination(&self) -> Destination {
        Destination::Folder(RunDir::baseline_json)
    }

    fn render<'r>(&self, run: &'r mut RunReport<'_>) -> Result<Option<Body<'r>>, ReportError> {
        Ok(run.baseline.map(|b| {
            Body::Stream(Box::new(move |out| {
                serde_json::to_writer_pretty(&mut *out, b)?;
                out.write_all(b"\n")
            }))
        }))
    }
}
