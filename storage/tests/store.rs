//! Store behaviour on both engines: DDL, document round trips, scans, statistics, restart,
//! and concurrency.

mod common;

use std::sync::Arc;

use bson::{RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::engine::Engine;
use cairn_storage::engine::fjall::{FjallEngine, FjallOptions};
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::{Durability, StorageError, Store, StoreOptions};

const OPTS: StoreOptions = StoreOptions { sync_always: false };

/// The pack threshold new collections get: `CAIRN_PACK_THRESHOLD` when set (`./test.sh` runs
/// these tests at 0 too), else the default.
fn pack_threshold() -> u32 {
    std::env::var("CAIRN_PACK_THRESHOLD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cairn_storage::doc::DEFAULT_PACK_THRESHOLD)
}

/// Opens a store on `engine` with [`pack_threshold`].
fn open(engine: Arc<dyn Engine>) -> Store {
    let store = Store::open(engine, OPTS).unwrap();
    store.set_pack_threshold(pack_threshold());
    store
}

fn engines() -> Vec<(Arc<dyn Engine>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let fjall: Arc<dyn Engine> =
        Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap());
    vec![(Arc::new(MemoryEngine::new()), None), (fjall, Some(dir))]
}

fn insert_all(
    store: &Store,
    db: &str,
    coll: &str,
    docs: &[RawDocumentBuf],
) -> Vec<Result<(), StorageError>> {
    let meta = store.ensure_collection(db, coll).unwrap();
    store
        .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
            Ok(docs.iter().map(|d| tx.insert(&meta, d)).collect::<Vec<_>>())
        })
        .unwrap()
}

#[test]
fn create_list_drop() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        assert!(store.create_collection("db", "a", &rawdoc! {}).unwrap());
        assert!(
            !store.create_collection("db", "a", &rawdoc! {}).unwrap(),
            "identical create is ok"
        );
        match store.create_collection("db", "a", &rawdoc! {"x": 1}) {
            Err(StorageError::NamespaceExists(m)) => {
                assert!(m.contains("different options"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        store.create_collection("db", "b", &rawdoc! {}).unwrap();
        store.create_collection("other", "c", &rawdoc! {}).unwrap();
        let cat = store.catalog();
        assert_eq!(cat.databases(), vec!["db".to_string(), "other".to_string()]);
        assert_eq!(
            cat.in_database("db")
                .map(|m| m.name.clone())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(matches!(
            store.create_collection("DB", "x", &rawdoc! {}),
            Err(StorageError::DatabaseDifferCase(_))
        ));
        assert!(matches!(
            store.create_collection("db", "system.foo", &rawdoc! {}),
            Err(StorageError::InvalidNamespace(_))
        ));
        let id = store.collection("db", "a").unwrap().id;
        assert!(store.engine().spaces().contains(&id));
        assert!(store.drop_collection("db", "a").unwrap());
        assert!(!store.drop_collection("db", "a").unwrap());
        assert!(!store.engine().spaces().contains(&id), "space dropped");
        store.drop_database("db").unwrap();
        assert_eq!(store.catalog().databases(), vec!["other".to_string()]);
    }
}

#[test]
fn documents_round_trip_and_collide_across_numeric_types() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        let docs = vec![
            rawdoc! {"_id": 1, "z": 1, "a": {"y": [1, 2.5, "s", {"k": null}], "b": true}},
            rawdoc! {"_id": "x", "n": bson::Decimal128::from_bytes([0; 16])},
            rawdoc! {"_id": {"a": 1}, "d": bson::DateTime::from_millis(-5)},
        ];
        let r = insert_all(&store, "db", "c", &docs);
        assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
        let meta = store.collection("db", "c").unwrap();
        let read = store.read().unwrap();
        for d in &docs {
            let id = d.get("_id").unwrap().unwrap();
            assert_eq!(
                read.get(&meta, id).unwrap().as_ref(),
                Some(d),
                "byte-identical"
            );
        }
        // 1.0 and NumberLong(1) find and collide with _id 1
        assert_eq!(
            read.get(&meta, RawBsonRef::Double(1.0)).unwrap().as_ref(),
            Some(&docs[0])
        );
        let r = insert_all(&store, "db", "c", &[rawdoc! {"_id": 1_i64, "dup": true}]);
        match &r[0] {
            Err(StorageError::DuplicateKey {
                key_display, index, ..
            }) => {
                assert_eq!(key_display, "{ _id: 1 }");
                assert_eq!(index, "_id_");
                assert_eq!(
                    r[0].as_ref().unwrap_err().to_string(),
                    "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1 }"
                );
            }
            other => panic!("{other:?}"),
        }
        let stats = store.stats(&meta).unwrap();
        assert_eq!(stats.count, 3);
        assert_eq!(
            stats.size,
            docs.iter().map(|d| d.as_bytes().len() as i64).sum::<i64>()
        );
        // delete
        assert!(
            store
                .write(Durability::Buffered, |tx| tx
                    .delete(&meta, RawBsonRef::String("x")))
                .unwrap()
        );
        assert_eq!(store.stats(&meta).unwrap().count, 2);
        assert!(
            store
                .read()
                .unwrap()
                .get(&meta, RawBsonRef::String("x"))
                .unwrap()
                .is_none()
        );
    }
}

#[test]
fn scans_come_in_id_order_and_resume() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        // insert in scrambled order, mixed types: numbers < strings < objects
        let mut docs = Vec::new();
        for i in (0..50).rev() {
            docs.push(rawdoc! {"_id": i, "v": i});
        }
        docs.push(rawdoc! {"_id": "s"});
        docs.push(rawdoc! {"_id": 2.5});
        insert_all(&store, "db", "c", &docs);
        let meta = store.collection("db", "c").unwrap();
        let mut seen = Vec::new();
        let mut from: Option<Vec<u8>> = None;
        let mut batches = 0;
        loop {
            let read = store.read().unwrap();
            let b = read.scan(&meta, from.as_deref(), 7, usize::MAX).unwrap();
            batches += 1;
            assert!(b.docs.len() <= 7);
            seen.extend(b.docs);
            match b.resume {
                Some(r) => from = Some(r),
                None => break,
            }
        }
        assert!(batches >= 8);
        let ids: Vec<String> = seen
            .iter()
            .map(|d| format!("{:?}", d.get("_id").unwrap().unwrap()))
            .collect();
        assert_eq!(seen.len(), 52, "{ids:?}");
        assert_eq!(
            seen[3].get("_id").unwrap().unwrap(),
            RawBsonRef::Double(2.5)
        );
        assert_eq!(
            seen[51].get("_id").unwrap().unwrap(),
            RawBsonRef::String("s")
        );
        // byte limit: at least one doc per batch
        let read = store.read().unwrap();
        let b = read.scan(&meta, None, 100, 1).unwrap();
        assert_eq!(b.docs.len(), 1);
        assert!(b.resume.is_some());
    }
}

