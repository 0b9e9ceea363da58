//! Fail points: named hooks in the server that tests switch on to make it misbehave on
//! purpose (`configureFailPoint`, a test command), as MongoDB's drivers' own test suites
//! expect.
//!
//! # Map
//! - [`FailPoint`]: one hook — its [`Mode`] (`off`, `alwaysOn`, `{times: n}`, `{skip: n}`,
//!   `{activationProbability: p}`), its `data` document, and how many times it has fired
//!   (`timesEntered`, which `configureFailPoint` reports as `count` and `waitForFailPoint`
//!   waits on).
//! - [`get`]: the process-wide registry of the fail points Cairn has ([`NAMES`]), as MongoDB
//!   keeps one global registry.
//! - [`fail_command`] / [`write_concern_error`]: MongoDB's `failCommand`, evaluated by the
//!   dispatcher for every command: it may block the command (`blockConnection` +
//!   `blockTimeMS`), close the connection (`closeConnection`), fail it (`errorCode`,
//!   `errorExtraInfo`), override its error labels (`errorLabels`, `[]` suppresses them) or add
//!   a `writeConcernError` to a successful reply; `failCommands`, `appName`, `namespace`,
//!   `threadName` and `failInternalCommands` select the commands it applies to.
//! - The other hooks are evaluated where MongoDB evaluates them: `maxTimeAlwaysTimeOut` in
//!   [`crate::deadline::check`], `failGetMoreAfterCursorCheckout` in `getMore`,
//!   `onPrimaryTransactionalWrite` by the dispatcher around retryable writes.
//!
//! Invariants: evaluating a fail point that is off costs one atomic load; a selection
//! predicate that rejects a command neither counts as an entry nor uses up a `times`/`skip`
//! count (as in MongoDB); the mode and data change atomically under the point's mutex, which
//! is never held across an `.await`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::client::Client;
use crate::commands::{Command, type_name};
use crate::error::{CommandError, ErrorCode};

/// The fail points Cairn has, sorted.
pub const NAMES: &[&str] = &[
    "failCommand",
    "failGetMoreAfterCursorCheckout",
    "maxTimeAlwaysTimeOut",
    "onPrimaryTransactionalWrite",
];

/// When a fail point fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Never.
    Off,
    /// Every time it is evaluated.
    AlwaysOn,
    /// The next `n` times, then it turns itself off.
    Times(i64),
    /// After `n` evaluations have passed it by, every time.
    Skip(i64),
    /// Each time with this probability.
    Random(f64),
}

impl Mode {
    /// MongoDB's numeric mode in `failpoint.<name>` parameter values.
    fn number(self) -> i32 {
        match self {
            Mode::Off => 0,
            Mode::AlwaysOn => 1,
            Mode::Random(_) => 2,
            Mode::Times(_) => 3,
            Mode::Skip(_) => 4,
        }
    }
}

#[derive(Debug)]
struct Setting {
    mode: Mode,
    data: Arc<RawDocumentBuf>,
}

/// One fail point.
#[derive(Debug)]
pub struct FailPoint {
    /// Its name.
    pub name: &'static str,
    active: AtomicBool,
    setting: Mutex<Setting>,
    times_entered: AtomicU64,
    entered: tokio::sync::Notify,
}

