//! A typed value from its text: the one reading of request values given as text, used by the
//! C ABI (`atc_context_add_ip`, batched values) and the `atc-router check --explain` request.
//!
//! Invariant: the text of a value is what the language's literals and the values' `Display`
//! write (a decimal `i64`, an address as `std::net::IpAddr` reads it, a network as
//! `cidr::IpCidr` reads it, with no host bits set), so a value printed and read back is the
//! same value; and an error quotes the text cut to [`crate::error::QUOTED_CHARS`] characters.

use std::fmt;
use std::net::IpAddr;

use crate::error::excerpt;
use crate::value::{IpCidr, Type, Value};

/// Text that is not a value of the type asked for (see [`Value::from_text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueTextError {
    /// The type asked for.
    pub ty: Type,
    /// The text, as an error quotes it ([`crate::error::excerpt`]).
    pub text: String,
    /// Why, when the reader says more than "not a value of the type" (a network's reason).
    pub detail: Option<String>,
}

impl fmt::Display for ValueTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.ty {
            Type::Int => "an integer",
            Type::IpAddr => "an IP address",
            Type::IpCidr => "a CIDR",
            // Every text is a String: never written.
            Type::String => "a string",
        };
        write!(f, "\"{}\" is not {what}", self.text)?;
        match &self.detail {
            Some(d) => write!(f, " ({d})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for ValueTextError {}

impl Value {
    /// The value of type `ty` that `text` writes: a String is the text itself; an Int a
    /// decimal `i64` (`-12`); an IpAddr an IPv4 or IPv6 address (`192.0.2.1`, `2001:db8::1`);
    /// an IpCidr a network without host bits (`10.0.0.0/8`).
    ///
    /// ```
    /// use atc_router::{Type, Value};
    /// assert_eq!(Value::from_text(Type::Int, "443"), Ok(Value::Int(443)));
    /// let err = Value::from_text(Type::IpAddr, "10.0.0.256").unwrap_err();
    /// assert_eq!(err.to_string(), r#""10.0.0.256" is not an IP address"#);
    /// ```
    pub fn from_text(ty: Type, text: &str) -> Result<Value, ValueTextError> {
        let fail = |detail: Option<String>| ValueTextError {
            ty,
            text: excerpt(text),
            detail,
        };
        match ty {
            Type::String => Ok(Value::String(text.to_owned())),
            Type::Int => text.parse().map(Value::Int).map_err(|_| fail(None)),
            Type::IpAddr => text
                .parse::<IpAddr>()
                .map(Value::IpAddr)
                .map_err(|_| fail(None)),
            Type::IpCidr => text
                .parse::<IpCidr>()
                .map(Value::IpCidr)
                .map_err(|e| fail(Some(excerpt(&e.to_string())))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_reads_what_it_prints() {
        for (ty, text) in [
            (Type::String, "a b"),
            (Type::Int, "-9223372036854775808"),
            (Type::IpAddr, "2001:db8::1"),
            (Type::IpCidr, "10.0.0.0/8"),
        ] {
            let v = Value::from_text(ty, text).unwrap();
            assert_eq!(v.ty(), ty);
            assert_eq!(v.to_string().trim_matches('"'), text);
        }
    }

    #[test]
    fn errors_quote_the_text() {
        let e = |ty, t| Value::from_text(ty, t).unwrap_err().to_string();
        assert_eq!(e(Type::Int, "https"), r#""https" is not an integer"#);
        assert_eq!(
            e(Type::IpAddr, "010.0.0.1"),
            r#""010.0.0.1" is not an IP address"#
        );
        assert!(e(Type::IpCidr, "10.0.0.1/8").starts_with(r#""10.0.0.1/8" is not a CIDR ("#));
        assert_eq!(e(Type::Int, &"9".repeat(100)).chars().count(), 64 + 3 + 18);
    }
}
