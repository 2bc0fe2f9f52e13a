//! Criterion benchmarks on the WORKLOAD.md tables, indexed matcher and reference evaluator side
//! by side in one run.
//!
//! `cargo bench -p atc-benches` for the full run; `cargo bench -p atc-benches -- --test` runs
//! each benchmark once (what CI does, so they never rot). `ATC_BENCH_SIZES=100,1000` limits the
//! table sizes.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_benches::{build, contexts, live_bytes, schema, split_by_captures, CountingAlloc};
use atc_router::{RouteSpec, Router, Schema, SyncMode, Uuid};
use atc_workload::{Mix, Table};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn sizes() -> Vec<usize> {
    std::env::var("ATC_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1_000, 10_000, 100_000])
}

fn matching(c: &mut Criterion) {
    let schema = schema();
    for n in sizes() {
        let table = Table::generate(n, 1, false);
        let before = live_bytes();
        let router = build(&table, &schema);
        let bytes = live_bytes() - before;
        eprintln!(
            "table {n}: {} routes, {} unindexed, {} regexes, {:.0} bytes per route",
            router.len(),
            router.unindexed_count(),
            router.regex_count(),
            bytes as f64 / router.len() as f64
        );
        let mut g = c.benchmark_group(format!("match/{n}"));
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(2));
        for mix in Mix::all() {
            // The targets distinguish requests whose winning route runs a capturing regex.
            let (plain, capturing) =
                split_by_captures(&router, contexts(&table, &schema, mix, 512));
            for (suffix, mut ctxs) in [("", plain), ("+captures", capturing)] {
                if ctxs.is_empty() {
                    continue;
                }
                ctxs.truncate(256);
                let name = format!("{}{suffix}", mix.name());
                g.sample_size(100);
                g.bench_function(BenchmarkId::new("indexed", &name), |b| {
                    let mut i = 0;
                    b.iter(|| {
                        i = (i + 1) % ctxs.len();
                        black_box(router.execute(&mut ctxs[i]))
                    })
                });
                // The linear scan costs milliseconds per request on big tables: fewer samples.
                if n >= 10_000 {
                    g.sample_size(10);
                }
                g.bench_function(BenchmarkId::new("reference", &name), |b| {
                    let mut i = 0;
                    b.iter(|| {
                        i = (i + 1) % ctxs.len();
                        black_box(router.execute_reference(&mut ctxs[i]))
                    })
                });
            }
        }
        g.finish();
    }
}

fn updates(c: &mut Criterion) {
    let schema = schema();
    for n in sizes() {
        let table = Table::generate(n, 1, false);
        let mut g = c.benchmark_group(format!("update/{n}"));
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(2));
        if n >= 10_000 {
            g.sample_size(10);
        }
        // The build alone: the router built is freed outside the measurement.
        g.bench_function("build", |b| {
            b.iter_with_large_drop(|| build(&table, &schema))
        });
        // What a gateway without sync does on a change: build a new router while the current
        // one serves, then drop the current one. The fair comparison for a sync in which
        // everything changed, which also frees the table it replaces.
        let mut current = build(&table, &schema);
        g.bench_function("replace", |b| {
            b.iter(|| {
                let old = std::mem::replace(&mut current, build(&table, &schema));
                drop(old);
            })
        });
        drop(current);

        let mut router = build(&table, &schema);
        // Non-regex routes of the table's mix, fresh ids.
        let extras: Vec<_> = (0..64u64)
            .map(|s| table.extra_route(s))
            .filter(|r| !r.expression.contains('~'))
            .collect();
        let add_remove = |router: &mut Router, iters: u64, time_add: bool| {
            let mut spent = Duration::ZERO;
            for i in 0..iters {
                let r = &extras[i as usize % extras.len()];
                let id = Uuid::from_bytes(r.id);
                let t = Instant::now();
                router.add(id, r.priority, &r.expression).unwrap();
                if time_add {
                    spent += t.elapsed();
                }
                let t = Instant::now();
                router.remove(id);
                if !time_add {
                    spent += t.elapsed();
                }
            }
            spent
        };
        g.bench_function("add-one", |b| {
            b.iter_custom(|iters| add_remove(&mut router, iters, true))
        });
        g.bench_function("remove-one", |b| {
            b.iter_custom(|iters| add_remove(&mut router, iters, false))
        });
        // Change: the same id gets another expression (remove + add).
        let victim = &table.routes[n / 2];
        let id = Uuid::from_bytes(victim.id);
        let mut flip = false;
        g.bench_function("change-one", |b| {
            b.iter(|| {
                flip = !flip;
                let r = &extras[usize::from(flip)];
                router.remove(id);
                router
                    .add(
                        id,
                        victim.priority,
                        if flip {
                            &r.expression
                        } else {
                            &victim.expression
                        },
                    )
                    .unwrap();
            })
        });
        g.finish();
    }
}

