//! A request's walk down the decision tree: at each split, the children of the keys its
//! values satisfy and always `rest`; at a field split, the children of the fields it has values
//! for. This is the index's part of every request.
//!
//! Invariants: a walk visits every leaf that holds a route the request can match (the tree's
//! invariant, `tree.rs`, read from this side); it allocates nothing once the caller's
//! [`LevelBufs`] have grown (one per level, sized to the tree's depth).

use super::keyed::{Probe, WalkBufs};
use super::requirement::KeyKind;
use super::tree::{FieldSplit, Node, Split};
use crate::schema::values::Values;
use crate::value::Value;

/// Scratch space for one level of a lookup.
#[derive(Debug, Default)]
pub(crate) struct LevelBufs {
    lowered: String,
    walk: WalkBufs,
}

impl Node {
    /// Appends to `out` every route below this node that the request can match (unsorted,
    /// with repeats). `bufs` holds one [`LevelBufs`] per level below this one.
    #[inline]
    pub(crate) fn collect(&self, ctx: &Values, bufs: &mut [LevelBufs], out: &mut Vec<u32>) {
        match self {
            Node::Leaf(l) => out.extend_from_slice(l.entries.as_slice()),
            Node::Split(s) => {
                s.collect_keyed(ctx, bufs, out);
                s.rest.collect(ctx, bufs, out);
            }
            Node::Fields(s) => {
                s.collect_present(ctx, bufs, out);
                s.rest.collect(ctx, bufs, out);
            }
        }
    }
}

impl Split {
    #[inline]
    pub(super) fn collect_keyed(&self, ctx: &Values, bufs: &mut [LevelBufs], out: &mut Vec<u32>) {
        let values = ctx.values_by_id(self.disc.field);
        if values.is_empty() {
            return;
        }
        let Some((here, deeper)) = bufs.split_first_mut() else {
            return self.collect_keyed_unbuffered(ctx, out);
        };
        for v in values {
            let probe = match (self.disc.kind, v) {
                (KeyKind::Int, Value::Int(i)) => Probe::Int(*i),
                (KeyKind::Cidr, Value::IpAddr(a)) => Probe::Addr(*a),
                (_, Value::String(s)) => {
                    let s =
                        crate::compile::eval::lowercase_if(self.disc.lower, s, &mut here.lowered);
                    Probe::Text(s.as_bytes())
                }
                _ => continue,
            };
            self.keyed.walk(probe, &mut here.walk, |child| {
                child.collect(ctx, deeper, out)
            });
        }
    }
}

impl Split {
    /// [`Split::collect_keyed`] when the caller's buffers are too few (they are sized to the
    /// tree's depth, so never on a request's walk): with one empty buffer of its own on the
    /// stack (no allocation until used), made here rather than on every level of every walk; a
    /// split below comes here again, one level at a time, as deep as the tree (bounded).
    #[cold]
    #[inline(never)]
    fn collect_keyed_unbuffered(&self, ctx: &Values, out: &mut Vec<u32>) {
        let mut one = [LevelBufs::default()];
        self.collect_keyed(ctx, &mut one, out);
    }
}

impl FieldSplit {
    /// Collects from the children of the fields the request has values for: by the request's
    /// fields or by the children, whichever are fewer. (No buffer of this level is in use
    /// while a child collects, so children use `bufs` as they are.)
    #[inline]
    pub(super) fn collect_present(&self, ctx: &Values, bufs: &mut [LevelBufs], out: &mut Vec<u32>) {
        let present = ctx.present_fields();
        if present.len() <= self.children.len() {
            for f in present {
                if let Some(child) = self.children.get(f) {
                    if !ctx.values_by_id(*f).is_empty() {
                        child.collect(ctx, bufs, out);
                    }
                }
            }
        } else {
            for (f, child) in &self.children {
                if !ctx.values_by_id(*f).is_empty() {
                    child.collect(ctx, bufs, out);
                }
            }
        }
    }
}
