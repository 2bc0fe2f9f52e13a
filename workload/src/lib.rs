//! Deterministic, seeded generator of gateway-shaped route tables and request mixes
//! (shared/spec/WORKLOAD.md), for benchmarks and for equality tests (compiled matcher vs
//! reference evaluator). It does not depend on the router: expressions are plain text in the
//! route language of shared/spec/LANGUAGE.md, written against [`SCHEMA`].
//!
//! # Invariants
//!
//! * **Determinism.** Everything is a pure function of its arguments: the same `(n, seed,
//!   catch_all)` gives the same [`Table`], the same `(table, mix, count, seed)` gives the same
//!   requests, on every platform. The PRNG is an in-crate splitmix64; no hashing order leaks out.
//! * **Route mix.** [`Table::generate`] makes exactly [`RouteClass::counts`]`(n)` routes of each
//!   class ([`RouteClass::MIX`] shares of `n`, rounded, the last class taking the remainder), in a
//!   shuffled order, plus one [`CATCH_ALL_EXPRESSION`] route at priority 0 (the lowest; all other
//!   generated priorities are ≥ 4096) appended last when `catch_all` is asked.
//! * **Disjointness.** Every route carries a route-unique token in a host, a path prefix or a
//!   regex prefix (`svc-17.example.com`, `/static-17/`, `^/rx-17/`), so no two routes match the
//!   same request, except where the mix means them to overlap: the catch-all overlaps
//!   everything. (Method pairs share host and path but their method sets are disjoint.) A
//!   request built for route X is therefore matched by X and, with a catch-all, by the catch-all
//!   below it. The family word of the token also identifies the class, see
//!   [`RouteClass::classify`].
//! * **Priorities and ids.** Ids are random version-4 UUID bytes, unique within a table and
//!   uncorrelated with priority. Priorities are distinct except for 10% of the routes
//!   (rounded), which form equal-priority pairs so the id tie-break matters. Router order (the order of
//!   [`Table::priority_order`]) is priority descending, then id bytes descending.
//! * **Requests.** [`requests`] parses the target route's expression and builds fields that make
//!   it true (one alternative of each `||` group, chosen at random; `!(...)` and `!=` checked),
//!   plus ordinary defaults (`http.method` GET, a generic host, a path, `net.dst.port` 443,
//!   `net.src.ip` in 192.168.0.0/16). It works on any table whose expressions stay within what
//!   this crate generates; it panics with the offending expression otherwise.
//! * **Path segments.** `http.path.segments.N` is 0-based (`/a/b` has `segments.0 == "a"`).
//!   When a target route uses a segment field, the request carries a segment field for every
//!   segment of its path, consistent with `http.path`.

mod expr;
mod gen;
mod regex;
mod rng;
mod solve;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use crate::rng::{fnv1a, mix64, Rng};

/// The type of a schema field (the language's four types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// UTF-8 text.
    String,
    /// Signed 64-bit integer.
    Int,
    /// An IPv4 or IPv6 address.
    IpAddr,
    /// An IPv4 or IPv6 network (no generated route uses one; listed for completeness).
    IpCidr,
}

impl FieldType {
    /// The name the schema APIs use: `"String"`, `"Int"`, `"IpAddr"` or `"IpCidr"`.
    pub fn name(&self) -> &'static str {
        match self {
            FieldType::String => "String",
            FieldType::Int => "Int",
            FieldType::IpAddr => "IpAddr",
            FieldType::IpCidr => "IpCidr",
        }
    }
}

/// The schema every generated table is written against: `(name, type)`. Names ending in `.*`
/// are wildcards for one more dotted segment (`http.headers.x_version`,
/// `http.queries.debug`, `http.path.segments.1`). Every field a generated expression or request
/// uses resolves through [`field_type`].
pub const SCHEMA: &[(&str, FieldType)] = &[
    ("http.method", FieldType::String),
    ("http.host", FieldType::String),
    ("http.path", FieldType::String),
    ("http.path.segments.*", FieldType::String),
    ("http.headers.*", FieldType::String),
    ("http.queries.*", FieldType::String),
    ("tls.sni", FieldType::String),
    ("net.protocol", FieldType::String),
    ("net.src.ip", FieldType::IpAddr),
    ("net.dst.ip", FieldType::IpAddr),
    ("net.src.port", FieldType::Int),
    ("net.dst.port", FieldType::Int),
];

