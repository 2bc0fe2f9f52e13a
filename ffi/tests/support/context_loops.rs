//! Request loops that feed a new header name with every request, measuring the resident set
//! size: request data must never grow configuration or per-context memory. Shared by
//! `ffi/tests/rss_contexts.rs` (a short run with the test suite) and
//! `ffi/examples/rss_contexts.rs` (the full run, ours and Kong's library side by side,
//! `scripts/rss-check contexts`).
//!
//! Two loops, as a gateway runs them: one context reused (reset) for every request, and a fresh
//! context created and freed for every request. Each request carries a path and one header whose
//! name no earlier request used (a client sending random headers); the router has routes on a
//! few other headers.

use std::ffi::c_char;
use std::ptr::null_mut;

use atc_router_ffi::*;

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

/// Which loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// One context, reset between requests.
    Reused,
    /// A context created and freed for each request.
    Fresh,
}

/// A schema and router through the C ABI, freed on drop.
pub struct Ours {
    schema: *mut AtcSchema,
    router: *mut AtcRouter,
    path: u32,
}

impl Ours {
    pub fn new() -> Ours {
        unsafe {
            let schema = atc_schema_new();
            for (name, ty) in [
                ("http.path", ATC_TYPE_STRING),
                ("http.headers.*", ATC_TYPE_STRING),
            ] {
                let rc =
                    atc_schema_add_field(schema, p(name), name.len(), ty, null_mut(), null_mut());
                assert_eq!(rc, ATC_OK);
            }
            let router = atc_router_new(schema, null_mut(), null_mut());
            for i in 0..8 {
                let id = format!("a8f2c1e4-0000-4000-8000-00000000000{i}");
                let expr = format!(r#"http.path ^= "/" && http.headers.x_route_{i} == "yes""#);
                let rc = atc_router_add(
                    router,
                    1,
                    p(&id),
                    id.len(),
                    p(&expr),
                    expr.len(),
                    null_mut(),
                    null_mut(),
                );
                assert_eq!(rc, ATC_OK);
            }
            let ctx = atc_context_new(schema, null_mut(), null_mut());
            let path = field_id(ctx, "http.path");
            atc_context_free(ctx);
            Ours {
                schema,
                router,
                path,
            }
        }
    }

    /// Runs `requests` requests of `kind`, calling `each(i)` after request `i`.
    pub fn run(&self, kind: Loop, requests: usize, mut each: impl FnMut(usize)) {
        unsafe {
            let mut reused = atc_context_new(self.schema, null_mut(), null_mut());
            for i in 0..requests {
                let ctx = match kind {
                    Loop::Reused => {
                        atc_context_reset(reused);
                        reused
                    }
                    Loop::Fresh => atc_context_new(self.schema, null_mut(), null_mut()),
                };
                let path = "/api/items";
                assert_eq!(
                    atc_context_add_str(
                        ctx,
                        self.path,
                        p(path),
                        path.len(),
                        null_mut(),
                        null_mut()
                    ),
                    ATC_OK
                );
                let header = format!("http.headers.x_random_{i}");
                let id = field_id(ctx, &header);
                assert_eq!(
                    atc_context_add_str(ctx, id, p("v"), 1, null_mut(), null_mut()),
                    ATC_OK
                );
                assert_eq!(atc_router_execute(self.router, ctx), 0);
                if kind == Loop::Fresh {
                    atc_context_free(ctx);
                }
                each(i);
            }
            atc_context_free(std::mem::replace(&mut reused, null_mut()));
        }
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        unsafe {
            atc_router_free(self.router);
            atc_schema_free(self.schema);
        }
    }
}

unsafe fn field_id(ctx: *mut AtcContext, name: &str) -> u32 {
    let mut id = 0;
    let rc = atc_context_field_id(
        ctx,
        p(name),
        name.len(),
        &mut id,
        null_mut(),
        null_mut(),
        null_mut(),
    );
    assert_eq!(rc, ATC_OK, "{name}");
    id
}
