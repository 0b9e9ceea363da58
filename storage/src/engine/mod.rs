//! The engine seam: a narrow, transactional, ordered key-value interface.
//!
//! Everything above this module (documents, catalog, indexes, the query layer) talks to an
//! [`Engine`]: named *spaces* (independent ordered key spaces, identified by a number), and
//! serializable transactions over them. Two implementations sit behind it:
//! [`fjall::FjallEngine`] (the embedded default, on fjall's `OptimisticTxDatabase`, one
//! keyspace per space) and [`memory::MemoryEngine`] (for tests). A distributed ordered
//! transactional store can implement the same trait by prefixing keys with the space id.
//!
//! Invariants every engine upholds:
//! - a [`Tx`] reads a consistent snapshot taken at [`Engine::begin`] plus its own writes;
//! - [`Tx::commit`] is atomic and serializable: if anything the transaction read (point or
//!   range) was changed by a transaction that committed after its snapshot, commit fails with
//!   [`EngineError::Conflict`] and nothing is written. Blind writes never conflict;
//! - a committed transaction survives a crash of the *process* (its journal write reached the
//!   OS); it survives a crash of the *machine* once [`Engine::sync`] returns after it;
//! - dropping a space costs the same whatever it holds (no scan), and frees its files once no
//!   transaction uses it any more;
//! - engine calls block: callers run them off the async runtime.

use std::ops::{Bound, Deref};
use std::sync::Arc;

pub mod fjall;
pub mod group_commit;
pub mod memory;
pub mod row_cache;

/// A space id. Space 0 is reserved for the catalog.
pub type SpaceId = u64;

/// The catalog's space.
pub const CATALOG_SPACE: SpaceId = 0;

/// Errors from an engine.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// A serializable transaction conflicted with a concurrent commit; retry it.
    #[error("write conflict: a concurrent operation changed data this one read")]
    Conflict,
    /// The space does not exist (e.g. it was dropped).
    #[error("storage space {0} does not exist")]
    NoSuchSpace(SpaceId),
    /// A key beyond the engine's limit.
    #[error("key of {len} bytes exceeds the storage limit of {max} bytes")]
    KeyTooLong {
        /// The key length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An I/O or internal engine error.
    #[error("storage engine error: {0}")]
    Io(String),
}

impl EngineError {
    /// True when retrying the whole transaction may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, EngineError::Conflict)
    }
}

/// Result alias for engine calls.
pub type Result<T> = std::result::Result<T, EngineError>;

/// Immutable bytes returned by an engine, shared without copying.
#[derive(Clone)]
pub struct Bytes(Repr);

#[derive(Clone)]
enum Repr {
    Fjall(::fjall::Slice),
    Shared(Arc<[u8]>),
}

impl Bytes {
    pub(crate) fn from_fjall(s: ::fjall::Slice) -> Bytes {
        Bytes(Repr::Fjall(s))
    }

    /// Bytes owned by this value.
    pub fn copy_from(b: &[u8]) -> Bytes {
        Bytes(Repr::Shared(Arc::from(b)))
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Fjall(s) => s,
            Repr::Shared(a) => a,
        }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({:02x?})", &**self)
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Bytes) -> bool {
        **self == **other
    }
}

/// A key-value pair.
pub type Kv = (Bytes, Bytes);

/// An iterator over key-value pairs in key order (or reverse).
pub type KvIter<'a> = Box<dyn Iterator<Item = Result<Kv>> + Send + 'a>;

/// Reads shared by snapshots and transactions.
pub trait Read {
    /// The value at `key`, if any.
    fn get(&self, space: SpaceId, key: &[u8]) -> Result<Option<Bytes>>;

    /// [`Read::get`] of each of `keys`, pushed onto `out` in the same order, the space
    /// looked up once for the whole batch.
    fn get_many(&self, space: SpaceId, keys: &[&[u8]], out: &mut Vec<Option<Bytes>>) -> Result<()> {
        for key in keys {
            out.push(self.get(space, key)?);
        }
        Ok(())
    }

