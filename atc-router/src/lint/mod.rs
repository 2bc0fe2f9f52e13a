//! Lint: what is wrong with a route table that no error reports. Routes that can never win,
//! routes of equal priority that overlap, duplicate expressions, and path regexes not anchored
//! at the start.
//!
//! Invariants:
//! - No false alarms. A route is reported as never winning only when the routes named with it
//!   come before it in routing order and are each proved to match every request it matches
//!   ([`implication`]); routes are reported as overlapping only when a concrete request matches
//!   them all ([`witness`]). Where the linter cannot decide, it says nothing.
//! - Bounded: a finding is about a group (a route and the routes that take its requests, the
//!   routes of one priority that match one request, the routes of one expression) and names
//!   at most [`LintOptions::max_named`] of the others, counting the rest; at most
//!   [`LintOptions::max_per_kind`] findings of each kind are reported. What the linter keeps is
//!   linear in the routes: their classes (routes of one printed expression share one), one
//!   witness request per class, and one finding per group.
//! - Incremental: [`Linter::update`] after a change of some routes recomputes what those
//!   routes touch (the witness requests they match, and the classes they leave and join), and
//!   leaves the findings [`Linter::new`] would give for the new table. The tests compare the two
//!   after random changes. So every finding is a function of the table alone, never of the
//!   index's shape: the candidates of a witness request are evaluated, and only the matching
//!   ones count.
//!
//! Findings are drawn from witness requests: if `s` matches every request `r` matches, `s`
//! also matches `r`'s witness, and so is among the index's candidates for it. Routes of one
//! class share a witness, and each distinct witness is looked up once: 10,000 routes of one
//! expression cost one lookup and one evaluation of each candidate expression, not 10,000.
//! Routes of one class give the same result on any request and the same implications, so each
//! is evaluated and compared once per witness. Two caps keep a table where many distinct
//! expressions match many witnesses from costing their product, and mark the counts they cut
//! as lower bounds ([`Finding::at_least`]): per witness, the matching expressions examined
//! ([`Linter::MAX_EXPRESSIONS_PER_WITNESS`], or as many as the witness has routes), and per
//! route, the distinct expressions before it compared with it for `never-wins`
//! ([`Linter::MAX_COVERING_COMPARED`]).
//! Nothing recurses deeper than an expression's nesting.

mod finding;
mod implication;
mod report;
mod witness;
mod witness_values;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use uuid::Uuid;

use crate::compile::eval::eval;
use crate::compile::program::{Code, Instr, Lit, Program};
use crate::compile::record::MatchRecord;
use crate::error::Locator;
use crate::index::requirement::KeyKind;
use crate::index::{requirements, Order};
use crate::language::{parse_with_limits, Op};
use crate::router::context::Context;
use crate::router::read_side::WalkBufs;
use crate::router::Router;
use crate::schema::names::FieldId;
use crate::value::Value;

pub use finding::{Finding, FindingKind, LintOptions};
use report::quoted;
use witness::Witness;
use witness_values::WitnessValues;

const MAX_EXPRESSIONS_PER_WITNESS: usize = Linter::MAX_EXPRESSIONS_PER_WITNESS;
const MAX_COVERING_COMPARED: usize = Linter::MAX_COVERING_COMPARED;

/// The longest an expression or a request is quoted in a message, in characters.
const QUOTED: usize = 120;

/// Routes of one printed expression.
type ClassId = u64;
/// One distinct witness request.
type WitnessId = u64;

/// Routes whose expressions print the same: they match the same requests.
#[derive(Debug)]
struct Class {
    printed: Arc<str>,
    /// In routing order (a full lint appends them in that order).
    members: Vec<(Order, Uuid)>,
    /// One member's program: the class's, kept while the class lives (an update that removes
    /// its last route still finds the witnesses it matched).
    program: Program,
    witness: Option<WitnessId>,
}

#[derive(Debug)]
struct WitnessEntry {
    witness: Witness,
    /// The classes whose witness it is: their routes are its holders.
    classes: Vec<ClassId>,
    /// The priorities of the overlap findings made from it.
    overlaps: Vec<u64>,
    /// Its last holder in routing order, when it was last checked.
    last_holder: Option<Order>,
    /// How many classes match it (past the budget, one more than the budget).
    matching: usize,
}

