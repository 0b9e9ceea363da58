//! The change log: every committed write is in it, in commit order, with its cluster time;
//! failed and aborted writes are not; a session transaction's changes share one time and
//! carry the session; DDL is logged; trimming removes a prefix and records how far.

mod common;

use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};
use cairn_storage::engine::memory::MemoryEngine;
use cairn_storage::{Durability, StorageError, Store, StoreOptions};

fn store() -> Store {
    Store::open(
        Arc::new(MemoryEngine::new()),
        StoreOptions { sync_always: false },
    )
    .unwrap()
}

fn ops(store: &Store, after: Option<(u64, u32)>) -> Vec<(u64, String, String)> {
    store
        .read_changes(after, 1000)
        .unwrap()
        .0
        .into_iter()
        .map(|((ts, _), d)| {
            (
                ts,
                d.get_str("op").unwrap().to_string(),
                d.get_str("ns").unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn writes_and_ddl_in_commit_order() {
    let s = store();
    s.create_collection("db", "c", &rawdoc! {}).unwrap();
    let meta = s.collection("db", "c").unwrap();
    s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
        tx.insert(&meta, &rawdoc! {"_id": 1, "a": {"b": 1}})?;
        tx.insert(&meta, &rawdoc! {"_id": 2})
    })
    .unwrap();
    // A failed transaction logs nothing.
    let _ = s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
        tx.insert(&meta, &rawdoc! {"_id": 3})?;
        Err(StorageError::BadValue("no".into()))
    });
    // An update through write_fields is described.
    s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
        let key = cairn_storage::store::id_key(bson::RawBsonRef::Int32(1))?;
        let view = tx.read_fields(&meta, &key, &["a"])?.unwrap();
        tx.write_fields(
            &meta,
            &view,
            &[("a", Some(RawBsonRef::Document(&rawdoc! {"b": 2})))],
        )
    })
    .unwrap();
    s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
        tx.delete(&meta, bson::RawBsonRef::Int32(2))?;
        Ok(())
    })
    .unwrap();
    s.rename_collection(("db", "c"), ("db", "d"), false)
        .unwrap();
    s.drop_database("db").unwrap();
    let all = s.read_changes(None, 1000).unwrap().0;
    let names: Vec<(&str, &str)> = all
        .iter()
        .map(|(_, d)| (d.get_str("op").unwrap(), d.get_str("ns").unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("create", "db.c"),
            ("i", "db.c"),
            ("i", "db.c"),
            ("u", "db.c"),
            ("d", "db.c"),
            ("rename", "db.c"),
            ("drop", "db.d"),
            ("dropDatabase", "db"),
        ]
    );
    // Positions increase; the two inserts share a commit time.
    let pos: Vec<(u64, u32)> = all.iter().map(|(p, _)| *p).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(pos[1].0, pos[2].0);
    assert_eq!((pos[1].1, pos[2].1), (0, 1));
    let upd = &all[3].1;
    assert_eq!(
        upd.get_document("key").unwrap().to_owned(),
        rawdoc! {"_id": 1}
    );
    assert_eq!(
        upd.get_document("upd").unwrap().to_owned(),
        rawdoc! {"updatedFields": {"a.b": 2}, "removedFields": [], "truncatedArrays": []}
    );
    let ins = &all[1].1;
    assert_eq!(
        ins.get_document("doc").unwrap().to_owned(),
        rawdoc! {"_id": 1, "a": {"b": 1}}
    );
    assert!(ins.get_datetime("wall").is_ok());
    assert_eq!(all[5].1.get_str("to").unwrap(), "db.d");
    // Reading after a position continues from there.
    assert_eq!(ops(&s, Some(pos[5])).len(), 2);
}

#[test]
fn session_transactions_log_on_commit_only() {
    let s = store();
    s.create_collection("db", "c", &rawdoc! {}).unwrap();
    let meta = s.collection("db", "c").unwrap();
    let before = ops(&s, None).len();
    let mut state = s.begin_txn().unwrap();
    state.set_origin([9; 16], 7);
    let mut t = s.resume(state);
    t.insert(&meta, &rawdoc! {"_id": 1}).unwrap();
    t.create_collection("db", "n", &rawdoc! {}).unwrap();
    let state = t.suspend();
    assert_eq!(ops(&s, None).len(), before, "nothing before commit");
    s.commit_txn(state, Durability::Buffered).unwrap();
    let all = s.read_changes(None, 1000).unwrap().0;
    let mine: Vec<&RawDocumentBuf> = all[before..].iter().map(|(_, d)| d).collect();
    assert_eq!(mine.len(), 2);
    for d in &mine {
        assert_eq!(d.get_i64("txnNumber").unwrap(), 7);
        assert!(d.get_document("lsid").is_ok());
    }
    assert_eq!(all[before].0.0, all[before + 1].0.0, "one commit time");
    // An aborted transaction logs nothing.
    let mut t = s.resume(s.begin_txn().unwrap());
    t.insert(&meta, &rawdoc! {"_id": 2}).unwrap();
    s.abort_txn(t.suspend());
    assert_eq!(ops(&s, None).len(), before + 2);
}

