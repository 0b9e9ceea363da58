//! Blocking sort for query execution: a bounded top-k heap when a limit is given, a memory
//! limit with MongoDB's QueryExceededMemoryLimitNoDiskUseAllowed (292) error, and external
//! sorting (sorted runs spilled to temporary files, then a k-way merge) when disk use is
//! allowed (src/mongo/db/sorter/sorter.cpp, src/mongo/db/exec/sort_executor.cpp).
//!
//! Invariants:
//! - the output is exactly the input ordered by `(sort key, arrival order)`: ties keep the
//!   order in which documents were pushed (a stable sort), in memory and across spills alike;
//! - with `limit = Some(k)` at most `k` documents are kept in memory (O(k) memory) and at most
//!   `k` are returned; `Some(0)` returns nothing (callers map MongoDB's "limit 0 = no limit"
//!   to `None`);
//! - the buffered bytes (document bytes + key bytes + a fixed per-entry overhead) never stay
//!   above `memory_limit_bytes` after a successful `push`: exceeding it either spills (disk use
//!   allowed) or fails with code 292 (`Sort exceeded memory limit of N bytes, but did not opt
//!   in to external sorting.`, the text MongoDB puts after "Executor error during find
//!   command :: caused by :: ");
//! - spill files are anonymous temporary files (`tempfile::tempfile_in`): they have no name
//!   on disk once created and vanish when the [`Sorter`] or its [`SortedDocs`] is dropped, or
//!   the process dies;
//! - never panics; I/O failures surface as `QueryError::Storage` (engine I/O error) and
//!   unreadable spill data as `StorageError::Corrupt`.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use bson::raw::{RawArrayBuf, RawBson, RawDocumentBuf};
use cairn_storage::StorageError;
use cairn_storage::engine::EngineError;

use super::{SortKey, SortSpec};
use crate::error::{QueryError, Result};

/// MongoDB's default `internalQueryMaxBlockingSortMemoryUsageBytes`: 100 MiB.
pub const DEFAULT_MEMORY_LIMIT_BYTES: usize = 100 * 1024 * 1024;

/// Bytes charged per buffered document on top of its BSON and key bytes.
const ENTRY_OVERHEAD: usize = 64;

/// Largest record accepted when reading a spill file back (a corrupt length guard).
const MAX_SPILLED_RECORD: usize = 64 * 1024 * 1024;

/// What a sort did (for explain's `usedDisk`, `spills`, `totalDataSizeSorted`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SortStats {
    /// Number of sorted runs written to disk.
    pub spills: usize,
    /// Bytes of documents pushed (BSON bytes).
    pub total_data_size: usize,
    /// Documents pushed.
    pub docs_pushed: usize,
    /// The most bytes buffered in memory at once.
    pub peak_memory: usize,
}

impl SortStats {
    /// True when at least one run was spilled (explain's `usedDisk`).
    pub fn used_disk(&self) -> bool {
        self.spills > 0
    }
}

/// One buffered document with its key and arrival number.
struct Entry {
    key: SortKey,
    seq: u64,
    doc: RawDocumentBuf,
}

impl Entry {
    fn size(&self) -> usize {
        self.doc.as_bytes().len() + self.key.approximate_size() + ENTRY_OVERHEAD
    }

