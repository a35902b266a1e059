//! OpenAI's Responses API (`POST {base_url}/responses`, streamed as named events), which
//! OpenAI, vLLM, llama.cpp's server, SGLang, Ollama (0.13.3 and later) and `transformers
//! serve` speak. Every field name of the format lives in this file; what it shares with chat
//! completions — the key's header, error bodies, the models list, rate-limit headers — it
//! asks [`OpenAiChat`] for.
//!
//! A bench's params are written for chat completions (`max_tokens`, `response_format`,
//! tools as `{type, function: {…}}`); the request carries them in this API's words.

use super::transport::RequestBody;
use serde_json::{Map, Value, json};

use super::attachment::FileTokens;
use super::attachment::{FileFamily, Kind, Piece, pieces, where_files_go};
use super::openai::{self, OpenAiChat};
use super::protocol::{
    self, BatchApiKind, BatchRoute, Dialect, Finish, FinishKind, InvalidUsage, Protocol, Streamed,
    ToolCall, Usage, UsageCounts,
};
use super::{ApiKey, ChatMessage, JobRequest};

/// The path appended to the base URL.
const PATH: &str = "responses";

/// Events carrying the answer's text (a refusal is the model's answer too).
const TEXT: [&str; 2] = ["response.output_text.delta", "response.refusal.delta"];
/// The event carrying a refusal's text (the model declined: scored as failed, `refused`).
const REFUSAL: &str = "response.refusal.delta";
/// Events carrying reasoning, kept apart from the answer.
const REASONING: [&str; 2] = [
    "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta",
];
/// Events that end a response; its `status` says how.
const TERMINAL: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// As the bench asks, structured output included.
const FULL: Dialect = Dialect(0);
/// Without `text.format` (JSON mode or a schema), for servers that refuse it with a 400.
const NO_TEXT_FORMAT: Dialect = Dialect(1);

/// The Responses API.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OpenAiResponses;

/// A message that carries files as the Responses API's parts: `input_text`,
/// `input_image`, `input_file` (its bytes as a data URL, or its URL).
fn input_parts(m: &ChatMessage) -> Value {
    pieces(&m.content, &m.files)
        .into_iter()
        .map(|p| match p {
            Piece::Text(t) => json!({"type": "input_text", "text": t}),
            Piece::File(f) if f.kind == Kind::Text => json!({"type": "input_text", "text": f.text()}),
            Piece::File(f) if f.kind.family() == FileFamily::Image => {
                let mut part = json!({"type": "input_image", "image_url": f.data_url_in_body()});
                if let Some(detail) = &f.detail {
                    part["detail"] = json!(detail);
                }
                part
            }
            // A PDF (audio is refused when the bench is loaded: this API has no part for it).
            Piece::File(f) => match f.url() {
                Some(url) => json!({"type": "input_file", "file_url": url}),
                None => json!({"type": "input_file", "filename": f.file_name(), "file_data": f.data_url_in_body()}),
            },
        })
        .collect()
}

/// The request's `input`: each chat message as an input item, in order. System messages
/// stay items with their role (not `instructions`), so a prompt with several, or one after
/// its examples, reaches the model as it reaches it through chat completions. A case's
/// history becomes the API's own items: an assistant turn's `tool_calls` are
/// `function_call`s, a `tool` turn is a `function_call_output`.
fn input(messages: &[ChatMessage]) -> Value {
    let mut items = Vec::new();
    for m in messages {
        let text = |key: &str| m.extra.get(key).and_then(Value::as_str).unwrap_or("");
        if m.role == "tool" {
            items.push(json!({
                "type": "function_call_output",
                "call_id": text("tool_call_id"),
                "output": m.content,
            }));
            continue;
        }
        let calls = m.extra.get("tool_calls").and_then(Value::as_array);
        if !m.files.is_empty() {
            items.push(json!({"role": m.role, "content": input_parts(m)}));
        } else if !m.content.is_empty() || calls.is_none() {
            items.push(json!({"role": m.role, "content": m.content}));
        }
        for call in calls.into_iter().flatten() {
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(a)) => a.clone(),
                Some(v) => v.to_string(),
                None => "{}".to_string(),
            };
            items.push(json!({
                "type": "function_call",
                "call_id": call.get("id").and_then(Value::as_str).unwrap_or(""),
                "name": call.pointer("/function/name").and_then(Value::as_str).unwrap_or(""),
                "arguments": arguments,
            }));
        }
    }
    Value::Array(items)
}