#[test]
fn rename_within_and_across_databases() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        insert_all(&store, "a", "x", &[rawdoc! {"_id": 1}]);
        insert_all(&store, "a", "y", &[rawdoc! {"_id": 2}]);
        let uuid = store.collection("a", "x").unwrap().uuid;
        store
            .rename_collection(("a", "x"), ("a", "z"), false)
            .unwrap();
        assert!(store.collection("a", "x").is_none());
        let z = store.collection("a", "z").unwrap();
        assert_eq!(z.uuid, uuid, "same-db rename keeps the uuid");
        assert_eq!(store.stats(&z).unwrap().count, 1);
        assert!(matches!(
            store.rename_collection(("a", "z"), ("a", "y"), false),
            Err(StorageError::NamespaceExists(_))
        ));
        let y_space = store.collection("a", "y").unwrap().id;
        store
            .rename_collection(("a", "z"), ("b", "y"), false)
            .unwrap();
        store
            .rename_collection(("b", "y"), ("a", "y"), true)
            .unwrap();
        assert!(
            !store.engine().spaces().contains(&y_space),
            "dropTarget dropped the target"
        );
        let y = store.collection("a", "y").unwrap();
        assert_ne!(y.uuid, uuid, "cross-db rename gets a new uuid");
        let read = store.read().unwrap();
        assert!(read.get(&y, RawBsonRef::Int32(1)).unwrap().is_some());
        assert!(read.get(&y, RawBsonRef::Int32(2)).unwrap().is_none());
        assert!(matches!(
            store.rename_collection(("a", "nope"), ("a", "q"), false),
            Err(StorageError::NamespaceNotFound(_))
        ));
    }
}

