//! The wire protocol behind one trait: how a job becomes an HTTP request, how a streamed
//! body's events add up to an answer, what rate-limit headers and error bodies say. The
//! client core ([`super::Client`]: deadlines, retries, gates, replicas) knows no JSON field
//! names. An endpoint names its protocol ([`ProtocolKind`], `endpoint.protocol` in a bench,
//! `--protocol` on the command line): OpenAI chat completions ([`super::openai::OpenAiChat`]),
//! OpenAI's Responses API ([`super::responses::OpenAiResponses`]) or Anthropic messages
//! ([`super::anthropic::AnthropicMessages`]). Another protocol is one new file implementing
//! [`Protocol`] and one variant of [`ProtocolKind`].

use super::transport::RequestBody;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attachment::{FileTokens, Kind};
use super::{ApiKey, JobRequest};

/// The wire protocol an endpoint speaks (docs/guide/real-model.md).
// As a bench (`endpoint.protocol`) and `run.json` name it (read by its name, so an unknown
// one is told the names this build knows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProtocolKind {
    /// OpenAI chat completions: `POST …/chat/completions`, streamed as server-sent events.
    #[default]
    OpenaiChat,
    /// OpenAI's Responses API: `POST …/responses`, streamed as named server-sent events.
    OpenaiResponses,
    /// Anthropic messages: `POST …/messages`, streamed as named server-sent events.
    AnthropicMessages,
}

impl ProtocolKind {
    /// Every protocol this build speaks.
    pub const ALL: [ProtocolKind; 3] = [
        ProtocolKind::OpenaiChat,
        ProtocolKind::OpenaiResponses,
        ProtocolKind::AnthropicMessages,
    ];

    /// Its name, as written in a bench.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::OpenaiChat => "openai-chat",
            ProtocolKind::OpenaiResponses => "openai-responses",
            ProtocolKind::AnthropicMessages => "anthropic-messages",
        }
    }

    /// Whether this is the default (`openai-chat`), which `run.json` leaves unwritten.
    pub fn is_default(&self) -> bool {
        *self == ProtocolKind::default()
    }

    /// The names this build knows, for an error message: `openai-chat`, `openai-responses`,
    /// `anthropic-messages`.
    pub(crate) fn known() -> String {
        Self::ALL
            .iter()
            .map(|p| format!("`{}`", p.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::str::FromStr for ProtocolKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown protocol `{s}`; this version speaks {}",
                    Self::known()
                )
            })
    }
}

impl<'de> Deserialize<'de> for ProtocolKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for ProtocolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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

impl Usage {
    /// Adds `other`'s token counts to these (the parts of one job: a batch's lines, an
    /// agent loop's steps).
    pub fn add_tokens(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
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

/// What a finish reason means, once a protocol has read it. Each protocol keeps a closed
/// list of the reasons that finish an answer; anything else is no finish
/// ([`Streamed::unrecognised_finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishKind {
    /// The model ended its answer (`stop`, `tool_calls`, …): graded as given.
    Stopped,
    /// The model hit its token ceiling (`length`): a real answer, cut short, graded.
    Truncated,
    /// The provider withheld the answer (`content_filter`): counted apart, never graded.
    Filtered,
    /// The model declined to answer (Anthropic's `refusal`): an answer, scored as failed
    /// with the cause `refused` (the text so far is [`Streamed::refusal`]).
    Refused,
}

/// Why the model stopped, in the protocol's own word (kept as sent, for the journal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// The reason as the server named it (`stop`, `length`, `tool_calls`, …).
    pub reason: String,
    pub kind: FinishKind,
}

/// A function call the model made, assembled from the stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, as the server gave it (empty if none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, possibly invalid.
    pub arguments: String,
}

