-- resty.router.etcd.client: etcd v3's JSON gateway (grpc-gateway) over HTTP/1.1, on an nginx
-- cosocket: one connection to one endpoint, POST requests with JSON bodies, a bounded body, and
-- a watch's stream of newline-delimited JSON objects in a chunked response.
--
--   local conn = assert(client.connect("http://127.0.0.1:2379", opts))
--   local res = assert(conn:call("/v3/kv/range", body))       -- { status =, body = }
--   assert(conn:open_stream("/v3/watch", body)); local line = conn:line()
--
-- Invariants:
-- * Nothing etcd (or whatever answers at the endpoint) sends can make it use unbounded memory
--   or raise: the head is at most MAX_HEAD bytes, a body at most `max_body`, a line of a
--   stream at most `max_line`; beyond that the call fails with the reason (the watcher then
--   reconnects or reads the whole range afresh).
-- * It reads with receiveany into its own buffer, so a read timeout leaves the connection and
--   the framing intact: the stream's `idle` callback decides whether to keep waiting (it is
--   how a watch notices that the worker is exiting).

local ngx = ngx
local tonumber, tostring, type, concat, find, sub, lower =
    tonumber, tostring, type, table.concat, string.find, string.sub, string.lower

local _M = {}
_M._VERSION = "0.2.0"

local MAX_HEAD = 64 * 1024
local READ_SIZE = 64 * 1024

local conn_mt = {}
conn_mt.__index = conn_mt

-- scheme, host, port of "http://host:port" or "https://host[:port]"; nil and why otherwise.
function _M.parse_endpoint(url)
    if type(url) ~= "string" then
        return nil, "an endpoint must be a string, got " .. type(url)
    end
    local scheme, rest = url:match("^(https?)://([^/]+)/?$")
    if not scheme then
        return nil, "endpoint " .. url .. " is not http://host:port or https://host:port"
    end
    local host, port = rest:match("^%[(.+)%]:?(%d*)$")
    if not host then
        host, port = rest:match("^([^:]+):?(%d*)$")
    end
    if not host then
        return nil, "endpoint " .. url .. " has no host"
    end
    port = tonumber(port) or (scheme == "https" and 443 or 80)
    if port < 1 or port > 65535 then
        return nil, "endpoint " .. url .. " has a bad port"
    end
    return scheme, host, port
end

-- A connection to `url`, or nil and why. `opts`: timeout (seconds, connect and send and each
-- read), ssl_verify (https: verify the server's certificate against lua_ssl_trusted_certificate,
-- default true), token (an auth token sent with every request).
function _M.connect(url, opts)
    local scheme, host, port = _M.parse_endpoint(url)
    if not scheme then
        return nil, host
    end
    local sock = ngx.socket.tcp()
    local ms = (opts.timeout or 5) * 1000
    sock:settimeouts(ms, ms, ms)
    local ok, err = sock:connect(host, port)
    if not ok then
        return nil, "connect to " .. url .. ": " .. tostring(err)
    end
    if scheme == "https" then
        ok, err = sock:sslhandshake(nil, host, opts.ssl_verify ~= false)
        if not ok then
            sock:close()
            return nil, "TLS handshake with " .. url .. ": " .. tostring(err)
        end
    end
    return setmetatable({ sock = sock, buf = "", url = url, host = host, port = port,
        token = opts.token, read_ms = ms }, conn_mt)
end

function conn_mt:close()
    self.sock:close()
end

-- More bytes into the buffer: true, or nil and why ("closed", "timeout", ...).
function conn_mt:fill()
    local data, err = self.sock:receiveany(READ_SIZE)
    if not data then
        return nil, err
    end
    self.buf = self.buf .. data
    return true
end

