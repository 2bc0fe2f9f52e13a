//! Allocations sized for what they hold: what a route keeps, and the index's small vectors.
//!
//! `Vec::into_boxed_slice` on a vector with spare capacity shrinks its allocation in place, and
//! glibc's allocator files the cut-off tail as a small free fragment. A route change cuts a few
//! such tails off and nothing of their sizes reuses them, so they pile up (tens of thousands
//! after some thousand changes) until one allocation merges them all: milliseconds for a change
//! that otherwise costs microseconds (`benches/examples/change_latency.rs` shows 10-20 ms every
//! 9,000 changes on the host-prefixes table when they are shrunk). Copying into an allocation of
//! the exact size instead frees the whole grown block, which the allocator reuses as it is.
//!
//! Invariant: every slice or string a route keeps past its compilation, built in a growing
//! vector, goes through [`fitted`]; `atc-router/tests/change_fragments.rs`
//! checks it. The index's vectors that usually hold one or two elements grow with
//! [`room_for_one`].

/// `v` as a boxed slice in an allocation of exactly its length.
pub(crate) fn fitted<T>(mut v: Vec<T>) -> Box<[T]> {
    if v.len() == v.capacity() {
        return v.into_boxed_slice();
    }
    let mut out = Vec::with_capacity(v.len());
    out.append(&mut v);
    out.into_boxed_slice()
}

/// Makes room for one more element in a vector that usually stays small (the keys of one index
/// node, the children of a tree node): a quarter more, at least one, where `Vec::push` would
/// start at four and double. A node of one key then holds one, not four (most index nodes hold
/// one or two); a node that grows large still grows geometrically.
pub(crate) fn room_for_one<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact((v.len() / 4).max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fitted_slice_keeps_its_elements_in_order() {
        let mut v = Vec::with_capacity(16);
        v.extend(["a".to_owned(), "b".to_owned(), "c".to_owned()]);
        assert_eq!(&*fitted(v), ["a", "b", "c"]);
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(b"/repos");
        assert_eq!(&*fitted(b), b"/repos");
        assert!(fitted(Vec::<u8>::new()).is_empty());
        let mut small: Vec<u64> = Vec::new();
        for i in 0..3 {
            room_for_one(&mut small);
            small.push(i);
        }
        assert_eq!(small.capacity(), 3);
        for i in 3..1000 {
            room_for_one(&mut small);
            small.push(i);
        }
        assert!(small.capacity() < 1250, "{}", small.capacity());
    }
}
