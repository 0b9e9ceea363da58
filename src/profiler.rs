//! The database profiler: per-database levels, the global `slowms`/`sampleRate`, and the
//! entries written to `<db>.system.profile`.
//!
//! # Map
//! - [`Profiler`] (in [`crate::state::ServerState::profiler`]) holds each database's level
//!   (0 off, 1 slow operations, 2 everything; `--profile` sets the default) and optional
//!   `filter`, and the server-wide `slowms` and `sampleRate` (`--slowms`,
//!   `--slow-op-sample-rate`) that the `profile` command reads and changes and the slow-query
//!   log uses.
//! - The dispatcher reads the database's settings when a command starts ([`Profiler::level`],
//!   as MongoDB decides with the level in force when the operation entered the database — so
//!   the `profile` command that turns profiling on is not itself profiled) and, when the
//!   command ends, [`record`] builds the entry in MongoDB's shape ([`entry`]: `op`, `ns`,
//!   `command`, `keysExamined`, `docsExamined`, `nreturned`, `nModified`, `millis`,
//!   `planSummary`, `ts`, `client`, `appName`, `user`…) and writes it before the reply goes out
//!   (so a client reading `system.profile` right after sees its operation).
//! - Level 1 profiles operations slower than `slowms`, sampled at `sampleRate`; a database
//!   `filter` (a query over the entry's fields) replaces both rules, as in MongoDB.
//!
//! # Storage and bounds
//! Entries are documents of a real collection, `<db>.system.profile` (readable with `find`,
//! `count`, `aggregate` like any other; clients cannot write it). MongoDB makes it a 1 MiB
//! capped collection; until Cairn has capped collections, [`write`] keeps it within
//! [`PROFILE_BYTES`] itself: each insert is followed, in the same storage transaction, by
//! deleting the oldest entries (lowest `_id`; entries get increasing ObjectIds, so `_id` order
//! is insertion order) until the collection's size is back under the bound. When capped
//! collections exist, `system.profile` should be created capped (`{capped: true, size:
//! PROFILE_BYTES}`) and [`write`] reduced to a plain insert. Entries carry that `_id` (first, as
//! Cairn's storage keys documents by it); MongoDB's have none.
//!
//! Invariants: a database that was never configured costs one atomic load per command; the
//! settings lock is held only to copy a database's settings; a failed profile write is logged
//! and never fails the command.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;
use cairn_storage::{Durability, ScanLimits, Store};

use crate::error::CommandError;
use crate::ops::Operation;
use crate::state::ServerState;

/// The bound on a database's `system.profile` (MongoDB's default capped size).
pub const PROFILE_BYTES: u64 = 1024 * 1024;

/// The largest command document an entry keeps whole (MongoDB's limit for profiled commands);
/// larger ones become `{$truncated: …}`.
pub const MAX_PROFILED_COMMAND_BYTES: usize = 50 * 1024;

/// A database's profiling filter: the document as given, and its parsed form.
#[derive(Debug)]
pub struct ProfileFilter {
    /// The filter as the client gave it.
    pub doc: RawDocumentBuf,
    /// The parsed filter.
    pub filter: Filter,
}

/// One database's profiling settings.
#[derive(Debug, Clone, Default)]
pub struct DbSettings {
    /// 0, 1 or 2.
    pub level: u8,
    /// The filter, if set.
    pub filter: Option<Arc<ProfileFilter>>,
}

/// Profiling settings of every database, plus the global thresholds.
#[derive(Debug)]
pub struct Profiler {
    slow_ms: AtomicI64,
    sample_rate: AtomicU64,
    default_level: u8,
    dbs: RwLock<HashMap<String, DbSettings>>,
    /// Whether any database may profile (the default level, or any configured database).
    active: AtomicBool,
    /// Serialises writes per server (entries are small; trimming reads the oldest ones).
    write_lock: Mutex<()>,
}

impl Profiler {
    /// Settings from the startup options.
    pub fn new(default_level: u8, slow_ms: u64, sample_rate: f64) -> Profiler {
        Profiler {
            slow_ms: AtomicI64::new(i64::try_from(slow_ms).unwrap_or(i64::MAX)),
            sample_rate: AtomicU64::new(sample_rate.to_bits()),
            default_level,
            dbs: RwLock::new(HashMap::new()),
            active: AtomicBool::new(default_level > 0),
            write_lock: Mutex::new(()),
        }
    }

    /// `slowms`: operations at least this slow are logged (and profiled at level 1).
    pub fn slow_ms(&self) -> i64 {
        self.slow_ms.load(Ordering::Relaxed)
    }

    /// `sampleRate`: the fraction of slow operations logged and profiled.
    pub fn sample_rate(&self) -> f64 {
        f64::from_bits(self.sample_rate.load(Ordering::Relaxed))
    }

    /// Sets `slowms`.
    pub fn set_slow_ms(&self, ms: i64) {
        self.slow_ms.store(ms, Ordering::Relaxed);
    }

