//! User-defined roles: their documents in `admin.system.roles`, the role graph
//! (inheritance, cycle refusal), resolution of a set of roles to privileges, and the
//! per-user cache the authorization check reads.
//!
//! Map:
//! - [`RoleDoc`]: one stored role, `{_id: "<db>.<role>", role, db, privileges, roles,
//!   authenticationRestrictions}` as MongoDB stores it;
//! - [`RoleCatalog`]: every stored role, read from one snapshot (or inside the write
//!   transaction of a role command), with the questions the commands ask of the graph —
//!   does a role exist (built-in or stored), what does it inherit, what does it grant;
//! - [`role_exists`]: the lookup the user commands use when granting roles;
//! - [`AuthzCache`] / [`user_authz`]: the resolved roles and privileges of a connection's
//!   users, cached per user set and dropped by [`crate::auth::invalidate`] whenever users or
//!   roles change.
//!
//! Invariants: built-in roles are never stored and a stored role never takes a built-in
//! name; the stored graph has no cycles (the commands refuse edges that would close one),
//! and resolution still visits each role once so a hand-edited cycle cannot loop; a role
//! that does not exist grants nothing; no cache lock is held across an `.await`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, raw::cstr, rawdoc};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::{ScanLimits, StorageError, Store, WriteTxn};

use super::builtin_roles;
use super::privilege::{Privilege, PrivilegeSet, parse_privilege_array};
use super::{RoleName, UserName};
use crate::commands::type_name;
use crate::error::{CommandError, ErrorCode};
use crate::state::ServerState;

/// The database holding the user and role collections.
pub const AUTH_DB: &str = "admin";
/// The role collection (in `admin`).
pub const ROLES_COLLECTION: &str = "system.roles";
/// The user collection (in `admin`).
pub const USERS_COLLECTION: &str = "system.users";

/// `<db>.<name>`: the `_id` of a stored user or role.
pub fn doc_id(db: &str, name: &str) -> String {
    format!("{db}.{name}")
}

/// `name@db`, as MongoDB prints role and user names in messages.
pub fn at(r: &RoleName) -> String {
    format!("{}@{}", r.role, r.db)
}

/// `{role, db}`.
pub fn role_bson(r: &RoleName) -> RawDocumentBuf {
    rawdoc! {"role": r.role.as_str(), "db": r.db.as_str()}
}

/// `[{role, db}, ...]`.
pub fn roles_bson<'a>(rs: impl IntoIterator<Item = &'a RoleName>) -> RawArrayBuf {
    let mut arr = RawArrayBuf::new();
    for r in rs {
        arr.push(role_bson(r));
    }
    arr
}

/// Parses one role name as MongoDB does: a string names a role on `default_db`; a document
/// needs string `role` and `db` fields (other fields are ignored).
pub fn parse_role_name(v: RawBsonRef<'_>, default_db: &str) -> Result<RoleName, CommandError> {
    match v {
        RawBsonRef::String(s) => Ok(RoleName {
            role: s.to_string(),
            db: default_db.to_string(),
        }),
        RawBsonRef::Document(d) => {
            let (mut role, mut db) = (None, None);
            for el in d {
                let (k, v) =
                    el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                let slot = match k.as_str() {
                    "role" => &mut role,
                    "db" => &mut db,
                    _ => continue,
                };
                let RawBsonRef::String(s) = v else {
                    return Err(CommandError::bad_value(format!(
                        "RoleName must contain a string field named: {}. But, has type {}",
                        k.as_str(),
                        type_name(&v)
                    )));
                };
                if slot.is_some() {
                    return Err(CommandError::bad_value(format!(
                        "RoleName has more than one field named: {}",
                        k.as_str()
                    )));
                }
                *slot = Some(s.to_string());
            }
            let role = role.ok_or_else(|| {
                CommandError::bad_value("RoleName must contain a field named: role")
            })?;
            let db = db.ok_or_else(|| {
                CommandError::bad_value("RoleName must contain a field named: db")
            })?;
            Ok(RoleName { role, db })
        }
        _ => Err(CommandError::bad_value(
            "RoleName must be either a string or an object",
        )),
    }
}

