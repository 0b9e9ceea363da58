//! `serverStatus`: live counters.
//!
//! The fixed header (`host`, `version`, `process: "mongos"`, `pid`, `uptime`,
//! `uptimeMillis`, `uptimeEstimate`, `localTime`) is followed by the sections in alphabetical
//! order, then `mem`. `{<section>: 0}` leaves a section out (`{metrics: 0}` also drops `mem`,
//! which MongoDB keeps in its metrics tree); unknown fields are ignored, as in MongoDB.
//! Every number is read from the server's atomics or from the kernel at call time.
//! `opLatencies` (`{opLatencies: {histograms: true}}` adds the histograms), `metrics.cursor`,
//! `metrics.document` and `metrics.queryExecutor` come from [`crate::metrics`];
//! `storageEngine` names Cairn's engine; `transportSecurity` counts TLS connections by
//! protocol version.

use std::sync::atomic::Ordering::Relaxed;

use bson::raw::cstr;
use bson::{RawDocumentBuf, rawdoc};

use super::build_info::MONGODB_VERSION;
use super::host_info::pretty_host_name;
use super::{CmdFuture, Command, Counter, Fields, Invocation, ready, truthy};
use crate::state::ServerState;
use crate::sysinfo;

/// `serverStatus`.
pub static COMMAND: Command = Command {
    name: "serverStatus",
    aliases: &[],
    help: "returns lots of administrative server statistics",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Any,
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Cluster(&[super::ActionType::ServerStatus]),
    run,
};

