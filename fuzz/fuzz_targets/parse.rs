//! Arbitrary bytes → parser. Properties:
//! - parsing never panics and never overflows the stack, whatever the input;
//! - an error points inside the source (see `check_expr_error`);
//! - a successful parse prints to text that parses to the same tree, and printing is a fixpoint;
//! - limits only refuse: parsing under tighter limits either gives the same tree, a limit
//!   error, or exactly the error the default limits give.
#![no_main]

use std::borrow::Cow;

use atc_router::{parse_with_limits, ExprErrorKind, Limits};
use atc_router_fuzz::{check_expr_error, reparse_limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Invalid UTF-8 cannot reach the parser through any API (they all take &str); the lossy
    // form keeps the bytes around it useful to the fuzzer.
    let src: Cow<'_, str> = String::from_utf8_lossy(data);
    let full = parse_with_limits(&src, &Limits::default());
    match &full {
        Ok(parsed) => {
            assert_eq!(parsed.spans.len(), parsed.expr.predicates().len());
            for s in &parsed.spans {
                for r in [&s.predicate, &s.lhs, &s.field, &s.op, &s.rhs]
                    .into_iter()
                    .chain(&s.elements)
                {
                    assert!(r.start <= r.end && r.end <= src.len(), "{r:?}");
                }
            }
            let printed = parsed.expr.to_string();
            let again = parse_with_limits(&printed, &reparse_limits()).unwrap_or_else(|e| {
                panic!("the print of a parsed tree does not parse\nsource: {src:?}\nprinted: {printed:?}\n{e}")
            });
            assert_eq!(
                again.expr, parsed.expr,
                "print/re-parse changed the tree\nsource: {src:?}\nprinted: {printed:?}"
            );
            assert_eq!(
                again.expr.to_string(),
                printed,
                "printing is not a fixpoint"
            );
        }
        Err(e) => check_expr_error(&src, e),
    }

    let tight = Limits {
        max_expression_len: 256,
        max_depth: 4,
        max_predicates: 8,
        ..Limits::default()
    };
    match (parse_with_limits(&src, &tight), &full) {
        (Ok(t), Ok(f)) => assert_eq!(t.expr, f.expr, "limits changed the tree"),
        (Ok(_), Err(e)) => panic!("tighter limits accepted what the defaults refuse: {e}"),
        (Err(e), _) if e.kind == ExprErrorKind::Limit => check_expr_error(&src, &e),
        (Err(e), Err(f)) => assert_eq!(&e, f, "under tighter limits, a different error"),
        (Err(e), Ok(_)) => panic!("tighter limits refused with a non-limit error: {e}"),
    }
});
