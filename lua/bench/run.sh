#!/usr/bin/env bash
# Builds the release library and the workload files, then runs lua/bench/bench.lua in luajit.
#   lua/bench/run.sh [ROUTES] [REQUESTS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
routes=${1:-10000}
requests=${2:-10000}
rounds=${3:-21}
command -v luajit >/dev/null || { echo "needs luajit (apt-get install luajit2 or luajit)" >&2; exit 2; }
cargo build --release -p atc-router-ffi --lib
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
cargo run --release -q -p atc-router-ffi --example workload_dump -- "$data" "$routes" "$requests"
ln -s "$(realpath target/release/libatc_router_ffi.so)" "$data/libatc_router.so"
LUA_PATH="lua/?.lua;;" LUA_CPATH="$data/?.so;;" luajit lua/bench/bench.lua "$data" "$rounds"
