//! The command registry and dispatcher: one file per command, one sorted table.
//!
//! [`REGISTRY`] lists every command in byte-wise name order with its aliases, help text and
//! flags; the same table answers lookups, drives `listCommands` and produces
//! `CommandNotFound` (59). Nothing answers a command that is not in it.
//!
//! [`dispatch`] applies, in MongoDB's order, the checks every command shares before running
//! it:
//! 1. the body is non-empty and carries a string `$db` (40571 / 13111);
//! 2. the first field names a registered command, exactly as MongoDB matches (case-sensitive,
//!    aliases as extra names) — otherwise 59;
//! 3. admin-only commands run only against `admin` (13);
//! 4. with `--auth`, a command that requires authentication on a connection that has not
//!    authenticated (and has no localhost exception) is Unauthorized (13) `Command <name>
//!    requires authentication` ([`crate::auth::check_authenticated`]);
//! 5. the stable-API parameters `apiVersion`, `apiStrict`, `apiDeprecationErrors` are valid
//!    (4886600, 14, 322, 323);
//! 6. for strict commands, every field is either the command's own or a generic argument
//!    (40415), as MongoDB's IDL parsers enforce.
//!
//! Test commands ([`TEST_COMMANDS`]) exist only when the server runs with test commands
//! enabled; otherwise they are CommandNotFound like any unknown name.
//!
//! Then the command runs as a registered operation ([`crate::ops`], which `currentOp` lists and
//! `killOp` interrupts) inside its interruption context ([`crate::deadline`]): the
//! authorization check comes first ([`crate::auth::authorize::check`], which refuses a
//! command the connection's users lack the privileges for), then the
//! `failCommand` fail point ([`crate::failpoint`]: it may delay, fail or
//! drop the command, or replace its error labels), then the session checks
//! ([`crate::session::begin`]), the handler and the session's finish, and last the
//! authorization bookkeeping ([`crate::auth::authorize::after`]: who owns a new cursor or
//! session).
//!
//! The body is walked once ([`Parsed`], by the connection or [`dispatch`]), and its envelope
//! read and its command looked up once ([`Named`]); the stable-API and strict-field checks,
//! `maxTimeMS`, the session arguments ([`crate::session::begin`]), the latency and metrics
//! bookkeeping all read that one table, and handlers get it too ([`Invocation::parsed`]).
//!
//! Handlers return the reply body *without* `ok`; the dispatcher writes `ok: 1.0`, the
//! cluster-time gossip and the session's fields after it in the same buffer, or renders
//! a [`CommandError`] through [`CommandError::to_reply`] — with the fail point's labels when it
//! gave some.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::client::Client;
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

pub use crate::auth::authorize::Authz;
pub use crate::auth::privilege::ActionType;
pub use args::{
    collection_arg, collection_arg_parsed, opt_bool, opt_count, opt_document, opt_strict_bool,
    truthy, type_name,
};
pub use parsed::{Args, Parsed};

pub mod abort_transaction;
pub mod aggregate;
pub mod args;
pub mod authenticate;
pub mod build_info;
pub mod clone_collection_as_capped;
pub mod coll_mod;
pub mod coll_stats;
pub mod commit_transaction;
pub mod configure_fail_point;
pub mod connection_status;
pub mod convert_to_capped;
pub mod count;
pub mod create;
pub mod create_indexes;
pub mod create_role;
pub mod create_user;
pub mod current_op;
pub mod db_hash;
pub mod db_stats;
pub mod delete;
pub mod distinct;
pub mod drop;
pub mod drop_all_roles_from_database;
pub mod drop_all_users_from_database;
pub mod drop_database;
pub mod drop_indexes;
pub mod drop_role;
pub mod drop_user;
pub mod end_sessions;
pub mod explain;
pub mod find;
pub mod find_and_modify;
pub mod fsync;
pub mod get_cmd_line_opts;
pub mod get_log;
pub mod get_more;
pub mod get_parameter;
pub mod grant_privileges_to_role;
pub mod grant_roles_to_role;
pub mod grant_roles_to_user;
pub mod hello;
pub mod host_info;
pub mod insert;
pub mod kill_all_sessions;
pub mod kill_all_sessions_by_pattern;
pub mod kill_cursors;
pub mod kill_op;
pub mod kill_sessions;
pub mod list_collections;
pub mod list_commands;
pub mod list_databases;
pub mod list_indexes;
pub mod log_rotate;
pub mod logout;
pub mod parsed;
pub mod ping;
pub mod profile;
pub mod refresh_sessions;
pub mod rename_collection;
pub mod revoke_privileges_from_role;
pub mod revoke_roles_from_role;
pub mod revoke_roles_from_user;
pub mod roles_info;
pub mod rotate_certificates;
pub mod sasl_continue;
pub mod sasl_start;
pub mod server_status;
pub mod set_parameter;
pub mod sleep;
pub mod start_session;
pub mod top;
pub mod update;
pub mod update_role;
pub mod update_user;
pub mod users_info;
pub mod validate;
pub mod wait_for_fail_point;
pub mod whatsmyuri;

