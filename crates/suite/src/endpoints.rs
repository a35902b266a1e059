//! `endpoints:` — the models a bench can run on, each named, with its own server, key,
//! protocol, price, parameters, limits and headers (docs/guide/endpoints.md). A bench with the
//! single `endpoint:` block has none: that block is its one endpoint, as before.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::endpoint::{EndpointSpec, Price, UrlList, check_base_url, check_price, resolve_limits};
use super::error::{FilePos, InputError};
use promptgauge_client::Limits;
use promptgauge_client::ProtocolKind;
use promptgauge_client::limits::RawLimits;

/// One of `endpoints:` as written: a model the bench can run on (docs/guide/endpoints.md).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "NamedEndpoint")]
pub(super) struct RawNamedEndpoint {
    /// Letters, digits, `-`, `_` and `.`, at most 64: `--endpoints NAME` runs it.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"))]
    name: String,
    /// One URL, or a list of replicas serving the same model, ending in `/v1`.
    #[serde(default)]
    base_url: Option<UrlList>,
    /// The model's name, as the server knows it.
    #[serde(default)]
    model: Option<String>,
    /// The NAME of the variable holding the API key, never the key.
    #[serde(default)]
    api_key_env: Option<String>,
    /// The wire protocol it speaks [default: openai-chat].
    #[serde(default)]
    protocol: Option<ProtocolKind>,
    /// `api-key`: the key goes in Azure OpenAI's `api-key` header.
    #[serde(default)]
    key_header: Option<promptgauge_client::KeyHeader>,
    /// `true`: its jobs go through the provider's batch API (docs/guide/batch.md).
    #[serde(default)]
    batch: Option<bool>,
    /// Its price [default: the bench's `price`].
    #[serde(default)]
    price: Option<Price>,
    /// Request parameters over the bench's `params`, under a variant's.
    #[serde(default)]
    params: Map<String, Value>,
    /// Its gate, rate limits and deadlines, over the bench's `limits`.
    #[serde(default)]
    limits: RawLimits,
    /// Extra request headers: a value `${VAR}` is read from that variable when the run
    /// starts.
    #[serde(default)]
    #[schemars(schema_with = "header_values")]
    headers: Map<String, Value>,
}

/// `headers:` as the loader takes them: each value one line of text.
fn header_values(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": { "type": "string", "pattern": "^[^\\r\\n]*$" }
    })
}

/// A named endpoint: where one model answers, what it costs, how fast to send to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedEndpoint {
    pub name: String,
    pub spec: EndpointSpec,
    /// Its price; the bench's `price` where unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Request parameters over the bench's `params`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub params: Map<String, Value>,
    /// Its own gate, rate limits and deadlines (the bench's `limits` where unset).
    pub limits: Limits,
    /// Extra request headers, as written: a value `${VAR}` is read from that variable
    /// when the run starts (and scrubbed from everything shown, like a key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

/// Headers an endpoint may not set: the key goes by `api_key_env` (sent the protocol's
/// way), and the client owns the body's framing.
const OWNED_HEADERS: [&str; 8] = [
    "authorization",
    "api-key",
    "x-api-key",
    "content-type",
    "content-length",
    "host",
    "idempotency-key",
    "anthropic-version",
];

/// Whether `name` can name an endpoint: it appears in flags (`--endpoints a,b`), folder
/// names and reports.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.len() <= 64
}

/// Checks and resolves `endpoints:`, each over the bench's `limits`.
pub(super) fn named_endpoints(
    raw: Vec<RawNamedEndpoint>,
    limits: &Limits,
    here: &dyn Fn(&str) -> FilePos,
) -> Result<Vec<NamedEndpoint>, InputError> {
    let mut out: Vec<NamedEndpoint> = Vec::with_capacity(raw.len());
    for e in raw {
        let at = || here("endpoints");
        if !valid_name(&e.name) {
            return Err(InputError::new(
                at(),
                format!("endpoints: `{}` is not a usable name", e.name),
            )
            .fix("name endpoints with letters, digits, `-`, `_` or `.` (at most 64), e.g. hosted, local-qwen"));
        }
        if out.iter().any(|o| o.name == e.name) {
            return Err(
                InputError::new(at(), format!("endpoints: `{}` is named twice", e.name))
                    .fix("give each endpoint its own name"),
            );
        }
        for url in e.base_url.iter().flat_map(UrlList::urls) {
            check_base_url(&url, e.protocol.unwrap_or_default()).map_err(|err| {
                InputError::new(at(), format!("endpoint {}: {err}", e.name))
                    .fix("write the full URL, e.g. http://127.0.0.1:8000/v1, or `mock`")
            })?;
        }
        if let Some(p) = &e.price {
            check_price(Some(p), here).map_err(|_| {
                InputError::new(
                    at(),
                    format!("endpoint {}: prices must be numbers ≥ 0", e.name),
                )
                .fix("prices are USD per million tokens, e.g. input_per_mtok: 0.40")
            })?;
        }
        let headers = headers(&e.name, e.headers, &at)?;
        out.push(NamedEndpoint {
            name: e.name,
            spec: EndpointSpec {
                base_url: e.base_url,
                model: e.model,
                api_key_env: e.api_key_env,
                protocol: e.protocol,
                key_header: e.key_header,
                batch: e.batch,
            },
            price: e.price,
            params: e.params,
            limits: resolve_limits(e.limits, limits, here)?,
            headers,
        });
    }
    Ok(out)
}

