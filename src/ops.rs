//! Running operations: the registry behind `currentOp`, `$currentOp` and `killOp`, and the
//! per-operation statistics the profiler and the slow-query log report.
//!
//! # Map
//! - [`Ops`] (in [`crate::state::ServerState::ops`]) holds every command in progress as an
//!   [`Operation`] — opid, connection, command document, namespace, start time, session,
//!   plan summary and the work counters commands report through [`record_plan`] (or
//!   [`record_chosen_plan`], whose summary is rendered only when read) and [`record_work`] —
//!   and every open connection as a [`Connection`] (for `$all`, which also
//!   lists idle connections).
//! - The dispatcher [`Ops::start`]s an operation before a command runs and keeps the
//!   [`Running`] guard, which removes it when the command ends (however it ends).
//! - [`Ops::report`] renders operations in MongoDB's `currentOp` shape (the command
//!   `currentOp` filters them; the aggregation stage `$currentOp` can call it too);
//!   [`Ops::kill`] marks one killed (`killOp`), which the operation notices at its next
//!   interruption check ([`crate::deadline::check`]).
//!
//! Invariants: the registry is sharded by opid (each command locks one shard, uncontended
//! unless two commands share it); its mutexes are held only to insert, remove or copy out `Arc`s,
//! never across an `.await` or while rendering; an operation's counters are atomics; a
//! command document larger than [`MAX_COMMAND_BYTES`] is kept as MongoDB's `$truncated`
//! summary, so the per-operation copy stays small; a smaller one with nothing to redact is not
//! copied at all but shares the bytes of the message it came in ([`Operation::command`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::client::Client;
use crate::commands::Command;

/// Command documents larger than this are reported as `{$truncated: "<prefix>", comment}`.
pub const MAX_COMMAND_BYTES: usize = 1024;

/// An open connection, as operations and `currentOp` see it.
#[derive(Debug)]
pub struct Connection {
    /// `conn<id>`'s id.
    pub id: u64,
    /// The peer address.
    pub peer: SocketAddr,
    /// The client metadata of its first `hello` (set once).
    pub metadata: OnceLock<RawDocumentBuf>,
    /// When it connected.
    pub since: Instant,
}

impl Connection {
    /// `client.application.name` from the metadata.
    pub fn app_name(&self) -> Option<&str> {
        app_name_of(self.metadata.get()?)
    }
}

/// `application.name` of a client metadata document.
pub fn app_name_of(meta: &RawDocument) -> Option<&str> {
    match meta.get("application") {
        Ok(Some(RawBsonRef::Document(a))) => a.get_str("name").ok(),
        _ => None,
    }
}

/// One command in progress.
#[derive(Debug)]
pub struct Operation {
    /// MongoDB's `opid`.
    pub opid: i32,
    /// The connection running it.
    pub conn: Arc<Connection>,
    /// The command's name (the registered one).
    pub command_name: &'static str,
    /// The namespace (`db.coll`, or `db.$cmd`), which begins with `$db` ([`Operation::db`]).
    pub ns: String,
    /// The length of `$db` at the start of `ns`.
    db_len: usize,
    /// MongoDB's `op`: `command`, `query`, `getmore`, `insert`, `update`, `remove`.
    pub op_type: &'static str,
    /// The command document (or its `$truncated` summary), see [`Operation::command`].
    command: Kept,
    /// When it started.
    pub started: Instant,
    /// Wall-clock start (`ts`).
    pub started_at: SystemTime,
    killed: AtomicBool,
    plan: Mutex<Option<PlanNote>>,
    keys_examined: AtomicU64,
    docs_examined: AtomicU64,
    /// Free-form progress message (`msg`).
    pub msg: Mutex<Option<String>>,
}

/// What an operation keeps of its command document.
#[derive(Debug)]
enum Kept {
    /// The body as received, shared with the message it came in (no copy).
    Shared(bytes::Bytes),
    /// A copy: redacted, summarized, or of a body that came in no message.
    Copied(RawDocumentBuf),
}

impl Operation {
    /// The command document (secrets redacted), or its `$truncated` summary.
    pub fn command(&self) -> &RawDocument {
        static EMPTY: std::sync::LazyLock<RawDocumentBuf> =
            std::sync::LazyLock::new(RawDocumentBuf::new);
        match &self.command {
            Kept::Copied(d) => d,
            // (Shared only from a document's exact bytes.)
            Kept::Shared(b) => RawDocument::from_bytes(b).unwrap_or(&EMPTY),
        }
    }

