-- Smoke test of an installed copy of the Lua side (a luarocks tree, the .deb's files, `make
-- install`), run by scripts/check-install in a plain LuaJIT whose package.path and
-- package.cpath name the installation only:
--
--   LUA_PATH='PREFIX/share/lua/5.1/?.lua' LUA_CPATH='PREFIX/lib/lua/5.1/?.so' \
--       luajit lua/t/installed.lua PREFIX
--
-- Every module and the library must be found under PREFIX, report one version, and route a
-- request.
local ffi = require("ffi")

local prefix = assert(arg[1], "usage: luajit lua/t/installed.lua PREFIX")

local function under_prefix(path, what)
    if not path or path:sub(1, #prefix + 1) ~= prefix .. "/" then
        error(what .. " is found at " .. tostring(path) .. ", not under " .. prefix, 2)
    end
    return path
end

local lib_path = under_prefix(package.searchpath("libatc_router", package.cpath), "libatc_router")
local cdefs = require("resty.router.cdefs")
local version = ffi.string(cdefs.lib.atc_router_version())

local modules = {
    "resty.router.cdefs", "resty.router.schema", "resty.router.router", "resty.router.context",
    "resty.router.json", "resty.router.gateway", "resty.router.gateway.updates",
    "resty.router.gateway.request", "resty.router.gateway.sources",
    "resty.router.gateway.explain", "resty.router.gateway.metrics",
    "resty.router.gateway.share", "resty.router.image", "resty.router.etcd",
    "resty.router.etcd.client", "resty.router.etcd.routes",
}
for _, name in ipairs(modules) do
    under_prefix(package.searchpath(name, package.path), name)
    local m = require(name)
    assert(m._VERSION == version, name .. "._VERSION is " .. tostring(m._VERSION)
        .. ", the library's version " .. version)
end

-- One request, routed.
local schema = require("resty.router.schema").new()
assert(schema:add_field("http.host", "String"))
assert(schema:add_field("http.path", "String"))
local router = require("resty.router.router").new(schema)
assert(router:add_matcher(10, "a8f2c1e4-5b7d-4c1e-9f3a-2d6b8e0c4a11",
    [[http.host == "api.example.com" && http.path ~ r#"^/users/(?<id>\d+)$"#]]))
assert(router:add_matcher(5, "a8f2c1e4-5b7d-4c1e-9f3a-2d6b8e0c4a12", [[http.path ^= "/"]]))
local c = require("resty.router.context").new(schema)
assert(c:add_value("http.host", "api.example.com"))
assert(c:add_value("http.path", "/users/42"))
assert(router:execute(c), "the request matched no route")
local uuid, path, captures = c:get_result("http.path")
assert(uuid == "a8f2c1e4-5b7d-4c1e-9f3a-2d6b8e0c4a11", "routed to " .. tostring(uuid))
assert(path == "/users/42" and captures.id == "42", "captures: " .. tostring(captures and captures.id))

print(("installed copy ok: resty.router %s, %d modules and %s, routed GET api.example.com/users/42")
    :format(version, #modules, lib_path))
