//! An expression resolved against a schema: fields as [`FieldId`]s, string literals shared,
//! regexes compiled. Both the reference evaluator and the indexed matcher evaluate this form.
//!
//! Invariant: a [`Node`] is only built from an expression that passed [`crate::validate`], so
//! every predicate's literal has the type its operator expects for its field.

use std::net::IpAddr;
use std::sync::Arc;

use crate::compile::regex::CompiledRegex;
use crate::compile::regex_cache::RegexSource;
use crate::error::Error;
use crate::error::{ExprError, ExprErrorKind};
use crate::language::Parsed;
use crate::language::{Expr, Op, Rhs};
use crate::limits::Limits;
use crate::schema::names::{FieldId, Holds, Schema};
use crate::value::{IpCidr, Type, Value};

#[derive(Debug)]
pub(crate) enum Node {
    And(Box<[Node]>),
    Or(Box<[Node]>),
    Not(Box<Node>),
    Pred(Pred),
}

#[derive(Debug)]
pub(crate) struct Pred {
    pub field: FieldId,
    pub lower: bool,
    pub any: bool,
    pub op: Op,
    pub lit: Lit,
    /// Set exactly when `op == Op::Regex`.
    pub regex: Option<Arc<CompiledRegex>>,
}

/// A literal; strings are shared so that recording one as a matched value costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lit {
    Str(Arc<str>),
    Int(i64),
    IpAddr(IpAddr),
    IpCidr(IpCidr),
    /// A set literal's elements as written (none of them a set), for `in` / `not in`.
    Set(Arc<[Lit]>),
}

impl Lit {
    fn of(v: &Value) -> Lit {
        match v {
            Value::String(s) => Lit::Str(Arc::from(s.as_str())),
            Value::Int(i) => Lit::Int(*i),
            Value::IpAddr(a) => Lit::IpAddr(*a),
            Value::IpCidr(c) => Lit::IpCidr(*c),
        }
    }
}

/// Where resolving gets field ids from.
pub(crate) enum Fields<'a> {
    /// Registers every wildcard name the expression uses, for a route that is to be added:
    /// the holds keep the names registered until the router has taken them over.
    Acquire(&'a mut Holds),
    /// Registers nothing: for a route the router holds already (its names are registered),
    /// or to check an expression (a name no route uses gets [`FieldId::unused`]).
    Peek(&'a Schema),
    /// Declared fields only, registering nothing: for a route prepared on one of a build's
    /// other threads (`threads.rs`). A wildcard name sets the flag and fails the resolution:
    /// its id depends on the names registered before it, so the building thread resolves that
    /// route again, in list order.
    Declared(&'a Schema, &'a mut bool),
}

impl Fields<'_> {
    fn get(&mut self, name: &str) -> Result<(FieldId, Type), Error> {
        match self {
            Fields::Acquire(holds) => holds.acquire(name),
            Fields::Peek(schema) => schema.resolve(name),
            Fields::Declared(schema, wildcard) => schema.declared_field(name).ok_or_else(|| {
                **wildcard = true;
                Error::Limit(String::new())
            }),
        }
    }
}

/// Builds the resolved form of a validated expression, taking its fields from `fields` and its
/// regexes from `regexes`.
pub(crate) fn resolve(
    source: &str,
    parsed: &Parsed,
    fields: Fields<'_>,
    limits: &Limits,
    regexes: &mut dyn RegexSource,
) -> Result<Node, ExprError> {
    let mut r = Resolver {
        source,
        parsed,
        fields,
        limits,
        regexes,
        next_predicate: 0,
        regex_count: 0,
        regex_bytes: 0,
        bounded: Vec::new(),
    };
    r.node(&parsed.expr)
}

struct Resolver<'a> {
    source: &'a str,
    parsed: &'a Parsed,
    fields: Fields<'a>,
    limits: &'a Limits,
    regexes: &'a mut dyn RegexSource,
    next_predicate: usize,
    regex_count: usize,
    /// Compiled size of the regexes so far, each occurrence counted (an upper bound for those
    /// in `bounded`).
    regex_bytes: usize,
    /// The occurrences counted by a bound of their size, not yet measured.
    bounded: Vec<Arc<CompiledRegex>>,
}

