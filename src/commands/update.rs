//! `update`: modify documents. `{update: coll, updates: [{q, u, c, upsert, multi,
//! arrayFilters, collation, hint}], ordered, let, writeConcern}` →
//! `{n, nModified, [upserted: [{index, _id}]], [writeErrors], [writeConcernError], ok}`.
//!
//! Each statement: the filter and update are parsed ([`Filter`], [`Update`]; a pipeline `u`
//! with the command's `let` and the statement's constants `c`, which other updates refuse
//! with 51198); then
//! 1. a single-document statement whose filter is `{_id: v}` takes the *targeted* path: the
//!    storage transaction reads the document's root header and only the top-level fields the
//!    update touches ([`cairn_storage::WriteTxn::read_fields`]), applies the update to that
//!    partial document, and writes only the nodes that changed
//!    ([`cairn_storage::WriteTxn::write_fields`]) — `$inc` rewrites one key, `$push` the new
//!    element and headers;
//! 2. any other statement visits matching documents in `_id` order inside transactions
//!    ([`crate::exec::for_each_match`]), applies the update to each whole document and writes
//!    the changed fields the same way (replacements write the node diff);
//! 3. when nothing matched and `upsert` is set, the document seeded from the filter's
//!    equalities and the update is inserted (a concurrent insert of the same `_id` makes the
//!    statement retry as an update).
//!
//! `n` counts matched documents (plus upserts), `nModified` only those that changed. Every
//! write is checked against the collection's validator in storage (write error 121 with
//! `errInfo`) unless `bypassDocumentValidation` is set.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bson::raw::cstr;
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_query::filter::Filter;
use cairn_query::plan::{Hint, Modifies};
use cairn_query::update::{Applied, Update, UpdateKind};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::store::{FieldChange, id_key};
use cairn_storage::{Durability, StorageError, Store, WriteTxn};

use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_strict_bool,
    type_name,
};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::exec::{Step, for_each_match};
use crate::lang::Lang;
use crate::session::Retry;
use crate::session::target::Target;
use crate::state::ServerState;
use crate::write_concern::WriteConcern;

/// `update`.
pub static COMMAND: Command = Command {
    name: "update",
    aliases: &[],
    help: "update documents",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[
        "updates",
        "ordered",
        "bypassDocumentValidation",
        "let",
        "stmtIds",
    ]),
    counter: Counter::SelfCounted,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::update),
    run,
};

/// A parsed update statement.
pub struct Statement {
    /// The filter.
    pub filter: Arc<Filter>,
    /// The statement's `hint`.
    pub hint: Hint,
    /// The update.
    pub update: Update,
    /// `upsert`.
    pub upsert: bool,
    /// `multi`.
    pub multi: bool,
}

fn simple_collation(v: RawBsonRef<'_>) -> Result<(), CommandError> {
    match v {
        RawBsonRef::Document(c)
            if matches!(c.get("locale"), Ok(Some(RawBsonRef::String("simple")))) =>
        {
            Ok(())
        }
        _ => Err(CommandError::new(
            ErrorCode::NotImplemented,
            "collations other than simple are not supported by Cairn yet",
        )),
    }
}

