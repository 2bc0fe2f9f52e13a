//! Schema handles.
//!
//! Invariant: a handle is *building* until the first router or context is made from it, and
//! *shared* from then on. Only a building schema accepts fields and limits: field ids must not
//! change once a router or context has resolved names to them, and the limits a router or
//! context was made under are the ones it keeps (a router copies them when it is made). Every
//! router and context made from one handle holds the same `Arc<Schema>`, which is what makes
//! them work together (and what keeps the schema alive after the handle is freed).

use std::sync::{Arc, Mutex, MutexGuard};

use atc_router::{Limits, Router, Schema, Type};

use std::ffi::c_char;

use crate::{
    guard, guard_status, handle, out, str_arg, type_code, type_from_code, write_names, Fail, Res,
    ATC_ERR_INVALID, ATC_ERR_SCHEMA_SHARED, ATC_ERR_UNKNOWN_FIELD, ATC_LIMIT_MAX_DEPTH, ATC_OK,
};

/// A schema: field names and types. Opaque.
pub struct AtcSchema {
    state: Mutex<State>,
}

enum State {
    /// `fields` repeats what was added, so that a validation can run against a fresh copy: the
    /// core assigns ids to wildcard-derived names while validating, and an exact field added
    /// after that would get an id already in use.
    Building {
        schema: Box<Schema>,
        fields: Vec<(String, Type)>,
    },
    Shared(Arc<Schema>),
}

impl AtcSchema {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation of the state is a single assignment, so a poisoned lock still guards
        // a consistent value.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared schema, sharing it now if it was still building.
    pub(crate) fn share(&self) -> Arc<Schema> {
        let mut state = self.lock();
        let schema = match &mut *state {
            State::Shared(s) => return s.clone(),
            State::Building { schema, .. } => Arc::new(std::mem::take(&mut **schema)),
        };
        *state = State::Shared(schema.clone());
        schema
    }

    fn field_type(&self, name: &str) -> Option<Type> {
        match &*self.lock() {
            State::Building { schema, .. } => schema.field_type(name),
            State::Shared(s) => s.field_type(name),
        }
    }

    /// The limits routers, contexts and validations of this schema get.
    fn limits(&self) -> Limits {
        match &*self.lock() {
            State::Building { schema, .. } => *schema.limits(),
            State::Shared(s) => *s.limits(),
        }
    }

    pub(crate) fn validate(&self, expr: &str) -> Res<Vec<String>> {
        let shared = match &*self.lock() {
            State::Shared(s) => s.clone(),
            State::Building { schema, fields } => {
                // The copy has the limits too: a validation accepts what a router made from
                // this schema will accept.
                let mut copy = Schema::with_limits(*schema.limits());
                for (name, ty) in fields {
                    copy.add_field(name, *ty)?;
                }
                Arc::new(copy)
            }
        };
        // `Router::validate` checks against the schema's limits, which are this handle's.
        Ok(Router::validate(&shared, expr)?)
    }
}

/// The name (one of `Limits::NAMES`) and the field of `limits` an `ATC_LIMIT_*` code stands
/// for (the code is the name's position plus one); `ATC_ERR_INVALID` for any other code.
fn limit_slot(limits: &mut Limits, code: i32) -> Res<(&'static str, &mut usize)> {
    let name = usize::try_from(code)
        .ok()
        .and_then(|c| c.checked_sub(1))
        .and_then(|at| Limits::NAMES.get(at));
    match name.and_then(|&n| Some((n, limits.by_name_mut(n)?))) {
        Some(slot) => Ok(slot),
        None => Err(Fail::new(
            ATC_ERR_INVALID,
            format_args!(
                "{code} is not a limit code (expected 1 to {}: the ATC_LIMIT_* constants)",
                Limits::NAMES.len()
            ),
        )),
    }
}

