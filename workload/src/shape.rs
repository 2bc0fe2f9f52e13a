//! A route's structured description ([`Shape`]): what the generator chose for it (host, path
//! pieces, methods, parameters...). The expression text is *rendered* from it, and requests are
//! *built* from it; nothing here reads expression text back.
//!
//! Invariant: a request [`Shape::request`] builds makes the rendered expression true (the crate's
//! tests check it with the core crate's reference evaluator). A new kind of condition therefore
//! needs both its rendering and its part of the request, in step.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::rest::ParamKind;
use crate::rng::Rng;
use crate::words::{NAMES, WORDS};
use crate::Value;

/// An IP network: address (host bits zero) and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    /// The network address.
    pub addr: IpAddr,
    /// The prefix length.
    pub len: u8,
}

impl Cidr {
    /// A random address inside the network.
    pub(crate) fn random_member(&self, rng: &mut Rng) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let host = if self.len >= 32 {
                    0
                } else {
                    (rng.next_u64() as u32) >> self.len
                };
                IpAddr::V4(Ipv4Addr::from(u32::from(a) | host))
            }
            IpAddr::V6(a) => {
                let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
                let host = if self.len >= 128 { 0 } else { r >> self.len };
                IpAddr::V6(Ipv6Addr::from(u128::from(a) | host))
            }
        }
    }

    /// Whether `ip` is inside the network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(a) & mask == u32::from(n)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(a) & mask == u128::from(n)
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// A piece of an anchored path regex.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// Literal text (`/t42/repos/`), escaped when rendered.
    Lit(String),
    /// A named group `(?<name>…)` of the kind's class.
    Param {
        /// The group's name.
        name: String,
        /// What it accepts.
        kind: ParamKind,
    },
    /// `.+`: any non-empty text, slashes included.
    Any,
    /// An alternation of literal words, `(?<name>pdf|csv)` (or `(?:pdf|csv)` without a name).
    OneOf {
        /// The group's name, if it captures.
        name: Option<String>,
        /// The words (plain letters and digits).
        words: Vec<String>,
    },
}

/// An anchored path regex, `^…$`, from literal text and named parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PathRegex {
    /// The pieces, in order.
    pub parts: Vec<Part>,
    /// Rendered as a raw string `r#"…"#` (else a quoted string with `\\` escapes).
    pub raw: bool,
    /// Without the closing `$`: the regex also takes longer paths (`^/users/\d+/orders`), as
    /// Kong users often write them.
    pub open: bool,
}

impl PathRegex {
    /// The regex text (`^/repos/(?<owner>[^/]+)$`).
    pub fn regex(&self) -> String {
        let mut re = String::from("^");
        for p in &self.parts {
            match p {
                Part::Lit(s) => {
                    for c in s.chars() {
                        if "\\.+*?()|[]{}^$".contains(c) {
                            re.push('\\');
                        }
                        re.push(c);
                    }
                }
                Part::Param { name, kind } => {
                    let _ = write!(re, "(?<{name}>{})", kind.regex());
                }
                Part::Any => re.push_str(".+"),
                Part::OneOf { name, words } => {
                    match name {
                        Some(n) => {
                            let _ = write!(re, "(?<{n}>");
                        }
                        None => re.push_str("(?:"),
                    }
                    re.push_str(&words.join("|"));
                    re.push(')');
                }
            }
        }
        if !self.open {
            re.push('$');
        }
        re
    }

    /// The path in `{name}` template form (`/repos/{owner}`), as path routers write it. A
    /// template has no alternation nor `.+` inside a segment: such a part is written as a
    /// parameter of its own (`{ext}`, `{any}`), which takes more paths than the regex.
    pub fn template(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Param { name, .. } => {
                    let _ = write!(out, "{{{name}}}");
                }
                Part::Any => out.push_str("{any}"),
                Part::OneOf { name, .. } => {
                    let _ = write!(out, "{{{}}}", name.as_deref().unwrap_or("one_of"));
                }
            }
        }
        out
    }

    fn build(&self, rng: &mut Rng, with_ids: bool) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Param { kind, .. } => out.push_str(&match kind {
                    ParamKind::Number => rng.id_digits(),
                    ParamKind::Hex => {
                        let len = 7 + rng.below(26);
                        (0..len)
                            .map(|_| char::from(b"0123456789abcdef"[rng.below(16)]))
                            .collect()
                    }
                    ParamKind::Segment if with_ids => rng.id_digits(),
                    ParamKind::Segment => rng.pick_str(NAMES).to_string(),
                }),
                Part::Any if with_ids => out.push_str(&rng.id_digits()),
                Part::Any => out.push_str(rng.pick_str(NAMES)),
                Part::OneOf { words, .. } => out.push_str(&words[rng.below(words.len())]),
            }
        }
        out
    }
}

