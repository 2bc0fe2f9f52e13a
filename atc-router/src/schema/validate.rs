//! Semantic checks of a parsed expression against a schema (docs/language.md "Schemas and field
//! names").
//!
//! Per predicate, in this order, the first failure wins: unknown field; LHS/RHS type mismatch;
//! `lower()` on a non-String field; operator not defined for the type; and, last, a `lower()`
//! comparison with a literal that has uppercase letters (it could never match).

use crate::error::{excerpt, ExprError, ExprErrorKind};
use crate::language::{Op, Predicate};
use crate::language::{Parsed, PredicateSpans};
use crate::schema::value::{Type, Value};
use crate::schema::Schema;

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
    let expected = rhs_type(ty, p.op);
    let found = p.rhs.ty();
    if found != expected {
        let msg = if matches!(p.op, Op::In | Op::NotIn) && ty == Type::IpAddr {
            format!(
                "`{}` needs a CIDR on the right (such as 10.0.0.0/8), found {}",
                p.op,
                describe(&p.rhs)
            )
        } else {
            format!(
                "type mismatch: `{field}` is {} field, but the value is {}",
                with_article(ty),
                describe(&p.rhs)
            )
        };
        return Err(err(&spans.rhs, msg));
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
    if !operator_allowed(p.op, ty) {
        return Err(err(
            &spans.op,
            format!(
                "operator `{}` is not defined for {ty} fields; {ty} fields allow {}",
                p.op,
                allowed_operators(ty)
            ),
        ));
    }
    if let (true, Value::String(lit)) = (p.lhs.lower(), &p.rhs) {
        let compares_text = matches!(p.op, Op::Equals | Op::Prefix | Op::Postfix | Op::Contains);
        if compares_text && lit.to_lowercase() != *lit {
            return Err(err(
                &spans.rhs,
                format!(
                    "this can never match: lower() lowercases `{field}`, but the value has \
                     uppercase letters; write it in lowercase: {}",
                    excerpt(&Value::String(lit.to_lowercase()).to_string())
                ),
            ));
        }
    }
    Ok(())
}

/// The literal type an operator expects for a field type.
pub(crate) fn rhs_type(field: Type, op: Op) -> Type {
    match (field, op) {
        (Type::IpAddr, Op::In | Op::NotIn) => Type::IpCidr,
        (t, _) => t,
    }
}

/// docs/language.md "Types and operators": which operators each type has.
pub(crate) fn operator_allowed(op: Op, ty: Type) -> bool {
    match op {
        Op::Equals | Op::NotEquals => true,
        Op::Regex | Op::Prefix | Op::Postfix | Op::Contains => ty == Type::String,
        Op::Greater | Op::GreaterOrEqual | Op::Less | Op::LessOrEqual => ty == Type::Int,
        Op::In | Op::NotIn => ty == Type::IpAddr,
    }
}

fn allowed_operators(ty: Type) -> String {
    Op::ALL
        .iter()
        .filter(|op| operator_allowed(**op, ty))
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
