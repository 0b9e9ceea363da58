//! Document validation through the Rust driver: `validator` (query operators and
//! `$jsonSchema`) on `create` and `collMod`, every `validationLevel` and `validationAction`,
//! `errInfo` exactly as MongoDB 7.0 builds it, `bypassDocumentValidation` on every write
//! command, transactions, ordered and unordered batches, `listCollections`, and the
//! restrictions (system collections, internal databases, refused operators).

use bson::{Bson, Document, doc};
use cairn_compat_tests::{TestServer, assert_docs, bytes, cmd, code_of, collect};
use mongodb::{Collection, Database};

/// The manual's "Specify JSON Schema Validation" students schema.
fn students_schema() -> Document {
    doc! {"$jsonSchema": {
        "bsonType": "object",
        "title": "Student Object Validation",
        "required": ["address", "major", "name", "year"],
        "properties": {
            "name": {"bsonType": "string", "description": "'name' must be a string and is required"},
            "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017,
                     "description": "'year' must be an integer in [ 2017, 3017 ] and is required"},
            "gpa": {"bsonType": ["double"], "description": "'gpa' must be a double if the field exists"},
        },
    }}
}

/// The manual's `contacts` schema ("Handle Invalid Documents").
fn contacts_schema() -> Document {
    doc! {"$jsonSchema": {
        "bsonType": "object",
        "required": ["phone"],
        "properties": {
            "phone": {"bsonType": "string", "description": "must be a string and is required"},
            "email": {"bsonType": "string", "pattern": "@mongodb\\.com$",
                      "description": "must be a string and match the regular expression pattern"},
            "status": {"enum": ["Unknown", "Incomplete"], "description": "can only be one of the enum values"},
        },
    }}
}

fn contacts_details() -> Document {
    doc! {"operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [
    {"operatorName": "properties", "propertiesNotSatisfied": [
        {"propertyName": "status", "description": "can only be one of the enum values", "details": [
            {"operatorName": "enum", "specifiedAs": {"enum": ["Unknown", "Incomplete"]},
             "reason": "value was not found in enum", "consideredValue": "Updated"}]}]},
    {"operatorName": "required", "specifiedAs": {"required": ["phone"]}, "missingProperties": ["phone"]}]}
}

#[track_caller]
fn assert_doc(actual: &Document, expected: &Document) {
    assert_docs(std::slice::from_ref(actual), std::slice::from_ref(expected));
}

/// The write errors of a write command's reply (which must be `ok: 1`).
fn write_errors(r: &Document) -> Vec<Document> {
    r.get_array("writeErrors")
        .map(|a| a.iter().filter_map(|e| e.as_document().cloned()).collect())
        .unwrap_or_default()
}

async fn create(db: &Database, name: &str, options: Document) {
    let mut c = doc! {"create": name};
    c.extend(options);
    cmd(db, c).await;
}

async fn all(coll: &Collection<Document>) -> Vec<Document> {
    collect(coll.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await
}

async fn err(db: &Database, command: Document) -> mongodb::error::Error {
    match db.run_command(command.clone()).await {
        Err(e) => e,
        Ok(r) => panic!("{command} succeeded: {r}"),
    }
}

fn command_error(e: &mongodb::error::Error) -> (i32, String) {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => (c.code, c.message.clone()),
        other => panic!("not a command error: {other:?}"),
    }
}

/// "Specify JSON Schema Validation": the insert of an int `gpa` fails with the manual's
/// `errInfo`, as a write error `{index, code, errmsg, errInfo}`; a double `gpa` passes.
#[tokio::test]
async fn json_schema_manual_example() {
    let s = TestServer::start();
    let db = s.client().await.database("val");
    create(&db, "students", doc! {"validator": students_schema()}).await;
    let r = cmd(
        &db,
        doc! {"insert": "students", "documents": [{
            "_id": 1, "name": "Alice", "year": 2019, "major": "History", "gpa": 3,
            "address": {"city": "NYC", "street": "33rd Street"},
        }]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 0);
    let errors = write_errors(&r);
    assert_eq!(errors.len(), 1);
    assert_doc(
        &errors[0],
        &doc! {
            "index": 0, "code": 121, "errmsg": "Document failed validation",
            "errInfo": {"failingDocumentId": 1, "details": {
                "operatorName": "$jsonSchema", "title": "Student Object Validation",
                "schemaRulesNotSatisfied": [
                    {"operatorName": "properties", "propertiesNotSatisfied": [
                        {"propertyName": "gpa", "description": "'gpa' must be a double if the field exists",
                         "details": [{"operatorName": "bsonType", "specifiedAs": {"bsonType": ["double"]},
                                      "reason": "type did not match", "consideredValue": 3,
                                      "consideredType": "int"}]}]}]}},
        },
    );
    // The driver reports it as a write error with code 121 and the errInfo.
    let coll = db.collection::<Document>("students");
    let e = coll
        .insert_one(
            doc! {"name": "Alice", "year": 2019, "major": "History", "gpa": 3,
            "address": {"city": "NYC"}},
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 121);
    match &*e.kind {
        mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteError(w)) => {
            assert_eq!(w.message, "Document failed validation");
            let info = w.details.as_ref().expect("errInfo");
            assert!(info.get("failingDocumentId").is_some(), "{info}");
            assert_eq!(
                info.get_document("details")
                    .unwrap()
                    .get_str("title")
                    .unwrap(),
                "Student Object Validation"
            );
        }
        other => panic!("{other:?}"),
    }
    coll.insert_one(
        doc! {"_id": 2, "name": "Alice", "year": 2019, "major": "History",
        "gpa": 3.0, "address": {"city": "NYC", "street": "33rd Street"}},
    )
    .await
    .unwrap();
    assert_eq!(all(&coll).await.len(), 1);
}