    /// For each of `keys`, in the same order onto `out`: its value when the engine holds it
    /// ready in memory (a read-only snapshot's row cache hit, exactly what [`Read::get`]
    /// returns), else `None` (the key may still have a value; [`Read::get`] reads it). The
    /// default holds nothing in memory; transactions keep it so, as their reads must be
    /// tracked.
    fn get_cached(
        &self,
        space: SpaceId,
        keys: &[&[u8]],
        out: &mut Vec<Option<Bytes>>,
    ) -> Result<()> {
        let _ = space;
        out.resize(out.len() + keys.len(), None);
        Ok(())
    }

    /// Pairs with keys in `(start, end)`, ascending or (with `reverse`) descending.
    fn range<'a>(
        &'a self,
        space: SpaceId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<KvIter<'a>>;

    /// Pairs whose key starts with `prefix`, ascending.
    fn prefix<'a>(&'a self, space: SpaceId, prefix: &[u8]) -> Result<KvIter<'a>> {
        match prefix_end(prefix) {
            Some(end) => self.range(space, Bound::Included(prefix), Bound::Excluded(&end), false),
            None => self.range(space, Bound::Included(prefix), Bound::Unbounded, false),
        }
    }
}

/// A read-write serializable transaction.
pub trait Tx: Read + Send {
    /// Writes `value` at `key`.
    fn put(&mut self, space: SpaceId, key: &[u8], value: &[u8]) -> Result<()>;

    /// Removes `key`.
    fn delete(&mut self, space: SpaceId, key: &[u8]) -> Result<()>;

    /// Commits atomically; [`EngineError::Conflict`] if a concurrent commit invalidated
    /// what this transaction read.
    fn commit(self: Box<Self>) -> Result<()>;

    /// Number of keys written (puts and deletes) so far — for write-amplification checks.
    fn writes(&self) -> usize;

    /// Number of keys read (point reads and range items) so far.
    fn reads(&self) -> usize;
}

/// A read-only snapshot.
pub trait Snapshot: Read + Send + Sync {}

/// A transactional ordered key-value engine with named spaces.
pub trait Engine: Send + Sync + 'static {
    /// Starts a read-write transaction.
    fn begin(&self) -> Result<Box<dyn Tx>>;

    /// Takes a read-only snapshot.
    fn snapshot(&self) -> Result<Box<dyn Snapshot>>;

    /// Creates the space if it does not exist.
    fn open_space(&self, space: SpaceId) -> Result<()>;

    /// Drops a space and all its data without scanning it.
    fn drop_space(&self, space: SpaceId) -> Result<()>;

    /// The spaces that exist.
    fn spaces(&self) -> Vec<SpaceId>;

    /// Bytes the space occupies on disk (approximate).
    fn space_disk_size(&self, space: SpaceId) -> u64;

    /// Forces every commit made so far to stable storage (fsync).
    fn sync(&self) -> Result<()>;

    /// Writes every space's buffered data into its own files (a checkpoint), so the journal
    /// no longer needs it; returns how many spaces were flushed.
    fn checkpoint(&self) -> Result<usize>;

    /// Largest key the engine accepts.
    fn max_key_len(&self) -> usize;

    /// Engine-wide figures for monitoring (zeros where an engine has nothing to report).
    fn stats(&self) -> EngineStats {
        EngineStats::default()
    }
}

/// Engine-wide figures for monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Bytes the whole database occupies on disk.
    pub disk_bytes: u64,
    /// Bytes buffered in memory, not yet in the spaces' files.
    pub write_buffer_bytes: u64,
    /// Journal files on disk.
    pub journals: u64,
    /// Compactions finished since start.
    pub compactions_completed: u64,
    /// Compactions running now.
    pub active_compactions: u64,
    /// Bytes the block cache holds now (at most its configured size).
    pub cache_bytes: u64,
    /// Bytes the row cache holds now (keys, values and a fixed per-entry overhead; at most
    /// its configured size).
    pub row_cache_bytes: u64,
    /// Bytes of filter and index blocks the engine keeps pinned in memory outside the block
    /// cache (fjall pins level 0's filters and the index blocks of levels 0 and 1).
    pub pinned_bytes: u64,
    /// Write buffers flushed because they had gone idle, since start.
    pub idle_flushes: u64,
}

/// The smallest key greater than every key starting with `prefix` (None if the prefix is
/// all 0xFF bytes, i.e. the range is unbounded).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_exclusive_bound() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_end(&[]), None);
    }
}
