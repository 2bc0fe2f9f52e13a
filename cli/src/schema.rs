//! The schema routes are checked against: Kong's HTTP or stream fields, or a schema file.

use std::collections::BTreeMap;
use std::sync::Arc;

use atc_router::{check_declared_name, Error, NameRule, Schema, Type};

use crate::input;

pub use atc_router::request::{HTTP_FIELDS, STREAM_FIELDS};

/// The schema named by `--schema`: `http`, `stream`, or the path of a schema file, read
/// within `caps`. Errors are whole-file errors (the command exits with status 2).
pub fn load(spec: &str, caps: &input::Caps) -> Result<Arc<Schema>, String> {
    let fields = match spec {
        "http" => builtin(HTTP_FIELDS),
        "stream" => builtin(STREAM_FIELDS),
        path => {
            let file = input::read(path, caps)?;
            if let Some(long) = file.long_lines.first() {
                return Err(format!(
                    "schema file {path}, line {}: {} bytes, longer than the cap on a line ({} \
                     bytes, --max-line-size)",
                    long.line, long.len, caps.max_line
                ));
            }
            let text = String::from_utf8(file.bytes)
                .map_err(|_| format!("schema file {path}: not UTF-8 text"))?;
            parse(&text, file.json).map_err(|e| format!("schema file {path}: {e}"))?
        }
    };
    build(spec, fields).map(Arc::new)
}

/// A schema of `fields`, declared as `spec` names them. The names are held to the core's rule
/// of names a request can have ([`NameRule::Request`]): stricter than what a schema takes (Kong's
/// grammar), since a declaration like `http.headers.` or `a..b` names no request's field.
fn build(spec: &str, fields: Vec<Declared>) -> Result<Schema, String> {
    let mut schema = Schema::new();
    for (line, name, ty) in fields {
        check_declared_name(&name, NameRule::Request)
            .map_err(Error::from)
            .and_then(|()| schema.add_field(&name, ty))
            .map_err(|e| match line {
                Some(l) => format!("schema file {spec}, line {l}: {e}"),
                None => format!("schema file {spec}: {e}"),
            })?;
    }
    Ok(schema)
}

/// A field as declared: its line in the schema file (none for JSON and built-in schemas),
/// name and type.
type Declared = (Option<usize>, String, Type);

fn builtin(fields: &[(&str, Type)]) -> Vec<Declared> {
    fields
        .iter()
        .map(|(n, t)| (None, (*n).to_owned(), *t))
        .collect()
}

/// Parses a schema file: lines of `name TYPE` (`#` starts a comment), or a JSON object of
/// names to types.
fn parse(text: &str, json: bool) -> Result<Vec<Declared>, String> {
    let mut out = Vec::new();
    if json {
        let map: BTreeMap<String, String> = serde_json::from_str(text)
            .map_err(|e| format!("not a JSON object of names to types: {e}"))?;
        for (name, ty) in map {
            let ty = ty_of(&ty).map_err(|e| format!("field `{name}`: {e}"))?;
            out.push((None, name, ty));
        }
        return Ok(out);
    }
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            [name, ty] => {
                let ty = ty_of(ty).map_err(|e| format!("line {}: {e}", i + 1))?;
                out.push((Some(i + 1), (*name).to_owned(), ty));
            }
            _ => {
                return Err(format!(
                    "line {}: expected `name TYPE`, found {} word(s)",
                    i + 1,
                    words.len()
                ))
            }
        }
    }
    Ok(out)
}

fn ty_of(name: &str) -> Result<Type, String> {
    Type::from_name(name)
        .ok_or_else(|| format!("unknown type `{name}`: expected String, Int, IpAddr or IpCidr"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_schemas_type_kong_fields() {
        let http = load("http", &Default::default()).unwrap();
        assert_eq!(http.field_type("http.headers.x_tenant"), Some(Type::String));
        assert_eq!(
            http.field_type("http.path.segments.1_2"),
            Some(Type::String)
        );
        assert_eq!(http.field_type("http.path.segments.len"), Some(Type::Int));
        assert_eq!(http.field_type("net.dst.ip"), Some(Type::IpAddr));
        let stream = load("stream", &Default::default()).unwrap();
        assert_eq!(stream.field_type("net.dst.port"), Some(Type::Int));
        assert_eq!(stream.field_type("http.host"), None);
    }

    #[test]
    fn schema_file_lines_and_json() {
        let fields = parse(
            "# a comment\n\nhttp.host String\nport Int # trailing\n",
            false,
        )
        .unwrap();
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[1], (Some(4), "port".to_owned(), Type::Int));
        let err = parse("a String\nb Float\n", false).unwrap_err();
        assert!(err.starts_with("line 2: unknown type `Float`"), "{err}");
        let fields = parse(r#"{"h.*": "String", "p": "Int"}"#, true).unwrap();
        assert_eq!(fields[0], (None, "h.*".to_owned(), Type::String));
        assert!(parse(r#"{"p": "int"}"#, true).is_err());
    }

    #[test]
    fn declarations_are_held_to_the_names_a_request_can_have() {
        let declare = |name: &str| build("s", vec![(Some(3), name.to_owned(), Type::String)]);
        for good in ["a", "http.headers.x_tenant", "http.headers.*", "a1.b2"] {
            assert!(declare(good).is_ok(), "{good}");
        }
        // Kong's grammar (and so the core's schema) takes these; no request has such a field.
        assert_eq!(
            declare("http.headers.").unwrap_err(),
            "schema file s, line 3: invalid field name `http.headers.`: it ends with `.` (the \
             name after the last `.` is empty)"
        );
        assert_eq!(
            declare("a..b").unwrap_err(),
            "schema file s, line 3: invalid field name `a..b`: it has an empty segment (`..`)"
        );
        assert!(declare("a..*")
            .unwrap_err()
            .ends_with("(the name after the last `.` is empty)"));
        // What the grammar refuses, the core's schema refuses with the same error.
        assert!(declare("1a")
            .unwrap_err()
            .ends_with("it must start with an ASCII letter"));
        let twice = build(
            "s",
            vec![(None, "a".into(), Type::Int), (None, "a".into(), Type::Int)],
        );
        assert_eq!(
            twice.unwrap_err(),
            "schema file s: field `a` is already in the schema"
        );
    }
}
