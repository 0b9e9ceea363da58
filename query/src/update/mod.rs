//! The update engine: MongoDB 7.0 update documents as pure functions over documents.
//!
//! [`Update::parse`] turns an update specification into either a replacement document or a
//! tree of operators (`$set $unset $inc $mul $min $max $rename $currentDate $setOnInsert $push
//! $addToSet $pop $pull $pullAll $bit`, with positional `$`, `$[]` and `$[<id>]` + arrayFilters);
//! [`Update::apply`] applies it to a stored document, [`Update::upsert_document`] builds the
//! document an upsert inserts. The behaviour follows src/mongo/db/update/*.cpp:
//!
//! - a specification whose first field starts with `$` is an operator update (every field
//!   must then be a known operator, FailedToParse otherwise); anything else, `{}` included, is
//!   a replacement; an array is a pipeline ([`pipeline`]: `$addFields $set $project $unset
//!   $replaceRoot $replaceWith` run over the document, parsed with the command's variables by
//!   [`Update::parse_with`]; `arrayFilters` with it are FailedToParse);
//! - operators are merged into one path tree; two operators on one path or on a path and its
//!   prefix are ConflictingUpdateOperators (40) at parse time;
//! - fields are updated in the tree's order — byte order, except that names that look like
//!   array positions compare numerically (MongoDB 5.0+) — so new fields are appended in that
//!   order whatever order the operators were written in;
//! - `_id` may not change (ImmutableField, 66); a replacement keeps the stored `_id`;
//! - a result over 16 MiB is error 17419 (17420 for an upsert);
//! - `modified` is false when every operator was a no-op (`nModified` does not count it);
//!   replacements are no-ops exactly when the result is byte-identical.
//!
//! Error codes without a [`QueryError`] variant of their own are reported as
//! [`QueryError::Location`] with the constants below (the server maps them to MongoDB's names).
//!
//! Invariants: parsing and applying never panic on any input; a parsed [`Update`] is
//! immutable, `Send + Sync` and reusable for any number of documents; applying never reads a
//! top-level field outside [`Update::touched_top_level_fields`] (plus `_id`).

mod apply;
mod arith;
mod doc;
mod ops;
pub mod pipeline;
mod tree;

use std::collections::BTreeMap;
use std::sync::Arc;

use bson::{RawArray, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{QueryError, Result};
use crate::expr::ExprExtensions;
use crate::filter::{CmpOp, Expr, Filter, MatchDetails, PathExpr, Predicate};
use crate::insert::MAX_USER_SIZE;

pub use apply::MAX_STORAGE_DEPTH;

/// FailedToParse (9).
pub const FAILED_TO_PARSE_CODE: i32 = 9;
/// Overflow (15): nesting deeper than [`MAX_STORAGE_DEPTH`].
pub const OVERFLOW: i32 = 15;
/// PathNotViable (28).
pub const PATH_NOT_VIABLE: i32 = 28;
/// CannotBackfillArray (34).
pub const CANNOT_BACKFILL_ARRAY: i32 = 34;
/// ConflictingUpdateOperators (40).
pub const CONFLICTING_UPDATE_OPERATORS: i32 = 40;
/// NotSingleValueField (54).
pub const NOT_SINGLE_VALUE_FIELD: i32 = 54;
/// InvalidDBRef (55).
pub const INVALID_DBREF: i32 = 55;
/// EmptyFieldName (56).
pub const EMPTY_FIELD_NAME: i32 = 56;
/// ImmutableField (66).
pub const IMMUTABLE_FIELD: i32 = 66;
/// NotExactValueField (111).
pub const NOT_EXACT_VALUE_FIELD: i32 = 111;
/// "Resulting document after update is larger than 16777216".
pub const UPDATE_TOO_LARGE: i32 = 17419;
/// "Document to upsert is larger than 16777216".
pub const UPSERT_TOO_LARGE: i32 = 17420;

/// The clock of `$currentDate` and of filled-in empty timestamps: called once per value.
pub type Now<'n> = dyn Fn() -> (bson::DateTime, bson::Timestamp) + 'n;

/// What kind of update a specification is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    /// A whole replacement document.
    Replacement,
    /// Update operators (`$set`, …).
    Operators,
    /// An aggregation pipeline (`[{$set: …}, …]`).
    Pipeline,
}

