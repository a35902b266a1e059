//! OpenAI chat completions (`POST {base_url}/chat/completions`, streamed), the protocol
//! every OpenAI-compatible server speaks: vLLM, llama.cpp, Ollama, SGLang, TGI, LiteLLM and
//! the commercial endpoints. Every field name of the format lives in this file.

use super::transport::RequestBody;
use serde_json::{Map, Value, json};

use super::attachment::FileTokens;
use super::attachment::{Attachment, FileFamily, Kind, Piece, pieces, where_files_go};
use super::protocol::{
    self, BatchApiKind, BatchRoute, Dialect, Finish, FinishKind, InvalidUsage, Protocol, Streamed,
    ToolCall, Usage, UsageCounts,
};
use super::{ApiKey, ChatMessage, JobRequest};

/// The path appended to the base URL.
const PATH: &str = "chat/completions";

/// With `stream_options: {include_usage: true}` (asks for a usage chunk).
const FULL: Dialect = Dialect(0);
/// Without it, for servers that answer it with a 400.
const NO_STREAM_OPTIONS: Dialect = Dialect(1);
/// Without `response_format` either (a judge asks for JSON; some servers refuse the field).
const NO_RESPONSE_FORMAT: Dialect = Dialect(2);

/// What a chat-completions finish reason means: a closed list. `stop`, `tool_calls` and the
/// legacy `function_call` end an answer (so do `eos_token` and `stop_sequence`, which
/// text-generation-inference sent before 2.2); `length` truncates it; `content_filter`
/// withholds it. Anything else — vLLM's `abort`, OpenRouter's `error`, `cancelled`, the
/// string `"null"` — is not a finish: the text so far is never graded.
fn finish_kind(reason: &str) -> Option<FinishKind> {
    match reason {
        "stop" | "tool_calls" | "function_call" | "eos_token" | "stop_sequence" => {
            Some(FinishKind::Stopped)
        }
        "length" => Some(FinishKind::Truncated),
        "content_filter" => Some(FinishKind::Filtered),
        _ => None,
    }
}

/// The OpenAI chat-completions protocol.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChat;

/// `Ok(None)` when there is no usage object; `Err` when its counts are not whole numbers
/// ≥ 0. Absent counts are 0.
fn usage(v: &Value) -> Result<Option<Usage>, InvalidUsage> {
    UsageCounts::read(
        v,
        [
            "/prompt_tokens",
            "/completion_tokens",
            "/prompt_tokens_details/cached_tokens",
            "/completion_tokens_details/reasoning_tokens",
        ],
    )
}

/// The human part of an OpenAI-style error object (or a bare string), whole: the client
/// scrubs secrets from it before cutting it to length.
pub(super) fn error_message(err: &Value) -> String {
    match err {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| err.to_string()),
        other => other.to_string(),
    }
}

/// One chunk's choice: its text, reasoning, refusal and tool calls added to the answer, and
/// its finish noted; whether it carried a token.
fn decode_choice(s: &mut Streamed, choice: &Value) -> bool {
    let delta = choice.get("delta");
    let mut token = delta.is_some_and(|d| delta_text(s, d));
    if let Some(calls) = delta
        .and_then(|d| d.get("tool_calls"))
        .and_then(Value::as_array)
    {
        if s.finish.is_some() {
            s.ignored += 1;
        } else {
            token |= !calls.is_empty();
            for call in calls {
                tool_call_delta(s, call);
            }
        }
    }
    note_finish(s, choice);
    token
}

/// A delta's text, reasoning and refusal, added to the answer unless it already finished;
/// whether it carried any.
fn delta_text(s: &mut Streamed, delta: &Value) -> bool {
    let mut token = false;
    let texts = [
        ("content", false),
        ("reasoning_content", true),
        ("reasoning", true),
    ];
    for (key, reasoning) in texts {
        let Some(t) = delta.get(key).and_then(Value::as_str) else {
            continue;
        };
        if t.is_empty() {
            continue;
        }
        // The first finish ends the answer: text after it is not part of it.
        if s.finish.is_some() {
            s.ignored += 1;
            continue;
        }
        token = true;
        if reasoning {
            s.reasoning.push_str(t);
        } else {
            s.text.push_str(t);
        }
    }
    // The model declined (`refusal` in place of `content`): one rule for every
    // protocol, docs/dev/design-notes.md, "Client", on refusals.
    // (`"refusal": ""`, sent beside every answer by some servers, is none.)
    if let Some(t) = delta
        .get("refusal")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        if s.finish.is_some() {
            s.ignored += 1;
        } else {
            token |= s.add_refusal(t);
        }
    }
    token
}

