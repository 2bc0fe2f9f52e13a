-- C declarations of libatc_router for LuaJIT's FFI, the loaded library, and the error buffer
-- the other resty.router modules share.
--
-- Invariants:
-- * The library is loaded once per Lua state and anchored in the registry for the life of the
--   state: finalizers of schemas, routers and contexts may run after every resty.router module
--   was unloaded, and LuaJIT closes a library whose handle is collected. (The library is also
--   linked with `-z nodelete`, so even a dlclose() would not unmap it.)
-- * The declarations between the markers are derived from ffi/include/atc_router.h by
--   ffi/tests/header.rs, which fails when they are stale.

local ffi = require("ffi")

-- The project's version (Cargo.toml, the C header's ATC_VERSION_*, every resty.router module;
-- ffi/tests/version.rs checks they agree).
local VERSION = "0.2.0"

local DECLS = [=[
-- BEGIN GENERATED (ffi/tests/header.rs)
static const int ATC_OK = 0;
static const int ATC_ERR_NULL = -1;
static const int ATC_ERR_UTF8 = -2;
static const int ATC_ERR_INVALID = -3;
static const int ATC_ERR_UNKNOWN_FIELD = -4;
static const int ATC_ERR_TYPE = -5;
static const int ATC_ERR_UUID = -6;
static const int ATC_ERR_BUFFER = -7;
static const int ATC_ERR_DUPLICATE = -8;
static const int ATC_ERR_SCHEMA_SHARED = -9;
static const int ATC_ERR_EXPR = -10;
static const int ATC_ERR_LIMIT = -11;
static const int ATC_ERR_SCHEMA_MISMATCH = -12;
static const int ATC_ERR_NOT_FOUND = -13;
static const int ATC_ERR_PANIC = -14;
static const int ATC_ERR_ROUTES = -15;
static const int ATC_ERR_BROKEN = -16;
static const int ATC_ERR_IMAGE = -18;
static const int ATC_TYPE_STRING = 0;
static const int ATC_TYPE_INT = 1;
static const int ATC_TYPE_IPADDR = 2;
static const int ATC_TYPE_IPCIDR = 3;
static const int ATC_TYPE_NONE = -1;
static const int ATC_LIMIT_MAX_EXPRESSION_LEN = 1;
static const int ATC_LIMIT_MAX_DEPTH = 2;
static const int ATC_LIMIT_MAX_PREDICATES = 3;
static const int ATC_LIMIT_MAX_REGEXES = 4;
static const int ATC_LIMIT_REGEX_SIZE = 5;
static const int ATC_LIMIT_REGEX_TOTAL_SIZE = 6;
static const int ATC_LIMIT_MAX_VALUES_PER_FIELD = 7;
static const int ATC_LIMIT_MAX_WILDCARD_FIELDS = 8;
static const int ATC_FIELD_INDEX_MASK = 1048575;
static const int ATC_FIELD_MASK_LAST_BIT = 63;
static const int ATC_UUID_LEN = 36;
static const int ATC_VERSION_MAJOR = 0;
static const int ATC_VERSION_MINOR = 2;
static const int ATC_VERSION_PATCH = 0;
static const int ATC_BUILD_IDLE = 0;
static const int ATC_BUILD_BUILDING = 1;
static const int ATC_BUILD_READY = 2;
static const int ATC_TEXT_COPY = 0;
static const int ATC_TEXT_BORROW = 1;
static const int ATC_ERR_NOT_READY = -17;
static const int ATC_ERR_SUPERSEDED = -19;
static const int ATC_BUILDER_NICE_DEFAULT = 19;
static const int ATC_BUILDER_IDLE = 0;
static const int ATC_BUILDER_NORMAL = 1;
static const int ATC_BUILDER_BOOST_AFTER_MS_DEFAULT = 3000;
static const int ATC_BUILDER_THREADS_MAX = 64;
static const int ATC_JSON_VERSION = 2;
static const int ATC_EXPLAIN_RULED_OUT = 1;
static const int ATC_PUBLISH_DROP_TABLES = 1;
static const int ATC_SUBSYSTEM_HTTP = 1;
static const int ATC_SUBSYSTEM_STREAM = 2;
static const int ATC_PATH_FIELD_PATH = 1;
static const int ATC_PATH_FIELD_LEN = 2;
static const int ATC_PATH_FIELD_SEGMENT = 3;
static const int ATC_PATH_FIELD_RANGE = 4;
static const int ATC_PATH_NORMALIZE = 1;
static const int ATC_SYNC_ALL_OR_NOTHING = 0;
static const int ATC_SYNC_APPLY_VALID = 1;
typedef struct atc_context atc_context;
typedef struct atc_image atc_image;
typedef struct atc_image_opening atc_image_opening;
typedef struct AtcRouteList AtcRouteList;
typedef struct atc_router atc_router;
typedef struct atc_schema atc_schema;
typedef struct {
  size_t added;
  size_t removed;
  size_t changed;
  size_t unchanged;
  size_t errors;
  size_t messages_len;
} atc_sync_report;
typedef struct {
  size_t index;
  int32_t code;
  const char *message;
  size_t message_len;
} atc_sync_error;
typedef struct {
  uint32_t field;
  int32_t value_type;
  int64_t int_value;
  const char *ptr;
  size_t len;
} atc_value;
typedef struct {
  int32_t value_type;
  int64_t int_value;
  const char *ptr;
  size_t len;
} atc_matched;
typedef struct {
  int64_t index;
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} atc_capture;
typedef struct {
  uint32_t field;
  int32_t kind;
  uint32_t from;
  uint32_t to;
} atc_path_field;
typedef struct {
  const char *id;
  size_t id_len;
  uint64_t priority;
  const char *expr;
  size_t expr_len;
  size_t position;
} atc_route;
typedef struct {
  size_t size;
  uint64_t routed;
  uint64_t not_found;
  uint64_t bad_requests;
  uint64_t updates_applied;
  uint64_t updates_refused;
  uint64_t last_update_hold_us;
  uint64_t last_build_us;
  uint64_t routes;
  int32_t broken;
} atc_stats;
const char *atc_router_version(void);
const char *atc_strerror(int32_t status);
int32_t atc_router_sync_start(atc_router *router,
                              uint64_t version,
                              AtcRouteList *list,
                              int32_t mode,
                              char *errbuf,
                              size_t *errbuf_len);
int32_t atc_router_update_start(atc_router *router,
                                uint64_t version,
                                AtcRouteList *list,
                                int32_t mode,
                                char *errbuf,
                                size_t *errbuf_len);
int32_t atc_router_sync_start_text(atc_router *router,
                                   uint64_t version,
                                   const char *text,
                                   size_t len,
                                   int32_t flags,
                                   int32_t mode,
                                   char *errbuf,
                                   size_t *errbuf_len);
int32_t atc_router_sync_state(atc_router *router, uint64_t *version);
int32_t atc_router_sync_ready(const atc_router *router);
int32_t atc_router_sync_apply(atc_router *router,
                              uint64_t *version,
                              atc_sync_report *report,
                              atc_sync_error *errors,
                              size_t *errors_len,
                              char *msgbuf,
                              size_t *msgbuf_len,
                              char *errbuf,
                              size_t *errbuf_len);
int32_t atc_builder_threads(int32_t threads);
int32_t atc_builder_priority(int32_t nice);
int32_t atc_builder_schedule(int32_t policy, uint32_t boost_after_ms);
atc_context *atc_context_new(const atc_schema *schema, char *errbuf, size_t *errbuf_len);
void atc_context_free(atc_context *context);
int32_t atc_context_reset(atc_context *context);
int32_t atc_context_field_id(const atc_context *context,
                             const char *name,
                             size_t name_len,
                             uint32_t *field_id,
                             int32_t *field_type,
                             char *errbuf,
                             size_t *errbuf_len);
int32_t atc_context_add_str(atc_context *context,
                            uint32_t field,
                            const char *value,
                            size_t value_len,
                            char *errbuf,
                            size_t *errbuf_len);
int32_t atc_context_add_int(atc_context *context,
                            uint32_t field,
                            int64_t value,
                            char *errbuf,
                            size_t *errbuf_len);
int32_t atc_context_add_ip(atc_context *context,
                           uint32_t field,
                           const char *value,
                           size_t value_len,
                           char *errbuf,
                           size_t *errbuf_len);
int32_t atc_context_add_values(atc_context *context,
                               const atc_value *values,
                               size_t n,
                               size_t *failed,
                               char *errbuf,
                               size_t *errbuf_len);
int32_t atc_context_result(atc_context *context,
                           const uint32_t *matched_field,
                           char *uuid,
                           size_t *uuid_len,
                           atc_matched *matched,
                           size_t *captures_n);
int32_t atc_context_value(atc_context *context, uint32_t field, size_t index, atc_matched *value);
int32_t atc_context_captures(const atc_context *context, atc_capture *captures, size_t *n);
int32_t atc_router_explain(const atc_router *router,
                           atc_context *context,
                           uint32_t flags,
                           char *buf,
                           size_t *buf_len,
                           char *errbuf,
                           size_t *errbuf_len);
int32_t atc_router_matches(const atc_router *router,
                           atc_context *context,
                           char *buf,
                           size_t *buf_len,
                           char *errbuf,
                           size_t *errbuf_len);
int32_t atc_router_route_expression(const atc_router *router,
                                    const char *id,
                                    size_t id_len,
                                    const char **expr,
                                    size_t *expr_len);
int32_t atc_image_share_path(const atc_image *image, char *buf, size_t *buf_len);
atc_image *atc_image_open(const atc_schema *schema,
                          const char *path,
                          size_t path_len,
                          char *errbuf,
                          size_t *errbuf_len);
atc_image_opening *atc_image_open_start(const atc_schema *schema,
                                        const char *path,
                                        size_t path_len,
                                        char *errbuf,
                                        size_t *errbuf_len);
int32_t atc_image_open_ready(const atc_image_opening *opening);
atc_image *atc_image_open_finish(atc_image_opening *opening, char *errbuf, size_t *errbuf_len);
void atc_image_free(atc_image *image);
int32_t atc_image_retire(atc_image *image, const char *path, size_t path_len);
int32_t atc_image_remove_if_unused(const char *path,
                                   size_t path_len,
                                   char *errbuf,
                                   size_t *errbuf_len);
int32_t atc_image_sweep(const char *dir,
                        size_t dir_len,
                        const char *keep,
                        size_t keep_len,
                        char *errbuf,
                        size_t *errbuf_len);
int32_t atc_router_publish_images(atc_router *router,
                                  const char *dir,
                                  size_t dir_len,
                                  int32_t flags,
                                  char *errbuf,
                                  size_t *errbuf_len);
int32_t atc_router_published(const atc_router *router,
                             uint64_t *version,
                             char *buf,
                             size_t *buf_len);
int32_t atc_kong_field(int32_t subsystem,
                       size_t index,
                       const char **name,
                       size_t *name_len,
                       int32_t *field_type);
int32_t atc_path_field_parse(const char *name, size_t name_len, atc_path_field *field);
int32_t atc_context_add_path(atc_context *context,
                             const char *path,
                             size_t path_len,
                             uint32_t flags,
                             const atc_path_field *fields,
                             size_t n,
                             char *errbuf,
                             size_t *errbuf_len);
int32_t atc_http_host(const char *value, size_t value_len, size_t *host_len, int64_t *port);
AtcRouteList *atc_route_list_new(void);
void atc_route_list_free(AtcRouteList *list);
int32_t atc_route_list_add(AtcRouteList *list,
                           const atc_route *routes,
                           size_t n,
                           char *errbuf,
                           size_t *errbuf_len);
int32_t atc_route_list_lend(AtcRouteList *list,
                            const atc_route *routes,
                            size_t n,
                            char *errbuf,
                            size_t *errbuf_len);
int32_t atc_route_list_add_unreadable(AtcRouteList *list,
                                      size_t position,
                                      const char *id,
                                      size_t id_len,
                                      const char *why,
                                      size_t why_len,
                                      char *errbuf,
                                      size_t *errbuf_len);
int32_t atc_route_list_clear(AtcRouteList *list);
int32_t atc_route_list_remove(AtcRouteList *list,
                              const atc_route *routes,
                              size_t n,
                              char *errbuf,
                              size_t *errbuf_len);
atc_router *atc_router_new(const atc_schema *schema, char *errbuf, size_t *errbuf_len);
void atc_router_free(atc_router *router);
int32_t atc_router_add(atc_router *router,
                       uint64_t priority,
                       const char *id,
                       size_t id_len,
                       const char *expr,
                       size_t expr_len,
                       char *errbuf,
                       size_t *errbuf_len);
int32_t atc_router_remove(atc_router *router,
                          const char *id,
                          size_t id_len,
                          char *errbuf,
                          size_t *errbuf_len);
int32_t atc_router_execute(const atc_router *router, atc_context *context);
int32_t atc_router_fields(const atc_router *router,
                          char *buf,
                          size_t *buf_len,
                          size_t *count);
int32_t atc_router_key_fields(const atc_router *router, uint64_t *mask);
int32_t atc_router_needed_fields(const atc_router *router, atc_context *context, uint64_t *mask);
int32_t atc_router_settle(atc_router *router);
int32_t atc_router_settle_due(const atc_router *router);
int32_t atc_router_keep_shadow(atc_router *router, int32_t keep);
int32_t atc_router_len(const atc_router *router, size_t *count);
int32_t atc_router_attach_image(atc_router *router,
                                atc_image *image,
                                atc_image **previous);
atc_schema *atc_schema_new(void);
void atc_schema_free(atc_schema *schema);
int32_t atc_schema_add_field(atc_schema *schema,
                             const char *name,
                             size_t name_len,
                             int32_t field_type,
                             char *errbuf,
                             size_t *errbuf_len);
int32_t atc_schema_set_limit(atc_schema *schema,
                             int32_t limit,
                             uint64_t value,
                             char *errbuf,
                             size_t *errbuf_len);
int32_t atc_schema_get_limit(const atc_schema *schema, int32_t limit, uint64_t *value);
int32_t atc_schema_field_type(const atc_schema *schema,
                              const char *name,
                              size_t name_len,
                              int32_t *field_type);
int32_t atc_router_validate(const atc_schema *schema,
                            const char *expr,
                            size_t expr_len,
                            char *fields,
                            size_t *fields_len,
                            size_t *fields_count,
                            char *errbuf,
                            size_t *errbuf_len);
int32_t atc_router_stats(const atc_router *router, atc_stats *out);
int32_t atc_router_count_bad_request(const atc_router *router);
int32_t atc_router_sync(atc_router *router,
                        const AtcRouteList *list,
                        int32_t mode,
                        atc_sync_report *report,
                        atc_sync_error *errors,
                        size_t *errors_len,
                        char *msgbuf,
                        size_t *msgbuf_len,
                        char *errbuf,
                        size_t *errbuf_len);
int32_t atc_router_update(atc_router *router,
                          const AtcRouteList *list,
                          int32_t mode,
                          atc_sync_report *report,
                          atc_sync_error *errors,
                          size_t *errors_len,
                          char *msgbuf,
                          size_t *msgbuf_len,
                          char *errbuf,
                          size_t *errbuf_len);
-- END GENERATED
]=]

