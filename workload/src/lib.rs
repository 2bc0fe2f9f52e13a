//! Deterministic, seeded generator of gateway-shaped route tables and request mixes
//! (docs/workload.md), for benchmarks and for equality tests (indexed matcher vs
//! reference evaluator). Expressions are text in the route language of
//! docs/language.md, written against Kong's HTTP fields, whose one definition is the core's
//! (`atc_router::request::HTTP_FIELDS`; `atc_router::request::http_schema` builds the schema).
//! This crate has no list of its own: it only writes text.
//!
//! Every route carries its structured description, a [`Shape`] (host, path pieces, methods,
//! parameters... as the generator chose them): the expression is rendered from it and requests
//! are built from it. This crate never parses expression text; the one implementation of the
//! language is the core crate's, which this crate's tests use to check tables and requests.
//!
//! # Invariants
//!
//! * **Determinism.** Everything is a pure function of its arguments: the same `(family, n,
//!   seed)` gives the same [`Table`], the same `(table, mix, count, seed)` the same requests, on
//!   every platform (integer draws from an in-crate splitmix64; no hashing order leaks out).
//! * **Families.** [`Table::family`] makes exactly `n` routes of one [`Family`], or for
//!   [`Family::Mixed`] [`Family::counts`]`(n)` routes of each (the spec's shares, rounded, the
//!   last family taking the remainder), in a shuffled order. [`Table::generate`] is the mixed
//!   table, plus one [`CATCH_ALL_EXPRESSION`] route at priority 0 (the lowest; every other
//!   priority is ≥ 4096), appended last, when asked.
//! * **Stress families** ([`Family::stress`], module [`stress`]) are outside the mixed table's
//!   shares and outside [`Family::all`]: adding them changed no gateway table or request. Each
//!   route of one has a key or a regex tag of its own, so a request built for it reaches it.
//! * **Shared keys, no accidental overlap.** Routes share hosts, ports, SNIs, methods, tenants
//!   as real tables do, but never a path key that is another's prefix on the same keys (see
//!   `families.rs`), so a hit request nearly always reaches the route it was built for; where
//!   it does not, an earlier route in routing order legitimately matches too (a wildcard or
//!   prefix route on a shared key). Miss and miss-keys requests match no route but the
//!   catch-all.
//! * **Priorities and ids.** Ids are random version-4 UUID bytes, unique within a table and
//!   uncorrelated with priority. Priorities are distinct except for 10% of the routes
//!   (rounded), which form equal-priority pairs so the id tie-break matters; the
//!   [`Family::KongTraditional`] routes carry Kong's computed priorities instead, which repeat
//!   heavily. Router order (that of [`Table::priority_order`]) is priority descending, then id
//!   bytes descending.
//! * **Rendering.** [`Route::expression`] is [`Shape::expression`] of [`Route::shape`] for
//!   every generated or changed route, except the [`Family::KongTraditional`] routes, whose
//!   expressions are written as Kong's transform writes them ([`kong`]). A caller may write another expression by hand; requests
//!   are still built from the shape, so the expression must accept what the shape describes.
//! * **Path segments.** `http.path.segments.N` is 0-based (`/a/b` has `segments.0 == "a"`).
//!   A request for a route that uses segment fields carries one for every segment of its path.

mod families;
pub mod kong;
mod rest;
mod rng;
mod shape;
pub mod stress;
#[cfg(test)]
mod tests;
mod words;

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

pub use crate::families::API_HOST;
pub use crate::rest::ParamKind;
pub use crate::shape::{
    Alternation, CharClass, Cidr, Cond, FreePart, FreeRegex, Header, HostMatch, Part, PathMatch,
    PathRegex, Shape,
};

use crate::rng::{fnv1a, mix64, Rng};
use crate::shape::{DEFAULT_HOSTS, DEFAULT_SOURCE};

/// The expression of the catch-all route (`http.path ^= "/"`).
pub const CATCH_ALL_EXPRESSION: &str = "http.path ^= \"/\"";

/// Generated priorities (other than the catch-all's 0) are multiples of this plus a random
/// offset below it, so they are all ≥ `PRIORITY_STEP`.
const PRIORITY_STEP: u64 = 4096;