/// The `text` object of the params, made one if there is none.
fn text_options(params: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let text = params
        .entry("text")
        .and_modify(|t| {
            if !t.is_object() {
                *t = json!({});
            }
        })
        .or_insert_with(|| json!({}));
    match text {
        Value::Object(o) => o,
        _ => unreachable!("made an object above"),
    }
}

/// A tool as chat completions writes it (`{type: function, function: {name, …}}`), flat as
/// this API takes it (`{type: function, name, …}`); others as given.
fn flat_tool(tool: &Value) -> Value {
    match (
        tool.get("type").and_then(Value::as_str),
        tool.get("function"),
    ) {
        (Some("function"), Some(Value::Object(f))) => {
            let mut flat = f.clone();
            flat.insert("type".into(), json!("function"));
            Value::Object(flat)
        }
        _ => tool.clone(),
    }
}

/// A bench's chat-completions params in this API's words: `max_tokens` (or
/// `max_completion_tokens`) is `max_output_tokens`, `response_format` is `text.format`,
/// tools and a named `tool_choice` are flat, `reasoning_effort` is `reasoning.effort`.
/// Everything else passes through as written.
fn translate(params: &mut Map<String, Value>) {
    let completion = params.remove("max_completion_tokens");
    if let Some(max) = completion.or(params.remove("max_tokens")) {
        params.entry("max_output_tokens").or_insert(max);
    }
    if let Some(format) = params.remove("response_format") {
        let format = match format.get("json_schema") {
            Some(Value::Object(schema)) => {
                let mut flat = schema.clone();
                flat.insert("type".into(), json!("json_schema"));
                Value::Object(flat)
            }
            _ => format,
        };
        text_options(params).entry("format").or_insert(format);
    }
    if let Some(Value::Array(tools)) = params.get_mut("tools") {
        for tool in tools.iter_mut() {
            *tool = flat_tool(tool);
        }
    }
    if let Some(choice) = params.get_mut("tool_choice")
        && let Some(name) = choice.pointer("/function/name").cloned()
    {
        *choice = json!({"type": "function", "name": name});
    }
    if let Some(effort) = params.remove("reasoning_effort") {
        params
            .entry("reasoning")
            .or_insert_with(|| json!({"effort": effort}));
    }
}

/// Whether the job asks for structured output (JSON mode or a schema), which a server may
/// refuse.
fn asks_for_format(params: &Map<String, Value>) -> bool {
    params.contains_key("response_format")
        || params
            .get("text")
            .is_some_and(|t| t.get("format").is_some())
}

/// An error object's code (or type), then its message: `server_error: The model …`.
fn described(err: &Value) -> String {
    let message = openai::error_message(err);
    let code = ["code", "type"]
        .iter()
        .filter_map(|k| err.get(*k).and_then(Value::as_str))
        .find(|c| !c.is_empty() && *c != "error");
    match code {
        Some(code) if !message.starts_with(code) => format!("{code}: {message}"),
        _ => message,
    }
}

/// Whether an error object blames the request (it would fail again the same way), not the
/// server: `invalid_request_error`, `invalid_prompt`, `context_length_exceeded`, any
/// `invalid_…` code. Server errors, overload and rate limits pass, and are retried.
fn blames_the_request(err: &Value) -> bool {
    ["code", "type"]
        .iter()
        .filter_map(|k| err.get(*k).and_then(Value::as_str))
        .any(|c| c.starts_with("invalid_") || c == "context_length_exceeded")
}

/// The stream's error: an `error` event (flat, or with the object under `error`).
fn error_event(s: &mut Streamed, event: &Value) {
    let err = event
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(event);
    s.error = Some(described(err));
    s.error_is_final = blames_the_request(err);
}

