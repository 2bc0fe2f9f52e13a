//! `atc_router_explain`, `atc_router_matches` and `atc_router_route_expression` called the way
//! a C program calls them: sizing with a NULL buffer, too small buffers left untouched, the
//! versioned JSON read back, NULLs, unknown flags, a context of another schema and a broken
//! router (tests/broken.rs) giving clean errors, and the context's result left as it was.

use std::ffi::c_char;
use std::ptr::{null, null_mut};

use atc_router_ffi::*;
use serde_json::{json, Value as Json};

const U1: &str = "a8f2c1e4-0000-4000-8000-000000000001";
const U2: &str = "a8f2c1e4-0000-4000-8000-000000000002";
const U3: &str = "a8f2c1e4-0000-4000-8000-000000000003";

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

/// A schema, a router and a context over it, freed on drop.
struct Fixture {
    s: *mut AtcSchema,
    r: *mut AtcRouter,
    c: *mut AtcContext,
}

impl Fixture {
    fn new(routes: &[(u64, &str, &str)]) -> Fixture {
        unsafe {
            let s = atc_schema_new();
            for (name, ty) in [
                ("http.host", ATC_TYPE_STRING),
                ("http.path", ATC_TYPE_STRING),
                ("net.dst.port", ATC_TYPE_INT),
                ("net.src.ip", ATC_TYPE_IPADDR),
            ] {
                let rc = atc_schema_add_field(s, p(name), name.len(), ty, null_mut(), null_mut());
                assert_eq!(rc, ATC_OK, "{name}");
            }
            let r = atc_router_new(s, null_mut(), null_mut());
            for (prio, id, expr) in routes {
                let rc = atc_router_add(
                    r,
                    *prio,
                    p(id),
                    id.len(),
                    p(expr),
                    expr.len(),
                    null_mut(),
                    null_mut(),
                );
                assert_eq!(rc, ATC_OK, "{expr}");
            }
            let c = atc_context_new(s, null_mut(), null_mut());
            assert!(!r.is_null() && !c.is_null());
            Fixture { s, r, c }
        }
    }

