//! `explain` output for plans: MongoDB's stage trees (`COLLSCAN`, `IXSCAN`, `FETCH`, `OR`,
//! `IDHACK`, `COUNT_SCAN`, `GEO_NEAR_2DSPHERE`/`GEO_NEAR_2D`, and the `SORT`/`SKIP`/`LIMIT`/`PROJECTION_*` stages above them),
//! with or without execution statistics.
//!
//! Invariants: the tree printed is the plan that ran (or would run); every statistic is a
//! counter the execution kept, never an estimate (a `$near` search's `searchIntervals` are its
//! rings); Cairn adds `keyRanges` to each index scan (the storage byte ranges it read,
//! hex-encoded), and `keysExamined`/`docsExamined` to the `GEO_NEAR_*` stage (MongoDB shows
//! them on the per-interval stages under it), which MongoDB does not have.

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawDocument, RawDocumentBuf, rawdoc};
use cairn_storage::index::IndexMeta;
use cairn_storage::index_ops::KeyRange;

use super::exec::Stats;
use super::planner::{Access, IndexAccess, Plan};

/// Stages above the access path, innermost first in application order: SORT, SKIP, LIMIT,
/// projection, then an optional root stage (`COUNT`, `UPDATE`, `DELETE`, …).
#[derive(Debug, Clone, Default)]
pub struct Wrap {
    /// Blocking sort: the sort pattern and `limitAmount` (skip + limit) if any.
    pub sort: Option<(RawDocumentBuf, Option<u64>)>,
    /// Documents skipped.
    pub skip: Option<u64>,
    /// Documents returned at most.
    pub limit: Option<u64>,
    /// The projection stage name (`PROJECTION_SIMPLE`, `PROJECTION_DEFAULT`,
    /// `PROJECTION_COVERED`) and the projection.
    pub projection: Option<(&'static str, RawDocumentBuf)>,
    /// A root stage name (`COUNT`, `UPDATE`, `DELETE`, …).
    pub root: Option<&'static str>,
}

/// With statistics (`executionStats`) or without (`queryPlanner`).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// What the execution counted.
    pub stats: &'a Stats,
    /// Whether it finished.
    pub eof: bool,
    /// Milliseconds it took (estimate per stage).
    pub millis: i64,
}

