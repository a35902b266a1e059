//! A provider batch as the journal records it ([`BatchRecord`]: submitting, submitted,
//! ended, left, disowned), the batches a journal holds open, and how a run's batches are
//! sent and waited for ([`BatchSettings`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use promptgauge_client::batch::BatchState;

/// How a run's batches are sent and waited for.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSettings {
    /// The first wait between polls; it doubles while nothing ends, up to `poll_max`.
    pub poll: Duration,
    pub poll_max: Duration,
    /// How long to poll before leaving the batches to a later `--resume`.
    pub wait: Duration,
    /// Requests per batch, at most (under the provider's own limit).
    pub max_requests: Option<usize>,
    /// Bytes per batch file, at most (under the provider's own limit).
    pub max_bytes: Option<usize>,
    /// On a stop (Ctrl-C, SIGTERM, the wall-clock limit), cancel the batches still
    /// running rather than leave them to a resume.
    pub cancel_on_stop: bool,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            poll: Duration::from_secs(10),
            poll_max: Duration::from_secs(300),
            wait: Duration::from_secs(26 * 3600),
            max_requests: None,
            max_bytes: None,
            cancel_on_stop: false,
        }
    }
}

/// What a batch's journal line says it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchStep {
    /// About to be created (its input file uploaded, if the API takes one): the job keys
    /// it holds. Journaled before the provider is asked to create it.
    Submitting,
    /// Created: the provider's id.
    Submitted,
    /// Polled: its state and counts (for the live line; not journaled).
    Polled,
    /// Ended (completed, expired, cancelled, failed), its results read back.
    Ended,
    /// Still running when the run stopped waiting (`--batch-wait`): left to a resume.
    Left,
    /// A batch whose id never reached the journal, and which no batch in the provider's
    /// list turned out to be (each candidate's results held none of its requests): its
    /// jobs were submitted anew.
    Disowned,
}

/// A provider batch's event: `{"event":"batch","step":"submitting",…}` (docs/guide/batch.md,
/// "The journal's batch lines").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// Always `batch` (the journal's event lines start with their kind).
    pub event: String,
    pub step: BatchStep,
    /// promptgauge's name for the batch, also in its metadata (OpenAI) so a resume finds
    /// it in the provider's list.
    pub name: String,
    /// The endpoint it went to, when the run has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The provider's id (from `submitted` on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its input file (OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The `custom_id`s of its requests (`submitting`): the jobs' idempotency keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// `--budget` (`submitting`): what its jobs were held back for, in USD — the most it
    /// may cost. A resume counts it against the budget before sending anything new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_usd: Option<f64>,
    /// The provider's word for its state (`polled`, `ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Requests done and failed of its total (`polled`, `ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<[u64; 3]>,
    /// When, in UTC.
    pub at: String,
}

// Its one float, `reserved_usd`, is a finite sum of prices (never NaN): equality is total.
impl Eq for BatchRecord {}

impl BatchRecord {
    pub(super) fn new(step: BatchStep, name: &str, endpoint: Option<&String>) -> Self {
        BatchRecord {
            event: "batch".into(),
            step,
            name: name.to_string(),
            endpoint: endpoint.cloned(),
            id: None,
            file: None,
            keys: Vec::new(),
            reserved_usd: None,
            status: None,
            counts: None,
            at: promptgauge_base::clock::utc_now(),
        }
    }

    pub(super) fn of(
        step: BatchStep,
        name: &str,
        endpoint: Option<&String>,
        state: &BatchState,
    ) -> Self {
        let c = state.request_counts;
        BatchRecord {
            id: Some(state.id.clone()),
            status: Some(state.status.clone()),
            counts: Some([c.completed, c.failed, c.total]),
            ..BatchRecord::new(step, name, endpoint)
        }
    }

    /// Whether the journal keeps it (every step but a poll).
    pub(crate) fn journaled(&self) -> bool {
        self.step != BatchStep::Polled
    }
}

/// The `submitting` lines of a journal's batches that may still be open at the provider:
/// no `ended` or `disowned` line follows for the same batch.
pub fn open_batches(records: &[BatchRecord]) -> impl Iterator<Item = &BatchRecord> {
    records.iter().filter(|b| {
        b.step == BatchStep::Submitting
            && !records.iter().any(|e| {
                e.name == b.name && matches!(e.step, BatchStep::Ended | BatchStep::Disowned)
            })
    })
}
