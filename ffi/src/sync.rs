//! Bringing a router to a whole desired route list, or applying a list of changes, in one call
//! (`atc_router_sync`, `atc_router_update`), and the one reader of the C form of a route.
//!
//! The core's [`Router::sync_entries`] and [`Router::update_entries`] do the work and hold the
//! rules (repeated ids, which invalid routes keep their current version, the message of a
//! refused list): only routes whose priority or expression text differ are parsed again, and
//! the router changes in one step after everything was prepared. This layer reads the C input
//! into the core's entries ([`read_route`]: pointers, UTF-8, UUIDs; what it cannot read is an
//! unreadable entry, with why), and writes the core's errors and report to caller buffers.
//!
//! A sync cannot be repeated to fetch what did not fit (the second run would report the routes
//! the first one added as unchanged), so unlike the other functions it does not fail with
//! `ATC_ERR_BUFFER`: it always does its work, writes the errors that fit, and reports the totals.
//!
//! [`Router::sync_entries`]: atc_router::Router::sync_entries
//! [`Router::update_entries`]: atc_router::Router::update_entries

use std::ffi::c_char;

use atc_router::route_list::UnreadKind;
use atc_router::{EntryError, EntryFault, SyncError, SyncMode, SyncReport};

use crate::route_list::AtcRouteList;
use crate::router::AtcRouter;
use crate::{
    guard, handle, handle_mut, Fail, Res, ATC_ERR_DUPLICATE, ATC_ERR_INVALID, ATC_ERR_NULL,
    ATC_ERR_PANIC, ATC_ERR_ROUTES, ATC_ERR_UTF8, ATC_ERR_UUID, ATC_OK,
};

/// `atc_router_sync` mode: one invalid route refuses the whole list and nothing changes.
pub const ATC_SYNC_ALL_OR_NOTHING: i32 = 0;
/// `atc_router_sync` mode: the valid routes are applied and the invalid ones reported; a known
/// route whose new version is invalid keeps its current version.
pub const ATC_SYNC_APPLY_VALID: i32 = 1;

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

/// The core's invalid entries as C errors.
pub(crate) fn route_errors(invalid: &[EntryError]) -> Vec<RouteError> {
    invalid
        .iter()
        .map(|e| {
            let code = match &e.fault {
                EntryFault::Duplicate { .. } => ATC_ERR_DUPLICATE,
                EntryFault::Invalid(error) => Fail::from(error.clone()).code,
                EntryFault::Unreadable { kind, .. } => match kind {
                    UnreadKind::BadId => ATC_ERR_UUID,
                    UnreadKind::NotUtf8 => ATC_ERR_UTF8,
                    UnreadKind::BadPriority => ATC_ERR_INVALID,
                    UnreadKind::Malformed => ATC_ERR_NULL,
                },
            };
            RouteError {
                index: e.at.number().saturating_sub(1),
                code,
                msg: e.fault.to_string(),
            }
        })
        .collect()
}

/// Writes the outcome of a sync or an update to the caller's buffers, and says how it ends:
/// `ATC_OK`, or `ATC_ERR_ROUTES` with the one message of a refused list.
///
/// # Safety
/// As `atc_router_sync`'s outputs.
unsafe fn finish(
    done: Result<SyncReport, SyncError>,
    report: *mut AtcSyncReport,
    errors: *mut AtcSyncError,
    errors_len: *mut usize,
    msgbuf: *mut c_char,
    msgbuf_len: *mut usize,
) -> Res<i32> {
    let mut counts = AtcSyncReport::default();
    let (applied, invalid) = match &done {
        Ok(done) => {
            if done.stale {
                return Err(Fail::new(ATC_ERR_PANIC, "sync plan was stale"));
            }
            counts.added = done.added;
            counts.removed = done.removed;
            counts.changed = done.changed;
            counts.unchanged = done.unchanged;
            (true, &done.errors)
        }
        Err(e) => (false, &e.errors),
    };
    let errs = route_errors(invalid);
    counts.errors = errs.len();
    counts.messages_len = errs.iter().map(|e| e.msg.len() + 1).sum();
    // SAFETY: `errors`, `msgbuf` and their lengths are valid or NULL (the caller's contract),
    // and `errors` is non-NULL when its capacity is not 0 (checked by the caller).
    unsafe { write_route_errors(&errs, errors, errors_len, msgbuf, msgbuf_len) };
    if !report.is_null() {
        // SAFETY: `report` is non-NULL (checked above) and writable (the caller's contract).
        unsafe { *report = counts };
    }
    match done {
        Ok(_) if applied => Ok(ATC_OK),
        Ok(_) => unreachable!("applied"),
        Err(e) => Err(Fail::new(ATC_ERR_ROUTES, e.to_string())),
    }
}

/// `ATC_ERR_NULL` when `errors` is NULL with a capacity.
///
/// # Safety
/// `errors_len` is NULL or readable.
unsafe fn check_errors(errors: *mut AtcSyncError, errors_len: *mut usize) -> Res<()> {
    // SAFETY: `errors_len` is NULL or valid for reads (the caller's contract).
    let errors_cap = unsafe { errors_len.as_ref() }.copied().unwrap_or(0);
    if errors_cap > 0 && errors.is_null() {
        return Err(Fail::new(
            ATC_ERR_NULL,
            format_args!("`errors` is NULL but `*errors_len` is {errors_cap}"),
        ));
    }
    Ok(())
}