/// The route families of docs/workload.md, and their mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Exact host (a few dozen routes per host, heavy-tailed) + 1–3 nested path prefixes.
    HostPrefixes,
    /// One API host; the REST list of `rest.rs` (124 routes: nested resources, named
    /// parameters as anchored regexes, static paths as `==`, one route per method), copied
    /// under version and tenant prefixes (`/v2/…`, `/t42/…`) to reach the size.
    RestApi,
    /// Host + prefix + anchored regex (`^= "/p/" || ~ "^/p$"`); 60% without a host.
    Ingress,
    /// One host; `http.headers.x_tenant` picks the tenant, tenants of one route take `/`.
    TenantHeader,
    /// Method sets + prefix, no host; pairs on one path differing only by method.
    MethodSplit,
    /// `http.host =^ ".tenant-<k>.example.com"` + prefix, a few routes per wildcard host.
    WildcardHosts,
    /// A shared port, a shared TLS SNI or a source network, with distinct paths; no host.
    PortSniSource,
    /// A header predicate (`any(lower(...))`, `any(...)`, `lower(...)`) + host + prefix.
    HeaderOnly,
    /// `contains`, suffix, path segments, queries, `!(...)`, `!=`, `>=`, `not in`; no host.
    OtherOperators,
    /// A path prefix alone (the catch-all is of this family too).
    PathOnly,
    /// Kong's traditional routes (hosts with wildcards and ports, several paths, regex paths,
    /// methods, a tenant header, SNIs) as Kong's `traditional_compatible` flavour turns them
    /// into expressions and priorities, on heavy-tailed hosts. Outside the mixed table's
    /// shares (docs/workload.md).
    KongTraditional,
    /// The other gateway families in the spec's shares.
    Mixed,
    /// Stress: every route on a header of its own, `http.headers.x_tenant_<i>` (some under
    /// `lower`/`any`, a quarter with a host). See [`stress`].
    FieldPerRoute,
    /// Stress: unanchored path regexes without a literal prefix (`\w{30}x<tag>`,
    /// `\d{3,}-\w{10}/p<tag>`) on paths of 64 to 1,000 bytes.
    UnanchoredRegex,
    /// Stress: anchored alternations of many literal paths (`^/(a|b|…)$`) and `||` chains of
    /// paths.
    Alternations,
    /// Stress: regexes of Unicode classes (`\p{L}+`, `[à-ÿ]`, `\w`) on non-ASCII paths.
    UnicodeClasses,
    /// Stress: every route on a long host of its own (70 to 100 bytes), exact or wildcard, under
    /// a few shared domains.
    LongHosts,
}

impl Family {
    /// The families of the mix with their share, in the order counts are assigned (the last one
    /// takes the remainder).
    pub const SHARES: [(Family, f64); 10] = [
        (Family::HostPrefixes, 0.30),
        (Family::RestApi, 0.20),
        (Family::Ingress, 0.10),
        (Family::TenantHeader, 0.08),
        (Family::MethodSplit, 0.08),
        (Family::WildcardHosts, 0.08),
        (Family::PortSniSource, 0.06),
        (Family::HeaderOnly, 0.04),
        (Family::OtherOperators, 0.04),
        (Family::PathOnly, 0.02),
    ];

    /// The gateway families and the mixed table (last): what the benchmarks' `match/` group and
    /// the `candidates` report cover by default. The stress families are apart
    /// ([`Family::stress`]).
    pub fn all() -> [Family; 12] {
        [
            Family::HostPrefixes,
            Family::RestApi,
            Family::Ingress,
            Family::TenantHeader,
            Family::MethodSplit,
            Family::WildcardHosts,
            Family::PortSniSource,
            Family::HeaderOnly,
            Family::OtherOperators,
            Family::PathOnly,
            Family::KongTraditional,
            Family::Mixed,
        ]
    }

    /// A short lowercase name (`"rest-api"`, `"mixed"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Family::HostPrefixes => "host-prefixes",
            Family::RestApi => "rest-api",
            Family::Ingress => "ingress",
            Family::TenantHeader => "tenant-header",
            Family::MethodSplit => "method-split",
            Family::WildcardHosts => "wildcard-hosts",
            Family::PortSniSource => "port-sni-source",
            Family::HeaderOnly => "header-only",
            Family::OtherOperators => "other-operators",
            Family::PathOnly => "path-only",
            Family::KongTraditional => "kong-traditional",
            Family::Mixed => "mixed",
            Family::FieldPerRoute => "field-per-route",
            Family::UnanchoredRegex => "unanchored-regex",
            Family::Alternations => "alternations",
            Family::UnicodeClasses => "unicode-classes",
            Family::LongHosts => "long-hosts",
        }
    }

    /// The stress families ([`stress`]): outside the mixed table and [`Family::all`], each
    /// benchmarked and tested on its own, at sizes of its own (their routes cost far more to
    /// build and, for the regex families, to match than a gateway family's).
    pub fn stress() -> [Family; 5] {
        [
            Family::FieldPerRoute,
            Family::UnanchoredRegex,
            Family::Alternations,
            Family::UnicodeClasses,
            Family::LongHosts,
        ]
    }

    /// Whether this is one of [`Family::stress`].
    pub fn is_stress(&self) -> bool {
        Family::stress().contains(self)
    }

    /// The family of a [`Family::name`] (gateway and stress families alike).
    pub fn from_name(name: &str) -> Option<Family> {
        Family::all()
            .into_iter()
            .chain(Family::stress())
            .find(|f| f.name() == name)
    }

    /// Exact number of routes of each family in a mixed table of `n`: each share times `n`
    /// rounded half away from zero, capped by what is left, the last family taking the
    /// remainder. Sums to `n`.
    pub fn counts(n: usize) -> [(Family, usize); 10] {
        let mut out = [(Family::HostPrefixes, 0); 10];
        let mut left = n;
        for (k, &(family, share)) in Family::SHARES.iter().enumerate() {
            let c = if k + 1 == Family::SHARES.len() {
                left
            } else {
                ((n as f64 * share).round() as usize).min(left)
            };
            left -= c;
            out[k] = (family, c);
        }
        out
    }
}

