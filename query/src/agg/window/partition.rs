//! The documents of the current partition, read from the (sorted) input on demand and
//! addressed by their position in the partition (MongoDB's `PartitionIterator` and
//! `SpillableCache`).
//!
//! A partition ends where the partition key changes (the input is sorted by it); the first
//! document of the next partition is kept aside. Documents no executor needs any more are
//! released from the front ([`Partition::release_below`]). The cache counts its bytes against
//! the stage's memory limit: beyond it, with `allowDiskUse` the cached documents move to a
//! temporary file and are read back by position; without it the stage fails with 5414201.
//!
//! Invariant: positions only grow; asking for a released position is an internal error, never
//! a panic.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use bson::{RawBson, RawDocumentBuf};
use cairn_storage::StorageError;
use cairn_storage::engine::EngineError;

use crate::agg::{DocStream, ExecCx, Options};
use crate::error::{QueryError, Result};
use crate::expr::{ExprExtensions, Expression};

enum Slot {
    Mem(Arc<RawDocumentBuf>),
    Disk { offset: u64, len: usize },
}

/// A partition key: `None` is missing.
type Key = Option<RawBson>;

fn same_key(a: &Key, b: &Key) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            cairn_storage::compare::compare_values(x.as_raw_bson_ref(), y.as_raw_bson_ref())
                == std::cmp::Ordering::Equal
        }
        _ => false,
    }
}

fn io_err(what: &str, e: std::io::Error) -> QueryError {
    QueryError::Storage(StorageError::Engine(EngineError::Io(format!(
        "{what}: {e}"
    ))))
}

/// The memory error of `$setWindowFields`.
pub fn memory_error(used: usize, max: usize) -> QueryError {
    QueryError::Location(
        5414201,
        format!(
            "Exceeded memory limit in DocumentSourceSetWindowFields, used {used} bytes but max \
             allowed is {max}"
        ),
    )
}

/// The current partition and the input behind it.
pub struct Partition {
    input: Box<dyn DocStream>,
    key_expr: Option<Expression>,
    ext: ExprExtensions,
    slots: VecDeque<Slot>,
    base: usize,
    /// The current partition has no more documents.
    complete: bool,
    next_first: Option<(RawDocumentBuf, Key)>,
    input_done: bool,
    key: Key,
    /// Bytes of the documents held in memory.
    pub mem: usize,
    opts: Arc<Options>,
    spill: Option<File>,
    spill_end: u64,
}

const SLOT_OVERHEAD: usize = 48;

impl Partition {
    /// Partitions `input` by `key_expr` (one partition when `None`).
    pub fn new(
        input: Box<dyn DocStream>,
        key_expr: Option<Expression>,
        ext: ExprExtensions,
        opts: Arc<Options>,
    ) -> Partition {
        Partition {
            input,
            key_expr,
            ext,
            slots: VecDeque::new(),
            base: 0,
            complete: true,
            next_first: None,
            input_done: false,
            key: None,
            mem: 0,
            opts,
            spill: None,
            spill_end: 0,
        }
    }

    fn key_of(&self, d: &RawDocumentBuf) -> Result<Key> {
        let Some(e) = &self.key_expr else {
            return Ok(None);
        };
        let k = e.evaluate(d, self.ext.variables())?;
        if matches!(k, Some(RawBson::Array(_))) {
            return Err(QueryError::TypeMismatch(
                "An expression used to partition cannot evaluate to value of type array".into(),
            ));
        }
        Ok(k)
    }

    /// Moves to the next partition; false at the end of the input.
    pub fn start_next(&mut self, cx: &ExecCx<'_>) -> Result<bool> {
        self.slots.clear();
        self.mem = 0;
        self.base = 0;
        self.spill = None;
        self.spill_end = 0;
        let first = match self.next_first.take() {
            Some(f) => f,
            None => {
                if self.input_done {
                    return Ok(false);
                }
                match self.input.next(cx)? {
                    Some(d) => {
                        let k = self.key_of(&d)?;
                        (d, k)
                    }
                    None => {
                        self.input_done = true;
                        return Ok(false);
                    }
                }
            }
        };
        self.key = first.1;
        self.complete = false;
        self.push(first.0)?;
        Ok(true)
    }

