#!/usr/bin/env bash
# Container test: build the image the way CI can (no Docker daemon, no base-image pulls) and
# check it behaves like the official `mongo` image from a client's point of view.
#
#   bash tests/container/run.sh
#
# Steps: install buildah/podman/runc if missing (Debian, as root) -> build the static release
# binary -> copy it to .ci/out/cairn -> `buildah bud --target prebuilt` -> run the image with
# host networking on a free port -> PyMongo checks, non-root user, /data/db ownership,
# healthcheck (both ways), graceful stop, and the official image's init-root variables
# (MONGO_INITDB_ROOT_USERNAME/_PASSWORD: both, or only one). The containers are always removed.
#
# Environment:
#   CAIRN_VENV         Python venv with pymongo (default <repo>/.venv; created when missing)
#   CAIRN_STATIC_BIN   use this static binary instead of building one
#   CAIRN_IMAGE        image tag (default cairn:test)
#   CAIRN_KEEP_IMAGE   1 = keep the image afterwards (default: removed)
#   CAIRN_READY_SECS   how long to wait for the server to come up (default 60)
#
# The recipe (vfs storage, runc, cgroupfs, no default ulimits) is the one in
# shared/notes/containers.md: overlayfs and crun do not work on these machines.
# `cond && ok ... || bad ...` is safe here: ok() and bad() always return 0.
# shellcheck disable=SC2015
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"

IMAGE="${CAIRN_IMAGE:-cairn:test}"
TARGET_TRIPLE=x86_64-unknown-linux-gnu
READY_SECS="${CAIRN_READY_SECS:-60}"
CTR="cairn-ctest-$$"
T0=$SECONDS
PASSED=0
FAILED=0

log() { printf '[container %4ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() {
    printf '[container] FAIL: %s\n' "$*" >&2
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

WORK="$(mktemp -d /tmp/cairn-ctest.XXXXXX)"
CTR_STARTED=0
PODMAN=()
cleanup() {
    local rc=$?
    set +e
    if [ "$CTR_STARTED" = 1 ]; then
        if [ "$rc" != 0 ] || [ "$FAILED" != 0 ]; then
            echo "---- container log (last 40 lines) ----" >&2
            "${PODMAN[@]}" logs "$CTR" 2>&1 | tail -n 40 >&2
            echo "----------------------------------------" >&2
        fi
        "${PODMAN[@]}" rm -f -v -t 5 "$CTR" "$CTR-auth" "$CTR-half" >/dev/null 2>&1
    fi
    if [ "${CAIRN_KEEP_IMAGE:-0}" != 1 ] && [ "${#PODMAN[@]}" -gt 0 ]; then
        "${PODMAN[@]}" rmi -f "$IMAGE" >/dev/null 2>&1
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 1. tools -------------------------------------------------------------------------------
missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing+=(runc)
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]} with apt-get"
    [ "$(id -u)" = 0 ] || die "need root to apt-get install ${missing[*]} (or install them first)"
    command -v apt-get >/dev/null 2>&1 || die "no apt-get: install buildah, podman and runc by hand"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed"
    apt-get install -y -qq buildah podman runc >/dev/null || die "apt-get install buildah podman runc failed"
fi
RUNC="$(command -v runc || echo /usr/sbin/runc)"

cat >"$WORK/containers.conf" <<'CONF'
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
CONF
export CONTAINERS_CONF="$WORK/containers.conf"
BUILDAH=(buildah --storage-driver vfs)
PODMAN=(podman --storage-driver vfs --runtime "$RUNC")

# --- 2. static binary -----------------------------------------------------------------------
mkdir -p .ci/out
if [ -n "${CAIRN_STATIC_BIN:-}" ]; then
    BIN="$CAIRN_STATIC_BIN"
    [ -x "$BIN" ] || die "CAIRN_STATIC_BIN=$BIN is not an executable"
    log "using prebuilt binary $BIN"
else
    log "building the static release binary (several minutes on 2 cores)"
    RUSTFLAGS='-C target-feature=+crt-static' \
        cargo build --release --locked --target "$TARGET_TRIPLE" --bin cairn ||
        die "cargo build of the static release binary failed"
    BIN="target/$TARGET_TRIPLE/release/cairn"
