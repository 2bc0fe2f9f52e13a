//! Reading a file (or standard input for `-`) within caps, and telling JSON from line-based
//! text (by the core's rule, `atc_router::route_list::sniff`, as the text arrives).
//!
//! Nothing is read without a bound: a file larger than [`Caps::max_file`] is a whole-file
//! error as soon as the byte past the cap arrives (so `/dev/zero` or an endless pipe stops
//! there), and in a line-based file a line longer than [`Caps::max_line`] is not kept: only
//! its number and length are, for the caller to report.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use atc_router::route_list::{strip_bom, Format, Sniffer};

/// The longest expression the router takes by default (`Limits::max_expression_len`).
pub const MAX_EXPRESSION: usize = 1024 * 1024;
/// Room on a TSV line for the priority, the id and the two tabs next to the expression.
pub const LINE_SLACK: usize = 256;
/// Default cap of a line of a line-based file: an expression as long as the router takes,
/// with its priority and id.
pub const DEFAULT_MAX_LINE: usize = MAX_EXPRESSION + LINE_SLACK;
/// Default cap of a whole file: 256 MiB, far above the largest tables of the benchmarks
/// (100,000 routes of the mixed family are about 14 MiB as TSV).
pub const DEFAULT_MAX_FILE: u64 = 256 * 1024 * 1024;

/// How much may be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Bytes of a whole file (a byte-order mark included).
    pub max_file: u64,
    /// Bytes of one line of a line-based file, without its line end.
    pub max_line: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            max_file: DEFAULT_MAX_FILE,
            max_line: DEFAULT_MAX_LINE,
        }
    }
}

/// A line of a line-based file longer than the cap: left out of [`Input::bytes`] (the line
/// is there, empty, so that the other lines keep their numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongLine {
    /// 1-based.
    pub line: usize,
    /// Its length in bytes.
    pub len: u64,
}

/// A file as read.
#[derive(Debug)]
pub struct Input {
    /// The content, without a leading byte-order mark and without the long lines.
    pub bytes: Vec<u8>,
    /// Whether it is JSON: by its extension (`.json`; `.tsv` and `.txt` are text), else by
    /// the core's rule (`atc_router::route_list::sniff`: its first character that is not
    /// blank, past a byte-order mark, is `[` or `{`). Lines are not capped in JSON.
    pub json: bool,
    /// The lines longer than the cap, in order.
    pub long_lines: Vec<LongLine>,
}

