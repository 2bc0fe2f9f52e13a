-- resty.router.context: the values of one request, and the route it matched.
--
--   local context = require("resty.router.context")
--   local c = context.new(s)           -- once per worker; reset between requests
--   c:add_value("http.path", ngx.var.uri)
--   c:add_value("http.headers.accept", ngx.req.get_headers()["accept"])  -- string or array
--   c:add_values(values, n)            -- or a whole atc_value array in one call
--   if r:execute(c) then
--       local uuid, prefix, captures = c:get_result("http.path")
--   end
--   c:reset()
--
-- Captures that cost nothing until read (opt-in; get_result stays exactly Kong's):
--   local uuid, prefix, n = c:get_result_lazy("http.path")   -- n: how many captures
--   local id = c:get_capture("id")                          -- one capture, on demand
--   local caps = c:get_captures(reused)                     -- all of them, into a table
-- These read the result the context holds when they are called (the last execute's winner;
-- nothing after reset), through the C ABI each time: they never keep pointers into the context
-- between calls, so a late read gives the current result or nil, never stale bytes.
--
-- Invariants: declared field names are resolved to ids once per schema (cached on the schema
-- object); wildcard names (headers) are resolved on each use, since their ids change with the
-- routes that use them (a name no route uses resolves to an id whose values are ignored);
-- results are read through buffers allocated once per module, so a request costs no FFI
-- allocation, only the Lua strings it returns.

local ffi = require("ffi")
local cdefs = require("resty.router.cdefs")

local lib = cdefs.lib
local arm, message = cdefs.arm, cdefs.message
local errbuf, errlen = cdefs.errbuf, cdefs.errlen
local TYPE_NAMES = cdefs.TYPE_NAMES

local type, tonumber, floor = type, tonumber, math.floor
local ffi_string = ffi.string

-- Sized tables avoid rehashing while captures are filled in (LuaJIT 2.1 has table.new).
local ok_new, table_new = pcall(require, "table.new")
if not ok_new then
    table_new = function()
        return {}
    end
end

local T_STRING = lib.ATC_TYPE_STRING
local T_INT = lib.ATC_TYPE_INT
local T_NONE = lib.ATC_TYPE_NONE
local UUID_LEN = lib.ATC_UUID_LEN
local ERR_BUFFER = lib.ATC_ERR_BUFFER

local _M = {}
_M._VERSION = "0.2.0"
local mt = { __index = _M }

local function free(p)
    lib.atc_context_free(p)
end

function _M.new(schema)
    if type(schema) ~= "table" or schema.ptr == nil then
        error("bad argument #1 to 'new' (schema expected)", 2)
    end
    arm()
    local p = lib.atc_context_new(schema.ptr, errbuf, errlen)
    if p == nil then
        return nil, message(lib.ATC_ERR_NULL)
    end
    return setmetatable({
        ptr = ffi.gc(p, free),
        schema = schema,
        ids = schema.ids,
        aliases = schema.aliases,
        types = schema.types,
        declared = schema.declared,
    }, mt)
end

local id_out = ffi.new("uint32_t[1]")
local type_out = ffi.new("int32_t[1]")

-- id, type code of a field; nil and an error for a name the schema does not know.
local function resolve(self, field)
    local id = self.ids[field]
    if id then
        return id, self.types[field]
    end
    if type(field) ~= "string" then
        return nil, "field name must be a string, got " .. type(field)
    end
    arm()
    local rc = lib.atc_context_field_id(self.ptr, field, #field, id_out, type_out, errbuf, errlen)
    if rc ~= 0 then
        return nil, message(rc)
    end
    id = tonumber(id_out[0])
    local ty = tonumber(type_out[0])
    if self.declared[field] then
        self.ids[field] = id
        self.types[field] = ty
    end
    return id, ty
end

-- The id and type code of a field (for add_values batches and field masks), or nil and an
-- error.
function _M:field_id(field)
    return resolve(self, field)
end

local function add_one(self, field, id, ty, value)
    local tv = type(value)
    local rc
    if ty == T_STRING then
        if tv ~= "string" then
            return nil, "field `" .. field .. "` takes String values, got a Lua " .. tv
        end
        arm()
        rc = lib.atc_context_add_str(self.ptr, id, value, #value, errbuf, errlen)
    elseif ty == T_INT then
        if tv == "number" then
            -- A double outside [-2^63, 2^63) or with a fraction has no int64_t; LuaJIT would
            -- convert it silently.
            if value ~= floor(value) or value < -2 ^ 63 or value >= 2 ^ 63 then
                return nil, "field `" .. field .. "` takes Int values, got " .. tostring(value)
            end
        elseif not (tv == "cdata" and (ffi.istype("int64_t", value)
                or ffi.istype("uint64_t", value) and value <= 9223372036854775807ULL)) then
            return nil, "field `" .. field .. "` takes Int values, got a Lua " .. tv
        end
        arm()
        rc = lib.atc_context_add_int(self.ptr, id, value, errbuf, errlen)
    else
        if tv ~= "string" then
            return nil, "field `" .. field .. "` takes " .. TYPE_NAMES[ty]
                .. " values (as text), got a Lua " .. tv
        end
        arm()
        rc = lib.atc_context_add_ip(self.ptr, id, value, #value, errbuf, errlen)
    end
    if rc ~= 0 then
        return nil, message(rc)
    end
    return true
end

-- Appends a value to a field: true, or nil and an error (unknown field, wrong type, invalid
-- UTF-8 or address, too many values). A nil value does nothing; an array adds each element in
-- order (what ngx.req.get_headers() gives for a repeated header). String fields take strings,
-- Int fields integral numbers (or int64 cdata), IpAddr and IpCidr fields text.
function _M:add_value(field, value)
    if value == nil then
        return true
    end
    local id, ty = resolve(self, field)
    if not id then
        return nil, ty
    end
    if type(value) == "table" then
        for i = 1, #value do
            local ok, err = add_one(self, field, id, ty, value[i])
            if not ok then
                return nil, err
            end
        end
        return true
    end
    return add_one(self, field, id, ty, value)
end

local failed = ffi.new("size_t[1]")

-- Appends `n` values in one call: values[0] .. values[n - 1] of an `atc_value` array (see
-- cdefs: field id from field_id(), ATC_TYPE_* code, int_value or ptr and len), in order. For
-- callers that read a request into a reused array, so that adding its values allocates nothing
-- and crosses the FFI once. A string pointer needs to stay valid only during the call (the
-- context copies). Returns true, or nil, the error and the 1-based position of the value that
-- failed; the values before it were added (reset to drop a partial request).
function _M:add_values(values, n)
    if n == 0 then
        return true
    end
    arm()
    local rc = lib.atc_context_add_values(self.ptr, values, n, failed, errbuf, errlen)
    if rc ~= 0 then
        -- The library's message starts with "value <i>: ", which the position replaces.
        local msg = message(rc):gsub("^value %d+: ", "")
        return nil, msg, tonumber(failed[0]) + 1
    end
    return true
end

-- Forgets the values and the result; the context is ready for the next request.
function _M:reset()
    lib.atc_context_reset(self.ptr)
end

local uuid_buf = ffi.new("char[?]", UUID_LEN)
local uuid_len = ffi.new("size_t[1]")
local matched = ffi.new("atc_matched")
local ncaptures = ffi.new("size_t[1]")
local field_box = ffi.new("uint32_t[1]")
local caps_cap = 16
local caps = ffi.new("atc_capture[?]", caps_cap)
local caps_n = ffi.new("size_t[1]")

-- Reads the context's captures into the module's buffer `caps` (grown when too small): their
-- number, or nil when the call failed. The entries point into the context: valid only until
-- the next call that changes it, so every reader uses them before returning.
local function fetch_captures(self)
    while true do
        caps_n[0] = caps_cap
        local rc = lib.atc_context_captures(self.ptr, caps, caps_n)
        if rc == 0 then
            return tonumber(caps_n[0])
        end
        if rc ~= ERR_BUFFER then
            return nil
        end
        caps_cap = tonumber(caps_n[0])
        caps = ffi.new("atc_capture[?]", caps_cap)
    end
end

-- Fills `out` with the n captures fetch_captures() left in `caps` (a key may repeat: the last
-- one wins, as the C ABI documents).
local function fill_captures(out, n)
    for i = 0, n - 1 do
        local c = caps[i]
        local v = ffi_string(c.value, c.value_len)
        if c.index >= 0 then
            out[tonumber(c.index)] = v
        else
            out[ffi_string(c.name, c.name_len)] = v
        end
    end
    return out
end

local function read_captures(self)
    local n = fetch_captures(self)
    if not n then
        return nil
    end
    return fill_captures(table_new(n, n), n)
end

local value_out = ffi.new("atc_matched[1]")

-- The values the context holds for `field`, in the order they were added: an array of strings
-- (numbers for an Int field; addresses and networks as text), empty when it has none (a field
-- no route uses keeps none); nil and an error for a field the schema does not know. What a
-- request was read as, for diagnostics and tests.
function _M:get_values(field)
    local id, err = resolve(self, field)
    if not id then
        return nil, err
    end
    local out, i = {}, 0
    while true do
        local rc = lib.atc_context_value(self.ptr, id, i, value_out)
        if rc == 0 then
            return out
        elseif rc < 0 then
            return nil, "field `" .. field .. "`: cannot read its values (" .. tonumber(rc) .. ")"
        end
        local v = value_out[0]
        i = i + 1
        if v.value_type == T_INT then
            out[i] = tonumber(v.int_value)
        else
            out[i] = ffi_string(v.ptr, v.len)
        end
    end
end

-- The result of the last execute without its captures: uuid, matched_value and the number of
-- captures; nil when it matched nothing. Shared by get_result and get_result_lazy.
local function result(self, matched_field)
    local fid = nil
    if matched_field ~= nil then
        local id = resolve(self, matched_field)
        if id then
            field_box[0] = id
            fid = field_box
        end
    end
    uuid_len[0] = UUID_LEN
    local rc = lib.atc_context_result(self.ptr, fid, uuid_buf, uuid_len, matched, ncaptures)
    if rc ~= 1 then
        return nil
    end
    -- A route's id is the same text on every request it wins: LuaJIT interns strings, so after
    -- the first request this finds the existing string and allocates nothing.
    local uuid = ffi_string(uuid_buf, UUID_LEN)
    -- A second priority of an id, held under an alias (router:add_matcher): named by the id.
    uuid = self.aliases[uuid] or uuid
    local value = nil
    local vt = matched.value_type
    if vt == T_INT then
        value = tonumber(matched.int_value)
    elseif vt ~= T_NONE and matched.len > 0 then
        -- An empty matched value (a regex that matched the empty string) is nil, as in Kong's
        -- binding.
        value = ffi_string(matched.ptr, matched.len)
    end
    return uuid, value, tonumber(ncaptures[0])
end

-- After a successful execute: uuid, matched_value, captures. `matched_value` is the value
-- recorded for `matched_field` (a string; a number for an Int field) or nil (also for an empty
-- string, as Kong's binding answers); `captures` maps
-- group numbers (Lua numbers, 0 = whole match) and group names to text, or is nil when the
-- route captured nothing. Returns nil when the last execute matched nothing.
function _M:get_result(matched_field)
    local uuid, value, n = result(self, matched_field)
    if not uuid then
        return nil
    end
    local captures = nil
    if n > 0 then
        captures = read_captures(self)
    end
    return uuid, value, captures
end

-- get_result without the captures table: uuid, matched_value (as get_result gives them) and
-- the number of captures the route recorded (0 when none), or nil when the last execute matched
-- nothing. No Lua object is made for the captures: read the ones wanted with get_capture(), or
-- all of them with get_captures(). For callers that read captures on few requests (a gateway
-- whose routes capture path parameters that only some upstreams want), where get_result would
-- make a table and a string per capture for nothing. The uuid and a matched value that is a
-- route's literal (a prefix) are interned strings found again, not made; a matched value cut
-- from the request (a regex's match) is a new string.
function _M:get_result_lazy(matched_field)
    return result(self, matched_field)
end

pcall(ffi.cdef, "int memcmp(const void *a, const void *b, size_t n);")
local memcmp = ffi.C.memcmp

-- The capture of the current result under `key`: a group number (a Lua number, 0 = the whole
-- match) or a group name (a string), as get_result's table would hold it; nil when the route
-- did not capture it, when there is no result (no match, or after reset), or for a key of
-- another type. Reads the context's result when called: after the next execute it answers for
-- that request's winner. Costs one FFI call and a scan of the route's captures; makes only the
-- returned string.
function _M:get_capture(key)
    local tk = type(key)
    if tk ~= "number" and tk ~= "string" then
        return nil
    end
    local n = fetch_captures(self)
    if not n then
        return nil
    end
    -- From the last: a key that repeats keeps its last value, as in get_result's table.
    if tk == "number" then
        for i = n - 1, 0, -1 do
            local c = caps[i]
            -- tonumber: an int64 compared with a Lua number would truncate the number (1.5
            -- would find group 1).
            if tonumber(c.index) == key then
                return ffi_string(c.value, c.value_len)
            end
        end
    else
        local len = #key
        for i = n - 1, 0, -1 do
            local c = caps[i]
            if c.index < 0 and c.name_len == len and memcmp(c.name, key, len) == 0 then
                return ffi_string(c.value, c.value_len)
            end
        end
    end
    return nil
end

local ok_clear, table_clear = pcall(require, "table.clear")
if not ok_clear then
    table_clear = function(t)
        for k in pairs(t) do
            t[k] = nil
        end
    end
end

-- All captures of the current result, as get_result's table holds them, in `into` (emptied
-- first: a table the caller reuses across requests) or in a new table; the table is returned,
-- empty when there are none or no result. A reused table is the caller's: its
-- values are the strings of the request it was last filled for, until it is filled again.
function _M:get_captures(into)
    if into == nil then
        into = {}
    elseif type(into) ~= "table" then
        error("bad argument #1 to 'get_captures' (table or nil expected, got " .. type(into)
            .. ")", 2)
    else
        table_clear(into)
    end
    return fill_captures(into, fetch_captures(self) or 0)
end

return _M
