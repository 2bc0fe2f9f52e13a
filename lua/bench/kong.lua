-- Ours or Kong's library (whichever `resty.router.*` the worker's package path finds: the
-- two share the API), through Lua in an nginx worker: what a table of routes holds, and what
-- changing one route in place costs. lua/bench/kong.sh runs it once per library and table,
-- each in a fresh nginx.
--
-- Memory: the route list is read into Lua first; then the heap in use (glibc's `mallinfo2`:
-- the library's allocations with the allocator's own overhead) and the Lua heap (Kong's router
-- keeps a Lua table of priorities by id) are read after a full collection, before and after
-- the routes are added one by one with `add_matcher`, as Kong's gateway adds them.
--
-- Changes: the victim route (victim.tsv) is removed and added again with its other
-- expression, `changes` times (`remove_matcher`, `add_matcher`: how Kong changes a route),
-- each timed alone on the monotonic clock.
local ffi = require("ffi")

for _, decl in ipairs({
    [[struct atc_bench_mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks,
        fsmblks, uordblks, fordblks, keepcost; };]],
    [[struct atc_bench_mallinfo2 mallinfo2(void);]],
    [[typedef struct { long sec; long nsec; } atc_bench_timespec;]],
    [[int clock_gettime(int clock, atc_bench_timespec *ts);]],
}) do
    pcall(ffi.cdef, decl)
end

local C = ffi.C
local CLOCK_MONOTONIC = 1
local ts = ffi.new("atc_bench_timespec")

local function now_ns()
    C.clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.sec) * 1e9 + tonumber(ts.nsec)
end

-- Bytes in use: glibc's heap (allocated chunks) and its mmapped blocks, and the Lua heap.
local function in_use()
    collectgarbage()
    collectgarbage()
    local m = C.mallinfo2()
    return tonumber(m.uordblks) + tonumber(m.hblkhd), collectgarbage("count") * 1024
end

local function fields(line)
    local out = {}
    for f in (line .. "\t"):gmatch("([^\t]*)\t") do
        out[#out + 1] = f
    end
    return out
end

-- A priority as the libraries take it: a number up to 2^53, beyond that (Kong's packed
-- priorities) a uint64_t cdata, as Kong's router builds them.
local function priority(text)
    if #text < 16 then
        return tonumber(text)
    end
    local v = 0ULL
    for d in text:gmatch("%d") do
        v = v * 10 + tonumber(d)
    end
    return v
end

local _M = {}

function _M.run(dir, changes)
    local schema_mod = require("resty.router.schema")
    local router_mod = require("resty.router.router")
    local prios, ids, exprs = {}, {}, {}
    for line in io.lines(dir .. "/routes.tsv") do
        local f = fields(line)
        prios[#prios + 1], ids[#ids + 1], exprs[#exprs + 1] = priority(f[1]), f[2], f[3]
    end
    local v
    for line in io.lines(dir .. "/victim.tsv") do
        v = fields(line)
    end
    local vid, vprio, alt = v[1], priority(v[2]), { v[3], v[4] }
    local field_types = {}
    for line in io.lines(dir .. "/schema.tsv") do
        field_types[#field_types + 1] = fields(line)
    end
    local n = #ids

    local heap0, lua0 = in_use()
    local s = schema_mod.new()
    for _, f in ipairs(field_types) do
        assert(s:add_field(f[1], f[2]))
    end
    local r = router_mod.new(s, n)
    local t0 = now_ns()
    for i = 1, n do
        assert(r:add_matcher(prios[i], ids[i], exprs[i]))
    end
    local build_ms = (now_ns() - t0) / 1e6
    local heap1, lua1 = in_use()

    local times = {}
    for k = 1, changes do
        local t = now_ns()
        r:remove_matcher(vid)
        local ok, err = r:add_matcher(vprio, vid, alt[k % 2 + 1])
        times[k] = now_ns() - t
        assert(ok, err)
    end
    table.sort(times)
    local function at(q)
        return times[math.floor((#times - 1) * q) + 1] / 1000
    end
    return string.format(
        "%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f",
        n,
        (heap1 - heap0) / n,
        (lua1 - lua0) / n,
        build_ms,
        at(0.5),
        at(0.99),
        times[#times] / 1000
    )
end

return _M