    fn cmp_pos(&self, key: &SortKey, seq: u64) -> Ordering {
        self.key.cmp(key).then(self.seq.cmp(&seq))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> Ordering {
        self.cmp_pos(&other.key, other.seq)
    }
}

/// A sorted run on disk.
struct Run {
    file: File,
    len: usize,
}

/// Sorts documents pushed one at a time (see the module docs).
pub struct Sorter {
    spec: SortSpec,
    limit: Option<usize>,
    memory_limit: usize,
    allow_disk_use: bool,
    spill_dir: Option<PathBuf>,
    next_seq: u64,
    /// Unbounded mode: everything pushed since the last spill.
    buffer: Vec<Entry>,
    /// Top-k mode: the best `k` since the last spill (a max-heap: the worst on top).
    heap: BinaryHeap<Entry>,
    mem: usize,
    runs: Vec<Run>,
    /// Top-k mode: a full spilled run's worst entry; anything not better is dropped.
    cutoff: Option<(SortKey, u64)>,
    stats: SortStats,
}

impl Sorter {
    /// A sorter for `spec`. `limit`: keep only the first `k` documents (top-k). Spill files go
    /// to `spill_dir`, or the system temporary directory when `None`.
    pub fn new(
        spec: SortSpec,
        limit: Option<usize>,
        memory_limit_bytes: usize,
        allow_disk_use: bool,
        spill_dir: Option<PathBuf>,
    ) -> Sorter {
        Sorter {
            spec,
            limit,
            memory_limit: memory_limit_bytes,
            allow_disk_use,
            spill_dir,
            next_seq: 0,
            buffer: Vec::new(),
            heap: BinaryHeap::new(),
            mem: 0,
            runs: Vec::new(),
            cutoff: None,
            stats: SortStats::default(),
        }
    }

    /// The sort pattern.
    pub fn spec(&self) -> &SortSpec {
        &self.spec
    }

    /// What the sort did so far.
    pub fn stats(&self) -> SortStats {
        self.stats
    }

    /// Adds a document. Fails when its sort key cannot be computed (parallel arrays), when the
    /// memory limit is exceeded without disk use (292), or on spill I/O errors.
    pub fn push(&mut self, doc: RawDocumentBuf) -> Result<()> {
        if self.beaten(&doc) {
            // Top-k with a full heap and a key no better than its worst: dropped, as below,
            // but without building the key.
            self.next_seq += 1;
            self.stats.docs_pushed += 1;
            self.stats.total_data_size += doc.as_bytes().len();
            return Ok(());
        }
        let key = self.spec.key(&doc)?;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.stats.docs_pushed += 1;
        self.stats.total_data_size += doc.as_bytes().len();
        let entry = Entry { key, seq, doc };
        match self.limit {
            Some(0) => return Ok(()),
            Some(k) => {
                if let Some((ck, cs)) = &self.cutoff
                    && entry.cmp_pos(ck, *cs) != Ordering::Less
                {
                    return Ok(());
                }
                if self.heap.len() >= k {
                    match self.heap.peek() {
                        Some(worst) if entry.cmp(worst) == Ordering::Less => {
                            if let Some(w) = self.heap.pop() {
                                self.mem = self.mem.saturating_sub(w.size());
                            }
                        }
                        _ => return Ok(()),
                    }
                }
                self.mem += entry.size();
                self.heap.push(entry);
            }
            None => {
                self.mem += entry.size();
                self.buffer.push(entry);
            }
        }
        self.stats.peak_memory = self.stats.peak_memory.max(self.mem);
        if self.mem > self.memory_limit {
            if !self.allow_disk_use {
                return Err(memory_limit_error(self.memory_limit));
            }
            self.spill()?;
        }
        Ok(())
    }

    /// True when top-k's heap is full and `doc`'s key, read in place, is not below its worst
    /// entry's: [`Sorter::push`] would drop it (a later arrival loses ties). False when the
    /// key cannot be read in place (paths, arrays: `push` then builds it).
    fn beaten(&self, doc: &bson::RawDocument) -> bool {
        let Some(k) = self.limit else {
            return false;
        };
        if k == 0 || self.heap.len() < k {
            return false;
        }
        let Some(worst) = self.heap.peek() else {
            return false;
        };
        self.spec
            .compare_with_key(doc, &worst.key)
            .is_some_and(|c| c != Ordering::Less)
    }

