//! Queries through the Rust driver, following the MongoDB 7.0 manual's pages for the query
//! operators (comparison, logical, element, evaluation, array, bitwise), the query tutorials
//! (embedded documents, arrays, arrays of documents, null or missing fields), projection
//! (inclusion/exclusion rules, `$`, `$elemMatch`, `$slice`), sort (arrays, null/missing,
//! multikey, skip/limit, memory limit) and cursors over sorted results.
//!
//! Documents are compared byte for byte (field order and numeric types matter).

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, Decimal128, Document, Regex, doc};
use cairn_compat_tests::{TestServer, assert_docs, code_of, collect};
use mongodb::error::ErrorKind;
use mongodb::{Collection, Database};

// ---------------------------------------------------------------------------------------------
// helpers

fn re(pattern: &str, options: &str) -> Regex {
    Regex {
        pattern: pattern.to_string().try_into().unwrap(),
        options: options.to_string().try_into().unwrap(),
    }
}

fn dec(s: &str) -> Decimal128 {
    s.parse().unwrap()
}

async fn setup(db: &Database, name: &str, docs: Vec<Document>) -> Collection<Document> {
    let coll = db.collection::<Document>(name);
    coll.insert_many(docs).await.unwrap();
    coll
}

/// Matching documents, sorted by `_id`.
async fn find(coll: &Collection<Document>, filter: Document) -> Vec<Document> {
    collect(coll.find(filter).sort(doc! {"_id": 1}).await.unwrap()).await
}

/// `_id`s (integers) of the matching documents, ascending.
async fn ids(coll: &Collection<Document>, filter: Document) -> Vec<i32> {
    find(coll, filter)
        .await
        .iter()
        .map(|d| d.get_i32("_id").expect("integer _id"))
        .collect()
}

/// Error code of a find with this filter.
async fn find_err(coll: &Collection<Document>, filter: Document) -> i32 {
    match coll.find(filter.clone()).await {
        Err(e) => code_of(&e),
        Ok(c) => panic!("filter {filter} succeeded: {:?}", collect(c).await),
    }
}

/// Documents of a find with a projection, sorted by `_id`.
async fn project(coll: &Collection<Document>, filter: Document, proj: Document) -> Vec<Document> {
    collect(
        coll.find(filter)
            .projection(proj)
            .sort(doc! {"_id": 1})
            .await
            .unwrap(),
    )
    .await
}

async fn project_err(coll: &Collection<Document>, filter: Document, proj: Document) -> i32 {
    // errors may surface on the first batch; drain the cursor to be sure
    match coll.find(filter).projection(proj.clone()).await {
        Err(e) => code_of(&e),
        Ok(mut c) => match c.advance().await {
            Err(e) => code_of(&e),
            Ok(_) => panic!("projection {proj} succeeded"),
        },
    }
}

/// `_id`s in the order a find with this sort (and optional skip/limit) returns them.
async fn sorted_ids(
    coll: &Collection<Document>,
    filter: Document,
    sort: Document,
    skip: Option<u64>,
    limit: Option<i64>,
) -> Vec<i32> {
    let mut f = coll.find(filter).sort(sort);
    if let Some(s) = skip {
        f = f.skip(s);
    }
    if let Some(l) = limit {
        f = f.limit(l);
    }
    collect(f.await.unwrap())
        .await
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// comparison operators

/// $eq / $gt / $gte / $lt / $lte / $ne / $in / $nin pages (the shared `inventory` data).
#[tokio::test]
async fn comparison_operators_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("cmp");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "item": {"name": "ab", "code": "123"}, "qty": 15, "tags": ["A", "B", "C"]},
            doc! {"_id": 2, "item": {"name": "cd", "code": "123"}, "qty": 20, "tags": ["B"]},
            doc! {"_id": 3, "item": {"name": "ij", "code": "456"}, "qty": 25, "tags": ["A", "B"]},
            doc! {"_id": 4, "item": {"name": "xy", "code": "456"}, "qty": 30, "tags": ["B", "A"]},
            doc! {"_id": 5, "item": {"name": "mn", "code": "000"}, "qty": 20, "tags": [["A", "B"], "C"]},
        ],
    )
    .await;
    assert_eq!(ids(&inv, doc! {"qty": {"$eq": 20}}).await, [2, 5]);
    assert_eq!(ids(&inv, doc! {"qty": 20}).await, [2, 5]);
    assert_eq!(ids(&inv, doc! {"item.name": {"$eq": "ab"}}).await, [1]);
    assert_eq!(ids(&inv, doc! {"tags": {"$eq": "B"}}).await, [1, 2, 3, 4]);
    // an array operand matches the whole array, or an element that is that array
    assert_eq!(ids(&inv, doc! {"tags": {"$eq": ["A", "B"]}}).await, [3, 5]);
    assert_eq!(ids(&inv, doc! {"tags": ["A", "B"]}).await, [3, 5]);
    // embedded document equality is exact, field order included
    assert_eq!(
        ids(&inv, doc! {"item": {"name": "ab", "code": "123"}}).await,
        [1]
    );
    assert!(
        ids(&inv, doc! {"item": {"code": "123", "name": "ab"}})
            .await
            .is_empty()
    );

    assert_eq!(ids(&inv, doc! {"qty": {"$gt": 20}}).await, [3, 4]);
    assert_eq!(ids(&inv, doc! {"qty": {"$gte": 20}}).await, [2, 3, 4, 5]);
    assert_eq!(ids(&inv, doc! {"qty": {"$lt": 20}}).await, [1]);
    assert_eq!(ids(&inv, doc! {"qty": {"$lte": 20}}).await, [1, 2, 5]);
    assert_eq!(ids(&inv, doc! {"qty": {"$ne": 20}}).await, [1, 3, 4]);
    assert_eq!(ids(&inv, doc! {"qty": {"$in": [5, 15]}}).await, [1]);
    assert_eq!(ids(&inv, doc! {"qty": {"$nin": [20, 25]}}).await, [1, 4]);
    // $in/$nin against arrays: any element; a nested array is an element, not a member
    assert_eq!(
        ids(&inv, doc! {"tags": {"$in": ["A", "D"]}}).await,
        [1, 3, 4]
    );
    assert_eq!(ids(&inv, doc! {"tags": {"$nin": ["A"]}}).await, [2, 5]);
    assert_eq!(
        ids(&inv, doc! {"tags": {"$in": [re("^C", "")]}}).await,
        [1, 5]
    );
    // $ne on an array excludes documents where any element equals the value
    assert_eq!(ids(&inv, doc! {"tags": {"$ne": "A"}}).await, [2, 5]);
    // operators combine with AND on the same field
    assert_eq!(
        ids(&inv, doc! {"qty": {"$gt": 15, "$lt": 30}}).await,
        [2, 3, 5]
    );

    // $eq with a regex matches only regex values; a bare regex or $regex pattern-matches
    let co = setup(
        &db,
        "companies",
        vec![
            doc! {"_id": 1, "company": "MongoDB"},
            doc! {"_id": 2, "company": "MongoDB2"},
        ],
    )
    .await;
    assert_eq!(ids(&co, doc! {"company": "MongoDB"}).await, [1]);
    assert_eq!(ids(&co, doc! {"company": {"$eq": "MongoDB"}}).await, [1]);
    assert!(
        ids(&co, doc! {"company": {"$eq": re("MongoDB", "")}})
            .await
            .is_empty()
    );
    assert_eq!(ids(&co, doc! {"company": re("MongoDB", "")}).await, [1, 2]);
    assert_eq!(
        ids(&co, doc! {"company": {"$regex": re("MongoDB", "")}}).await,
        [1, 2]
    );

    // $in / $nin need arrays
    assert_eq!(find_err(&inv, doc! {"qty": {"$in": 5}}).await, 2);
    assert_eq!(find_err(&inv, doc! {"qty": {"$nin": "x"}}).await, 2);
    // $in may not contain $-operators
    assert_eq!(find_err(&inv, doc! {"qty": {"$in": [{"$gt": 1}]}}).await, 2);
}

