//! Per-command authorization: what each command needs, and the check the dispatcher runs
//! before a command's handler.
//!
//! Every [`crate::commands::Command`] declares an [`Authz`]: no privilege, actions on the
//! namespace it names, on its database, on the cluster, or a check computed from the request
//! ([`Authz::Custom`], for commands whose needs depend on their arguments: `aggregate` takes
//! the union of its stages' needs including the namespaces `$lookup`, `$graphLookup`,
//! `$unionWith`, `$out` and `$merge` name; `explain` needs what the explained command needs;
//! `getMore` and `killCursors` look at who owns the cursor; ...). The custom checks are
//! the functions of this module, so a command file only names its declaration.
//!
//! [`check`] runs when authentication is on: for an authenticated connection it resolves the users'
//! privileges through the cache ([`crate::auth::roles::user_authz`]) and refuses with
//! Unauthorized (13) `not authorized on <db> to execute command { ... }` (the command shown
//! as MongoDB logs it, `pwd` redacted), or with the cursor-ownership message for `getMore`.
//! A session belongs to the users that first used it: another user's command in it is
//! refused the same way. An unauthenticated connection reaches it only with a pre-auth
//! command (nothing to check) or through the localhost exception, which is checked against
//! the few privileges MongoDB grants it (creating the first user). [`after`] records who owns a new cursor or session and drops the
//! privilege cache after a user command, or when a command wrote `admin.system.users` or
//! `admin.system.roles` directly.
//!
//! Invariants: with authentication off, or before authentication, nothing here refuses
//! anything; a check never changes data; a request the check cannot parse is left to the
//! command's own parser (which refuses it) except where parsing decides the target, where
//! the stricter target (the database) is required.

use std::sync::Arc;

use bson::{RawArray, RawBsonRef, RawDocument, RawDocumentBuf, raw::cstr};

use super::UserName;
use super::privilege::{ActionSet, ActionType as A, ResourcePattern as R};
use super::roles::{UserAuthz, parse_role_name, user_authz};
use crate::client::Client;
use crate::commands::{Command, Request};
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// A computed check: `Ok(true)` allowed, `Ok(false)` refused with the standard message,
/// `Err` refused with that error.
pub type CustomCheck = fn(&AuthCtx<'_>, &Request<'_>) -> Result<bool, CommandError>;

/// What a command needs.
#[derive(Clone, Copy)]
pub enum Authz {
    /// No privilege (any authenticated user may run it; the pre-authentication commands).
    None,
    /// These actions on the namespace the command's first field names (`<$db>.<value>`);
    /// on the database when the first field is not a collection name.
    Ns(&'static [A]),
    /// These actions on the command's database.
    Db(&'static [A]),
    /// These actions on the cluster.
    Cluster(&'static [A]),
    /// A check computed from the request.
    Custom(CustomCheck),
}

impl std::fmt::Debug for Authz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authz::None => f.write_str("None"),
            Authz::Ns(a) => f.debug_tuple("Ns").field(a).finish(),
            Authz::Db(a) => f.debug_tuple("Db").field(a).finish(),
            Authz::Cluster(a) => f.debug_tuple("Cluster").field(a).finish(),
            Authz::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// What a check may look at: the connection's users and their resolved privileges.
pub struct AuthCtx<'a> {
    /// Shared state (cursor owners, sessions).
    pub server: &'a ServerState,
    /// The authenticated users.
    pub users: &'a [UserName],
    /// Their roles and privileges.
    pub authz: &'a UserAuthz,
}

impl AuthCtx<'_> {
    /// Whether every action of `actions` is granted on `target`.
    pub fn allows(&self, target: &R, actions: &[A]) -> bool {
        self.authz
            .privileges
            .is_authorized(target, &ActionSet::of(actions))
    }

    /// Whether every requirement holds.
    pub fn allows_all(&self, needs: &[(R, ActionSet)]) -> bool {
        needs
            .iter()
            .all(|(r, a)| self.authz.privileges.is_authorized(r, a))
    }
}

/// Whether the connection's users may run `cmd` as requested.
pub fn authorized(
    ctx: &AuthCtx<'_>,
    cmd: &Command,
    req: &Request<'_>,
) -> Result<bool, CommandError> {
    Ok(match cmd.authz {
        Authz::None => true,
        Authz::Ns(a) => ctx.allows(&first_ns(req), a),
        Authz::Db(a) => ctx.allows(&R::db(req.db), a),
        Authz::Cluster(a) => ctx.allows(&R::Cluster, a),
        Authz::Custom(f) => f(ctx, req)?,
    })
}

/// The Unauthorized error for a refused command.
pub fn unauthorized(req: &Request<'_>) -> CommandError {
    CommandError::new(
        ErrorCode::Unauthorized,
        format!(
            "not authorized on {} to execute command {}",
            req.db,
            cairn_storage::display::document(&super::redact::command(req.body))
        ),
    )
}

/// The authorization check the dispatcher runs before a command (see the module doc).
pub async fn check(
    server: &Arc<ServerState>,
    client: &Client,
    cmd: &Command,
    req: &Request<'_>,
) -> Result<(), CommandError> {
    if !server.config.auth {
        return Ok(());
    }
    if !client.auth.is_authenticated() {
        // Past the authentication gate unauthenticated: a pre-authentication command, or the
        // localhost exception, which grants only what creating the first user needs.
        if !cmd.requires_auth {
            return Ok(());
        }
        let authz = localhost_privileges();
        let ctx = AuthCtx {
            server,
            users: &[],
            authz,
        };
        if !authorized(&ctx, cmd, req)? {
            return Err(unauthorized(req));
        }
        return Ok(());
    }
    let authz = user_authz(server, &client.auth.users).await?;
    let ctx = AuthCtx {
        server,
        users: &client.auth.users,
        authz: &authz,
    };
    if !session_owned(&ctx, req.body) || !authorized(&ctx, cmd, req)? {
        return Err(unauthorized(req));
    }
    Ok(())
}

/// What the localhost exception grants (MongoDB's default privileges of an unauthenticated
/// loopback connection while no user exists): `createUser` and `grantRole` on `admin`,
/// `createUser` on `$external`, and the replica-set cluster actions.
fn localhost_privileges() -> &'static UserAuthz {
    static PRIVILEGES: std::sync::OnceLock<UserAuthz> = std::sync::OnceLock::new();
    PRIVILEGES.get_or_init(|| {
        let mut privileges = super::privilege::PrivilegeSet::new();
        privileges.add(&super::privilege::Privilege::new(
            R::db("admin"),
            &[A::CreateUser, A::GrantRole],
        ));
        privileges.add(&super::privilege::Privilege::new(
            R::db("$external"),
            &[A::CreateUser],
        ));
        privileges.add(&super::privilege::Privilege::new(
            R::Cluster,
            &[A::AddShard, A::ReplSetConfigure, A::ReplSetGetStatus],
        ));
        UserAuthz {
            roles: Vec::new(),
            all_roles: Vec::new(),
            privileges,
        }
    })
}

