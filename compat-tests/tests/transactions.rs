//! Sessions and multi-document transactions through the official Rust driver and raw
//! commands: atomicity (abort leaves no trace, readers never see a partial transaction),
//! isolation and conflicts (`withTransaction` retries), the router's error codes and labels,
//! DDL inside transactions, transaction expiry, and the session commands.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::{Binary, Bson, Document, RawDocumentBuf, doc, rawdoc, spec::BinarySubtype};
use cairn_compat_tests::{TestServer, cmd, code_of, collect};
use mongodb::Collection;
use mongodb::error::{TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};

fn lsid(n: u8) -> RawDocumentBuf {
    rawdoc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![n; 16] }}
}

fn ok(r: &RawDocumentBuf) -> bool {
    r.get_f64("ok").ok() == Some(1.0)
}

#[track_caller]
fn assert_code(r: &RawDocumentBuf, code: i32) {
    assert!(!ok(r), "expected error {code}, got {r:?}");
    assert_eq!(r.get_i32("code").unwrap(), code, "{r:?}");
}

fn labels(r: &RawDocumentBuf) -> Vec<String> {
    r.get_array("errorLabels")
        .map(|a| {
            a.into_iter()
                .filter_map(|v| v.ok().and_then(|v| v.as_str().map(str::to_string)))
                .collect()
        })
        .unwrap_or_default()
}

/// A raw command in transaction `txn` of session `s`.
fn in_txn(mut body: RawDocumentBuf, s: u8, txn: i64, start: bool) -> RawDocumentBuf {
    body.append(bson::raw::cstr!("lsid"), lsid(s));
    body.append(bson::raw::cstr!("txnNumber"), txn);
    if start {
        body.append(bson::raw::cstr!("startTransaction"), true);
    }
    body.append(bson::raw::cstr!("autocommit"), false);
    body
}

async fn all(coll: &Collection<Document>) -> Vec<Document> {
    collect(coll.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await
}

// ---------------------------------------------------------------------------------------------
// atomicity

#[tokio::test]
async fn aborted_transaction_leaves_no_trace() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("txn");
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! {"_id": 0, "x": 0}).await.unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"x": 1}).build())
        .await
        .unwrap();
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 1, "x": 1})
        .session(&mut s)
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 0}, doc! {"$set": {"x": 100}})
        .session(&mut s)
        .await
        .unwrap();
    // Implicit creation of a new collection, and an index on it, inside the transaction.
    let fresh = db.collection::<Document>("fresh");
    db.run_command(doc! {"createIndexes": "fresh", "indexes": [{"key": {"y": 1}, "name": "y_1"}]})
        .session(&mut s)
        .await
        .unwrap();
    fresh
        .insert_one(doc! {"_id": "f", "y": 1})
        .session(&mut s)
        .await
        .unwrap();
    // The transaction reads its own writes.
    let mut cursor = coll
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .session(&mut s)
        .await
        .unwrap();
    let mut own = Vec::new();
    while let Some(d) = cursor.next(&mut s).await {
        own.push(d.unwrap());
    }
    assert_eq!(
        own,
        vec![doc! {"_id": 0, "x": 100}, doc! {"_id": 1, "x": 1}]
    );
    // Nobody else does.
    assert_eq!(all(&coll).await, vec![doc! {"_id": 0, "x": 0}]);
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.contains(&"fresh".to_string()), "{names:?}");
    assert_eq!(coll.count_documents_estimated().await, 1);
    s.abort_transaction().await.unwrap();
    // Nothing remains: documents, index entries, statistics, collections, indexes.
    assert_eq!(all(&coll).await, vec![doc! {"_id": 0, "x": 0}]);
    let by_index = collect(
        coll.find(doc! {"x": {"$gte": 0}})
            .hint(mongodb::options::Hint::Name("x_1".into()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(by_index, vec![doc! {"_id": 0, "x": 0}]);
    let stats = cmd(&db, doc! {"collStats": "c"}).await;
    assert_eq!(stats.get_i32("count").unwrap(), 1);
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.contains(&"fresh".to_string()), "{names:?}");
    // The name is free again.
    fresh.insert_one(doc! {"_id": "g"}).await.unwrap();
    let idx = fresh.list_index_names().await.unwrap();
    assert_eq!(idx, vec!["_id_".to_string()]);
}

/// Helper trait: the collection's document count through the `count` command.
trait Estimated {
    async fn count_documents_estimated(&self) -> u64;
}

impl Estimated for Collection<Document> {
    async fn count_documents_estimated(&self) -> u64 {
        self.estimated_document_count().await.unwrap()
    }
}

#[tokio::test]
async fn committed_transaction_is_visible_all_at_once() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("txn");
    let coll = db.collection::<Document>("c");
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    for i in 0..50 {
        coll.insert_one(doc! {"_id": i})
            .session(&mut s)
            .await
            .unwrap();
    }
    db.run_command(doc! {"create": "made"})
        .session(&mut s)
        .await
        .unwrap();
    assert!(all(&coll).await.is_empty());
    s.commit_transaction().await.unwrap();
    assert_eq!(all(&coll).await.len(), 50);
    assert!(
        db.list_collection_names()
            .await
            .unwrap()
            .contains(&"made".to_string())
    );
    // Committing again is idempotent.
    s.commit_transaction().await.unwrap();
}

