-- Tests of resty.router.gateway against a mock `ngx` (the module only reads ngx.var.*,
-- ngx.req.get_method, ngx.req.get_headers and ngx.req.get_uri_args). ffi/tests/lua.rs runs each
-- function in a fresh LuaJIT state; lua/t/run.lua runs them all from a plain `luajit`. The same
-- module behind a real nginx is exercised by ffi/tests/nginx.rs.

local T = {}

local function fmt(v)
    if type(v) == "string" then
        return string.format("%q", v)
    end
    return tostring(v)
end

local function eq(got, want, what)
    if got ~= want then
        error((what or "value") .. ": got " .. fmt(got) .. ", want " .. fmt(want), 2)
    end
end

local function has(s, pattern, what)
    if type(s) ~= "string" or not s:find(pattern, 1, true) then
        error((what or "text") .. " " .. fmt(s) .. " does not contain " .. fmt(pattern), 2)
    end
end

local function same(got, want, what)
    for k, v in pairs(want) do
        if got[k] ~= v then
            error((what or "table") .. "[" .. fmt(k) .. "]: got " .. fmt(got[k]) .. ", want " .. fmt(v), 2)
        end
    end
    for k, v in pairs(got) do
        if want[k] == nil then
            error((what or "table") .. " has an unexpected key " .. fmt(k) .. " = " .. fmt(v), 2)
        end
    end
end

-- The mock: `request` is the current request; `log` records what the module read from it.
local request, log

-- ngx.log, kept for the tests that check a warning.
local logged = {}

local function reset_log()
    log = { vars = {}, method = 0, headers = 0, args = 0 }
    logged = {}
end

local function set_request(r)
    request = {
        method = r.method or "GET",
        headers = r.headers or {},
        args = r.args or {},
        var = r.var or {},
    }
    request.var.uri = request.var.uri or "/"
    request.var.host = request.var.host or "example.com"
    -- Kong's router reads the request URI and the Host header: by default the same as $uri and
    -- $host here, unless a test gives them.
    request.var.request_uri = request.var.request_uri or request.var.uri
    -- ngx.ctx is per request.
    _G.ngx.ctx = {}
    reset_log()
end