    fn push(&mut self, d: RawDocumentBuf) -> Result<()> {
        self.mem += d.as_bytes().len() + SLOT_OVERHEAD;
        self.slots.push_back(Slot::Mem(Arc::new(d)));
        if self.mem > self.opts.window_memory_limit {
            if !self.opts.allow_disk_use {
                return Err(memory_error(self.mem, self.opts.window_memory_limit));
            }
            self.spill_all()?;
        }
        Ok(())
    }

    /// Reads one more document of the current partition; false at its end.
    fn fetch(&mut self, cx: &ExecCx<'_>) -> Result<bool> {
        if self.complete {
            return Ok(false);
        }
        let Some(d) = self.input.next(cx)? else {
            self.input_done = true;
            self.complete = true;
            return Ok(false);
        };
        let k = self.key_of(&d)?;
        if !same_key(&k, &self.key) {
            self.next_first = Some((d, k));
            self.complete = true;
            return Ok(false);
        }
        self.push(d)?;
        Ok(true)
    }

    /// The document at position `i` of the partition, `None` past its end.
    pub fn get(&mut self, i: usize, cx: &ExecCx<'_>) -> Result<Option<Arc<RawDocumentBuf>>> {
        if i < self.base {
            return Err(QueryError::BadValue(format!(
                "$setWindowFields: document {i} of the partition was already released"
            )));
        }
        while i >= self.base + self.slots.len() {
            if !self.fetch(cx)? {
                return Ok(None);
            }
        }
        let Some(slot) = self.slots.get(i - self.base) else {
            return Ok(None);
        };
        match slot {
            Slot::Mem(d) => Ok(Some(Arc::clone(d))),
            Slot::Disk { offset, len } => {
                let (offset, len) = (*offset, *len);
                let Some(f) = self.spill.as_mut() else {
                    return Err(QueryError::BadValue("window spill file missing".into()));
                };
                f.seek(SeekFrom::Start(offset))
                    .map_err(|e| io_err("error reading a $setWindowFields spill file", e))?;
                let mut buf = vec![0u8; len];
                f.read_exact(&mut buf)
                    .map_err(|e| io_err("error reading a $setWindowFields spill file", e))?;
                let d = RawDocumentBuf::from_bytes(buf).map_err(|_| {
                    QueryError::Storage(StorageError::Corrupt(
                        "bad $setWindowFields spill record".into(),
                    ))
                })?;
                Ok(Some(Arc::new(d)))
            }
        }
    }

    /// The last position of the partition (reads it to its end); `None` when empty.
    pub fn last(&mut self, cx: &ExecCx<'_>) -> Result<Option<usize>> {
        while self.fetch(cx)? {}
        Ok((self.base + self.slots.len()).checked_sub(1))
    }

    /// The first position still held.
    pub fn base(&self) -> usize {
        self.base
    }

    /// Releases the documents before position `i`.
    pub fn release_below(&mut self, i: usize) {
        while self.base < i {
            let Some(s) = self.slots.pop_front() else {
                break;
            };
            if let Slot::Mem(d) = s {
                self.mem = self.mem.saturating_sub(d.as_bytes().len() + SLOT_OVERHEAD);
            }
            self.base += 1;
        }
    }

    /// Moves every cached document to the spill file.
    pub fn spill_all(&mut self) -> Result<()> {
        if self.spill.is_none() {
            let dir = self
                .opts
                .spill_dir
                .clone()
                .unwrap_or_else(std::env::temp_dir);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                return Err(io_err("could not create the spill directory", e));
            }
            self.spill = Some(
                tempfile::tempfile_in(&dir)
                    .map_err(|e| io_err("could not create a $setWindowFields spill file", e))?,
            );
            self.spill_end = 0;
        }
        let Some(f) = self.spill.as_mut() else {
            return Ok(());
        };
        f.seek(SeekFrom::Start(self.spill_end))
            .map_err(|e| io_err("error writing a $setWindowFields spill file", e))?;
        let mut w = std::io::BufWriter::new(f);
        for slot in self.slots.iter_mut() {
            if let Slot::Mem(d) = slot {
                let len = d.as_bytes().len();
                w.write_all(d.as_bytes())
                    .map_err(|e| io_err("error writing a $setWindowFields spill file", e))?;
                *slot = Slot::Disk {
                    offset: self.spill_end,
                    len,
                };
                self.spill_end += len as u64;
            }
        }
        w.flush()
            .map_err(|e| io_err("error writing a $setWindowFields spill file", e))?;
        self.mem = 0;
        Ok(())
    }
}
