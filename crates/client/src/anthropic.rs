//! Anthropic messages (`POST {base_url}/messages`, streamed as named events), as Anthropic
//! serves it and vLLM, llama.cpp's server, SGLang and LiteLLM's proxy speak it. Every field
//! name of the format lives in this file.
//!
//! A stream is `message_start`, then content blocks (`content_block_start`, its
//! `content_block_delta`s, `content_block_stop`; one block at a time), then `message_delta`
//! with the `stop_reason`, then `message_stop`. The answer is whole only at `message_stop`:
//! a stream that breaks after the `stop_reason` and before it is cut (docs/guide/client.md, "Hostile
//! streams").

use super::transport::RequestBody;
use serde_json::{Map, Value, json};

use super::attachment::FileTokens;
use super::attachment::{FileFamily, Kind, Piece, pieces, where_files_go, with_text_files};
use super::protocol::{
    self, BatchApiKind, BatchRoute, Dialect, Finish, FinishKind, InvalidUsage, Protocol, Streamed,
    ToolCall, Usage, UsageCounts,
};
use super::{ApiKey, ChatMessage, JobRequest};

/// The path appended to the base URL.
const PATH: &str = "messages";

/// The API version every request names (`anthropic-version`), the one whose event and field
/// shapes this file reads.
const VERSION: &str = "2023-06-01";

/// The API requires `max_tokens`; a bench that sets none (nor `max_completion_tokens`) gets
/// this, the most every current Claude model may write (docs/guide/real-model.md, "Running against a real
/// model").
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// More tool calls than this in one answer are ignored (and counted), as a runaway.
const MAX_TOOL_CALLS: usize = 256;

/// What a `stop_reason` means: a closed list. `end_turn`, `stop_sequence` and `tool_use` end
/// an answer; `max_tokens` and `model_context_window_exceeded` (the model ran out of its
/// context window while writing: the same ceiling, reached another way) truncate it;
/// `refusal` is the model declining: an answer scored as failed, `refused`. Anything
/// else — `pause_turn` (the server paused a long turn, to be continued), a word this
/// version does not know — is not a finish: the text so far is never graded.
fn finish_kind(reason: &str) -> Option<FinishKind> {
    match reason {
        "end_turn" | "stop_sequence" | "tool_use" => Some(FinishKind::Stopped),
        "max_tokens" | "model_context_window_exceeded" => Some(FinishKind::Truncated),
        "refusal" => Some(FinishKind::Refused),
        _ => None,
    }
}

/// The Anthropic messages protocol.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AnthropicMessages;

/// The usage so far after a `usage` object (`message_start`'s, or `message_delta`'s, whose
/// counts are cumulative and may leave the input's out). The prompt is every input token:
/// `input_tokens` (those neither read from nor written to the cache) plus
/// `cache_read_input_tokens` (the cached ones) plus `cache_creation_input_tokens`. Thinking
/// is counted inside `output_tokens`, which the API does not split: reasoning tokens stay 0.
fn usage(v: &Value, before: Option<Usage>) -> Result<Option<Usage>, InvalidUsage> {
    let Some(counts) = UsageCounts::of(v)? else {
        return Ok(None);
    };
    let input = counts.get("/input_tokens")?;
    let read = counts.get("/cache_read_input_tokens")?.unwrap_or(0);
    let written = counts.get("/cache_creation_input_tokens")?.unwrap_or(0);
    let output = counts.get("/output_tokens")?;
    let before = before.unwrap_or_default();
    let (prompt_tokens, cached_tokens) = match input {
        Some(input) => (input.saturating_add(read).saturating_add(written), read),
        None => (before.prompt_tokens, before.cached_tokens),
    };
    Ok(Some(Usage {
        prompt_tokens,
        completion_tokens: output.unwrap_or(before.completion_tokens),
        cached_tokens,
        reasoning_tokens: 0,
        estimated: false,
    }))
}

/// Takes a `usage` object, if any, into the stream.
fn add_usage(s: &mut Streamed, v: Option<&Value>) {
    if let Some(v) = v {
        s.note_usage(usage(v, s.usage));
    }
}

