//! `$unset`: removes fields — an exclusion `$project` of the named paths. The argument is a
//! string or a non-empty array of strings (31002, 31119, 31120); paths are checked as field
//! paths (40352, 15998, 40353, 16410) and for collisions (31249, 31250), reported as
//! `Invalid $unset :: caused by :: …`.

use std::any::Any;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::agg::{Deps, DepsState, DocStream, ExecCx, Options, ParseCx, Stage, loc, with_context};
use crate::error::Result;
use crate::projection::Projection;
use crate::sort::validate_field_path;

/// A parsed `$unset`.
#[derive(Debug)]
pub struct Unset {
    /// The paths removed.
    pub paths: Vec<String>,
    projection: Projection,
}

/// Parses `{$unset: "a" | ["a", "b.c"]}`.
pub fn parse(arg: RawBsonRef<'_>, _cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let paths: Vec<String> = match arg {
        RawBsonRef::String(s) => vec![s.to_string()],
        RawBsonRef::Array(a) => {
            let mut out = Vec::new();
            for e in a {
                match e {
                    Ok(RawBsonRef::String(s)) => out.push(s.to_string()),
                    _ => {
                        return Err(loc(
                            31120,
                            "$unset specification must be a string or an array containing only \
                             string values",
                        ));
                    }
                }
            }
            if out.is_empty() {
                return Err(loc(
                    31119,
                    "$unset specification must be a string or an array with at least one field",
                ));
            }
            out
        }
        _ => {
            return Err(loc(
                31002,
                "$unset specification must be a string or an array",
            ));
        }
    };
    let ctx = "Invalid $unset";
    let mut spec = RawDocumentBuf::new();
    for p in &paths {
        validate_field_path(p).map_err(|e| with_context(e, ctx))?;
        spec.append(crate::agg::doc::key(p)?, 0i32);
    }
    let projection = Projection::parse(&spec).map_err(|e| with_context(e, ctx))?;
    Ok(vec![Arc::new(Unset { paths, projection })])
}

impl Stage for Unset {
    fn name(&self) -> &'static str {
        "$unset"
    }

    fn serialize(&self) -> RawBson {
        let mut a = bson::RawArrayBuf::new();
        for p in &self.paths {
            a.push(p.as_str());
        }
        RawBson::Array(a)
    }

    fn deps(&self, _deps: &mut Deps) -> DepsState {
        DepsState::SeeNext
    }

    fn open(
        self: Arc<Self>,
        input: Box<dyn DocStream>,
        _opts: &Arc<Options>,
    ) -> Result<Box<dyn DocStream>> {
        Ok(Box::new(UnsetStream { stage: self, input }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Unset {
    /// The paths it removes.
    pub(crate) fn removed(&self) -> &[String] {
        &self.paths
    }
}

struct UnsetStream {
    stage: Arc<Unset>,
    input: Box<dyn DocStream>,
}

impl DocStream for UnsetStream {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        match self.input.next(cx)? {
            Some(d) => Ok(Some(self.stage.projection.apply(&d, None)?)),
            None => Ok(None),
        }
    }
}
