//! `createUser`: adds a user to the command's database, stored in `admin.system.users`
//! ([`crate::auth::users`]) with salted SCRAM credentials only.
//!
//! `{createUser: name, pwd, roles: [name | {role, db}], customData?, mechanisms?,
//! digestPassword?, writeConcern?}`. Checks in MongoDB's order: the `local` database, NUL in
//! the name, `pwd` required except on `$external` (and refused there), `mechanisms` non-empty,
//! unknown mechanism, SHA-256 with a digested password, the roles exist (31), a duplicate
//! (51003). `authenticationRestrictions` are not enforced by Cairn, so a non-empty list is
//! NotImplemented rather than silently ignored.

use bson::{RawBsonRef, RawDocumentBuf};

use super::args::{command_string, opt_document, opt_strict_bool, opt_string, opt_string_array};
use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::{UserName, users};
use crate::error::{CommandError, ErrorCode};

/// `createUser`.
pub static COMMAND: Command = Command {
    name: "createUser",
    aliases: &[],
    help: "Adds a user to the system",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: false,
    fields: Fields::Strict(&[
        "pwd",
        "customData",
        "roles",
        "digestPassword",
        "authenticationRestrictions",
        "mechanisms",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::create_user),
    run,
};

/// Refuses authentication restrictions Cairn would not enforce.
pub fn check_no_restrictions(body: &bson::RawDocument, cmd: &str) -> Result<(), CommandError> {
    match body.get("authenticationRestrictions") {
        Ok(None) => Ok(()),
        Ok(Some(RawBsonRef::Array(a))) if a.into_iter().next().is_none() => Ok(()),
        Ok(Some(RawBsonRef::Array(_))) => Err(CommandError::new(
            ErrorCode::NotImplemented,
            "authenticationRestrictions are not supported",
        )),
        Ok(Some(other)) => Err(CommandError::wrong_type(
            &format!("{cmd}.authenticationRestrictions"),
            super::type_name(&other),
            "array",
        )),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const C: &str = "createUser";
        let req = inv.req;
        let body = req.body;
        let name = command_string(&req, C)?;
        let pwd = opt_string(body, C, "pwd")?;
        let custom = opt_document(body, C, "customData")?;
        let Some(roles) = body.get("roles").ok().flatten() else {
            return Err(CommandError::missing_field("createUser.roles"));
        };
        let roles = users::parse_roles("createUser.roles", roles, req.db)?;
        let digest = opt_strict_bool(body, C, "digestPassword")?.unwrap_or(true);
        let mechanisms = opt_string_array(body, C, "mechanisms")?;
        check_no_restrictions(body, C)?;

        if req.db == "local" {
            return Err(CommandError::bad_value(
                "Cannot create users in the local database",
            ));
        }
        if name.contains('\0') {
            return Err(CommandError::bad_value(
                "Username cannot contain NULL characters",
            ));
        }
        let external = req.db == "$external";
        if pwd.is_none() && !external {
            return Err(CommandError::bad_value(
                "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db",
            ));
        }
        if pwd.is_some() && external {
            return Err(CommandError::bad_value(
                "Cannot set the password for users defined on the '$external' database",
            ));
        }
        if mechanisms.as_ref().is_some_and(|m| m.is_empty()) {
            return Err(CommandError::bad_value(
                "mechanisms field must not be empty",
            ));
        }
        let user = UserName {
            user: name.to_string(),
            db: req.db.to_string(),
        };
        let credentials = match pwd {
            Some(pwd) => users::build_credentials(
                &user,
                pwd,
                mechanisms.as_deref(),
                digest,
                inv.server.auth.iterations(),
            )?,
            None => bson::rawdoc! {"external": true},
        };
        if name.is_empty() {
            return Err(CommandError::bad_value(
                "User document needs 'user' field to be non-empty",
            ));
        }
        let doc = users::new_user_doc(&user, credentials, custom, &roles);

        let store = inv.server.store.clone();
        crate::blocking::run(move || {
            users::check_roles_exist(&store, &roles)?;
            users::insert(&store, &user, &doc)
        })
        .await?;
        inv.server.auth.user_created();
        Ok(RawDocumentBuf::new().into())
    })
}
