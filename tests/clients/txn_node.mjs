// Transactions through the Node.js driver: session.withTransaction against a plain URI.
//
//   node txn_node.mjs mongodb://127.0.0.1:PORT/
//
// Prints one `ok`/`FAIL` line per check (counted by tests/clients/run.sh); exits 1 when a
// check failed. Uses the database cairn_txn_node only.

import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';

const uri = process.argv[2] ?? 'mongodb://127.0.0.1:27017/';
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

const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10_000 });
await client.connect();
const db = client.db('cairn_txn_node');
await db.dropDatabase();

await check('withTransaction commits two collections atomically', async () => {
  const orders = db.collection('orders');
  const stock = db.collection('stock');
  await stock.insertOne({ _id: 'widget', qty: 10 });
  const session = client.startSession();
  try {
    await session.withTransaction(async () => {
      await stock.updateOne({ _id: 'widget' }, { $inc: { qty: -3 } }, { session });
      await orders.insertOne({ _id: 1, item: 'widget', qty: 3 }, { session });
      assert.equal(await orders.findOne({ _id: 1 }), null, 'visible before commit');
    });
  } finally {
    await session.endSession();
  }
  assert.deepEqual(await stock.findOne({ _id: 'widget' }), { _id: 'widget', qty: 7 });
  assert.deepEqual(await orders.findOne({ _id: 1 }), { _id: 1, item: 'widget', qty: 3 });
});

await check('an error in withTransaction aborts everything', async () => {
  const coll = db.collection('aborted');
  const session = client.startSession();
  await assert.rejects(
    session.withTransaction(async () => {
      await coll.insertOne({ _id: 1 }, { session });
      throw new Error('application error');
    }),
    /application error/,
  );
  await session.endSession();
  assert.equal(await coll.findOne({ _id: 1 }), null);
});

await check('concurrent withTransaction increments are not lost', async () => {
  const c = db.collection('counter');
  await c.insertOne({ _id: 1, n: 0 });
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      const session = client.startSession();
      try {
        for (let i = 0; i < 5; i++) {
          await session.withTransaction(async () => {
            const d = await c.findOne({ _id: 1 }, { session });
            await c.updateOne({ _id: 1 }, { $set: { n: d.n + 1 } }, { session });
          });
        }
      } finally {
        await session.endSession();
      }
    }),
  );
  assert.equal((await c.findOne({ _id: 1 })).n, 40);
});

await check('watch() delivers inserts and updates', async () => {
  const c = db.collection('watched');
  const stream = c.watch([], { fullDocument: 'updateLookup' });
  // The first getMore establishes nothing new: start writing once the stream is open.
  const first = stream.tryNext();
  await c.insertOne({ _id: 1, n: 1 });
  await c.updateOne({ _id: 1 }, { $inc: { n: 1 } });
  const seen = [];
  const got = await first;
  if (got) seen.push(got);
  while (seen.length < 2) {
    const e = await stream.tryNext();
    if (e) seen.push(e);
  }
  await stream.close();
  assert.deepEqual(seen.map((e) => e.operationType), ['insert', 'update']);
  assert.deepEqual(seen[1].fullDocument, { _id: 1, n: 2 });
});

await client.close();
console.log(`node txn: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
