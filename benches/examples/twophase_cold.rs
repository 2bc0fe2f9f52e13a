//! Two-phase matching (atc_router::needs) the way a gateway runs it, with the caches evicted
//! between requests as nginx's own work per request does: key fields, `needed_fields`, the
//! needed fields, some unrelated work, execute. Prints the time per request.
//!
//!   cargo run --release -p atc-benches --example twophase_cold
use atc_benches::{build, schema, value};

use atc_router::Context;
use atc_workload::{requests, Mix, Table};
use std::time::Instant;

fn main() {
    let schema = schema();
    let table = Table::generate(10_000, 1, false);
    let router = build(&table, &schema);
    let reqs = requests(&table, Mix::Realistic, 4096, 7);
    let keys = router.key_fields();
    let mut evict = vec![0u64; (4 << 20) / 8];
    let mut ctx = Context::new(schema.clone());
    let mut total = 0u128;
    let pre: Vec<Vec<(atc_router::FieldId, atc_router::Value, u64)>> = reqs
        .iter()
        .map(|r| {
            r.fields
                .iter()
                .map(|(f, v)| {
                    let id = schema.resolve(f).unwrap().0;
                    (id, value(v), id.bit())
                })
                .collect()
        })
        .collect();
    let add = |ctx: &mut Context, id: atc_router::FieldId, v: &atc_router::Value| match v {
        atc_router::Value::String(s) => ctx.add_str(id, s).unwrap(),
        v => ctx.add_value_by_id(id, v.clone()).unwrap(),
    };
    let mut x = 0u64;
    for round in 0..3 {
        for req in &pre {
            for i in (0..evict.len()).step_by(8) {
                evict[i] = evict[i].wrapping_add(1);
            }
            let t = Instant::now();
            ctx.reset();
            for (id, v, b) in req {
                if keys & b != 0 {
                    add(&mut ctx, *id, v);
                }
            }
            let needed = router.needed_fields(&mut ctx);
            for (id, v, b) in req {
                if keys & b == 0 && needed & b != 0 {
                    add(&mut ctx, *id, v);
                }
            }
            // What a gateway does between the phases: some unrelated work.
            for i in 0..200 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            router.execute(&mut ctx);
            if round > 0 {
                total += t.elapsed().as_nanos();
            }
        }
    }
    std::hint::black_box(x);
    println!(
        "{:.0} ns per request",
        total as f64 / (2 * reqs.len()) as f64
    );
}
