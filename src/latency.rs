//! Per-collection operation latencies (MongoDB's `Top`), as `$collStats: {latencyStats}`
//! reports them: for each namespace, the total latency (microseconds) and count of reads
//! (`find`, `getMore`, `aggregate`, `count`, `distinct`), writes (`insert`, `update`,
//! `delete`, `findAndModify`) and other commands naming the collection, with a histogram of
//! latencies in MongoDB's buckets.
//!
//! Invariants: recording takes one short lock and never fails; the map is bounded (cleared
//! beyond [`MAX_NAMESPACES`]).

use std::collections::HashMap;
use std::sync::Mutex;

use bson::{RawArrayBuf, RawDocumentBuf, rawdoc};

/// Most namespaces tracked.
pub const MAX_NAMESPACES: usize = 10_000;

/// Which counter an operation adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Reads.
    Read,
    /// Writes.
    Write,
    /// Other commands.
    Command,
}

impl OpKind {
    /// The counter of a command.
    pub fn of(command: &str) -> OpKind {
        match command {
            "find" | "getMore" | "aggregate" | "count" | "distinct" => OpKind::Read,
            "insert" | "update" | "delete" | "findAndModify" => OpKind::Write,
            _ => OpKind::Command,
        }
    }
}

/// Histogram bucket lower bounds in microseconds (operation_latency_histogram's layout:
/// powers of two to 1024, then 1×, 1.5× steps of powers of two).
fn bucket_bounds() -> &'static [u64] {
    static B: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        let mut v = vec![0u64, 2, 4, 8, 16, 32, 64, 128, 256, 512];
        let mut p = 1024u64;
        while p <= 1 << 40 {
            v.push(p);
            v.push(p + p / 2);
            p *= 2;
        }
        v
    })
}

#[derive(Debug, Default, Clone)]
struct Counter {
    latency: u64,
    ops: u64,
    buckets: Vec<u64>,
}

impl Counter {
    fn add(&mut self, micros: u64) {
        self.latency = self.latency.saturating_add(micros);
        self.ops += 1;
        let bounds = bucket_bounds();
        if self.buckets.is_empty() {
            self.buckets = vec![0; bounds.len()];
        }
        let i = bounds.partition_point(|b| *b <= micros).saturating_sub(1);
        if let Some(c) = self.buckets.get_mut(i) {
            *c += 1;
        }
    }

    fn document(&self, histograms: bool) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        if histograms {
            let mut h = RawArrayBuf::new();
            for (b, c) in bucket_bounds().iter().zip(&self.buckets) {
                if *c > 0 {
                    h.push(rawdoc! {"micros": *b as i64, "count": *c as i64});
                }
            }
            d.append(bson::raw::cstr!("histogram"), h);
        }
        d.append(bson::raw::cstr!("latency"), self.latency as i64);
        d.append(bson::raw::cstr!("ops"), self.ops as i64);
        d
    }
}

#[derive(Debug, Default, Clone)]
struct Entry {
    reads: Counter,
    writes: Counter,
    commands: Counter,
    transactions: Counter,
}

/// Latencies by namespace.
#[derive(Debug, Default)]
pub struct LatencyStats {
    /// Hashed by foldhash (randomly seeded): SipHash's setup costs more than the lookup, on
    /// every command.
    map: Mutex<HashMap<String, Entry, foldhash::fast::RandomState>>,
}

impl LatencyStats {
    /// Records one operation on `db.coll` (the namespace is spelled into a per-thread buffer
    /// and allocated only the first time it is seen).
    pub fn record(&self, db: &str, coll: &str, kind: OpKind, micros: u64) {
        thread_local! {
            static NS: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        NS.with_borrow_mut(|ns| {
            ns.clear();
            ns.push_str(db);
            ns.push('.');
            ns.push_str(coll);
            let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
            let e = match m.get_mut(ns.as_str()) {
                Some(e) => e,
                None => {
                    if m.len() >= MAX_NAMESPACES {
                        m.clear();
                    }
                    m.entry(ns.clone()).or_default()
                }
            };
            match kind {
                OpKind::Read => e.reads.add(micros),
                OpKind::Write => e.writes.add(micros),
                OpKind::Command => e.commands.add(micros),
            }
        });
    }

    /// `latencyStats` of `ns`: `{reads, writes, commands, transactions}`.
    pub fn document(&self, ns: &str, histograms: bool) -> RawDocumentBuf {
        let e = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(ns)
            .cloned()
            .unwrap_or_default();
        rawdoc! {
            "reads": e.reads.document(histograms),
            "writes": e.writes.document(histograms),
            "commands": e.commands.document(histograms),
            "transactions": e.transactions.document(histograms),
        }
    }
}