/// An endpoint's `headers:`: text values, names a request can carry, none the client owns.
fn headers(
    endpoint: &str,
    raw: Map<String, Value>,
    at: &dyn Fn() -> FilePos,
) -> Result<Vec<(String, String)>, InputError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        let lower = name.to_ascii_lowercase();
        if OWNED_HEADERS.contains(&lower.as_str()) {
            let fix = if OWNED_HEADERS[..3].contains(&lower.as_str()) {
                "the key goes in the variable api_key_env names, and is sent the way the endpoint's protocol expects"
            } else {
                "leave it out: promptgauge sends it itself"
            };
            return Err(InputError::new(
                at(),
                format!("endpoint {endpoint}: headers.{name} is set by promptgauge"),
            )
            .fix(fix));
        }
        if out
            .iter()
            .any(|(n, _): &(String, String)| n.eq_ignore_ascii_case(&name))
        {
            return Err(InputError::new(
                at(),
                format!(
                    "endpoint {endpoint}: headers.{name} is given twice (header names ignore case)"
                ),
            )
            .fix("keep one"));
        }
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(InputError::new(
                at(),
                format!("endpoint {endpoint}: `{name}` is not a header name"),
            )
            .fix("header names are letters, digits and `-`, e.g. OpenAI-Organization"));
        }
        let Value::String(text) = value else {
            return Err(InputError::new(
                at(),
                format!("endpoint {endpoint}: headers.{name} must be text"),
            )
            .fix("quote it, or read it from a variable: \"${VAR}\""));
        };
        if text.contains(['\r', '\n']) {
            return Err(InputError::new(
                at(),
                format!("endpoint {endpoint}: headers.{name} holds a line break"),
            )
            .fix("a header value is one line"));
        }
        out.push((name, text));
    }
    Ok(out)
}

/// What a header value names: the variable of `${VAR}`, else `None` (the text itself).
pub fn variable_of(value: &str) -> Option<&str> {
    value
        .strip_prefix("${")
        .and_then(|v| v.strip_suffix('}'))
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// An endpoint added on the command line: `--endpoint NAME=URL[,model=M][,key_env=VAR]
/// [,protocol=P]`. It takes the bench's price, parameters and limits.
#[derive(Debug, Clone, PartialEq)]
pub struct AdHocEndpoint {
    pub name: String,
    pub spec: EndpointSpec,
}

impl std::str::FromStr for AdHocEndpoint {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let usage = "write NAME=URL[,model=M][,key_env=VAR][,protocol=P][,key_header=api-key], e.g. local=http://127.0.0.1:8000/v1,model=qwen";
        let mut parts = text.split(',');
        let (name, url) = parts
            .next()
            .and_then(|first| first.split_once('='))
            .ok_or_else(|| format!("`{text}` names no endpoint: {usage}"))?;
        let name = name.trim();
        if !valid_name(name) {
            return Err(format!(
                "`{name}` is not a usable endpoint name (letters, digits, `-`, `_`, `.`): {usage}"
            ));
        }
        let mut spec = EndpointSpec {
            base_url: Some(UrlList::One(url.trim().to_string())),
            ..EndpointSpec::default()
        };
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value: {usage}"))?;
            let value = value.trim().to_string();
            match key.trim() {
                "model" => spec.model = Some(value),
                "key_env" | "api_key_env" => spec.api_key_env = Some(value),
                "protocol" => spec.protocol = Some(value.parse()?),
                "key_header" => {
                    spec.key_header = Some(
                        serde_json::from_value(serde_json::Value::String(value.clone())).map_err(
                            |_| format!("key_header is `protocol` or `api-key`, not `{value}`"),
                        )?,
                    )
                }
                other => return Err(format!("unknown endpoint field `{other}`: {usage}")),
            }
        }
        check_base_url(url.trim(), spec.protocol.unwrap_or_default())
            .map_err(|e| format!("endpoint {name}: {e}"))?;
        Ok(AdHocEndpoint {
            name: name.to_string(),
            spec,
        })
    }
}

