//! `$expr`, `$jsonSchema`, computed projection fields and `let` variables through the Rust
//! driver, in every command that takes a filter (find, count, distinct, update, delete,
//! findAndModify). Evaluation errors fail the whole command with MongoDB's code.

use bson::{Document, doc};
use cairn_compat_tests::{TestServer, code_of, collect};

async fn ids(c: &mongodb::Collection<Document>, filter: Document) -> Vec<i32> {
    let docs = collect(c.find(filter).sort(doc! {"_id": 1}).await.unwrap()).await;
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

#[tokio::test]
async fn expr_and_json_schema_in_every_filter() {
    let server = TestServer::start();
    let client = server.client().await;
    let c = client
        .database("expr")
        .collection::<Document>("monthlyBudget");
    // The manual's $expr example.
    c.insert_many([
        doc! {"_id": 1, "category": "food", "budget": 400, "spent": 450},
        doc! {"_id": 2, "category": "drinks", "budget": 100, "spent": 150},
        doc! {"_id": 3, "category": "clothes", "budget": 100, "spent": 50},
        doc! {"_id": 4, "category": "misc", "budget": 500, "spent": 300},
        doc! {"_id": 5, "category": "travel", "budget": 200, "spent": 650},
    ])
    .await
    .unwrap();
    let over = doc! {"$expr": {"$gt": ["$spent", "$budget"]}};
    assert_eq!(ids(&c, over.clone()).await, vec![1, 2, 5]);
    let n = client
        .database("expr")
        .run_command(doc! {"count": "monthlyBudget", "query": over.clone()})
        .await
        .unwrap();
    assert_eq!(n.get_i32("n").unwrap(), 3);
    let cats = c.distinct("category", over.clone()).await.unwrap();
    assert_eq!(cats.len(), 3);
    // $jsonSchema alongside ordinary predicates.
    let schema = doc! {"$jsonSchema": {"required": ["budget"], "properties": {"spent": {"bsonType": "int", "minimum": 300}}}};
    assert_eq!(ids(&c, schema.clone()).await, vec![1, 4, 5]);
    assert_eq!(
        ids(&c, doc! {"$and": [schema.clone(), over.clone()]}).await,
        vec![1, 5]
    );
    // Writes.
    let r = c
        .update_many(over.clone(), doc! {"$set": {"over": true}})
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (3, 3));
    let r = c
        .delete_many(doc! {"$expr": {"$lt": ["$spent", 100]}})
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 1);
    let d = c
        .find_one_and_update(
            doc! {"$expr": {"$eq": ["$spent", {"$multiply": ["$budget", 1.5]}]}},
            doc! {"$inc": {"spent": 1}},
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.get_i32("_id").unwrap(), 2);
    // Bad operands are parse errors with MongoDB's codes.
    let e = c.find_one(doc! {"$expr": {"$nope": 1}}).await.unwrap_err();
    assert_eq!(code_of(&e), 168);
    let e = c
        .find_one(doc! {"$jsonSchema": {"unknownKeyword": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 9);
}

#[tokio::test]
async fn evaluation_errors_fail_the_command() {
    let server = TestServer::start();
    let client = server.client().await;
    let c = client.database("expr").collection::<Document>("errs");
    c.insert_many([doc! {"_id": 1, "a": 2}, doc! {"_id": 2, "a": 0}])
        .await
        .unwrap();
    let div = doc! {"$expr": {"$gt": [{"$divide": [1, "$a"]}, 0]}};
    let e = c.find(div.clone()).await.unwrap_err();
    assert_eq!(code_of(&e), 2, "{e}");
    let e = c
        .update_many(div.clone(), doc! {"$set": {"x": 1}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 2, "{e}");
    let e = c.delete_many(div.clone()).await.unwrap_err();
    assert_eq!(code_of(&e), 2);
    assert_eq!(ids(&c, doc! {}).await, vec![1, 2]);
    // Constant sub-expressions fail at parse time, even on an empty collection.
    let empty = client.database("expr").collection::<Document>("none");
    let e = empty
        .find_one(doc! {"$expr": {"$divide": [1, 0]}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 2);
}

#[tokio::test]
async fn computed_projection_and_let() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("expr");
    let c = db.collection::<Document>("inventory");
    c.insert_many([
        doc! {"_id": 1, "item": "journal", "size": {"h": 14, "w": 21, "uom": "cm"}, "qty": 25},
        doc! {"_id": 2, "item": "notebook", "size": {"h": 8.5, "w": 11, "uom": "in"}, "qty": 0},
    ])
    .await
    .unwrap();
    let docs = collect(
        c.find(doc! {})
        .projection(doc! {
            "_id": 0,
            "item": 1,
            "area": {"$concat": [{"$toString": {"$multiply": ["$size.h", "$size.w"]}}, " ", "$size.uom"]},
            "status": {"$cond": [{"$gt": ["$qty", 0]}, "Available", "Discontinued"]},
            "reportNumber": {"$literal": 1},
        })
            .sort(doc! {"item": 1})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        docs,
        vec![
            doc! {"item": "journal", "area": "294 cm", "status": "Available", "reportNumber": 1},
            doc! {"item": "notebook", "area": "93.5 in", "status": "Discontinued", "reportNumber": 1},
        ]
    );
    // let: variables usable in $expr of find, update, delete.
    let r = db
        .run_command(doc! {
            "find": "inventory",
            "filter": {"$expr": {"$eq": ["$item", "$$wanted"]}},
            "let": {"wanted": {"$concat": ["jour", "nal"]}},
        })
        .await
        .unwrap();
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1);
    let r = db
        .run_command(doc! {
            "update": "inventory",
            "updates": [{"q": {"$expr": {"$lt": ["$qty", "$$min"]}}, "u": {"$set": {"low": true}}, "multi": true}],
            "let": {"min": 10},
        })
        .await
        .unwrap();
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    let r = db
        .run_command(doc! {
            "delete": "inventory",
            "deletes": [{"q": {"$expr": {"$eq": ["$_id", "$$id"]}}, "limit": 1}],
            "let": {"id": 1},
        })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    // Bad let: wrong type (14), bad name (9), undefined variable (17276).
    for (letv, code) in [
        (bson::Bson::Int32(1), 14),
        (bson::Bson::Document(doc! {"Bad": 1}), 9),
    ] {
        let e = db
            .run_command(doc! {"find": "inventory", "let": letv})
            .await
            .unwrap_err();
        assert_eq!(code_of(&e), code);
    }
    let e = db
        .run_command(doc! {"find": "inventory", "filter": {"$expr": "$$nope"}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 17276);
}
