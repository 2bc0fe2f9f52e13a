//! Every documented difference between our library and Kong's `atc-router` 1.7.1, one test
//! each, asserting what Kong's library does and what ours does, with the reason in the test's
//! doc comment. `docs/kong-differences.md` lists the same differences for users.
//!
//! Anything else that differs is a bug on one side: the differential tests (`kong_diff.rs`)
//! accept exactly these differences and no others. Differences in the Lua modules, which need
//! Kong's C library and nginx to run, are tested on our side in `lua/t/binding_test.lua`; the
//! page says where in Kong's source each comes from.

mod vs_kong;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use atc_router::{Context, Error, ExprErrorKind, MatchedValue, Router, Schema, Type, Uuid, Value};

const FIELDS: &[(&str, Type)] = &[
    ("http.path", Type::String),
    ("http.host", Type::String),
    ("net.port", Type::Int),
    ("net.ip", Type::IpAddr),
];

fn ours() -> Arc<Schema> {
    let mut s = Schema::new();
    for (n, t) in FIELDS {
        s.add_field(n, *t).unwrap();
    }
    Arc::new(s)
}

fn theirs() -> kong::schema::Schema {
    let mut s = kong::schema::Schema::default();
    for (n, t) in FIELDS {
        s.add_field(n, vs_kong::kong_type(*t));
    }
    s
}

const ID: Uuid = Uuid::from_u128(0xa921_a9aa_ec0e_4cf3_a6cc_1aa5_583d_150c);

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

/// One route in both libraries, one request; (our values, Kong's values) of the result, with
/// matched values shown as `s:text`.
fn both(expr: &str, request: &[(&str, Value)]) -> (vs_kong::Values, vs_kong::Values) {
    let schema = ours();
    let mut r = Router::new(schema.clone());
    r.add(ID, 0, expr).unwrap();
    let mut ctx = Context::new(schema);
    for (f, v) in request {
        ctx.add_value(f, v.clone()).unwrap();
    }
    assert!(r.execute(&mut ctx), "{expr} matches here");
    let m = ctx.result().unwrap();
    let mine = vs_kong::Values {
        matched: FIELDS
            .iter()
            .filter_map(|(n, _)| {
                m.matched_value(n).map(|v| match v {
                    MatchedValue::String(t) => ((*n).to_owned(), format!("s:{t}")),
                    v => ((*n).to_owned(), format!("{v}")),
                })
            })
            .collect(),
        captures: m.captures_map().into_iter().collect(),
    };
    let ks = theirs();
    let mut kr = kong::router::Router::new(&ks);
    kr.add_matcher(0, ID, expr).unwrap();
    let mut kctx = kong::context::Context::new(&ks);
    for (f, v) in request {
        kctx.add_value(f, vs_kong::kong_value(v));
    }
    assert!(kr.execute(&mut kctx), "{expr} matches in Kong's library");
    let kong_values = kctx.result.as_ref().unwrap();
    let theirs = vs_kong::Values {
        matched: kong_values
            .matches
            .iter()
            .map(|(k, v)| match v {
                kong::ast::Value::String(t) => (k.clone(), format!("s:{t}")),
                v => (k.clone(), format!("{v:?}")),
            })
            .collect(),
        captures: kong_values.captures.clone().into_iter().collect(),
    };
    (mine, theirs)
}

fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Kong's library records matched values and captures in every predicate it evaluates, true
/// or not, and keeps them when the branch fails: an `&&` that fails part-way, the side of an
/// `||` that did not hold, the inside of a `!`. A gateway that strips the matched prefix can
/// then strip the wrong one. docs/language.md "Evaluation": values come only from the predicates
/// that decided the result. (The differential tests compare our results with Kong's own predicate
/// results composed that way.)
#[test]
fn kong_keeps_values_from_branches_that_did_not_decide() {
    // A failed `&&` on the `||`'s first side: its `^=` on the host leaks.
    let (mine, kong) = both(
        r#"(http.host ^= "ex" && http.path == "/x") || http.path ^= "/""#,
        &[("http.host", s("example.com")), ("http.path", s("/a"))],
    );
    assert_eq!(mine.matched, map(&[("http.path", "s:/")]));
    assert_eq!(
        kong.matched,
        map(&[("http.host", "s:ex"), ("http.path", "s:/")])
    );

    // Captures of a regex in a failed branch.
    let (mine, kong) = both(
        r#"(http.path ~ "^/(?<v>v[0-9])" && http.host == "x") || http.path ^= "/""#,
        &[("http.host", s("y")), ("http.path", s("/v1/users"))],
    );
    assert!(mine.captures.is_empty());
    assert_eq!(
        kong.captures,
        map(&[("0", "/v1"), ("1", "v1"), ("v", "v1")])
    );

    // The inside of a `!`.
    let (mine, kong) = both(
        r#"http.path ^= "/" && !(http.path ~ "^/(a)" && http.host == "x")"#,
        &[("http.host", s("y")), ("http.path", s("/a"))],
    );
    assert_eq!(
        (mine.matched, mine.captures),
        (map(&[("http.path", "s:/")]), map(&[]))
    );
    assert_eq!(kong.matched, map(&[("http.path", "s:/a")]));
    assert_eq!(kong.captures, map(&[("0", "/a"), ("1", "a")]));

    // A failed predicate over several values ("all" mode) records the values that matched
    // before the one that did not.
    let (mine, kong) = both(
        r#"http.path ~ "^/(?<n>[0-9])" || http.host == "h""#,
        &[
            ("http.path", s("/1")),
            ("http.path", s("/x")),
            ("http.host", s("h")),
        ],
    );
    assert_eq!(mine.captures, map(&[]));
    assert_eq!(kong.captures, map(&[("0", "/1"), ("1", "1"), ("n", "1")]));
}

/// An execute that matches nothing leaves Kong's context with the previous request's result
/// (`Router::execute` sets `result` only on a match), so `get_result()` after a miss returns
/// the earlier route. Ours clears the result on every execute (docs/language.md "Evaluation": a
/// failed execute leaves no result behind).
#[test]
fn kong_keeps_a_stale_result_after_a_miss() {
    let expr = r#"http.path ^= "/a""#;
    let ks = theirs();
    let mut kr = kong::router::Router::new(&ks);
    kr.add_matcher(0, ID, expr).unwrap();
    let mut kctx = kong::context::Context::new(&ks);
    kctx.add_value("http.path", kong::ast::Value::String("/a/b".into()));
    assert!(kr.execute(&mut kctx));
    // The next request, without a reset (as a caller reusing a context may do): no match,
    // but the old result stays.
    kctx.add_value("http.path", kong::ast::Value::String("/b".into()));
    assert!(!kr.execute(&mut kctx));
    assert_eq!(kctx.result.as_ref().map(|m| m.uuid), Some(ID));

    let schema = ours();
    let mut r = Router::new(schema.clone());
    r.add(ID, 0, expr).unwrap();
    let mut ctx = Context::new(schema);
    ctx.add_value("http.path", "/a/b").unwrap();
    assert!(r.execute(&mut ctx));
    ctx.add_value("http.path", "/b").unwrap();
    assert!(!r.execute(&mut ctx));
    assert!(ctx.result().is_none());
}

/// `lower(f)` compared with a literal holding uppercase letters (`==`, `^=`, `=^`,
/// `contains`) can never be true: the field is lowercased, the literal is not. Kong's library
/// accepts such a route, which then never matches; ours refuses it with an error that gives
/// the lowercase literal (docs/language.md "Types and operators": refused, with the lowercase
/// literal suggested).
#[test]
fn lower_compared_with_uppercase_is_refused_here_and_never_matches_in_kong() {
    for expr in [
        r#"lower(http.host) == "Example.com""#,
        r#"lower(http.path) ^= "/API""#,
        r#"lower(http.path) =^ "X""#,
        r#"lower(http.path) contains "É""#,
    ] {
        let e = Router::validate(&ours(), expr).unwrap_err();
        assert!(e.to_string().contains("can never match"), "{e}");
        let ks = theirs();
        let mut kr = kong::router::Router::new(&ks);
        kr.add_matcher(0, ID, expr).unwrap();
        let mut kctx = kong::context::Context::new(&ks);
        for v in [
            "Example.com",
            "example.com",
            "/API",
            "/api",
            "X",
            "x",
            "É",
            "é",
        ] {
            kctx.reset();
            kctx.add_value("http.host", kong::ast::Value::String(v.into()));
            kctx.add_value("http.path", kong::ast::Value::String(v.into()));
            assert!(!kr.execute(&mut kctx), "{expr} matched {v}");
        }
    }
}

