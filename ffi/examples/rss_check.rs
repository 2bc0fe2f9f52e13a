//! Creates and frees a router of a 10,000-route atc_workload table, plus four contexts serving
//! requests, 1,000 times through the C ABI, and reports the resident set size at the start,
//! after the first cycle, after 100 and at the end. Fails (exit 1) when RSS grew by more than
//! 10% between cycle 100 and the last one: a leak or unbounded fragmentation.
//!
//!     scripts/rss-check [CYCLES] [ROUTES]        # default 1000 10000, release build
//!
//! (`cargo run --release -p atc-router-ffi --example rss_check -- CYCLES ROUTES`.)

#[path = "../tests/support/rss.rs"]
mod rss;

use std::time::Instant;

use rss::{cycle, mib, rss_bytes, Workload};

fn main() {
    let mut args = std::env::args().skip(1);
    let cycles: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let routes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let warm = 100.min(cycles);
    let w = Workload::new(routes, 200);
    let start = rss_bytes();
    println!(
        "rss-check: {cycles} cycles of a {}-route router + 4 contexts x 200 requests",
        w.routes()
    );
    println!(
        "  start (table generated, nothing built): {:8.1} MiB",
        mib(start)
    );
    let t = Instant::now();
    let mut at_warm = start;
    for i in 1..=cycles {
        cycle(&w);
        if i == 1 {
            println!(
                "  after    1 cycle:                      {:8.1} MiB   ({:.0} ms per cycle)",
                mib(rss_bytes()),
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        if i == warm {
            at_warm = rss_bytes();
            println!(
                "  after {i:4} cycles:                     {:8.1} MiB",
                mib(at_warm)
            );
        }
    }
    let end = rss_bytes();
    let growth = (end as f64 - at_warm as f64) / at_warm as f64 * 100.0;
    println!(
        "  after {cycles:4} cycles:                     {:8.1} MiB   ({:+.1}% since cycle {warm}; {:.1} s in all)",
        mib(end),
        growth,
        t.elapsed().as_secs_f64()
    );
    if growth > 10.0 {
        eprintln!("rss-check: FAILED: RSS grew {growth:.1}% (limit 10%)");
        std::process::exit(1);
    }
    println!("rss-check: ok (growth within 10%)");
}
