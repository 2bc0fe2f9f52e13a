//! The `kong-traditional` family: Kong configurations, as Kong users write routes in Kong's
//! traditional form, and the router entries Kong's default `traditional_compatible` flavour
//! makes of them (its `kong/router/transform.lua`, reproduced here from its documented and
//! observed behaviour, and checked against it by `testkit/tests/kong_transform.rs`).
//!
//! A configuration route ([`KongRoute`]) has `hosts` (plain, `*.suffix`, `prefix.*`,
//! `host:port`), one to three `paths` (plain prefixes, and `~` regexes with named captures,
//! alternations and `.+`), `methods`, one `headers` entry, `snis` and a `regex_priority`.
//! Kong's transform turns it into entries ([`KongRoute::transform`]):
//!
//! * **Split by path.** A route whose paths have different lengths, or mix regexes and plain
//!   paths, becomes one entry per group (all regex paths; the plain paths of one length), in
//!   order of first appearance.
//! * **Expression.** The `&&`, in this order, of: `(net.protocol != r#"https"# || (tls.sni ==
//!   …))` for `snis`, then the methods, hosts, paths and one group per header, each field a
//!   parenthesised `||` of its values even when there is one. Every string is a raw string
//!   `r#"…"#` (unless it holds `"#`); `*.x` is `=^ ".x"`, `x.*` is `^= "x."`, `h:P` is
//!   `(http.host == "h" && net.dst.port == P)`; a regex path loses its `~`, gains a leading
//!   `^`, and its `(?<` groups become `(?P<`; a header is `any(lower(http.headers.NAME))` with
//!   dashes as underscores and lowercase values.
//! * **Priority** ([`LuaPriority`]). Kong packs, from the top bit down, the number of fields
//!   the route has (at bit 61), whether its hosts are all plain (bit 60), its header count (at
//!   bit 52), whether its paths are regexes (bit 51), the regex priority (at bit 19) and the
//!   plain path length. Its shift helper shifts a Lua number as LuaJIT's `bit` does, in 32
//!   bits (a shift by 61 is a shift by 29, a weight of 4 or more comes out negative), and only
//!   the two flag bits are true 64-bit values. So an entry with a flag bit gets a `uint64_t`
//!   priority (a negative part converted as LuaJIT converts it, to 2^63), and one without gets
//!   a 32-bit Lua number, negative for four fields or more, which `add_matcher` converts to
//!   `uint64_t` (2^63 again). Priorities repeat heavily: ids break the ties.
//!
//! Hosts are heavy-tailed: `max(1, n / 4)` hosts, host `k` taking a share proportional to
//! `1/k` (about a tenth of the table on the busiest), 5% of routes on no host. Each host's
//! routes take their path keys from a [`PathAlloc`] of their own (no key another's prefix on
//! the same host), so a request built for a route reaches it; hosts share path words, as real
//! hosts do.

use crate::families::PathAlloc;
use crate::rng::Rng;
use crate::shape::{Cond, HostMatch, Part, PathMatch, PathRegex, Shape};
use crate::words::{HOSTED_ROOTS, INGRESS_ROOTS, WORDS};
use crate::ParamKind;

/// A route of a Kong configuration in Kong's traditional form (the fields this family uses).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KongRoute {
    /// The route's id (UUID text).
    pub id: String,
    /// `["http", "https"]`, or `["https"]` for a route with `snis`.
    pub protocols: Vec<&'static str>,
    /// HTTP methods.
    pub methods: Vec<&'static str>,
    /// Hosts, each as Kong takes it.
    hosts: Vec<HostMatch>,
    /// Paths, each as Kong takes it.
    paths: Vec<PathMatch>,
    /// At most one header: `(name as configured, values as configured)`.
    pub headers: Vec<(String, Vec<String>)>,
    /// Server names.
    pub snis: Vec<String>,
    /// Orders regex paths among themselves.
    pub regex_priority: u32,
}

/// A priority as Kong's transform hands it to `add_matcher`: a Lua number (32-bit, maybe
/// negative) or a `uint64_t` (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LuaPriority {
    /// A Lua number, the result of 32-bit bit operations.
    Number(i32),
    /// A `uint64_t` cdata.
    U64(u64),
}

