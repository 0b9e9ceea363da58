//! `$indexStats: {}`: one document per index of the collection — `{name, key, host,
//! accesses: {ops, since}, spec}` — from the server ([`crate::agg::Host::index_stats`]).
//! Must be the first stage; the argument must be an empty object (28803).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{Constraints, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::Result;

/// A parsed `$indexStats`.
#[derive(Debug)]
pub struct IndexStats {
    db: String,
    coll: String,
}

/// Parses `{$indexStats: {}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    match arg {
        RawBsonRef::Document(d) if d.is_empty() => {}
        _ => {
            return Err(loc(
                28803,
                "The $indexStats stage specification must be an empty object",
            ));
        }
    }
    Ok(vec![Arc::new(IndexStats {
        db: cx.db.clone(),
        coll: cx.coll.clone().unwrap_or_default(),
    })])
}

impl Stage for IndexStats {
    fn name(&self) -> &'static str {
        "$indexStats"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(RawDocumentBuf::new())
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::Exhaustive
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            first: true,
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        _input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(super::Listing::new(self, IndexStats::load)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl IndexStats {
    fn load(&self, cx: &ExecCx<'_>) -> Result<Vec<RawDocumentBuf>> {
        match cx.catalog.collection(&self.db, &self.coll)? {
            Some(meta) => cx.host.index_stats(&meta),
            None => Ok(Vec::new()),
        }
    }
}
