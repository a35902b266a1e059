//! A streamed answer as a script of writes: the plan of what is said ([`StreamPlan`]) and
//! the writer every protocol's stream (`chat.rs`, `responses.rs`, `anthropic.rs`) writes
//! its events with ([`Script`]).

use bytes::Bytes;
use serde_json::Value;

use super::answers;
use super::wire::{Fault, MockConfig, ReplyStep};

pub(crate) struct StreamPlan {
    pub(crate) reasoning: Vec<String>,
    pub(crate) pieces: Vec<String>,
    /// Tool calls, streamed after the text in fragments.
    pub(crate) calls: Vec<answers::Call>,
    pub(crate) finish: &'static str,
    pub(crate) usage: Value,
    pub(crate) include_usage: bool,
    pub(crate) fault: Option<Fault>,
    /// A replay of a finished generation: nothing new is generated.
    pub(crate) replay: bool,
    pub(crate) key: Option<String>,
    pub(crate) text: String,
    /// The model declined (its `finish` is `refusal`, unless `max_tokens` cut it first).
    pub(crate) refused: bool,
}

pub(crate) struct Script<'a> {
    pub(crate) config: &'a MockConfig,
    pub(crate) id: String,
    pub(crate) steps: Vec<ReplyStep>,
}

impl Script<'_> {
    pub(crate) fn event(&mut self, data: &str) {
        self.named_event("", data);
    }

    /// Writes one event, with an `event:` line when it has a `name`.
    pub(crate) fn named_event(&mut self, name: &str, data: &str) {
        let eol = if self.config.crlf { "\r\n" } else { "\n" };
        let field = if name.is_empty() {
            String::new()
        } else {
            format!("event: {name}{eol}")
        };
        let bytes = format!("{field}data: {data}{eol}{eol}").into_bytes();
        if self.config.split_utf8
            && let Some(at) = bytes.iter().position(|&b| b >= 0xC0)
        {
            // Split inside the first multi-byte character.
            self.steps
                .push(ReplyStep::Write(Bytes::copy_from_slice(&bytes[..at + 1])));
            self.steps
                .push(ReplyStep::Write(Bytes::copy_from_slice(&bytes[at + 1..])));
        } else {
            self.steps.push(ReplyStep::Write(Bytes::from(bytes)));
        }
        if self.config.keepalive {
            let eol = if self.config.crlf { "\r\n" } else { "\n" };
            self.steps
                .push(ReplyStep::Write(Bytes::from(format!(": keep-alive{eol}"))));
        }
        if !self.config.token_delay.is_zero() {
            self.steps.push(ReplyStep::Sleep(self.config.token_delay));
        }
    }

    /// What comes before a stream's first event: the delay, and a ping with keep-alives.
    pub(crate) fn begin(&mut self) {
        if !self.config.first_token_delay.is_zero() {
            self.steps
                .push(ReplyStep::Sleep(self.config.first_token_delay));
        }
        if self.config.keepalive {
            self.steps
                .push(ReplyStep::Write(Bytes::from_static(b": ping\n\n")));
        }
    }

    /// Breaks the stream off as it breaks on every wire: a reset, a clean end, or silence.
    pub(crate) fn break_off(&mut self, fault: Fault) {
        match fault {
            Fault::Reset => self.steps.push(ReplyStep::Reset),
            Fault::Stall => self.steps.push(ReplyStep::Stall),
            _ => {}
        }
    }
}
