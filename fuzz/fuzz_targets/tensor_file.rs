//! The `--bind` tensor reader: the same bytes as a NumPy `.npy` array and as
//! a serialized ONNX `TensorProto` (`.pb`); the reader picks the format by
//! the extension, so each run reads both.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for name in ["tensor.npy", "tensor.pb"] {
        let path = diamond_fuzz::scratch_file(name, data);
        let _ = diamond_importers::tensor_file::read_tensor_file(&path);
    }
});
