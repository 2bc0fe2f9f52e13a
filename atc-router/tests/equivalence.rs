//! The indexed matcher returns exactly what the reference evaluator returns: same route, same
//! matched values, same captures, for random schemas, route tables and requests, and after
//! random sequences of adds and removes.

use std::net::IpAddr;
use std::sync::Arc;

use atc_router::{
    Context, Expr, IpCidr, Lhs, Op, Predicate, RouteSpec, Router, Schema, SyncMode, Transform,
    Type, Uuid, Value,
};
use proptest::prelude::*;

const STRINGS: &[&str] = &[
    "",
    "a",
    "ab",
    "abc",
    "b",
    "ba",
    "A",
    "Ab",
    "/",
    "/a",
    "/a/",
    "/a/b",
    "/a/12",
    "/b/7/x",
    "x.example.com",
    ".example.com",
    "example.com",
    "é",
    "É",
    "Σa",
    "aΣ",
    "GET",
    "get",
];
/// Regexes, each with a text it matches (for requests built to hit a route).
const REGEXES: &[(&str, &str)] = &[
    ("^a", "a1"),
    ("^ab", "abz"),
    ("b$", "zb"),
    ("a|b", "xbx"),
    ("^(?<x>a)(b)?", "ab"),
    (r"^/a/(\d+)", "/a/12/x"),
    (r"^/(?<seg>[a-z])/(?<n>\d+)?", "/b/7"),
    ("(?i)^a", "Ax"),
    ("^$", ""),
    ("", "q"),
    ("^(a|ab)c?", "abc"),
    (r"^\w+", "é1"),
    ("^[ab]", "b"),
    ("A", "xAx"),
    (r"\.example\.com$", "x.example.com"),
    ("^/a$", "/a"),
    ("(?m)^b", "a\nb"),
    (r"\Ax", "xy"),
    ("^é", "éa"),
    (r"^/u/(?<id>\d+)$", "/u/42"),
];
const INTS: &[i64] = &[-1, 0, 1, 2, 100];
const IPS: &[&str] = &[
    "10.0.0.1",
    "10.1.0.1",
    "::1",
    "2001:db8::1",
    "::ffff:10.0.0.1",
];
const CIDRS: &[&str] = &[
    "10.0.0.0/8",
    "10.0.0.0/31",
    "::/0",
    "2001:db8::/32",
    "0.0.0.0/0",
];

const FIELDS: usize = 5;
/// Field names: f0..f4 with generated types, and h.x / h.y through the `h.*` String wildcard.
fn field_name(i: usize) -> String {
    match i {
        i if i < FIELDS => format!("f{i}"),
        FIELDS => "h.x".into(),
        _ => "h.y".into(),
    }
}

fn field_type(types: &[Type], i: usize) -> Type {
    types.get(i).copied().unwrap_or(Type::String)
}

fn schema(types: &[Type]) -> Arc<Schema> {
    let mut s = Schema::new();
    for (i, t) in types.iter().enumerate() {
        s.add_field(&field_name(i), *t).unwrap();
    }
    s.add_field("h.*", Type::String).unwrap();
    Arc::new(s)
}

fn value_of(ty: Type, pick: usize) -> Value {
    match ty {
        Type::String => Value::String(STRINGS[pick % STRINGS.len()].into()),
        Type::Int => Value::Int(INTS[pick % INTS.len()]),
        Type::IpAddr => Value::IpAddr(IPS[pick % IPS.len()].parse::<IpAddr>().unwrap()),
        Type::IpCidr => Value::IpCidr(CIDRS[pick % CIDRS.len()].parse::<IpCidr>().unwrap()),
    }
}

