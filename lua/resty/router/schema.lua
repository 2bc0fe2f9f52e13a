-- resty.router.schema: field names and types.
--
--   local schema = require("resty.router.schema")
--   local s = schema.new()
--   assert(s:add_field("http.path", "String"))
--   s:add_field("http.headers.*", "String")   -- one more dotted segment: http.headers.x_foo
--   s:get_field_type("http.headers.accept")   --> "String"
--
-- A schema accepts fields until the first router or context is made from it.
--
-- Invariant: `ids` and `types` cache the ids of the fields declared with add_field (listed in
-- `declared`), resolved through any context of this schema: those ids never change, and every
-- context of it shares the same C schema, so the cache is valid for all of them. Names under a
-- `prefix.*` wildcard (http.headers.x_foo) are never cached: their id lives only while a route
-- uses the name, and a request's header names must not grow a per-worker table.

local ffi = require("ffi")
local cdefs = require("resty.router.cdefs")

local lib = cdefs.lib
local arm, message = cdefs.arm, cdefs.message
local errbuf, errlen = cdefs.errbuf, cdefs.errlen
local TYPE_CODES, TYPE_NAMES = cdefs.TYPE_CODES, cdefs.TYPE_NAMES

local _M = {}
_M._VERSION = "0.2.0"
local mt = { __index = _M }

-- A closure, not the bare function pointer, so that the finalizer itself keeps `lib` alive.
local function free(p)
    lib.atc_schema_free(p)
end

function _M.new()
    local p = lib.atc_schema_new()
    if p == nil then
        return nil, "could not create a schema"
    end
    return setmetatable({ ptr = ffi.gc(p, free), ids = {}, types = {}, declared = {} }, mt)
end

-- true, or nil and an error (unknown type, invalid or duplicate name, schema already in use).
function _M:add_field(name, typ)
    if type(name) ~= "string" then
        return nil, "field name must be a string, got " .. type(name)
    end
    local code = TYPE_CODES[typ]
    if not code then
        return nil, "unknown field type " .. tostring(typ)
            .. " (expected \"String\", \"Int\", \"IpAddr\" or \"IpCidr\")"
    end
    arm()
    local rc = lib.atc_schema_add_field(self.ptr, name, #name, code, errbuf, errlen)
    if rc ~= 0 then
        return nil, message(rc)
    end
    if name:sub(-2) ~= ".*" then
        self.declared[name] = true
    end
    return true
end

local type_out = ffi.new("int32_t[1]")

-- "String", "Int", "IpAddr", "IpCidr", or nil for an unknown field.
function _M:get_field_type(name)
    if type(name) ~= "string" then
        return nil
    end
    if lib.atc_schema_field_type(self.ptr, name, #name, type_out) ~= 0 then
        return nil
    end
    return TYPE_NAMES[type_out[0]]
end

return _M
