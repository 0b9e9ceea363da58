#!/usr/bin/env bash
# Runs every test of the project on a fresh machine (it installs what it needs):
#   1. formatting and lints (cargo fmt, clippy -D warnings)
#   2. unit and property tests of every crate, and the compatibility suite that drives a
#      spawned `cairn` with the official Rust driver and raw wire bytes; the storage tests and
#      the layout-sensitive compatibility files again at pack threshold 0 (one key per node)
#   3. real-client smoke tests: PyMongo, the Node.js driver and mongosh (tests/clients)
#   4. the container test: build the image's prebuilt stage and connect with PyMongo
#      (tests/container; set CAIRN_SKIP_CONTAINER=1 to skip it on a machine without
#      buildah/podman)
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n==> %s\n' "$*"; }
started=$SECONDS

step "format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

step "build"
cargo build --workspace --bins --locked

step "unit, property and compatibility tests"
cargo test --workspace --locked --no-fail-fast

step "the one-key-per-node layout (pack threshold 0)"
CAIRN_PACK_THRESHOLD=0 cargo test --locked -p cairn-storage
CAIRN_PACK_THRESHOLD=0 cargo test --locked -p cairn-compat-tests \
  --test amplification --test crud_update --test crud_query --test storage

step "real clients: PyMongo, Node.js driver, mongosh"
bash tests/clients/run.sh

if [[ "${CAIRN_SKIP_CONTAINER:-0}" != "1" ]]; then
  step "container"
  bash tests/container/run.sh
fi

step "all tests passed in $((SECONDS - started)) s"