#[derive(Debug)]
struct RouteEntry {
    order: Order,
    class: ClassId,
}

/// A finding, with the routing order of its routes to sort by.
#[derive(Debug)]
struct Held {
    finding: Finding,
    order: Vec<Order>,
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
    options: LintOptions,
    routes: HashMap<Uuid, RouteEntry>,
    classes: HashMap<ClassId, Class>,
    class_of: HashMap<Arc<str>, ClassId>,
    witnesses: HashMap<WitnessId, WitnessEntry>,
    /// The witnesses by a hash of their values (which the entries hold).
    witness_of: HashMap<u64, Vec<WitnessId>>,
    by_value: WitnessValues,
    next_id: u64,
    never_wins: HashMap<Uuid, Held>,
    overlaps: HashMap<(WitnessId, u64), Held>,
    duplicates: HashMap<ClassId, Held>,
    unanchored: HashMap<Uuid, Held>,
}

impl Router {
    /// Lints the whole table (see [`Linter`]): the findings, ordered by kind, then by the
    /// routing order of their routes, at most [`LintOptions::DEFAULT_MAX_PER_KIND`] of each
    /// kind.
    pub fn lint(&self) -> Vec<Finding> {
        self.lint_with(LintOptions::default())
    }

    /// [`Router::lint`] with other limits.
    pub fn lint_with(&self, options: LintOptions) -> Vec<Finding> {
        Linter::with_options(self, options)
            .findings()
            .cloned()
            .collect()
    }
}

/// Buffers reused across the routes of one lint run.
struct Scratch {
    ctx: Context,
    record: MatchRecord,
    lowered: String,
    walk: WalkBufs,
    /// The candidates' slots, in routing order.
    found: Vec<u32>,
}

impl Scratch {
    fn new(router: &Router) -> Scratch {
        Scratch {
            ctx: Context::new(router.schema().clone()),
            record: MatchRecord::default(),
            lowered: String::new(),
            walk: WalkBufs::default(),
            found: Vec::new(),
        }
    }

    /// Whether `program` matches the request in `self.ctx`.
    fn matches(&mut self, program: Code<'_>) -> bool {
        crate::work::add(program.code().len());
        self.record.clear();
        eval(
            program,
            &self.ctx.values,
            &mut self.lowered,
            &mut self.record,
        )
    }
}

impl Linter {
    /// Per witness request, the distinct matching expressions (classes of routes) examined,
    /// the first ones in routing order; a witness held by more routes examines as many as it
    /// has routes. Further matching expressions are not compared, and the counts of that
    /// witness's findings are lower bounds ([`Finding::at_least`]).
    pub const MAX_EXPRESSIONS_PER_WITNESS: usize = 1024;

    /// Per route, the distinct expressions before it (among those matching its witness) that
    /// its `never-wins` finding compares it with, the first ones in routing order.
    pub const MAX_COVERING_COMPARED: usize = 64;

    /// Lints every route of `router`, with the default [`LintOptions`].
    pub fn new(router: &Router) -> Linter {
        Linter::with_options(router, LintOptions::default())
    }

    /// Lints every route of `router`.
    pub fn with_options(router: &Router, options: LintOptions) -> Linter {
        let mut lint = Linter {
            options,
            ..Linter::default()
        };
        let mut scratch = Scratch::new(router);
        for (order, slot) in router.slots_in_order() {
            lint.learn(router, &mut scratch, order, slot, false);
        }
        // Sorted once, rather than inserted one by one as `learn` does for an update.
        lint.by_value =
            WitnessValues::build(lint.witnesses.iter().map(|(id, w)| (*id, &w.witness)));
        let mut witnesses: Vec<WitnessId> = lint.witnesses.keys().copied().collect();
        witnesses.sort_unstable();
        for w in witnesses {
            lint.recheck_witness(router, &mut scratch, w);
        }
        let classes: Vec<ClassId> = lint.classes.keys().copied().collect();
        for c in classes {
            lint.recheck_duplicates(c);
        }
        lint
    }

