//! Where a whole `diamond check --json` spends its time and memory, phase by
//! phase: import, check, the JSON report, and dropping it all. For each
//! phase, its wall time, the heap live at its end and the peak of live heap
//! bytes during it (a counting allocator over the system one, so absolute
//! times differ a little from the CLI's mimalloc).
//!
//! `cargo run --release --example check_phases -- MODEL.onnx`

use std::sync::atomic::Ordering;
use std::time::Instant;

#[path = "../infer/benches/support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `phase`, printing its time, the heap live after it and its peak.
fn phase<T>(name: &str, phase: impl FnOnce() -> T) -> T {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    let start = Instant::now();
    let out = phase();
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!(
        "{name:<8} {:>8.1} ms   live after {:>7.1} MiB   peak {:>7.1} MiB",
        start.elapsed().as_secs_f64() * 1e3,
        mib(LIVE.load(Ordering::Relaxed)),
        mib(PEAK.load(Ordering::Relaxed))
    );
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: check_phases MODEL.onnx")?;
    let path = std::path::Path::new(&path);
    let model = phase("import", || diamond_importers::onnx::load_model(path))?;
    let options = diamond_infer::CheckOptions { skip_inferred_types: true, ..Default::default() };
    let report = phase("check", || diamond_optimize::audit::check(&model, &options));
    let bytes = phase("json", || {
        let mut out = std::io::sink();
        let mut counter = CountingWriter { inner: &mut out, bytes: 0 };
        diamond_exporters::report::json::write_check_json(&report, &path.display().to_string(), &mut counter)
            .map(|()| counter.bytes)
    })?;
    phase("drop", || drop((report, model)));
    println!("{} bytes of JSON", bytes);
    Ok(())
}

/// Counts the bytes written through it.
struct CountingWriter<'a, W> {
    inner: &'a mut W,
    bytes: usize,
}

impl<W: std::io::Write> std::io::Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += buf.len();
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