/// A class of characters a [`FreePart::Run`] repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CharClass {
    /// `\w` (Unicode word characters, the regex crate's default).
    Word,
    /// `\d`.
    Digit,
    /// `\p{L}`: any letter.
    Letter,
    /// `[à-ÿ]`: the small letters of Latin-1 (and `÷`).
    LatinSmall,
}

impl CharClass {
    /// The class in regex syntax.
    pub fn regex(&self) -> &'static str {
        match self {
            CharClass::Word => r"\w",
            CharClass::Digit => r"\d",
            CharClass::Letter => r"\p{L}",
            CharClass::LatinSmall => "[à-ÿ]",
        }
    }

    /// Characters a request puts in a run of the class: never a digit but for [`CharClass::Digit`]
    /// (see [`FreeRegex`]), non-ASCII ones when `unicode`.
    fn samples(&self, unicode: bool) -> &'static [char] {
        match (self, unicode) {
            (CharClass::Digit, _) => &['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'],
            (CharClass::LatinSmall, _) => &['à', 'ç', 'é', 'ï', 'ñ', 'ö', 'ø', 'ü', 'ÿ', 'þ'],
            (CharClass::Word | CharClass::Letter, false) => FILLER_ASCII,
            (CharClass::Word | CharClass::Letter, true) => FILLER_UNICODE,
        }
    }
}

/// Filler of long paths and runs of word characters: letters, no digit, no `p` or `x` (the
/// markers of the unanchored family's tags).
const FILLER_ASCII: &[char] = &[
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'q', 'r', 's', 't',
    'u', 'v', 'w',
];
/// The same for Unicode paths: letters of two, three and four bytes (Latin, Greek, Cyrillic,
/// CJK, a letter outside the BMP), all of `\w` and `\p{L}`, no digit.
const FILLER_UNICODE: &[char] = &[
    'é', 'ø', 'ł', 'ß', 'λ', 'Ω', 'ж', 'Я', 'ק', 'ب', 'ह', '中', '文', 'ア', '한', '𝒜',
];

/// A piece of a [`FreeRegex`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FreePart {
    /// Literal text, escaped when rendered.
    Lit(String),
    /// A run of `class`: `{min}`, `{min,max}`, `{min,}`, `+` or `*`.
    Run {
        /// What the run repeats.
        class: CharClass,
        /// Fewest characters.
        min: usize,
        /// Most characters; `None`: unbounded.
        max: Option<usize>,
    },
}

/// A path regex that is not a REST pattern: runs of character classes and literals, unanchored
/// (no literal prefix for an index to key on) or anchored `^…$`, case-sensitive or `(?i)`.
///
/// Invariant of the families that use it (unanchored-regex, unicode-classes): each route's
/// regex holds a literal *tag* of its own, a marker and six digits (`x000042`), and no request
/// puts a digit anywhere but in its own tag, in [`CharClass::Digit`] runs (always after a `/`)
/// and in ids after a `/`; so a request built for one route matches no other route of its table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FreeRegex {
    /// The pieces, in order.
    pub parts: Vec<FreePart>,
    /// `^…$`: requests' paths are exactly the pieces (so they start with a `/` literal).
    pub anchored: bool,
    /// `(?i)`: literals are written in upper case and requests send them in lower case.
    pub caseless: bool,
    /// Requests fill runs and padding with non-ASCII letters.
    pub unicode: bool,
    /// Unanchored regexes: the length, in bytes, requests' paths are padded to (the match sits
    /// in the middle of letters); miss-keys requests of a table are padded to its longest.
    pub path_len: usize,
}

