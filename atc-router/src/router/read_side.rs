//! The read side: how any table answers a request.
//!
//! A [`Table`] is what requests are routed from: a [`Router`] (its tree index, or the flat form
//! it keeps beside it) or an [`ImageRouter`] (a table image read in place). A table yields a
//! request's candidates in routing order and, for each, its program and route; everything a
//! request asks of a table (execute, key and needed fields, candidate counts, the candidates
//! explain and matches evaluate) is written once here, over that.
//!
//! Invariants:
//! - [`Table::visit_candidates`] visits every route the request may match, each once, in routing
//!   order, until its visitor says stop: the first route whose program holds is the winner,
//!   whichever form of the table served.
//! - Candidates are a table's own numbers (a router's slots, an image's ranks) and mean nothing
//!   to another table: candidates kept in a context carry the [`Table::tag`] of the table and
//!   version that found them, and are used only by it.
//! - A candidate the table cannot read (only in a corrupt image: an image is checked whole
//!   when opened) does not match; nothing here panics on one.
//! - The request path allocates nothing in steady state: the walk's buffers are the thread's
//!   ([`with_walk`]), grown once and reused.
//!
//! [`Router`]: super::Router
//! [`ImageRouter`]: super::ImageRouter

use std::sync::Arc;

use uuid::Uuid;

use crate::compile::code_view::CodeView;
use crate::compile::eval;
use crate::error::Error;
use crate::index::{Entry, LevelBufs};
use crate::router::context::Context;
use crate::schema::values::Values;
use crate::schema::{FieldMask, Schema};

/// At most this many candidates are prefetched by [`needed_fields`]: an execute stops at the
/// first route that matches, and on a table with long lists, loading programs it never reaches
/// would cost more than it saves.
const PREFETCH_MAX: usize = 16;

/// A table requests are routed from (see the module docs).
pub(crate) trait Table {
    /// A route's program, as the evaluator reads it.
    type Code<'t>: CodeView<'t>
    where
        Self: 't;

    /// The schema the table's contexts are made from.
    fn schema(&self) -> &Arc<Schema>;

    /// `Err` when the table cannot answer at all ([`Error::Broken`]).
    fn ready(&self) -> Result<(), Error>;

    /// The table and version candidates found by it are kept for (see the module docs).
    fn tag(&self) -> (u64, u64);

    /// The fields the table's index looks values up in: phase 1 of a
    /// [two-phase match](crate#two-phase-matching) adds every value of these.
    fn key_fields(&self) -> FieldMask;

    /// Visits the request's candidates in routing order, distinct, until `visit` returns true;
    /// returns the candidate it stopped at.
    fn visit_candidates(
        &self,
        values: &Values,
        bufs: &mut WalkBufs,
        visit: impl FnMut(u32) -> bool,
    ) -> Option<u32>;

    /// Candidate `c`'s program.
    fn program(&self, c: u32) -> Option<Self::Code<'_>>;

    /// Candidate `c`'s id and priority.
    fn route(&self, c: u32) -> Option<(Uuid, u64)>;

    /// Candidate `c`'s expression text, as it was added.
    fn text(&self, c: u32) -> Option<&str>;

    /// The fields candidate `c`'s program reads.
    fn needs(&self, c: u32) -> FieldMask;

    /// Loads what evaluating candidate `c` reads first (see [`needed_fields`]).
    #[inline]
    fn prefetch(&self, _c: u32) {}

    /// Counts an execute that found a route or not.
    #[inline]
    fn count(&self, _ctx: &Context, _found: bool) {}
}

/// The buffers of a walk for candidates, reused across requests.
#[derive(Debug, Default)]
pub(crate) struct WalkBufs {
    /// Candidates as found.
    pub(crate) candidates: Vec<u32>,
    /// Candidates with their order, while they are sorted into routing order.
    pub(crate) ordered: Vec<Entry>,
    /// The tree index's buffers, one per level.
    pub(crate) levels: Vec<LevelBufs>,
    /// An image index walk's buffers, one per level.
    pub(crate) image_levels: Vec<crate::index::image::LevelBuf>,
    /// An image index walk's ranks.
    pub(crate) ranks: Vec<u32>,
}

/// The thread's buffers of a request.
#[derive(Debug, Default)]
struct Scratch {
    lowered: String,
    walk: WalkBufs,
}

thread_local! {
    /// The matcher's buffers, one set per thread rather than one per context: with many
    /// contexts in use (a benchmark rotating 256 requests, a server interleaving connections)
    /// a context's own buffers were a cache line per request that was rarely in cache, and
    /// each context carried them; the thread's stay in cache. Borrowed in place (not moved
    /// out and back: a request's fixed cost is a few dozen instructions, and the move was
    /// ten of them).
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            lowered: String::new(),
            walk: WalkBufs {
                candidates: Vec::new(),
                ordered: Vec::new(),
                levels: Vec::new(),
                image_levels: Vec::new(),
                ranks: Vec::new(),
            },
        })
    };
}

