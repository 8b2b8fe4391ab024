//! A `.pt` TorchScript archive (zip, pickles, code/**.py, storages) → model →
//! check → annotate → encode. The archive reader maps a file, so the bytes
//! are written to a scratch file first.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = diamond_fuzz::scratch_file("archive.pt", data);
    if let Ok(model) = diamond_importers::torch::load::load_archive(&path, &[]) {
        diamond_fuzz::check_and_export(&model);
    }
});
