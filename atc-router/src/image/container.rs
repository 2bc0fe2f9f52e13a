//! The container format: header, section table, sections (see the module doc of `image`).
//!
//! Layout (every integer little-endian, whatever the host):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | [`MAGIC`] |
//! | 8..12 | format version ([`FORMAT_VERSION`]) |
//! | 12..16 | number of sections (at most [`MAX_SECTIONS`]) |
//! | 16..32 | version of the library that wrote it, UTF-8, NUL-padded |
//! | 32..40 | length of the whole image in bytes |
//! | 40..48 | tag: what the writer built the image for; a reader names the tag it expects |
//! | 48..52 | CRC-32 of every byte of the image but these four |
//! | 52..64 | zero |
//! | 64.. | section table: per section its kind (u32), zero (u32), offset and length (u64) |
//!
//! Sections follow the table, each at a 64-byte aligned offset from the image's start (so a
//! section mapped at a page boundary starts on a cache line), in the order they were written.
//!
//! Invariant: [`Image::open`] accepts exactly the byte strings [`ImageWriter::finish`] can
//! produce for the expected tag and this library's version; any change to one byte of such an
//! image (and any truncation or extension) is refused, by a field check or by the checksum.

use std::fmt;
use std::ops::Range;

/// The first eight bytes of every image.
pub const MAGIC: [u8; 8] = *b"ATC-IMG\n";

/// The version of the layout this library writes and reads; any other is refused.
pub const FORMAT_VERSION: u32 = 2;

/// Most sections an image may have (a bound on what a reader parses before it trusts anything).
const MAX_SECTIONS: usize = 1024;

const HEADER: usize = 64;
const ENTRY: usize = 24;
const ALIGN: usize = 64;
const LIBRARY: Range<usize> = 16..32;
const CHECKSUM: Range<usize> = 48..52;

/// The library version an image carries: this crate's, NUL-padded to 16 bytes.
fn library_field() -> [u8; 16] {
    let mut out = [0; 16];
    let v = env!("CARGO_PKG_VERSION").as_bytes();
    let n = v.len().min(out.len());
    out[..n].copy_from_slice(&v[..n]);
    out
}

fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// The checksum of an image: CRC-32 of everything but the checksum field.
fn checksum(image: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&image[..CHECKSUM.start]);
    h.update(&image[CHECKSUM.end..]);
    h.finalize()
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Makes `image` pass the checks a tool can fake from outside: writes this library's magic,
/// format, version and `image`'s length into its header and the checksum of the result into
/// its field. For tests and the loader's fuzz target, which reach the section table's checks
/// with bytes of their choosing this way; `image` must be at least a header long.
#[doc(hidden)]
pub fn forge(image: &mut [u8]) {
    image[..8].copy_from_slice(&MAGIC);
    image[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    image[LIBRARY].copy_from_slice(&library_field());
    let len = image.len() as u64;
    image[32..40].copy_from_slice(&len.to_le_bytes());
    let sum = checksum(image);
    image[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
}

/// Why an image was refused. A reader that gets one keeps what it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    /// Shorter than a header.
    TooShort(usize),
    /// Not an image (the first bytes are not [`MAGIC`]).
    Magic,
    /// An image of another layout version.
    Format {
        /// The version the image says it has.
        found: u32,
    },
    /// Written by another version of the library (its compiled forms may differ).
    Library {
        /// The version the image names (lossy UTF-8).
        found: String,
    },
    /// The header's length is not the image's: truncated, or something appended.
    Length {
        /// What the header says.
        header: u64,
        /// The bytes there are.
        actual: usize,
    },
    /// The bytes are not the ones written (corrupt).
    Checksum {
        /// What the header says.
        stored: u32,
        /// What the bytes give.
        computed: u32,
    },
    /// An image built for something else than the reader asked for.
    Tag {
        /// The image's tag.
        found: u64,
        /// The reader's.
        expected: u64,
    },
    /// A field that must be zero is not.
    Reserved,
    /// The section table does not describe sections inside the image.
    Sections(String),
    /// A section the reader needs is not there, or not of the shape it needs.
    Section {
        /// The section's kind.
        kind: u32,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::TooShort(n) => {
                write!(f, "not a table image: {n} bytes, shorter than its header")
            }
            ImageError::Magic => write!(f, "not a table image (wrong magic bytes)"),
            ImageError::Format { found } => write!(
                f,
                "table image of format {found}; this library reads format {FORMAT_VERSION}"
            ),
            ImageError::Library { found } => write!(
                f,
                "table image written by library version {found:?}; this is {}",
                env!("CARGO_PKG_VERSION")
            ),
            ImageError::Length { header, actual } => write!(
                f,
                "table image truncated or extended: its header says {header} bytes, there are \
                 {actual}"
            ),
            ImageError::Checksum { stored, computed } => write!(
                f,
                "table image corrupt: checksum {computed:#010x}, its header says {stored:#010x}"
            ),
            ImageError::Tag { found, expected } => write!(
                f,
                "table image built for {found:#018x}, expected {expected:#018x}"
            ),
            ImageError::Reserved => write!(f, "table image corrupt: a reserved field is set"),
            ImageError::Sections(why) => write!(f, "table image corrupt: {why}"),
            ImageError::Section { kind, why } => {
                write!(f, "table image section {kind}: {why}")
            }
        }
    }
}

