//! Candidate plans: which ways of reading the collection can answer a query.
//!
//! Invariants:
//! - every candidate returns exactly the documents a collection scan with the same filter
//!   returns (a hinted sparse or partial index the filter cannot use excepted, as in
//!   MongoDB: it is scanned whole and holds only some documents);
//! - a plan is *exact* (no residual filter, eligible for covering and counting from the
//!   index alone) only when [`IndexBounds::is_exact_for`] says so (for bounds built from the
//!   filter, [`IndexBounds::planned_ranges`] answers the same in one pass); an index scan
//!   checks entries against the bounds only when its ranges may hold others;
//! - an unhinted index that neither the filter can bound on its leading field
//!   ([`may_bound`]) nor the sort starts with is skipped before its bounds are built (it
//!   would not be a candidate);
//! - an index that is building or hidden (a hint naming it is refused too, as in MongoDB),
//!   or over a path the statement modifies, is never a candidate;
//! - a geo index is a candidate only for a `$geoWithin`/`$geoIntersects` it can answer (its
//!   entries are cells, not values), or when hinted (then scanned whole, as MongoDB does:
//!   documents without a location are not in it), and never provides a sort; a `$near` query has exactly
//!   one plan, the ring search over the first fitting geo index, whose documents come
//!   nearest first.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::compare::compare_values;
use cairn_storage::index::{IndexMeta, IndexState, SpecOptions};
use cairn_storage::index_ops::KeyRange;
use cairn_storage::keys::encode_value;
use cairn_storage::store::id_key;

use crate::error::{QueryError, Result};
use crate::filter::{Expr, Filter, Predicate};
use std::sync::Arc;

use crate::geo::near::NearQuery;
use crate::index::bounds::{Interval, index_sort_direction, may_bound};
use crate::index::geo_bounds::{GeoKind, base_bounds, geo_bounds, geo_kind};
use crate::index::{IndexBounds, bounds_for, bounds_for_index_with, key_components};
use crate::projection::Projection;
use crate::sort::SortSpec;

/// The `hint` of a query.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Hint {
    /// No hint: the planner chooses.
    #[default]
    None,
    /// `{$natural: ±1}`: a collection scan, backward for -1.
    Natural {
        /// Backward.
        reverse: bool,
    },
    /// An index by name.
    Name(String),
    /// An index by key pattern.
    Pattern(RawDocumentBuf),
}

impl Hint {
    /// Parses a `hint` value: a name, a key pattern, `{$natural: ±1}`; `{}` and `""` are no
    /// hint. Other types are for the caller to refuse.
    pub fn parse(v: Option<RawBsonRef<'_>>) -> Result<Hint> {
        match v {
            None => Ok(Hint::None),
            Some(RawBsonRef::String("")) => Ok(Hint::None),
            Some(RawBsonRef::String(s)) => Ok(Hint::Name(s.to_string())),
            Some(RawBsonRef::Document(d)) => {
                if d.is_empty() {
                    return Ok(Hint::None);
                }
                if let Ok(Some(n)) = d.get("$natural") {
                    let reverse = match n {
                        RawBsonRef::Int32(i) => i < 0,
                        RawBsonRef::Int64(i) => i < 0,
                        RawBsonRef::Double(f) => f < 0.0,
                        _ => false,
                    };
                    return Ok(Hint::Natural { reverse });
                }
                Ok(Hint::Pattern(d.to_owned()))
            }
            Some(_) => Err(QueryError::BadValue(
                "hint must be a string or an object".into(),
            )),
        }
    }
}

/// What an update statement changes, for keeping its own scan off indexes it moves
/// documents in (the Halloween problem).
#[derive(Debug, Clone, PartialEq)]
pub enum Modifies {
    /// A replacement: every field may change (only `_id` is safe).
    Everything,
    /// These dotted paths (and everything under them).
    Paths(Vec<String>),
}

