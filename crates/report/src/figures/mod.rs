//! The figures: one pass over a run's records (the [`aggregate::Aggregator`]) into one
//! model, [`result::RunResult`], that every output renders: the summary, comparisons and
//! verdicts, sequential decisions, labels, gates, and the history's rows.

pub mod aggregate;
pub mod causes;
pub mod compare;
pub mod gates;
pub mod history;
pub mod holds;
pub mod job_rows;
pub mod labels;
pub mod parts;
pub mod prompts;
pub mod result;
pub mod rows;
pub mod run_comparison;
pub mod sequential;
pub mod summary;
