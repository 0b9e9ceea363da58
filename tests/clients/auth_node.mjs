// The Node.js driver against a Cairn started with access control (`--auth`).
//
//   node auth_node.mjs URI ROOT_USER ROOT_PASSWORD
//
// Logs in as root with SCRAM-SHA-256 and SCRAM-SHA-1 (round-tripping a document), checks that a
// wrong password fails with code 18 and that an unauthenticated find is Unauthorized (13).
// Prints `ok`/`FAIL` lines and a closing count; exits 1 when a check failed.
import { MongoClient } from "mongodb";

const [uri, user, pwd] = process.argv.slice(2);
if (!pwd) {
  console.error("usage: node auth_node.mjs URI ROOT_USER ROOT_PASSWORD");
  process.exit(2);
}
const hostport = uri.replace(/^mongodb:\/\//, "").replace(/\/$/, "");
let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   - ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL - ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
function expect(cond, msg) {
  if (!cond) throw new Error(msg);
}
const opts = { serverSelectionTimeoutMS: 10000 };
const withCreds = (u, p, mech) =>
  `mongodb://${encodeURIComponent(u)}:${encodeURIComponent(p)}@${hostport}/?authSource=admin` +
  (mech ? `&authMechanism=${mech}` : "");

await check("Node: logs in with SCRAM-SHA-256 and SCRAM-SHA-1", async () => {
  for (const mech of ["SCRAM-SHA-256", "SCRAM-SHA-1"]) {
    const c = new MongoClient(withCreds(user, pwd, mech), opts);
    try {
      const coll = c.db("cairn_auth_node").collection("c");
      await coll.replaceOne({ _id: mech }, { _id: mech, ok: true }, { upsert: true });
      const d = await coll.findOne({ _id: mech });
      expect(d && d.ok === true, `round trip with ${mech}`);
    } finally {
      await c.close();
    }
  }
});

await check("Node: a wrong password fails with code 18", async () => {
  const c = new MongoClient(withCreds(user, "wrong"), opts);
  try {
    await c.db("admin").command({ ping: 1 });
    throw new Error("logged in with a wrong password");
  } catch (e) {
    expect(e.code === 18, `code ${e.code}: ${e.message}`);
  } finally {
    await c.close();
  }
});

await check("Node: an unauthenticated find is Unauthorized 13", async () => {
  const c = new MongoClient(uri, opts);
  try {
    await c.db("cairn_auth_node").collection("c").findOne({});
    throw new Error("find ran without authentication");
  } catch (e) {
    expect(e.code === 13, `code ${e.code}: ${e.message}`);
    expect(e.message === "Command find requires authentication", e.message);
  } finally {
    await c.close();
  }
});

console.log(`auth_node: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