#[tokio::test]
async fn readers_never_see_a_partial_transaction() {
    let server = TestServer::start();
    let client = server.client().await;
    let coll = client.database("txn").collection::<Document>("pairs");
    coll.insert_many(vec![doc! {"_id": "a", "v": 0}, doc! {"_id": "b", "v": 0}])
        .await
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let coll = coll.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) {
                let docs = all(&coll).await;
                let a = docs[0].get_i32("v").unwrap();
                let b = docs[1].get_i32("v").unwrap();
                assert_eq!(a, b, "partial transaction visible: {docs:?}");
                checks += 1;
            }
            checks
        })
    };
    for i in 1..=100 {
        let mut s = client.start_session().await.unwrap();
        s.start_transaction().await.unwrap();
        coll.update_one(doc! {"_id": "a"}, doc! {"$set": {"v": i}})
            .session(&mut s)
            .await
            .unwrap();
        coll.update_one(doc! {"_id": "b"}, doc! {"$set": {"v": i}})
            .session(&mut s)
            .await
            .unwrap();
        s.commit_transaction().await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.await.unwrap() > 0);
}

// ---------------------------------------------------------------------------------------------
// conflicts and withTransaction

/// The seeds' example: move a task between two people's lists, in two collections, with
/// `$pullAll`/`$addToSet` inside `withTransaction`, while other transactions touch the same
/// documents; every move is applied exactly once.
#[tokio::test]
async fn task_moves_with_transaction_apply_exactly_once() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("tasks");
    let todo = db.collection::<Document>("todo");
    let done = db.collection::<Document>("done");
    let tasks: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    todo.insert_one(doc! {"_id": "ann", "tasks": tasks.clone()})
        .await
        .unwrap();
    done.insert_one(doc! {"_id": "ann", "tasks": []})
        .await
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let mut handles = Vec::new();
    for w in 0..4 {
        let client = client.clone();
        let (todo, done) = (todo.clone(), done.clone());
        let mine: Vec<String> = tasks.iter().skip(w).step_by(4).cloned().collect();
        handles.push(local.spawn_local(async move {
            let mut attempts = 0u32;
            for t in mine {
                let mut s = client.start_session().await.unwrap();
                s.start_transaction()
                    .and_run2(async |s| {
                        attempts += 1;
                        todo.update_one(
                            doc! {"_id": "ann"},
                            doc! {"$pullAll": {"tasks": [t.clone()]}},
                        )
                        .session(&mut *s)
                        .await?;
                        done.update_one(
                            doc! {"_id": "ann"},
                            doc! {"$addToSet": {"tasks": t.clone()}},
                        )
                        .session(&mut *s)
                        .await?;
                        Ok(())
                    })
                    .await
                    .unwrap();
            }
            attempts
        }));
    }
    let attempts = local
        .run_until(async move {
            let mut attempts = 0;
            for h in handles {
                attempts += h.await.unwrap();
            }
            attempts
        })
        .await;
    let left = todo.find_one(doc! {"_id": "ann"}).await.unwrap().unwrap();
    let moved = done.find_one(doc! {"_id": "ann"}).await.unwrap().unwrap();
    assert!(left.get_array("tasks").unwrap().is_empty(), "{left}");
    let mut got: Vec<String> = moved
        .get_array("tasks")
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    got.sort();
    let mut want = tasks.clone();
    want.sort();
    assert_eq!(got, want);
    // Four writers on the same two documents conflict; withTransaction retried.
    assert!(attempts >= 40, "{attempts}");
}

