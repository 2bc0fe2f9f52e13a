//! The `kong-traditional` family: routes as Kong users write them in Kong's traditional form
//! (`hosts` with wildcards and ports, several `paths` with regex paths among them, `methods`,
//! `headers`, `snis`), turned into expressions and priorities the way Kong's
//! `traditional_compatible` router flavour does (`kong/router/transform.lua`):
//!
//! * a route whose paths have different lengths, or mix regex and plain paths, is split into one
//!   route per group (all regex paths; the plain paths of one length), each with its own
//!   priority;
//! * the expression is the `&&` of, in this order: `(net.protocol != "https" || tls.sni == …)`
//!   for `snis`, `http.method == …` alternatives, host alternatives (`*.x` as `=^ ".x"`, `h:P`
//!   as `(http.host == "h" && net.dst.port == P)`), path alternatives (`^=` for a plain path,
//!   `~ "^…"` for a regex path, `~` stripped), one `any(lower(http.headers.NAME)) == "v"`
//!   group per header (dashes as underscores, values lowercase);
//! * the priority packs, from the top bit down: how many of methods, hosts, headers, snis,
//!   paths the route has (3 bits at 61), whether its hosts are all plain (bit 60), the number
//!   of headers (8 bits at 52), whether its paths are regexes (bit 51), the regex priority
//!   (bits 19–50), the plain path length (bits 0–18). Priorities repeat a lot: the id breaks
//!   ties.
//!
//! Hosts are heavy-tailed (host `k` of `H` takes a share proportional to `1/k`), so a few
//! hosts hold most routes, as in real Kong deployments. Each host's routes take their paths
//! from a [`PathAlloc`] of their own (no key another's prefix on the same host), so a request
//! built for a route reaches it; hosts share path words, as real hosts do. Routes without a
//! path are not generated: one would take every 404 on its host.

use crate::families::PathAlloc;
use crate::rng::Rng;
use crate::shape::{Cond, HostMatch, Part, PathMatch, PathRegex, Shape};
use crate::words::{HOSTED_ROOTS, INGRESS_ROOTS, WORDS};
use crate::ParamKind;

