//! A minimal JSON writer for the serialised reports (`atc_router_explain`, `atc_router_matches`).
//!
//! Only what those reports need: objects, arrays, strings, integers, booleans and null. Strings
//! are Rust strings (valid UTF-8), written with `"`, `\` and the control characters escaped;
//! everything else is written as is, so the output is valid UTF-8 JSON (RFC 8259). Commas are
//! placed by the writer: a value written after another in the same object or array gets one.

use std::fmt::Write as _;

pub(crate) struct Json {
    out: String,
    /// Whether the innermost open object or array already holds a value.
    filled: Vec<bool>,
}

impl Json {
    pub(crate) fn new() -> Json {
        Json {
            out: String::with_capacity(1024),
            filled: Vec::new(),
        }
    }

    pub(crate) fn finish(self) -> String {
        debug_assert!(self.filled.is_empty(), "every object and array is closed");
        self.out
    }

    /// The separator before a new value (or key) of the innermost container.
    fn sep(&mut self) {
        if let Some(filled) = self.filled.last_mut() {
            if *filled {
                self.out.push(',');
            }
            *filled = true;
        }
    }

    pub(crate) fn begin_object(&mut self) -> &mut Self {
        self.sep();
        self.out.push('{');
        self.filled.push(false);
        self
    }

    pub(crate) fn end_object(&mut self) -> &mut Self {
        self.filled.pop();
        self.out.push('}');
        self
    }

    pub(crate) fn begin_array(&mut self) -> &mut Self {
        self.sep();
        self.out.push('[');
        self.filled.push(false);
        self
    }

    pub(crate) fn end_array(&mut self) -> &mut Self {
        self.filled.pop();
        self.out.push(']');
        self
    }

    /// A key of the current object; the next call writes its value.
    pub(crate) fn key(&mut self, key: &str) -> &mut Self {
        self.sep();
        self.quoted(key);
        self.out.push(':');
        // The value that follows is the second half of this member: no comma before it (its
        // own `sep` marks the container filled again).
        if let Some(filled) = self.filled.last_mut() {
            *filled = false;
        }
        self
    }

    pub(crate) fn string(&mut self, s: &str) -> &mut Self {
        self.sep();
        self.quoted(s);
        self
    }

    pub(crate) fn uint(&mut self, n: u64) -> &mut Self {
        self.sep();
        let _ = write!(self.out, "{n}");
        self
    }

    pub(crate) fn int(&mut self, n: i64) -> &mut Self {
        self.sep();
        let _ = write!(self.out, "{n}");
        self
    }

    pub(crate) fn bool(&mut self, b: bool) -> &mut Self {
        self.sep();
        self.out.push_str(if b { "true" } else { "false" });
        self
    }

    pub(crate) fn null(&mut self) -> &mut Self {
        self.sep();
        self.out.push_str("null");
        self
    }

    fn quoted(&mut self, s: &str) {
        let out = &mut self.out;
        out.reserve(s.len() + 2);
        out.push('"');
        let mut plain = 0;
        for (i, b) in s.bytes().enumerate() {
            let esc = match b {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0..=0x1f | 0x7f => "",
                _ => continue,
            };
            out.push_str(&s[plain..i]);
            if esc.is_empty() {
                let _ = write!(out, "\\u{b:04x}");
            } else {
                out.push_str(esc);
            }
            plain = i + 1;
        }
        out.push_str(&s[plain..]);
        out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use super::Json;

    #[test]
    fn nesting_and_commas() {
        let mut j = Json::new();
        j.begin_object();
        j.key("a").uint(1);
        j.key("b").begin_array();
        j.int(-2).bool(true).null();
        j.begin_object().end_object();
        j.begin_array().end_array();
        j.end_array();
        j.key("c").string("x");
        j.end_object();
        assert_eq!(j.finish(), r#"{"a":1,"b":[-2,true,null,{},[]],"c":"x"}"#);
    }

    #[test]
    fn strings_are_escaped() {
        let mut j = Json::new();
        j.string("q\"b\\n\nt\tr\r\u{1}\u{7f}é€\u{2028}");
        assert_eq!(
            j.finish(),
            "\"q\\\"b\\\\n\\nt\\tr\\r\\u0001\\u007fé€\u{2028}\""
        );
    }
}