/// Makes the router hold exactly the routes of `list` (an `atc_route_list`, filled with
/// `atc_route_list_add`; it stays the caller's), touching only what differs: a route whose id,
/// priority and expression text are all unchanged is not parsed again; a known id with another
/// priority or text is replaced; an unknown id is added; a route of the router whose id is not in
/// the list is removed. The router changes in one step, after every route was parsed and
/// validated.
///
/// `mode` is `ATC_SYNC_ALL_OR_NOTHING` (any invalid route: nothing changes, the call returns
/// `ATC_ERR_ROUTES`) or `ATC_SYNC_APPLY_VALID` (the valid routes are applied and the call returns
/// `ATC_OK`; a known route whose new version is invalid keeps its current version; an unknown
/// one is left out). Invalid routes: an id that is not a UUID or repeats an earlier id of the
/// list (the first one counts), text that is not UTF-8 or a NULL pointer with a non-zero
/// length, an expression that does not parse or validate, an entry the caller marked unreadable
/// (`atc_route_list_add_unreadable`), a removal (a whole list has none).
///
/// Outputs, all optional (NULL when not wanted):
/// - `report`: the counts, the total number of invalid routes and the `msgbuf` size that would
///   hold every message. Written on `ATC_OK` and `ATC_ERR_ROUTES` (the counts are then 0).
/// - `errors`: one entry per invalid route, by position; `*errors_len` is the capacity in and
///   the number written out. Errors beyond the capacity are counted in `report->errors` only.
/// - `msgbuf`: the messages of the written errors, one after the other, each NUL-terminated;
///   `*msgbuf_len` is the capacity in and the bytes used out. A message that does not fit in what
///   is left is cut like an error message (whole UTF-8 characters, then a NUL); once no byte is
///   left, further errors get a NULL message.
///
/// Failures of the call itself (a NULL `router` or `list`, `errors` NULL with a non-zero
/// capacity, an unknown `mode`) change nothing and write only `errbuf`. With `ATC_ERR_ROUTES`,
/// `errbuf` holds the one message of a refused list: how many routes are invalid, and the first
/// of them, by position.
///
/// # Safety
/// `router` and `list` are live handles; `report`, `errors` (`*errors_len` elements), `msgbuf`
/// (`*msgbuf_len` bytes) and `errbuf` (`*errbuf_len` bytes) are valid or NULL.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn atc_router_sync(
    router: *mut AtcRouter,
    list: *const AtcRouteList,
    mode: i32,
    report: *mut AtcSyncReport,
    errors: *mut AtcSyncError,
    errors_len: *mut usize,
    msgbuf: *mut c_char,
    msgbuf_len: *mut usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        sync_list(
            router, list, mode, false, report, errors, errors_len, msgbuf, msgbuf_len, errbuf,
            errbuf_len,
        )
    }
}

/// `atc_router_sync` (`changes` false) or `atc_router_update`.
///
/// # Safety
/// As `atc_router_sync`.
#[allow(clippy::too_many_arguments)]
unsafe fn sync_list(
    router: *mut AtcRouter,
    list: *const AtcRouteList,
    mode: i32,
    changes: bool,
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
        // SAFETY: `list` is NULL or a live handle (the caller's contract).
        let l = unsafe { handle(list, "list") }?;
        // SAFETY: `errors_len` is NULL or valid for reads (the caller's contract).
        unsafe { check_errors(errors, errors_len) }?;
        let list = l.read();
        let entries = list.entries();
        let done = match changes {
            false => r.table.router_mut().sync_entries(&entries, mode),
            true => r.table.router_mut().update_entries(&entries, mode),
        };
        // SAFETY: the outputs are valid or NULL (the caller's contract; `errors` checked above).
        unsafe { finish(done, report, errors, errors_len, msgbuf, msgbuf_len) }
    })
}

/// Applies the list of changes in `list` (`atc_route_list_add`: routes to put in, or in place of
/// the route with their id; `atc_route_list_remove`: ids to take out, a no-op for an id the
/// router does not hold), touching only those routes; the rest of the table stays. The list
/// stays the caller's (free it with `atc_route_list_free`). Modes, outputs and failures as for
/// `atc_router_sync`; the report counts as unchanged the routes the changes left as they were.
/// A broken router refuses every list of changes (`ATC_ERR_ROUTES`): `atc_router_sync` of the
/// whole list rebuilds it.
///
/// # Safety
/// `router` and `list` are live handles; the outputs are as for `atc_router_sync`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn atc_router_update(
    router: *mut AtcRouter,
    list: *const AtcRouteList,
    mode: i32,
    report: *mut AtcSyncReport,
    errors: *mut AtcSyncError,
    errors_len: *mut usize,
    msgbuf: *mut c_char,
    msgbuf_len: *mut usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        sync_list(
            router, list, mode, true, report, errors, errors_len, msgbuf, msgbuf_len, errbuf,
            errbuf_len,
        )
    }
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
