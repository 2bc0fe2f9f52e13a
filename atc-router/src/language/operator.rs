//! The comparison operators: what each is called and which field types it is defined for.
//!
//! What an operator *does* is spread over the stages by design (evaluation in
//! `compile/eval.rs` and `reference.rs`, index keys in `index/requirement.rs`, implication in
//! `lint/implication.rs`), each an exhaustive `match` on [`Op`]: adding a variant makes the
//! compiler list every place that must handle it. Invariant: no `match` that decides what an
//! operator means has a catch-all arm (a few that only choose among operators already decided
//! do: the set test and the recorded text in `compile/eval.rs`, and `reference.rs`'s arm for the
//! type combinations validation rules out, which the equivalence property covers).

use std::fmt;

use crate::value::Type;

/// Declares [`Op`], [`Op::ALL`] and [`Op::symbol`] from one list, so that no operator can be
/// added to the enum and forgotten in `ALL`. The lists of operators that are not an exhaustive
/// `match` (the fuzz dictionary, `docs/language.md`, the generators; `docs/architecture.md`,
/// "Where a change belongs") are checked against `ALL` by `atc-router/tests/change_map.rs`.
macro_rules! operators {
    ($($(#[$meta:meta])* $variant:ident => $symbol:literal,)+) => {
        /// A comparison operator.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Op {
            $($(#[$meta])* $variant,)+
        }

        impl Op {
            /// Every operator, in the order declared. Append only: a program image stores an
            /// operator as its place here (`compile/program_image.rs`).
            pub const ALL: [Op; [$($symbol),+].len()] = [$(Op::$variant),+];

            /// The operator as written in expressions.
            pub fn symbol(self) -> &'static str {
                match self {
                    $(Op::$variant => $symbol,)+
                }
            }
        }
    };
}

operators! {
    /// `==`
    Equals => "==",
    /// `!=`
    NotEquals => "!=",
    /// `~`: the regex matches somewhere in the value.
    Regex => "~",
    /// `^=`: starts with.
    Prefix => "^=",
    /// `=^`: ends with.
    Postfix => "=^",
    /// `>`
    Greater => ">",
    /// `>=`
    GreaterOrEqual => ">=",
    /// `<`
    Less => "<",
    /// `<=`
    LessOrEqual => "<=",
    /// `in`: the address is in the network, or the value is an element of the set.
    In => "in",
    /// `not in`: the negation of `in` for each value.
    NotIn => "not in",
    /// `contains`: the value has the literal as a substring.
    Contains => "contains",
}

impl Op {
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
