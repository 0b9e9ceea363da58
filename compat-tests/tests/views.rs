//! Views through the Rust driver: `create` with `viewOn`/`pipeline`, reads through a view
//! (find, count, distinct, aggregate, `$lookup`/`$unionWith` from a view), `listCollections`
//! and `system.views`, `collMod`, drop and rename, and MongoDB's refusals (writes and index
//! commands 166, cycles 5, depth 165, writing stages 167).

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, assert_docs, cmd, code_of, collect};
use mongodb::Database;

async fn err(db: &Database, command: Document) -> i32 {
    match db.run_command(command.clone()).await {
        Ok(r) => panic!("{command} succeeded: {r}"),
        Err(e) => code_of(&e),
    }
}

async fn setup(db: &Database) {
    let c = db.collection::<Document>("people");
    c.insert_many(vec![
        doc! {"_id": 1, "name": "ann", "age": 31, "city": "oslo"},
        doc! {"_id": 2, "name": "bob", "age": 17, "city": "rome"},
        doc! {"_id": 3, "name": "cid", "age": 45, "city": "oslo"},
        doc! {"_id": 4, "name": "dee", "age": 22, "city": "lima"},
    ])
    .await
    .unwrap();
    cmd(
        db,
        doc! {"create": "adults", "viewOn": "people", "pipeline": [
            {"$match": {"age": {"$gte": 18}}},
            {"$project": {"name": 1, "city": 1}},
        ]},
    )
    .await;
}

