//! Gateway-shaped route tables, for testing the index: routes that share their keys the way real
//! tables do (one host behind most routes, method sets, ports, tenants, path parameters; sets of
//! methods and ports written as `||` chains or as set literals, `in [...]` and `not in [...]`),
//! built
//! from small pools so that every structure of the index is exercised with collisions, nesting
//! and churn, and requests that hit routes, hit the shared keys and miss.
//!
//! Like [`crate::gen`], a table is a structured description ([`Table`], [`RouteShape`],
//! [`Cond`]) rendered to expression text; requests are rendered to `(field, value)` pairs. The
//! descriptions come from proptest strategies ([`table_strategy`], [`ops_strategy`]).
//!
//! Invariant: every rendered route is valid against [`schema`] (the tests add them with
//! `unwrap`); conditions describe what the route requires, and [`Table::request_for`] builds a
//! request satisfying one route (one branch of each `||`), so hits are frequent.
//!
//! Scale shapes ([`scale_table_strategy`]): thousands of routes, most on a header field of
//! their own ([`Cond::OwnField`], names sharing prefixes), nesting near the parser's limit
//! ([`Cond::Deep`]), set literals of hundreds to thousands of elements ([`Cond::BigSet`]), long
//! and Unicode regexes ([`Cond::Unicode`], a few per table: a debug build takes a tenth of a
//! second to compile Unicode `\w{30}`), among ordinary gateway routes.

use std::sync::Arc;

use arbitrary::Unstructured;
use atc_router::{Schema, Type, Value};
use proptest::prelude::*;

pub const HOSTS: &[&str] = &["api.example.com", "b.example.com", "C.example.org"];
pub const HOST_SUFFIXES: &[&str] = &[".example.com", ".tenant.net"];
pub const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "HEAD"];
pub const PORTS: &[i64] = &[80, 443, 8443];
pub const TENANTS: &[&str] = &["t1", "t2", "t3"];
pub const SEGMENTS: &[&str] = &["repos", "users", "issues", "v1", "v2", "items", ""];
/// Regex classes of one path segment (and what a request puts there for each).
pub const PARAMS: &[(&str, &str)] = &[
    ("[^/]+", "o-1"),
    (r"\d+", "42"),
    ("[a-z0-9-]+", "ab-9"),
    ("[^/]*", ""),
    ("[0-9]+", "7"),
];
pub const CIDRS: &[&str] = &[
    "10.0.0.0/8",
    "10.1.0.0/16",
    "192.168.0.0/16",
    "::/0",
    "2001:db8::/32",
];
pub const IPS: &[&str] = &[
    "10.1.2.3",
    "10.9.0.1",
    "192.168.1.1",
    "8.8.8.8",
    "2001:db8::5",
    "::1",
];
pub const CONTAINS: &[&str] = &["/export/", ".json", "admin", "/v1/"];
/// Regexes no other kind of key describes (no anchor, no literal every match starts with),
/// with a text each matches.
pub const FREE_REGEXES: &[(&str, &str)] = &[
    (r"\d+\.json$", "/f/12.json"),
    ("(foo|bar)baz", "/x/barbaz/y"),
    ("[a-z]+-[0-9]+/edit", "/p/ab-12/edit"),
    ("(?i)ADMIN", "/Admin/x"),
    (r"\w+@\w+", "/u/me@host"),
];

/// Long and Unicode regexes (classes in Unicode mode, `(?i)` on non-ASCII letters, long
/// repetitions and alternations) with a text each matches; see [`unicode_regex`].
pub const UNICODE_REGEXES: usize = 9;

/// The `k`-th of [`UNICODE_REGEXES`] (modulo), with a path it matches.
pub fn unicode_regex(k: usize) -> (String, String) {
    match k % UNICODE_REGEXES {
        0 => (r"\w{30}x1".into(), format!("/a/{}x1/b", "é".repeat(30))),
        1 => (r"\p{L}+/ñ\d+$".into(), "/straße/ñ12".into()),
        2 => ("[à-ÿ]{3,}-[0-9]+".into(), "/x/éàü-42".into()),
        3 => (r"(?i)^/ÉTÉ/\w+".into(), "/été/ж".into()),
        4 => (r"^/вики/\p{Cyrillic}+$".into(), "/вики/статья".into()),
        5 => (r"\d{3,}-\w{10}/p".into(), "/x/1234-abcdefghij/p".into()),
        6 => {
            let alts: Vec<String> = (0..300).map(|i| format!("a{i}")).collect();
            (format!("^/({})$", alts.join("|")), "/a150".into())
        }
        7 => (
            "^/(?:[^/]+/){20}end$".to_string(),
            format!("/{}end", "s/".repeat(20)),
        ),
        _ => (r"(?i)ǅ|straße|ΣΑΣ".into(), "/x/σας".into()),
    }
}

