//! Syncs a table onto itself (nothing changed) a few times, for profiling `prepare_sync`:
//! `cargo run --release -p atc-benches --example sync [n] [changed]`. With `changed`, each sync
//! alternates between the table and a copy with that many routes changed.
use atc_benches::{build, schema};
use atc_router::{RouteSpec, SyncMode, Uuid};
use atc_workload::Table;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let changed: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let table = Table::generate(n, 1, false);
    let other = table.with_changes(changed, 9);
    let schema = schema();
    let mut router = build(&table, &schema);
    let specs = |t: &Table| -> Vec<(Uuid, u64, String)> {
        t.routes
            .iter()
            .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
            .collect()
    };
    let (a, b) = (specs(&table), specs(&other));
    let (a, b) = (as_specs(&a), as_specs(&b));
    let t = std::time::Instant::now();
    for i in 0..5 {
        let target = if i % 2 == 0 { &b } else { &a };
        let t0 = std::time::Instant::now();
        let plan = router.prepare_sync(target, SyncMode::AllOrNothing).unwrap();
        let t1 = t0.elapsed();
        let report = router.apply(plan);
        if std::env::var("SPLIT").is_ok() {
            eprintln!("prepare {t1:?}, apply {:?}", t0.elapsed() - t1);
        }
        assert_eq!(report.changed, changed);
    }
    println!(
        "{:?} per sync of {n} routes, {changed} changed",
        t.elapsed() / 5
    );
}

fn as_specs(v: &[(Uuid, u64, String)]) -> Vec<RouteSpec<'_>> {
    v.iter()
        .map(|(id, priority, expression)| RouteSpec {
            id: *id,
            priority: *priority,
            expression,
        })
        .collect()
}
