//! The linter never raises a false alarm, and keeps up with changes, on gateway-shaped tables
//! (`atc_testkit::tables`):
//! - a route reported as never winning is matched by every route named with it on every request
//!   it matches (requests built for it and random ones), and so never wins;
//! - routes reported as overlapping have equal priority, and a group names at most
//!   `max_named + 1` routes, counting the others;
//! - routes reported as duplicates match the same requests;
//! - after every add, remove and change, `Linter::update` gives the findings `Linter::new`
//!   gives for the new table (all of them: kinds, routes, counts, messages, places), with a
//!   small `max_named` so that groups are cut and counted too.
//!
//! `PROPTEST_CASES=N` raises the number of cases.

use std::collections::HashMap;
use std::sync::Arc;

use atc_router::{Context, FindingKind, LintOptions, Linter, Router, Schema, Uuid, Value};
use atc_testkit::tables::{self, Op, RouteShape, Table};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn id(i: usize) -> Uuid {
    Uuid::from_u128((i as u128 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

fn context(schema: &Arc<Schema>, values: &[(String, Value)]) -> Context {
    let mut ctx = Context::new(schema.clone());
    for (f, v) in values {
        ctx.add_value(f, v.clone())
            .expect("generated values fit the schema");
    }
    ctx
}

fn findings(lint: &Linter) -> Vec<String> {
    lint.findings().map(|f| format!("{f:?}")).collect()
}

/// Groups cut after two other routes, so that the counts of the rest are compared too.
const FEW: LintOptions = LintOptions {
    max_per_kind: 1000,
    max_named: 2,
};

/// Requests for every route of the table (several picks each) and random ones.
fn requests(table: &Table, random: &[[u64; 6]]) -> Vec<Vec<(String, Value)>> {
    let mut out: Vec<Vec<(String, Value)>> = Vec::new();
    for i in 0..table.routes.len() {
        for pick in 0..4 {
            out.push(table.request_for(i, pick * 7919));
        }
    }
    out.extend(random.iter().map(tables::random_request));
    out
}

proptest! {
    #![proptest_config(Config { cases: cases(64), ..Config::default() })]

    #[test]
    fn findings_are_never_false_alarms(
        table in tables::table_strategy(1..120),
        random in prop::collection::vec(any::<[u64; 6]>(), 16..64),
    ) {
        let schema = tables::schema();
        let mut router = Router::new(schema.clone());
        for (i, r) in table.routes.iter().enumerate() {
            router.add(id(i), r.priority, &r.render()).unwrap();
        }
        let lint = router.lint();
        let priority: HashMap<Uuid, u64> = router.routes().map(|r| (r.id(), r.priority())).collect();
        let reqs = requests(&table, &random);
        for values in &reqs {
            let mut ctx = context(&schema, values);
            let all: Vec<Uuid> = router.matches(&mut ctx).unwrap().into_iter().map(|m| m.id).collect();
            router.execute(&mut ctx);
            let winner = ctx.result().map(|m| m.id());
            for f in &lint {
                prop_assert!(f.routes.len() <= LintOptions::DEFAULT_MAX_NAMED + 1, "{}", f);
                match f.kind {
                    FindingKind::NeverWins => {
                        let never = f.routes[0];
                        prop_assert!(f.routes.len() >= 2, "{}", f);
                        prop_assert_ne!(winner, Some(never), "{}", f);
                        if all.contains(&never) {
                            for before in &f.routes[1..] {
                                prop_assert!(all.contains(before), "{} on {:?}", f, values);
                            }
                        }
                    }
                    FindingKind::EqualPriorityOverlap => {
                        prop_assert!(f.routes.len() >= 2, "{}", f);
                        for r in &f.routes[1..] {
                            prop_assert_eq!(priority[&f.routes[0]], priority[r]);
                        }
                    }
                    FindingKind::DuplicateExpression => {
                        let first = all.contains(&f.routes[0]);
                        for r in &f.routes[1..] {
                            prop_assert_eq!(all.contains(r), first, "{}", f);
                        }
                    }
                    FindingKind::UnanchoredPathRegex => {}
                }
            }
        }
    }

    #[test]
    fn updates_give_the_findings_of_a_fresh_lint(
        initial in tables::table_strategy(0..80),
        ops in tables::ops_strategy(1..40),
    ) {
        let schema = tables::schema();
        let mut router = Router::new(schema.clone());
        let mut model: Vec<(Uuid, RouteShape)> = Vec::new();
        let mut next = 0;
        for r in initial.routes {
            router.add(id(next), r.priority, &r.render()).unwrap();
            model.push((id(next), r));
            next += 1;
        }
        let mut lint = Linter::with_options(&router, FEW);
        for op in ops {
            let changed = match op {
                Op::Add(r) => {
                    router.add(id(next), r.priority, &r.render()).unwrap();
                    model.push((id(next), r));
                    next += 1;
                    vec![id(next - 1)]
                }
                Op::Remove(i) if !model.is_empty() => {
                    let (uuid, _) = model.remove(i % model.len());
                    router.remove(uuid);
                    vec![uuid]
                }
                Op::Change(i, r) if !model.is_empty() => {
                    let at = i % model.len();
                    let uuid = model[at].0;
                    router.remove(uuid);
                    router.add(uuid, r.priority, &r.render()).unwrap();
                    model[at].1 = r;
                    vec![uuid]
                }
                _ => continue,
            };
            lint.update(&router, &changed);
            prop_assert_eq!(findings(&lint), findings(&Linter::with_options(&router, FEW)));
        }
    }
}

/// The generator makes tables where the linter finds something: shadowed routes and overlaps
/// occur, so the property above is not vacuous.
#[test]
fn generated_tables_have_findings() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let schema = tables::schema();
    let mut kinds = std::collections::BTreeSet::new();
    for _ in 0..16 {
        let table = tables::table_strategy(150..151)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let mut router = Router::new(schema.clone());
        for (i, r) in table.routes.iter().enumerate() {
            router.add(id(i), r.priority, &r.render()).unwrap();
        }
        kinds.extend(router.lint().into_iter().map(|f| f.kind));
    }
    assert!(kinds.contains(&FindingKind::NeverWins), "{kinds:?}");
    assert!(
        kinds.contains(&FindingKind::EqualPriorityOverlap),
        "{kinds:?}"
    );
}
