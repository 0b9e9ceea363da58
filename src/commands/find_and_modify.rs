//! `findAndModify` (alias `findandmodify`): atomically modify or remove one document and
//! return it.
//!
//! `{findAndModify: coll, query, sort, remove, update, new, fields, upsert, arrayFilters}` →
//! `{lastErrorObject: {n, [updatedExisting], [upserted]}, value: <doc or null>, ok}`.
//!
//! The document is chosen and changed in the same storage transaction: with a `sort`, every
//! matching document is read in that transaction and the first in sort order kept (O(1)
//! memory), so a concurrent change to what was read makes the transaction rerun. `value` is
//! the document before the change, or after it with `new: true`, projected by `fields`.
//! A document the collection's validator refuses fails the command with 121 and `errInfo`
//! (unless `bypassDocumentValidation`).

use std::sync::Arc;

use bson::raw::cstr;
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_query::plan::{Execution, Modifies, Query, choose};
use cairn_query::sort::SortSpec;
use cairn_query::update::Update;
use cairn_storage::StorageError;
use cairn_storage::store::id_key;

use super::update::write_applied;
use super::{
    CmdFuture, Command, Counter, Fields, Invocation, collection_arg_parsed, opt_document, truthy,
    type_name,
};
use crate::blocking;
use crate::error::{CommandError, ErrorCode};
use crate::write_concern::WriteConcern;

/// `findAndModify`.
pub static COMMAND: Command = Command {
    name: "findAndModify",
    aliases: &["findandmodify"],
    help: "{ findAndModify: \"collection\", query: {processed:false}, update: {$set: {processed:true}}, new: true}\n{ findAndModify: \"collection\", query: {processed:false}, remove: true, sort: {priority:-1}}\nEither update or remove is required, all other fields have default values.\nOutput is in the \"value\" field\n",
    requires_auth: true,
    admin_only: false,
    secondary_ok: false,
    api_v1: true,
    fields: Fields::Strict(&[
        "query",
        "sort",
        "remove",
        "update",
        "new",
        "fields",
        "upsert",
        "arrayFilters",
        "bypassDocumentValidation",
        "collation",
        "hint",
        "let",
    ]),
    counter: Counter::Command,
    kill_on_disconnect: false,
    authz: super::Authz::Custom(crate::auth::authorize::find_and_modify),
    run,
};

/// What a findAndModify did (also its retryable-write record, before projection).
#[derive(Debug, Default)]
struct Outcome {
    n: i32,
    updated_existing: bool,
    upserted: Option<RawBson>,
    value: Option<RawDocumentBuf>,
}

impl Outcome {
    fn to_record(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("n"), self.n);
        d.append(cstr!("updatedExisting"), self.updated_existing);
        if let Some(id) = &self.upserted {
            d.append(cstr!("upserted"), id.clone());
        }
        if let Some(v) = &self.value {
            d.append(cstr!("value"), v.clone());
        }
        d
    }

    fn from_record(d: &RawDocument) -> Outcome {
        Outcome {
            n: d.get_i32("n").unwrap_or(0),
            updated_existing: d.get_bool("updatedExisting").unwrap_or(false),
            upserted: d.get("upserted").ok().flatten().map(RawBson::from),
            value: d.get_document("value").ok().map(RawDocument::to_owned),
        }
    }
}

fn failed(msg: &str) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

fn flag(body: &RawDocument, field: &str) -> bool {
    matches!(body.get(field), Ok(Some(v)) if truthy(&v))
}