/// The schema every table is written against.
pub fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    for (name, ty) in [
        ("http.method", Type::String),
        ("http.host", Type::String),
        ("http.path", Type::String),
        ("http.headers.*", Type::String),
        ("tls.sni", Type::String),
        ("net.dst.port", Type::Int),
        ("net.src.ip", Type::IpAddr),
    ] {
        s.add_field(name, ty).expect("valid field");
    }
    Arc::new(s)
}

/// A path: literal segments and parameters (indices into [`SEGMENTS`] and [`PARAMS`]).
#[derive(Debug, Clone)]
pub struct PathShape {
    pub segs: Vec<PathSeg>,
    /// How the path is matched.
    pub how: PathHow,
}

#[derive(Debug, Clone, Copy)]
pub enum PathSeg {
    Lit(usize),
    Param(usize),
}

#[derive(Debug, Clone, Copy)]
pub enum PathHow {
    /// `http.path == "/a/b"` (parameters become literals).
    Exact,
    /// `http.path ^= "/a/b/"` or `"/a/b"` (with or without the trailing slash).
    Prefix(bool),
    /// `http.path ~ "^/a/(?<p0>[^/]+)$"`, or without `$`.
    Regex { end: bool },
    /// `http.path =^ "<last segment>"`.
    Suffix,
}

/// One condition of a route (the route is their `&&`).
#[derive(Debug, Clone)]
pub enum Cond {
    Host(usize),
    HostSuffix(usize),
    /// One method or several (see [`Alts`]).
    Methods(Vec<usize>, Alts),
    Path(PathShape),
    Tenant {
        tenant: usize,
        lower: bool,
    },
    /// One port or several (see [`Alts`]).
    Ports(Vec<usize>, Alts),
    SrcIn(usize),
    SrcIs(usize),
    Contains(usize),
    /// `http.path ~ <one of FREE_REGEXES>`.
    Regex(usize),
    Sni(usize),
    /// `!(…)` of another condition: never a key.
    Not(Box<Cond>),
    /// `[any(][lower(]http.headers.x_f_<index>[)][)] == "v<value>"`: a field of the route's own
    /// (scale tables give every route another index; names share prefixes: `x_f_1`, `x_f_12`).
    OwnField {
        index: usize,
        value: usize,
        lower: bool,
        any: bool,
    },
    /// The condition inside `depth` levels of parentheses, every third pair of levels a double
    /// negation `!(!(…))` (the same meaning).
    Deep(usize, Box<Cond>),
    /// `field in [...]` (or `not in`) of `size` elements: hosts `h<k>.example.com` (field 0),
    /// ports `1000 + k` (field 1) or tenant header values `t<k>` (field 2).
    BigSet {
        field: usize,
        size: usize,
        not: bool,
    },
    /// `http.path ~ <one of the long and Unicode regexes>` ([`unicode_regex`]).
    Unicode(usize),
    /// `a || b` of two conditions.
    Or(Box<Cond>, Box<Cond>),
}

/// How a condition on one of several values is written: `(f == a || f == b)`,
/// `f in [a, b]`, or `f not in [a, b]` (true for the other values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alts {
    Or,
    In,
    NotIn,
}

impl Alts {
    /// `field` compared with `values` (already written as literals) this way.
    fn render(self, field: &str, values: &[String]) -> String {
        match self {
            Alts::Or => {
                let alts: Vec<String> = values.iter().map(|v| format!("{field} == {v}")).collect();
                format!("({})", alts.join(" || "))
            }
            Alts::In => format!("{field} in [{}]", values.join(", ")),
            Alts::NotIn => format!("{field} not in [{}]", values.join(", ")),
        }
    }