/// Type bracketing, numeric cross-type equality, NaN, and the null/missing rules
/// ("Query for Null or Missing Fields", "Comparison/Sort Order").
#[tokio::test]
async fn comparison_cross_type_null_and_missing() {
    let s = TestServer::start();
    let db = s.client().await.database("cmpx");
    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "v": 1},
            doc! {"_id": 2, "v": 1.5},
            doc! {"_id": 3, "v": 2_i64},
            doc! {"_id": 4, "v": dec("2.5")},
            doc! {"_id": 5, "v": "1"},
            doc! {"_id": 6, "v": "abc"},
            doc! {"_id": 7, "v": null},
            doc! {"_id": 8},
            doc! {"_id": 9, "v": [1, "abc"]},
            doc! {"_id": 10, "v": {"x": 1}},
            doc! {"_id": 11, "v": true},
            doc! {"_id": 12, "v": DateTime::from_millis(0)},
            doc! {"_id": 13, "v": []},
            doc! {"_id": 14, "v": [null]},
            doc! {"_id": 15, "v": f64::NAN},
        ],
    )
    .await;
    // numbers compare across int32/int64/double/decimal; other types never match
    assert_eq!(ids(&c, doc! {"v": {"$gt": 1}}).await, [2, 3, 4]);
    assert_eq!(ids(&c, doc! {"v": {"$gte": 1}}).await, [1, 2, 3, 4, 9]);
    assert_eq!(ids(&c, doc! {"v": {"$lt": 2}}).await, [1, 2, 9]);
    assert_eq!(ids(&c, doc! {"v": 2}).await, [3]);
    assert_eq!(ids(&c, doc! {"v": 1.0}).await, [1, 9]);
    assert_eq!(ids(&c, doc! {"v": 1_i64}).await, [1, 9]);
    assert_eq!(ids(&c, doc! {"v": dec("1.50")}).await, [2]);
    assert_eq!(ids(&c, doc! {"v": {"$lte": 2.5}}).await, [1, 2, 3, 4, 9]);
    // NaN equals NaN only, and is neither less nor greater than anything
    assert_eq!(ids(&c, doc! {"v": f64::NAN}).await, [15]);
    assert_eq!(ids(&c, doc! {"v": {"$gte": f64::NAN}}).await, [15]);
    assert!(ids(&c, doc! {"v": {"$gt": f64::NAN}}).await.is_empty());
    // strings
    assert_eq!(ids(&c, doc! {"v": {"$lt": "b"}}).await, [5, 6, 9]);
    assert_eq!(ids(&c, doc! {"v": {"$gt": "1"}}).await, [6, 9]);
    // booleans, dates, objects
    assert_eq!(ids(&c, doc! {"v": {"$lte": true}}).await, [11]);
    assert_eq!(
        ids(&c, doc! {"v": {"$gt": DateTime::from_millis(-1)}}).await,
        [12]
    );
    assert_eq!(ids(&c, doc! {"v": {"$gt": {}}}).await, [10]);
    assert_eq!(ids(&c, doc! {"v": {"x": 1}}).await, [10]);
    // null matches null, missing, and arrays holding null
    assert_eq!(ids(&c, doc! {"v": null}).await, [7, 8, 14]);
    assert_eq!(ids(&c, doc! {"v": {"$eq": null}}).await, [7, 8, 14]);
    assert_eq!(ids(&c, doc! {"v": {"$gte": null}}).await, [7, 8, 14]);
    assert_eq!(ids(&c, doc! {"v": {"$lte": null}}).await, [7, 8, 14]);
    assert!(ids(&c, doc! {"v": {"$gt": null}}).await.is_empty());
    assert!(ids(&c, doc! {"v": {"$lt": null}}).await.is_empty());
    assert_eq!(ids(&c, doc! {"v": {"$in": [null]}}).await, [7, 8, 14]);
    assert_eq!(
        ids(&c, doc! {"v": {"$ne": null}}).await,
        [1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 15]
    );
    assert_eq!(
        ids(&c, doc! {"v": {"$nin": [null, 1]}}).await,
        [2, 3, 4, 5, 6, 10, 11, 12, 13, 15]
    );
    // an empty array is only equal to an empty array
    assert_eq!(ids(&c, doc! {"v": []}).await, [13]);
    assert_eq!(ids(&c, doc! {"v": [null]}).await, [14]);

    // the manual's null-or-missing example
    let n = setup(
        &db,
        "nulls",
        vec![doc! {"_id": 1, "item": null}, doc! {"_id": 2}],
    )
    .await;
    assert_eq!(ids(&n, doc! {"item": null}).await, [1, 2]);
    assert_eq!(ids(&n, doc! {"item": {"$type": 10}}).await, [1]);
    assert_eq!(ids(&n, doc! {"item": {"$exists": false}}).await, [2]);
    assert!(ids(&n, doc! {"item": {"$ne": null}}).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// logical operators

#[tokio::test]
async fn logical_operators() {
    let s = TestServer::start();
    let db = s.client().await.database("logic");
    let c = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "price": 1.99, "qty": 5, "sale": true, "item": "pen"},
            doc! {"_id": 2, "price": 1.99, "qty": 60, "item": "pencil"},
            doc! {"_id": 3, "price": 2.99, "qty": 20, "sale": false, "item": "eraser"},
            doc! {"_id": 4, "qty": 100, "sale": true, "item": "paper"},
            doc! {"_id": 5, "price": 2.99, "qty": 8, "item": "ink"},
            doc! {"_id": 6, "item": "ruler"},
            doc! {"_id": 7, "price": 10, "qty": 70, "sale": true, "item": 7},
        ],
    )
    .await;
    // $nor: neither condition holds, missing fields included
    assert_eq!(
        ids(&c, doc! {"$nor": [{"price": 1.99}, {"sale": true}]}).await,
        [3, 5, 6]
    );
    assert_eq!(
        ids(
            &c,
            doc! {"$nor": [{"price": 1.99}, {"qty": {"$lt": 20}}, {"sale": true}]}
        )
        .await,
        [3, 6]
    );
    // $not: the complement, including documents without the field
    assert_eq!(
        ids(&c, doc! {"price": {"$not": {"$gt": 1.99}}}).await,
        [1, 2, 4, 6]
    );
    assert_eq!(
        ids(&c, doc! {"item": {"$not": re("^p.*", "")}}).await,
        [3, 5, 6, 7]
    );
    assert_eq!(
        ids(&c, doc! {"item": {"$not": {"$regex": "^p.*"}}}).await,
        [3, 5, 6, 7]
    );
    // $or
    assert_eq!(
        ids(&c, doc! {"$or": [{"qty": {"$lt": 20}}, {"price": 10}]}).await,
        [1, 5, 7]
    );
    // $and with nested $or (the manual's example)
    assert_eq!(
        ids(
            &c,
            doc! {"$and": [
                {"$or": [{"qty": {"$lt": 10}}, {"qty": {"$gt": 50}}]},
                {"$or": [{"sale": true}, {"price": {"$lt": 5}}]},
            ]}
        )
        .await,
        [1, 2, 4, 5, 7]
    );
    // implicit AND plus $or ("Specify AND as well as OR Conditions")
    assert_eq!(
        ids(
            &c,
            doc! {"sale": true, "$or": [{"qty": {"$lt": 30}}, {"item": re("^pa", "")}]}
        )
        .await,
        [1, 4]
    );
    // $comment is accepted and ignored
    assert_eq!(
        ids(&c, doc! {"$comment": "just a comment", "price": 2.99}).await,
        [3, 5]
    );

    // malformed logical operators: BadValue
    assert_eq!(find_err(&c, doc! {"$and": []}).await, 2);
    assert_eq!(find_err(&c, doc! {"$or": {"a": 1}}).await, 2);
    assert_eq!(find_err(&c, doc! {"$nor": [1]}).await, 2);
    assert_eq!(find_err(&c, doc! {"price": {"$not": 5}}).await, 2);
    assert_eq!(find_err(&c, doc! {"price": {"$not": {}}}).await, 2);
    assert_eq!(find_err(&c, doc! {"$foo": 1}).await, 2);
    assert_eq!(find_err(&c, doc! {"price": {"$foo": 1}}).await, 2);
}

// ---------------------------------------------------------------------------------------------
// element operators

#[tokio::test]
async fn exists_manual_example() {
    let s = TestServer::start();
    let db = s.client().await.database("elem");
    let spices = setup(
        &db,
        "spices",
        vec![
            doc! {"_id": 1, "saffron": 5, "cinnamon": 5, "mustard": null},
            doc! {"_id": 2, "saffron": 3, "cinnamon": null, "mustard": 8},
            doc! {"_id": 3, "saffron": null, "cinnamon": 3, "mustard": 9},
            doc! {"_id": 4, "saffron": 1, "cinnamon": 2, "mustard": 3},
            doc! {"_id": 5, "saffron": 2, "mustard": 5},
            doc! {"_id": 6, "saffron": 3, "cinnamon": 2},
            doc! {"_id": 7, "saffron": 4},
            doc! {"_id": 8, "cinnamon": 2, "mustard": 4},
            doc! {"_id": 9, "cinnamon": 2},
            doc! {"_id": 10, "mustard": 6},
        ],
    )
    .await;
    assert_eq!(
        ids(&spices, doc! {"saffron": {"$exists": true}}).await,
        [1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(
        ids(&spices, doc! {"cinnamon": {"$exists": false}}).await,
        [5, 7, 10]
    );
    // any truthy/falsy value
    assert_eq!(
        ids(&spices, doc! {"cinnamon": {"$exists": 0}}).await,
        [5, 7, 10]
    );
    assert_eq!(
        ids(&spices, doc! {"mustard": {"$exists": 1, "$ne": null}}).await,
        [2, 3, 4, 5, 8, 10]
    );
    // $exists through arrays and array indexes
    let a = setup(
        &db,
        "arr",
        vec![
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"_id": 2, "a": [1]},
            doc! {"_id": 3, "a": [{"b": 1}, {"c": 1}]},
            doc! {"_id": 4, "a": {"1": "x"}},
        ],
    )
    .await;
    assert_eq!(ids(&a, doc! {"a.1": {"$exists": true}}).await, [1, 3, 4]);
    assert_eq!(ids(&a, doc! {"a.b": {"$exists": true}}).await, [3]);
    assert_eq!(ids(&a, doc! {"a.c": {"$exists": false}}).await, [1, 2, 4]);
}

#[tokio::test]
async fn type_operator_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("elemt");
    let ab = setup(
        &db,
        "addressBook",
        vec![
            doc! {"_id": 1, "address": "2030 Martian Way", "zipCode": "90698345"},
            doc! {"_id": 2, "address": "156 Lunar Place", "zipCode": 43339374.0},
            doc! {"_id": 3, "address": "2324 Pluto Place", "zipCode": 3921412_i64},
            doc! {"_id": 4, "address": "55 Saturn Ring", "zipCode": 88602117_i32},
            doc! {"_id": 5, "address": "104 Venus Drive", "zipCode": ["834847278", "1893289032"]},
        ],
    )
    .await;
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": 2}}).await, [1, 5]);
    assert_eq!(
        ids(&ab, doc! {"zipCode": {"$type": "string"}}).await,
        [1, 5]
    );
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": 1}}).await, [2]);
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": "double"}}).await, [2]);
    assert_eq!(
        ids(&ab, doc! {"zipCode": {"$type": "number"}}).await,
        [2, 3, 4]
    );
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": "long"}}).await, [3]);
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": 16}}).await, [4]);
    assert_eq!(
        ids(&ab, doc! {"zipCode": {"$type": ["string", "double"]}}).await,
        [1, 2, 5]
    );
    assert_eq!(
        ids(&ab, doc! {"zipCode": {"$type": [2, 1]}}).await,
        [1, 2, 5]
    );
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": "array"}}).await, [5]);
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": 4}}).await, [5]);
    // the numeric code may be a double
    assert_eq!(ids(&ab, doc! {"zipCode": {"$type": 2.0}}).await, [1, 5]);

    // MinKey / MaxKey (the manual's sort demonstration)
    let mm = setup(
        &db,
        "minmax",
        vec![
            doc! {"_id": 1, "x": 3},
            doc! {"_id": 2, "x": 2.9},
            doc! {"_id": 3, "x": DateTime::from_millis(1_343_259_723_000)},
            doc! {"_id": 4, "x": true},
            doc! {"_id": 5, "x": Bson::MaxKey},
            doc! {"_id": 6, "x": Bson::MinKey},
        ],
    )
    .await;
    assert_eq!(ids(&mm, doc! {"x": {"$type": -1}}).await, [6]);
    assert_eq!(ids(&mm, doc! {"x": {"$type": "minKey"}}).await, [6]);
    assert_eq!(ids(&mm, doc! {"x": {"$type": 127}}).await, [5]);
    assert_eq!(ids(&mm, doc! {"x": {"$type": "maxKey"}}).await, [5]);
    assert_eq!(ids(&mm, doc! {"x": {"$type": "bool"}}).await, [4]);
    assert_eq!(ids(&mm, doc! {"x": {"$type": "date"}}).await, [3]);
    assert_eq!(
        sorted_ids(&mm, doc! {}, doc! {"x": 1}, None, None).await,
        [6, 2, 1, 4, 3, 5]
    );

    // bad type names / codes
    assert_eq!(find_err(&ab, doc! {"zipCode": {"$type": "foo"}}).await, 2);
    assert_eq!(find_err(&ab, doc! {"zipCode": {"$type": 100}}).await, 2);
    // an empty type list is FailedToParse ("must match at least one type")
    assert_eq!(find_err(&ab, doc! {"zipCode": {"$type": []}}).await, 9);
}

// ---------------------------------------------------------------------------------------------
// evaluation operators

