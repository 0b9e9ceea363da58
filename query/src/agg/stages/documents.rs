//! `$documents: <expr>`: produces the documents of an array, evaluated once (so it can use
//! `let` variables). Valid as the first stage of `{aggregate: 1}` or of a `$lookup` /
//! `$unionWith` sub-pipeline. The value must be an array of documents (5858203).

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{Buffered, Constraints, Deps, DepsState, DocStream, Options, ParseCx, Stage, loc};
use crate::error::Result;
use crate::expr::{ExprExtensions, Expression};

/// A parsed `$documents`.
#[derive(Debug)]
pub struct Documents {
    raw: RawBson,
    expr: Expression,
    ext: ExprExtensions,
}

/// Parses `{$documents: …}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    Ok(vec![Arc::new(Documents {
        raw: RawBson::from(arg),
        expr: cx.ext.parse_expression(arg)?,
        ext: cx.ext.clone(),
    })])
}

impl Documents {
    fn values(&self) -> Result<VecDeque<RawDocumentBuf>> {
        let v = self
            .expr
            .evaluate(&RawDocumentBuf::new(), self.ext.variables())?;
        let err = || {
            loc(
                5858203,
                "error during $documents stage: 'documents' must evaluate to an array of objects",
            )
        };
        let Some(RawBson::Array(a)) = v else {
            return Err(err());
        };
        let mut out = VecDeque::new();
        for el in &a {
            match el {
                Ok(RawBsonRef::Document(d)) => out.push_back(d.to_owned()),
                _ => return Err(err()),
            }
        }
        Ok(out)
    }
}

impl Stage for Documents {
    fn name(&self) -> &'static str {
        "$documents"
    }

    fn serialize(&self) -> RawBson {
        self.raw.clone()
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::Exhaustive
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            first: true,
            collectionless: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        _input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(Buffered(self.values()?)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
