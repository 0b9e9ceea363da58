"""PyMongo storage round trip across server restarts.

    python storage_pymongo.py /path/to/cairn WORKDIR

Starts its own Cairn server (`--port 0 --data-dir WORKDIR/data`, logs in WORKDIR/server-N.log),
inserts documents holding every BSON type, stops the server with SIGTERM, starts it again on
the same data directory and checks that every document comes back byte for byte (types,
field order, values), by `_id` and by a full scan. Then it checks the catalog and a few write
paths after the restart, restarts once more, and finally kills the server with SIGKILL after a
`j: true` insert and checks that the journaled writes survived.

Documents are sent as `RawBSONDocument`s built from `bson.encode(SON(...))` and read back
with `document_class=RawBSONDocument`, so the comparison is of the exact BSON bytes: int32 vs
int64 vs double vs Decimal128, -0.0, NaN, field order and binary subtypes all count.

Prints one `ok`/`FAIL` line per check and a closing `storage: N passed, N failed` line; exits 1
when a check failed. The server is always stopped on exit (SIGTERM, then SIGKILL). Started by
tests/clients/run.sh.
"""

from __future__ import annotations

import atexit
import datetime
import os
import re
import signal
import struct
import subprocess
import sys
import time
import traceback
import uuid

import bson
from bson.binary import Binary
from bson.code import Code
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from bson.son import SON
from bson.timestamp import Timestamp
from pymongo import MongoClient, WriteConcern
from pymongo.errors import BulkWriteError, DuplicateKeyError

if len(sys.argv) != 3:
    sys.exit(__doc__)
BIN, WORKDIR = sys.argv[1], sys.argv[2]
DATA_DIR = os.path.join(WORKDIR, "data")
TIMEOUT_MS = 10_000
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15  # the server's own --shutdown-timeout-secs default

DB = "cairn_storage"
RAW = CodecOptions(document_class=RawBSONDocument)
SHOW = CodecOptions(document_class=SON, datetime_conversion=DatetimeConversion.DATETIME_AUTO)

passed = 0
failed = 0


def check(name, fn):
    """Runs one check; an AssertionError or any exception fails it. Returns fn's result or None."""
    global passed, failed
    t0 = time.monotonic()
    try:
        detail = fn()
        secs = time.monotonic() - t0
        if secs >= 0.5:  # note the slow ones
            detail = f"{detail}; {secs:.1f}s" if detail else f"{secs:.1f}s"
    except AssertionError as e:
        failed += 1
        print(f"FAIL - {name}: {e}", flush=True)
    except Exception:  # noqa: BLE001 - a crash is a failure of this check, not of the run
        failed += 1
        print(f"FAIL - {name}: exception\n" + traceback.format_exc().rstrip(), flush=True)
    else:
        passed += 1
        print(f"ok   - {name}" + (f" ({detail})" if detail else ""), flush=True)
        return True
    return False


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def finish():
    if failed and server.log_path:
        print(server.log_tail(), flush=True)
    print(f"storage: {passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


# --- the server process -----------------------------------------------------------------------

PORT_LINE = re.compile(r'"msg":"Waiting for connections".*"port":(\d+)')


class Server:
    """One cairn process at a time on DATA_DIR; `start` may be called again after `stop`."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.runs = 0
        self.log_path = ""
        self.port = 0

    @property
    def uri(self):
        return f"mongodb://127.0.0.1:{self.port}/"

    def start(self):
        assert self.proc is None or self.proc.poll() is not None, "server already running"
        self.runs += 1
        self.log_path = os.path.join(WORKDIR, f"server-{self.runs}.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [BIN, "--port", "0", "--log-format", "json", "--log-level", "info",
                 "--data-dir", DATA_DIR],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        t0 = time.monotonic()
        while True:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                m = PORT_LINE.search(f.read())
            if m:
                self.port = int(m.group(1))
                return time.monotonic() - t0
            if self.proc.poll() is not None:
                raise AssertionError(f"server run {self.runs} exited with status {self.proc.returncode} "
                                     f"before it was ready\n{self.log_tail()}")
            if time.monotonic() - t0 > START_TIMEOUT_S:
                raise AssertionError(f"no 'Waiting for connections' within {START_TIMEOUT_S}s\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Sends `sig` and waits; returns (exit status, seconds). Kills it if it does not stop."""
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"server still running {timeout}s after {signal.Signals(sig).name}; "
                                 f"killed\n{self.log_tail()}") from None
        return rc, time.monotonic() - t0

    def ensure_stopped(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                print("[storage] server did not stop on SIGTERM within 10s; killing it", file=sys.stderr)
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, n=25):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()[-n:]
        except OSError as e:
            return f"(no server log: {e})"
        return f"---- {self.log_path} (last {len(lines)} lines) ----\n" + "\n".join(lines)


