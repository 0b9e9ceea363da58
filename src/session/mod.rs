//! Logical sessions, multi-document transactions, retryable writes, snapshot reads and
//! causal consistency — the one place every command reaches through the dispatcher.
//!
//! Cairn answers as a router (`msg: "isdbgrid"`) in front of one shard that is itself, so
//! clients see a mongos's rules and messages (see `DESIGN.md` §5).
//!
//! # A command, end to end
//! 1. [`SessionArgs::parse`] reads `lsid`, `txnNumber`, `autocommit`, `startTransaction`,
//!    `readConcern` and `writeConcern` and applies MongoDB's argument checks in MongoDB's
//!    order (`initializeOperationSessionInfo`, then `validateSessionOptions`): which commands
//!    may run in a transaction ([`ALLOWED_IN_TXN`]), which may be retried as retryable writes
//!    ([`RETRYABLE_WRITES`]).
//! 2. [`begin`] gossips the client's `$clusterTime` into the clock, checks the session out of
//!    [`Sessions`] (one command per session at a time: others wait for the checkout), moves
//!    the session's router state (highest `txnNumber`, transaction phase) and decides where the
//!    command reads and writes: a [`target::Target`] — the latest data, a pinned snapshot
//!    (`readConcern: snapshot`), or the session's open storage transaction. The result is an
//!    [`OpCtx`] the command reads through `Invocation::op`.
//! 3. The command runs; write commands consult [`OpCtx::retry`] to skip statements a retryable
//!    write already executed and to record the ones they execute, in the same storage
//!    transaction as their writes (`cairn_storage::sessions`).
//! 4. [`finish`] aborts the transaction when a statement inside it failed (a router aborts on
//!    any statement error; a write error aborts it too), adds `TransientTransactionError`
//!    where MongoDB does, and appends `$clusterTime`, `operationTime` and, inside a
//!    transaction, `recoveryToken`.
//!
//! `commitTransaction`/`abortTransaction` move the phase on; [`reap`] runs in the background:
//! it aborts transactions older than `transactionLifetimeLimitSeconds`, and ends sessions idle
//! for `logicalSessionTimeoutMinutes` (aborting their transactions, killing their cursors,
//! forgetting their retryable-write records).
//!
//! Invariants:
//! - a session is checked out by at most one command; the checkout is an async permit held
//!   for the command's duration, and no `std` lock is held across an `.await`;
//! - a transaction's storage state lives in its [`target::TxnCell`]; after commit or abort the
//!   phase says so and the cell is empty, so no statement can reach a finished transaction;
//! - a session's `txnNumber` never goes back (TransactionTooOld, 225).

pub mod read_concern;
pub mod retry;
pub mod target;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bson::raw::cstr;
use bson::spec::BinarySubtype;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, rawdoc};
use cairn_storage::sessions::Lsid;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::commands::{Command, Parsed, type_name};
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;
use read_concern::{Level, ReadConcern};
use target::{Target, TxnCell};

/// Commands that may run inside a multi-document transaction (MongoDB 7.0's allow-list).
pub const ALLOWED_IN_TXN: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "commitTransaction",
    "create",
    "createIndexes",
    "delete",
    "distinct",
    "find",
    "findAndModify",
    "getMore",
    "insert",
    "killCursors",
    "update",
];

/// Commands that accept a `txnNumber` outside a transaction (retryable writes).
pub const RETRYABLE_WRITES: &[&str] = &["delete", "findAndModify", "insert", "update"];

/// Commands that accept `readConcern: {level: "snapshot"}` outside a transaction.
pub const SNAPSHOT_READS: &[&str] = &["aggregate", "distinct", "find"];

/// The user digest of sessions when authentication is off: SHA-256 of the empty string.
pub use cairn_storage::sessions::NO_AUTH_UID;

/// The shard id a router names in `recoveryToken`.
pub const SHARD_ID: &str = "cairn";

/// MongoDB's default `transactionLifetimeLimitSeconds`.
pub const DEFAULT_TXN_LIFETIME_SECS: u64 = 60;

/// A session as MongoDB prints it in messages: `"<uuid> - <uid base64> -  - "`.
pub fn display_lsid(lsid: &Lsid) -> String {
    format!(
        "{} - 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= -  - ",
        bson::Uuid::from_bytes(*lsid)
    )
}

fn invalid(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::InvalidOptions, msg)
}

fn not_in_txn(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::OperationNotSupportedInTransaction, msg)
}

/// Parses an `lsid` document (`{id: UUID, uid?: BinData}`) as MongoDB's IDL does, under
/// the field path `ctx` (e.g. `OperationSessionInfo.lsid`).
pub fn parse_lsid(v: RawBsonRef<'_>, ctx: &str) -> Result<Lsid, CommandError> {
    if let RawBsonRef::Document(d) = v
        && let Some(lsid) = plain_lsid(d)
    {
        return Ok(lsid);
    }
    parse_lsid_walked(v, ctx)
}

/// The `lsid` every driver sends, `{id: <UUID>}` and nothing else, read straight from its 30
/// bytes; `None` for any other shape (which [`parse_lsid_walked`] reads, a test checks both
/// agree).
fn plain_lsid(d: &RawDocument) -> Option<Lsid> {
    match d.as_bytes() {
        [
            30,
            0,
            0,
            0,
            0x05,
            b'i',
            b'd',
            0,
            16,
            0,
            0,
            0,
            0x04,
            id @ ..,
            0,
        ] => <Lsid>::try_from(id).ok(),
        _ => None,
    }
}

