-- resty.router.gateway.explain: the gateway's opt-in debug header. A request that carries the
-- header named by gateway.new{ explain_header = ... }, from a client the allow-list admits, is
-- explained after routing (router:explain on the gateway's context) and the explanation stored
-- in ngx.ctx; summary() makes the one-line text a response header can carry.
--
-- Off unless configured: without explain_header, route() does not look at any of this. With
-- it, a request without the header costs one nginx variable read.
--
-- Invariant: the explanation is taken on the context route() just filled and executed, before
-- anything else uses the context: it explains exactly the answer route() gives.

local type, tostring, ipairs = type, tostring, ipairs
local byte, floor = string.byte, math.floor
local concat = table.concat

local _M = {}
_M._VERSION = "0.2.0"

-- The clients that may ask by default: the host itself.
_M.DEFAULT_ALLOW = { "127.0.0.1", "::1" }

-- The settings of `opts` (gateway.new's), checked: nil when the header is off; or a table
-- { var = the nginx variable of the header, allowed = function() -> boolean }; or nil and an
-- error.
function _M.settings(opts)
    local name = opts.explain_header
    if name == nil or name == false then
        return nil
    end
    if type(name) ~= "string" or not name:match("^[%w%-_]+$") then
        return nil, "explain_header must be a header name, got " .. tostring(name)
    end
    local allow = opts.explain_allow
    if allow == nil then
        allow = _M.DEFAULT_ALLOW
    end
    local allowed
    if type(allow) == "function" then
        allowed = allow
    elseif type(allow) == "table" then
        local set = {}
        for _, addr in ipairs(allow) do
            if type(addr) ~= "string" then
                return nil, "explain_allow must list client addresses as strings, got a "
                    .. type(addr)
            end
            set[addr] = true
        end
        allowed = function()
            local addr = ngx.var.remote_addr
            return addr ~= nil and set[addr] == true
        end
    else
        return nil, "explain_allow must be an array of client addresses or a function, got a "
            .. type(allow)
    end
    return {
        var = "http_" .. name:lower():gsub("-", "_"),
        allowed = allowed,
    }
end

-- Whether the current request asks for an explanation and may have one.
function _M.wanted(settings)
    return ngx.var[settings.var] ~= nil and settings.allowed() and true or false
end

-- Control characters (a multi-line expression) cannot go in a header value.
local function one_line(s)
    return (tostring(s):gsub("[%z\1-\31\127]+", " "))
end

_M.MAX_SUMMARY = 2048

-- `s` cut to at most `max_len` bytes without cutting a UTF-8 character: the cut backs off
-- while the first byte left out continues a character (10xxxxxx).
local function cut(s, max_len)
    if #s <= max_len then
        return s
    end
    local n = max_len
    while n > 0 do
        local b = byte(s, n + 1)
        if b < 0x80 or b >= 0xC0 then
            break
        end
        n = n - 1
    end
    return s:sub(1, n)
end

-- One line for a response header: the winner, how many candidates of how many routes, then
-- for each candidate that did not match, its id and the predicate that made it fail, with its
-- line and column (a negated predicate shown as !(...), since it failed by holding):
--   winner=<uuid> candidates=3 routes=10000; <uuid> failed at 1:31 http.path ^= "/v2"; ...
-- `winner=none` when no route matched; `error=<message>` for an explanation that failed. At
-- most `max_len` bytes (default MAX_SUMMARY), never cutting a UTF-8 character: the failures
-- that do not fit are counted at the end ("; +12 more failed"), and a head or error longer
-- than the limit is cut.
function _M.summary(why, max_len)
    if max_len == nil then
        max_len = _M.MAX_SUMMARY
    elseif type(max_len) ~= "number" or max_len ~= max_len then
        error("max_len must be a number of bytes, got " .. tostring(max_len), 2)
    end
    max_len = math.max(0, floor(max_len))
    if type(why) ~= "table" then
        return nil
    end
    if why.error then
        return cut(one_line("error=" .. tostring(why.error)), max_len)
    end
    local head = cut("winner=" .. (why.winner or "none") .. " candidates=" .. #why.candidates
        .. " routes=" .. tostring(why.routes), max_len)
    local parts, len = { head }, #head
    local failed = {}
    for _, c in ipairs(why.candidates) do
        if not c.matched then
            failed[#failed + 1] = c
        end
    end
    for i, c in ipairs(failed) do
        local p = c.predicates[1]
        local part
        if p then
            local text = p.negated and ("!(" .. p.text .. ")") or p.text
            part = "; " .. c.id .. " failed at " .. p.line .. ":" .. p.column .. " "
                .. one_line(text)
        else
            part = "; " .. c.id .. " failed"
        end
        -- Room for the count of what follows, if this is not the last.
        local rest = #failed - i
        local reserve = rest > 0 and #("; +" .. rest .. " more failed") or 0
        if len + #part + reserve > max_len then
            local more = "; +" .. (#failed - i + 1) .. " more failed"
            if len + #more <= max_len then
                parts[#parts + 1] = more
            end
            break
        end
        parts[#parts + 1] = part
        len = len + #part
    end
    return concat(parts)
end

return _M
