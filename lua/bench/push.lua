-- What a push holds the worker, at a table's size, through resty.router.gateway in LuaJIT:
--   LUA_PATH='lua/?.lua;;' LUA_CPATH='DIR/?.so;;' luajit lua/bench/push.lua ROUTES_TSV [ROUNDS]
-- (lua/bench/push.sh builds the library and the table). For each push (the same list as a new
-- version, one route changed, 1%, 10%, every id new) it times
--   before: gw:update() with updates = "sync" (r:sync on the worker, as every update was);
--   after:  gw:update() handing the list to the builder thread (a table in chunks of 1,000
--           with a yield between two, or one string), then the swap and plan when it is built:
--           the total the worker spends, the longest stretch without a yield, and the swap.
-- In the thread's CPU time; medians over ROUNDS (default 5). The builder is let settle between
-- two pushes (its copy of the table brought up to date), as between two pushes a second apart.
local ffi = require("ffi")
local file, rounds = arg[1], tonumber(arg[2] or 5)

-- The gateway in a timer of a mock nginx: ngx.sleep(0) returns at once (the hand-over's yields
-- cost nothing here: what is timed is the work between them).
_G.ngx = {
    get_phase = function() return "timer" end,
    sleep = function() end,
    timer = { at = function() return true end },
    var = {}, req = {}, ctx = {},
}
local gateway = require("resty.router.gateway")
local updates = require("resty.router.gateway.updates")
-- The worker thread's CPU time: what the push costs the worker, not waits for the CPU.
local now_ms = updates.cpu_ms
pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")

local ids, prios, exprs = {}, {}, {}
for line in io.lines(file) do
    local p, id, e = line:match("^(%d+)\t(%S+)\t(.*)$")
    if p then
        ids[#ids + 1], prios[#prios + 1], exprs[#exprs + 1] = id, tonumber(p), e
    end
end
local n = #ids
local function tsv(l)
    local out = {}
    for i = 1, #l.ids do
        out[i] = l.priorities[i] .. "\t" .. l.ids[i] .. "\t" .. l.expressions[i]
    end
    return table.concat(out, "\n") .. "\n"
end
local function copy(l)
    local c = { ids = {}, priorities = {}, expressions = {} }
    for i = 1, #l.ids do
        c.ids[i], c.priorities[i], c.expressions[i] = l.ids[i], l.priorities[i], l.expressions[i]
    end
    return c
end
local base = { ids = ids, priorities = prios, expressions = exprs }
-- The pushes, each from `base`: k routes with a new expression that reaches the same requests.
local function changed(k, tag)
    local l = copy(base)
    for j = 1, k do
        local i = (j * 7919) % n + 1
        l.expressions[i] = "(" .. l.expressions[i] .. ") && http.method != \"" .. tag .. "\""
    end
    return l
end
local function renamed()
    local l = copy(base)
    for i = 1, n do
        l.ids[i] = "b" .. l.ids[i]:sub(2)
    end
    return l
end

local function settle(gw)
    repeat
        ffi.C.poll(nil, 0, 5)
    until gw.router:sync_state() == "idle"
    -- The builder's copy: given a moment to be brought up to date.
    ffi.C.poll(nil, 0, math.max(50, n / 500))
end

local function median(t)
    table.sort(t)
    return t[math.floor((#t + 1) / 2)]
end

local cases = {
    { "same list, new version", function() return base end },
    { "1 route changed", function(r) return changed(1, "X" .. r) end },
    { "1% changed", function(r) return changed(math.floor(n / 100), "X" .. r) end },
    { "10% changed", function(r) return changed(math.floor(n / 10), "X" .. r) end },
    { "every id new", function(r) return r % 2 == 1 and renamed() or base end },
}

print(string.format("%d routes, median of %d rounds (ms)", n, rounds))
print("| push | before: r:sync | after, table: total / longest step / swap+plan | after, string: total / swap+plan |")
print("|---|---:|---:|---:|")
local sync_gw = assert(gateway.new({ updates = "sync" }))
local gw = assert(gateway.new())
local sgw = assert(gateway.new())
local v = 0
-- The bench's own garbage (copies of the list) is collected before each timed push: what is
-- timed is the gateway's work, not a sweep of the bench's tables.
local function push_sync(list)
    v = v + 1
    collectgarbage()
    local t0 = now_ms()
    assert(sync_gw:update(v, list))
    return now_ms() - t0
end
local function push_async(g, list)
    v = v + 1
    collectgarbage()
    local t0 = now_ms()
    assert(g:update(v, list))
    local handed = now_ms() - t0
    while not g.router:sync_ready() do
        ffi.C.poll(nil, 0, 1)
    end
    local ok, rep = g:wait(v)
    assert(ok, rep)
    local w = rep.worker
    return handed + w.apply_ms, w.longest_ms or handed, w.apply_ms
end
-- The first table, everywhere.
push_sync(base); push_async(gw, base); push_async(sgw, tsv(base))
settle(gw); settle(sgw)
for _, case in ipairs(cases) do
    local b, tt, tl, ta, st, sa = {}, {}, {}, {}, {}, {}
    for r = 1, rounds do
        local list = case[2](r)
        local text = tsv(list)
        b[r] = push_sync(list)
        push_sync(base)
        tt[r], tl[r], ta[r] = push_async(gw, list)
        settle(gw)
        push_async(gw, base)
        settle(gw)
        st[r], _, sa[r] = push_async(sgw, text)
        settle(sgw)
        push_async(sgw, tsv(base))
        settle(sgw)
        collectgarbage()
    end
    print(string.format("| %s | %.1f | %.2f / %.2f / %.2f | %.3f / %.3f |", case[1], median(b),
        median(tt), median(tl), median(ta), median(st), median(sa)))
end
