// Node.js driver smoke test against a running Cairn server.
//
//   node smoke_node.mjs mongodb://127.0.0.1:PORT/
//
// Prints one `ok`/`FAIL` line per check and a closing `node: N passed, N failed` line; exits 1
// when a check failed. Started by tests/clients/run.sh.
//
// Connecting exercises the legacy handshake: without serverApi or loadBalanced the driver
// sends its first `isMaster` as OP_QUERY on admin.$cmd and expects an OP_REPLY.
//
// Compression: the driver's zstd (and snappy) support needs native add-ons
// (@mongodb-js/zstd, snappy) that are not installed here, so the compressed path is checked
// with zlib, which the driver implements with Node's built-in zlib.

import assert from 'node:assert/strict';
import { Long, MongoClient, MongoServerError, ObjectId } from 'mongodb';

const uri = process.argv[2] ?? 'mongodb://127.0.0.1:27017/';
const TIMEOUT_MS = 10_000;

let passed = 0;
let failed = 0;

async function check(name, fn) {
  try {
    const detail = await fn();
    passed += 1;
    console.log(`ok   - ${name}${detail ? ` (${detail})` : ''}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL - ${name}: ${e?.stack ?? e}`);
  }
}

function withOption(u, opt) {
  return u + (u.includes('?') ? '&' : '?') + opt;
}

// Keep every heartbeat reply: the first one is the monitor's handshake reply to isMaster.
const heartbeats = [];
const client = new MongoClient(withOption(uri, 'compressors=zlib'), {
  serverSelectionTimeoutMS: TIMEOUT_MS,
  appName: 'cairn-smoke-node',
});
client.on('serverHeartbeatSucceeded', (e) => heartbeats.push(e.reply));
const admin = client.db().admin();

await check('connect (legacy OP_QUERY isMaster handshake)', async () => {
  await client.connect();
  assert.ok(heartbeats.length >= 1, 'no successful heartbeat');
  const hs = heartbeats[0];
  assert.equal(hs.ismaster, true, `handshake ismaster: ${JSON.stringify(hs)}`);
  assert.equal(hs.helloOk, true, 'handshake reply lacks helloOk: true');
  assert.equal(hs.msg, 'isdbgrid');
  return `handshake reply has ${Object.keys(hs).length} fields`;
});

await check('topology is Sharded, server type Mongos', async () => {
  const desc = client.topology?.description;
  assert.ok(desc, 'no topology description');
  assert.equal(desc.type, 'Sharded');
  const types = [...desc.servers.values()].map((s) => s.type);
  assert.deepEqual(types, ['Mongos']);
  return `${desc.type} / ${types}`;
});

await check('admin.command({hello: 1})', async () => {
  const h = await admin.command({ hello: 1 }, { promoteLongs: false });
  assert.equal(h.ok, 1);
  assert.equal(h.isWritablePrimary, true);
  assert.equal(h.msg, 'isdbgrid');
  assert.equal(h.maxWireVersion, 21);
  assert.equal(h.minWireVersion, 0);
  assert.equal(h.maxBsonObjectSize, 16 * 1024 * 1024);
  assert.equal(h.maxMessageSizeBytes, 48_000_000);
  assert.equal(h.maxWriteBatchSize, 100_000);
  assert.equal(h.logicalSessionTimeoutMinutes, 30);
  assert.ok(h.localTime instanceof Date, `localTime is ${typeof h.localTime}`);
  assert.ok(Number.isInteger(h.connectionId) && h.connectionId > 0, `connectionId ${h.connectionId}`);
  assert.ok(h.topologyVersion?.processId instanceof ObjectId, 'topologyVersion.processId is not an ObjectId');
  assert.ok(h.topologyVersion.counter instanceof Long, 'topologyVersion.counter is not an Int64 (Long)');
  return `connectionId ${h.connectionId}`;
});

await check('buildInfo: version 7.0.0', async () => {
  const b = await admin.command({ buildInfo: 1 });
  assert.equal(b.ok, 1);
  assert.equal(b.version, '7.0.0');
  assert.deepEqual(b.versionArray.slice(0, 3), [7, 0, 0]);
  const info = await admin.buildInfo();
  assert.equal(info.version, '7.0.0');
  return b.version;
});

await check('ping', async () => {
  assert.deepEqual(await admin.command({ ping: 1 }), { ok: 1 });
  const r = await client.db('another').command({ ping: 1 });
  assert.equal(r.ok, 1);
});

await check('unknown command -> MongoServerError code 59 CommandNotFound', async () => {
  await assert.rejects(admin.command({ definitelyNotACommand: 1 }), (e) => {
    assert.ok(e instanceof MongoServerError, `${e?.name}: ${e?.message}`);
    assert.equal(e.code, 59);
    assert.equal(e.codeName, 'CommandNotFound');
    return true;
  });
});

await check('compressors=zlib: the server agrees to zlib', async () => {
  const hs = heartbeats[0];
  assert.deepEqual(hs.compression, ['zlib'], `handshake compression: ${JSON.stringify(hs.compression)}`);
  // These go out as OP_COMPRESSED (zlib) now that it is negotiated.
  for (let i = 0; i < 3; i += 1) assert.equal((await admin.command({ ping: 1 })).ok, 1);
  const s = await admin.command({ serverStatus: 1 });
  assert.equal(s.ok, 1);
  return `network.bytesIn ${s.network?.bytesIn}, physicalBytesIn ${s.network?.physicalBytesIn}`;
});

await client.close();

console.log(`node: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