/// Parses one statement. Structural errors (field types, missing `q`/`u`, unknown fields)
/// fail the whole command, as MongoDB's request parser does; errors in the filter or the
/// update belong to the statement (a `writeErrors` entry).
#[allow(clippy::type_complexity)]
pub(crate) fn parse_statement(
    lang: &Lang,
    d: &RawDocument,
) -> Result<Result<Statement, CommandError>, CommandError> {
    let mut q = None;
    let mut u = None;
    let mut upsert = false;
    let mut multi = false;
    let mut array_filters: Option<&RawArray> = None;
    let mut hint = Hint::None;
    let mut constants: Option<&RawDocument> = None;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match k.as_str() {
            "q" => match v {
                RawBsonRef::Document(f) => q = Some(f),
                other => {
                    return Err(CommandError::wrong_type(
                        "update.updates.q",
                        type_name(&other),
                        "object",
                    ));
                }
            },
            "u" => u = Some(v),
            "upsert" => match v {
                RawBsonRef::Boolean(b) => upsert = b,
                other => {
                    return Err(CommandError::wrong_type(
                        "update.updates.upsert",
                        type_name(&other),
                        "bool",
                    ));
                }
            },
            "multi" => match v {
                RawBsonRef::Boolean(b) => multi = b,
                other => {
                    return Err(CommandError::wrong_type(
                        "update.updates.multi",
                        type_name(&other),
                        "bool",
                    ));
                }
            },
            "arrayFilters" => match v {
                RawBsonRef::Array(a) => array_filters = Some(a),
                other => {
                    return Err(CommandError::wrong_type(
                        "update.updates.arrayFilters",
                        type_name(&other),
                        "array",
                    ));
                }
            },
            "collation" => simple_collation(v)?,
            "hint" => hint = super::args::hint_value(v, "update.updates.hint")?,
            "upsertSupplied" => {}
            "c" => match v {
                RawBsonRef::Document(c) => constants = Some(c),
                other => {
                    return Err(CommandError::wrong_type(
                        "update.updates.c",
                        type_name(&other),
                        "object",
                    ));
                }
            },
            other => return Err(CommandError::unknown_field("update.updates", other)),
        }
    }
    let q = q.ok_or_else(|| CommandError::missing_field("update.updates.q"))?;
    let u = u.ok_or_else(|| CommandError::missing_field("update.updates.u"))?;
    Ok((|| {
        let update = match (u, constants) {
            (RawBsonRef::Array(_), Some(c)) => {
                let ext = cairn_query::update::pipeline::with_constants(lang.expr(), c)?;
                Update::parse_with(u, array_filters, upsert, &ext)?
            }
            (_, Some(_)) => {
                return Err(CommandError::new(
                    ErrorCode::Location(51198),
                    "Constant values may only be specified for pipeline updates",
                ));
            }
            (_, None) => Update::parse_with(u, array_filters, upsert, lang.expr())?,
        };
        if multi && update.kind() == UpdateKind::Replacement {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "multi update is not supported for replacement-style update",
            ));
        }
        Ok(Statement {
            filter: Arc::new(lang.filter(Some(q))?),
            hint,
            update,
            upsert,
            multi,
        })
    })())
}

/// The outcome of one statement.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Matched documents.
    pub matched: usize,
    /// Modified documents.
    pub modified: usize,
    /// The `_id` of an upserted document.
    pub upserted: Option<RawBson>,
}

/// Writes the result of applying an update to the stored document `key`: replacements and
/// pipelines as a node diff, operator updates as the changed top-level fields only.
pub fn write_applied(
    tx: &mut WriteTxn<'_>,
    meta: &CollectionMeta,
    key: &[u8],
    kind: UpdateKind,
    applied: &Applied,
) -> Result<(), StorageError> {
    if kind != UpdateKind::Operators {
        tx.replace(meta, key, &applied.doc)?;
        return Ok(());
    }
    let names: Vec<&str> = applied
        .changed_top_level
        .iter()
        .map(String::as_str)
        .collect();
    let view = tx
        .read_fields(meta, key, &names)?
        .ok_or_else(|| StorageError::Corrupt("updated document vanished".into()))?;
    tx.write_fields(meta, &view, &changes_of(applied)?)
}

/// A partial document (`_id` first, then the fields read, in their stored order) for
/// applying an update that touches only those fields.
fn partial_document(view: &cairn_storage::store::DocView) -> RawDocumentBuf {
    let mut fields: Vec<&cairn_storage::store::FieldState> = view.fields.iter().collect();
    fields.sort_by_key(|f| if f.name == "_id" { 0 } else { f.ordinal + 1 });
    let mut d = RawDocumentBuf::new();
    for f in fields {
        if let Ok(k) = <&bson::raw::CStr>::try_from(f.name.as_str()) {
            d.append(k, f.value());
        }
    }
    d
}