fn lsid_of(body: &RawDocument) -> Option<cairn_storage::sessions::Lsid> {
    crate::cursor::session_of(body).and_then(|v| <[u8; 16]>::try_from(v.as_slice()).ok())
}

/// Whether the command's session (if any) is unowned or owned by these users.
fn session_owned(ctx: &AuthCtx<'_>, body: &RawDocument) -> bool {
    let Some(lsid) = lsid_of(body) else {
        return true;
    };
    match ctx.server.sessions.get(&lsid) {
        Some(s) => s.owner.get().is_none_or(|o| o.as_slice() == ctx.users),
        None => true,
    }
}

/// Who opened a cursor, and the command that opened it (re-checked at each `getMore`, as
/// MongoDB re-checks a cursor's originating privileges).
#[derive(Debug)]
pub struct CursorOrigin {
    /// The users that opened it.
    pub users: Vec<UserName>,
    /// The opening command.
    pub command: &'static Command,
    /// Its database.
    pub db: String,
    /// Its body.
    pub body: RawDocumentBuf,
}

/// Bookkeeping after a command ran: owners of the cursor and session it opened (when
/// authenticated), and cache invalidation when it wrote the user or role collections.
pub fn after(
    server: &ServerState,
    client: &Client,
    cmd: &'static Command,
    req: &Request<'_>,
    reply: Option<&RawDocument>,
) {
    if writes_auth_collections(cmd, req) {
        super::invalidate(server);
    }
    if !server.config.auth || !client.auth.is_authenticated() {
        return;
    }
    let users = &client.auth.users;
    if let Some(reply) = reply
        && let Ok(Some(RawBsonRef::Document(c))) = reply.get("cursor")
        && let Ok(Some(RawBsonRef::Int64(id))) = c.get("id")
        && id != 0
    {
        server.cursors.set_origin(
            id,
            Arc::new(CursorOrigin {
                users: users.clone(),
                command: cmd,
                db: req.db.to_string(),
                body: req.body.to_owned(),
            }),
        );
    }
    if let Some(lsid) = lsid_of(req.body)
        && let Some(s) = server.sessions.get(&lsid)
    {
        let _ = s.owner.get_or_init(|| users.clone());
    }
}

fn writes_auth_collections(cmd: &Command, req: &Request<'_>) -> bool {
    // The user commands change `admin.system.users` whatever database they run on.
    if matches!(
        cmd.name,
        "createUser"
            | "updateUser"
            | "dropUser"
            | "dropAllUsersFromDatabase"
            | "grantRolesToUser"
            | "revokeRolesFromUser"
    ) {
        return true;
    }
    if req.db != "admin" {
        return false;
    }
    match cmd.name {
        "dropDatabase" => true,
        "drop" => matches!(
            req.body.iter().next(),
            Some(Ok((_, RawBsonRef::String("system.users" | "system.roles"))))
        ),
        _ => false,
    }
}

