//! Route expression generation, one function per [`RouteClass`].
//!
//! Every expression of a class carries a *marker* `<family>-<token>` inside a string literal
//! (a host `svc-17.example.com`, a path `/static-17/`, a regex prefix `^/rx-17/`), preceded by
//! `"`, `.` or `/`. Tokens are unique per route (the generation index, or a random `x…` token
//! for changed and extra routes), which is what keeps routes disjoint, and the family word tells
//! [`RouteClass::classify`] the class back.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::rng::{fnv1a, Rng};
use crate::RouteClass;

/// Path words. No hyphens (so no word looks like a marker), no `static`/`internal`/`no`.
pub(crate) const WORDS: &[&str] = &[
    "api",
    "v1",
    "v2",
    "v3",
    "orders",
    "users",
    "items",
    "cart",
    "checkout",
    "search",
    "catalog",
    "products",
    "accounts",
    "billing",
    "payments",
    "profile",
    "auth",
    "login",
    "media",
    "reports",
    "events",
    "admin",
    "inventory",
    "shipping",
    "reviews",
    "feeds",
    "graphql",
    "webhooks",
    "status",
    "metrics",
    "docs",
    "files",
    "images",
    "news",
    "blog",
    "support",
    "help",
    "settings",
    "teams",
    "projects",
];

/// (family word, class) for every marker family.
pub(crate) const MARKERS: &[(&str, RouteClass)] = &[
    ("svc", RouteClass::Prefix),
    ("app", RouteClass::Ingress),
    ("rx", RouteClass::Regex),
    ("tenant", RouteClass::Wildcard),
    ("rest", RouteClass::MethodSet),
    ("ver", RouteClass::Header),
    ("static", RouteClass::PathOnly),
    ("port", RouteClass::Network),
    ("sni", RouteClass::Network),
    ("internal", RouteClass::Network),
    ("seg", RouteClass::Other),
    ("query", RouteClass::Other),
    ("has", RouteClass::Other),
    ("neg", RouteClass::Other),
    ("ne", RouteClass::Other),
    ("ge", RouteClass::Other),
    ("sfx", RouteClass::Other),
    ("nin", RouteClass::Other),
];

/// 10 shapes × 5 resource pairs = 50 regex templates. `{r}` / `{s}` are replaced by a resource
/// and a sub-resource. Written in regex syntax (single backslashes).
const REGEX_SHAPES: &[&str] = &[
    r"/{r}/(?<id>\d+)",
    r"/{r}/(?<id>\d+)/{s}",
    r"/{r}/(?<id>\d+)/{s}/(?<sid>\d+)",
    r"/{r}/(?<slug>[a-z0-9]+(?:-[a-z0-9]+)*)",
    r"/{r}/(?<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
    r"/{r}/(?<id>\d+)\.(?<fmt>json|xml|csv)",
    r"/{r}/(?<year>\d{4})/(?<month>\d{2})/(?<name>[^/]+)",
    r"/v(?<ver>\d+)/{r}/(?<id>\d+)",
    r"/{r}/(?<id>\d+)/{s}(?:/(?<sid>\d+))?",
    r"/{r}/(?<name>[A-Za-z_]\w*)/{s}",
];

const REGEX_RESOURCES: &[(&str, &str)] = &[
    ("users", "orders"),
    ("products", "reviews"),
    ("accounts", "invoices"),
    ("projects", "issues"),
    ("repos", "commits"),
];

/// Number of distinct regex templates.
pub(crate) const REGEX_TEMPLATES: usize = 50;

/// The `k`-th regex template (`k < REGEX_TEMPLATES`), without anchors or route prefix.
pub(crate) fn regex_template(k: usize) -> String {
    let shape = REGEX_SHAPES[k % REGEX_SHAPES.len()];
    let (r, s) = REGEX_RESOURCES[k / REGEX_SHAPES.len() % REGEX_RESOURCES.len()];
    shape.replace("{r}", r).replace("{s}", s)
}

