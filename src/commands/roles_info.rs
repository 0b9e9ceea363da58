//! `rolesInfo`: describes roles, built-in or user-defined.
//!
//! Forms: `rolesInfo: 1` (the user-defined roles of the command's database; with
//! `showBuiltinRoles: true` its built-in roles first), a role name (on the command's
//! database), `{role, db}`, or an array of those. Roles that do not exist are left out.
//! Each entry is `{[_id], role, db, [privileges], roles, [authenticationRestrictions],
//! isBuiltin, inheritedRoles, [inheritedPrivileges], [inheritedAuthenticationRestrictions]}`:
//! a stored role in its stored field order with the computed fields after it, a built-in
//! role with no roles of its own and its flattened privileges. `showPrivileges: true` adds
//! the privilege fields, `showAuthenticationRestrictions: true` the restriction fields;
//! `showPrivileges: "asUserFragment"` answers instead `{userFragment: {roles,
//! inheritedRoles, inheritedPrivileges}}` for the roles asked for taken together.

use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf, raw::cstr, rawdoc};

use super::{CmdFuture, Command, Counter, Fields, Invocation, opt_bool};
use crate::auth::RoleName;
use crate::auth::builtin_roles;
use crate::auth::roles::{self, RoleCatalog};
use crate::error::{CommandError, ErrorCode};

/// `rolesInfo`.
pub static COMMAND: Command = Command {
    name: "rolesInfo",
    aliases: &[],
    help: "Returns information about roles.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: true,
    api_v1: false,
    fields: Fields::Strict(&[
        "showPrivileges",
        "showBuiltinRoles",
        "showAuthenticationRestrictions",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::roles_info),
    run,
};

#[derive(Clone, Copy, PartialEq)]
enum ShowPrivileges {
    No,
    Yes,
    AsUserFragment,
}

fn is_one(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Int32(i) => i == 1,
        RawBsonRef::Int64(i) => i == 1,
        RawBsonRef::Double(d) => d.trunc() == 1.0,
        RawBsonRef::Decimal128(d) => d.to_string().parse::<f64>().is_ok_and(|f| f.trunc() == 1.0),
        _ => false,
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const CMD: &str = "rolesInfo";
        let (body, db) = (inv.req.body, inv.req.db);
        let show_privileges = match body.get("showPrivileges") {
            Ok(Some(RawBsonRef::String("asUserFragment"))) => ShowPrivileges::AsUserFragment,
            Ok(Some(RawBsonRef::String(s))) => {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    format!("Failed to parse 'showPrivileges', unknown value: {s}"),
                ));
            }
            _ => match opt_bool(body, CMD, "showPrivileges")? {
                Some(true) => ShowPrivileges::Yes,
                _ => ShowPrivileges::No,
            },
        };
        let show_builtin = opt_bool(body, CMD, "showBuiltinRoles")?.unwrap_or(false);
        let show_restrictions =
            opt_bool(body, CMD, "showAuthenticationRestrictions")?.unwrap_or(false);
        let arg = match body.get(CMD) {
            Ok(Some(v)) => v,
            _ => return Err(CommandError::missing_field("rolesInfo.rolesInfo")),
        };
        let names: Option<Vec<RoleName>> = if is_one(arg) {
            None
        } else if let RawBsonRef::Array(a) = arg {
            Some(roles::parse_role_names(a, db)?)
        } else {
            Some(vec![roles::parse_role_name(arg, db)?])
        };
        if show_privileges == ShowPrivileges::AsUserFragment && names.is_none() {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "Cannot get user fragment for all roles in a database",
            ));
        }
        let store = inv.server.store.clone();
        let catalog = crate::blocking::run(move || RoleCatalog::load(&store)).await?;
        let names = match names {
            Some(n) => n,
            None => {
                let mut n: Vec<RoleName> = Vec::new();
                if show_builtin {
                    n.extend(builtin_roles::roles_on(db).map(|r| RoleName {
                        role: r.name.to_string(),
                        db: db.to_string(),
                    }));
                }
                n.extend(catalog.on_db(db).map(|r| r.name.clone()));
                n
            }
        };
        if show_privileges == ShowPrivileges::AsUserFragment {
            let existing: Vec<RoleName> = names.into_iter().filter(|r| catalog.exists(r)).collect();
            let resolved = catalog.resolve(&existing);
            let mut frag = RawDocumentBuf::new();
            frag.append(cstr!("roles"), roles::roles_bson(&existing));
            frag.append(cstr!("inheritedRoles"), roles::roles_bson(&resolved.roles));
            frag.append(cstr!("inheritedPrivileges"), resolved.privileges.to_bson());
            if show_restrictions {
                frag.append(
                    cstr!("inheritedAuthenticationRestrictions"),
                    restrictions_bson(&resolved.restrictions),
                );
            }
            return Ok(rawdoc! {"userFragment": frag}.into());
        }
        let mut out = RawArrayBuf::new();
        for name in &names {
            if let Some(d) = describe(&catalog, name, show_privileges, show_restrictions) {
                out.push(d);
            }
        }
        Ok(rawdoc! {"roles": out}.into())
    })
}

