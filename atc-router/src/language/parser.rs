//! Text → [`Expr`], with the lexical rules of docs/language.md "Text" and the precedence of
//! docs/language.md "Grammar and precedence".
//!
//! Invariants a change must keep:
//! - Nothing recurses deeper than the nesting limit: `check_nesting` rejects deep inputs before
//!   pest (a recursive-descent parser) sees them, and `&&`/`||` chains are read as flat lists.
//! - Every error is worded for a person: pest's rule names never reach a message
//!   (see `syntax_error.rs`).
//! - Predicates are numbered in textual order; [`Parsed::spans`] is indexed by that number.
//! - A well-formed text is read by the fast reader (`fast_reader.rs`), which must give exactly
//!   what the pest reader (`pest_reader.rs`) gives; anything it declines, every error
//!   included, goes through pest.

use crate::error::{ExprError, ExprErrorKind};
use crate::language::Expr;
use crate::limits::Limits;

pub use super::parsed::{Parsed, PredicateSpans};

/// Stack pest's rules need for an expression at [`Limits::HARD_MAX_DEPTH`], with a margin (about
/// 2 KiB per level in a release build, several times that in a debug one).
const PEST_STACK: usize = if cfg!(debug_assertions) {
    8 * 1024 * 1024
} else {
    1024 * 1024
};

/// Parses an expression with the default [`Limits`].
///
/// ```
/// use atc_router::{parse, Expr};
/// let e = parse(r#"http.host == "a.com" && http.path ^= "/v1" || http.path ^= "/v2""#).unwrap();
/// // `||` binds tighter than `&&`.
/// assert!(matches!(&e, Expr::And(c) if matches!(c[1], Expr::Or(_))));
/// assert_eq!(parse(&e.to_string()).unwrap(), e);
/// ```
pub fn parse(source: &str) -> Result<Expr, ExprError> {
    parse_with_limits(source, &Limits::default()).map(|p| p.expr)
}

/// Parses an expression, keeping predicate positions.
pub fn parse_with_limits(source: &str, limits: &Limits) -> Result<Parsed, ExprError> {
    if source.len() > limits.max_expression_len {
        return Err(ExprError::new(
            ExprErrorKind::Limit,
            source,
            limits.max_expression_len..source.len(),
            format!(
                "expression is too long: {} bytes, the limit is {} bytes",
                source.len(),
                limits.max_expression_len
            ),
        ));
    }
    check_nesting(source, limits.depth())?;
    let (expr, spans) = match super::fast_reader::parse(source) {
        Some(read) => read,
        // pest's generated rules recurse several frames per nesting level and cannot be guarded
        // level by level: room for the deepest expression the limits let through.
        None => {
            crate::stack::with_room(PEST_STACK, || super::pest_reader::parse_with_pest(source))?
        }
    };
    check_predicate_count(source, &spans, limits.max_predicates)?;
    Ok(Parsed { expr, spans })
}

/// docs/language.md "Errors": at most `max` predicates, each element of a set counting as one.
/// The error points at the predicate, or the element of a set, that goes past the limit.
fn check_predicate_count(
    source: &str,
    spans: &[PredicateSpans],
    max: usize,
) -> Result<(), ExprError> {
    if spans.len() <= max && spans.iter().all(|s| s.elements.is_empty()) {
        return Ok(());
    }
    let total: usize = spans.iter().map(PredicateSpans::weight).sum();
    if total <= max {
        return Ok(());
    }
    let mut before = 0;
    let mut at = None;
    for s in spans {
        if before + s.weight() > max {
            at = Some(match s.elements.get(max - before) {
                Some(element) => element.clone(),
                None => s.predicate.clone(),
            });
            break;
        }
        before += s.weight();
    }
    let sets = if spans.iter().any(|s| !s.elements.is_empty()) {
        " (each element of a set counts as one)"
    } else {
        ""
    };
    Err(ExprError::new(
        ExprErrorKind::Limit,
        source,
        at.expect("the total is over the limit"),
        format!("too many predicates: {total}{sets}, the limit is {max}"),
    ))
}

/// Rejects nesting deeper than `max` before the recursive parser runs. String contents are
/// skipped, so parentheses inside literals do not count.
fn check_nesting(source: &str, max: usize) -> Result<(), ExprError> {
    let b = source.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'r' if b[i..].starts_with(b"r#\"") => {
                i += 3;
                while i < b.len() && !b[i..].starts_with(b"\"#") {
                    i += 1;
                }
                i += 1;
            }
            b'(' => {
                depth += 1;
                if depth > max {
                    return Err(ExprError::new(
                        ExprErrorKind::Limit,
                        source,
                        i..i + 1,
                        format!("expression is nested too deeply: the limit is {max} levels of parentheses"),
                    ));
                }
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}
