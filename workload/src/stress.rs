//! The stress families: route shapes that no gateway family of the mixed table has, each pushing
//! one dimension of a table far past what the mixed table does (docs/performance.md, "Stress
//! families"). They are not in [`Family::SHARES`](crate::Family::SHARES), so the mixed table does not change with them,
//! and not in [`Family::all`](crate::Family::all); [`Family::stress`](crate::Family::stress) lists them.
//!
//! * `field-per-route`: every route tests a header of its own (`http.headers.x_tenant_<i>`):
//!   as many fields as routes, names sharing long prefixes.
//! * `unanchored-regex`: path regexes without anchor or literal prefix (`\w{30}x<tag>`,
//!   `\d{3,}-\w{10}/p<tag>`), on paths of 64 to 1,000 bytes.
//! * `alternations`: anchored alternations of tens to hundreds of literal paths
//!   (`^/(a|b|…)$`), and routes that are a `||` of many paths.
//! * `unicode-classes`: regexes of Unicode classes (`\p{L}+`, `[à-ÿ]`, `\w`), some `(?i)`, some
//!   anchored under a literal prefix, on non-ASCII paths.
//! * `long-hosts`: every route on a long host of its own (70 to 100 bytes, under a few shared
//!   domains), exact or wildcard: the host keys' unique parts are longer than a radix node
//!   holds in place.
//!
//! The public constructors build one route of each shape, for tables made with
//! [`crate::Table::from_shapes`] (the benchmarks' fixed cases: 500 routes of `\w{30}x<i>` on
//! 250-byte paths, one 1,000-way alternation...). Each route's regex carries a tag of its own
//! (see [`FreeRegex`]), so a request built for a route matches no other route of its table.

use crate::rng::Rng;
use crate::shape::{Alternation, CharClass, Cond, FreePart, FreeRegex, Header, PathMatch, Shape};
use crate::words::WORDS;

/// A route's tag: a marker and its number in six digits (fixed width, so that no tag is a
/// prefix of another).
fn tag(marker: &str, i: usize) -> String {
    format!("{marker}{i:06}")
}

fn run(class: CharClass, min: usize, max: Option<usize>) -> FreePart {
    FreePart::Run { class, min, max }
}

fn lit(s: impl Into<String>) -> FreePart {
    FreePart::Lit(s.into())
}

fn path(m: PathMatch) -> Shape {
    Shape::new(vec![Cond::Path(vec![m])])
}

fn unanchored(parts: Vec<FreePart>, unicode: bool, path_len: usize) -> PathMatch {
    PathMatch::Free(FreeRegex {
        parts,
        anchored: false,
        caseless: false,
        unicode,
        path_len,
    })
}

/// `http.path ~ "\w{30}x<i>"`; requests' paths are `path_len` bytes of letters around the match.
pub fn word_run(i: usize, path_len: usize) -> Shape {
    path(unanchored(
        vec![run(CharClass::Word, 30, Some(30)), lit(tag("x", i))],
        false,
        path_len,
    ))
}

/// `http.path ~ "\d{3,}-\w{10}/p<i>"`; requests' paths as for [`word_run`].
pub fn digits_word(i: usize, path_len: usize) -> Shape {
    path(unanchored(
        vec![
            run(CharClass::Digit, 3, None),
            lit("-"),
            run(CharClass::Word, 10, Some(10)),
            lit(tag("/p", i)),
        ],
        false,
        path_len,
    ))
}

/// `http.path ~ "^/(<b_0>|…|<b_k>)$"`: one route of `branches` literal paths (`<word>-<i>-<k>`);
/// miss-keys requests of its table have paths of `path_len` bytes.
pub fn alternation(i: usize, branches: usize, path_len: usize) -> Shape {
    let branches = (0..branches)
        .map(|k| format!("{}-{i}-{k}", WORDS[(i + k) % WORDS.len()]))
        .collect();
    path(PathMatch::Alternation(Alternation {
        prefix: "/".into(),
        branches,
        path_len,
    }))
}

/// `http.host == "<API_HOST>" && http.path == "/svc<i>/v1"`: thousands of these are one host
/// whose routes differ by exact path only, the table where a route change meets the index's
/// largest map.
pub fn one_host_exact_path(i: usize) -> Shape {
    Shape::new(vec![
        Cond::Host(crate::API_HOST.into()),
        Cond::Path(vec![PathMatch::Exact(format!("/svc{i}/v1"))]),
    ])
}

/// `http.headers.x_tenant_<i> == "yes"`.
pub fn own_header(i: usize) -> Shape {
    Shape::new(vec![Cond::Header(Header {
        name: format!("x_tenant_{i}"),
        value: "yes".into(),
        any: false,
        lower: false,
    })])
}

/// The domains the long hosts share (a region each): what their keys have in common.
const LONG_DOMAINS: &[&str] = &[
    "customer-eu-west-1.example-enterprise-gateway.com",
    "customer-us-east-2.example-enterprise-gateway.com",
    "customer-ap-southeast-1.example-enterprise-gateway.com",
    "services.internal.platform.example-corporation.net",
];

