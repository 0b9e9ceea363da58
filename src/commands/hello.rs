//! `hello` and its legacy name `isMaster` (alias `ismaster`): the handshake and monitoring.
//!
//! Cairn identifies as a router (`msg: "isdbgrid"`, DESIGN §5), so drivers allow sessions,
//! transactions and retryable writes against a plain `mongodb://host:port` URI. The reply's
//! fields follow mongos 7.0's order.
//!
//! Awaitable hello (the SDAM streaming protocol): a request with `topologyVersion` and
//! `maxAwaitTimeMS` whose `processId` is ours and whose counter equals ours waits until the
//! topology changes or `maxAwaitTimeMS` passes; a different `processId` or an older counter is
//! answered at once. With `exhaustAllowed` the reply carries `moreToCome` and the connection
//! keeps streaming replies (see [`super::Reply::more_to_come`]) until an error or the client
//! leaves. Shutdown bumps the counter, so waiters wake and answer ShutdownInProgress (91).
//!
//! Authentication: `saslSupportedMechs: "<db>.<user>"` adds the mechanisms that user has
//! credentials for (nothing for an unknown user), and `speculativeAuthenticate` (a
//! `saslStart` body plus `db`) runs the first SASL step in the handshake and adds its reply —
//! or nothing when it fails ([`crate::auth::sasl`]).
//!
//! Unknown fields are ignored (drivers add new handshake fields, e.g. PyMongo 4.20's
//! `backpressure`, and servers must accept them); the fields hello knows are type-checked.
//!
//! Invariants: the client metadata document is accepted once per connection (186 after);
//! compression is negotiated as the intersection of the client's list, in the client's
//! order, with the compressors the server enables.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_wire::{Compressor, MAX_BSON_OBJECT_SIZE, MAX_MESSAGE_SIZE};
use tracing::info;

use super::{CmdFuture, Command, Counter, Fields, Invocation, Reply, type_name};
use crate::error::{CommandError, ErrorCode};
use crate::state::{ServerState, TopologyVersion};

/// `maxWireVersion` (MongoDB 7.0).
pub const MAX_WIRE_VERSION: i32 = 21;
/// `maxWriteBatchSize`.
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
/// `logicalSessionTimeoutMinutes`.
pub const LOGICAL_SESSION_TIMEOUT_MINUTES: i32 = 30;

/// `hello`.
pub static HELLO: Command = Command {
    name: "hello",
    aliases: &[],
    help: "Check if this server is primary for a replica set\n{hello : 1}",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: true,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: true,
    authz: super::Authz::None,
    run: run_hello,
};

/// `isMaster` / `ismaster`.
pub static IS_MASTER: Command = Command {
    name: "isMaster",
    aliases: &["ismaster"],
    help: "Check if this server is primary for a replica set\n{isMaster : 1}",
    requires_auth: false,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: true,
    authz: super::Authz::None,
    run: run_is_master,
};

fn run_hello(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(hello(inv, false))
}

fn run_is_master(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(hello(inv, true))
}

/// An awaitable request's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Awaitable {
    version: TopologyVersion,
    max_await: Duration,
}

fn parse_topology_version(cmd: &str, v: RawBsonRef<'_>) -> Result<TopologyVersion, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(CommandError::wrong_type(
            &format!("{cmd}.topologyVersion"),
            type_name(&v),
            "object",
        ));
    };
    let process_id = match d.get("processId") {
        Ok(Some(RawBsonRef::ObjectId(o))) => o,
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.topologyVersion.processId"),
                type_name(&other),
                "objectId",
            ));
        }
        _ => {
            return Err(CommandError::missing_field(&format!(
                "{cmd}.topologyVersion.processId"
            )));
        }
    };
    let counter = match d.get("counter") {
        Ok(Some(RawBsonRef::Int64(c))) => c,
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.topologyVersion.counter"),
                type_name(&other),
                "long",
            ));
        }
        _ => {
            return Err(CommandError::missing_field(&format!(
                "{cmd}.topologyVersion.counter"
            )));
        }
    };
    Ok(TopologyVersion {
        process_id,
        counter,
    })
}

/// `safeInt64`: any integral number.
fn parse_safe_i64(field: &str, v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Ok(d as i64),
        other => Err(CommandError::wrong_type(field, type_name(&other), "long")),
    }
}

fn parse_awaitable(
    cmd: &str,
    body: &RawDocument,
    exhaust: bool,
) -> Result<Option<Awaitable>, CommandError> {
    let tv = body.get("topologyVersion").ok().flatten();
    let max = body.get("maxAwaitTimeMS").ok().flatten();
    match (tv, max) {
        (None, None) => {
            if exhaust {
                return Err(CommandError::new(
                    ErrorCode::Location(51763),
                    "A hello/isMaster request with exhaust must specify 'maxAwaitTimeMS'",
                ));
            }
            Ok(None)
        }
        (Some(_), None) => Err(CommandError::new(
            ErrorCode::Location(51760),
            "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'",
        )),
        (None, Some(_)) => Err(CommandError::new(
            ErrorCode::Location(51760),
            "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'",
        )),
        (Some(tv), Some(max)) => {
            let version = parse_topology_version(cmd, tv)?;
            let max = parse_safe_i64(&format!("{cmd}.maxAwaitTimeMS"), max)?;
            if version.counter < 0 {
                return Err(CommandError::new(
                    ErrorCode::Location(51758),
                    "topologyVersion must have a non-negative counter",
                ));
            }
            if max < 0 {
                return Err(CommandError::new(
                    ErrorCode::Location(51759),
                    "maxAwaitTimeMS must be a non-negative integer",
                ));
            }
            Ok(Some(Awaitable {
                version,
                max_await: Duration::from_millis(max as u64),
            }))
        }
    }
}

