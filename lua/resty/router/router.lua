-- resty.router.router: routes in priority order, matched against contexts.
--
--   local router = require("resty.router.router")
--   local r = router.new(s)
--   assert(r:add_matcher(10, "a8f2c1e4-0000-4000-8000-000000000001", [[http.path ^= "/api"]]))
--   if r:execute(c) then local uuid, prefix = c:get_result("http.path") end
--   local report, err, errs = r:sync({ { id = uuid, priority = 10, expression = expr }, ... })
--   local lo, hi = r:key_fields()     -- two-phase matching (field masks, below)
--   local why = r:explain(c)          -- for operators: why c routes where it does
--   local all = r:matches(c)          -- every matching route; r:get_expression(uuid)
--
-- Making a router shares its schema: no field can be added to the schema afterwards.

local ffi = require("ffi")
local bit = require("bit")
local cdefs = require("resty.router.cdefs")
local json = require("resty.router.json")

local lib = cdefs.lib
local arm, message = cdefs.arm, cdefs.message
local errbuf, errlen = cdefs.errbuf, cdefs.errlen
local to_priority = cdefs.priority

local ERR_BUFFER = lib.ATC_ERR_BUFFER
local ERR_NULL = lib.ATC_ERR_NULL
local ERR_ROUTES = lib.ATC_ERR_ROUTES
local MODES = {
    all_or_nothing = lib.ATC_SYNC_ALL_OR_NOTHING,
    apply_valid = lib.ATC_SYNC_APPLY_VALID,
}

local type, tonumber, tostring, ipairs = type, tonumber, tostring, ipairs
local ffi_string = ffi.string

local _M = {}
_M._VERSION = "0.2.0"
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
    if rc == lib.ATC_ERR_BROKEN then
        -- No answer from a half-changed table, and no quiet "no match" either: a gateway
        -- must see this (r:sync with the full route list rebuilds the router).
        error("resty.router: " .. ffi.string(lib.atc_strerror(rc)), 2)
    end
    return false, ffi.string(lib.atc_strerror(rc))
end

---------------------------------------------------------------------------------------------
-- Explanations, every match and route texts: for operators and tests, not the request path.

-- The JSON reports' buffer, grown on demand and kept up to REPORT_KEEP bytes (a larger one is
-- made for the call and dropped).
local REPORT_KEEP = 1024 * 1024
local report_cap = 16 * 1024
local report_buf = ffi.new("char[?]", report_cap)
local report_len = ffi.new("size_t[1]")
local JSON_VERSION = lib.ATC_JSON_VERSION
local EXPLAIN_RULED_OUT = lib.ATC_EXPLAIN_RULED_OUT

-- The report `call(buf, len)` writes, decoded: a table, or nil and an error.
local function fetch_report(call)
    local buf, cap = report_buf, report_cap
    for _ = 1, 3 do
        report_len[0] = cap
        arm()
        local rc = call(buf, report_len)
        if rc == 0 then
            local text = ffi_string(buf, report_len[0])
            local v, err = json.decode(text)
            if not v then
                return nil, "resty.router: unreadable report: " .. err
            end
            if v.version ~= JSON_VERSION then
                return nil, "resty.router: report version " .. tostring(v.version)
                    .. ", this binding reads version " .. JSON_VERSION
            end
            return v
        end
        if rc ~= ERR_BUFFER then
            return nil, message(rc)
        end
        cap = tonumber(report_len[0])
        buf = ffi.new("char[?]", cap)
        if cap <= REPORT_KEEP then
            report_buf, report_cap = buf, cap
        end
    end
    return nil, "resty.router: the report kept growing"
end

local function check_context(context, fname)
    if type(context) ~= "table" or context.ptr == nil then
        error("bad argument #1 to '" .. fname .. "' (context expected)", 3)
    end
end

