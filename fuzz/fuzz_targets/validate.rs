//! Arbitrary text validated against a fixed gateway schema (the docs/workload.md fields plus an
//! `IpCidr` one). Properties:
//! - `Router::validate` never panics; its errors point inside the source;
//! - validation is exactly the gate of `Router::add`: an expression validates iff a router over
//!   the same schema accepts it, and the fields reported are the ones the route uses;
//! - a route that was accepted evaluates the same under the indexed matcher and the reference
//!   evaluator on an empty request and on a request with one value in each field it uses.
#![no_main]

use std::sync::Arc;

use atc_router::{Context, Error, Router, Type, Uuid, Value};
use atc_router_fuzz::{check_expr_error, shared_gateway_schema};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    // A fresh schema per input: validating assigns ids to wildcard-derived names, and a schema
    // kept across inputs would make runs depend on the inputs before them.
    let schema = shared_gateway_schema();
    let validated = Router::validate(&schema, src);
    let mut router = Router::new(schema.clone());
    let added = router.add(Uuid::from_u128(1), 1, src);
    match (&validated, &added) {
        (Ok(fields), Ok(())) => {
            assert!(!fields.is_empty());
            let mut used = router.fields();
            let mut reported = fields.clone();
            used.sort();
            reported.sort();
            reported.dedup();
            assert_eq!(used, reported, "validate and add disagree on the fields");
            check_agreement(&router, &schema, fields);
        }
        (Err(v), Err(a)) => {
            assert_eq!(v, a, "validate and add fail differently");
            if let Error::Expr(e) = v {
                check_expr_error(src, e);
            }
            let _ = v.to_string();
        }
        (Ok(_), Err(e)) => panic!("validates, but add refuses: {e}"),
        (Err(e), Ok(())) => panic!("add accepts, but validate refuses: {e}"),
    }
});

fn check_agreement(router: &Router, schema: &Arc<atc_router::Schema>, fields: &[String]) {
    let mut ctx = Context::new(schema.clone());
    for fill in [false, true] {
        ctx.reset();
        if fill {
            for f in fields {
                let v = match schema.field_type(f).expect("validated fields exist") {
                    Type::String => Value::String("/".into()),
                    Type::Int => Value::Int(443),
                    Type::IpAddr => Value::IpAddr("192.168.0.1".parse().unwrap()),
                    Type::IpCidr => Value::IpCidr("10.0.0.0/8".parse().unwrap()),
                };
                ctx.add_value(f, v).expect("a value of the field's type");
            }
        }
        let fast = router.execute(&mut ctx);
        let fast_id = ctx.result().map(|m| m.id());
        let slow = router.execute_reference(&mut ctx);
        let slow_id = ctx.result().map(|m| m.id());
        assert_eq!((fast, fast_id), (slow, slow_id), "fill={fill}");
    }
}