impl LuaPriority {
    /// The `uint64_t` the router is given: a negative number becomes 2^63, as LuaJIT 2.1 (the
    /// one OpenResty ships) converts it.
    pub fn as_u64(self) -> u64 {
        match self {
            LuaPriority::Number(n) => lua_u64(n),
            LuaPriority::U64(u) => u,
        }
    }
}

/// One router entry Kong makes of a configuration route.
#[derive(Clone, Debug)]
pub struct KongEntry {
    /// Which path group of the route (1-based, as Kong numbers them); 1 for an unsplit route.
    pub group: usize,
    /// Whether the route was split (Kong then gives each entry an id of its own).
    pub split: bool,
    /// The expression, as Kong's transform writes it.
    pub expression: String,
    /// The priority, as Kong's transform computes it.
    pub priority: LuaPriority,
    /// What the entry requires, for requests.
    pub(crate) shape: Shape,
}

/// LuaJIT's conversion of a number to `uint64_t` (lj_num2u64 on x86-64): negative numbers
/// saturate to 2^63.
fn lua_u64(n: i32) -> u64 {
    if n < 0 {
        1 << 63
    } else {
        n as u64
    }
}

/// `bit.lshift(n, s)` on a Lua number: 32 bits, the shift count taken modulo 32.
fn lshift32(n: u32, s: u32) -> i32 {
    (n << (s & 31)) as i32
}

fn host_text(h: &HostMatch) -> String {
    match h {
        HostMatch::Exact(h) => h.clone(),
        HostMatch::Suffix(s) => format!("*{s}"),
        HostMatch::Prefix(p) => format!("{p}*"),
        HostMatch::WithPort(h, p) => format!("{h}:{p}"),
    }
}

fn path_text(p: &PathMatch) -> String {
    match p {
        PathMatch::Prefix(p) => p.clone(),
        // Kong anchors a regex path itself: the configuration has no `^`.
        PathMatch::Regex(r) => format!("~{}", &r.regex()[1..]),
        other => unreachable!("kong-traditional has no {other:?} path"),
    }
}

