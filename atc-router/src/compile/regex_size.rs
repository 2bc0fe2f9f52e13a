//! An upper bound of what a pattern's Thompson NFA weighs, read from its tree without
//! compiling it.
//!
//! Why: a pattern with a segment form (`path_regex.rs`) is matched without its automaton on
//! every ASCII text, so compiling the automaton when the route is added only served the size
//! limits, and it was most of what adding such a route cost (a Unicode class such as `[^/]`
//! compiles to a UTF-8 automaton). When this bound is within the limit, the automaton is
//! compiled only if a text needs it; a pattern whose bound is over the limit is compiled to
//! learn its real size, so the limits accept exactly the patterns they accepted before.
//!
//! Invariant: the bound is at least the NFA's `memory_usage` *and* at least what the compiler's
//! builder holds at any point of the compile (the size limit is checked against the builder),
//! for every tree. It counts each node's states as regex-automata's compiler makes them (a
//! literal byte one state, a class one sparse state or a UTF-8 trie of at most one state per
//! byte of each of its UTF-8 sequences, a repetition its copies and a union each, a capture two
//! states, a concatenation or alternation an empty state per part), doubled, plus a fixed part
//! for the automaton's own tables, the unanchored prefix and the group names. Tests compare it
//! with real compiles; a new kind of tree node must be counted here before it is accepted.

use regex_syntax::hir::{Class, Hir, HirKind};
use regex_syntax::utf8::Utf8Sequences;

/// What a state may cost: the builder's state is 16 bytes, the final NFA's 24; counted at 32.
const STATE: usize = 32;
/// One transition (a byte range and a target) in a sparse state's list.
const TRANSITION: usize = 8;
/// The automaton's fixed tables (byte classes, start states, the look-around matcher), the
/// unanchored prefix `(?s-u:.)*?` and the group info's own maps.
const FIXED: usize = 4096;
/// A repetition counted as more copies than this is not bounded here (compile it).
const MAX_COPIES: usize = 1 << 12;

/// The bound of the module docs, or `None` when this module does not bound the tree (compile
/// it to know).
pub(crate) fn nfa_size_bound(hir: &Hir) -> Option<usize> {
    let mut names = 0usize;
    let states = count(hir, &mut names)?;
    states
        .checked_mul(2)?
        .checked_add(FIXED)?
        .checked_add(names.checked_mul(2)?)
}

