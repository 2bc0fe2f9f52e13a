//! The path Kong routes on, and its segments.
//!
//! Kong takes the request URI as the client sent it (`$request_uri`), drops the arguments
//! (`kong.router.utils.strip_uri_args`) and normalises what is left
//! (`kong.tools.uri.normalize(uri, true)`): percent-encoded characters are decoded except the
//! reserved ones, which stay encoded with upper-case hex; dot segments are removed; runs of
//! slashes are merged. Segments are the pieces of that path after its first character, split at
//! `/`, without the trailing empty ones (`kong.router.fields`, `get_http_segments`).
//!
//! Invariant: normalising never makes the text longer, so it is done in place in the caller's
//! buffer, and a segment or a range of segments is one slice of the path (the pieces of a
//! range are joined with the `/` that separated them).

/// `uri` without its arguments: everything from the first `?` after the first byte on is
/// dropped (Kong's `strip_uri_args` looks for it from the second byte).
pub fn strip_args(uri: &[u8]) -> &[u8] {
    match uri.iter().skip(1).position(|&b| b == b'?') {
        Some(i) => &uri[..i + 1],
        None => uri,
    }
}

/// The path Kong routes a request URI on, written to `out` (cleared first): its arguments
/// dropped ([`strip_args`]), then normalised ([`normalize_path`]). Decoding can make bytes
/// that are not UTF-8 (`%FF`): the caller decides what such a request gets.
pub fn request_path(uri: &[u8], out: &mut Vec<u8>) {
    normalize_path(strip_args(uri), out);
}

/// `path` normalised as `kong.tools.uri.normalize(path, true)` does, written to `out` (cleared
/// first):
///
/// 1. each `%XX` (hex digits in either case) is decoded, except those of the reserved
///    characters `! * ' ( ) ; : @ & = + $ , / ? % # [ ]`, which stay encoded with the hex in
///    upper case (`%2f` becomes `%2F`, `%41` becomes `A`); decoding is done once, so `%252F`
///    stays as it is;
/// 2. dot segments are removed (`/a/./b` is `/a/b`, `/a/../b` is `/b`, a `..` above the
///    root is dropped), as RFC 3986's `remove_dot_segments` does;
/// 3. every run of slashes becomes one (`//a///b` is `/a/b`).
pub fn normalize_path(path: &[u8], out: &mut Vec<u8>) {
    out.clear();
    decode(path, out);
    if memchr::memchr(b'.', out).is_none() && memchr::memmem::find(out, b"//").is_none() {
        return;
    }
    remove_dots(out);
}

/// Whether Kong keeps `%XX` of this byte encoded.
fn reserved(b: u8) -> bool {
    b"!*'();:@&=+$,/?%#[]".contains(&b)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Step 1 of [`normalize_path`]: appends `path` to `out` with its triplets decoded.
fn decode(path: &[u8], out: &mut Vec<u8>) {
    let mut rest = path;
    while let Some(i) = memchr::memchr(b'%', rest) {
        out.extend_from_slice(&rest[..i]);
        let triplet = rest
            .get(i + 1..i + 3)
            .and_then(|h| Some((hex(h[0])?, hex(h[1])?)));
        match triplet {
            Some((hi, lo)) => {
                let byte = hi << 4 | lo;
                if reserved(byte) {
                    out.push(b'%');
                    out.push(rest[i + 1].to_ascii_uppercase());
                    out.push(rest[i + 2].to_ascii_uppercase());
                } else {
                    out.push(byte);
                }
                rest = &rest[i + 3..];
            }
            None => {
                out.push(b'%');
                rest = &rest[i + 1..];
            }
        }
    }
    out.extend_from_slice(rest);
}

/// Steps 2 and 3 of [`normalize_path`], in place. The input is consumed from `r` on and the
/// output written from 0 to `w`, segment by segment, each output segment starting with its `/`
/// (except a first one when the path does not start with `/`), so dropping the last output
/// segment is cutting `w` back to the last `/` before it. Output never outgrows the input
/// consumed (`w <= r`).
fn remove_dots(buf: &mut Vec<u8>) {
    let end = buf.len();
    let (mut r, mut w) = (0, 0);
    let pop = |buf: &[u8], w: usize| buf[..w].iter().rposition(|&b| b == b'/').unwrap_or(0);
    while r < end {
        let rest = &buf[r..end];
        let at = |i: usize| rest.get(i).copied();
        match (at(0), at(1), at(2), at(3)) {
            // "/." or "/.." ending the path: the path ends with a "/" (after going up one).
            (Some(b'/'), Some(b'.'), None, _) => {
                buf[w] = b'/';
                w += 1;
                r = end;
            }
            (Some(b'/'), Some(b'.'), Some(b'.'), None) => {
                w = pop(buf, w);
                buf[w] = b'/';
                w += 1;
                r = end;
            }
            // "." or ".." as all that is left: nothing.
            (Some(b'.'), None, _, _) | (Some(b'.'), Some(b'.'), None, _) => r = end,
            // A leading "../" or "./" is dropped.
            (Some(b'.'), Some(b'.'), Some(b'/'), _) => r += 3,
            (Some(b'.'), Some(b'/'), _, _) => r += 2,
            // "/./" is "/"; "/../" is "/" after going up one.
            (Some(b'/'), Some(b'.'), Some(b'/'), _) => r += 2,
            (Some(b'/'), Some(b'.'), Some(b'.'), Some(b'/')) => {
                r += 3;
                w = pop(buf, w);
            }
            // Slashes merged.
            (Some(b'/'), Some(b'/'), _, _) => r += 1,
            // A segment: up to the next "/" after the first byte.
            _ => {
                let len = rest[1..]
                    .iter()
                    .position(|&b| b == b'/')
                    .map_or(rest.len(), |i| i + 1);
                buf.copy_within(r..r + len, w);
                r += len;
                w += len;
            }
        }
    }
    buf.truncate(w);
}

/// A field derived from the path: `http.path` itself, `http.path.segments.len`, one segment
/// (`http.path.segments.N`, from 0) or a range (`http.path.segments.N_M`, N < M, the pieces N
/// to M joined with `/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathField {
    /// `http.path`.
    Path,
    /// `http.path.segments.len`: the number of segments (an Int).
    Len,
    /// `http.path.segments.N`.
    Segment(usize),
    /// `http.path.segments.N_M`.
    Range(usize, usize),
}

