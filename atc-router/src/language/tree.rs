//! The syntax tree of an expression, and its printer.
//!
//! Invariant: for every tree the parser can produce, `parse(tree.to_string()) == tree`. `&&` and
//! `||` are n-ary with at least two children; a parenthesised group is *not* flattened into its
//! parent, which is why the printer parenthesises every compound child. Positions are kept
//! outside the tree (see [`crate::language::Parsed`]) so that trees compare by meaning.

use std::fmt;

use super::operator::Op;
use crate::value::Value;

/// A boolean combination of predicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// All children hold (`a && b && c`). At least two children.
    And(Vec<Expr>),
    /// At least one child holds (`a || b || c`). At least two children.
    Or(Vec<Expr>),
    /// `!( … )`.
    Not(Box<Expr>),
    /// One comparison: the leaf of an expression.
    Predicate(Predicate),
}

/// `lhs op rhs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    /// The field, with any transformations.
    pub lhs: Lhs,
    /// The comparison.
    pub op: Op,
    /// The literal it compares with: one value, or a set after `in` / `not in`.
    pub rhs: Rhs,
}

/// The right side of a predicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rhs {
    /// One literal: `"a.example"`, `443`, `10.0.0.0/8`.
    Value(Value),
    /// A set literal `[a, b, …]`, only after `in` and `not in`: the elements in the order
    /// written, duplicates included. The parser guarantees at least one element, and elements
    /// of one kind: all strings, all integers, or all addresses and networks (which may mix).
    Set(Vec<Value>),
}

impl Rhs {
    /// The single literal, or `None` for a set.
    pub fn value(&self) -> Option<&Value> {
        match self {
            Rhs::Value(v) => Some(v),
            Rhs::Set(_) => None,
        }
    }

    /// The literals: the one value, or the elements of a set.
    pub fn values(&self) -> &[Value] {
        match self {
            Rhs::Value(v) => std::slice::from_ref(v),
            Rhs::Set(elements) => elements,
        }
    }

    /// Whether this is a set literal.
    pub fn is_set(&self) -> bool {
        matches!(self, Rhs::Set(_))
    }
}

impl From<Value> for Rhs {
    fn from(v: Value) -> Rhs {
        Rhs::Value(v)
    }
}

impl fmt::Display for Rhs {
    /// A value as [`Value`] prints it; a set as `[a, b]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rhs::Value(v) => write!(f, "{v}"),
            Rhs::Set(elements) => {
                f.write_str("[")?;
                for (i, e) in elements.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// A field wrapped in transformations, outermost first: `lower(any(f))` is
/// `transforms == [Lower, Any]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lhs {
    /// The field's name, as written.
    pub field: String,
    /// Transformations, outermost first (`lower(any(f))` is `[Lower, Any]`).
    pub transforms: Vec<Transform>,
}

impl Lhs {
    /// Whether the field's values are lowercased before comparison.
    pub fn lower(&self) -> bool {
        self.transforms.contains(&Transform::Lower)
    }

    /// Whether one value satisfying the predicate is enough (otherwise all must).
    pub fn any(&self) -> bool {
        self.transforms.contains(&Transform::Any)
    }
}

/// A transformation of a field's values before comparing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    /// `lower(f)`: compare the value lowercased.
    Lower,
    /// `any(f)`: the predicate holds if it holds for one of the values (without it, for
    /// every value).
    Any,
}

impl Transform {
    /// The name as written in expressions.
    pub fn name(self) -> &'static str {
        match self {
            Transform::Lower => "lower",
            Transform::Any => "any",
        }
    }
}

impl Expr {
    /// The predicates in textual (left-to-right) order.
    pub fn predicates(&self) -> Vec<&Predicate> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match e {
                Expr::And(c) | Expr::Or(c) => stack.extend(c.iter().rev()),
                Expr::Not(inner) => stack.push(inner),
                Expr::Predicate(p) => out.push(p),
            }
        }
        out
    }
}

impl fmt::Display for Lhs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.transforms {
            write!(f, "{}(", t.name())?;
        }
        f.write_str(&self.field)?;
        for _ in &self.transforms {
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.lhs, self.op, self.rhs)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::And(children) => write_chain(f, children, " && "),
            Expr::Or(children) => write_chain(f, children, " || "),
            Expr::Not(inner) => crate::stack::guarded(|| write!(f, "!({inner})")),
            Expr::Predicate(p) => write!(f, "{p}"),
        }
    }
}

fn write_chain(f: &mut fmt::Formatter<'_>, children: &[Expr], sep: &str) -> fmt::Result {
    for (i, child) in children.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        crate::stack::guarded(|| match child {
            Expr::And(_) | Expr::Or(_) => write!(f, "({child})"),
            _ => write!(f, "{child}"),
        })?;
    }
    Ok(())
}