server = Server()
atexit.register(server.ensure_stopped)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, lambda signum, _frame: sys.exit(128 + signum))


def connect():
    return MongoClient(server.uri, serverSelectionTimeoutMS=TIMEOUT_MS, appname="cairn-storage-pymongo")


# --- reading BSON bytes (to name the first difference) ---------------------------------------

TYPE_NAMES = {
    1: "double", 2: "string", 3: "object", 4: "array", 5: "binData", 6: "undefined",
    7: "objectId", 8: "bool", 9: "date", 10: "null", 11: "regex", 12: "dbPointer",
    13: "javascript", 14: "symbol", 15: "javascriptWithScope", 16: "int", 17: "timestamp",
    18: "long", 19: "decimal", 0x7F: "maxKey", 0xFF: "minKey",
}


def elements(raw: bytes):
    """Yields (field name, BSON type byte, value bytes) for each element of a document."""
    pos = 4
    end = struct.unpack_from("<i", raw, 0)[0] - 1
    while pos < end:
        t = raw[pos]
        pos += 1
        nul = raw.index(b"\x00", pos)
        name = raw[pos:nul].decode("utf-8", "replace")
        pos = nul + 1
        if t in (1, 9, 17, 18):
            size = 8
        elif t == 16:
            size = 4
        elif t == 19:
            size = 16
        elif t == 7:
            size = 12
        elif t == 8:
            size = 1
        elif t in (6, 10, 0x7F, 0xFF):
            size = 0
        elif t in (2, 13, 14):
            size = 4 + struct.unpack_from("<i", raw, pos)[0]
        elif t in (3, 4, 15):
            size = struct.unpack_from("<i", raw, pos)[0]
        elif t == 5:
            size = 5 + struct.unpack_from("<i", raw, pos)[0]
        elif t == 11:
            size = raw.index(b"\x00", raw.index(b"\x00", pos) + 1) + 1 - pos
        elif t == 12:
            size = 4 + struct.unpack_from("<i", raw, pos)[0] + 12
        else:
            raise AssertionError(f"unknown BSON type {t:#x} for field {name!r}")
        yield name, t, raw[pos:pos + size]
        pos += size


def short(b: bytes, n=48) -> str:
    h = b.hex()
    return h if len(h) <= 2 * n else f"{h[:2 * n]}... ({len(b)} bytes)"


def first_difference(want: bytes, got: bytes, path="") -> str:
    """A description of where two encoded documents first differ."""
    w, g = list(elements(want)), list(elements(got))
    wn, gn = [n for n, _, _ in w], [n for n, _, _ in g]
    if wn != gn:
        return f"{path or 'top level'}: field names/order {wn[:20]} != {gn[:20]}"
    for (name, wt, wv), (_, gt, gv) in zip(w, g):
        here = f"{path}.{name}" if path else name
        if wt != gt:
            return f"{here}: type {TYPE_NAMES.get(wt, hex(wt))} != {TYPE_NAMES.get(gt, hex(gt))} (got {short(gv)})"
        if wv != gv:
            if wt in (3, 4):
                return first_difference(wv, gv, here)
            return f"{here} ({TYPE_NAMES.get(wt, hex(wt))}): bytes {short(wv)} != {short(gv)}"
    return "documents differ outside their elements (length or terminator)"


def same_raw(want: bytes, got, what: str):
    expect(got is not None, f"{what}: not found")
    got = got.raw if isinstance(got, RawBSONDocument) else got
    if want != got:
        raise AssertionError(f"{what}: {first_difference(want, got)}")


def raw_doc(*pairs) -> RawBSONDocument:
    return RawBSONDocument(bson.encode(SON(pairs)))


# --- the documents ----------------------------------------------------------------------------

NAN = float("nan")
INF = float("inf")
UUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def nested(depth: int):
    d: object = {"leaf": [depth, "bottom"]}
    for i in range(depth):
        d = SON([("level", depth - i), ("next", d)])
    return d