/// [`parse_lsid`] by walking the document, for every shape.
fn parse_lsid_walked(v: RawBsonRef<'_>, ctx: &str) -> Result<Lsid, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(CommandError::wrong_type(ctx, type_name(&v), "object"));
    };
    let mut id = None;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match k.as_str() {
            "id" => id = Some(v),
            "uid" => match v {
                RawBsonRef::Binary(b) if b.bytes == NO_AUTH_UID => {}
                RawBsonRef::Binary(_) => {
                    return Err(CommandError::new(
                        ErrorCode::Unauthorized,
                        "Unauthorized to set user digest in LogicalSessionId",
                    ));
                }
                other => {
                    return Err(CommandError::wrong_type(
                        &format!("{ctx}.uid"),
                        type_name(&other),
                        "binData",
                    ));
                }
            },
            "txnNumber" | "txnUUID" => {
                return Err(invalid(
                    "Cannot specify txnNumber in lsid without specifying txnUUID",
                ));
            }
            other => return Err(CommandError::unknown_field(ctx, other)),
        }
    }
    let id = id.ok_or_else(|| CommandError::missing_field(&format!("{ctx}.id")))?;
    let RawBsonRef::Binary(b) = id else {
        return Err(CommandError::wrong_type(
            &format!("{ctx}.id"),
            type_name(&id),
            "binData",
        ));
    };
    if b.subtype != BinarySubtype::Uuid {
        let sub = match b.subtype {
            BinarySubtype::Generic => "general",
            BinarySubtype::Function => "function",
            BinarySubtype::BinaryOld => "binary (old)",
            BinarySubtype::UuidOld => "uuid (old)",
            BinarySubtype::Md5 => "MD5",
            BinarySubtype::Encrypted => "encrypt",
            _ => "user defined",
        };
        return Err(CommandError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field '{ctx}.id' is the wrong binData type '{sub}', expected type 'UUID'"
            ),
        ));
    }
    <Lsid>::try_from(b.bytes).map_err(|_| {
        CommandError::new(
            ErrorCode::InvalidUUID,
            "uuid must be a 16-byte binary field with UUID (4) subtype",
        )
    })
}

/// Parses a session list (`[{id: UUID, uid?}, …]`, as `endSessions`, `refreshSessions` and
/// `killSessions` take it), naming fields under `ctx` in errors.
pub fn parse_session_list(v: Option<RawBsonRef<'_>>, ctx: &str) -> Result<Vec<Lsid>, CommandError> {
    let v = v.ok_or_else(|| CommandError::missing_field(ctx))?;
    let RawBsonRef::Array(arr) = v else {
        return Err(CommandError::wrong_type(ctx, type_name(&v), "array"));
    };
    let mut out = Vec::new();
    for el in arr {
        let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        out.push(parse_lsid(el, ctx)?);
    }
    Ok(out)
}

/// The session fields of a command, validated.
#[derive(Debug, Clone, Default)]
pub struct SessionArgs {
    /// `lsid.id`.
    pub lsid: Option<Lsid>,
    /// `txnNumber`.
    pub txn_number: Option<i64>,
    /// `autocommit` (only `false` passes validation).
    pub autocommit: bool,
    /// `startTransaction: true`.
    pub start_transaction: bool,
    /// `readConcern`.
    pub read_concern: ReadConcern,
    /// Whether the command carried a `writeConcern`.
    pub write_concern: bool,
}

/// The position of a field [`SessionArgs::parse`] reads in [`SessionFields`] (a `match`: a
/// length switch and a comparison or two).
#[inline(always)]
fn session_slot(name: &str) -> Option<usize> {
    Some(match name {
        "autocommit" => 0,
        "txnNumber" => 1,
        "lsid" => 2,
        "txnRetryCounter" => 3,
        "startTransaction" => 4,
        "writeConcern" => 5,
        _ => return None,
    })
}

/// The fields [`SessionArgs::parse`] reads, picked out of the body's table in one pass
/// instead of a search of the table for each (most are absent): the first occurrence of each,
/// as [`Parsed::find`] answers; any other name is asked of the table.
struct SessionFields<'p, 'a> {
    body: &'p Parsed<'a>,
    found: [Option<RawBsonRef<'a>>; 6],
}

impl<'p, 'a> SessionFields<'p, 'a> {
    fn new(body: &'p Parsed<'a>) -> Self {
        let mut found = [None; 6];
        for (k, v) in body.fields() {
            if let Some(slot @ None) = session_slot(k).and_then(|i| found.get_mut(i)) {
                *slot = Some(*v);
            }
        }
        SessionFields { body, found }
    }

    #[inline(always)]
    fn get(&self, name: &str) -> Option<RawBsonRef<'a>> {
        match session_slot(name) {
            Some(i) => self.found.get(i).copied().flatten(),
            None => self.body.find(name),
        }
    }
}

