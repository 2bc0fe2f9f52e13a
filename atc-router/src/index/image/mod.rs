//! The index in image form: the decision tree written as words (`crate::image`'s flat tables
//! for its keyed structures) and walked in place, giving a request's candidates as route
//! numbers in routing order.
//!
//! Layout: node records in one word array, a node's number being the position of its first
//! word; leaf entries in a second array; keys' bytes in the tables' arena.
//! - leaf: `LEAF`, start and length of its entries (route numbers, ascending);
//! - split by exact key, prefix, suffix or contained literal: its kind, the field's raw id,
//!   whether values are lowercased, its `rest` node, the number of table words, then the table
//!   (an [`ExactTable`], or a [`PrefixTable`]: over reversed keys for a suffix split, walked
//!   from every place of the value for a `contains` split) whose values are child nodes;
//! - split by at most [`FEW_LITERALS`] contained literals: `CONTAINS_FEW`, the field,
//!   lowercasing, `rest`, the number of literals, then per literal its offset and length in
//!   the bytes, its child and where its rarest byte is (so a search needs no set-up);
//! - split by integer: `INT`, the field, 0, `rest`, the number of keys, then per key (ascending)
//!   its low and high words and its child;
//! - split by field: `FIELDS`, `rest`, the number of children, then per child the field's raw id
//!   and its node;
//! - split by network: `CIDR`, the field, 0, `rest`, the number of (family, length) pairs in
//!   use, each as `family << 8 | length`, then the length of an [`ExactTable`] keyed by
//!   `cidr_map::flat_key` (family, length, masked address) and the table;
//! - split by path pattern: `PATH`, the field, lowercasing, `rest`, the root of its path tree;
//!   a path node is the decision nodes of the patterns that end there open and exact
//!   ([`NONE`] if none), the length of its literal children's [`ExactTable`] (segment to path
//!   node) and the table (length 0 and no table when it has none), then the number of
//!   parameter children and per child its class (five words, `ParamClass::to_words`) and its
//!   path node.
//!
//! Fields are numbered by the image's field table (`Numbering::field` when written), which the
//! reader maps to its own schema's ids (`ImageIndex::new`'s `fields`). `router/table_image.rs`
//! writes and reads it as part of a table image.
//!
//! Invariants:
//! - **A walk finds every route the in-process walk finds** (a superset, which evaluation
//!   narrows as it narrows the in-process candidates). A path split deeper than
//!   [`MAX_PATH_DEPTH`] segments is written as the leaf of every route below it: still every
//!   route a request can match, at the cost of more candidates;
//!   [`Written::leaves_in_place_of_splits`] counts them.
//! - A walk trusts nothing beyond the container's checksum (which anyone who can write the file
//!   can make right): reads are bounds-checked, it goes at most [`MAX_DEPTH`] levels down (one
//!   scratch buffer per level) and at most [`MAX_PATH_DEPTH`] segments into a path tree, and its
//!   total work is bounded by the image's size (see [`ImageIndex::candidates`]), so crafted
//!   words can neither make it loop, nor blow up through shared children, nor recurse past a
//!   few thousand small frames; words it cannot read end that branch.
//!   Lowercasing is the evaluator's (`compile::eval::lowercase_if`), so a key is looked up as
//!   the in-process index looks it up.
//! - Searches stay linear in the value whatever the table: a `contains` search by rarest byte
//!   hands over to `memmem` after a few misses, and a walk within a value gives up past a
//!   budget and takes every child (more candidates, never fewer).

//!
//! `write.rs` writes the tree as words; `walk.rs` reads them for a request.

mod walk;
mod write;

pub(crate) use walk::{FieldNumbers, ImageIndex, LevelBuf};
pub(crate) use write::{write, Numbering, Written};

/// An end of a path node that no pattern takes.
const NONE: u32 = u32::MAX;

const LEAF: u32 = 0;
const EXACT: u32 = 1;
const PREFIX: u32 = 2;
const SUFFIX: u32 = 3;
const INT: u32 = 4;
const FIELDS: u32 = 5;
const PATH: u32 = 6;
const CIDR: u32 = 7;
const CONTAINS: u32 = 8;
const CONTAINS_FEW: u32 = 9;

/// A `contains` split of at most this many literals lists them, each searched for alone.
const FEW_LITERALS: usize = 4;

/// Deepest path pattern a path split is written for (segments); a deeper one is written as a
/// leaf. Bounds the walk's recursion, which goes a level per segment.
const MAX_PATH_DEPTH: usize = 64;

/// Deepest a walk goes (the in-process tree's bound, with room).
const MAX_DEPTH: usize = 2 * super::tree::MAX_DEPTH;

#[cfg(test)]
mod tests {
    use super::walk::holds;
    use super::write::rarest_byte;
    use super::*;
    use crate::image::Words;
    use crate::schema::values::Values;
    use crate::schema::Schema;
    use crate::value::Type;
    use std::sync::Arc;

