//! `$unionWith: "coll"` or `{coll, pipeline}`: passes its input through, then the results of
//! `pipeline` run over `coll` (streamed). Without `coll` the pipeline must start with
//! `$documents`. The sub-pipeline may not write (31441). Unknown fields: 40415.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use crate::agg::{
    Aggregation, Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Pipeline, Running, Stage,
    SubContext, loc,
};
use crate::error::{QueryError, Result};
use crate::expr::ExprExtensions;

/// A parsed `$unionWith`.
#[derive(Debug)]
pub struct UnionWith {
    db: String,
    coll: Option<String>,
    pipeline: Pipeline,
    ext: ExprExtensions,
}

/// Parses `$unionWith`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let (coll, arr) = match arg {
        RawBsonRef::String(s) => (Some(s.to_string()), None),
        RawBsonRef::Document(d) => {
            let (mut coll, mut pipeline) = (None, None);
            for el in d.iter() {
                let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
                match (k.as_str(), v) {
                    ("coll", RawBsonRef::String(s)) => coll = Some(s.to_string()),
                    ("coll", other) => {
                        return Err(QueryError::TypeMismatch(format!(
                            "BSON field '$unionWith.coll' is the wrong type '{}', expected type \
                             'string'",
                            cairn_storage::display::type_name(other)
                        )));
                    }
                    ("pipeline", RawBsonRef::Array(a)) => pipeline = Some(a),
                    ("pipeline", other) => {
                        return Err(QueryError::TypeMismatch(format!(
                            "BSON field '$unionWith.pipeline' is the wrong type '{}', expected \
                             type 'array'",
                            cairn_storage::display::type_name(other)
                        )));
                    }
                    (other, _) => {
                        return Err(loc(
                            40415,
                            format!("BSON field '$unionWith.{other}' is an unknown field."),
                        ));
                    }
                }
            }
            (coll, pipeline)
        }
        other => {
            return Err(QueryError::FailedToParse(format!(
                "the $unionWith stage specification must be an object or string, but found {}",
                cairn_storage::display::type_name(other)
            )));
        }
    };
    if let Some(c) = &coll {
        cairn_storage::namespace::check_collection_name(c).map_err(|_| {
            QueryError::Location(73, format!("Invalid namespace specified '{}.{c}'", cx.db))
        })?;
    }
    let sub = cx.sub(SubContext::UnionWith, coll.as_deref())?;
    let pipeline = match arr {
        Some(a) => Pipeline::parse(a, &sub)?,
        None => Pipeline::default(),
    };
    if coll.is_none()
        && !pipeline
            .stages()
            .first()
            .is_some_and(|s| s.constraints().collectionless)
    {
        return Err(QueryError::FailedToParse(
            "$unionWith stage without explicit collection must have a pipeline with $documents \
             as first stage"
                .into(),
        ));
    }
    Ok(vec![Arc::new(UnionWith {
        db: cx.db.clone(),
        coll,
        pipeline,
        ext: cx.ext.clone(),
    })])
}

impl Stage for UnionWith {
    fn name(&self) -> &'static str {
        "$unionWith"
    }

    fn serialize(&self) -> RawBson {
        let mut d = rawdoc! {};
        if let Some(c) = &self.coll {
            d.append(bson::raw::cstr!("coll"), c.as_str());
        }
        d.append(bson::raw::cstr!("pipeline"), self.pipeline.serialize());
        RawBson::Document(d)
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(UnionStream {
            stage: self,
            opts: opts.clone(),
            input: Some(input),
            other: None,
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct UnionStream {
    stage: Arc<UnionWith>,
    opts: Arc<Options>,
    input: Option<Box<dyn DocStream>>,
    other: Option<Running>,
}

impl DocStream for UnionStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if let Some(input) = self.input.as_mut() {
            if let Some(d) = input.next(cx)? {
                return Ok(Some(d));
            }
            self.input = None;
            let st = &self.stage;
            let agg = Aggregation::from_parsed(
                &st.db,
                st.coll.as_deref(),
                st.pipeline.stages().to_vec(),
                &st.ext,
            )?;
            self.other = Some(agg.open_shared(self.opts.clone())?);
        }
        match self.other.as_mut() {
            Some(r) => r.next(cx),
            None => Ok(None),
        }
    }
}
