//! Differential property tests: our library against Kong's `atc-router` 1.7.1 on generated
//! schemas, route tables and requests over the whole language (`atc_testkit::gen`).
//!
//! For every generated case both libraries accept and refuse the same routes, route every
//! request to the same route, and report the same matched values and captures, except for the
//! differences documented in `docs/kong-differences.md` (each a named test in
//! `kong_deviations.rs`). See `vs_kong/mod.rs` for exactly what is compared.
//!
//! Inputs Kong's library aborts the process on are generated for our side only and must be
//! clean errors: wrong value types and unknown fields (here, through the Rust API), and
//! invalid UTF-8 and invalid ids (through our C ABI, which is where they can arrive).
//!
//! `PROPTEST_CASES=N` raises the number of cases for a longer run.

mod vs_kong;

use std::ffi::c_char;

use atc_router_ffi::*;
use atc_testkit::gen::{self, Case};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(Config { cases: cases(160), ..Config::default() })]

    /// Whole tables: acceptance, fields, winners, matched values and captures.
    #[test]
    fn both_libraries_agree_on_route_tables(case in gen::case_strategy(1..40, 1..24)) {
        vs_kong::check(&case.render());
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(256), ..Config::default() })]

    /// One or two routes and many requests: every request reaches the routes' predicates, so
    /// the values each predicate records are compared far more often.
    #[test]
    fn both_libraries_agree_on_single_routes(case in gen::case_strategy(1..3, 8..24)) {
        vs_kong::check(&case.render());
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(256), ..Config::default() })]

    /// Both parsers read every generated route as the same tree (precedence, transformation
    /// order, literal values).
    #[test]
    fn both_libraries_read_the_same_trees(case in gen::case_strategy(8..16, 0..1)) {
        for r in case.render().routes {
            if let Some(kong) = &r.kong_text {
                vs_kong::same_tree(&r.text, kong);
            }
        }
    }
}

