//! Resource limits under attack (SECURITY.md, "Limits hold under attack"): every documented limit,
//! exercised through the public API a gateway calls (`Router::add`, `Router::validate`,
//! `Context::add_value`, `Schema::resolve`), each giving a clear error that names the limit, never a crash, a stack
//! overflow or unbounded memory. Parser-level tests of length, depth and predicate count are in
//! tests/syntax.rs; these check the same limits at the router and the ones syntax.rs does not
//! cover: compiled regex size, regexes per expression, values per field, wildcard field names.

use std::sync::Arc;

use atc_router::{Context, Error, ExprError, ExprErrorKind, Limits, Router, Schema, Type, Uuid};

fn schema_with(limits: Limits) -> Arc<Schema> {
    let mut s = Schema::with_limits(limits);
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("net.dst.port", Type::Int).unwrap();
    s.add_field("p", Type::Int).unwrap();
    s.add_field("http.headers.*", Type::String).unwrap();
    Arc::new(s)
}

fn schema() -> Arc<Schema> {
    schema_with(Limits::default())
}

/// Adds `src` to a fresh router with `limits` and returns the expression error, checking that
/// it is a limit error, that its message has every one of `words`, that `Router::validate`
/// reports the same error, and that the router is left empty.
fn add_limit_error(src: &str, limits: Limits, words: &[&str]) -> ExprError {
    let schema = schema_with(limits);
    let mut router = Router::with_limits(schema.clone(), limits);
    let e = match router.add(Uuid::from_u128(1), 1, src) {
        Err(Error::Expr(e)) => e,
        other => panic!("expected an expression error, got {other:?}"),
    };
    assert_eq!(e.kind, ExprErrorKind::Limit, "{e}");
    for w in words {
        assert!(e.message.contains(w), "`{w}` not in: {}", e.message);
    }
    assert!(router.is_empty(), "a refused route was added");
    assert_eq!(
        router.regex_count(),
        0,
        "a refused route left regexes behind"
    );
    let v = Router::validate_with_limits(&schema, src, &limits).unwrap_err();
    assert_eq!(v, Error::Expr(e.clone()), "validate and add disagree");
    // The rendering names the position (docs/language.md "Errors") and stays short even for huge
    // inputs.
    let shown = e.to_string();
    assert!(shown.starts_with(&format!("line {}, column {}: ", e.line, e.column)));
    assert!(shown.len() < 1024, "{} bytes of error", shown.len());
    e
}

fn regex_pred(re: &str) -> String {
    format!("http.path ~ {}", atc_router::Value::String(re.into()))
}

#[test]
fn the_defaults_are_the_documented_ones() {
    // SECURITY.md and the `Limits` docs state these numbers; keep them in step.
    let d = Limits::default();
    assert_eq!(d.max_expression_len, 1024 * 1024);
    assert_eq!(d.max_depth, 256);
    assert_eq!(Limits::HARD_MAX_DEPTH, 256);
    assert_eq!(d.max_predicates, 16_384);
    assert_eq!(d.max_regexes, 16_384);
    assert_eq!(d.regex_size_limit, 10 * 1024 * 1024);
    assert_eq!(d.regex_total_size_limit, 32 * 1024 * 1024);
    assert_eq!(d.max_values_per_field, 1024);
    assert_eq!(d.max_wildcard_fields, 65_536);
}

mod regex_size {
    use super::*;

