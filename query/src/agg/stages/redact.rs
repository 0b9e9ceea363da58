//! `$redact: <expr>`: the expression is evaluated on the document and, for each
//! sub-document it keeps descending into, on that sub-document (`$field` paths then read the
//! sub-document): `"descend"` (`$$DESCEND`) keeps the fields and examines the sub-documents
//! (also inside arrays), `"prune"` (`$$PRUNE`) drops the (sub-)document, `"keep"`
//! (`$$KEEP`) keeps it whole. Anything else is 17053.
//!
//! Known difference: `$$ROOT` inside the expression is the (sub-)document being examined,
//! where MongoDB keeps it the top-level document.

use std::any::Any;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};

/// A parsed `$redact`.
#[derive(Debug)]
pub struct Redact {
    raw: RawBson,
    expr: Expression,
    ext: ExprExtensions,
}

/// Parses `{$redact: …}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    Ok(vec![Arc::new(Redact {
        raw: RawBson::from(arg),
        expr: cx.ext.parse_expression(arg)?,
        ext: cx.ext.clone(),
    })])
}

/// Nesting beyond which sub-documents are kept as they are.
const MAX_DEPTH: usize = 150;

impl Redact {
    /// The redacted document, `None` when pruned.
    fn redact(&self, d: &RawDocument, depth: usize) -> Result<Option<RawDocumentBuf>> {
        let v = self.expr.evaluate(d, self.ext.variables())?;
        match v.as_ref().map(RawBson::as_raw_bson_ref) {
            Some(RawBsonRef::String("prune")) => Ok(None),
            Some(RawBsonRef::String("keep")) => Ok(Some(d.to_owned())),
            Some(RawBsonRef::String("descend")) => {
                if depth > MAX_DEPTH {
                    return Ok(Some(d.to_owned()));
                }
                let mut out = RawDocumentBuf::new();
                for el in d.iter() {
                    let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                    match v {
                        RawBsonRef::Document(sub) => {
                            if let Some(r) = self.redact(sub, depth + 1)? {
                                out.append(k, r);
                            }
                        }
                        RawBsonRef::Array(a) => out.append(k, self.redact_array(a, depth + 1)?),
                        other => out.append(k, other),
                    }
                }
                Ok(Some(out))
            }
            _ => Err(loc(
                17053,
                format!(
                    "$redact's expression should not return anything aside from the variables \
                     $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                    v.as_ref()
                        .map_or("MISSING".to_string(), |x| cairn_storage::display::value(
                            x.as_raw_bson_ref()
                        ))
                ),
            )),
        }
    }

    fn redact_array(&self, a: &bson::RawArray, depth: usize) -> Result<RawArrayBuf> {
        let mut out = RawArrayBuf::new();
        for el in a {
            let el = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
            match el {
                RawBsonRef::Document(sub) => {
                    if let Some(r) = self.redact(sub, depth + 1)? {
                        out.push(r);
                    }
                }
                RawBsonRef::Array(inner) => out.push(self.redact_array(inner, depth + 1)?),
                other => out.push(other),
            }
        }
        Ok(out)
    }
}

impl Stage for Redact {
    fn name(&self) -> &'static str {
        "$redact"
    }

    fn serialize(&self) -> RawBson {
        self.raw.clone()
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::WholeDocument
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(RedactStream { stage: self, input }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct RedactStream {
    stage: Arc<Redact>,
    input: Box<dyn DocStream>,
}

impl DocStream for RedactStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        while let Some(d) = self.input.next(cx)? {
            if let Some(r) = self.stage.redact(&d, 0)? {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }
}