impl FailPoint {
    fn new(name: &'static str) -> FailPoint {
        FailPoint {
            name,
            active: AtomicBool::new(false),
            setting: Mutex::new(Setting {
                mode: Mode::Off,
                data: Arc::new(RawDocumentBuf::new()),
            }),
            times_entered: AtomicU64::new(0),
            entered: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Setting> {
        self.setting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the point is on at all (a cheap pre-check).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Sets the mode and data; returns how many times the point had fired.
    pub fn set(&self, mode: Mode, data: RawDocumentBuf) -> u64 {
        let mut s = self.lock();
        s.mode = mode;
        s.data = Arc::new(data);
        // As in MongoDB, `{times: 0}` still fires once.
        self.active.store(mode != Mode::Off, Ordering::Relaxed);
        self.times_entered.load(Ordering::Relaxed)
    }

    /// How many times the point has fired.
    pub fn times_entered(&self) -> u64 {
        self.times_entered.load(Ordering::Relaxed)
    }

    /// Evaluates the point: `Some(data)` when it fires for a command `selects` accepts (which
    /// counts an entry and uses up a `times`/`skip` count), else `None`.
    pub fn evaluate(
        &self,
        selects: impl FnOnce(&RawDocument) -> bool,
    ) -> Option<Arc<RawDocumentBuf>> {
        if !self.is_active() {
            return None;
        }
        let data = {
            let mut s = self.lock();
            if !selects(&s.data) {
                return None;
            }
            let fire = match &mut s.mode {
                Mode::Off => false,
                Mode::AlwaysOn => true,
                Mode::Random(p) => rand::random::<f64>() < *p,
                Mode::Times(n) => {
                    *n -= 1;
                    if *n <= 0 {
                        s.mode = Mode::Off;
                        self.active.store(false, Ordering::Relaxed);
                    }
                    true
                }
                Mode::Skip(n) => {
                    if *n <= 0 {
                        true
                    } else {
                        *n -= 1;
                        false
                    }
                }
            };
            if !fire {
                return None;
            }
            s.data.clone()
        };
        self.times_entered.fetch_add(1, Ordering::Relaxed);
        self.entered.notify_waiters();
        Some(data)
    }

    /// Waits until the point has fired at least `target` times (cancel by dropping).
    pub async fn wait_for(&self, target: u64) {
        loop {
            let notified = self.entered.notified();
            if self.times_entered() >= target {
                return;
            }
            // A short tick as well: `notify_waiters` only wakes registered waiters.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(100), notified).await;
        }
    }

    /// The point as the `failpoint.<name>` parameter shows it: `{mode, data, timesEntered}`.
    pub fn to_document(&self) -> RawDocumentBuf {
        let s = self.lock();
        rawdoc! {
            "mode": s.mode.number(),
            "data": (*s.data).clone(),
            "timesEntered": i64::try_from(self.times_entered()).unwrap_or(i64::MAX),
        }
    }
}

static REGISTRY: LazyLock<Vec<FailPoint>> =
    LazyLock::new(|| NAMES.iter().map(|n| FailPoint::new(n)).collect());

/// The fail point with this name.
pub fn get(name: &str) -> Option<&'static FailPoint> {
    let i = NAMES.binary_search(&name).ok()?;
    REGISTRY.get(i)
}

/// `failCommand`, found once (every command checks it, twice).
fn fail_command_point() -> Option<&'static FailPoint> {
    static POINT: LazyLock<Option<&'static FailPoint>> = LazyLock::new(|| get("failCommand"));
    *POINT
}

fn integer(v: RawBsonRef<'_>, field: &str) -> Result<i64, CommandError> {
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.is_finite() => Ok(d as i64),
        RawBsonRef::Double(_) => Err(CommandError::bad_value(format!(
            "Expected field \"{field}\" to have a value exactly representable as a 64-bit integer, but found {v:?}"
        ))),
        other => Err(CommandError::new(
            ErrorCode::TypeMismatch,
            format!(
                "\"{field}\" had the wrong type. Expected number, found {}",
                type_name(&other)
            ),
        )),
    }
}

