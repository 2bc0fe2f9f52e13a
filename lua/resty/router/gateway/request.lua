-- resty.router.gateway.request: reads the values of the current nginx request for the steps of
-- a routing plan (resty.router.gateway.updates) into a batch of atc_value, for
-- context:add_values().
--
-- One reader, two sources of raw request data. Inside nginx (http subsystem, lua-resty-core
-- loaded) the source is lua-nginx-module's FFI functions, the ones lua-resty-core is built on:
-- they hand out pointers into the request, which go into the batch as they are, so reading a
-- field makes no Lua string (interning strings in a string table the route table has grown,
-- and collecting them, was most of what reading fields cost). Elsewhere (tests with a mock
-- `ngx`, or nginx without lua-resty-core's declarations) the source is the plain ngx API:
-- ngx.var, ngx.req.get_headers(), ngx.req.get_uri_args(). Each source answers the same four
-- questions (the bytes of a variable, the method, the header list, the query argument list)
-- and everything else (which variable a field reads, path segments, ports, the limits) is the
-- reader's, written once; lua/t/gateway.lua checks in nginx that both sources give the same
-- values.
--
-- What a field reads:
--   http.method            ngx.req.get_method()
--   http.host              $host: the host of the request line or the Host header, without
--                          the port, lowercase (nginx does both)
--   http.path              $uri: decoded, normalised, without the query string
--   http.path.segments.N   piece N (0-based) of $uri after its leading slashes
--   http.headers.NAME      every value of header NAME (lowercase, `_` for `-`); from the plain
--                          ngx API the header list is read only when $http_NAME says a header
--                          in use is present
--   http.queries.NAME      every value of query argument NAME (a valueless `?debug` has none);
--                          the argument list is read only when there is a query string
--   net.src.ip, net.src.port, net.dst.ip, net.dst.port, net.protocol, tls.sni
--                          $remote_addr, $remote_port, $server_addr, $server_port, $scheme,
--                          $ssl_server_name (no address on a Unix socket, no SNI without TLS)
--   an extractor's field   whatever opts.extractors[field](field) returns (value or array)
--
-- Invariants:
-- * Every pointer in a batch points into the current request's memory (nginx variables, header
--   lines, `qbuf` for unescaped query arguments, only overwritten by the next read), or into a
--   Lua string referenced from the batch's `anchors` or the plain source's `held` until the
--   next read: the garbage collector cannot free one before add_values() has copied it.
-- * Only lua-nginx-module functions that lua-resty-core declares are called, with the
--   signatures it declares (resty.core.base, resty.core.var, resty.core.request).

local ffi = require("ffi")
local bit = require("bit")
local cdefs = require("resty.router.cdefs")

local type, tonumber, tostring, pairs = type, tonumber, tostring, pairs
local floor = math.floor
local band, bor = bit.band, bit.bor
local ffi_string, ffi_cast = ffi.string, ffi.cast

local T_INT = cdefs.TYPE_CODES.Int

local _M = {}

-- Where each field's values come from (see the header comment).
local K_METHOD, K_HOST, K_PATH, K_SEGMENT, K_HEADER, K_QUERY = 1, 2, 3, 4, 5, 6
local K_SRC_IP, K_SRC_PORT, K_DST_IP, K_DST_PORT, K_PROTOCOL, K_SNI = 7, 8, 9, 10, 11, 12
local K_CUSTOM, K_NONE = 13, 14

local FIXED = {
    ["http.method"] = K_METHOD,
    ["http.host"] = K_HOST,
    ["http.path"] = K_PATH,
    ["net.src.ip"] = K_SRC_IP,
    ["net.src.port"] = K_SRC_PORT,
    ["net.dst.ip"] = K_DST_IP,
    ["net.dst.port"] = K_DST_PORT,
    ["net.protocol"] = K_PROTOCOL,
    ["tls.sni"] = K_SNI,
}

-- The variable a kind reads.
local VAR = {
    [K_HOST] = "host", [K_SRC_IP] = "remote_addr", [K_SRC_PORT] = "remote_port",
    [K_DST_IP] = "server_addr", [K_DST_PORT] = "server_port", [K_PROTOCOL] = "scheme",
    [K_SNI] = "ssl_server_name",
}