fn i32_of(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

fn connections(s: &ServerState) -> RawDocumentBuf {
    let c = &s.connections;
    let current = c.current.load(Relaxed);
    rawdoc! {
        "current": i32_of(current),
        "available": i32_of(i64::from(s.config.max_connections) - current),
        "totalCreated": i32_of(c.total_created.load(Relaxed)),
        "rejected": i32_of(c.rejected.load(Relaxed)),
        "active": i32_of(c.active.load(Relaxed)),
        "threaded": i32_of(current),
        "exhaustIsMaster": i32_of(c.exhaust_is_master.load(Relaxed)),
        "exhaustHello": i32_of(c.exhaust_hello.load(Relaxed)),
        "awaitingTopologyChanges": i32_of(c.awaiting_topology_changes.load(Relaxed)),
    }
}

fn network(s: &ServerState) -> RawDocumentBuf {
    let n = &s.network;
    rawdoc! {
        "bytesIn": n.bytes_in.load(Relaxed),
        "bytesOut": n.bytes_out.load(Relaxed),
        "physicalBytesIn": n.physical_bytes_in.load(Relaxed),
        "physicalBytesOut": n.physical_bytes_out.load(Relaxed),
        "numSlowDNSOperations": 0_i64,
        "numSlowSSLOperations": 0_i64,
        "numRequests": n.num_requests.load(Relaxed),
    }
}

fn opcounters(s: &ServerState) -> RawDocumentBuf {
    let o = &s.opcounters;
    rawdoc! {
        "insert": o.insert.load(Relaxed),
        "query": o.query.load(Relaxed),
        "update": o.update.load(Relaxed),
        "delete": o.delete.load(Relaxed),
        "getmore": o.getmore.load(Relaxed),
        "command": o.command.load(Relaxed),
    }
}

fn mem() -> RawDocumentBuf {
    match sysinfo::process_memory_mb() {
        Some((resident, virt)) => rawdoc! {
            "bits": (usize::BITS as i32),
            "resident": resident,
            "virtual": virt,
            "supported": true,
        },
        None => rawdoc! {
            "bits": (usize::BITS as i32),
            "resident": 0_i32,
            "virtual": 0_i32,
            "supported": false,
            "note": "not all mem info support on this platform",
        },
    }
}

/// Builds one section from the live state.
type SectionBuilder = fn(&ServerState) -> RawDocumentBuf;

/// Cairn's storage counters: committed write transactions, conflict reruns, the keys those
/// transactions read and wrote (write amplification is visible here), and fsyncs.
fn cairn_storage(s: &ServerState) -> RawDocumentBuf {
    let c = &s.store.counters;
    let n = |a: &std::sync::atomic::AtomicU64| i64::try_from(a.load(Relaxed)).unwrap_or(i64::MAX);
    rawdoc! {
        "commits": n(&c.commits),
        "conflicts": n(&c.conflicts),
        "keysRead": n(&c.keys_read),
        "keysWritten": n(&c.keys_written),
        "fsyncs": i64::try_from(s.store.syncs()).unwrap_or(i64::MAX),
    }
}

/// `metrics`: cursors, documents, the query executor's work and the TTL monitor's.
fn metrics(s: &ServerState) -> RawDocumentBuf {
    rawdoc! {
        "cursor": s.metrics.cursor(s.cursors.counts()),
        "document": s.metrics.document(),
        "queryExecutor": s.metrics.query_executor(),
        "ttl": {
            "deletedDocuments": s.ttl.deleted_documents.load(Relaxed),
            "passes": s.ttl.passes.load(Relaxed),
        },
    }
}

/// `storageEngine`: Cairn's engine, with the capabilities MongoDB reports there.
fn storage_engine(_s: &ServerState) -> RawDocumentBuf {
    rawdoc! {
        "name": "cairn",
        "supportsCommittedReads": true,
        "oldestRequiredTimestampForCrashRecovery": bson::Timestamp {time: 0, increment: 0},
        "supportsPendingDrops": false,
        "dropPendingIdents": 0_i64,
        "supportsSnapshotReadConcern": true,
        "readOnly": false,
        "persistent": true,
        "backupCursorOpen": false,
    }
}

/// `transportSecurity`: TLS connections accepted since start, by protocol version (zeros
/// without TLS, as mongod reports them). rustls speaks only TLS 1.2 and 1.3.
fn transport_security(s: &ServerState) -> RawDocumentBuf {
    let count = |c: Option<&std::sync::atomic::AtomicI64>| c.map_or(0, |c| c.load(Relaxed));
    let t = s.tls.as_ref().map(|t| &t.counters);
    rawdoc! {
        "1.0": 0_i64,
        "1.1": 0_i64,
        "1.2": count(t.map(|t| &t.tls12)),
        "1.3": count(t.map(|t| &t.tls13)),
        "unknown": count(t.map(|t| &t.unknown)),
    }
}

/// The sections, alphabetically, with their builders.
const SECTIONS: &[(&str, SectionBuilder)] = &[
    ("cairnStorage", cairn_storage),
    ("connections", connections),
    ("network", network),
    ("opLatencies", |s| s.metrics.op_latencies(false)),
    ("opcounters", opcounters),
    ("storageEngine", storage_engine),
    ("transportSecurity", transport_security),
];

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    let s = inv.server;
    let body = inv.req.body;
    let excluded = |name: &str| matches!(body.get(name), Ok(Some(v)) if !truthy(&v));
    let uptime = s.uptime();
    let mut out = rawdoc! {
        "host": pretty_host_name(&s.host, inv.client.local.port()),
        "version": MONGODB_VERSION,
        "process": "mongos",
        "pid": i64::from(std::process::id()),
        "uptime": (uptime.as_secs() as f64),
        "uptimeMillis": (uptime.as_millis() as i64),
        "uptimeEstimate": (uptime.as_secs() as i64),
        "localTime": bson::DateTime::now(),
    };
    // `{opLatencies: {histograms: true}}` adds the latency histograms.
    let histograms = matches!(
        body.get("opLatencies"),
        Ok(Some(bson::RawBsonRef::Document(d))) if d.get("histograms").ok().flatten().is_some_and(|v| truthy(&v))
    );
    for (name, build) in SECTIONS {
        if !excluded(name)
            && let Ok(k) = <&bson::raw::CStr>::try_from(*name)
        {
            if *name == "opLatencies" && histograms {
                out.append(k, s.metrics.op_latencies(true));
            } else {
                out.append(k, build(s));
            }
        }
    }
    if !excluded("metrics") && !excluded("mem") {
        out.append(cstr!("mem"), mem());
    }
    if !excluded("metrics") {
        out.append(cstr!("metrics"), metrics(s));
    }
    ready(Ok(out.into()))
}
