-- The gateway of the push test (ffi/tests/nginx_pushes.rs): resty.router.gateway in a real
-- nginx worker, taking pushes of every form while an open-loop client routes through it.
--
-- init_worker(routes_file) applies the routes of a TSV file as version "v1". access() routes
-- the request and answers 200 with the route id (404 and "-" when none matches); every answer
-- carries X-Gw-Answer: "<version> <route id or ->", the version that routed it and its answer.
-- push() (location /__push?version=V&kind=K&file=F) hands version V over and answers at once
-- ("started V <state>", or 400 and why): kind "tables" reads F (priority, id, expression lines)
-- into parallel Lua arrays, made anew for each push (the strings are LuaJIT's, interned: the
-- same text is the same string), "text" hands F's bytes over as one string, "changes" reads F
-- (route lines, and "-<TAB>id" lines for removals) into { upsert =, remove = }. wait()
-- (location /__wait?version=V) waits for V and answers "applied", or "superseded"/"refused"
-- and why. stats() (location /__stats) answers the gateway's routes_handed_over and how many
-- requests were answered while a push's list was being handed over (in chunks of 50 routes,
-- giving way after each: at a steady rate some requests come in between).

local gateway = require("resty.router.gateway")

local ngx = ngx
local tonumber, tostring = tonumber, tostring

local _M = {}

local GW
-- A push's GW:update() is running (its hand-over yields inside it), and the requests answered
-- meanwhile.
local PUSHING, ANSWERED_WHILE_PUSHING = false, 0

local function read_tables(file)
    local ids, priorities, expressions = {}, {}, {}
    for line in io.lines(file) do
        local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
        if prio then
            ids[#ids + 1], priorities[#priorities + 1], expressions[#expressions + 1] =
                id, tonumber(prio), expr
        end
    end
    return { ids = ids, priorities = priorities, expressions = expressions }
end

local function read_changes(file)
    local upsert, remove = { ids = {}, priorities = {}, expressions = {} }, {}
    for line in io.lines(file) do
        local prio, id, expr = line:match("^(%d+)\t(%S+)\t(.*)$")
        if prio then
            local n = #upsert.ids + 1
            upsert.ids[n], upsert.priorities[n], upsert.expressions[n] = id, tonumber(prio), expr
        else
            local gone = line:match("^%-\t(%S+)$")
            if gone then
                remove[#remove + 1] = gone
            end
        end
    end
    return { upsert = upsert, remove = remove }
end

function _M.init_worker(routes_file)
    GW = assert(gateway.new({ update_chunk = 50, update_slice = 0 }))
    local ok, state = GW:update("v1", read_tables(routes_file))
    assert(ok and state == "applied", state)
end

function _M.access()
    if PUSHING then
        ANSWERED_WHILE_PUSHING = ANSWERED_WHILE_PUSHING + 1
    end
    local uuid = GW:route()
    ngx.header["X-Gw-Answer"] = tostring(GW:version()) .. " " .. (uuid or "-")
    if not uuid then
        ngx.status = 404
    end
    ngx.print(uuid or "-")
end

function _M.push()
    local args = ngx.req.get_uri_args()
    local version, kind, file = args.version, args.kind, args.file
    local list
    if kind == "tables" then
        list = read_tables(file)
    elseif kind == "changes" then
        list = read_changes(file)
    else
        local f = assert(io.open(file, "rb"))
        list = f:read("*a")
        f:close()
    end
    PUSHING = true
    local ok, state = GW:update(version, list)
    PUSHING = false
    if not ok then
        ngx.status = 400
        ngx.say("refused ", version, ": ", state)
        return
    end
    ngx.say("started ", version, " ", state)
end

function _M.wait()
    local version = ngx.req.get_uri_args().version
    local ok, err = GW:wait(version)
    if ok then
        ngx.say("applied ", version)
        return
    end
    ngx.say(tostring(err):find("superseded", 1, true) and "superseded " or "refused ", version,
        ": ", err)
end

function _M.stats()
    ngx.say("routes_handed_over ", GW:stats().routes_handed_over, " answered_while_pushing ",
        ANSWERED_WHILE_PUSHING)
end

return _M