/// What the events of one attempt add up to, whatever the protocol.
#[derive(Debug, Default)]
pub struct Streamed {
    pub text: String,
    /// Tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// The protocol's own name for each of `tool_calls`, in the same order (a Responses
    /// item id), so that a later fragment finds its call.
    pub tool_call_items: Vec<String>,
    /// Reasoning deltas, kept apart from the answer.
    pub reasoning: String,
    /// What the model said in declining to answer (chat completions' `refusal`, a
    /// Responses refusal part): set when it refused, whatever `text` holds.
    pub refusal: Option<String>,
    /// The first real finish: it ends the answer. Later duplicates, and any text after it,
    /// are ignored.
    pub finish: Option<Finish>,
    /// The last finish reason the protocol does not count as a finish (vLLM's `abort`,
    /// OpenRouter's `error`, `cancelled`, an unknown word): the stream goes on as if none
    /// had come, and if it ends without a real finish the value is recorded with the cut.
    pub unrecognised_finish: Option<String>,
    /// A finish the protocol has read but counts only once the event that ends the stream
    /// confirms it (Anthropic's `stop_reason` before `message_stop`): a stream that ends
    /// before that event is cut.
    pub unconfirmed_finish: Option<Finish>,
    pub usage: Option<Usage>,
    /// The model name the server echoed.
    pub model: Option<String>,
    /// The server reported an error inside the stream.
    pub error: Option<String>,
    /// The error says the request itself is at fault (an invalid prompt or parameter):
    /// trying again would fail the same way, so the job fails at once.
    pub error_is_final: bool,
    /// The stream said it is over (`data: [DONE]`, or the protocol's terminal event).
    pub done: bool,
    /// Events that were ignored, counted for the journal: payloads that did not parse, text
    /// sent after the finish, usage with impossible counts.
    pub ignored: u64,
}

impl Streamed {
    /// Adds answer text, or (with `reasoning`) the model's reasoning, kept apart; true when
    /// there was some.
    pub(crate) fn add_text(&mut self, text: &str, reasoning: bool) -> bool {
        if text.is_empty() {
            return false;
        }
        if reasoning {
            self.reasoning.push_str(text);
        } else {
            self.text.push_str(text);
        }
        true
    }

    /// Adds to what the model said in declining; true when there was some (an empty
    /// refusal, sent beside every answer by some servers, is none).
    pub(crate) fn add_refusal(&mut self, text: &str) -> bool {
        if text.is_empty() {
            return false;
        }
        self.refusal.get_or_insert_with(String::new).push_str(text);
        true
    }

    /// Keeps what a `usage` object said; one with impossible counts is ignored and counted
    /// (the job's usage is then estimated, unless a later one is believable).
    pub(crate) fn note_usage(&mut self, read: Result<Option<Usage>, InvalidUsage>) {
        match read {
            Ok(Some(u)) => self.usage = Some(u),
            Err(InvalidUsage) => self.ignored += 1,
            Ok(None) => {}
        }
    }
}

/// A `usage` object that is present but cannot be believed (a negative, fractional or
/// non-numeric count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InvalidUsage;

/// The counts of a server's `usage` object, read at JSON pointers.
pub(crate) struct UsageCounts<'a>(&'a Value);

impl<'a> UsageCounts<'a> {
    /// `None` when there is no usage (`null`); `Err` when it is not an object.
    pub(crate) fn of(v: &'a Value) -> Result<Option<Self>, InvalidUsage> {
        match v {
            Value::Null => Ok(None),
            Value::Object(_) => Ok(Some(UsageCounts(v))),
            _ => Err(InvalidUsage),
        }
    }

    /// The count at `pointer` (`/prompt_tokens`): `None` when absent or null, `Err` when it
    /// is not a whole number ≥ 0.
    pub(crate) fn get(&self, pointer: &str) -> Result<Option<u64>, InvalidUsage> {
        match self.0.pointer(pointer) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or(InvalidUsage),
        }
    }

    /// The usage a server reported, its four counts read at these pointers (prompt,
    /// completion, cached, reasoning); absent counts are 0. `Ok(None)` when there is no
    /// usage object; `Err` when a count is not a whole number ≥ 0.
    pub(crate) fn read(
        v: &'a Value,
        [prompt, completion, cached, reasoning]: [&str; 4],
    ) -> Result<Option<Usage>, InvalidUsage> {
        let Some(counts) = UsageCounts::of(v)? else {
            return Ok(None);
        };
        let n = |pointer: &str| counts.get(pointer).map(Option::unwrap_or_default);
        Ok(Some(Usage {
            prompt_tokens: n(prompt)?,
            completion_tokens: n(completion)?,
            cached_tokens: n(cached)?,
            reasoning_tokens: n(reasoning)?,
            estimated: false,
        }))
    }
}

