//! Building a request that satisfies a route's expression.
//!
//! The expression is parsed (see [`crate::expr`]); for every `||` group one alternative is chosen
//! at random, the positive predicates are grouped per field and a value is constructed for each
//! field (`==` literal, the longest `^=` prefix plus filler, a string generated from a `~` regex,
//! a port inside the `>=`/`<` bounds, an address inside an `in` CIDR, ...). Fields the route does
//! not constrain get ordinary defaults. The result is then checked against the whole expression
//! (including `!(...)` and `!=`); on failure another attempt is made with fresh random choices.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::expr::{self, Expr, Lit, Op, Pred};
use crate::gen::WORDS;
use crate::regex::Regex;
use crate::rng::Rng;
use crate::Value;

const ATTEMPTS: usize = 64;
const SEGMENTS: &str = "http.path.segments.";
const METHODS: &[&str] = &[
    "GET", "GET", "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD",
];
const DEFAULT_HOSTS: &[&str] = &["www.example.com", "example.com", "m.example.com"];

/// A request (field list) for which `expr` is true. `with_ids` makes paths carry random numeric
/// ids where the route leaves room for them.
pub(crate) fn satisfy(
    expr: &Expr,
    rng: &mut Rng,
    with_ids: bool,
) -> Result<Vec<(String, Value)>, String> {
    let mut last_err = String::from("no attempt");
    for attempt in 0..ATTEMPTS {
        match attempt_build(expr, rng, with_ids, attempt) {
            Ok(fields) => {
                if expr::eval(expr, &fields)? {
                    return Ok(fields);
                }
                last_err = format!("built request does not match: {fields:?}");
            }
            Err(e) => last_err = e,
        }
    }
    Err(last_err)
}

/// A request for no route: unknown host and path.
pub(crate) fn miss(rng: &mut Rng) -> Vec<(String, Value)> {
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
        ("net.src.ip".into(), Value::Ip(default_ip(rng))),
    ]
}

