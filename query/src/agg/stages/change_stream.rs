//! `$changeStream`: the change events of a collection, a database or the whole deployment,
//! read from the change log ([`crate::agg::Host::change_log`], see
//! `cairn_storage::changelog`).
//!
//! # Events
//! Each log entry in scope becomes one event, with MongoDB's fields in MongoDB's order:
//! `[to] [txnNumber, lsid] _id operationType clusterTime [collectionUUID] wallTime
//! [fullDocument] ns [documentKey] [operationDescription] [updateDescription]
//! [fullDocumentBeforeChange]` (`to` for renames, `txnNumber`/`lsid` for a transaction's
//! events, `collectionUUID`/`operationDescription` with `showExpandedEvents`). Inserts,
//! updates, replaces, deletes, drops, renames and `dropDatabase` are always events; `create`,
//! `createIndexes`, `dropIndexes` and `modify` only with `showExpandedEvents`. Database and
//! deployment streams skip `system.*` collections and the `admin`, `config` and `local`
//! databases. A collection stream ends with an `invalidate` event after its collection is
//! dropped or renamed (or its database dropped); a database stream after `dropDatabase`.
//!
//! # Resume tokens
//! `_id` is `{_data: "<uppercase hex>"}`; the bytes are
//! `0x82 u64be(commit time) kind u32be(index in commit) fromInvalidate uuid?` where `kind` is
//! `0x80` for an event and `0xFF` for a high-water mark ("every change up to this time has
//! been seen"). Byte order (and so string order) is event order, and a high-water mark sorts
//! after every event of its time. A stream resumed after a token returns exactly the events
//! after it; `startAtOperationTime: T` the events at `T` and later. A resume point older than
//! the retained log is ChangeStreamHistoryLost (286).
//!
//! The stream's progress (its `postBatchResumeToken`, whether it was invalidated) is shared
//! with the command through [`StreamProgress`] in the run's [`Options`].

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bson::raw::cstr;
use bson::spec::BinarySubtype;
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, rawdoc};

use crate::agg::{Constraints, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

/// A change log position: (packed commit time, index in the commit).
pub type Position = (u64, u32);

const EVENT: u8 = 0x80;
const HIGH_WATER: u8 = 0xFF;
/// Marks the fragment suffix of a split event's token.
const FRAGMENT: u8 = 0x46;

/// What a change stream run has produced so far, read by the command after each batch.
#[derive(Debug, Default, Clone)]
pub struct StreamProgress {
    /// Where the stream starts when no resume option says otherwise: the cluster time when
    /// it was opened (set by the command before the run opens).
    pub start: Option<Timestamp>,
    /// The `postBatchResumeToken`.
    pub pbrt: Option<RawDocumentBuf>,
    /// The stream ended with an `invalidate` event.
    pub invalidated: bool,
    /// The run is a change stream.
    pub active: bool,
    /// Resuming from fragment `n` of the event with this token: the split stage skips the
    /// fragments up to and including `n` of that event.
    pub resume_split: Option<(RawDocumentBuf, u32)>,
}

/// The progress handle shared between a run and its command.
pub type SharedProgress = Arc<Mutex<StreamProgress>>;

/// Which changes a stream sees.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    Collection(String, String),
    Database(String),
    Cluster,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FullDocument {
    Default,
    UpdateLookup,
    WhenAvailable,
    Required,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BeforeChange {
    Off,
    WhenAvailable,
    Required,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// After this position (exclusive).
    After(Position),
    /// When the stream opens.
    Now,
}

/// A parsed `$changeStream`.
#[derive(Debug)]
pub struct ChangeStream {
    spec: RawDocumentBuf,
    scope: Scope,
    full_document: FullDocument,
    before_change: BeforeChange,
    expanded: bool,
    start: Start,
    /// Started after an invalidate token (`startAfter`): the collection's earlier
    /// invalidating events are not repeated.
    after_invalidate: bool,
    /// Resumed from a fragment of a split event: the stream starts at that event again.
    fragment: Option<u32>,
}

impl ChangeStream {
    /// Whether the stream resumes from a fragment of a split event.
    pub(crate) fn resumes_from_fragment(&self) -> bool {
        self.fragment.is_some()
    }
}

/// A token's `_data` bytes.
fn token_bytes(pos: Position, kind: u8, from_invalidate: bool, uuid: Option<&[u8]>) -> Vec<u8> {
    let mut b = Vec::with_capacity(31);
    b.push(0x82);
    b.extend_from_slice(&pos.0.to_be_bytes());
    b.push(kind);
    b.extend_from_slice(&pos.1.to_be_bytes());
    b.push(u8::from(from_invalidate));
    if let Some(u) = uuid {
        b.extend_from_slice(u);
    }
    b
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02X}"));
    }
    s
}

