"""Change streams through PyMongo's watch(), and capped collections with tailable cursors.

    python streams_pymongo.py mongodb://127.0.0.1:PORT/

Prints one `ok`/`FAIL` line per check (counted by tests/clients/run.sh); exits 1 when a check
failed. Uses the database cairn_streams only.
"""

from __future__ import annotations

import sys
import threading
import time

from checks import check, expect, finish
from pymongo import CursorType, MongoClient
from pymongo.errors import OperationFailure

URI = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/"




client = MongoClient(URI, serverSelectionTimeoutMS=10_000)
db = client.cairn_streams
client.drop_database("cairn_streams")


def next_change(stream, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        change = stream.try_next()
        if change is not None:
            return change
    raise AssertionError("no change within the timeout")


def crud_events():
    coll = db.crud
    with coll.watch(full_document="updateLookup") as stream:
        coll.insert_one({"_id": 1, "a": {"b": 1}})
        coll.update_one({"_id": 1}, {"$set": {"a.b": 2}})
        coll.delete_one({"_id": 1})
        ins = next_change(stream)
        upd = next_change(stream)
        dele = next_change(stream)
    expect(ins["operationType"] == "insert" and ins["fullDocument"] == {"_id": 1, "a": {"b": 1}}, ins)
    expect(list(ins)[:4] == ["_id", "operationType", "clusterTime", "wallTime"], list(ins))
    expect(upd["updateDescription"]["updatedFields"] == {"a.b": 2}, upd)
    expect(dele["operationType"] == "delete" and dele["documentKey"] == {"_id": 1}, dele)


def resume_with_token():
    coll = db.resume
    with coll.watch() as stream:
        coll.insert_one({"_id": 1})
        first = next_change(stream)
        coll.insert_one({"_id": 2})
        next_change(stream)
        token = stream.resume_token
    with coll.watch(resume_after=first["_id"]) as again:
        expect(next_change(again)["documentKey"] == {"_id": 2}, "resume_after")
    expect(token is not None and "_data" in token, token)


def filtered_pipeline_and_a_burst():
    coll = db.burst
    seen = []
    with coll.watch([{"$match": {"fullDocument.even": True}}]) as stream:
        def writer():
            for i in range(200):
                coll.insert_one({"_id": i, "even": i % 2 == 0})
        t = threading.Thread(target=writer)
        t.start()
        while len(seen) < 100:
            c = next_change(stream)
            seen.append(c["documentKey"]["_id"])
        t.join()
    expect(seen == list(range(0, 200, 2)), f"got {seen[:10]}…")


def transaction_events_after_commit():
    coll = db.txn
    coll.insert_one({"_id": 0})
    with coll.watch() as stream:
        with client.start_session() as s:
            with s.start_transaction():
                coll.insert_one({"_id": 1}, session=s)
                coll.insert_one({"_id": 2}, session=s)
        a, b = next_change(stream), next_change(stream)
    expect(a["clusterTime"] == b["clusterTime"], "one commit time")
    expect("lsid" in a and "txnNumber" in a, a)


def invalidate_on_drop():
    coll = db.gone
    coll.insert_one({"_id": 1})
    with coll.watch() as stream:
        coll.drop()
        kinds = [next_change(stream)["operationType"], next_change(stream)["operationType"]]
        expect(kinds == ["drop", "invalidate"], kinds)
        expect(not stream.alive, "stream still alive after invalidate")


def errors():
    try:
        db.errs.watch([{"$changeStream": {}}, {"$group": {"_id": 1}}]).try_next()
    except OperationFailure as e:
        expect(e.code in (20, 40602), e.code)
    try:
        with db.errs.watch(resume_after={"_data": "zz"}) as s:
            s.try_next()
        raise AssertionError("a bad token was accepted")
    except OperationFailure as e:
        expect(e.code == 9, e.code)


def tailable_queue():
    db.drop_collection("queue")
    db.create_collection("queue", capped=True, size=64 * 1024, max=1000)
    queue = db.queue
    queue.insert_one({"_id": -1})
    cursor = queue.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(200)

    def produce(p):
        for i in range(25):
            queue.insert_one({"_id": p * 100 + i, "p": p, "i": i})

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    seen = []
    deadline = time.time() + 30
    while len(seen) < 101 and time.time() < deadline and cursor.alive:
        try:
            seen.append(cursor.next())
        except StopIteration:
            pass
    for t in threads:
        t.join()
    expect(len(seen) == 101, f"saw {len(seen)} of 101")
    for p in range(4):
        order = [d["i"] for d in seen if d.get("p") == p]
        expect(order == list(range(25)), f"producer {p}: {order}")
    natural = list(queue.find().sort("$natural", 1))
    expect(natural == seen, "tailed order differs from natural order")
    stats = db.command("collStats", "queue")
    expect(stats["capped"] is True and stats["max"] == 1000, stats)
    return "4 producers x 25"


def capped_eviction():
    db.drop_collection("ring")
    db.create_collection("ring", capped=True, size=4096, max=5)
    db.ring.insert_many([{"_id": i} for i in range(12)])
    ids = [d["_id"] for d in db.ring.find()]
    expect(ids == [7, 8, 9, 10, 11], ids)
    back = [d["_id"] for d in db.ring.find().sort("$natural", -1)]
    expect(back == [11, 10, 9, 8, 7], back)


check("watch(): insert, update (updateLookup), delete events", crud_events)
check("resume_after a token", resume_with_token)
check("a $match pipeline over a burst of 200 inserts misses nothing", filtered_pipeline_and_a_burst)
check("a transaction's events arrive together after commit", transaction_events_after_commit)
check("drop invalidates a collection stream", invalidate_on_drop)
check("errors", errors)
check("capped collection keeps the newest in insertion order", capped_eviction)
check("tailable awaitData cursor follows 4 producers", tailable_queue)

finish("streams")