def deprecated_types_doc(_id: int) -> RawBSONDocument:
    """undefined, DBPointer and symbol: PyMongo cannot encode them, so the bytes are built here."""
    def cstring(s):
        return s.encode() + b"\x00"

    def string(s):
        b = s.encode() + b"\x00"
        return struct.pack("<i", len(b)) + b

    body = (
        b"\x10" + cstring("_id") + struct.pack("<i", _id)
        + b"\x02" + cstring("kind") + string("deprecated types")
        + b"\x06" + cstring("undef")
        + b"\x0e" + cstring("sym") + string("a symbol")
        + b"\x0c" + cstring("dbptr") + string("db.coll") + bytes.fromhex("5f0000000000000000000001")
        + b"\x0e" + cstring("empty_sym") + string("")
    )
    return RawBSONDocument(struct.pack("<i", len(body) + 5) + body + b"\x00")


def type_docs() -> list[RawBSONDocument]:
    everything = SON([
        ("_id", 16), ("kind", "every type in one document"),
        ("double", -0.0), ("string", "s\x00"), ("doc", SON([("b", 1), ("a", 2)])), ("array", [1, [2], {}]),
        ("bin", Binary(b"\x00\xff", 0x80)), ("oid", ObjectId("65a1b2c3d4e5f60718293a4b")), ("bool", False),
        ("date", datetime.datetime(1969, 12, 31, 23, 59, 59, 999000)), ("null", None),
        ("regex", Regex("a+", "im")), ("code", Code("x")), ("code_scope", Code("y", {"y": Int64(1)})),
        ("int32", -(2**31)), ("timestamp", Timestamp(5, 6)), ("int64", Int64(2**63 - 1)),
        ("decimal", Decimal128("-0")), ("min", MinKey()), ("max", MaxKey()),
        ("dbref", DBRef("coll", ObjectId("65a1b2c3d4e5f60718293a4c"), "otherdb")),
    ])
    docs = [
        raw_doc(("_id", 1), ("kind", "double"),
                ("zero", 0.0), ("neg_zero", -0.0), ("nan", NAN), ("inf", INF), ("neg_inf", -INF),
                ("one", 1.0), ("pi", 3.141592653589793), ("denormal", 5e-324),
                ("max", 1.7976931348623157e308), ("two53", 2.0**53), ("neg", -1.5),
                ("in_array", [0.0, -0.0, NAN, -INF])),
        raw_doc(("_id", 2), ("kind", "string"),
                ("ascii", "hello"), ("empty", ""), ("embedded_nul", "a\x00b\x00"), ("only_nul", "\x00"),
                ("unicode", "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c\u8a9e \U0001faa8"),
                ("control", "\x01\x02\t\n\r\x7f"), ("long", "x" * 100_000)),
        raw_doc(("_id", 3), ("kind", "embedded document"),
                ("empty", {}), ("unsorted", SON([("z", 1), ("a", 2), ("m", 3)])),
                ("nested", SON([("a", SON([("b", SON([("c", SON([("d", 1)]))]))]))])),
                ("empty_nested", {"e": {"e": {}}}), ("deep", nested(90))),
        raw_doc(("_id", 4), ("kind", "array"),
                ("empty", []), ("nested", [[1, [2, [3, []]]], []]),
                ("mixed", [1, "two", 3.0, None, {"x": [1]}, [], Int64(5), True, Decimal128("6"), MinKey()]),
                ("twelve", list(range(12))), ("docs", [SON([("b", 1), ("a", 2)]), {}]),
                ("empties", [[], {}, "", None]), ("long", list(range(1000)))),
        raw_doc(("_id", 5), ("kind", "binary"),
                ("generic", Binary(b"\x00\x01\xfe\xff", 0)), ("generic_empty", Binary(b"", 0)),
                ("function", Binary(b"f", 1)), ("old_binary", Binary(b"old", 2)),
                ("uuid_legacy", Binary(UUID.bytes, 3)), ("uuid", Binary(UUID.bytes, 4)),
                ("md5", Binary(bytes(range(16)), 5)), ("user", Binary(b"user defined", 0x80)),
                ("user_ff", Binary(b"\x00", 0xFF))),
        raw_doc(("_id", 6), ("kind", "objectId bool null"),
                ("oid", ObjectId("65a1b2c3d4e5f60718293a4b")), ("oid_zero", ObjectId("0" * 24)),
                ("oid_ff", ObjectId("f" * 24)), ("true", True), ("false", False), ("null", None)),
        raw_doc(("_id", 7), ("kind", "datetime"),
                ("epoch", datetime.datetime(1970, 1, 1)),
                ("pre_1970", datetime.datetime(1969, 7, 20, 20, 17, 40, 123000)),
                ("minus_1ms", DatetimeMS(-1)),
                ("ms", datetime.datetime(2024, 2, 29, 23, 59, 59, 999000)),
                ("year_1", datetime.datetime(1, 1, 1)),
                ("year_9999", datetime.datetime(9999, 12, 31, 23, 59, 59, 999000)),
                ("int64_min", DatetimeMS(-(2**63))), ("int64_max", DatetimeMS(2**63 - 1))),
        raw_doc(("_id", 8), ("kind", "regex and code"),
                ("regex", Regex("^a.*b$", "i")), ("all_flags", Regex("x|y", "imsux")),
                ("no_flags", Regex("\\d+", "")), ("empty", Regex("", "")),
                ("code", Code("function () { return 1; }")), ("code_empty", Code("")),
                ("code_scope", Code("function () { return x; }", SON([("x", 1), ("y", {"z": [1]})]))),
                ("code_empty_scope", Code("f", {}))),
        raw_doc(("_id", 9), ("kind", "int32"),
                ("zero", 0), ("one", 1), ("minus_one", -1), ("min", -(2**31)), ("max", 2**31 - 1)),
        raw_doc(("_id", 10), ("kind", "int64"),
                ("zero", Int64(0)), ("one", Int64(1)), ("minus_one", Int64(-1)),
                ("min", Int64(-(2**63))), ("max", Int64(2**63 - 1)),
                ("int32_max_plus_1", Int64(2**31)), ("int32_min_minus_1", Int64(-(2**31) - 1))),
        raw_doc(("_id", 11), ("kind", "timestamp"),
                ("ts", Timestamp(1700000000, 7)), ("max", Timestamp(2**32 - 1, 2**32 - 1)),
                ("inc_zero", Timestamp(1, 0)), ("time_zero", Timestamp(0, 1)),
                ("nested_empty", {"zero": Timestamp(0, 0)}), ("in_array", [Timestamp(0, 0)])),
        raw_doc(("_id", 12), ("kind", "decimal128"),
                ("d1_10", Decimal128("1.10")), ("d1_1", Decimal128("1.1")), ("neg_zero", Decimal128("-0")),
                ("zero", Decimal128("0")), ("zero_exp", Decimal128("0E+3")), ("nan", Decimal128("NaN")),
                ("inf", Decimal128("Infinity")), ("neg_inf", Decimal128("-Infinity")),
                ("max", Decimal128("9.999999999999999999999999999999999E+6144")),
                ("min_pos", Decimal128("1E-6176")), ("neg_tiny", Decimal128("-1E-6176")),
                ("pi", Decimal128("3.141592653589793238462643383279503"))),
        raw_doc(("_id", 13), ("kind", "minKey maxKey"),
                ("min", MinKey()), ("max", MaxKey()), ("in_array", [MaxKey(), MinKey()])),
        raw_doc(("_id", 14), ("kind", "field names"),
                ("10", "ten"), ("9", "nine"), ("1", "one"), ("0", "zero"), ("", "empty name"),
                ("a.b", "dotted"), ("$x", "dollar"), ("a", SON([("b", "not the dotted one")])),
                ("ab", 1), ("a b", 2), ("\x01", "control char"), ("\u00e9", "unicode name"),
                ("zz", 3), ("aa", 4),
                ("nested", SON([("10", 1), ("9", 2), ("", 3), ("a.b", 4), ("$y", 5), ("$", 6), (".", 7),
                                ("a", {"b": 8})]))),
        raw_doc(("_id", 15), ("kind", "large values"),
                ("blob", Binary(bytes(range(256)) * 4096, 0)),  # 1 MiB
                ("str", "y" * 1_000_000), ("many", list(range(5000)))),
        RawBSONDocument(bson.encode(everything)),
        deprecated_types_doc(17),
    ]
    return docs


