//! Helpers shared by the fuzz targets of atc-router (see `fuzz/README.md`).
//!
//! Invariants the targets rely on:
//! - Everything here is deterministic in its input: a crash reproduces from its artifact alone
//!   (no global state survives between runs of a target; schemas are built per input).
//! - The fixed schema ([`gateway_schema`]) is Kong's HTTP fields (the core's list, which the
//!   docs/workload.md tables are written against) plus one `IpCidr` field, so all four field
//!   types and both exact and wildcard names are reachable from text input.

use std::sync::Arc;

use atc_router::request::http_schema_with;
use atc_router::{Limits, Schema, Type};

/// The checks shared with the property tests (`testkit/src/check.rs`): errors are well-formed,
/// and printed trees re-parse under limits loose enough for their print.
pub use atc_testkit::check::{check_expr_error, reparse_limits};

/// The `IpCidr` field added to Kong's HTTP fields (no workload route uses one).
pub const CIDR_FIELD: &str = "net.src.cidr";

/// Kong's HTTP fields ([`atc_router::request::HTTP_FIELDS`]) plus [`CIDR_FIELD`], with the
/// given limits.
pub fn gateway_schema(limits: Limits) -> Schema {
    let mut s = http_schema_with(limits);
    s.add_field(CIDR_FIELD, Type::IpCidr)
        .expect("not one of Kong's HTTP fields");
    s
}

/// [`gateway_schema`] with default limits, shared.
pub fn shared_gateway_schema() -> Arc<Schema> {
    Arc::new(gateway_schema(Limits::default()))
}
