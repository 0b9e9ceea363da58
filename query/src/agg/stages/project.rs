//! `$project`: the projection language of `find` (inclusions, exclusions, computed fields,
//! `_id` rules, dotted and nested paths), with aggregation's restrictions: positional `a.$`
//! is 31324, `$elemMatch` is 31325 (not an expression), `$slice` is the `$slice` expression.
//! Errors are reported as `Invalid $project :: caused by :: …`; an empty specification is
//! 51272, a non-object 15969.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc, with_context};
use crate::error::Result;
use crate::expr::ExprExtensions;
use crate::projection::{Projection, ProjectionKind};

/// A parsed `$project`.
#[derive(Debug)]
pub struct Project {
    /// The specification as given.
    pub doc: RawDocumentBuf,
    /// The projection.
    pub projection: Projection,
    pub(crate) ext: ExprExtensions,
}

/// Aggregation's projection policy: no find-only features.
fn check_policy(spec: &RawDocument, ext: &ExprExtensions) -> Result<()> {
    for el in spec.iter() {
        let Ok((k, v)) = el else { continue };
        let k = k.as_str();
        if k.ends_with(".$") {
            return Err(loc(
                31324,
                "Cannot use positional projection in aggregation projection",
            ));
        }
        if let RawBsonRef::Document(sub) = v {
            let mut it = sub.iter();
            if let Some(Ok((op, arg))) = it.next()
                && op.as_str().starts_with('$')
                && it.next().is_none()
            {
                match op.as_str() {
                    "$elemMatch" => {
                        return Err(loc(31325, "Unknown expression $elemMatch"));
                    }
                    "$slice" => {
                        // Only the expression form exists in aggregation.
                        ext.parse_expression(RawBsonRef::Document(sub))?;
                        if !matches!(arg, RawBsonRef::Array(_)) {
                            return Err(loc(
                                28667,
                                "Expression $slice takes at least 2 arguments, and at most 3, \
                                 but 1 were passed in.",
                            ));
                        }
                    }
                    _ => {}
                }
            } else {
                check_policy(sub, ext)?;
            }
        }
    }
    Ok(())
}

impl Project {
    /// A `$project` of `spec`.
    pub fn from_doc(spec: &RawDocument, ext: &ExprExtensions) -> Result<Project> {
        let ctx = "Invalid $project";
        if spec.is_empty() {
            return Err(loc(
                51272,
                "Invalid $project :: caused by :: projection specification must have at least \
                 one field",
            ));
        }
        check_policy(spec, ext).map_err(|e| with_context(e, ctx))?;
        let projection = Projection::parse_with(spec, ext).map_err(|e| with_context(e, ctx))?;
        Ok(Project {
            doc: spec.to_owned(),
            projection,
            ext: ext.clone(),
        })
    }
}

/// Parses `{$project: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(15969, "$project specification must be an object"));
    };
    Ok(vec![Arc::new(Project::from_doc(d, &cx.ext)?)])
}

/// A projection value's truth (non-zero numbers; NaN is true).
fn number_true(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => !matches!(
            cairn_storage::decimal::Decimal::from_decimal128(d),
            cairn_storage::decimal::Decimal::Finite { coefficient: 0, .. }
        ),
        _ => true,
    }
}

/// Adds an inclusion projection's reads under `prefix`; returns whether `_id` was named.
fn inclusion_deps(spec: &RawDocument, prefix: &str, deps: &mut Deps, ext: &ExprExtensions) -> bool {
    let mut id_named = false;
    for el in spec.iter() {
        let Ok((k, v)) = el else {
            deps.whole = true;
            continue;
        };
        let path = if prefix.is_empty() {
            k.as_str().to_string()
        } else {
            format!("{prefix}.{}", k.as_str())
        };
        if path == "_id" {
            id_named = true;
        }
        match v {
            RawBsonRef::Boolean(b) => {
                if b {
                    deps.add_path(&path);
                }
            }
            RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_) => {
                if number_true(v) {
                    deps.add_path(&path);
                }
            }
            RawBsonRef::Document(sub) => {
                let is_expr = sub
                    .iter()
                    .next()
                    .is_some_and(|e| e.is_ok_and(|(k, _)| k.as_str().starts_with('$')));
                if is_expr {
                    match ext.parse_expression(v) {
                        Ok(e) => deps.add_expr(&e),
                        Err(_) => deps.whole = true,
                    }
                } else {
                    inclusion_deps(sub, &path, deps, ext);
                }
            }
            other => match ext.parse_expression(other) {
                Ok(e) => deps.add_expr(&e),
                Err(_) => deps.whole = true,
            },
        }
    }
    id_named
}

impl Stage for Project {
    fn name(&self) -> &'static str {
        "$project"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.doc.clone())
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        match self.projection.kind() {
            ProjectionKind::Exclusion => DepsState::SeeNext,
            ProjectionKind::Inclusion => {
                if !inclusion_deps(&self.doc, "", deps, &self.ext) {
                    deps.add_path("_id");
                }
                DepsState::Exhaustive
            }
        }
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(ProjectStream { stage: self, input }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct ProjectStream {
    stage: Arc<Project>,
    input: Box<dyn DocStream>,
}

impl DocStream for ProjectStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        match self.input.next(cx)? {
            Some(d) => Ok(Some(self.stage.projection.apply(&d, None)?)),
            None => Ok(None),
        }
    }
}