    /// Sets `sampleRate`.
    pub fn set_sample_rate(&self, rate: f64) {
        self.sample_rate.store(rate.to_bits(), Ordering::Relaxed);
    }

    /// A database's settings.
    pub fn settings(&self, db: &str) -> DbSettings {
        self.dbs
            .read()
            .ok()
            .and_then(|m| m.get(db).cloned())
            .unwrap_or(DbSettings {
                level: self.default_level,
                filter: None,
            })
    }

    /// The settings a command on `db` runs under, or `None` when nothing is profiled there
    /// (the fast path: no lookup while no database profiles).
    pub fn level(&self, db: &str) -> Option<DbSettings> {
        if !self.active.load(Ordering::Relaxed) {
            return None;
        }
        let s = self.settings(db);
        (s.level > 0 || s.filter.is_some()).then_some(s)
    }

    /// Changes a database's level and/or filter (`Some(None)` unsets it); returns the old
    /// settings.
    pub fn set(
        &self,
        db: &str,
        level: Option<u8>,
        filter: Option<Option<Arc<ProfileFilter>>>,
    ) -> DbSettings {
        let old = self.settings(db);
        let mut new = old.clone();
        if let Some(l) = level {
            new.level = l;
        }
        if let Some(f) = filter {
            new.filter = f;
        }
        if let Ok(mut m) = self.dbs.write() {
            m.insert(db.to_string(), new);
            let any =
                self.default_level > 0 || m.values().any(|s| s.level > 0 || s.filter.is_some());
            self.active.store(any, Ordering::Relaxed);
        }
        old
    }

    /// Whether an operation of `millis` is slow enough to log or profile at level 1 (after
    /// sampling).
    pub fn is_slow(&self, millis: u64) -> bool {
        let slow = i64::try_from(millis).unwrap_or(i64::MAX) >= self.slow_ms();
        slow && {
            let rate = self.sample_rate();
            rate >= 1.0 || rand::random::<f64>() < rate
        }
    }
}

fn number(n: u64) -> bson::RawBson {
    crate::commands::configure_fail_point::number(n)
}

/// Counts an operation's reply reports, for its profile entry.
fn reply_counts(op: &Operation, reply: &RawDocument, d: &mut RawDocumentBuf) {
    use bson::raw::cstr;
    let n = |k: &str| match reply.get(k) {
        Ok(Some(RawBsonRef::Int32(i))) => u64::try_from(i).ok(),
        Ok(Some(RawBsonRef::Int64(i))) => u64::try_from(i).ok(),
        _ => None,
    };
    match op.command_name {
        "insert" => d.append(cstr!("ninserted"), number(n("n").unwrap_or(0))),
        "delete" => d.append(cstr!("ndeleted"), number(n("n").unwrap_or(0))),
        "update" => {
            let upserted = match reply.get("upserted") {
                Ok(Some(RawBsonRef::Array(a))) => a.into_iter().count() as u64,
                _ => 0,
            };
            let matched = n("n").unwrap_or(0).saturating_sub(upserted);
            d.append(cstr!("nMatched"), number(matched));
            d.append(cstr!("nModified"), number(n("nModified").unwrap_or(0)));
            d.append(cstr!("nUpserted"), number(upserted));
        }
        _ => {}
    }
}

/// An operation's profile entry, in MongoDB's field order.
pub fn entry(
    op: &Operation,
    body: &RawDocument,
    result: Result<&RawDocument, &CommandError>,
    millis: u64,
) -> RawDocumentBuf {
    use bson::raw::cstr;
    let mut d = rawdoc! {"op": op.op_type, "ns": op.ns.as_str()};
    d.append(
        cstr!("command"),
        crate::ops::command_copy(body, MAX_PROFILED_COMMAND_BYTES),
    );
    let cursor = result.ok().and_then(crate::metrics::cursor_reply);
    if let Some((_, id)) = cursor
        && id != 0
    {
        d.append(cstr!("cursorid"), id);
    }
    let reads = !matches!(op.command_name, "insert");
    let (keys, docs) = op.work();
    if reads && (op.plan_summary().is_some() || keys > 0 || docs > 0) {
        d.append(cstr!("keysExamined"), number(keys));
        d.append(cstr!("docsExamined"), number(docs));
    }
    if let Some((_, 0)) = cursor {
        d.append(cstr!("cursorExhausted"), true);
    }
    if let Ok(reply) = result {
        reply_counts(op, reply, &mut d);
    }
    crate::error::append_all(
        &mut d,
        &rawdoc! {"numYield": 0, "locks": {}, "flowControl": {}},
    );
    if let Some((n, _)) = cursor {
        d.append(cstr!("nreturned"), number(n));
    }
    let response = match result {
        Ok(r) => r.as_bytes().len() as u64,
        Err(e) => e.to_reply().as_bytes().len() as u64,
    };
    d.append(cstr!("responseLength"), number(response));
    d.append(cstr!("protocol"), "op_msg");
    if let Err(e) = result {
        d.append(cstr!("ok"), 0.0);
        d.append(cstr!("errCode"), e.code.code());
        d.append(cstr!("errName"), e.code.name().as_ref());
        d.append(cstr!("errMsg"), e.message.as_str());
    }
    d.append(cstr!("millis"), number(millis));
    if let Some(p) = op.plan_summary() {
        d.append(cstr!("planSummary"), p);
    }
    d.append(
        cstr!("ts"),
        bson::DateTime::from_system_time(op.started_at + op.started.elapsed()),
    );
    d.append(cstr!("client"), op.conn.peer.ip().to_string());
    if let Some(app) = op.conn.app_name() {
        d.append(cstr!("appName"), app);
    }
    d.append(cstr!("allUsers"), RawArrayBuf::new());
    d.append(cstr!("user"), "");
    d
}

