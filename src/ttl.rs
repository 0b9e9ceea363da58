//! The TTL monitor: deletes documents whose TTL index date has expired.
//!
//! A TTL index is a ready, single-field ascending or descending index with
//! `expireAfterSeconds` (compound and hashed indexes ignore the option, as in MongoDB; the
//! `_id_` index cannot have it). Every `--ttl-monitor-sleep-secs` seconds a pass looks at
//! each such index and deletes the documents with an entry dated before
//! `now - expireAfterSeconds`: for an array of dates the earliest one counts, which is what
//! "any entry is old enough" gives on a multikey index; non-date values never expire.
//!
//! One pass, end to end: [`run`] sleeps, then [`pass`] walks the catalog; for each TTL index
//! [`expire_index`] computes the entry range of dates older than the cutoff
//! ([`expired_range`]: the date tag up to `E(cutoff)`, or its byte-inverted mirror for a
//! descending index) and deletes in chunks of [`CHUNK`] documents, each chunk one write
//! transaction that re-reads the collection's metadata (a drop or index change in between
//! simply ends the work) and goes through `WriteTxn::delete_by_key`, so secondary indexes
//! and statistics stay exact. Invariants: a pass never holds a transaction across chunks;
//! it stops early when shutdown begins; storage work runs on the blocking pool, never on an
//! async worker. Counters: `serverStatus.metrics.ttl.{deletedDocuments, passes}`.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_storage::index::{IndexMeta, IndexState};
use cairn_storage::{Durability, StorageError, Store};
use tracing::{debug, warn};

use crate::state::ServerState;

/// Documents deleted per write transaction.
pub const CHUNK: usize = 500;

/// `serverStatus.metrics.ttl`.
#[derive(Debug, Default)]
pub struct TtlCounters {
    /// Documents deleted by the monitor.
    pub deleted_documents: AtomicI64,
    /// Completed passes.
    pub passes: AtomicI64,
}

/// The BSON date tag of the key encoding (see `cairn_storage::keys`).
const DATE_TAG: u8 = 0x6E;

/// The TTL of `idx` if the monitor should act on it: ready, not `_id_`, one field, ordered
/// ascending or descending (not hashed or another special type).
pub fn ttl_of(idx: &IndexMeta) -> Option<(i64, bool)> {
    if idx.is_id() || idx.state != IndexState::Ready {
        return None;
    }
    let secs = idx.expire_after_seconds()?;
    let pattern = idx.key_pattern()?;
    let mut fields = pattern.iter();
    let (_, dir) = fields.next()?.ok()?;
    if fields.next().is_some() {
        return None;
    }
    let descending = match dir {
        bson::RawBsonRef::Int32(n) => n < 0,
        bson::RawBsonRef::Int64(n) => n < 0,
        bson::RawBsonRef::Double(n) => n < 0.0,
        bson::RawBsonRef::Decimal128(_) => false,
        _ => return None,
    };
    Some((secs, descending))
}

