//! The ONNX protobuf messages, as prost types.
//!
//! `src/generated.rs` is produced from `proto/onnx.proto` by
//! `cargo run --manifest-path tools/regen-proto/Cargo.toml`, which builds protoc
//! from source with `protobuf-src`. The generated code is committed so that
//! building diamond needs neither CMake nor the minutes protoc takes to compile;
//! the test below fails when the schema changed and the code was not
//! regenerated. `bytes` fields are [`bytes::Bytes`], so decoding from a `Bytes`
//! buffer (a memory-mapped file) slices tensor data instead of copying it.

#![allow(missing_docs, clippy::all)]

include!("generated.rs");

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    #[test]
    fn generated_code_matches_schema() {
        let schema = include_bytes!("../proto/onnx.proto");
        let digest: String = Sha256::digest(schema).iter().map(|b| format!("{b:02x}")).collect();
        let generated = include_str!("generated.rs");
        let recorded = generated
            .lines()
            .find_map(|l| l.strip_prefix("// schema-sha256: "))
            .expect("generated.rs lacks its schema-sha256 header");
        assert_eq!(
            recorded, digest,
            "onnx-proto/proto/onnx.proto changed since src/generated.rs was generated; run \
             `cargo run --manifest-path tools/regen-proto/Cargo.toml`"
        );
    }

    #[test]
    fn every_message_of_the_schema_is_generated() {
        let schema = include_str!("../proto/onnx.proto");
        let generated = include_str!("generated.rs");
        for line in schema.lines() {
            if let Some(name) = line.trim().strip_prefix("message ") {
                let name = name.trim_end_matches(" {").trim();
                assert!(generated.contains(&format!("pub struct {name} {{")), "message {name} has no generated struct");
            }
        }
    }
}
