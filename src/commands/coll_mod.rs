//! `collMod`: change a collection's options. Supported: `index: {name | keyPattern, hidden,
//! expireAfterSeconds}` — hide/unhide an index from the planner (it stays maintained), change
//! a TTL, or turn a non-TTL single-field index into a TTL index (MongoDB ≥ 5.1).
//!
//! Checks follow `parseCollModRequest`: field types (14), name xor key pattern (72), at least
//! one change (72), the TTL range (72), then the index — by name, or by key pattern among the
//! ready indexes, where a pattern shared by several indexes is AmbiguousIndexKeyPattern (181)
//! and none is IndexNotFound (27) — then `_id` (no TTL: 72; no hiding: 2) and compound
//! indexes (no TTL: 72). `index.unique`, `prepareUnique` and `forceNonUnique` are
//! NotImplemented (238).
//!
//! Reply: `{expireAfterSeconds_old, expireAfterSeconds_new, hidden_old, hidden_new, ok}` as
//! `processCollModIndexRequest` builds it: the TTL pair as longs whenever `expireAfterSeconds`
//! is given (`_old` only if the index already had one), the hidden pair only when the setting
//! changes. The catalog changes as MongoDB's does: the new `expireAfterSeconds` is stored as
//! a long (`listIndexes` shows an int), unhiding removes the `hidden` field.
//!
//! `validator`, `validationLevel` and `validationAction` ([`validation_change`]) are checked
//! as at `create` ([`crate::validation`]) and replace the collection's options atomically
//! (an empty validator removes it), recorded as a `modify` change; writes from then on are
//! validated with them; `config.settings` refuses them (72). `changeStreamPreAndPostImages`
//! ([`images_change`]) turns image recording on or off; `cappedSize`/`cappedMax`
//! ([`capped_change`]) set a capped collection's limits, applied by the next insert. All
//! option changes of one `collMod` are one catalog write and one `modify` change. Every part
//! of a `collMod` is checked before any of it is applied. Other collection-level options are
//! NotImplemented (238), like at `create`.
//!
//! On a view only `viewOn` and `pipeline` may change (either or both; the other keeps its
//! value); every other option is InvalidOptions "option not supported on a view" (72), and
//! `viewOn`/`pipeline` on a collection are "option only supported on a view" (72). The new
//! definition is checked like `create`'s ([`crate::views::validate`]) before the catalog
//! record is replaced.

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::display;
use cairn_storage::index::{IndexMeta, IndexState};

use super::{CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, type_name};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};

/// `collMod`.
pub static COMMAND: Command = Command {
    name: "collMod",
    aliases: &[],
    help: "Sets collection options.",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[
        "index",
        "validator",
        "validationLevel",
        "validationAction",
        "viewOn",
        "pipeline",
        "expireAfterSeconds",
        "changeStreamPreAndPostImages",
        "cappedSize",
        "cappedMax",
        "timeseries",
        "dryRun",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::coll_mod),
    run,
};

/// The options `collMod` may not change on a view, in the order MongoDB checks them.
const NOT_ON_A_VIEW: &[&str] = &[
    "index",
    "validator",
    "validationLevel",
    "validationAction",
    "changeStreamPreAndPostImages",
    "expireAfterSeconds",
    "timeseries",
];

/// `collMod.viewOn` and `collMod.pipeline`, type-checked.
fn view_fields(body: &RawDocument) -> Result<(Option<String>, Option<RawArrayBuf>), CommandError> {
    let view_on = match body.get("viewOn").ok().flatten() {
        None => None,
        Some(RawBsonRef::String(s)) => Some(s.to_string()),
        Some(other) => {
            return Err(CommandError::wrong_type(
                "collMod.viewOn",
                type_name(&other),
                "string",
            ));
        }
    };
    let pipeline = match body.get("pipeline").ok().flatten() {
        None => None,
        Some(RawBsonRef::Array(a)) => {
            let mut out = RawArrayBuf::new();
            for (i, stage) in a.into_iter().enumerate() {
                let stage =
                    stage.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                if !matches!(stage, RawBsonRef::Document(_)) {
                    return Err(CommandError::wrong_type(
                        &format!("collMod.pipeline.{i}"),
                        type_name(&stage),
                        "object",
                    ));
                }
                out.push(stage);
            }
            Some(out)
        }
        Some(other) => {
            return Err(CommandError::wrong_type(
                "collMod.pipeline",
                type_name(&other),
                "array",
            ));
        }
    };
    Ok((view_on, pipeline))
}