/// Where and how a statement runs: the command's target, and for a retryable write the
/// statement to record.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// Where reads and writes go.
    pub target: &'a Target,
    /// The retryable write and this statement's id.
    pub retry: Option<(Retry, i32)>,
    /// Durability of auto-commit writes.
    pub durability: Durability,
    /// `bypassDocumentValidation`.
    pub bypass: bool,
}

impl Ctx<'_> {
    /// Records the statement's outcome in `tx` (the transaction of its write) when it is part
    /// of a retryable write.
    fn record(&self, tx: &mut WriteTxn<'_>, o: &Outcome) -> Result<(), StorageError> {
        let Some((r, stmt)) = &self.retry else {
            return Ok(());
        };
        r.record(tx, *stmt, &o.to_record())
    }
}

impl Outcome {
    /// The record of a retryable statement: `{n, nModified, upserted?}`.
    pub fn to_record(&self) -> RawDocumentBuf {
        let mut d = rawdoc! {
            "n": i32::try_from(self.matched).unwrap_or(i32::MAX),
            "nModified": i32::try_from(self.modified).unwrap_or(i32::MAX),
        };
        if let Some(id) = &self.upserted {
            d.append(cstr!("upserted"), id.clone());
        }
        d
    }

    /// The outcome a record describes.
    pub fn from_record(d: &RawDocument) -> Outcome {
        Outcome {
            matched: usize::try_from(d.get_i32("n").unwrap_or(0)).unwrap_or(0),
            modified: usize::try_from(d.get_i32("nModified").unwrap_or(0)).unwrap_or(0),
            upserted: d.get("upserted").ok().flatten().map(RawBson::from),
        }
    }
}

