//! The index finds what the reference evaluator finds, on gateway-shaped tables
//! (`atc_testkit::tables`: one host behind most routes, method sets, ports, tenants, path
//! parameters, suffixes, `contains`, networks, `!`, `||`) and through churn long enough to split
//! and collapse every kind of node: after every add, remove, change and sync, every request gets
//! the same route, matched values and captures from `Router::execute` as from
//! `Router::execute_reference`.
//!
//! Scale: tables of thousands of routes with a field per route, nesting near the parser's limit,
//! sets of thousands of elements and long Unicode regexes (`tables::scale_table_strategy`), and
//! the workload's stress families (`atc_workload::Family::stress`), through churn too: a few
//! cases each, so that a debug build runs them in seconds.
//!
//! `PROPTEST_CASES=N` raises the number of cases.

use std::sync::Arc;

use atc_router::{RouteSpec, Router, Schema, SyncMode, Uuid, Value};
use atc_testkit::table_check::{check, check_one, churn, id, router, Req};
use atc_testkit::tables::{self, RouteShape};
use atc_workload::{Family, Mix};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn reqs_strategy() -> impl Strategy<Value = Vec<Req>> {
    prop::collection::vec(
        (
            any::<usize>(),
            any::<u64>(),
            any::<[u64; 6]>(),
            prop::bool::weighted(0.3),
        ),
        8..48,
    )
}

