//! The simulator speaking Anthropic messages (`POST /v1/messages`): a request is read into
//! the simulator's common form (a chat-completions body, which the model answers), and the answer is written back as Anthropic's named events, with the same
//! model, usage, tool calls, rate limits and faults. Its own misbehaviours: `error` events
//! (`overloaded_error`), HTTP 529, a stream cut after its `stop_reason` and before
//! `message_stop` (`cut_before_end`), a `stop_reason` off the list (`abort`), `max_tokens`
//! stops, and tool input in many `input_json_delta` pieces (always).

use std::sync::atomic::AtomicU64;

use serde_json::{Value, json};

use super::answers;
use super::files::{content_text, decoded, text_part};
use super::script::{Script, StreamPlan};
use super::served::{Carried, FilesRead, Seen, Served};
use super::wire::{Fault, MockConfig, MockRequest, ReplyStep, Stats, UsageMode};
use promptgauge_client::attachment::Kind;

/// Anthropic messages, as the simulator serves it.
pub(crate) struct ServedMessages;

impl Served for ServedMessages {
    fn path(&self) -> &'static str {
        "/messages"
    }

    /// A request that names an `anthropic-version` speaks Anthropic's protocol.
    fn named_by(&self, headers: &[(String, String)]) -> bool {
        headers.iter().any(|(n, _)| n == "anthropic-version")
    }

    fn counter<'a>(&self, stats: &'a Stats) -> Option<&'a AtomicU64> {
        Some(&stats.anthropic_messages)
    }

    fn carries_key(&self, headers: &[(String, String)], key: &str) -> bool {
        carries_key(headers, key)
    }

    fn error_body(&self, status: u16, message: &str, _kind: &str) -> Value {
        error_body(status, message)
    }

    fn common_form(
        &self,
        request: &MockRequest,
        body: Value,
        files: &mut FilesRead,
    ) -> Result<Value, String> {
        common_form(request, &body, files)
    }

    fn part<'a>(&self, kind: &str, part: &'a Value) -> Result<Option<Carried<'a>>, String> {
        Ok(Some(match kind {
            // A call in an earlier assistant turn says nothing the model reads here.
            "tool_use" => Carried::Text(String::new()),
            "text" => return text_part(kind, part),
            "tool_result" => Carried::Content(part.get("content")),
            "image" => Carried::File(source(
                part,
                &[Kind::Png, Kind::Jpeg, Kind::Gif, Kind::Webp],
            )?),
            "document" => Carried::Document(source(part, &[Kind::Pdf, Kind::Text])?),
            _ => return Ok(None),
        }))
    }

    fn whole(&self, config: &MockConfig, serial: u64, plan: &StreamPlan) -> Value {
        whole(
            config,
            serial,
            &plan.text,
            &plan.calls,
            plan.finish,
            &plan.usage,
        )
    }

    fn stream(&self, script: Script<'_>, serial: u64, plan: StreamPlan) -> Vec<ReplyStep> {
        stream(script, serial, plan)
    }
}

/// Whether request headers carry `key` as Anthropic sends it: `x-api-key`, never a bearer.
fn carries_key(headers: &[(String, String)], key: &str) -> bool {
    headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("x-api-key") && v == key)
}