fn escape_into(re: &mut String, s: &str) {
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            re.push('\\');
        }
        re.push(c);
    }
}

impl FreeRegex {
    /// The regex text (`\w{30}x000042`, `(?i)^/WIKI/\p{L}+/ü000007$`).
    pub fn regex(&self) -> String {
        let mut re = String::new();
        if self.caseless {
            re.push_str("(?i)");
        }
        if self.anchored {
            re.push('^');
        }
        for p in &self.parts {
            match p {
                FreePart::Lit(s) => escape_into(&mut re, s),
                FreePart::Run { class, min, max } => {
                    re.push_str(class.regex());
                    let _ = match (*min, *max) {
                        (1, None) => write!(re, "+"),
                        (0, None) => write!(re, "*"),
                        (m, None) => write!(re, "{{{m},}}"),
                        (m, Some(x)) if m == x => write!(re, "{{{m}}}"),
                        (m, Some(x)) => write!(re, "{{{m},{x}}}"),
                    };
                }
            }
        }
        if self.anchored {
            re.push('$');
        }
        re
    }

    /// The text the pieces match: literals (lower-cased when caseless), runs of sample
    /// characters a little longer than their minimum.
    fn core(&self, rng: &mut Rng) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                FreePart::Lit(s) if self.caseless => out.push_str(&s.to_lowercase()),
                FreePart::Lit(s) => out.push_str(s),
                FreePart::Run { class, min, max } => {
                    let extra = max.unwrap_or(min + 3).saturating_sub(*min).min(3);
                    let len = (min + rng.below(extra + 1)).max(1);
                    let samples = class.samples(self.unicode);
                    out.extend((0..len).map(|_| *rng.pick(samples)));
                }
            }
        }
        out
    }

    fn build(&self, rng: &mut Rng) -> String {
        let core = self.core(rng);
        if self.anchored {
            return core;
        }
        // Half the padding before the match, half after; a `/` on each side of the match.
        let pad = self.path_len.saturating_sub(core.len() + 3);
        let mut path = String::from("/");
        push_filler(&mut path, rng, pad / 2, self.unicode);
        if !path.ends_with('/') {
            path.push('/');
        }
        path.push_str(&core);
        path.push('/');
        push_filler(&mut path, rng, pad - pad / 2, self.unicode);
        path
    }
}

/// `bytes` more bytes (or a character more) of letters, a `/` every 40-odd characters: a path's
/// words, with no digit and no marker (see [`FreeRegex`]).
pub(crate) fn push_filler(out: &mut String, rng: &mut Rng, bytes: usize, unicode: bool) {
    let samples = if unicode {
        FILLER_UNICODE
    } else {
        FILLER_ASCII
    };
    let end = out.len() + bytes;
    let mut word = 0;
    while out.len() < end {
        if word >= 40 + rng.below(8) {
            out.push('/');
            word = 0;
        } else {
            out.push(*rng.pick(samples));
            word += 1;
        }
    }
}

/// An anchored alternation of literal paths, `^<prefix>(a|b|…)$` (a capturing group, as
/// hand-written routes have it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Alternation {
    /// Literal text before the group (`/`).
    pub prefix: String,
    /// The branches, each literal text.
    pub branches: Vec<String>,
    /// The length, in bytes, a miss-keys request's path is padded to (see [`FreeRegex`]).
    pub path_len: usize,
}

impl Alternation {
    /// The regex text.
    pub fn regex(&self) -> String {
        let mut re = String::from("^");
        escape_into(&mut re, &self.prefix);
        re.push('(');
        for (k, b) in self.branches.iter().enumerate() {
            if k > 0 {
                re.push('|');
            }
            escape_into(&mut re, b);
        }
        re.push_str(")$");
        re
    }
}

