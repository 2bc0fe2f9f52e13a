# Sourced by `scripts/demo --fleet`, after the builds (root, build and keep set): a fleet of
# two nginx nodes following one etcd (docs/gateway.md, "Running a fleet from etcd").
#
#  1. etcd on 127.0.0.1 (free ports, its data in a temporary directory);
#  2. a DEMO_ROUTES-route atc-workload table (default 1000) put under /atc/routes/ in
#     transactions of up to 1000 keys (etcdctl txn);
#  3. two nginx nodes (2 workers each, `share`: one table and one watcher per node), each
#     following etcd with resty.router.etcd.watch (lua/demo/atc_fleet.lua);
#  4. both nodes route a request to the route the Rust router gives for it;
#  5. `etcdctl put` moves that route to another path and `etcdctl del` deletes another: each
#     node is polled until both its workers route by the change, and the time it took shown;
#  6. each worker's gw:stats().etcd and the watcher's etcd metrics.
# Then everything is stopped and the directory removed; with --keep, not before Ctrl-C.
# Exit status 0 only if every answer was the expected one.

routes=${DEMO_ROUTES:-1000}
etcd_prefix=/atc/routes/
tmp=$(mktemp -d "${TMPDIR:-/tmp}/atc-demo-fleet.XXXXXX")
data=$tmp/data
nodes=(node1 node2)
declare -A node_port=()
sleep_pid=""

. "$root/scripts/lib/etcd.sh"

node_nginx() { # node_nginx NODE ARGS...: nginx for node NODE
    local dir=$tmp/$1
    shift
    nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" "$@"
}

stop_node() {
    local dir=$tmp/$1 pid
    [ -f "$dir/logs/nginx.pid" ] || return 0
    pid=$(cat "$dir/logs/nginx.pid")
    node_nginx "$1" -s stop 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
}

fleet_cleanup() {
    local n
    [ -z "$sleep_pid" ] || kill "$sleep_pid" 2>/dev/null || true
    for n in "${nodes[@]}"; do
        stop_node "$n"
    done
    etcd_stop
    rm -rf "$tmp"
}
trap fleet_cleanup EXIT
trap 'exit 130' INT TERM

fail_with_logs() {
    echo "$*" >&2
    local f
    for f in "$tmp"/etcd/etcd.log "$tmp"/node*/logs/error.log; do
        [ -f "$f" ] || continue
        echo "--- ${f#"$tmp"/}" >&2
        tail -n 15 "$f" >&2
    done
    exit 1
}

ms_since() { # ms_since START ($EPOCHREALTIME): milliseconds since then
    local now=${EPOCHREALTIME/./} start=${1/./}
    echo $(( (now - start) / 1000 ))
}

for n in "${nodes[@]}"; do
    free_port; node_port[$n]=$REPLY
done

step "etcd on 127.0.0.1 (data in $tmp/etcd)"
etcd_start "$tmp/etcd" || fail_with_logs "etcd did not come up"
etcdctl=(env ETCDCTL_API=3 etcdctl --endpoints="$etcd_url")
echo "$(etcd --version | head -n 1), pid $etcd_pid: $("${etcdctl[@]}" endpoint health 2>&1)"

step "a ${routes}-route table (atc-workload's mix) put into etcd under $etcd_prefix"
mkdir -p "$data"
"$build/release/examples/gateway_data" "$data" --routes "$routes" --requests 0 --demo \
    --port "${node_port[node1]}"
# routes.tsv (PRIORITY<TAB>UUID<TAB>EXPRESSION) to etcdctl txn's `put KEY "VALUE"` lines: the
# value is the JSON object {"priority": P, "expression": "E"}, E escaped for JSON, then the
# whole value for etcdctl (a Go double-quoted string).
sed -E 's/\\/\\\\/g; s/"/\\"/g' "$data/routes.tsv" \
    | sed -E 's/^([0-9]+)\t([^\t]+)\t(.*)$/\2\t{"priority": \1, "expression": "\3"}/' \
    | sed -E 's/\\/\\\\/g; s/"/\\"/g' \
    | sed -E "s|^([^\t]+)\t(.*)\$|put $etcd_prefix\\1 \"\\2\"|" > "$data/puts"
