//! Per-connection state that commands may read or change.
//!
//! Invariants: a `Client` belongs to exactly one connection task and is never shared, so it
//! needs no locking; the client metadata document is set at most once (by the first `hello`
//! that carries it), as MongoDB requires.

use std::net::SocketAddr;

use bson::RawDocumentBuf;
use cairn_wire::Compressor;

/// The state of one client connection.
#[derive(Debug, Clone)]
pub struct Client {
    /// The connection id reported by `hello.connectionId` (starts at 1).
    pub id: u64,
    /// The peer address.
    pub peer: SocketAddr,
    /// The local address the client connected to.
    pub local: SocketAddr,
    /// Compressors negotiated by the last `hello` that carried `compression`.
    pub compressors: Vec<Compressor>,
    /// The `client` metadata sent with the first `hello`.
    pub metadata: Option<RawDocumentBuf>,
    /// Set by a command (the `failCommand` fail point's `closeConnection`) to make the
    /// connection close instead of replying.
    pub close_requested: bool,
    /// The connection's record in the running-operation registry (set by its first command).
    pub conn: Option<std::sync::Arc<crate::ops::Connection>>,
    /// Whether the last command is logged as "Slow query", when its database's profile
    /// `filter` decided it (instead of `slowms`/`sampleRate`).
    pub slow_log: Option<bool>,
    /// The last command's operation, kept from its end until the connection logs it (the
    /// "Slow query" line reports its plan and the keys and documents it examined).
    pub last_op: Option<std::sync::Arc<crate::ops::Operation>>,
    /// The users this connection has authenticated as.
    pub auth: crate::auth::AuthState,
    /// The TLS session's protocol and verified client certificate subject (`None` on a
    /// plain connection).
    pub tls: Option<crate::tls::PeerInfo>,
    /// The SASL conversation in progress (between `saslStart` and its last `saslContinue`).
    pub sasl: Option<Box<crate::auth::sasl::Pending>>,
}

impl Client {
    /// A fresh connection's state.
    pub fn new(id: u64, peer: SocketAddr, local: SocketAddr) -> Client {
        Client {
            id,
            peer,
            local,
            compressors: Vec::new(),
            metadata: None,
            close_requested: false,
            conn: None,
            slow_log: None,
            last_op: None,
            auth: crate::auth::AuthState::default(),
            tls: None,
            sasl: None,
        }
    }

    /// The application name from the client metadata (`application.name`).
    pub fn app_name(&self) -> Option<&str> {
        crate::ops::app_name_of(self.metadata.as_ref()?)
    }
}
