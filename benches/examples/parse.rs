//! Parses every expression of a WORKLOAD table 20 times, for profiling the parser.
fn main() {
    let table = atc_workload::Table::generate(10_000, 1, false);
    let t = std::time::Instant::now();
    for _ in 0..20 {
        for r in &table.routes {
            std::hint::black_box(atc_router::parse(&r.expression).unwrap());
        }
    }
    println!(
        "{:?} per expression",
        t.elapsed() / (20 * table.routes.len() as u32)
    );
}
