//! Errors. Expression errors point into the source: line, column, the line itself and a caret
//! under the span, and say in plain words what was expected.

use std::fmt;
use std::ops::Range;

use crate::value::Type;

/// What went wrong with an expression.
///
/// Exhaustive on purpose: these are the language's three classes of error (docs/language.md,
/// "Errors"), and a new check fits one of them; callers may match them without a catch-all arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExprErrorKind {
    /// The text is not in the language (docs/language.md, "Text" and "Grammar and precedence").
    Syntax,
    /// The text parses but does not fit the schema (docs/language.md "Schemas and field names",
    /// "Errors"), or a regex does not compile.
    Semantic,
    /// A documented limit was exceeded (see [`crate::Limits`]).
    Limit,
}

/// An error in an expression, with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// What is wrong.
    pub kind: ExprErrorKind,
    /// The plain-words message, without position.
    pub message: String,
    /// Byte range in the source.
    pub span: Range<usize>,
    /// 1-based line of `span.start`.
    pub line: usize,
    /// 1-based column (in characters) of `span.start`.
    pub column: usize,
    // Boxed: errors are rare, and a small `Result` keeps the parsing paths that return one cheap.
    location: Box<Location>,
}

impl ExprError {
    pub(crate) fn new(
        kind: ExprErrorKind,
        source: &str,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> ExprError {
        let location = Location::new(source, span);
        ExprError {
            kind,
            message: message.into(),
            span: location.span.clone(),
            line: location.line,
            column: location.column,
            location: Box::new(location),
        }
    }

    /// The source line the error points into, as it is shown under the message: a line longer
    /// than [`SHOWN_CHARS`] characters is cut to a window around the error, with `…` marking each
    /// cut, and control characters other than tab are shown as spaces.
    pub fn source_line(&self) -> &str {
        &self.location.source_line
    }

    /// Where the error is, as [`Location`] shows it.
    pub fn location(&self) -> &Location {
        &self.location
    }
}

/// A place in an expression's text, shown the way errors show it: line and column, the source
/// line (windowed when long) and a caret under the span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Byte range in the source.
    pub span: Range<usize>,
    /// 1-based line of `span.start`.
    pub line: usize,
    /// 1-based column (in characters) of `span.start`.
    pub column: usize,
    source_line: String,
    caret_indent: String,
    caret_len: usize,
}

impl Location {
    /// The location of `span` (clamped to `source` and to character boundaries) in `source`.
    pub fn new(source: &str, span: Range<usize>) -> Location {
        // It scans the source up to the span's line: to place many spans of one source, see
        // `Locator`.
        crate::work::add(source.len());
        let start = floor_char_boundary(source, span.start.min(source.len()));
        let end = floor_char_boundary(source, span.end.clamp(start, source.len()));
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        let line = source[..start].matches('\n').count() + 1;
        let text = source[line_start..line_end].trim_end_matches('\r');
        let column = source[line_start..start].chars().count() + 1;
        let (source_line, caret_indent, caret_len) = snippet(
            text,
            column - 1,
            source[start..end.min(line_end)].chars().count(),
        );
        Location {
            span: start..end,
            line,
            column,
            source_line,
            caret_indent,
            caret_len,
        }
    }

    /// The source line as shown (see [`ExprError::source_line`]).
    pub fn source_line(&self) -> &str {
        &self.source_line
    }

    /// The line under the source line: the caret, indented to the span.
    pub fn caret(&self) -> String {
        format!("{}{}", self.caret_indent, "^".repeat(self.caret_len))
    }
}

impl fmt::Display for Location {
    /// ```text
    ///   |
    /// 1 | http.host == "a" && http.path ^= "/b"
    ///   |                     ^^^^^^^^^^^^^^^^^
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gutter = self.line.to_string();
        let pad = " ".repeat(gutter.len());
        write!(
            f,
            "{pad} |\n{gutter} | {}\n{pad} | {}",
            self.source_line,
            self.caret()
        )
    }
}

/// The most characters of caller input (a field name, an id, an address, a literal) that an
/// error message quotes; longer input is cut, and the cut marked with `…`.
pub const QUOTED_CHARS: usize = 64;

