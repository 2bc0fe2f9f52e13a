//! Syncs built off the calling thread: start, poll, apply (the core's [`Builder`]).
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
//! - an `atc_route_list` (the core's entry list), filled in as many chunks as the caller likes
//!   (each `atc_route_list_add` or `atc_route_list_remove` copies its chunk's bytes into the
//!   list's one buffer: a caller that must not stall adds a few thousand routes at a time and
//!   yields in between);
//! - one text in the TSV or JSON format of route files (`atc_router_sync_start_text`), read on
//!   the builder thread: copied, or borrowed without a copy when the caller promises to keep it
//!   (see [`ATC_TEXT_BORROW`]).
//!
//! The builder threads' priority is the process's choice (`atc_builder_schedule`,
//! `atc_builder_priority`): by default the thread that builds runs under `SCHED_IDLE`, taking
//! only the CPU requests leave, and a second one at the caller's priority takes a build over
//! once a version has waited `boost_after_ms`.
//!
//! The synchronous calls (`atc_router_add`, `atc_router_remove`, `atc_router_sync`,
//! `atc_router_update`) keep their meaning; a build already started still yields a table
//! holding exactly its list.
//!
//! [`Builder`]: atc_router::Builder

use std::ffi::c_char;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use atc_router::route_list::EntryList;
use atc_router::{BuildState, Builder, Lane, Outcome, RouteInput};

use crate::router::AtcRouter;
use crate::sync::{
    position, push_removal, push_route, route_errors, route_slice, sync_mode, write_route_errors,
    AtcRoute, AtcSyncError, AtcSyncReport,
};
use crate::{
    bytes_arg, guard, guard_ptr, handle, handle_mut, Fail, ATC_ERR_INVALID, ATC_ERR_NULL,
    ATC_ERR_PANIC, ATC_ERR_ROUTES, ATC_OK,
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

/// A route list being collected for `atc_router_sync_start` (a whole list) or
/// `atc_router_update_start` / `atc_router_update` (a list of changes). Opaque.
//
// Invariant: the routes lent (`atc_route_list_lend`) come after every entry of `list`, in the
// order lent; anything else appended to the list first copies them into `list` (`settle`), so
// the list's order is always the order the caller handed its entries over in.
#[derive(Debug, Default)]
pub struct AtcRouteList {
    pub(crate) list: EntryList,
    lent: Lent,
}

impl AtcRouteList {
    /// Copies the routes lent into `list` (reading the caller's memory), in order.
    fn settle(&mut self) -> &mut EntryList {
        self.lent.read_into(&mut self.list);
        &mut self.list
    }

    /// Every entry, lent ones read: the list itself, or a copy when routes were lent (a list
    /// the caller keeps is not changed by reading it).
    pub(crate) fn read(&self) -> std::borrow::Cow<'_, EntryList> {
        if self.lent.0.is_empty() {
            return std::borrow::Cow::Borrowed(&self.list);
        }
        let mut list = self.list.clone();
        Lent(self.lent.0.clone()).read_into(&mut list);
        std::borrow::Cow::Owned(list)
    }

    /// The number of entries, lent ones included.
    fn len(&self) -> usize {
        self.list.len() + self.lent.0.len()
    }
}

/// Routes lent by the caller: their `atc_route` values (pointers into the caller's memory), not
/// read until `read_into`.
#[derive(Debug, Default)]
struct Lent(Vec<AtcRoute>);

// SAFETY: the caller of `atc_route_list_lend` keeps the memory the routes point to valid and
// unchanged until the builder no longer reads it (its contract), and nothing writes it: reading
// it from the builder thread is sound.
unsafe impl Send for Lent {}

