//! Syncs built off the calling thread: start, poll, apply (the core's [`Builder`]).
//!
//! A gateway worker must never wait for a build. `atc_router_sync_start` hands a whole desired
//! list to the router's builder thread (started by the first call, in the calling process, so
//! a router made before a fork works in every child) and returns; `atc_router_sync_state`
//! says, with one atomic load, whether an outcome is ready; `atc_router_sync_apply`, called
//! between two requests, swaps the built table in (O(1)) or reports why the list was refused.
//! The current table answers requests the whole time.
//!
//! Lists cross over in two forms:
//! - routes, collected in an `atc_route_list` in as many chunks as the caller likes (each
//!   `atc_route_list_add` copies its chunk: a caller that must not stall adds a few thousand
//!   routes at a time and yields in between);
//! - one text in the TSV or JSON format of route files (`atc_router_sync_start_text`), read on
//!   the builder thread: copied, or borrowed without a copy when the caller promises to keep it
//!   (see [`ATC_TEXT_BORROW`]).
//!
//! The synchronous calls (`atc_router_add`, `atc_router_remove`, `atc_router_sync`) keep their
//! meaning; a build already started still yields a table holding exactly its list.
//!
//! [`Builder`]: atc_router::Builder

use std::ffi::c_char;
use std::sync::atomic::{AtomicI32, Ordering};

use atc_router::route_list::{Problem, ProblemKind};
use atc_router::{BuildState, Builder, ListError, Outcome, OwnedRoute, RouteInput};

use crate::router::{parse_uuid, AtcRouter};
use crate::sync::{
    route_slice, sync_mode, write_route_errors, AtcRoute, AtcSyncError, AtcSyncReport, RouteError,
};
use crate::{
    bytes_arg, guard, guard_ptr, handle, handle_mut, str_arg, Fail, ATC_ERR_DUPLICATE,
    ATC_ERR_INVALID, ATC_ERR_NULL, ATC_ERR_PANIC, ATC_ERR_ROUTES, ATC_ERR_UUID, ATC_OK,
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

/// A route list being collected for `atc_router_sync_start`. Opaque.
#[derive(Debug, Default)]
pub struct AtcRouteList {
    routes: Vec<OwnedRoute>,
    lines: Vec<usize>,
    problems: Vec<Problem>,
    /// Routes added so far, readable or not: the next one's position is `count`.
    count: usize,
}

/// A new, empty route list. Free it with `atc_route_list_free`, unless
/// `atc_router_sync_start` took it.
#[no_mangle]
pub extern "C" fn atc_route_list_new() -> *mut AtcRouteList {
    guard_ptr(std::ptr::null_mut(), std::ptr::null_mut(), || {
        Ok(Box::into_raw(Box::default()))
    })
}

/// Frees a route list (NULL is ignored).
///
/// # Safety
/// `list` is NULL or a list from `atc_route_list_new` not yet freed or taken.
#[no_mangle]
pub unsafe extern "C" fn atc_route_list_free(list: *mut AtcRouteList) {
    if !list.is_null() {
        crate::guard_status(|| {
            // SAFETY: `list` came from Box::into_raw in this library and is freed once (the
            // caller's contract).
            drop(unsafe { Box::from_raw(list) });
            Ok(ATC_OK)
        });
    }
}

/// Appends `n` routes to `list`, copying them: the caller's memory is not used after the call.
/// A route that cannot be read (an id that is not a UUID or repeats an earlier one of the
/// list, text that is not UTF-8, a NULL pointer with a length) is kept as a problem of the
/// list, reported by `atc_router_sync_apply` with its position. `ATC_ERR_NULL` for a NULL
/// `list`, or `routes` NULL with `n` > 0 (nothing appended).
///
/// # Safety
/// `list` is a live list; `routes` points to `n` routes whose pointers are valid for their
/// lengths; `errbuf` to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_route_list_add(
    list: *mut AtcRouteList,
    routes: *const AtcRoute,
    n: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `list` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let l = unsafe { handle_mut(list, "list") }?;
        // SAFETY: `routes` is NULL or points to `n` routes (the caller's contract).
        let routes = unsafe { route_slice(routes, n) }?;
        l.routes.reserve(routes.len());
        l.lines.reserve(routes.len());
        for route in routes {
            l.count += 1;
            let line = l.count;
            let mut problem = |kind, id, message: String| {
                l.problems.push(Problem {
                    line,
                    kind,
                    id,
                    message,
                    first_line: None,
                })
            };
            // SAFETY: `route.id` is NULL or points to `route.id_len` readable bytes (the caller's
            // contract).
            let id = match unsafe { str_arg(route.id, route.id_len, "id") }.and_then(parse_uuid) {
                Ok(id) => id,
                Err(e) => {
                    problem(ProblemKind::BadId, None, e.msg);
                    continue;
                }
            };
            // A repeated id is left to the core's sync, which refuses it as `Router::sync` does
            // (`Error::DuplicateRoute`, reported with the route's position).
            // SAFETY: `route.expr` is NULL or points to `route.expr_len` readable bytes (the
            // caller's contract).
            match unsafe { str_arg(route.expr, route.expr_len, "expr") } {
                Ok(expression) => {
                    l.routes.push(OwnedRoute {
                        id,
                        priority: route.priority,
                        expression: expression.to_owned(),
                    });
                    l.lines.push(line);
                }
                Err(e) => problem(ProblemKind::Malformed, Some(id), e.msg),
            }
        }
        Ok(ATC_OK)
    })
}

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