async fn people_index(db: &Database) {
    db.collection::<Document>("people")
        .create_index(
            mongodb::IndexModel::builder()
                .keys(doc! {"city": 1})
                .build(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn reads_through_a_view() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("views");
    setup(&db).await;
    let v = db.collection::<Document>("adults");

    // find: the view's pipeline, then the command's filter, sort, skip, limit, projection.
    let all = collect(v.find(doc! {}).await.unwrap()).await;
    assert_docs(
        &all,
        &[
            doc! {"_id": 1, "name": "ann", "city": "oslo"},
            doc! {"_id": 3, "name": "cid", "city": "oslo"},
            doc! {"_id": 4, "name": "dee", "city": "lima"},
        ],
    );
    let some = collect(
        v.find(doc! {"city": "oslo"})
            .sort(doc! {"name": -1})
            .projection(doc! {"_id": 0, "name": 1})
            .await
            .unwrap(),
    )
    .await;
    assert_docs(&some, &[doc! {"name": "cid"}, doc! {"name": "ann"}]);
    // The view hides what its pipeline projects away.
    assert!(
        collect(v.find(doc! {"age": 31}).await.unwrap())
            .await
            .is_empty()
    );
    let one = collect(
        v.find(doc! {})
            .sort(doc! {"_id": 1})
            .skip(1)
            .limit(1)
            .await
            .unwrap(),
    )
    .await;
    assert_docs(&one, &[doc! {"_id": 3, "name": "cid", "city": "oslo"}]);

    // A cursor over a view spans getMore, with the view's namespace.
    let r = cmd(&db, doc! {"find": "adults", "batchSize": 1}).await;
    let cursor = r.get_document("cursor").unwrap();
    assert_eq!(cursor.get_str("ns").unwrap(), "views.adults");
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0);
    let more = cmd(&db, doc! {"getMore": id, "collection": "adults"}).await;
    assert_eq!(
        more.get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
            .len(),
        2
    );

    // count, countDocuments, estimatedDocumentCount, distinct.
    assert_eq!(v.count_documents(doc! {}).await.unwrap(), 3);
    assert_eq!(v.count_documents(doc! {"city": "oslo"}).await.unwrap(), 2);
    assert_eq!(v.estimated_document_count().await.unwrap(), 3);
    let r = cmd(
        &db,
        doc! {"count": "adults", "query": {"city": "oslo"}, "skip": 1},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let cities = v.distinct("city", doc! {}).await.unwrap();
    assert_eq!(cities, vec![Bson::from("lima"), Bson::from("oslo")]);
    let none = v.distinct("age", doc! {}).await.unwrap();
    assert!(none.is_empty());

    // aggregate: the view's stages run first.
    let grouped = collect(
        v.aggregate(vec![
            doc! {"$group": {"_id": "$city", "n": {"$sum": 1}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_docs(
        &grouped,
        &[doc! {"_id": "lima", "n": 1}, doc! {"_id": "oslo", "n": 2}],
    );

    // explain: a find on a view is explained as the aggregation it runs, over the base
    // collection with the view's $match and the command's filter combined.
    people_index(&db).await;
    let r = cmd(
        &db,
        doc! {"explain": {"find": "adults", "filter": {"city": "lima"}}, "verbosity": "queryPlanner"},
    )
    .await;
    // The view's $project keeps a pipeline: the query goes to the `$cursor` stage.
    let stages = r.get_array("stages").unwrap();
    let qp = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap()
        .get_document("queryPlanner")
        .unwrap();
    assert_eq!(qp.get_str("namespace").unwrap(), "views.people");
    let plan = qp.get_document("winningPlan").unwrap().to_string();
    assert!(plan.contains("\"indexName\": \"city_1\""), "{plan}");
    let r = cmd(&db, doc! {"explain": {"count": "adults"}}).await;
    assert!(r.get_array("stages").is_ok(), "{r}");
    // dbStats counts views.
    let r = cmd(&db, doc! {"dbStats": 1}).await;
    assert_eq!(r.get_i32("views").unwrap(), 1);

    // A view on a view.
    cmd(
        &db,
        doc! {"create": "osloAdults", "viewOn": "adults", "pipeline": [{"$match": {"city": "oslo"}}]},
    )
    .await;
    let names = collect(
        db.collection::<Document>("osloAdults")
            .find(doc! {})
            .projection(doc! {"name": 1, "_id": 0})
            .await
            .unwrap(),
    )
    .await;
    assert_docs(&names, &[doc! {"name": "ann"}, doc! {"name": "cid"}]);

    // A view reflects later writes to its base collection.
    db.collection::<Document>("people")
        .insert_one(doc! {"_id": 5, "name": "eve", "age": 60, "city": "oslo"})
        .await
        .unwrap();
    assert_eq!(
        db.collection::<Document>("osloAdults")
            .count_documents(doc! {})
            .await
            .unwrap(),
        3
    );

    // A view whose base does not exist reads as empty.
    cmd(&db, doc! {"create": "ghost", "viewOn": "nothing"}).await;
    assert!(
        collect(
            db.collection::<Document>("ghost")
                .find(doc! {})
                .await
                .unwrap()
        )
        .await
        .is_empty()
    );
}

#[tokio::test]
async fn lookup_and_union_with_read_views() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("views");
    setup(&db).await;
    let orders = db.collection::<Document>("orders");
    orders
        .insert_many(vec![
            doc! {"_id": 10, "who": 1},
            doc! {"_id": 11, "who": 2},
            doc! {"_id": 12, "who": 3},
        ])
        .await
        .unwrap();
    // Equality form: bob (17) is not in the view, so order 11 finds nobody.
    let joined = collect(
        orders
            .aggregate(vec![
                doc! {"$lookup": {"from": "adults", "localField": "who", "foreignField": "_id", "as": "p"}},
                doc! {"$project": {"n": {"$size": "$p"}}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_docs(
        &joined,
        &[
            doc! {"_id": 10, "n": 1},
            doc! {"_id": 11, "n": 0},
            doc! {"_id": 12, "n": 1},
        ],
    );
    // The equality match applies to what the view produces (a renamed field here).
    cmd(
        &db,
        doc! {"create": "renamed", "viewOn": "people", "pipeline": [
            {"$project": {"_id": 0, "pid": "$_id", "name": 1}},
        ]},
    )
    .await;
    let joined = collect(
        orders
            .aggregate(vec![
                doc! {"$match": {"_id": 10}},
                doc! {"$lookup": {"from": "renamed", "localField": "who", "foreignField": "pid", "as": "p"}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_docs(
        &joined,
        &[doc! {"_id": 10, "who": 1, "p": [{"name": "ann", "pid": 1}]}],
    );
    // Pipeline form, correlated.
    let joined = collect(
        orders
            .aggregate(vec![
                doc! {"$match": {"_id": 12}},
                doc! {"$lookup": {"from": "adults", "let": {"w": "$who"}, "pipeline": [
                    {"$match": {"$expr": {"$eq": ["$_id", "$$w"]}}},
                    {"$project": {"_id": 0, "name": 1}},
                ], "as": "p"}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_docs(
        &joined,
        &[doc! {"_id": 12, "who": 3, "p": [{"name": "cid"}]}],
    );
    // $unionWith a view.
    let union = collect(
        orders
            .aggregate(vec![
                doc! {"$project": {"_id": 1}},
                doc! {"$unionWith": {"coll": "adults", "pipeline": [{"$project": {"_id": 1}}]}},
                doc! {"$group": {"_id": null, "n": {"$sum": 1}}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_docs(&union, &[doc! {"_id": Bson::Null, "n": 6}]);
    // $graphLookup over a view.
    let graph = collect(
        orders
            .aggregate(vec![
                doc! {"$match": {"_id": 11}},
                doc! {"$graphLookup": {"from": "adults", "startWith": "$who", "connectFromField": "_id", "connectToField": "_id", "as": "p"}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_docs(&graph, &[doc! {"_id": 11, "who": 2, "p": []}]);
}

#[tokio::test]
async fn catalog_listing_and_ddl() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("views");
    setup(&db).await;

    // listCollections: collections first, then views with their definition.
    let r = cmd(&db, doc! {"listCollections": 1, "filter": {"type": "view"}}).await;
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .clone();
    let entries: Vec<Document> = batch
        .into_iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect();
    assert_docs(
        &entries,
        &[doc! {
            "name": "adults",
            "type": "view",
            "options": {"viewOn": "people", "pipeline": [
                {"$match": {"age": {"$gte": 18}}},
                {"$project": {"name": 1, "city": 1}},
            ]},
            "info": {"readOnly": true},
        }],
    );
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["adults", "people", "system.views"]);

    // system.views shows the definitions.
    let defs = collect(
        db.collection::<Document>("system.views")
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await;
    assert_docs(
        &defs,
        &[doc! {
            "_id": "views.adults",
            "viewOn": "people",
            "pipeline": [
                {"$match": {"age": {"$gte": 18}}},
                {"$project": {"name": 1, "city": 1}},
            ],
        }],
    );

    // A view on system.views reads the definitions.
    cmd(
        &db,
        doc! {"create": "defs", "viewOn": "system.views", "pipeline": [{"$project": {"viewOn": 1}}]},
    )
    .await;
    let defs = collect(
        db.collection::<Document>("defs")
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await;
    assert_docs(
        &defs,
        &[
            doc! {"_id": "views.adults", "viewOn": "people"},
            doc! {"_id": "views.defs", "viewOn": "system.views"},
        ],
    );
    cmd(&db, doc! {"drop": "defs"}).await;

    // Creating the same view again is fine; another definition is NamespaceExists.
    cmd(
        &db,
        doc! {"create": "adults", "viewOn": "people", "pipeline": [
            {"$match": {"age": {"$gte": 18}}},
            {"$project": {"name": 1, "city": 1}},
        ]},
    )
    .await;
    assert_eq!(
        err(&db, doc! {"create": "adults", "viewOn": "people"}).await,
        48
    );
    assert_eq!(err(&db, doc! {"create": "adults"}).await, 48);
    assert_eq!(
        err(&db, doc! {"create": "people", "viewOn": "adults"}).await,
        48
    );

    // collMod changes the pipeline (and viewOn); the view reads the new definition.
    cmd(
        &db,
        doc! {"collMod": "adults", "pipeline": [{"$match": {"age": {"$gte": 40}}}]},
    )
    .await;
    let v = db.collection::<Document>("adults");
    assert_eq!(v.count_documents(doc! {}).await.unwrap(), 1);
    assert_eq!(
        err(&db, doc! {"collMod": "adults", "validator": {}}).await,
        72
    );
    assert_eq!(
        err(&db, doc! {"collMod": "people", "viewOn": "adults"}).await,
        72
    );
    // Cycles are refused (GraphContainsCycle).
    cmd(&db, doc! {"create": "v2", "viewOn": "adults"}).await;
    assert_eq!(
        err(&db, doc! {"collMod": "adults", "viewOn": "v2"}).await,
        5
    );
    assert_eq!(
        err(
            &db,
            doc! {"collMod": "adults", "viewOn": "people", "pipeline": [
                {"$lookup": {"from": "v2", "localField": "a", "foreignField": "b", "as": "c"}}
            ]}
        )
        .await,
        5
    );
    assert_eq!(err(&db, doc! {"create": "self", "viewOn": "self"}).await, 5);

    // Depth: a chain of more than 20 views is refused.
    let mut prev = "people".to_string();
    for i in 0..20 {
        let name = format!("chain{i}");
        cmd(&db, doc! {"create": &name, "viewOn": &prev}).await;
        prev = name;
    }
    assert_eq!(
        err(&db, doc! {"create": "chain20", "viewOn": &prev}).await,
        165
    );

    // Writing stages and collectionless stages may not define a view.
    assert_eq!(
        err(
            &db,
            doc! {"create": "w", "viewOn": "people", "pipeline": [{"$out": "x"}]}
        )
        .await,
        167
    );
    assert_eq!(
        err(
            &db,
            doc! {"create": "w", "viewOn": "people", "pipeline": [{"$bogus": 1}]}
        )
        .await,
        40324
    );
    assert_eq!(
        err(
            &db,
            doc! {"create": "w", "viewOn": "people", "pipeline": [1]}
        )
        .await,
        14
    );
    assert_eq!(err(&db, doc! {"create": "w", "viewOn": 3}).await, 14);
    assert_eq!(
        err(&db, doc! {"create": "system.views", "viewOn": "people"}).await,
        73
    );
    assert_eq!(
        err(
            &db,
            doc! {"create": "w", "viewOn": "people", "validator": {"a": 1}}
        )
        .await,
        72
    );

    // Rename: views are not renamed, nothing is renamed onto one.
    let admin = client.database("admin");
    assert_eq!(
        err(
            &admin,
            doc! {"renameCollection": "views.adults", "to": "views.grownups"}
        )
        .await,
        166
    );
    assert_eq!(
        err(
            &admin,
            doc! {"renameCollection": "views.people", "to": "views.adults"}
        )
        .await,
        48
    );

    // Drop: the view goes, its base stays.
    v.drop().await.unwrap();
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    assert!(!names.contains(&"adults".to_string()));
    assert!(names.contains(&"people".to_string()));
    assert_eq!(
        db.collection::<Document>("people")
            .count_documents(doc! {})
            .await
            .unwrap(),
        4
    );
    // Dropping system.views drops every view.
    db.collection::<Document>("system.views")
        .drop()
        .await
        .unwrap();
    let names = db.list_collection_names().await.unwrap();
    assert_eq!(names, vec!["people"]);
}

#[tokio::test]
async fn writes_and_index_commands_on_a_view_fail() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("views");
    setup(&db).await;
    let v = db.collection::<Document>("adults");
    assert_eq!(
        code_of(&v.insert_one(doc! {"x": 1}).await.unwrap_err()),
        166
    );
    assert_eq!(
        code_of(
            &v.update_one(doc! {}, doc! {"$set": {"x": 1}})
                .await
                .unwrap_err()
        ),
        166
    );
    assert_eq!(code_of(&v.delete_many(doc! {}).await.unwrap_err()), 166);
    assert_eq!(
        code_of(&v.find_one_and_delete(doc! {}).await.unwrap_err()),
        166
    );
    assert_eq!(
        err(
            &db,
            doc! {"createIndexes": "adults", "indexes": [{"key": {"a": 1}, "name": "a_1"}]}
        )
        .await,
        166
    );
    assert_eq!(err(&db, doc! {"listIndexes": "adults"}).await, 166);
    assert_eq!(
        err(&db, doc! {"dropIndexes": "adults", "index": "*"}).await,
        166
    );
    // $out and $merge into a view.
    let people = db.collection::<Document>("people");
    for stage in [doc! {"$out": "adults"}, doc! {"$merge": {"into": "adults"}}] {
        let e = people.aggregate(vec![stage.clone()]).await.unwrap_err();
        assert_eq!(code_of(&e), 166, "{stage}");
    }
    // Commands that only apply to collections.
    assert_eq!(err(&db, doc! {"collStats": "adults"}).await, 166);
    assert_eq!(
        err(&db, doc! {"convertToCapped": "adults", "size": 4096}).await,
        166
    );
    assert_eq!(
        err(
            &db,
            doc! {"aggregate": "adults", "pipeline": [{"$changeStream": {}}], "cursor": {}}
        )
        .await,
        166
    );
    assert_eq!(
        err(
            &db,
            doc! {"explain": {"delete": "adults", "deletes": [{"q": {}, "limit": 0}]}}
        )
        .await,
        166
    );
    // find options aggregation cannot express.
    assert_eq!(
        err(&db, doc! {"find": "adults", "tailable": true}).await,
        168
    );
    assert_eq!(
        err(&db, doc! {"find": "adults", "sort": {"$natural": 1}}).await,
        168
    );
    assert_eq!(
        err(&db, doc! {"find": "adults", "readOnce": true}).await,
        168
    );
    assert_eq!(
        err(
            &db,
            doc! {"find": "adults", "projection": {"arr": {"$elemMatch": {"x": 1}}}}
        )
        .await,
        168
    );
    // findOne (singleBatch with limit 1) works.
    let one = v.find_one(doc! {"name": "cid"}).await.unwrap().unwrap();
    assert_eq!(one, doc! {"_id": 3, "name": "cid", "city": "oslo"});
    // Nothing was written.
    assert_eq!(people.count_documents(doc! {}).await.unwrap(), 4);
}

#[tokio::test]
async fn views_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = TestServer::start_in(dir.path(), &[]);
        let db = s.client().await.database("views");
        setup(&db).await;
        s.signal("TERM");
        assert_eq!(s.wait_exit(std::time::Duration::from_secs(20)), Some(0));
    }
    let s = TestServer::start_in(dir.path(), &[]);
    let db = s.client().await.database("views");
    let v = db.collection::<Document>("adults");
    assert_eq!(v.count_documents(doc! {}).await.unwrap(), 3);
    let r = cmd(
        &db,
        doc! {"listCollections": 1, "nameOnly": true, "filter": {"type": "view"}},
    )
    .await;
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn view_ddl_in_change_streams() {
    let server = TestServer::start();
    let client = server.client().await;
    let db = client.database("views");
    db.collection::<Document>("people")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let mut expanded = db
        .watch()
        .show_expanded_events(true)
        .await
        .unwrap()
        .with_type::<Document>();
    let mut plain = db.watch().await.unwrap().with_type::<Document>();
    cmd(&db, doc! {"create": "v", "viewOn": "people"}).await;
    cmd(
        &db,
        doc! {"collMod": "v", "pipeline": [{"$match": {"_id": 1}}]},
    )
    .await;
    cmd(&db, doc! {"drop": "v"}).await;
    db.collection::<Document>("people")
        .insert_one(doc! {"_id": 2})
        .await
        .unwrap();
    let mut events = Vec::new();
    while events.len() < 4 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        match expanded.next_if_any().await.unwrap() {
            Some(mut e) => {
                for f in ["_id", "clusterTime", "wallTime", "collectionUUID"] {
                    e.remove(f);
                }
                events.push(e);
            }
            None => assert!(std::time::Instant::now() < deadline, "{events:?}"),
        }
    }
    assert_docs(
        &events,
        &[
            doc! {"operationType": "create", "ns": {"db": "views", "coll": "v"},
            "operationDescription": {"viewOn": "people", "pipeline": []}},
            doc! {"operationType": "modify", "ns": {"db": "views", "coll": "v"},
            "operationDescription": {"viewOn": "people", "pipeline": [{"$match": {"_id": 1}}]}},
            doc! {"operationType": "drop", "ns": {"db": "views", "coll": "v"}},
            doc! {"operationType": "insert", "fullDocument": {"_id": 2},
            "ns": {"db": "views", "coll": "people"}, "documentKey": {"_id": 2}},
        ],
    );
    // Without showExpandedEvents only the insert is seen.
    let e = loop {
        if let Some(e) = plain.next_if_any().await.unwrap() {
            break e;
        }
    };
    assert_eq!(e.get_str("operationType").unwrap(), "insert");
}
