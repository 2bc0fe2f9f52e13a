//! On the gateway-shaped tables of WORKLOAD.md, the indexed matcher agrees with the reference
//! evaluator on every request of every mix, and requests reach the route they were built for.

use std::sync::Arc;

use atc_router::{Context, Router, Schema, Uuid};
use atc_workload::{requests, Mix, Table};

mod common;
use common::{workload_schema as schema, workload_value as value};

fn router(table: &Table, schema: &Arc<Schema>) -> Router {
    let mut r = Router::new(schema.clone());
    for route in &table.routes {
        r.add(
            Uuid::from_bytes(route.id),
            route.priority,
            &route.expression,
        )
        .unwrap_or_else(|e| panic!("{}\n{e}", route.expression));
    }
    r
}

fn check(n: usize, catch_all: bool, per_mix: usize) {
    let schema = schema();
    let table = Table::generate(n, 7, catch_all);
    let router = router(&table, &schema);
    assert!(
        router.unindexed_count() * 20 <= router.len(),
        "{} of {} routes unindexed",
        router.unindexed_count(),
        router.len()
    );
    let mut ctx = Context::new(schema.clone());
    for mix in Mix::all() {
        for req in requests(&table, mix, per_mix, 11) {
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
            let want = req.target.map(|t| Uuid::from_bytes(table.routes[t].id));
            let catch_all_id = table
                .catch_all_index()
                .map(|i| Uuid::from_bytes(table.routes[i].id));
            let got = fast_out.map(|o| o.0);
            match want {
                Some(id) => assert_eq!(got, Some(id), "{mix:?} {req:?}"),
                None => assert_eq!(got, catch_all_id, "{mix:?} {req:?}"),
            }
        }
    }
}

#[test]
fn every_mix_on_a_1k_table_without_catch_all() {
    check(1_000, false, 400);
}

#[test]
fn every_mix_on_a_5k_table_with_catch_all() {
    check(5_000, true, 200);
}
