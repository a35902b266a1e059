//! The simulator's one router: a request's method and path to the part of the provider
//! that answers it, for every transport (the TCP server, `server.rs`, and the in-memory
//! transport, `memory.rs`). The batch APIs' paths are `batch.rs`'s, asked first; the
//! protocols' are the table in [`route`]. A new protocol's path is one line here.

use serde_json::json;

use super::Provider;
use super::wire::{InFlight, MockReply, MockRequest, ReplyStep, Stats, Wire};

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// OpenAI chat completions.
    Chat,
    /// OpenAI's Responses API.
    Responses,
    /// Anthropic messages.
    Messages,
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
    /// The path's end, any method, and whatever else to chat completions (the in-memory
    /// transport, whose tests send to any base URL).
    End,
}

/// Each route's path (after `/v1`, but for `/stats`) and method.
const TABLE: [(&str, &str, Route); 6] = [
    ("POST", "/chat/completions", Route::Chat),
    ("POST", "/responses", Route::Responses),
    ("POST", "/messages", Route::Messages),
    ("POST", "/embeddings", Route::Embeddings),
    ("GET", "/models", Route::Models),
    ("GET", "/stats", Route::Stats),
];

/// The route of `method` and `path` (the URL's path alone, after scheme and host).
fn route(method: &str, path: &str, matching: Matching) -> Route {
    let batch_path = path.starts_with("/v1/batches")
        || path.starts_with("/v1/files")
        || path.starts_with("/v1/messages/batches");
    match matching {
        Matching::Exact => {
            let found = TABLE.iter().find(|(m, p, r)| {
                let at = match r {
                    Route::Stats => path == *p,
                    _ => path.strip_prefix("/v1") == Some(p),
                };
                *m == method && at
            });
            match found {
                Some((_, _, r)) => *r,
                None if batch_path => Route::NoBatchApi,
                None => Route::NotFound,
            }
        }
        Matching::End => {
            if path.contains("/batches") || path.contains("/v1/files") {
                return Route::NoBatchApi;
            }
            TABLE
                .iter()
                .find(|(_, p, _)| path.ends_with(p))
                .map_or(Route::Chat, |(_, _, r)| *r)
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
        match route(method, path, matching) {
            Route::Chat => self.respond(request),
            Route::Responses => self.respond_responses(request),
            Route::Messages => self.respond_messages(request),
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
        let wire = Wire::of_headers(headers);
        if !self.config().open_models && !self.accepts_key(wire, headers) {
            let body = wire.error_body(401, "Incorrect API key provided.", "invalid_request_error");
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
        in_flight: InFlight::new(&stats, Wire::Chat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_has_its_path_and_the_server_matches_exactly() {
        use Matching::{End, Exact};
        assert_eq!(route("POST", "/v1/chat/completions", Exact), Route::Chat);
        assert_eq!(route("POST", "/v1/responses", Exact), Route::Responses);
        assert_eq!(route("POST", "/v1/messages", Exact), Route::Messages);
        assert_eq!(route("POST", "/v1/embeddings", Exact), Route::Embeddings);
        assert_eq!(route("GET", "/v1/models", Exact), Route::Models);
        assert_eq!(route("GET", "/stats", Exact), Route::Stats);
        assert_eq!(route("POST", "/chat/completions", Exact), Route::NotFound);
        assert_eq!(route("GET", "/v1/chat/completions", Exact), Route::NotFound);
        assert_eq!(route("GET", "/v1/stats", Exact), Route::NotFound);
        assert_eq!(route("POST", "/v1/batches", Exact), Route::NoBatchApi);
        assert_eq!(route("POST", "/base/v1/messages", End), Route::Messages);
        assert_eq!(route("POST", "/base/v1/embeddings", End), Route::Embeddings);
        assert_eq!(route("POST", "/anything", End), Route::Chat);
        assert_eq!(route("GET", "/v1/batches/b1", End), Route::NoBatchApi);
    }
}
