-- The gateway of scripts/demo and scripts/gateway-bench: resty.router.gateway in an nginx
-- worker, a route store changed through an admin endpoint, and the request handlers.
--
--   init_worker_by_lua_block { require("atc_demo").init("/path/routes.tsv" [, opts]) }
--   access_by_lua_block      { require("atc_demo").access() }    -- route, then proxy_pass
--   content_by_lua_block     { require("atc_demo").backend() }   -- the demo's upstream
--   content_by_lua_block     { require("atc_demo").bench() }     -- route and answer at once
--   content_by_lua_block     { require("atc_demo").admin() }     -- /admin/routes
--   content_by_lua_block     { require("atc_demo").stats() }     -- /admin/stats
--   content_by_lua_block     { require("atc_demo").churn() }     -- /admin/churn (benchmark)
--
-- Admin endpoint (/admin/routes; the nginx config lets only 127.0.0.1 in):
--   GET                            version, number of routes, fields in use
--   POST ?version=V[&mode=M]       body: changes, one per line:
--                                    PRIORITY<TAB>UUID<TAB>EXPRESSION   add or replace a route
--                                    -<TAB>UUID                         remove a route
--   PUT  ?version=V[&mode=M]       body: the whole table, PRIORITY<TAB>UUID<TAB>EXPRESSION lines
-- V defaults to the applied version plus one; M is "all_or_nothing" (default) or "apply_valid".
-- The answer says what changed and how long the update held the worker, or (400) why nothing
-- changed.
--
-- Invariant: STORE is the route list of the applied version. A change is made to STORE in place,
-- with an undo log, and undone if the gateway refuses the new version; all of it (change, sync,
-- undo) runs without yielding, so requests never see STORE and the router disagree.

local ffi = require("ffi")
local gateway = require("resty.router.gateway")

local ngx = ngx
local tonumber, tostring, ipairs, pairs, concat = tonumber, tostring, ipairs, pairs, table.concat

local _M = {}

local GW
local STORE
local STATS = { routed = 0, unrouted = 0, bad = 0, route_ms = 0 }

pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } atc_demo_timespec;
int clock_gettime(int clk_id, atc_demo_timespec *tp);
]])
local ts = ffi.new("atc_demo_timespec")
local function now_ms()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1e3 + tonumber(ts.tv_nsec) / 1e6
end

local function new_store()
    return { ids = {}, priorities = {}, expressions = {}, pos = {} }
end

local function store_add(store, id, prio, expr)
    local n = #store.ids + 1
    store.ids[n], store.priorities[n], store.expressions[n] = id, prio, expr
    store.pos[id] = n
end

-- A table line: priority, id, expression; or nil.
local function route_line(line)
    local prio, id, expr = line:match("^(%d+)\t([^\t]+)\t(.+)$")
    if prio then
        return tonumber(prio), id, expr
    end
end

local function lines(text)
    return text:gmatch("([^\n]*)\n?")
end