/// A route: `(priority, id, expression)`, with the family and shape it was generated from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    /// UUID bytes (version 4, variant 1 bits set), unique within a table.
    pub id: [u8; 16],
    /// Higher first in router order.
    pub priority: u64,
    /// Expression text in the route language.
    pub expression: String,
    /// The family it belongs to (never [`Family::Mixed`]).
    pub family: Family,
    /// What it requires, from which the expression is rendered and requests are built.
    pub shape: Shape,
}

impl Route {
    /// A route whose expression is its shape's.
    pub fn new(id: [u8; 16], priority: u64, family: Family, shape: Shape) -> Route {
        Route {
            id,
            priority,
            expression: shape.expression(),
            family,
            shape,
        }
    }

    /// The catch-all route, `http.path ^= "/"`.
    pub fn catch_all(id: [u8; 16], priority: u64) -> Route {
        let shape = Shape::new(vec![Cond::Path(vec![PathMatch::Prefix("/".into())])]);
        Route::new(id, priority, Family::PathOnly, shape)
    }

    /// The id in the usual hyphenated lowercase UUID text form.
    pub fn id_string(&self) -> String {
        let h: String = self.id.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

/// A field value of a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// For `String` fields.
    Str(String),
    /// For `Int` fields.
    Int(i64),
    /// For `IpAddr` fields.
    Ip(IpAddr),
}

/// A request context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Index into [`Table::routes`] of the route the request was built for; `None` for
    /// [`Mix::Miss`] and [`Mix::MissKeys`] requests. A route earlier in routing order may
    /// match too, and then wins (see the crate docs).
    pub target: Option<usize>,
    /// `(field, value)` pairs in a fixed order (method, host, path, path segments, then the rest
    /// by name). A name may repeat: a multi-valued header (a decoy value before the one an
    /// `any(...)` predicate matches).
    pub fields: Vec<(String, Value)>,
}

/// A route table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// The routes, in generation order (not router order; see [`Table::priority_order`]).
    pub routes: Vec<Route>,
    /// Whether the table has the catch-all route (the last route whose expression is
    /// [`CATCH_ALL_EXPRESSION`]; [`Table::generate`] appends it at the end, priority 0).
    pub catch_all: bool,
}

/// The keys most of a table's routes share, which a miss-keys request carries: its busiest
/// host (exact, or a name under the busiest wildcard), method, port, TLS SNI, source network
/// and the busiest value of each header. Routes that take every path are not counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedKeys {
    /// The host a request sends.
    pub host: Option<String>,
    /// How many routes name that host (or its wildcard).
    pub host_routes: usize,
    /// The method.
    pub method: Option<String>,
    /// The destination port.
    pub port: Option<u16>,
    /// The TLS SNI.
    pub sni: Option<String>,
    /// The source network (requests come from inside it).
    pub source: Option<Cidr>,
    /// `(header field name, value)`.
    pub headers: Vec<(String, String)>,
    /// Header names routes test that `headers` does not cover (a route's own header, as in the
    /// field-per-route family), the first eight by name: a miss-keys request sends each with a
    /// value no route takes ([`MISS_VALUE`]).
    pub other_headers: Vec<String>,
    /// The longest path, in bytes, the table's requests are padded to (unanchored regexes and
    /// alternations: [`FreeRegex::path_len`], [`Alternation::path_len`]); 0 when none is.
    pub path_len: usize,
    /// Whether that padding is of non-ASCII letters (a route on such paths asks for it).
    pub unicode_paths: bool,
}

/// The value of a miss-keys request's [`SharedKeys::other_headers`].
pub const MISS_VALUE: &str = "no-such-value";

const STREAM_FAMILIES: u64 = 1;
const STREAM_SHAPES: u64 = 2;
const STREAM_IDS: u64 = 3;
const STREAM_PRIO: u64 = 4;
const STREAM_CHANGES: u64 = 5;
const STREAM_EXTRA: u64 = 6;
const STREAM_REQUESTS: u64 = 7;

fn random_id(rng: &mut Rng) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    id[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
    id[6] = (id[6] & 0x0f) | 0x40; // version 4
    id[8] = (id[8] & 0x3f) | 0x80; // RFC 4122 variant
    id
}