/// `s` as an error message quotes it: at most [`QUOTED_CHARS`] characters, control characters
/// shown as spaces, `…` where it was cut.
pub fn excerpt(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(4 * QUOTED_CHARS + 3));
    for (i, c) in s.chars().enumerate() {
        if i == QUOTED_CHARS {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

/// The most characters of a source line an error shows.
pub const SHOWN_CHARS: usize = 100;
/// How many characters before the error a cut line keeps.
const SHOWN_BEFORE: usize = 40;

/// The displayed line, the caret's indent and the caret's length, for a span starting at
/// character `col` (0-based) of `line` and covering `len` characters of it. Long lines are
/// windowed so that a 1 MiB expression on one line gives a readable error, not 2 MiB of text.
fn snippet(line: &str, col: usize, len: usize) -> (String, String, usize) {
    let total = line.chars().count();
    window(total, col, len, |from| line.chars().skip(from))
}

/// [`snippet`] of a line of `total` characters, whose characters from number `from` on
/// `chars_from(from)` gives.
fn window<I: Iterator<Item = char>>(
    total: usize,
    col: usize,
    len: usize,
    chars_from: impl FnOnce(usize) -> I,
) -> (String, String, usize) {
    // The position can lie in trailing carriage returns, which the shown line leaves out: the
    // caret then goes just past its end.
    let col = col.min(total);
    let (from, to) = shown_range(total, col);
    let mut shown = String::new();
    let mut indent = String::new();
    if from > 0 {
        shown.push('…');
        indent.push(' ');
    }
    for (i, c) in (from..).zip(chars_from(from).take(to - from)) {
        // Tabs stay tabs so the caret lines up under the source line whatever the tab width.
        let c = if c.is_control() && c != '\t' { ' ' } else { c };
        shown.push(c);
        if i < col {
            indent.push(if c == '\t' { '\t' } else { ' ' });
        }
    }
    if to < total {
        shown.push('…');
    }
    // At least one caret (an error at the end of the line points just past it); none past a cut.
    let caret_len = len.min(to.saturating_sub(col)).max(1);
    (shown, indent, caret_len)
}

/// The characters `from..to` of a line of `total` that are shown, for a position at `col`.
fn shown_range(total: usize, col: usize) -> (usize, usize) {
    if total <= SHOWN_CHARS {
        (0, total)
    } else {
        let from = col.saturating_sub(SHOWN_BEFORE);
        (from, (from + SHOWN_CHARS).min(total))
    }
}

/// Places many spans of one source: what [`Location::new`] gives, in time proportional to the
/// shown window rather than to the source (which `Location::new` scans up to the span's line
/// for each span). Explaining a route places each of its predicates: with thousands of them on
/// one line, scanning the line for each would be quadratic.
pub(crate) struct Locator<'a> {
    source: &'a str,
    /// Each line's start and the end of its text (before the `\n` and any `\r` before it).
    lines: Vec<(usize, usize)>,
    /// The characters in `source[..i * MARK_EVERY]`, for each `i`.
    marks: Vec<usize>,
}

/// Bytes between two character counts a [`Locator`] keeps.
const MARK_EVERY: usize = 256;

impl<'a> Locator<'a> {
    /// One pass over `source`.
    pub(crate) fn new(source: &'a str) -> Locator<'a> {
        crate::work::add(source.len());
        let bytes = source.as_bytes();
        let mut lines = Vec::new();
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', bytes).chain([bytes.len()]) {
            let text = source[start..nl].trim_end_matches('\r');
            lines.push((start, start + text.len()));
            start = nl + 1;
        }
        let mut marks = Vec::with_capacity(bytes.len() / MARK_EVERY + 1);
        marks.push(0);
        for chunk in bytes.chunks(MARK_EVERY) {
            let before = marks.last().copied().unwrap_or(0);
            marks.push(before + char_starts(chunk));
        }
        Locator {
            source,
            lines,
            marks,
        }
    }

    /// Characters in `source[..i]` (`i` a character boundary).
    fn chars_before(&self, i: usize) -> usize {
        let m = i / MARK_EVERY;
        crate::work::add(i - m * MARK_EVERY);
        self.marks[m] + char_starts(&self.source.as_bytes()[m * MARK_EVERY..i])
    }

    /// What `Location::new(source, span)` gives.
    pub(crate) fn locate(&self, span: Range<usize>) -> Location {
        let source = self.source;
        let start = floor_char_boundary(source, span.start.min(source.len()));
        let end = floor_char_boundary(source, span.end.clamp(start, source.len()));
        // The line holding `start`: the last one starting at or before it.
        let line = self.lines.partition_point(|&(s, _)| s <= start) - 1;
        let (line_start, text_end) = self.lines[line];
        let line_end = self
            .lines
            .get(line + 1)
            .map_or(source.len(), |&(next, _)| next - 1);
        let at = self.chars_before(line_start);
        let column = self.chars_before(start) - at + 1;
        let total = self.chars_before(text_end) - at;
        let len = self.chars_before(end.min(line_end)) - self.chars_before(start);
        // The byte where character `col` (clamped as `window` clamps it) of the line starts;
        // the window begins at most `SHOWN_BEFORE` characters before it.
        let col = (column - 1).min(total);
        let mut at_col = start.min(text_end);
        let (from, _) = shown_range(total, col);
        let (source_line, caret_indent, caret_len) = window(total, col, len, |from| {
            let mut back = col - from;
            while back > 0 {
                at_col -= 1;
                if source.is_char_boundary(at_col) {
                    back -= 1;
                }
            }
            source[at_col..text_end].chars()
        });
        crate::work::add(SHOWN_CHARS + (col - from) * 4);
        Location {
            span: start..end,
            line: line + 1,
            column,
            source_line,
            caret_indent,
            caret_len,
        }
    }
}

/// Characters starting in `bytes` (bytes that are not UTF-8 continuation bytes).
fn char_starts(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b as i8) >= -0x40).count()
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for ExprError {
    /// ```text
    /// line 1, column 11: expected an operator (==, !=, ~, ...)
    ///   |
    /// 1 | http.host = "a"
    ///   |           ^
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}\n{}",
            self.line, self.column, self.message, self.location
        )
    }
}

