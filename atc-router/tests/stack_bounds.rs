//! Tables shaped to make a recursive structure deep, built, matched, updated, linted, explained
//! and dropped on a thread with a small stack (SECURITY.md, "No table overflows the stack").
//!
//! A gateway's worker thread has the stack its host gives it (8 MiB for an nginx worker, often
//! 2 MiB for a thread); no table may need more than a fixed amount of it, whatever its size. So
//! every case here runs on [`STACK`] bytes, in a debug build, with the number of routes, fields,
//! keys or segments that would have needed a stack frame each.

use std::sync::Arc;

use atc_router::{Context, Limits, RouteSpec, Router, Schema, SyncMode, Type, Uuid};

/// The stack each case runs on.
const STACK: usize = 256 * 1024;

fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(
            std::env::var("ATC_TEST_STACK_KIB")
                .ok()
                .and_then(|k| k.parse::<usize>().ok())
                .map_or(STACK, |k| k * 1024),
        )
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the case panicked (a stack overflow aborts the process instead)");
}

fn schema(limits: Limits) -> Arc<Schema> {
    let mut s = Schema::with_limits(limits);
    s.add_field("http.host", Type::String).unwrap();
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("http.method", Type::String).unwrap();
    s.add_field("net.dst.port", Type::Int).unwrap();
    s.add_field("net.src.ip", Type::IpAddr).unwrap();
    s.add_field("http.headers.*", Type::String).unwrap();
    Arc::new(s)
}

/// A request's `(field, value)` pairs, and the index of the expression expected to win.
type Request = (Vec<(String, String)>, Option<usize>);

fn wide_limits(fields: usize) -> Limits {
    Limits {
        max_wildcard_fields: fields.max(Limits::default().max_wildcard_fields),
        ..Limits::default()
    }
}

/// Builds `exprs` route by route and by one sync, matches `requests` (expression index
/// expected to win, or none), lints, explains one request, removes half and drops.
fn exercise(limits: Limits, exprs: Vec<String>, requests: Vec<Request>) {
    let s = schema(limits);
    let specs: Vec<RouteSpec<'_>> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| RouteSpec {
            id: Uuid::from_u128(i as u128 + 1),
            priority: i as u64,
            expression: e,
        })
        .collect();
    let mut synced = Router::with_limits(s.clone(), limits);
    synced.sync(&specs, SyncMode::AllOrNothing).expect("sync");
    let mut added = Router::with_limits(s.clone(), limits);
    for sp in &specs {
        added.add(sp.id, sp.priority, sp.expression).expect("add");
    }
    let mut ctx = Context::new(s.clone());
    for (values, want) in &requests {
        for r in [&synced, &added] {
            ctx.reset();
            for (f, v) in values {
                let value = match s.field_type(f) {
                    Some(Type::Int) => atc_router::Value::Int(v.parse().unwrap()),
                    Some(Type::IpAddr) => atc_router::Value::IpAddr(v.parse().unwrap()),
                    _ => atc_router::Value::String(v.clone()),
                };
                ctx.add_value(f, value).unwrap();
            }
            r.execute(&mut ctx);
            let got = ctx.result().map(|m| m.id());
            assert_eq!(
                got,
                want.map(|i| Uuid::from_u128(i as u128 + 1)),
                "{values:?}"
            );
        }
    }
    let _ = synced.explain(&mut ctx);
    let _ = synced.lint();
    for sp in specs.iter().step_by(2) {
        assert!(added.remove(sp.id));
    }
    let half: Vec<RouteSpec<'_>> = specs.iter().skip(1).step_by(2).cloned().collect();
    synced
        .sync(&half, SyncMode::AllOrNothing)
        .expect("sync half");
    drop(synced);
    drop(added);
}

fn header(name: &str, v: &str) -> (String, String) {
    (format!("http.headers.{name}"), v.to_owned())
}