impl SessionArgs {
    /// Reads and checks the session fields of `body` for `cmd`.
    pub fn parse(cmd: &Command, body: &Parsed<'_>) -> Result<SessionArgs, CommandError> {
        let fields = SessionFields::new(body);
        let get = |f: &str| fields.get(f);
        let name = cmd.name;
        if !cmd.requires_auth {
            if get("autocommit").is_some() {
                return Err(not_in_txn("This command is not supported in transactions"));
            }
            if get("txnNumber").is_some() {
                return Err(CommandError::new(
                    ErrorCode::Location(50889),
                    "It is illegal to provide a txnNumber for this command",
                ));
            }
        }
        let lsid = match get("lsid") {
            Some(v) => Some(parse_lsid(v, "OperationSessionInfo.lsid")?),
            None => None,
        };
        let txn_number = match get("txnNumber") {
            None => None,
            Some(RawBsonRef::Int64(n)) => Some(n),
            Some(RawBsonRef::Int32(n)) => Some(i64::from(n)),
            Some(RawBsonRef::Double(d)) if d.fract() == 0.0 && d.is_finite() => Some(d as i64),
            Some(other) => {
                return Err(CommandError::wrong_type(
                    "OperationSessionInfo.txnNumber",
                    type_name(&other),
                    "long",
                ));
            }
        };
        if txn_number.is_some() && lsid.is_none() {
            return Err(invalid(
                "Transaction number requires a session ID to also be specified",
            ));
        }
        if txn_number.is_some_and(|n| n < 0) {
            return Err(invalid("Transaction number cannot be negative"));
        }
        if get("txnRetryCounter").is_some() {
            return Err(invalid(
                "txnRetryCounter is only allowed for internal clients",
            ));
        }
        let autocommit = match get("autocommit") {
            None => None,
            Some(RawBsonRef::Boolean(b)) => Some(b),
            Some(other) => {
                return Err(CommandError::wrong_type(
                    "OperationSessionInfo.autocommit",
                    type_name(&other),
                    "bool",
                ));
            }
        };
        if autocommit.is_some() && txn_number.is_none() {
            return Err(invalid(
                "'autocommit' field requires a transaction number to also be specified",
            ));
        }
        if autocommit == Some(true) {
            return Err(invalid("Specifying autocommit=true is not allowed."));
        }
        let start = match get("startTransaction") {
            None => None,
            Some(RawBsonRef::Boolean(b)) => Some(b),
            Some(other) => {
                return Err(CommandError::wrong_type(
                    "OperationSessionInfo.startTransaction",
                    type_name(&other),
                    "bool",
                ));
            }
        };
        if start.is_some() && autocommit.is_none() {
            return Err(invalid(
                "'startTransaction' field requires 'autocommit' field to also be specified",
            ));
        }
        if start == Some(false) {
            return Err(invalid("Specifying startTransaction=false is not allowed."));
        }
        if autocommit.is_some() {
            if name == "count" {
                return Err(not_in_txn(
                    "Cannot run 'count' in a multi-document transaction. Please see http://dochub.mongodb.org/core/transaction-count for a recommended alternative.",
                ));
            }
            if !ALLOWED_IN_TXN.contains(&name) {
                return Err(not_in_txn(format!(
                    "Cannot run '{name}' in a multi-document transaction."
                )));
            }
        } else if txn_number.is_some() && !RETRYABLE_WRITES.contains(&name) {
            return Err(CommandError::new(
                ErrorCode::Location(50768),
                format!(
                    "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and {name} is not a retryable write command."
                ),
            ));
        }
        if start == Some(true) {
            let what = match name {
                "killCursors" => Some(
                    "Cannot run killCursors as the first operation in a multi-document transaction.",
                ),
                "commitTransaction" => Some("Cannot start a transaction with a commit"),
                "abortTransaction" => Some("Cannot start a transaction with an abort"),
                _ => None,
            };
            if let Some(m) = what {
                return Err(not_in_txn(m));
            }
        }
        let read_concern = ReadConcern::from_command(body)?;
        let write_concern = get("writeConcern").is_some();
        if autocommit.is_some()
            && write_concern
            && !matches!(name, "commitTransaction" | "abortTransaction")
        {
            return Err(invalid(
                "writeConcern is not allowed within a multi-statement transaction",
            ));
        }
        Ok(SessionArgs {
            lsid,
            txn_number,
            autocommit: autocommit.is_some(),
            start_transaction: start == Some(true),
            read_concern,
            write_concern,
        })
    }
}

/// What a transaction is doing, as its session records it.
#[derive(Debug, Clone)]
pub enum Phase {
    /// No multi-document transaction for the current number (none yet, or a retryable
    /// write).
    Idle,
    /// Open.
    Active(Arc<TxnCell>, TxnInfo),
    /// Committed (commit may be retried).
    Committed,
    /// Aborted (explicitly, by an error, or by expiry).
    Aborted,
}

/// Facts about an open transaction.
#[derive(Debug, Clone)]
pub struct TxnInfo {
    /// When it started.
    pub started: Instant,
    /// Its read concern level (`local` by default).
    pub level: Level,
}

/// A session's state.
#[derive(Debug)]
pub struct SessionState {
    /// Last use, for `$listLocalSessions` and expiry.
    pub last_use: SystemTime,
    /// Last use, monotonic.
    pub last_use_instant: Instant,
    /// The highest `txnNumber` seen (-1: none).
    pub txn_number: i64,
    /// Whether the current number is a multi-document transaction, and where it stands.
    pub phase: Phase,
    /// `endSessions` was called: the session goes at the next refresh.
    pub ended: bool,
}

/// One logical session.
#[derive(Debug)]
pub struct Session {
    /// Its id.
    pub lsid: Lsid,
    gate: Arc<Semaphore>,
    /// Its state (locked briefly, never across an `.await`).
    pub state: Mutex<SessionState>,
    /// The users that first used it with authentication on (only they may use it).
    pub owner: std::sync::OnceLock<Vec<crate::auth::UserName>>,
}