impl std::error::Error for ExprError {}

/// Why a text is not a field name, or not one a request can have: the rules are
/// `schema::field_name`'s (docs/language.md "Schemas and field names").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameFault {
    /// The name is empty (for a wildcard declaration: nothing before `.*`).
    Empty,
    /// Its first character is not an ASCII letter.
    NotLetterFirst,
    /// It has a character other than ASCII letters, digits, `_` and `.`.
    BadCharacter,
    /// Two dots with nothing between them (`a..b`). Kong's grammar takes it; a request cannot
    /// have such a field.
    EmptySegment,
    /// It ends with `.`: its last segment is empty (`http.headers.`). Kong's grammar takes it;
    /// a request cannot have such a field.
    EndsWithDot,
}

impl NameFault {
    /// Why, in words: the end of [`NameError`]'s message.
    pub fn why(self) -> &'static str {
        match self {
            NameFault::Empty => "it is empty",
            NameFault::NotLetterFirst => "it must start with an ASCII letter",
            NameFault::BadCharacter => {
                "it has a character other than ASCII letters, digits, `_` and `.` (in a schema, \
                 the name may end in `.*`)"
            }
            NameFault::EmptySegment => "it has an empty segment (`..`)",
            NameFault::EndsWithDot => "it ends with `.` (the name after the last `.` is empty)",
        }
    }
}

/// A field name refused: the name (as quoted, [`excerpt`]) and why. Its message reads
/// ``invalid field name `…`: why``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    /// The name refused, cut as [`excerpt`] cuts it.
    pub name: String,
    /// What is wrong with it.
    pub fault: NameFault,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid field name `{}`: {}",
            self.name,
            self.fault.why()
        )
    }
}

impl std::error::Error for NameError {}