fn token(b: &[u8]) -> RawDocumentBuf {
    rawdoc! {"_data": hex(b)}
}

/// The token of fragment `n` (0-based) of the event whose token is `event`: the event's bytes
/// followed by `0x46 u32be(n)`, so fragments sort after their event and in order.
pub(crate) fn fragment_token(event: &RawDocument, n: u32) -> Option<RawDocumentBuf> {
    let data = event.get_str("_data").ok()?;
    let mut s = String::with_capacity(data.len() + 10);
    s.push_str(data);
    s.push_str(&hex(&[FRAGMENT]));
    s.push_str(&hex(&n.to_be_bytes()));
    Some(rawdoc! {"_data": s})
}

/// The high-water-mark token for "everything committed at or before `ts`".
pub fn high_water_mark(ts: u64) -> RawDocumentBuf {
    token(&token_bytes((ts, u32::MAX), HIGH_WATER, false, None))
}

/// A parsed resume token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Token {
    pos: Position,
    kind: u8,
    from_invalidate: bool,
    has_uuid: bool,
    /// The fragment of a split event (`$changeStreamSplitLargeEvent`), 0-based.
    fragment: Option<u32>,
}

fn parse_token(v: RawBsonRef<'_>, field: &str) -> Result<Token> {
    let RawBsonRef::Document(d) = v else {
        return Err(QueryError::TypeMismatch(format!(
            "BSON field '$changeStream.{field}' is the wrong type '{}', expected type 'object'",
            cairn_storage::display::type_name(v)
        )));
    };
    let data = match d.get("_data") {
        Ok(Some(RawBsonRef::String(s))) => s,
        other => {
            let found = other
                .ok()
                .flatten()
                .map_or("missing", cairn_storage::display::type_name);
            return Err(loc(
                40647,
                format!(
                    "Bad resume token: _data of missing or of wrong type. Expected string, got {found}"
                ),
            ));
        }
    };
    if data.is_empty() {
        return Err(loc(40649, "invalid empty resume token"));
    }
    let bad = || QueryError::FailedToParse("resume token string was not a valid hex string".into());
    if data.len() % 2 != 0 {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..data.len())
        .step_by(2)
        .map(|i| {
            data.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let invalid = || {
        loc(
            50795,
            "Invalid Resume Token: not a token this server produced",
        )
    };
    if bytes.len() < 15 || bytes.first() != Some(&0x82) {
        return Err(invalid());
    }
    let ts = <[u8; 8]>::try_from(&bytes[1..9]).map_err(|_| invalid())?;
    let kind = bytes[9];
    let idx = <[u8; 4]>::try_from(&bytes[10..14]).map_err(|_| invalid())?;
    if kind != EVENT && kind != HIGH_WATER {
        return Err(invalid());
    }
    let fragment = match bytes.len() {
        15 | 31 => None,
        20 | 36 => {
            let tail = &bytes[bytes.len() - 5..];
            if tail[0] != FRAGMENT || kind != EVENT {
                return Err(invalid());
            }
            let n = <[u8; 4]>::try_from(&tail[1..]).map_err(|_| invalid())?;
            Some(u32::from_be_bytes(n))
        }
        _ => return Err(invalid()),
    };
    Ok(Token {
        pos: (u64::from_be_bytes(ts), u32::from_be_bytes(idx)),
        kind,
        from_invalidate: bytes[14] != 0,
        has_uuid: bytes.len() >= 31,
        fragment,
    })
}

fn pack(t: Timestamp) -> u64 {
    (u64::from(t.time) << 32) | u64::from(t.increment)
}

fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: (v & 0xFFFF_FFFF) as u32,
    }
}

fn enum_error(field: &str, v: &str) -> QueryError {
    QueryError::BadValue(format!(
        "Enumeration value '{v}' for field '$changeStream.{field}' is not a valid value."
    ))
}

fn string_opt<'a>(field: &str, v: RawBsonRef<'a>) -> Result<&'a str> {
    match v {
        RawBsonRef::String(s) => Ok(s),
        other => Err(QueryError::TypeMismatch(format!(
            "BSON field '$changeStream.{field}' is the wrong type '{}', expected type 'string'",
            cairn_storage::display::type_name(other)
        ))),
    }
}

