//! Sweeps of corrupted models through the importer, in process: every
//! truncation and a low, middle and high bit flip at every byte either imports (some flips only change a value) or
//! is an error naming the file — never a panic. The CLI tests check the exit
//! code and message for representative cases; this checks breadth.

mod common;

use bytes::Bytes;
use std::path::Path;

fn import(bytes: Vec<u8>) -> Result<Result<(), String>, String> {
    let path = Path::new("corrupt.onnx");
    std::panic::catch_unwind(|| {
        diamond_importers::onnx::decode_model(Bytes::from(bytes), path, Path::new("."))
            .map(|model| {
                // Whatever imports must also export.
                diamond_exporters::onnx::encode_model(&model).expect("an imported model exports");
            })
            .map_err(|e| e.to_string())
    })
    .map_err(|_| "panicked".to_string())
}

#[test]
fn truncations_and_bit_flips_never_panic() {
    let original = std::fs::read(common::root().join("fixtures/synthetic/every_field.onnx")).unwrap();
    let (mut rejected, mut accepted) = (0, 0);
    for cut in 0..original.len() {
        match import(original[..cut].to_vec()) {
            Err(panic) => panic!("truncation at {cut}: {panic}"),
            Ok(Err(message)) => {
                assert!(message.contains("corrupt.onnx"), "{message}");
                rejected += 1;
            }
            Ok(Ok(())) => accepted += 1,
        }
    }
    for position in 0..original.len() {
        for bit in [0, 3, 7] {
            let mut bytes = original.clone();
            bytes[position] ^= 1 << bit;
            match import(bytes) {
                Err(panic) => panic!("flip of bit {bit} at {position}: {panic}"),
                Ok(Err(_)) => rejected += 1,
                Ok(Ok(())) => accepted += 1,
            }
        }
    }
    eprintln!("{rejected} corrupted variants rejected, {accepted} imported");
    assert!(rejected > original.len(), "most corruptions must be caught");
}
