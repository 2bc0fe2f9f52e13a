//! `atc_router_stats` and `atc_router_count_bad_request` through the C ABI: executes counted as
//! routed or not found; every update call counted as applied or refused, the C layer's own
//! refusals (ids that are not UUIDs, bad routes in an all-or-nothing sync) included; background
//! applies counted with the builder's time, and the counts kept across the swap; the `size`
//! rule (a smaller struct gets the fields that fit, nothing is written past it); NULLs.

use std::ffi::c_char;
use std::mem::{offset_of, size_of};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use atc_router_ffi::*;

#[path = "support/route_list.rs"]
mod route_list;
use route_list::route_list;

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

fn id(i: usize) -> String {
    format!("a8f2c1e4-0000-4000-8000-{i:012}")
}

struct Table {
    ids: Vec<String>,
    exprs: Vec<String>,
}

impl Table {
    fn new(n: usize, tag: &str) -> Table {
        Table {
            ids: (0..n).map(id).collect(),
            exprs: (0..n)
                .map(|i| format!(r#"http.path ^= "/r{i}/{tag}""#))
                .collect(),
        }
    }

    fn routes(&self) -> Vec<AtcRoute> {
        self.ids
            .iter()
            .zip(&self.exprs)
            .enumerate()
            .map(|(i, (id, e))| AtcRoute {
                id: p(id),
                id_len: id.len(),
                priority: i as u64,
                expr: p(e),
                expr_len: e.len(),
                position: 0,
            })
            .collect()
    }
}

unsafe fn setup() -> (*mut AtcSchema, *mut AtcRouter, *mut AtcContext, u32) {
    let s = atc_schema_new();
    let name = "http.path";
    let rc = atc_schema_add_field(
        s,
        p(name),
        name.len(),
        ATC_TYPE_STRING,
        null_mut(),
        null_mut(),
    );
    assert_eq!(rc, ATC_OK);
    let r = atc_router_new(s, null_mut(), null_mut());
    let c = atc_context_new(s, null_mut(), null_mut());
    let mut fid = 0u32;
    let rc = atc_context_field_id(
        c,
        p(name),
        name.len(),
        &mut fid,
        null_mut(),
        null_mut(),
        null_mut(),
    );
    assert_eq!(rc, ATC_OK);
    (s, r, c, fid)
}

/// Executes `path`: 1 routed, 0 not.
unsafe fn execute(r: *mut AtcRouter, c: *mut AtcContext, fid: u32, path: &str) -> i32 {
    assert_eq!(atc_context_reset(c), ATC_OK);
    let rc = atc_context_add_str(c, fid, p(path), path.len(), null_mut(), null_mut());
    assert_eq!(rc, ATC_OK);
    atc_router_execute(r, c)
}

unsafe fn stats(r: *const AtcRouter) -> AtcStats {
    let mut out = AtcStats {
        size: size_of::<AtcStats>(),
        ..Default::default()
    };
    assert_eq!(atc_router_stats(r, &mut out), ATC_OK);
    assert_eq!(
        out.size,
        offset_of!(AtcStats, broken) + size_of::<i32>(),
        "every field of this version filled"
    );
    out
}

unsafe fn sync(r: *mut AtcRouter, routes: &[AtcRoute], mode: i32) -> i32 {
    let mut report = AtcSyncReport::default();
    let l = route_list(routes);
    let rc = atc_router_sync(
        r,
        l,
        mode,
        &mut report,
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
    );
    atc_route_list_free(l);
    rc
}

#[test]
fn executes_and_bad_requests_are_counted() {
    unsafe {
        let (s, r, c, fid) = setup();
        assert_eq!(stats(r).routed, 0);
        assert_eq!(sync(r, &Table::new(5, "a").routes(), 0), ATC_OK);
        for _ in 0..3 {
            assert_eq!(execute(r, c, fid, "/r1/a"), 1);
        }
        assert_eq!(execute(r, c, fid, "/none"), 0);
        // A context of another schema: no answer, in neither count.
        let (s2, r2, c2, fid2) = setup();
        assert_eq!(execute(r, c2, fid2, "/r1/a"), ATC_ERR_SCHEMA_MISMATCH);
        assert_eq!(atc_router_count_bad_request(r), ATC_OK);
        assert_eq!(atc_router_count_bad_request(std::ptr::null()), ATC_ERR_NULL);
        let st = stats(r);
        assert_eq!((st.routed, st.not_found, st.bad_requests), (3, 1, 1));
        assert_eq!((st.routes, st.broken), (5, 0));
        assert_eq!(stats(r2).routed, 0, "per router");
        atc_context_free(c2);
        atc_router_free(r2);
        atc_schema_free(s2);
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn every_update_call_counts_as_applied_or_refused() {
    unsafe {
        let (s, r, c, _) = setup();
        let (ok, bad) = (r#"http.path ^= "/a""#, "http.path ^=");
        let add = |uuid: &str, expr: &str| {
            atc_router_add(
                r,
                1,
                p(uuid),
                uuid.len(),
                p(expr),
                expr.len(),
                null_mut(),
                null_mut(),
            )
        };
        let remove = |uuid: &str| atc_router_remove(r, p(uuid), uuid.len(), null_mut(), null_mut());
        assert_eq!(add(&id(1), ok), ATC_OK);
        assert_eq!(add(&id(2), bad), ATC_ERR_EXPR);
        assert_eq!(
            add("not-a-uuid", ok),
            ATC_ERR_UUID,
            "refused before the core"
        );
        assert_eq!(add(&id(1), ok), ATC_ERR_DUPLICATE);
        assert_eq!(remove("nope"), ATC_ERR_UUID);
        assert_eq!(remove(&id(9)), ATC_ERR_NOT_FOUND);
        assert_eq!(remove(&id(1)), ATC_OK);
        // A NULL where a string belongs is a bad call, not an update.
        let rc = atc_router_add(
            r,
            1,
            std::ptr::null(),
            5,
            p(ok),
            ok.len(),
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_ERR_NULL);
        let st = stats(r);
        assert_eq!((st.updates_applied, st.updates_refused), (2, 5));
        assert!(st.last_update_hold_us <= st.last_build_us + 1);

        // Syncs: applied; refused by the core (an invalid expression); refused by the C layer
        // (an id that is not a UUID, all or nothing); apply-valid with that id (applied).
        let t = Table::new(10, "a");
        assert_eq!(sync(r, &t.routes(), ATC_SYNC_ALL_OR_NOTHING), ATC_OK);
        let mut routes = t.routes();
        routes[3].expr = p(bad);
        routes[3].expr_len = bad.len();
        assert_eq!(sync(r, &routes, ATC_SYNC_ALL_OR_NOTHING), ATC_ERR_ROUTES);
        let mut routes = t.routes();
        routes[4].id = p("x");
        routes[4].id_len = 1;
        assert_eq!(sync(r, &routes, ATC_SYNC_ALL_OR_NOTHING), ATC_ERR_ROUTES);
        assert_eq!(sync(r, &routes, ATC_SYNC_APPLY_VALID), ATC_OK);
        // Bad calls are no updates: an unknown mode, a NULL list.
        assert_eq!(sync(r, &t.routes(), 7), ATC_ERR_INVALID);
        let rc = atc_router_sync(
            r,
            std::ptr::null(),
            ATC_SYNC_ALL_OR_NOTHING,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_ERR_NULL);
        let st = stats(r);
        assert_eq!((st.updates_applied, st.updates_refused), (4, 7));
        assert_eq!(st.routes, 9);
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn a_smaller_struct_gets_the_fields_that_fit_and_nothing_past_them() {
    unsafe {
        let (s, r, c, fid) = setup();
        assert_eq!(sync(r, &Table::new(3, "a").routes(), 0), ATC_OK);
        assert_eq!(execute(r, c, fid, "/r0/a"), 1);
        assert_eq!(execute(r, c, fid, "/x"), 0);
        // A caller whose struct ends after `not_found` (an older header, say), in a buffer
        // whose bytes past that must stay as they were.
        let end = offset_of!(AtcStats, not_found) + size_of::<u64>();
        let mut buf = vec![0xAAu8; size_of::<AtcStats>() + 16];
        // Declared one byte into `bad_requests`: a field that does not fit whole is not written.
        buf[..size_of::<usize>()].copy_from_slice(&(end + 3).to_ne_bytes());
        let out = buf.as_mut_ptr().cast::<AtcStats>();
        assert_eq!(atc_router_stats(r, out), ATC_OK);
        let read = |at: usize| u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap());
        assert_eq!(read(0) as usize, end, "size says how far it filled");
        assert_eq!(read(offset_of!(AtcStats, routed)), 1);
        assert_eq!(read(offset_of!(AtcStats, not_found)), 1);
        assert!(
            buf[end..].iter().all(|&b| b == 0xAA),
            "nothing written past the fields"
        );

        // Too small to hold `size` itself; NULLs.
        let mut tiny = AtcStats {
            size: 4,
            ..Default::default()
        };
        assert_eq!(atc_router_stats(r, &mut tiny), ATC_ERR_INVALID);
        assert_eq!(atc_router_stats(r, null_mut()), ATC_ERR_NULL);
        let mut full = AtcStats {
            size: size_of::<AtcStats>(),
            ..Default::default()
        };
        assert_eq!(atc_router_stats(std::ptr::null(), &mut full), ATC_ERR_NULL);
        // A larger struct (a later header): filled up to this version's last field.
        let mut big = vec![0u8; size_of::<AtcStats>() + 64];
        let big_len = big.len();
        big[..size_of::<usize>()].copy_from_slice(&big_len.to_ne_bytes());
        assert_eq!(atc_router_stats(r, big.as_mut_ptr().cast()), ATC_OK);
        let filled = usize::from_ne_bytes(big[..size_of::<usize>()].try_into().unwrap());
        assert_eq!(filled, offset_of!(AtcStats, broken) + size_of::<i32>());
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

unsafe fn start(r: *mut AtcRouter, version: u64, t: &Table) {
    let list = atc_route_list_new();
    let routes = t.routes();
    assert_eq!(
        atc_route_list_add(list, routes.as_ptr(), routes.len(), null_mut(), null_mut()),
        ATC_OK
    );
    let rc = atc_router_sync_start(r, version, list, 0, null_mut(), null_mut());
    assert_eq!(rc, ATC_OK);
}

unsafe fn apply_when_ready(r: *mut AtcRouter) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(120);
    while atc_router_sync_ready(r) != 1 {
        assert!(Instant::now() < deadline, "no outcome");
        std::thread::sleep(Duration::from_millis(1));
    }
    atc_router_sync_apply(
        r,
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut(),
    )
}

#[test]
fn background_applies_count_with_the_builders_time_and_keep_the_counts() {
    unsafe {
        let (s, r, c, fid) = setup();
        assert_eq!(execute(r, c, fid, "/r1/a"), 0);
        start(r, 1, &Table::new(5000, "a"));
        assert_eq!(apply_when_ready(r), ATC_OK);
        assert_eq!(execute(r, c, fid, "/r1/a"), 1);
        let st = stats(r);
        assert_eq!((st.routed, st.not_found), (1, 1), "kept across the swap");
        assert_eq!(
            (st.updates_applied, st.updates_refused, st.routes),
            (1, 0, 5000)
        );
        assert!(st.last_build_us > 0, "the builder's time: {st:?}");
        assert!(
            st.last_update_hold_us < st.last_build_us,
            "a swap holds less than a 5,000-route build: {st:?}"
        );

        // Refused in the background: counted, the table stays.
        let mut bad = Table::new(5000, "b");
        bad.exprs[10] = "http.path ~".into();
        start(r, 2, &bad);
        assert_eq!(apply_when_ready(r), ATC_ERR_ROUTES);
        // Panicked: counted as refused.
        atc_router::panic_next_build_failpoint(0x57a7_0003);
        start(r, 0x57a7_0003, &Table::new(10, "c"));
        assert_eq!(apply_when_ready(r), ATC_ERR_PANIC);
        start(r, 4, &Table::new(5000, "a"));
        assert_eq!(apply_when_ready(r), ATC_OK);
        let st = stats(r);
        assert_eq!((st.updates_applied, st.updates_refused), (2, 2));
        assert_eq!(st.routes, 5000);
        assert_eq!(st.routed, 1);
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}
