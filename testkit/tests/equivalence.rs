//! The indexed matcher returns exactly what the reference evaluator returns: the same route,
//! matched values and captures, for random schemas, route tables and requests over the whole
//! language (`atc_testkit::gen`), and after random adds, removes and syncs.
//!
//! Every case runs through `atc_testkit::check::run`, the harness the `matcher` fuzz target
//! uses too: after the routes are added and after every change, the router holds what a model
//! says and `Router::execute` answers every request as `Router::execute_reference` does; a sync
//! leaves a router that answers like one built from scratch; removing every route leaves no
//! field, regex or wildcard name behind (see its docs for every check).
//!
//! `PROPTEST_CASES=N` raises the number of cases for a longer run.

use std::sync::Arc;

use atc_router::{parse, Expr, RouteSpec, Router, Schema, SyncMode, Type, Uuid, Value};
use atc_testkit::check::{self, Stats};
use atc_testkit::gen::{self, Rendered, RenderedRequest, RenderedRoute, Step};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(Config { cases: cases(128), ..Config::default() })]

    /// Tables added route by route, and requests built to reach their routes.
    #[test]
    fn indexed_matching_equals_the_reference(case in gen::case_strategy(10..120, 1..40)) {
        check::run(&case.render());
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(128), ..Config::default() })]

    /// Adds (at free ids and held ones), removes, syncs, stale sync plans and foreign
    /// contexts, checked after every one.
    #[test]
    fn indexed_matching_equals_the_reference_through_changes(
        case in gen::churn_strategy(10..60, 1..12, 1..40),
    ) {
        check::run(&case.render());
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(64), ..Config::default() })]

    /// Syncing to a list of routes kept, dropped, re-prioritised, moved to other ids or given
    /// other texts gives the router that building that list from scratch gives, whether the
    /// sync rebuilds or changes routes in place.
    #[test]
    fn sync_equals_building_from_scratch(
        case in gen::case_strategy(10..80, 1..24),
        syncs in prop::collection::vec(gen::sync_strategy(), 1..4),
    ) {
        check::run(&gen::Case { steps: syncs, ..case }.render());
    }

    /// The same, with every sync built in the background and swapped in (later syncs start
    /// from the builder's copy of the table, refreshed from the router each swap hands back).
    #[test]
    fn background_syncs_equal_building_from_scratch(
        case in gen::case_strategy(10..80, 1..24),
        syncs in prop::collection::vec(gen::sync_strategy(), 1..6),
    ) {
        check::run_in_background(&gen::Case { steps: syncs, ..case }.render());
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(4), ..Config::default() })]

    #[test]
    fn indexed_matching_equals_the_reference_on_large_tables(
        case in gen::case_strategy(300..500, 1..40),
    ) {
        check::run(&case.render());
    }
}

/// Guards the power of the tests above: if the generator stopped producing indexed routes
/// that decide results, or syncs that apply, equality would hold trivially.
#[test]
fn generated_tables_are_decided_by_indexed_routes() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut total = Stats::default();
    for _ in 0..24 {
        let case = gen::churn_strategy(10..120, 1..40, 0..8)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let s = check::run(&case.render());
        total.loaded += s.loaded;
        total.indexed += s.indexed;
        total.requests += s.requests;
        total.matched += s.matched;
        total.indexed_wins += s.indexed_wins;
        total.synced += s.synced;
    }
    println!("{total:#?}");
    assert!(
        total.indexed * 10 >= total.loaded * 6,
        "indexed {} of {} routes",
        total.indexed,
        total.loaded
    );
    assert!(
        total.matched * 10 >= total.requests * 4,
        "{} of {} requests matched",
        total.matched,
        total.requests
    );
    assert!(
        total.indexed_wins * 10 >= total.requests * 2,
        "indexed routes won {} of {} requests",
        total.indexed_wins,
        total.requests
    );
    assert!(total.synced >= 5, "{} syncs applied", total.synced);
}

/// The tables of `equivalence_regressions.txt` (see its header), with their churn as steps:
/// checked after every add and remove.
#[test]
fn recorded_tables_are_matched_alike() {
    let cases = recorded(include_str!("equivalence_regressions.txt"));
    assert_eq!(cases.len(), 4);
    for (name, case) in cases {
        let stats = check::run(&case);
        assert!(stats.matched > 0, "{name}: nothing matched");
    }
}

