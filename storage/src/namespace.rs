//! Database and collection name rules (MongoDB 7.0's, with its messages).
//!
//! Every name that reaches the catalog passed these checks, which is what lets the catalog
//! use NUL as a separator in its keys. Rules:
//! - database: non-empty, at most 63 bytes, none of `/ \ . " $`, space or NUL;
//! - collection: non-empty, no NUL, no `$`, must not start with `.`, and `db.coll` at most
//!   255 bytes;
//! - `system.*` collections are reserved: only the names MongoDB lets clients create exist,
//!   and even those cannot be written through normal CRUD (`system.profile`,
//!   `system.views`, …), so user writes to `system.*` are refused.

use crate::error::{Result, StorageError};

/// Longest database name in bytes.
pub const MAX_DB_NAME: usize = 63;
/// Longest `db.collection` namespace in bytes.
pub const MAX_NAMESPACE: usize = 255;

fn invalid(msg: String) -> StorageError {
    StorageError::InvalidNamespace(msg)
}

/// Checks a database name as every command's `$db` is checked.
pub fn check_db_name(db: &str) -> Result<()> {
    if db.contains('\0') {
        return Err(invalid(
            "database names cannot have embedded null characters".into(),
        ));
    }
    if db.contains('.') {
        return Err(invalid(format!(
            "'.' is an invalid character in a db name: {db}"
        )));
    }
    if db.len() > MAX_DB_NAME {
        return Err(invalid(format!(
            "db name must be at most {MAX_DB_NAME} characters, found: {}",
            db.len()
        )));
    }
    Ok(())
}

/// Checks a database name for creating data in it (stricter than [`check_db_name`]).
pub fn check_db_for_create(db: &str, coll: &str) -> Result<()> {
    check_db_name(db)?;
    if db.is_empty() || db.contains(['/', '\\', ' ', '"']) {
        return Err(invalid(format!(
            "Invalid namespace specified '{db}.{coll}'"
        )));
    }
    if db.contains('$') {
        return Err(invalid(format!("Invalid namespace: {db}.{coll}")));
    }
    Ok(())
}

/// System collections a client may create (MongoDB's `isLegalClientSystemNS`).
fn legal_system_collection(db: &str, coll: &str) -> bool {
    let any = matches!(
        coll,
        "system.users" | "system.js" | "system.views" | "system.profile"
    ) || coll
        .strip_prefix("system.buckets.")
        .is_some_and(|rest| !rest.is_empty());
    let per_db = match db {
        "admin" => matches!(
            coll,
            "system.roles" | "system.version" | "system.keys" | "system.backup_users"
        ),
        "config" => matches!(
            coll,
            "system.sessions"
                | "system.indexBuilds"
                | "system.sharding_ddl_coordinators"
                | "system.configsvrCoordinators"
        ),
        "local" => matches!(
            coll,
            "system.replset" | "system.healthlog" | "system.configsvrRestore"
        ),
        _ => false,
    };
    any || per_db
}

/// Checks a collection name as `create` and implicit creation by writes check it.
pub fn check_collection_for_create(db: &str, coll: &str) -> Result<()> {
    check_db_for_create(db, coll)?;
    check_collection_name(coll)?;
    if coll.contains('$') {
        return Err(invalid(format!("Invalid collection name: {coll}")));
    }
    if coll.starts_with("system.") && !legal_system_collection(db, coll) {
        return Err(invalid(format!("Invalid system namespace: {db}.{coll}")));
    }
    if db.len() + 1 + coll.len() > MAX_NAMESPACE {
        return Err(invalid(format!(
            "Fully qualified namespace is too long. Namespace: {db}.{coll} Max: {MAX_NAMESPACE}"
        )));
    }
    Ok(())
}

/// Checks a namespace for user writes (insert/update/delete): the create rules, plus no
/// writes to reserved system collections.
pub fn check_write(db: &str, coll: &str) -> Result<()> {
    if coll.starts_with("system.") {
        if matches!(coll, "system.profile" | "system.views") {
            return Err(invalid(format!("cannot write to {db}.{coll}")));
        }
        return Err(invalid(format!("Invalid system namespace: {db}.{coll}")));
    }
    check_collection_for_create(db, coll)
}

/// Checks a collection name used to read (find, getMore, listIndexes...).
pub fn check_collection_name(coll: &str) -> Result<()> {
    if coll.is_empty() {
        return Err(invalid("Collection names cannot be empty".into()));
    }
    if coll.contains('\0') {
        return Err(invalid(
            "namespaces cannot have embedded null characters".into(),
        ));
    }
    if coll.starts_with('.') {
        return Err(invalid(format!(
            "Collection names cannot start with '.': {coll}"
        )));
    }
    Ok(())
}

/// Splits `db.coll` at the first dot (collection names may contain dots).
pub fn split_namespace(ns: &str) -> Option<(&str, &str)> {
    let (db, coll) = ns.split_once('.')?;
    if db.is_empty() || coll.is_empty() {
        return None;
    }
    Some((db, coll))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<()>) -> String {
        match r {
            Err(StorageError::InvalidNamespace(m)) => m,
            other => panic!("expected InvalidNamespace, got {other:?}"),
        }
    }

    #[test]
    fn database_names() {
        check_db_name("test").unwrap();
        check_db_name(&"a".repeat(63)).unwrap();
        assert_eq!(
            msg(check_db_name(&"a".repeat(64))),
            "db name must be at most 63 characters, found: 64"
        );
        assert_eq!(
            msg(check_db_name("a.b")),
            "'.' is an invalid character in a db name: a.b"
        );
        assert!(check_db_name("a\0b").is_err());
        assert_eq!(
            msg(check_db_for_create("/", "coll")),
            "Invalid namespace specified '/.coll'"
        );
        assert_eq!(
            msg(check_db_for_create("a$b", "coll")),
            "Invalid namespace: a$b.coll"
        );
        check_db_for_create("データベース", "c").unwrap();
        check_db_for_create("--", "c").unwrap();
    }

    #[test]
    fn collection_names() {
        check_collection_for_create("db", "collection.name").unwrap();
        check_collection_for_create("db", " ").unwrap();
        check_collection_for_create("db", "+-/*<>=~!@#%^&|\\`?()[],;:. ").unwrap();
        assert_eq!(
            msg(check_collection_for_create("db", "a$b")),
            "Invalid collection name: a$b"
        );
        assert_eq!(
            msg(check_collection_for_create("db", ".x")),
            "Collection names cannot start with '.': .x"
        );
        assert_eq!(
            msg(check_collection_for_create("db", "")),
            "Collection names cannot be empty"
        );
        assert_eq!(
            msg(check_collection_for_create("db", "system.foo")),
            "Invalid system namespace: db.system.foo"
        );
        check_collection_for_create("db", "system.js").unwrap();
        check_collection_for_create("admin", "system.version").unwrap();
        assert!(check_collection_for_create("db", "system.version").is_err());
        let long = "a".repeat(255 - 3);
        check_collection_for_create("db", &long).unwrap();
        assert!(
            msg(check_collection_for_create("db", &format!("{long}a")))
                .starts_with("Fully qualified namespace is too long")
        );
        assert_eq!(
            msg(check_write("db", "system.views")),
            "cannot write to db.system.views"
        );
        assert!(check_write("db", "system.js").is_err());
    }

    #[test]
    fn splitting() {
        assert_eq!(split_namespace("a.b.c"), Some(("a", "b.c")));
        assert_eq!(split_namespace("a."), None);
        assert_eq!(split_namespace("nodot"), None);
    }
}
