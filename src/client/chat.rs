//! The chat-completions stream: what the events of one attempt add up to.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Token counts for one job, from the server's `usage` or estimated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    /// True when the server sent no usage and these are estimates (about 4 characters a token).
    pub estimated: bool,
}

/// A `usage` object that is present but cannot be believed (a negative, fractional or
/// non-numeric count): it is ignored, and the job's usage is estimated instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidUsage;

impl Usage {
    /// `Ok(None)` when there is no usage object; `Err` when its counts are not whole numbers
    /// ≥ 0. Absent counts are 0.
    fn from_json(v: &Value) -> Result<Option<Usage>, InvalidUsage> {
        let Some(obj) = v.as_object() else {
            return if v.is_null() {
                Ok(None)
            } else {
                Err(InvalidUsage)
            };
        };
        let n = |v: Option<&Value>| match v {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v.as_u64().ok_or(InvalidUsage),
        };
        Ok(Some(Usage {
            prompt_tokens: n(obj.get("prompt_tokens"))?,
            completion_tokens: n(obj.get("completion_tokens"))?,
            cached_tokens: n(v.pointer("/prompt_tokens_details/cached_tokens"))?,
            reasoning_tokens: n(v.pointer("/completion_tokens_details/reasoning_tokens"))?,
            estimated: false,
        }))
    }

    /// A rough count for servers that report none; marked as estimated.
    pub fn estimate(prompt_chars: usize, completion: &str, reasoning: &str) -> Usage {
        let tokens = |chars: usize| chars.div_ceil(4) as u64;
        let reasoning_tokens = tokens(reasoning.chars().count());
        Usage {
            prompt_tokens: tokens(prompt_chars),
            completion_tokens: tokens(completion.chars().count()) + reasoning_tokens,
            cached_tokens: 0,
            reasoning_tokens,
            estimated: true,
        }
    }
}

/// Accumulates the `data:` payloads of one streamed attempt.
#[derive(Debug, Default)]
pub struct ChatStream {
    pub text: String,
    /// `reasoning_content` / `reasoning` deltas: kept apart from the answer.
    pub reasoning: String,
    /// The first real (non-empty) `finish_reason` seen: it ends the answer. Later
    /// duplicates, and any text after it, are ignored.
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
    /// An `error` object in the stream.
    pub error: Option<String>,
    /// `data: [DONE]` arrived.
    pub done: bool,
    /// Events that were ignored, counted for the journal: `data:` payloads that were not
    /// JSON, text sent after the `finish_reason`, usage objects with impossible counts.
    pub ignored: u64,
}

impl ChatStream {
    /// Adds one event; returns true when it carried answer or reasoning text.
    pub fn push(&mut self, event_type: &str, data: &str) -> bool {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return false;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            if event_type == "error" {
                self.error = Some(truncate(data, 500));
            } else {
                self.ignored += 1;
            }
            return false;
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            self.error = Some(error_message(err));
            return false;
        }
        if event_type == "error" {
            self.error = Some(truncate(data, 500));
            return false;
        }
        if self.model.is_none() {
            self.model = v.get("model").and_then(Value::as_str).map(String::from);
        }
        match v.get("usage").map(Usage::from_json) {
            Some(Ok(Some(u))) => self.usage = Some(u),
            Some(Err(InvalidUsage)) => self.ignored += 1,
            Some(Ok(None)) | None => {}
        }
        let mut token = false;
        let Some(choices) = v.get("choices").and_then(Value::as_array) else {
            return false;
        };
        // One choice is requested; a server that sends more has them indexed, and 0 is ours.
        for choice in choices
            .iter()
            .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            if let Some(delta) = choice.get("delta") {
                let texts = [
                    ("content", false),
                    ("reasoning_content", true),
                    ("reasoning", true),
                ];
                for (key, reasoning) in texts {
                    let Some(s) = delta.get(key).and_then(Value::as_str) else {
                        continue;
                    };
                    if s.is_empty() {
                        continue;
                    }
                    // The first finish ends the answer: text after it is not part of it.
                    if self.finish_reason.is_some() {
                        self.ignored += 1;
                        continue;
                    }
                    token = true;
                    if reasoning {
                        self.reasoning.push_str(s);
                    } else {
                        self.text.push_str(s);
                    }
                }
            }
            // `""` (sent on every chunk by some servers) is no finish reason.
            if self.finish_reason.is_none()
                && let Some(r) = choice
                    .get("finish_reason")
                    .and_then(Value::as_str)
                    .filter(|r| !r.is_empty())
            {
                self.finish_reason = Some(r.to_string());
            }
        }
        token
    }
}