fn collect(e: &Expr, rng: &mut Rng, out: &mut Vec<Pred>) {
    match e {
        Expr::And(v) => v.iter().for_each(|x| collect(x, rng, out)),
        Expr::Or(v) => collect(rng.pick(v), rng, out),
        Expr::Not(_) => {} // checked afterwards
        Expr::Pred(p) => out.push(p.clone()),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Path,
    Host,
    Method,
    Other,
}

fn kind_of(field: &str) -> Kind {
    match field {
        "http.path" => Kind::Path,
        "http.host" | "tls.sni" => Kind::Host,
        "http.method" => Kind::Method,
        _ => Kind::Other,
    }
}

fn attempt_build(
    expr: &Expr,
    rng: &mut Rng,
    with_ids: bool,
    attempt: usize,
) -> Result<Vec<(String, Value)>, String> {
    let mut preds = Vec::new();
    collect(expr, rng, &mut preds);
    let mut by_field: BTreeMap<String, Vec<Pred>> = BTreeMap::new();
    for p in preds {
        by_field.entry(p.field.clone()).or_default().push(p);
    }
    let uses_segments = mentions_segments(expr);

    // segment constraints (0-based: /a/b/c has segments.0 == "a")
    let mut seg_preds: BTreeMap<usize, Vec<Pred>> = BTreeMap::new();
    let keys: Vec<String> = by_field.keys().cloned().collect();
    for k in keys {
        if let Some(idx) = k.strip_prefix(SEGMENTS) {
            let idx: usize = idx
                .parse()
                .map_err(|_| format!("unsupported segment field {k:?}"))?;
            seg_preds.insert(idx, by_field.remove(&k).expect("key present"));
        }
    }

    let mut values: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let path = match by_field.remove("http.path") {
        Some(ps) => string_values(&ps, Kind::Path, rng, with_ids)?,
        None if !seg_preds.is_empty() => {
            let n = seg_preds.keys().max().expect("non-empty") + 1 + rng.below(2);
            let mut segs = Vec::with_capacity(n);
            for i in 0..n {
                segs.push(match seg_preds.get(&i) {
                    Some(ps) => single(string_values(ps, Kind::Other, rng, with_ids)?)?,
                    None if with_ids && i + 1 == n => rng.id_digits(),
                    None => rng.pick(WORDS).to_string(),
                });
            }
            vec![format!("/{}", segs.join("/"))]
        }
        None => vec![default_path(rng, with_ids)],
    };
    values.insert(
        "http.path".into(),
        path.into_iter().map(Value::Str).collect(),
    );

    for (field, ps) in &by_field {
        let vs = match &ps[0].rhs {
            Lit::Str(_) => string_values(ps, kind_of(field), rng, with_ids)?
                .into_iter()
                .map(Value::Str)
                .collect(),
            Lit::Int(_) => vec![Value::Int(int_value(ps, field, rng)?)],
            Lit::Ip(_) | Lit::Cidr(..) => vec![Value::Ip(ip_value(ps, rng)?)],
        };
        values.insert(field.clone(), vs);
    }

    // ordinary defaults
    let method = if attempt == 0 {
        "GET"
    } else {
        *rng.pick(METHODS)
    };
    values
        .entry("http.method".into())
        .or_insert_with(|| vec![Value::Str(method.into())]);
    if !values.contains_key("http.host") {
        let h = rng.pick(DEFAULT_HOSTS).to_string();
        values.insert("http.host".into(), vec![Value::Str(h)]);
    }
    values
        .entry("net.dst.port".into())
        .or_insert_with(|| vec![Value::Int(443)]);
    if !values.contains_key("net.src.ip") {
        let ip = default_ip(rng);
        values.insert("net.src.ip".into(), vec![Value::Ip(ip)]);
    }

    // canonical order: method, host, path, segments, then the rest by name
    let mut fields = Vec::new();
    for name in ["http.method", "http.host", "http.path"] {
        for v in values.remove(name).expect("set above") {
            if name == "http.path" && uses_segments {
                let Value::Str(p) = &v else { unreachable!() };
                let segs: Vec<String> = p
                    .trim_start_matches('/')
                    .split('/')
                    .map(str::to_string)
                    .collect();
                fields.push((name.to_string(), v.clone()));
                for (i, s) in segs.into_iter().enumerate() {
                    fields.push((format!("{SEGMENTS}{i}"), Value::Str(s)));
                }
            } else {
                fields.push((name.to_string(), v));
            }
        }
    }
    for (name, vs) in values {
        for v in vs {
            fields.push((name.clone(), v));
        }
    }
    Ok(fields)
}

fn mentions_segments(e: &Expr) -> bool {
    match e {
        Expr::And(v) | Expr::Or(v) => v.iter().any(mentions_segments),
        Expr::Not(x) => mentions_segments(x),
        Expr::Pred(p) => p.field.starts_with(SEGMENTS),
    }
}

fn single(mut v: Vec<String>) -> Result<String, String> {
    v.pop().ok_or_else(|| "no value".to_string())
}

fn default_ip(rng: &mut Rng) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        192,
        168,
        rng.below(256) as u8,
        1 + rng.below(254) as u8,
    ))
}

fn default_path(rng: &mut Rng, with_ids: bool) -> String {
    let w = rng.pick(WORDS);
    if with_ids {
        format!("/{w}/{}", rng.id_digits())
    } else if rng.chance(0.2) {
        "/".to_string()
    } else {
        format!("/{w}")
    }
}

/// Appends path piece `b` to `a` with exactly one `/` between them.
fn join_path(a: &mut String, b: &str) {
    match (a.ends_with('/'), b.starts_with('/')) {
        (true, true) => a.push_str(&b[1..]),
        (false, false) if !a.is_empty() => {
            a.push('/');
            a.push_str(b);
        }
        _ => a.push_str(b),
    }
}

