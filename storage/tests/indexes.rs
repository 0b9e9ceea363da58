//! Secondary index maintenance, uniqueness, builds and drops, on both engines, with the
//! storage crate's top-level key generator.

use std::ops::Bound;
use std::sync::Arc;

use bson::{RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::engine::Engine;
use cairn_storage::engine::fjall::{FjallEngine, FjallOptions};
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::index::{IndexMeta, IndexState};
use cairn_storage::store::id_key;
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

fn insert(store: &Store, doc: RawDocumentBuf) -> Result<(), StorageError> {
    let meta = store.ensure_collection("db", "c")?;
    store.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
        let meta = tx.collection("db", "c")?.unwrap_or(meta.clone());
        tx.insert(&meta, &doc)
    })
}

/// All entries of an index as (values, _id value).
fn entries(store: &Store, name: &str) -> Vec<(RawDocumentBuf, i32)> {
    let (meta, idx) = store.index("db", "c", name).unwrap();
    let read = store.read().unwrap();
    read.index_scan(
        &idx,
        &[(Bound::Unbounded, Bound::Unbounded)],
        false,
        usize::MAX,
    )
    .unwrap()
    .into_iter()
    .map(|h| {
        let doc = read
            .get_by_key(&meta, h.doc_key())
            .unwrap()
            .unwrap_or_else(|| panic!("dangling entry {:02x?} values {:?}", &*h.key, h.values()));
        (h.values().to_owned(), doc.get_i32("_id").unwrap())
    })
    .collect()
}

fn create(store: &Store, spec: RawDocumentBuf) -> Result<(), StorageError> {
    let r = store.create_indexes("db", "c", &[spec])?;
    for name in r.new {
        store.build_index("db", "c", &name, &|_| {})?;
    }
    Ok(())
}

#[test]
fn writes_maintain_entries() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        for i in 0..5 {
            insert(&store, rawdoc! {"_id": i, "a": i % 3}).unwrap();
        }
        create(&store, rawdoc! {"key": {"a": 1}, "name": "a_1"}).unwrap();
        let (meta, idx) = store.index("db", "c", "a_1").unwrap();
        assert_eq!(idx.state, IndexState::Ready);
        let ids: Vec<i32> = entries(&store, "a_1")
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        assert_eq!(ids, vec![0, 3, 1, 4, 2], "a order, then _id");
        // insert maintains
        insert(&store, rawdoc! {"_id": 10, "a": -1}).unwrap();
        assert_eq!(entries(&store, "a_1")[0].1, 10);
        // targeted update moves the entry
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                let key = id_key(bson::RawBsonRef::Int32(10))?;
                let view = tx.read_fields(&meta, &key, &["a"])?.unwrap();
                tx.write_fields(&meta, &view, &[("a", Some(RawBsonRef::Int32(99)))])
            })
            .unwrap();
        let e = entries(&store, "a_1");
        assert_eq!(e.last().unwrap().1, 10);
        assert_eq!(e.len(), 6);
        // a type change of the same value rewrites the stored values, keeps one entry
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                let key = id_key(bson::RawBsonRef::Int32(10))?;
                let view = tx.read_fields(&meta, &key, &["a"])?.unwrap();
                tx.write_fields(&meta, &view, &[("a", Some(RawBsonRef::Double(99.0)))])
            })
            .unwrap();
        let e = entries(&store, "a_1");
        assert_eq!(e.len(), 6);
        assert_eq!(e.last().unwrap().0, rawdoc! {"0": 99.0});
        // unindexed field changes leave the index alone
        let before = store
            .counters
            .keys_written
            .load(std::sync::atomic::Ordering::Relaxed);
        store
            .write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                let key = id_key(bson::RawBsonRef::Int32(10))?;
                let view = tx.read_fields(&meta, &key, &["b"])?.unwrap();
                tx.write_fields(&meta, &view, &[("b", Some(RawBsonRef::Int32(1)))])
            })
            .unwrap();
        let written = store
            .counters
            .keys_written
            .load(std::sync::atomic::Ordering::Relaxed)
            - before;
        assert!(written <= 3, "{written}");
        // replace and delete
        store
            .write(Durability::Buffered, |tx| -> Result<bool, StorageError> {
                let key = id_key(bson::RawBsonRef::Int32(0))?;
                tx.replace(&meta, &key, &rawdoc! {"_id": 0, "a": 50})
            })
            .unwrap();
        store
            .write(Durability::Buffered, |tx| -> Result<bool, StorageError> {
                tx.delete(&meta, bson::RawBsonRef::Int32(1))
            })
            .unwrap();
        let e = entries(&store, "a_1");
        assert_eq!(e.len(), 5);
        assert!(e.iter().any(|(v, id)| *id == 0 && *v == rawdoc! {"0": 50}));
        assert!(!e.iter().any(|(_, id)| *id == 1));
        // missing fields are indexed as null (first in order)
        insert(&store, rawdoc! {"_id": 20}).unwrap();
        assert_eq!(entries(&store, "a_1")[0], (rawdoc! {"0": null}, 20));
    }
}

