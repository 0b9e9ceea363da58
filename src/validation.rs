//! Document validation in the server: installing the storage hook, checking the validation
//! options of `create` and `collMod`, and ordering stored collection options.
//!
//! - [`install`] puts [`cairn_query::validation::CollectionValidators`] into the store: every
//!   document write is then checked against its collection's validator
//!   ([`cairn_storage::validation`]); a `warn` failure is logged as MongoDB logs it —
//!   id 20294, `STORAGE`, "Document would fail validation", attributes `namespace`,
//!   `document`, `errInfo` (relaxed extended JSON).
//! - [`check_validator`] accepts a `validator` for a namespace as `create`/`collMod` do:
//!   an object (14 otherwise), not on `system.*` collections nor in `admin`/`local`/`config`
//!   (72, MongoDB's messages with the collection's UUID), parsed by
//!   [`cairn_query::validation::Validator::parse`].
//! - [`check_enum`] checks `validationLevel`/`validationAction` (IDL wording: 14 for a
//!   non-string, 2 for an unknown value).
//! - [`check_config_settings`] refuses validation options on `config.settings` (72).
//! - [`canonical_options`] orders options as MongoDB's `CollectionOptions::toBSON` writes them,
//!   which is what `listCollections` shows; [`replace_options`] is `collMod`'s change.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_query::validation::{Action, CollectionValidators, Hooks, Level, Validator};
use cairn_storage::Store;

use crate::commands::type_name;
use crate::error::{CommandError, ErrorCode};

/// Installs the document-validation hook into `store`.
pub fn install(store: &Store) {
    let hooks = Hooks {
        warn: Box::new(|ns: &str, doc: &RawDocument, info: &RawDocument| {
            tracing::warn!(
                target: "cairn_storage::validation",
                id = 20294,
                namespace = ns,
                document.json = %relaxed_json(doc),
                errInfo.json = %relaxed_json(info),
                "Document would fail validation"
            );
        }),
        code_name: Box::new(|code| ErrorCode::from_code(code).name().into_owned()),
    };
    store.set_validator(std::sync::Arc::new(CollectionValidators::new(hooks)));
}

/// A document as MongoDB logs it (relaxed extended JSON).
fn relaxed_json(d: &RawDocument) -> String {
    match bson::Document::try_from(d) {
        Ok(doc) => bson::Bson::Document(doc).into_relaxed_extjson().to_string(),
        Err(_) => "{}".to_string(),
    }
}

/// The UUID as MongoDB prints it in messages.
fn uuid_string(uuid: [u8; 16]) -> String {
    bson::Uuid::from_bytes(uuid).to_string()
}

/// `checkValidatorCanBeUsedOnNs` followed by the parse: the stored value of `validator` for
/// `db.coll` (`None` for an empty validator, which MongoDB does not store). `uuid` is the
/// collection's (a new one for `create`). `cmd` names the command in type errors.
pub fn check_validator(
    cmd: &str,
    db: &str,
    coll: &str,
    uuid: [u8; 16],
    v: RawBsonRef<'_>,
) -> Result<Option<RawDocumentBuf>, CommandError> {
    let RawBsonRef::Document(validator) = v else {
        return Err(CommandError::wrong_type(
            &format!("{cmd}.validator"),
            type_name(&v),
            "object",
        ));
    };
    if validator.is_empty() {
        return Ok(None);
    }
    let ns = format!("{db}.{coll}");
    if coll.starts_with("system.") {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!(
                "Document validators not allowed on system collection {ns} with UUID {}",
                uuid_string(uuid)
            ),
        ));
    }
    if matches!(db, "admin" | "local" | "config") {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!(
                "Document validators are not allowed on collection {ns} with UUID {} in the \
                 {db} internal database",
                uuid_string(uuid)
            ),
        ));
    }
    Validator::parse(validator)?;
    Ok(Some(validator.to_owned()))
}

/// The collection options that make up document validation.
pub const OPTIONS: [&str; 3] = ["validator", "validationLevel", "validationAction"];

/// `create`/`collMod` may not set validation options on `config.settings` (72), checked before
/// anything else about them.
pub fn check_config_settings(db: &str, coll: &str, body: &RawDocument) -> Result<(), CommandError> {
    if db == "config"
        && coll == "settings"
        && OPTIONS.iter().any(|f| body.get(f).ok().flatten().is_some())
    {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "Document validators not allowed on system collection config.settings",
        ));
    }
    Ok(())
}

