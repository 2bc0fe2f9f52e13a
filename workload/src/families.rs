//! The generators of the families of docs/workload.md, each making route [`Shape`]s.
//!
//! Routes that share a key space (one host, the routes without a host, one tenant, one wildcard
//! host) take their path keys from one [`PathAlloc`], which never hands out a key that is
//! another's prefix: so within a family, a request built for a route is not taken by a sibling
//! on the same keys, and the heavy sharing of hosts, ports and methods is what the index has to
//! cope with, not an accident of overlapping paths. (Families of the mixed table also meet
//! only on their shared keys: their first path segments come from disjoint root lists.)

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::rest::{self, Piece};
use crate::rng::Rng;
use crate::shape::{Cidr, Cond, Header, Part, PathMatch, PathRegex, Shape};
use crate::words::{
    EXCLUDED, HOSTED_ROOTS, INGRESS_ROOTS, METHOD_ROOTS, OTHER_ROOTS, PATH_ROOTS, PORT_ROOTS,
    SNI_ROOTS, SOURCE_ROOTS, TENANT_ROOTS, WORDS,
};
use crate::{stress, Family};

/// The host of the `rest-api` and `tenant-header` families (the busiest host of the mixed table).
pub const API_HOST: &str = "api.example.com";

/// Share of ingress rules without a host (Kubernetes rules without `host:`).
const HOSTLESS_INGRESS: f64 = 0.6;

/// Path keys that are never another key's prefix, segment-wise (see the module docs).
#[derive(Default)]
pub(crate) struct PathAlloc {
    taken: HashSet<String>,
    inner: HashSet<String>,
    /// Keys handed out with a numbered last segment, once random words stop finding room.
    numbered: usize,
}

impl PathAlloc {
    /// A fresh key `/root/word/...` of `min..=max` segments (deeper when the space is full).
    pub(crate) fn alloc(
        &mut self,
        rng: &mut Rng,
        roots: &[&str],
        min: usize,
        max: usize,
    ) -> String {
        let mut depth = min + rng.below(max - min + 1);
        for _ in 0..2 {
            for _ in 0..24 {
                let mut segs = vec![*rng.pick(roots)];
                segs.extend((1..depth).map(|_| *rng.pick(WORDS)));
                if let Some(key) = self.try_take(&segs) {
                    return key;
                }
            }
            depth += 1;
        }
        // The words are running out (100,000 routes on one key space): a numbered segment,
        // fixed-width so that none is a byte prefix of another, under a random free prefix.
        // Where no free prefix is left (every root, or every root and word, already a key of
        // its own), the numbered segment becomes the root: no word starts with `z9`.
        let mut attempts = 0;
        loop {
            attempts += 1;
            self.numbered += 1;
            if attempts > 1000 {
                let key = format!("z9{:07}", self.numbered);
                if let Some(key) = self.try_take(&[&key]) {
                    return key;
                }
                continue;
            }
            let mut segs: Vec<String> = vec![(*rng.pick(roots)).to_owned()];
            segs.extend((2..depth.max(2)).map(|_| (*rng.pick(WORDS)).to_owned()));
            segs.push(format!("z9{:07}", self.numbered));
            let refs: Vec<&str> = segs.iter().map(String::as_str).collect();
            if let Some(key) = self.try_take(&refs) {
                return key;
            }
        }
    }

    fn try_take(&mut self, segs: &[&str]) -> Option<String> {
        let key = format!("/{}", segs.join("/"));
        if self.taken.contains(&key) || self.inner.contains(&key) {
            return None;
        }
        let prefixes: Vec<String> = (1..segs.len())
            .map(|k| format!("/{}", segs[..k].join("/")))
            .collect();
        if prefixes.iter().any(|p| self.taken.contains(p)) {
            return None;
        }
        self.inner.extend(prefixes);
        self.taken.insert(key.clone());
        Some(key)
    }
}

