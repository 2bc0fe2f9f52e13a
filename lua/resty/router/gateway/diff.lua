-- resty.router.gateway.diff: what a whole route list in Lua changes from the last one handed
-- over, found without crossing the FFI, so that a push of a large list that changes a few
-- routes hands over only those.
--
-- The gateway keeps `sent`: its own copy of the last whole list it handed over (the ids,
-- priorities and expression strings, and each id's position). LuaJIT interns strings, so an
-- expression the caller did not change is the same string object as the one in `sent`, and
-- comparing it is one pointer comparison: an entry at the same position with the same id,
-- priority and expression is unchanged, whatever its length. Only entries that moved are
-- looked up by id.
--
-- Invariants:
-- * `of` answers either exactly what a sync of the whole list would change (the routes to put
--   in, the ids to take out), or nil: whenever it cannot be sure (a repeated id, a value that
--   is not a string, a priority that is not a number or 64-bit cdata, most routes changed, most
--   of a sample of the list new or far from their old places), it gives up and the whole list
--   goes to the library, whose rules judge it. It never judges an entry itself.
-- * `sent` describes the list the library's table was built from only while the gateway says
--   so: the gateway drops it (sets it to nil) whenever a version built from it is refused,
--   superseded, applied with invalid routes left out, or the router changes another way.

local type = type
local floor, max, min = math.floor, math.max, math.min

local ok_new, table_new = pcall(require, "table.new")
if not ok_new then
    table_new = function() return {} end
end

local _M = {}
_M._VERSION = "0.2.0"

-- Entries compared between two calls of the yield (which gives way only once the hand-over has
-- held the worker long enough: a call in between costs a clock read).
local STEP = 2000

local function get(routes, ids, priorities, expressions, i)
    if ids then
        return ids[i], priorities[i], expressions[i]
    end
    local r = routes[i]
    if type(r) ~= "table" then
        return nil
    end
    return r.id, r.priority, r.expression
end

local function plain(id, prio, expr)
    local tp = type(prio)
    return type(id) == "string" and type(expr) == "string" and (tp == "number" or tp == "cdata")
end

-- A copy of a whole list, to diff the next one against: { ids =, priorities =, expressions =,
-- n = } (and `pos`, { [id] = i }, made when an entry moved); nil when the list has an entry `of`
-- could not compare (then the next push goes whole again). A list with a repeated id is not
-- told apart here: the library refuses it (or leaves the repeat out, an error of the report),
-- and the gateway then drops the copy. `yield` (optional) is called every STEP entries; a value
-- other than nil it returns stops the copy: nil and that value.
function _M.copy(routes, ids, priorities, expressions, n, yield)
    local s_ids, s_p, s_e = {}, {}, {}
    for i = 1, n do
        local id, p, e = get(routes, ids, priorities, expressions, i)
        if not plain(id, p, e) then
            return nil
        end
        s_ids[i], s_p[i], s_e[i] = id, p, e
        if yield and i % STEP == 0 then
            local stop = yield()
            if stop ~= nil then
                return nil, stop
            end
        end
    end
    return { ids = s_ids, priorities = s_p, expressions = s_e, n = n }
end

-- `sent`'s positions by id, made on first use (a list pushed again in the same order never
-- needs them, and a table of every id is what the collector traverses longest). Sized at once:
-- growing it would rehash every id so far in one step, without a yield.
local function positions(sent, yield)
    local pos = sent.pos
    if pos == nil then
        pos = table_new(0, sent.n)
        local s_ids = sent.ids
        for i = 1, sent.n do
            if pos[s_ids[i]] then
                return nil
            end
            pos[s_ids[i]] = i
            if yield and i % STEP == 0 then
                local stop = yield()
                if stop ~= nil then
                    return nil, stop
                end
            end
        end
        sent.pos = pos
    end
    return pos
end

-- Entries of the new list looked at before a diff begins, and how far from its own place each
-- is looked for in `sent`.
local SAMPLES, REACH = 64, 256

