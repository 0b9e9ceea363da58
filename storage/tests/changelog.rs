//! The change log: every committed write is in it, in commit order, with its cluster time;
//! failed and aborted writes are not; a session transaction's changes share one time and
//! carry the session; DDL is logged; trimming removes a prefix and records how far.

use std::sync::Arc;

use bson::{RawBson, RawDocumentBuf, rawdoc};
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
            &[("a".to_string(), Some(RawBson::Document(rawdoc! {"b": 2})))],
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
            tx.write_fields(&meta, &view, &[(name.to_string(), Some(v.clone()))])
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
