//! The C ABI driven by arbitrary call sequences: every `atc_*` function, with NULL handles and
//! pointers, lengths that are zero, short (cutting a UTF-8 character), or claimed for a NULL
//! pointer (any value, beyond `isize::MAX` included), invalid UTF-8, output buffers of every
//! capacity (too small, zero, NULL), unknown field ids and type codes.
//!
//! Properties: no call crashes or panics (libfuzzer-sys's panic hook aborts even on panics that
//! `catch_unwind` would turn into `ATC_ERR_PANIC`); under AddressSanitizer no call reads or
//! writes outside the buffers it was given; status codes are documented ones; error messages
//! respect the buffer contract (cut on a character boundary, NUL-terminated, untouched on
//! success); results read back as valid UTF-8. Everything is freed at the end, so LeakSanitizer
//! reports any leak.
//!
//! The harness itself keeps the C contract: it passes only live handles (or NULL), and a
//! non-NULL pointer always comes with a length no larger than its buffer.
#![no_main]

use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

use arbitrary::Arbitrary;
use atc_router_ffi::image::*;
use atc_router_ffi::publish::*;
use atc_router_ffi::*;
use libfuzzer_sys::fuzz_target;

const MAX_HANDLES: usize = 6;
const MAX_OPS: usize = 96;

const NAMES: &[&str] = &[
    "http.host",
    "http.path",
    "http.headers.*",
    "net.dst.port",
    "net.src.ip",
    "net.src.cidr",
    "http.headers.x",
    "http.headers.y",
    "1bad",
    "",
    "é.x",
    "a.*.*",
    "http.headers.*.*",
];
const TYPES: &[i32] = &[
    ATC_TYPE_STRING,
    ATC_TYPE_STRING,
    ATC_TYPE_STRING,
    ATC_TYPE_INT,
    ATC_TYPE_IPADDR,
    ATC_TYPE_IPCIDR,
];
const EXPRS: &[&str] = &[
    r#"http.host == "a.com""#,
    r#"http.path ^= "/api" && net.dst.port == 443"#,
    r##"http.path ~ r#"^/u/(?<id>\d+)$"# || http.path =^ "/x""##,
    r#"any(http.headers.x) == "1" && lower(http.host) =^ ".com""#,
    "net.src.ip in 10.0.0.0/8 && net.src.ip not in 10.1.0.0/16",
    "net.src.cidr == 10.0.0.0/8",
    r#"!(http.path contains "é")"#,
    "net.dst.port >= 0x10 && net.dst.port < 010",
    r#"http.path ~ "(a)(?<b>b)?(c)|\\d""#,
    r#"http.host = "a""#,
    "nope == 1",
    r#"http.path ~ "(""#,
    r#"lower(http.host) == "A""#,
    "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((http.host == \"a\"))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))",
];
const UUIDS: &[&str] = &[
    "a8f2c1e4-0000-4000-8000-000000000001",
    "a8f2c1e4-0000-4000-8000-000000000002",
    "A8F2C1E4000040008000000000000003",
    "{a8f2c1e4-0000-4000-8000-000000000004}",
    "urn:uuid:a8f2c1e4-0000-4000-8000-000000000005",
    "not-a-uuid",
    "",
];
const VALUES: &[&str] = &[
    "a.com",
    "A.COM",
    "/api/x",
    "/u/42",
    "abc",
    "é",
    "10.0.0.1",
    "10.1.2.3",
    "2001:db8::1",
    "10.0.0.0/8",
    "::/0",
    "10.0.0.1/8",
    "x",
];

/// A string argument.
#[derive(Arbitrary, Debug)]
enum Str {
    /// A pool entry, optionally cut after `cut` bytes (which may split a character).
    Pool(u8, Option<u8>),
    Bytes(Vec<u8>),
    /// NULL with this length (any length: the library must not read).
    Null(usize),
    /// A dangling non-NULL pointer with length 0.
    Dangling,
}

/// A string argument made concrete: owns the bytes its pointer points into.
struct Arg {
    bytes: Vec<u8>,
    null: Option<usize>,
    dangling: bool,
}

impl Arg {
    fn new(s: &Str, pool: &[&str]) -> Arg {
        let (bytes, null, dangling) = match s {
            Str::Pool(i, cut) => {
                let mut b = pool[*i as usize % pool.len()].as_bytes().to_vec();
                if let Some(c) = cut {
                    b.truncate(*c as usize);
                }
                (b, None, false)
            }
            Str::Bytes(b) => (b.clone(), None, false),
            Str::Null(len) => (Vec::new(), Some(*len), false),
            Str::Dangling => (Vec::new(), None, true),
        };
        Arg {
            bytes,
            null,
            dangling,
        }
    }
    fn ptr(&self) -> *const c_char {
        if self.null.is_some() {
            null()
        } else if self.dangling || self.bytes.is_empty() {
            std::ptr::NonNull::<c_char>::dangling().as_ptr()
        } else {
            self.bytes.as_ptr().cast()
        }
    }
    fn len(&self) -> usize {
        self.null.unwrap_or(self.bytes.len())
    }
}

/// An `(errbuf, errbuf_len)` pair.
#[derive(Arbitrary, Debug)]
enum ErrSpec {
    None,
    Cap(u8),
    /// NULL buffer with a capacity (must not be written).
    NullBuf(usize),
    /// A buffer but a NULL length pointer.
    NullLen,
}

/// An error buffer: exactly `cap` bytes so AddressSanitizer sees any write past it, filled
/// with a sentinel so that "untouched on success" can be checked.
struct Err {
    buf: Vec<c_char>,
    len: usize,
    spec_len: usize,
    null_buf: bool,
    null_len: bool,
}

const SENTINEL: c_char = 0x5a;

impl Err {
    fn new(spec: &ErrSpec) -> Err {
        let (cap, len, null_buf, null_len) = match spec {
            ErrSpec::None => (0, 0, true, true),
            ErrSpec::Cap(c) => (*c as usize, *c as usize, false, false),
            ErrSpec::NullBuf(l) => (0, *l, true, false),
            ErrSpec::NullLen => (16, 0, false, true),
        };
        Err {
            buf: vec![SENTINEL; cap],
            len,
            spec_len: len,
            null_buf,
            null_len,
        }
    }
    fn buf(&mut self) -> *mut c_char {
        if self.null_buf {
            null_mut()
        } else if self.buf.is_empty() {
            std::ptr::NonNull::<c_char>::dangling().as_ptr()
        } else {
            self.buf.as_mut_ptr()
        }
    }
    fn len(&mut self) -> *mut usize {
        if self.null_len {
            null_mut()
        } else {
            &mut self.len
        }
    }
    /// Checks the error-buffer contract after a call that returned `rc`.
    fn check(&self, rc: i32) {
        check_status(rc);
        let untouched = self.buf.iter().all(|&b| b == SENTINEL) && self.len == self.spec_len;
        if rc >= 0 || self.null_buf || self.null_len {
            assert!(untouched, "error buffer written (rc {rc})");
            return;
        }
        let cap = self.buf.len();
        if cap == 0 {
            assert!(untouched, "zero-capacity error buffer written");
            return;
        }
        assert!(
            self.len < cap,
            "message length {} for capacity {cap}",
            self.len
        );
        assert_eq!(self.buf[self.len], 0, "message not NUL-terminated");
        let bytes: Vec<u8> = self.buf[..self.len].iter().map(|&b| b as u8).collect();
        std::str::from_utf8(&bytes).expect("message cut inside a character");
    }
}

