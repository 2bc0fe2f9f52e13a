//! The request of `--explain`: `METHOD HOST PATH [name:value ...]`, as field values.

use atc_router::error::excerpt;
use atc_router::request::{request_path, split_host_port, PathField, Segments};
use atc_router::{check_field_name, Context, NameRule, Router, Schema, Type, Value};

/// Reads the request text into `(field, value)` pairs, typed by the schema.
///
/// `METHOD`, `HOST` and `PATH` go to `http.method`, `http.host` and `http.path` (`-` leaves
/// one out), read as Kong's router reads a request: `HOST` is a Host header (its port is
/// dropped), `PATH` a request URI (its arguments are dropped, and it is normalised:
/// `atc_router::request::request_path`). Each `name:value` after them sets a field: a name without a dot is a header
/// (`X-Tenant:acme` sets `http.headers.x_tenant`), a dotted name is the field itself
/// (`net.dst.port:443`). With a path, the `http.path.segments.*` fields the routes use and
/// `http.path.segments.len` get the values Kong gives them, unless given.
pub fn parse(text: &str, router: &Router) -> Result<Vec<(String, Value)>, String> {
    let schema = router.schema();
    let words: Vec<&str> = text.split_whitespace().collect();
    let [method, host, path, extra @ ..] = &words[..] else {
        return Err(format!(
            "expected `METHOD HOST PATH [name:value ...]` (`-` for a part left out), found {} \
             word(s)",
            words.len()
        ));
    };
    // As Kong's router reads a request: the Host header without its port, the request URI
    // without its arguments and normalised.
    let host = if *host == "-" {
        "-"
    } else {
        split_host_port(host).0
    };
    let mut normalized = Vec::new();
    request_path(path.as_bytes(), &mut normalized);
    let path = match (*path, String::from_utf8(normalized)) {
        ("-", _) => "-".to_owned(),
        (_, Ok(p)) => p,
        (_, Err(_)) => {
            return Err(format!(
                "`{}`: the path is not UTF-8 once its %-escapes are decoded",
                excerpt(path)
            ))
        }
    };
    let mut fields = Vec::new();
    for (name, value) in [
        ("http.method", *method),
        ("http.host", host),
        ("http.path", path.as_str()),
    ] {
        if value != "-" {
            fields.push((name.to_owned(), typed(schema, name, value)?));
        }
    }
    for word in extra {
        let Some((name, value)) = word.split_once(':') else {
            return Err(format!(
                "`{}`: expected `name:value` (a header name, or a field's full name)",
                excerpt(word)
            ));
        };
        let name = if name.contains('.') {
            name.to_owned()
        } else {
            format!(
                "http.headers.{}",
                name.to_ascii_lowercase().replace('-', "_")
            )
        };
        // The core's schema takes `http.headers.` (`:v`) or `a..b` through a wildcard, as Kong's
        // grammar does; no request has such a field.
        check_field_name(&name, NameRule::Request)
            .map_err(|e| format!("`{}`: {e}", excerpt(word)))?;
        let value = typed(schema, &name, value)?;
        fields.push((name, value));
    }
    if path != "-" {
        for (name, value) in segments(&path, schema, &router.fields()) {
            if !fields.iter().any(|(n, _)| *n == name) {
                fields.push((name, value));
            }
        }
    }
    Ok(fields)
}