/// How many nice levels below the thread that starts it a builder thread runs (see
/// `atc_builder_priority`).
static BUILDER_NICE: AtomicI32 = AtomicI32::new(ATC_BUILDER_NICE_DEFAULT);

/// The default of `atc_builder_priority`.
pub const ATC_BUILDER_NICE_DEFAULT: i32 = 0;

/// Run first on every builder thread: lowers its priority by `BUILDER_NICE` levels. On Linux a
/// nice value belongs to a thread, so the worker that routes requests keeps its own.
fn lower_priority() {
    let delta = BUILDER_NICE.load(Ordering::Relaxed);
    if delta > 0 {
        // SAFETY: nice(2) takes an integer and changes only the calling thread's priority; a
        // failure (it cannot fail when lowering) leaves the priority as it was.
        unsafe {
            libc::nice(delta);
        }
    }
}

/// Sets how many nice levels (0 to 19) below the thread that starts them the builder threads
/// started from now on run (default `ATC_BUILDER_NICE_DEFAULT`), for the whole process: a build
/// then takes the CPU the requests leave, rather than competing with them for it, and takes
/// longer when they leave none. 0 keeps the starting thread's priority. Returns the previous
/// value, or `ATC_ERR_INVALID` (nothing changed) outside 0 to 19.
#[no_mangle]
pub extern "C" fn atc_builder_priority(nice: i32) -> i32 {
    if !(0..=19).contains(&nice) {
        return crate::ATC_ERR_INVALID;
    }
    BUILDER_NICE.swap(nice, Ordering::Relaxed)
}

/// The router's builder, made on first use and told what the router holds if it was changed
/// directly since (a copy of its routes: O(routes), once per background sync after direct
/// changes, never for a router only changed in the background).
fn builder(r: &mut AtcRouter) -> &mut Builder {
    let (schema, limits) = (r.router.schema().clone(), *r.router.limits());
    let fresh = r.builder.is_none();
    let publish = r.publish_dir.clone();
    let b = r.builder.get_or_insert_with(|| {
        let mut b = Builder::new(schema, limits);
        b.on_thread_start(lower_priority);
        if let Some((dir, keep_tables)) = publish {
            b.publish_with(crate::image::publisher(dir), keep_tables);
        }
        b
    });
    if std::mem::take(&mut r.changed) || (fresh && !r.router.is_empty()) {
        b.rebase(&r.router);
    }
    b
}

/// Starts bringing the router to the routes of `list`, as version `version`, on the router's
/// builder thread, and returns: the current table keeps answering until
/// `atc_router_sync_apply` swaps the new one in. Takes `list` on `ATC_OK` (do not free it);
/// on failure nothing changes and `list` stays the caller's.
///
/// A list started while an earlier one waits to be built replaces it; one being built is
/// finished. Versions are the caller's numbers: outcomes come in the order lists were started,
/// and an outcome not applied when a newer list is started is dropped (never applied after
/// it). `mode` is `ATC_SYNC_ALL_OR_NOTHING` or `ATC_SYNC_APPLY_VALID`, as for
/// `atc_router_sync`.
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
        // SAFETY: `list` is NULL or a live handle (the caller's contract).
        unsafe { handle(list, "list") }?;
        // SAFETY: `list` came from Box::into_raw in this library and is freed once (the caller's
        // contract).
        let l = *unsafe { Box::from_raw(list) };
        let input = RouteInput::Routes {
            routes: l.routes,
            lines: l.lines,
            problems: l.problems,
        };
        builder(r).submit(version, input, mode);
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
        builder(r).submit(version, input, mode);
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
        let Some(b) = r.builder.as_mut() else {
            return Ok(ATC_BUILD_IDLE);
        };
        let (state, v) = match b.state() {
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
        Ok(i32::from(r.builder.as_ref().is_some_and(Builder::is_ready)))
    })
}

