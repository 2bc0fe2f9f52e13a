//! Routes a few requests through a small gateway-like table and prints what matched.
//!
//! Run with `cargo run -p atc-router --example route`.

use std::sync::Arc;

use atc_router::{Context, Router, Schema, Type, Uuid};

fn main() -> Result<(), atc_router::Error> {
    let mut schema = Schema::new();
    schema.add_field("http.method", Type::String)?;
    schema.add_field("http.host", Type::String)?;
    schema.add_field("http.path", Type::String)?;
    schema.add_field("http.headers.*", Type::String)?;
    let schema = Arc::new(schema);

    let routes = [
        (
            1,
            300,
            r##"http.host == "api.example.com" && http.path ~ r#"^/users/(?<id>\d+)$"#"##,
        ),
        (
            2,
            200,
            r#"http.host == "api.example.com" && (http.path ^= "/v1/orders" || http.path ^= "/v1")"#,
        ),
        (
            3,
            150,
            r#"any(lower(http.headers.x_version)) == "v2" && http.path ^= "/v1""#,
        ),
        (
            4,
            100,
            r#"http.host =^ ".tenant.example.com" && (http.method == "GET" || http.method == "HEAD")"#,
        ),
        (5, 0, r#"http.path ^= "/""#),
    ];
    let mut router = Router::new(schema.clone());
    for (id, priority, expr) in routes {
        router.add(Uuid::from_u128(id), priority, expr)?;
    }
    // A route with a mistake is rejected with a pointed message.
    if let Err(e) = router.add(
        Uuid::from_u128(9),
        1,
        r#"http.path ^= "/a" && http.port == 80"#,
    ) {
        println!("rejected route:\n{e}\n");
    }

    let requests: [&[(&str, &str)]; 5] = [
        &[("http.host", "api.example.com"), ("http.path", "/users/42")],
        &[
            ("http.host", "api.example.com"),
            ("http.path", "/v1/orders/7"),
        ],
        &[
            ("http.host", "other.com"),
            ("http.path", "/v1/x"),
            ("http.headers.x_version", "V2"),
        ],
        &[
            ("http.host", "a.tenant.example.com"),
            ("http.method", "HEAD"),
            ("http.path", "/q"),
        ],
        &[
            ("http.host", "a.tenant.example.com"),
            ("http.method", "POST"),
            ("http.path", "/q"),
        ],
    ];
    let mut ctx = Context::new(schema);
    for request in requests {
        ctx.reset();
        for (field, value) in request {
            ctx.add_value(field, *value)?;
        }
        print!("{request:?}\n  -> ");
        router.execute(&mut ctx);
        match ctx.result() {
            Some(m) => {
                let path = m.matched_value("http.path").map(|v| v.to_string());
                let mut caps: Vec<_> = m.captures_map().into_iter().collect();
                caps.sort();
                println!(
                    "route {} (matched path {path:?}, captures {caps:?})",
                    m.id().as_u128()
                );
            }
            None => println!("no route"),
        }
    }
    Ok(())
}