proptest! {
    #![proptest_config(Config { cases: cases(96), ..Config::default() })]

    /// Tables added route by route (each split chosen from the routes a node held when it
    /// grew) and the same tables loaded whole (every split chosen from all of its routes).
    #[test]
    fn the_index_finds_what_the_reference_finds(
        table in tables::table_strategy(1..160),
        reqs in reqs_strategy(),
    ) {
        let schema = tables::schema();
        let texts: Vec<String> = table.routes.iter().map(RouteShape::render).collect();
        let mut one_by_one = Router::new(schema.clone());
        for (i, (r, text)) in table.routes.iter().zip(&texts).enumerate() {
            one_by_one.add(id(i), r.priority, text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        let specs: Vec<RouteSpec<'_>> = table
            .routes
            .iter()
            .zip(&texts)
            .enumerate()
            .map(|(i, (r, text))| RouteSpec { id: id(i), priority: r.priority, expression: text })
            .collect();
        let mut whole = Router::new(schema.clone());
        whole.sync(&specs, SyncMode::AllOrNothing).unwrap();
        // The flat index from 8 routes, written again every 4 changes: a table added route by
        // route is matched from flat forms of every size, each with an overlay of 0 to 3 routes.
        let mut flat = Router::new(schema.clone());
        flat.set_flat_policy(8, 4);
        for (i, (r, text)) in table.routes.iter().zip(&texts).enumerate() {
            flat.add(id(i), r.priority, text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        check(&one_by_one, &schema, &table, &reqs);
        check(&whole, &schema, &table, &reqs);
        check(&flat, &schema, &table, &reqs);
    }

    /// Churn: adds, removes, changes and syncs, checked after every step.
    #[test]
    fn churn_keeps_every_route_reachable(
        initial in tables::table_strategy(0..100),
        ops in tables::ops_strategy(1..60),
        reqs in reqs_strategy(),
    ) {
        churn(Router::new(tables::schema()), initial, ops, &reqs);
    }

    /// Churn through the flat index: from 4 routes, written again every 6 changes, so that
    /// removed base routes, reused slots and overlay routes meet in every step.
    #[test]
    fn churn_through_the_flat_index_keeps_every_route_reachable(
        initial in tables::table_strategy(0..100),
        ops in tables::ops_strategy(1..60),
        reqs in reqs_strategy(),
    ) {
        let mut router = Router::new(tables::schema());
        router.set_flat_policy(4, 6);
        churn(router, initial, ops, &reqs);
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(3), ..Config::default() })]

    /// Thousands of routes, most on a field of their own, some nested near the parser's limit,
    /// with sets of thousands of elements and a few long Unicode regexes: added route by route
    /// and loaded whole.
    #[test]
    fn the_index_finds_what_the_reference_finds_at_scale(
        table in tables::scale_table_strategy(1000..2000, 3),
        reqs in reqs_strategy(),
    ) {
        let schema = tables::schema();
        let texts: Vec<String> = table.routes.iter().map(RouteShape::render).collect();
        let mut one_by_one = router(&schema);
        for (i, (r, text)) in table.routes.iter().zip(&texts).enumerate() {
            one_by_one.add(id(i), r.priority, text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        let specs: Vec<RouteSpec<'_>> = table
            .routes
            .iter()
            .zip(&texts)
            .enumerate()
            .map(|(i, (r, text))| RouteSpec { id: id(i), priority: r.priority, expression: text })
            .collect();
        let mut whole = router(&schema);
        whole.sync(&specs, SyncMode::AllOrNothing).unwrap();
        let hits = check(&one_by_one, &schema, &table, &reqs);
        prop_assert_eq!(hits, check(&whole, &schema, &table, &reqs));
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(2), ..Config::default() })]

    /// Churn on a scale table: adds of routes on new fields, removes, changes and syncs.
    #[test]
    fn churn_at_scale(
        initial in tables::scale_table_strategy(1000..2000, 2),
        ops in tables::scale_ops_strategy(1..12, 10_000),
        reqs in prop::collection::vec(
            (any::<usize>(), any::<u64>(), any::<[u64; 6]>(), prop::bool::weighted(0.3)),
            6..12,
        ),
    ) {
        churn(router(&tables::schema()), initial, ops, &reqs);
    }
}

/// The generator reaches the index: most requests built for a route match, and large tables
/// are split by every kind of key (regexes are never a key: see `KeyKind::Regex`).
#[test]
fn generated_tables_exercise_the_index() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let schema = tables::schema();
    let mut hits = 0;
    let mut summary = String::new();
    for _ in 0..8 {
        let table = tables::table_strategy(200..201)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let mut router = Router::new(schema.clone());
        for (i, r) in table.routes.iter().enumerate() {
            router.add(id(i), r.priority, &r.render()).unwrap();
        }
        let reqs: Vec<Req> = (0..200)
            .map(|i| (i, i as u64 * 7, [i as u64; 6], false))
            .collect();
        hits += check(&router, &schema, &table, &reqs);
        summary.push_str(&router.index_summary());
    }
    assert!(hits > 8 * 200 / 2, "{hits} of 1600 requests matched");
    for kind in ["Exact", "Path", "Prefix", "Suffix", "Cidr", "Contains"] {
        assert!(
            summary.contains(kind),
            "no split by {kind} keys:\n{summary}"
        );
    }
}

/// A key set that grows past what a small map keeps as a list and shrinks back (the index's
/// exact maps: header values, the next path segment of prefixes and of path patterns): after
/// every add and every remove, every request gets the reference's answer.
#[test]
fn maps_that_grow_and_shrink_keep_every_key() {
    let schema = tables::schema();
    let shapes: [fn(usize) -> String; 3] = [
        |k| format!(r#"http.host == "api.example.com" && http.headers.x_tenant == "t{k}""#),
        |k| format!(r#"http.path ^= "/svc{k}/""#),
        |k| format!(r#"http.path ~ "^/api/s{k}/[0-9]+$""#),
    ];
    let requests = |k: usize| -> Vec<Vec<(String, Value)>> {
        let s = |x: String| Value::String(x);
        vec![
            vec![
                ("http.host".into(), s("api.example.com".into())),
                ("http.headers.x_tenant".into(), s(format!("t{k}"))),
            ],
            vec![("http.path".into(), s(format!("/svc{k}/x")))],
            vec![("http.path".into(), s(format!("/api/s{k}/42")))],
        ]
    };
    const KEYS: usize = 24;
    let check_all = |router: &Router| {
        for k in 0..KEYS + 1 {
            for values in requests(k) {
                check_one(router, &schema, &values);
            }
        }
    };
    let mut router = Router::new(schema.clone());
    let mut ids = Vec::new();
    for k in 0..KEYS {
        for (s, shape) in shapes.iter().enumerate() {
            let i = ids.len();
            router.add(id(i), (k * 3 + s) as u64, &shape(k)).unwrap();
            ids.push(id(i));
        }
        check_all(&router);
    }
    // Removed from the middle out, so the maps shrink with keys on both sides left.
    ids.sort_by_key(|u| u.as_u128() % 7);
    for u in ids {
        assert!(router.remove(u));
        check_all(&router);
    }
}

/// The schema the workload's tables are written against: Kong's HTTP fields.
fn workload_schema() -> Arc<Schema> {
    Arc::new(atc_router::request::http_schema())
}

fn workload_values(req: &atc_workload::Request) -> Vec<(String, Value)> {
    req.fields
        .iter()
        .map(|(f, v)| {
            let v = match v {
                atc_workload::Value::Str(s) => Value::String(s.clone()),
                atc_workload::Value::Int(i) => Value::Int(*i),
                atc_workload::Value::Ip(a) => Value::IpAddr(*a),
            };
            (f.clone(), v)
        })
        .collect()
}

fn workload_specs(t: &atc_workload::Table) -> Vec<RouteSpec<'_>> {
    t.routes
        .iter()
        .map(|r| RouteSpec {
            id: Uuid::from_bytes(r.id),
            priority: r.priority,
            expression: &r.expression,
        })
        .collect()
}

/// Every request of every mix of `table`, and those of `also`, get the reference's answer;
/// returns how many matched.
fn check_workload(
    router: &Router,
    schema: &Arc<Schema>,
    table: &atc_workload::Table,
    also: &[atc_workload::Table],
) -> usize {
    let mut hits = 0;
    for t in std::iter::once(table).chain(also) {
        for mix in Mix::all() {
            for req in atc_workload::requests(t, mix, 3, 7) {
                hits += usize::from(check_one(router, schema, &workload_values(&req)));
            }
        }
    }
    hits
}

/// The workload's stress families (a header per route, unanchored and Unicode regexes on long
/// paths, alternations of hundreds of paths, long hosts of their own): built route by route and by one sync, then
/// churned (a tenth of the routes changed by sync, routes added and removed one by one, a sync
/// back), every mix's requests checked after every step, those of the table before the step
/// too.
#[test]
fn stress_families_match_the_reference_through_churn() {
    let schema = workload_schema();
    for family in Family::stress() {
        // a debug build compiles Unicode `\w{30}` in a tenth of a second, twice (reference)
        let n = match family {
            Family::FieldPerRoute | Family::LongHosts => 2000,
            Family::Alternations => 60,
            _ => 8,
        };
        let table = atc_workload::Table::family(family, n, 5);
        let mut added = router(&schema);
        for r in &table.routes {
            added
                .add(Uuid::from_bytes(r.id), r.priority, &r.expression)
                .unwrap_or_else(|e| panic!("{}: {e}", r.expression));
        }
        let mut synced = router(&schema);
        synced
            .sync(&workload_specs(&table), SyncMode::AllOrNothing)
            .unwrap();
        let hits = check_workload(&added, &schema, &table, &[]);
        assert_eq!(hits, check_workload(&synced, &schema, &table, &[]));
        assert!(hits >= 4 * 3, "{family:?}: {hits} hits");

        // churn on the synced router
        let changed = table.with_changes((n / 10).max(1), 3);
        synced
            .sync(&workload_specs(&changed), SyncMode::AllOrNothing)
            .unwrap();
        check_workload(&synced, &schema, &changed, std::slice::from_ref(&table));
        let mut grown = changed.clone();
        for seed in 0..2 {
            let r = grown.extra_route(seed);
            synced
                .add(Uuid::from_bytes(r.id), r.priority, &r.expression)
                .unwrap();
            grown.routes.push(r);
            check_workload(&synced, &schema, &grown, &[]);
        }
        for r in table.routes.iter().step_by(3).take(2) {
            assert!(synced.remove(Uuid::from_bytes(r.id)));
            grown.routes.retain(|x| x.id != r.id);
            check_workload(&synced, &schema, &grown, &[]);
        }
        synced
            .sync(&workload_specs(&table), SyncMode::AllOrNothing)
            .unwrap();
        check_workload(&synced, &schema, &table, &[grown]);
    }
}

/// Under the default `regex_size_limit` the router compiles Unicode `\w{30}x1` (its NFA is
/// within the limit) where the `regex` crate's full build is not: the reference evaluator must
/// still build it, and find the match Kong's library finds.
#[test]
fn the_reference_builds_what_the_router_builds() {
    let schema = tables::schema();
    let mut router = Router::new(schema.clone());
    router.add(id(0), 1, r#"http.path ~ "\\w{30}x1""#).unwrap();
    let path = format!("/a/{}x1/b", "e".repeat(30));
    check_one(
        &router,
        &schema,
        &[("http.path".into(), Value::String(path))],
    );
}

/// What the `tables` fuzz target runs, on pseudo-random bytes: any bytes decode to a table
/// that loads, and churn keeps the index equal to the reference (the fuzz target's smoke test
/// on the stable toolchain).
#[test]
fn decoded_tables_match_the_reference() {
    let mut x: u64 = 0x5eed;
    let mut routes = 0;
    for len in (0..24).map(|k| 64 + 160 * k) {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let z = (x ^ (x >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                (z >> 56) as u8
            })
            .collect();
        let d = tables::decode(&mut arbitrary::Unstructured::new(&bytes)).unwrap();
        routes += d.table.routes.len();
        churn(router(&tables::schema()), d.table, d.ops, &d.reqs);
    }
    assert!(routes > 100, "{routes} routes decoded");
}

/// A request's `pick` is any `u64` the fuzzer decodes: building a request from it never
/// overflows (crash-a36a6c8d of the `tables` target: `contains` with a pick near `u64::MAX`).
#[test]
fn any_pick_builds_a_request() {
    let table = tables::Table {
        routes: vec![tables::RouteShape {
            priority: 1,
            conds: vec![tables::Cond::Contains(3)],
        }],
    };
    for pick in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
        let req = table.request_for(0, pick);
        assert_eq!(req.len(), 1, "{req:?}");
    }
}