/// Parses an array of role names (see [`parse_role_name`]).
pub fn parse_role_names(
    arr: &bson::RawArray,
    default_db: &str,
) -> Result<Vec<RoleName>, CommandError> {
    let mut out = Vec::new();
    for v in arr {
        let v = v.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        out.push(parse_role_name(v, default_db)?);
    }
    Ok(out)
}

/// One stored (user-defined) role.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleDoc {
    /// Its name.
    pub name: RoleName,
    /// Privileges granted directly.
    pub privileges: PrivilegeSet,
    /// Roles it inherits directly.
    pub roles: Vec<RoleName>,
    /// `authenticationRestrictions` as given.
    pub restrictions: RawArrayBuf,
}

impl RoleDoc {
    /// Adds the roles it does not hold yet, in order.
    pub fn add_roles(&mut self, roles: &[RoleName]) {
        for r in roles {
            if !self.roles.contains(r) {
                self.roles.push(r.clone());
            }
        }
    }

    /// A new role with no privileges or roles.
    pub fn new(name: RoleName) -> RoleDoc {
        RoleDoc {
            name,
            privileges: PrivilegeSet::new(),
            roles: Vec::new(),
            restrictions: RawArrayBuf::new(),
        }
    }

    /// The stored document.
    pub fn to_bson(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        d.append(
            cstr!("_id"),
            doc_id(&self.name.db, &self.name.role).as_str(),
        );
        d.append(cstr!("role"), self.name.role.as_str());
        d.append(cstr!("db"), self.name.db.as_str());
        d.append(cstr!("privileges"), self.privileges.to_bson());
        d.append(cstr!("roles"), roles_bson(&self.roles));
        d.append(
            cstr!("authenticationRestrictions"),
            self.restrictions.clone(),
        );
        d
    }

    /// Reads a stored document; `None` when it lacks a string `role` and `db`. Malformed
    /// privileges or role entries (possible only by writing the collection directly) are
    /// skipped: they grant nothing.
    pub fn from_bson(doc: &RawDocument) -> Option<RoleDoc> {
        let role = doc.get_str("role").ok()?;
        let db = doc.get_str("db").ok()?;
        let mut out = RoleDoc::new(RoleName {
            role: role.to_string(),
            db: db.to_string(),
        });
        if let Ok(arr) = doc.get_array("privileges") {
            for p in arr.into_iter().flatten() {
                if let RawBsonRef::Document(d) = p {
                    let mut unknown = Vec::new();
                    if let Ok(p) = Privilege::parse(d, &mut unknown) {
                        out.privileges.add(&p);
                    }
                }
            }
        }
        if let Ok(arr) = doc.get_array("roles") {
            for r in arr.into_iter().flatten() {
                if let Ok(r) = parse_role_name(r, db) {
                    out.roles.push(r);
                }
            }
        }
        if let Ok(arr) = doc.get_array("authenticationRestrictions") {
            out.restrictions = arr.to_owned();
        }
        Some(out)
    }
}

/// Every stored role, as one snapshot saw them.
#[derive(Debug, Clone, Default)]
pub struct RoleCatalog {
    roles: BTreeMap<RoleName, RoleDoc>,
}

/// What a set of roles resolves to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// Every existing role reached (the starting roles first, then what they inherit,
    /// breadth-first), each once.
    pub roles: Vec<RoleName>,
    /// The union of their privileges.
    pub privileges: PrivilegeSet,
    /// The non-empty `authenticationRestrictions` of the stored roles reached.
    pub restrictions: Vec<RawArrayBuf>,
}

