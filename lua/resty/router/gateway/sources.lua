-- resty.router.gateway.sources: the raw data of the current nginx request, for the reader of
-- resty.router.gateway.request, from one of two sources:
--
-- * `native`: lua-nginx-module's FFI functions, the ones lua-resty-core is built on, inside
--   nginx (http subsystem, lua-resty-core loaded; nil otherwise). They hand out pointers into
--   the request, which the reader puts in its atc_value batch as they are: reading a field
--   makes no Lua string (interning strings in a string table the route table has grown, and
--   collecting them, was most of what reading fields cost).
-- * `plain`: the plain ngx API (ngx.var, ngx.req.get_headers, ngx.req.get_uri_args), for tests
--   with a mock `ngx` and nginx without lua-resty-core. Its strings are held until the next
--   read.
--
-- lua/t/gateway.lua checks in nginx that both give the same values for every test request.
--
-- Invariants:
-- * A pointer a source hands out stays valid until the next request() of that source: it points
--   into the request (nginx variables, header lines), into `qbuf` (unescaped query arguments,
--   overwritten only by the next read), or into a Lua string the plain source holds.
-- * Only lua-nginx-module functions that lua-resty-core declares are called, with the
--   signatures it declares (resty.core.base, resty.core.var, resty.core.request).

local ffi = require("ffi")

local type, tonumber, pairs = type, tonumber, pairs
local ffi_cast = ffi.cast

local _M = {}

-- Each source has:
--   presence_first     whether to ask $http_NAME before reading the header list (the list is
--                      dear to make, and the headers in use are absent from most requests)
--   request()          a handle of the current request, or nil
--   var(r, name)       ptr, len of the variable's bytes, or nil when it has no value
--   method(r)          the method, a Lua string
--   headers(r, max)    count, list of { key = { len, data }, value = { len, data } } (0-based,
--                      lowercase keys); or nil when there are more than `max`
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
        if err == "truncated" then
            return nil
        end
        return flatten(t, 1)
    end

    function plain.args(_, max)
        local t, err = ngx.req.get_uri_args(max)
        if err == "truncated" then
            return nil
        end
        return flatten(t, 2)
    end
end
_M.plain = plain

-- lua-nginx-module's FFI functions; nil outside nginx or without lua-resty-core.
local native = nil
do
    local ok = type(ngx) == "table" and type(ngx.config) == "table"
        and ngx.config.subsystem == "http"
    local base
    if ok then
        ok, base = pcall(require, "resty.core.base")
        ok = ok and type(base.get_request) == "function"
    end
    -- They declare ngx_http_lua_ffi_var_get and the request functions (resty.core loads both
    -- at startup; requiring them again is a table lookup).
    ok = ok and pcall(require, "resty.core.var") and pcall(require, "resty.core.request")
    local C = ffi.C
    ok = ok and pcall(function()
        return C.ngx_http_lua_ffi_var_get, C.ngx_http_lua_ffi_req_get_headers_count,
            C.ngx_http_lua_ffi_req_get_headers, C.ngx_http_lua_ffi_req_get_uri_args_count,
            C.ngx_http_lua_ffi_req_get_querystring_len, C.ngx_http_lua_ffi_req_get_uri_args,
            ffi.typeof("ngx_http_lua_ffi_table_elt_t")
    end)
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
            local n = get_headers_count(r, max, truncated)
            if n <= 0 then
                return 0
            end
            if truncated[0] ~= 0 then
                return nil
            end
            if n > hdr_cap then
                hdr_cap = math.max(n, 2 * hdr_cap)
                hdr = elt_type(hdr_cap)
            end
            if get_headers(r, hdr, n, 0) ~= 0 then
                return 0
            end
            return n, hdr
        end

        function native.args(r, max)
            local n = get_args_count(r, max, truncated)
            if n <= 0 then
                return 0
            end
            if truncated[0] ~= 0 then
                return nil
            end
            if n > arg_cap then
                arg_cap = math.max(n, 2 * arg_cap)
                argv = elt_type(arg_cap)
            end
            local len = tonumber(get_querystring_len(r))
            if len > qbuf_cap then
                qbuf_cap = math.max(len, 2 * qbuf_cap)
                qbuf = ffi.new("unsigned char[?]", qbuf_cap)
            end
            return get_args(r, qbuf, argv, n), argv
        end
    end
end
_M.native = native

return _M
