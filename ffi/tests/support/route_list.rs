//! A route list (`atc_route_list`) from an array of `atc_route`, as a C caller makes one for
//! `atc_router_sync`.

use std::ptr::null_mut;

use atc_router_ffi::*;

/// `routes` in a new list; free it with `atc_route_list_free`.
///
/// # Safety
/// The routes' pointers are valid for their lengths.
pub unsafe fn route_list(routes: &[AtcRoute]) -> *mut AtcRouteList {
    let l = atc_route_list_new();
    assert!(!l.is_null());
    assert_eq!(
        atc_route_list_add(l, routes.as_ptr(), routes.len(), null_mut(), null_mut()),
        ATC_OK
    );
    l
}
