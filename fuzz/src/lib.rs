//! Helpers shared by the fuzz targets of atc-router (see `fuzz/README.md`).
//!
//! Invariants the targets rely on:
//! - Everything here is deterministic in its input: a crash reproduces from its artifact alone
//!   (no global state survives between runs of a target; schemas are built per input).
//! - The fixed schema ([`gateway_schema`]) is the WORKLOAD.md schema plus one `IpCidr` field, so
//!   all four field types and both exact and wildcard names are reachable from text input.

pub mod structured;

use std::sync::Arc;

use atc_router::{Limits, Schema, Type};
use atc_workload::{FieldType, SCHEMA};

/// The `IpCidr` field added to the workload schema (no workload route uses one).
pub const CIDR_FIELD: &str = "net.src.cidr";

/// The WORKLOAD.md schema plus [`CIDR_FIELD`], with the given limits.
pub fn gateway_schema(limits: Limits) -> Schema {
    let mut s = Schema::with_limits(limits);
    for (name, ty) in SCHEMA {
        s.add_field(name, workload_type(*ty))
            .expect("the workload schema is valid");
    }
    s.add_field(CIDR_FIELD, Type::IpCidr)
        .expect("not in the workload schema");
    s
}

pub fn workload_type(ty: FieldType) -> Type {
    match ty {
        FieldType::String => Type::String,
        FieldType::Int => Type::Int,
        FieldType::IpAddr => Type::IpAddr,
        FieldType::IpCidr => Type::IpCidr,
    }
}

/// [`gateway_schema`] with default limits, shared.
pub fn shared_gateway_schema() -> Arc<Schema> {
    Arc::new(gateway_schema(Limits::default()))
}

/// Limits loose enough that re-parsing a printed tree is never refused: printing adds
/// parentheses (`a && b || c` prints as `a && (b || c)`) and spaces, so a tree that parsed
/// within the default limits may print longer and deeper. The depth stays under the hard cap.
pub fn reparse_limits() -> Limits {
    Limits {
        max_expression_len: usize::MAX,
        max_predicates: usize::MAX,
        max_depth: Limits::HARD_MAX_DEPTH,
        ..Limits::default()
    }
}

/// Checks what every expression error promises (spec §6): a position inside the source on a
/// character boundary, a 1-based line and column, a non-empty message, and a rendering that
/// does not panic. (Wording is the syntax test suite's business: messages quote user text, so
/// a fuzzer cannot tell a leaked grammar rule name from a field that happens to be named so.)
pub fn check_expr_error(source: &str, e: &atc_router::ExprError) {
    assert!(e.span.start <= e.span.end, "span {:?}", e.span);
    assert!(e.span.end <= source.len(), "span {:?} past the end", e.span);
    assert!(source.is_char_boundary(e.span.start) && source.is_char_boundary(e.span.end));
    assert!(e.line >= 1 && e.column >= 1);
    assert!(!e.message.is_empty());
    let shown = e.to_string();
    assert!(shown.contains(&e.message));
}
