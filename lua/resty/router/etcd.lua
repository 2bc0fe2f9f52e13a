-- resty.router.etcd: keeps a gateway (resty.router.gateway) at the routes an etcd v3 cluster
-- holds under a prefix, and follows their changes.
--
--   -- init_worker_by_lua*
--   gw = assert(require("resty.router.gateway").new({ share = "atc_share" }))  -- share optional
--   assert(require("resty.router.etcd").watch(gw, {
--       endpoints = { "http://127.0.0.1:2379" }, prefix = "/atc/routes/" }))
--
-- One key per route, `<prefix><route id>`, whose value is {"priority": N, "expression": "..."}
-- (resty.router.etcd.routes). The gateway's version is the etcd revision it applied.
--
-- What a watcher does, from a timer (cosockets): reads the whole range (in pages, at one
-- revision R) and applies it as a whole list, version R; then watches from R + 1 and applies
-- each watch response as one list of changes, versioned by its last event's revision (the
-- responses that arrived while the previous change was being applied: one list together). A
-- compaction (or a watch response too large to read) makes it read the whole range again; a
-- lost connection makes it reconnect (the next endpoint, with a backoff) and resume from the
-- revision applied + 1. Docs: docs/gateway.md, "Running a fleet from etcd".
--
-- Invariants:
-- * Every revision is applied once and in order: the watch resumes at the revision the table
--   in force holds, plus one, and a response is applied (and waited for) before the next is
--   read, alone or with the responses already there behind it, in their order. A change
--   applied twice (after a failure that left it unknown whether it applied) is harmless:
--   upserting the same route and removing an absent id change nothing.
-- * Nothing a key holds stops a revision: a bad value is logged (key and reason), counted, and
--   its id left out of the table; the revision's other changes apply (apply_valid).
-- * Nothing etcd sends raises out of the timer or grows without bound (resty.router.etcd.client
--   bounds every read); an error in the loop is logged and the loop starts again after the
--   backoff. While etcd cannot be reached the table in force keeps routing.
-- * With `share`, one worker of the node watches (it holds "atc:etcd:watcher" in the dict,
--   renewed every few seconds, and is thereby the node's builder); the others follow the
--   revision it publishes ("atc:etcd:revision") by mapping the images it builds. Without it,
--   every worker watches on its own connection.

local client = require("resty.router.etcd.client")
local routes = require("resty.router.etcd.routes")
local json = require("resty.router.json")

local type, tostring, tonumber, ipairs, pcall, next, setmetatable, concat, max =
    type, tostring, tonumber, ipairs, pcall, next, setmetatable, table.concat, math.max

local _M = {}
_M._VERSION = "0.2.0"

-- The dict keys (in the gateway's share dict).
local WATCHER_KEY, REVISION_KEY = "atc:etcd:watcher", "atc:etcd:revision"
-- Seconds a watcher's claim lives unless renewed (renewed every third of it).
_M.CLAIM_TTL = 10
-- A list of changes that changes nothing: what a worker that follows asks its gateway for (the
-- table itself comes from the watcher's image).
local FOLLOW = { remove = {} }

local watcher = {}
watcher.__index = watcher

-- Read at each use: the module loads outside nginx too (lua/t/installed.lua).
local ngx = setmetatable({}, { __index = function(_, k) return rawget(_G, "ngx")[k] end })

local function log(level, ...)
    ngx.log(ngx[level], "resty.router.etcd: ", ...)
end

local function now()
    ngx.update_time()
    return ngx.now()
end

local function b64(s)
    return ngx.encode_base64(s)
end
local function unb64(s)
    return ngx.decode_base64(s)
end

-- The options of watch(), checked, with their defaults; nil and an error for a bad one.
local function options(opts)
    if type(opts) ~= "table" then
        return nil, "options must be a table"
    end
    local o = {
        prefix = opts.prefix,
        endpoints = opts.endpoints,
        user = opts.user, password = opts.password,
        ssl_verify = opts.ssl_verify ~= false,
        timeout = opts.timeout or 5,
        page_size = opts.page_size or 1000,
        max_value_bytes = opts.max_value_bytes or routes.MAX_VALUE_BYTES,
        max_response_bytes = opts.max_response_bytes or 8 * 1024 * 1024,
        backoff_min = opts.backoff_min or 0.1,
        backoff_max = opts.backoff_max or 5,
        watch_quiet = opts.watch_quiet or 700,
        apply_timeout = opts.apply_timeout or 60,
        follow_interval = opts.follow_interval or 0.05,
    }
    if type(o.prefix) ~= "string" or o.prefix == "" then
        return nil, "prefix must be a non-empty string"
    end
    if type(o.endpoints) ~= "table" or #o.endpoints == 0 then
        return nil, "endpoints must be a non-empty array of URLs"
    end
    for _, url in ipairs(o.endpoints) do
        local ok, err = client.parse_endpoint(url)
        if not ok then
            return nil, err
        end
    end
    if (o.user == nil) ~= (o.password == nil) then
        return nil, "user and password go together"
    end
    if o.user ~= nil and (type(o.user) ~= "string" or type(o.password) ~= "string") then
        return nil, "user and password must be strings"
    end
    for _, k in ipairs({ "timeout", "page_size", "max_value_bytes", "max_response_bytes",
        "backoff_min", "backoff_max", "watch_quiet", "apply_timeout", "follow_interval" }) do
        if type(o[k]) ~= "number" or o[k] <= 0 then
            return nil, k .. " must be a positive number"
        end
    end
    return o
end

-- Whether this worker is (now) the node's watcher: always without share; with it, when it
-- holds the claim or takes a free one.
local function claim(w)
    local dict = w.dict
    if not dict then
        return true
    end
    local me = ngx.worker.pid()
    local cur = dict:get(WATCHER_KEY)
    if cur == me then
        dict:set(WATCHER_KEY, me, _M.CLAIM_TTL)
        return true
    end
    if cur == nil then
        return (dict:add(WATCHER_KEY, me, _M.CLAIM_TTL))
    end
    return false
end

local function stopping(w)
    return w.stopped or ngx.worker.exiting()
end

-- Logs and counts the refused values `refused` ({ key =, reason = }) of revision `version`.
local function refuse(w, version, refused)
    for _, r in ipairs(refused) do
        w.events_refused = w.events_refused + 1
        log("ERR", "key ", r.key, " at revision ", tostring(version), " left out: ", r.reason)
    end
end

-- Applies `list` (a whole list, or a list of changes when `changes`) as `version` and waits
-- until it is in force: true, or nil and why. Keeps `held` (id -> expression of the routes
-- the table holds) and the counts.
local function apply(w, version, list, changes, arrived)
    local gw = w.gw
    local ok, status = gw:update(version, list, "apply_valid")
    if not ok then
        return nil, "revision " .. tostring(version) .. " not applied: " .. tostring(status)
    end
    local report
    ok, report = gw:wait(version, w.opts.apply_timeout)
    if not ok then
        return nil, "revision " .. tostring(version) .. " not applied: " .. tostring(report)
    end
    if type(report) ~= "table" then
        local job = gw.latest and gw.latest[version]
        report = job and job.report
    end
    local upsert = changes and list.upsert or list
    local bad = {}
    if report and report.errors then
        local refused = {}
        for _, e in ipairs(report.errors) do
            local id = e.id or (e.index and upsert.ids[e.index])
            if id and not e.remove then
                bad[id] = true
                refused[#refused + 1] = { key = w.opts.prefix .. id, reason = e.message }
            end
        end
        refuse(w, version, refused)
    end
    if not changes then
        w.held = {}
    else
        for _, id in ipairs(list.remove) do
            w.held[id] = nil
        end
    end
    for i, id in ipairs(upsert.ids) do
        if not bad[id] then
            w.held[id] = upsert.expressions[i]
        end
    end
    w.revision = version
    local took = now() - arrived
    w.last_apply_seconds = took
    w.max_apply_seconds = max(w.max_apply_seconds or 0, took)
    if w.dict then
        w.dict:set(REVISION_KEY, version)
    end
    return true
end

-- The body of a range request for the keys from `from` to the prefix's end, at `revision`
-- (nil: the current one).
local function range_body(w, from, revision)
    local parts = {
        '{"key":"', b64(from), '","range_end":"', b64(w.range_end), '","limit":',
        tostring(w.page), }
    if revision then
        parts[#parts + 1] = ',"revision":' .. tostring(revision)
    end
    parts[#parts + 1] = "}"
    return concat(parts)
end

-- A decoded JSON answer, or nil and why (the text cut to 200 bytes).
local function decode(text, what)
    local doc, err = json.decode(text)
    if type(doc) ~= "table" then
        return nil, what .. ": not a JSON object (" .. tostring(err) .. "): " .. text:sub(1, 200)
    end
    return doc
end

-- Reads every key under the prefix at one revision, in pages, and applies it as a whole list:
-- true, or nil and why.
local function load(w, conn)
    local ids, prios, exprs, refused = {}, {}, {}, {}
    local opts = w.opts
    -- Validated here only when the table holds routes: apply_valid would keep a held route
    -- whose new value is invalid, where the value means that there is no route.
    local dopts = { prefix = opts.prefix, max_value_bytes = opts.max_value_bytes,
        schema = next(w.held) and w.gw.schema or nil }
    local from, revision, arrived = opts.prefix, nil, nil
    w.page = w.page or opts.page_size
    while true do
        local res, err = conn:call("/v3/kv/range", range_body(w, from, revision),
            opts.max_response_bytes)
        if not res then
            if err and err:find("over", 1, true) and w.page > 1 then
                -- A page too large to read: smaller pages.
                w.page = math.floor(w.page / 2)
                return nil, "range read: " .. err .. " (pages of " .. w.page .. " keys next)"
            end
            return nil, "range read: " .. tostring(err)
        end
        arrived = now()
        local doc
        doc, err = decode(res.body, "range read")
        if not doc then
            return nil, err
        end
        if res.status ~= 200 then
            return nil, "range read: HTTP " .. res.status .. ": " .. res.body:sub(1, 200)
        end
        local header = type(doc.header) == "table" and doc.header or {}
        revision = revision or tonumber(header.revision)
        if not revision then
            return nil, "range read: no revision in the answer"
        end
        local kvs = type(doc.kvs) == "table" and doc.kvs or {}
        local last
        for _, kv in ipairs(kvs) do
            local key = type(kv) == "table" and type(kv.key) == "string" and unb64(kv.key)
            if key then
                last = key
                local value = type(kv.value) == "string" and unb64(kv.value) or ""
                local route, why = routes.decode(key, value, dopts)
                if route then
                    local n = #ids + 1
                    ids[n], prios[n], exprs[n] = route.id, route.priority, route.expression
                else
                    refused[#refused + 1] = { key = key, reason = why }
                end
            end
        end
        if not (doc.more == true and last) then
            break
        end
        from = last .. "\0"
    end
    refuse(w, revision, refused)
    w.loads = w.loads + 1
    local ok, err = apply(w, revision, { ids = ids, priorities = prios, expressions = exprs },
        false, arrived)
    if not ok then
        return nil, err
    end
    w.events_applied = w.events_applied + #ids
    w.need_load = false
    log("INFO", "loaded ", #ids, " routes at revision ", tostring(revision), " (", #refused,
        " left out)")
    return true
end

-- The revision of a watch response's last event.
local function last_revision(events)
    local rev
    for _, ev in ipairs(events) do
        local r = type(ev) == "table" and type(ev.kv) == "table" and tonumber(ev.kv.mod_revision)
        if r and (rev == nil or r > rev) then
            rev = r
        end
    end
    return rev
end

-- What watch response `line` says: its events (an empty table for none: the watch created, a
-- progress notification), or nil and why the watch ends (need_load set when the whole range
-- must be read again).
local function response(w, conn, line)
    local doc, err = decode(line, "watch")
    if not doc then
        w.need_load = true
        return nil, err
    end
    if doc.error ~= nil then
        local e = doc.error
        return nil, "watch: etcd says " .. (type(e) == "table" and tostring(e.message)
            or tostring(e))
    end
    local res = type(doc.result) == "table" and doc.result or {}
    local compacted = tonumber(res.compact_revision)
    if (compacted and compacted > 0) or res.canceled then
        w.need_load = true
        return nil, "watch canceled (compacted at revision " .. tostring(compacted)
            .. ", " .. tostring(res.cancel_reason) .. "): reading the whole range again"
    end
    if res.created then
        w.connected = true
        w.backoff = nil
        log("INFO", "watching ", w.opts.prefix, " on ", conn.url, " from revision ",
            tostring(w.revision + 1))
    end
    return type(res.events) == "table" and res.events or {}
end

-- Why a read of the watch stream failed, setting need_load when the response was too large
-- to read (the same revision would be too large again: the range is read in pages instead).
local function read_failed(w, err)
    if err and err:find("max_response_bytes", 1, true) then
        w.need_load = true
    end
    return "watch: " .. tostring(err)
end

-- Applies the events of watch responses (in revision order) as one change: true, or nil and
-- why (need_load set: it is unknown whether it applied).
local function apply_events(w, events, arrived)
    local version = last_revision(events)
    if not (version and version > w.revision) then
        return true
    end
    local opts = w.opts
    local changes, _, refused = routes.changes(events, { prefix = opts.prefix,
        max_value_bytes = opts.max_value_bytes, schema = w.gw.schema }, unb64)
    refuse(w, version, refused)
    local ok, err = apply(w, version, changes, true, arrived)
    if not ok then
        w.need_load = true
        return nil, err
    end
    w.events_applied = w.events_applied + #events - #refused
    w.changes = w.changes + 1
    return true
end

-- Watches from the revision applied + 1 and applies what it hears: returns (nil and why) when
-- the watch ends: a lost connection, a compaction (then need_load), this worker no longer the
-- watcher, or the worker exiting.
--
-- The responses that arrived while a change was being applied are applied together, as one
-- change: a watcher behind a burst of puts pays for one build of their sum, not one per
-- response, so how far behind it falls is bounded by one build, not by the burst's length.
local function follow_watch(w, conn)
    local opts = w.opts
    local body = '{"create_request":{"key":"' .. b64(opts.prefix) .. '","range_end":"'
        .. b64(w.range_end) .. '","start_revision":' .. tostring(w.revision + 1)
        .. ',"progress_notify":true}}'
    local ok, err = conn:open_stream("/v3/watch", body)
    if not ok then
        return nil, "watch: " .. tostring(err)
    end
    local heard = now()
    local function idle()
        -- A read timed out (every `timeout` s): keep waiting, unless the worker exits, another
        -- worker watches now, or nothing (not even a progress notification) came for too long.
        return not stopping(w) and claim(w) and now() - heard < opts.watch_quiet
    end
    while true do
        local line
        line, err = conn:line(opts.max_response_bytes, idle)
        if not line then
            return nil, read_failed(w, err)
        end
        local arrived = now()
        heard = arrived
        local events, why = response(w, conn, line)
        if not events then
            return nil, why
        end
        if #events > 0 then
            w.responses = w.responses + 1
        end
        -- What else is already there joins this change, up to about max_response_bytes.
        local bytes, ended = #line, nil
        while #events > 0 and bytes < opts.max_response_bytes do
            local more
            more, err = conn:ready_line(opts.max_response_bytes, 1)
            if more == false then
                break
            end
            if not more then
                ended = read_failed(w, err)
                break
            end
            bytes = bytes + #more
            heard = now()
            local evs
            evs, why = response(w, conn, more)
            if not evs then
                ended = why
                break
            end
            if #evs > 0 then
                w.responses = w.responses + 1
            end
            for _, ev in ipairs(evs) do
                events[#events + 1] = ev
            end
        end
        if #events > 0 then
            ok, err = apply_events(w, events, arrived)
            if not ok then
                -- Unknown whether it applied: start again from a whole list.
                return nil, err
            end
        end
        if ended then
            return nil, ended
        end
        if stopping(w) or not claim(w) then
            return nil, "watch ended: " .. (stopping(w) and "the worker exits"
                or "another worker watches")
        end
    end
end

-- `s` as a JSON string.
local function json_string(s)
    return '"' .. s:gsub('[%c"\\]', function(c) return ("\\u%04x"):format(c:byte()) end) .. '"'
end

-- Authenticates with user and password at `url`: the token, or nil and why.
local function authenticate(w, url)
    local opts = w.opts
    local conn, err = client.connect(url, opts)
    if not conn then
        return nil, err
    end
    local res
    res, err = conn:call("/v3/auth/authenticate", '{"name":' .. json_string(opts.user)
        .. ',"password":' .. json_string(opts.password) .. '}', 64 * 1024)
    conn:close()
    if not res then
        return nil, "authenticate: " .. tostring(err)
    end
    local doc = json.decode(res.body)
    if res.status ~= 200 or type(doc) ~= "table" or type(doc.token) ~= "string" then
        return nil, "authenticate: HTTP " .. res.status .. ": " .. res.body:sub(1, 200)
    end
    return doc.token
end

-- One session with the current endpoint: authenticate (with user), load when needed, watch.
-- Returns nil and why it ended.
local function session(w)
    local opts = w.opts
    local url = opts.endpoints[w.endpoint]
    local copts = { timeout = opts.timeout, ssl_verify = opts.ssl_verify }
    if opts.user then
        local token, err = authenticate(w, url)
        if not token then
            return nil, err
        end
        copts.token = token
    end
    if w.need_load or w.revision == nil then
        local conn, err = client.connect(url, copts)
        if not conn then
            return nil, err
        end
        local ok
        ok, err = load(w, conn)
        conn:close()
        if not ok then
            return nil, err
        end
    end
    local conn, err = client.connect(url, copts)
    if not conn then
        return nil, err
    end
    local _
    _, err = follow_watch(w, conn)
    conn:close()
    return nil, err
end

-- A worker that does not watch (share): its gateway follows the revision the watcher
-- publishes, mapping the watcher's images.
local function follow_node(w)
    local rev = w.dict:get(REVISION_KEY)
    local gw = w.gw
    if rev ~= nil and rev ~= gw:version() then
        gw:update(rev, FOLLOW)
    end
    w.revision = gw:version()
    -- Should it become the watcher, it starts from a whole list of its own.
    w.need_load = true
    w.held = {}
end

local function sleep(s)
    ngx.sleep(s)
end

-- The watcher's loop, in one timer, until the worker exits or stop() is called.
local function run(premature, w)
    if premature then
        return
    end
    while not stopping(w) do
        if not claim(w) then
            w.watching, w.connected = false, false
            follow_node(w)
            sleep(w.opts.follow_interval)
        else
            if not w.watching then
                w.watching = true
                if w.dict then
                    log("INFO", "this worker watches etcd for the node")
                end
            end
            local ok, _, why = pcall(session, w)
            if not ok then
                why = "error: " .. tostring(_)
            end
            w.connected = false
            if stopping(w) then
                break
            end
            local n = #w.opts.endpoints
            w.backoff = math.min((w.backoff or w.opts.backoff_min / 2) * 2, w.opts.backoff_max)
            log("WARN", "etcd ", w.opts.endpoints[w.endpoint], ": ", tostring(why),
                "; revision ", tostring(w.revision), " stays in force, trying ",
                w.opts.endpoints[w.endpoint % n + 1], " in ", w.backoff, " s")
            w.endpoint = w.endpoint % n + 1
            w.reconnects = w.reconnects + 1
            sleep(w.backoff)
        end
    end
    w.watching, w.connected = false, false
    if w.dict and w.dict:get(WATCHER_KEY) == ngx.worker.pid() then
        -- Another worker takes over at once (a reload's new workers, or the others).
        w.dict:delete(WATCHER_KEY)
    end
end

-- Keeps gateway `gw` at the routes under `opts.prefix` in etcd (see the module's comment).
-- Call it in init_worker_by_lua*. Options:
--   endpoints   array of "http://host:port" or "https://host:port", tried in turn (required)
--   prefix      the key prefix (required): a route is the key <prefix><uuid>
--   user, password   etcd authentication (POST /v3/auth/authenticate, then its token in the
--               Authorization header of every request); asked again on every connection
--   ssl_verify  for https endpoints: verify the certificate (default true; needs
--               lua_ssl_trusted_certificate in nginx.conf)
--   timeout     seconds for connecting, sending, and each read (default 5)
--   page_size   keys per range read (default 1000)
--   max_value_bytes    a larger value is refused as a route (default 65536)
--   max_response_bytes a larger range page or watch response is not read (default 8 MiB):
--               a range page is then read in smaller pages, a watch response by reading the
--               whole range again
--   backoff_min, backoff_max  seconds between two attempts after a failure, doubling from
--               the first to the second (defaults 0.1 and 5)
--   watch_quiet seconds without a word from a watch (etcd sends progress notifications every
--               10 minutes) after which the connection is taken for dead (default 700)
--   apply_timeout  seconds a revision may take to build before the watcher starts again
--               from a whole list (default 60)
--   follow_interval  with share, how often the other workers look for a new revision
--               (default 0.05 s)
-- Returns the watcher (w:stats(), w:stop()), or nil and an error.
function _M.watch(gw, opts)
    if type(gw) ~= "table" or type(gw.update) ~= "function" then
        return nil, "watch needs a resty.router.gateway"
    end
    local o, err = options(opts)
    if not o then
        return nil, err
    end
    local w = setmetatable({
        gw = gw, opts = o, dict = gw.share and gw.share.dict or nil,
        range_end = routes.range_end(o.prefix),
        endpoint = 1, revision = nil, need_load = true, held = {},
        connected = false, watching = false,
        events_applied = 0, events_refused = 0, loads = 0, reconnects = 0,
        responses = 0, changes = 0,
        last_apply_seconds = nil, max_apply_seconds = nil,
    }, watcher)
    local ok
    ok, err = ngx.timer.at(0, run, w)
    if not ok then
        return nil, "no timer for the watcher: " .. tostring(err)
    end
    if w.dict then
        -- The claim outlives a revision that takes long to build.
        ngx.timer.every(_M.CLAIM_TTL / 3, function(premature)
            if not premature and w.watching and not stopping(w) then
                w.dict:set(WATCHER_KEY, ngx.worker.pid(), _M.CLAIM_TTL)
            end
        end)
    end
    gw.etcd = w
    return w
end

-- The watcher's counts, for gw:stats().etcd and the metrics:
--   revision           the revision the gateway applied (nil before the first load)
--   connected          a watch is established with an endpoint
--   watching           this worker watches (with share, one worker of the node does)
--   events_applied     events (a route put or deleted) applied, whole lists' routes included
--   events_refused     values left out (not a route: logged with key and reason)
--   responses          watch responses holding events
--   changes            changes applied from the watch: the responses that arrived while one
--                      change was being applied are applied together, as one
--   loads              whole ranges read (the first load, and after each compaction)
--   reconnects         sessions that ended (a lost connection, a failure, a compaction)
--   last_apply_seconds, max_apply_seconds  from the arrival of etcd's answer to the table in
--                      force, for the last revision and the largest
function watcher:stats()
    return {
        revision = self.revision, connected = self.connected, watching = self.watching,
        events_applied = self.events_applied, events_refused = self.events_refused,
        loads = self.loads, reconnects = self.reconnects,
        responses = self.responses, changes = self.changes,
        last_apply_seconds = self.last_apply_seconds, max_apply_seconds = self.max_apply_seconds,
    }
end

-- Stops watching (at the next read timeout at the latest); the table in force stays.
function watcher:stop()
    self.stopped = true
end

return _M