impl RoleCatalog {
    /// A catalog of these role documents.
    pub fn from_docs<'a>(docs: impl IntoIterator<Item = &'a RawDocument>) -> RoleCatalog {
        let mut roles = BTreeMap::new();
        for d in docs {
            if let Some(r) = RoleDoc::from_bson(d) {
                roles.insert(r.name.clone(), r);
            }
        }
        RoleCatalog { roles }
    }

    /// Reads every stored role from a fresh snapshot.
    pub fn load(store: &Store) -> Result<RoleCatalog, CommandError> {
        let Some(meta) = store.collection(AUTH_DB, ROLES_COLLECTION) else {
            return Ok(RoleCatalog::default());
        };
        let batch = store.read()?.scan_where(
            &meta,
            None,
            false,
            ScanLimits::docs(usize::MAX),
            &mut |_| true,
        )?;
        Ok(RoleCatalog::from_docs(batch.docs.iter().map(|d| &**d)))
    }

    /// Reads every stored role inside a write transaction (so a command's checks and its
    /// write see the same roles).
    pub fn load_tx(tx: &WriteTxn<'_>, meta: &CollectionMeta) -> Result<RoleCatalog, StorageError> {
        let batch = tx.scan_where(meta, None, false, ScanLimits::docs(usize::MAX), &mut |_| {
            true
        })?;
        Ok(RoleCatalog::from_docs(batch.docs.iter().map(|d| &**d)))
    }

    /// The stored role, if any.
    pub fn get(&self, r: &RoleName) -> Option<&RoleDoc> {
        self.roles.get(r)
    }

    /// The stored roles defined on `db`, in name order.
    pub fn on_db<'a>(&'a self, db: &'a str) -> impl Iterator<Item = &'a RoleDoc> + 'a {
        self.roles.values().filter(move |r| r.name.db == db)
    }

    /// Every stored role.
    pub fn all(&self) -> impl Iterator<Item = &RoleDoc> {
        self.roles.values()
    }

    /// Whether the role exists, built-in or stored.
    pub fn exists(&self, r: &RoleName) -> bool {
        builtin_roles::get(&r.role, &r.db).is_some() || self.roles.contains_key(r)
    }

    /// The privileges a role grants itself: a built-in role's (flattened) privileges, or a
    /// stored role's own privileges. Empty for a role that does not exist.
    pub fn direct_privileges(&self, r: &RoleName) -> PrivilegeSet {
        if let Some(p) = builtin_roles::privileges(&r.role, &r.db) {
            return p;
        }
        self.roles
            .get(r)
            .map(|d| d.privileges.clone())
            .unwrap_or_default()
    }

    /// The roles a role inherits directly (none for a built-in role).
    pub fn direct_roles(&self, r: &RoleName) -> &[RoleName] {
        if builtin_roles::get(&r.role, &r.db).is_some() {
            return &[];
        }
        self.roles.get(r).map(|d| d.roles.as_slice()).unwrap_or(&[])
    }

    /// Resolves `start` (see [`Resolved`]); roles that do not exist are skipped.
    pub fn resolve(&self, start: &[RoleName]) -> Resolved {
        let mut out = Resolved::default();
        let mut seen = HashSet::new();
        let mut queue: VecDeque<&RoleName> = start.iter().collect();
        while let Some(r) = queue.pop_front() {
            if !seen.insert(r.clone()) || !self.exists(r) {
                continue;
            }
            out.roles.push(r.clone());
            out.privileges
                .add_all(self.direct_privileges(r).privileges());
            if let Some(d) = self.roles.get(r)
                && !d.restrictions.is_empty()
            {
                out.restrictions.push(d.restrictions.clone());
            }
            queue.extend(self.direct_roles(r));
        }
        out
    }

    /// Every role `r` inherits, directly or not (`r` itself excluded).
    pub fn inherited(&self, r: &RoleName) -> Vec<RoleName> {
        let mut res = self.resolve(self.direct_roles(r));
        res.roles.retain(|x| x != r);
        res.roles
    }

    /// MongoDB's checks before `role` may inherit `to_add` (createRole, updateRole,
    /// grantRolesToRole): no self-grant, a non-admin role inherits only from its own
    /// database, the role to add exists, and the edge closes no cycle.
    pub fn check_grant_roles(
        &self,
        role: &RoleName,
        to_add: &[RoleName],
    ) -> Result<(), CommandError> {
        let invalid = |m: String| CommandError::new(ErrorCode::from_code(49), m);
        for add in to_add {
            if add == role {
                return Err(invalid(format!(
                    "Cannot grant role {} to itself.",
                    at(role)
                )));
            }
            if role.db != "admin" && add.db != role.db {
                return Err(invalid(format!(
                    "Roles on the '{}' database cannot be granted roles from other databases",
                    role.db
                )));
            }
            if !self.exists(add) {
                return Err(CommandError::new(
                    ErrorCode::from_code(31),
                    format!("Cannot grant nonexistent role {}", at(add)),
                ));
            }
            if self.inherited(add).contains(role) {
                return Err(invalid(format!(
                    "Granting {} to {} would introduce a cycle in the role graph.",
                    at(add),
                    at(role)
                )));
            }
        }
        Ok(())
    }
}