-- Why the context's values route where they do (see ffi/README.md, "Explain and all matches"):
--   { winner = uuid or nil, routes = n,
--     candidates = { { id =, priority =, matched =, expression =, expression_truncated =,
--                      predicates = { { index =, text =, text_truncated =, holds =, negated =,
--                                       line =, column =, span = { first, last },
--                                       source_line =, caret = } },
--                      predicates_omitted = } },
--     candidates_omitted = n,
--     ruled_out = { { id =, priority =, key = } },      -- with opts.ruled_out only
--     ruled_out_omitted = n }
-- The report is bounded (50 candidates and the winner, 1,000 ruled-out routes, 32 predicates
-- per candidate, 1,024 bytes per text): the *_omitted and *_truncated members say what it left
-- out.
-- `span` is 1-based and inclusive (expression:sub(span[1], span[2]) is the text); index counts
-- from 0. Priorities are numbers, or uint64_t cdata from 2^53 on. nil and an error for a context
-- of another schema or a broken router. The context's result is left as it was.
function _M:explain(context, opts)
    check_context(context, "explain")
    local flags = 0
    if opts ~= nil then
        if type(opts) ~= "table" then
            return nil, "options must be a table, got " .. type(opts)
        end
        if opts.ruled_out then
            flags = EXPLAIN_RULED_OUT
        end
    end
    local ptr, cptr = self.ptr, context.ptr
    local v, err = fetch_report(function(buf, len)
        return lib.atc_router_explain(ptr, cptr, flags, buf, len, errbuf, errlen)
    end)
    if not v then
        return nil, err
    end
    v.version = nil
    for _, c in ipairs(v.candidates) do
        for _, p in ipairs(c.predicates) do
            p.span = { p.span[1] + 1, p.span[2] }
        end
    end
    return v
end

-- Every route whose expression holds for the context's values, in routing order (the first is
-- the one execute() chooses), each as
--   { id = uuid, priority =, expression =, matched_values = { [field] = value },
--     captures = { [0] = whole match, [1] = ..., name = ... } or nil }
-- Values and captures are the ones context:get_result() would give with that route as the
-- winner (a string; a number for an Int field, int64_t cdata from 2^53 on; addresses and CIDRs
-- as text); captures is nil when the route captured nothing. nil and an error as explain().
function _M:matches(context)
    check_context(context, "matches")
    local ptr, cptr = self.ptr, context.ptr
    local v, err = fetch_report(function(buf, len)
        return lib.atc_router_matches(ptr, cptr, buf, len, errbuf, errlen)
    end)
    if not v then
        return nil, err
    end
    local out = v.matches
    for i, m in ipairs(out) do
        local values = {}
        for _, mv in ipairs(m.matched_values) do
            values[mv.field] = mv.value
        end
        local captures = nil
        if #m.captures > 0 then
            captures = {}
            for _, c in ipairs(m.captures) do
                captures[c.key] = c.value
            end
        end
        out[i] = {
            id = m.id,
            priority = m.priority,
            expression = m.expression,
            matched_values = values,
            captures = captures,
        }
    end
    return out
end

local expr_ptr = ffi.new("const char *[1]")
local expr_len = ffi.new("size_t[1]")

