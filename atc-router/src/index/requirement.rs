//! Requirements: facts that hold for every request a route matches ("some value of
//! `http.host` equals `api.example.com`", "some value of `http.path` follows the pattern
//! `/repos/{p}/{p}/issues/{digits}`", "some value of lowercased `tls.sni` ends with
//! `.example.com`"). The index places a route by one of its requirements at each level of its
//! decision tree; the requirements of a route are derived from its compiled program whenever
//! the index needs them (they are not kept).
//!
//! Invariant (soundness): a requirement must hold whenever the route's expression is true, so
//! that a request the index does not lead to a route cannot match it. Requirements are taken
//! only from predicates that are true only when the field has a value with the property (`==`,
//! `^=`, `=^`, `contains`, `in` a network or a set of at most [`MAX_KEYS`] elements, and `~`
//! through what every match of the regex must look like),
//! from any child of `&&`, and from `||` only when every child yields one on the same field
//! (then merged, under the weaker kind when their kinds differ: [`KeyKind::implies`]). Nothing is taken from inside `!( … )`. Both modes are covered: a
//! predicate true for all values (at least one) or for any value has *some* value with the
//! property. The property tests compare the index with the reference evaluator to catch a
//! breach.

use std::borrow::Cow;
use std::net::IpAddr;

use crate::compile::program::{Code, Instr, Lit, Pred, Set};
use crate::language::Op;
use crate::schema::values::Values;
use crate::schema::{FieldId, Schema};
use crate::value::{cidr_contains, IpCidr, Value};

use crate::compile::path_pattern::PathPattern;

/// What a structure of the index is keyed by: one field (lowercased or not) and one kind of key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Disc {
    pub(crate) field: FieldId,
    pub(crate) lower: bool,
    pub(crate) kind: KeyKind,
}

/// Kinds of keys, in order of preference when two would leave a request the same candidates
/// (cheapest lookup first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum KeyKind {
    /// Some value equals a key.
    Exact,
    /// Some (integer) value equals a key.
    Int,
    /// Some address lies in a key network.
    Cidr,
    /// Some value is a path following a key pattern (before `Prefix`: a lookup by segment is a
    /// hash probe per segment, where a radix tree of many keys is a node per byte run; where
    /// the two describe routes as precisely, the cheaper one wins the tie).
    Path,
    /// Some value starts with a key.
    Prefix,
    /// Some value ends with a key.
    Suffix,
    /// Some value contains a key.
    Contains,
    /// Some value matches a key regex (the source is the key). Never a split: a regex that no
    /// other kind describes (no literal every match holds, no path shape) runs in its own
    /// route's evaluation, one by one as Kong's library runs every regex; one automaton over
    /// many such patterns thrashes its cache on the texts that matter (hundreds of `\w{30}…`
    /// patterns cost tens of milliseconds a request that way). Kept so that explain can name
    /// the regex that ruled a route out.
    Regex,
}

impl KeyKind {
    /// Whether a key of this kind, read as a key of `weaker`, holds wherever it held: equal to
    /// `k` implies starting with, ending with and containing `k`; starting or ending with it
    /// implies containing it. (Every kind implies itself.) Only byte-string kinds convert.
    pub(crate) fn implies(self, weaker: KeyKind) -> bool {
        use KeyKind::*;
        self == weaker
            || matches!(
                (self, weaker),
                (Exact, Prefix | Suffix | Contains) | (Prefix | Suffix, Contains)
            )
    }
}

/// One requirement: one of `keys` holds of some value of `disc.field`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requirement {
    pub(crate) disc: Disc,
    pub(crate) keys: Keys,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Keys {
    Bytes(Vec<Box<[u8]>>),
    Int(Vec<i64>),
    Cidr(Vec<IpCidr>),
    Path(Vec<PathPattern>),
}