/// Randomly upper-cases some ASCII letters (for `lower()` predicates).
fn mangle_case(s: &str, rng: &mut Rng) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_lowercase() && rng.chance(0.5) {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// Values for a String field with the given positive predicates. Usually one value; for a field
/// only used under `any()` sometimes a non-matching decoy value comes first (multi-valued).
fn string_values(
    preds: &[Pred],
    kind: Kind,
    rng: &mut Rng,
    with_ids: bool,
) -> Result<Vec<String>, String> {
    let mut eq = None;
    let mut prefix: Option<&str> = None;
    let mut suffixes = Vec::new();
    let mut contains = Vec::new();
    let mut regex = None;
    for p in preds {
        let Lit::Str(s) = &p.rhs else {
            return Err(format!("mixed literal types on field {:?}", p.field));
        };
        match p.op {
            Op::Eq => eq = Some(s.as_str()),
            Op::Prefix => {
                if prefix.is_none_or(|q| q.len() < s.len()) {
                    prefix = Some(s);
                }
            }
            Op::Postfix => suffixes.push(s.as_str()),
            Op::Contains => contains.push(s.as_str()),
            Op::Regex => regex = Some(s.as_str()),
            Op::Ne => {}
            op => return Err(format!("operator {op:?} on a String field")),
        }
    }
    let built = if let Some(e) = eq {
        e.to_string()
    } else if let Some(r) = regex {
        Regex::parse(r)?.generate(rng)
    } else {
        let mut v = prefix.unwrap_or("").to_string();
        for c in &contains {
            if kind == Kind::Path {
                join_path(&mut v, c);
            } else {
                v.push_str(c);
            }
        }
        match kind {
            Kind::Path => {
                if with_ids {
                    let tail = format!("/{}/{}", rng.id_digits(), rng.pick(WORDS));
                    join_path(&mut v, &tail);
                } else if v.is_empty() || rng.chance(0.5) {
                    join_path(&mut v, &format!("/{}", rng.pick(WORDS)));
                }
                if !v.starts_with('/') && prefix.is_none() {
                    v.insert(0, '/');
                }
            }
            Kind::Host if v.is_empty() => {
                if suffixes.is_empty() {
                    v = rng.pick(DEFAULT_HOSTS).to_string();
                } else {
                    v = rng.pick(&["www", "api", "eu", "us", "shop"]).to_string();
                }
            }
            Kind::Method if v.is_empty() => v = rng.pick(METHODS).to_string(),
            _ if v.is_empty() && suffixes.is_empty() => v = rng.pick(WORDS).to_string(),
            _ => {}
        }
        for s in &suffixes {
            v.push_str(s);
        }
        v
    };
    let all_lower = preds.iter().all(|p| p.lower);
    let all_any = preds.iter().all(|p| p.any);
    let value = if all_lower && rng.chance(0.5) {
        mangle_case(&built, rng)
    } else {
        built
    };
    if all_any && rng.chance(0.5) {
        Ok(vec![format!("decoy{}", rng.digits(3)), value])
    } else {
        Ok(vec![value])
    }
}

fn int_value(preds: &[Pred], field: &str, rng: &mut Rng) -> Result<i64, String> {
    let (mut lo, mut hi) = if field.ends_with(".port") {
        (1i64, 65_535i64)
    } else {
        (i64::MIN, i64::MAX)
    };
    let mut eq = None;
    for p in preds {
        let Lit::Int(v) = p.rhs else {
            return Err(format!("mixed literal types on field {field:?}"));
        };
        match p.op {
            Op::Eq => eq = Some(v),
            Op::Ge => lo = lo.max(v),
            Op::Gt => lo = lo.max(v.saturating_add(1)),
            Op::Le => hi = hi.min(v),
            Op::Lt => hi = hi.min(v.saturating_sub(1)),
            Op::Ne => {}
            op => return Err(format!("operator {op:?} on an Int field")),
        }
    }
    if let Some(v) = eq {
        return Ok(v);
    }
    if lo > hi {
        return Err(format!("empty range on {field:?}"));
    }
    if (lo..=hi).contains(&443) && rng.chance(0.5) {
        return Ok(443);
    }
    let span = (hi as i128 - lo as i128).min(1000) as u64;
    Ok(lo + rng.range(0, span) as i64)
}

fn ip_value(preds: &[Pred], rng: &mut Rng) -> Result<IpAddr, String> {
    let mut eq = None;
    let mut net: Option<(IpAddr, u8)> = None;
    for p in preds {
        match (p.op, &p.rhs) {
            (Op::Eq, Lit::Ip(ip)) => eq = Some(*ip),
            (Op::In, Lit::Cidr(a, l)) => {
                if net.is_none_or(|(_, nl)| nl < *l) {
                    net = Some((*a, *l));
                }
            }
            (Op::NotIn, Lit::Cidr(..)) | (Op::Ne, Lit::Ip(_)) => {}
            (op, _) => return Err(format!("operator {op:?} on an IpAddr field")),
        }
    }
    if let Some(ip) = eq {
        return Ok(ip);
    }
    Ok(match net {
        None => default_ip(rng),
        Some((IpAddr::V4(a), l)) => {
            let host = if l >= 32 {
                0
            } else {
                (rng.next_u64() as u32) & (u32::MAX >> l)
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) | host))
        }
        Some((IpAddr::V6(a), l)) => {
            let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
            let host = if l >= 128 { 0 } else { r & (u128::MAX >> l) };
            IpAddr::V6(Ipv6Addr::from(u128::from(a) | host))
        }
    })
}
