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

local _M = {}
_M._VERSION = "0.2.0"
local mt = { __index = _M }

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
    return setmetatable({ ptr = ffi.gc(p, finalizer(bg)), schema = schema, bg = bg }, mt)
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

-- Not in Kong's module: writes the router's flat index now (from 1,024 routes), so that requests
-- walk it without an overlay of the routes changed since. About a microsecond per route; call it
-- once after loading a large table with add_matcher. No add or remove writes it; sync_start's
-- background builds do, on their own thread.
function _M:settle()
    lib.atc_router_settle(self.ptr)
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

-- Fills buf[0 .. last-first] with routes first .. last of either input form. Entries the C side
-- cannot be given (a non-string id or expression, a bad priority) get a NULL pointer with length
-- 1, which the library reports as that route's error (and, for a known id in apply-valid mode,
-- keeps the route's current version); `bad` maps their 1-based index to the real reason (made
-- when needed: the table is returned).
local function fill(buf, routes, ids, priorities, expressions, first, last, bad)
    for i = first, last do
        local id, prio, expr
        if ids then
            id, prio, expr = ids[i], priorities[i], expressions[i]
        else
            local route = routes[i]
            if type(route) == "table" then
                id, prio, expr = route.id, route.priority, route.expression
            end
        end
        local e = buf[i - first]
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

-- The form of a route list: ids, priorities, expressions (the parallel arrays, or nil for an
-- array of route tables) and n; or nil, err.
local function list_form(routes)
    if type(routes) ~= "table" then
        return nil, "routes must be a table, got " .. type(routes)
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

-- The errors array of a sync: { index =, id =, message = } for errors_buf[0 .. count-1]. `bad`
-- holds the real reasons of the entries fill() could not hand over; `routes`/`ids` give the
-- ids (nil for a list in text: `index` is then the route's line).
local function read_errors(count, routes, ids, bad, text)
    local errors = {}
    for k = 0, count - 1 do
        local e = errors_buf[k]
        local i = tonumber(e.index) + 1
        local msg
        if bad and bad[i] then
            msg = bad[i]
        elseif e.message ~= nil then
            msg = ffi_string(e.message, e.message_len)
        else
            msg = ffi_string(lib.atc_strerror(e.code))
        end
        local id
        if not text then
            id = id_at(routes, ids, i)
        end
        errors[k + 1] = { index = i, id = id, message = msg }
    end
    return errors
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
    local ids, priorities, expressions, n = list_form(routes)
    if not ids and not n then
        return nil, priorities
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
    local bad = fill(routes_buf, routes, ids, priorities, expressions, 1, n, nil)
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
    local errors = read_errors(tonumber(errors_len[0]), routes, ids, bad, false)
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

---------------------------------------------------------------------------------------------
-- Background syncs: the next table is built on the router's builder thread (ffi/README.md,
-- "Background syncs"). sync_start hands a list over and returns; sync_ready (one atomic load)
-- says when the outcome waits; sync_apply swaps it in (O(1)) or says why it was refused.
--
-- Invariants:
-- * `self.bg.pending` holds, in the order started, what each list still in the builder's hands
--   needs on this side: a text lent without a copy (anchored here until sync_apply returned the
--   outcome of that start or a later one, which is when the builder no longer reads it), and
--   what the errors of a list of routes are read against (its table and the reasons fill()
--   found). The router's finalizer keeps it reachable until the builder thread is stopped.
-- * A list of routes goes over in chunks, each copied by atc_route_list_add; between chunks
--   `opts.yield` may yield. Nothing is started before the last chunk is in, and a start that
--   stops early frees its list.

local DEFAULT_CHUNK = 1000
local TEXT_COPY, TEXT_BORROW = lib.ATC_TEXT_COPY, lib.ATC_TEXT_BORROW
local BUILD_STATES = { [0] = "idle", "building", "ready" }
local version_out = ffi.new("uint64_t[1]")
local chunk_cap, chunk_buf = 0, nil
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

local function same_version(a, b)
    if type(a) == "cdata" or type(b) == "cdata" then
        return ffi.cast("uint64_t", a) == ffi.cast("uint64_t", b)
    end
    return a == b
end

