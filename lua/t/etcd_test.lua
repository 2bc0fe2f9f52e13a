-- Tests of resty.router.etcd.routes (what an etcd key and value mean as a route) and of the
-- client's stream framing (resty.router.etcd.client, over a scripted socket), in a plain
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


-- A connection to a scripted socket: each read hands out the next of `pieces` (false: the read
-- times out), then the reads time out.
local function scripted_conn(pieces)
    local sock = {}
    function sock.settimeouts() end
    function sock.connect() return true end
    function sock.send(_, s) return #s end
    function sock.close() end
    function sock.receiveany()
        local p = table.remove(pieces, 1)
        if p then
            return p
        end
        return nil, "timeout"
    end
    local saved = rawget(_G, "ngx")
    _G.ngx = { socket = { tcp = function() return sock end } }
    package.loaded["resty.router.etcd.client"] = nil
    local client = require("resty.router.etcd.client")
    local conn = assert(client.connect("http://127.0.0.1:2379", { timeout = 1 }))
    _G.ngx = saved
    return conn
end

local function chunk(s)
    return ("%x\r\n%s\r\n"):format(#s, s)
end

function T.a_watch_line_already_there_is_read_at_once_and_a_partial_one_waits()
    local head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    local one, two = '{"result":{"n":1}}', '{"result":{"n":2}}'
    local second = chunk(two .. "\n")
    local conn = scripted_conn({ head .. chunk(one .. "\n") .. second:sub(1, 5), false,
        second:sub(6), chunk("") })
    assert(conn:open_stream("/v3/watch", "{}"))
    -- In the buffer already: no read.
    eq(conn:ready_line(1000, 1), one, "the first line")
    -- Half a chunk, and the read finds nothing more: not a line yet, and nothing lost.
    eq(conn:ready_line(1000, 1), false, "half a line")
    eq(conn:line(1000), two, "the second line, once the rest came")
    local line, err = conn:ready_line(1000, 1)
    eq(line, nil, "after the last chunk")
    has(err, "ended")
end

function T.a_bad_chunk_is_an_error_never_a_raise()
    local head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    local conn = scripted_conn({ head .. chunk(("x"):rep(50) .. "\n") })
    assert(conn:open_stream("/v3/watch", "{}"))
    local line, err = conn:ready_line(10, 1)
    eq(line, nil, "a line over the limit")
    has(err, "a chunk of")
    conn = scripted_conn({ head .. "zz\r\n" })
    assert(conn:open_stream("/v3/watch", "{}"))
    line, err = conn:ready_line(10, 1)
    eq(line, nil, "a bad chunk size")
    has(err, "bad chunk size")
    -- line() too: an answer, never a raise.
    conn = scripted_conn({ head .. "zz\r\n" })
    assert(conn:open_stream("/v3/watch", "{}"))
    line, err = conn:line(10)
    eq(line, nil, "a bad chunk size read by line()")
    has(err, "bad chunk size")
end

return T
