# Sourced by scripts that run an etcd of their own (scripts/demo --fleet, scripts/push-bench's
# etcd case, scripts/fleet-bench): a one-member etcd on 127.0.0.1, its data in a directory of
# the caller's, started and stopped.
#
#   free_port          sets REPLY to a port nothing listens on (below the kernel's ephemeral
#                      range), and not one handed out before
#   etcd_start DIR     starts etcd with its data and log (etcd.log) in DIR and waits until it
#                      answers: sets etcd_url and etcd_pid; returns 1 (log in DIR/etcd.log) if
#                      it did not come up. With etcd_nice set, etcd runs that much nicer (a
#                      benchmark's stand-in for an etcd on other machines)
#   etcd_stop          stops it (callers also call it from their EXIT trap)

used_ports=" "
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 12000))
        case "$used_ports" in *" $p "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            used_ports+="$p "
            REPLY=$p
            return
        fi
    done
}

etcd_pid=""
etcd_url=""

etcd_start() { # etcd_start DIR
    local dir=$1 client peer
    free_port; client=$REPLY
    free_port; peer=$REPLY
    etcd_url=http://127.0.0.1:$client
    mkdir -p "$dir"
    # --max-txn-ops: a table is put in transactions of up to 1000 routes.
    nice -n "${etcd_nice:-0}" etcd --name atc --data-dir "$dir/data" \
        --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "atc=http://127.0.0.1:$peer" \
        --max-txn-ops 1000 --log-level warn --logger zap 2> "$dir/etcd.log" &
    etcd_pid=$!
    for _ in $(seq 200); do
        curl -sf -X POST -d '{"key":"AA=="}' "$etcd_url/v3/kv/range" >/dev/null 2>&1 && return 0
        kill -0 "$etcd_pid" 2>/dev/null || break
        sleep 0.05
    done
    return 1
}

etcd_stop() {
    [ -n "$etcd_pid" ] || return 0
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    etcd_pid=""
}
