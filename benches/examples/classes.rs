//! Mean execute time per family of the target route (WORKLOAD.md families), on the mixed table:
//! `cargo run --release -p atc-benches --example classes [n]`.
use std::collections::BTreeMap;
use std::time::Instant;

use atc_benches::{build, fill, schema};
use atc_router::Context;
use atc_workload::{requests, Mix, Table};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let schema = schema();
    let table = Table::generate(n, 1, false);
    let router = build(&table, &schema);
    let mut by_class: BTreeMap<&str, Vec<Context>> = BTreeMap::new();
    for req in requests(&table, Mix::Realistic, 4000, 3) {
        let class = req.target.map_or("miss", |t| table.routes[t].family.name());
        let mut ctx = Context::new(schema.clone());
        fill(&mut ctx, &req);
        by_class.entry(class).or_default().push(ctx);
    }
    let only = std::env::var("CLASS").ok();
    let candidates_only = std::env::var("MODE").is_ok_and(|m| m == "candidates");
    let total: usize = std::env::var("ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    for (class, ctxs) in &mut by_class {
        if only.as_deref().is_some_and(|o| o != *class) {
            continue;
        }
        let rounds = (total / ctxs.len()).max(1);
        let t = Instant::now();
        for _ in 0..rounds {
            for c in ctxs.iter_mut() {
                if candidates_only {
                    std::hint::black_box(router.candidate_count(c));
                } else {
                    std::hint::black_box(router.execute(c));
                }
            }
        }
        let per = t.elapsed() / (rounds * ctxs.len()) as u32;
        println!(
            "{class:>20}: {:>4} requests, {per:?} per request",
            ctxs.len()
        );
    }
}
