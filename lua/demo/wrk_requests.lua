-- wrk script of scripts/gateway-bench: cycles through the requests of a requests.tsv written by
-- ffi/examples/gateway_data.rs, and makes every path unique (a per-request counter), so that no
-- cache of any kind can answer a repeated request.
--
--   wrk -t1 -c16 -d10s --latency -s lua/demo/wrk_requests.lua URL -- requests.tsv
--
-- Line format: mode, method, host, path, query, headers (`name:value` joined by \x1f). Modes
-- (chosen by the generator, which checked that the route reached stays the same):
--   S  the path gets "/<counter>" appended
--   R  the path's trailing digits are replaced by the counter
--   K  the path stays; the query gets "u=<counter>" (no route in the table reads `u`)
-- The request is written out whole (not with wrk.format) because a header may repeat. HEAD is
-- sent as GET: wrk's parser does not know a custom request was a HEAD and would wait for a body
-- that never comes (the workload's HEAD routes are `GET || HEAD` sets, so the route is the same).

local templates = {}
local count = 0
local next_index = 1
local counter = 1000000

function init(args)
    local file = assert(args[1], "usage: wrk ... -s wrk_requests.lua URL -- requests.tsv")
    for line in io.lines(file) do
        local mode, method, host, path, query, headers =
            line:match("^(%a)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
        if mode then
            if method == "HEAD" then
                method = "GET"
            end
            local head = { " HTTP/1.1\r\nHost: ", host, "\r\n" }
            for pair in (headers .. "\31"):gmatch("([^\31]*)\31") do
                local k, v = pair:match("^([^:]+):(.*)$")
                if k then
                    head[#head + 1] = k .. ": " .. v .. "\r\n"
                end
            end
            head[#head + 1] = "\r\n"
            local base, before, after = path, "", ""
            if mode == "R" then
                base = path:gsub("%d+$", "")
            elseif mode == "S" then
                base = path:gsub("/$", "") .. "/"
            end
            if mode == "K" then
                before = query ~= "" and ("?" .. query .. "&u=") or "?u="
            elseif query ~= "" then
                after = "?" .. query
            end
            count = count + 1
            templates[count] = {
                method .. " " .. base, -- then the counter (S, R) or nothing (K)
                mode == "K",
                before,
                after,
                table.concat(head),
            }
        end
    end
    assert(count > 0, "no requests in " .. file)
    -- Threads start at different places of the list.
    next_index = (math.floor(os.clock() * 1e6) % count) + 1
end

function request()
    local t = templates[next_index]
    next_index = next_index + 1
    if next_index > count then
        next_index = 1
    end
    counter = counter + 1
    if t[2] then
        return t[1] .. t[3] .. counter .. t[5]
    end
    return t[1] .. counter .. t[4] .. t[5]
end
