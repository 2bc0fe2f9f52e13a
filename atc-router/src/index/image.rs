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
//! reader maps to its own schema's ids (`ImageIndex::new`'s `fields`). `index/image_write.rs` writes
//! this layout from the tree; `router/table_image.rs` writes and reads it as part of a table image.
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

use std::cell::Cell;

use super::cidr_map::flat_key;
use crate::compile::eval::lowercase_if;
use crate::compile::path_pattern::{next_slash, ParamClass};
use crate::image::exact_table::ExactTable;
use crate::image::prefix_table::PrefixTable;
use crate::image::Words;
use crate::schema::values::Values;
use crate::schema::FieldId;
use crate::value::Value;

/// An end of a path node that no pattern takes.
pub(super) const NONE: u32 = u32::MAX;

pub(super) const LEAF: u32 = 0;
pub(super) const EXACT: u32 = 1;
pub(super) const PREFIX: u32 = 2;
pub(super) const SUFFIX: u32 = 3;
pub(super) const INT: u32 = 4;
pub(super) const FIELDS: u32 = 5;
pub(super) const PATH: u32 = 6;
pub(super) const CIDR: u32 = 7;
pub(super) const CONTAINS: u32 = 8;
pub(super) const CONTAINS_FEW: u32 = 9;

/// A `contains` split of at most this many literals lists them, each searched for alone.
pub(super) const FEW_LITERALS: usize = 4;

/// Deepest path pattern a path split is written for (segments); a deeper one is written as a
/// leaf. Bounds the walk's recursion, which goes a level per segment.
pub(super) const MAX_PATH_DEPTH: usize = 64;

/// Deepest a walk goes (the in-process tree's bound, with room).
const MAX_DEPTH: usize = 2 * super::tree::MAX_DEPTH;

/// Failed candidate places after which [`holds`] hands the search to `memmem`.
const RARE_TRIES: usize = 32;

/// Whether `text` contains `lit`, whose rarest byte is at `rare`: the places of that byte in
/// `text` (found with a vectorised scan) are the only places `lit` can be. A text full of that
/// byte gets a linear search instead after [`RARE_TRIES`] misses.
#[inline]
fn holds(text: &[u8], lit: &[u8], rare: usize) -> bool {
    let Some(&b) = lit.get(rare) else {
        return lit.is_empty() || scan(text, lit);
    };
    for (tries, p) in memchr::memchr_iter(b, text).enumerate() {
        if tries == RARE_TRIES {
            return scan(text, lit);
        }
        if p >= rare && text[p - rare..].starts_with(lit) {
            return true;
        }
    }
    false
}

/// Whether `text` contains `lit`, by `memmem`: the rare way of [`holds`], kept out of line
/// because the searcher it sets up would otherwise be inlined into the walk, whose every
/// request then pays for the larger frame.
#[cold]
#[inline(never)]
fn scan(text: &[u8], lit: &[u8]) -> bool {
    memchr::memmem::find(text, lit).is_some()
}

/// Scratch of one level of a walk: a value lowercased, a value reversed, children found.
#[derive(Debug, Default)]
pub(crate) struct LevelBuf {
    lowered: String,
    reversed: Vec<u8>,
    /// The children a `contains` split reaches, before repeats are dropped.
    found: Vec<u32>,
}

/// An image's field numbers both ways: this process's id of each number (what the
/// [`Deref`](std::ops::Deref) slice gives), and the number of each id.
#[derive(Debug, Default)]
pub(crate) struct FieldNumbers {
    ids: Box<[FieldId]>,
    /// `(id, number)`, sorted by id.
    by_id: Box<[(FieldId, u32)]>,
}

impl FieldNumbers {
    /// The numbering that gives number `n` to `ids[n]`.
    pub(crate) fn new(ids: Box<[FieldId]>) -> FieldNumbers {
        let mut by_id: Vec<(FieldId, u32)> =
            ids.iter().zip(0u32..).map(|(&id, n)| (id, n)).collect();
        by_id.sort_unstable();
        FieldNumbers {
            ids,
            by_id: by_id.into_boxed_slice(),
        }
    }

    /// The number of field `id`, if the image has it.
    #[inline]
    fn number(&self, id: FieldId) -> Option<u32> {
        let at = self.by_id.binary_search_by_key(&id, |&(f, _)| f).ok()?;
        Some(self.by_id[at].1)
    }
}

impl std::ops::Deref for FieldNumbers {
    type Target = [FieldId];

    fn deref(&self) -> &[FieldId] {
        &self.ids
    }
}

/// The index read in place from an image's sections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageIndex<'a> {
    nodes: Words<'a>,
    entries: Words<'a>,
    bytes: &'a [u8],
    /// The image's field numbers to this process's ids, and back.
    fields: &'a FieldNumbers,
}