/// Bytes of the states and transitions of `hir` (once), adding the bytes of group names it
/// holds to `names`.
fn count(hir: &Hir, names: &mut usize) -> Option<usize> {
    let n = match hir.kind() {
        HirKind::Empty => STATE,
        HirKind::Look(_) => STATE,
        HirKind::Literal(l) => l.0.len().checked_mul(STATE)?,
        HirKind::Class(Class::Bytes(c)) => STATE + c.ranges().len() * TRANSITION,
        HirKind::Class(Class::Unicode(c)) => {
            if c.is_ascii() {
                STATE + c.ranges().len() * TRANSITION
            } else {
                // A trie of the UTF-8 sequences: at most one state and one transition per byte
                // of each sequence, and the state they all end in.
                let mut bytes = 0usize;
                for r in c.ranges() {
                    for seq in Utf8Sequences::new(r.start(), r.end()) {
                        bytes = bytes.checked_add(seq.len())?;
                    }
                }
                bytes
                    .checked_mul(STATE + TRANSITION)?
                    .checked_add(2 * STATE)?
            }
        }
        HirKind::Repetition(r) => {
            let copies = match r.max {
                Some(max) => max.max(1),
                None => r.min.max(1),
            } as usize;
            if copies > MAX_COPIES {
                return None;
            }
            let sub = count(&r.sub, names)?;
            // Each copy, a union (two alternates) after each, and an empty state to join them.
            copies
                .checked_mul(sub.checked_add(STATE + 2 * 4)?)?
                .checked_add(STATE)?
        }
        HirKind::Capture(c) => {
            *names = names.checked_add(c.name.as_deref().map_or(0, str::len) + 64)?;
            count(&c.sub, names)?.checked_add(2 * STATE)?
        }
        HirKind::Concat(hs) | HirKind::Alternation(hs) => {
            let mut total = STATE;
            for h in hs {
                // Each part, an empty state between parts, and a union's alternate.
                total = total
                    .checked_add(count(h, names)?)?
                    .checked_add(STATE + 4)?;
            }
            total
        }
    };
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::nfa::thompson;

    fn real(pattern: &str) -> (usize, Hir) {
        let hir = regex_syntax::Parser::new().parse(pattern).unwrap();
        let nfa = thompson::Compiler::new().build_from_hir(&hir).unwrap();
        (nfa.memory_usage(), hir)
    }

    /// The smallest size limit the compiler accepts the pattern under.
    fn least_limit(hir: &Hir) -> usize {
        let ok = |limit: usize| {
            thompson::Compiler::new()
                .configure(thompson::Config::new().nfa_size_limit(Some(limit)))
                .build_from_hir(hir)
                .is_ok()
        };
        let (mut lo, mut hi) = (0usize, 1usize << 30);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if ok(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    #[test]
    fn the_bound_is_above_the_automaton_and_the_builder_for_path_patterns() {
        for p in [
            r"^/a$",
            r"^/users/(?<name>[^/]+)$",
            r"^/users/(?<name>[^/]+)/orders/(?<id>\d+)$",
            r"^/users/(?<name>\w+)/orders/(?<id>[0-9a-f]+)/items/(?P<item>[a-z0-9-]+)$",
            r"^/(?<a>[^/]+)/(?<b>[^/]+)/(?<c>[^/]+)/(?<d>[^/]+)/(?<e>[^/]+)/(?<f>[^/]+)$",
            r"^/(?<x>[^/.]+)/(?<longer_name_of_a_group>[\p{Greek}]+)$",
            r"^/files/(?<f>[^/]{1,64})$",
            r"^/(a|bc|[^/]+)x*$",
            r"^/\w{3,9}/(?:[^/]+/){0,4}end$",
        ] {
            let (size, hir) = real(p);
            let bound = nfa_size_bound(&hir).unwrap();
            assert!(bound >= size, "{p}: bound {bound} < size {size}");
            let least = least_limit(&hir);
            assert!(bound >= least, "{p}: bound {bound} < builder {least}");
            // Not wildly above either: the limits would otherwise compile every pattern.
            // Not so far above that the limits would compile every pattern to measure it (the
            // UTF-8 tries of `\d` and `\w` share most states, which the bound does not see).
            assert!(
                bound <= 20 * size.max(least) + FIXED,
                "{p}: {bound} vs {size}"
            );
        }
    }

    #[test]
    fn many_segments_and_large_classes_stay_bounded() {
        let mut p = String::from("^");
        for i in 0..300 {
            p.push_str(&format!("/s{i}/(?<g{i}>\\w+)"));
        }
        p.push('$');
        let (size, hir) = real(&p);
        let bound = nfa_size_bound(&hir).unwrap();
        assert!(
            bound >= size && bound >= least_limit(&hir),
            "{bound} vs {size}"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn the_bound_holds_for_random_path_patterns(
            p in r"\^(/([a-z]{1,3}|\(\?<g[0-9]>(\[\^/\]|\\d|\\w|\[0-9a-f\]|\.)[+*?]\)|\[\^/\.\]\{1,9\})){1,6}\$"
        ) {
            let Ok(hir) = regex_syntax::Parser::new().parse(&p) else {
                return Ok(()); // a group name used twice
            };
            let size = thompson::Compiler::new().build_from_hir(&hir).unwrap().memory_usage();
            let bound = nfa_size_bound(&hir).unwrap();
            proptest::prop_assert!(bound >= size && bound >= least_limit(&hir), "{}", p);
        }
    }

    #[test]
    fn huge_repetitions_are_not_bounded_here() {
        let hir = regex_syntax::Parser::new()
            .parse(r"^/[^/]{1,5000}$")
            .unwrap();
        assert_eq!(nfa_size_bound(&hir), None);
    }
}
