//! The host Kong routes on: the Host header without its port.

/// The host and port of a Host header value, as Kong's `split_host_port`
/// (`kong/router/transform.lua`) reads it: the text before the first `:` and the number after
/// it, when what follows that `:` is a number to Lua's `tonumber` (decimal, with a sign, a
/// fraction or an exponent, or `0x` hexadecimal, between blanks); otherwise the whole value and
/// no port. The text is not lower-cased (Kong matches `http.host` on it as sent).
///
/// The port is `Some` only when that number is an integer; Kong would pass a fraction on to
/// `net.dst.port` too, which cannot hold it.
///
/// ```
/// use atc_router::request::split_host_port;
/// assert_eq!(split_host_port("Example.com:8443"), ("Example.com", Some(8443)));
/// assert_eq!(split_host_port("example.com"), ("example.com", None));
/// // The first `:` of an IPv6 literal is not followed by a number: no port.
/// assert_eq!(split_host_port("[::1]:8000"), ("[::1]:8000", None));
/// ```
pub fn split_host_port(value: &str) -> (&str, Option<i64>) {
    let Some(colon) = value.find(':') else {
        return (value, None);
    };
    match lua_number(&value[colon + 1..]) {
        Some(port) => (&value[..colon], port),
        None => (value, None),
    }
}

/// What Lua's `tonumber(text)` gives, for the forms a port could take: `None` when it is not a
/// number, `Some(None)` for a number that is not an integer in `i64` range, `Some(Some(n))`.
fn lua_number(text: &str) -> Option<Option<i64>> {
    let text = text.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r'));
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let hex = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"));
    let value = match hex {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            i64::from_str_radix(h, 16).ok()
        }
        Some(_) => return None,
        None => {
            if !decimal_number(digits) {
                return None;
            }
            let is_integer = digits.bytes().all(|b| b.is_ascii_digit());
            if is_integer {
                digits.parse::<i64>().ok()
            } else {
                let f: f64 = digits.parse().ok()?;
                (f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64)
            }
        }
    };
    Some(value.map(|v| if negative { -v } else { v }))
}

/// Whether `s` is `digits [. digits] [e [sign] digits]` with at least one digit before the
/// exponent (`1`, `1.`, `.5`, `2e3`).
fn decimal_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if i < b.len() && b[i] == b'.' {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_goes_when_lua_reads_a_number_after_the_first_colon() {
        assert_eq!(split_host_port("a.com:80"), ("a.com", Some(80)));
        assert_eq!(split_host_port("A.Com:0080"), ("A.Com", Some(80)));
        assert_eq!(split_host_port("a.com: 80 "), ("a.com", Some(80)));
        assert_eq!(split_host_port("a.com:0x50"), ("a.com", Some(80)));
        assert_eq!(split_host_port("a.com:8e1"), ("a.com", Some(80)));
        assert_eq!(split_host_port("a.com:80.5"), ("a.com", None));
        assert_eq!(split_host_port("a.com:"), ("a.com:", None));
        assert_eq!(split_host_port("a.com:http"), ("a.com:http", None));
        assert_eq!(split_host_port("a.com:80:81"), ("a.com:80:81", None));
        assert_eq!(split_host_port("[::1]"), ("[::1]", None));
        assert_eq!(split_host_port(""), ("", None));
        assert_eq!(split_host_port(":443"), ("", Some(443)));
    }
}
