//! Background builds (`Builder`): the next table is built on a thread of the builder's own,
//! taken between requests and swapped in; every version gets one outcome, in the order
//! submitted; whole lists and lists of changes both cost what changed; refusals, panics and
//! drops leave the current table serving; a version that waits too long is built by the
//! boosted lane.

use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::route_list::{EntryList, Position};
use atc_router::{
    BuildState, Builder, Context, EntryFault, Outcome, RouteInput, RouteSpec, Router, Schema,
    SyncMode, SyncReport, Type, Uuid,
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

/// `n` routes, route `i` taking `/r<i>/<tag>`.
fn table(n: usize, tag: &str) -> Vec<(Uuid, u64, String)> {
    (0..n)
        .map(|i| (id(i), i as u64, format!(r#"http.path ^= "/r{i}/{tag}""#)))
        .collect()
}

fn whole(t: &[(Uuid, u64, String)]) -> RouteInput {
    let specs: Vec<RouteSpec<'_>> = t
        .iter()
        .map(|(id, priority, e)| RouteSpec {
            id: *id,
            priority: *priority,
            expression: e,
        })
        .collect();
    RouteInput::routes(&specs)
}

/// A list of changes: `put` routes, then `remove` ids.
fn changes(put: &[(Uuid, u64, String)], remove: &[Uuid]) -> RouteInput {
    let mut l = EntryList::new();
    for (id, p, e) in put {
        l.push_route(Position::Item(l.len() + 1), *id, *p, e);
    }
    for id in remove {
        l.push_removal(Position::Item(l.len() + 1), *id);
    }
    RouteInput::Changes(l)
}

/// Waits for an outcome (a generous deadline: the machine may be loaded) and takes it into
/// `current`.
fn wait(b: &mut Builder, current: &mut Router) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !b.is_ready() {
        assert!(Instant::now() < deadline, "no outcome: {:?}", b.state());
        std::thread::sleep(Duration::from_millis(1));
    }
    b.apply_to(current).expect("ready")
}

fn built(out: Outcome) -> SyncReport {
    match out {
        Outcome::Built { report, .. } => report,
        other => panic!("not built: {other:?}"),
    }
}

/// Waits until the builder has nothing in hand (its copy of the table is up to date).
fn settle(b: &mut Builder) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while b.is_busy() {
        assert!(Instant::now() < deadline, "still busy");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn routes_to(r: &Router, s: &Arc<Schema>, path: &str) -> Option<Uuid> {
    let mut c = Context::new(s.clone());
    c.add_value("http.path", path).unwrap();
    r.execute(&mut c);
    c.result().map(|m| m.id())
}

fn counts(r: &SyncReport) -> (usize, usize, usize, usize) {
    (r.added, r.removed, r.changed, r.unchanged)
}

#[test]
fn a_list_is_built_off_the_calling_thread_and_swapped_in() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    assert_eq!(b.state(), BuildState::Idle);
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(100, "a")), SyncMode::AllOrNothing);
    let out = wait(&mut b, &mut current);
    assert_eq!(out.version(), 1);
    assert_eq!(built(out).added, 100);
    assert_eq!(routes_to(&current, &s, "/r7/a/x"), Some(id(7)));
    assert_eq!(b.state(), BuildState::Idle);

    // One route changed: applied to the shadow, route by route.
    settle(&mut b);
    let mut next = table(100, "a");
    next[7].2 = r#"http.path ^= "/seven""#.into();
    b.submit(2, whole(&next), SyncMode::AllOrNothing);
    let report = built(wait(&mut b, &mut current));
    assert_eq!(counts(&report), (0, 0, 1, 99));
    assert_eq!(routes_to(&current, &s, "/seven"), Some(id(7)));
    assert_eq!(routes_to(&current, &s, "/r7/a/x"), None);

    // And again: the replaced table came back and was brought level to be the shadow.
    b.submit(3, whole(&table(100, "a")), SyncMode::AllOrNothing);
    let report = built(wait(&mut b, &mut current));
    assert_eq!(counts(&report), (0, 0, 1, 99));
    assert_eq!(routes_to(&current, &s, "/r7/a/x"), Some(id(7)));

    // Every route changed (same ids, new texts): a fresh router, its report what the list is to
    // the table it replaces.
    b.submit(4, whole(&table(50, "b")), SyncMode::AllOrNothing);
    let report = built(wait(&mut b, &mut current));
    assert_eq!(counts(&report), (0, 50, 50, 0));
    assert_eq!(current.len(), 50);
    assert_eq!(routes_to(&current, &s, "/r7/b"), Some(id(7)));

    // After the fresh build, the next small change builds from a shadow made again.
    let mut next = table(50, "b");
    next[3].2 = r#"http.path ^= "/three""#.into();
    b.submit(5, whole(&next), SyncMode::AllOrNothing);
    let report = built(wait(&mut b, &mut current));
    assert_eq!(counts(&report), (0, 0, 1, 49));
    assert_eq!(routes_to(&current, &s, "/three"), Some(id(3)));
}

#[test]
fn a_list_of_changes_costs_what_it_changes_and_keeps_the_rest() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(40, "a")), SyncMode::AllOrNothing);
    built(wait(&mut b, &mut current));

    let put = [
        (id(5), 5, r#"http.path ^= "/five""#.to_owned()),
        (id(100), 1, r#"http.path ^= "/new""#.to_owned()),
    ];
    // A removal of an id the table does not hold changes nothing.
    b.submit(2, changes(&put, &[id(9), id(999)]), SyncMode::AllOrNothing);
    let report = built(wait(&mut b, &mut current));
    assert_eq!(counts(&report), (1, 1, 1, 38));
    assert_eq!(current.len(), 40);
    assert_eq!(routes_to(&current, &s, "/five"), Some(id(5)));
    assert_eq!(routes_to(&current, &s, "/new"), Some(id(100)));
    assert_eq!(routes_to(&current, &s, "/r9/a"), None);
    assert_eq!(routes_to(&current, &s, "/r8/a"), Some(id(8)));

    // The next changes apply to the table in force, through the recycled copy.
    b.submit(3, changes(&[], &[id(100)]), SyncMode::AllOrNothing);
    assert_eq!(counts(&built(wait(&mut b, &mut current))), (0, 1, 0, 39));
    assert_eq!(routes_to(&current, &s, "/new"), None);
    assert_eq!(routes_to(&current, &s, "/five"), Some(id(5)));

    // An invalid change refuses the whole list of changes (all or nothing); with apply-valid
    // the valid ones go in.
    let bad = [
        (id(6), 6, r#"http.path ^= "/six""#.to_owned()),
        (id(7), 7, "http.path ==".to_owned()),
    ];
    b.submit(4, changes(&bad, &[]), SyncMode::AllOrNothing);
    match wait(&mut b, &mut current) {
        Outcome::Refused {
            errors, message, ..
        } => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].at, Position::Item(2));
            assert!(
                message.starts_with(&format!(
                    "1 invalid route(s), nothing changed; route #2 ({})",
                    id(7)
                )),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(routes_to(&current, &s, "/six"), None);
    b.submit(5, changes(&bad, &[]), SyncMode::ApplyValid);
    let report = built(wait(&mut b, &mut current));
    assert_eq!(counts(&report), (0, 0, 1, 38));
    assert_eq!(report.errors.len(), 1);
    assert_eq!(routes_to(&current, &s, "/six"), Some(id(6)));
    assert_eq!(
        routes_to(&current, &s, "/r7/a"),
        Some(id(7)),
        "kept as it was"
    );

    // The same id twice in one list of changes: the later one is a duplicate.
    b.submit(
        6,
        changes(&[(id(1), 1, r#"http.path ^= "/one""#.to_owned())], &[id(1)]),
        SyncMode::AllOrNothing,
    );
    match wait(&mut b, &mut current) {
        Outcome::Refused { errors, .. } => assert_eq!(
            errors[0].fault,
            EntryFault::Duplicate {
                first: Position::Item(1)
            }
        ),
        other => panic!("{other:?}"),
    }
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
    built(wait(&mut b, &mut current));
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
    built(wait(&mut b, &mut current));
    assert_eq!(current.len(), 1);
    assert_eq!(routes_to(&current, &s, "/j"), Some(id(3)));
    // Not a list at all: refused, with why.
    b.submit(3, RouteInput::Text(Box::new("[1,")), SyncMode::AllOrNothing);
    match wait(&mut b, &mut current) {
        Outcome::Refused {
            version, message, ..
        } => {
            assert_eq!(version, 3);
            assert!(message.contains("JSON"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A bad line of a text is named by its line.
    let tsv = format!("1\t{}\thttp.path ==\n", id(4));
    b.submit(4, RouteInput::Text(Box::new(tsv)), SyncMode::AllOrNothing);
    match wait(&mut b, &mut current) {
        Outcome::Refused {
            errors, message, ..
        } => {
            assert_eq!(errors[0].at, Position::Line(1));
            assert!(message.contains("route at line 1"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_invalid_route_refuses_the_list_and_the_shadow_stays() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(20, "a")), SyncMode::AllOrNothing);
    built(wait(&mut b, &mut current));
    let mut bad = table(20, "a");
    bad[3].2 = "http.path ==".into();
    b.submit(2, whole(&bad), SyncMode::AllOrNothing);
    match wait(&mut b, &mut current) {
        Outcome::Refused { errors, .. } => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].id, Some(id(3)));
            assert_eq!(errors[0].at, Position::Item(4));
            assert!(matches!(errors[0].fault, EntryFault::Invalid(_)));
        }
        other => panic!("{other:?}"),
    }
    // Apply-valid: the other routes are applied, the bad one keeps its current version.
    bad[4].2 = r#"http.path ^= "/four""#.into();
    b.submit(3, whole(&bad), SyncMode::ApplyValid);
    let report = built(wait(&mut b, &mut current));
    assert_eq!(report.errors.len(), 1);
    assert_eq!(
        (report.changed, report.unchanged),
        (1, 18),
        "from the shadow"
    );
    assert_eq!(routes_to(&current, &s, "/r3/a"), Some(id(3)));
    assert_eq!(routes_to(&current, &s, "/four"), Some(id(4)));
}

#[test]
fn every_version_gets_one_outcome_in_order_and_a_whole_list_supersedes_the_queued() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    // A large first build keeps the thread busy while more lists arrive.
    b.submit(1, whole(&table(5000, "a")), SyncMode::AllOrNothing);
    // Changes queue behind it; the whole list 5 supersedes them and the whole list 2 that are
    // queued; the changes after it are applied to it.
    b.submit(2, whole(&table(10, "v2")), SyncMode::AllOrNothing);
    b.submit(
        3,
        changes(&[(id(1), 1, r#"http.path ^= "/three""#.into())], &[]),
        SyncMode::AllOrNothing,
    );
    b.submit(5, whole(&table(10, "v5")), SyncMode::AllOrNothing);
    b.submit(
        6,
        changes(&[(id(2), 2, r#"http.path ^= "/six""#.into())], &[]),
        SyncMode::AllOrNothing,
    );
    b.submit(7, changes(&[], &[id(3)]), SyncMode::AllOrNothing);
    let mut seen = Vec::new();
    while seen.last().map(|(v, _)| *v) != Some(7) {
        let out = wait(&mut b, &mut current);
        let kind = match &out {
            Outcome::Built { .. } => "built",
            Outcome::Superseded { version, by } => {
                // By the first whole list submitted after it (version 1 only if it had not
                // started when version 2 came).
                let next_whole = if *version == 1 { 2 } else { 5 };
                assert_eq!(*by, next_whole, "{version}");
                "superseded"
            }
            other => panic!("{other:?}"),
        };
        seen.push((out.version(), kind));
    }
    let versions: Vec<u64> = seen.iter().map(|(v, _)| *v).collect();
    let superseded: Vec<u64> = seen
        .iter()
        .filter(|(_, k)| *k == "superseded")
        .map(|(v, _)| *v)
        .collect();
    assert_eq!(versions, [1, 2, 3, 5, 6, 7], "one outcome each, in order");
    assert!(
        superseded == [2, 3] || superseded == [1, 2, 3],
        "{superseded:?}"
    );
    assert_eq!(routes_to(&current, &s, "/r1/v5"), Some(id(1)));
    assert_eq!(routes_to(&current, &s, "/six"), Some(id(2)));
    assert_eq!(routes_to(&current, &s, "/r3/v5"), None);
    assert_eq!(current.len(), 9);
    assert_eq!(b.state(), BuildState::Idle);
}

#[test]
fn a_build_waits_for_the_replaced_table_to_come_back() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(10, "a")), SyncMode::AllOrNothing);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !b.is_ready() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    // Not taken yet: the next version waits for it, then builds on it.
    b.submit(
        2,
        changes(&[(id(2), 2, r#"http.path ^= "/two""#.into())], &[]),
        SyncMode::AllOrNothing,
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(b.state(), BuildState::Building(2));
    assert_eq!(wait(&mut b, &mut current).version(), 1);
    assert_eq!(routes_to(&current, &s, "/r2/a"), Some(id(2)));
    let report = built(wait(&mut b, &mut current));
    assert_eq!(counts(&report), (0, 0, 1, 9));
    assert_eq!(routes_to(&current, &s, "/two"), Some(id(2)));
    assert_eq!(routes_to(&current, &s, "/r3/a"), Some(id(3)));
}

#[test]
fn a_panic_while_building_is_reported_and_the_next_whole_list_works() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(10, "a")), SyncMode::AllOrNothing);
    built(wait(&mut b, &mut current));
    // By version: tests running side by side do not hit each other's builds.
    atc_router::panic_next_build_failpoint(0xbad_0002);
    b.submit(0xbad_0002, whole(&table(10, "b")), SyncMode::AllOrNothing);
    match wait(&mut b, &mut current) {
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
    // The thread no longer knows the table in force: changes are refused, a whole list is not.
    b.submit(3, changes(&[], &[id(1)]), SyncMode::AllOrNothing);
    match wait(&mut b, &mut current) {
        Outcome::Refused { message, .. } => {
            assert!(message.contains("does not know the table"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    b.submit(4, whole(&table(10, "c")), SyncMode::AllOrNothing);
    built(wait(&mut b, &mut current));
    assert_eq!(routes_to(&current, &s, "/r1/c"), Some(id(1)));
    // A rebase also tells it again.
    b.rebase(&current);
    b.submit(5, changes(&[], &[id(1)]), SyncMode::AllOrNothing);
    assert_eq!(counts(&built(wait(&mut b, &mut current))), (0, 1, 0, 9));
}

#[test]
fn dropping_a_builder_while_it_builds_stops_it() {
    let s = schema();
    for _ in 0..3 {
        let mut b = Builder::new(s.clone(), Default::default());
        b.boost_after(Some(Duration::from_secs(60)));
        b.submit(1, whole(&table(20_000, "a")), SyncMode::AllOrNothing);
        std::thread::sleep(Duration::from_millis(5));
        let t = Instant::now();
        drop(b);
        // Stopped between two routes, not after the whole list (a generous bound: the point is
        // that it returns, and the threads are joined).
        assert!(t.elapsed() < Duration::from_secs(30));
    }
    // The schema's wildcard registrations of half-built routers were released.
    assert_eq!(s.names_in_use(), 0);
}

/// The thread each lane runs on, as the start hook saw it.
static LANES: std::sync::Mutex<Vec<(atc_router::Lane, String)>> = std::sync::Mutex::new(Vec::new());

fn note_lane(lane: atc_router::Lane) {
    let name = std::thread::current().name().unwrap_or("").to_owned();
    LANES.lock().unwrap().push((lane, name));
}

/// A version that waits longer than `boost_after` is built by the boosted lane; the background
/// lane gives up what it had prepared, and the table is the same.
#[test]
fn a_version_that_waits_too_long_is_built_by_the_boosted_lane() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    b.on_thread_start(note_lane);
    b.boost_after(Some(Duration::ZERO));
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(3000, "a")), SyncMode::AllOrNothing);
    assert_eq!(built(wait(&mut b, &mut current)).added, 3000);
    let mut next = table(3000, "a");
    next[5].2 = r#"http.path ^= "/five""#.into();
    b.submit(2, whole(&next), SyncMode::AllOrNothing);
    assert_eq!(counts(&built(wait(&mut b, &mut current))), (0, 0, 1, 2999));
    assert_eq!(routes_to(&current, &s, "/five"), Some(id(5)));
    let lanes = LANES.lock().unwrap().clone();
    assert!(
        lanes.contains(&(atc_router::Lane::Boosted, "atc-router-boost".into())),
        "{lanes:?}"
    );
    assert!(lanes.contains(&(atc_router::Lane::Background, "atc-router-builder".into())));
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
            Ok(atc_router::Published::at(format!("image-{version}")))
        }),
        false,
    );
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(50, "a")), SyncMode::AllOrNothing);
    let Outcome::Built { published, .. } = wait(&mut b, &mut current) else {
        panic!("built")
    };
    assert_eq!(published, Some(Ok("image-1".to_owned())));
    assert_eq!(current.len(), 0, "the table stays with the thread");
    // One route changed: built from the thread's copy, a change of one.
    let mut next = table(50, "a");
    next[7].2 = r#"http.path ^= "/changed""#.into();
    b.submit(2, whole(&next), SyncMode::AllOrNothing);
    let Outcome::Built {
        report, published, ..
    } = wait(&mut b, &mut current)
    else {
        panic!("built")
    };
    assert_eq!(published, Some(Ok("image-2".to_owned())));
    assert_eq!((report.changed, report.unchanged), (1, 49), "{report:?}");
    // And a list of changes, again from the thread's copy.
    b.submit(3, changes(&[], &[id(1)]), SyncMode::AllOrNothing);
    assert_eq!(counts(&built(wait(&mut b, &mut current))), (0, 1, 0, 49));
    assert_eq!(*seen.lock().unwrap(), [(1, 50), (2, 50), (3, 49)]);
}

/// Without a shadow (`keep_shadow(false)`, what the Lua binding's Kong API asks for): every
/// build starts from the routes the thread knows, a list of changes still reaches the table in
/// force, and after direct changes the rebase is what the next build starts from.
#[test]
fn without_a_shadow_changes_still_build_on_the_table_in_force() {
    let s = schema();
    let mut b = Builder::new(s.clone(), Default::default());
    b.keep_shadow(false);
    let mut current = Router::new(s.clone());
    b.submit(1, whole(&table(40, "a")), SyncMode::AllOrNothing);
    built(wait(&mut b, &mut current));
    settle(&mut b);

    let put = [(id(100), 1, r#"http.path ^= "/new""#.to_owned())];
    b.submit(2, changes(&put, &[id(9)]), SyncMode::AllOrNothing);
    assert_eq!(counts(&built(wait(&mut b, &mut current))), (1, 1, 0, 39));
    assert_eq!(routes_to(&current, &s, "/new"), Some(id(100)));
    assert_eq!(routes_to(&current, &s, "/r9/a"), None);
    assert_eq!(routes_to(&current, &s, "/r8/a"), Some(id(8)));

    current
        .add(id(200), 1, r#"http.path ^= "/direct""#)
        .unwrap();
    assert!(current.remove(id(8)));
    b.rebase(&current);
    b.submit(3, changes(&[], &[]), SyncMode::AllOrNothing);
    built(wait(&mut b, &mut current));
    assert_eq!(current.len(), 40);
    assert_eq!(routes_to(&current, &s, "/direct"), Some(id(200)));
    assert_eq!(routes_to(&current, &s, "/r8/a"), None);
    assert_eq!(routes_to(&current, &s, "/new"), Some(id(100)));
    assert_eq!(routes_to(&current, &s, "/r7/a"), Some(id(7)));

    // Kept again: the next build's replaced table becomes the thread's copy.
    b.keep_shadow(true);
    b.submit(4, changes(&[], &[id(7)]), SyncMode::AllOrNothing);
    built(wait(&mut b, &mut current));
    assert_eq!(routes_to(&current, &s, "/r7/a"), None);
    settle(&mut b);
}
