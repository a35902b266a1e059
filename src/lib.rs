//! promptgauge: measure prompt variants against cases with known answers.
//!
//! Data flows one way: [`suite`] → [`runner`] (through [`client`]) → [`grade`] → [`stats`]
//! → [`report`]. [`mock`] is the simulated provider used for demos and tests; [`cli`] turns
//! flags and environment into plain settings; [`app`] holds one file per command. Each
//! layer is a crate of the workspace (`crates/`), re-exported here under its name for the
//! test crates and benchmarks (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod app;
pub mod cli;
pub mod error;
#[cfg(test)]
mod layering;
pub mod memory;

pub use error::{Exit, Failure};
pub use promptgauge_base::{clock, files, hash, ids, process};
pub use promptgauge_client as client;
pub use promptgauge_grade as grade;
pub use promptgauge_mock as mock;
pub use promptgauge_report as report;
pub use promptgauge_runner as runner;
pub use promptgauge_stats as stats;
pub use promptgauge_store as store;
pub use promptgauge_suite as suite;
pub use promptgauge_web as web;
