//! The LuaJIT binding (`lua/resty/router/*.lua`) against the freshly built shared object, in a
//! LuaJIT embedded through mlua. Each test runs one function of `lua/t/binding_test.lua` (the
//! binding) or `lua/t/gateway_test.lua` (the gateway helper, against a mock `ngx`) in a fresh Lua
//! state, so a failure names the Lua test and shows its traceback.

mod common;

use std::sync::OnceLock;

use mlua::{Lua, LuaOptions, StdLib};

fn cpath() -> &'static str {
    static CPATH: OnceLock<String> = OnceLock::new();
    CPATH.get_or_init(|| common::lua_cpath(&common::cpath_dir("lua")))
}

fn new_state() -> Lua {
    // SAFETY: the binding needs the `ffi` and `debug` libraries, which mlua calls unsafe.
    let lua = unsafe { Lua::unsafe_new_with(StdLib::ALL, LuaOptions::new()) };
    let package: mlua::Table = lua.globals().get("package").unwrap();
    package.set("path", common::lua_path()).unwrap();
    package.set("cpath", cpath()).unwrap();
    lua
}

fn run(module: &str, test: &str) {
    let lua = new_state();
    let chunk = format!(
        r#"
        local tests = require("{module}")
        local fn = assert(tests[{test:?}], "no Lua test named {test} in {module}")
        local ok, err = xpcall(fn, debug.traceback)
        -- Whatever the test left behind is collected here, finalizers included.
        collectgarbage()
        collectgarbage()
        if not ok then error(err, 0) end
        "#
    );
    if let Err(e) = lua.load(&chunk).set_name(test).exec() {
        panic!("Lua test {module}.{test} failed:\n{e}");
    }
    drop(lua);
}

/// One Rust test per function of a Lua test file (`lua/t/<module>.lua`), and a check that the
/// list is complete.
macro_rules! lua_tests {
    ($module:ident: $($name:ident),* $(,)?) => {
        mod $module {
            use super::{new_state, run};

            $(#[test] fn $name() { run(stringify!($module), stringify!($name)); })*

            /// Every test function of the Lua file has a Rust test above.
            #[test]
            fn every_lua_test_is_run() {
                let lua = new_state();
                let names: Vec<String> = lua
                    .load(format!(
                        r#"local t = {{}} for k in pairs(require("{}")) do t[#t + 1] = k end
                           table.sort(t) return t"#,
                        stringify!($module)
                    ))
                    .eval()
                    .unwrap();
                let mut listed = vec![$(stringify!($name).to_string()),*];
                listed.sort();
                assert_eq!(
                    names, listed,
                    "lua_tests! must list exactly the functions of {}.lua", stringify!($module)
                );
            }
        }
    };
}

lua_tests!(
    binding_test:
    schema_fields_and_types,
    schema_is_frozen_once_shared,
    schema_limits_set_get_and_errors,
    schema_limits_govern_routers_validation_and_contexts,
    router_add_and_errors,
    router_priority_and_ties,
    router_remove,
    router_settle,
    router_get_fields_and_validate,
    router_field_masks,
    router_key_and_needed_fields,
    context_add_values_batch,
    context_values_and_types,
    context_bad_values,
    multi_valued_headers,
    result_matched_values_and_captures,
    result_after_miss_and_reset,
    result_empty_matched_value_is_nil,
    lazy_captures_read_on_demand,
    lazy_captures_follow_the_context,
    lazy_result_allocates_nothing,
    context_get_values,
    many_captures,
    execute_argument_errors,
    wildcard_fields,
    request_header_names_register_nothing,
    int64_cdata_values,
    gc_any_order,
    gc_after_unload,
    schema_freed_before_router,
    reload_modules,
    workload_shaped_routes,
    router_sync_counts_and_forms,
    router_sync_errors,
    router_sync_many_errors,
    json_decoder,
    explain_report,
    explain_large_reports,
    matches_report,
    explain_and_matches_errors,
    route_expressions,
    background_sync_steps,
    background_sync_lends_a_tables_strings,
    background_sync_text,
    background_sync_supersedes,
    background_sync_chunks_and_yields,
    router_stats,
    image_published_opened_and_matched,
    image_corrupt_or_foreign_is_refused,
    image_sealed_in_memory,
    kong_api_keys_by_priority_and_id,
    kong_api_settles_on_the_builder,
);

lua_tests!(
    gateway_test:
    update_applies_new_versions_only,
    reads_only_the_fields_in_use,
    request_fields,
    segments,
    kong_request_semantics,
    bad_requests_never_raise,
    extractors_and_schema,
    limits_option,
    builder_threads_option,
    update_is_atomic_for_requests,
    large_update_changes_only_what_differs,
    two_phase_routing_reads_only_what_candidates_use,
    explain_header_is_off_by_default,
    explain_header,
    explain_summary_fits_a_header,
    explain_summary_cap_is_bytes_and_keeps_characters,
    lazy_captures_option,
    lazy_captures_are_valid_until_the_next_route,
    request_source_option,
    async_update_applies_on_route,
    async_update_applies_on_timer,
    async_refusals,
    async_supersede_orderings,
    async_overlapping_loaders,
    async_string_lists,
    updates_in_init_phases_are_applied_at_once,
    async_pushes_wait_for_the_build_in_flight,
    diff_finds_what_a_whole_list_changes,
    a_list_of_the_same_strings_crosses_nothing,
    random_changes_equal_a_fresh_build,
    stats_and_metrics,
);

lua_tests!(
    etcd_test:
    range_end_covers_the_prefix,
    a_value_is_a_route_or_a_reason,
    a_watch_response_is_one_list_of_changes,
    a_watch_line_already_there_is_read_at_once_and_a_partial_one_waits,
    a_bad_chunk_is_an_error_never_a_raise,
);
