-- The gateway of scripts/first-request-soak: one route, built in init_worker, and a handler that
-- routes the request and also checks that the two request sources of resty.router.gateway (the
-- native one through lua-nginx-module's FFI functions, the plain ngx API) read the same values.
--
--   init_worker_by_lua_block { require("first_request").init("path" | "fields") }
--   content_by_lua_block     { require("first_request").handle() }
--
-- "path": the catch-all `http.path ^= "/"` (scripts/gateway-bench's 1-route case: reads only
-- $uri). "fields": one route that matches every request the soak sends but reads every kind of
-- field the gateway has (headers, query arguments, segments, addresses, ports), so that the
-- native header and argument lists are read.
--
-- Answers 200 "<uuid> <source>" (source: native or plain, the one gw:route() used), 404 "-"
-- when nothing matched, 500 with both readings when the sources differ.

local gateway = require("resty.router.gateway")
local sources = require("resty.router.gateway.sources")

local _M = {}

local ROUTE_ID = "8a8e8f4c-0000-4000-8000-000000000001"

local EXPRESSIONS = {
    path = [[http.path ^= "/"]],
    fields = [[http.path ^= "/" && http.method != "X-NONE" && http.host != "none.invalid"]]
        .. [[ && (http.headers.x_a != "none" || http.headers.user_agent != "none")]]
        .. [[ && (http.queries.q != "none" || http.path.segments.0 != "none")]]
        .. [[ && net.src.ip in 127.0.0.0/8 && net.dst.port > 0 && net.protocol != "none"]]
        .. [[ && net.dst.ip in 127.0.0.0/8 && net.src.port > 0]],
}

local GW

function _M.init(kind)
    local expression = assert(EXPRESSIONS[kind], "kind is path or fields")
    GW = assert(gateway.new({ read_all_fields = true }))
    assert(GW:update("1", { { id = ROUTE_ID, priority = 1, expression = expression } }))
end

function _M.handle()
    local native = GW:request_values("native")
    if native ~= nil then
        local plain = GW:request_values("plain")
        if native ~= plain then
            ngx.status = 500
            ngx.say("sources differ\nplain:\n", plain, "\nnative:\n", native)
            return ngx.exit(500)
        end
    end
    local uuid, err = GW:route()
    if not uuid then
        ngx.status = err and 400 or 404
        ngx.say(err or "-")
        return ngx.exit(ngx.status)
    end
    ngx.say(uuid, " ", sources.native and "native" or "plain")
end

return _M