/// `collMod` on the view `db.name`.
async fn modify_view(
    inv: &Invocation<'_>,
    db: String,
    name: String,
    view_on: Option<String>,
    pipeline: Option<RawArrayBuf>,
) -> Result<(), CommandError> {
    let body = inv.req.body;
    if let Some(f) = NOT_ON_A_VIEW
        .iter()
        .find(|f| body.get(f).ok().flatten().is_some())
    {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!("option not supported on a view: {f}"),
        ));
    }
    for (i, el) in body.iter().enumerate() {
        let (k, _) = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let k = k.as_str();
        if i > 0
            && !matches!(k, "viewOn" | "pipeline" | "dryRun")
            && !super::GENERIC_ARGUMENTS.contains(&k)
        {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!("option not supported on a view: {k}"),
            ));
        }
    }
    if view_on.is_none() && pipeline.is_none() {
        return Ok(());
    }
    if view_on.as_deref() == Some("") {
        return Err(CommandError::bad_value("'viewOn' cannot be empty"));
    }
    if let Some(v) = &view_on
        && (v.contains(['$', '\0']) || v.starts_with('.'))
    {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("invalid name for 'viewOn': {v}"),
        ));
    }
    let server = inv.server.clone();
    blocking::run(move || {
        let Some(old) = server.store.view(&db, &name) else {
            return Err(CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("cannot modify missing view {db}.{name}"),
            ));
        };
        let view_on = view_on.unwrap_or_else(|| old.view_on.clone());
        let pipeline = pipeline.unwrap_or_else(|| old.pipeline.clone());
        crate::views::validate(&server, &db, &name, &view_on, &pipeline)?;
        server.store.modify_view(&db, &name, &view_on, &pipeline)?;
        Ok(())
    })
    .await
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        let (view_on, pipeline) = view_fields(body)?;
        if crate::views::is_view(inv.server, &db, &coll) {
            modify_view(&inv, db, coll, view_on, pipeline).await?;
            return Ok(RawDocumentBuf::new().into());
        }
        if let Some(f) = ["pipeline", "viewOn"]
            .into_iter()
            .find(|f| body.get(f).ok().flatten().is_some())
            && inv.server.store.collection(&db, &coll).is_some()
        {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!("option only supported on a view: {f}"),
            ));
        }
        for (i, el) in body.iter().enumerate() {
            let (k, _) =
                el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if i > 0
                && !matches!(
                    k.as_str(),
                    "index"
                        | "validator"
                        | "validationLevel"
                        | "validationAction"
                        | "changeStreamPreAndPostImages"
                        | "cappedSize"
                        | "cappedMax"
                )
                && !super::GENERIC_ARGUMENTS.contains(&k.as_str())
            {
                return Err(CommandError::new(
                    ErrorCode::NotImplemented,
                    format!(
                        "collMod option '{}' is not supported by Cairn yet",
                        k.as_str()
                    ),
                ));
            }
        }
        crate::validation::check_config_settings(&db, &coll, body)?;
        let meta = inv.server.store.collection(&db, &coll).ok_or_else(|| {
            CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns does not exist: {db}.{coll}"),
            )
        })?;
        // Everything is checked before anything changes: the capped limits' ranges first (the
        // IDL parses them), then whether the collection is capped, then the rest.
        let capped = capped_change(body, &meta)?;
        let validation = validation_change(body, &db, &coll, &meta)?;
        let images = images_change(body, &db)?;
        let options = merge_changes([capped, validation, images]);
        let index = match body.get("index").ok().flatten() {
            Some(spec) => Some(index_change(spec, &meta, &db, &coll)?),
            None => None,
        };
        // A `collMod` that changes nothing is still a `modify` event, as MongoDB logs every
        // collMod (with an empty description).
        let options = match (options, &index) {
            (None, None) => Some((Vec::new(), RawDocumentBuf::new())),
            (options, _) => options,
        };
        if let Some((set, desc)) = options {
            let store = inv.server.store.clone();
            let (db, coll) = (db.clone(), coll.clone());
            blocking::run(move || {
                Ok(store.set_collection_options(
                    &db,
                    &coll,
                    |current| crate::validation::replace_options(current, &set),
                    &desc,
                )?)
            })
            .await?;
        }
        let Some((name, set, out)) = index else {
            return Ok(RawDocumentBuf::new().into());
        };
        if !set.is_empty() {
            let store = inv.server.store.clone();
            blocking::run(move || Ok(store.modify_index(&db, &coll, &name, &set)?)).await?;
        }
        Ok(out.into())
    })
}