/// MongoDB's check on the privileges a role may hold: a role outside `admin` may hold only
/// privileges on its own database or namespaces in it.
pub fn check_grant_privileges(role: &RoleName, ps: &[Privilege]) -> Result<(), CommandError> {
    if role.db == "admin" {
        return Ok(());
    }
    use super::privilege::ResourcePattern as R;
    for p in ps {
        match &p.resource {
            R::Database(d) | R::Namespace(d, _) if *d == role.db => {}
            _ => {
                return Err(CommandError::new(
                    ErrorCode::from_code(49),
                    format!(
                        "Roles on the '{}' database cannot be granted privileges that target \
                         other databases or the cluster",
                        role.db
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Parses a role command's `privileges` array (FailedToParse on any malformed entry).
pub fn parse_privileges(v: RawBsonRef<'_>, field: &str) -> Result<Vec<Privilege>, CommandError> {
    let RawBsonRef::Array(arr) = v else {
        return Err(CommandError::wrong_type(field, type_name(&v), "array"));
    };
    parse_privilege_array(arr)
}

/// Whether a role exists, built-in or stored in `admin.system.roles` (blocking: call it
/// through [`crate::blocking::run`]).
pub fn role_exists(store: &Store, role: &RoleName) -> Result<bool, CommandError> {
    if builtin_roles::get(&role.role, &role.db).is_some() {
        return Ok(true);
    }
    let Some(meta) = store.collection(AUTH_DB, ROLES_COLLECTION) else {
        return Ok(false);
    };
    let id = doc_id(&role.db, &role.role);
    Ok(store.read()?.get(&meta, RawBsonRef::String(&id))?.is_some())
}

/// `admin.system.roles`, created when missing.
pub fn roles_collection(store: &Store) -> Result<Arc<CollectionMeta>, CommandError> {
    if let Some(m) = store.collection(AUTH_DB, ROLES_COLLECTION) {
        return Ok(m);
    }
    match store.create_collection(AUTH_DB, ROLES_COLLECTION, &RawDocumentBuf::new()) {
        Ok(_) | Err(StorageError::NamespaceExists(_)) => {}
        Err(e) => return Err(e.into()),
    }
    store
        .collection(AUTH_DB, ROLES_COLLECTION)
        .ok_or_else(|| CommandError::new(ErrorCode::InternalError, "admin.system.roles vanished"))
}

/// The direct roles of a stored user (`admin.system.users`, `_id: "<db>.<user>"`), or
/// `None` when the user does not exist.
pub fn user_roles(store: &Store, user: &UserName) -> Result<Option<Vec<RoleName>>, CommandError> {
    let Some(meta) = store.collection(AUTH_DB, USERS_COLLECTION) else {
        return Ok(None);
    };
    let id = doc_id(&user.db, &user.user);
    let Some(doc) = store.read()?.get(&meta, RawBsonRef::String(&id))? else {
        return Ok(None);
    };
    let mut roles = Vec::new();
    if let Ok(arr) = doc.get_array("roles") {
        for r in arr.into_iter().flatten() {
            if let Ok(r) = parse_role_name(r, &user.db) {
                roles.push(r);
            }
        }
    }
    Ok(Some(roles))
}

/// What a connection's users may do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserAuthz {
    /// The roles granted directly to the users (`connectionStatus.authenticatedUserRoles`).
    pub roles: Vec<RoleName>,
    /// Those roles and every role they inherit.
    pub all_roles: Vec<RoleName>,
    /// Every privilege of those roles and what they inherit.
    pub privileges: PrivilegeSet,
}

impl UserAuthz {
    /// Resolves `users` against the stored users and roles (blocking).
    pub fn load(store: &Store, users: &[UserName]) -> Result<UserAuthz, CommandError> {
        let mut direct = Vec::new();
        for u in users {
            for r in user_roles(store, u)?.unwrap_or_default() {
                if !direct.contains(&r) {
                    direct.push(r);
                }
            }
        }
        let catalog = RoleCatalog::load(store)?;
        let resolved = catalog.resolve(&direct);
        direct.retain(|r| catalog.exists(r));
        Ok(UserAuthz {
            roles: direct,
            all_roles: resolved.roles,
            privileges: resolved.privileges,
        })
    }
}

type CacheMap = HashMap<Vec<UserName>, (u64, Arc<UserAuthz>)>;

/// Resolved privileges per set of authenticated users, valid for one generation of the
/// user and role catalog.
#[derive(Debug, Default)]
pub struct AuthzCache {
    generation: AtomicU64,
    entries: Mutex<CacheMap>,
}

impl AuthzCache {
    /// Drops every cached entry (users or roles changed).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut m) = self.entries.lock() {
            m.clear();
        }
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn get(&self, users: &[UserName]) -> Option<Arc<UserAuthz>> {
        let generation = self.generation();
        let m = self.entries.lock().ok()?;
        m.get(users)
            .filter(|(g, _)| *g == generation)
            .map(|(_, a)| a.clone())
    }

    fn put(&self, users: Vec<UserName>, generation: u64, a: Arc<UserAuthz>) {
        if let Ok(mut m) = self.entries.lock() {
            m.insert(users, (generation, a));
        }
    }
}

/// The resolved roles and privileges of `users`, from the cache or the catalog.
pub async fn user_authz(
    server: &Arc<ServerState>,
    users: &[UserName],
) -> Result<Arc<UserAuthz>, CommandError> {
    if let Some(a) = server.authz.get(users) {
        return Ok(a);
    }
    let generation = server.authz.generation();
    let store = server.store.clone();
    let owned = users.to_vec();
    let a = crate::blocking::run(move || UserAuthz::load(&store, &owned).map(Arc::new)).await?;
    server.authz.put(users.to_vec(), generation, a.clone());
    Ok(a)
}

// ---- role command helpers --------------------------------------------------------------

/// The role a role command names in its first field (`<field>: "<name>"` on the command's
/// database); the IDL type error otherwise.
pub fn command_role(body: &RawDocument, cmd: &str, db: &str) -> Result<RoleName, CommandError> {
    match body.get(cmd) {
        Ok(Some(RawBsonRef::String(s))) => Ok(RoleName {
            role: s.to_string(),
            db: db.to_string(),
        }),
        Ok(Some(v)) => Err(CommandError::wrong_type(
            &format!("{cmd}.{cmd}"),
            type_name(&v),
            "string",
        )),
        _ => Err(CommandError::missing_field(&format!("{cmd}.{cmd}"))),
    }
}

fn array_arg<'a>(
    body: &'a RawDocument,
    cmd: &str,
    field: &str,
    required: bool,
) -> Result<Option<&'a bson::RawArray>, CommandError> {
    match body.get(field) {
        Ok(Some(RawBsonRef::Array(a))) => Ok(Some(a)),
        Ok(Some(v)) => Err(CommandError::wrong_type(
            &format!("{cmd}.{field}"),
            type_name(&v),
            "array",
        )),
        _ if required => Err(CommandError::missing_field(&format!("{cmd}.{field}"))),
        _ => Ok(None),
    }
}

/// A role command's role-name array (`roles`), strings naming roles on `db`.
pub fn roles_arg(
    body: &RawDocument,
    cmd: &str,
    db: &str,
    required: bool,
) -> Result<Option<Vec<RoleName>>, CommandError> {
    array_arg(body, cmd, "roles", required)?
        .map(|a| parse_role_names(a, db))
        .transpose()
}

/// A role command's `privileges` array.
pub fn privileges_arg(
    body: &RawDocument,
    cmd: &str,
    required: bool,
) -> Result<Option<Vec<Privilege>>, CommandError> {
    array_arg(body, cmd, "privileges", required)?
        .map(parse_privilege_array)
        .transpose()
}

/// A role command's `authenticationRestrictions` (an array of documents). Cairn does not
/// enforce restrictions, so a non-empty list is NotImplemented rather than silently ignored.
pub fn restrictions_arg(
    body: &RawDocument,
    cmd: &str,
) -> Result<Option<RawArrayBuf>, CommandError> {
    let Some(arr) = array_arg(body, cmd, "authenticationRestrictions", false)? else {
        return Ok(None);
    };
    if arr.into_iter().next().is_some() {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            "authenticationRestrictions are not supported",
        ));
    }
    for (i, v) in arr.into_iter().enumerate() {
        let v = v.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if !matches!(v, RawBsonRef::Document(_)) {
            return Err(CommandError::wrong_type(
                &format!("{cmd}.authenticationRestrictions.{i}"),
                type_name(&v),
                "object",
            ));
        }
    }
    Ok(Some(arr.to_owned()))
}

/// BadValue `<cmd> command requires a non-empty "<field>" array`.
pub fn require_non_empty<T>(v: &[T], cmd: &str, field: &str) -> Result<(), CommandError> {
    if v.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{cmd} command requires a non-empty \"{field}\" array"
        )));
    }
    Ok(())
}

