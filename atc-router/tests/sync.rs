//! docs/language.md "Routers" "rebuild on change": sync applies only the difference, refuses or
//! skips invalid routes as asked, and readers never observe a half-applied update.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use atc_router::route_list::Position;
use atc_router::{
    Context, EntryError, EntryFault, RouteSpec, Router, Schema, SharedRouter, SyncMode, Type, Uuid,
};

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("http.host", Type::String).unwrap();
    Arc::new(s)
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn spec(n: u128, priority: u64, expression: &str) -> RouteSpec<'_> {
    RouteSpec {
        id: id(n),
        priority,
        expression,
    }
}

fn table(r: &Router) -> Vec<(Uuid, u64, String)> {
    r.routes()
        .map(|r| (r.id(), r.priority(), r.source().to_owned()))
        .collect()
}

#[test]
fn unchanged_routes_are_recognised_by_content_and_not_rebuilt() {
    let mut r = Router::new(schema());
    let initial = [
        spec(1, 1, r#"http.path ^= "/a""#),
        spec(2, 2, r#"http.path ~ "^/b/(\\d+)""#),
        spec(3, 3, r#"http.path ^= "/c""#),
    ];
    let report = r.sync(&initial, SyncMode::AllOrNothing).unwrap();
    assert_eq!(
        (
            report.added,
            report.removed,
            report.changed,
            report.unchanged
        ),
        (3, 0, 0, 0)
    );
    let before = r.get(id(2)).unwrap().instance();

    let next = [
        spec(1, 1, r#"http.path ^= "/a""#),        // unchanged
        spec(2, 2, r#"http.path ~ "^/b/(\\d+)""#), // unchanged
        spec(3, 9, r#"http.path ^= "/c""#),        // priority changed
        spec(4, 4, r#"http.path ^= "/d""#),        // added
    ];
    let report = r.sync(&next, SyncMode::AllOrNothing).unwrap();
    assert_eq!(
        (
            report.added,
            report.removed,
            report.changed,
            report.unchanged
        ),
        (1, 0, 1, 2)
    );
    assert!(
        before == r.get(id(2)).unwrap().instance(),
        "an unchanged route is the same object"
    );
    assert_eq!(r.get(id(3)).unwrap().priority(), 9);

    let last = [
        spec(2, 2, r#"http.path ~ "^/b/(\\d+)""#),
        spec(4, 4, r#"http.path ^= "/dd""#),
    ];
    let report = r.sync(&last, SyncMode::AllOrNothing).unwrap();
    assert_eq!(
        (
            report.added,
            report.removed,
            report.changed,
            report.unchanged
        ),
        (0, 2, 1, 1)
    );
    assert_eq!(
        table(&r),
        [
            (id(4), 4, r#"http.path ^= "/dd""#.into()),
            (id(2), 2, r#"http.path ~ "^/b/(\\d+)""#.into())
        ]
    );
    assert_eq!(r.regex_count(), 1);
    assert_eq!(r.sync(&[], SyncMode::AllOrNothing).unwrap().removed, 2);
    assert_eq!(r.regex_count(), 0);
    assert!(r.is_empty());
}

#[test]
fn all_or_nothing_reports_every_bad_route_and_changes_nothing() {
    let mut r = Router::new(schema());
    r.sync(
        &[spec(1, 1, r#"http.path ^= "/a""#)],
        SyncMode::AllOrNothing,
    )
    .unwrap();
    let desired = [
        spec(1, 1, r#"http.path ^= "/changed""#),
        spec(2, 1, r#"http.nope == "x""#),
        spec(3, 1, r#"http.path ~ "^/new(""#),
        spec(4, 1, r#"http.path ~ "^/ok/(\\d+)""#),
        spec(5, 1, "http.path =="),
    ];
    let before = table(&r);
    let err = r.sync(&desired, SyncMode::AllOrNothing).unwrap_err();
    let bad: Vec<Option<Uuid>> = err.errors.iter().map(|e| e.id).collect();
    assert_eq!(bad, [Some(id(2)), Some(id(3)), Some(id(5))]);
    assert!(
        err.to_string()
            .contains("3 invalid route(s), nothing changed"),
        "{err}"
    );
    assert!(
        err.to_string().contains("unknown field `http.nope`"),
        "{err}"
    );
    assert_eq!(table(&r), before);
    assert_eq!(
        r.regex_count(),
        0,
        "regexes compiled for the refused plan are not kept"
    );
}

#[test]
fn apply_valid_skips_bad_routes_and_keeps_the_old_version_of_a_bad_change() {
    let mut r = Router::new(schema());
    r.sync(
        &[
            spec(1, 1, r#"http.path ^= "/a""#),
            spec(2, 1, r#"http.path ^= "/b""#),
        ],
        SyncMode::AllOrNothing,
    )
    .unwrap();
    let desired = [
        spec(1, 1, r#"http.path ^= "#),      // bad change: keeps "/a"
        spec(2, 1, r#"http.path ^= "/b2""#), // good change
        spec(3, 1, r#"http.path ^= "/c""#),  // added
        spec(4, 1, r#"http.nope == "x""#),   // bad new route
    ];
    let report = r.sync(&desired, SyncMode::ApplyValid).unwrap();
    assert_eq!((report.added, report.changed, report.removed), (1, 1, 0));
    assert_eq!(
        report.errors.iter().map(|e| e.id).collect::<Vec<_>>(),
        [Some(id(1)), Some(id(4))]
    );
    assert_eq!(r.get(id(1)).unwrap().source(), r#"http.path ^= "/a""#);
    assert_eq!(r.get(id(2)).unwrap().source(), r#"http.path ^= "/b2""#);
    assert!(r.get(id(4)).is_none());
}

#[test]
fn repeated_ids_in_the_desired_list_are_errors() {
    let mut r = Router::new(schema());
    let desired = [
        spec(1, 1, r#"http.path ^= "/a""#),
        spec(1, 2, r#"http.path ^= "/b""#),
    ];
    let err = r.sync(&desired, SyncMode::AllOrNothing).unwrap_err();
    assert!(matches!(
        &err.errors[..],
        [EntryError { at: Position::Item(2), id: Some(i), fault: EntryFault::Duplicate { first: Position::Item(1) } }]
            if *i == id(1)
    ));
    assert!(
        err.to_string().ends_with(&format!(
            "; route #2 ({}): duplicate id: route #1 has it already",
            id(1)
        )),
        "{err}"
    );
    let report = r.sync(&desired, SyncMode::ApplyValid).unwrap();
    assert_eq!((report.added, report.errors.len()), (1, 1));
    assert_eq!(
        r.get(id(1)).unwrap().source(),
        r#"http.path ^= "/a""#,
        "the first one wins"
    );
}

#[test]
fn a_plan_prepared_before_another_change_is_not_applied() {
    let mut r = Router::new(schema());
    let plan = r
        .prepare_sync(
            &[spec(1, 1, r#"http.path ^= "/a""#)],
            SyncMode::AllOrNothing,
        )
        .unwrap();
    assert_eq!(plan.report().added, 1);
    r.add(id(2), 1, r#"http.path ^= "/b""#).unwrap();
    let report = r.apply(plan);
    assert!(report.stale);
    assert_eq!(table(&r).len(), 1);
}

/// Two versions of a table of `pairs` route pairs: in version A the even route of each pair
/// wins, in version B the odd one. A reader that sees both kinds of winners in one read has
/// seen half an update.
fn as_specs(v: &[(Uuid, u64, String)]) -> Vec<RouteSpec<'_>> {
    v.iter()
        .map(|(i, p, e)| RouteSpec {
            id: *i,
            priority: *p,
            expression: e,
        })
        .collect()
}

fn version(pairs: u128, b: bool) -> Vec<(u128, u64, String)> {
    (0..pairs)
        .flat_map(|p| {
            let expr = format!(r#"http.path ^= "/p{p}/""#);
            let (high, low) = if b {
                (2 * p + 1, 2 * p)
            } else {
                (2 * p, 2 * p + 1)
            };
            [(high, 10, expr.clone()), (low, 5, expr)]
        })
        .collect()
}

#[test]
fn readers_see_one_whole_version_while_updates_run() {
    let pairs = 200;
    let schema = schema();
    let shared = Arc::new(SharedRouter::new(Router::new(schema.clone())));
    let specs = |v: &[(u128, u64, String)]| -> Vec<(Uuid, u64, String)> {
        v.iter().map(|(i, p, e)| (id(*i), *p, e.clone())).collect()
    };
    let (a, b) = (specs(&version(pairs, false)), specs(&version(pairs, true)));
    shared.sync(&as_specs(&a), SyncMode::AllOrNothing).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (shared, schema, stop, reads) =
                (shared.clone(), schema.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut ctxs: Vec<Context> = (0..pairs)
                    .map(|p| {
                        let mut c = Context::new(schema.clone());
                        c.add_value("http.path", format!("/p{p}/x")).unwrap();
                        c
                    })
                    .collect();
                while !stop.load(Ordering::Relaxed) {
                    let router = shared.read().expect("the router is not broken");
                    let mut odd = 0;
                    for c in ctxs.iter_mut() {
                        assert!(router.execute(c));
                        odd += c.result().unwrap().id().as_u128() % 2;
                    }
                    assert!(
                        odd == 0 || odd == pairs,
                        "half an update seen: {odd} of {pairs} flipped"
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for round in 0..40 {
        let target = if round % 2 == 0 { &b } else { &a };
        let report = shared
            .sync(&as_specs(target), SyncMode::AllOrNothing)
            .unwrap();
        assert_eq!(report.changed, 2 * pairs as usize);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader saw a consistent table every time");
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
}

#[test]
fn content_is_still_recognised_after_long_churn() {
    // Many rounds of changes leave old expression texts behind; whatever the router does to
    // reclaim them, an unchanged route must still be recognised and a changed one still seen.
    let mut r = Router::new(schema());
    let padding = "x".repeat(200);
    let round = |k: usize| -> Vec<(u128, u64, String)> {
        (0..100u128)
            .map(|n| {
                // Routes below 60 never change; the others change every round (few enough
                // that each round is applied route by route, not as a rebuild).
                let tag = if n < 60 { 0 } else { k };
                (n, 1, format!(r#"http.path == "/{n}/{tag}/{padding}""#))
            })
            .collect()
    };
    for k in 0..40 {
        let v = round(k);
        let specs: Vec<RouteSpec<'_>> = v.iter().map(|(n, p, e)| spec(*n, *p, e)).collect();
        let report = r.sync(&specs, SyncMode::AllOrNothing).unwrap();
        let expect_changed = if k == 0 { 0 } else { 40 };
        assert_eq!(
            (report.changed, report.unchanged),
            (expect_changed, 100 - expect_changed - report.added)
        );
        let again = r.sync(&specs, SyncMode::AllOrNothing).unwrap();
        assert_eq!(again.unchanged, 100, "round {k}");
        let mut ctx = Context::new(r.schema().clone());
        ctx.add_value("http.path", format!("/75/{k}/{padding}"))
            .unwrap();
        assert!(r.execute(&mut ctx));
        assert_eq!(ctx.result().unwrap().id(), id(75));
    }
    assert_eq!(table(&r).len(), 100);
}

#[test]
fn a_sync_replacing_a_big_table_leaves_exactly_the_new_table() {
    // All routes but one changed: the plan is a fresh router, which takes over the regexes the
    // two versions share.
    let n = 1100;
    let version = |tag: &str| -> Vec<(u128, u64, String)> {
        (0..n)
            .map(|i| {
                // Route 0 is the same in both versions.
                let tag = if i == 0 { "old" } else { tag };
                // Even routes share one regex across versions; odd ones get a new regex.
                let re = match i % 2 {
                    0 => r"^/shared/(?<id>\\d+)$".to_owned(),
                    _ => format!(r"^/{tag}/{i}/(?<id>\\d+)$"),
                };
                let e = format!(r#"http.host == "h{i}.{tag}" && http.path ~ "{re}""#);
                (i, i as u64, e)
            })
            .collect()
    };
    let (old, new) = (version("old"), version("new"));
    let mut r = Router::new(schema());
    let specs = |v: &[(u128, u64, String)]| -> Vec<(Uuid, u64, String)> {
        v.iter().map(|(i, p, e)| (id(*i), *p, e.clone())).collect()
    };
    r.sync(&as_specs(&specs(&old)), SyncMode::AllOrNothing)
        .unwrap();
    let kept = r.get(id(0)).unwrap().instance();
    let changed = r.get(id(1)).unwrap().instance();
    let report = r
        .sync(&as_specs(&specs(&new)), SyncMode::AllOrNothing)
        .unwrap();
    assert_eq!((report.changed, report.unchanged), (n as usize - 1, 1));
    assert_eq!(r.get(id(0)).unwrap().instance(), kept);
    assert_ne!(r.get(id(1)).unwrap().instance(), changed);
    let mut fresh = Router::new(r.schema().clone());
    for (i, p, e) in &new {
        fresh.add(id(*i), *p, e).unwrap();
    }
    assert_eq!(table(&r), table(&fresh));
    assert_eq!(r.regex_count(), fresh.regex_count());
    for i in [0, 1, n / 2, n - 1] {
        let path = match i % 2 {
            0 => "/shared/7".to_owned(),
            _ => format!("/new/{i}/7"),
        };
        let host = if i == 0 {
            "h0.old".to_owned()
        } else {
            format!("h{i}.new")
        };
        let mut ctx = Context::new(r.schema().clone());
        ctx.add_value("http.host", host).unwrap();
        ctx.add_value("http.path", path).unwrap();
        assert!(r.execute(&mut ctx), "route {i}");
        assert_eq!(ctx.result().unwrap().id(), id(i));
        assert_eq!(ctx.result().unwrap().captures_map()["id"], "7");
    }
}

#[test]
fn regexes_compiled_for_a_skipped_route_are_not_kept() {
    let mut r = Router::new(schema());
    // The path regex compiles; the host regex does not, so the route is skipped.
    let bad = r#"http.path ~ "^/only-here/\\d+$" && http.host ~ "(""#;
    let report = r
        .sync(
            &[spec(1, 1, r#"http.path ~ "^/kept/\\d+$""#), spec(2, 1, bad)],
            SyncMode::ApplyValid,
        )
        .unwrap();
    assert_eq!((report.added, report.errors.len()), (1, 1));
    assert_eq!(r.regex_count(), 1);
}
