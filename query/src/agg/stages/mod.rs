//! The stage registry: the one sorted list of pipeline stages, each implemented in its own
//! file. [`parse_stage`] checks a stage document (one field, 40323), finds its parser here
//! (unknown names 40324; MongoDB 7.0 stages Cairn does not run: NotImplemented 238 naming the
//! stage, from [`NOT_IMPLEMENTED`]) and returns the parsed stage(s) — some stages desugar into
//! several (`$sortByCount` is `$group` + `$sort`, `$bucket` is `$group` + `$sort`).
//!
//! Adding a stage: one file here, one line in [`REGISTRY`].

use std::sync::Arc;

use std::collections::VecDeque;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use super::{DocStream, ExecCx, ParseCx, Stage, loc};
use crate::error::{QueryError, Result};

pub mod add_fields;
pub mod bucket;
pub mod bucket_auto;
pub mod change_stream;
pub mod change_stream_split;
pub mod coll_stats;
pub mod count;
pub mod current_op;
pub mod densify;
pub mod documents;
pub mod facet;
pub mod fill;
pub mod geo_near;
pub mod graph_lookup;
pub mod group;
pub mod index_stats;
pub mod limit;
pub mod list_catalog;
pub mod list_sessions;
pub mod lookup;
pub mod match_;
pub mod merge;
pub mod out;
pub mod plan_cache_stats;
pub mod project;
pub mod redact;
pub mod replace_root;
pub mod sample;
pub mod set_window_fields;
pub mod skip;
pub mod sort;
pub mod sort_by_count;
pub mod union_with;
pub mod unset;
pub mod unwind;

/// A stage parser: the stage's argument in, the parsed stage(s) out.
pub type ParseFn = fn(RawBsonRef<'_>, &ParseCx) -> Result<Vec<Arc<dyn Stage>>>;

/// Every stage, sorted byte-wise by name (a unit test enforces the order).
pub static REGISTRY: &[(&str, ParseFn)] = &[
    ("$addFields", add_fields::parse),
    ("$bucket", bucket::parse),
    ("$bucketAuto", bucket_auto::parse),
    ("$changeStream", change_stream::parse),
    ("$changeStreamSplitLargeEvent", change_stream_split::parse),
    ("$collStats", coll_stats::parse),
    ("$count", count::parse),
    ("$currentOp", current_op::parse),
    ("$densify", densify::parse),
    ("$documents", documents::parse),
    ("$facet", facet::parse),
    ("$fill", fill::parse),
    ("$geoNear", geo_near::parse),
    ("$graphLookup", graph_lookup::parse),
    ("$group", group::parse),
    ("$indexStats", index_stats::parse),
    ("$limit", limit::parse),
    ("$listCatalog", list_catalog::parse),
    ("$listLocalSessions", list_sessions::parse_local),
    ("$listSessions", list_sessions::parse),
    ("$lookup", lookup::parse),
    ("$match", match_::parse),
    ("$merge", merge::parse),
    ("$out", out::parse),
    ("$planCacheStats", plan_cache_stats::parse),
    ("$project", project::parse),
    ("$redact", redact::parse),
    ("$replaceRoot", replace_root::parse),
    ("$replaceWith", replace_root::parse_with),
    ("$sample", sample::parse),
    ("$set", add_fields::parse_set),
    ("$setWindowFields", set_window_fields::parse),
    ("$skip", skip::parse),
    ("$sort", sort::parse),
    ("$sortByCount", sort_by_count::parse),
    ("$unionWith", union_with::parse),
    ("$unset", unset::parse),
    ("$unwind", unwind::parse),
];

/// MongoDB 7.0 stages Cairn does not run (NotImplemented), sorted.
pub const NOT_IMPLEMENTED: &[&str] = &[
    "$listSampledQueries",
    "$listSearchIndexes",
    "$search",
    "$searchMeta",
    "$shardedDataDistribution",
    "$vectorSearch",
];

/// The stages an update pipeline may hold (`update`/`findAndModify` with an array, `$merge`'s
/// `whenMatched` pipeline); others are InvalidOptions (72) there.
pub const UPDATE_STAGES: &[&str] = &[
    "$addFields",
    "$project",
    "$replaceRoot",
    "$replaceWith",
    "$set",
    "$unset",
];

/// The parser of a stage name.
pub fn lookup(name: &str) -> Option<ParseFn> {
    REGISTRY
        .binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .and_then(|i| REGISTRY.get(i))
        .map(|(_, f)| *f)
}

/// Parses one stage document.
pub fn parse_stage(spec: &RawDocument, cx: &ParseCx) -> Result<Vec<Arc<dyn Stage>>> {
    let mut it = spec.iter();
    let first = it.next();
    let (Some(Ok((name, arg))), None) = (first, it.next()) else {
        return Err(loc(
            40323,
            "A pipeline stage specification object must contain exactly one field.",
        ));
    };
    let name = name.as_str();
    match lookup(name) {
        Some(parse) => parse(arg, cx),
        None if NOT_IMPLEMENTED.binary_search(&name).is_ok() => Err(QueryError::NotImplemented(
            format!("the {name} aggregation stage is not supported by Cairn yet"),
        )),
        None => Err(loc(
            40324,
            format!("Unrecognized pipeline stage name: '{name}'"),
        )),
    }
}

/// The output of a source stage that lists server data (`$currentOp`, `$indexStats`,
/// `$listCatalog`, `$listLocalSessions`, `$planCacheStats`): the documents `load` gives on the
/// first call, then one per call.
pub(crate) struct Listing<S> {
    stage: Arc<S>,
    load: fn(&S, &ExecCx<'_>) -> Result<Vec<RawDocumentBuf>>,
    out: Option<VecDeque<RawDocumentBuf>>,
}

impl<S> Listing<S> {
    /// A listing of what `load` gives for `stage`.
    pub(crate) fn new(
        stage: Arc<S>,
        load: fn(&S, &ExecCx<'_>) -> Result<Vec<RawDocumentBuf>>,
    ) -> Listing<S> {
        Listing {
            stage,
            load,
            out: None,
        }
    }
}

impl<S: Send + Sync> DocStream for Listing<S> {
    fn next(&mut self, cx: &ExecCx<'_>) -> Result<Option<RawDocumentBuf>> {
        if self.out.is_none() {
            self.out = Some((self.load)(&self.stage, cx)?.into());
        }
        Ok(self.out.as_mut().and_then(VecDeque::pop_front))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted() {
        let names: Vec<&str> = REGISTRY.iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        let mut ni = NOT_IMPLEMENTED.to_vec();
        ni.sort_unstable();
        assert_eq!(ni, NOT_IMPLEMENTED);
        for n in NOT_IMPLEMENTED {
            assert!(lookup(n).is_none(), "{n} is both implemented and not");
        }
    }
}
