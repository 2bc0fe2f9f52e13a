//! The regexes this process's image routers have compiled, by source text and size limit. An
//! image opened while another is in force (the next version of a shared table) takes the
//! regexes the table in force compiled instead of compiling them again: after a push, a worker
//! compiles only regexes it never compiled, whatever the size of the table.
//!
//! Invariants:
//! - The shelf holds only `Weak`s: a regex lives exactly as long as an image router (or a
//!   request evaluating it) holds it; the shelf never keeps one alive, and its dead entries are
//!   swept once the map has doubled since the last sweep.
//! - The lock is held for one map operation at a time, never while compiling: two threads that
//!   need the same new source may both compile it, and the first to store it is the one both
//!   keep (the same source under the same limit compiles to the same regex).
//! - Created on first use: a process that never opens an image (an nginx master, which forks
//!   the workers) has no shelf, and the lock is never held across a `fork` by the master.

use std::sync::{Arc, LazyLock, Mutex, Weak};

use rustc_hash::FxHashMap as HashMap;

use crate::compile::regex::CompiledRegex;

#[derive(Default)]
struct Shelf {
    /// By size limit (one in practice: the schema's), then by source.
    by_limit: HashMap<usize, HashMap<Box<str>, Weak<CompiledRegex>>>,
    len: usize,
    sweep_at: usize,
}

static SHELF: LazyLock<Mutex<Shelf>> = LazyLock::new(Mutex::default);

/// Entries below which the shelf is never swept.
const MIN_SWEEP: usize = 256;

fn shelf() -> std::sync::MutexGuard<'static, Shelf> {
    // A panic while holding the lock leaves the map consistent (each operation is one insert
    // or lookup), so a poisoned lock is taken as it is.
    SHELF.lock().unwrap_or_else(|e| e.into_inner())
}

/// The regex of `source` compiled under `size_limit`: the one an image router of this process
/// holds already, or compiled here. `None` when it does not compile.
pub(crate) fn get_or_compile(source: &str, size_limit: usize) -> Option<Arc<CompiledRegex>> {
    if let Some(found) = lookup(source, size_limit) {
        return Some(found);
    }
    let compiled = CompiledRegex::new(source, size_limit).ok()?.shared();
    let mut s = shelf();
    let s = &mut *s;
    let by_source = s.by_limit.entry(size_limit).or_default();
    match by_source.get(source).and_then(Weak::upgrade) {
        Some(first) => Some(first),
        None => {
            if by_source
                .insert(source.into(), Arc::downgrade(&compiled))
                .is_none()
            {
                s.len += 1;
            }
            if s.len >= s.sweep_at.max(MIN_SWEEP) {
                sweep(s);
            }
            Some(compiled)
        }
    }
}

/// The regex of `source` under `size_limit` if an image router of this process holds it; never
/// compiles.
pub(crate) fn lookup(source: &str, size_limit: usize) -> Option<Arc<CompiledRegex>> {
    shelf()
        .by_limit
        .get(&size_limit)?
        .get(source)
        .and_then(Weak::upgrade)
}

/// Drops the entries whose regex is gone; the next sweep waits for the shelf to double.
fn sweep(s: &mut Shelf) {
    s.by_limit.retain(|_, by_source| {
        by_source.retain(|_, w| w.strong_count() > 0);
        !by_source.is_empty()
    });
    s.len = s.by_limit.values().map(HashMap::len).sum();
    s.sweep_at = 2 * s.len;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_held_somewhere_is_compiled_once() {
        let a = get_or_compile(r"^/shelf-test/(?<n>\d+)$", 1 << 20).unwrap();
        let b = get_or_compile(r"^/shelf-test/(?<n>\d+)$", 1 << 20).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        // Another size limit is another regex.
        let c = get_or_compile(r"^/shelf-test/(?<n>\d+)$", 1 << 21).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn the_shelf_keeps_no_regex_alive() {
        let source = r"^/shelf-gone/(\w+)$";
        let a = get_or_compile(source, 1 << 20).unwrap();
        let weak = Arc::downgrade(&a);
        drop(a);
        assert!(weak.upgrade().is_none());
        // Compiled again, and found again while held.
        let b = get_or_compile(source, 1 << 20).unwrap();
        assert!(Arc::ptr_eq(&b, &get_or_compile(source, 1 << 20).unwrap()));
    }

    #[test]
    fn a_source_that_does_not_compile_is_none() {
        assert!(get_or_compile("(unclosed", 1 << 20).is_none());
        // Over its size limit.
        assert!(get_or_compile(r"\w{1000}\w{1000}", 1000).is_none());
    }

    #[test]
    fn dead_entries_are_swept_as_the_shelf_grows() {
        for i in 0..3 * MIN_SWEEP {
            drop(get_or_compile(&format!("^/shelf-sweep-{i}$"), 1 << 20));
        }
        let s = shelf();
        assert!(s.len < 3 * MIN_SWEEP, "{}", s.len);
    }
}