/// Sync of a whole desired list in which nothing, one route, 1% or all routes changed,
/// alternating between the table and its changed copy so every iteration does the same work.
fn syncs(c: &mut Criterion) {
    let schema = schema();
    for n in sizes().into_iter().filter(|n| *n >= 10_000) {
        let table = Table::generate(n, 1, false);
        let mut router = build(&table, &schema);
        let specs = |t: &Table| -> Vec<(Uuid, u64, String)> {
            t.routes
                .iter()
                .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
                .collect()
        };
        let mut g = c.benchmark_group(format!("sync/{n}"));
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(3));
        g.sample_size(10);
        for (name, changed) in [("none", 0), ("one", 1), ("1%", n / 100), ("all", n)] {
            let a = specs(&table);
            let b = specs(&table.with_changes(changed, 9));
            let (a, b) = (as_specs(&a), as_specs(&b));
            // Start every case from the base table (an earlier case may have left the router on
            // its changed copy). `flip` lives outside the closure: criterion calls it again for
            // measurement after warm-up, and each call must sync to the other table.
            router.sync(&a, SyncMode::AllOrNothing).unwrap();
            let mut flip = false;
            g.bench_function(name, |bench| {
                bench.iter(|| {
                    flip = !flip;
                    let target = if flip { &b } else { &a };
                    let report = router.sync(target, SyncMode::AllOrNothing).unwrap();
                    assert_eq!(report.changed, changed);
                })
            });
            if changed == n {
                // What "all" is compared with: a fresh build of the same desired lists (the
                // changed copy's regexes differ, so its build costs a little more than the
                // table's), the router built being freed outside the measurement.
                g.bench_function("build", |bench| {
                    bench.iter_with_large_drop(|| {
                        flip = !flip;
                        let target = if flip { &b } else { &a };
                        build_specs(&schema, target)
                    })
                });
                // What a gateway without sync does on the same change: a fresh build of the
                // desired list replaces the router, and the replaced one is freed, as the sync
                // frees the routes it replaces.
                let mut current = build_specs(&schema, &a);
                g.bench_function("rebuild", |bench| {
                    bench.iter(|| {
                        flip = !flip;
                        let target = if flip { &b } else { &a };
                        drop(std::mem::replace(
                            &mut current,
                            build_specs(&schema, target),
                        ));
                    })
                });
            }
        }
        g.finish();
    }
}

/// A router built from a desired list one `add` at a time, as without sync.
fn build_specs(schema: &Arc<Schema>, specs: &[RouteSpec<'_>]) -> Router {
    let mut fresh = Router::new(schema.clone());
    for r in specs {
        fresh.add(r.id, r.priority, r.expression).unwrap();
    }
    fresh
}

fn as_specs(v: &[(Uuid, u64, String)]) -> Vec<RouteSpec<'_>> {
    v.iter()
        .map(|(id, priority, e)| RouteSpec {
            id: *id,
            priority: *priority,
            expression: e,
        })
        .collect()
}

criterion_group!(benches, matching, updates, syncs);
criterion_main!(benches);
