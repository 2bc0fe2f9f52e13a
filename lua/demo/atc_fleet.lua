-- The gateway of `scripts/demo --fleet`: every node of the fleet runs resty.router.gateway with
-- `share` (one table per node) fed by resty.router.etcd (one watcher per node).
--
--   lua_shared_dict atc_share 1m;
--   init_worker_by_lua_block { require("atc_fleet").init("node1", { "http://127.0.0.1:2379" }, "/atc/routes/") }
--   content_by_lua_block     { require("atc_fleet").route() }     -- location /
--   content_by_lua_block     { require("atc_fleet").stats() }     -- /fleet/stats
--   content_by_lua_block     { require("atc_fleet").metrics() }   -- /metrics (Prometheus)
--
-- route() answers 200 with the headers X-Route-Id, X-Route-Path, X-Route-Version (the etcd
-- revision in force) and X-Node (node name and worker pid), and a line saying the same; or 404
-- (no route) or 400 (a request the router cannot read) with X-Route-Version and X-Node.
-- stats() answers one line for the worker that took the connection: gw:stats().etcd.

local gateway = require("resty.router.gateway")
local etcd = require("resty.router.etcd")

local ngx = ngx
local tostring = tostring

local _M = {}

local GW
local NODE = "?"

function _M.init(node, endpoints, prefix)
    NODE = node
    local err
    GW, err = gateway.new({ share = "atc_share" })
    if not GW then
        ngx.log(ngx.ERR, "atc_fleet: ", err)
        return
    end
    local w
    w, err = etcd.watch(GW, { endpoints = endpoints, prefix = prefix })
    if not w then
        ngx.log(ngx.ERR, "atc_fleet: ", err)
    end
end

local function who()
    return NODE .. " pid " .. ngx.worker.pid()
end

function _M.route()
    local uuid, matched = GW:route()
    local version = tostring(GW:version())
    ngx.header["X-Route-Version"] = version
    ngx.header["X-Node"] = who()
    if not uuid then
        local status = matched and 400 or 404
        ngx.status = status
        ngx.say(who(), " revision ", version, ": ", matched and ("bad request: " .. matched)
            or "no route")
        return ngx.exit(status)
    end
    ngx.header["X-Route-Id"] = uuid
    ngx.header["X-Route-Path"] = matched or ""
    ngx.say(who(), " revision ", version, ": route ", uuid)
end

local function b(v)
    return v and "1" or "0"
end

function _M.stats()
    local s = assert(GW:stats())
    local e = s.etcd or {}
    local last = e.last_apply_seconds
    ngx.say(who(), ": revision ", tostring(e.revision), " watching ", b(e.watching),
        " connected ", b(e.connected), " routes ", s.routes, " events_applied ",
        tostring(e.events_applied), " events_refused ", tostring(e.events_refused), " loads ",
        tostring(e.loads), " reconnects ", tostring(e.reconnects), " last_apply_ms ",
        last and string.format("%.1f", last * 1000) or "-")
end

function _M.metrics()
    local text, err = GW:metrics_text({ worker = ngx.worker.id() })
    if not text then
        ngx.status = 500
        ngx.say("metrics: ", err)
        return ngx.exit(500)
    end
    ngx.header.content_type = gateway.METRICS_CONTENT_TYPE
    ngx.print(text)
end

return _M
