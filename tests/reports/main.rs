//! What the reports say: verdicts (`verdicts`), statistics against their references (`stats`, `stats_*`: scipy, statsmodels, ppi-python, seeded simulations), golden files of every report (`golden`), and the HTML in headless Chromium (`browser`).
//!
//! One test crate per area: each links the whole library, so fewer crates build faster.

#[path = "../common/mod.rs"]
mod common;

mod browser;
mod golden;
mod stats;
mod stats_permutation;
mod stats_power;
mod stats_ppi;
mod stats_scores;
mod stats_sequential;
mod verdicts;
