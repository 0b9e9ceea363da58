//! Server-wide operation metrics: latencies by kind (with histograms), document and query
//! executor counters, cursor counters — what `serverStatus` reports as `opLatencies`,
//! `metrics.document`, `metrics.queryExecutor` and `metrics.cursor`, and what the Prometheus
//! endpoint ([`crate::metrics_http`]) exports together with the server's other counters.
//!
//! The dispatcher calls [`Metrics::finished`] once per command with its reply (a cursor
//! reply's batch size and id are the ones the reply carries, when its command wrote them
//! down, else read back from its body by [`cursor_reply`]); everything is an atomic, so
//! recording never blocks and reading never stops a request.
//!
//! Invariants: a histogram bucket array is fixed at start (MongoDB's layout for
//! `serverStatus`, Prometheus' conventional seconds for the exporter), so every scrape has
//! the same series; `moreThanOneBatch` remembers at most [`MAX_TRACKED_CURSORS`] cursor ids.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::ops::Operation;

/// Cursor ids remembered to count cursors that returned more than one batch.
pub const MAX_TRACKED_CURSORS: usize = 100_000;

/// Upper bounds (seconds) of the Prometheus latency histogram buckets.
pub const PROMETHEUS_BOUNDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// MongoDB's latency histogram lower bounds in microseconds: powers of two up to 512, then
/// each power of two and one and a half times it.
pub fn mongo_bounds() -> &'static [u64] {
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

/// The kinds `opLatencies` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `find`, `getMore`, `aggregate`, `count`, `distinct`.
    Reads,
    /// `insert`, `update`, `delete`, `findAndModify`.
    Writes,
    /// Every other command.
    Commands,
    /// `commitTransaction`, `abortTransaction`.
    Transactions,
}

impl Kind {
    /// Every kind, in `opLatencies` order.
    pub const ALL: [Kind; 4] = [
        Kind::Reads,
        Kind::Writes,
        Kind::Commands,
        Kind::Transactions,
    ];

    /// The kind of a command.
    pub fn of(command: &str) -> Kind {
        match command {
            "find" | "getMore" | "aggregate" | "count" | "distinct" => Kind::Reads,
            "insert" | "update" | "delete" | "findAndModify" => Kind::Writes,
            "commitTransaction" | "abortTransaction" => Kind::Transactions,
            _ => Kind::Commands,
        }
    }

    /// Its name in `opLatencies` (and the Prometheus `kind` label).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Reads => "reads",
            Kind::Writes => "writes",
            Kind::Commands => "commands",
            Kind::Transactions => "transactions",
        }
    }
}

/// One latency series: total microseconds, operations, and two bucket arrays.
#[derive(Debug)]
pub struct Latency {
    /// Microseconds spent.
    pub micros: AtomicU64,
    /// Operations.
    pub ops: AtomicU64,
    mongo: Vec<AtomicU64>,
    prometheus: Vec<AtomicU64>,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency {
            micros: AtomicU64::new(0),
            ops: AtomicU64::new(0),
            mongo: mongo_bounds().iter().map(|_| AtomicU64::new(0)).collect(),
            prometheus: PROMETHEUS_BOUNDS
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl Latency {
    /// Records one operation.
    pub fn record(&self, micros: u64) {
        self.micros.fetch_add(micros, Relaxed);
        self.ops.fetch_add(1, Relaxed);
        let i = mongo_bounds()
            .partition_point(|b| *b <= micros)
            .saturating_sub(1);
        if let Some(c) = self.mongo.get(i) {
            c.fetch_add(1, Relaxed);
        }
        let secs = micros as f64 / 1e6;
        let j = PROMETHEUS_BOUNDS.partition_point(|b| *b < secs);
        if let Some(c) = self.prometheus.get(j) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// MongoDB's `{[histogram,] latency, ops, queryableEncryptionLatencyMicros}`.
    pub fn document(&self, histograms: bool) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        if histograms {
            let mut h = RawArrayBuf::new();
            for (bound, c) in mongo_bounds().iter().zip(&self.mongo) {
                let n = c.load(Relaxed);
                if n > 0 {
                    h.push(rawdoc! {
                        "micros": i64::try_from(*bound).unwrap_or(i64::MAX),
                        "count": i64::try_from(n).unwrap_or(i64::MAX),
                    });
                }
            }
            d.append(bson::raw::cstr!("histogram"), h);
        }
        crate::error::append_all(
            &mut d,
            &rawdoc! {
                "latency": load(&self.micros),
                "ops": load(&self.ops),
                "queryableEncryptionLatencyMicros": 0_i64,
            },
        );
        d
    }

    /// Cumulative Prometheus buckets: `(upper bound in seconds, operations at or below it)`.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        PROMETHEUS_BOUNDS
            .iter()
            .zip(&self.prometheus)
            .map(|(b, c)| {
                total += c.load(Relaxed);
                (*b, total)
            })
            .collect()
    }
}

fn load(a: &AtomicU64) -> i64 {
    i64::try_from(a.load(Relaxed)).unwrap_or(i64::MAX)
}

/// The server's operation metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    latencies: [Latency; 4],
    /// Documents inserted.
    pub docs_inserted: AtomicU64,
    /// Documents deleted.
    pub docs_deleted: AtomicU64,
    /// Documents updated (modified).
    pub docs_updated: AtomicU64,
    /// Documents returned by queries and getMores.
    pub docs_returned: AtomicU64,
    /// Index keys examined.
    pub scanned: AtomicU64,
    /// Documents examined.
    pub scanned_objects: AtomicU64,
    /// Operations that scanned a whole collection.
    pub collection_scans: AtomicU64,
    /// Cursors opened (a query whose results did not fit one batch).
    pub cursors_opened: AtomicU64,
    /// Cursors closed by the idle timeout.
    pub cursors_timed_out: AtomicU64,
    /// Cursors that returned more than one batch.
    pub cursors_more_than_one_batch: AtomicU64,
    /// Multi-document transactions started (`startTransaction` accepted).
    pub txn_started: AtomicU64,
    /// Transactions committed (`commitTransaction` succeeded).
    pub txn_committed: AtomicU64,
    /// Transactions aborted by `abortTransaction`.
    pub txn_aborted: AtomicU64,
    continued: Mutex<HashSet<i64>>,
}