/// A bank: 16 clients move money between 100 accounts in transactions for a bounded time.
/// The total never changes (checked by concurrent readers, each in a snapshot transaction),
/// every committed transfer is in the ledger exactly once, and every balance equals its
/// ledger sum (no lost update, no write skew).
#[tokio::test]
async fn bank_transfers_keep_the_invariant() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("bank");
    let accounts = db.collection::<Document>("accounts");
    let ledger = db.collection::<Document>("ledger");
    accounts
        .insert_many((0..100).map(|i| doc! {"_id": i, "balance": 1000i64}))
        .await
        .unwrap();
    ledger.insert_one(doc! {"_id": "seed"}).await.unwrap();
    let committed = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(6);
    let local = tokio::task::LocalSet::new();
    let mut handles = Vec::new();
    for w in 0..16u64 {
        let (client, accounts, ledger, committed) = (
            client.clone(),
            accounts.clone(),
            ledger.clone(),
            committed.clone(),
        );
        handles.push(local.spawn_local(async move {
            let mut n = 0u64;
            let mut seed = w * 7919 + 1;
            while Instant::now() < deadline {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let from = (seed >> 33) % 100;
                let to = (from + 1 + (seed >> 40) % 99) % 100;
                let amount = ((seed >> 20) % 50) as i64 + 1;
                let id = format!("{w}-{n}");
                let mut s = client.start_session().await.unwrap();
                let r = s
                    .start_transaction()
                    .and_run2(async |s| {
                        let a = accounts
                            .find_one(doc! {"_id": from as i32})
                            .session(&mut *s)
                            .await?
                            .unwrap();
                        if a.get_i64("balance").unwrap() < amount {
                            return Ok(false);
                        }
                        accounts
                            .update_one(
                                doc! {"_id": from as i32},
                                doc! {"$inc": {"balance": -amount}},
                            )
                            .session(&mut *s)
                            .await?;
                        accounts
                            .update_one(
                                doc! {"_id": to as i32},
                                doc! {"$inc": {"balance": amount}},
                            )
                            .session(&mut *s)
                            .await?;
                        ledger
                            .insert_one(doc! {"_id": id.clone(), "from": from as i32, "to": to as i32, "amount": amount})
                            .session(&mut *s)
                            .await?;
                        Ok(true)
                    })
                    .await
                    .unwrap();
                if r {
                    committed.fetch_add(1, Ordering::Relaxed);
                }
                n += 1;
            }
        }));
    }
    // Readers: the total seen in a snapshot transaction is always 100,000.
    let reader = {
        let client = client.clone();
        let accounts = accounts.clone();
        tokio::spawn(async move {
            let mut checks = 0;
            while Instant::now() < deadline {
                let mut s = client.start_session().await.unwrap();
                s.start_transaction()
                    .read_concern(mongodb::options::ReadConcern::snapshot())
                    .await
                    .unwrap();
                let mut cursor = accounts.find(doc! {}).session(&mut s).await.unwrap();
                let mut total = 0i64;
                while let Some(d) = cursor.next(&mut s).await {
                    total += d.unwrap().get_i64("balance").unwrap();
                }
                s.commit_transaction().await.unwrap();
                assert_eq!(total, 100_000);
                checks += 1;
            }
            checks
        })
    };
    local
        .run_until(async move {
            for h in handles {
                h.await.unwrap();
            }
        })
        .await;
    assert!(reader.await.unwrap() > 0);
    let docs = all(&accounts).await;
    let total: i64 = docs.iter().map(|d| d.get_i64("balance").unwrap()).sum();
    assert_eq!(total, 100_000);
    let entries = all(&ledger).await;
    let transfers: Vec<&Document> = entries.iter().filter(|d| d.contains_key("from")).collect();
    assert_eq!(transfers.len() as u64, committed.load(Ordering::Relaxed));
    assert!(!transfers.is_empty());
    let mut expected = vec![1000i64; 100];
    for t in &transfers {
        let amount = t.get_i64("amount").unwrap();
        expected[t.get_i32("from").unwrap() as usize] -= amount;
        expected[t.get_i32("to").unwrap() as usize] += amount;
    }
    for d in &docs {
        let i = d.get_i32("_id").unwrap() as usize;
        assert_eq!(d.get_i64("balance").unwrap(), expected[i], "account {i}");
        assert!(expected[i] >= 0);
    }
}

#[tokio::test]
async fn concurrent_transactions_on_one_document_conflict() {
    let server = TestServer::start();
    let mut a = server.raw().await;
    let mut b = server.raw().await;
    a.command(rawdoc! {"insert": "c", "documents": [{"_id": 1, "n": 0}], "$db": "t"})
        .await;
    let inc = |n: i32| {
        rawdoc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"n": n}}}], "$db": "t"}
    };
    let commit = || rawdoc! {"commitTransaction": 1, "$db": "admin"};
    // First writer wins: the second transaction's write fails at once (no waiting, no
    // deadlock) with WriteConflict, labelled so drivers retry, and its transaction is gone.
    assert!(ok(&a.command(in_txn(inc(1), 1, 1, true)).await));
    let r = b.command(in_txn(inc(10), 2, 1, true)).await;
    assert_code(&r, 112);
    assert_eq!(labels(&r), vec![TRANSIENT_TRANSACTION_ERROR.to_string()]);
    let r = b.command(in_txn(commit(), 2, 1, false)).await;
    assert_code(&r, 251);
    assert_eq!(labels(&r), vec![TRANSIENT_TRANSACTION_ERROR.to_string()]);
    // The same for two transactions inserting one _id.
    let ins = rawdoc! {"insert": "c", "documents": [{"_id": 2}], "$db": "t"};
    assert!(ok(&b.command(in_txn(ins.clone(), 2, 2, true)).await));
    let r = server
        .raw()
        .await
        .command(in_txn(ins.clone(), 3, 1, true))
        .await;
    assert_code(&r, 112);
    assert!(ok(&b.command(in_txn(commit(), 2, 2, false)).await));
    assert!(ok(&a.command(in_txn(commit(), 1, 1, false)).await));
    // A write outside any transaction is not refused; the transaction that read the older
    // version then fails to commit (serializable), labelled for a retry.
    assert!(ok(&a.command(in_txn(inc(1), 1, 2, true)).await));
    assert!(ok(&b.command(inc(100)).await));
    let r = a.command(in_txn(commit(), 1, 2, false)).await;
    assert_code(&r, 112);
    assert_eq!(labels(&r), vec![TRANSIENT_TRANSACTION_ERROR.to_string()]);
    let r = a
        .command(rawdoc! {"find": "c", "filter": {"_id": 1}, "$db": "t"})
        .await;
    let first = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let d = first.into_iter().next().unwrap().unwrap();
    assert_eq!(d.as_document().unwrap().get_i32("n").unwrap(), 101);
    let _ = UNKNOWN_TRANSACTION_COMMIT_RESULT;
}

