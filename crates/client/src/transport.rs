//! How bytes reach a server: over HTTP with `reqwest`, or in memory to the simulator (for
//! tests on a virtual clock). The client above only sees status, headers and a byte stream.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

/// A response body: chunks of bytes as they arrive.
pub(crate) type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, TransportError>> + Send>>;
/// A boxed future, for transports as trait objects.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One HTTP request, as the client made it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// `POST` (every answer) or `GET` (a provider's batch or file, read back).
    pub method: HttpMethod,
    pub url: String,
    /// Lowercase names. May hold the API key: never log this as is.
    pub headers: Vec<(String, String)>,
    pub body: RequestBody,
}

/// A request body, in pieces sent one after another: a file's base64 is a piece of its
/// own, shared by every request that carries it rather than copied into each
/// (docs/guide/attachments.md, "Limits").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestBody(Vec<Bytes>);

impl RequestBody {
    pub fn new(pieces: Vec<Bytes>) -> RequestBody {
        RequestBody(pieces)
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its bytes in one piece (a copy, unless it is one already).
    pub fn to_bytes(&self) -> Bytes {
        match self.0.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => Bytes::from(many.concat()),
        }
    }

    pub fn pieces(&self) -> &[Bytes] {
        &self.0
    }

    /// As reqwest sends it: one piece as it is, several as a stream of them (with their
    /// length, so no chunked encoding).
    fn to_reqwest(&self) -> reqwest::Body {
        match self.0.as_slice() {
            [] => reqwest::Body::from(Bytes::new()),
            [one] => reqwest::Body::from(one.clone()),
            many => {
                let pieces: Vec<Result<Bytes, std::io::Error>> =
                    many.iter().cloned().map(Ok).collect();
                reqwest::Body::wrap_stream(futures_util::stream::iter(pieces))
            }
        }
    }
}

impl From<Bytes> for RequestBody {
    fn from(b: Bytes) -> RequestBody {
        RequestBody(vec![b])
    }
}

impl From<Vec<u8>> for RequestBody {
    fn from(b: Vec<u8>) -> RequestBody {
        RequestBody(vec![Bytes::from(b)])
    }
}

impl From<&'static str> for RequestBody {
    fn from(b: &'static str) -> RequestBody {
        RequestBody(vec![Bytes::from_static(b.as_bytes())])
    }
}

impl HttpRequest {
    /// The headers fit to print: the `authorization` value is replaced.
    pub(crate) fn redacted_headers(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|(k, v)| {
                if is_credential(k) {
                    (k.clone(), "[redacted]".to_string())
                } else {
                    (k.clone(), v.clone())
                }
            })
            .collect()
    }
}

/// The HTTP methods the client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpMethod {
    #[default]
    Post,
    Get,
}

impl HttpMethod {
    /// As a request line says it.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Post => "POST",
            HttpMethod::Get => "GET",
        }
    }
}

/// A response: status, headers and a body that streams.
pub struct HttpResponse {
    pub status: u16,
    /// Lowercase names.
    pub headers: Vec<(String, String)>,
    pub body: BodyStream,
}

/// The request got no response (connection refused, reset, …).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

/// How bytes reach a server: HTTP, or the simulator in memory.
pub trait Transport: Send + Sync {
    /// Sends a request; the body of the response streams.
    fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, TransportError>>;
}

/// Real HTTP. Only the connect timeout lives here; the client owns every other deadline.
pub struct ReqwestTransport {
    client: reqwest::Client,
}

impl ReqwestTransport {
    /// An HTTP client with this connect timeout and up to `pool_size` idle connections.
    pub fn new(connect_timeout: Duration, pool_size: usize) -> Result<Self, TransportError> {
        let client = reqwest::Client::builder()
            // Redirects are followed here, by hand (see `send`): reqwest's default turns a
            // POST into a GET without the prompt on 301/302/303.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .pool_max_idle_per_host(pool_size)
            .tcp_nodelay(true)
            .user_agent(concat!("promptgauge/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| TransportError(format!("cannot build HTTP client: {e}")))?;
        Ok(ReqwestTransport { client })
    }
}

/// The error with its causes, which is where reqwest keeps the useful part; every URL in
/// it (reqwest names the URL it was sending to, a redirect's target too) as
/// `secrets::redact_urls_in` shows URLs: no password, no query value (a signed URL's
/// signature is a credential).
pub fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    super::secrets::redact_urls_in(&text)
}

/// Redirects followed for one request, at most (the preflight's too).
pub const MAX_REDIRECTS: usize = 5;

/// Headers that carry credentials: redacted wherever a request is shown.
const CREDENTIALS: [&str; 5] = [
    "authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "proxy-authorization",
];

/// Whether a header (named in any case) carries a credential.
fn is_credential(name: &str) -> bool {
    CREDENTIALS.iter().any(|c| c.eq_ignore_ascii_case(name))
}

/// The only headers a redirect to another origin carries: what the protocol needs to be
/// understood, none of them secret. An endpoint's own `headers:` (which may hold values
/// read from variables), its key and any cookie stay with the origin they were given for.
const CROSS_ORIGIN: [&str; 4] = [
    "content-type",
    "accept",
    "idempotency-key",
    "anthropic-version",
];

fn crosses_origins(name: &str) -> bool {
    CROSS_ORIGIN.iter().any(|c| c.eq_ignore_ascii_case(name))
}

/// Where a 307 or 308 sends the request next: the same POST with the same body. `None`
/// for any other status (a 301, 302 or 303 would turn the POST into a GET without the
/// prompt: it is returned to the client, which fails the job saying where it pointed).
fn redirect_target(response: &reqwest::Response) -> Option<reqwest::Url> {
    if !matches!(response.status().as_u16(), 307 | 308) {
        return None;
    }
    let location = response.headers().get(reqwest::header::LOCATION)?;
    response.url().join(location.to_str().ok()?).ok()
}

/// Whether two URLs share scheme, host and port: what a credential may follow.
pub fn same_origin(a: &reqwest::Url, b: &reqwest::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

impl Transport for ReqwestTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, TransportError>> {
        let client = self.client.clone();
        Box::pin(async move {
            let mut url = reqwest::Url::parse(&request.url)
                .map_err(|e| TransportError(format!("invalid URL: {e}")))?;
            let mut headers = request.headers;
            let mut hops = 0;
            let response = loop {
                let mut builder = match request.method {
                    HttpMethod::Post if request.body.pieces().len() > 1 => client
                        .post(url.clone())
                        .header(reqwest::header::CONTENT_LENGTH, request.body.len())
                        .body(request.body.to_reqwest()),
                    HttpMethod::Post => client.post(url.clone()).body(request.body.to_reqwest()),
                    HttpMethod::Get => client.get(url.clone()),
                };
                for (k, v) in &headers {
                    builder = builder.header(k, v);
                }
                let response = builder
                    .send()
                    .await
                    .map_err(|e| TransportError(describe(&e)))?;
                let Some(next) = redirect_target(&response).filter(|_| hops < MAX_REDIRECTS) else {
                    break response;
                };
                if !matches!(next.scheme(), "http" | "https") {
                    break response;
                }
                if !same_origin(&url, &next) {
                    headers.retain(|(k, _)| crosses_origins(k));
                }
                hops += 1;
                url = next;
            };
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let body = response
                .bytes_stream()
                .map(|r| r.map_err(|e| TransportError(describe(&e))));
            Ok(HttpResponse {
                status,
                headers,
                body: Box::pin(body),
            })
        })
    }
}
