-- resty.router.gateway.share: one table per node. With gateway.new({ share = "<dict>" }), the
-- workers of a node elect one builder per version through the lua_shared_dict of that name;
-- it builds the table on its router's builder thread, which seals it in memory as an image;
-- every worker (the builder too) maps it read-only and its router routes from it
-- (resty.router.image opens it, router:attach_image swaps it in).
-- docs/gateway.md, "One table per node", has the nginx.conf a user writes.
--
-- Keys of the dict (K = "atc:" .. tostring(version)):
--   K .. ":lock"     the builder's pid, with a time to live the builder renews while it builds:
--                    a builder that dies leaves the lock to expire and the next worker to take
--                    over (update() and the poll timer try to take it)
--   K .. ":image"    the path the builder's own mapping of the image is opened by, set once it
--                    maps it
--   K .. ":refused"  why the builder refused the version (invalid routes): no one builds it
--   "atc:latest"     the last version announced
--   "atc:held:" .. W "<version> <path>": what worker W (ngx.worker.id()) routes from, and the
--                    path its mapping is opened by: where a worker that cannot reach the
--                    builder's mapping (the builder died) finds the same image
--   "atc:counts:" .. W  worker W's request counts (NODE_COUNTS), every second: the node's
--                    counts are their sum (gw:stats().node)
--   "atc:builder"    the pid of the worker that builds, renewed by it every LOCK_TTL / 3 s: the
--                    builder stays the same worker (only it holds a router's copy of the
--                    table, which its next build starts from) until it stops renewing
--
-- Invariants:
-- * A worker switches tables between two requests, in O(1): the image is mapped and checked
--   on a thread (image.open_start) and swapped in with its plan in one step, without yielding.
-- * Nothing done to an image after it was announced reaches a worker: it is sealed (no one,
--   not its owner nor root, can write, shrink or grow it), and the kernel frees it once no
--   worker holds it. No file is involved.
-- * A worker that wants a version always gets a table of it: from the builder's mapping, else
--   from another worker's, else (none reachable, or the image refused) it builds its own and
--   says so (log, own_builds in gw:stats()). A version no one holds any more because a later
--   one was announced is skipped quietly: the worker's next update asks for the later one.
-- * A replaced image is unmapped at once, on a thread (no request of this worker can still be
--   using it: route() does not yield while it executes, and results are copied into the
--   context).

local image = require("resty.router.image")
local updates = require("resty.router.gateway.updates")

local tostring, type, ipairs = tostring, type, ipairs

local _M = {}
_M._VERSION = "0.2.0"

-- Seconds a builder's lock lives unless renewed (the poll timer renews it while building).
_M.LOCK_TTL = 10
-- Seconds the dict keeps what a version came to.
local KEEP = 3600
-- Seconds a builder whose image could not be written waits before building again: the first
-- pause, doubled after each failure up to the last.
local RETRY_FIRST, RETRY_MAX = 0.5, 30

local function log(level, ...)
    local ngx = rawget(_G, "ngx")
    if ngx and ngx.log then
        ngx.log(ngx[level], ...)
    end
end

local function key(version)
    return "atc:" .. tostring(version)
end

local function pid()
    local ngx = rawget(_G, "ngx")
    return (ngx and ngx.worker and ngx.worker.pid and ngx.worker.pid()) or 0
end

local function worker_id()
    local ngx = rawget(_G, "ngx")
    return (ngx and ngx.worker and ngx.worker.id and ngx.worker.id()) or 0
end

local function worker_count()
    local ngx = rawget(_G, "ngx")
    return (ngx and ngx.worker and ngx.worker.count and ngx.worker.count()) or 1
end

-- The share settings of gateway.new's options: the state, or nil and an error. `opts.share`
-- names a lua_shared_dict.
function _M.new(opts, r)
    local name = opts.share
    if type(name) ~= "string" then
        return nil, "share must name a lua_shared_dict, got " .. type(name)
    end
    local ngx = rawget(_G, "ngx")
    local dict = ngx and ngx.shared and ngx.shared[name]
    if not dict then
        return nil, "share: no lua_shared_dict named " .. name
            .. " (declare `lua_shared_dict " .. name .. " 1m;` in the http block)"
    end
    if opts.updates == "sync" then
        return nil, "share needs the builder thread: updates = \"sync\" cannot share"
    end
    if opts.share_dir ~= nil then
        log("WARN", "resty.router.gateway: share_dir is ignored: shared tables are sealed in "
            .. "memory, no directory is used")
    end
    local ok, err = r:publish_images(nil, true)
    if not ok then
        return nil, "share: " .. tostring(err)
    end
    return {
        dict = dict,
        mapped = false,            -- the router routes from an image
        path = nil,                -- the path other workers open that image by
        opening = nil,             -- { job, version, paths, at, errs, announce }
        want = nil,                -- { version, routes, mode }: the version to reach
        building = nil,            -- the version this worker builds, if any
        own = nil,                 -- the version this worker builds for itself alone, if any
        own_builds = 0,            -- how often it did
        timer_armed = false,
    }