const SEGMENTS: &str = "http.path.segments.";

impl PathField {
    /// The path field `name` stands for, or `None` when it is not one (any other field, or a
    /// segment name whose numbers are not decimal: Kong finds no value for it either).
    pub fn of(name: &str) -> Option<PathField> {
        if name == "http.path" {
            return Some(PathField::Path);
        }
        let spec = name.strip_prefix(SEGMENTS)?;
        if spec == "len" {
            return Some(PathField::Len);
        }
        let number = |s: &str| -> Option<usize> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Larger than any path has segments: never a value.
            Some(s.parse().unwrap_or(usize::MAX))
        };
        match spec.split_once('_') {
            None => Some(PathField::Segment(number(spec)?)),
            Some((a, b)) => Some(PathField::Range(number(a)?, number(b)?)),
        }
    }
}

/// The segments of a path, as Kong's `get_http_segments` makes them: the path without its first
/// character, split at `/`, without trailing empty segments (`/` has none, `/a/b/` has two).
/// Nothing is copied or allocated: each lookup scans the path.
#[derive(Debug, Clone, Copy)]
pub struct Segments<'a> {
    /// The path after its first character, without trailing slashes.
    body: &'a str,
    len: usize,
}

impl<'a> Segments<'a> {
    /// The segments of `path`.
    pub fn new(path: &'a str) -> Segments<'a> {
        let mut chars = path.chars();
        chars.next();
        let body = chars.as_str().trim_end_matches('/');
        let len = if body.is_empty() {
            0
        } else {
            1 + memchr::memchr_iter(b'/', body.as_bytes()).count()
        };
        Segments { body, len }
    }

    /// How many segments there are (`http.path.segments.len`).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none (the path is `/`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where segment `i` starts in the body (`i < len`).
    fn start(&self, i: usize) -> usize {
        if i == 0 {
            return 0;
        }
        memchr::memchr_iter(b'/', self.body.as_bytes())
            .nth(i - 1)
            .map_or(self.body.len(), |p| p + 1)
    }

    /// Where the segment starting at `start` ends.
    fn end(&self, start: usize) -> usize {
        memchr::memchr(b'/', &self.body.as_bytes()[start..]).map_or(self.body.len(), |p| start + p)
    }

    /// The text of a segment field, or `None` when the path has no value for it (a segment
    /// past the last; a range whose first number is not below its second, or that reaches past
    /// the last segment). `None` for [`PathField::Path`] and [`PathField::Len`], which are not
    /// text of a segment.
    pub fn get(&self, field: PathField) -> Option<&'a str> {
        match field {
            PathField::Segment(i) if i < self.len => {
                let start = self.start(i);
                Some(&self.body[start..self.end(start)])
            }
            PathField::Range(a, b) if a < b && b < self.len => {
                let start = self.start(a);
                let last = self.start(b);
                Some(&self.body[start..self.end(last)])
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(uri: &str) -> String {
        let mut out = Vec::new();
        request_path(uri.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn reserved_characters_stay_encoded_in_upper_case_and_others_are_decoded() {
        assert_eq!(normalized("/a%2fb"), "/a%2Fb");
        assert_eq!(normalized("/a%2Fb"), "/a%2Fb");
        assert_eq!(normalized("/%41%62%7e%2D"), "/Ab~-");
        assert_eq!(normalized("/%3f%23%25%5b"), "/%3F%23%25%5B");
        assert_eq!(normalized("/%252F"), "/%252F", "decoded once");
        assert_eq!(normalized("/100%"), "/100%");
        assert_eq!(normalized("/%zz%4"), "/%zz%4");
        assert_eq!(normalized("/caf%C3%A9"), "/café");
        assert_eq!(
            normalized("/%2e%2E/a"),
            "/a",
            "decoded before dots are removed"
        );
    }

    #[test]
    fn dot_segments_and_repeated_slashes_go() {
        for (uri, path) in [
            ("/", "/"),
            ("", ""),
            ("/a/./b", "/a/b"),
            ("/a/../b", "/b"),
            ("/a/b/..", "/a/"),
            ("/a/b/.", "/a/b/"),
            ("/../../a", "/a"),
            ("/..", "/"),
            ("/.", "/"),
            ("//a///b//", "/a/b/"),
            ("/a/.../b", "/a/.../b"),
            ("/a/..b/c", "/a/..b/c"),
            ("/a.json", "/a.json"),
            ("/a/b/../../../c/./d/", "/c/d/"),
            ("a/../b", "/b"),
            ("../a", "a"),
            ("./a", "a"),
            (".", ""),
        ] {
            assert_eq!(normalized(uri), path, "{uri}");
        }
    }

    #[test]
    fn arguments_are_dropped_from_the_first_question_mark_after_the_first_byte() {
        assert_eq!(normalized("/a/b?x=1?y"), "/a/b");
        assert_eq!(normalized("/?"), "/");
        assert_eq!(normalized("?a"), "?a");
        assert_eq!(normalized("/a%3Fb?c"), "/a%3Fb");
    }

    #[test]
    fn undecodable_bytes_are_left_to_the_caller() {
        let mut out = Vec::new();
        request_path(b"/%FF%fe", &mut out);
        assert_eq!(out, b"/\xFF\xFE");
    }

    fn get(path: &str, name: &str) -> Option<String> {
        Segments::new(path)
            .get(PathField::of(name).unwrap())
            .map(str::to_owned)
    }

    #[test]
    fn segments_skip_the_first_character_and_trailing_empty_pieces() {
        for (path, len) in [
            ("/", 0),
            ("", 0),
            ("/a", 1),
            ("/a/", 1),
            ("/a/b//", 2),
            ("//a", 2),
        ] {
            assert_eq!(Segments::new(path).len(), len, "{path}");
        }
        assert_eq!(get("/a/b/c", "http.path.segments.0").as_deref(), Some("a"));
        assert_eq!(get("/a/b/c", "http.path.segments.2").as_deref(), Some("c"));
        assert_eq!(get("/a/b/c", "http.path.segments.3"), None);
        assert_eq!(get("/a/b/c/", "http.path.segments.3"), None);
        // Only an unnormalised path has empty pieces inside.
        assert_eq!(get("//a", "http.path.segments.0").as_deref(), Some(""));
        assert_eq!(get("/", "http.path.segments.0"), None);
    }

    #[test]
    fn ranges_join_their_pieces_and_need_both_ends_inside_the_path() {
        assert_eq!(
            get("/a/b/c", "http.path.segments.0_1").as_deref(),
            Some("a/b")
        );
        assert_eq!(
            get("/a/b/c", "http.path.segments.1_2").as_deref(),
            Some("b/c")
        );
        assert_eq!(
            get("/a/b/c", "http.path.segments.0_2").as_deref(),
            Some("a/b/c")
        );
        assert_eq!(get("/a/b/c", "http.path.segments.1_3"), None);
        assert_eq!(get("/a/b/c", "http.path.segments.1_1"), None);
        assert_eq!(get("/a/b/c", "http.path.segments.2_1"), None);
    }

    #[test]
    fn path_fields_by_name() {
        assert_eq!(PathField::of("http.path"), Some(PathField::Path));
        assert_eq!(
            PathField::of("http.path.segments.len"),
            Some(PathField::Len)
        );
        assert_eq!(
            PathField::of("http.path.segments.12"),
            Some(PathField::Segment(12))
        );
        assert_eq!(
            PathField::of("http.path.segments.01"),
            Some(PathField::Segment(1))
        );
        assert_eq!(
            PathField::of("http.path.segments.1_2"),
            Some(PathField::Range(1, 2))
        );
        assert_eq!(
            PathField::of("http.path.segments.99999999999999999999999"),
            Some(PathField::Segment(usize::MAX))
        );
        for other in [
            "http.host",
            "http.path.segments.x",
            "http.path.segments.1_2_3",
            "http.path.segments._1",
            "http.path.segments.",
        ] {
            assert_eq!(PathField::of(other), None, "{other}");
        }
    }
}
