//! One generator of test cases for every suite that needs random route tables: a structured
//! description ([`Case`]) of a schema, a route table and requests, and its rendering
//! ([`Case::render`]) to expression text and request values.
//!
//! A description is made of small numbers (which field, which operator, which literal, which
//! spelling, which whitespace) that the rendering reads modulo the sizes of fixed pools, so every
//! description renders, whatever produced it: a proptest [`Strategy`] ([`case_strategy`]) or a
//! fuzz target decoding bytes ([`Case`]'s [`Arbitrary`] impl). Both produce the same types and
//! share the rendering, so a fuzz finding and a proptest failure describe their input alike.
//!
//! What the rendering covers (docs/language.md, "Text" to "Evaluation"): every operator of every
//! type, `lower` and `any` nested in either order and repeated, `!`, groups, `&&` and `||` chained
//! without parentheses wherever precedence (`||` over `&&`) allows, quoted and raw strings with
//! escapes, Unicode and raw line breaks, decimal, hex, octal and leading-zero decimal integers,
//! IPv4 and IPv6 addresses and CIDRs in several spellings, whitespace between any two tokens,
//! wildcard fields, and set literals after `in` / `not in` (one to four elements, duplicates,
//! trailing commas, addresses mixed with networks; empty, mixed and misplaced sets as flaws).
//! Kong's library refuses every set: routes with one are ours only in the differential tests. Literals come from pools chosen for the matchers (prefixes, paths, case-mapping
//! traps, regexes with a text each matches) or, one in eight, are synthesized over the whole range
//! of their type ([`wide_value`]). About one predicate in ten is wrong on purpose (unknown field,
//! the language's words used as field names, type mismatch, operator or transformation the type
//! does not have, a malformed literal or regex, a syntax error), so that acceptance and errors are
//! tested too. Requests are mostly built to satisfy one route (one side of each `||`), plus extra
//! values that make fields multi-valued, values derived from the literals the routes use (as they
//! are, with a prefix or suffix, uppercased, off by one, past the length where regexes change
//! engine), and values of the wrong type or for unknown fields.
//!
//! A case may also change the table once its routes are in ([`StepDesc`]): adds of its routes
//! at free or held ids, removes, syncs in both modes to edited lists (routes kept, dropped,
//! re-prioritised, moved to other ids, given other texts; ids listed twice; empty texts), stale
//! sync plans, and contexts of another schema; and it may put its routes under
//! [`tight_limits`]. [`crate::check::run`] runs all of it against a model.
//!
//! Invariants a change must keep:
//! - Rendering is a pure function of the description: the same description gives the same text
//!   and values, so a failure reproduces from its printed description (or fuzz artifact).
//! - Spelling never changes meaning: [`PredDesc::spelling`], [`RouteDesc::layout`] and
//!   [`ExprDesc::Group`] choose only whitespace, literal spellings and redundant parentheses, so
//!   a route and its [`RouteDesc::respelled`] forms parse to the same tree (or all fail). The
//!   one exception is a deliberately unterminated string, which takes in the text after it:
//!   such a route has no other spelling.
//! - [`RenderedRoute::kong_text`] is `Some` only for text Kong's library 1.7.1 parses without
//!   aborting, and then it means what [`RenderedRoute::text`] means (they differ only in the
//!   whitespace between `not` and `in`, which Kong's parser cannot take but the spec allows;
//!   every route goes to Kong only when [`kong_can_take`] it).
//!   Requests' `values` are all of the field's type; values Kong's library would abort on (a
//!   wrong type, an unknown field) are only ever in `bad_values`.
//! - Nesting is bounded by [`MAX_DEPTH`], far below every parser's limit.

use std::fmt::Write as _;
use std::net::IpAddr;

use arbitrary::{Arbitrary, Unstructured};
use atc_router::{IpCidr, Limits, SyncMode, Type, Uuid, Value};
use proptest::prelude::*;

/// Deepest nesting of groups and `!` the generator writes.
pub const MAX_DEPTH: u32 = 4;
/// Names of the exact fields; their types are part of the description.
pub const EXACT_FIELDS: [&str; 4] = ["f0", "f1", "f2", "f3"];
/// The schema's String wildcard.
pub const WILDCARD: &str = "h.*";
/// Names that resolve through [`WILDCARD`] (`h.` has an empty last segment).
pub const WILDCARD_NAMES: [&str; 4] = ["h.x", "h.y", "h.Q_1", "h."];
/// Field names no schema has: ordinary ones, a name two segments under the wildcard, the words
/// of the language (which are ordinary names to the grammar) and names of unusual shape.
pub const UNKNOWN_FIELDS: [&str; 11] = [
    "nope", "f9", "h.x.y", "in", "not", "contains", "lower", "any", "r", "Z9_.", "x..y",
];
/// The fields Kong's own tests use (`t/*.t` and its Rust tests), in every schema, so that
/// their expressions are valid routes of a case (see [`Case::texts`]).
pub const KONG_TEST_FIELDS: [(&str, Type); 11] = [
    ("string", Type::String),
    ("int", Type::Int),
    ("ipaddr", Type::IpAddr),
    ("http.path", Type::String),
    ("http.body", Type::String),
    ("http.headers.*", Type::String),
    ("tcp.port", Type::Int),
    ("net.port", Type::Int),
    ("l3.ip", Type::IpAddr),
    ("net.ip", Type::IpAddr),
    ("net.cidr", Type::IpCidr),
];
/// Names a predicate picks among Kong's test fields (`http.headers.foo` through the wildcard).
const KONG_FIELD_NAMES: [(&str, Type); 8] = [
    ("http.path", Type::String),
    ("http.body", Type::String),
    ("http.headers.foo", Type::String),
    ("tcp.port", Type::Int),
    ("net.port", Type::Int),
    ("l3.ip", Type::IpAddr),
    ("net.ip", Type::IpAddr),
    ("net.cidr", Type::IpCidr),
];

pub const STRINGS: &[&str] = &[
    "",
    "a",
    "ab",
    "abc",
    "b",
    "A",
    "Ab",
    "/",
    "/a",
    "/a/",
    "/a/b",
    "/a/12",
    "/b/7/x",
    "x.example.com",
    ".example.com",
    "GET",
    "get",
    "é",
    "É",
    "Σa",
    "ΑΣ",
    "ας",
    "İ",
    "K",
    "ß",
    "ẞ",
    "\0",
    "\n",
    "\t",
    "\r\n",
    "\"",
    "\\",
    "a\"b",
    "\"#",
    "r#",
    "🦀",
    "a b",
    "/foo",
    "/foo/bar",
    "/foo/keyword/bar",
    "/123/test",
    "/abc/d",
    "bar",
    "hello\0world",
    "你好",
];

/// Regexes valid in Rust's `regex` syntax, each with a text it finds a match in.
pub const REGEXES: &[(&str, &str)] = &[
    ("^a", "a1"),
    ("b$", "zb"),
    ("a|b", "xbx"),
    ("^(?<x>a)(b)?", "ab"),
    (r"^/a/(\d+)", "/a/12/x"),
    (r"^/(?<seg>[a-z])/(?<n>\d+)?", "/b/7"),
    ("(?i)^a", "Ax"),
    ("^$", ""),
    ("", "q"),
    ("^(a|ab)c?", "abc"),
    (r"^\w+", "é1"),
    (r"\.example\.com$", "x.example.com"),
    ("^/a$", "/a"),
    ("(?m)^b", "a\nb"),
    (r"\Ax", "xy"),
    (r"^/u/(?<id>\d+)$", "/u/42"),
    ("(a*)*b", "aaab"),
    (r"(?<a>x)|(?<b>y)", "y"),
    ("^(a)?(b)?$", "b"),
    ("^(?:/v(?<ver>[0-9]+))?/api", "/v2/api"),
    ("(?i)σ", "ΑΣ"),
    (r"\bab\b", "x ab y"),
    ("(?s).", "\n"),
    ("^.{0,3}$", "abc"),
    (r"\p{Greek}+", "ΑΣ"),
    ("[^/]+$", "/a/b"),
    ("é", "café"),
    (r"\d{2,}", "a123"),
];
/// Pieces of which arbitrary regexes are composed (often invalid, sometimes valid).
const REGEX_PIECES: &[&str] = &[
    "a",
    "b",
    "^",
    "$",
    "(",
    ")",
    "|",
    "*",
    "+",
    "?",
    r"\d",
    ".",
    "[a-z]",
    "(?<n>",
    "(?<m>",
    "{2}",
    "{0,}",
    "é",
    "(?i)",
    r"\b",
    "[",
    "]",
    "/",
    r"\",
    "(?:",
    "{99}",
    "(?-u:\\xff)",
    r"\p{L}",
    "(?P<p>",
    r"\1",
    "(?=",
];
pub const INTS: &[i64] = &[
    -1,
    0,
    1,
    2,
    7,
    8,
    9,
    80,
    100,
    443,
    8000,
    98,
    i64::MAX,
    -i64::MAX,
];
pub const IPS: &[&str] = &[
    "10.0.0.1",
    "10.1.0.1",
    "192.168.0.1",
    "0.0.0.0",
    "255.255.255.255",
    "::1",
    "::",
    "2001:db8::1",
    "::ffff:a00:1",
    "fe80::1:2",
    "192.168.12.1",
    "192.168.1.1",
    "fd00::1",
];
pub const CIDRS: &[&str] = &[
    "10.0.0.0/8",
    "10.0.0.0/31",
    "10.0.0.1/32",
    "::/0",
    "2001:db8::/32",
    "0.0.0.0/0",
    "::1/128",
    "192.168.0.0/16",
    "fe80::/10",
    "10.1.0.0/16",
];
/// The entries of [`BAD_LITERALS`] that open a string and never close it.
const UNTERMINATED: [&str; 2] = ["\"abc", "r#\"abc\""];
/// Literals of every kind that are malformed (or, for the spelling, that one reading of the
/// language rejects): a route using one must be refused by both libraries, or differ
/// documentedly.
const BAD_LITERALS: &[&str] = &[
    "019",
    "0X1F",
    "-9223372036854775808",
    "9223372036854775808",
    "-0x8000000000000000",
    "1.5",
    "- 1",
    "+1",
    "010.0.0.1",
    "256.0.0.1",
    "10.0.0.1/8",
    "10.0.0.0/33",
    "::/129",
    "::ffff:1.2.3.4",
    "fe80::1%eth0",
    "1:2",
    "\"\\d\"",
    "'x'",
    "r##\"x\"##",
    "\"abc",
    "r#\"abc\"",
    "10.0.0.0/008",
    "::/0128",
    "10.0.0.0/",
    "0x",
    "--1",
];

