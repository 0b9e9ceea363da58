//! One client connection: read frames, run commands, write replies.
//!
//! The stream is a [`crate::tls::Stream`]: plain TCP, or TLS once [`crate::tls::Tls::establish`]
//! (with TLS on) has sniffed the first bytes and run the handshake, under its timeout.
//!
//! The loop in [`serve`]:
//! 1. [`Connection::read_frame`] — two-phase framing: [`cairn_wire::header::check_frame`]
//!    validates the declared length from the first four bytes before any buffer grows for it
//!    (and the buffer then grows in bounded steps as bytes actually arrive), then the complete
//!    frame is split off. While idle between messages, a shutdown ends the connection.
//! 2. [`cairn_wire::decode`] parses it. Fatal problems (bad length, illegal flag bits, checksum
//!    mismatch, failed decompression, removed opcodes) close the connection without a reply,
//!    as MongoDB does; other problems are answered with an error reply in the client's own
//!    protocol and compressor.
//! 3. OP_MSG and OP_QUERY handshakes become one command document, run by
//!    [`crate::commands::dispatch`]. A `moreToCome` request gets no reply.
//! 4. The reply is encoded (with a checksum when the client sent one) into the connection's
//!    reply buffer, reused from one reply to the next, compressed with the client's compressor
//!    if the request was compressed, and written.
//! 5. Exhaust: when a command asks to stream (awaitable `hello` with `exhaustAllowed`), the
//!    reply carries `moreToCome` and the next reply is produced without a new request, each
//!    answering the previous reply's id, until an error reply or the client leaves.
//!
//! With access control on, a connection that has not authenticated may send messages of at
//! most [`UNAUTHENTICATED_MAX_MESSAGE`] bytes and stay silent at most
//! [`UNAUTHENTICATED_IDLE`]; beyond either it is closed.
//!
//! Invariants: a malformed message never ends the server or another connection; the socket
//! buffer never holds more than one maximum-size message plus one read; no lock is held
//! across an `.await` (all per-connection state is owned by this task).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bson::{RawDocument, RawDocumentBuf, rawdoc};
use bytes::{Bytes, BytesMut};
use cairn_wire::message::{ReplyProtocol, decode};
use cairn_wire::op_msg::{self, MORE_TO_COME};
use cairn_wire::op_query::{self, REPLY_AWAIT_CAPABLE, REPLY_QUERY_FAILURE};
use cairn_wire::{Body, Compressor, HEADER_LEN, MAX_MESSAGE_SIZE, WireError, compression, header};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::client::Client;
use crate::commands;
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// Largest step by which the read buffer grows while a big frame arrives.
const READ_STEP: usize = 4 * 1024 * 1024;

/// Largest reply buffer a connection keeps for its next reply (a bigger one is freed after
/// its reply is written, so an idle connection holds at most this much).
const KEEP_REPLY_BUFFER: usize = 1024 * 1024;

/// With `--auth`, the largest message a connection may send before it authenticates (the
/// pre-authentication commands are small; a larger message closes the connection).
pub const UNAUTHENTICATED_MAX_MESSAGE: usize = 1024 * 1024;

/// With `--auth`, how long a connection that has not authenticated may stay silent.
pub const UNAUTHENTICATED_IDLE: std::time::Duration = std::time::Duration::from_secs(120);

/// Commands MongoDB 7.0 still accepts over OP_QUERY.
const OP_QUERY_COMMANDS: &[&str] = &[
    "_isSelf",
    "authenticate",
    "buildInfo",
    "buildinfo",
    "hello",
    "isMaster",
    "ismaster",
    "saslContinue",
    "saslStart",
];

/// OP_QUERY flag `Exhaust`.
const QUERY_FLAG_EXHAUST: i32 = 1 << 6;

enum ReadOutcome {
    Frame(Bytes),
    Closed,
    Fatal(String),
}

