//! Resource limits through the C ABI: what a gateway worker sees when a request or a route goes
//! past a documented limit. Values per field are `ATC_ERR_LIMIT`; expression limits (length,
//! depth, predicates, regex size and count) and wildcard names in use by routes are
//! `ATC_ERR_EXPR` with the positioned message naming the limit. Request field names never count
//! against a limit. In every case the handles stay usable: the worker goes on serving.

use std::ffi::c_char;
use std::ptr::null_mut;

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
        unsafe {
            let schema = atc_schema_new();
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