/// One key of [`Keys`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Key<'a> {
    Bytes(&'a [u8]),
    Int(i64),
    Cidr(IpCidr),
    Path(&'a PathPattern),
}

impl Requirement {
    /// Whether some value of the request meets the requirement: the index's test for one
    /// route, for explaining why a route was ruled out (the index's structures answer it for
    /// all routes at once). Kinds it cannot test say yes, so it never names a wrong reason.
    pub(crate) fn admits(&self, ctx: &Values) -> bool {
        ctx.values_by_id(self.disc.field)
            .iter()
            .any(|v| self.admits_value(v))
    }

    /// Whether one value of the requirement's field meets it (see [`Requirement::admits`]).
    pub(crate) fn admits_value(&self, v: &Value) -> bool {
        match (v, &self.keys) {
            (Value::String(s), Keys::Bytes(keys)) => {
                let s: Cow<'_, str> = if self.disc.lower {
                    Cow::Owned(s.to_lowercase())
                } else {
                    Cow::Borrowed(s)
                };
                let b = s.as_bytes();
                keys.iter().any(|k| match self.disc.kind {
                    KeyKind::Exact => b == &**k,
                    KeyKind::Prefix => b.starts_with(k),
                    KeyKind::Suffix => b.ends_with(k),
                    KeyKind::Contains => std::str::from_utf8(k).is_ok_and(|k| s.contains(k)),
                    KeyKind::Regex => std::str::from_utf8(k)
                        .ok()
                        .and_then(|src| regex_automata::meta::Regex::new(src).ok())
                        .is_none_or(|re| re.is_match(b)),
                    KeyKind::Int | KeyKind::Cidr | KeyKind::Path => true,
                })
            }
            (Value::String(s), Keys::Path(patterns)) => {
                let s: Cow<'_, str> = if self.disc.lower {
                    Cow::Owned(s.to_lowercase())
                } else {
                    Cow::Borrowed(s)
                };
                patterns.iter().any(|p| p.accepts(s.as_bytes()))
            }
            (Value::Int(i), Keys::Int(keys)) => keys.contains(i),
            (Value::IpAddr(a), Keys::Cidr(keys)) => keys.iter().any(|c| cidr_contains(c, a)),
            _ => true,
        }
    }

    /// The requirement written as a condition: `http.host == "a.example"`,
    /// `lower(tls.sni) =^ ".example.com"`, `http.path follows /users/{…}` (alternatives joined
    /// by `||`).
    pub(crate) fn describe(&self, schema: &Schema) -> String {
        let name = schema
            .field(self.disc.field)
            .map_or_else(|| "?".to_owned(), |f| f.0);
        let lhs = if self.disc.lower {
            format!("lower({name})")
        } else {
            name
        };
        let op = match self.disc.kind {
            KeyKind::Exact | KeyKind::Int => "==",
            KeyKind::Cidr => "in",
            KeyKind::Path => "follows",
            KeyKind::Prefix => "^=",
            KeyKind::Suffix => "=^",
            KeyKind::Contains => "contains",
            KeyKind::Regex => "~",
        };
        self.keys
            .iter()
            .map(|k| {
                let key = match k {
                    Key::Bytes(b) => format!("{:?}", String::from_utf8_lossy(b)),
                    Key::Int(i) => i.to_string(),
                    Key::Cidr(c) => c.to_string(),
                    Key::Path(p) => p.describe(),
                };
                format!("{lhs} {op} {key}")
            })
            .collect::<Vec<_>>()
            .join(" || ")
    }
}

impl Keys {
    pub(crate) fn len(&self) -> usize {
        match self {
            Keys::Bytes(k) => k.len(),
            Keys::Int(k) => k.len(),
            Keys::Cidr(k) => k.len(),
            Keys::Path(k) => k.len(),
        }
    }