/// Non-negative codes are answers (`ATC_OK`, 1 for a match); negative ones must be documented.
fn check_status(rc: i32) {
    assert_ne!(rc, ATC_ERR_PANIC, "a call panicked");
    if rc >= 0 {
        return;
    }
    // Documented means `atc_strerror` knows it (codes are added over time: do not assume a
    // range).
    let s = unsafe { CStr::from_ptr(atc_strerror(rc)) };
    assert_ne!(
        s.to_str().unwrap(),
        "unknown status code",
        "undocumented status {rc}"
    );
}

/// An output buffer `(ptr, *len)`.
#[derive(Arbitrary, Debug)]
enum OutSpec {
    Cap(u16),
    /// NULL buffer claiming a capacity.
    Null(usize),
    /// NULL length pointer.
    NullLen,
}

/// An `ATC_LIMIT_*` code, or any number.
#[derive(Arbitrary, Debug)]
enum LimitCode {
    Known(u8),
    Raw(i32),
}

const LIMITS: &[i32] = &[
    ATC_LIMIT_MAX_EXPRESSION_LEN,
    ATC_LIMIT_MAX_DEPTH,
    ATC_LIMIT_MAX_PREDICATES,
    ATC_LIMIT_MAX_REGEXES,
    ATC_LIMIT_REGEX_SIZE,
    ATC_LIMIT_REGEX_TOTAL_SIZE,
    ATC_LIMIT_MAX_VALUES_PER_FIELD,
    ATC_LIMIT_MAX_WILDCARD_FIELDS,
];

impl LimitCode {
    fn code(&self) -> i32 {
        match self {
            LimitCode::Known(i) => LIMITS[*i as usize % LIMITS.len()],
            LimitCode::Raw(c) => *c,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum TypeCode {
    Known(u8),
    Raw(i32),
}

impl TypeCode {
    fn code(&self) -> i32 {
        match self {
            TypeCode::Known(i) => TYPES[*i as usize % TYPES.len()],
            TypeCode::Raw(c) => *c,
        }
    }

    /// The same choice read as an `atc_router_sync` mode.
    fn sync_mode(&self) -> i32 {
        match self {
            TypeCode::Known(i) if i % 2 == 0 => ATC_SYNC_ALL_OR_NOTHING,
            TypeCode::Known(_) => ATC_SYNC_APPLY_VALID,
            TypeCode::Raw(c) => *c,
        }
    }
}

/// A field id: one resolved earlier, or any number.
#[derive(Arbitrary, Debug)]
enum FieldRef {
    Resolved(u8),
    Raw(u32),
}

#[derive(Arbitrary, Debug)]
struct ValueSpec {
    field: FieldRef,
    ty: TypeCode,
    int: i64,
    text: Str,
}

/// One route of an `atc_router_sync` list.
#[derive(Arbitrary, Debug)]
struct SyncRoute {
    id: Str,
    priority: u64,
    expr: Str,
    /// The route's position (0: its place in the list).
    position: u8,
}

/// The outputs of `atc_router_sync`.
#[derive(Arbitrary, Debug)]
struct SyncOut {
    /// A NULL list.
    null_routes: bool,
    null_report: bool,
    errors: OutSpec,
    msgbuf: OutSpec,
}

/// The text of a background sync: a TSV or JSON list built from the pools, or any bytes.
#[derive(Arbitrary, Debug)]
enum ListText {
    Tsv(Vec<(u8, u8, u8)>),
    Json(Vec<(u8, u8, u8)>),
    Bytes(Vec<u8>),
}

impl ListText {
    fn bytes(&self) -> Vec<u8> {
        let pick = |(p, i, e): &(u8, u8, u8)| {
            (
                *p,
                UUIDS[*i as usize % UUIDS.len()],
                EXPRS[*e as usize % EXPRS.len()],
            )
        };
        match self {
            ListText::Tsv(rows) => rows
                .iter()
                .map(|r| {
                    let (p, id, e) = pick(r);
                    format!("{p}\t{id}\t{e}\n")
                })
                .collect::<String>()
                .into_bytes(),
            ListText::Json(rows) => {
                let items: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        let (p, id, e) = pick(r);
                        let e = e.replace('\\', "\\\\").replace('"', "\\\"");
                        format!(r#"{{"id": "{id}", "priority": {p}, "expression": "{e}"}}"#)
                    })
                    .collect();
                format!("[{}]", items.join(",")).into_bytes()
            }
            ListText::Bytes(b) => b.clone(),
        }
    }
}

/// A handle by index into the live ones; `None` (or no live handle) is NULL.
type H = Option<u8>;

#[derive(Arbitrary, Debug)]
enum Op {
    SchemaNew,
    SchemaFree(u8),
    SchemaAddField(H, Str, TypeCode, ErrSpec),
    SchemaFieldType(H, Str, bool),
    /// Schema, limit, value (small values too: tight limits make routes and values fail).
    SchemaSetLimit(H, LimitCode, u64, ErrSpec),
    /// Schema, limit, NULL output.
    SchemaGetLimit(H, LimitCode, bool),
    RouterNew(H, ErrSpec),
    RouterFree(u8),
    RouterAdd(H, u64, Str, Str, ErrSpec),
    RouterRemove(H, Str, ErrSpec),
    RouterExecute(H, H),
    RouterFields(H, OutSpec, bool),
    RouterValidate(H, Str, OutSpec, bool, ErrSpec),
    RouterLen(H, bool),
    ContextNew(H, ErrSpec),
    ContextFree(u8),
    ContextReset(H),
    ContextFieldId(H, Str, bool, bool, ErrSpec),
    AddStr(H, FieldRef, Str, ErrSpec),
    AddInt(H, FieldRef, i64, ErrSpec),
    AddIp(H, FieldRef, Str, ErrSpec),
    AddValues(H, Vec<ValueSpec>, bool, bool, ErrSpec),
    /// Router, list, mode, outputs: a whole list.
    RouterSync(H, H, TypeCode, SyncOut, ErrSpec),
    /// Router, list, mode, outputs: a list of changes.
    RouterUpdate(H, H, TypeCode, SyncOut, ErrSpec),
    Result(H, Option<FieldRef>, OutSpec, bool, bool),
    Captures(H, OutSpec),
    Strerror(i32),
    Explain(H, H, u32, OutSpec, ErrSpec),
    Matches(H, H, OutSpec, ErrSpec),
    RouteExpression(H, Str, bool),
    KeyFields(H, bool),
    NeededFields(H, H, bool),
    ListNew,
    ListFree(u8),
    ListAdd(H, Vec<SyncRoute>, bool, ErrSpec),
    /// As ListAdd, the routes lent (`atc_route_list_lend`).
    ListLend(H, Vec<SyncRoute>, bool, ErrSpec),
    /// A list, the ids to take out, NULL routes.
    ListRemove(H, Vec<SyncRoute>, bool, ErrSpec),
    /// A list, a position, an id (or NULL), why (or NULL with a length).
    ListAddUnreadable(H, u8, Option<Str>, Option<Str>, u8, ErrSpec),
    ListClear(H),
    /// Router, version, list, mode, error buffer: a list of changes.
    UpdateStart(H, u64, H, TypeCode, ErrSpec),
    /// Router, version, list, mode, error buffer.
    SyncStart(H, u64, H, TypeCode, ErrSpec),
    /// Router, version, the list's text, flags (0 copy, 1 borrow, else raw), mode.
    SyncStartText(H, u64, ListText, i32, TypeCode, ErrSpec),
    SyncState(H, bool),
    SyncReady(H),
    SettleDue(H),
    KeepShadow(H, i32),
    /// Router, NULL version pointer, the outputs.
    SyncApply(H, bool, SyncOut, ErrSpec),
    /// Waits (up to a bound) for the router's outcome, so that sequences reach apply.
    SyncWait(H),
    KongField(i32, u8, bool, bool),
    PathFieldParse(Str, bool),
    /// A context, a request URI, flags, path fields (id, kind, from, to), NULL fields.
    AddPath(H, Str, u32, Vec<(FieldRef, i32, u32, u32)>, bool, ErrSpec),
    HttpHost(Str, bool, bool),
    ContextValue(H, FieldRef, u8, bool),
    BuilderPriority(i32),
    /// Policy, boost after (ms, kept small).
    BuilderSchedule(i32, u16),
    /// Router, the `size` the caller declares (0 to 128 bytes of a 128-byte buffer), NULL out.
    RouterStats(H, u8, bool),
    CountBadRequest(H),
    Settle(H),
    BuilderThreads(i32),
    /// Router, sealed in memory (else a file in the harness's directory), flags.
    PublishImages(H, bool, i32, ErrSpec),
    /// Router, NULL version pointer, the path's buffer.
    Published(H, bool, OutSpec),
    /// Schema, the path, on a thread (else on the calling one).
    ImageOpen(H, PathRef, bool, ErrSpec),
    ImageOpenReady(H),
    ImageOpenFinish(u8, ErrSpec),
    ImageFree(u8),
    /// An image, and the image file to remove once it is freed (a known path, or none).
    ImageRetire(u8, Option<u8>),
    ImageSharePath(H, OutSpec),
    /// Router, the image to attach (none: detach), NULL `previous` pointer.
    Attach(H, Option<u8>, bool),
    /// A known path.
    RemoveIfUnused(u8, ErrSpec),
    /// The harness's directory (else a NULL one), the file to keep (a known path's name).
    Sweep(bool, Option<u8>, ErrSpec),
}

/// A path to open an image by: one a call gave (published, shared, written), or any text.
#[derive(Arbitrary, Debug)]
enum PathRef {
    Known(u8),
    Raw(Str),
}

#[derive(Default)]
struct State {
    schemas: Vec<*mut AtcSchema>,
    routers: Vec<*mut AtcRouter>,
    contexts: Vec<*mut AtcContext>,
    lists: Vec<*mut AtcRouteList>,
    field_ids: Vec<u32>,
    /// Texts lent to builders (`ATC_TEXT_BORROW`): kept until every router is freed.
    lent: Vec<Vec<u8>>,
    /// The bytes of routes lent to lists (`atc_route_list_lend`): kept until every router and
    /// list is freed.
    lent_routes: Vec<Vec<Arg>>,
    images: Vec<*mut AtcImage>,
    openings: Vec<*mut AtcImageOpening>,
    /// Paths calls gave (published images, shared images): what opens, removes and sweeps
    /// take, so that no call is ever asked to remove a file outside the harness's directory.
    paths: Vec<String>,
}

/// The directory published image files go to: this process's own, emptied after each input.
fn image_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("atc-fuzz-c-abi-{}", std::process::id()))
}