// ---------------------------------------------------------------------------------------------
// the router's rules, codes and labels

#[tokio::test]
async fn transaction_state_errors() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    let ins = |id: i32| rawdoc! {"insert": "c", "documents": [{"_id": id}], "$db": "t"};
    let commit = || rawdoc! {"commitTransaction": 1, "$db": "admin"};
    let abort = || rawdoc! {"abortTransaction": 1, "$db": "admin"};
    // Continue a transaction that never started.
    let r = c.command(in_txn(ins(1), 1, 5, false)).await;
    assert_code(&r, 251);
    assert_eq!(labels(&r), vec!["TransientTransactionError"]);
    // Start, then start again with the same number.
    assert!(ok(&c.command(in_txn(ins(1), 1, 6, true)).await));
    let r = c.command(in_txn(ins(2), 1, 6, true)).await;
    assert_code(&r, 117);
    // The refusal did not abort the transaction.
    // count is not allowed in a transaction (263), and does not abort it either.
    let r = c
        .command(in_txn(rawdoc! {"count": "c", "$db": "t"}, 1, 6, false))
        .await;
    assert_code(&r, 263);
    assert!(
        r.get_str("errmsg")
            .unwrap()
            .starts_with("Cannot run 'count' in a multi-document transaction")
    );
    // writeConcern on a statement: 72, no abort.
    let mut w = in_txn(ins(3), 1, 6, false);
    w.append(bson::raw::cstr!("writeConcern"), rawdoc! {"w": 1});
    assert_code(&c.command(w).await, 72);
    // readConcern on a later statement: 72.
    let mut rc = in_txn(rawdoc! {"find": "c", "$db": "t"}, 1, 6, false);
    rc.append(bson::raw::cstr!("readConcern"), rawdoc! {"level": "local"});
    assert_code(&c.command(rc).await, 72);
    // listCollections is not allowed.
    assert_code(
        &c.command(in_txn(
            rawdoc! {"listCollections": 1, "$db": "t"},
            1,
            6,
            false,
        ))
        .await,
        263,
    );
    // Commit works (the refusals above did not abort), and is idempotent.
    let r = c.command(in_txn(commit(), 1, 6, false)).await;
    assert!(ok(&r), "{r:?}");
    assert_eq!(
        r.get_document("recoveryToken").unwrap().to_owned(),
        rawdoc! {"recoveryShardId": "cairn"}
    );
    assert!(ok(&c.command(in_txn(commit(), 1, 6, false)).await));
    // Abort after commit: 256; continue after commit: 256.
    assert_code(&c.command(in_txn(abort(), 1, 6, false)).await, 256);
    assert_code(&c.command(in_txn(ins(9), 1, 6, false)).await, 256);
    // Older number: 225.
    assert_code(&c.command(in_txn(ins(9), 1, 5, true)).await, 225);
    // A failing statement aborts: duplicate _id inside a transaction.
    assert!(ok(&c.command(in_txn(ins(10), 1, 7, true)).await));
    let r = c.command(in_txn(ins(1), 1, 7, false)).await;
    assert!(ok(&r));
    assert!(r.get_array("writeErrors").is_ok(), "{r:?}");
    let r = c.command(in_txn(commit(), 1, 7, false)).await;
    assert_code(&r, 251);
    assert_eq!(labels(&r), vec!["TransientTransactionError"]);
    assert_code(&c.command(in_txn(abort(), 1, 7, false)).await, 251);
    // Nothing of transaction 7 is visible.
    let r = c
        .command(rawdoc! {"find": "c", "filter": {"_id": 10}, "$db": "t"})
        .await;
    assert!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .is_empty()
    );
    // Argument rules.
    assert_code(
        &c.command(rawdoc! {"find": "c", "txnNumber": 1i64, "$db": "t"})
            .await,
        72,
    );
    assert_code(
        &c.command(rawdoc! {"find": "c", "lsid": lsid(1), "txnNumber": 8i64, "$db": "t"})
            .await,
        50768,
    );
    assert_code(
        &c.command(rawdoc! {"insert": "c", "documents": [{}], "lsid": lsid(1), "txnNumber": 8i64, "autocommit": true, "$db": "t"})
            .await,
        72,
    );
    assert_code(
        &c.command(rawdoc! {"ping": 1, "lsid": lsid(1), "txnNumber": 8i64, "$db": "t"})
            .await,
        50889,
    );
    assert_code(
        &c.command(in_txn(
            rawdoc! {"commitTransaction": 1, "$db": "admin"},
            1,
            8,
            true,
        ))
        .await,
        263,
    );
    assert_code(
        &c.command(rawdoc! {"find": "c", "lsid": {"id": 1}, "$db": "t"})
            .await,
        14,
    );
    assert_code(
        &c.command(rawdoc! {"find": "c", "lsid": {}, "$db": "t"})
            .await,
        40414,
    );
    // Every reply carries the router's gossip.
    let r = c.command(rawdoc! {"ping": 1, "$db": "t"}).await;
    assert!(r.get_document("$clusterTime").is_ok(), "{r:?}");
    assert!(r.get_timestamp("operationTime").is_ok(), "{r:?}");
    let keys: Vec<String> = r.iter().map(|e| e.unwrap().0.to_string()).collect();
    assert_eq!(keys, ["ok", "$clusterTime", "operationTime"]);
}

