//! Context handles: a request's values, and the result of the last execute.
//!
//! The request path is allocation-free once a context has served a request of the same shape:
//! fields are addressed by ids resolved once ([`atc_context_field_id`]), strings are copied into
//! buffers the context keeps across [`atc_context_reset`], and results are read as pointers into
//! the context (non-string matched values are formatted into a scratch buffer it also keeps).
//!
//! Invariant: pointers handed out by [`atc_context_result`] and [`atc_context_captures`] point
//! into `ctx` or `scratch` and stay valid until the next call that takes the context mutably
//! (add, reset, execute, result, free).

use std::fmt::Write as _;

use atc_router::error::excerpt;
use atc_router::{CaptureKey, Context, FieldId, IdState, MatchedValue, Type, Value};

use crate::schema::AtcSchema;
use std::ffi::c_char;

use crate::{
    guard, guard_ptr, guard_status, handle, handle_mut, out, str_arg, type_code, type_from_code,
    Fail, Res, ATC_ERR_BUFFER, ATC_ERR_INVALID, ATC_ERR_TYPE, ATC_ERR_UNKNOWN_FIELD, ATC_OK,
    ATC_TYPE_INT, ATC_TYPE_IPADDR, ATC_TYPE_IPCIDR, ATC_TYPE_NONE, ATC_TYPE_STRING, ATC_UUID_LEN,
};

/// A request context. Opaque.
pub struct AtcContext {
    pub(crate) ctx: Context,
    scratch: String,
    /// The path `atc_context_add_path` normalises a request URI into, kept for the next.
    pub(crate) path: Vec<u8>,
}

/// One value of a batch (`atc_context_add_values`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AtcValue {
    /// A field id from `atc_context_field_id`.
    pub field: u32,
    /// The `ATC_TYPE_*` code of the value; it must be the field's type.
    pub value_type: i32,
    /// The value of an `ATC_TYPE_INT`.
    pub int_value: i64,
    /// The bytes of an `ATC_TYPE_STRING` (UTF-8), or the text of an `ATC_TYPE_IPADDR`
    /// (`192.0.2.1`, `2001:db8::1`) or `ATC_TYPE_IPCIDR` (`10.0.0.0/8`).
    pub ptr: *const c_char,
    pub len: usize,
}

/// A matched value, as read by `atc_context_result`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AtcMatched {
    /// `ATC_TYPE_NONE` when the field recorded no value, else the value's `ATC_TYPE_*`.
    pub value_type: i32,
    /// The value of an `ATC_TYPE_INT`.
    pub int_value: i64,
    /// The value as text (not NUL-terminated): the string itself, or the integer, address or
    /// CIDR written out. Points into the context.
    pub ptr: *const c_char,
    pub len: usize,
}

/// A regex capture, as read by `atc_context_captures`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AtcCapture {
    /// The group number (0 is the whole match), or -1 for a named group.
    pub index: i64,
    /// The group name when `index` is -1 (not NUL-terminated), else NULL.
    pub name: *const c_char,
    pub name_len: usize,
    /// The captured text (not NUL-terminated). Points into the context.
    pub value: *const c_char,
    pub value_len: usize,
}

impl AtcContext {
    /// The type values under `field` must have: `Some` for a field in use or a name no route
    /// uses (its values are checked, then ignored), `None` for the id of a name routes no
    /// longer use (its values are ignored unchecked: the type is gone with the name).
    fn field_type(&self, field: u32) -> Res<Option<Type>> {
        match self.ctx.id_state(FieldId::from_raw(field)) {
            IdState::Live(t) | IdState::Unused(t) => Ok(Some(t)),
            IdState::Released => Ok(None),
            IdState::Unknown => Err(Fail::new(
                ATC_ERR_UNKNOWN_FIELD,
                format_args!("{field} is not a field id of this context's schema"),
            )),
        }
    }

