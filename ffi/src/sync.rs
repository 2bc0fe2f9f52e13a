//! Bringing a router to a whole desired route list in one call (`atc_router_sync`).
//!
//! The core's [`Router::sync_entries`] does the work and holds the rules (repeated ids, which
//! invalid routes keep their current version): only routes whose priority or expression text
//! differ are parsed again, and the router changes in one step after everything was prepared.
//! This layer reads the C input (pointers, UTF-8, UUIDs), passes every entry through (one it
//! could not read as [`SyncEntry::Unreadable`]), words the core's errors, which come by index,
//! and writes the outcome to caller buffers.
//!
//! A sync cannot be repeated to fetch what did not fit (the second run would report the routes
//! the first one added as unchanged), so unlike the other functions it does not fail with
//! `ATC_ERR_BUFFER`: it always does its work, writes the errors that fit, and reports the totals.
//!
//! [`Router::sync_entries`]: atc_router::Router::sync_entries

use std::ffi::c_char;

use atc_router::{EntryError, EntryFault, RouteSpec, SyncEntry, SyncMode};

use crate::router::{parse_uuid, AtcRouter};
use crate::{
    guard, handle_mut, str_arg, Fail, Res, ATC_ERR_DUPLICATE, ATC_ERR_INVALID, ATC_ERR_NULL,
    ATC_ERR_PANIC, ATC_ERR_ROUTES, ATC_OK,
};

/// `atc_router_sync` mode: one invalid route refuses the whole list and nothing changes.
pub const ATC_SYNC_ALL_OR_NOTHING: i32 = 0;
/// `atc_router_sync` mode: the valid routes are applied and the invalid ones reported; a known
/// route whose new version is invalid keeps its current version.
pub const ATC_SYNC_APPLY_VALID: i32 = 1;

/// One route of the list given to `atc_router_sync`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AtcRoute {
    /// The route id as UUID text (hyphenated, simple, braced or URN), not NUL-terminated.
    pub id: *const c_char,
    pub id_len: usize,
    /// Higher first; equal priorities by id, higher first.
    pub priority: u64,
    /// The expression (UTF-8), not NUL-terminated.
    pub expr: *const c_char,
    pub expr_len: usize,
}

/// What `atc_router_sync` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct AtcSyncReport {
    /// Routes with an id the router did not have.
    pub added: usize,
    /// Routes of the router whose id is not in the list.
    pub removed: usize,
    /// Known ids with another priority or expression text (parsed again).
    pub changed: usize,
    /// Known ids with the same priority and expression text (not parsed again).
    pub unchanged: usize,
    /// Invalid routes, all of them (the `errors` array may have held fewer).
    pub errors: usize,
    /// Bytes `msgbuf` needs to hold every message whole, NULs included.
    pub messages_len: usize,
}

/// One invalid route, as written by `atc_router_sync`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AtcSyncError {
    /// Index of the route in the list.
    pub index: usize,
    /// `ATC_ERR_*`: `_UUID`, `_UTF8`, `_NULL`, `_DUPLICATE` (id repeated in the list), `_EXPR`,
    /// `_LIMIT`, ...
    pub code: i32,
    /// The message, NUL-terminated, in `msgbuf`; NULL when `msgbuf` had no room left.
    pub message: *const c_char,
    /// Its length without the NUL (after truncation).
    pub message_len: usize,
}

pub(crate) struct RouteError {
    pub(crate) index: usize,
    pub(crate) code: i32,
    pub(crate) msg: String,
}

/// Reads the list into the core's entries; what could not be read is an unreadable entry (with
/// its id when that could be read), and its error is in `unread`, by index, in list order.
///
/// # Safety
/// `routes` holds routes whose pointers are valid for their lengths.
unsafe fn read_entries<'a>(
    routes: &[AtcRoute],
    unread: &mut Vec<(usize, Fail)>,
) -> Vec<SyncEntry<'a>> {
    let mut entries = Vec::with_capacity(routes.len());
    for (index, route) in routes.iter().enumerate() {
        // SAFETY: the caller's pointers are valid for their lengths (this function's contract).
        let (id, expression) = unsafe {
            (
                str_arg(route.id, route.id_len, "id").and_then(parse_uuid),
                str_arg(route.expr, route.expr_len, "expr"),
            )
        };
        entries.push(match (id, expression) {
            (Ok(id), Ok(expression)) => SyncEntry::Route(RouteSpec {
                id,
                priority: route.priority,
                expression,
            }),
            // The id still counts: it may keep its current version, or make a later entry a
            // duplicate (the core's rules).
            (Ok(id), Err(e)) => {
                unread.push((index, e));
                SyncEntry::Unreadable { id: Some(id) }
            }
            (Err(e), _) => {
                unread.push((index, e));
                SyncEntry::Unreadable { id: None }
            }
        });
    }
    entries
}

