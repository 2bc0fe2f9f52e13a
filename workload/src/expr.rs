//! A small parser and evaluator for the route language (shared/spec/LANGUAGE.md), used to build
//! requests that satisfy a route and, in tests, to check them. It is not the project's reference
//! evaluator: it does not validate against a schema, reports errors without positions, and `~`
//! only understands the regex subset of [`crate::regex`].

use std::net::IpAddr;

use crate::regex::Regex;
use crate::Value;

/// An expression tree. `||` binds tighter than `&&`, so the parser produces an `And` of `Or`s.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Pred(Pred),
}

/// `[any(][lower(]field[)][)] op rhs` (transformations in any order and nesting).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pred {
    pub field: String,
    pub any: bool,
    pub lower: bool,
    pub op: Op,
    pub rhs: Lit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Eq,
    Ne,
    Regex,
    Prefix,
    Postfix,
    Contains,
    Gt,
    Ge,
    Lt,
    Le,
    In,
    NotIn,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Lit {
    Str(String),
    Int(i64),
    Ip(IpAddr),
    Cidr(IpAddr, u8),
}

const MAX_DEPTH: usize = 128;

/// Parses an expression.
pub(crate) fn parse(src: &str) -> Result<Expr, String> {
    let mut p = Parser {
        s: src,
        i: 0,
        depth: 0,
    };
    let e = p.expr()?;
    p.ws();
    if p.i != src.len() {
        return Err(format!("unexpected text at byte {} of {src:?}", p.i));
    }
    Ok(e)
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }

    fn ws(&mut self) {
        let skip = self.rest().len()
            - self
                .rest()
                .trim_start_matches([' ', '\t', '\r', '\n'])
                .len();
        self.i += skip;
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.ws();
        if self.rest().starts_with(tok) {
            self.i += tok.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &str) -> Result<(), String> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(format!(
                "expected {tok:?} at byte {} of {:?}",
                self.i, self.s
            ))
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("expression nested too deeply".into());
        }
        let mut ands = vec![self.or_list()?];
        while self.eat("&&") {
            ands.push(self.or_list()?);
        }
        self.depth -= 1;
        Ok(if ands.len() == 1 {
            ands.pop().expect("one item")
        } else {
            Expr::And(ands)
        })
    }

    fn or_list(&mut self) -> Result<Expr, String> {
        let mut ors = vec![self.term()?];
        while self.eat("||") {
            ors.push(self.term()?);
        }
        Ok(if ors.len() == 1 {
            ors.pop().expect("one item")
        } else {
            Expr::Or(ors)
        })
    }

    fn term(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            self.expect("(")?;
            let e = self.expr()?;
            self.expect(")")?;
            return Ok(Expr::Not(Box::new(e)));
        }
        if self.eat("(") {
            let e = self.expr()?;
            self.expect(")")?;
            return Ok(e);
        }
        self.predicate().map(Expr::Pred)
    }

    fn ident(&mut self) -> Result<&str, String> {
        self.ws();
        let r = self.rest();
        let ok = r.as_bytes().first().is_some_and(u8::is_ascii_alphabetic);
        if !ok {
            return Err(format!(
                "expected a field at byte {} of {:?}",
                self.i, self.s
            ));
        }
        let len = r
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(r.len());
        let start = self.i;
        self.i += len;
        Ok(&self.s[start..self.i])
    }

    /// Returns (field, any, lower).
    fn lhs(&mut self, depth: usize) -> Result<(String, bool, bool), String> {
        if depth > MAX_DEPTH {
            return Err("transformations nested too deeply".into());
        }
        let name = self.ident()?.to_string();
        if self.eat("(") {
            let (field, mut any, mut lower) = self.lhs(depth + 1)?;
            match name.as_str() {
                "any" => any = true,
                "lower" => lower = true,
                _ => return Err(format!("unknown transformation {name:?}")),
            }
            self.expect(")")?;
            return Ok((field, any, lower));
        }
        Ok((name, false, false))
    }

    fn op(&mut self) -> Result<Op, String> {
        const SYMBOLS: [(&str, Op); 9] = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("^=", Op::Prefix),
            ("=^", Op::Postfix),
            (">=", Op::Ge),
            ("<=", Op::Le),
            (">", Op::Gt),
            ("<", Op::Lt),
            ("~", Op::Regex),
        ];
        self.ws();
        for (sym, op) in SYMBOLS {
            if self.eat(sym) {
                return Ok(op);
            }
        }
        let word = self.ident()?;
        match word {
            "contains" => Ok(Op::Contains),
            "in" => Ok(Op::In),
            "not" => {
                if self.ident()? == "in" {
                    Ok(Op::NotIn)
                } else {
                    Err("expected \"in\" after \"not\"".into())
                }
            }
            w => Err(format!("unknown operator {w:?}")),
        }
    }

    fn rhs(&mut self) -> Result<Lit, String> {
        self.ws();
        let r = self.rest();
        if let Some(body) = r.strip_prefix("r#\"") {
            let end = body.find("\"#").ok_or("unterminated raw string")?;
            let lit = body[..end].to_string();
            self.i += 3 + end + 2;
            return Ok(Lit::Str(lit));
        }
        if let Some(body) = r.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = body.char_indices();
            while let Some((k, c)) = chars.next() {
                match c {
                    '"' => {
                        self.i += 1 + k + 1;
                        return Ok(Lit::Str(out));
                    }
                    '\\' => match chars.next() {
                        Some((_, '"')) => out.push('"'),
                        Some((_, '\\')) => out.push('\\'),
                        Some((_, 'n')) => out.push('\n'),
                        Some((_, 'r')) => out.push('\r'),
                        Some((_, 't')) => out.push('\t'),
                        other => return Err(format!("invalid escape {other:?}")),
                    },
                    c => out.push(c),
                }
            }
            return Err("unterminated string".into());
        }
        let len = r
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '/' | '-')))
            .unwrap_or(r.len());
        let word = &r[..len];
        if word.is_empty() {
            return Err(format!(
                "expected a value at byte {} of {:?}",
                self.i, self.s
            ));
        }
        let lit = parse_bare(word).ok_or_else(|| format!("bad value {word:?}"))?;
        self.i += len;
        Ok(lit)
    }

    fn predicate(&mut self) -> Result<Pred, String> {
        let (field, any, lower) = self.lhs(0)?;
        let op = self.op()?;
        let rhs = self.rhs()?;
        Ok(Pred {
            field,
            any,
            lower,
            op,
            rhs,
        })
    }
}