    /// The value a request gives to satisfy the condition: the `pick`-th of `chosen`, or for
    /// `not in`, the first of `pool` outside `chosen` (`fallback` when there is none).
    fn satisfying<T: Copy + PartialEq>(
        self,
        chosen: &[T],
        pool: &[T],
        fallback: T,
        pick: u64,
    ) -> T {
        match self {
            Alts::Or | Alts::In => chosen[pick as usize % chosen.len()],
            Alts::NotIn => pool
                .iter()
                .copied()
                .find(|v| !chosen.contains(v))
                .unwrap_or(fallback),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RouteShape {
    pub priority: u64,
    pub conds: Vec<Cond>,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub routes: Vec<RouteShape>,
}

fn path_text(p: &PathShape, params: bool) -> String {
    let mut out = String::new();
    for (i, s) in p.segs.iter().enumerate() {
        out.push('/');
        match s {
            PathSeg::Lit(l) => out.push_str(SEGMENTS[*l % SEGMENTS.len()]),
            PathSeg::Param(c) => {
                let (class, sample) = PARAMS[*c % PARAMS.len()];
                if params {
                    out.push_str(&format!("(?<p{i}>{class})"));
                } else {
                    out.push_str(sample);
                }
            }
        }
    }
    if p.segs.is_empty() {
        out.push('/');
    }
    out
}

fn quoted(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

impl Cond {
    pub fn render(&self) -> String {
        match self {
            Cond::Host(h) => format!("http.host == {}", quoted(HOSTS[*h % HOSTS.len()])),
            Cond::HostSuffix(h) => format!(
                "http.host =^ {}",
                quoted(HOST_SUFFIXES[*h % HOST_SUFFIXES.len()])
            ),
            Cond::Methods(ms, alts) => {
                let values: Vec<String> = ms
                    .iter()
                    .map(|m| quoted(METHODS[*m % METHODS.len()]))
                    .collect();
                alts.render("http.method", &values)
            }
            Cond::Path(p) => match p.how {
                PathHow::Exact => format!("http.path == {}", quoted(&path_text(p, false))),
                PathHow::Prefix(slash) => {
                    let mut t = path_text(p, false);
                    if slash && !t.ends_with('/') {
                        t.push('/');
                    }
                    format!("http.path ^= {}", quoted(&t))
                }
                PathHow::Regex { end } => {
                    let mut t = format!("^{}", path_text(p, true));
                    if end {
                        t.push('$');
                    }
                    format!("http.path ~ {}", quoted(&t))
                }
                PathHow::Suffix => {
                    let t = path_text(p, false);
                    let last = t.rsplit('/').next().unwrap_or("");
                    format!("http.path =^ {}", quoted(&format!("/{last}")))
                }
            },
            Cond::Tenant { tenant, lower } => {
                let t = TENANTS[*tenant % TENANTS.len()];
                if *lower {
                    format!("any(lower(http.headers.x_tenant)) == {}", quoted(t))
                } else {
                    format!("http.headers.x_tenant == {}", quoted(t))
                }
            }
            Cond::Ports(ps, alts) => {
                let values: Vec<String> = ps
                    .iter()
                    .map(|p| PORTS[*p % PORTS.len()].to_string())
                    .collect();
                alts.render("net.dst.port", &values)
            }
            Cond::SrcIn(c) => format!("net.src.ip in {}", CIDRS[*c % CIDRS.len()]),
            Cond::SrcIs(i) => format!("net.src.ip == {}", IPS[*i % IPS.len()]),
            Cond::Contains(c) => {
                format!(
                    "http.path contains {}",
                    quoted(CONTAINS[*c % CONTAINS.len()])
                )
            }
            Cond::Regex(r) => format!(
                "http.path ~ {}",
                quoted(FREE_REGEXES[*r % FREE_REGEXES.len()].0)
            ),
            Cond::Sni(h) => format!(
                "tls.sni == {}",
                quoted(&HOSTS[*h % HOSTS.len()].to_lowercase())
            ),
            Cond::Not(c) => format!("!({})", c.render()),
            Cond::Or(a, b) => format!("({} || {})", a.render(), b.render()),
            Cond::OwnField {
                index,
                value,
                lower,
                any,
            } => {
                let mut lhs = format!("http.headers.x_f_{index}");
                if *lower {
                    lhs = format!("lower({lhs})");
                }
                if *any {
                    lhs = format!("any({lhs})");
                }
                format!("{lhs} == \"v{}\"", value % 4)
            }
            Cond::Deep(depth, c) => {
                let (mut open, mut close) = (String::new(), String::new());
                let mut level = 0;
                while level < *depth {
                    if level % 3 == 2 && level + 2 <= *depth {
                        open.push_str("!(!(");
                        close.push_str("))");
                        level += 2;
                    } else {
                        open.push('(');
                        close.push(')');
                        level += 1;
                    }
                }
                format!("{open}{}{close}", c.render())
            }
            Cond::BigSet { field, size, not } => {
                let (name, values): (&str, Vec<String>) = match field % 3 {
                    0 => (
                        "http.host",
                        (0..*size)
                            .map(|k| quoted(&format!("h{k}.example.com")))
                            .collect(),
                    ),
                    1 => (
                        "net.dst.port",
                        (0..*size).map(|k| (1000 + k).to_string()).collect(),
                    ),
                    _ => (
                        "http.headers.x_tenant",
                        (0..*size).map(|k| quoted(&format!("t{k}"))).collect(),
                    ),
                };
                let op = if *not { "not in" } else { "in" };
                format!("{name} {op} [{}]", values.join(", "))
            }
            Cond::Unicode(k) => format!("http.path ~ {}", quoted(&unicode_regex(*k).0)),
        }
    }

    /// Values that make this condition true (for `Not`, none: a request just leaves the
    /// negated condition's values out).
    fn satisfy(&self, out: &mut Vec<(String, Value)>, pick: u64) {
        let s = |v: &str| Value::String(v.to_owned());
        match self {
            Cond::Host(h) => out.push(("http.host".into(), s(HOSTS[*h % HOSTS.len()]))),
            Cond::HostSuffix(h) => out.push((
                "http.host".into(),
                s(&format!(
                    "w{pick}{}",
                    HOST_SUFFIXES[*h % HOST_SUFFIXES.len()]
                )),
            )),
            Cond::Methods(ms, alts) => {
                let chosen: Vec<&str> = ms.iter().map(|m| METHODS[*m % METHODS.len()]).collect();
                let m = alts.satisfying(&chosen, METHODS, "PATCH", pick);
                out.push(("http.method".into(), s(m)));
            }
            Cond::Path(p) => {
                let mut t = path_text(p, false);
                match p.how {
                    PathHow::Prefix(true) if !t.ends_with('/') => t.push('/'),
                    _ => {}
                }
                if matches!(p.how, PathHow::Prefix(_) | PathHow::Regex { end: false })
                    && pick.is_multiple_of(2)
                {
                    t.push_str("x/12");
                }
                out.push(("http.path".into(), s(&t)));
            }
            Cond::Tenant { tenant, lower } => {
                let t = TENANTS[*tenant % TENANTS.len()];
                let v = if *lower && pick.is_multiple_of(2) {
                    t.to_uppercase()
                } else {
                    t.to_owned()
                };
                out.push(("http.headers.x_tenant".into(), s(&v)));
            }
            Cond::Ports(ps, alts) => {
                let chosen: Vec<i64> = ps.iter().map(|p| PORTS[*p % PORTS.len()]).collect();
                let p = alts.satisfying(&chosen, PORTS, 8080, pick);
                out.push(("net.dst.port".into(), Value::Int(p)));
            }
            Cond::SrcIn(c) => {
                let net: atc_router::IpCidr = CIDRS[*c % CIDRS.len()].parse().expect("pool CIDR");
                out.push(("net.src.ip".into(), Value::IpAddr(net.first_address())));
            }
            Cond::SrcIs(i) => out.push((
                "net.src.ip".into(),
                Value::IpAddr(IPS[*i % IPS.len()].parse().expect("pool address")),
            )),
            Cond::Contains(c) => out.push((
                "http.path".into(),
                // Another literal first, so that a lookup must find more than the first one.
                s(&format!(
                    "/a{}{}z",
                    CONTAINS[(c % CONTAINS.len() + 1 + pick as usize % CONTAINS.len())
                        % CONTAINS.len()],
                    CONTAINS[*c % CONTAINS.len()]
                )),
            )),
            Cond::Regex(r) => out.push((
                "http.path".into(),
                s(FREE_REGEXES[*r % FREE_REGEXES.len()].1),
            )),
            Cond::Sni(h) => {
                out.push(("tls.sni".into(), s(&HOSTS[*h % HOSTS.len()].to_lowercase())))
            }
            Cond::Not(_) => {}
            Cond::Or(a, b) => {
                if pick.is_multiple_of(2) {
                    a.satisfy(out, pick / 2)
                } else {
                    b.satisfy(out, pick / 2)
                }
            }
            Cond::OwnField {
                index,
                value,
                lower,
                any,
            } => {
                let name = format!("http.headers.x_f_{index}");
                if *any && pick.is_multiple_of(3) {
                    out.push((name.clone(), s("decoy")));
                }
                let v = if *lower && pick.is_multiple_of(2) {
                    format!("V{}", value % 4)
                } else {
                    format!("v{}", value % 4)
                };
                out.push((name, s(&v)));
            }
            Cond::Deep(_, c) => c.satisfy(out, pick),
            Cond::BigSet { field, size, not } => {
                // `not in`: a value just past the set
                let k = if *not {
                    *size
                } else {
                    pick as usize % size.max(&1)
                };
                out.push(match field % 3 {
                    0 => ("http.host".into(), s(&format!("h{k}.example.com"))),
                    1 => ("net.dst.port".into(), Value::Int(1000 + k as i64)),
                    _ => ("http.headers.x_tenant".into(), s(&format!("t{k}"))),
                });
            }
            Cond::Unicode(k) => out.push(("http.path".into(), s(&unicode_regex(*k).1))),
        }
    }
}

impl RouteShape {
    pub fn render(&self) -> String {
        let parts: Vec<String> = self.conds.iter().map(Cond::render).collect();
        if parts.is_empty() {
            // A route without conditions: a catch-all on the path.
            return r#"http.path ^= "/""#.to_owned();
        }
        parts.join(" && ")
    }
}

impl Table {
    /// A request built to satisfy route `i` (its first value of each field wins; later
    /// conditions on the same field add values, making the field multi-valued).
    pub fn request_for(&self, i: usize, pick: u64) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        if let Some(r) = self.routes.get(i) {
            for c in &r.conds {
                c.satisfy(&mut out, pick);
            }
        }
        out
    }
}

/// A request from the pools, unrelated to any route: it hits shared keys and misses the rest.
pub fn random_request(r: &[u64; 6]) -> Vec<(String, Value)> {
    let s = |v: &str| Value::String(v.to_owned());
    let mut out = vec![
        (
            "http.host".to_owned(),
            s(HOSTS[r[0] as usize % HOSTS.len()]),
        ),
        (
            "http.method".to_owned(),
            s(METHODS[r[1] as usize % METHODS.len()]),
        ),
        (
            "net.dst.port".to_owned(),
            Value::Int(PORTS[r[2] as usize % PORTS.len()]),
        ),
    ];
    let segs = (r[3] % 4) as usize;
    let mut path = String::new();
    for k in 0..segs {
        path.push('/');
        let x = (r[4] >> (8 * k)) as usize;
        if x.is_multiple_of(3) {
            path.push_str(PARAMS[x / 3 % PARAMS.len()].1);
        } else {
            path.push_str(SEGMENTS[x % SEGMENTS.len()]);
        }
    }
    if path.is_empty() {
        path.push('/');
    }
    out.push(("http.path".to_owned(), s(&path)));
    if r[5].is_multiple_of(2) {
        out.push((
            "http.headers.x_tenant".to_owned(),
            s(TENANTS[(r[5] / 2) as usize % TENANTS.len()]),
        ));
    }
    out.push((
        "net.src.ip".to_owned(),
        Value::IpAddr(
            IPS[(r[5] / 7) as usize % IPS.len()]
                .parse()
                .expect("pool address"),
        ),
    ));
    out
}

fn path_strategy() -> impl Strategy<Value = PathShape> {
    let seg = prop_oneof![
        3 => (0..SEGMENTS.len()).prop_map(PathSeg::Lit),
        2 => (0..PARAMS.len()).prop_map(PathSeg::Param),
    ];
    let how = prop_oneof![
        Just(PathHow::Exact),
        any::<bool>().prop_map(PathHow::Prefix),
        any::<bool>().prop_map(|end| PathHow::Regex { end }),
        Just(PathHow::Suffix),
    ];
    (prop::collection::vec(seg, 0..4), how).prop_map(|(segs, how)| PathShape { segs, how })
}

/// Mostly `||` chains and `in` sets, sometimes `not in`.
fn alts_strategy() -> impl Strategy<Value = Alts> {
    prop_oneof![2 => Just(Alts::Or), 2 => Just(Alts::In), 1 => Just(Alts::NotIn)]
}

fn leaf_cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        4 => (0..HOSTS.len()).prop_map(Cond::Host),
        1 => (0..HOST_SUFFIXES.len()).prop_map(Cond::HostSuffix),
        2 => (prop::collection::vec(0..METHODS.len(), 1..4), alts_strategy())
            .prop_map(|(ms, alts)| Cond::Methods(ms, alts)),
        5 => path_strategy().prop_map(Cond::Path),
        1 => (0..TENANTS.len(), any::<bool>()).prop_map(|(tenant, lower)| Cond::Tenant { tenant, lower }),
        1 => (prop::collection::vec(0..PORTS.len(), 1..3), alts_strategy())
            .prop_map(|(ps, alts)| Cond::Ports(ps, alts)),
        1 => (0..CIDRS.len()).prop_map(Cond::SrcIn),
        1 => (0..IPS.len()).prop_map(Cond::SrcIs),
        1 => (0..CONTAINS.len()).prop_map(Cond::Contains),
        1 => (0..FREE_REGEXES.len()).prop_map(Cond::Regex),
        1 => (0..HOSTS.len()).prop_map(Cond::Sni),
    ]
}

fn cond_strategy() -> impl Strategy<Value = Cond> {
    prop_oneof![
        12 => leaf_cond(),
        1 => leaf_cond().prop_map(|c| Cond::Not(Box::new(c))),
        2 => (leaf_cond(), leaf_cond()).prop_map(|(a, b)| Cond::Or(Box::new(a), Box::new(b))),
    ]
}

pub fn route_strategy() -> impl Strategy<Value = RouteShape> {
    (0u64..8, prop::collection::vec(cond_strategy(), 0..4))
        .prop_map(|(priority, conds)| RouteShape { priority, conds })
}

/// Tables of `n` routes (priorities from a small range, so ties are common).
pub fn table_strategy(n: std::ops::Range<usize>) -> impl Strategy<Value = Table> {
    prop::collection::vec(route_strategy(), n).prop_map(|routes| Table { routes })
}

/// One change of a table, for churn.
#[derive(Debug, Clone)]
pub enum Op {
    Add(RouteShape),
    /// Removes the route at this index (modulo the table's size).
    Remove(usize),
    /// Replaces the expression of the route at this index.
    Change(usize, RouteShape),
    /// Syncs the whole table as it stands (rebuilding or applying in place, as the router
    /// decides).
    Sync,
}

pub fn ops_strategy(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => route_strategy().prop_map(Op::Add),
        3 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), route_strategy()).prop_map(|(i, r)| Op::Change(i, r)),
        1 => Just(Op::Sync),
    ];
    prop::collection::vec(op, n)
}