/// The batch size and id of a cursor reply (`cursor.firstBatch`/`nextBatch`, `cursor.id`).
pub fn cursor_reply(reply: &RawDocument) -> Option<(u64, i64)> {
    let Ok(Some(RawBsonRef::Document(c))) = reply.get("cursor") else {
        return None;
    };
    let batch = ["firstBatch", "nextBatch"]
        .iter()
        .find_map(|k| match c.get(k) {
            Ok(Some(RawBsonRef::Array(a))) => Some(documents_in(a)),
            _ => None,
        })?;
    Some((batch, c.get_i64("id").unwrap_or(0)))
}

/// The number of elements of a batch array, counted by the light walk over element headers
/// ([`cairn_storage::elements`]: no key or value decoded); anything it does not size falls
/// back to the BSON iterator.
fn documents_in(a: &bson::RawArray) -> u64 {
    match cairn_storage::elements::Elements::new(a.as_bytes()).count() {
        Some(n) => n as u64,
        None => a.into_iter().count() as u64,
    }
}

fn count_field(reply: &RawDocument, field: &str) -> u64 {
    match reply.get(field) {
        Ok(Some(RawBsonRef::Int32(i))) => u64::try_from(i).unwrap_or(0),
        Ok(Some(RawBsonRef::Int64(i))) => u64::try_from(i).unwrap_or(0),
        _ => 0,
    }
}

impl Metrics {
    /// The latency series of a kind.
    pub fn latency(&self, kind: Kind) -> &Latency {
        &self.latencies[kind as usize]
    }

    /// Accounts for a finished command (awaitable `hello`s, which wait by design, are left out
    /// of the latencies); `micros` is its duration ([`Operation::micros`]).
    pub fn finished(
        &self,
        op: &Operation,
        body: &crate::commands::Parsed<'_>,
        reply: Option<&crate::commands::Reply>,
        micros: u64,
    ) {
        if body.find("maxAwaitTimeMS").is_none() {
            self.latency(Kind::of(op.command_name)).record(micros);
        }
        let (keys, docs) = op.work();
        self.scanned.fetch_add(keys, Relaxed);
        self.scanned_objects.fetch_add(docs, Relaxed);
        if op.scanned_collection() {
            self.collection_scans.fetch_add(1, Relaxed);
        }
        let Some(reply) = reply else {
            return;
        };
        let (counted, reply) = (reply.cursor, reply.body.as_ref());
        if matches!(
            body.find("startTransaction"),
            Some(RawBsonRef::Boolean(true))
        ) {
            self.txn_started.fetch_add(1, Relaxed);
        }
        match op.command_name {
            "commitTransaction" => {
                self.txn_committed.fetch_add(1, Relaxed);
            }
            "abortTransaction" => {
                self.txn_aborted.fetch_add(1, Relaxed);
            }
            "insert" => {
                self.docs_inserted
                    .fetch_add(count_field(reply, "n"), Relaxed);
            }
            "delete" => {
                self.docs_deleted
                    .fetch_add(count_field(reply, "n"), Relaxed);
            }
            "update" => {
                self.docs_updated
                    .fetch_add(count_field(reply, "nModified"), Relaxed);
            }
            _ => {}
        }
        if let Some((n, id)) = counted.or_else(|| cursor_reply(reply)) {
            self.docs_returned.fetch_add(n, Relaxed);
            if op.command_name == "getMore" {
                let asked = match body.find("getMore") {
                    Some(RawBsonRef::Int64(n)) => n,
                    _ => 0,
                };
                if let Ok(mut seen) = self.continued.lock() {
                    let first = if id == 0 {
                        !seen.remove(&asked)
                    } else if seen.len() < MAX_TRACKED_CURSORS {
                        seen.insert(asked)
                    } else {
                        false
                    };
                    if first {
                        self.cursors_more_than_one_batch.fetch_add(1, Relaxed);
                    }
                }
            } else if id != 0 {
                self.cursors_opened.fetch_add(1, Relaxed);
            }
        }
    }