fi
if command -v ldd >/dev/null 2>&1 && ldd "$BIN" 2>&1 | grep -q '=>'; then
    ldd "$BIN" >&2 || true
    die "$BIN is dynamically linked; a FROM scratch image needs a static binary (+crt-static)"
fi
cp -f "$BIN" .ci/out/cairn.tmp && mv -f .ci/out/cairn.tmp .ci/out/cairn
log "binary ready: $("$REPO/.ci/out/cairn" --version)"

# --- 3. image -------------------------------------------------------------------------------
# --format docker keeps HEALTHCHECK (the OCI format has no field for it). Unused stages (the
# Rust builder) are skipped by default, so nothing is pulled.
log "buildah bud --target prebuilt -t $IMAGE"
"${BUILDAH[@]}" bud --format docker --target prebuilt -t "$IMAGE" -f Dockerfile . >"$WORK/build.log" 2>&1 || {
    tail -n 30 "$WORK/build.log" >&2
    die "buildah bud failed"
}
if grep -q 'Trying to pull' "$WORK/build.log"; then
    cat "$WORK/build.log" >&2
    die "building --target prebuilt tried to pull a base image"
fi
ok "image $IMAGE built from --target prebuilt without pulling anything"

cfg_user="$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{.Config.User}}')"
cfg_ports="$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{json .Config.ExposedPorts}}')"
cfg_vols="$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{json .Config.Volumes}}')"
cfg_entry="$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{json .Config.Entrypoint}}')"
cfg_health="$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{json .HealthCheck.Test}}')"
cfg_env="$("${PODMAN[@]}" image inspect "$IMAGE" --format '{{json .Config.Env}}')"
[ "$cfg_user" = "999:999" ] && ok "image user is 999:999" || bad "image user is '$cfg_user', want 999:999"
[ "$cfg_ports" = '{"27017/tcp":{}}' ] && ok "image exposes 27017/tcp" || bad "image exposed ports: $cfg_ports"
[ "$cfg_vols" = '{"/data/db":{}}' ] && ok "image declares the /data/db volume" || bad "image volumes: $cfg_vols"
[ "$cfg_entry" = '["/usr/local/bin/cairn"]' ] && ok "entrypoint is /usr/local/bin/cairn" || bad "entrypoint: $cfg_entry"
[ "$cfg_health" = '["CMD","/usr/local/bin/cairn","healthcheck"]' ] && ok "image has the healthcheck" ||
    bad "healthcheck test: $cfg_health"
for want in CAIRN_BIND=0.0.0.0 CAIRN_DATA_DIR=/data/db CAIRN_PORT=27017; do
    case "$cfg_env" in
    *"\"$want\""*) ok "image env has $want" ;;
    *) bad "image env lacks $want: $cfg_env" ;;
    esac
done

# --- 4. run ---------------------------------------------------------------------------------
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log "starting container $CTR on host port $PORT"
# Without systemd podman cannot schedule the periodic healthcheck and says so on stderr
# ("unable to get systemd connection"); that is expected here, so stderr goes to a file and is
# shown only on failure. The check itself is run by hand below (`podman healthcheck run`).
CTR_STARTED=1
"${PODMAN[@]}" run -d --name "$CTR" --network host \
    -e CAIRN_PORT="$PORT" -e CAIRN_LOG_FORMAT=json "$IMAGE" >/dev/null 2>"$WORK/run.err" || {
    cat "$WORK/run.err" >&2
    die "podman run failed"
}

deadline=$((SECONDS + READY_SECS))
until "${PODMAN[@]}" logs "$CTR" 2>/dev/null | grep -q "\"msg\":\"Waiting for connections\".*\"port\":${PORT}[,}]"; do
    state="$("${PODMAN[@]}" inspect "$CTR" --format '{{.State.Status}}' 2>/dev/null || echo gone)"
    [ "$state" = running ] || die "container is $state before it was ready"
    [ "$SECONDS" -lt "$deadline" ] || die "no 'Waiting for connections' on port $PORT within ${READY_SECS}s"
    sleep 0.2
done
ok "server logs 'Waiting for connections' on port $PORT"

# --- 5. user, data directory, healthcheck ---------------------------------------------------
top="$("${PODMAN[@]}" top "$CTR" user huser pid args 2>&1)" || bad "podman top failed: $top"
printf '%s\n' "$top" | sed 's/^/    /'
if echo "$top" | awk 'NR > 1 && $4 ~ /cairn/ { found = 1; if ($1 == "root" || $2 == "0") bad = 1 } END { exit !(found && !bad) }'; then
    ok "podman top: cairn runs as a non-root user"
