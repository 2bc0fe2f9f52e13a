-- resty.router.gateway.updates: versioned updates of a gateway's router, and the routing plan
-- each update derives from the routes: which fields a request is read for, from where, and in
-- how many phases.
--
-- Update model. update() does nothing when `version` is the version last applied; otherwise it
-- syncs the router to `routes` (only the routes that differ are parsed again) and makes the new
-- plan. `routes` may be a function returning the list, called only when the version differs
-- (it may yield, e.g. to fetch the list: the table changes only after it returned).
--
-- Invariants:
-- * A plan is made whole from the router's field list and key fields after the sync, then
--   installed with the version in one step; from the sync to that step nothing yields. An
--   OpenResty worker runs one Lua thread at a time, so every request is routed either by the
--   old table and plan or by the new ones, never by a mix.
-- * A plan is never changed once installed (route() reads it without copying).
-- * Every field in use has exactly one step, in `steps`, and in exactly one of `key_steps`
--   (the fields of the router's indexes) and `lazy_steps` (read only when the request's
--   candidate routes need them).

local bit = require("bit")
local router = require("resty.router.router")
local request = require("resty.router.gateway.request")

local type, tostring, ipairs, pcall = type, tostring, ipairs, pcall
local band, bor = bit.band, bit.bor

local _M = {}
_M._VERSION = "0.2.0"

-- The plan of a router without routes: nothing to read.
_M.EMPTY = { fields = {}, steps = {}, key_steps = {}, lazy_steps = {}, one_pass = true }

-- The plan for the current routes of `r`, reading values for context `c`.
--
-- Two-phase routing (route()): the key steps are read for every request, then
-- r:needed_fields() says which lazy steps the routes left possible by those values use, and
-- only those are read. When every request needs every field anyway (a table no index holds),
-- the plan reads everything in one pass. Only then: even when the lazy fields are cheap nginx
-- variables, asking pays, because needed_fields also loads the candidates' programs, loads
-- that overlap with the second phase's reading where a one-pass execute would wait for them.
function _M.plan(r, c, extractors)
    local fields = r:get_fields() or {}
    local klo, khi = r:key_fields()
    local steps, key_steps, lazy_steps = {}, {}, {}
    for i, field in ipairs(fields) do
        local kind, arg, present = request.source(field, extractors)
        -- Every field in use is in the schema: the router validated it.
        local id, ty = c:field_id(field)
        local lo, hi = router.field_mask(id)
        local step = {
            field = field, kind = kind, arg = arg, present = present, id = id, type = ty,
            lo = lo, hi = hi,
        }
        steps[i] = step
        if bor(band(klo, lo), band(khi, hi)) ~= 0 then
            key_steps[#key_steps + 1] = step
        else
            lazy_steps[#lazy_steps + 1] = step
        end
    end
    -- What every request needs: the needed fields of a context without values.
    c:reset()
    local nlo, nhi = r:needed_fields(c)
    local one_pass = true
    for _, step in ipairs(lazy_steps) do
        if bor(band(nlo, step.lo), band(nhi, step.hi)) == 0 then
            one_pass = false
            break
        end
    end
    return {
        fields = fields, steps = steps, key_steps = key_steps, lazy_steps = lazy_steps,
        one_pass = one_pass,
    }
end

-- Brings gateway `gw` to `routes` unless `version` is the one applied (see
-- resty.router.gateway's update() for the results).
function _M.update(gw, version, routes, mode)
    if version == nil then
        return nil, "version must not be nil"
    end
    if version == gw.applied then
        return false
    end
    if type(routes) == "function" then
        -- A loader that raises is a loader that failed: nil and why, like one that returns
        -- nil and an error (pcall lets it yield, in LuaJIT and OpenResty).
        local ok, list, err = pcall(routes)
        if not ok then
            return nil, "the route loader failed: raised " .. tostring(list)
        end
        if type(list) ~= "table" then
            return nil, "the route loader failed: " .. tostring(err)
        end
        -- The loader may have yielded, and another update applied this version meanwhile.
        if version == gw.applied then
            return false
        end
        routes = list
    end
    local report, err, errs = gw.router:sync(routes, mode or gw.mode)
    if not report then
        return nil, err, errs
    end
    -- No yield from here on: the new table, its plan and its version start together.
    gw.plan = _M.plan(gw.router, gw.context, gw.extractors)
    gw.applied = version
    return true, report
end

return _M
