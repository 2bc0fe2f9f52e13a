//! Candidates per request (the routes the index hands to evaluation) for each family and mix:
//! `cargo run --release -p atc-benches --example candidates [n [family]]`.

use atc_benches::{build, candidate_stats, contexts, schema};
use atc_workload::{Family, Mix, Table};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let only = args
        .next()
        .map(|f| Family::from_name(&f).expect("a family name"));
    let schema = schema();
    println!("{n} routes: candidates per request, mean / max");
    for family in Family::all() {
        if only.is_some_and(|f| f != family) {
            continue;
        }
        let table = Table::family(family, n, 1);
        let router = build(&table, &schema);
        if only.is_some() {
            eprint!("{}", router.index_summary());
        }
        let mut line = format!("{:>16}", family.name());
        for mix in Mix::all() {
            let mut ctxs = contexts(&table, &schema, mix, 256);
            let (mean, max) = candidate_stats(&router, &mut ctxs);
            line.push_str(&format!("  {}: {mean:.1} / {max}", mix.name()));
        }
        println!("{line}");
    }
}