def id_values():
    """Distinct `_id`s of many types, in MongoDB's sort order (BSON comparison order)."""
    return [
        MinKey(),
        None,
        NAN,  # NaN sorts before every other number
        -INF,
        Int64(-(2**63)),
        -(2**31),
        -1.5,
        Decimal128("-1"),
        0,
        Decimal128("0.5"),
        1,
        Int64(2),
        2.5,
        Decimal128("3"),
        2**31 - 1,
        Int64(2**63 - 1),
        INF,
        "",
        "A",
        "a",
        "ab",
        "\u00e9",
        {},
        {"a": 1},
        SON([("a", 1), ("b", 1)]),
        {"a": 2},
        SON([("b", 0), ("a", 0)]),
        Binary(b"", 0),
        Binary(b"z", 0),
        Binary(b"a", 5),  # same length: the subtype decides
        Binary(b"aa", 0),  # longer sorts later whatever its bytes
        ObjectId("0" * 24),
        ObjectId("f" * 24),
        False,
        True,
        datetime.datetime(1969, 7, 20, 20, 17, 40, 123000),
        datetime.datetime(1970, 1, 1),
        datetime.datetime(2024, 2, 29, 12, 0, 0, 1000),
        Timestamp(1, 1),
        Timestamp(1, 2),
        Timestamp(2**32 - 1, 0),
        Code("a"),
        Code("b"),
        MaxKey(),
    ]


