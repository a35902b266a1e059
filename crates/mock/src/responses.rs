//! The simulator speaking OpenAI's Responses API (`POST /v1/responses`): a request is read
//! into the chat-completions form the simulated model answers, and the answer goes back as
//! the API's named events — with the same faults, ended this API's ways (`error`,
//! `response.failed`, `response.incomplete`, a status that is no finish).

use std::sync::atomic::AtomicU64;

use serde_json::{Map, Value, json};

use super::answers;
use super::chat::{openai_error, openai_key};
use super::files::{content_text, data_url, image_only, text_part};
use super::script::{Script, StreamPlan};
use super::served::{Carried, FilesRead, Seen, Served};
use super::wire::{Fault, MockConfig, MockRequest, ReplyStep, Stats, UsageMode};

/// OpenAI's Responses API, as the simulator serves it.
pub(crate) struct ServedResponses;

impl Served for ServedResponses {
    fn path(&self) -> &'static str {
        "/responses"
    }

    fn named_by(&self, _headers: &[(String, String)]) -> bool {
        false
    }

    fn counter<'a>(&self, stats: &'a Stats) -> Option<&'a AtomicU64> {
        Some(&stats.responses_requests)
    }

    fn carries_key(&self, headers: &[(String, String)], key: &str) -> bool {
        openai_key(headers, key)
    }

    /// OpenAI's error body, as chat completions writes it.
    fn error_body(&self, status: u16, message: &str, kind: &str) -> Value {
        openai_error(status, message, kind)
    }

    fn common_form(
        &self,
        _request: &MockRequest,
        body: Value,
        files: &mut FilesRead,
    ) -> Result<Value, String> {
        as_chat(&body, files)
    }

    fn part<'a>(&self, kind: &str, part: &'a Value) -> Result<Option<Carried<'a>>, String> {
        Ok(Some(match kind {
            "input_text" | "output_text" => return text_part(kind, part),
            "input_image" => Carried::File(image(part)?),
            "input_file" => Carried::Document(file(part)?),
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

/// A Responses request as the chat-completions body the simulator answers: `input` (and
/// `instructions`) as messages, `max_output_tokens` as `max_tokens`, flat tools nested,
/// `text.format` as `response_format`. `Err` says why it is not one.
fn as_chat(body: &Value, files: &mut FilesRead) -> Result<Value, String> {
    let mut messages = Vec::new();
    if let Some(instructions) = body.get("instructions").and_then(Value::as_str) {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    match body.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for item in items {
                messages.push(message(item, files)?);
            }
        }
        _ => return Err("`input` must be a string or a list of items".into()),
    }
    let mut chat = Map::new();
    chat.insert("messages".into(), Value::Array(messages));
    for key in ["model", "stream", "seed"] {
        if let Some(v) = body.get(key) {
            chat.insert(key.into(), v.clone());
        }
    }
    if let Some(max) = body.get("max_output_tokens") {
        chat.insert("max_tokens".into(), max.clone());
    }
    if let Some(Value::Array(tools)) = body.get("tools") {
        let nested = tools.iter().map(|t| {
            let mut function = t.as_object().cloned().unwrap_or_default();
            function.remove("type");
            json!({"type": "function", "function": function})
        });
        chat.insert("tools".into(), nested.collect());
    }
    if let Some(Value::Object(format)) = body.pointer("/text/format") {
        let mut schema = format.clone();
        let kind = schema.remove("type").unwrap_or(Value::Null);
        let response_format = if kind == "json_schema" {
            json!({"type": "json_schema", "json_schema": schema})
        } else {
            json!({"type": kind})
        };
        chat.insert("response_format".into(), response_format);
    }
    Ok(Value::Object(chat))
}

/// One input item as a chat message: a message (its text parts joined), a function call
/// (an assistant turn calling it) or a function call's output (a tool turn).
fn message(item: &Value, files: &mut FilesRead) -> Result<Value, String> {
    let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
    match item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
    {
        "message" => {
            let role = match field("role") {
                "" => return Err("an input message needs a `role`".into()),
                "developer" => "system",
                role => role,
            };
            let content = match item.get("content") {
                Some(c @ (Value::String(_) | Value::Array(_))) => {
                    content_text(c, &ServedResponses, files)?
                }
                _ => {
                    return Err(
                        "an input message's `content` must be text or a list of parts".into(),
                    );
                }
            };
            Ok(json!({"role": role, "content": content}))
        }
        "function_call" => Ok(json!({
            "role": "assistant", "content": "",
            "tool_calls": [{"id": field("call_id"), "type": "function",
                            "function": {"name": field("name"), "arguments": field("arguments")}}],
        })),
        "function_call_output" => Ok(json!({
            "role": "tool", "tool_call_id": field("call_id"), "content": field("output"),
        })),
        other => Err(format!(
            "the simulator takes no input items of type `{other}`"
        )),
    }
}

/// An `input_image` part's image.
fn image(part: &Value) -> Result<Seen, String> {
    let url = part
        .get("image_url")
        .and_then(Value::as_str)
        .ok_or("input_image.image_url is required")?;
    image_only(data_url(url)?)
}

/// An `input_file` part's file: data, or a URL.
fn file(part: &Value) -> Result<Seen, String> {
    if let Some(url) = part.get("file_url").and_then(Value::as_str) {
        return Ok(Seen::Url(url.to_string()));
    }
    let data = part
        .get("file_data")
        .and_then(Value::as_str)
        .ok_or("input_file needs file_data or file_url")?;
    if part
        .get("filename")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("input_file.filename is required with file_data".into());
    }
    data_url(data)
}

/// The response object, before it has output.
fn response(config: &MockConfig, serial: u64) -> Value {
    json!({
        "id": format!("resp_mock_{serial}"), "object": "response", "created_at": 0,
        "status": "in_progress", "model": config.model, "output": [], "usage": null,
        "error": null, "incomplete_details": null,
    })
}

/// The simulator's usage (chat completions' counts) in this API's words.
fn usage(chat: &Value) -> Value {
    json!({
        "input_tokens": chat["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": chat.pointer("/prompt_tokens_details/cached_tokens")},
        "output_tokens": chat["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": chat.pointer("/completion_tokens_details/reasoning_tokens")},
        "total_tokens": chat["total_tokens"],
    })
}

fn message_item(serial: u64, text: Option<&str>, refused: bool) -> Value {
    let (status, content) = match text {
        Some(t) if refused => ("completed", json!([{"type": "refusal", "refusal": t}])),
        Some(t) => (
            "completed",
            json!([{"type": "output_text", "text": t, "annotations": []}]),
        ),
        None => ("in_progress", json!([])),
    };
    json!({"type": "message", "id": format!("msg_mock_{serial}"), "role": "assistant", "status": status, "content": content})
}

fn call_item(i: usize, call: &answers::Call, arguments: Option<&str>) -> Value {
    json!({
        "type": "function_call", "id": format!("fc_{i}"), "call_id": format!("call_{i}"),
        "name": call.name, "arguments": arguments.unwrap_or(""),
        "status": if arguments.is_some() { "completed" } else { "in_progress" },
    })
}

/// How a finished answer ends: `length` (the token ceiling) leaves it incomplete.
fn ending(finish: &str) -> (&'static str, &'static str, Value) {
    if finish == "length" {
        let details = json!({"reason": "max_output_tokens"});
        ("response.incomplete", "incomplete", details)
    } else {
        ("response.completed", "completed", Value::Null)
    }
}

/// A non-streamed answer: the whole response object.
fn whole(
    config: &MockConfig,
    serial: u64,
    text: &str,
    calls: &[answers::Call],
    finish: &str,
    chat_usage: &Value,
) -> Value {
    let mut output = Vec::new();
    if !text.is_empty() || calls.is_empty() {
        output.push(message_item(serial, Some(text), finish == "refusal"));
    }
    for (i, call) in calls.iter().enumerate() {
        output.push(call_item(i, call, Some(&call.arguments)));
    }
    let (_, status, details) = ending(finish);
    let mut r = response(config, serial);
    r["status"] = json!(status);
    r["incomplete_details"] = details;
    r["output"] = Value::Array(output);
    r["usage"] = usage(chat_usage);
    r
}

/// A call's arguments in pieces of three characters: servers stream them token by token.
fn pieces(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    chars.chunks(3).map(|c| c.iter().collect()).collect()
}

/// The events of one streamed response, numbered as they are sent.
struct Events<'a> {
    script: Script<'a>,
    sequence: u64,
    /// The response as it stands.
    response: Value,
    /// The output items finished so far, for the terminal event.
    output: Vec<Value>,
    serial: u64,
}