#[tokio::test]
async fn mod_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("evalmod");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "item": "abc123", "qty": 0},
            doc! {"_id": 2, "item": "xyz123", "qty": 5},
            doc! {"_id": 3, "item": "ijk123", "qty": 12},
        ],
    )
    .await;
    let expected = vec![
        doc! {"_id": 1, "item": "abc123", "qty": 0},
        doc! {"_id": 3, "item": "ijk123", "qty": 12},
    ];
    assert_docs(&find(&inv, doc! {"qty": {"$mod": [4, 0]}}).await, &expected);
    // floating point arguments round towards zero
    assert_docs(
        &find(&inv, doc! {"qty": {"$mod": [4.0, 0]}}).await,
        &expected,
    );
    assert_docs(
        &find(&inv, doc! {"qty": {"$mod": [4.5, 0]}}).await,
        &expected,
    );
    assert_docs(
        &find(&inv, doc! {"qty": {"$mod": [4.99, 0]}}).await,
        &expected,
    );
    // negative divisor
    assert_docs(
        &find(&inv, doc! {"qty": {"$mod": [-4, -0.0]}}).await,
        &expected,
    );
    assert_eq!(ids(&inv, doc! {"qty": {"$mod": [4, 1]}}).await, [2]);
    // malformed
    assert_eq!(find_err(&inv, doc! {"qty": {"$mod": [4]}}).await, 2);
    assert_eq!(find_err(&inv, doc! {"qty": {"$mod": []}}).await, 2);
    assert_eq!(
        find_err(&inv, doc! {"qty": {"$mod": [4, 1, 2, 3]}}).await,
        2
    );
    assert_eq!(find_err(&inv, doc! {"qty": {"$mod": [0, 1]}}).await, 2);
    assert_eq!(find_err(&inv, doc! {"qty": {"$mod": 4}}).await, 2);
    assert_eq!(
        find_err(&inv, doc! {"qty": {"$mod": [f64::NAN, 1]}}).await,
        2
    );
    assert_eq!(
        find_err(&inv, doc! {"qty": {"$mod": [f64::INFINITY, 1]}}).await,
        2
    );

    // negative dividends keep their sign (truncated division); NaN/Infinity/strings never match
    let n = setup(
        &db,
        "neg",
        vec![
            doc! {"_id": 1, "v": -5},
            doc! {"_id": 2, "v": 5},
            doc! {"_id": 3, "v": f64::NAN},
            doc! {"_id": 4, "v": f64::INFINITY},
            doc! {"_id": 5, "v": "5"},
            doc! {"_id": 6, "v": [7, -1]},
            doc! {"_id": 7, "v": 5.9_f64},
            doc! {"_id": 8, "v": 9_i64},
        ],
    )
    .await;
    assert_eq!(ids(&n, doc! {"v": {"$mod": [4, -1]}}).await, [1, 6]);
    assert_eq!(ids(&n, doc! {"v": {"$mod": [4, 1]}}).await, [2, 7, 8]);
    assert_eq!(ids(&n, doc! {"v": {"$mod": [4, 3]}}).await, [6]);
}

#[tokio::test]
async fn regex_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("evalre");
    let p = setup(
        &db,
        "products",
        vec![
            doc! {"_id": 100, "sku": "abc123", "description": "Single line description."},
            doc! {"_id": 101, "sku": "abc789", "description": "First line\nSecond line"},
            doc! {"_id": 102, "sku": "xyz456", "description": "Many spaces before     line"},
            doc! {"_id": 103, "sku": "xyz789", "description": "Multiple\nline description"},
            doc! {"_id": 104, "sku": "Abc789", "description": "SKU starts with A"},
        ],
    )
    .await;
    // LIKE-style match
    assert_eq!(
        ids(&p, doc! {"sku": {"$regex": re("789$", "")}}).await,
        [101, 103, 104]
    );
    assert_eq!(
        ids(&p, doc! {"sku": {"$regex": "789$"}}).await,
        [101, 103, 104]
    );
    assert_eq!(ids(&p, doc! {"sku": re("789$", "")}).await, [101, 103, 104]);
    // case-insensitive, three spellings
    assert_eq!(
        ids(&p, doc! {"sku": {"$regex": re("^ABC", "i")}}).await,
        [100, 101, 104]
    );
    assert_eq!(
        ids(&p, doc! {"sku": {"$regex": "^ABC", "$options": "i"}}).await,
        [100, 101, 104]
    );
    assert_eq!(
        ids(&p, doc! {"sku": {"$options": "i", "$regex": "^ABC"}}).await,
        [100, 101, 104]
    );
    // multiline anchors
    assert_eq!(
        ids(
            &p,
            doc! {"description": {"$regex": re("^S", ""), "$options": "m"}}
        )
        .await,
        [100, 101, 104]
    );
    assert_eq!(
        ids(&p, doc! {"description": {"$regex": re("^S", "")}}).await,
        [100, 104]
    );
    // dot matches newline with s
    assert_eq!(
        ids(
            &p,
            doc! {"description": {"$regex": re("m.*line", ""), "$options": "si"}}
        )
        .await,
        [102, 103]
    );
    assert_eq!(
        ids(
            &p,
            doc! {"description": {"$regex": re("m.*line", ""), "$options": "i"}}
        )
        .await,
        [102]
    );
    // extended: whitespace and # comments ignored
    let pattern = "abc #category code\n123 #item number";
    assert_eq!(
        ids(&p, doc! {"sku": {"$regex": pattern, "$options": "x"}}).await,
        [100]
    );
    // regexes inside $in / $nin
    assert_eq!(
        ids(&p, doc! {"sku": {"$in": [re("^abc", "i"), re("456$", "")]}}).await,
        [100, 101, 102, 104]
    );
    assert_eq!(
        ids(&p, doc! {"sku": {"$nin": [re("^abc", "i"), "xyz456"]}}).await,
        [103]
    );
    // a regex matches any string element of an array, and never a number
    let t = setup(
        &db,
        "tags",
        vec![
            doc! {"_id": 1, "t": ["alpha", "beta"]},
            doc! {"_id": 2, "t": 123},
            doc! {"_id": 3, "t": "123"},
        ],
    )
    .await;
    assert_eq!(ids(&t, doc! {"t": re("^b", "")}).await, [1]);
    assert_eq!(ids(&t, doc! {"t": re("^12", "")}).await, [3]);

    // errors: options twice (51075 when $options comes second, 51074 when the regex's own
    // options come second), $options alone, invalid pattern
    assert_eq!(
        find_err(&p, doc! {"sku": {"$regex": re("a", "i"), "$options": "m"}}).await,
        51075
    );
    assert_eq!(
        find_err(&p, doc! {"sku": {"$options": "m", "$regex": re("a", "i")}}).await,
        51074
    );
    assert_eq!(find_err(&p, doc! {"sku": {"$options": "i"}}).await, 2);
    assert_eq!(find_err(&p, doc! {"sku": {"$regex": "("}}).await, 51091);
    assert_eq!(find_err(&p, doc! {"sku": {"$regex": 5}}).await, 2);
}

/// $where and $text are not implemented: they must say so with
/// NotImplemented (238) instead of matching wrongly. ($expr and $jsonSchema are being
/// implemented and are not asserted here.)
#[tokio::test]
async fn unsupported_query_operators_are_not_implemented() {
    let s = TestServer::start();
    let db = s.client().await.database("unsup");
    let c = setup(&db, "c", vec![doc! {"_id": 1, "a": 1, "b": 2}]).await;
    for filter in [
        doc! {"$where": "this.b > this.a"},
        doc! {"$text": {"$search": "coffee"}},
    ] {
        assert_eq!(find_err(&c, filter.clone()).await, 238, "{filter}");
    }
}

// ---------------------------------------------------------------------------------------------
// array operators and dotted paths

#[tokio::test]
async fn all_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("arrall");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "code": "xyz", "tags": ["school", "book", "bag", "headphone", "appliance"],
                "qty": [{"size": "S", "num": 10, "color": "blue"}, {"size": "M", "num": 45, "color": "blue"}, {"size": "L", "num": 100, "color": "green"}]},
            doc! {"_id": 2, "code": "abc", "tags": ["appliance", "school", "book"],
                "qty": [{"size": "6", "num": 100, "color": "green"}, {"size": "6", "num": 50, "color": "blue"}, {"size": "8", "num": 100, "color": "brown"}]},
            doc! {"_id": 3, "code": "efg", "tags": ["school", "book"],
                "qty": [{"size": "S", "num": 10, "color": "blue"}, {"size": "M", "num": 100, "color": "blue"}, {"size": "L", "num": 100, "color": "green"}]},
            doc! {"_id": 4, "code": "ijk", "tags": ["electronics", "school"],
                "qty": [{"size": "M", "num": 100, "color": "green"}]},
            doc! {"_id": 5, "code": "lmn", "tags": "school", "qty": 50},
        ],
    )
    .await;
    assert_eq!(
        ids(
            &inv,
            doc! {"tags": {"$all": ["appliance", "school", "book"]}}
        )
        .await,
        [1, 2]
    );
    assert_eq!(
        ids(
            &inv,
            doc! {"qty": {"$all": [
                {"$elemMatch": {"size": "M", "num": {"$gt": 50}}},
                {"$elemMatch": {"num": 100, "color": "green"}},
            ]}}
        )
        .await,
        [3, 4]
    );
    // $all on a non-array field behaves like equality
    assert_eq!(ids(&inv, doc! {"qty": {"$all": [50]}}).await, [5]);
    assert_eq!(ids(&inv, doc! {"qty": 50}).await, [5]);
    assert_eq!(
        ids(&inv, doc! {"tags": {"$all": ["school"]}}).await,
        [1, 2, 3, 4, 5]
    );
    // an empty $all matches nothing
    assert!(ids(&inv, doc! {"tags": {"$all": []}}).await.is_empty());
    // $all needs an array
    assert_eq!(find_err(&inv, doc! {"tags": {"$all": "school"}}).await, 2);
}

#[tokio::test]
async fn elem_match_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("arrem");
    let scores = setup(
        &db,
        "scores",
        vec![
            doc! {"_id": 1, "results": [82, 85, 88]},
            doc! {"_id": 2, "results": [75, 88, 89]},
        ],
    )
    .await;
    assert_docs(
        &find(
            &scores,
            doc! {"results": {"$elemMatch": {"$gte": 80, "$lt": 85}}},
        )
        .await,
        &[doc! {"_id": 1, "results": [82, 85, 88]}],
    );
    // without $elemMatch each condition may be met by a different element
    assert_eq!(
        ids(&scores, doc! {"results": {"$gte": 80, "$lt": 85}}).await,
        [1, 2]
    );
    let survey = setup(
        &db,
        "survey",
        vec![
            doc! {"_id": 1, "results": [{"product": "abc", "score": 10}, {"product": "xyz", "score": 5}]},
            doc! {"_id": 2, "results": [{"product": "abc", "score": 8}, {"product": "xyz", "score": 7}]},
            doc! {"_id": 3, "results": [{"product": "abc", "score": 7}, {"product": "xyz", "score": 8}]},
            doc! {"_id": 4, "results": [{"product": "abc", "score": 7}, {"product": "def", "score": 8}]},
            doc! {"_id": 5, "results": {"product": "xyz", "score": 7}},
        ],
    )
    .await;
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$elemMatch": {"product": "xyz", "score": {"$gte": 8}}}}
        )
        .await,
        [3]
    );
    // single query condition: $elemMatch only matches arrays
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$elemMatch": {"product": "xyz"}}}
        )
        .await,
        [1, 2, 3]
    );
    assert_eq!(
        ids(&survey, doc! {"results.product": "xyz"}).await,
        [1, 2, 3, 5]
    );
    // $ne inside and outside $elemMatch
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$elemMatch": {"product": {"$ne": "xyz"}}}}
        )
        .await,
        [1, 2, 3, 4]
    );
    assert_eq!(
        ids(&survey, doc! {"results.product": {"$ne": "xyz"}}).await,
        [4]
    );
    // the intro example: value1 and value2 must hold in the same element
    let c = setup(
        &db,
        "intro",
        vec![
            doc! {"_id": 1, "array": [{"value1": 1, "value2": 0}, {"value1": 2, "value2": 2}]},
            doc! {"_id": 2, "array": [{"value1": 1, "value2": 0}, {"value1": 1, "value2": 2}]},
        ],
    )
    .await;
    assert_eq!(
        ids(
            &c,
            doc! {"array": {"$elemMatch": {"value1": 1, "value2": {"$gt": 1}}}}
        )
        .await,
        [2]
    );
    // $elemMatch needs an object
    assert_eq!(find_err(&c, doc! {"array": {"$elemMatch": 1}}).await, 2);
}

