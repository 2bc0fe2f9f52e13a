//! Routes of equal priority are ordered by id, whatever the order they were given in and
//! whatever the process: a table loaded in different orders, through different paths (routes
//! added one by one, a sync of the whole list, the flat index written by `settle`, a table image
//! opened by another schema), routes every request alike. Each router's hash maps get their own
//! random seeds (std's `RandomState` differs per map), as two processes' would, so an order
//! that leaked from a hash map's iteration would show here.
//!
//! The tables put many routes at one priority and make them overlap (the same host, nested
//! prefixes, a catch-all per priority), so that most requests match several routes of the
//! winning priority.

use atc_router::{Context, ImageRouter, RouteSpec, Router, SyncMode, Uuid};
use atc_workload::{requests, Mix, Table};

mod common;
use common::{workload_schema as schema, workload_value as value};

/// xorshift64*: deterministic shuffles.
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        let j = (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// `table` with its priorities folded onto `levels` values, and overlapping routes added at
/// each: every request that matches one route of a level is likely to match several.
fn tied(table: &Table, levels: u64) -> Vec<(Uuid, u64, String)> {
    let mut routes: Vec<(Uuid, u64, String)> = table
        .routes
        .iter()
        .map(|r| {
            (
                Uuid::from_bytes(r.id),
                r.priority % levels,
                r.expression.clone(),
            )
        })
        .collect();
    for level in 0..levels {
        for (k, e) in [
            r#"http.path ^= "/""#,
            r#"http.method == "GET""#,
            r#"http.path ^= "/api""#,
            r#"net.dst.port > 0"#,
        ]
        .iter()
        .enumerate()
        {
            let id = Uuid::from_u128(0xffff_0000_u128 << 96 | u128::from(level) << 8 | k as u128);
            routes.push((id, level, (*e).to_owned()));
        }
    }
    routes
}

/// The route `r` gives each request.
fn winners(r: &Router, ctxs: &mut [Context]) -> Vec<Option<Uuid>> {
    ctxs.iter_mut()
        .map(|c| r.execute(c).then(|| c.result().unwrap().id()))
        .collect()
}

#[test]
fn equal_priorities_route_alike_in_every_order_and_every_form() {
    let schema = schema();
    for (n, levels, seed) in [(600, 3, 1), (3_000, 5, 2), (12_000, 4, 3)] {
        let table = Table::generate(n, seed, false);
        let routes = tied(&table, levels);
        let mut ctxs: Vec<Context> = Vec::new();
        for mix in Mix::all() {
            for req in requests(&table, mix, 40, seed) {
                let mut c = Context::new(schema.clone());
                for (f, v) in &req.fields {
                    c.add_value(f, value(v)).unwrap();
                }
                ctxs.push(c);
            }
        }
        let mut reference: Option<Vec<Option<Uuid>>> = None;
        let mut check = |what: &str, got: Vec<Option<Uuid>>| match &reference {
            None => reference = Some(got),
            Some(want) => {
                let differ = want.iter().zip(&got).filter(|(a, b)| a != b).count();
                assert_eq!(
                    differ, 0,
                    "{n} routes, {what}: {differ} requests routed elsewhere"
                );
            }
        };
        for shuffle_seed in 0..4u64 {
            let mut order = routes.clone();
            shuffle(&mut order, 0x9e37_79b9 + shuffle_seed);
            // One by one.
            let mut added = Router::new(schema.clone());
            for (id, p, e) in &order {
                added.add(*id, *p, e).unwrap();
            }
            check("added", winners(&added, &mut ctxs));
            added.settle();
            check("added, settled", winners(&added, &mut ctxs));
            // A whole list.
            let specs: Vec<RouteSpec<'_>> = order
                .iter()
                .map(|(id, p, e)| RouteSpec {
                    id: *id,
                    priority: *p,
                    expression: e,
                })
                .collect();
            let mut synced = Router::new(schema.clone());
            synced.sync(&specs, SyncMode::AllOrNothing).unwrap();
            check("synced", winners(&synced, &mut ctxs));
            // An image, opened over another schema (another process's numbering).
            let other = common::workload_schema();
            let image = ImageRouter::from_bytes(other.clone(), synced.to_image().unwrap()).unwrap();
            let mut image_ctxs: Vec<Context> = Vec::new();
            for mix in Mix::all() {
                for req in requests(&table, mix, 40, seed) {
                    let mut c = Context::new(other.clone());
                    for (f, v) in &req.fields {
                        c.add_value(f, value(v)).unwrap();
                    }
                    image_ctxs.push(c);
                }
            }
            let got: Vec<Option<Uuid>> = image_ctxs
                .iter_mut()
                .map(|c| image.execute(c).then(|| c.result().unwrap().id()))
                .collect();
            check("image", got);
        }
        let routed = reference.unwrap().iter().filter(|w| w.is_some()).count();
        assert!(
            routed * 2 > ctxs.len(),
            "{n}: {routed} of {} routed",
            ctxs.len()
        );
    }
}