/// InvalidRoleModification for an attempt to change a built-in role.
pub fn refuse_builtin(r: &RoleName) -> Result<(), CommandError> {
    if builtin_roles::get(&r.role, &r.db).is_some() {
        return Err(CommandError::new(
            ErrorCode::from_code(49),
            format!("{} is a built-in role and cannot be modified.", at(r)),
        ));
    }
    Ok(())
}

/// RoleNotFound `Role <role>@<db> not found`.
pub fn role_not_found(r: &RoleName) -> CommandError {
    CommandError::new(
        ErrorCode::from_code(31),
        format!("Role {} not found", at(r)),
    )
}

/// What a role command's transaction sees and may change.
pub struct RoleTxn<'t, 's> {
    /// The write transaction.
    pub tx: &'t mut WriteTxn<'s>,
    /// `admin.system.roles`.
    pub meta: &'t CollectionMeta,
    /// Every stored role as the transaction sees it.
    pub catalog: RoleCatalog,
}

impl RoleTxn<'_, '_> {
    /// Stores a role (inserting it, or replacing the stored one).
    pub fn put(&mut self, role: &RoleDoc) -> Result<(), CommandError> {
        let doc = role.to_bson();
        let id = doc_id(&role.name.db, &role.name.role);
        if self.catalog.get(&role.name).is_some() {
            let key = cairn_storage::store::id_key(RawBsonRef::String(&id))?;
            self.tx.replace(self.meta, &key, &doc)?;
        } else {
            self.tx.insert(self.meta, &doc)?;
        }
        self.catalog.roles.insert(role.name.clone(), role.clone());
        Ok(())
    }