/// Parses `configureFailPoint`'s `mode` and `data` as MongoDB does.
pub fn parse(cmd: &RawDocument) -> Result<(Mode, RawDocumentBuf), CommandError> {
    let mode = match cmd.get("mode") {
        Ok(None) => {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "When setting a failpoint, you must supply a 'mode'",
            ));
        }
        Ok(Some(RawBsonRef::String("off"))) => Mode::Off,
        Ok(Some(RawBsonRef::String("alwaysOn"))) => Mode::AlwaysOn,
        Ok(Some(RawBsonRef::String(other))) => {
            return Err(CommandError::bad_value(format!("unknown mode: {other}")));
        }
        Ok(Some(RawBsonRef::Document(d))) => {
            let get = |f: &str| d.get(f).ok().flatten();
            if let Some(v) = get("times") {
                let n = integer(v, "times")?;
                if n < 0 {
                    return Err(CommandError::bad_value(
                        "'times' option to 'mode' must be positive",
                    ));
                }
                if n > i64::from(i32::MAX) {
                    return Err(CommandError::bad_value(
                        "'times' option to 'mode' is too large",
                    ));
                }
                Mode::Times(n)
            } else if let Some(v) = get("skip") {
                let n = integer(v, "skip")?;
                if n < 0 {
                    return Err(CommandError::bad_value(
                        "'skip' option to 'mode' must be positive",
                    ));
                }
                if n > i64::from(i32::MAX) {
                    return Err(CommandError::bad_value(
                        "'skip' option to 'mode' is too large",
                    ));
                }
                Mode::Skip(n)
            } else if let Some(v) = get("activationProbability") {
                let p = match v {
                    RawBsonRef::Int32(i) => f64::from(i),
                    RawBsonRef::Int64(i) => i as f64,
                    RawBsonRef::Double(d) => d,
                    RawBsonRef::Decimal128(d) => d.to_string().parse().unwrap_or(f64::NAN),
                    _ => {
                        return Err(CommandError::new(
                            ErrorCode::TypeMismatch,
                            "the 'activationProbability' option to 'mode' must be a double between 0 and 1",
                        ));
                    }
                };
                if !(0.0..=1.0).contains(&p) {
                    return Err(CommandError::bad_value(format!(
                        "activationProbability must be between 0.0 and 1.0; found {p}"
                    )));
                }
                Mode::Random(p)
            } else {
                return Err(CommandError::bad_value(
                    "'mode' must be one of 'off', 'alwaysOn', '{times:n}', '{skip:n}' or '{activationProbability:p}'",
                ));
            }
        }
        Ok(Some(_)) => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                "'mode' must be a string or JSON object",
            ));
        }
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    let data = match cmd.get("data") {
        Ok(None) => RawDocumentBuf::new(),
        Ok(Some(RawBsonRef::Document(d))) => d.to_owned(),
        Ok(Some(RawBsonRef::Array(a))) => {
            // MongoDB accepts any embedded object, arrays included.
            RawDocumentBuf::from_bytes(a.as_bytes().to_vec())
                .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?
        }
        Ok(Some(_)) => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                "the 'data' option must be a JSON object",
            ));
        }
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    Ok((mode, data))
}

/// The namespace a command names, as MongoDB's `failCommand` compares it with `namespace`:
/// `db.<first field>` when the first field is a string, else `db`.
fn command_ns(db: &str, body: &RawDocument) -> String {
    match body.iter().next() {
        Some(Ok((_, RawBsonRef::String(c)))) => format!("{db}.{c}"),
        _ => db.to_string(),
    }
}

fn flag(data: &RawDocument, field: &str) -> bool {
    matches!(data.get(field), Ok(Some(RawBsonRef::Boolean(true))))
}

/// Whether `failCommand`'s `data` selects this command on this connection (MongoDB's
/// `shouldActivateFailCommandFailPoint`).
pub fn selects(data: &RawDocument, cmd: &Command, ns: &str, client: &Client) -> bool {
    selects_app(data, cmd, ns, client, client.app_name())
}

/// The application name a command runs for: the connection's, or — for the handshake `hello`
/// that carries the client metadata — the one it is about to declare (MongoDB matches
/// `appName` against the handshake itself, so drivers can slow their own monitors).
fn command_app_name<'a>(
    cmd: &Command,
    body: &'a RawDocument,
    client: &'a Client,
) -> Option<&'a str> {
    client.app_name().or_else(|| {
        if !matches!(cmd.name, "hello" | "isMaster") {
            return None;
        }
        match body.get("client") {
            Ok(Some(RawBsonRef::Document(meta))) => crate::ops::app_name_of(meta),
            _ => None,
        }
    })
}