/// The index change a `collMod.index` asks for: the index's name, the spec fields to set
/// (`None` removes one) and the reply.
type IndexChange = (String, Vec<(String, Option<RawBson>)>, RawDocumentBuf);

/// Checks `collMod.index` against the collection's indexes and works out the change.
fn index_change(
    spec: RawBsonRef<'_>,
    meta: &cairn_storage::catalog::CollectionMeta,
    db: &str,
    coll: &str,
) -> Result<IndexChange, CommandError> {
    let RawBsonRef::Document(spec) = spec else {
        return Err(CommandError::wrong_type(
            "collMod.index",
            type_name(&spec),
            "object",
        ));
    };
    let request = parse_index_request(spec)?;
    let ready = || meta.indexes.iter().filter(|i| i.state == IndexState::Ready);
    let idx = match &request.target {
        Target::Name(n) => ready().find(|i| i.name == *n).ok_or_else(|| {
            CommandError::new(
                ErrorCode::IndexNotFound,
                format!("cannot find index {n} for ns {db}.{coll}"),
            )
        })?,
        Target::KeyPattern(p) => {
            let found: Vec<&IndexMeta> = ready()
                .filter(|i| i.key_pattern().map(|k| k.as_bytes()) == Some(p.as_bytes()))
                .collect();
            match found.as_slice() {
                [one] => *one,
                [] => {
                    return Err(CommandError::new(
                        ErrorCode::IndexNotFound,
                        format!(
                            "cannot find index {} for ns {db}.{coll}",
                            display::document(p)
                        ),
                    ));
                }
                [first, second, ..] => {
                    return Err(CommandError::new(
                        ErrorCode::AmbiguousIndexKeyPattern,
                        format!(
                            "index keyPattern {} matches {} indexes, must use index name. \
                             Conflicting indexes:{}, {}",
                            display::document(p),
                            found.len(),
                            display::document(&first.spec),
                            display::document(&second.spec)
                        ),
                    ));
                }
            }
        }
    };
    let mut set: Vec<(String, Option<RawBson>)> = Vec::new();
    let mut out = RawDocumentBuf::new();
    if let Some(n) = request.expire_after_seconds {
        let old = match idx.spec.get("expireAfterSeconds").ok().flatten() {
            None if idx.is_id() => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "the _id field does not support TTL indexes",
                ));
            }
            None if idx.fields().len() != 1 => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "TTL indexes are single-field indexes, compound indexes do not support TTL",
                ));
            }
            None => None,
            Some(_) => Some(idx.expire_after_seconds().ok_or_else(|| {
                CommandError::new(
                    ErrorCode::InvalidOptions,
                    "existing expireAfterSeconds field is not a number",
                )
            })?),
        };
        // `updateTTLSetting` writes a long; an unchanged value is not rewritten.
        if old != Some(n) {
            set.push(("expireAfterSeconds".into(), Some(RawBson::Int64(n))));
        }
        if let Some(old) = old {
            out.append(cstr!("expireAfterSeconds_old"), old);
        }
        out.append(cstr!("expireAfterSeconds_new"), n);
    }
    if let Some(h) = request.hidden {
        if idx.is_id() {
            return Err(CommandError::new(
                ErrorCode::BadValue,
                "can't hide _id index",
            ));
        }
        // Hiding a hidden index or unhiding a visible one is a no-op, left out of the
        // reply; unhiding removes the field (`updateHiddenSetting(false)`).
        let old = idx.is_hidden();
        if old != h {
            set.push(("hidden".into(), h.then_some(RawBson::Boolean(true))));
            out.append(cstr!("hidden_old"), old);
            out.append(cstr!("hidden_new"), h);
        }
    }
    Ok((idx.name.clone(), set, out))
}