/// A condition of a scale table's route (see the module docs): `own` is the route's own field
/// index.
fn scale_cond(own: usize) -> impl Strategy<Value = Cond> {
    prop_oneof![
        24 => (0usize..4, any::<bool>(), any::<bool>()).prop_map(move |(value, lower, any)| {
            Cond::OwnField { index: own, value, lower, any }
        }),
        1 => (200usize..=250, leaf_cond()).prop_map(|(d, c)| Cond::Deep(d, Box::new(c))),
        // thousands of elements now and then: their text is what a debug build parses slowest
        2 => (0usize..3, prop_oneof![12 => 1usize..80, 1 => 200usize..3000], prop::bool::weighted(0.2))
            .prop_map(|(field, size, not)| Cond::BigSet { field, size, not }),
        12 => cond_strategy(),
    ]
}

/// Tables of `n` routes (thousands) of the scale shapes: each route one to three conditions,
/// the first on a field of its own most of the time; a few routes (at most `unicode`) get a long
/// or Unicode regex.
pub fn scale_table_strategy(
    n: std::ops::Range<usize>,
    unicode: usize,
) -> impl Strategy<Value = Table> {
    n.prop_flat_map(|n| {
        let routes: Vec<_> = (0..n)
            .map(|i| {
                (0u64..8, prop::collection::vec(scale_cond(i), 1..3))
                    .prop_map(|(priority, conds)| RouteShape { priority, conds })
            })
            .collect();
        routes
    })
    .prop_flat_map(move |routes| {
        let n = routes.len();
        (
            Just(routes),
            prop::collection::vec((0..n.max(1), 0..UNICODE_REGEXES), 0..=unicode),
        )
    })
    .prop_map(|(mut routes, regexes)| {
        for (at, k) in regexes {
            if let Some(r) = routes.get_mut(at) {
                r.conds.push(Cond::Unicode(k));
            }
        }
        Table { routes }
    })
}