-- LuaJIT refuses to declare a type twice, and these modules may be unloaded and required again
-- in the same state.
if not pcall(ffi.typeof, "atc_value") then
    ffi.cdef((DECLS:gsub("%-%-[^\n]*\n", "")))
end

local REGISTRY_KEY = "libatc_router (resty.router.cdefs)"

local function load_library()
    local anchor = debug and debug.getregistry and debug.getregistry() or package.loaded
    local lib = anchor[REGISTRY_KEY]
    if lib then
        return lib
    end
    local path, err = package.searchpath("libatc_router", package.cpath)
    if not path then
        error("resty.router: libatc_router not found in package.cpath" .. (err or ""), 3)
    end
    lib = ffi.load(path)
    anchor[REGISTRY_KEY] = lib
    return lib
end

local lib = load_library()

-- The modules are generated against one header (the block above) and refuse any other
-- library: a library of another version (a half-done upgrade or rollback, an old copy earlier
-- on package.cpath) would otherwise be called with declarations that may not fit it.
do
    local ok, version = pcall(function()
        return ffi.string(lib.atc_router_version())
    end)
    if not ok then
        version = "older than 0.2.0 (it has no atc_router_version)"
    end
    if version ~= VERSION then
        local path = package.searchpath("libatc_router", package.cpath) or "libatc_router"
        error("resty.router " .. VERSION .. " needs libatc_router " .. VERSION .. ", but "
            .. path .. " is " .. version .. ": install the library and the modules of one release", 2)
    end