/// Tokens of the language, good ones and near misses (wrong case, half operators, malformed
/// literals, odd whitespace), for token soups and damaged texts.
pub const TOKENS: &[&str] = &[
    "a",
    "http.path",
    "lower",
    "any",
    "Lower",
    "in",
    "not",
    "contains",
    "r",
    "(",
    ")",
    "!",
    "!(",
    "&&",
    "||",
    "&",
    "|",
    "==",
    "!=",
    "~",
    "^=",
    "=^",
    ">",
    ">=",
    "<",
    "<=",
    "not in",
    "=",
    "\"x\"",
    "\"a\\\"b\"",
    "\"\\d\"",
    "\"",
    "\\",
    "r#\"q\"#",
    "r#\"",
    "\"#",
    "r##\"x\"##",
    "1",
    "-1",
    "010",
    "019",
    "0x1F",
    "0X1F",
    "-",
    "9223372036854775808",
    "1.5",
    "10.0.0.0/8",
    "10.0.0.1/8",
    "::1",
    "::/0",
    "::ffff:1.2.3.4",
    "fe80::1%eth0",
    "1.2.3.4",
    "256.0.0.1",
    "/33",
    ":",
    ".",
    " ",
    " ",
    "\t",
    "\n",
    "\r\n",
    "#",
    "é",
    "\u{0}",
];

/// `PredDesc::lit` and request value choices from here up synthesize a value over the whole
/// range of its type instead of reading a pool (one choice in eight): strings of the characters
/// the readers, the printer and the evaluators treat apart, integers of every magnitude, IPv6
/// addresses with zero runs anywhere, networks of every prefix length (see [`wide_value`]).
pub const WIDE_FROM: u16 = 0xE000;

/// The characters of synthesized strings: letters and path punctuation, what string literals
/// escape (quote, backslash, line breaks, tab), what a raw string or the nesting pre-scan could
/// trip on (`#`, `r`, parentheses, `!`, `&`, `|`), NUL and DEL, two- three- and four-byte UTF-8,
/// letters whose case mapping changes their length or depends on context (`ß`, `İ`, `Σ`), a
/// combining mark, a byte-order mark and a line separator (neither is whitespace to the
/// language).
const WIDE_CHARS: [char; 32] = [
    'a', 'b', 'A', 'Z', '0', '/', '.', '-', '_', ' ', '"', '\\', '\n', '\r', '\t', '#', 'r', '(',
    ')', '!', '&', '|', '\0', '\u{7f}', 'é', 'ß', 'Σ', '🦀', '\u{feff}', '\u{2028}', '\u{301}',
    'İ',
];

/// splitmix64's finalizer: spreads a small choice over 64 bits, deterministically.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A value of `ty` synthesized from `choice` (see [`WIDE_FROM`]). Never `i64::MIN`, which the
/// language cannot write.
pub fn wide_value(ty: Type, choice: u16) -> Value {
    let h = mix(u64::from(choice));
    match ty {
        Type::String => Value::String(
            (0..h % 7)
                .map(|i| WIDE_CHARS[(h >> (3 + 5 * i)) as usize % WIDE_CHARS.len()])
                .collect(),
        ),
        Type::Int => {
            // An arithmetic shift by 0–63 bits: every magnitude, both signs.
            let i = (mix(h) as i64) >> (h % 64);
            Value::Int(i.max(-i64::MAX))
        }
        Type::IpAddr => Value::IpAddr(wide_ip(h)),
        Type::IpCidr => {
            let ip = wide_ip(h);
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let len = (mix(h ^ 0x5555) % (max + 1)) as u8;
            Value::IpCidr(network(ip, len))
        }
    }
}

fn wide_ip(h: u64) -> IpAddr {
    if h & 1 == 0 {
        IpAddr::V4(std::net::Ipv4Addr::from((h >> 1) as u32))
    } else {
        // Zero groups are common, so `::` comes up at every position and length, as do
        // IPv4-mapped (`::ffff:…`) and IPv4-compatible addresses.
        let mut groups = [0u16; 8];
        for (i, g) in groups.iter_mut().enumerate() {
            *g = match (h >> (1 + 3 * i)) & 7 {
                0..=2 => 0,
                3 => 0xffff,
                _ => mix(h.wrapping_add(i as u64)) as u16,
            };
        }
        IpAddr::V6(std::net::Ipv6Addr::from(groups))
    }
}

/// The network of `len` bits around `ip` (its host bits cleared).
fn network(ip: IpAddr, len: u8) -> IpCidr {
    let first = match ip {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & mask).into())
        }
    };
    IpCidr::new(first, len).expect("host bits cleared")
}

/// A value of `ty` from its pool, or synthesized for a choice from [`WIDE_FROM`] up.
fn literal_value(ty: Type, choice: u16) -> Value {
    if choice >= WIDE_FROM {
        return wide_value(ty, choice);
    }
    let c = choice as usize;
    match ty {
        Type::String => Value::String(pick(STRINGS, c).to_owned()),
        Type::Int => Value::Int(pick(INTS, c)),
        Type::IpAddr => Value::IpAddr(pick(IPS, c).parse().expect("pool address")),
        Type::IpCidr => Value::IpCidr(pick(CIDRS, c).parse().expect("pool CIDR")),
    }
}

/// A whole test case: field types, routes (in the order they are added) and requests.
#[derive(Debug, Clone)]
pub struct Case {
    pub types: [Type; 4],
    pub routes: Vec<RouteDesc>,
    pub requests: Vec<RequestDesc>,
    /// More routes, as text written as is (after `routes`, at priority 1): expressions from
    /// Kong's tests, or what a fuzzer makes of them. Empty from both producers here.
    pub texts: Vec<String>,
    /// Changes to the router once the routes are in (see [`StepDesc`]). Empty from
    /// [`case_strategy`]; [`churn_strategy`] and the fuzz decoder make them.
    pub steps: Vec<StepDesc>,
    /// Routes go to a router with [`tight_limits`], which many generated routes exceed.
    pub tight_limits: bool,
}

/// One change to a router, in terms of *slots*: slot `s` is the id [`route_id`]`(s)`, and the
/// case's routes are first added at their own index. There are twice as many slots as routes,
/// and eight more (see [`Rendered::slots`]), so adds hit free slots and held ones alike. Every
/// number is read modulo what it chooses from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepDesc {
    /// Adds the text of the case's route `route` at `slot`, at `priority` (a duplicate id when
    /// the slot is held).
    Add {
        slot: u16,
        route: u16,
        priority: u8,
    },
    Remove {
        slot: u16,
    },
    /// Syncs to the routes held, each edited by `edits` (see [`Edit`]), plus `extra` entries.
    Sync {
        all_or_nothing: bool,
        edits: Vec<u8>,
        extra: Vec<DesiredDesc>,
    },
    /// Prepares the same kind of sync (apply-valid), removes `remove`'s route, then applies the
    /// plan, which must be refused as stale.
    StaleSync {
        edits: Vec<u8>,
        extra: Vec<DesiredDesc>,
        remove: u16,
    },
    /// Applies a list of changes: `upserts` (new ids, ids of routes held, ids listed twice,
    /// invalid text), then the removal of `removals`' slots (held or not).
    Update {
        all_or_nothing: bool,
        upserts: Vec<DesiredDesc>,
        removals: Vec<u16>,
    },
    /// Executes every request with a context made from another schema.
    ForeignContext,
}

/// An entry of a desired list beyond the routes held: new ids, ids listed twice, invalid text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DesiredDesc {
    pub slot: u16,
    pub priority: u8,
    /// The case's route whose text to give; `None`: the slot's current text, or an empty (so
    /// invalid) one when the slot is free.
    pub route: Option<u16>,
}

#[derive(Debug, Clone)]
pub struct RouteDesc {
    /// Few distinct priorities, so that ties (broken by id) are common.
    pub priority: u8,
    pub expr: ExprDesc,
    /// Whitespace where none is needed: around the route, inside parentheses, after `!`, and
    /// (instead of a choice fixed by the tree's shape) around `&&` and `||`. 0: none of it.
    pub layout: u16,
}

#[derive(Debug, Clone)]
pub enum ExprDesc {
    Pred(PredDesc),
    And(Vec<ExprDesc>),
    Or(Vec<ExprDesc>),
    Not(Box<ExprDesc>),
    /// Parentheses that precedence does not need.
    Group(Box<ExprDesc>),
}