    pub(crate) fn iter(&self) -> KeyIter<'_> {
        KeyIter {
            keys: self,
            next: 0,
        }
    }

    fn get(&self, i: usize) -> Option<Key<'_>> {
        Some(match self {
            Keys::Bytes(k) => Key::Bytes(k.get(i)?),
            Keys::Int(k) => Key::Int(*k.get(i)?),
            Keys::Cidr(k) => Key::Cidr(*k.get(i)?),
            Keys::Path(k) => Key::Path(k.get(i)?),
        })
    }

    /// Keys that hold when either side's do (`||`), if few enough to be worth indexing.
    fn union(&self, other: &Keys) -> Option<Keys> {
        fn cat<T: Clone + PartialEq>(a: &[T], b: &[T]) -> Vec<T> {
            let mut v = a.to_vec();
            for x in b {
                if !v.contains(x) {
                    v.push(x.clone());
                }
            }
            v
        }
        let keys = match (self, other) {
            (Keys::Bytes(a), Keys::Bytes(b)) => Keys::Bytes(cat(a, b)),
            (Keys::Int(a), Keys::Int(b)) => Keys::Int(cat(a, b)),
            (Keys::Cidr(a), Keys::Cidr(b)) => Keys::Cidr(cat(a, b)),
            (Keys::Path(a), Keys::Path(b)) => Keys::Path(cat(a, b)),
            _ => return None,
        };
        (keys.len() <= MAX_KEYS).then_some(keys)
    }

    /// Bounds the keys that make a structure deeper the longer they are: a prefix keeps its
    /// first [`MAX_AFFIX_BYTES`] bytes, a suffix its last, a path pattern its first
    /// [`MAX_PATH_SEGMENTS`] segments (then anything). Each still holds wherever the full key
    /// does, so the requirement stays sound; keys made equal by this are kept once.
    fn shorten(&mut self, kind: KeyKind) {
        match (kind, self) {
            (KeyKind::Prefix, Keys::Bytes(keys)) => {
                for k in keys.iter_mut() {
                    if k.len() > MAX_AFFIX_BYTES {
                        *k = k[..MAX_AFFIX_BYTES].into();
                    }
                }
                dedup(keys);
            }
            (KeyKind::Suffix, Keys::Bytes(keys)) => {
                for k in keys.iter_mut() {
                    if k.len() > MAX_AFFIX_BYTES {
                        *k = k[k.len() - MAX_AFFIX_BYTES..].into();
                    }
                }
                dedup(keys);
            }
            (KeyKind::Path, Keys::Path(patterns)) => {
                for p in patterns.iter_mut() {
                    if p.segs.len() > MAX_PATH_SEGMENTS {
                        *p = PathPattern {
                            segs: p.segs[..MAX_PATH_SEGMENTS].into(),
                            open: true,
                        };
                    }
                }
                dedup(patterns);
            }
            _ => {}
        }
    }

    /// Drops the keys another key of the set already covers: a prefix that starts with a
    /// shorter prefix of the set (`/a/b` beside `/a`), a suffix that ends with a shorter one
    /// (`.a.com` beside `a.com`), a substring that contains another. The requirement means the
    /// same, and a request no longer finds the route once per redundant key (which made a split
    /// look worse than it is).
    fn drop_implied(&mut self, kind: KeyKind) {
        let Keys::Bytes(keys) = self else {
            return;
        };
        let covers = |k: &[u8], other: &[u8]| match kind {
            KeyKind::Prefix => other.starts_with(k),
            KeyKind::Suffix => other.ends_with(k),
            // Substring keys are not shortened: only short ones are compared, so that a set
            // of long literals costs its size, not its size squared.
            KeyKind::Contains => {
                other.len() <= MAX_AFFIX_BYTES && memchr::memmem::find(other, k).is_some()
            }
            _ => false,
        };
        let mut i = 0;
        while i < keys.len() {
            let redundant = keys
                .iter()
                .enumerate()
                .any(|(j, k)| j != i && k.len() < keys[i].len() && covers(k, &keys[i]));
            if redundant {
                keys.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// How much a key narrows (for keeping the better of two requirements of one disc):
    /// fewer alternatives, then longer literals.
    fn strength(&self) -> (std::cmp::Reverse<usize>, usize) {
        let min_len = match self {
            Keys::Bytes(k) => k.iter().map(|b| b.len()).min().unwrap_or(0),
            Keys::Path(k) => k.iter().map(|p| p.segs.len()).min().unwrap_or(0),
            Keys::Int(_) | Keys::Cidr(_) => 0,
        };
        (std::cmp::Reverse(self.len()), min_len)
    }
}

/// Drops later repeats, keeping the order.
fn dedup<T: PartialEq>(v: &mut Vec<T>) {
    let mut i = 0;
    while i < v.len() {
        if v[..i].contains(&v[i]) {
            v.remove(i);
        } else {
            i += 1;
        }
    }
}

/// The keys of a requirement, in order.
pub(crate) struct KeyIter<'a> {
    keys: &'a Keys,
    next: usize,
}

impl<'a> Iterator for KeyIter<'a> {
    type Item = Key<'a>;

    fn next(&mut self) -> Option<Key<'a>> {
        let k = self.keys.get(self.next)?;
        self.next += 1;
        Some(k)
    }
}

/// At most this many alternatives in one requirement; more is not worth indexing.
pub(crate) const MAX_KEYS: usize = 64;
/// At most this many requirements are kept for one route (bounds work on wide expressions).
const MAX_REQUIREMENTS: usize = 16;
/// Longest prefix or suffix key, in bytes: a radix tree is as deep as its longest key at worst
/// (keys `a`, `aa`, `aaa`, …), and its walks and updates follow that depth.
pub(crate) const MAX_AFFIX_BYTES: usize = 256;
/// Most segments of a path key: the segment tree is as deep as its longest pattern.
pub(crate) const MAX_PATH_SEGMENTS: usize = 32;