struct Connection {
    stream: crate::tls::Stream,
    buf: BytesMut,
    /// The reply being written, kept between replies (up to [`KEEP_REPLY_BUFFER`] bytes of
    /// capacity) so a reply does not allocate its message.
    out: Vec<u8>,
    server: Arc<ServerState>,
    client: Client,
    next_request_id: i32,
}

/// Serves one connection until the client leaves, a fatal error occurs, or shutdown. With
/// TLS on, the connection first becomes plain or TLS ([`crate::tls::Tls::establish`], bounded
/// by its handshake timeout); a refused or failed handshake closes it.
pub async fn serve(
    server: Arc<ServerState>,
    tcp: TcpStream,
    mut client: Client,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = tcp.set_nodelay(true);
    let stream = match &server.tls {
        None => crate::tls::Stream::Plain(tcp),
        Some(tls) => {
            let established = tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => return,
                r = tls.establish(tcp, client.peer) => r,
            };
            match established {
                Ok(Some((stream, peer))) => {
                    client.tls = peer;
                    stream
                }
                Ok(None) => return,
                Err(reason) => {
                    warn!(id = 22988, remote = %client.peer, error = %reason,
                          "Error receiving request from client. Ending connection from remote");
                    return;
                }
            }
        }
    };
    let mut conn = Connection {
        stream,
        buf: BytesMut::with_capacity(8 * 1024),
        out: Vec::with_capacity(8 * 1024),
        server,
        client,
        next_request_id: 1,
    };
    // One shutdown wait for the connection's life: it registers with the shared shutdown
    // signal once, not once per request (a fresh wait per read would add and remove a waiter
    // under the signal's lock, shared by every connection, on each request).
    let stop = shutdown.wait_for(|s| *s);
    tokio::pin!(stop);
    loop {
        // With access control on, a connection that has not authenticated gets a small message
        // limit and an idle timeout (drivers' monitoring connections send `hello` every few
        // seconds; pooled ones authenticate first).
        let unauthenticated = conn.server.config.auth && !conn.client.auth.is_authenticated();
        let read = async {
            if unauthenticated {
                tokio::time::timeout(
                    UNAUTHENTICATED_IDLE,
                    conn.read_frame(UNAUTHENTICATED_MAX_MESSAGE),
                )
                .await
                .ok()
            } else {
                Some(conn.read_frame(MAX_MESSAGE_SIZE).await)
            }
        };
        let outcome = tokio::select! {
            biased;
            _ = &mut stop => break,
            r = read => match r {
                Some(r) => r,
                None => {
                    info!(remote = %conn.client.peer,
                          "Closing an unauthenticated connection idle for too long");
                    break;
                }
            },
        };
        match outcome {
            ReadOutcome::Frame(frame) => {
                if !conn.handle(&frame).await {
                    break;
                }
            }
            ReadOutcome::Closed => break,
            ReadOutcome::Fatal(reason) => {
                warn!(id = 22988, remote = %conn.client.peer, error = %reason,
                      "Error receiving request from client. Ending connection from remote");
                break;
            }
        }
    }
    conn.server.ops.disconnect(conn.client.id);
    let _ = conn.stream.shutdown().await;
}

