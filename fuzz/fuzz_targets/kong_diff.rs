//! Differential target against Kong's `atc-router` 1.7.1: the input is a structured case
//! (`atc_testkit::Case`: a schema, a route table, requests) plus routes given as text, and both
//! libraries must agree on it exactly as the proptests of `testkit/tests/kong_diff.rs` require
//! (same routes accepted, same fields, same winner, same decided values and captures; see
//! `testkit/tests/vs_kong/mod.rs`, which this target includes). Text Kong's library would abort
//! on goes to our side only and must be a clean result.
//!
//! Input layout: UTF-8 text up to the first `\n\0` holds extra routes, one per line (so seeds
//! can carry the expressions of Kong's own tests, and the dictionary's tokens land in them);
//! the bytes after it are decoded by `arbitrary` into the case. Without the separator, all
//! bytes are the case.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use atc_testkit::Case;
use libfuzzer_sys::fuzz_target;

#[path = "../../testkit/tests/vs_kong/mod.rs"]
mod vs_kong;

fuzz_target!(|data: &[u8]| {
    let (text, rest) = match data.windows(2).position(|w| w == b"\n\0") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (&[][..], data),
    };
    let Ok(mut case) = Case::arbitrary(&mut Unstructured::new(rest)) else {
        return;
    };
    case.texts = String::from_utf8_lossy(text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(16)
        .map(str::to_owned)
        .collect();
    vs_kong::check(&case.render());
});