-- Sends a POST of `body` (JSON text) to `path`.
function conn_mt:post(path, body)
    local head = {
        "POST ", path, " HTTP/1.1\r\nHost: ", self.host, ":", tostring(self.port),
        "\r\nContent-Type: application/json\r\nContent-Length: ", tostring(#body), "\r\n",
    }
    if self.token then
        head[#head + 1] = "Authorization: " .. self.token .. "\r\n"
    end
    head[#head + 1] = "\r\n"
    head[#head + 1] = body
    local ok, err = self.sock:send(concat(head))
    if not ok then
        return nil, "send to " .. self.url .. ": " .. tostring(err)
    end
    return true
end

-- Reads the response head: status, headers (names lowercased), or nil and why.
function conn_mt:head()
    while true do
        local e = find(self.buf, "\r\n\r\n", 1, true)
        if e then
            local text = sub(self.buf, 1, e - 1)
            self.buf = sub(self.buf, e + 4)
            local status = tonumber(text:match("^HTTP/1%.[01] (%d%d%d)"))
            if not status then
                return nil, "not an HTTP response from " .. self.url
            end
            local headers = {}
            for name, value in text:gmatch("\r\n([^:\r\n]+):[ \t]*([^\r\n]*)") do
                headers[lower(name)] = value
            end
            return status, headers
        end
        if #self.buf > MAX_HEAD then
            return nil, "the response head from " .. self.url .. " is over " .. MAX_HEAD
                .. " bytes"
        end
        local ok, err = self:fill()
        if not ok then
            return nil, "read from " .. self.url .. ": " .. tostring(err)
        end
    end
end

-- The next `n` bytes of the buffer (reading as needed), or nil and why.
function conn_mt:take(n)
    while #self.buf < n do
        local ok, err = self:fill()
        if not ok then
            return nil, "read from " .. self.url .. ": " .. tostring(err)
        end
    end
    local s = sub(self.buf, 1, n)
    self.buf = sub(self.buf, n + 1)
    return s
end

-- The next CRLF-ended line of the buffer (at most `max` bytes), or nil and why.
function conn_mt:crlf_line(max, idle)
    while true do
        local e = find(self.buf, "\r\n", 1, true)
        if e then
            local s = sub(self.buf, 1, e - 1)
            self.buf = sub(self.buf, e + 2)
            return s
        end
        if #self.buf > max then
            return nil, "a line over " .. max .. " bytes"
        end
        local ok, err = self:fill()
        if not ok then
            if err == "timeout" and idle and idle() then
                -- Keep waiting: nothing was lost, the buffer holds what came.
            else
                return nil, "read from " .. self.url .. ": " .. tostring(err)
            end
        end
    end
end

-- The size a chunk's size line gives (hex digits, then extensions), at most `max`; or nil and
-- why.
function conn_mt:chunk_size(line, max)
    local hex = line:match("^%s*(%x+)")
    local size = hex and tonumber(hex, 16)
    if not size then
        return nil, "a bad chunk size from " .. self.url
    end
    if size > max then
        return nil, "a chunk of " .. size .. " bytes, over " .. max
    end
    return size
end

-- The next chunk of a chunked body: its bytes ("" for the last), or nil and why.
function conn_mt:chunk(max, idle)
    local line, err = self:crlf_line(1024, idle)
    if not line then
        return nil, err
    end
    local size
    size, err = self:chunk_size(line, max)
    if not size then
        return nil, err
    end
    if size == 0 then
        -- Trailers, then the empty line.
        repeat
            line, err = self:crlf_line(MAX_HEAD)
        until not line or line == ""
        return ""
    end
    local data
    while #self.buf < size + 2 do
        local ok, ferr = self:fill()
        if not ok then
            if not (ferr == "timeout" and idle and idle()) then
                return nil, "read from " .. self.url .. ": " .. tostring(ferr)
            end
        end
    end
    data = sub(self.buf, 1, size)
    self.buf = sub(self.buf, size + 3)
    return data
end

-- POSTs `body` to `path` and reads the answer's head: status, headers, whether the body is
-- chunked; or nil and why.
function conn_mt:ask(path, body)
    local ok, err = self:post(path, body)
    if not ok then
        return nil, err
    end
    local status, headers = self:head()
    if not status then
        return nil, headers
    end
    local te = headers["transfer-encoding"]
    return status, headers, (te and lower(te):find("chunked", 1, true)) ~= nil
end

-- POSTs `body` to `path` and reads the whole answer: { status =, body = }, or nil and why.
-- The body (content-length or chunked) is at most `max_body` bytes.
function conn_mt:call(path, body, max_body)
    local status, headers, chunked = self:ask(path, body)
    if not status then
        return nil, headers
    end
    if chunked then
        local parts, n = {}, 0
        while true do
            local c, cerr = self:chunk(max_body)
            if not c then
                return nil, cerr
            end
            if c == "" then
                break
            end
            n = n + #c
            if n > max_body then
                return nil, "a response body over " .. max_body .. " bytes from " .. self.url
            end
            parts[#parts + 1] = c
        end
        return { status = status, body = concat(parts) }
    end
    local len = tonumber(headers["content-length"])
    if not len then
        return nil, "a response without a length from " .. self.url
    end
    if len > max_body then
        return nil, "a response body of " .. len .. " bytes, over " .. max_body .. " from "
            .. self.url
    end
    local b, err = self:take(len)
    if not b then
        return nil, err
    end
    return { status = status, body = b }
end

-- POSTs `body` to `path` and expects a streaming (chunked) 200 answer: true, or nil and why
-- (with the body of an answer that is not one, cut to 512 bytes).
function conn_mt:open_stream(path, body)
    local status, headers, chunked = self:ask(path, body)
    if not status then
        return nil, headers
    end
    if status ~= 200 or not chunked then
        return nil, "HTTP " .. status .. " from " .. self.url .. path .. ": "
            .. sub(self.buf, 1, 512)
    end
    self.lines = ""
    return true
end

-- The next non-empty line of what the stream's chunks gave so far: the line, false when no
-- whole line is there yet, or nil and why (a line over `max_line` bytes).
local function buffered_line(self, max_line)
    while true do
        local e = find(self.lines, "\n", 1, true)
        if not e then
            if #self.lines > max_line then
                return nil, "a watch response over max_response_bytes (" .. max_line .. ")"
            end
            return false
        end
        local s = sub(self.lines, 1, e - 1)
        self.lines = sub(self.lines, e + 1)
        if #s > max_line then
            return nil, "a watch response over max_response_bytes (" .. max_line .. ")"
        end
        if s ~= "" and s ~= "\r" then
            return s
        end
    end
end

-- The next line of the stream, taking its chunks from `next_chunk()` (a chunk's bytes, "" at
-- the stream's end, false when none is there yet, or nil and why): the line, false, or nil and
-- why.
local function stream_line(self, max_line, next_chunk)
    while true do
        local s, err = buffered_line(self, max_line)
        if s ~= false then
            return s, err
        end
        local c
        c, err = next_chunk()
        if not c then
            return c, err
        end
        if c == "" then
            return nil, "the stream from " .. self.url .. " ended"
        end
        self.lines = self.lines .. c
    end
end

-- The next line of the stream (without its newline), or nil and why: the stream ended, a read
-- failed, or a line is over `max_line` bytes. `idle()` is asked on each read timeout: true to
-- keep waiting.
function conn_mt:line(max_line, idle)
    return stream_line(self, max_line, function()
        return self:chunk(max_line + 2, idle)
    end)
end

-- A whole chunk of a chunked body already in the buffer: its bytes ("" for the last), false
-- when the buffer holds only part of one, or nil and why. Reads nothing: a chunk is taken from
-- the buffer only once all of it is there, so the framing survives a later read.
function conn_mt:buffered_chunk(max)
    local e = find(self.buf, "\r\n", 1, true)
    if not e then
        if #self.buf > 1024 then
            return nil, "a bad chunk size from " .. self.url
        end
        return false
    end
    local size, err = self:chunk_size(sub(self.buf, 1, e - 1), max)
    if not size then
        return nil, err
    end
    if size == 0 then
        return ""
    end
    if #self.buf < e + 1 + size + 2 then
        return false
    end
    local data = sub(self.buf, e + 2, e + 1 + size)
    self.buf = sub(self.buf, e + size + 4)
    return data
end

-- The next line of the stream if it has already arrived: what the buffers hold, plus what one
-- read finds waiting on the socket (it waits at most `wait_ms`). Returns the line, false when
-- no whole line is there yet (nothing is lost: a later line() or ready_line() goes on from
-- there), or nil and why (as line()).
function conn_mt:ready_line(max_line, wait_ms)
    local read = false
    return stream_line(self, max_line, function()
        local c, err = self:buffered_chunk(max_line + 2)
        if c ~= false or read then
            return c, err
        end
        read = true
        self.sock:settimeouts(self.read_ms, self.read_ms, wait_ms)
        local ok, ferr = self:fill()
        self.sock:settimeouts(self.read_ms, self.read_ms, self.read_ms)
        if not ok and ferr ~= "timeout" then
            return nil, "read from " .. self.url .. ": " .. tostring(ferr)
        end
        return self:buffered_chunk(max_line + 2)
    end)
end

return _M