    /// Checks that values of type `want` may go under `field` (one of `want`'s types);
    /// `Ok(None)` when they are ignored unchecked.
    pub(crate) fn expect_type(&self, field: u32, want: &[Type], found: &str) -> Res<Option<Type>> {
        match self.field_type(field)? {
            Some(t) if want.contains(&t) => Ok(Some(t)),
            Some(_) => Err(self.type_error(field, found)),
            None => Ok(None),
        }
    }

    /// Adds a value given as text to a field of type `field_ty` (a String, or an address or
    /// CIDR to parse: the core's one reading of values from text, `Value::from_text`).
    fn add_text_as(&mut self, field: u32, field_ty: Type, text: &str) -> Res<()> {
        let id = FieldId::from_raw(field);
        match field_ty {
            // Copied into the context's own buffers: no allocation once they have grown.
            Type::String => Ok(self.ctx.add_str(id, text)?),
            // Integers come as integers (`atc_context_add_int`), never as text.
            Type::Int => Err(self.type_error(field, "a text")),
            Type::IpAddr | Type::IpCidr => {
                let value =
                    Value::from_text(field_ty, text).map_err(|e| Fail::new(ATC_ERR_INVALID, e))?;
                Ok(self.ctx.add_value_by_id(id, value)?)
            }
        }
    }

    fn type_error(&self, field: u32, found: &str) -> Fail {
        let id = FieldId::from_raw(field);
        let (name, ty) = match (self.ctx.schema().field(id), id.unused_type()) {
            (Some((name, ty)), _) => (excerpt(&name), ty),
            (None, Some(ty)) => ("(a field no route uses)".to_owned(), ty),
            (None, None) => (format!("#{field}"), Type::String),
        };
        Fail::new(
            ATC_ERR_TYPE,
            format_args!("field `{name}` holds {ty} values, but {found} value was given"),
        )
    }

    /// # Safety
    /// `v.ptr` points to `v.len` bytes (or is NULL with length 0).
    unsafe fn add(&mut self, v: &AtcValue) -> Res<()> {
        let ty = type_from_code(v.value_type)?;
        let Some(field_ty) = self.field_type(v.field)? else {
            return Ok(());
        };
        if ty != field_ty {
            return Err(self.type_error(v.field, &format!("a {ty}")));
        }
        match ty {
            Type::Int => Ok(self
                .ctx
                .add_value_by_id(FieldId::from_raw(v.field), Value::Int(v.int_value))?),
            // SAFETY: `v.ptr` is NULL or points to `v.len` readable bytes (the caller's contract).
            _ => self.add_text_as(v.field, ty, unsafe { str_arg(v.ptr, v.len, "value") }?),
        }
    }
}

/// A new, empty context over `schema`, which from now on accepts no more fields. NULL when
/// `schema` is NULL (message in `errbuf`). Free it with `atc_context_free`.
///
/// # Safety
/// `schema` is NULL or a live handle; `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_context_new(
    schema: *const AtcSchema,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> *mut AtcContext {
    guard_ptr(errbuf, errbuf_len, || {
        // SAFETY: `schema` is NULL or a live handle (the caller's contract).
        let schema = unsafe { handle(schema, "schema") }?.share();
        Ok(Box::into_raw(Box::new(AtcContext {
            ctx: Context::new(schema),
            scratch: String::new(),
            path: Vec::new(),
        })))
    })
}

/// Frees a context (NULL is ignored).
///
/// # Safety
/// `context` must be NULL or a handle from `atc_context_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn atc_context_free(context: *mut AtcContext) {
    if !context.is_null() {
        guard_status(|| {
            // SAFETY: `context` came from Box::into_raw in this library and is freed once (the
            // caller's contract).
            drop(unsafe { Box::from_raw(context) });
            Ok(ATC_OK)
        });
    }
}

/// Forgets the values and the result, keeping the buffers for the next request.
///
/// # Safety
/// `context` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn atc_context_reset(context: *mut AtcContext) -> i32 {
    guard_status(|| {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        unsafe { handle_mut(context, "context") }?.ctx.reset();
        Ok(ATC_OK)
    })
}

