//! Runs one rendered case ([`atc_testkit::Rendered`]) through our library and Kong's
//! `atc-router` 1.7.1 (the crate `kong`) and panics on any difference that is not one of the
//! documented ones (`docs/kong-differences.md`, tested one by one in `kong_deviations.rs`).
//!
//! Compared, in order:
//! - each route is accepted by both or refused by both (wording aside), and an accepted route
//!   uses the same fields; the only accepted differences are our refusal of a `lower()`
//!   comparison with uppercase letters and our limits, and our extension: routes with set
//!   literals (`f in [...]`), which Kong's parser refuses and ours may accept (such a route then
//!   stays in our router only, as the routes Kong is not given do);
//! - the routes both accept, added to both routers, give the same field list, and for every
//!   request the same winning route (or none); then again after half of them are removed;
//! - the winner's matched values and captures equal what Kong's own predicate evaluation
//!   gives when composed by docs/language.md "Evaluation" (only the predicates that decided the
//!   result count): Kong's raw result additionally holds values from failed branches, which is
//!   a documented difference, counted in [`Stats::leaks`];
//! - values Kong's library would abort on (a wrong type, an unknown field) go to our context
//!   only, and must be refused without changing it; routes Kong would abort on
//!   (`kong_text == None`) go to our router only, and must be a clean result either way.
//!
//! Kong's contexts are reset before every request, so its stale results (another documented
//! difference) never reach a comparison.
//!
//! This file is included by `testkit/tests/*.rs` and by `fuzz/fuzz_targets/kong_diff.rs`
//! (`#[path]`): it may use only `atc_router`, `atc_testkit` and `kong`.
#![allow(dead_code)] // each includer uses a different part

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use atc_router::{Context, Error, ExprErrorKind, MatchedValue, Router, Schema, Type, Value};
use atc_testkit::Rendered;
use kong::ast::{BinaryOperator, Expression, LhsTransformations, LogicalExpression};
use kong::interpreter::Execute;
use kong::semantics::{FieldCounter, Validate};

/// What a run saw (for checking that the generator keeps the comparison meaningful).
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub routes: usize,
    pub accepted: usize,
    pub refused_by_both: usize,
    /// Routes refused only by us, for a documented reason.
    pub documented_refusals: BTreeMap<&'static str, usize>,
    /// Routes only we were given (Kong's parser would abort on them).
    pub ours_only: usize,
    /// Routes we accept and Kong refuses because they use an extension of ours (set literals).
    pub extensions: BTreeMap<&'static str, usize>,
    pub requests: usize,
    pub matched: usize,
    /// Requests whose winner recorded values or captures.
    pub with_values: usize,
    /// Requests where Kong's raw result held values from branches that did not decide.
    pub leaks: usize,
    pub bad_values: usize,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.routes += o.routes;
        self.accepted += o.accepted;
        self.refused_by_both += o.refused_by_both;
        for (k, v) in &o.documented_refusals {
            *self.documented_refusals.entry(k).or_default() += v;
        }
        self.ours_only += o.ours_only;
        for (k, v) in &o.extensions {
            *self.extensions.entry(k).or_default() += v;
        }
        self.requests += o.requests;
        self.matched += o.matched;
        self.with_values += o.with_values;
        self.leaks += o.leaks;
        self.bad_values += o.bad_values;
    }
}

pub fn kong_type(t: Type) -> kong::ast::Type {
    match t {
        Type::String => kong::ast::Type::String,
        Type::Int => kong::ast::Type::Int,
        Type::IpAddr => kong::ast::Type::IpAddr,
        Type::IpCidr => kong::ast::Type::IpCidr,
    }
}

pub fn kong_value(v: &Value) -> kong::ast::Value {
    match v {
        Value::String(s) => kong::ast::Value::String(s.clone()),
        Value::Int(i) => kong::ast::Value::Int(*i),
        Value::IpAddr(a) => kong::ast::Value::IpAddr(*a),
        Value::IpCidr(c) => kong::ast::Value::IpCidr(c.to_string().parse().expect("a CIDR")),
    }
}

/// A matched value in a form both libraries' values render to.
fn shown_ours(v: MatchedValue<'_>) -> String {
    match v {
        MatchedValue::String(s) => format!("s:{s}"),
        MatchedValue::Int(i) => format!("i:{i}"),
        MatchedValue::IpAddr(a) => format!("a:{a}"),
        MatchedValue::IpCidr(c) => format!("c:{c}"),
    }
}