/// Profiles a finished operation when its database's settings say so (see the module doc),
/// writing the entry before the command's reply is sent.
pub async fn record(
    server: &Arc<ServerState>,
    settings: Option<DbSettings>,
    op: &Operation,
    body: &RawDocument,
    result: Result<&RawDocument, &CommandError>,
) {
    let Some(settings) = settings else {
        return;
    };
    let millis = u64::try_from(op.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let e = entry(op, body, result, millis);
    let profile = match &settings.filter {
        Some(f) => f.filter.matches(&e),
        None => settings.level == 2 || (settings.level == 1 && server.profiler.is_slow(millis)),
    };
    if !profile {
        return;
    }
    let server2 = server.clone();
    let db = op.db.clone();
    let written = crate::blocking::run(move || {
        let _guard = server2.profiler.write_lock.lock();
        write(&server2.store, &db, e).map_err(CommandError::from)
    })
    .await;
    if let Err(e) = written {
        tracing::warn!(id = 20699, db = %op.db, error = %e, "Failed to write a profile entry");
    }
}

/// Creates `<db>.system.profile` if it does not exist.
pub fn ensure_collection(store: &Store, db: &str) -> Result<(), cairn_storage::StorageError> {
    if store.collection(db, "system.profile").is_none() {
        match store.create_collection(db, "system.profile", &RawDocumentBuf::new()) {
            Ok(_) | Err(cairn_storage::StorageError::NamespaceExists(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Inserts an entry into `<db>.system.profile` and trims the collection back under
/// [`PROFILE_BYTES`] (oldest entries first), in one storage transaction.
pub fn write(
    store: &Store,
    db: &str,
    entry: RawDocumentBuf,
) -> Result<(), cairn_storage::StorageError> {
    ensure_collection(store, db)?;
    let mut doc = rawdoc! {"_id": bson::oid::ObjectId::new()};
    crate::error::append_all(&mut doc, &entry);
    let Some(meta) = store.collection(db, "system.profile") else {
        return Ok(());
    };
    let size = store.stats(&meta)?.size;
    let excess = (u64::try_from(size).unwrap_or(0) + doc.as_bytes().len() as u64)
        .saturating_sub(PROFILE_BYTES);
    store.write(Durability::Buffered, |tx| {
        tx.insert(&meta, &doc)?;
        let mut freed = 0u64;
        let mut resume: Option<Vec<u8>> = None;
        while freed < excess {
            let batch = tx.scan_where(
                &meta,
                resume.as_deref(),
                false,
                ScanLimits::docs(64),
                &mut |_| true,
            )?;
            for old in &batch.docs {
                if freed >= excess {
                    break;
                }
                if let Ok(Some(id)) = old.get("_id")
                    && tx.delete(&meta, id)?
                {
                    freed += old.as_bytes().len() as u64;
                }
            }
            match batch.resume {
                Some(r) if !batch.docs.is_empty() => resume = Some(r),
                _ => break,
            }
        }
        Ok::<_, cairn_storage::StorageError>(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_fast_path() {
        let p = Profiler::new(0, 100, 1.0);
        assert!(p.level("a").is_none());
        let old = p.set("a", Some(2), None);
        assert_eq!(old.level, 0);
        assert_eq!(p.level("a").unwrap().level, 2);
        assert!(p.level("b").is_none());
        p.set("a", Some(0), None);
        assert!(p.level("a").is_none());
        let f = Arc::new(ProfileFilter {
            doc: rawdoc! {"op": "query"},
            filter: Filter::parse(&rawdoc! {"op": "query"}).unwrap(),
        });
        p.set("a", None, Some(Some(f)));
        assert!(p.level("a").unwrap().filter.is_some());
        p.set("a", None, Some(None));
        assert!(p.level("a").is_none());
        let d = Profiler::new(1, 100, 1.0);
        assert_eq!(d.level("any").unwrap().level, 1);
    }

    #[test]
    fn slowness_and_sampling() {
        let p = Profiler::new(0, 100, 1.0);
        assert!(p.is_slow(100));
        assert!(!p.is_slow(99));
        p.set_sample_rate(0.0);
        assert!(!p.is_slow(1000));
        p.set_slow_ms(-1);
        p.set_sample_rate(1.0);
        assert!(p.is_slow(0));
    }
}