/// Every error of the library.
///
/// `#[non_exhaustive]`: the library will grow new kinds of failure (with data of their own), and
/// adding one must not break callers that match on errors. A caller that has to handle every
/// kind, as the C ABI does to give each its status code, matches [`Error::code`] instead: a
/// closed list that the core maps every variant to, with an exhaustive match here, so that a
/// new variant cannot be added without deciding its code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A syntax, validation or limit error in an expression.
    Expr(ExprError),
    /// A field name that is not in the schema.
    UnknownField(String),
    /// A field name that is not an identifier (or `prefix.*` in a schema).
    InvalidFieldName(NameError),
    /// `Schema::add_field` with a name that is already there.
    DuplicateField(String),
    /// A context value whose type differs from the field's.
    TypeMismatch {
        /// The field compared.
        field: String,
        /// The type its operator needs on that side.
        expected: Type,
        /// The type the expression gives.
        found: Type,
    },
    /// `Router::add` with an id that is already there.
    DuplicateRoute(uuid::Uuid),
    /// A limit outside of expressions (values per field, distinct wildcard field names).
    Limit(String),
    /// A router and a context built from different schemas.
    SchemaMismatch,
    /// A panic interrupted a change of the router part-way (see `Router::is_broken`): it
    /// refuses to match until a sync rebuilds it.
    Broken,
    /// A table image that cannot be opened: not an image, corrupt, truncated, or built by
    /// another library version or for another schema (see [`crate::ImageRouter`]).
    Image(crate::image::ImageError),
    /// A route id that is not a UUID (see [`crate::route_list::parse_id`]).
    BadId {
        /// The text given, cut to an excerpt.
        text: String,
        /// Why it is not a UUID.
        reason: String,
    },
    /// Bytes given as text that are not UTF-8 (see [`crate::route_list::read_text`]).
    NotUtf8 {
        /// What the bytes were given as (`id`, `expr`).
        what: &'static str,
        /// Where the bytes stop being UTF-8.
        error: std::str::Utf8Error,
    },
}

/// The kind of an [`Error`], without its data (see [`Error::code`]).
///
/// Exhaustive on purpose, unlike [`Error`]: a new code is a new outcome every binding must
/// report (the C ABI gives each its `ATC_ERR_*` status), so adding one is meant to break their
/// matches until they handle it. A new kind of [`Error`] that is a case of an existing code
/// (another limit, another malformed name) maps to that code and changes nothing for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// [`Error::Expr`]: an expression that does not parse, validate or fit the limits.
    Expression,
    /// [`Error::UnknownField`].
    UnknownField,
    /// [`Error::InvalidFieldName`].
    InvalidFieldName,
    /// [`Error::DuplicateField`] or [`Error::DuplicateRoute`]: a name or id already there.
    Duplicate,
    /// [`Error::TypeMismatch`].
    TypeMismatch,
    /// [`Error::Limit`]: a limit outside of expressions.
    Limit,
    /// [`Error::SchemaMismatch`].
    SchemaMismatch,
    /// [`Error::Broken`].
    Broken,
    /// [`Error::Image`].
    Image,
    /// [`Error::BadId`].
    BadId,
    /// [`Error::NotUtf8`].
    NotUtf8,
}