/// A response's `usage`: `Ok(None)` when there is none, `Err` when its counts cannot be
/// believed.
fn usage(v: &Value) -> Result<Option<Usage>, InvalidUsage> {
    UsageCounts::read(
        v,
        [
            "/input_tokens",
            "/output_tokens",
            "/input_tokens_details/cached_tokens",
            "/output_tokens_details/reasoning_tokens",
        ],
    )
}

/// The item an event is about: its id, else its place in the output (`#2`).
fn item_key(event: &Value, item: Option<&Value>) -> String {
    match item
        .and_then(|i| i.get("id"))
        .or_else(|| event.get("item_id"))
        .and_then(Value::as_str)
    {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => format!(
            "#{}",
            event
                .get("output_index")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        ),
    }
}

/// The call an event about item `key` adds to: that item's, else the latest (calls stream
/// one after another), else a new one.
fn call_for(s: &mut Streamed, key: &str) -> usize {
    if let Some(i) = s.tool_call_items.iter().position(|k| k == key) {
        return i;
    }
    if s.tool_calls.is_empty() {
        s.tool_calls.push(ToolCall::default());
        s.tool_call_items.push(key.to_string());
    }
    s.tool_calls.len() - 1
}

/// A `function_call` item: `output_item.added` opens a call (its name and `call_id`),
/// `output_item.done` brings it whole. True when it opened one.
fn function_call(s: &mut Streamed, event: &Value, item: &Value, added: bool) -> bool {
    let key = item_key(event, Some(item));
    let i = match s.tool_call_items.iter().position(|k| *k == key) {
        Some(i) => i,
        None => {
            s.tool_calls.push(ToolCall::default());
            s.tool_call_items.push(key);
            s.tool_calls.len() - 1
        }
    };
    let call = &mut s.tool_calls[i];
    if let Some(id) = item.get("call_id").and_then(Value::as_str) {
        call.id = id.to_string();
    }
    if let Some(name) = item.get("name").and_then(Value::as_str) {
        call.name = name.to_string();
    }
    match item.get("arguments") {
        Some(Value::String(a)) if !a.is_empty() => call.arguments = a.clone(),
        Some(v @ Value::Object(_)) => call.arguments = v.to_string(),
        _ => {}
    }
    added
}

/// `response.function_call_arguments.delta` (a piece) or `.done` (the whole): true for a
/// piece.
fn arguments(s: &mut Streamed, event: &Value, whole: bool) -> bool {
    let key = item_key(event, None);
    let i = call_for(s, &key);
    let call = &mut s.tool_calls[i];
    if whole {
        if let Some(a) = event.get("arguments").and_then(Value::as_str) {
            call.arguments = a.to_string();
        }
        if let Some(name) = event.get("name").and_then(Value::as_str)
            && call.name.is_empty()
        {
            call.name = name.to_string();
        }
        return false;
    }
    let delta = event.get("delta").and_then(Value::as_str).unwrap_or("");
    call.arguments.push_str(delta);
    !delta.is_empty()
}

/// A text delta: the answer's, or (with `reasoning`) the model's reasoning, kept apart.
fn text(s: &mut Streamed, event: &Value, reasoning: bool) -> bool {
    event
        .get("delta")
        .and_then(Value::as_str)
        .is_some_and(|delta| s.add_text(delta, reasoning))
}

/// When nothing was streamed, the answer the final response object holds (its messages'
/// text and its function calls): some servers send only that.
fn take_output(s: &mut Streamed, response: &Value) {
    if !s.text.is_empty() || !s.tool_calls.is_empty() || s.refusal.is_some() {
        return;
    }
    for (i, item) in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if part.get("type").and_then(Value::as_str) == Some("refusal") {
                        let t = part.get("refusal").and_then(Value::as_str).unwrap_or("");
                        s.refusal.get_or_insert_with(String::new).push_str(t);
                    } else if let Some(t) = part.get("text").and_then(Value::as_str) {
                        s.text.push_str(t);
                    }
                }
            }
            Some("function_call") => {
                function_call(s, &json!({"output_index": i}), item, false);
            }
            _ => {}
        }
    }
}

