//! RSS of request loops that carry a new header name in every request (see
//! `tests/support/context_loops.rs`), ours through the C ABI and Kong's atc-router 1.7.1 through
//! its Rust API, each loop in a process of its own so that one's memory cannot hide another's:
//!
//!     scripts/rss-check contexts [REQUESTS]        # default 1,000,000, release build
//!
//! Fails (exit 1) when one of our loops grows by more than 10% after its first tenth.

#[path = "../tests/support/context_loops.rs"]
mod context_loops;
#[path = "../tests/support/rss.rs"]
#[allow(dead_code)]
mod rss;

use std::process::Command;

use context_loops::{Loop, Ours};
use rss::{mib, rss_bytes};

/// Runs one loop and prints `start warm end` RSS in bytes.
fn child(library: &str, kind: Loop, requests: usize) {
    let warm_at = requests / 10;
    let mut warm = 0;
    let start;
    match library {
        "ours" => {
            let ours = Ours::new();
            start = rss_bytes();
            ours.run(kind, requests, |i| {
                if i == warm_at {
                    warm = rss_bytes();
                }
            });
        }
        _ => {
            let mut schema = kong::schema::Schema::default();
            schema.add_field("http.path", kong::ast::Type::String);
            schema.add_field("http.headers.*", kong::ast::Type::String);
            let mut router = kong::router::Router::new(&schema);
            for i in 0..8u128 {
                let expr = format!(r#"http.path ^= "/" && http.headers.x_route_{i} == "yes""#);
                router
                    .add_matcher(1, uuid::Uuid::from_u128(i), &expr)
                    .unwrap();
            }
            start = rss_bytes();
            let mut reused = kong::context::Context::new(&schema);
            for i in 0..requests {
                let mut fresh;
                let ctx = match kind {
                    Loop::Reused => {
                        reused.reset();
                        &mut reused
                    }
                    Loop::Fresh => {
                        fresh = kong::context::Context::new(&schema);
                        &mut fresh
                    }
                };
                ctx.add_value("http.path", kong::ast::Value::String("/api/items".into()));
                ctx.add_value(
                    &format!("http.headers.x_random_{i}"),
                    kong::ast::Value::String("v".into()),
                );
                assert!(!router.execute(ctx));
                if i == warm_at {
                    warm = rss_bytes();
                }
            }
        }
    }
    println!("{start} {warm} {}", rss_bytes());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [library, kind, n] = &args[..] {
        let kind = if kind == "reused" {
            Loop::Reused
        } else {
            Loop::Fresh
        };
        return child(library, kind, n.parse().expect("a request count"));
    }
    let requests: usize = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let me = std::env::current_exe().expect("this program's path");
    println!(
        "rss-check contexts: {requests} requests, each with a header name no request used before"
    );
    println!(
        "  {:<28} {:>10} {:>12} {:>10} {:>8}",
        "loop", "start", "after 1/10", "end", "growth"
    );
    let mut failed = false;
    for library in ["ours", "kong"] {
        for kind in ["reused", "fresh"] {
            let out = Command::new(&me)
                .args([library, kind, &requests.to_string()])
                .output()
                .expect("run a loop");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let v: Vec<u64> = text
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let (start, warm, end) = (v[0], v[1], v[2]);
            let growth = (end as f64 - warm as f64) / warm as f64 * 100.0;
            println!(
                "  {:<28} {:>7.1} MiB {:>9.1} MiB {:>7.1} MiB {:>+7.1}%",
                format!("{library}, {kind} context"),
                mib(start),
                mib(warm),
                mib(end),
                growth
            );
            failed |= library == "ours" && growth > 10.0;
        }
    }
    if failed {
        eprintln!("rss-check contexts: FAILED: one of our loops grew by more than 10%");
        std::process::exit(1);
    }
}
