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

mod implication;
mod witness;

use std::collections::BTreeSet;
use std::fmt;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use uuid::Uuid;

use crate::compile::eval::eval;
use crate::compile::program::{Instr, Lit, Program};
use crate::compile::record::MatchRecord;
use crate::error::{Location, Locator};
use crate::index::requirement::{Key, KeyKind};
use crate::index::{requirements, Entry, LevelBufs, Order, Requirement};
use crate::language::{parse_with_limits, Op};
use crate::router::context::Context;
use crate::router::Router;
use crate::schema::names::FieldId;
use crate::value::Value;

use implication::Conjuncts;
use witness::Witness;

const MAX_EXPRESSIONS_PER_WITNESS: usize = Linter::MAX_EXPRESSIONS_PER_WITNESS;
const MAX_COVERING_COMPARED: usize = Linter::MAX_COVERING_COMPARED;

/// The longest an expression or a request is quoted in a message, in characters.
const QUOTED: usize = 120;

/// What a [`Finding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    /// A route that can never win: routes before it in routing order each match every request
    /// it matches. `routes` is `[the route that never wins, the routes that take its requests
    /// (the first ones in routing order)]`.
    NeverWins,
    /// Routes of equal priority that all match one request (the witness request of one of
    /// them): which one wins it depends only on their ids. `routes` holds them in routing
    /// order (the first ones).
    EqualPriorityOverlap,
    /// Routes whose expressions are the same once parsed (spacing, parentheses and literal
    /// spellings aside). `routes` holds them in routing order (the first ones).
    DuplicateExpression,
    /// Regexes on `http.path` that are not anchored at the start (`~ "/users/\d+"` also matches
    /// `/admin/users/1`). `routes` holds the route; `location` points at the first such regex.
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

    const ALL: [FindingKind; 4] = [
        FindingKind::NeverWins,
        FindingKind::EqualPriorityOverlap,
        FindingKind::DuplicateExpression,
        FindingKind::UnanchoredPathRegex,
    ];
}

/// One lint finding: about one route, or a group of routes of which it names the first few.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// The routes involved, at most [`LintOptions::max_named`] besides the first (see
    /// [`FindingKind`] for their order).
    pub routes: Vec<Uuid>,
    /// How many more routes the finding is about than `routes` names.
    pub more: usize,
    /// Whether `more` is only a lower bound: the linter stopped comparing at one of its caps
    /// ([`Linter::MAX_EXPRESSIONS_PER_WITNESS`], [`Linter::MAX_COVERING_COMPARED`]).
    pub at_least: bool,
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

/// How much a lint reports (see [`Linter::with_options`]).
///
/// ```
/// use atc_router::LintOptions;
///
/// let opts = LintOptions { max_per_kind: 50, ..LintOptions::default() };
/// assert_eq!(opts.max_named, LintOptions::DEFAULT_MAX_NAMED);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LintOptions {
    /// Most findings of each kind reported by [`Linter::findings`] and [`Router::lint_with`]:
    /// the first ones in the order of the findings (by the routing order of their routes); the
    /// others are kept, counted by [`Linter::omitted`], and not reported. Default
    /// [`LintOptions::DEFAULT_MAX_PER_KIND`].
    pub max_per_kind: usize,
    /// Most routes a finding names besides the one it is about (for a group, besides its
    /// first); the others are counted in [`Finding::more`]. Default
    /// [`LintOptions::DEFAULT_MAX_NAMED`].
    pub max_named: usize,
}

impl LintOptions {
    /// Default of [`LintOptions::max_per_kind`].
    pub const DEFAULT_MAX_PER_KIND: usize = 1000;
    /// Default of [`LintOptions::max_named`].
    pub const DEFAULT_MAX_NAMED: usize = 8;
}