impl<'a> ImageIndex<'a> {
    pub(crate) fn new(
        nodes: Words<'a>,
        entries: Words<'a>,
        bytes: &'a [u8],
        fields: &'a FieldNumbers,
    ) -> ImageIndex<'a> {
        ImageIndex {
            nodes,
            entries,
            bytes,
            fields,
        }
    }

    /// The values of the field the image numbers `n` (none for a number it does not have).
    #[inline]
    fn values<'v>(&self, ctx: &'v Values, n: u32) -> &'v [Value] {
        match self.fields.get(n as usize) {
            Some(id) => ctx.values_by_id(*id),
            None => &[],
        }
    }

    /// Appends to `out` the route numbers of every route the request can match (unsorted, with
    /// repeats), from the node numbered `root`. `bufs` is scratch, one per level (grown to the
    /// depth the walk reaches, then reused).
    ///
    /// The walk's work is bounded by the image's size: counting a node visit, an entry taken,
    /// a child or network length tried and 64 bytes of a value looked up as one unit each, it
    /// does at most twice as many as the image has words of nodes and entries, plus
    /// [`WALK_SLACK`]. A walk of a tree, which is what this library writes, visits a node once
    /// per value leading to it, so it stays far below; one that would go over (a crafted image
    /// whose nodes share children or point back at themselves) stops, and `out` gets every
    /// entry of the image instead: all the routes the index holds, a superset that evaluation
    /// narrows.
    pub(crate) fn candidates(
        &self,
        root: u32,
        ctx: &Values,
        bufs: &mut Vec<LevelBuf>,
        out: &mut Vec<u32>,
    ) {
        if bufs.len() < MAX_DEPTH + 1 {
            bufs.resize_with(MAX_DEPTH + 1, LevelBuf::default);
        }
        let before = out.len();
        let budget = (self.nodes.len().saturating_add(self.entries.len()))
            .saturating_mul(2)
            .saturating_add(WALK_SLACK);
        let walk = Walk {
            ix: *self,
            left: Cell::new(budget),
        };
        walk.collect(root as usize, ctx, bufs, out);
        if walk.left.get() == SPENT {
            out.truncate(before);
            out.extend(self.entries.iter());
        }
    }

    fn at(&self, i: usize) -> Option<u32> {
        self.nodes.get(i)
    }

    /// The child of field split `n` (of `count` children, sorted by field number) for the
    /// field numbered `field` (binary search).
    fn field_child(&self, n: usize, count: usize, field: u32) -> Option<u32> {
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let [f, child] = self.nodes.array::<2>(n + 3 + 2 * mid)?;
            match f.cmp(&field) {
                std::cmp::Ordering::Equal => return Some(child),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }

    /// The child of integer split `n` under key `i` (binary search over its sorted keys).
    fn int_child(&self, n: usize, i: i64) -> Option<u32> {
        let count = self.at(n + 4)? as usize;
        let key = |k: usize| -> Option<i64> {
            let at = n + 5 + 3 * k;
            let (lo, hi) = (self.at(at)?, self.at(at + 1)?);
            Some((u64::from(hi) << 32 | u64::from(lo)) as i64)
        };
        let (mut lo, mut hi) = (0usize, count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match key(mid)?.cmp(&i) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.at(n + 5 + 3 * mid + 2),
            }
        }
        None
    }
}

/// Visits every walk may make beyond those the image's size allows, so that a small table read
/// with long values keeps its exact candidates.
const WALK_SLACK: usize = 4096;

/// What [`Walk::left`] holds once the walk went over its budget.
const SPENT: usize = usize::MAX;

/// One walk of an [`ImageIndex`], with the work it may still do (see
/// [`ImageIndex::candidates`]).
struct Walk<'a> {
    ix: ImageIndex<'a>,
    /// Node visits and entries the walk may still take, or [`SPENT`].
    left: Cell<usize>,
}

impl<'a> std::ops::Deref for Walk<'a> {
    type Target = ImageIndex<'a>;

    fn deref(&self) -> &ImageIndex<'a> {
        &self.ix
    }
}

