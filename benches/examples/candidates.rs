//! Candidates per request for each mix: `cargo run --release -p atc-benches --example candidates [n]`.

use atc_benches::{build, contexts, schema};
use atc_workload::{Mix, Table};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let schema = schema();
    let table = Table::generate(n, 1, false);
    let router = build(&table, &schema);
    eprint!("{}", router.index_summary());
    for mix in Mix::all() {
        let mut ctxs = contexts(&table, &schema, mix, 256);
        let counts: Vec<usize> = ctxs.iter_mut().map(|c| router.candidate_count(c)).collect();
        let max = counts.iter().max().unwrap();
        let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
        println!(
            "{n} {:>10}: mean {mean:.1} candidates, max {max}",
            mix.name()
        );
    }
}