/// The human part of an error object, `{"type": "overloaded_error", "message": "…"}`, as
/// `overloaded_error: …`, whole (the client scrubs secrets from it before cutting it).
fn error_message(err: &Value) -> String {
    let message = err.get("message").and_then(Value::as_str);
    match (err.get("type").and_then(Value::as_str), message) {
        (Some(kind), Some(m)) => format!("{kind}: {m}"),
        (None, Some(m)) => m.to_string(),
        _ => match err {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
    }
}

/// Whether an error event's type says the request itself is at fault, so another attempt
/// would fail the same way; `overloaded_error`, `api_error` and any other are worth one.
fn blames_the_request(err: &Value) -> bool {
    matches!(
        err.get("type").and_then(Value::as_str),
        Some(
            "invalid_request_error"
                | "request_too_large"
                | "not_found_error"
                | "permission_error"
                | "authentication_error"
        )
    )
}

/// The bench's system (and developer) messages, joined, and the conversation in Anthropic's
/// turns: an assistant turn's tool calls become `tool_use` blocks, and tool results
/// `tool_result` blocks in a user turn (the results of one turn's calls in one user turn).
fn conversation(messages: &[ChatMessage]) -> (Option<String>, Vec<Value>) {
    let mut system = Vec::new();
    let mut turns: Vec<Value> = Vec::new();
    for m in messages {
        match m.role.as_str() {
            "system" | "developer" => system.push(with_text_files(&m.content, &m.files)),
            "tool" => {
                let result = json!({
                    "type": "tool_result",
                    "tool_use_id": m.extra.get("tool_call_id").and_then(Value::as_str).unwrap_or(""),
                    "content": m.content,
                });
                match turns.last_mut() {
                    Some(Value::Object(last))
                        if last.get("role").and_then(Value::as_str) == Some("user") =>
                    {
                        if let Some(Value::Array(blocks)) = last.get_mut("content") {
                            blocks.push(result);
                            continue;
                        }
                        turns.push(json!({"role": "user", "content": [result]}));
                    }
                    _ => turns.push(json!({"role": "user", "content": [result]})),
                }
            }
            "assistant" if m.extra.contains_key("tool_calls") => {
                turns.push(json!({"role": "assistant", "content": tool_use_blocks(m)}));
            }
            role if !m.files.is_empty() => turns.push(json!({"role": role, "content": blocks(m)})),
            role => turns.push(json!({"role": role, "content": m.content})),
        }
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, turns)
}

/// A turn that carries files as Anthropic's blocks: `text`, `image` and `document`, each
/// file's bytes in base64 (or its URL).
fn blocks(m: &ChatMessage) -> Vec<Value> {
    pieces(&m.content, &m.files)
        .into_iter()
        .filter_map(|p| match p {
            // Anthropic refuses an empty text block.
            Piece::Text("") => None,
            Piece::Text(t) => Some(json!({"type": "text", "text": t})),
            Piece::File(f) if f.kind == Kind::Text => Some(json!({"type": "text", "text": f.text()})),
            Piece::File(f) => {
                let source = match f.url() {
                    Some(url) => json!({"type": "url", "url": url}),
                    None => json!({"type": "base64", "media_type": f.kind.media_type(), "data": f.base64_in_body()}),
                };
                let block = if f.kind.family() == FileFamily::Image { "image" } else { "document" };
                Some(json!({"type": block, "source": source}))
            }
        })
        .collect()
}

/// An assistant turn that called tools, as blocks: its text (if any), then a `tool_use` per
/// call, whose arguments (OpenAI's JSON text) become the call's `input` object.
fn tool_use_blocks(m: &ChatMessage) -> Vec<Value> {
    let text = (!m.content.is_empty()).then(|| json!({"type": "text", "text": m.content}));
    let calls = m
        .extra
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|call| {
            let input = match call.pointer("/function/arguments") {
                Some(Value::String(text)) => {
                    serde_json::from_str(text).unwrap_or_else(|_| json!({}))
                }
                Some(v @ Value::Object(_)) => v.clone(),
                _ => json!({}),
            };
            json!({
                "type": "tool_use",
                "id": call.get("id").and_then(Value::as_str).unwrap_or(""),
                "name": call.pointer("/function/name").and_then(Value::as_str).unwrap_or(""),
                "input": input,
            })
        });
    text.into_iter().chain(calls).collect()
}