fn fresh_id(rng: &mut Rng, used: &mut HashSet<[u8; 16]>) -> [u8; 16] {
    loop {
        let id = random_id(rng);
        if used.insert(id) {
            return id;
        }
    }
}

/// The Kong configuration of a [`Family::KongTraditional`] table of `n` routes and `seed`:
/// [`Table::family`]'s routes are the entries of [`kong::KongRoute::transform`] of these
/// routes, in another order, cut to `n` (the last route may lose path groups). An entry of a
/// route Kong splits gets an id of its own; an unsplit route keeps its id.
pub fn kong_configuration(n: usize, seed: u64) -> Vec<kong::KongRoute> {
    let family_seed = seed ^ mix64(fnv1a(Family::KongTraditional.name().as_bytes()));
    kong_table(n, family_seed).0
}

fn kong_table(n: usize, family_seed: u64) -> (Vec<kong::KongRoute>, Vec<Route>) {
    let mut configs = kong::configuration(n, &mut Rng::new(family_seed, STREAM_SHAPES));
    let mut irng = Rng::new(family_seed, STREAM_IDS);
    let mut used = HashSet::with_capacity(n + configs.len());
    let mut routes = Vec::with_capacity(n);
    for config in &mut configs {
        let id = fresh_id(&mut irng, &mut used);
        let mut route = Route::catch_all(id, 0);
        config.id = route.id_string();
        for entry in config.transform() {
            if entry.split {
                route.id = fresh_id(&mut irng, &mut used);
            }
            routes.push(Route {
                id: route.id,
                priority: entry.priority.as_u64(),
                expression: entry.expression,
                family: Family::KongTraditional,
                shape: entry.shape,
            });
        }
    }
    routes.truncate(n);
    (configs, routes)
}

/// The busiest key of a count map (ties: the first in key order).
fn busiest<K: Clone + Ord>(counts: &BTreeMap<K, usize>) -> Option<(K, usize)> {
    let mut best: Option<(K, usize)> = None;
    for (k, &c) in counts {
        if best.as_ref().is_none_or(|b| c > b.1) {
            best = Some((k.clone(), c));
        }
    }
    best
}

impl Table {
    /// A table of `n` routes of one family (no catch-all), deterministic in `seed`.
    /// [`Family::Mixed`] gives the mixed table, as [`Table::generate`]`(n, seed, false)`.
    /// Generating 100k routes takes a fraction of a second in release builds.
    pub fn family(family: Family, n: usize, seed: u64) -> Table {
        let counts: Vec<(Family, usize)> = if family == Family::Mixed {
            Family::counts(n).to_vec()
        } else {
            vec![(family, n)]
        };
        let family_seed = seed ^ mix64(fnv1a(family.name().as_bytes()));
        if family == Family::KongTraditional {
            let (_, mut routes) = kong_table(n, family_seed);
            Rng::new(family_seed, STREAM_FAMILIES).shuffle(&mut routes);
            return Table {
                routes,
                catch_all: false,
            };
        }
        let mut shapes = families::generate(&counts, &mut Rng::new(family_seed, STREAM_SHAPES));
        Rng::new(family_seed, STREAM_FAMILIES).shuffle(&mut shapes);
        Table::assign(shapes, family_seed)
    }

    /// A table of these shapes, in this order, all of `family`: ids and priorities are drawn as
    /// [`Table::family`] draws them (deterministic in `seed`). For fixed benchmark cases built
    /// from the [`stress`] constructors (500 routes of [`stress::word_run`], one
    /// [`stress::alternation`]...).
    pub fn from_shapes(family: Family, shapes: Vec<Shape>, seed: u64) -> Table {
        let family_seed = seed ^ mix64(fnv1a(family.name().as_bytes()));
        Table::assign(
            shapes.into_iter().map(|s| (family, s)).collect(),
            family_seed,
        )
    }

    /// Routes of these shapes with random ids and priorities (see the crate docs).
    fn assign(shapes: Vec<(Family, Shape)>, family_seed: u64) -> Table {
        let n = shapes.len();
        let mut irng = Rng::new(family_seed, STREAM_IDS);
        let mut used = HashSet::with_capacity(n + 1);
        let mut routes: Vec<Route> = shapes
            .into_iter()
            .map(|(f, shape)| Route::new(fresh_id(&mut irng, &mut used), 0, f, shape))
            .collect();

        // distinct priorities from a permutation, then 5% of the routes copy the priority of
        // another (distinct) route: 10% of the routes are in equal-priority pairs
        let mut prng = Rng::new(family_seed, STREAM_PRIO);
        let mut perm: Vec<u64> = (1..=n as u64).collect();
        prng.shuffle(&mut perm);
        for (r, p) in routes.iter_mut().zip(perm) {
            r.priority = p * PRIORITY_STEP + prng.below(PRIORITY_STEP as usize) as u64;
        }
        let pairs = ((n as f64 * 0.05).round() as usize).min(n / 2);
        let mut idx: Vec<usize> = (0..n).collect();
        prng.shuffle(&mut idx);
        for k in 0..pairs {
            routes[idx[k]].priority = routes[idx[pairs + k]].priority;
        }
        Table {
            routes,
            catch_all: false,
        }
    }