#[tokio::test]
async fn size_operator() {
    let s = TestServer::start();
    let db = s.client().await.database("arrsize");
    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "field": ["red", "green"]},
            doc! {"_id": 2, "field": ["apple", "lime"]},
            doc! {"_id": 3, "field": "fruit"},
            doc! {"_id": 4, "field": ["orange", "lemon", "grapefruit"]},
            doc! {"_id": 5, "field": []},
            doc! {"_id": 6, "field": {"a": 1, "b": 2}},
            doc! {"_id": 7, "field": [[1, 2]]},
        ],
    )
    .await;
    assert_eq!(ids(&c, doc! {"field": {"$size": 2}}).await, [1, 2]);
    assert_eq!(ids(&c, doc! {"field": {"$size": 1}}).await, [7]);
    assert_eq!(ids(&c, doc! {"field": {"$size": 0}}).await, [5]);
    assert_eq!(ids(&c, doc! {"field": {"$size": 3.0}}).await, [4]);
    assert_eq!(ids(&c, doc! {"field": {"$size": 2_i64}}).await, [1, 2]);
    assert_eq!(
        ids(&c, doc! {"field": {"$not": {"$size": 2}}}).await,
        [3, 4, 5, 6, 7]
    );
    assert_eq!(find_err(&c, doc! {"field": {"$size": -1}}).await, 2);
    assert_eq!(find_err(&c, doc! {"field": {"$size": 2.5}}).await, 2);
    assert_eq!(find_err(&c, doc! {"field": {"$size": "2"}}).await, 2);
}

/// "Query an Array" and "Query an Array of Embedded Documents" tutorials.
#[tokio::test]
async fn query_array_tutorials() {
    let s = TestServer::start();
    let db = s.client().await.database("arrtut");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "item": "journal", "qty": 25, "tags": ["blank", "red"], "dim_cm": [14, 21]},
            doc! {"_id": 2, "item": "notebook", "qty": 50, "tags": ["red", "blank"], "dim_cm": [14, 21]},
            doc! {"_id": 3, "item": "paper", "qty": 100, "tags": ["red", "blank", "plain"], "dim_cm": [14, 21]},
            doc! {"_id": 4, "item": "planner", "qty": 75, "tags": ["blank", "red"], "dim_cm": [22.85, 30]},
            doc! {"_id": 5, "item": "postcard", "qty": 45, "tags": ["blue"], "dim_cm": [10, 15.25]},
        ],
    )
    .await;
    assert_eq!(ids(&inv, doc! {"tags": ["red", "blank"]}).await, [2]);
    assert_eq!(
        ids(&inv, doc! {"tags": {"$all": ["red", "blank"]}}).await,
        [1, 2, 3, 4]
    );
    assert_eq!(ids(&inv, doc! {"tags": "red"}).await, [1, 2, 3, 4]);
    assert_eq!(ids(&inv, doc! {"dim_cm": {"$gt": 25}}).await, [4]);
    assert_eq!(
        ids(&inv, doc! {"dim_cm": {"$gt": 15, "$lt": 20}}).await,
        [1, 2, 3, 5]
    );
    assert_eq!(
        ids(
            &inv,
            doc! {"dim_cm": {"$elemMatch": {"$gt": 22, "$lt": 30}}}
        )
        .await,
        [4]
    );
    assert_eq!(ids(&inv, doc! {"dim_cm.1": {"$gt": 25}}).await, [4]);
    assert_eq!(ids(&inv, doc! {"tags": {"$size": 3}}).await, [3]);

    let st = setup(
        &db,
        "stock",
        vec![
            doc! {"_id": 1, "item": "journal", "instock": [{"warehouse": "A", "qty": 5}, {"warehouse": "C", "qty": 15}]},
            doc! {"_id": 2, "item": "notebook", "instock": [{"warehouse": "C", "qty": 5}]},
            doc! {"_id": 3, "item": "paper", "instock": [{"warehouse": "A", "qty": 60}, {"warehouse": "B", "qty": 15}]},
            doc! {"_id": 4, "item": "planner", "instock": [{"warehouse": "A", "qty": 40}, {"warehouse": "B", "qty": 5}]},
            doc! {"_id": 5, "item": "postcard", "instock": [{"warehouse": "B", "qty": 15}, {"warehouse": "C", "qty": 35}]},
        ],
    )
    .await;
    assert_eq!(
        ids(&st, doc! {"instock": {"warehouse": "A", "qty": 5}}).await,
        [1]
    );
    assert!(
        ids(&st, doc! {"instock": {"qty": 5, "warehouse": "A"}})
            .await
            .is_empty()
    );
    assert_eq!(
        ids(&st, doc! {"instock.0.qty": {"$lte": 20}}).await,
        [1, 2, 5]
    );
    assert_eq!(
        ids(&st, doc! {"instock.qty": {"$lte": 20}}).await,
        [1, 2, 3, 4, 5]
    );
    assert_eq!(
        ids(
            &st,
            doc! {"instock": {"$elemMatch": {"qty": 5, "warehouse": "A"}}}
        )
        .await,
        [1]
    );
    assert_eq!(
        ids(
            &st,
            doc! {"instock": {"$elemMatch": {"qty": {"$gt": 10, "$lte": 20}}}}
        )
        .await,
        [1, 3, 5]
    );
    assert_eq!(
        ids(&st, doc! {"instock.qty": {"$gt": 10, "$lte": 20}}).await,
        [1, 3, 4, 5]
    );
    assert_eq!(
        ids(&st, doc! {"instock.qty": 5, "instock.warehouse": "A"}).await,
        [1, 4]
    );
}

/// "Query on Embedded/Nested Documents" and path semantics through arrays.
#[tokio::test]
async fn dotted_paths_into_documents_and_arrays() {
    let s = TestServer::start();
    let db = s.client().await.database("paths");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "item": "journal", "qty": 25, "size": {"h": 14, "w": 21, "uom": "cm"}, "status": "A"},
            doc! {"_id": 2, "item": "notebook", "qty": 50, "size": {"h": 8.5, "w": 11, "uom": "in"}, "status": "A"},
            doc! {"_id": 3, "item": "paper", "qty": 100, "size": {"h": 8.5, "w": 11, "uom": "in"}, "status": "D"},
            doc! {"_id": 4, "item": "planner", "qty": 75, "size": {"h": 22.85, "w": 30, "uom": "cm"}, "status": "D"},
            doc! {"_id": 5, "item": "postcard", "qty": 45, "size": {"h": 10, "w": 15.25, "uom": "cm"}, "status": "A"},
        ],
    )
    .await;
    assert_eq!(
        ids(&inv, doc! {"size": {"h": 14, "w": 21, "uom": "cm"}}).await,
        [1]
    );
    assert!(
        ids(&inv, doc! {"size": {"w": 21, "h": 14, "uom": "cm"}})
            .await
            .is_empty()
    );
    assert_eq!(ids(&inv, doc! {"size.uom": "in"}).await, [2, 3]);
    assert_eq!(ids(&inv, doc! {"size.h": {"$lt": 15}}).await, [1, 2, 3, 5]);
    assert_eq!(
        ids(
            &inv,
            doc! {"size.h": {"$lt": 15}, "size.uom": "in", "status": "D"}
        )
        .await,
        [3]
    );
    assert_eq!(
        ids(
            &inv,
            doc! {"status": "A", "$or": [{"qty": {"$lt": 30}}, {"item": re("^p", "")}]}
        )
        .await,
        [1, 5]
    );

    let c = setup(
        &db,
        "nested",
        vec![
            doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]},
            doc! {"_id": 2, "a": [[{"b": 1}]]},
            doc! {"_id": 3, "a": {"b": [1, 3]}},
            doc! {"_id": 4, "a": [{"b": [{"c": 5}]}, {"b": {"c": 6}}]},
            doc! {"_id": 5, "a": {"0": {"b": 1}}},
            doc! {"_id": 6, "a": [5, 1]},
            doc! {"_id": 7, "a": [{"b": null}, {"c": 1}]},
        ],
    )
    .await;
    // implicit traversal of one array level (nested arrays are not unwound)
    assert_eq!(ids(&c, doc! {"a.b": 1}).await, [1, 3]);
    // numeric components: array index, or a field named "0"
    // (a.0 of a nested array is that array, whose elements are then traversed)
    assert_eq!(ids(&c, doc! {"a.0.b": 1}).await, [1, 2, 5]);
    assert_eq!(ids(&c, doc! {"a.0.0.b": 1}).await, [2]);
    assert_eq!(ids(&c, doc! {"a.1": 1}).await, [6]);
    assert_eq!(ids(&c, doc! {"a.1.b": 2}).await, [1]);
    // two levels of arrays through documents
    assert_eq!(ids(&c, doc! {"a.b.c": 5}).await, [4]);
    assert_eq!(ids(&c, doc! {"a.b.c": {"$gt": 5}}).await, [4]);
    // null through arrays: an object element missing the field counts as null, a scalar or
    // nested-array element does not (7.0 classic-engine semantics; jstests
    // null_query_semantics.js before SERVER-36681); an object "a" without "b" is missing
    assert_eq!(ids(&c, doc! {"a.c": 1}).await, [7]);
    assert_eq!(ids(&c, doc! {"a.b": null}).await, [5, 7]);
    // $size/$all/$elemMatch at a dotted path
    assert_eq!(ids(&c, doc! {"a.b": {"$size": 2}}).await, [3]);
    assert_eq!(ids(&c, doc! {"a.b": {"$all": [1, 3]}}).await, [3]);
    assert_eq!(ids(&c, doc! {"a.b": {"$all": [1, 2]}}).await, [1]);
}

// ---------------------------------------------------------------------------------------------
// bitwise operators

#[tokio::test]
async fn bitwise_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("bits");
    let zg = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![0x66],
    }; // "Zg=="
    let mc = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![0x30],
    }; // "MC=="
    let ia = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![0x20],
    }; // "IA=="
    let c = setup(
        &db,
        "collection",
        vec![
            doc! {"_id": 1, "a": 54, "binaryValueofA": "00110110"},
            doc! {"_id": 2, "a": 20, "binaryValueofA": "00010100"},
            doc! {"_id": 3, "a": 20.0, "binaryValueofA": "00010100"},
            doc! {"_id": 4, "a": zg, "binaryValueofA": "01100110"},
        ],
    )
    .await;
    // $bitsAllSet
    assert_eq!(ids(&c, doc! {"a": {"$bitsAllSet": [1, 5]}}).await, [1, 4]);
    assert_eq!(ids(&c, doc! {"a": {"$bitsAllSet": 50}}).await, [1]);
    assert_eq!(ids(&c, doc! {"a": {"$bitsAllSet": mc.clone()}}).await, [1]);
    // $bitsAllClear
    assert_eq!(ids(&c, doc! {"a": {"$bitsAllClear": [1, 5]}}).await, [2, 3]);
    assert_eq!(ids(&c, doc! {"a": {"$bitsAllClear": 35}}).await, [2, 3]);
    assert_eq!(ids(&c, doc! {"a": {"$bitsAllClear": ia}}).await, [2, 3]);
    // $bitsAnySet
    assert_eq!(ids(&c, doc! {"a": {"$bitsAnySet": [1, 5]}}).await, [1, 4]);
    assert_eq!(ids(&c, doc! {"a": {"$bitsAnySet": 35}}).await, [1, 4]);
    assert_eq!(
        ids(&c, doc! {"a": {"$bitsAnySet": mc.clone()}}).await,
        [1, 2, 3, 4]
    );
    // $bitsAnyClear
    assert_eq!(ids(&c, doc! {"a": {"$bitsAnyClear": [1, 5]}}).await, [2, 3]);
    assert_eq!(
        ids(&c, doc! {"a": {"$bitsAnyClear": 35}}).await,
        [1, 2, 3, 4]
    );
    assert_eq!(ids(&c, doc! {"a": {"$bitsAnyClear": mc}}).await, [2, 3, 4]);

    // negative numbers are sign-extended; non-integral doubles and strings never match
    let n = setup(
        &db,
        "neg",
        vec![
            doc! {"_id": 1, "a": -5},
            doc! {"_id": 2, "a": 20.5},
            doc! {"_id": 3, "a": "20"},
            doc! {"_id": 4, "a": 5_i64},
        ],
    )
    .await;
    assert_eq!(ids(&n, doc! {"a": {"$bitsAllSet": [63]}}).await, [1]);
    assert_eq!(ids(&n, doc! {"a": {"$bitsAllSet": [0, 2]}}).await, [4]);
    assert_eq!(ids(&n, doc! {"a": {"$bitsAnySet": [0]}}).await, [1, 4]);
    assert_eq!(ids(&n, doc! {"a": {"$bitsAllClear": [1]}}).await, [4]);
    // errors: negative mask (FailedToParse), bad positions and types (BadValue)
    assert_eq!(find_err(&n, doc! {"a": {"$bitsAllSet": -1}}).await, 9);
    assert_eq!(find_err(&n, doc! {"a": {"$bitsAllSet": 1.5}}).await, 9);
    assert_eq!(find_err(&n, doc! {"a": {"$bitsAllSet": [-1]}}).await, 2);
    assert_eq!(find_err(&n, doc! {"a": {"$bitsAllSet": [1.2]}}).await, 2);
    assert_eq!(find_err(&n, doc! {"a": {"$bitsAllSet": "123"}}).await, 2);
}

