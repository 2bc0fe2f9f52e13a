//! Choosing how to split a node: by the values of one [`Disc`] (a host map, a path tree), or by
//! which fields routes need a value of ([`Choice::Fields`]), whichever leaves a request like
//! one of the node's routes the fewest of them.
//!
//! A request "like" a route is one that has the values the route's requirements name (the key
//! itself, a path its pattern accepts): the estimate counts, for each such request, the routes
//! the candidate split would still hand it, and keeps the split whose worst count is lowest
//! (then the lowest mean). It reads each route's requirements a constant number of times, so
//! choosing costs the node's size, whatever the number of distinct fields or keys.
//!
//! Invariant: a choice is only made when every part it leads to is smaller than the node (see
//! [`super::tree::Level`]), so building ends.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::schema::FieldId;

use super::keyed::{sample, Keyed, Probe, WalkBufs};
use super::requirement::{Disc, KeyKind, Keys, Requirement, MAX_AFFIX_BYTES};
use super::Entry;

/// A field split is considered only among routes that name more distinct fields than this
/// (counted as discs, which are at least as many). Every field of a field split is a key field,
/// read in the first phase of a two-phase match (see `router/needs.rs`): worth it where fields
/// are many and each few routes' (a header per tenant), where splits by value would chain one
/// per field; not where a handful of fields would make a gateway read a query argument or a
/// header for every request only because one route names it.
const FIELD_SPLIT_FIELDS: usize = 16;

/// How a node is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// By the values of one field, under one kind of key.
    Key(Disc),
    /// By which field a route needs a value of: one child per field, a request visits the
    /// children of the fields it has values for. What tells routes apart when each tests a
    /// field of its own (a header per tenant).
    Fields,
}

/// The requirement of `reqs` on `disc`, if any: one of that disc, else one of a stronger kind
/// on the same field whose keys serve as keys of `disc`'s kind ([`KeyKind::implies`]: an exact
/// host is a suffix key too, so a route on `a.com` and one on `*.a.com` can share a suffix
/// split). Every user of a split (building, adding, removing, choosing) asks through this
/// function, so a route is always looked for under the keys it was placed by.
pub(crate) fn requirement<'r>(reqs: &'r [Requirement], disc: &Disc) -> Option<&'r Requirement> {
    reqs.iter()
        .find(|r| r.disc == *disc)
        .or_else(|| reqs.iter().find(|r| serves_as(r, disc)))
}

/// Whether `r`, of another kind, serves as a requirement of `disc` (see [`requirement`]).
/// Keys longer than an affix key may be are not used so: a radix tree's depth is bounded by
/// [`MAX_AFFIX_BYTES`].
fn serves_as(r: &Requirement, disc: &Disc) -> bool {
    r.disc.field == disc.field
        && r.disc.lower == disc.lower
        && r.disc.kind != disc.kind
        && r.disc.kind.implies(disc.kind)
        && match &r.keys {
            Keys::Bytes(keys) => keys.iter().all(|k| k.len() <= MAX_AFFIX_BYTES),
            _ => false,
        }
}

/// The distinct fields `reqs` need a value of (a route has at most a few requirements).
pub(crate) fn fields_of(reqs: &[Requirement], out: &mut Vec<FieldId>) {
    out.clear();
    for r in reqs {
        if !out.contains(&r.disc.field) {
            out.push(r.disc.field);
        }
    }
}

/// The field a route with requirements `reqs` is placed under in a field split: the one whose
/// `weight` is least (fewest routes need it, or its child holds the fewest), the lowest id on a
/// tie; `None` for a route without requirements (it goes to the split's rest).
pub(crate) fn place(reqs: &[Requirement], weight: impl Fn(FieldId) -> usize) -> Option<FieldId> {
    reqs.iter()
        .map(|r| (weight(r.disc.field), r.disc.field))
        .min()
        .map(|(_, f)| f)
}