    /// The mixed table of `n` routes (plus the catch-all when `catch_all`, so `n + 1` routes),
    /// deterministic in `seed`.
    pub fn generate(n: usize, seed: u64, catch_all: bool) -> Table {
        let t = Table::family(Family::Mixed, n, seed);
        if catch_all {
            t.with_catch_all()
        } else {
            t
        }
    }

    /// This table with the catch-all route appended (priority 0, an id not in the table).
    pub fn with_catch_all(mut self) -> Table {
        let mut used: HashSet<[u8; 16]> = self.routes.iter().map(|r| r.id).collect();
        let mut rng = Rng::new(self.routes.len() as u64, STREAM_IDS ^ 0xca);
        self.routes
            .push(Route::catch_all(fresh_id(&mut rng, &mut used), 0));
        self.catch_all = true;
        self
    }

    /// Indices of [`Table::routes`] in router order: priority descending, ties by id bytes
    /// descending (a total order, ids being unique).
    pub fn priority_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.routes.len()).collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (&self.routes[a], &self.routes[b]);
            rb.priority
                .cmp(&ra.priority)
                .then_with(|| rb.id.cmp(&ra.id))
                .then_with(|| a.cmp(&b))
        });
        order
    }

    /// Index of the catch-all route when [`Table::catch_all`] is set: the last route whose
    /// expression is [`CATCH_ALL_EXPRESSION`].
    pub fn catch_all_index(&self) -> Option<usize> {
        if !self.catch_all {
            return None;
        }
        self.routes
            .iter()
            .rposition(|r| r.expression == CATCH_ALL_EXPRESSION)
    }

    /// The keys the table's routes share most (see [`SharedKeys`]).
    pub fn shared_keys(&self) -> SharedKeys {
        let skip = self.catch_all_index();
        let mut hosts: BTreeMap<String, usize> = BTreeMap::new();
        let mut methods: BTreeMap<&str, usize> = BTreeMap::new();
        let mut ports: BTreeMap<u16, usize> = BTreeMap::new();
        let mut snis: BTreeMap<&str, usize> = BTreeMap::new();
        let mut sources: BTreeMap<(IpAddr, u8), usize> = BTreeMap::new();
        let mut headers: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut header_names: std::collections::BTreeSet<&str> = Default::default();
        let mut any_path_headers: HashSet<(&str, &str)> = HashSet::new();
        let (mut path_len, mut unicode_paths) = (0, false);
        for (i, r) in self.routes.iter().enumerate() {
            if Some(i) == skip {
                continue;
            }
            for c in &r.shape.conds {
                match c {
                    Cond::Header(h) => {
                        header_names.insert(&h.name);
                    }
                    Cond::Path(alts) => {
                        for m in alts {
                            let (len, unicode) = match m {
                                PathMatch::Free(f) if !f.anchored => (f.path_len, f.unicode),
                                PathMatch::Free(f) => (0, f.unicode),
                                PathMatch::Alternation(a) => (a.path_len, false),
                                _ => (0, false),
                            };
                            path_len = path_len.max(len);
                            unicode_paths |= unicode;
                        }
                    }
                    _ => {}
                }
            }
            if r.shape.takes_any_path() {
                // Its header values are no shared key: a request sending one would match it.
                for c in &r.shape.conds {
                    if let Cond::Header(h) = c {
                        any_path_headers.insert((&h.name, &h.value));
                    }
                }
                continue;
            }
            for c in &r.shape.conds {
                match c {
                    Cond::Host(h) => *hosts.entry(h.clone()).or_default() += 1,
                    Cond::HostSuffix(s) => *hosts.entry(format!("www{s}")).or_default() += 1,
                    Cond::Hosts(hs) => {
                        for h in hs {
                            let name = match h {
                                HostMatch::Exact(h) => h.clone(),
                                HostMatch::Suffix(s) => format!("www{s}"),
                                HostMatch::Prefix(p) => format!("{p}com"),
                                // a miss-keys request sends the default port
                                HostMatch::WithPort(..) => continue,
                            };
                            *hosts.entry(name).or_default() += 1;
                        }
                    }
                    Cond::Methods(ms) => {
                        for m in ms {
                            *methods.entry(m).or_default() += 1;
                        }
                    }
                    Cond::Port(p) => *ports.entry(*p).or_default() += 1,
                    Cond::Sni(s) => *snis.entry(s).or_default() += 1,
                    Cond::SrcIn(c) => *sources.entry((c.addr, c.len)).or_default() += 1,
                    Cond::Header(h) => *headers.entry((&h.name, &h.value)).or_default() += 1,
                    _ => {}
                }
            }
        }
        let mut by_name: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        headers.retain(|k, _| !any_path_headers.contains(k));
        for ((name, value), c) in headers {
            by_name.entry(name).or_default().insert(value, c);
        }
        let host = busiest(&hosts);
        let other_headers = header_names
            .into_iter()
            .filter(|n| !by_name.contains_key(n))
            .take(8)
            .map(str::to_string)
            .collect();
        SharedKeys {
            other_headers,
            path_len,
            unicode_paths,
            host_routes: host.as_ref().map_or(0, |h| h.1),
            host: host.map(|h| h.0),
            method: busiest(&methods).map(|m| m.0.to_string()),
            port: busiest(&ports).map(|p| p.0),
            sni: busiest(&snis).map(|s| s.0.to_string()),
            source: busiest(&sources).map(|((addr, len), _)| Cidr { addr, len }),
            headers: by_name
                .into_iter()
                .filter_map(|(name, values)| {
                    busiest(&values).map(|(v, _)| (name.to_string(), v.to_string()))
                })
                .collect(),
        }
    }

    /// A changed copy: `count` distinct routes, chosen at random (never the catch-all; `count` is
    /// capped at the number of other routes), get a fresh shape of the same family, on the same
    /// keys, below a path segment of their own (a unique token); ids, priorities, order and
    /// everything else stay. So exactly `count` expressions differ. Use it for sync benchmarks
    /// (nothing / one / 1% changed) and for change-one-route timings. Changing an already
    /// changed table again (even with the same seed) still yields fresh tokens.
    pub fn with_changes(&self, count: usize, seed: u64) -> Table {
        let mut out = self.clone();
        let skip = self.catch_all_index();
        let mut cand: Vec<usize> = (0..self.routes.len())
            .filter(|&i| Some(i) != skip)
            .collect();
        let mut rng = Rng::new(seed, STREAM_CHANGES);
        let count = count.min(cand.len());
        for k in 0..count {
            let j = k + rng.below(cand.len() - k);
            cand.swap(k, j);
        }
        for (k, &i) in cand[..count].iter().enumerate() {
            let old = &self.routes[i];
            let token = format!(
                "x{:016x}",
                mix64(seed ^ mix64(fnv1a(old.expression.as_bytes()) ^ mix64(k as u64)))
            );
            out.routes[i].shape = old.shape.freshened(&token);
            out.routes[i].expression = out.routes[i].shape.expression();
        }
        out
    }

    /// One fresh route for add/remove benchmarks: a route of the table chosen at random (not
    /// the catch-all), freshened as by [`Table::with_changes`] with a random token, an id not
    /// in the table, and a priority in the range of the generated ones. Deterministic in
    /// `(table, seed)`.
    pub fn extra_route(&self, seed: u64) -> Route {
        let fingerprint = self.routes.iter().fold(self.routes.len() as u64, |h, r| {
            h ^ mix64(fnv1a(&r.id) ^ r.priority)
        });
        let mut rng = Rng::new(seed ^ mix64(fingerprint), STREAM_EXTRA);
        let skip = self.catch_all_index();
        let pool: Vec<&Route> = self
            .routes
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != skip)
            .map(|(_, r)| r)
            .collect();
        let token = format!("x{:016x}", rng.next_u64());
        let (family, shape) = match pool.is_empty() {
            true => (
                Family::PathOnly,
                Shape::new(vec![Cond::Path(vec![PathMatch::Prefix(format!(
                    "/{token}/"
                ))])]),
            ),
            false => {
                let r = pool[rng.below(pool.len())];
                (r.family, r.shape.freshened(&token))
            }
        };
        let mut used: HashSet<[u8; 16]> = self.routes.iter().map(|r| r.id).collect();
        let id = fresh_id(&mut rng, &mut used);
        let top = (self.routes.len() as u64 + 1) * PRIORITY_STEP + PRIORITY_STEP - 1;
        let priority = rng.range(PRIORITY_STEP, top);
        Route::new(id, priority, family, shape)
    }
}