/// The entry range holding every date before `cutoff_ms`, for an index whose only field is
/// ascending or (`descending`) byte-inverted. Entries are `K E(_id)` and a date's `K` has
/// a fixed length, so an entry is in the range exactly when its date is older than the
/// cutoff.
pub fn expired_range(cutoff_ms: i64, descending: bool) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let cut = cairn_storage::keys::encode_to_vec(
        bson::RawBsonRef::DateTime(bson::DateTime::from_millis(cutoff_ms)),
        false,
    )
    .unwrap_or_else(|_| vec![DATE_TAG]);
    if descending {
        // ~E(d) > ~E(cutoff) for every older date; `0xFF` follows every `~E(cutoff) E(_id)`
        // entry because no encoded value starts with 0xFF.
        let mut lo: Vec<u8> = cut.iter().map(|b| !b).collect();
        lo.push(0xFF);
        (Bound::Included(lo), Bound::Excluded(vec![!DATE_TAG + 1]))
    } else {
        (Bound::Included(vec![DATE_TAG]), Bound::Excluded(cut))
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Deletes the expired documents of one TTL index; returns how many went.
pub fn expire_index(
    store: &Store,
    db: &str,
    coll: &str,
    index: &str,
    now_ms: i64,
    stop: &dyn Fn() -> bool,
) -> Result<u64, StorageError> {
    let mut total = 0u64;
    loop {
        if stop() {
            return Ok(total);
        }
        let (deleted, more) = store.write(Durability::Buffered, |tx| {
            let Some(meta) = tx.collection(db, coll)? else {
                return Ok::<_, StorageError>((0, false));
            };
            let Some(idx) = meta.index(index) else {
                return Ok((0, false));
            };
            let Some((secs, descending)) = ttl_of(idx) else {
                return Ok((0, false));
            };
            let cutoff = now_ms.saturating_sub(secs.saturating_mul(1000));
            let range = expired_range(cutoff, descending);
            let hits = tx.index_scan(idx, std::slice::from_ref(&range), false, CHUNK)?;
            let more = hits.len() == CHUNK;
            let mut deleted = 0u64;
            let mut seen = std::collections::HashSet::new();
            for h in &hits {
                if seen.insert(h.doc_key().to_vec()) && tx.delete_by_key(&meta, h.doc_key())? {
                    deleted += 1;
                }
            }
            Ok((deleted, more))
        })?;
        total += deleted;
        if !more {
            return Ok(total);
        }
    }
}

/// One pass over every TTL index; returns the documents deleted.
pub fn pass(state: &ServerState) -> u64 {
    let now = now_ms();
    let catalog = state.store.catalog();
    let mut deleted = 0;
    for meta in catalog.all() {
        for idx in meta.secondary_indexes() {
            if ttl_of(idx).is_none() {
                continue;
            }
            let stop = || state.is_shutting_down();
            match expire_index(&state.store, &meta.db, &meta.name, &idx.name, now, &stop) {
                Ok(n) => {
                    deleted += n;
                    state
                        .ttl
                        .deleted_documents
                        .fetch_add(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
                    if n > 0 {
                        debug!(id = 5479200, ns = %meta.namespace(), index = %idx.name,
                               numDeleted = n, "Deleted expired documents using index");
                    }
                }
                Err(e) => {
                    warn!(id = 22543, ns = %meta.namespace(), index = %idx.name, error = %e,
                          "TTL deletion failed; will retry on the next pass");
                }
            }
        }
    }
    state.ttl.passes.fetch_add(1, Ordering::Relaxed);
    deleted
}

/// Runs passes every `--ttl-monitor-sleep-secs` seconds until shutdown (not at all when 0).
pub async fn run(state: Arc<ServerState>) {
    let secs = state.config.ttl_monitor_sleep_secs;
    if secs == 0 {
        return;
    }
    let mut shutdown = state.watch_shutdown();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(secs)) => {}
            _ = shutdown.changed() => return,
        }
        if state.is_shutting_down() {
            return;
        }
        let s = state.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || pass(&s)).await {
            warn!(error = %e, "TTL pass failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ms: i64, descending: bool) -> Vec<u8> {
        let mut k = cairn_storage::keys::encode_to_vec(
            bson::RawBsonRef::DateTime(bson::DateTime::from_millis(ms)),
            descending,
        )
        .unwrap();
        k.extend(cairn_storage::keys::encode_to_vec(bson::RawBsonRef::Int32(7), false).unwrap());
        k
    }

    fn contains(r: &(Bound<Vec<u8>>, Bound<Vec<u8>>), k: &[u8]) -> bool {
        let above = match &r.0 {
            Bound::Included(lo) => k >= lo.as_slice(),
            Bound::Excluded(lo) => k > lo.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match &r.1 {
            Bound::Included(hi) => k <= hi.as_slice(),
            Bound::Excluded(hi) => k < hi.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }

    #[test]
    fn range_holds_exactly_the_older_dates() {
        for desc in [false, true] {
            let r = expired_range(1_000_000, desc);
            for (ms, expired) in [
                (i64::MIN, true),
                (-5, true),
                (999_999, true),
                (1_000_000, false),
                (1_000_001, false),
                (i64::MAX, false),
            ] {
                assert_eq!(contains(&r, &key(ms, desc)), expired, "{ms} desc={desc}");
            }
            // Non-dates never expire.
            for v in [
                bson::RawBsonRef::Int32(1),
                bson::RawBsonRef::String("x"),
                bson::RawBsonRef::Null,
                bson::RawBsonRef::Timestamp(bson::Timestamp {
                    time: 1,
                    increment: 1,
                }),
            ] {
                let k = cairn_storage::keys::encode_to_vec(v, desc).unwrap();
                assert!(!contains(&r, &k), "{v:?} desc={desc}");
            }
        }
    }
}