end

-- BEGIN GENERATED VALUES (ffi/tests/header.rs)
local TYPE_NAMES = { [0] = "String", [1] = "Int", [2] = "IpAddr", [3] = "IpCidr" }
local LIMIT_NAMES = {
    "max_expression_len",
    "max_depth",
    "max_predicates",
    "max_regexes",
    "regex_size_limit",
    "regex_total_size_limit",
    "max_values_per_field",
    "max_wildcard_fields",
}
-- END GENERATED VALUES

-- Codes by name: a type's is its ATC_TYPE_* code, a limit's its place in LIMIT_NAMES (the
-- ATC_LIMIT_* codes count from 1 in that order; ffi/tests/limits.rs checks it).
local TYPE_CODES, LIMIT_CODES = {}, {}
for code, name in pairs(TYPE_NAMES) do
    TYPE_CODES[name] = code
end
for code, name in ipairs(LIMIT_NAMES) do
    LIMIT_CODES[name] = code
end

local ERRBUF_SIZE = 4096
local errbuf = ffi.new("char[?]", ERRBUF_SIZE)
local errlen = ffi.new("size_t[1]")

local _M = {
    _VERSION = VERSION,
    lib = lib,
    errbuf = errbuf,
    errlen = errlen,
    ERRBUF_SIZE = ERRBUF_SIZE,
    TYPE_NAMES = TYPE_NAMES,
    TYPE_CODES = TYPE_CODES,
    -- The schema's limits by the names of the core's `Limits` (SECURITY.md), in that order, and
    -- their ATC_LIMIT_* codes.
    LIMIT_NAMES = LIMIT_NAMES,
    LIMIT_CODES = LIMIT_CODES,
}