    /// `$db`.
    pub fn db(&self) -> &str {
        self.ns.get(..self.db_len).unwrap_or_default()
    }

    /// Microseconds since it started.
    pub fn micros(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// True once `killOp` marked it.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Marks it killed.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
    }

    /// Its plan summary, once it planned (rendered from the recorded plan on demand).
    pub fn plan_summary(&self) -> Option<String> {
        let note = self.plan.lock().ok()?.clone()?;
        Some(match note {
            PlanNote::Summary(s) => s,
            PlanNote::Plan(p) => plan_summary(&p),
        })
    }

    /// Whether it recorded a plan.
    pub fn has_plan(&self) -> bool {
        self.plan.lock().ok().is_some_and(|p| p.is_some())
    }

    /// Whether its recorded plan has a `COLLSCAN` stage (its `planSummary` names one; read
    /// from the plan itself, without rendering the summary).
    pub fn scanned_collection(&self) -> bool {
        self.plan.lock().ok().is_some_and(|p| match p.as_ref() {
            Some(PlanNote::Summary(s)) => s.contains("COLLSCAN"),
            Some(PlanNote::Plan(p)) => has_collscan(&p.access),
            None => false,
        })
    }

    /// Index keys and documents it has examined.
    pub fn work(&self) -> (u64, u64) {
        (
            self.keys_examined.load(Ordering::Relaxed),
            self.docs_examined.load(Ordering::Relaxed),
        )
    }

    /// The `lsid` it runs in, as sent.
    pub fn lsid(&self) -> Option<RawDocumentBuf> {
        match self.command().get("lsid") {
            Ok(Some(RawBsonRef::Document(d))) => Some(d.to_owned()),
            _ => None,
        }
    }
}

/// What an operation recorded of its plan: the `planSummary` itself, or the chosen plan,
/// whose summary is rendered only when something reads it (`currentOp`, the profiler, the
/// slow-query log), not for every query.
#[derive(Debug, Clone)]
enum PlanNote {
    Summary(String),
    Plan(Arc<cairn_query::plan::Plan>),
}

/// Records the plan the running operation chose (its `planSummary`).
pub fn record_plan(summary: String) {
    note_plan(PlanNote::Summary(summary));
}

/// Records the plan the running operation chose; its `planSummary` is
/// [`plan_summary`] of it.
pub fn record_chosen_plan(plan: &Arc<cairn_query::plan::Plan>) {
    note_plan(PlanNote::Plan(plan.clone()));
}

fn note_plan(note: PlanNote) {
    if let Some(op) = crate::deadline::context().op
        && let Ok(mut p) = op.plan.lock()
    {
        *p = Some(note);
    }
}

/// Whether [`plan_summary`] of an access names a `COLLSCAN` (a collection scan, or one as an
/// `$or` branch).
fn has_collscan(a: &cairn_query::plan::Access) -> bool {
    use cairn_query::plan::Access;
    match a {
        Access::Docs { bounds: None, .. } => true,
        Access::Or(branches) => branches.iter().any(has_collscan),
        _ => false,
    }
}

