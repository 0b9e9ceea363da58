//! Collection validation (the `validate` command): walk a collection and prove that its
//! documents, its index entries and its statistics agree.
//!
//! [`validate`] reads one storage snapshot:
//! 1. every document is read back whole; its key must be `E(_id)` of its `_id`, and with
//!    `full` every nested element must decode (corrupt ones are `corruptRecords`);
//! 2. for every secondary index, the entries each document should have are computed by the
//!    same key generator writes use, counted and hashed (an order-independent sum of a 64-bit
//!    hash of each entry key), and the index's actual entries are counted and hashed the same
//!    way. Equal counts and sums prove the index consistent in one pass over each side; on a
//!    difference a second pass names every `missingIndexEntries` (a document's entry that is
//!    not in the index) and `extraIndexEntries` (an entry whose document is gone or does not
//!    produce it), the index is reported invalid, and so is the collection;
//! 3. an index that is not marked multikey while a document gives it several entries is an
//!    error (a query could return wrong results);
//! 4. for a capped collection, its insertion-order space has exactly one order entry and one
//!    way-back entry per document, each order entry names an existing document and is paired
//!    with its way back, and the record-id counter is above every record id
//!    ([`cairn_storage::capped::check_natural`]);
//! 5. the collection's statistics (document count and data size, the "fast count"), read in
//!    the same snapshot, must match what the walk found; a difference is a warning naming it
//!    repairable, as MongoDB reports a wrong fast count.
//!
//! The walk checks for interruption between batches (`maxTimeMS`, `killOp`). Reported lists
//! are capped at [`MAX_REPORTED`] entries each.

use std::hash::{Hash, Hasher};
use std::ops::Bound;

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use cairn_storage::catalog::CollectionMeta;
use cairn_storage::index::{IndexKeyGen, IndexMeta, IndexState};
use cairn_storage::store::id_key;
use cairn_storage::{ReadTxn, ScanLimits, Store};

use crate::error::CommandError;

/// The most entries reported in each of `extraIndexEntries`, `missingIndexEntries` and
/// `corruptRecords`.
pub const MAX_REPORTED: usize = 100;

/// Documents or entries read per storage call.
const BATCH: usize = 1000;

/// What a validation found.
#[derive(Debug, Default)]
pub struct Report {
    /// Documents walked.
    pub nrecords: u64,
    /// Documents that failed the checks.
    pub invalid_documents: u64,
    /// `(index name, entries)` in catalog order (`_id_` first).
    pub keys_per_index: Vec<(String, u64)>,
    /// `(index name, valid)` in catalog order.
    pub index_valid: Vec<(String, bool)>,
    /// Entries in an index that no document produces.
    pub extra: Vec<RawDocumentBuf>,
    /// Entries a document produces that its index lacks.
    pub missing: Vec<RawDocumentBuf>,
    /// Documents that could not be read back.
    pub corrupt: Vec<RawDocumentBuf>,
    /// Problems that make the collection invalid.
    pub errors: Vec<String>,
    /// Problems that do not.
    pub warnings: Vec<String>,
}

impl Report {
    /// Whether the collection is valid.
    pub fn valid(&self) -> bool {
        self.errors.is_empty()
    }
}

fn entry_hash(key: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// The `{field: value}` form of an entry's values `{"0": v1, …}`, with the index's field
/// names.
fn index_key(idx: &IndexMeta, values: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for ((field, _), (_, v)) in idx.fields().iter().zip(values.iter().flatten()) {
        if let Ok(k) = <&bson::raw::CStr>::try_from(field.as_str()) {
            out.append(k, v);
        }
    }
    out
}

fn id_doc(doc: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    if let Ok(Some(id)) = doc.get("_id") {
        out.append(bson::raw::cstr!("_id"), id);
    }
    out
}

/// Whether every element of `doc`, recursively, decodes.
fn deep_valid(doc: &RawDocument, depth: usize) -> bool {
    if depth > 200 {
        return false;
    }
    doc.iter().all(|el| match el {
        Ok((_, RawBsonRef::Document(d))) => deep_valid(d, depth + 1),
        Ok((_, RawBsonRef::Array(a))) => a.into_iter().all(|v| match v {
            Ok(RawBsonRef::Document(d)) => deep_valid(d, depth + 1),
            Ok(RawBsonRef::Array(inner)) => RawDocument::from_bytes(inner.as_bytes())
                .map(|d| deep_valid(d, depth + 1))
                .unwrap_or(false),
            Ok(_) => true,
            Err(_) => false,
        }),
        Ok(_) => true,
        Err(_) => false,
    })
}

/// Per-index running totals of the walk.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    count: u64,
    hash: u64,
}

