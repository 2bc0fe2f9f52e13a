-- A gateway made in nginx's init phase (the master, before it forks the workers), for the
-- nginx test of ffi/tests/nginx.rs: every worker inherits it with the table applied in init,
-- and builds its later versions on a builder thread of its own (started by its first update,
-- after the fork). Each worker polls the shared dict `versions` (its timer) and updates to the
-- version found there, from the route file `<dir>/routes-<version>.tsv`, handed over as one
-- string.
--
--   init_by_lua:        require("gateway_init").init(dir)       -- version "1", applied at once
--   init_worker_by_lua: require("gateway_init").init_worker()
--   /set?version=V      makes V the version every worker goes to
--   /                   "<pid> <version> <uuid or ->"

local gateway = require("resty.router.gateway")

local _M = {}
local GW, DIR

local function read(version)
    local f = io.open(DIR .. "/routes-" .. version .. ".tsv", "rb")
    if not f then
        return nil, "no routes for version " .. version
    end
    local text = f:read("*a")
    f:close()
    return text
end

function _M.init(dir)
    DIR = dir
    GW = assert(gateway.new())
    -- The init phase: applied before update() returns (no timers, no sleeping here). A table:
    -- the router takes it directly, no builder thread is started in the master.
    local ids, prios, exprs = {}, {}, {}
    for line in assert(read("1")):gmatch("[^\n]+") do
        local p, id, e = line:match("^(%d+)\t(%S+)\t(.*)$")
        ids[#ids + 1], prios[#prios + 1], exprs[#exprs + 1] = id, tonumber(p), e
    end
    local ok, state = GW:update("1", { ids = ids, priorities = prios, expressions = exprs })
    assert(ok and state == "applied", state)
end

local function poll(premature)
    if premature then
        return
    end
    local v = ngx.shared.versions:get("version")
    if v then
        local ok, err = GW:update(v, function() return read(v) end)
        if not ok then
            ngx.log(ngx.ERR, "gateway_init: version ", v, ": ", err)
        end
    end
end

function _M.init_worker()
    assert(ngx.timer.every(0.05, poll))
end

function _M.set()
    ngx.shared.versions:set("version", ngx.var.arg_version)
    ngx.say("version ", ngx.var.arg_version)
end

function _M.route()
    local uuid = GW:route()
    ngx.say(ngx.worker.pid(), " ", tostring(GW:version()), " ", uuid or "-")
end

return _M