impl Connection {
    async fn read_frame(&mut self, max: usize) -> ReadOutcome {
        loop {
            match header::check_frame(&self.buf, max) {
                Err(e) => return ReadOutcome::Fatal(e.to_string()),
                Ok(Some(n)) if self.buf.len() >= n => {
                    return ReadOutcome::Frame(self.buf.split_to(n).freeze());
                }
                Ok(Some(n)) => {
                    let missing = n - self.buf.len();
                    if self.buf.capacity() - self.buf.len() < missing.min(READ_STEP) {
                        self.buf.reserve(missing.min(READ_STEP));
                    }
                }
                Ok(None) => {}
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) if self.buf.is_empty() => return ReadOutcome::Closed,
                Ok(0) => {
                    return ReadOutcome::Fatal(
                        "connection closed in the middle of a message".into(),
                    );
                }
                Ok(n) => {
                    self.server
                        .network
                        .physical_bytes_in
                        .fetch_add(n as i64, Relaxed);
                }
                Err(e) => return ReadOutcome::Fatal(e.to_string()),
            }
        }
    }

    fn request_id(&mut self) -> i32 {
        let id = self.next_request_id;
        self.next_request_id = self.next_request_id.wrapping_add(1).max(1);
        id
    }

    /// Writes `message`, compressed with `compressor` when the request was compressed.
    async fn send(&mut self, message: Vec<u8>, compressor: Option<Compressor>) -> bool {
        self.send_bytes(&message, compressor).await
    }

    /// Encodes an OP_MSG reply into the connection's reply buffer and writes it (see
    /// [`Connection::send`]).
    async fn send_msg(
        &mut self,
        id: i32,
        response_to: i32,
        flags: u32,
        reply: &RawDocument,
        checksum: bool,
        compressor: Option<Compressor>,
    ) -> bool {
        let mut out = std::mem::take(&mut self.out);
        op_msg::encode_into(&mut out, id, response_to, flags, reply, checksum);
        let sent = self.send_bytes(&out, compressor).await;
        if out.capacity() <= KEEP_REPLY_BUFFER {
            self.out = out;
        }
        sent
    }

    async fn send_bytes(&mut self, message: &[u8], compressor: Option<Compressor>) -> bool {
        self.server
            .network
            .bytes_out
            .fetch_add(message.len() as i64, Relaxed);
        let compressed = compressor.and_then(|c| {
            compression::compress_message(message, c)
                .ok()
                // MongoDB sends a reply uncompressed when compressing would exceed the limit.
                .filter(|z| z.len() <= MAX_MESSAGE_SIZE)
        });
        let bytes = compressed.as_deref().unwrap_or(message);
        self.server
            .network
            .physical_bytes_out
            .fetch_add(bytes.len() as i64, Relaxed);
        // The flush sends what TLS buffered (a no-op on plain TCP).
        self.stream.write_all(bytes).await.is_ok() && self.stream.flush().await.is_ok()
    }

    /// Handles one frame; returns false when the connection must close.
    async fn handle(&mut self, frame: &Bytes) -> bool {
        self.server.network.num_requests.fetch_add(1, Relaxed);
        let incoming = match decode(frame, MAX_MESSAGE_SIZE) {
            Ok(i) => i,
            Err(rejected) => {
                let err = CommandError::from(rejected.error.clone());
                if rejected.is_fatal() {
                    warn!(id = 22988, remote = %self.client.peer, error = %err,
                          "Error receiving request from client. Ending connection from remote");
                    return false;
                }
                debug!(remote = %self.client.peer, error = %err, "rejected malformed message");
                let reply = err.to_reply();
                let id = self.request_id();
                let msg = match rejected.protocol {
                    ReplyProtocol::Msg => op_msg::encode(id, rejected.request_id, 0, &reply, false),
                    ReplyProtocol::Reply => {
                        op_query::encode_reply(id, rejected.request_id, REPLY_AWAIT_CAPABLE, &reply)
                    }
                };
                return self.send(msg, rejected.compressor).await;
            }
        };
        let logical_len = usize::try_from(incoming.header.message_length).unwrap_or(frame.len());
        self.server
            .network
            .bytes_in
            .fetch_add(logical_len as i64, Relaxed);
        let request_id = incoming.header.request_id;
        let compressor = incoming.compressor;
        match incoming.body {
            Body::Msg(msg) => {
                let checksum = msg.checksum_present();
                let client_more_to_come = msg.more_to_come();
                let exhaust_allowed = msg.exhaust_allowed();
                let command = match msg.into_command() {
                    Ok(c) => c,
                    Err(e) => {
                        let reply = CommandError::from(e).to_reply();
                        let id = self.request_id();
                        let m = op_msg::encode(id, request_id, 0, &reply, checksum);
                        return self.send(m, compressor).await;
                    }
                };
                let Some((reply, next)) = self
                    .run_command(&command, exhaust_allowed, Some(frame))
                    .await
                else {
                    return false;
                };
                if client_more_to_come {
                    return true;
                }
                let id = self.request_id();
                let flags = if next.is_some() { MORE_TO_COME } else { 0 };
                if !self
                    .send_msg(id, request_id, flags, &reply, checksum, compressor)
                    .await
                {
                    return false;
                }
                match next {
                    Some(next) => self.stream_exhaust(next, id, checksum, compressor).await,
                    None => true,
                }
            }
            Body::Query(query) => {
                let reply = match self.query_command(&query) {
                    Ok(cmd) => match self.run_command(&cmd, false, None).await {
                        Some((reply, _)) => reply,
                        None => return false,
                    },
                    Err(e) => e,
                };
                let flags = if reply.get("$err").ok().flatten().is_some() {
                    REPLY_QUERY_FAILURE
                } else {
                    REPLY_AWAIT_CAPABLE
                };
                let id = self.request_id();
                let m = op_query::encode_reply(id, request_id, flags, &reply);
                self.send(m, compressor).await
            }
            Body::LegacyGetMore => {
                let reply = rawdoc! {
                    "$err": "OP_GET_MORE is no longer supported. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal",
                    "code": 5739101,
                    "ok": 0.0,
                };
                let id = self.request_id();
                let m = op_query::encode_reply(id, request_id, REPLY_QUERY_FAILURE, &reply);
                self.send(m, compressor).await
            }
        }
    }

    /// Turns an OP_QUERY into a command document, or into the reply that refuses it.
    fn query_command(&self, q: &cairn_wire::OpQuery) -> Result<RawDocumentBuf, RawDocumentBuf> {
        let (db, cmd) = match q.command() {
            Ok(x) => x,
            Err(WireError::OpQueryNotCommand(_)) => {
                return Err(rawdoc! {
                    "$err": "OP_QUERY is no longer supported. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal",
                    "code": 5739101,
                    "ok": 0.0,
                });
            }
            Err(e) => return Err(CommandError::from(e).to_reply()),
        };
        if q.flags & QUERY_FLAG_EXHAUST != 0 {
            return Err(CommandError::new(
                ErrorCode::Location(18527),
                "The 'exhaust' OP_QUERY flag is invalid for commands",
            )
            .to_reply());
        }
        if q.number_to_return != 1 && q.number_to_return != -1 {
            return Err(CommandError::new(
                ErrorCode::Location(16979),
                format!(
                    "Bad numberToReturn ({}) for $cmd type ns - can only be 1 or -1",
                    q.number_to_return
                ),
            )
            .to_reply());
        }
        let name = cmd
            .iter()
            .next()
            .and_then(|e| e.ok())
            .map(|(k, _)| k.as_str().to_string())
            .unwrap_or_default();
        if !OP_QUERY_COMMANDS.contains(&name.as_str()) {
            return Err(CommandError::new(
                ErrorCode::UnsupportedOpQueryCommand,
                format!(
                    "Unsupported OP_QUERY command: {name}. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal"
                ),
            )
            .to_reply());
        }
        let mut out = RawDocumentBuf::new();
        for (k, v) in cmd.iter().flatten() {
            if k.as_str() != "$db" && k.as_str() != "$readPreference" {
                out.append(k, v);
            }
        }
        out.append(bson::raw::cstr!("$db"), db.as_str());
        Ok(out)
    }

    /// Runs a command, logging it (and it if slow); `frame` is the message the body lies in,
    /// if it does. Returns `None` when the client disconnected while a kill-on-disconnect
    /// command was waiting.
    async fn run_command(
        &mut self,
        body: &RawDocument,
        exhaust_allowed: bool,
        frame: Option<&Bytes>,
    ) -> Option<(RawDocumentBuf, Option<RawDocumentBuf>)> {
        let parsed = match frame {
            Some(frame) => commands::Parsed::parse_in(body, frame),
            None => commands::Parsed::parse(body),
        };
        let named = commands::Named::of(&parsed);
        let (db, name) = named.envelope.as_ref().copied().unwrap_or_default();
        let awaitable = parsed.find("maxAwaitTimeMS").is_some();
        let kill_on_disconnect = named.command.is_some_and(|c| c.kill_on_disconnect);
        let started = Instant::now();
        self.server.connections.active.fetch_add(1, Relaxed);
        let Connection {
            stream,
            buf,
            server,
            client,
            ..
        } = self;
        let fut = commands::dispatch_parsed(server, client, &parsed, named, exhaust_allowed);
        let result = if kill_on_disconnect {
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    r = &mut fut => break Some(r),
                    n = stream.read_buf(buf) => match n {
                        Ok(0) | Err(_) => break None,
                        Ok(n) => {
                            server.network.physical_bytes_in.fetch_add(n as i64, Relaxed);
                            if buf.len() > MAX_MESSAGE_SIZE + HEADER_LEN {
                                break None;
                            }
                        }
                    },
                }
            }
        } else {
            Some(fut.await)
        };
        self.server.connections.active.fetch_sub(1, Relaxed);
        if self.client.close_requested {
            debug!(command = %name, "closing the connection as the command asked");
            return None;
        }
        let elapsed = started.elapsed();
        let millis = elapsed.as_millis() as u64;
        let op = self.client.last_op.take();
        match &result {
            Some((reply, _)) => {
                // Read from the reply only when a line is written (tracing evaluates a
                // field only for an enabled event).
                let ok = || reply.get_f64("ok").unwrap_or(0.0) == 1.0;
                // A database's profile filter decides instead of slowms/sampleRate.
                let slow = match self.client.slow_log.take() {
                    Some(decided) => decided,
                    None => self.server.profiler.is_slow(millis),
                };
                if !awaitable && slow {
                    // As mongod's line: the plan and the work of a command that read (a
                    // `None` field is left out of the line).
                    let (keys, docs) = op.as_ref().map(|o| o.work()).unwrap_or((0, 0));
                    let plan = op.as_ref().and_then(|o| o.plan_summary());
                    let read = plan.is_some() || keys > 0 || docs > 0;
                    info!(id = 51803, ns = %format!("{db}.$cmd"), command = %name,
                          planSummary = plan.as_deref(), keysExamined = read.then_some(keys),
                          docsExamined = read.then_some(docs), durationMillis = millis,
                          ok = ok(), "Slow query");
                } else {
                    debug!(ns = %format!("{db}.$cmd"), command = %name,
                           durationMillis = millis, ok = ok(), "command");
                }
            }
            None => debug!(command = %name, "client disconnected while the command waited"),
        }
        result
    }

    /// Streams exhaust replies: each runs `next`, answers the previous reply's id, and keeps
    /// `moreToCome` while the command wants to continue.
    async fn stream_exhaust(
        &mut self,
        mut next: RawDocumentBuf,
        mut previous_id: i32,
        checksum: bool,
        compressor: Option<Compressor>,
    ) -> bool {
        let legacy = commands::parse_envelope(&next)
            .map(|(_, n)| n != "hello")
            .unwrap_or(false);
        let counter = if legacy {
            &self.server.connections.exhaust_is_master
        } else {
            &self.server.connections.exhaust_hello
        };
        counter.fetch_add(1, Relaxed);
        let server = self.server.clone();
        let keep = loop {
            let Some((reply, more)) = self.run_command(&next, true, None).await else {
                break false;
            };
            let id = self.request_id();
            let flags = if more.is_some() { MORE_TO_COME } else { 0 };
            if !self
                .send_msg(id, previous_id, flags, &reply, checksum, compressor)
                .await
            {
                break false;
            }
            match more {
                Some(body) => {
                    next = body;
                    previous_id = id;
                }
                None => break true,
            }
        };
        let counter = if legacy {
            &server.connections.exhaust_is_master
        } else {
            &server.connections.exhaust_hello
        };
        counter.fetch_sub(1, Relaxed);
        keep
    }
}