// ---- targets -------------------------------------------------------------------------

/// The namespace a command's first field names, or its database when the field is not a
/// non-empty string.
pub fn first_ns(req: &Request<'_>) -> R {
    match req.body.iter().next() {
        Some(Ok((_, RawBsonRef::String(c)))) if !c.is_empty() => R::ns(req.db, c),
        _ => R::db(req.db),
    }
}

/// `db.coll` split at the first dot, as a target.
fn full_ns(s: &str) -> Option<R> {
    let (db, coll) = s.split_once('.')?;
    (!db.is_empty() && !coll.is_empty()).then(|| R::ns(db, coll))
}

fn flag(body: &RawDocument, name: &str) -> bool {
    match body.get(name) {
        Ok(Some(v)) => crate::commands::truthy(&v),
        _ => false,
    }
}

fn need(r: R, actions: &[A]) -> (R, ActionSet) {
    (r, ActionSet::of(actions))
}

// ---- CRUD ----------------------------------------------------------------------------

/// `insert`: insert (+ bypassDocumentValidation when asked).
pub fn insert(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let mut a = vec![A::Insert];
    if flag(req.body, "bypassDocumentValidation") {
        a.push(A::BypassDocumentValidation);
    }
    Ok(ctx.allows(&first_ns(req), &a))
}

fn any_upsert(arr: Option<&RawArray>) -> bool {
    arr.is_some_and(|arr| {
        arr.into_iter().flatten().any(|s| match s {
            RawBsonRef::Document(d) => flag(d, "upsert"),
            _ => false,
        })
    })
}

/// `update`: update (+ insert when a statement upserts, + bypassDocumentValidation).
pub fn update(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let mut a = vec![A::Update];
    if any_upsert(req.body.get_array("updates").ok()) {
        a.push(A::Insert);
    }
    if flag(req.body, "bypassDocumentValidation") {
        a.push(A::BypassDocumentValidation);
    }
    Ok(ctx.allows(&first_ns(req), &a))
}

/// `findAndModify`: find + update or remove (+ insert on upsert, + bypass).
pub fn find_and_modify(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let mut a = vec![A::Find];
    if flag(req.body, "remove") {
        a.push(A::Remove);
    } else {
        a.push(A::Update);
        if flag(req.body, "upsert") {
            a.push(A::Insert);
        }
    }
    if flag(req.body, "bypassDocumentValidation") {
        a.push(A::BypassDocumentValidation);
    }
    Ok(ctx.allows(&first_ns(req), &a))
}

// ---- aggregation ---------------------------------------------------------------------

/// Stages that carry their own privileges instead of `find` on the aggregated namespace.
const SELF_AUTHORIZING_FIRST: &[&str] = &[
    "$changeStream",
    "$collStats",
    "$currentOp",
    "$documents",
    "$indexStats",
    "$listLocalSessions",
    "$listSearchIndexes",
    "$listSessions",
    "$planCacheStats",
];

/// A `{db, coll}` or string namespace in `db`.
fn stage_ns(v: RawBsonRef<'_>, db: &str, coll_field: &str) -> Option<R> {
    match v {
        RawBsonRef::String(c) => Some(R::ns(db, c)),
        RawBsonRef::Document(d) => {
            let db = d.get_str("db").unwrap_or(db);
            d.get_str(coll_field).ok().map(|c| R::ns(db, c))
        }
        _ => None,
    }
}

