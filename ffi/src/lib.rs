//! # atc-router-ffi: the C ABI of atc-router
//!
//! Built as `libatc_router_ffi.{so,a}` and installed as `libatc_router.{so,a}` (see README.md);
//! the C declarations are in `include/atc_router.h`, generated from this crate by cbindgen (the
//! `header` test fails when the checked-in copy is stale). The LuaJIT binding in `lua/` is a
//! thin layer over these functions.
//!
//! Contract of every exported function (all of them start with `atc_`):
//!
//! - **No unwinding, no abort.** The body runs inside `catch_unwind`; a panic becomes
//!   [`ATC_ERR_PANIC`] (or a NULL handle) with its message in the error buffer. An object whose
//!   call panicked should be freed and not used again.
//! - **Input is checked.** A NULL where a pointer is required is [`ATC_ERR_NULL`]. Strings are
//!   passed as pointer + length (no NUL needed); the pointer may be NULL only when the length is
//!   0, and the bytes must be UTF-8 ([`ATC_ERR_UTF8`]). Field ids, type codes, UUIDs and IP
//!   texts are validated. Handles themselves cannot be checked: passing a freed or foreign
//!   pointer as a handle is undefined behaviour, as in any C library.
//! - **Status codes.** `int32_t` results are [`ATC_OK`] (0) or a non-negative answer on success
//!   and one of the negative `ATC_ERR_*` codes on failure; [`atc_strerror`] describes a code.
//! - **Error messages** go to a caller buffer `(errbuf, errbuf_len)`: `*errbuf_len` holds the
//!   capacity on entry. On failure the message is cut to the longest prefix of whole UTF-8
//!   characters that fits in `capacity - 1` bytes, a NUL is written after it, and `*errbuf_len`
//!   receives its length (without the NUL); with capacity 0 nothing is written and
//!   `*errbuf_len` becomes 0. Both pointers may be NULL (no message wanted). On success the
//!   buffer and `*errbuf_len` are left untouched.
//! - **Output buffers that are too small** give [`ATC_ERR_BUFFER`] and the size needed in the
//!   length argument; nothing else is written, so the call can be repeated with a larger buffer.
//!   The exception is [`atc_router_sync`], which cannot be repeated: it writes what fits and
//!   reports the totals.
//! - **Lifetimes.** Routers and contexts keep the schema's data alive (reference counted), so a
//!   schema handle may be freed before, after or between them. Results read from a context
//!   point into the context and stay valid until the next call that changes it.
//! - **Threads.** A schema handle may be used from any thread (it is locked inside). A router
//!   or a context must be used by one thread at a time.

#![deny(unsafe_op_in_unsafe_fn)]

use std::any::Any;
use std::ffi::c_char;
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};

use atc_router::{Error, ErrorCode, Type};

pub mod background;
pub mod builder_settings;
pub mod context;
pub mod explain;
pub mod image;
pub mod image_file;
pub mod publish;
pub mod request;
pub mod route_list;
pub mod router;
pub mod schema;
pub mod stats;
pub mod sync;

pub use background::*;
pub use builder_settings::*;
pub use context::*;
pub use explain::*;
pub use request::*;
pub use route_list::*;
pub use router::*;
pub use schema::*;
pub use stats::*;
pub use sync::*;