/// Counts a waiting hello for `serverStatus.connections.awaitingTopologyChanges`.
struct AwaitingGuard<'a>(&'a ServerState);

impl<'a> AwaitingGuard<'a> {
    fn new(s: &'a ServerState) -> Self {
        s.connections
            .awaiting_topology_changes
            .fetch_add(1, Ordering::Relaxed);
        AwaitingGuard(s)
    }
}

impl Drop for AwaitingGuard<'_> {
    fn drop(&mut self) {
        self.0
            .connections
            .awaiting_topology_changes
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Waits as the awaitable-hello protocol requires; errors if the client's counter is ahead.
async fn wait_for_topology_change(server: &ServerState, a: Awaitable) -> Result<(), CommandError> {
    let current = server.topology_version();
    if a.version.process_id != current.process_id || a.version.counter < current.counter {
        return Ok(());
    }
    if a.version.counter > current.counter {
        return Err(CommandError::new(
            ErrorCode::Location(51761),
            format!(
                "Received a topology version with counter: {} which is greater than the mongos topology version counter: {}",
                a.version.counter, current.counter
            ),
        ));
    }
    let _guard = AwaitingGuard::new(server);
    let mut rx = server.watch_topology();
    let seen = a.version.counter;
    // A timeout is the normal outcome: answer with the unchanged topology.
    let _ = tokio::time::timeout(a.max_await, rx.wait_for(|t| t.counter != seen)).await;
    Ok(())
}

fn negotiate_compression(
    server: &ServerState,
    cmd: &str,
    body: &RawDocument,
    current: &mut Vec<Compressor>,
) -> Result<(), CommandError> {
    let Some(v) = body.get("compression").ok().flatten() else {
        return Ok(());
    };
    let RawBsonRef::Array(arr) = v else {
        return Err(CommandError::wrong_type(
            &format!("{cmd}.compression"),
            type_name(&v),
            "array",
        ));
    };
    let mut chosen = Vec::new();
    for (i, el) in arr.into_iter().enumerate() {
        let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let RawBsonRef::String(name) = el else {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.compression.{i}"),
                type_name(&el),
                "string",
            ));
        };
        if let Some(c) = Compressor::from_name(name)
            && server.compressors.contains(&c)
            && !chosen.contains(&c)
        {
            chosen.push(c);
        }
    }
    *current = chosen;
    Ok(())
}

fn topology_doc(tv: TopologyVersion) -> RawDocumentBuf {
    rawdoc! {"processId": tv.process_id, "counter": tv.counter}
}

/// The body of the next exhaust request: the same command with the current topologyVersion.
fn next_exhaust_body(body: &RawDocument, tv: TopologyVersion) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for (k, v) in body.iter().flatten() {
        if k.as_str() == "topologyVersion" {
            out.append(k, topology_doc(tv));
        } else {
            out.append(k, v);
        }
    }
    out
}