def id_docs() -> list[RawBSONDocument]:
    return [raw_doc(("_id", v), ("i", i)) for i, v in enumerate(id_values())]


# Other spellings of stored numeric `_id`s: {_id: <alias>} must find the stored document.
ID_ALIASES = [(1.0, 10), (Int64(1), 10), (Decimal128("1"), 10), (Int64(0), 8), (0.0, 8), (-0.0, 8),
              (Decimal128("2.5"), 12), (3, 13), (2.0, 11), (Decimal128("-1.5"), 6)]

MANY = 250


# --- checks ---------------------------------------------------------------------------------

def verify_types(client, when):
    coll = client[DB].get_collection("types", codec_options=RAW)
    docs = type_docs()

    def by_id():
        for d in docs:
            _id = bson.decode(d.raw, SHOW)["_id"]
            same_raw(d.raw, coll.find_one({"_id": _id}), f"_id {_id}")
        return f"{len(docs)} documents, {sum(len(d.raw) for d in docs)} bytes"

    def scan():
        got = list(coll.find({}, batch_size=5))
        expect(len(got) == len(docs), f"full scan returned {len(got)} documents, want {len(docs)}")
        for d, g in zip(docs, got):
            same_raw(d.raw, g, f"scan position of _id {bson.decode(d.raw, SHOW)['_id']}")
        return f"{len(got)} documents over {(len(got) + 4) // 5} batches"

    check(f"{when}: every BSON type round-trips byte for byte, read by _id", by_id)
    check(f"{when}: every BSON type round-trips byte for byte, full scan in _id order (batchSize 5)", scan)


def verify_ids(client, when):
    coll = client[DB].get_collection("ids", codec_options=RAW)
    docs = id_docs()
    values = id_values()

    def scan():
        got = list(coll.find())
        order = [bson.decode(g.raw, SHOW)["i"] for g in got]
        expect(order == list(range(len(docs))),
               f"scan order (index into the sorted _id list) {order}, want 0..{len(docs) - 1}")
        for d, g in zip(docs, got):
            same_raw(d.raw, g, f"_id #{bson.decode(d.raw, SHOW)['i']}")
        desc = [bson.decode(g.raw, SHOW)["i"] for g in coll.find().sort("_id", -1)]
        expect(desc == list(reversed(range(len(docs)))), f"descending scan order {desc}")
        return f"{len(docs)} _ids of {len({type(v) for v in values})} Python types"

    def point_reads():
        for d, v in zip(docs, values):
            same_raw(d.raw, coll.find_one({"_id": v}), f"find_one({{_id: {v!r}}})")
        misses = [SON([("b", 1), ("a", 1)]), SON([("a", 0), ("b", 0)]), "b", Binary(b"a", 0), 7, Int64(4)]
        for v in misses:
            g = coll.find_one({"_id": v})
            expect(g is None, f"find_one({{_id: {v!r}}}) found {bson.decode(g.raw, SHOW) if g else g}")
        for alias, i in ID_ALIASES:
            same_raw(docs[i].raw, coll.find_one({"_id": alias}), f"find_one({{_id: {alias!r}}}) (numeric alias)")
        return f"{len(values)} hits, {len(ID_ALIASES)} numeric aliases, {len(misses)} misses"

    check(f"{when}: mixed-type _ids scan in BSON order (asc and desc), exact bytes", scan)
    check(f"{when}: point reads by every _id type and by numeric aliases (1.0 finds int32 1)", point_reads)


