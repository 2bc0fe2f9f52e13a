-- The gateway of scripts/share-bench: resty.router.gateway in every worker of a 4-worker nginx,
-- sharing one table per node (share = "atc_share") or each worker with its own.
--
-- init_worker(dir, share, file) updates to version 1 from dir/file, then follows pushes: a
-- timer reads the version and route file set in the atc_push dict (/__push?v=V&file=F) and
-- calls gw:update. status() (/__status) answers "pid P version V own R shared S switch_max M":
-- the routes of the worker's own router, of the shared table, and the longest switch (ms).

local gateway = require("resty.router.gateway")

local ngx = ngx
local tostring = tostring

local _M = {}

local GW, DIR, requested

local function read(path)
    local f = assert(io.open(path, "rb"))
    local text = f:read("*a")
    f:close()
    return text
end

local function follow(premature)
    if premature then
        return
    end
    local dict = ngx.shared.atc_push
    local v, file = dict:get("version"), dict:get("file")
    if v and v ~= requested then
        requested = v
        local ok, err = GW:update(v, read(DIR .. "/" .. file))
        if not ok then
            ngx.log(ngx.ERR, "share bench: update ", v, ": ", err)
        end
    end
end

function _M.init_worker(dir, share, file)
    DIR = dir
    local err
    GW, err = gateway.new({ share = share and "atc_share" or nil, share_dir = dir .. "/images",
        poll_interval = 0.01 })
    if not GW then
        ngx.log(ngx.ERR, "share bench: ", err)
        return
    end
    requested = 1
    assert(GW:update(1, read(dir .. "/" .. file)))
    assert(ngx.timer.every(0.02, follow))
end

function _M.push()
    local args = ngx.req.get_uri_args()
    ngx.shared.atc_push:set("file", args.file)
    ngx.shared.atc_push:set("version", tonumber(args.v))
    ngx.say("pushed ", args.v)
end

function _M.status()
    local s = GW:stats()
    ngx.say("pid ", ngx.worker.pid(), " version ", tostring(GW:version()), " own ", s.routes,
        " shared ", s.shared_routes or 0, " switch_max ", string.format("%.3f", s.max_switch_ms or 0))
end

return _M
