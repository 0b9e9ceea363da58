#!/usr/bin/env bash
# Runs the aggregation benchmark next to a throwaway PostgreSQL 15 (installed with apt when
# missing; never run in CI): `bash bench/agg.sh [--docs N] [--seconds S]`; with
# CAIRN_BIN=/path/to/cairn it runs that server instead of building this tree's.
# See /work/shared/notes/postgres.md for the setup this follows.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
PORT=${PGPORT_BENCH:-55432}
DIR=$(mktemp -d /tmp/cairn-pg.XXXXXX)
chown postgres: "$DIR"
runuser -u postgres -- "$BIN/initdb" -D "$DIR/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR -c shared_buffers=256MB" start >/dev/null
stop() {
    runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null || true
    rm -rf "$DIR"
}
trap stop EXIT
cd "$REPO"
# CAIRN_BIN=/path/to/cairn runs that server binary instead of building this tree's.
# Both packages in one build (the README's command): features resolve as there, so the
# dependencies are not compiled a second time.
cargo build --release -p cairn -p cairn-bench
CAIRN_BENCH_PG="host=127.0.0.1 port=$PORT user=postgres dbname=postgres" \
    CAIRN_BENCH_PG_PID="$(head -1 "$DIR/data/postmaster.pid")" \
    ./target/release/cairn-bench agg "$@"