/// MongoDB's `planSummary` of a plan: `COLLSCAN`, `IDHACK`, `EOF`, `IXSCAN { a: 1 }`,
/// `COUNT_SCAN { a: 1 }`, and the branches of an `$or` joined by `, `.
pub fn plan_summary(plan: &cairn_query::plan::Plan) -> String {
    use cairn_query::plan::Access;
    fn pattern(spec: &RawDocument) -> String {
        let Ok(Some(RawBsonRef::Document(key))) = spec.get("key") else {
            return "{}".into();
        };
        let parts: Vec<String> = key
            .iter()
            .flatten()
            .map(|(k, v)| {
                let v = match v {
                    RawBsonRef::Int32(i) => i.to_string(),
                    RawBsonRef::Int64(i) => i.to_string(),
                    RawBsonRef::Double(d) if d.fract() == 0.0 => format!("{d:.1}"),
                    RawBsonRef::Double(d) => d.to_string(),
                    RawBsonRef::String(s) => format!("\"{s}\""),
                    other => format!("{other:?}"),
                };
                format!("{}: {v}", k.as_str())
            })
            .collect();
        format!("{{ {} }}", parts.join(", "))
    }
    fn access(a: &Access, count: bool) -> String {
        match a {
            Access::Eof => "EOF".into(),
            Access::IdPoint { .. } => "IDHACK".into(),
            Access::Docs { bounds: None, .. } => "COLLSCAN".into(),
            Access::Docs { .. } => "IXSCAN { _id: 1 }".into(),
            Access::Index(ia) => format!(
                "{} {}",
                if count { "COUNT_SCAN" } else { "IXSCAN" },
                pattern(&ia.index.spec)
            ),
            Access::Near(na) => format!(
                "{} {}",
                match na.kind {
                    cairn_query::index::geo_bounds::GeoKind::Sphere => "GEO_NEAR_2DSPHERE",
                    cairn_query::index::geo_bounds::GeoKind::Flat { .. } => "GEO_NEAR_2D",
                },
                pattern(&na.index.spec)
            ),
            Access::Or(branches) => branches
                .iter()
                .map(|b| access(b, false))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
    access(&plan.access, plan.count_scan)
}

/// Adds index keys and documents examined to the running operation's counters.
pub fn record_work(keys: u64, docs: u64) {
    if let Some(op) = crate::deadline::context().op {
        op.keys_examined.fetch_add(keys, Ordering::Relaxed);
        op.docs_examined.fetch_add(docs, Ordering::Relaxed);
    }
}

/// Records the work of a cursor's plan since `seen` (the keys and documents its execution had
/// examined when last recorded), and updates `seen`; also records its plan.
pub fn record_source_work(source: &crate::cursor::Source, seen: &mut (u64, u64)) {
    if let crate::cursor::Source::Plan { exec, .. } = source {
        let now = (exec.stats.keys_examined, exec.stats.docs_examined);
        record_work(now.0.saturating_sub(seen.0), now.1.saturating_sub(seen.1));
        *seen = now;
        if let Some(op) = crate::deadline::context().op
            && !op.has_plan()
        {
            record_chosen_plan(exec.plan());
        }
    }
}

/// MongoDB's `op` for a command.
pub fn op_type(command: &str) -> &'static str {
    match command {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        "killCursors" => "killcursors",
        _ => "command",
    }
}

/// Commands whose first field names a collection.
const COLLECTION_COMMANDS: &[&str] = &[
    "aggregate",
    "collMod",
    "collStats",
    "count",
    "create",
    "createIndexes",
    "delete",
    "distinct",
    "drop",
    "dropIndexes",
    "explain",
    "find",
    "findAndModify",
    "insert",
    "listIndexes",
    "update",
    "validate",
];

/// The namespace an operation reports: `db.coll` for commands on a collection, `db.$cmd`
/// for the others (as MongoDB's `currentOp` and profiler show them).
pub fn namespace(db: &str, body: &crate::commands::Parsed<'_>, command: &str) -> String {
    let first = body.first().and_then(|r| r.ok()).map(|(_, v)| v);
    let coll = match (command, first) {
        ("getMore", _) => match body.find("collection") {
            Some(RawBsonRef::String(c)) => c,
            _ => "$cmd",
        },
        (c, Some(RawBsonRef::String(coll)))
            if COLLECTION_COMMANDS.contains(&c) && !coll.is_empty() =>
        {
            coll
        }
        _ => "$cmd",
    };
    cairn_query::plan::namespace(db, coll)
}

/// A command document as operations keep it (secrets redacted, [`crate::auth::redact`]):
/// whole when small, else MongoDB's summary.
pub fn command_copy(body: &RawDocument, limit: usize) -> RawDocumentBuf {
    kept_copy(&crate::auth::redact::command(body), limit)
}

/// What an operation keeps of its command: the body shared with the message it came in
/// when it is whole (within `limit`) and has nothing to redact, else [`command_copy`].
fn keep(body: &crate::commands::Parsed<'_>, limit: usize) -> Kept {
    let Some(Ok((name, _))) = body.first() else {
        return Kept::Copied(command_copy(body.body(), limit));
    };
    let redacted = crate::auth::redact::command_named(name, body.body());
    if matches!(redacted, std::borrow::Cow::Borrowed(_))
        && body.body().as_bytes().len() <= limit
        && let Some(shared) = body.shared()
    {
        return Kept::Shared(shared);
    }
    Kept::Copied(kept_copy(&redacted, limit))
}

/// [`command_copy`] of a body already redacted.
fn kept_copy(body: &RawDocument, limit: usize) -> RawDocumentBuf {
    if body.as_bytes().len() <= limit {
        return body.to_owned();
    }
    let mut text = String::new();
    summary_text(body, limit, &mut text);
    let mut cut = limit.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = rawdoc! {"$truncated": format!("{} ...", &text[..cut])};
    if let Ok(Some(c)) = body.get("comment") {
        out.append(bson::raw::cstr!("comment"), c);
    }
    out
}

/// Appends the text of a document (in `bson::Document`'s display form) to `out`, stopping
/// once `out` exceeds `limit` bytes: the work and memory are bounded by the limit, not by the
/// command (a 16 MB `$in` list is never converted or printed whole). Returns false when it
/// stopped early.
fn summary_text(d: &RawDocument, limit: usize, out: &mut String) -> bool {
    use std::fmt::Write;
    out.push('{');
    let mut first = true;
    for el in d {
        let Ok((key, value)) = el else { break };
        if out.len() > limit {
            return false;
        }
        out.push_str(if first { " " } else { ", " });
        first = false;
        let _ = write!(out, "\"{key}\": ");
        if !summary_value(value, limit, out) {
            return false;
        }
    }
    out.push_str(if first { "}" } else { " }" });
    true
}

/// One value of [`summary_text`]: nested documents and arrays stay raw, scalars print as
/// `bson::Bson` does.
fn summary_value(value: RawBsonRef<'_>, limit: usize, out: &mut String) -> bool {
    use std::fmt::Write;
    match value {
        RawBsonRef::Document(sub) => summary_text(sub, limit, out),
        RawBsonRef::Array(items) => {
            out.push('[');
            for (i, item) in items.into_iter().enumerate() {
                let Ok(item) = item else { break };
                if out.len() > limit {
                    return false;
                }
                if i > 0 {
                    out.push_str(", ");
                }
                if !summary_value(item, limit, out) {
                    return false;
                }
            }
            out.push(']');
            true
        }
        scalar => {
            match bson::Bson::try_from(scalar) {
                Ok(b) => {
                    let _ = write!(out, "{b}");
                }
                Err(_) => out.push('?'),
            }
            true
        }
    }
}

/// The next operation id: positive, shared by every kind of operation (commands, index
/// builds), wrapping around before `i32::MAX` as MongoDB's do.
pub fn next_opid() -> i32 {
    static NEXT: AtomicI32 = AtomicI32::new(0);
    loop {
        let cur = NEXT.load(Ordering::Relaxed);
        let next = if cur >= i32::MAX - 1 { 1 } else { cur + 1 };
        if NEXT
            .compare_exchange(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return next;
        }
    }
}

/// Shards of the running-operation registry: consecutive opids land in different shards, so
/// concurrent commands on different connections rarely share a lock.
const SHARDS: usize = 16;

/// Hashes the running-operation registry's keys: opids the server numbers itself (no client
/// chooses them, so nothing needs SipHash's flooding resistance), hashed as the command index
/// and the storage engine's maps hash (foldhash).
type OpidHash = foldhash::fast::FixedState;

/// The registry of running operations and open connections.
#[derive(Debug, Default)]
pub struct Ops {
    running: [Mutex<HashMap<i32, Arc<Operation>, OpidHash>>; SHARDS],
    connections: Mutex<HashMap<u64, Arc<Connection>>>,
    /// Per-collection time and counts (`top`).
    pub top: Top,
}

/// One `top` counter: total microseconds and operations.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UsageCount {
    /// Microseconds.
    pub time: u64,
    /// Operations.
    pub count: u64,
}

