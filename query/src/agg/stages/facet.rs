//! `$facet: {name: [pipeline], …}`: runs several sub-pipelines over the same input and
//! outputs one document `{name: [results], …}`. The input is buffered (within the memory
//! limit); the output document must fit 16 MiB (4031700). Sub-pipelines may not write, nest
//! `$facet`, or use first-stage sources (40600). Errors: 40169 not a non-empty object, 40170
//! a value not an array, 40171 an empty sub-pipeline, field-name errors (16410, 15998).

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::doc::key;
use crate::agg::{
    Buffered, Constraints, Deps, DepsState, DocStream, ExecCx, MAX_DOC_BYTES, Options, ParseCx,
    Pipeline, Stage, SubContext, loc,
};
use crate::error::{QueryError, Result};
use crate::sort::validate_field_name;

/// A parsed `$facet`.
#[derive(Debug)]
pub struct Facet {
    facets: Vec<(String, Pipeline)>,
}

/// Parses `{$facet: {…}}`.
pub fn parse(arg: RawBsonRef<'_>, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let RawBsonRef::Document(d) = arg else {
        return Err(loc(
            40169,
            "the $facet specification must be a non-empty object",
        ));
    };
    let mut facets = Vec::new();
    for el in d.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        validate_field_name(k.as_str())?;
        let RawBsonRef::Array(arr) = v else {
            return Err(loc(
                40170,
                format!(
                    "arguments to $facet must be arrays, {} is type {}",
                    k.as_str(),
                    cairn_storage::display::type_name(v)
                ),
            ));
        };
        let sub = cx.sub(SubContext::Facet, cx.coll.as_deref())?;
        let p = Pipeline::parse(arr, &sub)?;
        if p.stages().is_empty() {
            return Err(loc(40171, "sub-pipeline in $facet stage cannot be empty"));
        }
        facets.push((k.as_str().to_string(), p));
    }
    if facets.is_empty() {
        return Err(loc(
            40169,
            "the $facet specification must be a non-empty object",
        ));
    }
    Ok(vec![Arc::new(Facet { facets })])
}

impl Stage for Facet {
    fn name(&self) -> &'static str {
        "$facet"
    }

    fn serialize(&self) -> RawBson {
        let mut d = RawDocumentBuf::new();
        for (k, p) in &self.facets {
            if let Ok(k) = key(k) {
                d.append(k, p.serialize());
            }
        }
        RawBson::Document(d)
    }

    fn deps(&self, deps: &mut Deps) -> DepsState {
        for (_, p) in &self.facets {
            let d = p.deps();
            if d.whole {
                return DepsState::WholeDocument;
            }
            deps.fields.extend(d.fields);
        }
        DepsState::Exhaustive
    }

    fn constraints(&self) -> Constraints {
        Constraints {
            not_in_facet: true,
            ..Constraints::default()
        }
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(FacetStream {
            stage: self,
            opts: opts.clone(),
            input: Some(input),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct FacetStream {
    stage: Arc<Facet>,
    opts: Arc<Options>,
    input: Option<Box<dyn DocStream>>,
}

impl DocStream for FacetStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        let Some(mut input) = self.input.take() else {
            return Ok(None);
        };
        let mut docs = VecDeque::new();
        let mut bytes = 0usize;
        while let Some(d) = input.next(cx)? {
            bytes += d.as_bytes().len();
            if bytes > self.opts.memory_limit {
                return Err(loc(
                    292,
                    "$facet exceeded the memory limit for buffering its input",
                ));
            }
            docs.push_back(d);
            if docs.len().is_multiple_of(1024) {
                cx.host.check_interrupt()?;
            }
        }
        let mut out = RawDocumentBuf::new();
        let mut size = 5usize;
        for (name, p) in &self.stage.facets {
            let mut s = p.open(Box::new(Buffered(docs.clone())), &self.opts)?;
            let mut arr = RawArrayBuf::new();
            while let Some(d) = s.next(cx)? {
                size += d.as_bytes().len() + 8;
                if size > MAX_DOC_BYTES {
                    return Err(loc(
                        4031700,
                        format!(
                            "document constructed by $facet is {size} bytes, which exceeds the \
                             limit of {MAX_DOC_BYTES} bytes"
                        ),
                    ));
                }
                arr.push(d);
            }
            out.append(key(name)?, arr);
        }
        Ok(Some(out))
    }
}
