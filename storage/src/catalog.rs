//! The catalog: which collections exist, with their ids, options and index specs.
//!
//! Layout of the catalog space (space 0), byte by byte:
//! ```text
//! 'V'                                   → schema version, u32 big-endian (currently 3)
//! 'N'                                   → next space id, u64 big-endian
//! 'C' db 0x00 name                      → collection record (a BSON document, below)
//! 'S' u64be(space id) u64be(sequence)   → statistics delta: i64be count, i64be data size
//! 'M' u64be(index space)                → multikey marker ([1])
//! 'B' u64be(index space)                → build resume position (a document key)
//! 'W' db 0x00 name                      → view record (a BSON document, below)
//! ```
//! Database and collection names never contain NUL (namespace validation rejects it), so
//! `'C' db 0x00` is an exact prefix for one database's collections and records sort by
//! (db, name).
//!
//! A collection record is the BSON document
//! `{id: Int64, db, name, uuid: UUID, options: {...}, created: Date, indexes: [spec...],
//! packThreshold: Int32}`; `id` is also the space holding the collection's documents, and
//! `packThreshold` the size up to which its documents' containers are stored packed
//! ([`crate::doc`], "Packed subtrees"; absent in records written before packing existed,
//! which means 0: one key per node, the layout those collections were written with). Every collection has the
//! `_id_` index, which is the document space itself (documents are keyed by E(_id)).
//!
//! A view record is `{db, name, viewOn, pipeline: [...], created: Date}` ([`ViewMeta`]): a
//! view has no space; its name is unique among the database's collections and views.
//!
//! Statistics (document count, BSON bytes) are kept as *deltas*: each committing write
//! appends one blind-written delta key, so concurrent writers never conflict on a counter;
//! reads sum the deltas, and [`crate::store::Store`] folds them into one key from time to
//! time. Deltas are written in the same transaction as the documents, so they are exact.
//!
//! Invariants: an in-memory [`Catalog`] is an immutable snapshot of committed records; DDL
//! builds a new one and swaps it in after its transaction commits.

use std::collections::BTreeMap;
use std::sync::Arc;

use bson::raw::cstr;
use bson::spec::BinarySubtype;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::engine::{Read, SpaceId};
use crate::error::{Result, StorageError};
use crate::index::IndexMeta;

/// Current catalog schema version.
/// Version 2 added secondary index metadata; version 3 packed subtrees (new node kinds in
/// the document spaces, `packThreshold` in collection records); version 4 stores the change
/// log in chunks of several entries per key ([`crate::changelog`]). Older versions still
/// load (their collections have threshold 0 when older than 3, the layout they were written
/// with; their change log's one key per entry is a chunk of one) and are marked version 4
/// when opened, so that an older server refuses the directory instead of misreading packed
/// documents or chunked change log entries.
pub const SCHEMA_VERSION: u32 = 4;

/// Key of the schema version.
pub const VERSION_KEY: &[u8] = b"V";
/// Key of the next space id.
pub const NEXT_ID_KEY: &[u8] = b"N";
/// Prefix of collection records.
pub const COLLECTION_PREFIX: u8 = b'C';
/// Prefix of statistics deltas.
pub const STATS_PREFIX: u8 = b'S';
/// Prefix of view records.
pub const VIEW_PREFIX: u8 = b'W';

/// A view's catalog record.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewMeta {
    /// Database name.
    pub db: String,
    /// View name.
    pub name: String,
    /// The collection or view it reads (in the same database).
    pub view_on: String,
    /// Its pipeline (an array of stage documents).
    pub pipeline: bson::RawArrayBuf,
    /// Creation time.
    pub created: bson::DateTime,
}

impl ViewMeta {
    /// `db.name`.
    pub fn namespace(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    /// `{viewOn, pipeline}`: the definition as `listCollections` and change events show it.
    pub fn description(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("viewOn"), self.view_on.as_str());
        d.append(cstr!("pipeline"), self.pipeline.clone());
        d
    }