impl UsageCount {
    fn add(&mut self, micros: u64) {
        self.time = self.time.saturating_add(micros);
        self.count += 1;
    }
}

/// The `top` counters of one namespace, in MongoDB's order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Every operation.
    pub total: UsageCount,
    /// Operations that read.
    pub read_lock: UsageCount,
    /// Operations that write.
    pub write_lock: UsageCount,
    /// `find`.
    pub queries: UsageCount,
    /// `getMore`.
    pub getmore: UsageCount,
    /// `insert`.
    pub insert: UsageCount,
    /// `update`.
    pub update: UsageCount,
    /// `delete`.
    pub remove: UsageCount,
    /// Other commands.
    pub commands: UsageCount,
}

impl Usage {
    /// Counts one `command` that took `micros`.
    fn record(&mut self, command: &str, micros: u64) {
        self.total.add(micros);
        if is_write(command) {
            self.write_lock.add(micros);
        } else {
            self.read_lock.add(micros);
        }
        match command {
            "find" => self.queries.add(micros),
            "getMore" => self.getmore.add(micros),
            "insert" => self.insert.add(micros),
            "update" => self.update.add(micros),
            "delete" => self.remove.add(micros),
            _ => self.commands.add(micros),
        }
    }
}

/// Per-collection usage (MongoDB's `Top`): time spent and operations by kind.
#[derive(Debug, Default)]
pub struct Top {
    /// Hashed by foldhash (randomly seeded): SipHash's setup costs more than the lookup, on
    /// every command.
    usage: Mutex<HashMap<String, Usage, foldhash::fast::RandomState>>,
}

