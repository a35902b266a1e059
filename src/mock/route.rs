//! Which part of the simulator a request's path goes to: the one table every transport
//! asks (the TCP server, `server.rs`, and the in-memory transport, `memory.rs`). A new
//! protocol's path is one line here; the batch APIs' paths are `batch.rs`'s, asked first.

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
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

/// The route of `method` and `path` (the URL's path alone, after scheme and host). On the
/// TCP server paths match exactly, so a base URL without `/v1` gets 404 as from vLLM,
/// OpenAI or Anthropic; the in-memory transport (`exact` false) goes by the path's end
/// and sends whatever else it is asked to chat completions.
pub(super) fn route(method: &str, path: &str, exact: bool) -> Route {
    if !exact {
        return if path.contains("/batches") || path.starts_with("/v1/files") {
            Route::NoBatchApi
        } else if path.ends_with("/responses") {
            Route::Responses
        } else if path.ends_with("/messages") {
            Route::Messages
        } else {
            Route::Chat
        };
    }
    match (method, path) {
        ("POST", "/v1/chat/completions") => Route::Chat,
        ("POST", "/v1/responses") => Route::Responses,
        ("POST", "/v1/messages") => Route::Messages,
        ("POST", "/v1/embeddings") => Route::Embeddings,
        ("GET", "/stats") => Route::Stats,
        ("GET", "/v1/models") => Route::Models,
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_has_its_path_and_the_server_matches_exactly() {
        assert_eq!(route("POST", "/v1/chat/completions", true), Route::Chat);
        assert_eq!(route("POST", "/v1/responses", true), Route::Responses);
        assert_eq!(route("POST", "/v1/messages", true), Route::Messages);
        assert_eq!(route("POST", "/chat/completions", true), Route::NotFound);
        assert_eq!(route("GET", "/v1/chat/completions", true), Route::NotFound);
        assert_eq!(route("POST", "/base/v1/messages", false), Route::Messages);
        assert_eq!(route("POST", "/anything", false), Route::Chat);
        assert_eq!(route("GET", "/v1/batches/b1", false), Route::NoBatchApi);
    }
}
