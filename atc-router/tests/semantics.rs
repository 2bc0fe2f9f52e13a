//! The language's meaning as docs/language.md states it: operators and types, evaluation,
//! validation, schema wildcards, router order.

use std::net::IpAddr;
use std::sync::Arc;

use atc_router::{
    CaptureKey, Context, Error, ExprErrorKind, IpCidr, MatchedValue, Router, Schema, Type, Uuid,
    Value,
};

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    for (name, ty) in [
        ("http.host", Type::String),
        ("http.path", Type::String),
        ("http.method", Type::String),
        ("http.headers.*", Type::String),
        ("net.dst.port", Type::Int),
        ("net.src.ip", Type::IpAddr),
        ("net.route", Type::IpCidr),
    ] {
        s.add_field(name, ty).unwrap();
    }
    Arc::new(s)
}

fn ip(s: &str) -> Value {
    Value::IpAddr(s.parse::<IpAddr>().unwrap())
}

fn cidr(s: &str) -> Value {
    Value::IpCidr(s.parse::<IpCidr>().unwrap())
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

/// A router holding one route, and a context with `values`; returns the context after execute.
/// Whether `expr` holds for `values`, and the context with its result. The router goes back
/// with it: a result names fields through the schema, where a wildcard name (a header) is
/// known while a route uses it.
fn run(expr: &str, values: &[(&str, Value)]) -> (bool, Routed) {
    let schema = schema();
    let mut r = Router::new(schema.clone());
    r.add(Uuid::from_u128(1), 0, expr)
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    let mut ctx = Context::new(schema);
    for (f, v) in values {
        ctx.add_value(f, v.clone()).unwrap();
    }
    let matched = r.execute(&mut ctx);
    assert_eq!(matched, r.execute_reference(&mut ctx), "{expr}");
    (matched, Routed { ctx, _router: r })
}

struct Routed {
    ctx: Context,
    _router: Router,
}

impl std::ops::Deref for Routed {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

fn holds(expr: &str, values: &[(&str, Value)]) -> bool {
    run(expr, values).0
}

fn rejects(expr: &str) -> String {
    match Router::validate(&schema(), expr) {
        Ok(f) => panic!("{expr} validated with fields {f:?}"),
        Err(Error::Expr(e)) => {
            assert_eq!(e.kind, ExprErrorKind::Semantic, "{expr}: {e}");
            e.to_string()
        }
        Err(e) => panic!("{expr}: not an expression error: {e}"),
    }
}

mod operators_and_types {
    use super::*;

    #[test]
    fn equals_and_not_equals_work_on_every_type() {
        assert!(holds(r#"http.host == "a""#, &[("http.host", s("a"))]));
        assert!(!holds(r#"http.host == "a""#, &[("http.host", s("A"))]));
        assert!(holds(r#"http.host != "a""#, &[("http.host", s("b"))]));
        assert!(holds(
            "net.dst.port == 80",
            &[("net.dst.port", Value::Int(80))]
        ));
        assert!(holds(
            "net.dst.port != 80",
            &[("net.dst.port", Value::Int(81))]
        ));
        assert!(holds(
            "net.src.ip == 10.0.0.1",
            &[("net.src.ip", ip("10.0.0.1"))]
        ));
        assert!(holds("net.src.ip != ::1", &[("net.src.ip", ip("::2"))]));
        assert!(holds(
            "net.route == 10.0.0.0/8",
            &[("net.route", cidr("10.0.0.0/8"))]
        ));
        assert!(!holds(
            "net.route == 10.0.0.0/8",
            &[("net.route", cidr("10.0.0.0/16"))]
        ));
    }

    #[test]
    fn strings_compare_byte_wise() {
        assert!(!holds(
            r#"http.host == "é""#,
            &[("http.host", s("e\u{301}"))]
        ));
        assert!(holds(r#"http.host == "é""#, &[("http.host", s("é"))]));
    }

    #[test]
    fn regex_is_an_unanchored_search() {
        assert!(holds(r#"http.path ~ "b+c""#, &[("http.path", s("abbcd"))]));
        assert!(!holds(r#"http.path ~ "^b""#, &[("http.path", s("abc"))]));
    }

    #[test]
    fn prefix_postfix_contains() {
        assert!(holds(
            r#"http.path ^= "/api""#,
            &[("http.path", s("/api/x"))]
        ));
        assert!(!holds(r#"http.path ^= "/api""#, &[("http.path", s("/ap"))]));
        assert!(holds(
            r#"http.host =^ ".example.com""#,
            &[("http.host", s("a.example.com"))]
        ));
        assert!(!holds(
            r#"http.host =^ ".example.com""#,
            &[("http.host", s("example.com"))]
        ));
        assert!(holds(
            r#"http.path contains "/v2/""#,
            &[("http.path", s("/a/v2/b"))]
        ));
        assert!(!holds(
            r#"http.path contains "/v2/""#,
            &[("http.path", s("/a/v2"))]
        ));
    }

    #[test]
    fn integer_comparisons_are_signed() {
        let p = |v| [("net.dst.port", Value::Int(v))];
        assert!(holds("net.dst.port > -1", &p(0)));
        assert!(!holds("net.dst.port > 0", &p(0)));
        assert!(holds("net.dst.port >= 0", &p(0)));
        assert!(holds("net.dst.port < -0x10", &p(-17)));
        assert!(holds("net.dst.port <= 010", &p(8)));
        assert!(!holds("net.dst.port <= 010", &p(9)));
    }

    #[test]
    fn in_and_not_in_test_cidr_membership_and_other_families_are_not_inside() {
        let v4 = [("net.src.ip", ip("10.1.2.3"))];
        let v6 = [("net.src.ip", ip("2001:db8::1"))];
        assert!(holds("net.src.ip in 10.0.0.0/8", &v4));
        assert!(!holds("net.src.ip not in 10.0.0.0/8", &v4));
        assert!(holds("net.src.ip in 2001:db8::/32", &v6));
        assert!(!holds("net.src.ip in 10.0.0.0/8", &v6));
        assert!(holds("net.src.ip not in 10.0.0.0/8", &v6));
        assert!(holds("net.src.ip in 0.0.0.0/0", &v4));
        assert!(!holds("net.src.ip in ::/0", &v4));
    }

    #[test]
    fn ipv4_mapped_addresses_are_not_normalised() {
        let mapped = [("net.src.ip", ip("::ffff:10.0.0.1"))];
        assert!(!holds("net.src.ip in 10.0.0.0/8", &mapped));
        assert!(!holds("net.src.ip == 10.0.0.1", &mapped));
    }

    #[test]
    fn every_operator_type_pair_outside_the_table_is_rejected() {
        // (field, literal) per type; each operator is either allowed by the table of
        // docs/language.md or rejected.
        let fields = [
            ("http.host", r#""x""#, Type::String),
            ("net.dst.port", "1", Type::Int),
            ("net.src.ip", "10.0.0.1", Type::IpAddr),
            ("net.route", "10.0.0.0/8", Type::IpCidr),
        ];
        for op in atc_router::Op::ALL {
            for (field, lit, ty) in fields {
                // `in` takes a set of the field's literals (a network on an IpAddr field).
                let set;
                let lit = if matches!(op, atc_router::Op::In | atc_router::Op::NotIn) {
                    set = format!(
                        "[{}]",
                        if ty == Type::IpAddr {
                            "10.0.0.0/8"
                        } else {
                            lit
                        }
                    );
                    &set
                } else {
                    lit
                };
                let expr = format!("{field} {} {lit}", op.symbol());
                let allowed = op.applies_to(ty);
                let result = Router::validate(&schema(), &expr);
                assert_eq!(result.is_ok(), allowed, "{expr}: {result:?}");
            }
        }
    }

    #[test]
    fn rejected_operators_name_the_allowed_ones() {
        let e = rejects("net.dst.port ^= 1");
        assert!(e.contains("operator `^=` is not defined for Int fields; Int fields allow ==, !=, >, >=, <, <="), "{e}");
        let e = rejects(r#"http.host > "a""#);
        assert!(
            e.contains("String fields allow ==, !=, ~, ^=, =^, in, not in, contains"),
            "{e}"
        );
        let e = rejects("net.src.ip in 10.0.0.1");
        assert!(e.contains("`in` needs a CIDR"), "{e}");
        let e = rejects("net.route in [10.0.0.0/8]");
        assert!(
            e.contains(
                "operator `in` is not defined for IpCidr fields; IpCidr fields allow ==, !="
            ),
            "{e}"
        );
    }

    /// docs/language.md "Sets".
    mod sets {
        use super::*;

        #[test]
        fn in_a_set_is_membership_for_strings_integers_and_addresses() {
            let m = |v| [("http.method", s(v))];
            assert!(holds(r#"http.method in ["GET", "HEAD"]"#, &m("HEAD")));
            assert!(!holds(r#"http.method in ["GET", "HEAD"]"#, &m("POST")));
            assert!(!holds(r#"http.method in ["GET", "HEAD"]"#, &m("get")));
            let p = |v| [("net.dst.port", Value::Int(v))];
            assert!(holds("net.dst.port in [80, 443]", &p(443)));
            assert!(!holds("net.dst.port in [80, 443]", &p(8080)));
            assert!(holds("net.dst.port in [-1, 0x10]", &p(16)));
            let set = "net.src.ip in [10.0.0.0/8, 192.168.1.1, 2001:db8::/32]";
            for (addr, inside) in [
                ("10.1.2.3", true),
                ("192.168.1.1", true),
                ("192.168.1.2", false),
                ("2001:db8::7", true),
                ("::ffff:10.0.0.1", false),
                ("11.0.0.1", false),
            ] {
                assert_eq!(holds(set, &[("net.src.ip", ip(addr))]), inside, "{addr}");
            }
        }

        #[test]
        fn not_in_a_set_is_the_negation_for_each_value() {
            let m = |v| [("http.method", s(v))];
            assert!(holds(r#"http.method not in ["GET", "HEAD"]"#, &m("POST")));
            assert!(!holds(r#"http.method not in ["GET", "HEAD"]"#, &m("GET")));
            let p = |v| [("net.dst.port", Value::Int(v))];
            assert!(holds("net.dst.port not in [80, 443]", &p(8080)));
            assert!(!holds("net.dst.port not in [80]", &p(80)));
            let a = |v| [("net.src.ip", ip(v))];
            assert!(holds("net.src.ip not in [10.0.0.0/8, ::1]", &a("11.0.0.1")));
            assert!(!holds("net.src.ip not in [10.0.0.0/8, ::1]", &a("::1")));
        }

        #[test]
        fn every_value_must_be_in_the_set_by_default_and_one_under_any() {
            let two = [("http.headers.x", s("a")), ("http.headers.x", s("b"))];
            assert!(holds(r#"http.headers.x in ["a", "b"]"#, &two));
            // Unlike `==` alternatives: no single literal equals every value.
            assert!(!holds(
                r#"http.headers.x == "a" || http.headers.x == "b""#,
                &two
            ));
            assert!(!holds(r#"http.headers.x in ["a", "c"]"#, &two));
            assert!(holds(r#"any(http.headers.x) in ["a", "c"]"#, &two));
            assert!(!holds(r#"http.headers.x not in ["a"]"#, &two));
            assert!(holds(r#"any(http.headers.x) not in ["a"]"#, &two));
            assert!(!holds(r#"any(http.headers.x) not in ["a", "b"]"#, &two));
        }

        #[test]
        fn a_field_without_values_makes_in_and_not_in_false() {
            for expr in [
                r#"http.method in ["GET"]"#,
                r#"http.method not in ["GET"]"#,
                r#"any(http.method) not in ["GET"]"#,
                "net.dst.port not in [80]",
                "net.src.ip not in [10.0.0.0/8, ::1]",
            ] {
                assert!(!holds(expr, &[]), "{expr}");
            }
            assert!(holds(r#"!(http.method in ["GET"])"#, &[]));
        }

        #[test]
        fn lower_in_a_set_lowercases_the_value() {
            let v = [("http.method", s("Get"))];
            assert!(holds(r#"lower(http.method) in ["get", "head"]"#, &v));
            assert!(!holds(r#"http.method in ["get", "head"]"#, &v));
            assert!(!holds(r#"lower(http.method) not in ["get"]"#, &v));
            let e = rejects(r#"lower(http.method) in ["get", "HEAD"]"#);
            assert!(
                e.contains("can never match") && e.contains("write it in lowercase: \"head\""),
                "{e}"
            );
            assert!(e.contains("^^^^^^"), "the caret is under the element:\n{e}");
        }

        #[test]
        fn duplicates_and_a_trailing_comma_change_nothing() {
            let p = [("net.dst.port", Value::Int(80))];
            assert!(holds("net.dst.port in [80, 80, 443,]", &p));
            assert!(!holds("net.dst.port not in [443, 80, 80]", &p));
        }

        #[test]
        fn in_records_the_element_and_not_in_records_nothing() {
            let values = [
                ("http.method", s("Get")),
                ("net.dst.port", Value::Int(443)),
                ("net.src.ip", ip("10.0.0.1")),
            ];
            let (m, ctx) = run(
                r#"lower(http.method) in ["get", "head"] && net.dst.port in [80, 443]"#,
                &values,
            );
            assert!(m);
            let r = ctx.result().unwrap();
            assert_eq!(
                r.matched_value("http.method"),
                Some(MatchedValue::String("get"))
            );
            assert_eq!(
                r.matched_value("net.dst.port"),
                Some(MatchedValue::Int(443))
            );
            for expr in [
                r#"http.method not in ["POST"]"#,
                "net.dst.port not in [80]",
                "net.src.ip in [10.0.0.1, 11.0.0.0/8]",
                "net.src.ip not in [10.0.0.2]",
            ] {
                let (m, ctx) = run(expr, &values);
                assert!(m, "{expr}");
                assert!(ctx.result().unwrap().matched_fields().is_empty(), "{expr}");
            }
        }

        #[test]
        fn over_several_values_in_records_the_last() {
            let (_, ctx) = run(
                r#"http.headers.x in ["a", "b"]"#,
                &[("http.headers.x", s("b")), ("http.headers.x", s("a"))],
            );
            assert_eq!(
                ctx.result().unwrap().matched_value("http.headers.x"),
                Some(MatchedValue::String("a"))
            );
            let (_, ctx) = run(
                r#"any(http.headers.x) in ["a", "b"]"#,
                &[
                    ("http.headers.x", s("c")),
                    ("http.headers.x", s("b")),
                    ("http.headers.x", s("a")),
                ],
            );
            assert_eq!(
                ctx.result().unwrap().matched_value("http.headers.x"),
                Some(MatchedValue::String("b"))
            );
        }
    }
}

mod evaluation {
    use super::*;

    #[test]
    fn an_absent_field_makes_every_predicate_on_it_false() {
        for expr in [
            r#"http.host == "x""#,
            r#"http.host != "x""#,
            r#"http.host ~ "" "#,
            r#"http.host contains """#,
            "net.dst.port >= -9223372036854775807",
            "net.src.ip not in 10.0.0.0/8",
            r#"any(http.host) != "x""#,
        ] {
            assert!(!holds(expr, &[]), "{expr}");
        }
        assert!(holds(r#"!(http.host == "x")"#, &[]));
    }

    #[test]
    fn all_mode_needs_every_value_any_mode_needs_one() {
        let two = [("http.headers.x", s("a")), ("http.headers.x", s("b"))];
        assert!(!holds(r#"http.headers.x == "a""#, &two));
        assert!(holds(r#"any(http.headers.x) == "a""#, &two));
        assert!(holds(r#"http.headers.x ~ "^[ab]$""#, &two));
        assert!(holds(r#"http.headers.x != "c""#, &two));
        assert!(!holds(r#"http.headers.x != "a""#, &two));
        assert!(holds(r#"any(http.headers.x) != "a""#, &two));
    }

    #[test]
    fn lower_lowercases_values_with_unicode_rules_and_leaves_the_literal() {
        let v = [("http.host", s("ÀB.Example.COM"))];
        assert!(holds(r#"lower(http.host) == "àb.example.com""#, &v));
        assert!(holds(r#"lower(http.host) ~ "^àb""#, &v));
        assert!(!holds(r#"http.host == "àb.example.com""#, &v));
        let two = [("http.headers.v", s("V1")), ("http.headers.v", s("v2"))];
        assert!(holds(r#"any(lower(http.headers.v)) == "v1""#, &two));
        assert!(holds(r#"lower(any(http.headers.v)) == "v2""#, &two));
        assert!(holds(r#"lower(lower(http.headers.v)) ^= "v""#, &two));
    }

    #[test]
    fn or_binds_tighter_than_and() {
        let v = [("http.host", s("a")), ("http.path", s("/x"))];
        // a && b || c  is  a && (b || c)
        assert!(holds(
            r#"http.host == "a" && http.path == "/nope" || http.path == "/x""#,
            &v
        ));
        assert!(!holds(
            r#"http.host == "b" && http.path == "/nope" || http.path == "/x""#,
            &v
        ));
    }

    #[test]
    fn or_records_only_the_first_true_side() {
        let (m, ctx) = run(
            r#"http.path ^= "/a" || http.path ^= "/ab""#,
            &[("http.path", s("/abc"))],
        );
        assert!(m);
        let r = ctx.result().unwrap();
        assert_eq!(
            r.matched_value("http.path"),
            Some(MatchedValue::String("/a"))
        );
    }

    #[test]
    fn a_failed_branch_leaves_nothing_behind() {
        // The left side of `||` fails after its first predicate matched: that predicate's
        // captures and value must not leak into the result (Kong's library leaks them).
        let (m, ctx) = run(
            r#"(http.path ~ "^/(?<v>[a-z]+)" && http.host == "nope") || http.host == "a""#,
            &[("http.path", s("/abc")), ("http.host", s("a"))],
        );
        assert!(m);
        let r = ctx.result().unwrap();
        assert_eq!(r.matched_value("http.path"), None);
        assert_eq!(r.captures().count(), 0);
        assert_eq!(
            r.matched_value("http.host"),
            Some(MatchedValue::String("a"))
        );
    }

    #[test]
    fn nothing_is_recorded_from_inside_a_not() {
        let (m, ctx) = run(
            r#"!(http.path ^= "/x" && http.host == "b") && http.host == "a""#,
            &[("http.path", s("/x")), ("http.host", s("a"))],
        );
        assert!(m);
        let r = ctx.result().unwrap();
        assert_eq!(r.matched_value("http.path"), None);
        assert_eq!(
            r.matched_value("http.host"),
            Some(MatchedValue::String("a"))
        );
    }

    #[test]
    fn and_records_both_sides_and_the_last_value_per_field_wins() {
        let (_, ctx) = run(
            r#"http.path ^= "/u" && http.path ~ "^/u/(\\d+)$" && net.dst.port == 8443"#,
            &[
                ("http.path", s("/u/42")),
                ("net.dst.port", Value::Int(8443)),
            ],
        );
        let r = ctx.result().unwrap();
        assert_eq!(
            r.matched_value("http.path"),
            Some(MatchedValue::String("/u/42"))
        );
        assert_eq!(
            r.matched_value("net.dst.port"),
            Some(MatchedValue::Int(8443))
        );
    }

    #[test]
    fn captures_by_number_and_by_name_only_for_groups_that_took_part() {
        let (_, ctx) = run(
            r#"http.path ~ "^/u/(?<id>\\d+)(/(?<tail>x))?(y)?""#,
            &[("http.path", s("/u/7/x"))],
        );
        let r = ctx.result().unwrap();
        let caps = r.captures_map();
        assert_eq!(caps["0"], "/u/7/x");
        assert_eq!(caps["1"], "7");
        assert_eq!(caps["id"], "7");
        assert_eq!(caps["2"], "/x");
        assert_eq!(caps["3"], "x");
        assert_eq!(caps["tail"], "x");
        assert!(!caps.contains_key("4"), "group 4 did not take part");
        assert_eq!(r.capture(CaptureKey::Name("id")), Some("7"));
        assert_eq!(r.capture(CaptureKey::Index(0)), Some("/u/7/x"));
    }

    #[test]
    fn regex_matched_value_is_the_whole_match_of_the_first_satisfying_value() {
        let (_, ctx) = run(
            r#"any(http.headers.x) ~ "[0-9]+""#,
            &[
                ("http.headers.x", s("none")),
                ("http.headers.x", s("ab12cd")),
                ("http.headers.x", s("99")),
            ],
        );
        let r = ctx.result().unwrap();
        assert_eq!(
            r.matched_value("http.headers.x"),
            Some(MatchedValue::String("12"))
        );
        assert_eq!(r.captures_map()["0"], "12");
    }

    /// In the default mode every value must satisfy the predicate, and every one records, in
    /// order: the last value's match wins and captures merge (a group only an earlier value
    /// filled keeps that value's text), as in Kong's library. Found by the differential tests
    /// against Kong (`testkit/tests/kong_diff.rs`); we recorded only the first value.
    #[test]
    fn regex_over_all_values_records_each_so_the_last_wins_and_captures_merge() {
        let (_, ctx) = run(
            r#"http.headers.x ~ "^(?<a>a)?(?<n>[0-9]+)$""#,
            &[("http.headers.x", s("a1")), ("http.headers.x", s("22"))],
        );
        let r = ctx.result().unwrap();
        assert_eq!(
            r.matched_value("http.headers.x"),
            Some(MatchedValue::String("22"))
        );
        let caps = r.captures_map();
        assert_eq!(
            (caps["0"].as_str(), caps["2"].as_str(), caps["n"].as_str()),
            ("22", "22", "22")
        );
        assert_eq!((caps["1"].as_str(), caps["a"].as_str()), ("a", "a"));
    }

    #[test]
    fn operators_without_a_matched_value_record_none() {
        for expr in [
            r#"http.host != "b""#,
            r#"http.host contains "a""#,
            "net.dst.port > 1",
            "net.src.ip in 10.0.0.0/8",
            "net.src.ip not in 11.0.0.0/8",
        ] {
            let (m, ctx) = run(
                expr,
                &[
                    ("http.host", s("a")),
                    ("net.dst.port", Value::Int(2)),
                    ("net.src.ip", ip("10.0.0.1")),
                ],
            );
            assert!(m, "{expr}");
            assert!(ctx.result().unwrap().matched_fields().is_empty(), "{expr}");
        }
    }

    #[test]
    fn a_failed_execute_leaves_no_result_behind() {
        let schema = schema();
        let mut r = Router::new(schema.clone());
        r.add(Uuid::from_u128(1), 0, r#"http.path ^= "/a""#)
            .unwrap();
        let mut ctx = Context::new(schema);
        ctx.add_value("http.path", "/a").unwrap();
        assert!(r.execute(&mut ctx));
        assert!(ctx.result().is_some());
        ctx.reset();
        assert!(ctx.result().is_none());
        ctx.add_value("http.path", "/b").unwrap();
        assert!(!r.execute(&mut ctx));
        assert!(ctx.result().is_none());
    }
}

mod validation {
    use super::*;

    #[test]
    fn unknown_field_comes_first() {
        let e = rejects("lower(nope) > 1");
        assert!(e.contains("unknown field `nope`"), "{e}");
        assert!(e.contains("1 | lower(nope) > 1\n  |       ^^^^"), "{e}");
    }

    #[test]
    fn type_mismatch_comes_before_lower_and_operator_checks() {
        let e = rejects("lower(net.dst.port) ^= \"1\"");
        assert!(
            e.contains(
                "type mismatch: `net.dst.port` is an Int field, but the value is a String (\"1\")"
            ),
            "{e}"
        );
        assert!(e.contains("^^^"), "{e}");
    }

    #[test]
    fn lower_on_a_non_string_comes_before_the_operator_check() {
        let e = rejects("lower(net.dst.port) > 1");
        assert!(e.contains("lower() applies only to String fields"), "{e}");
    }

    #[test]
    fn lower_with_an_uppercase_literal_is_reported() {
        for expr in [
            r#"lower(http.host) == "Upper""#,
            r#"lower(http.host) ^= "/A""#,
            r#"lower(http.host) =^ "É""#,
            r#"any(lower(http.host)) contains "X""#,
        ] {
            let e = rejects(expr);
            assert!(e.contains("can never match"), "{e}");
        }
        assert!(Router::validate(&schema(), r#"lower(http.host) ~ "[A-Z]""#).is_ok());
        assert!(Router::validate(&schema(), r#"lower(http.host) == "lower""#).is_ok());
    }

    /// The span of the error `expr` gets, as text.
    fn rejected_at(expr: &str) -> &str {
        match Router::validate(&schema(), expr) {
            Err(Error::Expr(e)) => &expr[e.span],
            other => panic!("{expr}: {other:?}"),
        }
    }

    #[test]
    fn a_set_element_of_another_type_is_reported_at_the_element() {
        let e = rejects(r#"net.dst.port in ["80", "443"]"#);
        assert!(
            e.contains(
                "type mismatch: `net.dst.port` is an Int field, but this element of the set is a String (\"80\")"
            ),
            "{e}"
        );
        assert_eq!(rejected_at(r#"net.dst.port in ["80", "443"]"#), r#""80""#);
        let e = rejects(r#"http.method in [1, 2]"#);
        assert!(
            e.contains("is a String field, but this element of the set is an Int (1)"),
            "{e}"
        );
        let e = rejects(r#"net.src.ip in ["10.0.0.1"]"#);
        assert!(e.contains("so the set holds IP addresses and CIDRs"), "{e}");
        assert_eq!(rejected_at("net.src.ip not in [1, 2]"), "1");
    }

    #[test]
    fn in_on_a_string_or_int_field_needs_a_set() {
        let e = rejects(r#"http.method in "GET""#);
        assert!(
            e.contains(r#"`in` on a String field needs a set on the right (such as ["GET"])"#),
            "{e}"
        );
        assert_eq!(rejected_at("net.dst.port not in 80"), "80");
        let e = rejects("net.dst.port not in 80");
        assert!(e.contains("`not in` on an Int field needs a set"), "{e}");
        // An IpAddr field takes a network or a set.
        assert!(Router::validate(&schema(), "net.src.ip in 10.0.0.0/8").is_ok());
        assert!(Router::validate(&schema(), "net.src.ip in [10.0.0.1]").is_ok());
    }

    #[test]
    fn an_uppercase_element_under_lower_is_reported_at_the_element() {
        assert_eq!(
            rejected_at(r#"lower(http.method) in ["get", "Head", "POST"]"#),
            r#""Head""#
        );
        // `not in` an uppercase element always holds: allowed, as for `!=`.
        assert!(Router::validate(&schema(), r#"lower(http.method) not in ["GET"]"#).is_ok());
    }

    #[test]
    fn invalid_regexes_are_reported_at_the_literal() {
        let e = rejects(r#"http.path ~ "(""#);
        assert!(e.contains("invalid regex: unclosed group"), "{e}");
        assert!(e.contains("line 1, column 13"), "{e}");
    }

    #[test]
    fn the_first_bad_predicate_wins() {
        let e = rejects(r#"http.host == "a" && nope == 1 && other == 2"#);
        let first_line = e.lines().next().unwrap();
        assert!(
            first_line.contains("`nope`") && !first_line.contains("other"),
            "{e}"
        );
    }

    #[test]
    fn validate_returns_the_fields_in_order_of_first_use() {
        let f = Router::validate(
            &schema(),
            r#"http.path ^= "/" && (http.host == "a" || http.path ^= "/b") && http.headers.x_a == "1""#,
        )
        .unwrap();
        assert_eq!(f, ["http.path", "http.host", "http.headers.x_a"]);
    }

    #[test]
    fn validate_errors_carry_position_on_later_lines() {
        match Router::validate(&schema(), "http.host == \"a\" &&\n  net.dst.port == \"x\"") {
            Err(Error::Expr(e)) => {
                assert_eq!((e.line, e.column), (2, 19));
                assert_eq!(e.source_line(), "  net.dst.port == \"x\"");
            }
            other => panic!("{other:?}"),
        }
    }
}

mod schema_and_context {
    use super::*;

    #[test]
    fn wildcards_stand_for_one_more_segment_and_exact_names_win() {
        let mut s = Schema::new();
        s.add_field("http.headers.*", Type::String).unwrap();
        s.add_field("http.headers.port", Type::Int).unwrap();
        assert_eq!(s.field_type("http.headers.x_foo"), Some(Type::String));
        assert_eq!(s.field_type("http.headers.port"), Some(Type::Int));
        assert_eq!(s.field_type("http.headers"), None);
        assert_eq!(s.field_type("http.headers.a.b"), None);
        let s = Arc::new(s);
        assert!(Router::validate(&s, r#"http.headers.x_foo == "1""#).is_ok());
        assert!(Router::validate(&s, "http.headers.port == 1").is_ok());
        assert!(Router::validate(&s, r#"http.headers.a.b == "1""#).is_err());
    }

    #[test]
    fn duplicate_fields_are_rejected() {
        let mut s = Schema::new();
        s.add_field("a", Type::Int).unwrap();
        assert_eq!(
            s.add_field("a", Type::String),
            Err(Error::DuplicateField("a".into()))
        );
        s.add_field("h.*", Type::Int).unwrap();
        assert!(s.add_field("h.*", Type::Int).is_err());
    }

    #[test]
    fn context_rejects_unknown_fields_and_wrong_types() {
        let mut ctx = Context::new(schema());
        assert_eq!(
            ctx.add_value("nope", "x"),
            Err(Error::UnknownField("nope".into()))
        );
        assert_eq!(
            ctx.add_value("net.dst.port", "80"),
            Err(Error::TypeMismatch {
                field: "net.dst.port".into(),
                expected: Type::Int,
                found: Type::String
            })
        );
        assert!(ctx.add_value("net.src.ip", ip("::1")).is_ok());
        assert!(ctx.add_value("net.route", cidr("::/0")).is_ok());
    }

    #[test]
    fn context_keeps_values_in_order_and_reset_forgets_them() {
        let schema = schema();
        let mut router = Router::new(schema.clone());
        router
            .add(Uuid::from_u128(1), 1, r#"http.headers.a == "1""#)
            .unwrap();
        let mut ctx = Context::new(schema);
        ctx.add_value("http.headers.a", "1").unwrap();
        ctx.add_value("http.headers.a", "2").unwrap();
        assert_eq!(ctx.values("http.headers.a"), [s("1"), s("2")]);
        ctx.reset();
        assert!(ctx.values("http.headers.a").is_empty());
        let id = ctx.schema().resolve("http.headers.a").unwrap().0;
        ctx.add_str(id, "3").unwrap();
        assert_eq!(ctx.values("http.headers.a"), [s("3")]);
    }

    #[test]
    fn values_per_field_are_limited() {
        let mut s = Schema::with_limits(atc_router::Limits {
            max_values_per_field: 3,
            ..Default::default()
        });
        s.add_field("h", Type::Int).unwrap();
        let mut ctx = Context::new(Arc::new(s));
        for i in 0..3 {
            ctx.add_value("h", i).unwrap();
        }
        let e = ctx.add_value("h", 3).unwrap_err();
        assert!(e.to_string().contains("already holds 3 values"), "{e}");
    }
}

mod router_order {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn winner(routes: &[(u128, u64, &str)], values: &[(&str, Value)]) -> Option<Uuid> {
        let schema = schema();
        let mut r = Router::new(schema.clone());
        for (i, p, e) in routes {
            r.add(id(*i), *p, e).unwrap();
        }
        let mut ctx = Context::new(schema);
        for (f, v) in values {
            ctx.add_value(f, v.clone()).unwrap();
        }
        let fast = r.execute(&mut ctx).then(|| ctx.result().unwrap().id());
        let slow = r
            .execute_reference(&mut ctx)
            .then(|| ctx.result().unwrap().id());
        assert_eq!(fast, slow);
        fast
    }

    #[test]
    fn higher_priority_wins() {
        let routes = [
            (1, 1, r#"http.path ^= "/""#),
            (2, 5, r#"http.path ^= "/a""#),
            (3, 3, r#"http.path ^= "/""#),
        ];
        assert_eq!(winner(&routes, &[("http.path", s("/a"))]), Some(id(2)));
        assert_eq!(winner(&routes, &[("http.path", s("/b"))]), Some(id(3)));
        assert_eq!(winner(&routes, &[("http.host", s("x"))]), None);
    }

    #[test]
    fn equal_priorities_are_ordered_by_id_bytes_higher_first() {
        let a = Uuid::parse_str("00000000-0000-0000-0000-0000000000ff").unwrap();
        let b = Uuid::parse_str("01000000-0000-0000-0000-000000000000").unwrap();
        assert!(b > a);
        let routes = [
            (a.as_u128(), 7, r#"http.path ^= "/""#),
            (b.as_u128(), 7, r#"http.path ^= "/""#),
        ];
        assert_eq!(winner(&routes, &[("http.path", s("/"))]), Some(b));
    }

    #[test]
    fn ids_are_unique() {
        let mut r = Router::new(schema());
        r.add(id(1), 1, r#"http.path ^= "/""#).unwrap();
        assert_eq!(
            r.add(id(1), 2, r#"http.path ^= "/x""#),
            Err(Error::DuplicateRoute(id(1)))
        );
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn a_rejected_route_changes_nothing() {
        let mut r = Router::new(schema());
        assert!(r
            .add(id(1), 1, r#"http.path ~ "^/a" && http.path ~ "(""#)
            .is_err());
        assert!(r.is_empty());
        assert_eq!(r.regex_count(), 0);
        assert!(r.fields().is_empty());
    }

    #[test]
    fn remove_forgets_the_route_its_fields_and_unshared_regexes() {
        let mut r = Router::new(schema());
        r.add(id(1), 1, r#"http.path ~ "^/a" && http.host == "x""#)
            .unwrap();
        r.add(id(2), 2, r#"http.path ~ "^/a" && net.dst.port == 1"#)
            .unwrap();
        assert_eq!(r.regex_count(), 1, "identical regexes are compiled once");
        assert_eq!(r.fields(), ["http.host", "http.path", "net.dst.port"]);
        assert!(r.remove(id(1)));
        assert!(!r.remove(id(1)));
        assert_eq!(r.regex_count(), 1);
        assert_eq!(r.fields(), ["http.path", "net.dst.port"]);
        assert!(r.remove(id(2)));
        assert_eq!(r.regex_count(), 0);
        assert!(r.fields().is_empty());
    }

    #[test]
    fn a_context_of_another_schema_never_matches() {
        let mut r = Router::new(schema());
        r.add(id(1), 1, r#"http.path ^= "/""#).unwrap();
        let mut ctx = Context::new(schema());
        ctx.add_value("http.path", "/").unwrap();
        assert!(!r.execute(&mut ctx));
    }
}
