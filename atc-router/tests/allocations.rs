//! No heap allocation per request in steady state: once a context's buffers have grown, a
//! request cycle (reset, add values, execute, read the result) allocates nothing, on every mix
//! of the WORKLOAD tables: exact, prefix, suffix and regex routes, captures, `lower()` headers;
//! from the router and from its table image.
//!
//! Exception, by design: `lower()` of a non-ASCII value uses `str::to_lowercase`, which allocates.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use atc_router::{Context, ImageRouter, Router, Uuid, Value};
use atc_workload::{requests, Mix, Table};

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarding the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What matching a request from a table is, for the cycle below: two-phase matching's question
/// (its answer is what a gateway reads next), then execute.
trait Matcher {
    fn needed(&self, ctx: &mut Context) -> u64;
    fn run(&self, ctx: &mut Context) -> bool;
}

impl Matcher for Router {
    fn needed(&self, ctx: &mut Context) -> u64 {
        self.needed_fields(ctx)
    }
    fn run(&self, ctx: &mut Context) -> bool {
        self.execute(ctx)
    }
}

impl Matcher for ImageRouter {
    fn needed(&self, ctx: &mut Context) -> u64 {
        self.needed_fields(ctx)
    }
    fn run(&self, ctx: &mut Context) -> bool {
        self.execute(ctx)
    }
}

/// Runs every request of `table`'s mixes twice through `matcher` and asserts the second round
/// (steady state) allocated nothing.
fn assert_steady(
    name: &str,
    schema: &std::sync::Arc<atc_router::Schema>,
    table: &Table,
    matcher: &dyn Matcher,
) {
    // Requests with their fields resolved once, as a gateway (or the C ABI) does.
    let mut reqs = Vec::new();
    for mix in Mix::all() {
        for req in requests(table, mix, 200, 9) {
            let fields: Vec<_> = req
                .fields
                .iter()
                .map(|(f, v)| (schema.resolve(f).unwrap().0, v.clone()))
                .collect();
            reqs.push(fields);
        }
    }
    let path = schema.resolve("http.path").unwrap().0;
    let mut ctx = Context::new(schema.clone());
    let cycle = |ctx: &mut Context| {
        let mut matched = 0usize;
        for fields in &reqs {
            ctx.reset();
            for (id, v) in fields {
                match v {
                    atc_workload::Value::Str(s) => ctx.add_str(*id, s).unwrap(),
                    atc_workload::Value::Int(i) => {
                        ctx.add_value_by_id(*id, Value::Int(*i)).unwrap()
                    }
                    atc_workload::Value::Ip(a) => ctx
                        .add_value_by_id(*id, Value::IpAddr(*a as IpAddr))
                        .unwrap(),
                }
            }
            matched += matcher.needed(ctx).count_ones() as usize;
            if matcher.run(ctx) {
                let m = ctx.result().unwrap();
                matched += m.id().as_bytes()[0] as usize;
                matched += m.matched_value_by_id(path).is_some() as usize;
                matched += m.captures().count();
            }
        }
        matched
    };
    let warm = cycle(&mut ctx);
    COUNTING.store(true, Ordering::SeqCst);
    let steady = cycle(&mut ctx);
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(warm, steady, "{name}");
    assert!(steady > 0, "{name}");
    assert_eq!(
        ALLOCATIONS.swap(0, Ordering::SeqCst),
        0,
        "{name}: allocations during {} steady-state requests",
        reqs.len()
    );
}

#[test]
fn a_request_cycle_allocates_nothing_in_steady_state() {
    let schema = common::workload_schema();
    let table = Table::generate(2_000, 5, true);
    let mut router = Router::new(schema.clone());
    for r in &table.routes {
        router
            .add(Uuid::from_bytes(r.id), r.priority, &r.expression)
            .unwrap();
    }
    // Walking the tree (a table loaded route by route, not yet settled), then the flat index
    // with an overlay of routes added since, then the flat index alone.
    assert_steady("router", &schema, &table, &router);
    router.settle();
    let more = Table::generate(100, 6, true).routes;
    for r in &more {
        router
            .add(Uuid::from_bytes(r.id), r.priority, &r.expression)
            .unwrap();
    }
    assert_eq!(
        router.flat_state().map(|(changes, _)| changes),
        Some(more.len())
    );
    assert_steady(
        "router with a flat index and an overlay",
        &schema,
        &table,
        &router,
    );
    router.settle();
    assert_steady("router with a flat index", &schema, &table, &router);
    // The same table matched from its image (what a worker sharing a node's table runs).
    let image = ImageRouter::from_bytes(schema.clone(), router.to_image().unwrap()).unwrap();
    assert_steady("image router", &schema, &table, &image);
}
