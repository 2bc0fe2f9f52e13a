-- resty.router.gateway.metrics: a gateway's stats in Prometheus' text exposition format
-- (version 0.0.4), for a /metrics endpoint.
--
--   local text = gateway.prometheus(gw:stats(), { worker = ngx.worker.id() })
--   -- or gw:metrics_text({ worker = ngx.worker.id() })
--
-- Invariants:
-- * Every metric has one HELP and one TYPE line, then its samples; counters end in `_total`,
--   times are in seconds (`_seconds`), as Prometheus' naming conventions ask.
-- * Label values are escaped (backslash, double quote, newline) and label names checked, so
--   no value a caller passes (a version string, a worker id) can break the text.
-- * Rendering reads the stats table only: it never calls into the library.

local type, tostring, pairs, ipairs, error = type, tostring, pairs, ipairs, error
local concat, sort, format = table.concat, table.sort, string.format

local _M = {}
_M._VERSION = "0.2.0"

-- Prometheus' label value escapes.
local function escape(v)
    return (tostring(v):gsub("[\\\"\n]", { ["\\"] = "\\\\", ["\""] = "\\\"", ["\n"] = "\\n" }))
end

-- `{a="x",b="y"}` from the caller's labels (sorted by name) and the sample's own, or "".
local function label_text(common, own)
    local parts = {}
    for i = 1, #common do
        parts[#parts + 1] = common[i]
    end
    if own then
        for i = 1, #own, 2 do
            parts[#parts + 1] = own[i] .. "=\"" .. escape(own[i + 1]) .. "\""
        end
    end
    if #parts == 0 then
        return ""
    end
    return "{" .. concat(parts, ",") .. "}"
end

-- The caller's labels as sorted `name="value"` parts; raises on a name Prometheus refuses.
local function common_labels(labels)
    local parts = {}
    if labels == nil then
        return parts
    end
    if type(labels) ~= "table" then
        error("labels must be a table, got " .. type(labels), 3)
    end
    local names = {}
    for name in pairs(labels) do
        if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") or name:sub(1, 2) == "__" then
            error("bad label name " .. tostring(name) .. " (expected [a-zA-Z_][a-zA-Z0-9_]*, "
                .. "not starting with __)", 3)
        end
        names[#names + 1] = name
    end
    sort(names)
    for i, name in ipairs(names) do
        parts[i] = name .. "=\"" .. escape(labels[name]) .. "\""
    end
    return parts
end

-- A number as Prometheus reads it: integers without an exponent, others with enough digits.
local function value_text(v)
    if v == nil then
        return "NaN"
    end
    if v == true then
        return "1"
    end
    if v == false then
        return "0"
    end
    if v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then
        return format("%d", v)
    end
    return format("%.9g", v)
end

local function us_to_s(us)
    return us and us / 1e6
end

-- The metrics, in output order: name, type, help, the samples' { labels, value } from a stats
-- table `s`, whether only a gateway's stats have it (gw:stats(), not r:stats(): those with
-- `request_source`), whether only a sharing gateway's do (those with `node`), and whether only
-- a gateway etcd feeds (those with `etcd`, resty.router.etcd).
local METRICS = {
    { "atc_router_requests_total", "counter",
        "Requests the router answered, by result: routed (a route matched), not_found (none "
        .. "did), bad_request (refused as bad input before matching).",
        function(s)
            return { { { "result", "routed" }, s.routed },
                { { "result", "not_found" }, s.not_found },
                { { "result", "bad_request" }, s.bad_requests } }
        end },
    { "atc_router_updates_total", "counter",
        "Updates of the route table, by result: applied, or refused (nothing changed).",
        function(s)
            return { { { "result", "applied" }, s.updates_applied },
                { { "result", "refused" }, s.updates_refused } }
        end },
    { "atc_router_last_update_hold_seconds", "gauge",
        "How long the last update held the worker (for a background build, the swap).",
        function(s) return { { nil, us_to_s(s.last_update_hold_us) } } end },
    { "atc_router_last_build_seconds", "gauge",
        "How long the last update's table took to build (on the builder thread for a "
        .. "background build).",
        function(s) return { { nil, us_to_s(s.last_build_us) } } end },
    { "atc_router_routes", "gauge", "Routes in the table in force.",
        function(s) return { { nil, s.routes } } end },
    { "atc_router_broken", "gauge",
        "1 when a panic interrupted an update and the router refuses to route until the next "
        .. "update rebuilds it.",
        function(s) return { { nil, s.broken } } end },
    { "atc_router_update_pending", "gauge",
        "1 while a version is being built or waits to be handed to the builder.",
        function(s) return { { nil, s.pending ~= nil } } end, true },
    { "atc_router_last_update_failed", "gauge",
        "1 when the last update failed (refused, or its loader failed) and no later version "
        .. "was applied since.",
        function(s) return { { nil, s.last_error ~= nil } } end, true },
    { "atc_router_share_own_builds_total", "counter",
        "With share: how often this worker could map no holder's image of a version (or "
        .. "refused it) and built its own table of it.",
        function(s) return { { nil, s.own_builds } } end, true, true },
    { "atc_router_node_requests_total", "counter",
        "With share: requests all the node's workers answered, by result, summed through the "
        .. "share dict (each worker's count as of its last report, at most a second old; a "
        .. "worker that respawns starts from 0).",
        function(s)
            local n = s.node
            return { { { "result", "routed" }, n.routed },
                { { "result", "not_found" }, n.not_found },
                { { "result", "bad_request" }, n.bad_requests } }
        end, true, true },
    { "atc_router_node_share_own_builds_total", "counter",
        "With share: own tables built by the node's workers, summed through the share dict.",
        function(s) return { { nil, s.node.own_builds } } end, true, true },
    { "atc_router_node_workers", "gauge",
        "With share: the workers whose counts the node's are summed from.",
        function(s) return { { nil, s.node.workers } } end, true, true },
    { "atc_router_etcd_revision", "gauge",
        "Fed by etcd: the etcd revision the table in force holds.",
        function(s) return { { nil, s.etcd.revision } } end, true, false, true },
    { "atc_router_etcd_connected", "gauge",
        "Fed by etcd: 1 while this worker's watch is established.",
        function(s) return { { nil, s.etcd.connected } } end, true, false, true },
    { "atc_router_etcd_watching", "gauge",
        "Fed by etcd: 1 when this worker watches (with share, one worker per node does).",
        function(s) return { { nil, s.etcd.watching } } end, true, false, true },
    { "atc_router_etcd_events_total", "counter",
        "Fed by etcd: route puts and deletes this worker's watcher read, by result: applied, "
        .. "or refused (a value that is no route: logged with its key, left out).",
        function(s)
            return { { { "result", "applied" }, s.etcd.events_applied },
                { { "result", "refused" }, s.etcd.events_refused } }
        end, true, false, true },
    { "atc_router_etcd_watch_responses_total", "counter",
        "Fed by etcd: watch responses holding route puts or deletes that this worker read.",
        function(s) return { { nil, s.etcd.responses } } end, true, false, true },
    { "atc_router_etcd_changes_total", "counter",
        "Fed by etcd: changes applied from the watch (responses that arrived while one was "
        .. "applied are applied together, as one).",
        function(s) return { { nil, s.etcd.changes } } end, true, false, true },
    { "atc_router_etcd_loads_total", "counter",
        "Fed by etcd: whole ranges read (the first load, and after a compaction).",
        function(s) return { { nil, s.etcd.loads } } end, true, false, true },
    { "atc_router_etcd_reconnects_total", "counter",
        "Fed by etcd: watch sessions that ended (connection lost, etcd restarted, compaction).",
        function(s) return { { nil, s.etcd.reconnects } } end, true, false, true },
    { "atc_router_etcd_last_apply_seconds", "gauge",
        "Fed by etcd: from the arrival of the last revision's answer to its table in force.",
        function(s) return { { nil, s.etcd.last_apply_seconds } } end, true, false, true },
    { "atc_router_gateway_info", "gauge",
        "The version in force (empty before the first) and how requests are read, as labels.",
        function(s)
            local version = s.version
            return { { { "version", version == nil and "" or version,
                "request_source", s.request_source }, 1 } }
        end, true },
}

-- The text of stats table `s` (r:stats() or gw:stats()) with `labels` ({ name = value }, e.g.
-- { worker = ngx.worker.id() }) on every sample. Raises on a label name Prometheus refuses.
function _M.render(s, labels)
    if type(s) ~= "table" then
        error("bad argument #1 to 'prometheus' (stats table expected)", 2)
    end
    local common = common_labels(labels)
    local gateway = s.request_source ~= nil
    local out = {}
    for _, m in ipairs(METRICS) do
        if (gateway or not m[5]) and (s.node ~= nil or not m[6])
            and (s.etcd ~= nil or not m[7]) then
            out[#out + 1] = "# HELP " .. m[1] .. " " .. m[3]
            out[#out + 1] = "# TYPE " .. m[1] .. " " .. m[2]
            for _, sample in ipairs(m[4](s)) do
                out[#out + 1] = m[1] .. label_text(common, sample[1]) .. " "
                    .. value_text(sample[2])
            end
        end
    end
    out[#out + 1] = ""
    return concat(out, "\n")
end

-- The Content-Type of the text.
_M.CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

return _M