/// Changes of a scale table: adds of scale routes (field indices from `fresh` up), removes,
/// changes and syncs.
pub fn scale_ops_strategy(
    n: std::ops::Range<usize>,
    fresh: usize,
) -> impl Strategy<Value = Vec<Op>> {
    let route = (0u64..8, fresh..fresh + 1000).prop_flat_map(|(priority, own)| {
        prop::collection::vec(scale_cond(own), 1..3)
            .prop_map(move |conds| RouteShape { priority, conds })
    });
    let op = prop_oneof![
        4 => route.clone().prop_map(Op::Add),
        3 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), route).prop_map(|(i, r)| Op::Change(i, r)),
        1 => Just(Op::Sync),
    ];
    prop::collection::vec(op, n)
}

/// A table, changes to it and requests, decoded from a fuzzer's bytes ([`decode`]).
#[derive(Debug, Clone)]
pub struct Decoded {
    pub table: Table,
    pub ops: Vec<Op>,
    pub reqs: Vec<crate::table_check::Req>,
}

/// Most routes, changes and requests a decoded case has (a fuzzer's input should run in
/// milliseconds).
pub const DECODED_ROUTES: usize = 64;
pub const DECODED_OPS: usize = 32;
pub const DECODED_REQUESTS: usize = 16;

