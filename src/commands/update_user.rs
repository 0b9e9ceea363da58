//! `updateUser`: changes a user's password, custom data or roles (each given field replaces
//! the stored one; `roles` replaces the whole list), or trims its credentials to `mechanisms`.
//!
//! Errors as MongoDB: an empty `mechanisms`, a password on `$external`, trimming to
//! mechanisms the user lacks, nothing to change (BadValue); a missing role (31); a missing
//! user (11 `User name@db not found`).

use bson::{RawDocument, RawDocumentBuf};

use super::args::{command_string, opt_document, opt_strict_bool, opt_string, opt_string_array};
use super::{CmdFuture, Command, Counter, Fields, Invocation};
use crate::auth::{UserName, users};
use crate::error::{CommandError, ErrorCode};

/// `updateUser`.
pub static COMMAND: Command = Command {
    name: "updateUser",
    aliases: &[],
    help: "Used to update a user, for example to change its password",
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
    authz: super::Authz::Custom(crate::auth::authorize::update_user),
    run,
};

/// `doc` with `field` set to `value`: in place when present, else appended (as `$set`).
fn set_field(doc: &RawDocument, field: &str, value: bson::RawBson) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    let mut done = false;
    for (k, v) in doc.iter().flatten() {
        if k.as_str() == field {
            out.append(k, value.clone());
            done = true;
        } else {
            out.append(k, v);
        }
    }
    if !done && let Ok(k) = <&bson::raw::CStr>::try_from(field) {
        out.append(k, value);
    }
    out
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        const C: &str = "updateUser";
        let req = inv.req;
        let body = req.body;
        let name = command_string(&req, C)?;
        let pwd = opt_string(body, C, "pwd")?;
        let custom = opt_document(body, C, "customData")?.map(|d| d.to_owned());
        let roles = match body.get("roles").ok().flatten() {
            Some(v) => Some(users::parse_roles("updateUser.roles", v, req.db)?),
            None => None,
        };
        let digest = opt_strict_bool(body, C, "digestPassword")?.unwrap_or(true);
        let mechanisms = opt_string_array(body, C, "mechanisms")?;
        super::create_user::check_no_restrictions(body, C)?;
        let user = UserName {
            user: name.to_string(),
            db: req.db.to_string(),
        };
        if mechanisms.as_ref().is_some_and(|m| m.is_empty()) {
            return Err(CommandError::bad_value(
                "mechanisms field must not be empty",
            ));
        }
        let credentials = match pwd {
            Some(pwd) => {
                if user.db == "$external" {
                    return Err(CommandError::bad_value(
                        "Cannot set the password for users defined on the '$external' database",
                    ));
                }
                Some(users::build_credentials(
                    &user,
                    pwd,
                    mechanisms.as_deref(),
                    digest,
                    inv.server.auth.iterations(),
                )?)
            }
            None => None,
        };
        let trim: Option<Vec<String>> = match (&credentials, &mechanisms) {
            (None, Some(m)) => Some(m.iter().map(|s| s.to_string()).collect()),
            _ => None,
        };
        if credentials.is_none() && trim.is_none() && custom.is_none() && roles.is_none() {
            return Err(CommandError::bad_value(
                "Must specify at least one field to update in updateUser",
            ));
        }
        let store = inv.server.store.clone();
        let found = crate::blocking::run(move || {
            if let Some(r) = &roles {
                users::check_roles_exist(&store, r)?;
            }
            users::update(&store, &user, &mut |old| {
                let mut doc = old.to_owned();
                if let Some(c) = &credentials {
                    doc = set_field(&doc, "credentials", bson::RawBson::Document(c.clone()));
                }
                if let Some(keep) = &trim {
                    doc = trim_credentials(&doc, keep)?;
                }
                if let Some(c) = &custom {
                    doc = set_field(&doc, "customData", bson::RawBson::Document(c.clone()));
                }
                if let Some(r) = &roles {
                    doc = set_field(&doc, "roles", bson::RawBson::Array(users::roles_array(r)));
                }
                Ok(doc)
            })
            .map(|found| (found, user))
        })
        .await?;
        let (found, user) = found;
        if !found {
            return Err(CommandError::new(
                ErrorCode::Location(11),
                format!("User {}@{} not found", user.user, user.db),
            ));
        }
        Ok(RawDocumentBuf::new().into())
    })
}

/// Keeps only the credentials named in `keep` (which must all exist).
fn trim_credentials(doc: &RawDocument, keep: &[String]) -> Result<RawDocumentBuf, CommandError> {
    let Ok(creds) = doc.get_document("credentials") else {
        return Err(CommandError::new(
            ErrorCode::Location(12),
            "Unable to trim credentials from a user document with no credentials",
        ));
    };
    for m in keep {
        if !matches!(creds.get(m), Ok(Some(_))) {
            return Err(CommandError::bad_value(
                "mechanisms field must be a subset of previously set mechanisms",
            ));
        }
    }
    let mut kept = RawDocumentBuf::new();
    for (k, v) in creds.iter().flatten() {
        let known = matches!(k.as_str(), "SCRAM-SHA-1" | "SCRAM-SHA-256");
        if !known || keep.iter().any(|m| m == k.as_str()) {
            kept.append(k, v);
        }
    }
    if !keep
        .iter()
        .any(|m| m == "SCRAM-SHA-1" || m == "SCRAM-SHA-256")
    {
        return Err(CommandError::bad_value(
            "mechanisms field must contain at least one previously set known mechanism",
        ));
    }
    Ok(set_field(doc, "credentials", bson::RawBson::Document(kept)))
}