/// A count as MongoDB appends it (`appendNumber`): int32 when it fits, else int64.
pub fn num(n: u64) -> RawBson {
    match i32::try_from(n) {
        Ok(i) => RawBson::Int32(i),
        Err(_) => RawBson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `["[lo, hi)", …]` of byte ranges, hex-encoded (at most 50 shown).
pub fn key_ranges(ranges: &[KeyRange]) -> RawArrayBuf {
    use std::ops::Bound;
    let mut arr = RawArrayBuf::new();
    for (lo, hi) in ranges.iter().take(50) {
        let lo = match lo {
            Bound::Included(k) => format!("[{}", hex(k)),
            Bound::Excluded(k) => format!("({}", hex(k)),
            Bound::Unbounded => "[-inf".into(),
        };
        let hi = match hi {
            Bound::Included(k) => format!("{}]", hex(k)),
            Bound::Excluded(k) => format!("{})", hex(k)),
            Bound::Unbounded => "+inf]".into(),
        };
        arr.push(format!("{lo}, {hi}"));
    }
    if ranges.len() > 50 {
        arr.push(format!("... {} more", ranges.len() - 50));
    }
    arr
}

fn index_fields(out: &mut RawDocumentBuf, idx: &IndexMeta) {
    out.append(
        cstr!("keyPattern"),
        idx.key_pattern()
            .map(RawDocument::to_owned)
            .unwrap_or_default(),
    );
    out.append(cstr!("indexName"), idx.name.clone());
    out.append(cstr!("isMultiKey"), idx.multikey);
    out.append(cstr!("isUnique"), idx.is_unique());
    out.append(cstr!("isSparse"), idx.is_sparse());
    out.append(cstr!("isPartial"), idx.partial_filter().is_some());
    out.append(cstr!("indexVersion"), 2);
}

fn common_stats(out: &mut RawDocumentBuf, n: u64, works: u64, run: &Run<'_>) {
    out.append(cstr!("nReturned"), num(n));
    out.append(
        cstr!("executionTimeMillisEstimate"),
        num(run.millis.max(0) as u64),
    );
    out.append(cstr!("works"), num(works + 1));
    out.append(cstr!("advanced"), num(n));
    out.append(cstr!("needTime"), num(works.saturating_sub(n)));
    out.append(cstr!("needYield"), 0);
    out.append(cstr!("saveState"), 0);
    out.append(cstr!("restoreState"), 0);
    out.append(cstr!("isEOF"), i32::from(run.eof));
}

fn ixscan(ia: &IndexAccess, count_scan: bool, run: Option<(&Run<'_>, u64, u64)>) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append(
        cstr!("stage"),
        if count_scan { "COUNT_SCAN" } else { "IXSCAN" },
    );
    if let Some((r, n, keys)) = run {
        common_stats(&mut d, n, keys, r);
    }
    index_fields(&mut d, &ia.index);
    d.append(
        cstr!("direction"),
        if ia.reverse { "backward" } else { "forward" },
    );
    if ia.min_max {
        d.append(cstr!("indexBounds"), rawdoc! {});
    } else {
        d.append(cstr!("indexBounds"), ia.bounds.explain_scan(ia.reverse));
    }
    d.append(cstr!("keyRanges"), key_ranges(&ia.ranges));
    if let Some((_, _, keys)) = run {
        d.append(cstr!("keysExamined"), num(keys));
        d.append(cstr!("seeks"), num(ia.ranges.len().max(1) as u64));
        d.append(cstr!("dupsTested"), 0);
        d.append(cstr!("dupsDropped"), 0);
    }
    d
}

/// The access path's stage tree (with statistics when `run` is given).
fn access_stage(
    plan: &Plan,
    access: &Access,
    filter: &RawDocument,
    run: Option<&Run<'_>>,
    branch: Option<(u64, u64, u64)>,
) -> RawDocumentBuf {
    let (keys, docs, advanced) = match (branch, run) {
        (Some(b), _) => b,
        (None, Some(r)) => (
            r.stats.keys_examined,
            r.stats.docs_examined,
            r.stats.advanced,
        ),
        (None, None) => (0, 0, 0),
    };
    let residual = plan.residual && !filter.is_empty();
    match access {
        Access::Eof => {
            let mut d = rawdoc! {"stage": "EOF"};
            if let Some(r) = run {
                common_stats(&mut d, 0, 0, r);
            }
            d
        }
        Access::IdPoint { .. } => {
            let mut d = rawdoc! {"stage": "IDHACK"};
            if let Some(r) = run {
                common_stats(&mut d, advanced, docs, r);
                d.append(cstr!("keysExamined"), num(docs));
                d.append(cstr!("docsExamined"), num(docs));
            }
            d
        }
        Access::Docs {
            ranges,
            reverse,
            bounds: None,
        } => {
            let mut d = rawdoc! {"stage": "COLLSCAN"};
            if residual {
                d.append(cstr!("filter"), filter.to_owned());
            }
            if let Some(r) = run {
                common_stats(&mut d, advanced, docs, r);
            }
            d.append(
                cstr!("direction"),
                if *reverse { "backward" } else { "forward" },
            );
            if ranges.len() != 1
                || !matches!(
                    ranges.first(),
                    Some((std::ops::Bound::Unbounded, std::ops::Bound::Unbounded))
                )
            {
                d.append(cstr!("keyRanges"), key_ranges(ranges));
            }
            if run.is_some() {
                d.append(cstr!("docsExamined"), num(docs));
            }
            d
        }
        Access::Docs {
            ranges,
            reverse,
            bounds: Some(b),
        } => {
            // The `_id` index is the document space itself: one read is the fetch too.
            let mut ix = RawDocumentBuf::new();
            ix.append(cstr!("stage"), "IXSCAN");
            if let Some(r) = run {
                common_stats(&mut ix, docs, docs, r);
            }
            index_fields(&mut ix, &IndexMeta::id_index());
            ix.append(
                cstr!("direction"),
                if *reverse { "backward" } else { "forward" },
            );
            ix.append(cstr!("indexBounds"), b.explain_scan(*reverse));
            ix.append(cstr!("keyRanges"), key_ranges(ranges));
            if run.is_some() {
                ix.append(cstr!("keysExamined"), num(docs));
            }
            if branch.is_some() {
                // Inside an OR the union is fetched above it.
                return ix;
            }
            fetch(
                ix,
                residual.then_some(filter),
                run.map(|r| (r, advanced, docs)),
            )
        }
        Access::Index(ia) => {
            let entries = run.map(|r| (r, r.stats.keys_advanced, keys));
            let ix = ixscan(ia, plan.count_scan, entries);
            if plan.covered || plan.count_scan || branch.is_some() {
                ix
            } else {
                fetch(
                    ix,
                    residual.then_some(filter),
                    run.map(|r| (r, advanced, docs)),
                )
            }
        }
        Access::Near(na) => {
            let name = match na.kind {
                crate::index::geo_bounds::GeoKind::Sphere => "GEO_NEAR_2DSPHERE",
                crate::index::geo_bounds::GeoKind::Flat { .. } => "GEO_NEAR_2D",
            };
            let mut d = RawDocumentBuf::new();
            d.append(cstr!("stage"), name);
            if residual {
                d.append(cstr!("filter"), filter.to_owned());
            }
            if let Some(r) = run {
                common_stats(&mut d, advanced, keys + docs, r);
            }
            d.append(
                cstr!("keyPattern"),
                na.index
                    .key_pattern()
                    .map(RawDocument::to_owned)
                    .unwrap_or_default(),
            );
            d.append(cstr!("indexName"), na.index.name.clone());
            d.append(cstr!("indexVersion"), 2);
            if let Some(r) = run {
                let mut ivs = RawArrayBuf::new();
                for iv in &r.stats.near_intervals {
                    ivs.push(rawdoc! {
                        "minDistance": iv.min,
                        "maxDistance": iv.max,
                        "maxInclusive": iv.max_inclusive,
                        "nBuffered": num(iv.buffered),
                        "nReturned": num(iv.returned),
                    });
                }
                d.append(cstr!("searchIntervals"), ivs);
                d.append(cstr!("keysExamined"), num(keys));
                d.append(cstr!("docsExamined"), num(docs));
            }
            d
        }
        Access::Or(children) => {
            let mut arr = RawArrayBuf::new();
            for (i, c) in children.iter().enumerate() {
                let b = run.and_then(|r| r.stats.branches.get(i).copied());
                let sub = Plan {
                    residual: false,
                    ..plan.clone()
                };
                arr.push(access_stage(&sub, c, filter, run, b.or(Some((0, 0, 0)))));
            }
            let mut or = rawdoc! {"stage": "OR"};
            if let Some(r) = run {
                common_stats(&mut or, advanced, keys + docs, r);
                or.append(cstr!("dupsTested"), num(advanced + r.stats.dups_dropped));
                or.append(cstr!("dupsDropped"), num(r.stats.dups_dropped));
            }
            or.append(cstr!("inputStages"), arr);
            // The union's documents are fetched (and checked against the whole filter).
            let mut f = rawdoc! {"stage": "FETCH"};
            if residual {
                f.append(cstr!("filter"), filter.to_owned());
            }
            if let Some(r) = run {
                common_stats(&mut f, advanced, docs, r);
                f.append(cstr!("docsExamined"), num(docs));
            }
            f.append(cstr!("inputStage"), or);
            f
        }
    }
}

fn fetch(
    input: RawDocumentBuf,
    filter: Option<&RawDocument>,
    run: Option<(&Run<'_>, u64, u64)>,
) -> RawDocumentBuf {
    let mut d = rawdoc! {"stage": "FETCH"};
    if let Some(f) = filter {
        d.append(cstr!("filter"), f.to_owned());
    }
    if let Some((r, n, docs)) = run {
        common_stats(&mut d, n, docs, r);
        d.append(cstr!("docsExamined"), num(docs));
        d.append(cstr!("alreadyHasObj"), 0);
    }
    d.append(cstr!("inputStage"), input);
    d
}

/// The whole stage tree: the access path wrapped in the stages of `wrap`. `filter` is the
/// query's filter as given; `run` adds statistics.
pub fn stage_tree(
    plan: &Plan,
    filter: &RawDocument,
    wrap: &Wrap,
    run: Option<&Run<'_>>,
) -> RawDocumentBuf {
    let mut tree = access_stage(plan, &plan.access, filter, run, None);
    let mut n = run.map_or(0, |r| r.stats.advanced);
    let works = n;
    let wrap_stage = |name: &str, extra: RawDocumentBuf, input: RawDocumentBuf, n: u64| {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("stage"), name.to_string());
        if let Some(r) = run {
            common_stats(&mut d, n, works, r);
        }
        for (k, v) in extra.iter().flatten() {
            d.append(k, v);
        }
        d.append(cstr!("inputStage"), input);
        d
    };
    if let Some((pattern, limit_amount)) = &wrap.sort {
        if let Some(l) = limit_amount {
            n = n.min(*l);
        }
        let mut extra = rawdoc! {"sortPattern": pattern.clone(), "memLimit": 104_857_600_i64};
        if let Some(l) = limit_amount {
            extra.append(cstr!("limitAmount"), num(*l));
        }
        extra.append(cstr!("type"), "simple");
        tree = wrap_stage("SORT", extra, tree, n);
    }
    if let Some(s) = wrap.skip.filter(|s| *s > 0) {
        n = n.saturating_sub(s);
        tree = wrap_stage("SKIP", rawdoc! {"skipAmount": num(s)}, tree, n);
    }
    if let Some(l) = wrap.limit.filter(|l| *l > 0) {
        n = n.min(l);
        tree = wrap_stage("LIMIT", rawdoc! {"limitAmount": num(l)}, tree, n);
    }
    if let Some((name, spec)) = &wrap.projection {
        tree = wrap_stage(name, rawdoc! {"transformBy": spec.clone()}, tree, n);
    }
    if let Some(root) = wrap.root {
        tree = wrap_stage(root, rawdoc! {}, tree, n);
    }
    tree
}

/// The number of results after the stages of `wrap` (what `nReturned` at the top is).
pub fn returned(stats: &Stats, wrap: &Wrap) -> u64 {
    let mut n = stats.advanced;
    if let Some((_, Some(l))) = &wrap.sort {
        n = n.min(*l);
    }
    if let Some(s) = wrap.skip {
        n = n.saturating_sub(s);
    }
    if let Some(l) = wrap.limit.filter(|l| *l > 0) {
        n = n.min(l);
    }
    n
}

/// A value for `parsedQuery`: the filter as given.
pub fn parsed_query(filter: &RawDocument) -> RawBson {
    RawBson::Document(filter.to_owned())
}