fn selects_app(
    data: &RawDocument,
    cmd: &Command,
    ns: &str,
    client: &Client,
    app: Option<&str>,
) -> bool {
    if cmd.name == "configureFailPoint" {
        return false;
    }
    if let Ok(Some(RawBsonRef::String(t))) = data.get("threadName")
        && t != format!("conn{}", client.id)
    {
        return false;
    }
    if let Ok(Some(v)) = data.get("appName") {
        let want = match v {
            RawBsonRef::String(s) => s,
            _ => "",
        };
        if app.unwrap_or("") != want {
            return false;
        }
    }
    if let Ok(Some(v)) = data.get("namespace") {
        let want = match v {
            RawBsonRef::String(s) => s,
            _ => "",
        };
        if ns != want {
            return false;
        }
    }
    // Every Cairn client is external, so `failInternalCommands` never changes the selection.
    if data.get("failAllCommands").ok().flatten().is_some() {
        return true;
    }
    let Ok(Some(RawBsonRef::Array(list))) = data.get("failCommands") else {
        return false;
    };
    list.into_iter()
        .flatten()
        .any(|v| matches!(v, RawBsonRef::String(n) if n == cmd.name || cmd.aliases.contains(&n)))
}

/// What `failCommand` does to one command.
#[derive(Debug, Default)]
pub struct Effects {
    /// Error labels that replace the ones the server would compute (`[]`: none).
    pub labels_override: Option<Vec<String>>,
}

/// Commands that take a write concern (where `failCommand`'s `writeConcernError` applies).
const WRITE_CONCERN_COMMANDS: &[&str] = &[
    "abortTransaction",
    "collMod",
    "commitTransaction",
    "create",
    "createIndexes",
    "delete",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "findAndModify",
    "insert",
    "renameCollection",
    "update",
];

fn labels_of(data: &RawDocument) -> Option<Vec<String>> {
    let Ok(Some(RawBsonRef::Array(a))) = data.get("errorLabels") else {
        return None;
    };
    Some(
        a.into_iter()
            .flatten()
            .filter_map(|v| match v {
                RawBsonRef::String(s) => Some(s.to_string()),
                _ => None,
            })
            .collect(),
    )
}

/// Evaluates `failCommand` for a command about to run (after its name and arguments were
/// checked, before its session work), as a router does. Blocks for `blockTimeMS` (cut short
/// by `maxTimeMS` or `killOp`), marks the connection to be closed for `closeConnection`, and
/// fails with `errorCode`; the labels override is left in `effects`.
pub async fn fail_command(
    cmd: &Command,
    db: &str,
    body: &RawDocument,
    client: &mut Client,
    effects: &mut Effects,
) -> Result<(), CommandError> {
    let Some(fp) = fail_command_point() else {
        return Ok(());
    };
    if !fp.is_active() {
        return Ok(());
    }
    let ns = command_ns(db, body);
    let fired = fp.evaluate(|data| {
        let acts = flag(data, "closeConnection")
            || flag(data, "blockConnection")
            || data.get("errorCode").ok().flatten().is_some_and(|v| {
                matches!(
                    v,
                    RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_)
                )
            });
        acts && selects_app(data, cmd, &ns, client, command_app_name(cmd, body, client))
    });
    let Some(data) = fired else {
        return Ok(());
    };
    tracing::info!(
        id = 4898500,
        command = cmd.name,
        "Activating 'failCommand' failpoint"
    );
    if let Some(labels) = labels_of(&data) {
        effects.labels_override = Some(labels);
    }
    if flag(&data, "blockConnection") {
        let ms = match data.get("blockTimeMS") {
            Ok(Some(v @ (RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_)))) => {
                integer(v, "blockTimeMS").unwrap_or(-1)
            }
            _ => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "must specify 'blockTimeMS' when 'blockConnection' is true",
                ));
            }
        };
        if ms < 0 {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "'blockTimeMS' must be non-negative",
            ));
        }
        tracing::info!(
            id = 20432,
            command = cmd.name,
            blockTimeMS = ms,
            "Blocking command via 'failCommand' failpoint"
        );
        crate::deadline::sleep(std::time::Duration::from_millis(ms as u64)).await?;
        tracing::info!(
            id = 20433,
            command = cmd.name,
            "Unblocking command via 'failCommand' failpoint"
        );
    }
    const MSG: &str = "Failing command via 'failCommand' failpoint";
    if flag(&data, "closeConnection") {
        client.close_requested = true;
        tracing::info!(
            id = 20431,
            command = cmd.name,
            "Failing command via 'failCommand' failpoint: closing connection"
        );
        return Err(CommandError::new(ErrorCode::Location(50985), MSG));
    }
    if let Ok(Some(v)) = data.get("errorCode")
        && let Ok(code) = integer(v, "errorCode")
    {
        let code = i32::try_from(code).unwrap_or(i32::MAX);
        let mut e = CommandError::new(ErrorCode::from_code(code), MSG);
        if let Ok(Some(RawBsonRef::Document(extra))) = data.get("errorExtraInfo") {
            e.extra = Some(extra.to_owned());
        }
        tracing::info!(
            id = 20435,
            command = cmd.name,
            errorCode = code,
            "Failing command via 'failCommand' failpoint"
        );
        return Err(e);
    }
    Ok(())
}

