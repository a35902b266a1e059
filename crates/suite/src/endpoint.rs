//! One endpoint as a bench writes it — the `endpoint:` block, and each of `endpoints:` —
//! and what both are checked by: where it is (`EndpointSpec`, `UrlList`, `check_base_url`),
//! what it costs (`Price`, `check_price`) and how fast to send to it (`limits:`, resolved
//! over the bench's into `client::Limits`).

use serde::{Deserialize, Serialize};

use super::error::{FilePos, InputError, InputErrors};
use promptgauge_client::ProtocolKind;
use promptgauge_client::limits::{Limits, RawLimits};

/// `endpoint:` — where the bench's one model answers; --base-url, --model and the variables
/// override it (docs/guide/real-model.md).
// Resolved against flags and env by `cli`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Endpoint")]
pub struct EndpointSpec {
    /// One URL, or a list of replicas serving the same model, ending in `/v1`
    /// [default: --base-url, $PROMPTGAUGE_BASE_URL, $OPENAI_BASE_URL, $LLM_BASE_URL; none:
    /// the built-in simulator answers].
    pub base_url: Option<UrlList>,
    /// The model's name, as the server knows it.
    pub model: Option<String>,
    /// The NAME of the variable holding the API key, never the key [default:
    /// OPENAI_API_KEY, then LLM_API_KEY].
    pub api_key_env: Option<String>,
    /// The wire protocol it speaks (`openai-chat` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolKind>,
    /// `api-key`: the key goes in the `api-key` header (Azure OpenAI) instead of the
    /// protocol's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_header: Option<promptgauge_client::KeyHeader>,
    /// `batch: true`: its jobs go through the provider's batch API, not streamed
    /// (docs/guide/batch.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<bool>,
}

/// `base_url: http://…/v1` or `base_url: [http://a/v1, http://b/v1]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum UrlList {
    One(String),
    Many(Vec<String>),
}

impl UrlList {
    /// The URLs, one or several.
    pub fn urls(&self) -> Vec<String> {
        match self {
            UrlList::One(u) => vec![u.clone()],
            UrlList::Many(us) => us.clone(),
        }
    }
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// USD per million prompt tokens.
    #[schemars(range(min = 0))]
    pub input_per_mtok: f64,
    /// USD per million answer tokens.
    #[schemars(range(min = 0))]
    pub output_per_mtok: f64,
    /// USD per million prompt tokens the provider served from its cache [default: the
    /// input price].
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
    /// Through the provider's batch API (`--batch`): its own prices, or `batch_discount`
    /// (the share taken off, 0.5 for half price) off the streaming ones. Neither: batched
    /// jobs are costed at the streaming price, and `check` says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_input_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_output_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_discount: Option<f64>,
}

impl Price {
    /// USD per million tokens, at the streaming price.
    pub fn streaming(input_per_mtok: f64, output_per_mtok: f64) -> Price {
        Price {
            input_per_mtok,
            output_per_mtok,
            cached_input_per_mtok: None,
            batch_input_per_mtok: None,
            batch_output_per_mtok: None,
            batch_discount: None,
        }
    }

    /// What `u` cost at this price, in USD: cached prompt tokens at the cached price.
    pub fn cost(&self, u: &promptgauge_client::Usage) -> f64 {
        let cached = u.cached_tokens.min(u.prompt_tokens) as f64;
        let fresh = u.prompt_tokens as f64 - cached;
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        (fresh * self.input_per_mtok
            + cached * cached_price
            + u.completion_tokens as f64 * self.output_per_mtok)
            / 1e6
    }

    /// Whether it says what batched jobs cost.
    pub fn has_batch_price(&self) -> bool {
        self.batch_discount.is_some()
            || self.batch_input_per_mtok.is_some()
            || self.batch_output_per_mtok.is_some()
    }