/// The privileges a pipeline needs, beyond the base `find` (appended to `out`).
pub fn pipeline_needs(
    pipeline: &RawArray,
    db: &str,
    target: &R,
    bypass: bool,
    out: &mut Vec<(R, ActionSet)>,
) {
    for stage in pipeline.into_iter().flatten() {
        let RawBsonRef::Document(stage) = stage else {
            continue;
        };
        let Some(Ok((name, spec))) = stage.iter().next() else {
            continue;
        };
        let spec_doc = match spec {
            RawBsonRef::Document(d) => Some(d),
            _ => None,
        };
        match name.as_str() {
            "$lookup" | "$graphLookup" => {
                if let Some(d) = spec_doc {
                    if let Ok(Some(from)) = d.get("from")
                        && let Some(ns) = stage_ns(from, db, "coll")
                    {
                        out.push(need(ns, &[A::Find]));
                    }
                    if let Ok(p) = d.get_array("pipeline") {
                        pipeline_needs(p, db, target, bypass, out);
                    }
                }
            }
            "$unionWith" => match spec {
                RawBsonRef::String(c) => out.push(need(R::ns(db, c), &[A::Find])),
                RawBsonRef::Document(d) => {
                    if let Ok(c) = d.get_str("coll") {
                        out.push(need(R::ns(db, c), &[A::Find]));
                    }
                    if let Ok(p) = d.get_array("pipeline") {
                        pipeline_needs(p, db, target, bypass, out);
                    }
                }
                _ => {}
            },
            "$facet" => {
                if let Some(d) = spec_doc {
                    for (_, p) in d.iter().flatten() {
                        if let RawBsonRef::Array(p) = p {
                            pipeline_needs(p, db, target, bypass, out);
                        }
                    }
                }
            }
            "$out" => {
                if let Some(ns) = stage_ns(spec, db, "coll") {
                    let mut a = vec![A::Insert, A::Remove];
                    if bypass {
                        a.push(A::BypassDocumentValidation);
                    }
                    out.push(need(ns, &a));
                }
            }
            "$merge" => {
                let (into, matched, not_matched) = match spec {
                    RawBsonRef::String(_) => (Some(spec), None, None),
                    RawBsonRef::Document(d) => (
                        d.get("into").ok().flatten(),
                        d.get("whenMatched").ok().flatten(),
                        d.get_str("whenNotMatched").ok(),
                    ),
                    _ => (None, None, None),
                };
                if let Some(ns) = into.and_then(|i| stage_ns(i, db, "coll")) {
                    let mut a = Vec::new();
                    if not_matched.is_none_or(|w| w == "insert") {
                        a.push(A::Insert);
                    }
                    if !matches!(matched, Some(RawBsonRef::String("fail"))) {
                        a.push(A::Update);
                    }
                    if bypass {
                        a.push(A::BypassDocumentValidation);
                    }
                    out.push(need(ns, &a));
                }
            }
            "$collStats" => out.push(need(target.clone(), &[A::CollStats])),
            "$indexStats" => out.push(need(target.clone(), &[A::IndexStats])),
            "$planCacheStats" => out.push(need(target.clone(), &[A::PlanCacheRead])),
            "$listSearchIndexes" => out.push(need(target.clone(), &[A::ListSearchIndexes])),
            "$changeStream" => {
                let cluster = spec_doc.is_some_and(|d| flag(d, "allChangesForCluster"));
                let r = if cluster {
                    R::AnyNormal
                } else {
                    target.clone()
                };
                out.push(need(r, &[A::ChangeStream, A::Find]));
            }
            "$currentOp" if spec_doc.is_some_and(|d| flag(d, "allUsers")) => {
                out.push(need(R::Cluster, &[A::Inprog]));
            }
            "$listSessions" if spec_doc.is_some_and(|d| flag(d, "allUsers")) => {
                out.push(need(R::Cluster, &[A::ListSessions]));
            }
            _ => {}
        }
    }
}

/// Every requirement of an `aggregate` request.
pub fn aggregate_needs(req: &Request<'_>) -> Vec<(R, ActionSet)> {
    let target = first_ns(req);
    let mut out = Vec::new();
    let Ok(pipeline) = req.body.get_array("pipeline") else {
        return vec![need(target, &[A::Find])];
    };
    let first_stage = pipeline
        .into_iter()
        .flatten()
        .next()
        .and_then(|s| match s {
            RawBsonRef::Document(d) => d.iter().next().and_then(|e| e.ok()).map(|(k, _)| k),
            _ => None,
        })
        .map(|k| k.as_str().to_string());
    let collectionless = matches!(target, R::Database(_));
    let self_authorizing = first_stage
        .as_deref()
        .is_some_and(|s| SELF_AUTHORIZING_FIRST.contains(&s));
    if !collectionless && !self_authorizing {
        out.push(need(target.clone(), &[A::Find]));
    }
    let bypass = flag(req.body, "bypassDocumentValidation");
    pipeline_needs(pipeline, req.db, &target, bypass, &mut out);
    out
}

/// `aggregate`: the union of its stages' needs.
pub fn aggregate(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(ctx.allows_all(&aggregate_needs(req)))
}

/// `explain`: what the explained command needs.
pub fn explain(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let Ok(Some(RawBsonRef::Document(inner))) = req.body.get("explain") else {
        return Ok(true);
    };
    let Some(Ok((name, _))) = inner.iter().next() else {
        return Ok(true);
    };
    let Some(cmd) = crate::commands::lookup(name.as_str()) else {
        return Ok(true);
    };
    if cmd.name == "explain" {
        return Ok(false);
    }
    let inner_req = Request {
        name: name.as_str(),
        db: req.db,
        body: inner,
        exhaust_allowed: false,
    };
    authorized(ctx, cmd, &inner_req)
}

// ---- DDL -----------------------------------------------------------------------------

fn view_needs(body: &RawDocument, db: &str, out: &mut Vec<(R, ActionSet)>) {
    if let Ok(on) = body.get_str("viewOn") {
        out.push(need(R::ns(db, on), &[A::Find]));
        if let Ok(p) = body.get_array("pipeline") {
            let target = R::ns(db, on);
            pipeline_needs(p, db, &target, false, out);
        }
    }
}