/// A form of request a server may refuse, richest first: a protocol may fall back to a
/// plainer one when a server rejects an optional feature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dialect(pub u8);

/// A base URL the protocol recognises as a mistake.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaseUrlMistake {
    /// It already names the endpoint's `path`, which the protocol appends.
    #[error("base URL `{url}` already ends in /{path}; give the part before it (…/v1)")]
    NamesTheEndpoint { url: String, path: &'static str },
}

impl BaseUrlMistake {
    /// The same mistake, naming the URL as `shown` (without its credentials).
    pub fn shown_as(self, shown: &str) -> Self {
        match self {
            BaseUrlMistake::NamesTheEndpoint { path, .. } => BaseUrlMistake::NamesTheEndpoint {
                url: shown.to_string(),
                path,
            },
        }
    }
}

/// The wire protocol.
pub trait Protocol: Send + Sync {
    /// The path its requests go to under a base URL (`chat/completions`).
    fn path(&self) -> &'static str;

    /// Checks a user's base URL for mistakes this protocol can recognise (one that already
    /// names the endpoint's path).
    fn check_base_url(&self, url: &str) -> Result<(), BaseUrlMistake> {
        check_not_named(url, self.path())
    }

    /// The URL requests for `model` are sent to, for a base URL as users paste it. The
    /// three protocols here put the model in the body, not the URL; a protocol that routes
    /// by it in the path (Gemini's `models/{model}:streamGenerateContent`) overrides this.
    fn url(&self, base_url: &str, model: &str) -> String {
        let _ = model;
        super::secrets::join_path(base_url, self.path())
    }

    /// The request body for a job.
    fn body(&self, model: &str, job: &JobRequest, dialect: Dialect) -> RequestBody;

    /// Whether a file of `kind` (by URL when `by_url`) can go in a turn of `role`; why not
    /// when it cannot, naming what the protocol takes. Asked for every file of every case
    /// when the bench is loaded, so a file a protocol has no part for is refused before
    /// anything is sent, never dropped (docs/guide/attachments.md).
    fn carries(&self, kind: Kind, role: &str, by_url: bool) -> Result<(), String>;

    /// The request headers: a JSON body, a stream of events back, the job's idempotency key
    /// (the same on every attempt), and the key as [`Protocol::key_headers`] sends it.
    fn headers(&self, job: &JobRequest, key: Option<&ApiKey>) -> Vec<(String, String)> {
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("accept".to_string(), "text/event-stream".to_string()),
            ("idempotency-key".to_string(), job.idempotency_key.clone()),
        ];
        headers.extend(self.key_headers(key));
        headers
    }

    /// After a response with `status` to a request in `dialect`, a plainer dialect worth
    /// trying once at once (the server may not know an optional feature), if any.
    fn fallback(&self, job: &JobRequest, dialect: Dialect, status: u16) -> Option<Dialect>;

    /// Whether `dialect` asks for usage in the stream (recorded on each attempt).
    fn asks_for_usage(&self, dialect: Dialect) -> bool;

    /// Adds one event of a streamed body; returns true when it carried answer or
    /// reasoning text (the first such event is the first token).
    fn decode(&self, streamed: &mut Streamed, event: &str, data: &str) -> bool;

    /// Adds a whole, non-streamed answer (a provider batch's result) as its stream would
    /// have added up: it goes through [`Protocol::decode`], so the same closed list of
    /// finishes applies and an answer without one is no answer.
    fn whole(&self, streamed: &mut Streamed, body: &Value);

    /// The human part of an error response body, whole (the client scrubs secrets from
    /// it, then cuts it to length).
    fn error_message(&self, body: &str) -> String;

    /// Requests left in the provider's rate-limit window, when its headers say.
    fn remaining_requests(&self, headers: &[(String, String)]) -> Option<u64>;

    /// The headers that carry the key (for every request: jobs and the models probe).
    fn key_headers(&self, key: Option<&ApiKey>) -> Vec<(String, String)>;

    /// Asks for a reply in JSON where the protocol can (a judge's verdict): the request
    /// parameters it takes. A server that refuses them is asked again without
    /// ([`Protocol::fallback`]).
    fn ask_for_json(&self, params: &mut Map<String, Value>);

    /// Where the endpoint lists its models, for the check before the first job; `None`
    /// when the protocol has no such list.
    fn models_url(&self, base_url: &str) -> Option<String>;

    /// The model ids in a models list's body; `None` when it is not one.
    fn model_ids(&self, body: &[u8]) -> Option<Vec<String>>;

    /// Its provider's batch API (docs/guide/batch.md) and where a batch's requests go;
    /// `None` when the provider has none, and then `--batch` is refused before anything is
    /// sent.
    fn batch(&self) -> Option<BatchRoute>;

    /// What a file costs in prompt tokens by this provider's rule (the estimate before a
    /// run: [`FileTokens`] holds each provider's count).
    fn file_tokens(&self, tokens: FileTokens) -> u64;
}

