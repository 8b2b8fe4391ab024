//! The printed TorchScript source of an archive (`code/**.py`) → tokens → AST.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = diamond_importers::torch::code::parse_file("code/__torch__/fuzz.py", &text);
});
