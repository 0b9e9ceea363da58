#!/usr/bin/env bash
# Real-client smoke tests: PyMongo (smoke_pymongo.py; manual_pymongo.py runs the MongoDB
# manual's operator and query-tutorial examples, manual_agg_pymongo.py its aggregation stage and
# accumulator examples; mongoengine_agg.py MongoEngine's aggregation helpers; validation_pymongo.py
# document validation), the Node.js
# driver, the Go driver and mongosh
# (scripted and interactive through a pseudo-terminal) against a freshly started cairn server;
# a PyMongo storage test (storage_pymongo.py) that runs its own server and restarts it on the
# same data dir; PyMongo and mongosh over TLS (tls_clients.py, its own requireTLS server);
# PyMongo fail-point and operator checks (ops_pymongo.py) on their own server
# started with test commands; and a fixed subset of PyMongo's own test suite
# (tests/pymongo-suite/ci-subset.txt) on another such server; and access control
# (auth_pymongo.py, auth_node.mjs, mongosh logins) against a server started with --auth and an
# initial root user.
#
#   bash tests/clients/run.sh
#
# Environment:
#   CAIRN_BIN         server binary to test (default: <repo>/target/debug/cairn, built first
#                     with `cargo build --bin cairn`)
#   CAIRN_SKIP_BUILD  1 = do not run cargo build for the default binary
#   CAIRN_VENV        Python venv with pymongo (default <repo>/.venv; created when missing and
#                     brought to tests/clients/requirements.txt)
#
# Node packages (mongosh, mongodb) are installed from package-lock.json into
# tests/clients/node_modules with `npm ci` whenever the lockfile changed since the last install.
# `cond && ok ... || bad ...` is safe here: ok() and bad() always return 0.
# shellcheck disable=SC2015
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$REPO/tests/clients"
T0=$SECONDS
PASSED=0
FAILED=0

log() { printf '[clients %4ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() {
    printf '[clients] FAIL: %s\n' "$*" >&2
    exit 1
}
ok() {
    PASSED=$((PASSED + 1))
    printf 'ok   - %s\n' "$*"
}
bad() {
    FAILED=$((FAILED + 1))
    printf 'FAIL - %s\n' "$*"
}

