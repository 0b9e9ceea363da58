//! Pipeline-style updates (`u: [stage, …]`, MongoDB's `PipelineExecutor`).
//!
//! The array is parsed as an aggregation pipeline ([`crate::agg::Pipeline::parse`], so an
//! unknown stage is 40324 and a malformed one its stage's error) with the command's variables
//! (`let`, `$$NOW`, `$$CLUSTER_TIME`) plus the statement's constants (`c`); then every stage
//! must be one of [`UPDATE_STAGES`] (`$addFields $set $project $unset $replaceRoot
//! $replaceWith`), else InvalidOptions (72) "`<stage>` is not allowed to be used within an
//! update". An empty pipeline is the identity.
//!
//! Applying runs the stages over the one document and treats the output as a replacement
//! that may omit `_id` (the stored `_id` is kept) and may hold top-level `$`-prefixed
//! fields; the `_id` may not change (66). The update is a no-op exactly when the pipeline's
//! output is byte-identical to its input.
//!
//! Invariant: the allowed stages never read storage; the pipeline runs over [`NoData`].

use std::collections::VecDeque;
use std::sync::Arc;

use bson::{RawArray, RawDocument, RawDocumentBuf};

use crate::agg::stages::UPDATE_STAGES;
use crate::agg::{Buffered, ExecCx, NoData, NoHost, Options, ParseCx, Pipeline};
use crate::error::{QueryError, Result};
use crate::expr::ExprExtensions;

/// `ext` with the constants of an update statement (`c`) defined as variables.
pub fn with_constants(ext: &ExprExtensions, constants: &RawDocument) -> Result<ExprExtensions> {
    let mut vars = ext.variables().clone();
    for el in constants.iter() {
        let (k, v) = el.map_err(|e| QueryError::BadValue(e.to_string()))?;
        vars.set_constant(k.as_str(), bson::RawBson::from(v))?;
    }
    Ok(ExprExtensions::with_variables(vars))
}

/// A parsed update pipeline.
#[derive(Debug, Clone)]
pub struct UpdatePipeline {
    pipeline: Pipeline,
    opts: Arc<Options>,
}

impl UpdatePipeline {
    /// Parses and checks the stages (see the module docs).
    pub fn parse(arr: &RawArray, ext: &ExprExtensions) -> Result<UpdatePipeline> {
        let cx = ParseCx::new("", Some(""), ext.clone());
        let pipeline = Pipeline::parse(arr, &cx)?;
        for s in pipeline.stages() {
            if !UPDATE_STAGES.contains(&s.name()) {
                return Err(QueryError::Location(
                    72,
                    format!("{} is not allowed to be used within an update", s.name()),
                ));
            }
        }
        Ok(UpdatePipeline {
            pipeline,
            opts: Arc::new(Options::default()),
        })
    }

    /// The pipeline's output for `doc`.
    pub fn run(&self, doc: &RawDocument) -> Result<RawDocumentBuf> {
        let mut stream = self.pipeline.open(
            Box::new(Buffered(VecDeque::from([doc.to_owned()]))),
            &self.opts,
        )?;
        let cx = ExecCx {
            source: &NoData,
            catalog: &NoData,
            host: &NoHost,
        };
        stream
            .next(&cx)?
            .ok_or_else(|| QueryError::BadValue("the update pipeline produced no document".into()))
    }
}