/// Runs `f` with the thread's buffers; with fresh ones when they are in use (a request nested
/// in another: they then allocate as they grow) or the thread is shutting down.
#[inline]
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut f = Some(f);
    let borrowed = SCRATCH.try_with(|s| match s.try_borrow_mut() {
        Ok(mut scratch) => Some((f.take().expect("called once"))(&mut scratch)),
        Err(_) => None,
    });
    match (borrowed, f) {
        (Ok(Some(out)), _) => out,
        (_, Some(f)) => f(&mut Scratch::default()),
        (_, None) => unreachable!("the buffers were borrowed and `f` ran"),
    }
}

/// Runs `f` with the thread's walk buffers (see [`with_scratch`]).
#[inline]
pub(crate) fn with_walk<T>(f: impl FnOnce(&mut WalkBufs) -> T) -> T {
    with_scratch(|s| f(&mut s.walk))
}

/// Whether `t` answers requests of `ctx`: not for a table that cannot answer or a context of
/// another schema.
fn usable<T: Table>(t: &T, ctx: &Context) -> Result<(), Error> {
    t.ready()?;
    if !Arc::ptr_eq(t.schema(), ctx.schema()) {
        return Err(Error::SchemaMismatch);
    }
    Ok(())
}

/// The first route in routing order whose expression holds, its result left in the context;
/// whether one matched. Only the candidates are evaluated: those `needed_fields` kept in the
/// context when no key field changed since, else the table's for the request. The context's
/// previous result is cleared either way.
pub(crate) fn execute<T: Table>(t: &T, ctx: &mut Context) -> Result<bool, Error> {
    ctx.clear_result();
    usable(t, ctx)?;
    let cached = ctx.candidates.by == Some(t.tag()) && ctx.values.added() & t.key_fields() == 0;
    let cache = if cached {
        std::mem::take(&mut ctx.candidates.entries)
    } else {
        Vec::new()
    };
    let (values, w) = (&ctx.values, &mut ctx.record);
    let found = with_scratch(|Scratch { lowered, walk }| {
        let mut holds = |c: u32| match t.program(c) {
            Some(code) => {
                let found = eval::eval_code(code, values, lowered, w);
                if !found {
                    w.clear();
                }
                found
            }
            None => false,
        };
        let winner = if cached {
            cache.iter().copied().find(|&c| holds(c))
        } else {
            t.visit_candidates(values, walk, holds)
        };
        winner.and_then(|c| t.route(c))
    });
    if cached {
        ctx.candidates.entries = cache;
    }
    ctx.outcome = found;
    t.count(ctx, found.is_some());
    Ok(found.is_some())
}

/// Phase 2 of a [two-phase match](crate#two-phase-matching): with every value of the key
/// fields in `ctx`, the fields that the routes the request can still match use (all fields
/// when `t` cannot answer requests of `ctx`). The candidates are kept in the context for the
/// execute that follows, and the first of them prefetched.
pub(crate) fn needed_fields<T: Table>(t: &T, ctx: &mut Context) -> FieldMask {
    if usable(t, ctx).is_err() {
        return FieldMask::MAX;
    }
    let mut mask = t.key_fields();
    let mut found = std::mem::take(&mut ctx.candidates.entries);
    found.clear();
    with_walk(|bufs| {
        t.visit_candidates(&ctx.values, bufs, |c| {
            found.push(c);
            false
        })
    });
    for (i, &c) in found.iter().enumerate() {
        mask |= t.needs(c);
        if i < PREFETCH_MAX {
            t.prefetch(c);
        }
    }
    ctx.candidates.entries = found;
    ctx.candidates.by = Some(t.tag());
    ctx.values.take_added();
    mask
}

/// The request's candidates in routing order: what explain and matches evaluate.
pub(crate) fn candidates<T: Table>(t: &T, ctx: &Context) -> Result<Vec<u32>, Error> {
    let mut found = Vec::new();
    with_walk(|bufs| candidates_into(t, ctx, bufs, &mut found))?;
    Ok(found)
}

/// [`candidates`] into `out` (cleared first), with the caller's buffers.
pub(crate) fn candidates_into<T: Table>(
    t: &T,
    ctx: &Context,
    bufs: &mut WalkBufs,
    out: &mut Vec<u32>,
) -> Result<(), Error> {
    out.clear();
    usable(t, ctx)?;
    t.visit_candidates(&ctx.values, bufs, |c| {
        out.push(c);
        false
    });
    Ok(())
}

/// How many routes the request has to consider at most (the table's candidates for it): the
/// cost model of [`execute`]. Zero when `t` cannot answer requests of `ctx`.
pub(crate) fn candidate_count<T: Table>(t: &T, ctx: &Context) -> usize {
    if usable(t, ctx).is_err() {
        return 0;
    }
    let mut n = 0;
    with_walk(|bufs| {
        t.visit_candidates(&ctx.values, bufs, |_| {
            n += 1;
            false
        })
    });
    n
}