/// `--price [NAME=]IN,OUT[,CACHED]` (USD per million prompt, answer and cached prompt
/// tokens) or `--price [NAME=]0`:
/// what the run's endpoint costs, where the bench gives no price for it or gives it for
/// another (docs/guide/endpoints.md, "Price follows the endpoint"). NAME picks one
/// endpoint of a run of several.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceFlag {
    pub endpoint: Option<String>,
    pub price: Price,
}

impl std::str::FromStr for PriceFlag {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let usage = "write IN,OUT in USD per million tokens (e.g. --price 0.40,1.60), 0 for an endpoint that costs nothing, or NAME=IN,OUT for one endpoint of several";
        let (endpoint, amounts) = match text.split_once('=') {
            Some((name, rest)) => {
                let name = name.trim();
                if !valid_name(name) {
                    return Err(format!("`{name}` is not an endpoint name: {usage}"));
                }
                (Some(name.to_string()), rest)
            }
            None => (None, text),
        };
        let amount = |t: &str| -> Result<f64, String> {
            t.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("`{}` is not a price (a number ≥ 0): {usage}", t.trim()))
        };
        let (input, output, cached) = match amounts.split(',').collect::<Vec<_>>().as_slice() {
            [one] if amount(one)? == 0.0 => (0.0, 0.0, None),
            [_] => return Err(format!("`{text}` gives one price; {usage}")),
            [input, output] => (amount(input)?, amount(output)?, None),
            [input, output, cached] => (amount(input)?, amount(output)?, Some(amount(cached)?)),
            _ => return Err(format!("`{text}` is not IN,OUT: {usage}")),
        };
        Ok(PriceFlag {
            endpoint,
            price: Price {
                input_per_mtok: input,
                output_per_mtok: output,
                cached_input_per_mtok: cached,
                batch_input_per_mtok: None,
                batch_output_per_mtok: None,
                batch_discount: None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_variables() {
        assert!(valid_name("local-qwen") && valid_name("gpt4.1_mini"));
        assert!(!valid_name("") && !valid_name("-a") && !valid_name("a b") && !valid_name("a/b"));
        assert_eq!(variable_of("${OPENAI_ORG}"), Some("OPENAI_ORG"));
        assert_eq!(variable_of("org-123"), None);
        assert_eq!(variable_of("${}"), None);
        assert_eq!(variable_of("${A B}"), None);
    }

    #[test]
    fn an_endpoint_reads_naturally_on_the_command_line() {
        let e: AdHocEndpoint = "local=http://127.0.0.1:8000/v1,model=qwen,key_env=LOCAL_KEY"
            .parse()
            .unwrap();
        assert_eq!(e.name, "local");
        assert_eq!(
            e.spec.base_url,
            Some(UrlList::One("http://127.0.0.1:8000/v1".into()))
        );
        assert_eq!(e.spec.model.as_deref(), Some("qwen"));
        assert_eq!(e.spec.api_key_env.as_deref(), Some("LOCAL_KEY"));
        for bad in [
            "http://127.0.0.1:8000/v1",
            "lo cal=http://x/v1",
            "local=127.0.0.1:8000/v1",
            "local=http://x/v1,colour=red",
            "local=http://x/v1,protocol=smoke-signals",
        ] {
            let e = bad.parse::<AdHocEndpoint>().unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }

    #[test]
    fn a_price_reads_as_in_out_per_million_tokens() {
        let p: PriceFlag = "0.40,1.60".parse().unwrap();
        assert_eq!(p.endpoint, None);
        assert_eq!(
            (p.price.input_per_mtok, p.price.output_per_mtok),
            (0.4, 1.6)
        );
        let free: PriceFlag = "local=0".parse().unwrap();
        assert_eq!(free.endpoint.as_deref(), Some("local"));
        assert_eq!(
            (free.price.input_per_mtok, free.price.output_per_mtok),
            (0.0, 0.0)
        );
        let cached: PriceFlag = "1,2,0.5".parse().unwrap();
        assert_eq!(cached.price.cached_input_per_mtok, Some(0.5));
        for bad in [
            "",
            "1",
            "1,2,3,4",
            "1,2,-3",
            "-1,2",
            "a,b",
            "nan,1",
            "inf,1",
            "lo cal=1,2",
            "1,",
        ] {
            assert!(bad.parse::<PriceFlag>().is_err(), "{bad}");
        }
    }
}