/// A well-typed predicate on field `f`; `pick`s choose operator, literal and transforms.
fn predicate(
    types: &[Type],
    f: usize,
    op_pick: usize,
    lit_pick: usize,
    tf: (usize, bool, bool),
) -> Expr {
    let ty = field_type(types, f);
    let ops: &[Op] = match ty {
        // Repeats weight the operators gateways index on.
        Type::String => &[
            Op::Equals,
            Op::Equals,
            Op::Regex,
            Op::Regex,
            Op::Prefix,
            Op::Prefix,
            Op::Postfix,
            Op::Postfix,
            Op::NotEquals,
            Op::Contains,
        ],
        Type::Int => &[
            Op::Equals,
            Op::NotEquals,
            Op::Greater,
            Op::GreaterOrEqual,
            Op::Less,
            Op::LessOrEqual,
        ],
        Type::IpAddr => &[Op::Equals, Op::NotEquals, Op::In, Op::NotIn],
        Type::IpCidr => &[Op::Equals, Op::NotEquals],
    };
    let op = ops[op_pick % ops.len()];
    let (n, lower, any) = tf;
    let lower = lower && ty == Type::String;
    let mut transforms = Vec::new();
    for i in 0..n % 3 {
        // Keep the flags as chosen but vary nesting order and repeats.
        transforms.push(if (i + n) % 2 == 0 {
            Transform::Any
        } else {
            Transform::Lower
        });
    }
    transforms.retain(|t| (*t == Transform::Any && any) || (*t == Transform::Lower && lower));
    if lower && !transforms.contains(&Transform::Lower) {
        transforms.push(Transform::Lower);
    }
    if any && !transforms.contains(&Transform::Any) {
        transforms.insert(0, Transform::Any);
    }
    let rhs = match (ty, op) {
        (Type::String, Op::Regex) => Value::String(REGEXES[lit_pick % REGEXES.len()].0.into()),
        (Type::String, _) => {
            let s = STRINGS[lit_pick % STRINGS.len()];
            // A lowered field never equals an uppercase literal; validation rejects that.
            Value::String(if lower {
                s.to_lowercase()
            } else {
                s.to_owned()
            })
        }
        (Type::IpAddr, Op::In | Op::NotIn) => value_of(Type::IpCidr, lit_pick),
        (t, _) => value_of(t, lit_pick),
    };
    Expr::Predicate(Predicate {
        lhs: Lhs {
            field: field_name(f),
            transforms,
        },
        op,
        rhs,
    })
}

fn leaf_strategy(types: Vec<Type>) -> impl Strategy<Value = Expr> + Clone {
    (
        0..FIELDS + 2,
        any::<usize>(),
        any::<usize>(),
        (0usize..3, any::<bool>(), any::<bool>()),
    )
        .prop_map(move |(f, o, l, tf)| predicate(&types, f, o, l, tf))
}

/// A predicate with an operator that indexes can use (`==`, `~`, `^=`, `=^`: the first
/// String operators in `predicate`'s table, `==` for other types).
fn indexable_leaf_strategy(types: Vec<Type>) -> impl Strategy<Value = Expr> + Clone {
    (
        0..FIELDS + 2,
        0usize..8,
        any::<usize>(),
        (0usize..3, any::<bool>(), any::<bool>()),
    )
        .prop_map(move |(f, o, l, tf)| {
            let o = if field_type(&types, f) == Type::String {
                o
            } else {
                0
            };
            predicate(&types, f, o, l, tf)
        })
}

/// Mostly gateway-shaped routes (a conjunction of a few predicates, sometimes with an `||`
/// group), and some arbitrary trees with `!`, nesting and every operator.
fn expr_strategy(types: Vec<Type>) -> impl Strategy<Value = (bool, Expr)> {
    let first = indexable_leaf_strategy(types.clone());
    let leaf = leaf_strategy(types);
    let random = leaf.clone().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(Expr::And),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Expr::Or),
            inner.prop_map(|e| Expr::Not(Box::new(e))),
        ]
    });
    let or_group = prop::collection::vec(leaf.clone(), 2..4).prop_map(Expr::Or);
    let conjunction = (
        first,
        prop::collection::vec(leaf.clone(), 0..3),
        prop::option::weighted(0.3, or_group),
    )
        .prop_map(|(first, rest, group)| {
            let mut parts = vec![first];
            parts.extend(rest);
            parts.extend(group);
            (
                true,
                if parts.len() == 1 {
                    parts.pop().unwrap()
                } else {
                    Expr::And(parts)
                },
            )
        });
    prop_oneof![3 => conjunction, 1 => random.prop_map(|e| (false, e))]
}

/// Values that make the positive predicates of `e` true (one side of each `||`, chosen by
/// `branch`; nothing under `!`), so that requests reach specific routes deep in the table.
fn satisfy(e: &Expr, branch: usize, out: &mut Vec<(String, Value)>) {
    match e {
        Expr::And(c) => c.iter().for_each(|c| satisfy(c, branch, out)),
        Expr::Or(c) => satisfy(&c[branch % c.len()], branch / c.len(), out),
        Expr::Not(_) => {}
        Expr::Predicate(p) => {
            let v = match (&p.rhs, p.op) {
                (Value::String(l), Op::Equals) if p.lhs.lower() => Value::String(l.to_uppercase()),
                (Value::String(l), Op::Equals) => Value::String(l.clone()),
                (Value::String(l), Op::Prefix) => Value::String(format!("{l}/12")),
                (Value::String(l), Op::Postfix) => Value::String(format!("w.{l}")),
                (Value::String(l), Op::Contains) => Value::String(format!("x{l}y")),
                (Value::String(l), Op::NotEquals) => Value::String(format!("{l}z")),
                (Value::String(l), Op::Regex) => {
                    Value::String(REGEXES.iter().find(|(r, _)| r == l).unwrap().1.into())
                }
                (Value::Int(i), Op::Equals | Op::GreaterOrEqual | Op::LessOrEqual) => {
                    Value::Int(*i)
                }
                (Value::Int(i), Op::Greater | Op::NotEquals) => Value::Int(i + 1),
                (Value::Int(i), Op::Less) => Value::Int(i - 1),
                (Value::IpCidr(c), Op::In) => Value::IpAddr(c.first_address()),
                (Value::IpCidr(_), Op::NotIn) => value_of(Type::IpAddr, out.len()),
                (v, _) => v.clone(),
            };
            out.push((p.lhs.field.clone(), v));
        }
    }
}

