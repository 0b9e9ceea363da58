//! The plan cache: which candidate won the race for a query shape, so later queries of the
//! same shape skip the race.
//!
//! Invariants: an entry is only used while the collection's indexes are exactly those it
//! was chosen among (a signature of names, states, hidden and multikey flags), so any index
//! change invalidates it; the cache is bounded ([`MAX_ENTRIES`], cleared when full); a lock
//! is held only for map operations, never across planning or storage work.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use cairn_storage::catalog::CollectionMeta;

type Fold = foldhash::fast::RandomState;

/// Most entries kept.
pub const MAX_ENTRIES: usize = 5000;

#[derive(Debug, Clone)]
struct Entry {
    signature: u64,
    plan_key: String,
    works: u64,
}

/// Winning plans by namespace and query shape.
#[derive(Debug, Default)]
pub struct PlanCache {
    entries: Mutex<HashMap<(String, String), Entry>>,
    /// Per namespace and index name (`$collscan` for collection scans): how many chosen
    /// plans used it, and since when (milliseconds since the epoch).
    usage: Mutex<Usage>,
}

/// Index use by namespace, then index name (looked up by `&str`, so counting a use of a known
/// index allocates nothing; foldhash, as every chosen plan counts its use), with the number
/// of entries.
#[derive(Debug, Default)]
struct Usage {
    by_ns: HashMap<String, HashMap<String, (u64, i64), Fold>, Fold>,
    entries: usize,
}

/// A cache entry as `$planCacheStats` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntryInfo {
    /// The query shape.
    pub shape: String,
    /// The cached plan's key (its access path and indexes).
    pub plan_key: String,
    /// Work the plan did in its winning trial.
    pub works: u64,
}

/// A signature of a collection's index set as the planner sees it.
pub fn signature(meta: &CollectionMeta) -> u64 {
    let mut h = DefaultHasher::new();
    meta.id.hash(&mut h);
    for i in &meta.indexes {
        i.name.hash(&mut h);
        i.spec.as_bytes().hash(&mut h);
        (i.state == cairn_storage::index::IndexState::Ready).hash(&mut h);
        i.multikey.hash(&mut h);
    }
    h.finish()
}

impl PlanCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached plan key and its trial works for `shape` over `meta`, if still valid.
    pub fn get(&self, ns: &str, shape: &str, meta: &CollectionMeta) -> Option<(String, u64)> {
        let sig = signature(meta);
        let key = (ns.to_string(), shape.to_string());
        let mut map = self.lock();
        match map.get(&key) {
            Some(e) if e.signature == sig => Some((e.plan_key.clone(), e.works)),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Records the winner for `shape`.
    pub fn put(&self, ns: &str, shape: &str, meta: &CollectionMeta, plan_key: String, works: u64) {
        let mut map = self.lock();
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(
            (ns.to_string(), shape.to_string()),
            Entry {
                signature: signature(meta),
                plan_key,
                works,
            },
        );
    }

    /// Forgets the entry for `shape` (its plan did much worse than in its trial).
    pub fn evict(&self, ns: &str, shape: &str) {
        self.lock().remove(&(ns.to_string(), shape.to_string()));
    }

    /// Forgets every entry of a namespace (`planCacheClear`).
    pub fn clear_namespace(&self, ns: &str) -> usize {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|(n, _), _| n != ns);
        before - map.len()
    }

    /// The entries of a namespace, by shape.
    pub fn entries_for(&self, ns: &str) -> Vec<CacheEntryInfo> {
        let mut v: Vec<CacheEntryInfo> = self
            .lock()
            .iter()
            .filter(|((n, _), _)| n == ns)
            .map(|((_, shape), e)| CacheEntryInfo {
                shape: shape.clone(),
                plan_key: e.plan_key.clone(),
                works: e.works,
            })
            .collect();
        v.sort_by(|a, b| a.shape.cmp(&b.shape));
        v
    }

    /// Counts one use of each index of a chosen plan (`$indexStats` accesses), and of a
    /// collection scan (`$collStats` queryExecStats).
    pub fn record_use(&self, ns: &str, plan: &super::Plan) {
        let mut u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        used_by(&plan.access, &mut |name| {
            if let Some(e) = u.by_ns.get_mut(ns).and_then(|m| m.get_mut(name)) {
                e.0 += 1;
                return;
            }
            if u.entries >= MAX_ENTRIES {
                u.by_ns.clear();
                u.entries = 0;
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            u.by_ns
                .entry(ns.to_string())
                .or_default()
                .insert(name.to_string(), (1, now));
            u.entries += 1;
        });
    }

    /// Takes back one [`PlanCache::record_use`] of `plan` (a use by an attempt that was
    /// abandoned and rerun, so the rerun's use is the only one counted).
    pub fn forget_use(&self, ns: &str, plan: &super::Plan) {
        let mut u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        used_by(&plan.access, &mut |name| {
            if let Some(e) = u.by_ns.get_mut(ns).and_then(|m| m.get_mut(name)) {
                e.0 = e.0.saturating_sub(1);
            }
        });
    }

    /// Uses of an index (or `$collscan`) of a namespace and since when (epoch ms).
    pub fn usage(&self, ns: &str, index: &str) -> Option<(u64, i64)> {
        let u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        u.by_ns.get(ns).and_then(|m| m.get(index)).copied()
    }

    /// Number of entries for a namespace.
    pub fn len_for(&self, ns: &str) -> usize {
        self.lock().keys().filter(|(n, _)| n == ns).count()
    }
}

/// Calls `f` with the name of each index a plan's access uses (`_id_` for `_id` reads,
/// `$collscan` for a collection scan), as [`PlanCache::record_use`] counts them.
fn used_by(a: &super::Access, f: &mut dyn FnMut(&str)) {
    match a {
        super::Access::Eof => {}
        super::Access::IdPoint { .. }
        | super::Access::Docs {
            bounds: Some(_), ..
        } => f("_id_"),
        super::Access::Docs { bounds: None, .. } => f("$collscan"),
        super::Access::Index(ia) => f(&ia.index.name),
        super::Access::Near(na) => f(&na.index.name),
        super::Access::Or(cs) => cs.iter().for_each(|c| used_by(c, f)),
    }
}
