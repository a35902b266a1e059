//! Each client's settings: where it sends, which model, in which protocol, with which key
//! and headers, under which limits (flags over the endpoint over the bench over the
//! defaults), and the client built from them — the run's lanes', each endpoint's of a grid,
//! the judge's. A client's gate per replica (its pool), deadlines, attempts and rate limits
//! are its `client::Limits`, which the bench's `limits:` and the flags (`cli::LimitArgs`)
//! both set.

use super::endpoint::Endpoint;
use crate::cli::LimitArgs;
use promptgauge_client::{ApiKey, Client, ClientConfig, Limits, ProtocolKind, ReqwestTransport};
use promptgauge_suite::Bench;
use promptgauge_suite::endpoints::NamedEndpoint;

/// Everything one client is built from: where it sends, which model, in which protocol, with
/// which key and headers, under which limits.
pub(in crate::app) struct ClientSettings<'a> {
    pub limits: &'a Limits,
    /// Several: replicas of one model, each with its own gate.
    pub base_urls: &'a [String],
    pub model: &'a str,
    pub protocol: ProtocolKind,
    /// The key, and the name of the variable it came from (for messages).
    pub api_key: (Option<ApiKey>, &'a str),
    /// Each with whether it came from a variable (then scrubbed from everything shown).
    pub headers: &'a [(String, String, bool)],
}

impl<'a> ClientSettings<'a> {
    /// An endpoint's client under `limits`, sent to `base_urls` (its own, or the
    /// simulator's when it has none).
    pub(in crate::app) fn of(
        endpoint: &'a Endpoint,
        limits: &'a Limits,
        base_urls: &'a [String],
    ) -> Self {
        ClientSettings {
            limits,
            base_urls,
            model: &endpoint.model,
            protocol: endpoint.protocol,
            api_key: (endpoint.api_key.clone(), &endpoint.api_key_env),
            headers: &endpoint.headers,
        }
    }

    /// The client: one gate of `concurrency` per base URL (replicas after the first), the
    /// key sent as the protocol sends it.
    pub(in crate::app) fn client(&self) -> anyhow::Result<Client> {
        let first = self.base_urls.first().map_or("", String::as_str);
        let mut config = ClientConfig::new(first, self.model);
        config.protocol = self.protocol;
        config.replicas = self.base_urls.iter().skip(1).cloned().collect();
        config.api_key = self.api_key.0.clone();
        config.api_key_env = self.api_key.1.to_string();
        config.limits = self.limits.clone();
        config.headers = self
            .headers
            .iter()
            .map(|(name, value, _)| (name.clone(), value.clone()))
            .collect();
        config.hidden = self
            .headers
            .iter()
            .filter(|(_, _, hidden)| *hidden)
            .map(|(_, value, _)| value.clone())
            .collect();
        let transport = ReqwestTransport::new(
            self.limits.connect_timeout,
            self.limits.concurrency * self.base_urls.len().max(1),
        )
        .map_err(|e| anyhow::anyhow!(e))?;
        Ok(Client::new(std::sync::Arc::new(transport), config))
    }
}

/// The limit flags over the limits the run's endpoints send under: the bench's (its one
/// endpoint's) and each chosen endpoint's. The judge keeps its own.
pub(in crate::app) fn apply_limit_flags(
    bench: &mut Bench,
    chosen: &mut [NamedEndpoint],
    flags: &LimitArgs,
) {
    flags.apply(&mut bench.limits);
    for e in chosen {
        flags.apply(&mut e.limits);
    }
}
