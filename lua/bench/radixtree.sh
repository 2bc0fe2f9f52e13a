#!/usr/bin/env bash
# Ours against APISIX's lua-resty-radixtree in one nginx worker (lua/bench/radixtree.lua), on
# the tables radixtree can express: the rest-api family at 124 routes (one copy of the REST
# list) and at 9,920 (80 copies under version and tenant prefixes), and 10,000 host + prefix
# routes (the host-prefixes family: heavy-tailed hosts, 1-3 nested prefixes each); each with
# the table's realistic requests (hits), hits on its busiest host (hit-busy-host) and its
# miss-keys requests (the 404 on that host).
# Then the time to build each table, from its route list in Lua memory to a table that answers
# (ours through resty.router.gateway's update(), built on the router's builder thread;
# radixtree's radix.new), median of ROUNDS rounds at most 7 (lua/bench/radixtree.lua, build()).
#
#   lua/bench/radixtree.sh [REQUESTS] [ROUNDS]          (defaults: 10000 requests, 21 rounds)
#
# Needs nginx with the Lua module and lua-resty-core (scripts/install-deps), a C compiler, and
# lua-resty-radixtree with its two Lua dependencies, lua-resty-ipmatcher and lua-resty-expr:
# either checkouts of the three (github.com/api7/<name>) side by side in RADIXTREE_SRC
# (default target/radixtree/src), or `luarocks install lua-resty-radixtree` (tried into
# target/radixtree/rocks when RADIXTREE_SRC has no checkout). Everything it writes is under
# target/radixtree/. Environment: BENCH_PORT (default 8091).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
requests=${1:-10000}
rounds=${2:-21}
build_rounds=$((rounds < 7 ? rounds : 7))
port=${BENCH_PORT:-8091}
work=$root/target/radixtree
src=${RADIXTREE_SRC:-$work/src}
mkdir -p "$work"

lua_path="$root/lua/?.lua;/usr/share/lua/5.1/?.lua"
if [ -d "$src/lua-resty-radixtree" ]; then
    make -s -C "$src/lua-resty-radixtree" compile
    lua_path="$lua_path;$src/lua-resty-radixtree/lib/?.lua;$src/lua-resty-ipmatcher/?.lua"
    lua_path="$lua_path;$src/lua-resty-expr/lib/?.lua"
    radix_cpath="$src/lua-resty-radixtree/?.so"
else
    rocks=$work/rocks
    if [ ! -f "$rocks/share/lua/5.1/resty/radixtree.lua" ]; then
        luarocks --lua-version 5.1 --tree "$rocks" install lua-resty-radixtree || {
            echo "no lua-resty-radixtree: put checkouts of api7/lua-resty-radixtree," \
                "lua-resty-ipmatcher and lua-resty-expr in $src (or set RADIXTREE_SRC)" >&2
            exit 2
        }
    fi
    lua_path="$lua_path;$rocks/share/lua/5.1/?.lua"
    radix_cpath="$rocks/lib/lua/5.1/?.so"
fi

cargo build --release -q -p atc-router-ffi --lib
cargo build --release -q -p atc-router-ffi --example workload_dump
mkdir -p "$work/lib"
ln -sf "$(realpath target/release/libatc_router_ffi.so)" "$work/lib/libatc_router.so"

cases=("rest-api 124" "rest-api 9920" "host-prefixes 10000")
for c in "${cases[@]}"; do
    read -r family n <<<"$c"
    for mix in realistic hit-busy-host miss-keys; do
        target/release/examples/workload_dump "$work/$family-$n-$mix" "$n" "$requests" \
            "$family" "$mix" >/dev/null
        [ -s "$work/$family-$n-$mix/radixtree.tsv" ] \
            || { echo "$family: not expressible" >&2; exit 1; }
    done
done

# shellcheck source=lua/bench/nginx.sh
. lua/bench/nginx.sh
prefix=$work/nginx
handler="ngx.say(require(\"bench.radixtree\").serve(\"$work/\", ngx.var.uri:sub(8), $rounds,"
handler="$handler $build_rounds))"
bench_nginx_conf "$prefix" "$lua_path" "$work/lib/?.so;$radix_cpath" "$port" "$handler" \
    lua/bench/radixtree.sh
nginx=(nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log")
bench_port_free "$port" || exit 1
"${nginx[@]}"
trap '"${nginx[@]}" -s stop 2>/dev/null || true' EXIT
bench_wait_port "$port"
for c in "${cases[@]}"; do
    read -r family n <<<"$c"
    for mix in realistic hit-busy-host miss-keys; do
        echo "== $family, $n routes, $mix requests"
        curl -sS --max-time 600 "http://127.0.0.1:$port/bench/$family-$n-$mix" \
            || { tail "$prefix/logs/error.log"; exit 1; }
    done
done

# Build times: one line of medians per table (routes, ours, radixtree, the worker's part of
# ours, the builder thread's, r:sync, add_matcher + settle; ms), printed as two tables.
rows=()
for c in "${cases[@]}"; do
    read -r family n <<<"$c"
    row=$(curl -sS --max-time 600 "http://127.0.0.1:$port/bench/build/$family-$n-realistic") \
        || { tail "$prefix/logs/error.log"; exit 1; }
    [[ $row == [0-9]* ]] || { echo "$row"; tail "$prefix/logs/error.log"; exit 1; }
    rows+=("$family $n"$'\t'"$row")
done
echo "== build time per table, median of $build_rounds rounds, from the route list in Lua memory" \
    "to the first answer"
printf '%-20s | %12s | %15s | %16s\n' table "build ours" "build radixtree" "ours / radixtree"
for r in "${rows[@]}"; do
    IFS=$'\t' read -r name _ ours rx _ _ _ _ <<<"$r"
    printf '%-20s | %9.1f ms | %12.1f ms | %16.2f\n' "$name" "$ours" "$rx" \
        "$(awk -v a="$ours" -v b="$rx" 'BEGIN { printf "%.4f", a / b }')"
done
echo "ours: gw:update(version, routes), built on the router's builder thread (here at the" \
    "worker's priority), until the first gw:route() returns; radixtree: radix.new(routes) and" \
    "its first match"
echo
echo "== ours' build by path, median of $build_rounds rounds"
printf '%-20s | %12s | %12s | %14s | %12s | %20s\n' table gateway "worker held" \
    "builder thread" "r:sync" "add_matcher + settle"
for r in "${rows[@]}"; do
    IFS=$'\t' read -r name _ ours _ held builder sync add <<<"$r"
    printf '%-20s | %9.1f ms | %9.1f ms | %11.1f ms | %9.1f ms | %17.1f ms\n' "$name" "$ours" \
        "$held" "$builder" "$sync" "$add"
done
echo "gateway: as 'build ours'; worker held: its CPU time in update() and in that route();" \
    "builder thread: its build (stats().last_build_us); r:sync, add_matcher + settle: built in" \
    "the worker, until the first execute returns"
