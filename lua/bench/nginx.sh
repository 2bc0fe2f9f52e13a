# Sourced by the Lua benchmarks that run in nginx (radixtree.sh, kong.sh): a one-worker nginx
# with the Lua module whose location /bench/ runs a handler the caller gives.

# bench_nginx_conf PREFIX LUA_PATH LUA_CPATH PORT HANDLER WRITER: writes PREFIX/nginx.conf.
bench_nginx_conf() {
    local prefix=$1 lua_path=$2 lua_cpath=$3 port=$4 handler=$5 writer=$6
    mkdir -p "$prefix/logs" "$prefix/tmp"
    cat >"$prefix/nginx.conf" <<CONF
# Written by $writer.
worker_processes 1;
pid $prefix/logs/nginx.pid;
error_log $prefix/logs/error.log notice;
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $prefix/tmp;
    lua_package_path "$lua_path;;";
    lua_package_cpath "$lua_cpath;;";
    server {
        listen 127.0.0.1:$port;
        location /bench/ {
            content_by_lua_block {
                $handler
            }
        }
    }
}
CONF
}

# bench_port_free PORT: fails, saying so, when something listens on 127.0.0.1:PORT.
bench_port_free() {
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
        echo "port $1 on 127.0.0.1 is in use; set BENCH_PORT" >&2
        return 1
    fi
}

# bench_wait_port PORT: waits up to 5 s for 127.0.0.1:PORT to accept connections.
bench_wait_port() {
    for _ in $(seq 50); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
}
