//! `Router::stats`: what an operator graphs. Executes count as routed or not found (and nothing
//! else counts), updates as applied or refused with their times, through direct changes, syncs
//! (incremental and rebuilt), prepared plans, a shared router and background builds; counts stay
//! with the router whatever table serves; a broken router says so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::{
    Builder, Context, Outcome, RouteInput, RouteSpec, Router, Schema, SharedRouter, SyncMode, Type,
    Uuid,
};

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("http.host", Type::String).unwrap();
    Arc::new(s)
}

fn id(i: usize) -> Uuid {
    Uuid::from_u128(0xb000 + i as u128)
}

/// `n` routes, route `i` taking paths under `/r<i>/<tag>`.
fn texts(n: usize, tag: &str) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"http.path ^= "/r{i}/{tag}""#))
        .collect()
}

fn specs(texts: &[String]) -> Vec<RouteSpec<'_>> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| RouteSpec {
            id: id(i),
            priority: i as u64,
            expression: t,
        })
        .collect()
}

fn request(s: &Arc<Schema>, path: &str) -> Context {
    let mut c = Context::new(s.clone());
    c.add_value("http.path", path).unwrap();
    c
}

#[test]
fn executes_count_as_routed_or_not_found_and_nothing_else_counts() {
    let s = schema();
    let mut r = Router::new(s.clone());
    let fresh = r.stats();
    assert_eq!(
        fresh,
        Default::default(),
        "a new router has counted nothing"
    );
    r.sync(&specs(&texts(10, "a")), SyncMode::AllOrNothing)
        .unwrap();
    let before = r.stats();
    let mut hit = request(&s, "/r3/a/x");
    let mut miss = request(&s, "/nowhere");
    for _ in 0..7 {
        assert!(r.execute(&mut hit));
    }
    for _ in 0..5 {
        assert!(!r.execute(&mut miss));
    }
    // Not executes: phase two of a two-phase match, explanations, reference evaluations.
    r.needed_fields(&mut hit);
    r.explain(&mut hit).unwrap();
    r.matches(&mut miss).unwrap();
    r.execute_reference(&mut hit);
    // No answer: a context of another schema.
    let mut other = request(&schema(), "/r3/a/x");
    assert!(!r.execute(&mut other));
    r.count_bad_request();
    r.count_bad_request();
    let after = r.stats();
    assert_eq!((after.routed, after.not_found), (7, 5));
    assert_eq!(after.bad_requests, 2);
    assert_eq!(
        (after.updates_applied, after.updates_refused),
        (before.updates_applied, before.updates_refused),
        "matching is no update"
    );
    assert_eq!(after.routes, 10);
    assert!(!after.broken);
}