/// A tool as a bench offers it: OpenAI's `{type: function, function: {name, description,
/// parameters}}` becomes `{name, description, input_schema}`; one already in Anthropic's
/// shape is sent as written.
fn tool(t: &Value) -> Value {
    let Some(f) = t.get("function") else {
        return t.clone();
    };
    let mut out = Map::new();
    out.insert("name".into(), f.get("name").cloned().unwrap_or(json!("")));
    if let Some(d) = f.get("description") {
        out.insert("description".into(), d.clone());
    }
    out.insert(
        "input_schema".into(),
        f.get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    );
    Value::Object(out)
}

/// OpenAI's `tool_choice` in Anthropic's words (`required` is `any`; a named function is a
/// named tool); anything else is sent as written.
fn tool_choice(v: Value) -> Value {
    match v.as_str() {
        Some("auto") => return json!({"type": "auto"}),
        Some("required") => return json!({"type": "any"}),
        Some("none") => return json!({"type": "none"}),
        _ => {}
    }
    match v.pointer("/function/name") {
        Some(name) if v.get("type").and_then(Value::as_str) == Some("function") => {
            json!({"type": "tool", "name": name})
        }
        _ => v,
    }
}

/// The request parameters from a bench's: the few OpenAI names with an Anthropic equivalent
/// are translated (`max_completion_tokens`/`max_tokens`, `stop`, `tools`, `tool_choice`);
/// everything else (`temperature`, `thinking`, `top_k`, …) passes through as written.
fn params(job: &JobRequest) -> Map<String, Value> {
    let mut params = job.params.clone();
    let ceiling = [
        params.remove("max_completion_tokens"),
        params.remove("max_tokens"),
    ]
    .into_iter()
    .flatten()
    .next();
    params.insert(
        "max_tokens".into(),
        ceiling.unwrap_or(json!(DEFAULT_MAX_TOKENS)),
    );
    if let Some(stop) = params.remove("stop") {
        let list = match stop {
            Value::String(s) => json!([s]),
            other => other,
        };
        params.insert("stop_sequences".into(), list);
    }
    if let Some(Value::Array(tools)) = params.get_mut("tools") {
        for t in tools.iter_mut() {
            *t = tool(t);
        }
    }
    if let Some(choice) = params.remove("tool_choice") {
        params.insert("tool_choice".into(), tool_choice(choice));
    }
    params
}

/// Adds a content block's start: a `tool_use` opens a call (its `input`, usually `{}`,
/// arrives in pieces); text and thinking may carry their first words.
fn block_start(s: &mut Streamed, block: &Value) -> bool {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => add_text(s, block.get("text"), false),
        Some("thinking") => add_text(s, block.get("thinking"), true),
        Some("tool_use") => {
            if s.tool_calls.len() >= MAX_TOOL_CALLS {
                s.ignored += 1;
                return false;
            }
            let text = |key: &str| {
                block
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            // A server that sends the whole input at the start sends no pieces after it.
            let arguments = match block.get("input") {
                Some(Value::Object(input)) if !input.is_empty() => {
                    Value::Object(input.clone()).to_string()
                }
                _ => String::new(),
            };
            s.tool_calls.push(ToolCall {
                id: text("id"),
                name: text("name"),
                arguments,
            });
            true
        }
        // Redacted thinking, server tools' blocks: nothing to grade.
        _ => false,
    }
}

/// Adds a content block's delta: answer text, reasoning, or a piece of the last tool call's
/// input (blocks stream one at a time, so the pieces belong to the call opened last).
fn block_delta(s: &mut Streamed, delta: &Value) -> bool {
    match delta.get("type").and_then(Value::as_str) {
        Some("text_delta") => add_text(s, delta.get("text"), false),
        Some("thinking_delta") => add_text(s, delta.get("thinking"), true),
        Some("input_json_delta") => {
            let piece = delta.get("partial_json").and_then(Value::as_str);
            match (s.tool_calls.last_mut(), piece) {
                (Some(call), Some(piece)) => {
                    call.arguments.push_str(piece);
                    true
                }
                _ => {
                    s.ignored += 1;
                    false
                }
            }
        }
        // A thinking block's signature, citations: nothing to grade.
        _ => false,
    }
}

