//! The simulator's one router: a request's method and path to the part of the provider
//! that answers it, for every transport (the TCP server, `server.rs`, and the in-memory
//! transport, `memory.rs`). The batch APIs' paths are `batch.rs`'s, asked first; then
//! each protocol's path (the provider's list, `PROTOCOLS`), and the table's for the rest.

use serde_json::json;

use super::Provider;
use super::served::Served;
use super::wire::{InFlight, MockReply, MockRequest, ReplyStep, Stats};

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Route {
    /// A protocol the simulator serves, on its path.
    Protocol(&'static dyn Served),
    Embeddings,
    /// The models list (a preflight).
    Models,
    /// The simulator's own counters (`GET /stats`).
    Stats,
    /// A batch API's path with no batch API here (`--no-batch-api`).
    NoBatchApi,
    NotFound,
}

/// How a transport matches a path against the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Matching {
    /// The whole path and the method, as a provider does: a base URL without `/v1` gets
    /// 404, as from vLLM, OpenAI or Anthropic (the TCP server).
    Exact,
    /// The path's end, any method, and whatever else to the first protocol, chat
    /// completions (the in-memory transport, whose tests send to any base URL).
    End,
}

/// The routes beside the protocols': each one's path (after `/v1`, but for `/stats`) and
/// method. Each protocol's is `POST` on its path.
const TABLE: [(&str, &str, Route); 3] = [
    ("POST", "/embeddings", Route::Embeddings),
    ("GET", "/models", Route::Models),
    ("GET", "/stats", Route::Stats),
];

/// The route of `method` and `path` (the URL's path alone, after scheme and host), among
/// these protocols and the table.
fn route(method: &str, path: &str, matching: Matching, protocols: &[&'static dyn Served]) -> Route {
    let batch_path = path.starts_with("/v1/batches")
        || path.starts_with("/v1/files")
        || path.starts_with("/v1/messages/batches");
    let routes = protocols
        .iter()
        .map(|p| ("POST", p.path(), Route::Protocol(*p)))
        .chain(TABLE);
    match matching {
        Matching::Exact => {
            let mut routes = routes;
            let found = routes.find(|(m, p, r)| {
                let at = match r {
                    Route::Stats => path == *p,
                    _ => path.strip_prefix("/v1") == Some(p),
                };
                *m == method && at
            });
            match found {
                Some((_, _, r)) => r,
                None if batch_path => Route::NoBatchApi,
                None => Route::NotFound,
            }
        }
        Matching::End => {
            if path.contains("/batches") || path.contains("/v1/files") {
                return Route::NoBatchApi;
            }
            let mut routes = routes;
            let first = protocols.first().map(|p| Route::Protocol(*p));
            routes
                .find(|(_, p, _)| path.ends_with(p))
                .map(|(_, _, r)| r)
                .or(first)
                .unwrap_or(Route::NotFound)
        }
    }
}

impl Provider {
    /// The reply to `method` `path`: the batch API's paths first (`batch.rs` says which
    /// it owns), then the table's.
    pub(crate) fn serve(
        &self,
        method: &str,
        path: &str,
        request: &MockRequest,
        matching: Matching,
    ) -> MockReply {
        if let Some(reply) = self.batch_api(method, path, request) {
            return reply;
        }
        match route(method, path, matching, self.protocols) {
            Route::Protocol(protocol) => self.respond(protocol, request),
            Route::Embeddings => {
                let (status, body) = self.embeddings(&request.headers, &request.body);
                plain(status, body)
            }
            Route::Stats => plain(200, serde_json::to_string(&self.stats()).unwrap_or_default()),
            Route::Models => self.models(request),
            Route::NoBatchApi => super::batch::not_found(path),
            Route::NotFound => plain(
                404,
                json!({"error": {"message": format!("no route for {method} {path}"), "type": "not_found"}})
                    .to_string(),
            ),
        }
    }

    /// The models list. It wants the key too, as OpenAI's and Anthropic's do: a preflight
    /// with a wrong key is refused before any job is sent.
    fn models(&self, request: &MockRequest) -> MockReply {
        let headers = &request.headers;
        let protocol = self.named_by(headers);
        if !self.config().open_models && !self.accepts_key(protocol, headers) {
            let body =
                protocol.error_body(401, "Incorrect API key provided.", "invalid_request_error");
            return plain(401, body.to_string());
        }
        plain(
            200,
            json!({"object": "list", "data": [{"id": self.config().model, "object": "model", "owned_by": "promptgauge-mock"}]})
                .to_string(),
        )
    }
}

/// A JSON reply in one write.
fn plain(status: u16, body: String) -> MockReply {
    let stats = std::sync::Arc::new(Stats::default());
    MockReply::Respond {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        steps: vec![ReplyStep::Write(bytes::Bytes::from(body))],
        in_flight: InFlight::new(&stats),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PROTOCOLS;
    use crate::anthropic::ServedMessages;
    use crate::chat::ServedChat;
    use crate::responses::ServedResponses;

    #[test]
    fn every_protocol_has_its_path_and_the_server_matches_exactly() {
        use Matching::{End, Exact};
        let route = |method, path, matching| super::route(method, path, matching, PROTOCOLS);
        let (chat, responses, messages) = (
            Route::Protocol(&ServedChat),
            Route::Protocol(&ServedResponses),
            Route::Protocol(&ServedMessages),
        );
        assert_eq!(route("POST", "/v1/chat/completions", Exact), chat);
        assert_eq!(route("POST", "/v1/responses", Exact), responses);
        assert_eq!(route("POST", "/v1/messages", Exact), messages);
        assert_eq!(route("POST", "/v1/embeddings", Exact), Route::Embeddings);
        assert_eq!(route("GET", "/v1/models", Exact), Route::Models);
        assert_eq!(route("GET", "/stats", Exact), Route::Stats);
        assert_eq!(route("POST", "/chat/completions", Exact), Route::NotFound);
        assert_eq!(route("GET", "/v1/chat/completions", Exact), Route::NotFound);
        assert_eq!(route("GET", "/v1/stats", Exact), Route::NotFound);
        assert_eq!(route("POST", "/v1/batches", Exact), Route::NoBatchApi);
        assert_eq!(route("POST", "/base/v1/messages", End), messages);
        assert_eq!(route("POST", "/base/v1/embeddings", End), Route::Embeddings);
        assert_eq!(route("POST", "/anything", End), chat);
        assert_eq!(route("GET", "/v1/batches/b1", End), Route::NoBatchApi);
    }
}