/// `create`: createCollection or insert on the namespace; a view also needs find on what it
/// reads.
pub fn create(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let target = first_ns(req);
    if !ctx.allows(&target, &[A::CreateCollection]) && !ctx.allows(&target, &[A::Insert]) {
        return Ok(false);
    }
    let mut needs = Vec::new();
    view_needs(req.body, req.db, &mut needs);
    Ok(ctx.allows_all(&needs))
}

/// `collMod`: collMod on the namespace (+ find on a new view definition's sources).
pub fn coll_mod(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let mut needs = vec![need(first_ns(req), &[A::CollMod])];
    view_needs(req.body, req.db, &mut needs);
    Ok(ctx.allows_all(&needs))
}

/// `renameCollection`: within a database, renameCollectionSameDB on it (+ dropCollection on
/// the target with `dropTarget`), provided it does not expose a collection the user cannot
/// read; otherwise find + dropCollection on the source, insert + createIndex (+
/// dropCollection) on the target.
pub fn rename_collection(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let (Ok(from), Ok(to)) = (req.body.get_str("renameCollection"), req.body.get_str("to")) else {
        return Ok(true);
    };
    let (Some(src), Some(dst)) = (full_ns(from), full_ns(to)) else {
        return Ok(true);
    };
    let drop_target = flag(req.body, "dropTarget");
    if let (R::Namespace(sdb, scoll), R::Namespace(ddb, dcoll)) = (&src, &dst)
        && sdb == ddb
        && !scoll.starts_with("system.")
        && !dcoll.starts_with("system.")
    {
        let can_rename = ctx.allows(&R::db(sdb), &[A::RenameCollectionSameDB]);
        let can_drop = !drop_target || ctx.allows(&dst, &[A::DropCollection]);
        let read_src = ctx.allows(&src, &[A::Find]);
        let read_dst = ctx.allows(&dst, &[A::Find]);
        if can_rename && can_drop && (read_src || !read_dst) {
            return Ok(true);
        }
    }
    let mut dst_actions = vec![A::Insert, A::CreateIndex];
    if drop_target {
        dst_actions.push(A::DropCollection);
    }
    Ok(ctx.allows(&src, &[A::Find, A::DropCollection]) && ctx.allows(&dst, &dst_actions))
}

/// `cloneCollectionAsCapped`: find on the source; insert + createIndex on the target.
pub fn clone_collection_as_capped(
    ctx: &AuthCtx<'_>,
    req: &Request<'_>,
) -> Result<bool, CommandError> {
    let src = first_ns(req);
    let Ok(to) = req.body.get_str("toCollection") else {
        return Ok(ctx.allows(&src, &[A::Find]));
    };
    Ok(
        ctx.allows(&src, &[A::Find])
            && ctx.allows(&R::ns(req.db, to), &[A::Insert, A::CreateIndex]),
    )
}

// ---- listing -------------------------------------------------------------------------

/// `listCollections`: listCollections on the database, or — with `authorizedCollections`
/// and `nameOnly` — any privilege in it (the reply then lists only what the user can act
/// on, see [`collection_filter`]).
pub fn list_collections(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    if ctx.allows(&R::db(req.db), &[A::ListCollections]) {
        return Ok(true);
    }
    Ok(flag(req.body, "authorizedCollections")
        && flag(req.body, "nameOnly")
        && ctx.authz.privileges.any_in_db(req.db))
}

/// For a `listCollections` handler: the user's privileges when the reply must list only
/// the collections they can act on (`authorizedCollections` + `nameOnly` without the
/// listCollections action), else `None` (list everything).
pub async fn collection_filter(
    server: &Arc<ServerState>,
    client: &Client,
    req: &Request<'_>,
) -> Result<Option<Arc<UserAuthz>>, CommandError> {
    let filtered = flag(req.body, "authorizedCollections") && flag(req.body, "nameOnly");
    if !(server.config.auth && client.auth.is_authenticated() && filtered) {
        return Ok(None);
    }
    let a = user_authz(server, &client.auth.users).await?;
    if a.privileges.allows(&R::db(req.db), A::ListCollections) {
        return Ok(None);
    }
    Ok(Some(a))
}

/// Whether a user may see collection `db.coll` in a filtered `listCollections`: some
/// privilege matches it.
pub fn may_see_collection(a: &UserAuthz, db: &str, coll: &str) -> bool {
    let target = R::ns(db, coll);
    a.privileges
        .privileges()
        .iter()
        .any(|p| !p.actions.is_empty() && p.resource.covers(&target))
}