fn shown_kong(v: &kong::ast::Value) -> String {
    match v {
        kong::ast::Value::String(s) => format!("s:{s}"),
        kong::ast::Value::Int(i) => format!("i:{i}"),
        kong::ast::Value::IpAddr(a) => format!("a:{a}"),
        kong::ast::Value::IpCidr(c) => format!("c:{c}"),
        kong::ast::Value::Regex(r) => format!("r:{r}"),
    }
}

/// What a result says: matched values by field name, captures by key.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Values {
    pub matched: BTreeMap<String, String>,
    pub captures: BTreeMap<String, String>,
}

impl Values {
    fn from_kong(m: &kong::context::Match) -> Values {
        Values {
            matched: m
                .matches
                .iter()
                .map(|(k, v)| (k.clone(), shown_kong(v)))
                .collect(),
            captures: m
                .captures
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// Kong's result for one route evaluated by docs/language.md "Evaluation": each predicate is
/// evaluated by Kong's own interpreter into a fresh record, and records are kept only for
/// predicates that decided the result (both sides of a true `&&`, the first true side of `||`,
/// nothing under `!`), merged in evaluation order (a later record of the same key wins, as a map
/// insert does).
pub fn decided(
    e: &Expression,
    ctx: &mut kong::context::Context,
    out: &mut kong::context::Match,
) -> bool {
    match e {
        Expression::Logical(l) => match l.as_ref() {
            LogicalExpression::And(a, b) => {
                let mut m = kong::context::Match::new();
                let ok = decided(a, ctx, &mut m) && decided(b, ctx, &mut m);
                if ok {
                    merge(out, m);
                }
                ok
            }
            LogicalExpression::Or(a, b) => {
                for side in [a, b] {
                    let mut m = kong::context::Match::new();
                    if decided(side, ctx, &mut m) {
                        merge(out, m);
                        return true;
                    }
                }
                false
            }
            LogicalExpression::Not(inner) => {
                let mut discarded = kong::context::Match::new();
                !decided(inner, ctx, &mut discarded)
            }
        },
        Expression::Predicate(p) => {
            let mut m = kong::context::Match::new();
            let ok = p.execute(ctx, &mut m);
            if ok {
                merge(out, m);
            }
            ok
        }
    }
}

fn merge(out: &mut kong::context::Match, m: kong::context::Match) {
    out.matches.extend(m.matches);
    out.captures.extend(m.captures);
}

/// Why we refuse a route Kong accepts, when that is documented; `None` for anything else.
pub fn documented_refusal(kong_expr: &Expression, ours: &Error) -> Option<&'static str> {
    if let Error::Expr(e) = ours {
        if e.kind == ExprErrorKind::Limit {
            return Some("limits");
        }
    }
    let mut stack = vec![kong_expr];
    while let Some(e) = stack.pop() {
        match e {
            Expression::Logical(l) => match l.as_ref() {
                LogicalExpression::And(a, b) | LogicalExpression::Or(a, b) => {
                    stack.push(a);
                    stack.push(b);
                }
                LogicalExpression::Not(a) => stack.push(a),
            },
            Expression::Predicate(p) => {
                let lower = p.lhs.transformations.contains(&LhsTransformations::Lower);
                let compares_text = matches!(
                    p.op,
                    BinaryOperator::Equals
                        | BinaryOperator::Prefix
                        | BinaryOperator::Postfix
                        | BinaryOperator::Contains
                );
                if let (true, true, kong::ast::Value::String(s)) = (lower, compares_text, &p.rhs) {
                    if s.to_lowercase() != *s {
                        return Some("lower() with uppercase literal");
                    }
                }
            }
        }
    }
    None
}

/// The extension of ours (docs/kong-differences.md "Set literals") a route uses, which is why
/// Kong's parser refuses it; `None` when it uses none.
pub fn documented_extension(text: &str) -> Option<&'static str> {
    let tree = atc_router::parse(text).ok()?;
    tree.predicates()
        .iter()
        .any(|p| p.rhs.is_set())
        .then_some("set literals")
}

/// Kong's verdict on a route: its parsed tree and used fields, or its error.
pub fn kong_accepts(
    schema: &kong::schema::Schema,
    text: &str,
) -> Result<(Expression, BTreeSet<String>), String> {
    let e = kong::parser::parse(text).map_err(|e| e.to_string())?;
    e.validate(schema)?;
    let mut counter = HashMap::new();
    e.add_to_counter(&mut counter);
    let fields = counter.into_keys().collect();
    Ok((e, fields))
}

/// The fields a route added to Kong's router: those whose use count it raised.
fn added_fields(
    before: &HashMap<String, usize>,
    after: &HashMap<String, usize>,
) -> BTreeSet<String> {
    after
        .iter()
        .filter(|(k, n)| **n > before.get(*k).copied().unwrap_or(0))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The two routers of a case, and what is known of the routes both hold.
struct Routers<'k> {
    our_schema: Arc<Schema>,
    kong_schema: &'k kong::schema::Schema,
    ours: Router,
    theirs: kong::router::Router<'k>,
    /// Routes both hold: id → (priority, the text Kong was given).
    shared: HashMap<atc_router::Uuid, (u64, String)>,
    /// Kong's trees of the routes that won a request, parsed when first needed.
    trees: HashMap<atc_router::Uuid, Expression>,
    /// Routes only our router holds: those Kong is not given, and those using an extension.
    ours_only: BTreeSet<atc_router::Uuid>,
}

/// Runs the case; panics with the case's details on an undocumented difference.
pub fn check(case: &Rendered) -> Stats {
    let mut stats = Stats::default();
    let mut our_schema = Schema::new();
    let mut kong_schema = kong::schema::Schema::default();
    for (name, ty) in &case.schema {
        our_schema
            .add_field(name, *ty)
            .expect("generated schemas are valid");
        kong_schema.add_field(name, kong_type(*ty));
    }
    let our_schema = Arc::new(our_schema);
    let mut rs = Routers {
        ours: Router::new(our_schema.clone()),
        theirs: kong::router::Router::new(&kong_schema),
        our_schema,
        kong_schema: &kong_schema,
        shared: HashMap::new(),
        trees: HashMap::new(),
        ours_only: BTreeSet::new(),
    };

    for r in &case.routes {
        stats.routes += 1;
        // Adding is validating (a refused route changes nothing), in both libraries; each
        // compiles a route once.
        let verdict = rs.ours.add(r.id, r.priority, &r.text).map(|()| {
            let route = rs.ours.get(r.id).expect("an added route");
            route
                .field_ids()
                .into_iter()
                .map(|f| rs.our_schema.field(f).expect("a route's field").0)
                .collect::<BTreeSet<String>>()
        });
        let Some(kong_text) = &r.kong_text else {
            // Kong would abort: ours must answer cleanly, either way.
            stats.ours_only += 1;
            rs.ours_only.insert(r.id);
            if let Err(e) = verdict {
                let _ = e.to_string();
            }
            continue;
        };
        let before = rs.theirs.fields.clone();
        match (verdict, rs.theirs.add_matcher(r.priority as usize, r.id, kong_text)) {
            (Ok(fields), Ok(())) => {
                assert_eq!(
                    fields,
                    added_fields(&before, &rs.theirs.fields),
                    "the libraries see different fields in {:?}",
                    r.text
                );
                rs.shared.insert(r.id, (r.priority, kong_text.clone()));
                stats.accepted += 1;
            }
            (Err(_), Err(_)) => stats.refused_by_both += 1,
            (Err(e), Ok(())) => {
                assert!(rs.theirs.remove_matcher(r.priority as usize, r.id));
                let tree = kong::parser::parse(kong_text).expect("Kong parsed it before");
                match documented_refusal(&tree, &e) {
                    Some(why) => *stats.documented_refusals.entry(why).or_default() += 1,
                    None => panic!(
                        "we refuse a route Kong accepts: {:?}\nour error: {e}\nroutes: {:#?}",
                        r.text, case.routes
                    ),
                }
            }
            (Ok(_), Err(e)) => match documented_extension(&r.text) {
                Some(what) => {
                    *stats.extensions.entry(what).or_default() += 1;
                    rs.ours_only.insert(r.id);
                }
                None => panic!(
                    "we accept a route Kong refuses: {:?} (Kong given {kong_text:?})\nKong's error: {e}",
                    r.text
                ),
            },
        }
    }
    // As a loaded table is used: from `Router::FLAT_INDEX_MIN_ROUTES` (1,024) routes, matched
    // from its flat index, so that the removals below leave half of its routes dead in it.
    rs.ours.settle();
    rs.compare_fields(case);
    rs.run_requests(case, &mut stats);

    // Every other route both hold goes; the rest must still agree.
    let mut gone = 0;
    for r in &case.routes {
        let Some((priority, _)) = rs.shared.get(&r.id).cloned() else {
            continue;
        };
        gone += 1;
        if gone % 2 == 0 {
            continue;
        }
        assert!(rs.ours.remove(r.id), "our router lost {}", r.id);
        assert!(rs.theirs.remove_matcher(priority as usize, r.id));
        rs.shared.remove(&r.id);
    }
    rs.compare_fields(case);
    rs.run_requests(case, &mut stats);
    stats
}

impl Routers<'_> {
    /// The fields in use, but those only the routes Kong was not given use.
    fn compare_fields(&self, case: &Rendered) {
        let mut kong_fields: Vec<String> = self.theirs.fields.keys().cloned().collect();
        kong_fields.sort();
        let only_ours: BTreeSet<String> = case
            .routes
            .iter()
            .filter(|r| self.ours_only.contains(&r.id))
            .filter_map(|r| self.ours.get(r.id))
            .flat_map(|route| route.field_ids())
            .map(|f| self.our_schema.field(f).expect("a route's field").0)
            .collect();
        let mut our_fields = self.ours.fields();
        our_fields.sort();
        our_fields.retain(|f| kong_fields.contains(f) || !only_ours.contains(f));
        assert_eq!(our_fields, kong_fields, "fields in use differ");
    }

