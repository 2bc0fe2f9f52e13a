//! Syncs built off the calling thread: start, poll, apply. The core's `BackgroundRouter`
//! holds the builder, learns of direct changes, counts the outcomes and keeps what was
//! published; this file converts the calls' arguments and writes their outcomes.
//!
//! A gateway worker must never wait for a build. `atc_router_sync_start` hands a whole desired
//! list to the router's builder thread, and `atc_router_update_start` a list of changes
//! (threads started by the first call, in the calling process, so a router made before a fork
//! works in every child), and returns; `atc_router_sync_ready` says, with one atomic load,
//! whether an outcome is ready; `atc_router_sync_apply`, called between two requests, swaps the
//! built table in (O(1)) or reports why the list was refused, one outcome per version handed
//! over, in order. The current table answers requests the whole time.
//!
//! Lists cross over in two forms:
//! - an `atc_route_list` (`route_list.rs`: the core's entry list), filled in as many chunks as the caller likes
//!   (each `atc_route_list_add` or `atc_route_list_remove` copies its chunk's bytes into the
//!   list's one buffer: a caller that must not stall adds a few thousand routes at a time and
//!   yields in between);
//! - one text in the TSV or JSON format of route files (`atc_router_sync_start_text`), read on
//!   the builder thread: copied, or borrowed without a copy when the caller promises to keep it
//!   (see [`ATC_TEXT_BORROW`]).
//!
//! The builder threads' priority is the process's choice (`builder_settings.rs`).
//!
//! The synchronous calls (`atc_router_add`, `atc_router_remove`, `atc_router_sync`,
//! `atc_router_update`) keep their meaning; a build already started still yields a table
//! holding exactly its list.

use std::ffi::c_char;

use atc_router::{BuildState, Outcome, RouteInput};

use crate::route_list::{take_list, AtcRouteList};
use crate::router::AtcRouter;
use crate::sync::{route_errors, sync_mode, write_route_errors, AtcSyncError, AtcSyncReport};
use crate::{
    bytes_arg, guard, handle, handle_mut, Fail, ATC_ERR_INVALID, ATC_ERR_NULL, ATC_ERR_PANIC,
    ATC_ERR_ROUTES, ATC_OK,
};

/// `atc_router_sync_state`: nothing submitted that is not applied.
pub const ATC_BUILD_IDLE: i32 = 0;
/// `atc_router_sync_state`: a list is queued or being built.
pub const ATC_BUILD_BUILDING: i32 = 1;
/// `atc_router_sync_state`: an outcome waits for `atc_router_sync_apply`.
pub const ATC_BUILD_READY: i32 = 2;

/// `atc_router_sync_start_text`: the text is copied before the call returns.
pub const ATC_TEXT_COPY: i32 = 0;
/// `atc_router_sync_start_text`: the text is read where it is, on the builder thread. The
/// caller keeps it valid and unchanged until `atc_router_sync_apply` has returned the outcome
/// of this version or of a later one, or the router is freed.
pub const ATC_TEXT_BORROW: i32 = 1;

/// `atc_router_sync_apply`: no outcome is ready yet (`atc_router_sync_state` says when).
pub const ATC_ERR_NOT_READY: i32 = -17;

/// `atc_router_sync_apply`: the version in `*version` was never built: a whole list handed over
/// after it, before its build started, took its place. Nothing changed.
pub const ATC_ERR_SUPERSEDED: i32 = -19;