/// One way of matching the path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathMatch {
    /// `http.path ^= "p"`.
    Prefix(String),
    /// `http.path == "p"`.
    Exact(String),
    /// `http.path ~ "^…$"`.
    Regex(PathRegex),
    /// `http.path contains "s"`.
    Contains(String),
    /// `http.path =^ "s"`.
    Suffix(String),
    /// `http.path ~ "…"`, a regex of character-class runs and literals.
    Free(FreeRegex),
    /// `http.path ~ "^/(a|b|…)$"`.
    Alternation(Alternation),
}

/// A header predicate: `[any(][lower(]http.headers.NAME[)][)] == "value"`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// The header's field name (`x_version`).
    pub name: String,
    /// The literal (lowercase when `lower`).
    pub value: String,
    /// `any(...)`: one value suffices (requests may send a decoy value too).
    pub any: bool,
    /// `lower(...)`: requests may send the value in another case.
    pub lower: bool,
}

/// One host of a [`Cond::Hosts`] list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostMatch {
    /// `http.host == "h"`.
    Exact(String),
    /// `http.host =^ ".suffix"` (Kong's `*.suffix`).
    Suffix(String),
    /// `http.host ^= "prefix."` (Kong's `prefix.*`).
    Prefix(String),
    /// `(http.host == "h" && net.dst.port == P)` (Kong's `h:P`).
    WithPort(String, u16),
}

impl HostMatch {
    fn render(&self) -> String {
        match self {
            HostMatch::Exact(h) => format!("http.host == {}", quote(h)),
            HostMatch::Suffix(s) => format!("http.host =^ {}", quote(s)),
            HostMatch::Prefix(p) => format!("http.host ^= {}", quote(p)),
            HostMatch::WithPort(h, p) => {
                format!("(http.host == {} && net.dst.port == {p})", quote(h))
            }
        }
    }
}

/// One conjunct of a route.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    /// `http.method == "M"`, or a parenthesised `||` of several.
    Methods(Vec<String>),
    /// `http.method != "M"` (never `GET`, the method requests send by default).
    MethodNot(String),
    /// `http.host == "h"`.
    Host(String),
    /// `http.host =^ ".suffix"` (a wildcard host).
    HostSuffix(String),
    /// One of several hosts, as Kong writes a route's `hosts` list (parenthesised when several).
    Hosts(Vec<HostMatch>),
    /// One of the alternatives (`||`, parenthesised when several). The first path condition of a
    /// shape makes the request's path; a later one (contains, suffix) only shapes its tail.
    Path(Vec<PathMatch>),
    /// `!(http.path ^= "p")`: `p` is the route's prefix plus `/private`, a word requests built
    /// from the shape never put there.
    PathNotPrefix(String),
    /// `http.path.segments.I == "s"` for each `(I, s)`: the path is made of these segments.
    Segments(Vec<String>),
    /// A header predicate.
    Header(Header),
    /// `http.queries.NAME == "value"`.
    Query {
        /// The query argument.
        name: String,
        /// Its value.
        value: String,
    },
    /// `net.dst.port == P`.
    Port(u16),
    /// `net.dst.port >= P`, the literal in hex when `hex`.
    PortAtLeast {
        /// The bound.
        port: u16,
        /// Written as `0x…`.
        hex: bool,
    },
    /// `tls.sni == "s"`.
    Sni(String),
    /// `(net.protocol != "https" || tls.sni == "a" || …)`: Kong's form of a route's `snis`,
    /// which a request over plain HTTP meets whatever its SNI.
    SniUnlessPlain(Vec<String>),
    /// `(any(lower(http.headers.NAME)) == "v1" || …)`: Kong's form of one of a route's
    /// `headers` with its values (lowercase).
    HeaderAnyOf {
        /// The header's field name (`x_tenant`).
        name: String,
        /// The values, one of which a request must send (in any case).
        values: Vec<String>,
    },
    /// `net.src.ip in NET`.
    SrcIn(Cidr),
    /// `net.src.ip not in NET` (never a network holding the default source addresses).
    SrcNotIn(Cidr),
}

/// A route's structured description: the conjunction of its conditions, in the order the
/// expression is written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The conditions, all of which a request must meet.
    pub conds: Vec<Cond>,
}

/// Hosts of requests for routes that name no host: never a generated route's host.
pub(crate) const DEFAULT_HOSTS: &[&str] = &["www.example.com", "example.com", "m.example.com"];