-- The source of a field: kind and argument (the header or argument name, the segment number,
-- the extractor), and for headers the variable that says whether the header is present.
function _M.source(field, extractors)
    local ex = extractors[field]
    if ex then
        return K_CUSTOM, ex
    end
    local kind = FIXED[field]
    if kind then
        return kind, VAR[kind]
    end
    local name = field:match("^http%.headers%.(.+)$")
    if name then
        -- Header names are lowercase with `-`; `_` in a field name stands for `-`.
        local header = name:lower():gsub("_", "-")
        return K_HEADER, header, "http_" .. header:gsub("-", "_")
    end
    name = field:match("^http%.queries%.(.+)$")
    if name then
        return K_QUERY, name
    end
    local n = field:match("^http%.path%.segments%.(%d+)$")
    if n then
        return K_SEGMENT, tonumber(n)
    end
    -- A schema field the gateway has no source for: it never has a value.
    return K_NONE
end

---------------------------------------------------------------------------------------------
-- The batch: an atc_value array reused across requests.

-- A new, empty batch.
function _M.batch()
    return { values = ffi.new("atc_value[?]", 16), cap = 16, anchors = {}, fields = {} }
end

local function grow(b, k)
    local cap = 2 * b.cap
    local grown = ffi.new("atc_value[?]", cap)
    ffi.copy(grown, b.values, ffi.sizeof("atc_value") * k)
    b.values, b.cap = grown, cap
end

-- Appends a Lua value (a string, or a number for an Int field) to the k values so far: the new
-- count, or nil and why for a value of the wrong Lua type.
local function push(b, k, step, x)
    if k >= b.cap then
        grow(b, k)
    end
    local e = b.values[k]
    local ty = step.type
    e.field = step.id
    e.value_type = ty
    if ty == T_INT then
        if type(x) ~= "number" or x ~= floor(x) or x < -2 ^ 63 or x >= 2 ^ 63 then
            return nil, "field `" .. step.field .. "` takes Int values, got " .. tostring(x)
        end
        e.int_value = x
    else
        if type(x) ~= "string" then
            return nil, "field `" .. step.field .. "` takes text values, got a Lua " .. type(x)
        end
        e.ptr, e.len = x, #x
    end
    k = k + 1
    b.anchors[k] = x
    b.fields[k] = step.field
    return k
end

-- Appends bytes the source keeps valid (see the invariants): the new count.
local function push_bytes(b, k, step, ptr, len)
    if k >= b.cap then
        grow(b, k)
    end
    local e = b.values[k]
    e.field = step.id
    e.value_type = step.type
    e.ptr, e.len = ptr, len
    k = k + 1
    b.fields[k] = step.field
    return k
end

-- Appends a value or an array of them (what an extractor may return): the new count, or nil
-- and why.
local function push_all(b, k, step, v)
    if type(v) ~= "table" then
        return push(b, k, step, v)
    end
    local err
    for j = 1, #v do
        k, err = push(b, k, step, v[j])
        if not k then
            return nil, err
        end
    end
    return k
end

---------------------------------------------------------------------------------------------
-- The sources. Each has:
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

---------------------------------------------------------------------------------------------
-- The reader.

pcall(ffi.cdef, "int memcmp(const void *a, const void *b, size_t n);")
local memcmp = ffi.C.memcmp

-- Whether `key` ({ len, data }) holds exactly the bytes of the Lua string `name`.
local function key_is(key, name)
    local n = #name
    return key.len == n and memcmp(key.data, name, n) == 0
end

-- Piece n (0-based) of the path `ptr`, `len` after its leading slashes: start and length, or
-- nil when the path has fewer pieces. The only path splitter.
local function segment(ptr, len, n)
    local start = 0
    while start < len and ptr[start] == 47 do -- "/"
        start = start + 1
    end
    for _ = 1, n do
        while start < len and ptr[start] ~= 47 do
            start = start + 1
        end
        if start >= len then
            return nil
        end
        start = start + 1
    end
    local stop = start
    while stop < len and ptr[stop] ~= 47 do
        stop = stop + 1
    end
    return start, stop - start
end
_M.segment = segment

-- The value of an Int field from the decimal text nginx gives (a port), as tonumber() reads
-- it; nil for no digits.
local function decimal(ptr, len)
    if len == 0 or len > 18 then
        return len > 0 and tonumber(ffi_string(ptr, len)) or nil
    end
    local n = 0
    for i = 0, len - 1 do
        local d = ptr[i] - 48
        if d < 0 or d > 9 then
            return tonumber(ffi_string(ptr, len))
        end
        n = n * 10 + d
    end
    return n
