//! Request data does not grow memory: 100,000 requests, each with a header name no request
//! used before, through one reused context and through a fresh context per request, keep RSS
//! flat (within 10% between request 10,000 and the last). Before wildcard names were left to
//! the routes, every such name got an id and each fresh context was sized to the highest id:
//! the fresh-context loop grew by gigabytes. Alone in its test binary: RSS is per process.
//! The full run, next to Kong's library, is `scripts/rss-check contexts`.

#[path = "support/context_loops.rs"]
mod context_loops;
#[path = "support/rss.rs"]
#[allow(dead_code)]
mod rss;

use context_loops::{Loop, Ours};
use rss::{mib, rss_bytes};

#[test]
fn new_header_names_in_every_request_keep_rss_flat() {
    let ours = Ours::new();
    for kind in [Loop::Reused, Loop::Fresh] {
        let mut warm = 0;
        ours.run(kind, 100_000, |i| {
            if i == 10_000 {
                warm = rss_bytes();
            }
        });
        let end = rss_bytes();
        let growth = (end as f64 - warm as f64) / warm as f64 * 100.0;
        println!(
            "{kind:?}: RSS after 10,000 requests {:.1} MiB, after 100,000 {:.1} MiB ({growth:+.1}%)",
            mib(warm),
            mib(end)
        );
        assert!(growth < 10.0, "{kind:?}: RSS grew {growth:.1}%");
    }
}
