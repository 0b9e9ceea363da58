//! `cairn-wire`: the MongoDB wire protocol — framing, parsing and encoding, no I/O.
//!
//! This crate only ever sees untrusted bytes, so it never panics on input: unwraps,
//! `expect`, `panic!` and unchecked slice indexing are denied by lint, every length read off
//! the wire is checked against the bytes actually present and against the message size limit
//! *before* anything is allocated, and every BSON document is structurally validated
//! ([`bson_check`]) before a caller can look inside it.
//!
//! # One request, end to end
//! 1. The connection has some bytes buffered. [`header::check_frame`] looks only at the first
//!    four bytes: it rejects a `messageLength` below 16 or above the limit (48,000,000 by
//!    default) without allocating, and says whether a whole frame is present yet
//!    (two-phase framing: check, then parse).
//! 2. [`message::decode`] parses the complete frame: the 16-byte [`header::Header`], then by
//!    opcode
//!    - `OP_MSG` (2013): [`op_msg::OpMsg::parse`] checks the flag bits, verifies the CRC-32C
//!      checksum when `checksumPresent` is set, and splits the sections into exactly one body
//!      (kind 0) and any document sequences (kind 1);
//!    - `OP_QUERY` (2004): [`op_query::OpQuery::parse`], used by drivers for the legacy
//!      `isMaster` handshake against `<db>.$cmd`;
//!    - `OP_COMPRESSED` (2012): [`compression::decompress`] inflates the payload (snappy, zlib
//!      or zstd; the declared size is checked before allocating and must match exactly) and
//!      the inner message is decoded as above.
//! 3. The server turns the message into one command document with
//!    [`op_msg::OpMsg::into_command`] (document sequences become arrays of the body, e.g.
//!    `documents` of an `insert`, written by [`doc_writer`], which also writes the server's
//!    cursor batches) or [`op_query::OpQuery::command`].
//! 4. The reply is encoded with [`op_msg::encode`] (adding a checksum when the client used
//!    one, `moreToCome` for exhaust streams) or [`op_query::encode_reply`] (`OP_REPLY`), and
//!    compressed with [`compression::compress_message`] when the request was compressed.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unreachable,
    clippy::todo
)]

pub mod bson_check;
pub mod compression;
pub mod doc_writer;
pub mod error;
pub mod header;
pub mod message;
pub mod op_msg;
pub mod op_query;

pub use compression::Compressor;
pub use error::WireError;
pub use header::{Header, OpCode};
pub use message::{Body, Incoming, decode};
pub use op_msg::OpMsg;
pub use op_query::OpQuery;

/// Size of the standard message header.
pub const HEADER_LEN: usize = 16;

/// MongoDB's `maxMessageSizeBytes`: the largest message either side may send.
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;

/// MongoDB's `maxBsonObjectSize` (16 MiB).
pub const MAX_BSON_OBJECT_SIZE: usize = 16 * 1024 * 1024;

/// Internal slack MongoDB allows above `maxBsonObjectSize` for a command body (16 KiB), so a
/// 16 MiB document still fits inside an `insert` command that carries it.
pub const BSON_OBJECT_INTERNAL_SLACK: usize = 16 * 1024;

/// Nesting limit for BSON received on the wire (MongoDB's default `maxBSONDepth`).
pub const MAX_BSON_DEPTH: usize = 200;