/// Resolves a field name (exact, or through a `prefix.*` wildcard) to the small integer the
/// add functions take, and its `ATC_TYPE_*` code (`field_type` may be NULL). Ids stay valid for
/// every context and router of the same schema handle, so resolve once and reuse.
///
/// # Safety
/// `context` is a live handle; `name` points to `name_len` bytes; `field_id` is writable;
/// `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_context_field_id(
    context: *const AtcContext,
    name: *const c_char,
    name_len: usize,
    field_id: *mut u32,
    field_type: *mut i32,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `context` is NULL or a live handle (the caller's contract).
        let c = unsafe { handle(context, "context") }?;
        // SAFETY: `name` is NULL or points to `name_len` readable bytes (the caller's contract).
        let name = unsafe { str_arg(name, name_len, "name") }?;
        // SAFETY: `field_id` is NULL or valid for writes (the caller's contract).
        let id_out = unsafe { out(field_id, "field_id") }?;
        let (id, ty) = c.ctx.schema().resolve(name)?;
        *id_out = id.to_raw();
        if !field_type.is_null() {
            // SAFETY: `field_type` is non-NULL (checked above) and writable (the caller's
            // contract).
            unsafe { *field_type = type_code(ty) };
        }
        Ok(ATC_OK)
    })
}

/// Appends a String value (UTF-8 bytes) to a field; a field may hold several values (a header
/// that repeats). `ATC_ERR_TYPE` when the field is not a String field.
///
/// # Safety
/// `context` is a live handle; `value` points to `value_len` bytes; `errbuf` points to
/// `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_context_add_str(
    context: *mut AtcContext,
    field: u32,
    value: *const c_char,
    value_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        // SAFETY: `value` is NULL or points to `value_len` readable bytes (the caller's contract).
        let value = unsafe { str_arg(value, value_len, "value") }?;
        if c.expect_type(field, &[Type::String], "a String")?.is_some() {
            c.ctx.add_str(FieldId::from_raw(field), value)?;
        }
        Ok(ATC_OK)
    })
}

/// Appends an Int value to a field. `ATC_ERR_TYPE` when the field is not an Int field.
///
/// # Safety
/// `context` is a live handle; `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_context_add_int(
    context: *mut AtcContext,
    field: u32,
    value: i64,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        if c.expect_type(field, &[Type::Int], "an Int")?.is_some() {
            c.ctx
                .add_value_by_id(FieldId::from_raw(field), Value::Int(value))?;
        }
        Ok(ATC_OK)
    })
}

/// Appends an address (`192.0.2.1`, `2001:db8::1`) to an IpAddr field, or a CIDR
/// (`10.0.0.0/8`) to an IpCidr field, given as text. `ATC_ERR_INVALID` for text that does not
/// parse, `ATC_ERR_TYPE` for a field of another type.
///
/// # Safety
/// As `atc_context_add_str`.
#[no_mangle]
pub unsafe extern "C" fn atc_context_add_ip(
    context: *mut AtcContext,
    field: u32,
    value: *const c_char,
    value_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        // SAFETY: `value` is NULL or points to `value_len` readable bytes (the caller's contract).
        let value = unsafe { str_arg(value, value_len, "value") }?;
        if let Some(ty) = c.expect_type(field, &[Type::IpAddr, Type::IpCidr], "an IP")? {
            c.add_text_as(field, ty, value)?;
        }
        Ok(ATC_OK)
    })
}