/// A string literal in the language's `"..."` form (escapes `\\` and `\"` only).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A string literal, as a raw string `r#"..."#` when `raw` and possible.
fn quote_maybe_raw(s: &str, raw: bool) -> String {
    if raw && !s.contains("\"#") {
        format!("r#\"{s}\"#")
    } else {
        quote(s)
    }
}

/// `"/w1/w2"` with 1..=`max` random words.
fn words_path(rng: &mut Rng, min: usize, max: usize) -> Vec<&'static str> {
    let k = min + rng.below(max - min + 1);
    (0..k).map(|_| *rng.pick(WORDS)).collect()
}

fn host(family: &str, token: &str) -> String {
    format!("{family}-{token}.example.com")
}

/// Which side of a method pair a [`RouteClass::MethodSet`] route is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// `(GET || HEAD)`
    Read,
    /// a write-method set
    Write,
}

/// The expression of a route of `class` with unique `token`. For `MethodSet`, `side` picks the
/// pair member (host and path derive from the token alone, so both members share them).
pub(crate) fn expression(class: RouteClass, token: &str, side: Side, rng: &mut Rng) -> String {
    match class {
        RouteClass::Prefix => {
            let depth = 1 + rng.below(3);
            let segs = words_path(rng, depth, depth + 1);
            let prefixes: Vec<String> = (0..depth)
                .map(|j| {
                    format!(
                        "http.path ^= {}",
                        quote(&format!("/{}", segs[..segs.len() - j].join("/")))
                    )
                })
                .collect();
            let paths = if depth == 1 {
                prefixes[0].clone()
            } else {
                format!("({})", prefixes.join(" || "))
            };
            format!("http.host == {} && {paths}", quote(&host("svc", token)))
        }
        RouteClass::Ingress => {
            let p = words_path(rng, 1, 2).join("/");
            format!(
                "http.host == {} && (http.path ^= {} || http.path ~ {})",
                quote(&host("app", token)),
                quote(&format!("/{p}/")),
                quote(&format!("^/{p}$"))
            )
        }
        RouteClass::Regex => {
            let re = format!(
                "^/rx-{token}{}$",
                regex_template(rng.below(REGEX_TEMPLATES))
            );
            let raw = rng.chance(0.3);
            let pred = format!("http.path ~ {}", quote_maybe_raw(&re, raw));
            if rng.chance(0.5) {
                format!("http.host == {} && {pred}", quote(&host("rx", token)))
            } else {
                pred
            }
        }
        RouteClass::Wildcard => {
            let path = if rng.chance(0.7) {
                "/".to_string()
            } else {
                format!("/{}/", rng.pick(WORDS))
            };
            format!(
                "http.host =^ {} && http.path ^= {}",
                quote(&format!(".tenant-{token}.example.com")),
                quote(&path)
            )
        }
        RouteClass::MethodSet => {
            // host and path from the token, so both members of a pair agree
            let mut trng = Rng::new(fnv1a(token.as_bytes()), 0x5e7);
            let path = format!("/{}", words_path(&mut trng, 1, 2).join("/"));
            const WRITES: &[&[&str]] = &[
                &["POST", "PUT"],
                &["POST", "PUT", "PATCH"],
                &["POST"],
                &["PUT", "DELETE"],
                &["DELETE"],
            ];
            let methods: &[&str] = match side {
                Side::Read => &["GET", "HEAD"],
                Side::Write => WRITES[rng.below(WRITES.len())],
            };
            let preds: Vec<String> = methods
                .iter()
                .map(|m| format!("http.method == {}", quote(m)))
                .collect();
            let methods = if preds.len() == 1 {
                preds[0].clone()
            } else {
                format!("({})", preds.join(" || "))
            };
            format!(
                "{methods} && http.host == {} && http.path ^= {}",
                quote(&host("rest", token)),
                quote(&path)
            )
        }
        RouteClass::Header => {
            let header = match rng.below(4) {
                0 | 1 => "any(lower(http.headers.x_version)) == \"v2\"".to_string(),
                2 => "any(http.headers.x_canary) == \"true\"".to_string(),
                _ => format!(
                    "lower(http.headers.x_env) == {}",
                    quote(rng.pick_str(&["staging", "beta", "canary"]))
                ),
            };
            format!(
                "{header} && http.host == {} && http.path ^= {}",
                quote(&host("ver", token)),
                quote(&format!("/{}", rng.pick(WORDS)))
            )
        }
        RouteClass::PathOnly => format!("http.path ^= {}", quote(&format!("/static-{token}/"))),
        RouteClass::Network => match rng.below(3) {
            0 => format!(
                "http.host == {} && net.dst.port == {}",
                quote(&host("port", token)),
                rng.pick(&[8443, 8080, 9443, 8000, 3000])
            ),
            1 => format!("tls.sni == {}", quote(&host("sni", token))),
            _ => format!(
                "net.src.ip in {} && http.path ^= {}",
                random_cidr(rng),
                quote(&format!("/internal-{token}/"))
            ),
        },
        RouteClass::Other => {
            let h = |fam: &str| quote(&host(fam, token));
            match rng.below(8) {
                0 => format!(
                    "http.path.segments.{} == {} && http.host == {}",
                    rng.below(3),
                    quote(rng.pick_str(WORDS)),
                    h("seg")
                ),
                1 => format!(
                    "http.host == {} && http.queries.{} == {}",
                    h("query"),
                    rng.pick(&["debug", "preview", "trace"]),
                    quote(rng.pick_str(&["1", "true", "on"]))
                ),
                2 => format!(
                    "http.host == {} && http.path contains {}",
                    h("has"),
                    quote(&format!("/{}/", rng.pick(WORDS)))
                ),
                3 => format!(
                    "!(http.path ^= {}) && http.host == {}",
                    quote(&format!("/{}", rng.pick(WORDS))),
                    h("neg")
                ),
                4 => format!(
                    "http.host == {} && http.method != {}",
                    h("ne"),
                    quote(rng.pick_str(&["DELETE", "POST", "PUT"]))
                ),
                5 => {
                    let port: i64 = *rng.pick(&[1024, 8000, 9000]);
                    let lit = if rng.chance(0.25) {
                        format!("{port:#x}")
                    } else {
                        port.to_string()
                    };
                    format!("http.host == {} && net.dst.port >= {lit}", h("ge"))
                }
                6 => format!(
                    "http.host == {} && http.path =^ {}",
                    h("sfx"),
                    quote(rng.pick_str(&[".json", ".xml", ".html"]))
                ),
                _ => format!("http.host == {} && net.src.ip not in 10.0.0.0/8", h("nin")),
            }
        }
        RouteClass::CatchAll => crate::CATCH_ALL_EXPRESSION.to_string(),
    }
}