/// A request: the route it is built to reach (if any) with the `||` branches to take, and
/// extra random values.
type Request = (Option<(prop::sample::Index, usize)>, Vec<(usize, usize)>);

fn request_strategy() -> impl Strategy<Value = Request> {
    (
        prop::option::weighted(0.7, (any::<prop::sample::Index>(), any::<usize>())),
        prop::collection::vec((0..FIELDS + 2, any::<usize>()), 0..4),
    )
}

#[derive(Debug, Clone)]
struct Table {
    types: Vec<Type>,
    routes: Vec<(u64, u128, Expr)>,
    requests: Vec<Request>,
}

fn table_strategy(routes: std::ops::Range<usize>) -> impl Strategy<Value = Table> {
    prop::collection::vec(
        prop_oneof![
            Just(Type::String),
            Just(Type::String),
            Just(Type::Int),
            Just(Type::IpAddr),
            Just(Type::IpCidr)
        ],
        FIELDS,
    )
    .prop_flat_map(move |types| {
        // Broad trees (often true for many requests) sit lower, but still tie and interleave
        // with the gateway-shaped routes.
        let route = (0u64..8, any::<u128>(), expr_strategy(types.clone()))
            .prop_map(|(p, id, (shaped, e))| (if shaped { p } else { p / 2 }, id, e));
        (
            Just(types),
            prop::collection::vec(route, routes.clone()),
            prop::collection::vec(request_strategy(), 1..40),
        )
    })
    .prop_map(|(types, routes, requests)| Table {
        types,
        routes,
        requests,
    })
}

fn build(t: &Table) -> (Arc<Schema>, Router) {
    let schema = schema(&t.types);
    let mut router = Router::new(schema.clone());
    for (p, id, e) in &t.routes {
        let text = e.to_string();
        match router.add(Uuid::from_u128(*id), *p, &text) {
            Ok(()) | Err(atc_router::Error::DuplicateRoute(_)) => {}
            Err(err) => panic!("generated route rejected: {text}\n{err}"),
        }
    }
    (schema, router)
}

/// Everything a result says, in a comparable form: id, priority, matched values, captures.
type Outcome = (Uuid, u64, Vec<(String, String)>, Vec<(String, String)>);

fn outcome(ctx: &Context, names: &[String]) -> Option<Outcome> {
    ctx.result().map(|m| {
        let matched = names
            .iter()
            .filter_map(|n| m.matched_value(n).map(|v| (n.clone(), format!("{v:?}"))))
            .collect();
        let captures = m
            .captures()
            .map(|(k, v)| (k.to_string(), v.to_owned()))
            .collect();
        (m.id(), m.priority(), matched, captures)
    })
}

fn fill(ctx: &mut Context, t: &Table, (target, noise): &Request) {
    ctx.reset();
    let mut values = Vec::new();
    if let (Some((i, branch)), false) = (target, t.routes.is_empty()) {
        satisfy(&t.routes[i.index(t.routes.len())].2, *branch, &mut values);
    }
    for (f, pick) in noise {
        values.push((field_name(*f), value_of(field_type(&t.types, *f), *pick)));
    }
    for (f, v) in values {
        ctx.add_value(&f, v).unwrap();
    }
}