end

-- Starts mapping `version`'s table from the first of `paths` that opens; `announce`: the
-- builder's own image, told to the other workers once mapped here.
local function start_open(gw, version, paths, announce, at, errs)
    local sh = gw.share
    at, errs = at or 1, errs or {}
    while paths[at] do
        local job, err = image.open_start(gw.schema, paths[at])
        if job then
            sh.opening = { job = job, version = version, paths = paths, at = at, errs = errs,
                announce = announce }
            return
        end
        errs[#errs + 1] = err
        at = at + 1
    end
    sh.opening = nil
    return errs
end

-- Where `version`'s image can be opened: `first` (the builder's), then the mappings other
-- workers said they route from.
local function holders(sh, version, first)
    local paths, seen = { first }, { [first] = true }
    local me = worker_id()
    for w = 0, worker_count() - 1 do
        local held = w ~= me and sh.dict:get("atc:held:" .. w)
        local v, path
        if held then
            v, path = held:match("^(%S+) (.+)$")
        end
        if v == tostring(version) and not seen[path] then
            paths[#paths + 1], seen[path] = path, true
        end
    end
    return paths
end

-- Swaps the opened image in, with its plan, in one step.
local function switch(gw, img, opening)
    local sh = gw.share
    local path = img:share_path()
    local old, err = gw.router:attach_image(img)
    if old == nil then
        -- Not an image of this gateway's schema: never, the gateway opens them all.
        log("ERR", "resty.router.gateway: table image of version ", tostring(opening.version),
            " not routed from: ", tostring(err))
        img:free()
        return
    end
    sh.mapped, sh.path = true, path
    gw.plan = updates.plan(gw.router, gw.context, gw.extractors)
    gw.applied = opening.version
    if sh.want and sh.want.version == opening.version then
        sh.want = nil
    end
    if path then
        sh.dict:set("atc:held:" .. worker_id(), tostring(opening.version) .. " " .. path)
        if opening.announce then
            sh.dict:set(key(opening.version) .. ":image", path, KEEP)
            local latest = sh.dict:get("atc:latest")
            if type(latest) ~= "number" or latest < opening.version then
                sh.dict:set("atc:latest", opening.version)
            end
        end
    end
    if old then
        -- Unmapped on a thread: never held here.
        old:retire()
    end
end

-- This worker cannot map `version`'s shared image from any holder (`errs`): it builds the
-- version itself, unless a later version was announced since (the image was let go because
-- it was superseded: the next update asks for the later one).
local function cannot_map(gw, version, errs)
    local sh = gw.share
    local why = table.concat(errs, "; ")
    local latest = sh.dict:get("atc:latest")
    local want = sh.want
    if type(latest) == "number" and type(version) == "number" and latest > version then
        log("INFO", "resty.router.gateway: version ", tostring(version), " was superseded by ",
            tostring(latest), " before this worker mapped it (", why, ")")
        if want and want.version == version then
            sh.want = nil
        end
        return
    end
    if not want or want.version ~= version or updates.is_changes(want.routes) then
        log("ERR", "resty.router.gateway: table image of version ", tostring(version),
            " refused, ", tostring(gw.applied), " stays in force: ", why)
        gw.error = { version = version, err = why, order = math.huge }
        if want and want.version == version then
            sh.want = nil
        end
        return
    end
    sh.own_builds = sh.own_builds + 1
    log("WARN", "resty.router.gateway: table image of version ", tostring(version),
        " refused (", why, "); this worker builds its own table of it")
    sh.own = version
    local ok, _, errs2 = updates.update(gw, want.version, want.routes, want.mode)
    if not ok then
        sh.own = nil
        log("ERR", "resty.router.gateway: this worker's own build of version ",
            tostring(version), " failed: ", tostring(errs2))
    end
end

-- Ends an opening that is done: switches to its image, tries the next holder, or (none left)
-- sees to it that the worker gets a table anyway. What a switch holds the worker (the swap,
-- the plan, unmapping the old image) is kept in sh.last_switch_ms and sh.max_switch_ms
-- (gw:stats()).
local function finish_opening(gw)
    local t0 = updates.now_ms()
    local sh = gw.share
    local o = sh.opening
    sh.opening = nil
    local img, err = o.job:finish()
    if not img then
        o.errs[#o.errs + 1] = err
        local left = start_open(gw, o.version, o.paths, o.announce, o.at + 1, o.errs)
        if left then
            if o.announce then
                log("ERR", "resty.router.gateway: table image of version ", tostring(o.version),
                    " refused, ", tostring(gw.applied), " stays in force: ",
                    table.concat(left, "; "))
                gw.error = { version = o.version, err = table.concat(left, "; "),
                    order = math.huge }
            else
                cannot_map(gw, o.version, left)
            end
        end
        return
    end
    switch(gw, img, o)
    local took = updates.now_ms() - t0
    sh.last_switch_ms = took
    sh.max_switch_ms = math.max(sh.max_switch_ms or 0, took)
end

-- One step towards the wanted version: its image opened, or this worker made its builder.
-- Returns update()'s answer for it. Never yields.
function _M.step(gw)
    local sh = gw.share
    if sh.opening and sh.opening.job:ready() then
        finish_opening(gw)
    end
    local want = sh.want
    if not want then
        return true, "applied"
    end
    local k = key(want.version)
    local dict = sh.dict
    if sh.own == want.version then
        return true, "building"
    end
    if sh.building == want.version then
        dict:set(k .. ":lock", pid(), _M.LOCK_TTL)
        return true, "building"
    end
    local refused = dict:get(k .. ":refused")
    if refused then
        sh.want = nil
        return nil, refused
    end
    local path = dict:get(k .. ":image")
    if path then
        if not sh.opening then
            local left = start_open(gw, want.version, holders(sh, want.version, path), false)
            if left then
                cannot_map(gw, want.version, left)
            end
        end
        return true, "building"
    end
    local builder = dict:get("atc:builder")
    if builder ~= nil and builder ~= pid() then
        -- Another worker builds for the node (and is alive: it renews the key).
        return true, "building"
    end
    if sh.retry_at and updates.now_ms() < sh.retry_at then
        -- This worker's last image could not be written: it waits before building again.
        return true, "building"
    end
    if updates.is_changes(want.routes) and sh.built ~= nil and sh.built == want.version then
        -- These changes were built here and their image is being mapped (installed(), then
        -- switch()): a wait() stepping in that window must not refuse them.
        return true, "building"
    end
    if updates.is_changes(want.routes) and not (sh.built ~= nil and sh.built == gw.applied) then
        -- Changes apply to the table this worker's builder holds: only the worker that built
        -- the version in force has it.
        sh.want = nil
        return nil, "with share, a list of changes is applied by the node's builder, the "
            .. "worker that built the version in force (" .. tostring(gw.applied)
            .. "): hand this worker the whole list"
    end
    if dict:add(k .. ":lock", pid(), _M.LOCK_TTL) then
        sh.building = want.version
        _M.heartbeat(gw)
        local ok, status, errs = updates.update(gw, want.version, want.routes, want.mode)
        if not ok then
            sh.building = nil
        end
        return ok, status, errs
    end
    return true, "building"
end

-- The counts of a worker's stats summed into the node's, in the order a report holds them.
local NODE_COUNTS = { "routed", "not_found", "bad_requests", "own_builds" }

-- Writes this worker's counts (`s`, gw:stats()'s, or its router's read now) into the dict.
local function report(gw, s)
    if not s then
        s = gw.router:stats()
        if not s then
            return
        end
        s.own_builds = gw.share.own_builds
    end
    local parts = {}
    for i, k in ipairs(NODE_COUNTS) do
        parts[i] = tostring(s[k] or 0)
    end
    gw.share.dict:set("atc:counts:" .. worker_id(), table.concat(parts, " "))
end

-- Reports this worker's counts every second, for the node's (gw:stats().node).
function _M.report_counts(gw)
    local ngx = rawget(_G, "ngx")
    if not (ngx and ngx.timer and ngx.timer.every) then
        return
    end
    local ok, err = ngx.timer.every(1, function(premature)
        if not premature then
            report(gw)
        end
    end)
    if not ok then
        log("WARN", "resty.router.gateway: no timer to report the worker's counts: ", err)
    end
end

-- The node's counts: every worker's last report summed (this worker's `s` reported first), and
-- how many workers reported.
function _M.node_counts(gw, s)
    report(gw, s)
    local out = { workers = 0 }
    for _, k in ipairs(NODE_COUNTS) do
        out[k] = 0
    end
    local dict = gw.share.dict
    for w = 0, worker_count() - 1 do
        local v = dict:get("atc:counts:" .. w)
        if type(v) == "string" then
            out.workers = out.workers + 1
            local i = 1
            for n in v:gmatch("%S+") do
                local k = NODE_COUNTS[i]
                if k then
                    out[k] = out[k] + (tonumber(n) or 0)
                end
                i = i + 1
            end
        end
    end
    return out
end

-- Makes this worker the node's builder, renewing the claim while the worker lives.
function _M.heartbeat(gw)
    local sh = gw.share
    sh.dict:set("atc:builder", pid(), _M.LOCK_TTL)
    if sh.heart then
        return
    end
    local ngx = rawget(_G, "ngx")
    local ok = ngx.timer.every(_M.LOCK_TTL / 3, function(premature)
        if not premature then
            sh.dict:set("atc:builder", pid(), _M.LOCK_TTL)
        end
    end)
    sh.heart = ok and true or false
end

local function on_timer(premature, gw)
    local sh = gw.share
    sh.timer_armed = false
    if premature then
        return
    end
    updates.poll(gw)
    _M.step(gw)
    if sh.want or sh.opening then
        _M.arm(gw)
    end
end

-- Arms the timer that moves towards the wanted version while it is not reached.
function _M.arm(gw)
    local sh = gw.share
    if sh.timer_armed then
        return
    end
    local ngx = rawget(_G, "ngx")
    local ok, err = ngx.timer.at(gw.poll_interval, on_timer, gw)
    if ok then
        sh.timer_armed = true
    else
        log("WARN", "resty.router.gateway: no timer to follow the shared table: ", err)
    end
end

-- gw:update() in share mode (see resty.router.gateway).
function _M.update(gw, version, routes, mode)
    local sh = gw.share
    if version == gw.applied and sh.mapped and not sh.want then
        return true, "applied"
    end
    sh.want = { version = version, routes = routes, mode = mode }
    local ok, status, errs = _M.step(gw)
    if ok then
        _M.arm(gw)
    end
    return ok, status, errs
end

-- Called by updates.lua when this worker's router installed `version`: its builder thread
-- sealed the image; map it here first, then the others are told (switch()), unless the
-- worker built it for itself alone.
function _M.installed(gw, version)
    local sh = gw.share
    local own = sh.own == version
    if own then
        sh.own = nil
    end
    if sh.building == version then
        sh.building = nil
    end
    local path, err = gw.router:published()
    if not path then
        -- Sealing the image failed (out of memory): built again after a pause that doubles
        -- with each failure, so a lasting failure neither burns the builder's CPU nor floods
        -- the log, and a passing one heals by itself.
        local pause = math.min((sh.retry_pause or RETRY_FIRST / 2) * 2, RETRY_MAX)
        sh.retry_pause = pause
        sh.retry_at = updates.now_ms() + pause * 1000
        err = "version " .. tostring(version) .. " built but not shared (built again in "
            .. pause .. " s): " .. tostring(err)
        log("ERR", "resty.router.gateway: ", err)
        gw.error = { version = version, err = err, order = math.huge }
        if not own then
            sh.dict:delete(key(version) .. ":lock")
        end
        return
    end
    sh.retry_pause, sh.retry_at = nil, nil
    if not own then
        sh.built = version
    end
    local left = start_open(gw, version, { path }, not own)
    if left then
        log("ERR", "resty.router.gateway: the image this worker built of version ",
            tostring(version), " cannot be mapped: ", table.concat(left, "; "))
    end
    _M.arm(gw)
end

-- Called by updates.lua when this worker's router refused `version`: no worker builds it.
function _M.refused(gw, version, err)
    local sh = gw.share
    if sh.building == version then
        sh.building = nil
    end
    sh.dict:set(key(version) .. ":refused", tostring(err), KEEP)
end

-- gw:wait() in share mode: until `version` is routed from here, refused, or `timeout`.
function _M.wait(gw, version, timeout)
    timeout = timeout or 60
    local ngx = rawget(_G, "ngx")
    local waited, step = 0, 0.001
    while true do
        updates.poll(gw)
        local ok, err = _M.step(gw)
        if gw.applied == version and gw.share.mapped then
            return true
        end
        if not ok then
            return nil, err
        end
        if waited >= timeout then
            return nil, "timeout: version " .. tostring(version) .. " is not shared yet"
        end
        if ngx and ngx.sleep and pcall(ngx.sleep, step) then
            waited = waited + step
        else
            updates.sleep_ms(step * 1000)
            waited = waited + step
        end
        step = math.min(step * 2, 0.05)
    end
end

return _M
