//! What the simulator asks of a protocol it serves ([`Served`]): where its requests come,
//! how its key and errors are written, how its body and content parts read into the
//! common form the model answers, and how the answer goes back, whole or streamed. Each
//! protocol is one file implementing it (`chat.rs`, `responses.rs`, `anthropic.rs`), and
//! the crate's one list of them (`PROTOCOLS`, in `lib.rs`) is what routing, batch lines,
//! key checks and errors read.

use std::sync::atomic::AtomicU64;

use serde_json::Value;

use super::script::{Script, StreamPlan};
use super::wire::{MockConfig, MockRequest, ReplyStep, Stats};
use promptgauge_client::attachment::Kind;

/// A wire protocol as the simulator serves it.
pub(crate) trait Served: Send + Sync {
    /// Its path after `/v1` (`/chat/completions`): where its requests come, and how a
    /// batch's request line names it (`/v1/chat/completions`).
    fn path(&self) -> &'static str;

    /// Whether a request on a path every protocol shares (the models list) speaks this
    /// protocol, by its headers (Anthropic's `anthropic-version`). When none says so, the
    /// first of the list answers.
    fn named_by(&self, headers: &[(String, String)]) -> bool;

    /// Its own counter of the requests on its path, if it has one (`GET /stats`).
    fn counter<'a>(&self, stats: &'a Stats) -> Option<&'a AtomicU64>;

    /// Whether request headers carry `key` where this protocol sends it.
    fn carries_key(&self, headers: &[(String, String)], key: &str) -> bool;

    /// An error body as this protocol writes it (`kind`: OpenAI's error type).
    fn error_body(&self, status: u16, message: &str, kind: &str) -> Value;

    /// A request's body in the common form the model answers (a chat-completions body whose
    /// contents are text: each content part read by [`Served::part`] through
    /// `files::content_text`, the files counted in `files`); `Err` is the 400's message.
    fn common_form(
        &self,
        request: &MockRequest,
        body: Value,
        files: &mut FilesRead,
    ) -> Result<Value, String>;

    /// A content part of type `kind`, as this protocol reads it; `None` when it takes no
    /// such part (a 400 naming it).
    fn part<'a>(&self, kind: &str, part: &'a Value) -> Result<Option<Carried<'a>>, String>;

    /// The whole (non-streamed) answer's body.
    fn whole(&self, config: &MockConfig, serial: u64, plan: &StreamPlan) -> Value;

    /// The streamed answer, broken off where its fault strikes.
    fn stream(&self, script: Script<'_>, serial: u64, plan: StreamPlan) -> Vec<ReplyStep>;
}

/// Protocols are told apart by their paths (in routes and tests).
impl PartialEq for dyn Served {
    fn eq(&self, other: &Self) -> bool {
        self.path() == other.path()
    }
}

impl std::fmt::Debug for dyn Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Served({})", self.path())
    }
}

/// What a content part carries, as its protocol reads it.
pub(crate) enum Carried<'a> {
    /// Text the model reads as it is (a text part; nothing, for an earlier turn's call).
    Text(String),
    /// Content read as a message's own (Anthropic's `tool_result`: its blocks), if any.
    Content(Option<&'a Value>),
    /// A file: an image, a recording, a document given as data.
    File(Seen),
    /// A document: given by URL, it is billed by its pages (`url_documents`).
    Document(Seen),
}

/// A file a part carries.
pub(crate) enum Seen {
    Bytes(Kind, Vec<u8>),
    Url(String),
}

/// The files a request's parts carried, as the simulator read them.
#[derive(Debug, Default)]
pub(crate) struct FilesRead {
    pub count: u64,
    /// Documents (PDFs) given by URL: not read here, but billed by their pages.
    pub url_documents: u64,
    /// The largest image's bytes (decoded).
    pub largest_image: usize,
}
