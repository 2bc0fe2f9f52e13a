-- The gateway of the nginx integration test (ffi/tests/nginx.rs): resty.router.gateway behind a
-- real nginx, plus what only a test needs (connection fields from test headers, an update
-- endpoint reading route files).
--
-- init_worker(schema_file, routes_file) applies the routes as version "initial"; access() routes
-- each request with gw:route() and answers
--   200 with  "<uuid>\n" .. ns(matched http.path or "") .. ns(key) .. ns(value) ...  (captures
--             sorted by key, ns(s) = #s .. ":" .. s .. ","), or
--   404 when no route matches, or
--   400 when the request cannot be put in the context (invalid UTF-8, an unparsable address,
--       too many values for one field).
-- update() (location /__update?version=V&file=F[&mode=M][&nowait=1]) hands the routes of file F
-- to the builder as version V, waits for the outcome (the worker keeps routing) and answers
-- "applied ...", "unchanged ..." or 400 "refused ..."; with nowait, "started ..." at once.
-- Every routed answer carries X-Gw-Version, the version that routed it. metrics() (location
-- /metrics) serves GW's stats in Prometheus' text format.
-- A request with the header X-Atc-Explain from 127.0.0.1 also gets the response header
-- X-Atc-Explain: gateway.explain_summary() of its explanation (the gateway's debug header).
-- GW_ALL returns lazy captures (captures = "lazy"): access() checks on every request that they
-- read as GW's table. lazy_probe() (location /__lazy/N) checks that lazy captures read by a
-- request after another request (its subrequest) was routed raise instead of giving the other
-- request's values.
--
-- Field derivation is resty.router.gateway's (ffi/tests/nginx.rs mirrors it to compute the
-- expected route), except the connection fields net.dst.port, tls.sni, net.src.port,
-- net.dst.ip and net.protocol: from the test-only headers X-Test-Dst-Port, X-Test-Tls-Sni, ...
-- when present (no TLS, one listening port here), else from the connection. net.src.ip is
-- remote_addr, which the realip module takes from X-Real-IP.

local gateway = require("resty.router.gateway")
local captures_flat = require("captures_flat")
local ns, flat = captures_flat.ns, captures_flat.flat

local ngx = ngx
local tonumber, tostring, pairs, ipairs = tonumber, tostring, pairs, ipairs

local _M = {}

local GW
-- The same routes, routed by reading every field in use (read_all_fields): access() checks that
-- the two-phase routing of GW gives its answers.
local GW_ALL
-- A gateway of one capturing route, for lazy_probe().
local LAZY
local STATUS = { loaded = 0, errors = {} }

local function test_header(name, fallback)
    return function()
        local v = ngx.var["http_x_test_" .. name]
        if v == nil and fallback then
            v = ngx.var[fallback]
        end
        return v
    end
end

local function as_number(f)
    return function(field)
        return tonumber(f(field))
    end
end

local function read_routes(file)
    local ids, priorities, expressions = {}, {}, {}
    for line in io.lines(file) do
        local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
        if prio then
            ids[#ids + 1] = id
            priorities[#priorities + 1] = tonumber(prio)
            expressions[#expressions + 1] = expr
        end
    end
    return { ids = ids, priorities = priorities, expressions = expressions }
end

function _M.init_worker(schema_file, routes_file)
    local fields = {}
    for line in io.lines(schema_file) do
        local name, typ = line:match("^(%S+)\t(%S+)$")
        fields[#fields + 1] = { name, typ }
    end
    local opts = {
        schema = fields,
        max_headers = 2000,
        extractors = {
            ["net.dst.port"] = as_number(test_header("dst_port", "server_port")),
            ["net.src.port"] = as_number(test_header("src_port", "remote_port")),
            ["net.dst.ip"] = test_header("dst_ip", "server_addr"),
            ["net.protocol"] = test_header("protocol", "scheme"),
            ["tls.sni"] = test_header("tls_sni"),
        },
    }
    -- The debug header, for requests from 127.0.0.1 (the default allow-list).
    opts.explain_header = "X-Atc-Explain"
    GW = assert(gateway.new(opts))
    opts.read_all_fields = true
    opts.explain_header = nil
    opts.captures = "lazy"
    GW_ALL = assert(gateway.new(opts))
    -- path = "nginx": $uri is the subrequest's own path ($request_uri is its parent's).
    LAZY = assert(gateway.new({ captures = "lazy", path = "nginx" }))
    assert(LAZY:update(1, { { id = "a8f2c1e4-0000-4000-8000-00000000babe", priority = 1,
        expression = [[http.path ~ r#"^/__lazy/(?<n>\d+)$"#]] } }))
    -- Apply-valid, so that a bad line would be listed on the status page instead of leaving the
    -- worker without routes.
    local routes = read_routes(routes_file)
    -- In init_worker an update is applied before update() returns (no request can wait yet).
    local ok, state, report = GW:update("initial", routes, "apply_valid")
    assert(ok and state == "applied", state)
    assert(GW_ALL:update("initial", routes, "apply_valid"))
    local errors = {}
    for _, e in ipairs(report.errors) do
        errors[#errors + 1] = tostring(e.id) .. ": " .. e.message
    end
    STATUS.loaded, STATUS.errors = report.added, errors
end

function _M.status()
    local sources = require("resty.router.gateway.sources")
    ngx.say("loaded ", STATUS.loaded, " pid ", ngx.worker.pid(), " version ", GW:version(),
        " source ", GW:request_source(), " (", sources.native_off or "reviewed",
        " lua-nginx-module ", tostring(ngx.config.ngx_lua_version), ")")
    for _, e in ipairs(STATUS.errors) do
        ngx.say("error ", e)
    end
end

-- location /metrics: the gateway's stats in Prometheus' text format (GW only: GW_ALL routes
-- every request a second time, for the comparison, and is not what the test counts).
function _M.metrics()
    ngx.header.content_type = gateway.METRICS_CONTENT_TYPE
    ngx.print(assert(GW:metrics_text({ worker = ngx.worker.id() })))
end

function _M.update()
    local args = ngx.req.get_uri_args()
    local version, file, mode = args.version, args.file, args.mode
    local routes
    local function load()
        routes = routes or read_routes(file)
        return routes
    end
    -- Handed to the builder thread; this request waits for the outcome (ngx.sleep), the worker
    -- goes on routing meanwhile. With nowait=1 it answers once the list is handed over.
    local ok, state, errs = GW:update(version, load, mode)
    local ok_all, state_all = GW_ALL:update(version, load, mode)
    assert(ok_all or not ok, state_all)
    if ok and args.nowait then
        ngx.say("started version ", version, " (", state, ")")
        return
    end
    local report = nil
    if ok and state == "building" then
        ok, report, errs = GW:wait(version)
        state = report
        assert(ok == GW_ALL:wait(version))
    end
    if ok and report == nil then
        ngx.say("unchanged version ", GW:version())
        return
    end
    if not ok then
        ngx.status = 400
        ngx.say("refused: ", state)
        for _, e in ipairs(errs or {}) do
            ngx.say("error ", e.index, " ", tostring(e.id), ": ", e.message)
        end
        return
    end
    ngx.say("applied version ", version, " added ", report.added, " removed ", report.removed,
        " changed ", report.changed, " unchanged ", report.unchanged, " errors ", #report.errors)
    for _, e in ipairs(report.errors) do
        ngx.say("error ", e.index, " ", tostring(e.id), ": ", e.message)
    end
end

function _M.access()
    -- Inside nginx the gateway reads requests through lua-nginx-module's FFI functions; the
    -- plain ngx API (the source the mock tests exercise) must give the very same values.
    local native = GW:request_values("native")
    if native ~= nil then
        local plain = GW:request_values("plain")
        if native ~= plain then
            ngx.status = 500
            ngx.say("the request sources differ\nplain:\n", plain, "\nnative:\n", native)
            return ngx.exit(500)
        end
    end
    local uuid, matched, captures = GW:route()
    -- The version that routed this request (route() swaps a built table in before reading).
    local version = GW:version()
    ngx.header["X-Gw-Version"] = tostring(version)
    -- Asked for with the debug header (and from 127.0.0.1): the summary of the explanation, on
    -- every answer but a 400.
    local why = ngx.ctx.atc_explanation
    if why then
        ngx.header["X-Atc-Explain"] = gateway.explain_summary(why)
    end
    -- Two-phase routing answers what reading every field answers, except that a malformed value
    -- it never read (no candidate uses its field) does not make the request bad.
    -- (Each gateway builds on its own thread: compared only when both route by one version.)
    -- GW_ALL's captures are lazy: compared key by key through the object, and as the table
    -- GW_ALL:captures() makes.
    local all_uuid, all_matched, lazy_captures = GW_ALL:route()
    local all_captures = lazy_captures and GW_ALL:captures()
    for k, v in pairs(all_captures or {}) do
        if lazy_captures[k] ~= v then
            all_captures = { ["lazy captures[" .. tostring(k) .. "]"] = tostring(lazy_captures[k]) }
            break
        end
    end
    if GW_ALL:version() == version and not (all_uuid == nil and all_matched ~= nil)
        and (uuid ~= all_uuid or matched ~= all_matched or flat(captures) ~= flat(all_captures))
    then
        ngx.status = 500
        ngx.say("two-phase routing differs from reading every field: ", tostring(uuid), " ",
            tostring(matched), " ", tostring(flat(captures)), " against ", tostring(all_uuid), " ",
            tostring(all_matched), " ", tostring(flat(all_captures)))
        return ngx.exit(500)
    end
    if not uuid then
        if matched then -- the reason the request could not be routed
            ngx.status = 400
            ngx.say("bad request: ", matched)
            return ngx.exit(400)
        end
        return ngx.exit(404)
    end
    local body = { uuid, "\n", ns(matched or ""), flat(captures) or "" }
    ngx.header["X-Route"] = uuid
    ngx.print(body)
    return ngx.exit(200)
end

-- location /__lazy/: routes by LAZY, reads its lazy capture, lets a subrequest (another
-- request, routed by the same gateway) route /__lazy/7, then reads the capture again, which
-- must raise. Answers "own N", "subrequest 7" and "stale read raised: <error>" (or "gave ...").
function _M.lazy_probe()
    local _, _, caps = LAZY:route()
    if ngx.is_subrequest then
        ngx.print(caps and caps.n or "-")
        return
    end
    local own = caps and caps.n
    local sub = ngx.location.capture("/__lazy/7")
    local ok, err = pcall(function()
        return caps.n
    end)
    ngx.say("own ", tostring(own))
    ngx.say("subrequest ", sub.body)
    ngx.say("stale read ", ok and ("gave " .. tostring(err)) or ("raised: " .. tostring(err)))
end

return _M