#[tokio::test]
async fn ddl_inside_transactions() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    c.command(rawdoc! {"insert": "old", "documents": [{"_id": 1}], "$db": "t"})
        .await;
    // createIndexes on a collection that existed before the transaction: 263.
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"insert": "old", "documents": [{"_id": 2}], "$db": "t"},
            3,
            1,
            true
        ))
        .await));
    let r = c
        .command(in_txn(
            rawdoc! {"createIndexes": "old", "indexes": [{"key": {"a": 1}, "name": "a_1"}], "$db": "t"},
            3,
            1,
            false,
        ))
        .await;
    assert_code(&r, 263);
    // On a collection created in the transaction: allowed while empty, visible at commit.
    assert!(ok(&c
        .command(in_txn(rawdoc! {"create": "new", "$db": "t"}, 3, 2, true))
        .await));
    let r = c
        .command(in_txn(
            rawdoc! {"createIndexes": "new", "indexes": [{"key": {"a": 1}, "name": "a_1", "unique": true}], "$db": "t"},
            3,
            2,
            false,
        ))
        .await;
    assert!(ok(&r), "{r:?}");
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"insert": "new", "documents": [{"_id": 1, "a": 1}], "$db": "t"},
            3,
            2,
            false
        ))
        .await));
    // The unique index works inside the transaction.
    let r = c
        .command(in_txn(
            rawdoc! {"insert": "new", "documents": [{"_id": 2, "a": 1}], "$db": "t"},
            3,
            2,
            false,
        ))
        .await;
    assert_eq!(
        r.get_array("writeErrors")
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
            .unwrap()
            .as_document()
            .unwrap()
            .get_i32("code")
            .unwrap(),
        11000
    );
    // That aborted the transaction: nothing of it exists.
    let r = c
        .command(rawdoc! {"listCollections": 1, "filter": {"name": "new"}, "$db": "t"})
        .await;
    assert!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .is_empty()
    );
    // Again, committed this time.
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"insert": "new", "documents": [{"_id": 1, "a": 1}], "$db": "t"},
            3,
            3,
            true
        ))
        .await));
    let r = c
        .command(in_txn(
            rawdoc! {"createIndexes": "new", "indexes": [{"key": {"a": 1}, "name": "a_1"}], "$db": "t"},
            3,
            3,
            false,
        ))
        .await;
    assert_code(&r, 263);
    assert!(ok(&c
        .command(in_txn(rawdoc! {"create": "newer", "$db": "t"}, 3, 4, true))
        .await));
    assert!(ok(&c
        .command(in_txn(rawdoc! {"createIndexes": "newer", "indexes": [{"key": {"b": 1}, "name": "b_1"}], "$db": "t"}, 3, 4, false))
        .await));
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"commitTransaction": 1, "$db": "admin"},
            3,
            4,
            false
        ))
        .await));
    let r = c
        .command(rawdoc! {"listIndexes": "newer", "$db": "t"})
        .await;
    let names: Vec<String> = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .into_iter()
        .map(|d| {
            d.unwrap()
                .as_document()
                .unwrap()
                .get_str("name")
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["_id_", "b_1"]);
    // Snapshot transactions may not run DDL (72).
    let mut first = in_txn(rawdoc! {"create": "snap", "$db": "t"}, 3, 5, true);
    first.append(
        bson::raw::cstr!("readConcern"),
        rawdoc! {"level": "snapshot"},
    );
    assert_code(&c.command(first).await, 72);
    // System collections: 50791.
    assert_code(
        &c.command(in_txn(
            rawdoc! {"insert": "system.js", "documents": [{"_id": 1}], "$db": "t"},
            3,
            6,
            true,
        ))
        .await,
        50791,
    );
}