/// A route in Kong's traditional form (the fields this family uses).
#[derive(Clone, Debug, Default)]
struct Traditional {
    methods: Vec<&'static str>,
    /// `h`, `*.suffix` (kept as the `.suffix` it becomes) or `h:port`.
    hosts: Vec<HostMatch>,
    paths: Vec<PathMatch>,
    /// `(field name, lowercase values)`.
    headers: Vec<(&'static str, Vec<String>)>,
    snis: Vec<String>,
    regex_priority: u64,
}

const METHOD_SETS: &[&[&str]] = &[&["GET"], &["GET", "HEAD"], &["GET"], &["GET", "POST"]];
const WRITE_METHOD_SETS: &[&[&str]] = &[&["POST"], &["PUT"], &["DELETE"], &["PUT", "PATCH"]];

/// Kong's priority of one path group of a route (see the module docs).
fn priority(route: &Traditional, group: &[PathMatch]) -> u64 {
    let weight = [
        !route.methods.is_empty(),
        !route.hosts.is_empty(),
        !route.headers.is_empty(),
        !route.snis.is_empty(),
        !group.is_empty(),
    ]
    .iter()
    .filter(|&&b| b)
    .count() as u64;
    let plain_hosts = !route.hosts.is_empty()
        && !route
            .hosts
            .iter()
            .any(|h| matches!(h, HostMatch::Suffix(_)));
    let regex = group.iter().any(|p| matches!(p, PathMatch::Regex(_)));
    let length = match group.first() {
        Some(PathMatch::Prefix(p)) => p.len() as u64,
        _ => 0,
    };
    let regex_priority = if regex { route.regex_priority } else { 0 };
    (weight << 61)
        | (u64::from(plain_hosts) << 60)
        | ((route.headers.len() as u64).min(255) << 52)
        | (u64::from(regex) << 51)
        | (regex_priority << 19)
        | (length & 0x7FFFF)
}

/// The path groups Kong splits a route into: the regex paths, then the plain paths of each
/// length, in order of first appearance.
fn path_groups(paths: &[PathMatch]) -> Vec<Vec<PathMatch>> {
    let mut keys: Vec<Option<usize>> = Vec::new();
    let mut groups: Vec<Vec<PathMatch>> = Vec::new();
    for p in paths {
        let key = match p {
            PathMatch::Prefix(s) => Some(s.len()),
            _ => None,
        };
        match keys.iter().position(|k| *k == key) {
            Some(i) => groups[i].push(p.clone()),
            None => {
                keys.push(key);
                groups.push(vec![p.clone()]);
            }
        }
    }
    groups
}

/// The routes Kong makes of `route`: one `(shape, priority)` per path group.
fn transform(route: &Traditional) -> Vec<(Shape, u64)> {
    path_groups(&route.paths)
        .into_iter()
        .map(|group| {
            let mut conds = Vec::new();
            if !route.snis.is_empty() {
                conds.push(Cond::SniUnlessPlain(route.snis.clone()));
            }
            if !route.methods.is_empty() {
                conds.push(Cond::Methods(
                    route.methods.iter().map(|m| m.to_string()).collect(),
                ));
            }
            if !route.hosts.is_empty() {
                conds.push(Cond::Hosts(route.hosts.clone()));
            }
            let p = priority(route, &group);
            conds.push(Cond::Path(group));
            for (name, values) in &route.headers {
                conds.push(Cond::HeaderAnyOf {
                    name: name.to_string(),
                    values: values.clone(),
                });
            }
            (Shape::new(conds), p)
        })
        .collect()
}

/// A plain path key and up to two more paths: a nested one (another length: Kong splits the
/// route) or one of the same length (a sibling, kept in the same route).
fn plain_paths(alloc: &mut PathAlloc, roots: &[&str], rng: &mut Rng) -> Vec<PathMatch> {
    let key = alloc.alloc(rng, roots, 2, 3);
    let mut paths = vec![PathMatch::Prefix(key.clone())];
    match rng.below(10) {
        0..=5 => {}
        6..=8 => paths.insert(
            0,
            PathMatch::Prefix(format!("{key}/{}", rng.pick_str(WORDS))),
        ),
        _ => {
            let other = alloc.alloc(rng, roots, 2, 3);
            paths.push(PathMatch::Prefix(other));
        }
    }
    paths
}

/// A regex path `~/<key>/(?<id>\d+)/<word>$` (or without `$`), as Kong users write them.
fn regex_path(alloc: &mut PathAlloc, roots: &[&str], rng: &mut Rng) -> PathMatch {
    let key = alloc.alloc(rng, roots, 2, 3);
    let mut parts = vec![
        Part::Lit(format!("{key}/")),
        Part::Param {
            name: "id".into(),
            kind: if rng.chance(0.7) {
                ParamKind::Number
            } else {
                ParamKind::Hex
            },
        },
    ];
    if rng.chance(0.6) {
        parts.push(Part::Lit(format!("/{}", rng.pick_str(WORDS))));
    }
    PathMatch::Regex(PathRegex {
        parts,
        raw: true,
        open: rng.chance(0.3),
    })
}

/// One traditional route on `host` (or on no host), its paths from `alloc`; `previous`, the
/// route made just before on the same key space, may be copied with other methods (a REST
/// resource's write side on its own route).
fn traditional(
    host: Option<(usize, &str)>,
    alloc: &mut PathAlloc,
    previous: Option<&Traditional>,
    rng: &mut Rng,
) -> Traditional {
    if let Some(prev) = previous {
        let reads_only = prev.methods.iter().all(|m| *m == "GET" || *m == "HEAD");
        if reads_only && rng.chance(0.1) {
            let mut r = prev.clone();
            r.methods = rng.pick(WRITE_METHOD_SETS).to_vec();
            return r;
        }
    }
    let mut r = Traditional::default();
    let roots = if host.is_some() {
        HOSTED_ROOTS
    } else {
        INGRESS_ROOTS
    };
    if let Some((k, h)) = host {
        r.hosts = match rng.below(100) {
            0..=69 => vec![HostMatch::Exact(h.into())],
            70..=84 => vec![
                HostMatch::Exact(h.into()),
                HostMatch::Suffix(format!(".{h}")),
            ],
            85..=89 => vec![HostMatch::Suffix(format!(".{h}"))],
            90..=94 => vec![
                HostMatch::Exact(h.into()),
                HostMatch::Exact(format!("svc-{k}.internal")),
            ],
            _ => vec![HostMatch::WithPort(h.into(), 8443)],
        };
        if rng.chance(0.05) {
            r.snis = vec![h.to_string()];
        }
    }
    r.paths = if rng.chance(0.15) {
        vec![regex_path(alloc, roots, rng)]
    } else {
        plain_paths(alloc, roots, rng)
    };
    if rng.chance(0.3) {
        r.methods = rng.pick(METHOD_SETS).to_vec();
    }
    if rng.chance(0.08) {
        let mut values = vec![format!("t-{}", rng.below(50))];
        if rng.chance(0.3) {
            values.push(format!("t-{}", 50 + rng.below(50)));
        }
        r.headers = vec![("x_tenant", values)];
    }
    if rng.chance(0.2) {
        r.regex_priority = 1 + rng.below(10) as u64;
    }
    r
}

/// Which host each of `n` routes goes to: host `k` (of `max(1, n / 50)`) with a weight
/// proportional to `1/k` (integer draws only, so every platform gets the same table); `None`
/// for the 5% of routes without a host.
fn host_draws(n: usize, rng: &mut Rng) -> Vec<Option<usize>> {
    let hosts = (n / 50).max(1);
    let weights: Vec<u64> = (1..=hosts as u64).map(|k| 1_000_000 / k).collect();
    let total: u64 = weights.iter().sum();
    (0..n)
        .map(|_| {
            if rng.chance(0.05) {
                return None;
            }
            let mut x = rng.range(0, total);
            for (k, w) in weights.iter().enumerate() {
                if x < *w {
                    return Some(k);
                }
                x -= w;
            }
            Some(hosts - 1)
        })
        .collect()
}

/// `n` routes of the family (after Kong's split: a traditional route may give several) with
/// their priorities, unordered.
pub(crate) fn generate(n: usize, rng: &mut Rng) -> Vec<(Shape, u64)> {
    let draws = host_draws(n, rng);
    let hosts = draws.iter().flatten().max().map_or(0, |m| m + 1);
    let names: Vec<String> = (0..hosts)
        .map(|k| format!("{}-{k}.example.com", rng.pick_str(WORDS)))
        .collect();
    // one key space per host (and one for the routes without a host)
    let mut allocs: Vec<PathAlloc> = (0..=hosts).map(|_| PathAlloc::default()).collect();
    let mut previous: Vec<Option<Traditional>> = vec![None; hosts + 1];
    let mut out = Vec::with_capacity(n);
    for draw in draws {
        if out.len() >= n {
            break;
        }
        let slot = draw.unwrap_or(hosts);
        let host = draw.map(|k| (k, names[k].as_str()));
        let r = traditional(host, &mut allocs[slot], previous[slot].as_ref(), rng);
        out.extend(transform(&r));
        previous[slot] = Some(r);
    }
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regex(lit: &str) -> PathMatch {
        PathMatch::Regex(PathRegex {
            parts: vec![
                Part::Lit(lit.into()),
                Part::Param {
                    name: "id".into(),
                    kind: ParamKind::Number,
                },
            ],
            raw: true,
            open: false,
        })
    }

    /// One traditional route with every field, as Kong's transform reads it: three path groups
    /// (two lengths, the regexes), so three routes, in the order of Kong's split.
    #[test]
    fn a_route_is_split_by_path_length_and_prioritised_as_kong_does() {
        let route = Traditional {
            methods: vec!["GET", "HEAD"],
            hosts: vec![
                HostMatch::Exact("a.com".into()),
                HostMatch::Suffix(".a.com".into()),
            ],
            paths: vec![
                PathMatch::Prefix("/x".into()),
                regex("/z/"),
                PathMatch::Prefix("/yy".into()),
                PathMatch::Prefix("/w".into()),
            ],
            headers: vec![("x_tenant", vec!["t-1".into(), "t-2".into()])],
            snis: vec!["a.com".into()],
            regex_priority: 7,
        };
        let out = transform(&route);
        let exprs: Vec<String> = out.iter().map(|(s, _)| s.expression()).collect();
        let common = "(net.protocol != \"https\" || tls.sni == \"a.com\") && \
                      (http.method == \"GET\" || http.method == \"HEAD\") && \
                      (http.host == \"a.com\" || http.host =^ \".a.com\")";
        let header = "(any(lower(http.headers.x_tenant)) == \"t-1\" || \
                      any(lower(http.headers.x_tenant)) == \"t-2\")";
        assert_eq!(
            exprs,
            [
                format!("{common} && (http.path ^= \"/x\" || http.path ^= \"/w\") && {header}"),
                format!("{common} && http.path ~ r#\"^/z/(?<id>\\d+)$\"# && {header}"),
                format!("{common} && http.path ^= \"/yy\" && {header}"),
            ]
        );
        // five fields (no plain-host bit: a wildcard), one header
        let base = (5 << 61) | (1 << 52);
        let priorities: Vec<u64> = out.iter().map(|(_, p)| *p).collect();
        assert_eq!(
            priorities,
            [base | 2, base | (1 << 51) | (7 << 19), base | 3]
        );
    }

    #[test]
    fn plain_hosts_set_their_bit_and_ports_stay_plain() {
        let mut route = Traditional {
            hosts: vec![HostMatch::WithPort("a.com".into(), 8443)],
            paths: vec![PathMatch::Prefix("/abc".into())],
            ..Traditional::default()
        };
        let (shape, p) = &transform(&route)[0];
        assert_eq!(
            shape.expression(),
            "(http.host == \"a.com\" && net.dst.port == 8443) && http.path ^= \"/abc\""
        );
        assert_eq!(*p, (2 << 61) | (1 << 60) | 4);
        route.hosts = Vec::new();
        assert_eq!(transform(&route)[0].1, (1 << 61) | 4);
    }
}
