//! `Router::explain` and `Router::matches`, as docs/explain.md describes them.

use std::sync::Arc;

use atc_router::{Context, ExplainOptions, Router, Schema, Type, Uuid, Value};

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    for (name, ty) in [
        ("http.host", Type::String),
        ("http.path", Type::String),
        ("http.method", Type::String),
        ("net.dst.port", Type::Int),
    ] {
        s.add_field(name, ty).unwrap();
    }
    Arc::new(s)
}

fn request(schema: &Arc<Schema>, host: &str, method: &str, path: &str) -> Context {
    let mut ctx = Context::new(schema.clone());
    ctx.add_value("http.host", host).unwrap();
    ctx.add_value("http.method", method).unwrap();
    ctx.add_value("http.path", path).unwrap();
    ctx.add_value("net.dst.port", Value::Int(443)).unwrap();
    ctx
}

const USERS: Uuid = Uuid::from_u128(1);
const USER: Uuid = Uuid::from_u128(2);
const OTHER_HOST: Uuid = Uuid::from_u128(3);

fn router(schema: &Arc<Schema>) -> Router {
    let mut r = Router::new(schema.clone());
    r.add(
        USERS,
        30,
        "http.host == \"api.example\"\n  && http.method == \"POST\"\n  && http.path ^= \"/users\"",
    )
    .unwrap();
    r.add(
        USER,
        20,
        r#"http.host == "api.example" && http.path ~ "^/users/(?<id>\\d+)$""#,
    )
    .unwrap();
    r.add(OTHER_HOST, 10, r#"http.host == "www.example""#)
        .unwrap();
    r
}

#[test]
fn the_winner_is_named_with_the_predicates_that_decided_it() {
    let s = schema();
    let r = router(&s);
    let mut ctx = request(&s, "api.example", "GET", "/users/42");
    let why = r.explain(&mut ctx).unwrap();
    assert_eq!(why.winner, Some(USER));
    let winner = why.candidates.iter().find(|c| c.id == USER).unwrap();
    assert!(winner.matched);
    let texts: Vec<&str> = winner.predicates.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            r#"http.host == "api.example""#,
            r#"http.path ~ "^/users/(?<id>\\d+)$""#
        ]
    );
    assert!(winner.predicates.iter().all(|p| p.holds && !p.negated));
}