/// Routes per host (or per tenant, per wildcard host): a few dozen mostly, now and then four
/// times as many. Integer draws only, so every platform gets the same table.
fn group_sizes(rng: &mut Rng, total: usize, small: bool) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = total;
    while left > 0 {
        let mut s = if small {
            // tenants and wildcard hosts: two in five have one route, the others a handful
            if rng.chance(0.4) {
                1
            } else {
                2 + rng.below(4) + rng.below(4) + rng.below(4)
            }
        } else {
            6 + rng.below(20) + rng.below(20) + rng.below(20)
        };
        if rng.chance(0.08) {
            s *= 4;
        }
        let s = s.min(left);
        out.push(s);
        left -= s;
    }
    out
}

/// Distinct numbers for names (`svc-<k>`), uncorrelated with the groups' sizes.
fn numbering(rng: &mut Rng, count: usize) -> Vec<usize> {
    let mut ks: Vec<usize> = (1..=count.max(1) * 3).collect();
    rng.shuffle(&mut ks);
    ks.truncate(count);
    ks
}

fn prefix(p: impl Into<String>) -> Cond {
    Cond::Path(vec![PathMatch::Prefix(p.into())])
}

fn host_prefixes(host: &str, alloc: &mut PathAlloc, rng: &mut Rng) -> Shape {
    let key = alloc.alloc(rng, HOSTED_ROOTS, 1, 2);
    let n = match rng.below(10) {
        0..=4 => 1,
        5..=7 => 2,
        _ => 3,
    };
    // the key and n - 1 nested extensions of it, deepest first, as gateway configs list them
    let mut alts = vec![key];
    for _ in 1..n {
        let deeper = format!("{}/{}", alts[0], rng.pick_str(WORDS));
        alts.insert(0, deeper);
    }
    Shape::new(vec![
        Cond::Host(host.to_string()),
        Cond::Path(alts.into_iter().map(PathMatch::Prefix).collect()),
    ])
}

fn ingress(host: Option<&str>, alloc: &mut PathAlloc, rng: &mut Rng) -> Shape {
    let key = match host {
        Some(_) => alloc.alloc(rng, HOSTED_ROOTS, 1, 2),
        None => alloc.alloc(rng, INGRESS_ROOTS, 2, 3),
    };
    let exact = PathRegex {
        parts: vec![Part::Lit(key.clone())],
        raw: false,
        open: false,
    };
    let mut conds: Vec<Cond> = host
        .map(|h| Cond::Host(h.to_string()))
        .into_iter()
        .collect();
    conds.push(Cond::Path(vec![
        PathMatch::Prefix(format!("{key}/")),
        PathMatch::Regex(exact),
    ]));
    Shape::new(conds)
}

fn header_only(host: &str, alloc: &mut PathAlloc, rng: &mut Rng) -> Shape {
    let header = match rng.below(4) {
        0 | 1 => Header {
            name: "x_version".into(),
            value: "v2".into(),
            any: true,
            lower: true,
        },
        2 => Header {
            name: "x_canary".into(),
            value: "true".into(),
            any: true,
            lower: false,
        },
        _ => Header {
            name: "x_env".into(),
            value: rng.pick_str(&["staging", "beta", "canary"]).into(),
            any: false,
            lower: true,
        },
    };
    let key = alloc.alloc(rng, HOSTED_ROOTS, 1, 2);
    Shape::new(vec![
        Cond::Header(header),
        Cond::Host(host.to_string()),
        prefix(key),
    ])
}

fn method_pair(alloc: &mut PathAlloc, rng: &mut Rng) -> [Shape; 2] {
    const WRITES: &[&[&str]] = &[
        &["POST"],
        &["POST", "PUT"],
        &["PUT", "PATCH"],
        &["DELETE"],
        &["POST", "PUT", "PATCH", "DELETE"],
    ];
    let key = alloc.alloc(rng, METHOD_ROOTS, 2, 3);
    let methods = |ms: &[&str]| Cond::Methods(ms.iter().map(|m| m.to_string()).collect());
    [
        Shape::new(vec![methods(&["GET", "HEAD"]), prefix(key.clone())]),
        Shape::new(vec![methods(WRITES[rng.below(WRITES.len())]), prefix(key)]),
    ]
}

fn cidr(a: IpAddr, len: u8) -> Cidr {
    Cidr { addr: a, len }
}