/// A parsed request as a command sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The command name as the client sent it (the first field).
    pub name: &'a str,
    /// `$db`.
    pub db: &'a str,
    /// The whole command document.
    pub body: &'a RawDocument,
    /// True when the OP_MSG had `exhaustAllowed`.
    pub exhaust_allowed: bool,
}

/// What a command needs to run.
pub struct Invocation<'a> {
    /// Shared server state.
    pub server: &'a Arc<ServerState>,
    /// The connection's state.
    pub client: &'a mut Client,
    /// The request.
    pub req: Request<'a>,
    /// Session, transaction and read-concern context set up by the dispatcher.
    pub op: &'a mut crate::session::OpCtx,
    /// The body's top-level fields, read once by the dispatcher (`req.body`'s [`Parsed`]).
    pub parsed: &'a Parsed<'a>,
}

/// A successful command result.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The reply body without `ok`.
    pub body: RawDocumentBuf,
    /// For exhaust streams: the command body to run next, sent with `moreToCome`.
    pub more_to_come: Option<RawDocumentBuf>,
    /// For a cursor reply written with its batch in hand
    /// ([`crate::cursor::batch_reply_counted`]): the batch's size and the cursor id, as
    /// [`crate::metrics::cursor_reply`] reads them back from `body` (`None`: the metrics
    /// read the body).
    pub cursor: Option<(u64, i64)>,
}

impl From<RawDocumentBuf> for Reply {
    fn from(body: RawDocumentBuf) -> Reply {
        Reply {
            body,
            more_to_come: None,
            cursor: None,
        }
    }
}

/// The result of a command.
pub type CmdResult = Result<Reply, CommandError>;

/// A boxed command future.
pub type CmdFuture<'a> = Pin<Box<dyn Future<Output = CmdResult> + Send + 'a>>;

/// A command's entry point.
pub type Handler = for<'a> fn(Invocation<'a>) -> CmdFuture<'a>;

/// Which of a command's fields are accepted.
#[derive(Debug, Clone, Copy)]
pub enum Fields {
    /// Only these fields (besides the command name and generic arguments).
    Strict(&'static [&'static str]),
    /// Anything (the command interprets or ignores extra fields itself).
    Any,
}

/// Which `serverStatus.opcounters` entry a command increments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// `command`.
    Command,
    /// Counted by the command itself (insert/update/delete count statements).
    SelfCounted,
    /// `query`.
    Query,
    /// `getmore`.
    GetMore,
}

/// One registered command.
pub struct Command {
    /// The primary name.
    pub name: &'static str,
    /// Other accepted names (e.g. `ismaster` for `isMaster`).
    pub aliases: &'static [&'static str],
    /// `listCommands` help text.
    pub help: &'static str,
    /// Whether the command requires an authenticated user when auth is on.
    pub requires_auth: bool,
    /// Whether the command may only run against `admin`.
    pub admin_only: bool,
    /// Whether the command may run on a secondary (`listCommands.secondaryOk`).
    pub secondary_ok: bool,
    /// Whether the command is part of Stable API version 1.
    pub api_v1: bool,
    /// Accepted fields.
    pub fields: Fields,
    /// Which opcounter it bumps.
    pub counter: Counter,
    /// Whether the command may be abandoned when its client disconnects mid-way (it changes
    /// nothing, like an awaitable `hello`).
    pub kill_on_disconnect: bool,
    /// What the command needs when authorization applies ([`crate::auth::authorize`]).
    pub authz: crate::auth::authorize::Authz,
    /// The entry point.
    pub run: Handler,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command").field("name", &self.name).finish()
    }
}