#[derive(Debug, Clone)]
enum Kind {
    Replacement(RawDocumentBuf),
    Operators {
        root: tree::UNode,
        filters: tree::ArrayFilters,
        positional: bool,
    },
    Pipeline(pipeline::UpdatePipeline),
}

/// A parsed update.
#[derive(Debug, Clone)]
pub struct Update {
    kind: Kind,
    upsert: bool,
}

/// The result of applying an update to a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The updated document.
    pub doc: RawDocumentBuf,
    /// Whether anything changed (`nModified` semantics).
    pub modified: bool,
    /// Top-level fields that were set or removed, in byte order.
    pub changed_top_level: Vec<String>,
}

impl Update {
    /// Parses an update specification (the `u` of an update statement). `array_filters` are
    /// the statement's `arrayFilters`; `is_upsert` records the statement's `upsert` flag.
    /// Pipelines are parsed without user variables (see [`Update::parse_with`]).
    pub fn parse(
        spec: RawBsonRef<'_>,
        array_filters: Option<&RawArray>,
        is_upsert: bool,
    ) -> Result<Update> {
        Update::parse_with(spec, array_filters, is_upsert, &ExprExtensions::new())
    }

    /// [`Update::parse`] with the expression language (the command's `let`, `$$NOW`,
    /// `$$CLUSTER_TIME`, the statement's constants) a pipeline is parsed with.
    pub fn parse_with(
        spec: RawBsonRef<'_>,
        array_filters: Option<&RawArray>,
        is_upsert: bool,
        ext: &ExprExtensions,
    ) -> Result<Update> {
        let doc = match spec {
            RawBsonRef::Document(d) => d,
            RawBsonRef::Array(a) => {
                if array_filters.is_some_and(|a| a.into_iter().next().is_some()) {
                    return Err(QueryError::FailedToParse(
                        "arrayFilters may not be specified for pipeline-style updates".into(),
                    ));
                }
                return Ok(Update {
                    kind: Kind::Pipeline(pipeline::UpdatePipeline::parse(a, ext)?),
                    upsert: is_upsert,
                });
            }
            _ => {
                return Err(QueryError::FailedToParse(
                    "Update argument must be either an object or an array".into(),
                ));
            }
        };
        let filters = parse_array_filters(array_filters)?;
        let first = match doc.iter().next() {
            Some(el) => Some(el.map_err(doc::malformed)?.0.as_str().to_string()),
            None => None,
        };
        let kind = if first.is_some_and(|f| f.starts_with('$')) {
            let (root, positional) = tree::parse_operators(doc, &filters)?;
            Kind::Operators {
                root,
                filters,
                positional,
            }
        } else {
            Kind::Replacement(doc.to_owned())
        };
        Ok(Update {
            kind,
            upsert: is_upsert,
        })
    }

    /// Replacement or operators.
    pub fn kind(&self) -> UpdateKind {
        match self.kind {
            Kind::Replacement(_) => UpdateKind::Replacement,
            Kind::Operators { .. } => UpdateKind::Operators,
            Kind::Pipeline(_) => UpdateKind::Pipeline,
        }
    }

    /// Whether the update uses the positional `$` operator (it then needs match details).
    pub fn is_positional(&self) -> bool {
        matches!(
            self.kind,
            Kind::Operators {
                positional: true,
                ..
            }
        )
    }

    /// The `is_upsert` flag given to [`Update::parse`].
    pub fn is_upsert(&self) -> bool {
        self.upsert
    }

    /// Top-level fields the update reads or writes (including `$rename` sources), so storage
    /// can read only those subtrees (plus `_id`); `None` for replacements and pipelines.
    pub fn touched_top_level_fields(&self) -> Option<Vec<String>> {
        match &self.kind {
            Kind::Replacement(_) | Kind::Pipeline(_) => None,
            Kind::Operators { root, .. } => {
                let mut out = Vec::new();
                tree::top_level_fields(root, &mut out);
                Some(out)
            }
        }
    }