/// Appends `n` values in one call, in order. On failure `*failed` (may be NULL) receives the
/// index of the value that failed; the values before it were added and the rest were not (reset
/// the context to drop a partial request).
///
/// # Safety
/// `context` is a live handle; `values` points to `n` values (may be NULL when `n` is 0), each
/// string pointer to its length; `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_context_add_values(
    context: *mut AtcContext,
    values: *const AtcValue,
    n: usize,
    failed: *mut usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        if n == 0 {
            return Ok(ATC_OK);
        }
        if values.is_null() {
            return Err(Fail::null("values"));
        }
        // SAFETY: `values` is non-NULL here and points to that many elements (the caller's
        // contract).
        for (i, v) in unsafe { std::slice::from_raw_parts(values, n) }
            .iter()
            .enumerate()
        {
            // SAFETY: `v`'s pointer is valid for its length (the caller's contract for `values`).
            if let Err(mut e) = unsafe { c.add(v) } {
                if !failed.is_null() {
                    // SAFETY: `failed` is non-NULL (checked above) and writable (the caller's
                    // contract).
                    unsafe { *failed = i };
                }
                e.msg = format!("value {i}: {}", e.msg);
                return Err(e);
            }
        }
        Ok(ATC_OK)
    })
}

/// Reads the result of the last execute: returns 1 and fills the outputs when a route matched,
/// 0 when none did (outputs untouched). Every output may be NULL when not wanted:
/// - `uuid`: the route id in hyphenated lowercase text, `ATC_UUID_LEN` bytes, not
///   NUL-terminated (`*uuid_len`: capacity in, bytes written out; `ATC_ERR_BUFFER` with 36 in
///   `*uuid_len` when smaller);
/// - `matched`: the value recorded for the field whose id is `*matched_field` (no field when
///   `matched_field` is NULL; `value_type` is `ATC_TYPE_NONE` when it recorded none);
/// - `captures_n`: the number of captures, to read with `atc_context_captures`.
///
/// # Safety
/// `context` is a live handle; every non-NULL pointer is valid as described.
#[no_mangle]
pub unsafe extern "C" fn atc_context_result(
    context: *mut AtcContext,
    matched_field: *const u32,
    uuid: *mut c_char,
    uuid_len: *mut usize,
    matched: *mut AtcMatched,
    captures_n: *mut usize,
) -> i32 {
    guard_status(|| {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        let Some(m) = c.ctx.result() else {
            return Ok(0);
        };
        if !uuid.is_null() {
            // SAFETY: `uuid_len` is NULL or valid for writes (the caller's contract).
            let len = unsafe { out(uuid_len, "uuid_len") }?;
            if *len < ATC_UUID_LEN {
                *len = ATC_UUID_LEN;
                return Err(Fail::new(ATC_ERR_BUFFER, ""));
            }
            // SAFETY: `uuid` is non-NULL and holds at least ATC_UUID_LEN bytes (`*uuid_len`,
            // checked above).
            let buf = unsafe { std::slice::from_raw_parts_mut(uuid.cast::<u8>(), ATC_UUID_LEN) };
            m.id().hyphenated().encode_lower(buf);
            *len = ATC_UUID_LEN;
        }
        if !matched.is_null() {
            // SAFETY: `matched_field` is NULL or valid for reads (the caller's contract).
            let value = match unsafe { matched_field.as_ref() } {
                Some(f) => m.matched_value_by_id(FieldId::from_raw(*f)),
                None => None,
            };
            let scratch = &mut c.scratch;
            scratch.clear();
            let (value_type, int_value, text): (i32, i64, &str) = match value {
                None => (ATC_TYPE_NONE, 0, ""),
                Some(MatchedValue::String(s)) => (ATC_TYPE_STRING, 0, s),
                Some(MatchedValue::Int(i)) => {
                    let _ = write!(scratch, "{i}");
                    (ATC_TYPE_INT, i, scratch)
                }
                Some(v @ MatchedValue::IpAddr(_)) => {
                    let _ = write!(scratch, "{v}");
                    (ATC_TYPE_IPADDR, 0, scratch)
                }
                Some(v @ MatchedValue::IpCidr(_)) => {
                    let _ = write!(scratch, "{v}");
                    (ATC_TYPE_IPCIDR, 0, scratch)
                }
            };
            // SAFETY: `matched` is non-NULL (checked above) and writable (the caller's contract).
            unsafe {
                *matched = AtcMatched {
                    value_type,
                    int_value,
                    ptr: text.as_ptr().cast(),
                    len: text.len(),
                }
            };
        }
        if !captures_n.is_null() {
            // SAFETY: `captures_n` is non-NULL (checked above) and writable (the caller's
            // contract).
            unsafe { *captures_n = m.captures().count() };
        }
        Ok(1)
    })
}