/// A query to plan.
#[derive(Clone, Copy)]
pub struct Query<'a> {
    /// The filter.
    pub filter: &'a Filter,
    /// The requested order (not `$natural`).
    pub sort: Option<&'a SortSpec>,
    /// `sort: {$natural: ±1}`: a collection scan in that direction.
    pub natural: Option<bool>,
    /// The projection, if any.
    pub projection: Option<&'a Projection>,
    /// Instead of a parsed [`Query::projection`]: the paths an inclusion projection of
    /// plain fields keeps, as [`Projection::simple_inclusion_paths`] lists them (the
    /// aggregation `$cursor` stage, which needs no parsed projection to plan).
    pub inclusion: Option<&'a [String]>,
    /// The hint.
    pub hint: &'a Hint,
    /// `min`: inclusive lower key bound on the hinted index.
    pub min: Option<&'a RawDocument>,
    /// `max`: exclusive upper key bound on the hinted index.
    pub max: Option<&'a RawDocument>,
    /// For updates: the fields the statement changes.
    pub modifies: Option<&'a Modifies>,
    /// Only the number of matches is needed (`count`).
    pub count: bool,
    /// At most this many results are needed (`skip` + `limit`), if limited.
    pub limit: Option<u64>,
}

impl<'a> Query<'a> {
    /// A query with just a filter.
    pub fn new(filter: &'a Filter, hint: &'a Hint) -> Query<'a> {
        Query {
            filter,
            sort: None,
            natural: None,
            projection: None,
            inclusion: None,
            hint,
            min: None,
            max: None,
            modifies: None,
            count: false,
            limit: None,
        }
    }
}

/// How the documents are reached.
#[derive(Debug, Clone)]
pub enum Access {
    /// Nothing (the collection does not exist): MongoDB's EOF.
    Eof,
    /// One document by `_id` (MongoDB's IDHACK).
    IdPoint {
        /// The document key `E(_id)`.
        key: Vec<u8>,
    },
    /// Documents in `_id` order over ranges of the document space: the whole collection
    /// (COLLSCAN, `bounds: None`) or the `_id` index's bounds (IXSCAN `_id_` + FETCH).
    Docs {
        /// Ascending, disjoint ranges over document keys.
        ranges: Vec<KeyRange>,
        /// Backward.
        reverse: bool,
        /// The `_id` bounds the ranges come from.
        bounds: Option<IndexBounds>,
    },
    /// Entries of a secondary index, then (unless covered) the documents they point to.
    Index(IndexAccess),
    /// The union of several scans (`$or`), each document once.
    Or(Vec<Access>),
    /// A `$near` search over a geo index: rings of growing radius around the center, each
    /// read from the cells covering it and returned nearest first (mongod's
    /// `GEO_NEAR_2DSPHERE` / `GEO_NEAR_2D`).
    Near(NearAccess),
}

/// A `$near` search over a geo index.
#[derive(Debug, Clone)]
pub struct NearAccess {
    /// The index.
    pub index: IndexMeta,
    /// Its kind (`2dsphere`, or `2d` with its square and bits).
    pub kind: GeoKind,
    /// The position of the searched geo field in the key pattern.
    pub field: usize,
    /// The bounds of the other fields (the geo field's are replaced ring by ring).
    pub base: IndexBounds,
    /// The near predicate.
    pub near: Arc<NearQuery>,
}

/// A scan of a secondary index.
#[derive(Debug, Clone)]
pub struct IndexAccess {
    /// The index.
    pub index: IndexMeta,
    /// The bounds (what explain shows).
    pub bounds: IndexBounds,
    /// Ascending, disjoint byte ranges covering the bounds.
    pub ranges: Vec<KeyRange>,
    /// Backward.
    pub reverse: bool,
    /// Entries are checked against the bounds (the ranges may be wider).
    pub check_entries: bool,
    /// `min`/`max` ranges rather than filter bounds.
    pub min_max: bool,
}

/// A candidate plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// How documents are reached.
    pub access: Access,
    /// The filter is re-checked on each document (false when the bounds are exact).
    pub residual: bool,
    /// Documents are built from index entries alone (no FETCH).
    pub covered: bool,
    /// The access order is the requested sort (no blocking SORT).
    pub provides_sort: bool,
    /// The same document may be reached more than once (multikey index, `$or`).
    pub dedupe: bool,
    /// Counting index entries answers a `count` (COUNT_SCAN).
    pub count_scan: bool,
}

impl Plan {
    /// A collection scan.
    pub fn collscan(reverse: bool) -> Plan {
        Plan {
            access: Access::Docs {
                ranges: vec![(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)],
                reverse,
                bounds: None,
            },
            residual: true,
            covered: false,
            provides_sort: false,
            dedupe: false,
            count_scan: false,
        }
    }