fn network(alloc: &mut PathAlloc, rng: &mut Rng) -> Shape {
    // a few shared values each, the first much the most common
    match rng.below(20) {
        0..=8 => {
            let port = [
                8443, 8443, 8443, 8443, 8443, 8443, 8080, 8080, 8080, 9443, 3000,
            ];
            let key = alloc.alloc(rng, PORT_ROOTS, 2, 3);
            Shape::new(vec![
                Cond::Port(*rng.pick(&port)),
                prefix(format!("{key}/")),
            ])
        }
        9..=14 => {
            let sni = [
                "secure.example.com",
                "secure.example.com",
                "secure.example.com",
                "secure.example.com",
                "secure.example.com",
                "mtls.example.com",
                "mtls.example.com",
                "mtls.example.com",
                "partners.example.com",
                "partners.example.com",
            ];
            let key = alloc.alloc(rng, SNI_ROOTS, 2, 3);
            Shape::new(vec![
                Cond::Sni(rng.pick_str(&sni).to_string()),
                prefix(format!("{key}/")),
            ])
        }
        _ => {
            let nets = [
                cidr(IpAddr::V4(Ipv4Addr::new(10, 12, 0, 0)), 16),
                cidr(IpAddr::V4(Ipv4Addr::new(10, 12, 0, 0)), 16),
                cidr(IpAddr::V4(Ipv4Addr::new(10, 12, 0, 0)), 16),
                cidr(IpAddr::V4(Ipv4Addr::new(10, 12, 0, 0)), 16),
                cidr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8),
                cidr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8),
                cidr(IpAddr::V4(Ipv4Addr::new(172, 16, 0, 0)), 12),
                cidr(
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 0x12, 0, 0, 0, 0, 0, 0)),
                    32,
                ),
            ];
            let key = alloc.alloc(rng, SOURCE_ROOTS, 2, 3);
            Shape::new(vec![
                Cond::SrcIn(*rng.pick(&nets)),
                prefix(format!("{key}/")),
            ])
        }
    }
}

/// Routes no index can key on (probes for leaked files and foreign stacks), a few per table.
const PURE_OTHER: &[(bool, &str)] = &[
    (true, "/.git/"),
    (false, ".php"),
    (true, "/wp-admin/"),
    (false, ".env"),
];

fn other_operator(k: usize, pure: bool, alloc: &mut PathAlloc, rng: &mut Rng) -> Shape {
    if pure {
        let (contains, lit) = PURE_OTHER[k % PURE_OTHER.len()];
        let m = if contains {
            PathMatch::Contains(lit.into())
        } else {
            PathMatch::Suffix(lit.into())
        };
        return Shape::new(vec![Cond::Path(vec![m])]);
    }
    let key = alloc.alloc(rng, OTHER_ROOTS, 2, 3);
    let path = |m: PathMatch| Cond::Path(vec![m]);
    let conds = match rng.below(8) {
        0 => vec![
            prefix(key),
            path(PathMatch::Contains(
                rng.pick_str(&["/export/", "/download/", "/print/"]).into(),
            )),
        ],
        1 => vec![
            prefix(key),
            path(PathMatch::Suffix(
                rng.pick_str(&[".json", ".xml", ".csv"]).into(),
            )),
        ],
        2 => vec![Cond::Segments(
            key.trim_start_matches('/')
                .split('/')
                .map(str::to_string)
                .collect(),
        )],
        3 => vec![
            prefix(key),
            Cond::Query {
                name: rng.pick_str(&["debug", "preview", "trace"]).into(),
                value: rng.pick_str(&["1", "true", "on"]).into(),
            },
        ],
        4 => vec![
            prefix(key.clone()),
            Cond::PathNotPrefix(format!("{key}/{EXCLUDED}")),
        ],
        5 => vec![
            prefix(key),
            Cond::MethodNot(rng.pick_str(&["DELETE", "POST", "PUT"]).into()),
        ],
        6 => vec![
            prefix(key),
            Cond::PortAtLeast {
                port: *rng.pick(&[1024, 8000, 9000]),
                hex: rng.chance(0.25),
            },
        ],
        _ => vec![
            prefix(key),
            Cond::SrcNotIn(cidr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8)),
        ],
    };
    Shape::new(conds)
}

fn path_only(alloc: &mut PathAlloc, rng: &mut Rng) -> Shape {
    let key = alloc.alloc(rng, PATH_ROOTS, 2, 3);
    Shape::new(vec![prefix(format!("{key}/"))])
}

