-- The Lua side of atc-router for OpenResty: the resty.router.* modules and libatc_router.so.
--
--   luarocks make --tree=/path/to/tree          # from a checkout (builds the library with cargo)
--
-- The build runs `make -C ffi lib` (cargo build --release into target/, nothing to do when it is
-- fresh) and installs with `make -C ffi install-lua`. Needs Rust (scripts/install-deps).
rockspec_format = "3.0"
package = "atc-router"
version = "0.2.0-1"

source = {
    url = "git+https://example.invalid/atc-router.git",
    tag = "v0.2.0",
}

description = {
    summary = "Route matching engine for API gateways: a drop-in for Kong's resty.router modules",
    detailed = [[
An indexed router for route expressions (http.host == "a.com" && http.path ^= "/api") with
priorities: resty.router.schema, resty.router.router and resty.router.context keep the API of
Kong's router modules; resty.router.gateway routes requests in nginx and takes versioned
updates between requests. The library (libatc_router.so) is written in Rust.]],
    license = "Apache-2.0",
    labels = { "openresty", "router", "kong", "luajit", "ffi" },
}

dependencies = {
    "lua == 5.1", -- LuaJIT (its FFI loads the library)
}

build = {
    type = "make",
    makefile = "ffi/Makefile",
    build_target = "lib",
    install_target = "install-lua",
    install_variables = {
        LUA_LIBDIR = "$(LIBDIR)",
        LUA_SHAREDIR = "$(LUADIR)",
    },
}
