//! `usersInfo`: describes users of `admin.system.users`.
//!
//! Forms: `1` (the command database's users), `"name"` (on the command database),
//! `{user, db}`, an array of those, `{forAllDBs: true}` (every user). Options:
//! `showCredentials` (default false), `showCustomData` (default true), `filter` (a query on
//! the described documents), `showPrivileges` / `showAuthenticationRestrictions`.
//!
//! Each user is described as MongoDB's `usersInfo` does: the stored document without
//! `authenticationRestrictions`, without `credentials` unless asked, plus `mechanisms` (the
//! credential names) at the end; sorted by user, then db. Missing users are skipped.
//! `showPrivileges` and `showAuthenticationRestrictions` (only on an exact-match list, else
//! IllegalOperation 20 as in MongoDB) add `inheritedRoles` (every role held, directly or
//! through other roles), `inheritedPrivileges` (their privileges merged) and the (always empty:
//! Cairn refuses restrictions) `inheritedAuthenticationRestrictions` /
//! `authenticationRestrictions`.

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

use super::args::{opt_bool, opt_document};
use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::{UserName, users};
use crate::error::{CommandError, ErrorCode};

/// `usersInfo`.
pub static COMMAND: Command = Command {
    name: "usersInfo",
    aliases: &[],
    help: "Returns information about users.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[
        "showCredentials",
        "showCustomData",
        "showPrivileges",
        "showAuthenticationRestrictions",
        "filter",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::users_info),
    run,
};

/// Which users a request names.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    Db,
    All,
    Users(Vec<UserName>),
}

fn parse_user_name(v: RawBsonRef<'_>, db: &str) -> Result<UserName, CommandError> {
    match v {
        RawBsonRef::String(s) => Ok(UserName {
            user: s.to_string(),
            db: db.to_string(),
        }),
        RawBsonRef::Document(d) => {
            let part = |k: &str| match d.get(k) {
                Ok(Some(RawBsonRef::String(s))) => Ok(s.to_string()),
                _ => Err(CommandError::bad_value(format!(
                    "UserName must contain a field named: {k}"
                ))),
            };
            Ok(UserName {
                user: part("user")?,
                db: part("db")?,
            })
        }
        _ => Err(CommandError::bad_value(
            "UserName must be either a string or an object",
        )),
    }
}

fn parse_target(v: RawBsonRef<'_>, db: &str) -> Result<Target, CommandError> {
    match v {
        RawBsonRef::Int32(1) | RawBsonRef::Int64(1) => Ok(Target::Db),
        RawBsonRef::Double(1.0) => Ok(Target::Db),
        RawBsonRef::Document(d) if matches!(d.get("forAllDBs"), Ok(Some(_))) => {
            match d.get("forAllDBs") {
                Ok(Some(v)) if super::truthy(&v) => Ok(Target::All),
                _ => Err(CommandError::bad_value(
                    "UserName must contain a field named: user",
                )),
            }
        }
        RawBsonRef::Array(arr) => {
            let mut out = Vec::new();
            for el in arr {
                let el =
                    el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                out.push(parse_user_name(el, db)?);
            }
            if out.is_empty() {
                return Err(CommandError::bad_value(
                    "$and/$or/$nor must be a nonempty array",
                ));
            }
            Ok(Target::Users(out))
        }
        other => Ok(Target::Users(vec![parse_user_name(other, db)?])),
    }
}