/// CIDR, IP address or integer (decimal, `0x` hex, leading-zero octal).
fn parse_bare(word: &str) -> Option<Lit> {
    if let Some((addr, len)) = word.split_once('/') {
        let addr: IpAddr = addr.parse().ok()?;
        let len: u8 = len.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max || addr != mask(addr, len) {
            return None;
        }
        return Some(Lit::Cidr(addr, len));
    }
    if let Ok(ip) = word.parse::<IpAddr>() {
        return Some(Lit::Ip(ip));
    }
    let (neg, mag) = match word.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, word),
    };
    let v = if let Some(h) = mag.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if mag.len() > 1
        && mag.starts_with('0')
        && mag.bytes().all(|b| (b'0'..=b'7').contains(&b))
    {
        i64::from_str_radix(mag, 8).ok()?
    } else {
        mag.parse::<i64>().ok()?
    };
    Some(Lit::Int(if neg { -v } else { v }))
}

/// `addr` with its host bits (beyond `len`) cleared.
pub(crate) fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len))
            };
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// Whether `ip` is inside `net/len` (different families: not inside).
pub(crate) fn cidr_contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    net.is_ipv4() == ip.is_ipv4() && mask(ip, len) == net
}

/// Evaluates `e` against the request fields (§5: absent field ⇒ predicate false; all-mode unless
/// `any()`; `lower()` lowercases String values). Errors only for regexes outside the subset.
pub(crate) fn eval(e: &Expr, fields: &[(String, Value)]) -> Result<bool, String> {
    Ok(match e {
        Expr::And(v) => {
            for x in v {
                if !eval(x, fields)? {
                    return Ok(false);
                }
            }
            true
        }
        Expr::Or(v) => {
            for x in v {
                if eval(x, fields)? {
                    return Ok(true);
                }
            }
            false
        }
        Expr::Not(x) => !eval(x, fields)?,
        Expr::Pred(p) => eval_pred(p, fields)?,
    })
}

fn eval_pred(p: &Pred, fields: &[(String, Value)]) -> Result<bool, String> {
    let regex = match (&p.op, &p.rhs) {
        (Op::Regex, Lit::Str(s)) => Some(Regex::parse(s)?),
        _ => None,
    };
    let mut seen = false;
    for (name, value) in fields {
        if *name != p.field {
            continue;
        }
        seen = true;
        let lowered;
        let value = match (p.lower, value) {
            (true, Value::Str(s)) => {
                lowered = Value::Str(s.to_lowercase());
                &lowered
            }
            (true, _) => return Ok(false),
            (false, v) => v,
        };
        let ok = check(p.op, value, &p.rhs, regex.as_ref());
        if p.any && ok {
            return Ok(true);
        }
        if !p.any && !ok {
            return Ok(false);
        }
    }
    Ok(seen && !p.any)
}