impl std::error::Error for ImageError {}

/// Writes an image: sections in order, then [`ImageWriter::finish`].
#[derive(Debug)]
pub struct ImageWriter {
    tag: u64,
    sections: Vec<(u32, Vec<u8>)>,
}

impl ImageWriter {
    /// An image for readers that expect `tag`.
    pub fn new(tag: u64) -> ImageWriter {
        ImageWriter {
            tag,
            sections: Vec::new(),
        }
    }

    /// Adds a section of kind `kind` (each kind at most once).
    pub fn section(&mut self, kind: u32, bytes: Vec<u8>) -> Result<(), ImageError> {
        if self.sections.iter().any(|(k, _)| *k == kind) {
            return Err(ImageError::Section {
                kind,
                why: "written twice",
            });
        }
        if self.sections.len() == MAX_SECTIONS {
            return Err(ImageError::Sections(format!(
                "more than {MAX_SECTIONS} sections"
            )));
        }
        self.sections.push((kind, bytes));
        Ok(())
    }

    /// Adds a section of 32-bit words (read back with [`Image::words`]).
    pub fn words(&mut self, kind: u32, words: &[u32]) -> Result<(), ImageError> {
        self.section(kind, words.iter().flat_map(|w| w.to_le_bytes()).collect())
    }