/// The text a call writes into a buffer of 4 KiB (`f(buf, len)`), when it returns `ATC_OK`.
unsafe fn text_of(f: impl FnOnce(*mut c_char, *mut usize) -> i32) -> Option<String> {
    let mut buf = vec![0 as c_char; 4096];
    let mut len = buf.len();
    let rc = f(buf.as_mut_ptr(), &mut len);
    check_status(rc);
    if rc != ATC_OK {
        return None;
    }
    let bytes: Vec<u8> = buf[..len].iter().map(|&b| b as u8).collect();
    Some(String::from_utf8(bytes).expect("paths are UTF-8"))
}

fn get<T>(v: &[*mut T], h: &H) -> *mut T {
    match h {
        Some(i) if !v.is_empty() => v[*i as usize % v.len()],
        _ => null_mut(),
    }
}

fn take<T>(v: &mut Vec<*mut T>, i: u8) -> Option<*mut T> {
    if v.is_empty() {
        None
    } else {
        let n = v.len();
        Some(v.swap_remove(i as usize % n))
    }
}

impl State {
    fn field(&self, f: &FieldRef) -> u32 {
        match f {
            FieldRef::Resolved(i) if !self.field_ids.is_empty() => {
                self.field_ids[*i as usize % self.field_ids.len()]
            }
            FieldRef::Resolved(i) => u32::from(*i),
            FieldRef::Raw(id) => *id,
        }
    }

