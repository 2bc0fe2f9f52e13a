//! Resource limits through the C ABI: what a gateway worker sees when a request or a route goes
//! past a documented limit. Values per field are `ATC_ERR_LIMIT`; expression limits (length,
//! depth, predicates, regex size and count) and wildcard names in use by routes are
//! `ATC_ERR_EXPR` with the positioned message naming the limit. Request field names never count
//! against a limit. In every case the handles stay usable: the worker goes on serving.

use std::ffi::c_char;
use std::ptr::{null, null_mut};

use atc_router_ffi::*;

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

fn message(buf: &[c_char], len: usize) -> String {
    let bytes: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
    String::from_utf8(bytes).unwrap()
}

struct Fixture {
    schema: *mut AtcSchema,
    router: *mut AtcRouter,
    ctx: *mut AtcContext,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_limits(&[])
    }

    /// The fixture over a schema whose `limits` (`ATC_LIMIT_*` code, value) were set through
    /// `atc_schema_set_limit` before the router and the context were made.
    fn with_limits(limits: &[(i32, u64)]) -> Fixture {
        unsafe {
            let schema = atc_schema_new();
            for &(code, value) in limits {
                let mut buf = vec![0 as c_char; 256];
                let mut len = buf.len();
                let rc = atc_schema_set_limit(schema, code, value, buf.as_mut_ptr(), &mut len);
                assert_eq!(rc, ATC_OK, "limit {code}: {}", message(&buf, len));
            }
            for (name, ty) in [
                ("http.path", ATC_TYPE_STRING),
                ("http.headers.*", ATC_TYPE_STRING),
                ("net.dst.port", ATC_TYPE_INT),
                ("net.src.ip", ATC_TYPE_IPADDR),
                // Short, so that 4,097 predicates fit in the length limit.
                ("p", ATC_TYPE_INT),
            ] {
                let rc =
                    atc_schema_add_field(schema, p(name), name.len(), ty, null_mut(), null_mut());
                assert_eq!(rc, ATC_OK);
            }
            let router = atc_router_new(schema, null_mut(), null_mut());
            let ctx = atc_context_new(schema, null_mut(), null_mut());
            assert!(!router.is_null() && !ctx.is_null());
            Fixture {
                schema,
                router,
                ctx,
            }
        }
    }

    fn field(&self, name: &str) -> u32 {
        let mut id = 0;
        let rc = unsafe {
            atc_context_field_id(
                self.ctx,
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

    /// `atc_router_add` with an error buffer; the status and the message.
    fn add(&self, id: &str, expr: &str) -> (i32, String) {
        let mut buf = vec![0 as c_char; 4096];
        let mut len = buf.len();
        let rc = unsafe {
            atc_router_add(
                self.router,
                1,
                p(id),
                id.len(),
                p(expr),
                expr.len(),
                buf.as_mut_ptr(),
                &mut len,
            )
        };
        let msg = if rc == ATC_OK {
            String::new()
        } else {
            message(&buf, len)
        };
        (rc, msg)
    }

    fn execute(&self) -> i32 {
        unsafe { atc_router_execute(self.router, self.ctx) }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        unsafe {
            atc_context_free(self.ctx);
            atc_router_free(self.router);
            atc_schema_free(self.schema);
        }
    }
}

const ID: &str = "a8f2c1e4-0000-4000-8000-000000000001";
const ID2: &str = "a8f2c1e4-0000-4000-8000-000000000002";

#[test]
fn values_per_field_through_every_add_function() {
    let f = Fixture::new();
    // A header's values are kept (and counted) once a route reads it.
    let reads = r#"http.headers.x_rep == "w" || net.dst.port == 8 || net.src.ip == 10.9.9.9"#;
    assert_eq!(f.add(ID, reads).0, ATC_OK);
    let header = f.field("http.headers.x_rep");
    let port = f.field("net.dst.port");
    let ip = f.field("net.src.ip");
    let mut buf = vec![0 as c_char; 256];
    for (what, field) in [("str", header), ("int", port), ("ip", ip)] {
        unsafe { atc_context_reset(f.ctx) };
        let add = |buf: &mut Vec<c_char>, len: &mut usize| unsafe {
            match what {
                "str" => atc_context_add_str(f.ctx, field, p("v"), 1, buf.as_mut_ptr(), len),
                "int" => atc_context_add_int(f.ctx, field, 7, buf.as_mut_ptr(), len),
                _ => atc_context_add_ip(f.ctx, field, p("10.0.0.1"), 8, buf.as_mut_ptr(), len),
            }
        };
        for i in 0..1024 {
            let mut len = buf.len();
            assert_eq!(add(&mut buf, &mut len), ATC_OK, "{what} value {i}");
        }
        let mut len = buf.len();
        assert_eq!(add(&mut buf, &mut len), ATC_ERR_LIMIT, "{what}");
        let msg = message(&buf, len);
        assert!(
            msg.ends_with("already holds 1024 values, the most one field may hold"),
            "{what}: {msg}"
        );
    }
    // The context is still usable: execute, reset, add again.
    assert_eq!(f.execute(), 0);
    unsafe {
        assert_eq!(atc_context_reset(f.ctx), ATC_OK);
        let rc = atc_context_add_str(f.ctx, header, p("v"), 1, null_mut(), null_mut());
        assert_eq!(rc, ATC_OK);
    }
}

#[test]
fn values_per_field_in_a_batch_name_the_value_that_failed() {
    let f = Fixture::new();
    assert_eq!(f.add(ID, r#"http.headers.accept == "a""#).0, ATC_OK);
    let header = f.field("http.headers.accept");
    let values: Vec<AtcValue> = (0..1100)
        .map(|_| AtcValue {
            field: header,
            value_type: ATC_TYPE_STRING,
            int_value: 0,
            ptr: p("a"),
            len: 1,
        })
        .collect();
    let mut failed = usize::MAX;
    let mut buf = vec![0 as c_char; 256];
    let mut len = buf.len();
    let rc = unsafe {
        atc_context_add_values(
            f.ctx,
            values.as_ptr(),
            values.len(),
            &mut failed,
            buf.as_mut_ptr(),
            &mut len,
        )
    };
    assert_eq!(rc, ATC_ERR_LIMIT);
    assert_eq!(failed, 1024, "the 1025th value is the one refused");
    let msg = message(&buf, len);
    assert!(
        msg.starts_with("value 1024: field `http.headers.accept` already holds 1024 values"),
        "{msg}"
    );
}

#[test]
fn request_field_names_never_reach_a_limit_or_register() {
    let f = Fixture::new();
    let mut buf = vec![0 as c_char; 256];
    let unused = f.field("http.headers.h0");
    for i in 0..70_000 {
        let name = format!("http.headers.h{i}");
        let mut id = 0;
        let mut len = buf.len();
        let rc = unsafe {
            atc_context_field_id(
                f.ctx,
                p(&name),
                name.len(),
                &mut id,
                null_mut(),
                buf.as_mut_ptr(),
                &mut len,
            )
        };
        assert_eq!(rc, ATC_OK, "{name}");
        // Every name no route uses gets the same id, whose values are ignored.
        assert_eq!(id, unused, "{name}");
        let rc = unsafe { atc_context_add_str(f.ctx, id, p("v"), 1, null_mut(), null_mut()) };
        assert_eq!(rc, ATC_OK);
    }
    // A route on a header nobody registered is accepted, and its name gets an id of its own.
    assert_eq!(f.add(ID, r#"http.headers.brand_new == "x""#).0, ATC_OK);
    let id = f.field("http.headers.brand_new");
    assert_ne!(id, unused);
    unsafe {
        atc_context_reset(f.ctx);
        assert_eq!(
            atc_context_add_str(f.ctx, id, p("x"), 1, null_mut(), null_mut()),
            ATC_OK
        );
    }
    assert_eq!(f.execute(), 1);
}

#[test]
fn expression_limits_are_expression_errors_naming_the_limit() {
    let f = Fixture::new();
    let regexes = |n: usize| {
        (0..n)
            .map(|i| format!(r#"http.path ~ "^/r{i}/""#))
            .collect::<Vec<_>>()
            .join(" || ")
    };
    let cases = [
        (
            format!(r#"http.path == "{}""#, "a".repeat(1 << 20)),
            "expression is too long",
        ),
        (
            format!("{}http.path == \"a\"{}", "(".repeat(257), ")".repeat(257)),
            "nested too deeply: the limit is 256",
        ),
        (
            (0..16_385)
                .map(|i| format!("p == {i}"))
                .collect::<Vec<_>>()
                .join("||"),
            "too many predicates: 16385, the limit is 16384",
        ),
        (
            r#"http.path ~ "a{1000}{1000}""#.to_owned(),
            "regex is too large once compiled (limit: 10485760 bytes)",
        ),
        (
            // About 200 KB each once compiled: together they go past 32 MiB.
            (0..200)
                .map(|i| format!(r#"http.path ~ "^/{i}[a-z]{{8000}}""#))
                .collect::<Vec<_>>()
                .join(" || "),
            "too large once compiled together (limit: 33554432 bytes)",
        ),
    ];
    for (expr, words) in &cases {
        let (rc, msg) = f.add(ID, expr);
        assert_eq!(rc, ATC_ERR_EXPR, "{words}");
        assert!(msg.starts_with("line 1, column "), "{msg}");
        assert!(msg.contains(words), "`{words}` not in: {msg}");
        assert!(msg.len() < 1024, "error messages stay short");
        // `atc_router_validate` says the same.
        let mut vbuf = vec![0 as c_char; 4096];
        let mut vlen = vbuf.len();
        let mut fields_len = 0;
        let rc = unsafe {
            atc_router_validate(
                f.schema,
                p(expr),
                expr.len(),
                null_mut(),
                &mut fields_len,
                null_mut(),
                vbuf.as_mut_ptr(),
                &mut vlen,
            )
        };
        assert_eq!(rc, ATC_ERR_EXPR);
        assert_eq!(message(&vbuf, vlen), msg);
    }
    let mut n = usize::MAX;
    unsafe { atc_router_len(f.router, &mut n) };
    assert_eq!(n, 0, "no refused route was added");
    // The router still takes routes at the limits.
    assert_eq!(f.add(ID, &regexes(1000)).0, ATC_OK);
    assert_eq!(f.add(ID2, r#"http.path ~ "a{100}""#).0, ATC_OK);
}

#[test]
fn errors_quote_a_window_of_the_input_whatever_its_size() {
    let f = Fixture::new();
    let huge = "9".repeat(200_000);
    let mut buf = vec![0 as c_char; 1 << 20];
    let check = |what: &str, rc: i32, len: usize, buf: &[c_char]| {
        assert!(rc < 0, "{what}: {rc}");
        assert!(
            len <= 2048,
            "{what}: {len} bytes: {}",
            &message(buf, len)[..200]
        );
    };
    // A route id that is not a UUID.
    let mut len = buf.len();
    let rc = unsafe {
        atc_router_add(
            f.router,
            1,
            p(&huge),
            huge.len(),
            p("p == 1"),
            6,
            buf.as_mut_ptr(),
            &mut len,
        )
    };
    check("route id", rc, len, &buf);
    // An address and a CIDR that do not parse.
    let ip = f.field("net.src.ip");
    let mut len = buf.len();
    let rc =
        unsafe { atc_context_add_ip(f.ctx, ip, p(&huge), huge.len(), buf.as_mut_ptr(), &mut len) };
    check("address", rc, len, &buf);
    // A field added to a schema in use, under a huge name.
    let name = format!("a{huge}");
    let mut len = buf.len();
    let rc = unsafe {
        atc_schema_add_field(
            f.schema,
            p(&name),
            name.len(),
            ATC_TYPE_INT,
            buf.as_mut_ptr(),
            &mut len,
        )
    };
    check("field of a shared schema", rc, len, &buf);
    // An unknown field name.
    let mut id = 0;
    let mut len = buf.len();
    let rc = unsafe {
        atc_context_field_id(
            f.ctx,
            p(&name),
            name.len(),
            &mut id,
            null_mut(),
            buf.as_mut_ptr(),
            &mut len,
        )
    };
    check("unknown field", rc, len, &buf);
}

// ---------------------------------------------------------------------------------------------
// Limits set through the C ABI (`atc_schema_set_limit`, `atc_schema_get_limit`).

const ALL_LIMITS: [(i32, &str, u64); 8] = [
    (
        ATC_LIMIT_MAX_EXPRESSION_LEN,
        "max_expression_len",
        1024 * 1024,
    ),
    (ATC_LIMIT_MAX_DEPTH, "max_depth", 256),
    (ATC_LIMIT_MAX_PREDICATES, "max_predicates", 16_384),
    (ATC_LIMIT_MAX_REGEXES, "max_regexes", 16_384),
    (ATC_LIMIT_REGEX_SIZE, "regex_size_limit", 10 * 1024 * 1024),
    (
        ATC_LIMIT_REGEX_TOTAL_SIZE,
        "regex_total_size_limit",
        32 * 1024 * 1024,
    ),
    (ATC_LIMIT_MAX_VALUES_PER_FIELD, "max_values_per_field", 1024),
    (ATC_LIMIT_MAX_WILDCARD_FIELDS, "max_wildcard_fields", 65_536),
];

fn get_limit(schema: *const AtcSchema, code: i32) -> u64 {
    let mut v = 0;
    let rc = unsafe { atc_schema_get_limit(schema, code, &mut v) };
    assert_eq!(rc, ATC_OK, "limit {code}");
    v
}

/// `atc_schema_set_limit` with an error buffer: the status and the message.
fn set_limit(schema: *mut AtcSchema, code: i32, value: u64) -> (i32, String) {
    let mut buf = vec![0x55 as c_char; 512];
    let mut len = buf.len();
    let rc = unsafe { atc_schema_set_limit(schema, code, value, buf.as_mut_ptr(), &mut len) };
    if rc == ATC_OK {
        assert_eq!(len, buf.len(), "the error buffer is untouched on success");
        return (rc, String::new());
    }
    (rc, message(&buf, len))
}

/// `atc_router_validate` on the fixture's schema: the status and the message.
fn validate(schema: *const AtcSchema, expr: &str) -> (i32, String) {
    let mut buf = vec![0 as c_char; 4096];
    let mut len = buf.len();
    let mut fields_len = 0;
    let rc = unsafe {
        atc_router_validate(
            schema,
            p(expr),
            expr.len(),
            null_mut(),
            &mut fields_len,
            null_mut(),
            buf.as_mut_ptr(),
            &mut len,
        )
    };
    if rc == ATC_OK || rc == ATC_ERR_BUFFER {
        return (ATC_OK, String::new());
    }
    (rc, message(&buf, len))
}

#[test]
fn get_limit_reads_the_defaults_then_what_was_set() {
    unsafe {
        let s = atc_schema_new();
        for (code, name, default) in ALL_LIMITS {
            assert_eq!(get_limit(s, code), default, "{name}");
        }
        for (i, (code, name, _)) in ALL_LIMITS.iter().enumerate() {
            let value = 10 + i as u64;
            assert_eq!(
                set_limit(s, *code, value),
                (ATC_OK, String::new()),
                "{name}"
            );
            assert_eq!(get_limit(s, *code), value, "{name}");
        }
        // Each code sets its own limit and no other.
        for (i, (code, name, _)) in ALL_LIMITS.iter().enumerate() {
            assert_eq!(get_limit(s, *code), 10 + i as u64, "{name}");
        }
        // Depth is capped at 256, as the core treats it; a value above size_t is clamped (the
        // same number on a 64-bit platform).
        assert_eq!(set_limit(s, ATC_LIMIT_MAX_DEPTH, 100_000).0, ATC_OK);
        assert_eq!(get_limit(s, ATC_LIMIT_MAX_DEPTH), 256);
        assert_eq!(set_limit(s, ATC_LIMIT_MAX_PREDICATES, u64::MAX).0, ATC_OK);
        assert_eq!(
            get_limit(s, ATC_LIMIT_MAX_PREDICATES),
            u64::try_from(usize::MAX).unwrap()
        );
        // A router made now keeps them, and the handle still reads them once shared.
        let r = atc_router_new(s, null_mut(), null_mut());
        assert!(!r.is_null());
        assert_eq!(get_limit(s, ATC_LIMIT_MAX_REGEXES), 13);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

/// The C codes are the core's names in order (`Limits::NAMES`), from 1: the Lua binding derives
/// its codes from the names the header test writes into its cdefs.
#[test]
fn every_code_is_its_names_position_plus_one() {
    for (code, name, default) in ALL_LIMITS {
        assert_eq!(atc_router::Limits::NAMES[code as usize - 1], name);
        assert_eq!(
            atc_router::Limits::default().by_name(name),
            Some(default as usize),
            "{name}"
        );
    }
    assert_eq!(atc_router::Limits::NAMES.len(), ALL_LIMITS.len());
}

#[test]
fn bad_codes_values_and_pointers_are_refused_and_change_nothing() {
    unsafe {
        let s = atc_schema_new();
        assert_eq!(set_limit(s, ATC_LIMIT_MAX_PREDICATES, 5).0, ATC_OK);
        for code in [0, 9, -1, i32::MAX, ATC_TYPE_INT - 100] {
            let (rc, msg) = set_limit(s, code, 7);
            assert_eq!(rc, ATC_ERR_INVALID, "{code}");
            assert!(
                msg.starts_with(&format!("{code} is not a limit code (expected 1 to 8")),
                "{msg}"
            );
            let mut v = 99;
            assert_eq!(atc_schema_get_limit(s, code, &mut v), ATC_ERR_INVALID);
            assert_eq!(v, 99, "nothing written for an unknown code");
        }
        for (code, name, _) in ALL_LIMITS {
            let before = get_limit(s, code);
            let (rc, msg) = set_limit(s, code, 0);
            assert_eq!(rc, ATC_ERR_INVALID, "{name}");
            assert_eq!(msg, format!("limit `{name}` must be at least 1, got 0"));
            assert_eq!(get_limit(s, code), before, "{name} unchanged");
        }
        assert_eq!(get_limit(s, ATC_LIMIT_MAX_PREDICATES), 5);
        // NULLs.
        let (mut buf, mut len) = (vec![0 as c_char; 64], 64);
        let rc = atc_schema_set_limit(
            null_mut(),
            ATC_LIMIT_MAX_DEPTH,
            1,
            buf.as_mut_ptr(),
            &mut len,
        );
        assert_eq!(rc, ATC_ERR_NULL);
        assert_eq!(message(&buf, len), "`schema` is NULL");
        let mut v = 0;
        assert_eq!(
            atc_schema_get_limit(null(), ATC_LIMIT_MAX_DEPTH, &mut v),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_schema_get_limit(s, ATC_LIMIT_MAX_DEPTH, null_mut()),
            ATC_ERR_NULL
        );
        // No error buffer wanted.
        let rc = atc_schema_set_limit(s, 0, 1, null_mut(), null_mut());
        assert_eq!(rc, ATC_ERR_INVALID);
        atc_schema_free(s);
    }
}

#[test]
fn a_shared_schema_refuses_limits_and_keeps_the_ones_it_has() {
    for router_first in [true, false] {
        let share = if router_first { "router" } else { "context" };
        unsafe {
            let s = atc_schema_new();
            let rc = atc_schema_add_field(s, p("p"), 1, ATC_TYPE_INT, null_mut(), null_mut());
            assert_eq!(rc, ATC_OK);
            assert_eq!(set_limit(s, ATC_LIMIT_MAX_PREDICATES, 2).0, ATC_OK);
            // One handle shares the schema; the other is made after the refusals below.
            let mut router = null_mut();
            let mut ctx = null_mut();
            if router_first {
                router = atc_router_new(s, null_mut(), null_mut());
            } else {
                ctx = atc_context_new(s, null_mut(), null_mut());
            }
            for (code, name, _) in ALL_LIMITS {
                let before = get_limit(s, code);
                let (rc, msg) = set_limit(s, code, 100_000);
                assert_eq!(rc, ATC_ERR_SCHEMA_SHARED, "{share}: {name}");
                assert_eq!(
                    msg,
                    format!(
                        "cannot set limit `{name}`: the schema is already used by a router or \
                         a context (set limits before creating them)"
                    )
                );
                assert_eq!(get_limit(s, code), before, "{share}: {name} unchanged");
            }
            // Bad arguments are still reported as such.
            assert_eq!(set_limit(s, 42, 1).0, ATC_ERR_INVALID);
            if router.is_null() {
                router = atc_router_new(s, null_mut(), null_mut());
            } else {
                ctx = atc_context_new(s, null_mut(), null_mut());
            }
            // Freed on drop.
            let f = Fixture {
                schema: s,
                router,
                ctx,
            };
            // Routers have the limit set before the schema was shared, not the refused one.
            let (rc, msg) = f.add(ID, "p == 1 || p == 2 || p == 3");
            assert_eq!(rc, ATC_ERR_EXPR, "{share}");
            assert!(
                msg.contains("too many predicates: 3, the limit is 2"),
                "{msg}"
            );
        }
    }
}

/// Each limit set through the C ABI tightens what `atc_router_add` and `atc_router_validate`
/// accept (while the schema builds and once it is shared), with the message naming the limit
/// and the value set; the same expression loads under the defaults.
#[test]
fn each_expression_limit_set_through_c_is_enforced_by_add_and_validate() {
    let total = (0..4)
        .map(|i| format!(r##"http.path ~ r#"^/r{i}/\w+/\w+$"#"##))
        .collect::<Vec<_>>()
        .join(" || ");
    let cases: [(i32, u64, String, &str); 6] = [
        (
            ATC_LIMIT_MAX_EXPRESSION_LEN,
            64,
            format!(r#"http.path == "{}""#, "a".repeat(64)),
            "expression is too long: 79 bytes, the limit is 64 bytes",
        ),
        (
            ATC_LIMIT_MAX_DEPTH,
            2,
            r#"(((http.path == "a")))"#.to_owned(),
            "expression is nested too deeply: the limit is 2 levels of parentheses",
        ),
        (
            ATC_LIMIT_MAX_PREDICATES,
            2,
            "p == 1 || p == 2 || p == 3".to_owned(),
            "too many predicates: 3, the limit is 2",
        ),
        (
            ATC_LIMIT_MAX_REGEXES,
            1,
            r#"http.path ~ "^/a" || http.path ~ "^/b""#.to_owned(),
            "too many regexes in one expression (limit: 1)",
        ),
        (
            ATC_LIMIT_REGEX_SIZE,
            64 * 1024,
            r#"http.path ~ "^/a{100}{100}""#.to_owned(),
            "regex is too large once compiled (limit: 65536 bytes)",
        ),
        (
            ATC_LIMIT_REGEX_TOTAL_SIZE,
            64 * 1024,
            total,
            "too large once compiled together (limit: 65536 bytes)",
        ),
    ];
    for (code, value, expr, words) in &cases {
        // While the schema builds, `atc_router_validate` already checks against the limit.
        unsafe {
            let s = atc_schema_new();
            let rc = atc_schema_add_field(
                s,
                p("http.path"),
                9,
                ATC_TYPE_STRING,
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK);
            assert_eq!(set_limit(s, *code, *value).0, ATC_OK);
            let (rc, msg) = validate(s, expr);
            assert_eq!(rc, ATC_ERR_EXPR, "building, {words}");
            assert!(msg.contains(words), "building: `{words}` not in: {msg}");
            atc_schema_free(s);
        }
        let f = Fixture::with_limits(&[(*code, *value)]);
        let (rc, msg) = f.add(ID, expr);
        assert_eq!(rc, ATC_ERR_EXPR, "{words}");
        assert!(msg.starts_with("line 1, column "), "{msg}");
        assert!(msg.contains(words), "`{words}` not in: {msg}");
        assert_eq!(
            validate(f.schema, expr),
            (rc, msg),
            "validate says the same"
        );
        let mut n = usize::MAX;
        unsafe { atc_router_len(f.router, &mut n) };
        assert_eq!(n, 0, "{words}: the refused route was not added");
        // Under the defaults the same route loads: it is the limit set that refused it.
        let d = Fixture::new();
        assert_eq!(d.add(ID, expr), (ATC_OK, String::new()), "{words}");
        assert_eq!(validate(d.schema, expr), (ATC_OK, String::new()));
    }
    // Each of the regexes that together go past 64 KiB (about 35 KiB each, Unicode `\w`) fits
    // alone: the total is what counts.
    let f = Fixture::with_limits(&[(ATC_LIMIT_REGEX_TOTAL_SIZE, 64 * 1024)]);
    assert_eq!(f.add(ID, r##"http.path ~ r#"^/r0/\w+/\w+$"#"##).0, ATC_OK);
}

#[test]
fn wildcard_names_limit_set_through_c() {
    let f = Fixture::with_limits(&[(ATC_LIMIT_MAX_WILDCARD_FIELDS, 2)]);
    assert_eq!(
        f.add(ID, r#"http.headers.a == "x" || http.headers.b == "y""#)
            .0,
        ATC_OK
    );
    let (rc, msg) = f.add(ID2, r#"http.headers.c == "z""#);
    assert_eq!(rc, ATC_ERR_EXPR);
    assert!(
        msg.contains("too many distinct wildcard field names in use by routes (limit: 2)"),
        "{msg}"
    );
    // A name already in use costs nothing more.
    assert_eq!(f.add(ID2, r#"http.headers.a == "z""#).0, ATC_OK);
}

#[test]
fn values_per_field_limit_set_through_c() {
    let f = Fixture::with_limits(&[(ATC_LIMIT_MAX_VALUES_PER_FIELD, 3)]);
    assert_eq!(
        f.add(ID, r#"http.path == "/a" || net.dst.port == 1"#).0,
        ATC_OK
    );
    let path = f.field("http.path");
    let port = f.field("net.dst.port");
    let mut buf = vec![0 as c_char; 256];
    unsafe {
        for _ in 0..3 {
            assert_eq!(
                atc_context_add_str(f.ctx, path, p("/a"), 2, null_mut(), null_mut()),
                ATC_OK
            );
        }
        let mut len = buf.len();
        let rc = atc_context_add_str(f.ctx, path, p("/a"), 2, buf.as_mut_ptr(), &mut len);
        assert_eq!(rc, ATC_ERR_LIMIT);
        assert_eq!(
            message(&buf, len),
            "field `http.path` already holds 3 values, the most one field may hold"
        );
        // A batch stops at the same value.
        let values: Vec<AtcValue> = (0..5)
            .map(|i| AtcValue {
                field: port,
                value_type: ATC_TYPE_INT,
                int_value: i,
                ptr: null(),
                len: 0,
            })
            .collect();
        let mut failed = usize::MAX;
        let mut len = buf.len();
        let rc = atc_context_add_values(
            f.ctx,
            values.as_ptr(),
            values.len(),
            &mut failed,
            buf.as_mut_ptr(),
            &mut len,
        );
        assert_eq!(rc, ATC_ERR_LIMIT);
        assert_eq!(failed, 3);
        assert!(message(&buf, len).contains("already holds 3 values"));
    }
    // The context still works.
    assert_eq!(f.execute(), 1);
}
