//! `$listCatalog: {}`: the storage catalog's record of collections and views
//! ([`crate::agg::Host::list_catalog`]).
//!
//! On a collection it yields that collection's entry (nothing when it does not exist); on
//! `{aggregate: 1}` against `admin` it yields every collection of every database, then every
//! view. Entries are `{db, name, type, …}` followed by the catalog record: for a collection
//! `md: {ns, options, indexes: [{spec, ready, multikey}]}`, `idxIdent`, `ns` and `ident` (the
//! storage spaces holding it); for a view `ns`, `_id`, `viewOn` and `pipeline`, as the view
//! catalog stores it. Errors: the argument must be an empty object (6200600); collectionless
//! only on `admin` (InvalidNamespace 73); first stage only (40602).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{Constraints, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

/// A parsed `$listCatalog`.
#[derive(Debug)]
pub struct ListCatalog {
    db: String,
    /// The collection it runs on; `None` for the whole catalog.
    coll: Option<String>,
}

/// Parses `{$listCatalog: {}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    match arg {
        RawBsonRef::Document(d) if d.is_empty() => {}
        _ => {
            return Err(loc(
                6200600,
                "The $listCatalog stage specification must be an empty object",
            ));
        }
    }
    if cx.coll.is_none() && cx.db != "admin" {
        return Err(QueryError::Location(
            73,
            "Collectionless $listCatalog must be run against the 'admin' database with \
             {aggregate: 1}"
                .into(),
        ));
    }
    Ok(vec![Arc::new(ListCatalog {
        db: cx.db.clone(),
        coll: cx.coll.clone(),
    })])
}

impl Stage for ListCatalog {
    fn name(&self) -> &'static str {
        "$listCatalog"
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
            collectionless: self.coll.is_none(),
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        _input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(super::Listing::new(self, ListCatalog::load)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl ListCatalog {
    fn load(&self, cx: &ExecCx<'_>) -> Result<Vec<RawDocumentBuf>> {
        let ns = self.coll.as_deref().map(|c| (self.db.as_str(), c));
        cx.host.list_catalog(ns)
    }
}
