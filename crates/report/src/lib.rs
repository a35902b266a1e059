//! Reports, in three stages: the figures a run's records add up to (`figures/`: one model,
//! `RunResult`), the sinks that hear every counted record besides them (`sinks/`), and the
//! renderers that draw the figures in each output's syntax (`render/`), each output
//! registered once (`render::outputs`). The runner's live listeners are in `listeners/`.
//! This file only names the parts and hands their names on.
//!
//! Invariant: figures come from the run's records alone (a report is the same whether it is
//! made live or again from the folder), and what a model or a server wrote is shown as
//! data, never as markup or terminal control (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

mod error;
pub mod figures;
pub mod listeners;
pub mod render;
pub mod sinks;
pub mod text;

pub(crate) use error::ReportError;
pub use figures::aggregate::{Aggregator, AggregatorSettings};
pub use figures::causes::reason_of;
pub use figures::gates;
pub use figures::result::RunResult;
pub use figures::summary::VariantSummary;
pub use figures::summary::{GateOutcome, ProviderInfo, RunInfo, Summary};
pub use figures::{causes, job_rows, prompts, result, rows, sequential, summary};
pub use figures::{compare, labels, parts};
pub use listeners::{progress, verbose};
pub use render::{Asked, Output, RunReport, comparison_files, history, junit, outputs};
pub use render::{Exporter, exporters, html, markdown, terminal_text};
pub use render::{notes::notes, table, tables, terminal};
pub use sinks::jobs_csv;
pub use text::interval;
pub use text::shell_path;
pub use text::terminal_safe;
pub use text::{millis, pct, usd, visible};
