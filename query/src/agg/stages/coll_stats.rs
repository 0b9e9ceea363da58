//! `$collStats: {latencyStats, storageStats, count, queryExecStats}`: one document about the
//! collection, `{ns, host, localTime, <sections>}`, the sections supplied by the server
//! ([`crate::agg::Host::coll_stats`]). Must be the first stage. Errors: 5447000 not an object,
//! 40415 unknown field, 14 section arguments of the wrong type.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{
    CollStatsSpec, Constraints, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc,
};
use crate::error::{QueryError, Result};

/// A parsed `$collStats`.
#[derive(Debug)]
pub struct CollStats {
    db: String,
    coll: String,
    spec: CollStatsSpec,
    raw: RawDocumentBuf,
}

fn sub_doc<'a>(name: &str, v: RawBsonRef<'a>) -> Result<&'a bson::RawDocument> {
    match v {
        RawBsonRef::Document(d) => Ok(d),
        other => Err(QueryError::TypeMismatch(format!(
            "BSON field '$collStats.{name}' is the wrong type '{}', expected type 'object'",
            cairn_storage::display::type_name(other)
        ))),
    }
}

/// Parses `{$collStats: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            5447000,
            format!(
                "$collStats must take a nested object but found: $collStats: {}",
                cairn_storage::display::value(arg)
            ),
        ));
    };
    let mut spec = CollStatsSpec::default();
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        match k.as_str() {
            "latencyStats" => {
                let s = sub_doc("latencyStats", v)?;
                let h = match s.get("histograms") {
                    Ok(Some(RawBsonRef::Boolean(b))) => b,
                    Ok(None) => false,
                    _ => {
                        return Err(QueryError::TypeMismatch(
                            "BSON field 'histograms' is the wrong type, expected type 'bool'"
                                .into(),
                        ));
                    }
                };
                spec.latency = Some(h);
            }
            "storageStats" => {
                let s = sub_doc("storageStats", v)?;
                let scale = match s.get("scale") {
                    Ok(Some(RawBsonRef::Int32(i))) => i64::from(i),
                    Ok(Some(RawBsonRef::Int64(i))) => i,
                    Ok(Some(RawBsonRef::Double(f))) => f as i64,
                    Ok(None) => 1,
                    _ => {
                        return Err(QueryError::TypeMismatch(
                            "BSON field 'scale' is the wrong type, expected a number".into(),
                        ));
                    }
                };
                if scale < 1 {
                    return Err(loc(
                        51024,
                        format!("BSON field 'scale' value must be >= 1, actual value '{scale}'"),
                    ));
                }
                spec.storage = Some(scale);
            }
            "count" => {
                sub_doc("count", v)?;
                spec.count = true;
            }
            "queryExecStats" => {
                sub_doc("queryExecStats", v)?;
                spec.query_exec = true;
            }
            other => {
                return Err(loc(
                    40415,
                    format!("BSON field '$collStats.{other}' is an unknown field."),
                ));
            }
        }
    }
    Ok(vec![Arc::new(CollStats {
        db: cx.db.clone(),
        coll: cx.coll.clone().unwrap_or_default(),
        spec,
        raw: d.to_owned(),
    })])
}

impl Stage for CollStats {
    fn name(&self) -> &'static str {
        "$collStats"
    }

    fn serialize(&self) -> RawBson {
        RawBson::Document(self.raw.clone())
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
        Ok(Box::new(CollStatsStream {
            stage: self,
            done: false,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct CollStatsStream {
    stage: Arc<CollStats>,
    done: bool,
}

impl DocStream for CollStatsStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if self.done {
            return Ok(None);
        }
        self.done = true;
        let st = &self.stage;
        let meta = cx.catalog.collection(&st.db, &st.coll)?;
        let sections = cx
            .host
            .coll_stats(&st.db, &st.coll, meta.as_deref(), &st.spec)?;
        let mut d = RawDocumentBuf::new();
        d.append(bson::raw::cstr!("ns"), format!("{}.{}", st.db, st.coll));
        d.append(bson::raw::cstr!("host"), cx.host.host_name());
        d.append(bson::raw::cstr!("localTime"), bson::DateTime::now());
        for (k, v) in sections.iter().flatten() {
            d.append(k, v);
        }
        Ok(Some(d))
    }
}
