//! What the reports say: verdicts (`verdicts`), statistics against their references (`stats`, `stats_*`: scipy, statsmodels, ppi-python, seeded simulations), golden files of every report (`golden`), the HTML in headless Chromium (`browser`), and the docs' links and the code's citations of them (`links`).
//!
//! One test crate per area: each links the whole library, so fewer crates build faster.

// A test tells one story from start to end; it is not split to a length.
#![allow(clippy::too_many_lines)]

#[path = "../common/mod.rs"]
mod common;

mod browser;
mod doc_numbers;
mod golden;
mod links;
mod stats;
mod stats_betting;
mod stats_permutation;
mod stats_power;
mod stats_ppi;
mod stats_scores;
mod stats_sequential;
mod verdicts;
