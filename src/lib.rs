//! `cairn`: the server — configuration, listener, connections, commands.
//!
//! # One request, end to end
//! 1. [`server::Server::run`] accepts a TCP connection under the connection-limit semaphore
//!    and spawns [`connection::serve`] for it.
//! 2. [`connection::serve`] frames the byte stream in two phases
//!    ([`cairn_wire::header::check_frame`], then [`cairn_wire::decode`]): OP_MSG, the legacy
//!    OP_QUERY handshake and OP_COMPRESSED all become one command document.
//! 3. [`commands::dispatch`] checks `$db`, looks the command up in the sorted
//!    [`commands::REGISTRY`] (unknown → CommandNotFound 59), enforces admin-only, the stable
//!    API parameters and strict field lists, and runs the command's handler, e.g.
//!    [`commands::hello`] for the handshake.
//! 4. The handler returns the reply body, or a [`error::CommandError`] that
//!    [`error::CommandError::to_reply`] renders with MongoDB's `code` and `codeName`.
//! 5. [`connection::serve`] encodes the reply in the client's protocol (OP_MSG, or OP_REPLY
//!    for OP_QUERY), compresses it if the request was compressed, and writes it; exhaust
//!    `hello` streams keep replying with `moreToCome`.
//!
//! Invariants: the server answers malformed input with errors and never panics on it; one
//! connection's failure never affects another; shared state ([`state::ServerState`]) is
//! atomics and channels, never a lock held across an `.await`.

pub mod blocking;
pub mod client;
pub mod commands;
pub mod config;
pub mod connection;
pub mod cursor;
pub mod deadline;
pub mod error;
pub mod exec;
pub mod healthcheck;
pub mod index_builds;
pub mod lang;
pub mod latency;
pub mod logging;
pub mod server;
pub mod state;
pub mod sysinfo;
pub mod ttl;
pub mod write_concern;
