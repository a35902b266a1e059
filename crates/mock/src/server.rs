//! The simulator over TCP: a small HTTP/1.1 server with keep-alive and chunked bodies, so
//! every byte, pause and reset of a script reaches the client as written.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::route::Matching;
use super::{MockReply, MockRequest, Provider, ReplyStep};

/// A running simulator; stops when dropped.
pub struct MockServer {
    pub addr: SocketAddr,
    pub provider: Arc<Provider>,
    task: JoinHandle<()>,
}

impl MockServer {
    /// Binds `addr` (port 0 picks a free port) and serves until dropped.
    pub async fn start(provider: Arc<Provider>, addr: SocketAddr) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let p = provider.clone();
        let task = tokio::spawn(async move { serve(listener, p).await });
        Ok(MockServer {
            addr,
            provider,
            task,
        })
    }

    /// The `…/v1` base URL to give a client.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Accepts connections until the task is dropped; each connection lives in its own task,
/// and all of them end with the server.
pub(crate) async fn serve(listener: TcpListener, provider: Arc<Provider>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    let p = provider.clone();
                    connections.spawn(async move {
                        let _ = connection(stream, p).await;
                    });
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    content_length: usize,
}

/// Reads one request head; `None` at a clean end of the connection.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<Head>> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let headers: Vec<(String, String)> = req
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let content_length = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or(0);
                let head = Head {
                    method: req.method.unwrap_or("").to_string(),
                    path: req.path.unwrap_or("").to_string(),
                    headers,
                    content_length,
                };
                buf.drain(..len);
                return Ok(Some(head));
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
            }
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn connection(mut stream: TcpStream, provider: Arc<Provider>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(head) = read_head(&mut stream, &mut buf).await? {
        while buf.len() < head.content_length {
            let mut chunk = vec![0u8; (head.content_length - buf.len()).min(64 * 1024)];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = Bytes::from(buf.drain(..head.content_length).collect::<Vec<u8>>());
        let path = head.path.split('?').next().unwrap_or("");
        let request = MockRequest {
            headers: head.headers,
            body,
        };
        let reply = provider.serve(&head.method, path, &request, Matching::Exact);
        if !play(&mut stream, reply, &provider).await? {
            return Ok(());
        }
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        529 => "Overloaded",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Plays a reply onto the socket; false when the connection must not be reused.
async fn play(
    stream: &mut TcpStream,
    reply: MockReply,
    provider: &Provider,
) -> std::io::Result<bool> {
    let (status, headers, steps, _in_flight) = match reply {
        MockReply::Hang(_in_flight) => {
            // Hold the socket open and say nothing, until the client gives up.
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            return Ok(false);
        }
        MockReply::Respond {
            status,
            headers,
            steps,
            in_flight,
        } => (status, headers, steps, in_flight),
    };
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in &headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    for step in steps {
        match step {
            ReplyStep::Write(bytes) => {
                let mut chunk = Vec::with_capacity(bytes.len() + 16);
                chunk.extend_from_slice(format!("{:x}\r\n", bytes.len()).as_bytes());
                chunk.extend_from_slice(&bytes);
                chunk.extend_from_slice(b"\r\n");
                stream.write_all(&chunk).await?;
                stream.flush().await?;
            }
            ReplyStep::Sleep(d) => tokio::time::sleep(d).await,
            ReplyStep::Stall => {
                let mut sink = [0u8; 1024];
                while stream.read(&mut sink).await? > 0 {}
                return Ok(false);
            }
            ReplyStep::Reset => {
                stream.set_zero_linger()?;
                return Ok(false);
            }
            ReplyStep::Generated { key, text, calls } => provider.generated(key, text, calls),
        }
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.flush().await?;
    Ok(true)
}
