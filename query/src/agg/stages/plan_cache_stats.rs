//! `$planCacheStats: {}`: one document per plan cache entry of the collection (query shape,
//! cached plan, works), from the server ([`crate::agg::Host::plan_cache_stats`]). Must be the
//! first stage. Options other than `allHosts` are unknown (40415).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{Constraints, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

/// A parsed `$planCacheStats`.
#[derive(Debug)]
pub struct PlanCacheStats {
    db: String,
    coll: String,
}

/// Parses `{$planCacheStats: {}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(QueryError::FailedToParse(format!(
            "$planCacheStats value must be an object. Found: {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    for el in d.iter() {
        let (k, _) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        if k.as_str() != "allHosts" {
            return Err(loc(
                40415,
                format!(
                    "BSON field '$planCacheStats.{}' is an unknown field.",
                    k.as_str()
                ),
            ));
        }
    }
    Ok(vec![Arc::new(PlanCacheStats {
        db: cx.db.clone(),
        coll: cx.coll.clone().unwrap_or_default(),
    })])
}

impl Stage for PlanCacheStats {
    fn name(&self) -> &'static str {
        "$planCacheStats"
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
        Ok(Box::new(super::Listing::new(self, PlanCacheStats::load)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl PlanCacheStats {
    fn load(&self, cx: &ExecCx<'_>) -> Result<Vec<RawDocumentBuf>> {
        let ns = format!("{}.{}", self.db, self.coll);
        match cx.catalog.collection(&self.db, &self.coll)? {
            Some(meta) => cx.host.plan_cache_stats(&ns, &meta),
            None => Ok(Vec::new()),
        }
    }
}