    fn run_requests(&mut self, case: &Rendered, stats: &mut Stats) {
        let mut ctx = Context::new(self.our_schema.clone());
        let mut kctx = kong::context::Context::new(self.kong_schema);
        for (n, req) in case.requests.iter().enumerate() {
            stats.requests += 1;
            ctx.reset();
            kctx.reset();
            let bad_at = req.values.len() / 2;
            for (i, (field, value)) in req.values.iter().enumerate() {
                if i == bad_at {
                    for (bf, bv) in &req.bad_values {
                        stats.bad_values += 1;
                        let before = ctx.values(bf).to_vec();
                        assert!(
                            ctx.add_value(bf, bv.clone()).is_err(),
                            "a {bv:?} for field {bf} was accepted"
                        );
                        assert_eq!(ctx.values(bf), &before[..], "a refused value changed {bf}");
                    }
                }
                ctx.add_value(field, value.clone()).unwrap_or_else(|e| {
                    panic!("generated value {value:?} for {field} refused: {e}")
                });
                kctx.add_value(field, kong_value(value));
            }
            let ours_won = self.ours.execute(&mut ctx);
            let kong_won = self.theirs.execute(&mut kctx);
            let our_id = ctx.result().map(|m| m.id());
            assert_eq!(ours_won, our_id.is_some());
            let kong_id = kong_won.then(|| kctx.result.as_ref().expect("a result").uuid);
            // A route only we hold may win where Kong finds a lower one or none: compare only
            // when the winner is a route both hold.
            if our_id.is_some_and(|id| !self.shared.contains_key(&id)) {
                continue;
            }
            assert_eq!(
                our_id, kong_id,
                "request {n} is routed differently\nrequest: {req:#?}\nroutes: {:#?}",
                case.routes
            );
            let Some(id) = our_id else { continue };
            stats.matched += 1;
            let text = &self.shared[&id].1;
            let tree = self
                .trees
                .entry(id)
                .or_insert_with(|| kong::parser::parse(text).expect("Kong parsed it before"));
            let m = ctx.result().expect("matched");
            let mut names = HashMap::new();
            tree.add_to_counter(&mut names);
            let our_values = Values {
                matched: names
                    .keys()
                    .filter_map(|n| m.matched_value(n).map(|v| (n.clone(), shown_ours(v))))
                    .collect(),
                captures: m.captures_map().into_iter().collect(),
            };
            let mut rebuilt = kong::context::Match::new();
            assert!(
                decided(tree, &mut kctx, &mut rebuilt),
                "Kong's predicates do not make its winner true"
            );
            let kong_decided = Values::from_kong(&rebuilt);
            let kong_raw = Values::from_kong(kctx.result.as_ref().expect("a result"));
            if kong_raw != kong_decided {
                stats.leaks += 1;
            }
            if our_values != Values::default() {
                stats.with_values += 1;
            }
            assert_eq!(
                our_values,
                kong_decided,
                "request {n}: matched values or captures differ (Kong's raw result: {kong_raw:?})\n\
                 route: {text:?}\nrequest: {req:#?}"
            );
        }
    }
}