    /// The plan for a collection that does not exist.
    pub fn eof() -> Plan {
        Plan {
            access: Access::Eof,
            residual: false,
            covered: false,
            provides_sort: true,
            dedupe: false,
            count_scan: false,
        }
    }

    /// A stable identity for the plan cache: the kind of access and the indexes it uses.
    pub fn key(&self) -> String {
        fn access_key(a: &Access) -> String {
            match a {
                Access::Eof => "eof".into(),
                Access::IdPoint { .. } => "idhack".into(),
                Access::Docs { bounds: None, .. } => "collscan".into(),
                Access::Docs { .. } => "ix:_id_".into(),
                Access::Index(ia) => format!("ix:{}", ia.index.name),
                Access::Near(na) => format!("near:{}", na.index.name),
                Access::Or(cs) => format!(
                    "or[{}]",
                    cs.iter().map(access_key).collect::<Vec<_>>().join(",")
                ),
            }
        }
        access_key(&self.access)
    }

    /// True when the plan returns documents nearest first (a `$near` ring search).
    pub fn by_distance(&self) -> bool {
        matches!(self.access, Access::Near(_))
    }

    /// True when the plan reads documents in full collection-scan fashion.
    pub fn is_collscan(&self) -> bool {
        matches!(self.access, Access::Docs { bounds: None, .. })
    }
}

fn bad_hint() -> QueryError {
    QueryError::BadValue("hint provided does not correspond to an existing index".into())
}