    /// Encodes the record.
    pub fn to_bson(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("db"), self.db.as_str());
        d.append(cstr!("name"), self.name.as_str());
        d.append(cstr!("viewOn"), self.view_on.as_str());
        d.append(cstr!("pipeline"), self.pipeline.clone());
        d.append(cstr!("created"), self.created);
        d
    }

    /// Decodes a record.
    pub fn from_bson(bytes: &[u8]) -> Result<ViewMeta> {
        let bad = |what: &str| StorageError::Corrupt(format!("view record: {what}"));
        let d = RawDocument::from_bytes(bytes).map_err(|_| bad("not a document"))?;
        Ok(ViewMeta {
            db: d.get_str("db").map_err(|_| bad("db"))?.to_string(),
            name: d.get_str("name").map_err(|_| bad("name"))?.to_string(),
            view_on: d.get_str("viewOn").map_err(|_| bad("viewOn"))?.to_string(),
            pipeline: d
                .get_array("pipeline")
                .map_err(|_| bad("pipeline"))?
                .to_owned(),
            created: d.get_datetime("created").map_err(|_| bad("created"))?,
        })
    }
}

/// Catalog key of a view record.
pub fn view_key(db: &str, name: &str) -> Vec<u8> {
    let mut k = collection_key(db, name);
    if let Some(first) = k.first_mut() {
        *first = VIEW_PREFIX;
    }
    k
}

/// Catalog key prefix of one database's view records.
pub fn view_database_prefix(db: &str) -> Vec<u8> {
    let mut k = database_prefix(db);
    if let Some(first) = k.first_mut() {
        *first = VIEW_PREFIX;
    }
    k
}

/// A collection's catalog record.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionMeta {
    /// The space holding its documents.
    pub id: SpaceId,
    /// Database name.
    pub db: String,
    /// Collection name.
    pub name: String,
    /// The collection UUID reported by `listCollections`.
    pub uuid: [u8; 16],
    /// Creation options as given to `create` (validated).
    pub options: RawDocumentBuf,
    /// Creation time.
    pub created: bson::DateTime,
    /// Indexes (`_id_` first).
    pub indexes: Vec<IndexMeta>,
    /// Containers of at most this many BSON bytes are stored packed (0: one key per node).
    pub pack_threshold: u32,
    /// For a capped collection, the space holding its insertion order (see
    /// [`crate::capped`]).
    pub natural: Option<SpaceId>,
}

impl CollectionMeta {
    /// `db.name`.
    pub fn namespace(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    /// The index with this name.
    pub fn index(&self, name: &str) -> Option<&IndexMeta> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// The codec limits for this collection's documents (its pack threshold).
    pub fn limits(&self) -> crate::doc::Limits {
        crate::doc::Limits::packing(self.pack_threshold)
    }

    /// Secondary indexes (everything but `_id_`).
    pub fn secondary_indexes(&self) -> impl Iterator<Item = &IndexMeta> {
        self.indexes.iter().filter(|i| !i.is_id())
    }

    /// Encodes the record.
    pub fn to_bson(&self) -> RawDocumentBuf {
        let mut indexes = RawArrayBuf::new();
        for i in &self.indexes {
            indexes.push(i.to_bson());
        }
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("id"), self.id as i64);
        d.append(cstr!("db"), self.db.as_str());
        d.append(cstr!("name"), self.name.as_str());
        d.append(
            cstr!("uuid"),
            bson::Binary {
                subtype: BinarySubtype::Uuid,
                bytes: self.uuid.to_vec(),
            },
        );
        d.append(cstr!("options"), self.options.clone());
        d.append(cstr!("created"), self.created);
        d.append(cstr!("indexes"), indexes);
        if self.pack_threshold != 0 {
            d.append(
                cstr!("packThreshold"),
                i32::try_from(self.pack_threshold).unwrap_or(i32::MAX),
            );
        }
        if let Some(n) = self.natural {
            d.append(cstr!("natural"), n as i64);
        }
        d
    }

    /// Whether the collection is capped.
    pub fn is_capped(&self) -> bool {
        self.natural.is_some()
    }

