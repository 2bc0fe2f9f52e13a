//! The comparison operators: what each is called and which field types it is defined for.
//!
//! What an operator *does* is spread over the stages by design (evaluation in
//! `compile/eval.rs` and `reference.rs`, index keys in `index/requirement.rs`, implication in
//! `lint/implication.rs`), each an exhaustive `match` on [`Op`]: adding a variant makes the
//! compiler list every place that must handle it. Invariant: no `match` on `Op` anywhere in the
//! crate has a catch-all arm.

use std::fmt;

use crate::value::Type;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `==`
    Equals,
    /// `!=`
    NotEquals,
    /// `~`: the regex matches somewhere in the value.
    Regex,
    /// `^=`: starts with.
    Prefix,
    /// `=^`: ends with.
    Postfix,
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
    /// `in`: the address is in the network, or the value is an element of the set.
    In,
    /// `not in`: the negation of `in` for each value.
    NotIn,
    /// `contains`: the value has the literal as a substring.
    Contains,
}

impl Op {
    /// Every operator, in the order of [`Op::symbol`]'s table.
    pub const ALL: [Op; 12] = [
        Op::Equals,
        Op::NotEquals,
        Op::Regex,
        Op::Prefix,
        Op::Postfix,
        Op::Greater,
        Op::GreaterOrEqual,
        Op::Less,
        Op::LessOrEqual,
        Op::In,
        Op::NotIn,
        Op::Contains,
    ];

    /// The operator as written in expressions.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Equals => "==",
            Op::NotEquals => "!=",
            Op::Regex => "~",
            Op::Prefix => "^=",
            Op::Postfix => "=^",
            Op::Greater => ">",
            Op::GreaterOrEqual => ">=",
            Op::Less => "<",
            Op::LessOrEqual => "<=",
            Op::In => "in",
            Op::NotIn => "not in",
            Op::Contains => "contains",
        }
    }

    /// Whether the operator is defined for fields of type `ty` (`docs/language.md`, "Types and
    /// operators").
    pub fn applies_to(self, ty: Type) -> bool {
        match self {
            Op::Equals | Op::NotEquals => true,
            Op::Regex | Op::Prefix | Op::Postfix | Op::Contains => ty == Type::String,
            Op::Greater | Op::GreaterOrEqual | Op::Less | Op::LessOrEqual => ty == Type::Int,
            // A network for IpAddr fields; a set for String, Int and IpAddr fields.
            Op::In | Op::NotIn => ty != Type::IpCidr,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}