#[tokio::test]
async fn cursors_in_transactions() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    c.command(
        rawdoc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}, {"_id": 3}], "$db": "t"},
    )
    .await;
    let r = c
        .command(in_txn(
            rawdoc! {"find": "c", "batchSize": 1, "$db": "t"},
            4,
            1,
            true,
        ))
        .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    // getMore outside the transaction: 50803; inside: fine.
    let r = c
        .command(rawdoc! {"getMore": id, "collection": "c", "lsid": lsid(4), "$db": "t"})
        .await;
    assert_code(&r, 50803);
    let r = c
        .command(in_txn(
            rawdoc! {"getMore": id, "collection": "c", "batchSize": 1, "$db": "t"},
            4,
            1,
            false,
        ))
        .await;
    assert!(ok(&r), "{r:?}");
    // The transaction ends: its cursor dies.
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"commitTransaction": 1, "$db": "admin"},
            4,
            1,
            false
        ))
        .await));
    let r = c
        .command(in_txn(
            rawdoc! {"getMore": id, "collection": "c", "$db": "t"},
            4,
            2,
            true,
        ))
        .await;
    assert_code(&r, 43);
}

#[tokio::test]
async fn expired_transactions_are_aborted() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    let r = c
        .command(rawdoc! {"setParameter": 1, "transactionLifetimeLimitSeconds": 1, "$db": "admin"})
        .await;
    assert!(ok(&r), "{r:?}");
    assert_eq!(r.get_i32("was").unwrap(), 60);
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"insert": "c", "documents": [{"_id": 1}], "$db": "t"},
            5,
            1,
            true
        ))
        .await));
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let r = c
        .command(in_txn(
            rawdoc! {"insert": "c", "documents": [{"_id": 2}], "$db": "t"},
            5,
            1,
            false,
        ))
        .await;
    assert_code(&r, 251);
    assert_eq!(labels(&r), vec!["TransientTransactionError"]);
    let r = c.command(rawdoc! {"find": "c", "$db": "t"}).await;
    assert!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .is_empty()
    );
    let r = c
        .command(rawdoc! {"getParameter": 1, "transactionLifetimeLimitSeconds": 1, "$db": "admin"})
        .await;
    assert_eq!(r.get_i32("transactionLifetimeLimitSeconds").unwrap(), 1);
    assert_code(
        &c.command(
            rawdoc! {"setParameter": 1, "transactionLifetimeLimitSeconds": 0, "$db": "admin"},
        )
        .await,
        2,
    );
    assert_code(
        &c.command(rawdoc! {"setParameter": 1, "noSuchThing": 0, "$db": "admin"})
            .await,
        72,
    );
}

#[tokio::test]
async fn session_commands() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    let r = c.command(rawdoc! {"startSession": 1, "$db": "admin"}).await;
    assert!(ok(&r), "{r:?}");
    assert_eq!(r.get_i32("timeoutMinutes").unwrap(), 30);
    assert!(r.get_document("id").unwrap().get_binary("id").is_ok());
    assert!(ok(&c
        .command(rawdoc! {"refreshSessions": [lsid(6)], "$db": "admin"})
        .await));
    assert_code(
        &c.command(rawdoc! {"refreshSessions": [{"id": "x"}], "$db": "admin"})
            .await,
        14,
    );
    assert_code(
        &c.command(rawdoc! {"endSessions": "x", "$db": "admin"})
            .await,
        14,
    );
    // killSessions aborts the session's transaction.
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"insert": "c", "documents": [{"_id": 1}], "$db": "t"},
            6,
            1,
            true
        ))
        .await));
    assert!(ok(&c
        .command(rawdoc! {"killSessions": [lsid(6)], "$db": "admin"})
        .await));
    let r = c
        .command(in_txn(
            rawdoc! {"commitTransaction": 1, "$db": "admin"},
            6,
            1,
            false,
        ))
        .await;
    assert_code(&r, 251);
    // The id can be used again.
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"insert": "c", "documents": [{"_id": 2}], "$db": "t"},
            6,
            2,
            true
        ))
        .await));
    assert!(ok(&c
        .command(rawdoc! {"killAllSessionsByPattern": [{"lsid": lsid(6)}], "$db": "admin"})
        .await));
    assert_code(
        &c.command(in_txn(
            rawdoc! {"commitTransaction": 1, "$db": "admin"},
            6,
            2,
            false,
        ))
        .await,
        251,
    );
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"insert": "c", "documents": [{"_id": 3}], "$db": "t"},
            6,
            3,
            true
        ))
        .await));
    assert!(ok(&c
        .command(rawdoc! {"killAllSessions": [], "$db": "admin"})
        .await));
    assert_code(
        &c.command(in_txn(
            rawdoc! {"commitTransaction": 1, "$db": "admin"},
            6,
            3,
            false,
        ))
        .await,
        251,
    );
    let r = c.command(rawdoc! {"find": "c", "$db": "t"}).await;
    assert!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .is_empty()
    );
    // endSessions is lazy: a cursor of the ended session still works right after.
    c.command(rawdoc! {"insert": "d", "documents": [{"_id": 1}, {"_id": 2}], "$db": "t"})
        .await;
    let r = c
        .command(rawdoc! {"find": "d", "batchSize": 1, "lsid": lsid(7), "$db": "t"})
        .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert!(ok(&c
        .command(rawdoc! {"endSessions": [lsid(7)], "$db": "admin"})
        .await));
    assert!(ok(&c
        .command(rawdoc! {"getMore": id, "collection": "d", "lsid": lsid(7), "$db": "t"})
        .await));
}