fn restrictions_bson(rs: &[RawArrayBuf]) -> RawArrayBuf {
    let mut arr = RawArrayBuf::new();
    for r in rs {
        arr.push(r.clone());
    }
    arr
}

/// One role's entry, or `None` when it does not exist.
fn describe(
    catalog: &RoleCatalog,
    name: &RoleName,
    show_privileges: ShowPrivileges,
    show_restrictions: bool,
) -> Option<RawDocumentBuf> {
    let privileges = show_privileges == ShowPrivileges::Yes;
    let resolved = catalog.resolve(catalog.direct_roles(name));
    let mut d = RawDocumentBuf::new();
    if builtin_roles::get(&name.role, &name.db).is_some() {
        d.append(cstr!("role"), name.role.as_str());
        d.append(cstr!("db"), name.db.as_str());
        d.append(cstr!("isBuiltin"), true);
        d.append(cstr!("roles"), RawArrayBuf::new());
        d.append(cstr!("inheritedRoles"), RawArrayBuf::new());
        if privileges {
            let own = catalog.direct_privileges(name).to_bson();
            d.append(cstr!("privileges"), own.clone());
            d.append(cstr!("inheritedPrivileges"), own);
        }
        if show_restrictions {
            d.append(cstr!("authenticationRestrictions"), RawArrayBuf::new());
            d.append(
                cstr!("inheritedAuthenticationRestrictions"),
                RawArrayBuf::new(),
            );
        }
        return Some(d);
    }
    let role = catalog.get(name)?;
    d.append(cstr!("_id"), roles::doc_id(&name.db, &name.role).as_str());
    d.append(cstr!("role"), name.role.as_str());
    d.append(cstr!("db"), name.db.as_str());
    if privileges {
        d.append(cstr!("privileges"), role.privileges.to_bson());
    }
    d.append(cstr!("roles"), roles::roles_bson(&role.roles));
    if show_restrictions {
        d.append(
            cstr!("authenticationRestrictions"),
            role.restrictions.clone(),
        );
    }
    d.append(cstr!("isBuiltin"), false);
    d.append(cstr!("inheritedRoles"), roles::roles_bson(&resolved.roles));
    if privileges {
        let mut all = role.privileges.clone();
        all.add_all(resolved.privileges.privileges());
        d.append(cstr!("inheritedPrivileges"), all.to_bson());
    }
    if show_restrictions {
        let mut rs = Vec::new();
        if !role.restrictions.is_empty() {
            rs.push(role.restrictions.clone());
        }
        rs.extend(resolved.restrictions.iter().cloned());
        d.append(
            cstr!("inheritedAuthenticationRestrictions"),
            restrictions_bson(&rs),
        );
    }
    Some(d)
}