/// One predicate, as choices read modulo the pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredDesc {
    /// 0–3 the exact fields, 4–7 names under the wildcard.
    pub field: u8,
    /// Low two bits: how many transformations (0–3); the next three: which (1 = `lower`).
    pub transforms: u8,
    pub op: u8,
    pub lit: u16,
    /// How the literal is spelled, and the whitespace around the operator.
    pub spelling: u16,
    /// Below [`FLAW_KINDS`]: the predicate is wrong in that way (see [`Flaw`]).
    pub flaw: u8,
}

/// A request: the route it is built to satisfy (route index and `||` branch choices), extra
/// values of the right type, values derived from the literals the routes use, and values of the
/// wrong type or for unknown fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestDesc {
    pub target: Option<(u16, u16)>,
    /// `(field, value)` choices: a pool value of the field's type.
    pub extra: Vec<(u8, u16)>,
    /// `(field, literal, variant)` choices: a value made from a literal of the field's type
    /// that some route of the case uses (see [`derived_value`]), or a pool value when none does.
    pub derived: Vec<(u8, u16, u8)>,
    pub bad: Vec<(u8, u16)>,
}

/// A rendered case.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub schema: Vec<(String, Type)>,
    pub routes: Vec<RenderedRoute>,
    pub requests: Vec<RenderedRequest>,
    /// The changes to apply once the routes are in, with their numbers resolved.
    pub steps: Vec<Step>,
    /// The id of each slot steps refer to; the first ones are the routes' own ids.
    pub slots: Vec<Uuid>,
    /// The limits of the router the routes go to.
    pub limits: Limits,
}

/// A rendered [`StepDesc`]: slots index [`Rendered::slots`], routes [`Rendered::routes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Add {
        slot: usize,
        route: usize,
        priority: u64,
    },
    Remove {
        slot: usize,
    },
    Sync {
        mode: SyncMode,
        edits: Vec<Edit>,
        extra: Vec<Desired>,
    },
    StaleSync {
        edits: Vec<Edit>,
        extra: Vec<Desired>,
        remove: usize,
    },
    Update {
        mode: SyncMode,
        upserts: Vec<Desired>,
        removals: Vec<usize>,
    },
    ForeignContext,
}

/// What a sync does to a route held: the `i`-th route held (in slot order) gets edit
/// `i % edits.len()`; with no edits, every route is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// Listed unchanged.
    Keep,
    /// Left out: removed.
    Drop,
    /// Listed at the next priority: changed.
    Reprioritise,
    /// Listed under the slot this many after the next (a new id, or one listed twice).
    Move(usize),
    /// Listed with the text of this route instead.
    Replace(usize),
}

/// A rendered [`DesiredDesc`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desired {
    pub slot: usize,
    pub priority: u64,
    pub route: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct RenderedRoute {
    /// Unique within a case.
    pub id: Uuid,
    pub priority: u64,
    pub text: String,
    /// The same route as Kong's parser must be given it, or `None` where Kong's library would
    /// abort on it (see the module's invariants).
    pub kong_text: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct RenderedRequest {
    /// Values in the order they are added; each of its field's type.
    pub values: Vec<(String, Value)>,
    /// Values a context must refuse (wrong type, unknown field), added between the others.
    pub bad_values: Vec<(String, Value)>,
}

/// The ways a predicate is made wrong on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    UnknownField,
    TypeMismatch,
    OperatorForOtherType,
    LowerOnNonString,
    /// `lower(f) == "Upper"`: never matches (our validation refuses it; see the Kong differences).
    LowerWithUppercase,
    UnknownTransformation,
    RandomRegex,
    BadLiteral,
    Syntax,
    /// `not` and `in` written together or with other whitespace than one space.
    OddNotIn,
}

const FLAWS: [Flaw; 10] = [
    Flaw::UnknownField,
    Flaw::TypeMismatch,
    Flaw::OperatorForOtherType,
    Flaw::LowerOnNonString,
    Flaw::LowerWithUppercase,
    Flaw::UnknownTransformation,
    Flaw::RandomRegex,
    Flaw::BadLiteral,
    Flaw::Syntax,
    Flaw::OddNotIn,
];
/// `PredDesc::op` from here up writes a set literal after `in` or `not in` (about one predicate
/// in eleven), for fields of every type but IpCidr.
pub const SET_FROM: u8 = 0xE8;
/// `PredDesc::flaw` values below this select a flaw (one predicate in about ten).
pub const FLAW_KINDS: u8 = FLAWS.len() as u8;
/// `PredDesc::flaw` is drawn from `0..FLAW_SPACE`.
pub const FLAW_SPACE: u8 = 10 * FLAW_KINDS;

impl RouteDesc {
    /// The same route spelled another way, by choices read from `tape` (cyclically): another
    /// layout, other spellings of every literal and of the whitespace around every operator,
    /// redundant parentheses added or taken away. Its text parses to the same tree as this
    /// route's, or both fail to parse.
    ///
    /// A route with an unterminated string (a malformed literal on purpose) is returned as it
    /// is: the string takes in the text after it, so every byte of that text is meaning.
    pub fn respelled(&self, tape: &[u8]) -> RouteDesc {
        if unterminated(&self.expr) {
            return self.clone();
        }
        let mut t = Tape { bytes: tape, at: 0 };
        RouteDesc {
            priority: self.priority,
            expr: respell(&self.expr, &mut t),
            layout: u16::from_le_bytes([t.next(), t.next()]),
        }
    }
}

/// Whether `e` renders a string literal without its end (see [`BAD_LITERALS`]).
fn unterminated(e: &ExprDesc) -> bool {
    match e {
        ExprDesc::Pred(p) => {
            FLAWS.get(p.flaw as usize) == Some(&Flaw::BadLiteral)
                && UNTERMINATED.contains(&pick(BAD_LITERALS, p.lit as usize))
        }
        ExprDesc::And(c) | ExprDesc::Or(c) => c.iter().any(unterminated),
        ExprDesc::Not(inner) | ExprDesc::Group(inner) => unterminated(inner),
    }
}

/// Choices read from bytes, cyclically (zeros from an empty tape).
struct Tape<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Tape<'_> {
    fn next(&mut self) -> u8 {
        let b = self.bytes.get(self.at % self.bytes.len().max(1));
        self.at += 1;
        b.copied().unwrap_or(0)
    }
}

fn respell(e: &ExprDesc, t: &mut Tape<'_>) -> ExprDesc {
    let e = match e {
        ExprDesc::Pred(p) => ExprDesc::Pred(PredDesc {
            spelling: u16::from_le_bytes([t.next(), t.next()]),
            ..*p
        }),
        ExprDesc::And(c) => ExprDesc::And(c.iter().map(|c| respell(c, t)).collect()),
        ExprDesc::Or(c) => ExprDesc::Or(c.iter().map(|c| respell(c, t)).collect()),
        ExprDesc::Not(inner) => ExprDesc::Not(Box::new(respell(inner, t))),
        // Parentheses precedence does not need: the renderer adds those it does need.
        ExprDesc::Group(inner) if t.next() < 128 => return respell(inner, t),
        ExprDesc::Group(inner) => ExprDesc::Group(Box::new(respell(inner, t))),
    };
    if t.next() < 40 {
        ExprDesc::Group(Box::new(e))
    } else {
        e
    }
}

/// The id of the route at `index`: spread over the u128 range so that id order (which breaks
/// ties of priority) is unrelated to insertion order.
pub fn route_id(index: usize) -> Uuid {
    Uuid::from_u128(((index as u128) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

fn pick<T: Copy>(pool: &[T], n: usize) -> T {
    pool[n % pool.len()]
}

/// Whitespace between two tokens (mostly one space; also none, several, tabs, line breaks).
fn ws(choice: u16) -> &'static str {
    pick(
        &[
            " ", " ", " ", " ", "", "  ", "\t", "\n", "\r\n", " \n\t ", "\r",
        ],
        choice as usize,
    )
}

/// Whitespace where a token boundary needs some (between a name and a word operator).
fn ws1(choice: u16) -> &'static str {
    match ws(choice) {
        "" => " ",
        w => w,
    }
}

/// What a predicate's rendering tells the request builder: a field and a value that satisfies
/// the predicate, if the generator knows one.
#[derive(Debug, Clone)]
enum Sat {
    Pred(Option<(String, Value)>),
    And(Vec<Sat>),
    Or(Vec<Sat>),
    Not(Box<Sat>),
}

struct Renderer<'a> {
    types: &'a [Type; 4],
    /// Whether Kong's parser can take everything rendered so far.
    kong_ok: bool,
    /// The state of the route's layout (`RouteDesc::layout`); 0 writes no optional whitespace.
    layout: u64,
    /// Every well-formed literal rendered so far, and the text each regex is known to match.
    literals: Vec<Value>,
}

