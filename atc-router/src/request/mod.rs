//! A request as Kong's router reads it: the fields of its HTTP and stream subsystems, their
//! types, and how the path, its segments and the host are derived from what a client sent.
//!
//! This is the one definition of those rules in the project: the check command's schemas and
//! `--explain` requests, the C ABI (`atc_kong_field`, `atc_context_add_path`,
//! `atc_http_host`) and the Lua gateway all read them from here, so a route file the command
//! accepts for the `http` schema only uses fields the gateway supplies, with the values Kong
//! gives them. The rules follow Kong's own code (`kong/router/fields.lua`, `kong/router/atc.lua`,
//! `kong/router/utils.lua`, `kong/router/transform.lua`, `kong/tools/uri.lua`); where a function
//! here reproduces one of Kong's, its documentation names it.
//!
//! Invariant: nothing here allocates per request once its output buffers have grown (the path
//! is normalised into a caller's buffer; segments and the host are slices of their input).
//!
//! ```
//! use atc_router::request::{request_path, PathField, Segments};
//!
//! let mut path = Vec::new();
//! request_path(b"/api//v1/./users/%41%2fb/?page=2", &mut path);
//! assert_eq!(path, b"/api/v1/users/A%2Fb/");
//! let path = std::str::from_utf8(&path).unwrap();
//! let segments = Segments::new(path);
//! assert_eq!(segments.len(), 4); // the trailing empty segment is dropped
//! assert_eq!(segments.get(PathField::of("http.path.segments.1_2").unwrap()), Some("v1/users"));
//! ```

mod host;
mod path;

pub use host::split_host_port;
pub use path::{normalize_path, request_path, strip_args, PathField, Segments};

use crate::error::Error;
use crate::limits::Limits;
use crate::schema::Schema;
use crate::value::Type;

/// The fields of Kong's HTTP subsystem (its expressions router), with their types.
pub const HTTP_FIELDS: &[(&str, Type)] = &[
    ("net.protocol", Type::String),
    ("tls.sni", Type::String),
    ("http.method", Type::String),
    ("http.host", Type::String),
    ("http.path", Type::String),
    ("http.path.segments.*", Type::String),
    ("http.headers.*", Type::String),
    ("http.queries.*", Type::String),
    ("net.src.port", Type::Int),
    ("net.dst.port", Type::Int),
    ("http.path.segments.len", Type::Int),
    ("net.src.ip", Type::IpAddr),
    ("net.dst.ip", Type::IpAddr),
];

/// The fields of Kong's stream subsystem (TCP, TLS and UDP routes), with their types.
pub const STREAM_FIELDS: &[(&str, Type)] = &[
    ("net.protocol", Type::String),
    ("tls.sni", Type::String),
    ("net.src.port", Type::Int),
    ("net.dst.port", Type::Int),
    ("net.src.ip", Type::IpAddr),
    ("net.dst.ip", Type::IpAddr),
];

/// Declares `fields` in `schema` (for example [`HTTP_FIELDS`] in a schema made with
/// [`Schema::with_limits`]).
pub fn add_fields(schema: &mut Schema, fields: &[(&str, Type)]) -> Result<(), Error> {
    for (name, ty) in fields {
        schema.add_field(name, *ty)?;
    }
    Ok(())
}

/// A schema of Kong's HTTP fields ([`HTTP_FIELDS`]) with the default limits: the `http`
/// schema of `atc-router check`, and the one the workload's tables (docs/workload.md) are
/// written against.
pub fn http_schema() -> Schema {
    http_schema_with(Limits::default())
}

/// [`http_schema`] with `limits` (see [`Schema::with_limits`]). The one way the project's
/// tests, benchmarks and fuzz targets make Kong's HTTP schema: none restates the field list.
pub fn http_schema_with(limits: Limits) -> Schema {
    let mut schema = Schema::with_limits(limits);
    add_fields(&mut schema, HTTP_FIELDS).expect("the HTTP fields are valid and distinct");
    schema
}

/// A schema of Kong's stream fields ([`STREAM_FIELDS`]) with the default limits.
pub fn stream_schema() -> Schema {
    let mut schema = Schema::new();
    add_fields(&mut schema, STREAM_FIELDS).expect("the stream fields are valid and distinct");
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kong_schemas_type_every_field_a_route_can_name() {
        let http = http_schema();
        assert_eq!(http.field_type("http.headers.x_tenant"), Some(Type::String));
        assert_eq!(http.field_type("http.queries.page"), Some(Type::String));
        assert_eq!(
            http.field_type("http.path.segments.1_2"),
            Some(Type::String)
        );
        assert_eq!(http.field_type("http.path.segments.len"), Some(Type::Int));
        assert_eq!(http.field_type("net.dst.ip"), Some(Type::IpAddr));
        assert_eq!(http.field_type("net.src.port"), Some(Type::Int));
        let stream = stream_schema();
        assert_eq!(stream.field_type("net.dst.port"), Some(Type::Int));
        assert_eq!(stream.field_type("tls.sni"), Some(Type::String));
        assert_eq!(stream.field_type("http.host"), None);
    }
}
