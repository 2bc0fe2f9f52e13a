-- resty.router.ngx_request: the fast source of resty.router.gateway's request values inside
-- nginx. It reads variables, headers and query arguments through the FFI functions of
-- lua-nginx-module that lua-resty-core itself is built on, and puts the pointers nginx returns
-- straight into the gateway's atc_value array.
--
-- Why: ngx.var.NAME, ngx.req.get_headers() and ngx.req.get_uri_args() turn every value into a
-- Lua string. Interning a string walks LuaJIT's string table (a cache miss or two once the route
-- table's strings fill it), and every unique path becomes garbage. At 15 fields per request that
-- was most of the time route() took. Pointers into the request cost neither, and atc_value
-- only needs pointer and length until atc_context_add_values returns (the context copies).
--
-- `available` is false outside nginx (tests with a mock `ngx`), or when lua-resty-core does not
-- declare the functions this module needs; the gateway then uses its plain-Lua source, which
-- gives the same values (ffi/tests/nginx.rs checks this source against the reference).
--
-- Invariants:
-- * Every pointer written into `values` points into memory of the current request (nginx
--   variables, header lines, or `qbuf` for unescaped query arguments, which is only overwritten
--   by the next request's fill) or into a string anchored by the caller's `push`.
-- * Only lua-nginx-module functions that lua-resty-core declares are called, with the
--   signatures it declares (resty.core.var, resty.core.request, resty.core.base).

local ffi = require("ffi")

local _M = { available = false }

if type(ngx) ~= "table" or type(ngx.config) ~= "table" or ngx.config.subsystem ~= "http" then
    return _M
end
local ok_base, base = pcall(require, "resty.core.base")
if not ok_base or type(base.get_request) ~= "function" then
    return _M
end
-- They declare ngx_http_lua_ffi_var_get and the request functions (resty.core loads both at
-- startup; requiring them again is a table lookup).
if not pcall(require, "resty.core.var") or not pcall(require, "resty.core.request") then
    return _M
end
local C = ffi.C
local ok_syms = pcall(function()
    return C.ngx_http_lua_ffi_var_get, C.ngx_http_lua_ffi_req_get_headers_count,
        C.ngx_http_lua_ffi_req_get_headers, C.ngx_http_lua_ffi_req_get_uri_args_count,
        C.ngx_http_lua_ffi_req_get_querystring_len, C.ngx_http_lua_ffi_req_get_uri_args,
        ffi.typeof("ngx_http_lua_ffi_table_elt_t")
end)
if not ok_syms then
    return _M
end
pcall(ffi.cdef, "int memcmp(const void *a, const void *b, size_t n);")

local get_request = base.get_request
local var_get = C.ngx_http_lua_ffi_var_get
local get_headers_count = C.ngx_http_lua_ffi_req_get_headers_count
local get_headers = C.ngx_http_lua_ffi_req_get_headers
local get_args_count = C.ngx_http_lua_ffi_req_get_uri_args_count
local get_querystring_len = C.ngx_http_lua_ffi_req_get_querystring_len
local get_args = C.ngx_http_lua_ffi_req_get_uri_args
local memcmp = C.memcmp
local tonumber = tonumber

local NGX_OK = 0
local NGX_DECLINED = -5

local vptr = ffi.new("char *[1]")
local vlen = ffi.new("size_t[1]")
local verr = ffi.new("char *[1]")
local truncated = ffi.new("int[1]")
-- var_get lowercases the name into this buffer; the gateway's names are short, and longer ones
-- get a larger buffer (grow_lowcase).
local lowcase_len = 64
local lowcase = ffi.new("char[?]", lowcase_len)

local elt_type = ffi.typeof("ngx_http_lua_ffi_table_elt_t[?]")
local hdr_cap, hdr = 16, nil
local arg_cap, args = 16, nil
local qbuf_cap, qbuf = 256, nil

-- Whether the nginx variable exists for this request; its bytes are then at vptr[0], vlen[0].
-- An error (rc -1: a variable unknown to nginx) counts as absent, as ngx.var would raise and
-- the gateway must not.
local function var(r, name)
    local n = #name
    if n > lowcase_len then
        lowcase_len = n
        lowcase = ffi.new("char[?]", n)
    end
    return var_get(r, name, n, lowcase, 0, vptr, vlen, verr) == NGX_OK
end
_M.var = var
_M.vptr, _M.vlen = vptr, vlen

function _M.request()
    return get_request()
end

-- Reads the request headers (lowercase names) into `hdr`: their count, or nil and "truncated"
-- when there are more than `max` (0 or negative: nginx's own limit, as get_headers()).
function _M.headers(r, max)
    local n = get_headers_count(r, max, truncated)
    if n <= 0 then
        return 0
    end
    if truncated[0] ~= 0 then
        return nil, "truncated"
    end
    if not hdr or n > hdr_cap then
        hdr_cap = n > hdr_cap and n or hdr_cap
        hdr = ffi.new(elt_type, hdr_cap)
    end
    if get_headers(r, hdr, n, 0) ~= 0 then
        return 0
    end
    return n, nil, hdr
end

-- Reads the query arguments, unescaped, into `args` (their bytes in `qbuf`): their count, or nil
-- and "truncated" when there are more than `max`.
function _M.args(r, max)
    local n = get_args_count(r, max, truncated)
    if n <= 0 then
        return 0
    end
    if truncated[0] ~= 0 then
        return nil, "truncated"
    end
    if not args or n > arg_cap then
        arg_cap = n > arg_cap and n or arg_cap
        args = ffi.new(elt_type, arg_cap)
    end
    local len = tonumber(get_querystring_len(r))
    if not qbuf or len > qbuf_cap then
        qbuf_cap = len > qbuf_cap and len or qbuf_cap
        qbuf = ffi.new("unsigned char[?]", qbuf_cap)
    end
    return get_args(r, qbuf, args, n), nil, args
end

-- Whether `key` (an ngx_http_lua_ffi_str_t) holds exactly the bytes of the Lua string `name`.
function _M.key_is(key, name)
    local n = #name
    return key.len == n and memcmp(key.data, name, n) == 0
end

_M.available = true
return _M