/// A terminal event (`response.completed`, `.incomplete`, `.failed`): the response's
/// `status` says how it ended (the event's name when it has none). `completed` finishes the
/// answer; `incomplete` truncates it (`max_output_tokens`) or withholds it
/// (`content_filter`); `failed` is an error; any other status, or an incomplete one for
/// another reason, is no finish.
fn ended(s: &mut Streamed, name: &str, response: &Value) {
    if s.model.is_none() {
        s.model = response
            .get("model")
            .and_then(Value::as_str)
            .map(String::from);
    }
    if let Some(u) = response.get("usage") {
        s.note_usage(usage(u));
    }
    let status = response
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or(name.trim_start_matches("response."));
    let finish = |reason: &str, kind| {
        Some(Finish {
            reason: reason.to_string(),
            kind,
        })
    };
    match status {
        "completed" => s.finish = finish("completed", FinishKind::Stopped),
        "incomplete" => match response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str)
            .unwrap_or("")
        {
            r @ "max_output_tokens" => s.finish = finish(r, FinishKind::Truncated),
            r @ "content_filter" => s.finish = finish(r, FinishKind::Filtered),
            r => s.unrecognised_finish = Some(protocol::truncate(&format!("incomplete: {r}"), 64)),
        },
        "failed" => match response.get("error").filter(|e| e.is_object()) {
            Some(err) => error_event(s, err),
            None => s.error = Some("the response failed".to_string()),
        },
        other => s.unrecognised_finish = Some(protocol::truncate(other, 64)),
    }
    if s.finish.is_some() {
        take_output(s, response);
        s.done = true;
    }
}

