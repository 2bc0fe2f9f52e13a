//! Table-level target: the input decodes (`atc_testkit::tables::decode`) into a route table of
//! up to 64 routes over every condition of the testkit's gateway-shaped tables and its scale
//! shapes (headers of their own whose names share prefixes, hosts, methods and ports as `||`,
//! `in` and `not in`, path prefixes, exact paths, path regexes with parameters, suffixes,
//! `contains`, networks, `!`, `||`, nesting up to 250 levels, sets of up to 300 elements, long
//! and Unicode regexes), then up to 32 changes (adds, removes, changes by sync, syncs) and up to
//! 16 requests (built for a route, or from the pools). After the table is loaded and after every
//! change, `Router::execute` must give every request what `Router::execute_reference` gives:
//! matched or not, route, matched path and host, captures (`atc_testkit::table_check`, the
//! harness of `testkit/tests/index_equivalence.rs`).
#![no_main]

use arbitrary::Unstructured;
use atc_testkit::{table_check, tables};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(case) = tables::decode(&mut Unstructured::new(data)) else {
        return;
    };
    let router = table_check::router(&tables::schema());
    table_check::churn(router, case.table, case.ops, &case.reqs);
});