/// Whether two key patterns are the same (field names in order, values comparing equal).
fn same_pattern(a: &RawDocument, b: &RawDocument) -> bool {
    let mut x = a.iter();
    let mut y = b.iter();
    loop {
        match (x.next(), y.next()) {
            (None, None) => return true,
            (Some(Ok((ka, va))), Some(Ok((kb, vb)))) => {
                if ka != kb || compare_values(va, vb) != std::cmp::Ordering::Equal {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// The index a hint names (ready and not hidden), or BadValue.
fn hinted<'m>(meta: &'m CollectionMeta, hint: &Hint) -> Result<std::borrow::Cow<'m, IndexMeta>> {
    let id = IndexMeta::id_index();
    let found = match hint {
        Hint::Name(n) if n == "_id_" => return Ok(std::borrow::Cow::Owned(id)),
        Hint::Name(n) => meta.indexes.iter().find(|i| &i.name == n),
        Hint::Pattern(p) => {
            if id.key_pattern().is_some_and(|k| same_pattern(k, p)) {
                return Ok(std::borrow::Cow::Owned(id));
            }
            meta.indexes
                .iter()
                .find(|i| i.key_pattern().is_some_and(|k| same_pattern(k, p)))
        }
        _ => None,
    };
    match found {
        Some(i) if i.state == IndexState::Ready && !i.is_hidden() => {
            Ok(std::borrow::Cow::Borrowed(i))
        }
        _ => Err(bad_hint()),
    }
}

/// Whether an index over `fields` may be used by a statement modifying `m`.
fn index_allowed(idx: &IndexMeta, m: Option<&Modifies>) -> bool {
    match m {
        None => true,
        Some(_) if idx.is_id() => true,
        Some(Modifies::Everything) => false,
        Some(Modifies::Paths(paths)) => idx.fields().iter().all(|(f, _)| {
            !paths.iter().any(|p| {
                p == f || f.starts_with(&format!("{p}.")) || p.starts_with(&format!("{f}."))
            })
        }),
    }
}

/// Bounds of the filter over the `_id` index.
fn id_bounds(expr: &Expr) -> IndexBounds {
    bounds_for(expr, &[("_id".to_string(), false)], false)
}

/// True when some interval of `f` holds null or undefined (a key a missing field also gets,
/// so an entry cannot tell the value apart from a missing field).
fn admits_null(iv: &[Interval]) -> bool {
    iv.iter()
        .any(|i| i.contains(RawBsonRef::Null) || i.contains(RawBsonRef::Undefined))
}

/// The paths of the query's projection when it is an inclusion of plain fields (the parsed
/// projection's, or [`Query::inclusion`]).
fn inclusion_paths<'a>(q: &Query<'a>) -> Option<&'a [String]> {
    match q.projection {
        Some(p) => p.simple_inclusion_paths(),
        None => q.inclusion,
    }
}

/// Whether the projection's paths can be answered from entries of `idx` with these bounds.
fn coverable(idx: &IndexMeta, bounds: &IndexBounds, paths: Option<&[String]>) -> bool {
    let Some(paths) = paths else {
        return false;
    };
    if idx.multikey || idx.is_id() || paths.is_empty() {
        return false;
    }
    let bounded = paths.iter().all(|p| {
        bounds
            .fields
            .iter()
            .find(|f| &f.path == p)
            .is_some_and(|f| !f.hashed && !admits_null(&f.intervals))
    });
    if !bounded {
        return false;
    }
    let comps = idx.key_pattern().map(key_components).unwrap_or_default();
    // No component may be a prefix of another (the document could not be rebuilt).
    for a in &comps {
        for b in &comps {
            if a.path != b.path && b.path.starts_with(&format!("{}.", a.path)) {
                return false;
            }
        }
    }
    true
}

/// Encodes a `min`/`max` document as a key over `idx` (its fields must be the key pattern's,
/// in order).
fn min_max_key(idx: &IndexMeta, doc: &RawDocument) -> Result<Vec<u8>> {
    let fields = idx.fields();
    let mut out = Vec::new();
    let mut it = doc.iter();
    for (name, desc) in &fields {
        match it.next() {
            Some(Ok((k, v))) if k.as_str() == name => {
                encode_value(&mut out, v, *desc)
                    .map_err(|e| QueryError::BadValue(e.to_string()))?;
            }
            _ => return Err(min_max_mismatch()),
        }
    }
    if it.next().is_some() {
        return Err(min_max_mismatch());
    }
    Ok(out)
}

fn min_max_mismatch() -> QueryError {
    QueryError::Location(
        51174,
        "The index chosen is not consistent with min/max".into(),
    )
}

/// The plan for `min`/`max` on the hinted index: the key range `[min, max)` with the
/// filter as residual.
fn min_max_plan(meta: &CollectionMeta, q: &Query<'_>) -> Result<Plan> {
    if matches!(q.hint, Hint::None | Hint::Natural { .. }) {
        return Err(QueryError::Location(
            51173,
            "When using min()/max() a hint of which index to use must be provided".into(),
        ));
    }
    let idx = hinted(meta, q.hint)?.into_owned();
    let lo = q.min.map(|m| min_max_key(&idx, m)).transpose()?;
    let hi = q.max.map(|m| min_max_key(&idx, m)).transpose()?;
    if let (Some(l), Some(h)) = (&lo, &hi)
        && l > h
    {
        return Err(QueryError::Location(
            51175,
            "The value provided for min() does not come before the value provided for max() in the hinted index"
                .into(),
        ));
    }
    use std::ops::Bound;
    let range: KeyRange = (
        lo.map_or(Bound::Unbounded, Bound::Included),
        hi.map_or(Bound::Unbounded, Bound::Excluded),
    );
    let comps = idx.key_pattern().map(key_components).unwrap_or_default();
    let access = if idx.is_id() {
        Access::Docs {
            ranges: vec![range],
            reverse: false,
            bounds: Some(IndexBounds::full(&comps)),
        }
    } else {
        Access::Index(IndexAccess {
            bounds: IndexBounds::full(&comps),
            ranges: vec![range],
            reverse: false,
            check_entries: false,
            min_max: true,
            index: idx.clone(),
        })
    };
    Ok(Plan {
        dedupe: idx.multikey,
        access,
        residual: true,
        covered: false,
        provides_sort: false,
        count_scan: false,
    })
}

/// The plan for one index (`opts`: its [`IndexMeta::options`]), or `None` when the index does
/// not help (its leading field is not constrained and it does not provide the sort).
/// `forced`: hinted, so used anyway.
fn plan_for_index(
    idx: &IndexMeta,
    opts: &SpecOptions<'_>,
    q: &Query<'_>,
    forced: bool,
) -> Result<Option<Plan>> {
    let expr = q.filter.expr();
    if is_geo(opts) {
        return Ok(geo_plan(idx, expr));
    }
    // `built`: the bounds are the filter's own (so they know their exactness).
    let (bounds, built) = if idx.is_id() {
        (id_bounds(expr), true)
    } else {
        match bounds_for_index_with(expr, idx, opts) {
            Some(b) => (b, true),
            None if forced => {
                // A hinted sparse or partial index the filter cannot use is scanned whole, as
                // MongoDB does: the results are then only the documents it holds.
                let comps = opts.key_pattern.map(key_components).unwrap_or_default();
                (IndexBounds::full(&comps), false)
            }
            None => return Ok(None),
        }
    };
    let sort_dir = q
        .sort
        .filter(|s| !s.is_empty())
        .and_then(|s| index_sort_direction(&bounds, s.fields()));
    let leading_bounded = bounds
        .fields
        .first()
        .is_some_and(|f| !matches!(f.intervals.as_slice(), [only] if only.is_full()));
    if !forced && !leading_bounded && sort_dir.is_none() {
        return Ok(None);
    }
    let reverse = sort_dir.unwrap_or(false);
    let (ranges, exact, tight) = if built {
        bounds.planned_ranges()
    } else {
        let (ranges, _, tight) = bounds.planned_ranges();
        (ranges, bounds.is_exact_for(expr), tight)
    };
    let exact = !idx.multikey && exact;
    let all_full = bounds
        .fields
        .iter()
        .all(|f| matches!(f.intervals.as_slice(), [only] if only.is_full()));
    // Entries need checking against the bounds only when the ranges may hold others.
    let check_entries = !all_full && !tight;
    if idx.is_id() {
        return Ok(Some(Plan {
            access: Access::Docs {
                ranges,
                reverse,
                bounds: Some(bounds),
            },
            residual: !exact,
            covered: false,
            provides_sort: sort_dir.is_some(),
            dedupe: false,
            count_scan: false,
        }));
    }
    let covered =
        exact && !q.count && q.modifies.is_none() && coverable(idx, &bounds, inclusion_paths(q));
    let count_scan = q.count && exact;
    Ok(Some(Plan {
        access: Access::Index(IndexAccess {
            index: idx.clone(),
            check_entries,
            bounds,
            ranges,
            reverse,
            min_max: false,
        }),
        residual: !exact,
        covered,
        provides_sort: sort_dir.is_some(),
        dedupe: idx.multikey,
        count_scan,
    }))
}

/// The plan of a `$geoWithin`/`$geoIntersects` over a geo index: its cells' ranges (`None`
/// when no geo predicate bounds the index).
fn geo_plan(idx: &IndexMeta, expr: &Expr) -> Option<Plan> {
    Some(geo_index_plan(idx, geo_bounds(expr, idx)?))
}

/// The scan of a whole hinted geo index: every cell, the other fields bounded by the filter
/// (`None` when a partial index's filter is not implied).
fn whole_geo_plan(idx: &IndexMeta, expr: &Expr) -> Option<Plan> {
    Some(geo_index_plan(idx, base_bounds(expr, idx)?))
}

/// A geo index read within `bounds`, each document fetched once and checked against the
/// whole filter.
fn geo_index_plan(idx: &IndexMeta, bounds: IndexBounds) -> Plan {
    let ranges = bounds.key_ranges();
    Plan {
        access: Access::Index(IndexAccess {
            index: idx.clone(),
            check_entries: true,
            bounds,
            ranges,
            reverse: false,
            min_max: false,
        }),
        residual: true,
        covered: false,
        provides_sort: false,
        dedupe: true,
        count_scan: false,
    }
}

/// A rough preference among indexes for one `$or` branch: more leading fields pinned to
/// points, then more bounded fields.
fn selectivity(b: &IndexBounds) -> (usize, usize) {
    let points = b
        .fields
        .iter()
        .take_while(|f| !f.intervals.is_empty() && f.intervals.iter().all(Interval::is_point))
        .count();
    let bounded = b
        .fields
        .iter()
        .filter(|f| !matches!(f.intervals.as_slice(), [only] if only.is_full()))
        .count();
    (points, bounded)
}

/// A union of index scans for a top-level `$or` (alone or beside other predicates, which then
/// stay in the residual filter) when every branch can use an index.
fn or_plan(meta: &CollectionMeta, q: &Query<'_>) -> Option<Plan> {
    let branches: &[Expr] = match q.filter.expr() {
        Expr::Or(cs) => cs,
        Expr::And(cs) => {
            let mut ors = cs.iter().filter_map(|c| match c {
                Expr::Or(b) => Some(b.as_slice()),
                _ => None,
            });
            let first = ors.next()?;
            if ors.next().is_some() {
                return None;
            }
            first
        }
        _ => return None,
    };
    if branches.len() < 2 {
        return None;
    }
    let mut children = Vec::with_capacity(branches.len());
    for b in branches {
        let branch = Filter::from_expr(b.clone());
        let bq = Query {
            filter: &branch,
            sort: None,
            natural: None,
            projection: None,
            inclusion: None,
            count: false,
            ..*q
        };
        let mut best: Option<(Plan, (usize, usize))> = None;
        let id = IndexMeta::id_index();
        for (idx, opts) in std::iter::once((&id, id.options())).chain(usable(meta, q)) {
            if let Ok(Some(p)) = plan_for_index(idx, &opts, &bq, false) {
                let score = match &p.access {
                    Access::Index(ia) => selectivity(&ia.bounds),
                    Access::Docs {
                        bounds: Some(b), ..
                    } => selectivity(b),
                    _ => (0, 0),
                };
                if score.1 == 0 {
                    continue;
                }
                if best.as_ref().is_none_or(|(_, s)| score > *s) {
                    best = Some((p, score));
                }
            }
        }
        children.push(best?.0.access);
    }
    Some(Plan {
        access: Access::Or(children),
        residual: true,
        covered: false,
        provides_sort: false,
        dedupe: true,
        count_scan: false,
    })
}

/// The secondary indexes the planner may choose without a hint, each with its
/// [`IndexMeta::options`] (read once per index and query).
fn usable<'m>(
    meta: &'m CollectionMeta,
    q: &Query<'_>,
) -> impl Iterator<Item = (&'m IndexMeta, SpecOptions<'m>)> {
    let modifies = q.modifies.cloned();
    meta.secondary_indexes().filter_map(move |i| {
        if i.state != IndexState::Ready {
            return None;
        }
        let opts = i.options();
        (!opts.hidden && index_allowed(i, modifies.as_ref())).then_some((i, opts))
    })
}

