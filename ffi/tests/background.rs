//! Background syncs through the C ABI: a route list (in chunks, or as one text, copied or
//! borrowed) is built on the router's builder thread while the current table answers, and
//! `atc_router_sync_apply` swaps it in; refusals, panics and frees leave the current table
//! serving and touch nothing freed.

use std::ffi::c_char;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use atc_router_ffi::*;

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

    fn tsv(&self) -> String {
        self.ids
            .iter()
            .zip(&self.exprs)
            .enumerate()
            .map(|(i, (id, e))| format!("{i}\t{id}\t{e}\n"))
            .collect()
    }
}

unsafe fn setup() -> (*mut AtcSchema, *mut AtcRouter) {
    let s = atc_schema_new();
    let name = "http.path";
    assert_eq!(
        atc_schema_add_field(
            s,
            p(name),
            name.len(),
            ATC_TYPE_STRING,
            null_mut(),
            null_mut()
        ),
        ATC_OK
    );
    (s, atc_router_new(s, null_mut(), null_mut()))
}

/// The matched route's id for `path`, or `None`.
unsafe fn route_of(s: *mut AtcSchema, r: *mut AtcRouter, path: &str) -> Option<String> {
    let c = atc_context_new(s, null_mut(), null_mut());
    let mut fid = 0u32;
    let name = "http.path";
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
    assert_eq!(
        atc_context_add_str(c, fid, p(path), path.len(), null_mut(), null_mut()),
        ATC_OK
    );
    let out = match atc_router_execute(r, c) {
        1 => {
            let mut uuid = [0 as c_char; ATC_UUID_LEN];
            let mut uuid_len = uuid.len();
            let rc = atc_context_result(
                c,
                std::ptr::null(),
                uuid.as_mut_ptr(),
                &mut uuid_len,
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, 1);
            Some(String::from_utf8(uuid.iter().map(|&b| b as u8).collect()).unwrap())
        }
        0 => None,
        rc => panic!("execute: {rc}"),
    };
    atc_context_free(c);
    out
}

unsafe fn start(r: *mut AtcRouter, version: u64, t: &Table, chunk: usize, mode: i32) {
    let list = atc_route_list_new();
    for part in t.routes().chunks(chunk.max(1)) {
        assert_eq!(
            atc_route_list_add(list, part.as_ptr(), part.len(), null_mut(), null_mut()),
            ATC_OK
        );
    }
    assert_eq!(
        atc_router_sync_start(r, version, list, mode, null_mut(), null_mut()),
        ATC_OK
    );
}