/// Which routes requests are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mix {
    /// Every request targets the first route in router order.
    HitFirst,
    /// Targets uniformly among a window of max(1, m/50) routes around position m/2 of router
    /// order (m = routes other than the catch-all).
    HitMiddle,
    /// Targets uniformly among the last max(1, ⌈5% of m⌉) routes of router order, catch-all
    /// excluded.
    HitLast,
    /// The table's [`SharedKeys`] with a path no route takes (`/legacy/12345`): the 404 an API
    /// host answers all day, and the request that shows whether a router scans a shared key's
    /// routes. Target `None`; only the catch-all, if present, matches.
    MissKeys,
    /// Unknown host (`no-such-host.invalid`) and path (`/no/such/path/<random>`), target
    /// `None`; only the catch-all, if present, matches.
    Miss,
    /// Zipf (s = 1.1) over the routes, catch-all excluded. Popularity is ranked by a seeded
    /// shuffle, not by router order: in real tables the busiest routes sit anywhere, and ranking
    /// by priority would hand a linear scan its best case.
    Realistic,
    /// Uniform over the routes with a regex path, each request on one of its regexes (a
    /// table without such routes gets [`Mix::Miss`] requests). Not in [`Mix::all`].
    HitRegex,
    /// Uniform over the routes with a wildcard host (`=^ ".x"`, `^= "x."`), each request on
    /// a host only a wildcard takes (a table without such routes gets [`Mix::Miss`]
    /// requests). Not in [`Mix::all`].
    HitWildcard,
    /// Uniform over the routes on the busiest host (the host of [`Table::shared_keys`]), each
    /// request on that host: the hit a busy API host answers all day, beside the 404 of
    /// [`Mix::MissKeys`] (a table without hosts gets [`Mix::Miss`] requests). Not in
    /// [`Mix::all`].
    HitBusyHost,
}

