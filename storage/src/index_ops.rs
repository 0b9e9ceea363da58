//! Index maintenance, index DDL and index reads.
//!
//! Maintenance ([`WriteTxn::index_document`]): every write computes the entries of the old
//! and the new version of a document for each secondary index (through the query layer's
//! [`crate::index::IndexKeyGen`]) and applies the difference — deleting entries that went
//! away, putting new ones — in the writer's own transaction; an insert, having no old version,
//! writes the generated entries as they come, without building a difference. A unique index is checked by a
//! prefix read of the new entry's key (so two concurrent inserts of the same value conflict).
//! Indexes that are still building are maintained and checked exactly like ready ones, so an
//! index never holds an entry for a document that does not have it, nor a duplicate.
//!
//! Entry value layout: `u32 BE` length of the key part (`K1…Kn`; the rest of the key is
//! `E(_id)`, the document key), then the values document `{"0": v1, …}`.
//!
//! DDL ([`Store::create_indexes`]): every requested specification is validated and checked
//! against the existing indexes (and the other requested ones) before anything is created,
//! the implicitly created collection included, so a refused request changes nothing. A
//! specification is stored in the form MongoDB's catalog gives it (`_fixIndexSpec`: `v`,
//! `unique`/`hidden`/`prepareUnique` only when true, `key`, `name`, then the other options;
//! see [`crate::index::IndexMeta::spec`]); `collMod` changes ([`Store::modify_index`]) follow
//! the catalog's update helpers (the changed field moves to the end; an unset one goes).
//!
//! Builds ([`Store::build_index`]) scan the collection in chunks, each chunk one transaction
//! that indexes its documents and records where to resume in the catalog (`'B'` keys), so a
//! build never blocks writers for long and resumes after a restart. A duplicate or an
//! unindexable document fails the build and removes the index.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::catalog::{CollectionMeta, build_key, collection_key, multikey_key};
use crate::changelog::Change;
use crate::engine::{Bytes, CATALOG_SPACE, Read, SpaceId};
use crate::error::{Result, StorageError};
use crate::index::{IndexEntry, IndexKeys, IndexMeta, IndexState};
use crate::store::{Durability, ScanLimits, Store, WriteTxn, id_key};
use crate::{display, namespace};

/// Documents indexed per build transaction.
pub const BUILD_CHUNK: usize = 500;

fn entry_value(e: &IndexEntry) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + e.values.as_bytes().len());
    entry_value_into(e, &mut v);
    v
}