/// A text borrowed from the caller (see [`ATC_TEXT_BORROW`]).
struct Borrowed {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the caller of `atc_router_sync_start_text` keeps the bytes valid and unchanged until
// the builder no longer reads them (the contract of `ATC_TEXT_BORROW`), and nothing writes
// them: sharing a read-only view with the builder thread is sound.
unsafe impl Send for Borrowed {}

impl AsRef<[u8]> for Borrowed {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: see the `Send` impl: valid for `len` bytes while the builder holds it.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Starts bringing the router to the routes of `list`, as version `version`, on the router's
/// builder thread, and returns: the current table keeps answering until
/// `atc_router_sync_apply` swaps the new one in. Takes `list` on `ATC_OK` (do not free it);
/// on failure nothing changes and `list` stays the caller's.
///
/// Versions are the caller's numbers. Every version handed over gets one outcome from
/// `atc_router_sync_apply`, in the order handed over; a whole list supersedes the versions handed
/// over before it whose build has not started (their outcome is `ATC_ERR_SUPERSEDED`); one
/// being built is finished. `mode` is `ATC_SYNC_ALL_OR_NOTHING` or `ATC_SYNC_APPLY_VALID`, as for
/// `atc_router_sync`. `ATC_ERR_INVALID` for a list with removals (a list of changes:
/// `atc_router_update_start`).
///
/// # Safety
/// `router` is a live handle; `list` a live list; `errbuf` points to `*errbuf_len` bytes (or
/// NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_router_sync_start(
    router: *mut AtcRouter,
    version: u64,
    list: *mut AtcRouteList,
    mode: i32,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        let mode = sync_mode(mode)?;
        // SAFETY: `list` is NULL or a live list (the caller's contract).
        let input = unsafe { take_list(list, false) }?;
        r.table.submit(version, input, mode);
        Ok(ATC_OK)
    })
}

/// Starts applying the list of changes in `list` (routes to put in, ids to take out: see
/// `atc_router_update`), as version `version`, on the router's builder thread, and returns;
/// otherwise as `atc_router_sync_start`, except that a list of changes supersedes no version
/// handed over before it (every change reaches the table, in order). Takes `list` on `ATC_OK`.
///
/// # Safety
/// As `atc_router_sync_start`.
#[no_mangle]
pub unsafe extern "C" fn atc_router_update_start(
    router: *mut AtcRouter,
    version: u64,
    list: *mut AtcRouteList,
    mode: i32,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        let mode = sync_mode(mode)?;
        // SAFETY: `list` is NULL or a live list (the caller's contract).
        let input = unsafe { take_list(list, true) }?;
        r.table.submit(version, input, mode);
        Ok(ATC_OK)
    })
}

/// Starts bringing the router to the route list in `text` (`len` bytes, TSV or JSON as
/// `atc-router check` reads route files), read and built on the router's builder thread;
/// otherwise as `atc_router_sync_start`. `flags` is `ATC_TEXT_COPY` (the text is copied; a
/// 10 MB list costs about a millisecond) or `ATC_TEXT_BORROW` (no copy: the caller keeps the
/// text valid and unchanged until `atc_router_sync_apply` has returned the outcome of this
/// version or a later one, or the router is freed).
///
/// # Safety
/// `router` is a live handle; `text` points to `len` bytes (see `flags` for how long);
/// `errbuf` points to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_router_sync_start_text(
    router: *mut AtcRouter,
    version: u64,
    text: *const c_char,
    len: usize,
    flags: i32,
    mode: i32,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        let mode = sync_mode(mode)?;
        // SAFETY: `text` is NULL or points to `len` readable bytes (the caller's contract).
        let bytes = unsafe { bytes_arg(text, len, "text") }?;
        let input = match flags {
            ATC_TEXT_COPY => RouteInput::Text(Box::new(bytes.to_vec())),
            ATC_TEXT_BORROW => RouteInput::Text(Box::new(Borrowed {
                ptr: bytes.as_ptr(),
                len: bytes.len(),
            })),
            _ => {
                return Err(Fail::new(
                    ATC_ERR_INVALID,
                    format_args!(
                        "{flags} is not a text flag (expected ATC_TEXT_COPY or ATC_TEXT_BORROW)"
                    ),
                ))
            }
        };
        r.table.submit(version, input, mode);
        Ok(ATC_OK)
    })
}

/// Where the router's background sync is: `ATC_BUILD_IDLE`, `ATC_BUILD_BUILDING` (a list is
/// queued or being built; `*version` is the newest started) or `ATC_BUILD_READY` (an outcome
/// waits for `atc_router_sync_apply`; `*version` is its version). `version` may be NULL.
/// `ATC_BUILD_READY` is answered from one atomic load, cheap enough for every request.
///
/// # Safety
/// `router` is a live handle; `version` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn atc_router_sync_state(router: *mut AtcRouter, version: *mut u64) -> i32 {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || {
        // SAFETY: `router` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let r = unsafe { handle_mut(router, "router") }?;
        let (state, v) = match r.table.state() {
            BuildState::Idle => (ATC_BUILD_IDLE, None),
            BuildState::Building(v) => (ATC_BUILD_BUILDING, Some(v)),
            BuildState::Ready(v) => (ATC_BUILD_READY, Some(v)),
        };
        if let (Some(v), false) = (v, version.is_null()) {
            // SAFETY: `version` is non-NULL (checked above) and writable (the caller's contract).
            unsafe { *version = v };
        }
        Ok(state)
    })
}

