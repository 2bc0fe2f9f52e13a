//! The C ABI called directly, the way a C program would: NULLs, invalid UTF-8, bad ids, types
//! and UUIDs, small buffers, error-buffer truncation, lifetimes.

use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

use atc_router_ffi::*;

#[path = "support/route_list.rs"]
mod route_list;
use route_list::route_list;

const U1: &str = "a8f2c1e4-0000-4000-8000-000000000001";
const U2: &str = "a8f2c1e4-0000-4000-8000-000000000002";

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

/// An error buffer and the message a call left in it.
struct ErrBuf {
    buf: Vec<c_char>,
    len: usize,
}

impl ErrBuf {
    fn new(cap: usize) -> ErrBuf {
        ErrBuf {
            buf: vec![0x55; cap],
            len: cap,
        }
    }
    fn ptr(&mut self) -> *mut c_char {
        self.buf.as_mut_ptr()
    }
    fn len(&mut self) -> *mut usize {
        self.len = self.buf.len();
        &mut self.len
    }
    fn text(&self) -> String {
        let bytes: Vec<u8> = self.buf[..self.len].iter().map(|&c| c as u8).collect();
        if self.len < self.buf.len() {
            assert_eq!(self.buf[self.len], 0, "the message is NUL-terminated");
        }
        String::from_utf8(bytes).expect("messages are never cut inside a character")
    }
}

fn schema_with(fields: &[(&str, i32)]) -> *mut AtcSchema {
    let s = atc_schema_new();
    assert!(!s.is_null());
    for (name, ty) in fields {
        let rc =
            unsafe { atc_schema_add_field(s, p(name), name.len(), *ty, null_mut(), null_mut()) };
        assert_eq!(rc, ATC_OK, "{name}");
    }
    s
}

fn http_schema() -> *mut AtcSchema {
    schema_with(&[
        ("http.host", ATC_TYPE_STRING),
        ("http.path", ATC_TYPE_STRING),
        ("http.headers.*", ATC_TYPE_STRING),
        ("net.dst.port", ATC_TYPE_INT),
        ("net.src.ip", ATC_TYPE_IPADDR),
        ("net.src.cidr", ATC_TYPE_IPCIDR),
    ])
}

fn add(r: *mut AtcRouter, prio: u64, id: &str, expr: &str) -> (i32, String) {
    let mut e = ErrBuf::new(1024);
    let rc = unsafe {
        atc_router_add(
            r,
            prio,
            p(id),
            id.len(),
            p(expr),
            expr.len(),
            e.ptr(),
            e.len(),
        )
    };
    (
        rc,
        if rc == ATC_OK {
            String::new()
        } else {
            e.text()
        },
    )
}

fn field(c: *const AtcContext, name: &str) -> (u32, i32) {
    let (mut id, mut ty) = (0u32, -99i32);
    let rc = unsafe {
        atc_context_field_id(
            c,
            p(name),
            name.len(),
            &mut id,
            &mut ty,
            null_mut(),
            null_mut(),
        )
    };
    assert_eq!(rc, ATC_OK, "{name}");
    (id, ty)
}

fn add_str(c: *mut AtcContext, id: u32, v: &[u8]) -> (i32, String) {
    let mut e = ErrBuf::new(512);
    let rc = unsafe { atc_context_add_str(c, id, v.as_ptr().cast(), v.len(), e.ptr(), e.len()) };
    (
        rc,
        if rc == ATC_OK {
            String::new()
        } else {
            e.text()
        },
    )
}

fn result_id(c: *mut AtcContext) -> Option<String> {
    let mut buf = [0 as c_char; 64];
    let mut len = buf.len();
    let rc = unsafe {
        atc_context_result(
            c,
            null(),
            buf.as_mut_ptr(),
            &mut len,
            null_mut(),
            null_mut(),
        )
    };
    match rc {
        1 => Some(buf[..len].iter().map(|&b| b as u8 as char).collect()),
        0 => None,
        e => panic!("atc_context_result: {e}"),
    }
}

