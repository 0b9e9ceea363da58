//! `$merge`: writes the pipeline's results into a collection, document by document.
//!
//! `{$merge: "coll"}` or `{$merge: {into: "coll" | {db, coll}, on, let, whenMatched,
//! whenNotMatched}}`. A result matches the target document with the same `on` fields (`_id`
//! by default; other fields need a unique index on exactly them, 51183). When matched:
//! `merge` (default: the result's fields overwrite or extend the target's), `replace`,
//! `keepExisting`, `fail` (DuplicateKey 11000), or an update pipeline (`$addFields $set
//! $project $unset $replaceRoot $replaceWith`) run on the target document with `$$new` (and
//! the `let` variables, evaluated on the result) — the `_id` may not change (66). When not
//! matched: `insert` (default), `discard`, or `fail` (13113). The target is created when
//! missing. Writes go in transactions of up to 500 documents; the stage returns nothing.
//!
//! Errors: 40414 no `into`, 40415 unknown field, 2 bad modes, 51186/51187/51134 bad `on`,
//! 51199 `let` without a pipeline, 51132 a result without its `on` fields, 31319 a `system.`
//! target, 72 pipeline stages other than the update stages.

use std::any::Any;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_storage::catalog::CollectionMeta;

use super::out::{check_target, next_batch, prepared};
use crate::agg::doc::{get_nested, key};
use crate::agg::{
    Buffered, Constraints, Ddl, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Pipeline,
    Stage, SubContext, Writer, loc,
};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression, Variables};
use crate::filter::Filter;
use crate::plan::{Hint, Query, choose};

/// What to do with a matched document.
#[derive(Debug, Clone)]
enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    Pipeline(RawArrayBuf),
}

/// What to do with an unmatched result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

/// A parsed `$merge`.
#[derive(Debug)]
pub struct Merge {
    db: String,
    coll: String,
    on: Vec<Vec<String>>,
    on_raw: Vec<String>,
    when_matched: WhenMatched,
    when_not_matched: WhenNotMatched,
    lets: Vec<(String, Expression)>,
    ext: ExprExtensions,
}

const UPDATE_STAGES: &[&str] = &[
    "$addFields",
    "$project",
    "$replaceRoot",
    "$replaceWith",
    "$set",
    "$unset",
];

fn enum_error(field: &str, v: RawBsonRef<'_>) -> QueryError {
    QueryError::BadValue(format!(
        "Enumeration value '{}' for field '{field}' is not a valid value.",
        match v {
            RawBsonRef::String(s) => s.to_string(),
            other => cairn_storage::display::value(other),
        }
    ))
}

fn parse_into(v: RawBsonRef<'_>, cx: &ParseCx) -> Result<(String, String)> {
    match v {
        RawBsonRef::String(s) => Ok((cx.db.clone(), s.to_string())),
        RawBsonRef::Document(d) => {
            let db = match d.get("db") {
                Ok(Some(RawBsonRef::String(s))) => s.to_string(),
                _ => cx.db.clone(),
            };
            match d.get("coll") {
                Ok(Some(RawBsonRef::String(s))) => Ok((db, s.to_string())),
                _ => Err(loc(
                    40414,
                    "BSON field '$merge.into.coll' is missing but a required field",
                )),
            }
        }
        other => Err(QueryError::TypeMismatch(format!(
            "BSON field '$merge.into' is the wrong type '{}', expected types '[string, object]'",
            cairn_storage::display::type_name(other)
        ))),
    }
}