impl Renderer<'_> {
    fn new(types: &[Type; 4], layout: u16) -> Renderer<'_> {
        Renderer {
            types,
            kong_ok: true,
            layout: u64::from(layout),
            literals: Vec::new(),
        }
    }

    /// Optional whitespace at a place where the language allows it (mostly none).
    fn gap(&mut self) -> &'static str {
        if self.layout == 0 {
            return "";
        }
        self.layout = mix(self.layout) | 1;
        pick(
            &["", "", "", "", " ", "\t", "\n", "\r\n", "\r", "  "],
            self.layout as usize,
        )
    }

    /// Whitespace around `&&` and `||`: fixed by the tree's shape without a layout.
    fn around_logic(&mut self, shape: u16) -> &'static str {
        if self.layout == 0 {
            return ws(shape);
        }
        self.layout = mix(self.layout) | 1;
        ws(self.layout as u16)
    }

    /// Renders a whole route into `ours` and `kong`.
    fn route(&mut self, e: &ExprDesc, ours: &mut String, kong: &mut String) -> Sat {
        let lead = self.gap();
        ours.push_str(lead);
        kong.push_str(lead);
        let sat = self.expr(e, ours, kong);
        let trail = self.gap();
        ours.push_str(trail);
        kong.push_str(trail);
        sat
    }

    /// `(` and optional whitespace (`!` before it, and maybe whitespace between, for a `!`).
    fn open(&mut self, not: bool, ours: &mut String, kong: &mut String) {
        let (between, inside) = (if not { self.gap() } else { "" }, self.gap());
        for out in [&mut *ours, &mut *kong] {
            if not {
                out.push('!');
            }
            out.push_str(between);
            out.push('(');
            out.push_str(inside);
        }
    }

    fn close(&mut self, ours: &mut String, kong: &mut String) {
        let inside = self.gap();
        for out in [&mut *ours, &mut *kong] {
            out.push_str(inside);
            out.push(')');
        }
    }
}

impl Renderer<'_> {
    fn field(&self, choice: u8) -> (&'static str, Type) {
        let i = choice as usize % 12;
        match i {
            0..=3 => (EXACT_FIELDS[i], self.types[i]),
            4..=7 => (WILDCARD_NAMES[i - 4], Type::String),
            _ => KONG_FIELD_NAMES[(i - 8) * 2 + (choice as usize / 12) % 2],
        }
    }

    /// Renders `e` into `ours` and `kong` (the same but for `not in` spacing).
    fn expr(&mut self, e: &ExprDesc, ours: &mut String, kong: &mut String) -> Sat {
        match e {
            ExprDesc::Pred(p) => self.predicate(p, ours, kong),
            ExprDesc::And(c) | ExprDesc::Or(c) => {
                let and = matches!(e, ExprDesc::And(_));
                let mut sats = Vec::new();
                for (i, child) in c.iter().enumerate() {
                    if i > 0 {
                        let w = self.around_logic(i as u16 * 3 + c.len() as u16);
                        let op = if and { "&&" } else { "||" };
                        for out in [&mut *ours, &mut *kong] {
                            out.push_str(w);
                            out.push_str(op);
                            out.push_str(w);
                        }
                    }
                    // `||` binds tighter than `&&`: an `&&` chain inside `||` needs
                    // parentheses, an `||` chain inside `&&` does not (and is written without,
                    // to test precedence). Chains of the same operator nest only in groups.
                    let parens = match child {
                        ExprDesc::And(_) => true,
                        ExprDesc::Or(_) => !and,
                        _ => false,
                    };
                    if parens {
                        self.open(false, ours, kong);
                    }
                    sats.push(self.expr(child, ours, kong));
                    if parens {
                        self.close(ours, kong);
                    }
                }
                if and {
                    Sat::And(sats)
                } else {
                    Sat::Or(sats)
                }
            }
            ExprDesc::Not(inner) | ExprDesc::Group(inner) => {
                let not = matches!(e, ExprDesc::Not(_));
                self.open(not, ours, kong);
                let s = self.expr(inner, ours, kong);
                self.close(ours, kong);
                if not {
                    Sat::Not(Box::new(s))
                } else {
                    s
                }
            }
        }
    }

    fn predicate(&mut self, p: &PredDesc, ours: &mut String, kong: &mut String) -> Sat {
        let flaw = (p.flaw < FLAW_KINDS).then(|| FLAWS[p.flaw as usize]);
        let (mut field, mut ty) = self.field(p.field);
        match flaw {
            Some(Flaw::UnknownField) => field = pick(&UNKNOWN_FIELDS, p.lit as usize),
            // These flaws need a field of a given type: Kong's test fields have every type.
            Some(Flaw::OddNotIn) => (field, ty) = ("l3.ip", Type::IpAddr),
            Some(Flaw::LowerOnNonString) if ty == Type::String => {
                (field, ty) = ("tcp.port", Type::Int)
            }
            _ => {}
        }
        // Transformations, innermost last in the bits: `lower` only on String fields unless
        // that is the flaw.
        let n = (p.transforms & 3) as usize;
        let mut transforms: Vec<&str> = (0..n)
            .map(|i| {
                if p.transforms >> (2 + i) & 1 == 1 && ty == Type::String {
                    "lower"
                } else {
                    "any"
                }
            })
            .collect();
        match flaw {
            Some(Flaw::LowerOnNonString) if ty != Type::String => transforms.push("lower"),
            Some(Flaw::LowerWithUppercase) if ty == Type::String => transforms.push("lower"),
            Some(Flaw::UnknownTransformation) => {
                transforms.insert(0, pick(&["upper", "Lower", "trim"], p.lit as usize))
            }
            _ => {}
        }
        let lower = transforms.contains(&"lower");
        let any = transforms.contains(&"any");
        let mut lhs = String::new();
        for (i, t) in transforms.iter().enumerate() {
            lhs.push_str(t);
            // `lower (f)`: whitespace between a name and its parenthesis is allowed too.
            lhs.push_str(if (p.spelling >> 12) as usize % 7 == i {
                " ("
            } else {
                "("
            });
            lhs.push_str(self.gap());
        }
        lhs.push_str(field);
        for _ in &transforms {
            lhs.push_str(self.gap());
            lhs.push(')');
        }

        let ops: &[&str] = match ty {
            Type::String => &["==", "==", "~", "~", "^=", "^=", "=^", "!=", "contains"],
            Type::Int => &["==", "!=", ">", ">=", "<", "<="],
            Type::IpAddr => &["==", "!=", "in", "not in", "in", "not in"],
            Type::IpCidr => &["==", "!="],
        };
        const ALL_OPS: [&str; 12] = [
            "==", "!=", "~", "^=", "=^", ">", ">=", "<", "<=", "in", "not in", "contains",
        ];
        // A set literal after `in` / `not in` (see `SET_FROM`); IpCidr fields have no `in`.
        let set = p.op >= SET_FROM && ty != Type::IpCidr;
        let mut op = if set {
            pick(&["in", "not in"], p.op as usize)
        } else {
            pick(ops, p.op as usize)
        };
        if flaw == Some(Flaw::OperatorForOtherType) {
            op = if set {
                // A set after an operator that takes none.
                pick(&ALL_OPS[..9], p.op as usize)
            } else {
                pick(&ALL_OPS, p.op as usize)
            };
        }
        if flaw == Some(Flaw::OddNotIn) && ty == Type::IpAddr {
            op = "not in";
        }
        // The literal's type follows the operator, or is another on purpose.
        let mut lit_ty = match (ty, op) {
            (_, "in" | "not in") => Type::IpCidr,
            (_, "~" | "^=" | "=^" | "contains") => Type::String,
            (_, ">" | ">=" | "<" | "<=") => Type::Int,
            (t, _) => t,
        };
        if flaw == Some(Flaw::TypeMismatch) {
            let others: Vec<Type> = [Type::String, Type::Int, Type::IpAddr, Type::IpCidr]
                .into_iter()
                .filter(|t| *t != lit_ty)
                .collect();
            lit_ty = pick(&others, p.lit as usize);
        }
        if set {
            let (text, elements) = self.set_literal(ty, lower, flaw, p.lit, p.spelling);
            self.literals.extend(elements.iter().cloned());
            let (w1, w2) = (p.spelling >> 4 & 15, p.spelling >> 8 & 15);
            let (before, after) = (ws1(w1), ws(w2));
            let ours_op = if op == "not in" && flaw == Some(Flaw::OddNotIn) {
                pick(
                    &["not  in", "not\tin", "not\n in", "not\r\nin"],
                    p.lit as usize,
                )
            } else {
                op
            };
            // Kong's parser refuses every set; it is given the one-space `not in`, so that
            // it refuses rather than aborts.
            let kong_op = if op == "not in" { "not in" } else { op };
            if flaw == Some(Flaw::Syntax) {
                // A set where a group or a predicate should start, or one left open.
                let broken = match p.lit % 3 {
                    0 => format!("{text}{before}{kong_op}{after}{lhs}"),
                    1 => format!(
                        "{lhs}{before}{kong_op}{after}{}",
                        text.trim_end_matches(']')
                    ),
                    _ => format!("!{lhs}{before}{kong_op}{after}{text}"),
                };
                ours.push_str(&broken);
                kong.push_str(&broken);
            } else {
                let _ = write!(ours, "{lhs}{before}{ours_op}{after}{text}");
                let _ = write!(kong, "{lhs}{before}{kong_op}{after}{text}");
            }
            if flaw.is_some_and(|f| f != Flaw::OddNotIn) || elements.is_empty() {
                return Sat::Pred(None);
            }
            return Sat::Pred(
                satisfying_set(op, lower, &elements, p.lit).map(|v| (field.to_owned(), v)),
            );
        }
        let (lit_text, lit_value, regex_sample) =
            self.literal(lit_ty, op == "~", lower, flaw, p.lit, p.spelling);
        self.literals.extend(lit_value.iter().cloned());
        self.literals
            .extend(regex_sample.map(|s| Value::String(s.to_owned())));

        // Whitespace: around the operator (a word operator needs some after a name), and
        // between `not` and `in`.
        let (w1, w2) = (p.spelling >> 4 & 15, p.spelling >> 8 & 15);
        let word_op = op.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        let before = if word_op { ws1(w1) } else { ws(w1) };
        let after = ws(w2);
        let (ours_op, kong_op) = if op == "not in" && flaw == Some(Flaw::OddNotIn) {
            let odd = pick(
                &["not  in", "not\tin", "not\n in", "not\r\nin", "notin"],
                p.lit as usize,
            );
            // Kong's parser aborts on every spelling but one space; where ours also means
            // `not in`, Kong is given that spelling.
            (odd, (odd != "notin").then_some("not in"))
        } else {
            (op, Some(op))
        };
        if kong_op.is_none() {
            self.kong_ok = false;
        }
        let syntax = flaw == Some(Flaw::Syntax);
        let broken = |s: &mut String, op: &str| {
            let _ = match p.lit % 6 {
                0 => write!(s, "!{lhs}{before}{op}{after}{lit_text}"),
                1 => write!(s, "!!({lhs}{before}{op}{after}{lit_text})"),
                2 => write!(s, "{lhs}{before}{op}{after}"),
                3 => write!(s, "{lhs} = = {lit_text}"),
                4 => write!(s, "({lhs}{before}{op}{after}{lit_text}"),
                _ => write!(s, "{lhs}{before}{op}{after}{lit_text} &&"),
            };
        };
        if syntax {
            broken(ours, ours_op);
            broken(kong, kong_op.unwrap_or("not in"));
        } else {
            let _ = write!(ours, "{lhs}{before}{ours_op}{after}{lit_text}");
            let _ = write!(
                kong,
                "{lhs}{before}{}{after}{lit_text}",
                kong_op.unwrap_or("not in")
            );
        }
        if flaw.is_some_and(|f| f != Flaw::OddNotIn) {
            return Sat::Pred(None);
        }
        Sat::Pred(
            satisfying(op, lower, any, &lit_value, regex_sample).map(|v| (field.to_owned(), v)),
        )
    }

    /// A literal of `ty`: its text and value (and, for a regex from the pool, a text it
    /// matches).
    fn literal(
        &self,
        ty: Type,
        regex: bool,
        lower: bool,
        flaw: Option<Flaw>,
        choice: u16,
        spelling: u16,
    ) -> (String, Option<Value>, Option<&'static str>) {
        let c = choice as usize;
        if flaw == Some(Flaw::BadLiteral) {
            return (pick(BAD_LITERALS, c).to_owned(), None, None);
        }
        match ty {
            Type::String => {
                let (text, sample) = if regex && flaw == Some(Flaw::RandomRegex) {
                    // From the literal choice only: the spelling never changes what a text
                    // means (see `RouteDesc::respelled`).
                    let h = mix(u64::from(choice));
                    let mut r = String::new();
                    for k in 0..1 + c % 4 {
                        r.push_str(pick(REGEX_PIECES, (h >> (6 * k)) as usize));
                    }
                    (r, None)
                } else if regex {
                    let (r, sample) = pick(REGEXES, c);
                    (r.to_owned(), Some(sample))
                } else {
                    let Value::String(s) = literal_value(Type::String, choice) else {
                        unreachable!("a String choice")
                    };
                    let s = s.as_str();
                    // A lowered field compares with lowercase literals, unless the flaw is
                    // an uppercase one.
                    let s = if flaw == Some(Flaw::LowerWithUppercase) {
                        let up = s.to_uppercase();
                        if up == s.to_lowercase() {
                            "Q".to_owned()
                        } else {
                            up
                        }
                    } else if lower {
                        s.to_lowercase()
                    } else {
                        s.to_owned()
                    };
                    (s, None)
                };
                let value = Some(Value::String(text.clone()));
                (string_literal(&text, spelling), value, sample)
            }
            ty => {
                let v = literal_value(ty, choice);
                let text = match &v {
                    Value::Int(i) => int_literal(*i, spelling),
                    Value::IpAddr(ip) => ip_literal(*ip, spelling),
                    Value::IpCidr(cidr) => cidr_literal(*cidr, spelling),
                    Value::String(_) => unreachable!("handled above"),
                };
                (text, Some(v), None)
            }
        }
    }
}