// ---- Trees: both parsers must read a text alike, not only accept it alike. ----

/// A canonical text of our tree: `&&` and `||` as flat n-ary lists, transformations outermost
/// first, literals with their type (`s"…"`, `i…`, `a…`, `c…`; a set as `[…]` of those).
pub fn canon_ours(e: &atc_router::Expr) -> String {
    use atc_router::Expr;
    fn flat<'e>(e: &'e Expr, and: bool, out: &mut Vec<&'e Expr>) {
        match e {
            Expr::And(c) if and => c.iter().for_each(|c| flat(c, and, out)),
            Expr::Or(c) if !and => c.iter().for_each(|c| flat(c, and, out)),
            e => out.push(e),
        }
    }
    match e {
        Expr::And(_) | Expr::Or(_) => {
            let and = matches!(e, Expr::And(_));
            let mut parts = Vec::new();
            flat(e, and, &mut parts);
            let parts: Vec<String> = parts.into_iter().map(canon_ours).collect();
            format!("{}({})", if and { "&&" } else { "||" }, parts.join(", "))
        }
        Expr::Not(inner) => format!("!({})", canon_ours(inner)),
        Expr::Predicate(p) => {
            let mut lhs = p.lhs.field.clone();
            for t in p.lhs.transforms.iter().rev() {
                lhs = format!("{}({lhs})", t.name());
            }
            let literal = |v: &Value| match v {
                Value::String(s) => format!("s{s:?}"),
                Value::Int(i) => format!("i{i}"),
                Value::IpAddr(a) => format!("a{a}"),
                Value::IpCidr(c) => format!("c{c}"),
            };
            let rhs = match &p.rhs {
                atc_router::Rhs::Value(v) => literal(v),
                atc_router::Rhs::Set(elements) => format!(
                    "[{}]",
                    elements.iter().map(literal).collect::<Vec<_>>().join(", ")
                ),
            };
            format!("{lhs} {} {rhs}", p.op.symbol())
        }
    }
}