#[test]
fn a_candidate_that_fails_names_the_predicate_that_failed_with_its_place() {
    let s = schema();
    let r = router(&s);
    let mut ctx = request(&s, "api.example", "GET", "/users/42");
    let why = r.explain(&mut ctx).unwrap();
    let users = &why.candidates[0];
    assert_eq!(users.id, USERS, "candidates come in routing order");
    assert!(!users.matched);
    let failed = &users.predicates[0];
    assert_eq!(failed.text, r#"http.method == "POST""#);
    assert!(!failed.holds);
    assert_eq!((failed.location.line, failed.location.column), (2, 6));
    assert_eq!(
        failed.location.source_line(),
        r#"  && http.method == "POST""#
    );
    assert_eq!(failed.location.caret(), format!("     {}", "^".repeat(21)));
}

#[test]
fn a_negated_predicate_that_holds_is_what_fails_its_route() {
    let s = schema();
    let mut r = Router::new(s.clone());
    let id = Uuid::from_u128(9);
    r.add(
        id,
        1,
        r#"http.host == "api.example" && !(http.method == "GET")"#,
    )
    .unwrap();
    let mut ctx = request(&s, "api.example", "GET", "/");
    let why = r.explain(&mut ctx).unwrap();
    let p = &why.candidates[0].predicates[0];
    assert_eq!(p.text, r#"http.method == "GET""#);
    assert!(p.holds && p.negated && !p.effective());
}

#[test]
fn routes_the_index_ruled_out_are_listed_on_request_with_their_key() {
    let s = schema();
    let r = router(&s);
    let mut ctx = request(&s, "api.example", "GET", "/users/42");
    assert!(r.explain(&mut ctx).unwrap().ruled_out.is_empty());
    let why = r
        .explain_with(
            &mut ctx,
            ExplainOptions {
                ruled_out: true,
                ..ExplainOptions::default()
            },
        )
        .unwrap();
    let total = why.candidates.len() + why.ruled_out.len();
    assert_eq!(total, 3);
    for out in &why.ruled_out {
        let key = out.key.as_deref().unwrap();
        assert!(
            key.contains("http.host") || key.contains("http.method") || key.contains("http.path"),
            "{key}"
        );
    }
}

#[test]
fn matches_lists_every_matching_route_with_its_values_and_leaves_the_result_alone() {
    let s = schema();
    let mut r = router(&s);
    let all_api = Uuid::from_u128(4);
    r.add(all_api, 5, r#"http.host == "api.example""#).unwrap();
    let mut ctx = request(&s, "api.example", "GET", "/users/42");
    assert!(r.execute(&mut ctx));
    let all = r.matches(&mut ctx).unwrap();
    let ids: Vec<Uuid> = all.iter().map(|m| m.id).collect();
    assert_eq!(ids, [USER, all_api]);
    assert_eq!(
        all[0].captures,
        [
            ("0".to_owned(), "/users/42".to_owned()),
            ("1".to_owned(), "42".to_owned()),
            ("id".to_owned(), "42".to_owned())
        ]
    );
    assert_eq!(all[1].expression, r#"http.host == "api.example""#);
    assert_eq!(ctx.result().unwrap().id(), USER, "execute's result stays");
}

#[test]
fn a_context_of_another_schema_is_an_error() {
    let r = router(&schema());
    let mut foreign = request(&schema(), "api.example", "GET", "/");
    assert!(r.explain(&mut foreign).is_err());
    assert!(r.matches(&mut foreign).is_err());
}

#[test]
fn an_explanation_prints_for_people() {
    let s = schema();
    let r = router(&s);
    let mut ctx = request(&s, "api.example", "GET", "/users/42");
    let text = r.explain(&mut ctx).unwrap().to_string();
    assert!(text.starts_with(&format!("matched route {USER}")), "{text}");
    assert!(
        text.contains("http.method == \"POST\" does not hold"),
        "{text}"
    );
}

/// A route of `n` predicates `http.path ^= "/"`, joined by `&&`.
fn chain(n: usize) -> String {
    vec![r#"http.path ^= "/""#; n].join(" && ")
}

#[test]
fn explaining_a_route_of_thousands_of_predicates_is_linear_in_what_it_reports() {
    // Every predicate placed in the text used to scan the text up to it: 16,383 of them on one
    // line were 16,383 scans of 330 kB. Now the text is scanned once, and each predicate costs
    // a bounded window around it. Counted in steps of work, never timed.
    let s = schema();
    let mut r = Router::new(s.clone());
    let terms = 16_383;
    let text = chain(terms);
    r.add(USERS, 1, &text).unwrap();
    let mut ctx = request(&s, "a.example", "GET", "/x");
    let before = atc_router::diagnostic_steps();
    let why = r.explain_with(&mut ctx, ExplainOptions::UNBOUNDED).unwrap();
    let steps = atc_router::diagnostic_steps() - before;
    assert_eq!(why.candidates[0].predicates.len(), terms);
    assert!(!why.is_truncated());
    let last = &why.candidates[0].predicates[terms - 1];
    assert_eq!(&text[last.location.span.clone()], last.text);
    assert_eq!(last.location.column, text.len() - last.text.len() + 1);
    let bound = 8 * text.len() + 2_000 * terms;
    assert!(steps <= bound as u64, "{steps} steps, bound {bound}");
}

#[test]
fn a_failing_predicate_at_the_end_of_a_long_route_is_found_and_placed_in_linear_work() {
    let s = schema();
    let mut r = Router::new(s.clone());
    let text = format!(r#"{} && http.path != "/x""#, chain(4_000));
    r.add(USERS, 1, &text).unwrap();
    let mut ctx = request(&s, "a.example", "GET", "/x");
    let before = atc_router::diagnostic_steps();
    let why = r.explain(&mut ctx).unwrap();
    let steps = atc_router::diagnostic_steps() - before;
    let failed = &why.candidates[0].predicates[0];
    assert_eq!(
        (failed.index, failed.text.as_str()),
        (4_000, r#"http.path != "/x""#)
    );
    assert!(failed.location.source_line().starts_with('…'));
    assert!(steps <= 8 * text.len() as u64 + 2_000, "{steps} steps");
}

#[test]
fn the_report_is_bounded_by_the_caps_and_says_what_it_left_out() {
    let s = schema();
    let mut r = Router::new(s.clone());
    // 60 candidates that fail on their last predicate (`!=` is no index key), then the winner.
    let long = format!(r#"{} && http.path != "/x""#, chain(100));
    for i in 0..60 {
        r.add(Uuid::from_u128(100 + i), 100, &long).unwrap();
    }
    let winner = Uuid::from_u128(1000);
    let matching = format!(r#"{} && http.path == "/x""#, chain(100));
    r.add(winner, 1, &matching).unwrap();
    r.add(OTHER_HOST, 1, r#"http.host == "www.example""#)
        .unwrap();
    let mut ctx = request(&s, "a.example", "GET", "/x");

    let why = r.explain(&mut ctx).unwrap();
    let defaults = ExplainOptions::default();
    assert_eq!(why.winner, Some(winner));
    assert!(why.is_truncated());
    assert_eq!(why.candidates.len(), defaults.max_candidates + 1);
    assert_eq!(why.candidates_omitted, 61 - why.candidates.len());
    let last = why.candidates.last().unwrap();
    assert_eq!(last.id, winner, "the winner is reported past the cap");
    assert_eq!(last.predicates.len(), defaults.max_predicates);
    assert_eq!(last.predicates_omitted, 101 - defaults.max_predicates);
    for c in &why.candidates {
        assert!(c.expression_truncated && c.expression.ends_with('…'));
        assert!(c.expression.len() <= defaults.max_text_bytes + '…'.len_utf8());
    }
    let text = why.to_string();
    assert!(
        text.contains("10 more candidate(s), not shown (report truncated)"),
        "{text}"
    );
    assert!(text.contains("69 more predicate(s), not shown"), "{text}");

    let few = ExplainOptions {
        ruled_out: true,
        max_candidates: 2,
        max_ruled_out: 0,
        max_predicates: 1,
        max_text_bytes: 8,
    };
    let why = r.explain_with(&mut ctx, few).unwrap();
    assert_eq!(why.candidates.len(), 3);
    assert_eq!((why.ruled_out.len(), why.ruled_out_omitted), (0, 1));
    let p = &why.candidates[2].predicates[0];
    assert!(p.text_truncated && p.text == "http.pat…", "{p:?}");
    assert!(why
        .to_string()
        .contains("1 more route(s) ruled out by the index, not shown"));
}