#[test]
fn trimming_removes_a_prefix() {
    let s = store();
    s.create_collection("db", "c", &rawdoc! {}).unwrap();
    let meta = s.collection("db", "c").unwrap();
    for i in 0..10 {
        s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
            tx.insert(&meta, &rawdoc! {"_id": i})
        })
        .unwrap();
    }
    let (all, trimmed) = s.read_changes(None, 1000).unwrap();
    assert_eq!(trimmed, 0);
    // The memory engine reports no disk size: a zero budget trims.
    // Changes younger than the minimum retention stay, whatever the budget.
    assert_eq!(s.trim_change_log(0, 3600, 4).unwrap(), 0);
    let n = s.trim_change_log(0, 0, 4).unwrap();
    let (rest, trimmed) = s.read_changes(None, 1000).unwrap();
    assert_eq!(rest.len() + n, all.len());
    assert_eq!(trimmed, all[n - 1].0.0);
    assert_eq!(rest[0].0, all[n].0);
}

/// Updates are logged as updates whatever the layout does underneath: in a packed document,
/// and in a spilled one that shrinks enough to be packed again (a whole-document rewrite).
#[test]
fn updates_that_repack_are_logged_as_updates() {
    let s = store();
    s.set_pack_threshold(64);
    s.create_collection("db", "c", &rawdoc! {}).unwrap();
    let meta = s.collection("db", "c").unwrap();
    let mut big = bson::RawArrayBuf::new();
    for i in 0..20 {
        big.push(i);
    }
    s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
        tx.insert(&meta, &rawdoc! {"_id": 1, "a": big.clone()})?;
        tx.insert(&meta, &rawdoc! {"_id": 2, "n": 1})
    })
    .unwrap();
    let set = |id: i32, name: &str, v: RawBson| {
        s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
            let key = cairn_storage::store::id_key(bson::RawBsonRef::Int32(id))?;
            let view = tx.read_fields(&meta, &key, &[name])?.unwrap();
            tx.write_fields(&meta, &view, &[(name, Some(v.as_raw_bson_ref()))])
        })
        .unwrap();
    };
    // Spilled (the 20-element array is over 64 bytes), shrinking to 21 bytes: repacked.
    set(1, "a", RawBson::Int32(0));
    // Packed all along.
    set(2, "n", RawBson::Int32(2));
    let all = s.read_changes(None, 1000).unwrap().0;
    let updates: Vec<&RawDocumentBuf> = all
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d.get_str("op").unwrap() == "u")
        .collect();
    assert_eq!(updates.len(), 2);
    for (d, id, upd) in [
        (updates[0], 1, rawdoc! {"a": 0}),
        (updates[1], 2, rawdoc! {"n": 2}),
    ] {
        assert_eq!(
            d.get_document("key").unwrap().to_owned(),
            rawdoc! {"_id": id}
        );
        assert_eq!(
            d.get_document("upd")
                .unwrap()
                .get_document("updatedFields")
                .unwrap()
                .to_owned(),
            upd
        );
    }
    let r = s.read().unwrap();
    assert_eq!(
        r.get(&meta, bson::RawBsonRef::Int32(1)).unwrap().unwrap(),
        rawdoc! {"_id": 1, "a": 0}
    );
    assert_eq!(
        s.stats(&meta).unwrap().size as usize,
        rawdoc! {"_id": 1, "a": 0}.as_bytes().len() + rawdoc! {"_id": 2, "n": 2}.as_bytes().len()
    );
}