else
    bad "podman top: cairn not found or running as root"
fi
hostpid="$("${PODMAN[@]}" inspect "$CTR" --format '{{.State.Pid}}')"
uids="$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$hostpid/status")"
[ "$uids" = "999 999 999 999" ] && ok "process uid (real/effective/saved/fs) is 999" ||
    bad "process uids are '$uids', want 999"

vol="$("${PODMAN[@]}" inspect "$CTR" --format '{{range .Mounts}}{{if eq .Destination "/data/db"}}{{.Source}}{{end}}{{end}}')"
if [ -z "$vol" ] || [ ! -d "$vol" ]; then
    bad "/data/db is not a volume mount (got '$vol')"
else
    owner="$(stat -c '%u:%g' "$vol")"
    mode="$(stat -c '%A' "$vol")"
    if [ "$owner" = "999:999" ] && [ "${mode:2:1}" = w ]; then
        ok "/data/db volume is owned by 999:999 and writable by it ($mode)"
    else
        bad "/data/db volume is $owner $mode, want 999:999 and owner-writable"
    fi
    foreign="$(find "$vol" -mindepth 1 \( ! -uid 999 -o ! -gid 999 \) -print | head -n 5)"
    [ -z "$foreign" ] && ok "everything under /data/db belongs to 999:999 ($(find "$vol" -mindepth 1 | wc -l) entries)" ||
        bad "files in /data/db not owned by 999:999: $foreign"
fi

if out="$("${PODMAN[@]}" healthcheck run "$CTR" 2>&1)"; then
    ok "podman healthcheck run: healthy ${out:+($out)}"
else
    bad "podman healthcheck run failed: $out"
fi
if out="$("${PODMAN[@]}" exec "$CTR" /usr/local/bin/cairn healthcheck 2>&1)"; then
    ok "podman exec cairn healthcheck exits 0"
else
    bad "podman exec cairn healthcheck failed: $out"
fi
# The healthcheck must be able to fail: point it at a port nothing listens on.
DEAD_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
if out="$("${PODMAN[@]}" exec "$CTR" /usr/local/bin/cairn healthcheck --port "$DEAD_PORT" --timeout-secs 2 2>&1)"; then
    bad "healthcheck against closed port $DEAD_PORT succeeded: $out"
else
    ok "healthcheck against a closed port fails (${out//$'\n'/ })"
fi

# --- 6. a real client -----------------------------------------------------------------------
VENV="${CAIRN_VENV:-$REPO/.venv}"
case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
if ! "$VENV/bin/python" -c 'import pymongo' >/dev/null 2>&1; then
    log "creating venv $VENV with pymongo"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
    "$VENV/bin/python" -m pip install -q -r tests/clients/requirements.txt || die "pip install pymongo failed"
fi

py_rc=0
"$VENV/bin/python" - "$PORT" >"$WORK/pymongo.out" 2>&1 <<'PY' || py_rc=$?
import sys

from pymongo import MongoClient

port = int(sys.argv[1])
failures = []


def check(cond, what):
    print(("ok   - " if cond else "FAIL - ") + what)
    if not cond:
        failures.append(what)


client = MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=10000)
info = client.server_info()
check(info.get("version") == "7.0.0", f"pymongo: buildInfo version is 7.0.0 (got {info.get('version')!r})")
hello = client.admin.command("hello")
check(hello.get("msg") == "isdbgrid", f"pymongo: hello msg is isdbgrid (got {hello.get('msg')!r})")
check(hello.get("maxWireVersion") == 21, f"pymongo: maxWireVersion 21 (got {hello.get('maxWireVersion')!r})")
ping = client.admin.command("ping")
check(ping.get("ok") == 1.0, f"pymongo: ping ok (got {ping!r})")
td = client.topology_description
check(td.topology_type_name == "Sharded", f"pymongo: topology is Sharded (got {td.topology_type_name})")
opts = client.admin.command("getCmdLineOpts")
parsed = opts.get("parsed", {})
check(parsed.get("net", {}).get("port") == port,
      f"getCmdLineOpts: port {port} came from CAIRN_PORT (parsed: {parsed!r})")