impl Tally {
    fn add(&mut self, key: &[u8]) {
        self.count += 1;
        self.hash = self.hash.wrapping_add(entry_hash(key));
    }
}

/// Visits every document of the collection in `_id` order, batch by batch.
fn for_each_document(
    snap: &ReadTxn,
    meta: &CollectionMeta,
    mut f: impl FnMut(RawDocumentBuf) -> Result<(), CommandError>,
) -> Result<(), CommandError> {
    let mut resume: Option<Vec<u8>> = None;
    loop {
        crate::deadline::check()?;
        let batch = snap.scan_where(
            meta,
            resume.as_deref(),
            false,
            ScanLimits::docs(BATCH),
            &mut |_| true,
        )?;
        for d in batch.docs {
            f(d)?;
        }
        match batch.resume {
            Some(r) => resume = Some(r),
            None => return Ok(()),
        }
    }
}

/// Visits every entry of an index in key order, batch by batch.
fn for_each_entry(
    snap: &ReadTxn,
    idx: &IndexMeta,
    mut f: impl FnMut(&cairn_storage::index_ops::IndexHit) -> Result<(), CommandError>,
) -> Result<(), CommandError> {
    let mut start: Bound<Vec<u8>> = Bound::Unbounded;
    loop {
        crate::deadline::check()?;
        let hits = snap.index_scan(idx, &[(start.clone(), Bound::Unbounded)], false, BATCH)?;
        let Some(last) = hits.last() else {
            return Ok(());
        };
        start = Bound::Excluded(last.key.to_vec());
        let done = hits.len() < BATCH;
        for h in &hits {
            f(h)?;
        }
        if done {
            return Ok(());
        }
    }
}

fn push_capped(list: &mut Vec<RawDocumentBuf>, doc: RawDocumentBuf) {
    if list.len() < MAX_REPORTED {
        list.push(doc);
    }
}