/// A field index of [`Cond::OwnField`] from up to four digits of 0–2, so names share prefixes
/// (`x_f_1`, `x_f_12`, `x_f_120`) and collide now and then.
fn decode_own(u: &mut Unstructured<'_>) -> arbitrary::Result<usize> {
    let digits = u.int_in_range(1..=4)?;
    let mut index = 0;
    for _ in 0..digits {
        index = index * 10 + usize::from(u.int_in_range(0u8..=2)?);
    }
    Ok(index)
}

fn decode_alts(u: &mut Unstructured<'_>) -> arbitrary::Result<Alts> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 | 1 => Alts::Or,
        2 | 3 => Alts::In,
        _ => Alts::NotIn,
    })
}

fn decode_path(u: &mut Unstructured<'_>) -> arbitrary::Result<PathShape> {
    let n = u.int_in_range(0..=3)?;
    let mut segs = Vec::with_capacity(n);
    for _ in 0..n {
        segs.push(if u.ratio(2, 5)? {
            PathSeg::Param(u.choose_index(PARAMS.len())?)
        } else {
            PathSeg::Lit(u.choose_index(SEGMENTS.len())?)
        });
    }
    let how = match u.int_in_range(0u8..=3)? {
        0 => PathHow::Exact,
        1 => PathHow::Prefix(u.arbitrary()?),
        2 => PathHow::Regex {
            end: u.arbitrary()?,
        },
        _ => PathHow::Suffix,
    };
    Ok(PathShape { segs, how })
}

