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