/// Applies the outcome of the background sync, if one is ready, between two requests:
/// - `ATC_OK`: the new table is swapped in (in O(1); the replaced one is freed, or kept up to
///   date for the next sync, on the builder thread). `*version` is its version; `report`, and
///   for `ATC_SYNC_APPLY_VALID` the routes left out, are written as by `atc_router_sync`.
/// - `ATC_ERR_ROUTES`: the list of `*version` was refused (some route invalid, or the text is
///   not a route list: then `errbuf` says why and no route is listed); the current table stays.
/// - `ATC_ERR_PANIC`: building `*version` panicked (a bug); the current table stays.
/// - `ATC_ERR_NOT_READY`: nothing to apply (`atc_router_sync_state` says whether a build runs).
///
/// Errors are written as by `atc_router_sync`: `index` is the route's position in the list
/// (from 0) for a list of routes, its line minus one for a text. `version`, `report`,
/// `errors`/`errors_len` and `msgbuf`/`msgbuf_len` may be NULL.
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
        // What this call holds the caller is the update's hold time in the router's stats.
        let started = std::time::Instant::now();
        let Some(outcome) = r.builder.as_mut().and_then(Builder::take) else {
            return Err(Fail::new(
                ATC_ERR_NOT_READY,
                "no background sync outcome is ready",
            ));
        };
        let build_time = outcome.build_time();
        if !version.is_null() {
            // SAFETY: `version` is non-NULL (checked above) and writable (the caller's contract).
            unsafe { *version = outcome.version() };
        }
        let (errs, built, message) = match outcome {
            Outcome::Built {
                version: v,
                router: built,
                report: done,
                errors: list_errors,
                published,
                ..
            } => {
                if let Some(p) = published {
                    r.published = Some((v, p));
                }
                // The router's stats stay with the handle.
                let old = r.router.replace_with(*built);
                if let Some(b) = r.builder.as_mut() {
                    b.recycle(old);
                }
                if !report.is_null() {
                    // SAFETY: `report` is non-NULL (checked above) and writable (the caller's
                    // contract).
                    unsafe {
                        *report = AtcSyncReport {
                            added: done.added,
                            removed: done.removed,
                            changed: done.changed,
                            unchanged: done.unchanged,
                            ..AtcSyncReport::default()
                        }
                    };
                }
                (route_errors(list_errors), true, String::new())
            }
            Outcome::Refused {
                errors: list_errors,
                message,
                ..
            } => (route_errors(list_errors), false, message),
            Outcome::Panicked { message, .. } => {
                r.router.record_update(false, started.elapsed(), build_time);
                return Err(Fail::new(
                    ATC_ERR_PANIC,
                    format_args!("the background build panicked: {message}"),
                ));
            }
        };
        if !report.is_null() {
            // SAFETY: `report` is non-NULL (checked above) and writable (the caller's contract).
            unsafe {
                (*report).errors = errs.len();
                (*report).messages_len = errs.iter().map(|e| e.msg.len() + 1).sum();
            }
        }
        // SAFETY: `errors`, `msgbuf` and their lengths are valid or NULL (the caller's contract),
        // and `errors` is non-NULL when its capacity is not 0 (checked above).
        unsafe { write_route_errors(&errs, errors, errors_len, msgbuf, msgbuf_len) };
        r.router.record_update(built, started.elapsed(), build_time);
        if built {
            Ok(ATC_OK)
        } else {
            Err(Fail::new(ATC_ERR_ROUTES, message))
        }
    })
}

/// The C form of the builder's errors.
fn route_errors(list: Vec<ListError>) -> Vec<RouteError> {
    list.into_iter()
        .map(|e| {
            let index = e.line().saturating_sub(1);
            match e {
                ListError::Unreadable(p) => RouteError {
                    index,
                    code: match p.kind {
                        ProblemKind::BadId => ATC_ERR_UUID,
                        ProblemKind::DuplicateId => ATC_ERR_DUPLICATE,
                        ProblemKind::BadPriority | ProblemKind::Malformed => ATC_ERR_INVALID,
                    },
                    msg: p.message,
                },
                ListError::Invalid { error, .. } => {
                    let fail = Fail::from(error);
                    RouteError {
                        index,
                        code: fail.code,
                        msg: fail.msg,
                    }
                }
            }
        })
        .collect()
}

/// Notes a synchronous change of the router: the builder learns what the router holds before
/// its next background sync.
pub(crate) fn changed_directly(r: &mut AtcRouter) {
    r.changed = true;
}