    /// Deletes the stored roles `gone` and removes them from every user's and role's
    /// `roles`; returns how many stored roles were deleted.
    pub fn drop_roles(&mut self, gone: &HashSet<RoleName>) -> Result<usize, CommandError> {
        let mut n = 0;
        for r in gone {
            let id = doc_id(&r.db, &r.role);
            if self.tx.delete(self.meta, RawBsonRef::String(&id))? {
                n += 1;
            }
            self.catalog.roles.remove(r);
        }
        let holders: Vec<RoleDoc> = self
            .catalog
            .all()
            .filter(|d| d.roles.iter().any(|r| gone.contains(r)))
            .cloned()
            .collect();
        for mut d in holders {
            d.roles.retain(|r| !gone.contains(r));
            self.put(&d)?;
        }
        if let Some(users) = self.tx.collection(AUTH_DB, USERS_COLLECTION)? {
            let batch = self.tx.scan_where(
                &users,
                None,
                false,
                ScanLimits::docs(usize::MAX),
                &mut |_| true,
            )?;
            for doc in batch.docs {
                let db = doc.get_str("db").unwrap_or_default().to_string();
                let Ok(arr) = doc.get_array("roles") else {
                    continue;
                };
                let mut kept = RawArrayBuf::new();
                let mut changed = false;
                for v in arr.into_iter().flatten() {
                    match parse_role_name(v, &db) {
                        Ok(r) if gone.contains(&r) => changed = true,
                        _ => kept.push(v),
                    }
                }
                if !changed {
                    continue;
                }
                let mut out = RawDocumentBuf::new();
                for (k, v) in doc.iter().flatten() {
                    if k.as_str() == "roles" {
                        out.append(k, kept.clone());
                    } else {
                        out.append(k, v);
                    }
                }
                let Ok(Some(id)) = doc.get("_id") else {
                    continue;
                };
                let key = cairn_storage::store::id_key(id)?;
                self.tx.replace(&users, &key, &out)?;
            }
        }
        Ok(n)
    }
}

