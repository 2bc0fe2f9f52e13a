-- Captures as one comparable string, for the Lua tests that compare two routings' results.
--   ns(s)          #s .. ":" .. s .. ",", so that no concatenation of two strings is ambiguous
--   flat(captures) ns(key) .. ns(value) for each capture, sorted by key; nil for no captures
local M = {}

function M.ns(s)
    return #s .. ":" .. s .. ","
end

function M.flat(captures)
    if not captures then
        return nil
    end
    local keys = {}
    for k in pairs(captures) do
        keys[#keys + 1] = tostring(k)
    end
    table.sort(keys)
    for i, k in ipairs(keys) do
        keys[i] = M.ns(k) .. M.ns(captures[tonumber(k) or k])
    end
    return table.concat(keys)
end

return M