/// Whether a command takes a write concern: the write and DDL commands, and an `aggregate`
/// whose pipeline ends in `$out` or `$merge` (as MongoDB decides).
fn supports_write_concern(cmd: &Command, body: &RawDocument) -> bool {
    if WRITE_CONCERN_COMMANDS.contains(&cmd.name) {
        return true;
    }
    cmd.name == "aggregate"
        && matches!(body.get("pipeline"), Ok(Some(bson::RawBsonRef::Array(p)))
            if p.into_iter().last().and_then(|s| s.ok()).is_some_and(|s| matches!(s,
                bson::RawBsonRef::Document(d)
                    if d.get("$out").ok().flatten().is_some()
                        || d.get("$merge").ok().flatten().is_some())))
}

/// `failCommand`'s `writeConcernError` for a command that succeeded: the fields to append to
/// its reply (`writeConcernError`, and `errorLabels` when the point gives a non-empty list).
pub fn write_concern_error(
    cmd: &Command,
    db: &str,
    body: &RawDocument,
    client: &Client,
) -> Option<RawDocumentBuf> {
    let fp = fail_command_point()?;
    if !fp.is_active() || !supports_write_concern(cmd, body) {
        return None;
    }
    let ns = command_ns(db, body);
    let data = fp.evaluate(|data| {
        matches!(data.get("writeConcernError"), Ok(Some(_)))
            && selects_app(data, cmd, &ns, client, command_app_name(cmd, body, client))
    })?;
    let mut out = RawDocumentBuf::new();
    if let Ok(Some(wce)) = data.get("writeConcernError") {
        out.append(bson::raw::cstr!("writeConcernError"), wce);
    }
    if let Some(labels) = labels_of(&data)
        && !labels.is_empty()
    {
        let mut arr = bson::RawArrayBuf::new();
        for l in labels {
            arr.push(l.as_str());
        }
        out.append(bson::raw::cstr!("errorLabels"), arr);
    }
    Some(out)
}

/// `failGetMoreAfterCursorCheckout` for a `getMore` that checked out a cursor on `ns`: the
/// error to fail it with (the point's `errorCode`, InternalError by default), when the point
/// fires for this connection (its `data` selects as `failCommand` on `getMore` would).
pub fn get_more_after_checkout(ns: &str, client: &Client) -> Option<CommandError> {
    let fp = get("failGetMoreAfterCursorCheckout")?;
    if !fp.is_active() {
        return None;
    }
    let get_more = crate::commands::lookup("getMore")?;
    let data = fp.evaluate(|data| {
        let mut d = data.to_owned();
        let mut list = bson::RawArrayBuf::new();
        list.push("getMore");
        d.append(bson::raw::cstr!("failCommands"), list);
        selects(&d, get_more, ns, client)
    })?;
    let code = data
        .get("errorCode")
        .ok()
        .flatten()
        .and_then(|v| integer(v, "errorCode").ok())
        .map_or(1, |c| i32::try_from(c).unwrap_or(i32::MAX));
    Some(CommandError::new(
        ErrorCode::from_code(code),
        "Hit the 'failGetMoreAfterCursorCheckout' failpoint",
    ))
}