/// Runs a role command's change in one write transaction over `admin.system.roles` (with
/// the stored roles loaded), then drops the privilege cache. Blocking.
pub fn modify_roles<R>(
    server: &ServerState,
    mut f: impl FnMut(&mut RoleTxn<'_, '_>) -> Result<R, CommandError>,
) -> Result<R, CommandError> {
    let meta = roles_collection(&server.store)?;
    let out = server
        .store
        .write(cairn_storage::Durability::Journal, |tx| {
            let catalog = RoleCatalog::load_tx(tx, &meta)?;
            let mut t = RoleTxn {
                tx,
                meta: &meta,
                catalog,
            };
            f(&mut t)
        });
    super::invalidate(server);
    out
}

/// Changes the stored role `name` in one transaction ([`modify_roles`]): RoleNotFound when it
/// does not exist; `f` sees the catalog as the transaction does and the role to change.
pub fn modify_role(
    server: &ServerState,
    name: &RoleName,
    mut f: impl FnMut(&RoleCatalog, &mut RoleDoc) -> Result<(), CommandError>,
) -> Result<(), CommandError> {
    modify_roles(server, |t| {
        let Some(mut role) = t.catalog.get(name).cloned() else {
            return Err(role_not_found(name));
        };
        f(&t.catalog, &mut role)?;
        t.put(&role)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::privilege::{ActionType as A, ResourcePattern as R};

    fn rn(role: &str, db: &str) -> RoleName {
        RoleName {
            role: role.into(),
            db: db.into(),
        }
    }

    fn catalog() -> RoleCatalog {
        let docs = [
            rawdoc! {"_id": "test.a", "role": "a", "db": "test",
            "privileges": [{"resource": {"db": "test", "collection": "x"}, "actions": ["insert"]}],
            "roles": [{"role": "b", "db": "test"}], "authenticationRestrictions": []},
            rawdoc! {"_id": "test.b", "role": "b", "db": "test",
            "privileges": [{"resource": {"db": "test", "collection": "y"}, "actions": ["remove"]}],
            "roles": [{"role": "read", "db": "test"}], "authenticationRestrictions": []},
            rawdoc! {"_id": "admin.c", "role": "c", "db": "admin",
            "privileges": [{"resource": {"cluster": true}, "actions": ["serverStatus"]}],
            "roles": [{"role": "a", "db": "test"}, {"role": "missing", "db": "test"}],
            "authenticationRestrictions": []},
        ];
        RoleCatalog::from_docs(docs.iter().map(|d| &**d))
    }

    #[test]
    fn resolution_follows_inheritance() {
        let c = catalog();
        let r = c.resolve(&[rn("c", "admin")]);
        assert_eq!(
            r.roles,
            vec![
                rn("c", "admin"),
                rn("a", "test"),
                rn("b", "test"),
                rn("read", "test")
            ]
        );
        let p = &r.privileges;
        assert!(p.allows(&R::Cluster, A::ServerStatus));
        assert!(p.allows(&R::ns("test", "x"), A::Insert));
        assert!(p.allows(&R::ns("test", "y"), A::Remove));
        assert!(p.allows(&R::ns("test", "z"), A::Find), "from read@test");
        assert!(!p.allows(&R::ns("test", "z"), A::Insert));
        assert_eq!(
            c.inherited(&rn("a", "test")),
            vec![rn("b", "test"), rn("read", "test")]
        );
        assert!(c.resolve(&[rn("missing", "test")]).roles.is_empty());
    }

    #[test]
    fn grant_checks_refuse_cycles_and_foreign_roles() {
        let c = catalog();
        let e = c
            .check_grant_roles(&rn("b", "test"), &[rn("a", "test")])
            .unwrap_err();
        assert_eq!(e.code.code(), 49);
        assert_eq!(
            e.message,
            "Granting a@test to b@test would introduce a cycle in the role graph."
        );
        let e = c
            .check_grant_roles(&rn("b", "test"), &[rn("b", "test")])
            .unwrap_err();
        assert_eq!(e.message, "Cannot grant role b@test to itself.");
        let e = c
            .check_grant_roles(&rn("b", "test"), &[rn("c", "admin")])
            .unwrap_err();
        assert_eq!(e.code.code(), 49);
        let e = c
            .check_grant_roles(&rn("c", "admin"), &[rn("nope", "test")])
            .unwrap_err();
        assert_eq!(e.code.code(), 31);
        c.check_grant_roles(&rn("c", "admin"), &[rn("root", "admin")])
            .unwrap();
        let e = c
            .check_grant_roles(&rn("b", "test"), &[rn("root", "test")])
            .unwrap_err();
        assert_eq!(e.code.code(), 31, "root exists only on admin");
    }

    #[test]
    fn role_names_parse_as_mongodb() {
        let d = rawdoc! {"a": "r", "b": {"role": "r", "db": "x", "extra": 1}, "c": {"role": 1},
        "d": {"db": "x"}, "e": 5};
        let get = |k: &str| d.get(k).unwrap().unwrap();
        assert_eq!(parse_role_name(get("a"), "t").unwrap(), rn("r", "t"));
        assert_eq!(parse_role_name(get("b"), "t").unwrap(), rn("r", "x"));
        assert_eq!(
            parse_role_name(get("c"), "t").unwrap_err().message,
            "RoleName must contain a string field named: role. But, has type int"
        );
        assert_eq!(
            parse_role_name(get("d"), "t").unwrap_err().message,
            "RoleName must contain a field named: role"
        );
        assert_eq!(
            parse_role_name(get("e"), "t").unwrap_err().message,
            "RoleName must be either a string or an object"
        );
    }

    #[test]
    fn privileges_outside_own_db_are_refused_for_non_admin_roles() {
        let p = Privilege::new(R::Cluster, &[A::ServerStatus]);
        assert_eq!(
            check_grant_privileges(&rn("r", "test"), std::slice::from_ref(&p))
                .unwrap_err()
                .code
                .code(),
            49
        );
        check_grant_privileges(&rn("r", "admin"), std::slice::from_ref(&p)).unwrap();
        check_grant_privileges(
            &rn("r", "test"),
            &[Privilege::new(R::ns("test", "c"), &[A::Find])],
        )
        .unwrap();
    }

    #[test]
    fn role_docs_round_trip() {
        let c = catalog();
        let a = c.get(&rn("a", "test")).unwrap();
        let again = RoleDoc::from_bson(&a.to_bson()).unwrap();
        assert_eq!(&again, a);
    }
}