impl Mix {
    /// All mixes, in a fixed order.
    pub fn all() -> [Mix; 6] {
        [
            Mix::HitFirst,
            Mix::HitMiddle,
            Mix::HitLast,
            Mix::MissKeys,
            Mix::Miss,
            Mix::Realistic,
        ]
    }

    /// The request classes of a gateway's day, for reports per class: popular hits, regex
    /// hits, wildcard hits, hits on the busiest host, the 404 on the busiest keys, the 404
    /// elsewhere.
    pub fn classes() -> [Mix; 6] {
        [
            Mix::Realistic,
            Mix::HitRegex,
            Mix::HitWildcard,
            Mix::HitBusyHost,
            Mix::MissKeys,
            Mix::Miss,
        ]
    }

    /// A short name for benchmark ids: `"hit-first"`, `"hit-middle"`, `"hit-last"`,
    /// `"miss-keys"`, `"miss"`, `"realistic"`, `"hit-regex"`, `"hit-wildcard"`,
    /// `"hit-busy-host"`.
    pub fn name(&self) -> &'static str {
        match self {
            Mix::HitFirst => "hit-first",
            Mix::HitMiddle => "hit-middle",
            Mix::HitLast => "hit-last",
            Mix::MissKeys => "miss-keys",
            Mix::Miss => "miss",
            Mix::Realistic => "realistic",
            Mix::HitRegex => "hit-regex",
            Mix::HitWildcard => "hit-wildcard",
            Mix::HitBusyHost => "hit-busy-host",
        }
    }

    /// The mix of a [`Mix::name`].
    pub fn from_name(name: &str) -> Option<Mix> {
        Mix::all()
            .into_iter()
            .chain(Mix::classes())
            .find(|m| m.name() == name)
    }

    /// Whether requests are built for a route.
    pub fn is_hit(&self) -> bool {
        !matches!(self, Mix::Miss | Mix::MissKeys)
    }
}

fn miss(rng: &mut Rng) -> Vec<(String, Value)> {
    vec![
        ("http.method".into(), Value::Str("GET".into())),
        (
            "http.host".into(),
            Value::Str("no-such-host.invalid".into()),
        ),
        (
            "http.path".into(),
            Value::Str(format!("/no/such/path/{}", rng.next_u64() % 1_000_000_000)),
        ),
        ("net.dst.port".into(), Value::Int(443)),
        (
            "net.src.ip".into(),
            Value::Ip(DEFAULT_SOURCE.random_member(rng)),
        ),
    ]
}

fn miss_keys(keys: &SharedKeys, rng: &mut Rng) -> Vec<(String, Value)> {
    let mut path = format!("/{}/{}", rng.pick_str(words::MISS_ROOTS), rng.id_digits());
    if keys.path_len > path.len() + 1 {
        path.push('/');
        let pad = keys.path_len - path.len();
        shape::push_filler(&mut path, rng, pad, keys.unicode_paths);
    }
    let host = keys
        .host
        .clone()
        .unwrap_or_else(|| rng.pick_str(DEFAULT_HOSTS).to_string());
    let mut fields = vec![
        (
            "http.method".to_string(),
            Value::Str(keys.method.clone().unwrap_or_else(|| "GET".into())),
        ),
        ("http.host".to_string(), Value::Str(host)),
        ("http.path".to_string(), Value::Str(path)),
    ];
    let mut rest: BTreeMap<String, Value> = BTreeMap::new();
    for (name, value) in &keys.headers {
        rest.insert(format!("http.headers.{name}"), Value::Str(value.clone()));
    }
    for name in &keys.other_headers {
        rest.insert(
            format!("http.headers.{name}"),
            Value::Str(MISS_VALUE.into()),
        );
    }
    if let Some(s) = &keys.sni {
        rest.insert("tls.sni".into(), Value::Str(s.clone()));
    }
    rest.insert(
        "net.dst.port".into(),
        Value::Int(i64::from(keys.port.unwrap_or(443))),
    );
    let src = keys.source.unwrap_or(DEFAULT_SOURCE).random_member(rng);
    rest.insert("net.src.ip".into(), Value::Ip(src));
    fields.extend(rest);
    fields
}