/// The manual's query-operator validators: `$or` of `$type`/`$regex`/`$in` ("Contacts") and
/// `$expr` ("Specify Validation With Query Operators").
#[tokio::test]
async fn query_operator_validators() {
    let s = TestServer::start();
    let db = s.client().await.database("val");
    create(
        &db,
        "contacts",
        doc! {"validator": {"$or": [
            {"phone": {"$type": "string"}},
            {"email": {"$regex": re("@mongodb\\.com$")}},
            {"status": {"$in": ["Unknown", "Incomplete"]}},
        ]}},
    )
    .await;
    let r = cmd(
        &db,
        doc! {"insert": "contacts", "documents": [{"_id": 1, "email": "info@mongodb.co"}]},
    )
    .await;
    assert_doc(
        &write_errors(&r)[0],
        &doc! {"index": 0, "code": 121, "errmsg": "Document failed validation", "errInfo": {
        "failingDocumentId": 1, "details": {"operatorName": "$or", "clausesNotSatisfied": [
            {"index": 0, "details": {"operatorName": "$type",
                "specifiedAs": {"phone": {"$type": "string"}}, "reason": "field was missing"}},
            {"index": 1, "details": {"operatorName": "$regex",
                "specifiedAs": {"email": {"$regex": re("@mongodb\\.com$")}},
                "reason": "regular expression did not match", "consideredValue": "info@mongodb.co"}},
            {"index": 2, "details": {"operatorName": "$in",
                "specifiedAs": {"status": {"$in": ["Unknown", "Incomplete"]}},
                "reason": "field was missing"}}]}}},
    );
    cmd(
        &db,
        doc! {"insert": "contacts", "documents": [{"_id": 2, "email": "info@mongodb.com"}]},
    )
    .await;

    let expr = doc! {"$expr": {"$eq": ["$totalWithVAT", {"$multiply": ["$total", {"$sum": [1, "$VAT"]}]}]}};
    create(&db, "orders", doc! {"validator": expr.clone()}).await;
    let dec = |s: &str| Bson::Decimal128(s.parse().unwrap());
    let r = cmd(
        &db,
        doc! {"insert": "orders", "documents": [
        {"_id": 1, "total": dec("141"), "VAT": dec("0.20"), "totalWithVAT": dec("169")}]},
    )
    .await;
    assert_doc(
        &write_errors(&r)[0].get_document("errInfo").unwrap().clone(),
        &doc! {"failingDocumentId": 1, "details": {"operatorName": "$expr", "specifiedAs": expr,
        "reason": "expression did not match", "expressionResult": false}},
    );
    let r = cmd(
        &db,
        doc! {"insert": "orders", "documents": [
        {"_id": 2, "total": dec("141"), "VAT": dec("0.20"), "totalWithVAT": dec("169.2")}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
}

/// "Specify Validation Level for Existing Documents": `strict` checks every update,
/// `moderate` only updates of documents that were valid, `off` nothing.
#[tokio::test]
async fn validation_levels() {
    let s = TestServer::start();
    let db = s.client().await.database("val");
    let contacts = db.collection::<Document>("contacts");
    contacts
        .insert_many(vec![
            doc! {"_id": 1, "name": "Anne", "phone": "+1 555 123 456", "city": "London", "status": "Complete"},
            doc! {"_id": 2, "name": "Ivan", "city": "Vancouver"},
        ])
        .await
        .unwrap();
    let schema = doc! {"$jsonSchema": {
        "bsonType": "object",
        "required": ["phone", "name"],
        "properties": {
            "phone": {"bsonType": "string", "description": "phone must be a string and is required"},
            "name": {"bsonType": "string", "description": "name must be a string and is required"},
        },
    }};
    cmd(
        &db,
        doc! {"collMod": "contacts", "validator": schema.clone(), "validationLevel": "strict"},
    )
    .await;
    let name_error = |value: i32| {
        doc! {"operatorName": "properties", "propertiesNotSatisfied": [
        {"propertyName": "name", "description": "name must be a string and is required", "details": [
            {"operatorName": "bsonType", "specifiedAs": {"bsonType": "string"},
             "reason": "type did not match", "consideredValue": value, "consideredType": "int"}]}]}
    };
    // strict: both updates fail.
    let r = cmd(
        &db,
        doc! {"update": "contacts", "updates": [{"q": {"_id": 1}, "u": {"$set": {"name": 10}}}]},
    )
    .await;
    assert_doc(
        &write_errors(&r)[0],
        &doc! {"index": 0, "code": 121, "errmsg": "Document failed validation", "errInfo": {
        "failingDocumentId": 1, "details": {"operatorName": "$jsonSchema",
        "schemaRulesNotSatisfied": [name_error(10)]}}},
    );
    let r = cmd(
        &db,
        doc! {"update": "contacts", "updates": [{"q": {"_id": 2}, "u": {"$set": {"name": 20}}}]},
    )
    .await;
    assert_doc(
        &write_errors(&r)[0].get_document("errInfo").unwrap().clone(),
        &doc! {"failingDocumentId": 2, "details": {"operatorName": "$jsonSchema",
        "schemaRulesNotSatisfied": [name_error(20),
            {"operatorName": "required", "specifiedAs": {"required": ["phone", "name"]},
             "missingProperties": ["phone"]}]}},
    );
    // moderate: the valid document stays valid, the invalid one may change.
    cmd(
        &db,
        doc! {"collMod": "contacts", "validationLevel": "moderate"},
    )
    .await;
    let r = cmd(
        &db,
        doc! {"update": "contacts", "updates": [{"q": {"_id": 1}, "u": {"$set": {"name": 10}}}]},
    )
    .await;
    assert_doc(
        &write_errors(&r)[0].get_document("errInfo").unwrap().clone(),
        &doc! {"failingDocumentId": 1, "details": {"operatorName": "$jsonSchema",
        "schemaRulesNotSatisfied": [name_error(10)]}},
    );
    let r = cmd(
        &db,
        doc! {"update": "contacts", "updates": [{"q": {"_id": 2}, "u": {"$set": {"name": 20}}}]},
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    // moderate still checks inserts.
    let r = cmd(
        &db,
        doc! {"insert": "contacts", "documents": [{"_id": 3, "name": 5}]},
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
    // off: nothing is checked.
    cmd(&db, doc! {"collMod": "contacts", "validationLevel": "off"}).await;
    let r = cmd(
        &db,
        doc! {"insert": "contacts", "documents": [{"_id": 3, "name": 5}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let info = cmd(
        &db,
        doc! {"listCollections": 1, "filter": {"name": "contacts"}},
    )
    .await;
    let options = info
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .get_document("options")
        .unwrap()
        .clone();
    assert_doc(
        &options,
        &doc! {"validator": schema, "validationLevel": "off"},
    );
}

/// "Handle Invalid Documents": `error` refuses; `warn` lets the write through and logs id
/// 20294 with the namespace, the document and the `errInfo`.
#[tokio::test]
async fn validation_actions() {
    let s = TestServer::start();
    let db = s.client().await.database("test");
    create(
        &db,
        "contacts",
        doc! {"validator": contacts_schema(), "validationAction": "error"},
    )
    .await;
    let r = cmd(
        &db,
        doc! {"insert": "contacts", "documents": [{"_id": 1, "name": "Amanda", "status": "Updated"}]},
    )
    .await;
    assert_doc(
        &write_errors(&r)[0].get_document("errInfo").unwrap().clone(),
        &doc! {"failingDocumentId": 1, "details": contacts_details()},
    );
    create(
        &db,
        "contacts2",
        doc! {"validator": contacts_schema(), "validationAction": "warn"},
    )
    .await;
    let r = cmd(
        &db,
        doc! {"insert": "contacts2", "documents": [{"_id": 1, "name": "Amanda", "status": "Updated"}]},
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
    assert_eq!(r.get_i32("n").unwrap(), 1);
    // The log line, through getLog as the manual reads it.
    let log = cmd(
        &s.client().await.database("admin"),
        doc! {"getLog": "global"},
    )
    .await;
    let line = log
        .get_array("log")
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .find(|l| l.contains("\"id\":20294"))
        .expect("a 20294 line")
        .to_string();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["s"], "W");
    assert_eq!(v["c"], "STORAGE");
    assert_eq!(v["msg"], "Document would fail validation");
    let attr = v["attr"].as_object().unwrap();
    let keys: Vec<&String> = attr.keys().collect();
    assert_eq!(keys, ["namespace", "document", "errInfo"]);
    assert_eq!(attr["namespace"], "test.contacts2");
    assert_eq!(
        attr["document"],
        serde_json::json!({"_id": 1, "name": "Amanda", "status": "Updated"})
    );
    assert_eq!(attr["errInfo"]["failingDocumentId"], 1);
    assert_eq!(
        attr["errInfo"]["details"]["schemaRulesNotSatisfied"][1]["missingProperties"],
        serde_json::json!(["phone"])
    );
    // An update under warn goes through too; back to error it does not.
    let r = cmd(
        &db,
        doc! {"update": "contacts2", "updates": [{"q": {"_id": 1}, "u": {"$set": {"status": "Bad"}}}]},
    )
    .await;
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    cmd(
        &db,
        doc! {"collMod": "contacts2", "validationAction": "error"},
    )
    .await;
    let r = cmd(
        &db,
        doc! {"update": "contacts2", "updates": [{"q": {"_id": 1}, "u": {"$set": {"status": "Worse"}}}]},
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
    // A validator that throws accepts writes under warn (jstests doc_validation_options.js).
    cmd(
        &db,
        doc! {"collMod": "contacts2", "validator": {"$expr": {"$divide": [10, 0]}}, "validationAction": "warn"},
    )
    .await;
    let r = cmd(
        &db,
        doc! {"insert": "contacts2", "documents": [{"foo": "1"}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
}

/// Every update path: targeted (`{_id}` filter), multi, replacement, upsert, and
/// findAndModify (a command error with `errInfo` after `codeName`).
#[tokio::test]
async fn every_write_path_validates() {
    let s = TestServer::start();
    let db = s.client().await.database("val");
    create(&db, "c", doc! {"validator": {"a": {"$gte": 0}}}).await;
    let c = db.collection::<Document>("c");
    c.insert_many(vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}])
        .await
        .unwrap();
    let gte = |v: i32| {
        doc! {"operatorName": "$gte", "specifiedAs": {"a": {"$gte": 0}},
        "reason": "comparison failed", "consideredValue": v}
    };
    for (name, update) in [
        ("targeted", doc! {"q": {"_id": 1}, "u": {"$set": {"a": -1}}}),
        ("filtered", doc! {"q": {"a": 1}, "u": {"$set": {"a": -1}}}),
        (
            "multi",
            doc! {"q": {}, "u": {"$inc": {"a": -2}}, "multi": true},
        ),
        ("replacement", doc! {"q": {"_id": 1}, "u": {"a": -1}}),
        (
            "upsert",
            doc! {"q": {"_id": 9}, "u": {"$set": {"a": -1}}, "upsert": true},
        ),
    ] {
        let r = cmd(&db, doc! {"update": "c", "updates": [update]}).await;
        let errors = write_errors(&r);
        assert_eq!(errors.len(), 1, "{name}: {r}");
        assert_eq!(errors[0].get_i32("code").unwrap(), 121, "{name}: {r}");
        let info = errors[0].get_document("errInfo").unwrap();
        let want_id = if name == "upsert" { 9 } else { 1 };
        assert_eq!(
            info.get_i32("failingDocumentId").unwrap(),
            want_id,
            "{name}"
        );
        if name != "multi" {
            assert_doc(info.get_document("details").unwrap(), &gte(-1));
        }
    }
    assert_docs(
        &all(&c).await,
        &[doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}],
    );
    // findAndModify: a command error.
    let e = err(
        &db,
        doc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"a": -5}}},
    )
    .await;
    match &*e.kind {
        mongodb::error::ErrorKind::Command(ce) => {
            assert_eq!(ce.code, 121);
            assert_eq!(ce.code_name, "DocumentValidationFailure");
            assert_eq!(ce.message, "Document failed validation");
        }
        other => panic!("{other:?}"),
    }
    // The raw reply: {ok: 0, errmsg, code, codeName, errInfo, ...}.
    let mut raw = s.raw().await;
    let reply = raw
        .command(bson::rawdoc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"a": -5}}, "$db": "val"})
        .await;
    let keys: Vec<&str> = reply
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .take(5)
        .collect();
    assert_eq!(keys, ["ok", "errmsg", "code", "codeName", "errInfo"]);
    let info = Document::try_from(reply.get_document("errInfo").unwrap()).unwrap();
    assert_doc(&info, &doc! {"failingDocumentId": 2, "details": gte(-5)});
    // A valid change goes through every path.
    cmd(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": 5}}}]},
    )
    .await;
    assert_docs(
        &all(&c).await,
        &[doc! {"_id": 1, "a": 5}, doc! {"_id": 2, "a": 2}],
    );
}

/// `bypassDocumentValidation: true` on insert, update, findAndModify and aggregate `$out` /
/// `$merge` (jstests bypass_doc_validation.js); `false` validates.
#[tokio::test]
async fn bypass_document_validation() {
    let s = TestServer::start();
    let db = s.client().await.database("bypass");
    for validator in [
        doc! {"a": {"$exists": true}},
        doc! {"$jsonSchema": {"required": ["a"]}},
    ] {
        db.collection::<Document>("c").drop().await.unwrap();
        db.collection::<Document>("out").drop().await.unwrap();
        let c = db.collection::<Document>("c");
        c.insert_many(vec![doc! {"_id": 1}, doc! {"_id": 2}])
            .await
            .unwrap();
        cmd(&db, doc! {"collMod": "c", "validator": validator.clone()}).await;

        // insert
        let r = cmd(
            &db,
            doc! {"insert": "c", "documents": [{}, {"_id": 6}], "bypassDocumentValidation": false},
        )
        .await;
        assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
        let r = cmd(
            &db,
            doc! {"insert": "c", "documents": [{}, {"_id": 6}], "bypassDocumentValidation": true},
        )
        .await;
        assert_eq!(r.get_i32("n").unwrap(), 2);

        // update, operator and replacement
        for u in [doc! {"$set": {"update": 1}}, doc! {"update": 2}] {
            let r = cmd(
                &db,
                doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": u.clone()}], "bypassDocumentValidation": false},
            )
            .await;
            assert_eq!(
                write_errors(&r).first().map(|e| e.get_i32("code").unwrap()),
                Some(121),
                "{u} {r}"
            );
            let r = cmd(
                &db,
                doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": u}], "bypassDocumentValidation": true},
            )
            .await;
            assert!(write_errors(&r).is_empty(), "{r}");
        }

        // findAndModify
        let e = err(
            &db,
            doc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"fam": 1}}, "bypassDocumentValidation": false},
        )
        .await;
        assert_eq!(code_of(&e), 121);
        cmd(
            &db,
            doc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"fam": 1}}, "bypassDocumentValidation": true},
        )
        .await;
        assert_eq!(c.count_documents(doc! {"fam": 1}).await.unwrap(), 1);

        // aggregate $out and $merge into a validated collection
        create(&db, "out", doc! {"validator": validator.clone()}).await;
        let pipeline = vec![
            doc! {"$match": {"_id": 1}},
            doc! {"$project": {"aggregation": {"$add": [1]}}},
            doc! {"$out": "out"},
        ];
        let e = err(
            &db,
            doc! {"aggregate": "c", "pipeline": pipeline.clone(), "cursor": {}, "bypassDocumentValidation": false},
        )
        .await;
        assert_eq!(code_of(&e), 121);
        let out = db.collection::<Document>("out");
        assert_eq!(out.count_documents(doc! {}).await.unwrap(), 0);
        cmd(
            &db,
            doc! {"aggregate": "c", "pipeline": pipeline, "cursor": {}, "bypassDocumentValidation": true},
        )
        .await;
        assert_eq!(
            out.count_documents(doc! {"aggregation": 1}).await.unwrap(),
            1
        );
        // $out keeps the target's validator.
        let r = cmd(&db, doc! {"insert": "out", "documents": [{"_id": 50}]}).await;
        assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
        let merge = vec![
            doc! {"$match": {"_id": 2}},
            doc! {"$project": {"merged": {"$literal": true}}},
            doc! {"$merge": {"into": "out"}},
        ];
        let e = err(
            &db,
            doc! {"aggregate": "c", "pipeline": merge.clone(), "cursor": {}},
        )
        .await;
        assert_eq!(code_of(&e), 121);
        cmd(
            &db,
            doc! {"aggregate": "c", "pipeline": merge, "cursor": {}, "bypassDocumentValidation": true},
        )
        .await;
        assert_eq!(out.count_documents(doc! {"merged": true}).await.unwrap(), 1);
    }
}