/// Success.
pub const ATC_OK: i32 = 0;
/// A required pointer argument is NULL (or a string pointer is NULL with a non-zero length).
pub const ATC_ERR_NULL: i32 = -1;
/// A string argument is not valid UTF-8.
pub const ATC_ERR_UTF8: i32 = -2;
/// An argument is malformed: a type code, a field name, an IP address or CIDR text, a limit
/// code or value.
pub const ATC_ERR_INVALID: i32 = -3;
/// A field name or field id that the schema does not know.
pub const ATC_ERR_UNKNOWN_FIELD: i32 = -4;
/// A value of another type than its field's.
pub const ATC_ERR_TYPE: i32 = -5;
/// A route id that is not a UUID.
pub const ATC_ERR_UUID: i32 = -6;
/// An output buffer is too small; the size needed was stored in its length argument.
pub const ATC_ERR_BUFFER: i32 = -7;
/// A field or route id that is already there.
pub const ATC_ERR_DUPLICATE: i32 = -8;
/// `atc_schema_add_field` or `atc_schema_set_limit` after the schema was shared by a router or
/// a context.
pub const ATC_ERR_SCHEMA_SHARED: i32 = -9;
/// An expression that does not parse or validate (the message shows where and why).
pub const ATC_ERR_EXPR: i32 = -10;
/// A documented limit was exceeded (values per field, wildcard field names).
pub const ATC_ERR_LIMIT: i32 = -11;
/// A router and a context made from different schemas.
pub const ATC_ERR_SCHEMA_MISMATCH: i32 = -12;
/// No route with that id (`atc_router_remove`).
pub const ATC_ERR_NOT_FOUND: i32 = -13;
/// An internal error (a panic was caught). Free the object involved.
pub const ATC_ERR_PANIC: i32 = -14;
/// `atc_router_sync` refused the list: some routes are invalid (each is reported), nothing
/// changed.
pub const ATC_ERR_ROUTES: i32 = -15;
/// The router is broken: a panic interrupted a change of its routes part-way, so it refuses to
/// match. `atc_router_sync` with the full route list rebuilds it.
pub const ATC_ERR_BROKEN: i32 = -16;
/// A table image was refused: not an image, corrupt, truncated, written by another library
/// version or for a schema with other fields. Whatever the caller had stays in use.
pub const ATC_ERR_IMAGE: i32 = -18;

/// Field type `String`.
pub const ATC_TYPE_STRING: i32 = 0;
/// Field type `Int` (signed 64-bit).
pub const ATC_TYPE_INT: i32 = 1;
/// Field type `IpAddr`.
pub const ATC_TYPE_IPADDR: i32 = 2;
/// Field type `IpCidr`.
pub const ATC_TYPE_IPCIDR: i32 = 3;
/// No value (in `atc_matched`: the field recorded no matched value).
pub const ATC_TYPE_NONE: i32 = -1;

// Codes of `atc_schema_set_limit` / `atc_schema_get_limit`: one per field of the core's
// `Limits` (SECURITY.md describes each). They start at 1 so that a zeroed variable names no
// limit and is refused.
/// Longest expression text, in bytes (default 1 MiB).
pub const ATC_LIMIT_MAX_EXPRESSION_LEN: i32 = 1;
/// Deepest nesting of parentheses, `!(` and transformations (default and hard cap 256).
pub const ATC_LIMIT_MAX_DEPTH: i32 = 2;
/// Most predicates in one expression, each element of a set counting (default 16,384).
pub const ATC_LIMIT_MAX_PREDICATES: i32 = 3;
/// Most regexes (`~`) in one expression (default 16,384).
pub const ATC_LIMIT_MAX_REGEXES: i32 = 4;
/// Largest compiled size of one regex, in bytes (default 10 MiB).
pub const ATC_LIMIT_REGEX_SIZE: i32 = 5;
/// Largest compiled size of the regexes of one expression together, in bytes (default 32 MiB).
pub const ATC_LIMIT_REGEX_TOTAL_SIZE: i32 = 6;
/// Most values one context field holds (default 1,024).
pub const ATC_LIMIT_MAX_VALUES_PER_FIELD: i32 = 7;
/// Most distinct wildcard names the routes of the schema use at a time (default 65,536).
pub const ATC_LIMIT_MAX_WILDCARD_FIELDS: i32 = 8;

/// The index bits of a field id (`atc_context_field_id`): `id & ATC_FIELD_INDEX_MASK` is the
/// field's index (the low 20 bits; the bits above are a generation), its bit in a field mask.
/// 0xFFFFF, written in decimal for the header's readers.
pub const ATC_FIELD_INDEX_MASK: u32 = 1048575;

