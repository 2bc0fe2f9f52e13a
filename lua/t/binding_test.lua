-- Tests of the resty.router binding. A table of test functions: ffi/tests/lua.rs runs each in a
-- fresh LuaJIT state with package.path / package.cpath pointing at this repository and the
-- library under test; lua/t/run.lua runs them all from a plain `luajit`.

local T = {}

local function fmt(v)
    if type(v) == "string" then
        return string.format("%q", v)
    end
    return tostring(v)
end

local function eq(got, want, what)
    if got ~= want then
        error((what or "value") .. ": got " .. fmt(got) .. ", want " .. fmt(want), 2)
    end
end

-- Checks a `nil, err` (or `false, err`) return and that err matches `pattern` (plain find).
local function fails(pattern, ok, err)
    if ok then
        error("expected a failure matching " .. fmt(pattern) .. ", got " .. fmt(ok), 2)
    end
    if type(err) ~= "string" or not err:find(pattern, 1, true) then
        error("error " .. fmt(err) .. " does not contain " .. fmt(pattern), 2)
    end
end

local function same(got, want, what)
    for k, v in pairs(want) do
        if got[k] ~= v then
            error((what or "table") .. "[" .. fmt(k) .. "]: got " .. fmt(got[k]) .. ", want " .. fmt(v), 2)
        end
    end
    for k, v in pairs(got) do
        if want[k] == nil then
            error((what or "table") .. " has an unexpected key " .. fmt(k) .. " = " .. fmt(v), 2)
        end
    end
end

local ffi = require("ffi")
local bit = require("bit")
local schema = require("resty.router.schema")
local router = require("resty.router.router")
local context = require("resty.router.context")

local U1 = "a8f2c1e4-0000-4000-8000-000000000001"
local U2 = "a8f2c1e4-0000-4000-8000-000000000002"
local U3 = "a8f2c1e4-0000-4000-8000-000000000003"

local function http_schema()
    local s = schema.new()
    assert(s:add_field("http.method", "String"))
    assert(s:add_field("http.host", "String"))
    assert(s:add_field("http.path", "String"))
    assert(s:add_field("http.headers.*", "String"))
    assert(s:add_field("http.queries.*", "String"))
    assert(s:add_field("http.path.segments.*", "String"))
    assert(s:add_field("net.dst.port", "Int"))
    assert(s:add_field("net.src.ip", "IpAddr"))
    assert(s:add_field("net.src.cidr", "IpCidr"))
    assert(s:add_field("tls.sni", "String"))
    return s
end

function T.schema_fields_and_types()
    local s = schema.new()
    eq(s:add_field("a.str", "String"), true)
    eq(s:add_field("a.int", "Int"), true)
    eq(s:add_field("a.ip", "IpAddr"), true)
    eq(s:add_field("a.cidr", "IpCidr"), true)
    eq(s:get_field_type("a.str"), "String")
    eq(s:get_field_type("a.int"), "Int")
    eq(s:get_field_type("a.ip"), "IpAddr")
    eq(s:get_field_type("a.cidr"), "IpCidr")
    eq(s:get_field_type("nope"), nil)
    eq(s:get_field_type(42), nil)
    eq(s:get_field_type("bad\255utf8"), nil)
    fails("already in the schema", s:add_field("a.str", "Int"))
    fails("invalid field name", s:add_field("1abc", "String"))
    fails("invalid field name", s:add_field("", "String"))
    fails("not valid UTF-8", s:add_field("a\255", "String"))
    fails("unknown field type", s:add_field("a.x", "Float"))
    fails("unknown field type", s:add_field("a.x", nil))
    fails("must be a string", s:add_field(nil, "String"))
    fails("must be a string", s:add_field({}, "String"))
end

function T.schema_is_frozen_once_shared()
    local s = http_schema()
    assert(router.validate(s, 'http.host == "a"'))
    -- Validation does not share the schema.
    eq(s:add_field("x.before", "String"), true)
    local r = router.new(s)
    fails("already used by a router or a context", s:add_field("x.after", "String"))
    eq(s:get_field_type("x.before"), "String")
    eq(s:get_field_type("x.after"), nil)
    -- The same for a context.
    local s2 = http_schema()
    local c = context.new(s2)
    fails("already used by a router or a context", s2:add_field("x.after", "String"))
    assert(r and c)
end

local DEFAULT_LIMITS = {
    max_expression_len = 1024 * 1024,
    max_depth = 256,
    max_predicates = 16384,
    max_regexes = 16384,
    regex_size_limit = 10 * 1024 * 1024,
    regex_total_size_limit = 32 * 1024 * 1024,
    max_values_per_field = 1024,
    max_wildcard_fields = 65536,
}

function T.schema_limits_set_get_and_errors()
    local s = http_schema()
    same(s:get_limits(), DEFAULT_LIMITS, "defaults")
    -- Refused arguments change nothing, even next to valid ones.
    fails("limits must be a table, got nil", s:set_limits())
    fails("limits must be a table, got number", s:set_limits(5))
    fails("unknown limit max_routes (expected max_expression_len, max_depth, max_predicates, "
        .. "max_regexes, regex_size_limit, regex_total_size_limit, max_values_per_field, "
        .. "max_wildcard_fields)", s:set_limits({ max_depth = 4, max_routes = 1 }))
    fails("unknown limit 1 (expected", s:set_limits({ 10 }))
    for _, bad in ipairs({ 0, -1, 1.5, 2 ^ 60, 0 / 0, 1 / 0, "10", true, ffi.new("int64_t", 0) }) do
        fails("limit max_predicates must be a positive integer, got " .. tostring(bad),
            s:set_limits({ max_depth = 4, max_predicates = bad }))
    end
    same(s:get_limits(), DEFAULT_LIMITS, "after refusals")
    -- Set: the named limits change, the others keep their values.
    eq(s:set_limits({ max_predicates = 2, max_depth = 1000, max_regexes = ffi.new("uint64_t", 3) }), true)
    eq(s:set_limits({ max_values_per_field = 2 }), true)
    eq(s:set_limits({}), true)
    local want = {}
    for k, v in pairs(DEFAULT_LIMITS) do
        want[k] = v
    end
    want.max_predicates, want.max_depth, want.max_regexes, want.max_values_per_field = 2, 256, 3, 2
    same(s:get_limits(), want, "after set_limits (max_depth capped at 256)")
    -- Validation does not share the schema: limits can still be set.
    assert(router.validate(s, 'http.host == "a"'))
    eq(s:set_limits({ max_wildcard_fields = 7 }), true)
    want.max_wildcard_fields = 7
    -- Once a router (or a context) uses the schema, no more: the limits stay as they were.
    local r = router.new(s)
    fails("cannot set limit `max_predicates`: the schema is already used by a router or a context",
        s:set_limits({ max_predicates = 100 }))
    fails("unknown limit", s:set_limits({ nope = 1 }))
    same(s:get_limits(), want, "after a refusal on a shared schema")
    local s2 = http_schema()
    local c = context.new(s2)
    fails("already used by a router or a context", s2:set_limits({ max_depth = 8 }))
    same(s2:get_limits(), DEFAULT_LIMITS)
    assert(r and c)
end

-- The limits set through the binding are the ones routes, validation and contexts meet.
function T.schema_limits_govern_routers_validation_and_contexts()
    local s = http_schema()
    assert(s:set_limits({
        max_expression_len = 80,
        max_depth = 2,
        max_predicates = 3,
        max_regexes = 1,
        regex_size_limit = 64 * 1024,
        max_values_per_field = 2,
        max_wildcard_fields = 1,
    }))
    local cases = {
        { 'http.path == "' .. ("a"):rep(70) .. '"', "expression is too long: 85 bytes, the limit is 80 bytes" },
        { '(((http.path == "a")))', "nested too deeply: the limit is 2 levels" },
        { 'http.path == "a" || http.path == "b" || http.path == "c" || http.path == "d"',
            "too many predicates: 4, the limit is 3" },
        { 'http.path ~ "^/a" || http.path ~ "^/b"', "too many regexes in one expression (limit: 1)" },
        { 'http.path ~ "^/a{100}{100}"', "regex is too large once compiled (limit: 65536 bytes)" },
    }
    -- router.validate checks against them before the schema is in use ...
    for _, case in ipairs(cases) do
        fails(case[2], router.validate(s, case[1]))
    end
    local r = router.new(s)
    local c = context.new(s)
    -- ... and routers and router.validate after.
    for _, case in ipairs(cases) do
        fails(case[2], r:add_matcher(1, U1, case[1]))
        fails(case[2], router.validate(s, case[1]))
    end
    eq(r:sync({ { id = U1, priority = 1, expression = cases[3][1] } }), nil, "sync is checked too")
    assert(r:add_matcher(1, U1, 'http.headers.a == "x" && http.path ^= "/"'))
    fails("too many distinct wildcard field names in use by routes (limit: 1)",
        r:add_matcher(1, U2, 'http.headers.b == "x"'))
    -- Contexts: two values per field.
    assert(c:add_value("http.path", { "/1", "/2" }))
    fails("field `http.path` already holds 2 values, the most one field may hold",
        c:add_value("http.path", "/3"))
    assert(c:add_value("http.headers.a", "x"))
    eq(r:execute(c), true)
    -- The same routes load under the defaults.
    local d = router.new(http_schema())
    for i, case in ipairs(cases) do
        assert(d:add_matcher(1, string.format("a8f2c1e4-0000-4000-8000-%012d", i), case[1]))
    end
end

-- Kong's API keys routes by (priority, id), as Kong's library and module do: an id added again
-- at another priority is a second route, results name it by its id, and remove_matcher removes
-- the one added last, after which the id is unknown to it (the older one stays).
function T.kong_api_keys_by_priority_and_id()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    local function route(path)
        c:reset()
        assert(c:add_value("http.path", path))
        if not r:execute(c) then
            return nil
        end
        return (c:get_result())
    end
    assert(r:add_matcher(1, U1, 'http.path ^= "/a"'))
    assert(r:add_matcher(2, U1, 'http.path ^= "/b"'))
    fails("already exists at priority 2", r:add_matcher(2, U1, 'http.path ^= "/c"'))
    assert(r:add_matcher(5, U2, 'http.path ^= "/a/x"'))
    eq(route("/a/1"), U1)
    eq(route("/b/1"), U1, "the second priority, named by its id")
    eq(route("/a/x"), U2)
    -- Both routes of U1 compete at their own priorities: above and below U2's.
    assert(r:add_matcher(9, U1, 'http.path ^= "/a/x"'))
    eq(route("/a/x"), U1)
    -- remove_matcher removes the last added (priority 9), then knows the id no more.
    eq(r:remove_matcher(U1), true)
    eq(route("/a/x"), U2)
    eq(r:remove_matcher(U1), false)
    eq(route("/b/1"), U1, "priority 2 stays, as in Kong's library")
    eq(route("/a/1"), U1, "priority 1 stays")
    -- Added again at a new priority: a route of its own; at an old one: refused.
    assert(r:add_matcher(7, U1, 'http.path ^= "/d"'))
    eq(route("/d"), U1)
    fails("already exists", r:add_matcher(1, U1, 'http.path ^= "/e"'))
    eq(r:remove_matcher(U1), true)
    eq(route("/d"), nil)
    -- An id of another spelling than Kong's (no hyphens) stays one route per id.
    local simple = "a8f2c1e4000040008000000000000009"
    assert(r:add_matcher(1, simple, 'http.path ^= "/s"'))
    fails("already exists", r:add_matcher(2, simple, 'http.path ^= "/t"'))
end