    fn as_bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The candidates of a request with `h = "x"` from hand-written node words (image field 0
    /// is `h`), and how long the walk took.
    fn walk(nodes: &[u32], entries: &[u32], root: u32) -> (Vec<u32>, std::time::Duration) {
        let mut schema = Schema::new();
        schema.add_field("h", Type::String).unwrap();
        let mut ctx = Values::new(Arc::new(schema));
        let h = ctx.schema().lookup("h").unwrap();
        ctx.add_str(h, "x").unwrap();
        let (nodes, entries) = (as_bytes(nodes), as_bytes(entries));
        let fields = FieldNumbers::new(Box::new([h]));
        let ix = ImageIndex::new(
            Words::new(&nodes).unwrap(),
            Words::new(&entries).unwrap(),
            &[],
            &fields,
        );
        let started = std::time::Instant::now();
        let mut out = Vec::new();
        ix.candidates(root, &ctx, &mut Vec::new(), &mut out);
        (out, started.elapsed())
    }

    /// A leaf at 0 holding `entries`, then `links` field splits, each with its `rest` and its
    /// one child (`h`) both the node before it: a walk of the words as a tree would visit the
    /// leaf 2^links times.
    fn shared_chain(links: usize, entries: u32) -> (Vec<u32>, u32) {
        let mut nodes = vec![LEAF, 0, entries];
        let mut prev = 0;
        for _ in 0..links {
            let at = nodes.len() as u32;
            nodes.extend([FIELDS, prev, 1, 0, prev]);
            prev = at;
        }
        (nodes, prev)
    }

    #[test]
    fn shared_children_cost_what_the_image_is_not_what_they_unfold_to() {
        let entries: Vec<u32> = (0..1000).collect();
        // 2^90 leaf visits unfolded; MAX_DEPTH stops at 48 levels, still 2^48.
        let (nodes, root) = shared_chain(90, 1000);
        let (out, took) = walk(&nodes, &entries, root);
        assert_eq!(
            out, entries,
            "over its budget, a walk gives every entry once"
        );
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn a_node_that_points_back_at_itself_ends() {
        // A field split whose rest and child are itself, and an exact split likewise.
        let (out, _) = walk(&[FIELDS, 0, 1, 0, 0], &[7, 8], 0);
        assert_eq!(out, [7, 8]);
        let (out, took) = walk(&[EXACT, 0, 0, 0], &[7, 8], 0);
        assert!(
            out.is_empty(),
            "its own rest, down to the depth bound: {out:?}"
        );
        assert!(took < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_deep_chain_stops_at_the_depth_bound() {
        // 100,000 field splits in a line, each taking the next: the walk goes MAX_DEPTH down.
        let mut nodes = vec![LEAF, 0, 1];
        for i in 0..100_000u32 {
            let prev = if i == 0 { 0 } else { 3 + 5 * (i - 1) };
            nodes.extend([FIELDS, 0, 1, 0, prev]);
        }
        let root = (nodes.len() - 5) as u32;
        let (out, took) = walk(&nodes, &[9], root);
        assert!(out.len() <= 1 + MAX_DEPTH, "{}", out.len());
        assert!(took < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_tree_walk_keeps_its_exact_candidates() {
        // The same chain without sharing: each split's rest is an empty leaf of its own.
        let mut nodes = vec![LEAF, 0, 2];
        let mut prev = 0;
        for _ in 0..10 {
            let empty = nodes.len() as u32;
            nodes.extend([LEAF, 0, 0]);
            let at = nodes.len() as u32;
            nodes.extend([FIELDS, empty, 1, 0, prev]);
            prev = at;
        }
        let (out, _) = walk(&nodes, &[4, 5, 6], prev);
        assert_eq!(out, [4, 5], "the leaf's own entries, not every entry");
    }

    fn naive(text: &[u8], lit: &[u8]) -> bool {
        lit.is_empty() || text.windows(lit.len()).any(|w| w == lit)
    }

    #[test]
    fn a_literal_is_found_by_its_rarest_byte_wherever_it_is() {
        for (text, lit) in [
            (&b"/api/v1/export/all"[..], &b"/export/"[..]),
            (b"/export/", b"/export/"),
            (b"/exportx", b"/export/"),
            (b"", b"x"),
            (b"abc", b""),
            (b"zzzzzz", b"zz"),
            (b"/a/b/c/d/e/f/g", b"/g"),
        ] {
            assert_eq!(
                holds(text, lit, rarest_byte(lit) as usize),
                naive(text, lit),
                "{:?} in {:?}",
                String::from_utf8_lossy(lit),
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn a_text_full_of_the_rarest_byte_is_still_searched_right() {
        let lit = b"qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqx";
        let mut text = vec![b'q'; 100_000];
        assert!(!holds(&text, lit, rarest_byte(lit) as usize));
        text.push(b'x');
        assert!(holds(&text, lit, rarest_byte(lit) as usize));
    }

    proptest::proptest! {
        #[test]
        fn a_rarest_byte_search_answers_as_a_scan(
            text in proptest::collection::vec(proptest::sample::select(b"/ab-x".to_vec()), 0..80),
            lit in proptest::collection::vec(proptest::sample::select(b"/ab-x".to_vec()), 0..6),
            rare in 0usize..8,
        ) {
            // Any place stands for the rarest byte: it only decides where the search looks.
            proptest::prop_assert_eq!(holds(&text, &lit, rare), naive(&text, &lit));
        }
    }
}
