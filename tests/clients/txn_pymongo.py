"""Sessions, transactions, retryable writes and snapshot reads through PyMongo.

    python txn_pymongo.py mongodb://127.0.0.1:PORT/

Prints one `ok`/`FAIL` line per check (counted by tests/clients/run.sh); exits 1 when a check
failed. Uses the database cairn_txn only.
"""

from __future__ import annotations

import random
import sys
import threading
import time

from checks import check, expect, finish
from pymongo import MongoClient, ReadPreference
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

URI = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/"




client = MongoClient(URI, serverSelectionTimeoutMS=10_000)
db = client.cairn_txn
client.drop_database("cairn_txn")


def abort_leaves_nothing():
    # The reproduction: a new user's first transaction.
    coll = db.defect
    with client.start_session() as s:
        s.start_transaction()
        coll.insert_one({"_id": 1, "x": "in txn"}, session=s)
        expect(coll.find_one({"_id": 1}) is None, "visible to others before commit")
        expect(coll.find_one({"_id": 1}, session=s) is not None, "not visible to itself")
        s.abort_transaction()
    expect(coll.find_one({"_id": 1}) is None, "the aborted insert is there")
    expect("defect" not in db.list_collection_names(), "the implicitly created collection remains")


def commit_makes_visible():
    coll = db.commit
    with client.start_session() as s:
        with s.start_transaction():
            coll.insert_one({"_id": 1}, session=s)
            coll.update_one({"_id": 1}, {"$set": {"a": 1}}, session=s)
            expect(coll.find_one({"_id": 1}) is None, "visible before commit")
    expect(coll.find_one({"_id": 1}) == {"_id": 1, "a": 1}, "not committed")


def with_transaction_moves_a_task():
    # Moving a task between two people's lists in two collections, with_transaction.
    todo, done = db.todo, db.done
    todo.insert_one({"_id": "bob", "tasks": ["a", "b", "c"]})
    done.insert_one({"_id": "bob", "tasks": []})

    def move(s, task):
        todo.update_one({"_id": "bob"}, {"$pullAll": {"tasks": [task]}}, session=s)
        done.update_one({"_id": "bob"}, {"$addToSet": {"tasks": task}}, session=s)

    errors = []

    def worker(task):
        try:
            with client.start_session() as s:
                s.with_transaction(lambda s: move(s, task))
        except PyMongoError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in ["a", "b", "c"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect(not errors, f"errors: {errors}")
    expect(todo.find_one({"_id": "bob"})["tasks"] == [], "tasks left")
    expect(sorted(done.find_one({"_id": "bob"})["tasks"]) == ["a", "b", "c"], "not moved once")


def bank_invariant():
    accounts = db.accounts
    accounts.insert_many([{"_id": i, "balance": 100} for i in range(20)])
    stop = time.time() + 3
    committed = [0]
    lock = threading.Lock()
    errors = []

    def transfer(s, a, b, amount):
        src = accounts.find_one({"_id": a}, session=s)
        if src["balance"] < amount:
            return False
        accounts.update_one({"_id": a}, {"$inc": {"balance": -amount}}, session=s)
        accounts.update_one({"_id": b}, {"$inc": {"balance": amount}}, session=s)
        return True

    def worker(seed):
        rng = random.Random(seed)
        try:
            with client.start_session() as s:
                while time.time() < stop:
                    a, b = rng.sample(range(20), 2)
                    if s.with_transaction(lambda s: transfer(s, a, b, rng.randint(1, 30))):
                        with lock:
                            committed[0] += 1
        except PyMongoError as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect(not errors, f"errors: {errors}")
    total = sum(d["balance"] for d in accounts.find())
    expect(total == 2000, f"total is {total}")
    expect(all(d["balance"] >= 0 for d in accounts.find()), "negative balance (write skew)")
    return f"{committed[0]} transfers"


def error_labels_and_codes():
    coll = db.codes
    with client.start_session() as s:
        s.start_transaction()
        coll.insert_one({"_id": 1}, session=s)
        try:
            db.command("count", "codes", session=s)
            raise AssertionError("count in a transaction succeeded")
        except OperationFailure as e:
            expect(e.code == 263, f"count: {e.code}")
        s.commit_transaction()
    with client.start_session() as s:
        s.start_transaction()
        coll.insert_one({"_id": 2}, session=s)
        try:
            coll.insert_one({"_id": 1}, session=s)
            raise AssertionError("duplicate accepted")
        except OperationFailure as e:
            expect(e.code == 11000, f"dup: {e.code}")
        try:
            s.commit_transaction()
            raise AssertionError("commit of an aborted transaction succeeded")
        except OperationFailure as e:
            expect(e.code == 251, f"commit: {e.code}")
            expect(e.has_error_label("TransientTransactionError"), "no TransientTransactionError")
    expect(coll.find_one({"_id": 2}) is None, "the failed transaction left a document")


def retryable_writes():
    coll = db.retry
    coll.insert_one({"_id": 1, "n": 0})
    for _ in range(5):
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    expect(coll.find_one({"_id": 1})["n"] == 5, "wrong count")
    doc = coll.find_one_and_update({"_id": 1}, {"$inc": {"n": 1}}, return_document=True)
    expect(doc["n"] == 6, f"find_one_and_update: {doc}")
    # (Replaying one txnNumber by hand is tested through raw commands in
    # compat-tests/tests/retryable.rs: PyMongo puts its own session on every command.)


def snapshot_session():
    coll = db.snap
    coll.insert_many([{"_id": i} for i in range(3)])
    with client.start_session(snapshot=True) as s:
        first = list(coll.find({}, session=s))
        coll.insert_one({"_id": 99})
        second = list(coll.find({}, session=s))
        values = coll.distinct("_id", session=s)
    expect(len(first) == 3 and first == second, f"{first} vs {second}")
    expect(sorted(values) == [0, 1, 2], f"distinct: {values}")
    expect(coll.estimated_document_count() == 4, "the present is not visible")


def snapshot_transaction_reads():
    coll = db.snaptxn
    coll.insert_many([{"_id": i, "v": 1} for i in range(3)])
    with client.start_session() as s:
        s.start_transaction(read_concern=ReadConcern("snapshot"),
                            write_concern=WriteConcern("majority"),
                            read_preference=ReadPreference.PRIMARY)
        before = [d["v"] for d in coll.find({}, session=s)]
        coll.update_many({}, {"$set": {"v": 2}})  # outside the transaction
        after = [d["v"] for d in coll.find({}, session=s)]
        s.commit_transaction()
    expect(before == after == [1, 1, 1], f"{before} {after}")


def causal_session():
    coll = db.causal
    with client.start_session(causal_consistency=True) as s:
        coll.insert_one({"_id": 1}, session=s)
        expect(coll.find_one({"_id": 1}, session=s) == {"_id": 1}, "own write not read")
        expect(s.operation_time is not None, "no operationTime")
        expect(s.cluster_time is not None, "no $clusterTime")


check("abort_transaction leaves no document and no collection (the defect)", abort_leaves_nothing)
check("a committed transaction becomes visible at commit", commit_makes_visible)
check("with_transaction moves tasks exactly once under conflicts", with_transaction_moves_a_task)
check("bank transfers in with_transaction keep the total", bank_invariant)
check("error codes and TransientTransactionError labels in transactions", error_labels_and_codes)
check("retryable writes apply once", retryable_writes)
check("snapshot sessions read one point in time", snapshot_session)
check("snapshot transactions do not see later writes", snapshot_transaction_reads)
check("causally consistent sessions track operationTime", causal_session)

finish("txn")