impl Renderer<'_> {
    /// A set literal for a field of type `ty`: its text and its elements (none when it is
    /// malformed on purpose). `choice` fixes the elements (one to four, the fourth a duplicate
    /// of the first), `spelling` their spellings, the whitespace around commas and a trailing
    /// comma. An IpAddr field's set mixes addresses and networks. Flaws: `TypeMismatch` makes
    /// every element of another type, `LowerWithUppercase` uppercases them, `BadLiteral` writes
    /// an empty or mixed set, a stray or missing comma, or a malformed element.
    fn set_literal(
        &mut self,
        ty: Type,
        lower: bool,
        flaw: Option<Flaw>,
        choice: u16,
        spelling: u16,
    ) -> (String, Vec<Value>) {
        let n = 1 + (choice >> 3) as usize % 4;
        let mismatch = flaw == Some(Flaw::TypeMismatch);
        let other = pick(
            &[Type::String, Type::Int, Type::IpAddr]
                .into_iter()
                .filter(|t| *t != ty && !(ty == Type::IpAddr && *t == Type::IpCidr))
                .collect::<Vec<_>>(),
            choice as usize,
        );
        let mut texts = Vec::new();
        let mut elements = Vec::new();
        for k in 0..n {
            let c = if k == 3 {
                choice
            } else {
                choice.wrapping_add(5 * k as u16)
            };
            let elem_ty = match ty {
                _ if mismatch => other,
                Type::IpAddr if (c / 3) % 2 == 0 => Type::IpCidr,
                t => t,
            };
            let upper =
                (flaw == Some(Flaw::LowerWithUppercase)).then_some(Flaw::LowerWithUppercase);
            let (text, value, _) = self.literal(
                elem_ty,
                false,
                lower,
                upper,
                c,
                spelling.rotate_left(5 * k as u32),
            );
            texts.push(text);
            elements.extend(value);
        }
        let comma = |k: usize| ws(spelling.rotate_left(3 * k as u32) >> 2);
        if flaw == Some(Flaw::BadLiteral) {
            let odd = match elements[0] {
                Value::String(_) => "1",
                _ => "\"x\"",
            };
            let text = match (choice >> 6) % 6 {
                0 => "[]".to_owned(),
                1 => format!("[{}]", comma(0)),
                2 => format!("[{},{}{odd}]", texts[0], comma(1)),
                3 => format!("[{},,{}]", texts[0], texts[texts.len() - 1]),
                4 => format!("[{} {}]", texts[0], texts[texts.len() - 1]),
                _ => format!(
                    "[{},{}{}]",
                    texts[0],
                    comma(1),
                    pick(BAD_LITERALS, choice as usize)
                ),
            };
            return (text, Vec::new());
        }
        let mut text = String::from("[");
        text.push_str(self.gap());
        for (k, t) in texts.iter().enumerate() {
            if k > 0 {
                text.push_str(self.gap());
                text.push(',');
                text.push_str(comma(k));
            }
            text.push_str(t);
        }
        if spelling & 0x8000 != 0 {
            text.push(',');
        }
        text.push_str(self.gap());
        text.push(']');
        (text, elements)
    }
}

