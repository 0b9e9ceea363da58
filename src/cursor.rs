//! Server-side cursors: `find`/`aggregate`/`listCollections` results beyond the first batch.
//!
//! A cursor never holds a storage snapshot: a query plan's [`Execution`] remembers only the
//! last key each of its scans consumed, and each batch reads from a fresh snapshot, so an
//! idle cursor pins neither memory nor old versions (it sees writes made between batches, as
//! MongoDB's default read concern allows; a multikey or `$or` plan still returns each document
//! once). Sorted results come from the sorter (in memory or spilled), and small result sets
//! computed up front (e.g. `listCollections`) are buffered. An aggregation pipeline keeps its
//! running stages: each batch pulls from them on a fresh read view, so a streaming pipeline
//! pins no snapshot either (its blocking stages hold their results in memory or spill files).
//!
//! Invariants:
//! - a cursor is *checked out* while a `getMore` runs on it: a second `getMore` meanwhile
//!   gets CursorInUse (143), and the manager's lock is never held during storage work;
//! - a cursor created in a session (`lsid`) only serves `getMore`s from that session;
//! - idle cursors are reaped after the idle timeout (10 minutes by default) unless created
//!   with `noCursorTimeout`;
//! - ids are non-zero, positive and unique within the process;
//! - with authentication on, a cursor belongs to the users that opened it (recorded with the
//!   opening command by the authorization layer; only they may `getMore` it, and only while
//!   they still hold the privileges that command needed).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use std::sync::Arc;

use cairn_query::filter::Filter;
use cairn_query::plan::Execution;
use cairn_query::projection::Projection;
use cairn_query::sort::SortedDocs;
use cairn_storage::Store;
use cairn_storage::catalog::CollectionMeta;

use crate::error::{CommandError, ErrorCode};

/// MongoDB's default `cursorTimeoutMillis`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Directory under the data directory where sorts spill.
pub const SPILL_DIR: &str = "_tmp";

/// Largest batch in bytes (MongoDB bounds batches by the 16 MiB document limit).
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024 - 16 * 1024;

/// Where a cursor's documents come from.
pub enum Source {
    /// A query plan being run, one batch per storage snapshot.
    Plan {
        /// Database.
        db: String,
        /// Collection.
        coll: String,
        /// The collection's space id when the cursor was opened (a drop or rename kills it).
        space: u64,
        /// The execution (keeps only its position between batches).
        exec: Box<Execution>,
        /// Documents produced but not returned yet.
        pending: VecDeque<RawDocumentBuf>,
        /// Matching documents still to skip.
        skip: u64,
    },
    /// Precomputed documents.
    Buffered(VecDeque<RawDocumentBuf>),
    /// The output of a sort (in memory or merged from spill files).
    Sorted(SortedDocs),
    /// A tailable cursor on a capped collection: the documents inserted after `last`, in
    /// insertion order, that match `filter`; it stays open at the end.
    Tail {
        /// Database.
        db: String,
        /// Collection.
        coll: String,
        /// The collection's space id when the cursor was opened.
        space: u64,
        /// The last record read (`None`: from the start).
        last: Option<u64>,
        /// The query's filter.
        filter: Arc<Filter>,
        /// `awaitData`: a `getMore` waits for new documents.
        await_data: bool,
    },
    /// An aggregation pipeline being run (each batch on a fresh read view).
    Pipeline(Box<crate::commands::aggregate::PipelineCursor>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Plan { db, coll, exec, .. } => {
                write!(f, "Plan({db}.{coll}, {})", exec.plan().key())
            }
            Source::Buffered(q) => write!(f, "Buffered({})", q.len()),
            Source::Sorted(_) => write!(f, "Sorted"),
            Source::Tail { db, coll, .. } => write!(f, "Tail({db}.{coll})"),
            Source::Pipeline(_) => write!(f, "Pipeline"),
        }
    }
}

/// What happens to each document on its way out: the projection (which for positional
/// `field.$` needs the filter's match details).
#[derive(Debug)]
pub struct Output {
    /// The projection.
    pub projection: Projection,
    /// The query's filter, for positional projections.
    pub filter: Option<Arc<Filter>>,
}