/// The path prefix of the `copy`-th copy of the REST list: none, then versions, then tenants.
fn rest_prefix(copy: usize) -> String {
    match copy {
        0 => String::new(),
        1..=3 => format!("/v{}", copy + 1),
        _ => format!("/t{}", copy - 3),
    }
}

/// `n` routes of the REST list, copy after copy (each copy under its own path prefix, in an
/// order of its own, so a partial last copy is a random part of the list).
fn rest_api(n: usize, rng: &mut Rng) -> Vec<Shape> {
    let base = rest::routes();
    let mut out = Vec::with_capacity(n);
    let mut copy = 0;
    while out.len() < n {
        let pre = rest_prefix(copy);
        let mut order: Vec<usize> = (0..base.len()).collect();
        rng.shuffle(&mut order);
        for &i in order.iter().take(n - out.len()) {
            let (method, path) = base[i];
            let pieces = rest::pieces(path);
            let path = if pieces.iter().all(|p| matches!(p, Piece::Static(_))) {
                PathMatch::Exact(format!("{pre}{path}"))
            } else {
                let mut parts = Vec::new();
                let mut lit = pre.clone();
                for p in pieces {
                    lit.push('/');
                    match p {
                        Piece::Static(s) => lit.push_str(s),
                        Piece::Param(name, kind) => {
                            parts.push(Part::Lit(std::mem::take(&mut lit)));
                            parts.push(Part::Param {
                                name: name.to_string(),
                                kind,
                            });
                        }
                    }
                }
                if !lit.is_empty() {
                    parts.push(Part::Lit(lit));
                }
                PathMatch::Regex(PathRegex {
                    parts,
                    raw: rng.chance(0.8),
                    open: false,
                })
            };
            out.push(Shape::new(vec![
                Cond::Methods(vec![method.to_string()]),
                Cond::Host(API_HOST.to_string()),
                Cond::Path(vec![path]),
            ]));
        }
        copy += 1;
    }
    out
}

/// `n` routes of tenants on [`API_HOST`], told apart by `http.headers.x_tenant`.
fn tenants(n: usize, rng: &mut Rng) -> Vec<Shape> {
    let sizes = group_sizes(rng, n, true);
    let ids = numbering(rng, sizes.len());
    let mut out = Vec::with_capacity(n);
    for (size, id) in sizes.into_iter().zip(ids) {
        let header = Cond::Header(Header {
            name: "x_tenant".into(),
            value: format!("t-{id}"),
            any: false,
            lower: false,
        });
        let mut alloc = PathAlloc::default();
        for _ in 0..size {
            // a tenant of one route takes every path; larger ones route their services
            let path = if size == 1 {
                "/".to_string()
            } else {
                alloc.alloc(rng, TENANT_ROOTS, 1, 2)
            };
            out.push(Shape::new(vec![
                Cond::Host(API_HOST.to_string()),
                header.clone(),
                prefix(path),
            ]));
        }
    }
    out
}

/// `n` routes on wildcard hosts `*.tenant-<k>.example.com`.
fn wildcards(n: usize, rng: &mut Rng) -> Vec<Shape> {
    let sizes = group_sizes(rng, n, true);
    let ids = numbering(rng, sizes.len());
    let mut out = Vec::with_capacity(n);
    for (size, id) in sizes.into_iter().zip(ids) {
        let suffix = format!(".tenant-{id}.example.com");
        let mut alloc = PathAlloc::default();
        for _ in 0..size {
            let path = if size == 1 {
                "/".to_string()
            } else {
                format!("{}/", alloc.alloc(rng, HOSTED_ROOTS, 1, 2))
            };
            out.push(Shape::new(vec![
                Cond::HostSuffix(suffix.clone()),
                prefix(path),
            ]));
        }
    }
    out
}

/// What a route on an ordinary host is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hosted {
    Prefixes,
    Ingress,
    Header,
}