/// A provider's batch API as its protocol names it: which API, and the path under `/v1` a
/// batch's request lines name (OpenAI's batches hold requests of several endpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRoute {
    pub api: BatchApiKind,
    pub url: &'static str,
}

/// The batch APIs this build speaks (`batch/`: each kind's implementation, picked by an
/// exhaustive match, so a new one is written where it is named).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchApiKind {
    /// OpenAI's: a JSONL file uploaded to `/v1/files`, submitted to `/v1/batches`.
    OpenAi,
    /// Anthropic's Message Batches: `/v1/messages/batches`.
    Anthropic,
}

/// Refuses a base URL that already ends in the endpoint's `path`, which the protocol
/// appends.
pub(crate) fn check_not_named(url: &str, path: &'static str) -> Result<(), BaseUrlMistake> {
    if super::secrets::path_of(url)
        .trim_end_matches('/')
        .ends_with(&format!("/{path}"))
    {
        return Err(BaseUrlMistake::NamesTheEndpoint {
            url: url.to_string(),
            path,
        });
    }
    Ok(())
}

/// The ids of a models list shaped `{"data": [{"id": …}, …]}` (OpenAI's and Anthropic's
/// alike); `None` when the body is not one.
pub(crate) fn listed_model_ids(body: &[u8]) -> Option<Vec<String>> {
    let list = serde_json::from_slice::<Value>(body).ok()?;
    let data = list.get("data")?.as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str).map(String::from))
            .collect(),
    )
}

/// The human part of an error response body: its `error` member as `message_of` reads it,
/// else the whole body, trimmed.
pub(crate) fn error_in_body(body: &str, message_of: fn(&Value) -> String) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").map(message_of))
        .unwrap_or_else(|| body.trim().to_string())
}

/// A count in the header `name` (lowercase), when it holds a whole number.
pub(crate) fn header_count(headers: &[(String, String)], name: &str) -> Option<u64> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.trim().parse::<u64>().ok())
}

/// Cuts `s` to at most `max` bytes on a character boundary, marking the cut with `…`.
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
    fn protocols_are_named_as_a_bench_writes_them() {
        for p in ProtocolKind::ALL {
            assert_eq!(p.name().parse::<ProtocolKind>(), Ok(p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
            assert_eq!(
                serde_json::from_value::<ProtocolKind>(p.name().into()).ok(),
                Some(p)
            );
        }
        let e = serde_json::from_str::<ProtocolKind>(r#""smoke-signals""#).unwrap_err();
        assert!(
            e.to_string().contains("`openai-chat`, `openai-responses`"),
            "{e}"
        );
        let e = "anthropic".parse::<ProtocolKind>().unwrap_err();
        assert!(
            e.contains("unknown protocol `anthropic`") && e.contains("`openai-chat`"),
            "{e}"
        );
        assert!(ProtocolKind::default().is_default());
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
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncate("héllo", 2), "h…");
        assert_eq!(truncate("abc", 3), "abc");
    }
}
