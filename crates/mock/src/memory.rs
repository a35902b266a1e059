//! The simulator as an in-memory transport: the client talks to the provider without
//! sockets, so tests can pause tokio's clock and jump through timeouts and backoff.

use std::collections::VecDeque;
use std::sync::Arc;

use futures_util::stream;

use super::route::Matching;
use super::{InFlight, MockReply, MockRequest, Provider, ReplyStep};
use promptgauge_client::transport::{
    BoxFuture, HttpRequest, HttpResponse, Transport, TransportError,
};

/// The simulator as a transport, without sockets.
pub struct MemoryTransport {
    /// (base URL prefix, provider); the first whose prefix starts the request URL answers.
    routes: Vec<(String, Arc<Provider>)>,
}

impl MemoryTransport {
    /// One provider answering every URL.
    pub fn new(provider: Arc<Provider>) -> Self {
        MemoryTransport {
            routes: vec![(String::new(), provider)],
        }
    }

    /// Several providers, each behind its own base URL (replicas).
    pub fn routes(routes: Vec<(String, Arc<Provider>)>) -> Self {
        MemoryTransport { routes }
    }
}

pub struct MemoryBody {
    steps: VecDeque<ReplyStep>,
    provider: Arc<Provider>,
    /// Held until the body is dropped, like a connection.
    _in_flight: InFlight,
}

impl Transport for MemoryTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, TransportError>> {
        let provider = self
            .routes
            .iter()
            .find(|(prefix, _)| request.url.starts_with(prefix.as_str()))
            .map(|(_, p)| p.clone());
        Box::pin(async move {
            let Some(provider) = provider else {
                return Err(TransportError(format!("no route to {}", request.url)));
            };
            // Each protocol on its own path, as on the TCP server.
            let path = promptgauge_client::secrets::path_of(&request.url).to_string();
            let request_method = request.method.as_str();
            let request = MockRequest {
                headers: request.headers,
                body: request.body.to_bytes(),
            };
            // The batch API's routes want the URL's path alone (after scheme and host).
            let route = match path.find("://") {
                Some(i) => path[i + 3..].find('/').map_or("/", |j| &path[i + 3 + j..]),
                None => path.as_str(),
            };
            let reply = provider.serve(request_method, route, &request, Matching::End);
            let (status, headers, steps, in_flight) = match reply {
                MockReply::Hang(_in_flight) => return std::future::pending().await,
                MockReply::Respond {
                    status,
                    headers,
                    steps,
                    in_flight,
                } => (status, headers, steps, in_flight),
            };
            let body = MemoryBody {
                steps: steps.into(),
                provider,
                _in_flight: in_flight,
            };
            let body = stream::unfold(body, |mut body| async move {
                loop {
                    match body.steps.pop_front()? {
                        ReplyStep::Write(bytes) => return Some((Ok(bytes), body)),
                        ReplyStep::Sleep(d) => tokio::time::sleep(d).await,
                        ReplyStep::Stall => std::future::pending::<()>().await,
                        ReplyStep::Reset => {
                            body.steps.clear();
                            return Some((
                                Err(TransportError("connection reset by peer".into())),
                                body,
                            ));
                        }
                        ReplyStep::Generated { key, text, calls } => {
                            body.provider.generated(key, text, calls)
                        }
                    }
                }
            });
            Ok(HttpResponse {
                status,
                headers,
                body: Box::pin(body),
            })
        })
    }
}