fn bool_opt(field: &str, v: RawBsonRef<'_>) -> Result<bool> {
    match v {
        RawBsonRef::Boolean(b) => Ok(b),
        other => Err(QueryError::TypeMismatch(format!(
            "BSON field '$changeStream.{field}' is the wrong type '{}', expected type 'bool'",
            cairn_storage::display::type_name(other)
        ))),
    }
}

/// Parses `{$changeStream: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            50808,
            "$changeStream stage expects a document as argument",
        ));
    };
    let mut full_document = FullDocument::Default;
    let mut before_change = BeforeChange::Off;
    let mut all = false;
    let mut expanded = false;
    let mut resume_after = None;
    let mut start_after = None;
    let mut at_time = None;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "fullDocument" => {
                full_document = match string_opt("fullDocument", v)? {
                    "default" => FullDocument::Default,
                    "updateLookup" => FullDocument::UpdateLookup,
                    "whenAvailable" => FullDocument::WhenAvailable,
                    "required" => FullDocument::Required,
                    other => return Err(enum_error("fullDocument", other)),
                }
            }
            "fullDocumentBeforeChange" => {
                before_change = match string_opt("fullDocumentBeforeChange", v)? {
                    "off" => BeforeChange::Off,
                    "whenAvailable" => BeforeChange::WhenAvailable,
                    "required" => BeforeChange::Required,
                    other => return Err(enum_error("fullDocumentBeforeChange", other)),
                }
            }
            "allChangesForCluster" => all = bool_opt("allChangesForCluster", v)?,
            "showExpandedEvents" => expanded = bool_opt("showExpandedEvents", v)?,
            "resumeAfter" => resume_after = Some(parse_token(v, "resumeAfter")?),
            "startAfter" => start_after = Some(parse_token(v, "startAfter")?),
            "startAtOperationTime" => match v {
                RawBsonRef::Timestamp(t) => at_time = Some(t),
                other => {
                    return Err(QueryError::TypeMismatch(format!(
                        "BSON field '$changeStream.startAtOperationTime' is the wrong type '{}', expected type 'timestamp'",
                        cairn_storage::display::type_name(other)
                    )));
                }
            },
            "showMigrationEvents"
            | "allowToRunOnConfigDB"
            | "allowToRunOnSystemNS"
            | "showSystemEvents"
            | "showRawUpdateDescription" => {}
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '$changeStream.{other}' is an unknown field."),
                ));
            }
        }
    }
    let scope = match (&cx.coll, all) {
        (_, true) if cx.db != "admin" || cx.coll.is_some() => {
            return Err(QueryError::Location(
                72,
                format!(
                    "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found {}.{}",
                    cx.db,
                    cx.coll.as_deref().unwrap_or("$cmd.aggregate")
                ),
            ));
        }
        (_, true) => Scope::Cluster,
        _ if matches!(cx.db.as_str(), "admin" | "config" | "local") => {
            return Err(QueryError::Location(
                73,
                format!(
                    "$changeStream may not be opened on the internal {} database",
                    cx.db
                ),
            ));
        }
        (Some(c), false) if c.starts_with("system.") => {
            return Err(QueryError::Location(
                73,
                format!(
                    "$changeStream may not be opened on the internal {}.{c} collection",
                    cx.db
                ),
            ));
        }
        (Some(c), false) => Scope::Collection(cx.db.clone(), c.clone()),
        (None, false) => Scope::Database(cx.db.clone()),
    };
    if resume_after.is_some() && start_after.is_some() {
        return Err(loc(
            50865,
            "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage",
        ));
    }
    if at_time.is_some() && (resume_after.is_some() || start_after.is_some()) {
        return Err(loc(
            40674,
            "Only one type of resume option is allowed, but multiple were found",
        ));
    }
    if resume_after.is_some_and(|t| t.from_invalidate) {
        return Err(QueryError::Location(
            260,
            "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification"
                .into(),
        ));
    }
    let token = resume_after.or(start_after);
    if let (Some(t), Scope::Collection(..)) = (token, &scope)
        && t.kind == EVENT
        && !t.has_uuid
    {
        return Err(QueryError::Location(
            260,
            "Attempted to resume a single-collection stream, but the resume token does not include a UUID"
                .into(),
        ));
    }
    let start = match (token, at_time) {
        (Some(t), _) if t.kind == HIGH_WATER => Start::After((t.pos.0, u32::MAX)),
        // The split event itself is read again; the split stage skips what was seen.
        (Some(t), _) if t.fragment.is_some() => Start::After(match t.pos {
            (ts, 0) => (ts.saturating_sub(1), u32::MAX),
            (ts, i) => (ts, i - 1),
        }),
        (Some(t), _) => Start::After(t.pos),
        (None, Some(t)) => Start::After((pack(t).saturating_sub(1), u32::MAX)),
        (None, None) => Start::Now,
    };
    Ok(vec![Arc::new(ChangeStream {
        spec: d.to_owned(),
        scope,
        full_document,
        before_change,
        expanded,
        start,
        after_invalidate: start_after.is_some_and(|t| t.from_invalidate),
        fragment: token.and_then(|t| t.fragment),
    })])
}