/// `collMod`'s `validator`, `validationLevel` and `validationAction`, checked as `create`
/// checks them: the options to set and the `modify` description (the fields as given), or
/// `None` when it changes none.
fn validation_change(
    body: &RawDocument,
    db: &str,
    coll: &str,
    meta: &cairn_storage::catalog::CollectionMeta,
) -> Result<Option<OptionsChange>, CommandError> {
    let mut desc = RawDocumentBuf::new();
    let mut set: Vec<(&'static str, Option<RawBson>)> = Vec::new();
    for (k, v) in body.iter().flatten() {
        let Some(field) = crate::validation::OPTIONS
            .into_iter()
            .find(|f| *f == k.as_str())
        else {
            continue;
        };
        let value = if field == "validator" {
            crate::validation::check_validator("collMod", db, coll, meta.uuid, v)?
                .map(RawBson::Document)
        } else {
            Some(RawBson::String(crate::validation::check_enum(
                "collMod", field, v,
            )?))
        };
        desc.append(k, v);
        set.push((field, value));
    }
    Ok((!set.is_empty()).then_some((set, desc)))
}

/// Options a `collMod` sets (`None` removes one) and its description for the change log.
type OptionsChange = (Vec<(&'static str, Option<RawBson>)>, RawDocumentBuf);

/// One options change out of the parts that ask for one.
fn merge_changes(parts: [Option<OptionsChange>; 3]) -> Option<OptionsChange> {
    let mut merged: Option<OptionsChange> = None;
    for (set, desc) in parts.into_iter().flatten() {
        let (all, all_desc) = merged.get_or_insert_with(|| (Vec::new(), RawDocumentBuf::new()));
        all.extend(set);
        for (k, v) in desc.iter().flatten() {
            all_desc.append(k, v);
        }
    }
    merged
}

/// `cappedSize` / `cappedMax` (MongoDB 6.0+): new limits for a capped collection. The ranges
/// are the IDL's (51024: `cappedSize` in 1 byte..1 PB, `cappedMax` below 2^31), then the
/// collection must be capped (72); the size is rounded as at `create` and a `cappedMax` of 0
/// or less removes the document limit. Nothing is deleted now: the next insert trims the
/// collection to the new limits, as in MongoDB.
fn capped_change(
    body: &RawDocument,
    meta: &cairn_storage::catalog::CollectionMeta,
) -> Result<Option<OptionsChange>, CommandError> {
    let size = super::args::opt_safe_int64(body, "collMod", "cappedSize")?;
    let max = super::args::opt_safe_int64(body, "collMod", "cappedMax")?;
    if size.is_none() && max.is_none() {
        return Ok(None);
    }
    if let Some(n) = size {
        super::args::check_range("cappedSize", n, Some(1), Some(super::args::ONE_PB))?;
    }
    if let Some(n) = max {
        super::args::check_below("cappedMax", n, 1 << 31)?;
    }
    if cairn_storage::capped::limits(meta).is_none() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "Collection must be capped.",
        ));
    }
    let mut set = Vec::new();
    let mut desc = RawDocumentBuf::new();
    if let Some(n) = size {
        let rounded = super::args::round_capped_size(n);
        set.push(("size", Some(super::args::number_bson(rounded))));
        desc.append(cstr!("cappedSize"), n);
    }
    if let Some(n) = max {
        set.push(("max", (n > 0).then(|| super::args::number_bson(n))));
        desc.append(cstr!("cappedMax"), n);
    }
    Ok(Some((set, desc)))
}

