//! Kong's request fields through the C ABI: the field lists of its subsystems, the path a
//! request URI is routed on with the fields derived from it, and the host without its port.
//! The rules are the core's (`atc_router::request`); these calls only carry them, so that a
//! gateway in another language never splits or normalises a path itself.

use std::ffi::c_char;

use atc_router::request::{self, PathField, HTTP_FIELDS, STREAM_FIELDS};
use atc_router::{FieldId, Type};

use crate::{bytes_arg, guard, guard_status, handle_mut, out, str_arg, type_code, Fail, Res};
use crate::{ATC_ERR_INVALID, ATC_ERR_UTF8, ATC_OK};

/// Kong's HTTP subsystem (`atc_kong_field`).
pub const ATC_SUBSYSTEM_HTTP: i32 = 1;
/// Kong's stream subsystem (`atc_kong_field`).
pub const ATC_SUBSYSTEM_STREAM: i32 = 2;

/// `http.path` (`atc_path_field.kind`).
pub const ATC_PATH_FIELD_PATH: i32 = 1;
/// `http.path.segments.len`, an Int.
pub const ATC_PATH_FIELD_LEN: i32 = 2;
/// `http.path.segments.N`: `from` is N.
pub const ATC_PATH_FIELD_SEGMENT: i32 = 3;
/// `http.path.segments.N_M`: `from` is N, `to` is M.
pub const ATC_PATH_FIELD_RANGE: i32 = 4;

/// `atc_context_add_path`: the text is a request URI as the client sent it (`$request_uri`):
/// its arguments are dropped and it is normalised as Kong does. Without it the text is the path
/// itself, used as it is.
pub const ATC_PATH_NORMALIZE: u32 = 1;

/// A field derived from the path, for `atc_context_add_path`: its id (`atc_context_field_id`),
/// and what it is (`atc_path_field_parse` fills `kind`, `from` and `to` from its name).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct AtcPathField {
    pub field: u32,
    /// One of `ATC_PATH_FIELD_*`.
    pub kind: i32,
    /// The segment (`ATC_PATH_FIELD_SEGMENT`) or the first of a range; numbers past
    /// `UINT32_MAX` are `UINT32_MAX` (no path has that many segments).
    pub from: u32,
    /// The last segment of a range.
    pub to: u32,
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn from_c(f: &AtcPathField) -> Res<(FieldId, PathField)> {
    let field = match f.kind {
        ATC_PATH_FIELD_PATH => PathField::Path,
        ATC_PATH_FIELD_LEN => PathField::Len,
        ATC_PATH_FIELD_SEGMENT => PathField::Segment(f.from as usize),
        ATC_PATH_FIELD_RANGE => PathField::Range(f.from as usize, f.to as usize),
        k => {
            return Err(Fail::new(
                ATC_ERR_INVALID,
                format_args!("{k} is not an ATC_PATH_FIELD_* kind"),
            ))
        }
    };
    Ok((FieldId::from_raw(f.field), field))
}

/// Field `index` (from 0) of Kong's `subsystem` (`ATC_SUBSYSTEM_HTTP` or `_STREAM`): its name
/// (static text, not NUL-terminated: `*name`, `*name_len`) and `ATC_TYPE_*` code (`field_type`
/// may be NULL). Returns 1 when there is such a field, 0 past the last one, `ATC_ERR_INVALID`
/// for another subsystem, `ATC_ERR_NULL` for a NULL `name` or `name_len`. Wildcards are
/// listed as declared (`http.headers.*`).
///
/// # Safety
/// `name` and `name_len` are writable (or NULL); `field_type` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn atc_kong_field(
    subsystem: i32,
    index: usize,
    name: *mut *const c_char,
    name_len: *mut usize,
    field_type: *mut i32,
) -> i32 {
    guard_status(|| {
        let fields = match subsystem {
            ATC_SUBSYSTEM_HTTP => HTTP_FIELDS,
            ATC_SUBSYSTEM_STREAM => STREAM_FIELDS,
            s => {
                return Err(Fail::new(
                    ATC_ERR_INVALID,
                    format_args!("{s} is not an ATC_SUBSYSTEM_* code"),
                ))
            }
        };
        // SAFETY: `name` is NULL or valid for writes (the caller's contract).
        let name = unsafe { out(name, "name") }?;
        // SAFETY: `name_len` is NULL or valid for writes (the caller's contract).
        let name_len = unsafe { out(name_len, "name_len") }?;
        let Some((text, ty)) = fields.get(index) else {
            return Ok(0);
        };
        *name = text.as_ptr().cast();
        *name_len = text.len();
        if !field_type.is_null() {
            // SAFETY: `field_type` is non-NULL (checked above) and writable (the caller's
            // contract).
            unsafe { *field_type = type_code(*ty) };
        }
        Ok(1)
    })
}

