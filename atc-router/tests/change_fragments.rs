//! A route change shrinks no allocation in place.
//!
//! glibc files the tail cut off a shrunk allocation as a small free fragment; a route change that
//! leaves a few of them behind every time piles up tens of thousands after some thousand changes,
//! and then one allocation merges them all: milliseconds for a change that otherwise costs
//! microseconds (`benches/examples/change_latency.rs`). So what a route keeps is allocated at its
//! size from the start (`atc-router/src/fitted.rs`). Compiling a new regex is the exception:
//! the regex crates shrink their own buffers, so the changes checked here reuse cached regexes.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use atc_router::{Router, Uuid};
use atc_workload::{Family, Table};

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static SHRINKS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarding the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size < layout.size() && COUNTING.load(Ordering::Relaxed) {
            SHRINKS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Shrinking reallocations while `f` runs: one test counts at a time (the counter is global).
fn shrinks(f: impl FnOnce()) -> usize {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = SHRINKS.load(Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    f();
    COUNTING.store(false, Ordering::Relaxed);
    SHRINKS.load(Ordering::Relaxed) - before
}

fn router_of(table: &Table) -> Router {
    let mut r = Router::new(common::workload_schema());
    for route in &table.routes {
        r.add(
            Uuid::from_bytes(route.id),
            route.priority,
            &route.expression,
        )
        .unwrap();
    }
    r
}

#[test]
fn changing_routes_of_every_family_shrinks_nothing() {
    let mut checked = 0;
    for family in Family::all() {
        let table = Table::family(family, 600, 3);
        let changed = table.with_changes(40, 7);
        let mut router = router_of(&table);
        for (before, after) in table.routes.iter().zip(&changed.routes) {
            // A new regex is compiled by the regex crates, which shrink their own buffers.
            if before.expression == after.expression || after.expression.contains('~') {
                continue;
            }
            let id = Uuid::from_bytes(before.id);
            let n = shrinks(|| {
                assert!(router.remove(id));
                router.add(id, after.priority, &after.expression).unwrap();
            });
            assert_eq!(n, 0, "{}: changing to {}", family.name(), after.expression);
            checked += 1;
        }
    }
    assert!(checked > 200, "{checked} changes checked");
}

#[test]
fn changing_a_route_whose_regexes_are_cached_shrinks_nothing() {
    let mut router = Router::new(common::workload_schema());
    let keep = r#"http.path ~ "^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues/(?<n>\\d+)$""#;
    router.add(Uuid::from_u128(1), 10, keep).unwrap();
    let routes = [
        format!(r#"{keep} && http.host == "a.example.com""#),
        format!(r#"({keep} || http.path ^= "/v2/repos/") && http.method == "POST""#),
    ];
    router.add(Uuid::from_u128(2), 5, &routes[0]).unwrap();
    for k in 0..20 {
        let n = shrinks(|| {
            router.remove(Uuid::from_u128(2));
            router
                .add(Uuid::from_u128(2), 5, &routes[(k + 1) % 2])
                .unwrap();
        });
        assert_eq!(n, 0, "change {k}");
    }
}
