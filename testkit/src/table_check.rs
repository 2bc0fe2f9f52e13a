//! The harness of the index's tests on [`crate::tables`]: a request gets from
//! [`Router::execute`] exactly what [`Router::execute_reference`] gives it (matched or not, the
//! route, the matched path and host, the captures), on a table as loaded and through churn
//! (adds, removes, changes, syncs) checked after every step. `tests/index_equivalence.rs` and
//! the `tables` fuzz target run it.
//!
//! Invariant: every check panics with the request and what differs, and nothing but its
//! arguments decides what runs, so a failure reproduces from them.

use std::sync::Arc;

use atc_router::{Context, Limits, RouteSpec, Router, Schema, SyncMode, Uuid, Value};

use crate::tables::{self, Op, RouteShape, Table};

/// A request: built for a route (by index, with a choice of `||` branches and values), or from
/// the pools.
pub type Req = (usize, u64, [u64; 6], bool);

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
pub fn check_one(router: &Router, schema: &Arc<Schema>, values: &[(String, Value)]) -> bool {
    let mut ctx = context(schema, values);
    let fast = router.execute(&mut ctx);
    let fast_out = outcome(&ctx);
    let slow = router.execute_reference(&mut ctx);
    assert_eq!(fast, slow, "request {values:?}\n{}", router.index_summary());
    assert_eq!(fast_out, outcome(&ctx), "request {values:?}");
    // Two phases: the key fields' values, then those of the fields the request's candidates
    // still need, give what every value gives.
    let bit = |f: &str| schema.resolve(f).map_or(0, |(id, _)| id.bit());
    let keys = router.key_fields();
    let (first, rest): (Vec<_>, Vec<_>) = values
        .iter()
        .cloned()
        .partition(|(f, _)| keys & bit(f) != 0);
    let mut two = context(schema, &first);
    let needed = router.needed_fields(&mut two);
    for (f, v) in rest.into_iter().filter(|(f, _)| needed & bit(f) != 0) {
        two.add_value(&f, v)
            .expect("generated values fit the schema");
    }
    router.execute(&mut two);
    assert_eq!(fast_out, outcome(&two), "two-phase request {values:?}");
    fast
}

/// Every request gets the reference's outcome; returns how many matched.
pub fn check(router: &Router, schema: &Arc<Schema>, table: &Table, reqs: &[Req]) -> usize {
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

pub fn id(i: usize) -> Uuid {
    // Spread over the id space, so that id order is unrelated to insertion order.
    Uuid::from_u128((i as u128 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

/// A router of the scale and stress tests: the default limits.
pub fn router(schema: &Arc<Schema>) -> Router {
    Router::with_limits(schema.clone(), Limits::default())
}

/// Runs `ops` on a router loaded with `initial`, checking every request after every step.
pub fn churn(mut router: Router, initial: Table, ops: Vec<Op>, reqs: &[Req]) {
    let schema = router.schema().clone();
    // The model: the table as it should be, each route with its id.
    let mut model: Vec<(Uuid, RouteShape)> = Vec::new();
    let mut next_id = 0;
    for r in initial.routes {
        router.add(id(next_id), r.priority, &r.render()).unwrap();
        model.push((id(next_id), r));
        next_id += 1;
    }
    let sync = |router: &mut Router, model: &[(Uuid, RouteShape)]| {
        let texts: Vec<String> = model.iter().map(|(_, r)| r.render()).collect();
        let specs: Vec<RouteSpec<'_>> = model
            .iter()
            .zip(&texts)
            .map(|((uuid, r), t)| RouteSpec {
                id: *uuid,
                priority: r.priority,
                expression: t,
            })
            .collect();
        router.sync(&specs, SyncMode::AllOrNothing).unwrap()
    };
    for op in ops {
        match op {
            Op::Add(r) => {
                router.add(id(next_id), r.priority, &r.render()).unwrap();
                model.push((id(next_id), r));
                next_id += 1;
            }
            Op::Remove(i) if !model.is_empty() => {
                let (uuid, _) = model.remove(i % model.len());
                assert!(router.remove(uuid));
            }
            Op::Change(i, r) if !model.is_empty() => {
                let at = i % model.len();
                model[at].1 = r;
                sync(&mut router, &model);
            }
            Op::Sync => {
                let report = sync(&mut router, &model);
                assert_eq!(report.unchanged, model.len());
            }
            Op::Remove(_) | Op::Change(..) => {}
        }
        assert_eq!(router.len(), model.len());
        let table = Table {
            routes: model.iter().map(|(_, r)| r.clone()).collect(),
        };
        check(&router, &schema, &table, reqs);
    }
}
