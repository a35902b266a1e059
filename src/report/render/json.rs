//! `summary.json`: the stable, documented form (schema `promptgauge.summary/1`).

use crate::report::{Exporter, Summary};

pub(super) struct Json;

impl Exporter for Json {
    fn file_name(&self) -> &'static str {
        "summary.json"
    }

    fn render(&self, summary: &Summary) -> Result<String, crate::report::ReportError> {
        Ok(serde_json::to_string_pretty(summary)? + "\n")
    }
}