/// A stored user as `usersInfo` shows it.
fn describe(doc: &RawDocument, credentials: bool, custom_data: bool) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for (k, v) in doc.iter().flatten() {
        match k.as_str() {
            "authenticationRestrictions" => continue,
            "credentials" if !credentials => continue,
            "customData" if !custom_data => continue,
            _ => out.append(k, v),
        }
    }
    let mut mechs = RawArrayBuf::new();
    for m in users::mechanisms(doc) {
        mechs.push(m);
    }
    out.append(cstr!("mechanisms"), mechs);
    out
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const C: &str = "usersInfo";
        let req = inv.req;
        let body = req.body;
        let Some(Ok((_, arg))) = body.iter().next() else {
            return Err(CommandError::missing_field("usersInfo.usersInfo"));
        };
        let target = parse_target(arg, req.db)?;
        let show_credentials = opt_bool(body, C, "showCredentials")?.unwrap_or(false);
        let show_custom = opt_bool(body, C, "showCustomData")?.unwrap_or(true);
        let show_privileges = opt_bool(body, C, "showPrivileges")?.unwrap_or(false);
        let show_restrictions =
            opt_bool(body, C, "showAuthenticationRestrictions")?.unwrap_or(false);
        let filter = match opt_document(body, C, "filter")? {
            Some(f) => Some(cairn_query::filter::Filter::parse(f)?),
            None => None,
        };
        if (show_privileges || show_restrictions)
            && (!matches!(target, Target::Users(_)) || filter.is_some())
        {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "Privilege or restriction details require exact-match usersInfo queries.",
            ));
        }
        let store = inv.server.store.clone();
        let db = req.db.to_string();
        let details = show_privileges || show_restrictions;
        let mut docs = crate::blocking::run(move || {
            let docs = users::scan(&store, &mut |d| {
                let user = d.get_str("user").unwrap_or_default();
                let udb = d.get_str("db").unwrap_or_default();
                match &target {
                    Target::All => true,
                    Target::Db => udb == db,
                    Target::Users(list) => list.iter().any(|u| u.user == user && u.db == udb),
                }
            })?;
            // The role graph, read once, resolves every described user's roles.
            let catalog = if details {
                Some(crate::auth::roles::RoleCatalog::load(&store)?)
            } else {
                None
            };
            Ok::<_, CommandError>(
                docs.into_iter()
                    .map(|d| {
                        let resolved = catalog.as_ref().map(|c| c.resolve(&users::roles_of(&d)));
                        (d, resolved)
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await?;
        let key = |d: &(RawDocumentBuf, _)| {
            (
                d.0.get_str("user").unwrap_or_default().to_string(),
                d.0.get_str("db").unwrap_or_default().to_string(),
            )
        };
        docs.sort_by_key(key);
        let mut arr = RawArrayBuf::new();
        for (d, resolved) in &docs {
            let mut shown = describe(d, show_credentials, show_custom);
            if let Some(resolved) = resolved {
                shown.append(
                    cstr!("inheritedRoles"),
                    crate::auth::roles::roles_bson(&resolved.roles),
                );
                if show_privileges {
                    shown.append(cstr!("inheritedPrivileges"), resolved.privileges.to_bson());
                }
                if show_restrictions {
                    // Cairn refuses non-empty restrictions, so there are none to inherit.
                    shown.append(
                        cstr!("inheritedAuthenticationRestrictions"),
                        RawArrayBuf::new(),
                    );
                    shown.append(cstr!("authenticationRestrictions"), RawArrayBuf::new());
                }
            }
            if filter.as_ref().is_none_or(|f| f.matches(&shown)) {
                arr.push(shown);
            }
        }
        let mut out = RawDocumentBuf::new();
        out.append(cstr!("users"), arr);
        Ok(out.into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn target(d: RawDocumentBuf) -> Result<Target, CommandError> {
        parse_target(d.get("u").unwrap().unwrap(), "db")
    }

    #[test]
    fn target_forms() {
        let u = |n: &str, d: &str| UserName {
            user: n.into(),
            db: d.into(),
        };
        assert_eq!(target(rawdoc! {"u": 1}).unwrap(), Target::Db);
        assert_eq!(
            target(rawdoc! {"u": {"forAllDBs": true}}).unwrap(),
            Target::All
        );
        assert_eq!(
            target(rawdoc! {"u": "a"}).unwrap(),
            Target::Users(vec![u("a", "db")])
        );
        assert_eq!(
            target(rawdoc! {"u": ["a", {"user": "b", "db": "x"}]}).unwrap(),
            Target::Users(vec![u("a", "db"), u("b", "x")])
        );
        let msg = |d| target(d).unwrap_err().message;
        assert_eq!(
            msg(rawdoc! {"u": 2.5}),
            "UserName must be either a string or an object"
        );
        assert_eq!(
            msg(rawdoc! {"u": {"user": "a"}}),
            "UserName must contain a field named: db"
        );
        assert_eq!(
            msg(rawdoc! {"u": []}),
            "$and/$or/$nor must be a nonempty array"
        );
    }
}
