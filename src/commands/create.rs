//! `create`: create a collection or a view explicitly.
//!
//! Options are validated as MongoDB validates them (types 14, `size` ≥ 1 51024, capped
//! rules 72, unknown fields 40415); a capped collection's `size` is rounded up as MongoDB
//! rounds it ([`capped_limits`]) and cannot be created inside a transaction (263). Options
//! Cairn cannot enforce yet are refused with NotImplemented (238) instead of being stored
//! and silently ignored: non-simple collations, time series, clustered collections,
//! change-stream pre-images, encryption, engine-specific options. A `validator` is checked as
//! MongoDB checks it ([`crate::validation::check_validator`]: no system collections, internal
//! databases or `config.settings`, 72; parse errors "Parsing of collection validator failed
//! :: caused by :: …"); an empty one is not stored. What is accepted is kept in the catalog
//! in MongoDB's option order and reported by `listCollections`. Creating a collection that
//! exists with identical options succeeds (MongoDB 7.0); with other options it is
//! NamespaceExists (48).
//!
//! `viewOn` (+ `pipeline`, default `[]`) creates a view instead: not inside a transaction
//! (263), never named `system.views` (73), the definition checked by
//! [`crate::views::validate`], then stored in the catalog ([`cairn_storage::views`]) after
//! the database's `system.views` collection is made (as MongoDB makes it).

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, truthy, type_name,
};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

const FIELDS: &[&str] = &[
    "autoIndexId",
    "capped",
    "changeStreamPreAndPostImages",
    "clusteredIndex",
    "collation",
    "encryptedFields",
    "expireAfterSeconds",
    "flags",
    "idIndex",
    "indexOptionDefaults",
    "max",
    "pipeline",
    "size",
    "storageEngine",
    "temp",
    "timeseries",
    "validationAction",
    "validationLevel",
    "validator",
    "viewOn",
];

/// `create`.
pub static COMMAND: Command = Command {
    name: "create",
    aliases: &[],
    help: "explicitly creates a collection or view\n{ create: <string: collection|view name> [, capped: <bool>, size: <int>, max: <int>] }",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(FIELDS),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::create),
    run,
};

fn not_implemented(what: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NotImplemented,
        format!("{what} is not supported by Cairn yet"),
    )
}

fn invalid(msg: &str) -> CommandError {
    CommandError::new(ErrorCode::InvalidOptions, msg)
}