#[test]
fn unique_indexes_refuse_duplicates() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        insert(&store, rawdoc! {"_id": 1, "u": "x"}).unwrap();
        create(
            &store,
            rawdoc! {"key": {"u": 1}, "name": "u_1", "unique": true},
        )
        .unwrap();
        match insert(&store, rawdoc! {"_id": 2, "u": "x"}) {
            Err(StorageError::DuplicateKey {
                index,
                key_value,
                key_display,
                ..
            }) => {
                assert_eq!(index, "u_1");
                assert_eq!(key_value, rawdoc! {"u": "x"});
                assert_eq!(key_display, "{ u: \"x\" }");
            }
            other => panic!("{other:?}"),
        }
        insert(&store, rawdoc! {"_id": 2, "u": "y"}).unwrap();
        // an update into a duplicate fails and changes nothing
        let meta = store.collection("db", "c").unwrap();
        let r = store.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
            let key = id_key(bson::RawBsonRef::Int32(2))?;
            let view = tx.read_fields(&meta, &key, &["u"])?.unwrap();
            tx.write_fields(&meta, &view, &[("u", Some(RawBsonRef::String("x")))])
        });
        assert!(matches!(r, Err(StorageError::DuplicateKey { .. })));
        assert_eq!(entries(&store, "u_1").len(), 2);
        // one missing value is allowed (indexed as null), a second one is a duplicate
        insert(&store, rawdoc! {"_id": 3}).unwrap();
        assert!(matches!(
            insert(&store, rawdoc! {"_id": 4}),
            Err(StorageError::DuplicateKey { .. })
        ));
        // building a unique index over duplicates fails and leaves no index
        insert(&store, rawdoc! {"_id": 5, "u": 5, "d": 1}).unwrap();
        insert(&store, rawdoc! {"_id": 6, "u": 6, "d": 1}).unwrap();
        let err = create(
            &store,
            rawdoc! {"key": {"d": 1}, "name": "d_1", "unique": true},
        )
        .unwrap_err();
        assert!(matches!(err, StorageError::DuplicateKey { .. }), "{err:?}");
        assert!(store.index("db", "c", "d_1").is_none());
        let spaces = store.engine().spaces().len();
        assert_eq!(store.collection("db", "c").unwrap().indexes.len(), 2);
        assert!(spaces >= 3);
    }
}