async fn hello(inv: Invocation<'_>, legacy: bool) -> Result<Reply, CommandError> {
    let Invocation {
        server,
        client,
        req,
        ..
    } = inv;
    let cmd = if legacy { "isMaster" } else { "hello" };
    let body = req.body;

    if let Some(v) = body.get("client").ok().flatten() {
        let RawBsonRef::Document(meta) = v else {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.client"),
                type_name(&v),
                "object",
            ));
        };
        if client.metadata.is_some() {
            return Err(CommandError::new(
                ErrorCode::ClientMetadataCannotBeMutated,
                "The client metadata document may only be sent in the first hello",
            ));
        }
        client.metadata = Some(meta.to_owned());
        let doc = bson::Document::try_from(meta)
            .map(|d| d.to_string())
            .unwrap_or_default();
        info!(id = 51800, remote = %client.peer, client = %format!("conn{}", client.id), doc = %doc, "client metadata");
    }
    if let Some(v) = body.get("loadBalanced").ok().flatten()
        && super::truthy(&v)
    {
        return Err(CommandError::new(
            ErrorCode::Location(354),
            "Driver attempted to initialize in load balancing mode, but the server does not support this mode",
        ));
    }
    negotiate_compression(server, cmd, body, &mut client.compressors)?;
    let awaitable = parse_awaitable(cmd, body, req.exhaust_allowed)?;
    if let Some(a) = awaitable {
        wait_for_topology_change(server, a).await?;
    }

    let tv = server.topology_version();
    if server.is_shutting_down() {
        return Err(CommandError::new(
            ErrorCode::ShutdownInProgress,
            "Mongos is in quiesce mode and will shut down",
        )
        .with_prefix(rawdoc! {"topologyVersion": topology_doc(tv)}));
    }

    let mut out = RawDocumentBuf::new();
    if legacy {
        out.append(cstr!("ismaster"), true);
    } else {
        out.append(cstr!("isWritablePrimary"), true);
    }
    out.append(cstr!("msg"), "isdbgrid");
    out.append(cstr!("topologyVersion"), topology_doc(tv));
    if body.get("helloOk").ok().flatten().is_some() {
        out.append(cstr!("helloOk"), true);
    }
    out.append(cstr!("maxBsonObjectSize"), MAX_BSON_OBJECT_SIZE as i32);
    out.append(cstr!("maxMessageSizeBytes"), MAX_MESSAGE_SIZE as i32);
    out.append(cstr!("maxWriteBatchSize"), MAX_WRITE_BATCH_SIZE);
    out.append(cstr!("localTime"), bson::DateTime::now());
    out.append(
        cstr!("logicalSessionTimeoutMinutes"),
        LOGICAL_SESSION_TIMEOUT_MINUTES,
    );
    out.append(
        cstr!("connectionId"),
        i32::try_from(client.id).unwrap_or(i32::MAX),
    );
    out.append(cstr!("maxWireVersion"), MAX_WIRE_VERSION);
    out.append(cstr!("minWireVersion"), 0_i32);
    if !client.compressors.is_empty() {
        let mut arr = RawArrayBuf::new();
        for c in &client.compressors {
            arr.push(c.name());
        }
        out.append(cstr!("compression"), arr);
    }
    if let Some(spec) = body.get("saslSupportedMechs").ok().flatten()
        && let Some(mechs) = crate::auth::sasl::supported_mechs(server, spec).await?
    {
        let mut arr = RawArrayBuf::new();
        for m in mechs {
            arr.push(m);
        }
        out.append(cstr!("saslSupportedMechs"), arr);
    }
    if let Some(spec) = body.get("speculativeAuthenticate").ok().flatten()
        && let Some(reply) = crate::auth::sasl::speculative(server, client, spec).await
    {
        out.append(cstr!("speculativeAuthenticate"), reply);
    }
    let more_to_come = match awaitable {
        Some(_) if req.exhaust_allowed => Some(next_exhaust_body(body, tv)),
        _ => None,
    };
    Ok(Reply {
        body: out,
        more_to_come,
        cursor: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;

    #[test]
    fn awaitable_parameters_are_validated() {
        let oid = ObjectId::new();
        let ok = rawdoc! {"hello": 1, "topologyVersion": {"processId": oid, "counter": 0_i64}, "maxAwaitTimeMS": 10};
        let a = parse_awaitable("hello", &ok, true).unwrap().unwrap();
        assert_eq!(a.max_await, Duration::from_millis(10));
        let code =
            |d: RawDocumentBuf, ex: bool| parse_awaitable("hello", &d, ex).unwrap_err().code.code();
        assert_eq!(
            code(rawdoc! {"hello": 1, "maxAwaitTimeMS": 10}, false),
            51760
        );
        assert_eq!(
            code(
                rawdoc! {"hello": 1, "topologyVersion": {"processId": oid, "counter": 0_i64}},
                false
            ),
            51760
        );
        assert_eq!(code(rawdoc! {"hello": 1}, true), 51763);
        assert_eq!(
            code(
                rawdoc! {"hello": 1, "topologyVersion": {"processId": oid, "counter": 0_i32}, "maxAwaitTimeMS": 1},
                false
            ),
            14
        );
        assert_eq!(
            code(
                rawdoc! {"hello": 1, "topologyVersion": {"processId": oid, "counter": -1_i64}, "maxAwaitTimeMS": 1},
                false
            ),
            51758
        );
        assert_eq!(
            code(
                rawdoc! {"hello": 1, "topologyVersion": {"processId": oid, "counter": 1_i64}, "maxAwaitTimeMS": -1},
                false
            ),
            51759
        );
        assert_eq!(
            code(
                rawdoc! {"hello": 1, "topologyVersion": {"counter": 1_i64}, "maxAwaitTimeMS": 1},
                false
            ),
            40414
        );
    }

    #[test]
    fn exhaust_body_carries_the_current_version() {
        let tv = TopologyVersion {
            process_id: ObjectId::new(),
            counter: 3,
        };
        let body = rawdoc! {"hello": 1, "topologyVersion": {"processId": ObjectId::new(), "counter": 0_i64}, "maxAwaitTimeMS": 10, "$db": "admin"};
        let next = next_exhaust_body(&body, tv);
        assert_eq!(
            next.get_document("topologyVersion").unwrap(),
            &*topology_doc(tv)
        );
        assert_eq!(next.get_i32("maxAwaitTimeMS").unwrap(), 10);
        assert_eq!(next.get_str("$db").unwrap(), "admin");
    }
}