// The layout is the core's (`FieldId::INDEX_MASK`); cbindgen writes only literals, so a change
// there that forgets this one fails to compile.
const _: () = assert!(ATC_FIELD_INDEX_MASK == atc_router::FieldId::INDEX_MASK);

/// The last bit of a field mask (`atc_router_key_fields`): the field of id `id` is bit
/// `min(id & ATC_FIELD_INDEX_MASK, 63)`.
pub const ATC_FIELD_MASK_LAST_BIT: u32 = 63;

/// Length of a UUID in its hyphenated text form, the form results are written in.
pub const ATC_UUID_LEN: usize = 36;

/// Major version of the library (and of the project: crates, header, Lua modules). The shared
/// object's SONAME is `libatc_router.so.<major>`.
pub const ATC_VERSION_MAJOR: u32 = 0;
/// Minor version of the library.
pub const ATC_VERSION_MINOR: u32 = 2;
/// Patch version of the library.
pub const ATC_VERSION_PATCH: u32 = 0;

/// The crate's version as a number, at compile time (the constants above must say the same).
const fn version_part(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut n = 0;
    while i < bytes.len() {
        n = n * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    n
}

// The header's constants are literals (cbindgen writes only those); these make a version bump
// that forgets them fail to compile.
const _: () = assert!(ATC_VERSION_MAJOR == version_part(env!("CARGO_PKG_VERSION_MAJOR")));
const _: () = assert!(ATC_VERSION_MINOR == version_part(env!("CARGO_PKG_VERSION_MINOR")));
const _: () = assert!(ATC_VERSION_PATCH == version_part(env!("CARGO_PKG_VERSION_PATCH")));

/// The library's version, `"MAJOR.MINOR.PATCH"`: a static, NUL-terminated string (never NULL).
/// A program compiled against one header can compare it with `ATC_VERSION_*` at run time; the
/// Lua binding refuses a library whose version differs from its own.
#[no_mangle]
pub extern "C" fn atc_router_version() -> *const c_char {
    const VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
    ) {
        Ok(s) => s,
        Err(_) => panic!("the crate version has a NUL byte"),
    };
    VERSION.as_ptr()
}

/// A static, NUL-terminated description of a status code (never NULL).
#[no_mangle]
pub extern "C" fn atc_strerror(status: i32) -> *const c_char {
    let s: &'static std::ffi::CStr = match status {
        ATC_OK => c"success",
        ATC_ERR_NULL => c"a required pointer argument is NULL",
        ATC_ERR_UTF8 => c"a string argument is not valid UTF-8",
        ATC_ERR_INVALID => c"an argument is malformed",
        ATC_ERR_UNKNOWN_FIELD => c"unknown field",
        ATC_ERR_TYPE => c"the value's type differs from the field's",
        ATC_ERR_UUID => c"the route id is not a UUID",
        ATC_ERR_BUFFER => c"the output buffer is too small",
        ATC_ERR_DUPLICATE => c"already exists",
        ATC_ERR_SCHEMA_SHARED => c"the schema is already used by a router or a context",
        ATC_ERR_EXPR => c"invalid expression",
        ATC_ERR_LIMIT => c"a limit was exceeded",
        ATC_ERR_SCHEMA_MISMATCH => c"the router and the context use different schemas",
        ATC_ERR_NOT_FOUND => c"not found",
        ATC_ERR_PANIC => c"internal error",
        ATC_ERR_ROUTES => c"invalid routes, nothing changed",
        ATC_ERR_BROKEN => c"the router is broken (a change was interrupted); sync to rebuild it",
        ATC_ERR_NOT_READY => c"no background sync outcome is ready",
        ATC_ERR_IMAGE => c"the table image was refused (corrupt, foreign or of another version)",
        _ => c"unknown status code",
    };
    s.as_ptr()
}

/// A failed call: its status code and message.
#[derive(Debug)]
pub(crate) struct Fail {
    pub code: i32,
    pub msg: String,
}

impl Fail {
    pub(crate) fn new(code: i32, msg: impl Display) -> Fail {
        Fail {
            code,
            msg: msg.to_string(),
        }
    }