/// Adds a block's answer (or reasoning) text, if it has some.
fn add_text(s: &mut Streamed, text: Option<&Value>, reasoning: bool) -> bool {
    text.and_then(Value::as_str)
        .is_some_and(|t| s.add_text(t, reasoning))
}

/// Notes a `stop_reason`: one on the list awaits `message_stop` to count; any other is no
/// finish. The first real one ends the answer.
fn stop_reason(s: &mut Streamed, reason: &str) {
    if s.finish.is_some() || s.unconfirmed_finish.is_some() {
        return;
    }
    match finish_kind(reason) {
        Some(kind) => {
            s.unconfirmed_finish = Some(Finish {
                reason: reason.to_string(),
                kind,
            })
        }
        None => s.unrecognised_finish = Some(protocol::truncate(reason, 64)),
    }
}

/// `message_stop`: the stream is over, and a `stop_reason` that came before it counts. A
/// tool call whose input came in no pieces was called with none (`{}`).
fn message_stop(s: &mut Streamed) {
    s.done = true;
    if s.finish.is_none() {
        s.finish = s.unconfirmed_finish.take();
    }
    for call in s.tool_calls.iter_mut().filter(|c| c.arguments.is_empty()) {
        call.arguments = "{}".into();
    }
}

impl Protocol for AnthropicMessages {
    fn path(&self) -> &'static str {
        PATH
    }

    fn carries(&self, kind: Kind, role: &str, by_url: bool) -> Result<(), String> {
        if kind.family() == FileFamily::Audio {
            return Err(format!(
                "Anthropic messages take no audio ({}): use an OpenAI endpoint (`protocol: openai-chat`) for audio",
                kind.said()
            ));
        }
        where_files_go("Anthropic messages", kind, role, by_url)
    }

    fn body(&self, model: &str, job: &JobRequest, _dialect: Dialect) -> RequestBody {
        let mut body = params(job);
        let (system, messages) = conversation(&job.messages);
        if let Some(system) = system {
            body.insert("system".into(), json!(system));
        }
        body.insert("model".into(), json!(model));
        body.insert("messages".into(), json!(messages));
        body.insert("stream".into(), json!(true));
        super::attachment::body_of(&body, job.messages.iter().flat_map(|m| &m.files))
    }

    /// The key in `x-api-key`, and the API version, which every request (the models list
    /// too) must name, key or not.
    fn key_headers(&self, key: Option<&ApiKey>) -> Vec<(String, String)> {
        std::iter::once(("anthropic-version".to_string(), VERSION.to_string()))
            .chain(key.map(|key| ("x-api-key".to_string(), key.expose().to_string())))
            .collect()
    }

    /// Anthropic has no JSON mode: nothing is added. A judge's verdict then rests on its
    /// prompt, which asks for JSON (or a last `VERDICT:` line), and on reading the reply.
    fn ask_for_json(&self, _params: &mut Map<String, Value>) {}

    fn models_url(&self, base_url: &str) -> Option<String> {
        Some(super::secrets::join_path(base_url, "/models"))
    }

    fn model_ids(&self, body: &[u8]) -> Option<Vec<String>> {
        protocol::listed_model_ids(body)
    }

    /// No optional feature to drop: a refused request is refused.
    fn fallback(&self, _job: &JobRequest, _dialect: Dialect, _status: u16) -> Option<Dialect> {
        None
    }

    /// Usage always comes in the stream (`message_start`, `message_delta`).
    fn asks_for_usage(&self, _dialect: Dialect) -> bool {
        true
    }

    fn decode(&self, s: &mut Streamed, event: &str, data: &str) -> bool {
        let data = data.trim();
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            if event == "error" {
                s.error = Some(data.to_string());
            } else {
                s.ignored += 1;
            }
            return false;
        };
        // The payload names its type, as the `event:` line does; some servers send only one.
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(event);
        let answered = s.finish.is_some() || s.unconfirmed_finish.is_some();
        match kind {
            "error" => {
                let err = v.get("error");
                s.error = Some(err.map_or_else(|| data.to_string(), error_message));
                s.error_is_final = err.is_some_and(blames_the_request);
                false
            }
            "message_start" => {
                let message = v.get("message").unwrap_or(&Value::Null);
                if s.model.is_none() {
                    s.model = message
                        .get("model")
                        .and_then(Value::as_str)
                        .map(String::from);
                }
                add_usage(s, message.get("usage"));
                false
            }
            "content_block_start" | "content_block_delta" if answered => {
                // The first finish ends the answer: anything after it is not part of it.
                s.ignored += 1;
                false
            }
            "content_block_start" => block_start(s, v.get("content_block").unwrap_or(&Value::Null)),
            "content_block_delta" => block_delta(s, v.get("delta").unwrap_or(&Value::Null)),
            "message_delta" => {
                add_usage(s, v.get("usage"));
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    stop_reason(s, r);
                }
                false
            }
            "message_stop" => {
                message_stop(s);
                false
            }
            // `ping`, `content_block_stop`, and event types added after this version.
            _ => false,
        }
    }

    /// A whole message is its stream's events: its start (model and usage), each content
    /// block whole, its stop reason, and the stop that confirms it.
    fn whole(&self, s: &mut Streamed, body: &Value) {
        if body.get("type").and_then(Value::as_str) == Some("error") {
            self.decode(s, "error", &body.to_string());
            return;
        }
        let mut start = body.clone();
        let blocks = start
            .as_object_mut()
            .and_then(|o| o.remove("content"))
            .unwrap_or(Value::Null);
        let mut events = vec![json!({"type": "message_start", "message": start})];
        for (index, block) in blocks.as_array().into_iter().flatten().enumerate() {
            events.push(
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            );
        }
        if let Some(reason) = body.get("stop_reason").filter(|r| !r.is_null()) {
            events.push(json!({"type": "message_delta", "delta": {"stop_reason": reason}}));
            events.push(json!({"type": "message_stop"}));
        }
        for event in events {
            self.decode(s, "", &event.to_string());
        }
    }

    fn error_message(&self, body: &str) -> String {
        protocol::error_in_body(body, error_message)
    }

    fn remaining_requests(&self, headers: &[(String, String)]) -> Option<u64> {
        protocol::header_count(headers, "anthropic-ratelimit-requests-remaining")
    }

    fn batch(&self) -> Option<BatchRoute> {
        // Its batches are Anthropic's, whose requests name no URL.
        Some(BatchRoute {
            api: BatchApiKind::Anthropic,
            url: "/v1/messages",
        })
    }

    fn file_tokens(&self, tokens: FileTokens) -> u64 {
        tokens.anthropic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: AnthropicMessages = AnthropicMessages;

    #[test]
    fn stop_reasons_are_a_closed_list() {
        for (reason, kind) in [
            ("end_turn", Some(FinishKind::Stopped)),
            ("stop_sequence", Some(FinishKind::Stopped)),
            ("tool_use", Some(FinishKind::Stopped)),
            ("max_tokens", Some(FinishKind::Truncated)),
            ("model_context_window_exceeded", Some(FinishKind::Truncated)),
            ("refusal", Some(FinishKind::Refused)),
            ("pause_turn", None),
            ("", None),
            ("something_new", None),
        ] {
            assert_eq!(finish_kind(reason), kind, "{reason}");
        }
    }

    fn job(messages: Vec<ChatMessage>, params: Value) -> JobRequest {
        JobRequest {
            messages,
            params: params.as_object().cloned().unwrap_or_default(),
            idempotency_key: "k".into(),
            reserve_tokens: 0,
        }
    }

    fn body(job: &JobRequest) -> Value {
        serde_json::from_slice(&P.body("claude", job, Dialect::default()).to_bytes()).unwrap()
    }

    #[test]
    fn system_messages_go_apart_and_max_tokens_is_always_sent() {
        let b = body(&job(
            vec![
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("developer", "Answer in French."),
                ChatMessage::new("user", "2+2?"),
            ],
            json!({"temperature": 0, "thinking": {"type": "enabled", "budget_tokens": 2048}}),
        ));
        assert_eq!(b["system"], "Be brief.\n\nAnswer in French.");
        assert_eq!(b["messages"], json!([{"role": "user", "content": "2+2?"}]));
        assert_eq!(b["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(
            (&b["model"], &b["stream"]),
            (&json!("claude"), &json!(true))
        );
        assert_eq!(b["thinking"]["budget_tokens"], 2048, "passed through");
        assert_eq!(b["temperature"], 0);
        let b = body(&job(
            vec![ChatMessage::new("user", "x")],
            json!({"max_tokens": 7, "stop": "END"}),
        ));
        assert_eq!(
            (&b["max_tokens"], &b["stop_sequences"]),
            (&json!(7), &json!(["END"]))
        );
        assert!(b.get("system").is_none() && b.get("stop").is_none());
        let b = body(&job(
            vec![ChatMessage::new("user", "x")],
            json!({"max_completion_tokens": 9, "max_tokens": 7}),
        ));
        assert_eq!(
            b["max_tokens"], 9,
            "max_completion_tokens wins, as the bench reads it"
        );
    }

    #[test]
    fn tools_and_tool_turns_are_in_anthropic_s_shape() {
        let mut call = ChatMessage::new("assistant", "");
        call.extra.insert(
            "tool_calls".into(),
            json!([{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]),
        );
        let mut result = ChatMessage::new("tool", "rain");
        result.extra.insert("tool_call_id".into(), json!("call_1"));
        let b = body(&job(
            vec![ChatMessage::new("user", "Weather?"), call, result],
            json!({
                "tools": [
                    {"type": "function", "function": {"name": "weather", "description": "Looks it up", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
                    {"name": "native", "input_schema": {"type": "object"}}
                ],
                "tool_choice": "required"
            }),
        ));
        assert_eq!(
            b["tools"],
            json!([
                {"name": "weather", "description": "Looks it up", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
                {"name": "native", "input_schema": {"type": "object"}}
            ])
        );
        assert_eq!(b["tool_choice"], json!({"type": "any"}));
        assert_eq!(
            b["messages"][1],
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}}]})
        );
        assert_eq!(
            b["messages"][2],
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "rain"}]})
        );
        assert_eq!(
            tool_choice(json!({"type": "function", "function": {"name": "weather"}})),
            json!({"type": "tool", "name": "weather"})
        );
    }

    #[test]
    fn the_key_goes_in_x_api_key_beside_the_version() {
        let key = ApiKey::new("sk-ant-test".into());
        let h = P.headers(&job(vec![], json!({})), Some(&key));
        let get = |name: &str| h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(get("x-api-key"), Some("sk-ant-test"));
        assert_eq!(get("anthropic-version"), Some(VERSION));
        assert_eq!(get("idempotency-key"), Some("k"));
        assert_eq!(get("authorization"), None, "no bearer");
        assert_eq!(
            P.key_headers(None),
            [("anthropic-version".to_string(), VERSION.to_string())]
        );
    }

    #[test]
    fn urls_error_bodies_and_rate_limit_headers() {
        assert_eq!(
            P.url("https://api.anthropic.com/v1", "m"),
            "https://api.anthropic.com/v1/messages"
        );
        assert!(
            P.check_base_url("https://api.anthropic.com/v1/messages/")
                .is_err()
        );
        assert!(P.check_base_url("https://api.anthropic.com/v1").is_ok());
        assert_eq!(
            P.models_url("http://h/v1").as_deref(),
            Some("http://h/v1/models")
        );
        assert_eq!(
            P.model_ids(br#"{"data":[{"id":"claude-a","type":"model"}],"has_more":false}"#),
            Some(vec!["claude-a".to_string()])
        );
        assert_eq!(
            P.error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(
            P.error_message("upstream fell over\n"),
            "upstream fell over"
        );
        let h = vec![(
            "anthropic-ratelimit-requests-remaining".to_string(),
            " 0".to_string(),
        )];
        assert_eq!(P.remaining_requests(&h), Some(0));
        let mut params = Map::new();
        P.ask_for_json(&mut params);
        assert!(params.is_empty(), "no JSON mode");
    }

    /// Decodes `(event, data)` pairs into a stream.
    fn decode(events: &[(&str, &str)]) -> Streamed {
        let mut s = Streamed::default();
        for (event, data) in events {
            P.decode(&mut s, event, data);
        }
        s
    }

    #[test]
    fn a_whole_stream_adds_up_with_cached_tokens_in_the_prompt() {
        let s = decode(&[
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":5,"cache_read_input_tokens":20,"cache_creation_input_tokens":3,"output_tokens":1}}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Two and two."}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Fo"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ur"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}"#,
            ),
        ]);
        assert_eq!(
            (s.text.as_str(), s.reasoning.as_str()),
            ("Four", "Two and two.")
        );
        assert_eq!(s.finish, None, "not before message_stop");
        assert_eq!(
            s.unconfirmed_finish.as_ref().map(|f| f.kind),
            Some(FinishKind::Stopped)
        );
        assert_eq!(s.model.as_deref(), Some("claude-x"));
        let u = s.usage.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.cached_tokens,
                u.completion_tokens,
                u.reasoning_tokens
            ),
            (28, 20, 12, 0)
        );
        let mut s = s;
        P.decode(&mut s, "message_stop", r#"{"type":"message_stop"}"#);
        assert_eq!(
            s.finish.as_ref().map(|f| f.reason.as_str()),
            Some("end_turn")
        );
        assert!(s.done && s.unconfirmed_finish.is_none());
        assert_eq!(s.ignored, 0);
    }

    #[test]
    fn cumulative_input_counts_in_message_delta_replace_the_start_s() {
        let s = decode(&[
            (
                "",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}"#,
            ),
            (
                "",
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":6,"cache_read_input_tokens":4,"output_tokens":3}}"#,
            ),
        ]);
        let u = s.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.cached_tokens, u.completion_tokens),
            (10, 4, 3)
        );
    }

    #[test]
    fn every_stop_reason_has_its_meaning() {
        for (reason, kind) in [
            ("end_turn", Some(FinishKind::Stopped)),
            ("stop_sequence", Some(FinishKind::Stopped)),
            ("tool_use", Some(FinishKind::Stopped)),
            ("max_tokens", Some(FinishKind::Truncated)),
            ("refusal", Some(FinishKind::Refused)),
            ("pause_turn", None),
            ("made_up", None),
        ] {
            let s = decode(&[
                (
                    "",
                    &format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}}}}"#),
                ),
                ("", r#"{"type":"message_stop"}"#),
            ]);
            assert_eq!(s.finish.map(|f| f.kind), kind, "{reason}");
            assert_eq!(s.unrecognised_finish.is_some(), kind.is_none(), "{reason}");
        }
    }

    #[test]
    fn errors_junk_and_text_after_the_stop_reason() {
        let s = decode(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )]);
        assert_eq!(s.error.as_deref(), Some("overloaded_error: Overloaded"));
        assert!(!s.error_is_final, "overloaded: worth another attempt");
        let s = decode(&[(
            "error",
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}"#,
        )]);
        assert!(s.error_is_final, "the request is at fault");
        let s = decode(&[("error", "boom")]);
        assert_eq!(s.error.as_deref(), Some("boom"));
        let s = decode(&[
            ("", "not json"),
            (
                "",
                r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"B"}}"#,
            ),
            (
                "",
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":" and more"}}"#,
            ),
            (
                "",
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":-1}}"#,
            ),
            ("", r#"{"type":"message_stop"}"#),
        ]);
        assert_eq!(s.text, "B");
        assert_eq!(s.finish.map(|f| f.reason), Some("end_turn".to_string()));
        assert_eq!(
            s.ignored, 3,
            "junk, text after the stop reason, impossible usage"
        );
    }

    #[test]
    fn tool_input_is_assembled_from_its_pieces() {
        let s = decode(&[
            (
                "",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"weather","input":{}}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ty\": \"Os"}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"lo\"}"}}"#,
            ),
            ("", r#"{"type":"content_block_stop","index":0}"#),
            (
                "",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_2","name":"time","input":{}}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_3","name":"whole","input":{"a":1}}}"#,
            ),
            (
                "",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
            ),
            ("", r#"{"type":"message_stop"}"#),
        ]);
        let calls: Vec<(&str, &str, &str)> = s
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("toolu_1", "weather", r#"{"city": "Oslo"}"#),
                ("toolu_2", "time", "{}"),
                ("toolu_3", "whole", r#"{"a":1}"#)
            ]
        );
        let s = decode(&[(
            "",
            r#"{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{"}}"#,
        )]);
        assert_eq!(
            (s.tool_calls.len(), s.ignored),
            (0, 1),
            "a piece of no call"
        );
    }
}