-- Like ngx.req.get_headers / get_uri_args: at most `max` entries (a repeated name counts once
-- per value), and "truncated" when there were more.
local function limited(all, max)
    local out, count, truncated = {}, 0, nil
    for k, v in pairs(all) do
        local values = type(v) == "table" and v or { v }
        for _, x in ipairs(values) do
            if count >= max then
                truncated = "truncated"
                break
            end
            count = count + 1
            local prev = out[k]
            if prev == nil then
                out[k] = x
            elseif type(prev) == "table" then
                prev[#prev + 1] = x
            else
                out[k] = { prev, x }
            end
        end
    end
    return out, truncated
end

local function install_ngx()
    _G.ngx = {
        var = setmetatable({}, {
            __index = function(_, k)
                log.vars[#log.vars + 1] = k
                -- Like nginx: $http_NAME is the first value of header NAME (`_` for `-`), and
                -- $args the query string, nil without one.
                local h = k:match("^http_(.+)$")
                if h and request.var[k] == nil then
                    local v = request.headers[(h:gsub("_", "-"))]
                    if v == nil and h == "host" then
                        return request.var.host
                    end
                    return type(v) == "table" and v[1] or v
                end
                if k == "args" and request.var.args == nil and next(request.args) then
                    return "(query string)"
                end
                return request.var[k]
            end,
        }),
        WARN = 5,
        log = function(level, ...)
            logged[#logged + 1] = { level = level, text = table.concat({ ... }) }
        end,
        req = {
            get_method = function()
                log.method = log.method + 1
                return request.method
            end,
            get_headers = function(max)
                log.headers = log.headers + 1
                return limited(request.headers, max or 100)
            end,
            get_uri_args = function(max)
                log.args = log.args + 1
                return limited(request.args, max or 100)
            end,
        },
    }
    set_request({})
end

install_ngx()
local gateway = require("resty.router.gateway")

local U1 = "a8f2c1e4-0000-4000-8000-000000000001"
local U2 = "a8f2c1e4-0000-4000-8000-000000000002"
local U3 = "a8f2c1e4-0000-4000-8000-000000000003"
local U4 = "a8f2c1e4-0000-4000-8000-000000000004"

local function list(...)
    local routes = {}
    for i, r in ipairs({ ... }) do
        routes[i] = { id = r[1], priority = r[2], expression = r[3] }
    end
    return routes
end

local function must_not_load()
    error("the loader must not be called for the applied version")
end

function T.update_applies_new_versions_only()
    local gw = assert(gateway.new())
    eq(gw:version(), nil)
    set_request({ var = { uri = "/a/1" } })
    eq(gw:route(), nil, "an empty gateway routes nothing")

    local changed, state, rep = gw:update("v1", list({ U1, 10, 'http.path ^= "/a"' }))
    eq(changed, true)
    eq(state, "applied", "outside nginx an update is applied before update() returns")
    eq(rep.added, 1)
    eq(gw:version(), "v1")
    eq(gw:route(), U1)

    -- The same version: nothing happens, a loader is not even called; it is in force, so
    -- assert(gw:update(...)) holds.
    same({ gw:update("v1", list()) }, { true, "applied" })
    same({ gw:update("v1", must_not_load) }, { true, "applied" })
    eq(gw:route(), U1)

    -- A refused version leaves the applied one in force.
    local ok, err, errs = gw:update("v2", list({ U1, 10, 'http.path ^= "/a"' }, { U2, 5, "http.path =" }))
    eq(ok, nil)
    has(err, "1 invalid route(s), nothing changed; route #2")
    eq(#errs, 1)
    eq(errs[1].id, U2)
    eq(gw:version(), "v1")
    eq(gw:route(), U1)

    -- A loader, called once the version differs.
    local calls = 0
    changed, state, rep = gw:update(2, function()
        calls = calls + 1
        return list({ U1, 10, 'http.path ^= "/a"' }, { U2, 20, 'http.path ^= "/a/1"' })
    end)
    eq(changed, true)
    eq(calls, 1)
    same({ rep.added, rep.removed, rep.changed, rep.unchanged }, { 1, 0, 0, 1 })
    eq(gw:version(), 2)
    eq(gw:route(), U2)
    same({ gw:update(2, must_not_load) }, { true, "applied" })

    -- A failing loader changes nothing.
    ok, err = gw:update(3, function() return nil, "store unreachable" end)
    eq(ok, nil)
    has(err, "the route loader failed: store unreachable")
    eq(gw:version(), 2)
    -- Nor does one that raises: nil and why, not an error out of update().
    local raised = { pcall(gw.update, gw, 3, function() error("store exploded") end) }
    eq(raised[1], true, "update() does not raise: " .. tostring(raised[2]))
    eq(raised[2], nil)
    has(raised[3], "the route loader failed: raised ")
    has(raised[3], "store exploded")
    raised = { pcall(gw.update, gw, 3, function() error({ code = 7 }) end) }
    eq(raised[1], true)
    has(raised[3], "the route loader failed: raised table: ")
    eq(gw:version(), 2)
    eq(gw:route(), U2)
    ok, err = gw:update(nil, list())
    eq(ok, nil)
    has(err, "version must not be nil")

    -- Apply-valid: the valid routes are applied and the version counts as applied.
    changed, state, rep = gw:update(4, list({ U1, 10, 'http.path ^= "/a"' }, { U3, 1, "nope" }), "apply_valid")
    eq(changed, true)
    eq(rep.removed, 1)
    eq(#rep.errors, 1)
    eq(rep.errors[1].index, 2)
    eq(gw:version(), 4)
    eq(gw:route(), U1)
end

function T.reads_only_the_fields_in_use()
    local gw = assert(gateway.new())
    assert(gw:update(1, list({ U1, 1, 'http.path ^= "/a"' })))
    same(gw:fields_in_use(), { "http.path" })
    set_request({ var = { uri = "/a" }, headers = { ["x-a"] = "1" }, args = { q = "1" } })
    eq(gw:route(), U1)
    same(log.vars, { "request_uri" }, "vars read")
    same({ log.method, log.headers, log.args }, { 0, 0, 0 }, "method, headers, args reads")

    -- A new route that uses a header and a query argument: read from the next request on.
    assert(gw:update(2, list({ U1, 1, 'http.path ^= "/a"' },
        { U2, 2, 'http.headers.x_a == "1" && http.queries.q == "1"' })))
    same(gw:fields_in_use(), { "http.headers.x_a", "http.path", "http.queries.q" })
    set_request({ var = { uri = "/a" }, headers = { ["x-a"] = "1" }, args = { q = "1" } })
    eq(gw:route(), U2)
    same({ log.method, log.headers, log.args }, { 0, 1, 1 }, "headers and args read once")
    -- Without the header and without a query string, neither is read at all.
    set_request({ var = { uri = "/a" }, headers = { ["x-other"] = "1" } })
    eq(gw:route(), U1)
    same({ log.method, log.headers, log.args }, { 0, 0, 0 }, "nothing to read")
    -- The key fields first (the path, which sets U1 apart, and one of U2's two fields); U2's
    -- other field only if U2 is a candidate, which it is not without its key.
    eq(#log.vars, 2, "vars read")
    eq(log.vars[1] == "request_uri" or log.vars[2] == "request_uri", true, "the path is read")

    -- And no longer once the route is gone.
    assert(gw:update(3, list({ U1, 1, 'http.method == "GET"' })))
    set_request({ var = { uri = "/a" }, headers = { ["x-a"] = "1" } })
    eq(gw:route(), U1)
    same(log.vars, {}, "vars read after the update")
    same({ log.method, log.headers, log.args }, { 1, 0, 0 })
end

function T.request_fields()
    local gw = assert(gateway.new())
    assert(gw:update(1, list(
        { U1, 50, [[http.host == "api.example.com" && http.path ~ r#"^/users/(?<id>\d+)$"#]] },
        { U2, 40, 'any(lower(http.headers.x_api_version)) == "v2" && http.path ^= "/v"' },
        { U3, 30, 'http.queries.tag == "b" && http.path.segments.1 == "items" && http.method == "POST"' },
        { U4, 20, 'net.src.ip in 10.0.0.0/8 && net.dst.port == 8443 && net.protocol == "https"'
            .. ' && tls.sni == "sni.example.com" && net.src.port > 1000 && net.dst.ip == 192.0.2.1' }
    )))

    set_request({ var = { host = "api.example.com", uri = "/users/42" } })
    local uuid, path, caps = gw:route()
    eq(uuid, U1)
    eq(path, "/users/42")
    same(caps, { [0] = "/users/42", [1] = "42", id = "42" })

    -- Header names: lowercase, `_` for `-`; every value, so any() sees the second one.
    set_request({ var = { uri = "/v1" }, headers = { ["x-api-version"] = { "v1", "V2" } } })
    uuid, path, caps = gw:route()
    eq(uuid, U2)
    eq(path, "/v")
    eq(caps, nil)

    -- Query arguments (several values; a valueless one is "", as Kong reads it) and path
    -- segments (of the path merged and normalised).
    set_request({ method = "POST", var = { uri = "//shop/items/9" }, args = { tag = { true, "b" } } })
    eq(gw:route(), nil, "the valueless `tag` is \"\", and every value must match")
    set_request({ method = "POST", var = { uri = "//shop/items/9" }, args = { tag = "b" } })
    eq(gw:route(), U3, "slashes merged")
    set_request({ method = "POST", var = { uri = "/shop/items" }, args = { tag = { "a", "b" } } })
    eq(gw:route(), nil, "every value must match")
    set_request({ method = "GET", var = { uri = "/shop/items" }, args = { tag = "b" } })
    eq(gw:route(), nil, "method")
    set_request({ method = "POST", var = { uri = "/shop/items" }, args = { tag = "b" } })
    eq(gw:route(), U3)
    set_request({ method = "POST", var = { uri = "/shop/other" }, args = { tag = "b" } })
    eq(gw:route(), nil, "segment 1")

    -- Connection fields.
    local conn = { uri = "/", remote_addr = "10.1.2.3", remote_port = "40000", server_addr = "192.0.2.1",
        server_port = "8443", scheme = "https", ssl_server_name = "sni.example.com" }
    set_request({ var = conn })
    eq(gw:route(), U4)
    conn.remote_addr = "unix:"
    set_request({ var = conn })
    eq(gw:route(), nil, "a Unix socket has no source address")
end

-- Segments as Kong's router makes them: of the normalised path, after its first `/`, without
-- the trailing empty ones; ranges join their pieces with `/`; `len` counts them.
function T.segments()
    local gw = assert(gateway.new())
    assert(gw:update(1, list(
        { U1, 4, 'http.path.segments.0 == "a" && http.path.segments.len == 2' },
        { U2, 3, 'http.path.segments.1_2 == "x/y"' },
        { U3, 2, 'http.path.segments.len == 0' }
    )))
    for path, want in pairs({
        ["/a/b"] = U1, ["/a/b/"] = U1, ["///a//b/"] = U1, ["/b/../a/b"] = U1, ["/%61/b"] = U1,
        ["/a/./b/."] = U1, ["/a/b//c"] = false, ["/a/x/y"] = U2, ["/a/x/y/"] = U2,
        ["/q/x/./y"] = U2, ["/q/x/y/z"] = U2, ["/q/x%2Fy"] = false, ["/"] = U3, ["/.."] = U3,
        ["//"] = U3, ["/a/b?x=/c/d"] = U1,
    }) do
        set_request({ var = { request_uri = path } })
        eq(gw:route(), want or nil, path)
    end
    -- path = "nginx": $uri as nginx gives it, not normalised again.
    local raw = assert(gateway.new({ path = "nginx" }))
    assert(raw:update(1, list({ U1, 1, 'http.path.segments.0 == "" && http.path.segments.1 == "a"' })))
    set_request({ var = { uri = "//a", request_uri = "/elsewhere" } })
    eq(raw:route(), U1, "$uri as it is")
    local bad, err = gateway.new({ path = "raw" })
    eq(bad, nil)
    has(err, "path must be")
end

-- The path, host and port as Kong's router reads them, and the options that read them as
-- nginx does.
function T.kong_request_semantics()
    local gw = assert(gateway.new())
    assert(gw:update(1, list(
        { U1, 4, 'http.path == "/a%2Fb/c"' },
        { U2, 3, 'http.host == "Api.Example.com" && net.dst.port == 80' },
        { U3, 2, 'http.queries.debug == ""' },
        { U4, 1, 'http.path ^= "/"' }
    )))
    local function route(var, args)
        var.server_port = var.server_port or "80"
        set_request({ var = var, args = args })
        return (gw:route())
    end
    eq(route({ request_uri = "/a%2fb/c" }), U1, "a reserved character stays encoded, upper-cased")
    eq(route({ request_uri = "/a/b/c", uri = "/a%2Fb/c" }), U4, "an encoded slash is no slash")
    eq(route({ request_uri = "/x/../%61%2Fb/./c?q=1" }), U1, "decoded, dots removed, no query")
    eq(route({ host = "api.example.com", http_host = "Api.Example.com:8000" }), U2,
        "the Host header as sent, without its port")
    eq(route({ http_host = "api.example.com" }), U4, "hosts are compared as sent")
    eq(route({}, { debug = true }), U3, "a valueless argument is \"\"")
    -- Options: $host, and the Host header's port as net.dst.port.
    local ngx_host = assert(gateway.new({ host = "nginx", dst_port_from_host = true }))
    assert(ngx_host:update(1, list({ U1, 1, 'http.host == "api.example.com" && net.dst.port == 8000' })))
    set_request({ var = { host = "api.example.com", http_host = "Api.Example.com:8000",
        server_port = "80" } })
    eq(ngx_host:route(), U1)
    set_request({ var = { host = "api.example.com", http_host = "api.example.com",
        server_port = "8000" } })
    eq(ngx_host:route(), U1, "no port in the Host header: the server's")
    local bad, err = gateway.new({ host = "header" })
    eq(bad, nil)
    has(err, "host must be")
end

function T.bad_requests_never_raise()
    local gw = assert(gateway.new({ max_headers = 10, max_args = 5 }))
    assert(gw:update(1, list(
        { U1, 2, 'http.headers.x_a == "1" && http.path ^= "/"' },
        { U2, 1, 'http.queries.q == "1" && http.path ^= "/"' }
    )))
    local function bad(req, reason)
        set_request(req)
        local ok, uuid, err = pcall(gw.route, gw)
        eq(ok, true, "route() raised: " .. tostring(uuid))
        eq(uuid, nil, reason)
        has(err, reason)
    end
    bad({ var = { uri = "/" }, headers = { ["x-a"] = "\255" } }, "not valid UTF-8")
    bad({ var = { uri = "/caf\233" }, headers = { ["x-a"] = "1" } }, "not valid UTF-8")
    bad({ var = { uri = "/" }, args = { q = "\255\254" } }, "not valid UTF-8")
    -- More headers or arguments than the gateway reads: the first ones route the request (the
    -- 11th value, which would fail `==`, is not read), with a warning, as Kong does.
    local many = {}
    for i = 1, 10 do
        many[i] = "1"
    end
    many[11] = "2"
    set_request({ var = { uri = "/" }, headers = { ["x-a"] = many } })
    eq(gw:route(), U1, "routed on the first 10 headers")
    eq(#logged, 1)
    eq(logged[1].level, ngx.WARN)
    has(logged[1].text, "more than 10 headers")
    local args = { "1", "1", "1", "1", "1", "2" }
    set_request({ var = { uri = "/" }, args = { q = args } })
    eq(gw:route(), U2, "routed on the first 5 arguments")
    has(logged[1].text, "more than 5 args")
    local values = {}
    for i = 1, 1100 do
        values[i] = "1"
    end
    local big = assert(gateway.new({ max_headers = 2000 }))
    assert(big:update(1, list({ U1, 1, 'http.headers.x_a == "1"' })))
    set_request({ headers = { ["x-a"] = values } })
    local uuid, err = big:route()
    eq(uuid, nil)
    has(err, "1024")
    -- The gateway still routes good requests afterwards.
    set_request({ var = { uri = "/" }, headers = { ["x-a"] = "1" } })
    eq(gw:route(), U1)
end

function T.extractors_and_schema()
    local gw = assert(gateway.new({
        schema = { { "http.path", "String" }, { "tls.sni", "String" }, { "x.tenant", "String" } },
        extractors = {
            ["tls.sni"] = function() return request.var.http_x_sni end,
            ["x.tenant"] = function(field)
                eq(field, "x.tenant")
                return request.headers.tenant
            end,
        },
    }))
    assert(gw:update(1, list({ U1, 1, 'tls.sni == "s.example.com" && x.tenant == "t1"' })))
    set_request({ var = { http_x_sni = "s.example.com" }, headers = { tenant = "t1" } })
    eq(gw:route(), U1)
    set_request({ var = { http_x_sni = "s.example.com" }, headers = { tenant = "t2" } })
    eq(gw:route(), nil)
    -- Schema errors come back as errors.
    local nope, err = gateway.new({ schema = { { "a", "Float" } } })
    eq(nope, nil)
    has(err, "unknown field type")
    -- Routes on fields the gateway has no source for simply never match.
    local gw2 = assert(gateway.new({ schema = { { "x.nothing", "String" } } }))
    assert(gw2:update(1, list({ U1, 1, 'x.nothing == "a"' })))
    eq(gw2:route(), nil)
end

-- gateway.new{ limits = } sets the schema's limits before the router is made: updates are
-- checked against them.
function T.limits_option()
    local gw = assert(gateway.new({ limits = { max_predicates = 2 } }))
    eq(gw.schema:get_limits().max_predicates, 2)
    local three = 'http.path ^= "/a" && http.host == "a.com" && http.method == "GET"'
    local ok, err, errs = gw:update(1, list({ U1, 1, three }))
    eq(ok, nil)
    has(err, "1 invalid route(s), nothing changed; route #1")
    has(err, "too many predicates: 3, the limit is 2")
    eq(#errs, 1)
    has(errs[1].message, "too many predicates: 3, the limit is 2")
    eq(gw:version(), nil)
    -- Within the limit: applied.
    assert(gw:update(2, list({ U1, 1, 'http.path ^= "/a" && http.host == "a.com"' })))
    set_request({ var = { uri = "/a", host = "a.com" } })
    eq(gw:route(), U1)
    -- Without the option: the defaults.
    local gw2 = assert(gateway.new())
    assert(gw2:update(1, list({ U1, 1, three })))
    -- A bad limit is an error of new().
    local nope
    nope, err = gateway.new({ limits = { max_predicates = 0 } })
    eq(nope, nil)
    has(err, "limit max_predicates must be a positive integer, got 0")
    nope, err = gateway.new({ limits = { max_routes = 5 } })
    eq(nope, nil)
    has(err, "unknown limit max_routes")
    nope, err = gateway.new({ limits = "tight" })
    eq(nope, nil)
    has(err, "limits must be a table, got string")
end

-- An update whose loader yields (as one fetching the list over a cosocket would): requests
-- served meanwhile see the old table and the old field plan, and the next ones the new table.
function T.update_is_atomic_for_requests()
    local gw = assert(gateway.new())
    assert(gw:update(1, list({ U1, 1, 'http.path ^= "/a"' })))
    local co = coroutine.create(function()
        return gw:update(2, function()
            coroutine.yield("fetching")
            return list({ U1, 1, 'http.path ^= "/a"' }, { U2, 2, 'http.headers.x_b == "1"' })
        end)
    end)
    local ok, state = coroutine.resume(co)
    assert(ok and state == "fetching")
    set_request({ var = { uri = "/a" }, headers = { ["x-b"] = "1" } })
    eq(gw:route(), U1, "while the update waits")
    eq(log.headers, 0, "the old plan does not read headers")
    eq(gw:version(), 1)
    local applied
    ok, applied = coroutine.resume(co)
    assert(ok and applied == true)
    set_request({ var = { uri = "/a" }, headers = { ["x-b"] = "1" } })
    eq(gw:route(), U2, "after the update")
    eq(gw:version(), 2)

    -- Two updates racing on one version: the one that finds it applied does nothing.
    local co2 = coroutine.create(function()
        return gw:update(3, function()
            coroutine.yield()
            return list({ U1, 1, 'http.path ^= "/z"' })
        end)
    end)
    coroutine.resume(co2)
    assert(gw:update(3, list({ U1, 1, 'http.path ^= "/a"' })))
    local _, second, how = coroutine.resume(co2)
    eq(second, true)
    eq(how, "applied", "the version another update applied meanwhile")
    set_request({ var = { uri = "/a" } })
    eq(gw:route(), U1)
end

-- A larger table through the gateway, then a few routes changed (ffi/tests/nginx.rs does this
-- with 10,000 workload routes; this size keeps the valgrind run short).
function T.large_update_changes_only_what_differs()
    local gw = assert(gateway.new())
    local n = 3000
    local ids, prios, exprs = {}, {}, {}
    for i = 1, n do
        ids[i] = string.format("a8f2c1e4-0000-4000-8000-%012d", i)
        prios[i] = i
        exprs[i] = string.format('http.host == "svc-%d.example.com" && http.path ^= "/api/%d"', i, i)
    end
    local routes = { ids = ids, priorities = prios, expressions = exprs }
    local _, _, rep = assert(gw:update(1, routes))
    eq(rep.added, n)
    exprs[7] = 'http.host == "svc-7.example.com" && http.path ^= "/v2/7"'
    prios[8] = 1e6
    _, _, rep = assert(gw:update(2, routes))
    same({ rep.added, rep.removed, rep.changed, rep.unchanged }, { 0, 0, 2, n - 2 })
    set_request({ var = { host = "svc-7.example.com", uri = "/v2/7/x" } })
    local uuid, path = gw:route()
    eq(uuid, ids[7])
    eq(path, "/v2/7")
end

-- builder_threads: checked by new(); a fresh build on two threads routes as one on one.
function T.builder_threads_option()
    for _, bad in ipairs({ 0, 65, 1.5, "2" }) do
        local nope, err = gateway.new({ builder_threads = bad })
        eq(nope, nil)
        has(err, "builder_threads must be an integer from 1 to 64")
    end
    local n = 9000
    local ids, prios, exprs = {}, {}, {}
    for i = 1, n do
        ids[i] = string.format("a8f2c1e4-0000-4000-8000-%012d", i)
        prios[i] = i % 7
        exprs[i] = string.format('http.host == "svc-%d.example.com" && http.path ^= "/api/%d/"',
            i % 40, i)
    end
    local routes = { ids = ids, priorities = prios, expressions = exprs }
    local answers = {}
    for _, threads in ipairs({ 2, 1 }) do
        local gw = assert(gateway.new({ builder_threads = threads }))
        assert(gw:update(1, routes))
        assert(gw:wait(1, 60))
        for i = 1, n, 97 do
            set_request({ var = { host = "svc-" .. (i % 40) .. ".example.com",
                uri = "/api/" .. i .. "/x" } })
            local uuid = gw:route()
            eq(uuid, ids[i], threads .. " threads, route " .. i)
            answers[threads] = (answers[threads] or 0) + 1
        end
    end
    eq(answers[1], answers[2])
end

-- Two-phase routing reads the key fields, then only what the candidate routes use: results equal
-- reading every field (read_all_fields), and a malformed value in a field no candidate uses is
-- never read, so it does not reject the request (read_all_fields still does).
function T.two_phase_routing_reads_only_what_candidates_use()
    local flat = require("captures_flat").flat
    local routes = list(
        { U1, 9, 'http.host == "a.com" && http.headers.x_v == "2" && http.path ^= "/"' },
        { U2, 8, 'http.host == "a.com" && http.queries.q == "1"' },
        { U3, 7, 'http.path ^= "/b" && http.method == "POST"' },
        { U4, 1, 'http.headers.x_w ~ "^w" || net.src.port == 7' }
    )
    local two = assert(gateway.new())
    local all = assert(gateway.new({ read_all_fields = true }))
    assert(two:update(1, routes))
    assert(all:update(1, routes))
    local hosts = { "a.com", "b.com" }
    local paths = { "/", "/b", "/bx/y", "/c" }
    local methods = { "GET", "POST" }
    local headers = { {}, { ["x-v"] = "2" }, { ["x-v"] = { "1", "2" } }, { ["x-w"] = "wow" },
        { ["x-v"] = "2", ["x-w"] = "no" } }
    local args = { {}, { q = "1" }, { q = { "0", "1" } } }
    local n = 0
    for _, host in ipairs(hosts) do
        for _, uri in ipairs(paths) do
            for _, method in ipairs(methods) do
                for _, h in ipairs(headers) do
                    for _, a in ipairs(args) do
                        set_request({ var = { host = host, uri = uri, remote_port = "7" },
                            method = method, headers = h, args = a })
                        local u1, m1, c1 = two:route()
                        local u2, m2, c2 = all:route()
                        same({ u1, m1, flat(c1) }, { u2, m2, flat(c2) }, host .. uri .. method)
                        n = n + 1
                    end
                end
            end
        end
    end
    eq(n, 240)
    -- The query value is malformed, but no candidate of b.com's request uses http.queries.q.
    set_request({ var = { host = "b.com", uri = "/b" }, method = "POST", args = { q = "\255" } })
    eq(two:route(), U3)
    local uuid, err = all:route()
    eq(uuid, nil)
    has(err, "not valid UTF-8")
    -- For a.com it is needed (U2 is a candidate): rejected either way.
    set_request({ var = { host = "a.com", uri = "/b" }, method = "POST", args = { q = "\255" } })
    uuid, err = two:route()
    eq(uuid, nil)
    has(err, "not valid UTF-8")
end

function T.explain_header_is_off_by_default()
    local gw = assert(gateway.new())
    assert(gw:update(1, list({ U1, 1, 'http.path ^= "/a"' })))
    set_request({ var = { uri = "/a", remote_addr = "127.0.0.1" },
        headers = { ["x-atc-explain"] = "1" } })
    eq(gw:route(), U1)
    eq(ngx.ctx.atc_explanation, nil)
    same(log.vars, { "request_uri" }, "the header is not even looked at")
    -- On demand, the gateway's context explains the request last routed.
    local why = assert(gw:explain())
    eq(why.winner, U1)
end

function T.explain_header()
    local gw = assert(gateway.new({ explain_header = "X-Atc-Explain" }))
    local multi = 'http.host == "api.example.com"\n  && !(http.path ^= "/v1")'
    assert(gw:update(1, list(
        { U1, 30, 'http.host == "api.example.com" && http.path ^= "/v2"' },
        { U2, 20, multi },
        { U3, 10, 'http.path ^= "/v"' },
        { U4, 5, 'http.host == "other.example.com"' }
    )))
    local function req(path, addr, with_header)
        set_request({
            var = { uri = path, host = "api.example.com", remote_addr = addr },
            headers = with_header and { ["x-atc-explain"] = "yes" } or {},
        })
    end

    -- Asked from the host itself: explained, and the summary names each failed predicate.
    req("/v1/users", "127.0.0.1", true)
    eq(gw:route(), U3)
    local why = ngx.ctx.atc_explanation
    eq(why.winner, U3)
    eq(#why.candidates, 3)
    eq(why.routes, 4)
    eq(gateway.explain_summary(why), "winner=" .. U3 .. " candidates=3 routes=4; "
        .. U1 .. ' failed at 1:35 http.path ^= "/v2"; '
        .. U2 .. ' failed at 2:8 !(http.path ^= "/v1")')
    -- Not asked: not explained, one more variable read than without the option.
    req("/v1/users", "127.0.0.1", false)
    eq(gw:route(), U3)
    eq(ngx.ctx.atc_explanation, nil)
    eq(log.vars[#log.vars], "http_x_atc_explain")
    -- Asked by a client the allow-list does not name: ignored.
    req("/v1/users", "192.0.2.7", true)
    eq(gw:route(), U3)
    eq(ngx.ctx.atc_explanation, nil)
    -- Nothing matches: explained all the same.
    set_request({ var = { uri = "/x", host = "nowhere.example", remote_addr = "::1" },
        headers = { ["x-atc-explain"] = "1" } })
    eq(gw:route(), nil)
    why = ngx.ctx.atc_explanation
    eq(gateway.explain_summary(why):match("^[^;]*"), "winner=none candidates=" .. #why.candidates
        .. " routes=4")
    -- A request that cannot be read is not explained (it was not routed).
    set_request({ var = { uri = "/caf\233", remote_addr = "127.0.0.1" },
        headers = { ["x-atc-explain"] = "1" } })
    local uuid, err = gw:route()
    eq(uuid, nil)
    has(err, "UTF-8")
    eq(ngx.ctx.atc_explanation, nil)

    -- An allow-list of its own, or a function.
    local listed = assert(gateway.new({ explain_header = "X-Why", explain_allow = { "192.0.2.7" } }))
    assert(listed:update(1, list({ U3, 10, 'http.path ^= "/"' })))
    set_request({ var = { uri = "/a", remote_addr = "192.0.2.7" }, headers = { ["x-why"] = "1" } })
    eq(listed:route(), U3)
    eq(ngx.ctx.atc_explanation.winner, U3)
    set_request({ var = { uri = "/a", remote_addr = "127.0.0.1" }, headers = { ["x-why"] = "1" } })
    eq(listed:route(), U3)
    eq(ngx.ctx.atc_explanation, nil, "the default list is replaced")
    local calls = 0
    local by_fn = assert(gateway.new({ explain_header = "X-Why", explain_allow = function()
        calls = calls + 1
        return ngx.var.http_x_token == "secret"
    end }))
    assert(by_fn:update(1, list({ U3, 10, 'http.path ^= "/"' })))
    set_request({ var = { uri = "/a" }, headers = { ["x-why"] = "1", ["x-token"] = "secret" } })
    eq(by_fn:route(), U3)
    eq(ngx.ctx.atc_explanation.winner, U3)
    set_request({ var = { uri = "/a" }, headers = { ["x-why"] = "1", ["x-token"] = "guess" } })
    eq(by_fn:route(), U3)
    eq(ngx.ctx.atc_explanation, nil)
    set_request({ var = { uri = "/a" } })
    eq(by_fn:route(), U3)
    eq(calls, 2, "asked only when the header is there")

    -- Bad options.
    local none, e = gateway.new({ explain_header = "X Atc" })
    eq(none, nil)
    has(e, "explain_header must be a header name")
    none, e = gateway.new({ explain_header = "X-Atc", explain_allow = "127.0.0.1" })
    eq(none, nil)
    has(e, "explain_allow must be")
    none, e = gateway.new({ explain_header = "X-Atc", explain_allow = { 127 } })
    eq(none, nil)
    has(e, "as strings")
end

function T.explain_summary_fits_a_header()
    local why = { winner = nil, routes = 100, candidates = {} }
    for i = 1, 50 do
        why.candidates[i] = { id = string.format("a8f2c1e4-0000-4000-8000-%012d", i),
            matched = false, predicates = { { text = 'http.path ^= "/\n' .. i .. '"', line = 1,
            column = 1, negated = false } } }
    end
    local s = gateway.explain_summary(why, 500)
    assert(#s <= 500, #s)
    eq(s:find("[%z\1-\31]"), nil, "no control characters")
    has(s, "winner=none candidates=50 routes=100; ")
    local shown = select(2, s:gsub(" failed at ", ""))
    has(s, "; +" .. (50 - shown) .. " more failed")
    assert(shown > 0 and shown < 50, shown)
    -- Everything, when it fits.
    s = gateway.explain_summary(why, 100000)
    eq(select(2, s:gsub(" failed at ", "")), 50)
    eq(s:find("more failed", 1, true), nil)
    has(s, 'failed at 1:1 http.path ^= "/ 50"')
    -- An explanation that failed, and no explanation.
    eq(gateway.explain_summary({ error = "the context was\ncreated elsewhere" }),
        "error=the context was created elsewhere")
    eq(gateway.explain_summary(nil), nil)
end

-- Whether `s` is whole UTF-8: every lead byte followed by as many continuation bytes as it says.
local function whole_utf8(s)
    local i, n = 1, #s
    while i <= n do
        local b = s:byte(i)
        local len = b < 0x80 and 1 or b >= 0xF0 and 4 or b >= 0xE0 and 3 or b >= 0xC2 and 2 or nil
        if not len or i + len - 1 > n then
            return false
        end
        for j = i + 1, i + len - 1 do
            local c = s:byte(j)
            if c < 0x80 or c >= 0xC0 then
                return false
            end
        end
        i = i + len
    end
    return true
end

-- The limit is on bytes, for every part of the summary (the head too), and a cut never splits a
-- UTF-8 character.
function T.explain_summary_cap_is_bytes_and_keeps_characters()
    local why = { winner = U3, routes = 4, candidates = {
        { id = U1, matched = false, predicates = { { text = 'http.path == "/caf\u{e9}/\u{1F600}"',
            line = 1, column = 1, negated = false } } },
        { id = U3, matched = true, predicates = {} },
    } }
    local full = gateway.explain_summary(why)
    has(full, "\u{1F600}")
    local errored = { error = "r\u{e9}gion \u{1F600} \u{4E2D}\u{6587} not found" }
    local full_error = gateway.explain_summary(errored)
    for _, case in ipairs({ { why, full }, { errored, full_error } }) do
        for max = 0, #case[2] + 2 do
            local s = gateway.explain_summary(case[1], max)
            assert(#s <= max, ("%d bytes for a limit of %d: %q"):format(#s, max, s))
            assert(whole_utf8(s), ("a character cut at limit %d: %q"):format(max, s))
            if case[1] == errored then
                eq(case[2]:sub(1, #s), s, "a prefix of the whole error")
                assert(#s >= max - 3, "at most a character's tail is dropped")
            end
        end
    end
    -- The example of the issue: 10 bytes asked, not 33.
    local s = gateway.explain_summary({ winner = nil, routes = 100, candidates = {} }, 10)
    eq(s, "winner=non")
    eq(gateway.explain_summary(why, 0), "")
    eq(#gateway.explain_summary(why, 10.9), 10)
    local ok, err = pcall(gateway.explain_summary, why, "10")
    eq(ok, false)
    has(err, "max_len must be a number")
end

-- captures = "lazy": route() answers as in the default "table" mode, but its captures are one
-- read-only object of the gateway that reads a capture when it is indexed. gw:capture(key) and
-- gw:captures([into]) read the same in either mode.
function T.lazy_captures_option()
    local flat = require("captures_flat").flat
    local routes = list(
        { U1, 9, [[http.path ~ r#"^/users/(?<id>\d+)/(\w+)$"#]] },
        { U2, 8, [[http.host == "a.com" && http.path ~ r#"^/a/(?<x>[^/]+)"#]] },
        { U3, 1, 'http.path ^= "/"' }
    )
    local eager = assert(gateway.new())
    local lazy = assert(gateway.new({ captures = "lazy" }))
    assert(eager:update(1, routes))
    assert(lazy:update(1, routes))
    local object = nil
    for _, r in ipairs({
        { uri = "/users/42/orders" }, { uri = "/a/b/c", host = "a.com" },
        { uri = "/a/b/c", host = "b.com" }, { uri = "/" }, { uri = "/users/x/y" },
    }) do
        set_request({ var = r })
        local u1, m1, c1 = eager:route()
        local u2, m2, c2 = lazy:route()
        eq(u2, u1, r.uri .. " uuid")
        eq(m2, m1, r.uri .. " matched path")
        eq(c2 == nil, c1 == nil, r.uri .. ": captures only when the route captured")
        if c1 then
            -- Every key reads the same, through the object and through gw:capture().
            for k, v in pairs(c1) do
                eq(c2[k], v, r.uri .. " captures[" .. tostring(k) .. "]")
                eq(lazy:capture(k), v)
            end
            eq(c2.nope, nil, "a name the route did not capture")
            eq(c2[7], nil)
            -- The whole table, new or reused, as the default mode gives it.
            eq(flat(lazy:captures()), flat(c1))
            local reused = { left = "over" }
            eq(lazy:captures(reused), reused)
            eq(flat(reused), flat(c1))
            -- The same object for every request: nothing made per request.
            object = object or c2
            eq(rawequal(c2, object), true, "one object per gateway")
            -- Read-only: a key set on the shared object would hide later requests' captures.
            local ok, err = pcall(function() c2.id = "1" end)
            eq(ok, false)
            has(err, "read-only")
            eq(getmetatable(c2), "resty.router.gateway lazy captures")
        else
            eq(lazy:capture(0), nil)
            same(lazy:captures(), {})
        end
        -- gw:capture() and gw:captures() read the default mode's gateway as well.
        eq(eager:capture("id"), c1 and c1.id)
        eq(flat(eager:captures()), flat(c1 or {}))
    end
    eq(object ~= nil, true)

    local gw, err = gateway.new({ captures = "strings" })
    eq(gw, nil)
    has(err, 'captures must be "table" or "lazy"')
end

-- Lazy captures are valid until the next route() of the gateway. A request that yields between
-- its route() and reading them, while another request is routed, gets an error, never the
-- other request's values; the request routed last reads its own; a table from gw:captures()
-- keeps its strings.
function T.lazy_captures_are_valid_until_the_next_route()
    local gw = assert(gateway.new({ captures = "lazy" }))
    assert(gw:update(1, list(
        { U1, 9, [[http.path ~ r#"^/users/(?<id>\d+)$"#]] },
        { U2, 1, 'http.path ^= "/"' }
    )))
    -- Request A is routed and keeps its captures (ngx.ctx is the mock's per-request table,
    -- which stands for the request outside nginx; inside, it is the request pointer).
    set_request({ var = { uri = "/users/42" } })
    local ctx_a = ngx.ctx
    local _, _, caps_a = gw:route()
    eq(caps_a.id, "42")
    local copy = gw:captures()

    -- A yields; request B is routed meanwhile, and its route captures too.
    set_request({ var = { uri = "/users/7" } })
    local ctx_b = ngx.ctx
    local _, _, caps_b = gw:route()
    eq(caps_b.id, "7")

    -- A resumes and reads: an error, whichever way it reads.
    ngx.ctx = ctx_a
    local ok, err = pcall(function() return caps_a.id end)
    eq(ok, false)
    has(err, "captures read after the gateway routed another request")
    has(err, "gateway_test.lua", "the error points at the read")
    eq(pcall(gw.capture, gw, "id"), false)
    eq(pcall(gw.captures, gw), false)
    eq(copy.id, "42", "a copy keeps its values")

    -- B, the request routed last, reads its own.
    ngx.ctx = ctx_b
    eq(caps_a.id, "7", "the one object reads the request routed last")

    -- B routes again (after an update that removed its route): the object follows the new
    -- result; a route without captures gives nil for every key.
    assert(gw:update(2, list({ U2, 1, 'http.path ^= "/"' })))
    local uuid, _, caps = gw:route()
    eq(uuid, U2)
    eq(caps, nil)
    eq(caps_b.id, nil)
    eq(caps_b[0], nil)
    -- A miss: nothing either.
    assert(gw:update(3, list({ U1, 9, 'http.path ^= "/nothing"' })))
    eq(gw:route(), nil)
    eq(caps_b.id, nil)

    -- request_values() resets the context: no request's captures are there any more.
    gw:request_values("plain")
    eq(pcall(function() return caps_b.id end), false)
end

-- The source of request values: lua-nginx-module's FFI functions only inside nginx, on a
-- reviewed lua-nginx-module version, with lua-resty-core; the plain ngx API otherwise or when
-- asked for. (ffi/tests/nginx.rs checks that a real nginx 0.10.23 gets the native source.)
function T.request_source_option()
    local sources = require("resty.router.gateway.sources")
    eq(sources.native, nil, "no native source under the mock")
    eq(sources.native_off, "not inside nginx")
    eq(assert(gateway.new()):request_source(), "plain")
    eq(assert(gateway.new({ request_source = "plain" })):request_source(), "plain")
    local gw, err = gateway.new({ request_source = "native" })
    eq(gw, nil)
    eq(err, 'request_source "native" is not available: not inside nginx')
    gw, err = gateway.new({ request_source = "fast" })
    eq(gw, nil)
    has(err, 'request_source must be "auto", "plain" or "native", got fast')

    -- The version guard, with the module loaded again under other ngx.config values.
    local name = "resty.router.gateway.sources"
    local function off_with(config)
        package.loaded[name] = nil
        _G.ngx.config = config
        local ok, fresh = pcall(require, name)
        _G.ngx.config = nil
        package.loaded[name] = sources
        assert(ok, fresh)
        eq(fresh.native, nil)
        return fresh.native_off
    end
    eq(off_with({ subsystem = "stream", ngx_lua_version = 10023 }), "not the http subsystem")
    local range = sources.NATIVE_VERSIONS
    same(range, { min = 10016, max = 10029 })
    for _, v in ipairs({ 10015, 10030, 10100, "10023" }) do
        has(off_with({ subsystem = "http", ngx_lua_version = v }),
            "lua-nginx-module version " .. v .. " is not one reviewed (10016 to 10029)")
    end
    -- A reviewed version gets past the version check (here to lua-resty-core, which the
    -- mock does not have).
    for _, v in ipairs({ 10016, 10023, 10029 }) do
        has(off_with({ subsystem = "http", ngx_lua_version = v }), "resty.core")
    end
end

---------------------------------------------------------------------------------------------
-- Updates on the builder thread: the mock gets nginx's phase, timers, sleep and log.

local ffi = require("ffi")
if not pcall(function() return ffi.C.poll end) then
    pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")
end
local function sleep_ms(ms)
    ffi.C.poll(nil, 0, ms)
end

-- Makes the mock an nginx worker in `phase`: timers are recorded (fire them with
-- nginx.run_timers()), ngx.sleep yields inside a coroutine marked with nginx.yielding (so a
-- test can interleave updates) and sleeps otherwise, ngx.log records.
local function async_ngx(phase)
    local nginx = { phase = phase or "access", timers = {}, logs = {}, yielding = {} }
    ngx.get_phase = function() return nginx.phase end
    ngx.timer = {
        at = function(delay, fn, ...)
            nginx.timers[#nginx.timers + 1] = { delay = delay, fn = fn, args = { ... } }
            return true
        end,
    }
    ngx.sleep = function(t)
        nginx.slept = t
        local co = coroutine.running()
        if co and nginx.yielding[co] then
            coroutine.yield("sleep")
        else
            sleep_ms(t * 1000)
        end
    end
    ngx.ERR, ngx.WARN = 4, 5
    ngx.log = function(level, ...)
        nginx.logs[#nginx.logs + 1] = { level = level, text = table.concat({ ... }) }
    end
    function nginx.run_timers()
        local due = nginx.timers
        nginx.timers = {}
        for _, t in ipairs(due) do
            t.fn(false, unpack(t.args))
        end
        return #due
    end
    -- A coroutine whose ngx.sleep calls yield "sleep".
    function nginx.co(fn)
        local co = coroutine.create(fn)
        nginx.yielding[co] = true
        return co
    end
    return nginx
end

-- Runs `fn` with the mock made an nginx worker (async_ngx), and gives the plain mock back
-- afterwards, pass or fail: lua/t/run.lua runs every test in one Lua state.
local function with_nginx(fn)
    return function()
        local ok, err = xpcall(fn, debug.traceback)
        install_ngx()
        if not ok then
            error(err, 0)
        end
    end
end

-- Until the router has an outcome waiting (without applying it).
local function until_ready(gw)
    for _ = 1, 60000 do
        if gw.router:sync_ready() then
            return
        end
        sleep_ms(1)
    end
    error("no build finished in 60 s")
end

-- Lists large enough that a build is usually still in flight when the next update comes (each
-- test also accepts one already done). ATC_TEST_SCALE shrinks them: lua/t/valgrind.sh runs
-- these tests about 50 times slower and sets it.
local SCALE = tonumber(os.getenv("ATC_TEST_SCALE") or "") or 1

local function numbered(n, tag)
    local ids, prios, exprs = {}, {}, {}
    for i = 1, n do
        ids[i] = string.format("a8f2c1e4-0000-4000-8000-%012d", i)
        prios[i] = i
        exprs[i] = string.format('http.path ^= "/%s/%d"', tag, i)
    end
    return { ids = ids, priorities = prios, expressions = exprs }
end

-- A list whose build takes a while: `n` routes, times ATC_TEST_SCALE.
local function slow_to_build(n, tag)
    return numbered(math.max(2, math.floor(n * SCALE)), tag)
end

-- A request routes by the table in force; the built table comes in at the next route(), with
-- its plan, in one step.
T.async_update_applies_on_route = with_nginx(function()
    local nginx = async_ngx("content")
    local gw = assert(gateway.new())
    same({ gw:update(1, list({ U1, 1, 'http.path ^= "/a"' })) }, { true, "building" })
    eq(gw:pending(), 1)
    -- Asked again while it builds: nothing more is built (or, if the build was quick, it is
    -- the applied version now); either way the loader is not called.
    local again, how = gw:update(1, must_not_load)
    eq(again, true)
    eq(how == "building" or how == "applied", true, how)
    eq(#nginx.timers, 1, "a timer to apply it")
    if how == "building" then
        until_ready(gw)
        eq(gw:version(), nil, "nothing applied before a request or the timer")
    end
    set_request({ var = { uri = "/a" } })
    eq(gw:route(), U1, "the request that finds it ready is routed by it")
    eq(gw:version(), 1)
    eq(gw:pending(), nil)
    same(gw:fields_in_use(), { "http.path" })
    -- The timer finds nothing to do and is not armed again.
    nginx.run_timers()
    eq(#nginx.timers, 0)
    -- The applied version: true, so that assert(gw:update(...)) holds.
    same({ gw:update(1, must_not_load) }, { true, "applied" })

    -- A header route: the plan comes in with the table, not before.
    assert(gw:update(2, list({ U1, 1, 'http.path ^= "/a"' }, { U2, 2, 'http.headers.x_b == "1"' })))
    until_ready(gw)
    set_request({ var = { uri = "/a" }, headers = { ["x-b"] = "1" } })
    eq(gw:route(), U2)
    eq(log.headers, 1)
    local ok, rep = gw:wait(2)
    eq(ok, true)
    same({ rep.added, rep.removed, rep.changed, rep.unchanged }, { 1, 0, 0, 1 })
end)

T.async_update_applies_on_timer = with_nginx(function()
    local nginx = async_ngx("timer")
    local gw = assert(gateway.new({ poll_interval = 0.5 }))
    assert(gw:update("a", list({ U1, 1, 'http.path ^= "/a"' })))
    eq(#nginx.timers, 1)
    eq(nginx.timers[1].delay, 0.5)
    until_ready(gw)
    nginx.run_timers()
    eq(gw:version(), "a", "applied by the timer, without a request")
    eq(#nginx.timers, 0, "nothing left to build: no timer")
    -- A timer that fires before the build is done arms itself again.
    local big = slow_to_build(20000, "t")
    assert(gw:update("b", big))
    eq(#nginx.timers, 1)
    local fired = 0
    while gw:version() ~= "b" do
        fired = fired + nginx.run_timers()
        sleep_ms(1)
    end
    eq(fired >= 1, true)
    eq(#nginx.timers, 0)
    -- A worker exiting: the premature timer does nothing.
    assert(gw:update("c", list({ U2, 1, 'http.path ^= "/c"' })))
    local t = table.remove(nginx.timers)
    until_ready(gw)
    t.fn(true, unpack(t.args))
    eq(gw:version(), "b")
    eq(gw:wait("c"), true)
end)

-- A refused version: returned by wait(), logged, kept by last_error(); not built again until
-- the version or the mode changes.
T.async_refusals = with_nginx(function()
    local nginx = async_ngx("access")
    local gw = assert(gateway.new())
    assert(gw:update(1, list({ U1, 1, 'http.path ^= "/a"' })))
    assert(gw:wait(1))
    eq(gw:last_error(), nil)
    local bad = list({ U1, 1, 'http.path ^= "/a"' }, { U2, 2, "http.path =" })
    same({ gw:update(2, bad) }, { true, "building" })
    local ok, err, errs = gw:wait(2)
    eq(ok, nil)
    has(err, "1 invalid route(s), nothing changed; route #2")
    eq(errs[1].id, U2)
    eq(gw:version(), 1, "the applied version stays")
    local lerr, lerrs, lversion = gw:last_error()
    eq(lerr, err)
    eq(lerrs, errs)
    eq(lversion, 2)
    eq(#nginx.logs, 1)
    eq(nginx.logs[1].level, ngx.ERR)
    has(nginx.logs[1].text, "version 2 refused, 1 stays in force")
    -- Asked again: refused again at once, nothing built.
    local again = { gw:update(2, must_not_load) }
    eq(again[1], nil)
    eq(again[2], err)
    eq(gw.router:sync_state(), "idle")
    -- The same version in apply-valid mode is another request: built, applied.
    assert(gw:update(2, bad, "apply_valid"))
    local _, rep = assert(gw:wait(2))
    eq(#rep.errors, 1)
    eq(gw:version(), 2)
    eq(gw:last_error(), nil, "cleared by a later version applied")
    -- A loader that fails is kept too.
    ok, err = gw:update(3, function() return nil, "store down" end)
    eq(ok, nil)
    has(err, "store down")
    has(gw:last_error(), "store down")
    -- A text that is no route list.
    assert(gw:update(4, "[{"))
    ok, err = gw:wait(4)
    eq(ok, nil)
    eq(type(err), "string")
    eq(gw:version(), 2)
    -- Waiting for what was never started, or not long enough.
    ok, err = gw:wait(99)
    eq(ok, nil)
    has(err, "version 99 was not started")
    assert(gw:update(5, slow_to_build(30000, "w")))
    ok, err = gw:wait(5, 0)
    if ok == nil then
        has(err, "timeout: version 5 is still being built")
    end
    assert(gw:wait(5))
    -- Waiting where nginx cannot sleep (and must not block).
    assert(gw:update(6, slow_to_build(30000, "x")))
    nginx.phase = "log"
    ok, err = gw:wait(6)
    if ok == nil then
        has(err, "in the log phase")
    end
    nginx.phase = "access"
    assert(gw:wait(6))
end)

-- Versions started one after the other: the last one is applied, an earlier one is applied
-- before it or superseded, never after it.
T.async_supersede_orderings = with_nginx(function()
    async_ngx("content")
    local gw = assert(gateway.new())
    local big = slow_to_build(20000, "s")
    assert(gw:update(1, big))
    assert(gw:update(2, list({ U1, 1, 'http.path ^= "/two"' })))
    local ok1, err1 = gw:wait(1)
    local ok2 = gw:wait(2)
    eq(ok2, true)
    if not ok1 then
        has(err1, "version 1 was superseded by version 2 before it was applied")
    end
    eq(gw:version(), 2)
    for _ = 1, 5 do
        sleep_ms(2)
        set_request({ var = { uri = "/two" } })
        eq(gw:route(), U1)
        eq(gw:version(), 2, "never the older version after the newer one")
    end
    -- Going back to an applied version while a newer one builds: it is built again.
    assert(gw:update(3, big))
    same({ gw:update(2, list({ U1, 1, 'http.path ^= "/two"' })) }, { true, "building" })
    assert(gw:wait(2))
    eq(gw:version(), 2)
end)

-- Two updates whose loaders yield: whichever hands its list over last is the newer one; a call
-- that started earlier and finds a later one's list already handed over gives way.
T.async_overlapping_loaders = with_nginx(function()
    local nginx = async_ngx("content")
    local gw = assert(gateway.new())
    local function loader(routes)
        return function()
            coroutine.yield("loading")
            return routes
        end
    end
    -- Earlier call (10) resumes after the later one (11) handed its list over: it gives way.
    local a = nginx.co(function() return gw:update(10, loader(list({ U1, 1, 'http.path ^= "/ten"' }))) end)
    local b = nginx.co(function() return gw:update(11, loader(list({ U1, 1, 'http.path ^= "/eleven"' }))) end)
    eq(select(2, coroutine.resume(a)), "loading")
    eq(select(2, coroutine.resume(b)), "loading")
    local _, ok_b, how_b = coroutine.resume(b)
    same({ ok_b, how_b }, { true, "building" })
    local _, ok_a, err_a = coroutine.resume(a)
    eq(ok_a, nil)
    has(err_a, "version 10 was superseded by version 11 while its loader ran")
    assert(gw:wait(11))
    eq(gw:version(), 11)
    -- In call order: both are handed over, the later one ends in force.
    a = nginx.co(function() return gw:update(12, loader(list({ U1, 1, 'http.path ^= "/12"' }))) end)
    b = nginx.co(function() return gw:update(13, loader(list({ U1, 1, 'http.path ^= "/13"' }))) end)
    coroutine.resume(a)
    coroutine.resume(b)
    local _, ok12 = coroutine.resume(a)
    local _, ok13 = coroutine.resume(b)
    eq(ok12, true)
    eq(ok13, true)
    assert(gw:wait(13))
    eq(gw:version(), 13)
    local ok = gw:wait(12)
    eq(ok == true or ok == nil, true)
    eq(gw:version(), 13)

    -- A table handed over in chunks, giving way between them (update_slice 0: after every
    -- chunk). A later update while it is handed over waits for it (else, at many pushes a
    -- second, no hand-over of a large table would ever end), then goes once the builder is
    -- free.
    local gw2 = assert(gateway.new({ update_chunk = 500, update_slice = 0 }))
    local c = nginx.co(function() return gw2:update(20, numbered(3000, "c")) end)
    local _, first = coroutine.resume(c)
    eq(first, "sleep", "a yield between two chunks")
    -- Not ngx.sleep(0): stock nginx runs a zero sleep's timer again before it reads a socket.
    eq(nginx.slept > 0, true, "the hand-over gives way with a sleep nginx waits for")
    eq(gw2.router:sync_state(), "idle", "nothing handed over before the last chunk")
    same({ gw2:update(21, list({ U2, 1, 'http.path ^= "/21"' })) }, { true, "building" })
    eq(gw2.next.version, 21, "waits for the hand-over")
    local ok20, how20
    repeat
        _, ok20, how20 = coroutine.resume(c)
    until ok20 ~= "sleep"
    same({ ok20, how20 }, { true, "building" })
    assert(gw2:wait(21))
    eq(gw2:version(), 21)
    -- A hand-over abandoned while it yielded (its request ended): the next lists wait for it
    -- only so long.
    local gone = nginx.co(function() return gw2:update(23, numbered(3000, "g")) end)
    eq(select(2, coroutine.resume(gone)), "sleep")
    assert(gw2:update(24, list({ U2, 1, 'http.path ^= "/24"' })))
    gw2.handing_at = gw2.handing_at - 2000
    assert(gw2:wait(24))
    -- And one whose list is handed over while an earlier, yielding one is still at it makes
    -- that one give way.
    local older = nginx.co(function() return gw2:update(25, numbered(3000, "o")) end)
    eq(select(2, coroutine.resume(older)), "sleep")
    gw2.handing_at = gw2.handing_at - 2000
    assert(gw2:update(26, list({ U2, 1, 'http.path ^= "/26"' })))
    local _, ok25, err25 = coroutine.resume(older)
    eq(ok25, nil)
    has(err25, "version 25 was superseded by version 26 while its list was handed over")
    assert(gw2:wait(26))
    -- Unhindered, the chunks all go over and the version applies.
    c = nginx.co(function() return gw2:update(22, numbered(3000, "c")) end)
    local yields = 0
    while true do
        local _, x, y = coroutine.resume(c)
        if x ~= "sleep" then
            same({ x, y }, { true, "building" })
            break
        end
        yields = yields + 1
    end
    -- 3000 routes: one step of the copy kept for the next diff (2000 entries a step), then five
    -- chunks of 500.
    eq(yields, 6, "3000 routes in chunks of 500")
    assert(gw2:wait(22))
    set_request({ var = { uri = "/c/2999" } })
    eq(gw2:route(), "a8f2c1e4-0000-4000-8000-000000002999")
end)

-- Lists as one string (TSV, JSON): read on the builder thread.
T.async_string_lists = with_nginx(function()
    async_ngx("access")
    local gw = assert(gateway.new())
    local tsv = "1\t" .. U1 .. "\thttp.path ^= \"/t\"\n2\t" .. U2 .. "\thttp.path ^= \"/t/2\"\n"
    assert(gw:update("t", tsv))
    local _, rep = assert(gw:wait("t"))
    eq(rep.added, 2)
    set_request({ var = { uri = "/t/2" } })
    eq(gw:route(), U2)
    local json = '[{"id": "' .. U3 .. '", "priority": 3, "expression": "http.path ^= \\"/j\\""}]'
    assert(gw:update("j", function() return json end))
    assert(gw:wait("j"))
    set_request({ var = { uri = "/j" } })
    eq(gw:route(), U3)
    assert(gw:update("bad", "1\t" .. U1 .. "\thttp.path ^=\n"))
    local ok, err, errs = gw:wait("bad")
    eq(ok, nil)
    has(err, "route at line 1")
    eq(errs[1].index, 1)
    eq(gw:version(), "j")
end)

-- nginx's init and init_worker phases have no request to stall (and init no timer): update()
-- applies the list before it returns, a string included.
T.updates_in_init_phases_are_applied_at_once = with_nginx(function()
    local nginx = async_ngx("init")
    local gw = assert(gateway.new())
    local ok, state, rep = gw:update(1, list({ U1, 1, 'http.path ^= "/i"' }))
    same({ ok, state, rep.added }, { true, "applied", 1 })
    ok, state, rep = gw:update(2, "5\t" .. U2 .. "\thttp.path ^= \"/s\"\n")
    -- (Built fresh: the builder has no copy of a table r:sync made, so the report counts
    -- from an empty table.)
    same({ ok, state, rep.added }, { true, "applied", 1 })
    eq(gw:route(), nil)
    set_request({ var = { uri = "/s" } })
    eq(gw:route(), U2)
    nginx.phase = "init_worker"
    local err, errs
    ok, err, errs = gw:update(3, "5\t" .. U2 .. "\thttp.path ^=\n")
    eq(ok, nil)
    has(err, "route at line 1")
    eq(#errs, 1)
    eq(#nginx.timers, 0, "no timer")
    eq(gw:version(), 2)
    -- updates = "async": handed over in init_worker too (timers exist there).
    local gw2 = assert(gateway.new({ updates = "async" }))
    same({ gw2:update(1, list({ U1, 1, 'http.path ^= "/i"' })) }, { true, "building" })
    assert(gw2:wait(1))
    -- updates = "sync": applied at once in a request too.
    nginx.phase = "access"
    local gw3 = assert(gateway.new({ updates = "sync" }))
    same({ gw3:update(1, list({ U1, 1, 'http.path ^= "/i"' })) }, { true, "applied", gw3.done[1].report })
    local nope
    nope, err = gateway.new({ updates = "later" })
    eq(nope, nil)
    has(err, "updates must be")
end)

-- While a build is in flight, newer lists wait in the gateway and only the newest is handed
-- over once the builder is free: frequent pushes cost one hand-over per build.
T.async_pushes_wait_for_the_build_in_flight = with_nginx(function()
    local nginx = async_ngx("content")
    local gw = assert(gateway.new())
    assert(gw:update(1, slow_to_build(30000, "p")))
    eq(gw.router:sync_state() ~= "idle", true)
    -- (If the first build was already done, these are handed over at once: both fine.)
    same({ gw:update(2, list({ U1, 1, 'http.path ^= "/two"' })) }, { true, "building" })
    same({ gw:update(3, list({ U1, 1, 'http.path ^= "/three"' })) }, { true, "building" })
    same({ gw:update(3, must_not_load) }, { true, "building" }, "a loader's version waiting")
    eq(gw:pending(), 3)
    local ok, err = gw:wait(2)
    if not ok then
        has(err, "version 2 was superseded by version 3 before it was")
    end
    assert(gw:wait(3))
    eq(gw:version(), 3)
    set_request({ var = { uri = "/three" } })
    eq(gw:route(), U1)
    -- Without wait(): the timer hands the waiting list over once the build is done.
    assert(gw:update(4, slow_to_build(30000, "q")))
    assert(gw:update(5, list({ U2, 1, 'http.path ^= "/five"' })))
    local rounds = 0
    while gw:version() ~= 5 do
        rounds = rounds + 1
        assert(rounds < 60000, "the timer never got to version 5")
        nginx.run_timers()
        sleep_ms(1)
    end
    -- A list still waiting when the builder is free and a newer update comes: the newer one
    -- goes at once, the waiting one never.
    assert(gw:update(6, slow_to_build(30000, "r")))
    assert(gw:update(7, list({ U2, 1, 'http.path ^= "/seven"' })))
    repeat
        sleep_ms(1)
    until gw.router:sync_ready() or gw.next == nil
    if gw.next ~= nil then
        -- the builder is done with 6, 7 still waits: 8 comes before the timer.
        assert(gw:update(8, list({ U2, 1, 'http.path ^= "/eight"' })))
        local ok7, err7 = gw:wait(7)
        eq(ok7, nil)
        has(err7, "version 7 was superseded by version 8 before it was handed over")
        assert(gw:wait(8))
        nginx.run_timers()
        eq(gw:version(), 8, "the waiting list is not handed over after the newer one")
    end
    -- update_interval: at most one hand-over per interval; the newest list waits.
    -- An hour, so that a slow run (valgrind) cannot outlast it; the test then moves the last
    -- hand-over back by the interval instead of sleeping through it.
    local slow = assert(gateway.new({ update_interval = 3600 }))
    assert(slow:update("a", list({ U1, 1, 'http.path ^= "/a"' })))
    assert(slow:wait("a"))
    assert(slow:update("b", list({ U1, 1, 'http.path ^= "/b"' })))
    eq(slow.next ~= nil and slow.next.version, "b", "waits for the interval")
    eq(slow:version(), "a")
    nginx.run_timers()
    eq(slow:version(), "a", "the timer keeps to the interval too")
    slow.last_handover = slow.last_handover - 3600 * 1000
    assert(slow:wait("b"))
    eq(slow:version(), "b")
end)

-- resty.router.gateway.diff: what a whole list changes from the last one, or nil whenever it
-- cannot be sure (the library then judges the whole list).
function T.diff_finds_what_a_whole_list_changes()
    local diff = require("resty.router.gateway.diff")
    local base = numbered(50, "d")
    local function sent()
        return assert(diff.copy(nil, base.ids, base.priorities, base.expressions, 50))
    end
    local function arrays(l)
        local c = { ids = {}, priorities = {}, expressions = {} }
        for i = 1, #l.ids do
            c.ids[i], c.priorities[i], c.expressions[i] = l.ids[i], l.priorities[i], l.expressions[i]
        end
        return c
    end
    local function of(s, l)
        return diff.of(s, nil, l.ids, l.priorities, l.expressions, #l.ids)
    end
    -- The same strings: nothing.
    local s = sent()
    local ch, at = of(s, arrays(base))
    eq(#ch.upsert.ids + #ch.remove + #at, 0)
    -- Two changed in place (an expression, a priority): those two, at their places.
    local l = arrays(base)
    l.expressions[7] = 'http.path ^= "/seven"'
    l.priorities[9] = 99
    ch, at = of(s, l)
    same(ch.upsert.ids, { base.ids[7], base.ids[9] })
    same(at, { 7, 9 })
    eq(#ch.remove, 0)
    eq(s.expressions[7], 'http.path ^= "/seven"', "sent follows")
    -- Moved entries (one inserted at the front, one taken out of the middle): the new one is
    -- put in, the gone one taken out, the moved ones are found by id.
    s = sent()
    l = arrays(base)
    local NEW = "a8f2c1e4-0000-4000-8000-999999999999"
    table.insert(l.ids, 1, NEW)
    table.insert(l.priorities, 1, 1)
    table.insert(l.expressions, 1, 'http.path ^= "/new"')
    table.remove(l.ids, 21); table.remove(l.priorities, 21); table.remove(l.expressions, 21)
    ch, at = of(s, l)
    same(ch.upsert.ids, { NEW })
    same(at, { 1 })
    same(ch.remove, { base.ids[20] })
    eq(s.n, 50)
    -- A shorter list: the tail is taken out.
    s = sent()
    l = arrays(base)
    for _ = 1, 3 do
        l.ids[#l.ids], l.priorities[#l.priorities], l.expressions[#l.expressions] = nil, nil, nil
    end
    ch = of(s, l)
    same(ch.remove, { base.ids[48], base.ids[49], base.ids[50] })
    -- Repeats, values that are not strings, most routes new: not judged here.
    l = arrays(base)
    l.ids[30] = base.ids[3]
    eq(of(sent(), l), nil, "a repeated id")
    l = arrays(base)
    table.insert(l.ids, base.ids[10]); table.insert(l.priorities, 1); table.insert(l.expressions, "x")
    eq(of(sent(), l), nil, "a repeated id at the end")
    l = arrays(base)
    l.expressions[4] = 5
    eq(of(sent(), l), nil, "an expression that is not a string")
    l = arrays(base)
    l.priorities[4] = "1"
    eq(of(sent(), l), nil, "a priority that is not a number")
    eq(of(sent(), numbered(50, "other")) ~= nil, true, "the same ids, new texts: changes")
    local renamed = arrays(base)
    for i = 1, 50 do
        renamed.ids[i] = "b" .. renamed.ids[i]:sub(2)
    end
    eq(of(sent(), renamed), nil, "every id new: the whole list goes")
    -- Route tables and parallel arrays compare alike.
    local tables = {}
    for i = 1, 50 do
        tables[i] = { id = base.ids[i], priority = base.priorities[i], expression = base.expressions[i] }
    end
    tables[5] = { id = base.ids[5], priority = 5, expression = 'http.path ^= "/five"' }
    s = assert(diff.copy(tables, nil, nil, nil, 50))
    tables[6] = { id = base.ids[6], priority = 6, expression = 'http.path ^= "/six"' }
    ch, at = diff.of(s, tables, nil, nil, nil, 50)
    same(at, { 6 })
end

-- A whole list in Lua tables hands over only what changed since the last one: the same list
-- again crosses nothing (gw:stats().routes_handed_over counts what crossed), two changes cross
-- two, and the table is always the list's.
T.a_list_of_the_same_strings_crosses_nothing = with_nginx(function()
    async_ngx("content")
    local gw = assert(gateway.new())
    local l = numbered(3000, "s")
    assert(gw:update(1, l))
    assert(gw:wait(1))
    eq(gw:stats().routes_handed_over, 3000, "the first list goes whole")
    assert(gw:update(2, l))
    local ok, rep = gw:wait(2)
    assert(ok, rep)
    eq(gw:stats().routes_handed_over, 3000, "the same strings: nothing crossed")
    same({ rep.added, rep.removed, rep.changed, rep.unchanged }, { 0, 0, 0, 3000 })
    l.expressions[10] = 'http.path ^= "/ten"'
    l.priorities[20] = 7
    assert(gw:update(3, l))
    ok, rep = gw:wait(3)
    assert(ok, rep)
    eq(gw:stats().routes_handed_over, 3002)
    same({ rep.added, rep.removed, rep.changed, rep.unchanged }, { 0, 0, 2, 2998 })
    set_request({ var = { uri = "/ten" } })
    eq(gw:route(), l.ids[10])
    -- An invalid route among the changes: refused, named by its place in the whole list; the
    -- next push goes whole (the gateway no longer knows what the builder holds for sure).
    l.expressions[30] = "http.path ^="
    assert(gw:update(4, l))
    local err, errs
    ok, err, errs = gw:wait(4)
    eq(ok, nil)
    has(err, "1 invalid route(s), nothing changed; route #30 (" .. l.ids[30] .. ")")
    same({ errs[1].index, errs[1].id }, { 30, l.ids[30] })
    l.expressions[30] = 'http.path ^= "/thirty"'
    assert(gw:update(5, l))
    assert(gw:wait(5))
    -- (The refused version's one change crossed too.)
    eq(gw:stats().routes_handed_over, 3003 + 3000)
    set_request({ var = { uri = "/thirty" } })
    eq(gw:route(), l.ids[30])
end)

-- A deterministic stream of pseudo-random numbers (tests must not depend on luck).
local function rng(seed)
    local x = seed
    return function(n)
        x = (x * 1103515245 + 12345) % 2147483648
        return x % n + 1
    end
end

-- Random lists of changes and whole lists with random edits, through gw:update: after each
-- version, the gateway's table holds exactly the model's routes, as a router synced with the
-- model's list does, and routes every request as that router does.
T.random_changes_equal_a_fresh_build = with_nginx(function()
    async_ngx("content")
    local router = require("resty.router.router")
    local context = require("resty.router.context")
    local gw = assert(gateway.new())
    local rand = rng(7)
    local N = 60
    local function id(i)
        return string.format("a8f2c1e4-0000-4000-8000-%012d", i)
    end
    local function expr(i, k)
        return string.format('http.path ^= "/r%d/%d"', i, k)
    end
    -- The model: id -> { priority, expression }, and the list order of the last whole list.
    local model, order = {}, {}
    local whole = { ids = {}, priorities = {}, expressions = {} }
    local version = 0
    local function check()
        local fresh = router.new(gw.schema)
        local ids, prios, exprs = {}, {}, {}
        for i = 1, N do
            local m = model[id(i)]
            if m then
                ids[#ids + 1], prios[#prios + 1], exprs[#exprs + 1] = id(i), m[1], m[2]
            end
        end
        assert(fresh:sync({ ids = ids, priorities = prios, expressions = exprs }))
        eq(gw.router:stats().routes, #ids, "routes of version " .. version)
        for i = 1, N do
            local m = model[id(i)]
            eq(gw.router:get_expression(id(i)), m and m[2] or nil, "route " .. i)
        end
        local c = context.new(gw.schema)
        for i = 1, N do
            for k = 0, 3 do
                c:reset()
                c:add_value("http.path", string.format("/r%d/%d", i, k))
                local want = fresh:execute(c) and c:get_result() or nil
                c:reset()
                c:add_value("http.path", string.format("/r%d/%d", i, k))
                local got = gw.router:execute(c) and c:get_result() or nil
                eq(got, want, "request /r" .. i .. "/" .. k .. " in version " .. version)
            end
        end
    end
    for step = 1, 40 do
        version = version + 1
        local bad = rand(8) == 1
        if rand(3) == 1 then
            -- A list of changes.
            local up, rm, seen, next_model = { ids = {}, priorities = {}, expressions = {} }, {}, {}, {}
            for k, v in pairs(model) do
                next_model[k] = v
            end
            for _ = 1, rand(6) do
                local i = rand(N)
                if not seen[i] then
                    seen[i] = true
                    local e = expr(i, rand(4) - 1)
                    local n = #up.ids + 1
                    up.ids[n], up.priorities[n], up.expressions[n] = id(i), rand(3), e
                    next_model[id(i)] = { up.priorities[n], e }
                end
            end
            for _ = 1, rand(3) do
                local i = rand(N)
                if not seen[i] then
                    seen[i] = true
                    rm[#rm + 1] = id(i)
                    next_model[id(i)] = nil
                end
            end
            if bad and #up.ids > 0 then
                up.expressions[1] = "http.path =="
            end
            assert(gw:update(version, { upsert = up, remove = rm }))
            local ok, err = gw:wait(version)
            eq(not ok, bad and #up.ids > 0, "changes of step " .. step .. ": " .. tostring(err))
            if ok then
                model = next_model
            end
            -- The next whole list is the model's.
            whole = nil
        else
            -- A whole list: the last one (or the model's) with random edits.
            if whole == nil then
                whole = { ids = {}, priorities = {}, expressions = {} }
                for i = 1, N do
                    local m = model[id(i)]
                    if m then
                        local n = #whole.ids + 1
                        whole.ids[n], whole.priorities[n], whole.expressions[n] = id(i), m[1], m[2]
                    end
                end
            end
            local l = { ids = {}, priorities = {}, expressions = {} }
            for i = 1, #whole.ids do
                l.ids[i], l.priorities[i], l.expressions[i] = whole.ids[i], whole.priorities[i],
                    whole.expressions[i]
            end
            for _ = 1, rand(4) - 1 do
                local what, n = rand(4), #l.ids
                if what == 1 and n > 0 then
                    local i = rand(n)
                    l.expressions[i] = expr(tonumber(l.ids[i]:sub(-12)), rand(4) - 1)
                elseif what == 2 and n > 0 then
                    local i = rand(n)
                    table.remove(l.ids, i); table.remove(l.priorities, i)
                    table.remove(l.expressions, i)
                elseif what == 3 then
                    local i = rand(N)
                    local present = false
                    for _, x in ipairs(l.ids) do
                        present = present or x == id(i)
                    end
                    if not present then
                        local at = rand(n + 1)
                        table.insert(l.ids, at, id(i)); table.insert(l.priorities, at, rand(3))
                        table.insert(l.expressions, at, expr(i, rand(4) - 1))
                    end
                elseif n > 1 then
                    -- Two entries swap places.
                    local a, b = rand(n), rand(n)
                    l.ids[a], l.ids[b] = l.ids[b], l.ids[a]
                    l.priorities[a], l.priorities[b] = l.priorities[b], l.priorities[a]
                    l.expressions[a], l.expressions[b] = l.expressions[b], l.expressions[a]
                end
            end
            if bad and #l.ids > 0 then
                l.expressions[rand(#l.ids)] = "http.path =="
            end
            assert(gw:update(version, l))
            local ok, err = gw:wait(version)
            eq(not ok, bad and #l.ids > 0, "whole list of step " .. step .. ": " .. tostring(err))
            if ok then
                model = {}
                for i = 1, #l.ids do
                    model[l.ids[i]] = { l.priorities[i], l.expressions[i] }
                end
                whole = l
            end
        end
        check()
    end
    -- Most whole lists went over as their changes.
    eq(gw:stats().routes_handed_over < 40 * N / 2, true, "crossed " .. gw:stats().routes_handed_over)
end)

-- The Prometheus text's samples, as { [name .. labels] = value text }, after checking that every
-- sample follows the HELP and TYPE lines of its metric and that counters end in _total.
local function scrape(text)
    local samples, help, typ = {}, {}, {}
    eq(text:sub(-1), "\n", "the text ends with a newline")
    for line in text:gmatch("([^\n]*)\n") do
        local hname = line:match("^# HELP (%S+) .+$")
        local tname, kind = line:match("^# TYPE (%S+) (%S+)$")
        if hname then
            help[hname] = true
        elseif tname then
            eq(help[tname], true, "HELP before TYPE of " .. tname)
            eq(kind == "counter" or kind == "gauge", true, kind)
            eq(kind == "counter", tname:match("_total$") ~= nil, "a counter ends in _total: " .. tname)
            typ[tname] = kind
        else
            local key, value = line:match("^(%S+) (%S+)$")
            if not key then
                -- Label values may hold spaces: the value is after the closing brace.
                key, value = line:match("^(.+}) (%S+)$")
            end
            assert(key, "a sample line: " .. line)
            local name = key:match("^([%w_]+)")
            eq(typ[name] ~= nil, true, "TYPE before the samples of " .. name)
            samples[key] = value
        end
    end
    return samples
end

-- gw:stats() and the Prometheus text: routed, not found and bad requests as route() answered
-- them, updates applied and refused, the gateway's version, pending version and last error.
T.stats_and_metrics = with_nginx(function()
    async_ngx("access")
    local gw = assert(gateway.new())
    assert(gw:update(1, list({ U1, 2, 'http.path ^= "/a"' }, { U2, 1, 'http.headers.x_b == "1"' })))
    assert(gw:wait(1))
    local base = gw:stats()
    same({ base.routed, base.not_found, base.bad_requests }, { 0, 0, 0 })
    for _ = 1, 3 do
        set_request({ var = { uri = "/a/x" } })
        eq(gw:route(), U1)
    end
    set_request({ var = { uri = "/nowhere" } })
    eq(gw:route(), nil)
    set_request({ var = { uri = "/" }, headers = { ["x-b"] = "\255" } })
    local uuid, reason = gw:route()
    eq(uuid, nil)
    has(reason, "not valid UTF-8")
    -- Refused, then applied.
    assert(gw:update(2, list({ U1, 1, "http.path ^=" })))
    eq(gw:wait(2), nil)
    local st = assert(gw:stats())
    same({ st.routed, st.not_found, st.bad_requests }, { 3, 1, 1 })
    same({ st.updates_applied, st.updates_refused, st.routes }, { 1, 1, 2 })
    eq(st.version, 1)
    eq(st.pending, nil)
    eq(st.last_error_version, 2)
    has(st.last_error, "1 invalid route(s)")
    eq(st.request_source, gw:request_source())
    eq(st.fields_in_use, 2)
    eq(st.broken, false)
    eq(st.last_build_us > 0, true)

    local m = scrape(assert(gw:metrics_text({ worker = 3, zone = 'a "b" \\ c\nd' })))
    local l = 'worker="3",zone="a \\"b\\" \\\\ c\\nd"'
    eq(m["atc_router_requests_total{" .. l .. ',result="routed"}'], "3")
    eq(m["atc_router_requests_total{" .. l .. ',result="not_found"}'], "1")
    eq(m["atc_router_requests_total{" .. l .. ',result="bad_request"}'], "1")
    eq(m["atc_router_updates_total{" .. l .. ',result="applied"}'], "1")
    eq(m["atc_router_updates_total{" .. l .. ',result="refused"}'], "1")
    eq(m["atc_router_routes{" .. l .. "}"], "2")
    eq(m["atc_router_broken{" .. l .. "}"], "0")
    eq(m["atc_router_update_pending{" .. l .. "}"], "0")
    eq(m["atc_router_last_update_failed{" .. l .. "}"], "1")
    eq(m["atc_router_gateway_info{" .. l .. ',version="1",request_source="'
        .. gw:request_source() .. '"}'], "1")
    local build = tonumber(m["atc_router_last_build_seconds{" .. l .. "}"])
    eq(build, st.last_build_us / 1e6, "seconds")
    eq(tonumber(m["atc_router_last_update_hold_seconds{" .. l .. "}"]) >= 0, true)

    -- A later version applied clears the failure; one being built is pending.
    assert(gw:update(3, list({ U1, 1, 'http.path ^= "/c"' })))
    assert(gw:wait(3))
    assert(gw:update(4, numbered(20000, "p")))
    m = scrape(gw:metrics_text())
    eq(m["atc_router_last_update_failed"], "0")
    eq(m["atc_router_update_pending"], gw:pending() and "1" or "0")
    eq(m['atc_router_gateway_info{version="3",request_source="' .. gw:request_source() .. '"}'],
        gw:version() == 3 and "1" or nil)
    assert(gw:wait(4))
    m = scrape(gw:metrics_text())
    eq(m['atc_router_updates_total{result="applied"}'], "3")
    eq(m["atc_router_routes"], "20000")

    -- A router's own stats render without the gateway's metrics.
    local text = gateway.prometheus(gw.router:stats())
    m = scrape(text)
    eq(m["atc_router_routes"], "20000")
    eq(text:find("gateway_info", 1, true), nil)
    -- Label names Prometheus refuses raise; so does a missing table.
    local fails_with = { pcall(gw.metrics_text, gw, { ["bad-name"] = 1 }) }
    eq(fails_with[1], false)
    has(fails_with[2], "bad label name")
    eq(pcall(gw.metrics_text, gw, { __reserved = 1 }), false)
    eq(pcall(gateway.prometheus, nil), false)
end)

return T
