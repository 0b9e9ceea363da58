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
//!   (so a client reading `system.profile` right after sees its operation). The counts and
//!   plan are the operation's ([`crate::ops::record_work`]): `find`-like commands record their
//!   plan's work, `aggregate` (and its `getMore`s) the work of the pipeline's `$cursor` and
//!   `$geoNear` plans, reported through the pipeline host as they run.
//! - Level 1 profiles operations slower than `slowms`, sampled at `sampleRate`; a database
//!   `filter` (a query over the entry's fields) replaces both rules there, and at every level
//!   decides what the "Slow query" log shows ([`record`]'s answer), as in MongoDB.
//!
//! # Storage
//! Entries are documents of `<db>.system.profile`, a capped collection as in MongoDB (readable
//! with `find`, `count`, `aggregate` like any other, newest first with `sort: {$natural: -1}`;
//! clients cannot write it). [`create_collection`] makes it `{capped: true, size: 1048576}`
//! when profiling is turned on or an entry is written and it does not exist; an existing one
//! is used whatever its size (MongoDB's way to resize it: turn profiling off, drop it, create
//! a capped one of another size, turn profiling back on), and a non-capped one is refused
//! with NamespaceExists (48) — the `profile` command fails and leaves the settings alone, an
//! entry is not written and a warning is logged, as mongod does. [`write`] is a plain insert
//! through the capped path, which evicts the oldest entries. `system.profile` cannot be
//! dropped while its database profiles ([`Profiler::check_drop`]). Entries carry an `_id`
//! (first, as Cairn's storage keys documents by it); MongoDB's have none.
//!
//! Invariants: a database that was never configured costs one atomic load per command; the
//! settings lock is held only to copy a database's settings; a failed profile write is logged
//! and never fails the command.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::{Durability, Store};

use crate::error::CommandError;
use crate::ops::Operation;
use crate::state::ServerState;

/// The size of the capped `system.profile` the profiler creates (MongoDB's).
pub const PROFILE_BYTES: i32 = 1024 * 1024;

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
    /// Serialises entry writes (inserts into one capped collection conflict with each other).
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

    /// Refuses to drop `system.profile` while its database profiles (IllegalOperation, as
    /// mongod refuses it).
    pub fn check_drop(&self, db: &str, coll: &str) -> Result<(), CommandError> {
        if coll == "system.profile" && self.settings(db).level != 0 {
            return Err(CommandError::new(
                crate::error::ErrorCode::IllegalOperation,
                "turn off profiling before dropping system.profile collection",
            ));
        }
        Ok(())
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
/// writing the entry before the command's reply is sent. Returns whether the operation is
/// logged as slow when the database's `filter` decides that (it replaces `slowms` and
/// `sampleRate` for the "Slow query" log at every level, as in MongoDB), else `None`.
pub async fn record(
    server: &Arc<ServerState>,
    settings: Option<DbSettings>,
    op: &Operation,
    body: &RawDocument,
    result: Result<&RawDocument, &CommandError>,
) -> Option<bool> {
    let settings = settings?;
    let millis = u64::try_from(op.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let e = entry(op, body, result, millis);
    let passes = settings.filter.as_ref().map(|f| f.filter.matches(&e));
    // Level 2 profiles everything; at level 1 a filter replaces slowms and sampleRate.
    let profile = match (settings.level, passes) {
        (2, _) => true,
        (1, Some(p)) => p,
        (1, None) => server.profiler.is_slow(millis),
        _ => false,
    };
    if !profile {
        return passes;
    }
    let server2 = server.clone();
    let db = op.db().to_string();
    let written = crate::blocking::run(move || {
        let _guard = server2.profiler.write_lock.lock();
        write(&server2.store, &db, e)
    })
    .await;
    if let Err(e) = written {
        tracing::warn!(id = 20703, operation = "op_msg", namespace = %op.ns, assertion = %e,
                       "Caught Assertion while trying to profile operation");
    }
    passes
}

/// Makes sure `<db>.system.profile` exists and is capped: creates it `{capped: true, size:
/// 1048576}` when missing, refuses a non-capped one (NamespaceExists, as mongod does).
pub fn create_collection(store: &Store, db: &str) -> Result<Arc<CollectionMeta>, CommandError> {
    let not_capped = || {
        CommandError::new(
            crate::error::ErrorCode::NamespaceExists,
            format!("{db}.system.profile exists but isn't capped"),
        )
    };
    if let Some(meta) = store.collection(db, "system.profile") {
        return if meta.is_capped() {
            Ok(meta)
        } else {
            Err(not_capped())
        };
    }
    tracing::info!(id = 20701, namespace = %format!("{db}.system.profile"),
                   "Creating profile collection");
    let options = rawdoc! {"capped": true, "size": PROFILE_BYTES};
    match store.create_collection(db, "system.profile", &options) {
        Ok(_) | Err(cairn_storage::StorageError::NamespaceExists(_)) => {}
        Err(e) => return Err(e.into()),
    }
    match store.collection(db, "system.profile") {
        Some(meta) if meta.is_capped() => Ok(meta),
        Some(_) => Err(not_capped()),
        None => Err(CommandError::new(
            crate::error::ErrorCode::NamespaceNotFound,
            format!("{db}.system.profile was dropped while it was being created"),
        )),
    }
}

/// Inserts an entry into `<db>.system.profile` (created if missing), through the capped path
/// that evicts the oldest entries beyond the collection's size.
pub fn write(store: &Store, db: &str, entry: RawDocumentBuf) -> Result<(), CommandError> {
    let meta = create_collection(store, db)?;
    let mut doc = rawdoc! {"_id": bson::oid::ObjectId::new()};
    crate::error::append_all(&mut doc, &entry);
    store.write(Durability::Buffered, |tx| tx.insert(&meta, &doc))?;
    Ok(())
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
