//! Unit tests of `prefix_tree.rs`: a node's size (one cache line), and walks, inserts and
//! removals against a plain list of keys. Kept apart because they are a third of the file; they
//! read the tree's private parts (`super::*`), so they stay a child module of it.

use super::*;

#[test]
fn a_node_is_one_cache_line() {
    use crate::index::tree::Node;
    assert_eq!(std::mem::size_of::<TreeNode<Node>>(), 64);
    assert_eq!(std::mem::size_of::<Line<TreeNode<Node>>>(), 64);
    assert_eq!(std::mem::align_of::<Line<TreeNode<Node>>>(), 64);
}

#[test]
fn a_segmented_tree_walks_like_a_plain_one() {
    let keys = [
        "/a", "/a/", "/a/b", "/ab/c", "/", "x/y", "/a/b/c", "", "/ab/",
    ];
    let mut plain = PrefixTree::default();
    let mut seg = SegmentedPrefixTree::default();
    for (i, k) in keys.iter().enumerate() {
        *plain.get_or_insert_with(k.as_bytes(), || 0) = i;
        *seg.get_or_insert_with(k.as_bytes(), || 0) = i;
    }
    assert_eq!(seg.len(), keys.len());
    for text in ["/a/b/c/d", "/ab/cd", "/abc", "x/y/z", "", "/", "/a", "/a/"] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        plain.walk(text.as_bytes(), |v| a.push(*v));
        seg.walk(text.as_bytes(), |v| b.push(*v));
        a.sort();
        b.sort();
        assert_eq!(a, b, "{text}");
    }
    for k in keys {
        assert!(seg.remove(k.as_bytes()).is_some(), "{k}");
    }
    assert_eq!(seg.len(), 0);
    assert!(seg.root.is_empty());
}

#[test]
fn a_node_of_one_tail_keeps_no_tree_and_gets_one_for_a_second() {
    let mut seg = SegmentedPrefixTree::default();
    let walk = |seg: &SegmentedPrefixTree<u32>, text: &str| {
        let mut out = Vec::new();
        seg.walk(text.as_bytes(), |v| out.push(*v));
        out.sort();
        out
    };
    *seg.get_or_insert_with(b"/api/orders", || 0) = 1;
    let api = |seg: &SegmentedPrefixTree<u32>| {
        let node = seg.root.next.get(b"/".as_slice()).unwrap();
        match &node.next.get(b"api/".as_slice()).unwrap().tails {
            Tails::Empty => "empty",
            Tails::One(_) => "one",
            Tails::Many(_) => "many",
        }
    };
    assert_eq!(api(&seg), "one");
    *seg.get_or_insert_with(b"/api/ord", || 0) = 2;
    assert_eq!(api(&seg), "many");
    assert_eq!(walk(&seg, "/api/orders/7"), [1, 2]);
    assert_eq!(seg.remove(b"/api/ord"), Some(2));
    assert_eq!(api(&seg), "one");
    assert_eq!(walk(&seg, "/api/orders/7"), [1]);
    assert_eq!(walk(&seg, "/api/ord"), Vec::<u32>::new());
    assert_eq!(seg.remove(b"/api/ord"), None);
    assert_eq!(seg.remove(b"/api/orders"), Some(1));
    assert!(seg.root.is_empty());
}

fn walk(t: &PrefixTree<u32>, text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    t.walk(text.as_bytes(), |v| out.push(*v));
    out
}

#[test]
fn a_walk_visits_every_stored_prefix_shortest_first() {
    let keys = ["/a", "/ab", "/abc", "/b", "/abd", "/a/x", "/", "x", ""];
    let mut t = PrefixTree::default();
    for (i, k) in keys.iter().enumerate() {
        *t.get_or_insert_with(k.as_bytes(), || 0) = i as u32;
    }
    assert_eq!(t.len(), keys.len());
    for text in [
        "/abcd", "/abd", "/a/x/y", "/b", "", "/", "xy", "/ac", "/abz",
    ] {
        let want: Vec<u32> = {
            let mut v: Vec<(usize, u32)> = keys
                .iter()
                .enumerate()
                .filter(|(_, k)| text.starts_with(*k))
                .map(|(i, k)| (k.len(), i as u32))
                .collect();
            v.sort();
            v.into_iter().map(|(_, i)| i).collect()
        };
        assert_eq!(walk(&t, text), want, "{text}");
    }
}