/// Cases proptest once shrank a failure to (kept from `kong_diff.proptest-regressions`, whose
/// seeds stopped reproducing them when the generator grew): a lone `not in` spelled oddly, a
/// table mixing odd `not in` spellings with other flaws, and a malformed literal on an
/// `IpCidr` field.
#[test]
fn recorded_cases_agree() {
    use atc_router::Type;
    use gen::{ExprDesc, PredDesc, RequestDesc, RouteDesc};
    #[rustfmt::skip]
    let cases = [
        // de3eeb28
        Case { texts: vec![], steps: vec![], tight_limits: false, types: [Type::String, Type::String, Type::String, Type::String], routes: vec![RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Pred(PredDesc { field: 20, transforms: 44, op: 11, lit: 2934, spelling: 0, flaw: 9 }) }], requests: vec![RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: Some((0, 0)), extra: vec![(108, 1)], derived: vec![], bad: vec![] }] },
        // 19291b71
        Case { texts: vec![], steps: vec![], tight_limits: false, types: [Type::String, Type::String, Type::String, Type::String], routes: vec![RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Pred(PredDesc { field: 0, transforms: 0, op: 0, lit: 0, spelling: 0, flaw: 0 }) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 6, transforms: 0, op: 0, lit: 0, spelling: 0, flaw: 9 }), ExprDesc::Pred(PredDesc { field: 89, transforms: 28, op: 83, lit: 14942, spelling: 0, flaw: 9 })]) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Pred(PredDesc { field: 0, transforms: 0, op: 4, lit: 1, spelling: 0, flaw: 0 }) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Pred(PredDesc { field: 0, transforms: 0, op: 188, lit: 711, spelling: 0, flaw: 0 }) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Or(vec![ExprDesc::Pred(PredDesc { field: 0, transforms: 0, op: 0, lit: 0, spelling: 0, flaw: 0 }), ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 0, transforms: 7, op: 212, lit: 45462, spelling: 31711, flaw: 19 }), ExprDesc::Pred(PredDesc { field: 89, transforms: 40, op: 7, lit: 40531, spelling: 59377, flaw: 84 })])]) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 31, transforms: 76, op: 223, lit: 54863, spelling: 2134, flaw: 79 }), ExprDesc::Pred(PredDesc { field: 141, transforms: 24, op: 143, lit: 13972, spelling: 3178, flaw: 32 }), ExprDesc::Pred(PredDesc { field: 75, transforms: 83, op: 200, lit: 137, spelling: 8616, flaw: 39 })]) }, RouteDesc { layout: 0, priority: 2, expr: ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 42, transforms: 77, op: 199, lit: 11252, spelling: 38868, flaw: 39 }), ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 177, transforms: 107, op: 7, lit: 18764, spelling: 60621, flaw: 60 }), ExprDesc::Pred(PredDesc { field: 169, transforms: 7, op: 40, lit: 16940, spelling: 59018, flaw: 77 })])]) }, RouteDesc { layout: 0, priority: 3, expr: ExprDesc::Pred(PredDesc { field: 172, transforms: 95, op: 91, lit: 48586, spelling: 45139, flaw: 54 }) }, RouteDesc { layout: 0, priority: 3, expr: ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 0, transforms: 172, op: 210, lit: 40430, spelling: 65400, flaw: 50 }), ExprDesc::Pred(PredDesc { field: 199, transforms: 249, op: 70, lit: 16826, spelling: 27167, flaw: 7 })]) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Pred(PredDesc { field: 96, transforms: 182, op: 252, lit: 597, spelling: 18238, flaw: 5 }) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 74, transforms: 88, op: 212, lit: 42784, spelling: 57883, flaw: 67 }), ExprDesc::Pred(PredDesc { field: 134, transforms: 123, op: 164, lit: 30855, spelling: 25913, flaw: 69 })]) }, RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Pred(PredDesc { field: 56, transforms: 84, op: 153, lit: 58413, spelling: 20580, flaw: 22 }) }, RouteDesc { layout: 0, priority: 2, expr: ExprDesc::And(vec![ExprDesc::Pred(PredDesc { field: 245, transforms: 17, op: 216, lit: 18171, spelling: 13267, flaw: 37 }), ExprDesc::Pred(PredDesc { field: 39, transforms: 94, op: 164, lit: 10113, spelling: 42904, flaw: 28 })]) }], requests: vec![RequestDesc { target: Some((7190, 49713)), extra: vec![(91, 4032), (97, 30919), (192, 42110)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((20090, 20976)), extra: vec![(210, 16388), (98, 18056), (85, 50290)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((25744, 2724)), extra: vec![(219, 14547), (133, 29634)], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![(5, 35978), (74, 34960), (55, 672)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((18409, 34129)), extra: vec![(24, 12870), (32, 51229), (119, 25799)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((10997, 2404)), extra: vec![(179, 18117), (178, 35328), (159, 46170)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((33541, 19034)), extra: vec![(77, 46557), (14, 58386)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((1389, 31724)), extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: Some((41558, 56713)), extra: vec![(14, 34320), (159, 8271)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((32343, 34920)), extra: vec![(216, 30498)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((51089, 41188)), extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: Some((1904, 40129)), extra: vec![(90, 8929)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((11010, 63997)), extra: vec![(231, 8248), (187, 48008)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((22035, 2299)), extra: vec![(167, 45734)], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![(76, 23215), (245, 63154)], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![(198, 39852)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((57784, 21384)), extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: None, extra: vec![(246, 14951), (78, 35105)], derived: vec![], bad: vec![] }, RequestDesc { target: Some((4577, 1542)), extra: vec![(189, 53027)], derived: vec![], bad: vec![(16, 33151)] }, RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }, RequestDesc { target: Some((42690, 9512)), extra: vec![(143, 28663)], derived: vec![], bad: vec![(60, 49936)] }] },
        // 59e95976
        Case { texts: vec![], steps: vec![], tight_limits: false, types: [Type::String, Type::IpCidr, Type::String, Type::String], routes: vec![RouteDesc { layout: 0, priority: 0, expr: ExprDesc::Pred(PredDesc { field: 169, transforms: 0, op: 0, lit: 42999, spelling: 0, flaw: 7 }) }], requests: vec![RequestDesc { target: None, extra: vec![], derived: vec![], bad: vec![] }] },
    ];
    for case in cases {
        vs_kong::check(&case.render());
    }
}

/// Texts at the edges of the syntax that the generator writes rarely or never: whitespace
/// everywhere it may be and nowhere it need be, precedence without parentheses, groups of one,
/// integer and address spellings. Each is read alike by both parsers, or refused by both.
#[test]
fn syntax_edge_cases_are_read_alike() {
    const TEXTS: &[&str] = &[
        "lower( f0 ) == \"a\"",
        "( f0 == \"a\" )",
        "! ( f0 == \"a\" )",
        " \t\r\nf0 == \"a\"\n",
        "f0==\"a\"&&f1==\"b\"||f2==\"c\"",
        "f0 == \"a\" || f1 == \"b\" && f2 == \"c\" || f3 == \"d\"",
        "((f0 == \"a\"))",
        "!(!(f0 == \"a\"))",
        "any(lower(any(f0))) ^= \"a\"",
        "f0 == -0",
        "f0 == 00",
        "f0 == -00",
        "f0 == 0x0",
        "f0 == 0xaBc",
        "f0 == 0777",
        "f0 == 08",
        "f0 == 0800",
        "f0 == 9223372036854775807",
        "f0 == -9223372036854775807",
        "f0 == 0x7fffffffffffffff",
        "f0 in 10.0.0.0/00",
        "f0 in ::/000",
        "f0 in ::/0128",
        "f0 == ::",
        "f0 == 1::",
        "f0 == 1:2:3:4:5:6:7:8",
        "f0 == 2001:DB8::1",
        "f0 == 0:0:0:0:0:0:0:1",
        "f0 == 255.255.255.255",
        "f0 in10.0.0.0/8",
        "f0 not in::/0",
        "f0 contains\"a\"",
        "not in ::/0",
        "not not in ::/0",
        "in in 10.0.0.0/8",
        "f0 == r#\"a\"b\"#",
        "f0 == \"\\\\\"",
        "f0 == \"\\\"#\"",
        "f0 == \"é🦀\u{0}\"",
        "a.b.c_d.E9 == 1",
        "h. == \"x\"",
        "f0 == \"a\" &&",
        "&& f0 == \"a\"",
        "f0 == \"a\" f1 == \"b\"",
        "()",
        "",
    ];
    let mut both = 0;
    for t in TEXTS {
        both += usize::from(vs_kong::same_tree(t, t));
        let ours = atc_router::parse(t).is_ok();
        let kong = kong::parser::parse(t).is_ok();
        assert_eq!(ours, kong, "{t:?}: ours parses: {ours}, Kong's: {kong}");
    }
    assert!(both * 10 >= TEXTS.len() * 7, "{both} of {}", TEXTS.len());
}

/// Guards the power of the tests above: if the generator stopped producing routes both
/// accept, requests that match, recorded values or every kind of refusal, agreement would
/// hold trivially.
#[test]
fn generated_cases_exercise_the_comparison() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut total = vs_kong::Stats::default();
    for _ in 0..60 {
        let case: Case = gen::case_strategy(1..40, 1..24)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        total.add(&vs_kong::check(&case.render()));
    }
    println!("{total:#?}");
    assert!(total.accepted * 10 >= total.routes * 6, "{total:#?}");
    assert!(total.refused_by_both * 20 >= total.routes, "{total:#?}");
    assert!(total.matched * 10 >= total.requests * 5, "{total:#?}");
    assert!(total.with_values * 10 >= total.matched * 2, "{total:#?}");
    assert!(
        total.leaks > 0 && total.bad_values > 0 && total.ours_only > 0,
        "{total:#?}"
    );
    assert!(
        total
            .documented_refusals
            .contains_key("lower() with uppercase literal"),
        "{total:#?}"
    );
    assert!(total.extensions.contains_key("set literals"), "{total:#?}");
}

// ---- Our side only: what would abort Kong's process must be a clean error here. ----

const ERRLEN: usize = 512;

fn errbuf() -> (Vec<u8>, usize) {
    (vec![0u8; ERRLEN], ERRLEN)
}

/// A C ABI router over the case's schema.
struct Abi {
    schema: *mut AtcSchema,
    router: *mut AtcRouter,
    context: *mut AtcContext,
}

impl Abi {
    fn new(case: &gen::Rendered) -> Abi {
        unsafe {
            let schema = atc_schema_new();
            for (name, ty) in &case.schema {
                let code = match ty {
                    atc_router::Type::String => ATC_TYPE_STRING,
                    atc_router::Type::Int => ATC_TYPE_INT,
                    atc_router::Type::IpAddr => ATC_TYPE_IPADDR,
                    atc_router::Type::IpCidr => ATC_TYPE_IPCIDR,
                };
                let (mut e, mut n) = errbuf();
                let rc = atc_schema_add_field(
                    schema,
                    name.as_ptr().cast(),
                    name.len(),
                    code,
                    e.as_mut_ptr().cast(),
                    &mut n,
                );
                assert_eq!(rc, ATC_OK);
            }
            let (mut e, mut n) = errbuf();
            let router = atc_router_new(schema, e.as_mut_ptr().cast(), &mut n);
            let (mut e, mut n) = errbuf();
            let context = atc_context_new(schema, e.as_mut_ptr().cast(), &mut n);
            assert!(!router.is_null() && !context.is_null());
            Abi {
                schema,
                router,
                context,
            }
        }
    }

    fn len(&self) -> usize {
        let mut n = 0;
        assert_eq!(unsafe { atc_router_len(self.router, &mut n) }, ATC_OK);
        n
    }

    /// Adds a route; the status and the error message.
    fn add(&mut self, id: &[u8], priority: u64, expr: &[u8]) -> (i32, String) {
        let (mut e, mut n) = errbuf();
        let rc = unsafe {
            atc_router_add(
                self.router,
                priority,
                id.as_ptr().cast::<c_char>(),
                id.len(),
                expr.as_ptr().cast::<c_char>(),
                expr.len(),
                e.as_mut_ptr().cast(),
                &mut n,
            )
        };
        (
            rc,
            String::from_utf8_lossy(&e[..n.min(ERRLEN)]).into_owned(),
        )
    }
}

impl Drop for Abi {
    fn drop(&mut self) {
        unsafe {
            atc_context_free(self.context);
            atc_router_free(self.router);
            atc_schema_free(self.schema);
        }
    }
}

/// `bytes` with an invalid UTF-8 sequence put in at `at` (a lone continuation byte, a cut
/// multi-byte sequence, an overlong form, a surrogate).
fn corrupt(bytes: &[u8], at: usize, kind: u8) -> Vec<u8> {
    let bad: &[u8] = match kind % 4 {
        0 => b"\x80",
        1 => b"\xe2\x82",
        2 => b"\xc0\xaf",
        _ => b"\xed\xa0\x80",
    };
    let at = at % (bytes.len() + 1);
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(bad);
    out.extend_from_slice(&bytes[at..]);
    out
}

const BAD_IDS: &[&str] = &[
    "",
    "x",
    "a921a9aa-ec0e-4cf3-a6cc-1aa5583d150",
    "a921a9aa-ec0e-4cf3-a6cc-1aa5583d150cc",
    "g921a9aa-ec0e-4cf3-a6cc-1aa5583d150c",
    "a921a9aa_ec0e_4cf3_a6cc_1aa5583d150c",
    "{a921a9aa-ec0e-4cf3-a6cc-1aa5583d150c",
];

proptest! {
    #![proptest_config(Config { cases: cases(64), ..Config::default() })]

    /// Expressions with invalid UTF-8, valid expressions under invalid ids, and request values
    /// with invalid UTF-8: Kong's library aborts on each (`to_str().unwrap()`,
    /// `expect("invalid UUID format")`); ours refuses each with its own status and changes
    /// nothing.
    #[test]
    fn what_aborts_kong_is_a_clean_error_here(
        case in gen::case_strategy(1..8, 1..4),
        at in any::<usize>(),
        kind in any::<u8>(),
        bad_id in prop::sample::select(BAD_IDS),
    ) {
        let case = case.render();
        let mut abi = Abi::new(&case);
        for (i, r) in case.routes.iter().enumerate() {
            let id = r.id.hyphenated().to_string();
            let before = abi.len();
            let (rc, msg) = abi.add(id.as_bytes(), r.priority, &corrupt(r.text.as_bytes(), at, kind));
            prop_assert_eq!(rc, ATC_ERR_UTF8, "{}", msg);
            prop_assert!(!msg.is_empty());
            let (rc, msg) = abi.add(bad_id.as_bytes(), r.priority, r.text.as_bytes());
            prop_assert_eq!(rc, ATC_ERR_UUID, "{:?}: {}", bad_id, msg);
            prop_assert_eq!(abi.len(), before);
            // The same route with its real id still goes in (or is refused as an expression).
            let (rc, _) = abi.add(id.as_bytes(), r.priority, r.text.as_bytes());
            prop_assert!(rc == ATC_OK || rc == ATC_ERR_EXPR, "route {} status {}", i, rc);
        }
        for req in &case.requests {
            for (field, value) in &req.values {
                let atc_router::Value::String(s) = value else { continue };
                let (mut fid, mut fty) = (0u32, 0i32);
                let (mut e, mut n) = errbuf();
                let rc = unsafe {
                    atc_context_field_id(abi.context, field.as_ptr().cast(), field.len(),
                        &mut fid, &mut fty, e.as_mut_ptr().cast(), &mut n)
                };
                prop_assert_eq!(rc, ATC_OK);
                let bytes = corrupt(s.as_bytes(), at, kind);
                let (mut e, mut n) = errbuf();
                let rc = unsafe {
                    atc_context_add_str(abi.context, fid, bytes.as_ptr().cast(), bytes.len(),
                        e.as_mut_ptr().cast(), &mut n)
                };
                prop_assert_eq!(rc, ATC_ERR_UTF8);
            }
            unsafe { atc_context_reset(abi.context) };
        }
    }
}

/// Routes as Kong itself generates them: the workload's `kong-traditional` family is what
/// Kong's `traditional_compatible` flavour makes of traditional routes (host alternatives with
/// wildcards and ports, several paths split by length, regex paths, methods, a tenant header
/// under `any(lower(...))`, the SNI clause, Kong's packed priorities with their many ties).
/// Both libraries route every request of every mix alike, with the same matched values and
/// captures, before and after half the routes go.
#[test]
fn kong_traditional_tables_are_routed_alike() {
    use atc_workload::{requests, Family, Mix, Table};
    let schema: Vec<(String, atc_router::Type)> = atc_router::request::HTTP_FIELDS
        .iter()
        .map(|&(n, t)| (n.to_owned(), t))
        .collect();
    let mut total = vs_kong::Stats::default();
    // The largest past the size from which a router matches from its flat index.
    for (n, seed) in [(60, 1), (900, 2), (1_500, 3)] {
        let table = Table::family(Family::KongTraditional, n, seed);
        let routes = table
            .routes
            .iter()
            .map(|r| gen::RenderedRoute {
                id: atc_router::Uuid::from_bytes(r.id),
                priority: r.priority,
                text: r.expression.clone(),
                kong_text: Some(r.expression.clone()),
            })
            .collect();
        let reqs = Mix::all()
            .into_iter()
            .flat_map(|mix| requests(&table, mix, 60, seed))
            .map(|req| gen::RenderedRequest {
                values: req
                    .fields
                    .iter()
                    .map(|(f, v)| {
                        let v = match v {
                            atc_workload::Value::Str(s) => atc_router::Value::String(s.clone()),
                            atc_workload::Value::Int(i) => atc_router::Value::Int(*i),
                            atc_workload::Value::Ip(a) => atc_router::Value::IpAddr(*a),
                        };
                        (f.clone(), v)
                    })
                    .collect(),
                bad_values: Vec::new(),
            })
            .collect();
        let case = gen::Rendered {
            schema: schema.clone(),
            routes,
            requests: reqs,
            steps: Vec::new(),
            slots: Vec::new(),
            limits: atc_router::Limits::default(),
        };
        total.add(&vs_kong::check(&case));
    }
    println!("{total:#?}");
    assert_eq!(total.accepted, total.routes, "{total:#?}");
    assert!(total.matched * 2 >= total.requests, "{total:#?}");
    assert!(total.with_values * 10 >= total.matched, "{total:#?}");
}
