"""PyMongo against a Cairn started with test commands: fail points and operator tools.

    python ops_pymongo.py /path/to/cairn WORKDIR

Starts its own Cairn (`--enable-test-commands`, logs in WORKDIR/server.log) and checks, through
PyMongo's own retry machinery and command monitoring:
- fail points: `failCommand` with `errorLabels: ["RetryableWriteError"]` and with
  `closeConnection` makes PyMongo retry a write once (two `insert` attempts, one document);
  `closeConnection` and a retryable code make it retry a read; `errorLabels: []` suppresses
  labels; `blockConnection` delays a command and `maxTimeMS` cuts the delay short;
  `commitTransaction` failing once is retried by `with_transaction`;
- operations: `currentOp` lists a sleeping command with its appName; `killOp` interrupts it;
- the profiler: `profile` levels, `system.profile` entries read back with `find`, and
  MongoEngine's `query_counter` counting an application's queries (it counts with
  `count_documents`, i.e. `aggregate`; reported as skipped while the server has no
  `aggregate`).

Prints one `ok`/`FAIL` line per check and a closing `ops: N passed, N failed` line; exits 1 when a
check failed. The server is always stopped on exit. Started by tests/clients/run.sh.
"""

from __future__ import annotations

import atexit
import os
import re
import subprocess
import sys
import threading
import time

from checks import check, expect, failures, finish
from pymongo import MongoClient, monitoring
from pymongo.errors import ExecutionTimeout, OperationFailure

if len(sys.argv) != 3:
    sys.exit(__doc__)
BIN, WORKDIR = sys.argv[1], sys.argv[2]
TIMEOUT_MS = 10_000




# --- the server -------------------------------------------------------------------------------

