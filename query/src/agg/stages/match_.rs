//! `$match`: keeps the documents a query filter matches (the same filter language as `find`,
//! `$expr` and `$jsonSchema` included). Not an object: 15959. Leading `$match`es run inside
//! the `$cursor` stage through the query planner (see [`crate::agg::cursor`]). `$near`,
//! `$nearSphere` and `$geoNear` are refused (5626500), as MongoDB's pipeline parser refuses
//! them (the `$geoNear` stage answers nearest-first queries).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::Result;
use crate::expr::ExprExtensions;
use crate::filter::Filter;
use crate::jsonschema::WithJsonSchema;

/// A parsed `$match`.
#[derive(Debug)]
pub struct Match {
    /// The filter as given.
    pub doc: RawDocumentBuf,
    /// The parsed filter.
    pub filter: Arc<Filter>,
    pub(crate) ext: ExprExtensions,
}

impl Match {
    /// A `$match` of `doc`.
    pub fn from_doc(doc: &RawDocument, ext: &ExprExtensions) -> Result<Match> {
        let filter = Filter::parse_with(doc, &NoGeoNear(&WithJsonSchema(ext)))?;
        Ok(Match {
            doc: doc.to_owned(),
            filter: Arc::new(filter),
            ext: ext.clone(),
        })
    }
}

/// Extensions that refuse `$near` (the pipeline's matcher features).
pub(crate) struct NoGeoNear<'a>(pub(crate) &'a dyn crate::filter::Extensions);

impl crate::filter::Extensions for NoGeoNear<'_> {
    fn parse(
        &self,
        kind: crate::filter::ExtensionKind,
        operand: RawBsonRef<'_>,
    ) -> Result<Arc<dyn crate::filter::DocumentPredicate>> {
        self.0.parse(kind, operand)
    }

    fn geo_near_allowed(&self) -> bool {
        false
    }
}

/// Parses `{$match: <filter>}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            15959,
            "the match filter must be an expression in an object",
        ));
    };
    Ok(vec![Arc::new(Match::from_doc(d, &cx.ext)?)])
}

impl Stage for Match {
    fn name(&self) -> &'static str {
        "$match"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.doc.clone())
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        deps.add_filter(&self.doc, &self.ext);
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(MatchStream { stage: self, input }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct MatchStream {
    stage: Arc<Match>,
    input: Box<dyn DocStream>,
}

impl DocStream for MatchStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        let mut seen = 0u32;
        while let Some(d) = self.input.next(cx)? {
            if self.stage.filter.try_matches(&d)? {
                return Ok(Some(d));
            }
            seen += 1;
            if seen.is_multiple_of(1024) {
                cx.host.check_interrupt()?;
            }
        }
        Ok(None)
    }
}
