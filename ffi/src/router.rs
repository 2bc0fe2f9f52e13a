//! Router handles.
//!
//! Invariant: a router's schema is the `Arc<Schema>` its schema handle shared when the router
//! was made; only contexts holding that same `Arc` can be executed against it.

use atc_router::{BackgroundRouter, Router, TableRef};

use crate::context::AtcContext;
use crate::image::AtcImage;
use crate::schema::AtcSchema;
use std::ffi::c_char;

use crate::{
    bytes_arg, guard, guard_ptr, guard_status, handle, handle_mut, out, write_names, Fail, Res,
    ATC_ERR_NOT_FOUND, ATC_ERR_SCHEMA_MISMATCH, ATC_OK,
};

/// A router: routes in priority order over one schema, and the builder of its next tables
/// (the core's `BackgroundRouter`: `background.rs` converts its calls). Opaque.
pub struct AtcRouter {
    pub(crate) table: BackgroundRouter,
    /// The image the router routes from instead of its own table (`atc_router_attach_image`).
    pub(crate) mapped: Option<Box<AtcImage>>,
}

impl AtcRouter {
    /// The router's own table (not the image attached).
    pub(crate) fn router(&self) -> &Router {
        self.table.router()
    }

    /// The table the router's reads answer from: the attached image, else its own.
    pub(crate) fn table(&self) -> TableRef<'_> {
        match &self.mapped {
            Some(image) => TableRef::Mapped {
                image: image.table(),
                counts: self.router(),
            },
            None => TableRef::Built(self.router()),
        }
    }
}

/// A new router over `schema`, which from now on accepts no more fields. NULL when `schema` is
/// NULL (message in `errbuf`). Free it with `atc_router_free`.
///
/// # Safety
/// `schema` is NULL or a live handle; `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_router_new(
    schema: *const AtcSchema,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> *mut AtcRouter {
    guard_ptr(errbuf, errbuf_len, || {
        // SAFETY: `schema` is NULL or a live handle (the caller's contract).
        let schema = unsafe { handle(schema, "schema") }?.share();
        let mut table = BackgroundRouter::new(Router::new(schema));
        table.on_builder_made(crate::builder_settings::configure);
        Ok(Box::into_raw(Box::new(AtcRouter {
            table,
            mapped: None,
        })))
    })
}

/// Frees a router (NULL is ignored).
///
/// # Safety
/// `router` must be NULL or a handle from `atc_router_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn atc_router_free(router: *mut AtcRouter) {
    if !router.is_null() {
        guard_status(|| {
            // SAFETY: `router` came from Box::into_raw in this library and is freed once (the
            // caller's contract).
            drop(unsafe { Box::from_raw(router) });
            Ok(ATC_OK)
        });
    }
}

/// Parses, validates and adds a route. `id` is a UUID in text form (hyphenated, simple, braced
/// or URN). Higher priorities are tried first; equal priorities by id, higher first. Nothing
/// changes on failure: `ATC_ERR_UUID`, `ATC_ERR_DUPLICATE` (id in use), `ATC_ERR_EXPR`.
///
/// # Safety
/// `router` is a live handle; strings point to their lengths in bytes; `errbuf` to
/// `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_router_add(
    router: *mut AtcRouter,
    priority: u64,
    id: *const c_char,
    id_len: usize,
    expr: *const c_char,
    expr_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        // SAFETY: `id` is NULL or points to `id_len` readable bytes (the caller's contract).
        let id = unsafe { bytes_arg(id, id_len, "id") }?;
        // SAFETY: `expr` is NULL or points to `expr_len` readable bytes (the caller's contract).
        let expr = unsafe { bytes_arg(expr, expr_len, "expr") }?;
        r.table.add(id, priority, expr)?;
        Ok(ATC_OK)
    })
}

/// Removes the route with id `id`: `ATC_OK`, or `ATC_ERR_NOT_FOUND` when there is none.
///
/// # Safety
/// As `atc_router_add`.
#[no_mangle]
pub unsafe extern "C" fn atc_router_remove(
    router: *mut AtcRouter,
    id: *const c_char,
    id_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        // SAFETY: `id` is NULL or points to `id_len` readable bytes (the caller's contract).
        let id = unsafe { bytes_arg(id, id_len, "id") }?;
        let (id, removed) = r.table.remove(id)?;
        if removed {
            Ok(ATC_OK)
        } else {
            Err(Fail::new(
                ATC_ERR_NOT_FOUND,
                format_args!("no route with id {id}"),
            ))
        }
    })
}