unsafe fn wait_ready(r: *mut AtcRouter) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while atc_router_sync_ready(r) != 1 {
        assert!(Instant::now() < deadline, "no outcome");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Applies the ready outcome: (status, version, report, errors as (index, code, message)).
unsafe fn apply(r: *mut AtcRouter) -> (i32, u64, AtcSyncReport, Vec<(usize, i32, String)>) {
    let mut version = 0u64;
    let mut report = AtcSyncReport::default();
    let mut errors = vec![
        AtcSyncError {
            index: 0,
            code: 0,
            message: std::ptr::null(),
            message_len: 0,
        };
        16
    ];
    let mut errors_len = errors.len();
    let mut msg = vec![0 as c_char; 4096];
    let mut msg_len = msg.len();
    let rc = atc_router_sync_apply(
        r,
        &mut version,
        &mut report,
        errors.as_mut_ptr(),
        &mut errors_len,
        msg.as_mut_ptr(),
        &mut msg_len,
        null_mut(),
        null_mut(),
    );
    if rc != ATC_OK && rc != ATC_ERR_ROUTES {
        // Nothing written but the error buffer.
        return (rc, version, report, Vec::new());
    }
    let errs = errors[..errors_len]
        .iter()
        .map(|e| {
            let m = std::slice::from_raw_parts(e.message.cast::<u8>(), e.message_len);
            (e.index, e.code, String::from_utf8_lossy(m).into_owned())
        })
        .collect();
    (rc, version, report, errs)
}

#[test]
fn a_list_in_chunks_is_built_in_the_background_and_applied() {
    unsafe {
        let (s, r) = setup();
        let mut state_version = 0;
        assert_eq!(atc_router_sync_state(r, &mut state_version), ATC_BUILD_IDLE);
        let (rc, ..) = apply(r);
        assert_eq!(rc, ATC_ERR_NOT_READY);

        let t = Table::new(300, "a");
        start(r, 7, &t, 64, ATC_SYNC_ALL_OR_NOTHING);
        // The current (empty) table answers meanwhile.
        assert_eq!(route_of(s, r, "/r5/a"), None);
        wait_ready(r);
        assert_eq!(
            atc_router_sync_state(r, &mut state_version),
            ATC_BUILD_READY
        );
        assert_eq!(state_version, 7);
        let (rc, version, report, errs) = apply(r);
        assert_eq!((rc, version, report.added, errs.len()), (ATC_OK, 7, 300, 0));
        assert_eq!(route_of(s, r, "/r5/a").as_deref(), Some(id(5).as_str()));
        assert_eq!(atc_router_sync_state(r, null_mut()), ATC_BUILD_IDLE);

        // The synchronous calls still work on the applied table.
        let mut n = 0usize;
        assert_eq!(atc_router_len(r, &mut n), ATC_OK);
        assert_eq!(n, 300);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn a_list_in_text_copied_or_borrowed() {
    unsafe {
        let (s, r) = setup();
        let t = Table::new(50, "t");
        let tsv = t.tsv();
        assert_eq!(
            atc_router_sync_start_text(
                r,
                1,
                p(&tsv),
                tsv.len(),
                ATC_TEXT_COPY,
                ATC_SYNC_ALL_OR_NOTHING,
                null_mut(),
                null_mut()
            ),
            ATC_OK
        );
        drop(tsv);
        wait_ready(r);
        assert_eq!(apply(r).0, ATC_OK);
        assert_eq!(route_of(s, r, "/r9/t").as_deref(), Some(id(9).as_str()));

        // Borrowed: kept until the outcome is applied.
        let json = format!(
            r#"[{{"id": "{}", "priority": 1, "expression": "http.path == \"/j\""}}]"#,
            id(1)
        );
        assert_eq!(
            atc_router_sync_start_text(
                r,
                2,
                p(&json),
                json.len(),
                ATC_TEXT_BORROW,
                ATC_SYNC_ALL_OR_NOTHING,
                null_mut(),
                null_mut()
            ),
            ATC_OK
        );
        wait_ready(r);
        let (rc, version, report, _) = apply(r);
        assert_eq!((rc, version, report.removed), (ATC_OK, 2, 49));
        drop(json);
        assert_eq!(route_of(s, r, "/j").as_deref(), Some(id(1).as_str()));

        // A bad flag or mode changes nothing.
        assert_eq!(
            atc_router_sync_start_text(
                r,
                3,
                p("x"),
                1,
                7,
                ATC_SYNC_ALL_OR_NOTHING,
                null_mut(),
                null_mut()
            ),
            ATC_ERR_INVALID
        );
        assert_eq!(atc_router_sync_state(r, null_mut()), ATC_BUILD_IDLE);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn lent_routes_are_read_on_the_builder_in_their_place_among_the_copied_ones() {
    unsafe {
        let (s, r) = setup();
        let t = Table::new(4, "l");
        let routes = t.routes();
        // Route 3 (copied) repeats the id of route 1 (lent before it); route 4 (lent) is not
        // UTF-8. The bytes lent stay the caller's, untouched, until the outcome is taken.
        let bad = [b'h', 0xff, b'x'];
        let lent_last = [AtcRoute {
            expr: bad.as_ptr().cast(),
            expr_len: bad.len(),
            ..routes[3]
        }];
        let copied = [AtcRoute {
            id: p(&t.ids[1]),
            id_len: t.ids[1].len(),
            ..routes[2]
        }];
        let list = atc_route_list_new();
        assert_eq!(
            atc_route_list_lend(list, routes.as_ptr(), 2, null_mut(), null_mut()),
            ATC_OK
        );
        assert_eq!(
            atc_route_list_add(list, copied.as_ptr(), 1, null_mut(), null_mut()),
            ATC_OK
        );
        assert_eq!(
            atc_route_list_lend(list, lent_last.as_ptr(), 1, null_mut(), null_mut()),
            ATC_OK
        );
        assert_eq!(
            atc_router_sync_start(r, 1, list, ATC_SYNC_APPLY_VALID, null_mut(), null_mut()),
            ATC_OK
        );
        wait_ready(r);
        let (rc, version, report, errs) = apply(r);
        assert_eq!((rc, version, report.added), (ATC_OK, 1, 2), "{errs:?}");
        let found: Vec<(usize, i32)> = errs.iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(
            found,
            [(2, ATC_ERR_DUPLICATE), (3, ATC_ERR_UTF8)],
            "{errs:?}"
        );
        // The table holds copies: the caller's memory is its own again.
        drop((t, routes));
        assert_eq!(route_of(s, r, "/r1/l").as_deref(), Some(id(1).as_str()));

        // A list lent to the synchronous sync is read by each call and stays the caller's.
        let t = Table::new(3, "m");
        let routes = t.routes();
        let list = atc_route_list_new();
        assert_eq!(
            atc_route_list_lend(list, routes.as_ptr(), routes.len(), null_mut(), null_mut()),
            ATC_OK
        );
        for _ in 0..2 {
            let mut report = AtcSyncReport::default();
            let rc = atc_router_sync(
                r,
                list,
                ATC_SYNC_ALL_OR_NOTHING,
                &mut report,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK);
        }
        assert_eq!(route_of(s, r, "/r2/m").as_deref(), Some(id(2).as_str()));
        atc_route_list_free(list);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn a_refused_list_names_its_routes_and_the_table_stays() {
    unsafe {
        let (s, r) = setup();
        let mut t = Table::new(10, "a");
        start(r, 1, &t, 100, ATC_SYNC_ALL_OR_NOTHING);
        wait_ready(r);
        assert_eq!(apply(r).0, ATC_OK);
        t.exprs[4] = "http.path ==".into();
        t.ids[6] = "not-a-uuid".into();
        start(r, 2, &t, 3, ATC_SYNC_ALL_OR_NOTHING);
        wait_ready(r);
        let (rc, version, _, errs) = apply(r);
        assert_eq!((rc, version), (ATC_ERR_ROUTES, 2));
        let found: Vec<(usize, i32)> = errs.iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(found, [(4, ATC_ERR_EXPR), (6, ATC_ERR_UUID)], "{errs:?}");
        assert_eq!(
            route_of(s, r, "/r4/a").as_deref(),
            Some(id(4).as_str()),
            "unchanged"
        );

        // Apply-valid: the rest goes in, route 4 keeps its current version.
        t.exprs[3] = r#"http.path ^= "/three""#.into();
        start(r, 3, &t, 100, ATC_SYNC_APPLY_VALID);
        wait_ready(r);
        let (rc, _, report, errs) = apply(r);
        assert_eq!((rc, report.changed, errs.len()), (ATC_OK, 1, 2), "{errs:?}");
        assert_eq!(route_of(s, r, "/three").as_deref(), Some(id(3).as_str()));
        assert_eq!(route_of(s, r, "/r4/a").as_deref(), Some(id(4).as_str()));

        // Text that is not a list at all.
        assert_eq!(
            atc_router_sync_start_text(
                r,
                4,
                p("[1,"),
                3,
                ATC_TEXT_COPY,
                ATC_SYNC_ALL_OR_NOTHING,
                null_mut(),
                null_mut()
            ),
            ATC_OK
        );
        wait_ready(r);
        let mut err = vec![0 as c_char; 256];
        let mut err_len = err.len();
        let rc = atc_router_sync_apply(
            r,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            err.as_mut_ptr(),
            &mut err_len,
        );
        assert_eq!(rc, ATC_ERR_ROUTES);
        let m = String::from_utf8_lossy(std::slice::from_raw_parts(
            err.as_ptr().cast::<u8>(),
            err_len,
        ))
        .into_owned();
        assert!(m.contains("JSON"), "{m}");
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn a_panic_in_the_builder_is_reported_and_the_table_serves() {
    unsafe {
        let (s, r) = setup();
        start(r, 1, &Table::new(10, "a"), 100, ATC_SYNC_ALL_OR_NOTHING);
        wait_ready(r);
        assert_eq!(apply(r).0, ATC_OK);
        // By version: tests running side by side do not hit each other's builds.
        atc_router::panic_next_build_failpoint(0xbad_0002);
        start(
            r,
            0xbad_0002,
            &Table::new(10, "b"),
            100,
            ATC_SYNC_ALL_OR_NOTHING,
        );
        wait_ready(r);
        let (rc, version, ..) = apply(r);
        assert_eq!((rc, version), (ATC_ERR_PANIC, 0xbad_0002));
        assert_eq!(route_of(s, r, "/r2/a").as_deref(), Some(id(2).as_str()));
        start(r, 3, &Table::new(10, "c"), 100, ATC_SYNC_ALL_OR_NOTHING);
        wait_ready(r);
        assert_eq!(apply(r).0, ATC_OK);
        assert_eq!(route_of(s, r, "/r2/c").as_deref(), Some(id(2).as_str()));
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn freeing_a_router_while_it_builds_stops_the_builder() {
    unsafe {
        let (s, r) = setup();
        let t = Table::new(20_000, "a");
        let tsv = t.tsv();
        // Borrowed: freeing the router must stop the builder from reading it before it returns.
        assert_eq!(
            atc_router_sync_start_text(
                r,
                1,
                p(&tsv),
                tsv.len(),
                ATC_TEXT_BORROW,
                ATC_SYNC_ALL_OR_NOTHING,
                null_mut(),
                null_mut()
            ),
            ATC_OK
        );
        std::thread::sleep(Duration::from_millis(2));
        atc_router_free(r);
        drop(tsv);
        atc_schema_free(s);
    }
}

#[test]
fn a_synchronous_change_between_background_syncs_is_kept_consistent() {
    unsafe {
        let (s, r) = setup();
        start(r, 1, &Table::new(10, "a"), 100, ATC_SYNC_ALL_OR_NOTHING);
        wait_ready(r);
        assert_eq!(apply(r).0, ATC_OK);
        let extra = id(99);
        let e = r#"http.path == "/extra""#;
        assert_eq!(
            atc_router_add(
                r,
                5,
                p(&extra),
                extra.len(),
                p(e),
                e.len(),
                null_mut(),
                null_mut()
            ),
            ATC_OK
        );
        // The next list is the whole table: it does not hold the route added directly.
        let mut t = Table::new(10, "a");
        t.exprs[0] = r#"http.path ^= "/zero""#.into();
        start(r, 2, &t, 100, ATC_SYNC_ALL_OR_NOTHING);
        wait_ready(r);
        assert_eq!(apply(r).0, ATC_OK);
        assert_eq!(route_of(s, r, "/extra"), None);
        assert_eq!(route_of(s, r, "/zero").as_deref(), Some(id(0).as_str()));
        atc_router_free(r);
        atc_schema_free(s);
    }
}

/// The expression of the route `id` holds, or `None`.
unsafe fn expression_of(r: *mut AtcRouter, id: &str) -> Option<String> {
    let mut text: *const c_char = std::ptr::null();
    let mut len = 0usize;
    match atc_router_route_expression(r, p(id), id.len(), &mut text, &mut len) {
        ATC_OK => {
            let bytes = std::slice::from_raw_parts(text.cast::<u8>(), len);
            Some(String::from_utf8(bytes.to_vec()).unwrap())
        }
        ATC_ERR_NOT_FOUND => None,
        rc => panic!("route_expression: {rc}"),
    }
}

/// Random lists of changes (upserts and removals, some of ids not held, some invalid), applied
/// through `atc_router_update_start` (the builder) to one router and `atc_router_update`
/// (directly) to another: after every list both hold exactly the model's routes, route every
/// request as a router synced with the model's whole list does, and refuse exactly the lists
/// with an invalid route.
#[test]
fn random_lists_of_changes_equal_a_fresh_build() {
    unsafe {
        let (s, bg) = setup();
        let direct = atc_router_new(s, null_mut(), null_mut());
        let n = 80;
        let mut model: Vec<Option<(u64, String)>> = vec![None; n];
        let mut x: u64 = 11;
        let mut rand = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for version in 1..=60u64 {
            let bad = rand(7) == 0;
            let (mut ids, mut exprs, mut prios, mut removals) = (vec![], vec![], vec![], vec![]);
            let mut next = model.clone();
            let mut seen = vec![false; n];
            for _ in 0..1 + rand(6) {
                let i = rand(n as u64) as usize;
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                let e = format!(r#"http.path ^= "/r{i}/{}""#, rand(3));
                let prio = rand(3);
                next[i] = Some((prio, e.clone()));
                ids.push(id(i));
                exprs.push(e);
                prios.push(prio);
            }
            for _ in 0..rand(4) {
                let i = rand(n as u64) as usize;
                if !std::mem::replace(&mut seen[i], true) {
                    next[i] = None;
                    removals.push(id(i));
                }
            }
            if bad {
                exprs[0] = "http.path ==".into();
            }
            let list = |_: ()| {
                let l = atc_route_list_new();
                let routes: Vec<AtcRoute> = (0..ids.len())
                    .map(|k| AtcRoute {
                        id: p(&ids[k]),
                        id_len: ids[k].len(),
                        priority: prios[k],
                        expr: p(&exprs[k]),
                        expr_len: exprs[k].len(),
                        position: 0,
                    })
                    .collect();
                let gone: Vec<AtcRoute> = removals
                    .iter()
                    .map(|i| AtcRoute {
                        id: p(i),
                        id_len: i.len(),
                        priority: 0,
                        expr: std::ptr::null(),
                        expr_len: 0,
                        position: 0,
                    })
                    .collect();
                assert_eq!(
                    atc_route_list_add(l, routes.as_ptr(), routes.len(), null_mut(), null_mut()),
                    ATC_OK
                );
                assert_eq!(
                    atc_route_list_remove(l, gone.as_ptr(), gone.len(), null_mut(), null_mut()),
                    ATC_OK
                );
                l
            };
            let l = list(());
            let rc = atc_router_update(
                direct,
                l,
                ATC_SYNC_ALL_OR_NOTHING,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            );
            atc_route_list_free(l);
            assert_eq!(rc, if bad { ATC_ERR_ROUTES } else { ATC_OK }, "{version}");
            let l = list(());
            assert_eq!(
                atc_router_update_start(
                    bg,
                    version,
                    l,
                    ATC_SYNC_ALL_OR_NOTHING,
                    null_mut(),
                    null_mut()
                ),
                ATC_OK
            );
            wait_ready(bg);
            let mut v = 0u64;
            let rc = atc_router_sync_apply(
                bg,
                &mut v,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            );
            assert_eq!(
                (rc, v),
                (if bad { ATC_ERR_ROUTES } else { ATC_OK }, version)
            );
            if !bad {
                model = next;
            }
            // Both hold the model, and route as a fresh router of the model's list.
            let whole: Vec<(String, u64, String)> = model
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.as_ref().map(|(p, e)| (id(i), *p, e.clone())))
                .collect();
            let fresh = atc_router_new(s, null_mut(), null_mut());
            let routes: Vec<AtcRoute> = whole
                .iter()
                .map(|(i, pr, e)| AtcRoute {
                    id: p(i),
                    id_len: i.len(),
                    priority: *pr,
                    expr: p(e),
                    expr_len: e.len(),
                    position: 0,
                })
                .collect();
            let l = atc_route_list_new();
            atc_route_list_add(l, routes.as_ptr(), routes.len(), null_mut(), null_mut());
            let rc = atc_router_sync(
                fresh,
                l,
                ATC_SYNC_ALL_OR_NOTHING,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            );
            atc_route_list_free(l);
            assert_eq!(rc, ATC_OK);
            for r in [bg, direct] {
                let mut len = 0;
                atc_router_len(r, &mut len);
                assert_eq!(len, whole.len(), "version {version}");
                for (i, m) in model.iter().enumerate() {
                    assert_eq!(
                        expression_of(r, &id(i)),
                        m.as_ref().map(|m| m.1.clone()),
                        "route {i} after version {version}"
                    );
                    for k in 0..3 {
                        let path = format!("/r{i}/{k}");
                        assert_eq!(
                            route_of(s, r, &path),
                            route_of(s, fresh, &path),
                            "{path} after version {version}"
                        );
                    }
                }
            }
            atc_router_free(fresh);
        }
        atc_router_free(direct);
        atc_router_free(bg);
        atc_schema_free(s);
    }
}