/// `n` routes, each on a host of its own, `tenant-<i>-<word>-<word>.<domain>` (70 to 100 bytes):
/// half exact (`http.host == "..."`), half wildcards (`http.host =^ ".<host>"`), each with a path
/// prefix. The shared domains make the host keys share long tails, and the tenant part (over
/// 20 bytes) is each key's own.
pub(crate) fn long_hosts(n: usize, rng: &mut Rng) -> Vec<Shape> {
    (0..n)
        .map(|i| {
            let host = format!(
                "{}-{}-{}.{}",
                tag("tenant-", i),
                rng.pick_str(WORDS),
                rng.pick_str(WORDS),
                rng.pick_str(LONG_DOMAINS)
            );
            let host = if i % 2 == 0 {
                Cond::Host(host)
            } else {
                Cond::HostSuffix(format!(".{host}"))
            };
            let path = format!("/{}/", rng.pick_str(WORDS));
            Shape::new(vec![host, Cond::Path(vec![PathMatch::Prefix(path)])])
        })
        .collect()
}

/// Hosts of the field-per-route routes that name one.
const TENANT_HOSTS: &[&str] = &[
    "tenants.example.com",
    "tenants-eu.example.com",
    "tenants-us.example.com",
    "partners.example.com",
];

/// `n` routes each on a header of its own, a quarter of them on a host too; a third under
/// `lower(...)`, `any(...)` or both; values `yes` or a tenant's name.
pub(crate) fn field_per_route(n: usize, rng: &mut Rng) -> Vec<Shape> {
    (0..n)
        .map(|i| {
            let (any, lower) = match rng.below(9) {
                0 => (true, false),
                1 => (false, true),
                2 => (true, true),
                _ => (false, false),
            };
            let value = if rng.chance(0.3) {
                format!("t-{}", rng.below(1000))
            } else {
                "yes".into()
            };
            let mut conds = vec![Cond::Header(Header {
                name: format!("x_tenant_{i}"),
                value,
                any,
                lower,
            })];
            if rng.chance(0.25) {
                conds.push(Cond::Host(rng.pick_str(TENANT_HOSTS).into()));
            }
            Shape::new(conds)
        })
        .collect()
}

/// A path length: mostly short, a third 250 bytes, one in six 1,000 bytes.
fn path_len(rng: &mut Rng) -> usize {
    match rng.below(6) {
        0..=2 => 64,
        3 | 4 => 250,
        _ => 1000,
    }
}

/// `n` unanchored regexes, [`word_run`] and [`digits_word`] shapes half and half.
pub(crate) fn unanchored_regexes(n: usize, rng: &mut Rng) -> Vec<Shape> {
    (0..n)
        .map(|i| {
            let len = path_len(rng);
            if rng.chance(0.5) {
                word_run(i, len)
            } else {
                digits_word(i, len)
            }
        })
        .collect()
}

/// `n` routes: half anchored alternations of 32 to 320 literal paths, half a `||` of 2 to 24
/// paths (exact, or prefixes ending in `/`). Every path is distinct (its first segment ends in
/// the route's number and the path's).
pub(crate) fn alternations(n: usize, rng: &mut Rng) -> Vec<Shape> {
    (0..n)
        .map(|i| {
            if rng.chance(0.5) {
                let branches = 32 + rng.below(289);
                let mut s = alternation(i, branches, path_len(rng));
                if let Some(Cond::Path(alts)) = s.conds.first_mut() {
                    if let Some(PathMatch::Alternation(a)) = alts.first_mut() {
                        // some branches go deeper than one segment
                        for b in a.branches.iter_mut().step_by(3) {
                            b.push('/');
                            b.push_str(rng.pick_str(WORDS));
                        }
                    }
                }
                s
            } else {
                let k = 2 + rng.below(23);
                let alts = (0..k)
                    .map(|j| {
                        let seg = format!("/{}-{i}-{j}", rng.pick_str(WORDS));
                        if rng.chance(0.5) {
                            PathMatch::Exact(format!("{seg}/{}", rng.pick_str(WORDS)))
                        } else {
                            PathMatch::Prefix(format!("{seg}/"))
                        }
                    })
                    .collect();
                Shape::new(vec![Cond::Path(alts)])
            }
        })
        .collect()
}

/// `n` regexes of Unicode classes on non-ASCII paths, five shapes in turn: `\p{L}+/ñ<tag>`,
/// `[à-ÿ]{3,}-<tag>`, `(?i)ÉTÉ-\w{4,}-<tag>` (requests in lower case), `\w{8}ö<tag>` (all
/// unanchored), and `^/<wiki|вики>/\p{L}+/ü<tag>$` (anchored under a literal prefix).
pub(crate) fn unicode_classes(n: usize, rng: &mut Rng) -> Vec<Shape> {
    (0..n)
        .map(|i| {
            let (parts, anchored, caseless) = match rng.below(5) {
                0 => (
                    vec![run(CharClass::Letter, 1, None), lit(tag("/ñ", i))],
                    false,
                    false,
                ),
                1 => (
                    vec![run(CharClass::LatinSmall, 3, None), lit(tag("-", i))],
                    false,
                    false,
                ),
                2 => (
                    vec![lit("ÉTÉ-"), run(CharClass::Word, 4, None), lit(tag("-", i))],
                    false,
                    true,
                ),
                3 => (
                    vec![run(CharClass::Word, 8, Some(8)), lit(tag("ö", i))],
                    false,
                    false,
                ),
                _ => (
                    vec![
                        lit(*rng.pick(&["/wiki/", "/вики/"])),
                        run(CharClass::Letter, 1, None),
                        lit(tag("/ü", i)),
                    ],
                    true,
                    false,
                ),
            };
            path(PathMatch::Free(FreeRegex {
                parts,
                anchored,
                caseless,
                unicode: true,
                path_len: path_len(rng),
            }))
        })
        .collect()
}
