//! Shared set-up of the criterion benchmarks (`benches/`) and of the `atc-bench` diagnosis tool
//! (`src/bin/atc-bench.rs`): docs/workload.md tables loaded into routers, requests loaded into
//! contexts, the request the benchmarks time, and an allocator that counts live bytes (for
//! memory per route).
//!
//! Invariant: the benchmarks and `atc-bench` get their tables, requests and timed calls from
//! here, so that a figure of one (candidates per request, time per request of a family and mix)
//! is a figure of the other. The seeds are [`TABLE_SEED`] and [`REQUEST_SEED`]: change them
//! here or nowhere.

pub mod args;
pub mod operators;

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use atc_router::request::http_schema_with;
use atc_router::{CaptureKey, Context, Limits, RouteSpec, Router, Schema, Uuid, Value};
use atc_workload::{Mix, Request, Table};

/// Wildcard names a benchmark schema takes: the field-per-route stress family registers one
/// header name per route, past the default limit (65,536) at 100,000 routes.
pub const MAX_WILDCARD_FIELDS: usize = 1 << 20;

/// The schema every WORKLOAD table is written against (default limits, but for
/// [`MAX_WILDCARD_FIELDS`]).
pub fn schema() -> Arc<Schema> {
    Arc::new(http_schema_with(Limits {
        max_wildcard_fields: MAX_WILDCARD_FIELDS,
        ..Limits::default()
    }))
}

/// The seed of every benchmark table (`Table::family(family, n, TABLE_SEED)`).
pub const TABLE_SEED: u64 = 1;

/// The seed of every benchmark request list (`requests(table, mix, count, REQUEST_SEED)`).
pub const REQUEST_SEED: u64 = 42;

/// A router holding `table`, built one `add` at a time, then [`Router::settle`]d.
pub fn build(table: &Table, schema: &Arc<Schema>) -> Router {
    let mut r = Router::new(schema.clone());
    for route in &table.routes {
        r.add(
            Uuid::from_bytes(route.id),
            route.priority,
            &route.expression,
        )
        .unwrap_or_else(|e| panic!("{}\n{e}", route.expression));
    }
    // As the docs ask of a table loaded route by route: its flat index written whole once.
    r.settle();
    r
}

pub fn value(v: &atc_workload::Value) -> Value {
    match v {
        atc_workload::Value::Str(s) => Value::String(s.clone()),
        atc_workload::Value::Int(i) => Value::Int(*i),
        atc_workload::Value::Ip(a) => Value::IpAddr(*a as IpAddr),
    }
}

pub fn fill(ctx: &mut Context, req: &Request) {
    ctx.reset();
    for (f, v) in &req.fields {
        ctx.add_value(f, value(v))
            .expect("workload request fits the schema");
    }
}

/// The table whole, then its non-regex and its regex routes as tables of their own: the three
/// views the memory and build reports compare.
pub fn split_by_regex(table: &Table) -> [(&'static str, Table); 3] {
    let (regex, plain): (Vec<_>, Vec<_>) = table
        .routes
        .iter()
        .cloned()
        .partition(|r| r.expression.contains('~'));
    let t = |routes| Table {
        routes,
        catch_all: false,
    };
    [
        ("all", t(table.routes.clone())),
        ("non-regex", t(plain)),
        ("regex", t(regex)),
    ]
}

/// `table` as the desired list [`Router::sync`] takes, borrowing its expressions.
pub fn specs(table: &Table) -> Vec<RouteSpec<'_>> {
    table
        .routes
        .iter()
        .map(|r| RouteSpec {
            id: Uuid::from_bytes(r.id),
            priority: r.priority,
            expression: &r.expression,
        })
        .collect()
}

/// One filled context per request of the first `n` requests of a mix.
pub fn contexts(table: &Table, schema: &Arc<Schema>, mix: Mix, n: usize) -> Vec<Context> {
    atc_workload::requests(table, mix, n, REQUEST_SEED)
        .iter()
        .map(|req| {
            let mut ctx = Context::new(schema.clone());
            fill(&mut ctx, req);
            ctx
        })
        .collect()
}

