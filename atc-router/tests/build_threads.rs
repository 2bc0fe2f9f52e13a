//! A fresh build on several threads (`Router::set_build_threads`, `Builder::build_threads`)
//! makes exactly the table one thread makes: the same routes, the same errors in the same order
//! (invalid routes, repeated ids, regex limits, wildcard names past their limit), the same index
//! (compared through the table image, which writes every split, key and leaf), and so the same
//! answer to every request. The work is cut into pieces of a few entries and subtrees of a few
//! routes here, so that small tables go through every path the threads take.

use std::sync::{Arc, Mutex};

use atc_router::request::http_schema_with;
use atc_router::{
    Builder, Context, Lane, Limits, Outcome, RouteInput, RouteSpec, Router, Schema, SyncMode, Uuid,
};
use atc_workload::{requests, Family, Mix, Table};
use proptest::prelude::*;

mod common;
use common::workload_value as value;

/// A schema of the workload's fields with `limits`; every build gets its own, so that the
/// wildcard names each registers start from the same state.
fn schema(limits: Limits) -> Arc<Schema> {
    Arc::new(http_schema_with(limits))
}

/// What a build made: its report or refusal (every error, in order), its routes in routing
/// order, and the table image (every index decision), or `None` where there is no table.
type Built = (String, Vec<(Uuid, u64, String)>, Option<Vec<u8>>);