// ---------------------------------------------------------------------------------------------
// projection

/// "Project Fields to Return from Query".
#[tokio::test]
async fn projection_tutorial() {
    let s = TestServer::start();
    let db = s.client().await.database("proj");
    let inv = setup(
        &db,
        "inventory",
        vec![
            doc! {"_id": 1, "item": "journal", "status": "A", "size": {"h": 14, "w": 21, "uom": "cm"}, "instock": [{"warehouse": "A", "qty": 5}]},
            doc! {"_id": 2, "item": "notebook", "status": "A", "size": {"h": 8.5, "w": 11, "uom": "in"}, "instock": [{"warehouse": "C", "qty": 5}]},
            doc! {"_id": 3, "item": "paper", "status": "D", "size": {"h": 8.5, "w": 11, "uom": "in"}, "instock": [{"warehouse": "A", "qty": 60}]},
            doc! {"_id": 4, "item": "planner", "status": "D", "size": {"h": 22.85, "w": 30, "uom": "cm"}, "instock": [{"warehouse": "A", "qty": 40}]},
            doc! {"_id": 5, "item": "postcard", "status": "A", "size": {"h": 10, "w": 15.25, "uom": "cm"}, "instock": [{"warehouse": "B", "qty": 15}, {"warehouse": "C", "qty": 35}]},
        ],
    )
    .await;
    let a = doc! {"status": "A"};
    assert_docs(
        &project(&inv, a.clone(), doc! {"item": 1, "status": 1}).await,
        &[
            doc! {"_id": 1, "item": "journal", "status": "A"},
            doc! {"_id": 2, "item": "notebook", "status": "A"},
            doc! {"_id": 5, "item": "postcard", "status": "A"},
        ],
    );
    // output follows the document's field order, not the projection's
    assert_docs(
        &project(&inv, a.clone(), doc! {"status": 1, "item": true}).await,
        &[
            doc! {"_id": 1, "item": "journal", "status": "A"},
            doc! {"_id": 2, "item": "notebook", "status": "A"},
            doc! {"_id": 5, "item": "postcard", "status": "A"},
        ],
    );
    assert_docs(
        &project(&inv, a.clone(), doc! {"item": 1, "status": 1, "_id": 0}).await,
        &[
            doc! {"item": "journal", "status": "A"},
            doc! {"item": "notebook", "status": "A"},
            doc! {"item": "postcard", "status": "A"},
        ],
    );
    assert_docs(
        &project(&inv, a.clone(), doc! {"status": 0, "instock": 0}).await,
        &[
            doc! {"_id": 1, "item": "journal", "size": {"h": 14, "w": 21, "uom": "cm"}},
            doc! {"_id": 2, "item": "notebook", "size": {"h": 8.5, "w": 11, "uom": "in"}},
            doc! {"_id": 5, "item": "postcard", "size": {"h": 10, "w": 15.25, "uom": "cm"}},
        ],
    );
    assert_docs(
        &project(
            &inv,
            a.clone(),
            doc! {"item": 1, "status": 1, "size.uom": 1},
        )
        .await,
        &[
            doc! {"_id": 1, "item": "journal", "status": "A", "size": {"uom": "cm"}},
            doc! {"_id": 2, "item": "notebook", "status": "A", "size": {"uom": "in"}},
            doc! {"_id": 5, "item": "postcard", "status": "A", "size": {"uom": "cm"}},
        ],
    );
    // nested form is equivalent to the dotted form
    assert_docs(
        &project(
            &inv,
            a.clone(),
            doc! {"item": 1, "status": 1, "size": {"uom": 1}},
        )
        .await,
        &[
            doc! {"_id": 1, "item": "journal", "status": "A", "size": {"uom": "cm"}},
            doc! {"_id": 2, "item": "notebook", "status": "A", "size": {"uom": "in"}},
            doc! {"_id": 5, "item": "postcard", "status": "A", "size": {"uom": "cm"}},
        ],
    );
    assert_docs(
        &project(&inv, a.clone(), doc! {"size.uom": 0}).await,
        &[
            doc! {"_id": 1, "item": "journal", "status": "A", "size": {"h": 14, "w": 21}, "instock": [{"warehouse": "A", "qty": 5}]},
            doc! {"_id": 2, "item": "notebook", "status": "A", "size": {"h": 8.5, "w": 11}, "instock": [{"warehouse": "C", "qty": 5}]},
            doc! {"_id": 5, "item": "postcard", "status": "A", "size": {"h": 10, "w": 15.25}, "instock": [{"warehouse": "B", "qty": 15}, {"warehouse": "C", "qty": 35}]},
        ],
    );
    assert_docs(
        &project(
            &inv,
            a.clone(),
            doc! {"item": 1, "status": 1, "instock.qty": 1},
        )
        .await,
        &[
            doc! {"_id": 1, "item": "journal", "status": "A", "instock": [{"qty": 5}]},
            doc! {"_id": 2, "item": "notebook", "status": "A", "instock": [{"qty": 5}]},
            doc! {"_id": 5, "item": "postcard", "status": "A", "instock": [{"qty": 15}, {"qty": 35}]},
        ],
    );
    assert_docs(
        &project(
            &inv,
            a.clone(),
            doc! {"item": 1, "status": 1, "instock": {"$slice": -1}},
        )
        .await,
        &[
            doc! {"_id": 1, "item": "journal", "status": "A", "instock": [{"warehouse": "A", "qty": 5}]},
            doc! {"_id": 2, "item": "notebook", "status": "A", "instock": [{"warehouse": "C", "qty": 5}]},
            doc! {"_id": 5, "item": "postcard", "status": "A", "instock": [{"warehouse": "C", "qty": 35}]},
        ],
    );
    // {_id: 0} alone is an exclusion; {} returns everything
    assert_docs(
        &project(
            &inv,
            doc! {"_id": 1},
            doc! {"_id": 0, "size": 0, "instock": 0},
        )
        .await,
        &[doc! {"item": "journal", "status": "A"}],
    );
    assert_docs(
        &project(&inv, doc! {"_id": 1}, doc! {"_id": 0}).await,
        &[
            doc! {"item": "journal", "status": "A", "size": {"h": 14, "w": 21, "uom": "cm"}, "instock": [{"warehouse": "A", "qty": 5}]},
        ],
    );
    assert_docs(
        &project(&inv, doc! {"_id": 1}, doc! {"_id": 1}).await,
        &[doc! {"_id": 1}],
    );
    // _id: 1 is allowed in an exclusion projection
    assert_docs(
        &project(
            &inv,
            doc! {"_id": 1},
            doc! {"_id": 1, "size": 0, "instock": 0},
        )
        .await,
        &[doc! {"_id": 1, "item": "journal", "status": "A"}],
    );
    // a non-existent field projects to nothing
    assert_docs(
        &project(&inv, doc! {"_id": 1}, doc! {"nope": 1, "item.x": 1}).await,
        &[doc! {"_id": 1}],
    );
}

#[tokio::test]
async fn projection_through_arrays() {
    let s = TestServer::start();
    let db = s.client().await.database("projarr");
    let c = setup(
        &db,
        "c",
        vec![doc! {"_id": 1, "a": [1, {"b": 1, "c": 2}, [{"b": 3, "c": 4}], {"c": 5}, "x"], "d": {"b": 9, "c": 8}}],
    )
    .await;
    // inclusion keeps documents (and nested arrays) and drops scalars
    assert_docs(
        &project(&c, doc! {}, doc! {"a.b": 1, "_id": 0}).await,
        &[doc! {"a": [{"b": 1}, [{"b": 3}], {}]}],
    );
    // exclusion keeps scalars
    assert_docs(
        &project(&c, doc! {}, doc! {"a.b": 0, "d.c": 0}).await,
        &[doc! {"_id": 1, "a": [1, {"c": 2}, [{"c": 4}], {"c": 5}, "x"], "d": {"b": 9}}],
    );
}

#[tokio::test]
async fn projection_errors() {
    let s = TestServer::start();
    let db = s.client().await.database("projerr");
    let c = setup(
        &db,
        "c",
        vec![doc! {"_id": 1, "a": {"b": 1}, "b": [1, 2], "c": 3}],
    )
    .await;
    // mixing inclusion and exclusion
    assert_eq!(project_err(&c, doc! {}, doc! {"a": 1, "c": 0}).await, 31254);
    assert_eq!(project_err(&c, doc! {}, doc! {"a": 0, "c": 1}).await, 31253);
    assert_eq!(
        project_err(&c, doc! {}, doc! {"a.b": 0, "c": 1}).await,
        31253
    );
    // path collisions
    assert_eq!(
        project_err(&c, doc! {}, doc! {"a": 1, "a.b": 1}).await,
        31249
    );
    assert_eq!(
        project_err(&c, doc! {}, doc! {"a.b": 1, "a": 1}).await,
        31250
    );
    assert_eq!(
        project_err(&c, doc! {}, doc! {"a": 0, "a.b": 0}).await,
        31249
    );
    // positional projection
    assert_eq!(
        project_err(&c, doc! {"b": 1}, doc! {"b.$": 1, "a.$": 1}).await,
        31276
    );
    assert_eq!(
        project_err(
            &c,
            doc! {"b": 1},
            doc! {"b.$": 1, "c": {"$elemMatch": {"$gt": 1}}}
        )
        .await,
        31255
    );
    assert_eq!(
        project_err(
            &c,
            doc! {"b": 1},
            doc! {"c": {"$elemMatch": {"$gt": 1}}, "b.$": 1}
        )
        .await,
        31256
    );
    assert_eq!(
        project_err(&c, doc! {"b": 1}, doc! {"b.$.x": 1}).await,
        31394
    );
    // a positional projection that cannot find its array element at run time
    assert_eq!(project_err(&c, doc! {}, doc! {"b.$": 1}).await, 51246);
    assert_eq!(
        project_err(&c, doc! {"_id": 1}, doc! {"b.$": 1}).await,
        51246
    );
    // $elemMatch projection on a nested field / with a non-object
    assert_eq!(
        project_err(&c, doc! {}, doc! {"a.b": {"$elemMatch": {"x": 1}}}).await,
        31275
    );
    assert_eq!(
        project_err(&c, doc! {}, doc! {"b": {"$elemMatch": 1}}).await,
        31274
    );
    // a $slice projection cannot be combined with an exclusion of the same field's prefix
    assert_eq!(
        project_err(&c, doc! {}, doc! {"b": {"$slice": 1}, "b.x": 0}).await,
        31249
    );
}

