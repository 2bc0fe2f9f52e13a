//! Route lists as C callers hand them over: the `atc_route` form of one route and its one
//! reader (pointers, then the core's reading of ids and texts: `route_list::read_id`,
//! `read_text`), and the `atc_route_list` a caller fills in chunks for a sync, an update or a
//! background build.
//!
//! Invariant: a route the caller handed over is read here and nowhere else; what cannot be
//! read becomes an unreadable entry of the core's list, at the route's position, with the
//! core's words for why (so the sync, not this layer, decides what an unreadable entry means).

use std::ffi::c_char;

use atc_router::route_list::{self, EntryList, Position, UnreadKind};
use atc_router::{RouteInput, Uuid};

use crate::{
    bytes_arg, guard, guard_ptr, handle, handle_mut, Fail, Res, ATC_ERR_INVALID, ATC_ERR_NULL,
    ATC_OK,
};

/// One route of a route list (`atc_router_sync`, `atc_route_list_add`), or, with only `id`
/// (and `position`) read, one removal (`atc_route_list_remove`).
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
    /// Where the route is in the caller's own list, from 1, as its errors name it (`route
    /// #<position>`, and `atc_sync_error.index` is `position - 1`); 0: its place among the
    /// routes handed over, from 1 (for a list added in chunks, counted across them).
    pub position: usize,
}

/// A route's position: its own, or `fallback` (its place among the routes handed over).
pub(crate) fn position(route: &AtcRoute, fallback: usize) -> Position {
    Position::Item(if route.position == 0 {
        fallback
    } else {
        route.position
    })
}

/// Why a part of a route could not be read: the kind of entry a list keeps in its place, and
/// the message.
type Unread = (UnreadKind, String);

/// `len` bytes at `ptr` (a NULL with a length is a malformed entry).
///
/// # Safety
/// `ptr` is NULL or points to `len` readable bytes, for `'a`.
unsafe fn part<'a>(ptr: *const c_char, len: usize, what: &'static str) -> Result<&'a [u8], Unread> {
    // SAFETY: this function's contract.
    unsafe { bytes_arg(ptr, len, what) }.map_err(|f| (UnreadKind::Malformed, f.msg))
}

/// The core's reading of a part of a route, its error kept as an unreadable entry's.
fn core_read<T>(read: Result<T, atc_router::Error>) -> Result<T, Unread> {
    read.map_err(|e| (UnreadKind::of(&e), e.to_string()))
}

/// A route's id, read as the C ABI reads every route id (the core's `route_list::read_id`).
///
/// # Safety
/// `route.id` is NULL or points to `route.id_len` readable bytes.
unsafe fn read_id(route: &AtcRoute) -> Result<Uuid, Unread> {
    // SAFETY: this function's contract.
    core_read(route_list::read_id(unsafe {
        part(route.id, route.id_len, "id")
    }?))
}

/// The one reader of the C form of a route: its id and expression, or what could not be read
/// (with the id, when that could be read: it still counts for the core's rules).
///
/// # Safety
/// `route`'s pointers are NULL or valid for their lengths, for `'a`.
pub(crate) unsafe fn read_route<'a>(
    route: &AtcRoute,
) -> Result<(Uuid, &'a str), (Option<Uuid>, UnreadKind, String)> {
    // SAFETY: this function's contract.
    let id = unsafe { read_id(route) }.map_err(|(kind, why)| (None, kind, why))?;
    // SAFETY: this function's contract.
    let expr = unsafe { part(route.expr, route.expr_len, "expr") }
        .and_then(|bytes| core_read(route_list::read_text(bytes, "expr")));
    expr.map(|expression| (id, expression))
        .map_err(|(kind, why)| (Some(id), kind, why))
}

/// Appends `route` to `list` (copied), at `at`.
///
/// # Safety
/// As [`read_route`].
pub(crate) unsafe fn push_route(list: &mut EntryList, at: Position, route: &AtcRoute) {
    // SAFETY: this function's contract.
    match unsafe { read_route(route) } {
        Ok((id, expression)) => list.push_route(at, id, route.priority, expression),
        Err((id, kind, why)) => list.push_unreadable(at, id, kind, &why),
    }
}

/// Appends the removal of `route.id` to `list`, at `at`.
///
/// # Safety
/// `route.id` is NULL or points to `route.id_len` readable bytes.
pub(crate) unsafe fn push_removal(list: &mut EntryList, at: Position, route: &AtcRoute) {
    // SAFETY: this function's contract.
    match unsafe { read_id(route) } {
        Ok(id) => list.push_removal(at, id),
        Err((kind, why)) => list.push_unreadable(at, None, kind, &why),
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
            .and_then(|s| atc_router::route_list::parse_id(s).ok());
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

/// Takes `list` for a background build: what the builder gets, when `list` is a live list of the
/// right kind (a whole list has no removals); on failure the list stays the caller's. Routes
/// lent are read on the builder thread.
///
/// # Safety
/// `list` is NULL or a live list from `atc_route_list_new`.
pub(crate) unsafe fn take_list(list: *mut AtcRouteList, changes: bool) -> crate::Res<RouteInput> {
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