/// What a request class keeps of a route's shape for its requests (`None`: not in the class).
type ClassFilter<'a> = dyn Fn(&Shape) -> Option<Shape> + 'a;

/// `count` requests of `mix` against `table`, deterministic in `seed`.
///
/// Hit requests are built from the target's [`Shape`], and 60% of them carry random numeric
/// ids in the path where the route allows (`/prefix/12345`; numeric regex parameters always get
/// digits), so a path cache does not help. Targets never include the catch-all, unless it is
/// the only route. A table without routes yields miss requests for every mix.
pub fn requests(table: &Table, mix: Mix, count: usize, seed: u64) -> Vec<Request> {
    let mut rng = Rng::new(seed, STREAM_REQUESTS ^ ((mix as u64) << 8));
    let catch_all = table.catch_all_index();
    let mut ranked: Vec<usize> = table
        .priority_order()
        .into_iter()
        .filter(|&i| Some(i) != catch_all)
        .collect();
    if ranked.is_empty() {
        ranked.extend(catch_all);
    }
    let busiest = match mix {
        Mix::HitBusyHost => table.shared_keys().host,
        _ => None,
    };
    let on_busiest = |s: &Shape| s.on_host(busiest.as_deref()?);
    let class: Option<&ClassFilter<'_>> = match mix {
        Mix::HitRegex => Some(&Shape::regex_only),
        Mix::HitWildcard => Some(&Shape::wildcard_only),
        Mix::HitBusyHost => Some(&on_busiest),
        _ => None,
    };
    if let Some(only) = class {
        let mut targets: Vec<(usize, Shape)> = ranked
            .iter()
            .filter_map(|&i| only(&table.routes[i].shape).map(|s| (i, s)))
            .collect();
        if targets.is_empty() {
            return (0..count)
                .map(|_| Request {
                    target: None,
                    fields: miss(&mut rng),
                })
                .collect();
        }
        Rng::new(seed, STREAM_REQUESTS ^ 0x7c).shuffle(&mut targets);
        return (0..count)
            .map(|_| {
                let (target, shape) = &targets[rng.below(targets.len())];
                let with_ids = rng.chance(0.6);
                Request {
                    target: Some(*target),
                    fields: shape.request(&mut rng, with_ids),
                }
            })
            .collect();
    }
    if mix == Mix::MissKeys {
        let keys = table.shared_keys();
        return (0..count)
            .map(|_| Request {
                target: None,
                fields: miss_keys(&keys, &mut rng),
            })
            .collect();
    }
    if mix == Mix::Miss || ranked.is_empty() {
        return (0..count)
            .map(|_| Request {
                target: None,
                fields: miss(&mut rng),
            })
            .collect();
    }
    let m = ranked.len();
    let zipf_cdf: Vec<f64> = if mix == Mix::Realistic {
        let mut acc = 0.0;
        (0..m)
            .map(|k| {
                acc += ((k + 1) as f64).powf(-1.1);
                acc
            })
            .collect()
    } else {
        Vec::new()
    };
    // Popularity rank → position in router order.
    let mut popularity: Vec<usize> = (0..m).collect();
    if mix == Mix::Realistic {
        Rng::new(seed, STREAM_REQUESTS ^ 0x5a).shuffle(&mut popularity);
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let pos = match mix {
            Mix::HitFirst => 0,
            Mix::HitMiddle => {
                let w = (m / 50).max(1);
                ((m / 2).saturating_sub(w / 2) + rng.below(w)).min(m - 1)
            }
            Mix::HitLast => {
                let k = ((m as f64 * 0.05).ceil() as usize).clamp(1, m);
                m - k + rng.below(k)
            }
            Mix::Realistic => {
                let u = rng.f64() * zipf_cdf[m - 1];
                popularity[zipf_cdf.partition_point(|&c| c <= u).min(m - 1)]
            }
            Mix::Miss | Mix::MissKeys | Mix::HitRegex | Mix::HitWildcard | Mix::HitBusyHost => {
                unreachable!()
            }
        };
        let target = ranked[pos];
        let with_ids = rng.chance(0.6);
        let fields = table.routes[target].shape.request(&mut rng, with_ids);
        out.push(Request {
            target: Some(target),
            fields,
        });
    }
    out
}