PORT_LINE = re.compile(r'"msg":"Waiting for connections".*"port":(\d+)')
LOG = os.path.join(WORKDIR, "server.log")
os.makedirs(os.path.join(WORKDIR, "data"), exist_ok=True)
with open(LOG, "wb") as log:
    proc = subprocess.Popen(
        [BIN, "--port", "0", "--log-format", "json", "--data-dir", os.path.join(WORKDIR, "data"),
         "--enable-test-commands"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )


def stop():
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


atexit.register(stop)
t0 = time.monotonic()
port = None
while port is None:
    with open(LOG, encoding="utf-8", errors="replace") as f:
        m = PORT_LINE.search(f.read())
    if m:
        port = int(m.group(1))
    elif proc.poll() is not None or time.monotonic() - t0 > 30:
        sys.exit(f"FAIL - the server did not start (status {proc.poll()})")
    else:
        time.sleep(0.05)
URI = f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS={TIMEOUT_MS}"


class Listener(monitoring.CommandListener):
    def __init__(self):
        self.names = []

    def started(self, event):
        self.names.append(event.command_name)

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


listener = Listener()
client = MongoClient(URI, event_listeners=[listener])
admin = client.admin
db = client.cairn_ops


def fail_point(**kwargs):
    return admin.command("configureFailPoint", kwargs.pop("name", "failCommand"), **kwargs)


def attempts(name, fn):
    """Runs fn and returns how many `name` commands PyMongo sent meanwhile."""
    before = listener.names.count(name)
    fn()
    return listener.names.count(name) - before


# --- fail points ------------------------------------------------------------------------------


def retryable_write_label():
    db.rw.drop()
    # HostUnreachable: retryable, and not a state change that would make PyMongo mark the
    # server unknown and wait for its monitor first.
    fail_point(mode={"times": 1}, data={"failCommands": ["insert"], "errorCode": 6,
                                        "errorLabels": ["RetryableWriteError"]})
    n = attempts("insert", lambda: db.rw.insert_one({"_id": 1}))
    expect(n == 2, f"{n} insert attempts")
    expect(list(db.rw.find()) == [{"_id": 1}], "one document")
    return "2 attempts"


def retryable_write_closed_connection():
    fail_point(mode={"times": 1}, data={"failCommands": ["insert"], "closeConnection": True})
    n = attempts("insert", lambda: db.rw.insert_one({"_id": 2}))
    expect(n == 2, f"{n} insert attempts")
    expect(len(list(db.rw.find())) == 2, "two documents")
    return "2 attempts"


def no_label_no_retry():
    fail_point(mode={"times": 1}, data={"failCommands": ["insert"], "errorCode": 6})
    n = 0
    try:
        n = attempts("insert", lambda: db.rw.insert_one({"_id": 3}))
    except OperationFailure as e:
        expect(e.code == 6, f"{e.details}")
        expect(not e.has_error_label("RetryableWriteError"), "no label from a router")
    else:
        raise AssertionError(f"no error ({n} attempts)")


def retryable_read():
    for data in ({"failCommands": ["find"], "closeConnection": True},
                 {"failCommands": ["find"], "errorCode": 6}):
        fail_point(mode={"times": 1}, data=data)
        n = attempts("find", lambda: list(db.rw.find()))
        expect(n == 2, f"{data}: {n} find attempts")


def labels_suppressed():
    fail_point(mode={"times": 1}, data={"failCommands": ["ping"], "errorCode": 112,
                                        "errorLabels": []})
    try:
        db.command("ping")
    except OperationFailure as e:
        expect(e.code == 112, f"code {e.code}")
        expect("errorLabels" not in e.details, f"{e.details}")
    else:
        raise AssertionError("no error")


def block_connection():
    fail_point(mode={"times": 1}, data={"failCommands": ["ping"], "blockConnection": True,
                                        "blockTimeMS": 300})
    t = time.monotonic()
    db.command("ping")
    took = time.monotonic() - t
    expect(took >= 0.3, f"took {took:.3f}s")
    fail_point(mode={"times": 1}, data={"failCommands": ["ping"], "blockConnection": True,
                                        "blockTimeMS": 5000})
    t = time.monotonic()
    try:
        db.command("ping", maxTimeMS=100)
    except ExecutionTimeout:
        pass
    else:
        raise AssertionError("no timeout")
    took = time.monotonic() - t
    expect(took < 2, f"took {took:.3f}s")
    return f"{took:.2f}s"


def commit_retry():
    db.txn.drop()
    db.create_collection("txn")
    fail_point(mode={"times": 1}, data={"failCommands": ["commitTransaction"], "errorCode": 6,
                                        "errorLabels": ["RetryableWriteError"]})
    with client.start_session() as s:
        n = attempts("commitTransaction",
                     lambda: s.with_transaction(lambda s: db.txn.insert_one({"_id": 1}, session=s)))
    expect(n == 2, f"{n} commit attempts")
    expect(list(db.txn.find()) == [{"_id": 1}], "committed once")


def wait_for_fail_point():
    count = fail_point(mode={"times": 1}, data={"failCommands": ["insert"],
                                                 "blockConnection": True, "blockTimeMS": 400})["count"]
    writer = threading.Thread(target=lambda: db.w.insert_one({"x": 1}))
    writer.start()
    admin.command("waitForFailPoint", "failCommand", timesEntered=count + 1, maxTimeMS=10_000)
    writer.join()
    expect(db.w.find_one({"x": 1}) is not None, "the blocked insert finished")


check("fail points: a RetryableWriteError label makes PyMongo retry the insert", retryable_write_label)
check("fail points: closeConnection makes PyMongo retry the insert", retryable_write_closed_connection)
check("fail points: without the label the error reaches the application", no_label_no_retry)
check("fail points: closeConnection and a retryable code make PyMongo retry find", retryable_read)
check("fail points: errorLabels [] suppresses TransientTransactionError", labels_suppressed)
check("fail points: blockConnection delays, maxTimeMS cuts it short", block_connection)
check("fail points: with_transaction retries a failed commitTransaction", commit_retry)
check("fail points: waitForFailPoint sees a blocked insert", wait_for_fail_point)
fail_point(mode="off")


# --- operations -------------------------------------------------------------------------------


def current_op_and_kill_op():
    sleeper = MongoClient(URI, appName="sleepy")
    errors = []

    def sleep():
        try:
            sleeper.admin.command("sleep", 1, secs=30, comment="pymongo-sleep")
        except OperationFailure as e:
            errors.append(e.code)

    t = threading.Thread(target=sleep)
    t.start()
    ops = []
    deadline = time.monotonic() + 20
    while not ops and time.monotonic() < deadline:
        ops = admin.command({"currentOp": 1, "command.comment": "pymongo-sleep"})["inprog"]
        time.sleep(0.02)
    expect(len(ops) == 1, f"currentOp: {ops}")
    op = ops[0]
    expect(op["appName"] == "sleepy" and op["active"] and op["op"] == "command", f"{op}")
    admin.command("killOp", op=op["opid"])
    t.join(10)
    sleeper.close()
    expect(not t.is_alive(), "the sleep was not interrupted")
    expect(errors == [11601], f"errors {errors}")


def profiler_entries():
    pdb = client.cairn_ops_prof
    pdb.command("profile", 2)
    pdb.c.insert_one({"a": 1})
    pdb.c.find_one({"a": 1})
    pdb.command("profile", 0)
    entries = list(pdb.system.profile.find({"ns": "cairn_ops_prof.c"}).sort("ts", 1))
    expect([e["op"] for e in entries] == ["insert", "query"], f"{entries}")
    expect(entries[1]["nreturned"] == 1 and entries[1]["planSummary"] == "COLLSCAN", f"{entries[1]}")
    expect(entries[1]["command"]["filter"] == {"a": 1}, f"{entries[1]}")
    # A capped collection, newest first in reverse natural order.
    expect(pdb.system.profile.options() == {"capped": True, "size": 1048576}, f"{pdb.system.profile.options()}")
    stats = pdb.command("collStats", "system.profile")
    expect(stats["capped"] is True and stats["maxSize"] == 1048576, f"{stats}")
    newest = pdb.system.profile.find_one({"ns": "cairn_ops_prof.c"}, sort=[("$natural", -1)])
    expect(newest["op"] == "query", f"{newest}")


def profiler_resize():
    # The manual's "change the size of system.profile": off, drop, create capped, on.
    pdb = client.cairn_ops_prof_resize
    pdb.command("profile", 2)
    try:
        pdb.drop_collection("system.profile")
        raise AssertionError("dropped system.profile while profiling")
    except OperationFailure as e:
        expect(e.code == 20, f"{e.details}")
    pdb.command("profile", 0)
    pdb.drop_collection("system.profile")
    pdb.create_collection("system.profile", capped=True, size=4000000)
    pdb.command("profile", 2)
    pdb.c.find_one({})
    pdb.command("profile", 0)
    expect(pdb.system.profile.options() == {"capped": True, "size": 4000000}, f"{pdb.system.profile.options()}")
    expect(pdb.system.profile.count_documents({"ns": "cairn_ops_prof_resize.c"}) == 1, "no entry")
    # A non-capped system.profile is refused.
    other = client.cairn_ops_prof_plain
    other.create_collection("system.profile")
    try:
        other.command("profile", 1)
        raise AssertionError("profiling on with a non-capped system.profile")
    except OperationFailure as e:
        expect(e.code == 48 and "exists but isn't capped" in str(e), f"{e.details}")


def mongoengine_query_counter():
    import mongoengine
    from mongoengine.context_managers import query_counter

    mongoengine.connect(db="cairn_ops_me", host=URI, alias="default")
    try:

        class Person(mongoengine.Document):
            name = mongoengine.StringField()
            meta = {"collection": "people"}

        Person.drop_collection()
        with query_counter() as q:
            expect(q == 0, f"start: {q}")
            expect(q == 0, "counting does not count itself")
            for i in range(3):
                Person(name=f"p{i}").save()
            expect(q == 3, f"after 3 saves: {q}")
            first = Person.objects(name="p1").first()
            expect(first is not None and first.name == "p1", "read back")
            expect(q == 4, f"after a query: {q}")
            n = Person.objects.count()
            expect(n == 3, f"count {n}")
            expect(q == 5, f"after a count: {q}")
        return "5 queries counted"
    finally:
        mongoengine.disconnect(alias="default")


check("operations: currentOp shows a sleeping command, killOp interrupts it", current_op_and_kill_op)
check("profiler: level 2 entries read back with find", profiler_entries)
check("profiler: system.profile resized as the manual says; a non-capped one refused", profiler_resize)
try:
    client.cairn_ops_me.command("aggregate", "x", pipeline=[], cursor={})
    HAVE_AGGREGATE = True
except OperationFailure as e:
    HAVE_AGGREGATE = e.code != 59
if HAVE_AGGREGATE:
    check("profiler: MongoEngine's query_counter counts an application's queries",
          mongoengine_query_counter)
else:
    print("# skip - MongoEngine query_counter: the server has no aggregate command", flush=True)

client.close()
stop()
if failures():
    with open(LOG, encoding="utf-8", errors="replace") as f:
        print("".join(f.readlines()[-25:]), flush=True)
finish("ops")
