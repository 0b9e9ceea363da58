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
import { Long, MongoBulkWriteError, MongoClient, MongoServerError, ObjectId } from 'mongodb';

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
  monitorCommands: true,
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
  // A router adds its cluster time to every reply.
  const p = await admin.command({ ping: 1 });
  assert.deepEqual(Object.keys(p), ['ok', '$clusterTime', 'operationTime']);
  assert.equal(p.ok, 1);
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

// --- storage: insertMany, find over getMore, duplicate keys, the catalog, drop ---------------

const DB = 'cairn_node';
const db = client.db(DB);
const items = db.collection('items');
const started = [];
const succeeded = [];
client.on('commandStarted', (e) => started.push(e));
client.on('commandSucceeded', (e) => succeeded.push(e));
const ITEMS = Array.from({ length: 7 }, (_, i) => ({ _id: i, s: `v${i}`, sq: i * i, tags: ['t', i] }));

await check('insertMany 7 documents', async () => {
  await db.dropDatabase();
  const r = await items.insertMany(ITEMS);
  assert.equal(r.acknowledged, true);
  assert.equal(r.insertedCount, ITEMS.length);
  assert.deepEqual(Object.values(r.insertedIds), ITEMS.map((d) => d._id));
  return `insertedCount ${r.insertedCount}`;
});

await check('find with batchSize 2 iterates across getMore batches', async () => {
  started.length = 0;
  succeeded.length = 0;
  const got = [];
  for await (const d of items.find({}).batchSize(2)) got.push(d);
  assert.deepEqual(got, ITEMS);
  const getMores = started.filter((e) => e.commandName === 'getMore');
  assert.ok(getMores.length >= 3, `${getMores.length} getMore commands for 7 documents in batches of 2`);
  assert.ok(getMores.every((e) => e.command.batchSize === 2), 'getMore without batchSize 2');
  const batches = succeeded
    .filter((e) => e.commandName === 'find' || e.commandName === 'getMore')
    .map((e) => (e.reply.cursor.firstBatch ?? e.reply.cursor.nextBatch).length);
  assert.ok(batches.every((n) => n <= 2), `batch sizes ${batches}`);
  const lastId = succeeded.at(-1).reply.cursor.id;
  assert.equal(Number(lastId), 0, `the last batch leaves cursor id ${lastId}`);
  const killed = started.filter((e) => e.commandName === 'killCursors').length;
  assert.equal(killed, 0, 'an exhausted cursor was killed');
  return `batches ${batches.join('+')}`;
});

await check('find by _id, by equality; sort _id -1 with limit', async () => {
  assert.deepEqual(await items.findOne({ _id: 4 }), ITEMS[4]);
  assert.equal(await items.findOne({ _id: 99 }), null);
  assert.deepEqual(await items.find({ s: 'v3' }).toArray(), [ITEMS[3]]);
  const top = await items.find().sort({ _id: -1 }).limit(3).toArray();
  assert.deepEqual(top.map((d) => d._id), [6, 5, 4]);
});

await check('duplicate _id -> MongoServerError code 11000 (insertOne and ordered insertMany)', async () => {
  await assert.rejects(items.insertOne({ _id: 3, s: 'again' }), (e) => {
    assert.ok(e instanceof MongoServerError, `${e?.name}: ${e?.message}`);
    assert.equal(e.code, 11000);
    assert.deepEqual(e.keyValue, { _id: 3 });
    assert.match(e.message, /E11000 duplicate key error/);
    return true;
  });
  await assert.rejects(items.insertMany([{ _id: 100 }, { _id: 2 }, { _id: 101 }]), (e) => {
    assert.ok(e instanceof MongoBulkWriteError, `${e?.name}: ${e?.message}`);
    assert.equal(e.code, 11000);
    assert.equal(e.insertedCount, 1);
    assert.equal(e.writeErrors.length, 1);
    assert.equal(e.writeErrors[0].index, 1);
    assert.equal(e.writeErrors[0].code, 11000);
    return true;
  });
  assert.deepEqual(await items.findOne({ _id: 100 }), { _id: 100 });
  assert.equal(await items.findOne({ _id: 101 }), null, 'ordered insertMany went on after the error');
  assert.deepEqual(await items.findOne({ _id: 3 }), ITEMS[3]);
});

await check('listCollections / listDatabases', async () => {
  await db.createCollection('other');
  const colls = await db.listCollections().toArray();
  const names = colls.map((c) => c.name).sort();
  assert.deepEqual(names, ['items', 'other']);
  assert.ok(colls.every((c) => c.type === 'collection'), `types ${colls.map((c) => c.type)}`);
  const only = await db.listCollections({}, { nameOnly: true }).toArray();
  assert.deepEqual(only.map((c) => c.name).sort(), names);
  const dbs = await admin.listDatabases();
  assert.ok(dbs.databases.some((d) => d.name === DB), `${DB} not in ${dbs.databases.map((d) => d.name)}`);
  return `collections ${names}; databases ${dbs.databases.map((d) => d.name)}`;
});

await check('aggregate: a $lookup/$unwind/$group report and countDocuments', async () => {
  const customers = db.collection('customers');
  const orders = db.collection('orders');
  await customers.insertMany([
    { _id: 1, name: 'Ann', city: 'Oslo' },
    { _id: 2, name: 'Bob', city: 'Lima' },
    { _id: 3, name: 'Cy', city: 'Oslo' },
  ]);
  await orders.createIndex({ customer: 1 });
  await orders.insertMany([
    { _id: 10, customer: 1, total: 5 },
    { _id: 11, customer: 1, total: 7.5 },
    { _id: 12, customer: 2, total: 20 },
    { _id: 13, customer: 3, total: 1 },
  ]);
  const report = await orders
    .aggregate([
      { $lookup: { from: 'customers', localField: 'customer', foreignField: '_id', as: 'c' } },
      { $unwind: '$c' },
      { $group: { _id: '$c.city', orders: { $sum: 1 }, revenue: { $sum: '$total' }, people: { $addToSet: '$c.name' } } },
      { $sort: { revenue: -1 } },
    ])
    .toArray();
  assert.deepEqual(report, [
    { _id: 'Lima', orders: 1, revenue: 20, people: ['Bob'] },
    { _id: 'Oslo', orders: 3, revenue: 13.5, people: ['Ann', 'Cy'] },
  ]);
  assert.equal(await orders.countDocuments({ total: { $gte: 5 } }), 3);
  assert.equal(await orders.estimatedDocumentCount(), 4);
  return `${report.length} cities`;
});

await check('drop a collection, then the database', async () => {
  assert.equal(await items.drop(), true);
  const names = (await db.listCollections().toArray()).map((c) => c.name).sort();
  assert.deepEqual(names, ['customers', 'orders', 'other']);
  assert.deepEqual(await items.find().toArray(), []);
  assert.equal(await db.dropDatabase(), true);
  const dbs = (await admin.listDatabases()).databases.map((d) => d.name);
  assert.ok(!dbs.includes(DB), `${DB} still listed after dropDatabase: ${dbs}`);
});

await client.close();

console.log(`node: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
