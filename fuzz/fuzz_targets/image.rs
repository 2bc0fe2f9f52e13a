//! The table image's loader (`atc_router::image::Image::open`) on three kinds of input, from
//! the same bytes. Properties:
//! - it never panics and never reads outside the bytes it was given (AddressSanitizer);
//! - every section and word of an image it accepts reads without a panic, and so does every
//!   section read as an exact-key table or a prefix table (with the last section as their
//!   bytes), looked up and walked with keys taken from those bytes;
//! - the bytes as they come (mostly refused by the first checks) and the bytes with a header
//!   forged to pass every check but the section table's (which reaches that parser);
//! - a valid image whose sections are the input's bytes is accepted, and refused once one of
//!   its bytes is changed or it is cut short.
#![no_main]

use atc_router::image::exact_table::ExactTable;
use atc_router::image::prefix_table::PrefixTable;
use atc_router::image::{forge, Image, ImageWriter};
use libfuzzer_sys::fuzz_target;

const TAG: u64 = 0x5eed;

fn read_all(bytes: &[u8]) -> bool {
    let Ok(image) = Image::open(bytes, TAG) else {
        return false;
    };
    let kinds: Vec<u32> = image.kinds().collect();
    for k in kinds {
        let section = image.section(k).expect("a listed kind has a section");
        std::hint::black_box(section);
        if let (Ok(words), Some(last)) = (image.words(k), image.kinds().last()) {
            let keys = image.section(last).expect("listed");
            if let Some(table) = ExactTable::new(words, keys) {
                for n in 0..keys.len().min(8) {
                    std::hint::black_box(table.get(&keys[n..keys.len().min(n + 5)]));
                }
                std::hint::black_box(table.get(b""));
            }
            if let Some(table) = PrefixTable::new(words, keys) {
                let mut visited = 0usize;
                table.walk(keys, |v| visited += v as usize & 1);
                std::hint::black_box(visited);
            }
        }
        if let Ok(words) = image.words(k) {
            for w in words.iter() {
                std::hint::black_box(w);
            }
            assert_eq!(words.get(words.len()), None);
            assert!(words.slice(0..words.len() + 1).is_none());
        }
    }
    true
}

fuzz_target!(|data: &[u8]| {
    read_all(data);

    if data.len() >= 64 {
        let mut forged = data.to_vec();
        // The tag, too, so that the section table is what decides.
        forged[40..48].copy_from_slice(&TAG.to_le_bytes());
        forge(&mut forged);
        read_all(&forged);
    }

    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let mut writer = ImageWriter::new(TAG);
    for (i, chunk) in rest.split(|&b| b == 0xff).take(16).enumerate() {
        writer
            .section(i as u32 * 3 + u32::from(ctl & 3), chunk.to_vec())
            .expect("distinct kinds");
    }
    let image = writer.finish();
    assert!(read_all(&image), "a written image is refused");
    let at = (usize::from(ctl) * 7919 + rest.len()) % image.len();
    let mut changed = image.clone();
    changed[at] ^= ctl | 1;
    assert!(Image::open(&changed, TAG).is_err(), "byte {at} changed, accepted");
    assert!(Image::open(&image[..at], TAG).is_err(), "cut at {at}, accepted");
});