split -l 1000 -d -a 4 "$data/puts" "$data/txn."
t0=$EPOCHREALTIME
txns=0
for f in "$data"/txn.*; do
    # No comparisons (an empty line), the puts, no failure branch.
    { echo; cat "$f"; echo; echo; } | "${etcdctl[@]}" txn > "$data/txn.out" \
        || fail_with_logs "etcdctl txn failed: $(cat "$data/txn.out")"
    grep -q '^SUCCESS' "$data/txn.out" || fail_with_logs "etcdctl txn: $(cat "$data/txn.out")"
    txns=$((txns + 1))
done
load_ms=$(ms_since "$t0")
revision_of() { sed -n 's/.*"revision":\([0-9]*\).*/\1/p'; }
# With --limit 1, "count" is still the number of keys in the range.
range=$("${etcdctl[@]}" get "$etcd_prefix" --prefix --limit 1 -w json)
loaded_rev=$(revision_of <<< "$range")
count=$(sed -n 's/.*"count":\([0-9]*\).*/\1/p' <<< "$range")
echo "$count keys put in $txns transaction(s) in $load_ms ms (etcdctl txn), revision $loaded_rev; e.g.:"
IFS=$'\t' read -r _ first_id _ < "$data/routes.tsv"
echo "  etcdctl get $etcd_prefix$first_id"
"${etcdctl[@]}" get "$etcd_prefix$first_id" | sed 's/^/  /' | cut -c 1-200

step "two nginx nodes, 2 workers each, share on, following etcd (resty.router.etcd.watch)"
for n in "${nodes[@]}"; do
    dir=$tmp/$n
    mkdir -p "$dir/logs" "$dir/tmp"
    cat > "$dir/nginx.conf" <<EOF
# Written by scripts/demo --fleet.
worker_processes 2;
pid $dir/logs/nginx.pid;
error_log $dir/logs/error.log info;
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;

events { worker_connections 1024; }

http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    default_type text/plain;

    lua_package_path "$root/lua/?.lua;$root/lua/demo/?.lua;/usr/share/lua/5.1/?.lua;;";
    lua_package_cpath "$build/lib/?.so;;";
    # One table per node (built by the worker that watches, mapped by the other).
    lua_shared_dict atc_share 1m;

    init_worker_by_lua_block {
        require("atc_fleet").init("$n", { "$etcd_url" }, "$etcd_prefix")
    }

    server {
        # reuseport: each new connection goes to one of the workers (by its source port).
        listen 127.0.0.1:${node_port[$n]} reuseport;
        location = /fleet/stats {
            allow 127.0.0.1;
            deny all;
            content_by_lua_block { require("atc_fleet").stats() }
        }
        location = /metrics {
            allow 127.0.0.1;
            deny all;
            content_by_lua_block { require("atc_fleet").metrics() }
        }
        location / { content_by_lua_block { require("atc_fleet").route() } }
    }
}
EOF
    node_nginx "$n" -t -q
done
t0=$EPOCHREALTIME
for n in "${nodes[@]}"; do
    node_nginx "$n"
    echo "$n: http://127.0.0.1:${node_port[$n]} (nginx -p $tmp/$n)"
done

failures=0
expect() { # expect WHAT GOT WANT
    if [ "$2" = "$3" ]; then
        echo "    ok: $1 is $3"
    else
        echo "    UNEXPECTED: $1 is '$2', want '$3'"
        failures=$((failures + 1))
    fi
}

# The request of a demo.tsv line (label, method, host, path, query, headers, route id, ...):
# its curl arguments in req_args, its URL path in req_path.
read_request() { # read_request LINE_NUMBER
    IFS=$'\x1e' read -r req_label req_method req_host req_path req_query req_headers req_id _ \
        < <(sed -n "${1}p" "$data/demo.tsv" | tr '\t' '\036')
    [ -z "$req_query" ] || req_path="$req_path?$req_query"
    req_args=(-H "Host: $req_host")
    [ "$req_method" = GET ] || req_args+=(-X "$req_method")
    if [ -n "$req_headers" ]; then
        local h
        while IFS= read -r -d $'\x1f' h; do
            req_args+=(-H "$h")
        done <<< "$req_headers"$'\x1f'
    fi
}

# Sends `sample` requests to node NODE, each on a new connection (so both workers answer some):
# their answers (the body lines of atc_fleet.route) in `answers`.
sample=8
ask() { # ask NODE PATH CURL_ARGS...
    local n=$1 path=$2 urls=() i
    shift 2
    for i in $(seq "$sample"); do
        urls+=("http://127.0.0.1:${node_port[$n]}$path")
    done
    answers=$(curl -s -H 'Connection: close' "$@" "${urls[@]}" 2>/dev/null || true)
}