WORK="$(mktemp -d /tmp/cairn-clients.XXXXXX)"
SERVER_PID=""
cleanup() {
    local rc=$?
    set +e
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null
        for _ in $(seq 50); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "[clients] server did not stop on SIGTERM within 10s; killing it" >&2
            kill -KILL "$SERVER_PID" 2>/dev/null
        fi
        wait "$SERVER_PID" 2>/dev/null
    fi
    if { [ "$rc" != 0 ] || [ "$FAILED" != 0 ]; } && [ -f "$WORK/server.log" ]; then
        echo "---- server log (last 25 lines) ----" >&2
        tail -n 25 "$WORK/server.log" >&2
        echo "------------------------------------" >&2
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 1. the server binary -------------------------------------------------------------------
if [ -n "${CAIRN_BIN:-}" ]; then
    BIN="$CAIRN_BIN"
else
    BIN="$REPO/target/debug/cairn"
    if [ "${CAIRN_SKIP_BUILD:-0}" != 1 ]; then
        log "cargo build --bin cairn"
        (cd "$REPO" && cargo build --bin cairn) || die "cargo build --bin cairn failed"
    fi
fi
[ -x "$BIN" ] || die "server binary $BIN not found (set CAIRN_BIN or build it)"

# --- 2. Node packages -----------------------------------------------------------------------
command -v node >/dev/null 2>&1 || die "node is not installed (mongosh 2.x needs Node.js >= 20)"
command -v npm >/dev/null 2>&1 || die "npm is not installed"
node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' ||
    die "Node.js $(node --version) is too old; mongosh 2.x and the mongodb 7.x driver need >= 20"
STAMP="$HERE/node_modules/.cairn-installed-lock"
if [ ! -x "$HERE/node_modules/.bin/mongosh" ] || [ ! -d "$HERE/node_modules/mongodb" ] ||
    ! cmp -s "$HERE/package-lock.json" "$STAMP"; then
    log "npm ci (mongosh, mongodb) into tests/clients/node_modules"
    # --ignore-scripts: the native add-ons some dependencies try to compile (os-dns-native,
    # cpu-features, ...) are optional and not needed here; skipping them keeps the install the
    # same whichever npm version runs it.
    (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm ci failed"
    cp "$HERE/package-lock.json" "$STAMP"
fi
MONGOSH="$HERE/node_modules/.bin/mongosh"
log "mongosh $("$MONGOSH" --version), mongodb driver $(node -p 'require(process.argv[1]).version' "$HERE/node_modules/mongodb/package.json")"

# --- 3. Python venv -------------------------------------------------------------------------
VENV="${CAIRN_VENV:-$REPO/.venv}"
case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
if [ ! -x "$VENV/bin/python" ]; then
    log "creating venv $VENV"
    python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --disable-pip-version-check -r "$HERE/requirements.txt" ||
    die "pip install -r tests/clients/requirements.txt failed"
log "pymongo $("$PY" -c 'import pymongo; print(pymongo.version)')"

# --- 4. start the server --------------------------------------------------------------------
mkdir -p "$WORK/data"
"$BIN" --port 0 --log-format json --log-level info --data-dir "$WORK/data" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PORT=""
deadline=$((SECONDS + 30))
while [ -z "$PORT" ]; do
    PORT="$(sed -n 's/.*"msg":"Waiting for connections".*"port":\([0-9][0-9]*\).*/\1/p' "$WORK/server.log" | head -n 1)"
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited before it was ready"
    [ "$SECONDS" -lt "$deadline" ] || die "no 'Waiting for connections' log line within 30s"
    sleep 0.1
done
URI="mongodb://127.0.0.1:$PORT/"
log "server pid $SERVER_PID listening on $URI"

# --- 5. the checks --------------------------------------------------------------------------
# A suite prints `ok - ...` / `FAIL - ...` lines; they are counted here.
run_suite() {
    local name="$1"
    shift
    local out="$WORK/$name.out" rc=0
    timeout 300 "$@" >"$out" 2>&1 || rc=$?
    sed 's/^/  /' "$out"
    PASSED=$((PASSED + $(grep -c '^ok ' "$out" || true)))
    FAILED=$((FAILED + $(grep -c '^FAIL ' "$out" || true)))
    if [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$out"; then
        bad "$name crashed or timed out (exit $rc, output above)"
    fi
}

log "PyMongo"
run_suite pymongo "$PY" "$HERE/smoke_pymongo.py" "$URI"

# The MongoDB 7.0 manual's query/projection/update operator and query-tutorial examples
# (database cairn_manual); known deviations are printed as `# deviation:` lines, not counted.
log "PyMongo: the manual's examples"
run_suite manual "$PY" "$HERE/manual_pymongo.py" "$URI"
run_suite manual-expr "$PY" "$HERE/manual_expr_pymongo.py" "$URI"

# The manual's aggregation stage and accumulator examples (database cairn_manual_agg).
log "PyMongo: the manual's aggregation examples"
run_suite manual_agg "$PY" "$HERE/manual_agg_pymongo.py" "$URI"

log "MongoEngine aggregation helpers"
run_suite mongoengine "$PY" "$HERE/mongoengine_agg.py" "$URI"

# Its own server on its own data dir: it stops (SIGTERM, SIGKILL) and restarts the server
# itself to check that documents of every BSON type survive restarts byte for byte.
log "PyMongo storage round trip across restarts"
run_suite storage "$PY" "$HERE/storage_pymongo.py" "$BIN" "$WORK/storage"

# Its own server started with --enable-test-commands: fail points driving PyMongo's retries,
# and the operator commands.
log "PyMongo: fail points and operator commands"
run_suite ops "$PY" "$HERE/ops_pymongo.py" "$BIN" "$WORK/ops"

# PyMongo's own test suite, the fixed subset in tests/pymongo-suite/ci-subset.txt, against its
# own server started with test commands (the whole suite takes hours; see its run.sh).
log "PyMongo's own test suite (CI subset)"
SUITE_OUT="$WORK/pymongo-suite"
mkdir -p "$SUITE_OUT"
if CAIRN_BIN="$BIN" CAIRN_PYMONGO_SUITE_OUT="$SUITE_OUT" CAIRN_PYMONGO_TEST_TIMEOUT=120 \
    CAIRN_PYMONGO_TESTS="$(grep -v '^#' "$REPO/tests/pymongo-suite/ci-subset.txt")" \
    timeout 900 bash "$REPO/tests/pymongo-suite/run.sh" >"$WORK/pymongo-suite.log" 2>&1; then
    ok "PyMongo's own suite (CI subset): $(head -n 1 "$SUITE_OUT/summary.txt")"
else
    sed 's/^/  /' "$WORK/pymongo-suite.log" | tail -n 60
    bad "PyMongo's own suite (CI subset) failed"
fi

# Its own server in requireTLS mode with a throwaway PKI made by the openssl CLI: PyMongo and
# mongosh with tls=true, client certificates, refused plain clients, rotateCertificates.
log "PyMongo and mongosh over TLS"
run_suite tls "$PY" "$HERE/tls_clients.py" "$BIN" "$WORK/tls" "$MONGOSH"

log "Node.js driver"
run_suite node node "$HERE/smoke_node.mjs" "$URI"

# Sessions, transactions (with_transaction / withTransaction), retryable writes and snapshot
# reads (databases cairn_txn, cairn_txn_node).
log "PyMongo and Node.js: transactions"
run_suite txn "$PY" "$HERE/txn_pymongo.py" "$URI"
run_suite txn_node node "$HERE/txn_node.mjs" "$URI"

log "PyMongo: change streams, capped collections, tailable cursors"
run_suite streams "$PY" "$HERE/streams_pymongo.py" "$URI"

# The manual's $jsonSchema example, errInfo, bypass_document_validation, collMod, warn
# (database cairn_validation).
log "PyMongo: document validation"
run_suite validation "$PY" "$HERE/validation_pymongo.py" "$URI"

# The Go driver, as Debian packages it: built offline in GOPATH mode (no module proxy).
GO_DRIVER=/usr/share/gocode/src/go.mongodb.org/mongo-driver
if ! command -v go >/dev/null 2>&1 || [ ! -d "$GO_DRIVER" ]; then
    log "installing Go and the MongoDB Go driver (apt)"
    [ "$(id -u)" = 0 ] || die "Go and golang-mongodb-mongo-driver-dev are missing and installing them needs root"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q golang-go golang-mongodb-mongo-driver-dev >"$WORK/apt-go.log" 2>&1 ||
        { apt-get update -q >>"$WORK/apt-go.log" 2>&1 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q golang-go golang-mongodb-mongo-driver-dev >>"$WORK/apt-go.log" 2>&1; } ||
        die "apt-get install golang-go golang-mongodb-mongo-driver-dev failed (see $WORK/apt-go.log)"
fi
log "Go driver"
if (cd "$HERE/go" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$WORK/gocache" GOFLAGS= \
    go build -o "$WORK/smoke_go" ./smoke_go.go) >"$WORK/go-build.log" 2>&1; then
    run_suite go "$WORK/smoke_go" "$URI"
else
    sed 's/^/  /' "$WORK/go-build.log"
    bad "go: building the Go smoke test failed"
fi

# mongosh gets its own home (history, logs, config) and a global config that turns off
# telemetry and the update check (no network beyond this machine).
mkdir -p "$WORK/home"
cat >"$WORK/mongosh.conf" <<'CONF'
mongosh:
  forceDisableTelemetry: true
  updateURL: ''
CONF
msh() {
    HOME="$WORK/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$WORK/mongosh.conf" \
        timeout 120 "$MONGOSH" "$URI" --quiet "$@"
}
# expect_eval NAME EXPRESSION MODE WANT: MODE is `equals` (whole trimmed stdout) or `contains`.
expect_eval() {
    local name="$1" expr="$2" mode="$3" want="$4" out rc=0
    out="$(msh --eval "$expr" 2>"$WORK/mongosh.err")" || rc=$?
    out="$(printf '%s' "$out" | tr -d '\r' | sed -e 's/[[:space:]]*$//')"
    if [ "$rc" != 0 ]; then
        bad "$name: mongosh exited $rc; stdout: $out; stderr: $(cat "$WORK/mongosh.err")"
    elif [ "$mode" = equals ] && [ "$out" = "$want" ]; then
        ok "$name"
    elif [ "$mode" = contains ] && [[ "$out" == *"$want"* ]]; then
        ok "$name"
    else
        bad "$name: want ($mode) '$want', got '$out'"
    fi
}

log "mongosh"
expect_eval "mongosh --eval 'db.version()' prints 7.0.0" 'db.version()' equals "7.0.0"
expect_eval "mongosh --eval 'JSON.stringify(db.hello())' says isdbgrid" 'JSON.stringify(db.hello())' contains '"msg":"isdbgrid"'
expect_eval "mongosh --eval 'db.runCommand({buildInfo:1}).ok' prints 1" 'db.runCommand({buildInfo:1}).ok' equals "1"
# mongosh 2.x throws when a command answers ok: 0
expect_eval "mongosh: an unknown command throws code 59 CommandNotFound" \
    '(() => { try { db.runCommand({definitelyNotACommand: 1}); return "no error"; } catch (e) { return e.code + " " + e.codeName; } })()' \
    equals "59 CommandNotFound"
expect_eval "mongosh: db.serverStatus().process is mongos" 'db.serverStatus().process' equals "mongos"
# Storage through mongosh (database cairn_mongosh is used by these checks only). Canonical
# EJSON shows the BSON types: a JS integer is stored as int32, 1.5 as a double.
# shellcheck disable=SC2016 # the `$`s are EJSON, not shell
expect_eval "mongosh: insertOne then findOne({_id}) round-trips types and field order" \
    'const d = db.getSiblingDB("cairn_mongosh"); const r = d.c.insertOne({a: 1, s: "x", f: 1.5, n: NumberLong("5"), dec: NumberDecimal("1.10"), arr: [1, {b: null}]}); const f = d.c.findOne({_id: r.insertedId}); EJSON.stringify({...f, _id: f._id.equals(r.insertedId)}, {relaxed: false})' \
    equals '{"_id":true,"a":{"$numberInt":"1"},"s":"x","f":{"$numberDouble":"1.5"},"n":{"$numberLong":"5"},"dec":{"$numberDecimal":"1.10"},"arr":[{"$numberInt":"1"},{"b":null}]}'
expect_eval "mongosh: db.getCollectionNames()" \
    'JSON.stringify(db.getSiblingDB("cairn_mongosh").getCollectionNames())' equals '["c"]'
expect_eval "mongosh: db.adminCommand({listDatabases: 1}) lists cairn_mongosh" \
    'db.adminCommand({listDatabases: 1}).databases.map((d) => d.name).includes("cairn_mongosh")' equals "true"
expect_eval "mongosh: 'show dbs' lists cairn_mongosh" 'show dbs' contains "cairn_mongosh"
# Queries, updates, indexes and explain through mongosh's own helpers.
expect_eval "mongosh: insertMany, updateMany with \$inc, find with a filter, sort and limit" \
    'const d = db.getSiblingDB("cairn_mongosh"); d.q.insertMany([1, 2, 3, 4, 5].map((i) => ({_id: i, n: i, tag: i % 2 ? "odd" : "even"}))); d.q.updateMany({tag: "odd"}, {$inc: {n: 10}}); JSON.stringify(d.q.find({n: {$gt: 4}}, {_id: 0, n: 1}).sort({n: -1}).limit(3).toArray())' \
    equals '[{"n":15},{"n":13},{"n":11}]'
expect_eval "mongosh: createIndex, getIndexes and an IXSCAN in explain()" \
    'const d = db.getSiblingDB("cairn_mongosh"); d.q.createIndex({n: 1}); const p = d.q.find({n: 13}).explain().queryPlanner.winningPlan; JSON.stringify([d.q.getIndexes().map((i) => i.name), p.stage, p.inputStage.stage, p.inputStage.indexName])' \
    equals '[["_id_","n_1"],"FETCH","IXSCAN","n_1"]'
expect_eval "mongosh: explain(\"executionStats\") of sort+limit on the index reads 2 keys" \
    'const e = db.getSiblingDB("cairn_mongosh").q.find().sort({n: -1}).limit(2).explain("executionStats").executionStats; JSON.stringify([e.nReturned, e.totalKeysExamined, e.totalDocsExamined])' \
    equals '[2,2,2]'
expect_eval "mongosh: a duplicate on a unique index throws E11000 with keyValue" \
    '(() => { const d = db.getSiblingDB("cairn_mongosh"); d.u.createIndex({k: 1}, {unique: true}); d.u.insertOne({k: 1}); try { d.u.insertOne({k: 1}); return "no error"; } catch (e) { return e.code + " " + JSON.stringify(e.errInfo || e.keyValue || (e.writeErrors && e.writeErrors[0].keyValue) || e.result?.writeErrors?.[0]?.keyValue || null); } })()' \
    contains "11000"

# shellcheck disable=SC2016 # the `$`s are query operators, not shell
expect_eval "mongosh: session.withTransaction commits, abortTransaction leaves nothing" \
    'const s = db.getMongo().startSession(); const c = s.getDatabase("cairn_mongosh_txn").c; s.withTransaction(() => { c.insertOne({_id: 1}); c.updateOne({_id: 1}, {$set: {a: 1}}); }); s.startTransaction(); c.insertOne({_id: 2}); s.abortTransaction(); JSON.stringify(db.getSiblingDB("cairn_mongosh_txn").c.find().toArray())' \
    equals '[{"_id":1,"a":1}]'
# Aggregation through mongosh's helpers: countDocuments() and stats() run aggregate
# ($group count, $collStats).
expect_eval "mongosh: countDocuments() with and without a filter, and stats()" \
    'const d = db.getSiblingDB("cairn_mongosh"); d.agg.insertMany([{k: 1}, {k: 2}, {k: 3}]); const s = d.agg.stats(); JSON.stringify([d.agg.countDocuments(), d.agg.countDocuments({k: {$gte: 2}}), s.count, s.ns])' \
    equals '[3,2,3,"cairn_mongosh.agg"]'
expect_eval "mongosh: aggregate with \$group and \$sort" \
    'JSON.stringify(db.getSiblingDB("cairn_mongosh").agg.aggregate([{$group: {_id: {$mod: ["$k", 2]}, n: {$sum: 1}}}, {$sort: {_id: 1}}]).toArray())' \
    equals '[{"_id":0,"n":1},{"_id":1,"n":2}]'

# shellcheck disable=SC2016
expect_eval "mongosh: watch() and tryNext() see an insert" \
    'const c = db.getSiblingDB("cairn_mongosh_cs").c; const w = c.watch(); w.tryNext(); c.insertOne({_id: 7}); let e = null; for (let i = 0; i < 20 && !e; i++) { e = w.tryNext(); } JSON.stringify([e.operationType, e.documentKey])' \
    equals '["insert",{"_id":7}]'

expect_eval "mongosh: setProfilingLevel(2) makes a capped system.profile; stats() and \$natural: -1" \
    'const d = db.getSiblingDB("cairn_mongosh_prof"); d.setProfilingLevel(2); d.c.findOne(); d.setProfilingLevel(0); const s = d.system.profile.stats(); JSON.stringify([s.capped, s.maxSize, d.system.profile.find().sort({$natural: -1}).limit(1).next().command.profile])' \
    equals '[true,1048576,0]'

if out="$(HOME="$WORK/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$WORK/mongosh.conf" \
    timeout 180 "$PY" "$HERE/mongosh_interactive.py" "$MONGOSH" "$URI" 2>&1)"; then
    ok "mongosh interactive session in a pty: $out"
else
    bad "mongosh interactive session in a pty"
    printf '%s\n' "$out" | sed 's/^/  /'
fi

# --- 5b. access control: a second server with --auth and an initial root user ----------------
# Started with CAIRN_INITDB_ROOT_USERNAME/_PASSWORD (which also turn --auth on); PyMongo,
# Node.js and mongosh log in with SCRAM, fail alike on bad credentials, and are refused
# unauthenticated.
log "access control (--auth): PyMongo, Node.js, mongosh"
AUTH_USER=cairn-root
AUTH_PWD='s3cret:p@ss/word'
mkdir -p "$WORK/auth-data"
CAIRN_INITDB_ROOT_USERNAME="$AUTH_USER" CAIRN_INITDB_ROOT_PASSWORD="$AUTH_PWD" \
    "$BIN" --auth --port 0 --log-format json --data-dir "$WORK/auth-data" >"$WORK/auth-server.log" 2>&1 &
AUTH_PID=$!
AUTH_PORT=""
deadline=$((SECONDS + 30))
while [ -z "$AUTH_PORT" ]; do
    AUTH_PORT="$(sed -n 's/.*"msg":"Waiting for connections".*"port":\([0-9][0-9]*\).*/\1/p' "$WORK/auth-server.log" | head -n 1)"
    [ -n "$AUTH_PORT" ] && break
    kill -0 "$AUTH_PID" 2>/dev/null || { bad "the --auth server exited before it was ready"; break; }
    [ "$SECONDS" -lt "$deadline" ] || { bad "the --auth server did not start within 30s"; break; }
    sleep 0.1
done
if [ -n "$AUTH_PORT" ]; then
    AUTH_URI="mongodb://127.0.0.1:$AUTH_PORT/"
    run_suite auth_pymongo "$PY" "$HERE/auth_pymongo.py" "$AUTH_URI" "$AUTH_USER" "$AUTH_PWD"
    run_suite auth_node node "$HERE/auth_node.mjs" "$AUTH_URI" "$AUTH_USER" "$AUTH_PWD"
    ENC_PWD="$(node -p 'encodeURIComponent(process.argv[1])' "$AUTH_PWD")"
    ROOT_URI="mongodb://$AUTH_USER:$ENC_PWD@127.0.0.1:$AUTH_PORT/?authSource=admin"
    amsh() {
        HOME="$WORK/home" MONGOSH_GLOBAL_CONFIG_FILE_FOR_TESTING="$WORK/mongosh.conf" \
            timeout 120 "$MONGOSH" "$@" --quiet 2>"$WORK/mongosh.err" | tr -d '\r' | sed -e 's/[[:space:]]*$//'
    }
    out="$(amsh "$ROOT_URI" --eval 'db.getSiblingDB("cairn_auth_sh").c.insertOne({a: 1}); db.getSiblingDB("cairn_auth_sh").c.countDocuments()')"
    [ "$out" = 1 ] && ok "mongosh logs in with a URI's credentials (SCRAM-SHA-256)" ||
        bad "mongosh login: got '$out' ($(cat "$WORK/mongosh.err"))"
    # shellcheck disable=SC2016
    out="$(amsh "$AUTH_URI" --eval 'try { db.getSiblingDB("cairn_auth_sh").c.findOne(); "no error" } catch (e) { e.code + " " + e.message }')"
    [ "$out" = "13 Command find requires authentication" ] && ok "mongosh unauthenticated: 13 Command find requires authentication" ||
        bad "mongosh unauthenticated: got '$out'"
    out="$(amsh "$AUTH_URI" --eval "JSON.stringify(db.getSiblingDB('admin').auth('$AUTH_USER', '$AUTH_PWD')) + ' ' + db.getSiblingDB('cairn_auth_sh').c.countDocuments()")"
    [ "$out" = '{"ok":1} 1' ] && ok "mongosh db.auth() then a read" || bad "mongosh db.auth(): got '$out'"
    out="$(amsh "$AUTH_URI" --eval "try { db.getSiblingDB('admin').auth('$AUTH_USER', 'wrong'); 'no error' } catch (e) { e.code + ' ' + e.message }")"
    [ "$out" = "18 Authentication failed." ] && ok "mongosh db.auth() with a wrong password: 18 Authentication failed." ||
        bad "mongosh wrong password: got '$out'"
    out="$(amsh "$ROOT_URI" --eval 'db.getSiblingDB("admin").createUser({user: "sh", pwd: "shpw", roles: ["root"]}); JSON.stringify(db.getSiblingDB("admin").getUser("sh").roles)')"
    [ "$out" = '[{"role":"root","db":"admin"}]' ] && ok "mongosh createUser and getUser" || bad "mongosh createUser/getUser: got '$out'"
    if grep -q "$AUTH_PWD" "$WORK/auth-server.log"; then
        bad "the root password appears in the --auth server's log"
    else
        ok "the root password never appears in the server log"
    fi
fi
kill -TERM "$AUTH_PID" 2>/dev/null || true
wait "$AUTH_PID" 2>/dev/null || true

# --- 6. the server must still be up and stop cleanly ------------------------------------------
if kill -0 "$SERVER_PID" 2>/dev/null; then
    ok "server still running after all clients"
    kill -TERM "$SERVER_PID"
    rc=0
    for _ in $(seq 75); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        bad "server still running 15s after SIGTERM"
    else
        wait "$SERVER_PID" || rc=$?
        [ "$rc" = 0 ] && ok "server exits 0 on SIGTERM" || bad "server exit status $rc after SIGTERM"
        SERVER_PID=""
    fi
else
    bad "server died during the tests"
fi

log "done in $((SECONDS - T0))s"
echo "clients: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ] || die "$FAILED client check(s) failed"
