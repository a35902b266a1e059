//! promptgauge: measure prompt variants against cases with known answers.
//!
//! Data flows one way: [`suite`] → [`runner`] (through [`client`]) → [`grade`] → [`stats`]
//! → [`report`]. [`mock`] is the simulated provider used for demos and tests; [`cli`] turns
//! flags and environment into plain settings.

pub mod grade;
pub mod suite;
pub mod client;
pub mod mock;
pub mod report;
pub mod runner;
pub mod stats;
pub mod cli;
pub mod commands;

pub use commands::Exit;

