//! Every error quotes at most a window of its input, whatever the input: a name, a literal or a
//! token is cut to `error::QUOTED_CHARS` characters, a source line to `error::SHOWN_CHARS`
//! around the error (SECURITY.md). An error for a 200 KB name is a few hundred bytes, not
//! 200 KB copied into a log line.

use std::sync::Arc;

use atc_router::error::QUOTED_CHARS;
use atc_router::{Context, Limits, Router, Schema, Type, Uuid};

/// Comfortably above the longest message with two quoted windows and a source line window
/// (4 bytes per character at worst), far below the inputs.
const MAX_ERROR_BYTES: usize = 2048;

fn check(what: &str, e: impl std::fmt::Display) {
    let text = e.to_string();
    assert!(
        text.len() <= MAX_ERROR_BYTES,
        "{what}: {} bytes of error: {}…",
        text.len(),
        &text[..300]
    );
}

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("http.headers.*", Type::String).unwrap();
    s.add_field("net.dst.port", Type::Int).unwrap();
    s.add_field("net.src.ip", Type::IpAddr).unwrap();
    Arc::new(s)
}

fn long(c: char) -> String {
    std::iter::repeat_n(c, 200_000).collect()
}

#[test]
fn schema_and_context_errors_quote_a_window_of_the_name() {
    let mut s = Schema::new();
    check(
        "invalid name",
        s.add_field(&format!("1{}", long('a')), Type::Int)
            .unwrap_err(),
    );
    let name = format!("a{}", long('b'));
    s.add_field(&name, Type::Int).unwrap();
    check("duplicate", s.add_field(&name, Type::Int).unwrap_err());
    check("duplicate wildcard", {
        s.add_field(&format!("{name}.*"), Type::Int).unwrap();
        s.add_field(&format!("{name}.*"), Type::Int).unwrap_err()
    });

    let schema = schema();
    let mut ctx = Context::new(schema.clone());
    check(
        "unknown field",
        ctx.add_value(&format!("x{}", long('é')), "v").unwrap_err(),
    );
    // A route on a very long header name, then a wrong value type and too many values.
    let header = format!("http.headers.h{}", long('x'));
    let mut router = Router::new(schema.clone());
    router
        .add(Uuid::from_u128(1), 1, &format!(r#"{header} == "v""#))
        .unwrap();
    check("type mismatch", ctx.add_value(&header, 1).unwrap_err());
    for _ in 0..Limits::default().max_values_per_field {
        ctx.add_value(&header, "v").unwrap();
    }
    check("values per field", ctx.add_value(&header, "v").unwrap_err());
}

#[test]
fn expression_errors_quote_a_window_of_the_offending_token() {
    let schema = schema();
    let mut router = Router::new(schema.clone());
    let cases = [
        format!(r#"x{} == "v""#, long('y')),
        format!(r#"{}(http.path) == "v""#, long('t')),
        format!("net.dst.port == 1{}", long('9')),
        format!("net.src.ip == 1.2.3.{}", long('4')),
        format!("net.src.ip in 10.0.0.0/{}", long('8')),
        format!("net.src.ip in 10.0.0.1/8 && http.path == \"{}\"", long('z')),
        format!("net.src.ip == ::ffff:1.2.3.4/{}", long('1')),
        format!(r#"lower(http.path) == "{}""#, long('Q')),
        format!(r#"net.dst.port == "{}""#, long('s')),
        format!(r#"http.path ~ "({}""#, long('r')),
        format!(r#"http.path == "a" {}"#, long('k')),
        format!(r#"!{} && http.path == "a""#, long('n')),
        format!(r#"http.path == {}"#, long('v')),
        format!(r#"http.path == 0x{}"#, long('g')),
    ];
    for src in &cases {
        let e = router.add(Uuid::from_u128(1), 1, src).unwrap_err();
        check(&src[..40], &e);
        check(&src[..40], Router::validate(&schema, src).unwrap_err());
    }
}

#[test]
fn the_wildcard_limit_error_quotes_a_window_of_the_name() {
    let mut s = Schema::with_limits(Limits {
        max_wildcard_fields: 1,
        ..Limits::default()
    });
    s.add_field("h.*", Type::String).unwrap();
    let s = Arc::new(s);
    let mut router = Router::new(s);
    router.add(Uuid::from_u128(1), 1, r#"h.a == "v""#).unwrap();
    let e = router
        .add(
            Uuid::from_u128(2),
            1,
            &format!(r#"h.b{} == "v""#, long('c')),
        )
        .unwrap_err();
    check("wildcard limit", &e);
    assert!(e
        .to_string()
        .contains(&format!("h.b{}…", "c".repeat(QUOTED_CHARS - 3))));
}
