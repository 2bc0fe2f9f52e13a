-- resty.router.gateway.sources: the raw data of the current nginx request, for the reader of
-- resty.router.gateway.request, from one of two sources:
--
-- * `native`: lua-nginx-module's FFI functions, the ones lua-resty-core is built on, inside
--   nginx (http subsystem, lua-resty-core loaded, a lua-nginx-module version whose functions
--   were reviewed: see NATIVE_VERSIONS; nil otherwise, and `native_off` says why). They hand
--   out pointers into the request, which the reader puts in its atc_value batch as they are:
--   reading a field makes no Lua string (interning strings in a string table the route table
--   has grown, and collecting them, was most of what reading fields cost).
-- * `plain`: the plain ngx API (ngx.var, ngx.req.get_headers, ngx.req.get_uri_args), for tests
--   with a mock `ngx`, nginx without lua-resty-core or with a lua-nginx-module version not
--   reviewed, and gateway.new{ request_source = "plain" }. Its strings are held until the next
--   read.
--
-- lua/t/gateway.lua checks in nginx that both give the same values for every test request.
--
-- Invariants:
-- * A pointer a source hands out stays valid until the next request() of that source: it points
--   into the request (nginx variables, header lines), into `qbuf` (unescaped query arguments,
--   overwritten only by the next read), or into a Lua string the plain source holds.
-- * Only lua-nginx-module functions that lua-resty-core declares are called, with the
--   signatures it declares (resty.core.base, resty.core.var, resty.core.request), and only on
--   a lua-nginx-module version of NATIVE_VERSIONS. For those versions the C functions were
--   read (0.10.16 to 0.10.29; lua-resty-core 0.1.18 to 0.1.32 declares them identically):
--     ngx_http_lua_ffi_var_get(r, name, len, lowcase, 0, &ptr, &len, &err): writes `len`
--       bytes of `lowcase` (ours has room for them); the value points into the request or
--       its pool, for the request's lifetime; an error or no value is not NGX_OK.
--     ngx_http_lua_ffi_req_get_headers_count(r, max, &truncated), ..._uri_args_count: a
--       count (at most `max` when max > 0, then truncated = 1), or a negative error (no
--       request: a timer, a fake request), which reads as "none".
--     ngx_http_lua_ffi_req_get_headers(r, out, n, 0): fills at most n entries of `out`
--       (ours has n), pointing into the request's header list.
--     ngx_http_lua_ffi_req_get_uri_args(r, buf, out, n): copies querystring_len(r) bytes
--       into `buf` (ours has that many), unescapes them in place, fills at most n entries.

local ffi = require("ffi")

local type, tonumber, tostring, pairs, ipairs = type, tonumber, tostring, pairs, ipairs
local ffi_cast = ffi.cast

local _M = {}
_M._VERSION = "0.2.0"

-- Each source has:
--   presence_first     whether to ask $http_NAME before reading the header list (the list is
--                      dear to make, and the headers in use are absent from most requests)
--   request()          a handle of the current request, or nil
--   var(r, name)       ptr, len of the variable's bytes, or nil when it has no value
--   method(r)          the method, a Lua string
--   headers(r, max)    count, list of { key = { len, data }, value = { len, data } } (0-based,
--                      lowercase keys) of the first `max` headers, and true when the request
--                      has more
--   args(r, max)       the same for the query arguments (value.len -1: no value)