impl Cursor {
    /// Whether `getMore` waits for new data (`maxTimeMS` is then the wait): change streams.
    pub fn awaits_data(&self) -> bool {
        match &self.source {
            Source::Pipeline(p) => p.is_change_stream(),
            Source::Tail { await_data, .. } => *await_data,
            _ => false,
        }
    }

    /// Whether this is a change stream's cursor.
    pub fn is_change_stream(&self) -> bool {
        matches!(&self.source, Source::Pipeline(p) if p.is_change_stream())
    }

    /// A change stream's `postBatchResumeToken`.
    pub fn post_batch_resume_token(&self) -> Option<RawDocumentBuf> {
        match &self.source {
            Source::Pipeline(p) => p.post_batch_resume_token(),
            _ => None,
        }
    }
}

impl Output {
    /// Applies the projection to one document.
    pub fn apply(&self, doc: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
        let details = match &self.filter {
            Some(f) if self.projection.has_positional() => f
                .try_match_details(doc)
                .map_err(|e| executor_error(CommandError::from(e)))?,
            _ => None,
        };
        self.projection
            .apply(doc, details.as_ref())
            .map_err(|e| executor_error(CommandError::from(e)))
    }
}

/// MongoDB's prefix for errors raised while a query executes.
pub fn executor_error(mut e: CommandError) -> CommandError {
    e.message = format!(
        "Executor error during find command :: caused by :: {}",
        e.message
    );
    e
}

/// One open cursor.
#[derive(Debug)]
pub struct Cursor {
    /// Its id.
    pub id: i64,
    /// `db.coll` as reported in replies.
    pub ns: String,
    /// The documents to come.
    pub source: Source,
    /// Documents the cursor may still return (`limit`), if limited.
    pub remaining: Option<u64>,
    /// Post-processing of each returned document.
    pub output: Option<Arc<Output>>,
    /// What is left of the query's `maxTimeMS`, spent across batches (MongoDB's cumulative
    /// cursor time limit).
    pub time_budget: Option<Duration>,
    /// The `lsid.id` bytes of the session that created it.
    pub lsid: Option<Vec<u8>>,
    /// The transaction it was opened in (it dies with it).
    pub txn_number: Option<i64>,
    /// Where its batches read: the latest data, a pinned snapshot, or its transaction.
    pub target: crate::session::target::Target,
    /// Exempt from the idle timeout.
    pub no_timeout: bool,
    /// Last time it was used.
    pub last_used: Instant,
}

enum Slot {
    Idle(Box<Cursor>),
    InUse,
}

/// All open cursors.
pub struct CursorManager {
    slots: Mutex<HashMap<i64, Slot>>,
    owners: Mutex<HashMap<i64, Arc<crate::auth::authorize::CursorOrigin>>>,
    counter: AtomicU64,
    seed: u64,
    /// Idle timeout.
    pub idle_timeout: Duration,
}