function T.router_add_and_errors()
    local s = http_schema()
    local r = router.new(s, 100)
    eq(r:add_matcher(10, U1, 'http.path ^= "/api"'), true)
    fails("already exists", r:add_matcher(10, U1, 'http.path ^= "/b"'))
    fails("invalid route id", r:add_matcher(5, "not-a-uuid", 'http.path ^= "/b"'))
    fails("invalid route id", r:add_matcher(5, "", 'http.path ^= "/b"'))
    fails("must be a string", r:add_matcher(5, nil, 'http.path ^= "/b"'))
    fails("must be a string", r:add_matcher(5, U2, nil))
    fails("priority must be", r:add_matcher(1.5, U2, 'http.path ^= "/b"'))
    fails("priority must be", r:add_matcher(2 ^ 60, U2, 'http.path ^= "/b"'))
    fails("priority must be", r:add_matcher("1", U2, 'http.path ^= "/b"'))
    fails("priority must be", r:add_matcher(0 / 0, U2, 'http.path ^= "/b"'))
    -- Expression errors carry their position and a caret.
    local ok, err = r:add_matcher(1, U2, 'http.path = "/b"')
    fails("line 1, column", ok, err)
    assert(err:find("^", 1, true), "caret in " .. err)
    fails("unknown field", r:add_matcher(1, U2, 'http.nope == "/b"'))
    fails("line 1", r:add_matcher(1, U2, 'net.dst.port == "80"'))
    fails("not valid UTF-8", r:add_matcher(1, U2, 'http.path == "\255"'))
    fails("line 1", r:add_matcher(1, U2, ""))
    -- Nothing was added by the failures: U2 is still free.
    eq(r:add_matcher(1, U2, 'http.path ^= "/b"'), true)
    -- Other UUID spellings are accepted.
    eq(r:add_matcher(1, "A8F2C1E4000040008000000000000003", 'http.path ^= "/c"'), true)
    eq(r:remove_matcher(U3), true)
    -- A negative priority, as Kong's transform makes for some routes, is taken as Kong's binding
    -- takes it (LuaJIT's conversion to uint64_t) and outranks the routes it outranks there.
    local k = router.new(s)
    local kong = "a8f2c1e4-0000-4000-8000-0000000000aa"
    assert(k:add_matcher(2 ^ 53, U1, 'http.path ^= "/k"'))
    assert(k:add_matcher(-2147483637, kong, 'http.path ^= "/k"'))
    fails("priority must be", k:add_matcher(-0.5, U2, 'http.path ^= "/k"'))
    fails("priority must be", k:add_matcher(-2 ^ 64, U2, 'http.path ^= "/k"'))
    local c = context.new(s)
    assert(c:add_value("http.path", "/k/1"))
    eq(k:execute(c), true)
    local want = ffi.cast("uint64_t", -2147483637) > 2 ^ 53 and kong or U1
    eq((c:get_result()), want)
    eq(k:remove_matcher(kong), true)
end

function T.router_priority_and_ties()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U3, 'http.path ^= "/"'))
    assert(r:add_matcher(5, U1, 'http.path ^= "/a"'))
    assert(r:add_matcher(5, U2, 'http.path ^= "/a"'))
    local c = context.new(s)
    assert(c:add_value("http.path", "/a/b"))
    eq(r:execute(c), true)
    -- Equal priorities: the higher id wins.
    eq(c:get_result(), U2)
    c:reset()
    assert(c:add_value("http.path", "/z"))
    eq(r:execute(c), true)
    eq(c:get_result(), U3)
end

function T.router_remove()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.path ^= "/"'))
    local c = context.new(s)
    assert(c:add_value("http.path", "/x"))
    eq(r:execute(c), true)
    eq(r:remove_matcher(U1), true)
    eq(r:remove_matcher(U1), false)
    eq(r:remove_matcher("garbage"), false)
    eq(r:remove_matcher(nil), false)
    eq(r:execute(c), false)
    eq(c:get_result(), nil)
    eq(#r:get_fields(), 0)
end

-- A table past the flat index's threshold, loaded with add_matcher, settled, then changed: the
-- same answers before, between and after.
function T.router_settle()
    local s = http_schema()
    local r = router.new(s)
    local function id(i)
        return string.format("00000000-0000-4000-8000-%012d", i)
    end
    for i = 1, 1500 do
        assert(r:add_matcher(i, id(i), 'http.path == "/p/' .. i .. '"'))
    end
    local c = context.new(s)
    local function route_of(path)
        c:reset()
        assert(c:add_value("http.path", path))
        if r:execute(c) then
            return c:get_result()
        end
    end
    eq(route_of("/p/700"), id(700))
    r:settle()
    eq(route_of("/p/700"), id(700))
    eq(route_of("/p/1501"), nil)
    eq(r:remove_matcher(id(700)), true)
    assert(r:add_matcher(1, id(1501), 'http.path == "/p/1501"'))
    eq(route_of("/p/700"), nil)
    eq(route_of("/p/1501"), id(1501))
    r:settle()
    eq(route_of("/p/700"), nil)
    eq(route_of("/p/1501"), id(1501))
    eq(route_of("/p/1"), id(1))
end

function T.router_get_fields_and_validate()
    local s = http_schema()
    local r = router.new(s)
    same(r:get_fields(), {}, "fields of an empty router")
    assert(r:add_matcher(1, U1, 'http.path ^= "/" && http.host == "a"'))
    assert(r:add_matcher(2, U2, 'net.dst.port == 80 && http.headers.x_a == "1"'))
    same(r:get_fields(), { "http.headers.x_a", "http.host", "http.path", "net.dst.port" })

    same(router.validate(s, 'http.path ^= "/" && (http.host == "a" || http.path ~ "x")'),
        { "http.path", "http.host" }, "validate")
    fails("line 1, column 11", router.validate(s, 'http.path = "/"'))
    fails("unknown field", router.validate(s, 'foo == 1'))
    fails("must be a string", router.validate(s, 42))
    fails("not valid UTF-8", router.validate(s, "http.path == \"\255\""))
    assert(not pcall(router.validate, nil, "x"), "validate without a schema raises")

    -- Field lists larger than the initial buffer make the binding grow it.
    local big = schema.new()
    local preds = {}
    for i = 1, 120 do
        local name = "f" .. i .. ".a_rather_long_field_name_to_fill_the_buffer_quickly"
        assert(big:add_field(name, "Int"))
        preds[#preds + 1] = name .. " == " .. i
    end
    local expr = table.concat(preds, " && ")
    local fields = assert(router.validate(big, expr))
    eq(#fields, 120)
    eq(fields[120], "f120.a_rather_long_field_name_to_fill_the_buffer_quickly")
    local rb = router.new(big)
    assert(rb:add_matcher(1, U1, expr))
    eq(#rb:get_fields(), 120)
end

-- Whether the field of id `id` is in the mask (lo, hi).
local function in_mask(id, lo, hi)
    local flo, fhi = router.field_mask(id)
    return bit.band(lo, flo) ~= 0 or bit.band(hi, fhi) ~= 0
end

function T.router_field_masks()
    -- One bit per field index (the low 20 bits of an id), the last one for every index past it.
    same({ router.field_mask(0) }, { 1, 0 })
    same({ router.field_mask(5) }, { 32, 0 })
    same({ router.field_mask(31) }, { bit.lshift(1, 31), 0 })
    same({ router.field_mask(32) }, { 0, 1 })
    same({ router.field_mask(40) }, { 0, 256 })
    same({ router.field_mask(63) }, { 0, bit.lshift(1, 31) })
    same({ router.field_mask(200) }, { 0, bit.lshift(1, 31) })
    same({ router.field_mask(0x300005) }, { 32, 0 })
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    -- No routes: no key fields, and nothing needed.
    same({ r:key_fields() }, { 0, 0 })
    same({ r:needed_fields(c) }, { 0, 0 })
    local ok, err = pcall(r.needed_fields, r, {})
    eq(ok, false)
    if not tostring(err):find("context expected", 1, true) then
        error("unexpected error " .. tostring(err))
    end
end

-- Two-phase matching through the binding: add the key fields, ask which other fields the
-- candidates need, add those, execute; the result is the one adding every field gives.
function T.router_key_and_needed_fields()
    local s = http_schema()
    local r = router.new(s)
    -- Enough hosts that the index looks hosts up; every 7th route also reads a header.
    local n = 300
    for i = 1, n do
        local expr = string.format('http.host == "h%d.com" && http.path ^= "/p"', i)
        if i % 7 == 0 then
            expr = expr .. ' && http.headers.x_a == "1"'
        end
        assert(r:add_matcher(i, string.format("a8f2c1e4-0000-4000-8000-%012d", i), expr))
    end
    local c = context.new(s)
    local host = assert(c:field_id("http.host"))
    local path = assert(c:field_id("http.path"))
    local header = assert(c:field_id("http.headers.x_a"))
    local klo, khi = r:key_fields()
    eq(type(klo), "number")
    eq(type(khi), "number")
    eq(in_mask(host, klo, khi), true, "http.host is a key field")
    eq(in_mask(header, klo, khi), false, "the header is not a key field")
    -- A host whose route reads the header, and one whose route does not.
    for _, case in ipairs({ { 14, true }, { 15, false }, { 999, false } }) do
        c:reset()
        assert(c:add_value("http.host", "h" .. case[1] .. ".com"))
        local lo, hi = r:needed_fields(c)
        eq(in_mask(header, lo, hi), case[2], "header needed for h" .. case[1])
        eq(in_mask(host, lo, hi), true, "the key fields are in the answer")
        assert(c:add_value("http.path", "/p/x"))
        if in_mask(header, lo, hi) then
            assert(c:add_value("http.headers.x_a", "1"))
        end
        local two = r:execute(c) and c:get_result() or nil
        c:reset()
        assert(c:add_value("http.host", "h" .. case[1] .. ".com"))
        assert(c:add_value("http.path", "/p/x"))
        assert(c:add_value("http.headers.x_a", "1"))
        local all = r:execute(c) and c:get_result() or nil
        eq(two, all, "two phases against every field for h" .. case[1])
    end
    -- The key fields follow the routes: with the hosts gone, hosts are no key.
    for i = 1, n do
        r:remove_matcher(string.format("a8f2c1e4-0000-4000-8000-%012d", i))
    end
    same({ r:key_fields() }, { 0, 0 })
end

function T.context_add_values_batch()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.host == "a.com" && net.dst.port == 8443'
        .. ' && net.src.ip in 10.0.0.0/8'))
    local c = context.new(s)
    local host = assert(c:field_id("http.host"))
    local port, port_type = c:field_id("net.dst.port")
    local ip, ip_type = c:field_id("net.src.ip")
    local T_STRING = require("resty.router.cdefs").TYPE_CODES.String
    local v = ffi.new("atc_value[?]", 4)
    local text = "a.com"
    v[0].field, v[0].value_type, v[0].ptr, v[0].len = host, T_STRING, text, #text
    v[1].field, v[1].value_type, v[1].int_value = port, port_type, 8443
    v[2].field, v[2].value_type, v[2].ptr, v[2].len = ip, ip_type, "10.1.2.3", 8
    eq(c:add_values(v, 0), true, "nothing to add")
    eq(c:add_values(v, 3), true)
    eq(r:execute(c), true)
    eq(c:get_result(), U1)
    -- A bad value: its message and its 1-based position; the values before it are in.
    c:reset()
    local bad = "x\255"
    v[2].field, v[2].value_type, v[2].ptr, v[2].len = host, T_STRING, bad, #bad
    local ok, err, at = c:add_values(v, 3)
    eq(ok, nil)
    if not err:find("not valid UTF-8", 1, true) or err:find("^value") then
        error("unexpected message " .. fmt(err))
    end
    eq(at, 3)
    -- The wrong type code for a field is refused too.
    c:reset()
    v[0].value_type = port_type
    ok, err, at = c:add_values(v, 1)
    eq(ok, nil)
    eq(at, 1)
    eq(type(err), "string")
end

function T.context_values_and_types()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, table.concat({
        'http.method == "GET"',
        'net.dst.port == 8443',
        'net.src.ip in 10.0.0.0/8',
        'net.src.cidr == 192.168.0.0/16',
        'http.path ^= "/p"',
    }, " && ")))
    local c = context.new(s)
    eq(c:add_value("http.method", "GET"), true)
    eq(c:add_value("net.dst.port", 8443), true)
    eq(c:add_value("net.src.ip", "10.1.2.3"), true)
    eq(c:add_value("net.src.cidr", "192.168.0.0/16"), true)
    eq(c:add_value("http.path", "/p/q"), true)
    -- nil is a no-op that returns true, for every type, as in Kong's module (callers pass
    -- ngx.var values that may be nil).
    eq(c:add_value("http.host", nil), true)
    eq(c:add_value("net.dst.port", nil), true)
    eq(c:add_value("net.src.ip", nil), true)
    eq(c:add_value("http.headers.x_absent", nil), true)
    eq(r:execute(c), true)
    local uuid, value = c:get_result("net.dst.port")
    eq(uuid, U1)
    eq(value, 8443)
    eq(select(2, c:get_result("net.src.cidr")), "192.168.0.0/16")
    eq(select(2, c:get_result("http.method")), "GET")
    eq(select(2, c:get_result("http.path")), "/p")
    eq(select(2, c:get_result("net.src.ip")), nil) -- `in` records nothing
    eq(select(2, c:get_result("no.such.field")), nil)
    -- IPv6 addresses too.
    local r6 = router.new(s)
    assert(r6:add_matcher(1, U2, 'net.src.ip == 2001:db8::1'))
    c:reset()
    assert(c:add_value("net.src.ip", "2001:db8::1"))
    eq(r6:execute(c), true)
    eq(select(2, c:get_result("net.src.ip")), "2001:db8::1")
