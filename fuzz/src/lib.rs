//! Helpers shared by the fuzz targets of atc-router (see `fuzz/README.md`).
//!
//! Invariants the targets rely on:
//! - Everything here is deterministic in its input: a crash reproduces from its artifact alone
//!   (no global state survives between runs of a target; schemas are built per input).
//! - The fixed schema ([`gateway_schema`]) is the docs/workload.md schema plus one `IpCidr` field, so
//!   all four field types and both exact and wildcard names are reachable from text input.

use std::sync::Arc;

use atc_router::{Limits, Schema, Type};
use atc_workload::{FieldType, SCHEMA};

/// The checks shared with the property tests (`testkit/src/check.rs`): errors are well-formed,
/// and printed trees re-parse under limits loose enough for their print.
pub use atc_testkit::check::{check_expr_error, reparse_limits};

/// The `IpCidr` field added to the workload schema (no workload route uses one).
pub const CIDR_FIELD: &str = "net.src.cidr";

/// The docs/workload.md schema plus [`CIDR_FIELD`], with the given limits.
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
