-- The nginx side of ffi/tests/nginx_kong_fields.rs: a gateway whose routes use every field Kong's
-- router reads (so that its plan reads them all), answering each request with the values it
-- read, as request_values() gives them, from both request sources.

local gateway = require("resty.router.gateway")

local _M = {}

-- Routes that match nothing; only the fields they name matter.
local EXPRESSIONS = {
    'http.method == "-"', 'http.host == "-"', 'http.path == "-"',
    'http.path.segments.0 == "-"', 'http.path.segments.1 == "-"', 'http.path.segments.2 == "-"',
    'http.path.segments.0_1 == "-"', 'http.path.segments.1_2 == "-"',
    'http.path.segments.len == 99', 'http.headers.x_a == "-"', 'http.queries.a == "-"',
    'http.queries.b == "-"', 'http.queries.debug == "-"', 'net.dst.port == 1',
}

local kong_exact, default

function _M.init_worker()
    local routes = {}
    for i, e in ipairs(EXPRESSIONS) do
        routes[i] = { id = string.format("a8f2c1e4-0000-4000-8000-%012d", i), priority = i,
            expression = e }
    end
    -- Kong's reading in every respect (the Host header's port is net.dst.port, as in Kong)...
    kong_exact = assert(gateway.new({ dst_port_from_host = true }))
    assert(kong_exact:update(1, routes))
    -- ...and the default, which differs from it only there.
    default = assert(gateway.new())
    assert(default:update(1, routes))
end

function _M.content()
    local gw = ngx.var.arg___gateway == "default" and default or kong_exact
    local plain = gw:request_values("plain")
    local native = gw:request_values("native")
    if native and native ~= plain then
        ngx.say("MISMATCH between the native and the plain source\n", native, "\n--\n", plain)
        return
    end
    ngx.say(plain)
end

return _M