/// Runs one update statement (blocking).
pub fn execute(
    server: &ServerState,
    ctx: Ctx<'_>,
    db: &str,
    coll: &str,
    st: &Statement,
) -> Result<Outcome, CommandError> {
    let store: &Store = &server.store;
    let target = ctx.target;
    let durability = ctx.durability;
    if ctx.retry.is_some() && st.multi {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "Cannot use (or request) retryable writes with multi=true",
        ));
    }
    let now = || (bson::DateTime::now(), server.store.clock.next());
    let mut out = Outcome::default();
    let targeted = if st.multi {
        None
    } else {
        match (
            st.filter.id_equality(),
            st.update.touched_top_level_fields(),
            st.filter.top_level_fields(),
        ) {
            (Some(id), Some(mut fields), Some(filter_fields)) => {
                for f in filter_fields {
                    if !fields.contains(&f) {
                        fields.push(f);
                    }
                }
                if !fields.iter().any(|f| f == "_id") {
                    fields.push("_id".to_string());
                }
                Some((id, fields))
            }
            _ => None,
        }
    };
    if let Some((id, fields)) = targeted {
        let names: Vec<&str> = fields.iter().map(String::as_str).collect();
        let r = target.write(
            store,
            durability,
            |tx| -> Result<(usize, usize), CommandError> {
                tx.set_bypass_validation(ctx.bypass);
                let Some(meta) = tx.collection(db, coll)? else {
                    return Ok((0, 0));
                };
                let key = id_key(id.as_raw_bson_ref())?;
                let Some(view) = tx.read_fields(&meta, &key, &names)? else {
                    return Ok((0, 0));
                };
                let partial = partial_document(&view);
                let details = if st.update.is_positional() {
                    st.filter.try_match_details(&partial)?
                } else {
                    None
                };
                let applied = st
                    .update
                    .apply(&partial, details.as_ref(), &now)
                    .map_err(CommandError::from)?;
                if applied.modified {
                    let changes = changes_of(&applied)?;
                    tx.write_fields(&meta, &view, &changes)?;
                    ctx.record(
                        tx,
                        &Outcome {
                            matched: 1,
                            modified: 1,
                            upserted: None,
                        },
                    )?;
                }
                Ok((1, usize::from(applied.modified)))
            },
        );
        let (matched, modified) = r?;
        out.matched = matched;
        out.modified = modified;
    } else {
        let kind = st.update.kind();
        let modifies = match st.update.touched_top_level_fields() {
            Some(fields) => Modifies::Paths(fields),
            None => Modifies::Everything,
        };
        let visited = for_each_match(
            server,
            target,
            db,
            coll,
            &st.filter,
            &st.hint,
            Some(&modifies),
            durability,
            !st.multi,
            |tx, meta, key, doc| {
                tx.set_bypass_validation(ctx.bypass);
                let details = if st.update.is_positional() {
                    st.filter.try_match_details(doc)?
                } else {
                    None
                };
                let applied = st
                    .update
                    .apply(doc, details.as_ref(), &now)
                    .map_err(CommandError::from)?;
                if applied.modified {
                    write_applied(tx, meta, key, kind, &applied).map_err(CommandError::from)?;
                    ctx.record(
                        tx,
                        &Outcome {
                            matched: 1,
                            modified: 1,
                            upserted: None,
                        },
                    )?;
                }
                let step = if st.multi { Step::Continue } else { Step::Stop };
                Ok((step, applied.modified))
            },
        )?;
        out.matched = visited.matched;
        out.modified = visited.counted;
    }
    if out.matched == 0 && st.upsert {
        let doc = st.update.upsert_document(&st.filter, &now)?;
        let prepared =
            cairn_query::insert::prepare(&doc, || server.store.clock.next())?.into_owned();
        let id = prepared
            .get("_id")
            .ok()
            .flatten()
            .map(RawBson::from)
            .unwrap_or(RawBson::Null);
        let meta: Arc<CollectionMeta> = target.ensure_collection(store, db, coll)?;
        let upserted = Outcome {
            matched: 0,
            modified: 0,
            upserted: Some(id.clone()),
        };
        match target.write(store, durability, |tx| -> Result<(), StorageError> {
            tx.set_bypass_validation(ctx.bypass);
            tx.insert(&meta, &prepared)?;
            ctx.record(tx, &upserted)
        }) {
            Ok(()) => {
                out.matched = 0;
                out.upserted = Some(id);
            }
            Err(StorageError::DuplicateKey { key_pattern, .. })
                if !st.multi && equality_covers(&st.filter, &key_pattern) =>
            {
                // Someone inserted a document with the same key meanwhile, and the filter
                // pins that key: apply the update to it instead (MongoDB's upsert retry).
                return execute(
                    server,
                    ctx,
                    db,
                    coll,
                    &Statement {
                        filter: st.filter.clone(),
                        hint: st.hint.clone(),
                        update: st.update.clone(),
                        upsert: false,
                        multi: st.multi,
                    },
                );
            }
            Err(e) => return Err(CommandError::from(e)),
        }
    }
    Ok(out)
}

/// Whether the filter has an equality on every field of a unique index's key pattern (so a
/// duplicate key on upsert means the wanted document now exists).
fn equality_covers(filter: &Filter, key_pattern: &RawDocument) -> bool {
    let eq = filter.equality_fields();
    key_pattern
        .iter()
        .flatten()
        .all(|(k, _)| eq.iter().any(|(p, _)| p.as_str() == k.as_str()))
}

