# Shared by scripts/gateway-bench and scripts/push-bench (sourced, not run): the nginx of a
# benchmark, one worker on 127.0.0.1 routing with lua/demo/atc_demo.lua, started and stopped.
#
# The caller sets: root (the checkout), prefix (nginx's prefix directory, with logs/ and tmp/),
# port, and optionally pin (an array: `taskset -c`, to pin nginx to CPU 1) and gateway_workers
# (default 1; more listen with reuseport, each connection going to one of them). The functions
# read them when called, so that one script can run several nodes. Functions:
#   gateway_conf DATA_DIR INIT_OPTS   writes $prefix/nginx.conf (INIT_OPTS: atc_demo.init's
#                                     options as a Lua table constructor)
#   gateway_start                     starts it and waits until version $gateway_version
#                                     (default 1) is in force
#   gateway_stop                      stops it (also on the caller's EXIT trap)

gateway_nginx() { nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log" "$@"; }
nginx_pid=""

gateway_conf() { # gateway_conf DATA_DIR INIT_OPTS
    cat > "$prefix/nginx.conf" <<CONF
# Written by scripts/$(basename "$0").
worker_processes ${gateway_workers:-1};
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;

events { worker_connections 4096; }

http {
    access_log off;
    client_body_temp_path $prefix/tmp/body;
    proxy_temp_path $prefix/tmp/proxy;
    fastcgi_temp_path $prefix/tmp/fastcgi;
    uwsgi_temp_path $prefix/tmp/uwsgi;
    scgi_temp_path $prefix/tmp/scgi;
    client_max_body_size 64m;
    client_body_buffer_size 64m;
    keepalive_requests 100000000;
    default_type text/plain;

    lua_package_path "$root/lua/?.lua;$root/lua/demo/?.lua;/usr/share/lua/5.1/?.lua;;";
    lua_package_cpath "$root/target/lib/?.so;;";
    lua_shared_dict atc_share 1m;
    init_worker_by_lua_block { require("atc_demo").init("$1/routes.tsv", $2) }

    server {
        listen 127.0.0.1:$port backlog=4096$( [ "${gateway_workers:-1}" = 1 ] || echo " reuseport");
        location = /admin/routes {
            allow 127.0.0.1;
            deny all;
            content_by_lua_block { require("atc_demo").admin() }
        }
        location = /admin/stats {
            allow 127.0.0.1;
            deny all;
            content_by_lua_block { require("atc_demo").stats() }
        }
        location = /admin/churn {
            allow 127.0.0.1;
            deny all;
            content_by_lua_block { require("atc_demo").churn() }
        }
        location ^~ /atc-probe/ { content_by_lua_block { require("atc_demo").probe() } }
        location / { content_by_lua_block { require("atc_demo").bench() } }
    }
}
CONF
}

gateway_start() {
    : > "$prefix/logs/error.log"
    ${pin[@]+"${pin[@]}" 1} nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log"
    # Version 1 is in force at once, or (with share) once its image is written and mapped. The
    # answer is read whole before it is looked at (grep -q leaving early would fail curl).
    local up="" answer
    for _ in $(seq 1200); do
        if [ -s "$prefix/logs/nginx.pid" ]; then
            answer=$(curl -sf "http://127.0.0.1:$port/admin/routes" 2>/dev/null || true)
            if [[ $answer == "version ${gateway_version:-1}, "* ]]; then
                up=1
                break
            fi
        fi
        sleep 0.1
    done
    nginx_pid=$(cat "$prefix/logs/nginx.pid" 2>/dev/null || true)
    [ -n "$up" ] || { echo "nginx did not come up:"; tail "$prefix/logs/error.log"; exit 1; }
    { grep -o 'version 1 with .*invalid' "$prefix/logs/error.log" || true; } | tail -n 1 | sed 's/^/  /'
}

gateway_stop() {
    [ -n "$nginx_pid" ] || return 0
    gateway_nginx -s stop 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$nginx_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
}

# Fails the run when nginx logged a crash or worse.
gateway_check_log() {
    if grep -qE '\[(crit|alert|emerg)\]' "$prefix/logs/error.log"; then
        echo "nginx logged errors:"; grep -E '\[(crit|alert|emerg)\]' "$prefix/logs/error.log" | head; exit 1
    fi
}
