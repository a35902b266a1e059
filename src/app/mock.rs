//! `mock`: serve the simulated provider until Ctrl-C.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use super::{Exit, Failure};
use crate::cli::{MockArgs, UsageError};
use crate::error::BeforeSend;
use promptgauge_mock::Provider;
use promptgauge_mock::server::MockServer;

/// `mock`: serves the simulated provider until Ctrl-C.
pub async fn mock(args: &MockArgs) -> Result<Exit, Failure> {
    let config = args.config().map_err(UsageError)?;
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| {
            format!(
                "`{}:{}` is not an address to listen on",
                args.host, args.port
            )
        })
        .before_send()?;
    let provider = Arc::new(Provider::new(config));
    let server = MockServer::start(provider, addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
        .before_send()?;
    out!("simulated provider listening on {}", server.base_url());
    out!("  chat:      POST {}/chat/completions", server.base_url());
    out!("  responses: POST {}/responses", server.base_url());
    out!("  messages:  POST {}/messages", server.base_url());
    out!("  stats:     GET http://{}/stats", server.addr);
    let _ = tokio::signal::ctrl_c().await;
    Ok(Exit::Success)
}