#[test]
fn everything_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let doc = rawdoc! {"_id": bson::oid::ObjectId::new(), "10": "ten", "9": "nine", "": {"": []}};
    {
        let e = Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap());
        let store = open(e);
        insert_all(&store, "db", "c", std::slice::from_ref(&doc));
        store.create_collection("db", "empty", &rawdoc! {}).unwrap();
        // an orphan space, as if a crash hit between DDL steps
        store.engine().open_space(999).unwrap();
        store.engine().sync().unwrap();
    }
    let e = Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap());
    assert!(e.spaces().contains(&999));
    let store = open(e);
    assert!(
        !store.engine().spaces().contains(&999),
        "orphan space removed"
    );
    let meta = store.collection("db", "c").unwrap();
    let got = store
        .read()
        .unwrap()
        .get(&meta, doc.get("_id").unwrap().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(got.as_bytes(), doc.as_bytes());
    assert_eq!(store.stats(&meta).unwrap().count, 1);
    assert!(store.collection("db", "empty").is_some());
    // ids keep increasing: a new collection never reuses a space
    store.create_collection("db", "new", &rawdoc! {}).unwrap();
    assert!(store.collection("db", "new").unwrap().id > meta.id);
}

#[test]
fn concurrent_inserts_lose_nothing_and_duplicates_have_one_winner() {
    for (engine, _dir) in engines() {
        let store = Arc::new(open(engine));
        store.create_collection("db", "c", &rawdoc! {}).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let meta = store.collection("db", "c").unwrap();
                    let mut won = 0;
                    for i in 0..50 {
                        let unique = rawdoc! {"_id": format!("t{t}-{i}")};
                        store
                            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                                tx.insert(&meta, &unique)
                            })
                            .unwrap();
                        let contested = rawdoc! {"_id": i, "by": t};
                        match store.write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                            tx.insert(&meta, &contested)
                        }) {
                            Ok(()) => won += 1,
                            Err(StorageError::DuplicateKey { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                    won
                })
            })
            .collect();
        let won: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(won, 50, "each contested _id inserted exactly once");
        let meta = store.collection("db", "c").unwrap();
        assert_eq!(store.stats(&meta).unwrap().count, 8 * 50 + 50);
        let b = store
            .read()
            .unwrap()
            .scan(&meta, None, usize::MAX, usize::MAX)
            .unwrap();
        assert_eq!(b.docs.len(), 450);
    }
}

#[test]
fn writes_racing_with_drops_never_land_in_a_dropped_collection() {
    for (engine, _dir) in engines() {
        let store = Arc::new(open(engine));
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    let d = rawdoc! {"_id": i};
                    store
                        .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                            let meta = match tx.collection("db", "c")? {
                                Some(m) => m,
                                None => return Ok(()),
                            };
                            tx.insert(&meta, &d)
                        })
                        .unwrap();
                }
            })
        };
        for _ in 0..30 {
            let _ = store.create_collection("db", "c", &rawdoc! {});
            store.drop_collection("db", "c").unwrap();
        }
        writer.join().unwrap();
        // whatever survived is consistent: stats match a scan
        if let Some(meta) = store.collection("db", "c") {
            let n = store
                .read()
                .unwrap()
                .scan(&meta, None, usize::MAX, usize::MAX)
                .unwrap()
                .docs
                .len();
            assert_eq!(store.stats(&meta).unwrap().count as usize, n);
        }
    }
}

#[test]
fn insert_writes_one_key_per_node_or_one_packed_value() {
    let store = open(Arc::new(MemoryEngine::new()));
    let d = rawdoc! {"_id": 1, "a": 1, "b": {"c": 2}, "arr": [1, 2, 3]};
    // root, _id, a, b, b.c, arr, arr.0, arr.1, arr.2 = 9 nodes at threshold 0; the whole
    // 67-byte document in one value when packed; at 32 the root spills and `b` (12 bytes)
    // and `arr` (26) pack; one read (the _id key) every time.
    for (t, want) in [
        (0, 9),
        (cairn_storage::doc::DEFAULT_PACK_THRESHOLD, 1),
        (32, 5),
    ] {
        store.set_pack_threshold(t);
        let meta = store.ensure_collection("db", &format!("c{t}")).unwrap();
        assert_eq!(meta.pack_threshold, t);
        let (writes, reads) = store
            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                tx.insert(&meta, &d)?;
                Ok((tx.writes(), tx.reads()))
            })
            .unwrap();
        assert_eq!(writes, want, "at threshold {t}");
        assert_eq!(reads, 1);
        let got = store
            .read()
            .unwrap()
            .get(&meta, RawBsonRef::Int32(1))
            .unwrap()
            .unwrap();
        assert_eq!(got, d);
    }
}