/// Validates `meta` (see the module doc).
pub fn validate(
    store: &Store,
    keygen: &dyn IndexKeyGen,
    meta: &CollectionMeta,
    full: bool,
) -> Result<Report, CommandError> {
    let mut report = Report::default();
    let snap = store.read()?;
    let indexes: Vec<&IndexMeta> = meta
        .secondary_indexes()
        .filter(|i| i.state == IndexState::Ready)
        .collect();
    let mut expected = vec![Tally::default(); indexes.len()];
    let mut not_multikey: Vec<Option<RawDocumentBuf>> = vec![None; indexes.len()];
    let mut size: i64 = 0;
    let mut id_mismatch = 0u64;
    for_each_document(&snap, meta, |doc| {
        report.nrecords += 1;
        size += doc.as_bytes().len() as i64;
        let key = match doc.get("_id") {
            Ok(Some(id)) => id_key(id).ok(),
            _ => None,
        };
        let Some(key) = key else {
            report.invalid_documents += 1;
            id_mismatch += 1;
            push_capped(
                &mut report.corrupt,
                rawdoc! {"reason": "document without a valid _id"},
            );
            return Ok(());
        };
        if full && !deep_valid(&doc, 0) {
            report.invalid_documents += 1;
            push_capped(
                &mut report.corrupt,
                rawdoc! {"idKey": id_doc(&doc), "reason": "document does not decode"},
            );
        }
        for (i, idx) in indexes.iter().enumerate() {
            match keygen.keys(idx, &doc) {
                Ok(keys) => {
                    if keys.multikey && !store.is_multikey(idx.space) && not_multikey[i].is_none() {
                        not_multikey[i] = Some(id_doc(&doc));
                    }
                    for e in &keys.entries {
                        let mut full_key = e.key.clone();
                        full_key.extend_from_slice(&key);
                        expected[i].add(&full_key);
                    }
                }
                Err(e) => {
                    report.invalid_documents += 1;
                    report.errors.push(format!(
                        "Document with {} cannot be indexed by {}: {e}",
                        crate::validate::display(&id_doc(&doc)),
                        idx.name
                    ));
                }
            }
        }
        Ok(())
    })?;
    report
        .keys_per_index
        .push(("_id_".to_string(), report.nrecords));
    report.index_valid.push(("_id_".to_string(), true));
    for (i, idx) in indexes.iter().enumerate() {
        let mut actual = Tally::default();
        for_each_entry(&snap, idx, |hit| {
            actual.add(&hit.key);
            Ok(())
        })?;
        report.keys_per_index.push((idx.name.clone(), actual.count));
        let mut valid = true;
        if actual.count != expected[i].count || actual.hash != expected[i].hash {
            valid = false;
            find_inconsistencies(&snap, keygen, meta, idx, &mut report)?;
            report.errors.push(format!(
                "Index with name: {} has inconsistencies.",
                idx.name
            ));
        }
        if let Some(id) = &not_multikey[i] {
            valid = false;
            report.errors.push(format!(
                "Index {} is not multikey but has more than one key in document with {}",
                idx.name,
                display(id)
            ));
        }
        report.index_valid.push((idx.name.clone(), valid));
    }
    if id_mismatch > 0 {
        report.errors.push(format!(
            "{id_mismatch} document(s) without a valid _id; see corruptRecords"
        ));
    }
    if !report.corrupt.is_empty() && id_mismatch == 0 {
        report
            .errors
            .push("Detected one or more invalid documents. See corruptRecords.".into());
    }
    if let Some(n) = cairn_storage::capped::check_natural(snap.snapshot(), meta)? {
        if n.order_entries != report.nrecords || n.back_entries != report.nrecords {
            report.errors.push(format!(
                "The capped collection's insertion order has {} entries (and {} way back) for {} documents",
                n.order_entries, n.back_entries, report.nrecords
            ));
        }
        if n.dangling > 0 {
            report.errors.push(format!(
                "{} insertion-order entries name documents that do not exist",
                n.dangling
            ));
        }
        if n.unpaired > 0 {
            report.errors.push(format!(
                "{} insertion-order entries lack their way-back entry",
                n.unpaired
            ));
        }
        if n.counter_behind {
            report
                .errors
                .push("The capped collection's record id counter is behind its records".into());
        }
    }
    let (stats, _, _) = cairn_storage::catalog::read_stats(snap.snapshot(), meta.id)?;
    if stats.count != report.nrecords as i64 || stats.size != size {
        report.warnings.push(format!(
            "Detected erroneous fast count: the collection's statistics record {} documents of {} bytes, the walk found {} documents of {size} bytes (repairable: the statistics can be rebuilt from the documents)",
            stats.count, stats.size, report.nrecords
        ));
    }
    Ok(report)
}

/// The second pass over an inconsistent index: every missing and extra entry.
fn find_inconsistencies(
    snap: &ReadTxn,
    keygen: &dyn IndexKeyGen,
    meta: &CollectionMeta,
    idx: &IndexMeta,
    report: &mut Report,
) -> Result<(), CommandError> {
    let mut missing = Vec::new();
    for_each_document(snap, meta, |doc| {
        let (Ok(Some(id)), Ok(keys)) = (doc.get("_id"), keygen.keys(idx, &doc)) else {
            return Ok(());
        };
        let doc_key = id_key(id)?;
        for e in &keys.entries {
            let mut k = e.key.clone();
            k.extend_from_slice(&doc_key);
            let found = snap.index_scan(
                idx,
                &[(Bound::Included(k.clone()), Bound::Included(k))],
                false,
                1,
            )?;
            if found.is_empty() {
                push_capped(
                    &mut missing,
                    rawdoc! {
                        "indexName": idx.name.as_str(),
                        "idKey": id_doc(&doc),
                        "indexKey": index_key(idx, &e.values),
                    },
                );
            }
        }
        Ok(())
    })?;
    let mut extra = Vec::new();
    for_each_entry(snap, idx, |hit| {
        let doc = snap.get_by_key(meta, hit.doc_key())?;
        let produced = match &doc {
            Some(d) => keygen
                .keys(idx, d)
                .map(|k| k.entries.iter().any(|e| e.key == hit.key_part()))
                .unwrap_or(false),
            None => false,
        };
        if !produced {
            let mut e = rawdoc! {"indexName": idx.name.as_str()};
            match &doc {
                Some(d) => e.append(bson::raw::cstr!("idKey"), id_doc(d)),
                None => e.append(bson::raw::cstr!("idKey"), RawDocumentBuf::new()),
            }
            e.append(bson::raw::cstr!("indexKey"), index_key(idx, hit.values()));
            push_capped(&mut extra, e);
        }
        Ok(())
    })?;
    report.missing.extend(missing);
    report.extra.extend(extra);
    Ok(())
}