/// Routes on ordinary hosts, `kinds` spread over hosts of [`group_sizes`] named
/// `<word>-<k>.example.com`, families mixed on each host.
fn hosted(kinds: &mut [Hosted], word: &str, rng: &mut Rng) -> Vec<(Family, Shape)> {
    rng.shuffle(kinds);
    let sizes = group_sizes(rng, kinds.len(), false);
    let ids = numbering(rng, sizes.len());
    let mut out = Vec::with_capacity(kinds.len());
    let mut next = 0;
    for (size, id) in sizes.into_iter().zip(ids) {
        let host = format!("{word}-{id}.example.com");
        let mut alloc = PathAlloc::default();
        for &kind in &kinds[next..next + size] {
            out.push(match kind {
                Hosted::Prefixes => (Family::HostPrefixes, host_prefixes(&host, &mut alloc, rng)),
                Hosted::Ingress => (Family::Ingress, ingress(Some(&host), &mut alloc, rng)),
                Hosted::Header => (Family::HeaderOnly, header_only(&host, &mut alloc, rng)),
            });
        }
        next += size;
    }
    out
}

/// The routes of a table: `counts` routes of each family (the mixed table's shares, or one
/// family), hosts and key spaces shared as in the module docs. Unordered (the caller shuffles).
pub(crate) fn generate(counts: &[(Family, usize)], rng: &mut Rng) -> Vec<(Family, Shape)> {
    let count = |f: Family| counts.iter().find(|c| c.0 == f).map_or(0, |c| c.1);
    let mut out = Vec::new();
    let mut hostless = PathAlloc::default();

    let ingress_n = count(Family::Ingress);
    let ingress_hosted = ingress_n - (ingress_n as f64 * HOSTLESS_INGRESS).round() as usize;
    let mut kinds: Vec<Hosted> = std::iter::repeat_n(Hosted::Prefixes, count(Family::HostPrefixes))
        .chain(std::iter::repeat_n(Hosted::Ingress, ingress_hosted))
        .chain(std::iter::repeat_n(
            Hosted::Header,
            count(Family::HeaderOnly),
        ))
        .collect();
    // One family alone gets hosts named after it; the mixed table's hosts carry several.
    let word = match counts {
        [(Family::Ingress, _)] => "app",
        [(Family::HeaderOnly, _)] => "ver",
        _ => "svc",
    };
    out.extend(hosted(&mut kinds, word, rng));
    for _ in ingress_hosted..ingress_n {
        out.push((Family::Ingress, ingress(None, &mut hostless, rng)));
    }

    out.extend(
        rest_api(count(Family::RestApi), rng)
            .into_iter()
            .map(|s| (Family::RestApi, s)),
    );
    out.extend(
        tenants(count(Family::TenantHeader), rng)
            .into_iter()
            .map(|s| (Family::TenantHeader, s)),
    );
    // pairs on one path, the read side first (an odd count leaves a read route alone)
    let methods = count(Family::MethodSplit);
    let mut made = 0;
    while made < methods {
        for s in method_pair(&mut hostless, rng)
            .into_iter()
            .take(methods - made)
        {
            out.push((Family::MethodSplit, s));
            made += 1;
        }
    }
    out.extend(
        wildcards(count(Family::WildcardHosts), rng)
            .into_iter()
            .map(|s| (Family::WildcardHosts, s)),
    );
    for _ in 0..count(Family::PortSniSource) {
        out.push((Family::PortSniSource, network(&mut hostless, rng)));
    }
    let other = count(Family::OtherOperators);
    let pure = (other / 40).min(PURE_OTHER.len());
    for k in 0..other {
        out.push((
            Family::OtherOperators,
            other_operator(k, k < pure, &mut hostless, rng),
        ));
    }
    for _ in 0..count(Family::PathOnly) {
        out.push((Family::PathOnly, path_only(&mut hostless, rng)));
    }
    type Stress = fn(usize, &mut Rng) -> Vec<Shape>;
    let stress: [(Family, Stress); 5] = [
        (Family::FieldPerRoute, stress::field_per_route),
        (Family::UnanchoredRegex, stress::unanchored_regexes),
        (Family::Alternations, stress::alternations),
        (Family::UnicodeClasses, stress::unicode_classes),
        (Family::LongHosts, stress::long_hosts),
    ];
    for (family, generate) in stress {
        let n = count(family);
        if n > 0 {
            out.extend(generate(n, rng).into_iter().map(|s| (family, s)));
        }
    }
    out
}