check(parsed.get("net", {}).get("bindIp") in ("0.0.0.0", ["0.0.0.0"]),
      f"getCmdLineOpts: bindIp 0.0.0.0 from the image env (parsed: {parsed!r})")
check(parsed.get("storage", {}).get("dbPath") == "/data/db",
      f"getCmdLineOpts: dbPath /data/db from the image env (parsed: {parsed!r})")
# The non-root server can write its volume: a journaled insert, read back.
from pymongo import WriteConcern
coll = client.ctr.get_collection("persist", write_concern=WriteConcern(j=True))
coll.drop()
coll.insert_one({"_id": "kept", "n": 42, "nested": {"list": [1, 2, 3]}})
check(coll.find_one({"_id": "kept"}) == {"_id": "kept", "n": 42, "nested": {"list": [1, 2, 3]}},
      "pymongo: a j:true insert into /data/db reads back")
# Transactions and retryable writes against the container's plain URI.
tx = client.ctr.txn
tx.drop()
with client.start_session() as s:
    s.with_transaction(lambda s: (tx.insert_one({"_id": 1}, session=s),
                                  tx.insert_one({"_id": 2}, session=s)))
    s.start_transaction()
    tx.insert_one({"_id": 3}, session=s)
    s.abort_transaction()
check(sorted(d["_id"] for d in tx.find()) == [1, 2],
      "pymongo: with_transaction commits and abort_transaction leaves nothing in the container")
tx.update_one({"_id": 1}, {"$inc": {"n": 1}})
check(tx.find_one({"_id": 1}) == {"_id": 1, "n": 1}, "pymongo: a retryable update applies once")
# Change streams and a tailable cursor on a capped collection, on one node.
cs = client.ctr.streamed
cs.drop()
with cs.watch(max_await_time_ms=200) as stream:
    cs.insert_one({"_id": "e1"})
    cs.update_one({"_id": "e1"}, {"$set": {"x": 1}})
    seen = []
    for _ in range(20):
        ev = stream.try_next()
        if ev is not None:
            seen.append((ev["operationType"], ev["documentKey"]["_id"]))
        if len(seen) == 2:
            break
check(seen == [("insert", "e1"), ("update", "e1")],
      f"pymongo: watch() sees the insert and the update in the container (got {seen!r})")
client.ctr.drop_collection("queue")
q = client.ctr.create_collection("queue", capped=True, size=4096)
q.insert_one({"n": 0})
from pymongo import CursorType
cur = q.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(200)
got = [cur.next()["n"]]
q.insert_many([{"n": 1}, {"n": 2}])
for _ in range(20):
    if got == [0, 1, 2] or not cur.alive:
        break
    try:
        got.append(cur.next()["n"])
    except StopIteration:
        pass
cur.close()
check(got == [0, 1, 2], f"pymongo: a tailable cursor follows a capped collection (got {got!r})")
client.close()
sys.exit(1 if failures else 0)
PY
cat "$WORK/pymongo.out"
PASSED=$((PASSED + $(grep -c '^ok ' "$WORK/pymongo.out" || true)))
FAILED=$((FAILED + $(grep -c '^FAIL ' "$WORK/pymongo.out" || true)))
if [ "$py_rc" != 0 ] && ! grep -q '^FAIL ' "$WORK/pymongo.out"; then
    bad "pymongo checks against the container crashed (exit $py_rc, output above)"
fi

# --- 7. graceful stop -----------------------------------------------------------------------
# The server is PID 1 in the container: SIGTERM must stop it cleanly (exit 0), well before
# podman's timeout would SIGKILL it (exit 137).
"${PODMAN[@]}" stop -t 30 "$CTR" >/dev/null 2>&1 || bad "podman stop failed"
code="$("${PODMAN[@]}" inspect "$CTR" --format '{{.State.ExitCode}}')"
[ "$code" = 0 ] && ok "SIGTERM stops the server with exit code 0" || bad "exit code after podman stop: $code"
if "${PODMAN[@]}" logs "$CTR" 2>&1 | grep -q '"msg":"Shutdown complete"'; then
    ok "server logged 'Shutdown complete'"
else
    bad "no 'Shutdown complete' in the container log"
fi