/// Value `index` (from 0, in the order they were added) of field `field` in the context: returns
/// 1 and fills `*value` as `atc_context_result` fills a matched value (text pointing into the
/// context, valid until the next call that takes the context mutably or reads another value),
/// 0 when the field has fewer values (a field no route uses keeps none). For a gateway's
/// diagnostics and tests: what a request was read as.
///
/// # Safety
/// `context` is a live handle; `value` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_context_value(
    context: *mut AtcContext,
    field: u32,
    index: usize,
    value: *mut AtcMatched,
) -> i32 {
    guard_status(|| {
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        // SAFETY: `value` is NULL or valid for writes (the caller's contract).
        let value = unsafe { out(value, "value") }?;
        c.field_type(field)?;
        let Some(v) = c.ctx.values_by_id(FieldId::from_raw(field)).get(index) else {
            return Ok(0);
        };
        let scratch = &mut c.scratch;
        scratch.clear();
        let (value_type, int_value, text): (i32, i64, &str) = match v {
            Value::String(s) => (ATC_TYPE_STRING, 0, s),
            Value::Int(i) => {
                let _ = write!(scratch, "{i}");
                (ATC_TYPE_INT, *i, scratch)
            }
            Value::IpAddr(a) => {
                let _ = write!(scratch, "{a}");
                (ATC_TYPE_IPADDR, 0, scratch)
            }
            Value::IpCidr(n) => {
                let _ = write!(scratch, "{n}");
                (ATC_TYPE_IPCIDR, 0, scratch)
            }
        };
        *value = AtcMatched {
            value_type,
            int_value,
            ptr: text.as_ptr().cast(),
            len: text.len(),
        };
        Ok(1)
    })
}

/// The captures of the last execute's result, in the order they were recorded (a key may
/// repeat; the last one wins). `*n`: capacity of `captures` in, number of captures out;
/// `ATC_ERR_BUFFER` (nothing written) when `out` is too small. No result means no captures.
///
/// # Safety
/// `context` is a live handle; `captures` points to `*n` elements (may be NULL when `*n` is 0).
#[no_mangle]
pub unsafe extern "C" fn atc_context_captures(
    context: *const AtcContext,
    captures: *mut AtcCapture,
    n: *mut usize,
) -> i32 {
    guard_status(|| {
        // SAFETY: `context` is NULL or a live handle (the caller's contract).
        let c = unsafe { handle(context, "context") }?;
        // SAFETY: `n` is NULL or valid for writes (the caller's contract).
        let n = unsafe { out(n, "n") }?;
        let Some(m) = c.ctx.result() else {
            *n = 0;
            return Ok(ATC_OK);
        };
        let count = m.captures().count();
        if *n < count {
            *n = count;
            return Err(Fail::new(ATC_ERR_BUFFER, ""));
        }
        if count > 0 && captures.is_null() {
            return Err(Fail::null("captures"));
        }
        for (i, (key, value)) in m.captures().enumerate() {
            let (index, name): (i64, &str) = match key {
                CaptureKey::Index(i) => (i64::try_from(i).unwrap_or(i64::MAX), ""),
                CaptureKey::Name(name) => (-1, name),
            };
            // SAFETY: the offset stays within the caller's buffer, whose capacity bounds it
            // (checked above).
            unsafe {
                *captures.add(i) = AtcCapture {
                    index,
                    name: if index < 0 {
                        name.as_ptr().cast()
                    } else {
                        std::ptr::null()
                    },
                    name_len: name.len(),
                    value: value.as_ptr().cast(),
                    value_len: value.len(),
                }
            };
        }
        *n = count;
        Ok(ATC_OK)
    })
}
