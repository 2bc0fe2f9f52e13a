//! `Router::lint` and `Linter`, as docs/lint.md describes them: each finding, and silence where
//! the linter cannot decide.

use std::sync::Arc;

use atc_router::{FindingKind, LintOptions, Linter, Router, Schema, Type, Uuid};

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

/// Findings of one kind.
fn of_kind(found: &[atc_router::Finding], kind: FindingKind) -> Vec<&atc_router::Finding> {
    found.iter().filter(|f| f.kind == kind).collect()
}

#[test]
fn a_route_shadowed_by_many_is_one_finding_naming_the_first_few() {
    let mut r = router();
    // Twenty routes that each take every request of the last one, in routing order 1..=20.
    for i in 1..=20 {
        r.add(id(i), 100 - i as u64, r#"http.path ^= "/api""#)
            .unwrap();
    }
    r.add(id(99), 1, r#"http.path ^= "/api/v2""#).unwrap();
    let found = r.lint();
    let shadowed: Vec<_> = of_kind(&found, FindingKind::NeverWins)
        .into_iter()
        .filter(|f| f.routes[0] == id(99))
        .collect();
    assert_eq!(shadowed.len(), 1, "{found:#?}");
    let f = shadowed[0];
    assert_eq!(
        f.routes,
        [
            id(99),
            id(1),
            id(2),
            id(3),
            id(4),
            id(5),
            id(6),
            id(7),
            id(8)
        ]
    );
    assert_eq!((f.more, f.at_least), (12, false));
    assert!(
        f.message.contains("and 12 more come before it"),
        "{}",
        f.message
    );
    // The duplicates are one finding too.
    let dup = of_kind(&found, FindingKind::DuplicateExpression);
    assert_eq!(dup.len(), 1);
    assert_eq!((dup[0].routes.len(), dup[0].more), (9, 11));
}

#[test]
fn routes_overlapping_at_one_priority_are_one_finding_with_the_request_they_share() {
    let mut r = router();
    for i in 1..=12 {
        r.add(
            id(i),
            10,
            &format!(r#"http.path ^= "/api" && http.path != "/x{i}""#),
        )
        .unwrap();
    }
    let found = r.lint();
    let overlaps = of_kind(&found, FindingKind::EqualPriorityOverlap);
    assert_eq!(overlaps.len(), 1, "{found:#?}");
    let f = overlaps[0];
    // Routing order at one priority is by id, highest first.
    assert_eq!(f.routes.first(), Some(&id(12)));
    assert_eq!((f.routes.len(), f.more), (9, 3));
    assert!(f.message.contains(r#"http.path = "/api""#), "{}", f.message);
    assert!(of_kind(&found, FindingKind::NeverWins).is_empty());
}

#[test]
fn the_number_of_findings_and_of_routes_named_are_configurable() {
    let mut r = router();
    for i in 1..=5 {
        r.add(id(i), 10 - i as u64, r#"http.path ^= "/api""#)
            .unwrap();
    }
    let few = LintOptions {
        max_per_kind: 2,
        max_named: 1,
    };
    let lint = Linter::with_options(&r, few);
    let found: Vec<_> = lint.findings().collect();
    // Four never-wins findings (routes 2 to 5), two reported; one duplicate group.
    assert_eq!(lint.omitted(), 2);
    let never: Vec<_> = found
        .iter()
        .filter(|f| f.kind == FindingKind::NeverWins)
        .collect();
    assert_eq!(never.len(), 2);
    assert_eq!(
        (never[0].routes.clone(), never[0].more),
        (vec![id(2), id(1)], 0)
    );
    assert_eq!(
        (never[1].routes.clone(), never[1].more),
        (vec![id(3), id(1)], 1)
    );
    assert_eq!(r.lint_with(few).len(), found.len());
    let dup = found
        .iter()
        .find(|f| f.kind == FindingKind::DuplicateExpression)
        .unwrap();
    assert_eq!((dup.routes.clone(), dup.more), (vec![id(1), id(2)], 3));
}

#[test]
fn a_route_with_many_unanchored_path_regexes_is_one_finding() {
    let mut r = router();
    r.add(
        id(1),
        10,
        r#"http.path ~ "/a" && http.path ~ "/b" && http.path ~ "^/c" && http.path ~ "/d""#,
    )
    .unwrap();
    let found = r.lint();
    let f = of_kind(&found, FindingKind::UnanchoredPathRegex);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].location.as_ref().unwrap().column, 1);
    assert!(
        f[0].message
            .contains("(and 2 more such regex(es) in this route)"),
        "{}",
        f[0].message
    );
}

#[test]
fn updates_keep_the_groups_counts() {
    let mut r = router();
    r.add(id(99), 1, r#"http.path ^= "/api/v2""#).unwrap();
    let mut lint = Linter::new(&r);
    for i in 1..=12 {
        r.add(id(i), 100 - i as u64, r#"http.path ^= "/api""#)
            .unwrap();
        lint.update(&r, &[id(i)]);
    }
    let count = |lint: &Linter| {
        lint.findings()
            .find(|f| f.kind == FindingKind::NeverWins && f.routes[0] == id(99))
            .map(|f| (f.routes.len() - 1, f.more))
    };
    assert_eq!(count(&lint), Some((8, 4)));
    r.remove(id(1));
    lint.update(&r, &[id(1)]);
    assert_eq!(count(&lint), Some((8, 3)));
    let fresh: Vec<_> = Linter::new(&r).findings().cloned().collect();
    assert_eq!(lint.findings().cloned().collect::<Vec<_>>(), fresh);
}

/// Routes of `n` terms `http.path ^= "/"`.
fn chain(n: usize) -> String {
    vec![r#"http.path ^= "/""#; n].join(" && ")
}

#[test]
fn ten_thousand_identical_routes_lint_in_linear_work() {
    // 1,000 identical routes were 999,001 findings (547 MB of report); 10,000 did not finish in
    // 8 GB. Now they are 10,000 findings held, at most 1,000 of a kind reported, and the work
    // is linear: one witness looked up, one evaluation, one implication, per class. A debug
    // build runs this in the normal test run.
    let mut r = router();
    let n: u128 = 10_000;
    for i in 1..=n {
        r.add(id(i), 1, r#"http.path ^= "/api""#).unwrap();
    }
    let before = atc_router::diagnostic_steps();
    let lint = Linter::new(&r);
    let steps = atc_router::diagnostic_steps() - before;
    let found: Vec<_> = lint.findings().collect();
    let n = n as usize;
    assert!(steps < 200 * n as u64, "{steps} steps for {n} routes");
    assert_eq!(
        found
            .iter()
            .filter(|f| f.kind == FindingKind::NeverWins)
            .count(),
        LintOptions::DEFAULT_MAX_PER_KIND
    );
    assert_eq!(lint.omitted(), n - 1 - LintOptions::DEFAULT_MAX_PER_KIND);
    for kind in [
        FindingKind::EqualPriorityOverlap,
        FindingKind::DuplicateExpression,
    ] {
        let group: Vec<_> = found.iter().filter(|f| f.kind == kind).collect();
        assert_eq!(group.len(), 1, "{kind:?}");
        assert_eq!(group[0].routes.len(), 9);
        assert_eq!((group[0].more, group[0].at_least), (n - 9, false));
    }
    let last = found
        .iter()
        .rfind(|f| f.kind == FindingKind::NeverWins)
        .unwrap();
    assert_eq!(last.more, LintOptions::DEFAULT_MAX_PER_KIND - 8);
}

#[test]
fn ten_thousand_distinct_routes_overlapping_at_one_priority_lint_in_linear_work() {
    let mut r = router();
    let n: u128 = 10_000;
    for i in 1..=n {
        r.add(
            id(i),
            1,
            &format!(r#"http.path ^= "/api" && http.path != "/x{i}""#),
        )
        .unwrap();
    }
    let before = atc_router::diagnostic_steps();
    let found = r.lint();
    let steps = atc_router::diagnostic_steps() - before;
    // Each route is compared with at most 64 expressions before it, each of its witness's
    // candidates evaluated once: linear, with those constants.
    assert!(steps < 2_000 * n as u64, "{steps} steps for {n} routes");
    let overlaps = of_kind(&found, FindingKind::EqualPriorityOverlap);
    assert_eq!(overlaps.len(), 1);
    assert_eq!(overlaps[0].more, n as usize - 9);
    assert!(of_kind(&found, FindingKind::NeverWins).is_empty());
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

#[test]
fn past_its_caps_the_linter_counts_at_least_what_it_compared() {
    let mut r = router();
    // 1,100 distinct routes, each taking every request of the last one (their `||` gives them
    // no index key, so every request has them as candidates).
    for i in 1..=1_100u128 {
        let text = format!(r#"http.path ^= "/api" || http.host == "h{i}.example""#);
        r.add(id(i), 10, &text).unwrap();
    }
    r.add(id(5_000), 1, r#"http.path ^= "/api/x""#).unwrap();
    let found = r.lint();
    let f = of_kind(&found, FindingKind::NeverWins)
        .into_iter()
        .find(|f| f.routes[0] == id(5_000))
        .unwrap();
    // Compared with the first 64 expressions before it: 8 named, 56 counted, maybe more.
    assert_eq!(
        (f.routes.len(), f.more, f.at_least),
        (9, Linter::MAX_COVERING_COMPARED - 8, true)
    );
    assert!(f.message.contains("and at least 56 more"), "{}", f.message);
}
