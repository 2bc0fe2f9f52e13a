-- resty.router.etcd.routes: what an etcd key and its value mean as a route, and etcd's key
-- ranges. Pure Lua: no socket, no nginx (lua/t/etcd_test.lua runs it in a plain LuaJIT).
--
-- Key layout: one route per key, `<prefix><route id>`; the value is a JSON object
--   {"priority": 100, "expression": "http.path ^= \"/a\""}
-- (other members are ignored, so a control plane may keep its own there).
--
-- Invariants:
-- * decode() never raises, whatever the key or value holds: it returns the route or the reason
--   it is not one (the watcher logs and counts it, and leaves the route out).
-- * A key whose value is not a valid route means "no route with that id": the changes of a
--   revision take such an id out of the table (a route already held is removed, never kept at
--   an older value), so a node that followed the watch and a node that loaded the same
--   revision afresh hold the same table.
-- * changes() collapses the events of one watch response to the last event of each key, so a
--   list of changes never names an id twice.

local json = require("resty.router.json")
local router = require("resty.router.router")

local type, tostring, ipairs, byte, char, sub, floor =
    type, tostring, ipairs, string.byte, string.char, string.sub, math.floor

local _M = {}
_M._VERSION = "0.2.0"

-- Defaults of the size limits (the watcher's options max_value_bytes).
_M.MAX_VALUE_BYTES = 64 * 1024
-- The priorities the library accepts: integers in 0..2^53.
local MAX_PRIORITY = 2 ^ 53

local UUID = "^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$"

-- The range_end etcd wants for every key that starts with `prefix`: the prefix with its last
-- byte below 0xff incremented (and what follows it dropped); "\0" (to the end of the key
-- space) when every byte is 0xff or the prefix is empty.
function _M.range_end(prefix)
    for i = #prefix, 1, -1 do
        local b = byte(prefix, i)
        if b < 0xff then
            return sub(prefix, 1, i - 1) .. char(b + 1)
        end
    end
    return "\0"
end

-- The route id a key names, or nil and why it names none.
function _M.id_of(key, prefix)
    if type(key) ~= "string" or sub(key, 1, #prefix) ~= prefix then
        return nil, "the key is not under the prefix " .. prefix
    end
    local id = sub(key, #prefix + 1)
    if not id:find(UUID) then
        return nil, "the key's suffix is not a UUID (8-4-4-4-12 hexadecimal digits)"
    end
    return id
end

-- The route `value` (the bytes etcd holds) describes for `key`: { id =, priority =,
-- expression = }, or nil and the reason it is none. `opts`: { prefix =, max_value_bytes =,
-- schema = } (with `schema`, the expression is also validated: parsed and checked against
-- its fields and limits, as the builder would).
function _M.decode(key, value, opts)
    local id, err = _M.id_of(key, opts.prefix)
    if not id then
        return nil, err
    end
    if type(value) ~= "string" then
        return nil, "the value is not base64"
    end
    local max = opts.max_value_bytes or _M.MAX_VALUE_BYTES
    if #value > max then
        return nil, "the value has " .. #value .. " bytes, more than max_value_bytes (" .. max
            .. ")"
    end
    local v
    v, err = json.decode(value)
    if err then
        return nil, "the value is not JSON (" .. err .. ")"
    end
    if type(v) ~= "table" then
        return nil, "the value is not a JSON object"
    end
    local p, e = v.priority, v.expression
    if type(p) ~= "number" or p ~= floor(p) or p < 0 or p > MAX_PRIORITY then
        return nil, "`priority` must be an integer from 0 to 2^53, got " .. (p == nil and "none"
            or tostring(p))
    end
    if type(e) ~= "string" then
        return nil, "`expression` must be a string, got " .. (e == nil and "none" or type(e))
    end
    if opts.schema then
        local ok, verr = router.validate(opts.schema, e)
        if not ok then
            return nil, "the expression is invalid: " .. tostring(verr)
        end
    end
    return { id = id, priority = p, expression = e }
end

-- The changes one watch response makes: `events` as etcd's JSON gateway gives them (each
-- { type = "PUT" or "DELETE" (absent for PUT), kv = { key =, value = } }, key and value
-- already base64-decoded by `unbase64`), read in order, the last event of each key winning.
-- Returns the list of changes for gw:update ({ upsert = { ids, priorities, expressions },
-- remove = { ids } }), how many PUTs were valid routes, and the refusals ({ key =, reason = },
-- one per PUT that was not a route). Every expression is validated (opts.schema): a refused
-- value removes its id (see the invariants).
function _M.changes(events, opts, unbase64)
    local last, order = {}, {}
    for _, ev in ipairs(events) do
        local kv = type(ev) == "table" and ev.kv
        local key = type(kv) == "table" and kv.key and unbase64(kv.key)
        if key then
            if last[key] == nil then
                order[#order + 1] = key
            end
            last[key] = ev
        end
    end
    local ids, prios, exprs, remove, refused = {}, {}, {}, {}, {}
    for _, key in ipairs(order) do
        local ev = last[key]
        if ev.type == "DELETE" then
            local id = _M.id_of(key, opts.prefix)
            if id then
                remove[#remove + 1] = id
            end
        else
            local route, why = _M.decode(key, ev.kv.value and unbase64(ev.kv.value) or "", opts)
            if route then
                ids[#ids + 1], prios[#prios + 1], exprs[#exprs + 1] =
                    route.id, route.priority, route.expression
            else
                refused[#refused + 1] = { key = key, reason = why }
                local id = _M.id_of(key, opts.prefix)
                if id then
                    remove[#remove + 1] = id
                end
            end
        end
    end
    return { upsert = { ids = ids, priorities = prios, expressions = exprs }, remove = remove },
        #ids, refused
end

return _M