#[test]
fn concurrent_unique_inserts_have_one_winner() {
    for (engine, _dir) in engines() {
        let store = Arc::new(open(engine));
        store.ensure_collection("db", "c").unwrap();
        create(
            &store,
            rawdoc! {"key": {"u": 1}, "name": "u_1", "unique": true},
        )
        .unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut won = 0;
                    for i in 0..30 {
                        match insert(&store, rawdoc! {"_id": t * 1000 + i, "u": i}) {
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
        assert_eq!(won, 30);
        assert_eq!(entries(&store, "u_1").len(), 30);
    }
}

#[test]
fn builds_run_alongside_writers_and_match_the_data() {
    for (engine, _dir) in engines() {
        let store = Arc::new(open(engine));
        for i in 0..3000 {
            insert(&store, rawdoc! {"_id": i, "a": i % 17}).unwrap();
        }
        let r = store
            .create_indexes("db", "c", &[rawdoc! {"key": {"a": 1}, "name": "a_1"}])
            .unwrap();
        assert_eq!(r.new, vec!["a_1".to_string()]);
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 3000..3400 {
                    insert(&store, rawdoc! {"_id": i, "a": i % 17}).unwrap();
                }
                let meta = store.collection("db", "c").unwrap();
                for i in 0..200 {
                    store
                        .write(Durability::Buffered, |tx| -> Result<bool, StorageError> {
                            tx.delete(&meta, bson::RawBsonRef::Int32(i * 7))
                        })
                        .unwrap();
                }
            })
        };
        let chunks = std::sync::atomic::AtomicU64::new(0);
        store
            .build_index("db", "c", "a_1", &|_| {
                chunks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
            .unwrap();
        writer.join().unwrap();
        assert!(chunks.load(std::sync::atomic::Ordering::Relaxed) >= 6);
        let e = entries(&store, "a_1");
        let meta = store.collection("db", "c").unwrap();
        let docs = store
            .read()
            .unwrap()
            .scan(&meta, None, usize::MAX, usize::MAX)
            .unwrap()
            .docs;
        assert_eq!(e.len(), docs.len(), "one entry per document");
        assert_eq!(e.len(), 3400 - 200);
        // entries are in (a, _id) order and agree with the documents
        let mut prev: Option<(i32, i32)> = None;
        for (values, id) in &e {
            let a = values.get_i32("0").unwrap();
            assert_eq!(a, id % 17);
            if let Some(p) = prev {
                assert!(p < (a, *id));
            }
            prev = Some((a, *id));
        }
    }
}

#[test]
fn drops_remove_spaces_and_builds_resume_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let space;
    {
        let e = Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap());
        let store = open(e);
        for i in 0..1200 {
            insert(&store, rawdoc! {"_id": i, "a": i}).unwrap();
        }
        let r = store
            .create_indexes("db", "c", &[rawdoc! {"key": {"a": -1}, "name": "a_-1"}])
            .unwrap();
        assert_eq!(r.before, 1);
        assert_eq!(r.after, 2);
        // an identical request creates nothing
        assert!(
            store
                .create_indexes("db", "c", &[rawdoc! {"key": {"a": -1}, "name": "a_-1"}])
                .unwrap()
                .new
                .is_empty()
        );
        // conflicts
        let err = store
            .create_indexes("db", "c", &[rawdoc! {"key": {"b": 1}, "name": "a_-1"}])
            .unwrap_err();
        assert!(matches!(err, StorageError::IndexConflict { code: 86, .. }));
        let err = store
            .create_indexes("db", "c", &[rawdoc! {"key": {"a": -1}, "name": "other"}])
            .unwrap_err();
        assert!(matches!(err, StorageError::IndexConflict { code: 85, .. }));
        space = store.index("db", "c", "a_-1").unwrap().1.space;
        // "crash" before building: the index stays in state building
        store.engine().sync().unwrap();
    }
    let e = Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap());
    let store = open(e);
    assert_eq!(
        store.building_indexes(),
        vec![("db".into(), "c".into(), "a_-1".into())]
    );
    store.build_index("db", "c", "a_-1", &|_| {}).unwrap();
    assert_eq!(
        store.index("db", "c", "a_-1").unwrap().1.state,
        IndexState::Ready
    );
    let e = entries(&store, "a_-1");
    assert_eq!(e.len(), 1200);
    assert_eq!(e[0].1, 1199, "descending");
    store.drop_index("db", "c", "a_-1").unwrap();
    assert!(!store.engine().spaces().contains(&space));
    assert!(matches!(
        store.drop_index("db", "c", "a_-1"),
        Err(StorageError::IndexNotFound(_))
    ));
    assert!(matches!(
        store.drop_index("db", "c", "_id_"),
        Err(StorageError::InvalidOptions(_))
    ));
    // dropping the collection drops every index space
    create(&store, rawdoc! {"key": {"a": 1}, "name": "a_1"}).unwrap();
    let s2 = store.index("db", "c", "a_1").unwrap().1.space;
    store.drop_collection("db", "c").unwrap();
    assert!(!store.engine().spaces().contains(&s2));
    let _ = IndexMeta::id_index();
}

#[test]
fn index_scan_reads_ranges_in_order_up_to_the_limit() {
    for (engine, _dir) in engines() {
        let store = open(engine);
        for i in 0..10 {
            insert(&store, rawdoc! {"_id": i, "a": 100 - i}).unwrap();
        }
        create(&store, rawdoc! {"key": {"a": 1}, "name": "a_1"}).unwrap();
        let (_, idx) = store.index("db", "c", "a_1").unwrap();
        let read = store.read().unwrap();
        let all = read
            .index_scan(&idx, &[(Bound::Unbounded, Bound::Unbounded)], false, 1000)
            .unwrap();
        assert_eq!(all.len(), 10);
        let key = |i: usize| all[i].key.to_vec();
        let value = |h: &cairn_storage::index_ops::IndexHit| h.values().get_i32("0").unwrap();
        // An empty range (start above end) is skipped; the others are read in order (each
        // reversed, in reverse order, for a reverse scan) until the limit.
        let ranges = [
            (Bound::Included(key(1)), Bound::Excluded(key(4))),
            (Bound::Included(key(5)), Bound::Included(key(2))),
            (Bound::Excluded(key(6)), Bound::Unbounded),
        ];
        let scan = |reverse: bool, limit: usize| -> Vec<i32> {
            read.index_scan(&idx, &ranges, reverse, limit)
                .unwrap()
                .iter()
                .map(value)
                .collect()
        };
        assert_eq!(scan(false, 100), vec![92, 93, 94, 98, 99, 100]);
        assert_eq!(scan(false, 4), vec![92, 93, 94, 98]);
        assert_eq!(scan(false, 3), vec![92, 93, 94]);
        assert_eq!(scan(true, 100), vec![100, 99, 98, 94, 93, 92]);
        assert_eq!(scan(true, 4), vec![100, 99, 98, 94]);
        assert_eq!(scan(true, 1), vec![100]);
        // Each hit splits into its key part and the document key.
        for h in &all {
            assert_eq!([h.key_part(), h.doc_key()].concat(), h.key.to_vec());
            assert_eq!(
                h.doc_key(),
                id_key(RawBsonRef::Int32(100 - value(h))).unwrap()
            );
        }
    }
}