/// Every command, sorted byte-wise by name (a unit test enforces the order).
pub static REGISTRY: &[&Command] = &[
    &abort_transaction::COMMAND,
    &aggregate::COMMAND,
    &authenticate::COMMAND,
    &build_info::COMMAND,
    &clone_collection_as_capped::COMMAND,
    &coll_mod::COMMAND,
    &coll_stats::COMMAND,
    &commit_transaction::COMMAND,
    &configure_fail_point::COMMAND,
    &connection_status::COMMAND,
    &convert_to_capped::COMMAND,
    &count::COMMAND,
    &create::COMMAND,
    &create_indexes::COMMAND,
    &create_role::COMMAND,
    &create_user::COMMAND,
    &current_op::COMMAND,
    &db_hash::COMMAND,
    &db_stats::COMMAND,
    &delete::COMMAND,
    &distinct::COMMAND,
    &drop::COMMAND,
    &drop_all_roles_from_database::COMMAND,
    &drop_all_users_from_database::COMMAND,
    &drop_database::COMMAND,
    &drop_indexes::COMMAND,
    &drop_role::COMMAND,
    &drop_user::COMMAND,
    &end_sessions::COMMAND,
    &explain::COMMAND,
    &find::COMMAND,
    &find_and_modify::COMMAND,
    &fsync::COMMAND,
    &get_cmd_line_opts::COMMAND,
    &get_log::COMMAND,
    &get_more::COMMAND,
    &get_parameter::COMMAND,
    &grant_privileges_to_role::COMMAND,
    &grant_roles_to_role::COMMAND,
    &grant_roles_to_user::COMMAND,
    &hello::HELLO,
    &host_info::COMMAND,
    &insert::COMMAND,
    &hello::IS_MASTER,
    &kill_all_sessions::COMMAND,
    &kill_all_sessions_by_pattern::COMMAND,
    &kill_cursors::COMMAND,
    &kill_op::COMMAND,
    &kill_sessions::COMMAND,
    &list_collections::COMMAND,
    &list_commands::COMMAND,
    &list_databases::COMMAND,
    &list_indexes::COMMAND,
    &log_rotate::COMMAND,
    &logout::COMMAND,
    &ping::COMMAND,
    &profile::COMMAND,
    &refresh_sessions::COMMAND,
    &rename_collection::COMMAND,
    &revoke_privileges_from_role::COMMAND,
    &revoke_roles_from_role::COMMAND,
    &revoke_roles_from_user::COMMAND,
    &roles_info::COMMAND,
    &rotate_certificates::COMMAND,
    &sasl_continue::COMMAND,
    &sasl_start::COMMAND,
    &server_status::COMMAND,
    &set_parameter::COMMAND,
    &sleep::COMMAND,
    &start_session::COMMAND,
    &top::COMMAND,
    &update::COMMAND,
    &update_role::COMMAND,
    &update_user::COMMAND,
    &users_info::COMMAND,
    &validate::COMMAND,
    &wait_for_fail_point::COMMAND,
    &whatsmyuri::COMMAND,
];

/// Generic arguments every command accepts (MongoDB's `generic_argument.idl`).
pub const GENERIC_ARGUMENTS: &[&str] = &[
    "$audit",
    "$client",
    "$clusterTime",
    "$configServerState",
    "$configTime",
    "$db",
    "$oplogQueryData",
    "$queryOptions",
    "$readPreference",
    "$replData",
    "$tenant",
    "$topologyTime",
    "allowImplicitCollectionCreation",
    "apiDeprecationErrors",
    "apiStrict",
    "apiVersion",
    "autocommit",
    "clientOperationKey",
    "comment",
    "coordinator",
    "databaseVersion",
    "lsid",
    "maxTimeMS",
    "maxTimeMSOpOnly",
    "mayBypassWriteBlocking",
    "readConcern",
    "shardVersion",
    "startTransaction",
    "stmtId",
    "tracking_info",
    "txnNumber",
    "txnRetryCounter",
    "writeConcern",
];

/// Whether `name` is one of [`GENERIC_ARGUMENTS`].
pub fn is_generic_argument(name: &str) -> bool {
    generic_argument(name.as_bytes()).is_some()
}

