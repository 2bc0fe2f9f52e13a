//! Writing the index in image form: the in-process decision tree (`index/tree.rs`) laid out
//! as the words `index/image.rs` describes and walks.
//!
//! Invariants:
//! - Children are written before their parents, so a node's number is known when its parent's
//!   table is written; a node's number is the position of its first word.
//! - Every route below a split the walk could not follow in bounds (a path tree deeper than
//!   [`MAX_PATH_DEPTH`]) is in the leaf written in its place: an image never loses a
//!   candidate, it only gains some.
//! - Leaf entries are route numbers in routing order (`Numbering::rank`), ascending and
//!   without repeats; an integer split's keys and a field split's children are written sorted,
//!   which the walk's binary searches rely on.

use super::image::{
    CIDR, CONTAINS, CONTAINS_FEW, EXACT, FEW_LITERALS, FIELDS, INT, LEAF, MAX_PATH_DEPTH, PATH,
    PREFIX, SUFFIX,
};
use super::keyed::Keyed;
use super::tree::{FieldSplit, Node, Split};
use crate::image::exact_table;
use crate::image::prefix_table;
use crate::schema::FieldId;

/// The index written as words: what the image's sections hold.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// The number of the root node.
    pub(crate) root: u32,
    pub(crate) nodes: Vec<u32>,
    pub(crate) entries: Vec<u32>,
    pub(crate) bytes: Vec<u8>,
    /// Splits written as the leaf of all their routes (path patterns too deep).
    pub(crate) leaves_in_place_of_splits: usize,
    /// The fields some split looks values up in (the key fields of two-phase matching), by
    /// the image's numbers, sorted.
    pub(crate) key_fields: Vec<u32>,
}

/// How an image numbers what the index refers to.
pub(crate) struct Numbering<'a> {
    /// A route (by its slot), in routing order.
    pub(crate) rank: &'a dyn Fn(u32) -> u32,
    /// A field, in the image's field table (which a reader maps to its own ids).
    pub(crate) field: &'a dyn Fn(FieldId) -> u32,
}

/// Writes `root`'s tree. `None` when a number outgrows 32 bits.
pub(crate) fn write(root: &Node, num: &Numbering<'_>) -> Option<Written> {
    let mut w = Written::default();
    w.root = write_node(root, num, &mut w)?;
    w.key_fields.sort_unstable();
    w.key_fields.dedup();
    Some(w)
}

fn word(n: usize) -> Option<u32> {
    u32::try_from(n).ok()
}

/// Writes `node` and below; returns its number.
fn write_node(node: &Node, num: &Numbering<'_>, w: &mut Written) -> Option<u32> {
    match node {
        Node::Leaf(l) => leaf(l.entries.as_slice().iter().map(|&s| (num.rank)(s)), w),
        Node::Split(s) => split(s, num, w),
        Node::Fields(f) => fields(f, num, w),
    }
}

fn leaf(ranks: impl Iterator<Item = u32>, w: &mut Written) -> Option<u32> {
    let mut ranks: Vec<u32> = ranks.collect();
    ranks.sort_unstable();
    ranks.dedup();
    let at = word(w.nodes.len())?;
    let start = word(w.entries.len())?;
    w.entries.extend(&ranks);
    w.nodes.extend([LEAF, start, word(ranks.len())?]);
    Some(at)
}

/// Every route below `node`.
fn all_routes(node: &Node, out: &mut Vec<u32>) {
    match node {
        Node::Leaf(l) => out.extend_from_slice(l.entries.as_slice()),
        Node::Split(s) => {
            s.keyed.for_each(|c| all_routes(c, out));
            all_routes(&s.rest, out);
        }
        Node::Fields(f) => {
            for c in f.children.values() {
                all_routes(c, out);
            }
            all_routes(&f.rest, out);
        }
    }
}

