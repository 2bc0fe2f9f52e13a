//! The lexical rules both readers share (docs/language.md "Text"): escapes, addresses and
//! prefix lengths, integers, and the kinds a set may not mix.
//!
//! Invariant: the fast reader and the pest reader decide every literal here, so they cannot
//! disagree on what a literal is.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::value::Value;

/// What `\c` stands for in a string, for the escapes docs/language.md "Text" allows.
#[inline]
pub(super) fn escape(c: u8) -> Option<char> {
    Some(match c {
        b'"' => '"',
        b'\\' => '\\',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// An address as the grammar's loose shape let it through; `None` if it is not one.
#[inline]
pub(super) fn ip_text(text: &str) -> Option<IpAddr> {
    if text.contains(':') {
        text.parse::<Ipv6Addr>().map(IpAddr::V6).ok()
    } else {
        text.parse::<Ipv4Addr>().map(IpAddr::V4).ok()
    }
}

/// How many digits a prefix length may have: two after an IPv4 address, three after IPv6 (so
/// `/08` is 8, but `/008` is refused, as Kong's parser does).
#[inline]
pub(super) fn prefix_digits(addr: &IpAddr) -> usize {
    if addr.is_ipv4() {
        2
    } else {
        3
    }
}

/// An integer from its sign and digits; `None` when the magnitude does not fit in an `i64`.
#[inline]
pub(super) fn int_value(negative: bool, digits: &str, radix: u32) -> Option<i64> {
    let m = i64::from_str_radix(digits, radix).ok()?;
    Some(if negative { -m } else { m })
}

/// The kinds of element a set may not mix (addresses and networks are one kind).
pub(super) fn set_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Int(_) => "an integer",
        Value::IpAddr(_) | Value::IpCidr(_) => "an IP address or CIDR",
    }
}
