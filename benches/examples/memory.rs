//! Memory per route of the WORKLOAD tables: `cargo run --release -p atc-benches --example memory`.

use atc_benches::{build, live_bytes, schema, split_by_regex, CountingAlloc};
use atc_workload::Table;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let schema = schema();
    let table = Table::generate(n, 1, false);
    for (name, t) in split_by_regex(&table) {
        let before = live_bytes();
        let router = build(&t, &schema);
        let bytes = live_bytes() - before;
        println!(
            "{name:>9} routes: {:>6}, {:>6.0} bytes per route ({} distinct regexes)",
            router.len(),
            bytes as f64 / router.len().max(1) as f64,
            router.regex_count()
        );
    }
}
