use super::*;
use crate::index::image_write::rarest_byte;
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
