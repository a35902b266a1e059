//! The runner's listeners that report as a run goes: progress, and the verbose log.

pub mod progress;
pub mod verbose;