    /// Takes the in-memory entries, sorted.
    fn take_sorted(&mut self) -> Vec<Entry> {
        let mut v = if self.limit.is_some() {
            std::mem::take(&mut self.heap).into_vec()
        } else {
            std::mem::take(&mut self.buffer)
        };
        v.sort_unstable();
        self.mem = 0;
        v
    }

    /// Writes the in-memory entries as one sorted run.
    fn spill(&mut self) -> Result<()> {
        let entries = self.take_sorted();
        if entries.is_empty() {
            return Ok(());
        }
        let dir = self.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
        let file = tempfile::tempfile_in(&dir).map_err(|e| {
            io_error(&format!(
                "could not create a sort spill file in {}",
                dir.display()
            ))(e)
        })?;
        let mut w = BufWriter::new(file);
        for e in &entries {
            write_entry(&mut w, e)?;
        }
        let mut file = w
            .into_inner()
            .map_err(|e| io_error("error writing a sort spill file")(e.into_error()))?;
        file.seek(SeekFrom::Start(0))
            .map_err(io_error("error rewinding a sort spill file"))?;
        if let (Some(k), Some(last)) = (self.limit, entries.last())
            && entries.len() >= k
        {
            let better = match &self.cutoff {
                None => true,
                Some((ck, cs)) => last.cmp_pos(ck, *cs) == Ordering::Less,
            };
            if better {
                self.cutoff = Some((last.key.clone(), last.seq));
            }
        }
        self.runs.push(Run {
            file,
            len: entries.len(),
        });
        self.stats.spills += 1;
        Ok(())
    }

    /// Ends input and returns the documents in sorted order.
    pub fn finish(mut self) -> Result<SortedDocs> {
        let memory = self.take_sorted();
        let remaining = self.limit.unwrap_or(usize::MAX);
        if self.runs.is_empty() {
            return Ok(SortedDocs {
                inner: Inner::Memory(memory.into_iter()),
                remaining,
                stats: self.stats,
                failed: false,
            });
        }
        let mut sources = Vec::with_capacity(self.runs.len() + 1);
        for run in std::mem::take(&mut self.runs) {
            sources.push(Source::File {
                reader: BufReader::new(run.file),
                left: run.len,
            });
        }
        sources.push(Source::Memory(memory.into_iter()));
        let mut merge = Merge {
            spec: self.spec.clone(),
            sources,
            heads: BinaryHeap::new(),
        };
        merge.prime()?;
        Ok(SortedDocs {
            inner: Inner::Merge(merge),
            remaining,
            stats: self.stats,
            failed: false,
        })
    }
}

fn memory_limit_error(limit: usize) -> QueryError {
    QueryError::Location(
        292,
        format!(
            "Sort exceeded memory limit of {limit} bytes, but did not opt in to external sorting."
        ),
    )
}

fn io_error(what: &str) -> impl Fn(std::io::Error) -> QueryError + '_ {
    move |e| {
        QueryError::Storage(StorageError::Engine(EngineError::Io(format!(
            "{what}: {e}"
        ))))
    }
}

fn corrupt(what: &str) -> QueryError {
    QueryError::Storage(StorageError::Corrupt(format!("sort spill file: {what}")))
}

/// Record layout: seq (u64 LE), the key values as a BSON array, the document.
fn write_entry(w: &mut impl Write, e: &Entry) -> Result<()> {
    let mut key = RawArrayBuf::new();
    for v in e.key.values() {
        key.push(v.clone());
    }
    let err = io_error("error writing a sort spill file");
    w.write_all(&e.seq.to_le_bytes()).map_err(&err)?;
    w.write_all(key.as_bytes()).map_err(&err)?;
    w.write_all(e.doc.as_bytes()).map_err(&err)?;
    Ok(())
}