impl std::fmt::Debug for CursorManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CursorManager")
            .field("open", &self.open())
            .finish()
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A cursor reply body, `{cursor: {<batch>: [docs…], id, ns, atClusterTime?}}` (`batch` is
/// `firstBatch` or `nextBatch`), written straight into one buffer: each document is copied
/// once, not once into the array, again into the cursor document and again into the reply.
/// The batch is bounded by [`MAX_BATCH_BYTES`], so every length fits BSON's `i32`.
pub fn batch_reply(
    batch: &str,
    docs: &[RawDocumentBuf],
    id: i64,
    ns: &str,
    at_cluster_time: Option<bson::Timestamp>,
) -> RawDocumentBuf {
    batch_reply_with_token(batch, docs, None, id, ns, at_cluster_time)
}

/// [`batch_reply_with_token`] as a command's reply that also carries the batch's size and the
/// cursor id (so the metrics need not read them back from the body).
pub fn batch_reply_counted(
    batch: &str,
    docs: &[RawDocumentBuf],
    resume_token: Option<&RawDocument>,
    id: i64,
    ns: &str,
    at_cluster_time: Option<bson::Timestamp>,
) -> crate::commands::Reply {
    let mut reply: crate::commands::Reply =
        batch_reply_with_token(batch, docs, resume_token, id, ns, at_cluster_time).into();
    reply.cursor = Some((docs.len() as u64, id));
    reply
}

/// [`batch_reply`] with a change stream's `postBatchResumeToken` after the batch, when given.
pub fn batch_reply_with_token(
    batch: &str,
    docs: &[RawDocumentBuf],
    resume_token: Option<&RawDocument>,
    id: i64,
    ns: &str,
    at_cluster_time: Option<bson::Timestamp>,
) -> RawDocumentBuf {
    use bson::spec::ElementType;
    use cairn_wire::doc_writer::{close, document_array, document_array_len, element, open};
    let bytes: usize = docs.iter().map(|d| d.as_bytes().len()).sum();
    let token = resume_token.map_or(0, |t| t.as_bytes().len() + 24);
    // Room for the dispatcher's trailer too (`ok`, the gossip): it then appends in place.
    let size = document_array_len(batch.len(), docs.len(), bytes)
        + token
        + ns.len()
        + 64
        + crate::commands::REPLY_TRAILER;
    let mut out = Vec::with_capacity(size);
    let write = |out: &mut Vec<u8>| -> Result<(), cairn_wire::WireError> {
        let reply = open(out);
        element(out, ElementType::EmbeddedDocument, b"cursor")?;
        let cursor = open(out);
        document_array(out, batch.as_bytes(), docs.iter().map(|d| d.as_bytes()))?;
        if let Some(t) = resume_token {
            element(out, ElementType::EmbeddedDocument, b"postBatchResumeToken")?;
            out.extend_from_slice(t.as_bytes());
        }
        element(out, ElementType::Int64, b"id")?;
        out.extend_from_slice(&id.to_le_bytes());
        element(out, ElementType::String, b"ns")?;
        let ns_len = i32::try_from(ns.len() + 1).unwrap_or(i32::MAX);
        out.extend_from_slice(&ns_len.to_le_bytes());
        out.extend_from_slice(ns.as_bytes());
        out.push(0);
        if let Some(t) = at_cluster_time {
            element(out, ElementType::Timestamp, b"atClusterTime")?;
            out.extend_from_slice(&t.increment.to_le_bytes());
            out.extend_from_slice(&t.time.to_le_bytes());
        }
        close(out, cursor)?;
        close(out, reply)
    };
    // A batch is bounded by the reply size limit, so the writer cannot fail on its lengths;
    // if it did, the reply would be the empty document, never a wrong length.
    match write(&mut out) {
        Ok(()) => RawDocumentBuf::from_bytes(out).unwrap_or_else(|_| RawDocumentBuf::new()),
        Err(_) => RawDocumentBuf::new(),
    }
}

/// The `lsid.id` bytes of a command, if it carries a session.
pub fn session_of(body: &RawDocument) -> Option<Vec<u8>> {
    session_in(body.get("lsid").ok().flatten())
}

/// [`session_of`] given the body's `lsid` field (as a [`crate::commands::Parsed`] finds it).
pub fn session_in(lsid: Option<RawBsonRef<'_>>) -> Option<Vec<u8>> {
    match lsid {
        Some(RawBsonRef::Document(l)) => match l.get("id") {
            Ok(Some(RawBsonRef::Binary(b))) => Some(b.bytes.to_vec()),
            _ => None,
        },
        _ => None,
    }
}

impl CursorManager {
    /// A manager with the given idle timeout.
    pub fn new(idle_timeout: Duration) -> CursorManager {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ u64::from(std::process::id()).rotate_left(32);
        CursorManager {
            slots: Mutex::new(HashMap::new()),
            owners: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(1),
            seed,
            idle_timeout,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh cursor id.
    pub fn new_id(&self) -> i64 {
        loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let id = (splitmix(n ^ self.seed) >> 1) as i64;
            if id != 0 && !self.lock().contains_key(&id) {
                return id;
            }
        }
    }

    /// Records who opened a cursor and with which command (the first record stands).
    /// Entries of cursors that no longer exist are pruned as the table grows.
    pub fn set_origin(&self, id: i64, origin: Arc<crate::auth::authorize::CursorOrigin>) {
        let live = self.lock().len();
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        if owners.len() > 2 * live + 64 {
            let slots = self.lock();
            owners.retain(|id, _| slots.contains_key(id));
        }
        owners.entry(id).or_insert(origin);
    }

    /// Who opened an open cursor: `None` when no such cursor is open, `Some(None)` when it
    /// was opened without authentication.
    pub fn origin(&self, id: i64) -> Option<Option<Arc<crate::auth::authorize::CursorOrigin>>> {
        if !self.lock().contains_key(&id) {
            return None;
        }
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        Some(owners.get(&id).cloned())
    }

    /// The users that own an open cursor: `None` when no such cursor is open, an empty list
    /// when it was opened without authentication.
    pub fn owners(&self, id: i64) -> Option<Vec<crate::auth::UserName>> {
        self.origin(id)
            .map(|o| o.map(|o| o.users.clone()).unwrap_or_default())
    }

    /// Registers an open cursor.
    pub fn insert(&self, cursor: Cursor) {
        self.lock().insert(cursor.id, Slot::Idle(Box::new(cursor)));
    }

    /// Checks a cursor out for a `getMore` from session `lsid` (in transaction `txn`) on
    /// namespace `ns`, with a router's session and transaction checks.
    pub fn check_out(
        &self,
        id: i64,
        ns: &str,
        lsid: Option<&[u8]>,
        txn: Option<i64>,
    ) -> Result<Box<Cursor>, CommandError> {
        let mut slots = self.lock();
        let not_found = || {
            CommandError::new(
                ErrorCode::CursorNotFound,
                format!("cursor id {id} not found"),
            )
        };
        match slots.get(&id) {
            None => return Err(not_found()),
            Some(Slot::InUse) => {
                return Err(CommandError::new(
                    ErrorCode::CursorInUse,
                    format!("Cursor already in use (id: {id})."),
                ));
            }
            Some(Slot::Idle(c)) => {
                if c.ns != ns {
                    return Err(CommandError::new(
                        ErrorCode::Unauthorized,
                        format!(
                            "Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}",
                            c.ns
                        ),
                    ));
                }
                let show = |l: &[u8]| {
                    <[u8; 16]>::try_from(l)
                        .map(|l| crate::session::display_lsid(&l))
                        .unwrap_or_default()
                };
                let fail = |code: i32, what: String| {
                    Err(CommandError::new(
                        ErrorCode::Location(code),
                        format!("Cannot run getMore on cursor {id}, which was {what}"),
                    ))
                };
                match (&c.lsid, lsid) {
                    (Some(owner), Some(caller)) if owner.as_slice() != caller => {
                        return fail(
                            50801,
                            format!(
                                "created in session {}, in session {}",
                                show(owner),
                                show(caller)
                            ),
                        );
                    }
                    (Some(owner), None) => {
                        return fail(
                            50800,
                            format!("created in session {}, without an lsid", show(owner)),
                        );
                    }
                    (None, Some(caller)) => {
                        return fail(
                            50799,
                            format!("not created in a session, in session {}", show(caller)),
                        );
                    }
                    _ => {}
                }
                match (c.txn_number, txn) {
                    (Some(a), Some(b)) if a != b => {
                        return fail(
                            50804,
                            format!("created in transaction {a}, in transaction {b}"),
                        );
                    }
                    (Some(a), None) => {
                        return fail(
                            50803,
                            format!("created in transaction {a}, without a txnNumber"),
                        );
                    }
                    (None, Some(b)) => {
                        return fail(
                            50802,
                            format!("not created in a transaction, in transaction {b}"),
                        );
                    }
                    _ => {}
                }
            }
        }
        match slots.insert(id, Slot::InUse) {
            Some(Slot::Idle(c)) => Ok(c),
            _ => Err(not_found()),
        }
    }

    /// Returns a checked-out cursor (or forgets it when exhausted).
    pub fn check_in(&self, mut cursor: Box<Cursor>, exhausted: bool) {
        let mut slots = self.lock();
        if exhausted {
            slots.remove(&cursor.id);
        } else {
            cursor.last_used = Instant::now();
            slots.insert(cursor.id, Slot::Idle(cursor));
        }
    }

    /// Kills a cursor: `Some(true)` killed, `Some(false)` in use (alive), `None` not found.
    pub fn kill(&self, id: i64) -> Option<bool> {
        let mut slots = self.lock();
        match slots.get(&id) {
            None => None,
            Some(Slot::InUse) => Some(false),
            Some(Slot::Idle(_)) => {
                slots.remove(&id);
                Some(true)
            }
        }
    }

    /// Kills every idle cursor of a session (in-use ones finish their batch and are closed on
    /// check-in); returns how many were killed.
    pub fn kill_session(&self, lsid: &[u8]) -> usize {
        self.kill_where(|c| c.lsid.as_deref() == Some(lsid))
    }

    /// Kills the cursors opened in one transaction of a session.
    pub fn kill_transaction(&self, lsid: &[u8], txn: i64) -> usize {
        self.kill_where(|c| c.lsid.as_deref() == Some(lsid) && c.txn_number == Some(txn))
    }

    fn kill_where(&self, pred: impl Fn(&Cursor) -> bool) -> usize {
        let mut slots = self.lock();
        let before = slots.len();
        slots.retain(|_, s| match s {
            Slot::InUse => true,
            Slot::Idle(c) => !pred(c),
        });
        before - slots.len()
    }

    /// Removes idle cursors unused for longer than the timeout; returns how many.
    pub fn reap(&self, now: Instant) -> usize {
        let mut slots = self.lock();
        let before = slots.len();
        slots.retain(|_, s| match s {
            Slot::InUse => true,
            Slot::Idle(c) => c.no_timeout || now.duration_since(c.last_used) < self.idle_timeout,
        });
        before - slots.len()
    }

    /// Open cursors.
    pub fn open(&self) -> usize {
        self.lock().len()
    }

    /// Open cursors as `serverStatus.metrics.cursor.open` counts them: `(total, pinned — in
    /// use by a getMore right now —, noTimeout)`.
    pub fn counts(&self) -> (usize, usize, usize) {
        let slots = self.lock();
        let pinned = slots.values().filter(|s| matches!(s, Slot::InUse)).count();
        let no_timeout = slots
            .values()
            .filter(|s| matches!(s, Slot::Idle(c) if c.no_timeout))
            .count();
        (slots.len(), pinned, no_timeout)
    }
}

/// Produces the next batch of at most `max_docs` documents (blocking: call off the
/// runtime). Returns the documents and whether the cursor is exhausted.
pub fn next_batch(
    store: &Store,
    cursor: &mut Cursor,
    max_docs: usize,
) -> Result<(Vec<RawDocumentBuf>, bool), CommandError> {
    let max_docs = match cursor.remaining {
        Some(r) => max_docs.min(usize::try_from(r).unwrap_or(usize::MAX)),
        None => max_docs,
    };
    let (docs, exhausted) = match &mut cursor.source {
        Source::Buffered(q) => {
            let mut out = Vec::new();
            let mut bytes = 0;
            while out.len() < max_docs {
                let Some(front) = q.front() else { break };
                if !out.is_empty() && bytes + front.as_bytes().len() > MAX_BATCH_BYTES {
                    break;
                }
                bytes += front.as_bytes().len();
                if let Some(d) = q.pop_front() {
                    out.push(d);
                }
            }
            let done = q.is_empty();
            (out, done)
        }
        Source::Sorted(docs) => {
            let mut out = Vec::new();
            let mut bytes = 0;
            let mut done = false;
            while out.len() < max_docs && bytes < MAX_BATCH_BYTES / 2 {
                if out.len() % 1024 == 0 {
                    crate::deadline::check().map_err(executor_error)?;
                }
                match docs.next() {
                    Some(Ok(d)) => {
                        bytes += d.as_bytes().len();
                        out.push(d);
                    }
                    Some(Err(e)) => return Err(executor_error(CommandError::from(e))),
                    None => {
                        done = true;
                        break;
                    }
                }
            }
            (out, done)
        }
        Source::Pipeline(p) => crate::commands::aggregate::next_batch(p, max_docs)?,
        Source::Tail {
            db,
            coll,
            space,
            last,
            filter,
            ..
        } => {
            let meta = store
                .collection(db, coll)
                .filter(|m| m.id == *space)
                .ok_or_else(|| {
                    CommandError::new(
                        ErrorCode::QueryPlanKilled,
                        format!("collection dropped or renamed: {db}.{coll}"),
                    )
                })?;
            let read = store.read()?;
            if let Some(rid) = *last
                && !cairn_storage::capped::position_exists(read.snapshot(), &meta, rid)?
            {
                return Err(CommandError::new(
                    ErrorCode::CappedPositionLost,
                    format!(
                        "Executor error during getMore :: caused by :: CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId({rid})"
                    ),
                ));
            }
            let mut out = Vec::new();
            let mut bytes = 0usize;
            'read: while out.len() < max_docs && bytes < MAX_BATCH_BYTES / 2 {
                let docs = cairn_storage::capped::tail(read.snapshot(), &meta, *last, 256)?;
                if docs.is_empty() {
                    break;
                }
                for (rid, d) in docs {
                    *last = Some(rid);
                    if filter
                        .try_matches(&d)
                        .map_err(|e| executor_error(e.into()))?
                    {
                        bytes += d.as_bytes().len();
                        out.push(d);
                        if out.len() >= max_docs {
                            break 'read;
                        }
                    }
                }
            }
            (out, false)
        }
        Source::Plan {
            db,
            coll,
            space,
            exec,
            pending,
            skip,
        } => {
            let target = cursor.target.clone();
            target.read(store, |view| {
                let meta = view
                    .collection(db, coll)?
                    .filter(|m| m.id == *space)
                    .ok_or_else(|| {
                        CommandError::new(
                            ErrorCode::QueryPlanKilled,
                            format!("collection dropped or renamed: {db}.{coll}"),
                        )
                    })?;
                plan_batch(view.source(), &meta, exec, pending, skip, max_docs)
            })?
        }
    };
    finish_batch(cursor, docs, exhausted)
}

/// Up to `max_docs` documents of a plan's results (within [`MAX_BATCH_BYTES`]): first what
/// is `pending`, then more from `exec` on `src`, skipping `skip` matches first; returns them
/// and whether the plan is exhausted. (`find` calls it on the snapshot it planned on for the
/// first batch; [`next_batch`] on a fresh one for each later batch.)
pub fn plan_batch(
    src: &dyn cairn_query::plan::Source,
    meta: &CollectionMeta,
    exec: &mut Execution,
    pending: &mut VecDeque<RawDocumentBuf>,
    skip: &mut u64,
    max_docs: usize,
) -> Result<(Vec<RawDocumentBuf>, bool), CommandError> {
    let mut out: Vec<RawDocumentBuf> = Vec::new();
    let mut bytes = 0usize;
    let exhausted = loop {
        // Hand over what is pending, skipping first.
        while out.len() < max_docs {
            let Some(d) = pending.pop_front() else { break };
            if *skip > 0 {
                *skip -= 1;
                continue;
            }
            let len = d.as_bytes().len();
            if !out.is_empty() && bytes + len > MAX_BATCH_BYTES {
                pending.push_front(d);
                break;
            }
            bytes += len;
            out.push(d);
        }
        if exec.is_exhausted() && pending.is_empty() {
            break true;
        }
        if out.len() >= max_docs || bytes >= MAX_BATCH_BYTES / 2 || !pending.is_empty() {
            break false;
        }
        crate::deadline::check().map_err(executor_error)?;
        let want =
            (max_docs - out.len()).saturating_add(usize::try_from(*skip).unwrap_or(usize::MAX));
        let room = if *skip > 0 {
            MAX_BATCH_BYTES
        } else {
            MAX_BATCH_BYTES - bytes
        };
        let docs = exec
            .next(src, meta, want, room, 10_000)
            .map_err(|e| executor_error(e.into()))?;
        if pending.is_empty() {
            // The batch's vector becomes the queue as it is (no second allocation and copy).
            *pending = VecDeque::from(docs);
        } else {
            pending.extend(docs);
        }
    };
    Ok((out, exhausted))
}

/// Accounts a batch against the cursor's `limit` and applies its projection; returns the
/// documents and whether the cursor is done.
pub fn finish_batch(
    cursor: &mut Cursor,
    docs: Vec<RawDocumentBuf>,
    exhausted: bool,
) -> Result<(Vec<RawDocumentBuf>, bool), CommandError> {
    if let Some(r) = &mut cursor.remaining {
        *r = r.saturating_sub(docs.len() as u64);
    }
    let docs = match &cursor.output {
        Some(o) => docs
            .iter()
            .map(|d| o.apply(d))
            .collect::<Result<Vec<_>, _>>()?,
        None => docs,
    };
    let exhausted = exhausted || cursor.remaining == Some(0);
    Ok((docs, exhausted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_replies_match_the_documents_built_field_by_field() {
        let docs: Vec<RawDocumentBuf> = (0..13)
            .map(|i| bson::rawdoc! {"_id": i, "s": "x".repeat(i as usize)})
            .collect();
        for (n, at) in [
            (0, None),
            (1, None),
            (
                13,
                Some(bson::Timestamp {
                    time: 7,
                    increment: 9,
                }),
            ),
        ] {
            let mut arr = bson::RawArrayBuf::new();
            for d in &docs[..n] {
                arr.push(d.clone());
            }
            let mut cursor = bson::rawdoc! {"nextBatch": arr, "id": 42_i64, "ns": "db.c"};
            if let Some(t) = at {
                cursor.append(bson::raw::cstr!("atClusterTime"), t);
            }
            let want = bson::rawdoc! {"cursor": cursor};
            let got = batch_reply("nextBatch", &docs[..n], 42, "db.c", at);
            assert_eq!(got.as_bytes(), want.as_bytes());
        }
    }

    fn cursor(m: &CursorManager, ns: &str, lsid: Option<Vec<u8>>) -> i64 {
        let id = m.new_id();
        m.insert(Cursor {
            id,
            ns: ns.into(),
            source: Source::Buffered(VecDeque::new()),
            remaining: None,
            output: None,
            time_budget: None,
            lsid,
            txn_number: None,
            target: Default::default(),
            no_timeout: false,
            last_used: Instant::now(),
        });
        id
    }

    #[test]
    fn check_out_rules() {
        let m = CursorManager::new(DEFAULT_IDLE_TIMEOUT);
        let id = cursor(&m, "db.c", Some(vec![1]));
        let code = |r: Result<Box<Cursor>, CommandError>| r.unwrap_err().code.code();
        assert_eq!(code(m.check_out(id, "db.d", Some(&[1]), None)), 13);
        assert_eq!(code(m.check_out(id, "db.c", Some(&[2]), None)), 50801);
        assert_eq!(code(m.check_out(id, "db.c", None, None)), 50800);
        assert_eq!(code(m.check_out(id, "db.c", Some(&[1]), Some(3))), 50802);
        let c = m.check_out(id, "db.c", Some(&[1]), None).unwrap();
        assert_eq!(code(m.check_out(id, "db.c", Some(&[1]), None)), 143);
        assert_eq!(m.kill(id), Some(false), "in use: alive");
        m.check_in(c, false);
        assert_eq!(m.kill(id), Some(true));
        assert_eq!(code(m.check_out(id, "db.c", Some(&[1]), None)), 43);
        let other = cursor(&m, "db.c", None);
        assert_eq!(code(m.check_out(other, "db.c", Some(&[1]), None)), 50799);
        assert_eq!(m.kill(id), None);
    }

    #[test]
    fn reaper_honours_timeout_and_exemption() {
        let m = CursorManager::new(Duration::from_millis(10));
        let a = cursor(&m, "db.c", None);
        let b = m.new_id();
        m.insert(Cursor {
            id: b,
            ns: "db.c".into(),
            source: Source::Buffered(VecDeque::new()),
            remaining: None,
            output: None,
            time_budget: None,
            lsid: None,
            txn_number: None,
            target: Default::default(),
            no_timeout: true,
            last_used: Instant::now(),
        });
        assert_eq!(m.reap(Instant::now() + Duration::from_secs(1)), 1);
        assert_eq!(m.kill(a), None);
        assert_eq!(m.kill(b), Some(true));
    }

    #[test]
    fn ids_are_unique_and_positive() {
        let m = CursorManager::new(DEFAULT_IDLE_TIMEOUT);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let id = m.new_id();
            assert!(id > 0);
            assert!(seen.insert(id));
        }
    }
}
