//! Request data does not grow memory: 100,000 requests, each with a header name no request
//! used before, through one reused context and through a fresh context per request, leave
//! exactly as much heap allocated after the last request as after request 10,000. Before
//! wildcard names were left to the routes, every such name got an id and each fresh context was
//! sized to the highest id: the fresh-context loop grew by gigabytes. Counted by a global
//! allocator (`support/counting_alloc.rs`): exact, whatever the machine; RSS is printed for
//! information. Alone in its test binary: the count is per process. The full run of RSS, next
//! to Kong's library, is `scripts/rss-check contexts`.

#[path = "support/context_loops.rs"]
mod context_loops;
#[path = "support/counting_alloc.rs"]
mod counting_alloc;
#[path = "support/rss.rs"]
#[allow(dead_code)]
mod rss;

use context_loops::{Loop, Ours};
use rss::{mib, rss_bytes};

/// What the test harness may hold at one sample and not the other (its progress output is
/// allocated on another thread): far below what leaking one allocation or one byte a request
/// adds over the 89,999 requests between the samples.
const SLACK: (i64, i64) = (1024, 8);

#[test]
fn new_header_names_in_every_request_leave_no_heap_behind() {
    let ours = Ours::new();
    for kind in [Loop::Reused, Loop::Fresh] {
        let (mut warm, mut end) = ((0, 0), (0, 0));
        let mut warm_rss = 0;
        ours.run(kind, 100_000, |i| {
            // Both samples are taken at the same point of a request, with a header name of
            // the same length (5 digits) being built.
            if i == 10_000 {
                warm = counting_alloc::live();
                warm_rss = rss_bytes();
            } else if i == 99_999 {
                end = counting_alloc::live();
            }
        });
        let end_rss = rss_bytes();
        println!(
            "{kind:?}: live heap after 10,000 requests {} bytes in {} blocks, after 100,000 {} \
             bytes in {} blocks; RSS {:.1} MiB, then {:.1} MiB",
            warm.0,
            warm.1,
            end.0,
            end.1,
            mib(warm_rss),
            mib(end_rss)
        );
        assert!(
            end.0 - warm.0 <= SLACK.0 && end.1 - warm.1 <= SLACK.1,
            "{kind:?}: 90,000 requests left {} bytes in {} blocks allocated",
            end.0 - warm.0,
            end.1 - warm.1
        );
    }
}