/// The human part of an OpenAI-style error object (or a bare string).
pub fn error_message(err: &Value) -> String {
    let text = match err {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| err.to_string()),
        other => other.to_string(),
    };
    truncate(&text, 500)
}

pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulates_content_finish_and_separate_usage() {
        let mut s = ChatStream::default();
        assert!(!s.push(
            "",
            r#"{"model":"m-1","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#
        ));
        assert!(s.push("", r#"{"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null}],"obfuscation":"x"}"#));
        assert!(s.push(
            "",
            r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#
        ));
        s.push(
            "",
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        );
        s.push("", r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}}"#);
        s.push("", "[DONE]");
        assert_eq!(s.text, "Hello");
        assert_eq!(s.finish_reason.as_deref(), Some("stop"));
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
        let mut s = ChatStream::default();
        s.push("", r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#);
        assert_eq!(s.usage.unwrap().prompt_tokens, 3);
    }

    #[test]
    fn reasoning_is_kept_apart() {
        let mut s = ChatStream::default();
        assert!(s.push(
            "",
            r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#
        ));
        s.push("", r#"{"choices":[{"delta":{"reasoning":" more"}}]}"#);
        s.push("", r#"{"choices":[{"delta":{"content":"B"}}]}"#);
        assert_eq!((s.reasoning.as_str(), s.text.as_str()), ("think more", "B"));
    }

    #[test]
    fn error_events_and_junk() {
        let mut s = ChatStream::default();
        s.push("", "not json");
        assert_eq!(s.ignored, 1);
        s.push(
            "",
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
        );
        assert_eq!(s.error.as_deref(), Some("overloaded"));
        let mut s = ChatStream::default();
        s.push("error", "boom");
        assert_eq!(s.error.as_deref(), Some("boom"));
    }

    #[test]
    fn estimates_are_marked() {
        let u = Usage::estimate(40, "abcdefgh", "");
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.estimated),
            (10, 2, true)
        );
    }

    #[test]
    fn an_empty_finish_reason_is_no_finish() {
        let mut s = ChatStream::default();
        s.push(
            "",
            r#"{"choices":[{"delta":{"content":"4"},"finish_reason":""}]}"#,
        );
        assert_eq!(s.finish_reason, None);
        s.push(
            "",
            r#"{"choices":[{"delta":{"content":"2"},"finish_reason":""}]}"#,
        );
        s.push("", r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#);
        assert_eq!(
            (s.text.as_str(), s.finish_reason.as_deref()),
            ("42", Some("length"))
        );
    }

    #[test]
    fn text_after_the_first_finish_is_ignored_and_counted() {
        let mut s = ChatStream::default();
        s.push(
            "",
            r#"{"choices":[{"delta":{"content":"B"},"finish_reason":"stop"}]}"#,
        );
        s.push("", r#"{"choices":[{"delta":{"content":" and more"}}]}"#);
        s.push("", r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#);
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
            let mut s = ChatStream::default();
            s.push("", &format!(r#"{{"choices":[],"usage":{bad}}}"#));
            assert_eq!((s.usage, s.ignored), (None, 1), "{bad}");
        }
        let mut s = ChatStream::default();
        s.push(
            "",
            r#"{"choices":[],"usage":{"prompt_tokens":18446744073709551615}}"#,
        );
        assert_eq!(s.usage.unwrap().prompt_tokens, u64::MAX);
        let mut s = ChatStream::default();
        s.push("", r#"{"choices":[],"usage":null}"#);
        assert_eq!((s.usage, s.ignored), (None, 0));
    }
}