/// Ordered batches stop at the first document that fails validation; unordered ones report
/// each failure and insert the rest.
#[tokio::test]
async fn ordered_and_unordered_batches() {
    let s = TestServer::start();
    let db = s.client().await.database("val");
    create(&db, "c", doc! {"validator": {"a": {"$type": "int"}}}).await;
    let docs = vec![
        doc! {"_id": 1, "a": 1},
        doc! {"_id": 2, "a": "x"},
        doc! {"_id": 3, "a": 3},
        doc! {"_id": 4},
        doc! {"_id": 5, "a": 5},
    ];
    let r = cmd(&db, doc! {"insert": "c", "documents": docs.clone()}).await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let errors = write_errors(&r);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].get_i32("index").unwrap(), 1);
    db.collection::<Document>("c")
        .delete_many(doc! {})
        .await
        .unwrap();
    let r = cmd(
        &db,
        doc! {"insert": "c", "documents": docs, "ordered": false},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 3);
    let errors = write_errors(&r);
    let indexes: Vec<i32> = errors.iter().map(|e| e.get_i32("index").unwrap()).collect();
    assert_eq!(indexes, [1, 3]);
    assert_doc(
        &errors[1].get_document("errInfo").unwrap().clone(),
        &doc! {"failingDocumentId": 4, "details": {"operatorName": "$type",
        "specifiedAs": {"a": {"$type": "int"}}, "reason": "field was missing"}},
    );
    // Update statements in an ordered batch stop at the first failure too.
    let r = cmd(
        &db,
        doc! {"update": "c", "updates": [
        {"q": {"_id": 1}, "u": {"$set": {"a": 10}}},
        {"q": {"_id": 3}, "u": {"$set": {"a": "no"}}},
        {"q": {"_id": 5}, "u": {"$set": {"a": 50}}}]},
    )
    .await;
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    assert_eq!(write_errors(&r)[0].get_i32("index").unwrap(), 1);
    let r = cmd(
        &db,
        doc! {"update": "c", "ordered": false, "updates": [
        {"q": {"_id": 1}, "u": {"$set": {"a": 11}}},
        {"q": {"_id": 3}, "u": {"$set": {"a": "no"}}},
        {"q": {"_id": 5}, "u": {"$set": {"a": 51}}}]},
    )
    .await;
    assert_eq!(r.get_i32("nModified").unwrap(), 2);
}