-- The plain ngx API. Its strings are held in `held` until the next request() (see the
-- invariants).
local plain = { presence_first = true }
do
    pcall(ffi.cdef, [[
        typedef struct { int len; const unsigned char *data; } atc_gateway_str;
        typedef struct { atc_gateway_str key; atc_gateway_str value; } atc_gateway_pair;
    ]])
    local PTR = ffi.typeof("const unsigned char *")
    local pairs_type = ffi.typeof("atc_gateway_pair[?]")
    local held = {}
    local nheld = 0
    -- One list for the headers, one for the arguments: a read may use both.
    local lists = { { cap = 0 }, { cap = 0 } }

    local function hold(s)
        nheld = nheld + 1
        held[nheld] = s
        return ffi_cast(PTR, s), #s
    end

    function plain.request()
        for i = 1, nheld do
            held[i] = nil
        end
        nheld = 0
        return true
    end

    function plain.var(_, name)
        local s = ngx.var[name]
        if s == nil then
            return nil
        end
        return hold(s)
    end

    function plain.method()
        return ngx.req.get_method()
    end

    -- The entries of a get_headers() / get_uri_args() table as list `which`; `true` (an
    -- argument without a value) becomes length -1.
    local function flatten(t, which)
        local n = 0
        for _, v in pairs(t) do
            n = n + (type(v) == "table" and #v or 1)
        end
        local l = lists[which]
        if n > l.cap then
            l.cap = n
            l.list = pairs_type(n)
        end
        local list = l.list
        local j = 0
        for key, v in pairs(t) do
            local kp, kl = hold(key)
            local values = type(v) == "table" and v or { v }
            for i = 1, #values do
                local e = list[j]
                e.key.data, e.key.len = kp, kl
                local x = values[i]
                if type(x) == "string" then
                    e.value.data, e.value.len = hold(x)
                else
                    e.value.data, e.value.len = nil, -1
                end
                j = j + 1
            end
        end
        return n, list
    end

    function plain.headers(_, max)
        local t, err = ngx.req.get_headers(max)
        local n, list = flatten(t, 1)
        return n, list, err == "truncated"
    end

    function plain.args(_, max)
        local t, err = ngx.req.get_uri_args(max)
        local n, list = flatten(t, 2)
        return n, list, err == "truncated"
    end
end
_M.plain = plain

-- The lua-nginx-module versions (ngx.config.ngx_lua_version: 10023 is 0.10.23) whose FFI
-- functions used here were reviewed against the calls below (see the invariants): on any
-- other version the gateway reads requests through the plain ngx API.
_M.NATIVE_VERSIONS = { min = 10016, max = 10029 }

-- Why the native source cannot be used here (nil when it can): outside nginx's http
-- subsystem, another lua-nginx-module version, no lua-resty-core (or not the declarations it
-- should have).
local function native_unavailable()
    if type(ngx) ~= "table" or type(ngx.config) ~= "table" then
        return "not inside nginx"
    end
    if ngx.config.subsystem ~= "http" then
        return "not the http subsystem"
    end
    local version = ngx.config.ngx_lua_version
    local range = _M.NATIVE_VERSIONS
    if type(version) ~= "number" or version < range.min or version > range.max then
        return "lua-nginx-module version " .. tostring(version) .. " is not one reviewed ("
            .. range.min .. " to " .. range.max .. ")"
    end
    -- resty.core.base declares the request type and get_request; resty.core.var and
    -- resty.core.request declare ngx_http_lua_ffi_var_get and the request functions (resty.core
    -- loads them at startup; requiring them again is a table lookup).
    for _, name in ipairs({ "resty.core.base", "resty.core.var", "resty.core.request" }) do
        local ok, err = pcall(require, name)
        if not ok then
            return "no " .. name .. " (lua-resty-core): " .. tostring(err)
        end
    end
    if type(require("resty.core.base").get_request) ~= "function" then
        return "resty.core.base has no get_request"
    end
    local C = ffi.C
    local ok = pcall(function()
        return C.ngx_http_lua_ffi_var_get, C.ngx_http_lua_ffi_req_get_headers_count,
            C.ngx_http_lua_ffi_req_get_headers, C.ngx_http_lua_ffi_req_get_uri_args_count,
            C.ngx_http_lua_ffi_req_get_querystring_len, C.ngx_http_lua_ffi_req_get_uri_args
    end)
    if not ok then
        return "lua-resty-core does not declare the request functions"
    end
    -- The entry layout the C functions write: two { int len; const u_char *data; }.
    ok = pcall(function()
        local e = ffi.new("ngx_http_lua_ffi_table_elt_t[1]")
        local _ = e[0].key.len, e[0].key.data, e[0].value.len, e[0].value.data
        local str = ffi.sizeof("ngx_http_lua_ffi_str_t")
        assert(ffi.offsetof("ngx_http_lua_ffi_str_t", "data") == ffi.sizeof("void *"))
        assert(ffi.offsetof("ngx_http_lua_ffi_table_elt_t", "value") == str)
        assert(ffi.sizeof("ngx_http_lua_ffi_table_elt_t") == 2 * str)
    end)
    if not ok then
        return "ngx_http_lua_ffi_table_elt_t is not the layout reviewed"
    end
    return nil
end

-- lua-nginx-module's FFI functions; nil when native_unavailable() says why (in `native_off`).
local native = nil
do
    local off = native_unavailable()
    _M.native_off = off
    local ok = off == nil
    local C = ffi.C
    local base = ok and require("resty.core.base")
    if ok then
        -- The list is two calls and pointers, cheaper than one $http_NAME lookup per header
        -- in use (each scans the list).
        native = { presence_first = false }
        local get_request = base.get_request
        local var_get = C.ngx_http_lua_ffi_var_get
        local get_headers_count = C.ngx_http_lua_ffi_req_get_headers_count
        local get_headers = C.ngx_http_lua_ffi_req_get_headers
        local get_args_count = C.ngx_http_lua_ffi_req_get_uri_args_count
        local get_querystring_len = C.ngx_http_lua_ffi_req_get_querystring_len
        local get_args = C.ngx_http_lua_ffi_req_get_uri_args
        local NGX_OK = 0

        local vptr = ffi.new("char *[1]")
        local vlen = ffi.new("size_t[1]")
        local verr = ffi.new("char *[1]")
        local truncated = ffi.new("int[1]")
        -- var_get lowercases the name into this buffer.
        local lowcase_len = 64
        local lowcase = ffi.new("char[?]", lowcase_len)
        local elt_type = ffi.typeof("ngx_http_lua_ffi_table_elt_t[?]")
        local hdr_cap, hdr = 0, nil
        local arg_cap, argv = 0, nil
        local qbuf_cap, qbuf = 0, nil

        native.request = get_request

        -- An error (a variable unknown to nginx) counts as no value: ngx.var would raise, and
        -- the gateway must not.
        function native.var(r, name)
            local n = #name
            if n > lowcase_len then
                lowcase_len = n
                lowcase = ffi.new("char[?]", n)
            end
            if var_get(r, name, n, lowcase, 0, vptr, vlen, verr) ~= NGX_OK then
                return nil
            end
            return vptr[0], tonumber(vlen[0])
        end

        -- get_method() answers the standard methods with constant strings: no new string.
        function native.method()
            return ngx.req.get_method()
        end

        function native.headers(r, max)
            truncated[0] = 0
            local n = get_headers_count(r, max, truncated)
            if n <= 0 then
                return 0
            end
            local more = truncated[0] ~= 0
            if n > hdr_cap then
                hdr_cap = math.max(n, 2 * hdr_cap)
                hdr = elt_type(hdr_cap)
            end
            if get_headers(r, hdr, n, 0) ~= 0 then
                return 0
            end
            return n, hdr, more
        end

        function native.args(r, max)
            truncated[0] = 0
            local n = get_args_count(r, max, truncated)
            if n <= 0 then
                return 0
            end
            local more = truncated[0] ~= 0
            if n > arg_cap then
                arg_cap = math.max(n, 2 * arg_cap)
                argv = elt_type(arg_cap)
            end
            local len = tonumber(get_querystring_len(r))
            if len > qbuf_cap then
                qbuf_cap = math.max(len, 2 * qbuf_cap)
                qbuf = ffi.new("unsigned char[?]", qbuf_cap)
            end
            return get_args(r, qbuf, argv, n), argv, more
        end
    end
end
_M.native = native

-- identity(): a value that tells the current request from every other request in flight in
-- this worker, for the gateway's check that lazy captures are read by the request that routed
-- them (compared with ==, never kept past the next route()). In nginx with lua-resty-core,
-- resty.core.base's get_request (the request pointer: one light userdata, no allocation; two
-- requests alive at once never share it, and a request cannot read after it ended); without it,
-- ngx.ctx (a table nginx makes per request, on first use; the mock tests' per-request table);
-- outside nginx, nil: one caller, no requests to tell apart.
do
    local identity = nil
    if native then
        identity = native.request
    elseif type(ngx) == "table" and type(ngx.config) == "table" then
        local ok, base = pcall(require, "resty.core.base")
        if ok and type(base.get_request) == "function" then
            identity = base.get_request
        end
    end
    _M.identity = identity or function()
        local n = ngx
        return type(n) == "table" and n.ctx or nil
    end
end

return _M
