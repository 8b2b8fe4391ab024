//! A model over 2 GiB (its weight in external data) converts with peak memory
//! far below its size: the importer maps nothing it does not need, and the
//! exporter copies data in bounded chunks, keeping holes of sparse files.
//!
//! The data file is sparse (a few marker bytes in 4.5 GiB of hole), so the test
//! costs seconds and almost no disk, yet every offset past 2^31 and 2^32 is
//! exercised for real.

use diamond_onnx_proto as pb;
use prost::Message;
use std::os::unix::fs::FileExt;
use std::process::Command;

const ELEMENTS: u64 = 1152 << 20; // float32: 4.5 GiB
const BYTES: u64 = ELEMENTS * 4;
const MARKERS: [u64; 4] = [0, (1 << 31) + 12_345, (1 << 32) + 7, BYTES - 8];

fn entry(key: &str, value: String) -> pb::StringStringEntryProto {
    pb::StringStringEntryProto { key: Some(key.into()), value: Some(value) }
}

fn write_model(dir: &std::path::Path) -> std::path::PathBuf {
    let data = std::fs::File::create(dir.join("big.bin")).unwrap();
    data.set_len(BYTES).unwrap();
    for (i, &at) in MARKERS.iter().enumerate() {
        data.write_all_at(&[0xd1, 0xa0, i as u8, 0x5e, 1, 2, 3, 4], at).unwrap();
    }
    let weight = pb::TensorProto {
        name: Some("w".into()),
        dims: vec![ELEMENTS as i64],
        data_type: Some(1),
        data_location: Some(1),
        external_data: vec![
            entry("location", "big.bin".into()),
            entry("offset", "0".into()),
            entry("length", BYTES.to_string()),
        ],
        ..Default::default()
    };
    let tensor_type = |name: &str| pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(pb::TensorShapeProto {
                    dim: vec![pb::tensor_shape_proto::Dimension {
                        value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(ELEMENTS as i64)),
                        denotation: None,
                    }],
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    };
    let model = pb::ModelProto {
        ir_version: Some(10),
        opset_import: vec![pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(21) }],
        graph: Some(pb::GraphProto {
            name: Some("big".into()),
            node: vec![pb::NodeProto {
                input: vec!["x".into(), "w".into()],
                output: vec!["y".into()],
                op_type: Some("Add".into()),
                ..Default::default()
            }],
            initializer: vec![weight],
            input: vec![tensor_type("x")],
            output: vec![tensor_type("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    let path = dir.join("big.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn peak_rss_of_children_kib() -> i64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    usage.ru_maxrss
}

#[test]
fn a_model_over_2_gib_converts_in_bounded_memory() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let model = write_model(src.path());
    let out_path = dst.path().join("big.onnx");
    let out = Command::new(env!("CARGO_BIN_EXE_diamond"))
        .args(["convert", model.to_str().unwrap(), "-o", out_path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let peak_kib = peak_rss_of_children_kib();
    eprintln!("peak RSS converting a {BYTES}-byte model: {} KiB", peak_kib);
    assert!(peak_kib < 128 * 1024, "peak RSS {peak_kib} KiB for a 4.5 GiB model");

    let copied = std::fs::File::open(dst.path().join("big.bin")).unwrap();
    assert_eq!(copied.metadata().unwrap().len(), BYTES);
    for (i, &at) in MARKERS.iter().enumerate() {
        let mut got = [0u8; 8];
        copied.read_exact_at(&mut got, at).unwrap_or_else(|e| panic!("reading marker {i} at {at}: {e}"));
        assert_eq!(got, [0xd1, 0xa0, i as u8, 0x5e, 1, 2, 3, 4], "marker at {at}");
    }
    let mut between = [0xffu8; 16];
    copied.read_exact_at(&mut between, 1 << 30).unwrap();
    assert_eq!(between, [0u8; 16]);
    let decode = |p: &std::path::Path| pb::ModelProto::decode(&std::fs::read(p).unwrap()[..]).unwrap();
    assert_eq!(decode(&model), decode(&out_path));

    let inspect = Command::new(env!("CARGO_BIN_EXE_diamond"))
        .args(["inspect", "--json", out_path.to_str().unwrap()])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(report["initializers"]["external_bytes"].as_u64(), Some(BYTES));
}
