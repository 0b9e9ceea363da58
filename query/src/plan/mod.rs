//! Query planning and execution: which index answers a query, and running the chosen plan.
//!
//! One `find` end to end:
//! 1. The command gathers a [`Query`]: the parsed filter, sort, projection, [`Hint`],
//!    `min`/`max`, and for updates what the statement [`Modifies`].
//! 2. [`candidates`] lists the plans that can answer it ([`Plan`]: an [`Access`] — a point
//!    read by `_id`, document ranges of the `_id` index or the whole collection, a secondary
//!    index scan built from [`crate::index::bounds_for_index`] (for a geo index, from the
//!    cells covering a `$geoWithin`/`$geoIntersects` region,
//!    [`crate::index::geo_bounds::geo_bounds`]), a `$near` ring search over a geo index
//!    ([`NearAccess`]), or a `$or` union — plus
//!    whether the filter must be re-checked, whether the index alone answers (covered,
//!    COUNT_SCAN) and whether the scan order is the requested sort).
//! 3. [`choose`] takes the only candidate, or the one cached for the query's [`shape`] in
//!    the [`PlanCache`], or runs a [`race`] (MongoDB's multi-planner): each candidate works
//!    in turn until one produces 101 results or finishes; the best by results per unit of
//!    work wins and is cached until the collection's indexes change. A cached plan that
//!    cannot deliver a batch within ten times the work of its winning trial is evicted and
//!    the race runs again (MongoDB's replanning).
//! 4. The winner's [`Execution`] then produces documents batch by batch from a
//!    [`Source`] (a snapshot for reads, the write transaction for updates and deletes),
//!    keeping only its position between batches; the server applies sort, skip, limit and
//!    projection on top.
//! 5. `explain` reads the same structures back ([`explain`]).
//!
//! Invariants: every plan returns the documents a collection scan returns (hinted sparse
//! indexes excepted, as in MongoDB); plans for updates never scan an index over a field the
//! update changes; nothing here holds a lock or a storage snapshot across calls.

mod cache;
mod exec;
pub mod explain;
mod planner;

use std::sync::Arc;

use bson::RawDocumentBuf;
use cairn_storage::catalog::CollectionMeta;

pub use cache::{CacheEntryInfo, PlanCache, signature};
pub use exec::{
    Execution, NearInterval, Source, Stats, TRIAL_RESULTS, TRIAL_WORKS, Trial, race, ranges_after,
    split_after,
};
pub use planner::{
    Access, Hint, IndexAccess, Modifies, NearAccess, Plan, Query, candidates, shape,
};

use crate::error::Result;
use crate::filter::Filter;

/// The plan chosen for a query, ready to run.
#[derive(Debug)]
pub struct Chosen {
    /// The winner's execution (already advanced by its trial, if it raced).
    pub exec: Execution,
    /// Documents the winner produced during its trial, to be returned first.
    pub buffered: Vec<RawDocumentBuf>,
    /// The losing trials (for `explain`).
    pub rejected: Vec<Trial>,
    /// How many candidates there were.
    pub candidates: usize,
    /// The choice came from the plan cache.
    pub from_cache: bool,
}

/// The namespace `db.coll`, spelled by hand: `format!` walks a formatter on every command
/// that names its collection's plan-cache entry or cursor.
pub fn namespace(db: &str, coll: &str) -> String {
    let mut ns = String::with_capacity(db.len() + 1 + coll.len());
    ns.push_str(db);
    ns.push('.');
    ns.push_str(coll);
    ns
}

/// Runs a piece of planning work that may be long (a race, a cached plan's trial with a
/// large budget): the caller decides where (e.g. off an async worker); it must call the
/// function it is given exactly once.
pub type Long<'a> = &'a dyn Fn(&mut dyn FnMut());

/// Most work a cached plan's trial may be granted and still count as short for [`Long`].
pub const SHORT_TRIAL_WORKS: u64 = 1000;

/// Chooses the plan for `q` (see the module documentation). `cache`: where to look up and
/// record winners and index use (`None` always races and records nothing, as `explain`
/// does). `count_only`: results are counted, not materialised.
pub fn choose(
    cache: Option<&PlanCache>,
    ns: &str,
    meta: &CollectionMeta,
    q: &Query<'_>,
    filter: &Arc<Filter>,
    src: &dyn Source,
    count_only: bool,
) -> Result<Chosen> {
    choose_with(cache, ns, meta, q, filter, src, count_only, &|f| f())
}

