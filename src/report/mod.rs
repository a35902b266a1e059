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
pub(crate) mod text;

pub(crate) use error::ReportError;
pub use figures::aggregate::{Aggregator, AggregatorSettings};
pub(crate) use figures::causes::reason_of;
pub(crate) use figures::gates;
pub use figures::result::RunResult;
pub(crate) use figures::summary::VariantSummary;
pub use figures::summary::{GateOutcome, ProviderInfo, RunInfo, Summary};
pub(crate) use figures::{causes, job_rows, prompts, result, rows, sequential, summary};
pub use figures::{compare, labels, parts};
pub(crate) use listeners::{progress, verbose};
pub(crate) use render::{Asked, Output, RunReport, comparison_files, history, junit, outputs};
pub use render::{Exporter, exporters, html, markdown, terminal_text};
pub(crate) use render::{notes::notes, table, tables, terminal};
pub(crate) use sinks::jobs_csv;
pub(crate) use text::interval;
pub(crate) use text::shell_path;
pub use text::terminal_safe;
pub(crate) use text::{millis, pct, usd, visible};