end

function T.context_bad_values()
    local s = http_schema()
    local c = context.new(s)
    fails("unknown field", c:add_value("http.nope", "x"))
    -- A name without a dot too (Kong's module returns nil without a message).
    fails("unknown field", c:add_value("nodot", "x"))
    fails("field name must be a string", c:add_value(42, "x"))
    fails("takes String values", c:add_value("http.path", 42))
    fails("takes String values", c:add_value("http.path", true))
    -- `false` is an error, not a no-op as in Kong's module (docs/kong-differences.md).
    fails("takes String values", c:add_value("http.path", false))
    fails("takes Int values", c:add_value("net.dst.port", "80"))
    fails("takes Int values", c:add_value("net.dst.port", 80.5))
    fails("takes Int values", c:add_value("net.dst.port", 2 ^ 63))
    fails("takes Int values", c:add_value("net.dst.port", 1 / 0))
    fails("takes Int values", c:add_value("net.dst.port", 0 / 0))
    fails("takes IpAddr values", c:add_value("net.src.ip", 1))
    fails("is not an IP address", c:add_value("net.src.ip", "10.0.0.256"))
    fails("is not an IP address", c:add_value("net.src.ip", "010.0.0.1"))
    fails("is not an IP address", c:add_value("net.src.ip", "10.0.0.0/8"))
    fails("is not a CIDR", c:add_value("net.src.cidr", "10.0.0.1/8"))
    fails("is not a CIDR", c:add_value("net.src.cidr", "nonsense"))
    fails("not valid UTF-8", c:add_value("http.path", "/a\255\254"))
    fails("not valid UTF-8", c:add_value("http.headers.x_a", { "ok", "bad\192" }))
    -- A huge value is just a value.
    eq(c:add_value("http.path", string.rep("a", 1024 * 1024)), true)
    -- Too many values for one field is a clean error.
    local last_ok, err = true, nil
    for i = 1, 2000 do
        last_ok, err = c:add_value("http.path", "v" .. i)
        if not last_ok then
            break
        end
    end
    fails("values", last_ok, err)
end

function T.multi_valued_headers()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(2, U1, 'http.headers.x_v == "a"'))
    assert(r:add_matcher(1, U2, 'any(lower(http.headers.x_v)) == "b"'))
    local c = context.new(s)
    -- All values must satisfy a plain predicate; any() needs one.
    assert(c:add_value("http.headers.x_v", { "a", "B" }))
    eq(r:execute(c), true)
    eq(c:get_result(), U2)
    eq(select(2, c:get_result("http.headers.x_v")), "b")
    c:reset()
    assert(c:add_value("http.headers.x_v", "a"))
    assert(c:add_value("http.headers.x_v", "a"))
    eq(r:execute(c), true)
    eq(c:get_result(), U1)
    c:reset()
    assert(c:add_value("http.headers.x_v", {}))
    eq(r:execute(c), false)
end