/// How routes `idx` of `table` are best split, if some split leaves a request fewer routes
/// than `idx.len()` (or as many, where no key has filtered the routes yet: `filtered` false).
pub(crate) fn choose(
    table: &[(Entry, Vec<Requirement>)],
    idx: &[u32],
    filtered: bool,
) -> Option<Choice> {
    let n = idx.len();
    // The routes of each disc, in one pass (a table can have as many discs as routes: one
    // header field each).
    let mut by_disc: FxHashMap<Disc, Vec<u32>> = FxHashMap::default();
    for &i in idx {
        for r in &table[i as usize].1 {
            by_disc.entry(r.disc).or_default().push(i);
        }
    }
    // A route whose key also serves a weaker kind that some route here is keyed by joins that
    // kind's routes (see `requirement`). Only kinds the node already has: a node of exact
    // hosts alone is not also weighed as a suffix split.
    let weaker: Vec<Disc> = by_disc
        .keys()
        .filter(|d| {
            matches!(
                d.kind,
                KeyKind::Prefix | KeyKind::Suffix | KeyKind::Contains
            )
        })
        .copied()
        .collect();
    // The weaker discs that routes of a stronger kind joined, with the number of routes that
    // are their own.
    let mut joined: FxHashMap<Disc, usize> = FxHashMap::default();
    if !weaker.is_empty() {
        // The routes that could join, by field: each weaker disc reads only its own field's
        // (a node of thousands of fields, each with a prefix, stays linear in its size).
        let mut by_field: FxHashMap<(FieldId, bool), Vec<u32>> = FxHashMap::default();
        for &i in idx {
            for r in &table[i as usize].1 {
                if matches!(r.keys, Keys::Bytes(_))
                    && matches!(
                        r.disc.kind,
                        KeyKind::Exact | KeyKind::Prefix | KeyKind::Suffix
                    )
                {
                    let routes = by_field.entry((r.disc.field, r.disc.lower)).or_default();
                    if routes.last() != Some(&i) {
                        routes.push(i);
                    }
                }
            }
        }
        for d in weaker {
            let Some(candidates) = by_field.get(&(d.field, d.lower)) else {
                continue;
            };
            let joining: Vec<u32> = candidates
                .iter()
                .copied()
                .filter(|&i| {
                    let reqs = &table[i as usize].1;
                    !reqs.iter().any(|r| r.disc == d) && reqs.iter().any(|r| serves_as(r, &d))
                })
                .collect();
            if let Some(routes) = by_disc.get_mut(&d) {
                if !joining.is_empty() {
                    joined.insert(d, routes.len());
                }
                routes.extend(joining);
            }
        }
    }
    // The best so far: its worst case, then (between equal worst cases) the mean over the
    // routes' own requests, which prefers the choice that leaves less to split further.
    let mut best: Option<(usize, f64, Choice)> = None;
    if by_disc.len() > FIELD_SPLIT_FIELDS {
        // A field split is never worth as many routes as the node: it does not make a request
        // that has every field skip anything.
        best = fields_score(table, idx)
            .filter(|(worst, _)| *worst < n)
            .map(|(w, m)| (w, m, Choice::Fields));
    }
    let mut discs: Vec<(Disc, Vec<u32>)> = by_disc.into_iter().collect();
    // Most covered first (the likeliest winners make the bound tight early), then the cheaper
    // kinds of lookup, which ties keep.
    discs.sort_unstable_by(|a, b| {
        (b.1.len(), a.0.kind, a.0.field, a.0.lower).cmp(&(
            a.1.len(),
            b.0.kind,
            b.0.field,
            b.0.lower,
        ))
    });
    // A split must leave a request fewer routes than `n`; where no key has filtered the routes
    // yet, as many is enough (see `Level`).
    let limit = if filtered { n } else { n + 1 };
    // The (field, lowered, kind) of every disc here, for `dominated` (a set: a node can have
    // thousands of discs).
    let kinds: FxHashSet<(FieldId, bool, KeyKind)> = match joined.is_empty() {
        true => FxHashSet::default(),
        false => discs
            .iter()
            .map(|(d, _)| (d.field, d.lower, d.kind))
            .collect(),
    };
    for (disc, covered) in &discs {
        if disc.kind == KeyKind::Regex {
            // Not a key (see `KeyKind::Regex`).
            continue;
        }
        let rest = n - covered.len();
        // At most `bound` routes (equal to the best so far), or fewer than `limit`.
        let bound = best.map_or(limit - 1, |b| b.0);
        if rest > bound {
            // Sorted by coverage: every disc after this one leaves as many or more.
            break;
        }
        if let Some(&own) = joined.get(disc) {
            if dominated(disc, own, covered.len(), &kinds) {
                continue;
            }
        }
        let Some((worst, mean)) = worst_case(table, covered, *disc, bound - rest) else {
            continue;
        };
        let (score, avg) = (rest + worst, rest as f64 + mean);
        // On a tie a split by values wins over a field split: it also tells apart requests
        // that have the field.
        let better = best
            .is_none_or(|(s, a, c)| score < s || (score == s && (c == Choice::Fields || avg < a)));
        if better {
            best = Some((score, avg, Choice::Key(*disc)));
        }
    }
    best.map(|(_, _, c)| c)
}