/// A choice's finish reason, the first one only; `""` (sent on every chunk by some
/// servers) is none.
fn note_finish(s: &mut Streamed, choice: &Value) {
    if s.finish.is_none()
        && let Some(r) = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
    {
        match finish_kind(r) {
            Some(kind) => {
                s.finish = Some(Finish {
                    reason: r.to_string(),
                    kind,
                })
            }
            None => s.unrecognised_finish = Some(protocol::truncate(r, 64)),
        }
    }
}

/// Adds one streamed tool-call fragment: `{index, id?, function: {name?, arguments?}}`.
/// The first fragment of a call names it; later ones append to its arguments.
fn tool_call_delta(s: &mut Streamed, call: &Value) {
    let index = call
        .get("index")
        .and_then(Value::as_u64)
        .map_or(s.tool_calls.len().saturating_sub(1), |i| i as usize);
    // A server that sends whole calls without indices: each is a new one.
    let index = if call.get("index").is_none() && call.pointer("/function/name").is_some() {
        s.tool_calls.len()
    } else {
        index
    };
    if index > 256 {
        s.ignored += 1;
        return;
    }
    while s.tool_calls.len() <= index {
        s.tool_calls.push(ToolCall::default());
    }
    let target = &mut s.tool_calls[index];
    if let Some(id) = call.get("id").and_then(Value::as_str) {
        target.id = id.to_string();
    }
    if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
        target.name.push_str(name);
    }
    match call.pointer("/function/arguments") {
        Some(Value::String(a)) => target.arguments.push_str(a),
        // Some servers send the arguments as an object, not as JSON text.
        Some(v @ Value::Object(_)) => target.arguments.push_str(&v.to_string()),
        _ => {}
    }
}

/// An event's data as JSON, after what OpenAI's streams share: `[DONE]` ends the stream;
/// data that is not JSON is the error of an `error` event, or else skipped and counted.
pub(super) fn event_json(s: &mut Streamed, event_type: &str, data: &str) -> Option<Value> {
    let data = data.trim();
    if data == "[DONE]" {
        s.done = true;
        return None;
    }
    let parsed = serde_json::from_str::<Value>(data);
    if parsed.is_err() {
        if event_type == "error" {
            s.error = Some(data.to_string());
        } else {
            s.ignored += 1;
        }
    }
    parsed.ok()
}

/// The messages as chat completions takes them: one that carries files has a list of
/// parts in place of its text (`text`, `image_url`, `input_audio`, `file`).
fn messages(messages: &[ChatMessage]) -> Value {
    Value::Array(
        messages
            .iter()
            .map(|m| {
                let mut v = json!(m);
                if let (false, Value::Object(o)) = (m.files.is_empty(), &mut v) {
                    o.remove("files");
                    let parts = pieces(&m.content, &m.files).into_iter().map(|p| match p {
                        Piece::Text(t) => json!({"type": "text", "text": t}),
                        Piece::File(f) => chat_part(f),
                    });
                    o.insert("content".into(), parts.collect());
                }
                v
            })
            .collect(),
    )
}

/// A file as a chat-completions part.
fn chat_part(f: &Attachment) -> Value {
    match f.kind.family() {
        FileFamily::Image => {
            let mut image = json!({"url": f.data_url_in_body()});
            if let Some(detail) = &f.detail {
                image["detail"] = json!(detail);
            }
            json!({"type": "image_url", "image_url": image})
        }
        FileFamily::Audio => json!({"type": "input_audio", "input_audio": {
            "data": f.base64_in_body(),
            "format": if f.kind == Kind::Wav { "wav" } else { "mp3" },
        }}),
        FileFamily::Document if f.kind == Kind::Text => json!({"type": "text", "text": f.text()}),
        FileFamily::Document => json!({"type": "file", "file": {
            "filename": f.file_name(),
            "file_data": f.data_url_in_body(),
        }}),
    }
}