/// The generic argument (one of [`GENERIC_ARGUMENTS`]) spelled by `name`: a `match` (a length
/// switch and a byte comparison or two, where a search of the list compares at every step; a
/// test checks it against the list). [`Parsed`] takes a key's text from here without decoding
/// it.
pub fn generic_argument(name: &[u8]) -> Option<&'static str> {
    Some(match name {
        b"$audit" => "$audit",
        b"$client" => "$client",
        b"$clusterTime" => "$clusterTime",
        b"$configServerState" => "$configServerState",
        b"$configTime" => "$configTime",
        b"$db" => "$db",
        b"$oplogQueryData" => "$oplogQueryData",
        b"$queryOptions" => "$queryOptions",
        b"$readPreference" => "$readPreference",
        b"$replData" => "$replData",
        b"$tenant" => "$tenant",
        b"$topologyTime" => "$topologyTime",
        b"allowImplicitCollectionCreation" => "allowImplicitCollectionCreation",
        b"apiDeprecationErrors" => "apiDeprecationErrors",
        b"apiStrict" => "apiStrict",
        b"apiVersion" => "apiVersion",
        b"autocommit" => "autocommit",
        b"clientOperationKey" => "clientOperationKey",
        b"comment" => "comment",
        b"coordinator" => "coordinator",
        b"databaseVersion" => "databaseVersion",
        b"lsid" => "lsid",
        b"maxTimeMS" => "maxTimeMS",
        b"maxTimeMSOpOnly" => "maxTimeMSOpOnly",
        b"mayBypassWriteBlocking" => "mayBypassWriteBlocking",
        b"readConcern" => "readConcern",
        b"shardVersion" => "shardVersion",
        b"startTransaction" => "startTransaction",
        b"stmtId" => "stmtId",
        b"tracking_info" => "tracking_info",
        b"txnNumber" => "txnNumber",
        b"txnRetryCounter" => "txnRetryCounter",
        b"writeConcern" => "writeConcern",
        _ => return None,
    })
}

/// The command index, hashed with foldhash as the storage engine's space map and the plan
/// cache are: every command looks its name up (a few bytes, from a fixed table, so flooding
/// is not a concern), and SipHash's setup cost several times the lookup.
type Index = HashMap<&'static str, &'static Command, foldhash::fast::FixedState>;

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut m = Index::default();
        for c in REGISTRY {
            m.insert(c.name, *c);
            for a in c.aliases {
                m.insert(*a, *c);
            }
        }
        m
    })
}

/// Finds a command by the name a client used (case-sensitive, aliases included).
pub fn lookup(name: &str) -> Option<&'static Command> {
    index().get(name).copied()
}

fn check_api_parameters(cmd: &Command, body: &Parsed<'_>) -> Result<(), CommandError> {
    let get = |f: &str| body.find(f);
    let version = get("apiVersion");
    let strict = get("apiStrict");
    let deprecation = get("apiDeprecationErrors");
    if version.is_none() && (strict.is_some() || deprecation.is_some()) {
        return Err(CommandError::new(
            ErrorCode::Location(4886600),
            "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion",
        ));
    }
    let Some(version) = version else {
        return Ok(());
    };
    let RawBsonRef::String(v) = version else {
        return Err(CommandError::wrong_type(
            &format!("{}.apiVersion", cmd.name),
            type_name(&version),
            "string",
        ));
    };
    for (name, val) in [("apiStrict", strict), ("apiDeprecationErrors", deprecation)] {
        if let Some(val) = val
            && !matches!(val, RawBsonRef::Boolean(_))
        {
            return Err(CommandError::wrong_type(
                &format!("{}.{name}", cmd.name),
                type_name(&val),
                "bool",
            ));
        }
    }
    if v != "1" {
        return Err(CommandError::new(
            ErrorCode::APIVersionError,
            "API version must be \"1\"",
        ));
    }
    if matches!(strict, Some(RawBsonRef::Boolean(true))) && !cmd.api_v1 {
        return Err(CommandError::new(
            ErrorCode::APIStrictError,
            format!(
                "Provided apiStrict:true, but the command {} is not in API Version 1",
                cmd.name
            ),
        ));
    }
    Ok(())
}

pub(crate) fn check_fields(cmd: &Command, req: &Request<'_>) -> Result<(), CommandError> {
    check_parsed_fields(cmd, &Parsed::parse(req.body))
}

fn check_parsed_fields(cmd: &Command, body: &Parsed<'_>) -> Result<(), CommandError> {
    let Fields::Strict(allowed) = cmd.fields else {
        return Ok(());
    };
    for (i, el) in body.iter().enumerate() {
        let (k, _) = el?;
        if i == 0 || is_generic_argument(k) || allowed.contains(&k) {
            continue;
        }
        return Err(CommandError::unknown_field(cmd.name, k));
    }
    Ok(())
}