/// A condition without nesting of its own (but for a method or port `||` chain).
fn decode_leaf(u: &mut Unstructured<'_>, regexes: &mut usize) -> arbitrary::Result<Cond> {
    Ok(match u.int_in_range(0u8..=15)? {
        0..=3 => Cond::OwnField {
            index: decode_own(u)?,
            value: u.int_in_range(0..=3)?,
            lower: u.arbitrary()?,
            any: u.arbitrary()?,
        },
        4 => Cond::Host(u.choose_index(HOSTS.len())?),
        5 => Cond::HostSuffix(u.choose_index(HOST_SUFFIXES.len())?),
        6 => {
            let n = u.int_in_range(1..=3)?;
            let ms = (0..n)
                .map(|_| u.choose_index(METHODS.len()))
                .collect::<arbitrary::Result<_>>()?;
            Cond::Methods(ms, decode_alts(u)?)
        }
        7 | 8 => Cond::Path(decode_path(u)?),
        9 => Cond::Tenant {
            tenant: u.choose_index(TENANTS.len())?,
            lower: u.arbitrary()?,
        },
        10 => {
            let n = u.int_in_range(1..=2)?;
            let ps = (0..n)
                .map(|_| u.choose_index(PORTS.len()))
                .collect::<arbitrary::Result<_>>()?;
            Cond::Ports(ps, decode_alts(u)?)
        }
        11 => match u.int_in_range(0u8..=2)? {
            0 => Cond::SrcIn(u.choose_index(CIDRS.len())?),
            1 => Cond::SrcIs(u.choose_index(IPS.len())?),
            _ => Cond::Sni(u.choose_index(HOSTS.len())?),
        },
        12 => Cond::Contains(u.choose_index(CONTAINS.len())?),
        13 => Cond::BigSet {
            field: u.int_in_range(0..=2)?,
            size: u.int_in_range(1..=300)?,
            not: u.ratio(1, 5)?,
        },
        // at most two long or Unicode regexes a case: they take milliseconds to compile
        14 if *regexes < 2 => {
            *regexes += 1;
            Cond::Unicode(u.choose_index(UNICODE_REGEXES)?)
        }
        _ => Cond::Regex(u.choose_index(FREE_REGEXES.len())?),
    })
}