    pub(crate) fn null(arg: &str) -> Fail {
        Fail::new(ATC_ERR_NULL, format_args!("`{arg}` is NULL"))
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        // The core's `Error` is `#[non_exhaustive]`; its `code()` is the closed list, mapped
        // here without a catch-all arm, so that a new code fails to build until it has a
        // status (see `atc_router::ErrorCode`).
        let code = match e.code() {
            ErrorCode::Expression => ATC_ERR_EXPR,
            ErrorCode::UnknownField => ATC_ERR_UNKNOWN_FIELD,
            ErrorCode::InvalidFieldName => ATC_ERR_INVALID,
            ErrorCode::Duplicate => ATC_ERR_DUPLICATE,
            ErrorCode::TypeMismatch => ATC_ERR_TYPE,
            ErrorCode::Limit => ATC_ERR_LIMIT,
            ErrorCode::SchemaMismatch => ATC_ERR_SCHEMA_MISMATCH,
            ErrorCode::Broken => ATC_ERR_BROKEN,
            ErrorCode::Image => ATC_ERR_IMAGE,
            ErrorCode::BadId => ATC_ERR_UUID,
            ErrorCode::NotUtf8 => ATC_ERR_UTF8,
        };
        Fail::new(code, e)
    }
}

pub(crate) type Res<T> = Result<T, Fail>;

/// Runs an entry point's body: catches panics and reports failures through the error buffer.
pub(crate) fn guard(
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
    f: impl FnOnce() -> Res<i32>,
) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(fail)) => {
            // SAFETY: the caller passes a buffer of `*errbuf_len` bytes, or NULLs.
            unsafe { write_error(errbuf, errbuf_len, &fail.msg) };
            fail.code
        }
        Err(payload) => {
            let msg = format!("internal error: {}", panic_message(&*payload));
            // SAFETY: as above.
            unsafe { write_error(errbuf, errbuf_len, &msg) };
            ATC_ERR_PANIC
        }
    }
}

/// Like [`guard`] for constructors: NULL on failure.
pub(crate) fn guard_ptr<T>(
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
    f: impl FnOnce() -> Res<*mut T>,
) -> *mut T {
    let mut out = std::ptr::null_mut();
    guard(errbuf, errbuf_len, || {
        out = f()?;
        Ok(ATC_OK)
    });
    out
}

/// Runs a body that reports only a status (no error buffer), catching panics.
pub(crate) fn guard_status(f: impl FnOnce() -> Res<i32>) -> i32 {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), f)
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "panic"
    }
}

/// Writes `msg` by the truncation rule of the module docs.
///
/// # Safety
/// `buf` must point to `*len` writable bytes, or one of the pointers must be NULL.
pub(crate) unsafe fn write_error(buf: *mut c_char, len: *mut usize, msg: &str) {
    if buf.is_null() || len.is_null() {
        return;
    }
    // SAFETY: `len` is non-NULL (checked above) and readable (the caller's contract).
    let cap = unsafe { *len };
    if cap == 0 {
        return;
    }
    let mut n = msg.len().min(cap - 1);
    while !msg.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: the destination is the caller's buffer, with room for the bytes copied (checked
    // above), and the source is our own memory: they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n) };
    // SAFETY: the offset stays within the caller's buffer, whose capacity bounds it (checked
    // above).
    unsafe { *buf.add(n) = 0 };
    // SAFETY: `len` is non-NULL (checked above) and writable (the caller's contract).
    unsafe { *len = n };
}

/// Borrows a pointer + length string argument.
///
/// # Safety
/// `ptr` must point to `len` readable bytes that stay unchanged for `'a`, or be NULL.
pub(crate) unsafe fn str_arg<'a>(
    ptr: *const c_char,
    len: usize,
    arg: &'static str,
) -> Res<&'a str> {
    // SAFETY: `ptr` is NULL or points to `len` readable bytes (the caller's contract).
    let bytes = unsafe { bytes_arg(ptr, len, arg) }?;
    Ok(atc_router::route_list::read_text(bytes, arg)?)
}