#[test]
fn durable_writes_share_fsyncs() {
    let engine = Arc::new(MemoryEngine::new());
    let store = Arc::new(open(engine.clone()));
    let meta = store.ensure_collection("db", "c").unwrap();
    let before = store.syncs();
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (store, meta) = (store.clone(), meta.clone());
            std::thread::spawn(move || {
                for i in 0..20 {
                    let d = rawdoc! {"_id": t * 100 + i};
                    store
                        .write(Durability::Journal, |tx| -> Result<_, StorageError> {
                            tx.insert(&meta, &d)
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let syncs = store.syncs() - before;
    assert!((1..=320).contains(&syncs), "{syncs}");
    assert_eq!(store.stats(&meta).unwrap().count, 320);
}

#[test]
fn limits_are_clean_errors() {
    let store = open(Arc::new(MemoryEngine::new()));
    let meta = store.ensure_collection("db", "c").unwrap();
    // nesting beyond 180 levels
    let mut deep = rawdoc! {"x": 1};
    for _ in 0..200 {
        deep = rawdoc! {"n": deep};
    }
    let mut d = rawdoc! {"_id": 1};
    d.append(bson::raw::cstr!("deep"), deep);
    match store.write(Durability::Buffered, |tx| -> Result<_, StorageError> {
        tx.insert(&meta, &d)
    }) {
        Err(StorageError::TooDeep(m)) => assert!(m.contains("180 levels"), "{m}"),
        other => panic!("{other:?}"),
    }
    // an _id too long for a key
    let d = rawdoc! {"_id": "k".repeat(70_000)};
    assert!(matches!(
        store.write(Durability::Buffered, |tx| -> Result<_, StorageError> {
            tx.insert(&meta, &d)
        }),
        Err(StorageError::KeyTooLong(_))
    ));
    // nothing half-written
    assert_eq!(store.stats(&meta).unwrap().count, 0);
    let b = store
        .read()
        .unwrap()
        .scan(&meta, None, 10, usize::MAX)
        .unwrap();
    assert!(b.docs.is_empty());
}

#[test]
fn filtered_and_reverse_scans_resume_exactly() {
    use cairn_storage::ScanLimits;
    for (engine, _dir) in engines() {
        let store = open(engine);
        let docs: Vec<RawDocumentBuf> = (0..100)
            .map(|i| rawdoc! {"_id": i, "even": i % 2 == 0})
            .collect();
        insert_all(&store, "db", "c", &docs);
        let meta = store.collection("db", "c").unwrap();
        for reverse in [false, true] {
            let mut got = Vec::new();
            let mut resume: Option<Vec<u8>> = None;
            loop {
                let read = store.read().unwrap();
                let limits = ScanLimits {
                    max_docs: 7,
                    max_bytes: usize::MAX,
                    max_examined: 11,
                    first_may_exceed: true,
                };
                let b = read
                    .scan_where(&meta, resume.as_deref(), reverse, limits, &mut |d| {
                        d.get_bool("even").unwrap()
                    })
                    .unwrap();
                assert!(b.docs.len() <= 7 && b.examined <= 11);
                got.extend(b.docs.iter().map(|d| d.get_i32("_id").unwrap()));
                match b.resume {
                    Some(r) => resume = Some(r),
                    None => break,
                }
            }
            let mut expected: Vec<i32> = (0..100).filter(|i| i % 2 == 0).collect();
            if reverse {
                expected.reverse();
            }
            assert_eq!(got, expected, "reverse={reverse}");
        }
        // a byte limit never splits or repeats documents, and a batch has at least one
        for reverse in [false, true] {
            let mut n = 0;
            let mut resume: Option<Vec<u8>> = None;
            loop {
                let read = store.read().unwrap();
                let limits = ScanLimits {
                    max_docs: 1000,
                    max_bytes: 60,
                    max_examined: usize::MAX,
                    first_may_exceed: true,
                };
                let b = read
                    .scan_where(&meta, resume.as_deref(), reverse, limits, &mut |_| true)
                    .unwrap();
                assert!(!b.docs.is_empty());
                n += b.docs.len();
                match b.resume {
                    Some(r) => resume = Some(r),
                    None => break,
                }
            }
            assert_eq!(n, 100);
        }
    }
}

mod targeted_updates {
    use super::*;
    use bson::{RawArrayBuf, RawBson};
    use cairn_storage::store::id_key;

    fn setup(doc: RawDocumentBuf) -> (Store, Arc<cairn_storage::catalog::CollectionMeta>, Vec<u8>) {
        let store = open(Arc::new(MemoryEngine::new()));
        insert_all(&store, "db", "c", std::slice::from_ref(&doc));
        let meta = store.collection("db", "c").unwrap();
        let key = id_key(doc.get("_id").unwrap().unwrap()).unwrap();
        (store, meta, key)
    }

    fn array(n: i32) -> RawArrayBuf {
        let mut a = RawArrayBuf::new();
        for i in 0..n {
            a.push(i);
        }
        a
    }

    /// Applies `f` to the fields read, returns (reads, writes) of the transaction.
    fn update(
        store: &Store,
        meta: &cairn_storage::catalog::CollectionMeta,
        key: &[u8],
        names: &[&str],
        f: impl Fn(&cairn_storage::store::DocView) -> Vec<(String, Option<RawBson>)>,
    ) -> (usize, usize) {
        store
            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                let view = tx.read_fields(meta, key, names)?.unwrap();
                let owned = f(&view);
                let changes: Vec<cairn_storage::store::FieldChange<'_>> = owned
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_ref().map(RawBson::as_raw_bson_ref)))
                    .collect();
                let before = tx.writes();
                let reads = tx.reads();
                tx.write_fields(meta, &view, &changes)?;
                Ok((reads, tx.writes() - before))
            })
            .unwrap()
    }

    fn check(
        store: &Store,
        meta: &cairn_storage::catalog::CollectionMeta,
        expected: &RawDocumentBuf,
    ) {
        let got = store
            .read()
            .unwrap()
            .get(meta, expected.get("_id").unwrap().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(
            got.as_bytes(),
            expected.as_bytes(),
            "{got:?} vs {expected:?}"
        );
        assert_eq!(
            store.stats(meta).unwrap().size,
            expected.as_bytes().len() as i64
        );
    }

    #[test]
    fn inc_rewrites_one_leaf() {
        let (store, meta, key) = setup(rawdoc! {"_id": 1, "a": 5, "big": array(500), "z": "s"});
        let (reads, writes) = update(&store, &meta, &key, &["a"], |v| {
            let a = v.field("a").unwrap().value().as_i32().unwrap();
            vec![("a".into(), Some(RawBson::Int32(a + 1)))]
        });
        assert_eq!(
            writes, 1,
            "only the leaf (same size, root header unchanged)"
        );
        assert!(reads <= 2, "root header and the field: {reads}");
        check(
            &store,
            &meta,
            &rawdoc! {"_id": 1, "a": 6, "big": array(500), "z": "s"},
        );
        // a type change that grows the document rewrites the leaf and the root header
        let (_, writes) = update(&store, &meta, &key, &["a"], |_| {
            vec![("a".into(), Some(RawBson::Int64(7)))]
        });
        assert_eq!(writes, 2);
        check(
            &store,
            &meta,
            &rawdoc! {"_id": 1, "a": 7_i64, "big": array(500), "z": "s"},
        );
    }

    #[test]
    fn appending_to_a_large_array_writes_constant_keys() {
        let (store, meta, key) = setup(rawdoc! {"_id": 1, "tags": array(1000)});
        let (reads, writes) = update(&store, &meta, &key, &["tags"], |v| {
            let RawBsonRef::Array(a) = v.field("tags").unwrap().value() else {
                panic!()
            };
            let mut a: RawArrayBuf = a.into_iter().map(Result::unwrap).collect();
            a.push(1000);
            vec![("tags".into(), Some(RawBson::Array(a)))]
        });
        assert_eq!(writes, 3, "new element + array header + root header");
        assert!(reads >= 1001, "the array's key range was read: {reads}");
        check(&store, &meta, &rawdoc! {"_id": 1, "tags": array(1001)});
    }

    #[test]
    fn removing_from_an_array_rewrites_only_the_shifted_tail() {
        let (store, meta, key) = setup(rawdoc! {"_id": 1, "v": array(100)});
        // remove element 90: elements 91..99 shift down, the last key goes
        let (_, writes) = update(&store, &meta, &key, &["v"], |_| {
            let mut a = RawArrayBuf::new();
            for i in (0..100).filter(|i| *i != 90) {
                a.push(i);
            }
            vec![("v".into(), Some(RawBson::Array(a)))]
        });
        // 9 shifted elements + 1 deleted key + array header + root header; packed, the one
        // value of the whole (small) document
        let want = if meta.pack_threshold == 0 { 12 } else { 1 };
        assert_eq!(writes, want);
        let mut expected = RawArrayBuf::new();
        for i in (0..100).filter(|i| *i != 90) {
            expected.push(i);
        }
        check(&store, &meta, &rawdoc! {"_id": 1, "v": expected});
    }

    #[test]
    fn new_fields_append_and_removed_fields_disappear() {
        let (store, meta, key) = setup(rawdoc! {"_id": 1, "b": 1, "a": {"x": [1, {"y": 2}]}});
        update(&store, &meta, &key, &["a", "new2", "new1"], |_| {
            vec![
                ("new2".into(), Some(RawBson::String("second".into()))),
                ("new1".into(), Some(RawBson::Document(rawdoc! {"k": 1}))),
                ("a".into(), None),
            ]
        });
        check(
            &store,
            &meta,
            &rawdoc! {"_id": 1, "b": 1, "new2": "second", "new1": {"k": 1}},
        );
        // re-adding a removed field puts it last
        update(&store, &meta, &key, &["a"], |_| {
            vec![("a".into(), Some(RawBson::Int32(0)))]
        });
        check(
            &store,
            &meta,
            &rawdoc! {"_id": 1, "b": 1, "new2": "second", "new1": {"k": 1}, "a": 0},
        );
    }

    #[test]
    fn replace_writes_only_differences() {
        let (store, meta, key) = setup(rawdoc! {"_id": 1, "a": 1, "b": array(50), "c": "x"});
        let new = rawdoc! {"_id": 1, "a": 1, "b": array(50), "c": "y"};
        let writes = store
            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                let before = tx.writes();
                assert!(tx.replace(&meta, &key, &new)?);
                Ok(tx.writes() - before)
            })
            .unwrap();
        assert_eq!(writes, 1);
        check(&store, &meta, &new);
        let smaller = rawdoc! {"_id": 1, "z": true};
        store
            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                tx.replace(&meta, &key, &smaller)
            })
            .unwrap();
        check(&store, &meta, &smaller);
    }

    /// The keys a document occupies.
    fn keys_of(store: &Store, meta: &cairn_storage::catalog::CollectionMeta, key: &[u8]) -> usize {
        store
            .read()
            .unwrap()
            .snapshot()
            .prefix(meta.id, key)
            .unwrap()
            .count()
    }

    #[test]
    fn packed_documents_spill_when_they_grow_and_pack_again_when_they_shrink() {
        let store = open(Arc::new(MemoryEngine::new()));
        store.set_pack_threshold(2048);
        insert_all(
            &store,
            "db",
            "p",
            &[rawdoc! {"_id": 1, "n": 1, "a": array(10)}],
        );
        let meta = store.collection("db", "p").unwrap();
        let key = id_key(RawBsonRef::Int32(1)).unwrap();
        assert_eq!(keys_of(&store, &meta, &key), 1);
        // $inc on a packed document: one read, one write
        let (reads, writes) = update(&store, &meta, &key, &["n"], |_| {
            vec![("n".into(), Some(RawBson::Int32(2)))]
        });
        assert_eq!((reads, writes), (1, 1));
        check(&store, &meta, &rawdoc! {"_id": 1, "n": 2, "a": array(10)});
        // growing `a` to 2,595 bytes spills the document and the array
        let set_a = |n: i32| {
            move |_: &cairn_storage::store::DocView| {
                vec![("a".to_string(), Some(RawBson::Array(array(n))))]
            }
        };
        update(&store, &meta, &key, &["a"], set_a(300));
        check(&store, &meta, &rawdoc! {"_id": 1, "n": 2, "a": array(300)});
        assert_eq!(keys_of(&store, &meta, &key), 4 + 300);
        // $inc on the spilled document: the leaf only
        let (_, writes) = update(&store, &meta, &key, &["n"], |_| {
            vec![("n".into(), Some(RawBson::Int32(3)))]
        });
        assert_eq!(writes, 1);
        // shrinking to 1,269 bytes (above half the threshold) keeps the layout: no flapping
        update(&store, &meta, &key, &["a"], set_a(150));
        check(&store, &meta, &rawdoc! {"_id": 1, "n": 3, "a": array(150)});
        assert_eq!(keys_of(&store, &meta, &key), 4 + 150);
        // at 819 bytes (under half) the document packs again
        update(&store, &meta, &key, &["a"], set_a(100));
        check(&store, &meta, &rawdoc! {"_id": 1, "n": 3, "a": array(100)});
        assert_eq!(keys_of(&store, &meta, &key), 1);
        // fields added to and removed from a packed document
        update(&store, &meta, &key, &["n", "z"], |_| {
            vec![
                ("z".into(), Some(RawBson::String("last".into()))),
                ("n".into(), None),
            ]
        });
        check(
            &store,
            &meta,
            &rawdoc! {"_id": 1, "a": array(100), "z": "last"},
        );
        assert_eq!(keys_of(&store, &meta, &key), 1);
        // replace with a large document spills it; deleting removes every key
        let big = rawdoc! {"_id": 1, "b": array(400)};
        store
            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                tx.replace(&meta, &key, &big)
            })
            .unwrap();
        check(&store, &meta, &big);
        assert_eq!(keys_of(&store, &meta, &key), 3 + 400);
        store
            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                tx.delete_by_key(&meta, &key)
            })
            .unwrap();
        assert_eq!(keys_of(&store, &meta, &key), 0);
        assert_eq!(store.stats(&meta).unwrap().count, 0);
        assert_eq!(store.stats(&meta).unwrap().size, 0);
    }

    #[test]
    fn growing_past_16_mib_is_refused() {
        let (store, meta, key) = setup(rawdoc! {"_id": 1, "s": "x".repeat(9 * 1024 * 1024)});
        let r = store.write(Durability::Buffered, |tx| -> Result<_, StorageError> {
            let view = tx.read_fields(&meta, &key, &["t"])?.unwrap();
            tx.write_fields(
                &meta,
                &view,
                &[("t", Some(RawBsonRef::String(&"y".repeat(9 * 1024 * 1024))))],
            )
        });
        assert!(matches!(r, Err(StorageError::DocumentTooLarge { .. })));
        assert_eq!(store.stats(&meta).unwrap().count, 1);
    }
}

