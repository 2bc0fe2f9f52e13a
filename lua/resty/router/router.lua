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
--   local s = r:stats()               -- counts for graphs: s.routed, s.not_found, ...
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
local ERR_NOT_READY = lib.ATC_ERR_NOT_READY
local ERR_PANIC = lib.ATC_ERR_PANIC
local ERR_ROUTES = lib.ATC_ERR_ROUTES
local MODES = {
    all_or_nothing = lib.ATC_SYNC_ALL_OR_NOTHING,
    apply_valid = lib.ATC_SYNC_APPLY_VALID,
}

local type, tonumber, tostring, ipairs = type, tonumber, tostring, ipairs
local ffi_string = ffi.string

-- Sized tables (LuaJIT 2.1 has table.new): the strings a start lends go in one, made once.
local ok_new, table_new = pcall(require, "table.new")
if not ok_new then
    table_new = function() return {} end
end

local _M = {}
_M._VERSION = "0.2.0"
local mt = { __index = _M }

-- Kong's API settling on the builder (below, after remove_matcher).
local auto_changed, auto_step, auto_off
local AUTO_ADD, AUTO_REMOVE = 1, 2

-- The router's finalizer keeps `bg` (the lists of its background syncs, texts lent to the
-- builder thread among them) reachable until atc_router_free has stopped that thread: a text is
-- never collected while the thread may read it, whatever order the collector frees things in.
local function finalizer(bg)
    return function(p)
        lib.atc_router_free(p)
        bg.pending = nil
    end
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
    local bg = { pending = {} }
    return setmetatable({ ptr = ffi.gc(p, finalizer(bg)), schema = schema, bg = bg,
        aliases = schema.aliases, alias_refs = schema.alias_refs,
        auto = { dirty = false, inflight = false, off = false, log = {}, version = 0 } }, mt)
end