/// Whether a command writes (it counts under `writeLock`): a `match` (a length switch and a
/// comparison or two) rather than a search of a list on every command.
fn is_write(command: &str) -> bool {
    matches!(
        command,
        "collMod"
            | "create"
            | "createIndexes"
            | "delete"
            | "drop"
            | "dropIndexes"
            | "findAndModify"
            | "insert"
            | "renameCollection"
            | "update"
    )
}
impl Top {
    /// Records one operation on a collection namespace (`db.$cmd` is not recorded).
    pub fn record(&self, ns: &str, command: &str, micros: u64) {
        if ns.ends_with(".$cmd") || !ns.contains('.') {
            return;
        }
        let Ok(mut m) = self.usage.lock() else {
            return;
        };
        // One lookup for a namespace already counted (every operation but its first).
        if let Some(u) = m.get_mut(ns) {
            u.record(command, micros);
            return;
        }
        m.entry(ns.to_string()).or_default().record(command, micros);
    }

    /// Forgets a dropped namespace (`db.coll`), or every namespace of a dropped database
    /// (`db.`).
    pub fn forget(&self, prefix: &str) {
        if let Ok(mut m) = self.usage.lock() {
            if prefix.ends_with('.') {
                m.retain(|k, _| !k.starts_with(prefix));
            } else {
                m.remove(prefix);
            }
        }
    }

    /// Every namespace's usage, sorted by namespace.
    pub fn snapshot(&self) -> Vec<(String, Usage)> {
        let mut v: Vec<_> = self
            .usage
            .lock()
            .map(|m| m.iter().map(|(k, u)| (k.clone(), *u)).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// Keeps an operation registered while it runs; dropping it removes the operation.
#[derive(Debug)]
pub struct Running<'a> {
    ops: &'a Ops,
    /// The operation.
    pub op: Arc<Operation>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.ops.shard(self.op.opid).lock() {
            m.remove(&self.op.opid);
        }
    }
}

impl Ops {
    /// The shard of the registry that holds `opid`.
    fn shard(&self, opid: i32) -> &Mutex<HashMap<i32, Arc<Operation>, OpidHash>> {
        &self.running[opid.unsigned_abs() as usize % SHARDS]
    }

    /// The connection record of `client`, registered on its first command and kept in the
    /// client (its metadata is copied once the client sent it).
    pub fn connection(&self, client: &mut Client) -> Arc<Connection> {
        if let Some(conn) = &client.conn {
            if conn.metadata.get().is_none()
                && let Some(meta) = &client.metadata
            {
                let _ = conn.metadata.set(meta.clone());
            }
            return conn.clone();
        }
        let conn = {
            let mut m = self.connections.lock().unwrap_or_else(|p| p.into_inner());
            m.entry(client.id)
                .or_insert_with(|| {
                    Arc::new(Connection {
                        id: client.id,
                        peer: client.peer,
                        metadata: OnceLock::new(),
                        since: Instant::now(),
                    })
                })
                .clone()
        };
        if conn.metadata.get().is_none()
            && let Some(meta) = &client.metadata
        {
            let _ = conn.metadata.set(meta.clone());
        }
        client.conn = Some(conn.clone());
        conn
    }

