//! The cluster clock: one monotonic source of BSON timestamps `(seconds, increment)`.
//!
//! Every committed write gets the next timestamp *while the commit lock is held* (see
//! [`crate::store::Store`]), so the order of commit timestamps is the order of commits, and a
//! snapshot taken under the same lock together with [`Clock::last`] reads exactly the writes
//! whose timestamps are at or below it. The same clock fills empty timestamps in inserted
//! documents (MongoDB's rule) and answers `operationTime` / `$clusterTime`.
//!
//! Invariants:
//! - [`Clock::next`] returns strictly increasing values, never two equal ones, across
//!   threads;
//! - the seconds part follows the wall clock but never goes back; when the wall clock stands
//!   still the increment grows;
//! - [`Clock::advance_to`] (a client's `afterClusterTime` or gossiped `$clusterTime`) only
//!   moves the clock forward, so later commits still get larger values;
//! - a restarted process starts one second past the wall clock, so timestamps issued before
//!   the restart (within the same second) stay smaller.

use std::sync::atomic::{AtomicU64, Ordering};

use bson::Timestamp;

/// The cluster clock.
#[derive(Debug)]
pub struct Clock {
    last: AtomicU64,
}

fn pack(t: Timestamp) -> u64 {
    (u64::from(t.time) << 32) | u64::from(t.increment)
}

fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: (v & 0xFFFF_FFFF) as u32,
    }
}

fn wall_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .min(u64::from(u32::MAX))
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock starting one second past the wall clock.
    pub fn new() -> Clock {
        let secs = (wall_secs() + 1).min(u64::from(u32::MAX));
        Clock {
            last: AtomicU64::new(secs << 32),
        }
    }

    /// The next timestamp: the current second with increment 1, or the last second with the
    /// next increment when the wall clock has not moved past it.
    pub fn next(&self) -> Timestamp {
        let now = wall_secs();
        let mut cur = self.last.load(Ordering::Relaxed);
        loop {
            let (secs, inc) = (cur >> 32, cur & 0xFFFF_FFFF);
            let next = if now > secs {
                (now << 32) | 1
            } else if inc < 0xFFFF_FFFF {
                (secs << 32) | (inc + 1)
            } else {
                ((secs + 1) << 32) | 1
            };
            match self
                .last
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return unpack(next),
                Err(actual) => cur = actual,
            }
        }
    }

    /// The latest timestamp handed out (or advanced to).
    pub fn last(&self) -> Timestamp {
        unpack(self.last.load(Ordering::Acquire))
    }

    /// Moves the clock forward to `t` if it is behind; returns the clock's value afterwards.
    pub fn advance_to(&self, t: Timestamp) -> Timestamp {
        let v = pack(t);
        let prev = self.last.fetch_max(v, Ordering::AcqRel);
        unpack(prev.max(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictly_increasing() {
        let c = Clock::new();
        let mut prev = c.last();
        for _ in 0..10_000 {
            let t = c.next();
            assert!(pack(t) > pack(prev));
            prev = t;
        }
        assert_eq!(pack(c.last()), pack(prev));
    }

    #[test]
    fn advance_only_forward() {
        let c = Clock::new();
        let now = c.next();
        let far = Timestamp {
            time: now.time + 100,
            increment: 7,
        };
        assert_eq!(pack(c.advance_to(far)), pack(far));
        let back = Timestamp {
            time: now.time,
            increment: 1,
        };
        assert_eq!(pack(c.advance_to(back)), pack(far));
        let after = c.next();
        assert_eq!((after.time, after.increment), (far.time, 8));
    }

    #[test]
    fn concurrent_values_are_unique() {
        let c = std::sync::Arc::new(Clock::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || (0..5000).map(|_| pack(c.next())).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