impl Default for LintOptions {
    fn default() -> Self {
        LintOptions {
            max_per_kind: Self::DEFAULT_MAX_PER_KIND,
            max_named: Self::DEFAULT_MAX_NAMED,
        }
    }
}

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

    /// Whether `program` matches the request in `self.ctx`.
    fn matches(&mut self, program: &Program) -> bool {
        crate::work::add(program.view().code().len());
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
                let program = router.program(slot).clone();
                let witness = Witness::of(
                    &program,
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
            if plausible && w.witness.fill(&mut scratch.ctx).is_some() && scratch.matches(program) {
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
        let code = router.program(slot).view();
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

    /// The routes matching witness `w`, in routing order, grouped by class (see [`Matching`]).
    fn matching(
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
        scratch.found.clear();
        if !router.candidates_into(&scratch.ctx, &mut scratch.levels, &mut scratch.found) {
            return m;
        }
        let found = std::mem::take(&mut scratch.found);
        crate::work::add(found.len());
        let budget = MAX_EXPRESSIONS_PER_WITNESS.max(holders);
        // Each class is evaluated once: its place in `m.classes`, or `None` if it does not
        // match. Past the budget, classes not seen yet are evaluated only until one matches,
        // which makes the counts lower bounds.
        let mut seen: HashMap<ClassId, Option<usize>> = HashMap::default();
        for &(order, slot) in &found {
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
    fn describe(&self, router: &Router, w: WitnessId) -> String {
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
    fn overlaps_of(
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
    fn never_wins_of(&mut self, holders: &[(Order, Uuid, ClassId)], matched: &Matching) {
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
    fn recheck_duplicates(&mut self, class: ClassId) {
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
struct Matching {
    /// Every matching route of the classes examined, in routing order.
    routes: Vec<(Order, Uuid, ClassId)>,
    /// The classes examined that match, in the routing order of their first route.
    classes: Vec<(Order, ClassId)>,
    /// The matching routes of each of `classes` (same place), in routing order.
    members: Vec<Vec<(Order, Uuid)>>,
    /// Whether a matching class was left out (past the budget).
    capped: bool,
}

/// A hash of a witness's values.
fn value_hash(values: &[(FieldId, Value)]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(values)
}

/// `a, b and c`, or `a, b, c and 3 more` (`at least 3 more` when `at_least`).
fn list(routes: &[Uuid], more: usize, at_least: bool) -> String {
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
fn quoted(s: &str) -> String {
    match s.char_indices().nth(QUOTED) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
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
    texts: BTreeSet<(FieldId, String, WitnessId)>,
    lowered: BTreeSet<(FieldId, String, WitnessId)>,
    reversed: BTreeSet<(FieldId, Vec<u8>, WitnessId)>,
    ints: BTreeSet<(FieldId, i64, WitnessId)>,
    addrs: BTreeSet<(FieldId, IpAddr, WitnessId)>,
    fields: BTreeSet<(FieldId, WitnessId)>,
}

impl WitnessValues {
    /// The values of all of `witnesses`, each set built from one sorted list.
    fn build<'a>(witnesses: impl Iterator<Item = (WitnessId, &'a Witness)>) -> WitnessValues {
        let mut texts = Vec::new();
        let mut lowered = Vec::new();
        let mut reversed_texts = Vec::new();
        let mut ints = Vec::new();
        let mut addrs = Vec::new();
        let mut fields = Vec::new();
        for (id, w) in witnesses {
            for (f, v) in &w.values {
                fields.push((*f, id));
                match v {
                    Value::String(s) => {
                        texts.push((*f, s.clone(), id));
                        lowered.push((*f, s.to_lowercase(), id));
                        reversed_texts.push((*f, reversed(s), id));
                    }
                    Value::Int(i) => ints.push((*f, *i, id)),
                    Value::IpAddr(a) => addrs.push((*f, *a, id)),
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

    fn insert(&mut self, id: WitnessId, w: &Witness) {
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

    fn remove(&mut self, id: WitnessId, w: &Witness) {
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
    fn admitted(&self, req: &Requirement, cap: usize) -> Option<Vec<WitnessId>> {
        let field = req.disc.field;
        let texts = if req.disc.lower {
            &self.lowered
        } else {
            &self.texts
        };
        let room = |out: &Vec<WitnessId>| cap.saturating_add(1).saturating_sub(out.len());
        let starting = |prefix: &str, out: &mut Vec<WitnessId>| {
            let n = room(out);
            out.extend(
                texts
                    .range((field, prefix.to_owned(), 0)..)
                    .take_while(|(f, s, _)| *f == field && s.starts_with(prefix))
                    .map(|(_, _, id)| *id)
                    .take(n),
            );
        };
        // Kinds without an order to search the witnesses' values by: every witness with a value
        // of the field. (An exhaustive match: a new kind of key must say how lint searches it.)
        let searchable = match req.disc.kind {
            KeyKind::Exact | KeyKind::Prefix | KeyKind::Path | KeyKind::Int | KeyKind::Cidr => true,
            // Reversed texts are kept as written, not lowered.
            KeyKind::Suffix => !req.disc.lower,
            KeyKind::Contains | KeyKind::Regex => false,
        };
        let mut out = Vec::new();
        if !searchable {
            out.extend(
                self.fields
                    .range((field, 0)..=(field, WitnessId::MAX))
                    .map(|(_, id)| *id)
                    .take(cap.saturating_add(1)),
            );
            return (out.len() <= cap).then_some(out);
        }
        for key in req.keys.iter() {
            // A key's form follows its kind (`Requirement`'s invariant), so each kind reads the
            // form it has.
            match (req.disc.kind, key) {
                (KeyKind::Exact, Key::Bytes(k)) => {
                    let Ok(k) = std::str::from_utf8(k) else {
                        continue;
                    };
                    let n = room(&out);
                    out.extend(
                        texts
                            .range((field, k.to_owned(), 0)..)
                            .take_while(|(f, s, _)| *f == field && s == k)
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                (KeyKind::Prefix, Key::Bytes(k)) => {
                    let Ok(k) = std::str::from_utf8(k) else {
                        continue;
                    };
                    starting(k, &mut out);
                }
                (KeyKind::Path, Key::Path(p)) => starting(&p.literal_start(), &mut out),
                (KeyKind::Suffix, Key::Bytes(k)) => {
                    let tail: Vec<u8> = k.iter().rev().copied().collect();
                    let n = room(&out);
                    out.extend(
                        self.reversed
                            .range((field, tail.clone(), 0)..)
                            .take_while(|(f, s, _)| *f == field && s.starts_with(&tail))
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                (KeyKind::Int, Key::Int(i)) => {
                    let n = room(&out);
                    out.extend(
                        self.ints
                            .range((field, i, 0)..)
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
                            .range((field, first, 0)..=(field, last, WitnessId::MAX))
                            .map(|(_, _, id)| *id)
                            .take(n),
                    );
                }
                // A key whose form is not its kind's: no requirement is derived that way.
                (
                    KeyKind::Exact
                    | KeyKind::Prefix
                    | KeyKind::Path
                    | KeyKind::Suffix
                    | KeyKind::Int
                    | KeyKind::Cidr
                    | KeyKind::Contains
                    | KeyKind::Regex,
                    Key::Bytes(_) | Key::Int(_) | Key::Cidr(_) | Key::Path(_),
                ) => {
                    debug_assert!(false, "a {:?} key of form {key:?}", req.disc.kind);
                    return None;
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