/// The plan of a `$near` query: a geo index must exist for it (291 otherwise, as MongoDB's
/// planner says). The first ready, visible index that fits (`2d` as the leading field for
/// legacy points, `2dsphere` for GeoJSON or `$nearSphere`) answers by a ring search; when the
/// statement modifies that index's fields the documents come from a collection scan and the
/// caller orders them by [`crate::filter::Filter::near_distance`].
fn near_plan(
    meta: &CollectionMeta,
    q: &Query<'_>,
    path: &str,
    near: &Arc<NearQuery>,
) -> Result<Vec<Plan>> {
    let (two_d_ok, sphere_ok) = near.needs_2d_or_sphere();
    let found = meta.secondary_indexes().find_map(|i| {
        if i.state != IndexState::Ready || i.is_hidden() {
            return None;
        }
        let p = i.key_pattern()?;
        p.iter().flatten().enumerate().find_map(|(n, (k, v))| {
            let fits = k.as_str() == path
                && match v {
                    bson::RawBsonRef::String("2d") => two_d_ok && n == 0,
                    bson::RawBsonRef::String("2dsphere") => sphere_ok,
                    _ => false,
                };
            fits.then_some((i, n))
        })
    });
    let Some((idx, field)) = found else {
        return Err(crate::error::QueryError::Location(
            291,
            "error processing query: planner returned error :: caused by :: unable to find \
             index for $geoNear query"
                .into(),
        ));
    };
    let expr = q.filter.expr();
    let (Some(kind), Some(base), true) = (
        geo_kind(idx),
        base_bounds(expr, idx),
        index_allowed(idx, q.modifies),
    ) else {
        return Ok(vec![Plan::collscan(false)]);
    };
    Ok(vec![Plan {
        access: Access::Near(NearAccess {
            index: idx.clone(),
            kind,
            field,
            base,
            near: near.clone(),
        }),
        residual: true,
        covered: false,
        provides_sort: false,
        dedupe: false,
        count_scan: false,
    }])
}

