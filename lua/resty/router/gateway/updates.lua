-- resty.router.gateway.updates: versioned updates of a gateway's router, and the routing plan
-- each update derives from the routes: which fields a request is read for, from where, and in
-- how many phases.
--
-- Update model (docs/gateway.md, "The update model"). update() hands the list to the router's
-- builder thread (r:sync_start for a whole list, r:update_start for a list of changes) and
-- returns; the built table is swapped in later, between two requests, by poll(): from route()
-- (one atomic load per request says whether an outcome waits), from a timer the gateway arms
-- while builds are in flight, or from wait(). Where no request can be stalled and no timer runs
-- (nginx's init and init_worker phases, plain Lua without ngx) update() applies the list before
-- it returns, as r:sync does.
--
-- A whole list given as Lua tables is compared with the last one handed over
-- (resty.router.gateway.diff) and, when that can be done, only what changed crosses the FFI, as
-- a list of changes; a list in text crosses as one string, read on the builder thread.
--
-- Each update that reaches the builder is a job with a number of its own (the builder's
-- version: the caller's versions may be any Lua value compared with ==), a status ("queued",
-- "pending", "applied", "refused", "superseded"), and its place in the order lists were handed
-- over. The builder gives each job exactly one outcome, in that order.
--
-- Invariants:
-- * A plan is made whole from the router's field list and key fields right after the table is
--   swapped in, then installed with the version in the same step; from the swap to that step
--   nothing yields. An OpenResty worker runs one Lua thread at a time, so every request is
--   routed either by the old table and plan or by the new ones, never by a mix.
-- * A plan is never changed once installed (route() reads it without copying).
-- * Every field in use has exactly one step, in `steps`, and in exactly one of `key_steps`
--   (the fields of the router's indexes) and `lazy_steps` (read only when the request's
--   candidate routes need them).
-- * Lists reach the builder in the order of the update() calls that made them (a whole list
--   whose loader or hand-over yields gives way to a later call that got its list in first; a
--   list of changes never gives way: it waits behind a whole list being handed over or waiting
--   for the builder, and goes after it), and the builder applies them in that order: an older
--   version is never applied over a newer one, and no change is lost.
-- * `gw.sent` (the diff's copy of the last whole list handed over) describes what the builder
--   builds on, or is nil: it is dropped when a job is refused, superseded, applied with invalid
--   routes left out, or when anything but a whole list in Lua tables is handed over.

local bit = require("bit")
local ffi = require("ffi")
local router = require("resty.router.router")
local request = require("resty.router.gateway.request")
local diff = require("resty.router.gateway.diff")

local type, tostring, tonumber, ipairs, pairs, pcall, next =
    type, tostring, tonumber, ipairs, pairs, pcall, next
local band, bor = bit.band, bit.bor

local _M = {}
_M._VERSION = "0.2.0"

-- The plan of a router without routes: nothing to read.
_M.EMPTY = { fields = {}, steps = {}, key_steps = {}, lazy_steps = {}, one_pass = true }

-- The plan for the current routes of `r`, reading values for context `c`.
--
-- Two-phase routing (route()): the key steps are read for every request, then
-- r:needed_fields() says which lazy steps the routes left possible by those values use, and
-- only those are read. When every request needs every field anyway (a table no index holds),
-- the plan reads everything in one pass. Only then: even when the lazy fields are cheap nginx
-- variables, asking pays, because needed_fields also loads the candidates' programs, loads
-- that overlap with the second phase's reading where a one-pass execute would wait for them.
function _M.plan(r, c, extractors)
    local fields = r:get_fields() or {}
    local klo, khi = r:key_fields()
    local steps, key_steps, lazy_steps = {}, {}, {}
    for i, field in ipairs(fields) do
        local kind, arg, present = request.source(field, extractors)
        -- Every field in use is in the schema: the router validated it.
        local id, ty = c:field_id(field)
        local lo, hi = router.field_mask(id)
        local step = {
            field = field, kind = kind, arg = arg, present = present, id = id, type = ty,
            lo = lo, hi = hi,
        }
        steps[i] = step
        if bor(band(klo, lo), band(khi, hi)) ~= 0 then
            key_steps[#key_steps + 1] = step
        else
            lazy_steps[#lazy_steps + 1] = step
        end
    end
    -- What every request needs: the needed fields of a context without values.
    c:reset()
    local nlo, nhi = r:needed_fields(c)
    local one_pass = true
    for _, step in ipairs(lazy_steps) do
        if bor(band(nlo, step.lo), band(nhi, step.hi)) == 0 then
            one_pass = false
            break
        end
    end
    return {
        fields = fields, steps = steps, key_steps = key_steps, lazy_steps = lazy_steps,
        one_pass = one_pass,
    }
end

local ngx_phase_sleeps = {
    rewrite = true, server_rewrite = true, access = true, content = true, timer = true,
    ssl_cert = true, ssl_session_fetch = true, ssl_client_hello = true,
}

-- The nginx API, when there is one (plain LuaJIT has none; the tests' mock has part of it).
local function ngx_api()
    return rawget(_G, "ngx")
end

local function phase()
    local ngx = ngx_api()
    if ngx and ngx.get_phase then
        return ngx.get_phase()
    end
    return nil
end

-- Whether update() hands its list over and returns (true), or applies it before returning.
local function async(gw)
    if gw.updates == "sync" then
        return false
    end
    local ngx = ngx_api()
    if not (ngx and ngx.timer and ngx.timer.at) then
        return false
    end
    if gw.updates == "async" then
        return true
    end
    local p = phase()
    return p ~= "init" and p ~= "init_worker"
end

-- A blocking sleep, for waits where nothing else can run (init, init_worker, plain Lua).
local sleep_ms
do
    if not pcall(function() return ffi.C.poll end) then
        pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")
    end
    sleep_ms = function(ms)
        ffi.C.poll(nil, 0, ms)
    end
end

-- A monotonic clock in milliseconds (waits, intervals).
-- Declared as the C library declares it (each part on its own: another module may have
-- declared either, the same way).
pcall(ffi.cdef, "struct timespec { long tv_sec; long tv_nsec; };")
pcall(ffi.cdef, "int clock_gettime(int clk_id, struct timespec *tp);")
local ts = ffi.new("struct timespec")
local function now_ms()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1e3 + tonumber(ts.tv_nsec) / 1e6
end
_M.now_ms = now_ms
_M.sleep_ms = sleep_ms
-- The worker thread's CPU time in milliseconds: what a push holds the worker is measured in it
-- (report.worker), so that a wait for the CPU (another process, the builder) is not counted as
-- the push's.
local function cpu_ms()
    ffi.C.clock_gettime(3, ts) -- CLOCK_THREAD_CPUTIME_ID
    return tonumber(ts.tv_sec) * 1e3 + tonumber(ts.tv_nsec) / 1e6
end
_M.cpu_ms = cpu_ms

local function log(level, ...)
    local ngx = ngx_api()
    if ngx and ngx.log and ngx[level] then
        ngx.log(ngx[level], ...)
    end
end

-- How many finished jobs wait() can still tell about.
local KEEP_RESULTS = 64

local function remember(gw, job)
    local done = gw.done
    done[#done + 1] = job
    if #done > KEEP_RESULTS then
        local old = table.remove(done, 1)
        if gw.latest[old.version] == old then
            gw.latest[old.version] = nil
        end
    end
end

local function set_error(gw, version, err, errs)
    gw.error = { version = version, err = err, errs = errs, order = gw.order }
end

-- Ends `job` with `status` (and what came with it).
local function finish(gw, job, status, report, err, errs)
    if status == "refused" and gw.share then
        require("resty.router.gateway.share").refused(gw, job.version, err)
    end
    job.status, job.report, job.err, job.errs = status, report, err, errs
    job.routes = nil
    if job.seq then
        gw.jobs[job.seq] = nil
    end
    if job.uses_sent and status ~= "applied" then
        -- The builder's table is not what `sent` says: the next whole list goes whole.
        gw.sent = nil
    end
    remember(gw, job)
end

local function new_job(gw, version, mode)
    gw.seq = gw.seq + 1
    gw.order = gw.order + 1
    local job = { seq = gw.seq, version = version, mode = mode, order = gw.order, status = "pending" }
    gw.jobs[job.seq] = job
    gw.newest = job
    gw.latest[version] = job
    return job
end

-- Installs the table the router now holds as `job`'s version, with its plan, in one step.
-- Sharing (resty.router.gateway.share), the router's table only builds the image every worker
-- routes from: the share module maps it and switches.
local function installed(gw, job, report)
    job.applied_at = now_ms()
    if not gw.share then
        gw.plan = _M.plan(gw.router, gw.context, gw.extractors)
        gw.applied = job.version
    end
    if job.uses_sent and report.errors and #report.errors > 0 then
        -- Invalid routes were left out or kept at their version: the table differs from `sent`.
        gw.sent = nil
    end
    finish(gw, job, "applied", report)
    if gw.error and gw.error.order < job.order then
        gw.error = nil
    end
    if gw.share then
        require("resty.router.gateway.share").installed(gw, job.version)
    end
end

-- Takes one outcome of the builder, if one waits: true when one was taken. Never yields.
local function take(gw)
    local r = gw.router
    local t0 = cpu_ms()
    local v, a, b, c, superseded = r:sync_apply()
    if v == false then
        return false
    end
    local seq = v or c
    if seq == nil then
        -- A failed call (not an outcome): nothing was taken.
        log("ERR", "resty.router.gateway: applying a build failed: ", a)
        return false
    end
    local job = gw.jobs[seq]
    if not job then
        -- Not started by this gateway (someone called gw.router:sync_start): adopt it.
        job = new_job(gw, "(router version " .. tostring(seq) .. ")", gw.mode)
    end
    if v then
        installed(gw, job, a)
        job.apply_ms = cpu_ms() - t0
        a.worker = { handover_ms = job.handover_ms, longest_ms = job.longest_ms,
            apply_ms = job.apply_ms }
        a.waited_ms = job.applied_at - (job.handed_at or job.applied_at)
    elseif superseded then
        finish(gw, job, "superseded", nil, a)
    else
        finish(gw, job, "refused", nil, a, b)
        set_error(gw, job.version, a, b)
        log("ERR", "resty.router.gateway: version ", tostring(job.version), " refused, ",
            tostring(gw.applied), " stays in force: ", a)
    end
    return true
end

-- Applies the outcomes of the background builds that wait (one per version handed over, in
-- order): true when one was taken (applied, refused or superseded). Never yields.
function _M.poll(gw)
    local r = gw.router
    local any = false
    while r:sync_ready() and take(gw) do
        any = true
    end
    return any
end

local poll = _M.poll

local function on_timer(premature, gw)
    gw.timer_armed = false
    if premature then
        return
    end
    poll(gw)
    _M.flush(gw)
    if next(gw.jobs) ~= nil or gw.next ~= nil or #gw.deltas > 0 or gw.handing then
        _M.arm_timer(gw)
    end
end

-- Arms the timer that applies outcomes while builds are in flight (route() applies them too,
-- but a worker without traffic still gets the new table).
function _M.arm_timer(gw)
    local ngx = ngx_api()
    if gw.timer_armed or not (ngx and ngx.timer and ngx.timer.at) then
        -- Without timers (plain Lua), update() waits for its outcome itself.
        return
    end
    local ok, err = ngx.timer.at(gw.poll_interval, on_timer, gw)
    if ok then
        gw.timer_armed = true
    else
        log("WARN", "resty.router.gateway: no timer to apply builds (route() still applies ",
            "them): ", err)
    end
end

-- Whether `routes` is a list of changes ({ upsert =, remove = }) rather than a whole list.
local function is_changes(routes)
    return type(routes) == "table" and (routes.upsert ~= nil or routes.remove ~= nil)
end
_M.is_changes = is_changes

-- What update() answers when `version` needs no new list: true and "applied" or "building",
-- nil and the refusal, or nothing (a list is to be handed over). `loader`: the list comes from
-- a loader, which is not called for the version being built or refused last (a poller asking
-- every second); a list given as such is handed over again.
local function settled(gw, version, mode, loader)
    local newest = gw.newest
    local pending = newest ~= nil and (newest.status == "pending" or newest.status == "queued")
    if version == gw.applied and not pending then
        return true, "applied"
    end
    if loader and newest ~= nil and newest.version == version and newest.mode == mode then
        if pending then
            return true, "building"
        end
        if newest.status == "refused" then
            -- A refused version stays refused until the version changes: not built again.
            return nil, newest.err, newest.errs
        end
    end
    return nil
end

local too_soon, defer, handover, queue_changes

-- update() where it must not return before the list is applied: the builder and a blocking
-- wait, so that the builder keeps its copy of the table and the next background sync costs
-- what changed (its report counts against the table in force, and apply-valid keeps a known
-- route whose new version is invalid). r:sync (or r:update) with updates = "sync" (the builder
-- is never used then) and in nginx's init phase: a thread started in the master would not
-- survive the fork into the workers, and neither would its copy.
local function update_now(gw, version, routes, mode, ticket)
    local r = gw.router
    if type(routes) == "table" and next(gw.jobs) == nil
        and (gw.updates == "sync" or phase() == "init") then
        local job = new_job(gw, version, mode)
        local report, err, errs
        if is_changes(routes) then
            report, err, errs = r:update(routes, mode)
            gw.sent = nil
        else
            report, err, errs = r:sync(routes, mode)
            if report then
                local ids, prios, exprs, n = router.list_form(routes)
                gw.sent = #report.errors == 0 and diff.copy(routes, ids, prios, exprs, n) or nil
            end
        end
        if not report then
            finish(gw, job, "refused", nil, err, errs)
            set_error(gw, version, err, errs)
            return nil, err, errs
        end
        installed(gw, job, report)
        return true, "applied", report
    end
    -- Waited for here: no timer to arm.
    local rec = { version = version, routes = routes, mode = mode, ticket = ticket,
        changes = is_changes(routes), blocking = true }
    local ok, err = handover(gw, rec)
    if not ok then
        return nil, err
    end
    local job = rec
    while job.status == "pending" do
        if not poll(gw) then
            sleep_ms(1)
        end
    end
    if job.status == "applied" then
        return true, "applied", job.report
    end
    return nil, job.err, job.errs
end

-- Brings gateway `gw` to `routes` as `version` (see resty.router.gateway's update() for the
-- arguments and results).
function _M.update(gw, version, routes, mode)
    if version == nil then
        return nil, "version must not be nil"
    end
    mode = mode or gw.mode
    poll(gw)
    local loader = type(routes) == "function"
    local ok, a, b = settled(gw, version, mode, loader)
    if ok ~= nil or a ~= nil then
        return ok, a, b
    end
    gw.tickets = gw.tickets + 1
    local ticket = gw.tickets
    if type(routes) == "function" then
        -- A loader that raises is a loader that failed: nil and why, like one that returns
        -- nil and an error (pcall lets it yield, in LuaJIT and OpenResty).
        local done, list, err = pcall(routes)
        if not done then
            err = "the route loader failed: raised " .. tostring(list)
            set_error(gw, version, err)
            return nil, err
        end
        if type(list) ~= "table" and type(list) ~= "string" then
            err = "the route loader failed: " .. tostring(err)
            set_error(gw, version, err)
            return nil, err
        end
        -- The loader may have yielded: another update may have settled this version, or
        -- handed a later list over, meanwhile.
        poll(gw)
        ok, a, b = settled(gw, version, mode, true)
        if ok ~= nil or a ~= nil then
            return ok, a, b
        end
        if not is_changes(list)
            and (gw.started > ticket or (gw.next and gw.next.ticket > ticket)) then
            return nil, "version " .. tostring(version) .. " was superseded by version "
                .. tostring(gw.newest.version) .. " while its loader ran"
        end
        routes = list
    elseif type(routes) ~= "table" and type(routes) ~= "string" then
        return nil, "routes must be a table, a string or a function, got " .. type(routes)
    end
    if not async(gw) then
        gw.started = ticket
        return update_now(gw, version, routes, mode, ticket)
    end
    if is_changes(routes) then
        return queue_changes(gw, { version = version, routes = routes, mode = mode,
            ticket = ticket, changes = true })
    end
    if too_soon(gw) then
        return defer(gw, version, routes, mode, ticket)
    end
    -- The builder is free: this list goes now, and the ones still waiting never will (they are
    -- older).
    local why = "version %s was superseded by version " .. tostring(version)
        .. " before it was handed over"
    local waiting = gw.next
    if waiting then
        gw.next = nil
        finish(gw, waiting, "superseded", nil, why:format(tostring(waiting.version)))
    end
    for _, d in ipairs(gw.deltas) do
        finish(gw, d, "superseded", nil, why:format(tostring(d.version)))
    end
    gw.deltas = {}
    return handover(gw, { version = version, routes = routes, mode = mode, ticket = ticket })
end

-- How long a hand-over may go without coming back from a yield before it counts as abandoned
-- (its request was ended while it yielded): later lists stop waiting for it.
local HANDING_STALE_MS = 1000

local function handing(gw)
    return gw.handing ~= nil and now_ms() - gw.handing_at < HANDING_STALE_MS
end

-- Whether a whole list must wait: the builder has one, another is being handed over (in
-- chunks, yielding: starting a newer one would make it give way, and at 50 pushes a second no
-- hand-over of a large table would ever end), or the last hand-over is not `update_interval`
-- old.
function too_soon(gw)
    if next(gw.jobs) ~= nil or handing(gw) then
        return true
    end
    return gw.update_interval > 0 and now_ms() - gw.last_handover < gw.update_interval * 1000
end

local function queued(gw, rec)
    rec.status = "queued"
    gw.newest = rec
    gw.latest[rec.version] = rec
    _M.arm_timer(gw)
    return true, "building"
end

-- A whole list that waits for the builds in flight (or for update_interval): only the newest
-- one waiting is handed over, by the timer (or wait()) once the builder is free; the lists of
-- changes waiting for an older one go with it (superseded). An earlier call still in its loader
-- gives way to it; a hand-over in progress does not.
function defer(gw, version, routes, mode, ticket)
    local prev = gw.next
    local why = "version %s was superseded by version " .. tostring(version)
        .. " before it was handed over"
    if prev then
        finish(gw, prev, "superseded", nil, why:format(tostring(prev.version)))
    end
    for _, d in ipairs(gw.deltas) do
        finish(gw, d, "superseded", nil, why:format(tostring(d.version)))
    end
    gw.deltas = {}
    local rec = { version = version, routes = routes, mode = mode, ticket = ticket }
    gw.next = rec
    return queued(gw, rec)
end

-- A list of changes: handed over now, unless a whole list is being handed over or waits to be
-- (it goes after that one, in order).
function queue_changes(gw, rec)
    if gw.next ~= nil or handing(gw) or #gw.deltas > 0 then
        gw.deltas[#gw.deltas + 1] = rec
        return queued(gw, rec)
    end
    return handover(gw, rec)
end

-- A hand-over gives way to the requests waiting once it has held the worker gw.slice_ms (of
-- its CPU time, option update_slice): chunks and diff steps call the yield more often, and it
-- returns at once until then. How it gives way: a sleep of one millisecond, not ngx.sleep(0). In stock nginx (without
-- OpenResty's delayed-events patch) ngx.sleep(0) is a timer due now, which nginx runs again
-- in the same pass over the expired timers, before it looks at a socket: the whole hand-over
-- would hold the worker as if it never yielded. A timer due in 1 ms sends nginx back to
-- epoll first, in every build of nginx.
local GIVE_WAY_SLEEP = 0.001

-- Hands `rec`'s list (rec.version, rec.routes, rec.mode, rec.ticket; rec.changes for a list of
-- changes) to the builder; `rec` becomes its job. true, "building"; or nil and why (superseded
-- while it yielded, or the start failed: then kept by last_error()).
function handover(gw, rec)
    local version, ticket = rec.version, rec.ticket
    local r = gw.router
    -- What the hand-over holds the worker: its time less the yields, and the longest stretch
    -- without a yield.
    local held, longest, since = 0, 0, cpu_ms()
    local opts = { chunk = gw.chunk }
    local ngx = ngx_api()
    local whole = not rec.changes
    if ngx_phase_sleeps[phase()] and ngx.sleep then
        opts.yield = function()
            local t = cpu_ms()
            if t - since < gw.slice_ms then
                return nil
            end
            held, longest = held + (t - since), math.max(longest, t - since)
            ngx.sleep(GIVE_WAY_SLEEP)
            since = cpu_ms()
            gw.handing_at = now_ms()
            if whole and gw.started > ticket then
                return "version " .. tostring(version) .. " was superseded by version "
                    .. tostring(gw.newest.version) .. " while its list was handed over"
            end
        end
    end
    -- The job's number is the one the builder gets; it is taken now, but the job counts as
    -- started only once the start returned (its place in `order`).
    local seq = gw.seq + 1
    gw.seq = seq
    if opts.yield and whole then
        gw.handing, gw.handing_at = ticket, now_ms()
    end
    local started, err
    local routes = rec.routes
    local sent = nil
    if rec.changes then
        gw.sent = nil
        started, err = r:update_start(seq, routes, rec.mode, opts)
        if started then
            local _, _, _, nu = router.list_form(routes.upsert or {})
            gw.crossed = gw.crossed + (nu or 0) + #(routes.remove or {})
        end
    elseif type(routes) == "string" then
        gw.sent = nil
        started, err = r:sync_start(seq, routes, rec.mode, opts)
    else
        local ids, prios, exprs, n = router.list_form(routes)
        local changes, at, stop = nil, nil, nil
        if n and gw.sent then
            changes, at, stop = diff.of(gw.sent, routes, ids, prios, exprs, n, opts.yield)
            if not changes then
                gw.sent = nil
            end
        end
        if stop ~= nil then
            started, err = nil, stop
        elseif changes then
            -- Only what changed crosses, named by its place in the caller's list.
            opts.at = function(i) return at[i] end
            opts.of = { routes = routes, ids = ids }
            started, err = r:update_start(seq, changes, rec.mode, opts)
            sent = gw.sent
            gw.crossed = gw.crossed + #at + #changes.remove
        else
            if n then
                sent, stop = diff.copy(routes, ids, prios, exprs, n, opts.yield)
            end
            if stop ~= nil then
                started, err = nil, stop
            else
                started, err = r:sync_start(seq, routes, rec.mode, opts)
                gw.crossed = gw.crossed + (n or 0)
            end
        end
        rec.uses_sent = sent ~= nil
    end
    if gw.handing == ticket then
        gw.handing = nil
    end
    if not started then
        gw.sent = nil
        if gw.started <= ticket then
            set_error(gw, version, err)
        end
        return nil, err
    end
    if rec.uses_sent then
        gw.sent = sent
    end
    -- From the last yield of the hand-over to here nothing yielded.
    if whole then
        gw.started = math.max(gw.started, ticket)
    end
    gw.last_handover = now_ms()
    gw.order = gw.order + 1
    rec.seq, rec.order, rec.status, rec.routes = seq, gw.order, "pending", nil
    rec.handed_at = rec.handed_at or gw.last_handover
    gw.jobs[seq] = rec
    gw.newest = rec
    gw.latest[version] = rec
    if not rec.blocking then
        _M.arm_timer(gw)
    end
    local t = cpu_ms()
    rec.handover_ms, rec.longest_ms = held + (t - since), math.max(longest, t - since)
    return true, "building"
end

-- Hands what waits over: the whole list waiting, when the builder is free (from the timer, or
-- wait()), then the lists of changes behind it.
function _M.flush(gw)
    local rec = gw.next
    if rec ~= nil then
        if too_soon(gw) then
            return
        end
        gw.next = nil
        if gw.started > rec.ticket then
            finish(gw, rec, "superseded", nil, "version " .. tostring(rec.version)
                .. " was superseded before it was handed over")
        else
            local ok, err = handover(gw, rec)
            if not ok then
                if gw.started > rec.ticket then
                    finish(gw, rec, "superseded", nil, err)
                else
                    finish(gw, rec, "refused", nil, err)
                end
            end
        end
    end
    if gw.next ~= nil or handing(gw) then
        return
    end
    while #gw.deltas > 0 do
        local d = table.remove(gw.deltas, 1)
        local ok, err = handover(gw, d)
        if not ok then
            finish(gw, d, "refused", nil, err)
        end
    end
end

-- Waits until `version` is applied or refused (see resty.router.gateway's wait()).
function _M.wait(gw, version, timeout)
    timeout = timeout or 60
    local ngx = ngx_api()
    local p = phase()
    local can_sleep = ngx and ngx.sleep and ngx_phase_sleeps[p]
    local may_block = p == nil or p == "init" or p == "init_worker"
    local waited, step = 0, 0.001
    while true do
        poll(gw)
        if can_sleep or may_block then
            _M.flush(gw)
        end
        local job = gw.latest[version]
        if job == nil then
            if gw.applied == version then
                return true
            end
            return nil, "version " .. tostring(version) .. " was not started"
        end
        if job.status == "applied" then
            return true, job.report
        end
        if job.status ~= "pending" and job.status ~= "queued" then
            return nil, job.err, job.errs
        end
        if waited >= timeout then
            return nil, "timeout: version " .. tostring(version) .. " is still being built"
        end
        if can_sleep then
            ngx.sleep(step)
        elseif may_block then
            sleep_ms(step * 1000)
        else
            return nil, "cannot wait for version " .. tostring(version) .. " in the "
                .. tostring(p) .. " phase (it is still being built)"
        end
        waited = waited + step
        step = math.min(step * 2, 0.05)
    end
end

return _M