/// For a `listDatabases` handler: `None` to list every database, or the privileges that
/// decide which databases are listed (a database is listed when the user may act on
/// something in it). `authorizedDatabases` defaults to "filter unless the user holds
/// listDatabases on the cluster"; `false` without that privilege is Unauthorized.
pub async fn database_filter(
    server: &Arc<ServerState>,
    client: &Client,
    authorized_databases: Option<bool>,
) -> Result<Option<Arc<UserAuthz>>, CommandError> {
    if !server.config.auth || !client.auth.is_authenticated() {
        return Ok(None);
    }
    let a = user_authz(server, &client.auth.users).await?;
    let may_list_all = a.privileges.allows(&R::Cluster, A::ListDatabases);
    match authorized_databases {
        Some(false) if !may_list_all => Err(CommandError::new(
            ErrorCode::Unauthorized,
            "Insufficient permissions to list all databases",
        )),
        Some(false) => Ok(None),
        None if may_list_all => Ok(None),
        _ => Ok(Some(a)),
    }
}

// ---- cursors, operations, sessions ---------------------------------------------------

/// `getMore`: the cursor must belong to the connection's users, who must still hold the
/// privileges of the command that opened it.
pub fn get_more(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let id = match req.body.iter().next() {
        Some(Ok((_, RawBsonRef::Int64(id)))) => id,
        _ => return Ok(true),
    };
    let origin = match ctx.server.cursors.origin(id) {
        None => return Ok(true),
        Some(None) => None,
        Some(Some(o)) => Some(o),
    };
    let owners = origin.as_ref().map(|o| o.users.as_slice()).unwrap_or(&[]);
    if owners != ctx.users {
        return Err(CommandError::new(
            ErrorCode::Unauthorized,
            format!("cursor id {id} was not created by the authenticated user"),
        ));
    }
    if let Some(o) = origin
        && o.command.name != "getMore"
    {
        let name = match o.body.iter().next() {
            Some(Ok((k, _))) => k.as_str(),
            _ => o.command.name,
        };
        let opening = Request {
            name,
            db: &o.db,
            body: &o.body,
            exhaust_allowed: false,
        };
        if !authorized(ctx, o.command, &opening)? {
            return Err(CommandError::new(
                ErrorCode::Unauthorized,
                format!("not authorized for getMore with cursor id {id}"),
            ));
        }
    }
    Ok(true)
}