#[test]
fn null_handles_and_pointers_are_errors() {
    unsafe {
        let mut e = ErrBuf::new(256);
        let mut n = 0usize;
        let mut id = 0u32;
        let mut ty = 0i32;
        assert_eq!(
            atc_schema_add_field(null_mut(), p("a"), 1, 0, e.ptr(), e.len()),
            ATC_ERR_NULL
        );
        assert_eq!(e.text(), "`schema` is NULL");
        assert_eq!(
            atc_schema_field_type(null(), p("a"), 1, &mut ty),
            ATC_ERR_NULL
        );
        assert!(atc_router_new(null(), e.ptr(), e.len()).is_null());
        assert_eq!(e.text(), "`schema` is NULL");
        assert!(atc_context_new(null(), null_mut(), null_mut()).is_null());
        assert_eq!(
            atc_router_add(null_mut(), 1, p(U1), 36, p("a"), 1, e.ptr(), e.len()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_router_remove(null_mut(), p(U1), 36, null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(atc_router_execute(null(), null_mut()), ATC_ERR_NULL);
        assert_eq!(
            atc_router_fields(null(), null_mut(), &mut n, null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(atc_router_len(null(), &mut n), ATC_ERR_NULL);
        assert_eq!(
            atc_router_validate(
                null(),
                p("a"),
                1,
                null_mut(),
                &mut n,
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ATC_ERR_NULL
        );
        assert_eq!(atc_context_reset(null_mut()), ATC_ERR_NULL);
        assert_eq!(
            atc_context_field_id(null(), p("a"), 1, &mut id, &mut ty, null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_add_str(null_mut(), 0, p("a"), 1, null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_add_int(null_mut(), 0, 1, null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_add_ip(null_mut(), 0, p("a"), 1, null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_add_values(null_mut(), null(), 0, null_mut(), null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_result(
                null_mut(),
                null(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_captures(null(), null_mut(), &mut n),
            ATC_ERR_NULL
        );
        // Freeing NULL is a no-op.
        atc_schema_free(null_mut());
        atc_router_free(null_mut());
        atc_context_free(null_mut());

        // NULL string pointers: fine with length 0, an error otherwise.
        let s = http_schema();
        assert_eq!(
            atc_schema_add_field(s, null(), 3, 0, e.ptr(), e.len()),
            ATC_ERR_NULL
        );
        assert_eq!(e.text(), "`name` is NULL but its length is 3");
        assert_eq!(
            atc_schema_add_field(s, null(), 0, 0, e.ptr(), e.len()),
            ATC_ERR_INVALID
        );
        // NULL output pointers.
        assert_eq!(
            atc_schema_field_type(s, p("http.host"), 9, null_mut()),
            ATC_ERR_NULL
        );
        let c = atc_context_new(s, null_mut(), null_mut());
        assert_eq!(
            atc_context_field_id(
                c,
                p("http.host"),
                9,
                null_mut(),
                null_mut(),
                e.ptr(),
                e.len()
            ),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_captures(c, null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_context_add_values(c, null(), 2, null_mut(), e.ptr(), e.len()),
            ATC_ERR_NULL
        );
        let r = atc_router_new(s, null_mut(), null_mut());
        assert_eq!(
            atc_router_fields(r, null_mut(), null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(atc_router_len(r, null_mut()), ATC_ERR_NULL);
        assert_eq!(atc_router_execute(r, null_mut()), ATC_ERR_NULL);
        assert_eq!(atc_router_execute(null(), c), ATC_ERR_NULL);
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn invalid_utf8_is_rejected_everywhere() {
    unsafe {
        let bad = b"http.h\xffost";
        let mut e = ErrBuf::new(256);
        let s = http_schema();
        assert_eq!(
            atc_schema_add_field(s, bad.as_ptr().cast(), bad.len(), 0, e.ptr(), e.len()),
            ATC_ERR_UTF8
        );
        assert_eq!(
            e.text(),
            "`name` is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 6"
        );
        let mut ty = 0;
        assert_eq!(
            atc_schema_field_type(s, bad.as_ptr().cast(), bad.len(), &mut ty),
            ATC_ERR_UTF8
        );
        let r = atc_router_new(s, null_mut(), null_mut());
        let c = atc_context_new(s, null_mut(), null_mut());
        let expr = b"http.path == \"\xc3\"";
        assert_eq!(
            atc_router_add(
                r,
                1,
                p(U1),
                36,
                expr.as_ptr().cast(),
                expr.len(),
                e.ptr(),
                e.len()
            ),
            ATC_ERR_UTF8
        );
        assert_eq!(
            atc_router_add(
                r,
                1,
                bad.as_ptr().cast(),
                bad.len(),
                p("a"),
                1,
                e.ptr(),
                e.len()
            ),
            ATC_ERR_UTF8
        );
        let mut n = 0;
        assert_eq!(
            atc_router_validate(
                s,
                expr.as_ptr().cast(),
                expr.len(),
                null_mut(),
                &mut n,
                null_mut(),
                e.ptr(),
                e.len()
            ),
            ATC_ERR_UTF8
        );
        let mut id = 0;
        assert_eq!(
            atc_context_field_id(
                c,
                bad.as_ptr().cast(),
                bad.len(),
                &mut id,
                null_mut(),
                e.ptr(),
                e.len()
            ),
            ATC_ERR_UTF8
        );
        let (path, _) = field(c, "http.path");
        let (rc, msg) = add_str(c, path, b"/a\xed\xa0\x80"); // an encoded surrogate
        assert_eq!(rc, ATC_ERR_UTF8);
        assert!(msg.contains("from index 2"), "{msg}");
        let (ip, _) = field(c, "net.src.ip");
        assert_eq!(
            atc_context_add_ip(c, ip, bad.as_ptr().cast(), bad.len(), e.ptr(), e.len()),
            ATC_ERR_UTF8
        );
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn schema_rules() {
    unsafe {
        let mut e = ErrBuf::new(256);
        let s = http_schema();
        assert_eq!(
            atc_schema_add_field(s, p("http.host"), 9, ATC_TYPE_INT, e.ptr(), e.len()),
            ATC_ERR_DUPLICATE
        );
        assert_eq!(e.text(), "field `http.host` is already in the schema");
        assert_eq!(
            atc_schema_add_field(s, p("x"), 1, 7, e.ptr(), e.len()),
            ATC_ERR_INVALID
        );
        assert!(e.text().contains("not a field type code"));
        assert_eq!(
            atc_schema_add_field(s, p("1x"), 2, 0, e.ptr(), e.len()),
            ATC_ERR_INVALID
        );
        let mut ty = -5;
        assert_eq!(
            atc_schema_field_type(s, p("http.headers.x"), 14, &mut ty),
            ATC_OK
        );
        assert_eq!(ty, ATC_TYPE_STRING);
        assert_eq!(
            atc_schema_field_type(s, p("net.src.cidr"), 12, &mut ty),
            ATC_OK
        );
        assert_eq!(ty, ATC_TYPE_IPCIDR);
        assert_eq!(
            atc_schema_field_type(s, p("nope"), 4, &mut ty),
            ATC_ERR_UNKNOWN_FIELD
        );

        // Validating does not share the schema, and does not disturb later field ids.
        let mut n = 0;
        let expr = "http.headers.x_a == \"1\"";
        assert_eq!(
            atc_router_validate(
                s,
                p(expr),
                expr.len(),
                null_mut(),
                &mut n,
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ATC_ERR_BUFFER
        );
        assert_eq!(n, "http.headers.x_a".len() + 1);
        assert_eq!(
            atc_schema_add_field(s, p("late"), 4, ATC_TYPE_STRING, null_mut(), null_mut()),
            ATC_OK
        );

        // Once a router exists, no more fields.
        let r = atc_router_new(s, null_mut(), null_mut());
        assert_eq!(
            atc_schema_add_field(s, p("later"), 5, ATC_TYPE_STRING, e.ptr(), e.len()),
            ATC_ERR_SCHEMA_SHARED
        );
        assert!(
            e.text().contains("already used by a router or a context"),
            "{}",
            e.text()
        );
        // Field types are still readable.
        assert_eq!(atc_schema_field_type(s, p("late"), 4, &mut ty), ATC_OK);
        let c = atc_context_new(s, null_mut(), null_mut());
        let (late, _) = field(c, "late");
        let (hx, _) = field(c, "http.headers.x_a");
        assert_ne!(
            late, hx,
            "a field added after a validation has an id of its own"
        );
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn router_errors_and_buffers() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        assert_eq!(add(r, 1, U1, r#"http.path ^= "/a""#).0, ATC_OK);
        let (rc, msg) = add(r, 1, U1, r#"http.path ^= "/b""#);
        assert_eq!(rc, ATC_ERR_DUPLICATE);
        assert!(msg.contains(U1), "{msg}");
        let (rc, msg) = add(r, 1, "nope", r#"http.path ^= "/b""#);
        assert_eq!(rc, ATC_ERR_UUID);
        assert!(msg.starts_with("invalid route id \"nope\""), "{msg}");
        let (rc, msg) = add(r, 1, U2, r#"http.path = "/b""#);
        assert_eq!(rc, ATC_ERR_EXPR);
        assert!(msg.starts_with("line 1, column 11"), "{msg}");
        assert_eq!(add(r, 1, U2, r#"nope == "/b""#).0, ATC_ERR_EXPR);
        assert_eq!(add(r, 1, U2, r#"net.dst.port == "80""#).0, ATC_ERR_EXPR);

        let mut count = 0;
        assert_eq!(atc_router_len(r, &mut count), ATC_OK);
        assert_eq!(count, 1);
        assert_eq!(
            add(r, 2, U2, r#"http.host == "h" && net.dst.port > 1"#).0,
            ATC_OK
        );

        // Field list: too small reports the size needed and writes nothing.
        let want = b"http.host\0http.path\0net.dst.port\0";
        let mut buf = [0x55 as c_char; 64];
        let mut len = 5;
        let mut n = 0;
        assert_eq!(
            atc_router_fields(r, buf.as_mut_ptr(), &mut len, &mut n),
            ATC_ERR_BUFFER
        );
        assert_eq!((len, n), (want.len(), 3));
        assert_eq!(buf[0], 0x55);
        len = 0;
        assert_eq!(
            atc_router_fields(r, null_mut(), &mut len, null_mut()),
            ATC_ERR_BUFFER
        );
        assert_eq!(len, want.len());
        len = buf.len();
        assert_eq!(
            atc_router_fields(r, buf.as_mut_ptr(), &mut len, &mut n),
            ATC_OK
        );
        let got: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
        assert_eq!(got, want);

        // Validate writes the fields in order of first use.
        let expr = r#"net.dst.port == 1 && http.host == "a""#;
        len = buf.len();
        assert_eq!(
            atc_router_validate(
                s,
                p(expr),
                expr.len(),
                buf.as_mut_ptr(),
                &mut len,
                &mut n,
                null_mut(),
                null_mut()
            ),
            ATC_OK
        );
        let got: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
        assert_eq!(got, b"net.dst.port\0http.host\0");
        assert_eq!(n, 2);

        // Remove.
        let mut e = ErrBuf::new(128);
        assert_eq!(atc_router_remove(r, p(U1), 36, e.ptr(), e.len()), ATC_OK);
        assert_eq!(
            atc_router_remove(r, p(U1), 36, e.ptr(), e.len()),
            ATC_ERR_NOT_FOUND
        );
        assert_eq!(e.text(), format!("no route with id {U1}"));
        assert_eq!(
            atc_router_remove(r, p("x"), 1, e.ptr(), e.len()),
            ATC_ERR_UUID
        );
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn error_messages_are_truncated_on_character_boundaries() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        // The message quotes the expression line, which is full of 3-byte characters.
        let expr = "http.path == \"€€€€€€€€€€\" &&";
        let mut full = ErrBuf::new(4096);
        assert_eq!(
            atc_router_add(r, 1, p(U1), 36, p(expr), expr.len(), full.ptr(), full.len()),
            ATC_ERR_EXPR
        );
        let full = full.text();
        assert!(full.contains('€'));
        for cap in 0..full.len() + 3 {
            let mut e = ErrBuf::new(cap);
            let rc = atc_router_add(r, 1, p(U1), 36, p(expr), expr.len(), e.ptr(), e.len());
            assert_eq!(rc, ATC_ERR_EXPR);
            let text = e.text(); // panics on a split character
            assert!(full.starts_with(&text), "cap {cap}");
            assert!(text.len() < cap.max(1), "cap {cap}: {} bytes", text.len());
            assert!(
                full.len() - text.len() < 4 || text.len() + 4 > cap,
                "cap {cap}: cut too early"
            );
        }
        // NULL length pointer or NULL buffer: no message, same status.
        let mut len = 10usize;
        assert_eq!(
            atc_router_add(r, 1, p(U1), 36, p(expr), expr.len(), null_mut(), &mut len),
            ATC_ERR_EXPR
        );
        assert_eq!(len, 10);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn context_values_types_and_batch() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let expr = r#"http.path ^= "/a" && net.dst.port == 80 && net.src.ip in 10.0.0.0/8 && net.src.cidr == 10.0.0.0/8 && http.headers.x_a == "1""#;
        assert_eq!(add(r, 1, U1, expr).0, ATC_OK);
        let c = atc_context_new(s, null_mut(), null_mut());
        let (path, t_path) = field(c, "http.path");
        let (port, t_port) = field(c, "net.dst.port");
        let (ip, t_ip) = field(c, "net.src.ip");
        let (cidr, t_cidr) = field(c, "net.src.cidr");
        let (hx, t_hx) = field(c, "http.headers.x_a");
        assert_eq!(
            [t_path, t_port, t_ip, t_cidr, t_hx],
            [
                ATC_TYPE_STRING,
                ATC_TYPE_INT,
                ATC_TYPE_IPADDR,
                ATC_TYPE_IPCIDR,
                ATC_TYPE_STRING
            ]
        );
        assert_eq!(field(c, "http.headers.x_a").0, hx, "ids are stable");

        let mut e = ErrBuf::new(256);
        let mut id = 0;
        assert_eq!(
            atc_context_field_id(c, p("nope"), 4, &mut id, null_mut(), e.ptr(), e.len()),
            ATC_ERR_UNKNOWN_FIELD
        );
        // Wrong types and unknown ids, one function at a time.
        assert_eq!(add_str(c, port, b"80").0, ATC_ERR_TYPE);
        assert_eq!(add_str(c, 9999, b"80").0, ATC_ERR_UNKNOWN_FIELD);
        assert_eq!(
            atc_context_add_int(c, path, 80, e.ptr(), e.len()),
            ATC_ERR_TYPE
        );
        assert!(
            e.text().contains("field `http.path` holds String values"),
            "{}",
            e.text()
        );
        assert_eq!(
            atc_context_add_int(c, u32::MAX, 80, e.ptr(), e.len()),
            ATC_ERR_UNKNOWN_FIELD
        );
        assert_eq!(
            atc_context_add_ip(c, path, p("1.2.3.4"), 7, e.ptr(), e.len()),
            ATC_ERR_TYPE
        );
        assert_eq!(
            atc_context_add_ip(c, port, p("1.2.3.4"), 7, e.ptr(), e.len()),
            ATC_ERR_TYPE
        );
        assert_eq!(
            atc_context_add_ip(c, ip, p("1.2.3.400"), 9, e.ptr(), e.len()),
            ATC_ERR_INVALID
        );
        assert_eq!(
            atc_context_add_ip(c, cidr, p("10.0.0.1/8"), 10, e.ptr(), e.len()),
            ATC_ERR_INVALID
        );

        // A batch stops at the first bad value and says which.
        let v = |field, value_type, int_value, text: &'static str| AtcValue {
            field,
            value_type,
            int_value,
            ptr: p(text),
            len: text.len(),
        };
        let batch = [
            v(path, ATC_TYPE_STRING, 0, "/a/b"),
            v(port, ATC_TYPE_INT, 80, ""),
            v(ip, ATC_TYPE_IPADDR, 0, "10.1.1.1"),
            v(cidr, ATC_TYPE_IPCIDR, 0, "10.0.0.0/8"),
            v(hx, ATC_TYPE_STRING, 0, "1"),
        ];
        let mut failed = usize::MAX;
        assert_eq!(
            atc_context_add_values(
                c,
                batch.as_ptr(),
                batch.len(),
                &mut failed,
                e.ptr(),
                e.len()
            ),
            ATC_OK
        );
        assert_eq!(failed, usize::MAX, "untouched on success");
        assert_eq!(atc_router_execute(r, c), 1);
        assert_eq!(result_id(c).as_deref(), Some(U1));

        for (bad, code) in [
            (v(port, ATC_TYPE_STRING, 0, "80"), ATC_ERR_TYPE),
            (v(port, 42, 0, ""), ATC_ERR_INVALID),
            (v(77_777, ATC_TYPE_INT, 1, ""), ATC_ERR_UNKNOWN_FIELD),
            (v(ip, ATC_TYPE_IPADDR, 0, "::g"), ATC_ERR_INVALID),
            (
                AtcValue {
                    field: path,
                    value_type: ATC_TYPE_STRING,
                    int_value: 0,
                    ptr: null(),
                    len: 4,
                },
                ATC_ERR_NULL,
            ),
        ] {
            assert_eq!(atc_context_reset(c), ATC_OK);
            let batch = [batch[0], bad, batch[1]];
            let rc = atc_context_add_values(c, batch.as_ptr(), 3, &mut failed, e.ptr(), e.len());
            assert_eq!(rc, code, "{}", e.text());
            assert_eq!(failed, 1);
            assert!(e.text().starts_with("value 1: "), "{}", e.text());
        }
        // Empty batches are fine, even with a NULL array.
        assert_eq!(
            atc_context_add_values(c, null(), 0, null_mut(), null_mut(), null_mut()),
            ATC_OK
        );

        // Too many values for one field.
        atc_context_reset(c);
        let mut last = ATC_OK;
        for _ in 0..5000 {
            last = add_str(c, hx, b"v").0;
            if last != ATC_OK {
                break;
            }
        }
        assert_eq!(last, ATC_ERR_LIMIT);
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn results_matched_values_and_captures() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let expr = r##"http.path ~ r#"^/u/(?<id>\d+)/(x)?(y)?$"# && net.dst.port == 8443 && net.src.ip == 10.0.0.1 && net.src.cidr == 10.0.0.0/8"##;
        assert_eq!(add(r, 1, U1, expr).0, ATC_OK, "{}", add(r, 1, U1, expr).1);
        let c = atc_context_new(s, null_mut(), null_mut());
        let (path, _) = field(c, "http.path");
        let (port, _) = field(c, "net.dst.port");
        let (ip, _) = field(c, "net.src.ip");
        let (cidr, _) = field(c, "net.src.cidr");
        let (host, _) = field(c, "http.host");

        // Nothing to read before an execute.
        let mut n = 99;
        assert_eq!(atc_context_captures(c, null_mut(), &mut n), ATC_OK);
        assert_eq!(n, 0);
        assert_eq!(result_id(c), None);

        assert_eq!(add_str(c, path, b"/u/42/x").0, ATC_OK);
        assert_eq!(
            atc_context_add_int(c, port, 8443, null_mut(), null_mut()),
            ATC_OK
        );
        assert_eq!(
            atc_context_add_ip(c, ip, p("10.0.0.1"), 8, null_mut(), null_mut()),
            ATC_OK
        );
        assert_eq!(
            atc_context_add_ip(c, cidr, p("10.0.0.0/8"), 10, null_mut(), null_mut()),
            ATC_OK
        );
        assert_eq!(atc_router_execute(r, c), 1);

        // UUID buffer too small.
        let mut small = [0 as c_char; 8];
        let mut len = small.len();
        assert_eq!(
            atc_context_result(
                c,
                null(),
                small.as_mut_ptr(),
                &mut len,
                null_mut(),
                null_mut()
            ),
            ATC_ERR_BUFFER
        );
        assert_eq!(len, ATC_UUID_LEN);
        assert_eq!(
            atc_context_result(
                c,
                null(),
                small.as_mut_ptr(),
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ATC_ERR_NULL
        );

        let read = |f: Option<u32>| -> AtcMatched {
            let mut m = AtcMatched {
                value_type: 77,
                int_value: 0,
                ptr: null(),
                len: 0,
            };
            let fp = f.as_ref().map_or(null(), |f| f as *const u32);
            let mut nc = 0;
            assert_eq!(
                atc_context_result(c, fp, null_mut(), null_mut(), &mut m, &mut nc),
                1
            );
            assert_eq!(nc, 4);
            m
        };
        let text = |m: &AtcMatched| -> String {
            String::from_utf8(std::slice::from_raw_parts(m.ptr.cast::<u8>(), m.len).to_vec())
                .unwrap()
        };
        let m = read(Some(path));
        assert_eq!(
            (m.value_type, text(&m).as_str()),
            (ATC_TYPE_STRING, "/u/42/x")
        );
        let m = read(Some(port));
        assert_eq!(
            (m.value_type, m.int_value, text(&m).as_str()),
            (ATC_TYPE_INT, 8443, "8443")
        );
        let m = read(Some(ip));
        assert_eq!(
            (m.value_type, text(&m).as_str()),
            (ATC_TYPE_IPADDR, "10.0.0.1")
        );
        let m = read(Some(cidr));
        assert_eq!(
            (m.value_type, text(&m).as_str()),
            (ATC_TYPE_IPCIDR, "10.0.0.0/8")
        );
        assert_eq!(read(Some(host)).value_type, ATC_TYPE_NONE);
        assert_eq!(read(Some(123_456)).value_type, ATC_TYPE_NONE);
        assert_eq!(read(None).value_type, ATC_TYPE_NONE);

        // Captures: too small a buffer reports the count and writes nothing.
        let empty = AtcCapture {
            index: -7,
            name: null(),
            name_len: 0,
            value: null(),
            value_len: 0,
        };
        let mut caps = vec![empty; 10];
        let mut n = 2;
        assert_eq!(
            atc_context_captures(c, caps.as_mut_ptr(), &mut n),
            ATC_ERR_BUFFER
        );
        assert_eq!(n, 4);
        assert_eq!(caps[0].index, -7);
        n = 4;
        assert_eq!(atc_context_captures(c, null_mut(), &mut n), ATC_ERR_NULL);
        n = caps.len();
        assert_eq!(atc_context_captures(c, caps.as_mut_ptr(), &mut n), ATC_OK);
        assert_eq!(n, 4);
        let s_of = |ptr: *const c_char, len: usize| {
            String::from_utf8(std::slice::from_raw_parts(ptr.cast::<u8>(), len).to_vec()).unwrap()
        };
        let mut got: Vec<(i64, String, String)> = caps[..n]
            .iter()
            .map(|k| {
                let name = if k.index < 0 {
                    s_of(k.name, k.name_len)
                } else {
                    assert!(k.name.is_null());
                    String::new()
                };
                (k.index, name, s_of(k.value, k.value_len))
            })
            .collect();
        got.sort();
        let want: Vec<(i64, String, String)> = [
            (-1, "id", "42"),
            (0, "", "/u/42/x"),
            (1, "", "42"),
            (2, "", "x"),
        ]
        .iter()
        .map(|(i, n, v)| (*i, n.to_string(), v.to_string()))
        .collect();
        // Group 3 (`(y)?`) did not take part, so it is absent.
        assert_eq!(got, want);

        // Reset forgets the result.
        assert_eq!(atc_context_reset(c), ATC_OK);
        assert_eq!(result_id(c), None);
        n = caps.len();
        assert_eq!(atc_context_captures(c, caps.as_mut_ptr(), &mut n), ATC_OK);
        assert_eq!(n, 0);
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn key_and_needed_fields() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let c = atc_context_new(s, null_mut(), null_mut());
        let (host, _) = field(c, "http.host");
        let (path, _) = field(c, "http.path");
        let (port, _) = field(c, "net.dst.port");
        let bit = |id: u32| 1u64 << id.min(ATC_FIELD_MASK_LAST_BIT);
        let mut mask = 0u64;
        assert_eq!(atc_router_key_fields(r, &mut mask), ATC_OK);
        assert_eq!(mask, 0, "no routes, no key fields");
        assert_eq!(
            add(r, 2, U1, r#"http.host == "a" && http.path ^= "/p""#).0,
            ATC_OK
        );
        assert_eq!(
            add(r, 1, U2, r#"http.host == "b" && net.dst.port == 1"#).0,
            ATC_OK
        );
        assert_eq!(atc_router_key_fields(r, &mut mask), ATC_OK);
        assert_eq!(mask, bit(host));
        // Host a: U1's fields; host b: U2's.
        assert_eq!(add_str(c, host, b"a").0, ATC_OK);
        assert_eq!(atc_router_needed_fields(r, c, &mut mask), ATC_OK);
        assert_eq!(mask, bit(host) | bit(path));
        assert_eq!(atc_context_reset(c), ATC_OK);
        assert_eq!(add_str(c, host, b"b").0, ATC_OK);
        assert_eq!(atc_router_needed_fields(r, c, &mut mask), ATC_OK);
        assert_eq!(mask, bit(host) | bit(port));
        // NULLs are errors, a foreign context needs every field.
        assert_eq!(atc_router_key_fields(null(), &mut mask), ATC_ERR_NULL);
        assert_eq!(atc_router_key_fields(r, null_mut()), ATC_ERR_NULL);
        assert_eq!(atc_router_needed_fields(null(), c, &mut mask), ATC_ERR_NULL);
        assert_eq!(
            atc_router_needed_fields(r, null_mut(), &mut mask),
            ATC_ERR_NULL
        );
        assert_eq!(atc_router_needed_fields(r, c, null_mut()), ATC_ERR_NULL);
        let s2 = http_schema();
        let c2 = atc_context_new(s2, null_mut(), null_mut());
        assert_eq!(atc_router_needed_fields(r, c2, &mut mask), ATC_OK);
        assert_eq!(mask, u64::MAX);
        atc_context_free(c2);
        atc_schema_free(s2);
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn schema_freed_first_and_foreign_contexts() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let c = atc_context_new(s, null_mut(), null_mut());
        atc_schema_free(s);
        // Router and context keep the schema alive.
        assert_eq!(add(r, 1, U1, r#"http.host == "a""#).0, ATC_OK);
        let (host, _) = field(c, "http.host");
        assert_eq!(add_str(c, host, b"a").0, ATC_OK);
        assert_eq!(atc_router_execute(r, c), 1);
        assert_eq!(result_id(c).as_deref(), Some(U1));

        // A context of another schema handle, even with the same fields, is refused.
        let s2 = http_schema();
        let c2 = atc_context_new(s2, null_mut(), null_mut());
        assert_eq!(atc_router_execute(r, c2), ATC_ERR_SCHEMA_MISMATCH);
        // ... and the context of r still matches, while c2 has no result.
        assert_eq!(result_id(c2), None);
        atc_router_free(r);
        // The context outlives both the router and the schema.
        assert_eq!(atc_context_reset(c), ATC_OK);
        assert_eq!(add_str(c, host, b"b").0, ATC_OK);
        atc_context_free(c);
        atc_context_free(c2);
        atc_schema_free(s2);
    }
}

#[test]
fn strerror_is_static_text() {
    for code in [ATC_OK, ATC_ERR_BUFFER, ATC_ERR_PANIC, 12345] {
        let s = unsafe { CStr::from_ptr(atc_strerror(code)) };
        assert!(!s.to_bytes().is_empty());
    }
}

// ---- atc_router_sync ----

const U3: &str = "a8f2c1e4-0000-4000-8000-000000000003";
const U4: &str = "a8f2c1e4-0000-4000-8000-000000000004";

/// A route of a sync batch over borrowed bytes.
fn route(id: &[u8], priority: u64, expr: &[u8]) -> AtcRoute {
    AtcRoute {
        id: id.as_ptr().cast(),
        id_len: id.len(),
        priority,
        expr: expr.as_ptr().cast(),
        expr_len: expr.len(),
        position: 0,
    }
}

/// The outcome of one sync, read back from the caller buffers.
#[derive(Debug)]
struct Synced {
    rc: i32,
    report: AtcSyncReport,
    /// (index, code, message or None when it got no room)
    errors: Vec<(usize, i32, Option<String>)>,
    msg_used: usize,
    errbuf: String,
}

unsafe fn sync_with(
    r: *mut AtcRouter,
    routes: &[AtcRoute],
    mode: i32,
    errors_cap: usize,
    msg_cap: usize,
) -> Synced {
    let mut report = AtcSyncReport {
        added: 99,
        removed: 99,
        changed: 99,
        unchanged: 99,
        errors: 99,
        messages_len: 99,
    };
    let mut errors = vec![
        AtcSyncError {
            index: 77,
            code: 77,
            message: null(),
            message_len: 77,
        };
        errors_cap
    ];
    let mut errors_len = errors_cap;
    let mut msgbuf = vec![0x55 as c_char; msg_cap];
    let mut msg_len = msg_cap;
    let mut e = ErrBuf::new(1024);
    let list = route_list(routes);
    let rc = atc_router_sync(
        r,
        list,
        mode,
        &mut report,
        errors.as_mut_ptr(),
        &mut errors_len,
        msgbuf.as_mut_ptr(),
        &mut msg_len,
        e.ptr(),
        e.len(),
    );
    atc_route_list_free(list);
    let base = msgbuf.as_ptr();
    let errors = errors[..errors_len]
        .iter()
        .map(|x| {
            let msg = (!x.message.is_null()).then(|| {
                // Inside msgbuf, NUL-terminated, whole characters.
                let off = x.message.offset_from(base) as usize;
                assert!(off + x.message_len < msg_cap, "message inside msgbuf");
                assert_eq!(*x.message.add(x.message_len), 0, "NUL after the message");
                let bytes = std::slice::from_raw_parts(x.message.cast::<u8>(), x.message_len);
                String::from_utf8(bytes.to_vec()).expect("messages are cut on char boundaries")
            });
            (x.index, x.code, msg)
        })
        .collect();
    Synced {
        rc,
        report,
        errors,
        msg_used: msg_len,
        errbuf: if rc == ATC_OK {
            String::new()
        } else {
            e.text()
        },
    }
}

unsafe fn sync(r: *mut AtcRouter, routes: &[AtcRoute], mode: i32) -> Synced {
    sync_with(r, routes, mode, 64, 64 * 1024)
}

fn counts(s: &Synced) -> (usize, usize, usize, usize, usize) {
    let r = &s.report;
    (r.added, r.removed, r.changed, r.unchanged, r.errors)
}

/// The route id a path routes to.
unsafe fn route_of(r: *mut AtcRouter, c: *mut AtcContext, path: &str) -> Option<String> {
    atc_context_reset(c);
    let (id, _) = field(c, "http.path");
    assert_eq!(add_str(c, id, path.as_bytes()).0, ATC_OK);
    assert!(atc_router_execute(r, c) >= 0);
    result_id(c)
}

#[test]
fn sync_adds_changes_removes_and_counts() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let c = atc_context_new(s, null_mut(), null_mut());
        for mode in [ATC_SYNC_ALL_OR_NOTHING, ATC_SYNC_APPLY_VALID] {
            let out = sync(
                r,
                &[
                    route(U1.as_bytes(), 1, br#"http.path ^= "/a""#),
                    route(U2.as_bytes(), 2, br#"http.path ^= "/b""#),
                ],
                mode,
            );
            assert_eq!(out.rc, ATC_OK, "{out:?}");
            assert_eq!(counts(&out), (2, 0, 0, 0, 0));
            assert!(out.errors.is_empty());
            assert_eq!(out.msg_used, 0);
            assert_eq!(out.report.messages_len, 0);

            // Same U1; U2 with another expression; U3 new (braced form is a UUID too).
            let u3 = format!("{{{U3}}}");
            let out = sync(
                r,
                &[
                    route(U1.as_bytes(), 1, br#"http.path ^= "/a""#),
                    route(U2.as_bytes(), 2, br#"http.path ^= "/bb""#),
                    route(u3.as_bytes(), 3, br#"http.path ^= "/c""#),
                ],
                mode,
            );
            assert_eq!(counts(&out), (1, 0, 1, 1, 0));
            assert_eq!(route_of(r, c, "/a").as_deref(), Some(U1));
            assert_eq!(route_of(r, c, "/b"), None);
            assert_eq!(route_of(r, c, "/bb").as_deref(), Some(U2));
            assert_eq!(route_of(r, c, "/c").as_deref(), Some(U3));

            // A priority change is a change; a missing id is removed.
            let out = sync(
                r,
                &[
                    route(U1.as_bytes(), 10, br#"http.path ^= "/a""#),
                    route(U3.as_bytes(), 3, br#"http.path ^= "/c""#),
                ],
                mode,
            );
            assert_eq!(counts(&out), (0, 1, 1, 1, 0));
            let mut n = 0;
            atc_router_len(r, &mut n);
            assert_eq!(n, 2);

            // An empty list (NULL with n = 0) empties the router.
            let out = sync(r, &[], mode);
            assert_eq!(counts(&out), (0, 2, 0, 0, 0));
            atc_router_len(r, &mut n);
            assert_eq!(n, 0);
        }
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

/// A batch with one route of every kind of invalid input, and the valid ones around them.
fn bad_batch(null_len_expr: &[u8]) -> Vec<AtcRoute> {
    let mut null_expr = route(U4.as_bytes(), 4, null_len_expr);
    null_expr.expr = null();
    vec![
        route(U1.as_bytes(), 1, br#"http.path ^= "/a2""#), // 0: valid, changed
        route(b"not-a-uuid", 1, br#"http.path ^= "/x""#),  // 1: bad id
        route(U2.as_bytes(), 2, br#"http.path = "/b2""#),  // 2: bad expression (known id)
        route(U1.as_bytes(), 5, br#"http.path ^= "/x""#),  // 3: repeated id
        route(U3.as_bytes(), 3, b"http.path ^= \"\xff\""), // 4: invalid UTF-8 (unknown id)
        null_expr,                                         // 5: NULL expression, length 1
        route(b"\xfe\xff", 1, br#"http.path ^= "/x""#),    // 6: id not UTF-8
        route(
            "a8f2c1e4-0000-4000-8000-000000000005".as_bytes(),
            5,
            br#"nope == "x""#,
        ), // 7: unknown field (unknown id)
        route(
            "a8f2c1e4-0000-4000-8000-000000000006".as_bytes(),
            6,
            br#"http.path ^= "/f""#,
        ), // 8: valid, new
    ]
}

#[test]
fn sync_all_or_nothing_refuses_and_reports_every_error_by_index() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let c = atc_context_new(s, null_mut(), null_mut());
        let out = sync(
            r,
            &[
                route(U1.as_bytes(), 1, br#"http.path ^= "/a""#),
                route(U2.as_bytes(), 2, br#"http.path ^= "/b""#),
            ],
            ATC_SYNC_ALL_OR_NOTHING,
        );
        assert_eq!(out.rc, ATC_OK);

        let batch = bad_batch(b"x");
        let out = sync(r, &batch, ATC_SYNC_ALL_OR_NOTHING);
        assert_eq!(out.rc, ATC_ERR_ROUTES);
        // Counts are 0 when refused; every invalid route is reported, in index order.
        assert_eq!(counts(&out), (0, 0, 0, 0, 7));
        let got: Vec<(usize, i32)> = out.errors.iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(
            got,
            vec![
                (1, ATC_ERR_UUID),
                (2, ATC_ERR_EXPR),
                (3, ATC_ERR_DUPLICATE),
                (4, ATC_ERR_UTF8),
                (5, ATC_ERR_NULL),
                (6, ATC_ERR_UTF8),
                (7, ATC_ERR_EXPR),
            ]
        );
        let msg = |i: usize| out.errors[i].2.clone().unwrap();
        assert!(msg(0).contains("not-a-uuid"), "{}", msg(0));
        assert!(msg(1).starts_with("line 1, column 11"), "{}", msg(1));
        assert_eq!(msg(2), "duplicate id: route #1 has it already");
        assert!(msg(3).contains("UTF-8"), "{}", msg(3));
        assert!(msg(4).contains("NULL"), "{}", msg(4));
        assert!(msg(6).contains("nope"), "{}", msg(6));
        let total: usize = out.errors.iter().map(|e| msg_len(e) + 1).sum();
        assert_eq!(out.report.messages_len, total);
        assert_eq!(out.msg_used, total);
        assert!(
            out.errbuf
                .starts_with("7 invalid route(s), nothing changed; route #2: invalid route id"),
            "{}",
            out.errbuf
        );

        // Nothing changed.
        assert_eq!(route_of(r, c, "/a").as_deref(), Some(U1));
        assert_eq!(route_of(r, c, "/b").as_deref(), Some(U2));
        assert_eq!(route_of(r, c, "/f"), None);
        let mut n = 0;
        atc_router_len(r, &mut n);
        assert_eq!(n, 2);

        // Only errors the core finds: refused the same way.
        let out = sync(
            r,
            &[route(U1.as_bytes(), 1, br#"http.path ~ "(""#)],
            ATC_SYNC_ALL_OR_NOTHING,
        );
        assert_eq!(out.rc, ATC_ERR_ROUTES);
        assert_eq!(
            out.errors.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
            [(0, ATC_ERR_EXPR)]
        );
        atc_router_len(r, &mut n);
        assert_eq!(n, 2);

        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

fn msg_len(e: &(usize, i32, Option<String>)) -> usize {
    e.2.as_ref().map_or(0, String::len)
}

#[test]
fn sync_apply_valid_applies_the_rest_and_keeps_known_routes() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let c = atc_context_new(s, null_mut(), null_mut());
        let initial = [
            route(U1.as_bytes(), 1, br#"http.path ^= "/a""#),
            route(U2.as_bytes(), 2, br#"http.path ^= "/b""#),
            route(U4.as_bytes(), 4, br#"http.path ^= "/d""#),
        ];
        assert_eq!(sync(r, &initial, ATC_SYNC_ALL_OR_NOTHING).rc, ATC_OK);

        let batch = bad_batch(b"x");
        let out = sync(r, &batch, ATC_SYNC_APPLY_VALID);
        assert_eq!(out.rc, ATC_OK, "{}", out.errbuf);
        assert_eq!(out.errbuf, "", "success leaves errbuf alone");
        // U1 changed, U6 added; U2 (bad expression) and U4 (NULL expression) are known, so they
        // keep their current versions and are neither unchanged nor removed.
        assert_eq!(counts(&out), (1, 0, 1, 0, 7));
        assert_eq!(
            out.errors.iter().map(|e| e.0).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!(route_of(r, c, "/a"), None);
        assert_eq!(route_of(r, c, "/a2").as_deref(), Some(U1));
        assert_eq!(route_of(r, c, "/b").as_deref(), Some(U2));
        assert_eq!(route_of(r, c, "/d").as_deref(), Some(U4));
        assert_eq!(
            route_of(r, c, "/f").as_deref(),
            Some("a8f2c1e4-0000-4000-8000-000000000006")
        );
        let mut n = 0;
        atc_router_len(r, &mut n);
        assert_eq!(n, 4);

        // The same batch again: the applied routes are now unchanged, the kept ones still kept.
        let out = sync(r, &batch, ATC_SYNC_APPLY_VALID);
        assert_eq!(counts(&out), (0, 0, 0, 2, 7));
        atc_router_len(r, &mut n);
        assert_eq!(n, 4);

        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn sync_output_buffers_hold_what_fits() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        // Three invalid routes whose messages quote lines of 3-byte characters.
        let ids = [U1, U2, U3];
        let exprs: Vec<String> = (0..3)
            .map(|i| format!("http.path == \"{}\" &&", "€".repeat(5 + i)))
            .collect();
        let batch: Vec<AtcRoute> = ids
            .iter()
            .zip(&exprs)
            .map(|(id, e)| route(id.as_bytes(), 1, e.as_bytes()))
            .collect();
        let full = sync(r, &batch, ATC_SYNC_ALL_OR_NOTHING);
        assert_eq!(full.report.errors, 3);
        let whole: Vec<String> = full.errors.iter().map(|e| e.2.clone().unwrap()).collect();
        assert!(whole.iter().all(|m| m.contains('€')));
        assert_eq!(
            full.report.messages_len,
            whole.iter().map(|m| m.len() + 1).sum::<usize>()
        );

        // Fewer error slots than errors: the first ones, and the total in the report.
        let out = sync_with(r, &batch, ATC_SYNC_ALL_OR_NOTHING, 2, 4096);
        assert_eq!(out.rc, ATC_ERR_ROUTES);
        assert_eq!(out.errors.len(), 2);
        assert_eq!(out.report.errors, 3);
        assert_eq!(out.report.messages_len, full.report.messages_len);
        let out = sync_with(r, &batch, ATC_SYNC_ALL_OR_NOTHING, 0, 4096);
        assert!(out.errors.is_empty());
        assert_eq!(out.msg_used, 0);

        // Every message buffer size: messages are prefixes on character boundaries, written in
        // order, the space used never exceeds the capacity, and later ones get NULL.
        for cap in 0..full.report.messages_len + 4 {
            let out = sync_with(r, &batch, ATC_SYNC_ALL_OR_NOTHING, 8, cap);
            assert_eq!(out.errors.len(), 3);
            assert!(out.msg_used <= cap, "cap {cap}");
            let mut used = 0;
            for (k, e) in out.errors.iter().enumerate() {
                match &e.2 {
                    Some(m) => {
                        assert!(whole[k].starts_with(m.as_str()), "cap {cap}");
                        used += m.len() + 1;
                    }
                    None => assert!(used >= cap, "cap {cap}: NULL while room was left"),
                }
            }
            assert_eq!(used, out.msg_used, "cap {cap}");
            if cap >= full.report.messages_len {
                let got: Vec<String> = out.errors.iter().map(|e| e.2.clone().unwrap()).collect();
                assert_eq!(got, whole, "cap {cap}");
            }
        }

        // Every output may be NULL.
        let list = route_list(&batch);
        let rc = atc_router_sync(
            r,
            list,
            ATC_SYNC_ALL_OR_NOTHING,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_ERR_ROUTES);
        let mut zero = 0usize;
        let rc = atc_router_sync(
            r,
            list,
            ATC_SYNC_ALL_OR_NOTHING,
            null_mut(),
            null_mut(),
            &mut zero,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        );
        assert_eq!((rc, zero), (ATC_ERR_ROUTES, 0));
        atc_route_list_free(list);
        let good = [route(U1.as_bytes(), 1, br#"http.path ^= "/a""#)];
        let list = route_list(&good);
        let rc = atc_router_sync(
            r,
            list,
            ATC_SYNC_ALL_OR_NOTHING,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, ATC_OK);
        atc_route_list_free(list);
        let mut n = 0;
        atc_router_len(r, &mut n);
        assert_eq!(n, 1);
        atc_router_free(r);
        atc_schema_free(s);
    }
}

#[test]
fn sync_call_errors_change_nothing() {
    unsafe {
        let s = http_schema();
        let r = atc_router_new(s, null_mut(), null_mut());
        let good = [route(U1.as_bytes(), 1, br#"http.path ^= "/a""#)];
        assert_eq!(sync(r, &good, ATC_SYNC_ALL_OR_NOTHING).rc, ATC_OK);
        let other = [route(U2.as_bytes(), 1, br#"http.path ^= "/b""#)];

        let mut report = AtcSyncReport {
            added: 42,
            ..AtcSyncReport::default()
        };
        let mut e = ErrBuf::new(256);
        let other = route_list(&other);
        let call = |r: *mut AtcRouter,
                    list: *const AtcRouteList,
                    mode: i32,
                    errors: *mut AtcSyncError,
                    errors_len: *mut usize,
                    report: &mut AtcSyncReport,
                    e: &mut ErrBuf| {
            atc_router_sync(
                r,
                list,
                mode,
                report,
                errors,
                errors_len,
                null_mut(),
                null_mut(),
                e.ptr(),
                e.len(),
            )
        };
        let mut cap = 4usize;
        let cases: [(&str, i32, i32); 4] = [
            ("router", ATC_ERR_NULL, 0),
            ("list", ATC_ERR_NULL, 1),
            ("mode", ATC_ERR_INVALID, 2),
            ("errors", ATC_ERR_NULL, 3),
        ];
        for (what, code, case) in cases {
            let rc = match case {
                0 => call(
                    null_mut(),
                    other,
                    0,
                    null_mut(),
                    null_mut(),
                    &mut report,
                    &mut e,
                ),
                1 => call(r, null(), 0, null_mut(), null_mut(), &mut report, &mut e),
                2 => call(r, other, 7, null_mut(), null_mut(), &mut report, &mut e),
                _ => call(r, other, 0, null_mut(), &mut cap, &mut report, &mut e),
            };
            assert_eq!(rc, code, "{what}");
            assert!(e.text().contains(what), "{what}: {}", e.text());
            assert_eq!(report.added, 42, "{what}: the report is untouched");
        }
        assert_eq!(cap, 4);
        atc_route_list_free(other);
        // Still the first table.
        let mut n = 0;
        atc_router_len(r, &mut n);
        assert_eq!(n, 1);
        let c = atc_context_new(s, null_mut(), null_mut());
        assert_eq!(route_of(r, c, "/a").as_deref(), Some(U1));
        atc_context_free(c);
        atc_router_free(r);
        atc_schema_free(s);
    }
}