/// An error body as Anthropic writes it, its type named by the status.
fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The text of a message's `content` (or `system`): a string, or its blocks' text (tool
/// results', and each image's or document's words) joined.
fn text_of(content: &Value, files: &mut FilesRead) -> Result<String, String> {
    content_text(content, &ServedMessages, files)
}

/// A messages request in the simulator's common form (chat completions' body), or the 400
/// Anthropic would answer: the `anthropic-version` header, `messages` and `max_tokens` are
/// required.
fn common_form(
    request: &MockRequest,
    body: &Value,
    files: &mut FilesRead,
) -> Result<Value, String> {
    if request.header("anthropic-version").is_none() {
        return Err("anthropic-version: header is required".into());
    }
    let Some(turns) = body.get("messages").and_then(Value::as_array) else {
        return Err("messages: Field required".into());
    };
    let Some(max_tokens) = body.get("max_tokens") else {
        return Err("max_tokens: Field required".into());
    };
    let system = match body.get("system") {
        Some(s) => text_of(s, files)?,
        None => String::new(),
    };
    let system = (!system.is_empty()).then(|| json!({"role": "system", "content": system}));
    let mut messages: Vec<Value> = system.into_iter().collect();
    for t in turns {
        // A user turn's `tool_result` blocks are the common form's `tool` turns.
        if let Some(Value::Array(blocks)) = t.get("content")
            && blocks.iter().any(|b| b["type"] == "tool_result")
        {
            for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                let content = match b.get("content") {
                    Some(c) => text_of(c, files)?,
                    None => String::new(),
                };
                messages.push(json!({"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": content}));
            }
            let rest: Vec<Value> = blocks
                .iter()
                .filter(|b| b["type"] != "tool_result")
                .cloned()
                .collect();
            if !rest.is_empty() {
                let content = text_of(&Value::Array(rest), files)?;
                messages.push(json!({"role": t.get("role"), "content": content}));
            }
            continue;
        }
        let content = match t.get("content") {
            Some(c) => text_of(c, files)?,
            None => String::new(),
        };
        messages.push(json!({"role": t.get("role"), "content": content}));
    }
    let mut common = json!({
        "model": body.get("model"),
        "messages": messages,
        "max_tokens": max_tokens,
        "stream": body.get("stream"),
    });
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        common["tools"] = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.get("name"),
                    "description": t.get("description"),
                    "parameters": t.get("input_schema"),
                }})
            })
            .collect();
    }
    Ok(common)
}

/// An Anthropic `image` or `document` block's source: base64 of an allowed media type, a
/// URL, or (a document's) text.
fn source(part: &Value, allowed: &[Kind]) -> Result<Seen, String> {
    let source = part.get("source").ok_or("a block needs its `source`")?;
    let field = |k: &str| source.get(k).and_then(Value::as_str);
    match field("type") {
        Some("base64") => {
            let media = field("media_type").ok_or("source.media_type: Field required")?;
            let seen = decoded(media, field("data").ok_or("source.data: Field required")?)?;
            match &seen {
                Seen::Bytes(kind, _) if !allowed.contains(kind) => Err(format!(
                    "source.media_type: {media} is not allowed in this block"
                )),
                _ => Ok(seen),
            }
        }
        Some("url") => Ok(Seen::Url(
            field("url")
                .ok_or("source.url: Field required")?
                .to_string(),
        )),
        Some("text") if allowed.contains(&Kind::Text) => Ok(Seen::Bytes(
            Kind::Text,
            field("data").unwrap_or("").as_bytes().to_vec(),
        )),
        other => Err(format!(
            "source.type `{}` is not accepted here",
            other.unwrap_or("")
        )),
    }
}

/// A chat-completions finish reason in Anthropic's words.
fn stop_reason(finish: &str) -> &str {
    match finish {
        "stop" => "end_turn",
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        "content_filter" => "refusal",
        other => other,
    }
}

/// The simulator's usage (chat completions' shape) in Anthropic's words: the input not read
/// from the cache, the cached input, and `output` tokens.
fn usage(common: &Value, output: u64) -> Value {
    let n = |path: &str| common.pointer(path).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("/prompt_tokens_details/cached_tokens");
    json!({
        "input_tokens": n("/prompt_tokens").saturating_sub(cached),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": output,
    })
}