function T.result_matched_values_and_captures()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(3, U1, [[http.path ~ r#"^/users/(?<id>\d+)/(\w+)$"# && http.host == "a.com"]]))
    assert(r:add_matcher(2, U2, 'http.path ^= "/users" || http.path ~ "^/u/(?<n>.*)"'))
    local c = context.new(s)
    assert(c:add_value("http.host", "a.com"))
    assert(c:add_value("http.path", "/users/42/orders"))
    eq(r:execute(c), true)
    local uuid, path, caps = c:get_result("http.path")
    eq(uuid, U1)
    eq(path, "/users/42/orders")
    same(caps, { [0] = "/users/42/orders", [1] = "42", [2] = "orders", id = "42" }, "captures")
    eq(select(2, c:get_result("http.host")), "a.com")
    -- Numbered keys are Lua numbers, names are strings.
    eq(caps["1"], nil)
    eq(type(next(caps)) == "number" or type(next(caps)) == "string", true)

    -- The first true side of || decides: a prefix match records the literal, no captures.
    c:reset()
    assert(c:add_value("http.path", "/users/x"))
    eq(r:execute(c), true)
    local u2, v2, c2 = c:get_result("http.path")
    eq(u2, U2)
    eq(v2, "/users")
    eq(c2, nil)
    c:reset()
    assert(c:add_value("http.path", "/u/é"))
    eq(r:execute(c), true)
    local _, v3, c3 = c:get_result("http.path")
    eq(v3, "/u/é")
    same(c3, { [0] = "/u/é", [1] = "é", n = "é" }, "captures")
end

-- Captures on demand: get_result_lazy answers what get_result does, with the number of
-- captures in place of the table; get_capture reads one key, get_captures all of them, into a
-- table the caller may reuse. get_result itself is unchanged (Kong's).
function T.lazy_captures_read_on_demand()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(3, U1, [[http.path ~ r#"^/users/(?<id>\d+)/(\w+)$"# && http.host == "a.com"]]))
    assert(r:add_matcher(2, U2, 'http.path ^= "/users"'))
    local c = context.new(s)
    assert(c:add_value("http.host", "a.com"))
    assert(c:add_value("http.path", "/users/42/orders"))
    eq(r:execute(c), true)

    local uuid, path, n = c:get_result_lazy("http.path")
    eq(uuid, U1)
    eq(path, "/users/42/orders")
    eq(n, 4, "[0], [1], [2] and id")
    local _, _, table_caps = c:get_result("http.path")
    same(table_caps, { [0] = "/users/42/orders", [1] = "42", [2] = "orders", id = "42" })

    -- One key at a time, as get_result's table holds it: numbers for groups, names as strings.
    eq(c:get_capture(0), "/users/42/orders")
    eq(c:get_capture(1), "42")
    eq(c:get_capture(2), "orders")
    eq(c:get_capture("id"), "42")
    -- Keys the route did not capture, and keys no table would hold, are nil.
    eq(c:get_capture(3), nil)
    eq(c:get_capture("1"), nil, "a group number is not a string key")
    eq(c:get_capture(1.5), nil, "not group 1")
    eq(c:get_capture("i"), nil, "a prefix of a name")
    eq(c:get_capture("idx"), nil)
    eq(c:get_capture(nil), nil)
    eq(c:get_capture({}), nil)

    -- All of them: a new table, or a reused one emptied first.
    same(c:get_captures(), table_caps)
    local reused = { stale = "from an earlier request", [7] = "x" }
    local got = c:get_captures(reused)
    eq(got, reused, "fills the table given")
    same(reused, table_caps)
    assert(not pcall(c.get_captures, c, "not a table"), "a non-table raises")

    -- A route without captures: 0, nil for every key, an empty table.
    c:reset()
    assert(c:add_value("http.path", "/users/x"))
    eq(r:execute(c), true)
    uuid, path, n = c:get_result_lazy("http.path")
    eq(uuid, U2)
    eq(path, "/users")
    eq(n, 0)
    eq(c:get_capture(0), nil)
    same(c:get_captures(reused), {}, "the reused table is emptied")

    -- Many captures: the buffer grows, and a repeated read finds the same.
    local many = router.new(s)
    local groups = {}
    for i = 1, 40 do
        groups[i] = "(?<g" .. i .. ">.)"
    end
    assert(many:add_matcher(1, U3, 'http.path ~ "^' .. table.concat(groups) .. '$"'))
    local text = string.rep("abcdefghij", 4)
    c:reset()
    assert(c:add_value("http.path", text))
    eq(many:execute(c), true)
    eq(select(3, c:get_result_lazy()), 81, "[0], 40 numbers and 40 names")
    eq(c:get_capture("g40"), "j")
    eq(c:get_capture(40), "j")
    eq(c:get_capture("g1"), "a")
    same(c:get_captures(), select(3, c:get_result()))
end

-- The lazy readers answer for the result the context holds when they are called: after reset
-- there is none (nil, an empty table), after the next execute they give its winner's captures.
-- They never keep pointers into the context, so a late read cannot see stale bytes. A table
-- filled earlier keeps its strings (Lua strings, the caller's) until it is filled again.
function T.lazy_captures_follow_the_context()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, [[http.path ~ r#"^/users/(?<id>\d+)$"#]]))
    local c = context.new(s)
    assert(c:add_value("http.path", "/users/42"))
    eq(r:execute(c), true)
    local kept = c:get_captures({})
    eq(c:get_capture("id"), "42")

    c:reset()
    eq(c:get_result_lazy("http.path"), nil, "no result after reset")
    eq(c:get_capture("id"), nil)
    same(c:get_captures(), {})

    assert(c:add_value("http.path", "/users/7"))
    eq(r:execute(c), true)
    eq(c:get_capture("id"), "7", "the new winner's capture")
    eq(kept.id, "42", "a filled table keeps its values")

    -- A miss: no result, no captures.
    c:reset()
    assert(c:add_value("http.path", "/nobody"))
    eq(r:execute(c), false)
    eq(c:get_result_lazy(), nil)
    eq(c:get_capture(0), nil)
end

-- The point of the lazy readers: routing a request whose route captures, and reading its id and
-- matched prefix, makes no Lua object once the route's id string exists; get_result makes a
-- table and a string per capture each time.
function T.lazy_result_allocates_nothing()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, [[http.path ^= "/users/" && http.path ~ r#"^/users/(?<id>\d+)/(?<tab>\w+)$"#]]))
    local c = context.new(s)
    -- Distinct request paths, made before measuring (a gateway's come from nginx's memory).
    local paths = {}
    for i = 1, 64 do
        paths[i] = "/users/" .. (1000 + i) .. "/orders"
    end
    local function route_lazy(i)
        c:reset()
        c:add_value("http.path", paths[i % 64 + 1])
        assert(r:execute(c))
        local uuid, _, n = c:get_result_lazy()
        assert(uuid == U1 and n == 5)
    end
    local function route_table(i)
        c:reset()
        c:add_value("http.path", paths[i % 64 + 1])
        assert(r:execute(c))
        local _, _, caps = c:get_result()
        assert(caps.id)
    end
    -- Bytes allocated by `iterations` calls, measured on the second of two runs: the first
    -- compiles the JIT traces (their objects are allocated too) and grows the buffers.
    local function allocated(fn, iterations)
        local bytes
        for _ = 1, 2 do
            collectgarbage()
            collectgarbage("stop")
            local before = collectgarbage("count")
            for i = 1, iterations do
                fn(i)
            end
            bytes = (collectgarbage("count") - before) * 1024
            collectgarbage("restart")
        end
        return bytes
    end
    local lazy = allocated(route_lazy, 20000)
    local tables = allocated(route_table, 20000)
    assert(tables > 20000 * 32, "get_result makes a table per request (" .. tables .. " bytes)")
    if jit and jit.status() then
        assert(lazy == 0, "the lazy path allocated " .. lazy .. " bytes in 20,000 requests")
    else
        -- The interpreter boxes the 64-bit integers it reads from C (24 bytes a request): still
        -- far below a table and its strings.
        assert(lazy < tables / 4, "the lazy path allocated " .. lazy .. " bytes, get_result "
            .. tables)
    end
end

-- A regex that matched the empty string records "": get_result answers nil for it, as Kong's
-- binding does.
function T.result_empty_matched_value_is_nil()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.path ~ "^(/x)?"'))
    local c = context.new(s)
    assert(c:add_value("http.path", "/y"))
    eq(r:execute(c), true)
    local uuid, value, caps = c:get_result("http.path")
    eq(uuid, U1)
    eq(value, nil)
    same(caps, { [0] = "" }, "the whole (empty) match is still a capture")
end

-- What a context holds, field by field, in the order added.
function T.context_get_values()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.headers.x_a == "1" && net.dst.port == 80 && net.src.ip == 10.0.0.1'))
    local c = context.new(s)
    assert(c:add_value("http.headers.x_a", { "1", "2" }))
    assert(c:add_value("net.dst.port", 80))
    assert(c:add_value("net.src.ip", "10.0.0.1"))
    same(assert(c:get_values("http.headers.x_a")), { "1", "2" })
    same(assert(c:get_values("net.dst.port")), { 80 })
    same(assert(c:get_values("net.src.ip")), { "10.0.0.1" })
    same(assert(c:get_values("http.path")), {}, "no value")
    same(assert(c:get_values("http.headers.unused")), {}, "a name no route uses keeps none")
    fails("unknown field", c:get_values("nope"))
    c:reset()
    same(assert(c:get_values("http.headers.x_a")), {}, "after reset")
end

function T.result_after_miss_and_reset()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.path ^= "/a"'))
    local c = context.new(s)
    eq(c:get_result(), nil)
    assert(c:add_value("http.path", "/a"))
    eq(r:execute(c), true)
    eq(c:get_result(), U1)
    -- A failed execute leaves no result behind.
    c:reset()
    assert(c:add_value("http.path", "/b"))
    eq(r:execute(c), false)
    eq(c:get_result(), nil)
    eq(c:get_result("http.path"), nil)
    -- reset clears the result too.
    c:reset()
    assert(c:add_value("http.path", "/a"))
    eq(r:execute(c), true)
    c:reset()
    eq(c:get_result(), nil)
    eq(r:execute(c), false)
end

function T.many_captures()
    local s = http_schema()
    local r = router.new(s)
    local groups, want = {}, { [0] = "" }
    for i = 1, 40 do
        groups[#groups + 1] = "(?<g" .. i .. ">" .. string.char(96 + (i - 1) % 26 + 1) .. ")"
    end
    local re = table.concat(groups)
    assert(r:add_matcher(1, U1, 'http.path ~ "' .. re .. '"'))
    local text = {}
    for i = 1, 40 do
        text[i] = string.char(96 + (i - 1) % 26 + 1)
        want[i] = text[i]
        want["g" .. i] = text[i]
    end
    want[0] = table.concat(text)
    local c = context.new(s)
    assert(c:add_value("http.path", want[0]))
    eq(r:execute(c), true)
    local _, _, caps = c:get_result()
    same(caps, want, "40 captures")
    -- Again, with the grown buffer.
    _, _, caps = c:get_result()
    same(caps, want, "40 captures, second read")
end

function T.execute_argument_errors()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.path ^= "/"'))
    assert(not pcall(r.execute, r, nil), "execute(nil) raises")
    assert(not pcall(r.execute, r, {}), "execute({}) raises")
    assert(not pcall(router.new, nil), "router.new(nil) raises")
    assert(not pcall(router.new, {}), "router.new({}) raises")
    assert(not pcall(context.new, nil), "context.new(nil) raises")
    -- A context of another schema never matches, and says why.
    local other = context.new(http_schema())
    assert(other:add_value("http.path", "/x"))
    local ok, err = r:execute(other)
    eq(ok, false)
    fails("different schemas", ok, err)
    eq(other:get_result(), nil)
    -- Two routers over one schema share contexts.
    local r2 = router.new(s)
    assert(r2:add_matcher(1, U2, 'http.path ^= "/"'))
    local c = context.new(s)
    assert(c:add_value("http.path", "/x"))
    eq(r:execute(c), true)
    eq(c:get_result(), U1)
    eq(r2:execute(c), true)
    eq(c:get_result(), U2)
end

function T.wildcard_fields()
    local s = http_schema()
    eq(s:get_field_type("http.headers.x_anything"), "String")
    eq(s:get_field_type("http.headers.a.b"), nil)
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.queries.debug == "1" && http.path.segments.0 == "v2"'))
    local c = context.new(s)
    assert(c:add_value("http.queries.debug", "1"))
    assert(c:add_value("http.path.segments.0", "v2"))
    fails("unknown field", c:add_value("http.headers.a.b", "x"))
    eq(r:execute(c), true)
    eq(select(2, c:get_result("http.queries.debug")), "1")
end

function T.request_header_names_register_nothing()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.headers.x_tenant == "t1"'))
    local c = context.new(s)
    -- A client sending random headers: accepted, ignored, and not cached anywhere.
    for i = 1, 20000 do
        assert(c:add_value("http.headers.x_random_" .. i, "v"))
    end
    local cached = 0
    for _ in pairs(s.ids) do
        cached = cached + 1
    end
    eq(cached <= 12, true)
    eq(r:execute(c), false)
    -- A value added while no route read the header is dropped; once a route reads it, the
    -- same name (resolved again, not taken from a cache) is kept.
    c:reset()
    assert(c:add_value("http.headers.x_late", "yes"))
    assert(r:add_matcher(2, U2, 'http.headers.x_late == "yes"'))
    eq(r:execute(c), false)
    c:reset()
    assert(c:add_value("http.headers.x_late", "yes"))
    eq(r:execute(c), true)
    eq(c:get_result(), U2)
    -- And after its route goes, the name is dropped again.
    assert(r:remove_matcher(U2))
    c:reset()
    assert(c:add_value("http.headers.x_late", "yes"))
    eq(r:execute(c), false)
end

function T.int64_cdata_values()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(ffi.new("uint64_t", 2) ^ 62, U1, 'net.dst.port == -9223372036854775807'))
    assert(r:add_matcher(ffi.new("int64_t", 1), U2, 'net.dst.port == 1'))
    fails("priority must be", r:add_matcher(ffi.new("int64_t", -1), U3, 'net.dst.port == 1'))
    local c = context.new(s)
    assert(c:add_value("net.dst.port", -9223372036854775807LL))
    eq(r:execute(c), true)
    eq(c:get_result(), U1)
    fails("takes Int values", c:add_value("net.dst.port", 9223372036854775808ULL))
    c:reset()
    assert(c:add_value("net.dst.port", 1ULL))
    eq(r:execute(c), true)
    eq(c:get_result(), U2)
end

-- Many objects dropped in shuffled order, collected together.
function T.gc_any_order()
    local objs = {}
    for i = 1, 50 do
        local s = http_schema()
        local r = router.new(s)
        assert(r:add_matcher(1, U1, 'http.path ^= "/' .. i .. '"'))
        local c = context.new(s)
        assert(c:add_value("http.path", "/" .. i))
        eq(r:execute(c), true)
        objs[#objs + 1] = s
        objs[#objs + 1] = r
        objs[#objs + 1] = c
    end
    local seed = 7
    for i = #objs, 2, -1 do
        seed = (seed * 1103515245 + 12345) % 2147483648
        local j = seed % i + 1
        objs[i], objs[j] = objs[j], objs[i]
    end
    for i = 1, #objs do
        objs[i] = nil
        if i % 10 == 0 then
            collectgarbage()
        end
    end
    collectgarbage()
    collectgarbage()
end

local MODULES = { "resty.router.schema", "resty.router.router", "resty.router.context",
    "resty.router.cdefs" }

local function unload()
    for _, m in ipairs(MODULES) do
        package.loaded[m] = nil
    end
end

-- Objects outliving the modules that made them, then everything collected in one cycle.
function T.gc_after_unload()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.path ^= "/"'))
    local c = context.new(s)
    schema, router, context = nil, nil, nil
    unload()
    collectgarbage()
    -- The objects still work: their methods and the library stay reachable through them.
    assert(c:add_value("http.path", "/x"))
    eq(r:execute(c), true)
    eq(c:get_result(), U1)
    s, r, c = nil, nil, nil
    collectgarbage()
    collectgarbage()
    schema = require("resty.router.schema")
    router = require("resty.router.router")
    context = require("resty.router.context")
end

function T.schema_freed_before_router()
    local r, c
    do
        local s = http_schema()
        r = router.new(s)
        c = context.new(s)
    end
    -- Nothing refers to the Lua schema object any more except through r and c; drop their
    -- references too, so the schema handle itself is finalized first.
    r.schema, c.schema = nil, nil
    collectgarbage()
    collectgarbage()
    assert(r:add_matcher(1, U1, 'http.host == "a.com"'))
    assert(c:add_value("http.host", "a.com"))
    eq(r:execute(c), true)
    eq(c:get_result("http.host"), U1)
    c = nil
    collectgarbage()
    assert(r:add_matcher(2, U2, 'http.path ^= "/"'))
    r = nil
    collectgarbage()
end

function T.reload_modules()
    unload()
    local s2 = require("resty.router.schema")
    local r2 = require("resty.router.router")
    local c2 = require("resty.router.context")
    assert(s2 ~= schema, "a fresh module table")
    -- Old and new module instances work together: they share the C declarations and library.
    local s = s2.new()
    assert(s:add_field("http.path", "String"))
    local r = r2.new(s)
    assert(r:add_matcher(1, U1, 'http.path ^= "/"'))
    local old_ctx = context.new(s)
    assert(old_ctx:add_value("http.path", "/x"))
    eq(r:execute(old_ctx), true)
    local c = c2.new(s)
    assert(c:add_value("http.path", "/y"))
    eq(router.execute(r, c), true)
    schema, router, context = s2, r2, c2
end

-- Routes of the shapes the workload generator produces, through the Lua API.
function T.workload_shaped_routes()
    local s = http_schema()
    local r = router.new(s)
    local routes = {
        { 100, U1, 'http.host == "svc-17.example.com" && (http.path ^= "/api/v1/orders" || http.path ^= "/api/v1")' },
        { 90, U2, [[http.path ~ "^/rx-3/users/(?<id>\\d+)/orders/(?<oid>\\d+)$"]] },
        { 80, U3, 'any(lower(http.headers.x_version)) == "v2" && http.host == "ver-1.example.com" && http.path ^= "/"' },
        { 70, "a8f2c1e4-0000-4000-8000-000000000004", 'http.host =^ ".tenant-9.example.com" && http.path ^= "/"' },
        { 60, "a8f2c1e4-0000-4000-8000-000000000005", 'net.src.ip in 10.0.0.0/8 && http.path ^= "/internal-5/"' },
        { 50, "a8f2c1e4-0000-4000-8000-000000000006", '!(http.path ^= "/x") && http.host == "neg-6.example.com"' },
    }
    for _, rt in ipairs(routes) do
        assert(r:add_matcher(rt[1], rt[2], rt[3]))
    end
    local c = context.new(s)
    local function route(fields)
        c:reset()
        for k, v in pairs(fields) do
            assert(c:add_value(k, v))
        end
        if not r:execute(c) then
            return nil
        end
        return c:get_result("http.path")
    end
    eq(route({ ["http.host"] = "svc-17.example.com", ["http.path"] = "/api/v1/orders/9" }), U1)
    local _, p = route({ ["http.host"] = "svc-17.example.com", ["http.path"] = "/api/v1/x" })
    eq(p, "/api/v1")
    local u, m, caps = route({ ["http.path"] = "/rx-3/users/5/orders/6" })
    eq(u, U2)
    eq(m, "/rx-3/users/5/orders/6")
    same(caps, { [0] = "/rx-3/users/5/orders/6", [1] = "5", [2] = "6", id = "5", oid = "6" })
    eq(route({ ["http.host"] = "ver-1.example.com", ["http.path"] = "/a",
        ["http.headers.x_version"] = { "v1", "V2" } }), U3)
    eq(route({ ["http.host"] = "a.tenant-9.example.com", ["http.path"] = "/z" }),
        "a8f2c1e4-0000-4000-8000-000000000004")
    eq(route({ ["net.src.ip"] = "10.9.8.7", ["http.path"] = "/internal-5/q" }),
        "a8f2c1e4-0000-4000-8000-000000000005")
    eq(route({ ["http.host"] = "neg-6.example.com", ["http.path"] = "/y" }),
        "a8f2c1e4-0000-4000-8000-000000000006")
    eq(route({ ["http.host"] = "neg-6.example.com", ["http.path"] = "/x" }), nil)
end

-- r:sync: the route a path goes to.
local function path_route(r, c, path)
    c:reset()
    assert(c:add_value("http.path", path))
    if r:execute(c) then
        return (c:get_result())
    end
    return nil
end

function T.router_sync_counts_and_forms()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    local rep = assert(r:sync({
        { id = U1, priority = 1, expression = 'http.path ^= "/a"' },
        { id = U2, priority = 2, expression = 'http.path ^= "/b"' },
    }))
    same(rep, { added = 2, removed = 0, changed = 0, unchanged = 0, errors = rep.errors }, "report")
    eq(#rep.errors, 0, "no errors")
    eq(path_route(r, c, "/a/x"), U1)

    -- Parallel arrays, the garbage-free form; an explicit mode.
    local list = {
        ids = { U1, U2, U3 },
        priorities = { 1, 2, 3 },
        expressions = { 'http.path ^= "/a"', 'http.path ^= "/bb"', 'http.path ^= "/c"' },
    }
    rep = assert(r:sync(list, "all_or_nothing"))
    eq(rep.added, 1); eq(rep.changed, 1); eq(rep.unchanged, 1); eq(rep.removed, 0)
    eq(path_route(r, c, "/b"), nil)
    eq(path_route(r, c, "/bb"), U2)
    eq(path_route(r, c, "/c"), U3)
    -- The same list again: nothing to do.
    rep = assert(r:sync(list, "apply_valid"))
    eq(rep.unchanged, 3); eq(rep.added + rep.changed + rep.removed, 0)
    -- 64-bit cdata priorities; removal of what is not listed.
    rep = assert(r:sync({ { id = U3, priority = 10ULL, expression = 'http.path ^= "/c"' } }))
    eq(rep.changed, 1); eq(rep.removed, 2)
    eq(path_route(r, c, "/a"), nil)
    rep = assert(r:sync({}))
    eq(rep.removed, 1)
    eq(#r:get_fields(), 0)
    -- Fields follow the table.
    assert(r:sync({ { id = U1, priority = 1, expression = 'http.headers.x_a == "1"' } }))
    same(r:get_fields(), { "http.headers.x_a" })
end

function T.router_sync_errors()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    assert(r:sync({
        { id = U1, priority = 1, expression = 'http.path ^= "/a"' },
        { id = U2, priority = 2, expression = 'http.path ^= "/b"' },
    }))
    local U5 = "a8f2c1e4-0000-4000-8000-000000000005"
    local bad = {
        { id = U1, priority = 1, expression = 'http.path ^= "/a2"' }, -- 1: valid, changed
        { id = "nope", priority = 1, expression = 'http.path ^= "/x"' }, -- 2: bad id
        { id = U2, priority = 2, expression = 'http.path = "/b2"' }, -- 3: bad expression, known id
        { id = U1, priority = 1, expression = 'http.path ^= "/y"' }, -- 4: repeated id
        { id = U3, priority = -1, expression = 'http.path ^= "/z"' }, -- 5: bad priority
        { id = 42, priority = 1, expression = 'http.path ^= "/z"' }, -- 6: id not a string
        { id = U5, priority = 1, expression = false }, -- 7: expression not a string
        "not a table", -- 8
        { id = "a8f2c1e4-0000-4000-8000-000000000006", priority = 1,
            expression = 'http.path == "\255"' }, -- 9: invalid UTF-8
        { id = "a8f2c1e4-0000-4000-8000-000000000007", priority = 7,
            expression = 'http.path ^= "/g"' }, -- 10: valid, new
    }
    local rep, err, errs = r:sync(bad)
    eq(rep, nil)
    fails("8 invalid route(s), nothing changed; route #2: invalid route id \"nope\"", rep, err)
    eq(#errs, 8)
    local want = {
        { 2, "nope", "invalid route id" },
        { 3, U2, "line 1, column 11" },
        { 4, U1, "duplicate id: route #1 has it already" },
        { 5, U3, "priority must be" },
        { 6, 42, "id must be a string, got number" },
        { 7, U5, "expression must be a string, got boolean" },
        { 8, nil, "route must be a table, got string" },
        { 9, "a8f2c1e4-0000-4000-8000-000000000006", "not valid UTF-8" },
    }
    for k, w in ipairs(want) do
        eq(errs[k].index, w[1], "index of error " .. k)
        eq(errs[k].id, w[2], "id of error " .. k)
        fails(w[3], nil, errs[k].message)
    end
    -- Nothing changed.
    eq(path_route(r, c, "/a"), U1)
    eq(path_route(r, c, "/b"), U2)
    eq(path_route(r, c, "/g"), nil)

    -- Apply-valid: the valid ones go in; known ids with a bad new version keep the old one.
    rep = assert(r:sync(bad, "apply_valid"))
    eq(rep.added, 1); eq(rep.changed, 1); eq(rep.removed, 0); eq(rep.unchanged, 0)
    eq(#rep.errors, 8)
    eq(rep.errors[4].message, "priority must be an integer between 0 and 2^53, got -1")
    eq(path_route(r, c, "/a2"), U1)
    eq(path_route(r, c, "/b"), U2)
    eq(path_route(r, c, "/g"), "a8f2c1e4-0000-4000-8000-000000000007")

    -- Argument errors.
    fails("unknown sync mode", r:sync({}, "sometimes"))
    fails("routes must be a table", r:sync("x"))
    fails("differ in length", r:sync({ ids = { U1 }, priorities = {}, expressions = {} }))
    fails("must be tables", r:sync({ ids = { U1 }, priorities = 1, expressions = {} }))
    eq(path_route(r, c, "/a2"), U1)
end

function T.router_sync_many_errors()
    -- More messages than the first message buffer holds (64 KiB): every message still arrives
    -- whole, and the counts are those of the one real sync.
    local s = http_schema()
    local r = router.new(s)
    assert(r:sync({ { id = U1, priority = 1, expression = 'http.path ^= "/keep"' } }))
    local n = 2000
    local ids, prios, exprs = {}, {}, {}
    for i = 1, n do
        ids[i] = string.format("a8f2c1e4-0000-4000-8000-%012d", i + 100)
        prios[i] = i
        -- Invalid (`=` is not an operator), with a long line quoted in the message.
        exprs[i] = 'http.path = "/' .. string.rep("x", 60) .. i .. '"'
    end
    ids[n + 1], prios[n + 1], exprs[n + 1] = U2, 1, 'http.path ^= "/new"'
    local list = { ids = ids, priorities = prios, expressions = exprs }
    local rep, err, errs = r:sync(list)
    eq(rep, nil)
    fails(n .. " invalid route(s)", rep, err)
    eq(#errs, n)
    for k = 1, n do
        eq(errs[k].index, k)
        assert(errs[k].message:find("line 1, column 11", 1, true), errs[k].message)
        assert(errs[k].message:find(tostring(k) .. '"', 1, true), errs[k].message)
    end
    rep = assert(r:sync(list, "apply_valid"))
    eq(rep.added, 1); eq(rep.removed, 1); eq(rep.unchanged, 0)
    eq(#rep.errors, n)
    assert(rep.errors[n].message:find(tostring(n) .. '"', 1, true))
end

local json = require("resty.router.json")

function T.json_decoder()
    local v = assert(json.decode(' {"a": [1, -2, 3.5, 1e3, true, false, null, {}, []], "b": "x"} '))
    eq(v.a[1], 1); eq(v.a[2], -2); eq(v.a[3], 3.5); eq(v.a[4], 1000)
    eq(v.a[5], true); eq(v.a[6], false); eq(v.a[7], nil)
    eq(next(v.a[8]), nil); eq(#v.a[9], 0); eq(v.b, "x")
    -- Every escape, surrogate pairs, raw UTF-8.
    eq(json.decode([["q\"b\\s\/\b\f\n\r\t\u0001\u00e9\u20ac\ud83d\ude00é"]]),
        "q\"b\\s/\b\f\n\r\t\1é€😀é")
    eq(json.decode('""'), "")
    -- Integers a double cannot hold exactly come as 64-bit cdata.
    eq(json.decode("9007199254740991"), 9007199254740991)
    local big = json.decode("18446744073709551615")
    eq(ffi.istype("uint64_t", big), true)
    eq(big, 18446744073709551615ULL)
    local neg = json.decode("-9223372036854775808")
    eq(ffi.istype("int64_t", neg), true)
    eq(neg, -9223372036854775807LL - 1)
    eq(json.decode("-9007199254740993"), -9007199254740993LL)
    -- Malformed text: nil and where, never a raise.
    for _, bad in ipairs({ "", " ", "{", "[1,]", "[1 2]", '{"a" 1}', '{a:1}', '"abc', '"\1"',
        '"\\x"', '"\\u12"', '"\\ud800"', '"\\udc00x"', "01", "-", "1.", "tru", "nul", "[1]x",
        "18446744073709551616", "-9223372036854775809", string.rep("[", 65) .. string.rep("]", 65),
    }) do
        local got, err = json.decode(bad)
        eq(got, nil, "decode(" .. bad:sub(1, 20) .. ")")
        fails("invalid JSON", got, err)
    end
    fails("must be a string", json.decode(nil))
    local deep = string.rep("[", 64) .. string.rep("]", 64)
    assert(json.decode(deep))
end

local NEGATED = 'http.host == "api.example"\n  && !(http.path ^= "/v1")'

function T.explain_report()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(10, U1, 'http.host == "api.example" && http.path ^= "/v2"'))
    assert(r:add_matcher(20, U2, NEGATED))
    assert(r:add_matcher(1, U3, 'http.path ^= "/"'))
    local U4 = "a8f2c1e4-0000-4000-8000-000000000004"
    assert(r:add_matcher(1152921504606846976ULL, U4, 'http.host == "other.example"'))
    local c = context.new(s)
    assert(c:add_value("http.host", "api.example"))
    assert(c:add_value("http.path", "/v1/users"))
    eq(r:execute(c), true)

    local why = assert(r:explain(c))
    eq(why.winner, U3)
    eq(why.routes, 4)
    eq(why.version, nil)
    eq(#why.ruled_out, 0, "ruled-out routes only when asked")
    eq(#why.candidates, 3)
    local c1, c2, c3 = why.candidates[1], why.candidates[2], why.candidates[3]
    eq(c1.id, U2); eq(c1.priority, 20); eq(c1.matched, false); eq(c1.expression, NEGATED)
    eq(#c1.predicates, 1)
    local p = c1.predicates[1]
    same(p, {
        index = 1, text = 'http.path ^= "/v1"', text_truncated = false, holds = true,
        negated = true, line = 2,
        column = 8, span = p.span, source_line = '  && !(http.path ^= "/v1")',
        caret = "       " .. string.rep("^", 18),
    }, "predicate")
    eq(NEGATED:sub(p.span[1], p.span[2]), p.text, "span is 1-based and inclusive")
    eq(c2.id, U1); eq(c2.matched, false)
    eq(c2.predicates[1].text, 'http.path ^= "/v2"')
    eq(c2.predicates[1].holds, false); eq(c2.predicates[1].column, 31)
    eq(c3.id, U3); eq(c3.matched, true); eq(c3.predicates[1].holds, true)

    local full = assert(r:explain(c, { ruled_out = true }))
    eq(#full.candidates, 3)
    eq(#full.ruled_out, 1)
    local out = full.ruled_out[1]
    eq(out.id, U4)
    eq(out.key, 'http.host == "other.example"')
    -- 2^60 is beyond what a double holds for every integer: exact, as cdata.
    eq(ffi.istype("uint64_t", out.priority), true)
    eq(out.priority, 1152921504606846976ULL)
    eq(#assert(r:explain(c, { ruled_out = false })).ruled_out, 0)

    -- The result is the one execute left.
    eq(c:get_result(), U3)
    -- Nothing matches: no winner.
    c:reset()
    assert(c:add_value("http.host", "nowhere"))
    why = assert(r:explain(c))
    eq(why.winner, nil)
    eq(c:get_result(), nil)
end

function T.explain_large_reports()
    -- Larger than the first report buffer (16 KiB): sized and fetched again, whole.
    local s = http_schema()
    local r = router.new(s)
    local n = 600
    for i = 1, n do
        assert(r:add_matcher(i, string.format("a8f2c1e4-0000-4000-8000-%012d", i),
            'http.host == "h' .. i .. '.example" && http.path ^= "/' .. string.rep("p", 40) .. '"'))
    end
    local c = context.new(s)
    assert(c:add_value("http.host", "h7.example"))
    assert(c:add_value("http.path", "/x"))
    for _ = 1, 2 do
        local why = assert(r:explain(c, { ruled_out = true }))
        eq(why.routes, n)
        eq(#why.candidates, 1)
        eq(#why.ruled_out, n - 1)
        eq(why.ruled_out[1].id, string.format("a8f2c1e4-0000-4000-8000-%012d", n))
        eq(why.ruled_out[1].key, 'http.host == "h' .. n .. '.example"')
    end
end

function T.matches_report()
    local s = http_schema()
    local r = router.new(s)
    local capture = [[http.path ~ r#"^/users/(?<id>\d+)$"# && net.dst.port == 8080]]
    assert(r:add_matcher(30, U1, capture))
    assert(r:add_matcher(20, U2, 'net.src.ip == 10.1.2.3 && http.host == "h"'))
    assert(r:add_matcher(10, U3, 'http.host == "nope"'))
    local c = context.new(s)
    assert(c:add_value("http.host", "h"))
    assert(c:add_value("http.path", "/users/42"))
    assert(c:add_value("net.dst.port", 8080))
    assert(c:add_value("net.src.ip", "10.1.2.3"))
    local all = assert(r:matches(c))
    eq(#all, 2)
    eq(all[1].id, U1); eq(all[1].priority, 30); eq(all[1].expression, capture)
    same(all[1].matched_values, { ["http.path"] = "/users/42", ["net.dst.port"] = 8080 }, "values")
    same(all[1].captures, { [0] = "/users/42", [1] = "42", id = "42" }, "captures")
    eq(all[2].id, U2)
    same(all[2].matched_values, { ["net.src.ip"] = "10.1.2.3", ["http.host"] = "h" }, "values")
    eq(all[2].captures, nil, "no captures: nil, as get_result")
    -- The first match is what execute chooses, with the values get_result gives.
    eq(r:execute(c), true)
    local uuid, path, caps = c:get_result("http.path")
    eq(uuid, all[1].id)
    eq(path, all[1].matched_values["http.path"])
    same(caps, all[1].captures, "captures")
    -- No match: an empty array.
    c:reset()
    local none = assert(r:matches(c))
    eq(#none, 0)
end

function T.explain_and_matches_errors()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(1, U1, 'http.path ^= "/"'))
    assert(not pcall(r.explain, r, nil), "explain(nil) raises")
    assert(not pcall(r.explain, r, {}), "explain({}) raises")
    assert(not pcall(r.matches, r, "c"), "matches('c') raises")
    local c = context.new(s)
    fails("options must be a table", r:explain(c, "ruled_out"))
    -- A context of another schema: nil and why, the context untouched.
    local other = context.new(http_schema())
    assert(other:add_value("http.path", "/x"))
    fails("another schema", r:explain(other))
    fails("another schema", r:matches(other))
    eq(other:get_result(), nil)
end

function T.route_expressions()
    local s = http_schema()
    local r = router.new(s)
    assert(r:add_matcher(2, U1, NEGATED))
    assert(r:add_matcher(1, U2, 'http.path ^= "/"'))
    eq(r:get_expression(U1), NEGATED)
    eq(r:get_expression("{" .. U2:upper() .. "}"), 'http.path ^= "/"')
    eq(r:get_expression(U3), nil)
    eq(select("#", r:get_expression(U3)), 1, "just nil when there is no such route")
    fails("not a UUID", r:get_expression("nope"))
    fails("uuid must be a string", r:get_expression(42))
    -- The matched route's text, from the result's id.
    local c = context.new(s)
    assert(c:add_value("http.path", "/x"))
    eq(r:execute(c), true)
    eq(r:get_expression((c:get_result())), 'http.path ^= "/"')
    -- After a change: the new text, and nil once removed.
    assert(r:sync({ { id = U2, priority = 1, expression = 'http.path ^= "/y"' } }))
    eq(r:get_expression(U2), 'http.path ^= "/y"')
    eq(r:get_expression(U1), nil)
end

---------------------------------------------------------------------------------------------
-- Background syncs: sync_start, sync_ready, sync_state, sync_apply.

-- A short sleep between polls (not a busy loop under valgrind).
local sleep_ms
do
    if not pcall(function() return ffi.C.poll end) then
        pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")
    end
    sleep_ms = function(ms)
        ffi.C.poll(nil, 0, ms)
    end
end

-- Kong's API alone: a table loaded with add_matcher reaches its settled form (the flat index)
-- on the builder thread, handed over by the first execute; the changes made while it is built
-- are replayed on it; a sync made meanwhile takes the built table first and ends this.
function T.kong_api_settles_on_the_builder()
    local lib = require("resty.router.cdefs").lib
    local s = http_schema()
    local r = router.new(s)
    local function id(i)
        return string.format("00000000-0000-4000-8000-%012d", i)
    end
    for i = 1, 2000 do
        assert(r:add_matcher(i, id(i), 'http.path == "/p/' .. i .. '"'))
    end
    eq(lib.atc_router_settle_due(r.ptr), 1, "due after loading")
    local c = context.new(s)
    local function route_of(path)
        c:reset()
        assert(c:add_value("http.path", path))
        if r:execute(c) then
            return (c:get_result())
        end
    end
    eq(route_of("/p/700"), id(700))
    eq(r.auto.inflight, true, "handed over by the first execute")
    -- Changed while it is built: replayed on the built table.
    eq(r:remove_matcher(id(700)), true)
    assert(r:add_matcher(5000, id(2001), 'http.path == "/p/2001"'))
    assert(r:add_matcher(1, id(700), 'http.path == "/p/700/b"'))
    eq(route_of("/p/700"), nil)
    for _ = 1, 60000 do
        if not r.auto.inflight then
            break
        end
        sleep_ms(1)
        route_of("/p/1")
    end
    eq(r.auto.inflight, false, "the built table is in")
    eq(lib.atc_router_settle_due(r.ptr), 0, "settled")
    eq(route_of("/p/700"), nil)
    eq(route_of("/p/700/b"), id(700))
    eq(route_of("/p/2001"), id(2001))
    eq(route_of("/p/1999"), id(1999))
    local n = ffi.new("size_t[1]")
    lib.atc_router_len(r.ptr, n)
    eq(tonumber(n[0]), 2001)
    -- Handed over again, then more changes than a request replays: requests leave the built
    -- table waiting, the next change swaps it in.
    for i = 1, 600 do
        assert(r:add_matcher(1, id(5000 + i), 'http.path == "/s/' .. i .. '"'))
    end
    route_of("/p/1")
    eq(r.auto.inflight, true, "handed over with 600 changes")
    for i = 1, 100 do
        eq(r:remove_matcher(id(5000 + i)), true)
    end
    for _ = 1, 60000 do
        if r:sync_ready() then
            break
        end
        sleep_ms(1)
    end
    eq(route_of("/s/200"), id(5200))
    eq(r.auto.inflight, true, "a request does not replay 100 changes")
    assert(r:add_matcher(1, id(6001), 'http.path == "/t"'))
    eq(r.auto.inflight, false, "a change does")
    eq(route_of("/s/50"), nil)
    eq(route_of("/s/200"), id(5200))
    eq(route_of("/t"), id(6001))
    -- Enough changes to be due again, handed over, then a sync: it waits for the built table,
    -- takes it, and its own list is what stays.
    for i = 1, 600 do
        assert(r:add_matcher(1, id(3000 + i), 'http.path == "/q/' .. i .. '"'))
    end
    route_of("/p/1")
    eq(r.auto.inflight, true, "handed over again")
    assert(r:sync({ { id = id(1), priority = 1, expression = 'http.path == "/only"' } }))
    eq(r.auto.inflight, false)
    eq(r.auto.off, true)
    sleep_ms(20)
    eq(route_of("/only"), id(1))
    eq(route_of("/p/1999"), nil)
    eq(route_of("/q/5"), nil)
end

-- Polls until an outcome is ready (at most 60 s), then applies it.
local function applied(r)
    for _ = 1, 60000 do
        if r:sync_ready() then
            return r:sync_apply()
        end
        sleep_ms(1)
    end
    error("no outcome in 60 s")
end

function T.background_sync_steps()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    eq(r:sync_state(), "idle", "before any start")
    eq(r:sync_ready(), false)
    eq(r:sync_apply(), false, "nothing to apply")
    assert(r:add_matcher(1, U3, 'http.path ^= "/old"'))

    eq(r:sync_start(7, {
        { id = U1, priority = 1, expression = 'http.path ^= "/a"' },
        { id = U2, priority = 2, expression = 'http.path ^= "/b"' },
    }), true)
    local state, v = r:sync_state()
    eq(state == "building" or state == "ready", true, "state " .. tostring(state))
    eq(v, 7)
    -- The current table answers until the outcome is applied.
    eq(path_route(r, c, "/old"), U3)
    local version, rep = applied(r)
    eq(version, 7)
    -- A fresh build (the router was changed directly, so the builder has no copy of it): the
    -- report counts from an empty table.
    same({ rep.added, rep.changed, rep.unchanged, #rep.errors }, { 2, 0, 0, 0 })
    eq(path_route(r, c, "/old"), nil)
    eq(path_route(r, c, "/b/1"), U2)
    eq(r:sync_state(), "idle")
    eq(r:sync_apply(), false, "an outcome is applied once")
    same(r:get_fields(), { "http.path" })

    -- Parallel arrays, a 64-bit version, apply-valid with entries the C side cannot be given.
    local big = 2ULL ^ 60
    assert(r:sync_start(big, {
        ids = { U1, 42, U3 }, priorities = { 1, 1, -1 },
        expressions = { 'http.path ^= "/x"', 'http.path ^= "/y"', 'http.path ^= "/z"' },
    }, "apply_valid"))
    version, rep = applied(r)
    eq(type(version), "cdata")
    eq(version == big, true, "the version comes back exact")
    eq(#rep.errors, 2)
    same(rep.errors[1], { index = 2, id = 42, message = "id must be a string, got number" })
    eq(rep.errors[2].index, 3)
    eq(rep.errors[2].id, U3)
    eq(rep.errors[2].message:find("priority must be", 1, true) ~= nil, true, rep.errors[2].message)
    eq(path_route(r, c, "/x"), U1)

    -- Refused (all or nothing): the current table stays; the errors are r:sync's.
    assert(r:sync_start(9, {
        { id = U1, priority = 1, expression = 'http.path ^= "/q"' },
        { id = U2, priority = 1, expression = 'http.path ^=' },
    }))
    local ok, err, errs, rv = applied(r)
    eq(ok, nil)
    fails("1 invalid route(s), nothing changed; route #2 (" .. U2 .. ")", ok, err)
    eq(rv, 9)
    eq(#errs, 1)
    eq(errs[1].id, U2)
    eq(path_route(r, c, "/x"), U1)

    -- A repeated id is refused by the core's sync, as r:sync refuses it.
    assert(r:sync_start(10, {
        { id = U1, priority = 1, expression = 'http.path ^= "/q"' },
        { id = U1, priority = 2, expression = 'http.path ^= "/r"' },
    }))
    ok, err, errs, rv = applied(r)
    eq(ok, nil)
    fails("1 invalid route(s), nothing changed; route #2 (" .. U1 .. ")", ok, err)
    eq(rv, 10)
    eq(#errs, 1)
    eq(errs[1].id, U1)
    eq(path_route(r, c, "/x"), U1)

    -- Bad calls start nothing.
    fails("version must be", r:sync_start(-1, {}))
    fails("version must be", r:sync_start("1", {}))
    fails("unknown sync mode", r:sync_start(1, {}, "some"))
    fails("routes must be a table", r:sync_start(1, 5))
    fails("differ in length", r:sync_start(1, { ids = { U1 }, priorities = {}, expressions = {} }))
    fails("opts.chunk must be a positive integer", r:sync_start(1, {}, nil, { chunk = 0 }))
    fails("opts.yield must be a function", r:sync_start(1, {}, nil, { yield = 1 }))
    eq(r:sync_state(), "idle")
end

-- A table's strings are lent to the builder thread, not copied: the router keeps them until
-- the version's outcome is taken, whatever the caller does with its own tables meanwhile.
function T.background_sync_lends_a_tables_strings()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    local function uuid(i) return string.format("a8f2c1e4-0000-4000-8000-%012d", i) end
    -- A large first list keeps the builder busy while the second one waits, unread.
    local n = 30000
    local ids, prios, exprs = {}, {}, {}
    for i = 1, n do
        ids[i], prios[i], exprs[i] = uuid(i), 1, 'http.path ^= "/big/' .. i .. '"'
    end
    assert(r:sync_start(1, { ids = ids, priorities = prios, expressions = exprs }))
    ids, prios, exprs = nil, nil, nil -- luacheck: ignore
    local m = 500
    local up = { ids = {}, priorities = {}, expressions = {} }
    for i = 1, m do
        up.ids[i], up.priorities[i] = uuid(n + i), 2
        up.expressions[i] = 'http.path ^= "/lent/' .. i .. '/' .. string.rep("x", i % 50) .. '"'
    end
    assert(r:update_start(2, { upsert = up }))
    eq(#r.bg.pending[2].lent, 2 * m, "the strings lent are kept")
    -- The caller's tables change and their strings go; new strings take their memory.
    for i = 1, m do
        up.ids[i], up.expressions[i] = "x" .. i, "y" .. i
    end
    up = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    local junk = {}
    for i = 1, 4 * m do
        junk[i] = 'http.path ^= "/junk/' .. i .. '/' .. string.rep("z", i % 50) .. '"'
    end
    eq((applied(r)), 1)
    local v, rep = applied(r)
    eq(v, 2)
    same({ rep.added, #rep.errors }, { m, 0 })
    eq(#r.bg.pending, 0, "released once applied")
    eq(path_route(r, c, "/lent/7/xxxxxxx"), uuid(n + 7))
    eq(path_route(r, c, "/big/9"), uuid(9))
    eq(#junk, 4 * m)
end

function T.background_sync_text()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    -- TSV, lent to the builder thread (no copy): the string stays anchored until applied.
    local tsv = table.concat({
        "10\t" .. U1 .. "\thttp.path ^= \"/a\"",
        "# a comment",
        "20\t" .. U2 .. "\thttp.path ^= \"/a/b\"",
    }, "\n") .. "\n"
    assert(r:sync_start(1, tsv))
    eq(#r.bg.pending, 1, "the text is anchored")
    tsv = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    local v, rep = applied(r)
    eq(v, 1)
    eq(rep.added, 2)
    eq(#r.bg.pending, 0, "released once applied")
    eq(path_route(r, c, "/a/b/c"), U2)

    -- JSON, copied.
    local json_text = '{"routes": [{"id": "' .. U3 .. '", "priority": 5, "expression": "http.path ^= \\"/j\\""}]}'
    assert(r:sync_start(2, json_text, "all_or_nothing", { copy = true }))
    eq(#r.bg.pending, 1)
    eq(r.bg.pending[1].text, true, "a copied text is not kept")
    v, rep = applied(r)
    eq(v, 2)
    same({ rep.added, rep.removed }, { 1, 2 })
    eq(path_route(r, c, "/j"), U3)

    -- A bad route of a text: refused, `index` is its line, no id.
    local ok, err, errs, rv = applied(r, assert(r:sync_start(3,
        "1\t" .. U1 .. "\thttp.path ^= \"/a\"\n2\tnot-a-uuid\thttp.path ^= \"/b\"\n")))
    eq(ok, nil)
    fails("route at line 2", ok, err)
    eq(rv, 3)
    eq(errs[1].index, 2)
    eq(errs[1].id, nil)
    -- A text that is no route list at all: refused with why, no route listed.
    ok, err, errs, rv = applied(r, assert(r:sync_start(4, "[{]")))
    eq(ok, nil)
    eq(type(err), "string")
    eq(#errs, 0)
    eq(rv, 4)
    eq(path_route(r, c, "/j"), U3, "the current table stays")
end

-- One outcome per version, in the order started; a whole list supersedes the versions started
-- before it whose build had not begun (their outcome says "superseded"): sync_apply never
-- returns a version older than one it returned.
function T.background_sync_supersedes()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    local n = 2000
    local lists = {}
    for k = 1, 5 do
        local ids, prios, exprs = {}, {}, {}
        for i = 1, n do
            ids[i] = string.format("a8f2c1e4-0000-4000-8000-%012d", i)
            prios[i] = i
            exprs[i] = string.format('http.path ^= "/v%d/%d"', k, i)
        end
        lists[k] = { ids = ids, priorities = prios, expressions = exprs }
    end
    for k = 1, 5 do
        assert(r:sync_start(k, lists[k]))
    end
    local last, built = 0, {}
    while true do
        local state = r:sync_state()
        if state == "idle" then
            break
        end
        local v, err, _, sv, superseded = applied(r)
        if v then
            built[#built + 1] = v
        else
            eq(superseded, "superseded", tostring(err))
            v = sv
        end
        eq(v, last + 1, "version " .. tostring(v) .. " after " .. last)
        last = v
    end
    eq(last, 5, "every version has its outcome, the newest last")
    eq(built[#built], 5, "the newest is applied")
    eq(#built <= 2, true, "only the one being built, if any, and the newest")
    eq(path_route(r, c, "/v5/7"), lists[5].ids[7])
    eq(path_route(r, c, "/v4/7"), nil)
    eq(#r.bg.pending, 0)
    -- A router freed while it builds a lent text: the builder is stopped first.
    local r2 = router.new(s)
    assert(r2:sync_start(1, string.rep("1\t" .. U1 .. "\thttp.path ^= \"/a\"\n", 1)
        .. string.rep("# padding\n", 20000)))
    r2 = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
end

-- A list of routes goes over in chunks, with a yield between two: the caller decides the size
-- and may stop the start (nothing is started then).
function T.background_sync_chunks_and_yields()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    local routes = {}
    for i = 1, 10 do
        routes[i] = { id = string.format("a8f2c1e4-0000-4000-8000-%012d", i), priority = i,
            expression = string.format('http.path ^= "/c/%d"', i) }
    end
    local yields = 0
    local co = coroutine.wrap(function()
        return r:sync_start(1, routes, nil, { chunk = 3, yield = function()
            yields = yields + 1
            coroutine.yield("between chunks")
        end })
    end)
    for _ = 1, 3 do
        eq(co(), "between chunks")
        eq(r:sync_state(), "idle", "nothing started before the last chunk")
    end
    eq(co(), true)
    eq(yields, 3, "10 routes in chunks of 3: 4 chunks, 3 yields")
    local v, rep = applied(r)
    eq(v, 1)
    eq(rep.added, 10)
    eq(path_route(r, c, "/c/10"), routes[10].id)

    -- A yield that answers stops the start: nothing is started, the list is freed.
    local ok, err = r:sync_start(2, routes, nil, { chunk = 4, yield = function() return "superseded" end })
    eq(ok, nil)
    eq(err, "superseded")
    eq(r:sync_state(), "idle")
    eq(#r.bg.pending, 0)
    -- Without a yield function, every chunk in one call.
    assert(r:sync_start(3, routes, nil, { chunk = 1 }))
    eq(applied(r), 3)
end

-- r:stats(): executes as routed or not found, every update as applied or refused (the
-- binding's own refusals too), background applies with the builder's time; the counts stay
-- with the router across swaps; r:count_bad_request().
function T.router_stats()
    local s = http_schema()
    local r = router.new(s)
    local c = context.new(s)
    same(r:stats(), {
        routed = 0, not_found = 0, bad_requests = 0, updates_applied = 0, updates_refused = 0,
        last_update_hold_us = 0, last_build_us = 0, routes = 0, broken = false,
    }, "a new router")
    assert(r:add_matcher(1, U1, 'http.path ^= "/a"'))
    fails("line 1", r:add_matcher(1, U2, 'http.path ^='))
    fails("uuid must be a string", r:add_matcher(1, 42, 'http.path ^= "/b"'))
    fails("invalid route id", r:add_matcher(1, "nope", 'http.path ^= "/b"'))
    eq(r:remove_matcher(U3), false)
    eq(path_route(r, c, "/a/1"), U1)
    eq(path_route(r, c, "/a/2"), U1)
    eq(path_route(r, c, "/b"), nil)
    r:count_bad_request()
    local st = r:stats()
    -- The binding's own refusal (a non-string id) never reached the library: not counted.
    same({ st.routed, st.not_found, st.bad_requests, st.updates_applied, st.updates_refused },
        { 2, 1, 1, 1, 3 })
    eq(st.routes, 1)
    eq(st.broken, false)
    eq(st.last_update_hold_us >= 0 and st.last_build_us >= st.last_update_hold_us, true)

    -- Syncs: applied; refused (a bad entry, all or nothing).
    assert(r:sync({ { id = U1, priority = 1, expression = 'http.path ^= "/a"' },
        { id = U2, priority = 2, expression = 'http.path ^= "/b"' } }))
    local ok = r:sync({ { id = U1, priority = "x", expression = 'http.path ^= "/a"' } })
    eq(ok, nil)
    st = r:stats()
    same({ st.updates_applied, st.updates_refused, st.routes }, { 2, 4, 2 })

    -- A background build of many routes: applied, with the builder's time, counts kept.
    local ids, prios, exprs = {}, {}, {}
    for i = 1, 5000 do
        ids[i] = string.format("a8f2c1e4-0000-4000-8000-%012d", i)
        prios[i] = i
        exprs[i] = string.format('http.path ^= "/r/%d/"', i)
    end
    assert(r:sync_start(1, { ids = ids, priorities = prios, expressions = exprs }))
    eq(applied(r), 1)
    eq(path_route(r, c, "/r/7/x"), ids[7])
    st = r:stats()
    same({ st.routed, st.not_found, st.updates_applied, st.updates_refused, st.routes },
        { 3, 1, 3, 4, 5000 })
    eq(st.last_build_us > 0, true, "the builder's time")
    eq(st.last_update_hold_us < st.last_build_us, true,
        "the swap (" .. st.last_update_hold_us .. " us) held less than the build ("
        .. st.last_build_us .. " us)")
    -- Refused in the background: counted.
    exprs[9] = "http.path ~"
    assert(r:sync_start(2, { ids = ids, priorities = prios, expressions = exprs }))
    eq(applied(r), nil)
    st = r:stats()
    same({ st.updates_applied, st.updates_refused, st.routes }, { 3, 5, 5000 })
end

-- Table images: a router's builder publishes each table it builds, sealed in memory or as a
-- file; a router an image is attached to answers from it as the builder's router does; a
-- corrupt or foreign image is refused; a file is read when opened, so nothing done to it later
-- reaches a router routing from it.

local image = require("resty.router.image")

local function temp_dir()
    local name = os.tmpname()
    os.remove(name)
    return name .. ".images"
end

-- A router of `s` routing from `img` (it had none before).
local function routing_from(s, img)
    local reader = router.new(s)
    local old, err = reader:attach_image(img)
    eq(old, false, err or "no image before")
    eq(img.ptr, nil, "the router took the image")
    return reader
end

function T.image_published_opened_and_matched()
    local dir = temp_dir()
    local s = http_schema()
    local r = router.new(s)
    assert(r:publish_images(dir))
    eq(r:published(), nil, "nothing applied yet")
    assert(r:sync_start(3, {
        { id = U1, priority = 1, expression = 'http.path ^= "/a"' },
        { id = U2, priority = 2, expression = [[http.path ~ r#"^/b/(?<n>\d+)$"#]] },
    }))
    eq(applied(r), 3)
    local path, version = r:published()
    eq(type(path), "string", "the published path")
    eq(version, 3)
    fails("before the first background sync", r:publish_images(dir))

    -- Another schema object with the same fields, as another worker has.
    local s2 = http_schema()
    local img = assert(image.open(s2, path))
    fails("image expected", pcall(router.new(s2).attach_image, router.new(s2), {}))
    fails("schema", router.new(s):attach_image(img))
    eq(img.ptr ~= nil, true, "a refused attach leaves the image with the caller")
    local reader = routing_from(s2, img)
    eq(reader:len(), 2)
    same(reader:get_fields(), { "http.path" })
    local c = context.new(s2)
    assert(c:add_value("http.path", "/b/42"))
    eq(reader:execute(c), true)
    local uuid, _, captures = c:get_result()
    eq(uuid, U2)
    eq(captures.n, "42")
    c:reset()
    assert(c:add_value("http.path", "/c"))
    eq(reader:execute(c), false)

    -- Two-phase masks: the router's (both schemas number the same fields alike).
    local lo, hi = reader:key_fields()
    eq(lo ~= 0 or hi ~= 0, true, "the path is a key field")
    same({ reader:key_fields() }, { r:key_fields() })
    local c1 = context.new(s)
    for _, p in ipairs({ "/b/42", "/a/x", "/c" }) do
        c:reset()
        c1:reset()
        assert(c:add_value("http.path", p))
        assert(c1:add_value("http.path", p))
        same({ reader:needed_fields(c) }, { r:needed_fields(c1) }, p)
    end

    -- Counted in the reader's stats (what a gateway sharing the table reads).
    local before = reader:stats()
    c:reset()
    assert(c:add_value("http.path", "/a/1"))
    eq(reader:execute(c), true)
    c:reset()
    assert(c:add_value("http.path", "/zz"))
    eq(reader:execute(c), false)
    local after = reader:stats()
    same({ after.routed - before.routed, after.not_found - before.not_found }, { 1, 1 })
    -- Every match, from the image.
    c:reset()
    assert(c:add_value("http.path", "/b/9"))
    local all = assert(reader:matches(c))
    eq(#all, 1)
    eq(all[1].id, U2)
    eq(all[1].captures.n, "9")
    -- Route texts by id, from the image.
    eq(reader:get_expression(U2), [[http.path ~ r#"^/b/(?<n>\d+)$"#]])
    eq(reader:get_expression(U3), nil, "no such route")

    -- Opened on a thread, finished between two requests, swapped in for the first.
    local job = assert(image.open_start(s2, path))
    for _ = 1, 60000 do
        if job:ready() then
            break
        end
        sleep_ms(1)
    end
    local img2 = assert(job:finish())
    fails("already finished", job:finish())
    local old = assert(reader:attach_image(img2))
    eq(reader:len(), 2)

    -- Read when opened: removing the file changes nothing for the routers reading it.
    eq(image.remove_if_unused(path), true)
    eq(image.remove_if_unused(path), true, "a missing file counts as removed")
    c:reset()
    assert(c:add_value("http.path", "/b/7"))
    eq(reader:execute(c), true)
    eq(old:share_path(), nil, "a file's image is named by its file")
    old:free()
    -- Detached: the reader routes from its own table (empty) again, and hands the image back.
    local back = assert(reader:attach_image(nil))
    eq(reader:len(), 0)
    eq(reader:execute(c), false)
    back:retire()
    fails("table image", image.open(s2, path))
    os.remove(dir)
end

function T.image_sealed_in_memory()
    local s = http_schema()
    local r = router.new(s)
    assert(r:publish_images(nil, true))
    assert(r:sync_start(1, { { id = U1, priority = 1, expression = 'http.path ^= "/a"' } }))
    eq(applied(r), 1)
    local path = assert(r:published())
    eq(path:match("^/proc/%d+/fd/%d+#atc%-%d+%-1%-%d+$") ~= nil, true, path)
    local img = assert(image.open(s, path))
    local held = assert(img:share_path())
    eq(held:match("^/proc/%d+/fd/%d+#") ~= nil and held ~= path, true, held)
    eq(held:match("#(.*)"), path:match("#(.*)"), "the same image")
    local reader = routing_from(s, img)
    local c = context.new(s)
    assert(c:add_value("http.path", "/a/1"))
    eq(reader:execute(c), true)
    -- Explained from the image, as the router explains.
    local why = assert(reader:explain(c))
    eq(why.winner, U1)
    eq(why.routes, 1)
    eq(#why.candidates, 1)
    eq(why.candidates[1].expression, 'http.path ^= "/a"')
    eq(why.candidates[1].matched, true)
    c:reset()
    assert(c:add_value("http.path", "/b"))
    why = assert(reader:explain(c, { ruled_out = true }))
    eq(why.winner, nil)
    eq(#why.ruled_out, 0)
    eq(why.ruled_out_omitted, 1)
    c:reset()
    assert(c:add_value("http.path", "/a/1"))
    -- The next table applied: the router lets version 1's image go, so its published path no
    -- longer opens, while the reader's own path does as long as it holds it.
    assert(r:sync_start(2, { { id = U2, priority = 1, expression = 'http.path ^= "/b"' } }))
    eq(applied(r), 2)
    fails("no longer holds", image.open(s, path))
    local reader2 = routing_from(s, assert(image.open(s, held)))
    eq(reader2:len(), 1)
    c:reset()
    assert(c:add_value("http.path", "/a/1"))
    eq(reader2:execute(c), true, "version 1")
    assert(reader:attach_image(nil)):free()
    fails("no longer holds", image.open(s, held))
    eq(reader2:execute(c), true, "still mapped by the second router")
    assert(reader2:attach_image(nil)):retire()
    -- Version 2 is the router's now.
    local reader3 = routing_from(s, assert(image.open(s, assert(r:published()))))
    c:reset()
    assert(c:add_value("http.path", "/b/1"))
    eq(reader3:execute(c), true)
end

function T.image_corrupt_or_foreign_is_refused()
    local dir = temp_dir()
    local s = http_schema()
    local r = router.new(s)
    assert(r:publish_images(dir))
    assert(r:sync_start(1, { { id = U1, priority = 1, expression = 'http.path ^= "/a"' } }))
    applied(r)
    local path = assert(r:published())
    local f = assert(io.open(path, "rb"))
    local bytes = f:read("*a")
    f:close()
    -- One byte changed, in a copy.
    local bad = dir .. "/bad.atcimg"
    f = assert(io.open(bad, "wb"))
    f:write(bytes:sub(1, 100), string.char((bytes:byte(101) + 1) % 256), bytes:sub(102))
    f:close()
    fails("corrupt", image.open(s, bad))
    -- Truncated.
    f = assert(io.open(bad, "wb"))
    f:write(bytes:sub(1, #bytes - 4))
    f:close()
    fails("truncated", image.open(s, bad))
    -- Another schema's fields.
    local other = schema.new()
    assert(other:add_field("http.host", "String"))
    fails("built for", image.open(other, path))
    -- The sweep keeps what it is told to keep; a router it leaves without a file goes on
    -- answering from the image.
    local reader = routing_from(s, assert(image.open(s, path)))
    eq(image.sweep(dir, path:match("[^/]+$")), 1, "the bad copy")
    eq(image.sweep(dir), 1)
    eq(image.sweep(dir), 0)
    local c = context.new(s)
    assert(c:add_value("http.path", "/a"))
    eq(reader:execute(c), true)
    os.remove(dir)
end

return T
