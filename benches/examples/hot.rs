//! Runs one mix in a loop for profiling: `perf record ... --example hot -- <n> <mix>`.
use atc_benches::{build, contexts, schema, split_by_captures};
use atc_workload::{Mix, Table};
fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let mix_name = args.next().unwrap_or_else(|| "hit-first".into());
    let mix = Mix::all()
        .into_iter()
        .find(|m| m.name() == mix_name)
        .expect("mix");
    let schema = schema();
    // FAMILY=<name>: one family's table instead of the mixed one.
    let table = match std::env::var("FAMILY") {
        Ok(f) => Table::family(atc_workload::Family::from_name(&f).expect("a family"), n, 1),
        Err(_) => Table::generate(n, 1, false),
    };
    let router = build(&table, &schema);
    let count: usize = std::env::var("CTXS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    // PLAIN=1: only requests whose winning route records no regex group, as the benchmark's
    // mixes without `+captures`; CAPTURES=1: only those whose route does, as the `+captures`
    // mixes.
    let mut ctxs = if std::env::var("PLAIN").is_ok() || std::env::var("CAPTURES").is_ok() {
        let (plain, capturing) =
            split_by_captures(&router, contexts(&table, &schema, mix, 2 * count));
        let mut ctxs = if std::env::var("PLAIN").is_ok() {
            plain
        } else {
            capturing
        };
        ctxs.truncate(count);
        ctxs
    } else {
        contexts(&table, &schema, mix, count)
    };
    let count = ctxs.len();
    let t = std::time::Instant::now();
    let mut hits = 0;
    let iters: usize = std::env::var("ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000_000);
    // CANDIDATES=1: only collect candidates (the index part of a request), no evaluation.
    let only_candidates = std::env::var("CANDIDATES").is_ok();
    for i in 0..iters {
        let ctx = &mut ctxs[i % count];
        hits += if only_candidates {
            router.candidate_count(ctx)
        } else {
            usize::from(router.execute(ctx))
        };
    }
    println!("{hits} hits, {:?} per request", t.elapsed() / iters as u32);
}