    /// Decodes a record.
    pub fn from_bson(bytes: &[u8]) -> Result<CollectionMeta> {
        let bad = |what: &str| StorageError::Corrupt(format!("collection record: {what}"));
        let d = RawDocument::from_bytes(bytes).map_err(|_| bad("not a document"))?;
        let id = d.get_i64("id").map_err(|_| bad("id"))?;
        let uuid = match d.get("uuid") {
            Ok(Some(RawBsonRef::Binary(b))) if b.bytes.len() == 16 => {
                let mut u = [0u8; 16];
                u.copy_from_slice(b.bytes);
                u
            }
            _ => return Err(bad("uuid")),
        };
        let mut indexes = Vec::new();
        for i in d.get_array("indexes").map_err(|_| bad("indexes"))? {
            match i {
                Ok(RawBsonRef::Document(spec)) => indexes.push(IndexMeta::from_bson(spec)?),
                _ => return Err(bad("index spec")),
            }
        }
        Ok(CollectionMeta {
            id: u64::try_from(id).map_err(|_| bad("negative id"))?,
            db: d.get_str("db").map_err(|_| bad("db"))?.to_string(),
            name: d.get_str("name").map_err(|_| bad("name"))?.to_string(),
            uuid,
            options: d
                .get_document("options")
                .map_err(|_| bad("options"))?
                .to_owned(),
            created: d.get_datetime("created").map_err(|_| bad("created"))?,
            indexes,
            pack_threshold: match d.get("packThreshold") {
                Ok(None) => 0,
                Ok(Some(RawBsonRef::Int32(t))) => u32::try_from(t)
                    .ok()
                    .filter(|t| *t <= crate::doc::MAX_PACK_THRESHOLD)
                    .ok_or_else(|| bad("packThreshold"))?,
                _ => return Err(bad("packThreshold")),
            },
            natural: match d.get("natural") {
                Ok(Some(RawBsonRef::Int64(n))) => {
                    Some(u64::try_from(n).map_err(|_| bad("natural space"))?)
                }
                Ok(None) => None,
                _ => return Err(bad("natural space")),
            },
        })
    }
}

/// Catalog key of a collection record.
pub fn collection_key(db: &str, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + db.len() + name.len());
    k.push(COLLECTION_PREFIX);
    k.extend_from_slice(db.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

/// Catalog key prefix of one database's collection records.
pub fn database_prefix(db: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + db.len());
    k.push(COLLECTION_PREFIX);
    k.extend_from_slice(db.as_bytes());
    k.push(0);
    k
}

/// Prefix of multikey markers: `'M' u64be(index space)` → `[1]`, written blindly by the
/// first write that puts an array on an indexed path (the flag never goes back).
pub const MULTIKEY_PREFIX: u8 = b'M';
/// Prefix of index build progress: `'B' u64be(index space)` → the document key to resume at.
pub const BUILD_PREFIX: u8 = b'B';

/// Catalog key of an index's multikey marker.
pub fn multikey_key(space: SpaceId) -> Vec<u8> {
    let mut k = vec![MULTIKEY_PREFIX];
    k.extend_from_slice(&space.to_be_bytes());
    k
}

/// Catalog key of an index build's resume position.
pub fn build_key(space: SpaceId) -> Vec<u8> {
    let mut k = vec![BUILD_PREFIX];
    k.extend_from_slice(&space.to_be_bytes());
    k
}

/// Catalog key of one statistics delta.
pub fn stats_key(space: SpaceId, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(STATS_PREFIX);
    k.extend_from_slice(&space.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// Catalog key prefix of a space's statistics deltas.
pub fn stats_prefix(space: SpaceId) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(STATS_PREFIX);
    k.extend_from_slice(&space.to_be_bytes());
    k
}

/// A statistics delta: documents and BSON bytes added (negative when removed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Document count.
    pub count: i64,
    /// Sum of document BSON sizes.
    pub size: i64,
}

