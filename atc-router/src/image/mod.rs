//! A table image: a compiled table written once, as bytes that any process can check and read in
//! place (a file every worker of a node maps read-only).
//!
//! This module is the image's container (`container.rs`: a header that says what the bytes are
//! and which library wrote them, a table of sections, a checksum over both, and a reader that
//! refuses anything it cannot prove well-formed) and the flat tables stages build their image
//! forms from (`exact_table.rs`, `prefix_table.rs`). What the sections hold is the business of
//! the stages that write and read them (`index/image.rs` for the index).
//!
//! Invariants a reader relies on:
//! - Nothing is read from an image before `Image::open` has checked it whole: magic, format
//!   version, library version, length, checksum, tag, and every section inside the image,
//!   after the section table, 64-byte aligned from the image's start, not overlapping another.
//! - Every read after that goes through a bounds-checked slice: a section is a `&[u8]` and its
//!   words are read by index (`Words`), so a reader's bug is a `None`, never a read out of
//!   bounds. The crate has no `unsafe`; mapping a file is the C library's job.
//! - The image holds no pointer: positions are offsets from the image's start (sections) or
//!   from a section's start (what sections hold), so it means the same at any address.

mod container;
pub mod exact_table;
pub mod prefix_table;

#[doc(hidden)]
pub use container::forge;
pub use container::{Image, ImageError, ImageWriter, Words, FORMAT_VERSION, MAGIC};