/// Set literals (`http.path in ["/a", "/b"]`, `net.port not in [80, 443]`,
/// `net.ip in [10.0.0.0/8, 192.168.1.1]`) are an extension of ours (docs/language.md "Sets"):
/// Kong's grammar has no `[`, so its parser refuses every route that uses one, and the
/// differential tests keep such routes in our router only. For a field with one value, a set
/// means what the `||` of `==` (for `not in`, the `&&` of `!=`) means in both libraries, with the
/// same matched value.
#[test]
fn set_literals_are_an_extension_kong_refuses() {
    let cases: &[(&str, &str, &str, Value)] = &[
        (
            r#"http.path in ["/a", "/b"]"#,
            r#"http.path == "/a" || http.path == "/b""#,
            "http.path",
            s("/b"),
        ),
        (
            r#"http.path in ["/a", "/b"]"#,
            r#"http.path == "/a" || http.path == "/b""#,
            "http.path",
            s("/c"),
        ),
        (
            r#"lower(http.host) in ["a.example", "b.example"]"#,
            r#"lower(http.host) == "a.example" || lower(http.host) == "b.example""#,
            "http.host",
            s("B.Example"),
        ),
        (
            "net.port in [80, 443,]",
            "net.port == 80 || net.port == 443",
            "net.port",
            Value::Int(443),
        ),
        (
            "net.port not in [80, 443]",
            "net.port != 80 && net.port != 443",
            "net.port",
            Value::Int(8080),
        ),
        (
            "net.port not in [80, 443]",
            "net.port != 80 && net.port != 443",
            "net.port",
            Value::Int(80),
        ),
        (
            "net.ip in [10.0.0.0/8, 192.168.1.1]",
            "net.ip in 10.0.0.0/8 || net.ip in 192.168.1.1/32",
            "net.ip",
            Value::IpAddr("192.168.1.1".parse().unwrap()),
        ),
        (
            "net.ip not in [10.0.0.0/8, 192.168.1.1]",
            "net.ip not in 10.0.0.0/8 && net.ip not in 192.168.1.1/32",
            "net.ip",
            Value::IpAddr("10.2.3.4".parse().unwrap()),
        ),
    ];
    for (set, alternatives, field, value) in cases {
        assert!(
            kong::parser::parse(set).is_err(),
            "Kong's parser took {set}"
        );
        assert_eq!(vs_kong::documented_extension(set), Some("set literals"));
        assert_eq!(vs_kong::documented_extension(alternatives), None);

        let schema = ours();
        let mut r = Router::new(schema.clone());
        r.add(ID, 0, set).unwrap();
        let mut ctx = Context::new(schema);
        ctx.add_value(field, value.clone()).unwrap();
        let mine = r.execute(&mut ctx);
        let my_value = ctx
            .result()
            .and_then(|m| m.matched_value(field).map(|v| v.to_string()));

        let ks = theirs();
        let mut kr = kong::router::Router::new(&ks);
        kr.add_matcher(0, ID, alternatives).unwrap();
        let mut kctx = kong::context::Context::new(&ks);
        kctx.add_value(field, vs_kong::kong_value(value));
        let kong = kr.execute(&mut kctx);
        let kong_value = kong
            .then(|| kctx.result.as_ref().unwrap().matches.get(*field).cloned())
            .flatten()
            .map(|v| match v {
                kong::ast::Value::String(t) => t,
                kong::ast::Value::Int(i) => i.to_string(),
                v => format!("{v:?}"),
            });
        assert_eq!((mine, my_value), (kong, kong_value), "{set} for {value:?}");
    }
}