/// `current` options with the validation options in `set` replaced (`None` removes one), in
/// MongoDB's order.
pub fn replace_options(
    current: &RawDocument,
    set: &[(&'static str, Option<bson::RawBson>)],
) -> RawDocumentBuf {
    let mut options = RawDocumentBuf::new();
    for (k, v) in current.iter().flatten() {
        if !set.iter().any(|(f, _)| *f == k.as_str()) {
            options.append(k, v);
        }
    }
    for (f, v) in set {
        if let (Some(v), Ok(k)) = (v, <&bson::raw::CStr>::try_from(*f)) {
            options.append(k, v.clone());
        }
    }
    canonical_options(&options)
}

/// `validationLevel` / `validationAction` as the IDL parses them: the value to store.
pub fn check_enum(cmd: &str, field: &str, v: RawBsonRef<'_>) -> Result<String, CommandError> {
    let RawBsonRef::String(s) = v else {
        return Err(CommandError::wrong_type(
            &format!("{cmd}.{field}"),
            type_name(&v),
            "string",
        ));
    };
    let known = if field == "validationLevel" {
        Level::parse(s).is_some()
    } else {
        Action::parse(s).is_some()
    };
    if !known {
        return Err(CommandError::bad_value(format!(
            "Enumeration value '{s}' for field '{cmd}.{field}' is not a valid value."
        )));
    }
    Ok(s.to_string())
}

/// The order of `CollectionOptions::appendBSON`.
const OPTION_ORDER: &[&str] = &[
    "capped",
    "size",
    "max",
    "autoIndexId",
    "temp",
    "recordPreImages",
    "changeStreamPreAndPostImages",
    "storageEngine",
    "indexOptionDefaults",
    "validator",
    "validationLevel",
    "validationAction",
    "collation",
    "clusteredIndex",
    "expireAfterSeconds",
    "viewOn",
    "pipeline",
    "idIndex",
    "timeseries",
    "encryptedFields",
];

/// Collection options in MongoDB's order (options it does not know keep their relative order,
/// after the known ones).
pub fn canonical_options(opts: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for name in OPTION_ORDER {
        for (k, v) in opts.iter().flatten() {
            if k.as_str() == *name {
                out.append(k, v);
            }
        }
    }
    for (k, v) in opts.iter().flatten() {
        if !OPTION_ORDER.contains(&k.as_str()) {
            out.append(k, v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn options_in_mongodb_order() {
        let d = canonical_options(&rawdoc! {
            "validationAction": "warn",
            "validator": {"a": 1},
            "changeStreamPreAndPostImages": {"enabled": true},
            "validationLevel": "moderate",
        });
        let keys: Vec<&str> = d.iter().flatten().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "changeStreamPreAndPostImages",
                "validator",
                "validationLevel",
                "validationAction"
            ]
        );
    }

    #[test]
    fn validator_restrictions() {
        let uuid = [0u8; 16];
        let v = rawdoc! {"a": {"$exists": true}};
        let sys = check_validator(
            "create",
            "test",
            "system.js",
            uuid,
            RawBsonRef::Document(&v),
        )
        .unwrap_err();
        assert_eq!(sys.code.code(), 72);
        assert_eq!(
            sys.message,
            "Document validators not allowed on system collection test.system.js with UUID \
             00000000-0000-0000-0000-000000000000"
        );
        let admin =
            check_validator("create", "admin", "c", uuid, RawBsonRef::Document(&v)).unwrap_err();
        assert_eq!(
            admin.message,
            "Document validators are not allowed on collection admin.c with UUID \
             00000000-0000-0000-0000-000000000000 in the admin internal database"
        );
        let bad = check_validator("create", "t", "c", uuid, RawBsonRef::Int32(7)).unwrap_err();
        assert_eq!(bad.code.code(), 14);
        let empty = rawdoc! {};
        assert_eq!(
            check_validator("create", "t", "c", uuid, RawBsonRef::Document(&empty)).unwrap(),
            None
        );
        let e = check_enum("collMod", "validationLevel", RawBsonRef::String("x")).unwrap_err();
        assert_eq!(
            e.message,
            "Enumeration value 'x' for field 'collMod.validationLevel' is not a valid value."
        );
    }
}