/// Matches the context's values against the routes (those of the image the router routes
/// from, when one is attached: `atc_router_attach_image`): 1 when a route matched (read the result
/// with `atc_context_result`), 0 when none did, or a negative status (`ATC_ERR_NULL`;
/// `ATC_ERR_SCHEMA_MISMATCH` when the context was made from another schema handle;
/// `ATC_ERR_BROKEN` when a panic interrupted a change of the router part-way — no answer from
/// a half-changed table is given; `atc_router_sync` with the full list rebuilds it). Every call
/// first clears the context's previous result.
///
/// # Safety
/// `router` and `context` are live handles.
#[no_mangle]
pub unsafe extern "C" fn atc_router_execute(
    router: *const AtcRouter,
    context: *mut AtcContext,
) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        // Clears the previous result in every case, errors included.
        execute_status(r.table().try_execute(&mut c.ctx))
    })
}

/// An execute's answer as the C ABI gives it: 1 or 0, or the error's status (a schema
/// mismatch without a message: the status says it all).
pub(crate) fn execute_status(result: Result<bool, atc_router::Error>) -> Res<i32> {
    match result {
        Ok(matched) => Ok(i32::from(matched)),
        Err(atc_router::Error::SchemaMismatch) => Err(Fail::new(ATC_ERR_SCHEMA_MISMATCH, "")),
        Err(e) => Err(Fail::from(e)),
    }
}

/// The names of the fields used by at least one route of the table routed from, sorted, each followed by a NUL, into
/// `buf` (`*buf_len`: capacity in, bytes written out; `ATC_ERR_BUFFER` with the size needed
/// when too small). `*count` (may be NULL) receives the number of names.
///
/// # Safety
/// `router` is a live handle; `buf` points to `*buf_len` bytes (may be NULL when it is 0).
#[no_mangle]
pub unsafe extern "C" fn atc_router_fields(
    router: *const AtcRouter,
    buf: *mut c_char,
    buf_len: *mut usize,
    count: *mut usize,
) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `buf_len` is NULL or valid for writes (the caller's contract).
        unsafe { out(buf_len, "buf_len") }?;
        // SAFETY: `buf` is NULL or points to `*buf_len` writable bytes (the caller's contract).
        unsafe { write_names(&r.table().fields(), buf, buf_len, count) }
    })
}

/// The fields the router's indexes look values up in, as a field mask: field id `n` is bit
/// `min(n, 63)` (`ATC_FIELD_MASK_LAST_BIT`). Phase 1 of a two-phase match adds every value of
/// these fields, then asks `atc_router_needed_fields` which other fields to add. Changes with
/// every change of the routes.
///
/// # Safety
/// `router` is a live handle; `mask` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_key_fields(router: *const AtcRouter, mask: *mut u64) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `mask` is NULL or valid for writes (the caller's contract).
        *unsafe { out(mask, "mask") }? = r.table().key_fields();
        Ok(ATC_OK)
    })
}

/// Two-phase matching, for callers to whom reading a request field costs something (a gateway
/// reading nginx variables and headers): with every value of the key fields
/// (`atc_router_key_fields`) in `context`, stores in `*mask` the fields the routes the request
/// can still match use (its index candidates and the routes no index holds). Adding the values
/// of those fields and executing gives the result that adding every field gives; a value of
/// any other field could not change it, and need not be read. All bits for a context of
/// another schema. Allocates nothing.
///
/// # Safety
/// `router` and `context` are live handles; `mask` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_needed_fields(
    router: *const AtcRouter,
    context: *mut AtcContext,
    mask: *mut u64,
) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        // SAFETY: `mask` is NULL or valid for writes (the caller's contract).
        *unsafe { out(mask, "mask") }? = r.table().needed_fields(&mut c.ctx);
        Ok(ATC_OK)
    })
}