/// The positional `$` projection page.
#[tokio::test]
async fn positional_projection_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("projpos");
    let st = setup(
        &db,
        "students",
        vec![
            doc! {"_id": 1, "semester": 1, "grades": [70, 87, 90]},
            doc! {"_id": 2, "semester": 1, "grades": [90, 88, 92]},
            doc! {"_id": 3, "semester": 1, "grades": [85, 100, 90]},
            doc! {"_id": 4, "semester": 2, "grades": [79, 85, 80]},
            doc! {"_id": 5, "semester": 2, "grades": [88, 88, 92]},
            doc! {"_id": 6, "semester": 2, "grades": [95, 90, 96]},
            doc! {"_id": 7, "semester": 3, "grades": [{"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 5}, {"grade": 90, "mean": 85, "std": 3}]},
            doc! {"_id": 8, "semester": 3, "grades": [{"grade": 92, "mean": 88, "std": 8}, {"grade": 78, "mean": 90, "std": 5}, {"grade": 88, "mean": 85, "std": 3}]},
        ],
    )
    .await;
    assert_docs(
        &project(
            &st,
            doc! {"semester": 1, "grades": {"$gte": 85}},
            doc! {"grades.$": 1},
        )
        .await,
        &[
            doc! {"_id": 1, "grades": [87]},
            doc! {"_id": 2, "grades": [90]},
            doc! {"_id": 3, "grades": [85]},
        ],
    );
    assert_docs(
        &project(&st, doc! {"grades.mean": {"$gt": 70}}, doc! {"grades.$": 1}).await,
        &[
            doc! {"_id": 7, "grades": [{"grade": 80, "mean": 75, "std": 8}]},
            doc! {"_id": 8, "grades": [{"grade": 92, "mean": 88, "std": 8}]},
        ],
    );
    // the matched element of an $elemMatch query
    assert_docs(
        &project(
            &st,
            doc! {"grades": {"$elemMatch": {"mean": {"$gt": 85}, "grade": {"$lt": 90}}}},
            doc! {"semester": 1, "grades.$": 1},
        )
        .await,
        &[
            doc! {"_id": 7, "semester": 3, "grades": [{"grade": 85, "mean": 90, "std": 5}]},
            doc! {"_id": 8, "semester": 3, "grades": [{"grade": 78, "mean": 90, "std": 5}]},
        ],
    );
}

/// The `$elemMatch` projection page.
#[tokio::test]
async fn elem_match_projection_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("projem");
    let schools = setup(
        &db,
        "schools",
        vec![
            doc! {"_id": 1, "zipcode": "63109", "students": [
            {"name": "john", "school": 102, "age": 10},
            {"name": "jess", "school": 102, "age": 11},
            {"name": "jeff", "school": 108, "age": 15}]},
            doc! {"_id": 2, "zipcode": "63110", "students": [
            {"name": "ajax", "school": 100, "age": 7},
            {"name": "achilles", "school": 100, "age": 8}],
            "athletics": ["swimming", "basketball", "football"]},
            doc! {"_id": 3, "zipcode": "63109", "students": [
            {"name": "ajax", "school": 100, "age": 7},
            {"name": "achilles", "school": 100, "age": 8}],
            "athletics": ["baseball", "basketball", "soccer"]},
            doc! {"_id": 4, "zipcode": "63109", "students": [
            {"name": "barney", "school": 102, "age": 7},
            {"name": "ruth", "school": 102, "age": 16}]},
        ],
    )
    .await;
    assert_docs(
        &project(
            &schools,
            doc! {"zipcode": "63109"},
            doc! {"students": {"$elemMatch": {"school": 102}}},
        )
        .await,
        &[
            doc! {"_id": 1, "students": [{"name": "john", "school": 102, "age": 10}]},
            doc! {"_id": 3},
            doc! {"_id": 4, "students": [{"name": "barney", "school": 102, "age": 7}]},
        ],
    );
    assert_docs(
        &project(
            &schools,
            doc! {"zipcode": "63109"},
            doc! {"students": {"$elemMatch": {"school": 102, "age": {"$gt": 10}}}},
        )
        .await,
        &[
            doc! {"_id": 1, "students": [{"name": "jess", "school": 102, "age": 11}]},
            doc! {"_id": 3},
            doc! {"_id": 4, "students": [{"name": "ruth", "school": 102, "age": 16}]},
        ],
    );
    // the $elemMatch field comes after the other included fields
    let players = setup(
        &db,
        "players",
        vec![doc! {"_id": 1, "name": "player1",
        "games": [{"game": "abc", "score": 8}, {"game": "xyz", "score": 5}],
        "joined": DateTime::from_millis(1_577_836_800_000),
        "lastLogin": DateTime::from_millis(1_588_291_200_000)}],
    )
    .await;
    assert_docs(
        &project(
            &players,
            doc! {},
            doc! {"games": {"$elemMatch": {"score": {"$gt": 5}}}, "joined": 1, "lastLogin": 1},
        )
        .await,
        &[doc! {"_id": 1,
        "joined": DateTime::from_millis(1_577_836_800_000),
        "lastLogin": DateTime::from_millis(1_588_291_200_000),
        "games": [{"game": "abc", "score": 8}]}],
    );
    // $elemMatch alone (even with _id: 0) is an inclusion projection
    assert_docs(
        &project(
            &players,
            doc! {},
            doc! {"_id": 0, "games": {"$elemMatch": {"game": "xyz"}}},
        )
        .await,
        &[doc! {"games": [{"game": "xyz", "score": 5}]}],
    );
}

/// The `$slice` projection page.
#[tokio::test]
async fn slice_projection_manual_examples() {
    let s = TestServer::start();
    let db = s.client().await.database("projslice");
    let posts = setup(
        &db,
        "posts",
        vec![
            doc! {"_id": 1, "title": "Bagels are not croissants.",
                "comments": [{"comment": "0. true"}, {"comment": "1. croissants aren't bagels."}]},
            doc! {"_id": 2, "title": "Coffee please.",
                "comments": [{"comment": "0. fooey"}, {"comment": "1. tea please"}, {"comment": "2. iced coffee"}, {"comment": "3. cappuccino"}, {"comment": "4. whatever"}]},
        ],
    )
    .await;
    let c = |s: &str| doc! {"comment": s};
    assert_docs(
        &project(&posts, doc! {}, doc! {"comments": {"$slice": 3}}).await,
        &[
            doc! {"_id": 1, "title": "Bagels are not croissants.", "comments": [c("0. true"), c("1. croissants aren't bagels.")]},
            doc! {"_id": 2, "title": "Coffee please.", "comments": [c("0. fooey"), c("1. tea please"), c("2. iced coffee")]},
        ],
    );
    assert_docs(
        &project(&posts, doc! {}, doc! {"comments": {"$slice": -3}}).await,
        &[
            doc! {"_id": 1, "title": "Bagels are not croissants.", "comments": [c("0. true"), c("1. croissants aren't bagels.")]},
            doc! {"_id": 2, "title": "Coffee please.", "comments": [c("2. iced coffee"), c("3. cappuccino"), c("4. whatever")]},
        ],
    );
    assert_docs(
        &project(&posts, doc! {}, doc! {"comments": {"$slice": [1, 1]}}).await,
        &[
            doc! {"_id": 1, "title": "Bagels are not croissants.", "comments": [c("1. croissants aren't bagels.")]},
            doc! {"_id": 2, "title": "Coffee please.", "comments": [c("1. tea please")]},
        ],
    );
    assert_docs(
        &project(&posts, doc! {}, doc! {"comments": {"$slice": [-1, 2]}}).await,
        &[
            doc! {"_id": 1, "title": "Bagels are not croissants.", "comments": [c("1. croissants aren't bagels.")]},
            doc! {"_id": 2, "title": "Coffee please.", "comments": [c("4. whatever")]},
        ],
    );
    // skip beyond the end, negative skip beyond the start
    assert_docs(
        &project(
            &posts,
            doc! {"_id": 2},
            doc! {"_id": 0, "comments": {"$slice": [10, 2]}},
        )
        .await,
        &[doc! {"title": "Coffee please.", "comments": []}],
    );
    assert_docs(
        &project(
            &posts,
            doc! {"_id": 2},
            doc! {"_id": 0, "title": 0, "comments": {"$slice": [-10, 2]}},
        )
        .await,
        &[doc! {"comments": [c("0. fooey"), c("1. tea please")]}],
    );
    // with an inclusion
    assert_docs(
        &project(
            &posts,
            doc! {"_id": 2},
            doc! {"title": 1, "comments": {"$slice": 1}},
        )
        .await,
        &[doc! {"_id": 2, "title": "Coffee please.", "comments": [c("0. fooey")]}],
    );

    // a $slice of an array in an embedded document
    let inv = setup(
        &db,
        "inventory",
        vec![doc! {"_id": 1, "item": "socks", "qty": 100,
        "details": {"colors": ["blue", "red"], "sizes": ["S", "M", "L"]}}],
    )
    .await;
    assert_docs(
        &project(
            &inv,
            doc! {},
            doc! {"qty": 1, "details.colors": {"$slice": 1}},
        )
        .await,
        &[doc! {"_id": 1, "qty": 100, "details": {"colors": ["blue"]}}],
    );
    assert_docs(
        &project(
            &inv,
            doc! {},
            doc! {"_id": 0, "details.colors": {"$slice": 1}},
        )
        .await,
        &[
            doc! {"item": "socks", "qty": 100, "details": {"colors": ["blue"], "sizes": ["S", "M", "L"]}},
        ],
    );
    // $slice of a non-array returns the value unchanged
    assert_docs(
        &project(
            &inv,
            doc! {},
            doc! {"_id": 0, "qty": {"$slice": 1}, "details": 0},
        )
        .await,
        &[doc! {"item": "socks", "qty": 100}],
    );
}

// ---------------------------------------------------------------------------------------------
// sort, skip, limit, cursors

#[tokio::test]
async fn sort_arrays_null_missing_and_mixed_types() {
    let s = TestServer::start();
    let db = s.client().await.database("sort");
    // ascending sorts use an array's smallest element, descending its largest
    let shoes = setup(
        &db,
        "shoes",
        vec![
            doc! {"_id": 1, "sizes": [7, 11]},
            doc! {"_id": 2, "sizes": [8, 9, 10]},
        ],
    )
    .await;
    assert_eq!(
        sorted_ids(&shoes, doc! {}, doc! {"sizes": 1}, None, None).await,
        [1, 2]
    );
    assert_eq!(
        sorted_ids(&shoes, doc! {}, doc! {"sizes": -1}, None, None).await,
        [1, 2]
    );

    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "x": 1},
            doc! {"_id": 2, "x": null},
            doc! {"_id": 3},
            doc! {"_id": 4, "x": []},
            doc! {"_id": 5, "x": "a"},
            doc! {"_id": 6, "x": [2, "b"]},
            doc! {"_id": 7, "x": {"y": 1}},
            doc! {"_id": 8, "x": [[0]]},
            doc! {"_id": 9, "x": true},
            doc! {"_id": 10, "x": DateTime::from_millis(5)},
            doc! {"_id": 11, "x": Bson::ObjectId("000000000000000000000001".parse().unwrap())},
            doc! {"_id": 12, "x": Binary { subtype: BinarySubtype::Generic, bytes: vec![1] }},
        ],
    )
    .await;
    // [] < null == missing < numbers < strings < objects < arrays < binData < objectId < bool < date
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"x": 1, "_id": 1}, None, None).await,
        [4, 2, 3, 1, 6, 5, 7, 8, 12, 11, 9, 10]
    );
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"x": -1, "_id": 1}, None, None).await,
        [10, 9, 11, 12, 8, 7, 6, 5, 1, 2, 3, 4]
    );
    // with skip and limit
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"x": 1, "_id": 1}, Some(2), Some(4)).await,
        [3, 1, 6, 5]
    );
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"x": -1, "_id": 1}, Some(9), Some(10)).await,
        [2, 3, 4]
    );

    // numbers of every type interleave; NaN sorts first
    let n = setup(
        &db,
        "nums",
        vec![
            doc! {"_id": 1, "v": 1},
            doc! {"_id": 2, "v": 1.5},
            doc! {"_id": 3, "v": 2_i64},
            doc! {"_id": 4, "v": dec("0.5")},
            doc! {"_id": 5, "v": f64::NAN},
            doc! {"_id": 6, "v": f64::NEG_INFINITY},
            doc! {"_id": 7, "v": -3_i64},
            doc! {"_id": 8, "v": dec("1E+400")},
        ],
    )
    .await;
    assert_eq!(
        sorted_ids(&n, doc! {}, doc! {"v": 1}, None, None).await,
        [5, 6, 7, 4, 1, 2, 3, 8]
    );
    assert_eq!(
        sorted_ids(&n, doc! {}, doc! {"v": -1}, None, Some(3)).await,
        [8, 3, 2]
    );
}

