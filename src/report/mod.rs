//! Reports, in three stages: the figures a run's records add up to (`figures/`: one model,
//! `RunResult`), the sinks that hear every counted record besides them (`sinks/`), and the
//! renderers that draw the figures in each output's syntax (`render/`), each output
//! registered once (`render::outputs`). The runner's live listeners are in `listeners/`.
//! This file only names the parts and hands their names on.

mod error;
pub mod figures;
pub mod listeners;
pub mod render;
pub mod sinks;
mod text;

pub use error::ReportError;
pub use figures::aggregate::{Aggregator, AggregatorSettings};
pub(crate) use figures::causes::reason_of;
pub(crate) use figures::gates;
pub use figures::result::RunResult;
pub use figures::summary::{ProviderInfo, RunInfo, Summary, VariantSummary};
pub use figures::{
    aggregate, causes, compare, job_rows, labels, prompts, result, rows, sequential, summary,
};
pub(crate) use listeners::{progress, verbose};
pub use render::{
    Asked, Exporter, Output, RunReport, comparison_files, exporters, history, html, junit,
    markdown, outputs,
};
pub(crate) use render::{notes::notes, table, tables, terminal};
pub use sinks::jobs_csv;
pub use text::{interval, shell_path, shell_quote, terminal_safe};
pub(crate) use text::{millis, pct, usd, visible};