/// A context holding `fields`.
pub fn context(router: &Router, fields: &[(String, Value)]) -> Result<Context, String> {
    let mut ctx = Context::new(router.schema().clone());
    for (name, value) in fields {
        ctx.add_value(name, value.clone())
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(ctx)
}

/// `text` as a value of the field `name`.
fn typed(schema: &Schema, name: &str, text: &str) -> Result<Value, String> {
    let Some(ty) = schema.field_type(name) else {
        return Err(format!(
            "field `{}` is not in the schema (write - for a part of the request line the \
             schema does not have)",
            excerpt(name)
        ));
    };
    // The core's one reading of values from text (the C ABI's too).
    Value::from_text(ty, text).map_err(|e| format!("{name}: {e}"))
}

/// The path fields Kong derives from the path (`atc_router::request`): `segments.len`, and
/// the segments and ranges the routes use that the path has.
fn segments(path: &str, schema: &Schema, used: &[String]) -> Vec<(String, Value)> {
    let segments = Segments::new(path);
    let mut out = Vec::new();
    let len = "http.path.segments.len";
    if schema.field_type(len) == Some(Type::Int) {
        out.push((len.to_owned(), Value::Int(segments.len() as i64)));
    }
    for name in used {
        if schema.field_type(name) != Some(Type::String) {
            continue;
        }
        let Some(field @ (PathField::Segment(_) | PathField::Range(..))) = PathField::of(name)
        else {
            continue;
        };
        if let Some(v) = segments.get(field) {
            out.push((name.clone(), Value::String(v.to_owned())));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    fn router(routes: &[&str]) -> Router {
        let mut r = Router::new(schema::load("http", &Default::default()).unwrap());
        for (i, e) in routes.iter().enumerate() {
            r.add(atc_router::Uuid::from_u128(i as u128 + 1), 1, e)
                .unwrap();
        }
        r
    }

    #[test]
    fn request_line_headers_and_fields() {
        let r = router(&[]);
        let f = parse(
            "GET a.example /x X-Tenant:acme net.dst.port:443 net.src.ip:::1",
            &r,
        )
        .unwrap();
        assert_eq!(f[0], ("http.method".into(), Value::String("GET".into())));
        assert_eq!(
            f[3],
            ("http.headers.x_tenant".into(), Value::String("acme".into()))
        );
        assert_eq!(f[4], ("net.dst.port".into(), Value::Int(443)));
        assert_eq!(f[5].1, Value::IpAddr("::1".parse().unwrap()));
        assert_eq!(f[6], ("http.path.segments.len".into(), Value::Int(1)));
        assert!(parse("GET a.example", &r).is_err());
        assert!(parse("GET a /x net.dst.port:https", &r).is_err());
        assert!(parse("GET a /x nope.field:1", &r).is_err());
        assert!(parse("GET a /x novalue", &r).is_err());
        for bad in [":v", "http.headers.:v", "http.queries.a..b:v", "X@Y:v"] {
            let err = parse(&format!("GET a /x {bad}"), &r).unwrap_err();
            assert!(err.contains("invalid field name"), "{bad}: {err}");
        }
    }

    #[test]
    fn host_and_path_are_read_as_kong_reads_a_request() {
        let r = router(&[r#"http.path.segments.1 == "c""#]);
        let f = parse("GET Api.Example.com:8443 /a//b/../%63/%2f?x=1", &r).unwrap();
        assert_eq!(
            f[1],
            ("http.host".into(), Value::String("Api.Example.com".into()))
        );
        assert_eq!(f[2], ("http.path".into(), Value::String("/a/c/%2F".into())));
        assert!(f.contains(&("http.path.segments.1".into(), Value::String("c".into()))));
        let err = parse("GET a /%FF", &r).unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
    }

    #[test]
    fn path_segments_as_kong_derives_them() {
        let r = router(&[
            r#"http.path.segments.1 == "b""#,
            r#"http.path.segments.0_2 == "a/b/c""#,
            r#"http.path.segments.5 == "z""#,
        ]);
        let f = parse("- - /a/b/c", &r).unwrap();
        let get = |n: &str| f.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(get("http.path.segments.len"), Some(Value::Int(3)));
        assert_eq!(get("http.path.segments.1"), Some(Value::String("b".into())));
        assert_eq!(
            get("http.path.segments.0_2"),
            Some(Value::String("a/b/c".into()))
        );
        assert_eq!(get("http.path.segments.5"), None);
        assert_eq!(get("http.method"), None);
    }
}
