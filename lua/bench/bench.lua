-- The cost of routing one request through LuaJIT -> C -> Rust at 10,000 routes: reset the
-- context, add every value of the request (by field name, as a gateway does), execute, read the
-- route id and the matched path. Prints the median over rounds of the mean time per request.
--
--   lua/bench/run.sh                       (builds the release library and the data, runs this)
--   LUA_PATH='lua/?.lua;;' LUA_CPATH='DIR_WITH_libatc_router.so/?.so;;' luajit lua/bench/bench.lua DATA_DIR [ROUNDS]
--
-- DATA_DIR holds schema.tsv, routes.tsv and requests.tsv (ffi/examples/workload_dump.rs).

local ffi = require("ffi")
local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")

local dir = assert(arg[1], "usage: bench.lua DATA_DIR [ROUNDS]")
local rounds = tonumber(arg[2] or "21")

-- The library's monotonic clock (the gateway's), in nanoseconds.
local now_ms = require("resty.router.gateway.updates").now_ms
local function now_ns()
    return now_ms() * 1e6
end

local s = schema.new()
for line in io.lines(dir .. "/schema.tsv") do
    local name, typ = line:match("^(%S+)\t(%S+)$")
    assert(s:add_field(name, typ))
end
-- A priority as Kong's router hands it over: a number up to 2^53, a uint64_t beyond (read by
-- LuaJIT's own parser, as a literal with the ULL suffix).
local function priority(text)
    if #text < 16 then
        return tonumber(text)
    end
    return assert(loadstring("return " .. text .. "ULL"))()
end

local r = router.new(s)
local t0 = now_ns()
local n = 0
for line in io.lines(dir .. "/routes.tsv") do
    local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
    assert(r:add_matcher(priority(prio), id, expr))
    n = n + 1
end
local build_ms = (now_ns() - t0) / 1e6
-- ATC_BENCH_SETTLE=1: the flat index written after loading (a call Kong never makes).
if os.getenv("ATC_BENCH_SETTLE") == "1" then
    r:settle()
end

-- Each request: a list of { field, value } with values of the field's Lua type.
local reqs = {}
for line in io.lines(dir .. "/requests.tsv") do
    local req = {}
    for cell in line:gmatch("[^\t]+") do
        local field, t, v = cell:match("^([^=]+)=(%a):(.*)$")
        req[#req + 1] = { field, t == "i" and tonumber(v) or v }
    end
    reqs[#reqs + 1] = req
end

local c = context.new(s)
local function fill(req)
    c:reset()
    for i = 1, #req do
        local kv = req[i]
        c:add_value(kv[1], kv[2])
    end
end

local function route(req)
    fill(req)
    if r:execute(c) then
        local uuid, path = c:get_result("http.path")
        return uuid, path
    end
end

-- Kong's API settles on the builder (router.lua): the first execute hands the table over,
-- and a later one swaps the settled table in. Timed: that first execute, and the wait.
pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")
local t_first = now_ns()
route(reqs[1])
local first_us = (now_ns() - t_first) / 1e3
local t_wait = now_ns()
while r.auto.inflight do
    ffi.C.poll(nil, 0, 1)
    route(reqs[1])
end
local settled_ms = (now_ns() - t_wait) / 1e6

local hits = 0
for i = 1, #reqs do
    if route(reqs[i]) then
        hits = hits + 1
    end
end

-- Without reading the result back: what get_result (two Lua strings) adds.
local function match_only(req)
    fill(req)
    return r:execute(c)
end

local function measure(fn)
    local samples = {}
    for round = 1, rounds do
        local start = now_ns()
        for i = 1, #reqs do
            fn(reqs[i])
        end
        samples[round] = (now_ns() - start) / #reqs
    end
    table.sort(samples)
    return samples[math.floor(rounds / 2) + 1], samples[1], samples[rounds]
end

print(string.format("%d routes (built in %.0f ms), %d requests (%d matched), %d rounds",
    n, build_ms, #reqs, hits, rounds))
print(string.format("first execute (hands the table to the builder when due) %.0f us; "
    .. "settled table in after %.0f ms", first_us, settled_ms))
print(string.format("full request (reset, add_value per field, execute, get_result): median %.0f ns/request (min %.0f, max %.0f)",
    measure(route)))
print(string.format("without get_result:                                     median %.0f ns/request (min %.0f, max %.0f)",
    measure(match_only)))