/// The network default source addresses come from (see [`Cond::SrcNotIn`]).
pub(crate) const DEFAULT_SOURCE: Cidr = Cidr {
    addr: IpAddr::V4(Ipv4Addr::new(192, 168, 0, 0)),
    len: 16,
};

/// A string literal in the language's `"…"` form.
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

fn render_path(m: &PathMatch) -> String {
    match m {
        PathMatch::Prefix(p) => format!("http.path ^= {}", quote(p)),
        PathMatch::Exact(p) => format!("http.path == {}", quote(p)),
        PathMatch::Regex(r) => {
            let re = r.regex();
            if r.raw && !re.contains("\"#") {
                format!("http.path ~ r#\"{re}\"#")
            } else {
                format!("http.path ~ {}", quote(&re))
            }
        }
        PathMatch::Contains(s) => format!("http.path contains {}", quote(s)),
        PathMatch::Suffix(s) => format!("http.path =^ {}", quote(s)),
        PathMatch::Free(r) => format!("http.path ~ {}", quote(&r.regex())),
        PathMatch::Alternation(a) => format!("http.path ~ {}", quote(&a.regex())),
    }
}

fn any_of(parts: Vec<String>) -> String {
    if parts.len() == 1 {
        parts.into_iter().next().unwrap_or_default()
    } else {
        format!("({})", parts.join(" || "))
    }
}

impl Cond {
    fn render(&self) -> String {
        match self {
            Cond::Methods(ms) => any_of(
                ms.iter()
                    .map(|m| format!("http.method == {}", quote(m)))
                    .collect(),
            ),
            Cond::MethodNot(m) => format!("http.method != {}", quote(m)),
            Cond::Host(h) => format!("http.host == {}", quote(h)),
            Cond::HostSuffix(s) => format!("http.host =^ {}", quote(s)),
            Cond::Hosts(hs) => any_of(hs.iter().map(HostMatch::render).collect()),
            Cond::Path(alts) => any_of(alts.iter().map(render_path).collect()),
            Cond::PathNotPrefix(p) => format!("!(http.path ^= {})", quote(p)),
            Cond::Segments(segs) => segs
                .iter()
                .enumerate()
                .map(|(i, s)| format!("http.path.segments.{i} == {}", quote(s)))
                .collect::<Vec<_>>()
                .join(" && "),
            Cond::Header(h) => {
                let mut lhs = format!("http.headers.{}", h.name);
                if h.lower {
                    lhs = format!("lower({lhs})");
                }
                if h.any {
                    lhs = format!("any({lhs})");
                }
                format!("{lhs} == {}", quote(&h.value))
            }
            Cond::Query { name, value } => format!("http.queries.{name} == {}", quote(value)),
            Cond::Port(p) => format!("net.dst.port == {p}"),
            Cond::PortAtLeast { port, hex: true } => format!("net.dst.port >= {port:#x}"),
            Cond::PortAtLeast { port, hex: false } => format!("net.dst.port >= {port}"),
            Cond::Sni(s) => format!("tls.sni == {}", quote(s)),
            Cond::SniUnlessPlain(snis) => {
                let mut alts = vec!["net.protocol != \"https\"".to_string()];
                alts.extend(snis.iter().map(|s| format!("tls.sni == {}", quote(s))));
                any_of(alts)
            }
            Cond::HeaderAnyOf { name, values } => any_of(
                values
                    .iter()
                    .map(|v| format!("any(lower(http.headers.{name})) == {}", quote(v)))
                    .collect(),
            ),
            Cond::SrcIn(c) => format!("net.src.ip in {c}"),
            Cond::SrcNotIn(c) => format!("net.src.ip not in {c}"),
        }
    }
}

/// A tail for a path: nothing, a word, and with `with_ids` a numeric id.
fn tail(rng: &mut Rng, with_ids: bool) -> String {
    let mut t = String::new();
    if rng.chance(0.5) {
        t.push('/');
        t.push_str(rng.pick_str(WORDS));
    }
    if with_ids {
        t.push('/');
        t.push_str(&rng.id_digits());
    }
    t
}

