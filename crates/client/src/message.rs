//! What a request carries: the chat messages, as rendered from a variant and sent.

use serde::{Deserialize, Serialize};

use super::attachment::Placed;

/// A rendered chat message, as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    /// Its text; the files it carries sit between its bytes (`files`).
    pub content: String,
    /// The files it carries (images, documents, audio), each at a byte of `content`, in
    /// order (docs/guide/attachments.md). A message without any is sent as it always was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<Placed>,
    /// Anything else a turn of a case's history carries (`tool_calls` on an assistant turn,
    /// `tool_call_id` on a tool result, `name`), passed through as written.
    #[serde(flatten, default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl ChatMessage {
    /// A plain message.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            files: Vec::new(),
            extra: serde_json::Map::new(),
        }
    }
}