-- Arms the shared error buffer before a call that may fail.
function _M.arm()
    errlen[0] = ERRBUF_SIZE
end

-- The message of a failed call: the error buffer's text, or the status's description when the
-- call left no text.
function _M.message(status)
    local n = tonumber(errlen[0])
    if n > 0 and n < ERRBUF_SIZE then
        return ffi.string(errbuf, n)
    end
    return ffi.string(lib.atc_strerror(status))
end

-- The buffer a field mask (uint64_t) is written into by the library, read back as two plain
-- 32-bit numbers (a uint64_t read from LuaJIT is a boxed cdata, which a request path would
-- allocate): pass `maskbuf` to the call, then return `_M.mask_halves()`.
local maskbuf = ffi.new("uint64_t[1]")
local mask32 = ffi.cast("uint32_t *", maskbuf)
local LO, HI = 0, 1
if not ffi.abi("le") then
    LO, HI = 1, 0
end
_M.maskbuf = maskbuf

-- The mask last written into `maskbuf`, as its halves lo, hi.
function _M.mask_halves()
    return mask32[LO], mask32[HI]
end

-- A route priority as uint64_t: a non-negative integral Lua number that a double represents
-- exactly, or a 64-bit integer cdata.
function _M.priority(p)
    if type(p) == "number" then
        if p >= 0 and p <= 2 ^ 53 and p == math.floor(p) then
            return p
        end
        return nil, "priority must be an integer between 0 and 2^53, got " .. tostring(p)
    end
    if type(p) == "cdata" and (ffi.istype("uint64_t", p) or (ffi.istype("int64_t", p) and p >= 0)) then
        return ffi.cast("uint64_t", p)
    end
    return nil, "priority must be a non-negative integer, got " .. type(p)
end

-- A priority as Kong's API takes it (add_matcher): what _M.priority takes, and also a negative
-- integral number, which Kong's transform hands over for some routes (its lshift_uint64 shifts
-- a Lua number, in 32 bits) and Kong's binding passes to its C library as LuaJIT converts a
-- number to uint64_t. The same conversion here, so such a route gets the priority it gets in
-- Kong's library and is ordered as there.
function _M.kong_priority(p)
    if type(p) == "number" and p < 0 and p >= -2 ^ 63 and p == math.floor(p) then
        return ffi.cast("uint64_t", p)
    end
    return _M.priority(p)
end

return _M
