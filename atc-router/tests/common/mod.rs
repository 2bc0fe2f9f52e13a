//! Set-up shared by the tests that run the docs/workload.md tables.
// Each test crate includes this module and uses its own part of it.
#![allow(dead_code)]

use std::net::IpAddr;
use std::sync::Arc;

use atc_router::request::http_schema;
use atc_router::{Router, Schema, Uuid, Value};
use atc_workload::Table;

/// The schema every WORKLOAD table is written against.
pub fn workload_schema() -> Arc<Schema> {
    Arc::new(http_schema())
}

/// A request value of the workload as the router's value type.
pub fn workload_value(v: &atc_workload::Value) -> Value {
    match v {
        atc_workload::Value::Str(s) => Value::String(s.clone()),
        atc_workload::Value::Int(i) => Value::Int(*i),
        atc_workload::Value::Ip(a) => Value::IpAddr(*a as IpAddr),
    }
}

/// A router of `table`'s routes, added one by one as a gateway adds them.
pub fn workload_router(table: &Table, schema: &Arc<Schema>) -> Router {
    let mut r = Router::new(schema.clone());
    for route in &table.routes {
        r.add(
            Uuid::from_bytes(route.id),
            route.priority,
            &route.expression,
        )
        .unwrap_or_else(|e| panic!("{}\n{e}", route.expression));
    }
    r
}