fn check(op: Op, v: &Value, rhs: &Lit, regex: Option<&Regex>) -> bool {
    match (op, v, rhs) {
        (Op::Eq, Value::Str(a), Lit::Str(b)) => a == b,
        (Op::Eq, Value::Int(a), Lit::Int(b)) => a == b,
        (Op::Eq, Value::Ip(a), Lit::Ip(b)) => a == b,
        (Op::Ne, Value::Str(a), Lit::Str(b)) => a != b,
        (Op::Ne, Value::Int(a), Lit::Int(b)) => a != b,
        (Op::Ne, Value::Ip(a), Lit::Ip(b)) => a != b,
        (Op::Regex, Value::Str(a), Lit::Str(_)) => regex.is_some_and(|r| r.is_match(a)),
        (Op::Prefix, Value::Str(a), Lit::Str(b)) => a.starts_with(b.as_str()),
        (Op::Postfix, Value::Str(a), Lit::Str(b)) => a.ends_with(b.as_str()),
        (Op::Contains, Value::Str(a), Lit::Str(b)) => a.contains(b.as_str()),
        (Op::Gt, Value::Int(a), Lit::Int(b)) => a > b,
        (Op::Ge, Value::Int(a), Lit::Int(b)) => a >= b,
        (Op::Lt, Value::Int(a), Lit::Int(b)) => a < b,
        (Op::Le, Value::Int(a), Lit::Int(b)) => a <= b,
        (Op::In, Value::Ip(a), Lit::Cidr(n, l)) => cidr_contains(*n, *l, *a),
        (Op::NotIn, Value::Ip(a), Lit::Cidr(n, l)) => !cidr_contains(*n, *l, *a),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn precedence_or_binds_tighter() {
        // a && b || c  ==  a && (b || c)
        let e = parse(r#"x == 1 && y == 2 || z == 3"#).unwrap();
        assert!(matches!(&e, Expr::And(v) if v.len() == 2 && matches!(v[1], Expr::Or(_))));
        let e = parse(r#"x == 1 || y == 2 && z == 3"#).unwrap();
        assert!(matches!(&e, Expr::And(v) if v.len() == 2 && matches!(v[0], Expr::Or(_))));
    }

    #[test]
    fn literals() {
        let e = parse(r##"a == "q\"\\" && b ~ r#"\d"# && c in 10.1.0.0/16 && d == 0x1f && e == 010 && f in fd00::/8 && g not  in 1.2.3.4/32 && h == ::1"##).unwrap();
        let Expr::And(v) = e else { panic!() };
        let rhs: Vec<&Lit> = v
            .iter()
            .map(|x| match x {
                Expr::Pred(p) => &p.rhs,
                _ => panic!(),
            })
            .collect();
        assert_eq!(*rhs[0], Lit::Str("q\"\\".into()));
        assert_eq!(*rhs[1], Lit::Str("\\d".into()));
        assert!(matches!(rhs[2], Lit::Cidr(_, 16)));
        assert_eq!(*rhs[3], Lit::Int(31));
        assert_eq!(*rhs[4], Lit::Int(8));
        assert!(matches!(rhs[5], Lit::Cidr(_, 8)));
        assert!(matches!(rhs[7], Lit::Ip(_)));
        assert!(parse("a in 10.0.0.1/8").is_err());
        assert!(parse(r#"a == "\d""#).is_err());
        assert!(parse(r#"(a == "x""#).is_err());
        assert!(parse(r#"upper(a) == "x""#).is_err());
    }

    #[test]
    fn evaluation() {
        let ctx = f(&[
            ("h", Value::Str("A".into())),
            ("h", Value::Str("b".into())),
            ("p", Value::Int(8443)),
        ]);
        let t = |s: &str| eval(&parse(s).unwrap(), &ctx).unwrap();
        assert!(t(r#"any(lower(h)) == "a""#));
        assert!(!t(r#"lower(h) == "a""#));
        assert!(t(r#"lower(h) ~ "^[ab]$""#));
        assert!(!t(r#"missing != "x""#));
        assert!(t(r#"!(missing == "x")"#));
        assert!(t(r#"p >= 8000 && p < 9000"#));
        assert!(!t(r#"p == 1 || p == 2"#));
    }
}