def verify_many(client, when, extra_ids=()):
    coll = client[DB]["many"]
    want_ids = list(range(MANY)) + sorted(extra_ids)

    def scan():
        got = [d["_id"] for d in coll.find({}, batch_size=16)]
        expect(got == want_ids, f"ids {got[:5]}...{got[-5:]} ({len(got)}), want {len(want_ids)}")
        expect(all(coll.find_one({"_id": i})["n"] == i * i for i in (0, 17, MANY - 1)), "field n")
        eq = [d["_id"] for d in coll.find({"parity": 1}, batch_size=10)]
        expect(eq == [i for i in range(MANY) if i % 2], f"find({{parity: 1}}) gave {len(eq)} ids")
        return f"{len(got)} documents"

    def sort_limit():
        top = [d["_id"] for d in coll.find().sort("_id", -1).limit(3)]
        expect(top == want_ids[::-1][:3], f"sort(_id: -1).limit(3) gave {top}, want {want_ids[::-1][:3]}")
        bottom = [d["_id"] for d in coll.find().sort("_id", 1).skip(2).limit(2)]
        expect(bottom == [2, 3], f"sort(_id: 1).skip(2).limit(2) gave {bottom}")
        return f"{top}"

    check(f"{when}: full scan over getMore batches returns all {len(want_ids)} documents; equality filter", scan)
    check(f"{when}: find().sort('_id', -1).limit(3)", sort_limit)


def verify_stats(client, when, counts):
    def stats():
        out = []
        for name, (n, size) in counts.items():
            s = client[DB].command("collStats", name)
            expect(s.get("ok") == 1.0, f"collStats {name}: {s!r}")
            expect(s.get("count") == n, f"collStats {name}: count {s.get('count')}, want {n}")
            if size is not None:
                expect(s.get("size") == size, f"collStats {name}: size {s.get('size')}, want {size} "
                                              f"(sum of the documents' BSON sizes)")
            out.append(f"{name} {s.get('count')}")
        return ", ".join(out)

    check(f"{when}: collStats count (and size = sum of BSON sizes)", stats)


def stop_server(what, sig=signal.SIGTERM):
    def stop():
        rc, secs = server.stop(sig)
        want = -sig if sig == signal.SIGKILL else 0
        expect(rc == want, f"exit status {rc} after {signal.Signals(sig).name}, want {want}\n{server.log_tail()}")
        return f"exit {rc} in {secs:.2f}s"

    return check(what, stop)


def start_server(what):
    def start():
        secs = server.start()
        return f"port {server.port} in {secs:.2f}s"

    if not check(what, start):
        print("storage: cannot continue without a server", flush=True)
        finish()


# --- the run --------------------------------------------------------------------------------

os.makedirs(WORKDIR, exist_ok=True)
t_begin = time.monotonic()
start_server(f"start the server on a fresh data dir ({BIN})")
client = connect()
TYPE_DOCS = type_docs()
ID_DOCS = id_docs()


def t_insert():
    db = client[DB]
    db.drop_collection("types")  # a fresh data dir should have none; keep reruns meaningful
    types = db.get_collection("types", codec_options=RAW)
    # (PyMongo leaves inserted_ids empty for RawBSONDocuments: count with collStats instead.)
    types.insert_many(TYPE_DOCS, ordered=True)
    n = db.command("collStats", "types")["count"]
    expect(n == len(TYPE_DOCS), f"collStats count {n} after inserting {len(TYPE_DOCS)} typed documents")
    ids = db.get_collection("ids", codec_options=RAW)
    ids.insert_many(list(reversed(ID_DOCS)), ordered=False)  # insertion order must not matter
    n = db.command("collStats", "ids")["count"]
    expect(n == len(ID_DOCS), f"collStats count {n} after inserting {len(ID_DOCS)} mixed-_id documents")
    r = db["many"].insert_many([{"_id": i, "n": i * i, "parity": i % 2} for i in range(MANY)])
    expect(len(r.inserted_ids) == MANY, f"inserted {len(r.inserted_ids)} into many")
    db.create_collection("empty")
    db.create_collection("dropme")
    db["dropme"].insert_one({"_id": 1})
    db["rename_from"].insert_many([{"_id": i} for i in range(3)])
    return f"{len(TYPE_DOCS)} typed + {len(ID_DOCS)} mixed-_id + {MANY} plain documents"


