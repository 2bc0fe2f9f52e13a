#!/usr/bin/env bash
# Ours against APISIX's lua-resty-radixtree in one nginx worker (lua/bench/radixtree.lua), on
# the tables radixtree can express: the rest-api family at 124 routes (one copy of the REST
# list) and at 9,920 (80 copies under version and tenant prefixes), and 10,000 host + prefix
# routes (the host-prefixes family: heavy-tailed hosts, 1-3 nested prefixes each); each with
# the table's realistic requests (hits) and its miss-keys requests (the 404 on a busy host).
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
    for mix in realistic miss-keys; do
        target/release/examples/workload_dump "$work/$family-$n-$mix" "$n" "$requests" \
            "$family" "$mix" >/dev/null
        [ -s "$work/$family-$n-$mix/radixtree.tsv" ] \
            || { echo "$family: not expressible" >&2; exit 1; }
    done
done

# shellcheck source=lua/bench/nginx.sh
. lua/bench/nginx.sh
prefix=$work/nginx
bench_nginx_conf "$prefix" "$lua_path" "$work/lib/?.so;$radix_cpath" "$port" \
    "ngx.say(require(\"bench.radixtree\").run(\"$work/\" .. ngx.var.uri:sub(8), $rounds))" \
    lua/bench/radixtree.sh
nginx=(nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log")
bench_port_free "$port" || exit 1
"${nginx[@]}"
trap '"${nginx[@]}" -s stop 2>/dev/null || true' EXIT
bench_wait_port "$port"
for c in "${cases[@]}"; do
    read -r family n <<<"$c"
    for mix in realistic miss-keys; do
        echo "== $family, $n routes, $mix requests"
        curl -sS --max-time 600 "http://127.0.0.1:$port/bench/$family-$n-$mix" \
            || { tail "$prefix/logs/error.log"; exit 1; }
    done
done
