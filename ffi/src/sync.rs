//! Bringing a router to a whole desired route list in one call (`atc_router_sync`).
//!
//! The core's [`Router::sync`] does the work: only routes whose priority or expression text
//! differ are parsed again, and the router changes in one step after everything was prepared.
//! This layer validates the C input (pointers, UTF-8, UUIDs, repeated ids), maps every error back
//! to the index of the route it belongs to, and writes the outcome to caller buffers.
//!
//! A sync cannot be repeated to fetch what did not fit (the second run would report the routes
//! the first one added as unchanged), so unlike the other functions it does not fail with
//! `ATC_ERR_BUFFER`: it always does its work, writes the errors that fit, and reports the totals.
//!
//! [`Router::sync`]: atc_router::Router::sync

use std::ffi::c_char;

use atc_router::{RouteSpec, SyncMode, Uuid};
use rustc_hash::FxHashMap;

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

/// A route as the core gets it: its expression is the caller's text, or the current version's
/// (kept) when the new one could not be read.
enum Entry<'a> {
    Given(RouteSpec<'a>),
    /// Index into the kept versions (priority, expression).
    Kept(Uuid, usize),
}

pub(crate) struct RouteError {
    pub(crate) index: usize,
    pub(crate) code: i32,
    pub(crate) msg: String,
}

/// Reads the list: what goes to the core, the index of each id's first occurrence, and (in
/// `errors`) the routes that are invalid before the core sees them.
///
/// # Safety
/// `routes` holds `n` routes whose pointers are valid for their lengths.
unsafe fn read_routes<'a>(
    r: &AtcRouter,
    routes: &[AtcRoute],
    kept: &mut Vec<(u64, String)>,
    errors: &mut Vec<RouteError>,
) -> (Vec<Entry<'a>>, FxHashMap<Uuid, usize>) {
    let mut entries = Vec::with_capacity(routes.len());
    // Id -> index of its first occurrence: finds repeated ids, and maps the core's errors (which
    // name ids) back to indexes.
    let mut first: FxHashMap<Uuid, usize> = FxHashMap::default();
    first.reserve(routes.len());
    for (index, route) in routes.iter().enumerate() {
        let mut fail = |code: i32, msg: String| errors.push(RouteError { index, code, msg });
        let id = match str_arg(route.id, route.id_len, "id").and_then(parse_uuid) {
            Ok(id) => id,
            Err(e) => {
                fail(e.code, e.msg);
                continue;
            }
        };
        if let Some(&at) = first.get(&id) {
            fail(
                ATC_ERR_DUPLICATE,
                format!("route id {id} is already used by route {at} of the list"),
            );
            continue;
        }
        first.insert(id, index);
        match str_arg(route.expr, route.expr_len, "expr") {
            Ok(expression) => entries.push(Entry::Given(RouteSpec {
                id,
                priority: route.priority,
                expression,
            })),
            Err(e) => {
                // The same rule as the core's for an expression that does not parse: in
                // apply-valid mode a known route keeps its current version rather than being
                // dropped. The core never sees the unreadable text, so it is given the current
                // version, which it finds unchanged.
                if let Some(current) = r.router.get(id) {
                    kept.push((current.priority(), current.source().to_owned()));
                    entries.push(Entry::Kept(id, kept.len() - 1));
                }
                fail(e.code, e.msg);
            }
        }
    }
    (entries, first)
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
        let r = handle_mut(router, "router")?;
        let started = std::time::Instant::now();
        let mode = sync_mode(mode)?;
        crate::background::changed_directly(r);
        let errors_cap = errors_len.as_ref().copied().unwrap_or(0);
        if errors_cap > 0 && errors.is_null() {
            return Err(Fail::new(
                ATC_ERR_NULL,
                format_args!("`errors` is NULL but `*errors_len` is {errors_cap}"),
            ));
        }
        let routes = route_slice(routes, n)?;

        let mut kept = Vec::new();
        let mut errs = Vec::new();
        let (entries, first) = read_routes(r, routes, &mut kept, &mut errs);
        let specs: Vec<RouteSpec<'_>> = entries
            .iter()
            .map(|entry| match entry {
                Entry::Given(spec) => *spec,
                Entry::Kept(id, k) => RouteSpec {
                    id: *id,
                    priority: kept[*k].0,
                    expression: &kept[*k].1,
                },
            })
            .collect();

        let core_errors = |list: Vec<(Uuid, atc_router::Error)>, errs: &mut Vec<RouteError>| {
            for (id, e) in list {
                let fail = Fail::from(e);
                errs.push(RouteError {
                    // Every id given to the core is in `first` (repeats never reach it).
                    index: first.get(&id).copied().unwrap_or(usize::MAX),
                    code: fail.code,
                    msg: fail.msg,
                });
            }
        };
        let mut counts = AtcSyncReport::default();
        let applied = match mode {
            // Invalid before the core: refuse, but still let the core check the rest, so that
            // every invalid route is reported at once.
            SyncMode::AllOrNothing if !errs.is_empty() => {
                if let Err(e) = r.router.prepare_sync(&specs, mode) {
                    core_errors(e.errors, &mut errs);
                }
                // Refused here, not by the core's sync (which counts its own).
                let took = started.elapsed();
                r.router.record_update(false, took, took);
                false
            }
            _ => match r.router.sync(&specs, mode) {
                Ok(done) => {
                    if done.stale {
                        return Err(Fail::new(ATC_ERR_PANIC, "sync plan was stale"));
                    }
                    counts.added = done.added;
                    counts.removed = done.removed;
                    counts.changed = done.changed;
                    // Kept routes went to the core unchanged, but they are errors, not
                    // unchanged routes.
                    counts.unchanged = done.unchanged - kept.len();
                    core_errors(done.errors, &mut errs);
                    true
                }
                Err(e) => {
                    core_errors(e.errors, &mut errs);
                    false
                }
            },
        };
        errs.sort_by_key(|e| e.index);
        counts.errors = errs.len();
        counts.messages_len = errs.iter().map(|e| e.msg.len() + 1).sum();
        write_route_errors(&errs, errors, errors_len, msgbuf, msgbuf_len);
        if !report.is_null() {
            *report = counts;
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
    Ok(std::slice::from_raw_parts(routes, n))
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
    let msg_cap = if has_msgbuf { *msgbuf_len } else { 0 };
    let mut used = 0usize;
    let written = errors_len.as_ref().map_or(0, |&cap| errs.len().min(cap));
    for (k, e) in errs[..written].iter().enumerate() {
        let (message, message_len) = if used < msg_cap {
            let room = msg_cap - used;
            let mut len = e.msg.len().min(room - 1);
            while !e.msg.is_char_boundary(len) {
                len -= 1;
            }
            let at = msgbuf.add(used);
            std::ptr::copy_nonoverlapping(e.msg.as_ptr(), at.cast::<u8>(), len);
            *at.add(len) = 0;
            used += len + 1;
            (at.cast_const(), len)
        } else {
            (std::ptr::null(), 0)
        };
        *errors.add(k) = AtcSyncError {
            index: e.index,
            code: e.code,
            message,
            message_len,
        };
    }
    if !errors_len.is_null() {
        *errors_len = written;
    }
    if has_msgbuf {
        *msgbuf_len = used;
    }
}
