//! Create-and-free cycles through the C ABI, measuring the resident set size (RSS): a gateway
//! that rebuilds its router on every configuration change must not grow. Shared by
//! `ffi/examples/rss_check.rs` (1,000 cycles of a 10,000-route table, `scripts/rss-check`) and
//! `ffi/tests/rss.rs` (a short version that runs with the test suite).
//!
//! One cycle: a schema with the docs/workload.md fields, a router with every route of an atc_workload
//! table, four contexts serving requests of the realistic mix (every request must match: the
//! table has a catch-all), then everything freed, the schema first (the handles keep its data
//! alive, as documented).

use std::ffi::c_char;
use std::ptr::null_mut;

use atc_router::request::HTTP_FIELDS;
use atc_router_ffi::*;
use atc_workload::{requests, Mix, Table, Value};

/// A route table and requests, generated once and replayed by every cycle.
pub struct Workload {
    routes: Vec<(u64, String, String)>,
    requests: Vec<Vec<(String, Value)>>,
}

impl Workload {
    pub fn new(routes: usize, requests_per_cycle: usize) -> Workload {
        let table = Table::generate(routes, 1, true);
        let reqs = requests(&table, Mix::Realistic, requests_per_cycle, 2)
            .into_iter()
            .map(|r| r.fields)
            .collect();
        Workload {
            routes: table
                .routes
                .iter()
                .map(|r| (r.priority, r.id_string(), r.expression.clone()))
                .collect(),
            requests: reqs,
        }
    }

    pub fn routes(&self) -> usize {
        self.routes.len()
    }
}

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

/// One create-use-free cycle. Panics if any call fails or a request does not match.
pub fn cycle(w: &Workload) {
    unsafe {
        let schema = atc_schema_new();
        for (name, ty) in HTTP_FIELDS {
            let rc = atc_schema_add_field(
                schema,
                p(name),
                name.len(),
                type_code(*ty),
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK, "{name}");
        }
        let router = atc_router_new(schema, null_mut(), null_mut());
        assert!(!router.is_null());
        for (priority, id, expr) in &w.routes {
            let rc = atc_router_add(
                router,
                *priority,
                p(id),
                id.len(),
                p(expr),
                expr.len(),
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK, "{expr}");
        }
        let contexts: Vec<*mut AtcContext> = (0..4)
            .map(|_| atc_context_new(schema, null_mut(), null_mut()))
            .collect();
        // The schema handle is not needed any more: routers and contexts keep its data alive.
        atc_schema_free(schema);
        let mut uuid = [0 as c_char; ATC_UUID_LEN];
        for (i, request) in w.requests.iter().enumerate() {
            let ctx = contexts[i % contexts.len()];
            assert_eq!(atc_context_reset(ctx), ATC_OK);
            for (field, value) in request {
                let mut id = 0;
                let rc = atc_context_field_id(
                    ctx,
                    p(field),
                    field.len(),
                    &mut id,
                    null_mut(),
                    null_mut(),
                    null_mut(),
                );
                assert_eq!(rc, ATC_OK, "{field}");
                let rc = match value {
                    Value::Str(s) => {
                        atc_context_add_str(ctx, id, p(s), s.len(), null_mut(), null_mut())
                    }
                    Value::Int(n) => atc_context_add_int(ctx, id, *n, null_mut(), null_mut()),
                    Value::Ip(a) => {
                        let text = a.to_string();
                        atc_context_add_ip(ctx, id, p(&text), text.len(), null_mut(), null_mut())
                    }
                };
                assert_eq!(rc, ATC_OK, "{field}");
            }
            assert_eq!(
                atc_router_execute(router, ctx),
                1,
                "request {i} matched nothing"
            );
            let mut len = uuid.len();
            let rc = atc_context_result(
                ctx,
                std::ptr::null(),
                uuid.as_mut_ptr(),
                &mut len,
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, 1);
        }
        // Contexts first or last makes no difference to the contract; alternate it.
        for c in contexts {
            atc_context_free(c);
        }
        atc_router_free(router);
    }
}

extern "C" {
    fn sysconf(name: i32) -> i64;
}
/// `_SC_PAGESIZE` on Linux (glibc and musl).
const SC_PAGESIZE: i32 = 30;

/// The resident set size of this process in bytes: the second field of `/proc/self/statm`
/// (resident pages) times the page size.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm has a resident field");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { sysconf(SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