impl Lent {
    /// Appends the routes to `list`, copied (each at its position, given when it was lent).
    fn read_into(&mut self, list: &mut EntryList) {
        for route in self.0.drain(..) {
            let at = position(&route, list.len() + 1);
            // SAFETY: the route's pointers are valid for their lengths until this read (the
            // contract of `atc_route_list_lend`).
            unsafe { push_route(list, at, &route) };
        }
    }
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
/// A route that cannot be read (an id that is not a UUID, text that is not UTF-8, a NULL pointer
/// with a length) is kept as an invalid entry of the list, reported by `atc_router_sync_apply`
/// (or `atc_router_update`) at its position; an id repeated in the list is the sync's to refuse.
/// A route whose `position` is 0 gets its place among the entries added so far, from 1.
/// `ATC_ERR_NULL` for a NULL `list`, or `routes` NULL with `n` > 0 (nothing appended).
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
        let list = l.settle();
        for route in routes {
            let at = position(route, list.len() + 1);
            // SAFETY: the route's pointers are valid for their lengths (the caller's contract).
            unsafe { push_route(list, at, route) };
        }
        Ok(ATC_OK)
    })
}

/// Appends `n` routes to `list` without reading them: only the `atc_route` values are copied,
/// and the bytes they point to are read (as `atc_route_list_add` reads them: an unreadable
/// route is an invalid entry at its position) on the builder thread when the build of the list
/// starts, or by this library before anything else is appended to the list, or by
/// `atc_router_sync` / `atc_router_update`. A caller that hands a large list over this way does
/// no more than fill the `atc_route` values: no copy, no check on its thread. The bytes must stay
/// valid and unchanged until then; since the caller cannot tell when a build starts, that is:
/// until `atc_router_sync_apply` has returned the outcome of the version that took the list (or
/// of a later one), or the router is freed; for a list not handed over, until it is freed or
/// cleared or another entry is appended. `ATC_ERR_NULL` as for `atc_route_list_add`.
///
/// # Safety
/// `list` is a live list; `routes` points to `n` routes whose pointers are valid for their
/// lengths for as long as said above; `errbuf` to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_route_list_lend(
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
        // A route without a position gets its place now, as a copied one would.
        let first = l.len() + 1;
        l.lent
            .0
            .extend(routes.iter().enumerate().map(|(i, r)| AtcRoute {
                position: if r.position == 0 {
                    first + i
                } else {
                    r.position
                },
                ..*r
            }));
        Ok(ATC_OK)
    })
}

/// Appends an entry the caller could not read itself (a value of the wrong type in its own
/// list, say), at `position` (from 1; 0: its place among the entries added so far), with `why`
/// (`why_len` bytes of UTF-8; not valid UTF-8 is replaced) and its id when it has one (`id` NULL
/// or not a UUID: none): an invalid entry with that reason, which `atc_router_sync_apply` (or
/// `atc_router_sync`) reports as the list's other errors, and whose id still counts (a later
/// entry with it repeats it; a known route with it keeps its current version in apply-valid
/// mode).
///
/// # Safety
/// `list` is a live list; `id` points to `id_len` bytes and `why` to `why_len` bytes (or NULL
/// with 0); `errbuf` to `*errbuf_len` bytes (or NULLs).
#[no_mangle]
pub unsafe extern "C" fn atc_route_list_add_unreadable(
    list: *mut AtcRouteList,
    position: usize,
    id: *const c_char,
    id_len: usize,
    why: *const c_char,
    why_len: usize,
    errbuf: *mut c_char,
    errbuf_len: *mut usize,
) -> i32 {
    guard(errbuf, errbuf_len, || {
        // SAFETY: `list` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let l = unsafe { handle_mut(list, "list") }?;
        let list = l.settle();
        // SAFETY: `why` is NULL or points to `why_len` readable bytes (the caller's contract).
        let why = String::from_utf8_lossy(unsafe { bytes_arg(why, why_len, "why") }?).into_owned();
        // SAFETY: `id` is NULL or points to `id_len` readable bytes (the caller's contract).
        let id = unsafe { crate::str_arg(id, id_len, "id") }
            .ok()
            .filter(|s| !s.is_empty())
            .and_then(|s| crate::router::parse_uuid(s).ok());
        let at = atc_router::route_list::Position::Item(if position == 0 {
            list.len() + 1
        } else {
            position
        });
        list.push_unreadable(at, id, atc_router::route_list::UnreadKind::Malformed, &why);
        Ok(ATC_OK)
    })
}