/// Parses `{$merge: …}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let mut into = None;
    let mut on: Option<Vec<String>> = None;
    let mut when_matched = WhenMatched::Merge;
    let mut when_not_matched = WhenNotMatched::Insert;
    let mut let_doc: Option<&RawDocument> = None;
    match arg {
        RawBsonRef::String(_) => into = Some(parse_into(arg, cx)?),
        RawBsonRef::Document(d) => {
            for el in d.iter() {
                let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                match k.as_str() {
                    "into" => into = Some(parse_into(v, cx)?),
                    "on" => {
                        on = Some(match v {
                            RawBsonRef::String(s) => vec![s.to_string()],
                            RawBsonRef::Array(a) => {
                                let mut out = Vec::new();
                                for e in a {
                                    match e {
                                        Ok(RawBsonRef::String(s)) => out.push(s.to_string()),
                                        Ok(other) => {
                                            return Err(loc(
                                                51134,
                                                format!(
                                                    "Array elements of $merge 'on' must be \
                                                     strings, but found {}",
                                                    cairn_storage::display::type_name(other)
                                                ),
                                            ));
                                        }
                                        Err(e) => return Err(QueryError::BadValue(e.to_string())),
                                    }
                                }
                                if out.is_empty() {
                                    return Err(loc(
                                        51187,
                                        "If explicitly specifying $merge 'on', must include at \
                                         least one field",
                                    ));
                                }
                                out
                            }
                            other => {
                                return Err(loc(
                                    51186,
                                    format!(
                                        "$merge 'on' field  must be either a string or an \
                                         array of strings, but found {}",
                                        cairn_storage::display::type_name(other)
                                    ),
                                ));
                            }
                        })
                    }
                    "let" => match v {
                        RawBsonRef::Document(l) => let_doc = Some(l),
                        other => {
                            return Err(QueryError::TypeMismatch(format!(
                                "BSON field '$merge.let' is the wrong type '{}', expected type \
                                 'object'",
                                cairn_storage::display::type_name(other)
                            )));
                        }
                    },
                    "whenMatched" => {
                        when_matched = match v {
                            RawBsonRef::String("replace") => WhenMatched::Replace,
                            RawBsonRef::String("keepExisting") => WhenMatched::KeepExisting,
                            RawBsonRef::String("merge") => WhenMatched::Merge,
                            RawBsonRef::String("fail") => WhenMatched::Fail,
                            RawBsonRef::Array(a) => WhenMatched::Pipeline(a.to_owned()),
                            other => return Err(enum_error("whenMatched", other)),
                        }
                    }
                    "whenNotMatched" => {
                        when_not_matched = match v {
                            RawBsonRef::String("insert") => WhenNotMatched::Insert,
                            RawBsonRef::String("discard") => WhenNotMatched::Discard,
                            RawBsonRef::String("fail") => WhenNotMatched::Fail,
                            other => return Err(enum_error("whenNotMatched", other)),
                        }
                    }
                    "targetCollectionVersion" => {}
                    other => {
                        return Err(loc(
                            40415,
                            format!("BSON field '$merge.{other}' is an unknown field."),
                        ));
                    }
                }
            }
        }
        other => {
            return Err(loc(
                51182,
                format!(
                    "$merge only supports a string or object argument, but found {}",
                    cairn_storage::display::type_name(other)
                ),
            ));
        }
    }
    let Some((db, coll)) = into else {
        return Err(loc(
            40414,
            "BSON field '$merge.into' is missing but a required field",
        ));
    };
    check_target(&db, &coll, "{$merge}", 31319)?;
    if let_doc.is_some() && !matches!(when_matched, WhenMatched::Pipeline(_)) {
        return Err(loc(
            51199,
            "Cannot use 'let' variables with 'whenMatched' mode other than a pipeline",
        ));
    }
    let on_raw = on.unwrap_or_else(|| vec!["_id".to_string()]);
    let mut on = Vec::new();
    for f in &on_raw {
        on.push(
            crate::sort::validate_field_path(f)?
                .into_iter()
                .map(str::to_string)
                .collect(),
        );
    }
    let mut lets = Vec::new();
    let mut check = cx.ext.variables().clone();
    check.set("new", RawBson::Null)?;
    if let Some(l) = let_doc {
        for el in l.iter() {
            let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            check.set(k.as_str(), RawBson::Null)?;
            lets.push((k.as_str().to_string(), cx.ext.parse_expression(v)?));
        }
    }
    if let WhenMatched::Pipeline(p) = &when_matched {
        let mut sub = cx.sub(SubContext::Lookup, Some(&coll))?;
        sub.ext = ExprExtensions::with_variables(check);
        let parsed = Pipeline::parse(p, &sub)?;
        for s in parsed.stages() {
            if !UPDATE_STAGES.contains(&s.name()) {
                return Err(loc(
                    72,
                    format!("{} is not allowed to be used within an update", s.name()),
                ));
            }
        }
    }
    Ok(vec![Arc::new(Merge {
        db,
        coll,
        on,
        on_raw,
        when_matched,
        when_not_matched,
        lets,
        ext: cx.ext.clone(),
    })])
}

impl Merge {
    fn on_id(&self) -> bool {
        self.on_raw.len() == 1 && self.on_raw[0] == "_id"
    }

    /// Checks that a unique index covers exactly the `on` fields.
    fn check_unique_index(&self, meta: Option<&CollectionMeta>) -> Result<()> {
        if self.on_id() {
            return Ok(());
        }
        let want: std::collections::BTreeSet<&str> =
            self.on_raw.iter().map(String::as_str).collect();
        let ok = meta.is_some_and(|m| {
            m.indexes.iter().any(|i| {
                (i.is_id() || i.is_unique()) && i.partial_filter().is_none() && {
                    let fields = i.fields();
                    fields.len() == want.len()
                        && fields.iter().all(|(f, _)| want.contains(f.as_str()))
                }
            })
        });
        if ok {
            Ok(())
        } else {
            Err(loc(
                51183,
                "Cannot find index to verify that join fields will be unique",
            ))
        }
    }