/// A size for `--max-file-size` / `--max-line-size`: bytes, or a number with `K`, `M` or `G`
/// (binary multiples, an optional `iB`/`B` after it): `1048576`, `1M`, `256MiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => {
            return Err(format!(
                "`{text}`: expected bytes, or a number with K, M or G"
            ))
        }
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected bytes, or a number with K, M or G"))?;
    let size = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}`: too large"))?;
    if size == 0 {
        return Err(format!("`{text}`: must be at least 1 byte"));
    }
    Ok(size)
}

/// Reads `path` (`-`: standard input) within `caps`.
pub fn read(path: &str, caps: &Caps) -> Result<Input, String> {
    read_as(path, caps, false)
}

/// Reads `path` (`-`: standard input) within the file cap, as one text: no line is cut (a
/// YAML document's structure is in its lines).
pub fn read_whole(path: &str, caps: &Caps) -> Result<Vec<u8>, String> {
    Ok(read_as(path, caps, true)?.bytes)
}

fn read_as(path: &str, caps: &Caps, whole: bool) -> Result<Input, String> {
    if path == "-" {
        read_from(std::io::stdin().lock(), path, caps, whole)
            .map_err(|e| format!("standard input: {e}"))
    } else {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        read_from(file, path, caps, whole).map_err(|e| format!("{path}: {e}"))
    }
}

/// Reads everything from `source` within `caps`; `path` only decides the format by its
/// extension. `whole`: no line is cut, whatever the format (`json` is then meaningless).
fn read_from(source: impl Read, path: &str, caps: &Caps, whole: bool) -> Result<Input, String> {
    let by_extension = if whole {
        Some(true)
    } else {
        json_by_extension(path)
    };
    let mut reader = BufReader::with_capacity(64 * 1024, source);
    let mut bytes = Vec::new();
    let mut long_lines = Vec::new();
    // Whether the format is known: by extension, or once a byte decides (the core's rule,
    // applied to the chunks as they come).
    let mut json = by_extension;
    let mut sniffer = Sniffer::new();
    // The line being read: its number, where it starts in `bytes`, its length so far, and
    // whether it is too long (then it is not kept).
    let (mut line, mut line_start, mut line_len, mut too_long) = (1usize, 0usize, 0u64, false);
    let mut total: u64 = 0;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read: {e}")),
        };
        let n = chunk.len();
        total += n as u64;
        if total > caps.max_file {
            return Err(format!(
                "larger than {} bytes, the cap on a file (--max-file-size)",
                caps.max_file
            ));
        }
        if json.is_none() {
            json = sniffer.feed(chunk).map(|f| f == Format::Json);
        }
        if json == Some(true) {
            bytes.extend_from_slice(chunk);
        } else {
            for piece in chunk.split_inclusive(|&b| b == b'\n') {
                let ends = piece.last() == Some(&b'\n');
                let body = if ends {
                    &piece[..piece.len() - 1]
                } else {
                    piece
                };
                line_len += body.len() as u64;
                if !too_long && line_len > caps.max_line as u64 {
                    too_long = true;
                    bytes.truncate(line_start);
                }
                if !too_long {
                    bytes.extend_from_slice(body);
                }
                if ends {
                    if too_long {
                        long_lines.push(LongLine {
                            line,
                            len: line_len,
                        });
                    }
                    bytes.push(b'\n');
                    line += 1;
                    line_start = bytes.len();
                    line_len = 0;
                    too_long = false;
                }
            }
        }
        reader.consume(n);
    }
    if too_long {
        long_lines.push(LongLine {
            line,
            len: line_len,
        });
    }
    // A byte-order mark some editors write is not part of the content.
    let mark = bytes.len() - strip_bom(&bytes).len();
    bytes.drain(..mark);
    Ok(Input {
        bytes,
        json: json.unwrap_or(false),
        long_lines,
    })
}

/// `Some(true)` for `.json`, `Some(false)` for `.tsv` and `.txt`, `None` otherwise.
fn json_by_extension(path: &str) -> Option<bool> {
    let ext = Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("json") => Some(true),
        Some("tsv" | "txt") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(max_file: u64, max_line: usize) -> Caps {
        Caps { max_file, max_line }
    }

    #[test]
    fn lines_over_the_cap_are_counted_not_kept() {
        let text = b"a\nbbbbbb\ncc\ndddddddd";
        let got = read_from(&text[..], "x.tsv", &caps(100, 5), false).unwrap();
        assert_eq!(got.bytes, b"a\n\ncc\n");
        assert!(!got.json);
        assert_eq!(
            got.long_lines,
            [LongLine { line: 2, len: 6 }, LongLine { line: 4, len: 8 }]
        );
        // At the cap exactly: kept.
        let got = read_from(&b"12345\n"[..], "x", &caps(100, 5), false).unwrap();
        assert_eq!(
            (got.bytes.as_slice(), got.long_lines.len()),
            (&b"12345\n"[..], 0)
        );
    }

    #[test]
    fn a_long_line_across_reads_is_caught() {
        // A reader that hands out one byte at a time.
        struct Slow<'a>(&'a [u8]);
        impl Read for Slow<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let Some((&b, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                buf[0] = b;
                self.0 = rest;
                Ok(1)
            }
        }
        let got = read_from(Slow(b"ok\n0123456789\nok"), "-", &caps(100, 4), false).unwrap();
        assert_eq!(got.bytes, b"ok\n\nok");
        assert_eq!(got.long_lines, [LongLine { line: 2, len: 10 }]);
    }

    #[test]
    fn a_whole_read_cuts_no_line() {
        let text = b"key:\n  - 0123456789\n";
        let got = read_from(&text[..], "kong.yml", &caps(100, 4), true).unwrap();
        assert_eq!(got.bytes, text);
        assert!(got.long_lines.is_empty());
        // The file cap still holds.
        assert!(read_from(std::io::repeat(b'a'), "-", &caps(1 << 10, 4), true).is_err());
    }

    #[test]
    fn the_file_cap_stops_an_endless_source() {
        let err = read_from(std::io::repeat(0), "-", &caps(1 << 20, 64), false).unwrap_err();
        assert!(err.starts_with("larger than 1048576 bytes"), "{err}");
        // Exactly at the cap: read.
        let got = read_from(&[b'x'; 10][..], "-", &caps(10, 64), false).unwrap();
        assert_eq!(got.bytes.len(), 10);
    }

    #[test]
    fn json_is_not_cut_into_lines() {
        let text = br#"  [{"id": "x", "expression": "a long line"}]"#;
        let got = read_from(&text[..], "-", &caps(100, 5), false).unwrap();
        assert!(got.json);
        assert_eq!(got.bytes, text);
        assert!(got.long_lines.is_empty());
        let bom = b"\xEF\xBB\xBF{\"routes\": []}";
        let got = read_from(&bom[..], "-", &caps(100, 5), false).unwrap();
        assert!(got.json);
        assert_eq!(got.bytes, b"{\"routes\": []}");
        let json =
            |text: &[u8], path: &str| read_from(text, path, &caps(100, 5), false).unwrap().json;
        assert!(!json(b"[]", "r.tsv") && json(b"x", "r.JSON"));
        assert!(!json(b" 1\t", "r") && json(b"\n {", "r") && !json(b"", "r"));
    }

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("4KB"), Ok(4096));
        for bad in ["", "M", "1.5M", "-1", "1T", "0", "99999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