impl Session {
    fn lock(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Every session the server knows.
#[derive(Debug)]
pub struct Sessions {
    /// Hashed by foldhash (randomly seeded): SipHash's setup costs more than the lookup, on
    /// every command with a session.
    map: Mutex<HashMap<Lsid, Arc<Session>, foldhash::fast::RandomState>>,
    /// `transactionLifetimeLimitSeconds`.
    pub txn_lifetime_secs: AtomicU64,
    /// `logicalSessionTimeoutMinutes`.
    pub timeout: Duration,
}

impl Sessions {
    /// An empty registry.
    pub fn new(timeout: Duration) -> Sessions {
        Sessions {
            map: Mutex::new(HashMap::default()),
            txn_lifetime_secs: AtomicU64::new(DEFAULT_TXN_LIFETIME_SECS),
            timeout,
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Lsid, Arc<Session>, foldhash::fast::RandomState>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session, created on first use.
    pub fn get_or_create(&self, lsid: Lsid) -> Arc<Session> {
        self.lock()
            .entry(lsid)
            .or_insert_with(|| {
                Arc::new(Session {
                    lsid,
                    gate: Arc::new(Semaphore::new(1)),
                    state: Mutex::new(SessionState {
                        last_use: SystemTime::now(),
                        last_use_instant: Instant::now(),
                        txn_number: -1,
                        phase: Phase::Idle,
                        ended: false,
                    }),
                    owner: std::sync::OnceLock::new(),
                })
            })
            .clone()
    }

    /// The session, if known.
    pub fn get(&self, lsid: &Lsid) -> Option<Arc<Session>> {
        self.lock().get(lsid).cloned()
    }

    /// Every session.
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.lock().values().cloned().collect()
    }

    /// Forgets a session (it must have no open transaction any more).
    pub fn remove(&self, lsid: &Lsid) {
        self.lock().remove(lsid);
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A retryable write in progress: statements are recorded under this session and number.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// The session.
    pub lsid: Lsid,
    /// The write's transaction number.
    pub txn_number: i64,
    /// The session had not used this number before the command: nothing can have executed.
    pub fresh: bool,
}

/// What the dispatcher set up for one command (see the module doc).
#[derive(Debug, Default)]
pub struct OpCtx {
    /// Where reads and writes go.
    pub target: Target,
    /// The validated session fields.
    pub args: SessionArgs,
    /// The session, checked out for this command.
    pub session: Option<Arc<Session>>,
    /// Set for a retryable write.
    pub retry: Option<Retry>,
    /// For snapshot reads outside transactions: the cluster time read at (replies carry it as
    /// `atClusterTime`).
    pub at_cluster_time: Option<Timestamp>,
    permit: Option<OwnedSemaphorePermit>,
}

impl OpCtx {
    /// The session id, if the command has one.
    pub fn lsid(&self) -> Option<Lsid> {
        self.args.lsid
    }

    /// Whether the command runs inside a multi-document transaction.
    pub fn in_txn(&self) -> bool {
        self.target.in_txn()
    }

    /// The read concern level of the command's transaction, if it runs in one.
    pub fn txn_level(&self) -> Option<Level> {
        let session = self.session.as_ref()?;
        let st = session.lock();
        match &st.phase {
            Phase::Active(_, info) if self.in_txn() => Some(info.level),
            _ => None,
        }
    }

    /// Refuses DDL (`create`, `createIndexes`) in a transaction whose read concern is not
    /// `local`, as MongoDB does.
    pub fn check_txn_ddl(&self, cmd: &str) -> Result<(), CommandError> {
        match self.txn_level() {
            Some(l) if l != Level::Local => Err(invalid(format!(
                "Command {cmd} does not support this transaction's {{ readConcern: {{ level: \"{}\", provenance: \"clientSupplied\" }} }} :: caused by :: read concern not supported",
                l.name()
            ))),
            _ => Ok(()),
        }
    }

    /// The transaction number of the command's transaction, if any.
    pub fn txn_number(&self) -> Option<i64> {
        self.target.txn().map(|c| c.number)
    }
}

fn timestamp_doc(t: Timestamp) -> String {
    format!("{{ ts: Timestamp({}, {}) }}", t.time, t.increment)
}

/// Advances the clock to a client's gossiped `$clusterTime` (validated as MongoDB validates
/// it; signatures are not checked because authentication is off).
fn gossip_in(server: &ServerState, body: &Parsed<'_>) -> Result<(), CommandError> {
    let Some(v) = body.find("$clusterTime") else {
        return Ok(());
    };
    let RawBsonRef::Document(d) = v else {
        return Err(CommandError::wrong_type(
            "$clusterTime",
            type_name(&v),
            "object",
        ));
    };
    let t = match leading_cluster_time(d) {
        Some(t) => t,
        None => cluster_time_field(d)?,
    };
    // A time the clock has reached (the common case: a driver gossips back the time of its
    // last reply) leaves it as it is, and is within the drift of the wall clock as every
    // value the clock took was (its own ticks read the wall clock; gossip is checked here).
    let now = server.store.clock.last();
    if (t.time, t.increment) <= (now.time, now.increment) {
        return Ok(());
    }
    let wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    const MAX_DRIFT_SECS: u64 = 365 * 24 * 3600;
    if u64::from(t.time) > wall + MAX_DRIFT_SECS {
        return Err(CommandError::new(
            ErrorCode::Location(205),
            format!(
                "New $clusterTime, {}, is too far from this node's wall clock time, {wall}.",
                t.time
            ),
        ));
    }
    server.store.clock.advance_to(t);
    Ok(())
}

/// The `clusterTime` of a gossiped `$clusterTime` document when it is the first field (as
/// drivers send it), read straight from the bytes; `None` for any other shape, which
/// [`cluster_time_field`] reads (a test checks both agree).
fn leading_cluster_time(d: &RawDocument) -> Option<Timestamp> {
    let rest = d.as_bytes().get(4..)?.strip_prefix(b"\x11clusterTime\0")?;
    // Eight bytes of value, then at least the document's terminator.
    if rest.len() < 9 {
        return None;
    }
    let (increment, time) = (rest.get(..4)?, rest.get(4..8)?);
    Some(Timestamp {
        time: u32::from_le_bytes(time.try_into().ok()?),
        increment: u32::from_le_bytes(increment.try_into().ok()?),
    })
}

/// The `clusterTime` field of a gossiped `$clusterTime` document, or MongoDB's error.
fn cluster_time_field(d: &RawDocument) -> Result<Timestamp, CommandError> {
    match d.get("clusterTime") {
        Ok(Some(RawBsonRef::Timestamp(t))) => Ok(t),
        Ok(Some(other)) => Err(CommandError::new(
            ErrorCode::TypeMismatch,
            format!(
                "\"clusterTime\" had the wrong type. Expected timestamp, found {}",
                type_name(&other)
            ),
        )),
        _ => Err(CommandError::new(
            ErrorCode::NoSuchKey,
            "Missing expected field \"clusterTime\"",
        )),
    }
}

fn check_not_future(server: &ServerState, t: Timestamp, which: &str) -> Result<(), CommandError> {
    let now = server.store.clock.last();
    if (t.time, t.increment) > (now.time, now.increment) {
        return Err(invalid(format!(
            "readConcern {which} value must not be greater than the current clusterTime. Requested clusterTime: {}; current clusterTime: {}",
            timestamp_doc(t),
            timestamp_doc(now)
        )));
    }
    Ok(())
}

fn snapshot_not_supported(name: &str, rc: &ReadConcern) -> CommandError {
    invalid(format!(
        "Command {name} does not support {} :: caused by :: read concern not supported",
        rc.display()
    ))
}

/// Sets up a command's session context (step 2 of the module doc). Errors here are
/// pre-execution checks: they never abort an open transaction.
pub async fn begin(
    server: &Arc<ServerState>,
    cmd: &Command,
    db: &str,
    parsed: &Parsed<'_>,
) -> Result<OpCtx, CommandError> {
    let args = SessionArgs::parse(cmd, parsed)?;
    gossip_in(server, parsed)?;
    let body = parsed.body();
    let name = cmd.name;
    let rc = args.read_concern;
    if let Some(t) = rc.after_cluster_time {
        check_not_future(server, t, "afterClusterTime")?;
    }
    let mut op = OpCtx {
        args: args.clone(),
        ..OpCtx::default()
    };
    let Some(lsid) = args.lsid else {
        snapshot_outside_txn(server, &mut op, name)?;
        return Ok(op);
    };
    let session = server.sessions.get_or_create(lsid);
    let permit = session
        .gate
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| CommandError::new(ErrorCode::Interrupted, "session closed"))?;
    op.permit = Some(permit);
    op.session = Some(session.clone());
    let first_use = session.lock().txn_number < 0;
    let durable = match args.txn_number {
        Some(_) if first_use => {
            let store = server.store.clone();
            crate::blocking::run(move || Ok(store.session_record(&lsid)?)).await?
        }
        _ => None,
    };
    let route = {
        let mut st = session.lock();
        route(server, &session, &mut st, &mut op, name, db, body, durable)?
    };
    let Route::Start { n, level, at } = route else {
        return Ok(op);
    };
    let store = server.store.clone();
    let state = crate::blocking::run(move || {
        let mut state = match at {
            Some(at) => store.begin_txn_at(at)?,
            None => store.begin_txn()?,
        };
        state.set_origin(lsid, n);
        Ok(state)
    })
    .await?;
    let cell = Arc::new(TxnCell::new(server.store.clone(), n, state));
    session.lock().phase = Phase::Active(
        cell.clone(),
        TxnInfo {
            started: Instant::now(),
            level,
        },
    );
    op.target = Target::Txn(cell);
    Ok(op)
}

/// What [`route`] decided.
enum Route {
    /// The context is ready.
    Ready,
    /// A new transaction must be started.
    Start {
        n: i64,
        level: Level,
        at: Option<Timestamp>,
    },
}

/// The router's session state machine for one command (synchronous: the session's state is
/// locked throughout).
#[allow(clippy::too_many_arguments)]
fn route(
    server: &ServerState,
    session: &Session,
    st: &mut SessionState,
    op: &mut OpCtx,
    name: &str,
    db: &str,
    body: &RawDocument,
    durable: Option<cairn_storage::sessions::SessionRecord>,
) -> Result<Route, CommandError> {
    let lsid = session.lsid;
    let args = op.args.clone();
    let rc = args.read_concern;
    st.last_use = SystemTime::now();
    st.last_use_instant = Instant::now();
    st.ended = false;
    if let Some(rec) = durable {
        st.txn_number = st.txn_number.max(rec.txn_number);
        if rec.committed && st.txn_number == rec.txn_number {
            st.phase = Phase::Committed;
        }
    }
    let Some(n) = args.txn_number else {
        snapshot_outside_txn(server, op, name)?;
        return Ok(Route::Ready);
    };
    let too_old = |cur: i64| {
        CommandError::new(
            ErrorCode::TransactionTooOld,
            format!(
                "txnNumber {n} is less than last txnNumber {cur} seen in session {}",
                display_lsid(&lsid)
            ),
        )
    };
    if n < st.txn_number {
        return Err(too_old(st.txn_number));
    }
    if !args.autocommit {
        // A retryable write.
        if rc.is_snapshot() {
            return Err(snapshot_not_supported(name, &rc));
        }
        if n == st.txn_number && !matches!(st.phase, Phase::Idle) {
            return Err(CommandError::new(
                ErrorCode::IncompleteTransactionHistory,
                "Cannot retry a retryable write that has been converted into a transaction",
            ));
        }
        let fresh = n > st.txn_number;
        if fresh {
            supersede(server, session, st);
            st.txn_number = n;
            st.phase = Phase::Idle;
        }
        op.retry = Some(Retry {
            lsid,
            txn_number: n,
            fresh,
        });
        return Ok(Route::Ready);
    }
    if db == "config" {
        return Err(not_in_txn(
            "Cannot run command against the config database in a transaction.",
        ));
    }
    if args.start_transaction {
        if n == st.txn_number {
            return Err(CommandError::new(
                ErrorCode::ConflictingOperationInProgress,
                format!(
                    "txnNumber {n} txnRetryCounter 0 for session {} already started",
                    display_lsid(&lsid)
                ),
            ));
        }
        let level = rc.level.unwrap_or(Level::Local);
        if !matches!(level, Level::Local | Level::Majority | Level::Snapshot) {
            return Err(invalid(
                "The first command in a transaction cannot specify a readConcern level other than local, majority, or snapshot",
            ));
        }
        supersede(server, session, st);
        if let Some(at) = rc.at_cluster_time {
            check_not_future(server, at, "atClusterTime")?;
        }
        st.txn_number = n;
        st.phase = Phase::Aborted;
        return Ok(Route::Start {
            n,
            level,
            at: rc.at_cluster_time,
        });
    }
    let aborted = || {
        CommandError::new(
            ErrorCode::NoSuchTransaction,
            format!("Transaction with {{ txnNumber: {n}, txnRetryCounter: 0 }} has been aborted."),
        )
    };
    if n > st.txn_number || matches!(st.phase, Phase::Idle) {
        if name == "commitTransaction" {
            // A router that never saw this transaction recovers the decision from the
            // shard named in the recovery token.
            return match body.get("recoveryToken") {
                Ok(Some(RawBsonRef::Document(t))) => {
                    if t.get("recoveryShardId").ok().flatten().is_none() {
                        return Err(CommandError::new(
                            ErrorCode::NoSuchTransaction,
                            "Recovery token is empty, meaning the transaction only performed reads and can be safely retried",
                        ));
                    }
                    Err(aborted())
                }
                _ => Err(CommandError::new(
                    ErrorCode::Location(50940),
                    "Cannot recover the transaction decision without a recoveryToken",
                )),
            };
        }
        return Err(CommandError::new(
            ErrorCode::NoSuchTransaction,
            format!(
                "cannot continue txnId {} for session {} with txnRetryCounter 0",
                st.txn_number,
                display_lsid(&lsid)
            ),
        ));
    }
    match &st.phase {
        Phase::Active(cell, _) => {
            if rc.present && name != "commitTransaction" && name != "abortTransaction" {
                return Err(invalid(
                    "Only the first command in a transaction may specify a readConcern",
                ));
            }
            op.target = Target::Txn(cell.clone());
            Ok(Route::Ready)
        }
        Phase::Committed => {
            if name == "commitTransaction" {
                // Retrying a commit is idempotent; the command answers from the phase.
                return Ok(Route::Ready);
            }
            Err(CommandError::new(
                ErrorCode::TransactionCommitted,
                format!(
                    "Transaction with {{ txnNumber: {n}, txnRetryCounter: 0 }} has been committed."
                ),
            ))
        }
        Phase::Aborted | Phase::Idle => Err(aborted()),
    }
}

/// A new transaction number replaces an open transaction: it is aborted.
fn supersede(server: &ServerState, session: &Session, st: &mut SessionState) {
    if let Phase::Active(cell, _) = &st.phase {
        abort_cell(server, session.lsid, cell);
        st.phase = Phase::Aborted;
    }
}

/// Aborts a transaction's storage state (if it is not in use) and kills its cursors.
pub fn abort_cell(server: &ServerState, lsid: Lsid, cell: &TxnCell) {
    if let Some(state) = cell.take() {
        server.store.abort_txn(state);
    }
    server.cursors.kill_transaction(&lsid, cell.number);
}

fn snapshot_outside_txn(
    server: &ServerState,
    op: &mut OpCtx,
    name: &str,
) -> Result<(), CommandError> {
    let rc = op.args.read_concern;
    if !rc.is_snapshot() {
        return Ok(());
    }
    if !SNAPSHOT_READS.contains(&name) {
        return Err(snapshot_not_supported(name, &rc));
    }
    if let Some(at) = rc.at_cluster_time {
        check_not_future(server, at, "atClusterTime")?;
    }
    let (read, ts) = server.store.snapshot_at(rc.at_cluster_time)?;
    op.target = Target::Snapshot(read, ts);
    op.at_cluster_time = Some(ts);
    Ok(())
}

/// Whether an error gets `TransientTransactionError` (only for requests inside a
/// transaction): write conflicts, lock and snapshot errors — on any command, commit and
/// abort included —, NoSuchTransaction (on commit/abort only without a write concern error),
/// and for statements other than commit/abort the retriable codes.
pub fn is_transient(code: i32, commit_or_abort: bool, has_wce: bool) -> bool {
    if commit_or_abort {
        return matches!(code, 112 | 24 | 239 | 246 | 250 | 267 | 272) || (code == 251 && !has_wce);
    }
    matches!(
        code,
        112 | 24
            | 239
            | 246
            | 250
            | 251
            | 267
            | 272
            | 6
            | 7
            | 89
            | 91
            | 134
            | 189
            | 262
            | 9001
            | 10107
            | 11600
            | 11602
            | 13435
            | 13436
    )
}

/// The change stream labels: `NonResumableChangeStreamError` for ChangeStreamFatalError
/// (280) and ChangeStreamHistoryLost (286); `ResumableChangeStreamError` for the retriable
/// codes on an `aggregate` that opens a change stream.
fn change_stream_labels(body: &RawDocument, e: &mut CommandError) {
    let code = e.code.code();
    if matches!(code, 280 | 286) {
        if !e.labels.contains(&"NonResumableChangeStreamError") {
            e.labels.push("NonResumableChangeStreamError");
        }
        return;
    }
    let opens_stream = matches!(body.get("pipeline"), Ok(Some(RawBsonRef::Array(p)))
    if p.into_iter().next().and_then(|s| s.ok()).is_some_and(|s| {
        matches!(s, RawBsonRef::Document(d) if d.get("$changeStream").ok().flatten().is_some())
    }));
    if opens_stream {
        label_resumable_change_stream_error(e);
    }
}

/// Adds `ResumableChangeStreamError` to an error of a command on a change stream (its
/// `aggregate`, or a `getMore` of its cursor) when the code lets a driver resume.
pub fn label_resumable_change_stream_error(e: &mut CommandError) {
    let resumable = matches!(
        e.code.code(),
        6 | 7
            | 89
            | 91
            | 133
            | 134
            | 150
            | 189
            | 234
            | 262
            | 9001
            | 10107
            | 11600
            | 11602
            | 13388
            | 13435
            | 13436
    );
    if resumable && !e.labels.contains(&"ResumableChangeStreamError") {
        e.labels.push("ResumableChangeStreamError");
    }
}

/// Adds `TransientTransactionError` to an error reply of a request inside a transaction
/// (`txnNumber` and `autocommit` present) where MongoDB does ([`is_transient`]); requests
/// outside transactions never get it.
pub fn label_error(body: &RawDocument, e: &mut CommandError) {
    change_stream_labels(body, e);
    let get = |f: &str| body.get(f).ok().flatten();
    if get("autocommit").is_none() || get("txnNumber").is_none() {
        e.labels.retain(|l| *l != "TransientTransactionError");
        return;
    }
    let name = body
        .iter()
        .next()
        .and_then(|r| r.ok())
        .map(|(k, _)| k.as_str())
        .unwrap_or_default();
    let commit_or_abort = matches!(name, "commitTransaction" | "abortTransaction");
    let has_wce = e
        .extra
        .as_ref()
        .is_some_and(|x| x.get("writeConcernError").ok().flatten().is_some());
    if is_transient(e.code.code(), commit_or_abort, has_wce)
        && !e.labels.contains(&"TransientTransactionError")
    {
        e.labels.push("TransientTransactionError");
    }
}

/// The first write error of a reply when it is transient (see [`is_transient`]), as a
/// command error.
fn transient_write_error(body: &RawDocument) -> Option<CommandError> {
    let Ok(Some(RawBsonRef::Array(errors))) = body.get("writeErrors") else {
        return None;
    };
    let first = errors.into_iter().next()?.ok()?;
    let RawBsonRef::Document(e) = first else {
        return None;
    };
    let code = e.get_i32("code").ok()?;
    if !is_transient(code, false, false) {
        return None;
    }
    Some(CommandError::new(
        ErrorCode::from_code(code),
        e.get_str("errmsg").unwrap_or_default(),
    ))
}

/// Finishes a command's session work (step 4 of the module doc): on an error or a write
/// error inside a transaction the transaction is aborted, and the recovery token is added.
/// Returns the fields to append to a successful reply after `ok` (`None`: none).
pub fn finish(
    server: &ServerState,
    op: &mut OpCtx,
    cmd: &Command,
    result: &mut Result<RawDocumentBuf, CommandError>,
) -> Option<RawDocumentBuf> {
    let mut tail = None;
    let in_txn_request = op.args.autocommit;
    let commit_or_abort = matches!(cmd.name, "commitTransaction" | "abortTransaction");
    if let (Some(cell), Some(session)) = (op.target.txn().cloned(), op.session.clone()) {
        // Inside a transaction a transient error (a write conflict) fails the whole command,
        // labelled for a retry, rather than being one statement's write error.
        if let Ok(body) = result
            && let Some(e) = transient_write_error(body)
        {
            *result = Err(e);
        }
        let failed = match result {
            Err(_) => true,
            Ok(body) => body.get("writeErrors").ok().flatten().is_some(),
        };
        let mut st = session.lock();
        let current = matches!(&st.phase, Phase::Active(c, _) if Arc::ptr_eq(c, &cell));
        if !commit_or_abort && (failed || !current) {
            // The statement failed (or the transaction expired while it ran): abort.
            abort_cell(server, session.lsid, &cell);
            if current {
                st.phase = Phase::Aborted;
            }
        }
    }
    if in_txn_request {
        let wrote = op.target.txn().map(|c| c.writes() > 0).unwrap_or(true);
        let token = if wrote || commit_or_abort {
            rawdoc! {"recoveryShardId": SHARD_ID}
        } else {
            rawdoc! {}
        };
        let mut fields = RawDocumentBuf::new();
        fields.append(cstr!("recoveryToken"), token);
        tail = Some(fields);
    }
    op.permit = None;
    tail
}

/// `$clusterTime` and `operationTime` for a reply.
pub fn gossip_out(server: &ServerState, op_time: Option<Timestamp>) -> RawDocumentBuf {
    let mut out = Vec::with_capacity(128);
    let start = cairn_wire::doc_writer::open(&mut out);
    write_gossip(&mut out, server, op_time);
    // (Two fixed-size elements: far below the BSON size limit, so still a document.)
    let _ = cairn_wire::doc_writer::close(&mut out, start);
    RawDocumentBuf::from_bytes(out).unwrap_or_default()
}

/// Writes the elements `$clusterTime` and `operationTime` (as [`gossip_out`] gives them) at
/// the end of `out`, the unterminated elements of a document being written. Every reply
/// carries them, so the `$clusterTime` document is a template built once, copied with the
/// time written in.
pub fn write_gossip(out: &mut Vec<u8>, server: &ServerState, op_time: Option<Timestamp>) {
    static TEMPLATE: std::sync::OnceLock<RawDocumentBuf> = std::sync::OnceLock::new();
    let template = TEMPLATE.get_or_init(|| {
        rawdoc! {
            "clusterTime": Timestamp { time: 0, increment: 0 },
            "signature": {
                "hash": bson::Binary { subtype: BinarySubtype::Generic, bytes: vec![0u8; 20] },
                "keyId": 0i64,
            },
        }
    });
    let now = server.store.clock.last();
    write_times(out, template, now, op_time.unwrap_or(now));
}

/// A timestamp's eight value bytes: the increment, then the seconds (each little-endian).
fn timestamp_bytes(t: Timestamp) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&t.increment.to_le_bytes());
    b[4..].copy_from_slice(&t.time.to_le_bytes());
    b
}

/// [`write_gossip`] for given times.
fn write_times(out: &mut Vec<u8>, template: &RawDocument, now: Timestamp, op_time: Timestamp) {
    /// Where the template's `clusterTime` value starts: length, type byte, `clusterTime\0`.
    const TIME_AT: usize = 4 + 1 + 12;
    out.push(bson::spec::ElementType::EmbeddedDocument as u8);
    out.extend_from_slice(b"$clusterTime\0");
    let at = out.len() + TIME_AT;
    out.extend_from_slice(template.as_bytes());
    if let Some(time) = out.get_mut(at..at + 8) {
        time.copy_from_slice(&timestamp_bytes(now));
    }
    out.push(bson::spec::ElementType::Timestamp as u8);
    out.extend_from_slice(b"operationTime\0");
    out.extend_from_slice(&timestamp_bytes(op_time));
}

/// Background work: aborts transactions past `transactionLifetimeLimitSeconds` and ends
/// sessions idle longer than the session timeout (or ended by `endSessions`, at the next
/// refresh), with their transactions, cursors and retryable-write records.
pub fn reap(server: &ServerState, refresh: bool) {
    let limit = Duration::from_secs(server.sessions.txn_lifetime_secs.load(Ordering::Relaxed));
    let timeout = server.sessions.timeout;
    for session in server.sessions.all() {
        let mut st = session.lock();
        if let Phase::Active(cell, info) = &st.phase
            && info.started.elapsed() > limit
        {
            tracing::info!(
                id = 5116400,
                lsid = %bson::Uuid::from_bytes(session.lsid),
                txn_number = cell.number,
                "Aborting transaction because it has been running for longer than 'transactionLifetimeLimitSeconds'"
            );
            abort_cell(server, session.lsid, cell);
            st.phase = Phase::Aborted;
        }
        let idle = st.last_use_instant.elapsed() > timeout;
        if idle || (refresh && st.ended) {
            if let Phase::Active(cell, _) = &st.phase {
                abort_cell(server, session.lsid, cell);
            }
            st.phase = Phase::Aborted;
            drop(st);
            server.cursors.kill_session(&session.lsid);
            server.sessions.remove(&session.lsid);
            if idle {
                let _ = server.store.forget_session(&session.lsid);
            }
        }
    }
    if refresh {
        let cutoff = SystemTime::now()
            .checked_sub(timeout)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        if let Ok(stale) = server.store.stale_sessions(cutoff) {
            for lsid in stale {
                if server.sessions.get(&lsid).is_none() {
                    let _ = server.store.forget_session(&lsid);
                }
            }
        }
    }
}

/// Kills sessions now (`killSessions` and friends): aborts their transactions, kills their
/// cursors, and forgets them.
pub fn kill(server: &ServerState, lsids: &[Lsid]) {
    for lsid in lsids {
        if let Some(session) = server.sessions.get(lsid) {
            let mut st = session.lock();
            if let Phase::Active(cell, _) = &st.phase {
                abort_cell(server, *lsid, cell);
                st.phase = Phase::Aborted;
            }
        }
        server.cursors.kill_session(lsid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `doc` and each copy of it with one byte of its body (length and terminator kept)
    /// replaced by one of `values`: the inputs of the shortcut-against-walk tests.
    fn one_byte_variants(doc: &[u8], values: &[u8]) -> Vec<Vec<u8>> {
        let mut variants = vec![doc.to_vec()];
        for i in 4..doc.len() - 1 {
            for &b in values {
                let mut m = doc.to_vec();
                m[i] = b;
                variants.push(m);
            }
        }
        variants
    }

    #[test]
    fn leading_cluster_time_agrees_with_the_field() {
        let docs = [
            rawdoc! {
                "clusterTime": Timestamp { time: 1_700_000_000, increment: 9 },
                "signature": {
                    "hash": bson::Binary { subtype: BinarySubtype::Generic, bytes: vec![0u8; 20] },
                    "keyId": 0i64,
                },
            },
            rawdoc! {"clusterTime": Timestamp { time: 5, increment: 6 }},
            rawdoc! {"signature": 1, "clusterTime": Timestamp { time: 5, increment: 6 }},
            rawdoc! {"clusterTime": 5i64},
        ];
        let mut fast = 0;
        for d in &docs {
            for bytes in one_byte_variants(d.as_bytes(), &[0u8, 1, 0x11, 0x12, b'c', b'T', 0xff]) {
                let Ok(doc) = RawDocument::from_bytes(&bytes) else {
                    continue;
                };
                if let Some(t) = leading_cluster_time(doc) {
                    fast += 1;
                    assert_eq!(cluster_time_field(doc).ok(), Some(t), "{bytes:?}");
                }
            }
        }
        assert!(fast > 2, "the direct read took the driver's shape");
    }

    #[test]
    fn plain_lsid_agrees_with_the_walk() {
        let uuid = |subtype, n: usize| bson::Binary {
            subtype,
            bytes: (1..=n as u8).collect(),
        };
        let docs = [
            rawdoc! {"id": uuid(BinarySubtype::Uuid, 16)},
            rawdoc! {"id": uuid(BinarySubtype::Uuid, 15)},
            rawdoc! {"id": uuid(BinarySubtype::UuidOld, 16)},
            rawdoc! {"id": uuid(BinarySubtype::Uuid, 16), "uid": uuid(BinarySubtype::Generic, 32)},
            rawdoc! {"id": uuid(BinarySubtype::Uuid, 16), "x": 1},
            rawdoc! {"ie": uuid(BinarySubtype::Uuid, 16)},
            rawdoc! {"id": "not binary"},
        ];
        let describe = |r: Result<Lsid, CommandError>| r.map_err(|e| (e.code.code(), e.message));
        let mut fast = 0;
        for d in &docs {
            let bytes_tried = [0u8, 1, 2, 3, 4, 5, 0x10, b'i', b'd', 0xff];
            for bytes in one_byte_variants(d.as_bytes(), &bytes_tried) {
                let Ok(doc) = RawDocument::from_bytes(&bytes) else {
                    continue;
                };
                let v = RawBsonRef::Document(doc);
                if plain_lsid(doc).is_some() {
                    fast += 1;
                }
                assert_eq!(
                    describe(parse_lsid(v, "ctx")),
                    describe(parse_lsid_walked(v, "ctx")),
                    "{bytes:?}"
                );
            }
        }
        assert!(fast > 1, "the direct read took the driver's shape");
    }

    /// The one-pass table answers as the body's table: first occurrences, absent fields.
    #[test]
    fn session_fields_answer_as_the_table() {
        let body = rawdoc! {
            "insert": "c", "txnNumber": 5_i64, "lsid": {"id": 1}, "txnNumber": 6_i64,
            "autocommit": false, "writeConcern": {"w": 1}, "$db": "d", "lsid": 2,
        };
        let parsed = Parsed::parse(&body);
        let fields = SessionFields::new(&parsed);
        for name in [
            "autocommit",
            "txnNumber",
            "lsid",
            "txnRetryCounter",
            "startTransaction",
            "writeConcern",
            "insert",
            "$db",
            "readConcern",
            "",
        ] {
            assert_eq!(fields.get(name), parsed.find(name), "{name}");
        }
        assert_eq!(fields.get("txnNumber"), Some(RawBsonRef::Int64(5)));
    }

    #[test]
    fn gossip_from_the_template_is_the_documents() {
        let template = rawdoc! {
            "clusterTime": Timestamp { time: 0, increment: 0 },
            "signature": {
                "hash": bson::Binary { subtype: BinarySubtype::Generic, bytes: vec![0u8; 20] },
                "keyId": 0i64,
            },
        };
        let now = Timestamp {
            time: 1_700_000_000,
            increment: 7,
        };
        let op = Timestamp {
            time: 1_600_000_000,
            increment: 3,
        };
        let mut out = rawdoc! {"ok": 1.0}.into_bytes();
        out.pop();
        write_times(&mut out, &template, now, op);
        cairn_wire::doc_writer::close(&mut out, 0).unwrap();
        let expected = rawdoc! {
            "ok": 1.0,
            "$clusterTime": {
                "clusterTime": now,
                "signature": {
                    "hash": bson::Binary { subtype: BinarySubtype::Generic, bytes: vec![0u8; 20] },
                    "keyId": 0i64,
                },
            },
            "operationTime": op,
        };
        assert_eq!(out, expected.as_bytes());
    }
}