    #[test]
    fn a_regex_too_large_once_compiled_is_a_limit_error_naming_the_limit() {
        // 10^6 repetitions of one byte: tiny as text, a million NFA states once compiled.
        let src = regex_pred("a{1000}{1000}");
        let e = add_limit_error(
            &src,
            Limits::default(),
            &["regex is too large once compiled", "10485760 bytes"],
        );
        // The caret is under the literal.
        assert_eq!(&src[e.span.clone()], r#""a{1000}{1000}""#);
    }

    #[test]
    fn other_exploding_regexes_are_refused_the_same_way() {
        // Unicode classes make each repetition large; counted repetitions multiply.
        for re in [
            r"\w{1000}",
            r"(?:\p{L}){5000}",
            "[a-z]{900}{900}",
            "(?i)a{1000}{1000}",
        ] {
            add_limit_error(
                &regex_pred(re),
                Limits::default(),
                &["regex is too large once compiled", "10485760 bytes"],
            );
        }
    }

    #[test]
    fn the_limit_is_configurable_and_a_regex_under_it_compiles() {
        let limits = Limits {
            regex_size_limit: 64 * 1024,
            ..Limits::default()
        };
        add_limit_error(
            &regex_pred("^/a{100}{100}"),
            limits,
            &["regex is too large once compiled", "65536 bytes"],
        );
        let mut router = Router::with_limits(schema_with(limits), limits);
        router
            .add(Uuid::from_u128(1), 1, &regex_pred(r"^/users/(?<id>\d+)$"))
            .unwrap();
        assert_eq!(router.regex_count(), 1);
    }

    #[test]
    fn a_regex_that_does_not_parse_is_a_semantic_error_not_a_limit() {
        let mut router = Router::new(schema());
        let Err(Error::Expr(e)) = router.add(Uuid::from_u128(1), 1, &regex_pred("a{4294967296}"))
        else {
            panic!("a repetition count past u32 must be refused");
        };
        assert_eq!(e.kind, ExprErrorKind::Semantic, "{e}");
        assert!(e.message.starts_with("invalid regex"), "{e}");
    }
}

mod regex_count {
    use super::*;

    fn regexes(n: usize) -> String {
        (0..n)
            .map(|i| regex_pred(&format!("^/r{i}/[0-9]+$")))
            .collect::<Vec<_>>()
            .join(" || ")
    }

    fn at_most(n: usize) -> Limits {
        Limits {
            max_regexes: n,
            ..Limits::default()
        }
    }

    #[test]
    fn a_route_with_a_thousand_regex_paths_loads_by_default() {
        let mut router = Router::new(schema());
        router.add(Uuid::from_u128(1), 1, &regexes(1000)).unwrap();
        assert_eq!(router.regex_count(), 1000);
        let mut ctx = Context::new(router.schema().clone());
        ctx.add_value("http.path", "/r999/42").unwrap();
        assert!(router.execute(&mut ctx));
    }

    #[test]
    fn the_limit_is_configurable_and_points_at_the_first_regex_over_it() {
        let mut router = Router::with_limits(schema_with(at_most(64)), at_most(64));
        router.add(Uuid::from_u128(1), 1, &regexes(64)).unwrap();
        let src = regexes(65);
        let e = add_limit_error(
            &src,
            at_most(64),
            &["too many regexes in one expression", "limit: 64"],
        );
        assert_eq!(&src[e.span.clone()], r#""^/r64/[0-9]+$""#);
    }

    #[test]
    fn the_same_regex_counts_each_time_it_is_written() {
        // The limit bounds the work of one route, not the distinct patterns.
        let src = [regex_pred("^a"), regex_pred("^a"), regex_pred("^a")].join(" && ");
        add_limit_error(&src, at_most(2), &["too many regexes", "limit: 2"]);
    }

    #[test]
    fn the_limit_is_per_expression_not_per_router() {
        let mut router = Router::with_limits(schema_with(at_most(64)), at_most(64));
        for r in 0..4u128 {
            let src = (0..64)
                .map(|i| regex_pred(&format!("^/t{r}/{i}/")))
                .collect::<Vec<_>>()
                .join(" || ");
            router.add(Uuid::from_u128(r + 1), 1, &src).unwrap();
        }
        assert_eq!(router.regex_count(), 256);
    }

    #[test]
    fn the_compiled_size_of_all_regexes_of_a_route_together_is_bounded() {
        // Each regex is well under the per-regex limit; together they are not.
        let limits = Limits {
            regex_total_size_limit: 64 * 1024,
            ..Limits::default()
        };
        let src = (0..64)
            .map(|i| regex_pred(&format!(r"^/r{i}/\w+/\w+$")))
            .collect::<Vec<_>>()
            .join(" || ");
        let e = add_limit_error(
            &src,
            limits,
            &["too large once compiled together", "65536 bytes"],
        );
        assert!(e.span.start > 0, "it points at the regex that went over");
    }
}

mod expression_shape {
    //! Length, depth and predicate count, through `Router::add` (the parser-level tests are in
    //! tests/syntax.rs).
    use super::*;

