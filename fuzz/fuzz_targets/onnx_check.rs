//! ONNX protobuf bytes → model → check → annotate → encode.
//!
//! The bytes are decoded in memory ([`decode_model`], what `load_model` does
//! after mapping the file); external data resolves against an empty scratch
//! directory, so its path and range checks run but find no files.
//!
//! [`decode_model`]: diamond_importers::onnx::decode_model
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.onnx");
    let base_dir = diamond_fuzz::scratch_dir();
    if let Ok(model) = diamond_importers::onnx::decode_model(Bytes::copy_from_slice(data), path, base_dir) {
        diamond_fuzz::check_and_export(&model);
    }
});
