//! The user catalog: user documents in the ordinary collection `admin.system.users`, in
//! MongoDB's shape, and the role-name checks user commands need.
//!
//! A user document is `{_id: "<db>.<user>", userId: UUID, user, db, credentials:
//! {"SCRAM-SHA-1": {iterationCount, salt, storedKey, serverKey}, "SCRAM-SHA-256": {…}},
//! customData?, roles: [{role, db}]}` — the `_id` makes `(user, db)` unique. Roles defined by
//! users live in `admin.system.roles` as `{_id: "<db>.<role>", role, db, privileges, roles}`.
//!
//! Invariants: only salted keys are stored, never a password or its digest; every function
//! here blocks on storage and must run inside [`crate::blocking::run`]; the catalog is read
//! straight from storage (a point read by `_id`), so a change is seen by the next command
//! on every connection without a cache to invalidate.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::{Durability, Store};

use super::scram::{Credential, Mechanism};
use super::{RoleName, UserName};
use crate::error::{CommandError, ErrorCode};

/// The database holding the catalog.
pub const ADMIN_DB: &str = "admin";
/// The users collection.
pub const USERS: &str = "system.users";
/// The roles collection.
pub const ROLES: &str = "system.roles";

/// MongoDB's default `scramIterationCount` (SCRAM-SHA-1).
pub const DEFAULT_SHA1_ITERATIONS: u32 = 10_000;
/// MongoDB's default `scramSHA256IterationCount`.
pub const DEFAULT_SHA256_ITERATIONS: u32 = 15_000;

/// Whether `role` is one of MongoDB's built-in roles on its database.
pub fn is_builtin_role(role: &RoleName) -> bool {
    super::builtin_roles::get(&role.role, &role.db).is_some()
}

/// Whether a role exists: a built-in role on its database, or a document in
/// `admin.system.roles` ([`super::roles::role_exists`]).
pub fn role_exists(store: &Store, role: &RoleName) -> Result<bool, CommandError> {
    super::roles::role_exists(store, role)
}

/// RoleNotFound (31) for the first of `roles` that does not exist.
pub fn check_roles_exist(store: &Store, roles: &[RoleName]) -> Result<(), CommandError> {
    for r in roles {
        if !role_exists(store, r)? {
            return Err(CommandError::new(
                ErrorCode::Location(31),
                format!("Could not find role: {}@{}", r.role, r.db),
            ));
        }
    }
    Ok(())
}

/// The `_id` of a user's document.
pub fn user_id(name: &UserName) -> String {
    format!("{}.{}", name.db, name.user)
}

/// The user's document, if it exists.
pub fn get(store: &Store, name: &UserName) -> Result<Option<RawDocumentBuf>, CommandError> {
    let Some(meta) = store.collection(ADMIN_DB, USERS) else {
        return Ok(None);
    };
    let id = user_id(name);
    let doc = store.read()?.get(&meta, RawBsonRef::String(&id))?;
    // The `_id` encodes both parts, but "a.b" + "c" and "a" + "b.c" share one: check them.
    Ok(doc.filter(|d| {
        d.get_str("user").ok() == Some(name.user.as_str())
            && d.get_str("db").ok() == Some(name.db.as_str())
    }))
}

/// Every user document for which `keep` holds, in `_id` order.
pub fn scan(
    store: &Store,
    keep: &mut dyn FnMut(&RawDocument) -> bool,
) -> Result<Vec<RawDocumentBuf>, CommandError> {
    let Some(meta) = store.collection(ADMIN_DB, USERS) else {
        return Ok(Vec::new());
    };
    let read = store.read()?;
    let mut out = Vec::new();
    let mut resume: Option<Vec<u8>> = None;
    loop {
        let batch = read.scan_where(
            &meta,
            resume.as_deref(),
            false,
            cairn_storage::store::ScanLimits::docs(1000),
            keep,
        )?;
        out.extend(batch.docs);
        match batch.resume {
            Some(r) => resume = Some(r),
            None => return Ok(out),
        }
    }
}

