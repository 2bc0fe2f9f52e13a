//! Why a request went where it went, for operators and tests: `atc_router_explain`,
//! `atc_router_matches` (serialised reports, JSON) and `atc_router_route_expression`.
//!
//! The reports are versioned JSON objects (`"version": ATC_JSON_VERSION`) written to a caller
//! buffer by the library's usual rule for outputs: too small (or NULL) is `ATC_ERR_BUFFER` with
//! the size needed in the length argument and nothing written, so a caller can size first. Both
//! leave the context's values and its result as they were (results read before stay valid).
//!
//! The reports are written by the core (`atc_router::ExplainJson`, `atc_router::MatchesJson`),
//! the one serializer of this shape, which the `atc-router` command uses too; docs/explain.md
//! describes it and docs/explain.schema.json states it. In short, version 2 (members always
//! present, in this order; integers are exact 64-bit values):
//!
//! ```text
//! explain: {"version":2, "winner": UUID | null, "routes": N,
//!           "candidates": [{"id", "priority", "matched", "expression",
//!                           "expression_truncated",
//!                           "predicates": [{"index", "text", "text_truncated", "holds",
//!                                           "negated", "line", "column", "span": [start, end],
//!                                           "source_line", "caret"}],
//!                           "predicates_omitted"}],
//!           "candidates_omitted": N,
//!           "ruled_out": [{"id", "priority", "key": TEXT | null}],
//!           "ruled_out_omitted": N}
//! matches: {"version":2,
//!           "matches": [{"id", "priority", "expression",
//!                        "matched_values": [{"field", "type", "value"}],
//!                        "captures": [{"key": NUMBER | NAME, "value"}]}]}
//! ```
//!
//! New members may be added within a version; a change of meaning of a member gets a new one.
//! Version 2: an explain report is bounded by `ExplainOptions::default()` (the first 50
//! candidates and the winner, 1,000 ruled-out routes, 32 predicates per candidate, 1,024 bytes
//! per text), with what it leaves out counted in the `_omitted` members and cuts marked by the
//! `_truncated` ones; in version 1 it listed everything. The matches report is unchanged.

use std::ffi::c_char;

use atc_router::{ExplainJson, ExplainOptions, MatchesJson, REPORT_JSON_VERSION};

use crate::context::AtcContext;
use crate::router::AtcRouter;
use crate::{
    bytes_arg, guard, guard_status, handle, handle_mut, out, Fail, Res, ATC_ERR_BUFFER,
    ATC_ERR_INVALID, ATC_ERR_NOT_FOUND, ATC_OK,
};

/// The `"version"` of the JSON reports this library writes (2: explain reports are bounded).
pub const ATC_JSON_VERSION: i32 = 2;

// The core writes the reports (one serializer for the C ABI and the `atc-router` command);
// cbindgen writes only literals, so a version bump in the core that forgets this one fails to
// compile.
const _: () = assert!(ATC_JSON_VERSION as u32 == REPORT_JSON_VERSION);

/// `atc_router_explain` flag: also list the routes the index ruled out for the request, each
/// with the condition no value of the request meets (visits every route of the router).
pub const ATC_EXPLAIN_RULED_OUT: u32 = 1;

const KNOWN_FLAGS: u32 = ATC_EXPLAIN_RULED_OUT;

/// Copies a report into the caller's buffer (`*buf_len`: capacity in, bytes written out), or
/// stores the size needed and fails with `ATC_ERR_BUFFER`, writing nothing. A NULL buffer has
/// no capacity.
///
/// # Safety
/// `buf` is NULL or points to `*buf_len` writable bytes.
unsafe fn write_report(data: &str, buf: *mut c_char, buf_len: &mut usize) -> Res<i32> {
    let cap = if buf.is_null() { 0 } else { *buf_len };
    let needed = data.len();
    if cap < needed {
        *buf_len = needed;
        return Err(Fail::new(
            ATC_ERR_BUFFER,
            format_args!("the buffer holds {cap} bytes; {needed} are needed"),
        ));
    }
    // SAFETY: the destination is the caller's buffer, with room for the bytes copied (checked
    // above), and the source is our own memory: they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), needed) };
    *buf_len = needed;
    Ok(ATC_OK)
}

/// Explains how the router routes the context's values: the route `atc_router_execute` would
/// choose (`"winner"`), the candidates the index left for the request in routing order (also
/// those after the winner) with whether it matched and the predicates that decided it (for a
/// route that failed, the one that made it fail), with their line, column and source line
/// with a caret; with `ATC_EXPLAIN_RULED_OUT` in `flags`, also the other routes with the
/// condition that ruled each out. The report is bounded (the core's default `ExplainOptions`:
/// 50 candidates and the winner, 1,000 ruled-out routes, 32 predicates per candidate, 1,024
/// bytes per text), and says what it left out (`*_omitted`, `*_truncated`). JSON (see
/// `ATC_JSON_VERSION` and ffi/README.md) in `buf`, not NUL-terminated (`*buf_len`: capacity
/// in, bytes written out); a NULL or too small `buf` is `ATC_ERR_BUFFER` with the size needed
/// in `*buf_len` and nothing written (each call explains again: keep a buffer across calls). Other failures: `ATC_ERR_NULL`, `ATC_ERR_INVALID`
/// (unknown flag bits), `ATC_ERR_SCHEMA_MISMATCH`, `ATC_ERR_BROKEN`. The context's values and
/// result are left as they were. Costs an evaluation of every reported candidate (and of those
/// before the winner): not for the request path.
///
/// # Safety
/// `router` and `context` are live handles; `buf` is NULL or points to `*buf_len` bytes;
/// `buf_len` is writable; `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_router_explain(
    router: *const AtcRouter,
    context: *mut AtcContext,
    flags: u32,
    buf: *mut c_char,
    buf_len: *mut usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `context`, `buf` and `buf_len` as the caller's contract says.
        unsafe {
            explain_into(context, flags, buf, buf_len, |c, o| {
                r.table().explain_with(c, o)
            })
        }
    })
}

