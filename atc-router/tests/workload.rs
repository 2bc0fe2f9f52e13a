//! On the gateway-shaped tables of docs/workload.md (every family, and the mixed table), the indexed
//! matcher agrees with the reference evaluator on every request of every mix (route, matched
//! path, captures). A hit request is routed to the route it was built for or, where routes share
//! keys, to one before it in routing order; a miss or miss-keys request to nothing but the
//! catch-all.

use atc_router::{Context, Uuid};
use atc_workload::{requests, Family, Mix, Table};
use std::collections::HashMap;

mod common;
use common::{workload_router as router, workload_schema as schema, workload_value as value};

fn check(table: &Table, per_mix: usize) {
    let schema = schema();
    let router = router(table, &schema);
    assert!(
        router.unindexed_count() * 20 <= router.len(),
        "{} of {} routes unindexed",
        router.unindexed_count(),
        router.len()
    );
    let position: HashMap<Uuid, usize> = table
        .priority_order()
        .into_iter()
        .enumerate()
        .map(|(p, i)| (Uuid::from_bytes(table.routes[i].id), p))
        .collect();
    let catch_all_id = table
        .catch_all_index()
        .map(|i| Uuid::from_bytes(table.routes[i].id));
    let mut ctx = Context::new(schema.clone());
    for mix in Mix::all() {
        for req in requests(table, mix, per_mix, 11) {
            ctx.reset();
            for (f, v) in &req.fields {
                ctx.add_value(f, value(v)).unwrap();
            }
            let fast = router.execute(&mut ctx);
            let fast_out = ctx.result().map(|m| {
                (
                    m.id(),
                    m.matched_value("http.path").map(|v| v.to_string()),
                    m.captures_map(),
                )
            });
            let slow = router.execute_reference(&mut ctx);
            let slow_out = ctx.result().map(|m| {
                (
                    m.id(),
                    m.matched_value("http.path").map(|v| v.to_string()),
                    m.captures_map(),
                )
            });
            assert_eq!(fast, slow, "{mix:?} {req:?}");
            assert_eq!(fast_out, slow_out, "{mix:?} {req:?}");
            let got = fast_out.map(|o| o.0);
            match req.target {
                Some(t) => {
                    let want = Uuid::from_bytes(table.routes[t].id);
                    let got = got.unwrap_or_else(|| panic!("{mix:?} unrouted: {req:?}"));
                    assert!(
                        got == want || position[&got] < position[&want],
                        "{mix:?} {req:?} went to a route after its target"
                    );
                }
                None => assert_eq!(got, catch_all_id, "{mix:?} {req:?}"),
            }
        }
    }
}

#[test]
fn every_mix_on_a_1k_mixed_table_without_catch_all() {
    check(&Table::generate(1_000, 7, false), 400);
}

#[test]
fn every_mix_on_a_5k_mixed_table_with_catch_all() {
    check(&Table::generate(5_000, 7, true), 200);
}

#[test]
fn every_mix_on_each_family() {
    for family in Family::all() {
        if family != Family::Mixed {
            check(&Table::family(family, 1_000, 8), 60);
            check(&Table::family(family, 300, 9).with_catch_all(), 30);
        }
    }
}
