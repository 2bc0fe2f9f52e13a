-- resty.router.gateway.request: reads the values of the current nginx request for the steps of
-- a routing plan (resty.router.gateway.updates) into a batch of atc_value, for
-- context:add_values(), and the path fields, for context:add_path().
--
-- One reader over two sources of raw request data (resty.router.gateway.sources): inside
-- nginx, pointers into the request from lua-nginx-module's FFI functions, so reading a field
-- makes no Lua string; elsewhere the plain ngx API. Which variable a field reads, ports, Unix
-- sockets and the limits are written here once, for both. The rules Kong's router applies to
-- what it reads (the path's normalisation and segments, the Host header's port) are the core
-- library's (atc_router::request), reached through the C ABI: no path is split here.
--
-- What a field reads, by default as Kong's router reads it (kong/router/fields.lua, atc.lua):
--   http.method            ngx.req.get_method()
--   http.host              the Host header without its port (atc_http_host), as sent;
--                          host = "nginx": $host (lowercase, the request line's host first)
--   http.path              $request_uri without its arguments, normalised (reserved characters
--                          kept encoded, others decoded, dot segments removed, slashes merged:
--                          atc_context_add_path with ATC_PATH_NORMALIZE); path = "nginx": $uri
--   http.path.segments.N, .N_M, .len
--                          derived from that path by atc_context_add_path
--   http.headers.NAME      every value of header NAME (lowercase, `_` for `-`); from the plain
--                          ngx API the header list is read only when $http_NAME says a header
--                          in use is present
--   http.queries.NAME      every value of query argument NAME, "" for a valueless `?debug`; the
--                          argument list is read only when there is a query string
--   net.src.ip, net.src.port, net.dst.ip, net.dst.port, net.protocol, tls.sni
--                          $remote_addr, $remote_port, $server_addr, $server_port, $scheme,
--                          $ssl_server_name (no address on a Unix socket, no SNI without TLS);
--                          dst_port_from_host: the Host header's port first, as Kong does
--   an extractor's field   whatever opts.extractors[field](field) returns (value or array)
-- More headers or arguments than max_headers / max_args: the first ones are used and a warning
-- is logged, as Kong does.
--
-- Invariant: every pointer in a batch points into memory its source keeps valid until the next
-- read (see resty.router.gateway.sources), or into a Lua string referenced from the batch's
-- `anchors`: the garbage collector cannot free one before add_values() has copied it.

local ffi = require("ffi")
local bit = require("bit")
local cdefs = require("resty.router.cdefs")

local lib = cdefs.lib

local type, tonumber, tostring = type, tonumber, tostring
local floor = math.floor
local band, bor = bit.band, bit.bor
local ffi_string = ffi.string

local T_INT = cdefs.TYPE_CODES.Int

local _M = {}
_M._VERSION = "0.2.0"

-- Where each field's values come from (see the header comment).
local K_METHOD, K_HOST, K_PATH, K_HEADER, K_QUERY = 1, 2, 3, 5, 6
local K_SRC_IP, K_SRC_PORT, K_DST_IP, K_DST_PORT, K_PROTOCOL, K_SNI = 7, 8, 9, 10, 11, 12
local K_CUSTOM, K_NONE = 13, 14
_M.K_PATH = K_PATH

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

-- The variable a kind reads (http.host and the path: see read()).
local VAR = {
    [K_SRC_IP] = "remote_addr", [K_SRC_PORT] = "remote_port",
    [K_DST_IP] = "server_addr", [K_DST_PORT] = "server_port", [K_PROTOCOL] = "scheme",
    [K_SNI] = "ssl_server_name",
}

local path_field = ffi.new("atc_path_field[1]")

-- The source of a field: kind and argument (the header or argument name, the path field's
-- kind, first and last segment, the extractor), and for headers the variable that says whether
-- the header is present.
function _M.source(field, extractors)
    local ex = extractors[field]
    if ex then
        return K_CUSTOM, ex
    end
    local kind = FIXED[field]
    if kind and kind ~= K_PATH then
        return kind, VAR[kind]
    end
    if lib.atc_path_field_parse(field, #field, path_field) == 1 then
        local f = path_field[0]
        return K_PATH, { kind = f.kind, from = f.from, to = f.to }
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
    -- A schema field the gateway has no source for: it never has a value.
    return K_NONE
end

---------------------------------------------------------------------------------------------
-- The batch: an atc_value array reused across requests.

-- A new, empty batch.
function _M.batch()
    return {
        values = ffi.new("atc_value[?]", 16), cap = 16, anchors = {}, fields = {},
        -- The path fields read (np of them) and the text they derive from.
        paths = ffi.new("atc_path_field[?]", 4), pcap = 4, np = 0, path_ptr = nil, path_len = 0,
    }
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

local host_len = ffi.new("size_t[1]")
local host_port = ffi.new("int64_t[1]")

-- The host and port of the Host header as Kong reads them: ptr, len of the host, and the port
-- or nil; nil when there is no Host header.
local function kong_host(r, var)
    local ptr, len = var(r, "http_host")
    if not ptr then
        return nil
    end
    local rc = lib.atc_http_host(ptr, len, host_len, host_port)
    if rc < 0 then
        -- Not UTF-8: the whole value, which add_values() refuses with the reason.
        return ptr, len, nil
    end
    return ptr, tonumber(host_len[0]), rc == 1 and tonumber(host_port[0]) or nil
end

local function warn_truncated(what, max)
    local ngx = rawget(_G, "ngx")
    if ngx and ngx.log then
        ngx.log(ngx.WARN, "router: the request has more than ", max, " ", what, "; only the ",
            "first ", max, " were read to route it (gateway.new's max_", what == "headers"
            and "headers" or "args", ")")
    end
end

-- Appends path step `step` to the batch's path fields.
local function push_path(b, step)
    local np = b.np
    if np >= b.pcap then
        local grown = ffi.new("atc_path_field[?]", 2 * b.pcap)
        ffi.copy(grown, b.paths, ffi.sizeof("atc_path_field") * np)
        b.paths, b.pcap = grown, 2 * b.pcap
    end
    local f, arg = b.paths[np], step.arg
    f.field, f.kind, f.from, f.to = step.id, arg.kind, arg.from, arg.to
    b.np = np + 1
end

-- Reads the steps of `steps` whose field is in the mask (lo, hi; ALL, ALL: every step) from
-- the current request into batch `b`, through `src`, as gateway `gw` says (max_headers,
-- max_args, path_var, host_var, kong_host, dst_port_from_host): the number of values, or nil
-- and why the request cannot be read (a value of the wrong type from an extractor). The path
-- fields read are left in b.paths (b.np of them) with the text in b.path_ptr, b.path_len.
function _M.read(b, src, steps, lo, hi, gw)
    b.np = 0
    local r = src.request()
    if not r then
        return 0
    end
    local k = 0
    local var = src.var
    local nh, hdrs, nargs, argv = nil, nil, nil, nil
    for i = 1, #steps do
        local step = steps[i]
        if bor(band(lo, step.lo), band(hi, step.hi)) ~= 0 then
            local kind = step.kind
            if kind == K_PATH then
                if b.np == 0 then
                    b.path_ptr, b.path_len = var(r, gw.path_var)
                end
                if b.path_ptr then
                    push_path(b, step)
                end
            elseif kind == K_HOST then
                local ptr, len
                if gw.kong_host then
                    ptr, len = kong_host(r, var)
                else
                    ptr, len = var(r, "host")
                end
                if ptr then
                    k = push_bytes(b, k, step, ptr, len)
                end
            elseif kind == K_PROTOCOL or kind == K_SNI then
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
                -- is there.
                if nh == nil and (not src.presence_first or var(r, step.present)) then
                    local truncated
                    nh, hdrs, truncated = src.headers(r, gw.max_headers)
                    if truncated then
                        warn_truncated("headers", gw.max_headers)
                    end
                end
                if nh then
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
                        local truncated
                        nargs, argv, truncated = src.args(r, gw.max_args)
                        if truncated then
                            warn_truncated("args", gw.max_args)
                        end
                    end
                end
                local name = step.arg
                for j = 0, nargs - 1 do
                    local a = argv[j]
                    if key_is(a.key, name) then
                        -- A valueless argument (`?debug`) is "", as Kong reads it.
                        local len = a.value.len
                        k = push_bytes(b, k, step, len >= 0 and a.value.data or a.key.data,
                            len >= 0 and len or 0)
                    end
                end
            elseif kind == K_SRC_IP or kind == K_DST_IP then
                local ptr, len = var(r, step.arg)
                -- "unix:" on a Unix socket: no address.
                if ptr and not (len > 0 and ptr[0] == 117) then -- "u"
                    k = push_bytes(b, k, step, ptr, len)
                end
            elseif kind == K_SRC_PORT or kind == K_DST_PORT then
                local n
                if kind == K_DST_PORT and gw.dst_port_from_host then
                    local _
                    _, _, n = kong_host(r, var)
                end
                if not n then
                    local ptr, len = var(r, step.arg)
                    n = ptr and decimal(ptr, len)
                end
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

return _M
