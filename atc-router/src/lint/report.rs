//! From the routes matching a witness request to findings: who overlaps at one priority, who
//! can never win, which routes repeat one expression; and the wording of each.
//!
//! Invariant (the linter's "no false alarms", on this side): a finding names only routes that
//! match the witness, and `never-wins` only routes proved to cover the subject
//! (`implication.rs`).

use std::fmt::Write as _;

use rustc_hash::FxHashMap as HashMap;
use uuid::Uuid;

use super::implication::Conjuncts;

use super::{
    ClassId, Held, Linter, Scratch, WitnessId, MAX_COVERING_COMPARED, MAX_EXPRESSIONS_PER_WITNESS,
    QUOTED,
};
use super::{Finding, FindingKind};
use crate::index::Order;
use crate::router::read_side;
use crate::router::Router;

impl Linter {
    /// The routes matching witness `w`, in routing order, grouped by class (see [`Matching`]).
    pub(super) fn matching(
        &self,
        router: &Router,
        scratch: &mut Scratch,
        w: WitnessId,
        holders: usize,
    ) -> Matching {
        let mut m = Matching::default();
        let Some(entry) = self.witnesses.get(&w) else {
            return m;
        };
        if entry.witness.fill(&mut scratch.ctx).is_none() {
            return m;
        }
        if read_side::candidates_into(router, &scratch.ctx, &mut scratch.walk, &mut scratch.found)
            .is_err()
        {
            return m;
        }
        let found = std::mem::take(&mut scratch.found);
        crate::work::add(found.len());
        let budget = MAX_EXPRESSIONS_PER_WITNESS.max(holders);
        // Each class is evaluated once: its place in `m.classes`, or `None` if it does not
        // match. Past the budget, classes not seen yet are evaluated only until one matches,
        // which makes the counts lower bounds.
        let mut seen: HashMap<ClassId, Option<usize>> = HashMap::default();
        for &slot in &found {
            let order = router.order_of(slot);
            let id = order.id();
            let Some(route) = self.routes.get(&id) else {
                continue;
            };
            let class = route.class;
            let at = match seen.get(&class) {
                Some(&known) => known,
                None => {
                    if m.classes.len() >= budget && m.capped {
                        continue;
                    }
                    let ok = scratch.matches(router.program(slot));
                    if ok && m.classes.len() >= budget {
                        m.capped = true;
                        continue;
                    }
                    let at = ok.then_some(m.classes.len());
                    seen.insert(class, at);
                    if ok {
                        m.classes.push((order, class));
                        m.members.push(Vec::new());
                    }
                    at
                }
            };
            if let Some(at) = at {
                m.routes.push((order, id, class));
                m.members[at].push((order, id));
            }
        }
        scratch.found = found;
        m
    }