/// A data directory written before packed subtrees existed (catalog version 2, one key per
/// node; made by `tests/fixtures/one-key-per-node.make.mjs`) opens, reads back exactly,
/// keeps its collections' layout (threshold 0) while new collections pack, and is marked
/// with the current catalog version.
#[test]
fn data_written_before_packing_reads_and_keeps_its_layout() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    common::copy_dir(&fixtures.join("one-key-per-node"), dir.path());
    let expected_bytes = std::fs::read(fixtures.join("one-key-per-node.expected.bson")).unwrap();
    let mut expected = Vec::new();
    let mut rest = expected_bytes.as_slice();
    while !rest.is_empty() {
        let len = i32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        expected.push(RawDocumentBuf::from_bytes(rest[..len].to_vec()).unwrap());
        rest = &rest[len..];
    }
    assert_eq!(expected.len(), 4);
    for round in 0..2 {
        let e = Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap());
        let store = Store::open(e, OPTS).unwrap();
        assert_eq!(
            common::catalog_version(&store),
            cairn_storage::catalog::SCHEMA_VERSION
        );
        let meta = store.collection("fixture", "docs").unwrap();
        assert_eq!(
            meta.pack_threshold, 0,
            "the layout the data was written with"
        );
        let read = store.read().unwrap();
        let all = read.scan(&meta, None, 100, usize::MAX).unwrap();
        assert_eq!(all.docs.len(), expected.len());
        for d in &expected {
            let id = d.get("_id").unwrap().unwrap();
            let got = read.get(&meta, id).unwrap().unwrap();
            assert_eq!(got.as_bytes(), d.as_bytes(), "{id:?}");
            assert!(all.docs.iter().any(|x| x.as_bytes() == d.as_bytes()));
        }
        let stats = store.stats(&meta).unwrap();
        assert_eq!(stats.count, expected.len() as i64);
        // the secondary index written by the old server answers
        let (_, idx) = store.index("fixture", "docs", "n_1").unwrap();
        let hits = read
            .index_scan(
                &idx,
                &[(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)],
                false,
                usize::MAX,
            )
            .unwrap();
        assert_eq!(hits.len(), expected.len());
        if round == 0 {
            // writes to the old collection keep one key per node
            let copy = {
                let mut d = RawDocumentBuf::new();
                d.append(bson::raw::cstr!("_id"), "copy");
                for el in expected[0].iter().skip(1) {
                    let (k, v) = el.unwrap();
                    d.append(k, v);
                }
                d
            };
            let writes = store
                .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                    tx.insert(&meta, &copy)?;
                    Ok(tx.writes())
                })
                .unwrap();
            assert!(writes > 10, "one key per node: {writes}");
            // a new collection packs
            let fresh = store.ensure_collection("fixture", "fresh").unwrap();
            assert_eq!(
                fresh.pack_threshold,
                cairn_storage::doc::DEFAULT_PACK_THRESHOLD
            );
            let writes = store
                .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                    tx.insert(&fresh, &expected[0])?;
                    Ok(tx.writes())
                })
                .unwrap();
            assert_eq!(writes, 1);
            store.engine().sync().unwrap();
            expected.push(copy);
        }
    }
}

