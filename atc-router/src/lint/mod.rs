//! Lint: what is wrong with a route table that no error reports. Routes that can never win,
//! routes of equal priority that overlap, duplicate expressions, and path regexes not anchored
//! at the start.
//!
//! Invariants:
//! - No false alarms. A route is reported as never winning only when a route before it in
//!   routing order is proved to match every request it matches ([`implication`]); two routes
//!   are reported as overlapping only when a concrete request matches both ([`witness`]).
//!   Where the linter cannot decide, it says nothing.
//! - Incremental: [`Linter::update`] after a change of some routes costs what those routes
//!   touch (an index lookup for each one's witness request, and the witnesses of routes keyed
//!   under the same values), and leaves the findings [`Linter::new`] would give for the new
//!   table. The tests compare the two after random changes.
//!
//! Findings about a pair are found from the witness of the narrower route: if `s` matches
//! every request `r` matches, `s` also matches `r`'s witness, and so is among the index's
//! candidates for it.

mod implication;
mod witness;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;

use uuid::Uuid;

use crate::compile::eval::eval;
use crate::compile::program::{Instr, Lit};
use crate::error::Location;
use crate::index::requirement::{Key, KeyKind};
use crate::index::{requirements, Entry, LevelBufs, Order, Requirement};
use crate::language::{parse_with_limits, Op};
use crate::router::Router;
use crate::schema::context::{Context, MatchRecord};
use crate::schema::names::FieldId;
use crate::schema::value::Value;

use implication::implies;
use witness::Witness;

/// What a [`Finding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    /// A route that can never win: a route before it in routing order matches every request
    /// it matches. `routes` is `[the route that never wins, the route that takes its requests]`.
    NeverWins,
    /// Two routes of equal priority that both match some request: which one wins it depends
    /// only on their ids. `routes` holds the two in routing order.
    EqualPriorityOverlap,
    /// Routes whose expressions are the same once parsed (spacing, parentheses and literal
    /// spellings aside). `routes` holds them all, in routing order.
    DuplicateExpression,
    /// A regex on `http.path` that is not anchored at the start (`~ "/users/\d+"` also matches
    /// `/admin/users/1`). `routes` holds the route.
    UnanchoredPathRegex,
}

impl FindingKind {
    /// A short stable name: `never-wins`, `equal-priority-overlap`, `duplicate-expression`,
    /// `unanchored-path-regex`.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::NeverWins => "never-wins",
            FindingKind::EqualPriorityOverlap => "equal-priority-overlap",
            FindingKind::DuplicateExpression => "duplicate-expression",
            FindingKind::UnanchoredPathRegex => "unanchored-path-regex",
        }
    }
}

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// The routes involved (see [`FindingKind`] for their order).
    pub routes: Vec<Uuid>,
    /// One line saying why.
    pub message: String,
    /// The place in the first route's text it is about, when it is about one predicate.
    pub location: Option<Location>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)?;
        if let Some(l) = &self.location {
            write!(f, "\n{l}")?;
        }
        Ok(())
    }
}

/// The findings of a route table, kept up to date as routes change (see the module docs).
///
/// ```
/// use std::sync::Arc;
/// use atc_router::{FindingKind, Linter, Router, Schema, Type, Uuid};
///
/// let mut schema = Schema::new();
/// schema.add_field("http.host", Type::String).unwrap();
/// schema.add_field("http.path", Type::String).unwrap();
/// let mut router = Router::new(Arc::new(schema));
/// let (wide, narrow) = (Uuid::from_u128(1), Uuid::from_u128(2));
/// router.add(wide, 20, r#"http.host == "api.example" && http.path ^= "/users""#).unwrap();
/// let mut lint = Linter::new(&router);
/// assert_eq!(lint.findings().count(), 0);
///
/// router.add(narrow, 10, r#"http.host == "api.example" && http.path == "/users/me""#).unwrap();
/// lint.update(&router, &[narrow]);
/// let f = lint.findings().next().unwrap();
/// assert_eq!(f.kind, FindingKind::NeverWins);
/// assert_eq!(f.routes, vec![narrow, wide]);
/// ```
#[derive(Debug, Default)]
pub struct Linter {
    /// Findings about one route or a pair, by kind and routes.
    findings: BTreeMap<(FindingKind, Vec<Uuid>), Finding>,
    /// Duplicate-expression findings, by the printed expression.
    duplicates: HashMap<String, Finding>,
    witnesses: HashMap<Uuid, Witness>,
    by_value: WitnessValues,
    /// Each route's expression as printed after parsing, and the routes of each.
    printed: HashMap<Uuid, String>,
    by_printed: HashMap<String, BTreeSet<Uuid>>,
}