/// A quoted string with escapes (`\n` or a raw line break, either way), or a raw string.
fn string_literal(s: &str, spelling: u16) -> String {
    if spelling.is_multiple_of(4) && !s.contains("\"#") {
        return format!("r#\"{s}\"#");
    }
    let raw_controls = spelling.is_multiple_of(3);
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' if !raw_controls => out.push_str("\\n"),
            '\r' if !raw_controls => out.push_str("\\r"),
            '\t' if !raw_controls => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Decimal, hex (either case of digits), octal, or decimal with a leading zero where the
/// language reads that as decimal (`08`, `09…`).
fn int_literal(i: i64, spelling: u16) -> String {
    let sign = if i < 0 { "-" } else { "" };
    let m = i.unsigned_abs();
    match spelling % 5 {
        1 => format!("{sign}0x{m:x}"),
        2 => format!("{sign}0x{m:X}"),
        3 if m > 0 => format!("{sign}0{m:o}"),
        4 if m.to_string().starts_with(['8', '9']) => format!("{sign}0{m}"),
        _ => format!("{sign}{m}"),
    }
}

/// IPv4 as a dotted quad; IPv6 compressed (as the library prints it: never with a dotted IPv4
/// tail, which the language refuses), in full with or without leading zeros, in either case.
fn ip_literal(ip: IpAddr, spelling: u16) -> String {
    let full = |a: std::net::Ipv6Addr, padded: bool| {
        a.segments()
            .iter()
            .map(|s| {
                if padded {
                    format!("{s:04x}")
                } else {
                    format!("{s:x}")
                }
            })
            .collect::<Vec<_>>()
            .join(":")
    };
    let compressed = Value::IpAddr(ip).to_string();
    match (ip, spelling % 5) {
        (IpAddr::V6(a), 1) => full(a, true),
        (IpAddr::V6(_), 2) => compressed.to_uppercase(),
        (IpAddr::V6(a), 3) => full(a, false),
        (IpAddr::V6(a), 4) => full(a, true).to_uppercase(),
        _ => compressed,
    }
}

/// A CIDR; its prefix length sometimes with one leading zero (`/08`).
fn cidr_literal(c: IpCidr, spelling: u16) -> String {
    let addr = ip_literal(c.first_address(), spelling);
    let len = c.network_length();
    if spelling % 4 == 1 && len < 10 {
        format!("{addr}/0{len}")
    } else {
        format!("{addr}/{len}")
    }
}

/// A value that makes the predicate true (for a field holding only that value).
fn satisfying(
    op: &str,
    lower: bool,
    _any: bool,
    lit: &Option<Value>,
    regex_sample: Option<&str>,
) -> Option<Value> {
    let lit = lit.as_ref()?;
    Some(match (op, lit) {
        ("~", _) => Value::String(regex_sample?.to_owned()),
        ("==", Value::String(s)) if lower => {
            // A value whose lowercase is the literal (uppercasing does not always give one:
            // "ß" uppercases to "SS").
            let up = s.to_uppercase();
            Value::String(if up.to_lowercase() == *s {
                up
            } else {
                s.clone()
            })
        }
        ("^=", Value::String(s)) => Value::String(format!("{s}/12")),
        ("=^", Value::String(s)) => Value::String(format!("w.{s}")),
        ("contains", Value::String(s)) => Value::String(format!("x{s}y")),
        ("!=", Value::String(s)) => Value::String(format!("{s}z")),
        ("!=", Value::Int(i)) => Value::Int(i.wrapping_add(1)),
        (">", Value::Int(i)) => Value::Int(i.checked_add(1)?),
        ("<", Value::Int(i)) => Value::Int(i.checked_sub(1)?),
        ("in", Value::IpCidr(c)) => Value::IpAddr(c.first_address()),
        ("not in", Value::IpCidr(c)) => {
            let outside = IPS
                .iter()
                .map(|a| a.parse::<IpAddr>().expect("pool address"))
                .find(|a| !contains(c, a))?;
            Value::IpAddr(outside)
        }
        ("!=", Value::IpAddr(IpAddr::V4(_))) => Value::IpAddr("::1".parse().ok()?),
        ("!=", Value::IpAddr(IpAddr::V6(_))) => Value::IpAddr("10.0.0.1".parse().ok()?),
        ("!=", Value::IpCidr(c)) if c.network_length() > 0 => {
            Value::IpCidr(IpCidr::new(c.first_address(), c.network_length() - 1).ok()?)
        }
        ("!=", Value::IpCidr(_)) => Value::IpCidr("10.0.0.0/8".parse().ok()?),
        (_, v) => v.clone(),
    })
}

/// A value that makes `in` / `not in` a set of `elements` true (for a field holding only it).
fn satisfying_set(op: &str, lower: bool, elements: &[Value], choice: u16) -> Option<Value> {
    let member = |v: &Value| {
        elements.iter().any(|e| match (e, v) {
            (Value::IpCidr(c), Value::IpAddr(a)) => contains(c, a),
            (e, v) => e == v,
        })
    };
    if op == "in" {
        return Some(match &elements[(choice >> 5) as usize % elements.len()] {
            Value::String(s) if lower => {
                let up = s.to_uppercase();
                Value::String(if up.to_lowercase() == *s {
                    up
                } else {
                    s.clone()
                })
            }
            Value::IpCidr(c) => Value::IpAddr(c.first_address()),
            v => v.clone(),
        });
    }
    let candidates: Vec<Value> = match &elements[0] {
        Value::String(s) => vec![Value::String(format!("{s}z")), Value::String("zz".into())],
        Value::Int(_) => INTS.iter().map(|i| Value::Int(*i)).collect(),
        _ => IPS
            .iter()
            .map(|a| Value::IpAddr(a.parse().expect("pool address")))
            .collect(),
    };
    // A lowered field's value is compared lowercased: the candidates are lowercase already.
    candidates.into_iter().find(|v| !member(v))
}

fn contains(c: &IpCidr, a: &IpAddr) -> bool {
    match (c, a) {
        (IpCidr::V4(c), IpAddr::V4(a)) => c.contains(a),
        (IpCidr::V6(c), IpAddr::V6(a)) => c.contains(a),
        _ => false,
    }
}

/// Values that make the positive predicates of a route true: every part of an `&&`, one side
/// of each `||` (chosen by `branch`), nothing under `!`. Bit 15 of `branch` adds decoys: the
/// first predicate of every other `||` side and of every `!` group is made true too, so that
/// branches which fail part-way are common.
fn satisfy(s: &Sat, branch: u16, out: &mut Vec<(String, Value)>) {
    let decoys = branch & 0x8000 != 0;
    match s {
        Sat::And(c) => c.iter().for_each(|c| satisfy(c, branch, out)),
        Sat::Or(c) => {
            let chosen = (branch & 0x7fff) as usize % c.len();
            let rest = ((branch & 0x7fff) / c.len() as u16) | (branch & 0x8000);
            for (i, side) in c.iter().enumerate() {
                if i == chosen {
                    satisfy(side, rest, out);
                } else if decoys {
                    satisfy_first(side, out);
                }
            }
        }
        Sat::Not(inner) if decoys => satisfy_first(inner, out),
        Sat::Not(_) | Sat::Pred(None) => {}
        Sat::Pred(Some(v)) => out.push(v.clone()),
    }
}

/// Makes the first predicate of `s` true, if the generator knows how.
fn satisfy_first(s: &Sat, out: &mut Vec<(String, Value)>) {
    match s {
        Sat::And(c) | Sat::Or(c) => satisfy_first(&c[0], out),
        Sat::Pred(Some(v)) => out.push(v.clone()),
        Sat::Not(_) | Sat::Pred(None) => {}
    }
}

impl Case {
    /// The schema, the routes as text and the requests as values.
    pub fn render(&self) -> Rendered {
        let mut schema: Vec<(String, Type)> = EXACT_FIELDS
            .iter()
            .zip(self.types)
            .map(|(n, t)| ((*n).to_owned(), t))
            .collect();
        schema.push((WILDCARD.to_owned(), Type::String));
        schema.extend(KONG_TEST_FIELDS.iter().map(|(n, t)| ((*n).to_owned(), *t)));
        let mut routes = Vec::new();
        let mut sats = Vec::new();
        let mut literals = Vec::new();
        for (i, r) in self.routes.iter().enumerate() {
            let mut r_ = Renderer::new(&self.types, r.layout);
            let (mut text, mut kong) = (String::new(), String::new());
            sats.push(r_.route(&r.expr, &mut text, &mut kong));
            literals.append(&mut r_.literals);
            // A field named `not` before `in` with other whitespace than one space reads as
            // the `not in` Kong's parser aborts on: `kong_can_take` sees it.
            let kong_ok = r_.kong_ok && kong_can_take(&kong);
            routes.push(RenderedRoute {
                id: route_id(i),
                priority: u64::from(r.priority),
                text,
                kong_text: kong_ok.then_some(kong),
            });
        }
        for text in &self.texts {
            routes.push(RenderedRoute {
                id: route_id(routes.len()),
                priority: 1,
                text: text.clone(),
                kong_text: kong_can_take(text).then(|| text.clone()),
            });
        }
        let r_ = Renderer::new(&self.types, 0);
        let requests = self
            .requests
            .iter()
            .map(|q| {
                let mut values = Vec::new();
                if let (Some((route, branch)), false) = (q.target, sats.is_empty()) {
                    satisfy(&sats[route as usize % sats.len()], branch, &mut values);
                }
                for (k, (f, v)) in q.extra.iter().enumerate() {
                    let (name, ty) = r_.field(*f);
                    let value = pool_value(ty, *v);
                    // Extra values go in front or behind, so multi-valued fields see both
                    // orders.
                    let at = if k % 2 == 0 { values.len() } else { 0 };
                    values.insert(at, (name.to_owned(), value));
                }
                for (k, (f, l, variant)) in q.derived.iter().enumerate() {
                    let (name, ty) = r_.field(*f);
                    let value = derived_value(&literals, ty, *l, *variant);
                    let at = if k % 2 == 1 { values.len() } else { 0 };
                    values.insert(at, (name.to_owned(), value));
                }
                let bad_values = q
                    .bad
                    .iter()
                    .map(|(f, v)| {
                        if f % 3 == 0 {
                            let name = pick(&UNKNOWN_FIELDS, *v as usize);
                            (name.to_owned(), pool_value(Type::String, *v))
                        } else {
                            let (name, ty) = r_.field(*f);
                            let other = [Type::String, Type::Int, Type::IpAddr, Type::IpCidr]
                                .into_iter()
                                .filter(|t| *t != ty)
                                .nth(*v as usize % 3)
                                .expect("three other types");
                            (name.to_owned(), pool_value(other, *v))
                        }
                    })
                    .collect();
                RenderedRequest { values, bad_values }
            })
            .collect();
        let slots: Vec<Uuid> = (0..2 * routes.len() + 8).map(route_id).collect();
        let steps = self
            .steps
            .iter()
            .filter_map(|s| render_step(s, slots.len(), routes.len()))
            .collect();
        Rendered {
            schema,
            routes,
            requests,
            steps,
            slots,
            limits: if self.tight_limits {
                tight_limits()
            } else {
                Limits::default()
            },
        }
    }
}

/// Limits that many generated routes exceed: three levels of nesting (a transformation counts),
/// six predicates, two regexes.
pub fn tight_limits() -> Limits {
    Limits {
        max_depth: 3,
        max_predicates: 6,
        max_regexes: 2,
        ..Limits::default()
    }
}

/// A request value for a field of type `ty` made from one of `literals` of that type (an
/// address also from a network's first address), as it is, or changed by `variant` so that
/// it satisfies or just misses other operators: with a suffix (`^=`), a prefix (`=^`), both
/// (`contains`), uppercased (`lower`), past the 256 bytes where regexes run on another engine,
/// off by one. Without a literal of that type, a pool value.
pub fn derived_value(literals: &[Value], ty: Type, choice: u16, variant: u8) -> Value {
    let fits: Vec<&Value> = literals
        .iter()
        .filter(|v| v.ty() == ty || (ty == Type::IpAddr && v.ty() == Type::IpCidr))
        .collect();
    if fits.is_empty() {
        return pool_value(ty, choice);
    }
    match pick(&fits, choice as usize) {
        Value::String(t) => Value::String(match variant % 8 {
            0 | 1 => t.clone(),
            2 => format!("{t}/12"),
            3 => format!("w.{t}"),
            4 => t.to_uppercase(),
            5 => format!("x{t}y"),
            6 => format!("{}{t}", "/a".repeat(150)),
            _ => t.repeat(300 / t.len().max(1) + 1),
        }),
        Value::Int(i) => Value::Int(match variant % 4 {
            0 | 1 => *i,
            2 => i.wrapping_add(1),
            _ => i.wrapping_sub(1),
        }),
        Value::IpCidr(c) if ty == Type::IpAddr => Value::IpAddr(c.first_address()),
        v => v.clone(),
    }
}

fn render_step(s: &StepDesc, slots: usize, routes: usize) -> Option<Step> {
    let slot = |n: u16| n as usize % slots;
    let route = |n: u16| (routes > 0).then(|| n as usize % routes);
    let edits = |e: &[u8]| {
        e.iter()
            .map(|e| match e % 8 {
                0..=3 => Edit::Keep,
                4 => Edit::Drop,
                5 => Edit::Reprioritise,
                6 => Edit::Move(usize::from(e / 8)),
                _ => route(u16::from(e / 8)).map_or(Edit::Keep, Edit::Replace),
            })
            .collect()
    };
    let extra = |x: &[DesiredDesc]| {
        x.iter()
            .map(|d| Desired {
                slot: slot(d.slot),
                priority: u64::from(d.priority),
                route: d.route.and_then(route),
            })
            .collect()
    };
    Some(match s {
        StepDesc::Add {
            slot: s,
            route: r,
            priority,
        } => Step::Add {
            slot: slot(*s),
            route: route(*r)?,
            priority: u64::from(*priority),
        },
        StepDesc::Remove { slot: s } => Step::Remove { slot: slot(*s) },
        StepDesc::Sync {
            all_or_nothing,
            edits: e,
            extra: x,
        } => Step::Sync {
            mode: if *all_or_nothing {
                SyncMode::AllOrNothing
            } else {
                SyncMode::ApplyValid
            },
            edits: edits(e),
            extra: extra(x),
        },
        StepDesc::StaleSync {
            edits: e,
            extra: x,
            remove,
        } => Step::StaleSync {
            edits: edits(e),
            extra: extra(x),
            remove: slot(*remove),
        },
        StepDesc::Update {
            all_or_nothing,
            upserts,
            removals,
        } => Step::Update {
            mode: if *all_or_nothing {
                SyncMode::AllOrNothing
            } else {
                SyncMode::ApplyValid
            },
            upserts: extra(upserts),
            removals: removals.iter().map(|s| slot(*s)).collect(),
        },
        StepDesc::ForeignContext => Step::ForeignContext,
    })
}

/// Whether Kong's library 1.7.1 can be given `text` without aborting the process: its parser
/// panics on `not` and `in` with other whitespace than one space between them (found anywhere
/// in the text, strings included, to be safe), and it recurses once per nesting level and
/// per `&&` or `||`, so long or deep text could overflow its stack.
pub fn kong_can_take(text: &str) -> bool {
    let b = text.as_bytes();
    let odd_not_in = b.windows(3).enumerate().any(|(i, w)| {
        if w != b"not" {
            return false;
        }
        let gap = b[i + 3..]
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
            .count();
        b[i + 3 + gap..].starts_with(b"in") && &b[i + 3..i + 3 + gap] != b" "
    });
    let chains = text.matches("&&").count() + text.matches("||").count();
    !odd_not_in
        && text.len() <= 4096
        && b.iter().filter(|c| **c == b'(').count() <= 64
        && chains <= 256
}

/// A value of `ty` from the pools (strings also derived: uppercased, with a suffix).
pub fn pool_value(ty: Type, choice: u16) -> Value {
    if choice >= WIDE_FROM {
        return wide_value(ty, choice);
    }
    let c = choice as usize;
    match ty {
        Type::String => {
            let s = pick(STRINGS, c);
            Value::String(match c / STRINGS.len() % 4 {
                1 => s.to_uppercase(),
                2 => format!("{s}/12"),
                3 => pick(REGEXES, c).1.to_owned(),
                _ => s.to_owned(),
            })
        }
        Type::Int => Value::Int(pick(INTS, c)),
        Type::IpAddr => Value::IpAddr(pick(IPS, c).parse().expect("pool address")),
        Type::IpCidr => Value::IpCidr(pick(CIDRS, c).parse().expect("pool CIDR")),
    }
}

// ---- Producers: proptest and arbitrary build the same descriptions. ----

const TYPES: [Type; 5] = [
    Type::String,
    Type::String,
    Type::Int,
    Type::IpAddr,
    Type::IpCidr,
];

fn pred_strategy() -> impl Strategy<Value = PredDesc> + Clone {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        0..FLAW_SPACE,
    )
        .prop_map(|(field, transforms, op, lit, spelling, flaw)| PredDesc {
            field,
            transforms,
            op,
            lit,
            spelling,
            flaw,
        })
}