/// The requirements of a route, one per [`Disc`] at most (the stronger kept).
pub(crate) fn requirements(code: &Code<'_>) -> Vec<Requirement> {
    let mut out = Vec::new();
    for i in code.runs() {
        for r in of(code, i) {
            keep(&mut out, r);
        }
    }
    out.truncate(MAX_REQUIREMENTS);
    for r in &mut out {
        r.keys.shorten(r.disc.kind);
        r.keys.drop_implied(r.disc.kind);
    }
    out
}

/// Adds `r` to a conjunction's requirements, keeping one per disc.
fn keep(out: &mut Vec<Requirement>, r: Requirement) {
    match out.iter_mut().find(|x| x.disc == r.disc) {
        Some(x) => {
            if r.keys.strength() > x.keys.strength() {
                *x = r;
            }
        }
        None => out.push(r),
    }
}

/// Requirements that each hold whenever instruction `i` (and its descendants) is true.
fn of(code: &Code<'_>, i: usize) -> Vec<Requirement> {
    let end = code.end(i);
    match &code.code()[i] {
        Instr::And { .. } => {
            let mut all = Vec::new();
            let mut c = i + 1;
            while c < end {
                for r in crate::stack::guarded(|| of(code, c)) {
                    keep(&mut all, r);
                }
                c = code.end(c);
            }
            all
        }
        Instr::Or { .. } => {
            let mut c = i + 1;
            let mut acc: Option<Vec<Requirement>> = None;
            while c < end {
                let theirs = crate::stack::guarded(|| of(code, c));
                acc = Some(match acc {
                    None => theirs,
                    Some(acc) => either(&acc, &theirs),
                });
                if acc.as_ref().is_some_and(Vec::is_empty) {
                    break;
                }
                c = code.end(c);
            }
            acc.unwrap_or_default()
        }
        Instr::Not { .. } | Instr::End => Vec::new(),
        Instr::Pred(p) => predicate(code, p),
    }
}

/// Requirements that hold when either side's do (`a || b`): for each pair on one field, the
/// union of their keys under the strongest kind both imply. Keys of one kind are also keys of a weaker
/// kind ([`KeyKind::implies`]): `host == "a.com" || host =^ ".a.com"` requires some host ending
/// with `a.com`, which a suffix structure keys (Kong writes every `*.a.com` route this way).
fn either(a: &[Requirement], b: &[Requirement]) -> Vec<Requirement> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            if x.disc.field != y.disc.field || x.disc.lower != y.disc.lower {
                continue;
            }
            // The strongest kind both imply (a prefix or a suffix: a substring).
            let both = |k: KeyKind| x.disc.kind.implies(k) && y.disc.kind.implies(k);
            let Some(kind) = [x.disc.kind, y.disc.kind, KeyKind::Contains]
                .into_iter()
                .find(|&k| both(k))
            else {
                continue;
            };
            let disc = Disc { kind, ..x.disc };
            if let Some(keys) = x.keys.union(&y.keys) {
                keep(&mut out, Requirement { disc, keys });
            }
        }
    }
    out
}

