//! `cairn`: the server — configuration, listener, connections, commands.
//!
//! # One request, end to end
//! 1. [`server::Server::run`] accepts a TCP connection under the connection-limit semaphore
//!    and spawns [`connection::serve`] for it, which first turns it into plain TCP or TLS as
//!    `--tls-mode` allows ([`tls`]).
//! 2. [`connection::serve`] frames the byte stream in two phases
//!    ([`cairn_wire::header::check_frame`], then [`cairn_wire::decode`]): OP_MSG, the legacy
//!    OP_QUERY handshake and OP_COMPRESSED all become one command document.
//! 3. [`commands::dispatch`] checks `$db`, looks the command up in the sorted
//!    [`commands::REGISTRY`] (unknown → CommandNotFound 59), enforces admin-only, the
//!    authentication gate of `--auth` ([`auth::check_authenticated`]), the stable API
//!    parameters and strict field lists; [`session::begin`] then applies the session and
//!    transaction rules and decides where the command reads and writes (the latest data, a
//!    snapshot, or the session's open transaction, a [`session::target::Target`]); the
//!    command's handler runs, e.g. [`commands::find`], reading through the planner
//!    ([`exec`]) and writing through the target.
//! 4. [`session::finish`] aborts a transaction whose statement failed; the handler's reply
//!    body gets `ok`, `$clusterTime` and `operationTime` ([`session::gossip_out`]), or a
//!    [`error::CommandError`] is rendered by [`error::CommandError::to_reply_with`] with
//!    MongoDB's `code`, `codeName` and labels ([`session::label_error`]).
//! 5. [`connection::serve`] encodes the reply in the client's protocol (OP_MSG, or OP_REPLY
//!    for OP_QUERY), compresses it if the request was compressed, and writes it; exhaust
//!    `hello` streams keep replying with `moreToCome`.
//!
//! Around every command the dispatcher registers the running operation ([`ops`]: `currentOp`,
//! `killOp`, `top`), evaluates fail points ([`failpoint`], test commands only), records
//! latencies and counters ([`metrics`], also served to Prometheus by [`metrics_http`]) and
//! writes the profiler's entry ([`profiler`]); [`validate`] is the collection checker behind
//! `validate` ([`validation`] is document validation, a different thing). Options come from
//! flags, `CAIRN_*` variables ([`config`]) and mongod-style YAML files ([`config_file`]).
//!
//! Invariants: the server answers malformed input with errors and never panics on it; one
//! connection's failure never affects another; shared state ([`state::ServerState`]) is
//! atomics, channels and briefly held locks, never a lock held across an `.await` (a session
//! is serialised by an async checkout permit, see [`session`]).

pub mod auth;
pub mod blocking;
pub mod client;
pub mod commands;
pub mod config;
pub mod config_file;
pub mod connection;
pub mod cursor;
pub mod deadline;
pub mod error;
pub mod error_names;
pub mod exec;
pub mod failpoint;
pub mod healthcheck;
pub mod index_builds;
pub mod lang;
pub mod latency;
pub mod logging;
pub mod metrics;
pub mod metrics_http;
pub mod ops;
pub mod params;
pub mod profiler;
pub mod server;
pub mod session;
pub mod state;
pub mod sysinfo;
pub mod tls;
pub mod ttl;
pub mod validate;
pub mod validation;
pub mod views;
pub mod write_concern;
