-- resty.router.image: tables shared by the workers of a node. One worker's router puts each
-- table it builds in an image sealed in memory (router:publish_images()); every worker maps it
-- read-only and routes from it, without a copy of its own. This module opens and retires
-- images; a router routes from one once it is attached (router:attach_image), with the same
-- calls as from its own table (execute, two-phase matching, explain, matches, len).
--
--   local image = require("resty.router.image")
--   local img = assert(image.open(schema, path))      -- maps and checks it (blocking)
--   local job = assert(image.open_start(schema, path)) -- the same on a thread of its own
--   if job:ready() then img, err = job:finish() end     -- between two requests: O(1)
--   local path = img:share_path() -- the path another worker opens it by, while this one holds it
--   local old = assert(r:attach_image(img))           -- r routes from img; old: the one before
--   if old then old:retire() end                      -- unmapped on a thread
--
-- An image's regexes are compiled in this process, each by the first request that evaluates
-- it; open_start's thread first takes those an image of this worker already compiled (the
-- table in force), so after a push only regexes the worker never compiled are left to compile.
--
-- Invariants:
-- * A refused image (gone, corrupt, truncated, unsealed, another library version or schema)
--   gives nil and the reason; nothing the caller holds changes.
-- * Nothing done to an image after it was opened reaches the worker: a shared image is sealed
--   (the kernel refuses every change), an image file is copied when opened.
-- * The mapping lives as long as the Lua object (a finalizer frees it) or until free(); once
--   attached, as long as the router routes from it (the object is then emptied). An opening's
--   thread is joined by finish() or by the opening's finalizer.

local ffi = require("ffi")
local cdefs = require("resty.router.cdefs")

local lib = cdefs.lib
local arm, message = cdefs.arm, cdefs.message
local errbuf, errlen = cdefs.errbuf, cdefs.errlen

local type, tonumber = type, tonumber

local _M = {}
_M._VERSION = "0.2.0"

local img_mt = {}
img_mt.__index = img_mt
local job_mt = {}
job_mt.__index = job_mt

local function check_schema(schema, fname)
    if type(schema) ~= "table" or schema.ptr == nil then
        error("bad argument #1 to '" .. fname .. "' (schema expected)", 3)
    end
end

-- The Lua object owning the image handle `p` (freed by its finalizer).
function _M.wrap(p, schema)
    return setmetatable({ ptr = ffi.gc(p, lib.atc_image_free), schema = schema }, img_mt)
end
local wrap = _M.wrap

-- Maps the image at `path` (a sealed image's path, or an image file, which is copied) and
-- checks it whole as a table of `schema`'s fields: the image, or nil and why. Holds the caller for the check (milliseconds at 100,000
-- routes): between requests, use open_start.
function _M.open(schema, path)
    check_schema(schema, "open")
    if type(path) ~= "string" then
        return nil, "path must be a string, got " .. type(path)
    end
    arm()
    local p = lib.atc_image_open(schema.ptr, path, #path, errbuf, errlen)
    if p == nil then
        return nil, message(lib.ATC_ERR_IMAGE)
    end
    return wrap(p, schema)
end

-- Starts mapping and checking `path` on a thread of its own: an opening (job:ready(),
-- job:finish()), or nil and why.
function _M.open_start(schema, path)
    check_schema(schema, "open_start")
    if type(path) ~= "string" then
        return nil, "path must be a string, got " .. type(path)
    end
    arm()
    local p = lib.atc_image_open_start(schema.ptr, path, #path, errbuf, errlen)
    if p == nil then
        return nil, message(lib.ATC_ERR_IMAGE)
    end
    -- An opening dropped unfinished is finished (and its image freed) by the collector.
    local gc = function(q)
        lib.atc_image_free(lib.atc_image_open_finish(q, nil, nil))
    end
    return setmetatable({ ptr = ffi.gc(p, gc), schema = schema, path = path }, job_mt)
end

-- Whether the opening is done (finish() then returns at once).
function job_mt:ready()
    return self.ptr ~= nil and lib.atc_image_open_ready(self.ptr) == 1
end

-- The image (waiting for the opening if it is not done), or nil and why. Once only.
function job_mt:finish()
    local p = self.ptr
    if p == nil then
        return nil, "resty.router.image: opening already finished"
    end
    self.ptr = nil
    ffi.gc(p, nil)
    arm()
    local r = lib.atc_image_open_finish(p, errbuf, errlen)
    if r == nil then
        return nil, message(lib.ATC_ERR_IMAGE)
    end
    return wrap(r, self.schema)
end

local path_cap = 256
local path_buf = ffi.new("char[?]", path_cap)
local path_len = ffi.new("size_t[1]")

-- The path another worker of this user opens this image by while this one holds it (a sealed
-- image's), or nil for an image read from a file.
function img_mt:share_path()
    path_len[0] = path_cap
    local rc = lib.atc_image_share_path(self.ptr, path_buf, path_len)
    if rc == lib.ATC_ERR_BUFFER then
        path_cap = tonumber(path_len[0])
        path_buf = ffi.new("char[?]", path_cap)
        path_len[0] = path_cap
        rc = lib.atc_image_share_path(self.ptr, path_buf, path_len)
    end
    if rc ~= 0 then
        return nil
    end
    return ffi.string(path_buf, path_len[0])
end

-- Unmaps now rather than when the collector runs. The object is unusable afterwards.
function img_mt:free()
    local p = self.ptr
    if p ~= nil then
        self.ptr = nil
        ffi.gc(p, nil)
        lib.atc_image_free(p)
    end
end

-- Frees the image on a thread of its own, then removes the image file `path`
-- (optional) unless a process is reading it: unmapping a large image never holds the caller.
-- The object is unusable afterwards.
function img_mt:retire(path)
    local p = self.ptr
    if p ~= nil then
        self.ptr = nil
        ffi.gc(p, nil)
        path = path or ""
        lib.atc_image_retire(p, path, #path)
    end
end

-- Removes the image file at `path` unless a process is reading it: true (removed or gone),
-- false (being read), or nil and why.
function _M.remove_if_unused(path)
    arm()
    local rc = lib.atc_image_remove_if_unused(path, #path, errbuf, errlen)
    if rc < 0 then
        return nil, message(rc)
    end
    return rc == 1
end

-- Removes every image file of `dir` no process is reading but `keep` (a file name, or nil):
-- the number removed, or nil and why.
function _M.sweep(dir, keep)
    keep = keep or ""
    arm()
    local rc = lib.atc_image_sweep(dir, #dir, keep, #keep, errbuf, errlen)
    if rc < 0 then
        return nil, message(rc)
    end
    return rc
end

return _M