/// Validates the options and returns the document stored in the catalog.
fn options(body: &RawDocument, db: &str) -> Result<RawDocumentBuf, CommandError> {
    let get = |f: &str| body.get(f).ok().flatten();
    let mut stored = RawDocumentBuf::new();
    let capped = match get("capped") {
        None => false,
        Some(
            v @ (RawBsonRef::Boolean(_)
            | RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)),
        ) => truthy(&v),
        Some(other) => {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.capped' is the wrong type '{}', expected types '[bool, long, int, decimal, double']",
                    type_name(&other)
                ),
            ));
        }
    };
    for field in ["size", "max"] {
        if let Some(v) = get(field) {
            let n = super::args::safe_int64("create", field, v)?;
            if field == "size" {
                super::args::check_range("size", n, Some(1), None)?;
            }
        }
    }
    if get("temp").is_some() {
        return Err(invalid("the 'temp' field is an invalid option"));
    }
    if capped {
        let Some(size) = get("size") else {
            return Err(invalid(
                "the 'size' field is required when 'capped' is true",
            ));
        };
        let (size, max) = super::args::capped_limits("create", size, get("max"))?;
        stored.append(bson::raw::cstr!("capped"), true);
        super::args::append_number(&mut stored, bson::raw::cstr!("size"), size);
        if let Some(m) = max {
            super::args::append_number(&mut stored, bson::raw::cstr!("max"), m);
        }
    } else if get("size").is_some() || get("max").is_some() {
        return Err(invalid(
            "the 'capped' field needs to be true when either the 'size' or 'max' fields are present",
        ));
    }
    if get("pipeline").is_some() && get("viewOn").is_none() {
        return Err(invalid("'pipeline' requires 'viewOn' to also be specified"));
    }
    if get("expireAfterSeconds").is_some()
        && get("timeseries").is_none()
        && get("clusteredIndex").is_none()
    {
        return Err(invalid(
            "'expireAfterSeconds' is only supported on time-series collections or when the 'clusteredIndex' option is specified",
        ));
    }
    for (field, what) in [
        ("timeseries", "time-series collections"),
        ("clusteredIndex", "clustered collections"),
        ("encryptedFields", "queryable encryption"),
    ] {
        if get(field).is_some() {
            return Err(not_implemented(what));
        }
    }
    if let Some(v) = get("collation") {
        let RawBsonRef::Document(c) = v else {
            return Err(CommandError::wrong_type(
                "create.collation",
                type_name(&v),
                "object",
            ));
        };
        match c.get("locale") {
            Ok(Some(RawBsonRef::String("simple"))) => {}
            Ok(Some(RawBsonRef::String(_))) => {
                return Err(not_implemented("collations other than simple"));
            }
            _ => {
                return Err(CommandError::missing_field("collation.locale"));
            }
        }
    }
    if let Some(v) = get("changeStreamPreAndPostImages")
        && super::args::pre_and_post_images(v, "create")?
    {
        super::args::check_images_allowed(db)?;
        stored.append(
            bson::raw::cstr!("changeStreamPreAndPostImages"),
            bson::rawdoc! {"enabled": true},
        );
    }
    for field in ["storageEngine", "indexOptionDefaults"] {
        match get(field) {
            None => {}
            Some(RawBsonRef::Document(d)) if d.is_empty() => {}
            Some(RawBsonRef::Document(_)) => {
                return Err(not_implemented("storage-engine specific options"));
            }
            Some(other) => {
                return Err(CommandError::wrong_type(
                    &format!("create.{field}"),
                    type_name(&other),
                    "object",
                ));
            }
        }
    }
    if let Some(v) = get("idIndex") {
        let ok = matches!(v, RawBsonRef::Document(d)
            if d.get_document("key").ok().and_then(|k| k.get("_id").ok().flatten()).is_some());
        if !ok {
            return Err(not_implemented("an _id index other than {_id: 1}"));
        }
    }
    if let Some(v) = get("autoIndexId")
        && !truthy(&v)
    {
        return Err(not_implemented("collections without an _id index"));
    }
    if let Some(v) = get("validator")
        && !matches!(v, RawBsonRef::Document(_))
    {
        return Err(CommandError::wrong_type(
            "create.validator",
            type_name(&v),
            "object",
        ));
    }
    for field in ["validationLevel", "validationAction"] {
        if let Some(v) = get(field) {
            let s = crate::validation::check_enum("create", field, v)?;
            let k: &CStr = crate::error::key(field)?;
            stored.append(k, s);
        }
    }
    Ok(stored)
}

/// A view's `viewOn` and `pipeline` (`None`: not a view), type-checked as MongoDB's IDL
/// does, with the options a view cannot have refused.
fn view_definition(body: &RawDocument) -> Result<Option<(String, RawArrayBuf)>, CommandError> {
    let get = |f: &str| body.get(f).ok().flatten();
    let Some(v) = get("viewOn") else {
        return Ok(None);
    };
    let RawBsonRef::String(view_on) = v else {
        return Err(CommandError::wrong_type(
            "create.viewOn",
            type_name(&v),
            "string",
        ));
    };
    let mut pipeline = RawArrayBuf::new();
    match get("pipeline") {
        None => {}
        Some(RawBsonRef::Array(a)) => {
            for (i, stage) in a.into_iter().enumerate() {
                let stage =
                    stage.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                if !matches!(stage, RawBsonRef::Document(_)) {
                    return Err(CommandError::wrong_type(
                        &format!("create.pipeline.{i}"),
                        type_name(&stage),
                        "object",
                    ));
                }
                pipeline.push(stage);
            }
        }
        Some(other) => {
            return Err(CommandError::wrong_type(
                "create.pipeline",
                type_name(&other),
                "array",
            ));
        }
    }
    if view_on.is_empty() {
        return Err(CommandError::bad_value("'viewOn' cannot be empty"));
    }
    if let Some(RawBsonRef::Document(id_index)) = get("idIndex") {
        return Err(invalid(&format!(
            "'idIndex' is not allowed with 'viewOn': {}",
            cairn_storage::display::document(id_index)
        )));
    }
    if let Some(f) = ["validator", "validationLevel", "validationAction"]
        .into_iter()
        .find(|f| get(f).is_some())
    {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!("option not supported on a view: {f}"),
        ));
    }
    if get("clusteredIndex").is_some() {
        return Err(CommandError::new(
            ErrorCode::Location(6026500),
            "The 'clusteredIndex' option is not supported with views",
        ));
    }
    if let Some(RawBsonRef::Document(d)) = get("changeStreamPreAndPostImages")
        && matches!(d.get_bool("enabled"), Ok(true))
    {
        return Err(invalid(
            "option not supported on a view: changeStreamPreAndPostImages",
        ));
    }
    Ok(Some((view_on.to_string(), pipeline)))
}