-- Parses a table (`full`) or a change list; nil and an error naming the bad line.
local function parse(text, full)
    local out, n = {}, 0
    for line in lines(text) do
        n = n + 1
        line = line:gsub("\r$", "")
        if line ~= "" then
            local prio, id, expr = route_line(line)
            if prio then
                out[#out + 1] = { id = id, priority = prio, expression = expr }
            elseif not full and line:match("^%-\t[^\t]+$") then
                out[#out + 1] = { id = line:sub(3), remove = true }
            else
                return nil, "line " .. n .. ": expected PRIORITY<TAB>UUID<TAB>EXPRESSION"
                    .. (full and "" or " or -<TAB>UUID")
            end
        end
    end
    return out
end

-- Applies changes to the store; returns the undo log.
local function change(store, changes)
    local undo = {}
    local ids, prios, exprs, pos = store.ids, store.priorities, store.expressions, store.pos
    for _, c in ipairs(changes) do
        local i = pos[c.id]
        if c.remove then
            if i then
                local last = #ids
                undo[#undo + 1] = { "removed", i, ids[i], prios[i], exprs[i] }
                if i ~= last then
                    ids[i], prios[i], exprs[i] = ids[last], prios[last], exprs[last]
                    pos[ids[i]] = i
                end
                ids[last], prios[last], exprs[last] = nil, nil, nil
                pos[c.id] = nil
            end
        elseif i then
            undo[#undo + 1] = { "replaced", i, prios[i], exprs[i] }
            prios[i], exprs[i] = c.priority, c.expression
        else
            undo[#undo + 1] = { "added" }
            store_add(store, c.id, c.priority, c.expression)
        end
    end
    return undo
end

local function revert(store, undo)
    local ids, prios, exprs, pos = store.ids, store.priorities, store.expressions, store.pos
    for k = #undo, 1, -1 do
        local u = undo[k]
        if u[1] == "replaced" then
            prios[u[2]], exprs[u[2]] = u[3], u[4]
        elseif u[1] == "added" then
            local last = #ids
            pos[ids[last]] = nil
            ids[last], prios[last], exprs[last] = nil, nil, nil
        else -- removed from u[2]: the route moved there goes back to the end
            local i = u[2]
            if ids[i] ~= nil then
                store_add(store, ids[i], prios[i], exprs[i])
            end
            ids[i], prios[i], exprs[i] = u[3], u[4], u[5]
            pos[u[3]] = i
        end
    end
end

-- The benchmark's churn (scripts/gateway-bench): while active, a timer changes 10 routes every
-- second through the same path as the admin endpoint. Each changed route gets
-- `&& http.method != "C<k>"` appended to its original expression: a new expression (parsed and
-- indexed again) that reaches the same requests.
local CHURN = { active = false, k = 0, held = {}, original = {} }

local function churn_step(premature)
    if premature or not CHURN.active then
        return
    end
    local k = CHURN.k + 1
    CHURN.k = k
    local ids, n = STORE.ids, #STORE.ids
    local changes = {}
    for j = 1, math.min(10, n) do
        -- Spread over the table, different each second, deterministic.
        local i = (k * 7919 + j * 104729) % n + 1
        local id = ids[i]
        local original = CHURN.original[id] or STORE.expressions[i]
        CHURN.original[id] = original
        changes[j] = { id = id, priority = STORE.priorities[i],
            expression = "(" .. original .. ") && http.method != \"C" .. k .. "\"" }
    end
    local t0 = now_ms()
    local undo = change(STORE, changes)
    local ok, err = GW:update("churn-" .. k, STORE)
    if not ok then
        revert(STORE, undo)
        ngx.log(ngx.ERR, "atc_demo: churn update refused: ", err)
        return
    end
    CHURN.held[#CHURN.held + 1] = now_ms() - t0
end

-- /admin/churn?start=1 starts the churn, ?stop=1 stops it; both print the time each update held
-- the worker (ms), since the last start.
function _M.churn()
    if ngx.var.arg_start then
        CHURN.active, CHURN.held = true, {}
    elseif ngx.var.arg_stop then
        CHURN.active = false
    end
    local held = {}
    for i, ms in ipairs(CHURN.held) do
        held[i] = string.format("%.2f", ms)
    end
    ngx.say("churn ", CHURN.active and "on" or "off", " held_ms ", concat(held, " "))
end

-- `opts.churn_timer`: start the (inactive) churn timer of the benchmark. `opts.explain_header`:
-- the gateway's debug header (scripts/demo sets X-Atc-Explain; only 127.0.0.1 may use it), whose
-- summary access() puts in $route_explain.
function _M.init(routes_file, opts)
    GW = assert(gateway.new({ explain_header = opts and opts.explain_header }))
    STORE = new_store()
    for line in io.lines(routes_file) do
        local prio, id, expr = route_line(line)
        if prio then
            store_add(STORE, id, prio, expr)
        end
    end
    local t0 = now_ms()
    local ok, report = GW:update("1", STORE, "apply_valid")
    if not ok then
        ngx.log(ngx.ERR, "atc_demo: routes not loaded: ", report)
        return
    end
    ngx.log(ngx.NOTICE, "atc_demo: version 1 with ", report.added, " routes built in ",
        string.format("%.0f", now_ms() - t0), " ms; ", #report.errors, " invalid")
    if opts and opts.churn_timer then
        assert(ngx.timer.every(1, churn_step))
    end
end

local function captures_text(captures)
    if not captures then
        return ""
    end
    local keys = {}
    for k in pairs(captures) do
        keys[#keys + 1] = tostring(k)
    end
    table.sort(keys)
    local parts = {}
    for i, k in ipairs(keys) do
        parts[i] = k .. "=" .. captures[tonumber(k) or k]
    end
    return concat(parts, " ")
end

-- access_by_lua: routes the request and passes the result upstream in X-Route-* headers (and to
-- the client through the $route_* variables the config adds as response headers; with the debug
-- header, $route_explain holds the summary of the request's explanation).
function _M.access()
    local uuid, matched, captures = GW:route()
    ngx.var.route_version = GW:version()
    local why = ngx.ctx.atc_explanation
    if why then
        ngx.var.route_explain = gateway.explain_summary(why)
    end
    if not uuid then
        if matched then
            ngx.status = 400
            ngx.say("bad request: ", matched)
            return ngx.exit(400)
        end
        ngx.status = 404
        ngx.say("no route (table version ", GW:version(), ")")
        return ngx.exit(404)
    end
    local caps = captures_text(captures)
    ngx.var.route_id, ngx.var.route_path, ngx.var.route_captures = uuid, matched or "", caps
    ngx.req.set_header("X-Route-Id", uuid)
    ngx.req.set_header("X-Route-Path", matched or "")
    ngx.req.set_header("X-Route-Captures", caps)
    ngx.req.set_header("X-Route-Version", GW:version())
end

-- The demo's upstream: says what the gateway told it.
function _M.backend()
    local h = ngx.req.get_headers()
    ngx.say("upstream got ", ngx.req.get_method(), " ", ngx.var.request_uri)
    ngx.say("  route id      ", h["x-route-id"] or "-", "   (table version ",
        h["x-route-version"] or "-", ")")
    ngx.say("  matched path  ", h["x-route-path"] or "")
    ngx.say("  captures      ", h["x-route-captures"] or "")
end

-- The benchmark's handler: route, count, answer 200 with the route id (or "-"). The time spent
-- in gw:route() is summed, so that the router's share of a request can be told apart.
function _M.bench()
    local t0 = now_ms()
    local uuid, err = GW:route()
    STATS.route_ms = STATS.route_ms + (now_ms() - t0)
    if uuid then
        STATS.routed = STATS.routed + 1
    elseif err then
        STATS.bad = STATS.bad + 1
    else
        STATS.unrouted = STATS.unrouted + 1
    end
    ngx.print(uuid or "-")
end

function _M.stats()
    local n = STATS.routed + STATS.unrouted + STATS.bad
    ngx.say("routed ", STATS.routed, " unrouted ", STATS.unrouted, " bad ", STATS.bad,
        " version ", GW:version(), " routes ", #STORE.ids, " route_us ",
        string.format("%.2f", n > 0 and STATS.route_ms * 1000 / n or 0))
    if ngx.var.arg_reset then
        STATS.routed, STATS.unrouted, STATS.bad, STATS.route_ms = 0, 0, 0, 0
    end
end

local function read_body()
    ngx.req.read_body()
    local body = ngx.req.get_body_data()
    if body then
        return body
    end
    local file = ngx.req.get_body_file()
    if not file then
        return ""
    end
    local f = assert(io.open(file, "rb"))
    body = f:read("*a")
    f:close()
    return body
end

local function fail(status, ...)
    ngx.status = status
    ngx.say(...)
    return ngx.exit(status)
end

local function say_errors(errs)
    for _, e in ipairs(errs or {}) do
        ngx.say("  route #", e.index, " (", tostring(e.id), "): ", (e.message:gsub("\n", "\n    ")))
    end
end

function _M.admin()
    local method = ngx.req.get_method()
    if method == "GET" then
        ngx.say("version ", GW:version(), ", ", #STORE.ids, " routes, fields in use: ",
            concat(GW:fields_in_use(), " "))
        return
    end
    if method ~= "POST" and method ~= "PUT" then
        return fail(405, "use GET, POST (changes) or PUT (the whole table)")
    end
    local args = ngx.req.get_uri_args()
    local version = args.version
    if type(version) ~= "string" or version == "" then
        version = tostring((tonumber(GW:version()) or 0) + 1)
    end
    if version == GW:version() then
        return fail(409, "version ", version, " is the one applied; give a new version")
    end
    local mode = args.mode
    if mode ~= nil and mode ~= "all_or_nothing" and mode ~= "apply_valid" then
        return fail(400, "mode must be all_or_nothing or apply_valid")
    end
    local list, perr = parse(read_body(), method == "PUT")
    if not list then
        return fail(400, "nothing changed: ", perr)
    end

    -- From here to the answer nothing yields: requests see the old version or the new one.
    local t0 = now_ms()
    local ok, report, errs
    if method == "PUT" then
        local store = new_store()
        for _, r in ipairs(list) do
            store_add(store, r.id, r.priority, r.expression)
        end
        ok, report, errs = GW:update(version, store, mode)
        if ok then
            STORE = store
        end
    else
        local undo = change(STORE, list)
        ok, report, errs = GW:update(version, STORE, mode)
        if not ok then
            revert(STORE, undo)
        end
    end
    local took = now_ms() - t0
    if not ok then
        ngx.status = 400
        -- The summary up to its first `;`: the routes and their errors follow, one by one.
        ngx.say("refused, still version ", GW:version(), ": ", report:match("^[^;\n]*"))
        say_errors(errs)
        return ngx.exit(400)
    end
    ngx.say(string.format("version %s applied in %.2f ms: added %d, removed %d, changed %d, "
        .. "unchanged %d, invalid %d (%d routes)", version, took, report.added, report.removed,
        report.changed, report.unchanged, #report.errors, #STORE.ids))
    say_errors(report.errors)
end

return _M
