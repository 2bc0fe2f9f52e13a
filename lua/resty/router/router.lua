-- resty.router.router: routes in priority order, matched against contexts.
--
--   local router = require("resty.router.router")
--   local r = router.new(s)
--   assert(r:add_matcher(10, "a8f2c1e4-0000-4000-8000-000000000001", [[http.path ^= "/api"]]))
--   if r:execute(c) then local uuid, prefix = c:get_result("http.path") end
--
-- Making a router shares its schema: no field can be added to the schema afterwards.

local ffi = require("ffi")
local cdefs = require("resty.router.cdefs")

local lib = cdefs.lib
local arm, message = cdefs.arm, cdefs.message
local errbuf, errlen = cdefs.errbuf, cdefs.errlen
local to_priority = cdefs.priority

local ERR_BUFFER = lib.ATC_ERR_BUFFER

local _M = {}
local mt = { __index = _M }

local function free(p)
    lib.atc_router_free(p)
end

-- `routes_n` (the expected number of routes) is accepted for compatibility; it is a hint the
-- router does not need.
function _M.new(schema, routes_n) -- luacheck: ignore routes_n
    if type(schema) ~= "table" or schema.ptr == nil then
        error("bad argument #1 to 'new' (schema expected)", 2)
    end
    arm()
    local p = lib.atc_router_new(schema.ptr, errbuf, errlen)
    if p == nil then
        return nil, message(lib.ATC_ERR_NULL)
    end
    return setmetatable({ ptr = ffi.gc(p, free), schema = schema }, mt)
end

-- true, or nil and an error (bad priority or UUID, duplicate id, invalid expression with its
-- position).
function _M:add_matcher(priority, uuid, expr)
    local prio, perr = to_priority(priority)
    if not prio then
        return nil, perr
    end
    if type(uuid) ~= "string" then
        return nil, "uuid must be a string, got " .. type(uuid)
    end
    if type(expr) ~= "string" then
        return nil, "expression must be a string, got " .. type(expr)
    end
    arm()
    local rc = lib.atc_router_add(self.ptr, prio, uuid, #uuid, expr, #expr, errbuf, errlen)
    if rc ~= 0 then
        return nil, message(rc)
    end
    return true
end

-- true when a route with that id was removed, false otherwise.
function _M:remove_matcher(uuid)
    if type(uuid) ~= "string" then
        return false
    end
    arm()
    return lib.atc_router_remove(self.ptr, uuid, #uuid, errbuf, errlen) == 0
end

-- true when a route matched (read it with context:get_result()), false otherwise; false and an
-- error when the context belongs to another schema.
function _M:execute(context)
    if type(context) ~= "table" or context.ptr == nil then
        error("bad argument #1 to 'execute' (context expected)", 2)
    end
    local rc = lib.atc_router_execute(self.ptr, context.ptr)
    if rc == 1 then
        return true
    end
    if rc == 0 then
        return false
    end
    return false, ffi.string(lib.atc_strerror(rc))
end

-- Grown on demand and kept: field lists are read at configuration time, not per request.
local names_cap = 1024
local names_buf = ffi.new("char[?]", names_cap)
local names_len = ffi.new("size_t[1]")
local names_count = ffi.new("size_t[1]")

local function split_names(n)
    local out, start, total = {}, 0, tonumber(names_len[0])
    for i = 0, total - 1 do
        if names_buf[i] == 0 then
            out[#out + 1] = ffi.string(names_buf + start, i - start)
            start = i + 1
        end
    end
    assert(#out == n, "field list does not match its count")
    return out
end

-- Calls `fn` (which fills names_buf) until the buffer is large enough.
local function with_names(fn)
    while true do
        names_len[0] = names_cap
        local rc = fn()
        if rc ~= ERR_BUFFER then
            return rc
        end
        names_cap = tonumber(names_len[0])
        names_buf = ffi.new("char[?]", names_cap)
    end
end

-- The names of the fields used by at least one route, sorted.
function _M:get_fields()
    local ptr = self.ptr
    local rc = with_names(function()
        return lib.atc_router_fields(ptr, names_buf, names_len, names_count)
    end)
    if rc ~= 0 then
        return nil, ffi.string(lib.atc_strerror(rc))
    end
    return split_names(tonumber(names_count[0]))
end

-- The fields an expression uses (in order of first use), or nil and an error saying where and
-- why the expression is invalid for the schema.
function _M.validate(schema, expr)
    if type(schema) ~= "table" or schema.ptr == nil then
        error("bad argument #1 to 'validate' (schema expected)", 2)
    end
    if type(expr) ~= "string" then
        return nil, "expression must be a string, got " .. type(expr)
    end
    local rc = with_names(function()
        arm()
        return lib.atc_router_validate(schema.ptr, expr, #expr, names_buf, names_len,
            names_count, errbuf, errlen)
    end)
    if rc ~= 0 then
        return nil, message(rc)
    end
    return split_names(tonumber(names_count[0]))
end

return _M