impl Router {
    /// Lints the whole table (see [`Linter`]): the findings, ordered by kind and routes.
    pub fn lint(&self) -> Vec<Finding> {
        Linter::new(self).findings().cloned().collect()
    }
}

/// Buffers reused across the routes of one lint run.
struct Scratch {
    ctx: Context,
    record: MatchRecord,
    lowered: String,
    levels: Vec<LevelBufs>,
    found: Vec<Entry>,
}

impl Scratch {
    fn new(router: &Router) -> Scratch {
        Scratch {
            ctx: Context::new(router.schema().clone()),
            record: MatchRecord::default(),
            lowered: String::new(),
            levels: Vec::new(),
            found: Vec::new(),
        }
    }

    /// Whether the route in `slot` matches the request in `self.ctx`.
    fn matches(&mut self, router: &Router, slot: u32) -> bool {
        self.record.clear();
        eval(
            router.program(slot),
            &self.ctx,
            &mut self.lowered,
            &mut self.record,
        )
    }
}

impl Linter {
    /// Lints every route of `router`.
    pub fn new(router: &Router) -> Linter {
        let mut lint = Linter::default();
        let mut scratch = Scratch::new(router);
        let slots: Vec<(Order, u32)> = router.slots_in_order().collect();
        for &(order, slot) in &slots {
            lint.learn(router, &mut scratch, order.id(), slot, false);
        }
        // Sorted once, rather than inserted one by one as `learn` does for an update.
        lint.by_value = WitnessValues::build(&lint.witnesses);
        for &(order, slot) in &slots {
            lint.check_route(router, order, slot);
            lint.check_witness(router, &mut scratch, order, slot);
        }
        let groups: Vec<String> = lint
            .by_printed
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .map(|(p, _)| p.clone())
            .collect();
        for printed in groups {
            lint.check_duplicates(router, &printed);
        }
        lint
    }