/// `base` followed by `tail`, without doubling the slash of a prefix that ends in one (and
/// giving such a prefix at least one more segment, as a browser's path would).
fn join(base: &str, tail: &str, rng: &mut Rng) -> String {
    match base.strip_suffix('/') {
        Some(b) if tail.is_empty() => format!("{b}/{}", rng.pick_str(WORDS)),
        Some(b) => format!("{b}{tail}"),
        None => format!("{base}{tail}"),
    }
}

impl Shape {
    /// A shape of these conditions.
    pub fn new(conds: Vec<Cond>) -> Shape {
        Shape { conds }
    }

    /// The expression text: the conditions joined by `&&`.
    pub fn expression(&self) -> String {
        self.conds
            .iter()
            .map(Cond::render)
            .collect::<Vec<_>>()
            .join(" && ")
    }

    /// This shape with only its regex path alternatives, or `None` without one: requests built
    /// from it meet a regex (and still the route).
    pub(crate) fn regex_only(&self) -> Option<Shape> {
        self.keep_alternatives(
            |c| matches!(c, Cond::Path(_)),
            |c| match c {
                Cond::Path(alts) => {
                    let alts: Vec<PathMatch> = alts
                        .iter()
                        .filter(|m| matches!(m, PathMatch::Regex(_) | PathMatch::Free(_)))
                        .cloned()
                        .collect();
                    (!alts.is_empty()).then_some(Cond::Path(alts))
                }
                _ => None,
            },
        )
    }

    /// This shape with only its wildcard host alternatives, or `None` without one.
    pub(crate) fn wildcard_only(&self) -> Option<Shape> {
        self.keep_alternatives(
            |c| matches!(c, Cond::Hosts(_) | Cond::HostSuffix(_)),
            |c| match c {
                Cond::HostSuffix(_) => Some(c.clone()),
                Cond::Hosts(hs) => {
                    let hs: Vec<HostMatch> = hs
                        .iter()
                        .filter(|h| matches!(h, HostMatch::Suffix(_) | HostMatch::Prefix(_)))
                        .cloned()
                        .collect();
                    (!hs.is_empty()).then_some(Cond::Hosts(hs))
                }
                _ => None,
            },
        )
    }

    /// This shape with only its alternatives naming `host` exactly, or `None` when it names no
    /// such host: requests built from it are sent to `host`.
    pub(crate) fn on_host(&self, host: &str) -> Option<Shape> {
        self.keep_alternatives(
            |c| matches!(c, Cond::Host(_) | Cond::Hosts(_)),
            |c| match c {
                Cond::Host(h) if h == host => Some(c.clone()),
                Cond::Hosts(hs) => hs
                    .iter()
                    .any(|h| matches!(h, HostMatch::Exact(e) if e == host))
                    .then(|| Cond::Hosts(vec![HostMatch::Exact(host.to_string())])),
                _ => None,
            },
        )
    }

    /// The shape with its first condition that `is` picks replaced by what `keep` leaves of
    /// it; `None` when there is none or nothing is left.
    fn keep_alternatives(
        &self,
        is: impl Fn(&Cond) -> bool,
        keep: impl Fn(&Cond) -> Option<Cond>,
    ) -> Option<Shape> {
        let at = self.conds.iter().position(is)?;
        let mut conds = self.conds.clone();
        conds[at] = keep(&conds[at])?;
        Some(Shape { conds })
    }

    /// Whether the route takes every path (`^= "/"`, or no path condition at all): such a route
    /// does not say which paths its keys leave untaken, so it does not count towards the
    /// table's shared keys (see [`crate::Mix::MissKeys`]).
    pub(crate) fn takes_any_path(&self) -> bool {
        let mut constrained = false;
        for c in &self.conds {
            match c {
                Cond::Path(alts) => {
                    if alts
                        .iter()
                        .any(|m| matches!(m, PathMatch::Prefix(p) if p == "/"))
                    {
                        return true;
                    }
                    constrained = true;
                }
                Cond::Segments(_) => constrained = true,
                _ => {}
            }
        }
        !constrained
    }