impl Resolver<'_> {
    fn node(&mut self, e: &Expr) -> Result<Node, ExprError> {
        Ok(match e {
            Expr::And(c) => Node::And(self.nodes(c)?),
            Expr::Or(c) => Node::Or(self.nodes(c)?),
            Expr::Not(inner) => Node::Not(Box::new(crate::stack::guarded(|| self.node(inner))?)),
            Expr::Predicate(p) => {
                let spans = &self.parsed.spans[self.next_predicate];
                self.next_predicate += 1;
                let err =
                    |kind, msg: String| ExprError::new(kind, self.source, spans.rhs.clone(), msg);
                let (field, _) = self.fields.get(&p.lhs.field).map_err(|e| {
                    ExprError::new(
                        ExprErrorKind::Limit,
                        self.source,
                        spans.field.clone(),
                        e.to_string(),
                    )
                })?;
                let regex = if p.op == Op::Regex {
                    self.regex_count += 1;
                    if self.regex_count > self.limits.max_regexes {
                        return Err(err(
                            ExprErrorKind::Limit,
                            format!(
                                "too many regexes in one expression (limit: {})",
                                self.limits.max_regexes
                            ),
                        ));
                    }
                    let Rhs::Value(Value::String(src)) = &p.rhs else {
                        unreachable!("validated: `~` has a string literal")
                    };
                    let re = self
                        .regexes
                        .regex(src, self.limits.regex_size_limit)
                        .map_err(|e| regex_error(e, &err))?;
                    self.regex_bytes += re.compiled_size();
                    if re.is_size_bound() {
                        self.bounded.push(re.clone());
                    }
                    if self.regex_bytes > self.limits.regex_total_size_limit {
                        // Bounds may overstate: refuse only on what the automata really weigh.
                        for b in self.bounded.drain(..) {
                            self.regex_bytes =
                                self.regex_bytes - b.compiled_size() + b.exact_compiled_size();
                        }
                    }
                    if self.regex_bytes > self.limits.regex_total_size_limit {
                        return Err(err(
                            ExprErrorKind::Limit,
                            format!(
                                "the regexes of this expression are too large once compiled \
                                 together (limit: {} bytes)",
                                self.limits.regex_total_size_limit
                            ),
                        ));
                    }
                    Some(re)
                } else {
                    None
                };
                Node::Pred(Pred {
                    field,
                    lower: p.lhs.lower(),
                    any: p.lhs.any(),
                    op: p.op,
                    lit: match &p.rhs {
                        Rhs::Value(v) => Lit::of(v),
                        Rhs::Set(elements) => Lit::Set(elements.iter().map(Lit::of).collect()),
                    },
                    regex,
                })
            }
        })
    }

    fn nodes(&mut self, children: &[Expr]) -> Result<Box<[Node]>, ExprError> {
        crate::stack::guarded(|| {
            // Sized up front: collecting a fallible iterator grows a vector and then shrinks
            // it in place, and glibc keeps the shrunk-off tail as a fragment that piles up
            // with route changes until one malloc spends milliseconds merging them.
            let mut out = Vec::with_capacity(children.len());
            for c in children {
                out.push(self.node(c)?);
            }
            Ok(out.into_boxed_slice())
        })
    }
}

fn regex_error(
    e: crate::compile::regex::RegexError,
    err: &impl Fn(ExprErrorKind, String) -> ExprError,
) -> ExprError {
    use crate::compile::regex::RegexError;
    match e {
        RegexError::TooBig(limit) => err(
            ExprErrorKind::Limit,
            format!("regex is too large once compiled (limit: {limit} bytes)"),
        ),
        RegexError::Syntax(text) => {
            // The regex parser draws its own caret over the pattern; keep only its verdict, the
            // caret under the literal is ours.
            let reason = text
                .lines()
                .find_map(|l| l.strip_prefix("error: "))
                .unwrap_or(&text)
                .to_owned();
            err(ExprErrorKind::Semantic, format!("invalid regex: {reason}"))
        }
    }
}

impl Node {
    /// The fields this node uses, each once, in order of first use.
    pub(crate) fn fields(&self, out: &mut Vec<FieldId>) {
        match self {
            Node::And(c) | Node::Or(c) => c.iter().for_each(|n| n.fields(out)),
            Node::Not(inner) => inner.fields(out),
            Node::Pred(p) => {
                if !out.contains(&p.field) {
                    out.push(p.field);
                }
            }
        }
    }

    /// Number of nodes in the tree (one instruction each in a [`crate::compile::program::Program`]).
    pub(crate) fn size(&self) -> usize {
        match self {
            Node::And(c) | Node::Or(c) => 1 + c.iter().map(Node::size).sum::<usize>(),
            Node::Not(inner) => 1 + inner.size(),
            Node::Pred(_) => 1,
        }
    }

    /// Sources of the regexes this node uses (with repeats).
    pub(crate) fn regex_sources(&self, out: &mut Vec<String>) {
        match self {
            Node::And(c) | Node::Or(c) => c.iter().for_each(|n| n.regex_sources(out)),
            Node::Not(inner) => inner.regex_sources(out),
            Node::Pred(p) => {
                if let Some(r) = &p.regex {
                    out.push(r.as_str().to_owned());
                }
            }
        }
    }
}