fn run(inv: Invocation<'_>) -> CmdFuture<'_> {
    Box::pin(async move {
        let body = inv.req.body;
        let coll = collection_arg_parsed(&inv.req, inv.parsed)?.to_string();
        let db = inv.req.db.to_string();
        super::insert::check_txn_write(inv.server, inv.op, &db, &coll)?;
        cairn_storage::namespace::check_write(&db, &coll).map_err(CommandError::from)?;
        crate::views::check_not_view(inv.server, &db, &coll)?;
        let wc = WriteConcern::from_command(body)?;
        let remove = flag(body, "remove");
        let new = flag(body, "new");
        let upsert = flag(body, "upsert");
        let bypass = super::opt_strict_bool(body, "findAndModify", "bypassDocumentValidation")?
            .unwrap_or(false);
        let update_spec = body.get("update").ok().flatten();
        match (remove, update_spec.is_some()) {
            (false, false) => {
                return Err(failed("Either an update or remove=true must be specified"));
            }
            (true, true) => return Err(failed("Cannot specify both an update and remove=true")),
            _ => {}
        }
        if remove && upsert {
            return Err(failed("Cannot specify both upsert=true and remove=true"));
        }
        if remove && new {
            return Err(failed(
                "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
            ));
        }
        let lang = crate::lang::Lang::for_command(
            body,
            "findAndModify",
            crate::lang::cluster_time(inv.server),
        )?;
        let filter = Arc::new(lang.filter(opt_document(body, "findAndModify", "query")?)?);
        let hint = super::args::parse_hint(body, "findAndModify")?;
        let sort = match opt_document(body, "findAndModify", "sort")? {
            Some(s) => Some(SortSpec::parse(s)?).filter(|s| !s.is_empty()),
            None => None,
        };
        let projection = match opt_document(body, "findAndModify", "fields")? {
            Some(p) if !p.is_empty() => Some(lang.projection(p)?),
            _ => None,
        };
        let array_filters = match body.get("arrayFilters") {
            Ok(Some(RawBsonRef::Array(a))) => Some(a),
            Ok(Some(other)) => {
                return Err(CommandError::wrong_type(
                    "findAndModify.arrayFilters",
                    type_name(&other),
                    "array",
                ));
            }
            _ => None,
        };
        if remove && array_filters.is_some() {
            return Err(failed("Cannot specify arrayFilters and remove=true"));
        }
        if let Ok(Some(c)) = body.get("collation")
            && !matches!(c, RawBsonRef::Document(d) if matches!(d.get("locale"), Ok(Some(RawBsonRef::String("simple")))))
        {
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                "collations other than simple are not supported by Cairn yet",
            ));
        }
        let update = match update_spec {
            Some(u) => Some(Update::parse_with(u, array_filters, upsert, lang.expr())?),
            None => None,
        };
        let server = inv.server.clone();
        let durability = wc.durability();
        let is_update = update.is_some();
        let target = inv.op.target.clone();
        let retry = inv.op.retry;
        let stmt = crate::session::retry::stmt_ids(body, "findAndModify", 1)?
            .first()
            .copied()
            .unwrap_or(0);
        // By `_id` (no sort or hint) it changes one document: inline (see
        // `blocking::short_write`).
        let short = filter.id_equality().is_some()
            && sort.is_none()
            && matches!(hint, cairn_query::plan::Hint::None)
            && blocking::short_write(&server.store, &db, &coll, durability);
        let (outcome, retried) = blocking::run_short(short, move || {
            let store = &server.store;
            if let Some(r) = &retry
                && let Some(Some(rec)) = r.executed(store, &[stmt])?.into_iter().next()
            {
                return Ok((Outcome::from_record(&rec), true));
            }
            let record = |tx: &mut cairn_storage::WriteTxn<'_>, o: &Outcome| match &retry {
                Some(r) => r.record(tx, stmt, &o.to_record()),
                None => Ok(()),
            };
            let now = || (bson::DateTime::now(), server.store.clock.next());
            // The plan is chosen on a snapshot; it then runs inside the write transaction.
            let plan = target.read(store, |view| match view.collection(&db, &coll)? {
                Some(meta) if !(filter.id_equality().is_some() && sort.is_none()) => {
                    let read = view.source();
                    let modifies = update.as_ref().map(|u| match u.touched_top_level_fields() {
                        Some(f) => Modifies::Paths(f),
                        None => Modifies::Everything,
                    });
                    let mut q = Query::new(&filter, &hint);
                    q.sort = sort.as_ref();
                    q.modifies = modifies.as_ref();
                    let chosen = choose(
                        Some(&server.plan_cache),
                        &format!("{db}.{coll}"),
                        &meta,
                        &q,
                        &filter,
                        read,
                        false,
                    )?;
                    Ok(Some(chosen.exec.plan().clone()))
                }
                _ => Ok(None),
            })?;
            let found = target.write(
                store,
                durability,
                |tx| -> Result<Option<(RawDocumentBuf, RawDocumentBuf)>, CommandError> {
                    tx.set_bypass_validation(bypass);
                    let Some(meta) = tx.collection(&db, &coll)? else {
                        return Ok(None);
                    };
                    // Choose the document inside this transaction.
                    let chosen: Option<RawDocumentBuf> = if let (Some(id), None) =
                        (filter.id_equality(), &sort)
                    {
                        tx.get_by_key(&meta, &id_key(id.as_raw_bson_ref())?)?
                    } else {
                        let Some(plan) = &plan else {
                            return Ok(None);
                        };
                        let mut exec = Execution::new(plan.clone(), filter.clone(), false);
                        let sorted_by_plan = sort.is_none() || plan.provides_sort;
                        let mut best: Option<RawDocumentBuf> = None;
                        while !exec.is_exhausted() {
                            crate::deadline::check()?;
                            let want = if sorted_by_plan { 1 } else { 1000 };
                            for d in exec.next(tx, &meta, want, usize::MAX, 10_000)? {
                                best = match (best, &sort) {
                                    (None, _) => Some(d),
                                    (Some(b), Some(spec)) if !sorted_by_plan => {
                                        let ord =
                                            spec.try_compare(&d, &b).map_err(CommandError::from)?;
                                        Some(if ord == std::cmp::Ordering::Less {
                                            d
                                        } else {
                                            b
                                        })
                                    }
                                    (Some(b), _) => Some(b),
                                };
                            }
                            if sorted_by_plan && best.is_some() {
                                break;
                            }
                        }
                        best
                    };
                    let Some(doc) = chosen else {
                        return Ok(None);
                    };
                    let key = id_key(doc.get("_id").ok().flatten().unwrap_or(RawBsonRef::Null))?;
                    match &update {
                        None => {
                            tx.delete_by_key(&meta, &key)?;
                            record(
                                tx,
                                &Outcome {
                                    n: 1,
                                    updated_existing: false,
                                    upserted: None,
                                    value: Some(doc.clone()),
                                },
                            )?;
                            Ok(Some((doc.clone(), doc)))
                        }
                        Some(u) => {
                            let details = if u.is_positional() {
                                filter.try_match_details(&doc)?
                            } else {
                                None
                            };
                            let applied = u.apply(&doc, details.as_ref(), &now)?;
                            if applied.modified {
                                write_applied(tx, &meta, &key, u.kind(), &applied)?;
                                let value = if new { &applied.doc } else { &doc };
                                record(
                                    tx,
                                    &Outcome {
                                        n: 1,
                                        updated_existing: true,
                                        upserted: None,
                                        value: Some(value.clone()),
                                    },
                                )?;
                            }
                            Ok(Some((doc, applied.doc)))
                        }
                    }
                },
            )?;
            let outcome = match found {
                Some((before, after)) => {
                    let value = if new { after } else { before };
                    Outcome {
                        n: 1,
                        updated_existing: update.is_some(),
                        upserted: None,
                        value: Some(value),
                    }
                }
                None if upsert => {
                    let Some(u) = &update else {
                        return Ok((Outcome::default(), false));
                    };
                    let doc = u.upsert_document(&filter, &now)?;
                    let prepared =
                        cairn_query::insert::prepare(&doc, || server.store.clock.next())?
                            .into_owned();
                    let id = prepared
                        .get("_id")
                        .ok()
                        .flatten()
                        .map(RawBson::from)
                        .unwrap_or(RawBson::Null);
                    let meta = target.ensure_collection(store, &db, &coll)?;
                    let outcome = Outcome {
                        n: 1,
                        updated_existing: false,
                        upserted: Some(id),
                        value: if new { Some(prepared.clone()) } else { None },
                    };
                    target.write(store, durability, |tx| -> Result<(), StorageError> {
                        tx.set_bypass_validation(bypass);
                        tx.insert(&meta, &prepared)?;
                        record(tx, &outcome)
                    })?;
                    outcome
                }
                None => Outcome::default(),
            };
            Ok((outcome, false))
        })
        .await?;
        let Outcome {
            n,
            updated_existing,
            upserted,
            value,
        } = outcome;
        let value = match (value, &projection) {
            (Some(v), Some(p)) => Some(p.apply(&v, None)?),
            (v, _) => v,
        };
        let mut leo = RawDocumentBuf::new();
        leo.append(cstr!("n"), n);
        if is_update {
            leo.append(cstr!("updatedExisting"), updated_existing);
        }
        if let Some(id) = upserted {
            leo.append(cstr!("upserted"), id);
        }
        let mut out = RawDocumentBuf::new();
        out.append(cstr!("lastErrorObject"), leo);
        match value {
            Some(v) => out.append(cstr!("value"), v),
            None => out.append(cstr!("value"), RawBson::Null),
        }
        if retried {
            out.append(cstr!("retriedStmtId"), stmt);
        }
        if let Some(wce) = wc.error() {
            out.append(cstr!("writeConcernError"), wce);
        }
        Ok(out.into())
    })
}