/// Extracts `$db` and the command name, or the error MongoDB gives.
pub fn parse_envelope(body: &RawDocument) -> Result<(&str, &str), CommandError> {
    envelope(&Parsed::parse(body))
}

/// [`parse_envelope`] on a body already read.
pub fn envelope<'a>(body: &Parsed<'a>) -> Result<(&'a str, &'a str), CommandError> {
    let first = body.first().transpose()?;
    let db = match body.get("$db") {
        Ok(Some(RawBsonRef::String(db))) => db,
        Ok(Some(other)) => {
            return Err(CommandError::new(
                ErrorCode::Location(13111),
                format!("wrong type for field ($db) {} != string", type_name(&other)),
            ));
        }
        _ => {
            return Err(CommandError::new(
                ErrorCode::Location(40571),
                "OP_MSG requests require a $db argument",
            ));
        }
    };
    let name = first.map(|(k, _)| k).unwrap_or_default();
    Ok((db, name))
}

/// What a request names, read once for the connection's bookkeeping and the dispatcher:
/// `$db` and the command name ([`envelope`]), and the registered command of that name
/// ([`lookup`], test commands included).
#[derive(Debug)]
pub struct Named<'a> {
    /// `$db` and the command name, or the error MongoDB gives for a body without them.
    pub envelope: Result<(&'a str, &'a str), CommandError>,
    /// The command registered under the name.
    pub command: Option<&'static Command>,
}

impl<'a> Named<'a> {
    /// Reads the envelope of `body` and looks its command up.
    pub fn of(body: &Parsed<'a>) -> Named<'a> {
        let envelope = envelope(body);
        let command = envelope.as_ref().ok().and_then(|(_, name)| lookup(name));
        Named { envelope, command }
    }
}

/// Bytes a successful reply gains after its body besides the tail: `ok: 1.0` (12),
/// `$clusterTime` (101) and `operationTime` (23), rounded up.
/// A handler that knows its reply's size reserves this much more (the cursor replies do, and
/// [`empty_reply`]), so the dispatcher's reservation finds the room already there.
pub const REPLY_TRAILER: usize = 160;

/// An empty reply body with room for what the dispatcher appends ([`REPLY_TRAILER`]).
pub fn empty_reply() -> RawDocumentBuf {
    let mut bytes = Vec::with_capacity(5 + REPLY_TRAILER);
    bytes.extend_from_slice(&[5, 0, 0, 0, 0]);
    RawDocumentBuf::from_bytes(bytes).unwrap_or_default()
}

/// The element `ok: 1.0` of a successful reply.
const OK_ELEMENT: [u8; 12] = {
    let one = 1.0f64.to_le_bytes();
    [
        0x01, b'o', b'k', 0, one[0], one[1], one[2], one[3], one[4], one[5], one[6], one[7],
    ]
};

/// A successful reply: the handler's `body`, then `ok: 1.0`, the cluster-time gossip
/// ([`crate::session::write_gossip`]) and the session's `tail` fields, written after the
/// body's elements in its own buffer (no document is rebuilt element by element).
fn success_reply(
    body: RawDocumentBuf,
    server: &ServerState,
    op_time: Option<bson::Timestamp>,
    tail: Option<&RawDocument>,
) -> Result<RawDocumentBuf, CommandError> {
    // A document's elements lie between its length prefix and its terminator.
    let tail = tail
        .map(RawDocument::as_bytes)
        .and_then(|b| b.get(4..b.len().saturating_sub(1)))
        .unwrap_or_default();
    let mut bytes = body.into_bytes();
    // Drop the terminator (a document always ends with one); `close` writes it back.
    bytes.pop();
    bytes.reserve(REPLY_TRAILER + tail.len());
    bytes.extend_from_slice(&OK_ELEMENT);
    crate::session::write_gossip(&mut bytes, server, op_time);
    bytes.extend_from_slice(tail);
    cairn_wire::doc_writer::close(&mut bytes, 0)
        .map_err(|e| CommandError::new(ErrorCode::BSONObjectTooLarge, e.to_string()))?;
    RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| CommandError::new(ErrorCode::InternalError, e.to_string()))
}