    /// The `on` values of a result (51132 when one is missing, null or an array).
    fn on_values(&self, d: &RawDocument) -> Result<Vec<(String, RawBson)>> {
        let mut out = Vec::new();
        for (raw, parts) in self.on_raw.iter().zip(&self.on) {
            match get_nested(d, parts) {
                None
                | Some(RawBsonRef::Null)
                | Some(RawBsonRef::Undefined)
                | Some(RawBsonRef::Array(_)) => {
                    return Err(loc(
                        51132,
                        format!(
                            "$merge write error: 'on' field '{raw}' cannot be missing, null, \
                             undefined or an array. Full document: {}",
                            cairn_storage::display::document(d)
                        ),
                    ));
                }
                Some(v) => out.push((raw.clone(), RawBson::from(v))),
            }
        }
        Ok(out)
    }

    /// The target document matching `on`, with its key.
    fn find(
        &self,
        w: &mut dyn Writer,
        meta: &CollectionMeta,
        on: &[(String, RawBson)],
    ) -> Result<Option<(Vec<u8>, RawDocumentBuf)>> {
        if self.on_id() {
            let Some((_, id)) = on.first() else {
                return Ok(None);
            };
            let k = cairn_storage::store::id_key(id.as_raw_bson_ref())?;
            return Ok(w.source().get_by_key(meta, &k)?.map(|d| (k, d)));
        }
        let mut fd = RawDocumentBuf::new();
        for (f, v) in on {
            fd.append(key(f)?, rawdoc! {"$eq": v.clone()});
        }
        let filter = Arc::new(Filter::parse(&fd)?);
        let hint = Hint::None;
        let mut q = Query::new(&filter, &hint);
        q.limit = Some(1);
        let mut chosen = choose(
            None,
            &meta.namespace(),
            meta,
            &q,
            &filter,
            w.source(),
            false,
        )?;
        let mut found = chosen.buffered.into_iter().next();
        while found.is_none() && !chosen.exec.is_exhausted() {
            found = chosen
                .exec
                .next(w.source(), meta, 1, usize::MAX, 10_000)?
                .into_iter()
                .next();
        }
        match found {
            Some(d) => {
                let id =
                    d.get("_id").ok().flatten().ok_or_else(|| {
                        QueryError::BadValue("stored document without _id".into())
                    })?;
                Ok(Some((cairn_storage::store::id_key(id)?, d)))
            }
            None => Ok(None),
        }
    }

    /// The new version of a matched document, `None` to keep it.
    fn updated(
        &self,
        existing: &RawDocument,
        new: &RawDocument,
        opts: &Arc<Options>,
        cx: &ExecCx<'_>,
    ) -> Result<Option<RawDocumentBuf>> {
        let out = match &self.when_matched {
            WhenMatched::KeepExisting => return Ok(None),
            WhenMatched::Fail => return Ok(None),
            WhenMatched::Replace => {
                let mut d = RawDocumentBuf::new();
                let id = existing.get("_id").ok().flatten();
                if let (Some(id), None) = (id, new.get("_id").ok().flatten()) {
                    d.append(bson::raw::cstr!("_id"), id);
                }
                for el in new.iter() {
                    let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                    d.append(k, v);
                }
                d
            }
            WhenMatched::Merge => {
                let mut d = RawDocumentBuf::new();
                let mut used = std::collections::HashSet::new();
                for el in existing.iter() {
                    let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                    match new.get(k.as_str()).ok().flatten() {
                        Some(nv) => {
                            used.insert(k.as_str().to_string());
                            d.append(k, nv);
                        }
                        None => d.append(k, v),
                    }
                }
                for el in new.iter() {
                    let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                    if !used.contains(k.as_str())
                        && existing.get(k.as_str()).ok().flatten().is_none()
                    {
                        d.append(k, v);
                    }
                }
                d
            }
            WhenMatched::Pipeline(raw) => {
                let mut vars: Variables = self.ext.variables().clone();
                vars.set("new", RawBson::Document(new.to_owned()))?;
                for (name, e) in &self.lets {
                    let v = e.evaluate(new, self.ext.variables())?;
                    vars.set(name, v.unwrap_or(RawBson::Undefined))?;
                }
                let ext = ExprExtensions::with_variables(vars);
                let mut pcx = ParseCx::new(&self.db, Some(&self.coll), ext.clone());
                pcx.sub = SubContext::Lookup;
                let p = Pipeline::parse(raw, &pcx)?;
                let mut s = p.open(
                    Box::new(Buffered(std::iter::once(existing.to_owned()).collect())),
                    opts,
                )?;
                match s.next(cx)? {
                    Some(d) => d,
                    None => return Ok(None),
                }
            }
        };
        let old_id = existing.get("_id").ok().flatten();
        let new_id = out.get("_id").ok().flatten();
        let same = match (old_id, new_id) {
            (Some(a), Some(b)) => {
                cairn_storage::compare::compare_values(a, b) == std::cmp::Ordering::Equal
                    && a.element_type() == b.element_type()
            }
            _ => false,
        };
        if !same {
            return Err(loc(
                66,
                "$merge failed to update the matching document, did you attempt to modify the \
                 _id or the shard key? :: caused by :: Performing an update on the path '_id' \
                 would modify the immutable field '_id'",
            ));
        }
        Ok(Some(out))
    }
}