    /// The findings, ordered by kind, then by the routing order of their routes: at most
    /// [`LintOptions::max_per_kind`] of each kind, the first ones.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        let max = self.options.max_per_kind;
        FindingKind::ALL
            .into_iter()
            .flat_map(move |kind| {
                let mut of_kind = self.held(kind);
                // The message settles ties (groups of the same routes drawn from two requests).
                of_kind.sort_by(|a, b| {
                    (&a.order, a.finding.more, &a.finding.message).cmp(&(
                        &b.order,
                        b.finding.more,
                        &b.finding.message,
                    ))
                });
                of_kind.truncate(max);
                of_kind
            })
            .map(|h| &h.finding)
    }

    /// How many findings the linter holds but [`Linter::findings`] leaves out (past
    /// [`LintOptions::max_per_kind`] of their kind).
    pub fn omitted(&self) -> usize {
        FindingKind::ALL
            .into_iter()
            .map(|kind| {
                self.held(kind)
                    .len()
                    .saturating_sub(self.options.max_per_kind)
            })
            .sum()
    }

    fn held(&self, kind: FindingKind) -> Vec<&Held> {
        match kind {
            FindingKind::NeverWins => self.never_wins.values().collect(),
            FindingKind::EqualPriorityOverlap => self.overlaps.values().collect(),
            FindingKind::DuplicateExpression => self.duplicates.values().collect(),
            FindingKind::UnanchoredPathRegex => self.unanchored.values().collect(),
        }
    }

    /// Brings the findings up to date after the routes with ids `changed` were added, removed
    /// or changed in `router` (the router the linter was made from).
    pub fn update(&mut self, router: &Router, changed: &[Uuid]) {
        let changed: BTreeSet<Uuid> = changed.iter().copied().collect();
        let mut scratch = Scratch::new(router);
        // Witnesses to recheck, and witnesses a changed route matches (or matched) that it may
        // leave as they are (see `Linter::unaffected`), with its place and how it changes the
        // number of classes matching them.
        let mut witnesses = BTreeSet::new();
        let mut touched: HashMap<WitnessId, Vec<(Order, isize)>> = HashMap::default();
        let mut classes = BTreeSet::new();
        for id in &changed {
            let Some(route) = self.routes.remove(id) else {
                continue;
            };
            // The witnesses the route matched, found with its class's program before the class
            // may go.
            let last = self
                .classes
                .get(&route.class)
                .is_some_and(|c| c.members.len() == 1);
            for w in self.matched_witnesses(&mut scratch, route.class) {
                touched
                    .entry(w)
                    .or_default()
                    .push((route.order, -isize::from(last)));
            }
            self.never_wins.remove(id);
            self.unanchored.remove(id);
            classes.insert(route.class);
            let Some(class) = self.classes.get_mut(&route.class) else {
                continue;
            };
            if let Ok(at) = class.members.binary_search(&(route.order, *id)) {
                class.members.remove(at);
            }
            witnesses.extend(class.witness);
            if class.members.is_empty() {
                self.forget_class(route.class);
            }
        }
        for id in &changed {
            let Some(slot) = router.slot_of(*id) else {
                continue;
            };
            let order = router.order_of(slot);
            let class = self.learn(router, &mut scratch, order, slot, true);
            let first = self
                .classes
                .get(&class)
                .is_some_and(|c| c.members.len() == 1);
            for w in self.matched_witnesses(&mut scratch, class) {
                touched
                    .entry(w)
                    .or_default()
                    .push((order, isize::from(first)));
            }
            witnesses.extend(self.classes.get(&class).and_then(|c| c.witness));
            classes.insert(class);
        }
        for (w, events) in touched {
            if witnesses.contains(&w) {
                continue;
            }
            match events[..] {
                [(order, delta)] if self.unaffected(w, order) => {
                    if let Some(e) = self.witnesses.get_mut(&w) {
                        e.matching = e.matching.saturating_add_signed(delta);
                    }
                }
                _ => {
                    witnesses.insert(w);
                }
            }
        }
        for w in witnesses {
            self.recheck_witness(router, &mut scratch, w);
        }
        for c in classes {
            self.recheck_duplicates(c);
        }
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Records a route: its class (made, with its witness, if it is the first route of its
    /// expression; the witness's values are added to the sorted ones when `sorted_now`, a full
    /// lint sorts them all at once) and its unanchored regexes. Returns its class.
    fn learn(
        &mut self,
        router: &Router,
        scratch: &mut Scratch,
        order: Order,
        slot: u32,
        sorted_now: bool,
    ) -> ClassId {
        let id = order.id();
        let text = router.text_of(slot);
        crate::work::add(text.len());
        let parsed = parse_with_limits(text, router.limits()).ok();
        // A route's text parsed when it was added; should it not now, it is a class of its own.
        let printed: Arc<str> = match &parsed {
            Some(p) => p.expr.to_string().into(),
            None => format!("\u{0}{id}").into(),
        };
        let class = match self.class_of.get(&printed) {
            Some(c) => *c,
            None => {
                let c = self.fresh_id();
                let program = router.program(slot).to_program();
                let witness = Witness::of(
                    program.view(),
                    &mut scratch.ctx,
                    &mut scratch.record,
                    &mut scratch.lowered,
                )
                .map(|w| self.intern_witness(w, c, sorted_now));
                self.class_of.insert(printed.clone(), c);
                self.classes.insert(
                    c,
                    Class {
                        printed,
                        members: Vec::new(),
                        program,
                        witness,
                    },
                );
                c
            }
        };
        if let Some(cl) = self.classes.get_mut(&class) {
            let at = cl.members.partition_point(|m| *m < (order, id));
            cl.members.insert(at, (order, id));
        }
        self.routes.insert(id, RouteEntry { order, class });
        self.check_route(router, order, slot, parsed.as_ref().map(|p| &p.spans[..]));
        class
    }

    /// The id of witness `w`, made if new; records `class` as one of its holders.
    fn intern_witness(&mut self, w: Witness, class: ClassId, sorted_now: bool) -> WitnessId {
        let hash = value_hash(&w.values);
        let known = self.witness_of.get(&hash).and_then(|ids| {
            ids.iter()
                .copied()
                .find(|id| self.witnesses.get(id).is_some_and(|e| e.witness == w))
        });
        let id = match known {
            Some(id) => id,
            None => {
                let id = self.fresh_id();
                if sorted_now {
                    self.by_value.insert(id, &w);
                }
                self.witness_of.entry(hash).or_default().push(id);
                self.witnesses.insert(
                    id,
                    WitnessEntry {
                        witness: w,
                        classes: Vec::new(),
                        overlaps: Vec::new(),
                        last_holder: None,
                        matching: 0,
                    },
                );
                id
            }
        };
        if let Some(e) = self.witnesses.get_mut(&id) {
            if let Err(at) = e.classes.binary_search(&class) {
                e.classes.insert(at, class);
            }
        }
        id
    }

    /// Forgets a class without routes (its witness is rechecked by the caller, and forgotten
    /// there when it has no class left).
    fn forget_class(&mut self, class: ClassId) {
        let Some(c) = self.classes.remove(&class) else {
            return;
        };
        self.class_of.remove(&c.printed);
        if let Some(w) = c.witness.and_then(|w| self.witnesses.get_mut(&w)) {
            w.classes.retain(|c| *c != class);
        }
    }

    /// Whether a route at `order` that starts or stops matching witness `w` (whose holders did
    /// not change) leaves its findings as they are: it comes after every holder, at a lower
    /// priority than theirs, so it is in no group of theirs and takes no request from them, and
    /// the classes matching the witness stay under the budget (so no count becomes a lower
    /// bound). Then only the witness's number of matching classes changes. This keeps an update
    /// of a broad route (`http.path ^= "/"` at a low priority, matching thousands of witnesses)
    /// from rechecking every one of them.
    fn unaffected(&self, w: WitnessId, order: Order) -> bool {
        self.witnesses.get(&w).is_some_and(|e| {
            e.last_holder
                .is_some_and(|last| order > last && order.priority() < last.priority())
                && e.matching + 1 < MAX_EXPRESSIONS_PER_WITNESS
        })
    }

    /// The witnesses whose request the class's program matches, found through the witness
    /// values its requirements select.
    fn matched_witnesses(&self, scratch: &mut Scratch, class: ClassId) -> Vec<WitnessId> {
        let Some(class) = self.classes.get(&class) else {
            return Vec::new();
        };
        let program = &class.program;
        let reqs = requirements(&program.view());
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
        let mut out = Vec::new();
        for id in ids {
            let Some(w) = self.witnesses.get(&id) else {
                continue;
            };
            // The route's other requirements first, on the witness's values: most witnesses a
            // broad key lets through fail one of them, for much less than an evaluation.
            // (Regex keys are left to the evaluation: testing one compiles its regex.)
            let plausible = reqs
                .iter()
                .filter(|r| r.disc.kind != KeyKind::Regex)
                .all(|r| {
                    w.witness
                        .values
                        .iter()
                        .any(|(f, v)| *f == r.disc.field && r.admits_value(v))
                });
            if plausible
                && w.witness.fill(&mut scratch.ctx).is_some()
                && scratch.matches(program.view())
            {
                out.push(id);
            }
        }
        out
    }

    /// Findings about one route alone: its path regexes not anchored at the start, as one
    /// finding pointing at the first (`spans`: the route's parsed predicate spans).
    fn check_route(
        &mut self,
        router: &Router,
        order: Order,
        slot: u32,
        spans: Option<&[crate::language::PredicateSpans]>,
    ) {
        let id = order.id();
        self.unanchored.remove(&id);
        let Some(path) = router.schema().lookup("http.path") else {
            return;
        };
        let code = router.program(slot);
        let mut found = Vec::new();
        let mut ordinal = 0;
        for instr in code.code() {
            let Instr::Pred(p) = instr else {
                continue;
            };
            let at = ordinal;
            ordinal += 1;
            if let Lit::Regex(re) = &p.lit {
                if p.field == path && p.op == Op::Regex && !re.is_anchored_at_start() {
                    found.push((at, re.as_str()));
                }
            }
        }
        let Some(&(at, source)) = found.first() else {
            return;
        };
        let text = router.text_of(slot);
        let location = spans
            .and_then(|s| s.get(at))
            .map(|s| Locator::new(text).locate(s.predicate.clone()));
        let mut message = format!(
            "route {id}: the regex {} on http.path is not anchored with ^, so it also matches \
             paths that only contain what it describes",
            quoted(&format!("{source:?}"))
        );
        if found.len() > 1 {
            let _ = write!(
                message,
                " (and {} more such regex(es) in this route)",
                found.len() - 1
            );
        }
        self.unanchored.insert(
            id,
            Held {
                finding: Finding {
                    kind: FindingKind::UnanchoredPathRegex,
                    routes: vec![id],
                    more: 0,
                    at_least: false,
                    message,
                    location,
                },
                order: vec![order],
            },
        );
    }

    /// Makes afresh the findings drawn from witness `w`: the overlaps of equal-priority routes
    /// matching it, and the `never-wins` findings of the routes holding it. Forgets the
    /// witness if no class holds it any more.
    fn recheck_witness(&mut self, router: &Router, scratch: &mut Scratch, w: WitnessId) {
        let Some(entry) = self.witnesses.get_mut(&w) else {
            return;
        };
        for p in std::mem::take(&mut entry.overlaps) {
            self.overlaps.remove(&(w, p));
        }
        let mut holders: Vec<(Order, Uuid, ClassId)> = Vec::new();
        for c in &entry.classes {
            if let Some(class) = self.classes.get(c) {
                holders.extend(class.members.iter().map(|&(o, id)| (o, id, *c)));
            }
        }
        holders.sort_unstable();
        for (_, id, _) in &holders {
            self.never_wins.remove(id);
        }
        if holders.is_empty() {
            if let Some(e) = self.witnesses.remove(&w) {
                self.by_value.remove(w, &e.witness);
                let hash = value_hash(&e.witness.values);
                if let Some(ids) = self.witness_of.get_mut(&hash) {
                    ids.retain(|id| *id != w);
                    if ids.is_empty() {
                        self.witness_of.remove(&hash);
                    }
                }
            }
            return;
        }
        let matched = self.matching(router, scratch, w, holders.len());
        if let Some(e) = self.witnesses.get_mut(&w) {
            e.last_holder = holders.last().map(|h| h.0);
            e.matching = matched.classes.len() + usize::from(matched.capped);
        }
        self.overlaps_of(router, w, &holders, &matched);
        self.never_wins_of(&holders, &matched);
    }
}

/// A hash of a witness's values.
fn value_hash(values: &[(FieldId, Value)]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(values)
}