    /// The findings, ordered by kind, then by the routes involved.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        let mut all: Vec<&Finding> = self
            .findings
            .values()
            .chain(self.duplicates.values())
            .collect();
        all.sort_by(|a, b| (a.kind, &a.routes).cmp(&(b.kind, &b.routes)));
        all.into_iter()
    }

    /// Brings the findings up to date after the routes with ids `changed` were added, removed
    /// or changed in `router` (the router the linter was made from).
    pub fn update(&mut self, router: &Router, changed: &[Uuid]) {
        let changed: BTreeSet<Uuid> = changed.iter().copied().collect();
        let mut scratch = Scratch::new(router);
        let mut groups = BTreeSet::new();
        for id in &changed {
            if let Some(p) = self.forget(*id) {
                groups.insert(p);
            }
        }
        self.findings
            .retain(|_, f| !f.routes.iter().any(|id| changed.contains(id)));
        let live: Vec<(Order, u32)> = changed
            .iter()
            .filter_map(|id| {
                let slot = router.slot_of(*id)?;
                Some((router.order_of(slot), slot))
            })
            .collect();
        for &(order, slot) in &live {
            if let Some(p) = self.learn(router, &mut scratch, order.id(), slot, true) {
                groups.insert(p);
            }
        }
        for &(order, slot) in &live {
            self.check_route(router, order, slot);
            self.check_witness(router, &mut scratch, order, slot);
            self.check_covered_by(router, &mut scratch, order, slot);
        }
        for printed in groups {
            self.check_duplicates(router, &printed);
        }
    }

    /// Records a route's witness (in the sorted values too when `sorted_now`; a full lint
    /// sorts them all at once) and printed form; returns the printed form.
    fn learn(
        &mut self,
        router: &Router,
        scratch: &mut Scratch,
        id: Uuid,
        slot: u32,
        sorted_now: bool,
    ) -> Option<String> {
        if let Some(w) = Witness::of(
            router.program(slot),
            &mut scratch.ctx,
            &mut scratch.record,
            &mut scratch.lowered,
        ) {
            if sorted_now {
                self.by_value.insert(id, &w);
            }
            self.witnesses.insert(id, w);
        }
        let printed = parse_with_limits(router.text_of(slot), router.limits())
            .ok()?
            .expr
            .to_string();
        self.printed.insert(id, printed.clone());
        self.by_printed
            .entry(printed.clone())
            .or_default()
            .insert(id);
        Some(printed)
    }

    /// Forgets what [`Linter::learn`] recorded; returns the route's printed form.
    fn forget(&mut self, id: Uuid) -> Option<String> {
        if let Some(w) = self.witnesses.remove(&id) {
            self.by_value.remove(id, &w);
        }
        let printed = self.printed.remove(&id)?;
        if let Some(ids) = self.by_printed.get_mut(&printed) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_printed.remove(&printed);
            }
        }
        Some(printed)
    }

    /// Findings about one route alone: unanchored path regexes.
    fn check_route(&mut self, router: &Router, order: Order, slot: u32) {
        let code = router.program(slot).view();
        let Some(path) = router.schema().lookup("http.path") else {
            return;
        };
        let text = router.text_of(slot);
        let mut ordinal = 0;
        for instr in code.code() {
            let Instr::Pred(p) = instr else {
                continue;
            };
            let at = ordinal;
            ordinal += 1;
            let Lit::Regex(re) = &p.lit else {
                continue;
            };
            if p.field != path || p.op != Op::Regex || re.is_anchored_at_start() {
                continue;
            }
            let location = parse_with_limits(text, router.limits())
                .ok()
                .and_then(|parsed| parsed.spans.get(at).cloned())
                .map(|s| Location::new(text, s.predicate));
            let id = order.id();
            self.add(Finding {
                kind: FindingKind::UnanchoredPathRegex,
                routes: vec![id],
                message: format!(
                    "route {id}: the regex {:?} on http.path is not anchored with ^, so it also \
                     matches paths that only contain what it describes",
                    re.as_str()
                ),
                location,
            });
        }
    }

    /// Findings between a route and the routes its witness request meets: the routes that
    /// can match everything it matches, and equal-priority routes matching the same request.
    fn check_witness(&mut self, router: &Router, scratch: &mut Scratch, order: Order, slot: u32) {
        let Some(w) = self.witnesses.get(&order.id()) else {
            return;
        };
        if w.fill(&mut scratch.ctx).is_none() {
            return;
        }
        scratch.found.clear();
        if !router.candidates_into(&scratch.ctx, &mut scratch.levels, &mut scratch.found) {
            return;
        }
        let found = std::mem::take(&mut scratch.found);
        for &(other_order, other) in &found {
            if other != slot && scratch.matches(router, other) {
                self.pair(router, (order, slot), (other_order, other));
            }
        }
        scratch.found = found;
    }

    /// For a route that changed: the routes whose witness it matches (the routes it may match
    /// everything of), found through the witness values its requirements select.
    fn check_covered_by(
        &mut self,
        router: &Router,
        scratch: &mut Scratch,
        order: Order,
        slot: u32,
    ) {
        let reqs = requirements(&router.program(slot).view());
        // The fewest witnesses any one requirement lets through, looked up with a growing
        // bound (each lookup stops past it), so a broad key (`http.path ^= "/"`) costs as much
        // as the narrowest one of the route; all of them when the route has no requirement (it
        // may match any witness).
        let mut cap: usize = 64;
        let ids = loop {
            if reqs.is_empty() {
                break self.witnesses.keys().copied().collect::<Vec<_>>();
            }
            let found = reqs
                .iter()
                .filter_map(|r| self.by_value.admitted(r, cap))
                .min_by_key(Vec::len);
            if let Some(ids) = found {
                break ids;
            }
            cap = cap.saturating_mul(8);
        };
        for id in ids {
            if id == order.id() {
                continue;
            }
            let (Some(other), Some(w)) = (router.slot_of(id), self.witnesses.get(&id)) else {
                continue;
            };
            // The route's other requirements first, on the witness's values: most witnesses a
            // broad key lets through fail one of them, for much less than an evaluation.
            // (Regex keys are left to the evaluation: testing one compiles its regex.)
            let plausible = reqs
                .iter()
                .filter(|r| r.disc.kind != KeyKind::Regex)
                .all(|r| {
                    w.values
                        .iter()
                        .any(|(f, v)| *f == r.disc.field && r.admits_value(v))
                });
            if plausible && w.fill(&mut scratch.ctx).is_some() && scratch.matches(router, slot) {
                let other_order = router.order_of(other);
                self.pair(router, (other_order, other), (order, slot));
            }
        }
    }

    /// Two routes that both match the witness of `a`.
    fn pair(&mut self, router: &Router, a: (Order, u32), b: (Order, u32)) {
        let (first, second) = if a.0 < b.0 { (a, b) } else { (b, a) };
        let (f_id, s_id) = (first.0.id(), second.0.id());
        if first.0.priority() == second.0.priority() {
            self.add(Finding {
                kind: FindingKind::EqualPriorityOverlap,
                routes: vec![f_id, s_id],
                message: format!(
                    "routes {f_id} and {s_id} have the same priority ({}) and both match some \
                     requests: which one wins those depends only on their ids",
                    first.0.priority()
                ),
                location: None,
            });
        }
        // Whichever witness found the pair, the implication decides.
        if implies(
            &router.program(second.1).view(),
            &router.program(first.1).view(),
        ) {
            self.add(Finding {
                kind: FindingKind::NeverWins,
                routes: vec![s_id, f_id],
                message: format!(
                    "route {s_id} can never win: route {f_id} (priority {}) comes before it and \
                     matches every request it matches",
                    first.0.priority()
                ),
                location: None,
            });
        }
    }

    /// The duplicate-expression finding of the routes printed as `printed`, made afresh.
    fn check_duplicates(&mut self, router: &Router, printed: &str) {
        self.duplicates.remove(printed);
        let Some(ids) = self.by_printed.get(printed) else {
            return;
        };
        if ids.len() < 2 {
            return;
        }
        let mut routes: Vec<(Order, Uuid)> = ids
            .iter()
            .filter_map(|id| Some((router.order_of(router.slot_of(*id)?), *id)))
            .collect();
        routes.sort();
        let routes: Vec<Uuid> = routes.into_iter().map(|(_, id)| id).collect();
        let list = routes
            .iter()
            .map(Uuid::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let finding = Finding {
            kind: FindingKind::DuplicateExpression,
            routes,
            message: format!("routes {list} have the same expression: {printed}"),
            location: None,
        };
        self.duplicates.insert(printed.to_owned(), finding);
    }

    fn add(&mut self, f: Finding) {
        self.findings.insert((f.kind, f.routes.clone()), f);
    }
}