/// A predicate an index can key a route on, whatever the field's type: an operator read as
/// `==` for every type, or as `=^`, `~`, `^=` for Strings (`^=` reads as `in` for addresses
/// and as `<` for integers), and no flaw.
fn keyed_pred_strategy() -> impl Strategy<Value = PredDesc> + Clone {
    (
        pred_strategy(),
        prop::sample::select(&[0u8, 6, 12, 22][..]),
        FLAW_KINDS..FLAW_SPACE,
    )
        .prop_map(|(p, op, flaw)| PredDesc { op, flaw, ..p })
}

/// Gateway-shaped routes: a conjunction that starts with a predicate an index can key it on,
/// then up to two more predicates, sometimes an `||` group.
pub fn conjunction_strategy() -> impl Strategy<Value = ExprDesc> {
    let leaf = pred_strategy().prop_map(ExprDesc::Pred);
    (
        keyed_pred_strategy().prop_map(ExprDesc::Pred),
        prop::collection::vec(leaf.clone(), 0..3),
        prop::option::weighted(0.3, prop::collection::vec(leaf, 2..4)),
    )
        .prop_map(|(first, rest, group)| {
            let mut parts = vec![first];
            parts.extend(rest);
            parts.extend(group.map(ExprDesc::Or));
            if parts.len() == 1 {
                parts.pop().expect("one part")
            } else {
                ExprDesc::And(parts)
            }
        })
}

/// Arbitrary trees of `&&`, `||`, `!` and groups.
pub fn tree_strategy() -> impl Strategy<Value = ExprDesc> {
    let leaf = pred_strategy().prop_map(ExprDesc::Pred);
    leaf.prop_recursive(MAX_DEPTH, 16, 3, |inner| {
        prop_oneof![
            3 => prop::collection::vec(inner.clone(), 2..4).prop_map(ExprDesc::And),
            3 => prop::collection::vec(inner.clone(), 2..4).prop_map(ExprDesc::Or),
            1 => inner.clone().prop_map(|e| ExprDesc::Not(Box::new(e))),
            1 => inner.prop_map(|e| ExprDesc::Group(Box::new(e))),
        ]
    })
}

/// Expressions: mostly gateway-shaped conjunctions, and arbitrary trees.
pub fn expr_strategy() -> impl Strategy<Value = ExprDesc> {
    prop_oneof![2 => conjunction_strategy(), 1 => tree_strategy()]
}

/// A route: a priority among few (so that ties are common), an expression, and half the time
/// a layout. Arbitrary trees, often true for most requests (a `!` around a field the request
/// lacks), sit at the lowest priority, tied with a quarter of the gateway-shaped routes, which
/// then decide most requests.
pub fn route_strategy() -> impl Strategy<Value = RouteDesc> {
    (
        prop_oneof![
            2 => (0u8..4, conjunction_strategy()),
            1 => (Just(0u8), tree_strategy()),
        ],
        prop_oneof![Just(0u16), any::<u16>()],
    )
        .prop_map(|((priority, expr), layout)| RouteDesc {
            priority,
            expr,
            layout,
        })
}

pub fn request_strategy() -> impl Strategy<Value = RequestDesc> {
    (
        prop::option::weighted(0.75, (any::<u16>(), any::<u16>())),
        prop::collection::vec((any::<u8>(), any::<u16>()), 0..4),
        prop::collection::vec((any::<u8>(), any::<u16>(), any::<u8>()), 0..4),
        prop::collection::vec((any::<u8>(), any::<u16>()), 0..2),
    )
        .prop_map(|(target, extra, derived, mut bad)| {
            // Most requests carry no bad value.
            if bad.first().is_some_and(|(f, _)| f % 4 != 0) {
                bad.clear();
            }
            RequestDesc {
                target,
                extra,
                derived,
                bad,
            }
        })
}