/// A whole (unstreamed) answer: the message, its text and tool calls as content blocks.
fn whole(
    config: &MockConfig,
    serial: u64,
    text: &str,
    calls: &[answers::Call],
    finish: &str,
    chat_usage: &Value,
) -> Value {
    let calls = calls.iter().enumerate().map(|(i, call)| {
        let input = serde_json::from_str::<Value>(&call.arguments).unwrap_or_else(|_| json!({}));
        json!({"type": "tool_use", "id": format!("toolu_mock_{i}"), "name": call.name, "input": input})
    });
    let content: Vec<Value> = (!text.is_empty())
        .then(|| json!({"type": "text", "text": text}))
        .into_iter()
        .chain(calls)
        .collect();
    let output = chat_usage
        .get("completion_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    json!({
        "id": format!("msg_mock_{serial}"),
        "type": "message",
        "role": "assistant",
        "model": config.model,
        "content": content,
        "stop_reason": stop_reason(finish),
        "stop_sequence": null,
        "usage": usage(chat_usage, output),
    })
}

/// Pieces of a tool's input as Anthropic streams them: an empty one first, then a few
/// characters at a time.
fn input_pieces(arguments: &str) -> Vec<&str> {
    let mut pieces = vec![""];
    let mut rest = arguments;
    while !rest.is_empty() {
        let end = rest.char_indices().nth(4).map_or(rest.len(), |(i, _)| i);
        pieces.push(&rest[..end]);
        rest = &rest[end..];
    }
    pieces
}

/// Writes a message's events onto a script, numbering its content blocks.
struct Events<'a> {
    script: Script<'a>,
    /// The index of the block being written (or the next one).
    index: usize,
    open: bool,
}

impl Events<'_> {
    /// One event, named by its `type`.
    fn send(&mut self, data: Value) {
        let name = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        self.script.named_event(&name, &data.to_string());
    }

    fn start(&mut self, block: Value) {
        let index = self.index;
        self.open = true;
        self.send(json!({"type": "content_block_start", "index": index, "content_block": block}));
    }

    fn delta(&mut self, delta: Value) {
        let index = self.index;
        self.send(json!({"type": "content_block_delta", "index": index, "delta": delta}));
    }

    fn stop(&mut self) {
        if self.open {
            let index = self.index;
            self.send(json!({"type": "content_block_stop", "index": index}));
            self.open = false;
            self.index += 1;
        }
    }

    /// The end of the message: its `stop_reason` (with the output so far), then
    /// `message_stop`.
    fn end(&mut self, reason: &str, usage: Option<Value>) {
        self.stop();
        let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}});
        if let Some(u) = usage {
            delta["usage"] = u;
        }
        self.send(delta);
    }

    /// Ends the stream early the way the fault says; `None` lets it go on.
    fn fault_mid_stream(&mut self, fault: Option<Fault>) -> Option<Vec<ReplyStep>> {
        match fault? {
            f @ (Fault::Reset | Fault::Cut | Fault::Stall) => self.script.break_off(f),
            Fault::ErrorEvent => self.send(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
            // Anthropic's stream fails only by an error event.
            Fault::Failed => self.send(json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})),
            // A stop reason mid-answer (`refusal`, or `abort`: no word of Anthropic's), then
            // the stream's proper end.
            Fault::ContentFilter | Fault::Abort => {
                let reason = if fault == Some(Fault::Abort) {
                    "abort"
                } else {
                    "refusal"
                };
                self.end(reason, None);
                self.send(json!({"type": "message_stop"}));
            }
            // Faults that strike before the stream, or after the answer.
            _ => return None,
        }
        Some(std::mem::take(&mut self.script.steps))
    }
}