    /// Forgets a closed connection.
    pub fn disconnect(&self, id: u64) {
        if let Ok(mut m) = self.connections.lock() {
            m.remove(&id);
        }
    }

    /// Registers a command about to run.
    pub fn start(
        &self,
        client: &mut Client,
        cmd: &'static Command,
        db: &str,
        body: &crate::commands::Parsed<'_>,
    ) -> Running<'_> {
        let conn = self.connection(client);
        let opid = next_opid();
        let op = Arc::new(Operation {
            opid,
            conn,
            command_name: cmd.name,
            ns: namespace(db, body, cmd.name),
            db_len: db.len(),
            op_type: op_type(cmd.name),
            command: keep(body, MAX_COMMAND_BYTES),
            started: Instant::now(),
            started_at: SystemTime::now(),
            killed: AtomicBool::new(false),
            plan: Mutex::new(None),
            keys_examined: AtomicU64::new(0),
            docs_examined: AtomicU64::new(0),
            msg: Mutex::new(None),
        });
        if let Ok(mut m) = self.shard(opid).lock() {
            m.insert(opid, op.clone());
        }
        Running { ops: self, op }
    }

    /// Every running operation, oldest first.
    pub fn list(&self) -> Vec<Arc<Operation>> {
        let mut v: Vec<_> = Vec::new();
        for shard in &self.running {
            if let Ok(m) = shard.lock() {
                v.extend(m.values().cloned());
            }
        }
        v.sort_by_key(|o| o.started);
        v
    }

    /// The open connections.
    pub fn connections(&self) -> Vec<Arc<Connection>> {
        let mut v: Vec<_> = self
            .connections
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by_key(|c| c.id);
        v
    }

    /// Marks the operation `opid` killed; false when no such operation runs.
    pub fn kill(&self, opid: i32) -> bool {
        let op = self
            .shard(opid)
            .lock()
            .ok()
            .and_then(|m| m.get(&opid).cloned());
        match op {
            Some(op) => {
                op.kill();
                true
            }
            None => false,
        }
    }

    /// The operations (and with `all`, the idle connections) in MongoDB's `currentOp` shape,
    /// restricted to `client`'s connection with `own_only`.
    pub fn report(&self, host: &str, all: bool, own_only: Option<u64>) -> Vec<RawDocumentBuf> {
        let ops = self.list();
        let mut out = Vec::with_capacity(ops.len());
        let mut busy = std::collections::HashSet::new();
        for op in &ops {
            busy.insert(op.conn.id);
            if own_only.is_some_and(|id| id != op.conn.id) {
                continue;
            }
            out.push(render(op, host));
        }
        if all {
            for c in self.connections() {
                if busy.contains(&c.id) || own_only.is_some_and(|id| id != c.id) {
                    continue;
                }
                let mut d = rawdoc! {
                    "type": "op",
                    "host": host,
                    "desc": format!("conn{}", c.id),
                    "connectionId": i64::try_from(c.id).unwrap_or(i64::MAX),
                    "client": c.peer.to_string(),
                };
                if let Some(meta) = c.metadata.get() {
                    if let Some(app) = c.app_name() {
                        d.append(bson::raw::cstr!("appName"), app);
                    }
                    d.append(bson::raw::cstr!("clientMetadata"), meta.clone());
                }
                crate::error::append_all(
                    &mut d,
                    &rawdoc! {"active": false, "currentOpTime": now_string()},
                );
                out.push(d);
            }
        }
        out
    }
}

/// Accounts for a finished command: `top`'s per-collection usage (a dropped collection or
/// database starts over).
/// `micros` is the operation's duration ([`Operation::micros`]).
pub fn finished(server: &crate::state::ServerState, op: &Operation, ok: bool, micros: u64) {
    let top = &server.ops.top;
    match (op.command_name, ok) {
        ("drop", true) => top.forget(&op.ns),
        ("dropDatabase", true) => top.forget(&format!("{}.", op.db())),
        _ => top.record(&op.ns, op.command_name, micros),
    }
}

fn now_string() -> String {
    crate::logging::timestamp_now()
}