fn desired_list_strategy() -> impl Strategy<Value = (Vec<u8>, Vec<DesiredDesc>)> {
    let desired = (
        any::<u16>(),
        0u8..4,
        prop::option::weighted(0.7, any::<u16>()),
    )
        .prop_map(|(slot, priority, route)| DesiredDesc {
            slot,
            priority,
            route,
        });
    (
        prop::collection::vec(any::<u8>(), 0..8),
        prop::collection::vec(desired, 0..4),
    )
}

/// A sync in either mode to the routes held, edited, plus a few other entries.
pub fn sync_strategy() -> impl Strategy<Value = StepDesc> {
    (any::<bool>(), desired_list_strategy()).prop_map(|(all_or_nothing, (edits, extra))| {
        StepDesc::Sync {
            all_or_nothing,
            edits,
            extra,
        }
    })
}

/// A list of changes in either mode: a few upserts (ids held or not, some repeated, some with
/// invalid text) and removals (held or not).
pub fn update_strategy() -> impl Strategy<Value = StepDesc> {
    (
        any::<bool>(),
        desired_list_strategy(),
        prop::collection::vec(any::<u16>(), 0..4),
    )
        .prop_map(
            |(all_or_nothing, (_, upserts), removals)| StepDesc::Update {
                all_or_nothing,
                upserts,
                removals,
            },
        )
}

/// Changes to a router: adds (of the case's routes, at any slot), removes, syncs in both
/// modes, lists of changes, stale syncs, foreign contexts.
pub fn step_strategy() -> impl Strategy<Value = StepDesc> {
    prop_oneof![
        4 => (any::<u16>(), any::<u16>(), 0u8..4)
            .prop_map(|(slot, route, priority)| StepDesc::Add { slot, route, priority }),
        3 => any::<u16>().prop_map(|slot| StepDesc::Remove { slot }),
        2 => sync_strategy(),
        2 => update_strategy(),
        1 => (desired_list_strategy(), any::<u16>())
            .prop_map(|((edits, extra), remove)| StepDesc::StaleSync { edits, extra, remove }),
        1 => Just(StepDesc::ForeignContext),
    ]
}

/// Cases whose routes then go through `steps` changes; one in eight under [`tight_limits`].
pub fn churn_strategy(
    routes: std::ops::Range<usize>,
    requests: std::ops::Range<usize>,
    steps: std::ops::Range<usize>,
) -> impl Strategy<Value = Case> {
    (
        case_strategy(routes, requests),
        prop::collection::vec(step_strategy(), steps),
        prop::bool::weighted(0.125),
    )
        .prop_map(|(case, steps, tight_limits)| Case {
            steps,
            tight_limits,
            ..case
        })
}

/// Cases with `routes` routes and `requests` requests.
pub fn case_strategy(
    routes: std::ops::Range<usize>,
    requests: std::ops::Range<usize>,
) -> impl Strategy<Value = Case> {
    (
        prop::array::uniform4(prop::sample::select(&TYPES[..])),
        prop::collection::vec(route_strategy(), routes),
        prop::collection::vec(request_strategy(), requests),
    )
        .prop_map(|(types, routes, requests)| Case {
            types,
            routes,
            requests,
            texts: Vec::new(),
            steps: Vec::new(),
            tight_limits: false,
        })
}

fn arbitrary_pred(u: &mut Unstructured<'_>) -> arbitrary::Result<PredDesc> {
    Ok(PredDesc {
        field: u.arbitrary()?,
        transforms: u.arbitrary()?,
        op: u.arbitrary()?,
        lit: u.arbitrary()?,
        spelling: u.arbitrary()?,
        flaw: u.int_in_range(0..=FLAW_SPACE - 1)?,
    })
}

fn arbitrary_expr(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<ExprDesc> {
    let kind = if depth >= MAX_DEPTH {
        0
    } else {
        u.int_in_range(0u8..=9)?
    };
    let children = |u: &mut Unstructured<'_>| -> arbitrary::Result<Vec<ExprDesc>> {
        (0..u.int_in_range(2u8..=3)?)
            .map(|_| arbitrary_expr(u, depth + 1))
            .collect()
    };
    Ok(match kind {
        6 | 7 => ExprDesc::And(children(u)?),
        8 => ExprDesc::Or(children(u)?),
        9 if u.arbitrary()? => ExprDesc::Not(Box::new(arbitrary_expr(u, depth + 1)?)),
        9 => ExprDesc::Group(Box::new(arbitrary_expr(u, depth + 1)?)),
        _ => ExprDesc::Pred(arbitrary_pred(u)?),
    })
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Case> {
        let mut types = [Type::String; 4];
        for t in &mut types {
            *t = *u.choose(&TYPES)?;
        }
        let mut routes = Vec::new();
        for _ in 0..u.int_in_range(1u8..=24)? {
            routes.push(RouteDesc {
                priority: u.int_in_range(0u8..=3)?,
                expr: arbitrary_expr(u, 0)?,
                layout: if u.arbitrary()? { u.arbitrary()? } else { 0 },
            });
        }
        let mut requests = Vec::new();
        for _ in 0..u.int_in_range(1u8..=12)? {
            let target = if u.ratio(3u8, 4)? {
                Some((u.arbitrary()?, u.arbitrary()?))
            } else {
                None
            };
            let extra = (0..u.int_in_range(0u8..=4)?)
                .map(|_| Ok((u.arbitrary()?, u.arbitrary()?)))
                .collect::<arbitrary::Result<_>>()?;
            let derived = (0..u.int_in_range(0u8..=4)?)
                .map(|_| Ok((u.arbitrary()?, u.arbitrary()?, u.arbitrary()?)))
                .collect::<arbitrary::Result<_>>()?;
            let bad = if u.ratio(1u8, 8)? {
                vec![(u.arbitrary()?, u.arbitrary()?)]
            } else {
                Vec::new()
            };
            requests.push(RequestDesc {
                target,
                extra,
                derived,
                bad,
            });
        }
        // Last: a target that reads only the table (kong_diff) ignores them. (`int_in_range`
        // gives its start when the bytes run out: default limits, no steps.)
        let tight_limits = u.int_in_range(0u8..=7)? == 7;
        let mut steps = Vec::new();
        for _ in 0..u.int_in_range(0u8..=48)? {
            steps.push(arbitrary_step(u)?);
        }
        Ok(Case {
            types,
            routes,
            requests,
            texts: Vec::new(),
            steps,
            tight_limits,
        })
    }
}

fn arbitrary_desired_list(
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<(Vec<u8>, Vec<DesiredDesc>)> {
    let edits = (0..u.int_in_range(0u8..=8)?)
        .map(|_| u.arbitrary())
        .collect::<arbitrary::Result<_>>()?;
    let extra = (0..u.int_in_range(0u8..=4)?)
        .map(|_| {
            Ok(DesiredDesc {
                slot: u.arbitrary()?,
                priority: u.int_in_range(0u8..=3)?,
                route: if u.ratio(7u8, 10)? {
                    Some(u.arbitrary()?)
                } else {
                    None
                },
            })
        })
        .collect::<arbitrary::Result<_>>()?;
    Ok((edits, extra))
}

fn arbitrary_step(u: &mut Unstructured<'_>) -> arbitrary::Result<StepDesc> {
    Ok(match u.int_in_range(0u8..=12)? {
        11 | 12 => {
            let (_, upserts) = arbitrary_desired_list(u)?;
            let removals = (0..u.int_in_range(0u8..=3)?)
                .map(|_| u.arbitrary())
                .collect::<arbitrary::Result<_>>()?;
            StepDesc::Update {
                all_or_nothing: u.arbitrary()?,
                upserts,
                removals,
            }
        }
        0..=3 => StepDesc::Add {
            slot: u.arbitrary()?,
            route: u.arbitrary()?,
            priority: u.int_in_range(0u8..=3)?,
        },
        4..=6 => StepDesc::Remove {
            slot: u.arbitrary()?,
        },
        7 | 8 => {
            let all_or_nothing = u.arbitrary()?;
            let (edits, extra) = arbitrary_desired_list(u)?;
            StepDesc::Sync {
                all_or_nothing,
                edits,
                extra,
            }
        }
        9 => {
            let (edits, extra) = arbitrary_desired_list(u)?;
            StepDesc::StaleSync {
                edits,
                extra,
                remove: u.arbitrary()?,
            }
        }
        _ => StepDesc::ForeignContext,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_is_deterministic_and_mostly_valid() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut total, mut valid) = (0, 0);
        for _ in 0..20 {
            let case = case_strategy(5..20, 1..5)
                .new_tree(&mut runner)
                .unwrap()
                .current();
            let a = case.render();
            let b = case.render();
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
            let mut schema = atc_router::Schema::new();
            for (n, t) in &a.schema {
                schema.add_field(n, *t).unwrap();
            }
            for r in &a.routes {
                total += 1;
                valid += usize::from(atc_router::Router::validate(&schema, &r.text).is_ok());
            }
        }
        assert!(valid * 2 >= total, "{valid} of {total} routes valid");
    }

    #[test]
    fn literals_are_spelled_in_every_form() {
        assert_eq!(int_literal(8, 4), "08");
        assert_eq!(int_literal(-8, 3), "-010");
        assert_eq!(int_literal(255, 2), "0xFF");
        assert_eq!(
            cidr_literal("10.0.0.0/8".parse().unwrap(), 1),
            "10.0.0.0/08"
        );
        assert_eq!(string_literal("a\"\n", 1), "\"a\\\"\\n\"");
        assert_eq!(string_literal("a\"\n", 0), "r#\"a\"\n\"#");
    }
}
