//! `$setWindowFields: {partitionBy, sortBy, output}`: each document gains fields computed by
//! window functions over a window of its partition (see [`crate::agg::window`]).
//!
//! As MongoDB does (document_source_set_window_fields.cpp), the stage desugars into a
//! `$sort` on the partition key then `sortBy` (so the planner can serve it from an index),
//! and `$_internalSetWindowFields`, which streams the sorted documents partition by
//! partition. A `partitionBy` that is not a plain field path is first computed into
//! `__internal_setWindowFields_partition_key` by an `$addFields` and removed by an `$unset`
//! afterwards; a constant `partitionBy` is one partition (an array constant is TypeMismatch,
//! as is an array partition value at run time).
//!
//! Errors: not an object FailedToParse; unknown fields 40415; `output` missing 40414;
//! `sortBy`/`output` not objects TypeMismatch; conflicting output paths 6307900; each
//! statement's errors ([`crate::agg::window::func`]); memory 5414201 unless `allowDiskUse`.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::agg::doc::key;
use crate::agg::window::exec::{Exec, Shared};
use crate::agg::window::func::Statement;
use crate::agg::window::partition::{Partition, memory_error};
use crate::agg::window::{OutNode, apply_out, executor, out_tree};
use crate::agg::{DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};
use crate::sort::{SortSpec, validate_field_path};

use super::{add_fields, sort, unset};

/// The temporary field of a computed partition key.
pub const PARTITION_KEY_FIELD: &str = "__internal_setWindowFields_partition_key";

/// The window stage proper (`$_internalSetWindowFields`), over input sorted by partition.
pub struct SetWindowFields {
    partition: Option<Expression>,
    partition_raw: Option<RawBson>,
    sort: Option<SortSpec>,
    sort_doc: Option<RawDocumentBuf>,
    sort_expr: Option<Expression>,
    outputs: Vec<Statement>,
    tree: Vec<(String, OutNode)>,
    ext: ExprExtensions,
}

impl std::fmt::Debug for SetWindowFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetWindowFields")
            .field("outputs", &self.outputs.len())
            .finish()
    }
}

fn wrong_type(field: &str, v: RawBsonRef<'_>) -> QueryError {
    QueryError::TypeMismatch(format!(
        "BSON field '$setWindowFields.{field}' is the wrong type '{}', expected type 'object'",
        cairn_storage::display::type_name(v)
    ))
}

fn conflicts(a: &str, b: &str) -> bool {
    a == b
        || b.strip_prefix(a).is_some_and(|r| r.starts_with('.'))
        || a.strip_prefix(b).is_some_and(|r| r.starts_with('.'))
}

/// Parses `{$setWindowFields: {…}}` into its stages.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(QueryError::FailedToParse(format!(
            "the $setWindowFields stage specification must be an object, found {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    let (mut partition_by, mut sort_by, mut output) = (None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "partitionBy" => partition_by = Some(v),
            "sortBy" => match v {
                RawBsonRef::Document(s) => sort_by = Some(s),
                other => return Err(wrong_type("sortBy", other)),
            },
            "output" => match v {
                RawBsonRef::Document(o) => output = Some(o),
                other => return Err(wrong_type("output", other)),
            },
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '$setWindowFields.{other}' is an unknown field."),
                ));
            }
        }
    }
    let Some(output) = output else {
        return Err(loc(
            40414,
            "BSON field '$setWindowFields.output' is missing but a required field",
        ));
    };
    let ext = &cx.ext;
    let partition = match partition_by {
        Some(p) => Some((p, ext.parse_expression(p)?)),
        None => None,
    };
    let sort = match sort_by {
        Some(s) => {
            let spec = SortSpec::parse(s)?;
            if spec.natural().is_some() {
                return Err(loc(17312, "$natural is not a valid sort key in $sort"));
            }
            Some((s, spec))
        }
        None => None,
    };
    let sort_spec = sort.as_ref().map(|(_, s)| s);
    let mut outputs: Vec<Statement> = Vec::new();
    for el in output.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let field = k.as_str();
        validate_field_path(field)?;
        if outputs.iter().any(|o| conflicts(&o.field, field)) {
            return Err(loc(
                6307900,
                "$setWindowFields 'output' specification contains two conflicting paths",
            ));
        }
        outputs.push(Statement::parse(field, v, sort_spec, ext)?);
    }
    desugar(partition, sort, outputs, cx)
}