/// Runs one command document and returns the complete reply (with `ok` and the cluster-time
/// gossip a router adds to every reply), plus the next body for exhaust streaming.
pub async fn dispatch(
    server: &Arc<ServerState>,
    client: &mut Client,
    body: &RawDocument,
    exhaust_allowed: bool,
) -> (RawDocumentBuf, Option<RawDocumentBuf>) {
    let parsed = Parsed::parse(body);
    let named = Named::of(&parsed);
    dispatch_parsed(server, client, &parsed, named, exhaust_allowed).await
}

/// [`dispatch`] for a body whose fields and name were already read (the connection reads
/// them once for its own bookkeeping and the dispatcher's).
pub async fn dispatch_parsed<'a>(
    server: &Arc<ServerState>,
    client: &mut Client,
    body: &Parsed<'a>,
    named: Named<'a>,
    exhaust_allowed: bool,
) -> (RawDocumentBuf, Option<RawDocumentBuf>) {
    let mut op = crate::session::OpCtx::default();
    let mut effects = crate::failpoint::Effects::default();
    let (result, tail) = run(
        server,
        client,
        body,
        named,
        exhaust_allowed,
        &mut op,
        &mut effects,
    )
    .await;
    let result = result.and_then(|reply| {
        let more = reply.more_to_come;
        success_reply(reply.body, server, op.at_cluster_time, tail.as_deref())
            .map(|out| (out, more))
    });
    match result {
        Ok(done) => done,
        Err(mut e) => {
            let gossip = crate::session::gossip_out(server, op.at_cluster_time);
            crate::session::label_error(body.body(), &mut e);
            let Some(labels) = effects.labels_override else {
                return (e.to_reply_with(Some(&gossip)), None);
            };
            // A `failCommand` fail point's `errorLabels` replace the computed labels.
            e.labels.clear();
            let mut out = e.to_reply_with(Some(&gossip));
            if !labels.is_empty() {
                let mut arr = bson::RawArrayBuf::new();
                for l in &labels {
                    arr.push(l.as_str());
                }
                out.append(bson::raw::cstr!("errorLabels"), arr);
            }
            (out, None)
        }
    }
}

/// Looks up and runs a command; see the module doc for the checks applied. Returns the
/// result and the fields the session layer appends to a successful reply; `effects`
/// receives what a `failCommand` fail point asks of the reply.
pub async fn run<'a>(
    server: &Arc<ServerState>,
    client: &mut Client,
    parsed: &Parsed<'a>,
    named: Named<'a>,
    exhaust_allowed: bool,
    op: &mut crate::session::OpCtx,
    effects: &mut crate::failpoint::Effects,
) -> (CmdResult, Option<RawDocumentBuf>) {
    let body = parsed.body();
    let (cmd, db, name) = match resolve(server, named) {
        Ok(r) => r,
        Err(e) => return (Err(e), None),
    };
    let checked = match crate::auth::check_authenticated(server, client, cmd).await {
        Ok(()) => prepare(cmd, parsed),
        Err(e) => Err(e),
    };
    let deadline = match checked {
        Ok(d) => d,
        Err(e) => return (Err(e), None),
    };
    let running = server.ops.start(client, cmd, db, parsed);
    let profiling = server.profiler.level(db);
    let ctx = crate::deadline::Interrupt {
        deadline,
        op: Some(running.op.clone()),
    };
    let req = Request {
        name,
        db,
        body,
        exhaust_allowed,
    };
    let out =
        crate::deadline::scope_with(ctx, execute(server, client, cmd, req, parsed, op, effects))
            .await;
    // One clock read for both accounts of the duration.
    let micros = running.op.micros();
    crate::ops::finished(server, &running.op, out.0.is_ok(), micros);
    server
        .metrics
        .finished(&running.op, parsed, out.0.as_ref().ok(), micros);
    if profiling.is_some() {
        let result = match &out.0 {
            Ok(r) => Ok(r.body.as_ref()),
            Err(e) => Err(e),
        };
        client.slow_log =
            crate::profiler::record(server, profiling, &running.op, body, result).await;
    } else {
        client.slow_log = None;
    }
    client.last_op = Some(running.op.clone());
    out
}