def t_numeric_id_duplicates():
    ids = client[DB]["ids"]
    dups = [1.0, Int64(1), Decimal128("1.0"), -0.0, Decimal128("-0"), Decimal128("NaN")]
    for v in dups:
        try:
            ids.insert_one({"_id": v, "i": -1})
        except DuplicateKeyError as e:
            expect(e.code == 11000, f"code {e.code} for _id {v!r}")
        else:
            raise AssertionError(f"inserting _id {v!r} succeeded although an equal number is stored")
    return f"{len(dups)} numerically equal _ids refused with 11000"


def t_empty_timestamp():
    coll = client[DB]["ts_rule"]
    coll.insert_one(SON([("_id", 1), ("top", Timestamp(0, 0)), ("n", {"t": Timestamp(0, 0)})]))
    d = coll.find_one({"_id": 1})
    expect(isinstance(d["top"], Timestamp) and d["top"].time > 0, f"top-level Timestamp(0, 0) stored as {d['top']!r}")
    expect(d["n"]["t"] == Timestamp(0, 0), f"nested Timestamp(0, 0) stored as {d['n']['t']!r}")
    coll.drop()
    return f"top-level became {d['top']!r}"


def t_data_dir_locked():
    log_path = os.path.join(WORKDIR, "second-server.log")
    with open(log_path, "wb") as log:
        p = subprocess.Popen([BIN, "--port", "0", "--log-format", "json", "--data-dir", DATA_DIR],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        rc = p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError("a second server on the same data dir kept running") from None
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    expect(rc == 100, f"second server exit status {rc}, want 100 (MongoDB's DBPathInUse exit)\n{text}")
    expect(server.proc.poll() is None, "the first server died")
    return f"exit {rc}"


check("a second server on the same data dir exits 100 while the first runs", t_data_dir_locked)
check("insert: typed documents (RawBSONDocument), mixed _ids, 250 plain, empty collections", t_insert)
verify_types(client, "before restart")
verify_ids(client, "before restart")
check("numerically equal _ids (1.0, Int64 1, Decimal128 1.0, -0.0, NaN) are duplicate keys", t_numeric_id_duplicates)
check("top-level Timestamp(0, 0) is filled in, a nested one is kept", t_empty_timestamp)

# --- restart 1: SIGTERM with a client still connected -----------------------------------------
# The connected client has not run a command, so it holds no server sessions: closing a client
# that has some sends endSessions, which waits serverSelectionTimeoutMS once the server is gone.
client.close()
idle = MongoClient(server.uri, serverSelectionTimeoutMS=2000, appname="cairn-storage-idle")
for _ in range(100):  # until its monitor has connected (then waits in an awaitable hello)
    if idle.nodes:
        break
    time.sleep(0.05)
stop_server("SIGTERM with a client connected (monitor in an awaitable hello): the server exits 0")
idle.close()
start_server("restart on the same data dir")
client = connect()

TYPE_SIZE = sum(len(d.raw) for d in TYPE_DOCS)
ID_SIZE = sum(len(d.raw) for d in ID_DOCS)
verify_types(client, "after restart")
verify_ids(client, "after restart")
verify_many(client, "after restart")


def t_catalog():
    names = sorted(client[DB].list_collection_names())
    want = sorted(["types", "ids", "many", "empty", "dropme", "rename_from"])
    expect(names == want, f"list_collection_names {names}, want {want}")
    dbs = client.list_database_names()
    expect(DB in dbs, f"{DB} missing from list_database_names {dbs}")
    return f"{names}; databases {dbs}"


check("after restart: list_collection_names and list_database_names", t_catalog)
verify_stats(client, "after restart", {"types": (len(TYPE_DOCS), TYPE_SIZE), "ids": (len(ID_DOCS), ID_SIZE),
                                       "many": (MANY, None), "empty": (0, None)})


def t_duplicate_ordered():
    coll = client[DB]["many"]
    try:
        coll.insert_many([{"_id": 1000}, {"_id": 5}, {"_id": 1001}], ordered=True)
    except BulkWriteError as e:
        d = e.details
        expect(e.code == 65, f"BulkWriteError.code {e.code}, want 65 (multiple errors / write errors)")
        expect(d.get("nInserted") == 1, f"nInserted {d.get('nInserted')}, want 1")
        we = d.get("writeErrors") or []
        expect(len(we) == 1, f"{len(we)} writeErrors, want 1: {we}")
        w = we[0]
        expect(w.get("code") == 11000, f"code {w.get('code')}, want 11000: {w}")
        expect(w.get("index") == 1, f"index {w.get('index')}, want 1")
        expect(w.get("keyValue") == {"_id": 5}, f"keyValue {w.get('keyValue')!r}")
        expect(w.get("keyPattern") == {"_id": 1}, f"keyPattern {w.get('keyPattern')!r}")
        expect("E11000 duplicate key error" in w.get("errmsg", ""), f"errmsg {w.get('errmsg')!r}")
        expect(coll.find_one({"_id": 1000}) is not None, "_id 1000 (before the error) was not inserted")
        expect(coll.find_one({"_id": 1001}) is None, "_id 1001 (after the error) was inserted by an ordered insert")
        return w["errmsg"]
    raise AssertionError("insert_many with a duplicate _id did not raise BulkWriteError")


def t_duplicate_unordered():
    coll = client[DB]["many"]
    try:
        coll.insert_many([{"_id": 7}, {"_id": 1002}, {"_id": 8}, {"_id": 1003}], ordered=False)
    except BulkWriteError as e:
        d = e.details
        expect(d.get("nInserted") == 2, f"nInserted {d.get('nInserted')}, want 2")
        got = [(w.get("index"), w.get("code"), w.get("keyValue")) for w in d.get("writeErrors", [])]
        expect(got == [(0, 11000, {"_id": 7}), (2, 11000, {"_id": 8})], f"writeErrors {got}")
        return "2 inserted, errors at 0 and 2"
    raise AssertionError("unordered insert_many with duplicates did not raise BulkWriteError")


def t_mutate_catalog():
    db = client[DB]
    db.drop_collection("dropme")
    client.admin.command("renameCollection", f"{DB}.rename_from", to=f"{DB}.rename_to")
    names = sorted(db.list_collection_names())
    expect("dropme" not in names and "rename_to" in names and "rename_from" not in names, f"collections {names}")


check("after restart: insert_many ordered duplicate -> BulkWriteError 11000 with keyValue/keyPattern", t_duplicate_ordered)
check("after restart: insert_many unordered duplicates -> both errors, the rest inserted", t_duplicate_unordered)
check("after restart: drop one collection, rename another", t_mutate_catalog)
EXTRA = (1000, 1002, 1003)

# --- restart 2: the writes made after the first restart persist -------------------------------
client.close()
stop_server("second SIGTERM: the server exits 0")
start_server("second restart on the same data dir")
client = connect()


def t_catalog_2():
    names = sorted(client[DB].list_collection_names())
    want = sorted(["types", "ids", "many", "empty", "rename_to"])
    expect(names == want, f"list_collection_names {names}, want {want}")
    got = [d["_id"] for d in client[DB]["rename_to"].find()]
    expect(got == [0, 1, 2], f"rename_to holds {got}")
    return f"{names}"


check("after second restart: drop and rename persisted", t_catalog_2)
verify_many(client, "after second restart", EXTRA)
verify_types(client, "after second restart")
verify_stats(client, "after second restart", {"many": (MANY + len(EXTRA), None), "rename_to": (3, None)})

# --- crash: journaled writes survive SIGKILL ----------------------------------------------------
JOURNALED = list(range(2000, 2010))


def t_journaled_insert():
    coll = client[DB].get_collection("many", write_concern=WriteConcern(w=1, j=True))
    for i in JOURNALED[:5]:
        coll.insert_one({"_id": i, "j": True})
    coll.insert_many([{"_id": i, "j": True} for i in JOURNALED[5:]])
    return f"{len(JOURNALED)} documents with j: true"


check("insert with write concern {j: true}", t_journaled_insert)
client.close()
stop_server("SIGKILL the server (crash)", signal.SIGKILL)
start_server("restart after the crash")
client = connect()
verify_many(client, "after crash", EXTRA + tuple(JOURNALED))
verify_types(client, "after crash")
verify_ids(client, "after crash")
client.close()
stop_server("final SIGTERM: the server exits 0")
print(f"storage: {server.runs} server runs in {time.monotonic() - t_begin:.1f}s", flush=True)
finish()
