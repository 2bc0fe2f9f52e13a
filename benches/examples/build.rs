//! Build time of a WORKLOAD table, split by route kind and by phase:
//! `cargo run --release -p atc-benches --example build [n]`.
use std::time::Instant;

use atc_benches::{build, schema, split_by_regex};
use atc_router::{parse, Router};
use atc_workload::Table;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let table = Table::generate(n, 1, false);
    let schema = schema();
    for (name, t) in split_by_regex(&table) {
        let start = Instant::now();
        let r = build(&t, &schema);
        let built = start.elapsed();
        let start = Instant::now();
        for route in &t.routes {
            parse(&route.expression).unwrap();
        }
        let parsed = start.elapsed();
        let start = Instant::now();
        for route in &t.routes {
            Router::validate(&schema, &route.expression).unwrap();
        }
        let validated = start.elapsed();
        println!(
            "{name:>9}: {:>6} routes, build {built:?} ({:?}/route); parse alone {parsed:?}, parse+validate+compile {validated:?}",
            r.len(),
            built / r.len().max(1) as u32
        );
    }
}