    /// Applies the update to `doc` (a whole document, or one holding at least the touched
    /// top-level fields and `_id`). `details` are the filter's match details (for `$`).
    pub fn apply(
        &self,
        doc: &RawDocument,
        details: Option<&MatchDetails>,
        now: &Now<'_>,
    ) -> Result<Applied> {
        let matched = details
            .and_then(|d| d.elem_match_key)
            .map(|i| i.to_string());
        let applied = match &self.kind {
            Kind::Replacement(r) => {
                let out = apply::replace(doc, r, now, true)?;
                let modified = out.as_bytes() != doc.as_bytes();
                let changed_top_level = if modified {
                    changed_fields(doc, &out)?
                } else {
                    Vec::new()
                };
                Applied {
                    doc: out,
                    modified,
                    changed_top_level,
                }
            }
            Kind::Operators { root, filters, .. } => {
                let (out, modified, changed) =
                    run_tree(root, filters, doc, matched, false, true, now)?;
                Applied {
                    doc: out,
                    modified,
                    changed_top_level: changed,
                }
            }
            Kind::Pipeline(p) => {
                let transformed = p.run(doc)?;
                // MongoDB compares the pipeline's output with the input before putting the
                // stored `_id` back.
                if transformed.as_bytes() == doc.as_bytes() {
                    Applied {
                        doc: doc.to_owned(),
                        modified: false,
                        changed_top_level: Vec::new(),
                    }
                } else {
                    let out = apply::replace_with_pipeline_output(doc, &transformed)?;
                    let changed_top_level = changed_fields(doc, &out)?;
                    Applied {
                        doc: out,
                        modified: true,
                        changed_top_level,
                    }
                }
            }
        };
        if applied.modified && applied.doc.as_bytes().len() > MAX_USER_SIZE {
            return Err(QueryError::Location(
                UPDATE_TOO_LARGE,
                format!("Resulting document after update is larger than {MAX_USER_SIZE}"),
            ));
        }
        Ok(applied)
    }

    /// The document an upsert inserts: seeded from the filter's equality predicates (plain
    /// values, `$eq`, one-value `$in`, inside `$and` and one-clause `$or`; dotted paths create
    /// nested documents) for operator and pipeline updates, or only from its `_id` equality
    /// for replacements; then the update applied as an insert (`$setOnInsert` honoured), `_id`
    /// moved first (a new ObjectId when there is none) and the result validated for storage.
    pub fn upsert_document(&self, filter: &Filter, now: &Now<'_>) -> Result<RawDocumentBuf> {
        let equalities = equality_matches(filter.expr())?;
        let out = match &self.kind {
            Kind::Replacement(r) => {
                let mut seed = RawDocumentBuf::new();
                for (path, v) in &equalities {
                    if path.first().is_some_and(|p| p == "_id") {
                        if path.len() > 1 {
                            return Err(QueryError::Location(
                                NOT_EXACT_VALUE_FIELD,
                                format!(
                                    "field at '_id' must be exactly specified, field at sub-path \
                                     '{}'found",
                                    path.join(".")
                                ),
                            ));
                        }
                        seed.append(bson::raw::cstr!("_id"), v.as_raw_bson_ref());
                    }
                }
                apply::replace(&seed, r, now, false)?
            }
            Kind::Operators { root, filters, .. } => {
                let seed = seed_document(&equalities)?;
                run_tree(root, filters, &seed, None, true, false, now)?.0
            }
            Kind::Pipeline(p) => {
                // Seeded as an operator update is, then the pipeline runs over the seed.
                let seed = seed_document(&equalities)?;
                let transformed = p.run(&seed)?;
                apply::replace_with_pipeline_output(&seed, &transformed)?
            }
        };
        let out = id_first(&out)?;
        apply::validate_document(&out, true)?;
        if out.as_bytes().len() > MAX_USER_SIZE {
            return Err(QueryError::Location(
                UPSERT_TOO_LARGE,
                format!("Document to upsert is larger than {MAX_USER_SIZE}"),
            ));
        }
        Ok(out)
    }
}

/// Runs an operator tree over `doc`.
fn run_tree(
    root: &tree::UNode,
    filters: &tree::ArrayFilters,
    doc: &RawDocument,
    matched: Option<String>,
    insert: bool,
    validate: bool,
    now: &Now<'_>,
) -> Result<(RawDocumentBuf, bool, Vec<String>)> {
    let mut engine = apply::Engine {
        root: apply::Engine::new_doc(doc)?,
        matched,
        insert,
        validate,
        id: apply::id_string(doc),
        now,
        filters,
        changed_top: Default::default(),
    };
    let modified = engine.apply_node(root, &mut Vec::new(), &mut Vec::new())?;
    if !modified {
        return Ok((doc.to_owned(), false, Vec::new()));
    }
    let out = engine.root.write_document()?;
    Ok((out, true, engine.changed_top.into_iter().collect()))
}