/// Kong's `escape_str`: a raw string unless the text holds `"#`.
fn escape_str(s: &str) -> String {
    if !s.contains("\"#") {
        return format!("r#\"{s}\"#");
    }
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A field's values as Kong writes them: always parenthesised, `||` between.
fn any_of(items: impl Iterator<Item = String>) -> String {
    format!("({})", items.collect::<Vec<_>>().join(" || "))
}

impl KongRoute {
    /// The hosts as written in the configuration (`a.com`, `*.a.com`, `a.*`, `a.com:8443`).
    pub fn host_texts(&self) -> Vec<String> {
        self.hosts.iter().map(host_text).collect()
    }

    /// The paths as written in the configuration (`/a`, `~/a/(?<id>\d+)$`).
    pub fn path_texts(&self) -> Vec<String> {
        self.paths.iter().map(path_text).collect()
    }

    /// The entries Kong's transform makes of this route (see the module docs), in Kong's
    /// order.
    pub fn transform(&self) -> Vec<KongEntry> {
        let groups = path_groups(&self.paths);
        let split = groups.len() > 1;
        groups
            .into_iter()
            .enumerate()
            .map(|(i, group)| KongEntry {
                group: i + 1,
                split,
                expression: self.expression(&group),
                priority: self.priority(&group),
                shape: self.shape(&group),
            })
            .collect()
    }

    fn expression(&self, paths: &[PathMatch]) -> String {
        let mut parts = Vec::new();
        if !self.snis.is_empty() {
            let snis = any_of(self.snis.iter().map(|s| {
                let s = s.strip_suffix('.').unwrap_or(s);
                format!("tls.sni == {}", escape_str(s))
            }));
            parts.push(format!("(net.protocol != r#\"https\"# || {snis})"));
        }
        if !self.methods.is_empty() {
            parts.push(any_of(
                self.methods
                    .iter()
                    .map(|m| format!("http.method == {}", escape_str(m))),
            ));
        }
        if !self.hosts.is_empty() {
            parts.push(any_of(self.hosts.iter().map(|h| match h {
                HostMatch::Exact(h) => format!("http.host == r#\"{h}\"#"),
                HostMatch::Suffix(s) => format!("http.host =^ r#\"{s}\"#"),
                HostMatch::Prefix(p) => format!("http.host ^= r#\"{p}\"#"),
                HostMatch::WithPort(h, p) => {
                    format!("(http.host == r#\"{h}\"# && net.dst.port == {p})")
                }
            })));
        }
        if !paths.is_empty() {
            parts.push(any_of(paths.iter().map(|p| match p {
                PathMatch::Regex(r) => {
                    let re = r.regex().replace("?<", "?P<");
                    format!("http.path ~ {}", escape_str(&re))
                }
                other => format!("http.path ^= {}", escape_str(&path_text(other))),
            })));
        }
        for (name, values) in &self.headers {
            let field = format!(
                "any(lower(http.headers.{}))",
                name.replace('-', "_").to_lowercase()
            );
            parts.push(any_of(
                values
                    .iter()
                    .map(|v| format!("{field} == {}", escape_str(&v.to_lowercase()))),
            ));
        }
        parts.join(" && ")
    }

    fn priority(&self, paths: &[PathMatch]) -> LuaPriority {
        let weight = [
            !self.methods.is_empty(),
            !self.hosts.is_empty(),
            !self.headers.is_empty(),
            !self.snis.is_empty(),
            !paths.is_empty(),
        ]
        .iter()
        .filter(|&&b| b)
        .count() as u32;
        let plain_hosts =
            !self.hosts.is_empty() && !self.host_texts().iter().any(|h| h.contains('*'));
        let regex = matches!(paths.first(), Some(PathMatch::Regex(_)));
        let length = match paths.first() {
            Some(p @ PathMatch::Prefix(_)) => path_text(p).len() as u32,
            _ => 0,
        };
        let regex_priority = if regex { self.regex_priority } else { 0 };
        // bor(weight, plain bit or 0, regex bit or 0, headers, regex priority, length): 32-bit
        // numbers, unless a flag bit (a uint64_t) is among them.
        let numbers = [
            lshift32(weight, 61),
            lshift32(self.headers.len() as u32, 52),
            lshift32(regex_priority, 19),
            (length & 0x7FFFF) as i32,
        ];
        if !plain_hosts && !regex {
            return LuaPriority::Number(numbers.iter().fold(0, |a, n| a | n));
        }
        let flags = (u64::from(plain_hosts) << 60) | (u64::from(regex) << 51);
        LuaPriority::U64(numbers.iter().fold(flags, |a, &n| a | lua_u64(n)))
    }

    fn shape(&self, paths: &[PathMatch]) -> Shape {
        let mut conds = Vec::new();
        if !self.snis.is_empty() {
            conds.push(Cond::SniUnlessPlain(self.snis.clone()));
        }
        if !self.methods.is_empty() {
            conds.push(Cond::Methods(
                self.methods.iter().map(|m| m.to_string()).collect(),
            ));
        }
        if !self.hosts.is_empty() {
            conds.push(Cond::Hosts(self.hosts.clone()));
        }
        conds.push(Cond::Path(paths.to_vec()));
        for (name, values) in &self.headers {
            conds.push(Cond::HeaderAnyOf {
                name: name.replace('-', "_").to_lowercase(),
                values: values.iter().map(|v| v.to_lowercase()).collect(),
            });
        }
        Shape::new(conds)
    }

    /// The route as a Lua table constructor, the form Kong's router code reads routes in
    /// (`{ id = "…", hosts = { … }, … }`; fields without values left out).
    pub fn to_lua(&self) -> String {
        fn list(items: &[String]) -> String {
            let quoted: Vec<String> = items.iter().map(|s| format!("[==[{s}]==]")).collect();
            format!("{{ {} }}", quoted.join(", "))
        }
        fn strs(items: &[&str]) -> Vec<String> {
            items.iter().map(|s| s.to_string()).collect()
        }
        let mut fields = vec![
            format!("id = [==[{}]==]", self.id),
            format!("protocols = {}", list(&strs(&self.protocols))),
        ];
        let mut put = |name: &str, items: Vec<String>| {
            if !items.is_empty() {
                fields.push(format!("{name} = {}", list(&items)));
            }
        };
        put("methods", strs(&self.methods));
        put("hosts", self.host_texts());
        put("paths", self.path_texts());
        put("snis", self.snis.clone());
        if !self.headers.is_empty() {
            let hs: Vec<String> = self
                .headers
                .iter()
                .map(|(n, vs)| format!("[ [==[{n}]==] ] = {}", list(vs)))
                .collect();
            fields.push(format!("headers = {{ {} }}", hs.join(", ")));
        }
        fields.push(format!("regex_priority = {}", self.regex_priority));
        format!("{{ {} }}", fields.join(", "))
    }
}

/// The path groups Kong splits a route into: the regex paths, then the plain paths of each
/// length, in order of first appearance.
fn path_groups(paths: &[PathMatch]) -> Vec<Vec<PathMatch>> {
    let mut keys: Vec<Option<usize>> = Vec::new();
    let mut groups: Vec<Vec<PathMatch>> = Vec::new();
    for p in paths {
        let key = match p {
            PathMatch::Regex(_) => None,
            other => Some(path_text(other).len()),
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

const METHOD_SETS: &[&[&str]] = &[&["GET"], &["GET", "HEAD"], &["GET"], &["GET", "POST"]];
const WRITE_METHOD_SETS: &[&[&str]] = &[&["POST"], &["PUT"], &["DELETE"], &["PUT", "PATCH"]];
const EXTENSIONS: &[&[&str]] = &[&["pdf", "csv", "png"], &["json", "xml"], &["jpg", "jpeg"]];
const VERSIONS: &[&str] = &["v1", "v2", "v3"];
const LANGUAGES: &[&str] = &["en", "de", "fr", "es"];

/// A plain path key and up to two more paths: a nested one (another length: Kong splits the
/// route) or one of the same length (kept in the same entry), and now and then a regex path
/// beside them (another group again).
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
    if rng.chance(0.05) {
        paths.push(regex_path(alloc, roots, rng));
    }
    paths
}

/// A regex path as Kong users write them: an id after a key (`~/<key>/(?<id>\d+)$`, with or
/// without a word after it or the `$`), a file type (`~/<key>/.+\.(?<ext>pdf|csv|png)$`), a
/// version (`~/<key>/(?<version>v1|v2|v3)/<word>`), or a language before the key
/// (`~/(?<lang>en|de|fr|es)<key>`: no literal prefix past the `/`).
fn regex_path(alloc: &mut PathAlloc, roots: &[&str], rng: &mut Rng) -> PathMatch {
    let key = alloc.alloc(rng, roots, 2, 3);
    let mut open = false;
    let parts = match rng.below(20) {
        0..=11 => {
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
            open = rng.chance(0.3);
            parts
        }
        12..=15 => vec![
            Part::Lit(format!("{key}/")),
            Part::Any,
            Part::Lit(".".into()),
            Part::OneOf {
                name: Some("ext".into()),
                words: rng.pick(EXTENSIONS).iter().map(|s| s.to_string()).collect(),
            },
        ],
        16..=18 => {
            open = true;
            vec![
                Part::Lit(format!("{key}/")),
                Part::OneOf {
                    name: Some("version".into()),
                    words: VERSIONS.iter().map(|s| s.to_string()).collect(),
                },
                Part::Lit(format!("/{}", rng.pick_str(WORDS))),
            ]
        }
        _ => {
            open = true;
            vec![
                Part::Lit("/".into()),
                Part::OneOf {
                    name: Some("lang".into()),
                    words: LANGUAGES.iter().map(|s| s.to_string()).collect(),
                },
                Part::Lit(key),
            ]
        }
    };
    PathMatch::Regex(PathRegex {
        parts,
        raw: true,
        open,
    })
}

/// One configuration route on `host` (or on no host), its paths from `alloc`; `previous`, the
/// route made just before on the same key space, may be copied with other methods (a REST
/// resource's write side on its own route).
fn kong_route(
    host: Option<(usize, &str)>,
    alloc: &mut PathAlloc,
    previous: Option<&KongRoute>,
    rng: &mut Rng,
) -> KongRoute {
    if let Some(prev) = previous {
        let reads_only = prev.methods.iter().all(|m| *m == "GET" || *m == "HEAD");
        if reads_only && rng.chance(0.1) {
            let mut r = prev.clone();
            r.methods = rng.pick(WRITE_METHOD_SETS).to_vec();
            return r;
        }
    }
    let mut r = KongRoute {
        protocols: vec!["http", "https"],
        ..KongRoute::default()
    };
    let roots = if host.is_some() {
        HOSTED_ROOTS
    } else {
        INGRESS_ROOTS
    };
    if let Some((k, h)) = host {
        let base = h.strip_suffix(".com").unwrap_or(h);
        r.hosts = match rng.below(100) {
            0..=64 => vec![HostMatch::Exact(h.into())],
            65..=79 => vec![
                HostMatch::Exact(h.into()),
                HostMatch::Suffix(format!(".{h}")),
            ],
            80..=84 => vec![HostMatch::Suffix(format!(".{h}"))],
            85..=89 => vec![
                HostMatch::Exact(h.into()),
                HostMatch::Exact(format!("svc-{k}.internal")),
            ],
            90..=94 => vec![HostMatch::WithPort(h.into(), 8443)],
            _ => vec![HostMatch::Prefix(format!("{base}."))],
        };
        if rng.chance(0.05) {
            r.snis = vec![h.to_string()];
            r.protocols = vec!["https"];
        }
    }
    r.paths = if rng.chance(0.12) {
        let mut paths = vec![regex_path(alloc, roots, rng)];
        if rng.chance(0.2) {
            paths.push(regex_path(alloc, roots, rng));
        }
        paths
    } else {
        plain_paths(alloc, roots, rng)
    };
    if rng.chance(0.3) {
        r.methods = rng.pick(METHOD_SETS).to_vec();
    }
    if rng.chance(0.08) {
        let name = if rng.chance(0.5) {
            "X-Tenant"
        } else {
            "x-tenant"
        };
        let mut values = vec![format!("t-{}", rng.below(50))];
        if rng.chance(0.3) {
            values.push(format!("T-{}", 50 + rng.below(50)));
        }
        r.headers = vec![(name.to_string(), values)];
    }
    if rng.chance(0.2) {
        r.regex_priority = 1 + rng.below(10) as u32;
    }
    r
}

/// Which host each of `n` routes goes to: host `k` (of `max(1, n / 4)`) with a weight
/// proportional to `1/k` (integer draws only, so every platform gets the same table); `None`
/// for the 5% of routes without a host.
fn host_draws(n: usize, rng: &mut Rng) -> Vec<Option<usize>> {
    let hosts = (n / 4).max(1);
    let mut cumulative = Vec::with_capacity(hosts);
    let mut total = 0u64;
    for k in 1..=hosts as u64 {
        total += 1_000_000_000 / k;
        cumulative.push(total);
    }
    (0..n)
        .map(|_| {
            if rng.chance(0.05) {
                return None;
            }
            let x = rng.range(0, total);
            Some(cumulative.partition_point(|&c| c <= x).min(hosts - 1))
        })
        .collect()
}

/// A Kong configuration whose transform gives at least `n` entries (ids left empty: the
/// caller gives them).
pub(crate) fn configuration(n: usize, rng: &mut Rng) -> Vec<KongRoute> {
    let draws = host_draws(n, rng);
    let hosts = draws.iter().flatten().max().map_or(0, |m| m + 1);
    let names: Vec<String> = (0..hosts)
        .map(|k| format!("{}-{k}.example.com", rng.pick_str(WORDS)))
        .collect();
    // one key space per host (and one for the routes without a host)
    let mut allocs: Vec<PathAlloc> = (0..=hosts).map(|_| PathAlloc::default()).collect();
    let mut previous: Vec<Option<KongRoute>> = vec![None; hosts + 1];
    let mut out = Vec::new();
    let mut entries = 0;
    for draw in draws {
        if entries >= n {
            break;
        }
        let slot = draw.unwrap_or(hosts);
        let host = draw.map(|k| (k, names[k].as_str()));
        let r = kong_route(host, &mut allocs[slot], previous[slot].as_ref(), rng);
        entries += path_groups(&r.paths).len();
        out.push(r.clone());
        previous[slot] = Some(r);
    }
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

    /// One configuration route with every field, as Kong's transform reads it: three path
    /// groups (two lengths, the regexes), so three entries, in the order of Kong's split.
    #[test]
    fn a_route_is_split_by_path_length_and_written_as_kong_writes_it() {
        let route = KongRoute {
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
            headers: vec![("X-Tenant".into(), vec!["t-1".into(), "T-2".into()])],
            snis: vec!["a.com".into()],
            regex_priority: 7,
            ..KongRoute::default()
        };
        assert_eq!(route.path_texts()[1], r"~/z/(?<id>\d+)$");
        let out = route.transform();
        let exprs: Vec<&str> = out.iter().map(|e| e.expression.as_str()).collect();
        let common = r##"(net.protocol != r#"https"# || (tls.sni == r#"a.com"#)) && (http.method == r#"GET"# || http.method == r#"HEAD"#) && (http.host == r#"a.com"# || http.host =^ r#".a.com"#)"##;
        let header = r##"(any(lower(http.headers.x_tenant)) == r#"t-1"# || any(lower(http.headers.x_tenant)) == r#"t-2"#)"##;
        assert_eq!(
            exprs,
            [
                format!(
                    r##"{common} && (http.path ^= r#"/x"# || http.path ^= r#"/w"#) && {header}"##
                ),
                format!(r##"{common} && (http.path ~ r#"^/z/(?P<id>\d+)$"#) && {header}"##),
                format!(r##"{common} && (http.path ^= r#"/yy"#) && {header}"##),
            ]
        );
        // Five fields: 5 << 29 is negative in 32 bits. The regex entry has a flag bit, so its
        // priority is a uint64_t, the negative part turned into 2^63.
        let head = (5u32 << 29) as i32 | (1 << 20);
        let priorities: Vec<LuaPriority> = out.iter().map(|e| e.priority).collect();
        assert_eq!(
            priorities,
            [
                LuaPriority::Number(head | 2),
                LuaPriority::U64((1 << 63) | (1 << 51) | (1 << 20) | (7 << 19)),
                LuaPriority::Number(head | 3),
            ]
        );
        assert!(out.iter().all(|e| e.split));
        assert!(out.iter().all(|e| e.priority.as_u64() >= 1 << 63));
    }

    #[test]
    fn plain_hosts_set_their_bit_and_few_fields_stay_positive() {
        let mut route = KongRoute {
            hosts: vec![HostMatch::WithPort("a.com".into(), 8443)],
            paths: vec![PathMatch::Prefix("/abc".into())],
            ..KongRoute::default()
        };
        let entry = &route.transform()[0];
        assert_eq!(
            entry.expression,
            r##"((http.host == r#"a.com"# && net.dst.port == 8443)) && (http.path ^= r#"/abc"#)"##
        );
        assert_eq!(entry.priority, LuaPriority::U64((1 << 60) | (2 << 29) | 4));
        assert!(!entry.split);
        route.hosts = vec![HostMatch::Prefix("a.".into())];
        let entry = &route.transform()[0];
        assert!(entry.expression.starts_with(r##"(http.host ^= r#"a."#)"##));
        assert_eq!(entry.priority, LuaPriority::Number((2 << 29) | 4));
        route.hosts = Vec::new();
        assert_eq!(
            route.transform()[0].priority,
            LuaPriority::Number((1 << 29) | 4)
        );
    }

    #[test]
    fn a_string_holding_the_raw_terminator_is_escaped() {
        assert_eq!(escape_str(r##"a"#b"##), r##""a\"#b""##);
        assert_eq!(escape_str(r"a\d"), r##"r#"a\d"#"##);
    }
}
