-- Ours against APISIX's lua-resty-radixtree, in one nginx worker, on tables radixtree can
-- express (lua/bench/radixtree.sh writes them and runs this from a content handler).
--
-- Per request, ours: reset the context, add_value for method, host and path, execute,
-- get_result (the route's id, the matched path and the captures table, as Kong's router reads
-- them). Radixtree: match(path, { method = ..., host = ... }), which returns the route's
-- metadata (its id). Both walk the same requests, the table's realistic mix, in the same
-- order, in alternating rounds; before timing, every request is routed by both and the ids
-- compared.
local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")
local radix = require("resty.radixtree")

local _M = {}

-- The library's monotonic clock (the gateway's), in nanoseconds.
local now_ms = require("resty.router.gateway.updates").now_ms
local function now_ns()
    return now_ms() * 1e6
end

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

local function load(dir)
    local s = schema.new()
    for line in io.lines(dir .. "/schema.tsv") do
        local name, typ = line:match("^(%S+)\t(%S+)$")
        assert(s:add_field(name, typ))
    end
    local ours = router.new(s)
    local t0 = now_ns()
    for line in io.lines(dir .. "/routes.tsv") do
        local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
        assert(ours:add_matcher(tonumber(prio), id, expr))
    end
    local ours_ms = (now_ns() - t0) / 1e6

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
    t0 = now_ns()
    local rx = radix.new(routes)
    local rx_ms = (now_ns() - t0) / 1e6

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
    return s, ours, rx, reqs, #routes, ours_ms, rx_ms
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

return _M