/// Top-level fields whose value differs between `a` and `b` (or that only one has).
fn changed_fields(a: &RawDocument, b: &RawDocument) -> Result<Vec<String>> {
    let mut out = std::collections::BTreeSet::new();
    for (x, y) in [(a, b), (b, a)] {
        for el in x.iter() {
            let (k, v) = el.map_err(doc::malformed)?;
            let same = match y.get(k.as_str()).map_err(doc::malformed)? {
                Some(w) => ops::binary_equal(v, w),
                None => false,
            };
            if !same {
                out.insert(k.as_str().to_string());
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// Moves `_id` first, generating an ObjectId when there is none (`ensureIdFieldIsFirst`).
fn id_first(doc: &RawDocument) -> Result<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    match doc.get("_id").map_err(doc::malformed)? {
        Some(id) => out.append(bson::raw::cstr!("_id"), id),
        None => out.append(bson::raw::cstr!("_id"), bson::oid::ObjectId::new()),
    }
    let mut seen_id = false;
    for el in doc.iter() {
        let (k, v) = el.map_err(doc::malformed)?;
        if k.as_str() == "_id" && !seen_id {
            seen_id = true;
            continue;
        }
        out.append(k, v);
    }
    Ok(out)
}

/// `pathsupport::extractEqualityMatches` over the canonical query: equalities of the top-level
/// conjunction, with conflicting paths refused (NotSingleValueField).
fn equality_matches(root: &Expr) -> Result<Vec<(Vec<String>, bson::RawBson)>> {
    fn walk(e: &Expr, out: &mut Vec<(Vec<String>, bson::RawBson)>) {
        match e {
            Expr::And(cs) => cs.iter().for_each(|c| walk(c, out)),
            Expr::Or(cs) if cs.len() == 1 => cs.iter().for_each(|c| walk(c, out)),
            Expr::Path(PathExpr {
                path,
                pred: Predicate::Cmp(CmpOp::Eq, v),
            }) => out.push((path.parts().to_vec(), v.clone())),
            Expr::Path(PathExpr {
                path,
                pred: Predicate::In(list),
            }) if list.len() == 1 && list.regexes().is_empty() => {
                if let Some(v) = list.values().next() {
                    out.push((path.parts().to_vec(), v.into()));
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    // Conflicts: one path equal to or a prefix of another (checked in path order, as the
    // canonical query sorts its clauses).
    let mut sorted: Vec<&Vec<String>> = out.iter().map(|(p, _)| p).collect();
    sorted.sort_by_key(|p| p.join("."));
    for (i, p) in sorted.iter().enumerate() {
        for q in sorted.iter().skip(i + 1) {
            if q.starts_with(p) {
                let msg = if q.len() == p.len() {
                    format!(
                        "cannot infer query fields to set, path '{}' is matched twice",
                        p.join(".")
                    )
                } else {
                    format!(
                        "cannot infer query fields to set, both paths '{}' and '{}' are matched",
                        q.join("."),
                        p.join(".")
                    )
                };
                return Err(QueryError::Location(NOT_SINGLE_VALUE_FIELD, msg));
            }
        }
    }
    // MongoDB keeps them in a map ordered by path (component by component), and creates the
    // fields in that order.
    out.sort_by(|(a, _), (b, _)| a.cmp(b));
    Ok(out)
}

/// The pre-image of an operator upsert: each equality set at its path (`addEqualitiesToDoc`).
fn seed_document(equalities: &[(Vec<String>, bson::RawBson)]) -> Result<RawDocumentBuf> {
    let mut root = doc::Value::Doc(Vec::new());
    for (path, v) in equalities {
        if path.len() > MAX_STORAGE_DEPTH {
            return Err(QueryError::Location(
                OVERFLOW,
                format!("Document exceeds maximum nesting depth of {MAX_STORAGE_DEPTH}"),
            ));
        }
        set_at(&mut root, path, doc::Value::Owned(v.clone()), path)?;
    }
    root.write_document()
}

fn set_at<'a>(
    cur: &mut doc::Value<'a>,
    rest: &[String],
    value: doc::Value<'a>,
    full: &[String],
) -> Result<()> {
    use std::borrow::Cow;
    let Some((first, tail)) = rest.split_first() else {
        return Ok(());
    };
    cur.expand()?;
    let doc::Value::Doc(fields) = cur else {
        return Err(QueryError::Location(
            PATH_NOT_VIABLE,
            format!(
                "cannot infer query fields to set, path '{}' is not viable",
                full.join(".")
            ),
        ));
    };
    let idx = match fields.iter().position(|(k, _)| k == first) {
        Some(i) => i,
        None => {
            let fresh = if tail.is_empty() {
                doc::Value::Raw(RawBsonRef::Null)
            } else {
                doc::Value::Doc(Vec::new())
            };
            fields.push((Cow::Owned(first.clone()), fresh));
            fields.len() - 1
        }
    };
    let Some((_, slot)) = fields.get_mut(idx) else {
        return Ok(());
    };
    if tail.is_empty() {
        *slot = value;
        Ok(())
    } else {
        set_at(slot, tail, value, full)
    }
}

/// Parses `arrayFilters` (MongoDB's `parseArrayFilters` + `ExpressionWithPlaceholder::make`).
fn parse_array_filters(raw: Option<&RawArray>) -> Result<tree::ArrayFilters> {
    let mut out: tree::ArrayFilters = BTreeMap::new();
    let Some(raw) = raw else { return Ok(out) };
    for (i, el) in raw.into_iter().enumerate() {
        let el = el.map_err(doc::malformed)?;
        let RawBsonRef::Document(d) = el else {
            return Err(QueryError::TypeMismatch(format!(
                "BSON field 'arrayFilters.{i}' is the wrong type '{}', expected type 'object'",
                doc::raw_type_name(el)
            )));
        };
        let context =
            |e: QueryError| with_context(e, "Error parsing array filter :: caused by :: ");
        let filter = Filter::parse(d).map_err(context)?;
        let placeholder = top_level_name(filter.expr()).map_err(context)?;
        let Some(id) = placeholder else {
            return Err(QueryError::FailedToParse(
                "Cannot use an expression without a top-level field name in arrayFilters".into(),
            ));
        };
        let valid = id.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
            && id.bytes().all(|b| b.is_ascii_alphanumeric());
        if !valid {
            return Err(context(QueryError::BadValue(format!(
                "The top-level field name must be an alphanumeric string beginning with a \
                 lowercase letter, found '{id}'"
            ))));
        }
        if out.contains_key(&id) {
            return Err(QueryError::FailedToParse(format!(
                "Found multiple array filters with the same top-level field name {id}"
            )));
        }
        out.insert(id, Arc::new(filter));
    }
    Ok(out)
}

/// `parseTopLevelFieldName`: the single first path component of an array filter.
fn top_level_name(e: &Expr) -> Result<Option<String>> {
    match e {
        Expr::Path(p) => Ok(Some(p.path.head().to_string())),
        Expr::Not(c) => top_level_name(c),
        Expr::And(cs) | Expr::Or(cs) | Expr::Nor(cs) => {
            let mut found: Option<String> = None;
            for c in cs {
                if let Some(n) = top_level_name(c)? {
                    match &found {
                        Some(f) if *f != n => {
                            return Err(QueryError::FailedToParse(format!(
                                "Expected a single top-level field name, found '{f}' and '{n}'"
                            )));
                        }
                        Some(_) => {}
                        None => found = Some(n),
                    }
                }
            }
            Ok(found)
        }
        _ => Ok(None),
    }
}

/// The same error with `prefix` before its message.
fn with_context(e: QueryError, prefix: &str) -> QueryError {
    match e {
        QueryError::BadValue(m) => QueryError::BadValue(format!("{prefix}{m}")),
        QueryError::FailedToParse(m) => QueryError::FailedToParse(format!("{prefix}{m}")),
        QueryError::TypeMismatch(m) => QueryError::TypeMismatch(format!("{prefix}{m}")),
        QueryError::DollarPrefixedFieldName(m) => {
            QueryError::DollarPrefixedFieldName(format!("{prefix}{m}"))
        }
        QueryError::InvalidIdField(m) => QueryError::InvalidIdField(format!("{prefix}{m}")),
        QueryError::NotImplemented(m) => QueryError::NotImplemented(format!("{prefix}{m}")),
        QueryError::Location(c, m) => QueryError::Location(c, format!("{prefix}{m}")),
        other => other,
    }
}
