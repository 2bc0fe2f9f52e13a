//! Typed values: the literals of expressions and the values a request puts in a context.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

pub use cidr::IpCidr;

/// The type of a schema field (docs/language.md "Types and operators").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    /// Text.
    String,
    /// A signed 64-bit integer.
    Int,
    /// An IPv4 or IPv6 address.
    IpAddr,
    /// An IPv4 or IPv6 network (address and prefix length).
    IpCidr,
}

impl Type {
    /// Every type, in the order of the C ABI's codes (`ATC_TYPE_*`).
    pub const ALL: [Type; 4] = [Type::String, Type::Int, Type::IpAddr, Type::IpCidr];

    /// The name used by the Lua and C APIs: `"String"`, `"Int"`, `"IpAddr"`, `"IpCidr"`.
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "String",
            Type::Int => "Int",
            Type::IpAddr => "IpAddr",
            Type::IpCidr => "IpCidr",
        }
    }

    /// The inverse of [`Type::name`].
    pub fn from_name(name: &str) -> Option<Type> {
        Some(match name {
            "String" => Type::String,
            "Int" => Type::Int,
            "IpAddr" => Type::IpAddr,
            "IpCidr" => Type::IpCidr,
            _ => return None,
        })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A typed value. As a literal it prints in the language's syntax (strings quoted and escaped,
/// IPv6 without embedded IPv4), so printing and re-parsing gives the same value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// Text.
    String(String),
    /// A signed 64-bit integer.
    Int(i64),
    /// An IPv4 or IPv6 address.
    IpAddr(IpAddr),
    /// An IPv4 or IPv6 network.
    IpCidr(IpCidr),
}

impl Value {
    /// The value's type.
    pub fn ty(&self) -> Type {
        match self {
            Value::String(_) => Type::String,
            Value::Int(_) => Type::Int,
            Value::IpAddr(_) => Type::IpAddr,
            Value::IpCidr(_) => Type::IpCidr,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}
impl From<IpAddr> for Value {
    fn from(a: IpAddr) -> Value {
        Value::IpAddr(a)
    }
}
impl From<IpCidr> for Value {
    fn from(c: IpCidr) -> Value {
        Value::IpCidr(c)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => write_string_literal(f, s),
            Value::Int(i) => write!(f, "{i}"),
            Value::IpAddr(a) => write_ip(f, a),
            Value::IpCidr(c) => {
                write_ip(f, &c.first_address())?;
                write!(f, "/{}", c.network_length())
            }
        }
    }
}

pub(crate) fn write_string_literal(f: &mut impl fmt::Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

/// IPv6 is written in pure hex with the longest zero run compressed: std's `Display` writes
/// IPv4-mapped addresses with a dotted tail, which the language does not accept.
fn write_ip(f: &mut fmt::Formatter<'_>, addr: &IpAddr) -> fmt::Result {
    match addr {
        IpAddr::V4(a) => write!(f, "{a}"),
        IpAddr::V6(a) => write_ipv6(f, a),
    }
}

fn write_ipv6(f: &mut fmt::Formatter<'_>, addr: &Ipv6Addr) -> fmt::Result {
    let seg = addr.segments();
    // Longest run of zero segments (length ≥ 2), first one on ties, as RFC 5952 recommends.
    let (mut best, mut best_len, mut run, mut run_len) = (0, 0, 0, 0);
    for (i, s) in seg.iter().enumerate() {
        if *s == 0 {
            if run_len == 0 {
                run = i;
            }
            run_len += 1;
            if run_len > best_len {
                best = run;
                best_len = run_len;
            }
        } else {
            run_len = 0;
        }
    }
    if best_len < 2 {
        let parts: Vec<String> = seg.iter().map(|s| format!("{s:x}")).collect();
        return f.write_str(&parts.join(":"));
    }
    let head: Vec<String> = seg[..best].iter().map(|s| format!("{s:x}")).collect();
    let tail: Vec<String> = seg[best + best_len..]
        .iter()
        .map(|s| format!("{s:x}"))
        .collect();
    write!(f, "{}::{}", head.join(":"), tail.join(":"))
}

/// Addresses of the other family are never inside.
pub(crate) fn cidr_contains(c: &cidr::IpCidr, a: &IpAddr) -> bool {
    match (c, a) {
        (cidr::IpCidr::V4(c), IpAddr::V4(a)) => c.contains(a),
        (cidr::IpCidr::V6(c), IpAddr::V6(a)) => c.contains(a),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_prints_without_dotted_tail() {
        let a: IpAddr = "::ffff:1.2.3.4".parse().unwrap();
        assert_eq!(Value::IpAddr(a).to_string(), "::ffff:102:304");
        let a: IpAddr = "2001:db8:0:0:1:0:0:1".parse().unwrap();
        assert_eq!(Value::IpAddr(a).to_string(), "2001:db8::1:0:0:1");
        let a: IpAddr = "::".parse().unwrap();
        assert_eq!(Value::IpAddr(a).to_string(), "::");
        let a: IpAddr = "1:2:3:4:5:6:7:8".parse().unwrap();
        assert_eq!(Value::IpAddr(a).to_string(), "1:2:3:4:5:6:7:8");
    }

    #[test]
    fn strings_print_escaped() {
        let v = Value::String("a\"b\\c\nd\re\tf".into());
        assert_eq!(v.to_string(), r#""a\"b\\c\nd\re\tf""#);
    }
}
