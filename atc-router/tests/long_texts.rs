//! Long values (past the 256 bytes where regexes move to the meta engine) get exactly what the
//! reference evaluator gives them: the same winner, the same matched value, the same captures.
//! Values of this length are what an attacker sends; a normal request never reaches this path.

use std::sync::Arc;

use atc_router::{Context, Router, Schema, Type, Uuid};
use proptest::prelude::*;

const PATTERNS: &[&str] = &[
    r"^/users/(?<id>\d+)/orders/(?<oid>\d+)$",
    r"/seg7/[a-z0-9]+\.json$",
    r"^/a[a-z]*z$",
    r"(?<word>\w+)@(?<host>[a-z.]+)",
    r"^/repos/(?<owner>[^/]+)/(?<repo>[^/]+)/issues/(?<n>\d+)$",
    r"[ΣΑ]+(?<tail>é*)",
    r"(a|ab)(c|bcd)(d*)",
    r"\bword\b",
    r"x{3,5}y?",
    r"(?i)^/API/(?<v>v\d)/",
    r"(?m)^end$",
    r"",
];

/// Pieces long values are made of: around a match, inside one, or with none.
const PIECES: &[&str] = &[
    "/users/",
    "123",
    "/orders/",
    "/seg7/",
    "abc9",
    ".json",
    "/a",
    "z",
    "word",
    "@",
    "ex.com",
    "/repos/",
    "o",
    "/r/issues/",
    "ΣΑ",
    "é",
    "ab",
    "cd",
    "xxx",
    "y",
    "/API/",
    "v2",
    "\nend\n",
    "-",
    " ",
    "/",
];

fn router() -> (Arc<Schema>, Router) {
    let mut s = Schema::new();
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("http.headers.*", Type::String).unwrap();
    let s = Arc::new(s);
    let mut r = Router::new(s.clone());
    for (i, p) in PATTERNS.iter().enumerate() {
        let expr = format!("http.path ~ {}", atc_router::Value::String((*p).to_owned()));
        r.add(Uuid::from_u128(i as u128), 1000 - i as u64, &expr)
            .unwrap();
    }
    (s, r)
}

/// The winner, its matched path and its captures (sorted).
type Outcome = Option<(Uuid, Option<String>, Vec<(String, String)>)>;

fn outcome(ctx: &Context) -> Outcome {
    ctx.result().map(|m| {
        let mut caps: Vec<(String, String)> = m.captures_map().into_iter().collect();
        caps.sort();
        (
            m.id(),
            m.matched_value("http.path").map(|v| v.to_string()),
            caps,
        )
    })
}

/// Every pattern alone on `value`, indexed against reference.
fn agree(schema: &Arc<Schema>, router: &Router, value: &str) {
    for (i, _) in PATTERNS.iter().enumerate() {
        let mut one = Router::new(schema.clone());
        let src = router
            .get(Uuid::from_u128(i as u128))
            .unwrap()
            .source()
            .to_owned();
        one.add(Uuid::from_u128(i as u128), 1, &src).unwrap();
        let mut ctx = Context::new(schema.clone());
        ctx.add_value("http.path", value).unwrap();
        let fast = one.execute(&mut ctx);
        let fast_out = outcome(&ctx);
        let slow = one.execute_reference(&mut ctx);
        assert_eq!(fast, slow, "{src} on {} bytes", value.len());
        assert_eq!(fast_out, outcome(&ctx), "{src} on {} bytes", value.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn long_values_get_the_reference_result(
        pieces in prop::collection::vec(prop::sample::select(PIECES), 40..400),
        pad in 0usize..600,
    ) {
        let (schema, router) = router();
        let value: String = pieces.concat();
        agree(&schema, &router, &value);
        agree(&schema, &router, &format!("{}{value}", "q".repeat(pad)));
        agree(&schema, &router, &format!("{value}{}", "/".repeat(pad)));
    }
}

#[test]
fn long_matches_and_long_misses_around_the_threshold() {
    let (schema, router) = router();
    for n in [250, 256, 257, 300, 4096, 1 << 16] {
        let a = "a".repeat(n);
        let digits = "7".repeat(n);
        for value in [
            format!("/a{a}z"),
            format!("/a{a}"),
            format!("/users/{digits}/orders/{digits}"),
            format!("/users/{digits}/orders/x"),
            format!("{a}/seg7/{a}.json"),
            format!("{}word{}", " ".repeat(n), " ".repeat(n)),
            format!("/repos/{a}/{a}/issues/{digits}"),
            "ΣΑé".repeat(n / 4),
        ] {
            agree(&schema, &router, &value);
        }
    }
}