impl Protocol for OpenAiChat {
    fn path(&self) -> &'static str {
        PATH
    }

    fn body(&self, model: &str, job: &JobRequest, dialect: Dialect) -> RequestBody {
        let mut body = job.params.clone();
        body.insert("model".into(), json!(model));
        body.insert("messages".into(), messages(&job.messages));
        body.insert("stream".into(), json!(true));
        if dialect == FULL {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        } else {
            body.remove("stream_options");
        }
        if dialect == NO_RESPONSE_FORMAT {
            body.remove("response_format");
        }
        super::attachment::body_of(&body, job.messages.iter().flat_map(|m| &m.files))
    }

    fn carries(&self, kind: Kind, role: &str, by_url: bool) -> Result<(), String> {
        where_files_go("OpenAI chat completions", kind, role, by_url)?;
        if by_url && kind.family() != FileFamily::Image {
            return Err(format!(
                "OpenAI chat completions takes {} only as its bytes, not by URL: run with --fetch-urls (promptgauge then downloads it and sends its bytes), or download it and give its path",
                kind.said()
            ));
        }
        Ok(())
    }

    fn key_headers(&self, key: Option<&ApiKey>) -> Vec<(String, String)> {
        key.map(|key| match key.header() {
            // Azure OpenAI's keys go in their own header.
            super::KeyHeader::ApiKey => ("api-key".to_string(), key.expose().to_string()),
            super::KeyHeader::Protocol => (
                "authorization".to_string(),
                format!("Bearer {}", key.expose()),
            ),
        })
        .into_iter()
        .collect()
    }

    fn ask_for_json(&self, params: &mut Map<String, Value>) {
        params.insert("response_format".into(), json!({"type": "json_object"}));
    }

    fn models_url(&self, base_url: &str) -> Option<String> {
        Some(super::secrets::join_path(base_url, "/models"))
    }

    fn model_ids(&self, body: &[u8]) -> Option<Vec<String>> {
        protocol::listed_model_ids(body)
    }

    fn fallback(&self, job: &JobRequest, dialect: Dialect, status: u16) -> Option<Dialect> {
        // A 400 may only mean the server does not know `stream_options`, then (when asked
        // for) `response_format`.
        match (status, dialect) {
            (400, FULL) => Some(NO_STREAM_OPTIONS),
            (400, NO_STREAM_OPTIONS) if job.params.contains_key("response_format") => {
                Some(NO_RESPONSE_FORMAT)
            }
            _ => None,
        }
    }

    fn asks_for_usage(&self, dialect: Dialect) -> bool {
        dialect == FULL
    }

    fn decode(&self, s: &mut Streamed, event_type: &str, data: &str) -> bool {
        let data = data.trim();
        let Some(v) = event_json(s, event_type, data) else {
            return false;
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            s.error = Some(error_message(err));
            return false;
        }
        if event_type == "error" {
            s.error = Some(data.to_string());
            return false;
        }
        if s.model.is_none() {
            s.model = v.get("model").and_then(Value::as_str).map(String::from);
        }
        if let Some(u) = v.get("usage") {
            s.note_usage(usage(u));
        }
        let Some(choices) = v.get("choices").and_then(Value::as_array) else {
            return false;
        };
        // One choice is requested; a server that sends more has them indexed, and 0 is ours.
        let mut token = false;
        for choice in choices
            .iter()
            .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            token |= decode_choice(s, choice);
        }
        token
    }

    /// A chat completion is one chunk whose choices hold a `message` where a stream's hold
    /// a `delta` (its tool calls numbered in order).
    fn whole(&self, s: &mut Streamed, body: &Value) {
        let mut chunk = body.clone();
        for choice in chunk
            .get_mut("choices")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(choice) = choice.as_object_mut() else {
                continue;
            };
            if let Some(mut message) = choice.remove("message") {
                for (i, call) in message
                    .get_mut("tool_calls")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    if let Some(call) = call.as_object_mut() {
                        call.insert("index".into(), Value::from(i));
                    }
                }
                choice.insert("delta".into(), message);
            }
        }
        self.decode(s, "", &chunk.to_string());
        s.done = true;
    }

    fn error_message(&self, body: &str) -> String {
        protocol::error_in_body(body, error_message)
    }

    fn remaining_requests(&self, headers: &[(String, String)]) -> Option<u64> {
        protocol::header_count(headers, "x-ratelimit-remaining-requests")
    }

    fn batch(&self) -> Option<BatchRoute> {
        Some(BatchRoute {
            api: BatchApiKind::OpenAi,
            url: "/v1/chat/completions",
        })
    }

    fn file_tokens(&self, tokens: FileTokens) -> u64 {
        tokens.openai
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_refusal_beside_the_answer_is_no_refusal() {
        let mut s = Streamed::default();
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"content":"B","refusal":""},"finish_reason":"stop"}]}"#,
        );
        assert_eq!((s.text.as_str(), s.refusal.as_deref()), ("B", None));
        let mut s = Streamed::default();
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"content":null,"refusal":"No."},"finish_reason":"stop"}]}"#,
        );
        assert_eq!(s.refusal.as_deref(), Some("No."));
    }

    const P: OpenAiChat = OpenAiChat;

    #[test]
    fn accumulates_content_finish_and_separate_usage() {
        let mut s = Streamed::default();
        assert!(!P.decode(
            &mut s,
            "",
            r#"{"model":"m-1","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#
        ));
        assert!(P.decode(&mut s, "", r#"{"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null}],"obfuscation":"x"}"#));
        assert!(P.decode(
            &mut s,
            "",
            r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#
        ));
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        );
        P.decode(&mut s, "", r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}}"#);
        P.decode(&mut s, "", "[DONE]");
        assert_eq!(s.text, "Hello");
        assert_eq!(s.finish.as_ref().map(|f| f.reason.as_str()), Some("stop"));
        assert_eq!(s.model.as_deref(), Some("m-1"));
        assert!(s.done);
        let u = s.usage.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens,
                u.reasoning_tokens
            ),
            (9, 2, 4, 1)
        );
    }

    #[test]
    fn usage_in_last_chunk_with_choices() {
        let mut s = Streamed::default();
        P.decode(&mut s, "", r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#);
        assert_eq!(s.usage.unwrap().prompt_tokens, 3);
    }

    #[test]
    fn reasoning_is_kept_apart() {
        let mut s = Streamed::default();
        assert!(P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#
        ));
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"reasoning":" more"}}]}"#,
        );
        P.decode(&mut s, "", r#"{"choices":[{"delta":{"content":"B"}}]}"#);
        assert_eq!((s.reasoning.as_str(), s.text.as_str()), ("think more", "B"));
    }

    #[test]
    fn error_events_and_junk() {
        let mut s = Streamed::default();
        P.decode(&mut s, "", "not json");
        assert_eq!(s.ignored, 1);
        P.decode(
            &mut s,
            "",
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
        );
        assert_eq!(s.error.as_deref(), Some("overloaded"));
        let mut s = Streamed::default();
        P.decode(&mut s, "error", "boom");
        assert_eq!(s.error.as_deref(), Some("boom"));
    }

    #[test]
    fn an_empty_finish_reason_is_no_finish() {
        let mut s = Streamed::default();
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"content":"4"},"finish_reason":""}]}"#,
        );
        assert_eq!(s.finish, None);
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"content":"2"},"finish_reason":""}]}"#,
        );
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
        );
        assert_eq!(
            (
                s.text.as_str(),
                s.finish.as_ref().map(|f| f.reason.as_str())
            ),
            ("42", Some("length"))
        );
    }

    #[test]
    fn text_after_the_first_finish_is_ignored_and_counted() {
        let mut s = Streamed::default();
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"content":"B"},"finish_reason":"stop"}]}"#,
        );
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"content":" and more"}}]}"#,
        );
        P.decode(
            &mut s,
            "",
            r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#,
        );
        assert_eq!(
            (s.text.as_str(), s.reasoning.as_str(), s.ignored),
            ("B", "", 2)
        );
    }

    #[test]
    fn impossible_usage_is_ignored_not_believed() {
        for bad in [
            r#"{"prompt_tokens":-5,"completion_tokens":3}"#,
            r#"{"prompt_tokens":1.5,"completion_tokens":3}"#,
            r#"{"prompt_tokens":"7","completion_tokens":3}"#,
            r#"{"prompt_tokens":1e30,"completion_tokens":3}"#,
        ] {
            let mut s = Streamed::default();
            P.decode(&mut s, "", &format!(r#"{{"choices":[],"usage":{bad}}}"#));
            assert_eq!((s.usage, s.ignored), (None, 1), "{bad}");
        }
        let mut s = Streamed::default();
        P.decode(
            &mut s,
            "",
            r#"{"choices":[],"usage":{"prompt_tokens":18446744073709551615}}"#,
        );
        assert_eq!(s.usage.unwrap().prompt_tokens, u64::MAX);
        let mut s = Streamed::default();
        P.decode(&mut s, "", r#"{"choices":[],"usage":null}"#);
        assert_eq!((s.usage, s.ignored), (None, 0));
    }

    #[test]
    fn tool_calls_are_assembled_from_their_fragments() {
        let mut s = Streamed::default();
        for chunk in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"name":"get_time","arguments":{}}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":2,"function":{"name":"late"}}]}}]}"#,
        ] {
            P.decode(&mut s, "", chunk);
        }
        assert_eq!(s.tool_calls.len(), 2);
        assert_eq!(
            (
                s.tool_calls[0].id.as_str(),
                s.tool_calls[0].name.as_str(),
                s.tool_calls[0].arguments.as_str()
            ),
            ("call_1", "get_weather", r#"{"city":"Oslo"}"#)
        );
        assert_eq!(
            (
                s.tool_calls[1].name.as_str(),
                s.tool_calls[1].arguments.as_str()
            ),
            ("get_time", "{}")
        );
        assert_eq!(
            s.finish.as_ref().map(|f| f.reason.as_str()),
            Some("tool_calls")
        );
        assert_eq!(s.ignored, 1, "a call after the finish");
    }
}
