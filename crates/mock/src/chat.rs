//! The simulator speaking OpenAI chat completions (`POST /v1/chat/completions`), the common
//! form every other protocol is read into: a request's body is the model's as it is (its
//! content parts read into text), and the answer goes back as `chat.completion.chunk`
//! events (or one `chat.completion`), with the faults ended this protocol's ways (an error
//! chunk, a finish reason mid-answer).

use std::sync::atomic::AtomicU64;

use serde_json::{Value, json};

use super::answers;
use super::files::{self, data_url, decoded, image_only, text_part};
use super::script::{Script, StreamPlan};
use super::served::{Carried, FilesRead, Seen, Served};
use super::wire::{Fault, MockConfig, MockRequest, ReplyStep, Stats, UsageMode};

/// OpenAI chat completions, as the simulator serves it.
pub(crate) struct ServedChat;

impl Served for ServedChat {
    fn path(&self) -> &'static str {
        "/chat/completions"
    }

    fn named_by(&self, _headers: &[(String, String)]) -> bool {
        false
    }

    fn counter<'a>(&self, _stats: &'a Stats) -> Option<&'a AtomicU64> {
        None
    }

    fn carries_key(&self, headers: &[(String, String)], key: &str) -> bool {
        openai_key(headers, key)
    }

    fn error_body(&self, status: u16, message: &str, kind: &str) -> Value {
        openai_error(status, message, kind)
    }

    fn common_form(
        &self,
        _request: &MockRequest,
        mut body: Value,
        files: &mut FilesRead,
    ) -> Result<Value, String> {
        if let Some(Value::Array(messages)) = body.get_mut("messages") {
            // Each content part read into the text, each file's words with it.
            for m in messages.iter_mut() {
                if let Some(content @ Value::Array(_)) = m.get_mut("content") {
                    *content = Value::String(files::content_text(content, self, files)?);
                }
            }
        }
        Ok(body)
    }

    fn part<'a>(&self, kind: &str, part: &'a Value) -> Result<Option<Carried<'a>>, String> {
        Ok(Some(match kind {
            "text" => return text_part(kind, part),
            "image_url" => Carried::File(image(part)?),
            "input_audio" => Carried::File(audio(part)?),
            "file" => Carried::File(file(part)?),
            _ => return Ok(None),
        }))
    }

    fn whole(&self, config: &MockConfig, serial: u64, plan: &StreamPlan) -> Value {
        json!({
            "id": format!("chatcmpl-mock-{serial}"),
            "object": "chat.completion",
            "created": 0,
            "model": config.model,
            "choices": [{"index": 0, "message": message_json(&plan.text, &plan.calls, plan.refused), "finish_reason": chat_finish(plan.finish)}],
            "usage": plan.usage,
        })
    }

    fn stream(&self, script: Script<'_>, _serial: u64, plan: StreamPlan) -> Vec<ReplyStep> {
        Chunks { script }.stream(plan)
    }
}

/// Whether headers carry `key` as OpenAI's protocols send it: a bearer key, or Azure
/// OpenAI's `api-key` header.
pub(crate) fn openai_key(headers: &[(String, String)], key: &str) -> bool {
    let expected = format!("Bearer {key}");
    headers.iter().any(|(n, v)| {
        (n.eq_ignore_ascii_case("authorization") && *v == expected)
            || (n.eq_ignore_ascii_case("api-key") && v == key)
    })
}

/// An error body as OpenAI's protocols write it.
pub(crate) fn openai_error(status: u16, message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "code": status}})
}

/// A non-streamed answer's `message`: its text and tool calls.
fn message_json(text: &str, calls: &[answers::Call], refused: bool) -> Value {
    if refused {
        return json!({"role": "assistant", "content": null, "refusal": text});
    }
    let mut m = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        m["tool_calls"] = calls
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    m
}

/// A finish in chat completions' words: a refusal ends with `stop`, its text in `refusal`.
pub(crate) fn chat_finish(finish: &str) -> &str {
    if finish == "refusal" { "stop" } else { finish }
}

/// An `image_url` part's image.
fn image(part: &Value) -> Result<Seen, String> {
    let image = part
        .get("image_url")
        .ok_or("an `image_url` part needs its `image_url`")?;
    if let Some(d) = image.get("detail").and_then(Value::as_str)
        && !["low", "high", "auto"].contains(&d)
    {
        return Err(format!(
            "image_url.detail must be low, high or auto, not `{d}`"
        ));
    }
    let url = image
        .get("url")
        .and_then(Value::as_str)
        .ok_or("image_url.url is required")?;
    image_only(data_url(url)?)
}