# --- 8. restart on the same volume: the data is still there ----------------------------------
"${PODMAN[@]}" start "$CTR" >/dev/null 2>>"$WORK/run.err" || bad "podman start (restart) failed"
deadline=$((SECONDS + READY_SECS))
ready=0
while [ "$SECONDS" -lt "$deadline" ]; do
    if [ "$("${PODMAN[@]}" logs "$CTR" 2>/dev/null | grep -c "\"msg\":\"Waiting for connections\"")" -ge 2 ]; then
        ready=1
        break
    fi
    sleep 0.2
done
if [ "$ready" = 1 ]; then
    if "$VENV/bin/python" - "$PORT" <<'PY'; then
import sys
from pymongo import MongoClient
c = MongoClient(f"mongodb://127.0.0.1:{sys.argv[1]}/", serverSelectionTimeoutMS=10000)
doc = c.ctr.persist.find_one({"_id": "kept"})
sys.exit(0 if doc == {"_id": "kept", "n": 42, "nested": {"list": [1, 2, 3]}} else 1)
PY
        ok "after a container restart the document is still in the /data/db volume"
    else
        bad "the document written before the restart is missing"
    fi
    "${PODMAN[@]}" stop -t 30 "$CTR" >/dev/null 2>&1 || bad "podman stop (after restart) failed"
else
    bad "the restarted container did not become ready within ${READY_SECS}s"
fi

# --- 9. the official image's init-root variables --------------------------------------------
# Both set: access control is on and a root user exists (as `mongo`'s entrypoint does).
AUTH_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"${PODMAN[@]}" run -d --name "$CTR-auth" --network host -e CAIRN_PORT="$AUTH_PORT" \
    -e MONGO_INITDB_ROOT_USERNAME=ctr-root -e MONGO_INITDB_ROOT_PASSWORD=ctr-pass "$IMAGE" >/dev/null 2>>"$WORK/run.err" ||
    bad "podman run with MONGO_INITDB_ROOT_* failed"
deadline=$((SECONDS + READY_SECS))
until "${PODMAN[@]}" logs "$CTR-auth" 2>/dev/null | grep -q "\"msg\":\"Waiting for connections\""; do
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.2
done
if "$VENV/bin/python" - "$AUTH_PORT" >"$WORK/auth.out" 2>&1 <<'PY'; then
import sys
from pymongo import MongoClient
from pymongo.errors import OperationFailure
port = sys.argv[1]
anon = MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=10000)
try:
    anon.ctr.c.find_one()
    sys.exit("an unauthenticated find ran")
except OperationFailure as e:
    assert e.code == 13, e
root = MongoClient(f"mongodb://ctr-root:ctr-pass@127.0.0.1:{port}/?authSource=admin",
                   serverSelectionTimeoutMS=10000)
root.ctr.c.insert_one({"ok": 1})
users = root.admin.command("usersInfo", 1)["users"]
assert [(u["user"], u["roles"]) for u in users] == [("ctr-root", [{"role": "root", "db": "admin"}])], users
PY
    ok "MONGO_INITDB_ROOT_USERNAME/_PASSWORD: auth is on, ctr-root@admin has root and logs in"
else
    cat "$WORK/auth.out"
    bad "the init-root container does not behave like mongo's"
fi
if "${PODMAN[@]}" logs "$CTR-auth" 2>&1 | grep -q "ctr-pass"; then
    bad "the root password appears in the container log"
else
    ok "the root password never appears in the container log"
fi
"${PODMAN[@]}" rm -f -v -t 5 "$CTR-auth" >/dev/null 2>&1
# Only one of the two: the server refuses to start, with the official image's message.
"${PODMAN[@]}" run --name "$CTR-half" --network host -e CAIRN_PORT="$AUTH_PORT" \
    -e MONGO_INITDB_ROOT_USERNAME=ctr-root "$IMAGE" >"$WORK/half.out" 2>&1 && half_rc=0 || half_rc=$?
if [ "$half_rc" != 0 ] && grep -q "error: missing 'MONGO_INITDB_ROOT_USERNAME' or 'MONGO_INITDB_ROOT_PASSWORD'" "$WORK/half.out"; then
    ok "only MONGO_INITDB_ROOT_USERNAME: exits $half_rc with the official image's error"
else
    cat "$WORK/half.out"
    bad "only one init-root variable: exit $half_rc, want a failure with the official message"
fi
"${PODMAN[@]}" rm -f -v -t 5 "$CTR-half" >/dev/null 2>&1

log "done in $((SECONDS - T0))s"
echo "container: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ] || die "$FAILED container check(s) failed"
