-- Tests of resty.router.etcd.routes (what an etcd key and value mean as a route), in a plain
-- LuaJIT: ffi/tests/lua.rs runs each function in a fresh state, lua/t/run.lua all of them.
-- The watcher itself, against a real etcd and nginx, is ffi/tests/nginx_etcd.rs.

local routes = require("resty.router.etcd.routes")
local schema = require("resty.router.schema")

local T = {}

local function eq(got, want, what)
    if got ~= want then
        error((what or "value") .. ": got " .. tostring(got) .. ", want " .. tostring(want), 2)
    end
end

local function has(s, part, what)
    if type(s) ~= "string" or not s:find(part, 1, true) then
        error((what or "text") .. " " .. tostring(s) .. " lacks " .. part, 2)
    end
end

local ID = "a8f2c1e4-0000-4000-8000-000000000001"
local PREFIX = "/atc/routes/"

local function http_schema()
    local s = schema.new()
    assert(s:add_field("http.path", "String"))
    return s
end

function T.range_end_covers_the_prefix()
    eq(routes.range_end("/atc/routes/"), "/atc/routes0")
    eq(routes.range_end("a\255\255"), "b")
    eq(routes.range_end("\255"), "\0")
    eq(routes.range_end(""), "\0")
end

function T.a_value_is_a_route_or_a_reason()
    local opts = { prefix = PREFIX, schema = http_schema(), max_value_bytes = 100 }
    local r = assert(routes.decode(PREFIX .. ID, '{"priority":7,"expression":"http.path ^= \\"/a\\"","x":1}', opts))
    eq(r.id, ID)
    eq(r.priority, 7)
    eq(r.expression, 'http.path ^= "/a"')
    local cases = {
        { PREFIX .. "nope", '{"priority":1,"expression":"http.path ^= \\"/\\""}', "not a UUID" },
        { "/other/" .. ID, "{}", "not under the prefix" },
        { PREFIX .. ID, "{bad", "not JSON" },
        { PREFIX .. ID, "[1]", "`priority` must be" },
        { PREFIX .. ID, '"text"', "not a JSON object" },
        { PREFIX .. ID, '{"priority":-1,"expression":"x"}', "`priority` must be" },
        { PREFIX .. ID, '{"priority":1.5,"expression":"x"}', "`priority` must be" },
        { PREFIX .. ID, '{"priority":1}', "`expression` must be a string, got none" },
        { PREFIX .. ID, '{"priority":1,"expression":"http.path ^="}', "the expression is invalid" },
        { PREFIX .. ID, '{"priority":1,"expression":"http.nope == \\"a\\""}', "the expression is invalid" },
        { PREFIX .. ID, string.rep(" ", 101), "more than max_value_bytes (100)" },
        { PREFIX .. ID, string.rep("[", 100), "not JSON" },
    }
    for i, c in ipairs(cases) do
        local route, why = routes.decode(c[1], c[2], opts)
        eq(route, nil, "case " .. i)
        has(why, c[3], "case " .. i)
    end
end

function T.a_watch_response_is_one_list_of_changes()
    local opts = { prefix = PREFIX, schema = http_schema() }
    local id2 = ID:sub(1, -2) .. "2"
    local id3 = ID:sub(1, -2) .. "3"
    local good = '{"priority":1,"expression":"http.path ^= \\"/g\\""}'
    local plain = function(s) return s end
    local changes, n, refused = routes.changes({
        { kv = { key = PREFIX .. ID, value = good } },
        { type = "DELETE", kv = { key = PREFIX .. ID } },   -- the last event of a key wins
        { kv = { key = PREFIX .. id2, value = "not json" } },
        { kv = { key = PREFIX .. id3, value = good } },
        { type = "DELETE", kv = { key = PREFIX .. "not-a-uuid" } },
        { kv = { key = PREFIX .. "not-a-uuid", value = good } },
    }, opts, plain)
    eq(n, 1)
    eq(#changes.upsert.ids, 1)
    eq(changes.upsert.ids[1], id3)
    -- The deleted id, and the id whose value is bad (taken out, not kept at an older value).
    eq(#changes.remove, 2)
    eq(changes.remove[1], ID)
    eq(changes.remove[2], id2)
    eq(#refused, 2)
    eq(refused[1].key, PREFIX .. id2)
    has(refused[1].reason, "not JSON")
    has(refused[2].reason, "not a UUID")
end

return T