/// Writes the router's flat index now, if it holds 1,024 routes or more and they changed since
/// it was last written (`Router::settle`): about a microsecond per route, after which requests
/// walk it without an overlay of changed routes. No add or remove writes it; a background sync
/// does on its own thread. `ATC_OK` (a broken router is left as it is: a full sync rebuilds
/// it), or an error for a NULL handle.
///
/// # Safety
/// `router` is a live handle that nothing else uses during this call.
#[no_mangle]
pub unsafe extern "C" fn atc_router_settle(router: *mut AtcRouter) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        r.table.router_mut().settle();
        Ok(ATC_OK)
    })
}

/// Whether the router's flat index is due (`Router::settle_due`): 1 when it holds 1,024 routes
/// or more and has no flat index, or the changes since it was written reach a quarter of the
/// table; 0 otherwise (or `ATC_ERR_NULL`). A caller that changes the router route by route
/// asks it after a burst of changes, and has the table built whole on the builder thread
/// (`atc_router_update_start` with no changes) instead of settling it in place.
///
/// # Safety
/// `router` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn atc_router_settle_due(router: *const AtcRouter) -> i32 {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        Ok(i32::from(r.router().settle_due()))
    })
}

/// Whether the router's builder keeps a copy of the current table between background builds
/// (`keep` 1, the default: a push of a few changes then costs what changed, for a second
/// table's memory on the builder thread) or none (`keep` 0: every background build starts
/// over from the routes, and a table handed back is freed: for a router changed directly
/// between background builds, as the Lua binding's Kong API does). From the builder's next
/// task. `ATC_OK`, or an error for a NULL handle.
///
/// # Safety
/// `router` is a live handle that nothing else uses during this call.
#[no_mangle]
pub unsafe extern "C" fn atc_router_keep_shadow(router: *mut AtcRouter, keep: i32) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        r.table.keep_shadow(keep != 0);
        Ok(ATC_OK)
    })
}

/// Stores the number of routes of the table the router routes from (its own, or the image
/// attached) in `*count`.
///
/// # Safety
/// `router` is a live handle; `count` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_len(router: *const AtcRouter, count: *mut usize) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `count` is NULL or valid for writes (the caller's contract).
        *unsafe { out(count, "count") }? = r.table().len();
        Ok(ATC_OK)
    })
}

/// Makes `router` route from `image` (NULL: from its own table again): every read of the
/// router (execute, key and needed fields, explain, matches, route expressions, len, fields)
/// answers from the image from this call on, and its executes are counted in the router's stats. The router
/// takes the image; the one it routed from before goes to `*previous` (NULL if none), for the
/// caller to retire or free. The router's own routes (add, remove, syncs) are what its builder
/// builds from, and route again once it is detached. Between two requests: O(1).
/// `ATC_ERR_SCHEMA_MISMATCH` (nothing changes) for an image opened with another schema handle
/// than the router's.
///
/// # Safety
/// `router` is a live handle nothing else uses during the call; `image` is NULL or a live
/// image handle, not attached elsewhere and not used by the caller after the call;
/// `previous` is writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_attach_image(
    router: *mut AtcRouter,
    image: *mut AtcImage,
    previous: *mut *mut AtcImage,
) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle nothing else uses during the call.
        let r = unsafe { handle_mut(router, "router") }?;
        // SAFETY: `previous` is NULL or writable.
        let previous = unsafe { out(previous, "previous") }?;
        let image = if image.is_null() {
            None
        } else {
            // SAFETY: a live handle (checked non-NULL) given up by the caller (its contract).
            let image = unsafe { Box::from_raw(image) };
            if !std::sync::Arc::ptr_eq(image.table().schema(), r.router().schema()) {
                // Not taken: the caller still owns it.
                let _ = Box::into_raw(image);
                return Err(Fail::new(
                    ATC_ERR_SCHEMA_MISMATCH,
                    "the image was opened with another schema handle than the router's",
                ));
            }
            Some(image)
        };
        *previous =
            std::mem::replace(&mut r.mapped, image).map_or(std::ptr::null_mut(), Box::into_raw);
        Ok(ATC_OK)
    })
}