/// Reads one length-prefixed BSON document.
fn read_bson(r: &mut impl Read) -> Result<RawDocumentBuf> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)
        .map_err(io_error("error reading a sort spill file"))?;
    let n = i32::from_le_bytes(len);
    let n = usize::try_from(n).map_err(|_| corrupt("negative length"))?;
    if !(5..=MAX_SPILLED_RECORD).contains(&n) {
        return Err(corrupt("bad record length"));
    }
    let mut buf = vec![0u8; n];
    buf.get_mut(..4)
        .ok_or_else(|| corrupt("bad record length"))?
        .copy_from_slice(&len);
    r.read_exact(
        buf.get_mut(4..)
            .ok_or_else(|| corrupt("bad record length"))?,
    )
    .map_err(io_error("error reading a sort spill file"))?;
    RawDocumentBuf::from_bytes(buf).map_err(|e| corrupt(&e.to_string()))
}

fn read_entry(r: &mut impl Read, spec: &SortSpec) -> Result<Entry> {
    let mut seq = [0u8; 8];
    r.read_exact(&mut seq)
        .map_err(io_error("error reading a sort spill file"))?;
    let key_doc = read_bson(r)?;
    let mut values = Vec::with_capacity(spec.fields().len());
    for el in key_doc.iter() {
        let (_, v) = el.map_err(|e| corrupt(&e.to_string()))?;
        values.push(RawBson::from(v));
    }
    let doc = read_bson(r)?;
    Ok(Entry {
        key: SortKey::from_parts(values, spec),
        seq: u64::from_le_bytes(seq),
        doc,
    })
}

enum Source {
    File {
        reader: BufReader<File>,
        left: usize,
    },
    Memory(std::vec::IntoIter<Entry>),
}

impl Source {
    fn next(&mut self, spec: &SortSpec) -> Result<Option<Entry>> {
        match self {
            Source::File { reader, left } => {
                if *left == 0 {
                    return Ok(None);
                }
                *left -= 1;
                read_entry(reader, spec).map(Some)
            }
            Source::Memory(it) => Ok(it.next()),
        }
    }
}

/// A head of the merge: the next entry of source `src`.
struct Head {
    entry: Entry,
    src: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Head) -> bool {
        self.entry == other.entry
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Head) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Head) -> Ordering {
        self.entry.cmp(&other.entry)
    }
}

/// A k-way merge of sorted runs.
struct Merge {
    spec: SortSpec,
    sources: Vec<Source>,
    heads: BinaryHeap<Reverse<Head>>,
}

impl Merge {
    fn prime(&mut self) -> Result<()> {
        for i in 0..self.sources.len() {
            self.refill(i)?;
        }
        Ok(())
    }

    fn refill(&mut self, src: usize) -> Result<()> {
        let Some(source) = self.sources.get_mut(src) else {
            return Ok(());
        };
        if let Some(entry) = source.next(&self.spec)? {
            self.heads.push(Reverse(Head { entry, src }));
        }
        Ok(())
    }

    fn next(&mut self) -> Result<Option<RawDocumentBuf>> {
        let Some(Reverse(head)) = self.heads.pop() else {
            return Ok(None);
        };
        self.refill(head.src)?;
        Ok(Some(head.entry.doc))
    }
}

enum Inner {
    Memory(std::vec::IntoIter<Entry>),
    Merge(Merge),
}

/// The sorted output of a [`Sorter`]; spill files are released when it is dropped.
pub struct SortedDocs {
    inner: Inner,
    remaining: usize,
    stats: SortStats,
    failed: bool,
}

impl SortedDocs {
    /// What the sort did.
    pub fn stats(&self) -> SortStats {
        self.stats
    }
}

impl Iterator for SortedDocs {
    type Item = Result<RawDocumentBuf>;

    fn next(&mut self) -> Option<Result<RawDocumentBuf>> {
        if self.failed || self.remaining == 0 {
            return None;
        }
        let next = match &mut self.inner {
            Inner::Memory(it) => Ok(it.next().map(|e| e.doc)),
            Inner::Merge(m) => m.next(),
        };
        match next {
            Ok(Some(doc)) => {
                self.remaining -= 1;
                Some(Ok(doc))
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