#[tokio::test]
async fn sort_multikey_dotted_and_compound() {
    let s = TestServer::start();
    let db = s.client().await.database("sortmk");
    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": [{"b": 5}, {"b": 1}], "k": "x"},
            doc! {"_id": 2, "a": [{"b": 3}], "k": "y"},
            doc! {"_id": 3, "a": {"b": 2}, "k": "x"},
            doc! {"_id": 4, "a": [{"c": 1}], "k": "y"},
            doc! {"_id": 5, "a": {"b": [4, 0]}, "k": "x"},
        ],
    )
    .await;
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"a.b": 1}, None, None).await,
        [4, 5, 1, 3, 2]
    );
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"a.b": -1}, None, None).await,
        [1, 5, 2, 3, 4]
    );
    // compound: k ascending, then a.b descending
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"k": 1, "a.b": -1}, None, None).await,
        [1, 5, 3, 2, 4]
    );
    // the sort key is computed from the whole document even when projected away
    let r = collect(
        c.find(doc! {"k": "x"})
            .sort(doc! {"a.b": 1})
            .projection(doc! {"a": 0})
            .await
            .unwrap(),
    )
    .await;
    assert_docs(
        &r,
        &[
            doc! {"_id": 5, "k": "x"},
            doc! {"_id": 1, "k": "x"},
            doc! {"_id": 3, "k": "x"},
        ],
    );
    // a sort on a filtered subset with the array bounds ignored (the sort key uses every element)
    assert_eq!(
        sorted_ids(&c, doc! {"a.b": {"$gt": 2}}, doc! {"a.b": 1}, None, None).await,
        [5, 1, 2]
    );

    // bad sort specifications
    let e = c.find(doc! {}).sort(doc! {"a": 2}).await.unwrap_err();
    assert_eq!(code_of(&e), 15975);
    let e = c.find(doc! {}).sort(doc! {"a": "asc"}).await.unwrap_err();
    assert_eq!(code_of(&e), 15974);
    let e = c.find(doc! {}).sort(doc! {"a": 0}).await.unwrap_err();
    assert_eq!(code_of(&e), 15975);
}

/// Top-k with limit, skip and getMore over a sorted result (the cursor keeps the sort).
#[tokio::test]
async fn sorted_results_across_get_more() {
    let s = TestServer::start();
    let db = s.client().await.database("sortcur");
    // a deterministic shuffle of 0..500
    let docs: Vec<Document> = (0..500)
        .map(|i: i32| {
            let k = (i * 263) % 500;
            doc! {"_id": i, "k": k, "g": k % 7, "pad": "p".repeat(50)}
        })
        .collect();
    let c = setup(&db, "c", docs).await;

    // driver iteration: batchSize 37 forces many getMores
    let got = collect(
        c.find(doc! {})
            .sort(doc! {"k": -1})
            .batch_size(37)
            .projection(doc! {"k": 1, "_id": 0})
            .await
            .unwrap(),
    )
    .await;
    let ks: Vec<i32> = got.iter().map(|d| d.get_i32("k").unwrap()).collect();
    assert_eq!(ks, (0..500).rev().collect::<Vec<_>>());

    // compound sort with ties broken by the second key
    let got = collect(
        c.find(doc! {"k": {"$lt": 30}})
            .sort(doc! {"g": 1, "k": -1})
            .batch_size(4)
            .projection(doc! {"k": 1, "_id": 0})
            .await
            .unwrap(),
    )
    .await;
    let mut expected: Vec<i32> = (0..30).collect();
    expected.sort_by_key(|k| (k % 7, -k));
    let ks: Vec<i32> = got.iter().map(|d| d.get_i32("k").unwrap()).collect();
    assert_eq!(ks, expected);

    // raw commands: skip + limit + batchSize; the cursor closes on the batch reaching the limit
    let r = db
        .run_command(doc! {"find": "c", "sort": {"k": 1}, "skip": 100, "limit": 25, "batchSize": 10, "projection": {"_id": 0, "k": 1}})
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    let mut all: Vec<i32> = cur
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("k").unwrap())
        .collect();
    assert_eq!(all.len(), 10);
    let id = cur.get_i64("id").unwrap();
    assert_ne!(id, 0);
    let mut sizes = vec![];
    let mut id = id;
    while id != 0 {
        let r = db
            .run_command(doc! {"getMore": id, "collection": "c", "batchSize": 10})
            .await
            .unwrap();
        let cur = r.get_document("cursor").unwrap();
        let batch = cur.get_array("nextBatch").unwrap();
        sizes.push(batch.len());
        all.extend(
            batch
                .iter()
                .map(|d| d.as_document().unwrap().get_i32("k").unwrap()),
        );
        id = cur.get_i64("id").unwrap();
    }
    assert_eq!(sizes, [10, 5]);
    assert_eq!(all, (100..125).collect::<Vec<_>>());

    // top-k: limit without batchSize returns everything in the first batch, cursor closed
    let r = db
        .run_command(
            doc! {"find": "c", "sort": {"k": -1}, "limit": 3, "projection": {"_id": 0, "k": 1}},
        )
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(cur.get_i64("id").unwrap(), 0);
    assert_eq!(
        cur.get_array("firstBatch").unwrap(),
        &vec![
            Bson::Document(doc! {"k": 499}),
            Bson::Document(doc! {"k": 498}),
            Bson::Document(doc! {"k": 497})
        ]
    );
    // skip past the end
    let r = db
        .run_command(doc! {"find": "c", "sort": {"k": 1}, "skip": 1000})
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert!(cur.get_array("firstBatch").unwrap().is_empty());
    assert_eq!(cur.get_i64("id").unwrap(), 0);
    // negative skip / limit are rejected by the command parser
    for cmd in [
        doc! {"find": "c", "skip": -1},
        doc! {"find": "c", "limit": -1},
    ] {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(code_of(&e), 51024, "{cmd}");
    }
}

/// A blocking sort above the memory limit: 292 without allowDiskUse, spills with it (and by
/// default, as in MongoDB 6.0+ where allowDiskUseByDefault is true); a top-k sort that fits
/// stays in memory.
#[tokio::test]
async fn sort_memory_limit_and_allow_disk_use() {
    let s = TestServer::start_with(&["--sort-memory-limit-bytes", "2000"]);
    let db = s.client().await.database("sortmem");
    let docs: Vec<Document> = (0..300)
        .map(|i: i32| doc! {"_id": i, "k": (i * 7) % 300, "pad": "z".repeat(40)})
        .collect();
    db.collection::<Document>("c")
        .insert_many(docs)
        .await
        .unwrap();

    let e = db
        .run_command(doc! {"find": "c", "sort": {"k": 1}, "allowDiskUse": false})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 292);
    if let ErrorKind::Command(c) = &*e.kind {
        assert_eq!(c.code_name, "QueryExceededMemoryLimitNoDiskUseAllowed");
    }

    let c = db.collection::<Document>("c");
    for allow in [Some(true), None] {
        let mut f = c.find(doc! {}).sort(doc! {"k": 1}).batch_size(50);
        if let Some(a) = allow {
            f = f.allow_disk_use(a);
        }
        let ks: Vec<i32> = collect(f.await.unwrap())
            .await
            .iter()
            .map(|d| d.get_i32("k").unwrap())
            .collect();
        assert_eq!(ks, (0..300).collect::<Vec<_>>(), "allowDiskUse {allow:?}");
    }
    // descending with skip/limit after a spill
    let ks: Vec<i32> = collect(
        c.find(doc! {})
            .sort(doc! {"k": -1})
            .skip(10)
            .limit(5)
            .allow_disk_use(true)
            .await
            .unwrap(),
    )
    .await
    .iter()
    .map(|d| d.get_i32("k").unwrap())
    .collect();
    assert_eq!(ks, [289, 288, 287, 286, 285]);
    // a small top-k fits in memory even without disk use
    let r = db
        .run_command(doc! {"find": "c", "sort": {"k": -1}, "limit": 2, "allowDiskUse": false})
        .await
        .unwrap();
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let ks: Vec<i32> = batch
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("k").unwrap())
        .collect();
    assert_eq!(ks, [299, 298]);
    // a filter that keeps the sort input small is fine too
    let r = db
        .run_command(doc! {"find": "c", "filter": {"k": {"$lt": 3}}, "sort": {"k": -1}, "allowDiskUse": false})
        .await
        .unwrap();
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .len(),
        3
    );
}

/// The find reply shape and a few find options.
#[tokio::test]
async fn find_command_reply_and_options() {
    let s = TestServer::start();
    let db = s.client().await.database("findcmd");
    let c = setup(
        &db,
        "c",
        (0..10).map(|i: i32| doc! {"_id": i, "v": i % 3}).collect(),
    )
    .await;
    let r = db
        .run_command(
            doc! {"find": "c", "filter": {"v": 1}, "sort": {"_id": -1}, "projection": {"_id": 1}},
        )
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(cur.get_str("ns").unwrap(), "findcmd.c");
    assert_eq!(cur.get_i64("id").unwrap(), 0);
    assert_eq!(
        cur.get_array("firstBatch").unwrap(),
        &vec![
            Bson::Document(doc! {"_id": 7}),
            Bson::Document(doc! {"_id": 4}),
            Bson::Document(doc! {"_id": 1})
        ]
    );
    // a missing collection yields an empty result, not an error
    let r = db
        .run_command(doc! {"find": "nope", "filter": {"a": 1}})
        .await
        .unwrap();
    assert!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .is_empty()
    );
    // find_one with sort and skip
    let one = c
        .find_one(doc! {"v": 0})
        .sort(doc! {"_id": -1})
        .skip(1)
        .await
        .unwrap()
        .unwrap();
    assert_docs(&[one], &[doc! {"_id": 6, "v": 0}]);
    // filter must be an object
    let e = db
        .run_command(doc! {"find": "c", "filter": 5})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 14);
}

// ---------------------------------------------------------------------------------------------
// more comparison and projection details

