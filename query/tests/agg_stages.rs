//! Table-driven tests of the joining, reshaping and writing stages: `$lookup $graphLookup
//! $unionWith $facet $bucket $bucketAuto $sortByCount $sample $replaceRoot $replaceWith
//! $redact $documents $out $merge`.

mod agg_common;

use agg_common::{Db, assert_same, code};
use bson::{Bson, Document, doc};

fn shop() -> Db {
    let db = Db::new();
    db.insert(
        "orders",
        &[
            doc! {"_id": 1, "item": "almonds", "price": 12, "quantity": 2, "tags": ["a", "b"]},
            doc! {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
            doc! {"_id": 3},
        ],
    );
    db.insert(
        "inventory",
        &[
            doc! {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120},
            doc! {"_id": 2, "sku": "bread", "description": "product 2", "instock": 80},
            doc! {"_id": 3, "sku": "cashews", "description": "product 3", "instock": 60},
            doc! {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70},
            doc! {"_id": 5, "sku": null, "description": "Incomplete"},
            doc! {"_id": 6},
        ],
    );
    db
}

#[test]
fn lookup_equality_and_pipeline() {
    let db = shop();
    let got = db
        .run(
            "orders",
            &[doc! {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inventory_docs"}}],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 1, "item": "almonds", "price": 12, "quantity": 2, "tags": ["a", "b"], "inventory_docs": [
            {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120}]},
            doc! {"_id": 2, "item": "pecans", "price": 20, "quantity": 1, "inventory_docs": [
            {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70}]},
            doc! {"_id": 3, "inventory_docs": [
            {"_id": 5, "sku": null, "description": "Incomplete"}, {"_id": 6}]},
        ],
    );
    // With an index on the foreign field the same.
    db.index("inventory", doc! {"key": {"sku": 1}, "name": "sku_1"});
    let again = db
        .run(
            "orders",
            &[doc! {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inventory_docs"}}],
        )
        .unwrap();
    assert_same(&again, &got);
    // Array local values match any element.
    let got = db
        .run(
            "orders",
            &[
                doc! {"$match": {"_id": 1}},
                doc! {"$project": {"skus": ["bread", "cashews", "nope"]}},
                doc! {"$lookup": {"from": "inventory", "localField": "skus", "foreignField": "sku", "as": "d"}},
                doc! {"$project": {"ids": "$d._id"}},
            ],
        )
        .unwrap();
    assert_same(&got, &[doc! {"_id": 1, "ids": [2, 3]}]);
    // Correlated pipeline with let.
    let got = db
        .run(
            "orders",
            &[
                doc! {"$match": {"_id": {"$lte": 2}}},
                doc! {"$lookup": {
                    "from": "inventory",
                    "let": {"want": "$item", "q": "$quantity"},
                    "pipeline": [
                        {"$match": {"$expr": {"$and": [{"$eq": ["$sku", "$$want"]}, {"$gte": ["$instock", {"$multiply": ["$$q", 60]}]}]}}},
                        {"$project": {"_id": 0, "instock": 1}},
                    ],
                    "as": "stock",
                }},
                doc! {"$project": {"stock": 1}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 1, "stock": [{"instock": 120}]},
            doc! {"_id": 2, "stock": [{"instock": 70}]},
        ],
    );
    // Uncorrelated pipeline, and equality plus pipeline.
    let got = db
        .run(
            "orders",
            &[
                doc! {"$match": {"_id": {"$lte": 2}}},
                doc! {"$lookup": {"from": "inventory", "pipeline": [{"$match": {"instock": {"$gt": 75}}}, {"$count": "n"}], "as": "c"}},
                doc! {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "pipeline": [{"$project": {"_id": 0, "d": "$description"}}], "as": "p"}},
                doc! {"$project": {"c": 1, "p": 1}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 1, "c": [{"n": 2}], "p": [{"d": "product 1"}]},
            doc! {"_id": 2, "c": [{"n": 2}], "p": [{"d": "product 4"}]},
        ],
    );
    for (stage, want) in [
        (doc! {"$lookup": 1}, 9),
        (
            doc! {"$lookup": {"from": "x", "localField": "a", "as": "b"}},
            9,
        ),
        (
            doc! {"$lookup": {"from": "x", "localField": "a", "foreignField": "b"}},
            9,
        ),
        (doc! {"$lookup": {"from": "x", "as": "b"}}, 9),
        (
            doc! {"$lookup": {"from": "x", "as": "b", "bogus": 1, "pipeline": []}},
            9,
        ),
        (
            doc! {"$lookup": {"from": "x", "as": "b", "pipeline": [{"$out": "y"}]}},
            51047,
        ),
        (
            doc! {"$lookup": {"from": "x", "as": "b", "pipeline": [{"$match": {"$expr": "$$nope"}}]}},
            17276,
        ),
    ] {
        let e = db.run("orders", std::slice::from_ref(&stage)).unwrap_err();
        assert_eq!(code(&e), want, "{stage}: {e}");
    }
}

#[test]
fn graph_lookup() {
    let db = Db::new();
    db.insert(
        "employees",
        &[
            doc! {"_id": 1, "name": "Dev"},
            doc! {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
            doc! {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
            doc! {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
            doc! {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
            doc! {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
        ],
    );
    let got = db
        .run(
            "employees",
            &[
                doc! {"$match": {"name": "Asya"}},
                doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo", "connectToField": "name", "as": "chain", "depthField": "d"}},
                doc! {"$project": {"chain": {"$map": {"input": "$chain", "in": ["$$this.name", "$$this.d"]}}}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[doc! {"_id": 5, "chain": [["Ron", 0_i64], ["Eliot", 1_i64], ["Dev", 2_i64]]}],
    );
    let got = db
        .run(
            "employees",
            &[
                doc! {"$match": {"name": "Asya"}},
                doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo", "connectToField": "name", "as": "chain", "maxDepth": 1}},
                doc! {"$project": {"n": {"$size": "$chain"}}},
            ],
        )
        .unwrap();
    assert_same(&got, &[doc! {"_id": 5, "n": 2}]);
}

#[test]
fn union_facet_buckets_and_friends() {
    let db = shop();
    let got = db
        .run(
            "orders",
            &[
                doc! {"$project": {"item": 1}},
                doc! {"$unionWith": {"coll": "inventory", "pipeline": [{"$match": {"instock": {"$gt": 100}}}, {"$project": {"item": "$sku"}}]}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 1, "item": "almonds"},
            doc! {"_id": 2, "item": "pecans"},
            doc! {"_id": 3},
            doc! {"_id": 1, "item": "almonds"},
        ],
    );
    let got = db
        .run(
            "inventory",
            &[doc! {"$facet": {
                "big": [{"$match": {"instock": {"$gte": 70}}}, {"$count": "n"}],
                "skus": [{"$match": {"sku": {"$type": "string"}}}, {"$sortByCount": "$sku"}, {"$limit": 2}],
            }}],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"big": [{"n": 3}], "skus": [{"_id": "almonds", "count": 1}, {"_id": "bread", "count": 1}]},
        ],
    );
    let got = db
        .run(
            "inventory",
            &[doc! {"$bucket": {"groupBy": "$instock", "boundaries": [0, 70, 100, 200], "default": "other", "output": {"n": {"$sum": 1}, "skus": {"$push": "$sku"}}}}],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": 0, "n": 1, "skus": ["cashews"]},
            doc! {"_id": 70, "n": 2, "skus": ["bread", "pecans"]},
            doc! {"_id": 100, "n": 1, "skus": ["almonds"]},
            doc! {"_id": "other", "n": 2, "skus": [null]},
        ],
    );
    let e = db
        .run(
            "inventory",
            &[doc! {"$bucket": {"groupBy": "$instock", "boundaries": [0, 100]}}],
        )
        .unwrap_err();
    assert_eq!(code(&e), 40066, "{e}");
    let got = db
        .run(
            "inventory",
            &[
                doc! {"$match": {"instock": {"$exists": true}}},
                doc! {"$bucketAuto": {"groupBy": "$instock", "buckets": 2}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[
            doc! {"_id": {"min": 60, "max": 80}, "count": 2},
            doc! {"_id": {"min": 80, "max": 120}, "count": 2},
        ],
    );
    let got = db
        .run("inventory", &[doc! {"$sample": {"size": 3}}])
        .unwrap();
    assert_eq!(got.len(), 3);
    let got = db
        .run(
            "orders",
            &[
                doc! {"$match": {"_id": 1}},
                doc! {"$replaceRoot": {"newRoot": {"i": "$item", "q": "$quantity"}}},
            ],
        )
        .unwrap();
    assert_same(&got, &[doc! {"i": "almonds", "q": 2}]);
    let e = db
        .run("orders", &[doc! {"$replaceWith": "$item"}])
        .unwrap_err();
    assert_eq!(code(&e), 40228);
    let got = db
        .run_db(&[
            doc! {"$documents": [{"x": 1}, {"x": 2}, {"x": 3}]},
            doc! {"$match": {"x": {"$gte": 2}}},
        ])
        .unwrap();
    assert_same(&got, &[doc! {"x": 2}, doc! {"x": 3}]);
    let got = db
        .run(
            "orders",
            &[
                doc! {"$match": {"_id": 1}},
                doc! {"$addFields": {"sub": {"level": 2, "x": 1}, "subs": [{"level": 1, "y": 1}, {"level": 3}]}},
                doc! {"$set": {"level": 1}},
                doc! {"$redact": {"$cond": [{"$lte": ["$level", 2]}, "descend", "prune"]}},
                doc! {"$project": {"sub": 1, "subs": 1}},
            ],
        )
        .unwrap();
    assert_same(
        &got,
        &[doc! {"_id": 1, "sub": {"level": 2, "x": 1}, "subs": [{"level": 1, "y": 1}]}],
    );
}

#[test]
fn out_and_merge() {
    let db = shop();
    db.insert("target", &[doc! {"_id": 99, "old": true}]);
    db.index(
        "target",
        doc! {"key": {"k": 1}, "name": "k_1", "unique": true},
    );
    let none = db
        .run(
            "inventory",
            &[
                doc! {"$match": {"instock": {"$gte": 70}}},
                doc! {"$project": {"k": "$sku"}},
                doc! {"$out": "target"},
            ],
        )
        .unwrap();
    assert!(none.is_empty());
    assert_same(
        &db.all("target"),
        &[
            doc! {"_id": 1, "k": "almonds"},
            doc! {"_id": 2, "k": "bread"},
            doc! {"_id": 4, "k": "pecans"},
        ],
    );
    // The index came along: a failing $out (duplicate k) leaves the target intact.
    let e = db
        .run(
            "inventory",
            &[
                doc! {"$project": {"k": {"$literal": "same"}}},
                doc! {"$out": "target"},
            ],
        )
        .unwrap_err();
    assert_eq!(code(&e), 11000, "{e}");
    assert_eq!(db.all("target").len(), 3);
    let names: Vec<String> = db.store.catalog().all().map(|m| m.name.clone()).collect();
    assert!(
        !names.iter().any(|n| n.starts_with("tmp.agg_out")),
        "{names:?}"
    );
    // $merge modes.
    db.run(
        "orders",
        &[
            doc! {"$match": {"item": {"$exists": true}}},
            doc! {"$project": {"_id": 1, "k": {"$concat": ["$item", "-o"]}, "price": 1}},
            doc! {"$merge": {"into": "target"}},
        ],
    )
    .unwrap();
    assert_same(
        &db.all("target"),
        &[
            doc! {"_id": 1, "k": "almonds-o", "price": 12},
            doc! {"_id": 2, "k": "pecans-o", "price": 20},
            doc! {"_id": 4, "k": "pecans"},
        ],
    );
    let e = db
        .run(
            "orders",
            &[
                doc! {"$project": {"_id": 1}},
                doc! {"$merge": {"into": "target", "whenMatched": "fail"}},
            ],
        )
        .unwrap_err();
    assert_eq!(code(&e), 11000);
    let e = db
        .run(
            "orders",
            &[doc! {"$merge": {"into": "target", "on": "price"}}],
        )
        .unwrap_err();
    assert_eq!(code(&e), 51183);
    db.run(
        "orders",
        &[
            doc! {"$match": {"_id": 1}},
            doc! {"$project": {"_id": 0, "k": {"$concat": ["$item", "-o"]}, "q": "$quantity"}},
            doc! {"$merge": {"into": "target", "on": "k", "whenMatched": [{"$set": {"q": {"$add": ["$$new.q", 100]}}}], "whenNotMatched": "discard"}},
        ],
    )
    .unwrap();
    assert_same(
        &db.all("target")[..1],
        &[doc! {"_id": 1, "k": "almonds-o", "price": 12, "q": 102}],
    );
    let e = db
        .run(
            "orders",
            &[
                doc! {"$project": {"_id": {"$add": ["$_id", 1000]}}},
                doc! {"$merge": {"into": "target", "whenNotMatched": "fail"}},
            ],
        )
        .unwrap_err();
    assert_eq!(code(&e), 13113);
    db.run(
        "orders",
        &[
            doc! {"$project": {"x": 1}},
            doc! {"$merge": {"into": "fresh", "whenMatched": "replace"}},
        ],
    )
    .unwrap();
    assert_eq!(db.all("fresh").len(), 3);
    for (p, want) in [
        (vec![doc! {"$out": "x"}, doc! {"$match": {}}], 40601),
        (
            vec![doc! {"$merge": {"into": "x"}}, doc! {"$match": {}}],
            40601,
        ),
        (vec![doc! {"$facet": {"a": [{"$out": "x"}]}}], 40600),
        (vec![doc! {"$out": 1}], 16990),
        (vec![doc! {"$out": "system.x"}], 17385),
        (
            vec![doc! {"$merge": {"into": "x", "whenMatched": "bogus"}}],
            2,
        ),
        (
            vec![doc! {"$merge": {"into": "x", "whenMatched": [{"$match": {}}]}}],
            72,
        ),
        (vec![doc! {"$merge": {"into": "x", "let": {"a": 1}}}], 51199),
        (vec![doc! {"$match": {}}, doc! {"$collStats": {}}], 40602),
    ] {
        let e = db.run("orders", &p).unwrap_err();
        assert_eq!(code(&e), want, "{p:?}: {e}");
    }
    let _ = Bson::Null;
    let _: Vec<Document> = Vec::new();
}