/// Inside a transaction writes are validated (the failure aborts the transaction) and
/// `bypassDocumentValidation` applies to the statement that sets it only.
#[tokio::test]
async fn transactions() {
    let s = TestServer::start();
    let client = s.client().await;
    let db = client.database("val");
    create(&db, "c", doc! {"validator": {"a": {"$gte": 0}}}).await;
    let c = db.collection::<Document>("c");
    let mut session = client.start_session().await.unwrap();
    session.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 1, "a": 1})
        .session(&mut session)
        .await
        .unwrap();
    let e = c
        .insert_one(doc! {"_id": 2, "a": -1})
        .session(&mut session)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), 121);
    assert_eq!(
        code_of(&session.commit_transaction().await.unwrap_err()),
        251
    );
    assert!(all(&c).await.is_empty());

    // bypass inside a transaction, then a later statement is validated again.
    session.start_transaction().await.unwrap();
    db.run_command(
        doc! {"insert": "c", "documents": [{"_id": 3, "a": -3}], "bypassDocumentValidation": true},
    )
    .session(&mut session)
    .await
    .unwrap();
    db.run_command(doc! {"update": "c", "updates": [{"q": {"_id": 3}, "u": {"$set": {"b": 1}}}]})
        .session(&mut session)
        .await
        .map(|r| assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121))
        .unwrap_or_else(|e| assert_eq!(code_of(&e), 121));
    session.abort_transaction().await.ok();
    session.start_transaction().await.unwrap();
    db.run_command(
        doc! {"insert": "c", "documents": [{"_id": 4, "a": -4}], "bypassDocumentValidation": true},
    )
    .session(&mut session)
    .await
    .unwrap();
    c.insert_one(doc! {"_id": 5, "a": 5})
        .session(&mut session)
        .await
        .unwrap();
    session.commit_transaction().await.unwrap();
    assert_docs(
        &all(&c).await,
        &[doc! {"_id": 4, "a": -4}, doc! {"_id": 5, "a": 5}],
    );
}