/// The core's invalid entries as C errors: a duplicate names the first entry with its id, an
/// unreadable entry gets the error it was read with.
fn route_errors(invalid: Vec<EntryError>, mut unread: Vec<(usize, Fail)>) -> Vec<RouteError> {
    invalid
        .into_iter()
        .map(|e| {
            let index = e.index;
            let fail = match e.fault {
                EntryFault::Duplicate { first } => Fail::new(
                    ATC_ERR_DUPLICATE,
                    format_args!(
                        "route id {} is already used by route {first} of the list",
                        e.id.map_or_else(String::new, |id| id.to_string())
                    ),
                ),
                EntryFault::Invalid(error) => Fail::from(error),
                EntryFault::Unreadable => match unread.binary_search_by_key(&index, |(i, _)| *i) {
                    Ok(at) => std::mem::replace(&mut unread[at].1, Fail::new(0, "")),
                    Err(_) => Fail::new(ATC_ERR_PANIC, "an unreadable route lost its error"),
                },
            };
            RouteError {
                index,
                code: fail.code,
                msg: fail.msg,
            }
        })
        .collect()
}

/// Makes the router hold exactly the `n` routes of `routes`, touching only what differs: a
/// route whose id, priority and expression text are all unchanged is not parsed again; a known
/// id with another priority or text is replaced; an unknown id is added; a route of the router
/// whose id is not in the list is removed. The router changes in one step, after every route
/// was parsed and validated.
///
/// `mode` is `ATC_SYNC_ALL_OR_NOTHING` (any invalid route: nothing changes, the call returns
/// `ATC_ERR_ROUTES`) or `ATC_SYNC_APPLY_VALID` (the valid routes are applied and the call returns
/// `ATC_OK`; a known route whose new version is invalid keeps its current version; an unknown
/// one is left out). Invalid routes: an id that is not a UUID or repeats an earlier id of the
/// list (the first one counts), text that is not UTF-8 or a NULL pointer with a non-zero
/// length, an expression that does not parse or validate.
///
/// Outputs, all optional (NULL when not wanted):
/// - `report`: the counts, the total number of invalid routes and the `msgbuf` size that would
///   hold every message. Written on `ATC_OK` and `ATC_ERR_ROUTES` (the counts are then 0).
/// - `errors`: one entry per invalid route, by index; `*errors_len` is the capacity in and the
///   number written out. Errors beyond the capacity are counted in `report->errors` only.
/// - `msgbuf`: the messages of the written errors, one after the other, each NUL-terminated;
///   `*msgbuf_len` is the capacity in and the bytes used out. A message that does not fit in what
///   is left is cut like an error message (whole UTF-8 characters, then a NUL); once no byte is
///   left, further errors get a NULL message.
///
/// Failures of the call itself (a NULL `router`, `routes` NULL with `n` > 0, `errors` NULL with a
/// non-zero capacity, an unknown `mode`) change nothing and write only `errbuf`. With
/// `ATC_ERR_ROUTES`, `errbuf` holds a summary naming the first invalid route.
///
/// # Safety
/// `router` is a live handle; `routes` points to `n` routes whose pointers are valid for their
/// lengths; `report`, `errors` (`*errors_len` elements), `msgbuf` (`*msgbuf_len` bytes) and
/// `errbuf` (`*errbuf_len` bytes) are valid or NULL.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn atc_router_sync(
    router: *mut AtcRouter,
    routes: *const AtcRoute,
    n: usize,
    mode: i32,
    report: *mut AtcSyncReport,
    errors: *mut AtcSyncError,
    errors_len: *mut usize,
    msgbuf: *mut c_char,
    msgbuf_len: *mut usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        let mode = sync_mode(mode)?;
        crate::background::changed_directly(r);
        // SAFETY: `errors_len` is NULL or valid for reads (the caller's contract).
        let errors_cap = unsafe { errors_len.as_ref() }.copied().unwrap_or(0);
        if errors_cap > 0 && errors.is_null() {
            return Err(Fail::new(
                ATC_ERR_NULL,
                format_args!("`errors` is NULL but `*errors_len` is {errors_cap}"),
            ));
        }
        // SAFETY: `routes` is NULL or points to `n` routes (the caller's contract).
        let routes = unsafe { route_slice(routes, n) }?;

        let mut unread = Vec::new();
        // SAFETY: every route of the slice has pointers valid for their lengths (the caller's
        // contract).
        let entries = unsafe { read_entries(routes, &mut unread) };
        let mut counts = AtcSyncReport::default();
        let (applied, invalid) = match r.router.sync_entries(&entries, mode) {
            Ok(done) => {
                if done.stale {
                    return Err(Fail::new(ATC_ERR_PANIC, "sync plan was stale"));
                }
                counts.added = done.added;
                counts.removed = done.removed;
                counts.changed = done.changed;
                counts.unchanged = done.unchanged;
                (true, done.entry_errors)
            }
            Err(e) => (false, e.entry_errors),
        };
        // In list order already (the core reports entries in order).
        let errs = route_errors(invalid, unread);
        counts.errors = errs.len();
        counts.messages_len = errs.iter().map(|e| e.msg.len() + 1).sum();
        // SAFETY: `errors`, `msgbuf` and their lengths are valid or NULL (the caller's contract),
        // and `errors` is non-NULL when its capacity is not 0 (checked above).
        unsafe { write_route_errors(&errs, errors, errors_len, msgbuf, msgbuf_len) };
        if !report.is_null() {
            // SAFETY: `report` is non-NULL (checked above) and writable (the caller's contract).
            unsafe { *report = counts };
        }
        if applied {
            return Ok(ATC_OK);
        }
        let first_err = errs.first().expect("a refused sync has errors");
        Err(Fail::new(
            ATC_ERR_ROUTES,
            format_args!(
                "{} invalid route(s), nothing changed; route {}: {}",
                errs.len(),
                first_err.index,
                first_err.msg
            ),
        ))
    })
}

