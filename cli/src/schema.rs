//! The schema routes are checked against: Kong's HTTP or stream fields, or a schema file.

use std::collections::BTreeMap;
use std::sync::Arc;

use atc_router::error::excerpt;
use atc_router::{Schema, Type};

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
    let mut schema = Schema::new();
    for (line, name, ty) in fields {
        check_name(&name, true)
            .map_err(|e| e.to_string())
            .and_then(|()| schema.add_field(&name, ty).map_err(|e| e.to_string()))
            .map_err(|e| match line {
                Some(l) => format!("schema file {spec}, line {l}: {e}"),
                None => format!("schema file {spec}: {e}"),
            })?;
    }
    Ok(Arc::new(schema))
}

/// Refuses a field name that no request can have although the core takes it: a segment
/// between dots that is empty (`http.headers.`, `a..b`). Segments are ASCII letters, digits
/// and `_`, the first starting with a letter; with `wildcard` (a schema's declarations) the
/// name may end in `.*`. The error reads `invalid field name `…`: why`.
pub fn check_name(name: &str, wildcard: bool) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid field name `{}`: {why}", excerpt(name)));
    let base = match name.strip_suffix(".*") {
        Some(prefix) if wildcard => prefix,
        _ => name,
    };
    if base.is_empty() {
        return bad("it is empty");
    }
    let segments: Vec<&str> = base.split('.').collect();
    for (i, segment) in segments.iter().enumerate() {
        if segment.is_empty() {
            return bad(if i == 0 {
                "it starts with `.`"
            } else if i + 1 == segments.len() {
                "it ends with `.` (the name after the last `.` is empty)"
            } else {
                "it has an empty segment (`..`)"
            });
        }
        if !segment
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            return bad(
                "a segment has a character other than ASCII letters, digits and `_` (in a \
                 schema, the name may end in `.*`)",
            );
        }
    }
    if !base.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return bad("it must start with an ASCII letter");
    }
    Ok(())
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
    fn names_with_an_empty_segment_are_refused() {
        for good in [
            "a",
            "http.headers.x_tenant",
            "http.path.segments.1_2",
            "a1.b2",
        ] {
            assert_eq!(check_name(good, false), Ok(()), "{good}");
        }
        assert_eq!(check_name("http.headers.*", true), Ok(()));
        let err = |name: &str, wildcard: bool| check_name(name, wildcard).unwrap_err();
        assert_eq!(
            err("http.headers.", false),
            "invalid field name `http.headers.`: it ends with `.` (the name after the last `.` \
             is empty)"
        );
        assert_eq!(
            err("a..b", true),
            "invalid field name `a..b`: it has an empty segment (`..`)"
        );
        assert!(err(".x", false).ends_with("it starts with `.`"));
        assert!(err("", false).ends_with("it is empty"));
        assert!(err("1a", false).ends_with("it must start with an ASCII letter"));
        assert!(err("a.b-c", false).contains("a segment has a character"));
        assert!(err("http.headers.*", false).contains("a segment has a character"));
        assert!(err("a.*.*", true).contains("a segment has a character"));
        assert!(err(".*", true).ends_with("it is empty"));
        assert!(err("a..*", true).ends_with("(the name after the last `.` is empty)"));
    }
}