fn build(
    specs: &[RouteSpec<'_>],
    limits: Limits,
    mode: SyncMode,
    threads: usize,
    split: (usize, usize),
) -> (Built, Router) {
    let mut r = Router::new(schema(limits));
    r.set_build_threads(threads).unwrap();
    r.set_build_split(split.0, split.1);
    let outcome = match r.sync(specs, mode) {
        Ok(report) => format!(
            "{} {} {} {} {:?}",
            report.added, report.removed, report.changed, report.unchanged, report.errors
        ),
        Err(e) => format!("{e} {:?}", e.errors),
    };
    let routes = r
        .routes()
        .map(|x| (x.id(), x.priority(), x.source().to_owned()))
        .collect();
    let image = r.to_image().ok();
    ((outcome, routes, image), r)
}

/// The answers of `a` and `b` to the requests of every mix: the same, and the reference
/// evaluator's.
fn same_answers(table: &Table, a: &Router, b: &Router, per_mix: usize) {
    let mut ca = Context::new(a.schema().clone());
    let mut cb = Context::new(b.schema().clone());
    let answer = |ctx: &Context| {
        ctx.result().map(|m| {
            (
                m.id(),
                m.matched_value("http.path").map(|v| v.to_string()),
                m.captures_map(),
            )
        })
    };
    for mix in Mix::all() {
        for req in requests(table, mix, per_mix, 5) {
            ca.reset();
            cb.reset();
            for (f, v) in &req.fields {
                ca.add_value(f, value(v)).unwrap();
                cb.add_value(f, value(v)).unwrap();
            }
            a.execute(&mut ca);
            b.execute(&mut cb);
            let (got_a, got_b) = (answer(&ca), answer(&cb));
            assert_eq!(got_a, got_b, "{mix:?} {req:?}");
            b.execute_reference(&mut cb);
            assert_eq!(got_a, answer(&cb), "{mix:?} {req:?} against the reference");
        }
    }
}

/// `table`'s routes, with `bad` entries mixed in: invalid expressions, repeated ids, regexes
/// over the limits, new wildcard names (past `max_wildcard_fields` when it is low), and routes
/// that register a name and then fail (the name is released again).
fn specs_with_bad(table: &Table, bad: &[(usize, u8)]) -> Vec<(Uuid, u64, String)> {
    let mut out: Vec<(Uuid, u64, String)> = table
        .routes
        .iter()
        .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
        .collect();
    for (n, &(at, kind)) in bad.iter().enumerate() {
        let at = at % (out.len() + 1);
        let fresh = Uuid::from_u128(0xbad0_0000 + n as u128);
        let entry = match kind % 7 {
            0 => (fresh, 1, "http.path ==".to_owned()),
            1 => {
                let repeated = out[at % out.len().max(1)].0;
                (repeated, 2, r#"http.path == "/dup""#.to_owned())
            }
            2 => (fresh, 3, r#"http.path ~ "^/(a{1000}){1000}$""#.to_owned()),
            3 => (fresh, 4, format!(r#"http.headers.x_new_{n} == "v""#)),
            4 => (
                fresh,
                5,
                format!(r#"http.headers.x_gone_{n} == "v" && http.path ~ "(""#),
            ),
            5 => (fresh, 6, r#"http.path ~ "^/(?<n>[0-9]+)/x$""#.to_owned()),
            _ => (fresh, 7, format!(r#"http.queries.q{n} == "1""#)),
        };
        out.insert(at, entry);
    }
    out
}

fn as_specs(v: &[(Uuid, u64, String)]) -> Vec<RouteSpec<'_>> {
    v.iter()
        .map(|(id, priority, e)| RouteSpec {
            id: *id,
            priority: *priority,
            expression: e,
        })
        .collect()
}

/// Limits that refuse some of the bad entries: a small regex budget, few wildcard names.
fn tight() -> Limits {
    Limits {
        regex_size_limit: 200_000,
        max_wildcard_fields: 12,
        ..Limits::default()
    }
}

fn check_same(specs: &[RouteSpec<'_>], limits: Limits, threads: usize, split: (usize, usize)) {
    for mode in [SyncMode::AllOrNothing, SyncMode::ApplyValid] {
        let (one, _) = build(specs, limits, mode, 1, split);
        let (many, _) = build(specs, limits, mode, threads, split);
        assert_eq!(one.0, many.0, "report, {threads} threads, {mode:?}");
        assert_eq!(one.1, many.1, "routes, {threads} threads, {mode:?}");
        assert!(one.2 == many.2, "table image, {threads} threads, {mode:?}");
    }
}

#[test]
fn a_mixed_table_built_on_threads_is_the_table_built_on_one() {
    let table = Table::generate(3_000, 21, true);
    let specs: Vec<(Uuid, u64, String)> = table
        .routes
        .iter()
        .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
        .collect();
    let specs = as_specs(&specs);
    for (threads, split) in [(2, (7, 50)), (3, (1, 1)), (4, (64, 400)), (2, (256, 4096))] {
        let (one, a) = build(&specs, Limits::default(), SyncMode::AllOrNothing, 1, split);
        let (many, b) = build(
            &specs,
            Limits::default(),
            SyncMode::AllOrNothing,
            threads,
            split,
        );
        assert_eq!(one.0, many.0);
        assert_eq!(one.1, many.1);
        assert!(
            one.2.is_some() && one.2 == many.2,
            "{threads} threads {split:?}"
        );
        same_answers(&table, &a, &b, 60);
    }
}

#[test]
fn errors_come_out_the_same_and_in_the_same_order() {
    let table = Table::family(Family::TenantHeader, 400, 3);
    let bad: Vec<(usize, u8)> = (0..60).map(|i| (i * 37 + 5, (i % 7) as u8)).collect();
    let specs = specs_with_bad(&table, &bad);
    let specs = as_specs(&specs);
    for limits in [Limits::default(), tight()] {
        for (threads, split) in [(2, (3, 8)), (5, (1, 1)), (2, (50, 100))] {
            check_same(&specs, limits, threads, split);
        }
    }
}

#[test]
fn a_build_changing_a_table_keeps_its_versions_and_errors() {
    // A second sync that rebuilds (most routes changed) copies the routes kept and keeps the
    // current version of a route whose new one is invalid: the same on threads.
    let table = Table::generate(1_500, 4, false);
    let first: Vec<(Uuid, u64, String)> = table
        .routes
        .iter()
        .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
        .collect();
    let mut second = first.clone();
    for (i, s) in second.iter_mut().enumerate() {
        match i % 3 {
            0 => s.1 += 1,
            1 => s.2 = "http.path ==".to_owned(),
            _ => {}
        }
    }
    let run = |threads: usize| {
        let mut r = Router::new(schema(Limits::default()));
        r.set_build_threads(threads).unwrap();
        r.set_build_split(5, 20);
        r.sync(&as_specs(&first), SyncMode::AllOrNothing).unwrap();
        let before: Vec<u64> = r.routes().map(|x| x.instance()).collect();
        let report = r.sync(&as_specs(&second), SyncMode::ApplyValid).unwrap();
        let after: Vec<(Uuid, u64, String, bool)> = r
            .routes()
            .zip(&before)
            .map(|(x, b)| {
                (
                    x.id(),
                    x.priority(),
                    x.source().to_owned(),
                    x.instance() == *b,
                )
            })
            .collect();
        (format!("{:?}", report.errors), after, r.to_image().unwrap())
    };
    let (one, many) = (run(1), run(3));
    assert_eq!(one.0, many.0);
    assert_eq!(one.1, many.1);
    assert!(one.2 == many.2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any family, any size, any bad entries, any split: the table of one thread.
    #[test]
    fn any_table_built_on_threads_is_the_table_built_on_one(
        family in 0usize..12,
        n in 1usize..400,
        seed in 0u64..1000,
        bad in proptest::collection::vec((0usize..1000, 0u8..7), 0..12),
        threads in 2usize..5,
        piece in 1usize..40,
        subtree in 1usize..200,
        tight_limits in any::<bool>(),
    ) {
        let table = Table::family(Family::all()[family], n, seed);
        let specs = specs_with_bad(&table, &bad);
        let specs = as_specs(&specs);
        let limits = if tight_limits { tight() } else { Limits::default() };
        check_same(&specs, limits, threads, (piece, subtree));
        if bad.is_empty() {
            let (_, a) = build(&specs, limits, SyncMode::AllOrNothing, 1, (piece, subtree));
            let (_, b) = build(&specs, limits, SyncMode::AllOrNothing, threads, (piece, subtree));
            same_answers(&table, &a, &b, 10);
        }
    }
}

#[test]
fn the_count_is_checked() {
    let mut r = Router::new(schema(Limits::default()));
    assert!(r.set_build_threads(0).is_err());
    assert!(r
        .set_build_threads(atc_router::MAX_BUILD_THREADS + 1)
        .is_err());
    assert_eq!(r.build_threads(), 1, "a refused count changes nothing");
    let mut b = Builder::new(schema(Limits::default()), Limits::default());
    assert!(b.build_threads(0).is_err());
    assert!(b.build_threads(65).is_err());
    b.build_threads(64).unwrap();
}

/// The threads the start hook ran on, by name, with their lane.
static STARTED: Mutex<Vec<(String, Lane)>> = Mutex::new(Vec::new());

fn record(lane: Lane) {
    let name = std::thread::current().name().unwrap_or("").to_owned();
    STARTED.lock().unwrap().push((name, lane));
}

#[test]
fn a_builder_builds_on_helpers_that_run_its_helper_hook_with_their_lane() {
    let table = Table::generate(4_000, 9, false);
    let specs: Vec<(Uuid, u64, String)> = table
        .routes
        .iter()
        .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
        .collect();
    let specs = as_specs(&specs);
    let mut b = Builder::new(schema(Limits::default()), Limits::default());
    b.on_thread_start(record);
    b.on_helper_start(record);
    b.build_threads(3).unwrap();
    b.submit(1, RouteInput::routes(&specs), SyncMode::AllOrNothing);
    let mut current = Router::new(schema(Limits::default()));
    let started = std::time::Instant::now();
    while !b.is_ready() {
        assert!(started.elapsed().as_secs() < 60);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    match b.apply_to(&mut current) {
        Some(Outcome::Built { version: 1, .. }) => {}
        other => panic!("{other:?}"),
    }
    let started = STARTED.lock().unwrap().clone();
    assert!(started.contains(&("atc-router-builder".to_owned(), Lane::Background)));
    let helpers: Vec<&(String, Lane)> = started
        .iter()
        .filter(|(name, _)| name == "atc-router-help")
        .collect();
    assert!(!helpers.is_empty(), "{started:?}");
    assert!(helpers.iter().all(|(_, lane)| *lane == Lane::Background));
    // The same table as one thread builds.
    let (one, _) = build(
        &specs,
        Limits::default(),
        SyncMode::AllOrNothing,
        1,
        (256, 4096),
    );
    assert!(one.2 == current.to_image().ok());
    drop(b);
}

#[test]
fn a_build_on_threads_stops_when_its_builder_is_dropped() {
    let table = Table::generate(60_000, 2, false);
    let specs: Vec<(Uuid, u64, String)> = table
        .routes
        .iter()
        .map(|r| (Uuid::from_bytes(r.id), r.priority, r.expression.clone()))
        .collect();
    let specs = as_specs(&specs);
    let mut b = Builder::new(schema(Limits::default()), Limits::default());
    b.build_threads(2).unwrap();
    b.submit(1, RouteInput::routes(&specs), SyncMode::AllOrNothing);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let dropped = std::time::Instant::now();
    drop(b);
    // Preparing stops within a piece; an index build under way finishes first (as on one
    // thread). Either is far below building the whole table again.
    assert!(
        dropped.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        dropped.elapsed()
    );
}