/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn bytes_arg<'a>(ptr: *const c_char, len: usize, arg: &str) -> Res<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Fail::new(
            ATC_ERR_NULL,
            format_args!("`{arg}` is NULL but its length is {len}"),
        ));
    }
    if len > isize::MAX as usize {
        return Err(Fail::new(
            ATC_ERR_INVALID,
            format_args!("`{arg}` has an impossible length ({len})"),
        ));
    }
    // SAFETY: `ptr` is non-NULL here and points to that many elements (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Borrows a handle argument.
///
/// # Safety
/// `ptr` must be NULL or a live handle of type `T` made by this library.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, arg: &str) -> Res<&'a T> {
    // SAFETY: `ptr` is NULL or valid for reads (the caller's contract).
    unsafe { ptr.as_ref() }.ok_or_else(|| Fail::null(arg))
}

/// # Safety
/// As [`handle`], and no other reference to the object may be live.
pub(crate) unsafe fn handle_mut<'a, T>(ptr: *mut T, arg: &str) -> Res<&'a mut T> {
    // SAFETY: `ptr` is NULL or valid for writes (the caller's contract).
    unsafe { ptr.as_mut() }.ok_or_else(|| Fail::null(arg))
}

/// # Safety
/// `ptr` must be NULL or valid for writing a `T`.
pub(crate) unsafe fn out<'a, T>(ptr: *mut T, arg: &str) -> Res<&'a mut T> {
    // SAFETY: `ptr` is NULL or valid for writes (the caller's contract).
    unsafe { ptr.as_mut() }.ok_or_else(|| Fail::null(arg))
}

/// A type's `ATC_TYPE_*` code.
pub fn type_code(ty: Type) -> i32 {
    match ty {
        Type::String => ATC_TYPE_STRING,
        Type::Int => ATC_TYPE_INT,
        Type::IpAddr => ATC_TYPE_IPADDR,
        Type::IpCidr => ATC_TYPE_IPCIDR,
    }
}

pub(crate) fn type_from_code(code: i32) -> Res<Type> {
    Ok(match code {
        ATC_TYPE_STRING => Type::String,
        ATC_TYPE_INT => Type::Int,
        ATC_TYPE_IPADDR => Type::IpAddr,
        ATC_TYPE_IPCIDR => Type::IpCidr,
        _ => {
            return Err(Fail::new(
                ATC_ERR_INVALID,
                format_args!(
                    "{code} is not a field type code (expected ATC_TYPE_STRING, ATC_TYPE_INT, \
                     ATC_TYPE_IPADDR or ATC_TYPE_IPCIDR)"
                ),
            ))
        }
    })
}

/// Text into a caller buffer, without a NUL (`*len`: capacity in, bytes out): `ATC_ERR_BUFFER`
/// with the length needed in `*len` (nothing written) when it does not fit.
///
/// # Safety
/// `buf` must point to `*len` writable bytes (it may be NULL when the text is empty).
pub(crate) unsafe fn write_text(text: &str, buf: *mut c_char, len: *mut usize) -> Res<()> {
    // SAFETY: `len` is NULL or valid for writes (the caller's contract).
    let cap = unsafe { out(len, "buf_len") }?;
    let n = text.len();
    if n > *cap {
        let had = std::mem::replace(cap, n);
        return Err(Fail::new(
            ATC_ERR_BUFFER,
            format_args!("the buffer holds {had} bytes; {n} are needed"),
        ));
    }
    if n > 0 {
        if buf.is_null() {
            return Err(Fail::null("buf"));
        }
        // SAFETY: `buf` has room for `n <= *cap` bytes; our string does not overlap it.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n) };
    }
    *cap = n;
    Ok(())
}

