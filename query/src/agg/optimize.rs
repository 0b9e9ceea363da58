//! Pipeline rewrites that never change results (a subset of MongoDB's
//! `Pipeline::optimizePipeline` / `DocumentSource::optimizeAt`), applied until none applies:
//!
//! - `$match` + `$match` → one `$match` of `{$and: [a, b]}`;
//! - `$sort` + `$match` → `$match` + `$sort`;
//! - `$addFields`/`$set`/`$unset`/`$project` + `$match`: the parts of the `$match` (its
//!   top-level conditions) that read none of the fields the stage changes move ahead of it —
//!   for an inclusion `$project`, only conditions on fields it includes as they are;
//! - `$skip` + `$skip` add, `$limit` + `$limit` take the smaller;
//! - `$sort` + `$limit` → a top-k `$sort` (the limit is absorbed);
//! - then each `$unwind` learns which top-level fields the stages after it read
//!   ([`Unwind::keep`], from their dependencies), when those are known, and builds its outputs
//!   from those alone;
//! - last, a `$lookup` followed by an `$unwind` of its `as` path absorbs the `$unwind`
//!   ([`Lookup::absorbing`], as MongoDB's `DocumentSourceLookUp::doOptimizeAt` does).
//!
//! Invariant: a rewrite is applied only when the rewritten pipeline returns exactly what the
//! original returns, in the same order; anything this module cannot analyse stays in place.

use std::sync::Arc;

use bson::{RawBsonRef, RawDocumentBuf};

use super::Pipeline;
use super::Stage;
use super::deps::Deps;
use super::stages::add_fields::AddFields;
use super::stages::limit::Limit;
use super::stages::lookup::Lookup;
use super::stages::match_::Match;
use super::stages::project::Project;
use super::stages::skip::Skip;
use super::stages::sort::Sort;
use super::stages::unset::Unset;
use super::stages::unwind::Unwind;
use crate::expr::ExprExtensions;
use crate::projection::ProjectionKind;

fn as_<T: 'static>(s: &Arc<dyn Stage>) -> Option<&T> {
    s.as_any().downcast_ref::<T>()
}

/// Optimizes a pipeline's stages.
pub(crate) fn optimize(
    mut stages: Vec<Arc<dyn Stage>>,
    ext: &ExprExtensions,
) -> Vec<Arc<dyn Stage>> {
    // Bounded: every rewrite shortens the pipeline or moves a $match towards the front.
    for _ in 0..(stages.len() * stages.len() + 8) {
        if !step(&mut stages, ext) {
            break;
        }
    }
    trim_unwinds(&mut stages);
    absorb_unwinds(&mut stages);
    stages
}

/// Lets each `$lookup` absorb an `$unwind` of its `as` path right after it.
fn absorb_unwinds(stages: &mut Vec<Arc<dyn Stage>>) {
    let mut i = 0;
    while i + 1 < stages.len() {
        let fused = match (stages.get(i), stages.get(i + 1)) {
            (Some(a), Some(b)) => match (as_::<Lookup>(a), as_::<Unwind>(b)) {
                (Some(l), Some(u)) => l.absorbing(u),
                _ => None,
            },
            _ => None,
        };
        if let Some(l) = fused {
            stages.splice(i..i + 2, [Arc::new(l) as Arc<dyn Stage>]);
        }
        i += 1;
    }
}

/// Gives each `$unwind` the top-level fields the stages after it read, when they do not need
/// whole documents (see [`Unwind::keep`]).
fn trim_unwinds(stages: &mut [Arc<dyn Stage>]) {
    for i in 0..stages.len() {
        let Some(u) = stages.get(i).and_then(|s| as_::<Unwind>(s)) else {
            continue;
        };
        if u.keep.is_some() {
            continue;
        }
        let rest = stages.get(i + 1..).unwrap_or_default().to_vec();
        let deps = Pipeline::from_stages(rest).deps();
        if deps.whole {
            continue;
        }
        let mut top: Vec<String> = deps
            .minimal_paths()
            .iter()
            .map(|p| p.split('.').next().unwrap_or(p).to_string())
            .collect();
        top.sort();
        top.dedup();
        let trimmed: Arc<dyn Stage> = Arc::new(u.keeping(top));
        if let Some(slot) = stages.get_mut(i) {
            *slot = trimmed;
        }
    }
}

/// What a document-transforming stage changes.
enum Changes {
    /// These paths (and everything under them) may change.
    Paths(Vec<String>),
    /// Only these paths survive, unchanged (an inclusion projection of plain fields).
    Keeps(Vec<String>),
}