/// Appends an entry's value to `out`.
fn entry_value_into(e: &IndexEntry, out: &mut Vec<u8>) {
    out.extend_from_slice(&u32::try_from(e.key.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(e.values.as_bytes());
}

/// A range of entry keys: `(start, end)` bounds over an index space.
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// An index entry read back: its key part, the document key, and the stored values.
#[derive(Debug, Clone)]
pub struct IndexHit {
    /// The whole entry key (`K1…Kn E(_id)`).
    pub key: Bytes,
    /// Where the key part ends (the document key starts).
    pub key_len: usize,
    /// The stored value: the key part's length (4 bytes), then the values document, whose
    /// framing [`IndexHit::parse`] checked (it is read in place, not copied).
    value: Bytes,
}

/// The values of an entry whose value is not a document (never: [`IndexHit::parse`] checks).
static NO_VALUES: std::sync::LazyLock<RawDocumentBuf> =
    std::sync::LazyLock::new(RawDocumentBuf::new);

impl IndexHit {
    /// Parses an index space entry.
    #[inline]
    pub fn parse(key: Bytes, value: Bytes) -> Result<IndexHit> {
        let bad = || StorageError::Corrupt("index entry".into());
        let len = value
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
            .ok_or_else(bad)? as usize;
        if len > key.len() {
            return Err(bad());
        }
        RawDocument::from_bytes(value.get(4..).ok_or_else(bad)?).map_err(|_| bad())?;
        Ok(IndexHit {
            key,
            key_len: len,
            value,
        })
    }

    /// The values document `{"0": v1, …}`.
    pub fn values(&self) -> &RawDocument {
        match self.value.get(4..).map(RawDocument::from_bytes) {
            Some(Ok(d)) => d,
            _ => &NO_VALUES,
        }
    }

    /// The key part (`K1…Kn`).
    pub fn key_part(&self) -> &[u8] {
        self.key.get(..self.key_len).unwrap_or_default()
    }

    /// The document key (`E(_id)`).
    pub fn doc_key(&self) -> &[u8] {
        self.key.get(self.key_len..).unwrap_or_default()
    }
}

fn duplicate(coll: &CollectionMeta, idx: &IndexMeta, e: &IndexEntry) -> StorageError {
    // keyValue pairs the pattern's field names with the entry's values
    let mut kv = RawDocumentBuf::new();
    for ((field, _), (_, v)) in idx.fields().iter().zip(e.values.iter().flatten()) {
        if let Ok(k) = <&bson::raw::CStr>::try_from(field.as_str()) {
            kv.append(k, v);
        }
    }
    StorageError::DuplicateKey {
        namespace: coll.namespace(),
        index: idx.name.clone(),
        key_pattern: idx
            .key_pattern()
            .map(RawDocument::to_owned)
            .unwrap_or_default(),
        key_display: display::document(&kv),
        key_value: kv,
    }
}

impl WriteTxn<'_> {
    /// Whether changing these top-level fields can change some secondary index's entries.
    pub(crate) fn indexes_affected(&self, coll: &CollectionMeta, changed: &[&str]) -> bool {
        coll.secondary_indexes().any(|idx| {
            idx.partial_filter().is_some()
                || idx.fields().iter().any(|(f, _)| {
                    let head = f.split('.').next().unwrap_or_default();
                    changed.contains(&head)
                })
        })
    }

    fn mark_multikey(&mut self, space: SpaceId) -> Result<()> {
        let known = self
            .store
            .multikey
            .read()
            .map(|m| m.contains(&space))
            .unwrap_or(false);
        if !known {
            // Set before the commit: a query planned after the commit must see it.
            if let Ok(mut m) = self.store.multikey.write() {
                m.insert(space);
            }
            self.store.refresh_multikey()?;
            self.tx.put(CATALOG_SPACE, &multikey_key(space), &[1])?;
        }
        Ok(())
    }

    fn check_unique(
        &self,
        coll: &CollectionMeta,
        idx: &IndexMeta,
        e: &IndexEntry,
        doc_key: &[u8],
    ) -> Result<()> {
        for kv in self.tx.prefix(idx.space, &e.key)?.take(2) {
            let (k, _) = kv?;
            if k.get(e.key.len()..) != Some(doc_key) {
                return Err(duplicate(coll, idx, e));
            }
        }
        Ok(())
    }

    /// Puts the entries of one document into one index (for builds), uniqueness checked
    /// before anything is written.
    fn put_entries(
        &mut self,
        coll: &CollectionMeta,
        idx: &IndexMeta,
        doc_key: &[u8],
        keys: &IndexKeys,
    ) -> Result<()> {
        if idx.is_unique() {
            for e in &keys.entries {
                self.check_unique(coll, idx, e, doc_key)?;
            }
        }
        if keys.multikey {
            self.mark_multikey(idx.space)?;
        }
        for e in &keys.entries {
            let mut k = e.key.clone();
            k.extend_from_slice(doc_key);
            self.tx.put(idx.space, &k, &entry_value(e))?;
        }
        Ok(())
    }

    /// Moves a document's entries in every secondary index from those of `old` to those of
    /// `new` (`None` = no document: an insert or a delete). Everything that can refuse the
    /// change (key generation errors such as 171, uniqueness) is checked before anything is
    /// written, so a refused document leaves no entry behind; callers index before writing
    /// the document itself for the same reason.
    pub(crate) fn index_document(
        &mut self,
        coll: &CollectionMeta,
        doc_key: &[u8],
        old: Option<&RawDocument>,
        new: Option<&RawDocument>,
    ) -> Result<()> {
        /// One index's change: the full keys to delete, and which of `keys`' entries to put.
        struct Change {
            space: SpaceId,
            keys: IndexKeys,
            deletes: Vec<Vec<u8>>,
            puts: Vec<usize>,
        }
        let keygen = self.store.keygen.clone();
        let Some(old) = old else {
            return self.index_new_document(coll, doc_key, new, &*keygen);
        };
        let full = |e: &IndexEntry| {
            let mut k = e.key.clone();
            k.extend_from_slice(doc_key);
            k
        };
        let mut changes: Vec<Change> = Vec::new();
        // Phase 1: compute and check; nothing is written.
        for idx in coll.secondary_indexes() {
            let old_keys = keygen.keys(idx, old)?;
            let new_keys = match new {
                Some(d) => keygen.keys(idx, d)?,
                None => IndexKeys::default(),
            };
            let before: HashMap<&[u8], &IndexEntry> = old_keys
                .entries
                .iter()
                .map(|e| (e.key.as_slice(), e))
                .collect();
            let mut deletes = Vec::new();
            if !old_keys.entries.is_empty() {
                let after: HashSet<&[u8]> =
                    new_keys.entries.iter().map(|e| e.key.as_slice()).collect();
                for e in &old_keys.entries {
                    if !after.contains(e.key.as_slice()) {
                        deletes.push(full(e));
                    }
                }
            }
            let mut puts = Vec::new();
            for (i, e) in new_keys.entries.iter().enumerate() {
                match before.get(e.key.as_slice()) {
                    // same key, same stored values: nothing to write
                    Some(o) if o.values == e.values => {}
                    // same key, values of another type (1 → 1.0): rewrite the value only
                    Some(_) => puts.push(i),
                    None => {
                        if idx.is_unique() {
                            self.check_unique(coll, idx, e, doc_key)?;
                        }
                        puts.push(i);
                    }
                }
            }
            changes.push(Change {
                space: idx.space,
                keys: new_keys,
                deletes,
                puts,
            });
        }
        // Phase 2: write, through one key buffer and one value buffer.
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for c in changes {
            if c.keys.multikey {
                self.mark_multikey(c.space)?;
            }
            for d in &c.deletes {
                self.tx.delete(c.space, d)?;
            }
            for e in c.puts.iter().filter_map(|&i| c.keys.entries.get(i)) {
                self.put_entry(c.space, e, doc_key, (&mut k, &mut v))?;
            }
        }
        Ok(())
    }

    /// [`WriteTxn::index_document`] without an old document (an insert): every generated
    /// entry is new, so there is nothing to diff — each index's entries are generated and
    /// checked (uniqueness) for every index first, then written straight from the generated
    /// entries, with the same order of checks and writes as the general path.
    fn index_new_document(
        &mut self,
        coll: &CollectionMeta,
        doc_key: &[u8],
        new: Option<&RawDocument>,
        keygen: &dyn crate::index::IndexKeyGen,
    ) -> Result<()> {
        let Some(new) = new else { return Ok(()) };
        // Phase 1: compute and check; nothing is written.
        let mut changes: Vec<(SpaceId, IndexKeys)> = Vec::with_capacity(coll.indexes.len());
        for idx in coll.secondary_indexes() {
            let keys = keygen.keys(idx, new)?;
            if idx.is_unique() {
                for e in &keys.entries {
                    self.check_unique(coll, idx, e, doc_key)?;
                }
            }
            changes.push((idx.space, keys));
        }
        // Phase 2: write, through one key buffer and one value buffer.
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for (space, keys) in changes {
            if keys.multikey {
                self.mark_multikey(space)?;
            }
            for e in &keys.entries {
                self.put_entry(space, e, doc_key, (&mut k, &mut v))?;
            }
        }
        Ok(())
    }

    /// Puts one index entry of the document `doc_key`, building its key and value in the
    /// caller's reused buffers (key, value).
    fn put_entry(
        &mut self,
        space: SpaceId,
        e: &IndexEntry,
        doc_key: &[u8],
        (k, v): (&mut Vec<u8>, &mut Vec<u8>),
    ) -> Result<()> {
        k.clear();
        k.reserve(e.key.len() + doc_key.len());
        k.extend_from_slice(&e.key);
        k.extend_from_slice(doc_key);
        v.clear();
        v.reserve(4 + e.values.as_bytes().len());
        entry_value_into(e, v);
        Ok(self.tx.put(space, k, v)?)
    }

    /// The names of the indexes among `specs` that `coll` does not have yet (each spec
    /// validated and checked against the existing indexes, as `createIndexes` does).
    pub fn indexes_to_add(
        &self,
        coll: &CollectionMeta,
        specs: &[RawDocumentBuf],
    ) -> Result<Vec<String>> {
        let mut requested = Vec::with_capacity(specs.len());
        for spec in specs {
            self.store.keygen.validate(spec)?;
            requested.push(requested_index(spec)?);
        }
        Ok(plan_new_indexes(&coll.indexes, &requested)?
            .into_iter()
            .map(|i| i.name)
            .collect())
    }

    /// Whether the collection holds no document, as this transaction sees it.
    pub fn is_empty(&self, coll: &CollectionMeta) -> Result<bool> {
        Ok(self
            .tx
            .range(
                coll.id,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            )?
            .next()
            .is_none())
    }

    /// `createIndexes` inside a multi-document transaction, for a collection this
    /// transaction created (the caller enforces MongoDB's rule): the indexes are registered
    /// ready in the transaction's catalog record and built from the documents the transaction
    /// has inserted so far, all visible to others only when it commits.
    pub fn create_indexes_here(
        &mut self,
        db: &str,
        coll: &str,
        specs: &[RawDocumentBuf],
    ) -> Result<CreatedIndexes> {
        let created_collection = self.collection(db, coll)?.is_none();
        let meta = self.ensure_collection(db, coll)?;
        let mut requested = Vec::with_capacity(specs.len());
        for spec in specs {
            self.store.keygen.validate(spec)?;
            requested.push(requested_index(spec)?);
        }
        let to_add = plan_new_indexes(&meta.indexes, &requested)?;
        let mut out = CreatedIndexes {
            created_collection,
            before: meta.indexes.len(),
            after: meta.indexes.len(),
            new: Vec::new(),
        };
        if to_add.is_empty() {
            return Ok(out);
        }
        let first = self.store.alloc_spaces(to_add.len() as u64);
        let mut next = (*meta).clone();
        let mut added = Vec::new();
        for (i, idx) in to_add.into_iter().enumerate() {
            let mut idx = idx;
            idx.space = first + i as u64;
            idx.state = IndexState::Ready;
            self.store.engine().open_space(idx.space)?;
            added.push(idx.clone());
            next.indexes.push(idx);
        }
        // Record the spaces first, so an abort drops them whatever happens below.
        if let Some(c) = self
            .created
            .iter_mut()
            .find(|m| m.db == db && m.name == coll)
        {
            *c = next.clone();
        }
        let keygen = self.store.keygen.clone();
        let mut resume: Option<Vec<u8>> = None;
        loop {
            let batch = self.scan_where(
                &next,
                resume.as_deref(),
                false,
                ScanLimits::docs(BUILD_CHUNK),
                &mut |_| true,
            )?;
            for doc in &batch.docs {
                let id = doc
                    .get("_id")
                    .ok()
                    .flatten()
                    .ok_or_else(|| StorageError::Corrupt("document without _id".into()))?;
                let dk = id_key(id)?;
                for idx in &added {
                    let keys = keygen.keys(idx, doc)?;
                    self.put_entries(&next, idx, &dk, &keys)?;
                }
            }
            match batch.resume {
                Some(r) => resume = Some(r),
                None => break,
            }
        }
        self.tx.put(
            CATALOG_SPACE,
            &collection_key(db, coll),
            next.to_bson().as_bytes(),
        )?;
        let mut list = bson::RawArrayBuf::new();
        for i in &added {
            list.push(i.list_spec());
        }
        self.log(Change::on("createIndexes", &next).with("desc", bson::rawdoc! {"indexes": list}));
        out.after = next.indexes.len();
        out.new = added.iter().map(|i| i.name.clone()).collect();
        Ok(out)
    }

    /// Entries of `idx` within `ranges` (each `(start, end)` over entry keys), in key order
    /// or reverse; reads join this transaction's read set.
    pub fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<IndexHit>> {
        index_scan(&*self.tx, idx, ranges, reverse, limit)
    }
}

/// Entries [`index_scan`] reserves room for up front (the executor asks for at most 256 at a
/// time; larger limits grow the result as it fills).
const SCAN_RESERVE: usize = 256;

/// Reads index entries in `ranges` (at most `limit`; a `limit` of 0 still reads one entry).
pub fn index_scan(
    r: &dyn Read,
    idx: &IndexMeta,
    ranges: &[KeyRange],
    reverse: bool,
    limit: usize,
) -> Result<Vec<IndexHit>> {
    let mut out = Vec::with_capacity(limit.clamp(1, SCAN_RESERVE));
    let mut read = |(start, end): &KeyRange| -> Result<bool> {
        let (lo, hi) = (
            start.as_ref().map(Vec::as_slice),
            end.as_ref().map(Vec::as_slice),
        );
        if crate::store::range_is_empty(lo, hi) {
            return Ok(true);
        }
        for kv in r.range(idx.space, lo, hi, reverse)? {
            let (k, v) = kv?;
            out.push(IndexHit::parse(k, v)?);
            if out.len() >= limit {
                return Ok(false);
            }
        }
        Ok(true)
    };
    if reverse {
        for range in ranges.iter().rev() {
            if !read(range)? {
                break;
            }
        }
    } else {
        for range in ranges {
            if !read(range)? {
                break;
            }
        }
    }
    Ok(out)
}

/// What `createIndexes` registered.
#[derive(Debug, Clone, Default)]
pub struct CreatedIndexes {
    /// Whether the collection had to be created.
    pub created_collection: bool,
    /// Number of indexes before.
    pub before: usize,
    /// Number of indexes after.
    pub after: usize,
    /// The new indexes (to be built).
    pub new: Vec<String>,
}

/// The name MongoDB generates for a key pattern: `a_1_b_-1`.
pub fn default_index_name(pattern: &RawDocument) -> String {
    let mut parts = Vec::new();
    for (k, v) in pattern.iter().flatten() {
        let v = match v {
            RawBsonRef::Int32(i) => i.to_string(),
            RawBsonRef::Int64(i) => i.to_string(),
            RawBsonRef::Double(d) => {
                if d.fract() == 0.0 {
                    format!("{}", d as i64)
                } else {
                    d.to_string()
                }
            }
            RawBsonRef::String(s) => s.to_string(),
            other => format!("{other:?}"),
        };
        parts.push(format!("{}_{v}", k.as_str()));
    }
    parts.join("_")
}

/// The options that make two indexes on the same key different, for the "identical index"
/// check: everything but `v`, `key`, `name`, `background` and `ns`, compared as MongoDB
/// compares values (`100` and `NumberLong(100)` are the same value).
fn same_options(a: &RawDocument, b: &RawDocument) -> bool {
    fn options(d: &RawDocument) -> Vec<(&str, RawBsonRef<'_>)> {
        let mut v: Vec<(&str, RawBsonRef<'_>)> = d
            .iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "v" | "key" | "name" | "background" | "ns"))
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        v.sort_by(|x, y| x.0.cmp(y.0));
        v
    }
    let (a, b) = (options(a), options(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|((ka, va), (kb, vb))| {
            ka == kb && crate::compare::compare_values(*va, *vb) == std::cmp::Ordering::Equal
        })
}

/// Whether a collation is the simple one (`{locale: "simple"}`).
fn is_simple_collation(v: RawBsonRef<'_>) -> bool {
    let RawBsonRef::Document(c) = v else {
        return false;
    };
    matches!(c.get("locale"), Ok(Some(RawBsonRef::String("simple")))) && c.iter().count() == 1
}

/// A requested specification in the form MongoDB's catalog stores it (`validateIndexSpec`,
/// `validateIndexSpecCollation`, then `IndexCatalogImpl::_fixIndexSpec`): `v` as an int (2 when
/// absent), then `unique`, `hidden` and `prepareUnique` as `true` when set (dropped when
/// false), `key`, `name`, then the other options in request order without `ns`, `dropDups`,
/// `_id` and a simple collation (the simple collation is the absence of one), and for a
/// `2dsphere` key the `2dsphereIndexVersion: 3` its access method adds when absent.
fn catalog_spec(spec: &RawDocument, key: &RawDocument, name: &str) -> RawDocumentBuf {
    use bson::raw::cstr;
    let mut out = RawDocumentBuf::new();
    let v = spec
        .get("v")
        .ok()
        .flatten()
        .map_or(2, crate::index::safe_number_int);
    out.append(cstr!("v"), v);
    for flag in [cstr!("unique"), cstr!("hidden"), cstr!("prepareUnique")] {
        if spec
            .get(flag.as_str())
            .ok()
            .flatten()
            .is_some_and(crate::index::true_value)
        {
            out.append(flag, true);
        }
    }
    out.append(cstr!("key"), key);
    out.append(cstr!("name"), name);
    for (k, v) in spec.iter().flatten() {
        let skip = matches!(
            k.as_str(),
            "v" | "unique"
                | "hidden"
                | "prepareUnique"
                | "key"
                | "name"
                | "ns"
                | "dropDups"
                | "_id"
        ) || (k.as_str() == "collation" && is_simple_collation(v));
        if !skip {
            out.append(k, v);
        }
    }
    // The 2dsphere access method records the index version it builds (3) when not given.
    let sphere = key
        .iter()
        .flatten()
        .any(|(_, v)| matches!(v, RawBsonRef::String("2dsphere")));
    if sphere && spec.get("2dsphereIndexVersion").ok().flatten().is_none() {
        out.append(cstr!("2dsphereIndexVersion"), 3i32);
    }
    out
}

/// The name and catalog form of a requested specification. The key generator has validated
/// it already (with MongoDB's codes and messages); these checks only stand in for it when no
/// validation is plugged in.
fn requested_index(spec: &RawDocument) -> Result<(String, RawDocumentBuf)> {
    let refused = |code: i32, message: &str| StorageError::IndexConflict {
        code,
        message: message.to_string(),
    };
    let key = match spec.get("key") {
        Ok(Some(RawBsonRef::Document(k))) => k,
        Ok(Some(_)) => return Err(refused(14, "The field 'key' must be an object")),
        _ => {
            return Err(refused(
                9,
                "The 'key' field is a required property of an index specification",
            ));
        }
    };
    let name = match spec.get("name") {
        Ok(Some(RawBsonRef::String(n))) => n.to_string(),
        Ok(None) => default_index_name(key),
        _ => return Err(refused(14, "The field 'name' must be a string")),
    };
    let catalog = catalog_spec(spec, key, &name);
    Ok((name, catalog))
}

/// Checks requested indexes (name, catalog spec) against `existing` and against each other as
/// MongoDB does, and returns those to add (identical existing ones are skipped).
fn plan_new_indexes(
    existing: &[IndexMeta],
    requested: &[(String, RawDocumentBuf)],
) -> Result<Vec<IndexMeta>> {
    let mut to_add: Vec<IndexMeta> = Vec::new();
    for (name, spec) in requested {
        let key = spec.get_document("key").map_err(|_| {
            StorageError::Corrupt("a requested index specification lost its key".into())
        })?;
        let mut existing_same = false;
        for ex in existing.iter().chain(to_add.iter()) {
            let same_key = ex.key_pattern().map(RawDocument::as_bytes) == Some(key.as_bytes());
            let same_name = ex.name == *name;
            let same_opts = same_options(&ex.spec, spec);
            if same_name && same_key && same_opts {
                existing_same = true;
                break;
            }
            if same_name && !same_key {
                return Err(StorageError::IndexConflict {
                    code: 86,
                    message: format!(
                        "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                        display::document(spec),
                        display::document(&ex.spec)
                    ),
                });
            }
            if same_name {
                return Err(StorageError::IndexConflict {
                    code: 85,
                    message: format!(
                        "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                        display::document(spec),
                        display::document(&ex.spec)
                    ),
                });
            }
            if same_key && same_opts {
                return Err(StorageError::IndexConflict {
                    code: 85,
                    message: format!("Index already exists with a different name: {}", ex.name),
                });
            }
        }
        if existing_same {
            continue;
        }
        if ex_is_id(key) {
            // {_id: 1} under another name or options: the _id index is fixed.
            return Err(StorageError::IndexConflict {
                code: 85,
                message: format!(
                    "Index already exists with a different name: _id_ (requested {name})"
                ),
            });
        }
        to_add.push(IndexMeta {
            name: name.clone(),
            spec: spec.clone(),
            space: 0,
            state: IndexState::Building,
            multikey: false,
        });
    }
    Ok(to_add)
}

impl Store {
    /// Whether an index space is multikey.
    pub fn is_multikey(&self, space: SpaceId) -> bool {
        self.multikey
            .read()
            .map(|m| m.contains(&space))
            .unwrap_or(true)
    }

    /// Registers new indexes (state building) as `createIndexes` does. Every specification is
    /// validated (by the key generator) and checked against the existing indexes and the
    /// others of the request before anything is created, so a refused request leaves no
    /// collection behind (MongoDB runs `parseAndValidateIndexSpecs` first and rolls the
    /// implicit creation back on a conflict). Identical existing indexes are skipped. A
    /// missing collection is then created, even when nothing is left to build (a request for
    /// `_id_` alone).
    pub fn create_indexes(
        &self,
        db: &str,
        coll: &str,
        specs: &[RawDocumentBuf],
    ) -> Result<CreatedIndexes> {
        if self.collection(db, coll).is_none() {
            namespace::check_write(db, coll)?;
        }
        let mut requested = Vec::with_capacity(specs.len());
        for spec in specs {
            self.keygen.validate(spec)?;
            requested.push(requested_index(spec)?);
        }
        // A missing collection would start with `_id_` alone.
        let current = self
            .collection(db, coll)
            .map(|m| m.indexes.clone())
            .unwrap_or_else(|| vec![IndexMeta::id_index()]);
        plan_new_indexes(&current, &requested)?;
        let created_collection = match self.collection(db, coll) {
            Some(_) => false,
            None => match self.create_collection(db, coll, &RawDocumentBuf::new()) {
                Ok(created) => created,
                Err(StorageError::NamespaceExists(_)) => false,
                Err(e) => return Err(e),
            },
        };
        let _ddl = self
            .ddl
            .lock()
            .map_err(|_| StorageError::Corrupt("ddl lock poisoned".into()))?;
        let meta = self.collection(db, coll).ok_or_else(|| {
            StorageError::NamespaceNotFound(format!(
                "collection {db}.{coll} was dropped concurrently"
            ))
        })?;
        // Again under the DDL lock: another request may have added indexes meanwhile.
        let to_add = plan_new_indexes(&meta.indexes, &requested)?;
        let mut out = CreatedIndexes {
            created_collection,
            before: meta.indexes.len(),
            after: meta.indexes.len(),
            new: Vec::new(),
        };
        if to_add.is_empty() {
            return Ok(out);
        }
        let mut next_meta = (*meta).clone();
        let r = self.ddl_tx(|tx| {
            let next = self.alloc_spaces(to_add.len() as u64);
            let mut space = next;
            next_meta = (*meta).clone();
            for idx in &to_add {
                let mut idx = idx.clone();
                idx.space = space;
                self.engine().open_space(space)?;
                space += 1;
                next_meta.indexes.push(idx);
            }
            tx.put(
                CATALOG_SPACE,
                crate::catalog::NEXT_ID_KEY,
                &space.to_be_bytes(),
            )?;
            tx.put(
                CATALOG_SPACE,
                &collection_key(db, coll),
                next_meta.to_bson().as_bytes(),
            )?;
            Ok(())
        });
        r?;
        out.after = next_meta.indexes.len();
        out.new = to_add.iter().map(|i| i.name.clone()).collect();
        self.swap_catalog(self.catalog().with(next_meta))?;
        Ok(out)
    }

    /// Builds a registered index from the collection's documents, chunk by chunk, resuming
    /// where a previous attempt stopped; `progress(done)` is called after each chunk. On
    /// failure (duplicate key, unindexable document) the index is removed.
    pub fn build_index(
        &self,
        db: &str,
        coll: &str,
        name: &str,
        progress: &dyn Fn(u64),
    ) -> Result<()> {
        let mut done = 0u64;
        loop {
            let r = self.write(Durability::Buffered, |tx| -> Result<Option<bool>> {
                let Some(meta) = tx.collection(db, coll)? else {
                    return Ok(None);
                };
                let Some(idx) = meta
                    .index(name)
                    .filter(|i| i.state == IndexState::Building)
                    .cloned()
                else {
                    return Ok(None);
                };
                let bk = build_key(idx.space);
                let resume = tx.tx.get(CATALOG_SPACE, &bk)?.map(|b| b.to_vec());
                let limits = ScanLimits {
                    max_docs: BUILD_CHUNK,
                    max_bytes: usize::MAX,
                    max_examined: usize::MAX,
                    first_may_exceed: true,
                };
                let batch =
                    tx.scan_where(&meta, resume.as_deref(), false, limits, &mut |_| true)?;
                let keygen = tx.store.keygen.clone();
                for doc in &batch.docs {
                    let id = doc
                        .get("_id")
                        .ok()
                        .flatten()
                        .ok_or_else(|| StorageError::Corrupt("document without _id".into()))?;
                    let dk = id_key(id)?;
                    let keys = keygen.keys(&idx, doc)?;
                    tx.put_entries(&meta, &idx, &dk, &keys)?;
                }
                done = batch.docs.len() as u64;
                match batch.resume {
                    Some(r) => {
                        tx.tx.put(CATALOG_SPACE, &bk, &r)?;
                        Ok(Some(false))
                    }
                    None => Ok(Some(true)),
                }
            });
            match r {
                Ok(None) => return Ok(()),
                Ok(Some(finished)) => {
                    progress(done);
                    if finished {
                        break;
                    }
                }
                Err(e) => {
                    let _ = self.drop_index(db, coll, name);
                    return Err(e);
                }
            }
        }
        // Ready: the catalog state flips and the progress key goes.
        let _ddl = self
            .ddl
            .lock()
            .map_err(|_| StorageError::Corrupt("ddl lock poisoned".into()))?;
        let Some(meta) = self.collection(db, coll) else {
            return Ok(());
        };
        let mut next = (*meta).clone();
        let mut space = None;
        for i in &mut next.indexes {
            if i.name == name {
                i.state = IndexState::Ready;
                space = Some(i.space);
            }
        }
        let Some(space) = space else { return Ok(()) };
        let specs: Vec<RawDocumentBuf> = next
            .indexes
            .iter()
            .filter(|i| i.name == name)
            .map(IndexMeta::list_spec)
            .collect();
        let mut list = bson::RawArrayBuf::new();
        for sp in specs {
            list.push(sp);
        }
        let change =
            Change::on("createIndexes", &next).with("desc", bson::rawdoc! {"indexes": list});
        self.ddl_tx_logged(vec![change], |tx| {
            tx.put(
                CATALOG_SPACE,
                &collection_key(db, coll),
                next.to_bson().as_bytes(),
            )?;
            tx.delete(CATALOG_SPACE, &build_key(space))?;
            Ok(())
        })?;
        self.swap_catalog(self.catalog().with(next))?;
        Ok(())
    }

    /// Indexes still building, as (db, collection, name) — to resume after a restart.
    pub fn building_indexes(&self) -> Vec<(String, String, String)> {
        let cat = self.catalog();
        cat.all()
            .flat_map(|m| {
                m.indexes
                    .iter()
                    .filter(|i| i.state == IndexState::Building)
                    .map(|i| (m.db.clone(), m.name.clone(), i.name.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Drops a secondary index (its whole space); `_id_` cannot be dropped.
    pub fn drop_index(&self, db: &str, coll: &str, name: &str) -> Result<()> {
        let _ddl = self
            .ddl
            .lock()
            .map_err(|_| StorageError::Corrupt("ddl lock poisoned".into()))?;
        let Some(meta) = self.collection(db, coll) else {
            return Err(StorageError::NamespaceNotFound(format!(
                "ns not found {db}.{coll}"
            )));
        };
        let Some(idx) = meta.index(name).cloned() else {
            return Err(StorageError::IndexNotFound(format!(
                "index not found with name [{name}]"
            )));
        };
        if idx.is_id() {
            return Err(StorageError::InvalidOptions("cannot drop _id index".into()));
        }
        let mut next = (*meta).clone();
        next.indexes.retain(|i| i.name != name);
        let change = Change::on("dropIndexes", &meta)
            .with("desc", bson::rawdoc! {"indexes": [idx.list_spec()]});
        self.ddl_tx_logged(vec![change], |tx| {
            tx.put(
                CATALOG_SPACE,
                &collection_key(db, coll),
                next.to_bson().as_bytes(),
            )?;
            tx.delete(CATALOG_SPACE, &build_key(idx.space))?;
            tx.delete(CATALOG_SPACE, &multikey_key(idx.space))?;
            Ok(())
        })?;
        self.swap_catalog(self.catalog().with(next))?;
        if let Ok(mut m) = self.multikey.write() {
            m.remove(&idx.space);
        }
        self.engine().drop_space(idx.space)?;
        Ok(())
    }

    /// Changes index options (`collMod`) as MongoDB's catalog does (`updateTTLSetting`,
    /// `updateHiddenSetting`): each `(field, Some(value))` removes the field and appends it
    /// with the new value at the end of the specification; `(field, None)` removes it (an
    /// unhidden index has no `hidden` field). Returns each field's old value.
    pub fn modify_index(
        &self,
        db: &str,
        coll: &str,
        name: &str,
        set: &[(String, Option<bson::RawBson>)],
    ) -> Result<Vec<(String, Option<bson::RawBson>)>> {
        let _ddl = self
            .ddl
            .lock()
            .map_err(|_| StorageError::Corrupt("ddl lock poisoned".into()))?;
        let Some(meta) = self.collection(db, coll) else {
            return Err(StorageError::NamespaceNotFound(format!(
                "ns does not exist: {db}.{coll}"
            )));
        };
        let Some(idx) = meta.index(name).cloned() else {
            return Err(StorageError::IndexNotFound(format!(
                "cannot find index {name} for ns {db}.{coll}"
            )));
        };
        let old: Vec<(String, Option<bson::RawBson>)> = set
            .iter()
            .map(|(f, _)| {
                let v = idx.spec.get(f).ok().flatten().map(bson::RawBson::from);
                (f.clone(), v)
            })
            .collect();
        let mut spec = RawDocumentBuf::new();
        for (k, v) in idx.spec.iter().flatten() {
            if !set.iter().any(|(f, _)| f == k.as_str()) {
                spec.append(k, v);
            }
        }
        for (f, v) in set {
            if let Some(v) = v {
                let k = <&bson::raw::CStr>::try_from(f.as_str())
                    .map_err(|e| StorageError::BadValue(e.to_string()))?;
                spec.append(k, v.clone());
            }
        }
        let mut next = (*meta).clone();
        for i in &mut next.indexes {
            if i.name == name {
                i.spec = spec.clone();
            }
        }
        let mut index = bson::rawdoc! {"name": name};
        for (f, v) in set {
            if let (Some(v), Ok(k)) = (v, <&bson::raw::CStr>::try_from(f.as_str())) {
                index.append(k, v.clone());
            }
        }
        let change = Change::on("modify", &meta).with("desc", bson::rawdoc! {"index": index});
        self.ddl_tx_logged(vec![change], |tx| {
            tx.put(
                CATALOG_SPACE,
                &collection_key(db, coll),
                next.to_bson().as_bytes(),
            )?;
            Ok(())
        })?;
        self.swap_catalog(self.catalog().with(next))?;
        Ok(old)
    }

    /// The index with this name, as currently in the catalog.
    pub fn index(
        &self,
        db: &str,
        coll: &str,
        name: &str,
    ) -> Option<(Arc<CollectionMeta>, IndexMeta)> {
        let meta = self.collection(db, coll)?;
        let idx = meta.index(name)?.clone();
        Some((meta, idx))
    }
}

fn ex_is_id(key: &RawDocument) -> bool {
    let mut it = key.iter().flatten();
    matches!(it.next(), Some((k, _)) if k.as_str() == "_id") && it.next().is_none()
}

impl crate::store::ReadTxn {
    /// Entries of `idx` within `ranges`, in key order or reverse, at most `limit`.
    pub fn index_scan(
        &self,
        idx: &IndexMeta,
        ranges: &[KeyRange],
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<IndexHit>> {
        index_scan(self.snapshot(), idx, ranges, reverse, limit)
    }

    /// The document with this key.
    pub fn get_by_key(&self, coll: &CollectionMeta, key: &[u8]) -> Result<Option<RawDocumentBuf>> {
        crate::store::get_document(self.snapshot(), coll.id, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn catalog_spec_is_fix_index_spec_form() {
        let spec = rawdoc! {
            "name": "a_1",
            "sparse": 1,
            "key": {"a": 1},
            "unique": 1,
            "hidden": false,
            "ns": "db.c",
            "dropDups": true,
            "collation": {"locale": "simple"},
            "expireAfterSeconds": 10_i64,
        };
        let key = spec.get_document("key").unwrap();
        assert_eq!(
            catalog_spec(&spec, key, "a_1"),
            rawdoc! {
                "v": 2,
                "unique": true,
                "key": {"a": 1},
                "name": "a_1",
                "sparse": 1,
                "expireAfterSeconds": 10_i64,
            }
        );
        let v1 = rawdoc! {"key": {"a": 1}, "name": "a_1", "v": 1.0};
        let key = v1.get_document("key").unwrap();
        assert_eq!(
            catalog_spec(&v1, key, "a_1"),
            rawdoc! {"v": 1, "key": {"a": 1}, "name": "a_1"}
        );
    }

    #[test]
    fn options_compare_as_values() {
        let a = rawdoc! {"v": 2, "key": {"t": 1}, "name": "t", "expireAfterSeconds": 100};
        let b = rawdoc! {"v": 2, "name": "t", "key": {"t": 1}, "expireAfterSeconds": 100_i64, "background": true};
        assert!(same_options(&a, &b));
        let c = rawdoc! {"v": 2, "key": {"t": 1}, "name": "t", "expireAfterSeconds": 200};
        assert!(!same_options(&a, &c));
        let d = rawdoc! {"v": 2, "key": {"t": 1}, "name": "t"};
        assert!(!same_options(&a, &d));
    }
}