impl Walk<'_> {
    /// Takes `n` units of the walk's budget: false (and the walk over) when fewer are left.
    #[inline]
    fn spend(&self, n: usize) -> bool {
        match self.left.get().checked_sub(n) {
            Some(left) if self.left.get() != SPENT => {
                self.left.set(left);
                true
            }
            _ => {
                self.left.set(SPENT);
                false
            }
        }
    }

    /// `bufs` holds one buffer per level left: a walk deeper than that stops (corrupt words).
    fn collect(&self, n: usize, ctx: &Values, bufs: &mut [LevelBuf], out: &mut Vec<u32>) {
        let Some((here, deeper)) = bufs.split_first_mut() else {
            return;
        };
        if !self.spend(1) {
            return;
        }
        // Every record has at least three words: a leaf's all, a split's kind, field and
        // lowercasing.
        let Some([kind, a, b]) = self.nodes.array::<3>(n) else {
            return;
        };
        match kind {
            LEAF => {
                let (start, len) = (a as usize, b as usize);
                // Most leaves a walk passes through (the `rest` of a split) are empty.
                if len != 0 && self.spend(len) {
                    if let Some(e) = self.entries.slice(start..start.saturating_add(len)) {
                        out.extend(e.iter());
                    }
                }
            }
            EXACT | PREFIX | SUFFIX | CONTAINS | CONTAINS_FEW | INT | PATH | CIDR => {
                let (field, lower) = (a, b);
                let Some(rest) = self.at(n + 3) else {
                    return;
                };
                self.collect(rest as usize, ctx, deeper, out);
                for v in self.values(ctx, field) {
                    self.keyed(n, kind, lower != 0, v, ctx, here, deeper, out);
                }
            }
            FIELDS => {
                let (rest, count) = (a, b as usize);
                let present = ctx.present_fields();
                // The shorter side is read: a table with a field per route must not cost a
                // request a look at every field.
                if !self.spend(count.min(present.len())) {
                    return;
                }
                self.collect(rest as usize, ctx, deeper, out);
                if present.len() < count {
                    for &id in present {
                        let child = self
                            .fields
                            .number(id)
                            .and_then(|f| self.field_child(n, count, f));
                        if let Some(child) = child {
                            if !ctx.values_by_id(id).is_empty() {
                                self.collect(child as usize, ctx, deeper, out);
                            }
                        }
                    }
                    return;
                }
                for i in 0..count {
                    let Some([field, child]) = self.nodes.array::<2>(n + 3 + 2 * i) else {
                        return;
                    };
                    if !self.values(ctx, field).is_empty() {
                        self.collect(child as usize, ctx, deeper, out);
                    }
                }
            }
            _ => {}
        }
    }

    /// Collects from the children of split `n` (of `kind`) that value `v` reaches.
    #[allow(clippy::too_many_arguments)]
    fn keyed(
        &self,
        n: usize,
        kind: u32,
        lower: bool,
        v: &Value,
        ctx: &Values,
        here: &mut LevelBuf,
        deeper: &mut [LevelBuf],
        out: &mut Vec<u32>,
    ) {
        if kind == CIDR {
            if let Value::IpAddr(a) = v {
                self.cidr(n, a, ctx, deeper, out);
            }
            return;
        }
        if kind == INT {
            if let Value::Int(i) = v {
                if let Some(c) = self.int_child(n, *i) {
                    self.collect(c as usize, ctx, deeper, out);
                }
            }
            return;
        }
        let Value::String(s) = v else {
            return;
        };
        // A lookup reads the value (a `contains` search up to `WITHIN_BUDGET` times, plus its
        // set-up): its cost in visits, one per cache line read.
        let cost = match kind {
            CONTAINS => 64 + s.len() / 4,
            _ => 1 + s.len() / 64,
        };
        if !self.spend(cost) {
            return;
        }
        if kind == PATH {
            let Some(root) = self.at(n + 4) else {
                return;
            };
            let text = lowercase_if(lower, s, &mut here.lowered).as_bytes();
            if let Some(rest) = text.strip_prefix(b"/") {
                let visit = &mut |c: u32| self.collect(c as usize, ctx, deeper, out);
                self.path_walk(root as usize, rest, 0, visit);
            }
            return;
        }
        if kind == CONTAINS_FEW {
            let text = lowercase_if(lower, s, &mut here.lowered).as_bytes();
            self.contains_few(n, text, ctx, deeper, out);
            return;
        }
        let Some(len) = self.at(n + 4) else {
            return;
        };
        let start = n + 5;
        let Some(table) = self.nodes.slice(start..start.saturating_add(len as usize)) else {
            return;
        };
        let text = lowercase_if(lower, s, &mut here.lowered).as_bytes();
        match kind {
            EXACT => {
                let child = ExactTable::new(table, self.bytes).and_then(|t| t.get(text));
                if let Some(c) = child {
                    self.collect(c as usize, ctx, deeper, out);
                }
            }
            CONTAINS => {
                let Some(t) = PrefixTable::new(table, self.bytes) else {
                    return;
                };
                // A literal the text holds at several places is found once per place: its
                // subtree is walked once.
                let found = &mut here.found;
                found.clear();
                t.walk_within(text, |c| found.push(c));
                if found.len() > 1 {
                    found.sort_unstable();
                    found.dedup();
                }
                for &c in found.iter() {
                    self.collect(c as usize, ctx, deeper, out);
                }
            }
            _ => {
                let Some(t) = PrefixTable::new(table, self.bytes) else {
                    return;
                };
                let text = if kind == SUFFIX {
                    here.reversed.clear();
                    here.reversed.extend(text.iter().rev());
                    &here.reversed[..]
                } else {
                    text
                };
                t.walk(text, |c| self.collect(c as usize, ctx, deeper, out));
            }
        }
    }

    /// Collects from the children of the listed-literals `contains` split `n` whose literal
    /// `text` holds (distinct literals: each child once).
    fn contains_few(
        &self,
        n: usize,
        text: &[u8],
        ctx: &Values,
        deeper: &mut [LevelBuf],
        out: &mut Vec<u32>,
    ) {
        let Some(count) = self.at(n + 4) else {
            return;
        };
        for i in 0..(count as usize).min(FEW_LITERALS) {
            let Some([at, len, child, rare]) = self.nodes.array::<4>(n + 5 + 4 * i) else {
                return;
            };
            let at = at as usize;
            let Some(lit) = at
                .checked_add(len as usize)
                .and_then(|end| self.bytes.get(at..end))
            else {
                return;
            };
            if holds(text, lit, rare as usize) {
                self.collect(child as usize, ctx, deeper, out);
            }
        }
    }

    /// Visits the payload of every pattern below path node `node` that accepts `rest` (what
    /// follows the `/` after the segments walked so far), as `PathTree::walk` does in process.
    fn path_walk(&self, node: usize, rest: &[u8], depth: usize, visit: &mut dyn FnMut(u32)) {
        if depth > MAX_PATH_DEPTH || !self.spend(1) {
            return;
        }
        let Some([open, _, len]) = self.nodes.array::<3>(node) else {
            return;
        };
        if open != NONE {
            visit(open);
        }
        let (seg, after) = match next_slash(rest) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let table = node + 3;
        let params = table.saturating_add(len as usize);
        // A node without literal children has no table (length 0).
        if len != 0 {
            let lit = self
                .nodes
                .slice(table..params)
                .and_then(|t| ExactTable::new(t, self.bytes))
                .and_then(|t| t.get(seg));
            if let Some(c) = lit {
                self.path_next(c as usize, after, depth, visit);
            }
        }
        let Some(count) = self.at(params) else {
            return;
        };
        if !self.spend(count as usize) {
            return;
        }
        for i in 0..count as usize {
            let Some([a, b, c, d, e, child]) = self.nodes.array::<6>(params + 1 + 6 * i) else {
                return;
            };
            if ParamClass::from_words([a, b, c, d, e]).accepts(seg) {
                self.path_next(child as usize, after, depth, visit);
            }
        }
    }

    /// The step into `child` after a matched segment: deeper while the path goes on, else
    /// the payloads of the patterns that end at `child`.
    fn path_next(
        &self,
        child: usize,
        after: Option<&[u8]>,
        depth: usize,
        visit: &mut dyn FnMut(u32),
    ) {
        match after {
            Some(after) => self.path_walk(child, after, depth + 1, visit),
            None => {
                if let Some(ends) = self.nodes.array::<2>(child) {
                    for end in ends {
                        if end != NONE {
                            visit(end);
                        }
                    }
                }
            }
        }
    }

    /// Collects from the children of network split `n` whose networks contain `a`: the
    /// address masked to each length in use, looked up.
    fn cidr(
        &self,
        n: usize,
        a: &std::net::IpAddr,
        ctx: &Values,
        deeper: &mut [LevelBuf],
        out: &mut Vec<u32>,
    ) {
        let Some(count) = self.at(n + 4) else {
            return;
        };
        let table_at = n + 5 + count as usize;
        let Some(len) = self.at(table_at) else {
            return;
        };
        let start = table_at + 1;
        let table = self
            .nodes
            .slice(start..start.saturating_add(len as usize))
            .and_then(|t| ExactTable::new(t, self.bytes));
        let Some(table) = table else {
            return;
        };
        if !self.spend(count as usize) {
            return;
        }
        let family = if a.is_ipv4() { 4 } else { 6 };
        for i in 0..count as usize {
            let Some(l) = self.at(n + 5 + i) else {
                return;
            };
            // A length past the family's width is no network (corrupt words): skipped.
            let (fam, len) = (l >> 8, l & 0xff);
            if fam != family || len > if family == 4 { 32 } else { 128 } {
                continue;
            }
            let key = flat_key(a, len as u8);
            if let Some(c) = table.get(&key) {
                self.collect(c as usize, ctx, deeper, out);
            }
        }
    }
}

#[cfg(test)]
mod tests;