/// `collMod` sets, changes and removes validators (an empty validator removes it); options
/// appear in `listCollections` in MongoDB's order; bad options are refused with MongoDB's
/// codes.
#[tokio::test]
async fn coll_mod_and_list_collections() {
    let s = TestServer::start();
    let db = s.client().await.database("val");
    create(
        &db,
        "c",
        doc! {"validationAction": "warn", "validator": {"a": 1}, "validationLevel": "moderate"},
    )
    .await;
    let options = |r: &Document| {
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()[0]
            .as_document()
            .unwrap()
            .get_document("options")
            .unwrap()
            .clone()
    };
    let r = cmd(&db, doc! {"listCollections": 1, "filter": {"name": "c"}}).await;
    assert_doc(
        &options(&r),
        &doc! {"validator": {"a": 1}, "validationLevel": "moderate", "validationAction": "warn"},
    );
    // Creating it again with the same options in another order succeeds.
    cmd(
        &db,
        doc! {"create": "c", "validator": {"a": 1}, "validationLevel": "moderate", "validationAction": "warn"},
    )
    .await;
    let r = cmd(
        &db,
        doc! {"collMod": "c", "validator": {"b": {"$exists": true}}},
    )
    .await;
    assert_doc(&r, &doc! {"ok": 1.0});
    let r = cmd(&db, doc! {"listCollections": 1, "filter": {"name": "c"}}).await;
    assert_doc(
        &options(&r),
        &doc! {"validator": {"b": {"$exists": true}}, "validationLevel": "moderate", "validationAction": "warn"},
    );
    cmd(
        &db,
        doc! {"collMod": "c", "validator": {}, "validationAction": "error"},
    )
    .await;
    let r = cmd(&db, doc! {"listCollections": 1, "filter": {"name": "c"}}).await;
    assert_doc(
        &options(&r),
        &doc! {"validationLevel": "moderate", "validationAction": "error"},
    );
    cmd(&db, doc! {"insert": "c", "documents": [{"x": 1}]}).await;
    // An empty validator on create is not stored.
    create(&db, "empty", doc! {"validator": {}}).await;
    let r = cmd(
        &db,
        doc! {"listCollections": 1, "filter": {"name": "empty"}},
    )
    .await;
    assert_doc(&options(&r), &doc! {});

    let bad = [
        (doc! {"collMod": "c", "validator": 7}, 14),
        (doc! {"collMod": "c", "validationLevel": "sometimes"}, 2),
        (doc! {"collMod": "c", "validationAction": 1}, 14),
        (
            doc! {"collMod": "c", "validator": {"$text": {"$search": "bob"}}},
            2,
        ),
        (
            doc! {"collMod": "c", "validator": {"$where": "this.a == this.b"}},
            2,
        ),
        (
            doc! {"collMod": "c", "validator": {"a": {"$near": [0, 0]}}},
            5626500,
        ),
        (
            doc! {"collMod": "c", "validator": {"$expr": {"$function": {"body": "function(age) { return age >= 21; }", "args": ["$age"], "lang": "js"}}}},
            4660800,
        ),
        (
            doc! {"collMod": "c", "validator": {"$expr": {"$eq": ["$a", "$$unbound"]}}},
            17276,
        ),
        (
            doc! {"collMod": "c", "validator": {"$jsonSchema": {"invalid": 7}}},
            9,
        ),
        (doc! {"collMod": "nope", "validator": {"a": 1}}, 26),
        (doc! {"create": "d", "validator": 7}, 14),
        (doc! {"create": "d", "validator": "assert"}, 14),
        (doc! {"create": "d", "validationLevel": "sometimes"}, 2),
    ];
    for (command, code) in bad {
        let e = err(&db, command.clone()).await;
        assert_eq!(code_of(&e), code, "{command}: {e}");
    }
    let e = err(&db, doc! {"collMod": "c", "validator": {"$where": "1"}}).await;
    assert_eq!(
        command_error(&e).1,
        "Parsing of collection validator failed :: caused by :: $where is not allowed in this context"
    );
    // Refused validators leave the options as they were.
    let r = cmd(&db, doc! {"listCollections": 1, "filter": {"name": "c"}}).await;
    assert_doc(
        &options(&r),
        &doc! {"validationLevel": "moderate", "validationAction": "error"},
    );
}