-- Starts bringing the router to `routes` as version `version` on its builder thread and returns
-- at once (the current table keeps answering): true, or nil and an error (nothing started).
--
-- `version`: an integer from 0 to 2^53, or uint64_t cdata; sync_apply returns it with the
-- outcome. Outcomes come in the order started; a start supersedes a list still queued and an
-- outcome not yet applied (sync_apply never returns an outcome after a newer one).
-- `routes`: as for r:sync (an array of route tables, or parallel arrays), or a string holding
-- a TSV or JSON route list (as `atc-router check` reads route files), read on the builder
-- thread. A string is lent, not copied: it is anchored in the router until its outcome (or a
-- later one) is applied; `opts.copy = true` copies it instead.
-- `mode`: "all_or_nothing" (default) or "apply_valid", as for r:sync.
-- `opts.chunk`: routes handed over per FFI call for a table (default 1000: about 0.3 ms of the
-- worker's time each); `opts.yield`: a function called between two chunks, which may yield
-- (ngx.sleep(0), coroutine.yield); when it returns a value other than nil, the start is
-- abandoned and sync_start returns nil and that value. The table must not change until
-- sync_start returns.
function _M:sync_start(version, routes, mode, opts)
    local v, verr = to_version(version)
    if not v then
        return nil, verr
    end
    local mode_code = MODES[mode or "all_or_nothing"]
    if not mode_code then
        return nil, "unknown sync mode " .. tostring(mode)
            .. " (expected \"all_or_nothing\" or \"apply_valid\")"
    end
    local chunk, yield, copy = DEFAULT_CHUNK, nil, false
    if opts ~= nil then
        if type(opts) ~= "table" then
            return nil, "options must be a table, got " .. type(opts)
        end
        chunk = opts.chunk or chunk
        if type(chunk) ~= "number" or chunk < 1 or chunk ~= math.floor(chunk) then
            return nil, "opts.chunk must be a positive integer, got " .. tostring(opts.chunk)
        end
        yield, copy = opts.yield, opts.copy and true or false
        if yield ~= nil and type(yield) ~= "function" then
            return nil, "opts.yield must be a function, got " .. type(yield)
        end
    end
    local pending = self.bg.pending
    if type(routes) == "string" then
        arm()
        local rc = lib.atc_router_sync_start_text(self.ptr, v, routes, #routes,
            copy and TEXT_COPY or TEXT_BORROW, mode_code, errbuf, errlen)
        if rc ~= 0 then
            return nil, message(rc)
        end
        pending[#pending + 1] = { version = version_value(v), text = (not copy) and routes or true }
        return true
    end
    local ids, priorities, expressions, n = list_form(routes)
    if not ids and not n then
        return nil, priorities
    end
    local size = math.min(chunk, math.max(n, 1))
    if size > chunk_cap then
        chunk_cap = size
        chunk_buf = ffi.new("atc_route[?]", chunk_cap)
    end
    -- Freed by the collector if this function raises or stops early; taken by the start.
    local list = ffi.gc(lib.atc_route_list_new(), lib.atc_route_list_free)
    if list == nil then
        return nil, "resty.router: cannot make a route list"
    end
    local bad = nil
    local first = 1
    while first <= n do
        local last = math.min(first + chunk - 1, n)
        -- chunk_buf may have grown while an earlier chunk yielded: take it now.
        local buf = chunk_buf
        if last - first + 1 > chunk_cap then
            chunk_cap = last - first + 1
            chunk_buf = ffi.new("atc_route[?]", chunk_cap)
            buf = chunk_buf
        end
        bad = fill(buf, routes, ids, priorities, expressions, first, last, bad)
        arm()
        local rc = lib.atc_route_list_add(list, buf, last - first + 1, errbuf, errlen)
        if rc ~= 0 then
            return nil, message(rc)
        end
        first = last + 1
        if yield and first <= n then
            local stop = yield()
            if stop ~= nil then
                return nil, stop
            end
        end
    end
    arm()
    local rc = lib.atc_router_sync_start(self.ptr, v, list, mode_code, errbuf, errlen)
    if rc ~= 0 then
        return nil, message(rc)
    end
    ffi.gc(list, nil) -- the router has it now
    pending[#pending + 1] = { version = version_value(v), routes = routes, ids = ids, bad = bad }
    return true
end

-- Makes the router's builder write every table it builds as an image file in `dir` (created
-- with mode 0700 if missing), for other workers to map (resty.router.image). With
-- `drop_tables`, applying a published table leaves this router empty (the process matches
-- from the image; the builder keeps its copy for the next build). Before the first
-- sync_start: true, or nil and an error.
function _M:publish_images(dir, drop_tables)
    if type(dir) ~= "string" then
        return nil, "dir must be a string, got " .. type(dir)
    end
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

-- Applies the outcome of the background sync, between two requests (it does not yield):
--   version, report        the new table is in (report as from r:sync)
--   nil, err, errs, version   the list of `version` was refused (errs as from r:sync; for a list
--                          in text `index` is the route's line and `id` is nil), or its build
--                          failed (errs nil); the current table stays
--   false                  nothing is ready (sync_state says whether a build runs)
function _M:sync_apply()
    local pending = self.bg.pending
    local want = APPLY_ERRORS_MIN
    for _, p in ipairs(pending) do
        if p.ids then
            want = math.max(want, #p.ids)
        elseif p.routes then
            want = math.max(want, #p.routes)
        end
    end
    if want > errors_cap then
        errors_cap = want
        errors_buf = ffi.new("atc_sync_error[?]", errors_cap)
    end
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
    if rc ~= 0 and rc ~= ERR_ROUTES and rc ~= ERR_PANIC then
        return nil, message(rc)
    end
    local v = version_value(version_out[0])
    -- The outcome of the earliest start of `v` still pending, or of a later one: the builder
    -- reads none of the lists up to it any more.
    local entry, upto = nil, 0
    for i, p in ipairs(pending) do
        if same_version(p.version, v) then
            entry, upto = p, i
            break
        end
    end
    if upto > 0 then
        local rest = {}
        for i = upto + 1, #pending do
            rest[#rest + 1] = pending[i]
        end
        self.bg.pending = rest
    end
    if rc == ERR_PANIC then
        return nil, message(rc), nil, v
    end
    local errs = {}
    local errs_read = tonumber(errors_len[0])
    if errs_read > 0 then
        local text = entry == nil or entry.routes == nil
        errs = read_errors(errs_read, entry and entry.routes, entry and entry.ids,
            entry and entry.bad, text)
    end
    local total = tonumber(report.errors)
    if rc == ERR_ROUTES then
        local first = errs[1]
        if not first then
            -- The text as a whole could not be read.
            return nil, message(rc), errs, v
        end
        local where = first.id and ("route #" .. first.index .. " (" .. first.id .. ")")
            or ("route at line " .. first.index)
        return nil, total .. " invalid route(s), nothing changed; " .. where .. ": "
            .. first.message, errs, v
    end
    return v, {
        added = tonumber(report.added),
        removed = tonumber(report.removed),
        changed = tonumber(report.changed),
        unchanged = tonumber(report.unchanged),
        errors = errs,
        errors_total = total,
    }
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
