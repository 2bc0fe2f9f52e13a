#!/usr/bin/env bash
# Ours against Kong's library (atc-router 1.7.1, built from the crate cargo already fetched for
# the side-by-side benchmarks), through their Lua modules in an nginx worker
# (lua/bench/kong.lua): bytes per route of a table added route by route, and one route changed
# in place CHANGES times (median / p99 / max). The tables are change_latency's (`--dump`): every
# workload family and `one-host-exact`. Each library and table runs in a fresh nginx, the two
# libraries alternated, ROUNDS times; the medians of the rounds are printed.
#
#   lua/bench/kong.sh [ROUTES] [CHANGES] [ROUNDS] [TABLE,...]    (defaults: 50000 2000 3, all)
#
# Needs nginx with the Lua module and lua-resty-core (scripts/install-deps). Everything it
# writes is under target/kong-lua/. Environment: BENCH_PORT (default 8092).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
routes=${1:-50000}
changes=${2:-2000}
rounds=${3:-3}
tables=${4:-}
port=${BENCH_PORT:-8092}
work=$root/target/kong-lua
mkdir -p "$work/ours"

# Kong's crate as a shared library: a copy of the registry's sources, its own workspace, the
# versions of this workspace's lock file.
crate=$(cargo metadata --format-version 1 --locked 2>/dev/null \
    | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="atc-router" and p["version"]=="1.7.1"))')
crate=$(dirname "$crate")
if [ ! -f "$work/crate/Cargo.toml" ]; then
    rm -rf "$work/crate"
    cp -r "$crate" "$work/crate"
    printf '\n[workspace]\n' >>"$work/crate/Cargo.toml"
    cp Cargo.lock "$work/crate/Cargo.lock"
fi
cargo build --release -q --manifest-path "$work/crate/Cargo.toml" --target-dir "$work/target" \
    --lib 2>/dev/null
mkdir -p "$work/kong"
ln -sf "$work/target/release/libatc_router.so" "$work/kong/libatc_router.so"

cargo build --release -q -p atc-router-ffi --lib
ln -sf "$(realpath target/release/libatc_router_ffi.so)" "$work/ours/libatc_router.so"
cargo build --release -q -p atc-benches --example change_latency
rm -rf "$work/tables"
target/release/examples/change_latency --dump "$work/tables" "$routes" $tables
names=$(cd "$work/tables" && ls)

# shellcheck source=lua/bench/nginx.sh
. lua/bench/nginx.sh

# One nginx per library and table: a fresh process, so that each table's memory is its own.
run() { # LIB TABLE -> the line kong.lua returns
    local lib=$1 table=$2 prefix=$work/nginx-$1
    local lua_path="$work/crate/lib/?.lua"
    [ "$lib" = ours ] && lua_path="$root/lua/?.lua"
    bench_nginx_conf "$prefix" "$lua_path;$root/lua/bench/?.lua;/usr/share/lua/5.1/?.lua" \
        "$work/$lib/?.so" "$port" \
        "ngx.say(require(\"kong\").run(\"$work/tables/\" .. ngx.var.uri:sub(8), $changes))" \
        lua/bench/kong.sh
    local nginx=(nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log")
    "${nginx[@]}"
    bench_wait_port "$port"
    curl -sS --max-time 900 "http://127.0.0.1:$port/bench/$table" \
        || { tail "$prefix/logs/error.log" >&2; "${nginx[@]}" -s stop; return 1; }
    "${nginx[@]}" -s quit
    while [ -e "$prefix/logs/nginx.pid" ]; do sleep 0.1; done
}

bench_port_free "$port" || exit 1
results=$work/results.tsv
: >"$results"
for round in $(seq "$rounds"); do
    for table in $names; do
        for lib in ours kong; do
            printf '%s\t%s\t%s\n' "$table" "$lib" "$(run "$lib" "$table")" >>"$results"
        done
    done
    echo "round $round of $rounds done" >&2
done
python3 - "$results" "$routes" "$changes" "$rounds" <<'PY'
import sys, statistics
path, routes, changes, rounds = sys.argv[1:]
rows = {}
for line in open(path):
    table, lib, n, heap, lua, build, med, p99, mx = line.rstrip("\n").split("\t")
    rows.setdefault((table, lib), []).append([float(x) for x in (heap, lua, build, med, p99, mx)])
def m(table, lib, i):
    return statistics.median(r[i] for r in rows[(table, lib)])
print(f"tables of {routes} routes added one by one, one route changed {changes} times; "
      f"medians of {rounds} rounds")
print("| table | bytes per route, ours (Lua heap) | Kong 1.7.1 (Lua heap) "
      "| change, ours median / p99 / max | Kong median / p99 / max |")
print("|---|---:|---:|---:|---:|")
for table in sorted({t for t, _ in rows}):
    o = [m(table, "ours", i) for i in range(6)]
    k = [m(table, "kong", i) for i in range(6)]
    print(f"| {table} | {o[0] + o[1]:,.0f} ({o[1]:,.0f}) | {k[0] + k[1]:,.0f} ({k[1]:,.0f}) "
          f"| {o[3]:.1f} / {o[4]:.1f} / {o[5]:.1f} µs | {k[3]:.1f} / {k[4]:.1f} / {k[5]:.1f} µs |")
PY