/// The type of `name` in [`SCHEMA`]: an exact entry wins over a `.*` wildcard, which covers
/// exactly one more non-empty dotted segment.
pub fn field_type(name: &str) -> Option<FieldType> {
    if let Some(&(_, t)) = SCHEMA.iter().find(|(n, _)| *n == name) {
        return Some(t);
    }
    let (parent, last) = name.rsplit_once('.')?;
    if last.is_empty() {
        return None;
    }
    SCHEMA
        .iter()
        .find(|(n, _)| n.strip_suffix(".*") == Some(parent))
        .map(|&(_, t)| t)
}

/// The expression of the catch-all route (`http.path ^= "/"`).
pub const CATCH_ALL_EXPRESSION: &str = "http.path ^= \"/\"";

/// Generated priorities (other than the catch-all's 0) are multiples of this plus a random
/// offset below it, so they are all ≥ `PRIORITY_STEP`.
const PRIORITY_STEP: u64 = 4096;

/// A route: `(priority, id, expression)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    /// UUID bytes (version 4, variant 1 bits set), unique within a table.
    pub id: [u8; 16],
    /// Higher first in router order.
    pub priority: u64,
    /// Expression text in the route language.
    pub expression: String,
}

impl Route {
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
    /// Index into [`Table::routes`] of the route the request was built to satisfy; `None` for
    /// [`Mix::Miss`] requests (which, with a catch-all, are matched by the catch-all only).
    pub target: Option<usize>,
    /// `(field, value)` pairs in a fixed order (method, host, path, path segments, then the rest
    /// by name). A name may repeat: a multi-valued header (e.g. a decoy value before the one an
    /// `any(...)` predicate matches).
    pub fields: Vec<(String, Value)>,
}

/// The route shapes of the workload (shared/spec/WORKLOAD.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RouteClass {
    /// 35%: exact host + 1–3 nested path prefixes.
    Prefix,
    /// 20%: exact host + (`^= "/p/"` || `~ "^/p$"`).
    Ingress,
    /// 10%: anchored regex path with named captures (50 templates, unique `^/rx-<token>/`
    /// prefix), half also with an exact host.
    Regex,
    /// 10%: `http.host =^ ".tenant-<token>.example.com"` + prefix.
    Wildcard,
    /// 8%: method set + host + prefix, in pairs sharing host and path (GET/HEAD vs writes).
    MethodSet,
    /// 6%: header predicate (`any(lower(...))`, `any(...)`, `lower(...)`) + host + prefix.
    Header,
    /// 5%: path prefix only, `http.path ^= "/static-<token>/"`.
    PathOnly,
    /// 3%: host + `net.dst.port ==`, or `tls.sni ==`, or `net.src.ip in <CIDR>` + prefix.
    Network,
    /// 3%: segments, queries, `contains`, `!(...)`, `!=`, `>=`, `=^`, `not in`, each with a
    /// unique host.
    Other,
    /// The single optional `http.path ^= "/"` route (not part of [`RouteClass::MIX`]).
    CatchAll,
}

impl RouteClass {
    /// The classes of the mix with their share of `n`, in the order counts are assigned (the
    /// last one takes the remainder).
    pub const MIX: [(RouteClass, f64); 9] = [
        (RouteClass::Prefix, 0.35),
        (RouteClass::Ingress, 0.20),
        (RouteClass::Regex, 0.10),
        (RouteClass::Wildcard, 0.10),
        (RouteClass::MethodSet, 0.08),
        (RouteClass::Header, 0.06),
        (RouteClass::PathOnly, 0.05),
        (RouteClass::Network, 0.03),
        (RouteClass::Other, 0.03),
    ];