impl Stage for ChangeStream {
    fn name(&self) -> &'static str {
        "$changeStream"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.spec.clone())
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::Exhaustive
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            first: true,
            collectionless: true,
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        _input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        let progress = opts.stream.clone();
        let start = match self.start {
            Start::After(p) => p,
            Start::Now => {
                let at = progress
                    .lock()
                    .map(|p| p.start.map(pack).unwrap_or(0))
                    .unwrap_or(0);
                (at, u32::MAX)
            }
        };
        let resume_split = match (
            self.fragment,
            self.spec.get("resumeAfter"),
            self.spec.get("startAfter"),
        ) {
            (Some(n), Ok(Some(RawBsonRef::Document(t))), _)
            | (Some(n), _, Ok(Some(RawBsonRef::Document(t)))) => Some((t.to_owned(), n)),
            _ => None,
        };
        if let Ok(mut p) = progress.lock() {
            p.active = true;
            if let Some((t, n)) = resume_split {
                // The event the fragment belongs to: its token without the fragment suffix.
                let data = t.get_str("_data").unwrap_or_default();
                let base = data
                    .get(..data.len().saturating_sub(10))
                    .unwrap_or_default();
                p.pbrt = Some(t.clone());
                p.resume_split = Some((rawdoc! {"_data": base}, n));
            } else {
                p.pbrt = Some(match self.start {
                    Start::After(pos) if pos.1 != u32::MAX => {
                        token(&token_bytes(pos, EVENT, false, None))
                    }
                    _ => high_water_mark(start.0),
                });
            }
        }
        Ok(Box::new(ChangeStreamRun {
            stage: self,
            position: start,
            checked: false,
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            done: false,
            progress,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct ChangeStreamRun {
    stage: Arc<ChangeStream>,
    /// The last log position read.
    position: Position,
    /// The resume point was checked against the retained log.
    checked: bool,
    pending: VecDeque<(Position, RawDocumentBuf)>,
    /// Events ready to return before anything else (the `invalidate` after its cause).
    ready: VecDeque<RawDocumentBuf>,
    /// Invalidated: nothing more after `ready`.
    done: bool,
    progress: SharedProgress,
}

fn split_ns(ns: &str) -> (&str, Option<&str>) {
    match ns.split_once('.') {
        Some((db, coll)) => (db, Some(coll)),
        None => (ns, None),
    }
}

fn event_type(op: &str) -> Option<(&'static str, bool)> {
    Some(match op {
        "i" => ("insert", false),
        "u" => ("update", false),
        "r" => ("replace", false),
        "d" => ("delete", false),
        "drop" => ("drop", false),
        // A view's drop is an expanded event (MongoDB derives it from `system.views`).
        "dropView" => ("drop", true),
        "rename" => ("rename", false),
        "dropDatabase" => ("dropDatabase", false),
        "create" => ("create", true),
        "createIndexes" => ("createIndexes", true),
        "dropIndexes" => ("dropIndexes", true),
        "modify" => ("modify", true),
        _ => return None,
    })
}

fn internal_db(db: &str) -> bool {
    matches!(db, "admin" | "config" | "local")
}

impl ChangeStreamRun {
    /// Whether an entry is in this stream's scope; and whether it invalidates the stream.
    fn in_scope(&self, entry: &RawDocument) -> (bool, bool) {
        let ns = entry.get_str("ns").unwrap_or_default();
        let op = entry.get_str("op").unwrap_or_default();
        let (db, coll) = split_ns(ns);
        match &self.stage.scope {
            Scope::Collection(wdb, wcoll) => {
                let here = db == wdb && coll == Some(wcoll.as_str());
                let renamed_in = op == "rename"
                    && entry
                        .get_str("to")
                        .is_ok_and(|t| split_ns(t) == (wdb.as_str(), Some(wcoll.as_str())));
                let db_dropped = op == "dropDatabase" && db == wdb;
                let invalidates = (here && matches!(op, "drop" | "rename")) || renamed_in;
                (here || renamed_in || db_dropped, invalidates || db_dropped)
            }
            Scope::Database(wdb) => {
                let here = db == wdb && !coll.is_some_and(|c| c.starts_with("system."));
                (here, here && op == "dropDatabase")
            }
            Scope::Cluster => (
                !internal_db(db) && !coll.is_some_and(|c| c.starts_with("system.")),
                false,
            ),
        }
    }

    fn event(
        &self,
        pos: Position,
        entry: &RawDocument,
        cx: &ExecCx<'_>,
    ) -> Result<Option<RawDocumentBuf>> {
        let op = entry.get_str("op").unwrap_or_default();
        let Some((kind, expanded_only)) = event_type(op) else {
            return Ok(None);
        };
        if expanded_only && !self.stage.expanded {
            return Ok(None);
        }
        // A collection stream sees `dropDatabase` only as its invalidation.
        if op == "dropDatabase" && matches!(self.stage.scope, Scope::Collection(..)) {
            return Ok(None);
        }
        let uuid = match entry.get("ui") {
            Ok(Some(RawBsonRef::Binary(b))) => Some(b.bytes.to_vec()),
            _ => None,
        };
        let ns = entry.get_str("ns").unwrap_or_default();
        let (db, coll) = split_ns(ns);
        let mut e = RawDocumentBuf::new();
        if op == "rename"
            && let Ok(to) = entry.get_str("to")
        {
            let (tdb, tcoll) = split_ns(to);
            e.append(
                cstr!("to"),
                rawdoc! {"db": tdb, "coll": tcoll.unwrap_or_default()},
            );
        }
        if let (Ok(n), Ok(l)) = (entry.get_i64("txnNumber"), entry.get_document("lsid")) {
            e.append(cstr!("txnNumber"), n);
            e.append(cstr!("lsid"), l.to_owned());
        }
        e.append(
            cstr!("_id"),
            token(&token_bytes(pos, EVENT, false, uuid.as_deref())),
        );
        e.append(cstr!("operationType"), kind);
        e.append(cstr!("clusterTime"), unpack(pos.0));
        if self.stage.expanded
            && let Some(u) = &uuid
        {
            e.append(
                cstr!("collectionUUID"),
                bson::Binary {
                    subtype: BinarySubtype::Uuid,
                    bytes: u.clone(),
                },
            );
        }
        if let Ok(w) = entry.get_datetime("wall") {
            e.append(cstr!("wallTime"), w);
        }
        let key = entry.get_document("key").ok();
        match op {
            "i" | "r" => {
                if let Ok(d) = entry.get_document("doc") {
                    e.append(cstr!("fullDocument"), d.to_owned());
                }
            }
            "u" => match self.stage.full_document {
                FullDocument::Default => {}
                FullDocument::UpdateLookup => {
                    let current = match (coll, key) {
                        (Some(c), Some(k)) => lookup(cx, db, c, k)?,
                        _ => None,
                    };
                    match current {
                        Some(d) => e.append(cstr!("fullDocument"), d),
                        None => e.append(cstr!("fullDocument"), RawBson::Null),
                    }
                }
                FullDocument::WhenAvailable | FullDocument::Required => {
                    match entry.get_document("post") {
                        Ok(d) => e.append(cstr!("fullDocument"), d.to_owned()),
                        Err(_) if self.stage.full_document == FullDocument::Required => {
                            return Err(image_missing("post", ns, key));
                        }
                        Err(_) => e.append(cstr!("fullDocument"), RawBson::Null),
                    }
                }
            },
            _ => {}
        }
        let mut ns_doc = rawdoc! {"db": db};
        if let Some(c) = coll {
            ns_doc.append(cstr!("coll"), c);
        }
        e.append(cstr!("ns"), ns_doc);
        if let Some(k) = key {
            e.append(cstr!("documentKey"), k.to_owned());
        }
        if self.stage.expanded
            && let Ok(desc) = entry.get_document("desc")
        {
            e.append(cstr!("operationDescription"), desc.to_owned());
        }
        if op == "u"
            && let Ok(u) = entry.get_document("upd")
        {
            let mut u = u.to_owned();
            if self.stage.expanded {
                u.append(cstr!("disambiguatedPaths"), rawdoc! {});
            }
            e.append(cstr!("updateDescription"), u);
        }
        if matches!(op, "u" | "r" | "d") && self.stage.before_change != BeforeChange::Off {
            match entry.get_document("pre") {
                Ok(d) => e.append(cstr!("fullDocumentBeforeChange"), d.to_owned()),
                Err(_) if self.stage.before_change == BeforeChange::Required => {
                    return Err(image_missing("pre", ns, key));
                }
                Err(_) => e.append(cstr!("fullDocumentBeforeChange"), RawBson::Null),
            }
        }
        Ok(Some(e))
    }
}

fn image_missing(which: &str, ns: &str, key: Option<&RawDocument>) -> QueryError {
    let key = key
        .map(cairn_storage::display::document)
        .unwrap_or_default();
    QueryError::Location(
        47,
        format!(
            "Change stream was configured to require a {which}-image for all update, delete and replace events, but the {which}-image was not found for event on namespace {ns} with documentKey {key}"
        ),
    )
}

/// The current version of the document with key `key` (`updateLookup`).
fn lookup(
    cx: &ExecCx<'_>,
    db: &str,
    coll: &str,
    key: &RawDocument,
) -> Result<Option<RawDocumentBuf>> {
    let Some(meta) = cx.catalog.collection(db, coll)? else {
        return Ok(None);
    };
    let Ok(Some(id)) = key.get("_id") else {
        return Ok(None);
    };
    let k = cairn_storage::store::id_key(id)?;
    Ok(cx.source.get_by_key(&meta, &k)?)
}

impl DocStream for ChangeStreamRun {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                if let Ok(mut p) = self.progress.lock() {
                    p.pbrt = ev.get_document("_id").ok().map(RawDocument::to_owned);
                    if ev.get_str("operationType").ok() == Some("invalidate") {
                        p.invalidated = true;
                    }
                }
                return Ok(Some(ev));
            }
            if self.done {
                return Ok(None);
            }
            if let Some((pos, entry)) = self.pending.pop_front() {
                let (in_scope, invalidates) = self.in_scope(&entry);
                if !in_scope {
                    continue;
                }
                let event = self.event(pos, &entry, cx)?;
                if invalidates && !self.stage.after_invalidate {
                    // The invalidating event (when it is one), then `invalidate`.
                    let uuid = match entry.get("ui") {
                        Ok(Some(RawBsonRef::Binary(b))) => Some(b.bytes.to_vec()),
                        _ => None,
                    };
                    let inv_token = token(&token_bytes(pos, EVENT, true, uuid.as_deref()));
                    let mut inv = rawdoc! {
                        "_id": inv_token,
                        "operationType": "invalidate",
                        "clusterTime": unpack(pos.0),
                    };
                    if let Ok(w) = entry.get_datetime("wall") {
                        inv.append(cstr!("wallTime"), w);
                    }
                    self.done = true;
                    self.pending.clear();
                    if let Some(ev) = event {
                        self.ready.push_back(ev);
                    }
                    self.ready.push_back(inv);
                    continue;
                }
                if invalidates {
                    // Started after this collection's invalidation: the new collection's
                    // events follow.
                    continue;
                }
                let Some(ev) = event else { continue };
                self.ready.push_back(ev);
                continue;
            }
            let (entries, trimmed) = cx.host.change_log(Some(self.position), 256)?;
            if !self.checked {
                self.checked = true;
                if trimmed > 0 && self.position.0 <= trimmed {
                    return Err(QueryError::Location(
                        286,
                        "Resume of change stream was not possible, as the resume point may no longer be in the oplog."
                            .into(),
                    ));
                }
            }
            let Some(last) = entries.last().map(|(p, _)| *p) else {
                // Everything committed so far has been seen.
                if let Ok(mut p) = self.progress.lock() {
                    let hwm = high_water_mark(self.position.0);
                    let newer = p
                        .pbrt
                        .as_ref()
                        .and_then(|t| t.get_str("_data").ok().map(str::to_string))
                        .is_none_or(|old| hwm.get_str("_data").unwrap_or_default() > old.as_str());
                    if newer {
                        p.pbrt = Some(hwm);
                    }
                }
                return Ok(None);
            };
            self.position = last;
            self.pending.extend(entries);
        }
    }
}
