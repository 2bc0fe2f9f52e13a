//! Creating and freeing routers and contexts does not grow the process: 50 cycles of a
//! 500-route atc_workload table through the C ABI, RSS after cycle 50 within 10% of RSS after
//! cycle 10 (the first cycles grow the allocator's arenas to their working size). The full-size
//! check (1,000 cycles of 10,000 routes, release) is `scripts/rss-check`. Alone in its test
//! binary: RSS is per process, and another test running beside it would move the figure.

#[path = "support/rss.rs"]
mod rss;

use rss::{cycle, mib, rss_bytes, Workload};

#[test]
fn creating_and_freeing_routers_and_contexts_keeps_rss_flat() {
    let w = Workload::new(500, 50);
    assert_eq!(w.routes(), 501, "500 routes and the catch-all");
    let mut warm = 0;
    for i in 1..=50 {
        cycle(&w);
        if i == 10 {
            warm = rss_bytes();
        }
    }
    let end = rss_bytes();
    let growth = (end as f64 - warm as f64) / warm as f64 * 100.0;
    println!(
        "RSS after 10 cycles {:.1} MiB, after 50 {:.1} MiB ({growth:+.1}%)",
        mib(warm),
        mib(end)
    );
    assert!(
        growth < 10.0,
        "RSS grew {growth:.1}% between cycle 10 and 50"
    );
}
