//! Two-phase matching (atc_router::needs): a request that provides its key fields, then only
//! the fields `Router::needed_fields` names, gets the result of providing every field — route,
//! matched path, captures — on the workload tables, before and after the table changes.

use std::sync::Arc;

use atc_router::FieldMask;
use atc_router::{Context, RouteSpec, Router, Schema, SyncMode, Type, Uuid};
use atc_workload::{requests, Mix, Request, Table};

mod common;
use common::{workload_schema as schema, workload_value as value};

fn load(router: &mut Router, table: &Table) {
    let specs: Vec<RouteSpec<'_>> = table
        .routes
        .iter()
        .map(|r| RouteSpec {
            id: Uuid::from_bytes(r.id),
            priority: r.priority,
            expression: &r.expression,
        })
        .collect();
    router.sync(&specs, SyncMode::AllOrNothing).unwrap();
}

type Outcome = Option<(Uuid, Option<String>, Vec<(String, String)>)>;

fn outcome(router: &Router, ctx: &mut Context) -> Outcome {
    router.execute(ctx);
    ctx.result().map(|m| {
        let mut caps: Vec<_> = m.captures_map().into_iter().collect();
        caps.sort();
        (
            m.id(),
            m.matched_value("http.path").map(|v| v.to_string()),
            caps,
        )
    })
}

fn bit(schema: &Schema, field: &str) -> FieldMask {
    schema.resolve(field).unwrap().0.bit()
}

/// Compares every-field and two-phase contexts on every request; returns how many field values
/// the two-phase contexts got, and how many the full ones.
fn check(router: &Router, schema: &Arc<Schema>, reqs: &[Request]) -> (usize, usize) {
    let keys = router.key_fields();
    let (mut part_n, mut full_n) = (0, 0);
    let mut full = Context::new(schema.clone());
    let mut part = Context::new(schema.clone());
    for req in reqs {
        full.reset();
        part.reset();
        for (f, v) in &req.fields {
            full.add_value(f, value(v)).unwrap();
            full_n += 1;
            if keys & bit(schema, f) != 0 {
                part.add_value(f, value(v)).unwrap();
                part_n += 1;
            }
        }
        let needed = router.needed_fields(&mut part);
        assert_eq!(needed & keys, keys, "the key fields are needed");
        for (f, v) in &req.fields {
            let b = bit(schema, f);
            if keys & b == 0 && needed & b != 0 {
                part.add_value(f, value(v)).unwrap();
                part_n += 1;
            }
        }
        assert_eq!(
            outcome(router, &mut full),
            outcome(router, &mut part),
            "{req:?}"
        );
    }
    (part_n, full_n)
}

/// The masks of a router as observed from outside: key fields, and the needed fields of each
/// request.
fn masks(router: &Router, schema: &Arc<Schema>, reqs: &[Request]) -> Vec<FieldMask> {
    let keys = router.key_fields();
    let mut ctx = Context::new(schema.clone());
    let mut out = vec![keys];
    for req in reqs {
        ctx.reset();
        for (f, v) in &req.fields {
            if keys & bit(schema, f) != 0 {
                ctx.add_value(f, value(v)).unwrap();
            }
        }
        out.push(router.needed_fields(&mut ctx));
    }
    out
}

