"""PyMongo smoke test against a running Cairn server.

    python smoke_pymongo.py mongodb://127.0.0.1:PORT/

Prints one `ok`/`FAIL` line per check and a closing `pymongo: N passed, N failed` line; exits 1
when a check failed. Started by tests/clients/run.sh.
"""

from __future__ import annotations

import datetime
import json
import socket
import struct
import sys
import zlib

import bson
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from checks import check, expect, finish
from pymongo import MongoClient
from pymongo.errors import OperationFailure

URI = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/"
TIMEOUT_MS = 10_000




# --- BSON element types on the wire (so int32/int64/double are told apart exactly) ---------

BSON_TYPES = {
    1: "double", 2: "string", 3: "object", 4: "array", 5: "binData", 7: "objectId",
    8: "bool", 9: "date", 10: "null", 16: "int", 17: "timestamp", 18: "long", 19: "decimal",
}


def elements(raw: bytes):
    """Yields (field name, BSON type name, value bytes) for each top-level element."""
    pos = 4
    end = struct.unpack_from("<i", raw, 0)[0] - 1
    while pos < end:
        t = raw[pos]
        pos += 1
        nul = raw.index(b"\x00", pos)
        name = raw[pos:nul].decode()
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
        elif t in (6, 10, 127, 255):
            size = 0
        elif t == 2:
            size = 4 + struct.unpack_from("<i", raw, pos)[0]
        elif t in (3, 4):
            size = struct.unpack_from("<i", raw, pos)[0]
        elif t == 5:
            size = 5 + struct.unpack_from("<i", raw, pos)[0]
        else:
            raise AssertionError(f"unexpected BSON type {t:#x} for field {name!r}")
        yield name, BSON_TYPES.get(t, hex(t)), raw[pos:pos + size]
        pos += size


def element_types(raw: bytes) -> dict[str, str]:
    """Top-level field name -> BSON type name of an encoded document."""
    return {name: t for name, t, _ in elements(raw)}


def sub_document(raw: bytes, field: str) -> bytes:
    """The encoded embedded document or array stored under `field`."""
    for name, t, value in elements(raw):
        if name == field:
            expect(t in ("object", "array"), f"{field} is a {t}")
            return value
    raise AssertionError(f"no field {field!r}")


RAW = bson.CodecOptions(document_class=RawBSONDocument)


def raw_command(client, cmd):
    return client.admin.command(cmd, codec_options=RAW)


# --- a minimal OP_MSG / OP_COMPRESSED client for the handshake checks ----------------------

OP_COMPRESSED = 2012
OP_MSG = 2013
ZLIB_ID = 2


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise AssertionError(f"server closed the connection ({len(buf)}/{n} bytes read)")
        buf += chunk
    return buf


def op_msg_body(doc):
    return struct.pack("<I", 0) + b"\x00" + bson.encode(doc)


def send_op_msg(sock, req_id, doc, compress=False):
    body = op_msg_body(doc)
    if compress:
        payload = struct.pack("<iiB", OP_MSG, len(body), ZLIB_ID) + zlib.compress(body)
        sock.sendall(struct.pack("<iiii", 16 + len(payload), req_id, 0, OP_COMPRESSED) + payload)
    else:
        sock.sendall(struct.pack("<iiii", 16 + len(body), req_id, 0, OP_MSG) + body)


def recv_op_msg(sock, req_id):
    """Returns (reply document, compressor id or None)."""
    length, _rid, response_to, opcode = struct.unpack("<iiii", _recv_exact(sock, 16))
    rest = _recv_exact(sock, length - 16)
    expect(response_to == req_id, f"responseTo {response_to} != requestID {req_id}")
    compressor = None
    if opcode == OP_COMPRESSED:
        opcode, size, compressor = struct.unpack_from("<iiB", rest, 0)
        data = rest[9:]
        expect(compressor == ZLIB_ID, f"reply compressed with compressor id {compressor}, want zlib (2)")
        rest = zlib.decompress(data)
        expect(len(rest) == size, f"uncompressedSize {size} != {len(rest)}")
    expect(opcode == OP_MSG, f"reply opcode {opcode}, want OP_MSG")
    flags = struct.unpack_from("<I", rest, 0)[0]
    expect(rest[4] == 0, f"first section kind {rest[4]}")
    doc = bson.decode(rest[5:5 + struct.unpack_from('<i', rest, 5)[0]])
    expect(flags & ~0x2 == 0, f"unexpected reply flag bits {flags:#x}")
    return doc, compressor


def host_port(uri):
    hp = uri.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    host, port = hp.rsplit(":", 1)
    return host, int(port)


# --- the checks -----------------------------------------------------------------------------

client = MongoClient(URI, serverSelectionTimeoutMS=TIMEOUT_MS, appname="cairn-smoke-pymongo")