/// Whether an outcome is ready: 1 or 0 (or `ATC_ERR_NULL`). One atomic load and no lock: what a
/// gateway asks before every request.
///
/// # Safety
/// `router` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn atc_router_sync_ready(router: *const AtcRouter) -> i32 {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        Ok(i32::from(r.table.is_ready()))
    })
}

/// Applies the next outcome of the background builds, if one is ready, between two requests
/// (one per version handed over, in order):
/// - `ATC_OK`: the new table is swapped in (in O(1); the replaced one is freed, or brought up
///   to date for the next build, on the builder thread). `*version` is its version; `report`,
///   and for `ATC_SYNC_APPLY_VALID` the routes left out, are written as by `atc_router_sync`.
/// - `ATC_ERR_ROUTES`: the list of `*version` was refused (some route invalid, or the text is
///   not a route list: then `errbuf` says why and no route is listed); the current table stays.
///   `errbuf` holds the one message of a refused list.
/// - `ATC_ERR_SUPERSEDED`: `*version` was never built (a whole list handed over after it took
///   its place); nothing changed.
/// - `ATC_ERR_PANIC`: building `*version` panicked (a bug); the current table stays.
/// - `ATC_ERR_NOT_READY`: nothing to apply (`atc_router_sync_state` says whether a build runs).
///
/// Errors are written as by `atc_router_sync`: `index` is the route's position in the list
/// minus one (its place from 0, unless the caller gave it a `position`), its line minus one for
/// a text. `version`, `report`, `errors`/`errors_len` and `msgbuf`/`msgbuf_len` may be NULL.
///
/// # Safety
/// `router` is a live handle; the output pointers are NULL or valid as for `atc_router_sync`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn atc_router_sync_apply(
    router: *mut AtcRouter,
    version: *mut u64,
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
        // SAFETY: `errors_len` is NULL or valid for reads (the caller's contract).
        let errors_cap = unsafe { errors_len.as_ref() }.copied().unwrap_or(0);
        if errors_cap > 0 && errors.is_null() {
            return Err(Fail::new(
                ATC_ERR_NULL,
                format_args!("`errors` is NULL but `*errors_len` is {errors_cap}"),
            ));
        }
        let Some(outcome) = r.table.apply() else {
            return Err(Fail::new(
                ATC_ERR_NOT_READY,
                "no background sync outcome is ready",
            ));
        };
        if !version.is_null() {
            // SAFETY: `version` is non-NULL (checked above) and writable (the caller's contract).
            unsafe { *version = outcome.version() };
        }
        let mut counts = AtcSyncReport::default();
        let (errs, built, message) = match outcome {
            Outcome::Built { report: done, .. } => {
                counts.added = done.added;
                counts.removed = done.removed;
                counts.changed = done.changed;
                counts.unchanged = done.unchanged;
                (route_errors(&done.errors), true, String::new())
            }
            Outcome::Refused {
                errors: list_errors,
                message,
                ..
            } => (route_errors(&list_errors), false, message),
            Outcome::Superseded { version: v, by } => {
                return Err(Fail::new(
                    ATC_ERR_SUPERSEDED,
                    format_args!("version {v} was superseded by version {by} before it was built"),
                ));
            }
            Outcome::Panicked { message, .. } => {
                return Err(Fail::new(
                    ATC_ERR_PANIC,
                    format_args!("the background build panicked: {message}"),
                ));
            }
        };
        counts.errors = errs.len();
        counts.messages_len = errs.iter().map(|e| e.msg.len() + 1).sum();
        if !report.is_null() {
            // SAFETY: `report` is non-NULL (checked above) and writable (the caller's contract).
            unsafe { *report = counts };
        }
        // SAFETY: `errors`, `msgbuf` and their lengths are valid or NULL (the caller's contract),
        // and `errors` is non-NULL when its capacity is not 0 (checked above).
        unsafe { write_route_errors(&errs, errors, errors_len, msgbuf, msgbuf_len) };
        if built {
            Ok(ATC_OK)
        } else {
            Err(Fail::new(ATC_ERR_ROUTES, message))
        }
    })
}