/// Mean and max candidates per request (the routes the index hands to evaluation).
pub fn candidate_stats(router: &Router, ctxs: &mut [Context]) -> (f64, usize) {
    let counts: Vec<usize> = ctxs.iter_mut().map(|c| router.candidate_count(c)).collect();
    let max = counts.iter().copied().max().unwrap_or(0);
    let mean = counts.iter().sum::<usize>() as f64 / counts.len().max(1) as f64;
    (mean, max)
}

/// Counts bytes currently allocated through it; install with `#[global_allocator]`.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarding the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`/`dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes allocated and not yet freed (only with [`CountingAlloc`] installed).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Number of allocations so far (only with [`CountingAlloc`] installed).
pub fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// What the `match/…/ours/…` benchmarks time per request: our execute, with the winner's
/// captures read when it has any (as a gateway does).
#[inline]
pub fn execute_reading_captures(router: &Router, ctx: &mut Context) -> bool {
    let hit = router.execute(ctx);
    if let Some(m) = ctx.result() {
        for c in m.captures() {
            std::hint::black_box(c);
        }
    }
    hit
}

/// Whether the route that wins `ctx` records regex groups (executes it).
pub fn records_groups(router: &Router, ctx: &mut Context) -> bool {
    router.execute(ctx);
    ctx.result()
        .is_some_and(|m| m.captures().any(|(k, _)| k != CaptureKey::Index(0)))
}

/// Splits requests into those whose winning route records no regex group and those whose does.
pub fn split_by_captures(router: &Router, ctxs: Vec<Context>) -> (Vec<Context>, Vec<Context>) {
    let (mut plain, mut capturing) = (Vec::new(), Vec::new());
    for mut ctx in ctxs {
        if records_groups(router, &mut ctx) {
            capturing.push(ctx);
        } else {
            plain.push(ctx);
        }
    }
    (plain, capturing)
}

/// What matchit, the path radix router the `request/` bench sets beside ours, holds for a table
/// of method + path routes: each path template (a regex path as its `{name}` template) leads to
/// the routes of each method on it. Routes without a method or a path template are left out
/// (matchit has no other fields; the rest-api family has none).
pub struct MatchitTable {
    router: matchit::Router<Vec<(String, usize)>>,
}

impl MatchitTable {
    pub fn new(table: &Table) -> MatchitTable {
        use atc_workload::{Cond, PathMatch};
        let mut by_path: std::collections::BTreeMap<String, Vec<(String, usize)>> =
            Default::default();
        for (i, r) in table.routes.iter().enumerate() {
            let method = r.shape.conds.iter().find_map(|c| match c {
                Cond::Methods(m) => m.first().cloned(),
                _ => None,
            });
            let template = r.shape.conds.iter().find_map(|c| match c {
                Cond::Path(alts) => match &alts[0] {
                    PathMatch::Exact(p) => Some(p.clone()),
                    PathMatch::Regex(re) => Some(re.template()),
                    _ => None,
                },
                _ => None,
            });
            if let (Some(m), Some(t)) = (method, template) {
                by_path.entry(t).or_default().push((m, i));
            }
        }
        let mut router = matchit::Router::new();
        for (t, routes) in by_path {
            router
                .insert(t.as_str(), routes)
                .unwrap_or_else(|e| panic!("matchit refuses {t}: {e}"));
        }
        MatchitTable { router }
    }

    /// The request as the bench times it for matchit: the path looked up, the method picked
    /// among the path's routes, every parameter read.
    #[inline]
    pub fn request(&self, method: &str, path: &str) -> bool {
        match self.router.at(path) {
            Ok(m) => match m.value.iter().find(|(rm, _)| rm == method) {
                Some((_, i)) => {
                    std::hint::black_box(i);
                    for kv in m.params.iter() {
                        std::hint::black_box(kv);
                    }
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    }
}

/// A request's method and path, as matchit is asked (empty when the request has none).
pub fn method_and_path(req: &Request) -> (String, String) {
    let text = |name: &str| {
        req.fields.iter().find_map(|(f, v)| match v {
            atc_workload::Value::Str(s) if f == name => Some(s.clone()),
            _ => None,
        })
    };
    (
        text("http.method").unwrap_or_default(),
        text("http.path").unwrap_or_default(),
    )
}