    /// The image's bytes.
    pub fn finish(self) -> Vec<u8> {
        let table_end = HEADER + ENTRY * self.sections.len();
        let mut offsets = Vec::with_capacity(self.sections.len());
        let mut end = table_end;
        for (_, bytes) in &self.sections {
            let at = align_up(end);
            offsets.push(at);
            end = at + bytes.len();
        }
        let mut out = vec![0u8; end];
        out[..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(self.sections.len() as u32).to_le_bytes());
        out[LIBRARY].copy_from_slice(&library_field());
        out[32..40].copy_from_slice(&(end as u64).to_le_bytes());
        out[40..48].copy_from_slice(&self.tag.to_le_bytes());
        for (i, ((kind, bytes), at)) in self.sections.iter().zip(&offsets).enumerate() {
            let e = HEADER + ENTRY * i;
            out[e..e + 4].copy_from_slice(&kind.to_le_bytes());
            out[e + 8..e + 16].copy_from_slice(&(*at as u64).to_le_bytes());
            out[e + 16..e + 24].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
            out[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        let sum = checksum(&out);
        out[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
        out
    }
}

/// A checked image, read in place (see the module doc for what was checked).
#[derive(Debug, Clone)]
pub struct Image<'a> {
    bytes: &'a [u8],
    sections: Vec<(u32, Range<usize>)>,
}

impl<'a> Image<'a> {
    /// Checks `bytes` whole and opens them as an image built for `tag`.
    pub fn open(bytes: &'a [u8], tag: u64) -> Result<Image<'a>, ImageError> {
        let header = bytes
            .get(..HEADER)
            .ok_or(ImageError::TooShort(bytes.len()))?;
        if header[..8] != MAGIC {
            return Err(ImageError::Magic);
        }
        let field = |at| u32_at(header, at).unwrap_or(0);
        let found = field(8);
        if found != FORMAT_VERSION {
            return Err(ImageError::Format { found });
        }
        if header[LIBRARY] != library_field() {
            let name = &header[LIBRARY];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            return Err(ImageError::Library {
                found: String::from_utf8_lossy(&name[..end]).into_owned(),
            });
        }
        let length = u64_at(header, 32).unwrap_or(0);
        if usize::try_from(length).ok() != Some(bytes.len()) {
            return Err(ImageError::Length {
                header: length,
                actual: bytes.len(),
            });
        }
        let stored = field(CHECKSUM.start);
        let computed = checksum(bytes);
        if stored != computed {
            return Err(ImageError::Checksum { stored, computed });
        }
        let found = u64_at(header, 40).unwrap_or(0);
        if found != tag {
            return Err(ImageError::Tag {
                found,
                expected: tag,
            });
        }
        if header[52..].iter().any(|&b| b != 0) {
            return Err(ImageError::Reserved);
        }
        let sections = Self::sections(bytes, field(12) as usize)?;
        Ok(Image { bytes, sections })
    }

    /// Reads and checks the section table.
    fn sections(bytes: &[u8], count: usize) -> Result<Vec<(u32, Range<usize>)>, ImageError> {
        let bad = |why: String| Err(ImageError::Sections(why));
        if count > MAX_SECTIONS {
            return bad(format!("{count} sections, more than {MAX_SECTIONS}"));
        }
        let table_end = HEADER + ENTRY * count;
        if table_end > bytes.len() {
            return bad(format!("a table of {count} sections runs past the end"));
        }
        let mut out: Vec<(u32, Range<usize>)> = Vec::with_capacity(count);
        let mut end = table_end;
        for i in 0..count {
            let e = HEADER + ENTRY * i;
            let kind = u32_at(bytes, e).unwrap_or(0);
            if u32_at(bytes, e + 4) != Some(0) {
                return Err(ImageError::Reserved);
            }
            let at = u64_at(bytes, e + 8).unwrap_or(u64::MAX);
            let len = u64_at(bytes, e + 16).unwrap_or(u64::MAX);
            let range = usize::try_from(at)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(at, len)| Some(at..at.checked_add(len)?));
            let Some(range) = range.filter(|r| r.end <= bytes.len()) else {
                return bad(format!("section {i} runs past the end"));
            };
            if range.start != align_up(end) {
                return bad(format!("section {i} is not where the previous one ends"));
            }
            if out.iter().any(|(k, _)| *k == kind) {
                return bad(format!("section kind {kind} appears twice"));
            }
            end = range.end;
            out.push((kind, range));
        }
        if end != bytes.len() {
            return bad("bytes after the last section".to_owned());
        }
        // Padding between sections is zero, as written: with it checked, an image has one
        // accepted form (see the module doc).
        let mut prev = table_end;
        for (_, r) in &out {
            if bytes[prev..r.start].iter().any(|&b| b != 0) {
                return Err(ImageError::Reserved);
            }
            prev = r.end;
        }
        Ok(out)
    }

    /// The image's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The kinds of the image's sections, in order.
    pub fn kinds(&self) -> impl Iterator<Item = u32> + '_ {
        self.sections.iter().map(|(k, _)| *k)
    }

    /// The bytes of the section of kind `kind`, if the image has one.
    pub fn section(&self, kind: u32) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        self.sections
            .iter()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, r)| bytes.get(r.clone()))
    }

    /// The section of kind `kind` as 32-bit words; an error when it is missing or its length
    /// is not a whole number of words.
    pub fn words(&self, kind: u32) -> Result<Words<'a>, ImageError> {
        let bytes = self.section(kind).ok_or(ImageError::Section {
            kind,
            why: "missing",
        })?;
        Words::new(bytes).ok_or(ImageError::Section {
            kind,
            why: "not a whole number of 32-bit words",
        })
    }
}

