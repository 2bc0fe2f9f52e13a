//! Builds the 10k WORKLOAD table once, nothing else: a clean subject for
//! `valgrind --tool=callgrind` when working on build time.
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let table = atc_workload::Table::generate(n, 1, false);
    let schema = atc_benches::schema();
    let r = atc_benches::build(&table, &schema);
    println!("{} routes", r.len());
}
