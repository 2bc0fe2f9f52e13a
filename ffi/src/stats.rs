//! What a router counts for its operators (`atc_router_stats`), and the requests a caller
//! refused as bad input (`atc_router_count_bad_request`): the core's `RouterStats` in C.
//!
//! The struct is versioned by its `size` member, so that fields can be added without a new
//! function: fields are only ever appended; the caller says how large its struct is, and the
//! library fills the fields it knows that fit and says how far it filled.

use std::mem::{offset_of, size_of};

use crate::router::AtcRouter;
use crate::{guard_status, handle, Fail, ATC_ERR_INVALID, ATC_ERR_NULL, ATC_OK};

/// A router's counts and the cost of its last update, as `atc_router_stats` writes them (the
/// type cannot share the function's name in C). Set `size` to `sizeof(atc_stats)` before the
/// call. Fields are only ever appended in later versions;
/// on return `size` is where the last field the library filled ends (a caller built with a
/// later header sees which fields this library did not fill).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct AtcStats {
    /// In: the size of the caller's struct. Out: the bytes filled (from the start of the struct).
    pub size: usize,
    /// Executes that found a route.
    pub routed: u64,
    /// Executes that found none (an execute that failed, `ATC_ERR_BROKEN` or
    /// `ATC_ERR_SCHEMA_MISMATCH`, is in neither count).
    pub not_found: u64,
    /// Requests the caller refused as bad input and counted with `atc_router_count_bad_request`.
    pub bad_requests: u64,
    /// Updates applied: calls of `atc_router_add`, `atc_router_remove`, `atc_router_sync` and
    /// `atc_router_sync_apply` that returned `ATC_OK` (a sync that found nothing to change
    /// included).
    pub updates_applied: u64,
    /// Updates refused: those calls when they changed nothing because of what they were given
    /// (an invalid route or id, a route to remove that was not there, `ATC_ERR_ROUTES`, a
    /// background build that panicked: `ATC_ERR_PANIC` from `atc_router_sync_apply`). A call
    /// refused for a NULL or an unknown mode is not an update and is not counted; neither is a
    /// background version superseded before it was applied.
    pub updates_refused: u64,
    /// Microseconds the last update (applied or refused) held the caller: the whole call for
    /// add, remove and sync; the `atc_router_sync_apply` call for a background sync.
    pub last_update_hold_us: u64,
    /// Microseconds its table took to build: as `last_update_hold_us` for add, remove and
    /// sync; the builder thread's time (from taking up the list to the outcome) for a
    /// background sync.
    pub last_build_us: u64,
    /// Routes the router holds.
    pub routes: u64,
    /// 1 when a panic interrupted a change part-way (`atc_router_execute` answers
    /// `ATC_ERR_BROKEN` until a sync rebuilds it), else 0.
    pub broken: i32,
}

/// Where each field after `size` ends, in order: the fill stops at the last that fits.
const FIELD_ENDS: [usize; 9] = [
    offset_of!(AtcStats, routed) + size_of::<u64>(),
    offset_of!(AtcStats, not_found) + size_of::<u64>(),
    offset_of!(AtcStats, bad_requests) + size_of::<u64>(),
    offset_of!(AtcStats, updates_applied) + size_of::<u64>(),
    offset_of!(AtcStats, updates_refused) + size_of::<u64>(),
    offset_of!(AtcStats, last_update_hold_us) + size_of::<u64>(),
    offset_of!(AtcStats, last_build_us) + size_of::<u64>(),
    offset_of!(AtcStats, routes) + size_of::<u64>(),
    offset_of!(AtcStats, broken) + size_of::<i32>(),
];

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Reads the router's counts into `*out` (see `atc_stats` for the versioning rule):
/// `ATC_OK`; `ATC_ERR_NULL`; `ATC_ERR_INVALID` when `out->size` is smaller than the `size`
/// member itself. Reads a few atomics: cheap, but meant for a metrics endpoint, not every
/// request. Counts are kept per router handle, whatever table serves (syncs and background
/// applies carry them over), from the router's creation.
///
/// # Safety
/// `router` is a live handle; `out` is NULL or points to at least `out->size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn atc_router_stats(router: *const AtcRouter, out: *mut AtcStats) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        let r = unsafe { handle(router, "router") }?;
        if out.is_null() {
            return Err(Fail::new(ATC_ERR_NULL, "`out` is NULL"));
        }
        // Only `size` is read, and only `size` bytes written: the caller's struct may be an
        // earlier, smaller version of this one.
        // SAFETY: `out` is non-NULL and points to at least its `size` bytes (the caller's contract;
        // `size` is read first, and only what it covers is written).
        let size = unsafe { std::ptr::read_unaligned(out.cast::<usize>()) };
        if size < size_of::<usize>() {
            return Err(Fail::new(
                ATC_ERR_INVALID,
                format_args!("`out->size` is {size}: set it to sizeof(atc_stats)"),
            ));
        }
        let s = r.router().stats();
        let full = AtcStats {
            size: 0,
            routed: s.routed,
            not_found: s.not_found,
            bad_requests: s.bad_requests,
            updates_applied: s.updates_applied,
            updates_refused: s.updates_refused,
            last_update_hold_us: micros(s.last_update_hold),
            last_build_us: micros(s.last_build),
            routes: s.routes as u64,
            broken: i32::from(s.broken),
        };
        let end = FIELD_ENDS
            .iter()
            .copied()
            .take_while(|&e| e <= size)
            .last()
            .unwrap_or(size_of::<usize>());
        let skip = size_of::<usize>();
        // SAFETY: the destination is the caller's buffer, with room for the bytes copied (checked
        // above), and the source is our own memory: they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_ref(&full).cast::<u8>().add(skip),
                out.cast::<u8>().add(skip),
                end - skip,
            )
        };
        // SAFETY: `out` is non-NULL and points to at least its `size` bytes (the caller's contract;
        // `size` is read first, and only what it covers is written).
        unsafe { std::ptr::write_unaligned(out.cast::<usize>(), end) };
        Ok(ATC_OK)
    })
}

/// Counts one request the caller refused as bad input (a value `atc_context_add_*` refused:
/// invalid UTF-8, too many values), which the router never sees, in `bad_requests`. `ATC_OK` or
/// `ATC_ERR_NULL`. One relaxed atomic increment.
///
/// # Safety
/// `router` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn atc_router_count_bad_request(router: *const AtcRouter) -> i32 {
    guard_status(|| {
        // SAFETY: `router` is NULL or a live handle (the caller's contract).
        unsafe { handle(router, "router") }?
            .router()
            .count_bad_request();
        Ok(ATC_OK)
    })
}
