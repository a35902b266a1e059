//! A streamed answer as a script of writes: the plan of what is said ([`StreamPlan`]) and
//! the chat-completions stream written from it ([`Script`]), whose events the other wires'
//! streams (`responses.rs`, `anthropic.rs`) write with too.

use bytes::Bytes;
use serde_json::{Value, json};

use super::answers;
use super::wire::{Fault, MockConfig, ReplyStep, UsageMode};

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

    pub(crate) fn chunk(
        &self,
        delta: Value,
        finish: Option<&str>,
        usage: Option<&Value>,
    ) -> String {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.config.model,
            "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if let Some(u) = usage {
            chunk["usage"] = u.clone();
        }
        chunk.to_string()
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

    pub(crate) fn stream(mut self, plan: StreamPlan) -> Vec<ReplyStep> {
        self.begin();
        let role = self.chunk(json!({"role": "assistant", "content": ""}), None, None);
        self.event(&role);
        for piece in &plan.reasoning {
            let c = self.chunk(json!({"reasoning_content": piece}), None, None);
            self.event(&c);
        }
        // Faults strike after the first half of the answer, so partial text exists.
        let cut_at = (plan.pieces.len() / 2).max(1).min(plan.pieces.len());
        let field = if plan.finish == "refusal" {
            "refusal"
        } else {
            "content"
        };
        for piece in &plan.pieces[..cut_at] {
            let c = self.chunk(json!({ field: piece }), None, None);
            self.event(&c);
        }
        if let Some(end) = self.fault_mid_stream(plan.fault) {
            return end;
        }
        for piece in &plan.pieces[cut_at..] {
            let c = self.chunk(json!({ field: piece }), None, None);
            self.event(&c);
        }
        for (i, call) in plan.calls.iter().enumerate() {
            // The name first, then the arguments in two fragments, as real servers stream.
            let head = self.chunk(
                json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": call.name, "arguments": ""}}]}),
                None,
                None,
            );
            self.event(&head);
            let mid = call.arguments.len() / 2;
            let mid = (0..=mid)
                .rev()
                .find(|&m| call.arguments.is_char_boundary(m))
                .unwrap_or(0);
            for part in [&call.arguments[..mid], &call.arguments[mid..]] {
                let c = self.chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}),
                    None,
                    None,
                );
                self.event(&c);
            }
        }
        let last_usage = (self.config.usage == UsageMode::InLastChunk).then_some(&plan.usage);
        let finish = self.chunk(json!({}), Some(chat_finish(plan.finish)), last_usage);
        self.event(&finish);
        // The answer is whole once its finish_reason is out.
        if !plan.replay {
            self.steps.push(ReplyStep::Generated {
                key: plan.key,
                text: plan.text,
                calls: plan.calls,
            });
        }
        if plan.fault == Some(Fault::CutBeforeEnd) {
            return self.steps;
        }
        if self.config.usage == UsageMode::Separate && plan.include_usage {
            let usage = json!({
                "id": self.id, "object": "chat.completion.chunk", "created": 0,
                "model": self.config.model, "choices": [], "usage": plan.usage,
            });
            self.event(&usage.to_string());
        }
        if !self.config.no_done {
            self.event("[DONE]");
        }
        self.steps
    }

    /// Breaks the stream off as it breaks on every wire: a reset, a clean end, or silence.
    pub(crate) fn break_off(&mut self, fault: Fault) {
        match fault {
            Fault::Reset => self.steps.push(ReplyStep::Reset),
            Fault::Stall => self.steps.push(ReplyStep::Stall),
            _ => {}
        }
    }

    /// Ends the stream early the way the fault says; `None` lets it go on.
    pub(crate) fn fault_mid_stream(&mut self, fault: Option<Fault>) -> Option<Vec<ReplyStep>> {
        match fault? {
            f @ (Fault::Reset | Fault::Cut | Fault::Stall) => self.break_off(f),
            Fault::ErrorEvent | Fault::Failed => self.event(
                r#"{"error":{"message":"The model overloaded mid-stream.","type":"server_error"}}"#,
            ),
            // A finish reason mid-answer, then the stream's proper end.
            Fault::ContentFilter | Fault::Abort => {
                let reason = if fault == Some(Fault::Abort) {
                    "abort"
                } else {
                    "content_filter"
                };
                let end = self.chunk(json!({}), Some(reason), None);
                self.event(&end);
                if !self.config.no_done {
                    self.event("[DONE]");
                }
            }
            // Faults that strike before the stream, or after the answer.
            _ => return None,
        }
        Some(std::mem::take(&mut self.steps))
    }
}

/// A finish in chat completions' words: a refusal ends with `stop`, its text in `refusal`.
pub(crate) fn chat_finish(finish: &str) -> &str {
    if finish == "refusal" { "stop" } else { finish }
}
