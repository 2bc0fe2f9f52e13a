//! Inputs on which a fuzz target (fuzz/, see fuzz/README.md) crashed, each kept as a test: the
//! original artifact, reduced forms that name the cause, and the same input through the calls a
//! gateway makes. A test here fails until its bug is fixed, and guards the fix afterwards.

use std::sync::Arc;

use atc_router::{
    parse, parse_with_limits, Error, ExprError, ExprErrorKind, Limits, Router, Schema, Type, Uuid,
};

fn schema() -> Arc<Schema> {
    let mut s = Schema::new();
    s.add_field("http.path", Type::String).unwrap();
    Arc::new(s)
}

/// What every error must allow: rendering, a position on line 1 (these inputs have no line
/// feed), a caret line.
fn check_rendering(src: &str, e: &ExprError) {
    assert_eq!(e.line, 1);
    assert!(e.column >= 1);
    assert!(e.span.end <= src.len());
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("line 1, column {}: ", e.column)),
        "{shown}"
    );
    assert!(shown.lines().last().unwrap().contains('^'), "{shown}");
    assert!(shown.len() < 1024);
}

mod error_position_in_trailing_carriage_returns {
    //! Found by the `parse` target in its first 10-minute run (artifact
    //! `crash-da1abf29f872705ed1a313cbf368dd5067015d2b`, 258 bytes: `net.srg.net`, stray bytes and
    //! 224 CRs, no line feed), under the target's tight limits (`max_expression_len: 256`):
    //!
    //! ```text
    //! panicked at atc-router/src/error.rs:100:60: attempt to subtract with overflow
    //!   2: core::panicking::panic_const::panic_const_sub_overflow
    //!   3: atc_router::error::snippet             at atc-router/src/error.rs:100:60
    //!   4: atc_router::error::ExprError::new      at atc-router/src/error.rs:53:54
    //!   5: atc_router::parser::parse_with_limits  at atc-router/src/parser.rs:58:20
    //! ```
    //!
    //! Cause: `ExprError::new` counts the column over the raw line, but passes `snippet` the line
    //! with its trailing `\r`s trimmed. When the line is longer than `SHOWN_CHARS` (100) and the
    //! error lies more than `SHOWN_BEFORE` (40) characters into a trailing run of `\r`,
    //! `from = col - 40` is past `to = total`, and `take(to - from)` underflows. Any error there
    //! does it: a syntax error at the end of the text, or the length limit. With overflow checks
    //! (debug builds, tests, fuzzing) it is a panic — through the C ABI `ATC_ERR_PANIC`; in a
    //! release build the subtraction wraps and the message is merely odd.
    use super::*;

    /// 100 characters of route, then `&&` and 50 CRs: a syntax error at the end of the text.
    fn syntax_case() -> String {
        format!("http.path == \"{}\" &&{}", "a".repeat(100), "\r".repeat(50))
    }

    #[test]
    fn a_syntax_error_after_the_carriage_returns() {
        let src = syntax_case();
        let e = parse(&src).unwrap_err();
        assert_eq!(e.kind, ExprErrorKind::Syntax);
        check_rendering(&src, &e);
    }

    #[test]
    fn the_length_limit_inside_the_carriage_returns() {
        // Default limits: 101 characters, then CRs past the length limit.
        let len = atc_router::Limits::default().max_expression_len;
        let src = format!("{}{}", "a".repeat(101), "\r".repeat(len));
        let e = parse(&src).unwrap_err();
        assert_eq!(e.kind, ExprErrorKind::Limit);
        check_rendering(&src, &e);
    }

    #[test]
    fn through_router_add_and_validate() {
        let src = syntax_case();
        let schema = schema();
        let mut router = Router::new(schema.clone());
        let Err(Error::Expr(e)) = router.add(Uuid::from_u128(1), 1, &src) else {
            panic!("must be refused");
        };
        check_rendering(&src, &e);
        assert!(Router::validate(&schema, &src).is_err());
    }

    #[test]
    fn the_fuzzer_artifact() {
        let data: &[u8] = ARTIFACT;
        let src = String::from_utf8_lossy(data);
        let tight = Limits {
            max_expression_len: 256,
            max_depth: 4,
            max_predicates: 8,
            ..Limits::default()
        };
        let e = parse_with_limits(&src, &tight).unwrap_err();
        assert_eq!(e.kind, ExprErrorKind::Limit);
        check_rendering(&src, &e);
        check_rendering(&src, &parse(&src).unwrap_err());
    }

    /// `fuzz/artifacts/parse/crash-da1abf29f872705ed1a313cbf368dd5067015d2b`.
    const ARTIFACT: &[u8] = b"\
    \x6e\x65\x74\x2e\x73\x72\x67\x2e\x6e\x65\x74\xa4\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x65\x74\xa4\x0d\x0d\x0d\x2e\x73\x72\x67\
    \x2e\x6e\x65\x74\xa4\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x65\
    \x74\xa4\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x65\x74\xa4\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x01\x67\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x01\x67\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\x0d\
    \x0d\x0d";
}
