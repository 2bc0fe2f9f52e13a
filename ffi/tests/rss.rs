//! Creating and freeing routers and contexts does not grow the process: 50 cycles of a
//! 500-route atc_workload table through the C ABI leave exactly as much heap allocated after
//! cycle 50 as after cycle 10 (the first cycles fill caches that then stay: the workload's
//! strings, the allocator's and the core's). Counted by a global allocator
//! (`support/counting_alloc.rs`), so the check is exact and does not move with the machine;
//! RSS is printed for information. The full-size check of RSS (1,000 cycles of 10,000 routes,
//! release) is `scripts/rss-check`. Alone in its test binary: the count is per process.

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
#[path = "support/rss.rs"]
mod rss;

use rss::{cycle, mib, rss_bytes, Workload};

/// What the test harness may hold at one sample and not the other (its progress output is
/// allocated on another thread): far below what leaking one allocation a cycle adds (40 blocks
/// between the samples) or one byte a request of a cycle (50 requests, 2,000 bytes).
const SLACK: (i64, i64) = (1024, 8);

#[test]
fn creating_and_freeing_routers_and_contexts_leaves_no_heap_behind() {
    let w = Workload::new(500, 50);
    assert_eq!(w.routes(), 501, "500 routes and the catch-all");
    let (mut warm, mut warm_rss) = ((0, 0), 0);
    for i in 1..=50 {
        cycle(&w);
        if i == 10 {
            warm = counting_alloc::live();
            warm_rss = rss_bytes();
        }
    }
    let end = counting_alloc::live();
    let end_rss = rss_bytes();
    println!(
        "live heap after 10 cycles {} bytes in {} blocks, after 50 {} bytes in {} blocks; RSS \
         {:.1} MiB, then {:.1} MiB",
        warm.0,
        warm.1,
        end.0,
        end.1,
        mib(warm_rss),
        mib(end_rss)
    );
    assert!(
        end.0 - warm.0 <= SLACK.0 && end.1 - warm.1 <= SLACK.1,
        "40 cycles left {} bytes in {} blocks allocated",
        end.0 - warm.0,
        end.1 - warm.1
    );
}