/// A document as MongoDB prints it in messages.
pub fn display(d: &RawDocument) -> String {
    cairn_storage::display::document(d)
}

/// The report in the `validate` command's shape (after `ns` and `uuid`).
pub fn reply(report: &Report, ns: &str, uuid: [u8; 16]) -> RawDocumentBuf {
    use bson::raw::cstr;
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let mut keys = RawDocumentBuf::new();
    let mut details = RawDocumentBuf::new();
    for (name, count) in &report.keys_per_index {
        if let Ok(k) = <&bson::raw::CStr>::try_from(name.as_str()) {
            keys.append(k, n(*count));
        }
    }
    for (name, valid) in &report.index_valid {
        if let Ok(k) = <&bson::raw::CStr>::try_from(name.as_str()) {
            details.append(k, rawdoc! {"valid": *valid});
        }
    }
    let list = |items: &[RawDocumentBuf]| {
        let mut a = RawArrayBuf::new();
        for d in items {
            a.push(d.clone());
        }
        a
    };
    let strings = |items: &[String]| {
        let mut a = RawArrayBuf::new();
        for s in items {
            a.push(s.as_str());
        }
        a
    };
    let mut out = rawdoc! {
        "ns": ns,
        "uuid": bson::Binary {subtype: bson::spec::BinarySubtype::Uuid, bytes: uuid.to_vec()},
        "nInvalidDocuments": n(report.invalid_documents),
        "nNonCompliantDocuments": 0_i64,
        "nrecords": n(report.nrecords),
        "nIndexes": i32::try_from(report.keys_per_index.len()).unwrap_or(i32::MAX),
        "keysPerIndex": keys,
        "indexDetails": details,
        "valid": report.valid(),
        "repaired": false,
    };
    out.append(cstr!("warnings"), strings(&report.warnings));
    out.append(cstr!("errors"), strings(&report.errors));
    out.append(cstr!("extraIndexEntries"), list(&report.extra));
    out.append(cstr!("missingIndexEntries"), list(&report.missing));
    out.append(cstr!("corruptRecords"), list(&report.corrupt));
    if !report.valid() {
        out.append(
            cstr!("advice"),
            "A corrupt namespace has been detected. See http://dochub.mongodb.org/core/data-recovery for recovery steps.",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use cairn_storage::engine::memory::MemoryEngine;
    use cairn_storage::{Durability, StoreOptions};

    fn store() -> Store {
        Store::open_with(
            Arc::new(MemoryEngine::default()),
            StoreOptions { sync_always: false },
            Arc::new(cairn_query::index::QueryKeyGen::new()),
        )
        .unwrap()
    }

    fn setup(s: &Store) -> Arc<CollectionMeta> {
        s.create_collection("db", "c", &RawDocumentBuf::new())
            .unwrap();
        s.create_indexes("db", "c", &[rawdoc! {"key": {"a": 1}, "name": "a_1"}])
            .unwrap();
        s.build_index("db", "c", "a_1", &|_| {}).unwrap();
        let meta = s.collection("db", "c").unwrap();
        s.write(Durability::Buffered, |tx| {
            for i in 0..50 {
                tx.insert(&meta, &rawdoc! {"_id": i, "a": i * 2, "b": {"c": [1, 2]}})?;
            }
            Ok::<_, cairn_storage::StorageError>(())
        })
        .unwrap();
        s.collection("db", "c").unwrap()
    }

    fn keygen() -> cairn_query::index::QueryKeyGen {
        cairn_query::index::QueryKeyGen::new()
    }

    #[test]
    fn a_consistent_collection_is_valid() {
        let s = store();
        let meta = setup(&s);
        let r = validate(&s, &keygen(), &meta, true).unwrap();
        assert!(r.valid(), "{r:?}");
        assert_eq!(r.nrecords, 50);
        assert_eq!(
            r.keys_per_index,
            [("_id_".to_string(), 50), ("a_1".to_string(), 50)]
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn a_capped_collections_insertion_order_is_checked() {
        let s = store();
        s.create_collection(
            "db",
            "cap",
            &rawdoc! {"capped": true, "size": 1_000_000_i64},
        )
        .unwrap();
        let meta = s.collection("db", "cap").unwrap();
        s.write(Durability::Buffered, |tx| {
            for i in 0..5 {
                tx.insert(&meta, &rawdoc! {"_id": i})?;
            }
            Ok::<_, cairn_storage::StorageError>(())
        })
        .unwrap();
        let r = validate(&s, &keygen(), &meta, false).unwrap();
        assert!(r.valid(), "{r:?}");
        // Remove the insertion-order entry of the third record (record ids start at 1).
        let space = meta.natural.unwrap();
        let mut tx = s.engine().begin().unwrap();
        tx.delete(space, &cairn_storage::capped::order_key(3))
            .unwrap();
        tx.commit().unwrap();
        let r = validate(&s, &keygen(), &meta, false).unwrap();
        assert!(!r.valid());
        // The walk follows the insertion order, so it misses the document too; the way-back
        // entries and the statistics still count five.
        assert_eq!(
            r.errors,
            [
                "The capped collection's insertion order has 4 entries (and 5 way back) for 4 documents"
            ]
        );
        assert!(r.warnings[0].starts_with("Detected erroneous fast count"));
    }

    #[test]
    fn a_damaged_index_entry_is_found() {
        let s = store();
        let meta = setup(&s);
        let idx = meta.index("a_1").unwrap().clone();
        // Damage one entry through the storage engine: remove the entry of _id 7 and put an
        // entry for a document that does not exist.
        let hits = s
            .read()
            .unwrap()
            .index_scan(&idx, &[(Bound::Unbounded, Bound::Unbounded)], false, 100)
            .unwrap();
        let victim = hits
            .iter()
            .find(|h| h.values().get_i32("0").ok() == Some(14))
            .unwrap()
            .clone();
        let mut tx = s.engine().begin().unwrap();
        tx.delete(idx.space, &victim.key).unwrap();
        let mut bogus = victim.key_part().to_vec();
        bogus.extend_from_slice(&id_key(RawBsonRef::Int32(999)).unwrap());
        let mut value = (victim.key_len as u32).to_be_bytes().to_vec();
        value.extend_from_slice(victim.values().as_bytes());
        tx.put(idx.space, &bogus, &value).unwrap();
        tx.commit().unwrap();

        let r = validate(&s, &keygen(), &meta, false).unwrap();
        assert!(!r.valid());
        assert_eq!(r.errors, ["Index with name: a_1 has inconsistencies."]);
        assert_eq!(r.index_valid[1], ("a_1".to_string(), false));
        assert_eq!(r.missing.len(), 1);
        assert_eq!(
            r.missing[0],
            rawdoc! {"indexName": "a_1", "idKey": {"_id": 7}, "indexKey": {"a": 14}}
        );
        assert_eq!(r.extra.len(), 1);
        assert_eq!(
            r.extra[0],
            rawdoc! {"indexName": "a_1", "idKey": {}, "indexKey": {"a": 14}}
        );
        let out = reply(&r, "db.c", meta.uuid);
        assert!(!out.get_bool("valid").unwrap());
        assert!(out.get_str("advice").is_ok());
    }

    #[test]
    fn a_wrong_entry_value_is_found() {
        let s = store();
        let meta = setup(&s);
        let idx = meta.index("a_1").unwrap().clone();
        let hit = s
            .read()
            .unwrap()
            .index_scan(&idx, &[(Bound::Unbounded, Bound::Unbounded)], false, 1)
            .unwrap()
            .remove(0);
        // Re-point the first entry at another document (_id 3, whose `a` is 6, not 0).
        let mut tx = s.engine().begin().unwrap();
        tx.delete(idx.space, &hit.key).unwrap();
        let mut moved = hit.key_part().to_vec();
        moved.extend_from_slice(&id_key(RawBsonRef::Int32(3)).unwrap());
        let mut value = (hit.key_len as u32).to_be_bytes().to_vec();
        value.extend_from_slice(hit.values().as_bytes());
        tx.put(idx.space, &moved, &value).unwrap();
        tx.commit().unwrap();
        let r = validate(&s, &keygen(), &meta, true).unwrap();
        assert!(!r.valid());
        assert_eq!(r.missing.len(), 1);
        assert_eq!(r.extra.len(), 1);
        assert_eq!(
            r.extra[0].get_document("idKey").unwrap().to_owned(),
            rawdoc! {"_id": 3}
        );
    }
}
