#!/usr/bin/env bash
# Builds the release library and the workload files, then runs lua/bench/bench.lua in luajit,
# once per family (default: every family of WORKLOAD.md and the mixed table).
#   lua/bench/run.sh [ROUTES] [REQUESTS] [ROUNDS] [FAMILY...]
# Environment: ATC_BENCH_MIX, the requests' mix or class (default realistic: hit-regex,
# hit-wildcard, miss-keys, ...); ATC_BENCH_SETTLE=1 settles the router after loading it.
set -euo pipefail
cd "$(dirname "$0")/../.."
routes=${1:-10000}
requests=${2:-10000}
rounds=${3:-21}
shift 3 2>/dev/null || shift $#
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(host-prefixes rest-api ingress tenant-header method-split
    wildcard-hosts port-sni-source header-only other-operators path-only mixed)
command -v luajit >/dev/null || { echo "needs luajit (apt-get install luajit2 or luajit)" >&2; exit 2; }
cargo build --release -q -p atc-router-ffi --lib
cargo build --release -q -p atc-router-ffi --example workload_dump
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
ln -s "$(realpath target/release/libatc_router_ffi.so)" "$data/libatc_router.so"
for family in "${families[@]}"; do
    echo "== $family"
    target/release/examples/workload_dump "$data" "$routes" "$requests" "$family" "${ATC_BENCH_MIX:-realistic}"
    LUA_PATH="lua/?.lua;;" LUA_CPATH="$data/?.so;;" luajit lua/bench/bench.lua "$data" "$rounds"
done