#[test]
fn two_phase_matching_gives_the_results_of_every_field() {
    let schema = schema();
    for catch_all in [false, true] {
        let table = Table::generate(3000, 5, catch_all);
        let mut router = Router::new(schema.clone());
        load(&mut router, &table);
        let mut reqs = Vec::new();
        for (k, mix) in Mix::all().into_iter().enumerate() {
            reqs.extend(requests(&table, mix, 400, 31 + k as u64));
        }
        let (part, full) = check(&router, &schema, &reqs);
        println!("catch-all {catch_all}: two-phase contexts got {part} of {full} values");
        assert!(
            part < full,
            "two-phase contexts got {part} of {full} values"
        );

        // After changes (added, removed, changed routes, applied in place), the masks still
        // give the results of every field, also for requests of the new table; and so do those
        // of a fresh build of the new table (whose index may be shaped differently: splits are
        // chosen from the routes a node holds when it splits).
        let changed = table.with_changes(300, 9);
        load(&mut router, &changed);
        let mut fresh = Router::new(schema.clone());
        load(&mut fresh, &changed);
        for (k, mix) in Mix::all().into_iter().enumerate() {
            reqs.extend(requests(&changed, mix, 200, 77 + k as u64));
        }
        check(&router, &schema, &reqs);
        check(&fresh, &schema, &reqs);

        // Emptied: nothing is needed.
        load(
            &mut router,
            &Table {
                routes: Vec::new(),
                ..changed
            },
        );
        assert_eq!(masks(&router, &schema, &reqs[..1]), vec![0, 0]);
    }
}

#[test]
fn fields_past_the_63rd_share_the_last_bit() {
    let mut s = Schema::new();
    for i in 0..70 {
        s.add_field(&format!("f{i}"), Type::String).unwrap();
    }
    let s = Arc::new(s);
    let mut router = Router::new(s.clone());
    router
        .add(
            Uuid::from_u128(1),
            1,
            r#"f0 == "a" && (f64 == "x" || f69 ^= "y")"#,
        )
        .unwrap();
    router.add(Uuid::from_u128(2), 1, r#"f65 ~ "z""#).unwrap();
    // Whatever the index keys on, only bits 0 and 63 exist: f64, f65 and f69 all answer to 63.
    assert_eq!(router.key_fields() & !(1 | 1 << 63), 0);
    let mut ctx = Context::new(s.clone());
    for (f, v) in [("f0", "a"), ("f64", "x"), ("f65", "z"), ("f69", "y")] {
        ctx.add_value(f, v).unwrap();
    }
    assert_eq!(router.needed_fields(&mut ctx), 1 | 1 << 63);
    assert!(router.remove(Uuid::from_u128(1)));
    assert_eq!(router.needed_fields(&mut ctx) & 1, 0, "no route uses f0");
    assert!(router.remove(Uuid::from_u128(2)));
    assert_eq!(
        (router.key_fields(), router.needed_fields(&mut ctx)),
        (0, 0)
    );
}

#[test]
fn candidates_found_by_needed_fields_are_not_reused_once_a_key_field_changes() {
    let mut s = Schema::new();
    s.add_field("http.host", Type::String).unwrap();
    s.add_field("http.path", Type::String).unwrap();
    let s = Arc::new(s);
    let mut router = Router::new(s.clone());
    router
        .add(Uuid::from_u128(1), 1, r#"any(http.host) == "a.com""#)
        .unwrap();
    router
        .add(Uuid::from_u128(2), 1, r#"any(http.host) == "b.com""#)
        .unwrap();
    assert_ne!(router.key_fields(), 0, "the hosts are a key");
    let mut ctx = Context::new(s.clone());
    ctx.add_value("http.host", "a.com").unwrap();
    router.needed_fields(&mut ctx);
    // Phase 2 adds a non-key field: the candidates found for a.com serve the execute.
    ctx.add_value("http.path", "/x").unwrap();
    assert!(router.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(1));
    // A caller that adds a key field's value after asking must not get a.com's candidates
    // (route 2 comes first in routing order: equal priorities, higher id).
    ctx.reset();
    ctx.add_value("http.host", "a.com").unwrap();
    router.needed_fields(&mut ctx);
    ctx.add_value("http.host", "b.com").unwrap();
    assert!(router.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(2));
    // Nor after the table changed.
    ctx.reset();
    ctx.add_value("http.host", "b.com").unwrap();
    router.needed_fields(&mut ctx);
    router.remove(Uuid::from_u128(2));
    assert!(!router.execute(&mut ctx));
}