fn desugar(
    partition: Option<(RawBsonRef<'_>, Expression)>,
    sort: Option<(&RawDocument, SortSpec)>,
    outputs: Vec<Statement>,
    cx: &ParseCx,
) -> Result<Vec<Arc<dyn Stage>>> {
    let ext = &cx.ext;
    let mut stages: Vec<Arc<dyn Stage>> = Vec::new();
    // The partition key as a field path: (path, computed by an $addFields first).
    let mut part_path: Option<(String, bool)> = None;
    if let Some((raw, expr)) = &partition {
        match expr.constant() {
            Some(c) => {
                if matches!(c, Some(RawBson::Array(_))) {
                    return Err(QueryError::TypeMismatch(
                        "An expression used to partition cannot evaluate to value of type array"
                            .into(),
                    ));
                }
            }
            None => match raw {
                RawBsonRef::String(s) if s.starts_with('$') && !s.starts_with("$$") => {
                    part_path = Some((s[1..].to_string(), false));
                }
                _ => part_path = Some((PARTITION_KEY_FIELD.to_string(), true)),
            },
        }
    }
    if let (Some((_, true)), Some((raw, _))) = (&part_path, &partition) {
        let mut spec = RawDocumentBuf::new();
        spec.append(key(PARTITION_KEY_FIELD)?, RawBson::from(*raw));
        stages.push(Arc::new(add_fields::AddFields::from_doc(
            "$addFields",
            &spec,
            ext,
        )?));
    }
    let mut combined = RawDocumentBuf::new();
    if let Some((p, _)) = &part_path {
        combined.append(key(p)?, 1);
    }
    if let Some((_, spec)) = &sort {
        for f in spec.fields() {
            if part_path.as_ref().is_some_and(|(p, _)| *p == f.path) {
                continue;
            }
            combined.append(key(&f.path)?, if f.ascending { 1 } else { -1 });
        }
    }
    if !combined.is_empty() {
        stages.push(Arc::new(sort::Sort::from_doc(&combined)?));
    }
    let sort_expr = match &sort {
        Some((_, spec)) => match spec.fields() {
            [one] => Some(ext.parse_expression(RawBsonRef::String(&format!("${}", one.path)))?),
            _ => None,
        },
        None => None,
    };
    let partition_expr = match &part_path {
        Some((p, _)) => Some(ext.parse_expression(RawBsonRef::String(&format!("${p}")))?),
        None => None,
    };
    let fields: Vec<&str> = outputs.iter().map(|o| o.field.as_str()).collect();
    let tree = out_tree(&fields);
    let computed = matches!(part_path, Some((_, true)));
    stages.push(Arc::new(SetWindowFields {
        partition_raw: part_path
            .as_ref()
            .map(|(p, _)| RawBson::String(format!("${p}"))),
        partition: partition_expr,
        sort_doc: sort.as_ref().map(|(d, _)| (*d).to_owned()),
        sort: sort.map(|(_, s)| s),
        sort_expr,
        outputs,
        tree,
        ext: ext.clone(),
    }));
    if computed {
        stages.extend(unset::parse(RawBsonRef::String(PARTITION_KEY_FIELD), cx)?);
    }
    Ok(stages)
}

impl Stage for SetWindowFields {
    fn name(&self) -> &'static str {
        "$_internalSetWindowFields"
    }

    fn serialize(&self) -> RawBson {
        let mut d = RawDocumentBuf::new();
        if let Some(p) = &self.partition_raw {
            d.append(bson::raw::cstr!("partitionBy"), p.clone());
        }
        if let Some(s) = &self.sort_doc {
            d.append(bson::raw::cstr!("sortBy"), s.clone());
        }
        let mut out = RawDocumentBuf::new();
        for o in &self.outputs {
            if let Ok(k) = key(&o.field) {
                out.append(k, o.serialized.clone());
            }
        }
        d.append(bson::raw::cstr!("output"), out);
        RawBson::Document(d)
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        let part = Partition::new(
            input,
            self.partition.clone(),
            self.ext.clone(),
            opts.clone(),
        );
        Ok(Box::new(WindowStream {
            stage: self,
            opts: opts.clone(),
            part,
            execs: Vec::new(),
            cur: 0,
            started: false,
            n: 0,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl SetWindowFields {
    /// The `sortBy` of the stage.
    pub fn sort(&self) -> Option<&SortSpec> {
        self.sort.as_ref()
    }
}

struct WindowStream {
    stage: Arc<SetWindowFields>,
    opts: Arc<Options>,
    part: Partition,
    execs: Vec<Exec>,
    cur: usize,
    started: bool,
    n: u32,
}

impl DocStream for WindowStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        loop {
            if !self.started {
                if !self.part.start_next(cx)? {
                    return Ok(None);
                }
                let sort = self.stage.sort_expr.as_ref();
                self.execs = self
                    .stage
                    .outputs
                    .iter()
                    .map(|o| executor(o, sort))
                    .collect::<Result<_>>()?;
                self.cur = 0;
                self.started = true;
            }
            let Some(doc) = self.part.get(self.cur, cx)? else {
                self.started = false;
                continue;
            };
            self.n += 1;
            if self.n.is_multiple_of(1024) {
                cx.host.check_interrupt()?;
            }
            let sh = Shared {
                sort: self.stage.sort_expr.as_ref(),
                ext: &self.stage.ext,
            };
            let mut vals = Vec::with_capacity(self.execs.len());
            for e in self.execs.iter_mut() {
                vals.push(e.value(&sh, &mut self.part, self.cur, cx)?);
            }
            let out = apply_out(&doc, &self.stage.tree, &vals)?;
            drop(doc);
            let next = self.cur + 1;
            let keep = self
                .execs
                .iter()
                .map(|e| e.keep_from(next))
                .min()
                .unwrap_or(next)
                .min(next);
            self.part.release_below(keep);
            let limit = self.opts.window_memory_limit;
            let used = |s: &Self| s.part.mem + s.execs.iter().map(Exec::memory).sum::<usize>();
            if used(self) > limit {
                if self.opts.allow_disk_use {
                    self.part.spill_all()?;
                }
                let now = used(self);
                if now > limit {
                    return Err(memory_error(now, limit));
                }
            }
            self.cur = next;
            return Ok(Some(out));
        }
    }
}