-- Whether most of a sample of the new list is new or far from its old place: then most of the
-- list would be changes or moves to look up by id, and finding them out exactly costs the
-- worker more than the whole list crossing (a list of every id new would build `pos` and half
-- a set of new ids before giving up). At most SAMPLES * (2 * REACH + 1) comparisons.
local function mostly_elsewhere(s_ids, sn, routes, ids, n)
    if n < 4 * SAMPLES then
        return false
    end
    local far = 0
    for k = 1, SAMPLES do
        local i = floor((k - 0.5) * n / SAMPLES) + 1
        local id
        if ids then
            id = ids[i]
        else
            local r = routes[i]
            id = type(r) == "table" and r.id or nil
        end
        local near = false
        for j = max(1, i - REACH), min(sn, i + REACH) do
            if s_ids[j] == id then
                near = true
                break
            end
        end
        if not near then
            far = far + 1
            if far * 2 > SAMPLES then
                return true
            end
        end
    end
    return false
end

-- What the whole list (routes, or the parallel arrays ids, priorities, expressions; n entries)
-- changes from `sent`: a list of changes for r:update_start ({ upsert = { ids =, priorities
-- =, expressions = }, remove = { id, ... } }) and `at`, the position in the caller's list of
-- each upsert; or nil (see the module's invariants). `yield` (optional) is called every STEP
-- entries; a value other than nil it returns stops the comparison: nil, nil and that value. On
-- success `sent` is made the new list (in place, or a new copy when entries moved).
function _M.of(sent, routes, ids, priorities, expressions, n, yield)
    local s_ids, s_p, s_e, sn = sent.ids, sent.priorities, sent.expressions, sent.n
    if mostly_elsewhere(s_ids, sn, routes, ids, n) then
        return nil
    end
    local s_pos = nil
    local u_ids, u_p, u_e, at, nu = {}, {}, {}, {}, 0
    local limit = math.max(64, n / 2)
    -- Old positions whose id is not at the same place in the new list, and old positions met
    -- again through `pos`; new ids not in `sent`.
    local missed, met, new = nil, nil, nil
    for i = 1, n do
        local id, p, e = get(routes, ids, priorities, expressions, i)
        if id ~= nil and id == s_ids[i] then
            if p ~= s_p[i] or e ~= s_e[i] then
                if not plain(id, p, e) then
                    return nil
                end
                nu = nu + 1
                u_ids[nu], u_p[nu], u_e[nu], at[nu] = id, p, e, i
            end
        else
            if not plain(id, p, e) then
                return nil
            end
            if i <= sn then
                missed = missed or {}
                missed[#missed + 1] = i
            end
            if not s_pos then
                local stop
                s_pos, stop = positions(sent, yield)
                if not s_pos then
                    return nil, nil, stop
                end
            end
            local j = s_pos[id]
            if j then
                -- The same id at its own old place in the new list too: a repeat.
                if j <= n and get(routes, ids, priorities, expressions, j) == id then
                    return nil
                end
                met = met or {}
                if met[j] then
                    return nil
                end
                met[j] = true
                if p ~= s_p[j] or e ~= s_e[j] then
                    nu = nu + 1
                    u_ids[nu], u_p[nu], u_e[nu], at[nu] = id, p, e, i
                end
            else
                new = new or {}
                if new[id] then
                    return nil
                end
                new[id] = true
                nu = nu + 1
                u_ids[nu], u_p[nu], u_e[nu], at[nu] = id, p, e, i
            end
        end
        if nu > limit then
            -- Most of the list is new: a fresh build from the whole list costs less.
            return nil
        end
        if yield and i % STEP == 0 then
            local stop = yield()
            if stop ~= nil then
                return nil, nil, stop
            end
        end
    end
    -- Taken out: the old entries no new entry named.
    local remove = {}
    local function gone(i)
        if not (met and met[i]) then
            remove[#remove + 1] = s_ids[i]
        end
    end
    for _, i in ipairs(missed or {}) do
        gone(i)
    end
    for i = n + 1, sn do
        gone(i)
    end
    if nu + #remove > limit then
        return nil
    end
    local changes = { upsert = { ids = u_ids, priorities = u_p, expressions = u_e },
        remove = remove }
    if missed == nil and n == sn then
        -- Nothing moved: the changed entries are updated in place.
        for k = 1, nu do
            local i = at[k]
            s_p[i], s_e[i] = u_p[k], u_e[k]
        end
    else
        local s, stop = _M.copy(routes, ids, priorities, expressions, n, yield)
        if not s then
            return nil, nil, stop
        end
        sent.ids, sent.priorities, sent.expressions, sent.pos, sent.n =
            s.ids, s.priorities, s.expressions, nil, s.n
    end
    return changes, at
end

return _M