/// The report `explain` gives for the context's values with the options of `flags`, written
/// into the caller's buffer: the body of both explain calls.
///
/// # Safety
/// `context` is NULL or a live handle nothing else uses during the call; `buf` is NULL or
/// points to `*buf_len` writable bytes; `buf_len` is NULL or writable.
unsafe fn explain_into(
    context: *mut AtcContext,
    flags: u32,
    buf: *mut c_char,
    buf_len: *mut usize,
    explain: impl FnOnce(
        &mut atc_router::Context,
        ExplainOptions,
    ) -> Result<atc_router::Explanation, atc_router::Error>,
) -> Res<i32> {
    // SAFETY: `context` is NULL or a live handle that nothing else uses during this call.
    let c = unsafe { handle_mut(context, "context") }?;
    // SAFETY: `buf_len` is NULL or valid for writes.
    let len = unsafe { out(buf_len, "buf_len") }?;
    let explanation = explain(&mut c.ctx, options(flags)?)?;
    // SAFETY: `buf` is NULL or points to `*len` writable bytes.
    unsafe { write_report(&ExplainJson::new(&explanation).to_json(), buf, len) }
}

/// The options `flags` of an explain call ask for.
fn options(flags: u32) -> Res<ExplainOptions> {
    if flags & !KNOWN_FLAGS != 0 {
        return Err(Fail::new(
            ATC_ERR_INVALID,
            format_args!(
                "unknown explain flags {:#x} (known: ATC_EXPLAIN_RULED_OUT)",
                flags & !KNOWN_FLAGS
            ),
        ));
    }
    Ok(ExplainOptions {
        ruled_out: flags & ATC_EXPLAIN_RULED_OUT != 0,
        ..ExplainOptions::default()
    })
}

/// Every route whose expression holds for the context's values, in routing order (the first
/// is the one `atc_router_execute` chooses), each with its priority, expression text, the
/// value each field recorded and the captures it would give as the winner. JSON in `buf` as
/// for `atc_router_explain` (same buffer rule and failures, no flags). The context's values
/// and result are left as they were. Not for the request path.
///
/// # Safety
/// As `atc_router_explain`.
#[no_mangle]
pub unsafe extern "C" fn atc_router_matches(
    router: *const AtcRouter,
    context: *mut AtcContext,
    buf: *mut c_char,
    buf_len: *mut usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `context` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let c = unsafe { handle_mut(context, "context") }?;
        // SAFETY: `buf_len` is NULL or valid for writes (the caller's contract).
        let len = unsafe { out(buf_len, "buf_len") }?;
        let matches = r.table().matches(&mut c.ctx)?;
        // SAFETY: `buf` is NULL or points to `*len` writable bytes (the caller's contract).
        unsafe { write_report(&MatchesJson(&matches).to_json(), buf, len) }
    })
}

/// The expression text of the route with id `id` (UUID text, any form `atc_router_add`
/// takes), as it was added: `*expr` points into the router (not NUL-terminated, `*expr_len`
/// bytes) and stays valid until the next call that changes the router (add, remove, sync,
/// attach, free). From an attached image, the image's route (found by a walk of its routes:
/// not for the request path). With the id `atc_context_result` gives, the matched route's
/// text. `ATC_ERR_NOT_FOUND` when the router has no such route, `ATC_ERR_UUID` for an id that is not a UUID,
/// `ATC_ERR_BROKEN` for a broken router (as `atc_router_execute`); outputs untouched on
/// failure.
///
/// # Safety
/// `router` is a live handle; `id` points to `id_len` bytes; `expr` and `expr_len` are
/// writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_route_expression(
    router: *const AtcRouter,
    id: *const c_char,
    id_len: usize,
    expr: *mut *const c_char,
    expr_len: *mut usize,
) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        // SAFETY: `id` is NULL or points to `id_len` readable bytes (the caller's contract).
        let id = atc_router::route_list::read_id(unsafe { bytes_arg(id, id_len, "id") }?)?;
        // SAFETY: `expr` is NULL or valid for writes (the caller's contract).
        let expr = unsafe { out(expr, "expr") }?;
        // SAFETY: `expr_len` is NULL or valid for writes (the caller's contract).
        let expr_len = unsafe { out(expr_len, "expr_len") }?;
        let Some(text) = r.table().expression(id)? else {
            return Err(Fail::new(
                ATC_ERR_NOT_FOUND,
                format_args!("no route with id {id}"),
            ));
        };
        *expr = text.as_ptr().cast();
        *expr_len = text.len();
        Ok(ATC_OK)
    })
}