fn predicate(code: &Code<'_>, p: &Pred) -> Vec<Requirement> {
    let req = |kind, keys| Requirement {
        disc: Disc {
            field: p.field,
            lower: p.lower,
            kind,
        },
        keys,
    };
    let bytes = |b: &[u8]| Keys::Bytes(vec![b.into()]);
    let mut out = Vec::new();
    match (p.op, &p.lit) {
        (Op::Regex, Lit::Regex(re)) => {
            if let Some(prefixes) = re.anchored_prefixes() {
                out.push(req(KeyKind::Prefix, Keys::Bytes(prefixes.to_vec())));
            } else if let Some(inner) = re.required_literals().filter(|k| k.len() <= MAX_KEYS) {
                // Not anchored: every matching value contains one of these.
                out.push(req(KeyKind::Contains, Keys::Bytes(inner.to_vec())));
            }
            if let Some(path) = re.path_pattern() {
                out.push(req(KeyKind::Path, Keys::Path(vec![path.clone()])));
            }
            out.push(req(KeyKind::Regex, bytes(re.as_str().as_bytes())));
        }
        (Op::Equals, Lit::Int(i)) => out.push(req(KeyKind::Int, Keys::Int(vec![*i]))),
        (Op::Equals, Lit::IpAddr(a)) => {
            let full = match a {
                IpAddr::V4(_) => 32,
                IpAddr::V6(_) => 128,
            };
            if let Ok(net) = IpCidr::new(*a, full) {
                out.push(req(KeyKind::Cidr, Keys::Cidr(vec![net])));
            }
        }
        (Op::In, Lit::IpCidr(c)) => out.push(req(KeyKind::Cidr, Keys::Cidr(vec![*c]))),
        // Some value is one of the elements (lowered, if the predicate lowers: the elements
        // are lowercase then).
        (Op::In, Lit::Set(set)) if set.len() <= MAX_KEYS => out.push(match &**set {
            Set::Str(v) => req(
                KeyKind::Exact,
                Keys::Bytes(v.iter().map(|e| e.as_bytes().into()).collect()),
            ),
            Set::Int(v) => req(KeyKind::Int, Keys::Int(v.to_vec())),
            Set::Net(v) => req(KeyKind::Cidr, Keys::Cidr(v.to_vec())),
        }),
        (op, lit) => {
            let Some(lit) = code.bytes(lit) else {
                return out;
            };
            match op {
                Op::Equals => {
                    out.push(req(KeyKind::Exact, bytes(lit)));
                    if let Some(path) = PathPattern::exact(lit) {
                        out.push(req(KeyKind::Path, Keys::Path(vec![path])));
                    }
                }
                Op::Prefix if !lit.is_empty() => {
                    out.push(req(KeyKind::Prefix, bytes(lit)));
                    if let Some(path) = PathPattern::prefix(lit).filter(|p| !p.segs.is_empty()) {
                        out.push(req(KeyKind::Path, Keys::Path(vec![path])));
                    }
                }
                Op::Postfix if !lit.is_empty() => out.push(req(KeyKind::Suffix, bytes(lit))),
                Op::Contains if !lit.is_empty() => out.push(req(KeyKind::Contains, bytes(lit))),
                // An empty prefix, suffix or substring: every value has it, no key narrows.
                Op::Prefix | Op::Postfix | Op::Contains => {}
                // Negations hold for values the key would not lead to, so they are never keys;
                // ranges are not (a request's value is probed, not a span); regexes, networks
                // and sets are keyed above, or too large to be keys.
                Op::NotEquals
                | Op::NotIn
                | Op::Greater
                | Op::GreaterOrEqual
                | Op::Less
                | Op::LessOrEqual
                | Op::Regex
                | Op::In => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::program::test_program;

    fn requirements_of(expression: &str) -> Vec<Requirement> {
        requirements(&test_program(expression).view())
    }

    fn keys_of(reqs: &[Requirement], kind: KeyKind) -> Option<Vec<String>> {
        let r = reqs.iter().find(|r| r.disc.kind == kind)?;
        Some(
            r.keys
                .iter()
                .map(|k| match k {
                    Key::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                    _ => unreachable!("byte keys"),
                })
                .collect(),
        )
    }

    #[test]
    fn a_host_and_its_wildcard_require_a_host_ending_in_it() {
        // Kong's form of hosts = { "a.com", "*.a.com" }
        let reqs = requirements_of(r#"http.host == "a.com" || http.host =^ ".a.com""#);
        assert_eq!(keys_of(&reqs, KeyKind::Suffix), Some(vec!["a.com".into()]));
        assert_eq!(keys_of(&reqs, KeyKind::Exact), None);
    }

    #[test]
    fn an_exact_path_or_a_prefix_requires_the_prefixes() {
        let reqs = requirements_of(r#"http.path == "/a/b" || http.path ^= "/c""#);
        let mut keys = keys_of(&reqs, KeyKind::Prefix).unwrap();
        keys.sort();
        assert_eq!(keys, ["/a/b", "/c"]);
        // a prefix covered by another of the set goes
        let reqs = requirements_of(r#"http.path ^= "/a/b" || http.path ^= "/a""#);
        assert_eq!(keys_of(&reqs, KeyKind::Prefix), Some(vec!["/a".into()]));
    }

    #[test]
    fn a_prefix_or_a_suffix_requires_a_substring() {
        let reqs = requirements_of(r#"http.host ^= "a." || http.host =^ ".b""#);
        assert_eq!(keys_of(&reqs, KeyKind::Prefix), None);
        assert_eq!(keys_of(&reqs, KeyKind::Suffix), None);
        // both imply a substring, which the weaker kind keeps
        assert_eq!(keys_of(&reqs, KeyKind::Contains).map(|k| k.len()), Some(2));
        // and different fields never merge
        let reqs = requirements_of(r#"http.host == "a" || http.path == "/a""#);
        assert!(reqs.is_empty(), "{reqs:?}");
    }
}