/// A batch's entries take a few chunked keys, not one key each; readers still see one entry
/// per document at consecutive positions, resume after any of them, and trimming counts
/// entries and removes the commit whole.
#[test]
fn a_batch_logs_in_few_keys_and_reads_entry_by_entry() {
    let s = store();
    s.create_collection("db", "c", &rawdoc! {}).unwrap();
    let meta = s.collection("db", "c").unwrap();
    let before = s.read_changes(None, 1000).unwrap().0;
    let pad = "p".repeat(1000);
    let docs: Vec<RawDocumentBuf> = (0..1000)
        .map(|i| rawdoc! {"_id": i, "pad": pad.clone()})
        .collect();
    let writes = s
        .write(Durability::Buffered, |tx| -> Result<_, StorageError> {
            for d in &docs {
                tx.insert(&meta, d)?;
            }
            Ok(tx.writes())
        })
        .unwrap();
    assert_eq!(writes, 1000, "one key per (packed) document");
    // ~1.1 MB of entries in chunks of at most 256 KiB: 5 keys (and 1 for the create)
    let r = s.read().unwrap();
    let log_keys = r
        .snapshot()
        .range(
            cairn_storage::changelog::CHANGE_LOG_SPACE,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
        )
        .unwrap()
        .count();
    assert_eq!(log_keys, 1 + 5);
    let all = s.read_changes(None, 10_000).unwrap().0;
    let mine = &all[before.len()..];
    assert_eq!(mine.len(), 1000);
    let at = mine[0].0.0;
    for (i, (pos, d)) in mine.iter().enumerate() {
        assert_eq!(*pos, (at, i as u32));
        assert_eq!(d.get_str("op").unwrap(), "i");
        assert_eq!(d.get_document("doc").unwrap(), &*docs[i]);
    }
    for i in [0usize, 1, 200, 233, 234, 235, 500, 998, 999] {
        let rest = s.read_changes(Some(mine[i].0), 10_000).unwrap().0;
        assert_eq!(rest.len(), 999 - i, "after entry {i}");
        if let Some((p, d)) = rest.first() {
            assert_eq!(*p, (at, i as u32 + 1));
            assert_eq!(d.get_document("doc").unwrap(), &*docs[i + 1]);
        }
        let some = s.read_changes(Some(mine[i].0), 7).unwrap().0;
        assert_eq!(some.len(), 7.min(999 - i));
    }
    // trimming: the create's commit (1 entry), then the whole batch (1000 entries) even
    // though the batch bound is smaller
    assert_eq!(s.trim_change_log(0, 0, 1).unwrap(), before.len());
    assert_eq!(s.trim_change_log(0, 0, 1).unwrap(), 1000);
    let (rest, trimmed) = s.read_changes(None, 10).unwrap();
    assert!(rest.is_empty());
    assert_eq!(trimmed, at);
}

/// A data directory written before the log was chunked (catalog version 3, one key per
/// entry; made by `tests/fixtures/entry-per-key.make.py`) reads back entry by entry, takes
/// chunked commits after its old ones, resumes at every position of both, and is marked with
/// the current catalog version (so older servers refuse it).
#[test]
fn a_log_written_one_key_per_entry_reads_with_chunked_commits_after_it() {
    use cairn_storage::engine::fjall::{FjallEngine, FjallOptions};
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    common::copy_dir(&fixtures.join("entry-per-key"), dir.path());
    let summary = |all: &[((u64, u32), RawDocumentBuf)]| -> Vec<(u32, String, Option<i32>)> {
        all.iter()
            .map(|((_, i), d)| {
                let id = d
                    .get_document("key")
                    .ok()
                    .and_then(|k| k.get_i32("_id").ok());
                (*i, d.get_str("op").unwrap().to_string(), id)
            })
            .collect()
    };
    let mut want: Vec<(u32, String, Option<i32>)> = vec![
        (0, "create".into(), None),
        (0, "i".into(), Some(1)),
        (1, "i".into(), Some(2)),
        (2, "i".into(), Some(3)),
        (0, "u".into(), Some(2)),
        (0, "d".into(), Some(3)),
    ];
    for round in 0..2 {
        let e = Arc::new(FjallEngine::open(dir.path(), &FjallOptions::default()).unwrap());
        let s = Store::open(e, StoreOptions { sync_always: false }).unwrap();
        assert_eq!(
            common::catalog_version(&s),
            cairn_storage::catalog::SCHEMA_VERSION
        );
        let all = s.read_changes(None, 1000).unwrap().0;
        assert_eq!(summary(&all), want, "round {round}");
        assert_eq!(all[1].0.0, all[3].0.0, "the insertMany is one commit");
        assert_eq!(
            all[2].1.get_document("doc").unwrap().to_owned(),
            rawdoc! {"_id": 2, "a": "y"}
        );
        for (i, (p, _)) in all.iter().enumerate() {
            let rest = s.read_changes(Some(*p), 1000).unwrap().0;
            assert_eq!(summary(&rest), want[i + 1..], "after {p:?}");
        }
        if round == 0 {
            let meta = s.collection("fixture", "log").unwrap();
            s.write(Durability::Buffered, |tx| -> Result<(), StorageError> {
                for id in [10, 11, 12] {
                    tx.insert(&meta, &rawdoc! {"_id": id})?;
                }
                Ok(())
            })
            .unwrap();
            want.extend((0..3).map(|i| (i, "i".to_string(), Some(10 + i as i32))));
            s.engine().sync().unwrap();
        }
    }
}
