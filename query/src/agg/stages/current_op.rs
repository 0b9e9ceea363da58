//! `$currentOp: {allUsers, idleConnections, idleCursors, idleSessions, localOps}`: the
//! server's operations in progress ([`crate::agg::Host::current_op`]). Only as the first
//! stage of `{aggregate: 1}` against `admin` (73). Options must be booleans (FailedToParse).

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use crate::agg::{
    Constraints, CurrentOpSpec, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage,
};
use crate::error::{QueryError, Result};

/// A parsed `$currentOp`.
#[derive(Debug)]
pub struct CurrentOp {
    spec: CurrentOpSpec,
}

/// Parses `{$currentOp: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(QueryError::FailedToParse(format!(
            "$currentOp options must be specified in an object, but found: {}",
            cairn_storage::display::type_name(arg)
        )));
    };
    if cx.db != "admin" || cx.coll.is_some() {
        return Err(QueryError::Location(
            73,
            "$currentOp must be run against the 'admin' database with {aggregate: 1}".into(),
        ));
    }
    let mut spec = CurrentOpSpec::default();
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        let name = k.as_str();
        let slot = match name {
            "allUsers" => &mut spec.all_users,
            "idleConnections" => &mut spec.idle_connections,
            "idleCursors" => &mut spec.idle_cursors,
            "idleSessions" => &mut spec.idle_sessions,
            "localOps" => &mut spec.local_ops,
            "backtrace" | "truncateOps" | "targetAllNodes" => continue,
            other => {
                return Err(QueryError::FailedToParse(format!(
                    "Unrecognized option '{other}' in $currentOp stage."
                )));
            }
        };
        let RawBsonRef::Boolean(b) = v else {
            return Err(QueryError::FailedToParse(format!(
                "The '{name}' parameter of the $currentOp stage must be a boolean value, but \
                 found: {}",
                cairn_storage::display::type_name(v)
            )));
        };
        *slot = b;
    }
    Ok(vec![Arc::new(CurrentOp { spec })])
}

impl Stage for CurrentOp {
    fn name(&self) -> &'static str {
        "$currentOp"
    }

    fn serialize(&self) -> RawBson {
        let s = &self.spec;
        RawBson::Document(rawdoc! {
            "allUsers": s.all_users,
            "idleConnections": s.idle_connections,
            "idleCursors": s.idle_cursors,
            "idleSessions": s.idle_sessions,
            "localOps": s.local_ops,
        })
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::Exhaustive
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            first: true,
            collectionless: true,
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        _input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(super::Listing::new(self, CurrentOp::load)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl CurrentOp {
    fn load(&self, cx: &ExecCx<'_>) -> Result<Vec<RawDocumentBuf>> {
        cx.host.current_op(&self.spec)
    }
}
