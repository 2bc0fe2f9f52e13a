#!/usr/bin/env bash
# What a push holds the worker (lua/bench/push.lua), on an atc-workload table of ROUTES routes:
#   lua/bench/push.sh [ROUTES] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
routes=${1:-100000}
rounds=${2:-5}
command -v luajit >/dev/null || { echo "needs luajit (apt-get install luajit2 or luajit)" >&2; exit 2; }
make -s -C ffi lib
cargo build --release -q -p atc-router-ffi --example gateway_data
data=target/push-bench/r$routes
[ -s "$data/routes.tsv" ] && [ "$data/routes.tsv" -nt target/release/examples/gateway_data ] \
    || target/release/examples/gateway_data "$data" --routes "$routes" --requests 0 --port 8090
LUA_PATH="lua/?.lua;;" LUA_CPATH="target/lib/?.so;;" luajit lua/bench/push.lua "$data/routes.tsv" "$rounds"