/// A write run inline on an async worker ([`cairn_storage::store::run_inline`]) still reruns
/// on a conflict (yielding instead of sleeping) and then sees the other writer's commit.
#[test]
fn inline_writes_rerun_conflicts() {
    for (engine, _dir) in engines() {
        let store = Arc::new(open(engine));
        store.create_collection("db", "c", &rawdoc! {}).unwrap();
        let meta = store.collection("db", "c").unwrap();
        let before = store
            .counters
            .conflicts
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut attempts = 0;
        let r = cairn_storage::store::run_inline(|| {
            store.write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                attempts += 1;
                tx.insert(&meta, &rawdoc! {"_id": "x", "by": "inline"})?;
                if attempts == 1 {
                    // Another writer commits the same _id before this attempt commits.
                    let (store, meta) = (store.clone(), meta.clone());
                    std::thread::spawn(move || {
                        store
                            .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
                                tx.insert(&meta, &rawdoc! {"_id": "x", "by": "other"})
                            })
                            .unwrap();
                    })
                    .join()
                    .unwrap();
                }
                Ok(())
            })
        });
        assert!(matches!(r, Err(StorageError::DuplicateKey { .. })), "{r:?}");
        assert_eq!(attempts, 2);
        let after = store
            .counters
            .conflicts
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(after > before);
    }
}