-- The expression text of the route with id `uuid`, as it was added (with the uuid
-- context:get_result() gives, the matched route's): a string, nil when there is no such route,
-- or nil and an error for an id that is not a UUID or a broken router.
function _M:get_expression(uuid)
    if type(uuid) ~= "string" then
        return nil, "uuid must be a string, got " .. type(uuid)
    end
    local rc = lib.atc_router_route_expression(self.ptr, uuid, #uuid, expr_ptr, expr_len)
    if rc == 0 then
        return ffi_string(expr_ptr[0], expr_len[0])
    end
    if rc == lib.ATC_ERR_NOT_FOUND then
        return nil
    end
    return nil, ffi_string(lib.atc_strerror(rc))
end

-- Buffers of r:sync, grown on demand and kept, so that a sync of an unchanged table allocates
-- nothing in the FFI layer.
local routes_cap, routes_buf = 0, nil
local errors_cap, errors_buf = 0, nil
local msg_cap = 64 * 1024
local msg_buf = ffi.new("char[?]", msg_cap)
local msg_len = ffi.new("size_t[1]")
local errors_len = ffi.new("size_t[1]")
local report = ffi.new("atc_sync_report")

-- Fills routes_buf[0 .. n-1] from either input form. Entries the C side cannot be given (a
-- non-string id or expression, a bad priority) get a NULL pointer with length 1, which the
-- library reports as that route's error (and, for a known id in apply-valid mode, keeps the
-- route's current version); `bad` maps their 1-based index to the real reason.
local function fill(routes, ids, priorities, expressions, n)
    local bad = nil
    local buf = routes_buf
    for i = 1, n do
        local id, prio, expr
        if ids then
            id, prio, expr = ids[i], priorities[i], expressions[i]
        else
            local route = routes[i]
            if type(route) == "table" then
                id, prio, expr = route.id, route.priority, route.expression
            end
        end
        local e = buf[i - 1]
        if type(id) == "string" then
            e.id, e.id_len = id, #id
        else
            e.id, e.id_len = nil, 1
            bad = bad or {}
            bad[i] = "id must be a string, got " .. type(id)
        end
        local p, perr = to_priority(prio)
        if p and type(expr) == "string" then
            e.priority, e.expr, e.expr_len = p, expr, #expr
        else
            e.priority, e.expr, e.expr_len = 0, nil, 1
            if not (bad and bad[i]) then
                bad = bad or {}
                bad[i] = perr or ("expression must be a string, got " .. type(expr))
            end
        end
    end
    return bad
end

local function run_sync(ptr, n, mode)
    errors_len[0] = errors_cap
    msg_len[0] = msg_cap
    arm()
    return lib.atc_router_sync(ptr, routes_buf, n, mode, report, errors_buf, errors_len,
        msg_buf, msg_len, errbuf, errlen)
end

local function id_at(routes, ids, i)
    if ids then
        return ids[i]
    end
    local route = routes[i]
    return type(route) == "table" and route.id or nil
end

-- Makes the router hold exactly `routes`, touching only what differs (see ffi/README.md):
-- routes whose id, priority and expression are unchanged are not parsed again, and the router
-- changes in one step, in this call, without yielding.
--
-- `routes` is either an array of { id = uuid, priority = p, expression = expr } tables, or
-- parallel arrays { ids = {...}, priorities = {...}, expressions = {...} } (no table per route:
-- the form that makes no garbage). `mode` is "all_or_nothing" (the default: one invalid route
-- and nothing changes) or "apply_valid" (the valid routes are applied; a known route whose new
-- version is invalid keeps its current version).
--
-- Returns a report { added =, removed =, changed =, unchanged =, errors = { ... } }, where each
-- error is { index = i (1-based, into the list), id = the id given, message = text }; or, when
-- nothing changed because of invalid routes, nil, a summary, and that errors array.
function _M:sync(routes, mode)
    local mode_code = MODES[mode or "all_or_nothing"]
    if not mode_code then
        return nil, "unknown sync mode " .. tostring(mode)
            .. " (expected \"all_or_nothing\" or \"apply_valid\")"
    end
    if type(routes) ~= "table" then
        return nil, "routes must be a table, got " .. type(routes)
    end
    local ids, priorities, expressions = routes.ids, routes.priorities, routes.expressions
    local n
    if ids ~= nil then
        if type(ids) ~= "table" or type(priorities) ~= "table" or type(expressions) ~= "table" then
            return nil, "routes.ids, routes.priorities and routes.expressions must be tables"
        end
        n = #ids
        if #priorities ~= n or #expressions ~= n then
            return nil, "routes.ids, routes.priorities and routes.expressions differ in length ("
                .. n .. ", " .. #priorities .. ", " .. #expressions .. ")"
        end
    else
        n = #routes
    end
    if n > routes_cap then
        routes_cap = math.max(n, 2 * routes_cap)
        routes_buf = ffi.new("atc_route[?]", routes_cap)
    end
    -- At most one error per route.
    if n > errors_cap then
        errors_cap = routes_cap
        errors_buf = ffi.new("atc_sync_error[?]", errors_cap)
    end
    local bad = fill(routes, ids, priorities, expressions, n)
    local rc = run_sync(self.ptr, n, mode_code)
    if rc ~= 0 and rc ~= ERR_ROUTES then
        return nil, message(rc)
    end
    local total = tonumber(report.errors)
    local needed = tonumber(report.messages_len)
    if needed > msg_cap then
        -- Some messages were cut. Running the same list again is safe: a refused list changed
        -- nothing, and after an apply-valid run the same list is a no-op that reports the same
        -- errors. It only happens with more than a buffer's worth of errors.
        local counts = { tonumber(report.added), tonumber(report.removed),
            tonumber(report.changed), tonumber(report.unchanged) }
        msg_cap = needed
        msg_buf = ffi.new("char[?]", msg_cap)
        run_sync(self.ptr, n, mode_code)
        report.added, report.removed, report.changed, report.unchanged =
            counts[1], counts[2], counts[3], counts[4]
    end
    local errors = {}
    for k = 0, tonumber(errors_len[0]) - 1 do
        local e = errors_buf[k]
        local i = tonumber(e.index) + 1
        local text
        if bad and bad[i] and e.code == ERR_NULL then
            text = bad[i]
        elseif e.message ~= nil then
            text = ffi_string(e.message, e.message_len)
        else
            text = ffi_string(lib.atc_strerror(e.code))
        end
        errors[k + 1] = { index = i, id = id_at(routes, ids, i), message = text }
    end
    if rc == ERR_ROUTES then
        local first = errors[1]
        return nil, total .. " invalid route(s), nothing changed; route #" .. first.index
            .. " (" .. tostring(first.id) .. "): " .. first.message, errors
    end
    return {
        added = tonumber(report.added),
        removed = tonumber(report.removed),
        changed = tonumber(report.changed),
        unchanged = tonumber(report.unchanged),
        errors = errors,
    }
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

-- Field masks. A set of fields is a uint64_t whose bit min(index, 63) stands for the field of
-- that index (the low 20 bits of its id; ATC_FIELD_MASK_LAST_BIT stands for every field of a
-- higher index too). Lua gets it as two 32-bit halves, `lo` and `hi`, plain numbers: a uint64_t
-- read from LuaJIT is a boxed cdata, which a request path would allocate. Test a field with
-- router.field_mask(id): `bit.band(lo, flo) ~= 0 or bit.band(hi, fhi) ~= 0`.
local LAST_BIT = lib.ATC_FIELD_MASK_LAST_BIT
local maskbuf = ffi.new("uint64_t[1]")
local mask32 = ffi.cast("uint32_t *", maskbuf)
local LO, HI = 0, 1
if not ffi.abi("le") then
    LO, HI = 1, 0
end

-- The mask of the one field of id `id` (from context:field_id), as halves lo, hi: exactly one
-- of them is non-zero.
function _M.field_mask(id)
    local index = bit.band(id, 0xFFFFF)
    if index > LAST_BIT then
        index = LAST_BIT
    end
    if index < 32 then
        return bit.lshift(1, index), 0
    end
    return 0, bit.lshift(1, index - 32)
end

-- The fields the router's indexes look values up in (lo, hi): phase 1 of two-phase matching
-- adds every value of these, then asks needed_fields(). They change with every change of the
-- routes (add, remove, sync), never in between.
function _M:key_fields()
    lib.atc_router_key_fields(self.ptr, maskbuf)
    return mask32[LO], mask32[HI]
end

-- Phase 2 of two-phase matching: with every value of the key fields in `context`, the fields
-- (lo, hi) that the routes the request can still match use. Adding the values of those fields
-- too and executing gives the result that adding every field gives; a value of any other field
-- cannot change it. Every bit for a broken router or a context of another schema. Allocates
-- nothing, and the execute that follows reuses the candidates it found.
function _M:needed_fields(context)
    if type(context) ~= "table" or context.ptr == nil then
        error("bad argument #1 to 'needed_fields' (context expected)", 2)
    end
    lib.atc_router_needed_fields(self.ptr, context.ptr, maskbuf)
    return mask32[LO], mask32[HI]
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
