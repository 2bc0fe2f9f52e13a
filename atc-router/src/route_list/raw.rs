//! A route's parts as a caller hands them over in bytes (the C ABI's strings): the one reading
//! of a route id and of an expression's text, and the words of their errors.
//!
//! Invariant: every caller that is given an id or a text as bytes reads it here, so that a
//! route refused for its id or its encoding is refused with the same error (and the same
//! [`UnreadKind`] in a list) whichever call it came through.

use uuid::Uuid;

use super::UnreadKind;
use crate::error::{excerpt, Error};

/// `bytes` as text, or [`Error::NotUtf8`] naming it as `what`.
pub fn read_text<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str, Error> {
    std::str::from_utf8(bytes).map_err(|error| Error::NotUtf8 { what, error })
}

/// A route id in text form (hyphenated, simple, braced or URN), or [`Error::BadId`].
pub fn parse_id(text: &str) -> Result<Uuid, Error> {
    Uuid::try_parse(text).map_err(|e| Error::BadId {
        text: excerpt(text).to_string(),
        reason: excerpt(&e.to_string()).to_string(),
    })
}

/// A route id given as bytes: UTF-8 ([`read_text`]), then a UUID ([`parse_id`]).
pub fn read_id(bytes: &[u8]) -> Result<Uuid, Error> {
    parse_id(read_text(bytes, "id")?)
}

impl UnreadKind {
    /// The kind of entry a list holds in place of a route whose parts failed to read with
    /// `error` (an error of this module; any other is a malformed entry).
    pub fn of(error: &Error) -> UnreadKind {
        match error {
            Error::BadId { .. } => UnreadKind::BadId,
            Error::NotUtf8 { .. } => UnreadKind::NotUtf8,
            _ => UnreadKind::Malformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_any_text_form_of_a_uuid() {
        let id = Uuid::from_u128(0xa8f2c1e4_0000_4000_8000_000000000001);
        for text in [
            "a8f2c1e4-0000-4000-8000-000000000001",
            "a8f2c1e4000040008000000000000001",
            "{a8f2c1e4-0000-4000-8000-000000000001}",
            "urn:uuid:a8f2c1e4-0000-4000-8000-000000000001",
        ] {
            assert_eq!(read_id(text.as_bytes()).unwrap(), id, "{text}");
        }
    }

    #[test]
    fn an_id_that_is_not_a_uuid_says_what_was_given() {
        let e = read_id(b"route-1").unwrap_err();
        assert_eq!(UnreadKind::of(&e), UnreadKind::BadId);
        let text = e.to_string();
        assert!(text.starts_with("invalid route id \"route-1\": "), "{text}");
        assert!(
            text.ends_with("(expected a UUID such as a8f2c1e4-…)"),
            "{text}"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_named_with_rusts_words() {
        let e = read_text(b"http.path == \"\xff\"", "expr").unwrap_err();
        assert_eq!(UnreadKind::of(&e), UnreadKind::NotUtf8);
        assert_eq!(
            e.to_string(),
            "`expr` is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 14"
        );
        assert_eq!(
            UnreadKind::of(&read_id(b"\xff").unwrap_err()),
            UnreadKind::NotUtf8
        );
    }
}