fn check_requests(schema: &Arc<Schema>, router: &Router, t: &Table) -> Result<(), TestCaseError> {
    let names: Vec<String> = (0..FIELDS + 2).map(field_name).collect();
    let mut ctx = Context::new(schema.clone());
    for req in &t.requests {
        fill(&mut ctx, t, req);
        let fast = router.execute(&mut ctx);
        let fast_out = outcome(&ctx, &names);
        let slow = router.execute_reference(&mut ctx);
        let slow_out = outcome(&ctx, &names);
        prop_assert_eq!(fast, slow, "request {:?}", req);
        prop_assert_eq!(fast_out, slow_out, "request {:?}", req);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn indexed_matching_equals_the_reference(t in table_strategy(10..120)) {
        let (schema, router) = build(&t);
        check_requests(&schema, &router, &t)?;
    }

    #[test]
    fn indexed_matching_equals_the_reference_after_adds_and_removes(
        t in table_strategy(10..80),
        churn in prop::collection::vec((any::<bool>(), any::<prop::sample::Index>()), 1..60),
    ) {
        let (schema, mut router) = build(&t);
        let mut ids: Vec<Uuid> = router.routes().map(|r| r.id()).collect();
        for (i, (add, which)) in churn.iter().enumerate() {
            if *add || ids.is_empty() {
                // Re-add a route of the table under a fresh id (and maybe another priority).
                let (p, _, e) = &t.routes[which.index(t.routes.len())];
                let id = Uuid::from_u128(u128::MAX - i as u128);
                router.add(id, p ^ (i as u64 & 1), &e.to_string()).unwrap();
                ids.push(id);
            } else {
                let id = ids.swap_remove(which.index(ids.len()));
                prop_assert!(router.remove(id));
            }
            if i % 7 == 0 {
                check_requests(&schema, &router, &t)?;
            }
        }
        check_requests(&schema, &router, &t)?;
        for id in ids {
            prop_assert!(router.remove(id));
        }
        prop_assert_eq!(router.regex_count(), 0);
        prop_assert!(router.fields().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Syncing from table A to table B (some routes kept, some changed, some dropped, some new)
    /// gives the router that building B from scratch gives.
    #[test]
    fn sync_equals_building_from_scratch(
        t in table_strategy(10..80),
        keep in prop::collection::vec(0u8..4, 80),
    ) {
        let (schema, mut router) = build(&t);
        let mut b = t.clone();
        b.routes = t
            .routes
            .iter()
            .zip(&keep)
            .filter_map(|((p, id, e), k)| match k {
                0 => None,                                        // dropped
                1 => Some((*p + 1, *id, e.clone())),              // priority changed
                2 => Some((*p, id ^ 1, e.clone())),               // replaced by a new id
                _ => Some((*p, *id, e.clone())),                  // kept
            })
            .collect();
        // Ids repeated by the generator would make the list invalid; keep the first.
        let mut seen = std::collections::HashSet::new();
        b.routes.retain(|r| seen.insert(r.1));
        let texts: Vec<String> = b.routes.iter().map(|r| r.2.to_string()).collect();
        let specs: Vec<RouteSpec<'_>> = b
            .routes
            .iter()
            .zip(&texts)
            .map(|((p, id, _), e)| RouteSpec { id: Uuid::from_u128(*id), priority: *p, expression: e })
            .collect();
        router.sync(&specs, SyncMode::AllOrNothing).unwrap();
        let (fresh_schema, fresh) = build(&b);
        let listing = |r: &Router| -> Vec<(Uuid, u64, String)> {
            r.routes().map(|r| (r.id(), r.priority(), r.source().to_owned())).collect()
        };
        prop_assert_eq!(listing(&router), listing(&fresh));
        prop_assert_eq!(router.fields(), fresh.fields());
        prop_assert_eq!(router.regex_count(), fresh.regex_count());
        check_requests(&schema, &router, &b)?;
        let names: Vec<String> = (0..FIELDS + 2).map(field_name).collect();
        let (mut c1, mut c2) = (Context::new(schema.clone()), Context::new(fresh_schema));
        for req in &b.requests {
            fill(&mut c1, &b, req);
            fill(&mut c2, &b, req);
            router.execute(&mut c1);
            fresh.execute(&mut c2);
            prop_assert_eq!(outcome(&c1, &names), outcome(&c2, &names));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn indexed_matching_equals_the_reference_on_large_tables(t in table_strategy(300..500)) {
        let (schema, router) = build(&t);
        check_requests(&schema, &router, &t)?;
    }
}

/// Guards the power of the tests above: if the generator stopped producing indexed routes
/// that decide results, equality would hold trivially.
#[test]
fn generated_tables_are_decided_by_indexed_routes() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut requests, mut indexed_wins, mut indexed, mut routes) = (0, 0, 0, 0);
    for _ in 0..30 {
        let t = table_strategy(10..120)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let (schema, router) = build(&t);
        routes += router.len();
        indexed += router.len() - router.unindexed_count();
        let mut ctx = Context::new(schema.clone());
        for req in &t.requests {
            fill(&mut ctx, &t, req);
            requests += 1;
            if router.execute(&mut ctx) {
                let id = ctx.result().unwrap().id();
                indexed_wins += usize::from(router.get(id).unwrap().is_indexed());
            }
        }
    }
    assert!(
        indexed * 10 >= routes * 4,
        "indexed {indexed} of {routes} routes"
    );
    assert!(
        indexed_wins * 10 >= requests * 2,
        "indexed routes won {indexed_wins} of {requests}"
    );
}
