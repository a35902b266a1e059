//! The runner's listeners that report as a run goes: progress, and the verbose log.

pub(crate) mod progress;
pub(crate) mod verbose;
