//! The index finds what the reference evaluator finds, on gateway-shaped tables
//! (`atc_testkit::tables`: one host behind most routes, method sets, ports, tenants, path
//! parameters, suffixes, `contains`, networks, `!`, `||`) and through churn long enough to split
//! and collapse every kind of node: after every add, remove, change and sync, every request gets
//! the same route, matched values and captures from `Router::execute` as from
//! `Router::execute_reference`.
//!
//! `PROPTEST_CASES=N` raises the number of cases.

use std::sync::Arc;

use atc_router::{Context, RouteSpec, Router, Schema, SyncMode, Uuid, Value};
use atc_testkit::tables::{self, Op, RouteShape, Table};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A request: built for a route (by index, with a choice of `||` branches and values), or from
/// the pools.
type Req = (usize, u64, [u64; 6], bool);

type Outcome = Option<(Uuid, Option<String>, Option<String>, Vec<(String, String)>)>;

fn outcome(ctx: &Context) -> Outcome {
    ctx.result().map(|m| {
        let mut caps: Vec<(String, String)> = m.captures_map().into_iter().collect();
        caps.sort();
        (
            m.id(),
            m.matched_value("http.path").map(|v| v.to_string()),
            m.matched_value("http.host").map(|v| v.to_string()),
            caps,
        )
    })
}

fn context(schema: &Arc<Schema>, values: &[(String, Value)]) -> Context {
    let mut ctx = Context::new(schema.clone());
    for (f, v) in values {
        ctx.add_value(f, v.clone())
            .expect("generated values fit the schema");
    }
    ctx
}

/// A request with these values gets the reference's outcome; returns whether it matched.
fn check_one(router: &Router, schema: &Arc<Schema>, values: &[(String, Value)]) -> bool {
    let mut ctx = context(schema, values);
    let fast = router.execute(&mut ctx);
    let fast_out = outcome(&ctx);
    let slow = router.execute_reference(&mut ctx);
    assert_eq!(fast, slow, "request {values:?}\n{}", router.index_summary());
    assert_eq!(fast_out, outcome(&ctx), "request {values:?}");
    fast
}

/// Every request gets the reference's outcome; returns how many matched.
fn check(router: &Router, schema: &Arc<Schema>, table: &Table, reqs: &[Req]) -> usize {
    let mut hits = 0;
    for &(i, pick, random, from_pool) in reqs {
        let values = if from_pool || table.routes.is_empty() {
            tables::random_request(&random)
        } else {
            table.request_for(i % table.routes.len(), pick)
        };
        hits += usize::from(check_one(router, schema, &values));
    }
    hits
}

fn id(i: usize) -> Uuid {
    // Spread over the id space, so that id order is unrelated to insertion order.
    Uuid::from_u128((i as u128 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
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
        check(&one_by_one, &schema, &table, &reqs);
        check(&whole, &schema, &table, &reqs);
    }

    /// Churn: adds, removes, changes and syncs, checked after every step.
    #[test]
    fn churn_keeps_every_route_reachable(
        initial in tables::table_strategy(0..100),
        ops in tables::ops_strategy(1..60),
        reqs in reqs_strategy(),
    ) {
        let schema = tables::schema();
        let mut router = Router::new(schema.clone());
        // The model: the table as it should be, each route with its id.
        let mut model: Vec<(Uuid, RouteShape)> = Vec::new();
        let mut next_id = 0;
        for r in initial.routes {
            router.add(id(next_id), r.priority, &r.render()).unwrap();
            model.push((id(next_id), r));
            next_id += 1;
        }
        for op in ops {
            match op {
                Op::Add(r) => {
                    router.add(id(next_id), r.priority, &r.render()).unwrap();
                    model.push((id(next_id), r));
                    next_id += 1;
                }
                Op::Remove(i) if !model.is_empty() => {
                    let (uuid, _) = model.remove(i % model.len());
                    prop_assert!(router.remove(uuid));
                }
                Op::Change(i, r) if !model.is_empty() => {
                    let at = i % model.len();
                    model[at].1 = r;
                    let texts: Vec<String> = model.iter().map(|(_, r)| r.render()).collect();
                    let specs: Vec<RouteSpec<'_>> = model
                        .iter()
                        .zip(&texts)
                        .map(|((uuid, r), t)| RouteSpec { id: *uuid, priority: r.priority, expression: t })
                        .collect();
                    router.sync(&specs, SyncMode::AllOrNothing).unwrap();
                }
                Op::Sync => {
                    let texts: Vec<String> = model.iter().map(|(_, r)| r.render()).collect();
                    let specs: Vec<RouteSpec<'_>> = model
                        .iter()
                        .zip(&texts)
                        .map(|((uuid, r), t)| RouteSpec { id: *uuid, priority: r.priority, expression: t })
                        .collect();
                    let report = router.sync(&specs, SyncMode::AllOrNothing).unwrap();
                    prop_assert_eq!(report.unchanged, model.len());
                }
                Op::Remove(_) | Op::Change(..) => {}
            }
            prop_assert_eq!(router.len(), model.len());
            let table = Table { routes: model.iter().map(|(_, r)| r.clone()).collect() };
            check(&router, &schema, &table, &reqs);
        }
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