/// A new, empty schema (NULL only if memory ran out in a way that panicked). Free it with
/// `atc_schema_free`.
#[no_mangle]
pub extern "C" fn atc_schema_new() -> *mut AtcSchema {
    crate::guard_ptr(std::ptr::null_mut(), std::ptr::null_mut(), || {
        Ok(Box::into_raw(Box::new(AtcSchema {
            state: Mutex::new(State::Building {
                schema: Box::default(),
                fields: Vec::new(),
            }),
        })))
    })
}

/// Frees a schema handle (NULL is ignored). Routers and contexts made from it keep working.
///
/// # Safety
/// `schema` must be NULL or a handle from `atc_schema_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn atc_schema_free(schema: *mut AtcSchema) {
    if !schema.is_null() {
        guard_status(|| {
            // SAFETY: `schema` came from Box::into_raw in this library and is freed once (the
            // caller's contract).
            drop(unsafe { Box::from_raw(schema) });
            Ok(ATC_OK)
        });
    }
}

/// Adds a field: `name` is an identifier (`http.host`) or a wildcard `prefix.*` standing for
/// one more dotted segment; `field_type` is an `ATC_TYPE_*` code. Fails with
/// `ATC_ERR_DUPLICATE` for a name already there, `ATC_ERR_INVALID` for a bad name or type code,
/// and `ATC_ERR_SCHEMA_SHARED` once a router or context was made from the schema.
///
/// # Safety
/// `schema` is a live handle; `name` points to `name_len` bytes; `errbuf` to `*errbuf_len`
/// bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_schema_add_field(
    schema: *mut AtcSchema,
    name: *const c_char,
    name_len: usize,
    field_type: i32,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `schema` is NULL or a live handle (the caller's contract).
        let schema = unsafe { handle(schema, "schema") }?;
        // SAFETY: `name` is NULL or points to `name_len` readable bytes (the caller's contract).
        let name = unsafe { str_arg(name, name_len, "name") }?;
        let ty = type_from_code(field_type)?;
        match &mut *schema.lock() {
            State::Shared(_) => Err(Fail::new(
                ATC_ERR_SCHEMA_SHARED,
                format_args!(
                    "cannot add field `{}`: the schema is already used by a router or a \
                     context (add every field before creating them)",
                    atc_router::error::excerpt(name)
                ),
            )),
            State::Building { schema, fields } => {
                schema.add_field(name, ty)?;
                fields.push((name.to_owned(), ty));
                Ok(ATC_OK)
            }
        }
    })
}

/// Sets one limit of the schema (`limit`: an `ATC_LIMIT_*` code) to `value`; routers,
/// contexts and `atc_router_validate` of this schema then check against it. SECURITY.md
/// describes each limit and its default, and suggests values for routes that tenants write.
///
/// Only while the schema is building, as for `atc_schema_add_field`: `ATC_ERR_SCHEMA_SHARED`
/// once a router or a context was made from it (they keep the limits they were made under).
/// `ATC_ERR_INVALID` for an unknown code or a `value` of 0 (it would refuse everything; a
/// limit has no "off" value). A `value` above `SIZE_MAX` (32-bit platforms) is clamped to
/// `SIZE_MAX`, which no input can reach; `ATC_LIMIT_MAX_DEPTH` above 256 is stored as 256, the
/// hard cap that keeps the parser within its stack (`atc_schema_get_limit` reads back 256).
/// Nothing changes on failure.
///
/// # Safety
/// `schema` is a live handle; `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_schema_set_limit(
    schema: *mut AtcSchema,
    limit: i32,
    value: u64,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `schema` is NULL or a live handle (the caller's contract).
        let schema = unsafe { handle(schema, "schema") }?;
        // Arguments first: a bad code or value is reported as such whatever the state.
        let (name, _) = limit_slot(&mut Limits::default(), limit)?;
        if value == 0 {
            return Err(Fail::new(
                ATC_ERR_INVALID,
                format_args!("limit `{name}` must be at least 1, got 0"),
            ));
        }
        let mut value = usize::try_from(value).unwrap_or(usize::MAX);
        if limit == ATC_LIMIT_MAX_DEPTH {
            value = value.min(Limits::HARD_MAX_DEPTH);
        }
        match &mut *schema.lock() {
            State::Shared(_) => Err(Fail::new(
                ATC_ERR_SCHEMA_SHARED,
                format_args!(
                    "cannot set limit `{name}`: the schema is already used by a router or a \
                     context (set limits before creating them)"
                ),
            )),
            State::Building { schema, .. } => {
                let mut limits = *schema.limits();
                *limit_slot(&mut limits, limit)?.1 = value;
                schema.set_limits(limits);
                Ok(ATC_OK)
            }
        }
    })
}

