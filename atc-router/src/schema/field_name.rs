//! The rule for field names, in one place (docs/language.md "Schemas and field names"): what
//! schemas and expressions take, and the stricter rule of the names a request can have.
//!
//! - [`NameRule::Grammar`] is Kong's grammar of a field, `ident = ASCII_ALPHA ~
//!   (ASCII_ALPHANUMERIC | "_" | ".")*`. The core takes every such name, as Kong's library does,
//!   `a..b` and `http.headers.` included (the wildcard `http.headers.*` covers the latter): a
//!   route that Kong takes must not be refused here.
//! - [`NameRule::Request`] is the grammar with no segment between dots empty: the names a
//!   request can have (a header has a name, and no field of Kong's has an empty segment). A
//!   schema or route using another name is a mistake, but one the core cannot refuse without
//!   refusing what Kong takes; so the rule is applied where a product can decide. The
//!   `atc-router check` command holds schema files, expressions (its `bad-field` error,
//!   docs/cli.md) and `--explain` requests to it.
//!
//! Invariants: every name [`NameRule::Request`] takes, [`NameRule::Grammar`] takes. A
//! declaration ([`check_declared_name`]) is a name, or `prefix.*` with `prefix` held to the same
//! rule. The check on the request path ([`is_identifier`], a wildcard name's lookup) is one pass
//! over the bytes; the reasons ([`NameFault`]) are worked out only for a name that fails.

use crate::error::{excerpt, NameError, NameFault};

/// Which names a check takes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameRule {
    /// Kong's grammar: an ASCII letter, then ASCII letters, digits, `_` or `.`. What schemas
    /// and expressions take.
    Grammar,
    /// The grammar, and no empty segment (`a..b`, `http.headers.`): a name a request can have.
    Request,
}

/// Checks a field name (no `.*`: see [`check_declared_name`]) against `rule`.
///
/// ```
/// use atc_router::{check_field_name, NameFault, NameRule};
/// // Kong's grammar takes a name with an empty segment; no request has such a field.
/// assert!(check_field_name("http.headers.", NameRule::Grammar).is_ok());
/// let e = check_field_name("http.headers.", NameRule::Request).unwrap_err();
/// assert_eq!(e.fault, NameFault::EndsWithDot);
/// assert_eq!(e.name, "http.headers.");
/// ```
pub fn check_field_name(name: &str, rule: NameRule) -> Result<(), NameError> {
    match fault(name, rule) {
        None => Ok(()),
        Some(fault) => Err(NameError {
            name: excerpt(name),
            fault,
        }),
    }
}

/// Checks a schema's declaration: a field name, or a wildcard `prefix.*` whose prefix is one.
/// The error quotes the declaration as written.
pub fn check_declared_name(name: &str, rule: NameRule) -> Result<(), NameError> {
    let base = name.strip_suffix(".*").unwrap_or(name);
    match fault(base, rule) {
        None => Ok(()),
        Some(fault) => Err(NameError {
            name: excerpt(name),
            fault,
        }),
    }
}

/// Whether `s` is in Kong's grammar ([`NameRule::Grammar`]).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic())
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// What is wrong with `name` under `rule`, if anything; the first fault from the left.
fn fault(name: &str, rule: NameRule) -> Option<NameFault> {
    if !is_identifier(name) {
        return Some(match name.bytes().next() {
            None => NameFault::Empty,
            Some(c) if !c.is_ascii_alphabetic() => NameFault::NotLetterFirst,
            Some(_) => NameFault::BadCharacter,
        });
    }
    match rule {
        NameRule::Grammar => None,
        NameRule::Request if name.contains("..") => Some(NameFault::EmptySegment),
        NameRule::Request if name.ends_with('.') => Some(NameFault::EndsWithDot),
        NameRule::Request => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault_of(name: &str, rule: NameRule) -> Option<NameFault> {
        check_field_name(name, rule).err().map(|e| e.fault)
    }

    #[test]
    fn both_rules_take_the_names_of_kongs_fields() {
        for name in [
            "a",
            "http.headers.x_tenant",
            "http.path.segments.1_2",
            "http.path.segments.len",
            "a1.b2",
            "A_",
        ] {
            assert_eq!(fault_of(name, NameRule::Grammar), None, "{name}");
            assert_eq!(fault_of(name, NameRule::Request), None, "{name}");
        }
    }

    #[test]
    fn kongs_grammar_takes_an_empty_segment_and_a_request_name_does_not() {
        // The disputed cases: `ident = ASCII_ALPHA ~ (ASCII_ALPHANUMERIC | "_" | ".")*` takes
        // them, so the core does (a wildcard covers `http.headers.`); no request has them.
        for name in ["a..b", "http.headers.", "a.", "a..", "http.headers.a..b"] {
            assert_eq!(fault_of(name, NameRule::Grammar), None, "{name}");
        }
        assert_eq!(
            fault_of("a..b", NameRule::Request),
            Some(NameFault::EmptySegment)
        );
        assert_eq!(
            fault_of("http.headers.a..b", NameRule::Request),
            Some(NameFault::EmptySegment)
        );
        assert_eq!(
            fault_of("a..", NameRule::Request),
            Some(NameFault::EmptySegment),
            "the first fault from the left"
        );
        assert_eq!(
            fault_of("http.headers.", NameRule::Request),
            Some(NameFault::EndsWithDot)
        );
    }

    #[test]
    fn names_outside_the_grammar_are_refused_by_both_rules_alike() {
        for (name, fault) in [
            ("", NameFault::Empty),
            ("1a", NameFault::NotLetterFirst),
            (".x", NameFault::NotLetterFirst),
            ("_a", NameFault::NotLetterFirst),
            ("é", NameFault::NotLetterFirst),
            ("a-b", NameFault::BadCharacter),
            ("a.b c", NameFault::BadCharacter),
            ("http.headers.*", NameFault::BadCharacter),
        ] {
            for rule in [NameRule::Grammar, NameRule::Request] {
                assert_eq!(fault_of(name, rule), Some(fault), "{name:?} {rule:?}");
            }
        }
    }

    #[test]
    fn a_declaration_may_end_in_a_wildcard() {
        for rule in [NameRule::Grammar, NameRule::Request] {
            assert_eq!(check_declared_name("http.headers.*", rule), Ok(()));
            assert_eq!(check_declared_name("http.host", rule), Ok(()));
        }
        let fault = |name, rule| check_declared_name(name, rule).err().map(|e| e.fault);
        assert_eq!(fault(".*", NameRule::Grammar), Some(NameFault::Empty));
        assert_eq!(
            fault("a.*.*", NameRule::Grammar),
            Some(NameFault::BadCharacter)
        );
        assert_eq!(fault("a..*", NameRule::Grammar), None);
        assert_eq!(
            fault("a..*", NameRule::Request),
            Some(NameFault::EndsWithDot)
        );
        assert_eq!(
            fault("a..b.*", NameRule::Request),
            Some(NameFault::EmptySegment)
        );
    }

    #[test]
    fn the_error_quotes_the_name_and_says_why() {
        let e = check_declared_name("a..*", NameRule::Request).unwrap_err();
        assert_eq!(e.name, "a..*");
        assert_eq!(
            e.to_string(),
            "invalid field name `a..*`: it ends with `.` (the name after the last `.` is empty)"
        );
        let long = format!("a-{}", "b".repeat(500));
        let e = check_field_name(&long, NameRule::Grammar).unwrap_err();
        assert_eq!(e.name, excerpt(&long));
    }
}
