//! Background builds (`Builder`): the next table is built on a thread of the builder's own,
//! taken between requests and swapped in; versions are ready in the order they were
//! submitted; refusals, panics and drops leave the current table serving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::{
    BuildState, Builder, Context, ListError, Outcome, OwnedRoute, RouteInput, Router, Schema,
    SyncMode, Type, Uuid,
};

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("http.host", Type::String).unwrap();
    Arc::new(s)
}

fn id(i: usize) -> Uuid {
    Uuid::from_u128(0xa000 + i as u128)
}

fn route(i: usize, expression: String) -> OwnedRoute {
    OwnedRoute {
        id: id(i),
        priority: i as u64,
        expression,
    }
}

/// `n` routes, route `i` taking `/r<i>/` (plus `/all` for the highest).
fn table(n: usize, tag: &str) -> Vec<OwnedRoute> {
    (0..n)
        .map(|i| route(i, format!(r#"http.path ^= "/r{i}/{tag}""#)))
        .collect()
}

/// Waits for an outcome (a generous deadline: the machine may be loaded) and takes it.
fn wait(b: &mut Builder) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !b.is_ready() {
        assert!(Instant::now() < deadline, "no outcome: {:?}", b.state());
        std::thread::sleep(Duration::from_millis(1));
    }
    b.take().expect("ready")
}

/// Waits until the builder has nothing in hand (its copy of the table is up to date).
fn settle(b: &mut Builder) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while b.is_busy() {
        assert!(Instant::now() < deadline, "still busy");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Takes a built outcome into `current`, handing the old router back.
fn swap_in(b: &mut Builder, current: &mut Router, outcome: Outcome) -> atc_router::SyncReport {
    match outcome {
        Outcome::Built { router, report, .. } => {
            let old = std::mem::replace(current, *router);
            b.recycle(old);
            report
        }
        other => panic!("not built: {other:?}"),
    }
}

fn routes_to(r: &Router, s: &Arc<Schema>, path: &str) -> Option<Uuid> {
    let mut c = Context::new(s.clone());
    c.add_value("http.path", path).unwrap();
    r.execute(&mut c);
    c.result().map(|m| m.id())
}

#[test]
fn a_list_is_built_off_the_calling_thread_and_swapped_in() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    assert_eq!(b.state(), BuildState::Idle);
    let mut current = Router::new(s.clone());
    b.submit(
        1,
        RouteInput::routes(table(100, "a")),
        SyncMode::AllOrNothing,
    );
    let out = wait(&mut b);
    assert_eq!(out.version(), 1);
    let report = swap_in(&mut b, &mut current, out);
    assert_eq!(report.added, 100);
    assert_eq!(routes_to(&current, &s, "/r7/a/x"), Some(id(7)));
    assert_eq!(b.state(), BuildState::Idle);

    // One route changed: built from the shadow (made from the list after the first, fresh,
    // build), route by route.
    settle(&mut b);
    let mut next = table(100, "a");
    next[7].expression = r#"http.path ^= "/seven""#.into();
    b.submit(2, RouteInput::routes(next), SyncMode::AllOrNothing);
    let report = {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    assert_eq!(
        (
            report.changed,
            report.unchanged,
            report.added,
            report.removed
        ),
        (1, 99, 0, 0)
    );
    assert_eq!(routes_to(&current, &s, "/seven"), Some(id(7)));
    assert_eq!(routes_to(&current, &s, "/r7/a/x"), None);

    // And again: the replaced router came back and was brought up to date to be the shadow.
    settle(&mut b);
    b.submit(
        3,
        RouteInput::routes(table(100, "a")),
        SyncMode::AllOrNothing,
    );
    let report = {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    assert_eq!((report.changed, report.unchanged), (1, 99));
    assert_eq!(routes_to(&current, &s, "/r7/a/x"), Some(id(7)));

    // Every route changed (same ids, new texts): a fresh router, its report what the list is to
    // the table it replaces.
    b.submit(
        4,
        RouteInput::routes(table(50, "b")),
        SyncMode::AllOrNothing,
    );
    let report = {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    assert_eq!(
        (
            report.changed,
            report.removed,
            report.added,
            report.unchanged
        ),
        (50, 50, 0, 0)
    );
    assert_eq!(current.len(), 50);
    assert_eq!(routes_to(&current, &s, "/r7/b"), Some(id(7)));
}

#[test]
fn a_list_in_text_is_read_on_the_builder() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    let tsv = format!(
        "10\t{}\thttp.path ^= \"/t\"\n# a comment\n20\t{}\thttp.path ^= \"/t/x\"\n",
        id(1),
        id(2)
    );
    b.submit(1, RouteInput::Text(Box::new(tsv)), SyncMode::AllOrNothing);
    {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    assert_eq!(routes_to(&current, &s, "/t/x"), Some(id(2)));
    let json = format!(
        r#"{{"routes": [{{"id": "{}", "priority": 5, "expression": "http.path == \"/j\""}}]}}"#,
        id(3)
    );
    b.submit(
        2,
        RouteInput::Text(Box::new(json.into_bytes())),
        SyncMode::AllOrNothing,
    );
    {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    assert_eq!(current.len(), 1);
    assert_eq!(routes_to(&current, &s, "/j"), Some(id(3)));
    // Not a list at all: refused, with why.
    b.submit(3, RouteInput::Text(Box::new("[1,")), SyncMode::AllOrNothing);
    match wait(&mut b) {
        Outcome::Refused {
            version, message, ..
        } => {
            assert_eq!(version, 3);
            assert!(message.contains("JSON"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_invalid_route_refuses_the_list_and_the_shadow_stays() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    b.submit(
        1,
        RouteInput::routes(table(20, "a")),
        SyncMode::AllOrNothing,
    );
    {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    settle(&mut b);
    let mut bad = table(20, "a");
    bad[3].expression = "http.path ==".into();
    b.submit(2, RouteInput::routes(bad.clone()), SyncMode::AllOrNothing);
    match wait(&mut b) {
        Outcome::Refused { errors, .. } => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].id(), Some(id(3)));
            assert_eq!(errors[0].line(), 4);
            assert!(matches!(errors[0], ListError::Invalid { .. }));
        }
        other => panic!("{other:?}"),
    }
    // Apply-valid: the other routes are applied, the bad one keeps its current version.
    bad[4].expression = r#"http.path ^= "/four""#.into();
    b.submit(3, RouteInput::routes(bad), SyncMode::ApplyValid);
    let out = wait(&mut b);
    let Outcome::Built { errors, .. } = &out else {
        panic!("{out:?}")
    };
    assert_eq!(errors.len(), 1);
    let report = swap_in(&mut b, &mut current, out);
    assert_eq!(
        (report.changed, report.unchanged),
        (1, 18),
        "from the shadow"
    );
    assert_eq!(routes_to(&current, &s, "/r3/a"), Some(id(3)));
    assert_eq!(routes_to(&current, &s, "/four"), Some(id(4)));
}

#[test]
fn versions_are_ready_in_order_and_a_queued_list_is_replaced() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    // A large first build keeps the thread busy while more lists arrive.
    b.submit(
        1,
        RouteInput::routes(table(5000, "a")),
        SyncMode::AllOrNothing,
    );
    let mut replaced = Vec::new();
    for v in 2..=6 {
        replaced.extend(b.submit(
            v,
            RouteInput::routes(table(10, &format!("v{v}"))),
            SyncMode::AllOrNothing,
        ));
    }
    let mut seen = Vec::new();
    let mut current = Router::new(s.clone());
    while seen.last() != Some(&6) {
        let out = wait(&mut b);
        seen.push(out.version());
        swap_in(&mut b, &mut current, out);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    // A version replaced in the queue is never built; one built may be superseded before it
    // is taken (never taken after a newer one).
    for v in 2..6 {
        assert!(
            !(replaced.contains(&v) && seen.contains(&v)),
            "{v}: {replaced:?} {seen:?}"
        );
    }
    assert_eq!(routes_to(&current, &s, "/r1/v6"), Some(id(1)));
}

#[test]
fn an_outcome_not_taken_is_superseded_by_a_newer_one() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    b.submit(
        1,
        RouteInput::routes(table(10, "a")),
        SyncMode::AllOrNothing,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !b.is_ready() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    // Not taken: the next build starts from it, and only the newer one is ever ready.
    b.submit(
        2,
        RouteInput::routes(table(10, "b")),
        SyncMode::AllOrNothing,
    );
    let out = wait(&mut b);
    assert_eq!(out.version(), 2);
    let mut current = Router::new(s.clone());
    swap_in(&mut b, &mut current, out);
    assert_eq!(routes_to(&current, &s, "/r2/b"), Some(id(2)));
    assert_eq!(b.state(), BuildState::Idle);
}

#[test]
fn a_panic_while_building_is_reported_and_the_next_build_works() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    b.submit(
        1,
        RouteInput::routes(table(10, "a")),
        SyncMode::AllOrNothing,
    );
    {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    // By version: tests running side by side do not hit each other's builds.
    atc_router::panic_next_build_failpoint(0xbad_0002);
    b.submit(
        0xbad_0002,
        RouteInput::routes(table(10, "b")),
        SyncMode::AllOrNothing,
    );
    match wait(&mut b) {
        Outcome::Panicked {
            version, message, ..
        } => {
            assert_eq!(version, 0xbad_0002);
            assert!(message.contains("injected"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        routes_to(&current, &s, "/r1/a"),
        Some(id(1)),
        "still serving"
    );
    b.submit(
        3,
        RouteInput::routes(table(10, "c")),
        SyncMode::AllOrNothing,
    );
    {
        let out = wait(&mut b);
        swap_in(&mut b, &mut current, out)
    };
    assert_eq!(routes_to(&current, &s, "/r1/c"), Some(id(1)));
}

#[test]
fn dropping_a_builder_while_it_builds_stops_it() {
    let s = schema();
    for _ in 0..3 {
        let mut b = Builder::new(s.clone(), Default::default());
        b.submit(
            1,
            RouteInput::routes(table(20_000, "a")),
            SyncMode::AllOrNothing,
        );
        std::thread::sleep(Duration::from_millis(5));
        let t = Instant::now();
        drop(b);
        // Stopped between two routes, not after the whole list (a generous bound: the point is
        // that it returns, and the thread is joined).
        assert!(t.elapsed() < Duration::from_secs(30));
    }
    // The schema's wildcard registrations of half-built routers were released.
    assert_eq!(s.names_in_use(), 0);
}

/// A builder that publishes (`publish_with`) runs the hook on every table before it is ready;
/// one whose caller does not keep tables hands over an empty router in their place and builds
/// the next version from its own copy (a small change stays a small build).
#[test]
fn published_tables_are_kept_by_the_thread_when_the_caller_does_not_keep_them() {
    use std::sync::Mutex;
    let s = schema();
    let seen: Arc<Mutex<Vec<(u64, usize)>>> = Arc::default();
    let log = seen.clone();
    let mut b = Builder::new(s.clone(), Default::default());
    b.publish_with(
        Box::new(move |version, router: &Router| {
            log.lock().unwrap().push((version, router.len()));
            Ok(format!("image-{version}"))
        }),
        false,
    );
    let mut current = Router::new(s.clone());
    b.submit(
        1,
        RouteInput::routes(table(50, "a")),
        SyncMode::AllOrNothing,
    );
    let Outcome::Built {
        router, published, ..
    } = wait(&mut b)
    else {
        panic!("built")
    };
    assert_eq!(published, Some(Ok("image-1".to_owned())));
    assert_eq!(router.len(), 0, "the table stays with the thread");
    b.recycle(current.replace_with(*router));
    // One route changed: built from the thread's copy, a change of one.
    let mut next = table(50, "a");
    next[7].expression = r#"http.path ^= "/changed""#.into();
    b.submit(2, RouteInput::routes(next), SyncMode::AllOrNothing);
    let Outcome::Built {
        report, published, ..
    } = wait(&mut b)
    else {
        panic!("built")
    };
    assert_eq!(published, Some(Ok("image-2".to_owned())));
    assert_eq!((report.changed, report.unchanged), (1, 49), "{report:?}");
    assert_eq!(*seen.lock().unwrap(), [(1, 50), (2, 50)]);
}
