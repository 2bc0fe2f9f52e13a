-- resty.router.json: a JSON decoder for the reports libatc_router writes (atc_router_explain,
-- atc_router_matches), with no dependency: the same code runs in OpenResty and in a plain
-- LuaJIT (the tests' embedded one has no cjson).
--
--   local json = require("resty.router.json")
--   local value, err = json.decode(text)     -- nil and an error for malformed text; never raises
--
-- It reads any RFC 8259 document, not only what the library writes:
-- * objects become tables with string keys, arrays sequences (1-based), strings Lua strings
--   (every escape, \u surrogate pairs as UTF-8), true / false booleans;
-- * null becomes nil: a member whose value is null is absent (the library writes null only as
--   a member's value, never in an array);
-- * numbers become Lua numbers, except integers of magnitude 2^53 or more, which a double may
--   not hold exactly: those become uint64_t cdata (non-negative) or int64_t cdata (negative),
--   and an integer beyond the 64-bit ranges is an error. (cjson would round them; route
--   priorities may use all 64 bits.)
-- Nesting is limited to 64 levels.

local ffi = require("ffi")

local byte, sub, find, char, concat = string.byte, string.sub, string.find, string.char,
    table.concat
local tonumber, type, pcall, error = tonumber, type, pcall, error
local floor = math.floor

local MAX_DEPTH = 64
local U64_MAX = "18446744073709551615"
local I64_MIN_DIGITS = "9223372036854775808"

local _M = {}
_M._VERSION = "0.2.0"

-- The failure marker: decode errors are raised as this table (with the message set) and caught
-- by decode().
local Fail = {}

local function fail(msg, pos)
    Fail.msg = msg .. " at byte " .. pos
    error(Fail, 0)
end

local function utf8(cp)
    if cp < 0x80 then
        return char(cp)
    elseif cp < 0x800 then
        return char(0xC0 + floor(cp / 0x40), 0x80 + cp % 0x40)
    elseif cp < 0x10000 then
        return char(0xE0 + floor(cp / 0x1000), 0x80 + floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
    end
    return char(0xF0 + floor(cp / 0x40000), 0x80 + floor(cp / 0x1000) % 0x40,
        0x80 + floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local ESCAPES = {
    [34] = "\"", [92] = "\\", [47] = "/", [98] = "\b", [102] = "\f", [110] = "\n",
    [114] = "\r", [116] = "\t",
}

-- The string whose opening quote is at `pos`: the string and the position after its closing
-- quote.
local function read_string(s, pos)
    local parts, n = nil, 0
    local i = pos + 1
    while true do
        local j = find(s, "[\"\\%z\1-\31]", i)
        if not j then
            fail("unterminated string", pos)
        end
        local b = byte(s, j)
        if b == 34 then -- closing quote
            if not parts then
                return sub(s, pos + 1, j - 1), j + 1
            end
            n = n + 1
            parts[n] = sub(s, i, j - 1)
            return concat(parts, "", 1, n), j + 1
        end
        if b ~= 92 then
            fail("control character in a string", j)
        end
        parts = parts or {}
        n = n + 1
        parts[n] = sub(s, i, j - 1)
        local e = byte(s, j + 1)
        local simple = e and ESCAPES[e]
        if simple then
            n = n + 1
            parts[n] = simple
            i = j + 2
        elseif e == 117 then -- \uXXXX
            local hex = sub(s, j + 2, j + 5)
            local cp = #hex == 4 and not find(hex, "[^%x]") and tonumber(hex, 16)
            if not cp then
                fail("bad \\u escape", j)
            end
            i = j + 6
            if cp >= 0xD800 and cp <= 0xDBFF then
                local lo = sub(s, i, i + 1) == "\\u" and sub(s, i + 2, i + 5)
                local low = lo and #lo == 4 and not find(lo, "[^%x]") and tonumber(lo, 16)
                if not (low and low >= 0xDC00 and low <= 0xDFFF) then
                    fail("unpaired surrogate", j)
                end
                cp = 0x10000 + (cp - 0xD800) * 0x400 + (low - 0xDC00)
                i = i + 6
            elseif cp >= 0xDC00 and cp <= 0xDFFF then
                fail("unpaired surrogate", j)
            end
            n = n + 1
            parts[n] = utf8(cp)
        else
            fail("bad escape", j)
        end
    end
end

-- An integer written with more digits than a double holds exactly: 64-bit cdata.
local function big_integer(negative, digits, pos)
    local limit = negative and I64_MIN_DIGITS or U64_MAX
    if #digits > #limit or (#digits == #limit and digits > limit) then
        fail("integer out of the 64-bit range", pos)
    end
    if negative then
        local v = ffi.new("int64_t", 0)
        for k = 1, #digits do
            v = v * 10 - (byte(digits, k) - 48)
        end
        return v
    end
    local v = ffi.new("uint64_t", 0)
    for k = 1, #digits do
        v = v * 10 + (byte(digits, k) - 48)
    end
    return v
end

local function read_number(s, pos)
    local _, int_end, minus, digits = find(s, "^(%-?)(%d+)", pos)
    if not int_end or (#digits > 1 and byte(digits, 1) == 48) then
        fail("bad number", pos)
    end
    local stop = int_end
    local _, frac_end = find(s, "^%.%d+", stop + 1)
    stop = frac_end or stop
    local _, exp_end = find(s, "^[eE][-+]?%d+", stop + 1)
    stop = exp_end or stop
    if stop == int_end and #digits > 15 then
        local v = tonumber(sub(s, pos, stop))
        if v >= 2 ^ 53 or v <= -2 ^ 53 then
            return big_integer(minus == "-", digits, pos), stop + 1
        end
        return v, stop + 1
    end
    return tonumber(sub(s, pos, stop)), stop + 1
end

local read_value

-- The value at the first non-blank byte from `pos`, and the position after it.
read_value = function(s, pos, depth)
    pos = find(s, "[^ \t\r\n]", pos)
    if not pos then
        fail("unexpected end", #s + 1)
    end
    local b = byte(s, pos)
    if b == 34 then
        return read_string(s, pos)
    elseif b == 123 or b == 91 then -- { [
        if depth >= MAX_DEPTH then
            fail("nested too deeply", pos)
        end
        local object = b == 123
        local out, n = {}, 0
        local close = object and "}" or "]"
        local p = find(s, "[^ \t\r\n]", pos + 1)
        if p and sub(s, p, p) == close then
            return out, p + 1
        end
        pos = pos + 1
        while true do
            local v
            if object then
                local k
                p = find(s, "[^ \t\r\n]", pos)
                if not p or byte(s, p) ~= 34 then
                    fail("expected a member name", p or #s + 1)
                end
                k, pos = read_string(s, p)
                p = find(s, "[^ \t\r\n]", pos)
                if not p or byte(s, p) ~= 58 then -- :
                    fail("expected ':'", p or #s + 1)
                end
                v, pos = read_value(s, p + 1, depth + 1)
                out[k] = v
            else
                v, pos = read_value(s, pos, depth + 1)
                n = n + 1
                out[n] = v
            end
            p = find(s, "[^ \t\r\n]", pos)
            local c = p and sub(s, p, p)
            if c == close then
                return out, p + 1
            elseif c ~= "," then
                fail("expected ',' or '" .. close .. "'", p or #s + 1)
            end
            pos = p + 1
        end
    elseif b == 116 and sub(s, pos, pos + 3) == "true" then
        return true, pos + 4
    elseif b == 102 and sub(s, pos, pos + 4) == "false" then
        return false, pos + 5
    elseif b == 110 and sub(s, pos, pos + 3) == "null" then
        return nil, pos + 4
    elseif b == 45 or (b >= 48 and b <= 57) then
        return read_number(s, pos)
    end
    fail("unexpected character", pos)
end

-- The value of the JSON text `s`, or nil and an error.
function _M.decode(s)
    if type(s) ~= "string" then
        return nil, "JSON text must be a string, got " .. type(s)
    end
    local ok, v, pos = pcall(read_value, s, 1, 0)
    if not ok then
        if v == Fail then
            return nil, "invalid JSON: " .. Fail.msg
        end
        return nil, "invalid JSON: " .. tostring(v)
    end
    if find(s, "[^ \t\r\n]", pos) then
        return nil, "invalid JSON: unexpected text after the value at byte " .. pos
    end
    return v
end

return _M