/// `onPrimaryTransactionalWrite` for a retryable write (a write command with `lsid` and
/// `txnNumber` outside a transaction): `Some((close, fail_before_commit))` when it fires.
/// MongoDB evaluates it for each statement on a replica-set primary; Cairn evaluates it once
/// per command, before it runs: `failBeforeCommitExceptionCode` fails the command with nothing
/// written, and `closeConnection` (default true) drops the connection instead of replying
/// (after the write committed, when there is no failure code).
pub fn on_primary_transactional_write(body: &RawDocument) -> Option<(bool, Option<i32>)> {
    let fp = get("onPrimaryTransactionalWrite")?;
    if !fp.is_active() {
        return None;
    }
    let retryable = body.get("txnNumber").ok().flatten().is_some()
        && body.get("lsid").ok().flatten().is_some()
        && body.get("autocommit").ok().flatten().is_none();
    if !retryable {
        return None;
    }
    let data = fp.evaluate(|_| true)?;
    let close = match data.get("closeConnection") {
        Ok(Some(v)) => crate::commands::truthy(&v),
        _ => true,
    };
    let code = data
        .get("failBeforeCommitExceptionCode")
        .ok()
        .flatten()
        .and_then(|v| integer(v, "failBeforeCommitExceptionCode").ok())
        .map(|c| i32::try_from(c).unwrap_or(i32::MAX));
    Some((close, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sorted() {
        let mut s = NAMES.to_vec();
        s.sort_unstable();
        assert_eq!(s, NAMES);
        assert!(get("failCommand").is_some());
        assert!(get("nope").is_none());
    }

    #[test]
    fn modes_parse_as_mongodb() {
        let p = |d: RawDocumentBuf| parse(&d).map(|(m, _)| m).map_err(|e| e.code.code());
        assert_eq!(p(rawdoc! {}), Err(20));
        assert_eq!(p(rawdoc! {"mode": "off"}), Ok(Mode::Off));
        assert_eq!(p(rawdoc! {"mode": "alwaysOn"}), Ok(Mode::AlwaysOn));
        assert_eq!(p(rawdoc! {"mode": "sometimes"}), Err(2));
        assert_eq!(p(rawdoc! {"mode": 1}), Err(14));
        assert_eq!(p(rawdoc! {"mode": {"times": 2}}), Ok(Mode::Times(2)));
        assert_eq!(p(rawdoc! {"mode": {"times": -1}}), Err(2));
        assert_eq!(p(rawdoc! {"mode": {"times": "x"}}), Err(14));
        assert_eq!(p(rawdoc! {"mode": {"skip": 3}}), Ok(Mode::Skip(3)));
        assert_eq!(
            p(rawdoc! {"mode": {"activationProbability": 0.5}}),
            Ok(Mode::Random(0.5))
        );
        assert_eq!(p(rawdoc! {"mode": {"activationProbability": 2.0}}), Err(2));
        assert_eq!(p(rawdoc! {"mode": {"other": 1}}), Err(2));
        assert_eq!(
            parse(&rawdoc! {"mode": "alwaysOn", "data": 1})
                .unwrap_err()
                .code
                .code(),
            14
        );
    }

    #[test]
    fn times_and_skip_count_only_selected_evaluations() {
        let fp = FailPoint::new("t");
        fp.set(Mode::Times(2), rawdoc! {"x": 1});
        assert!(fp.evaluate(|_| false).is_none());
        assert!(fp.evaluate(|d| d.get_i32("x").is_ok()).is_some());
        assert!(fp.evaluate(|_| true).is_some());
        assert!(fp.evaluate(|_| true).is_none());
        assert!(!fp.is_active());
        assert_eq!(fp.times_entered(), 2);
        assert_eq!(fp.set(Mode::Skip(1), RawDocumentBuf::new()), 2);
        assert!(fp.evaluate(|_| true).is_none());
        assert!(fp.evaluate(|_| true).is_some());
        assert!(fp.evaluate(|_| true).is_some());
        fp.set(Mode::Random(0.0), RawDocumentBuf::new());
        assert!((0..100).all(|_| fp.evaluate(|_| true).is_none()));
        fp.set(Mode::Random(1.0), RawDocumentBuf::new());
        assert!(fp.evaluate(|_| true).is_some());
    }
}
