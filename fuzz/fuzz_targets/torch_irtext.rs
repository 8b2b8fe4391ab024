//! TorchScript IR text (`graph(%x : Float(...)): ...`) → IR graph → lowered
//! model → check → annotate → encode. Invalid UTF-8 is replaced, as the
//! parser only ever sees a `&str`.
#![no_main]

use diamond_importers::torch::{irtext::parse_ir, lower::irgraph::lower_ir};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(graph) = parse_ir("fuzz.ir.txt", &text) else { return };
    if let Ok(model) = lower_ir("fuzz.ir.txt", &graph, &[]) {
        diamond_fuzz::check_and_export(&model);
    }
});