/// 32-bit little-endian words read in place, each read bounds-checked.
#[derive(Debug, Clone, Copy)]
pub struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    /// No words.
    pub const EMPTY: Words<'static> = Words(&[]);

    /// `bytes` as words; `None` when its length is not a multiple of 4.
    pub fn new(bytes: &'a [u8]) -> Option<Words<'a>> {
        bytes.len().is_multiple_of(4).then_some(Words(bytes))
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The word at `i`, or `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<u32> {
        u32_at(self.0, i.checked_mul(4)?)
    }

    /// The `N` words from `i` on, read with one bounds check, or `None` when they are not all
    /// inside (a record's fields at once).
    #[inline]
    pub fn array<const N: usize>(&self, i: usize) -> Option<[u32; N]> {
        let at = i.checked_mul(4)?;
        let raw = self.0.get(at..at.checked_add(4 * N)?)?;
        // `raw` is 4 * N bytes long, which the compiler knows: the indexing below checks
        // nothing more.
        let mut out = [0u32; N];
        for (w, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Some(out)
    }

    /// The words in `range`, or `None` when it is not inside.
    pub fn slice(&self, range: Range<usize>) -> Option<Words<'a>> {
        let start = range.start.checked_mul(4)?;
        let end = range.end.checked_mul(4)?;
        self.0.get(start..end).map(Words)
    }

    /// The bytes of the words in `range` as they are stored, or `None` when it is not inside
    /// (for records that keep short byte strings in place).
    pub fn raw(&self, range: Range<usize>) -> Option<&'a [u8]> {
        self.0
            .get(range.start.checked_mul(4)?..range.end.checked_mul(4)?)
    }

    /// Every word, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.0
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: u64 = 0x5eed_0001;

    fn sample() -> Vec<u8> {
        let mut w = ImageWriter::new(TAG);
        w.words(7, &[1, 2, 0xdead_beef]).unwrap();
        w.section(3, Vec::new()).unwrap();
        w.section(
            9,
            b"routes and their texts, 65 bytes long: more than a cache line....".to_vec(),
        )
        .unwrap();
        w.finish()
    }

    /// `image` with the checksum made right again after a test changed other bytes, so that
    /// the field checks behind it are what refuses the image.
    fn resealed(mut image: Vec<u8>) -> Vec<u8> {
        let sum = checksum(&image);
        image[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
        image
    }

    #[test]
    fn a_forged_header_still_meets_the_table_checks() {
        let mut bytes = vec![0u8; HEADER + ENTRY];
        bytes[12] = 1;
        forge(&mut bytes);
        assert!(matches!(
            Image::open(&bytes, 0),
            Err(ImageError::Sections(_))
        ));
        bytes[12] = 0;
        bytes.truncate(HEADER);
        forge(&mut bytes);
        assert!(Image::open(&bytes, 0).is_ok());
    }

    #[test]
    fn an_image_reads_back_what_was_written() {
        let bytes = sample();
        let image = Image::open(&bytes, TAG).unwrap();
        assert_eq!(image.kinds().collect::<Vec<_>>(), [7, 3, 9]);
        let words = image.words(7).unwrap();
        assert_eq!(words.iter().collect::<Vec<_>>(), [1, 2, 0xdead_beef]);
        assert_eq!(words.get(2), Some(0xdead_beef));
        assert_eq!(words.get(3), None);
        assert_eq!(words.get(usize::MAX), None);
        assert_eq!(
            words.slice(1..3).unwrap().iter().collect::<Vec<_>>(),
            [2, 0xdead_beef]
        );
        assert!(words.slice(2..4).is_none());
        assert_eq!(image.section(3), Some(&[][..]));
        assert_eq!(image.section(9).unwrap().len(), 65);
        assert_eq!(image.section(4), None);
        assert_eq!(
            image.words(9).unwrap_err(),
            ImageError::Section {
                kind: 9,
                why: "not a whole number of 32-bit words"
            }
        );
        assert!(matches!(
            image.words(4),
            Err(ImageError::Section { kind: 4, .. })
        ));
    }

    #[test]
    fn sections_start_on_cache_lines_after_the_table() {
        let bytes = sample();
        let image = Image::open(&bytes, TAG).unwrap();
        for (_, r) in &image.sections {
            assert_eq!(r.start % ALIGN, 0);
            assert!(r.start >= HEADER + ENTRY * 3);
        }
    }

    #[test]
    fn an_empty_image_is_an_image() {
        let bytes = ImageWriter::new(TAG).finish();
        assert_eq!(bytes.len(), HEADER);
        assert_eq!(Image::open(&bytes, TAG).unwrap().kinds().count(), 0);
    }

    #[test]
    fn any_changed_byte_is_refused() {
        let bytes = sample();
        for i in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                assert!(
                    Image::open(&bad, TAG).is_err(),
                    "byte {i} ^ {flip:#x} accepted"
                );
            }
        }
    }

    #[test]
    fn a_truncated_or_extended_image_is_refused() {
        let bytes = sample();
        for n in 0..bytes.len() {
            let err = Image::open(&bytes[..n], TAG).unwrap_err();
            let expected = if n < HEADER {
                ImageError::TooShort(n)
            } else {
                ImageError::Length {
                    header: bytes.len() as u64,
                    actual: n,
                }
            };
            assert_eq!(err, expected);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            Image::open(&longer, TAG),
            Err(ImageError::Length { .. })
        ));
    }

    #[test]
    fn a_foreign_image_is_refused_by_name() {
        let bytes = sample();
        assert_eq!(
            Image::open(&bytes, TAG + 1).unwrap_err(),
            ImageError::Tag {
                found: TAG,
                expected: TAG + 1
            }
        );
        assert_eq!(
            Image::open(
                b"GIF89a and then some bytes, enough of them for a whole header......",
                TAG
            )
            .unwrap_err(),
            ImageError::Magic
        );

        let mut other = bytes.clone();
        other[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        assert_eq!(
            Image::open(&resealed(other), TAG).unwrap_err(),
            ImageError::Format {
                found: FORMAT_VERSION + 1
            }
        );

        let mut older = bytes.clone();
        older[LIBRARY].copy_from_slice(b"0.1.0\0\0\0\0\0\0\0\0\0\0\0");
        let err = Image::open(&resealed(older), TAG).unwrap_err();
        assert_eq!(
            err,
            ImageError::Library {
                found: "0.1.0".into()
            }
        );
        assert!(err.to_string().contains(env!("CARGO_PKG_VERSION")), "{err}");
    }

    #[test]
    fn a_table_that_points_outside_or_overlaps_is_refused() {
        let bytes = sample();
        let entry = |i: usize| HEADER + ENTRY * i;
        // (what to change, the error's kind)
        type Change = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(|b| b[12..16].copy_from_slice(&4096u32.to_le_bytes())),
                "sections",
            ),
            (
                Box::new(|b| b[12..16].copy_from_slice(&4u32.to_le_bytes())),
                "sections",
            ),
            (
                Box::new(move |b| {
                    let e = entry(2) + 16;
                    b[e..e + 8].copy_from_slice(&u64::MAX.to_le_bytes())
                }),
                "sections",
            ),
            (
                Box::new(move |b| {
                    // The second section starts where the first does.
                    let first = b[entry(0) + 8..entry(0) + 16].to_vec();
                    b[entry(1) + 8..entry(1) + 16].copy_from_slice(&first)
                }),
                "sections",
            ),
            (
                Box::new(move |b| b[entry(1)..entry(1) + 4].copy_from_slice(&7u32.to_le_bytes())),
                "sections",
            ),
            (Box::new(move |b| b[entry(0) + 4] = 1), "reserved"),
            (Box::new(|b| b[60] = 1), "reserved"),
            // Padding between the table and the first section.
            (Box::new(move |b| b[entry(3)] = 1), "reserved"),
        ];
        for (i, (change, kind)) in cases.iter().enumerate() {
            let mut bad = bytes.clone();
            change(&mut bad);
            let err = Image::open(&resealed(bad), TAG).unwrap_err();
            let got = match err {
                ImageError::Sections(_) => "sections",
                ImageError::Reserved => "reserved",
                other => panic!("case {i}: {other}"),
            };
            assert_eq!(got, *kind, "case {i}");
        }
    }

    #[test]
    fn a_writer_takes_each_kind_once() {
        let mut w = ImageWriter::new(TAG);
        w.section(1, vec![1]).unwrap();
        assert!(w.section(1, vec![2]).is_err());
        w.words(2, &[]).unwrap();
        let bytes = w.finish();
        assert_eq!(
            Image::open(&bytes, TAG).unwrap().section(1),
            Some(&[1u8][..])
        );
    }
}
