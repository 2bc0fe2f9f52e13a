-- The gateway of the etcd nginx test (ffi/tests/nginx_etcd.rs): resty.router.gateway in every
-- worker, fed by resty.router.etcd.
--
-- init_worker(endpoints, prefix, share, user, password) makes the gateway (with share =
-- "atc_share" when `share`) and starts the watcher (with etcd's authentication when `user`). access() routes with gw:route() and answers 200 with the
-- headers X-Route (uuid), X-Version (the revision in force) and X-Pid, or 404 with X-Version
-- and X-Pid. status() (/__etcd) answers one line: "pid <pid> version <v> watching <0|1>
-- connected <0|1> applied <n> refused <n> loads <n> reconnects <n> routes <n> last_apply <s>
-- max_apply <s> responses <n> changes <n>". metrics() (/__metrics) is gw:metrics_text().

local gateway = require("resty.router.gateway")
local etcd = require("resty.router.etcd")

local ngx = ngx
local tostring = tostring

local _M = {}

local GW

function _M.init_worker(endpoints, prefix, share, user, password)
    local err
    GW, err = gateway.new({ share = share and "atc_share" or nil, poll_interval = 0.01 })
    if not GW then
        ngx.log(ngx.ERR, "etcd test: ", err)
        return
    end
    assert(etcd.watch(GW, { endpoints = endpoints, prefix = prefix, timeout = 2,
        backoff_max = 1, max_value_bytes = 4096, user = user, password = password }))
end

local function headers()
    ngx.header["X-Version"] = tostring(GW:version())
    ngx.header["X-Pid"] = tostring(ngx.worker.pid())
end

function _M.access()
    local uuid = GW:route()
    headers()
    if not uuid then
        return ngx.exit(404)
    end
    ngx.header["X-Route"] = uuid
    return ngx.exit(200)
end

local function b(v)
    return v and "1" or "0"
end

function _M.status()
    local s = assert(GW:stats())
    local e = s.etcd
    ngx.say("pid ", ngx.worker.pid(), " version ", tostring(GW:version()), " watching ",
        b(e.watching), " connected ", b(e.connected), " applied ", e.events_applied,
        " refused ", e.events_refused, " loads ", e.loads, " reconnects ", e.reconnects,
        " routes ", s.routes, " last_apply ", tostring(e.last_apply_seconds), " max_apply ",
        tostring(e.max_apply_seconds), " responses ", e.responses, " changes ", e.changes)
end

function _M.metrics()
    ngx.header.content_type = gateway.METRICS_CONTENT_TYPE
    ngx.print(assert(GW:metrics_text({ worker = ngx.worker.id() })))
end

return _M
