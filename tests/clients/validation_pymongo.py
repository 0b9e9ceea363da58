"""Document validation through PyMongo: the manual's $jsonSchema example ("Specify JSON Schema
Validation"), WriteError 121 with errInfo details, bypass_document_validation=True on every
helper that has it, collMod, and validationAction "warn".

    python validation_pymongo.py mongodb://127.0.0.1:PORT/

Prints one `ok`/`FAIL` line per check (counted by tests/clients/run.sh); exits 1 when a check
failed. Uses the database cairn_validation only.
"""

from __future__ import annotations

import sys

from checks import check, expect, finish
from pymongo import InsertOne, MongoClient, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

URI = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/"




client = MongoClient(URI, serverSelectionTimeoutMS=10_000)
db = client.cairn_validation
client.drop_database("cairn_validation")

# The manual's students schema.
SCHEMA = {
    "$jsonSchema": {
        "bsonType": "object",
        "title": "Student Object Validation",
        "required": ["address", "major", "name", "year"],
        "properties": {
            "name": {"bsonType": "string", "description": "'name' must be a string and is required"},
            "year": {
                "bsonType": "int",
                "minimum": 2017,
                "maximum": 3017,
                "description": "'year' must be an integer in [ 2017, 3017 ] and is required",
            },
            "gpa": {"bsonType": ["double"], "description": "'gpa' must be a double if the field exists"},
        },
    }
}

ALICE = {
    "name": "Alice",
    "year": 2019,
    "major": "History",
    "gpa": 3,
    "address": {"city": "NYC", "street": "33rd Street"},
}

# The errInfo.details the manual shows for ALICE.
DETAILS = {
    "operatorName": "$jsonSchema",
    "title": "Student Object Validation",
    "schemaRulesNotSatisfied": [
        {
            "operatorName": "properties",
            "propertiesNotSatisfied": [
                {
                    "propertyName": "gpa",
                    "description": "'gpa' must be a double if the field exists",
                    "details": [
                        {
                            "operatorName": "bsonType",
                            "specifiedAs": {"bsonType": ["double"]},
                            "reason": "type did not match",
                            "consideredValue": 3,
                            "consideredType": "int",
                        }
                    ],
                }
            ],
        }
    ],
}


def create_with_schema():
    db.create_collection("students", validator=SCHEMA)
    info = next(db.list_collections(filter={"name": "students"}))
    expect(info["options"] == {"validator": SCHEMA}, info["options"])


def insert_fails_with_err_info():
    try:
        db.students.insert_one(dict(ALICE, _id=1))
    except WriteError as e:
        expect(e.code == 121, e.code)
        expect(e.details["errmsg"] == "Document failed validation", e.details)
        expect(list(e.details) == ["index", "code", "errmsg", "errInfo"], list(e.details))
        info = e.details["errInfo"]
        expect(info["failingDocumentId"] == 1, info)
        expect(info["details"] == DETAILS, info["details"])
        return "WriteError 121"
    raise AssertionError("the insert succeeded")


def bulk_reports_each_failure():
    try:
        db.students.bulk_write(
            [InsertOne(dict(ALICE, _id=2)), InsertOne(dict(ALICE, _id=3, gpa=3.0)), InsertOne({"_id": 4})],
            ordered=False,
        )
    except BulkWriteError as e:
        errors = e.details["writeErrors"]
        expect([(w["index"], w["code"]) for w in errors] == [(0, 121), (2, 121)], errors)
        expect(e.details["nInserted"] == 1, e.details)
        missing = errors[1]["errInfo"]["details"]["schemaRulesNotSatisfied"][0]
        expect(missing["missingProperties"] == ["address", "major", "name", "year"], missing)
        return
    raise AssertionError("the bulk write succeeded")


