-- resty.router.gateway.share: one table per node. With gateway.new({ share = "<dict>" }), the
-- workers of a node elect one builder per version through the lua_shared_dict of that name;
-- it builds the table on its router's builder thread, which writes it as an image file; every
-- worker (the builder too) maps the file read-only and routes from it (resty.router.image).
-- docs/gateway.md, "One table per node", has the nginx.conf a user writes.
--
-- Keys of the dict (K = "atc:" .. tostring(version)):
--   K .. ":lock"     the builder's pid, with a time to live the builder renews while it builds:
--                    a builder that dies leaves the lock to expire and the next worker to take
--                    over (update() and the poll timer try to take it)
--   K .. ":image"    the image file's path, set once the builder has mapped it
--   K .. ":refused"  why the builder refused the version (invalid routes): no one builds it
--   "atc:builder"    the pid of the worker that builds, renewed by it every LOCK_TTL / 3 s: the
--                    builder stays the same worker (only it holds a router's copy of the
--                    table, which its next build starts from) until it stops renewing
--
-- Invariants:
-- * A worker switches tables between two requests, in O(1): the file is mapped and checked
--   on a thread (image.open_start) and swapped in with its plan in one step, without yielding.
--   A refused image (corrupt, foreign) leaves the table in force and is logged.
-- * A worker moves towards the version its last update() asked for (sh.want), one opening
--   at a time; the builder announces an image only once it maps it itself, so a file is
--   always held by some worker before any other can look for it (no sweep removes it in
--   between).
-- * A replaced image is unmapped at once, on a thread (no request of this worker can still be
--   using it: route() does not yield while it executes, and results are copied into the
--   context), and its file removed by the last worker to unmap it; the builder sweeps files no
--   worker maps each time it switches.

local image = require("resty.router.image")
local updates = require("resty.router.gateway.updates")

local tostring, type = tostring, type

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

-- The default image directory of dict `name`: one per user, nginx prefix and dict, in /tmp
-- (the workers' user creates it, whoever started the master: the nginx prefix belongs to
-- root when nginx starts as root with unprivileged workers). Like any directory of images it
-- must be the workers' user's alone (image_file::own_dir), so another user who made it first
-- is refused by name, never used.
function _M.default_dir(name)
    local ngx = rawget(_G, "ngx")
    local ffi = require("ffi")
    pcall(ffi.cdef, "unsigned int geteuid(void);")
    local prefix = ngx.config.prefix()
    return string.format("/tmp/atc-images-%d-%08x", tonumber(ffi.C.geteuid()),
        ngx.crc32_long(prefix .. "\0" .. name))
end

-- The share settings of gateway.new's options: the state, or nil and an error. `opts.share`
-- names a lua_shared_dict; `opts.share_dir` the directory of image files (default:
-- default_dir(name)).
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
    local dir = opts.share_dir
    if dir == nil then
        dir = _M.default_dir(name)
    end
    if type(dir) ~= "string" then
        return nil, "share_dir must be a string, got " .. type(dir)
    end
    local ok, err = r:publish_images(dir, true)
    if not ok then
        return nil, "share: " .. tostring(err)
    end
    return {
        dict = dict, dir = dir,
        image = nil, path = nil,   -- the table routed from, and its file
        opening = nil,             -- { job, version, path, announce }
        want = nil,                -- { version, routes, mode }: the version to reach
        building = nil,            -- the version this worker builds, if any
        timer_armed = false,
    }
end

-- Starts mapping `path` as `version`'s table; `announce`: the builder's own image, told to the
-- other workers once mapped here.
local function start_open(gw, version, path, announce)
    local sh = gw.share
    local job, err = image.open_start(gw.schema, path)
    if not job then
        log("ERR", "resty.router.gateway: cannot open table image ", path, ": ", err)
        return
    end
    sh.opening = { job = job, version = version, path = path, announce = announce }
end

-- Swaps the opened image in, with its plan, in one step.
local function switch(gw, img, opening)
    local sh = gw.share
    local old, old_path = sh.image, sh.path
    sh.image, sh.path = img, opening.path
    gw.plan = updates.plan(img, gw.context, gw.extractors)
    gw.applied = opening.version
    if sh.want and sh.want.version == opening.version then
        sh.want = nil
    end
    if opening.announce then
        sh.dict:set(key(opening.version) .. ":image", opening.path, KEEP)
        -- Files no worker maps (older versions, what a crash left) go. Only the builder
        -- sweeps: it alone writes images, so no file it sweeps can be one on its way to being
        -- mapped.
        image.sweep(sh.dir, opening.path:match("[^/]+$"))
    end
    if old then
        -- Unmapped (and its file removed if no worker maps it) on a thread: never held here.
        old:retire(old_path ~= opening.path and old_path or nil)
    end
end

-- Ends an opening that is done: switches to its image, or keeps the table in force. What it
-- holds the worker (the swap, the plan, unmapping the old image) is kept in sh.last_switch_ms
-- and sh.max_switch_ms (gw:stats()).
local function finish_opening(gw)
    local t0 = updates.now_ms()
    local sh = gw.share
    local o = sh.opening
    sh.opening = nil
    local img, err = o.job:finish()
    if not img then
        log("ERR", "resty.router.gateway: table image of version ", tostring(o.version),
            " refused, ", tostring(gw.applied), " stays in force: ", err)
        gw.error = { version = o.version, err = err, order = math.huge }
        if sh.want and sh.want.version == o.version then
            sh.want = nil
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
            start_open(gw, want.version, path, false)
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
    if version == gw.applied and sh.image and not sh.want then
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
-- wrote the image; map it here first, then the others are told (switch()).
function _M.installed(gw, version)
    local sh = gw.share
    if sh.building == version then
        sh.building = nil
    end
    local path, err = gw.router:published()
    if not path then
        -- Writing the image failed (a full disk, a directory made read-only): built again
        -- after a pause that doubles with each failure, so a lasting failure neither burns
        -- the builder's CPU nor floods the log, and a passing one heals by itself.
        local pause = math.min((sh.retry_pause or RETRY_FIRST / 2) * 2, RETRY_MAX)
        sh.retry_pause = pause
        sh.retry_at = updates.now_ms() + pause * 1000
        err = "version " .. tostring(version) .. " built but not shared (built again in "
            .. pause .. " s): " .. tostring(err)
        log("ERR", "resty.router.gateway: ", err)
        gw.error = { version = version, err = err, order = math.huge }
        sh.dict:delete(key(version) .. ":lock")
        return
    end
    sh.retry_pause, sh.retry_at = nil, nil
    sh.built = version
    start_open(gw, version, path, true)
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
        if gw.applied == version and gw.share.image then
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