/// Creates the view `db.name` (see the module docs).
async fn create_view(
    inv: &Invocation<'_>,
    name: String,
    view_on: String,
    pipeline: RawArrayBuf,
) -> Result<(), CommandError> {
    let db = inv.req.db.to_string();
    if inv.op.target.txn().is_some() {
        return Err(CommandError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "Cannot create a view in a multi-document transaction.",
        ));
    }
    cairn_storage::namespace::check_collection_for_create(&db, &name)?;
    if name == crate::views::SYSTEM_VIEWS {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("Cannot create a view called '{name}': this is a reserved system namespace"),
        ));
    }
    if name == "system.profile" {
        return Err(CommandError::new(
            ErrorCode::IllegalOperation,
            "Cannot create system.profile as a view",
        ));
    }
    if view_on.contains(['$', '\0']) || view_on.starts_with('.') {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("invalid name for 'viewOn': {view_on}"),
        ));
    }
    let server = inv.server.clone();
    blocking::run(move || {
        let cat = server.store.catalog();
        if cat.get(&db, &name).is_some() {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("Collection {db}.{name} already exists."),
            ));
        }
        if cat
            .view(&db, &name)
            .is_some_and(|v| v.view_on != view_on || v.pipeline.as_bytes() != pipeline.as_bytes())
        {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("A view already exists. NS: {db}.{name}"),
            ));
        }
        let identical = cat
            .view(&db, &name)
            .is_some_and(|v| v.view_on == view_on && v.pipeline.as_bytes() == pipeline.as_bytes());
        if !identical && cat.view(&db, &name).is_none() {
            crate::views::validate(&server, &db, &name, &view_on, &pipeline)?;
        }
        // Like MongoDB, the database gets a `system.views` collection with the first view;
        // it stays when the views are dropped.
        if server
            .store
            .collection(&db, crate::views::SYSTEM_VIEWS)
            .is_none()
        {
            server.store.create_collection(
                &db,
                crate::views::SYSTEM_VIEWS,
                &RawDocumentBuf::new(),
            )?;
        }
        server.store.create_view(&db, &name, &view_on, &pipeline)?;
        Ok(())
    })
    .await
}

/// Adds the checked `validator` to the options (see [`crate::validation::check_validator`])
/// and puts them in MongoDB's order.
fn with_validator(
    db: &str,
    name: &str,
    body: &RawDocument,
    mut opts: RawDocumentBuf,
) -> Result<RawDocumentBuf, CommandError> {
    if let Some(v) = body.get("validator").ok().flatten() {
        let uuid = bson::Uuid::new().bytes();
        if let Some(validator) = crate::validation::check_validator("create", db, name, uuid, v)? {
            opts.append(bson::raw::cstr!("validator"), validator);
        }
    }
    Ok(crate::validation::canonical_options(&opts))
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let name = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        let view = view_definition(inv.req.body)?;
        let opts = options(inv.req.body, &db)?;
        if let Some((view_on, pipeline)) = view {
            create_view(&inv, name, view_on, pipeline).await?;
            return Ok(RawDocumentBuf::new().into());
        }
        if crate::views::is_view(inv.server, &db, &name) {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("A view already exists. NS: {db}.{name}"),
            ));
        }
        crate::validation::check_config_settings(&db, &name, inv.req.body)?;
        let opts = with_validator(&db, &name, inv.req.body, opts)?;
        let store = inv.server.store.clone();
        if let Some(cell) = inv.op.target.txn().cloned() {
            // Inside a transaction: created in it, visible to others when it commits.
            inv.op.check_txn_ddl("create")?;
            if opts.get("capped").ok().flatten().is_some() {
                return Err(CommandError::new(
                    ErrorCode::OperationNotSupportedInTransaction,
                    format!(
                        "Cannot create a capped collection {db}.{name} in a multi-document transaction"
                    ),
                ));
            }
            blocking::run(move || {
                cell.with(|t| match t.create_collection(&db, &name, &opts) {
                    Err(cairn_storage::StorageError::NamespaceExists(_)) => Err(CommandError::new(
                        ErrorCode::NamespaceExists,
                        format!("Collection {db}.{name} already exists."),
                    )),
                    r => r.map(|_| ()).map_err(CommandError::from),
                })
            })
            .await?;
            return Ok(RawDocumentBuf::new().into());
        }
        blocking::run(move || Ok(store.create_collection(&db, &name, &opts)?)).await?;
        Ok(RawDocumentBuf::new().into())
    })
}
