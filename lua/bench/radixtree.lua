-- Ours against APISIX's lua-resty-radixtree, in one nginx worker, on tables radixtree can
-- express (lua/bench/radixtree.sh writes them and runs this from a content handler).
--
-- Per request, ours: reset the context, add_value for method, host and path, execute,
-- get_result (the route's id, the matched path and the captures table, as Kong's router reads
-- them). Radixtree: match(path, { method = ..., host = ... }), which returns the route's
-- metadata (its id). Both walk the same requests, the table's realistic mix, in the same
-- order, in alternating rounds; before timing, every request is routed by both and the ids
-- compared.
--
-- build() times building the whole table, from its route list in Lua memory to a table that
-- answers (see there): ours the way a gateway loads it (resty.router.gateway's update(), whose
-- build runs on the router's builder thread, until the first route() returns), and radixtree's
-- radix.new(routes) (and its first match).
local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")
local gateway = require("resty.router.gateway")
local radix = require("resty.radixtree")
local ffi = require("ffi")

local _M = {}

-- The library's monotonic clock (the gateway's), in nanoseconds.
local now_ms = require("resty.router.gateway.updates").now_ms
local function now_ns()
    return now_ms() * 1e6
end
-- The worker thread's CPU time, and the whole process's (its threads'), in ms.
local cpu_ms = require("resty.router.gateway.updates").cpu_ms
local ts = ffi.new("struct timespec") -- declared by resty.router.gateway.updates
local function process_cpu_ms()
    ffi.C.clock_gettime(2, ts) -- CLOCK_PROCESS_CPUTIME_ID
    return tonumber(ts.tv_sec) * 1e3 + tonumber(ts.tv_nsec) / 1e6
end
pcall(ffi.cdef, "int usleep(unsigned int usec);")

local function split(list)
    if list == "-" then
        return nil
    end
    local out = {}
    for item in list:gmatch("[^,]+") do
        out[#out + 1] = item
    end
    return out
end

-- radixtree's route list of the table in `dir`.
local function radix_routes(dir)
    local routes = {}
    for line in io.lines(dir .. "/radixtree.tsv") do
        local id, prio, hosts, methods, paths =
            line:match("^(%S+)\t(%d+)\t(%S+)\t(%S+)\t(%S+)$")
        routes[#routes + 1] = {
            paths = split(paths),
            hosts = split(hosts),
            methods = split(methods),
            priority = tonumber(prio),
            metadata = id,
        }
    end
    return routes
end

-- The requests of `dir`, as { method =, host =, path = }.
local function requests(dir)
    local reqs = {}
    for line in io.lines(dir .. "/requests.tsv") do
        local req = {}
        for cell in line:gmatch("[^\t]+") do
            local field, v = cell:match("^([^=]+)=%a:(.*)$")
            if field == "http.method" then
                req.method = v
            elseif field == "http.host" then
                req.host = v
            elseif field == "http.path" then
                req.path = v
            end
        end
        reqs[#reqs + 1] = req
    end
    return reqs
end

-- The fields of the table in `dir`, as { name, type } pairs, and its schema.
local function fields_of(dir)
    local fields = {}
    for line in io.lines(dir .. "/schema.tsv") do
        local name, typ = line:match("^(%S+)\t(%S+)$")
        fields[#fields + 1] = { name, typ }
    end
    local s = schema.new()
    for _, f in ipairs(fields) do
        assert(s:add_field(f[1], f[2]))
    end
    return fields, s
end

local function load(dir)
    local _, s = fields_of(dir)
    local ours = router.new(s)
    local t0 = now_ns()
    for line in io.lines(dir .. "/routes.tsv") do
        local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
        assert(ours:add_matcher(tonumber(prio), id, expr))
    end
    local ours_ms = (now_ns() - t0) / 1e6

    local routes = radix_routes(dir)
    t0 = now_ns()
    local rx = radix.new(routes)
    local rx_ms = (now_ns() - t0) / 1e6

    return s, ours, rx, requests(dir), #routes, ours_ms, rx_ms
end

-- Times one pass of `fn` over the requests, in ns per request, after a full collection (each
-- side pays for the garbage it makes, not for the other's).
local function pass(fn, reqs)
    collectgarbage()
    local start = now_ns()
    for i = 1, #reqs do
        fn(reqs[i])
    end
    return (now_ns() - start) / #reqs
end

local function summary(samples)
    table.sort(samples)
    return samples[math.floor(#samples / 2) + 1], samples[1], samples[#samples]
end

function _M.run(dir, rounds)
    local s, ours, rx, reqs, n, ours_ms, rx_ms = load(dir)
    local c = context.new(s)
    local function ours_route(req)
        c:reset()
        c:add_value("http.method", req.method)
        c:add_value("http.host", req.host)
        c:add_value("http.path", req.path)
        if ours:execute(c) then
            return (c:get_result("http.path"))
        end
    end
    local opts = {}
    local function rx_route(req)
        opts.method = req.method
        opts.host = req.host
        return rx:match(req.path, opts)
    end

    local agree, matched = 0, 0
    for i = 1, #reqs do
        local a, b = ours_route(reqs[i]), rx_route(reqs[i])
        if a == b then
            agree = agree + 1
        end
        if a then
            matched = matched + 1
        end
    end
    -- Ours was loaded with add_matcher, as Kong loads a table: the first execute handed it to
    -- the builder thread, which builds it settled; time requests once it is in.
    while ours.auto.inflight do
        ngx.sleep(0.001)
        ours_route(reqs[1])
    end
    -- Rounds alternate between the two, so that a noisy stretch of a shared machine falls on
    -- both alike.
    local os, xs = {}, {}
    for round = 1, rounds do
        os[round] = pass(ours_route, reqs)
        xs[round] = pass(rx_route, reqs)
    end
    local o = { summary(os) }
    local x = { summary(xs) }
    return string.format(
        "%d routes (built: ours %.0f ms, radixtree %.0f ms), %d requests, %d matched by ours, "
            .. "%d routed alike\n"
            .. "ours:      median %.0f ns/request (min %.0f, max %.0f)\n"
            .. "radixtree: median %.0f ns/request (min %.0f, max %.0f)\n",
        n, ours_ms, rx_ms, #reqs, matched, agree, o[1], o[2], o[3], x[1], x[2], x[3])
end

---------------------------------------------------------------------------------------------
-- Build times: from the table's route list in Lua memory (read from the files before the
-- clock starts) to a table that has answered a request, for each side, in alternating rounds,
-- each after a full collection (each side pays for the garbage its build makes, not for the
-- other's), and with no other thread of the worker busy (see quiet()).
--
-- Ours, the way a gateway loads a table: gw:update(version, routes) on a fresh
-- resty.router.gateway (made before the clock starts) hands the list to the router's builder
-- thread and returns at once; the build runs there, and the table is swapped in by the next
-- gw:route() (or the gateway's poll timer). So the clock runs from update() until the first
-- route() after the outcome is ready returns (the worker sleeps 20 us between two checks of
-- sync_ready, one atomic load): hand-over, the build on the builder thread, the swap and the
-- routing plan. The builder thread runs at the worker's priority (builder_priority "normal",
-- builder_nice 0, set for every build here), not the default SCHED_IDLE, which would measure
-- whatever else the machine runs; update_slice is long enough that the hand-over does not
-- yield (by default it gives way every millisecond, which delays the answer but costs no
-- work). After a fresh build the builder thread goes on to build its shadow copy of the table
-- (for the next push, off the request path, after the table answers), until the gateway is
-- freed: quiet() keeps the next build from sharing the machine with it.
--
-- Also measured for ours: what the gateway's build held the worker (its CPU time in update()
-- and in the route() that swapped the table in), the builder thread's own build time
-- (stats().last_build_us), and two builds in the worker: r:sync(routes) on a new router, and
-- add_matcher route by route (the match benchmark's build) then r:settle() (which writes the
-- flat index from 1,024 routes), each until its first execute returns.
--
-- Radixtree: radix.new(routes) until its first match returns (it builds everything in new;
-- the first match is there for symmetry and costs microseconds).

local function collect()
    collectgarbage()
    collectgarbage()
end

-- Collects, and waits (at most about 10 s) until the worker's other threads have been idle
-- for 10 ms: a gateway of an earlier round that the collector has not freed yet (its poll
-- timer, or a stale slot of a Lua stack, may still hold it for a while) may have its builder
-- thread still building its shadow table, on the CPU the next build would use.
local function quiet()
    for _ = 1, 1000 do
        collect()
        local p0, w0 = process_cpu_ms(), cpu_ms()
        ngx.sleep(0.01)
        if (process_cpu_ms() - p0) - (cpu_ms() - w0) < 0.5 then
            break
        end
    end
    collect()
end

local function median(samples)
    table.sort(samples)
    return samples[math.floor(#samples / 2) + 1]
end

local function fill(c, req)
    c:reset()
    c:add_value("http.method", req.method)
    c:add_value("http.host", req.host)
    c:add_value("http.path", req.path)
end

-- One build of ours through the gateway: wall ms, worker ms, builder thread ms.
local function build_gateway(fields, routes, n, req)
    local gw = assert(gateway.new({
        schema = fields, updates = "async", update_slice = 3600, poll_interval = 0.001,
        builder_priority = "normal", builder_nice = 0,
    }))
    local c = context.new(gw.schema)
    quiet()
    local t0, c0 = now_ns(), cpu_ms()
    local ok, state = gw:update(1, routes)
    assert(ok and state == "building", "update: " .. tostring(state))
    local held = cpu_ms() - c0
    local r = gw.router
    while not r:sync_ready() do
        ffi.C.usleep(20)
    end
    local c1 = cpu_ms()
    gw:route() -- this benchmark's own request (a miss): it swaps the table in first
    local wall = (now_ns() - t0) / 1e6
    held = held + (cpu_ms() - c1)
    local st = assert(gw:stats())
    assert(gw:version() == 1 and st.routes == n,
        "the gateway holds " .. tostring(st.routes) .. " routes, not " .. n)
    -- The table answers a request of its own.
    fill(c, req)
    assert(r:execute(c), "the gateway's table does not match the first request")
    -- The poll timer the update armed holds the gateway: once it ran (and, finding nothing
    -- in flight, armed itself no more), the gateway can go, and with it the builder thread.
    ngx.sleep(0.005)
    return wall, held, st.last_build_us / 1e3
end

-- One build of ours in the worker (how: "sync", or "add" for add_matcher and settle): wall ms.
local function build_in_worker(s, routes, n, req, how)
    local r = router.new(s)
    local c = context.new(s)
    quiet()
    local t0 = now_ns()
    if how == "sync" then
        local report, err = r:sync(routes)
        assert(report and report.added == n, "sync: " .. tostring(err))
    else
        for i = 1, n do
            local route = routes[i]
            assert(r:add_matcher(route.priority, route.id, route.expression))
        end
        r:settle()
    end
    fill(c, req)
    local matched = r:execute(c)
    local wall = (now_ns() - t0) / 1e6
    assert(matched, "the table does not match the first request")
    return wall
end

-- One build of radixtree: wall ms.
local function build_radix(routes, req)
    local opts = { method = req.method, host = req.host }
    quiet()
    local t0 = now_ns()
    local rx = radix.new(routes)
    local id = rx:match(req.path, opts)
    local wall = (now_ns() - t0) / 1e6
    assert(id, "radixtree does not match the first request")
    return wall
end

-- The medians over `rounds` rounds for the table in `dir`, tab-separated: routes, ours
-- (gateway), radixtree, the gateway build's worker time, its builder thread's time, r:sync,
-- add_matcher and settle (ms).
function _M.build(dir, rounds)
    local fields, s = fields_of(dir)
    local routes = {}
    for line in io.lines(dir .. "/routes.tsv") do
        local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
        routes[#routes + 1] = { id = id, priority = tonumber(prio), expression = expr }
    end
    local n = #routes
    local rx_routes = radix_routes(dir)
    assert(#rx_routes == n, "radixtree.tsv and routes.tsv differ in length")
    local req = requests(dir)[1]

    local gw, held, builder, rx, sync, add = {}, {}, {}, {}, {}, {}
    for round = 1, rounds do
        gw[round], held[round], builder[round] = build_gateway(fields, routes, n, req)
        rx[round] = build_radix(rx_routes, req)
        sync[round] = build_in_worker(s, routes, n, req, "sync")
        add[round] = build_in_worker(s, routes, n, req, "add")
    end
    collect()
    return string.format("%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f", n, median(gw), median(rx),
        median(held), median(builder), median(sync), median(add))
end

-- The content handler: /bench/build/<table> times the builds of <table> (build_rounds rounds),
-- /bench/<table> its requests (rounds rounds).
function _M.serve(work, name, rounds, build_rounds)
    local table_name = name:match("^build/(.*)$")
    if table_name then
        return _M.build(work .. table_name, build_rounds)
    end
    return _M.run(work .. name, rounds)
end

return _M