/// Empties `list` for the next one, keeping its memory (a caller that syncs the same table again
/// allocates nothing).
///
/// # Safety
/// `list` is NULL or a live list.
#[no_mangle]
pub unsafe extern "C" fn atc_route_list_clear(list: *mut AtcRouteList) -> i32 {
    crate::guard_status(|| {
        // SAFETY: `list` is NULL or a live handle that nothing else uses during this call (the
        // caller's contract).
        let l = unsafe { handle_mut(list, "list") }?;
        l.list.clear();
        l.lent.0.clear();
        Ok(ATC_OK)
    })
}

/// Appends the removal of each of `n` route ids to `list` (only `id`, `id_len` and `position` of
/// each `atc_route` are read), making it a list of changes, for `atc_router_update_start` or
/// `atc_router_update`. An id that cannot be read is an invalid entry, as for
/// `atc_route_list_add`; the id of a route the router does not hold is taken out of nothing.
///
/// # Safety
/// As `atc_route_list_add`.
#[no_mangle]
pub unsafe extern "C" fn atc_route_list_remove(
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
        let list = l.settle();
        for route in routes {
            let at = position(route, list.len() + 1);
            // SAFETY: the route's id is valid for its length (the caller's contract).
            unsafe { push_removal(list, at, route) };
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

/// How many nice levels below the thread that starts it a builder thread at normal priority runs
/// (see `atc_builder_priority`).
static BUILDER_NICE: AtomicI32 = AtomicI32::new(ATC_BUILDER_NICE_DEFAULT);

/// The default of `atc_builder_priority`: the lowest nice level. A thread at nice 19 still gets
/// its CFS share when requests keep every CPU busy (so a waiting version is built), but a
/// worker at nice 0 outweighs it about 70 to 1 and preempts it on wakeup.
pub const ATC_BUILDER_NICE_DEFAULT: i32 = 19;

/// `atc_builder_schedule`: the thread that builds runs under `SCHED_IDLE` (the default).
pub const ATC_BUILDER_IDLE: i32 = 0;
/// `atc_builder_schedule`: the thread that builds runs at the priority of the thread that
/// started it, less `atc_builder_priority`'s nice levels.
pub const ATC_BUILDER_NORMAL: i32 = 1;

/// The default of `atc_builder_schedule`'s `boost_after_ms`.
pub const ATC_BUILDER_BOOST_AFTER_MS_DEFAULT: u32 = 3000;

/// Most threads a build may use (`atc_builder_threads`).
pub const ATC_BUILDER_THREADS_MAX: i32 = 64;

/// `atc_builder_threads`: how many threads a fresh build may use.
static BUILDER_THREADS: AtomicI32 = AtomicI32::new(1);

/// The policy of `atc_builder_schedule`.
static BUILDER_POLICY: AtomicI32 = AtomicI32::new(ATC_BUILDER_IDLE);
/// `boost_after_ms` of `atc_builder_schedule` (0: never).
static BUILDER_BOOST_MS: AtomicU32 = AtomicU32::new(ATC_BUILDER_BOOST_AFTER_MS_DEFAULT);

/// Run first on every builder thread, with its lane: the background lane goes under
/// `SCHED_IDLE` (policy `ATC_BUILDER_IDLE`), or `BUILDER_NICE` levels down; the boosted lane
/// `BUILDER_NICE` levels down. On Linux a policy and a nice value belong to a thread, so the
/// worker that routes requests keeps its own.
fn set_priority(lane: Lane) {
    if lane == Lane::Background && BUILDER_POLICY.load(Ordering::Relaxed) == ATC_BUILDER_IDLE {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler(0, ...) changes only the calling thread's policy; `param`
        // is valid for the call. Lowering a thread to SCHED_IDLE needs no privilege; a failure
        // leaves the thread at its priority.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        }
        return;
    }
    let delta = BUILDER_NICE.load(Ordering::Relaxed);
    if delta > 0 {
        // SAFETY: nice(2) takes an integer and changes only the calling thread's priority; a
        // failure (it cannot fail when lowering) leaves the priority as it was.
        unsafe {
            libc::nice(delta);
        }
    }
}

/// Run first on every helper thread a build starts (`atc_builder_threads`), with the lane it
/// helps. The lane's thread starts it, after `set_priority` ran there, and Linux passes the
/// policy and the nice value on to a new thread, so the helper runs as its lane already;
/// `set_priority` again would lower the nice value a second step. Only the policy, an absolute
/// value, is set again, so that a helper of the idle lane is under `SCHED_IDLE` whatever it
/// inherited.
fn set_helper_priority(lane: Lane) {
    if lane == Lane::Background && BUILDER_POLICY.load(Ordering::Relaxed) == ATC_BUILDER_IDLE {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: as in `set_priority`: only the calling thread's policy changes.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        }
    }
}

/// Sets how many threads (1, the default, to `ATC_BUILDER_THREADS_MAX`) a fresh build of the
/// routers whose builder starts from now on may use, for the whole process: a background sync of
/// a list most of which is new (a first load above all) prepares its routes and builds its index
/// on the builder thread and up to `threads - 1` helpers, started for the build and ended with
/// it, each at the priority of the builder thread it helps (under `SCHED_IDLE` with it). The
/// table built is exactly the one one thread builds; it is ready sooner where CPUs are idle.
/// Returns the previous value, or `ATC_ERR_INVALID` (nothing changed) outside 1 to
/// `ATC_BUILDER_THREADS_MAX`.
#[no_mangle]
pub extern "C" fn atc_builder_threads(threads: i32) -> i32 {
    if !(1..=ATC_BUILDER_THREADS_MAX).contains(&threads) {
        return crate::ATC_ERR_INVALID;
    }
    BUILDER_THREADS.swap(threads, Ordering::Relaxed)
}

/// Sets how many nice levels (0 to 19) below the thread that starts them the builder threads
/// that run at normal priority (the boosted lane, and every build under `ATC_BUILDER_NORMAL`)
/// started from now on run (default `ATC_BUILDER_NICE_DEFAULT`), for the whole process. 0
/// keeps the starting thread's priority. Returns the previous value, or `ATC_ERR_INVALID`
/// (nothing changed) outside 0 to 19.
#[no_mangle]
pub extern "C" fn atc_builder_priority(nice: i32) -> i32 {
    if !(0..=19).contains(&nice) {
        return crate::ATC_ERR_INVALID;
    }
    BUILDER_NICE.swap(nice, Ordering::Relaxed)
}

/// Sets, for the whole process and the builders whose threads start from now on, how builds
/// are scheduled. `policy` `ATC_BUILDER_IDLE` (the default): the thread that builds runs under
/// Linux's `SCHED_IDLE`, so that it takes only the CPU no request wants (a build never delays a
/// request, but takes longer while requests keep every CPU busy); and once the oldest version
/// handed over and not yet built has waited `boost_after_ms` milliseconds (0: never;
/// default `ATC_BUILDER_BOOST_AFTER_MS_DEFAULT`), a second thread of the builder, started at the
/// caller's priority less `atc_builder_priority`, takes the build over (restarting it: the idle
/// thread gives it up at its next check) and builds until nothing waits. An unprivileged thread
/// cannot leave `SCHED_IDLE`, which is why the second thread is started with the first.
/// `ATC_BUILDER_NORMAL`: one thread, at the caller's priority less `atc_builder_priority`.
/// `ATC_OK`, or `ATC_ERR_INVALID` (nothing changed) for another policy.
#[no_mangle]
pub extern "C" fn atc_builder_schedule(policy: i32, boost_after_ms: u32) -> i32 {
    if policy != ATC_BUILDER_IDLE && policy != ATC_BUILDER_NORMAL {
        return crate::ATC_ERR_INVALID;
    }
    BUILDER_POLICY.store(policy, Ordering::Relaxed);
    BUILDER_BOOST_MS.store(boost_after_ms, Ordering::Relaxed);
    ATC_OK
}

/// The router's builder, made on first use and told what the router holds if it was changed
/// directly since (a copy of its routes: O(routes), once per background sync after direct
/// changes, never for a router only changed in the background).
fn builder(r: &mut AtcRouter) -> &mut Builder {
    let (schema, limits) = (r.router.schema().clone(), *r.router.limits());
    let fresh = r.builder.is_none();
    let publish = r.publish_dir.clone();
    let shelf = r.sealed.clone();
    let keep_shadow = !r.drop_shadow;
    let b = r.builder.get_or_insert_with(|| {
        let mut b = Builder::new(schema, limits);
        b.on_thread_start(set_priority);
        b.on_helper_start(set_helper_priority);
        // In range: `atc_builder_threads` checked it.
        let threads = BUILDER_THREADS.load(Ordering::Relaxed);
        if b.build_threads(threads.max(1) as usize).is_err() {
            let _ = b.build_threads(1);
        }
        let boost = BUILDER_BOOST_MS.load(Ordering::Relaxed);
        if BUILDER_POLICY.load(Ordering::Relaxed) == ATC_BUILDER_IDLE && boost > 0 {
            b.boost_after(Some(std::time::Duration::from_millis(u64::from(boost))));
        }
        if let Some((dir, keep_tables)) = publish {
            b.publish_with(crate::image::publisher(dir, shelf), keep_tables);
        }
        if !keep_shadow {
            b.keep_shadow(false);
        }
        b
    });
    if std::mem::take(&mut r.changed) || (fresh && !r.router.is_empty()) {
        b.rebase(&r.router);
    }
    b
}

/// Takes `list` for a background build: what the builder gets, when `list` is a live list of the
/// right kind (a whole list has no removals); on failure the list stays the caller's. Routes
/// lent are read on the builder thread.
///
/// # Safety
/// `list` is NULL or a live list from `atc_route_list_new`.
unsafe fn take_list(list: *mut AtcRouteList, changes: bool) -> crate::Res<RouteInput> {
    // SAFETY: `list` is NULL or a live handle (the caller's contract).
    let l = unsafe { handle(list, "list") }?;
    if !changes && l.list.removals() > 0 {
        return Err(Fail::new(
            ATC_ERR_INVALID,
            format_args!(
                "the list has {} removal(s): a list of changes goes to atc_router_update_start",
                l.list.removals()
            ),
        ));
    }
    // SAFETY: `list` came from Box::into_raw in this library and is freed once (the caller's
    // contract).
    let AtcRouteList { list, mut lent } = *unsafe { Box::from_raw(list) };
    Ok(match (lent.0.is_empty(), changes) {
        (true, false) => RouteInput::List(list),
        (true, true) => RouteInput::Changes(list),
        (false, changes) => RouteInput::Lent {
            list,
            changes,
            read: Box::new(move |list: &mut EntryList| lent.read_into(list)),
        },
    })
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
        builder(r).submit(version, input, mode);
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
        // What this call holds the caller is the update's hold time in the router's stats.
        let started = std::time::Instant::now();
        let AtcRouter {
            router: current,
            builder: b,
            ..
        } = &mut *r;
        let Some(outcome) = b.as_mut().and_then(|b| b.apply_to(current)) else {
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
        let mut counts = AtcSyncReport::default();
        let (errs, built, message) = match outcome {
            Outcome::Built {
                version: v,
                report: done,
                published,
                ..
            } => {
                if let Some(p) = published {
                    r.published = Some((v, p));
                    crate::image::hold_sealed(r, v);
                }
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
                // The builder no longer knows the table in force: it learns it again before the
                // next build.
                r.changed = true;
                r.router.record_update(false, started.elapsed(), build_time);
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
        r.router.record_update(built, started.elapsed(), build_time);
        if built {
            Ok(ATC_OK)
        } else {
            Err(Fail::new(ATC_ERR_ROUTES, message))
        }
    })
}

/// Notes a synchronous change of the router: the builder learns what the router holds before
/// its next background sync.
pub(crate) fn changed_directly(r: &mut AtcRouter) {
    r.changed = true;
}