/// The top-level fields an update changed, borrowed from the new document: in the order the new
/// document has them (new fields appended in that order), then the removed ones.
fn changes_of(applied: &Applied) -> Result<Vec<FieldChange<'_>>, StorageError> {
    let mut changes: Vec<FieldChange<'_>> = Vec::new();
    for el in applied.doc.iter() {
        let (k, v) = el.map_err(|e| StorageError::Corrupt(e.to_string()))?;
        if applied.changed_top_level.iter().any(|c| c == k.as_str()) {
            changes.push((k.as_str(), Some(v)));
        }
    }
    for name in &applied.changed_top_level {
        if !changes.iter().any(|(n, _)| n == name) {
            changes.push((name, None));
        }
    }
    Ok(changes)
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        super::insert::check_txn_write(inv.server, inv.op, &db, &coll)?;
        cairn_storage::namespace::check_write(&db, &coll).map_err(CommandError::from)?;
        let ordered = opt_strict_bool(inv.parsed, "update", "ordered")?.unwrap_or(true);
        let bypass =
            opt_strict_bool(inv.parsed, "update", "bypassDocumentValidation")?.unwrap_or(false);
        let wc = WriteConcern::from_command(inv.parsed)?;
        let lang = Lang::for_command(inv.parsed, "update", crate::lang::cluster_time(inv.server))?;
        let stmts = match inv.parsed.get("updates") {
            Ok(Some(RawBsonRef::Array(a))) => a,
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "update.updates",
                    type_name(&other),
                    "array",
                ));
            }
            _ => return Err(CommandError::missing_field("update.updates")),
        };
        let mut parsed = Vec::new();
        for (i, el) in stmts.into_iter().enumerate() {
            let el = el.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::Document(d) = el else {
                return Err(CommandError::wrong_type(
                    &format!("update.updates.{i}"),
                    type_name(&el),
                    "object",
                ));
            };
            parsed.push(parse_statement(&lang, d)?);
        }
        super::args::check_batch_size(parsed.len())?;
        inv.server
            .opcounters
            .update
            .fetch_add(parsed.len() as i64, Relaxed);
        let server = inv.server.clone();
        let durability = wc.durability();
        let target = inv.op.target.clone();
        let ordered = ordered || target.in_txn();
        let retry = inv.op.retry;
        let stmt_ids = crate::session::retry::stmt_ids(inv.parsed, "update", parsed.len())?;
        // One statement by `_id` writes one document: inline (see `blocking::short_write`).
        let point = parsed.len() == 1
            && matches!(parsed.first(), Some(Ok(st))
                if st.filter.id_equality().is_some() && matches!(st.hint, Hint::None));
        let short = point && blocking::short_write(&server.store, &db, &coll, durability);
        let (n, modified, upserted, errors, retried) = blocking::run_short(short, move || {
            let (mut n, mut modified) = (0usize, 0usize);
            let mut upserted = Vec::new();
            let mut errors = Vec::new();
            let mut retried = Vec::new();
            let done = match &retry {
                Some(r) => r.executed(&server.store, &stmt_ids)?,
                None => vec![None; stmt_ids.len()],
            };
            for (i, st) in parsed.into_iter().enumerate() {
                let stmt = stmt_ids.get(i).copied().unwrap_or(0);
                let ctx = Ctx {
                    target: &target,
                    retry: retry.map(|r| (r, stmt)),
                    durability,
                    bypass,
                };
                let r = match done.get(i) {
                    Some(Some(rec)) => {
                        retried.push(stmt);
                        Ok(Outcome::from_record(rec))
                    }
                    _ => st.and_then(|st| {
                        crate::views::check_not_view(&server, &db, &coll)?;
                        execute(&server, ctx, &db, &coll, &st)
                    }),
                };
                match r {
                    Ok(o) => {
                        n += o.matched;
                        modified += o.modified;
                        if let Some(id) = o.upserted {
                            n += 1;
                            upserted.push((i, id));
                        }
                    }
                    Err(e) => {
                        errors.push((i, e));
                        if ordered {
                            break;
                        }
                    }
                }
            }
            Ok((n, modified, upserted, errors, retried))
        })
        .await?;
        let mut out = RawDocumentBuf::new();
        out.append(cstr!("n"), i32::try_from(n).unwrap_or(i32::MAX));
        out.append(
            cstr!("nModified"),
            i32::try_from(modified).unwrap_or(i32::MAX),
        );
        if !upserted.is_empty() {
            let mut arr = RawArrayBuf::new();
            for (i, id) in upserted {
                arr.push(rawdoc! {"index": i32::try_from(i).unwrap_or(i32::MAX), "_id": id});
            }
            out.append(cstr!("upserted"), arr);
        }
        super::insert::append_errors_and_retried(&mut out, &errors, &retried);
        if let Some(wce) = wc.error() {
            out.append(cstr!("writeConcernError"), wce);
        }
        Ok(out.into())
    })
}