/// Whether weighing `disc`, a weaker kind of key that routes of stronger kinds joined (a prefix
/// split that also takes exact paths, a contains split that takes both), can be skipped: when
/// the node can also be split on the same field by a stronger kind (one of `kinds`), and most
/// of what `disc` covers (all but `own` of `covered`) is routes of those stronger kinds. A
/// request like one of those finds under the weaker split every route it found under the
/// stronger one, so the weaker split could only win by its own routes, which the stronger
/// split leaves to its rest, where they are split again by their own key. Building the weaker
/// structure (an Aho-Corasick automaton for contains) costs the most of any split, over every
/// route of the node.
fn dominated(
    disc: &Disc,
    own: usize,
    covered: usize,
    kinds: &FxHashSet<(FieldId, bool, KeyKind)>,
) -> bool {
    use KeyKind::*;
    own * 4 < covered
        && [Exact, Prefix, Suffix].into_iter().any(|k| {
            k != disc.kind && k.implies(disc.kind) && kinds.contains(&(disc.field, disc.lower, k))
        })
}

/// How many routes a field split of `idx` leaves a request like one of them, at worst and on
/// average: each route sits under its rarest field, and a request visits the child of every
/// field its route needs, plus the routes without requirements. `None` when the split would
/// have fewer than two children.
fn fields_score(table: &[(Entry, Vec<Requirement>)], idx: &[u32]) -> Option<(usize, f64)> {
    let mut need: FxHashMap<FieldId, usize> = FxHashMap::default();
    let mut fields = Vec::new();
    for &i in idx {
        fields_of(&table[i as usize].1, &mut fields);
        for f in &fields {
            *need.entry(*f).or_default() += 1;
        }
    }
    let mut groups: FxHashMap<FieldId, usize> = FxHashMap::default();
    let mut rest = 0;
    for &i in idx {
        match place(&table[i as usize].1, |f| need[&f]) {
            Some(f) => *groups.entry(f).or_default() += 1,
            None => rest += 1,
        }
    }
    if groups.len() < 2 {
        return None;
    }
    let (mut worst, mut total, mut probes) = (0, 0, 0);
    for &i in idx {
        fields_of(&table[i as usize].1, &mut fields);
        let found: usize = fields.iter().filter_map(|f| groups.get(f)).sum();
        worst = worst.max(found);
        total += found;
        probes += 1;
    }
    Some((
        rest + worst,
        rest as f64 + total as f64 / probes.max(1) as f64,
    ))
}

/// The most routes among `covered` that a request like one of them finds through a structure
/// keyed by `disc` (counting a route once per key it is found under), and the mean; `None` as
/// soon as the most passes `bound` (the caller only needs to know it is not as good).
fn worst_case(
    table: &[(Entry, Vec<Requirement>)],
    covered: &[u32],
    disc: Disc,
    bound: usize,
) -> Option<(usize, f64)> {
    let mut counts: Keyed<usize> = Keyed::new(disc.kind);
    let reqs = |i: u32| requirement(&table[i as usize].1, &disc).expect("covered");
    for &i in covered {
        for k in reqs(i).keys.iter() {
            *counts.entry(k, || 0) += 1;
        }
    }
    counts.seal();
    let (mut worst, mut total, mut probes) = (0, 0, 0);
    let mut bufs = WalkBufs::default();
    for &i in covered {
        for k in reqs(i).keys.iter() {
            let (probe, owned) = sample(k);
            let probe = match &owned {
                Some(path) => Probe::Text(path),
                None => probe,
            };
            let mut found = 0;
            counts.walk(probe, &mut bufs, |c| found += *c);
            worst = worst.max(found);
            if worst > bound {
                return None;
            }
            total += found;
            probes += 1;
        }
    }
    Some((worst, total as f64 / probes.max(1) as f64))
}