/// One operation in `currentOp`'s shape.
pub fn render(op: &Operation, host: &str) -> RawDocumentBuf {
    use bson::raw::cstr;
    let elapsed = op.started.elapsed();
    let mut d = rawdoc! {
        "type": "op",
        "host": host,
        "desc": format!("conn{}", op.conn.id),
        "connectionId": i64::try_from(op.conn.id).unwrap_or(i64::MAX),
        "client": op.conn.peer.to_string(),
    };
    if let Some(meta) = op.conn.metadata.get() {
        if let Some(app) = op.conn.app_name() {
            d.append(cstr!("appName"), app);
        }
        d.append(cstr!("clientMetadata"), meta.clone());
    }
    crate::error::append_all(
        &mut d,
        &rawdoc! {
            "active": true,
            "currentOpTime": now_string(),
            "threaded": true,
            "opid": op.opid,
        },
    );
    if let Some(lsid) = op.lsid() {
        let mut l = RawDocumentBuf::new();
        if let Ok(Some(id)) = lsid.get("id") {
            l.append(cstr!("id"), id);
        }
        l.append(
            cstr!("uid"),
            bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: crate::session::NO_AUTH_UID.to_vec(),
            },
        );
        d.append(cstr!("lsid"), l);
    }
    if let Ok(Some(t)) = op.command().get("txnNumber") {
        d.append(
            cstr!("transaction"),
            rawdoc! {"parameters": {"txnNumber": t}},
        );
    }
    crate::error::append_all(
        &mut d,
        &rawdoc! {
            "secs_running": i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX),
            "microsecs_running": i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX),
            "op": op.op_type,
            "ns": op.ns.as_str(),
            "redacted": false,
            "command": op.command().to_owned(),
        },
    );
    if let Some(p) = op.plan_summary() {
        d.append(cstr!("planSummary"), p);
    }
    if let Some(m) = op.msg.lock().ok().and_then(|m| m.clone()) {
        d.append(cstr!("msg"), m);
    }
    crate::error::append_all(
        &mut d,
        &rawdoc! {
            "numYields": 0,
            "locks": {},
            "waitingForLock": false,
            "lockStats": {},
            "waitingForFlowControl": false,
            "flowControlStats": {},
        },
    );
    if op.is_killed() {
        d.append(cstr!("killPending"), true);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_types() {
        let ns = |db: &str, b: &RawDocument, command: &str| {
            namespace(db, &crate::commands::Parsed::parse(b), command)
        };
        let b = rawdoc! {"find": "c", "$db": "d"};
        assert_eq!(ns("d", &b, "find"), "d.c");
        let b = rawdoc! {"ping": 1, "$db": "admin"};
        assert_eq!(ns("admin", &b, "ping"), "admin.$cmd");
        let b = rawdoc! {"getMore": 5_i64, "collection": "x", "$db": "d"};
        assert_eq!(ns("d", &b, "getMore"), "d.x");
        let b = rawdoc! {"find": "", "$db": "d"};
        assert_eq!(ns("d", &b, "find"), "d.$cmd");
        let b = rawdoc! {"getMore": 5_i64, "collection": 1, "$db": "d"};
        assert_eq!(ns("d", &b, "getMore"), "d.$cmd");
        assert_eq!(op_type("find"), "query");
        assert_eq!(op_type("delete"), "remove");
        assert_eq!(op_type("ping"), "command");
    }

    #[test]
    fn top_counts_by_kind() {
        let t = Top::default();
        t.record("d.c", "find", 10);
        t.record("d.c", "insert", 5);
        t.record("d.c", "count", 1);
        t.record("d.$cmd", "ping", 1);
        let s = t.snapshot();
        assert_eq!(s.len(), 1);
        let u = s[0].1;
        assert_eq!(u.total, UsageCount { time: 16, count: 3 });
        assert_eq!(u.read_lock, UsageCount { time: 11, count: 2 });
        assert_eq!(u.write_lock, UsageCount { time: 5, count: 1 });
        assert_eq!(u.queries.count, 1);
        assert_eq!(u.commands.count, 1);
        t.forget("d.");
        assert!(t.snapshot().is_empty());
    }

    /// The structural COLLSCAN check (the collection-scan counter's) agrees with the rendered
    /// `planSummary`.
    #[test]
    fn collscan_check_agrees_with_the_summary() {
        use cairn_query::index::IndexBounds;
        use cairn_query::plan::{Access, IndexAccess, Plan};
        let index = cairn_storage::index::IndexMeta {
            name: "a_1".into(),
            spec: rawdoc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
            ..cairn_storage::index::IndexMeta::id_index()
        };
        let ixscan = Access::Index(IndexAccess {
            index,
            bounds: IndexBounds::full(&[]),
            ranges: Vec::new(),
            reverse: false,
            check_entries: false,
            min_max: false,
        });
        let collscan = Plan::collscan(false).access;
        let id_range = Access::Docs {
            ranges: Vec::new(),
            reverse: false,
            bounds: Some(IndexBounds::full(&[])),
        };
        let accesses = [
            Access::Eof,
            Access::IdPoint { key: vec![1] },
            collscan.clone(),
            id_range.clone(),
            ixscan.clone(),
            Access::Or(vec![ixscan.clone(), id_range]),
            Access::Or(vec![ixscan, collscan]),
        ];
        for access in accesses {
            let plan = Plan {
                access,
                ..Plan::eof()
            };
            let summary = plan_summary(&plan);
            assert_eq!(
                has_collscan(&plan.access),
                summary.contains("COLLSCAN"),
                "{summary}"
            );
        }
    }

    #[test]
    fn opids_are_positive_and_distinct() {
        let a = next_opid();
        let b = next_opid();
        assert!(a > 0 && b > 0 && a != b);
    }

    #[test]
    fn large_commands_are_truncated() {
        let big = rawdoc! {"insert": "c", "documents": [{"s": "x".repeat(5000)}], "comment": "hi"};
        let c = command_copy(&big, MAX_COMMAND_BYTES);
        assert!(c.get_str("$truncated").unwrap().len() < 1100);
        assert_eq!(c.get_str("comment").unwrap(), "hi");
        let small = rawdoc! {"find": "c"};
        assert_eq!(command_copy(&small, MAX_COMMAND_BYTES), small);
    }

    #[test]
    fn summaries_read_like_documents_and_stop_at_the_limit() {
        let d = rawdoc! {"find": "c", "filter": {"a": [1, "x", {}], "b": {}}, "n": 2.5};
        let mut text = String::new();
        assert!(summary_text(&d, 1000, &mut text));
        assert_eq!(
            text,
            r#"{ "find": "c", "filter": { "a": [1, "x", {}], "b": {} }, "n": 2.5 }"#
        );
        let mut ids = bson::RawArrayBuf::new();
        for i in 0..100_000 {
            ids.push(i);
        }
        let big = rawdoc! {"count": "c", "query": {"_id": {"$in": ids}}};
        let mut text = String::new();
        assert!(!summary_text(&big, 1000, &mut text));
        assert!(text.len() < 1100, "{}", text.len());
        assert!(text.starts_with(r#"{ "count": "c", "query": { "_id": { "$in": [0, 1, 2"#));
    }

    /// The summary of a big command is the prefix of its whole text, though only its leading
    /// elements are printed — also for values that print shorter than they encode.
    #[test]
    fn truncated_summary_is_the_whole_commands_prefix() {
        let whole = |body: &RawDocumentBuf| {
            let text = bson::Document::try_from(body.as_ref()).unwrap().to_string();
            let mut cut = MAX_COMMAND_BYTES.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{} ...", &text[..cut])
        };
        let mut docs = bson::RawArrayBuf::new();
        for i in 0..2000 {
            docs.push(rawdoc! {"_id": i, "name": format!("n{i}"), "tags": ["a", "b"], "é": 1.5});
        }
        let mut zeros = bson::RawArrayBuf::new();
        for _ in 0..5000 {
            zeros.push(0i64);
        }
        let mut nested = rawdoc! {"z": zeros.clone()};
        for _ in 0..50 {
            nested = rawdoc! {"n": nested, "k": "v"};
        }
        for body in [
            rawdoc! {"insert": "c", "documents": docs, "$db": "d"},
            rawdoc! {"insert": "c", "documents": [{"zeros": zeros}], "$db": "d"},
            rawdoc! {"update": "c", "updates": [{"q": nested, "u": {}}], "$db": "d"},
        ] {
            let c = command_copy(&body, MAX_COMMAND_BYTES);
            assert_eq!(c.get_str("$truncated").unwrap(), whole(&body));
        }
    }
}
