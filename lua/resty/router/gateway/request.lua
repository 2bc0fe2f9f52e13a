-- resty.router.gateway.request: reads the values of the current nginx request for the steps of
-- a routing plan (resty.router.gateway.updates) into a batch of atc_value, for
-- context:add_values().
--
-- One reader over two sources of raw request data (resty.router.gateway.sources): inside
-- nginx, pointers into the request from lua-nginx-module's FFI functions, so reading a field
-- makes no Lua string; elsewhere the plain ngx API. Which variable a field reads, path
-- segments, ports, Unix sockets and the limits are written here once, for both.
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
-- Invariant: every pointer in a batch points into memory its source keeps valid until the next
-- read (see resty.router.gateway.sources), or into a Lua string referenced from the batch's
-- `anchors`: the garbage collector cannot free one before add_values() has copied it.

local ffi = require("ffi")
local bit = require("bit")
local cdefs = require("resty.router.cdefs")

local type, tonumber, tostring = type, tonumber, tostring
local floor = math.floor
local band, bor = bit.band, bit.bor
local ffi_string = ffi.string

local T_INT = cdefs.TYPE_CODES.Int

local _M = {}
_M._VERSION = "0.2.0"

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
