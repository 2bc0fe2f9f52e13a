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
local concat = table.concat

local _M = {}

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

-- One line for a response header: the winner, how many candidates of how many routes, then
-- for each candidate that did not match, its id and the predicate that made it fail, with its
-- line and column (a negated predicate shown as !(...), since it failed by holding):
--   winner=<uuid> candidates=3 routes=10000; <uuid> failed at 1:31 http.path ^= "/v2"; ...
-- `winner=none` when no route matched; `error=<message>` for an explanation that failed. At
-- most `max_len` bytes (default MAX_SUMMARY): the failures that do not fit are counted at the
-- end ("; +12 more failed").
function _M.summary(why, max_len)
    max_len = max_len or _M.MAX_SUMMARY
    if type(why) ~= "table" then
        return nil
    end
    if why.error then
        return one_line("error=" .. why.error):sub(1, max_len)
    end
    local head = "winner=" .. (why.winner or "none") .. " candidates=" .. #why.candidates
        .. " routes=" .. tostring(why.routes)
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
