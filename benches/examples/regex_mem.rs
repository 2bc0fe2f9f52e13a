use atc_benches::{live_bytes, CountingAlloc};
use regex_automata::meta::{Config, Regex};
use std::time::Instant;
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;
fn main() {
    let hay = "/rx-17/users/12/orders/3";
    for pat in [
        r"^/rx-17/users/(?<id>\d+)/orders/(?<oid>\d+)$",
        r"^/rx-17/files/(?<p>.+)$",
    ] {
        for (name, cfg) in [
            ("default meta", Config::new()),
            ("no onepass/dfa", Config::new().onepass(false).dfa(false)),
            (
                "no onepass/dfa/hybrid",
                Config::new().onepass(false).dfa(false).hybrid(false),
            ),
        ] {
            let b = live_bytes();
            let m = Regex::builder().configure(cfg).build(pat).unwrap();
            let built = live_bytes() - b;
            let b = live_bytes();
            let mut caps = m.create_captures();
            m.captures(hay, &mut caps);
            let used = live_bytes() - b;
            let t = Instant::now();
            let mut n = 0;
            for _ in 0..100_000 {
                if m.is_match(hay) {
                    n += 1;
                }
            }
            let is_match = t.elapsed() / 100_000;
            let t = Instant::now();
            for _ in 0..100_000 {
                m.captures(hay, &mut caps);
                n += caps.is_match() as usize;
            }
            let cap = t.elapsed() / 100_000;
            println!("{pat} {name}: built {built} B, first use +{used} B, is_match {is_match:?}, captures {cap:?} ({n})");
        }
    }
}
