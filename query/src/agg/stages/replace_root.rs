//! `$replaceRoot: {newRoot: <expr>}` and `$replaceWith: <expr>`: each document becomes the
//! value of the expression, which must be a document (40228). `newRoot` is required (40231);
//! other fields are unknown (40415).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};

/// A parsed `$replaceRoot` / `$replaceWith`.
#[derive(Debug)]
pub struct ReplaceRoot {
    with: bool,
    raw: RawBson,
    expr: Expression,
    ext: ExprExtensions,
}

/// Parses `{$replaceRoot: {newRoot: …}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            40229,
            format!(
                "expected an object as specification for $replaceRoot stage, got {}",
                cairn_storage::display::type_name(arg)
            ),
        ));
    };
    let mut root = None;
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if k.as_str() == "newRoot" {
            root = Some(v);
        } else {
            return Err(loc(
                40415,
                format!(
                    "BSON field '$replaceRoot.{}' is an unknown field.",
                    k.as_str()
                ),
            ));
        }
    }
    let Some(root) = root else {
        return Err(loc(
            40414,
            "BSON field '$replaceRoot.newRoot' is missing but a required field",
        ));
    };
    Ok(vec![Arc::new(ReplaceRoot {
        with: false,
        raw: RawBson::from(root),
        expr: cx.ext.parse_expression(root)?,
        ext: cx.ext.clone(),
    })])
}

/// Parses `{$replaceWith: …}`.
pub fn parse_with(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    Ok(vec![Arc::new(ReplaceRoot {
        with: true,
        raw: RawBson::from(arg),
        expr: cx.ext.parse_expression(arg)?,
        ext: cx.ext.clone(),
    })])
}

impl Stage for ReplaceRoot {
    fn name(&self) -> &'static str {
        if self.with {
            "$replaceWith"
        } else {
            "$replaceRoot"
        }
    }

    fn serialize(&self) -> RawBson {
        if self.with {
            self.raw.clone()
        } else {
            let mut d = rawdoc! {};
            d.append(bson::raw::cstr!("newRoot"), self.raw.clone());
            RawBson::Document(d)
        }
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        deps.add_expr(&self.expr);
        DepsState::Exhaustive
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(ReplaceStream { stage: self, input }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct ReplaceStream {
    stage: Arc<ReplaceRoot>,
    input: Box<dyn DocStream>,
}

impl DocStream for ReplaceStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        let Some(d) = self.input.next(cx)? else {
            return Ok(None);
        };
        match self.stage.expr.evaluate(&d, self.stage.ext.variables())? {
            Some(RawBson::Document(nd)) => Ok(Some(nd)),
            other => {
                let (shown, ty) = match &other {
                    None => ("MISSING".to_string(), "missing"),
                    Some(v) => (
                        cairn_storage::display::value(v.as_raw_bson_ref()),
                        cairn_storage::display::type_name(v.as_raw_bson_ref()),
                    ),
                };
                let what = if self.stage.with {
                    "'replacement document'"
                } else {
                    "'newRoot' expression"
                };
                Err(loc(
                    40228,
                    format!(
                        "{what} must evaluate to an object, but resulting value was: {shown}. \
                         Type of resulting value: '{ty}'. Input document: {}",
                        cairn_storage::display::document(&d)
                    ),
                ))
            }
        }
    }
}