    /// A short lowercase name (`"prefix"`, `"catch-all"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            RouteClass::Prefix => "prefix",
            RouteClass::Ingress => "ingress",
            RouteClass::Regex => "regex",
            RouteClass::Wildcard => "wildcard",
            RouteClass::MethodSet => "method-set",
            RouteClass::Header => "header",
            RouteClass::PathOnly => "path-only",
            RouteClass::Network => "network",
            RouteClass::Other => "other",
            RouteClass::CatchAll => "catch-all",
        }
    }

    /// Exact number of routes of each class in a table of `n` (catch-all excluded): each share
    /// times `n` rounded half away from zero, capped by what is left, the last class taking the
    /// remainder. Sums to `n`.
    pub fn counts(n: usize) -> [(RouteClass, usize); 9] {
        let mut out = [(RouteClass::Prefix, 0); 9];
        let mut left = n;
        for (k, &(class, share)) in RouteClass::MIX.iter().enumerate() {
            let c = if k + 1 == RouteClass::MIX.len() {
                left
            } else {
                ((n as f64 * share).round() as usize).min(left)
            };
            left -= c;
            out[k] = (class, c);
        }
        out
    }

    /// The class of a generated expression, read from its marker; `None` for expressions this
    /// crate did not generate.
    pub fn classify(expression: &str) -> Option<RouteClass> {
        gen::classify(expression)
    }
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

const STREAM_CLASSES: u64 = 1;
const STREAM_EXPR: u64 = 2;
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

fn random_side(rng: &mut Rng) -> gen::Side {
    if rng.chance(0.5) {
        gen::Side::Read
    } else {
        gen::Side::Write
    }
}

impl Table {
    /// A table of `n` routes of the workload mix (plus the catch-all when `catch_all`, so
    /// `n + 1` routes), deterministic in `seed`. Generating 100k routes takes about 0.1 s
    /// in release builds.
    pub fn generate(n: usize, seed: u64, catch_all: bool) -> Table {
        let mut classes = Vec::with_capacity(n);
        for (class, k) in RouteClass::counts(n) {
            classes.extend(std::iter::repeat_n(class, k));
        }
        Rng::new(seed, STREAM_CLASSES).shuffle(&mut classes);

        let mut erng = Rng::new(seed, STREAM_EXPR);
        let mut irng = Rng::new(seed, STREAM_IDS);
        let mut used = HashSet::with_capacity(n + 1);
        let mut routes = Vec::with_capacity(n + 1);
        let mut pending_pair = None;
        for (i, &class) in classes.iter().enumerate() {
            // method-set routes pair up in generation order; the second reuses the first's token
            let (token, side) = match (class, pending_pair.take()) {
                (RouteClass::MethodSet, None) => {
                    pending_pair = Some(i);
                    (i, gen::Side::Read)
                }
                (RouteClass::MethodSet, Some(first)) => (first, gen::Side::Write),
                (_, p) => {
                    pending_pair = p;
                    (i, gen::Side::Read)
                }
            };
            let expression = gen::expression(class, &token.to_string(), side, &mut erng);
            routes.push(Route {
                id: fresh_id(&mut irng, &mut used),
                priority: 0,
                expression,
            });
        }

        // distinct priorities from a permutation, then 5% of the routes copy the priority of
        // another (distinct) route: 10% of the routes are in equal-priority pairs
        let mut prng = Rng::new(seed, STREAM_PRIO);
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

        if catch_all {
            routes.push(Route {
                id: fresh_id(&mut irng, &mut used),
                priority: 0,
                expression: CATCH_ALL_EXPRESSION.to_string(),
            });
        }
        Table { routes, catch_all }
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

    /// A changed copy: `count` distinct routes, chosen at random (never the catch-all; `count` is
    /// capped at the number of other routes), get a new expression of the same class with a fresh
    /// unique token; ids, priorities, order and everything else stay. So exactly `count`
    /// expressions differ, and the table stays disjoint. Use it for sync benchmarks (nothing /
    /// one / 1% changed) and for change-one-route timings. Changing an already changed table again
    /// (even with the same seed) still yields fresh tokens.
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
            let old = &self.routes[i].expression;
            let class = match gen::classify(old) {
                Some(RouteClass::CatchAll) | None => RouteClass::Prefix,
                Some(c) => c,
            };
            let token = format!(
                "x{:016x}",
                mix64(seed ^ mix64(fnv1a(old.as_bytes()) ^ mix64(k as u64)))
            );
            let side = random_side(&mut rng);
            out.routes[i].expression = gen::expression(class, &token, side, &mut rng);
        }
        out
    }

    /// One fresh route for add/remove benchmarks: class drawn with the [`RouteClass::MIX`]
    /// shares, a fresh unique token (disjoint from the table), an id not in the table, and a
    /// priority in the range of the generated ones. Deterministic in `(table, seed)`.
    pub fn extra_route(&self, seed: u64) -> Route {
        let fingerprint = self.routes.iter().fold(self.routes.len() as u64, |h, r| {
            h ^ mix64(fnv1a(&r.id) ^ r.priority)
        });
        let mut rng = Rng::new(seed ^ mix64(fingerprint), STREAM_EXTRA);
        let mut u = rng.f64();
        let mut class = RouteClass::Other;
        for &(c, share) in &RouteClass::MIX {
            if u < share {
                class = c;
                break;
            }
            u -= share;
        }
        let token = format!("x{:016x}", rng.next_u64());
        let side = random_side(&mut rng);
        let expression = gen::expression(class, &token, side, &mut rng);
        let mut used: HashSet<[u8; 16]> = self.routes.iter().map(|r| r.id).collect();
        let id = fresh_id(&mut rng, &mut used);
        let top = (self.routes.len() as u64 + 1) * PRIORITY_STEP + PRIORITY_STEP - 1;
        let priority = rng.range(PRIORITY_STEP, top);
        Route {
            id,
            priority,
            expression,
        }
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
    /// Unknown host (`no-such-host.invalid`) and path (`/no/such/path/<random>`), target
    /// `None`; only the catch-all, if present, matches.
    Miss,
    /// Zipf (s = 1.1) over the routes, catch-all excluded. Popularity is ranked by a seeded
    /// shuffle, not by router order: in real tables the busiest routes sit anywhere, and ranking
    /// by priority would hand a linear scan its best case.
    Realistic,
}