fn split(s: &Split, num: &Numbering<'_>, w: &mut Written) -> Option<u32> {
    let flat = match &s.keyed {
        Keyed::Path(t) => t.depth() <= MAX_PATH_DEPTH,
        _ => true,
    };
    if !flat {
        let mut routes = Vec::new();
        s.keyed.for_each(|c| all_routes(c, &mut routes));
        all_routes(&s.rest, &mut routes);
        w.leaves_in_place_of_splits += 1;
        return leaf(routes.iter().map(|&s| (num.rank)(s)), w);
    }
    w.key_fields.push((num.field)(s.disc.field));
    let rest = write_node(&s.rest, num, w)?;
    // Children first, so that a node's number is known when its parent's table is written.
    let mut keyed: Vec<(Vec<u8>, u32)> = Vec::new();
    let mut ints: Vec<(i64, u32)> = Vec::new();
    let kind = match &s.keyed {
        Keyed::Exact(m) => {
            for (k, c) in m.entries() {
                keyed.push((k.to_vec(), write_node(c, num, w)?));
            }
            EXACT
        }
        Keyed::Prefix(t) => {
            let mut children = Vec::new();
            t.for_each_key(|k, c| children.push((k.to_vec(), c)));
            for (k, c) in children {
                keyed.push((k, write_node(c, num, w)?));
            }
            PREFIX
        }
        // Stored reversed in process too: the keys are the reversed suffixes.
        Keyed::Suffix(t) => {
            let mut children = Vec::new();
            t.for_each(|k, c| children.push((k.to_vec(), c)));
            for (k, c) in children {
                keyed.push((k, write_node(c, num, w)?));
            }
            SUFFIX
        }
        Keyed::Int(m) => {
            for (k, c) in m {
                ints.push((*k, write_node(c, num, w)?));
            }
            INT
        }
        Keyed::Path(t) => {
            // The payloads first, then the path tree, whose records name them.
            let mut children: Vec<&Node> = Vec::new();
            t.for_each(|c| children.push(c));
            let mut numbers = rustc_hash::FxHashMap::default();
            for c in children {
                numbers.insert(c as *const Node, write_node(c, num, w)?);
            }
            let payload = &mut |c: &Node| numbers.get(&(c as *const Node)).copied();
            let root = t.write_flat(payload, &mut w.nodes, &mut w.bytes)?;
            let at = word(w.nodes.len())?;
            let field = (num.field)(s.disc.field);
            w.nodes
                .extend([PATH, field, u32::from(s.disc.lower), rest, root]);
            return Some(at);
        }
        Keyed::Cidr(m) => {
            let mut children = Vec::new();
            m.for_each_flat(|fam, len, key, c| {
                children.push((u32::from(fam) << 8 | u32::from(len), key, c))
            });
            let mut lens: Vec<u32> = children.iter().map(|(l, _, _)| *l).collect();
            lens.sort_unstable();
            lens.dedup();
            let mut keyed = Vec::new();
            for (_, key, c) in children {
                keyed.push((key, write_node(c, num, w)?));
            }
            let entries: Vec<(&[u8], u32)> = keyed.iter().map(|(k, c)| (&k[..], *c)).collect();
            let table = exact_table::write(&entries, &mut w.bytes)?;
            let at = word(w.nodes.len())?;
            let field = (num.field)(s.disc.field);
            w.nodes.extend([
                CIDR,
                field,
                u32::from(s.disc.lower),
                rest,
                word(lens.len())?,
            ]);
            w.nodes.extend(lens);
            w.nodes.push(word(table.len())?);
            w.nodes.extend(table);
            return Some(at);
        }
        Keyed::Contains(set) => {
            let mut children = Vec::new();
            set.for_each_literal(|lit, c| children.push((lit.to_vec(), c)));
            for (k, c) in children {
                keyed.push((k, write_node(c, num, w)?));
            }
            if keyed.len() <= FEW_LITERALS {
                let at = word(w.nodes.len())?;
                let field = (num.field)(s.disc.field);
                w.nodes.extend([
                    CONTAINS_FEW,
                    field,
                    u32::from(s.disc.lower),
                    rest,
                    word(keyed.len())?,
                ]);
                for (k, c) in keyed {
                    w.nodes
                        .extend([word(w.bytes.len())?, word(k.len())?, c, rarest_byte(&k)]);
                    w.bytes.extend_from_slice(&k);
                }
                word(w.bytes.len())?;
                return Some(at);
            }
            CONTAINS
        }
    };
    let at = word(w.nodes.len())?;
    let field = (num.field)(s.disc.field);
    w.nodes.extend([kind, field, u32::from(s.disc.lower), rest]);
    if kind == INT {
        ints.sort_unstable();
        w.nodes.push(word(ints.len())?);
        for (k, c) in ints {
            w.nodes
                .extend([k as u64 as u32, ((k as u64) >> 32) as u32, c]);
        }
        return Some(at);
    }
    let entries: Vec<(&[u8], u32)> = keyed.iter().map(|(k, c)| (&k[..], *c)).collect();
    let table = match kind {
        EXACT => exact_table::write(&entries, &mut w.bytes)?,
        // Walked from every place of the text (see `PrefixTable::walk_within`).
        _ => prefix_table::write(&entries, &mut w.bytes)?,
    };
    w.nodes.push(word(table.len())?);
    w.nodes.extend(table);
    Some(at)
}

fn fields(f: &FieldSplit, num: &Numbering<'_>, w: &mut Written) -> Option<u32> {
    let rest = write_node(&f.rest, num, w)?;
    let mut children = Vec::new();
    for (field, c) in &f.children {
        w.key_fields.push((num.field)(*field));
        children.push(((num.field)(*field), write_node(c, num, w)?));
    }
    children.sort_unstable();
    let at = word(w.nodes.len())?;
    w.nodes.extend([FIELDS, rest, word(children.len())?]);
    for (field, c) in children {
        w.nodes.extend([field, c]);
    }
    Some(at)
}

/// Where in `lit` its rarest byte is (by `memchr`'s table of how common bytes are in text),
/// written beside the literal so that a search needs no set-up.
pub(super) fn rarest_byte(lit: &[u8]) -> u32 {
    memchr::arch::all::packedpair::Pair::new(lit).map_or(0, |p| u32::from(p.index1()))
}
