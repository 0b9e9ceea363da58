//! Snapshot history: engine snapshots kept by cluster time for `readConcern: snapshot` reads.
//!
//! A snapshot read without `atClusterTime` reads "now" and tells the client the cluster time
//! it read at; later reads of a snapshot session send that time back as `atClusterTime` and
//! must see exactly the same data. The store records, for every snapshot it hands out, the
//! range of cluster times the snapshot is exact for: from the clock's value when it was taken
//! (under the commit lock, so no commit is half-visible) up to the timestamp of the next commit
//! (exclusive), or open-ended while no commit has happened since. A read at time `T` uses the
//! entry whose range holds `T`; a `T` at or after the latest commit is served by a fresh
//! snapshot; anything else is older than the retained history (SnapshotTooOld).
//!
//! Entries live for the history window (`minSnapshotHistoryWindowInSeconds`, 300 s by default
//! as in MongoDB) after they were taken. A retained snapshot keeps the engine from discarding
//! the versions it reads, so history is only kept for times some client actually read at:
//! the store takes no snapshots on its own, and writes pay nothing while no snapshot reads
//! are in use.
//!
//! Invariants: entries are ordered by their start time and their ranges do not overlap; only
//! the newest entry may be open-ended; every method is called with the store's commit lock
//! held, so "the latest commit" cannot move underneath it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::Timestamp;

use crate::engine::Snapshot;

/// MongoDB's default `minSnapshotHistoryWindowInSeconds`.
pub const DEFAULT_WINDOW_SECS: u64 = 300;

/// A packed timestamp (seconds in the high half), ordered as MongoDB orders timestamps.
pub fn pack(t: Timestamp) -> u64 {
    (u64::from(t.time) << 32) | u64::from(t.increment)
}

fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: (v & 0xFFFF_FFFF) as u32,
    }
}

struct Entry {
    /// The first cluster time the snapshot is exact for.
    from: u64,
    /// The timestamp of the first commit after the snapshot (exclusive end), if any yet.
    until: Option<u64>,
    snap: Arc<dyn Snapshot>,
    taken: Instant,
}

/// The retained snapshots.
pub struct History {
    entries: VecDeque<Entry>,
    /// The timestamp of the latest commit (0 before the first).
    last_commit: u64,
    window_secs: Arc<AtomicU64>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("entries", &self.entries.len())
            .field("last_commit", &unpack(self.last_commit))
            .finish()
    }
}

impl History {
    /// An empty history whose window is read from `window_secs` (settable at runtime).
    pub fn new(window_secs: Arc<AtomicU64>) -> History {
        History {
            entries: VecDeque::new(),
            last_commit: 0,
            window_secs,
        }
    }

    fn expire(&mut self, now: Instant) {
        let window = Duration::from_secs(self.window_secs.load(Ordering::Relaxed));
        while let Some(e) = self.entries.front() {
            if now.duration_since(e.taken) > window || (window.is_zero() && e.until.is_some()) {
                self.entries.pop_front();
            } else {
                break;
            }
        }
    }

    /// Records a commit at `ts`: the open-ended entry, if any, ends there.
    pub fn on_commit(&mut self, ts: Timestamp) {
        let ts = pack(ts);
        self.last_commit = self.last_commit.max(ts);
        if let Some(e) = self.entries.back_mut()
            && e.until.is_none()
        {
            e.until = Some(ts);
        }
        if !self.entries.is_empty() {
            self.expire(Instant::now());
        }
    }