/// `killCursors`: a user's own cursors are free; another user's need killAnyCursor (on the
/// cluster or the namespace).
pub fn kill_cursors(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let target = first_ns(req);
    if ctx.allows(&R::Cluster, &[A::KillAnyCursor]) || ctx.allows(&target, &[A::KillAnyCursor]) {
        return Ok(true);
    }
    let Ok(ids) = req.body.get_array("cursors") else {
        return Ok(true);
    };
    for id in ids.into_iter().flatten() {
        let id = match id {
            RawBsonRef::Int64(i) => i,
            RawBsonRef::Int32(i) => i64::from(i),
            _ => continue,
        };
        if let Some(owners) = ctx.server.cursors.owners(id)
            && owners.as_slice() != ctx.users
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether every session a session command names (`{<cmd>: [{id: UUID}, ...]}`) is unowned
/// or owned by these users.
fn named_sessions_owned(ctx: &AuthCtx<'_>, req: &Request<'_>) -> bool {
    let Some(Ok((_, RawBsonRef::Array(list)))) = req.body.iter().next() else {
        return true;
    };
    list.into_iter().flatten().all(|v| {
        let RawBsonRef::Document(d) = v else {
            return true;
        };
        let Ok(Some(RawBsonRef::Binary(b))) = d.get("id") else {
            return true;
        };
        let Ok(lsid) = <[u8; 16]>::try_from(b.bytes) else {
            return true;
        };
        ctx.server
            .sessions
            .get(&lsid)
            .is_none_or(|s| s.owner.get().is_none_or(|o| o.as_slice() == ctx.users))
    })
}

/// `endSessions` / `refreshSessions`: only the user's own sessions (a session belongs to the
/// users that first used it).
pub fn own_sessions(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(named_sessions_owned(ctx, req))
}

/// `killSessions`: the user's own sessions are free; another user's need killAnySession.
pub fn kill_sessions(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(named_sessions_owned(ctx, req) || ctx.allows(&R::Cluster, &[A::KillAnySession]))
}

/// `profile`: enableProfiler on the database; only reading the settings (a negative level
/// without `slowms`/`sampleRate`) is also allowed to whoever may read `system.profile`.
pub fn profile(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let level = match req.body.iter().next() {
        Some(Ok((_, RawBsonRef::Int32(i)))) => f64::from(i),
        Some(Ok((_, RawBsonRef::Int64(i)))) => i as f64,
        Some(Ok((_, RawBsonRef::Double(d)))) => d,
        _ => 0.0,
    };
    let has = |f: &str| req.body.get(f).ok().flatten().is_some();
    if level < 0.0
        && !has("slowms")
        && !has("sampleRate")
        && ctx.allows(&R::ns(req.db, "system.profile"), &[A::Find])
    {
        return Ok(true);
    }
    Ok(ctx.allows(&R::db(req.db), &[A::EnableProfiler]))
}

/// `currentOp`: inprog on the cluster unless `$ownOps: true`.
pub fn current_op(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(flag(req.body, "$ownOps") || ctx.allows(&R::Cluster, &[A::Inprog]))
}

// ---- role commands -------------------------------------------------------------------

fn roles_field(req: &Request<'_>, field: &str) -> Vec<super::RoleName> {
    let Ok(arr) = req.body.get_array(field) else {
        return Vec::new();
    };
    arr.into_iter()
        .flatten()
        .filter_map(|v| parse_role_name(v, req.db).ok())
        .collect()
}

fn can_grant_roles(ctx: &AuthCtx<'_>, req: &Request<'_>, field: &str, action: A) -> bool {
    roles_field(req, field)
        .iter()
        .all(|r| ctx.allows(&R::db(&r.db), &[action]))
}

/// Granting (or revoking) a privilege needs grantRole (revokeRole) on the database it
/// names, or on `admin` for one spanning databases or the cluster.
fn can_grant_privileges(ctx: &AuthCtx<'_>, req: &Request<'_>, action: A) -> bool {
    let Ok(arr) = req.body.get_array("privileges") else {
        return true;
    };
    let Ok(ps) = super::privilege::parse_privilege_array(arr) else {
        return true;
    };
    ps.iter().all(|p| {
        let db = p.resource.db_name().unwrap_or("admin");
        ctx.allows(&R::db(db), &[action])
    })
}

/// `createRole`: createRole on the database, grantRole for each inherited role and each
/// granted privilege, setAuthenticationRestriction for restrictions.
pub fn create_role(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let db = R::db(req.db);
    Ok(ctx.allows(&db, &[A::CreateRole])
        && can_grant_roles(ctx, req, "roles", A::GrantRole)
        && can_grant_privileges(ctx, req, A::GrantRole)
        && (req
            .body
            .get("authenticationRestrictions")
            .ok()
            .flatten()
            .is_none()
            || ctx.allows(&db, &[A::SetAuthenticationRestriction])))
}

/// `updateRole`: grantRole for the new roles and privileges, revokeRole on the role's
/// database (the old ones go), setAuthenticationRestriction for restrictions.
pub fn update_role(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let db = R::db(req.db);
    let has = |f: &str| req.body.get(f).ok().flatten().is_some();
    if (has("roles") || has("privileges")) && !ctx.allows(&db, &[A::RevokeRole]) {
        return Ok(false);
    }
    Ok(can_grant_roles(ctx, req, "roles", A::GrantRole)
        && can_grant_privileges(ctx, req, A::GrantRole)
        && (!has("authenticationRestrictions")
            || ctx.allows(&db, &[A::SetAuthenticationRestriction])))
}

/// `grantRolesToRole`: grantRole on each granted role's database.
pub fn grant_roles_to_role(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(can_grant_roles(ctx, req, "roles", A::GrantRole))
}

/// `revokeRolesFromRole`: revokeRole on each revoked role's database.
pub fn revoke_roles_from_role(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(can_grant_roles(ctx, req, "roles", A::RevokeRole))
}

/// `grantPrivilegesToRole`: grantRole on each privilege's database (admin for the cluster).
pub fn grant_privileges_to_role(
    ctx: &AuthCtx<'_>,
    req: &Request<'_>,
) -> Result<bool, CommandError> {
    Ok(can_grant_privileges(ctx, req, A::GrantRole))
}

/// `revokePrivilegesFromRole`: revokeRole on each privilege's database.
pub fn revoke_privileges_from_role(
    ctx: &AuthCtx<'_>,
    req: &Request<'_>,
) -> Result<bool, CommandError> {
    Ok(can_grant_privileges(ctx, req, A::RevokeRole))
}

/// `rolesInfo`: viewRole on the database of each role asked for, except roles the user
/// holds (directly or by inheritance); `rolesInfo: 1` needs viewRole on the database.
pub fn roles_info(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let Ok(Some(v)) = req.body.get("rolesInfo") else {
        return Ok(true);
    };
    let names: Vec<super::RoleName> = match v {
        RawBsonRef::Array(arr) => arr
            .into_iter()
            .flatten()
            .filter_map(|v| parse_role_name(v, req.db).ok())
            .collect(),
        RawBsonRef::String(_) | RawBsonRef::Document(_) => {
            parse_role_name(v, req.db).into_iter().collect()
        }
        _ => return Ok(ctx.allows(&R::db(req.db), &[A::ViewRole])),
    };
    Ok(names
        .iter()
        .all(|r| ctx.authz.all_roles.contains(r) || ctx.allows(&R::db(&r.db), &[A::ViewRole])))
}

// ---- user commands (for the authentication module's commands) ------------------------

fn is_self(ctx: &AuthCtx<'_>, req: &Request<'_>, field: &str) -> bool {
    req.body
        .get_str(field)
        .is_ok_and(|u| ctx.users.iter().any(|x| x.user == u && x.db == req.db))
}

/// `createUser`: createUser on the database, grantRole on each granted role's database,
/// setAuthenticationRestriction for restrictions.
pub fn create_user(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let db = R::db(req.db);
    Ok(ctx.allows(&db, &[A::CreateUser])
        && can_grant_roles(ctx, req, "roles", A::GrantRole)
        && (req
            .body
            .get("authenticationRestrictions")
            .ok()
            .flatten()
            .is_none()
            || ctx.allows(&db, &[A::SetAuthenticationRestriction])))
}

/// `updateUser`: changePassword (changeOwnPassword for oneself), changeCustomData
/// (changeOwnCustomData), grantRole on each new role's database and revokeRole on the
/// user's, setAuthenticationRestriction for restrictions.
pub fn update_user(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let db = R::db(req.db);
    let me = is_self(ctx, req, "updateUser");
    let has = |f: &str| req.body.get(f).ok().flatten().is_some();
    let own_or = |own: A, any: A| ctx.allows(&db, &[any]) || (me && ctx.allows(&db, &[own]));
    if has("pwd") && !own_or(A::ChangeOwnPassword, A::ChangePassword) {
        return Ok(false);
    }
    if has("customData") && !own_or(A::ChangeOwnCustomData, A::ChangeCustomData) {
        return Ok(false);
    }
    if has("roles")
        && !(can_grant_roles(ctx, req, "roles", A::GrantRole) && ctx.allows(&db, &[A::RevokeRole]))
    {
        return Ok(false);
    }
    Ok(!has("authenticationRestrictions") || ctx.allows(&db, &[A::SetAuthenticationRestriction]))
}

/// `grantRolesToUser`: grantRole on each granted role's database.
pub fn grant_roles_to_user(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(can_grant_roles(ctx, req, "roles", A::GrantRole))
}

/// `revokeRolesFromUser`: revokeRole on each revoked role's database.
pub fn revoke_roles_from_user(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    Ok(can_grant_roles(ctx, req, "roles", A::RevokeRole))
}

/// `usersInfo`: viewUser on the database of each user asked for, except oneself;
/// `forAllDBs` needs viewUser on the cluster, `usersInfo: 1` on the database.
pub fn users_info(ctx: &AuthCtx<'_>, req: &Request<'_>) -> Result<bool, CommandError> {
    let Ok(Some(v)) = req.body.get("usersInfo") else {
        return Ok(true);
    };
    let view = |db: &str| ctx.allows(&R::db(db), &[A::ViewUser]);
    let user_of = |v: RawBsonRef<'_>| -> Option<UserName> {
        match v {
            RawBsonRef::String(u) => Some(UserName {
                user: u.to_string(),
                db: req.db.to_string(),
            }),
            RawBsonRef::Document(d) => Some(UserName {
                user: d.get_str("user").ok()?.to_string(),
                db: d.get_str("db").ok()?.to_string(),
            }),
            _ => None,
        }
    };
    let allowed = |u: &UserName| ctx.users.contains(u) || view(&u.db);
    Ok(match v {
        RawBsonRef::Document(d) if flag(d, "forAllDBs") => ctx.allows(&R::Cluster, &[A::ViewUser]),
        RawBsonRef::Array(arr) => arr
            .into_iter()
            .flatten()
            .filter_map(user_of)
            .all(|u| allowed(&u)),
        RawBsonRef::String(_) | RawBsonRef::Document(_) => user_of(v).is_none_or(|u| allowed(&u)),
        _ => view(req.db),
    })
}

/// The declarations of the user-management commands, which the authentication module
/// registers (`createUser`, `updateUser`, `dropUser`, `dropAllUsersFromDatabase`,
/// `usersInfo`, `grantRolesToUser`, `revokeRolesFromUser`).
pub const USER_COMMANDS: &[(&str, Authz)] = &[
    ("createUser", Authz::Custom(create_user)),
    ("dropAllUsersFromDatabase", Authz::Db(&[A::DropUser])),
    ("dropUser", Authz::Db(&[A::DropUser])),
    ("grantRolesToUser", Authz::Custom(grant_roles_to_user)),
    ("revokeRolesFromUser", Authz::Custom(revoke_roles_from_user)),
    ("updateUser", Authz::Custom(update_user)),
    ("usersInfo", Authz::Custom(users_info)),
];

/// Appends `{user, db}` entries to an array (for connectionStatus).
pub fn users_bson(users: &[UserName]) -> bson::RawArrayBuf {
    let mut arr = bson::RawArrayBuf::new();
    for u in users {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("user"), u.user.as_str());
        d.append(cstr!("db"), u.db.as_str());
        arr.push(d);
    }
    arr
}

#[cfg(test)]
mod tests;