    /// The witness's request, for messages: `field = value, …`, each value cut.
    pub(super) fn describe(&self, router: &Router, w: WitnessId) -> String {
        let Some(e) = self.witnesses.get(&w) else {
            return String::new();
        };
        let mut out = String::new();
        for (i, (f, v)) in e.witness.values.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let name = router.schema().field(*f).map(|f| f.0).unwrap_or_default();
            let _ = write!(out, "{name} = {}", quoted(&v.to_string()));
        }
        out
    }

    /// The overlap findings of witness `w`: for each priority of its holders, the routes of
    /// that priority matching it, when there are two or more.
    pub(super) fn overlaps_of(
        &mut self,
        router: &Router,
        w: WitnessId,
        holders: &[(Order, Uuid, ClassId)],
        matched: &Matching,
    ) {
        let mut request = None;
        let mut priorities: Vec<u64> = holders.iter().map(|(o, _, _)| o.priority()).collect();
        priorities.dedup();
        let mut made = Vec::new();
        for p in priorities {
            // Routing order sorts by priority first: the routes of one priority are a range.
            let from = matched.routes.partition_point(|(o, _, _)| o.priority() > p);
            let to = matched
                .routes
                .partition_point(|(o, _, _)| o.priority() >= p);
            let group = &matched.routes[from..to];
            if group.len() < 2 {
                continue;
            }
            let named = &group[..group.len().min(self.options.max_named + 1)];
            let more = group.len() - named.len();
            let routes: Vec<Uuid> = named.iter().map(|(_, id, _)| *id).collect();
            let request = request.get_or_insert_with(|| self.describe(router, w));
            let message = format!(
                "routes {} have the same priority ({p}) and all match the request {request}: \
                 which one wins it depends only on their ids",
                list(&routes, more, matched.capped)
            );
            self.overlaps.insert(
                (w, p),
                Held {
                    finding: Finding {
                        kind: FindingKind::EqualPriorityOverlap,
                        routes,
                        more,
                        at_least: matched.capped,
                        message,
                        location: None,
                    },
                    order: named.iter().map(|(o, _, _)| *o).collect(),
                },
            );
            made.push(p);
        }
        if let Some(e) = self.witnesses.get_mut(&w) {
            e.overlaps = made;
        }
    }

    /// The `never-wins` findings of the routes holding a witness: for each, the routes before
    /// it matching the witness whose expression its own implies, among the first
    /// [`Linter::MAX_COVERING_COMPARED`] distinct expressions before it.
    pub(super) fn never_wins_of(&mut self, holders: &[(Order, Uuid, ClassId)], matched: &Matching) {
        // For each holder's class, whether it implies each class of `matched.classes` (a
        // prefix of them, extended as a later holder compares more).
        let mut covered: HashMap<ClassId, Vec<bool>> = HashMap::default();
        for &(order, id, class) in holders {
            let before = matched.classes.partition_point(|(first, _)| *first < order);
            let n = before.min(MAX_COVERING_COMPARED);
            let at_least = matched.capped || before > n;
            let Some(narrow) = self.classes.get(&class) else {
                continue;
            };
            let known = covered.entry(class).or_default();
            if known.len() < n {
                let mut conjuncts = Conjuncts::of(&narrow.program.view());
                for &(_, other) in &matched.classes[known.len()..n] {
                    let wide = self.classes.get(&other);
                    known.push(wide.is_some_and(|w| conjuncts.imply(&w.program.view())));
                }
            }
            let mut count = 0;
            let mut names: Vec<(Order, Uuid)> = Vec::new();
            for (j, _) in known[..n].iter().enumerate().filter(|(_, c)| **c) {
                let members = &matched.members[j];
                let k = members.partition_point(|(o, _)| *o < order);
                count += k;
                names.extend_from_slice(&members[..k.min(self.options.max_named)]);
            }
            if count == 0 {
                continue;
            }
            names.sort_unstable();
            names.truncate(self.options.max_named);
            let more = count - names.len();
            let mut routes = vec![id];
            routes.extend(names.iter().map(|(_, id)| *id));
            let message = match (&names[..], more) {
                ([(first, by)], 0) => format!(
                    "route {id} can never win: route {by} (priority {}) comes before it and \
                     matches every request it matches",
                    first.priority()
                ),
                _ => format!(
                    "route {id} can never win: routes {} come before it and each matches every \
                     request it matches",
                    list(&routes[1..], more, at_least)
                ),
            };
            let mut order_key = vec![order];
            order_key.extend(names.iter().map(|(o, _)| *o));
            self.never_wins.insert(
                id,
                Held {
                    finding: Finding {
                        kind: FindingKind::NeverWins,
                        routes,
                        more,
                        at_least,
                        message,
                        location: None,
                    },
                    order: order_key,
                },
            );
        }
    }

    /// The duplicate-expression finding of a class, made afresh.
    pub(super) fn recheck_duplicates(&mut self, class: ClassId) {
        self.duplicates.remove(&class);
        let Some(c) = self.classes.get(&class) else {
            return;
        };
        if c.members.len() < 2 {
            return;
        }
        let named: Vec<(Order, Uuid)> = c
            .members
            .iter()
            .take(self.options.max_named + 1)
            .copied()
            .collect();
        let more = c.members.len() - named.len();
        let routes: Vec<Uuid> = named.iter().map(|(_, id)| *id).collect();
        let message = format!(
            "routes {} have the same expression: {}",
            list(&routes, more, false),
            quoted(&c.printed)
        );
        self.duplicates.insert(
            class,
            Held {
                finding: Finding {
                    kind: FindingKind::DuplicateExpression,
                    routes,
                    more,
                    at_least: false,
                    message,
                    location: None,
                },
                order: named.iter().map(|(o, _)| *o).collect(),
            },
        );
    }
}

/// The routes matching one witness request, as [`Linter::matching`] finds them.
#[derive(Debug, Default)]
pub(super) struct Matching {
    /// Every matching route of the classes examined, in routing order.
    pub(super) routes: Vec<(Order, Uuid, ClassId)>,
    /// The classes examined that match, in the routing order of their first route.
    pub(super) classes: Vec<(Order, ClassId)>,
    /// The matching routes of each of `classes` (same place), in routing order.
    pub(super) members: Vec<Vec<(Order, Uuid)>>,
    /// Whether a matching class was left out (past the budget).
    pub(super) capped: bool,
}

/// `a, b and c`, or `a, b, c and 3 more` (`at least 3 more` when `at_least`).
pub(super) fn list(routes: &[Uuid], more: usize, at_least: bool) -> String {
    let mut out = String::new();
    let mut names: Vec<String> = routes.iter().map(Uuid::to_string).collect();
    if more > 0 {
        names.push(format!(
            "{}{more} more",
            if at_least { "at least " } else { "" }
        ));
    } else if at_least {
        names.push("possibly more".to_owned());
    }
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == names.len() { " and " } else { ", " });
        }
        out.push_str(n);
    }
    out
}

/// `s`, cut to [`QUOTED`] characters (then ending with `…`).
pub(super) fn quoted(s: &str) -> String {
    match s.char_indices().nth(QUOTED) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}