    #[test]
    fn an_expression_over_1_mib_is_refused_before_parsing() {
        let src = format!(r#"http.path == "{}""#, "a".repeat(1024 * 1024));
        add_limit_error(
            &src,
            Limits::default(),
            &["expression is too long", "1048576 bytes"],
        );
    }

    #[test]
    fn a_kong_style_route_of_5000_hosts_and_paths_loads() {
        // What Kong's compatible flavour writes for one route with many hosts and paths.
        let hosts = (0..2500)
            .map(|i| format!(r#"http.host == "h{i}.example.com""#))
            .collect::<Vec<_>>()
            .join(" || ");
        let paths = (0..2500)
            .map(|i| format!(r#"http.path ^= "/p{i}/""#))
            .collect::<Vec<_>>()
            .join(" || ");
        let mut s = Schema::new();
        s.add_field("http.host", Type::String).unwrap();
        s.add_field("http.path", Type::String).unwrap();
        let s = Arc::new(s);
        let mut router = Router::new(s.clone());
        let src = format!("({hosts}) && ({paths})");
        router.add(Uuid::from_u128(1), 1, &src).unwrap();
        let mut ctx = Context::new(s);
        ctx.add_value("http.host", "h2499.example.com").unwrap();
        ctx.add_value("http.path", "/p1234/x").unwrap();
        assert!(router.execute(&mut ctx));
        assert!(router.execute_reference(&mut ctx));
    }

    #[test]
    fn nesting_deeper_than_256_is_refused_and_a_lower_limit_holds() {
        let nested = |d: usize| format!("{}http.path == \"a\"{}", "(".repeat(d), ")".repeat(d));
        let mut router = Router::new(schema());
        router.add(Uuid::from_u128(1), 1, &nested(256)).unwrap();
        add_limit_error(
            &nested(257),
            Limits::default(),
            &["nested too deeply", "256 levels"],
        );
        let nots = format!("{}http.path == \"a\"{}", "!(".repeat(257), ")".repeat(257));
        add_limit_error(
            &nots,
            Limits::default(),
            &["nested too deeply", "256 levels"],
        );
        // A configured depth above the hard cap is treated as the cap: this is what keeps the
        // recursive-descent parser and the tree walks inside their stacks.
        let deep = Limits {
            max_depth: 1_000_000,
            ..Limits::default()
        };
        add_limit_error(&nested(257), deep, &["nested too deeply", "256 levels"]);
        // Tenant-written routes can be held to less.
        let shallow = Limits {
            max_depth: 8,
            ..Limits::default()
        };
        add_limit_error(&nested(9), shallow, &["nested too deeply", "8 levels"]);
    }

    #[test]
    fn a_route_at_the_hard_depth_cap_evaluates_without_overflowing() {
        let deep = Limits {
            max_depth: Limits::HARD_MAX_DEPTH,
            ..Limits::default()
        };
        let schema = schema_with(deep);
        let mut router = Router::with_limits(schema.clone(), deep);
        // An even number of negations: true exactly when the predicate is.
        let src = format!("{}http.path == \"a\"{}", "!(".repeat(256), ")".repeat(256));
        router.add(Uuid::from_u128(1), 1, &src).unwrap();
        let mut ctx = Context::new(schema);
        ctx.add_value("http.path", "a").unwrap();
        assert!(router.execute(&mut ctx));
        assert!(router.execute_reference(&mut ctx));
    }

    #[test]
    fn more_than_16384_predicates_are_refused() {
        let chain = |n: usize| {
            (0..n)
                .map(|i| format!("p == {i}"))
                .collect::<Vec<_>>()
                .join(" || ")
        };
        let mut router = Router::new(schema());
        let src = chain(16_384);
        assert!(src.len() < 1024 * 1024);
        router.add(Uuid::from_u128(1), 1, &src).unwrap();
        let mut ctx = Context::new(router.schema().clone());
        ctx.add_value("p", 16_383).unwrap();
        assert!(router.execute(&mut ctx), "a long flat chain evaluates");
        add_limit_error(
            &chain(16_385),
            Limits::default(),
            &["too many predicates", "16385", "limit is 16384"],
        );
    }
}

mod values_per_field {
    use super::*;

    #[test]
    fn a_field_holds_1024_values_and_the_next_is_a_limit_error() {
        let schema = schema();
        // Values of a header count once a route reads it (others are ignored, see below).
        let mut router = Router::new(schema.clone());
        let reads_x = r#"any(http.headers.x) == "v1" || http.headers.y == "y""#;
        router.add(Uuid::from_u128(1), 1, reads_x).unwrap();
        let mut ctx = Context::new(schema);
        for i in 0..1024 {
            ctx.add_value("http.headers.x", format!("v{i}")).unwrap();
        }
        let e = ctx.add_value("http.headers.x", "one more").unwrap_err();
        assert!(matches!(e, Error::Limit(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "field `http.headers.x` already holds 1024 values, the most one field may hold"
        );
        assert_eq!(
            ctx.values("http.headers.x").len(),
            1024,
            "nothing was added"
        );
        // Other fields are unaffected, and a reset makes room again.
        ctx.add_value("http.headers.y", "y").unwrap();
        ctx.reset();
        ctx.add_value("http.headers.x", "again").unwrap();
    }

    #[test]
    fn the_limit_holds_for_every_way_of_adding() {
        let limits = Limits {
            max_values_per_field: 2,
            ..Limits::default()
        };
        let schema = schema_with(limits);
        let mut ctx = Context::new(schema.clone());
        let (port, _) = schema.resolve("net.dst.port").unwrap();
        let (path, _) = schema.resolve("http.path").unwrap();
        ctx.add_value_by_id(port, 1.into()).unwrap();
        ctx.add_value("net.dst.port", 2).unwrap();
        let e = ctx.add_value_by_id(port, 3.into()).unwrap_err();
        assert!(e.to_string().contains("already holds 2 values"), "{e}");
        ctx.add_str(path, "/a").unwrap();
        ctx.add_str(path, "/b").unwrap();
        let e = ctx.add_str(path, "/c").unwrap_err();
        assert!(
            e.to_string().contains("`http.path` already holds 2 values"),
            "{e}"
        );
    }
}

mod wildcard_fields {
    use super::*;

    fn on_header(name: &str) -> String {
        format!(r#"http.path == "/" && http.headers.{name} == "x""#)
    }

    #[test]
    fn routes_use_65536_wildcard_names_at_once_and_the_next_is_refused() {
        let schema = schema();
        let mut router = Router::new(schema.clone());
        for i in 0..65_536u128 {
            router
                .add(Uuid::from_u128(i), 1, &on_header(&format!("h{i}")))
                .unwrap();
        }
        assert_eq!(schema.names_in_use(), 65_536);
        // A route on a name in use, or on exact fields only, is fine.
        router
            .add(Uuid::from_u128(1 << 20), 1, &on_header("h7"))
            .unwrap();
        // A route on one more name: a limit error pointing at the field.
        let src = on_header("fresh");
        let Err(Error::Expr(e)) = router.add(Uuid::from_u128(1 << 21), 1, &src) else {
            panic!("a new wildcard name past the limit must be refused");
        };
        assert_eq!(e.kind, ExprErrorKind::Limit);
        assert_eq!(&src[e.span.clone()], "http.headers.fresh");
        assert!(
            e.message
                .contains("too many distinct wildcard field names in use by routes (limit: 65536)"),
            "{}",
            e.message
        );
        assert_eq!(router.len(), 65_537, "nothing changed");
        // Requests are not refused: values of names no route uses are ignored.
        let mut ctx = Context::new(schema.clone());
        ctx.add_value("http.headers.another", "x").unwrap();
        ctx.add_value("http.headers.h7", "x").unwrap();
        assert_eq!(schema.names_in_use(), 65_536);
        // Removing a route frees its name for another.
        assert!(router.remove(Uuid::from_u128(3)));
        router.add(Uuid::from_u128(1 << 21), 1, &src).unwrap();
    }

    #[test]
    fn the_limit_is_configurable() {
        let limits = Limits {
            max_wildcard_fields: 3,
            ..Limits::default()
        };
        let schema = schema_with(limits);
        let mut router = Router::new(schema);
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            router
                .add(Uuid::from_u128(i as u128), 1, &on_header(name))
                .unwrap();
        }
        let e = router
            .add(Uuid::from_u128(9), 1, &on_header("d"))
            .unwrap_err();
        assert!(e.to_string().contains("(limit: 3)"), "{e}");
    }
}

/// Every regex Kong's library takes under its defaults (the `regex` crate's 10 MiB) loads under
/// ours: Unicode classes repeated dozens of times are common in path regexes.
#[test]
fn regexes_kongs_defaults_take_load() {
    for re in [
        r"^/users/\w{1,64}$",
        r"\w{100}",
        "x{1000}{100}",
        "[a-z]{1,10000}",
    ] {
        let mut router = Router::new(schema());
        router
            .add(Uuid::from_u128(1), 1, &regex_pred(re))
            .unwrap_or_else(|e| panic!("{re}: {e}"));
    }
}

/// Limits set on the schema govern what is made from it: `Router::new`'s routers,
/// `Router::validate`, and (always) contexts and wildcard names. This is the one place the C
/// ABI and the Lua binding set limits, so a router that ignored them would leave C and Lua
/// users with the defaults whatever they asked for.
mod schema_limits {
    use super::*;

    fn tight() -> Limits {
        Limits {
            max_expression_len: 64,
            max_depth: 2,
            max_predicates: 2,
            max_regexes: 1,
            regex_size_limit: 64 * 1024,
            regex_total_size_limit: 96 * 1024,
            max_values_per_field: 2,
            max_wildcard_fields: 1,
        }
    }

    /// `src` is refused by `Router::new` over a schema with `tight()` and by
    /// `Router::validate`, with the same error containing `words`, and accepted under the
    /// defaults.
    fn refused(src: &str, words: &str) {
        let schema = schema_with(tight());
        let mut router = Router::new(schema.clone());
        assert_eq!(router.limits(), &tight());
        let e = router.add(Uuid::from_u128(1), 1, src).unwrap_err();
        assert!(e.to_string().contains(words), "`{words}` not in: {e}");
        assert!(router.is_empty());
        assert_eq!(Router::validate(&schema, src).unwrap_err(), e);
        Router::new(schema_with(Limits::default()))
            .add(Uuid::from_u128(1), 1, src)
            .unwrap_or_else(|e| panic!("{src}: {e}"));
    }

    #[test]
    fn router_new_and_validate_use_the_schemas_limits() {
        refused(
            &format!(r#"http.path == "{}""#, "a".repeat(64)),
            "the limit is 64 bytes",
        );
        refused(
            r#"(((http.path == "a")))"#,
            "nested too deeply: the limit is 2",
        );
        refused(
            "p == 1 || p == 2 || p == 3",
            "too many predicates: 3, the limit is 2",
        );
        refused(
            r#"http.path ~ "^/a" || http.path ~ "^/b""#,
            "too many regexes in one expression (limit: 1)",
        );
        refused(
            r#"http.path ~ "^/a{100}{100}""#,
            "regex is too large once compiled (limit: 65536 bytes)",
        );
        // Within the limits: accepted.
        let mut router = Router::new(schema_with(tight()));
        router
            .add(Uuid::from_u128(1), 1, r#"(http.path ~ "^/a") && p == 1"#)
            .unwrap();
    }

    #[test]
    fn with_limits_still_overrides_the_schemas_expression_limits() {
        let schema = schema_with(tight());
        let mut router = Router::with_limits(schema.clone(), Limits::default());
        router
            .add(Uuid::from_u128(1), 1, "p == 1 || p == 2 || p == 3")
            .unwrap();
        Router::validate_with_limits(&schema, "p == 1 || p == 2 || p == 3", router.limits())
            .unwrap();
        // The schema's own limits still bound its names and its contexts.
        router
            .add(Uuid::from_u128(2), 1, r#"http.headers.a == "x""#)
            .unwrap();
        let e = router
            .add(Uuid::from_u128(3), 1, r#"http.headers.b == "x""#)
            .unwrap_err();
        assert!(e.to_string().contains("(limit: 1)"), "{e}");
        let mut ctx = Context::new(schema);
        ctx.add_value("p", 1).unwrap();
        ctx.add_value("p", 2).unwrap();
        let e = ctx.add_value("p", 3).unwrap_err();
        assert!(e.to_string().contains("already holds 2 values"), "{e}");
    }

    #[test]
    fn set_limits_before_sharing_is_what_with_limits_gives() {
        let mut s = Schema::new();
        s.set_limits(tight());
        assert_eq!(s.limits(), &tight());
        s.add_field("p", Type::Int).unwrap();
        let router = Router::new(Arc::new(s));
        assert_eq!(router.limits(), &tight());
    }
}
