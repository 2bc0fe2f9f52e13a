//! Semantic checks of a parsed expression against a schema (docs/language.md "Schemas and field
//! names").
//!
//! Per predicate, in this order, the first failure wins: unknown field; LHS/RHS type mismatch
//! (for a set, the first element of another type; `in` on a String or Int field without a
//! set); `lower()` on a non-String field; operator not defined for the type; and, last, a
//! `lower()` comparison with a literal (or, for `in`, an element) that has uppercase letters
//! (it could never match).

use crate::error::{excerpt, ExprError, ExprErrorKind};
use crate::language::{Op, Predicate, Rhs};
use crate::language::{Parsed, PredicateSpans};
use crate::schema::Schema;
use crate::value::{Type, Value};

/// Checks every predicate; returns the fields the expression uses, in order of first use.
pub fn validate(source: &str, parsed: &Parsed, schema: &Schema) -> Result<Vec<String>, ExprError> {
    let mut fields: Vec<String> = Vec::new();
    for (p, spans) in parsed.expr.predicates().into_iter().zip(&parsed.spans) {
        check_predicate(source, p, spans, schema)?;
        if !fields.contains(&p.lhs.field) {
            fields.push(p.lhs.field.clone());
        }
    }
    Ok(fields)
}

fn check_predicate(
    source: &str,
    p: &Predicate,
    spans: &PredicateSpans,
    schema: &Schema,
) -> Result<(), ExprError> {
    let err = |span: &std::ops::Range<usize>, msg: String| {
        ExprError::new(ExprErrorKind::Semantic, source, span.clone(), msg)
    };
    let Some(ty) = schema.field_type(&p.lhs.field) else {
        return Err(err(
            &spans.field,
            format!(
                "unknown field `{}`: it is not in the schema",
                excerpt(&p.lhs.field)
            ),
        ));
    };
    // Names and literals are quoted through `excerpt`: they can be most of a 1 MiB expression.
    let field = excerpt(&p.lhs.field);
    match &p.rhs {
        Rhs::Value(v) => {
            let expected = rhs_type(ty, p.op);
            if v.ty() != expected {
                let msg = if matches!(p.op, Op::In | Op::NotIn) && ty == Type::IpAddr {
                    format!(
                        "`{}` needs a CIDR (such as 10.0.0.0/8) or a set on the right, found {}",
                        p.op,
                        describe(v)
                    )
                } else {
                    format!(
                        "type mismatch: `{field}` is {} field, but the value is {}",
                        with_article(ty),
                        describe(v)
                    )
                };
                return Err(err(&spans.rhs, msg));
            }
            if matches!(p.op, Op::In | Op::NotIn) && matches!(ty, Type::String | Type::Int) {
                return Err(err(
                    &spans.rhs,
                    format!(
                        "`{}` on {} field needs a set on the right (such as [{}]), found {}",
                        p.op,
                        with_article(ty),
                        excerpt(&v.to_string()),
                        describe(v)
                    ),
                ));
            }
        }
        Rhs::Set(elements) => {
            let fits = |e: &Value| e.ty() == ty || (ty == Type::IpAddr && e.ty() == Type::IpCidr);
            if let Some(i) = elements.iter().position(|e| !fits(e)) {
                let msg = if ty == Type::IpAddr {
                    format!(
                        "type mismatch: `{field}` is an IpAddr field, so the set holds IP \
                         addresses and CIDRs, but this element is {}",
                        describe(&elements[i])
                    )
                } else {
                    format!(
                        "type mismatch: `{field}` is {} field, but this element of the set is {}",
                        with_article(ty),
                        describe(&elements[i])
                    )
                };
                return Err(err(element_span(spans, i), msg));
            }
        }
    }
    if p.lhs.lower() && ty != Type::String {
        return Err(err(
            &spans.lhs,
            format!(
                "lower() applies only to String fields, and `{field}` is {} field",
                with_article(ty)
            ),
        ));
    }
    if !p.op.applies_to(ty) {
        return Err(err(
            &spans.op,
            format!(
                "operator `{}` is not defined for {ty} fields; {ty} fields allow {}",
                p.op,
                allowed_operators(ty)
            ),
        ));
    }
    // Whether a lowercased value is compared with the literal's text, so that an uppercase
    // letter in it can never match. Exhaustive, so that a new operator is decided here too.
    let compares_text = match p.op {
        Op::Equals | Op::Prefix | Op::Postfix | Op::Contains | Op::In => true,
        Op::NotEquals
        | Op::Regex
        | Op::Greater
        | Op::GreaterOrEqual
        | Op::Less
        | Op::LessOrEqual
        | Op::NotIn => false,
    };
    if p.lhs.lower() && compares_text {
        for (i, lit) in p.rhs.values().iter().enumerate() {
            let Value::String(lit) = lit else { continue };
            if lit.to_lowercase() != *lit {
                let (what, span) = match p.rhs {
                    Rhs::Value(_) => ("the value", &spans.rhs),
                    Rhs::Set(_) => ("this element", element_span(spans, i)),
                };
                return Err(err(
                    span,
                    format!(
                        "this can never match: lower() lowercases `{field}`, but {what} has \
                         uppercase letters; write it in lowercase: {}",
                        excerpt(&Value::String(lit.to_lowercase()).to_string())
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Where element `i` of a predicate's set is (the whole set for spans that do not list its
/// elements).
fn element_span(spans: &PredicateSpans, i: usize) -> &std::ops::Range<usize> {
    spans.elements.get(i).unwrap_or(&spans.rhs)
}

/// The literal type an operator expects for a field type.
pub(crate) fn rhs_type(field: Type, op: Op) -> Type {
    match (field, op) {
        (Type::IpAddr, Op::In | Op::NotIn) => Type::IpCidr,
        (t, _) => t,
    }
}

/// docs/language.md "Types and operators": which operators each type has.
fn allowed_operators(ty: Type) -> String {
    Op::ALL
        .iter()
        .filter(|op| op.applies_to(ty))
        .map(|op| op.symbol())
        .collect::<Vec<_>>()
        .join(", ")
}

fn with_article(ty: Type) -> &'static str {
    match ty {
        Type::String => "a String",
        Type::Int => "an Int",
        Type::IpAddr => "an IpAddr",
        Type::IpCidr => "an IpCidr",
    }
}

fn describe(v: &Value) -> String {
    let kind = match v.ty() {
        Type::String => "a String",
        Type::Int => "an Int",
        Type::IpAddr => "an IP address",
        Type::IpCidr => "a CIDR",
    };
    format!("{kind} ({})", excerpt(&v.to_string()))
}