impl Mix {
    /// All mixes, in a fixed order.
    pub fn all() -> [Mix; 5] {
        [
            Mix::HitFirst,
            Mix::HitMiddle,
            Mix::HitLast,
            Mix::Miss,
            Mix::Realistic,
        ]
    }

    /// A short name for benchmark ids: `"hit-first"`, `"hit-middle"`, `"hit-last"`, `"miss"`,
    /// `"realistic"`.
    pub fn name(&self) -> &'static str {
        match self {
            Mix::HitFirst => "hit-first",
            Mix::HitMiddle => "hit-middle",
            Mix::HitLast => "hit-last",
            Mix::Miss => "miss",
            Mix::Realistic => "realistic",
        }
    }
}

/// `count` requests of `mix` against `table`, deterministic in `seed`.
///
/// Hit requests set every field their target needs (see the crate docs), and 60% of them carry
/// random numeric ids in the path where the route allows (`/prefix/12345/items`; regex routes
/// always get random digits for their captures), so a path cache does not help. Targets never
/// include the catch-all, unless it is the only route. A table without routes yields miss
/// requests for every mix.
///
/// # Panics
///
/// If a target's expression is outside what this crate generates (cannot be parsed by the
/// crate's small parser, or no satisfying request is found).
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
    if mix == Mix::Miss || ranked.is_empty() {
        return (0..count)
            .map(|_| Request {
                target: None,
                fields: solve::miss(&mut rng),
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
    let mut parsed: HashMap<usize, expr::Expr> = HashMap::new();
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
            Mix::Miss => unreachable!(),
        };
        let target = ranked[pos];
        let text = &table.routes[target].expression;
        let e = parsed.entry(target).or_insert_with(|| {
            expr::parse(text).unwrap_or_else(|err| {
                panic!("atc-workload: cannot parse route {target} expression {text:?}: {err}")
            })
        });
        let with_ids = rng.chance(0.6);
        let fields = solve::satisfy(e, &mut rng, with_ids).unwrap_or_else(|err| {
            panic!("atc-workload: cannot build a request for route {target} {text:?}: {err}")
        });
        out.push(Request {
            target: Some(target),
            fields,
        });
    }
    out
}