/// A CIDR with zero host bits: mostly IPv4 inside 10.0.0.0/8, sometimes IPv6 inside fd00::/8.
fn random_cidr(rng: &mut Rng) -> String {
    if rng.chance(0.75) {
        let len = *rng.pick(&[16u8, 20, 24]);
        let a = (10u32 << 24) | (rng.next_u64() as u32 & 0x00ff_ffff);
        let net = crate::expr::mask(IpAddr::V4(Ipv4Addr::from(a)), len);
        format!("{net}/{len}")
    } else {
        let len = *rng.pick(&[32u8, 48, 64]);
        let a = (0xfdu128 << 120) | (u128::from(rng.next_u64()) << 56);
        let net = crate::expr::mask(IpAddr::V6(Ipv6Addr::from(a)), len);
        format!("{net}/{len}")
    }
}

/// The class whose marker `expression` carries (see the module docs).
pub(crate) fn classify(expression: &str) -> Option<RouteClass> {
    if expression.trim() == crate::CATCH_ALL_EXPRESSION {
        return Some(RouteClass::CatchAll);
    }
    let b = expression.as_bytes();
    for (p, &c) in b.iter().enumerate() {
        if !matches!(c, b'"' | b'.' | b'/') {
            continue;
        }
        let rest = &b[p + 1..];
        for &(family, class) in MARKERS {
            let f = family.as_bytes();
            if rest.len() > f.len() + 1
                && rest.starts_with(f)
                && rest[f.len()] == b'-'
                && rest[f.len() + 1].is_ascii_alphanumeric()
            {
                return Some(class);
            }
        }
    }
    None
}