impl Events<'_> {
    /// One event: its name on an `event:` line, and its data with `type` and number.
    fn send(&mut self, kind: &str, mut event: Value) {
        event["type"] = json!(kind);
        event["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        self.script.named_event(kind, &event.to_string());
    }

    /// A lifecycle event carrying the response, in `status` and with `fields` set.
    fn lifecycle(&mut self, kind: &str, status: &str, fields: Value) {
        let mut response = self.response.clone();
        response["status"] = json!(status);
        for (k, v) in fields.as_object().into_iter().flatten() {
            response[k] = v.clone();
        }
        self.send(kind, json!({"response": response}));
    }

    /// An output item announced, at the next index (which it returns).
    fn add_item(&mut self, item: Value) -> usize {
        let at = self.output.len();
        self.send(
            "response.output_item.added",
            json!({"output_index": at, "item": item}),
        );
        at
    }

    /// An output item finished at `at`, kept for the terminal event.
    fn finish_item(&mut self, at: usize, item: Value) {
        self.send(
            "response.output_item.done",
            json!({"output_index": at, "item": item}),
        );
        self.output.push(item);
    }

    /// The reasoning item, its text in deltas; none without reasoning.
    fn reasoning(&mut self, reasoning: &[String]) {
        if reasoning.is_empty() {
            return;
        }
        let id = format!("rs_mock_{}", self.serial);
        let item = json!({"type": "reasoning", "id": id, "summary": []});
        let at = self.add_item(item.clone());
        for piece in reasoning {
            self.send(
                "response.reasoning_text.delta",
                json!({"item_id": id, "output_index": at, "content_index": 0, "delta": piece}),
            );
        }
        let mut item = item;
        item["content"] = json!([{"type": "reasoning_text", "text": reasoning.concat()}]);
        self.finish_item(at, item);
    }

    /// The message item and its empty content part (a refusal's, when `refused`), before
    /// its text; gives its index.
    fn open_message(&mut self, refused: bool) -> usize {
        let serial = self.serial;
        let at = self.add_item(message_item(serial, None, refused));
        let part = if refused {
            json!({"type": "refusal", "refusal": ""})
        } else {
            json!({"type": "output_text", "text": "", "annotations": []})
        };
        self.send(
            "response.content_part.added",
            json!({"item_id": format!("msg_mock_{serial}"), "output_index": at, "content_index": 0, "part": part}),
        );
        at
    }

    fn text_delta(&mut self, output_index: usize, piece: &str, refused: bool) {
        let serial = self.serial;
        if refused {
            return self.send(
                "response.refusal.delta",
                json!({"item_id": format!("msg_mock_{serial}"), "output_index": output_index, "content_index": 0, "delta": piece}),
            );
        }
        self.send(
            "response.output_text.delta",
            json!({"item_id": format!("msg_mock_{serial}"), "output_index": output_index, "content_index": 0, "delta": piece, "logprobs": []}),
        );
    }

    /// The message's whole text (or refusal), then the finished message item.
    fn close_message(&mut self, at: usize, text: &str, refused: bool) {
        let serial = self.serial;
        let item = message_item(serial, Some(text), refused);
        if refused {
            self.send(
                "response.refusal.done",
                json!({"item_id": format!("msg_mock_{serial}"), "output_index": at, "content_index": 0, "refusal": text}),
            );
        } else {
            self.send(
                "response.output_text.done",
                json!({"item_id": format!("msg_mock_{serial}"), "output_index": at, "content_index": 0, "text": text}),
            );
        }
        self.finish_item(at, item);
    }

    /// The `i`th function call: its item, its arguments in many pieces, the finished item.
    fn call(&mut self, i: usize, call: &answers::Call) {
        let at = self.add_item(call_item(i, call, None));
        for piece in pieces(&call.arguments) {
            self.send(
                "response.function_call_arguments.delta",
                json!({"item_id": format!("fc_{i}"), "output_index": at, "delta": piece}),
            );
        }
        self.send(
            "response.function_call_arguments.done",
            json!({"item_id": format!("fc_{i}"), "output_index": at, "name": call.name, "arguments": call.arguments}),
        );
        self.finish_item(at, call_item(i, call, Some(&call.arguments)));
    }

    /// Ends the stream early the way the fault says; `None` lets it go on.
    fn fault(&mut self, fault: Option<Fault>) -> Option<Vec<ReplyStep>> {
        match fault? {
            f @ (Fault::Reset | Fault::Cut | Fault::Stall) => self.script.break_off(f),
            Fault::ErrorEvent => self.send(
                "error",
                json!({"code": "server_error", "message": "The model is overloaded mid-stream.", "param": null}),
            ),
            Fault::Failed => self.lifecycle(
                "response.failed",
                "failed",
                json!({"error": {"code": "server_error", "message": "The server had an error while processing your request."}}),
            ),
            Fault::ContentFilter => self.lifecycle(
                "response.incomplete",
                "incomplete",
                json!({"incomplete_details": {"reason": "content_filter"}}),
            ),
            // A terminal event whose status is no finish (a dropped request).
            Fault::Abort => self.lifecycle("response.completed", "cancelled", json!({})),
            // Faults that strike before the stream, or after the answer.
            _ => return None,
        }
        Some(std::mem::take(&mut self.script.steps))
    }

    /// The terminal event, with the output and usage (none under `UsageMode::None`); the
    /// answer is whole once it is out.
    fn end(mut self, plan: StreamPlan) -> Vec<ReplyStep> {
        let (kind, status, details) = ending(plan.finish);
        let reported = match self.script.config.usage {
            UsageMode::None => Value::Null,
            UsageMode::Separate | UsageMode::InLastChunk => usage(&plan.usage),
        };
        let output = std::mem::take(&mut self.output);
        self.lifecycle(
            kind,
            status,
            json!({"output": output, "usage": reported, "incomplete_details": details}),
        );
        if !plan.replay {
            self.script.steps.push(ReplyStep::Generated {
                key: plan.key,
                text: plan.text,
                calls: plan.calls,
            });
        }
        self.script.steps
    }
}