# Whether every answer in `answers` is at revision MIN_REV or later and says route ROUTE
# (WANT "route") or anything but route ROUTE (WANT "not").
answers_ok() { # answers_ok WANT ROUTE MIN_REV
    local line rev n=0
    while IFS= read -r line; do
        [[ $line =~ revision\ ([0-9]+): ]] || return 1
        rev=${BASH_REMATCH[1]}
        [ "$rev" -ge "$3" ] || return 1
        case "$1:$line" in
            route:*": route $2") ;;
            not:*": route $2") return 1 ;;
            not:*) ;;
            *) return 1 ;;
        esac
        n=$((n + 1))
    done <<< "$answers"
    [ "$n" -eq "$sample" ]
}

# Polls both nodes until every answer satisfies answers_ok WANT ROUTE MIN_REV (both workers
# of each node included), and prints how long each took from START (the time of event WHAT).
converge() { # converge START WHAT WANT ROUTE MIN_REV PATH CURL_ARGS...
    local start=$1 what=$2 want=$3 route=$4 min_rev=$5 path=$6 n
    shift 6
    local -A done_ms=()
    while [ "${#done_ms[@]}" -lt "${#nodes[@]}" ]; do
        for n in "${nodes[@]}"; do
            [ -z "${done_ms[$n]:-}" ] || continue
            ask "$n" "$path" "$@"
            if answers_ok "$want" "$route" "$min_rev"; then
                done_ms[$n]=$(ms_since "$start")
            fi
        done
        if [ "$(ms_since "$start")" -gt 30000 ]; then
            echo "    UNEXPECTED: not every node converged in 30 s; last answers:"
            printf '%s\n' "$answers" | sed 's/^/      /'
            failures=$((failures + 1))
            return 1
        fi
    done
    for n in "${nodes[@]}"; do
        echo "  $n: both workers answer so ${done_ms[$n]} ms after $what"
    done
}

# Shows one request to each node: the curl command, the status, the X- headers, the body.
show() { # show PATH CURL_ARGS...
    local path=$1 n a shown response
    shift
    for n in "${nodes[@]}"; do
        shown="curl"
        for a in "$@"; do
            case "$a" in -*) shown+=" $a" ;; *) shown+=" '$a'" ;; esac
        done
        bold "# $n: $shown 'http://127.0.0.1:${node_port[$n]}$path'"
        response=$(curl -s -i "$@" "http://127.0.0.1:${node_port[$n]}$path" | tr -d '\r')
        printf '%s\n' "$response" | sed -n '1p; /^X-/p'
        printf '%s\n' "$response" | sed '1,/^$/d' | sed 's/^/    /'
    done
}

read_request 1
first_label=$req_label first_method=$req_method first_host=$req_host first_id=$req_id
first_args=("${req_args[@]}") first_path=$req_path

step "both nodes load the table (a whole range read) and route by it"
echo "  waiting until both workers of both nodes answer '$first_label' at revision $loaded_rev:"
converge "$t0" "nginx was started" route "$first_id" "$loaded_rev" "$first_path" "${first_args[@]}" \
    || fail_with_logs "the nodes did not load the table"
for n in "${nodes[@]}"; do
    grep -o 'loaded [0-9]* routes at revision [0-9]*.*' "$tmp/$n/logs/error.log" \
        | sed "s/, context:.*//; s/^/  $n's watcher: /"
done

step "routing: the same request on both nodes ($first_label; the route from the Rust router)"
show "$first_path" "${first_args[@]}"
for n in "${nodes[@]}"; do
    ask "$n" "$first_path" "${first_args[@]}"
    expect "$n's route ($sample requests)" "$(printf '%s\n' "$answers" | sed 's/.*: route //' | sort -u)" "$first_id"
done

step "changing routes in etcd while the nodes route"
prio=$(awk -F'\t' -v id="$first_id" '$2 == id { print $1 }' "$data/routes.tsv")
value="{\"priority\": $prio, \"expression\": \"http.host == \\\"$first_host\\\" && http.path ^= \\\"/v2/\\\"\"}"
bold "# move route $first_id to http.path ^= \"/v2/\""
echo "etcdctl put $etcd_prefix$first_id '$value'"
rev1=$("${etcdctl[@]}" put "$etcd_prefix$first_id" "$value" -w json | revision_of)
t0=$EPOCHREALTIME
echo "revision $rev1"
echo "  polling both nodes ($sample requests each, new connections) for GET /v2/orders/7:"
converge "$t0" "etcdctl put returned" route "$first_id" "$rev1" /v2/orders/7 \
    -H "Host: $first_host" || true
