//! The table image's loader (`atc_router::image::Image::open`) on three kinds of input, from
//! the same bytes. Properties:
//! - it never panics and never reads outside the bytes it was given (AddressSanitizer);
//! - every section and word of an image it accepts reads without a panic, and so does every
//!   section read as an exact-key table or a prefix table (with the last section as their
//!   bytes), looked up and walked with keys taken from those bytes;
//! - the bytes as they come (mostly refused by the first checks) and the bytes with a header
//!   forged to pass every check but the section table's (which reaches that parser);
//! - a valid image whose sections are the input's bytes is accepted, and refused once one of
//!   its bytes is changed or it is cut short;
//! - the index image of a small router (every kind of split) with words changed where the
//!   input says and the checksum made right again: opening it and walking it with requests
//!   that reach every split never panics, loops or reads out of bounds.
#![no_main]

use atc_router::image::exact_table::ExactTable;
use atc_router::image::prefix_table::PrefixTable;
use atc_router::image::{forge, Image, ImageWriter};
use atc_router::{Context, ImageRouter, Router, Uuid};
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

thread_local! {
    /// [`index_image_case`], built once: the same for every input (a constant, not state an
    /// input could change), where building it per input cost 30 ms of each run.
    static INDEX_CASE: (Vec<u8>, std::cell::RefCell<Vec<Context>>) = index_image_case();
}

/// A router with a split of every kind (exact, prefix, suffix, integer, network, path,
/// `contains`, by field) and requests that reach them.
fn index_image_case() -> (Vec<u8>, std::cell::RefCell<Vec<Context>>) {
    let schema = atc_router_fuzz::shared_gateway_schema();
    let mut r = Router::new(schema.clone());
    let mut n = 0u128;
    let mut add = |e: String| {
        n += 1;
        r.add(Uuid::from_u128(n), n as u64, &e)
            .expect("a valid route");
    };
    for i in 0..12 {
        add(format!(
            r#"http.host == "h{i}.com" && http.path ^= "/p{i}/""#
        ));
        add(format!(
            r#"http.host =^ ".w{i}.net" && http.method == "GET""#
        ));
        add(format!(r##"http.path ~ r#"^/users/\d+/o{i}$"#"##));
        add(format!("net.dst.port == {}", 8000 + i));
        add(format!("net.src.ip in 10.{i}.0.0/16"));
        add(format!(r#"http.path contains "k{i}x""#));
        add(format!(r#"http.headers.x_t{i} == "v""#));
        add(format!(
            r#"!(http.method == "POST") && (net.dst.port > {i} || lower(http.path) =^ "/z{i}")"#
        ));
    }
    let (image, _) = r.index_image();
    let mut ctxs = Vec::new();
    for i in 0..12 {
        let mut c = Context::new(schema.clone());
        c.add_value("http.host", format!("h{i}.com")).unwrap();
        c.add_value("http.path", format!("/p{i}/users/7/o{i}/k{i}x"))
            .unwrap();
        c.add_value("http.method", "GET").unwrap();
        c.add_value("net.dst.port", 8000 + i64::from(i)).unwrap();
        let ip: std::net::IpAddr = format!("10.{i}.1.1").parse().unwrap();
        c.add_value("net.src.ip", ip).unwrap();
        c.add_value(&format!("http.headers.x_t{i}"), "v").unwrap();
        ctxs.push(c);
    }
    (image, std::cell::RefCell::new(ctxs))
}

fuzz_target!(|data: &[u8]| {
    // The index image, changed where the input says: pairs of (word position, xor mask).
    if data.len() >= 8 {
        INDEX_CASE.with(|(image, ctxs)| {
            let mut image = image.clone();
            let words = (image.len() - 64) / 4;
            for change in data.chunks_exact(8).take(16) {
                let at = u32::from_le_bytes(change[..4].try_into().unwrap()) as usize % words;
                let mask = u32::from_le_bytes(change[4..].try_into().unwrap());
                let at = 64 + 4 * at;
                let w = u32::from_le_bytes(image[at..at + 4].try_into().unwrap()) ^ mask;
                image[at..at + 4].copy_from_slice(&w.to_le_bytes());
            }
            forge(&mut image);
            let mut ctxs = ctxs.borrow_mut();
            let schema = ctxs[0].schema().clone();
            if let Ok(router) = ImageRouter::from_bytes(schema, image) {
                for c in ctxs.iter_mut() {
                    router.execute(c);
                }
            }
        });
    }

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
    assert!(
        Image::open(&changed, TAG).is_err(),
        "byte {at} changed, accepted"
    );
    assert!(
        Image::open(&image[..at], TAG).is_err(),
        "cut at {at}, accepted"
    );
});