/// A `find` that keeps a cursor ties it to its session (the first `id` of `lsid`): another
/// session, or none, cannot continue it, and killing the session kills it; a `find` without
/// a session keeps a cursor of no session.
#[tokio::test]
async fn find_cursors_belong_to_their_session() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    c.command(
        rawdoc! {"insert": "f", "documents": [{"_id": 1}, {"_id": 2}, {"_id": 3}], "$db": "t"},
    )
    .await;
    let cursor_of = |r: &RawDocumentBuf| r.get_document("cursor").unwrap().get_i64("id").unwrap();
    // The whole result in the first batch: no cursor is kept.
    let r = c
        .command(rawdoc! {"find": "f", "lsid": lsid(8), "$db": "t"})
        .await;
    assert_eq!(cursor_of(&r), 0);
    let mut repeated = lsid(8);
    repeated.append(
        bson::raw::cstr!("id"),
        Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![9; 16],
        },
    );
    let r = c
        .command(rawdoc! {"find": "f", "batchSize": 1, "lsid": repeated, "$db": "t"})
        .await;
    let id = cursor_of(&r);
    assert_ne!(id, 0);
    let more = |lsid: Option<RawDocumentBuf>, batch: i32| {
        let mut b = rawdoc! {"getMore": id, "collection": "f", "batchSize": batch, "$db": "t"};
        if let Some(l) = lsid {
            b.append(bson::raw::cstr!("lsid"), l);
        }
        b
    };
    assert_code(&c.command(more(Some(lsid(9)), 1)).await, 50801);
    assert_code(&c.command(more(None, 1)).await, 50800);
    let r = c.command(more(Some(lsid(8)), 1)).await;
    assert!(ok(&r), "{r:?}");
    assert!(ok(&c
        .command(rawdoc! {"killSessions": [lsid(8)], "$db": "admin"})
        .await));
    assert_code(&c.command(more(Some(lsid(8)), 1)).await, 43);
    // Without a session.
    let r = c
        .command(rawdoc! {"find": "f", "batchSize": 1, "$db": "t"})
        .await;
    let id = cursor_of(&r);
    let more = |lsid: Option<RawDocumentBuf>| {
        let mut b = rawdoc! {"getMore": id, "collection": "f", "$db": "t"};
        if let Some(l) = lsid {
            b.append(bson::raw::cstr!("lsid"), l);
        }
        b
    };
    assert_code(&c.command(more(Some(lsid(8)))).await, 50799);
    let r = c.command(more(None)).await;
    assert!(ok(&r), "{r:?}");
}

#[tokio::test]
async fn with_transaction_through_the_driver_defaults() {
    // A plain URI: the driver sees a router and enables transactions.
    let server = TestServer::start();
    let client = server.client().await;
    let coll = client.database("wt").collection::<Document>("c");
    let mut s = client.start_session().await.unwrap();
    let seen = s
        .start_transaction()
        .and_run2(async |s| {
            coll.insert_one(doc! {"_id": 1}).session(&mut *s).await?;
            coll.insert_one(doc! {"_id": 2}).session(&mut *s).await?;
            let d = coll.find_one(doc! {"_id": 2}).session(&mut *s).await?;
            Ok(d)
        })
        .await
        .unwrap();
    assert_eq!(seen, Some(doc! {"_id": 2}));
    assert_eq!(all(&coll).await.len(), 2);
    // A callback error aborts: nothing is left.
    let r: mongodb::error::Result<()> = s
        .start_transaction()
        .and_run2(async |s| {
            coll.insert_one(doc! {"_id": 3}).session(&mut *s).await?;
            coll.insert_one(doc! {"_id": 1}).session(&mut *s).await?;
            Ok(())
        })
        .await;
    assert_eq!(code_of(&r.unwrap_err()), 11000);
    assert_eq!(all(&coll).await.len(), 2);
    let _ = Bson::Null;
}