impl Stage for Merge {
    fn name(&self) -> &'static str {
        "$merge"
    }

    fn serialize(&self) -> RawBson {
        let mut on = RawArrayBuf::new();
        for f in &self.on_raw {
            on.push(f.as_str());
        }
        let mut d = rawdoc! {"into": {"db": self.db.clone(), "coll": self.coll.clone()}, "on": on};
        let wm: RawBson = match &self.when_matched {
            WhenMatched::Replace => RawBson::String("replace".into()),
            WhenMatched::KeepExisting => RawBson::String("keepExisting".into()),
            WhenMatched::Merge => RawBson::String("merge".into()),
            WhenMatched::Fail => RawBson::String("fail".into()),
            WhenMatched::Pipeline(p) => RawBson::Array(p.clone()),
        };
        d.append(bson::raw::cstr!("whenMatched"), wm);
        d.append(
            bson::raw::cstr!("whenNotMatched"),
            match self.when_not_matched {
                WhenNotMatched::Insert => "insert",
                WhenNotMatched::Discard => "discard",
                WhenNotMatched::Fail => "fail",
            },
        );
        RawBson::Document(d)
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::WholeDocument
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            last: true,
            writes: true,
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(MergeStream {
            stage: self,
            opts: opts.clone(),
            input: Some(input),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct MergeStream {
    stage: Arc<Merge>,
    opts: Arc<Options>,
    input: Option<Box<dyn DocStream>>,
}

impl DocStream for MergeStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        let Some(mut input) = self.input.take() else {
            return Ok(None);
        };
        let st = Arc::clone(&self.stage);
        let target = cx.catalog.collection(&st.db, &st.coll)?;
        st.check_unique_index(target.as_deref())?;
        if target.is_none() && st.when_not_matched == WhenNotMatched::Insert {
            cx.host.ddl(Ddl::Ensure {
                db: &st.db,
                name: &st.coll,
            })?;
        }
        loop {
            cx.host.check_interrupt()?;
            let batch = next_batch(&mut *input, cx)?;
            if batch.is_empty() {
                return Ok(None);
            }
            let mut docs = Vec::with_capacity(batch.len());
            for d in &batch {
                let d = if st.on_id() { prepared(d)? } else { d.clone() };
                let on = st.on_values(&d)?;
                docs.push((d, on));
            }
            let opts = self.opts.clone();
            cx.host.write(&mut |w: &mut dyn Writer| {
                let Some(meta) = w.collection(&st.db, &st.coll)? else {
                    if st.when_not_matched == WhenNotMatched::Fail {
                        return Err(loc(
                            13113,
                            "$merge could not find a matching document in the target \
                             collection for at least one document in the source collection",
                        ));
                    }
                    return Ok(());
                };
                for (d, on) in &docs {
                    match st.find(w, &meta, on)? {
                        Some((k, existing)) => {
                            if matches!(st.when_matched, WhenMatched::Fail) {
                                // Surfaces the DuplicateKey error of the unique index.
                                w.insert(&meta, &prepared(d)?)?;
                                continue;
                            }
                            if let Some(nd) = st.updated(&existing, d, &opts, cx)? {
                                w.replace(&meta, &k, &nd)?;
                            }
                        }
                        None => match st.when_not_matched {
                            WhenNotMatched::Insert => w.insert(&meta, &prepared(d)?)?,
                            WhenNotMatched::Discard => {}
                            WhenNotMatched::Fail => {
                                return Err(loc(
                                    13113,
                                    "$merge could not find a matching document in the target \
                                     collection for at least one document in the source \
                                     collection",
                                ));
                            }
                        },
                    }
                }
                Ok(())
            })?;
        }
    }
}
