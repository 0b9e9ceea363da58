//! Updates touch only the keys of the paths they change (DESIGN §3), observed end to end
//! through `serverStatus.cairnStorage` (keys read and written by committed write
//! transactions): `$inc` rewrites one leaf, `$addToSet`/`$push` on a 1,000-element array
//! write a constant number of keys, `$pullAll` rewrites only the shifted tail — or, for an
//! array small enough to be stored packed (see `CAIRN_PACK_THRESHOLD`), its one value.

use bson::{Bson, Document, doc};
use cairn_compat_tests::TestServer;

async fn counters(c: &mongodb::Client) -> (i64, i64) {
    let st = c
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .unwrap();
    let s = st.get_document("cairnStorage").unwrap();
    (
        s.get_i64("keysRead").unwrap(),
        s.get_i64("keysWritten").unwrap(),
    )
}

/// Runs `update` against `{_id: 1}` and returns (keys read, keys written) by it.
async fn measure(c: &mongodb::Client, update: Document) -> (i64, i64) {
    let coll = c.database("amp").collection::<Document>("c");
    let (r0, w0) = counters(c).await;
    coll.update_one(doc! {"_id": 1}, update).await.unwrap();
    let (r1, w1) = counters(c).await;
    (r1 - r0, w1 - w0)
}

#[tokio::test]
async fn updates_touch_only_their_keys() {
    let s = TestServer::start();
    // Plain writes: a retryable write also records its statement (measured below).
    let c = s.client_with("retryWrites=false").await;
    let coll = c.database("amp").collection::<Document>("c");
    let big: Vec<Bson> = (0..1000).map(Bson::Int32).collect();
    let hundred: Vec<Bson> = (0..100).map(Bson::Int32).collect();
    coll.insert_one(doc! {"_id": 1, "n": 5, "tags": big, "v": hundred, "other": {"x": "y"}})
        .await
        .unwrap();

    // $inc: the leaf only (same size: no root header, no statistics delta); reads the catalog
    // record, the root header and the field.
    let (reads, writes) = measure(&c, doc! {"$inc": {"n": 1}}).await;
    assert_eq!(writes, 1, "$inc wrote {writes} keys");
    assert!(reads <= 4, "$inc read {reads} keys");

    // The same $inc as a retryable write (the drivers' default) also writes its statement
    // record and the session record, and deletes the previous write's record: 3 more keys.
    let retrying = s.client().await;
    measure(&retrying, doc! {"$inc": {"n": 1}}).await;
    let (_, writes) = measure(&retrying, doc! {"$inc": {"n": 1}}).await;
    assert_eq!(writes, 4, "retryable $inc wrote {writes} keys");

    // $addToSet of a new element to a 1,000-element array: element + array header + root
    // header + statistics delta, independent of the array's length.
    let (reads, writes) = measure(&c, doc! {"$addToSet": {"tags": 1000}}).await;
    assert!(writes <= 4, "$addToSet wrote {writes} keys");
    assert!(
        reads >= 1001,
        "$addToSet reads the array's key range ({reads})"
    );
    // and again after the array grew: still constant
    let (_, writes_again) = measure(&c, doc! {"$addToSet": {"tags": 1001}}).await;
    assert_eq!(writes_again, writes);
    // an element already present changes nothing
    let (_, writes) = measure(&c, doc! {"$addToSet": {"tags": 5}}).await;
    assert_eq!(writes, 0, "a no-op $addToSet writes nothing");
    // $push with $each appends O(#new) keys
    let (_, writes) = measure(&c, doc! {"$push": {"tags": {"$each": [2000, 2001, 2002]}}}).await;
    assert!(writes <= 6, "$push of 3 wrote {writes} keys");

    // $pullAll of element 90 of a 100-element array: one key per node, the 9 shifted
    // elements, the deleted last key, the array header, the root header and the statistics
    // delta; packed (the array's 795 bytes fit the threshold), its one value, the root
    // header and the delta.
    let v_size = bson::RawDocumentBuf::try_from(&doc! {"v": (0..100).collect::<Vec<i32>>()})
        .unwrap()
        .as_bytes()
        .len()
        - 8;
    assert_eq!(v_size, 795);
    let v_packed = cairn_compat_tests::pack_threshold() as usize >= v_size;
    let (_, writes) = measure(&c, doc! {"$pullAll": {"v": [90]}}).await;
    assert_eq!(
        writes,
        if v_packed { 3 } else { 13 },
        "$pullAll wrote {writes} keys"
    );
    // removing the first element shifts everything (or rewrites the same one value)
    let (_, writes) = measure(&c, doc! {"$pullAll": {"v": [0]}}).await;
    if v_packed {
        assert_eq!(writes, 3, "$pullAll of the head rewrote {writes} keys");
    } else {
        assert!(writes >= 98, "$pullAll of the head rewrote {writes} keys");
    }

    // the document is what MongoDB would hold
    let d = coll.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(d.get_i32("n").unwrap(), 8);
    let tags = d.get_array("tags").unwrap();
    assert_eq!(tags.len(), 1005);
    assert_eq!(tags[1000], Bson::Int32(1000));
    assert_eq!(tags[1004], Bson::Int32(2002));
    let v = d.get_array("v").unwrap();
    assert_eq!(v.len(), 98);
    assert_eq!(v[0], Bson::Int32(1));
    assert!(!v.contains(&Bson::Int32(90)));
    assert_eq!(
        d.keys().collect::<Vec<_>>(),
        ["_id", "n", "tags", "v", "other"]
    );
    // statistics still exact
    let st = c
        .database("amp")
        .run_command(doc! {"collStats": "c"})
        .await
        .unwrap();
    let size = bson::RawDocumentBuf::try_from(&d).unwrap().as_bytes().len() as i32;
    assert_eq!(st.get_i32("size").unwrap(), size);
}