/// Validators are refused on system collections and in `admin`, `local` and `config` (72);
/// `collMod` records a `modify` change event.
#[tokio::test]
async fn restricted_namespaces_and_change_events() {
    let s = TestServer::start();
    let client = s.client().await;
    for db_name in ["admin", "config", "local"] {
        let e = err(
            &client.database(db_name),
            doc! {"create": "v", "validator": {"a": {"$exists": true}}},
        )
        .await;
        let (code, msg) = command_error(&e);
        assert_eq!(code, 72);
        assert!(
            msg.starts_with(&format!(
                "Document validators are not allowed on collection {db_name}.v with UUID "
            )) && msg.ends_with(&format!(" in the {db_name} internal database")),
            "{msg}"
        );
    }
    let db = client.database("val");
    let e = err(
        &db,
        doc! {"create": "system.js", "validator": {"a": {"$exists": true}}},
    )
    .await;
    let (code, msg) = command_error(&e);
    assert_eq!(code, 72);
    assert!(
        msg.starts_with(
            "Document validators not allowed on system collection val.system.js with UUID "
        ),
        "{msg}"
    );

    // config.settings refuses any validation option, before other checks.
    for command in [
        doc! {"create": "settings", "validationLevel": "strict"},
        doc! {"collMod": "settings", "validator": {"a": 1}},
    ] {
        let e = err(&client.database("config"), command).await;
        assert_eq!(
            command_error(&e),
            (
                72,
                "Document validators not allowed on system collection config.settings".into()
            )
        );
    }
    // A collMod whose index part fails changes nothing.
    create(&db, "both", doc! {}).await;
    let e = err(
        &db,
        doc! {"collMod": "both", "validator": {"a": 1}, "index": {"name": "nope", "hidden": true}},
    )
    .await;
    assert_eq!(code_of(&e), 27);
    let r = cmd(&db, doc! {"listCollections": 1, "filter": {"name": "both"}}).await;
    let first = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_doc(first.get_document("options").unwrap(), &doc! {});

    // collMod shows up as a `modify` event with the options changed.
    create(&db, "watched", doc! {}).await;
    let mut stream = db
        .collection::<Document>("watched")
        .watch()
        .show_expanded_events(true)
        .await
        .unwrap()
        .with_type::<Document>();
    cmd(
        &db,
        doc! {"collMod": "watched", "validator": {"a": 1}, "validationLevel": "moderate"},
    )
    .await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let event = loop {
        assert!(tokio::time::Instant::now() < deadline, "no modify event");
        if let Some(e) = stream.next_if_any().await.unwrap() {
            break e;
        }
    };
    assert_eq!(event.get_str("operationType").unwrap(), "modify");
    assert_eq!(
        bytes(event.get_document("operationDescription").unwrap()),
        bytes(&doc! {"validator": {"a": 1}, "validationLevel": "moderate"})
    );
}