/// Reads the format described in `equivalence_regressions.txt`.
fn recorded(text: &str) -> Vec<(String, Rendered)> {
    let mut out: Vec<(String, Rendered)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("case ") {
            let case = Rendered {
                schema: Vec::new(),
                routes: Vec::new(),
                requests: Vec::new(),
                steps: Vec::new(),
                slots: Vec::new(),
                limits: Default::default(),
            };
            out.push((name.to_owned(), case));
            continue;
        }
        let case = &mut out.last_mut().expect("a case first").1;
        if let Some(value) = line.strip_prefix("  ") {
            let (field, literal) = value.split_once(' ').expect("field and literal");
            let request = case.requests.last_mut().expect("a request first");
            request
                .values
                .push((field.to_owned(), literal_value(literal)));
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "field" => {
                let (name, ty) = rest.split_once(' ').expect("name and type");
                let ty = match ty {
                    "String" => Type::String,
                    "Int" => Type::Int,
                    "IpAddr" => Type::IpAddr,
                    _ => Type::IpCidr,
                };
                case.schema.push((name.to_owned(), ty));
            }
            "route" => {
                let (priority, id, text) = route_line(rest);
                case.slots.push(id);
                case.routes.push(RenderedRoute {
                    id,
                    priority,
                    text: text.to_owned(),
                    kong_text: None,
                });
            }
            "request" => case.requests.push(RenderedRequest::default()),
            "add" => {
                let (priority, id, text) = route_line(rest);
                let route = case
                    .routes
                    .iter()
                    .position(|r| r.text == text)
                    .expect("churn re-adds a route of the table");
                case.slots.push(id);
                case.steps.push(Step::Add {
                    slot: case.slots.len() - 1,
                    route,
                    priority,
                });
            }
            "remove" => {
                let id: Uuid = rest.parse().expect("an id");
                let slot = case
                    .slots
                    .iter()
                    .position(|s| *s == id)
                    .expect("a known id");
                case.steps.push(Step::Remove { slot });
            }
            _ => panic!("unknown line {line:?}"),
        }
    }
    out
}

fn route_line(rest: &str) -> (u64, Uuid, &str) {
    let (priority, rest) = rest.split_once(' ').expect("priority");
    let (id, text) = rest.split_once(' ').expect("id and text");
    (
        priority.parse().expect("a priority"),
        id.parse().expect("an id"),
        text,
    )
}

/// A value written as a literal of the language.
fn literal_value(literal: &str) -> Value {
    match parse(&format!("x == {literal}")) {
        Ok(Expr::Predicate(p)) if !p.rhs.is_set() => p.rhs.values()[0].clone(),
        other => panic!("{literal:?} is not a literal: {other:?}"),
    }
}

/// A sync plan holds the regexes of the routes it was prepared from; once it is refused as
/// stale, or dropped, the routes removed meanwhile leave no regex behind.
#[test]
fn a_plan_left_unapplied_leaves_no_regex_behind() {
    let mut schema = Schema::new();
    schema.add_field("f", Type::String).unwrap();
    let mut router = Router::new(Arc::new(schema));
    let id = Uuid::from_u128(1);
    router.add(id, 0, r#"f ~ "x""#).unwrap();
    let again = [RouteSpec {
        id,
        priority: 1,
        expression: r#"f ~ "x""#,
    }];
    let plan = router.prepare_sync(&again, SyncMode::ApplyValid).unwrap();
    assert!(router.remove(id));
    assert!(router.apply(plan).stale);
    assert_eq!(router.regex_count(), 0, "after a stale plan");

    router.add(id, 0, r#"f ~ "y""#).unwrap();
    let again = [RouteSpec {
        id,
        priority: 1,
        expression: r#"f ~ "y""#,
    }];
    let plan = router.prepare_sync(&again, SyncMode::ApplyValid).unwrap();
    assert!(router.remove(id));
    drop(plan);
    assert_eq!(router.regex_count(), 0, "after a dropped plan");
}