end

local ALL = -1
_M.ALL = ALL

-- Reads the values of the steps of `steps` whose field is in the mask (lo, hi; ALL, ALL: every
-- step) from the current request into batch `b`, through `src`: the number of values, or nil
-- and why the request cannot be read (too many headers or arguments when one is needed, a
-- value of the wrong type from an extractor).
function _M.read(b, src, steps, lo, hi, max_headers, max_args)
    local r = src.request()
    if not r then
        return 0
    end
    local k = 0
    local var = src.var
    local uri_ptr, uri_len = nil, nil
    local nh, hdrs, nargs, argv = nil, nil, nil, nil
    for i = 1, #steps do
        local step = steps[i]
        if bor(band(lo, step.lo), band(hi, step.hi)) ~= 0 then
            local kind = step.kind
            if kind == K_PATH or kind == K_SEGMENT then
                if not uri_ptr then
                    uri_ptr, uri_len = var(r, "uri")
                end
                if uri_ptr then
                    if kind == K_PATH then
                        k = push_bytes(b, k, step, uri_ptr, uri_len)
                    else
                        local start, n = segment(uri_ptr, uri_len, step.arg)
                        if start then
                            k = push_bytes(b, k, step, uri_ptr + start, n)
                        end
                    end
                end
            elseif kind == K_HOST or kind == K_PROTOCOL or kind == K_SNI then
                local ptr, len = var(r, step.arg)
                if ptr then
                    k = push_bytes(b, k, step, ptr, len)
                end
            elseif kind == K_METHOD then
                local err
                k, err = push(b, k, step, src.method(r))
                if not k then
                    return nil, err
                end
            elseif kind == K_HEADER then
                -- The header list has every value of a header; $http_NAME only says whether it
                -- is there. Too many headers rejects the request only when one in use is there.
                if nh == nil and not src.presence_first then
                    nh, hdrs = src.headers(r, max_headers)
                    nh = nh or false
                end
                if nh == nil and var(r, step.present) then
                    nh, hdrs = src.headers(r, max_headers)
                    nh = nh or false
                end
                if nh == false then
                    if var(r, step.present) then
                        return nil, "more than " .. max_headers .. " request headers"
                    end
                elseif nh then
                    local name = step.arg
                    for j = 0, nh - 1 do
                        local h = hdrs[j]
                        if key_is(h.key, name) then
                            k = push_bytes(b, k, step, h.value.data, h.value.len)
                        end
                    end
                end
            elseif kind == K_QUERY then
                if not nargs then
                    nargs = 0
                    -- No query string (most requests): no query values, nothing parsed.
                    if var(r, "args") then
                        nargs, argv = src.args(r, max_args)
                        if not nargs then
                            return nil, "more than " .. max_args .. " query arguments"
                        end
                    end
                end
                local name = step.arg
                for j = 0, nargs - 1 do
                    local a = argv[j]
                    if a.value.len >= 0 and key_is(a.key, name) then
                        k = push_bytes(b, k, step, a.value.data, a.value.len)
                    end
                end
            elseif kind == K_SRC_IP or kind == K_DST_IP then
                local ptr, len = var(r, step.arg)
                -- "unix:" on a Unix socket: no address.
                if ptr and not (len > 0 and ptr[0] == 117) then -- "u"
                    k = push_bytes(b, k, step, ptr, len)
                end
            elseif kind == K_SRC_PORT or kind == K_DST_PORT then
                local ptr, len = var(r, step.arg)
                local n = ptr and decimal(ptr, len)
                if n then
                    k = push(b, k, step, n)
                end
            elseif kind == K_CUSTOM then
                local v = step.arg(step.field)
                if v ~= nil then
                    local err
                    k, err = push_all(b, k, step, v)
                    if not k then
                        return nil, err
                    end
                end
            end
        end
    end
    return k
end

-- For tests: the values of batch `b` (k of them) as "field=value" lines.
function _M.describe(b, k)
    local lines = {}
    for i = 0, k - 1 do
        local e = b.values[i]
        local text
        if e.value_type == T_INT then
            text = tostring(tonumber(e.int_value))
        else
            text = ffi_string(e.ptr, e.len)
        end
        lines[i + 1] = tostring(b.fields[i + 1]) .. "=" .. text
    end
    return table.concat(lines, "\n")
end

return _M
