//! The schema routes are checked against: Kong's HTTP or stream fields, or a schema file.

use std::collections::BTreeMap;
use std::sync::Arc;

use atc_router::{Schema, Type};

use crate::input;

/// The fields of Kong's HTTP subsystem (its expressions router), by type.
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

/// The fields of Kong's stream subsystem, by type.
pub const STREAM_FIELDS: &[(&str, Type)] = &[
    ("net.protocol", Type::String),
    ("tls.sni", Type::String),
    ("net.src.port", Type::Int),
    ("net.dst.port", Type::Int),
    ("net.src.ip", Type::IpAddr),
    ("net.dst.ip", Type::IpAddr),
];

/// The schema named by `--schema`: `http`, `stream`, or the path of a schema file. Errors
/// are whole-file errors (the command exits with status 2).
pub fn load(spec: &str) -> Result<Arc<Schema>, String> {
    let fields = match spec {
        "http" => builtin(HTTP_FIELDS),
        "stream" => builtin(STREAM_FIELDS),
        path => {
            let bytes = input::read(path)?;
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("schema file {path}: not UTF-8 text"))?;
            parse(&text, input::is_json(path, &text))
                .map_err(|e| format!("schema file {path}: {e}"))?
        }
    };
    let mut schema = Schema::new();
    for (line, name, ty) in fields {
        schema.add_field(&name, ty).map_err(|e| match line {
            Some(l) => format!("schema file {spec}, line {l}: {e}"),
            None => format!("schema file {spec}: {e}"),
        })?;
    }
    Ok(Arc::new(schema))
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
        let http = load("http").unwrap();
        assert_eq!(http.field_type("http.headers.x_tenant"), Some(Type::String));
        assert_eq!(
            http.field_type("http.path.segments.1_2"),
            Some(Type::String)
        );
        assert_eq!(http.field_type("http.path.segments.len"), Some(Type::Int));
        assert_eq!(http.field_type("net.dst.ip"), Some(Type::IpAddr));
        let stream = load("stream").unwrap();
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
}
