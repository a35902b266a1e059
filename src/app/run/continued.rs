//! Where a run stands once its journal is read: what `continue_journal` (`journal.rs`)
//! makes, the budget (`spend.rs`) weighs and the sending (`send.rs`) takes.

use std::collections::HashMap;

use promptgauge_suite::Job;

/// Where the run stands: the journal read once (its jobs heard by the aggregator) and
/// opened to append, the jobs still to send, what the journal decides for the runner, and
/// what the jobs in it cost.
pub(in crate::app) struct Continued {
    pub(in crate::app) agg: crate::app::Figures,
    pub(in crate::app) journal: promptgauge_runner::Journal,
    pub(in crate::app) jobs: Vec<Job>,
    /// What the journal decides for the runner, moved whole into its options.
    pub(in crate::app) carried: JournalDecides,
    /// `--budget`: what the jobs in the journal cost (earlier sessions of the run).
    pub(in crate::app) spent: f64,
}

/// What a resumed run's journal decides for the runner: read once, moved into the runner's
/// options (`send.rs`'s `run_options`), never taken apart in place.
pub(in crate::app) struct JournalDecides {
    /// Jobs of the plan the journal already holds.
    pub(in crate::app) already: usize,
    /// `--retry-failed`: jobs sent again, by plan position, with their round.
    pub(in crate::app) resend: HashMap<usize, u32>,
    /// `--until-decided`: the variants' stop flags, as the journal left them.
    pub(in crate::app) stop: Option<promptgauge_runner::sequential::StopFlags>,
    /// `--until-decided`: how far the cases go, as the journal left it.
    pub(in crate::app) horizon: Option<promptgauge_runner::sequential::Horizon>,
    /// Jobs per case (variants × repeats): plan positions are `job.index / per_case`.
    pub(in crate::app) per_case: usize,
    /// `--batch`: the batches the journal holds, for the lanes to adopt.
    pub(in crate::app) batches: Vec<promptgauge_runner::batch::BatchRecord>,
    /// A run with tools: the agent loops' steps the journal holds, by their requests' keys.
    pub(in crate::app) loop_steps: HashMap<String, promptgauge_runner::StepLine>,
}