/// Runs a command that passed [`prepare`], inside its operation's interruption context:
/// fail points, the session checks ([`crate::session::begin`]), the handler, and the session's
/// finish ([`crate::session::finish`]).
async fn execute(
    server: &Arc<ServerState>,
    client: &mut Client,
    cmd: &'static Command,
    req: Request<'_>,
    parsed: &Parsed<'_>,
    op: &mut crate::session::OpCtx,
    effects: &mut crate::failpoint::Effects,
) -> (CmdResult, Option<RawDocumentBuf>) {
    let (db, body) = (req.db, req.body);
    let early = |e: CommandError| (Err(e), None);
    if crate::deadline::current().is_some()
        && let Err(e) = crate::deadline::check()
    {
        return early(e);
    }
    if let Err(e) = crate::auth::authorize::check(server, client, cmd, &req).await {
        return early(e);
    }
    if let Err(e) = crate::failpoint::fail_command(cmd, db, body, client, effects).await {
        return early(e);
    }
    let primary_write = if crate::session::RETRYABLE_WRITES.contains(&cmd.name) {
        crate::failpoint::on_primary_transactional_write(body)
    } else {
        None
    };
    if let Some((close, Some(code))) = primary_write {
        client.close_requested |= close;
        return early(CommandError::new(
            ErrorCode::from_code(code),
            "Failing write via 'onPrimaryTransactionalWrite' failpoint",
        ));
    }
    *op = match crate::session::begin(server, cmd, db, parsed).await {
        Ok(ctx) => ctx,
        Err(e) => return early(e),
    };
    count(server, cmd);
    let started = std::time::Instant::now();
    let result = (cmd.run)(Invocation {
        server,
        client,
        req,
        op,
        parsed,
    })
    .await;
    record_latency(server, cmd, parsed, req.db, started);
    let (mut body_result, more, cursor) = match result {
        Ok(r) => (Ok(r.body), r.more_to_come, r.cursor),
        Err(e) => (Err(e), None, None),
    };
    if let Ok(reply) = &mut body_result
        && let Some(wce) = crate::failpoint::write_concern_error(cmd, db, body, client)
    {
        crate::error::append_all(reply, &wce);
    }
    let tail = crate::session::finish(server, op, cmd, &mut body_result);
    crate::auth::authorize::after(
        server,
        client,
        cmd,
        &req,
        body_result.as_ref().ok().map(|b| b.as_ref()),
    );
    if let Some((true, None)) = primary_write {
        client.close_requested = true;
    }
    let result = body_result.map(|body| Reply {
        body,
        more_to_come: more,
        cursor,
    });
    (result, tail)
}

/// Test-only commands: registered only with `--enable-test-commands` (or
/// `--setParameter enableTestCommands=1`); otherwise they do not exist (CommandNotFound), as
/// in mongod.
pub const TEST_COMMANDS: &[&str] = &["configureFailPoint", "sleep", "waitForFailPoint"];

/// Whether `cmd` is available on this server (test commands only when enabled).
pub fn available(server: &ServerState, cmd: &Command) -> bool {
    server.config.enable_test_commands || !TEST_COMMANDS.contains(&cmd.name)
}

/// The command a request names, on a database it may run against (module doc steps 1–3),
/// with `$db` and the name as sent.
fn resolve<'a>(
    server: &ServerState,
    named: Named<'a>,
) -> Result<(&'static Command, &'a str, &'a str), CommandError> {
    let (db, name) = named.envelope?;
    let cmd = named
        .command
        .filter(|c| available(server, c))
        .ok_or_else(|| {
            CommandError::new(
                ErrorCode::CommandNotFound,
                format!("no such command: '{name}'"),
            )
        })?;
    if cmd.admin_only && db != "admin" {
        return Err(CommandError::new(
            ErrorCode::Unauthorized,
            format!("{} may only be run against the admin database.", cmd.name),
        ));
    }
    Ok((cmd, db, name))
}

/// The checks every command shares after authentication (module doc steps 5–6); returns the
/// `maxTimeMS` deadline.
fn prepare(
    cmd: &'static Command,
    body: &Parsed<'_>,
) -> Result<Option<std::time::Instant>, CommandError> {
    check_api_parameters(cmd, body)?;
    check_parsed_fields(cmd, body)?;
    crate::deadline::parse(body)
}

/// Adds the command's latency to its collection's `latencyStats`.
fn record_latency(
    server: &ServerState,
    cmd: &Command,
    body: &Parsed<'_>,
    db: &str,
    started: std::time::Instant,
) {
    let coll = if cmd.name == "getMore" {
        match body.find("collection") {
            Some(RawBsonRef::String(c)) => Some(c),
            _ => None,
        }
    } else {
        match body.first() {
            Some(Ok((_, RawBsonRef::String(c)))) => Some(c),
            _ => None,
        }
    };
    if let Some(c) = coll {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let kind = crate::latency::OpKind::of(cmd.name);
        server.latency.record(db, c, kind, micros);
    }
}