fn decode_cond(
    u: &mut Unstructured<'_>,
    depth: u32,
    regexes: &mut usize,
) -> arbitrary::Result<Cond> {
    Ok(match u.int_in_range(0u8..=9)? {
        7 if depth < 3 => Cond::Not(Box::new(decode_cond(u, depth + 1, regexes)?)),
        8 if depth < 3 => Cond::Or(
            Box::new(decode_cond(u, depth + 1, regexes)?),
            Box::new(decode_cond(u, depth + 1, regexes)?),
        ),
        // up to 250 levels around a leaf (which adds at most two): under the parser's 256
        9 => Cond::Deep(u.int_in_range(1..=250)?, Box::new(decode_leaf(u, regexes)?)),
        _ => decode_leaf(u, regexes)?,
    })
}

fn decode_route(u: &mut Unstructured<'_>, regexes: &mut usize) -> arbitrary::Result<RouteShape> {
    let priority = u.int_in_range(0..=7)?;
    let n = u.int_in_range(0..=3)?;
    let conds = (0..n)
        .map(|_| decode_cond(u, 0, regexes))
        .collect::<arbitrary::Result<_>>()?;
    Ok(RouteShape { priority, conds })
}

/// Decodes a case: up to [`DECODED_ROUTES`] routes over every [`Cond`] (fields of their own with
/// names sharing prefixes, nesting up to 250 levels, sets of up to 300 elements, at most two long
/// or Unicode regexes), then up to [`DECODED_OPS`] changes (adds, removes, changes, syncs) and
/// up to [`DECODED_REQUESTS`] requests (built for a route, or from the pools). Any bytes decode:
/// what runs out reads as zeros.
pub fn decode(u: &mut Unstructured<'_>) -> arbitrary::Result<Decoded> {
    let mut regexes = 0;
    let n = u.int_in_range(0..=DECODED_ROUTES)?;
    let routes = (0..n)
        .map(|_| decode_route(u, &mut regexes))
        .collect::<arbitrary::Result<_>>()?;
    let n = u.int_in_range(0..=DECODED_OPS)?;
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        ops.push(match u.int_in_range(0u8..=9)? {
            0..=3 => Op::Add(decode_route(u, &mut regexes)?),
            4..=6 => Op::Remove(u.arbitrary()?),
            7 | 8 => Op::Change(u.arbitrary()?, decode_route(u, &mut regexes)?),
            _ => Op::Sync,
        });
    }
    let n = u.int_in_range(1..=DECODED_REQUESTS)?;
    let mut reqs = Vec::with_capacity(n);
    for _ in 0..n {
        reqs.push((
            u.arbitrary()?,
            u.arbitrary()?,
            u.arbitrary()?,
            u.ratio(1, 4)?,
        ));
    }
    Ok(Decoded {
        table: Table { routes },
        ops,
        reqs,
    })
}