/// `changeStreamPreAndPostImages: {enabled}`: turns recording of pre- and post-images for
/// change streams on or off (off removes the option, as MongoDB stores it); not on `admin`,
/// `local` or `config` (72).
fn images_change(body: &RawDocument, db: &str) -> Result<Option<OptionsChange>, CommandError> {
    let Some(v) = body.get("changeStreamPreAndPostImages").ok().flatten() else {
        return Ok(None);
    };
    let enabled = super::args::pre_and_post_images(v, "collMod")?;
    if enabled {
        super::args::check_images_allowed(db)?;
    }
    let mut desc = RawDocumentBuf::new();
    desc.append(
        cstr!("changeStreamPreAndPostImages"),
        bson::rawdoc! {"enabled": enabled},
    );
    Ok(Some((
        vec![(
            "changeStreamPreAndPostImages",
            enabled.then(|| RawBson::Document(bson::rawdoc! {"enabled": true})),
        )],
        desc,
    )))
}

/// Which index a `collMod` names.
enum Target {
    /// `index.name`.
    Name(String),
    /// `index.keyPattern`.
    KeyPattern(RawDocumentBuf),
}

/// The parsed `index` argument of `collMod` (`CollModIndex`).
struct IndexRequest {
    target: Target,
    hidden: Option<bool>,
    expire_after_seconds: Option<i64>,
}

/// Parses and checks `collMod.index` in MongoDB's order (`parseCollModRequest`): field types,
/// name xor key pattern, at least one change, the TTL range.
fn parse_index_request(spec: &RawDocument) -> Result<IndexRequest, CommandError> {
    let name = match spec.get("name") {
        Ok(Some(RawBsonRef::String(n))) => Some(n.to_string()),
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                "collMod.index.name",
                type_name(&other),
                "string",
            ));
        }
        _ => None,
    };
    let key_pattern = match spec.get("keyPattern") {
        Ok(Some(RawBsonRef::Document(p))) => Some(p.to_owned()),
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                "collMod.index.keyPattern",
                type_name(&other),
                "object",
            ));
        }
        _ => None,
    };
    let hidden = match spec.get("hidden") {
        Ok(Some(RawBsonRef::Boolean(h))) => Some(h),
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                "collMod.index.hidden",
                type_name(&other),
                "bool",
            ));
        }
        _ => None,
    };
    let expire_after_seconds = match spec.get("expireAfterSeconds") {
        Ok(Some(RawBsonRef::Int32(i))) => Some(i64::from(i)),
        Ok(Some(RawBsonRef::Int64(i))) => Some(i),
        Ok(Some(RawBsonRef::Double(d))) if d.fract() == 0.0 => Some(d as i64),
        Ok(Some(other)) => {
            return Err(CommandError::wrong_type(
                "collMod.index.expireAfterSeconds",
                type_name(&other),
                "long",
            ));
        }
        _ => None,
    };
    let target = match (name, key_pattern) {
        (Some(_), Some(_)) => {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Cannot specify both key pattern and name.",
            ));
        }
        (None, None) => {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Must specify either index name or key pattern.",
            ));
        }
        (Some(n), None) => Target::Name(n),
        (None, Some(p)) => Target::KeyPattern(p),
    };
    let unsupported = ["unique", "prepareUnique", "forceNonUnique"]
        .into_iter()
        .find(|f| spec.get(f).ok().flatten().is_some());
    if hidden.is_none() && expire_after_seconds.is_none() && unsupported.is_none() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "no expireAfterSeconds, hidden, unique, or prepareUnique field",
        ));
    }
    if let Some(f) = unsupported {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            format!("collMod option 'index.{f}' is not supported by Cairn yet"),
        ));
    }
    if let Some(n) = expire_after_seconds {
        // `validateExpireAfterSeconds` (secondary TTL index mode).
        if n < 0 {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "TTL index 'expireAfterSeconds' option cannot be less than 0",
            ));
        }
        if n > i64::from(i32::MAX) {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "TTL index 'expireAfterSeconds' option must be within an acceptable range, try \
                 a lower number",
            ));
        }
    }
    Ok(IndexRequest {
        target,
        hidden,
        expire_after_seconds,
    })
}