impl Stats {
    /// 16 bytes: count then size, big-endian.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.count.to_be_bytes());
        b[8..].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// Decodes [`Stats::encode`].
    pub fn decode(b: &[u8]) -> Result<Stats> {
        match (b.get(..8), b.get(8..16)) {
            (Some(c), Some(s)) if b.len() == 16 => Ok(Stats {
                count: i64::from_be_bytes(c.try_into().unwrap_or_default()),
                size: i64::from_be_bytes(s.try_into().unwrap_or_default()),
            }),
            _ => Err(StorageError::Corrupt("statistics delta".into())),
        }
    }

    /// Adds another delta.
    pub fn add(&mut self, o: Stats) {
        self.count += o.count;
        self.size += o.size;
    }

    /// True when nothing changed.
    pub fn is_zero(&self) -> bool {
        self.count == 0 && self.size == 0
    }
}

/// Sums the statistics deltas of `space`; also returns the largest sequence seen and how many
/// deltas there were.
pub fn read_stats(r: &dyn Read, space: SpaceId) -> Result<(Stats, u64, usize)> {
    let mut total = Stats::default();
    let mut max_seq = 0;
    let mut n = 0;
    for kv in r.prefix(crate::engine::CATALOG_SPACE, &stats_prefix(space))? {
        let (k, v) = kv?;
        total.add(Stats::decode(&v)?);
        if let Some(seq) = k.get(9..17).and_then(|s| <[u8; 8]>::try_from(s).ok()) {
            max_seq = max_seq.max(u64::from_be_bytes(seq));
        }
        n += 1;
    }
    Ok((total, max_seq, n))
}

/// An immutable snapshot of the committed catalog.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    collections: BTreeMap<(String, String), Arc<CollectionMeta>>,
    records: BTreeMap<(String, String), Arc<Vec<u8>>>,
    views: BTreeMap<(String, String), Arc<ViewMeta>>,
}

impl Catalog {
    /// Loads every collection record.
    pub fn load(r: &dyn Read) -> Result<Catalog> {
        let mut c = Catalog::default();
        for kv in r.prefix(crate::engine::CATALOG_SPACE, &[COLLECTION_PREFIX])? {
            let (_, v) = kv?;
            let meta = CollectionMeta::from_bson(&v)?;
            let k = (meta.db.clone(), meta.name.clone());
            c.records.insert(k.clone(), Arc::new(v.to_vec()));
            c.collections.insert(k, Arc::new(meta));
        }
        for kv in r.prefix(crate::engine::CATALOG_SPACE, &[VIEW_PREFIX])? {
            let (_, v) = kv?;
            let view = ViewMeta::from_bson(&v)?;
            c.views
                .insert((view.db.clone(), view.name.clone()), Arc::new(view));
        }
        Ok(c)
    }

    /// The view, if it exists.
    pub fn view(&self, db: &str, name: &str) -> Option<&Arc<ViewMeta>> {
        self.views.get(&(db.to_string(), name.to_string()))
    }