/// The manual's numeric-types example (Decimal128 page): doubles and decimals compare by exact
/// value, so 9.99 (double) and Decimal128("9.99") differ, while 10, 10L and 10.0m are equal.
#[tokio::test]
async fn numeric_types_manual_example() {
    let s = TestServer::start();
    let db = s.client().await.database("numtypes");
    let c = setup(
        &db,
        "numbers",
        vec![
            doc! {"_id": 1, "val": dec("9.99"), "description": "Decimal"},
            doc! {"_id": 2, "val": 9.99, "description": "Double"},
            doc! {"_id": 3, "val": 10.0, "description": "Double"},
            doc! {"_id": 4, "val": 10_i64, "description": "Long"},
            doc! {"_id": 5, "val": dec("10.0"), "description": "Decimal"},
            doc! {"_id": 6, "val": 9_007_199_254_740_993_i64, "description": "Long 2^53+1"},
        ],
    )
    .await;
    assert_eq!(ids(&c, doc! {"val": 9.99}).await, [2]);
    assert_eq!(ids(&c, doc! {"val": dec("9.99")}).await, [1]);
    assert_eq!(ids(&c, doc! {"val": 10}).await, [3, 4, 5]);
    assert_eq!(ids(&c, doc! {"val": dec("10")}).await, [3, 4, 5]);
    // int64 beyond 2^53 compares exactly with doubles
    assert!(
        ids(&c, doc! {"val": 9_007_199_254_740_992.0})
            .await
            .is_empty()
    );
    assert_eq!(
        ids(&c, doc! {"val": {"$gt": 9_007_199_254_740_992.0}}).await,
        [6]
    );
    assert_eq!(ids(&c, doc! {"val": 9_007_199_254_740_993_i64}).await, [6]);
    assert_eq!(
        sorted_ids(
            &c,
            doc! {"_id": {"$lt": 6}},
            doc! {"val": 1, "_id": 1},
            None,
            None
        )
        .await,
        [1, 2, 3, 4, 5]
    );
    // the double nearest 9.99 is 9.9900000000000002131..., just above the decimal
    assert!(ids(&c, doc! {"val": {"$lt": dec("9.99")}}).await.is_empty());
    assert_eq!(
        ids(&c, doc! {"val": {"$gt": dec("9.99"), "$lt": 10}}).await,
        [2]
    );
}

/// Comparisons with an array or document operand compare whole values (and array elements
/// that are themselves arrays), field by field.
#[tokio::test]
async fn array_and_document_operands() {
    let s = TestServer::start();
    let db = s.client().await.database("arrops");
    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "a": [2]},
            doc! {"_id": 2, "a": [1, 2]},
            doc! {"_id": 3, "a": [0]},
            doc! {"_id": 4, "a": [[5]]},
            doc! {"_id": 5, "a": 5},
            doc! {"_id": 6, "a": []},
            doc! {"_id": 7, "a": [[1, 2], 3]},
        ],
    )
    .await;
    assert_eq!(ids(&c, doc! {"a": {"$gt": [1]}}).await, [1, 2, 4, 7]);
    assert_eq!(ids(&c, doc! {"a": {"$lt": [1]}}).await, [3, 6]);
    // an array operand matches the whole array or an element equal to it
    assert_eq!(ids(&c, doc! {"a": [1, 2]}).await, [2, 7]);
    assert_eq!(ids(&c, doc! {"a": {"$in": [[1, 2], 5]}}).await, [2, 5, 7]);
    assert_eq!(ids(&c, doc! {"a": {"$all": [[1, 2]]}}).await, [2, 7]);
    assert_eq!(
        ids(&c, doc! {"a": {"$elemMatch": {"$elemMatch": {"$gt": 4}}}}).await,
        [4]
    );
    assert_eq!(ids(&c, doc! {"a": {"$ne": [1, 2]}}).await, [1, 3, 4, 5, 6]);
    // $all mixing $elemMatch and plain values is malformed
    assert_eq!(
        find_err(&c, doc! {"a": {"$all": [{"$elemMatch": {"$gt": 1}}, 5]}}).await,
        2
    );

    let d = setup(
        &db,
        "docs",
        vec![
            doc! {"_id": 1, "a": {"b": 2}},
            doc! {"_id": 2, "a": {"c": 0}},
            doc! {"_id": 3, "a": {"b": 1, "c": 1}},
            doc! {"_id": 4, "a": {"a": 5}},
            doc! {"_id": 5, "a": {"b": 1}},
            doc! {"_id": 6, "a": {}},
        ],
    )
    .await;
    assert_eq!(ids(&d, doc! {"a": {"$gt": {"b": 1}}}).await, [1, 2, 3]);
    assert_eq!(ids(&d, doc! {"a": {"$lte": {"b": 1}}}).await, [4, 5, 6]);
    assert_eq!(
        sorted_ids(&d, doc! {}, doc! {"a": 1}, None, None).await,
        [6, 4, 5, 3, 1, 2]
    );
}

/// Strings compare by their UTF-8 bytes (simple collation); booleans false < true.
#[tokio::test]
async fn string_and_boolean_order() {
    let s = TestServer::start();
    let db = s.client().await.database("strord");
    let c = setup(
        &db,
        "c",
        vec![
            doc! {"_id": 1, "s": "a"},
            doc! {"_id": 2, "s": "B"},
            doc! {"_id": 3, "s": "é"},
            doc! {"_id": 4, "s": "Z"},
            doc! {"_id": 5, "s": ""},
            doc! {"_id": 6, "s": "ab"},
            doc! {"_id": 7, "s": "a\u{0}b"},
        ],
    )
    .await;
    assert_eq!(
        sorted_ids(&c, doc! {}, doc! {"s": 1}, None, None).await,
        [5, 2, 4, 1, 7, 6, 3]
    );
    assert_eq!(
        ids(&c, doc! {"s": {"$gt": "Z", "$lt": "b"}}).await,
        [1, 6, 7]
    );
    let b = setup(
        &db,
        "b",
        vec![
            doc! {"_id": 1, "f": true},
            doc! {"_id": 2, "f": false},
            doc! {"_id": 3, "f": 1},
        ],
    )
    .await;
    assert_eq!(
        sorted_ids(&b, doc! {}, doc! {"f": -1}, None, None).await,
        [1, 2, 3]
    );
    // booleans are not numbers
    assert_eq!(ids(&b, doc! {"f": 1}).await, [3]);
    assert_eq!(ids(&b, doc! {"f": true}).await, [1]);
    assert_eq!(ids(&b, doc! {"f": {"$gte": false}}).await, [1, 2]);
}

/// Numeric path components in projections name fields, not array positions ("Project
/// Specific Array Elements": use $slice); positional `$` on a nested array.
#[tokio::test]
async fn projection_numeric_components_and_nested_positional() {
    let s = TestServer::start();
    let db = s.client().await.database("projnum");
    let c = setup(
        &db,
        "c",
        vec![doc! {"_id": 1, "a": [1, 2], "b": {"0": "x", "1": "y"}, "instock": [{"warehouse": "A", "qty": 5}], "n": {"arr": [5, 6, 7]}}],
    )
    .await;
    assert_docs(
        &project(&c, doc! {}, doc! {"a.0": 1, "b.0": 1, "instock.0": 1}).await,
        &[doc! {"_id": 1, "a": [], "b": {"0": "x"}, "instock": [{}]}],
    );
    assert_docs(
        &project(&c, doc! {}, doc! {"a.0": 0, "b.1": 0, "instock": 0, "n": 0}).await,
        &[doc! {"_id": 1, "a": [1, 2], "b": {"0": "x"}}],
    );
    // positional projection of an array inside a document
    assert_docs(
        &project(&c, doc! {"n.arr": {"$gt": 5}}, doc! {"n.arr.$": 1}).await,
        &[doc! {"_id": 1, "n": {"arr": [6]}}],
    );
    // $elemMatch projection of a non-array field omits it
    assert_docs(
        &project(&c, doc! {}, doc! {"b": {"$elemMatch": {"$eq": "x"}}}).await,
        &[doc! {"_id": 1}],
    );
}

/// Logical operators inside $elemMatch, $not around other operators, combined element
/// operators, document _ids.
#[tokio::test]
async fn nested_logical_and_element_combinations() {
    let s = TestServer::start();
    let db = s.client().await.database("nestlog");
    let survey = setup(
        &db,
        "survey",
        vec![
            doc! {"_id": 1, "results": [{"product": "abc", "score": 10}, {"product": "xyz", "score": 5}]},
            doc! {"_id": 2, "results": [{"product": "abc", "score": 8}, {"product": "xyz", "score": 7}]},
            doc! {"_id": 3, "results": [{"product": "def", "score": 7}]},
            doc! {"_id": 4, "results": [1, 6, 9]},
            doc! {"_id": 5, "results": "none"},
        ],
    )
    .await;
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$elemMatch": {"$or": [{"product": "def"}, {"score": {"$gte": 10}}]}}}
        )
        .await,
        [1, 3]
    );
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$elemMatch": {"product": "xyz", "$and": [{"score": {"$gt": 5}}, {"score": {"$lt": 8}}]}}}
        )
        .await,
        [2]
    );
    // a value-$elemMatch: documents are not "> 5" (type bracketing), so they satisfy $not
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$elemMatch": {"$not": {"$gt": 5}}}}
        )
        .await,
        [1, 2, 3, 4]
    );
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$elemMatch": {"$not": {"$gt": 5}, "$type": "number"}}}
        )
        .await,
        [4]
    );
    assert_eq!(
        ids(&survey, doc! {"results": {"$elemMatch": {"score": {"$exists": true}, "product": {"$nin": ["abc", "xyz"]}}}}).await,
        [3]
    );
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$not": {"$elemMatch": {"product": "abc"}}}}
        )
        .await,
        [3, 4, 5]
    );
    assert_eq!(
        ids(
            &survey,
            doc! {"results": {"$exists": true, "$type": "array", "$size": 3}}
        )
        .await,
        [4]
    );
    assert_eq!(
        ids(&survey, doc! {"results": {"$not": {"$type": "array"}}}).await,
        [5]
    );
    assert_eq!(
        ids(
            &survey,
            doc! {"results.product": {"$not": {"$regex": "^A", "$options": "i"}}}
        )
        .await,
        [3, 4, 5]
    );
    assert_eq!(
        ids(&survey, doc! {"results": {"$not": {"$in": [6, "none"]}}}).await,
        [1, 2, 3]
    );
    assert_eq!(
        ids(&survey, doc! {"$or": [{"results.score": 7}]}).await,
        [2, 3]
    );
    assert_eq!(
        ids(
            &survey,
            doc! {"$and": [{"$or": [{"_id": 1}, {"_id": 4}]}, {"$nor": [{"results": 9}]}]}
        )
        .await,
        [1]
    );

    // documents as _id: exact, ordered equality
    let k = setup(
        &db,
        "keys",
        vec![
            doc! {"_id": {"a": 1, "b": 2}, "n": 1},
            doc! {"_id": {"b": 2, "a": 1}, "n": 2},
            doc! {"_id": {"a": 1}, "n": 3},
        ],
    )
    .await;
    let ns = |v: Vec<Document>| {
        v.iter()
            .map(|d| d.get_i32("n").unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ns(collect(k.find(doc! {"_id": {"a": 1, "b": 2}}).await.unwrap()).await),
        [1]
    );
    assert_eq!(
        ns(collect(k.find(doc! {"_id.a": 1}).sort(doc! {"n": 1}).await.unwrap()).await),
        [1, 2, 3]
    );
    assert_eq!(
        ns(collect(k.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await),
        [3, 1, 2]
    );
}
