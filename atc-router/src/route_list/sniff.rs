//! Which format a route-list text is in, TSV or JSON: the one rule every reader of a text uses
//! (the builder's thread through [`EntryList::read`](super::EntryList::read), the `atc-router`
//! command for route, schema and Kong files).
//!
//! The rule: a leading byte-order mark (which some editors write) is not content; the text is
//! JSON when its first byte that is not ASCII white space is `[` or `{`, TSV otherwise (an
//! empty or blank text included).
//!
//! Invariant: [`sniff`] and a [`Sniffer`] fed the same bytes in any pieces agree; `sniff` is a
//! `Sniffer` fed one piece.

/// A byte-order mark (U+FEFF in UTF-8), not part of a text's content when it leads it.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The format of a route list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `priority<TAB>id<TAB>expression` per line; blank lines and `#` comments are skipped.
    Tsv,
    /// An array of `{"id", "priority", "expression"}` objects, or `{"routes": [...]}`.
    Json,
}

impl Format {
    /// `"tsv"` or `"json"`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Tsv => "tsv",
            Format::Json => "json",
        }
    }
}

/// The format of `text` (see the module docs).
///
/// ```
/// use atc_router::route_list::{sniff, Format};
/// assert_eq!(sniff(b"\n  [{\"id\": \"...\"}]"), Format::Json);
/// assert_eq!(sniff(b"\xEF\xBB\xBF{\"routes\": []}"), Format::Json);
/// assert_eq!(sniff(b"10\t...\thttp.path == \"/\""), Format::Tsv);
/// assert_eq!(sniff(b"  \n"), Format::Tsv);
/// ```
pub fn sniff(text: &[u8]) -> Format {
    Sniffer::new().feed(text).unwrap_or(Format::Tsv)
}

/// `text` without a leading byte-order mark.
pub fn strip_bom(text: &[u8]) -> &[u8] {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// [`sniff`] for a text that arrives in pieces (a file read in chunks): it decides at the first
/// byte that decides, whatever the pieces, so that a reader can treat the rest accordingly.
///
/// ```
/// use atc_router::route_list::{Format, Sniffer};
/// let mut s = Sniffer::new();
/// assert_eq!(s.feed(b"\xEF\xBB"), None); // a mark cut between two reads
/// assert_eq!(s.feed(b"\xBF \n"), None);
/// assert_eq!(s.feed(b"[]"), Some(Format::Json));
/// ```
#[derive(Debug, Clone)]
pub struct Sniffer {
    /// Bytes seen, all undecided so far.
    seen: usize,
    /// Whether every byte seen is a byte of a leading [`BOM`].
    in_bom: bool,
}

impl Default for Sniffer {
    fn default() -> Sniffer {
        Sniffer::new()
    }
}

impl Sniffer {
    /// A sniffer that has seen nothing.
    pub fn new() -> Sniffer {
        Sniffer {
            seen: 0,
            in_bom: true,
        }
    }

    /// Looks at the next piece of the text: the format once a byte of it decides, `None`
    /// while every byte so far is blank or of a leading byte-order mark (at the end of the
    /// text, that is TSV). Once it has decided, it is not to be fed again.
    pub fn feed(&mut self, piece: &[u8]) -> Option<Format> {
        for &b in piece {
            if self.in_bom && self.seen < BOM.len() {
                if b == BOM[self.seen] {
                    self.seen += 1;
                    continue;
                }
                self.in_bom = false;
                if self.seen > 0 {
                    // The start of a mark, then something else: the text starts with a byte
                    // that is neither blank nor `[` or `{`.
                    return Some(Format::Tsv);
                }
            }
            self.in_bom = false;
            self.seen += 1;
            match b {
                b'[' | b'{' => return Some(Format::Json),
                _ if b.is_ascii_whitespace() => {}
                _ => return Some(Format::Tsv),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_byte_that_is_not_blank_decides() {
        for (text, format) in [
            (&b"[]"[..], Format::Json),
            (b"{\"routes\": []}", Format::Json),
            (b" \t\r\n {", Format::Json),
            (b"10\tid\texpr", Format::Tsv),
            (b"# a comment\n[", Format::Tsv),
            (b"", Format::Tsv),
            (b"\n\n", Format::Tsv),
        ] {
            assert_eq!(sniff(text), format, "{text:?}");
        }
    }

    #[test]
    fn a_leading_byte_order_mark_is_not_content() {
        assert_eq!(sniff(b"\xEF\xBB\xBF[]"), Format::Json);
        assert_eq!(sniff(b"\xEF\xBB\xBF \n{"), Format::Json);
        assert_eq!(sniff(b"\xEF\xBB\xBF1\ta\tb"), Format::Tsv);
        // Only one, and only first: anywhere else its bytes are content.
        assert_eq!(sniff(b" \xEF\xBB\xBF["), Format::Tsv);
        assert_eq!(sniff(b"\xEF\xBB\xBF\xEF\xBB\xBF["), Format::Tsv);
        // The start of a mark and something else is content.
        assert_eq!(sniff(b"\xEF["), Format::Tsv);
        assert_eq!(sniff(b"\xEF\xBB{"), Format::Tsv);
        assert_eq!(strip_bom(b"\xEF\xBB\xBF[]"), b"[]");
        assert_eq!(strip_bom(b"\xEF\xBB[]"), b"\xEF\xBB[]");
    }

    #[test]
    fn pieces_decide_as_the_whole_text_does() {
        let texts: [&[u8]; 8] = [
            b"\xEF\xBB\xBF  \n[{}]",
            b"\xEF\xBB\xBF1\ta\tb",
            b"\xEF\xBB{",
            b" \xEF\xBB\xBF[",
            b"\n\n\t{",
            b"5\tx\ty",
            b"   ",
            b"",
        ];
        for text in texts {
            for cut in 0..=text.len() {
                for second in cut..=text.len() {
                    let mut s = Sniffer::new();
                    let got = [&text[..cut], &text[cut..second], &text[second..]]
                        .iter()
                        .find_map(|piece| s.feed(piece))
                        .unwrap_or(Format::Tsv);
                    assert_eq!(got, sniff(text), "{text:?} cut at {cut}, {second}");
                }
            }
        }
    }
}
