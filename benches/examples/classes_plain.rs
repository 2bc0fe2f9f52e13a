//! Per route family (on the mixed table), the time of the requests the `match` benchmark calls plain (the winner
//! records no regex group): `cargo run --release -p atc-benches --example classes_plain [n] [mix]`.
use std::collections::BTreeMap;
use std::time::Instant;

use atc_benches::{build, contexts, schema};
use atc_router::CaptureKey;
use atc_workload::{Mix, Table};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let mix_name = args.next().unwrap_or_else(|| "hit-last".into());
    let mix = Mix::from_name(&mix_name).expect("mix");
    let schema = schema();
    let table = Table::generate(n, 1, false);
    let router = build(&table, &schema);
    let mut by_class: BTreeMap<&str, Vec<atc_router::Context>> = BTreeMap::new();
    for mut ctx in contexts(&table, &schema, mix, 512) {
        router.execute(&mut ctx);
        let Some(m) = ctx.result() else { continue };
        if m.captures().any(|(k, _)| k != CaptureKey::Index(0)) {
            continue;
        }
        let id = m.id();
        let route = table
            .routes
            .iter()
            .find(|r| atc_router::Uuid::from_bytes(r.id) == id)
            .unwrap();
        let class = route.family.name();
        by_class.entry(class).or_default().push(ctx);
    }
    for (class, ctxs) in &mut by_class {
        let iters = 2_000_000;
        let t = Instant::now();
        for i in 0..iters {
            let k = i % ctxs.len();
            std::hint::black_box(router.execute(&mut ctxs[k]));
        }
        println!(
            "{class:>10}: {:>3} requests, {:?} per request",
            ctxs.len(),
            t.elapsed() / iters as u32
        );
    }
}