/// Kong's router keys routes by (priority, id): the same id can be added again at another
/// priority, and both stay (its Lua module then remembers only the last priority, so the
/// first can no longer be removed). docs/language.md "Routers": an id is unique within a router
/// of the core, which refuses the second add whatever its priority (the Lua binding's Kong API
/// holds a second priority under an alias: `kong_api_keys_by_priority_and_id`).
#[test]
fn an_id_is_unique_here_whatever_the_priority() {
    let ks = theirs();
    let mut kr = kong::router::Router::new(&ks);
    kr.add_matcher(1, ID, r#"http.path ^= "/a""#).unwrap();
    kr.add_matcher(2, ID, r#"http.path ^= "/b""#).unwrap();
    assert!(kr.add_matcher(2, ID, r#"http.path ^= "/c""#).is_err());

    let mut r = Router::new(ours());
    r.add(ID, 1, r#"http.path ^= "/a""#).unwrap();
    assert!(matches!(
        r.add(ID, 2, r#"http.path ^= "/b""#),
        Err(Error::DuplicateRoute(id)) if id == ID
    ));
    assert_eq!(r.len(), 1);
}

/// Ours bounds what one expression may cost (SECURITY.md): length 1 MiB, nesting 256,
/// 16,384 predicates, 10 MiB per compiled regex (the `regex` crate's default, as in Kong's
/// library) and 32 MiB for all of one expression's. Kong's library has no limits of its own
/// beyond that one, so it accepts
/// expressions ours refuses with a limit error. Its parser and tree walks recurse once per
/// nesting level and once per `&&`/`||` in a chain, so a deep enough expression overflows the
/// stack and aborts the process: the chains here need far more than a 2 MiB thread stack, so
/// Kong's side runs on a larger one.
#[test]
fn limits_refuse_here_what_kong_accepts() {
    let deep = format!("{}http.path == \"a\"{}", "(".repeat(257), ")".repeat(257));
    let long = format!("http.path == \"{}\"", "a".repeat(1024 * 1024));
    let many = vec![r#"http.path == "a""#; 16_385].join(" || ");
    // Each regex under the 10 MiB both libraries allow one, together over our 32 MiB.
    let big_regexes = (0..12)
        .map(|i| format!(r##"http.path ~ r#"\w{{200}}{i}"#"##))
        .collect::<Vec<_>>()
        .join(" || ");
    for expr in [deep, long, many, big_regexes] {
        let shown = &expr[..expr.len().min(40)];
        match Router::validate(&ours(), &expr) {
            Err(Error::Expr(e)) => assert_eq!(e.kind, ExprErrorKind::Limit, "{shown}: {e}"),
            other => panic!("{shown}: {other:?}"),
        }
        let e = expr.clone();
        let kong = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || vs_kong::kong_accepts(&theirs(), &e).map(|_| ()))
            .unwrap()
            .join()
            .unwrap();
        kong.unwrap_or_else(|e| panic!("{shown}: {e}"));
    }
}

/// Kong's parser aborts the process (`unreachable!()` in `parse_binary_operator`) when `not`
/// and `in` are separated by anything but exactly one space, although its grammar accepts it;
/// ours reads `not  in`, `not\tin` and `not\n in` as `not in` (docs/language.md "Text": any
/// whitespace), and refuses `notin` with an error. The differential tests give Kong the one-space
/// spelling.
#[test]
fn not_in_with_other_whitespace_aborts_kong() {
    for op in ["not  in", "not\tin", "not\n in", "notin"] {
        let expr = format!("net.ip {op} 10.0.0.0/8");
        let kong = catch_unwind(AssertUnwindSafe(|| kong::parser::parse(&expr).is_ok()));
        assert!(kong.is_err(), "{op:?} did not panic in Kong's parser");
        let mine = Router::validate(&ours(), &expr);
        assert_eq!(mine.is_ok(), op != "notin", "{op:?}: {mine:?}");
    }
    assert!(kong::parser::parse("net.ip not in 10.0.0.0/8").is_ok());
}

/// Kong's `Context::add_value` panics on a value of the wrong type (`value provided does not
/// match schema`) and on a field the schema does not know (`unwrap()` on `None`); through its
/// C functions the panic aborts the worker. Ours refuses both with an error and adds nothing
/// (SECURITY.md "Limits hold under attack"). (Invalid UTF-8 and invalid ids, which abort Kong's C
/// functions too, cannot be written through its Rust API; `kong_diff.rs` checks our C ABI refuses
/// them.)
#[test]
fn wrong_value_types_and_unknown_fields_abort_kong() {
    let ks = theirs();
    for (field, value) in [
        ("http.path", kong::ast::Value::Int(1)),
        ("net.port", kong::ast::Value::String("80".into())),
        ("nope", kong::ast::Value::String("x".into())),
    ] {
        let mut kctx = kong::context::Context::new(&ks);
        let r = catch_unwind(AssertUnwindSafe(|| kctx.add_value(field, value)));
        assert!(r.is_err(), "Kong took a bad value for {field}");
    }
    let mut ctx = Context::new(ours());
    assert!(ctx.add_value("http.path", 1).is_err());
    assert!(ctx.add_value("net.port", "80").is_err());
    assert!(matches!(
        ctx.add_value("nope", "x"),
        Err(Error::UnknownField(_))
    ));
    assert!(ctx.values("http.path").is_empty() && ctx.values("net.port").is_empty());
}