/// The answer the simulator made, streamed as Anthropic's events: `message_start` (with the
/// input's usage), a `ping`, a thinking block (with `--reasoning`), the text block, a
/// `tool_use` block per call (its input in many pieces), `message_delta` (the stop reason
/// and the output's usage), `message_stop`.
fn stream(mut script: Script<'_>, serial: u64, plan: StreamPlan) -> Vec<ReplyStep> {
    script.begin();
    let config = script.config;
    let mut out = Events {
        script,
        index: 0,
        open: false,
    };
    let reported = config.usage != UsageMode::None;
    let mut message = json!({"id": format!("msg_mock_{serial}"), "type": "message", "role": "assistant", "content": [], "model": config.model, "stop_reason": null, "stop_sequence": null});
    if reported {
        message["usage"] = usage(&plan.usage, 1);
    }
    out.send(json!({"type": "message_start", "message": message}));
    out.send(json!({"type": "ping"}));
    if !plan.reasoning.is_empty() {
        out.start(json!({"type": "thinking", "thinking": ""}));
        for piece in &plan.reasoning {
            out.delta(json!({"type": "thinking_delta", "thinking": piece}));
        }
        out.delta(json!({"type": "signature_delta", "signature": "mock-signature"}));
        out.stop();
    }
    if !plan.pieces.is_empty() || plan.calls.is_empty() {
        out.start(json!({"type": "text", "text": ""}));
    }
    // Faults strike after the first half of the answer, so partial text exists.
    let cut_at = (plan.pieces.len() / 2).max(1).min(plan.pieces.len());
    for piece in &plan.pieces[..cut_at] {
        out.delta(json!({"type": "text_delta", "text": piece}));
    }
    if let Some(end) = out.fault_mid_stream(plan.fault) {
        return end;
    }
    for piece in &plan.pieces[cut_at..] {
        out.delta(json!({"type": "text_delta", "text": piece}));
    }
    out.stop();
    for (i, call) in plan.calls.iter().enumerate() {
        out.start(json!({"type": "tool_use", "id": format!("toolu_mock_{i}"), "name": call.name, "input": {}}));
        for piece in input_pieces(&call.arguments) {
            out.delta(json!({"type": "input_json_delta", "partial_json": piece}));
        }
        out.stop();
    }
    let output = plan
        .usage
        .get("completion_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    out.end(
        stop_reason(plan.finish),
        reported.then(|| json!({"output_tokens": output})),
    );
    // The stop reason is out, but the message never ends: a cut answer.
    if plan.fault == Some(Fault::CutBeforeEnd) {
        return out.script.steps;
    }
    out.send(json!({"type": "message_stop"}));
    // The answer is whole once `message_stop` is out.
    if !plan.replay {
        out.script.steps.push(ReplyStep::Generated {
            key: plan.key,
            text: plan.text,
            calls: plan.calls,
        });
    }
    out.script.steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_input_comes_in_small_pieces_that_add_up() {
        let args = r#"{"city":"Zürich"}"#;
        let pieces = input_pieces(args);
        assert_eq!(pieces[0], "");
        assert!(pieces.len() > 4);
        assert_eq!(pieces.concat(), args);
    }

    #[test]
    fn a_request_needs_its_version_messages_and_max_tokens() {
        let request = |headers: &[(&str, &str)]| MockRequest {
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Default::default(),
        };
        let versioned = request(&[("anthropic-version", "2023-06-01")]);
        let body = json!({"model": "m", "max_tokens": 5, "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Echo: hi"}]}],
            "tools": [{"name": "t", "input_schema": {"type": "object"}}]});
        let common = common_form(&versioned, &body, &mut FilesRead::default()).unwrap();
        assert_eq!(
            common["messages"],
            json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Echo: hi"}])
        );
        assert_eq!(common["tools"][0]["function"]["name"], "t");
        assert!(
            common_form(&request(&[]), &body, &mut FilesRead::default())
                .unwrap_err()
                .contains("anthropic-version")
        );
        let no_max = json!({"messages": []});
        assert!(
            common_form(&versioned, &no_max, &mut FilesRead::default())
                .unwrap_err()
                .contains("max_tokens")
        );
        assert!(carries_key(&[("x-api-key".into(), "k".into())], "k"));
        assert!(!carries_key(
            &[("authorization".into(), "Bearer k".into())],
            "k"
        ));
    }
}
