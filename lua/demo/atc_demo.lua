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
--   content_by_lua_block     { require("atc_demo").metrics() }   -- /metrics (Prometheus)
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
-- Invariant: STORE is the route list of the applied version. A change is made to a copy of
-- STORE, handed to the gateway (built on the router's builder thread while the worker routes),
-- waited for, and the copy becomes STORE once applied; a refused version leaves STORE as it was.
-- The benchmark's pushes (churn) change STORE in place and do not wait: each push is a new
-- version, and the gateway never applies an older one after a newer one.

local gateway = require("resty.router.gateway")

local ngx = ngx
local tonumber, tostring, ipairs, pairs, concat = tonumber, tostring, ipairs, pairs, table.concat

local _M = {}

local GW
local STORE
local STATS = { routed = 0, unrouted = 0, bad = 0, route_ms = 0 }

-- The gateway's monotonic clock (ms).
local now_ms = require("resty.router.gateway.updates").now_ms
-- What bench() times gw:route() with: now_ms, or with init's opts.clock = "cpu" the worker
-- thread's CPU time, which leaves out the time the worker waits for a CPU another process took
-- (on a shared machine, most of a wall-clock figure's noise), at a system call per reading.
local route_clock = now_ms

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

-- Applies changes to the store (in place); returns the undo log.
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

-- The benchmark's pushes (scripts/gateway-bench, scripts/push-bench), made by a timer in the
-- worker while active, of one of these kinds (init's opts.churn):
--   "routes10"     every second, 10 routes of STORE changed in place and STORE pushed (a table)
--   "apisix"       every 20 ms (50 a second), opts.churn_count routes (default 1) of STORE
--                  changed in place and STORE pushed whole (parallel Lua arrays)
--   "pct"          every second, a list in text with 1% of the routes changed from the previous
--                  one (the texts are made at init, as a control plane would send them)
--   "full"         every 2 seconds, a list in text where every id is new (two texts, alternating)
--   "full_arrays"  the same two lists as Lua arrays
--   "changes"      every 20 ms, opts.churn_count routes changed, pushed as a list of changes
--                  (gw:update(version, { upsert = ... })), as an event stream sends them
-- A changed route gets `&& http.method != "C<k>"` appended to its original expression: a new
-- expression (parsed and indexed again) that reaches the same requests.
local CHURN = { active = false, k = 0, pushes = {}, original = {}, kind = nil, texts = nil,
    count = 1 }
local CHURN_EVERY = { routes10 = 1, apisix = 0.02, pct = 1, full = 2, full_arrays = 2,
    changes = 0.02 }

-- Changes `count` routes of STORE in place; returns them.
local function churn_routes(k, count)
    local ids, n = STORE.ids, #STORE.ids
    local changes = {}
    for j = 1, math.min(count, n) do
        -- Spread over the table, different each time, deterministic.
        local i = (k * 7919 + j * 104729) % n + 1
        local id = ids[i]
        local original = CHURN.original[id] or STORE.expressions[i]
        CHURN.original[id] = original
        changes[j] = { id = id, priority = STORE.priorities[i],
            expression = "(" .. original .. ") && http.method != \"C" .. k .. "\"" }
    end
    change(STORE, changes)
    return changes
end

local function store_text(store)
    local out = {}
    for i = 1, #store.ids do
        out[i] = store.priorities[i] .. "\t" .. store.ids[i] .. "\t" .. store.expressions[i]
    end
    return concat(out, "\n") .. "\n"
end

local function copy_store(store, rename)
    local out = new_store()
    for i = 1, #store.ids do
        local id = store.ids[i]
        store_add(out, rename and ("b" .. id:sub(2)) or id, store.priorities[i],
            store.expressions[i])
    end
    return out
end

-- The lists of the "pct", "full" and "full_arrays" pushes, made once (at init: not while
-- measuring).
local function churn_lists(kind, pushes)
    local lists = {}
    if kind == "full" then
        lists[1], lists[2] = store_text(copy_store(STORE, true)), store_text(STORE)
    elseif kind == "full_arrays" then
        lists[1], lists[2] = copy_store(STORE, true), copy_store(STORE)
    elseif kind == "pct" then
        local work = copy_store(STORE)
        local n = #work.ids
        local per = math.max(1, math.floor(n / 100))
        for k = 1, pushes do
            for j = 1, per do
                local i = ((k - 1) * per + j - 1) % n + 1
                work.expressions[i] = "(" .. STORE.expressions[i] .. ") && http.method != \"C"
                    .. k .. "\""
            end
            lists[k] = store_text(work)
        end
    end
    return lists
end

local function churn_step(premature)
    if premature or not CHURN.active then
        return
    end
    local k = CHURN.k + 1
    CHURN.k = k
    local kind, list = CHURN.kind, nil
    if kind == "routes10" then
        churn_routes(k, 10)
        list = STORE
    elseif kind == "apisix" then
        churn_routes(k, CHURN.count)
        list = STORE
    elseif kind == "changes" then
        list = { upsert = churn_routes(k, CHURN.count) }
    elseif kind == "full" or kind == "full_arrays" then
        list = CHURN.texts[k % 2 + 1]
    else
        list = CHURN.texts[(k - 1) % #CHURN.texts + 1]
    end
    local version = kind .. "-" .. k
    local pushed_at = now_ms()
    local ok, err = GW:update(version, list)
    if not ok then
        ngx.log(ngx.ERR, "atc_demo: churn update refused: ", err)
        return
    end
    CHURN.pushes[#CHURN.pushes + 1] = { version = version, at = pushed_at,
        job = GW.latest[version] }
end

-- /admin/churn?start=1 starts the pushes, ?stop=1 stops them; both print, for each push since
-- the last start, what it held the worker (ms): held_ms the hand-over plus the swap and plan
-- (for a push applied; superseded ones were only handed over), longest_ms the longest stretch
-- without a yield; apply_ms, the swap and plan alone ("-" when not applied); wait_ms, from the push to the first table in force holding it (its own
-- version or a later one that superseded it: "-" when none is in force yet); then how many
-- were applied, how many refused, and whether the versions applied came in push order.
function _M.churn()
    if ngx.var.arg_start then
        CHURN.active, CHURN.pushes = true, {}
    elseif ngx.var.arg_stop then
        CHURN.active = false
    end
    local held, longest, swaps, waits, applied, refused = {}, {}, {}, {}, 0, 0
    local in_order, last_at = true, -math.huge
    local pushes = CHURN.pushes
    -- Walking back: the first applied push at or after each one.
    local in_force_at = nil
    for i = #pushes, 1, -1 do
        local job = pushes[i].job or {}
        if job.status == "applied" then
            in_force_at = job.applied_at
        end
        waits[i] = in_force_at and string.format("%.1f", in_force_at - pushes[i].at) or "-"
    end
    for i, p in ipairs(pushes) do
        local job = p.job or {}
        local h = job.handover_ms or 0
        local l = job.longest_ms or h
        if job.status == "applied" then
            applied = applied + 1
            h = h + (job.apply_ms or 0)
            l = math.max(l, job.apply_ms or 0)
            if job.applied_at < last_at then
                in_order = false
            end
            last_at = job.applied_at
        elseif job.status == "refused" then
            refused = refused + 1
        end
        held[i], longest[i] = string.format("%.2f", h), string.format("%.2f", l)
        swaps[i] = job.apply_ms and string.format("%.2f", job.apply_ms) or "-"
    end
    local last = pushes[#pushes]
    local last_applied = last and last.job and last.job.status == "applied"
    ngx.say("churn ", CHURN.active and "on" or "off", " applied ", applied, " of ", #pushes,
        " refused ", refused, " in_order ", tostring(in_order), " last_applied ",
        tostring(last_applied == true), " held_ms ", concat(held, " "), " longest_ms ",
        concat(longest, " "), " apply_ms ", concat(swaps, " "), " wait_ms ", concat(waits, " "))
end

-- `opts.etcd` ({ endpoints =, prefix = }, resty.router.etcd.watch's options): the routes come
-- from etcd instead of the routes file, and the pushes are the watcher's, each change it
-- applies recorded as a push while /admin/churn?start=1 is on (scripts/push-bench's etcd
-- case, whose changes another process puts into etcd).
local function follow_etcd(etcd_opts)
    local update = GW.update
    GW.update = function(self, version, list, mode)
        local pushed_at = now_ms()
        local ok, state, report = update(self, version, list, mode)
        if ok and CHURN.active then
            CHURN.pushes[#CHURN.pushes + 1] = { version = version, at = pushed_at,
                job = self.latest and self.latest[version] }
        end
        return ok, state, report
    end
    assert(require("resty.router.etcd").watch(GW, etcd_opts))
end

-- `opts.churn`: a kind of benchmark pushes (above) and its (inactive) timer; `opts.churn_pushes`
-- how many texts "pct" makes (default 30); `opts.churn_count` how many routes an "apisix" push
-- changes (default 1). `opts.explain_header`: the gateway's debug header
-- (scripts/demo sets X-Atc-Explain; only 127.0.0.1 may use it), whose summary access() puts in
-- $route_explain.
function _M.init(routes_file, opts)
    opts = opts or {}
    -- `opts.builder_nice`: the builder threads run that many nice levels below the worker;
    -- `opts.builder_priority`: "idle" (default) or "normal" (gateway.new's options).
    -- `opts.captures`: "lazy" for captures read on demand (scripts/gateway-bench --captures).
    -- `opts.share`: one table per node (gateway-bench --share).
    GW = assert(gateway.new({ explain_header = opts.explain_header,
        builder_nice = opts.builder_nice, builder_priority = opts.builder_priority,
        captures = opts.captures, share = opts.share }))
    if opts.clock == "cpu" then
        route_clock = require("resty.router.gateway.updates").cpu_ms
    end
    STORE = new_store()
    if opts.etcd then
        follow_etcd(opts.etcd)
        return
    end
    for line in io.lines(routes_file) do
        local prio, id, expr = route_line(line)
        if prio then
            store_add(STORE, id, prio, expr)
        end
    end
    local t0 = now_ms()
    -- In init_worker the list is applied before update() returns: no request waits yet.
    local ok, state, report = GW:update("1", STORE, "apply_valid")
    if not ok then
        ngx.log(ngx.ERR, "atc_demo: routes not loaded: ", state)
        return
    end
    if state == "building" then
        -- With `share`: built on the builder thread and routed once its image is mapped.
        ngx.log(ngx.NOTICE, "atc_demo: version 1 with ", #STORE.ids, " routes being built")
        return
    end
    ngx.log(ngx.NOTICE, "atc_demo: version 1 with ", report.added, " routes built in ",
        string.format("%.0f", now_ms() - t0), " ms; ", #report.errors, " invalid")
    local kind = opts.churn or (opts.churn_timer and "routes10")
    if kind then
        assert(CHURN_EVERY[kind], "unknown churn kind")
        CHURN.kind = kind
        CHURN.count = opts.churn_count or 1
        CHURN.texts = churn_lists(kind, opts.churn_pushes or 30)
        assert(ngx.timer.every(CHURN_EVERY[kind], churn_step))
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
    -- GW:captures() is a table in either captures mode (the lazy object has no pairs()).
    local caps = captures_text(captures and GW:captures())
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
    local t0 = route_clock()
    local uuid, err = GW:route()
    STATS.route_ms = STATS.route_ms + (route_clock() - t0)
    if uuid then
        STATS.routed = STATS.routed + 1
    elseif err then
        STATS.bad = STATS.bad + 1
    else
        STATS.unrouted = STATS.unrouted + 1
    end
    ngx.print(uuid or "-")
end

-- /atc-probe/...: bench()'s routing, answered with the worker's pid after the route id, so that
-- a probe (atc-etcd-push probe, scripts/fleet-bench) can ask every worker of a node.
function _M.probe()
    local uuid = GW:route()
    ngx.print(uuid or "-", " ", ngx.worker.pid())
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

-- /metrics: the gateway's counters in Prometheus' text format, labelled with the worker's id
-- (each worker has its own gateway and counts; a scrape reaches one worker).
function _M.metrics()
    local text, err = GW:metrics_text({ worker = ngx.worker.id() })
    if not text then
        return fail(500, "metrics: ", err)
    end
    ngx.header.content_type = gateway.METRICS_CONTENT_TYPE
    ngx.print(text)
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

    -- The new list is a copy: STORE stays the list of the applied version until the new one
    -- is applied. The list is built on the builder thread while the worker routes; this
    -- request waits for it (ngx.sleep), the others do not.
    local store = new_store()
    if method == "PUT" then
        for _, r in ipairs(list) do
            store_add(store, r.id, r.priority, r.expression)
        end
    else
        for i = 1, #STORE.ids do
            store_add(store, STORE.ids[i], STORE.priorities[i], STORE.expressions[i])
        end
        change(store, list)
    end
    local t0 = now_ms()
    local ok, report, errs = GW:update(version, store, mode)
    if ok then
        ok, report, errs = GW:wait(version)
    end
    local took = now_ms() - t0
    if not ok then
        ngx.status = 400
        -- The summary up to its first `;`: the routes and their errors follow, one by one.
        ngx.say("refused, still version ", GW:version(), ": ", report:match("^[^;\n]*"))
        say_errors(errs)
        return ngx.exit(400)
    end
    STORE = store
    local w = report.worker or {}
    ngx.say(string.format("version %s applied in %.2f ms (the worker held %.2f ms): added %d, "
        .. "removed %d, changed %d, unchanged %d, invalid %d (%d routes)", version, took,
        (w.handover_ms or 0) + (w.apply_ms or 0), report.added, report.removed, report.changed,
        report.unchanged, #report.errors, #STORE.ids))
    say_errors(report.errors)
end

return _M
