//! `.rows` constraint text → statements → solved and closed system.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(file) = diamond_infer::rows::parse::parse_rows(&text) {
        let _ = diamond_infer::rows::lower::solve_rows(&file);
    }
});
