-- A minimal gateway on resty.router, used by the nginx integration test (ffi/tests/nginx.rs)
-- and a worked example of wiring the binding into OpenResty.
--
-- init_worker(schema_file, routes_file) builds the worker's router once; access() routes each
-- request: it resets the worker's context, adds the values of exactly the fields the routes use
-- (as derived below), executes, and answers
--   200 with  "<uuid>\n" .. ns(matched http.path or "") .. ns(key) .. ns(value) ...  (captures
--             sorted by key, ns(s) = #s .. ":" .. s .. ","), or
--   404 when no route matches, or
--   400 when the request cannot be put in the context (invalid UTF-8, an unparsable address,
--       too many values for one field).
--
-- Field derivation (ffi/tests/nginx.rs mirrors it to compute the expected route):
--   http.method, http.host (ngx.var.host), http.path (ngx.var.uri, decoded),
--   http.path.segments.N (0-based pieces of the path after its leading slashes),
--   http.headers.NAME (header NAME with `_` as `-`; every value, in order),
--   http.queries.NAME (every value of query argument NAME; valueless arguments are skipped),
--   net.src.ip (ngx.var.remote_addr, which the realip module takes from X-Real-IP),
--   net.dst.port, tls.sni, net.src.port, net.dst.ip, net.protocol: from the test-only headers
--   X-Test-Dst-Port, X-Test-Tls-Sni, ... when present (no TLS, one listening port here), else
--   from the connection.

local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")

local ngx = ngx
local tonumber, type, ipairs = tonumber, type, ipairs

local _M = {}

local R, C, FIELDS
local STATUS = { loaded = 0, errors = {} }

function _M.init_worker(schema_file, routes_file)
    local s = schema.new()
    for line in io.lines(schema_file) do
        local name, typ = line:match("^(%S+)\t(%S+)$")
        assert(s:add_field(name, typ))
    end
    local r = router.new(s, 10000)
    local loaded, errors = 0, {}
    for line in io.lines(routes_file) do
        local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
        local ok, err = r:add_matcher(tonumber(prio), id, expr)
        if ok then
            loaded = loaded + 1
        else
            errors[#errors + 1] = id .. ": " .. tostring(err)
        end
    end
    R, C, FIELDS = r, context.new(s), r:get_fields()
    STATUS.loaded, STATUS.errors = loaded, errors
end

function _M.status()
    ngx.say("loaded ", STATUS.loaded, " pid ", ngx.worker.pid())
    for _, e in ipairs(STATUS.errors) do
        ngx.say("error ", e)
    end
end

local function test_header(headers, name)
    return headers["x-test-" .. name]
end

local function segments(path)
    local rest = path:gsub("^/+", "")
    local out, start = {}, 1
    while true do
        local slash = rest:find("/", start, true)
        if not slash then
            out[#out + 1] = rest:sub(start)
            return out
        end
        out[#out + 1] = rest:sub(start, slash - 1)
        start = slash + 1
    end
end

-- The value(s) of one field for this request, or nil.
local function derive(field, headers, args, segs)
    if field == "http.method" then
        return ngx.req.get_method()
    elseif field == "http.host" then
        return ngx.var.host
    elseif field == "http.path" then
        return ngx.var.uri
    elseif field == "net.src.ip" then
        return ngx.var.remote_addr
    elseif field == "net.dst.port" then
        return tonumber(test_header(headers, "dst-port") or ngx.var.server_port)
    elseif field == "net.src.port" then
        return tonumber(test_header(headers, "src-port") or ngx.var.remote_port)
    elseif field == "net.dst.ip" then
        return test_header(headers, "dst-ip") or ngx.var.server_addr
    elseif field == "net.protocol" then
        return test_header(headers, "protocol") or ngx.var.scheme
    elseif field == "tls.sni" then
        return test_header(headers, "tls-sni")
    end
    local name = field:match("^http%.headers%.(.+)$")
    if name then
        return headers[(name:gsub("_", "-"))]
    end
    name = field:match("^http%.queries%.(.+)$")
    if name then
        local v = args[name]
        if type(v) == "table" then
            local strings = {}
            for _, x in ipairs(v) do
                if type(x) == "string" then
                    strings[#strings + 1] = x
                end
            end
            return strings
        end
        return type(v) == "string" and v or nil
    end
    local n = field:match("^http%.path%.segments%.(%d+)$")
    if n then
        return segs[tonumber(n) + 1]
    end
    return nil
end

local function ns(s)
    return #s .. ":" .. s .. ","
end

function _M.access()
    local c = C
    c:reset()
    local headers, herr = ngx.req.get_headers(2000)
    if herr == "truncated" then
        return ngx.exit(400)
    end
    local args = ngx.req.get_uri_args(100)
    local segs = segments(ngx.var.uri)
    for _, field in ipairs(FIELDS) do
        local ok, err = c:add_value(field, derive(field, headers, args, segs))
        if not ok then
            ngx.status = 400
            ngx.say("bad request: ", err)
            return ngx.exit(400)
        end
    end
    if not R:execute(c) then
        return ngx.exit(404)
    end
    local uuid, matched, captures = c:get_result("http.path")
    local body = { uuid, "\n", ns(matched or "") }
    if captures then
        local keys = {}
        for k in pairs(captures) do
            keys[#keys + 1] = tostring(k)
        end
        table.sort(keys)
        for _, k in ipairs(keys) do
            body[#body + 1] = ns(k) .. ns(captures[tonumber(k) or k])
        end
    end
    ngx.header["X-Route"] = uuid
    ngx.print(body)
    return ngx.exit(200)
end

return _M