    /// A copy whose paths all start below `/<token>`: a route of the same kind, on the same
    /// hosts, ports and headers, that no request of the original table reaches by accident.
    pub(crate) fn freshened(&self, token: &str) -> Shape {
        let under = |p: &str| format!("/{token}{p}");
        let mut has_path = false;
        let mut conds: Vec<Cond> = self
            .conds
            .iter()
            .map(|c| match c {
                Cond::Path(alts) => {
                    let first = !has_path;
                    has_path = true;
                    Cond::Path(
                        alts.iter()
                            .map(|m| match m {
                                PathMatch::Prefix(p) => PathMatch::Prefix(under(p)),
                                PathMatch::Exact(p) => PathMatch::Exact(under(p)),
                                PathMatch::Regex(r) => {
                                    let mut r = r.clone();
                                    r.parts.insert(0, Part::Lit(format!("/{token}")));
                                    PathMatch::Regex(r)
                                }
                                // A contains or suffix condition that makes the path keeps its
                                // kind with the token inside its literal; one that only shapes
                                // the tail of a prefix's path is already below the token.
                                PathMatch::Contains(s) if first => {
                                    PathMatch::Contains(format!("/{token}{s}"))
                                }
                                PathMatch::Suffix(s) if first => {
                                    PathMatch::Suffix(format!("-{token}{s}"))
                                }
                                PathMatch::Free(r) => {
                                    let mut r = r.clone();
                                    r.parts.insert(0, FreePart::Lit(under("/")));
                                    PathMatch::Free(r)
                                }
                                PathMatch::Alternation(a) => {
                                    let mut a = a.clone();
                                    a.prefix = under(&a.prefix);
                                    PathMatch::Alternation(a)
                                }
                                m => m.clone(),
                            })
                            .collect(),
                    )
                }
                Cond::PathNotPrefix(p) => Cond::PathNotPrefix(under(p)),
                Cond::Segments(segs) => {
                    has_path = true;
                    let mut s = vec![token.to_string()];
                    s.extend(segs.iter().cloned());
                    Cond::Segments(s)
                }
                c => c.clone(),
            })
            .collect();
        if !has_path {
            conds.push(Cond::Path(vec![PathMatch::Prefix(format!("/{token}/"))]));
        }
        Shape { conds }
    }