    fn id(&self, name: &str) -> u32 {
        let mut id = 0;
        let rc = unsafe {
            atc_context_field_id(
                self.c,
                p(name),
                name.len(),
                &mut id,
                null_mut(),
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(rc, ATC_OK, "{name}");
        id
    }

    fn add_str(&self, name: &str, value: &str) {
        let id = self.id(name);
        let rc = unsafe {
            atc_context_add_str(self.c, id, p(value), value.len(), null_mut(), null_mut())
        };
        assert_eq!(rc, ATC_OK, "{name}");
    }

    fn add_int(&self, name: &str, value: i64) {
        let id = self.id(name);
        let rc = unsafe { atc_context_add_int(self.c, id, value, null_mut(), null_mut()) };
        assert_eq!(rc, ATC_OK, "{name}");
    }

    fn add_ip(&self, name: &str, value: &str) {
        let id = self.id(name);
        let rc = unsafe {
            atc_context_add_ip(self.c, id, p(value), value.len(), null_mut(), null_mut())
        };
        assert_eq!(rc, ATC_OK, "{name}");
    }

    fn explain(&self, flags: u32) -> Json {
        report(|buf, len, e, elen| unsafe {
            atc_router_explain(self.r, self.c, flags, buf, len, e, elen)
        })
    }

    fn matches(&self) -> Json {
        report(|buf, len, e, elen| unsafe { atc_router_matches(self.r, self.c, buf, len, e, elen) })
    }

    fn result_id(&self) -> Option<String> {
        let mut buf = [0u8; ATC_UUID_LEN];
        let mut len = buf.len();
        let rc = unsafe {
            atc_context_result(
                self.c,
                null(),
                buf.as_mut_ptr().cast(),
                &mut len,
                null_mut(),
                null_mut(),
            )
        };
        match rc {
            1 => Some(String::from_utf8(buf[..len].to_vec()).unwrap()),
            0 => None,
            e => panic!("atc_context_result: {e}"),
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        unsafe {
            atc_context_free(self.c);
            atc_router_free(self.r);
            atc_schema_free(self.s);
        }
    }
}

/// A report the way a C caller gets one: size with a NULL buffer, then fetch into a buffer of
/// exactly that size. Checks the sizing contract on the way.
fn report(call: impl Fn(*mut c_char, *mut usize, *mut c_char, *mut usize) -> i32) -> Json {
    let mut err = vec![0 as c_char; 256];
    let mut errlen = err.len();
    let mut needed = 12345usize;
    let rc = call(null_mut(), &mut needed, err.as_mut_ptr(), &mut errlen);
    assert_eq!(rc, ATC_ERR_BUFFER, "a NULL buffer asks for the size");
    assert!(needed > 0);
    let msg: Vec<u8> = err[..errlen].iter().map(|&c| c as u8).collect();
    assert_eq!(
        String::from_utf8(msg).unwrap(),
        format!("the buffer holds 0 bytes; {needed} are needed")
    );

    // One byte short: nothing written, the size needed again.
    let mut buf = vec![0x55u8; needed + 8];
    let mut len = needed - 1;
    let rc = call(buf.as_mut_ptr().cast(), &mut len, null_mut(), null_mut());
    assert_eq!(rc, ATC_ERR_BUFFER);
    assert_eq!(len, needed);
    assert!(buf.iter().all(|&b| b == 0x55), "nothing written partially");

    // Exactly the size: written whole, nothing after it, no NUL.
    let mut len = needed;
    let mut errlen = 77usize;
    let rc = call(buf.as_mut_ptr().cast(), &mut len, null_mut(), &mut errlen);
    assert_eq!(rc, ATC_OK);
    assert_eq!(len, needed);
    assert_eq!(errlen, 77, "the error length is untouched on success");
    assert!(buf[needed..].iter().all(|&b| b == 0x55));
    let text = std::str::from_utf8(&buf[..needed]).expect("the report is UTF-8");
    let v: Json = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["version"], json!(ATC_JSON_VERSION), "{text}");
    v
}

/// The call's status and error message, with a buffer of `cap` bytes (never big enough when
/// `cap` is 0).
fn failing(
    cap: usize,
    call: impl Fn(*mut c_char, *mut usize, *mut c_char, *mut usize) -> i32,
) -> (i32, String, usize) {
    let mut buf = vec![0x55u8; cap.max(1)];
    let mut len = cap;
    let mut err = vec![0 as c_char; 512];
    let mut errlen = err.len();
    let rc = call(
        buf.as_mut_ptr().cast(),
        &mut len,
        err.as_mut_ptr(),
        &mut errlen,
    );
    assert_ne!(rc, ATC_OK);
    assert!(buf.iter().all(|&b| b == 0x55), "nothing written on failure");
    let msg: Vec<u8> = err[..errlen].iter().map(|&c| c as u8).collect();
    (rc, String::from_utf8(msg).unwrap(), len)
}

const API: &str = r#"http.host == "api.example" && http.path ^= "/v2""#;
const CATCH_ALL: &str = r#"http.path ^= "/""#;
const NEGATED: &str = "http.host == \"api.example\"\n  && !(http.path ^= \"/v1\")";

#[test]
fn explain_names_the_winner_and_each_failing_predicate() {
    let f = Fixture::new(&[(10, U1, API), (20, U2, NEGATED), (1, U3, CATCH_ALL)]);
    f.add_str("http.host", "api.example");
    f.add_str("http.path", "/v1/users");
    let v = f.explain(0);
    assert_eq!(v["winner"], json!(U3));
    assert_eq!(v["routes"], json!(3));
    assert_eq!(v["ruled_out"], json!([]), "only with ATC_EXPLAIN_RULED_OUT");
    let cands = v["candidates"].as_array().unwrap();
    let ids: Vec<&str> = cands.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [U2, U1, U3], "routing order");

    // The negated predicate on line 2: it holds, and under `!` that fails the route.
    assert_eq!(cands[0]["matched"], json!(false));
    assert_eq!(cands[0]["priority"], json!(20));
    assert_eq!(cands[0]["expression"], json!(NEGATED));
    let pred = &cands[0]["predicates"].as_array().unwrap()[..];
    assert_eq!(pred.len(), 1, "the one predicate that decided it");
    assert_eq!(
        pred[0],
        json!({
            "index": 1, "text": "http.path ^= \"/v1\"", "text_truncated": false,
            "holds": true, "negated": true,
            "line": 2, "column": 8, "span": [34, 52],
            "source_line": "  && !(http.path ^= \"/v1\")", "caret": "       ^^^^^^^^^^^^^^^^^^",
        })
    );
    assert_eq!(&NEGATED[34..52], "http.path ^= \"/v1\"");

    // The failing predicate of the conjunction.
    assert_eq!(cands[1]["matched"], json!(false));
    let pred = &cands[1]["predicates"][0];
    assert_eq!(pred["text"], json!("http.path ^= \"/v2\""));
    assert_eq!(
        (pred["holds"].clone(), pred["negated"].clone()),
        (json!(false), json!(false))
    );
    assert_eq!(
        (pred["line"].clone(), pred["column"].clone()),
        (json!(1), json!(31))
    );

    // The winner, with the predicates that made it match.
    assert_eq!(cands[2]["matched"], json!(true));
    assert_eq!(cands[2]["predicates"][0]["text"], json!(CATCH_ALL));
    assert_eq!(cands[2]["predicates"][0]["holds"], json!(true));

    // Nothing left out, and every member says so.
    assert_eq!(v["candidates_omitted"], json!(0));
    assert_eq!(v["ruled_out_omitted"], json!(0));
    for c in cands {
        assert_eq!(c["expression_truncated"], json!(false));
        assert_eq!(c["predicates_omitted"], json!(0));
    }

    // Nothing matches: winner null.
    let g = Fixture::new(&[(10, U1, API)]);
    g.add_str("http.host", "api.example");
    g.add_str("http.path", "/v1");
    assert_eq!(g.explain(0)["winner"], Json::Null);
}

#[test]
fn explain_lists_ruled_out_routes_only_when_asked() {
    let f = Fixture::new(&[
        (10, U1, API),
        (5, U2, r#"http.host == "other.example""#),
        (1, U3, CATCH_ALL),
    ]);
    f.add_str("http.host", "api.example");
    f.add_str("http.path", "/v2/x");
    let plain = f.explain(0);
    assert_eq!(plain["ruled_out"], json!([]));
    let full = f.explain(ATC_EXPLAIN_RULED_OUT);
    assert_eq!(full["candidates"], plain["candidates"]);
    assert_eq!(full["winner"], json!(U1));
    assert_eq!(
        full["ruled_out"],
        json!([{ "id": U2, "priority": 5, "key": "http.host == \"other.example\"" }])
    );
}

#[test]
fn reports_keep_texts_and_64_bit_numbers_exact() {
    let odd = "http.path == \"/q\\\"b\\\\s\" || http.path == \"/é€\\n\"";
    let f = Fixture::new(&[(u64::MAX, U1, odd)]);
    f.add_str("http.path", "/é€\n");
    f.add_int("net.dst.port", i64::MIN);
    let v = f.explain(0);
    assert_eq!(v["candidates"][0]["priority"].as_u64(), Some(u64::MAX));
    assert_eq!(v["candidates"][0]["expression"], json!(odd));
    let m = f.matches();
    assert_eq!(m["matches"][0]["priority"].as_u64(), Some(u64::MAX));
    assert_eq!(
        m["matches"][0]["matched_values"],
        json!([{ "field": "http.path", "type": "String", "value": "/é€\n" }])
    );

    let g = Fixture::new(&[(1, U1, "net.dst.port == -9223372036854775807")]);
    g.add_int("net.dst.port", -i64::MAX);
    let m = g.matches();
    assert_eq!(
        m["matches"][0]["matched_values"][0]["value"].as_i64(),
        Some(-i64::MAX)
    );
}

#[test]
fn matches_lists_every_matching_route_with_values_and_captures() {
    let capture = r#"http.path ~ "^/users/(?<id>[0-9]+)/(x|y)$" && net.dst.port == 8080"#;
    let f = Fixture::new(&[
        (30, U1, capture),
        (20, U2, r#"net.src.ip == 10.1.2.3 && http.host == "h""#),
        (10, U3, r#"http.host == "nope""#),
    ]);
    f.add_str("http.host", "h");
    f.add_str("http.path", "/users/42/y");
    f.add_int("net.dst.port", 8080);
    f.add_ip("net.src.ip", "10.1.2.3");
    let m = f.matches();
    assert_eq!(
        m,
        json!({
            "version": 2,
            "matches": [
                {
                    "id": U1, "priority": 30, "expression": capture,
                    "matched_values": [
                        { "field": "http.path", "type": "String", "value": "/users/42/y" },
                        { "field": "net.dst.port", "type": "Int", "value": 8080 },
                    ],
                    "captures": [
                        { "key": 0, "value": "/users/42/y" },
                        { "key": 1, "value": "42" },
                        { "key": "id", "value": "42" },
                        { "key": 2, "value": "y" },
                    ],
                },
                {
                    "id": U2, "priority": 20,
                    "expression": r#"net.src.ip == 10.1.2.3 && http.host == "h""#,
                    "matched_values": [
                        { "field": "net.src.ip", "type": "IpAddr", "value": "10.1.2.3" },
                        { "field": "http.host", "type": "String", "value": "h" },
                    ],
                    "captures": [],
                },
            ],
        }),
        "{m:#}"
    );

    let none = Fixture::new(&[(1, U1, API)]);
    assert_eq!(none.matches(), json!({ "version": 2, "matches": [] }));
}

#[test]
fn the_result_is_left_as_it_was() {
    let capture = r#"http.path ~ "^/users/(?<id>[0-9]+)$""#;
    let f = Fixture::new(&[(2, U1, capture), (1, U2, CATCH_ALL)]);
    f.add_str("http.path", "/users/7");
    assert_eq!(unsafe { atc_router_execute(f.r, f.c) }, 1);
    let path_id = f.id("http.path");
    let mut matched = AtcMatched {
        value_type: 0,
        int_value: 0,
        ptr: null(),
        len: 0,
    };
    let mut ncaps = 0usize;
    let rc = unsafe {
        atc_context_result(
            f.c,
            &path_id,
            null_mut(),
            null_mut(),
            &mut matched,
            &mut ncaps,
        )
    };
    assert_eq!(rc, 1);
    let before = unsafe { std::slice::from_raw_parts(matched.ptr.cast::<u8>(), matched.len) };
    let before = before.to_vec();

    let v = f.explain(ATC_EXPLAIN_RULED_OUT);
    assert_eq!(v["winner"], json!(U1));
    assert_eq!(f.matches()["matches"].as_array().unwrap().len(), 2);

    assert_eq!(f.result_id().as_deref(), Some(U1));
    // The pointer read before still reads the matched value (valgrind checks it stays valid).
    let after = unsafe { std::slice::from_raw_parts(matched.ptr.cast::<u8>(), matched.len) };
    assert_eq!(after, &before[..]);
    let mut caps = vec![
        AtcCapture {
            index: 0,
            name: null(),
            name_len: 0,
            value: null(),
            value_len: 0,
        };
        4
    ];
    let mut n = caps.len();
    assert_eq!(
        unsafe { atc_context_captures(f.c, caps.as_mut_ptr(), &mut n) },
        ATC_OK
    );
    assert_eq!(n, ncaps);

    // Without an execute before, still no result after.
    let g = Fixture::new(&[(1, U1, CATCH_ALL)]);
    g.add_str("http.path", "/x");
    assert_eq!(g.explain(0)["winner"], json!(U1));
    assert_eq!(g.result_id(), None);
}

#[test]
fn bad_calls_are_clean_errors_that_change_nothing() {
    let f = Fixture::new(&[(1, U1, CATCH_ALL)]);
    f.add_str("http.path", "/x");
    unsafe {
        let (rc, msg, len) = failing(4096, |b, l, e, el| {
            atc_router_explain(null(), f.c, 0, b, l, e, el)
        });
        assert_eq!(
            (rc, msg.as_str(), len),
            (ATC_ERR_NULL, "`router` is NULL", 4096)
        );
        let (rc, msg, _) = failing(4096, |b, l, e, el| {
            atc_router_explain(f.r, null_mut(), 0, b, l, e, el)
        });
        assert_eq!((rc, msg.as_str()), (ATC_ERR_NULL, "`context` is NULL"));
        let (rc, msg, _) = failing(4096, |b, _, e, el| {
            atc_router_explain(f.r, f.c, 0, b, null_mut(), e, el)
        });
        assert_eq!((rc, msg.as_str()), (ATC_ERR_NULL, "`buf_len` is NULL"));
        let (rc, msg, len) = failing(4096, |b, l, e, el| {
            atc_router_explain(f.r, f.c, 0x6, b, l, e, el)
        });
        assert_eq!(rc, ATC_ERR_INVALID);
        assert_eq!(len, 4096, "the length is untouched");
        assert!(msg.contains("unknown explain flags 0x6"), "{msg}");

        let (rc, msg, _) = failing(4096, |b, l, e, el| {
            atc_router_matches(null(), f.c, b, l, e, el)
        });
        assert_eq!((rc, msg.as_str()), (ATC_ERR_NULL, "`router` is NULL"));
        let (rc, _, _) = failing(4096, |b, l, e, el| {
            atc_router_matches(f.r, null_mut(), b, l, e, el)
        });
        assert_eq!(rc, ATC_ERR_NULL);
        let (rc, _, _) = failing(4096, |b, _, e, el| {
            atc_router_matches(f.r, f.c, b, null_mut(), e, el)
        });
        assert_eq!(rc, ATC_ERR_NULL);
        // No error buffer at all is fine.
        let mut len = 0usize;
        assert_eq!(
            atc_router_matches(f.r, f.c, null_mut(), &mut len, null_mut(), null_mut()),
            ATC_ERR_BUFFER
        );
        assert!(len > 0);

        // A context of another schema handle (even with the same fields).
        let other = Fixture::new(&[]);
        other.add_str("http.path", "/x");
        let (rc, msg, len) = failing(4096, |b, l, e, el| {
            atc_router_explain(f.r, other.c, 0, b, l, e, el)
        });
        assert_eq!(rc, ATC_ERR_SCHEMA_MISMATCH);
        assert_eq!(len, 4096);
        assert!(!msg.is_empty());
        let (rc, _, _) = failing(4096, |b, l, e, el| {
            atc_router_matches(f.r, other.c, b, l, e, el)
        });
        assert_eq!(rc, ATC_ERR_SCHEMA_MISMATCH);
    }
    // Still answering.
    assert_eq!(f.explain(0)["winner"], json!(U1));
}

#[test]
fn route_expression_gives_the_text_as_added() {
    let f = Fixture::new(&[(10, U1, NEGATED), (1, U2, CATCH_ALL)]);
    let get = |id: &str| -> (i32, Option<String>) {
        let mut ptr: *const c_char = null();
        let mut len = 99usize;
        let rc = unsafe { atc_router_route_expression(f.r, p(id), id.len(), &mut ptr, &mut len) };
        if rc != ATC_OK {
            assert!(ptr.is_null() && len == 99, "outputs untouched on failure");
            return (rc, None);
        }
        let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
        (rc, Some(String::from_utf8(bytes.to_vec()).unwrap()))
    };
    assert_eq!(get(U1), (ATC_OK, Some(NEGATED.to_owned())));
    assert_eq!(get(U2), (ATC_OK, Some(CATCH_ALL.to_owned())));
    // Any UUID form atc_router_add takes.
    let braced = format!("{{{}}}", U2.to_uppercase());
    assert_eq!(get(&braced).1.as_deref(), Some(CATCH_ALL));
    assert_eq!(get(U3).0, ATC_ERR_NOT_FOUND);
    assert_eq!(get("not-a-uuid").0, ATC_ERR_UUID);
    assert_eq!(get("").0, ATC_ERR_UUID);

    // With the id of the last result: the matched route's text.
    f.add_str("http.path", "/x");
    assert_eq!(unsafe { atc_router_execute(f.r, f.c) }, 1);
    let winner = f.result_id().unwrap();
    assert_eq!(get(&winner).1.as_deref(), Some(CATCH_ALL));

    unsafe {
        let mut ptr: *const c_char = null();
        let mut len = 0usize;
        assert_eq!(
            atc_router_route_expression(null(), p(U1), 36, &mut ptr, &mut len),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_router_route_expression(f.r, null(), 36, &mut ptr, &mut len),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_router_route_expression(f.r, p(U1), 36, null_mut(), &mut len),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_router_route_expression(f.r, p(U1), 36, &mut ptr, null_mut()),
            ATC_ERR_NULL
        );
        let bad = b"a8f2c1e4-0000-4000-8000-00000000000\xff";
        assert_eq!(
            atc_router_route_expression(f.r, bad.as_ptr().cast(), bad.len(), &mut ptr, &mut len),
            ATC_ERR_UTF8
        );
        assert!(ptr.is_null());
    }
}

#[test]
fn a_report_is_bounded_whatever_the_routes_and_says_what_it_left_out() {
    // 60 routes of 300 predicates each: past every bound of a report (50 candidates, 32
    // predicates and 1 KiB of expression each), whatever the size beyond (a report of 100
    // routes of 16,383 predicates is as large; this size keeps the test quick under valgrind).
    const PREDICATES: usize = 300;
    let long = vec![CATCH_ALL; PREDICATES].join(" && ");
    let ids: Vec<String> = (0..60)
        .map(|i| format!("a8f2c1e4-0000-4000-8000-{i:012}"))
        .collect();
    let routes: Vec<(u64, &str, &str)> = ids
        .iter()
        .map(|id| (1, id.as_str(), long.as_str()))
        .collect();
    let f = Fixture::new(&routes);
    f.add_str("http.path", "/x");
    let mut len = 0usize;
    let rc =
        unsafe { atc_router_explain(f.r, f.c, 0, null_mut(), &mut len, null_mut(), null_mut()) };
    assert_eq!(rc, ATC_ERR_BUFFER);
    assert!(len < 50 * (1024 + 32 * 512), "{len} bytes");
    let v = f.explain(0);
    assert_eq!(v["version"], json!(2));
    let cands = v["candidates"].as_array().unwrap();
    assert_eq!(v["winner"], cands[0]["id"]);
    assert_eq!(cands.len(), 50);
    assert_eq!(v["candidates_omitted"], json!(10));
    for c in cands {
        assert_eq!(c["expression_truncated"], json!(true));
        assert!(c["expression"].as_str().unwrap().ends_with('…'));
        assert_eq!(c["predicates"].as_array().unwrap().len(), 32);
        assert_eq!(c["predicates_omitted"], json!(PREDICATES - 32));
    }
}