/// The witnesses' values, sorted, so that the witnesses a requirement admits are found by a
/// range rather than a scan.
///
/// Invariant: [`WitnessValues::admitted`] returns every witness with a value on the
/// requirement's field that meets it (and possibly others, which the caller evaluates). A
/// witness without a value on the field cannot satisfy a route with that requirement.
#[derive(Debug, Default)]
struct WitnessValues {
    texts: BTreeSet<(FieldId, String, Uuid)>,
    lowered: BTreeSet<(FieldId, String, Uuid)>,
    reversed: BTreeSet<(FieldId, Vec<u8>, Uuid)>,
    ints: BTreeSet<(FieldId, i64, Uuid)>,
    addrs: BTreeSet<(FieldId, IpAddr, Uuid)>,
    fields: BTreeSet<(FieldId, Uuid)>,
}

impl WitnessValues {
    /// The values of all of `witnesses`, each set built from one sorted list.
    fn build(witnesses: &HashMap<Uuid, Witness>) -> WitnessValues {
        let mut texts = Vec::new();
        let mut lowered = Vec::new();
        let mut reversed_texts = Vec::new();
        let mut ints = Vec::new();
        let mut addrs = Vec::new();
        let mut fields = Vec::new();
        for (id, w) in witnesses {
            for (f, v) in &w.values {
                fields.push((*f, *id));
                match v {
                    Value::String(s) => {
                        texts.push((*f, s.clone(), *id));
                        lowered.push((*f, s.to_lowercase(), *id));
                        reversed_texts.push((*f, reversed(s), *id));
                    }
                    Value::Int(i) => ints.push((*f, *i, *id)),
                    Value::IpAddr(a) => addrs.push((*f, *a, *id)),
                    Value::IpCidr(_) => {}
                }
            }
        }
        WitnessValues {
            texts: texts.into_iter().collect(),
            lowered: lowered.into_iter().collect(),
            reversed: reversed_texts.into_iter().collect(),
            ints: ints.into_iter().collect(),
            addrs: addrs.into_iter().collect(),
            fields: fields.into_iter().collect(),
        }
    }

