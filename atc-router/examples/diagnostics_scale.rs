//! How lint and explain scale with the table and with a route's predicates: the tables of the
//! issue "every diagnostic is bounded", timed, with the size of what they report.
//!
//! Run with `cargo run --release -p atc-router --example diagnostics_scale -- [lint N] [explain]`
//! (both, with N = 10,000, when no argument is given).

use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::{Context, Router, Schema, Type, Uuid};

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    s.add_field("http.path", Type::String).unwrap();
    Arc::new(s)
}

fn router(texts: impl Iterator<Item = String>) -> Router {
    let mut r = Router::new(schema());
    for (i, text) in texts.enumerate() {
        r.add(Uuid::from_u128(i as u128 + 1), 1, &text).unwrap();
    }
    r
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// A table's name, and the text of its route number `i`.
type Table = (&'static str, fn(usize) -> String);

fn lint(n: usize) {
    let tables: [Table; 3] = [
        ("identical", |_| r#"http.path ^= "/api""#.to_owned()),
        ("overlapping at one priority", |i| {
            format!(r#"http.path ^= "/api" && http.path != "/none/{i}""#)
        }),
        ("nested prefixes", |i| match i {
            0 => r#"http.path ^= "/""#.to_owned(),
            i => format!(r#"http.path ^= "/a/{i}""#),
        }),
    ];
    for (name, text) in &tables {
        let r = router((0..n).map(text));
        let (findings, took) = timed(|| r.lint());
        let bytes: usize = findings.iter().map(|f| f.to_string().len() + 1).sum();
        println!(
            "lint, {n} routes, {name}: {took:.2?}, {} findings, {bytes} bytes as text",
            findings.len()
        );
    }
}

fn explain() {
    let terms = 16_383;
    let text = vec![r#"http.path ^= "/""#; terms].join(" && ");
    for routes in [1, 100] {
        let r = router(std::iter::repeat_n(text.clone(), routes));
        let mut ctx = Context::new(r.schema().clone());
        ctx.add_value("http.path", "/x").unwrap();
        let rounds = 20;
        let ((), exec) = timed(|| {
            for _ in 0..rounds {
                assert!(r.execute(&mut ctx));
            }
        });
        let (_, parse) = timed(|| atc_router::parse(&text).unwrap());
        let (why, took) = timed(|| r.explain(&mut ctx).unwrap());
        let (report, shown) = timed(|| why.to_string());
        println!(
            "explain, {routes} route(s) of {terms} `&&` terms: execute {:.3?}, parse {parse:.3?}, \
             explain {took:.2?}, report {} bytes (written in {shown:.2?})",
            exec / rounds,
            report.len()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = |i: usize| {
        args.get(i + 1)
            .and_then(|a| a.parse().ok())
            .unwrap_or(10_000)
    };
    match args.first().map(String::as_str) {
        Some("lint") => lint(n(0)),
        Some("explain") => explain(),
        _ => {
            lint(10_000);
            explain();
        }
    }
}
