//! One call a model-graded scorer made for a job (a judge's vote, an embedding's request):
//! what it asked and what it heard, journaled with the job.

use promptgauge_client::{ChatMessage, Usage};

/// One call a judge made for a job: what it was asked and what it said.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JudgeCall {
    /// Which vote (0-based); a retry after an unparseable reply keeps its vote.
    pub vote: u32,
    /// The judge's prompt as sent.
    pub request: Vec<ChatMessage>,
    /// The judge's reply; empty when the call failed.
    pub reply: String,
    /// The verdict or score read from the reply, in [0, 1]; `None` when it could not be read.
    pub score: Option<f64>,
    /// Why the reply could not be read, or why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub usage: Option<Usage>,
    pub(crate) latency_ms: Option<f64>,
    /// Attempts the call took (retries of the client).
    pub(crate) attempts: usize,
    /// The HTTP status the failed call's last attempt got (a judge that is not there, or
    /// refuses its key, fails every job the same lasting way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// How the failed call's last attempt ended (a judge down or overloaded fails every
    /// job the same passing way, as an endpoint's outage does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<promptgauge_client::Outcome>,
    /// The reply came from the response cache.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

impl JudgeCall {
    /// A call about to be made: its vote and request, nothing heard yet.
    pub(crate) fn new(vote: u32, request: Vec<ChatMessage>) -> JudgeCall {
        JudgeCall {
            vote,
            request,
            reply: String::new(),
            score: None,
            error: None,
            usage: None,
            latency_ms: None,
            attempts: 0,
            status: None,
            outcome: None,
            cached: false,
        }
    }
}
