//! The red team's method as a test: thousands of mutants of a whole table image (every section,
//! the header and section table too), each resealed as only a bug or a writer of the image
//! could, then opened and routed with several requests. None may crash, hang or run away with
//! memory: a watchdog aborts the run when one mutant takes more than `MUTANT_LIMIT`, and the
//! allocator of this test binary refuses to grow past `MEMORY_LIMIT` (an allocation failure
//! aborts), so either shows as a failed test naming the mutant's seed.
//!
//! What an accepted mutant answers is not checked (a resealed image may route anywhere): only
//! that opening it and every call a worker makes on it return.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atc_router::{Context, ImageRouter};
use atc_workload::{requests, Family, Mix, Table};

mod common;
use common::{workload_router as router, workload_schema as schema, workload_value as value};

/// The longest one mutant may take to open and route its requests (debug build, loaded CI).
const MUTANT_LIMIT: Duration = Duration::from_secs(20);
/// Most bytes live at once in this test binary.
const MEMORY_LIMIT: usize = 1 << 30;
const MUTANTS: u64 = 10_000;

struct Limited;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only refusing (null) what would pass the limit.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size() > MEMORY_LIMIT {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Limited = Limited;

/// A small deterministic generator (xorshift64*), so that a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One to three words of `image` changed the ways a crafted or damaged image differs: a bit
/// flipped, zeroed, all ones, a small number (an index, a count, a length), a word copied
/// from elsewhere (a plausible offset); then resealed.
fn mutate(image: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bad = image.to_vec();
    let words = bad.len() / 4;
    for _ in 0..1 + rng.below(3) {
        // Past the magic and format version: a changed one is refused before anything else.
        let at = 4 * (3 + rng.below(words - 3));
        let old = u32::from_le_bytes(bad[at..at + 4].try_into().unwrap());
        let new = match rng.below(6) {
            0 => old ^ (1 << rng.below(32)),
            1 => 0,
            2 => u32::MAX,
            3 => rng.below(64) as u32,
            4 => old.wrapping_add(1 + rng.below(8) as u32),
            _ => {
                let from = 4 * rng.below(words);
                u32::from_le_bytes(bad[from..from + 4].try_into().unwrap())
            }
        };
        bad[at..at + 4].copy_from_slice(&new.to_le_bytes());
    }
    atc_router::image::forge(&mut bad);
    bad
}

#[test]
fn resealed_mutants_of_every_section_never_crash_hang_or_run_away() {
    let schema = schema();
    // Every kind of route of the workload (hosts, prefixes, regexes with captures, headers,
    // ports, networks), so that every section of an image is there to be changed.
    let table = Table::generate(300, 11, true);
    let image = router(&table, &schema).to_image().unwrap();
    assert!(ImageRouter::from_bytes(schema.clone(), image.clone()).is_ok());
    let mut reqs = Vec::new();
    for mix in Mix::all() {
        reqs.extend(requests(&table, mix, 2, 5));
    }
    for req in requests(&Table::family(Family::RestApi, 124, 3), Mix::all()[0], 2, 7) {
        reqs.push(req);
    }

    // The watchdog: the mutant being tried and when it started.
    let current = Arc::new(AtomicU64::new(u64::MAX));
    let started = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    {
        let (current, started) = (current.clone(), started.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let m = current.load(Ordering::Relaxed);
            let since = epoch.elapsed().as_millis() as u64 - started.load(Ordering::Relaxed);
            if m != u64::MAX && since > MUTANT_LIMIT.as_millis() as u64 {
                eprintln!("mutant {m} has run for {since} ms: a hang");
                std::process::abort();
            }
        });
    }

    let (mut opened, mut routed) = (0u32, 0u32);
    let mut ctx = Context::new(schema.clone());
    for m in 0..MUTANTS {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (m + 1));
        let bad = mutate(&image, &mut rng);
        started.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        current.store(m, Ordering::Relaxed);
        let Ok(img) = ImageRouter::from_bytes(schema.clone(), bad) else {
            continue;
        };
        opened += 1;
        let _ = img.key_fields();
        for req in &reqs {
            ctx.reset();
            for (f, v) in &req.fields {
                ctx.add_value(f, value(v)).unwrap();
            }
            let _ = img.needed_fields(&mut ctx);
            if img.execute(&mut ctx) {
                routed += 1;
                let _ = ctx.result().map(|r| r.captures_map());
            }
        }
        current.store(u64::MAX, Ordering::Relaxed);
    }
    println!("{MUTANTS} mutants: {opened} opened, {routed} requests routed from them");
    // The checks refuse most mutants, but enough are accepted to exercise the walk.
    assert!(opened >= 100, "only {opened} mutants opened");
}