impl Protocol for OpenAiResponses {
    fn path(&self) -> &'static str {
        PATH
    }

    fn carries(&self, kind: Kind, role: &str, by_url: bool) -> Result<(), String> {
        if kind.family() == FileFamily::Audio {
            return Err(format!(
                "the OpenAI Responses API takes no audio input ({}): use `protocol: openai-chat` (its input_audio part) for audio",
                kind.said()
            ));
        }
        where_files_go("the OpenAI Responses API", kind, role, by_url)
    }

    fn body(&self, model: &str, job: &JobRequest, dialect: Dialect) -> RequestBody {
        let mut body = job.params.clone();
        translate(&mut body);
        if dialect == NO_TEXT_FORMAT {
            let text = text_options(&mut body);
            text.remove("format");
            if text.is_empty() {
                body.remove("text");
            }
        }
        body.insert("model".into(), json!(model));
        body.insert("input".into(), input(&job.messages));
        body.insert("stream".into(), json!(true));
        // Each job stands alone: nothing refers back to a response, so none is kept.
        body.entry("store").or_insert(json!(false));
        super::attachment::body_of(&body, job.messages.iter().flat_map(|m| &m.files))
    }

    fn key_headers(&self, key: Option<&ApiKey>) -> Vec<(String, String)> {
        OpenAiChat.key_headers(key)
    }

    fn ask_for_json(&self, params: &mut Map<String, Value>) {
        text_options(params).insert("format".into(), json!({"type": "json_object"}));
    }

    fn models_url(&self, base_url: &str) -> Option<String> {
        OpenAiChat.models_url(base_url)
    }

    fn model_ids(&self, body: &[u8]) -> Option<Vec<String>> {
        OpenAiChat.model_ids(body)
    }

    fn fallback(&self, job: &JobRequest, dialect: Dialect, status: u16) -> Option<Dialect> {
        // A 400 may only mean the server does not take structured output.
        (status == 400 && dialect == FULL && asks_for_format(&job.params)).then_some(NO_TEXT_FORMAT)
    }

    fn asks_for_usage(&self, _dialect: Dialect) -> bool {
        // The final response object always carries it.
        true
    }

    fn decode(&self, s: &mut Streamed, event: &str, data: &str) -> bool {
        let Some(v) = openai::event_json(s, event, data) else {
            return false;
        };
        let name = v.get("type").and_then(Value::as_str).unwrap_or(event);
        let function_item =
            v.pointer("/item/type").and_then(Value::as_str) == Some("function_call");
        let part_of_the_answer = match name {
            "response.output_item.added" | "response.output_item.done" => function_item,
            _ => {
                TEXT.contains(&name)
                    || REASONING.contains(&name)
                    || name.starts_with("response.function_call_arguments.")
                    || TERMINAL.contains(&name)
                    || name == "error"
                    || v.get("error").is_some_and(Value::is_object)
            }
        };
        // The first finish ends the answer: what comes after it is not part of it.
        if part_of_the_answer && s.finish.is_some() {
            s.ignored += 1;
            return false;
        }
        match name {
            REFUSAL => s.add_refusal(v.get("delta").and_then(Value::as_str).unwrap_or("")),
            _ if TEXT.contains(&name) => text(s, &v, false),
            _ if REASONING.contains(&name) => text(s, &v, true),
            _ if TERMINAL.contains(&name) => {
                ended(s, name, v.get("response").unwrap_or(&Value::Null));
                false
            }
            "response.output_item.added" | "response.output_item.done" if function_item => {
                function_call(s, &v, &v["item"], name.ends_with("added"))
            }
            "response.function_call_arguments.delta" => arguments(s, &v, false),
            "response.function_call_arguments.done" => arguments(s, &v, true),
            "response.created" | "response.in_progress" | "response.queued" => {
                if s.model.is_none() {
                    s.model = v
                        .pointer("/response/model")
                        .and_then(Value::as_str)
                        .map(String::from);
                }
                false
            }
            "error" => {
                error_event(s, &v);
                false
            }
            // A chat-completions error chunk from a proxy in front of the server.
            _ if v.get("error").is_some_and(Value::is_object) => {
                error_event(s, &v);
                false
            }
            _ => false,
        }
    }

    /// A whole response is the object its stream's terminal event carries.
    fn whole(&self, s: &mut Streamed, body: &Value) {
        let event = json!({"type": "response.completed", "response": body});
        self.decode(s, "response.completed", &event.to_string());
        s.done = true;
    }

    fn error_message(&self, body: &str) -> String {
        OpenAiChat.error_message(body)
    }

    fn remaining_requests(&self, headers: &[(String, String)]) -> Option<u64> {
        OpenAiChat.remaining_requests(headers)
    }

    fn batch(&self) -> Option<BatchRoute> {
        Some(BatchRoute {
            api: BatchApiKind::OpenAi,
            url: "/v1/responses",
        })
    }

    fn file_tokens(&self, tokens: FileTokens) -> u64 {
        tokens.openai
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: OpenAiResponses = OpenAiResponses;

    fn job(params: Value, messages: Vec<ChatMessage>) -> JobRequest {
        JobRequest {
            messages,
            params: params.as_object().cloned().unwrap_or_default(),
            idempotency_key: "k".into(),
            reserve_tokens: 0,
        }
    }

    fn body(job: &JobRequest, dialect: Dialect) -> Value {
        serde_json::from_slice(&P.body("m", job, dialect).to_bytes()).unwrap()
    }

    fn decode_all(events: &[&str]) -> Streamed {
        let mut s = Streamed::default();
        for e in events {
            P.decode(&mut s, "", e);
        }
        s
    }

    #[test]
    fn a_bench_s_chat_params_are_sent_in_this_api_s_words() {
        let j = job(
            json!({
                "temperature": 0, "max_tokens": 50, "reasoning_effort": "low",
                "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}, "strict": true}},
                "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": {"type": "object"}}}, {"type": "web_search"}],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            }),
            vec![
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("user", "Hi"),
            ],
        );
        let b = body(&j, FULL);
        assert_eq!(
            b,
            json!({
                "model": "m", "stream": true, "store": false, "temperature": 0,
                "max_output_tokens": 50,
                "reasoning": {"effort": "low"},
                "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": true}},
                "tools": [{"type": "function", "name": "get_weather", "description": "d", "parameters": {"type": "object"}}, {"type": "web_search"}],
                "tool_choice": {"type": "function", "name": "get_weather"},
                "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            })
        );
        // Written in this API's words already: passed through as written.
        let j = job(
            json!({"max_output_tokens": 7, "store": true, "reasoning": {"effort": "high", "summary": "auto"}}),
            vec![],
        );
        let b = body(&j, FULL);
        assert_eq!(
            (
                &b["max_output_tokens"],
                &b["store"],
                &b["reasoning"]["summary"]
            ),
            (&json!(7), &json!(true), &json!("auto"))
        );
    }

    #[test]
    fn a_history_s_tool_turns_are_function_call_items() {
        let mut call = ChatMessage::new("assistant", "");
        call.extra.insert(
            "tool_calls".into(),
            json!([{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]),
        );
        let mut result = ChatMessage::new("tool", "sunny");
        result.extra.insert("tool_call_id".into(), json!("call_1"));
        let b = body(
            &job(json!({}), vec![ChatMessage::new("user", "Q"), call, result]),
            FULL,
        );
        assert_eq!(
            b["input"],
            json!([
                {"role": "user", "content": "Q"},
                {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            ])
        );
    }

    #[test]
    fn json_mode_is_text_format_and_a_refusing_server_gets_it_without() {
        let mut params = Map::new();
        params.insert("text".into(), json!({"verbosity": "low"}));
        P.ask_for_json(&mut params);
        let j = job(Value::Object(params), vec![]);
        assert_eq!(
            body(&j, FULL)["text"],
            json!({"verbosity": "low", "format": {"type": "json_object"}})
        );
        assert_eq!(P.fallback(&j, FULL, 400), Some(NO_TEXT_FORMAT));
        assert_eq!(
            body(&j, NO_TEXT_FORMAT)["text"],
            json!({"verbosity": "low"})
        );
        assert_eq!(P.fallback(&j, NO_TEXT_FORMAT, 400), None);
        assert_eq!(P.fallback(&j, FULL, 422), None);
        // Nothing optional to drop: a 400 is the request's fault.
        assert_eq!(P.fallback(&job(json!({}), vec![]), FULL, 400), None);
        let j = job(json!({"response_format": {"type": "json_object"}}), vec![]);
        assert!(body(&j, NO_TEXT_FORMAT).get("text").is_none());
    }

    #[test]
    fn text_reasoning_finish_and_usage() {
        let s = decode_all(&[
            r#"{"type":"response.created","response":{"id":"r","model":"m-1","status":"in_progress","usage":null}}"#,
            r#"{"type":"response.reasoning_text.delta","item_id":"rs","delta":"think"}"#,
            r#"{"type":"response.reasoning_summary_text.delta","item_id":"rs","delta":" more"}"#,
            r#"{"type":"response.output_text.delta","item_id":"msg","delta":"Hel"}"#,
            r#"{"type":"response.output_text.delta","item_id":"msg","delta":"lo"}"#,
            r#"{"type":"response.output_text.done","item_id":"msg","text":"Hello"}"#,
            r#"{"type":"response.completed","response":{"status":"completed","output":[],"usage":{"input_tokens":9,"output_tokens":4,"input_tokens_details":{"cached_tokens":3},"output_tokens_details":{"reasoning_tokens":2}}}}"#,
        ]);
        assert_eq!(
            (s.text.as_str(), s.reasoning.as_str()),
            ("Hello", "think more")
        );
        assert_eq!(s.model.as_deref(), Some("m-1"));
        assert_eq!(
            s.finish,
            Some(Finish {
                reason: "completed".into(),
                kind: FinishKind::Stopped
            })
        );
        assert!(s.done);
        let u = s.usage.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens,
                u.reasoning_tokens,
                u.estimated
            ),
            (9, 4, 3, 2, false)
        );
    }

    #[test]
    fn the_event_name_stands_in_for_a_missing_type() {
        let mut s = Streamed::default();
        assert!(P.decode(&mut s, "response.output_text.delta", r#"{"delta":"4"}"#));
        P.decode(&mut s, "response.completed", r#"{"response":{}}"#);
        assert_eq!(
            (s.text.as_str(), s.finish.map(|f| f.reason)),
            ("4", Some("completed".to_string()))
        );
    }

    #[test]
    fn incomplete_truncates_or_withholds_and_other_endings_are_no_finish() {
        let end =
            |e: &str| decode_all(&[r#"{"type":"response.output_text.delta","delta":"x"}"#, e]);
        let s = end(
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}"#,
        );
        assert_eq!(s.finish.map(|f| f.kind), Some(FinishKind::Truncated));
        let s = end(
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}}"#,
        );
        assert_eq!(s.finish.map(|f| f.kind), Some(FinishKind::Filtered));
        for (e, named) in [
            (
                r#"{"type":"response.completed","response":{"status":"cancelled"}}"#,
                "cancelled",
            ),
            (
                r#"{"type":"response.completed","response":{"status":"in_progress"}}"#,
                "in_progress",
            ),
            (
                r#"{"type":"response.incomplete","response":{"incomplete_details":{"reason":"aborted"}}}"#,
                "incomplete: aborted",
            ),
        ] {
            let s = end(e);
            assert_eq!((s.finish, s.done), (None, false), "{e}");
            assert_eq!(s.unrecognised_finish.as_deref(), Some(named));
        }
    }

    #[test]
    fn errors_name_their_code_and_blame_the_request_or_not() {
        let s = decode_all(&[
            r#"{"type":"error","code":"server_error","message":"The model is overloaded.","param":null}"#,
        ]);
        assert_eq!(
            (s.error.as_deref(), s.error_is_final),
            (Some("server_error: The model is overloaded."), false)
        );
        let s = decode_all(&[
            r#"{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Too long."}}"#,
        ]);
        assert_eq!(
            (s.error.as_deref(), s.error_is_final),
            (Some("context_length_exceeded: Too long."), true)
        );
        let s = decode_all(&[
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"Slow down."}}}"#,
        ]);
        assert_eq!(
            (s.error.as_deref(), s.error_is_final, s.finish),
            (Some("rate_limit_exceeded: Slow down."), false, None)
        );
        let s = decode_all(&[
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"No."}}}"#,
        ]);
        assert!(s.error_is_final);
        let s = decode_all(&[r#"{"error":{"message":"overloaded","type":"server_error"}}"#]);
        assert_eq!(s.error.as_deref(), Some("server_error: overloaded"));
        let mut s = Streamed::default();
        P.decode(&mut s, "error", "boom");
        P.decode(&mut s, "", "not json");
        assert_eq!((s.error.as_deref(), s.ignored), (Some("boom"), 1));
    }

    #[test]
    fn function_calls_are_assembled_from_their_pieces() {
        let s = decode_all(&[
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":""}}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"get_time","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"ci"}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_2","output_index":1,"delta":"{}"}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"ty\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"\"Oslo\"}"}"#,
            r#"{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"arguments":"{\"city\":\"Oslo\"}"}"#,
            r#"{"type":"response.completed","response":{"status":"completed"}}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_2","delta":"late"}"#,
        ]);
        let calls: Vec<(&str, &str, &str)> = s
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("call_1", "get_weather", r#"{"city":"Oslo"}"#),
                ("call_2", "get_time", "{}")
            ]
        );
        assert_eq!(s.ignored, 1, "a piece after the finish");
    }

    #[test]
    fn an_answer_sent_only_whole_is_taken_from_the_final_response() {
        let s = decode_all(&[
            r#"{"type":"response.completed","response":{"status":"completed","output":[{"type":"reasoning","summary":[]},{"type":"message","content":[{"type":"output_text","text":"42"}]},{"type":"function_call","id":"fc","call_id":"c","name":"f","arguments":"{}"}]}}"#,
        ]);
        assert_eq!(s.text, "42");
        assert_eq!(s.tool_calls[0].name, "f");
    }

    #[test]
    fn text_after_the_first_finish_is_ignored_and_impossible_usage_too() {
        let s = decode_all(&[
            r#"{"type":"response.output_text.delta","delta":"B"}"#,
            r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":-1}}}"#,
            r#"{"type":"response.output_text.delta","delta":" and more"}"#,
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}"#,
            r#"{"type":"error","code":"server_error","message":"late"}"#,
        ]);
        assert_eq!((s.text.as_str(), s.usage, s.ignored), ("B", None, 4));
        assert_eq!(
            s.error, None,
            "an error after the finish does not undo the answer"
        );
        assert_eq!(s.finish.map(|f| f.reason).as_deref(), Some("completed"));
    }

    #[test]
    fn a_base_url_naming_the_endpoint_is_a_mistake() {
        assert!(P.check_base_url("http://h/v1").is_ok());
        assert!(P.check_base_url("http://h/v1/responses/").is_err());
        assert_eq!(
            P.url("http://h/v1?api-version=1", "m"),
            "http://h/v1/responses?api-version=1"
        );
    }
}
