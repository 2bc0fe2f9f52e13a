-- The gateway of the shared-table nginx test (ffi/tests/nginx_share.rs) and of
-- scripts/share-bench: resty.router.gateway in every worker of a 4-worker nginx, with
-- share = "atc_share" or (the benchmark's baseline) a table of its own.
--
-- init_worker(dir, file, own) updates to version 1 (dir/file), then follows pushes: a timer
-- reads the version and route file set in the atc_test dict (/__push?v=V&file=F) and calls
-- gw:update with them, as a gateway's configuration events would. `own`: no sharing.
-- access() routes with gw:route() and answers 200 with the headers X-Route (uuid), X-Capture
-- (the capture `id`, or "-"), X-Version (the version in force), X-Pid, X-Shared (1 when the
-- table routed from is the shared image), or 404 with the same headers but X-Route; a request
-- with an X-Explain header also gets gw:explain()'s winner in X-Explain-Winner ("none"), its
-- candidates' count in X-Explain-Candidates, the first candidate's deciding predicate in
-- X-Explain-First, or its error in X-Explain-Error.
-- corrupt() (/__corrupt?v=V) writes a corrupt image file and announces it as version V's
-- image, then pushes V: every worker must refuse it and build its own table of V.
-- forget() (/__forget) points every path the dict names an image by at nothing: a worker
-- started afterwards finds no holder and must build its own table.
-- status() (/__share) answers "pid <pid> version <v> shared <0|1> own_routes <n> builder <0|1>
-- shared_routes <n> switch_max <ms> routes <n> routed <n> not_found <n>" (own_routes: the routes
-- of the worker's own router; routes, routed, not_found, own_builds: gw:stats()'s;
-- builder: it holds the node's claim; switch_max: the longest a switch held it).

local gateway = require("resty.router.gateway")

local ngx = ngx
local tostring = tostring

local _M = {}

local GW
local DIR
local requested

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
    local dict = ngx.shared.atc_test
    local v, file = dict:get("version"), dict:get("file")
    if v and v ~= requested then
        requested = v
        local ok, err = GW:update(v, read(DIR .. "/" .. file))
        if not ok then
            ngx.log(ngx.ERR, "share test: update ", v, " failed: ", err)
        end
    end
end

function _M.init_worker(dir, file, own)
    DIR = dir
    local err
    GW, err = gateway.new({ share = (not own) and "atc_share" or nil, poll_interval = 0.01,
        captures = "table" })
    if not GW then
        ngx.log(ngx.ERR, "share test: ", err)
        return
    end
    requested = 1
    local ok, uerr = GW:update(1, read(dir .. "/" .. file))
    if not ok then
        ngx.log(ngx.ERR, "share test: update 1 failed: ", uerr)
    end
    assert(ngx.timer.every(0.02, follow))
end

local function headers()
    local sh = GW.share
    ngx.header["X-Version"] = tostring(GW:version())
    ngx.header["X-Pid"] = tostring(ngx.worker.pid())
    ngx.header["X-Shared"] = (sh and sh.mapped) and "1" or "0"
end

function _M.access()
    local uuid, _, captures = GW:route()
    headers()
    if ngx.var.http_x_explain then
        local why, err = GW:explain()
        ngx.header["X-Explain-Error"] = err
        if why then
            ngx.header["X-Explain-Winner"] = why.winner or "none"
            ngx.header["X-Explain-Candidates"] = tostring(#why.candidates)
            local c = why.candidates[1]
            ngx.header["X-Explain-First"] = c and c.predicates[1] and c.predicates[1].text
        end
    end
    if not uuid then
        return ngx.exit(404)
    end
    ngx.header["X-Route"] = uuid
    ngx.header["X-Capture"] = captures and captures.id or "-"
    return ngx.exit(200)
end

function _M.push()
    local args = ngx.req.get_uri_args()
    local dict = ngx.shared.atc_test
    dict:set("file", args.file)
    dict:set("version", tonumber(args.v))
    ngx.say("pushed ", args.v)
end

function _M.corrupt()
    local v = tonumber(ngx.req.get_uri_args().v)
    -- In /tmp: the test's directory is the master's user's, which a worker may not be.
    local path = "/tmp/atc-share-test-corrupt-" .. ngx.worker.pid() .. ".atcimg"
    os.remove(path)
    -- The bytes of the image in force, read through the path other workers open it by.
    local good = GW.share.path:match("^[^#]+")
    local bytes = read(good)
    local f = assert(io.open(path, "wb"))
    -- One byte of the middle changed: the checksum must catch it.
    local at = math.floor(#bytes / 2)
    f:write(bytes:sub(1, at - 1), string.char((bytes:byte(at) + 1) % 256), bytes:sub(at + 1))
    f:close()
    ngx.shared.atc_share:set("atc:" .. tostring(v) .. ":image", path)
    local dict = ngx.shared.atc_test
    dict:set("file", "routes2.tsv")
    dict:set("version", v)
    ngx.say("corrupt ", v)
end

function _M.forget()
    local dict = ngx.shared.atc_share
    local nowhere = "/proc/1/fd/999999#atc-1-0-0"
    for w = 0, ngx.worker.count() - 1 do
        local held = dict:get("atc:held:" .. w)
        if held then
            dict:set("atc:held:" .. w, held:match("^%S+") .. " " .. nowhere)
        end
    end
    local v = GW:version()
    dict:set("atc:" .. tostring(v) .. ":image", nowhere)
    ngx.say("forgot ", v)
end

function _M.metrics()
    ngx.print(assert(GW:metrics_text({ worker = ngx.worker.id() })))
end

function _M.status()
    local sh = GW.share
    local s = GW:stats()
    ngx.say("pid ", ngx.worker.pid(), " version ", tostring(GW:version()), " shared ",
        (sh and sh.mapped) and 1 or 0, " own_routes ", s.own_routes or s.routes, " builder ",
        ngx.shared.atc_share:get("atc:builder") == ngx.worker.pid() and 1 or 0,
        " shared_routes ", s.shared_routes or 0,
        " switch_max ", string.format("%.3f", s.max_switch_ms or 0),
        " routes ", s.routes, " routed ", s.routed, " not_found ", s.not_found,
        " own_builds ", s.own_builds or 0,
        " node_routed ", s.node and s.node.routed or 0,
        " node_workers ", s.node and s.node.workers or 0)
end

return _M