    /// `serverStatus.opLatencies`.
    pub fn op_latencies(&self, histograms: bool) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        for k in Kind::ALL {
            if let Ok(name) = <&bson::raw::CStr>::try_from(k.name()) {
                d.append(name, self.latency(k).document(histograms));
            }
        }
        d
    }

    /// `serverStatus.metrics.document`.
    pub fn document(&self) -> RawDocumentBuf {
        rawdoc! {
            "deleted": load(&self.docs_deleted),
            "inserted": load(&self.docs_inserted),
            "returned": load(&self.docs_returned),
            "updated": load(&self.docs_updated),
        }
    }

    /// `serverStatus.metrics.queryExecutor`.
    pub fn query_executor(&self) -> RawDocumentBuf {
        let scans = load(&self.collection_scans);
        rawdoc! {
            "collectionScans": {"nonTailable": scans, "total": scans},
            "scanned": load(&self.scanned),
            "scannedObjects": load(&self.scanned_objects),
        }
    }

    /// `serverStatus.metrics.cursor`, given the open cursors `(total, pinned, noTimeout)`.
    pub fn cursor(&self, open: (usize, usize, usize)) -> RawDocumentBuf {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        rawdoc! {
            "moreThanOneBatch": load(&self.cursors_more_than_one_batch),
            "open": {"noTimeout": n(open.2), "pinned": n(open.1), "total": n(open.0)},
            "timedOut": load(&self.cursors_timed_out),
            "totalOpened": load(&self.cursors_opened),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes_count_every_element() {
        let docs: Vec<RawDocumentBuf> = (0..5).map(|i| rawdoc! {"_id": i, "s": "x"}).collect();
        for n in 0..=docs.len() {
            let reply = crate::cursor::batch_reply("firstBatch", &docs[..n], 7, "d.c", None);
            assert_eq!(cursor_reply(&reply), Some((n as u64, 7)));
            // A reply that carries its count carries the one read back from its body.
            let token = rawdoc! {"_data": "82"};
            for (id, token, batch) in [
                (0, None, "firstBatch"),
                (7, None, "nextBatch"),
                (7, Some(token.as_ref()), "firstBatch"),
            ] {
                let counted =
                    crate::cursor::batch_reply_counted(batch, &docs[..n], token, id, "d.c", None);
                assert_eq!(counted.cursor, cursor_reply(&counted.body), "{n} {id}");
            }
        }
        // Elements other than documents (an aggregation cannot return them, but the count
        // must not depend on it) fall back to the BSON iterator.
        let mixed = rawdoc! {"cursor": {"nextBatch": [{"a": 1}, 2, "x", {}], "id": 0_i64}};
        assert_eq!(cursor_reply(&mixed), Some((4, 0)));
        assert_eq!(cursor_reply(&rawdoc! {"ok": 1}), None);
    }

    #[test]
    fn kinds() {
        assert_eq!(Kind::of("find"), Kind::Reads);
        assert_eq!(Kind::of("findAndModify"), Kind::Writes);
        assert_eq!(Kind::of("commitTransaction"), Kind::Transactions);
        assert_eq!(Kind::of("ping"), Kind::Commands);
    }

    #[test]
    fn histograms() {
        let l = Latency::default();
        l.record(0);
        l.record(3);
        l.record(1500);
        l.record(2_000_000);
        let d = l.document(true);
        assert_eq!(d.get_i64("ops").unwrap(), 4);
        assert_eq!(d.get_i64("latency").unwrap(), 2_001_503);
        let h: Vec<(i64, i64)> = d
            .get_array("histogram")
            .unwrap()
            .into_iter()
            .map(|e| {
                let e = e.unwrap();
                let e = e.as_document().unwrap();
                (e.get_i64("micros").unwrap(), e.get_i64("count").unwrap())
            })
            .collect();
        assert_eq!(h, [(0, 1), (2, 1), (1024, 1), (1572864, 1)]);
        let c = l.cumulative();
        assert_eq!(c[0], (0.0001, 2));
        assert_eq!(c.iter().find(|(b, _)| *b == 0.0025).unwrap().1, 3);
        assert_eq!(c.last().unwrap().1, 4);
    }
}