/// Whether any user or user-defined role exists (the localhost exception ends then).
pub fn any_exist(store: &Store) -> Result<bool, CommandError> {
    for coll in [USERS, ROLES] {
        if let Some(meta) = store.collection(ADMIN_DB, coll) {
            let batch = store.read()?.scan(&meta, None, 1, usize::MAX)?;
            if !batch.docs.is_empty() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The stored credential of `mech` in a user document.
pub fn credential(user: &RawDocument, mech: Mechanism) -> Option<Credential> {
    let creds = user.get_document("credentials").ok()?;
    Credential::from_doc(creds.get_document(mech.name()).ok()?)
}

/// The mechanisms a user document has credentials for, in the document's order.
pub fn mechanisms(user: &RawDocument) -> Vec<String> {
    user.get_document("credentials")
        .map(|c| {
            c.iter()
                .flatten()
                .map(|(k, _)| k.as_str().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Builds `credentials` for `pwd` (createUser/updateUser): the named `mechanisms` (all when
/// `None`), SHA-1 over MongoDB's digest unless `digest` is false (then `pwd` is the digest
/// already), SHA-256 over the SASLprep'd password (which needs `digest`).
pub fn build_credentials(
    name: &UserName,
    pwd: &str,
    mechanisms: Option<&[&str]>,
    digest: bool,
    iterations: (u32, u32),
) -> Result<RawDocumentBuf, CommandError> {
    let mut wanted = Vec::new();
    match mechanisms {
        None => wanted.extend(Mechanism::ALL),
        Some(list) => {
            for m in list {
                let Some(mech) = Mechanism::from_name(m) else {
                    return Err(CommandError::bad_value(format!(
                        "Unknown auth mechanism '{m}'"
                    )));
                };
                wanted.push(mech);
            }
        }
    }
    let mut out = RawDocumentBuf::new();
    for m in Mechanism::ALL {
        if !wanted.contains(&m) {
            continue;
        }
        let cred = match m {
            Mechanism::Sha1 => {
                let input = if digest {
                    super::scram::mongo_digest(&name.user, pwd)
                } else {
                    pwd.to_string()
                };
                Credential::with_random_salt(m, &input, iterations.0)
            }
            Mechanism::Sha256 => {
                if !digest {
                    return Err(CommandError::bad_value(
                        "Use of SCRAM-SHA-256 requires undigested passwords",
                    ));
                }
                let input = m.password_input(&name.user, pwd)?;
                Credential::with_random_salt(m, &input, iterations.1)
            }
        };
        let key = <&bson::raw::CStr>::try_from(m.name())
            .map_err(|e| CommandError::new(ErrorCode::InternalError, e.to_string()))?;
        out.append(key, cred.to_doc());
    }
    Ok(out)
}

/// A new user document in MongoDB's field order: `_id, userId, user, db, credentials,
/// customData?, roles` (a fresh `userId` UUID).
pub fn new_user_doc(
    name: &UserName,
    credentials: RawDocumentBuf,
    custom_data: Option<&RawDocument>,
    roles: &[RoleName],
) -> RawDocumentBuf {
    use bson::raw::cstr;
    let mut doc = RawDocumentBuf::new();
    doc.append(cstr!("_id"), user_id(name));
    doc.append(cstr!("userId"), bson::Binary::from_uuid(bson::Uuid::new()));
    doc.append(cstr!("user"), name.user.as_str());
    doc.append(cstr!("db"), name.db.as_str());
    doc.append(cstr!("credentials"), credentials);
    if let Some(c) = custom_data {
        doc.append(cstr!("customData"), c.to_owned());
    }
    doc.append(cstr!("roles"), roles_array(roles));
    doc
}

/// Creates the first user — `root@admin` with the given name and password — unless some
/// user already exists. Returns whether it created one.
pub fn create_initial_root(
    store: &Store,
    user: &str,
    pwd: &str,
    iterations: (u32, u32),
) -> Result<bool, CommandError> {
    if !scan(store, &mut |_| true)?.is_empty() {
        return Ok(false);
    }
    let name = UserName {
        user: user.to_string(),
        db: ADMIN_DB.to_string(),
    };
    let creds = build_credentials(&name, pwd, None, true, iterations)?;
    let root = RoleName {
        role: "root".into(),
        db: ADMIN_DB.into(),
    };
    insert(store, &name, &new_user_doc(&name, creds, None, &[root]))?;
    Ok(true)
}

fn users_coll(
    store: &Store,
) -> Result<std::sync::Arc<cairn_storage::catalog::CollectionMeta>, CommandError> {
    if let Some(meta) = store.collection(ADMIN_DB, USERS) {
        return Ok(meta);
    }
    // Created directly: `system.users` is closed to client writes, not to the catalog.
    match store.create_collection(ADMIN_DB, USERS, &RawDocumentBuf::new()) {
        Ok(_) | Err(cairn_storage::StorageError::NamespaceExists(_)) => {}
        Err(e) => return Err(e.into()),
    }
    store.collection(ADMIN_DB, USERS).ok_or_else(|| {
        CommandError::new(
            ErrorCode::NamespaceNotFound,
            "admin.system.users was dropped while it was being created",
        )
    })
}

/// Inserts a new user document; 51003 when the user exists.
pub fn insert(store: &Store, name: &UserName, doc: &RawDocument) -> Result<(), CommandError> {
    let meta = users_coll(store)?;
    store.write(Durability::Journal, |tx| {
        let id = user_id(name);
        if tx.get(&meta, RawBsonRef::String(&id))?.is_some() {
            return Err(CommandError::new(
                ErrorCode::Location(51003),
                format!("User \"{}@{}\" already exists", name.user, name.db),
            ));
        }
        tx.insert(&meta, doc)?;
        Ok(())
    })
}

/// Rewrites a user document with `change`; `Ok(false)` when the user does not exist.
pub fn update(
    store: &Store,
    name: &UserName,
    change: &mut dyn FnMut(&RawDocument) -> Result<RawDocumentBuf, CommandError>,
) -> Result<bool, CommandError> {
    let Some(meta) = store.collection(ADMIN_DB, USERS) else {
        return Ok(false);
    };
    store.write(Durability::Journal, |tx| {
        let id = user_id(name);
        let Some(old) = tx.get(&meta, RawBsonRef::String(&id))? else {
            return Ok(false);
        };
        let new = change(&old)?;
        let key = cairn_storage::store::id_key(RawBsonRef::String(&id))?;
        Ok(tx.replace(&meta, &key, &new)?)
    })
}

/// Removes users matching `which`; returns how many.
pub fn remove(
    store: &Store,
    which: &mut dyn FnMut(&RawDocument) -> bool,
) -> Result<u64, CommandError> {
    let Some(meta) = store.collection(ADMIN_DB, USERS) else {
        return Ok(0);
    };
    let victims = scan(store, which)?;
    store.write(Durability::Journal, |tx| {
        let mut n = 0;
        for d in &victims {
            if let Ok(id) = d.get_str("_id")
                && tx.delete(&meta, RawBsonRef::String(id))?
            {
                n += 1;
            }
        }
        Ok::<u64, CommandError>(n)
    })
}

/// A role list as user commands take it: each a name (resolved against `db`) or
/// `{role, db}`.
pub fn parse_roles(
    field: &str,
    v: RawBsonRef<'_>,
    db: &str,
) -> Result<Vec<RoleName>, CommandError> {
    let RawBsonRef::Array(arr) = v else {
        return Err(CommandError::wrong_type(
            field,
            crate::commands::type_name(&v),
            "array",
        ));
    };
    let mut out: Vec<RoleName> = Vec::new();
    for el in arr {
        let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let role = match el {
            RawBsonRef::String(s) => RoleName {
                role: s.to_string(),
                db: db.to_string(),
            },
            RawBsonRef::Document(d) => {
                let part = |k: &str| match d.get(k) {
                    Ok(Some(RawBsonRef::String(s))) => Ok(s.to_string()),
                    Ok(Some(_)) => Err(CommandError::bad_value(format!(
                        "RoleName must contain a string field named: {k}"
                    ))),
                    _ => Err(CommandError::bad_value(format!(
                        "RoleName must contain a field named: {k}"
                    ))),
                };
                RoleName {
                    role: part("role")?,
                    db: part("db")?,
                }
            }
            _ => {
                return Err(CommandError::bad_value(
                    "RoleName must be either a string or an object",
                ));
            }
        };
        if !out.contains(&role) {
            out.push(role);
        }
    }
    Ok(out)
}

/// `[{role, db}, …]`.
pub fn roles_array(roles: &[RoleName]) -> bson::RawArrayBuf {
    let mut arr = bson::RawArrayBuf::new();
    for r in roles {
        arr.push(bson::rawdoc! {"role": r.role.as_str(), "db": r.db.as_str()});
    }
    arr
}

/// The `roles` of a user document.
pub fn roles_of(user: &RawDocument) -> Vec<RoleName> {
    let Ok(arr) = user.get_array("roles") else {
        return Vec::new();
    };
    arr.into_iter()
        .flatten()
        .filter_map(|v| {
            let d = v.as_document()?;
            Some(RoleName {
                role: d.get_str("role").ok()?.to_string(),
                db: d.get_str("db").ok()?.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(role: &str, db: &str) -> RoleName {
        RoleName {
            role: role.into(),
            db: db.into(),
        }
    }

    #[test]
    fn builtin_roles_by_database() {
        assert!(is_builtin_role(&r("read", "test")));
        assert!(is_builtin_role(&r("dbOwner", "admin")));
        assert!(is_builtin_role(&r("root", "admin")));
        assert!(!is_builtin_role(&r("root", "test")));
        assert!(!is_builtin_role(&r("readAnyDatabase", "test")));
        assert!(!is_builtin_role(&r("read", "$external")));
        assert!(!is_builtin_role(&r("Read", "test")));
    }

    #[test]
    fn role_lists_resolve_against_the_database() {
        let v = bson::rawdoc! {"r": ["read", {"role": "root", "db": "admin"}, "read"]};
        let roles = parse_roles("createUser.roles", v.get("r").unwrap().unwrap(), "db").unwrap();
        assert_eq!(roles, vec![r("read", "db"), r("root", "admin")]);
        let bad = |d: RawDocumentBuf| {
            parse_roles("x", d.get("r").unwrap().unwrap(), "db")
                .unwrap_err()
                .message
        };
        assert_eq!(
            bad(bson::rawdoc! {"r": [1]}),
            "RoleName must be either a string or an object"
        );
        assert_eq!(
            bad(bson::rawdoc! {"r": [{"role": "x"}]}),
            "RoleName must contain a field named: db"
        );
        assert_eq!(
            parse_roles("x", RawBsonRef::Int32(1), "db")
                .unwrap_err()
                .code
                .code(),
            14
        );
    }
}