    fn insert(&mut self, id: Uuid, w: &Witness) {
        for (f, v) in &w.values {
            self.fields.insert((*f, id));
            match v {
                Value::String(s) => {
                    self.texts.insert((*f, s.clone(), id));
                    self.lowered.insert((*f, s.to_lowercase(), id));
                    self.reversed.insert((*f, reversed(s), id));
                }
                Value::Int(i) => {
                    self.ints.insert((*f, *i, id));
                }
                Value::IpAddr(a) => {
                    self.addrs.insert((*f, *a, id));
                }
                Value::IpCidr(_) => {}
            }
        }
    }

    fn remove(&mut self, id: Uuid, w: &Witness) {
        for (f, v) in &w.values {
            self.fields.remove(&(*f, id));
            match v {
                Value::String(s) => {
                    self.texts.remove(&(*f, s.clone(), id));
                    self.lowered.remove(&(*f, s.to_lowercase(), id));
                    self.reversed.remove(&(*f, reversed(s), id));
                }
                Value::Int(i) => {
                    self.ints.remove(&(*f, *i, id));
                }
                Value::IpAddr(a) => {
                    self.addrs.remove(&(*f, *a, id));
                }
                Value::IpCidr(_) => {}
            }
        }
    }

    /// The witnesses whose value on `req`'s field may meet it (see the invariant).
    ///
    /// `None` as soon as there are more than `cap`: the caller keeps the smallest set.
    fn admitted(&self, req: &Requirement, cap: usize) -> Option<Vec<Uuid>> {
        let field = req.disc.field;
        let texts = if req.disc.lower {
            &self.lowered
        } else {
            &self.texts
        };
        let room = |out: &Vec<Uuid>| cap.saturating_add(1).saturating_sub(out.len());
        let starting = |prefix: &str, out: &mut Vec<Uuid>| {
            let n = room(out);
            out.extend(
                texts
                    .range((field, prefix.to_owned(), Uuid::nil())..)
                    .take_while(|(f, s, _)| *f == field && s.starts_with(prefix))
                    .map(|(_, _, id)| *id)
                    .take(n),
            );
        };
        let mut out = Vec::new();
        for key in req.keys.iter() {
            match (req.disc.kind, key) {
                (KeyKind::Exact | KeyKind::Prefix, Key::Bytes(k)) => {
                    let Ok(k) = std::str::from_utf8(k) else {
                        continue;
                    };
                    if req.disc.kind == KeyKind::Exact {
                        let n = room(&out);
                        out.extend(
                            texts
                                .range((field, k.to_owned(), Uuid::nil())..)
                                .take_while(|(f, s, _)| *f == field && s == k)
                                .map(|(_, _, id)| *id)
                                .take(n),
                        );
                    } else {
                        starting(k, &mut out);
                    }
                }
                (KeyKind::Path, Key::Path(p)) => starting(&p.literal_start(), &mut out),
                (KeyKind::Suffix, Key::Bytes(k)) if !req.disc.lower => {
                    let tail: Vec<u8> = k.iter().rev().copied().collect();
                    let n = room(&out);
                    out.extend(
                        self.reversed
                            .range((field, tail.clone(), Uuid::nil())..)
                            .take_while(|(f, s, _)| *f == field && s.starts_with(&tail))
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                (KeyKind::Int, Key::Int(i)) => {
                    let n = room(&out);
                    out.extend(
                        self.ints
                            .range((field, i, Uuid::nil())..)
                            .take_while(|(f, v, _)| *f == field && *v == i)
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                (KeyKind::Cidr, Key::Cidr(c)) => {
                    let (first, last) = (c.first_address(), c.last_address());
                    let n = room(&out);
                    out.extend(
                        self.addrs
                            .range((field, first, Uuid::nil())..=(field, last, Uuid::max()))
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                // Kinds without an order to search by: every witness with the field.
                _ => {
                    out.clear();
                    out.extend(
                        self.fields
                            .range((field, Uuid::nil())..=(field, Uuid::max()))
                            .map(|(_, id)| *id)
                            .take(cap.saturating_add(1)),
                    );
                    return (out.len() <= cap).then_some(out);
                }
            }
            if out.len() > cap {
                return None;
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}

fn reversed(s: &str) -> Vec<u8> {
    s.bytes().rev().collect()
}
