//! Builds the 10k WORKLOAD table and nothing else, a clean subject for
//! `valgrind --tool=callgrind --toggle-collect=atc_benches::build`:
//! `cargo run --release -p atc-benches --example build_once [n [repeats]]`. With repeats, prints
//! the median build and drop times, for comparing two binaries run alternately on a busy machine.
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let n = args.next().flatten().unwrap_or(10_000);
    let repeats = args.next().flatten().unwrap_or(1);
    let table = atc_workload::Table::generate(n, 1, false);
    let schema = atc_benches::schema();
    let (mut times, mut drops) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        let start = Instant::now();
        let r = std::hint::black_box(atc_benches::build(&table, &schema));
        times.push(start.elapsed());
        let start = Instant::now();
        drop(r);
        drops.push(start.elapsed());
    }
    times.sort();
    drops.sort();
    let median = |v: &[std::time::Duration]| v[v.len() / 2];
    println!(
        "{n} routes, median build {:?}, drop {:?}",
        median(&times),
        median(&drops)
    );
}
