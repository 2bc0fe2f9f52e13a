//! Regexes against long values, ours next to Kong's atc-router 1.7.1 in the same run: what an
//! attacker sends (an 8 KB path under nginx's default URI limit, a 1 MB or 10 MB header) must
//! cost what it costs the `regex` crate, not an NFA simulation per byte and per regex.
//!
//! `cargo bench -p atc-benches --bench long_values` (each case is one route; the request's one
//! value is the long text; times are per execute).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use atc_router::{Context, Router, Schema, Type, Uuid};
use criterion::{criterion_group, criterion_main, Criterion};

struct Case {
    name: &'static str,
    expression: String,
    value: String,
}

fn cases() -> Vec<Case> {
    let ors: Vec<String> = (0..64)
        .map(|i| format!(r##"http.path ~ r#"/seg{i}/[a-z0-9]+\.json$"#"##))
        .collect();
    let path_8k: String = (0..8192)
        .map(|i| if i % 7 == 0 { '/' } else { 'a' })
        .collect();
    vec![
        Case {
            name: "64-unanchored-8KB-miss",
            expression: ors.join(" || "),
            value: path_8k,
        },
        Case {
            name: "anchored-class-run-1MB",
            expression: r#"http.path ~ "^/a[a-z]*z$""#.to_owned(),
            value: format!("/a{}", "b".repeat(1 << 20)),
        },
        Case {
            name: "anchored-class-run-10MB",
            expression: r#"http.path ~ "^/a[a-z]*z$""#.to_owned(),
            value: format!("/a{}", "b".repeat(10 << 20)),
        },
        Case {
            name: "unanchored-captures-10MB",
            expression: r##"http.path ~ r#"/users/(?<id>\d+)$"#"##.to_owned(),
            value: format!("/a{}", "b".repeat(10 << 20)),
        },
    ]
}

fn long_values(c: &mut Criterion) {
    let mut schema = Schema::new();
    schema.add_field("http.path", Type::String).unwrap();
    let schema = Arc::new(schema);
    let mut kong_schema = kong::schema::Schema::default();
    kong_schema.add_field("http.path", kong::ast::Type::String);
    let mut g = c.benchmark_group("long-values");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(2));
    for case in cases() {
        let mut router = Router::new(schema.clone());
        router.add(Uuid::from_u128(1), 1, &case.expression).unwrap();
        let mut ctx = Context::new(schema.clone());
        ctx.add_value("http.path", case.value.as_str()).unwrap();
        let ours = router.execute(&mut ctx);
        g.bench_function(format!("{}/ours", case.name), |b| {
            b.iter(|| black_box(router.execute(&mut ctx)))
        });

        let mut kong_router = kong::router::Router::new(&kong_schema);
        kong_router
            .add_matcher(1, uuid::Uuid::from_u128(1), &case.expression)
            .unwrap();
        let mut kong_ctx = kong::context::Context::new(&kong_schema);
        kong_ctx.add_value("http.path", kong::ast::Value::String(case.value.clone()));
        assert_eq!(kong_router.execute(&mut kong_ctx), ours, "{}", case.name);
        g.bench_function(format!("{}/kong", case.name), |b| {
            b.iter(|| black_box(kong_router.execute(&mut kong_ctx)))
        });
    }
    g.finish();
}

criterion_group!(benches, long_values);
criterion_main!(benches);
