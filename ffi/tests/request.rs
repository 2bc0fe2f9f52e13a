//! Kong's request fields through the C ABI: the field lists (`atc_kong_field`), path fields by
//! name (`atc_path_field_parse`), a request URI made into the path and the segments Kong derives
//! from it (`atc_context_add_path`), the Host header's host and port (`atc_http_host`), and the
//! values a context holds (`atc_context_value`).

use std::ffi::c_char;
use std::ptr::{null, null_mut};

use atc_router_ffi::*;

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

fn err(buf: &[c_char], len: usize) -> String {
    let bytes: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
    String::from_utf8(bytes).unwrap()
}

/// Kong's fields of `subsystem`, as the library lists them.
fn kong_fields(subsystem: i32) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for i in 0.. {
        let (mut name, mut len, mut ty) = (null(), 0, -1);
        let rc = unsafe { atc_kong_field(subsystem, i, &mut name, &mut len, &mut ty) };
        if rc == 0 {
            break;
        }
        assert_eq!(rc, 1);
        let bytes = unsafe { std::slice::from_raw_parts(name.cast::<u8>(), len) };
        out.push((String::from_utf8(bytes.to_vec()).unwrap(), ty));
    }
    out
}

#[test]
fn kong_field_lists_are_the_cores() {
    let http = kong_fields(ATC_SUBSYSTEM_HTTP);
    assert_eq!(http.len(), atc_router::request::HTTP_FIELDS.len());
    assert!(http.contains(&("http.path.segments.len".to_owned(), ATC_TYPE_INT)));
    assert!(http.contains(&("http.headers.*".to_owned(), ATC_TYPE_STRING)));
    assert!(http.contains(&("net.dst.ip".to_owned(), ATC_TYPE_IPADDR)));
    let stream = kong_fields(ATC_SUBSYSTEM_STREAM);
    assert_eq!(stream.len(), 6);
    assert!(!stream.iter().any(|(n, _)| n.starts_with("http.")));
    let (mut name, mut len) = (null(), 0);
    unsafe {
        assert_eq!(
            atc_kong_field(7, 0, &mut name, &mut len, null_mut()),
            ATC_ERR_INVALID
        );
        assert_eq!(
            atc_kong_field(ATC_SUBSYSTEM_HTTP, 0, null_mut(), &mut len, null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_kong_field(ATC_SUBSYSTEM_HTTP, 1 << 40, &mut name, &mut len, null_mut()),
            0
        );
    }
}

fn parse(name: &str) -> Option<AtcPathField> {
    let mut f = AtcPathField::default();
    match unsafe { atc_path_field_parse(p(name), name.len(), &mut f) } {
        1 => Some(f),
        0 => None,
        rc => panic!("{name}: {rc}"),
    }
}

#[test]
fn path_fields_by_name() {
    let kind = |name: &str| parse(name).map(|f| (f.kind, f.from, f.to));
    assert_eq!(kind("http.path"), Some((ATC_PATH_FIELD_PATH, 0, 0)));
    assert_eq!(
        kind("http.path.segments.len"),
        Some((ATC_PATH_FIELD_LEN, 0, 0))
    );
    assert_eq!(
        kind("http.path.segments.3"),
        Some((ATC_PATH_FIELD_SEGMENT, 3, 0))
    );
    assert_eq!(
        kind("http.path.segments.1_4"),
        Some((ATC_PATH_FIELD_RANGE, 1, 4))
    );
    assert_eq!(
        kind("http.path.segments.99999999999"),
        Some((ATC_PATH_FIELD_SEGMENT, u32::MAX, 0))
    );
    assert_eq!(kind("http.host"), None);
    assert_eq!(kind("http.path.segments.x"), None);
    let mut f = AtcPathField::default();
    unsafe {
        assert_eq!(atc_path_field_parse(null(), 3, &mut f), ATC_ERR_NULL);
        assert_eq!(atc_path_field_parse(p("\u{ff}"), 1, &mut f), ATC_ERR_UTF8);
        assert_eq!(
            atc_path_field_parse(p("http.path"), 9, null_mut()),
            ATC_ERR_NULL
        );
    }
}

#[test]
fn the_host_header_without_its_port() {
    let host = |v: &str| {
        let (mut len, mut port) = (0, -1);
        let rc = unsafe { atc_http_host(p(v), v.len(), &mut len, &mut port) };
        (rc, v[..len].to_owned(), port)
    };
    assert_eq!(
        host("Api.Example.com:8443"),
        (1, "Api.Example.com".into(), 8443)
    );
    assert_eq!(host("api.example.com"), (0, "api.example.com".into(), -1));
    assert_eq!(host("[::1]:80"), (0, "[::1]:80".into(), -1));
    let mut len = 0;
    unsafe {
        assert_eq!(atc_http_host(p("a:1"), 3, &mut len, null_mut()), 1);
        assert_eq!(len, 1);
        assert_eq!(
            atc_http_host(p("a"), 1, null_mut(), null_mut()),
            ATC_ERR_NULL
        );
        assert_eq!(
            atc_http_host(p("\u{ff}"), 1, &mut len, null_mut()),
            ATC_ERR_UTF8
        );
    }
}

/// A schema of Kong's HTTP fields, a router with `routes`, and a context.
struct Fixture {
    schema: *mut AtcSchema,
    router: *mut AtcRouter,
    ctx: *mut AtcContext,
}

impl Fixture {
    fn new(routes: &[&str]) -> Fixture {
        unsafe {
            let schema = atc_schema_new();
            for (name, ty) in kong_fields(ATC_SUBSYSTEM_HTTP) {
                let rc =
                    atc_schema_add_field(schema, p(&name), name.len(), ty, null_mut(), null_mut());
                assert_eq!(rc, ATC_OK, "{name}");
            }
            let router = atc_router_new(schema, null_mut(), null_mut());
            for (i, e) in routes.iter().enumerate() {
                let id = format!("a8f2c1e4-0000-4000-8000-{:012}", i + 1);
                let rc = atc_router_add(
                    router,
                    (100 - i) as u64,
                    p(&id),
                    id.len(),
                    p(e),
                    e.len(),
                    null_mut(),
                    null_mut(),
                );
                assert_eq!(rc, ATC_OK, "{e}");
            }
            let ctx = atc_context_new(schema, null_mut(), null_mut());
            Fixture {
                schema,
                router,
                ctx,
            }
        }
    }

    fn field(&self, name: &str) -> AtcPathField {
        let mut f = parse(name).expect("a path field");
        let mut ty = 0;
        let rc = unsafe {
            atc_context_field_id(
                self.ctx,
                p(name),
                name.len(),
                &mut f.field,
                &mut ty,
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(rc, ATC_OK);
        f
    }

    /// Adds `uri` as a request URI for `fields`: the status and the error text.
    fn add(&self, uri: &[u8], flags: u32, fields: &[AtcPathField]) -> (i32, String) {
        let mut buf = vec![0 as c_char; 512];
        let mut len = buf.len();
        let rc = unsafe {
            atc_context_reset(self.ctx);
            atc_context_add_path(
                self.ctx,
                uri.as_ptr().cast(),
                uri.len(),
                flags,
                fields.as_ptr(),
                fields.len(),
                buf.as_mut_ptr(),
                &mut len,
            )
        };
        (
            rc,
            if rc == ATC_OK {
                String::new()
            } else {
                err(&buf, len)
            },
        )
    }

    /// The values the context holds for `name`, as text.
    fn values(&self, name: &str) -> Vec<String> {
        let f = self.field(name);
        let mut out = Vec::new();
        for i in 0.. {
            let mut v = std::mem::MaybeUninit::<AtcMatched>::uninit();
            match unsafe { atc_context_value(self.ctx, f.field, i, v.as_mut_ptr()) } {
                0 => break,
                1 => {
                    let v = unsafe { v.assume_init() };
                    let bytes = unsafe { std::slice::from_raw_parts(v.ptr.cast::<u8>(), v.len) };
                    out.push(String::from_utf8(bytes.to_vec()).unwrap());
                }
                rc => panic!("{rc}"),
            }
        }
        out
    }

    /// The number (1-based, in the order given) of the route the context matches, if any.
    fn matched(&self) -> Option<usize> {
        let mut uuid = vec![0 as c_char; ATC_UUID_LEN];
        let mut len = uuid.len();
        unsafe {
            assert!(atc_router_execute(self.router, self.ctx) >= 0);
            match atc_context_result(
                self.ctx,
                null(),
                uuid.as_mut_ptr(),
                &mut len,
                null_mut(),
                null_mut(),
            ) {
                1 => Some(err(&uuid, len)[24..].parse().unwrap()),
                _ => None,
            }
        }
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

#[test]
fn a_request_uri_becomes_the_path_and_the_segments_kong_routes_on() {
    let f = Fixture::new(&[
        r#"http.path == "/a%2Fb/c" && http.path.segments.len == 2"#,
        r#"http.path.segments.0_1 == "x/y" && http.path.segments.2 == "z""#,
    ]);
    let all: Vec<AtcPathField> = [
        "http.path",
        "http.path.segments.len",
        "http.path.segments.0_1",
        "http.path.segments.2",
    ]
    .iter()
    .map(|n| f.field(n))
    .collect();
    assert_eq!(
        f.add(b"/a%2fb/./c/?q=1", ATC_PATH_NORMALIZE, &all),
        (ATC_OK, String::new())
    );
    assert_eq!(f.values("http.path"), ["/a%2Fb/c/"]);
    assert_eq!(f.values("http.path.segments.len"), ["2"]);
    assert_eq!(f.values("http.path.segments.2"), Vec::<String>::new());
    assert_eq!(f.matched(), None, "the path keeps its trailing slash");
    f.add(b"/a%2fb/./c", ATC_PATH_NORMALIZE, &all);
    assert_eq!(f.matched(), Some(1));
    f.add(b"//x/%79/../y/z", ATC_PATH_NORMALIZE, &all);
    assert_eq!(f.values("http.path.segments.0_1"), ["x/y"]);
    assert_eq!(f.matched(), Some(2));
    // Without ATC_PATH_NORMALIZE the text is the path as it is.
    f.add(b"//x/y/z", 0, &all);
    assert_eq!(f.values("http.path"), ["//x/y/z"]);
    assert_eq!(f.values("http.path.segments.0_1"), ["/x"]);
    // Only the fields given get values.
    f.add(b"/x/y/z", ATC_PATH_NORMALIZE, &all[3..]);
    assert_eq!(f.values("http.path"), Vec::<String>::new());
    assert_eq!(f.values("http.path.segments.2"), ["z"]);
}

#[test]
fn bad_paths_and_fields_are_errors() {
    let f = Fixture::new(&[r#"http.path.segments.len == 1 && http.path.segments.0 == "a""#]);
    let len = f.field("http.path.segments.len");
    let seg = f.field("http.path.segments.0");
    let (rc, msg) = f.add(b"/%FF", ATC_PATH_NORMALIZE, &[seg]);
    assert_eq!(rc, ATC_ERR_UTF8);
    assert!(msg.contains("not valid UTF-8"), "{msg}");
    let (rc, msg) = f.add(b"/a", 4, &[seg]);
    assert_eq!(rc, ATC_ERR_INVALID);
    assert!(msg.contains("unknown flags"), "{msg}");
    let bad_kind = AtcPathField { kind: 9, ..seg };
    assert_eq!(f.add(b"/a", 0, &[bad_kind]).0, ATC_ERR_INVALID);
    // A segment's text into the Int field, and a count into a String one.
    assert_eq!(
        f.add(
            b"/a",
            0,
            &[AtcPathField {
                field: len.field,
                ..seg
            }]
        )
        .0,
        ATC_ERR_TYPE
    );
    assert_eq!(
        f.add(
            b"/a",
            0,
            &[AtcPathField {
                field: seg.field,
                ..len
            }]
        )
        .0,
        ATC_ERR_TYPE
    );
    let unknown = AtcPathField { field: 9999, ..seg };
    assert_eq!(f.add(b"/a", 0, &[unknown]).0, ATC_ERR_UNKNOWN_FIELD);
    unsafe {
        let rc = atc_context_add_path(f.ctx, p("/a"), 2, 0, null(), 1, null_mut(), null_mut());
        assert_eq!(rc, ATC_ERR_NULL);
        let rc = atc_context_add_path(null_mut(), p("/a"), 2, 0, null(), 0, null_mut(), null_mut());
        assert_eq!(rc, ATC_ERR_NULL);
    }
    // Nothing is left half-read that a good request would see.
    f.add(b"/a", ATC_PATH_NORMALIZE, &[len, seg]);
    assert_eq!(f.matched(), Some(1));
}