    unsafe fn run(&mut self, op: &Op) {
        match op {
            Op::SchemaNew => {
                if self.schemas.len() < MAX_HANDLES {
                    let s = atc_schema_new();
                    assert!(!s.is_null());
                    self.schemas.push(s);
                }
            }
            Op::SchemaFree(i) => {
                if let Some(s) = take(&mut self.schemas, *i) {
                    atc_schema_free(s);
                }
            }
            Op::SchemaAddField(h, name, ty, e) => {
                let name = Arg::new(name, NAMES);
                let mut e = Err::new(e);
                let rc = atc_schema_add_field(
                    get(&self.schemas, h),
                    name.ptr(),
                    name.len(),
                    ty.code(),
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::SchemaFieldType(h, name, null_out) => {
                let name = Arg::new(name, NAMES);
                let mut ty = -100;
                let out = if *null_out { null_mut() } else { &mut ty };
                let rc = atc_schema_field_type(get(&self.schemas, h), name.ptr(), name.len(), out);
                check_status(rc);
                if rc == ATC_OK {
                    assert!((ATC_TYPE_STRING..=ATC_TYPE_IPCIDR).contains(&ty));
                }
            }
            Op::SchemaSetLimit(h, limit, value, e) => {
                let mut e = Err::new(e);
                // Half the time a small value, which refuses some of the pool's routes.
                let value = if value & 1 == 0 { value % 64 } else { *value };
                let rc = atc_schema_set_limit(
                    get(&self.schemas, h),
                    limit.code(),
                    value,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
                if rc == ATC_OK {
                    assert!(value > 0, "a limit of 0 was accepted");
                }
            }
            Op::SchemaGetLimit(h, limit, null_out) => {
                let mut v = 0;
                let out = if *null_out { null_mut() } else { &mut v };
                let rc = atc_schema_get_limit(get(&self.schemas, h), limit.code(), out);
                check_status(rc);
                if rc == ATC_OK {
                    assert!(v > 0, "a limit reads 0");
                    if limit.code() == ATC_LIMIT_MAX_DEPTH {
                        assert!(v <= 256, "max_depth reads {v}");
                    }
                }
            }
            Op::RouterNew(h, e) => {
                let mut e = Err::new(e);
                let r = atc_router_new(get(&self.schemas, h), e.buf(), e.len());
                e.check(if r.is_null() { ATC_ERR_NULL } else { ATC_OK });
                if !r.is_null() {
                    if self.routers.len() < MAX_HANDLES {
                        self.routers.push(r);
                    } else {
                        atc_router_free(r);
                    }
                }
            }
            Op::RouterFree(i) => {
                if let Some(r) = take(&mut self.routers, *i) {
                    atc_router_free(r);
                }
            }
            Op::RouterAdd(h, prio, id, expr, e) => {
                let id = Arg::new(id, UUIDS);
                let expr = Arg::new(expr, EXPRS);
                let mut e = Err::new(e);
                let rc = atc_router_add(
                    get(&self.routers, h),
                    *prio,
                    id.ptr(),
                    id.len(),
                    expr.ptr(),
                    expr.len(),
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::RouterRemove(h, id, e) => {
                let id = Arg::new(id, UUIDS);
                let mut e = Err::new(e);
                let rc =
                    atc_router_remove(get(&self.routers, h), id.ptr(), id.len(), e.buf(), e.len());
                e.check(rc);
            }
            Op::RouterExecute(r, c) => {
                let rc = atc_router_execute(get(&self.routers, r), get(&self.contexts, c));
                check_status(rc);
                assert!(rc <= 1);
            }
            Op::RouterFields(h, out, null_count) => {
                let mut count = usize::MAX;
                let count_ptr: *mut usize = if *null_count { null_mut() } else { &mut count };
                let (rc, names) = names_call(out, |buf, len| {
                    atc_router_fields(get(&self.routers, h), buf, len, count_ptr)
                });
                if rc == ATC_OK && !*null_count {
                    assert_eq!(names, Some(count));
                }
            }
            Op::RouterValidate(h, expr, out, null_count, e) => {
                let expr = Arg::new(expr, EXPRS);
                let mut e = Err::new(e);
                let (eb, el) = (e.buf(), e.len());
                let mut count = usize::MAX;
                let count_ptr: *mut usize = if *null_count { null_mut() } else { &mut count };
                let (rc, names) = names_call(out, |buf, len| {
                    atc_router_validate(
                        get(&self.schemas, h),
                        expr.ptr(),
                        expr.len(),
                        buf,
                        len,
                        count_ptr,
                        eb,
                        el,
                    )
                });
                e.check(rc);
                if rc == ATC_OK && !*null_count {
                    assert_eq!(names, Some(count));
                }
            }
            Op::RouterLen(h, null_out) => {
                let mut n = usize::MAX;
                let out: *mut usize = if *null_out { null_mut() } else { &mut n };
                let rc = atc_router_len(get(&self.routers, h), out);
                check_status(rc);
                if rc == ATC_OK {
                    assert!(n < 1 << 20);
                }
            }
            Op::ContextNew(h, e) => {
                let mut e = Err::new(e);
                let c = atc_context_new(get(&self.schemas, h), e.buf(), e.len());
                e.check(if c.is_null() { ATC_ERR_NULL } else { ATC_OK });
                if !c.is_null() {
                    if self.contexts.len() < MAX_HANDLES {
                        self.contexts.push(c);
                    } else {
                        atc_context_free(c);
                    }
                }
            }
            Op::ContextFree(i) => {
                if let Some(c) = take(&mut self.contexts, *i) {
                    atc_context_free(c);
                }
            }
            Op::ContextReset(h) => check_status(atc_context_reset(get(&self.contexts, h))),
            Op::ContextFieldId(h, name, null_id, null_ty, e) => {
                let name = Arg::new(name, NAMES);
                let mut e = Err::new(e);
                let (mut id, mut ty) = (u32::MAX, -100);
                let id_ptr: *mut u32 = if *null_id { null_mut() } else { &mut id };
                let ty_ptr: *mut i32 = if *null_ty { null_mut() } else { &mut ty };
                let rc = atc_context_field_id(
                    get(&self.contexts, h),
                    name.ptr(),
                    name.len(),
                    id_ptr,
                    ty_ptr,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
                if rc == ATC_OK {
                    if !*null_ty {
                        assert!((ATC_TYPE_STRING..=ATC_TYPE_IPCIDR).contains(&ty));
                    }
                    if self.field_ids.len() < 32 {
                        self.field_ids.push(id);
                    }
                }
            }
            Op::AddStr(h, f, v, e) => {
                let v = Arg::new(v, VALUES);
                let mut e = Err::new(e);
                let rc = atc_context_add_str(
                    get(&self.contexts, h),
                    self.field(f),
                    v.ptr(),
                    v.len(),
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::AddInt(h, f, v, e) => {
                let mut e = Err::new(e);
                let rc = atc_context_add_int(
                    get(&self.contexts, h),
                    self.field(f),
                    *v,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::AddIp(h, f, v, e) => {
                let v = Arg::new(v, VALUES);
                let mut e = Err::new(e);
                let rc = atc_context_add_ip(
                    get(&self.contexts, h),
                    self.field(f),
                    v.ptr(),
                    v.len(),
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::AddValues(h, specs, null_values, null_failed, e) => {
                let texts: Vec<Arg> = specs.iter().map(|s| Arg::new(&s.text, VALUES)).collect();
                let values: Vec<AtcValue> = specs
                    .iter()
                    .zip(&texts)
                    .map(|(s, t)| AtcValue {
                        field: self.field(&s.field),
                        value_type: s.ty.code(),
                        int_value: s.int,
                        ptr: t.ptr(),
                        len: t.len(),
                    })
                    .collect();
                let mut failed = usize::MAX;
                let failed_ptr: *mut usize = if *null_failed {
                    null_mut()
                } else {
                    &mut failed
                };
                let values_ptr = if *null_values || values.is_empty() {
                    null()
                } else {
                    values.as_ptr()
                };
                let mut e = Err::new(e);
                let rc = atc_context_add_values(
                    get(&self.contexts, h),
                    values_ptr,
                    values.len(),
                    failed_ptr,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
                if rc < 0 && !*null_failed && failed != usize::MAX {
                    assert!(failed < values.len());
                }
            }
            Op::RouterSync(h, l, mode, out, e) | Op::RouterUpdate(h, l, mode, out, e) => {
                let list = if out.null_routes {
                    null_mut()
                } else {
                    get(&self.lists, l)
                };
                let call = match op {
                    Op::RouterSync(..) => atc_router_sync,
                    _ => atc_router_update,
                };
                let mut outs = SyncOuts::new(out);
                let (report, errors, errors_len, msg, msg_len) = outs.ptrs(out);
                let mut e = Err::new(e);
                let rc = call(
                    get(&self.routers, h),
                    list,
                    mode.sync_mode(),
                    report,
                    errors,
                    errors_len,
                    msg,
                    msg_len,
                    e.buf(),
                    e.len(),
                );
                // ATC_ERR_ROUTES is a failure too: errbuf holds the one message.
                e.check(rc);
                outs.check(out, rc == ATC_OK || rc == ATC_ERR_ROUTES);
            }
            Op::Explain(r, c, flags, out, e) => {
                let mut e = Err::new(e);
                let (eb, el) = (e.buf(), e.len());
                let (rc, _) = text_call(out, |buf, len| {
                    atc_router_explain(
                        get(&self.routers, r),
                        get(&self.contexts, c),
                        *flags,
                        buf,
                        len,
                        eb,
                        el,
                    )
                });
                e.check(rc);
            }
            Op::Matches(r, c, out, e) => {
                let mut e = Err::new(e);
                let (eb, el) = (e.buf(), e.len());
                let (rc, _) = text_call(out, |buf, len| {
                    atc_router_matches(
                        get(&self.routers, r),
                        get(&self.contexts, c),
                        buf,
                        len,
                        eb,
                        el,
                    )
                });
                e.check(rc);
            }
            Op::RouteExpression(h, id, null_out) => {
                let id = Arg::new(id, UUIDS);
                let mut expr: *const c_char = null();
                let mut len = usize::MAX;
                let (ep, lp): (*mut *const c_char, *mut usize) = if *null_out {
                    (null_mut(), null_mut())
                } else {
                    (&mut expr, &mut len)
                };
                let rc =
                    atc_router_route_expression(get(&self.routers, h), id.ptr(), id.len(), ep, lp);
                check_status(rc);
                if rc == ATC_OK && !*null_out {
                    read_text(expr, len);
                }
            }
            Op::KeyFields(h, null_out) => {
                let mut mask = 0u64;
                let out: *mut u64 = if *null_out { null_mut() } else { &mut mask };
                check_status(atc_router_key_fields(get(&self.routers, h), out));
            }
            Op::NeededFields(r, c, null_out) => {
                let mut mask = 0u64;
                let out: *mut u64 = if *null_out { null_mut() } else { &mut mask };
                check_status(atc_router_needed_fields(
                    get(&self.routers, r),
                    get(&self.contexts, c),
                    out,
                ));
            }
            Op::ListNew => {
                if self.lists.len() < MAX_HANDLES {
                    let l = atc_route_list_new();
                    assert!(!l.is_null());
                    self.lists.push(l);
                }
            }
            Op::ListFree(i) => {
                if let Some(l) = take(&mut self.lists, *i) {
                    atc_route_list_free(l);
                }
            }
            Op::ListAdd(h, list, null_routes, e)
            | Op::ListLend(h, list, null_routes, e)
            | Op::ListRemove(h, list, null_routes, e) => {
                let ids: Vec<Arg> = list.iter().map(|r| Arg::new(&r.id, UUIDS)).collect();
                let exprs: Vec<Arg> = list.iter().map(|r| Arg::new(&r.expr, EXPRS)).collect();
                let routes: Vec<AtcRoute> = list
                    .iter()
                    .zip(ids.iter().zip(&exprs))
                    .map(|(r, (id, expr))| AtcRoute {
                        id: id.ptr(),
                        id_len: id.len(),
                        priority: r.priority,
                        expr: expr.ptr(),
                        expr_len: expr.len(),
                        position: usize::from(r.position),
                    })
                    .collect();
                let ptr = if *null_routes || routes.is_empty() {
                    null()
                } else {
                    routes.as_ptr()
                };
                let add = match op {
                    Op::ListAdd(..) => atc_route_list_add,
                    Op::ListLend(..) => atc_route_list_lend,
                    _ => atc_route_list_remove,
                };
                let mut e = Err::new(e);
                let rc = add(get(&self.lists, h), ptr, routes.len(), e.buf(), e.len());
                e.check(rc);
                if matches!(op, Op::ListLend(..)) {
                    // The bytes stay where they are (each Arg owns its buffer on the heap).
                    self.lent_routes.push(ids);
                    self.lent_routes.push(exprs);
                }
            }
            Op::ListAddUnreadable(h, position, id, why, why_len, e) => {
                let id = id.as_ref().map(|s| Arg::new(s, UUIDS));
                let why = why.as_ref().map(|s| Arg::new(s, EXPRS));
                let (ip, il) = id.as_ref().map_or((null(), 0), |a| (a.ptr(), a.len()));
                let (wp, wl) = why
                    .as_ref()
                    .map_or((null(), usize::from(*why_len)), |a| (a.ptr(), a.len()));
                let mut e = Err::new(e);
                let rc = atc_route_list_add_unreadable(
                    get(&self.lists, h),
                    usize::from(*position),
                    ip,
                    il,
                    wp,
                    wl,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::ListClear(h) => {
                check_status(atc_route_list_clear(get(&self.lists, h)));
            }
            Op::SyncStart(r, version, l, mode, e) | Op::UpdateStart(r, version, l, mode, e) => {
                let list = get(&self.lists, l);
                let mut e = Err::new(e);
                let start = match op {
                    Op::SyncStart(..) => atc_router_sync_start,
                    _ => atc_router_update_start,
                };
                let rc = start(
                    get(&self.routers, r),
                    *version,
                    list,
                    mode.sync_mode(),
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
                if rc == ATC_OK {
                    // Taken by the router.
                    self.lists.retain(|x| *x != list);
                }
            }
            Op::SyncStartText(r, version, text, flags, mode, e) => {
                let flags = match flags {
                    0 | 1 => *flags,
                    f if f % 2 == 0 => ATC_TEXT_COPY,
                    f if f % 3 == 0 => ATC_TEXT_BORROW,
                    f => *f,
                };
                let bytes = text.bytes();
                let mut e = Err::new(e);
                let rc = atc_router_sync_start_text(
                    get(&self.routers, r),
                    *version,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    flags,
                    mode.sync_mode(),
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
                // Lent or not, kept until the routers are freed (a Vec's buffer does not move
                // when the Vec itself does).
                self.lent.push(bytes);
            }
            Op::SyncState(h, null_version) => {
                let mut version = 0u64;
                let out: *mut u64 = if *null_version {
                    null_mut()
                } else {
                    &mut version
                };
                let rc = atc_router_sync_state(get(&self.routers, h), out);
                check_status(rc);
                assert!(rc <= ATC_BUILD_READY);
            }
            Op::SyncReady(h) => {
                let rc = atc_router_sync_ready(get(&self.routers, h));
                check_status(rc);
                assert!(rc <= 1);
            }
            Op::SettleDue(h) => {
                let rc = atc_router_settle_due(get(&self.routers, h));
                check_status(rc);
                assert!(rc <= 1);
            }
            Op::KeepShadow(h, keep) => {
                check_status(atc_router_keep_shadow(get(&self.routers, h), *keep));
            }
            Op::SyncWait(h) => {
                let r = get(&self.routers, h);
                for _ in 0..2000 {
                    if r.is_null() || atc_router_sync_state(r, null_mut()) != ATC_BUILD_BUILDING {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(500));
                }
            }
            Op::SyncApply(h, null_version, out, e) => {
                let mut version = 0u64;
                let vp: *mut u64 = if *null_version {
                    null_mut()
                } else {
                    &mut version
                };
                let mut outs = SyncOuts::new(out);
                let (report, errors, errors_len, msg, msg_len) = outs.ptrs(out);
                let mut e = Err::new(e);
                let rc = atc_router_sync_apply(
                    get(&self.routers, h),
                    vp,
                    report,
                    errors,
                    errors_len,
                    msg,
                    msg_len,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
                outs.check(out, rc == ATC_OK || rc == ATC_ERR_ROUTES);
            }
            Op::Result(h, field, uuid_out, null_matched, null_captures) => {
                let field_id = field.as_ref().map(|f| self.field(f));
                let field_ptr: *const u32 = field_id.as_ref().map_or(null(), |f| f as *const u32);
                let (mut buf, mut len, null_len) = out_buf(uuid_out);
                let uuid_ptr = if matches!(uuid_out, OutSpec::Null(_)) {
                    null_mut()
                } else {
                    buf.as_mut_ptr()
                };
                let len_ptr: *mut usize = if null_len { null_mut() } else { &mut len };
                let mut matched = AtcMatched {
                    value_type: -100,
                    int_value: 0,
                    ptr: null(),
                    len: 0,
                };
                let matched_ptr: *mut AtcMatched = if *null_matched {
                    null_mut()
                } else {
                    &mut matched
                };
                let mut ncap = usize::MAX;
                let ncap_ptr: *mut usize = if *null_captures {
                    null_mut()
                } else {
                    &mut ncap
                };
                let rc = atc_context_result(
                    get(&self.contexts, h),
                    field_ptr,
                    uuid_ptr,
                    len_ptr,
                    matched_ptr,
                    ncap_ptr,
                );
                check_status(rc);
                assert!(rc <= 1);
                if rc == 1 {
                    if !uuid_ptr.is_null() {
                        assert_eq!(len, ATC_UUID_LEN);
                        let text: Vec<u8> = buf[..len].iter().map(|&b| b as u8).collect();
                        let text = std::str::from_utf8(&text).expect("uuid text");
                        assert!(atc_router::Uuid::try_parse(text).is_ok(), "{text}");
                    }
                    if !*null_matched {
                        assert!((ATC_TYPE_NONE..=ATC_TYPE_IPCIDR).contains(&matched.value_type));
                        if matched.value_type == ATC_TYPE_NONE {
                            assert_eq!(matched.len, 0);
                        } else {
                            read_text(matched.ptr, matched.len);
                        }
                    }
                }
            }
            Op::Captures(h, out) => {
                let cap = match out {
                    OutSpec::Cap(c) => *c as usize % 64,
                    _ => 0,
                };
                let mut caps: Vec<AtcCapture> = Vec::with_capacity(cap);
                caps.resize(
                    cap,
                    AtcCapture {
                        index: -100,
                        name: null(),
                        name_len: 0,
                        value: null(),
                        value_len: 0,
                    },
                );
                let mut n = match out {
                    OutSpec::Null(claimed) => *claimed,
                    _ => cap,
                };
                let ptr = if matches!(out, OutSpec::Null(_)) || caps.is_empty() {
                    null_mut()
                } else {
                    caps.as_mut_ptr()
                };
                let n_ptr: *mut usize = if matches!(out, OutSpec::NullLen) {
                    null_mut()
                } else {
                    &mut n
                };
                let rc = atc_context_captures(get(&self.contexts, h), ptr, n_ptr);
                check_status(rc);
                if rc == ATC_OK && !ptr.is_null() {
                    assert!(n <= cap);
                    for c in &caps[..n] {
                        assert!(c.index >= -1);
                        if c.index == -1 {
                            read_text(c.name, c.name_len);
                        } else {
                            assert!(c.name.is_null());
                        }
                        read_text(c.value, c.value_len);
                    }
                }
            }
            Op::KongField(subsystem, index, null_name, null_type) => {
                let (mut name, mut len, mut ty) = (null(), 0usize, -7);
                let np: *mut *const c_char = if *null_name { null_mut() } else { &mut name };
                let tp: *mut i32 = if *null_type { null_mut() } else { &mut ty };
                let rc = atc_kong_field(*subsystem % 4, *index as usize % 16, np, &mut len, tp);
                assert!(matches!(rc, 0 | 1 | ATC_ERR_INVALID | ATC_ERR_NULL), "{rc}");
                if rc == 1 {
                    let bytes = std::slice::from_raw_parts(name.cast::<u8>(), len);
                    assert!(std::str::from_utf8(bytes).is_ok());
                }
            }
            Op::PathFieldParse(name, null_out) => {
                let name = Arg::new(name, NAMES);
                let mut f = AtcPathField::default();
                let fp: *mut AtcPathField = if *null_out { null_mut() } else { &mut f };
                let rc = atc_path_field_parse(name.ptr(), name.len(), fp);
                assert!(
                    matches!(rc, 0 | 1 | ATC_ERR_NULL | ATC_ERR_UTF8 | ATC_ERR_INVALID),
                    "{rc}"
                );
            }
            Op::AddPath(h, uri, flags, fields, null_fields, e) => {
                let uri = Arg::new(uri, VALUES);
                let fields: Vec<AtcPathField> = fields
                    .iter()
                    .take(8)
                    .map(|(f, kind, from, to)| AtcPathField {
                        field: self.field(f),
                        kind: *kind % 6,
                        from: *from % 8,
                        to: *to % 8,
                    })
                    .collect();
                let (ptr, n) = if *null_fields {
                    (null(), if fields.is_empty() { 0 } else { fields.len() })
                } else {
                    (fields.as_ptr(), fields.len())
                };
                let mut e = Err::new(e);
                let rc = atc_context_add_path(
                    get(&self.contexts, h),
                    uri.ptr(),
                    uri.len(),
                    *flags % 4,
                    ptr,
                    n,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::HttpHost(value, null_len, null_port) => {
                let value = Arg::new(value, VALUES);
                let (mut len, mut port) = (usize::MAX, 0i64);
                let lp: *mut usize = if *null_len { null_mut() } else { &mut len };
                let pp: *mut i64 = if *null_port { null_mut() } else { &mut port };
                let rc = atc_http_host(value.ptr(), value.len(), lp, pp);
                assert!(
                    matches!(rc, 0 | 1 | ATC_ERR_NULL | ATC_ERR_UTF8 | ATC_ERR_INVALID),
                    "{rc}"
                );
                if rc >= 0 {
                    assert!(len <= value.len());
                }
            }
            Op::ContextValue(h, f, index, null_out) => {
                let mut v = AtcMatched {
                    value_type: -9,
                    int_value: 0,
                    ptr: null(),
                    len: 0,
                };
                let vp: *mut AtcMatched = if *null_out { null_mut() } else { &mut v };
                let rc = atc_context_value(
                    get(&self.contexts, h),
                    self.field(f),
                    *index as usize % 4,
                    vp,
                );
                if rc == 1 {
                    let bytes = std::slice::from_raw_parts(v.ptr.cast::<u8>(), v.len);
                    assert!(std::str::from_utf8(bytes).is_ok());
                }
            }
            Op::BuilderPriority(nice) => {
                let rc = atc_builder_priority(*nice % 24 - 2);
                assert!((0..=19).contains(&rc) || rc == ATC_ERR_INVALID, "{rc}");
            }
            Op::BuilderSchedule(policy, boost) => {
                let rc = atc_builder_schedule(*policy % 3, u32::from(*boost % 2000));
                assert!(rc == ATC_OK || rc == ATC_ERR_INVALID);
            }
            Op::Strerror(code) => {
                let s = CStr::from_ptr(atc_strerror(*code));
                assert!(!s.to_bytes().is_empty());
                // The other function without arguments: a static, NUL-terminated version.
                let v = CStr::from_ptr(atc_router_version());
                let v = v.to_str().expect("the version is UTF-8");
                assert_eq!(
                    v,
                    format!("{ATC_VERSION_MAJOR}.{ATC_VERSION_MINOR}.{ATC_VERSION_PATCH}")
                );
            }
            Op::RouterStats(h, size, null_out) => {
                // A buffer of 128 bytes, of which the caller declares `size` (an older, a newer
                // or a nonsensical version of the struct): nothing may be written past it.
                let mut buf = [0x5A5A_5A5A_5A5A_5A5Au64; 16];
                let declared = usize::from(*size) % (std::mem::size_of_val(&buf) + 1);
                buf[0] = declared as u64;
                let out: *mut AtcStats = if *null_out {
                    null_mut()
                } else {
                    buf.as_mut_ptr().cast()
                };
                let rc = atc_router_stats(get(&self.routers, h), out);
                check_status(rc);
                if rc == ATC_OK {
                    let filled = buf[0] as usize;
                    assert!((8..=declared).contains(&filled), "{filled} of {declared}");
                    let past: &[u8] =
                        &std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), 128)[filled..];
                    assert!(past.iter().all(|&b| b == 0x5A), "written past {filled}");
                    if filled == std::mem::offset_of!(AtcStats, broken) + 4 {
                        let st = *buf.as_ptr().cast::<AtcStats>();
                        assert!(st.routes < 1 << 20 && (st.broken == 0 || st.broken == 1));
                    }
                }
            }
            Op::CountBadRequest(h) => {
                check_status(atc_router_count_bad_request(get(&self.routers, h)));
            }
            Op::Settle(h) => check_status(atc_router_settle(get(&self.routers, h))),
            Op::BuilderThreads(n) => check_status(atc_builder_threads(*n % 4)),
            Op::PublishImages(h, sealed, flags, e) => {
                let dir = image_dir().to_string_lossy().into_owned();
                let (ptr, len) = if *sealed {
                    (null(), 0)
                } else {
                    (dir.as_ptr().cast(), dir.len())
                };
                let mut e = Err::new(e);
                let rc = atc_router_publish_images(
                    get(&self.routers, h),
                    ptr,
                    len,
                    *flags % 3,
                    e.buf(),
                    e.len(),
                );
                e.check(rc);
            }
            Op::Published(h, null_version, out) => {
                let r = get(&self.routers, h);
                let mut version = 0u64;
                let vp: *mut u64 = if *null_version {
                    null_mut()
                } else {
                    &mut version
                };
                text_call(out, |buf, len| atc_router_published(r, vp, buf, len));
                if let Some(path) = text_of(|buf, len| atc_router_published(r, vp, buf, len)) {
                    if self.paths.len() < 16 {
                        self.paths.push(path);
                    }
                }
            }
            Op::ImageOpen(h, path, threaded, e) => {
                let path = match path {
                    PathRef::Known(i) if !self.paths.is_empty() => {
                        let p = &self.paths[*i as usize % self.paths.len()];
                        Arg::new(&Str::Bytes(p.as_bytes().to_vec()), NAMES)
                    }
                    PathRef::Known(_) => Arg::new(&Str::Null(0), NAMES),
                    PathRef::Raw(text) => Arg::new(text, NAMES),
                };
                let schema = get(&self.schemas, h);
                let mut e = Err::new(e);
                if *threaded {
                    let o = atc_image_open_start(schema, path.ptr(), path.len(), e.buf(), e.len());
                    e.check(if o.is_null() { ATC_ERR_INVALID } else { ATC_OK });
                    if !o.is_null() {
                        self.openings.push(o);
                    }
                } else {
                    let img = atc_image_open(schema, path.ptr(), path.len(), e.buf(), e.len());
                    e.check(if img.is_null() { ATC_ERR_IMAGE } else { ATC_OK });
                    if !img.is_null() {
                        self.images.push(img);
                    }
                }
            }
            Op::ImageOpenReady(h) => {
                let rc = atc_image_open_ready(get(&self.openings, h));
                check_status(rc);
                assert!(rc <= 1);
            }
            Op::ImageOpenFinish(i, e) => {
                if let Some(o) = take(&mut self.openings, *i) {
                    let mut e = Err::new(e);
                    let img = atc_image_open_finish(o, e.buf(), e.len());
                    e.check(if img.is_null() { ATC_ERR_IMAGE } else { ATC_OK });
                    if !img.is_null() {
                        self.images.push(img);
                    }
                }
            }
            Op::ImageFree(i) => {
                if let Some(img) = take(&mut self.images, *i) {
                    atc_image_free(img);
                }
            }
            Op::ImageRetire(i, path) => {
                if let Some(img) = take(&mut self.images, *i) {
                    let path = match path {
                        Some(p) if !self.paths.is_empty() => {
                            self.paths[*p as usize % self.paths.len()].clone()
                        }
                        _ => String::new(),
                    };
                    check_status(atc_image_retire(img, path.as_ptr().cast(), path.len()));
                }
            }
            Op::ImageSharePath(h, out) => {
                let img = get(&self.images, h);
                text_call(out, |buf, len| atc_image_share_path(img, buf, len));
                if let Some(path) = text_of(|buf, len| atc_image_share_path(img, buf, len)) {
                    if self.paths.len() < 16 {
                        self.paths.push(path);
                    }
                }
            }
            Op::Attach(h, image, null_previous) => {
                let r = get(&self.routers, h);
                let at = image.filter(|_| !self.images.is_empty());
                let img = at.map_or(null_mut(), |i| self.images[i as usize % self.images.len()]);
                let mut previous = null_mut();
                let pp: *mut *mut AtcImage = if *null_previous {
                    null_mut()
                } else {
                    &mut previous
                };
                let rc = atc_router_attach_image(r, img, pp);
                check_status(rc);
                if rc == ATC_OK {
                    // The router took the image; it handed back the one before.
                    if let Some(i) = at {
                        let n = self.images.len();
                        self.images.swap_remove(i as usize % n);
                    }
                    if !previous.is_null() {
                        self.images.push(previous);
                    }
                } else {
                    assert!(previous.is_null(), "a refused attach handed an image back");
                }
            }
            Op::RemoveIfUnused(i, e) => {
                if !self.paths.is_empty() {
                    let p = self.paths[*i as usize % self.paths.len()].clone();
                    let mut e = Err::new(e);
                    let rc = atc_image_remove_if_unused(p.as_ptr().cast(), p.len(), e.buf(), e.len());
                    e.check(rc);
                    assert!(rc <= 1);
                }
            }
            Op::Sweep(ours, keep, e) => {
                let dir = image_dir().to_string_lossy().into_owned();
                let (ptr, len) = if *ours {
                    (dir.as_ptr().cast(), dir.len())
                } else {
                    (null(), 0)
                };
                let keep = match keep {
                    Some(k) if !self.paths.is_empty() => {
                        let p = &self.paths[*k as usize % self.paths.len()];
                        p.rsplit('/').next().unwrap_or("").to_owned()
                    }
                    _ => String::new(),
                };
                let mut e = Err::new(e);
                let rc = atc_image_sweep(ptr, len, keep.as_ptr().cast(), keep.len(), e.buf(), e.len());
                e.check(rc);
            }
        }
    }

    unsafe fn free_all(&mut self) {
        // Free in an order that differs from creation, as a garbage collector would.
        for c in self.contexts.drain(..).rev() {
            atc_context_free(c);
        }
        for s in self.schemas.drain(..) {
            atc_schema_free(s);
        }
        for o in self.openings.drain(..) {
            atc_image_free(atc_image_open_finish(o, null_mut(), null_mut()));
        }
        for img in self.images.drain(..) {
            atc_image_free(img);
        }
        for r in self.routers.drain(..) {
            atc_router_free(r);
        }
        self.paths.clear();
        // The routers' builders have stopped: nothing writes image files any more.
        let _ = std::fs::remove_dir_all(image_dir());
        for l in self.lists.drain(..) {
            atc_route_list_free(l);
        }
        // Only now: a builder may read a lent text or route until its router is freed.
        self.lent.clear();
        self.lent_routes.clear();
    }
}

/// The outputs of a sync-like call, allocated to exactly what `out` claims.
struct SyncOuts {
    report: AtcSyncReport,
    errors: Vec<AtcSyncError>,
    errors_cap: usize,
    errors_len: usize,
    msgbuf: Vec<c_char>,
    msg_len: usize,
    msg_null_len: bool,
}

impl SyncOuts {
    fn new(out: &SyncOut) -> SyncOuts {
        let errors_cap = match out.errors {
            OutSpec::Cap(c) => c as usize % 32,
            _ => 0,
        };
        let errors = (0..errors_cap)
            .map(|_| AtcSyncError {
                index: usize::MAX,
                code: 0,
                message: null(),
                message_len: 0,
            })
            .collect();
        let errors_len = match out.errors {
            OutSpec::Null(claimed) => claimed,
            _ => errors_cap,
        };
        let (msgbuf, msg_len, msg_null_len) = out_buf(&out.msgbuf);
        SyncOuts {
            report: AtcSyncReport::default(),
            errors,
            errors_cap,
            errors_len,
            msgbuf,
            msg_len,
            msg_null_len,
        }
    }

    /// The pointers to pass: report, errors, errors_len, msgbuf, msgbuf_len.
    #[allow(clippy::type_complexity)]
    fn ptrs(
        &mut self,
        out: &SyncOut,
    ) -> (
        *mut AtcSyncReport,
        *mut AtcSyncError,
        *mut usize,
        *mut c_char,
        *mut usize,
    ) {
        let report: *mut AtcSyncReport = if out.null_report {
            null_mut()
        } else {
            &mut self.report
        };
        let errors = match out.errors {
            OutSpec::Null(_) => null_mut(),
            _ if self.errors.is_empty() => std::ptr::NonNull::dangling().as_ptr(),
            _ => self.errors.as_mut_ptr(),
        };
        let errors_len: *mut usize = if matches!(out.errors, OutSpec::NullLen) {
            null_mut()
        } else {
            &mut self.errors_len
        };
        let msg = match out.msgbuf {
            OutSpec::Null(_) => null_mut(),
            _ if self.msgbuf.is_empty() => std::ptr::NonNull::dangling().as_ptr(),
            _ => self.msgbuf.as_mut_ptr(),
        };
        let msg_len: *mut usize = if self.msg_null_len {
            null_mut()
        } else {
            &mut self.msg_len
        };
        (report, errors, errors_len, msg, msg_len)
    }

    /// The errors written, each inside `msgbuf` and NUL-terminated (`written` when the errors
    /// output was given).
    fn check(&self, out: &SyncOut, written: bool) {
        if !written || matches!(out.errors, OutSpec::Null(_) | OutSpec::NullLen) {
            return;
        }
        assert!(
            self.errors_len <= self.errors_cap,
            "{} errors written, capacity {}",
            self.errors_len,
            self.errors_cap
        );
        if !out.null_report {
            assert!(self.report.errors >= self.errors_len);
        }
        for err in &self.errors[..self.errors_len] {
            assert!(err.code < 0);
            check_status(err.code);
            if !err.message.is_null() {
                let start = err.message as usize - self.msgbuf.as_ptr() as usize;
                assert!(start + err.message_len < self.msgbuf.len());
                assert_eq!(self.msgbuf[start + err.message_len], 0);
                // SAFETY: checked above to lie inside `msgbuf`.
                unsafe { read_text(err.message, err.message_len) };
            }
        }
    }
}

/// An output byte buffer of exactly the claimed capacity, and whether the length pointer is
/// NULL.
fn out_buf(spec: &OutSpec) -> (Vec<c_char>, usize, bool) {
    match spec {
        OutSpec::Cap(c) => {
            let cap = *c as usize % 512;
            (vec![0x11; cap], cap, false)
        }
        OutSpec::Null(claimed) => (Vec::new(), *claimed, false),
        OutSpec::NullLen => (vec![0x11; 8], 8, true),
    }
}

/// Calls a function that writes NUL-separated names and checks what it wrote; returns the
/// status and, on success, the number of names written.
unsafe fn names_call(
    spec: &OutSpec,
    f: impl FnOnce(*mut c_char, *mut usize) -> i32,
) -> (i32, Option<usize>) {
    let (mut buf, mut len, null_len) = out_buf(spec);
    let cap = len;
    let ptr = match spec {
        OutSpec::Null(_) => null_mut(),
        _ if buf.is_empty() => std::ptr::NonNull::<c_char>::dangling().as_ptr(),
        _ => buf.as_mut_ptr(),
    };
    let len_ptr: *mut usize = if null_len { null_mut() } else { &mut len };
    let rc = f(ptr, len_ptr);
    check_status(rc);
    if rc == ATC_ERR_BUFFER {
        assert!(
            len > cap,
            "ATC_ERR_BUFFER but {len} needed for capacity {cap}"
        );
        assert!(buf.iter().all(|&b| b == 0x11), "written although too small");
    }
    if rc != ATC_OK {
        return (rc, None);
    }
    assert!(len <= cap);
    if len == 0 {
        return (rc, Some(0));
    }
    let bytes: Vec<u8> = buf[..len].iter().map(|&b| b as u8).collect();
    assert_eq!(bytes.last(), Some(&0), "names end with a NUL");
    let names: Vec<&[u8]> = bytes[..len - 1].split(|&b| b == 0).collect();
    for n in &names {
        let n = std::str::from_utf8(n).expect("names are UTF-8");
        assert!(!n.is_empty());
    }
    (rc, Some(names.len()))
}

/// Calls `f` with an output buffer for text that is not NUL-terminated (explain's JSON):
/// `ATC_ERR_BUFFER` writes nothing and says how much is needed; success writes UTF-8 within
/// the capacity.
unsafe fn text_call(
    spec: &OutSpec,
    f: impl FnOnce(*mut c_char, *mut usize) -> i32,
) -> (i32, usize) {
    let (mut buf, mut len, null_len) = out_buf(spec);
    let cap = len;
    let ptr = match spec {
        OutSpec::Null(_) => null_mut(),
        _ if buf.is_empty() => std::ptr::NonNull::<c_char>::dangling().as_ptr(),
        _ => buf.as_mut_ptr(),
    };
    let len_ptr: *mut usize = if null_len { null_mut() } else { &mut len };
    let rc = f(ptr, len_ptr);
    check_status(rc);
    if rc == ATC_ERR_BUFFER && !null_len {
        assert!(len > cap || ptr.is_null(), "ATC_ERR_BUFFER with room");
        assert!(buf.iter().all(|&b| b == 0x11), "written although too small");
    }
    if rc == ATC_OK && !null_len {
        assert!(len <= cap);
        read_text(buf.as_ptr(), len);
    }
    (rc, len)
}

/// Reads `len` bytes at `ptr` (AddressSanitizer checks the pointer) and checks they are UTF-8.
unsafe fn read_text(ptr: *const c_char, len: usize) {
    if len == 0 {
        return;
    }
    assert!(!ptr.is_null());
    let bytes = std::slice::from_raw_parts(ptr.cast::<u8>(), len);
    std::str::from_utf8(bytes).expect("results are UTF-8");
}

/// The input: optionally a standard setup (a schema with the first six pool fields, a router
/// with every pool expression that is valid, a context and resolved field ids), so that the
/// fuzzer reaches matches and results without first having to discover the whole protocol,
/// then arbitrary calls.
#[derive(Arbitrary, Debug)]
struct Input {
    setup: bool,
    ops: Vec<Op>,
}

impl State {
    unsafe fn setup(&mut self) {
        let s = atc_schema_new();
        for (name, ty) in NAMES.iter().zip(TYPES) {
            let rc = atc_schema_add_field(
                s,
                name.as_ptr().cast(),
                name.len(),
                *ty,
                null_mut(),
                null_mut(),
            );
            assert_eq!(rc, ATC_OK);
        }
        let r = atc_router_new(s, null_mut(), null_mut());
        for (i, expr) in EXPRS.iter().enumerate() {
            let id = format!("a8f2c1e4-0000-4000-8000-{i:012}");
            let rc = atc_router_add(
                r,
                i as u64 % 3,
                id.as_ptr().cast(),
                id.len(),
                expr.as_ptr().cast(),
                expr.len(),
                null_mut(),
                null_mut(),
            );
            check_status(rc);
        }
        let c = atc_context_new(s, null_mut(), null_mut());
        for name in &NAMES[..8] {
            let mut id = 0;
            let rc = atc_context_field_id(
                c,
                name.as_ptr().cast(),
                name.len(),
                &mut id,
                null_mut(),
                null_mut(),
                null_mut(),
            );
            if rc == ATC_OK {
                self.field_ids.push(id);
            }
        }
        self.schemas.push(s);
        self.routers.push(r);
        self.contexts.push(c);
    }
}

fuzz_target!(|input: Input| {
    let mut state = State::default();
    if input.setup {
        // SAFETY: fresh handles only.
        unsafe { state.setup() };
    }
    for op in input.ops.iter().take(MAX_OPS) {
        // SAFETY: the harness passes only live handles or NULL, and non-NULL pointers with
        // lengths within their buffers (see the module docs).
        unsafe { state.run(op) };
    }
    unsafe { state.free_all() };
});
