//! Renderers: each draws the figures in one syntax (the terminal, JSON, CSV, Markdown,
//! JUnit, HTML pages), through one table model (`table.rs`) and every table defined once
//! (`tables.rs`).

pub mod csv;
pub(crate) mod escape;
pub mod history;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub(crate) mod notes;
pub mod output;
pub(crate) mod table;
pub(crate) mod tables;
pub(crate) mod terminal;

pub use output::Exporter;

/// Every summary format written into a run folder.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(json::Json),
        Box::new(csv::Csv),
        Box::new(markdown::Markdown),
    ]
}