/// A streamed answer: `response.created`, the reasoning, the message's text deltas, each
/// function call (its arguments in many pieces), then `response.completed` (or
/// `response.incomplete` at the token ceiling) with the output and usage. Faults strike
/// after the first half of the text, as in chat completions.
fn stream(mut script: Script<'_>, serial: u64, plan: StreamPlan) -> Vec<ReplyStep> {
    script.begin();
    let response = response(script.config, serial);
    let mut e = Events {
        script,
        sequence: 0,
        response,
        output: Vec::new(),
        serial,
    };
    e.lifecycle("response.created", "in_progress", json!({}));
    e.lifecycle("response.in_progress", "in_progress", json!({}));
    e.reasoning(&plan.reasoning);
    let refused = plan.finish == "refusal";
    let message =
        (!plan.pieces.is_empty() || plan.calls.is_empty()).then(|| e.open_message(refused));
    let at = message.unwrap_or(0);
    let cut_at = (plan.pieces.len() / 2).max(1).min(plan.pieces.len());
    for piece in &plan.pieces[..cut_at] {
        e.text_delta(at, piece, refused);
    }
    if let Some(end) = e.fault(plan.fault) {
        return end;
    }
    for piece in &plan.pieces[cut_at..] {
        e.text_delta(at, piece, refused);
    }
    if let Some(at) = message {
        e.close_message(at, &plan.text, refused);
    }
    for (i, call) in plan.calls.iter().enumerate() {
        e.call(i, call);
    }
    // The answer is out, but the event that ends the response never comes: a cut one.
    if plan.fault == Some(Fault::CutBeforeEnd) {
        return e.script.steps;
    }
    e.end(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_as_the_chat_body_the_model_answers() {
        let chat = as_chat(
            &json!({
                "model": "m", "stream": true, "instructions": "Be brief.", "max_output_tokens": 9,
                "input": [
                    {"role": "developer", "content": [{"type": "input_text", "text": "Sum."}]},
                    {"type": "message", "role": "user", "content": "1+1"},
                    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c", "output": "2"},
                ],
                "tools": [{"type": "function", "name": "f", "parameters": {}}],
                "text": {"format": {"type": "json_schema", "name": "s", "schema": {}}},
            }),
            &mut FilesRead::default(),
        )
        .unwrap();
        assert_eq!(
            chat,
            json!({
                "model": "m", "stream": true, "max_tokens": 9,
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "system", "content": "Sum."},
                    {"role": "user", "content": "1+1"},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c", "content": "2"},
                ],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {}}},
            })
        );
        assert!(as_chat(&json!({"messages": []}), &mut FilesRead::default()).is_err());
        assert!(
            as_chat(
                &json!({"input": [{"type": "image"}]}),
                &mut FilesRead::default()
            )
            .is_err()
        );
        assert_eq!(
            as_chat(
                &json!({"input": "hi", "text": {"format": {"type": "json_object"}}}),
                &mut FilesRead::default()
            )
            .unwrap()["response_format"],
            json!({"type": "json_object"})
        );
    }

    #[test]
    fn arguments_go_in_pieces() {
        assert_eq!(pieces(r#"{"a":"é"}"#), [r#"{"a"#, r#"":""#, r#"é"}"#]);
        assert!(pieces("").is_empty());
    }
}