def bypass_on_every_helper():
    s = db.students
    s.insert_one(dict(ALICE, _id=10), bypass_document_validation=True)
    s.insert_many([{"_id": 11}, {"_id": 12}], bypass_document_validation=True)
    s.update_one({"_id": 3}, {"$set": {"year": "x"}}, bypass_document_validation=True)
    s.replace_one({"_id": 11}, {"bad": True}, bypass_document_validation=True)
    s.bulk_write([UpdateOne({"_id": 12}, {"$set": {"b": 1}})], bypass_document_validation=True)
    # find_one_and_update passes extra keyword arguments into the command.
    doc = s.find_one_and_update(
        {"_id": 10}, {"$set": {"gpa": 2}}, return_document=True, bypassDocumentValidation=True
    )
    expect(doc["gpa"] == 2, doc)
    ids = sorted(d["_id"] for d in s.find({}, {"_id": 1}))
    expect(ids == [3, 10, 11, 12], ids)
    # Without bypass the same changes are refused.
    try:
        s.update_one({"_id": 3}, {"$set": {"year": 1}})
    except WriteError as e:
        expect(e.code == 121, e.code)
    else:
        raise AssertionError("update_one without bypass succeeded")
    try:
        s.find_one_and_update({"_id": 3}, {"$set": {"gpa": 1}})
    except OperationFailure as e:
        expect(e.code == 121 and e.details["codeName"] == "DocumentValidationFailure", e.details)
        expect(e.details["errInfo"]["failingDocumentId"] == 3, e.details)
    else:
        raise AssertionError("find_one_and_update without bypass succeeded")


def aggregate_out_bypass():
    db.create_collection("report", validator={"total": {"$gte": 0}})
    pipeline = [{"$project": {"total": {"$literal": -1}}}, {"$out": "report"}]
    try:
        list(db.students.aggregate(pipeline))
    except OperationFailure as e:
        expect(e.code == 121, e.details)
    else:
        raise AssertionError("$out into a validated collection succeeded")
    list(db.students.aggregate(pipeline, bypassDocumentValidation=True))
    n = db.report.count_documents({"total": -1})
    expect(n == 4, n)


def coll_mod_warn():
    db.command("collMod", "students", validationAction="warn", validationLevel="moderate")
    info = next(db.list_collections(filter={"name": "students"}))
    expect(
        info["options"] == {"validator": SCHEMA, "validationLevel": "moderate", "validationAction": "warn"},
        info["options"],
    )
    db.students.insert_one(dict(ALICE, _id=20))
    expect(db.students.count_documents({"_id": 20}) == 1, "warn let the insert through")
    log = client.admin.command("getLog", "global")["log"]
    expect(any('"id":20294' in line and "cairn_validation.students" in line for line in log), "no 20294 log line")


def restrictions():
    for validator, code in [({"$where": "true"}, 2), ({"$text": {"$search": "x"}}, 2)]:
        try:
            db.command("collMod", "students", validator=validator)
        except OperationFailure as e:
            expect(e.code == code, (validator, e.code, str(e)))
            expect("Parsing of collection validator failed" in str(e), str(e))
        else:
            raise AssertionError(f"{validator} was accepted")
    try:
        client.admin.create_collection("v", validator={"a": 1})
    except OperationFailure as e:
        expect(e.code == 72, e.code)
    else:
        raise AssertionError("a validator in admin was accepted")


check("create_collection with the manual's $jsonSchema; list_collections shows it", create_with_schema)
check("insert_one of an invalid document: WriteError 121 with the manual's errInfo", insert_fails_with_err_info)
check("unordered bulk_write: a write error per invalid document, the valid one inserted", bulk_reports_each_failure)
check("bypass_document_validation=True on insert/update/replace/bulk, bypassDocumentValidation on find_one_and_update", bypass_on_every_helper)
check("aggregate $out: 121 into a validated collection, bypassDocumentValidation writes", aggregate_out_bypass)
check("collMod validationAction warn: the write succeeds and log id 20294 is written", coll_mod_warn)
check("refused validators ($where, $text, admin database)", restrictions)

client.drop_database("cairn_validation")
finish("# validation")