fn changes(s: &Arc<dyn Stage>) -> Option<Changes> {
    if let Some(a) = as_::<AddFields>(s) {
        return Some(Changes::Paths(a.top_fields().map(str::to_string).collect()));
    }
    if let Some(u) = as_::<Unset>(s) {
        return Some(Changes::Paths(u.removed().to_vec()));
    }
    if let Some(p) = as_::<Project>(s) {
        let mut plain = Vec::new();
        let mut changed = Vec::new();
        let mut id_excluded = false;
        for el in p.doc.iter() {
            let Ok((k, v)) = el else { return None };
            let k = k.as_str().to_string();
            let truth = match v {
                RawBsonRef::Boolean(b) => Some(b),
                RawBsonRef::Int32(i) => Some(i != 0),
                RawBsonRef::Int64(i) => Some(i != 0),
                RawBsonRef::Double(d) => Some(d != 0.0),
                _ => None,
            };
            match truth {
                Some(true) => plain.push(k),
                Some(false) if k == "_id" => id_excluded = true,
                Some(false) => changed.push(k),
                None => changed.push(k),
            }
        }
        return Some(match p.projection.kind() {
            ProjectionKind::Exclusion => {
                if id_excluded {
                    changed.push("_id".into());
                }
                Changes::Paths(changed)
            }
            ProjectionKind::Inclusion => {
                if !id_excluded
                    && !plain.iter().any(|k| k == "_id")
                    && !changed.iter().any(|k| k == "_id")
                {
                    plain.push("_id".into());
                }
                Changes::Keeps(plain)
            }
        });
    }
    None
}

fn overlaps(a: &str, b: &str) -> bool {
    let prefix =
        |p: &str, q: &str| q == p || (q.starts_with(p) && q.as_bytes().get(p.len()) == Some(&b'.'));
    prefix(a, b) || prefix(b, a)
}

/// Whether a `$match` condition reading `deps` gives the same answer before the stage.
fn independent(deps: &Deps, ch: &Changes) -> bool {
    if deps.whole {
        return false;
    }
    match ch {
        Changes::Paths(ps) => deps
            .fields
            .iter()
            .all(|f| ps.iter().all(|p| !overlaps(f, p))),
        Changes::Keeps(ks) => deps.fields.iter().all(|f| {
            ks.iter().any(|k| {
                f == k || (f.starts_with(k.as_str()) && f.as_bytes().get(k.len()) == Some(&b'.'))
            })
        }),
    }
}

fn new_match(doc: RawDocumentBuf, ext: &ExprExtensions) -> Option<Arc<dyn Stage>> {
    Match::from_doc(&doc, ext)
        .ok()
        .map(|m| Arc::new(m) as Arc<dyn Stage>)
}

/// One rewrite; false when none applies.
fn step(stages: &mut Vec<Arc<dyn Stage>>, ext: &ExprExtensions) -> bool {
    for i in 0..stages.len().saturating_sub(1) {
        let (Some(a), Some(b)) = (stages.get(i), stages.get(i + 1)) else {
            return false;
        };
        // $match + $match.
        if let (Some(m1), Some(m2)) = (as_::<Match>(a), as_::<Match>(b)) {
            let mut arr = bson::RawArrayBuf::new();
            arr.push(m1.doc.clone());
            arr.push(m2.doc.clone());
            let mut d = RawDocumentBuf::new();
            d.append(bson::raw::cstr!("$and"), arr);
            if let Some(m) = new_match(d, &m1.ext) {
                stages.splice(i..i + 2, [m]);
                return true;
            }
            continue;
        }
        // $sort + $match.
        if as_::<Sort>(a).is_some_and(|s| s.limit.is_none()) && as_::<Match>(b).is_some() {
            stages.swap(i, i + 1);
            return true;
        }
        // $skip + $skip, $limit + $limit.
        if let (Some(s1), Some(s2)) = (as_::<Skip>(a), as_::<Skip>(b)) {
            let n = s1.n.saturating_add(s2.n);
            stages.splice(i..i + 2, [Arc::new(Skip { n }) as Arc<dyn Stage>]);
            return true;
        }
        if let (Some(l1), Some(l2)) = (as_::<Limit>(a), as_::<Limit>(b)) {
            let n = l1.n.min(l2.n);
            stages.splice(i..i + 2, [Arc::new(Limit { n }) as Arc<dyn Stage>]);
            return true;
        }
        // $sort + $limit → top-k.
        if let (Some(s), Some(l)) = (as_::<Sort>(a), as_::<Limit>(b)) {
            let mut s = s.clone();
            s.limit = Some(s.limit.map_or(l.n, |k| k.min(l.n)));
            stages.splice(i..i + 2, [Arc::new(s) as Arc<dyn Stage>]);
            return true;
        }
        // Transform + $match: move the independent conditions ahead.
        if let (Some(ch), Some(m)) = (changes(a), as_::<Match>(b)) {
            let mut ahead = RawDocumentBuf::new();
            let mut behind = RawDocumentBuf::new();
            for el in m.doc.iter() {
                let Ok((k, v)) = el else {
                    return false;
                };
                let mut one = RawDocumentBuf::new();
                one.append(k, v);
                let mut d = Deps::default();
                d.add_filter(&one, &m.ext);
                if independent(&d, &ch) {
                    ahead.append(k, v);
                } else {
                    behind.append(k, v);
                }
            }
            if ahead.is_empty() {
                continue;
            }
            let Some(first) = new_match(ahead, &m.ext) else {
                continue;
            };
            let transform = Arc::clone(a);
            let mut replacement = vec![first, transform];
            if !behind.is_empty() {
                match new_match(behind, &m.ext) {
                    Some(rest) => replacement.push(rest),
                    None => continue,
                }
            }
            stages.splice(i..i + 2, replacement);
            return true;
        }
    }
    let _ = ext;
    false
}
