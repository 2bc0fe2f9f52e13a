//! Syncs a table onto itself (nothing changed) a few times, for profiling `prepare_sync`:
//! `cargo run --release -p atc-benches --example sync [n]`.
use atc_benches::{build, schema};
use atc_router::{RouteSpec, SyncMode, Uuid};
use atc_workload::Table;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let table = Table::generate(n, 1, false);
    let schema = schema();
    let mut router = build(&table, &schema);
    let specs: Vec<RouteSpec<'_>> = table
        .routes
        .iter()
        .map(|r| RouteSpec {
            id: Uuid::from_bytes(r.id),
            priority: r.priority,
            expression: &r.expression,
        })
        .collect();
    let t = std::time::Instant::now();
    for _ in 0..5 {
        let report = router.sync(&specs, SyncMode::AllOrNothing).unwrap();
        assert_eq!(report.unchanged, n);
    }
    println!("{:?} per no-op sync of {n} routes", t.elapsed() / 5);
}