/// An `input_audio` part's recording (WAV or MP3, as base64).
fn audio(part: &Value) -> Result<Seen, String> {
    let audio = part
        .get("input_audio")
        .ok_or("an `input_audio` part needs its `input_audio`")?;
    let format = audio.get("format").and_then(Value::as_str).unwrap_or("");
    let media = match format {
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        other => {
            return Err(format!(
                "input_audio.format must be wav or mp3, not `{other}`"
            ));
        }
    };
    let data = audio
        .get("data")
        .and_then(Value::as_str)
        .ok_or("input_audio.data is required")?;
    decoded(media, data)
}

/// A `file` part's file, given as data.
fn file(part: &Value) -> Result<Seen, String> {
    let file = part.get("file").ok_or("a `file` part needs its `file`")?;
    let data = file
        .get("file_data")
        .and_then(Value::as_str)
        .ok_or("file.file_data is required (a file_id is not known here)")?;
    if file
        .get("filename")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("file.filename is required with file_data".into());
    }
    match data_url(data)? {
        Seen::Url(_) => Err("file.file_data must be a data URL".into()),
        seen => Ok(seen),
    }
}

/// Writes the chat-completions stream onto a script.
struct Chunks<'a> {
    script: Script<'a>,
}

impl Chunks<'_> {
    /// One chunk of the stream, around its `delta`.
    fn chunk(&self, delta: Value, finish: Option<&str>, usage: Option<&Value>) -> String {
        let mut chunk = json!({
            "id": self.script.id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.script.config.model,
            "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if let Some(u) = usage {
            chunk["usage"] = u.clone();
        }
        chunk.to_string()
    }

    /// The chat-completions stream: the role, reasoning deltas, the text (or refusal), each
    /// tool call's name then its arguments in two fragments, the finish, the usage chunk
    /// and `[DONE]`.
    fn stream(mut self, plan: StreamPlan) -> Vec<ReplyStep> {
        self.script.begin();
        let role = self.chunk(json!({"role": "assistant", "content": ""}), None, None);
        self.script.event(&role);
        for piece in &plan.reasoning {
            let c = self.chunk(json!({"reasoning_content": piece}), None, None);
            self.script.event(&c);
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
            self.script.event(&c);
        }
        if let Some(end) = self.fault_mid_stream(plan.fault) {
            return end;
        }
        for piece in &plan.pieces[cut_at..] {
            let c = self.chunk(json!({ field: piece }), None, None);
            self.script.event(&c);
        }
        for (i, call) in plan.calls.iter().enumerate() {
            // The name first, then the arguments in two fragments, as real servers stream.
            let head = self.chunk(
                json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": call.name, "arguments": ""}}]}),
                None,
                None,
            );
            self.script.event(&head);
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
                self.script.event(&c);
            }
        }
        let last_usage =
            (self.script.config.usage == UsageMode::InLastChunk).then_some(&plan.usage);
        let finish = self.chunk(json!({}), Some(chat_finish(plan.finish)), last_usage);
        self.script.event(&finish);
        // The answer is whole once its finish_reason is out.
        if !plan.replay {
            self.script.steps.push(ReplyStep::Generated {
                key: plan.key,
                text: plan.text,
                calls: plan.calls,
            });
        }
        if plan.fault == Some(Fault::CutBeforeEnd) {
            return self.script.steps;
        }
        if self.script.config.usage == UsageMode::Separate && plan.include_usage {
            let usage = json!({
                "id": self.script.id, "object": "chat.completion.chunk", "created": 0,
                "model": self.script.config.model, "choices": [], "usage": plan.usage,
            });
            self.script.event(&usage.to_string());
        }
        if !self.script.config.no_done {
            self.script.event("[DONE]");
        }
        self.script.steps
    }

    /// Ends the stream early the way the fault says; `None` lets it go on.
    fn fault_mid_stream(&mut self, fault: Option<Fault>) -> Option<Vec<ReplyStep>> {
        match fault? {
            f @ (Fault::Reset | Fault::Cut | Fault::Stall) => self.script.break_off(f),
            Fault::ErrorEvent | Fault::Failed => self.script.event(
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
                self.script.event(&end);
                if !self.script.config.no_done {
                    self.script.event("[DONE]");
                }
            }
            // Faults that strike before the stream, or after the answer.
            _ => return None,
        }
        Some(std::mem::take(&mut self.script.steps))
    }
}