/// The core's mode for an `ATC_SYNC_*` code.
pub(crate) fn sync_mode(mode: i32) -> Res<SyncMode> {
    match mode {
        ATC_SYNC_ALL_OR_NOTHING => Ok(SyncMode::AllOrNothing),
        ATC_SYNC_APPLY_VALID => Ok(SyncMode::ApplyValid),
        _ => Err(Fail::new(
            ATC_ERR_INVALID,
            format_args!(
                "{mode} is not a sync mode (expected ATC_SYNC_ALL_OR_NOTHING or \
                 ATC_SYNC_APPLY_VALID)"
            ),
        )),
    }
}

/// # Safety
/// `routes` points to `n` routes, or is NULL with `n` 0.
pub(crate) unsafe fn route_slice<'a>(routes: *const AtcRoute, n: usize) -> Res<&'a [AtcRoute]> {
    if n == 0 {
        return Ok(&[]);
    }
    if routes.is_null() {
        return Err(Fail::new(
            ATC_ERR_NULL,
            format_args!("`routes` is NULL but `n` is {n}"),
        ));
    }
    if n > isize::MAX as usize / std::mem::size_of::<AtcRoute>() {
        return Err(Fail::new(
            ATC_ERR_INVALID,
            format_args!("`n` is impossibly large ({n})"),
        ));
    }
    // SAFETY: `routes` is non-NULL here and points to that many elements (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(routes, n) })
}

/// Writes the errors that fit and their messages (see `atc_router_sync`).
///
/// # Safety
/// `errors` holds `*errors_len` elements (checked non-NULL when that is > 0); `msgbuf` holds
/// `*msgbuf_len` bytes, or one of them is NULL.
pub(crate) unsafe fn write_route_errors(
    errs: &[RouteError],
    errors: *mut AtcSyncError,
    errors_len: *mut usize,
    msgbuf: *mut c_char,
    msgbuf_len: *mut usize,
) {
    let has_msgbuf = !msgbuf.is_null() && !msgbuf_len.is_null();
    // SAFETY: `msgbuf_len` is non-NULL when `has_msgbuf` (checked above) and readable (the.
    // caller's contract).
    let msg_cap = if has_msgbuf {
        unsafe { *msgbuf_len }
    } else {
        0
    };
    let mut used = 0usize;
    // SAFETY: `errors_len` is NULL or valid for reads (the caller's contract).
    let written = unsafe { errors_len.as_ref() }.map_or(0, |&cap| errs.len().min(cap));
    for (k, e) in errs[..written].iter().enumerate() {
        let (message, message_len) = if used < msg_cap {
            let room = msg_cap - used;
            let mut len = e.msg.len().min(room - 1);
            while !e.msg.is_char_boundary(len) {
                len -= 1;
            }
            // SAFETY: the offset stays within the caller's buffer, whose capacity bounds it
            // (checked above).
            let at = unsafe { msgbuf.add(used) };
            // SAFETY: the destination is the caller's buffer, with room for the bytes copied
            // (checked above), and the source is our own memory: they do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(e.msg.as_ptr(), at.cast::<u8>(), len) };
            // SAFETY: the offset stays within the caller's buffer, whose capacity bounds it
            // (checked above).
            unsafe { *at.add(len) = 0 };
            used += len + 1;
            (at.cast_const(), len)
        } else {
            (std::ptr::null(), 0)
        };
        // SAFETY: the offset stays within the caller's buffer, whose capacity bounds it (checked
        // above).
        unsafe {
            *errors.add(k) = AtcSyncError {
                index: e.index,
                code: e.code,
                message,
                message_len,
            }
        };
    }
    if !errors_len.is_null() {
        // SAFETY: `errors_len` is non-NULL (checked above) and writable (the caller's contract).
        unsafe { *errors_len = written };
    }
    if has_msgbuf {
        // SAFETY: `msgbuf_len` is non-NULL (checked above) and writable (the caller's contract).
        unsafe { *msgbuf_len = used };
    }
}
