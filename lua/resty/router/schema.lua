-- resty.router.schema: field names and types.
--
--   local schema = require("resty.router.schema")
--   local s = schema.new()
--   assert(s:add_field("http.path", "String"))
--   s:add_field("http.headers.*", "String")   -- one more dotted segment: http.headers.x_foo
--   s:get_field_type("http.headers.accept")   --> "String"
--   assert(s:set_limits({ max_predicates = 64, max_regexes = 8 }))   -- for tenants' routes
--   s:get_limits()                            --> { max_predicates = 64, max_depth = 256, ... }
--
-- A schema accepts fields and limits until the first router or context is made from it; its
-- limits then govern those routers (their routes), router.validate and the contexts. The
-- limits and their defaults are in SECURITY.md.
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
local LIMIT_CODES, LIMIT_NAMES = cdefs.LIMIT_CODES, cdefs.LIMIT_NAMES

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
    -- aliases: the alias ids router:add_matcher holds second priorities of an id under, to
    -- the id (alias_refs: how many routers hold each); read by context:get_result.
    return setmetatable({ ptr = ffi.gc(p, free), ids = {}, types = {}, declared = {},
        aliases = {}, alias_refs = {} }, mt)
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

-- A limit's value as uint64_t: a positive integral Lua number that a double represents
-- exactly, or a positive 64-bit integer cdata; nil and why otherwise.
local function limit_value(name, v)
    if type(v) == "number" then
        if v >= 1 and v <= 2 ^ 53 and v == math.floor(v) then
            return v
        end
    elseif type(v) == "cdata" and (ffi.istype("uint64_t", v) or ffi.istype("int64_t", v))
        and v >= 1 then
        return ffi.cast("uint64_t", v)
    end
    return nil, "limit " .. name .. " must be a positive integer, got " .. tostring(v)
end

-- true, or nil and an error: an unknown name, a value that is not a positive integer, a
-- schema already used by a router or a context. `limits` maps names of LIMIT_NAMES to values;
-- the limits it leaves out keep their values. Everything is checked before anything is set,
-- so a failure changes nothing. A max_depth above 256 is taken as 256 (the core's hard cap).
function _M:set_limits(limits)
    if type(limits) ~= "table" then
        return nil, "limits must be a table, got " .. type(limits)
    end
    local values = {}
    for name, v in pairs(limits) do
        if not LIMIT_CODES[name] then
            return nil, "unknown limit " .. tostring(name) .. " (expected "
                .. table.concat(LIMIT_NAMES, ", ") .. ")"
        end
        local value, err = limit_value(name, v)
        if not value then
            return nil, err
        end
        values[name] = value
    end
    -- In a fixed order: a schema already in use refuses the first one, before any is set.
    for _, name in ipairs(LIMIT_NAMES) do
        local value = values[name]
        if value then
            arm()
            local rc = lib.atc_schema_set_limit(self.ptr, LIMIT_CODES[name], value, errbuf, errlen)
            if rc ~= 0 then
                return nil, message(rc)
            end
        end
    end
    return true
end

local limit_out = ffi.new("uint64_t[1]")

-- Every limit of the schema by name: the defaults, or what set_limits set. Values are numbers
-- (uint64_t cdata past 2^53, which only a C caller can set).
function _M:get_limits()
    local out = {}
    for _, name in ipairs(LIMIT_NAMES) do
        local rc = lib.atc_schema_get_limit(self.ptr, LIMIT_CODES[name], limit_out)
        if rc ~= 0 then
            -- Only a bad handle or code fails, and both are ours: a bug, not bad input.
            error("resty.router: atc_schema_get_limit(" .. name .. "): "
                .. ffi.string(lib.atc_strerror(rc)))
        end
        local v = limit_out[0]
        out[name] = v <= 2 ^ 53 and tonumber(v) or v
    end
    return out
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