#[test]
fn direct_changes_count_as_applied_or_refused_with_their_time() {
    let s = schema();
    let mut r = Router::new(s.clone());
    r.add(id(1), 1, r#"http.path ^= "/a""#).unwrap();
    let st = r.stats();
    assert_eq!(
        (st.updates_applied, st.updates_refused, st.routes),
        (1, 0, 1)
    );
    assert!(st.last_update_hold > Duration::ZERO);
    assert_eq!(
        st.last_build, st.last_update_hold,
        "add: its build is its hold"
    );

    assert!(r.add(id(2), 1, "http.path ==").is_err(), "invalid");
    assert!(
        r.add(id(1), 1, r#"http.path ^= "/b""#).is_err(),
        "duplicate id"
    );
    assert!(r.remove(id(1)));
    assert!(!r.remove(id(1)), "no longer there");
    let st = r.stats();
    assert_eq!(
        (st.updates_applied, st.updates_refused, st.routes),
        (2, 3, 0)
    );

    // Syncs: applied (changes or none), refused (all or nothing), apply-valid with an invalid
    // route (applied: the valid ones are in).
    let good = texts(20, "a");
    r.sync(&specs(&good), SyncMode::AllOrNothing).unwrap();
    r.sync(&specs(&good), SyncMode::AllOrNothing).unwrap();
    let mut bad = good.clone();
    bad[5] = "http.path ^=".into();
    assert!(r.sync(&specs(&bad), SyncMode::AllOrNothing).is_err());
    let report = r.sync(&specs(&bad), SyncMode::ApplyValid).unwrap();
    assert_eq!(report.errors.len(), 1);
    let st = r.stats();
    assert_eq!((st.updates_applied, st.updates_refused), (5, 4));
    assert_eq!(st.routes, 20);
    assert_eq!(
        st.last_build, st.last_update_hold,
        "sync: its build is its hold"
    );
}

#[test]
fn a_rebuild_keeps_the_counts_of_the_router_it_replaces() {
    let s = schema();
    let mut r = Router::new(s.clone());
    r.sync(&specs(&texts(50, "a")), SyncMode::AllOrNothing)
        .unwrap();
    let mut c = request(&s, "/r1/a");
    assert!(r.execute(&mut c));
    // Every route changes: the sync builds a fresh table and swaps it in.
    let b = texts(50, "b");
    let report = r.sync(&specs(&b), SyncMode::AllOrNothing).unwrap();
    assert_eq!(report.changed, 50);
    let mut c = request(&s, "/r1/b");
    assert!(r.execute(&mut c));
    let st = r.stats();
    assert_eq!(st.routed, 2, "the count of the replaced table carried over");
    assert_eq!(st.updates_applied, 2);
    assert_eq!(st.routes, 50);
}

#[test]
fn a_prepared_plan_counts_when_applied_with_its_preparation_in_the_build_time() {
    let s = schema();
    let mut r = Router::new(s.clone());
    let routes = texts(2000, "a");
    let plan = r
        .prepare_sync(&specs(&routes), SyncMode::AllOrNothing)
        .unwrap();
    assert_eq!(r.stats().updates_applied, 0, "preparing is not an update");
    r.apply(plan);
    let st = r.stats();
    assert_eq!((st.updates_applied, st.routes), (1, 2000));
    assert!(
        st.last_build > st.last_update_hold,
        "the build ({:?}) includes the preparation, the hold ({:?}) only the apply",
        st.last_build,
        st.last_update_hold
    );
    // A stale plan: prepared before another change, refused on apply.
    let plan = r
        .prepare_sync(&specs(&texts(2000, "b")), SyncMode::AllOrNothing)
        .unwrap();
    r.remove(id(0));
    let report = r.apply(plan);
    assert!(report.stale);
    let st = r.stats();
    assert_eq!((st.updates_applied, st.updates_refused), (2, 1));
}

#[test]
fn a_shared_router_counts_every_thread_exactly() {
    let s = schema();
    let shared = Arc::new(SharedRouter::new(Router::new(s.clone())));
    shared
        .sync(&specs(&texts(10, "a")), SyncMode::AllOrNothing)
        .unwrap();
    let (threads, per) = (4, 5_000);
    std::thread::scope(|sc| {
        for t in 0..threads {
            let (shared, s) = (shared.clone(), s.clone());
            sc.spawn(move || {
                let mut hit = request(&s, &format!("/r{t}/a"));
                let mut miss = request(&s, "/none");
                for _ in 0..per {
                    assert!(shared.execute(&mut hit).unwrap());
                    assert!(!shared.execute(&mut miss).unwrap());
                }
            });
        }
    });
    let mut bad = texts(10, "a");
    bad[0] = "(".into();
    assert!(shared.sync(&specs(&bad), SyncMode::AllOrNothing).is_err());
    let st = shared.read().unwrap().stats();
    let sent = (threads * per) as u64;
    assert_eq!((st.routed, st.not_found), (sent, sent));
    assert_eq!((st.updates_applied, st.updates_refused), (1, 1));
    assert_eq!(
        st.last_update_hold,
        Duration::ZERO,
        "a refusal while preparing held no reader"
    );
    assert!(st.last_build > Duration::ZERO);
}

/// Waits for the builder's outcome (a generous deadline: the machine may be loaded) and takes
/// it into `current`.
fn wait(b: &mut Builder, current: &mut Router) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !b.is_ready() {
        assert!(Instant::now() < deadline, "no outcome: {:?}", b.state());
        std::thread::sleep(Duration::from_millis(1));
    }
    b.apply_to(current).expect("ready")
}

#[test]
fn background_builds_carry_their_build_time_and_the_counts_stay_with_the_router() {
    let s = schema();
    let mut current = Router::new(s.clone());
    let mut b = Builder::new(s.clone(), Default::default());
    let mut hit = request(&s, "/r2/a");
    assert!(!current.execute(&mut hit));

    // Built: swapped in, and the caller records the update, as atc_router_sync_apply does.
    b.submit(
        1,
        RouteInput::routes(&specs(&texts(3000, "a"))),
        SyncMode::AllOrNothing,
    );
    let started = Instant::now();
    let outcome = wait(&mut b, &mut current);
    let build_time = outcome.build_time();
    assert!(build_time > Duration::ZERO, "the builder timed the build");
    assert!(matches!(outcome, Outcome::Built { .. }), "{outcome:?}");
    current.record_update(true, started.elapsed(), build_time);
    assert!(current.execute(&mut hit));
    let st = current.stats();
    assert_eq!(
        (st.routed, st.not_found),
        (1, 1),
        "counts kept across the swap"
    );
    assert_eq!((st.updates_applied, st.routes), (1, 3000));
    assert_eq!(st.last_build, build_time);

    // Refused: the caller records it, the table stays.
    let mut bad = texts(3000, "a");
    bad[7] = "http.path ~".into();
    b.submit(2, RouteInput::routes(&specs(&bad)), SyncMode::AllOrNothing);
    let outcome = wait(&mut b, &mut current);
    assert!(matches!(outcome, Outcome::Refused { .. }), "{outcome:?}");
    assert!(outcome.build_time() > Duration::ZERO);
    current.record_update(false, Duration::from_micros(5), outcome.build_time());
    let st = current.stats();
    assert_eq!(
        (st.updates_applied, st.updates_refused, st.routes),
        (1, 1, 3000)
    );
    assert_eq!(st.last_update_hold, Duration::from_micros(5));
}

#[test]
fn a_broken_router_says_so_and_its_refused_executes_count_in_neither() {
    let s = schema();
    let mut r = Router::new(s.clone());
    r.sync(&specs(&texts(8, "a")), SyncMode::AllOrNothing)
        .unwrap();
    let mut c = request(&s, "/r1/a");
    assert!(r.execute(&mut c));
    // A change interrupted part-way (an injected panic inside the add).
    atc_router::panic_at_failpoint(1);
    let interrupted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        r.add(id(100), 1, r#"http.path ^= "/new""#)
    }));
    atc_router::panic_at_failpoint(0);
    assert!(interrupted.is_err());
    let st = r.stats();
    assert!(st.broken);
    assert_eq!(
        (st.updates_applied, st.updates_refused),
        (1, 0),
        "an interrupted update is in neither count"
    );
    assert!(r.try_execute(&mut c).is_err());
    assert_eq!((r.stats().routed, r.stats().not_found), (1, 0));
    // A sync rebuilds it.
    r.sync(&specs(&texts(8, "a")), SyncMode::AllOrNothing)
        .unwrap();
    let st = r.stats();
    assert!(!st.broken);
    assert_eq!((st.updates_applied, st.routes), (2, 8));
    assert!(r.execute(&mut c));
    assert_eq!(r.stats().routed, 2);
}