fn count(server: &ServerState, cmd: &Command) {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &server.opcounters;
    match cmd.counter {
        Counter::Command => c.command.fetch_add(1, Relaxed),
        Counter::Query => c.query.fetch_add(1, Relaxed),
        Counter::GetMore => c.getmore.fetch_add(1, Relaxed),
        Counter::SelfCounted => 0,
    };
}

/// Wraps a synchronous command body as a [`CmdFuture`].
pub fn ready(r: CmdResult) -> CmdFuture<'static> {
    Box::pin(std::future::ready(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted_and_unique() {
        let names: Vec<_> = REGISTRY.iter().map(|c| c.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            names, sorted,
            "REGISTRY must be sorted byte-wise without duplicates"
        );
        let mut all: Vec<_> = REGISTRY
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "names and aliases must be unique");
    }

    #[test]
    fn lookup_is_case_sensitive_with_aliases() {
        assert_eq!(lookup("isMaster").unwrap().name, "isMaster");
        assert_eq!(lookup("ismaster").unwrap().name, "isMaster");
        assert_eq!(lookup("buildinfo").unwrap().name, "buildInfo");
        assert!(lookup("PING").is_none());
        assert!(lookup("Hello").is_none());
    }

    #[test]
    fn test_commands_are_registered_and_sorted() {
        let mut s = TEST_COMMANDS.to_vec();
        s.sort_unstable();
        assert_eq!(s, TEST_COMMANDS);
        for name in TEST_COMMANDS {
            assert!(lookup(name).is_some(), "{name}");
        }
    }

    /// The commands MongoDB 7.0 runs before authentication (`requiresAuth: false` in
    /// `listCommands`), plus the test commands, which mongod also exempts.
    #[test]
    fn pre_auth_commands_are_mongods() {
        let mut pre: Vec<_> = REGISTRY
            .iter()
            .filter(|c| !c.requires_auth)
            .map(|c| c.name)
            .collect();
        pre.sort_unstable();
        assert_eq!(
            pre,
            [
                "authenticate",
                "buildInfo",
                "configureFailPoint",
                "connectionStatus",
                "hello",
                "isMaster",
                "listCommands",
                "ping",
                "saslContinue",
                "saslStart",
                "sleep",
                "waitForFailPoint",
            ]
        );
    }

    /// The reply's fixed pieces are what bson writes for them.
    #[test]
    fn reply_pieces_are_bsons() {
        let ok = bson::rawdoc! {"ok": 1.0};
        let b = ok.as_bytes();
        assert_eq!(&b[4..b.len() - 1], &OK_ELEMENT);
        let empty = empty_reply();
        assert_eq!(empty.as_bytes(), RawDocumentBuf::new().as_bytes());
        assert!(empty.into_bytes().capacity() >= 5 + REPLY_TRAILER);
    }

    #[test]
    fn generic_arguments_sorted() {
        let mut s = GENERIC_ARGUMENTS.to_vec();
        s.sort_unstable();
        assert_eq!(s, GENERIC_ARGUMENTS);
    }

    /// The `match` answers exactly what a search of [`GENERIC_ARGUMENTS`] answers: for every
    /// generic argument, every command's own field and name, and near misses.
    #[test]
    fn generic_argument_match_is_the_list() {
        let mut names: Vec<String> = GENERIC_ARGUMENTS.iter().map(|s| s.to_string()).collect();
        for c in REGISTRY {
            names.push(c.name.to_string());
            if let Fields::Strict(fields) = c.fields {
                names.extend(fields.iter().map(|s| s.to_string()));
            }
        }
        for g in GENERIC_ARGUMENTS {
            names.push(g.to_uppercase());
            names.push(format!("{g}x"));
            names.push(g[..g.len() - 1].to_string());
        }
        names.extend(["", "$", "db", "LSID"].map(String::from));
        for n in &names {
            assert_eq!(
                is_generic_argument(n),
                GENERIC_ARGUMENTS.contains(&n.as_str()),
                "{n}"
            );
            let listed = GENERIC_ARGUMENTS.iter().find(|g| **g == n.as_str());
            assert_eq!(generic_argument(n.as_bytes()), listed.copied(), "{n}");
        }
    }
}