#[test]
fn batched_reads_equal_point_reads_in_the_order_asked() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        let mut docs = Vec::new();
        for i in 0..600i32 {
            if i % 7 == 0 {
                // Large enough to be spilled at the default threshold.
                let big: Vec<i32> = (0..300).collect();
                let d = bson::doc! {"_id": i, "v": i, "big": big};
                docs.push(RawDocumentBuf::try_from(&d).unwrap());
            } else {
                docs.push(rawdoc! {"_id": i, "v": i, "s": {"a": i, "b": [i, "x"]}});
            }
        }
        for s in ["a", "ab", "b", "ba"] {
            docs.push(rawdoc! {"_id": s, "s": s});
        }
        insert_all(&store, "db", "c", &docs);
        let meta = store.collection("db", "c").unwrap();
        let read = store.read().unwrap();
        let key = |id: bson::Bson| {
            let holder = bson::doc! {"id": id};
            let raw = RawDocumentBuf::try_from(&holder).unwrap();
            cairn_storage::store::id_key(raw.get("id").unwrap().unwrap()).unwrap()
        };
        // Small batches first (point reads, which fill fjall's row cache): the larger sets
        // below then find every third document of 200..400 cached and read the others.
        let warm: Vec<i32> = (200..400).step_by(3).collect();
        let mut sets: Vec<Vec<bson::Bson>> = warm
            .chunks(8)
            .map(|c| c.iter().copied().map(bson::Bson::Int32).collect())
            .collect();
        sets.extend(vec![
            // dense: every document of a span (a walk)
            (10..300).map(bson::Bson::Int32).collect(),
            // 10 % density
            (0..600).step_by(10).map(bson::Bson::Int32).collect(),
            // sparse: point reads after the first gap
            (0..600).step_by(97).map(bson::Bson::Int32).collect(),
            // dense clusters separated by wide gaps, missing keys, unsorted, duplicates
            vec![
                5, 6, 7, 8, 9, 590, 591, 592, 593, 9999, 7, 300, 301, 302, 303, -1, 5,
            ]
            .into_iter()
            .chain(100..140)
            .map(bson::Bson::Int32)
            .chain(["ab", "a", "zz", "ba", "b", "a"].map(|s| bson::Bson::String(s.into())))
            .collect(),
            // fewer than a walk needs
            vec![bson::Bson::Int32(3), bson::Bson::Int32(1000)],
            // every document backwards, missing keys and duplicates among them
            (-20..620)
                .rev()
                .chain([7, 599, 300, 0])
                .map(bson::Bson::Int32)
                .collect(),
            // a dense walk, then sparse point reads
            (0..560)
                .chain((560..600).step_by(3))
                .chain((600..2000).step_by(5))
                .map(bson::Bson::Int32)
                .collect(),
            vec![],
        ]);
        // Twice: the second pass finds (with fjall) all that the first read cached.
        for set in sets.iter().chain(&sets) {
            let keys: Vec<Vec<u8>> = set.iter().cloned().map(key).collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let got = read.get_many_by_key(&meta, &refs).unwrap();
            assert_eq!(got.len(), keys.len());
            for (id, (k, g)) in set.iter().zip(keys.iter().zip(&got)) {
                let want = store
                    .write(Durability::Buffered, |tx| tx.get_by_key(&meta, k))
                    .unwrap();
                assert_eq!(g, &want, "_id {id}");
            }
        }
    }
}