/// Whether an unhinted B-tree index led by `lead` may be a candidate: the filter may bound
/// that field ([`may_bound`]) or the sort starts with it. When not, [`plan_for_index`] would
/// find the leading bounds full and no sort provided, and return `None` — so the index is
/// skipped without building its bounds (the same candidates, less work per query).
fn may_help(q: &Query<'_>, lead: &str) -> bool {
    q.sort
        .and_then(|s| s.fields().first())
        .is_some_and(|f| f.path == lead)
        || may_bound(q.filter.expr(), lead)
}

/// The first field of a key pattern, as the bson iterator reads it (`None` when the first
/// element is malformed); a numeric first element (ascending or descending) is read by the
/// light element walk ([`cairn_storage::elements`]) without building its value.
fn leading_field(pattern: &RawDocument) -> Option<&str> {
    use cairn_storage::elements::{Elements, Step};
    match Elements::new(pattern.as_bytes()).step() {
        Step::Element(e) if matches!(e.kind, 0x01 | 0x10 | 0x12) => std::str::from_utf8(e.key).ok(),
        Step::End => None,
        _ => pattern
            .iter()
            .next()
            .and_then(|e| e.ok())
            .map(|(k, _)| k.as_str()),
    }
}

/// A `2d`/`2dsphere` index (`opts`: its [`IndexMeta::options`]): its entries are cells, not
/// values, so it answers no ordinary predicate (and is sparse).
fn is_geo(opts: &SpecOptions<'_>) -> bool {
    opts.key_pattern
        .is_some_and(|p| crate::index::geo_keys::geo_plugin(p).is_some())
}

