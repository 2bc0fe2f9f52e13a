//! `Router::lint` and `Linter`, as docs/lint.md describes them: each finding, and silence where
//! the linter cannot decide.

use std::sync::Arc;

use atc_router::{FindingKind, Linter, Router, Schema, Type, Uuid};

fn router() -> Router {
    let mut s = Schema::new();
    for (name, ty) in [
        ("http.host", Type::String),
        ("http.path", Type::String),
        ("http.method", Type::String),
        ("http.headers.x_tenant", Type::String),
        ("net.dst.port", Type::Int),
    ] {
        s.add_field(name, ty).unwrap();
    }
    Router::new(Arc::new(s))
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn kinds(r: &Router) -> Vec<(FindingKind, Vec<Uuid>)> {
    r.lint().into_iter().map(|f| (f.kind, f.routes)).collect()
}

#[test]
fn a_prefix_before_a_longer_path_on_the_same_host_shadows_it() {
    let mut r = router();
    r.add(
        id(1),
        20,
        r#"http.host == "a.example" && http.path ^= "/api""#,
    )
    .unwrap();
    r.add(
        id(2),
        10,
        r#"http.host == "a.example" && http.path ^= "/api/v2""#,
    )
    .unwrap();
    assert_eq!(kinds(&r), [(FindingKind::NeverWins, vec![id(2), id(1)])]);
}

#[test]
fn a_route_without_a_host_shadows_the_same_path_under_a_host() {
    let mut r = router();
    r.add(id(1), 20, r#"http.path ^= "/health""#).unwrap();
    r.add(
        id(2),
        10,
        r#"http.host == "a.example" && http.path == "/health""#,
    )
    .unwrap();
    assert_eq!(kinds(&r), [(FindingKind::NeverWins, vec![id(2), id(1)])]);
}

#[test]
fn a_parameterised_path_shadows_a_static_path_it_accepts() {
    let mut r = router();
    r.add(
        id(1),
        20,
        r#"http.method == "GET" && http.path ~ "^/users/[^/]+$""#,
    )
    .unwrap();
    r.add(
        id(2),
        10,
        r#"http.method == "GET" && http.path == "/users/me""#,
    )
    .unwrap();
    assert_eq!(kinds(&r), [(FindingKind::NeverWins, vec![id(2), id(1)])]);
}

#[test]
fn a_narrower_route_first_is_fine() {
    let mut r = router();
    r.add(
        id(1),
        20,
        r#"http.host == "a.example" && http.path ^= "/api/v2""#,
    )
    .unwrap();
    r.add(
        id(2),
        10,
        r#"http.host == "a.example" && http.path ^= "/api""#,
    )
    .unwrap();
    assert_eq!(kinds(&r), []);
}

#[test]
fn an_extra_condition_on_the_later_route_still_leaves_it_shadowed() {
    let mut r = router();
    r.add(id(1), 20, r#"http.path ^= "/api""#).unwrap();
    r.add(
        id(2),
        10,
        r#"http.path ^= "/api" && http.headers.x_tenant == "t1" && net.dst.port == 443"#,
    )
    .unwrap();
    assert_eq!(kinds(&r), [(FindingKind::NeverWins, vec![id(2), id(1)])]);
}

#[test]
fn routes_the_linter_cannot_compare_get_no_finding() {
    let mut r = router();
    // Which requests the `!=` route misses is not something a prefix shows: silence.
    r.add(id(1), 20, r#"http.path ^= "/api" && http.method != "POST""#)
        .unwrap();
    r.add(id(2), 10, r#"http.path ^= "/api/v2""#).unwrap();
    assert_eq!(kinds(&r), []);
}

#[test]
fn equal_priorities_that_overlap_are_reported() {
    let mut r = router();
    // Routing order puts id 2 first; it does not take every request of id 1 (only GETs).
    r.add(id(1), 10, r#"http.path ^= "/api""#).unwrap();
    r.add(id(2), 10, r#"http.path ^= "/api" && http.method == "GET""#)
        .unwrap();
    assert_eq!(
        kinds(&r),
        [(FindingKind::EqualPriorityOverlap, vec![id(2), id(1)])]
    );
}

#[test]
fn equal_priorities_on_different_hosts_do_not_overlap() {
    let mut r = router();
    r.add(id(1), 10, r#"http.host == "a.example""#).unwrap();
    r.add(id(2), 10, r#"http.host == "b.example""#).unwrap();
    assert_eq!(kinds(&r), []);
}

#[test]
fn duplicate_expressions_are_reported_once_for_all_their_routes() {
    let mut r = router();
    r.add(id(1), 30, r#"http.host == "a.example""#).unwrap();
    r.add(id(2), 20, r#"(http.host=="a.example")"#).unwrap();
    r.add(id(3), 10, r##"http.host == r#"a.example"#"##)
        .unwrap();
    let found = kinds(&r);
    assert!(found.contains(&(FindingKind::DuplicateExpression, vec![id(1), id(2), id(3)])));
}

#[test]
fn a_path_regex_without_a_start_anchor_is_reported_with_its_place() {
    let mut r = router();
    r.add(
        id(1),
        10,
        r#"http.host == "a.example" && http.path ~ "/users/\\d+""#,
    )
    .unwrap();
    r.add(id(2), 5, r#"http.path ~ "^/users/\\d+""#).unwrap();
    let found = r.lint();
    let f = found
        .iter()
        .find(|f| f.kind == FindingKind::UnanchoredPathRegex)
        .unwrap();
    assert_eq!(f.routes, [id(1)]);
    assert_eq!(f.location.as_ref().unwrap().column, 29);
    assert_eq!(
        found
            .iter()
            .filter(|f| f.kind == FindingKind::UnanchoredPathRegex)
            .count(),
        1
    );
}

#[test]
fn an_update_reports_what_the_added_route_shadows_and_forgets_removed_routes() {
    let mut r = router();
    r.add(
        id(2),
        10,
        r#"http.host == "a.example" && http.path ^= "/api/v2""#,
    )
    .unwrap();
    let mut lint = Linter::new(&r);
    assert_eq!(lint.findings().count(), 0);
    r.add(
        id(1),
        20,
        r#"http.host == "a.example" && http.path ^= "/api""#,
    )
    .unwrap();
    lint.update(&r, &[id(1)]);
    let found: Vec<_> = lint
        .findings()
        .map(|f| (f.kind, f.routes.clone()))
        .collect();
    assert_eq!(found, [(FindingKind::NeverWins, vec![id(2), id(1)])]);
    r.remove(id(1));
    lint.update(&r, &[id(1)]);
    assert_eq!(lint.findings().count(), 0);
}

/// A set implies what holds for each of its elements, so a set inside a larger one is implied.
#[test]
fn a_method_set_inside_a_larger_one_is_shadowed_and_one_outside_is_not() {
    let shadowed = [
        (
            r#"http.method in ["GET", "HEAD", "POST"] && http.path ^= "/api""#,
            r#"http.method in ["HEAD", "GET"] && http.path ^= "/api/v2""#,
        ),
        (
            r#"http.method in ["GET", "HEAD"] && http.path ^= "/api""#,
            r#"http.method == "GET" && http.path ^= "/api/v2""#,
        ),
        (
            r#"http.method == "GET" && http.path ^= "/api""#,
            r#"http.method in ["GET", "GET"] && http.path ^= "/api/v2""#,
        ),
        (
            r#"net.dst.port in [80, 443, 8080]"#,
            r#"net.dst.port in [443, 80] && http.host == "a.example""#,
        ),
        (
            r#"http.path ^= "/api""#,
            r#"http.path in ["/api/a", "/api/b"]"#,
        ),
    ];
    for (first, second) in shadowed {
        let mut r = router();
        r.add(id(1), 20, first).unwrap();
        r.add(id(2), 10, second).unwrap();
        assert_eq!(
            kinds(&r),
            [(FindingKind::NeverWins, vec![id(2), id(1)])],
            "{first}\n{second}"
        );
    }
    let apart = [
        (
            r#"http.method in ["GET"] && http.path ^= "/api""#,
            r#"http.method in ["GET", "POST"] && http.path ^= "/api/v2""#,
        ),
        (
            r#"http.method == "GET" && http.path ^= "/api""#,
            r#"http.method in ["GET", "HEAD"] && http.path ^= "/api/v2""#,
        ),
        (
            r#"http.method not in ["POST"] && http.path ^= "/api""#,
            r#"http.method in ["GET", "POST"] && http.path ^= "/api/v2""#,
        ),
    ];
    for (first, second) in apart {
        let mut r = router();
        r.add(id(1), 20, first).unwrap();
        r.add(id(2), 10, second).unwrap();
        assert_eq!(kinds(&r), [], "{first}\n{second}");
    }
}

#[test]
fn a_method_set_shadows_a_route_on_one_of_its_methods() {
    let mut r = router();
    r.add(
        id(1),
        20,
        r#"http.method in ["GET", "HEAD"] && http.path ^= "/api""#,
    )
    .unwrap();
    r.add(
        id(2),
        10,
        r#"http.method == "GET" && http.path ^= "/api/v2""#,
    )
    .unwrap();
    r.add(
        id(3),
        5,
        r#"http.method in ["GET", "POST"] && http.path ^= "/api/v3""#,
    )
    .unwrap();
    // Route 3 also takes POSTs, which route 1 does not: only route 2 never wins.
    assert_eq!(kinds(&r), [(FindingKind::NeverWins, vec![id(2), id(1)])]);
}

/// Routes of `n` terms `http.path ^= "/"`.
fn chain(n: usize) -> String {
    vec![r#"http.path ^= "/""#; n].join(" && ")
}

#[test]
fn long_routes_are_compared_in_work_linear_in_their_predicates() {
    // Two routes of 4,001 distinct predicates each on one field: comparing them predicate by
    // predicate would be 16 million comparisons (past the cap of comparisons, so no finding);
    // the same predicates are found by a lookup.
    let text = (0..4_000)
        .map(|i| format!(r#"http.path ^= "/{i:04}""#))
        .collect::<Vec<_>>()
        .join(" || ");
    let text = format!(r#"http.host == "a.example" && ({text})"#);
    let same = (0..4_000)
        .map(|i| format!(r#" && http.path != "/x{i:04}""#))
        .collect::<String>();
    let same = format!(r#"http.path ^= "/api"{same}"#);
    let mut r = router();
    r.add(id(1), 20, &same).unwrap();
    r.add(id(2), 10, &same).unwrap();
    r.add(id(3), 5, &text).unwrap();
    r.add(id(4), 4, &chain(4_000)).unwrap();
    let before = atc_router::diagnostic_steps();
    let found = r.lint();
    let steps = atc_router::diagnostic_steps() - before;
    assert!(
        steps < 200 * (2 * same.len() + text.len()) as u64,
        "{steps} steps"
    );
    assert!(found
        .iter()
        .any(|f| f.kind == FindingKind::NeverWins && f.routes == [id(2), id(1)]));
}
