-- resty.router.gateway: a router for an OpenResty gateway, kept at the version of the route list
-- its owner last applied, and routing nginx requests.
--
--   local gateway = require("resty.router.gateway")
--   local gw = assert(gateway.new())                  -- the standard gateway schema
--   assert(gw:update(version, routes))                -- e.g. in init_worker, and on changes
--   ...
--   local uuid, matched_path, captures = gw:route()   -- in access_by_lua*, per request
--
-- Update model. `gw:update(version, routes)` does nothing when `version` is the version last
-- applied; otherwise it syncs the router to `routes` (only the routes that differ are parsed
-- again) and recomputes the fields the routes use. All of that runs in this call, in plain Lua
-- and FFI calls that never yield, and an OpenResty worker runs one Lua thread at a time: every
-- request of the worker is routed either by the old table or by the new one, never by a mix.
-- `routes` may also be a function returning the list, called only when the version changed (it
-- may yield, e.g. to fetch the list; the table changes only after it returned).
--
-- Request model. `gw:route()` puts into one context, reused across requests, only the fields
-- the current routes use (nothing else is read from the request):
--   http.method            ngx.req.get_method()
--   http.host              ngx.var.host: the host from the request line or the Host header,
--                          without the port, lowercase (nginx does this)
--   http.path              ngx.var.uri: decoded, normalised, without the query string
--   http.path.segments.N   piece N (0-based) of the path after its leading slashes
--   http.headers.NAME      every value of request header NAME, with NAME lowercase and `_`
--                          standing for `-` (http.headers.x_api_key <- X-Api-Key)
--   http.queries.NAME      every value of query argument NAME (arguments without a value, as in
--                          `?debug`, have none)
--   net.src.ip, net.src.port, net.dst.ip, net.dst.port, net.protocol, tls.sni
--                          remote_addr, remote_port, server_addr, server_port, scheme,
--                          ssl_server_name (nothing on a Unix socket or without TLS)
-- Of those, route() reads in two phases: the key fields (the fields the router's indexes look up,
-- atc_router_key_fields), then only the fields of the routes those values leave possible
-- (atc_router_needed_fields), which gives the result of reading every field (see route()).
-- A request whose values cannot go into the context (invalid UTF-8, more values than the limit,
-- more headers or query arguments than `max_headers` / `max_args` when they have to be read)
-- matches nothing: route() returns nil and the reason, and never raises. Answer it with a 400
-- (or a 404).
--
-- Cost. Inside nginx the values are read through resty.router.ngx_request: lua-nginx-module's
-- FFI functions (the ones lua-resty-core is built on) hand out pointers into the request, which
-- go into the atc_value array as they are, so reading a field makes no Lua string (interning
-- strings in a string table that the route table's strings have grown, and collecting them, was
-- most of what reading fields cost). Headers are read once per request when a header field is
-- in use (one call for the count, one for name/value pointers of all of them), query arguments
-- only when the request has a query string. Then one FFI call adds all values
-- (atc_context_add_values over an array reused across requests), one executes and one reads the
-- result. Outside nginx (or without lua-resty-core's declarations) the same values come from
-- ngx.var, ngx.req.get_headers() (only when $http_NAME says a header in use is present) and
-- ngx.req.get_uri_args(); lua/t/gateway.lua checks inside nginx that both give the same values.
--
-- Invariants:
-- * `self.plan` (and its split into `key_steps` and `other_steps`) is derived from the router's
--   field list and key fields, and they change together, in update(), without yielding in
--   between.
-- * Between filling `self.values` and the FFI call that reads it, every Lua string it points to
--   is also referenced from `self.anchors`, so the garbage collector cannot free one in between;
--   the other pointers point into the current request's memory (resty.router.ngx_request).

local ffi = require("ffi")
local bit = require("bit")
local cdefs = require("resty.router.cdefs")
local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")
local nr = require("resty.router.ngx_request")

local lib = cdefs.lib
local errbuf, errlen, ERRBUF_SIZE = cdefs.errbuf, cdefs.errlen, cdefs.ERRBUF_SIZE

local ngx = ngx
local type, tonumber, tostring, ipairs, setmetatable = type, tonumber, tostring, ipairs, setmetatable
local find, sub, gsub, match, byte = string.find, string.sub, string.gsub, string.match, string.byte
local floor = math.floor
local ffi_string = ffi.string
local band, lshift = bit.band, bit.lshift

local T_INT = lib.ATC_TYPE_INT
local LAST_BIT = lib.ATC_FIELD_MASK_LAST_BIT

-- Field masks (atc_router_key_fields, atc_router_needed_fields) are read as two 32-bit halves:
-- a uint64_t read from LuaJIT is a boxed cdata, a uint32_t a plain number.
local maskbuf = ffi.new("uint64_t[1]")
local mask32 = ffi.cast("uint32_t *", maskbuf)
local LO, HI = 0, 1
if not ffi.abi("le") then
    LO, HI = 1, 0
end

local _M = {}
local mt = { __index = _M }

-- The fields a gateway routes on (the schema of atc-workload and Kong's router).
_M.SCHEMA = {
    { "http.method", "String" },
    { "http.host", "String" },
    { "http.path", "String" },
    { "http.path.segments.*", "String" },
    { "http.headers.*", "String" },
    { "http.queries.*", "String" },
    { "tls.sni", "String" },
    { "net.protocol", "String" },
    { "net.src.ip", "IpAddr" },
    { "net.dst.ip", "IpAddr" },
    { "net.src.port", "Int" },
    { "net.dst.port", "Int" },
}

-- Where each field's value comes from (see the header comment).
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

-- Options:
--   schema      array of { name, type } (default gateway.SCHEMA)
--   extractors  { [field] = function(field) return value or array of values end }: sources for
--               fields the defaults do not cover, or overrides (they must not raise)
--   mode        default sync mode of update(): "all_or_nothing" (default) or "apply_valid"
--   max_headers request headers read (default 100); a request with more matches nothing, when
--               a header the routes use is present (otherwise the headers are not read at all)
--   max_args    query arguments read (default 100); likewise, when a query field is in use
--   read_all_fields  read every field in use for every request (the behaviour before two-phase
--               routing: a malformed value in any of them rejects the request) instead of only
--               the fields the request's candidate routes use
-- Returns the gateway, or nil and an error.
function _M.new(opts)
    opts = opts or {}
    local s = schema.new()
    for _, f in ipairs(opts.schema or _M.SCHEMA) do
        local ok, err = s:add_field(f[1], f[2])
        if not ok then
            return nil, err
        end
    end
    local r, err = router.new(s)
    if not r then
        return nil, err
    end
    local c
    c, err = context.new(s)
    if not c then
        return nil, err
    end
    local self = setmetatable({
        schema = s,
        router = r,
        context = c,
        extractors = opts.extractors or {},
        mode = opts.mode or "all_or_nothing",
        max_headers = opts.max_headers or 100,
        max_args = opts.max_args or 100,
        applied = nil,
        fields = {},
        plan = {},
        -- The plan split for two-phase routing: steps of the fields the router's indexes look
        -- up (read for every request), and the others (read when a candidate needs them).
        key_steps = {},
        other_steps = {},
        one_pass = true,
        read_all = opts.read_all_fields and true or false,
        -- The request's values, filled in route(): a C array grown on demand, the strings it
        -- points to, and the field of each value (for error messages).
        values = ffi.new("atc_value[?]", 16),
        values_cap = 16,
        anchors = {},
        value_fields = {},
    }, mt)
    return self
end

-- One plan step per field in use: { field, kind, argument, field id, type code, nginx variable
-- (headers: http_NAME), half of the field mask holding the field's bit (1: low, 2: high), the
-- bit within that half }.
local function make_plan(fields, extractors, ctx)
    local plan = {}
    for i, field in ipairs(fields) do
        local kind, arg = FIXED[field], nil
        if extractors[field] then
            kind, arg = K_CUSTOM, extractors[field]
        elseif not kind then
            local name = match(field, "^http%.headers%.(.+)$")
            if name then
                -- get_headers() keys are lowercase with `-`; `_` in a field name stands for `-`.
                kind, arg = K_HEADER, (gsub(name:lower(), "_", "-"))
            else
                name = match(field, "^http%.queries%.(.+)$")
                if name then
                    kind, arg = K_QUERY, name
                else
                    local n = match(field, "^http%.path%.segments%.(%d+)$")
                    if n then
                        kind, arg = K_SEGMENT, tonumber(n)
                    else
                        -- A schema field the gateway has no source for: it never has a value.
                        kind = K_NONE
                    end
                end
            end
        end
        -- Every field in use is in the schema: the router validated it.
        local id, ty = ctx:field_id(field)
        local nginx_var = kind == K_HEADER and "http_" .. gsub(arg, "-", "_") or nil
        -- A field's bit in the masks is its index (the low 20 bits of the id), capped.
        local index = band(id, 0xFFFFF)
        local b = index < LAST_BIT and index or LAST_BIT
        plan[i] = { field, kind, arg, id, ty, nginx_var, b < 32 and 1 or 2, lshift(1, b % 32) }
    end
    return plan
end

-- The version last applied (nil before the first update).
function _M:version()
    return self.applied
end

-- The names of the fields the routes use, sorted.
function _M:fields_in_use()
    return self.fields
end

-- Brings the router to `routes` (see the header comment and router:sync for the forms of
-- `routes` and the modes) unless `version` was the last version applied. Returns:
--   false                  the version is the one applied: nothing done (the loader not called)
--   true, report           applied (report as from router:sync; with "apply_valid" its errors
--                          list the routes left out: the version counts as applied anyway)
--   nil, err, errs         nothing changed: invalid routes (errs as from router:sync), or the
--                          loader failed; the previous version stays in force
function _M:update(version, routes, mode)
    if version == nil then
        return nil, "version must not be nil"
    end
    if version == self.applied then
        return false
    end
    if type(routes) == "function" then
        local list, err = routes()
        if type(list) ~= "table" then
            return nil, "the route loader failed: " .. tostring(err)
        end
        -- The loader may have yielded, and another update applied this version meanwhile.
        if version == self.applied then
            return false
        end
        routes = list
    end
    local report, err, errs = self.router:sync(routes, mode or self.mode)
    if not report then
        return nil, err, errs
    end
    -- No yield from here to the end: the new table and its field plan start together.
    local fields = self.router:get_fields() or {}
    self.fields = fields
    local plan = make_plan(fields, self.extractors, self.context)
    lib.atc_router_key_fields(self.router.ptr, maskbuf)
    local lo, hi = mask32[LO], mask32[HI]
    local key_steps, other_steps = {}, {}
    for _, step in ipairs(plan) do
        if band(step[7] == 1 and lo or hi, step[8]) ~= 0 then
            key_steps[#key_steps + 1] = step
        else
            other_steps[#other_steps + 1] = step
        end
    end
    -- What every request needs (the key fields and those of the routes no index holds): the
    -- needed fields of a context without values. When that is every field in use (say, a table
    -- of unindexed routes), two phases would only add calls: route() reads all in one.
    local cptr = self.context.ptr
    lib.atc_context_reset(cptr)
    lib.atc_router_needed_fields(self.router.ptr, cptr, maskbuf)
    lo, hi = mask32[LO], mask32[HI]
    local one_pass = true
    for _, step in ipairs(other_steps) do
        if band(step[7] == 1 and lo or hi, step[8]) == 0 then
            one_pass = false
            break
        end
    end
    self.plan, self.key_steps, self.other_steps = plan, key_steps, other_steps
    self.one_pass = one_pass
    self.applied = version
    return true, report
end

-- Piece n (0-based) of the path after its leading slashes, or nil. (Byte loop and plain finds:
-- LuaJIT compiles them, while a pattern find would leave the trace.)
local function segment(path, n)
    local start = 1
    while byte(path, start) == 47 do -- "/"
        start = start + 1
    end
    for _ = 1, n do
        local slash = find(path, "/", start, true)
        if not slash then
            return nil
        end
        start = slash + 1
    end
    local slash = find(path, "/", start, true)
    return sub(path, start, slash and slash - 1 or -1)
end

-- Only string values: `?a&a=1` gives { true, "1" } and a valueless argument has no value.
local function query_values(v)
    if type(v) == "string" then
        return v
    end
    if type(v) ~= "table" then
        return nil
    end
    for i = 1, #v do
        if type(v[i]) ~= "string" then
            local strings = {}
            for j = 1, #v do
                if type(v[j]) == "string" then
                    strings[#strings + 1] = v[j]
                end
            end
            return strings
        end
    end
    return v
end

-- An address nginx gives for the connection, or nil on a Unix socket ("unix:").
local function ip(addr)
    if addr == nil or byte(addr, 1) == 117 then -- "u"
        return nil
    end
    return addr
end

-- Appends one value to the request's array (k values so far); returns the new count, or nil and
-- an error for a value of the wrong Lua type.
local function grow(self, k)
    local cap = 2 * self.values_cap
    local grown = ffi.new("atc_value[?]", cap)
    ffi.copy(grown, self.values, ffi.sizeof("atc_value") * k)
    self.values, self.values_cap = grown, cap
end

local function push(self, k, step, x)
    if k >= self.values_cap then
        grow(self, k)
    end
    local e = self.values[k]
    local ty = step[5]
    e.field = step[4]
    e.value_type = ty
    if ty == T_INT then
        if type(x) ~= "number" or x ~= floor(x) or x < -2 ^ 63 or x >= 2 ^ 63 then
            return nil, "field `" .. step[1] .. "` takes Int values, got " .. tostring(x)
        end
        e.int_value = x
    else
        if type(x) ~= "string" then
            return nil, "field `" .. step[1] .. "` takes text values, got a Lua " .. type(x)
        end
        e.ptr, e.len = x, #x
    end
    k = k + 1
    self.anchors[k] = x
    self.value_fields[k] = step[1]
    return k
end

-- Appends `v`, one value or a list of them (what a custom extractor may return). Returns the
-- new count, or nil and why.
local function push_all(self, k, step, v)
    if type(v) ~= "table" then
        return push(self, k, step, v)
    end
    local err
    for j = 1, #v do
        k, err = push(self, k, step, v[j])
        if not k then
            return nil, err
        end
    end
    return k
end

local failed = ffi.new("size_t[1]")
local NO_ARGS = {}

-- Whether a step's field is in the mask given as two halves (-1, -1: every field).
local function wanted(step, lo, hi)
    return band(step[7] == 1 and lo or hi, step[8]) ~= 0
end

-- Puts the values of the steps of `plan` whose fields are in the mask (lo, hi) into
-- self.values through the plain ngx API (the source outside nginx, e.g. under the tests'
-- mock): the count, or nil and the reason.
local function fill_lua(self, plan, lo, hi)
    local var = ngx.var
    local k = 0
    local uri, headers, args
    for i = 1, #plan do
        local step = plan[i]
        local kind = wanted(step, lo, hi) and step[2] or K_NONE
        local v
        if kind == K_PATH then
            uri = uri or var.uri
            v = uri
        elseif kind == K_HOST then
            v = var.host
        elseif kind == K_METHOD then
            v = ngx.req.get_method()
        elseif kind == K_HEADER then
            -- $http_NAME is cheap and nil exactly when the header is absent, which it is on
            -- most requests; only a present header needs get_headers(), which has every value.
            if var[step[6]] ~= nil then
                if not headers then
                    local err
                    headers, err = ngx.req.get_headers(self.max_headers)
                    if err == "truncated" then
                        return nil, "more than " .. self.max_headers .. " request headers"
                    end
                end
                v = headers[step[3]]
            end
        elseif kind == K_QUERY then
            if not args then
                -- No query string (most requests): no query values, no get_uri_args().
                if var.args == nil then
                    args = NO_ARGS
                else
                    local err
                    args, err = ngx.req.get_uri_args(self.max_args)
                    if err == "truncated" then
                        return nil, "more than " .. self.max_args .. " query arguments"
                    end
                end
            end
            v = query_values(args[step[3]])
        elseif kind == K_SEGMENT then
            uri = uri or var.uri
            v = uri and segment(uri, step[3])
        elseif kind == K_SRC_IP then
            v = ip(var.remote_addr)
        elseif kind == K_DST_IP then
            v = ip(var.server_addr)
        elseif kind == K_SRC_PORT then
            v = tonumber(var.remote_port)
        elseif kind == K_DST_PORT then
            v = tonumber(var.server_port)
        elseif kind == K_PROTOCOL then
            v = var.scheme
        elseif kind == K_SNI then
            v = var.ssl_server_name
        elseif kind == K_CUSTOM then
            v = step[3](step[1])
        end
        if v ~= nil then
            local err
            k, err = push_all(self, k, step, v)
            if not k then
                return nil, err
            end
        end
    end
    return k
end

-- Appends a value that points into nginx's memory (see resty.router.ngx_request): nothing to
-- anchor. Returns the new count.
local function push_bytes(self, k, step, ptr, len)
    if k >= self.values_cap then
        grow(self, k)
    end
    local e = self.values[k]
    e.field = step[4]
    e.value_type = step[5]
    e.ptr, e.len = ptr, len
    k = k + 1
    self.value_fields[k] = step[1]
    return k
end

-- The value of an Int field from the decimal text nginx gives (a port), as tonumber() would
-- read it; nil for no digits.
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

-- The same values as fill_lua, read through resty.router.ngx_request (inside nginx).
local function fill_native(self, plan, lo, hi)
    local r = nr.request()
    if not r then
        return fill_lua(self, plan, lo, hi)
    end
    local var, vptr, vlen = nr.var, nr.vptr, nr.vlen
    local k = 0
    local uri_ptr, uri_len
    local nh, hdrs, nargs, argv = nil, nil, nil, nil
    for i = 1, #plan do
        local step = plan[i]
        local kind = wanted(step, lo, hi) and step[2] or K_NONE
        if kind == K_PATH or kind == K_SEGMENT then
            if not uri_ptr and var(r, "uri") then
                uri_ptr, uri_len = vptr[0], tonumber(vlen[0])
            end
            if uri_ptr then
                if kind == K_PATH then
                    k = push_bytes(self, k, step, uri_ptr, uri_len)
                else
                    -- Piece n (0-based) after the leading slashes, as segment() cuts it.
                    local start = 0
                    while start < uri_len and uri_ptr[start] == 47 do -- "/"
                        start = start + 1
                    end
                    local found = true
                    for _ = 1, step[3] do
                        while start < uri_len and uri_ptr[start] ~= 47 do
                            start = start + 1
                        end
                        if start >= uri_len then
                            found = false
                            break
                        end
                        start = start + 1
                    end
                    if found then
                        local stop = start
                        while stop < uri_len and uri_ptr[stop] ~= 47 do
                            stop = stop + 1
                        end
                        k = push_bytes(self, k, step, uri_ptr + start, stop - start)
                    end
                end
            end
        elseif kind == K_HOST then
            if var(r, "host") then
                k = push_bytes(self, k, step, vptr[0], vlen[0])
            end
        elseif kind == K_METHOD then
            -- get_method() answers the standard methods with constant strings: no new string.
            local err
            k, err = push(self, k, step, ngx.req.get_method())
            if not k then
                return nil, err
            end
        elseif kind == K_HEADER then
            if not nh then
                local err
                nh, err, hdrs = nr.headers(r, self.max_headers)
                if not nh then
                    -- Too many headers matters only when one the routes use is there.
                    for j = 1, #plan do
                        local s = plan[j]
                        if s[2] == K_HEADER and wanted(s, lo, hi) and var(r, s[6]) then
                            return nil, "more than " .. self.max_headers .. " request headers"
                        end
                    end
                    nh = 0
                end
            end
            local name = step[3]
            for j = 0, nh - 1 do
                local h = hdrs[j]
                if nr.key_is(h.key, name) then
                    k = push_bytes(self, k, step, h.value.data, h.value.len)
                end
            end
        elseif kind == K_QUERY then
            if not nargs then
                nargs = 0
                -- No query string (most requests): no query values, nothing parsed.
                if var(r, "args") then
                    local err
                    nargs, err, argv = nr.args(r, self.max_args)
                    if not nargs then
                        return nil, "more than " .. self.max_args .. " query arguments"
                    end
                end
            end
            local name = step[3]
            for j = 0, nargs - 1 do
                local a = argv[j]
                -- len -1: an argument without a value (`?debug`), which has none.
                if a.value.len >= 0 and nr.key_is(a.key, name) then
                    k = push_bytes(self, k, step, a.value.data, a.value.len)
                end
            end
        elseif kind == K_SRC_IP or kind == K_DST_IP then
            -- "unix:" on a Unix socket: no address.
            if var(r, kind == K_SRC_IP and "remote_addr" or "server_addr")
                and not (vlen[0] > 0 and vptr[0][0] == 117) -- "u"
            then
                k = push_bytes(self, k, step, vptr[0], vlen[0])
            end
        elseif kind == K_SRC_PORT or kind == K_DST_PORT then
            if var(r, kind == K_SRC_PORT and "remote_port" or "server_port") then
                local n = decimal(vptr[0], tonumber(vlen[0]))
                if n then
                    local err
                    k, err = push(self, k, step, n)
                    if not k then
                        return nil, err
                    end
                end
            end
        elseif kind == K_PROTOCOL or kind == K_SNI then
            if var(r, kind == K_PROTOCOL and "scheme" or "ssl_server_name") then
                k = push_bytes(self, k, step, vptr[0], vlen[0])
            end
        elseif kind == K_CUSTOM then
            local v = step[3](step[1])
            if v ~= nil then
                local err
                k, err = push_all(self, k, step, v)
                if not k then
                    return nil, err
                end
            end
        end
    end
    return k
end

-- For tests: the values route() would put into the context for the current request, as
-- "field=value" lines in the order they would be added, read from `source`: "lua" (the plain
-- ngx API) or "native" (resty.router.ngx_request; nil when that is not available). A request
-- that cannot be read gives "error: " and the reason. The nginx test compares the two.
function _M:request_values(source)
    local fill = fill_lua
    if source == "native" then
        if not nr.available then
            return nil
        end
        fill = fill_native
    end
    local k, err = fill(self, self.plan, -1, -1)
    if not k then
        return "error: " .. tostring(err)
    end
    local lines = {}
    for i = 0, k - 1 do
        local e = self.values[i]
        local text
        if e.value_type == T_INT then
            text = tostring(tonumber(e.int_value))
        else
            text = ffi_string(e.ptr, e.len)
        end
        lines[i + 1] = tostring(self.value_fields[i + 1]) .. "=" .. text
    end
    return table.concat(lines, "\n")
end

local fill = nr.available and fill_native or fill_lua

-- Adds the k values of self.values to the context: true, or nil and the reason.
local function add_values(self, cptr, k)
    if k == 0 then
        return true
    end
    errlen[0] = ERRBUF_SIZE
    local rc = lib.atc_context_add_values(cptr, self.values, k, failed, errbuf, errlen)
    if rc ~= 0 then
        local i = tonumber(failed[0]) + 1
        local msg = ffi_string(errbuf, tonumber(errlen[0])):gsub("^value %d+: ", "")
        return nil, "field `" .. tostring(self.value_fields[i]) .. "`: " .. msg
    end
    return true
end

-- Reads the values of `steps` (those whose field bit is in the lo/hi mask; -1, -1: all) from
-- the request and adds them to the context: true, or nil and why.
local function read_into(self, cptr, steps, lo, hi)
    local k, err = fill(self, steps, lo, hi)
    if not k then
        return nil, err
    end
    return add_values(self, cptr, k)
end

-- Routes the current request: uuid, matched path (the value the deciding predicates recorded for
-- http.path, if any) and captures (a table, or nil when the route captured nothing). nil when no
-- route matches; nil and the reason when the request cannot be put in the context. Raises a Lua
-- error when the router is broken (a panic interrupted an update part-way; the next update
-- rebuilds it).
--
-- Two phases (unless `read_all_fields`): the fields the router's indexes look up first, then
-- only the other fields that the routes those values leave possible use
-- (atc_router_needed_fields), which gives the result that reading every field gives. A value
-- that is never read is never checked: a malformed one (invalid UTF-8, too many values) in a
-- field no candidate route uses does not reject the request.
function _M:route()
    local cptr = self.context.ptr
    lib.atc_context_reset(cptr)
    local ok, err
    if self.read_all or self.one_pass then
        ok, err = read_into(self, cptr, self.plan, -1, -1)
    else
        ok, err = read_into(self, cptr, self.key_steps, -1, -1)
        if ok and #self.other_steps > 0 then
            lib.atc_router_needed_fields(self.router.ptr, cptr, maskbuf)
            local lo, hi = mask32[LO], mask32[HI]
            if lo ~= 0 or hi ~= 0 then
                ok, err = read_into(self, cptr, self.other_steps, lo, hi)
            end
        end
    end
    if not ok then
        return nil, err
    end
    local rc = lib.atc_router_execute(self.router.ptr, cptr)
    if rc ~= 1 then
        if rc < 0 then
            -- A broken router (a panic interrupted a sync part-way) gives no answer: fail the
            -- request loudly (a Lua error: 500 and the error log) until an update rebuilds it.
            error("resty.router.gateway: " .. ffi_string(lib.atc_strerror(rc)))
        end
        return nil
    end
    return self.context:get_result("http.path")
end

return _M