/// Names joined by NUL terminators into a caller buffer (`*len`: capacity in, bytes out).
///
/// # Safety
/// `buf` must point to `*len` writable bytes (it may be NULL when `*len` is 0).
pub(crate) unsafe fn write_names(
    names: &[String],
    buf: *mut c_char,
    len: *mut usize,
    count: *mut usize,
) -> Res<i32> {
    // SAFETY: `len` is NULL or valid for writes (the caller's contract).
    let len = unsafe { out(len, "buf_len") }?;
    let needed: usize = names.iter().map(|n| n.len() + 1).sum();
    if !count.is_null() {
        // SAFETY: `count` is non-NULL (checked above) and writable (the caller's contract).
        unsafe { *count = names.len() };
    }
    if *len < needed {
        let cap = std::mem::replace(len, needed);
        return Err(Fail::new(
            ATC_ERR_BUFFER,
            format_args!("the buffer holds {cap} bytes; {needed} are needed"),
        ));
    }
    if needed > 0 && buf.is_null() {
        return Err(Fail::null("buf"));
    }
    let mut at = 0;
    for n in names {
        // SAFETY: the destination is the caller's buffer, with room for the bytes copied (checked
        // above), and the source is our own memory: they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(n.as_ptr(), buf.add(at).cast::<u8>(), n.len()) };
        at += n.len();
        // SAFETY: the offset stays within the caller's buffer, whose capacity bounds it (checked
        // above).
        unsafe { *buf.add(at) = 0 };
        at += 1;
    }
    *len = needed;
    Ok(ATC_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(cap: usize, msg: &str) -> (String, usize) {
        let mut buf = vec![0x55 as c_char; cap];
        let mut len = cap;
        unsafe { write_error(buf.as_mut_ptr(), &mut len, msg) };
        if cap > 0 {
            assert_eq!(buf[len], 0, "NUL after the message");
        }
        let bytes: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
        (String::from_utf8(bytes).unwrap(), len)
    }

    #[test]
    fn error_truncation_never_splits_a_character() {
        assert_eq!(err(0, "abc"), (String::new(), 0));
        assert_eq!(err(1, "abc"), (String::new(), 0));
        assert_eq!(err(3, "abc"), ("ab".into(), 2));
        assert_eq!(err(4, "abc"), ("abc".into(), 3));
        assert_eq!(err(100, "abc"), ("abc".into(), 3));
        // "é" is 2 bytes, "€" 3: every cut lands on a boundary.
        let m = "aé€b";
        for cap in 0..10 {
            let (s, n) = err(cap, m);
            assert!(m.starts_with(&s));
            assert!(n < cap.max(1));
        }
        assert_eq!(err(3, m).0, "a");
        assert_eq!(err(4, m).0, "aé");
        assert_eq!(err(6, m).0, "aé");
        assert_eq!(err(7, m).0, "aé€");
    }

    #[test]
    fn null_error_buffers_are_fine() {
        unsafe {
            write_error(std::ptr::null_mut(), std::ptr::null_mut(), "x");
            let mut len = 5;
            write_error(std::ptr::null_mut(), &mut len, "x");
            assert_eq!(len, 5);
        }
    }

    #[test]
    fn panics_become_status_codes() {
        let mut buf = [0 as c_char; 64];
        let mut len = buf.len();
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let code = guard(buf.as_mut_ptr(), &mut len, || panic!("boom {}", 1));
        let p: *mut c_char = guard_ptr(buf.as_mut_ptr(), &mut len, || panic!("again"));
        std::panic::set_hook(prev);
        assert_eq!(code, ATC_ERR_PANIC);
        assert!(p.is_null());
        let text: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
        assert_eq!(text, b"internal error: again");
    }

    #[test]
    fn every_status_has_a_description() {
        for code in ATC_ERR_ROUTES..=ATC_OK {
            let s = unsafe { std::ffi::CStr::from_ptr(atc_strerror(code)) };
            assert_ne!(s.to_str().unwrap(), "unknown status code", "{code}");
        }
        let s = unsafe { std::ffi::CStr::from_ptr(atc_strerror(42)) };
        assert_eq!(s.to_str().unwrap(), "unknown status code");
    }
}