    /// The snapshot for reading at `at` (the clock's current value `now` when `None`), taking a
    /// new one with `take` when no retained snapshot is exact for it. Returns the snapshot and
    /// the cluster time it reads at.
    pub fn snapshot(
        &mut self,
        at: Option<Timestamp>,
        now: Timestamp,
        take: impl FnOnce() -> crate::engine::Result<Box<dyn Snapshot>>,
    ) -> crate::Result<(Arc<dyn Snapshot>, Timestamp)> {
        let instant = Instant::now();
        self.expire(instant);
        let now_p = pack(now);
        let t = match at {
            None => now_p,
            Some(t) => {
                let t = pack(t);
                if t > now_p {
                    return Err(crate::StorageError::SnapshotInFuture(format!(
                        "readConcern atClusterTime value {} is greater than the current clusterTime {}",
                        display(unpack(t)),
                        display(now)
                    )));
                }
                t
            }
        };
        if let Some(e) = self
            .entries
            .iter()
            .rev()
            .find(|e| e.from <= t && e.until.is_none_or(|u| t < u))
        {
            return Ok((e.snap.clone(), unpack(t)));
        }
        if t < self.last_commit {
            return Err(crate::StorageError::SnapshotTooOld(format!(
                "Read timestamp {} is older than the oldest available timestamp.",
                display(unpack(t))
            )));
        }
        // No commit since `t`: the present is exact for it.
        let snap: Arc<dyn Snapshot> = Arc::from(take()?);
        self.entries.push_back(Entry {
            from: self.last_commit,
            until: None,
            snap: snap.clone(),
            taken: instant,
        });
        Ok((snap, unpack(t)))
    }

    /// The packed timestamp of the latest commit (0 before the first).
    pub fn last_commit(&self) -> u64 {
        self.last_commit
    }

    /// How many snapshots are retained.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no snapshot is retained.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A timestamp as MongoDB prints it in messages: `Timestamp(secs, inc)`.
pub fn display(t: Timestamp) -> String {
    format!("Timestamp({}, {})", t.time, t.increment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::engine::memory::MemoryEngine;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    #[test]
    fn exact_ranges_and_too_old() {
        let engine = MemoryEngine::new();
        let mut h = History::new(Arc::new(AtomicU64::new(300)));
        h.on_commit(ts(10, 1));
        // Reading now (10,1) takes a snapshot exact from the last commit on.
        let (_, at) = h.snapshot(None, ts(10, 1), || engine.snapshot()).unwrap();
        assert_eq!(at, ts(10, 1));
        assert_eq!(h.len(), 1);
        // The same time again reuses it.
        h.snapshot(Some(ts(10, 1)), ts(10, 1), || panic!("no new snapshot"))
            .unwrap();
        h.on_commit(ts(10, 2));
        // Still exact for (10,1), but not for (10,2).
        h.snapshot(Some(ts(10, 1)), ts(10, 2), || panic!("no new snapshot"))
            .unwrap();
        let (_, at) = h
            .snapshot(Some(ts(10, 2)), ts(10, 2), || engine.snapshot())
            .unwrap();
        assert_eq!(at, ts(10, 2));
        assert_eq!(h.len(), 2);
        h.on_commit(ts(11, 1));
        h.on_commit(ts(11, 2));
        // (11,1) was never read at and a commit followed it: history is gone.
        let e = h
            .snapshot(Some(ts(11, 1)), ts(11, 2), || engine.snapshot())
            .err()
            .unwrap();
        assert!(matches!(e, crate::StorageError::SnapshotTooOld(_)));
        // A time before any retained snapshot is too old as well.
        assert!(matches!(
            h.snapshot(Some(ts(9, 1)), ts(11, 2), || engine.snapshot()),
            Err(crate::StorageError::SnapshotTooOld(_))
        ));
        // The future is refused.
        assert!(matches!(
            h.snapshot(Some(ts(12, 1)), ts(11, 2), || engine.snapshot()),
            Err(crate::StorageError::SnapshotInFuture(_))
        ));
    }

    #[test]
    fn window_expires_entries() {
        let engine = MemoryEngine::new();
        let window = Arc::new(AtomicU64::new(0));
        let mut h = History::new(window);
        h.on_commit(ts(10, 1));
        h.snapshot(None, ts(10, 1), || engine.snapshot()).unwrap();
        h.on_commit(ts(10, 2));
        assert!(h.is_empty());
    }
}