/// Every candidate plan for `q` over `meta`, in a stable order (the `_id` index, then the
/// secondary indexes in creation order, then a `$or` union); a collection scan when nothing
/// else applies. Errors: a bad hint (2), `min`/`max` problems (51173–51175).
pub fn candidates(meta: &CollectionMeta, q: &Query<'_>) -> Result<Vec<Plan>> {
    if let Some((path, near)) = q.filter.near() {
        return near_plan(meta, q, path.as_str(), near);
    }
    if q.min.is_some() || q.max.is_some() {
        return Ok(vec![min_max_plan(meta, q)?]);
    }
    match q.hint {
        Hint::Natural { reverse } => return Ok(vec![Plan::collscan(*reverse)]),
        Hint::Name(_) | Hint::Pattern(_) => {
            let idx = hinted(meta, q.hint)?;
            let opts = idx.options();
            if !index_allowed(&idx, q.modifies) {
                // MongoDB would honour the hint; scanning an index the update moves
                // documents in could visit them twice, so the scan stays on `_id`.
                return Ok(vec![Plan::collscan(false)]);
            }
            if is_geo(&opts) && geo_bounds(q.filter.expr(), &idx).is_none() {
                // No geo predicate bounds the hinted geo index: MongoDB scans all of it
                // (so documents without a location, which it does not hold, are not found).
                return Ok(vec![
                    whole_geo_plan(&idx, q.filter.expr()).unwrap_or_else(|| Plan::collscan(false)),
                ]);
            }
            return Ok(plan_for_index(&idx, &opts, q, true)?.into_iter().collect());
        }
        Hint::None => {}
    }
    if let Some(reverse) = q.natural {
        return Ok(vec![Plan::collscan(reverse)]);
    }
    if let Some(id) = q.filter.id_equality() {
        let key = id_key(id.as_raw_bson_ref())?;
        return Ok(vec![Plan {
            access: Access::IdPoint { key },
            residual: false,
            covered: false,
            provides_sort: true,
            dedupe: false,
            count_scan: false,
        }]);
    }
    let mut out = Vec::new();
    if may_help(q, "_id") {
        let id = IndexMeta::id_index();
        if let Some(p) = plan_for_index(&id, &id.options(), q, false)? {
            out.push(p);
        }
    }
    for (idx, opts) in usable(meta, q) {
        let lead = opts.key_pattern.and_then(leading_field);
        if let Some(lead) = lead
            && !may_help(q, lead)
            && !is_geo(&opts)
        {
            continue;
        }
        if let Some(p) = plan_for_index(idx, &opts, q, false)? {
            out.push(p);
        }
    }
    if let Some(p) = or_plan(meta, q) {
        out.push(p);
    }
    if out.is_empty() {
        out.push(Plan::collscan(false));
    }
    Ok(out)
}