#[test]
fn removal_merges_nodes_back_and_empties_the_tree() {
    let mut t = PrefixTree::default();
    for (i, k) in ["/api/v1", "/api/v2", "/api", "/b"].iter().enumerate() {
        *t.get_or_insert_with(k.as_bytes(), || 0) = i as u32;
    }
    assert_eq!(t.remove(b"/api/v2"), Some(1));
    assert_eq!(t.remove(b"/api/v2"), None);
    assert_eq!(walk(&t, "/api/v1/x"), [2, 0]);
    assert_eq!(t.remove(b"/api"), Some(2));
    assert_eq!(walk(&t, "/api/v1/x"), [0]);
    assert_eq!(*t.get_mut(b"/api/v1").unwrap(), 0);
    assert!(t.get_mut(b"/api").is_none());
    t.remove(b"/api/v1");
    t.remove(b"/b");
    assert_eq!(t.len(), 0);
    assert!(
        t.root.children.is_empty() && t.root.value.is_none(),
        "only the root is left"
    );
}

#[test]
fn a_node_finds_each_child_as_children_come_and_go_past_the_bytes_kept_in_place() {
    // 40 children of the root and of `/x`: past the 14 first bytes kept in the node and
    // the 16 a walk scans before it searches with memchr.
    let letters: Vec<u8> = (b'0'..=b'9').chain(b'a'..=b'z').chain(*b"-_.~").collect();
    let key = |prefix: &[u8], l: u8| [prefix, &[l, b'q']].concat();
    let mut t: PrefixTree<u32> = PrefixTree::default();
    for (i, &l) in letters.iter().enumerate() {
        *t.get_or_insert_with(&key(b"", l), || 0) = i as u32;
        *t.get_or_insert_with(&key(b"/x", l), || 0) = 100 + i as u32;
        for (j, &m) in letters.iter().enumerate() {
            let want = |v: u32| if j <= i { vec![v] } else { vec![] };
            assert_eq!(walk(&t, &format!("{}q/", m as char)), want(j as u32));
            assert_eq!(walk(&t, &format!("/x{}q", m as char)), want(100 + j as u32));
        }
    }
    for (i, &l) in letters.iter().enumerate().rev() {
        assert_eq!(t.remove(&key(b"/x", l)), Some(100 + i as u32));
        assert_eq!(walk(&t, &format!("{}q", l as char)), [i as u32]);
        assert_eq!(t.remove(&key(b"", l)), Some(i as u32));
        if let Some(&m) = letters[..i].last() {
            assert_eq!(walk(&t, &format!("/x{}q", m as char)), [100 + i as u32 - 1]);
        }
    }
    assert_eq!(t.len(), 0);
}

#[test]
fn agrees_with_a_list_through_random_inserts_and_removals() {
    let mut seed = 11u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet = b"/ab";
    let mut t: PrefixTree<u64> = PrefixTree::default();
    let mut model: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
    for step in 0..5000 {
        let r = next();
        let key: Vec<u8> = (0..(r % 6))
            .map(|i| alphabet[((r >> (8 + 2 * i)) % 3) as usize])
            .collect();
        if (r >> 40) % 3 < 2 {
            *t.get_or_insert_with(&key, || 0) = step;
            model.insert(key, step);
        } else {
            assert_eq!(t.remove(&key), model.remove(&key));
        }
        let text: Vec<u8> = (0..8)
            .map(|i| alphabet[((r >> (20 + 2 * i)) % 3) as usize])
            .collect();
        let mut got = Vec::new();
        t.walk(&text, |v| got.push(*v));
        let want: Vec<u64> = model
            .iter()
            .filter(|(k, _)| text.starts_with(k))
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(got, want, "step {step}");
        assert_eq!(t.len(), model.len());
    }
}