#[tokio::test]
async fn snapshot_transactions_at_a_cluster_time() {
    let server = TestServer::start();
    let mut c = server.raw().await;
    let r = c
        .command(rawdoc! {"insert": "c", "documents": [{"_id": 1}], "$db": "t"})
        .await;
    let t = r.get_timestamp("operationTime").unwrap();
    // Nothing committed since: a transaction can read at that time.
    let mut first = in_txn(rawdoc! {"find": "c", "$db": "t"}, 8, 1, true);
    first.append(
        bson::raw::cstr!("readConcern"),
        rawdoc! {"level": "snapshot", "atClusterTime": t},
    );
    let r = c.command(first).await;
    assert!(ok(&r), "{r:?}");
    assert!(ok(&c
        .command(in_txn(
            rawdoc! {"abortTransaction": 1, "$db": "admin"},
            8,
            1,
            false
        ))
        .await));
    // After another commit it cannot: SnapshotTooOld, labelled transient.
    c.command(rawdoc! {"insert": "c", "documents": [{"_id": 2}], "$db": "t"})
        .await;
    let mut again = in_txn(rawdoc! {"find": "c", "$db": "t"}, 8, 2, true);
    again.append(
        bson::raw::cstr!("readConcern"),
        rawdoc! {"level": "snapshot", "atClusterTime": t},
    );
    let r = c.command(again).await;
    assert_code(&r, 239);
    assert_eq!(labels(&r), vec!["TransientTransactionError"]);
}

#[tokio::test]
async fn aggregation_in_sessions_and_transactions() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("aggtxn");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..5).map(|i| doc! {"_id": i, "k": i % 2}))
        .await
        .unwrap();
    // count_documents (an aggregation) inside a transaction sees the transaction's writes.
    let mut s = client.start_session().await.unwrap();
    let n = s
        .start_transaction()
        .and_run2(async |s| {
            coll.insert_one(doc! {"_id": 10, "k": 1})
                .session(&mut *s)
                .await?;
            coll.count_documents(doc! {"k": 1}).session(&mut *s).await
        })
        .await
        .unwrap();
    assert_eq!(n, 3);
    // $out is refused inside a transaction (263), and aborts it.
    s.start_transaction().await.unwrap();
    let e = coll
        .aggregate(vec![doc! {"$out": "copy"}])
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 263);
    let _ = s.abort_transaction().await;
    // $listLocalSessions lists the sessions the server knows.
    let admin = client.database("admin");
    let mut cursor = admin
        .aggregate(vec![doc! {"$listLocalSessions": {"allUsers": true}}])
        .await
        .unwrap();
    let mut ids = Vec::new();
    while cursor.advance().await.unwrap() {
        let d: Document = cursor.deserialize_current().unwrap();
        let id = d.get_document("_id").unwrap();
        assert_eq!(
            id.get_binary_generic("uid").map(|b| b.len()).ok(),
            Some(32),
            "{d}"
        );
        assert!(d.get_datetime("lastUse").is_ok());
        ids.push(id.get("id").cloned().unwrap());
    }
    let mine = s.id().get("id").cloned().unwrap();
    assert!(ids.contains(&mine), "{ids:?} lacks {mine:?}");
    let mut c = server.raw().await;
    let r = c
        .command(rawdoc! {"aggregate": "c", "pipeline": [{"$listLocalSessions": {}}], "cursor": {}, "$db": "t"})
        .await;
    assert_code(&r, 73);
    let r = c
        .command(rawdoc! {"aggregate": "system.sessions", "pipeline": [{"$listSessions": {}}], "cursor": {}, "lsid": lsid(9), "$db": "config"})
        .await;
    assert!(ok(&r), "{r:?}");
    // A snapshot aggregate reports and honours atClusterTime.
    let r = c
        .command(rawdoc! {"aggregate": "c", "pipeline": [{"$count": "n"}], "cursor": {}, "readConcern": {"level": "snapshot"}, "$db": "aggtxn"})
        .await;
    let cur = r.get_document("cursor").unwrap();
    let at = cur.get_timestamp("atClusterTime").unwrap();
    c.command(rawdoc! {"insert": "c", "documents": [{"_id": 99}], "$db": "aggtxn"})
        .await;
    let r = c
        .command(rawdoc! {"aggregate": "c", "pipeline": [{"$count": "n"}], "cursor": {}, "readConcern": {"level": "snapshot", "atClusterTime": at}, "$db": "aggtxn"})
        .await;
    let first = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(first.as_document().unwrap().get_i32("n").unwrap(), 6);
}
