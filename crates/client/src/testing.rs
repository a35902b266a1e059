//! Doors for tests (compiled for this crate's tests, and for other crates' tests through the
//! `test-support` feature): a client speaking a protocol no [`ProtocolKind`] names — a toy
//! one, as the simulator's test of what a fourth protocol costs defines (`mock/src/fourth.rs`)
//! — and the key's value such a protocol sends.
//!
//! [`ProtocolKind`]: crate::ProtocolKind

use std::sync::Arc;

use crate::{ApiKey, Client, ClientConfig, Protocol, Transport};

/// A client speaking `protocol`, whatever `config.protocol` names.
pub fn client_speaking(
    transport: Arc<dyn Transport>,
    config: ClientConfig,
    protocol: Arc<dyn Protocol>,
) -> Client {
    Client::speaking(transport, config, protocol)
}

/// The key's value, for a protocol outside this crate to put in its header.
pub fn key_value(key: &ApiKey) -> &str {
    key.expose()
}