def t_server_info():
    info = client.server_info()
    expect(info.get("version") == "7.0.0", f"version {info.get('version')!r}")
    va = info.get("versionArray")
    expect(isinstance(va, list) and len(va) == 4, f"versionArray {va!r}")
    expect(all(type(x) is int for x in va), f"versionArray elements are not plain ints: {va!r}")
    expect(va[:3] == [7, 0, 0], f"versionArray {va!r}")
    raw = raw_command(client, {"buildInfo": 1}).raw
    expect(element_types(raw).get("versionArray") == "array", "versionArray is not an array")
    va_types = list(element_types(sub_document(raw, "versionArray")).values())
    expect(va_types == ["int"] * 4, f"versionArray element BSON types {va_types}, want 4 x int32")
    expect(info.get("ok") == 1.0, f"ok {info.get('ok')!r}")
    return f"version {info['version']}, versionArray {va}"


def t_hello():
    raw = raw_command(client, {"hello": 1})
    h = bson.decode(raw.raw)
    types = element_types(raw.raw)
    want_types = {
        "isWritablePrimary": "bool", "msg": "string", "topologyVersion": "object",
        "maxBsonObjectSize": "int", "maxMessageSizeBytes": "int", "maxWriteBatchSize": "int",
        "localTime": "date", "logicalSessionTimeoutMinutes": "int", "maxWireVersion": "int",
        "minWireVersion": "int", "ok": "double",
    }
    for field, t in want_types.items():
        expect(types.get(field) == t, f"hello.{field} has BSON type {types.get(field)}, want {t}")
    expect(types.get("connectionId") in ("int", "long"), f"connectionId type {types.get('connectionId')}")
    expect(h["isWritablePrimary"] is True, f"isWritablePrimary {h['isWritablePrimary']!r}")
    expect(h["msg"] == "isdbgrid", f"msg {h['msg']!r}")
    expect(h["maxWireVersion"] == 21, f"maxWireVersion {h['maxWireVersion']!r}")
    expect(h["minWireVersion"] == 0, f"minWireVersion {h['minWireVersion']!r}")
    expect(h["maxBsonObjectSize"] == 16 * 1024 * 1024, f"maxBsonObjectSize {h['maxBsonObjectSize']}")
    expect(h["maxMessageSizeBytes"] == 48_000_000, f"maxMessageSizeBytes {h['maxMessageSizeBytes']}")
    expect(h["maxWriteBatchSize"] == 100_000, f"maxWriteBatchSize {h['maxWriteBatchSize']}")
    expect(h["logicalSessionTimeoutMinutes"] == 30, f"logicalSessionTimeoutMinutes {h['logicalSessionTimeoutMinutes']}")
    expect(h["connectionId"] > 0, f"connectionId {h['connectionId']}")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    expect(abs((h["localTime"] - now).total_seconds()) < 60, f"localTime {h['localTime']} vs now {now}")
    tv = h["topologyVersion"]
    tv_types = element_types(sub_document(raw.raw, "topologyVersion"))
    expect(tv_types == {"processId": "objectId", "counter": "long"}, f"topologyVersion types {tv_types}")
    expect(isinstance(tv["processId"], ObjectId), f"processId {tv['processId']!r}")
    expect(isinstance(tv["counter"], Int64), f"counter is {type(tv['counter']).__name__}, want Int64")
    expect("setName" not in h and "hosts" not in h, f"a mongos has no replica-set fields: {sorted(h)}")
    # The legacy spelling answers too, with its own field names.
    im = client.admin.command("isMaster")
    expect(im.get("ismaster") is True and im.get("msg") == "isdbgrid", f"isMaster {im!r}")
    expect("isWritablePrimary" not in im, "isMaster answers with isWritablePrimary (hello-only field)")
    return f"connectionId {h['connectionId']}, topologyVersion.counter {tv['counter']!r}"


def t_ping():
    r = client.admin.command("ping")
    # A router adds its cluster time to every reply.
    expect(list(r) == ["ok", "$clusterTime", "operationTime"] and r["ok"] == 1.0, f"ping {r!r}")
    r = client["some_db"].command({"ping": 1})
    expect(r.get("ok") == 1.0, f"ping on another db {r!r}")


def t_get_log():
    r = client.admin.command({"getLog": "startupWarnings"})
    log = r.get("log")
    expect(isinstance(log, list) and log, f"startupWarnings log is empty: {r!r}")
    expect(r.get("totalLinesWritten", 0) >= len(log), f"totalLinesWritten {r.get('totalLinesWritten')}")
    first = json.loads(log[0])
    expect("msg" in first and "t" in first, f"log line is not a MongoDB JSON log line: {log[0]}")
    expect(any("Access control is not enabled" in line for line in log), f"no access-control warning: {log}")
    star = client.admin.command({"getLog": "*"})
    expect("startupWarnings" in star.get("names", []), f"getLog '*' names {star!r}")
    return f"{len(log)} line(s)"


