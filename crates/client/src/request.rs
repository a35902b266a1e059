//! What one request carries to a protocol: the API key (sent in one header, shown nowhere
//! else) and the logical request every attempt sends. Below the protocols and the client,
//! which both use them.

use serde_json::{Map, Value};

use super::message::ChatMessage;

/// An API key. It is sent in one header and shown nowhere else.
#[derive(Clone)]
pub struct ApiKey(String, KeyHeader);

/// Which header carries the key: the protocol's own (a bearer `Authorization` for the
/// OpenAI protocols, `x-api-key` for Anthropic's), or `api-key` (Azure OpenAI's keys).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum KeyHeader {
    /// The protocol's own: a bearer `Authorization`, or Anthropic's `x-api-key`.
    #[default]
    Protocol,
    /// Azure OpenAI's `api-key` header.
    ApiKey,
}

impl ApiKey {
    /// Wraps a key read from the environment.
    pub fn new(key: String) -> Self {
        ApiKey(key, KeyHeader::Protocol)
    }

    /// The same key, sent in `header`.
    pub fn in_header(self, header: KeyHeader) -> Self {
        ApiKey(self.0, header)
    }

    /// The header that carries it.
    pub(crate) fn header(&self) -> KeyHeader {
        self.1
    }

    /// The value, for the one header that carries it and for [`Secrets`].
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(redacted)")
    }
}

/// One logical request.
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub messages: Vec<ChatMessage>,
    pub params: Map<String, Value>,
    /// Reused by every attempt of this job, so a server can deduplicate.
    pub idempotency_key: String,
    /// Tokens reserved against tokens_per_minute before each attempt: the estimated
    /// prompt tokens plus `max_tokens`.
    pub reserve_tokens: u32,
}
