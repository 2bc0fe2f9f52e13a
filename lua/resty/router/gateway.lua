-- resty.router.gateway: a router for an OpenResty gateway, kept at the version of the route list
-- its owner last applied, and routing nginx requests.
--
--   local gateway = require("resty.router.gateway")
--   local gw = assert(gateway.new())                  -- the standard gateway schema
--   assert(gw:update(version, routes))                -- e.g. in init_worker, and on changes
--   assert(gw:wait(version))                          -- where the caller must know it applied
--   ...
--   local uuid, matched_path, captures = gw:route()   -- in access_by_lua*, per request
--   -- captures that cost nothing until read: gateway.new({ captures = "lazy" }), then
--   -- captures.id reads one on demand (until the next route(); see route())
--   -- opt-in debug header: gateway.new({ explain_header = "X-Atc-Explain" }), then
--   -- gateway.explain_summary(ngx.ctx.atc_explanation) for a response header
--   -- tighter limits for routes tenants write (SECURITY.md):
--   -- gateway.new({ limits = { max_predicates = 64, max_regexes = 8 } })
--   local text = gw:metrics_text({ worker = ngx.worker.id() })   -- Prometheus, for /metrics
--
-- The jobs are in modules of their own: resty.router.gateway.updates (versioned updates and the
-- routing plan), resty.router.gateway.request (reading request values) over
-- resty.router.gateway.sources (the raw request data, from nginx or the plain ngx API),
-- resty.router.gateway.metrics (stats in Prometheus' text format); this module routes, through
-- the binding's objects (gw.schema, gw.router, gw.context).
--
-- Invariants:
-- * `self.plan` is the plan of the routes in `self.router` (updates.lua installs both in one
--   step, without yielding), so route() reads exactly the fields the current routes use.
-- * route() reads in two phases only what the plan marks lazy, and then only the fields
--   r:needed_fields() names: its answer is the one reading every field gives (a route that is
--   not a candidate has a key condition that none of the request's values meets, and every
--   candidate gets all its fields). lua/t/gateway_test.lua and the nginx test compare the two
--   on every request they send.
-- * Between reading values into `self.batch` and the add_values() that copies them, nothing
--   else reads a request (the batch's pointers stay valid; see gateway.request).
-- * `self.routed_for` is the identity (sources.identity) of the request that called route()
--   last, or NOBODY once request_values() has reset the context: the captures that gw:capture(),
--   gw:captures() and the lazy captures object read are those in the context, which only that
--   request's route() left there.

local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")
local updates = require("resty.router.gateway.updates")
local request = require("resty.router.gateway.request")
local sources = require("resty.router.gateway.sources")
local explain = require("resty.router.gateway.explain")
local metrics = require("resty.router.gateway.metrics")
local share = require("resty.router.gateway.share")
local cdefs = require("resty.router.cdefs")
local ffi = require("ffi")

local lib = cdefs.lib
local arm, message, errbuf, errlen = cdefs.arm, cdefs.message, cdefs.errbuf, cdefs.errlen

local ipairs, setmetatable, tostring = ipairs, setmetatable, tostring

local read, ALL = request.read, request.ALL
local poll = updates.poll
local identity = sources.identity

-- routed_for after request_values(): no request's captures are in the context.
local NOBODY = {}

local _M = {}
_M._VERSION = "0.2.0"
local mt = { __index = _M }

-- The fields a gateway routes on: those of Kong's HTTP router, as the core library defines
-- them (atc_kong_field), as { name, type } pairs.
_M.SCHEMA = {}
do
    local name, len, ty = ffi.new("const char *[1]"), ffi.new("size_t[1]"), ffi.new("int32_t[1]")
    local i = 0
    while lib.atc_kong_field(lib.ATC_SUBSYSTEM_HTTP, i, name, len, ty) == 1 do
        i = i + 1
        _M.SCHEMA[i] = { ffi.string(name[0], len[0]), cdefs.TYPE_NAMES[ty[0]] }
    end
end

-- Raises unless the current request is the one that called route() last (`level`: error()'s).
local function check_reader(self, level)
    if self.routed_for ~= identity() then
        error("resty.router.gateway: captures read after the gateway routed another request "
            .. "(they are valid until the next route() of this gateway: read them before "
            .. "anything that yields, or copy them with gw:captures())", level + 1)
    end
end

-- The object route() returns as captures in "lazy" mode: one per gateway, reused for every
-- request (no allocation per request). Indexing it reads the capture from the context through
-- the C ABI each time (context:get_capture), so it never holds pointers that a later request
-- could leave dangling; check_reader makes a read by another request than the one routed last
-- an error instead of that request's values. Writing to it raises: a key set on the shared
-- object would shadow the captures of every later request.
local function lazy_captures(gw)
    local context = gw.context
    return setmetatable({}, {
        __index = function(_, key)
            check_reader(gw, 2)
            return context:get_capture(key)
        end,
        __newindex = function()
            error("resty.router.gateway: lazy captures are read-only (copy them with "
                .. "gw:captures())", 2)
        end,
        __metatable = "resty.router.gateway lazy captures",
    })
end

-- Options:
--   schema      array of { name, type } (default gateway.SCHEMA)
--   limits      { [name] = positive integer }: the schema's limits (schema:set_limits; names
--               and defaults in SECURITY.md), set before the router is made, so that every
--               update and request is checked against them; an update with a route over one
--               is refused with the error naming it. Default: the library's defaults
--   extractors  { [field] = function(field) return value or array of values end }: sources for
--               fields the defaults do not cover, or overrides (they must not raise)
--   mode        default sync mode of update(): "all_or_nothing" (default) or "apply_valid"
--   max_headers request headers read (default 100); of a request with more, the first ones
--               are used and a warning is logged, as Kong does
--   max_args    query arguments read (default 100); likewise
--   path        "kong" (default: the request URI without its arguments, normalised as Kong's
--               router does) or "nginx" ($uri: nginx's decoded and normalised path)
--   host        "kong" (default: the Host header without its port, as sent) or "nginx"
--               ($host: lowercase, the request line's host first)
--   dst_port_from_host  net.dst.port is the Host header's port when it has one, as Kong does
--               (default false: the port the connection reached, which a client cannot choose)
--   read_all_fields  read every field in use for every request: a malformed value in any of
--               them rejects the request (see route())
--   explain_header  name of a request header (e.g. "X-Atc-Explain") that makes route() also
--               explain the request, into ngx.ctx.atc_explanation (see route()); off by
--               default. A debugging aid: it reveals the route table and costs a full explain
--   explain_allow  who may ask: an array of client addresses ($remote_addr), default
--               { "127.0.0.1", "::1" }, or a function() returning true for a request that may
--   updates     how update() applies a list: "auto" (default: handed to the router's builder
--               thread, applied later between two requests; applied before update() returns in
--               nginx's init and init_worker phases and outside nginx), "async" (always handed
--               over when nginx timers exist, init_worker included) or "sync" (always applied
--               before update() returns: the worker is held for the build)
--   update_chunk  routes of a table handed to the builder per step (default 1000)
--   update_slice  seconds of the worker's CPU time a hand-over runs before it gives way to the
--               requests waiting (default 0.001), where the phase lets it yield: between two
--               steps, once it has run this long since the last time, it sleeps 1 ms
--               (ngx.sleep(0.001): in stock nginx ngx.sleep(0) does not reach the event loop)
--   poll_interval  seconds between two checks of the timer that applies finished builds
--               (default 0.01; route() applies them too)
--   update_interval  at least this many seconds between two hand-overs (default 0). While a
--               build is in flight (or within the interval), a newer list waits, and only the
--               newest one waiting is handed over: frequent pushes cost one hand-over per build
--   builder_priority  "idle" (default: the builder thread runs under SCHED_IDLE and takes only
--               CPU no request wants) or "normal" (the worker's policy, builder_nice below
--               it), for the builder threads started from now on, in the whole process
--               (atc_builder_schedule; docs/gateway.md, "Who builds, and at what priority")
--   builder_boost_after  seconds a version may wait for an idle builder before a thread at the
--               worker's priority takes its build over (default 3; 0: never), likewise
--   builder_nice  how many nice levels (0 to 19) below the worker the builder threads that run
--               at normal priority (the boosted one; every one with builder_priority =
--               "normal") started from now on run, in the whole process (atc_builder_priority;
--               default 19, the lowest; 0: the worker's own)
--   builder_threads  how many threads (1 to 64, default 1) a fresh build (a first load, a
--               list most of which is new) may use: the builder thread and helpers it starts
--               for the build, at its priority; the same table, sooner where CPUs are idle.
--               For the builders started from now on, in the whole process
--               (atc_builder_threads; docs/gateway.md, "Who builds, and at what priority")
--   request_source  how requests are read (resty.router.gateway.sources): "auto" (default:
--               lua-nginx-module's FFI functions when sources.native is available, else the
--               plain ngx API), "plain" (always the plain ngx API), or "native" (an error
--               when it is not available, with the reason)
--   share       the name of a lua_shared_dict: one table per node (resty.router.gateway.share).
--               One worker per version builds the table and seals it in memory as an image;
--               every worker maps it read-only and routes from it. Needs the builder thread
--               (not updates = "sync"); route() reads every field in use in one pass, and
--               explain, matches and the router's stats see the worker's own router, not the
--               shared table. Without it, every worker builds and holds its own table
--   share_dir   ignored (logged): shared tables use no directory
--   captures    what route() returns as captures: "table" (default: a new table of strings per
--               request, as Kong's get_result) or "lazy" (one read-only object of the gateway
--               that reads a capture from the context when it is indexed: a request whose
--               captures are not read makes no Lua object for them; see route())
-- Returns the gateway, or nil and an error.
function _M.new(opts)
    opts = opts or {}
    local s = schema.new()
    for _, f in ipairs(opts.schema or _M.SCHEMA) do
        local ok, err = s:add_field(f[1], f[2])
        if not ok then
            return nil, err
        end
    end
    -- Before router.new and context.new: the schema accepts limits only until it is in use.
    if opts.limits ~= nil then
        local ok, err = s:set_limits(opts.limits)
        if not ok then
            return nil, err
        end
    end
    local r, err = router.new(s)
    if not r then
        return nil, err
    end
    local c
    c, err = context.new(s)
    if not c then
        return nil, err
    end
    local explaining
    explaining, err = explain.settings(opts)
    if err then
        return nil, err
    end
    local updates_mode = opts.updates or "auto"
    if updates_mode ~= "auto" and updates_mode ~= "async" and updates_mode ~= "sync" then
        return nil, "updates must be \"auto\", \"async\" or \"sync\", got "
            .. tostring(updates_mode)
    end
    if opts.builder_priority ~= nil or opts.builder_boost_after ~= nil then
        local p, after = opts.builder_priority or "idle", opts.builder_boost_after or 3
        if p ~= "idle" and p ~= "normal" then
            return nil, "builder_priority must be \"idle\" or \"normal\", got " .. tostring(p)
        end
        if type(after) ~= "number" or after < 0 or after > 3600 then
            return nil, "builder_boost_after must be a number of seconds from 0 to 3600, got "
                .. tostring(after)
        end
        -- Process-wide: the builder threads started from now on.
        lib.atc_builder_schedule(p == "idle" and lib.ATC_BUILDER_IDLE or lib.ATC_BUILDER_NORMAL,
            math.floor(after * 1000 + 0.5))
    end
    if opts.builder_nice ~= nil then
        local n = opts.builder_nice
        if type(n) ~= "number" or n ~= math.floor(n) or n < 0 or n > 19 then
            return nil, "builder_nice must be an integer from 0 to 19, got " .. tostring(n)
        end
        -- Process-wide: the builder threads started from now on.
        lib.atc_builder_priority(n)
    end
    if opts.builder_threads ~= nil then
        local n = opts.builder_threads
        if type(n) ~= "number" or n ~= math.floor(n) or n < 1 or n > lib.ATC_BUILDER_THREADS_MAX
        then
            return nil, "builder_threads must be an integer from 1 to "
                .. tostring(lib.ATC_BUILDER_THREADS_MAX) .. ", got " .. tostring(n)
        end
        -- Process-wide: the builders started from now on.
        lib.atc_builder_threads(n)
    end
    local path, host = opts.path or "kong", opts.host or "kong"
    if path ~= "kong" and path ~= "nginx" then
        return nil, "path must be \"kong\" or \"nginx\", got " .. tostring(path)
    end
    if host ~= "kong" and host ~= "nginx" then
        return nil, "host must be \"kong\" or \"nginx\", got " .. tostring(host)
    end
    local captures = opts.captures or "table"
    if captures ~= "table" and captures ~= "lazy" then
        return nil, "captures must be \"table\" or \"lazy\", got " .. tostring(captures)
    end
    local want, source = opts.request_source or "auto", nil
    if want == "auto" then
        source = sources.native or sources.plain
    elseif want == "plain" then
        source = sources.plain
    elseif want == "native" then
        source = sources.native
        if not source then
            return nil, "request_source \"native\" is not available: "
                .. tostring(sources.native_off)
        end
    else
        return nil, "request_source must be \"auto\", \"plain\" or \"native\", got "
            .. tostring(want)
    end
    local gw = setmetatable({
        schema = s,
        router = r,
        context = c,
        lazy = captures == "lazy",
        routed_for = NOBODY,
        extractors = opts.extractors or {},
        mode = opts.mode or "all_or_nothing",
        max_headers = opts.max_headers or 100,
        max_args = opts.max_args or 100,
        path_var = path == "kong" and "request_uri" or "uri",
        path_flags = path == "kong" and lib.ATC_PATH_NORMALIZE or 0,
        kong_host = host == "kong",
        dst_port_from_host = opts.dst_port_from_host and true or false,
        read_all = opts.read_all_fields and true or false,
        explaining = explaining,
        source = source,
        applied = nil,
        plan = updates.EMPTY,
        batch = request.batch(),
        -- Updates (resty.router.gateway.updates).
        updates = updates_mode,
        chunk = opts.update_chunk or 1000,
        slice_ms = (opts.update_slice or 0.001) * 1000,
        poll_interval = opts.poll_interval or 0.01,
        update_interval = opts.update_interval or 0,
        seq = 0, order = 0, tickets = 0, started = 0, last_handover = -math.huge, next = nil,
        deltas = {}, jobs = {}, latest = {}, done = {}, newest = nil, error = nil,
        timer_armed = false, sent = nil, crossed = 0,
    }, mt)
    if gw.lazy then
        gw.captures_object = lazy_captures(gw)
    end
    if opts.share ~= nil then
        local sh, serr = share.new(opts, r)
        if not sh then
            return nil, serr
        end
        gw.share = sh
        share.report_counts(gw)
    end
    return gw
end

-- The version last applied (nil before the first update).
function _M:version()
    return self.applied
end

-- How route() reads requests: "native" (lua-nginx-module's FFI functions) or "plain" (the
-- plain ngx API); see the request_source option.
function _M:request_source()
    return self.source == sources.native and "native" or "plain"
end

-- The names of the fields the routes use, sorted.
function _M:fields_in_use()
    return self.plan.fields
end

-- Brings the router to `routes` as `version`: an array of { id =, priority =, expression = },
-- parallel arrays { ids =, priorities =, expressions = }, a string holding a TSV or JSON route
-- list (read on the builder thread: the worker decodes nothing), or a function returning one of
-- these (or nil and an error), called only when a list is needed. `mode`: "all_or_nothing"
-- (default: the gateway's `mode` option) or "apply_valid".
--
-- The list is handed to the router's builder thread and update() returns; the new table and
-- its plan are swapped in later, between two requests (by route(), the gateway's timer, or
-- wait()). Returns:
--   true, "applied"[, report]   `version` is in force (already, or applied by this call where
--                               updates are applied at once: then the report, as r:sync's)
--   true, "building"            handed over, or waiting for the build in flight (only the
--                               newest list waiting is handed over once the builder is free),
--                               or, for a loader, already being built: wait(version) tells how
--                               it ends
--   nil, err, errs              refused where updates are applied at once, or, for a loader,
--                               this version was refused already (the loader is not called
--                               again for the version refused last, in the same mode); the
--                               loader failed (returned no
--                               list, or raised); a later update() got its list in while this
--                               one's loader or hand-over yielded (superseded); a bad argument.
--                               The applied version stays in force; gw:last_error() keeps it
-- Versions are compared with ==.
function _M:update(version, routes, mode)
    if self.share then
        return share.update(self, version, routes, mode)
    end
    return updates.update(self, version, routes, mode)
end

-- Waits until `version` is applied or refused, polling (ngx.sleep where the phase allows it;
-- a blocking wait in init, init_worker and outside nginx; elsewhere it does not wait).
-- `timeout` in seconds (default 60). Returns true and the report (nil when the version was
-- applied without this gateway building it); nil, err, errs when it was refused; nil and why
-- when it was superseded by a later version before it was applied, was never started, or is
-- still being built at the timeout.
function _M:wait(version, timeout)
    if self.share then
        return share.wait(self, version, timeout)
    end
    return updates.wait(self, version, timeout)
end

-- The version being built (handed over, not yet applied or refused), or nil.
function _M:pending()
    local newest = self.newest
    if newest and (newest.status == "pending" or newest.status == "queued") then
        return newest.version
    end
    return nil
end

-- The router's counts (r:stats(): routed, not_found, bad_requests, updates_applied,
-- updates_refused, last_update_hold_us, last_build_us, routes, broken) and the gateway's:
--   version           the version in force (nil before the first update)
--   pending           the version being built or waiting to be handed over, or nil
--   last_error, last_error_version   gw:last_error()'s err and version, or nil
--   request_source    "native" or "plain"
--   fields_in_use     how many fields the routes use
--   routes_handed_over  entries of route lists in Lua tables handed to the builder since the
--                     gateway was made (a whole list compared as its changes hands those over)
--   shared_routes, last_switch_ms, max_switch_ms   with `share`: the routes of the shared
--                     table routed from, and what switching to a new one held the worker;
--                     `routes` is then the shared table's too (`own_routes`: the worker's
--                     router's, empty but in the builder's thread), and routed / not_found
--                     count the requests routed from it
--   own_builds        with `share`: how often this worker could map no holder's image of a
--                     version (or refused it) and built its own table of it
--   node              with `share`: the node's counts, summed over its workers through the
--                     dict ({ routed, not_found, bad_requests, own_builds, workers }): each
--                     worker's as of its last report (every second, and this call's own)
--   etcd              fed by resty.router.etcd: its watcher's counts (revision, connected,
--                     watching, events_applied, events_refused, responses, changes, loads,
--                     reconnects, last_apply_seconds, max_apply_seconds)
-- Counts are the worker's own: each worker has its gateway. nil and an error only for a failed
-- call into the library.
function _M:stats()
    local s, err = self.router:stats()
    if not s then
        return nil, err
    end
    s.version = self.applied
    s.pending = self:pending()
    local e = self.error
    if e then
        s.last_error, s.last_error_version = e.err, e.version
    end
    s.request_source = self:request_source()
    s.fields_in_use = #self.plan.fields
    s.routes_handed_over = self.crossed
    local sh = self.share
    if sh then
        s.shared_routes = sh.mapped and self.router:len() or 0
        s.last_switch_ms, s.max_switch_ms = sh.last_switch_ms, sh.max_switch_ms
        s.own_builds = sh.own_builds
        -- The table requests are routed with (the worker's own router holds none).
        s.own_routes = s.routes
        s.routes = s.shared_routes
        s.node = share.node_counts(self, s)
    end
    local source = self.etcd
    if source then
        -- resty.router.etcd feeds this gateway: its counts (watcher:stats()).
        s.etcd = source:stats()
    end
    return s
end

-- gw:stats() in Prometheus' text exposition format (gateway.prometheus), `labels` ({ name =
-- value }) on every sample: serve it with Content-Type gateway.METRICS_CONTENT_TYPE.
function _M:metrics_text(labels)
    local s, err = self:stats()
    if not s then
        return nil, err
    end
    return metrics.render(s, labels)
end

-- A stats table (gw:stats(), or a router's r:stats()) in Prometheus' text format: see
-- resty.router.gateway.metrics for the metrics.
_M.prometheus = metrics.render
_M.METRICS_CONTENT_TYPE = metrics.CONTENT_TYPE

-- The last failure of an update (a refused version, a loader that failed, a start that failed)
-- since a later version was applied: err, errs, version; nil when there is none. Refusals are
-- also logged (ngx.ERR).
function _M:last_error()
    local e = self.error
    if not e then
        return nil
    end
    return e.err, e.errs, e.version
end

-- Reads the steps whose fields are in the mask (lo, hi) into the context: true, or nil and why.
local function read_into(self, src, steps, lo, hi)
    local b = self.batch
    local k, err = read(b, src, steps, lo, hi, self)
    if not k then
        return nil, err
    end
    local ok, i
    ok, err, i = self.context:add_values(b.values, k)
    if not ok then
        return nil, "field `" .. tostring(b.fields[i]) .. "`: " .. err
    end
    if b.np > 0 then
        arm()
        local rc = lib.atc_context_add_path(self.context.ptr, b.path_ptr, b.path_len,
            self.path_flags, b.paths, b.np, errbuf, errlen)
        if rc ~= 0 then
            return nil, "the path: " .. message(rc)
        end
    end
    return true
end

-- Routes the current request: uuid, matched path (the value the deciding predicates recorded for
-- http.path, if any) and captures (a table, or nil when the route captured nothing). nil when no
-- route matches; nil and the reason when the request cannot be put in the context (invalid
-- UTF-8, more values than the limit, more headers or query arguments than max_headers /
-- max_args when one of them is needed): answer it with a 400; it is counted in the router's
-- stats().bad_requests. Raises a Lua error only when the router is broken (a panic interrupted
-- an update part-way; the next update rebuilds it).
--
-- Unless `read_all_fields`, a value is checked only when it is read: a malformed one in a lazy
-- field that no candidate route of the request uses does not reject the request.
--
-- With `explain_header` set, a request that carries that header from an allowed client is also
-- explained once routed (not a request that could not be read): ngx.ctx.atc_explanation gets
-- router:explain's table, or { error = message }; gateway.explain_summary() makes a header
-- value of it.
--
-- With captures = "lazy" the captures are the gateway's one read-only object (nil, as in
-- "table" mode, when the route captured nothing): `captures.id`, `captures[1]` read that
-- capture when indexed, and a request that reads none makes no table and no string for them.
-- The object reads the request route() last routed, so it is valid until the next route() of
-- this gateway (one per worker): read it before anything that yields (a cosocket, ngx.sleep,
-- a subrequest), or copy what is needed. Indexed by the same request after it called route()
-- again, it gives the new route's captures; indexed by another request, after that request
-- was routed, it raises (never another request's values). pairs() and # do not see captures
-- (LuaJIT tables do not ask __pairs and __len): gw:captures([into]) makes the table.
function _M:route()
    -- A built table waits (one atomic load): swap it and its plan in before reading anything.
    if self.router:sync_ready() then
        poll(self)
    end
    local sh = self.share
    local r = self.router
    if sh then
        -- A shared table mapped and checked on its thread: swapped in before reading anything.
        local o = sh.opening
        if o and o.job:ready() then
            share.step(self)
        end
    end
    local c, plan, source = self.context, self.plan, self.source
    c:reset()
    -- From here the context holds this request's values and result (see check_reader).
    self.routed_for = identity()
    local ok, err
    if plan.one_pass or self.read_all then
        ok, err = read_into(self, source, plan.steps, ALL, ALL)
    else
        ok, err = read_into(self, source, plan.key_steps, ALL, ALL)
        if ok then
            local lo, hi = r:needed_fields(c)
            if lo ~= 0 or hi ~= 0 then
                ok, err = read_into(self, source, plan.lazy_steps, lo, hi)
            end
        end
    end
    if not ok then
        -- The router never sees this request: counted here, for the operator's graphs.
        self.router:count_bad_request()
        return nil, err
    end
    -- With share, from the image the router routes from, counted in its stats().
    local matched = r:execute(c)
    if self.explaining and explain.wanted(self.explaining) then
        local why, xerr = self:explain()
        ngx.ctx.atc_explanation = why or { error = xerr }
    end
    if not matched then
        return nil
    end
    if self.lazy then
        local uuid, path, n = c:get_result_lazy("http.path")
        if n > 0 then
            return uuid, path, self.captures_object
        end
        return uuid, path
    end
    return c:get_result("http.path")
end

-- The capture `key` (a group number, 0 = the whole match, or a group name) of the request
-- route() last routed: a string, or nil when its route did not capture `key` or it matched
-- nothing. In either captures mode; what indexing the lazy captures object does. Raises when
-- called by another request than the one route() last routed (in nginx: a request that
-- yielded between its route() and this call while another request was routed).
function _M:capture(key)
    check_reader(self, 2)
    return self.context:get_capture(key)
end

-- All captures of the request route() last routed, as route()'s "table" mode gives them, in
-- `into` (emptied first: a table the caller reuses) or a new table; empty when there are none.
-- The table is the caller's and keeps its strings. Raises as gw:capture() does.
function _M:captures(into)
    check_reader(self, 2)
    return self.context:get_captures(into)
end

-- Explains the request route() last routed (router:explain on the gateway's context; `opts`
-- as router:explain's: { ruled_out = true }), or nil and an error. Call it right after
-- route(), before another request is routed. With `share`, from the shared table (its
-- candidates, explained from the route texts the image carries; ruled-out routes are counted,
-- not listed).
function _M:explain(opts)
    return self.router:explain(self.context, opts)
end

-- The one-line summary of an explanation (for a response header), at most `max_len` bytes
-- (default 2048), never cutting a UTF-8 character: see resty.router.gateway.explain.
_M.explain_summary = explain.summary

-- For tests and diagnostics: the values route() would read from the current request for every
-- field in use, as "field=value" lines (fields in the plan's order, each field's values in
-- the order read), from `source`: "native" (nginx's FFI functions; nil when they are not
-- available) or "plain" (the plain ngx API). "error: " and the reason when the request cannot
-- be read. The nginx tests compare the two, and compare them with what Kong's router reads.
-- Leaves the request's values in the context, as route() does before it executes.
function _M:request_values(source)
    local src = sources.plain
    if source == "native" then
        src = sources.native
        if not src then
            return nil
        end
    end
    local c = self.context
    c:reset()
    self.routed_for = NOBODY
    local ok, err = read_into(self, src, self.plan.steps, ALL, ALL)
    if not ok then
        return "error: " .. tostring(err)
    end
    local lines = {}
    for _, step in ipairs(self.plan.steps) do
        for _, v in ipairs(assert(c:get_values(step.field))) do
            lines[#lines + 1] = step.field .. "=" .. tostring(v)
        end
    end
    return table.concat(lines, "\n")
end

return _M