    /// Views of `db`, sorted by name.
    pub fn views_in<'a>(&'a self, db: &'a str) -> impl Iterator<Item = &'a Arc<ViewMeta>> + 'a {
        self.views
            .range((db.to_string(), String::new())..)
            .take_while(move |((d, _), _)| d == db)
            .map(|(_, v)| v)
    }

    /// A copy with `view` added or replaced.
    pub fn with_view(&self, view: ViewMeta) -> Catalog {
        let mut c = self.clone();
        c.views
            .insert((view.db.clone(), view.name.clone()), Arc::new(view));
        c
    }

    /// A copy without the view `db.name`.
    pub fn without_view(&self, db: &str, name: &str) -> Catalog {
        let mut c = self.clone();
        c.views.remove(&(db.to_string(), name.to_string()));
        c
    }

    /// The collection, if it exists.
    pub fn get(&self, db: &str, name: &str) -> Option<&Arc<CollectionMeta>> {
        self.collections.get(&(db.to_string(), name.to_string()))
    }

    /// Collections of `db`, sorted by name.
    pub fn in_database<'a>(
        &'a self,
        db: &'a str,
    ) -> impl Iterator<Item = &'a Arc<CollectionMeta>> + 'a {
        self.collections
            .range((db.to_string(), String::new())..)
            .take_while(move |((d, _), _)| d == db)
            .map(|(_, m)| m)
    }

    /// Every collection, sorted by (db, name).
    pub fn all(&self) -> impl Iterator<Item = &Arc<CollectionMeta>> {
        self.collections.values()
    }

    /// Database names that hold at least one collection or view, sorted.
    pub fn databases(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .collections
            .keys()
            .chain(self.views.keys())
            .map(|(d, _)| d.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The stored record bytes of `db.name` (what the catalog space holds).
    pub fn record(&self, db: &str, name: &str) -> Option<&Arc<Vec<u8>>> {
        self.records.get(&(db.to_string(), name.to_string()))
    }

    /// A copy with `meta` added or replaced.
    pub fn with(&self, meta: CollectionMeta) -> Catalog {
        let mut c = self.clone();
        let k = (meta.db.clone(), meta.name.clone());
        c.records
            .insert(k.clone(), Arc::new(meta.to_bson().into_bytes()));
        c.collections.insert(k, Arc::new(meta));
        c
    }

    /// A copy in which the indexes whose space is in `spaces` are marked multikey (the record
    /// bytes stay as stored: the flag is learnt from the multikey markers).
    pub fn with_multikey(&self, spaces: &std::collections::HashSet<SpaceId>) -> Catalog {
        let mut c = self.clone();
        for meta in c.collections.values_mut() {
            if meta
                .indexes
                .iter()
                .any(|i| !i.multikey && spaces.contains(&i.space) && !i.is_id())
            {
                let mut m = (**meta).clone();
                for i in &mut m.indexes {
                    if spaces.contains(&i.space) && !i.is_id() {
                        i.multikey = true;
                    }
                }
                *meta = Arc::new(m);
            }
        }
        c
    }

    /// A copy without `db.name`.
    pub fn without(&self, db: &str, name: &str) -> Catalog {
        let mut c = self.clone();
        let k = (db.to_string(), name.to_string());
        c.collections.remove(&k);
        c.records.remove(&k);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn record_round_trips() {
        let m = CollectionMeta {
            id: 42,
            db: "test".into(),
            name: "c".into(),
            uuid: [9; 16],
            options: rawdoc! {"capped": false},
            created: bson::DateTime::from_millis(1234),
            indexes: vec![IndexMeta::id_index()],
            pack_threshold: 0,
            natural: Some(43),
        };
        assert_eq!(
            CollectionMeta::from_bson(m.to_bson().as_bytes()).unwrap(),
            m
        );
        let packed = CollectionMeta {
            pack_threshold: 2048,
            ..m.clone()
        };
        assert_eq!(
            CollectionMeta::from_bson(packed.to_bson().as_bytes()).unwrap(),
            packed
        );
        assert!(CollectionMeta::from_bson(b"junk").is_err());
    }

    #[test]
    fn keys_sort_by_database_then_name() {
        let mut keys = [
            collection_key("b", "a"),
            collection_key("a", "zz"),
            collection_key("a", "b"),
            collection_key("ab", "a"),
        ];
        keys.sort();
        assert_eq!(keys[0], collection_key("a", "b"));
        assert_eq!(keys[1], collection_key("a", "zz"));
        assert_eq!(keys[2], collection_key("ab", "a"));
        assert!(collection_key("a", "x").starts_with(&database_prefix("a")));
        assert!(!collection_key("ab", "x").starts_with(&database_prefix("a")));
    }

    #[test]
    fn stats_round_trip() {
        let s = Stats {
            count: -3,
            size: 1 << 40,
        };
        assert_eq!(Stats::decode(&s.encode()).unwrap(), s);
        assert!(Stats::decode(&[1, 2]).is_err());
        assert!(stats_key(5, 1).starts_with(&stats_prefix(5)));
        assert!(stats_key(5, 1) < stats_key(5, 2));
        assert!(stats_key(5, u64::MAX) < stats_key(6, 0));
    }
}