/// Stores the value of one limit of the schema (`limit`: an `ATC_LIMIT_*` code) in `*value`:
/// the default until `atc_schema_set_limit` changed it. `ATC_ERR_INVALID` for an unknown code.
///
/// # Safety
/// `schema` is a live handle; `value` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_schema_get_limit(
    schema: *const AtcSchema,
    limit: i32,
    value: *mut u64,
) -> i32 {
    guard_status(|| {
        // SAFETY: `schema` is NULL or a live handle (the caller's contract).
        let schema = unsafe { handle(schema, "schema") }?;
        // SAFETY: `value` is NULL or valid for writes (the caller's contract).
        let out = unsafe { out(value, "value") }?;
        let mut limits = schema.limits();
        let (_, slot) = limit_slot(&mut limits, limit)?;
        // usize is at most 64 bits on every platform Rust supports.
        *out = u64::try_from(*slot).unwrap_or(u64::MAX);
        Ok(ATC_OK)
    })
}

/// Stores the `ATC_TYPE_*` code of a field (exact or through a wildcard) in `*field_type`;
/// `ATC_ERR_UNKNOWN_FIELD` when the schema has no such field.
///
/// # Safety
/// `schema` is a live handle; `name` points to `name_len` bytes; `field_type` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_schema_field_type(
    schema: *const AtcSchema,
    name: *const c_char,
    name_len: usize,
    field_type: *mut i32,
) -> i32 {
    guard_status(|| {
        // SAFETY: `schema` is NULL or a live handle (the caller's contract).
        let schema = unsafe { handle(schema, "schema") }?;
        // SAFETY: `name` is NULL or points to `name_len` readable bytes (the caller's contract).
        let name = unsafe { str_arg(name, name_len, "name") }?;
        // SAFETY: `field_type` is NULL or valid for writes (the caller's contract).
        let out = unsafe { out(field_type, "field_type") }?;
        match schema.field_type(name) {
            Some(ty) => {
                *out = type_code(ty);
                Ok(ATC_OK)
            }
            None => Err(Fail::new(ATC_ERR_UNKNOWN_FIELD, "")),
        }
    })
}

/// Checks an expression against the schema without adding it anywhere. On success writes the
/// names of the fields it uses (in order of first use), each followed by a NUL, to `fields`
/// (`*fields_len`: capacity in, bytes written out; `*fields_count`: number of names, may be
/// NULL). `ATC_ERR_EXPR` with the positioned message in `errbuf` when the expression is
/// invalid; `ATC_ERR_BUFFER` with the size needed in `*fields_len` when `fields` is too small.
///
/// # Safety
/// Pointers as documented above; `fields` may be NULL when `*fields_len` is 0.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn atc_router_validate(
    schema: *const AtcSchema,
    expr: *const c_char,
    expr_len: usize,
    fields: *mut c_char,
    fields_len: *mut usize,
    fields_count: *mut usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `schema` is NULL or a live handle (the caller's contract).
        let schema = unsafe { handle(schema, "schema") }?;
        // SAFETY: `expr` is NULL or points to `expr_len` readable bytes (the caller's contract).
        let expr = unsafe { str_arg(expr, expr_len, "expr") }?;
        // SAFETY: `fields_len` is NULL or valid for writes (the caller's contract).
        unsafe { out(fields_len, "fields_len") }?;
        let names = schema.validate(expr)?;
        // SAFETY: `fields` is NULL or points to `*fields_len` writable bytes (the caller's
        // contract).
        unsafe { write_names(&names, fields, fields_len, fields_count) }
    })
}
