//! Helpers shared by the integration tests: where the fixtures are, and the
//! declared tensor type of a hand-built ONNX graph's input or output.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every node-test case directory, sorted.
pub fn node_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/onnx-node"))
        .expect("fixtures/onnx-node exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() > 1800, "expected the whole node suite, found {} cases", cases.len());
    cases
}

/// Every light real-architecture model, sorted.
pub fn light_models() -> Vec<PathBuf> {
    let mut models: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/light"))
        .expect("fixtures/light exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    models.sort();
    assert_eq!(models.len(), 9, "expected the nine light models");
    models
}

/// Every model fixture: node cases, then light models.
pub fn all_models() -> Vec<PathBuf> {
    node_cases().into_iter().map(|c| c.join("model.onnx")).chain(light_models()).collect()
}

/// The `test_data_set_0/{prefix}_{i}.pb` files of a case, in index order.
pub fn data_files(case: &Path, prefix: &str) -> Vec<PathBuf> {
    let dir = case.join("test_data_set_0");
    (0..).map(|i| dir.join(format!("{prefix}_{i}.pb"))).take_while(|p| p.is_file()).collect()
}

/// The case's name (its directory name).
pub fn case_name(case: &Path) -> String {
    case.file_name().unwrap().to_string_lossy().into_owned()
}

/// A float32 or int64 `.npy` file (what the torch fixtures hold) as a tract tensor.
pub fn npy_tensor(path: &Path) -> tract_onnx::prelude::Tensor {
    use tract_onnx::prelude::*;
    let t = diamond_importers::npy::read_npy(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    let raw = t.data.raw.clone().unwrap_or_default();
    match t.data_type {
        Some(diamond_ir::ElemType::Int64) => {
            let v: Vec<i64> = raw.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
            tract_ndarray::ArrayD::from_shape_vec(shape, v).unwrap().into_tensor()
        }
        Some(diamond_ir::ElemType::Float) => {
            let v: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            tract_ndarray::ArrayD::from_shape_vec(shape, v).unwrap().into_tensor()
        }
        other => panic!("{}: unexpected element type {other:?}", path.display()),
    }
}

/// A declared tensor type's dims as text (`[batch, 8, ?]`); `None` without a shape.
pub fn declared_shape_text(ty: &diamond_ir::TypeInfo) -> Option<String> {
    let Some(diamond_ir::TypeValue::Tensor { shape: Some(shape), .. }) = &ty.value else { return None };
    Some(diamond_optimize::text::dims_text(shape))
}

/// A tensor `ValueInfoProto` of element type `elem` (ONNX's code) and
/// `dims`: numbers are fixed sizes, anything else a symbol.
pub fn tensor_info(name: &str, elem: i32, dims: &[&str]) -> diamond_onnx_proto::ValueInfoProto {
    use diamond_onnx_proto::tensor_shape_proto::{dimension, Dimension};
    use diamond_onnx_proto::{type_proto, TensorShapeProto, TypeProto, ValueInfoProto};
    let dim = dims
        .iter()
        .map(|d| Dimension {
            denotation: None,
            value: Some(match d.parse::<i64>() {
                Ok(n) => dimension::Value::DimValue(n),
                Err(_) => dimension::Value::DimParam(d.to_string()),
            }),
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            denotation: None,
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
        ..Default::default()
    }
}