/// [`canon_ours`] for Kong's tree (whose `&&` and `||` are binary, and whose transformations
/// are listed innermost first).
pub fn canon_kong(e: &Expression) -> String {
    fn flat<'e>(e: &'e Expression, and: bool, out: &mut Vec<&'e Expression>) {
        if let Expression::Logical(l) = e {
            match (l.as_ref(), and) {
                (LogicalExpression::And(a, b), true) | (LogicalExpression::Or(a, b), false) => {
                    flat(a, and, out);
                    flat(b, and, out);
                    return;
                }
                _ => {}
            }
        }
        out.push(e);
    }
    match e {
        Expression::Logical(l) => match l.as_ref() {
            LogicalExpression::Not(inner) => format!("!({})", canon_kong(inner)),
            LogicalExpression::And(..) | LogicalExpression::Or(..) => {
                let and = matches!(l.as_ref(), LogicalExpression::And(..));
                let mut parts = Vec::new();
                flat(e, and, &mut parts);
                let parts: Vec<String> = parts.into_iter().map(canon_kong).collect();
                format!("{}({})", if and { "&&" } else { "||" }, parts.join(", "))
            }
        },
        Expression::Predicate(p) => {
            let mut lhs = p.lhs.var_name.clone();
            for t in &p.lhs.transformations {
                let name = match t {
                    LhsTransformations::Lower => "lower",
                    LhsTransformations::Any => "any",
                };
                lhs = format!("{name}({lhs})");
            }
            let op = match p.op {
                BinaryOperator::Equals => "==",
                BinaryOperator::NotEquals => "!=",
                BinaryOperator::Regex => "~",
                BinaryOperator::Prefix => "^=",
                BinaryOperator::Postfix => "=^",
                BinaryOperator::Greater => ">",
                BinaryOperator::GreaterOrEqual => ">=",
                BinaryOperator::Less => "<",
                BinaryOperator::LessOrEqual => "<=",
                BinaryOperator::In => "in",
                BinaryOperator::NotIn => "not in",
                BinaryOperator::Contains => "contains",
            };
            let rhs = match &p.rhs {
                kong::ast::Value::String(s) => format!("s{s:?}"),
                kong::ast::Value::Regex(r) => format!("s{:?}", r.as_str()),
                kong::ast::Value::Int(i) => format!("i{i}"),
                kong::ast::Value::IpAddr(a) => format!("a{a}"),
                kong::ast::Value::IpCidr(c) => format!("c{c}"),
            };
            format!("{lhs} {op} {rhs}")
        }
    }
}

/// Parses `ours` with our parser and `kong` with Kong's: when both read a tree, it must be
/// the same. Returns whether both did. (Acceptance itself is compared by [`check`], after
/// validation: Kong's parser also compiles regexes, ours leaves that to validation.)
pub fn same_tree(ours: &str, kong: &str) -> bool {
    let (Ok(a), Ok(b)) = (atc_router::parse(ours), kong::parser::parse(kong)) else {
        return false;
    };
    assert_eq!(
        canon_ours(&a),
        canon_kong(&b),
        "the libraries read {ours:?} differently"
    );
    true
}
