//! A panic part-way through a change of a router (an injected failure inside `atc_router_sync`)
//! is an `ATC_ERR_PANIC` for that call, and from then on `atc_router_execute` answers
//! `ATC_ERR_BROKEN` instead of matching against a half-changed table (explain, matches and a
//! route's text likewise); the next
//! `atc_router_sync` of the full list rebuilds the router.

use std::ffi::c_char;
use std::ptr::null_mut;

use atc_router_ffi::*;

#[path = "support/route_list.rs"]
mod route_list;
use route_list::route_list;

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

fn route<'a>(id: &'a str, expr: &'a str) -> AtcRoute {
    AtcRoute {
        id: p(id),
        id_len: id.len(),
        priority: 1,
        expr: p(expr),
        expr_len: expr.len(),
        position: 0,
    }
}

unsafe fn sync(r: *mut AtcRouter, routes: &[AtcRoute]) -> i32 {
    let l = route_list(routes);
    let rc = atc_router_sync(
        r,
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
    rc
}

unsafe fn request(s: *mut AtcSchema, r: *mut AtcRouter, path: &str) -> i32 {
    let c = atc_context_new(s, null_mut(), null_mut());
    let mut id = 0u32;
    let name = "http.path";
    let rc = atc_context_field_id(
        c,
        p(name),
        name.len(),
        &mut id,
        null_mut(),
        null_mut(),
        null_mut(),
    );
    assert_eq!(rc, ATC_OK);
    assert_eq!(
        atc_context_add_str(c, id, p(path), path.len(), null_mut(), null_mut()),
        ATC_OK
    );
    let rc = atc_router_execute(r, c);
    atc_context_free(c);
    rc
}

#[test]
fn a_panic_inside_a_sync_breaks_the_router_loudly_until_the_next_sync() {
    unsafe {
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
        let r = atc_router_new(s, null_mut(), null_mut());
        let ids: Vec<String> = (0..8)
            .map(|i| format!("a8f2c1e4-0000-4000-8000-00000000000{i}"))
            .collect();
        let exprs: Vec<String> = (0..8)
            .map(|i| format!(r#"http.path ^= "/r{i}/""#))
            .collect();
        let mut list: Vec<AtcRoute> = ids.iter().zip(&exprs).map(|(i, e)| route(i, e)).collect();
        assert_eq!(sync(r, &list), ATC_OK);
        assert_eq!(request(s, r, "/r3/x"), 1);

        // One changed route: an incremental apply, interrupted after the old version is out.
        let changed = r#"http.path ^= "/changed/""#;
        list[0] = route(&ids[0], changed);
        atc_router::panic_at_failpoint(1);
        assert_eq!(sync(r, &list), ATC_ERR_PANIC);
        atc_router::panic_at_failpoint(0);
        assert_eq!(
            request(s, r, "/r3/x"),
            ATC_ERR_BROKEN,
            "no answer from a half-applied table"
        );

        // Nor an explanation, a list of matches or a route's text: clean errors.
        let c = atc_context_new(s, null_mut(), null_mut());
        let mut len = 4096usize;
        let mut buf = vec![0 as c_char; len];
        let mut err = vec![0 as c_char; 256];
        let mut errlen = err.len();
        assert_eq!(
            atc_router_explain(
                r,
                c,
                0,
                buf.as_mut_ptr(),
                &mut len,
                err.as_mut_ptr(),
                &mut errlen
            ),
            ATC_ERR_BROKEN
        );
        assert_eq!(len, 4096, "nothing written");
        let msg: Vec<u8> = err[..errlen].iter().map(|&b| b as u8).collect();
        assert!(
            String::from_utf8(msg).unwrap().contains("broken"),
            "the message says why"
        );
        assert_eq!(
            atc_router_matches(r, c, buf.as_mut_ptr(), &mut len, null_mut(), null_mut()),
            ATC_ERR_BROKEN
        );
        let (mut ptr, mut n) = (std::ptr::null(), 0usize);
        assert_eq!(
            atc_router_route_expression(r, p(&ids[1]), ids[1].len(), &mut ptr, &mut n),
            ATC_ERR_BROKEN
        );
        atc_context_free(c);

        assert_eq!(sync(r, &list), ATC_OK, "the next sync rebuilds");
        assert_eq!(request(s, r, "/r3/x"), 1);
        assert_eq!(request(s, r, "/changed/x"), 1);
        assert_eq!(request(s, r, "/r0/x"), 0);
        atc_router_free(r);
        atc_schema_free(s);
    }
}