/// A string identifying the query's shape for the plan cache: the filter's structure
/// (operators and paths, with values reduced to what changes plans: null, arrays, regex
/// prefixes), the sort, the projection's fields and the kind of statement.
pub fn shape(q: &Query<'_>) -> String {
    fn expr(e: &Expr, out: &mut String) {
        match e {
            Expr::And(cs) | Expr::Or(cs) | Expr::Nor(cs) => {
                out.push_str(match e {
                    Expr::And(_) => "and(",
                    Expr::Or(_) => "or(",
                    _ => "nor(",
                });
                for c in cs {
                    expr(c, out);
                    out.push(',');
                }
                out.push(')');
            }
            Expr::Not(c) => {
                out.push_str("not(");
                expr(c, out);
                out.push(')');
            }
            Expr::AlwaysTrue => out.push_str("true"),
            Expr::AlwaysFalse => out.push_str("false"),
            Expr::Extension(x) => out.push_str(x.kind.operator()),
            Expr::Path(p) => {
                out.push_str(p.path.as_str());
                out.push(':');
                match &p.pred {
                    Predicate::Cmp(op, v) => {
                        out.push_str(&format!("{op:?}"));
                        match v {
                            bson::RawBson::Null => out.push_str("null"),
                            bson::RawBson::Array(_) => out.push_str("[]"),
                            bson::RawBson::Document(_) => out.push_str("{}"),
                            _ => {}
                        }
                    }
                    Predicate::In(l) => out.push_str(&format!(
                        "in{}/{}",
                        l.len().min(2),
                        l.regexes().len().min(1)
                    )),
                    Predicate::Regex(r) => out.push_str(if r.pattern().starts_with('^') {
                        "re^"
                    } else {
                        "re"
                    }),
                    Predicate::ElemMatchObject(c) => {
                        out.push_str("em(");
                        expr(c, out);
                        out.push(')');
                    }
                    Predicate::ElemMatchValue(cs) => {
                        out.push_str("emv(");
                        for c in cs {
                            expr(c, out);
                        }
                        out.push(')');
                    }
                    other => {
                        let d = format!("{other:?}");
                        out.push_str(d.split(['(', ' ', '{']).next().unwrap_or(""));
                    }
                }
            }
        }
    }
    let mut out = String::new();
    expr(q.filter.expr(), &mut out);
    if let Some(s) = q.sort {
        out.push_str("|sort:");
        for f in s.fields() {
            out.push_str(&f.path);
            out.push(if f.ascending { '+' } else { '-' });
        }
    }
    if let Some(p) = inclusion_paths(q) {
        out.push_str("|proj:");
        out.push_str(&p.join(","));
    }
    if q.count {
        out.push_str("|count");
    }
    match q.modifies {
        Some(Modifies::Everything) => out.push_str("|replace"),
        Some(Modifies::Paths(p)) => {
            out.push_str("|update:");
            out.push_str(&p.join(","));
        }
        None => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    /// The light walk's leading field is the bson iterator's, numeric or not, malformed or not.
    #[test]
    fn leading_field_reads_as_the_iterator() {
        let by_iter = |p: &RawDocument| {
            p.iter()
                .next()
                .and_then(|e| e.ok())
                .map(|(k, _)| k.as_str().to_string())
        };
        let mut patterns = vec![
            rawdoc! {"a": 1, "b": -1},
            rawdoc! {"a.b": -1.0_f64},
            rawdoc! {"a": 1_i64},
            rawdoc! {"loc": "2dsphere", "a": 1},
            rawdoc! {"h": "hashed"},
            rawdoc! {"a": bson::Decimal128::from_bytes([0; 16])},
            rawdoc! {},
        ];
        // A key that is not UTF-8, before a number and before a string.
        for mut bytes in [
            rawdoc! {"a": 1}.into_bytes(),
            rawdoc! {"a": "x"}.into_bytes(),
        ] {
            bytes[5] = 0xFF;
            patterns.push(RawDocumentBuf::from_bytes(bytes).unwrap());
        }
        for p in &patterns {
            assert_eq!(leading_field(p).map(str::to_string), by_iter(p), "{p:?}");
        }
    }
}