def t_opcounters():
    before = client.admin.command("serverStatus")
    c0 = before["opcounters"]["command"]
    for _ in range(3):
        client.admin.command("ping")
    after = client.admin.command("serverStatus")
    c1 = after["opcounters"]["command"]
    expect(c1 >= c0 + 3, f"opcounters.command went from {c0} to {c1} after 3 pings")
    expect(before.get("process") == "mongos", f"serverStatus.process {before.get('process')!r}")
    expect(after["uptime"] >= before["uptime"], "uptime went backwards")
    return f"command {c0} -> {c1}"


def t_command_not_found():
    try:
        client.admin.command({"definitelyNotACommand": 1})
    except OperationFailure as e:
        expect(e.code == 59, f"code {e.code}, want 59: {e.details!r}")
        expect(e.details.get("codeName") == "CommandNotFound", f"codeName {e.details.get('codeName')!r}")
        expect(e.details.get("ok") == 0, f"ok {e.details.get('ok')!r}")
        expect("definitelyNotACommand" in e.details.get("errmsg", ""), f"errmsg {e.details.get('errmsg')!r}")
        return e.details["errmsg"]
    raise AssertionError("an unknown command did not raise OperationFailure")


def t_topology():
    client.admin.command("ping")
    td = client.topology_description
    expect(td.topology_type_name == "Sharded", f"topology type {td.topology_type_name}")
    servers = list(td.server_descriptions().values())
    expect(len(servers) == 1, f"{len(servers)} servers")
    expect(servers[0].server_type_name == "Mongos", f"server type {servers[0].server_type_name}")
    return f"{td.topology_type_name} / {servers[0].server_type_name}"


def t_compression_zlib_driver():
    sep = "&" if "?" in URI else "?"
    zc = MongoClient(URI + sep + "compressors=zlib", serverSelectionTimeoutMS=TIMEOUT_MS)
    try:
        # ping and buildInfo go out as OP_COMPRESSED once zlib is negotiated.
        expect(zc.admin.command("ping").get("ok") == 1.0, "ping over zlib")
        expect(zc.server_info().get("version") == "7.0.0", "buildInfo over zlib")
        # What the driver negotiated on its pooled connection (handshake reply `compression`).
        # (pymongo internals, pinned version: tests/clients/requirements.txt)
        ctxs = [type(conn.compression_context).__name__
                for server in zc._topology._servers.values() for conn in server.pool.conns]
        expect(ctxs, "no pooled connection to inspect")
        expect(all(c == "ZlibContext" for c in ctxs), f"negotiated compression contexts: {ctxs}")
        return f"driver negotiated {ctxs}"
    finally:
        zc.close()


def t_compression_zlib_wire():
    host, port = host_port(URI)
    with socket.create_connection((host, port), timeout=10) as s:
        send_op_msg(s, 1, {"hello": 1, "compression": ["zlib"], "$db": "admin"})
        reply, comp = recv_op_msg(s, 1)
        expect(comp is None, "handshake reply was compressed")
        expect(reply.get("compression") == ["zlib"], f"hello compression echo {reply.get('compression')!r}")
        send_op_msg(s, 2, {"ping": 1, "$db": "admin"}, compress=True)
        reply, comp = recv_op_msg(s, 2)
        expect(reply.get("ok") == 1.0, f"compressed ping reply {reply!r}")
        expect(comp == ZLIB_ID, "reply to a zlib-compressed request was not compressed")
    with socket.create_connection((host, port), timeout=10) as s:
        send_op_msg(s, 1, {"hello": 1, "compression": ["nonesuch", "zlib"], "$db": "admin"})
        reply, _ = recv_op_msg(s, 1)
        expect(reply.get("compression") == ["zlib"], f"unknown compressors not dropped: {reply.get('compression')!r}")
    return "hello echoes ['zlib']; OP_COMPRESSED ping answered in zlib"


check("server_info(): version 7.0.0, versionArray of int32", t_server_info)
check("hello: fields, values and BSON types (topologyVersion.counter Int64)", t_hello)
check("ping", t_ping)
check("getLog startupWarnings is non-empty", t_get_log)
check("serverStatus opcounters increase", t_opcounters)
check("unknown command -> OperationFailure code 59 CommandNotFound", t_command_not_found)
check("topology Sharded, server type Mongos", t_topology)
check("compressors=zlib: driver negotiates zlib and works", t_compression_zlib_driver)
check("wire: hello compression ['zlib'] echoed; OP_COMPRESSED round trip", t_compression_zlib_wire)
client.close()

finish("pymongo")