-- Kong's API keys routes by (priority, id), as Kong's library does: the same id may be added
-- again at another priority, and both routes stay; remove_matcher(id) removes the one added
-- last, after which the id is unknown to remove_matcher (an older one stays, as in Kong's
-- module). The core keeps one route per id, so a second priority of an id is held under an
-- alias id (the id with its last hex digit changed), which results name by the real id
-- (the schema's aliases, read by context:get_result). What add_matcher added is kept in
-- self.keyed: { at = { [id] = key of the last }, [key] = id the core holds, known = { [id] } }.

local UUID_PATTERN = "^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$"
local HEX = "0123456789abcdef"

local function keyed_of(self)
    local k = self.keyed
    if not k then
        k = { at = {}, known = {} }
        self.keyed = k
    end
    return k
end

-- An id the core does not hold yet for a second priority of `uuid`, or nil.
local function alias_for(self, uuid, keyed)
    if not uuid:match(UUID_PATTERN) then
        return nil
    end
    local id = uuid:lower()
    local last = HEX:find(id:sub(-1), 1, true) - 1
    for flip = 1, 15 do
        local a = id:sub(1, -2) .. HEX:sub(bit.bxor(last, flip) + 1, bit.bxor(last, flip) + 1)
        if keyed.at[a] == nil and self.aliases[a] == nil then
            return a, id
        end
    end
    return nil
end

local function alias_set(self, alias, real)
    local refs = self.alias_refs
    self.aliases[alias] = real
    refs[alias] = (refs[alias] or 0) + 1
end

local function alias_drop(self, alias)
    local refs = self.alias_refs
    local n = refs[alias]
    if n then
        if n <= 1 then
            refs[alias], self.aliases[alias] = nil, nil
        else
            refs[alias] = n - 1
        end
    end
end

-- true, or nil and an error (bad priority or UUID, the id already at that priority, invalid
-- expression with its position). A negative integral priority is taken as Kong's binding takes
-- it (converted to uint64_t by LuaJIT: cdefs.kong_priority).
function _M:add_matcher(priority, uuid, expr)
    local prio, perr = cdefs.kong_priority(priority)
    if not prio then
        return nil, perr
    end
    if type(uuid) ~= "string" then
        return nil, "uuid must be a string, got " .. type(uuid)
    end
    if type(expr) ~= "string" then
        return nil, "expression must be a string, got " .. type(expr)
    end
    local keyed = keyed_of(self)
    local key = uuid .. "@" .. tostring(ffi.cast("uint64_t", prio))
    if keyed[key] then
        return nil, "route id " .. uuid .. " already exists at priority " .. tostring(priority)
    end
    local held, real = uuid, nil
    if keyed.at[uuid] then
        held, real = alias_for(self, uuid, keyed)
        if not held then
            return nil, "route id " .. uuid .. " already exists"
        end
    end
    arm()
    local rc = lib.atc_router_add(self.ptr, prio, held, #held, expr, #expr, errbuf, errlen)
    if rc == lib.ATC_ERR_DUPLICATE and not real and keyed.known[uuid] then
        -- An older priority of the id that remove_matcher no longer knows (as in Kong's
        -- module) still holds the id itself.
        held, real = alias_for(self, uuid, keyed)
        if not held then
            return nil, "route id " .. uuid .. " already exists"
        end
        rc = lib.atc_router_add(self.ptr, prio, held, #held, expr, #expr, errbuf, errlen)
    end
    if rc ~= 0 then
        return nil, message(rc)
    end
    if real then
        alias_set(self, held, real)
    end
    keyed[key], keyed.at[uuid], keyed.known[uuid] = held, key, true
    auto_changed(self, AUTO_ADD, prio, held, expr)
    return true
end

-- true when a route with that id was removed, false otherwise. For an id add_matcher added:
-- the route it added last (see above).
function _M:remove_matcher(uuid)
    if type(uuid) ~= "string" then
        return false
    end
    local keyed = self.keyed
    local held = uuid
    if keyed and keyed.known[uuid] then
        local key = keyed.at[uuid]
        if not key then
            return false
        end
        held = keyed[key]
        keyed.at[uuid], keyed[key] = nil, nil
        if held ~= uuid then
            alias_drop(self, held)
        end
    end
    arm()
    if lib.atc_router_remove(self.ptr, held, #held, errbuf, errlen) ~= 0 then
        return false
    end
    auto_changed(self, AUTO_REMOVE, held)
    return true
end

-- Kong's API settles on the builder. A table Kong loads and changes with add_matcher and
-- remove_matcher alone reaches the form a settled router matches with (the flat index, from
-- 1,024 routes: see settle below) without a call Kong does not make, and without writing it
-- on the worker: the first execute after changes that finds it due (atc_router_settle_due)
-- hands an empty list of changes to the router's builder thread, which builds the same table
-- whole, settled; a later execute (at most 64 changes to replay) or change swaps it in, in
-- O(1), and replays on it the changes made since the hand-over, in order. The hand-over copies a row per route in the
-- library and shares the texts (O(routes): about 3 ms at 50,000 routes); a change costs what
-- it did. The builder
-- keeps no copy of the table for these (atc_router_keep_shadow): each hand-over follows direct
-- changes, so its build starts over from the routes anyway.
--
-- Invariants: `auto.log` holds, in order, every change made while `auto.inflight` (a hand-over
-- whose outcome is not taken): the built table holds the routes of the hand-over, and the
-- log brings it to the routes the router held when it is swapped in. Nothing is replayed when
-- the outcome swapped nothing in. The router's own background syncs (sync_start, update_start)
-- and synchronous syncs end this for good (`auto.off`), first taking an outcome in flight,
-- waiting for it if need be: their outcomes must not meet one built from an older table.

auto_changed = function(self, op, a, b, c)
    local auto = self.auto
    if auto.off then
        return
    end
    if auto.inflight then
        local log = auto.log
        log[#log + 1] = { op, a, b, c }
    end
    auto.dirty = true
    if auto.inflight then
        auto_step(self)
    end
end

local function replay(self, log)
    for i = 1, #log do
        local e = log[i]
        if e[1] == AUTO_ADD then
            lib.atc_router_add(self.ptr, e[2], e[3], #e[3], e[4], #e[4], errbuf, errlen)
        else
            lib.atc_router_remove(self.ptr, e[2], #e[2], errbuf, errlen)
        end
    end
end

local sync_apply_outcome, update_start_list

-- A request swaps the built table in only when replaying the changes logged since costs about
-- as little as a change: a longer log is replayed by the next add_matcher or remove_matcher.
local AUTO_REPLAY_ON_REQUEST = 64

-- Takes the hand-over's outcome if it is ready, else starts one if the flat form is due.
-- `request`: called from execute.
auto_step = function(self, request)
    local auto = self.auto
    if auto.inflight then
        if request and #auto.log > AUTO_REPLAY_ON_REQUEST then
            return
        end
        if lib.atc_router_sync_ready(self.ptr) ~= 1 then
            return
        end
        local v = sync_apply_outcome(self)
        auto.inflight = false
        local log = auto.log
        auto.log = {}
        if v then
            replay(self, log)
            auto.dirty = #log > 0
        else
            -- Nothing swapped in (the build failed): the table holds every change already.
            auto.off = true
        end
        return
    end
    auto.dirty = false
    if lib.atc_router_settle_due(self.ptr) ~= 1 then
        return
    end
    if not auto.no_shadow then
        -- Each hand-over follows direct changes, so the builder starts over anyway: no second
        -- table kept on its thread.
        lib.atc_router_keep_shadow(self.ptr, 0)
        auto.no_shadow = true
    end
    auto.version = auto.version + 1
    if update_start_list(self, auto.version, {}, "all_or_nothing") then
        auto.inflight = true
    else
        auto.off = true
    end
end

pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")

auto_off = function(self)
    local auto = self.auto
    if auto.off then
        return
    end
    while auto.inflight do
        if lib.atc_router_sync_ready(self.ptr) ~= 1 then
            -- Sleeps, so that a builder thread under SCHED_IDLE gets this CPU too.
            ffi.C.poll(nil, 0, 1)
        end
        auto_step(self)
    end
    if auto.no_shadow then
        lib.atc_router_keep_shadow(self.ptr, 1)
    end
    auto.off = true
end

-- Not in Kong's module: writes the router's flat index now (from 1,024 routes), so that requests
-- walk it without an overlay of the routes changed since. About a microsecond per route, on this
-- thread. Not needed: a table loaded or changed with add_matcher gets it on the builder thread
-- (above), and sync_start's background builds write it on theirs.
function _M:settle()
    lib.atc_router_settle(self.ptr)
end

-- true when a route matched (read it with context:get_result()), false otherwise; false and an
-- error when the context belongs to another schema.
function _M:execute(context)
    if type(context) ~= "table" or context.ptr == nil then
        error("bad argument #1 to 'execute' (context expected)", 2)
    end
    local auto = self.auto
    if auto.dirty or auto.inflight then
        auto_step(self, true)
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

---------------------------------------------------------------------------------------------
-- Route lists: the one way routes go to the library. A list of either form (an array of route
-- tables, or parallel arrays) goes into an atc_route_list (the library's entry list) in chunks
-- of atc_route values; an entry this side cannot hand over (an id or expression that is not a
-- string, a bad priority) goes in as an unreadable entry with the reason, at its place, so
-- that the library's rules (repeated ids, apply-valid) and its one message for a refused list
-- cover every entry. Every entry carries its position in the caller's list, which is how the
-- library's errors name it.

local DEFAULT_CHUNK = 1000
local chunk_cap, chunk_buf = 0, nil
local errors_cap, errors_buf = 0, nil
local msg_cap = 64 * 1024
local msg_buf = ffi.new("char[?]", msg_cap)
local msg_len = ffi.new("size_t[1]")
local errors_len = ffi.new("size_t[1]")
local report = ffi.new("atc_sync_report")

local function new_list()
    local list = lib.atc_route_list_new()
    if list == nil then
        return nil
    end
    return ffi.gc(list, lib.atc_route_list_free)
end

-- The list of the synchronous calls (r:sync, r:update), kept and cleared: a sync of an unchanged
-- table allocates nothing in the FFI layer once it has grown.
local sync_list = nil

local function chunk_of(size)
    if size > chunk_cap then
        chunk_cap = size
        chunk_buf = ffi.new("atc_route[?]", chunk_cap)
    end
    return chunk_buf
end

-- The form of a route list: ids, priorities, expressions (the parallel arrays, or nil for an
-- array of route tables) and n; or nil, err.
local function list_form(routes, what)
    if type(routes) ~= "table" then
        return nil, (what or "routes") .. " must be a table, got " .. type(routes)
    end
    local ids, priorities, expressions = routes.ids, routes.priorities, routes.expressions
    if ids == nil then
        return nil, nil, nil, #routes
    end
    if type(ids) ~= "table" or type(priorities) ~= "table" or type(expressions) ~= "table" then
        return nil, "routes.ids, routes.priorities and routes.expressions must be tables"
    end
    local n = #ids
    if #priorities ~= n or #expressions ~= n then
        return nil, "routes.ids, routes.priorities and routes.expressions differ in length ("
            .. n .. ", " .. #priorities .. ", " .. #expressions .. ")"
    end
    return ids, priorities, expressions, n
end
_M.list_form = list_form

local function entry_at(routes, ids, priorities, expressions, i)
    if ids then
        return ids[i], priorities[i], expressions[i]
    end
    local route = routes[i]
    if type(route) == "table" then
        return route.id, route.priority, route.expression
    end
    return nil, nil, nil, "route must be a table, got " .. type(route)
end

-- Adds entries first .. last of a list of either form to `list`, in chunks of at most `chunk`,
-- calling `yield` (if any) between two chunks: when it returns a value other than nil, adding
-- stops and that value is returned. `at(i)`, if given, is entry i's position in the caller's
-- list (default i). With `anchor` (a table), the routes are lent (atc_route_list_lend: the
-- library reads their strings later, on the builder thread) and every string lent is put in
-- `anchor`, which the caller keeps until the library no longer reads them; without, they are
-- copied. nil when all went in; or the value `yield` returned; or false and an error.
local function add_entries(list, routes, ids, priorities, expressions, first, last, chunk, yield,
                           at, anchor)
    local buf = chunk_of(math.min(chunk, math.max(last - first + 1, 1)))
    local k = 0
    local add = anchor and lib.atc_route_list_lend or lib.atc_route_list_add
    local na = anchor and #anchor or 0
    local function flush()
        if k > 0 then
            arm()
            local rc = add(list, buf, k, errbuf, errlen)
            k = 0
            if rc ~= 0 then
                return message(rc)
            end
        end
    end
    for i = first, last do
        local id, prio, expr, bad = entry_at(routes, ids, priorities, expressions, i)
        local p, perr = to_priority(prio)
        if bad == nil then
            if type(id) ~= "string" then
                bad = "id must be a string, got " .. type(id)
            elseif not p then
                bad = perr
            elseif type(expr) ~= "string" then
                bad = "expression must be a string, got " .. type(expr)
            end
        end
        local pos = at and at(i) or i
        if bad then
            local err = flush()
            if err then
                return false, err
            end
            local sid = type(id) == "string" and id or nil
            arm()
            local rc = lib.atc_route_list_add_unreadable(list, pos, sid, sid and #sid or 0, bad,
                #bad, errbuf, errlen)
            if rc ~= 0 then
                return false, message(rc)
            end
        else
            local e = buf[k]
            e.id, e.id_len, e.priority, e.expr, e.expr_len, e.position = id, #id, p, expr,
                #expr, pos
            k = k + 1
            if anchor then
                anchor[na + 1], anchor[na + 2] = id, expr
                na = na + 2
            end
            if k == chunk then
                local err = flush()
                if err then
                    return false, err
                end
                if yield and i < last then
                    local stop = yield()
                    if stop ~= nil then
                        return stop
                    end
                    -- The chunk buffer may have grown while this one yielded.
                    buf = chunk_buf
                end
            end
        end
    end
    local err = flush()
    if err then
        return false, err
    end
    return nil
end

-- Adds the removal of ids[first .. last] (positions `at(i)`, default i) to `list`.
local function add_removals(list, ids, first, last, at)
    local buf = chunk_of(math.max(last - first + 1, 1))
    local k = 0
    for i = first, last do
        local id = ids[i]
        local pos = at and at(i) or i
        if type(id) ~= "string" then
            local bad = "id must be a string, got " .. type(id)
            arm()
            local rc = lib.atc_route_list_add_unreadable(list, pos, nil, 0, bad, #bad, errbuf,
                errlen)
            if rc ~= 0 then
                return false, message(rc)
            end
        else
            local e = buf[k]
            e.id, e.id_len, e.priority, e.expr, e.expr_len, e.position = id, #id, 0, nil, 0, pos
            k = k + 1
        end
        if k > 0 and (i == last or type(ids[i + 1]) ~= "string") then
            arm()
            local rc = lib.atc_route_list_remove(list, buf, k, errbuf, errlen)
            k = 0
            if rc ~= 0 then
                return false, message(rc)
            end
        end
    end
    return nil
end

-- The form of a list of changes { upsert = <routes in either form>, remove = { id, ... } }:
-- the upserts' ids, priorities, expressions (nil for route tables), their count, the upsert
-- table and the removals; or nil and an error.
local function changes_form(changes)
    if type(changes) ~= "table" then
        return nil, "changes must be a table, got " .. type(changes)
    end
    local upsert, remove = changes.upsert or {}, changes.remove or {}
    if type(remove) ~= "table" then
        return nil, "changes.remove must be an array of ids, got " .. type(remove)
    end
    local ids, priorities, expressions, n = list_form(upsert, "changes.upsert")
    if not ids and not n then
        return nil, priorities
    end
    return { ids = ids, priorities = priorities, expressions = expressions, n = n,
        upsert = upsert, remove = remove }
end
_M.changes_form = changes_form

-- Fills `list` with a list of changes (upserts at positions 1 .. n, removals after them).
local function add_changes(list, c, chunk, yield, at, anchor)
    local stop, err = add_entries(list, c.upsert, c.ids, c.priorities, c.expressions, 1, c.n,
        chunk, yield, at, anchor)
    if stop ~= nil then
        return stop, err
    end
    local n = c.n
    return add_removals(list, c.remove, 1, #c.remove, function(i) return n + i end)
end

-- The errors array of a sync: { index =, id =, message = } for errors_buf[0 .. count-1], read
-- against the list they came from (`from`: { routes =, ids = } of a whole list, { changes = } of
-- a list of changes, or nil for a text, whose `index` is the route's line and `id` nil; `index`
-- of `from.at` (the caller's positions) when given). An error of a removal of a list of changes
-- is { index = its place in `remove`, remove = true, ... }.
local function read_errors(count, from)
    local errors = {}
    for k = 0, count - 1 do
        local e = errors_buf[k]
        local i = tonumber(e.index) + 1
        local msg
        if e.message ~= nil then
            msg = ffi_string(e.message, e.message_len)
        else
            msg = ffi_string(lib.atc_strerror(e.code))
        end
        local err = { index = i, message = msg }
        if from and from.changes then
            local c = from.changes
            if i > c.n then
                err.index, err.remove, err.id = i - c.n, true, c.remove[i - c.n]
            else
                err.id = entry_at(c.upsert, c.ids, c.priorities, c.expressions, i)
            end
        elseif from then
            if from.ids then
                err.id = from.ids[i]
            elseif type(from.routes[i]) == "table" then
                err.id = from.routes[i].id
            end
        end
        errors[k + 1] = err
    end
    return errors
end

local function report_table(errs)
    return {
        added = tonumber(report.added),
        removed = tonumber(report.removed),
        changed = tonumber(report.changed),
        unchanged = tonumber(report.unchanged),
        errors = errs,
    }
end

local function ensure_errors(n)
    -- At most one error per entry.
    if n > errors_cap then
        errors_cap = math.max(n, 2 * errors_cap)
        errors_buf = ffi.new("atc_sync_error[?]", errors_cap)
    end
end

-- Runs a synchronous call on `sync_list` (filled by `fill(list)`); returns the report, or nil,
-- the library's message and the errors array.
local function run_sync(self, call, n, mode, fill, from)
    if sync_list == nil then
        sync_list = new_list()
        if sync_list == nil then
            return nil, "resty.router: cannot make a route list"
        end
    end
    lib.atc_route_list_clear(sync_list)
    local stop, err = fill(sync_list)
    if stop ~= nil then
        return nil, err or stop
    end
    ensure_errors(n)
    local function go()
        errors_len[0] = errors_cap
        msg_len[0] = msg_cap
        arm()
        return call(self.ptr, sync_list, mode, report, errors_buf, errors_len, msg_buf, msg_len,
            errbuf, errlen)
    end
    local rc = go()
    if rc ~= 0 and rc ~= ERR_ROUTES then
        return nil, message(rc)
    end
    local summary = rc == ERR_ROUTES and message(rc) or nil
    local needed = tonumber(report.messages_len)
    if needed > msg_cap then
        -- Some messages were cut. Running the same list again is safe: a refused list changed
        -- nothing, and after an apply-valid run the same list is a no-op that reports the same
        -- errors. It only happens with more than a buffer's worth of errors.
        local counts = { tonumber(report.added), tonumber(report.removed),
            tonumber(report.changed), tonumber(report.unchanged) }
        msg_cap = needed
        msg_buf = ffi.new("char[?]", msg_cap)
        go()
        report.added, report.removed, report.changed, report.unchanged =
            counts[1], counts[2], counts[3], counts[4]
    end
    local errors = read_errors(tonumber(errors_len[0]), from)
    if summary then
        return nil, summary, errors
    end
    return report_table(errors)
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
-- nothing changed because of invalid routes, nil, the library's message (how many routes are
-- invalid, and the first of them) and that errors array.
function _M:sync(routes, mode)
    auto_off(self)
    local mode_code = MODES[mode or "all_or_nothing"]
    if not mode_code then
        return nil, "unknown sync mode " .. tostring(mode)
            .. " (expected \"all_or_nothing\" or \"apply_valid\")"
    end
    local ids, priorities, expressions, n = list_form(routes)
    if not ids and not n then
        return nil, priorities
    end
    return run_sync(self, lib.atc_router_sync, n, mode_code, function(list)
        local stop, err = add_entries(list, routes, ids, priorities, expressions, 1, n,
            math.max(n, 1))
        return stop, err
    end, { routes = routes, ids = ids })
end

-- Applies a list of changes, touching only those routes (see ffi/README.md, atc_router_update):
-- `changes` is { upsert = <routes, in either form of r:sync>, remove = { id, ... } }: every
-- route of `upsert` is put in (or in place of the route with its id), every id of `remove` is
-- taken out (nothing happens for an id the router does not hold); the rest of the table stays.
-- `mode` as for r:sync. Returns a report as r:sync's (unchanged: the routes left as they
-- were), or nil, the library's message and the errors (an upsert's error has its `index` in
-- `upsert`; a removal's has `remove = true` and its index in `remove`).
function _M:update(changes, mode)
    auto_off(self)
    local mode_code = MODES[mode or "all_or_nothing"]
    if not mode_code then
        return nil, "unknown sync mode " .. tostring(mode)
            .. " (expected \"all_or_nothing\" or \"apply_valid\")"
    end
    local c, err = changes_form(changes)
    if not c then
        return nil, err
    end
    return run_sync(self, lib.atc_router_update, c.n + #c.remove, mode_code, function(list)
        return add_changes(list, c, math.max(c.n, 1))
    end, { changes = c })
end

---------------------------------------------------------------------------------------------
-- Background syncs: the next table is built on the router's builder thread (ffi/README.md,
-- "Background syncs"). sync_start hands a whole list over and returns, update_start a list of
-- changes; sync_ready (one atomic load) says when an outcome waits; sync_apply takes the next
-- one: swaps a built table in (O(1)), or says why the list was refused or that it was
-- superseded. One outcome per version handed over, in order.
--
-- Invariants:
-- * `self.bg.pending` holds, in the order started, what each list handed over needs on this
--   side: a text lent without a copy (anchored here until its own outcome was taken, which is
--   when the builder no longer reads it), and what the errors of a list of routes are read
--   against. Each outcome takes the first entry. The router's finalizer keeps it reachable until
--   the builder thread is stopped.
-- * A list goes over in chunks of atc_route values, lent (atc_route_list_lend: the library
--   reads the strings on the builder thread, when the build starts); between chunks
--   `opts.yield` may yield. Every string lent is in the pending entry's `lent` until its
--   outcome is taken, which is when the builder no longer reads it (never, for a version
--   superseded before its build started). Nothing is started before the last chunk is in, and
--   a start that stops early frees its list, whose lent routes are then never read.

local TEXT_COPY, TEXT_BORROW = lib.ATC_TEXT_COPY, lib.ATC_TEXT_BORROW
local ERR_SUPERSEDED = lib.ATC_ERR_SUPERSEDED
local BUILD_STATES = { [0] = "idle", "building", "ready" }
local version_out = ffi.new("uint64_t[1]")
-- The outcome's errors are written once (an outcome is taken once): apply_errors_cap entries
-- at least, more when a list of routes was longer; messages beyond apply_msg_cap bytes come back
-- as the error code's text.
local APPLY_ERRORS_MIN = 1024
local apply_msg_cap = 256 * 1024
local apply_msg_buf = nil

-- A version as Lua gets it back: a number up to 2^53, uint64_t cdata above.
local function version_value(v)
    if v < 2 ^ 53 then
        return tonumber(v)
    end
    return ffi.new("uint64_t", v)
end

local function to_version(v)
    local n, err = to_priority(v)
    if not n then
        return nil, (err:gsub("^priority", "version"))
    end
    return n
end

local function start_options(opts)
    local chunk, yield, copy, at = DEFAULT_CHUNK, nil, false, nil
    if opts ~= nil then
        if type(opts) ~= "table" then
            return nil, "options must be a table, got " .. type(opts)
        end
        chunk = opts.chunk or chunk
        if type(chunk) ~= "number" or chunk < 1 or chunk ~= math.floor(chunk) then
            return nil, "opts.chunk must be a positive integer, got " .. tostring(opts.chunk)
        end
        yield, copy, at = opts.yield, opts.copy and true or false, opts.at
        if yield ~= nil and type(yield) ~= "function" then
            return nil, "opts.yield must be a function, got " .. type(yield)
        end
        if at ~= nil and type(at) ~= "function" then
            return nil, "opts.at must be a function, got " .. type(at)
        end
    end
    return { chunk = chunk, yield = yield, copy = copy, at = at, of = opts and opts.of }
end

-- Starts bringing the router to `routes` as version `version` on its builder thread and returns
-- at once (the current table keeps answering): true, or nil and an error (nothing started).
--
-- `version`: an integer from 0 to 2^53, or uint64_t cdata; sync_apply returns it with the
-- outcome. Outcomes come one per version, in the order started; a whole list supersedes the
-- versions started before it whose build has not begun.
-- `routes`: as for r:sync (an array of route tables, or parallel arrays), or a string holding
-- a TSV or JSON route list (as `atc-router check` reads route files), read on the builder
-- thread. A string is lent, not copied: it is anchored in the router until its outcome is
-- taken; `opts.copy = true` copies it instead.
-- `mode`: "all_or_nothing" (default) or "apply_valid", as for r:sync.
-- `opts.chunk`: routes handed over per FFI call for a table (default 1000: about 0.1 ms of the
-- worker's time each); `opts.yield`: a function called between two chunks, which may yield
-- (ngx.sleep(0.001), coroutine.yield: in stock nginx ngx.sleep(0) lets no request in); when it
-- returns a value other than nil, the start is abandoned and sync_start returns nil and that
-- value. `opts.at(i)`: the position route i's
-- errors name (default i). The table must not change until sync_start returns.
function _M:sync_start(version, routes, mode, opts)
    auto_off(self)
    local v, verr = to_version(version)
    if not v then
        return nil, verr
    end
    local mode_code = MODES[mode or "all_or_nothing"]
    if not mode_code then
        return nil, "unknown sync mode " .. tostring(mode)
            .. " (expected \"all_or_nothing\" or \"apply_valid\")"
    end
    local o, oerr = start_options(opts)
    if not o then
        return nil, oerr
    end
    local pending = self.bg.pending
    if type(routes) == "string" then
        arm()
        local rc = lib.atc_router_sync_start_text(self.ptr, v, routes, #routes,
            o.copy and TEXT_COPY or TEXT_BORROW, mode_code, errbuf, errlen)
        if rc ~= 0 then
            return nil, message(rc)
        end
        pending[#pending + 1] = { version = version_value(v), text = (not o.copy) and routes or true }
        return true
    end
    local ids, priorities, expressions, n = list_form(routes)
    if not ids and not n then
        return nil, priorities
    end
    -- Freed by the collector if this function raises or stops early; taken by the start.
    local list = new_list()
    if list == nil then
        return nil, "resty.router: cannot make a route list"
    end
    local lent = table_new(2 * n, 0)
    local stop, err = add_entries(list, routes, ids, priorities, expressions, 1, n, o.chunk,
        o.yield, o.at, lent)
    if stop ~= nil then
        return nil, err or stop
    end
    arm()
    local rc = lib.atc_router_sync_start(self.ptr, v, list, mode_code, errbuf, errlen)
    if rc ~= 0 then
        return nil, message(rc)
    end
    ffi.gc(list, nil) -- the router has it now
    pending[#pending + 1] = { version = version_value(v), routes = routes, ids = ids, n = n,
        lent = lent }
    return true
end

-- Starts applying a list of changes (as for r:update) as version `version` on the builder
-- thread, and returns: true, or nil and an error. As sync_start otherwise (`opts` the same,
-- `opts.at(i)` naming upsert i; with `opts.of = { routes =, ids = }`, the whole list those
-- positions are in, which the errors' ids are read from), except that a list of changes
-- supersedes nothing: every change reaches the table, in order.
update_start_list = function(self, version, changes, mode, opts)
    local v, verr = to_version(version)
    if not v then
        return nil, verr
    end
    local mode_code = MODES[mode or "all_or_nothing"]
    if not mode_code then
        return nil, "unknown sync mode " .. tostring(mode)
            .. " (expected \"all_or_nothing\" or \"apply_valid\")"
    end
    local o, oerr = start_options(opts)
    if not o then
        return nil, oerr
    end
    local c, cerr = changes_form(changes)
    if not c then
        return nil, cerr
    end
    local list = new_list()
    if list == nil then
        return nil, "resty.router: cannot make a route list"
    end
    local lent = table_new(2 * c.n, 0)
    local stop, err = add_changes(list, c, o.chunk, o.yield, o.at, lent)
    if stop ~= nil then
        return nil, err or stop
    end
    arm()
    local rc = lib.atc_router_update_start(self.ptr, v, list, mode_code, errbuf, errlen)
    if rc ~= 0 then
        return nil, message(rc)
    end
    ffi.gc(list, nil)
    local p = self.bg.pending
    p[#p + 1] = { version = version_value(v), changes = c, n = c.n + #c.remove, of = o.of,
        lent = lent }
    return true
end

function _M:update_start(version, changes, mode, opts)
    auto_off(self)
    return update_start_list(self, version, changes, mode, opts)
end

local previous = ffi.new("atc_image *[1]")

-- Routes from `img` (an image of resty.router.image, opened with this router's schema) from
-- now on: execute, key_fields, needed_fields, explain, matches, get_expression, len and
-- get_fields answer from it, and its executes are counted in this router's stats(). The router takes the image (the
-- `img` object is emptied); attach_image(nil) routes from the router's own table again, which
-- its adds, removes and syncs keep changing either way. Returns the image routed from before
-- (for the caller to retire()), or false when there was none; nil and an error (nothing
-- changed) for an image of another schema.
function _M:attach_image(img)
    local p = nil
    if img ~= nil then
        if type(img) ~= "table" or img.ptr == nil then
            error("bad argument #1 to 'attach_image' (image expected)", 2)
        end
        p = img.ptr
    end
    local rc = lib.atc_router_attach_image(self.ptr, p, previous)
    if rc ~= 0 then
        return nil, ffi_string(lib.atc_strerror(rc))
    end
    if p ~= nil then
        ffi.gc(p, nil)
        img.ptr = nil
    end
    local old = previous[0]
    previous[0] = nil
    if old == nil then
        return false
    end
    return require("resty.router.image").wrap(old, self.schema)
end

-- Makes the router's builder put every table it builds in an image for other workers to map
-- (resty.router.image): sealed in memory when `dir` is nil (what a node's workers share: no
-- one can change it, and it goes once no worker holds it), or written as a file in `dir`
-- (created with mode 0700 if missing; readers copy it). With `drop_tables`, applying a
-- published table leaves this router empty (the process matches from the image; the builder
-- keeps its copy for the next build). Before the first sync_start: true, or nil and an error.
function _M:publish_images(dir, drop_tables)
    if dir ~= nil and type(dir) ~= "string" then
        return nil, "dir must be a string or nil, got " .. type(dir)
    end
    dir = dir or ""
    arm()
    local rc = lib.atc_router_publish_images(self.ptr, dir, #dir,
        drop_tables and lib.ATC_PUBLISH_DROP_TABLES or 0, errbuf, errlen)
    if rc ~= 0 then
        return nil, message(rc)
    end
    return true
end

local published_cap = 4096
local published_buf = ffi.new("char[?]", published_cap)
local published_len = ffi.new("size_t[1]")

-- Where the image of the table sync_apply applied last went: its path and version; nil, why
-- and the version when it could not be written; nil when no table was applied since
-- publish_images.
function _M:published()
    published_len[0] = published_cap
    local rc = lib.atc_router_published(self.ptr, version_out, published_buf, published_len)
    if rc == lib.ATC_ERR_NOT_FOUND then
        return nil
    end
    if rc == lib.ATC_ERR_BUFFER then
        -- A path (or reason) longer than the buffer: once more with the size it needs.
        published_cap = tonumber(published_len[0])
        published_buf = ffi.new("char[?]", published_cap)
        published_len[0] = published_cap
        rc = lib.atc_router_published(self.ptr, version_out, published_buf, published_len)
    end
    local text = ffi_string(published_buf, published_len[0])
    if rc ~= 0 then
        return nil, text, version_value(version_out[0])
    end
    return text, version_value(version_out[0])
end

-- Whether an outcome waits for sync_apply: one atomic load, cheap enough for every request.
function _M:sync_ready()
    return lib.atc_router_sync_ready(self.ptr) == 1
end

-- Where the background sync is: "idle" (nothing started that is not applied), "building" (a
-- list is queued or being built; the version is the newest started) or "ready" (an outcome
-- waits for sync_apply; the version is its), and the version (nil when idle).
function _M:sync_state()
    local rc = lib.atc_router_sync_state(self.ptr, version_out)
    local state = BUILD_STATES[rc]
    if not state then
        return nil, ffi_string(lib.atc_strerror(rc))
    end
    if rc == 0 then
        return state
    end
    return state, version_value(version_out[0])
end

-- Takes the next outcome of the background builds, between two requests (it does not yield),
-- one per version handed over, in order:
--   version, report        the new table is in (report as from r:sync)
--   nil, err, errs, version   the list of `version` was refused (errs as from r:sync; for a list
--                          in text `index` is the route's line and `id` is nil), or its build
--                          failed (errs nil); the current table stays
--   nil, err, nil, version, "superseded"   `version` was never built: a whole list started
--                          after it took its place
--   false                  nothing is ready (sync_state says whether a build runs)
sync_apply_outcome = function(self)
    local pending = self.bg.pending
    local entry = pending[1]
    ensure_errors(math.max(APPLY_ERRORS_MIN, entry and entry.n or 0))
    if not apply_msg_buf then
        apply_msg_buf = ffi.new("char[?]", apply_msg_cap)
    end
    errors_len[0] = errors_cap
    msg_len[0] = apply_msg_cap
    arm()
    local rc = lib.atc_router_sync_apply(self.ptr, version_out, report, errors_buf, errors_len,
        apply_msg_buf, msg_len, errbuf, errlen)
    if rc == ERR_NOT_READY then
        return false
    end
    if rc ~= 0 and rc ~= ERR_ROUTES and rc ~= ERR_PANIC and rc ~= ERR_SUPERSEDED then
        return nil, message(rc)
    end
    local v = version_value(version_out[0])
    -- This outcome is the first list's: the builder reads it no more.
    table.remove(pending, 1)
    if rc == ERR_PANIC then
        return nil, message(rc), nil, v
    end
    if rc == ERR_SUPERSEDED then
        return nil, message(rc), nil, v, "superseded"
    end
    local errs = {}
    local errs_read = tonumber(errors_len[0])
    if errs_read > 0 then
        local from = nil
        if entry and entry.of then
            from = entry.of
        elseif entry and entry.changes then
            from = { changes = entry.changes }
        elseif entry and entry.routes then
            from = { routes = entry.routes, ids = entry.ids }
        end
        errs = read_errors(errs_read, from)
    end
    if rc == ERR_ROUTES then
        return nil, message(rc), errs, v
    end
    local r = report_table(errs)
    r.errors_total = tonumber(report.errors)
    return v, r
end

function _M:sync_apply()
    auto_off(self)
    return sync_apply_outcome(self)
end

---------------------------------------------------------------------------------------------
-- Counters for operators (ffi/README.md, atc_router_stats).

local stats_out = ffi.new("atc_stats")
local STATS_SIZE = ffi.sizeof("atc_stats")

-- The router's counts and the cost of its last update, as a table:
--   { routed =, not_found =, bad_requests =, updates_applied =, updates_refused =,
--     last_update_hold_us =, last_build_us =, routes =, broken = true/false }
-- (numbers: exact up to 2^53). Counts are kept per router from its creation, whatever table
-- serves: background applies and syncs carry them over. Reads a few atomics: for a metrics
-- endpoint, not for every request. nil and an error only for a failed call.
function _M:stats()
    stats_out.size = STATS_SIZE
    local rc = lib.atc_router_stats(self.ptr, stats_out)
    if rc ~= 0 then
        return nil, ffi_string(lib.atc_strerror(rc))
    end
    local s = stats_out
    return {
        routed = tonumber(s.routed),
        not_found = tonumber(s.not_found),
        bad_requests = tonumber(s.bad_requests),
        updates_applied = tonumber(s.updates_applied),
        updates_refused = tonumber(s.updates_refused),
        last_update_hold_us = tonumber(s.last_update_hold_us),
        last_build_us = tonumber(s.last_build_us),
        routes = tonumber(s.routes),
        broken = s.broken ~= 0,
    }
end

-- Counts a request the caller refused as bad input (a value add_value refused), which the
-- router never sees, in stats().bad_requests. One FFI call; resty.router.gateway's route()
-- makes it for every request it answers with nil and a reason.
function _M:count_bad_request()
    lib.atc_router_count_bad_request(self.ptr)
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

local count_out = ffi.new("size_t[1]")

-- The number of routes of the table the router routes from: its own, or the image attached
-- (attach_image).
function _M:len()
    lib.atc_router_len(self.ptr, count_out)
    return tonumber(count_out[0])
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
-- that index (the ATC_FIELD_INDEX_MASK bits of its id; ATC_FIELD_MASK_LAST_BIT stands for
-- every field of a higher index too). Lua gets it as two 32-bit halves, `lo` and `hi`, plain
-- numbers: a uint64_t read from LuaJIT is a boxed cdata, which a request path would allocate. Test a field with
-- router.field_mask(id): `bit.band(lo, flo) ~= 0 or bit.band(hi, fhi) ~= 0`.
local LAST_BIT = lib.ATC_FIELD_MASK_LAST_BIT
-- The id layout is the library's (the core's FieldId::INDEX_MASK, exported in the header).
local INDEX_MASK = lib.ATC_FIELD_INDEX_MASK
local maskbuf, mask_halves = cdefs.maskbuf, cdefs.mask_halves

-- The mask of the one field of id `id` (from context:field_id), as halves lo, hi: exactly one
-- of them is non-zero.
function _M.field_mask(id)
    local index = bit.band(id, INDEX_MASK)
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
    return mask_halves()
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
    return mask_halves()
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