/// [`choose`], running the work that may be long — a race, or a cached plan's trial granted
/// more than [`SHORT_TRIAL_WORKS`] — through `long`; building the candidates, a single
/// candidate and a short cached trial run on the caller's thread.
#[allow(clippy::too_many_arguments)]
pub fn choose_with(
    cache: Option<&PlanCache>,
    ns: &str,
    meta: &CollectionMeta,
    q: &Query<'_>,
    filter: &Arc<Filter>,
    src: &dyn Source,
    count_only: bool,
    long: Long<'_>,
) -> Result<Chosen> {
    let chosen = choose_plan(cache, ns, meta, q, filter, src, count_only, long)?;
    if let Some(c) = cache {
        c.record_use(ns, chosen.exec.plan());
    }
    Ok(chosen)
}

#[allow(clippy::too_many_arguments)]
fn choose_plan(
    cache: Option<&PlanCache>,
    ns: &str,
    meta: &CollectionMeta,
    q: &Query<'_>,
    filter: &Arc<Filter>,
    src: &dyn Source,
    count_only: bool,
    long: Long<'_>,
) -> Result<Chosen> {
    let mut plans = candidates(meta, q)?;
    let n = plans.len();
    if n == 1
        && let Some(p) = plans.pop()
    {
        return Ok(Chosen {
            exec: Execution::new(Arc::new(p), filter.clone(), count_only),
            buffered: Vec::new(),
            rejected: Vec::new(),
            candidates: 1,
            from_cache: false,
        });
    }
    let shape = shape(q);
    let needs_sort = q.sort.is_some_and(|s| !s.is_empty());
    if let Some(c) = cache
        && let Some((key, works)) = c.get(ns, &shape, meta)
        && let Some(p) = plans.iter().find(|p| p.key() == key)
    {
        // MongoDB's cached plan stage: the cached plan gets ten times the work it needed in
        // its race; if it cannot produce a batch (or finish) within that, the entry is
        // evicted and the candidates race again.
        let mut exec = Execution::new(Arc::new(p.clone()), filter.clone(), count_only);
        let streams = !needs_sort || p.provides_sort;
        let target = match q.limit {
            Some(l) if streams => l.min(TRIAL_RESULTS),
            _ => TRIAL_RESULTS,
        };
        let budget = works.saturating_mul(10).max(SHORT_TRIAL_WORKS);
        let mut buffered = Vec::new();
        let mut trial = || -> Result<()> {
            while !exec.is_exhausted() && exec.stats.works() < budget {
                if streams && exec.stats.advanced >= target {
                    break;
                }
                let want = if streams {
                    usize::try_from(target - exec.stats.advanced).unwrap_or(usize::MAX)
                } else {
                    usize::MAX
                };
                buffered.extend(exec.next(src, meta, want, 16 * 1024 * 1024, 64)?);
            }
            Ok(())
        };
        if budget > SHORT_TRIAL_WORKS {
            let mut outcome = None;
            long(&mut || {
                if outcome.is_none() {
                    outcome = Some(trial());
                }
            });
            outcome.unwrap_or_else(&mut trial)?;
        } else {
            trial()?;
        }
        if exec.is_exhausted() || (streams && exec.stats.advanced >= target) {
            return Ok(Chosen {
                exec,
                buffered,
                rejected: Vec::new(),
                candidates: n,
                from_cache: true,
            });
        }
        c.evict(ns, &shape);
    }
    let mut pending = Some(plans);
    let mut run_race = || {
        race(
            pending
                .take()
                .unwrap_or_default()
                .into_iter()
                .map(Arc::new)
                .collect(),
            filter,
            src,
            meta,
            needs_sort,
            count_only,
            q.limit,
        )
    };
    let mut raced = None;
    long(&mut || {
        if raced.is_none() {
            raced = Some(run_race());
        }
    });
    let mut trials = raced.unwrap_or_else(run_race)?;
    let winner = trials.remove(0);
    if let Some(c) = cache {
        c.put(
            ns,
            &shape,
            meta,
            winner.exec.plan().key(),
            winner.exec.stats.works(),
        );
    }
    Ok(Chosen {
        exec: winner.exec,
        buffered: winner.buffered,
        rejected: trials,
        candidates: n,
        from_cache: false,
    })
}