impl Error {
    /// The kind of the error, from a closed list (see [`ErrorCode`]).
    pub fn code(&self) -> ErrorCode {
        // No catch-all arm: a new variant has to be given its code here.
        match self {
            Error::Expr(_) => ErrorCode::Expression,
            Error::UnknownField(_) => ErrorCode::UnknownField,
            Error::InvalidFieldName(_) => ErrorCode::InvalidFieldName,
            Error::DuplicateField(_) | Error::DuplicateRoute(_) => ErrorCode::Duplicate,
            Error::TypeMismatch { .. } => ErrorCode::TypeMismatch,
            Error::Limit(_) => ErrorCode::Limit,
            Error::SchemaMismatch => ErrorCode::SchemaMismatch,
            Error::Broken => ErrorCode::Broken,
            Error::Image(_) => ErrorCode::Image,
            Error::BadId { .. } => ErrorCode::BadId,
            Error::NotUtf8 { .. } => ErrorCode::NotUtf8,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Expr(e) => e.fmt(f),
            Error::UnknownField(n) => write!(f, "unknown field `{n}`: it is not in the schema"),
            Error::InvalidFieldName(e) => e.fmt(f),
            Error::DuplicateField(n) => write!(f, "field `{n}` is already in the schema"),
            Error::TypeMismatch {
                field,
                expected,
                found,
            } => write!(
                f,
                "field `{field}` holds {expected} values, but a {found} value was given"
            ),
            Error::DuplicateRoute(id) => write!(f, "a route with id {id} already exists"),
            Error::Limit(m) => f.write_str(m),
            Error::SchemaMismatch => {
                f.write_str("the context was created from another schema than the router")
            }
            Error::Broken => f.write_str(
                "the router is broken: a panic interrupted a change of its routes part-way; \
                 sync the full route list to rebuild it",
            ),
            Error::Image(e) => e.fmt(f),
            Error::BadId { text, reason } => write!(
                f,
                "invalid route id \"{text}\": {reason} (expected a UUID such as a8f2c1e4-…)"
            ),
            // Rust's own text of the error after the argument's name: what Kong's library
            // reports, and what Kong's tests look for in the log.
            Error::NotUtf8 { what, error } => write!(f, "`{what}` is not valid UTF-8: {error}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<NameError> for Error {
    fn from(e: NameError) -> Error {
        Error::InvalidFieldName(e)
    }
}

impl From<ExprError> for Error {
    fn from(e: ExprError) -> Error {
        Error::Expr(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_span_on_the_right_line() {
        let src = "a == 1 &&\n\tb ~ \"(\"";
        let start = src.find("\"(").unwrap();
        let e = ExprError::new(ExprErrorKind::Semantic, src, start..start + 3, "bad regex");
        assert_eq!((e.line, e.column), (2, 6));
        assert_eq!(
            e.to_string(),
            "line 2, column 6: bad regex\n  |\n2 | \tb ~ \"(\"\n  | \t    ^^^"
        );
    }

    #[test]
    fn long_lines_are_cut_to_a_window_around_the_error() {
        // Near the start: only the end is cut.
        let src = format!("a = 1 {}", "x".repeat(200));
        let e = ExprError::new(ExprErrorKind::Syntax, &src, 2..3, "m");
        assert_eq!(e.source_line(), format!("a = 1 {}…", "x".repeat(94)));
        assert!(e.to_string().ends_with("\n  |   ^"));
        // In the middle: both ends are cut, 40 characters are kept before the error.
        let src = format!("{}é = 1 {}", "x".repeat(300), "y".repeat(300));
        let e = ExprError::new(ExprErrorKind::Syntax, &src, 302..304, "m");
        assert_eq!(e.column, 302);
        assert_eq!(
            e.source_line(),
            format!("…{}é = 1 {}…", "x".repeat(39), "y".repeat(55))
        );
        assert!(e
            .to_string()
            .ends_with(&format!("\n  | {}^^", " ".repeat(41))));
        // A span running past the cut gets carets up to the cut only.
        let e = ExprError::new(ExprErrorKind::Limit, &src, 10..src.len(), "m");
        assert!(e
            .to_string()
            .ends_with(&format!("  |  {}{}", " ".repeat(9), "^".repeat(90))));
    }

    #[test]
    fn control_characters_in_the_shown_line_become_spaces() {
        let src = "a\r== \u{1}1";
        let e = ExprError::new(ExprErrorKind::Syntax, src, 5..6, "m");
        assert_eq!(e.source_line(), "a ==  1");
        assert_eq!(e.column, 6);
    }

    #[test]
    fn a_locator_places_every_span_as_location_new_does() {
        let long = format!("{}é = \"ü\" {}", "x".repeat(300), "y".repeat(300));
        let sources = [
            String::new(),
            "a == 1".to_owned(),
            "a == 1 &&\n\tb ~ \"(\"\r\n\r\rc\n".to_owned(),
            "é\r\r\n\né == \"ü\" &&\r\nx".to_owned(),
            long.clone(),
            format!("{long}\n{long}\r\n\n{}", "z".repeat(1000)),
        ];
        for src in &sources {
            let locator = Locator::new(src);
            let mut ends: Vec<usize> = (0..=src.len() + 2).step_by(29).collect();
            ends.extend([1, src.len(), src.len() + 1]);
            for start in (0..=src.len() + 1).filter(|i| i % 5 == 0 || src.len() < 64) {
                for &end in &ends {
                    let want = Location::new(src, start..end);
                    assert_eq!(locator.locate(start..end), want, "{src:?} {start}..{end}");
                }
            }
        }
    }

    #[test]
    fn quoted_input_is_cut_to_a_window() {
        assert_eq!(excerpt("http.headers.a"), "http.headers.a");
        let long = "é".repeat(5000);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), QUOTED_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(excerpt("a\nb"), "a b");
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let src = "a == \"é\" x";
        let e = ExprError::new(ExprErrorKind::Syntax, src, 10..11, "m");
        assert_eq!(e.column, 10);
    }
}