    /// The fields of a request that makes the expression true: the route's own values where it
    /// names them (one alternative of each `||`, at random), ordinary ones elsewhere (method GET,
    /// a default host, port 443, a source address in 192.168.0.0/16). With `with_ids`, the path
    /// carries numeric ids wherever the route leaves room for them. Order: method, host, path,
    /// path segments, then the other fields by name (a header's decoy value before its value).
    pub(crate) fn request(&self, rng: &mut Rng, with_ids: bool) -> Vec<(String, Value)> {
        let mut method = None;
        let mut host = None;
        let mut path: Option<String> = None;
        let mut segments = false;
        let mut port = None;
        let mut src = None;
        let mut rest: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for c in &self.conds {
            match c {
                Cond::Methods(ms) => method = Some(rng.pick(ms).clone()),
                Cond::MethodNot(_) => {}
                Cond::Host(h) => host = Some(h.clone()),
                Cond::HostSuffix(s) => {
                    host = Some(format!("{}{s}", rng.pick_str(&["www", "app", "eu", "us"])))
                }
                Cond::Hosts(hs) => match rng.pick(hs) {
                    HostMatch::Exact(h) => host = Some(h.clone()),
                    HostMatch::Suffix(s) => {
                        host = Some(format!("{}{s}", rng.pick_str(&["www", "app", "eu", "us"])))
                    }
                    HostMatch::Prefix(p) => {
                        host = Some(format!("{p}{}", rng.pick_str(&["com", "net", "io", "eu"])))
                    }
                    HostMatch::WithPort(h, p) => {
                        host = Some(h.clone());
                        port = Some(i64::from(*p));
                    }
                },
                Cond::Path(alts) => {
                    let m = rng.pick(alts);
                    path = Some(match (path.take(), m) {
                        (None, PathMatch::Prefix(p)) => {
                            let t = tail(rng, with_ids);
                            join(p, &t, rng)
                        }
                        (None, PathMatch::Exact(p)) => p.clone(),
                        (None, PathMatch::Regex(r)) => r.build(rng, with_ids),
                        (None, PathMatch::Free(r)) => r.build(rng),
                        (None, PathMatch::Alternation(a)) => {
                            format!("{}{}", a.prefix, rng.pick(&a.branches))
                        }
                        (None, PathMatch::Contains(s)) => {
                            format!("/{}{s}{}", rng.pick_str(WORDS), rng.id_digits())
                        }
                        (None, PathMatch::Suffix(s)) => {
                            format!("/{}/{}{s}", rng.pick_str(WORDS), rng.id_digits())
                        }
                        (Some(base), PathMatch::Contains(s)) => {
                            format!("{}{s}{}", base.trim_end_matches('/'), rng.id_digits())
                        }
                        (Some(base), PathMatch::Suffix(s)) => {
                            format!("{}/{}{s}", base.trim_end_matches('/'), rng.id_digits())
                        }
                        (Some(_), m) => {
                            panic!("a second path condition must be contains or suffix: {m:?}")
                        }
                    });
                }
                Cond::PathNotPrefix(_) => {}
                Cond::Segments(segs) => {
                    segments = true;
                    let t = tail(rng, with_ids);
                    path = Some(format!("/{}{t}", segs.join("/")));
                }
                Cond::Header(h) => {
                    let values = rest.entry(format!("http.headers.{}", h.name)).or_default();
                    if h.any && rng.chance(0.5) {
                        values.push(Value::Str("none".into()));
                    }
                    let v = if h.lower && rng.chance(0.5) {
                        h.value.to_uppercase()
                    } else {
                        h.value.clone()
                    };
                    values.push(Value::Str(v));
                }
                Cond::Query { name, value } => {
                    rest.insert(
                        format!("http.queries.{name}"),
                        vec![Value::Str(value.clone())],
                    );
                }
                Cond::Port(p) => port = Some(i64::from(*p)),
                Cond::PortAtLeast { port: p, .. } => {
                    port = Some(i64::from(*p) + rng.below(1000) as i64)
                }
                Cond::Sni(s) => {
                    rest.insert("tls.sni".into(), vec![Value::Str(s.clone())]);
                }
                Cond::SniUnlessPlain(snis) => {
                    rest.insert("net.protocol".into(), vec![Value::Str("https".into())]);
                    let sni = rng.pick(snis).clone();
                    rest.insert("tls.sni".into(), vec![Value::Str(sni)]);
                }
                Cond::HeaderAnyOf { name, values } => {
                    let v = rng.pick(values);
                    let v = if rng.chance(0.5) {
                        v.to_uppercase()
                    } else {
                        v.clone()
                    };
                    rest.insert(format!("http.headers.{name}"), vec![Value::Str(v)]);
                }
                Cond::SrcIn(c) => src = Some(c.random_member(rng)),
                Cond::SrcNotIn(c) => debug_assert!(!c.contains(DEFAULT_SOURCE.addr)),
            }
        }
        let path = path.unwrap_or_else(|| {
            let t = tail(rng, with_ids);
            join("/", &t, rng)
        });
        let mut fields = vec![
            (
                "http.method".to_string(),
                Value::Str(method.unwrap_or_else(|| "GET".into())),
            ),
            (
                "http.host".to_string(),
                Value::Str(host.unwrap_or_else(|| rng.pick_str(DEFAULT_HOSTS).to_string())),
            ),
            ("http.path".to_string(), Value::Str(path.clone())),
        ];
        if segments {
            for (i, s) in path.trim_start_matches('/').split('/').enumerate() {
                fields.push((format!("http.path.segments.{i}"), Value::Str(s.to_string())));
            }
        }
        rest.insert("net.dst.port".into(), vec![Value::Int(port.unwrap_or(443))]);
        let src = src.unwrap_or_else(|| DEFAULT_SOURCE.random_member(rng));
        rest.insert("net.src.ip".into(), vec![Value::Ip(src)]);
        for (name, values) in rest {
            for v in values {
                fields.push((name.clone(), v));
            }
        }
        fields
    }
}
