/* A C program using atc_router.h: compiled and run by ffi/tests/c_program.rs. */
#include <stdio.h>
#include <string.h>

#include "atc_router.h"

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            return 1;                                                            \
        }                                                                        \
    } while (0)

#define S(lit) lit, sizeof(lit) - 1

int main(void) {
    char err[256];
    size_t errlen;

    /* The library is the release this header was generated for. */
    char header_version[32];
    snprintf(header_version, sizeof header_version, "%d.%d.%d", ATC_VERSION_MAJOR,
             ATC_VERSION_MINOR, ATC_VERSION_PATCH);
    CHECK(strcmp(atc_router_version(), header_version) == 0);

    atc_schema *schema = atc_schema_new();
    CHECK(schema != NULL);
    CHECK(atc_schema_add_field(schema, S("http.path"), ATC_TYPE_STRING, NULL, NULL) == ATC_OK);
    CHECK(atc_schema_add_field(schema, S("net.dst.port"), ATC_TYPE_INT, NULL, NULL) == ATC_OK);
    errlen = sizeof err;
    CHECK(atc_schema_add_field(schema, S("http.path"), ATC_TYPE_INT, err, &errlen) == ATC_ERR_DUPLICATE);
    CHECK(errlen > 0 && err[errlen] == '\0');

    atc_router *router = atc_router_new(schema, NULL, NULL);
    atc_context *ctx = atc_context_new(schema, NULL, NULL);
    atc_schema_free(schema); /* router and context keep it alive */
    CHECK(router != NULL && ctx != NULL);

    const char *id = "a8f2c1e4-0000-4000-8000-000000000001";
    const char *expr = "http.path ~ \"^/users/(?<id>\\\\d+)$\" && net.dst.port == 443";
    errlen = sizeof err;
    int32_t rc = atc_router_add(router, 10, id, strlen(id), expr, strlen(expr), err, &errlen);
    if (rc != ATC_OK) {
        fprintf(stderr, "add: %s\n", err);
        return 1;
    }

    uint32_t path, port;
    CHECK(atc_context_field_id(ctx, S("http.path"), &path, NULL, NULL, NULL) == ATC_OK);
    CHECK(atc_context_field_id(ctx, S("net.dst.port"), &port, NULL, NULL, NULL) == ATC_OK);

    for (int round = 0; round < 3; round++) {
        atc_value values[2] = {
            {.field = path, .value_type = ATC_TYPE_STRING, .ptr = "/users/42", .len = 9},
            {.field = port, .value_type = ATC_TYPE_INT, .int_value = 443},
        };
        size_t failed;
        CHECK(atc_context_reset(ctx) == ATC_OK);
        CHECK(atc_context_add_values(ctx, values, 2, &failed, NULL, NULL) == ATC_OK);
        CHECK(atc_router_execute(router, ctx) == 1);

        char uuid[ATC_UUID_LEN];
        size_t uuid_len = sizeof uuid;
        atc_matched matched;
        size_t ncaps;
        CHECK(atc_context_result(ctx, &path, uuid, &uuid_len, &matched, &ncaps) == 1);
        CHECK(uuid_len == ATC_UUID_LEN && memcmp(uuid, id, ATC_UUID_LEN) == 0);
        CHECK(matched.value_type == ATC_TYPE_STRING && matched.len == 9);
        CHECK(memcmp(matched.ptr, "/users/42", 9) == 0);
        CHECK(ncaps == 3);

        atc_capture caps[3];
        size_t n = 3;
        CHECK(atc_context_captures(ctx, caps, &n) == ATC_OK && n == 3);
        int named = 0;
        for (size_t i = 0; i < n; i++) {
            if (caps[i].index < 0) {
                named = caps[i].name_len == 2 && memcmp(caps[i].name, "id", 2) == 0 &&
                        caps[i].value_len == 2 && memcmp(caps[i].value, "42", 2) == 0;
            }
        }
        CHECK(named);
    }

    char fields[64];
    size_t fields_len = 4, count;
    CHECK(atc_router_fields(router, fields, &fields_len, &count) == ATC_ERR_BUFFER);
    CHECK(fields_len == sizeof("http.path") + sizeof("net.dst.port"));
    CHECK(atc_router_fields(router, fields, &fields_len, &count) == ATC_OK && count == 2);
    CHECK(strcmp(fields, "http.path") == 0);

    /* Sync to a whole list: the route above unchanged, one new, one invalid (refused). */
    const char *id2 = "a8f2c1e4-0000-4000-8000-000000000002";
    const char *expr2 = "http.path ^= \"/static/\"";
    atc_route list[2] = {
        {.id = id, .id_len = strlen(id), .priority = 10, .expr = expr, .expr_len = strlen(expr)},
        {.id = id2, .id_len = strlen(id2), .priority = 5, .expr = expr2, .expr_len = strlen(expr2)},
    };
    AtcRouteList *routes_list = atc_route_list_new();
    CHECK(routes_list != NULL);
    CHECK(atc_route_list_add(routes_list, list, 2, NULL, NULL) == ATC_OK);
    atc_sync_report report;
    atc_sync_error errors[2];
    size_t nerrors = 2;
    char messages[512];
    size_t messages_len = sizeof messages;
    CHECK(atc_router_sync(router, routes_list, ATC_SYNC_ALL_OR_NOTHING, &report, errors, &nerrors,
                          messages, &messages_len, NULL, NULL) == ATC_OK);
    CHECK(report.added == 1 && report.unchanged == 1 && report.errors == 0 && nerrors == 0);
    list[1].expr_len = 5; /* "http." does not parse */
    CHECK(atc_route_list_clear(routes_list) == ATC_OK);
    CHECK(atc_route_list_add(routes_list, list, 2, NULL, NULL) == ATC_OK);
    nerrors = 2;
    messages_len = sizeof messages;
    CHECK(atc_router_sync(router, routes_list, ATC_SYNC_ALL_OR_NOTHING, &report, errors, &nerrors,
                          messages, &messages_len, NULL, NULL) == ATC_ERR_ROUTES);
    CHECK(report.errors == 1 && nerrors == 1 && errors[0].index == 1);
    CHECK(errors[0].code == ATC_ERR_EXPR && errors[0].message != NULL);
    CHECK(strncmp(errors[0].message, "line 1", 6) == 0);
    /* A list of changes: the invalid route's id taken out, the rest stays. */
    CHECK(atc_route_list_clear(routes_list) == ATC_OK);
    CHECK(atc_route_list_remove(routes_list, &list[1], 1, NULL, NULL) == ATC_OK);
    CHECK(atc_router_update(router, routes_list, ATC_SYNC_ALL_OR_NOTHING, &report, NULL, NULL,
                            NULL, NULL, NULL, NULL) == ATC_OK);
    CHECK(report.removed == 1 && report.unchanged == 1);
    atc_route_list_free(routes_list);
    size_t routes;
    CHECK(atc_router_len(router, &routes) == ATC_OK && routes == 1);

    /* Explain the last request: size first, then fetch (JSON, not NUL-terminated). */
    size_t need = 0;
    CHECK(atc_router_explain(router, ctx, ATC_EXPLAIN_RULED_OUT, NULL, &need, NULL, NULL) ==
          ATC_ERR_BUFFER);
    char report_buf[4096];
    CHECK(need > 0 && need <= sizeof report_buf);
    size_t report_len = sizeof report_buf;
    CHECK(atc_router_explain(router, ctx, ATC_EXPLAIN_RULED_OUT, report_buf, &report_len, NULL,
                             NULL) == ATC_OK);
    char version[32];
    snprintf(version, sizeof version, "{\"version\":%d,", ATC_JSON_VERSION);
    CHECK(report_len == need && strncmp(report_buf, version, strlen(version)) == 0);
    report_len = sizeof report_buf;
    CHECK(atc_router_matches(router, ctx, report_buf, &report_len, NULL, NULL) == ATC_OK);
    const char *text;
    size_t text_len;
    CHECK(atc_router_route_expression(router, id, strlen(id), &text, &text_len) == ATC_OK);
    CHECK(text_len == strlen(expr) && memcmp(text, expr, text_len) == 0);

    /* Counters for a metrics endpoint: 3 requests routed, an add, a sync and an update applied,
       a sync refused; `size` says which fields the library filled. */
    atc_stats stats = {.size = sizeof stats};
    CHECK(atc_router_stats(router, &stats) == ATC_OK && stats.size <= sizeof stats);
    CHECK(stats.routed == 3 && stats.not_found == 0 && stats.routes == 1 && !stats.broken);
    CHECK(stats.updates_applied == 3 && stats.updates_refused == 1);

    CHECK(strcmp(atc_strerror(ATC_ERR_BUFFER), "the output buffer is too small") == 0);
    atc_context_free(ctx);
    atc_router_free(router);
    puts("ok");
    return 0;
}