    /// The prices batched jobs are costed at: the batch prices where given, else the
    /// streaming ones less `batch_discount` (cached input tokens too), else the streaming
    /// ones.
    pub fn batched(&self) -> Price {
        let off = 1.0 - self.batch_discount.unwrap_or(0.0);
        let input = self
            .batch_input_per_mtok
            .unwrap_or(self.input_per_mtok * off);
        // Cached input keeps its ratio to fresh input.
        let cached = self.cached_input_per_mtok.map(|c| {
            if self.input_per_mtok > 0.0 {
                c * input / self.input_per_mtok
            } else {
                c * off
            }
        });
        Price {
            input_per_mtok: input,
            output_per_mtok: self
                .batch_output_per_mtok
                .unwrap_or(self.output_per_mtok * off),
            cached_input_per_mtok: cached,
            batch_input_per_mtok: None,
            batch_output_per_mtok: None,
            batch_discount: None,
        }
    }
}

/// Prices are numbers ≥ 0.
pub(super) fn check_price(
    price: Option<&Price>,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<(), InputErrors> {
    if let Some(p) = price {
        let prices = [
            Some(p.input_per_mtok),
            Some(p.output_per_mtok),
            p.cached_input_per_mtok,
            p.batch_input_per_mtok,
            p.batch_output_per_mtok,
        ];
        if prices
            .into_iter()
            .flatten()
            .any(|x| !x.is_finite() || x < 0.0)
        {
            return Err(InputError::new(here("price"), "prices must be numbers ≥ 0")
                .fix("prices are USD per million tokens, e.g. input_per_mtok: 0.40")
                .into());
        }
        if p.batch_discount
            .is_some_and(|d| !d.is_finite() || !(0.0..1.0).contains(&d))
        {
            return Err(InputError::new(
                here("price.batch_discount"),
                "batch_discount is the share taken off the streaming price, from 0 up to (not including) 1",
            )
            .fix("write batch_discount: 0.5 for half price")
            .into());
        }
    }
    Ok(())
}

/// Why a base URL cannot be used. Each names the URL without its credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaseUrlError {
    #[error("base URL `{0}` has no http:// or https:// scheme")]
    NoScheme(String),
    #[error("base URL `{0}` has no host")]
    NoHost(String),
    /// What the HTTP client would refuse (a port out of range, a broken IPv6 address).
    #[error("base URL `{shown}` is not a URL: {reason}")]
    NotAUrl { shown: String, reason: String },
    #[error("{0}")]
    Protocol(promptgauge_client::protocol::BaseUrlMistake),
}

/// A base URL must be absolute http(s), and make sense to the wire protocol (which appends
/// its own path, e.g. `/chat/completions`).
pub fn check_base_url(url: &str, protocol: ProtocolKind) -> Result<(), BaseUrlError> {
    if url == "mock" {
        return Ok(());
    }
    // Errors show the URL without its credentials.
    let shown = promptgauge_client::secrets::redact_url(url);
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| BaseUrlError::NoScheme(shown.to_string()))?;
    if rest.trim_matches('/').is_empty() || rest.contains(char::is_whitespace) {
        return Err(BaseUrlError::NoHost(shown.to_string()));
    }
    // What the HTTP client will refuse (a port out of range, a broken IPv6 address, no
    // host after the credentials) is refused now, before anything is sent.
    match reqwest::Url::parse(url) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => {}
        Ok(_) => return Err(BaseUrlError::NoHost(shown.to_string())),
        Err(e) => {
            return Err(BaseUrlError::NotAUrl {
                shown: shown.to_string(),
                reason: e.to_string(),
            });
        }
    }
    protocol
        .build()
        .check_base_url(url)
        .map_err(|e| BaseUrlError::Protocol(e.shown_as(&shown)))
}

/// Limits as written, over `base` (the defaults, or the bench's for the judge).
pub(super) fn resolve_limits(
    raw: RawLimits,
    base: &Limits,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<Limits, InputError> {
    raw.over(base).map_err(|e| {
        InputError::new(here(e.key), e.to_string())
            .fix(format!("set limits.{} to a positive whole number", e.key))
    })
}