show /v2/orders/7 -H "Host: $first_host"
for n in "${nodes[@]}"; do
    ask "$n" "$first_path" "${first_args[@]}"
    if answers_ok not "$first_id" "$rev1"; then
        echo "    ok: $n no longer routes $first_method $first_path to it"
    else
        echo "    UNEXPECTED: $n still routes $first_method $first_path to it"
        failures=$((failures + 1))
    fi
done

read_request 2
bold "# delete route $req_id ($req_label)"
echo "etcdctl del $etcd_prefix$req_id"
rev2=$("${etcdctl[@]}" del "$etcd_prefix$req_id" -w json | revision_of)
t0=$EPOCHREALTIME
echo "revision $rev2"
echo "  polling both nodes for $req_method $req_path until it no longer reaches the route:"
converge "$t0" "etcdctl del returned" not "$req_id" "$rev2" "$req_path" "${req_args[@]}" || true
show "$req_path" "${req_args[@]}"

step "each worker's gw:stats().etcd (GET /fleet/stats, on new connections until both answer)"
for n in "${nodes[@]}"; do
    declare -A by_pid=()
    # A worker that does not watch takes the watcher's revision into its stats when it next
    # looks (every follow_interval, 0.05 s): the latest line of each worker is kept until both
    # show the last revision.
    for _ in $(seq 200); do
        line=$(curl -s -H 'Connection: close' "http://127.0.0.1:${node_port[$n]}/fleet/stats")
        by_pid[${line%%:*}]=$line
        [ "${#by_pid[@]}" -eq 2 ] \
            && [ "$(printf '%s\n' "${by_pid[@]}" | grep -c " revision $rev2 ")" -eq 2 ] && break
    done
    printf '%s\n' "${by_pid[@]}" | sort | sed 's/^/  /'
    stats=$(printf '%s\n' "${by_pid[@]}")
    expect "$n's workers answering" "${#by_pid[@]}" 2
    expect "$n's workers at revision $rev2" "$(grep -c " revision $rev2 " <<< "$stats")" 2
    expect "$n's workers watching etcd" "$(grep -c " watching 1 connected 1 " <<< "$stats")" 1
    expect "$n's routes" "$(sed 's/.* routes \([0-9]*\) .*/\1/' <<< "$stats" | sort -u)" "$((count - 1))"
    expect "$n's workers with no value refused" "$(grep -c ' events_refused 0 ' <<< "$stats")" 2
    unset by_pid
done

step "the etcd metrics of each node's watching worker (GET /metrics, Prometheus text format)"
for n in "${nodes[@]}"; do
    for _ in $(seq 64); do
        metrics=$(curl -s -H 'Connection: close' "http://127.0.0.1:${node_port[$n]}/metrics")
        grep -q '^atc_router_etcd_watching{.*} 1$' <<< "$metrics" && break
    done
    echo "  $n:"
    grep '^atc_router_etcd_' <<< "$metrics" | sed 's/^/    /'
done

for n in "${nodes[@]}"; do
    if grep -E '\[(crit|alert|emerg)\]' "$tmp/$n/logs/error.log"; then
        echo "$n logged errors (above)"
        failures=$((failures + 1))
    fi
done

if [ "$failures" -gt 0 ]; then
    echo "demo --fleet: $failures unexpected result(s)"
else
    bold "demo --fleet: both nodes routed every request as expected"
fi
if [ "$keep" -eq 1 ]; then
    bold "the fleet keeps running until Ctrl-C:"
    echo "  etcd   $etcd_url"
    for n in "${nodes[@]}"; do
        echo "  $n  http://127.0.0.1:${node_port[$n]}  (/fleet/stats, /metrics)"
    done
    echo "  try: ETCDCTL_API=3 etcdctl --endpoints=$etcd_url put $etcd_prefix$first_id \\"
    echo "         '{\"priority\": $prio, \"expression\": \"http.path ^= \\\"/try\\\"\"}'"
    echo "       curl -i http://127.0.0.1:${node_port[node1]}/try"
    while :; do
        sleep 3600 &
        sleep_pid=$!
        wait "$sleep_pid" || true
    done
fi
[ "$failures" -eq 0 ]