/// Capped collections take validators; `convertToCapped` keeps the collection's validator
/// (MongoDB copies its options) and copies documents without validating them.
#[tokio::test]
async fn capped_collections_keep_validators() {
    let s = TestServer::start();
    let db = s.client().await.database("val");
    let list_options = |name: &'static str| {
        let db = db.clone();
        async move {
            let r = cmd(&db, doc! {"listCollections": 1, "filter": {"name": name}}).await;
            r.get_document("cursor")
                .unwrap()
                .get_array("firstBatch")
                .unwrap()[0]
                .as_document()
                .unwrap()
                .get_document("options")
                .unwrap()
                .clone()
        }
    };
    create(
        &db,
        "capped",
        doc! {"validator": {"a": {"$type": "int"}}, "capped": true, "size": 4096},
    )
    .await;
    assert_doc(
        &list_options("capped").await,
        &doc! {"capped": true, "size": 4096, "validator": {"a": {"$type": "int"}}},
    );
    let r = cmd(
        &db,
        doc! {"insert": "capped", "documents": [{"_id": 1, "a": 1}, {"_id": 2, "a": "x"}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);

    // An invalid document from before the validator survives the conversion.
    let c = db.collection::<Document>("conv");
    c.insert_many(vec![doc! {"_id": 1, "a": "old"}, doc! {"_id": 2, "a": 2}])
        .await
        .unwrap();
    cmd(
        &db,
        doc! {"collMod": "conv", "validator": {"a": {"$type": "int"}}, "validationLevel": "moderate"},
    )
    .await;
    cmd(&db, doc! {"convertToCapped": "conv", "size": 10000}).await;
    assert_doc(
        &list_options("conv").await,
        &doc! {"capped": true, "size": 10240, "validator": {"a": {"$type": "int"}},
        "validationLevel": "moderate"},
    );
    assert_docs(
        &all(&c).await,
        &[doc! {"_id": 1, "a": "old"}, doc! {"_id": 2, "a": 2}],
    );
    let r = cmd(&db, doc! {"insert": "conv", "documents": [{"_id": 3}]}).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
}

fn re(pattern: &str) -> Bson {
    Bson::RegularExpression(bson::Regex {
        pattern: pattern.try_into().unwrap(),
        options: "".try_into().unwrap(),
    })
}