#[test]
fn a_field_per_route() {
    const N: usize = 100_000;
    on_small_stack(|| {
        let exprs = (0..N)
            .map(|i| format!(r#"http.headers.x_tenant_{i} == "yes""#))
            .collect();
        let requests = vec![
            (vec![header("x_tenant_7", "yes")], Some(7)),
            (vec![header("x_tenant_7", "no")], None),
            (
                vec![header("x_tenant_7", "yes"), header("x_tenant_99999", "yes")],
                Some(99_999),
            ),
            (vec![header("x_other", "yes")], None),
        ];
        exercise(wide_limits(N), exprs, requests);
    });
}

#[test]
fn many_keys_on_one_field_of_every_kind() {
    const N: usize = 20_000;
    on_small_stack(|| {
        let exprs = (0..N)
            .map(|i| match i % 8 {
                0 => format!(r#"http.host == "h{i}.example.com""#),
                1 => format!(r#"http.path ^= "/p{i}/""#),
                2 => format!(r#"http.host =^ ".d{i}.example.net""#),
                3 => format!(r#"http.path contains "/c{i}/""#),
                4 => format!("net.dst.port == {}", 10_000 + i),
                5 => format!("net.src.ip in 10.{}.{}.0/24", i / 256 % 256, i % 256),
                6 => format!(r#"http.path ~ "^/r{i}/(?<id>\\d+)$""#),
                _ => format!(r#"http.method in ["M{i}", "N{i}"]"#),
            })
            .collect();
        let requests = vec![
            (vec![("http.host".into(), "h8.example.com".into())], Some(8)),
            (vec![("http.path".into(), "/p9/x".into())], Some(9)),
            (
                vec![("http.host".into(), "a.d10.example.net".into())],
                Some(10),
            ),
            (vec![("http.path".into(), "/x/c11/y".into())], Some(11)),
            (vec![("net.dst.port".into(), "10012".into())], Some(12)),
            (vec![("http.path".into(), "/r14/77".into())], Some(14)),
            (vec![("http.method".into(), "N15".into())], Some(15)),
            (vec![("http.path".into(), "/nothing".into())], None),
        ];
        exercise(Limits::default(), exprs, requests);
    });
}

/// Keys that are prefixes of one another (`/a`, `/a/a`, …; `b`, `bb`, …) make radix and
/// segment trees as deep as the keys are long; exact paths of thousands of segments make a
/// path pattern as deep.
#[test]
fn keys_nested_in_one_another_and_very_long_paths() {
    const N: usize = 600;
    on_small_stack(|| {
        let mut exprs: Vec<String> = Vec::new();
        for i in 1..=N {
            exprs.push(format!(r#"http.path ^= "{}""#, "/a".repeat(i)));
            exprs.push(format!(r#"http.host =^ "{}""#, "b".repeat(i)));
            exprs.push(format!(r#"http.headers.x_p ^= "{}""#, "c".repeat(i)));
        }
        let long = "/s".repeat(20_000);
        exprs.push(format!(r#"http.path == "{long}/1""#));
        exprs.push(format!(r#"http.path == "{long}/2""#));
        let n = exprs.len();
        let requests = vec![
            // The longest prefix is the last of its kind (highest priority).
            (
                vec![("http.path".into(), "/a".repeat(N + 5))],
                Some(3 * (N - 1)),
            ),
            (vec![("http.host".into(), "b".repeat(3))], Some(3 * 2 + 1)),
            (vec![("http.path".into(), format!("{long}/2"))], Some(n - 1)),
            (vec![("http.path".into(), format!("{long}/3"))], None),
        ];
        exercise(Limits::default(), exprs, requests);
    });
}

/// Routes that agree on the keys of one field after another, so that the index splits under a
/// split under a split, each by a path of many segments: the deepest tree a table can make.
#[test]
fn splits_nested_as_deep_as_the_index_goes() {
    const FIELDS: usize = 10;
    on_small_stack(|| {
        let deep = "/a".repeat(30);
        let exprs = (0..1usize << FIELDS)
            .map(|i| {
                (0..FIELDS)
                    .map(|j| format!(r#"http.headers.h{j} ^= "{deep}/{}/""#, (i >> j) & 1))
                    .collect::<Vec<_>>()
                    .join(" && ")
            })
            .collect();
        let request = |i: usize| {
            (0..FIELDS)
                .map(|j| header(&format!("h{j}"), &format!("{deep}/{}/x", (i >> j) & 1)))
                .collect::<Vec<_>>()
        };
        let requests = vec![(request(5), Some(5)), (request(1000), Some(1000))];
        exercise(Limits::default(), exprs, requests);
    });
}

/// Expressions nested as deep as the parser allows, alone and as a table.
#[test]
fn maximal_nesting() {
    on_small_stack(|| {
        let depth = Limits::HARD_MAX_DEPTH;
        let expr = |i: usize| {
            format!(
                "{}http.path == \"/n{i}\"{}",
                "(".repeat(depth - 1),
                ")".repeat(depth - 1)
            )
        };
        // An even number of negations: the route matches its own path.
        let nots = (depth / 2 - 1) & !1;
        let notted = |i: usize| {
            format!(
                "{}http.path == \"/m{i}\"{}",
                "!(".repeat(nots),
                ")".repeat(nots)
            )
        };
        // `a && (b || (c && (d || …)))`: a program nested as deep, `&&` and `||` in turn.
        let alternating = |i: usize| {
            let mut e = format!("http.path == \"/z{i}\"");
            for level in 0..depth - 1 {
                let op = if level % 2 == 0 { "||" } else { "&&" };
                e = format!("http.path == \"/z{i}\" {op} ({e})");
            }
            e
        };
        let exprs = (0..50)
            .map(expr)
            .chain((0..50).map(notted))
            .chain((0..50).map(alternating))
            .collect();
        let requests = vec![
            (vec![("http.path".into(), "/n7".into())], Some(7)),
            (vec![("http.path".into(), "/m7".into())], Some(57)),
            (vec![("http.path".into(), "/z7".into())], Some(107)),
            (vec![("http.path".into(), "/x".into())], None),
        ];
        exercise(Limits::default(), exprs, requests);
        // A syntax error at the innermost level: the reader that words errors reads it all.
        let s = schema(Limits::default());
        let bad = format!(
            "{}http.path == {}",
            "(".repeat(depth - 1),
            ")".repeat(depth - 1)
        );
        let err = Router::new(s).add(Uuid::from_u128(1), 1, &bad).unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    });
}