/// What a field name is to the path: returns 1 and fills `kind`, `from` and `to` of `*field`
/// (not its id) when `name` is `http.path`, `http.path.segments.len`, `.N` or `.N_M` (decimal
/// numbers), 0 for any other name (`*field` untouched), `ATC_ERR_NULL` / `ATC_ERR_UTF8` for
/// bad arguments.
///
/// # Safety
/// `name` points to `name_len` bytes; `field` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_path_field_parse(
    name: *const c_char,
    name_len: usize,
    field: *mut AtcPathField,
) -> i32 {
    guard_status(|| {
        // SAFETY: `name` is NULL or points to `name_len` readable bytes (the caller's contract).
        let name = unsafe { str_arg(name, name_len, "name") }?;
        // SAFETY: `field` is NULL or valid for writes (the caller's contract).
        let field = unsafe { out(field, "field") }?;
        let Some(kind) = PathField::of(name) else {
            return Ok(0);
        };
        (field.kind, field.from, field.to) = match kind {
            PathField::Path => (ATC_PATH_FIELD_PATH, 0, 0),
            PathField::Len => (ATC_PATH_FIELD_LEN, 0, 0),
            PathField::Segment(n) => (ATC_PATH_FIELD_SEGMENT, to_u32(n), 0),
            PathField::Range(a, b) => (ATC_PATH_FIELD_RANGE, to_u32(a), to_u32(b)),
        };
        Ok(1)
    })
}

/// Adds to the context the values of the `n` path fields `fields` (each with its id), derived
/// from `path`: with `ATC_PATH_NORMALIZE` in `flags`, `path` is a request URI and the path is
/// what Kong routes it on (arguments dropped, reserved characters kept encoded, others decoded,
/// dot segments removed, slashes merged); without, it is the path as it is. A segment or range
/// the path does not have gets no value. `ATC_ERR_UTF8` when the path is not UTF-8 (decoding
/// can make bytes that are not: `%FF`), `ATC_ERR_TYPE` / `ATC_ERR_UNKNOWN_FIELD` for an id
/// that is not a String field (an Int one for `ATC_PATH_FIELD_LEN`) of the context's schema,
/// `ATC_ERR_INVALID` for an unknown kind or flag; the values of the fields before the one that
/// failed were added (reset the context to drop a partial request). No allocation once the
/// context's buffers have grown.
///
/// # Safety
/// `context` is a live handle; `path` points to `path_len` bytes; `fields` points to `n`
/// entries (may be NULL when `n` is 0); `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_context_add_path(
    context: *mut crate::AtcContext,
    path: *const c_char,
    path_len: usize,
    flags: u32,
    fields: *const AtcPathField,
    n: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        // SAFETY: `path` is NULL or points to `path_len` readable bytes (the caller's contract).
        let raw = unsafe { bytes_arg(path, path_len, "path") }?;
        if flags & !ATC_PATH_NORMALIZE != 0 {
            return Err(Fail::new(
                ATC_ERR_INVALID,
                format_args!("unknown flags {:#x}", flags & !ATC_PATH_NORMALIZE),
            ));
        }
        let fields: &[AtcPathField] = match n {
            0 => &[],
            _ if fields.is_null() => return Err(Fail::null("fields")),
            // SAFETY: `fields` is non-NULL here and points to that many elements (the caller's
            // contract).
            _ => unsafe { std::slice::from_raw_parts(fields, n) },
        };
        for f in fields {
            let (_, kind) = from_c(f)?;
            // Unknown ids and types are refused here, before any value is added.
            match kind {
                PathField::Len => c.expect_type(f.field, &[Type::Int], "an Int")?,
                _ => c.expect_type(f.field, &[Type::String], "a String")?,
            };
        }
        let mut buf = std::mem::take(&mut c.path);
        let text = if flags & ATC_PATH_NORMALIZE != 0 {
            request::request_path(raw, &mut buf);
            &buf[..]
        } else {
            raw
        };
        let result = match std::str::from_utf8(text) {
            Ok(text) => c
                .ctx
                .add_path(text, fields.iter().filter_map(|f| from_c(f).ok()))
                .map_err(Fail::from),
            Err(e) => Err(Fail::new(
                ATC_ERR_UTF8,
                format_args!("the path is not valid UTF-8: {e}"),
            )),
        };
        c.path = buf;
        result.map(|()| ATC_OK)
    })
}

/// The host of a Host header value, as Kong reads it: `*host_len` gets the length of the host
/// (a prefix of `value`: the text before the first `:` when a number follows it, else all of
/// it; not lower-cased). Returns 1 and writes the port to `*port` (may be NULL) when there is
/// one, 0 when there is none, `ATC_ERR_NULL` / `ATC_ERR_UTF8` for bad arguments.
///
/// # Safety
/// `value` points to `value_len` bytes; `host_len` is writable; `port` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn atc_http_host(
    value: *const c_char,
    value_len: usize,
    host_len: *mut usize,
    port: *mut i64,
) -> i32 {
    guard_status(|| {
        // SAFETY: `value` is NULL or points to `value_len` readable bytes (the caller's contract).
        let value = unsafe { str_arg(value, value_len, "value") }?;
        // SAFETY: `host_len` is NULL or valid for writes (the caller's contract).
        let host_len = unsafe { out(host_len, "host_len") }?;
        let (host, p) = request::split_host_port(value);
        *host_len = host.len();
        match p {
            Some(p) => {
                if !port.is_null() {
                    // SAFETY: `port` is non-NULL (checked above) and writable (the caller's
                    // contract).
                    unsafe { *port = p };
                }
                Ok(1)
            }
            None => Ok(0),
        }
    })
}
