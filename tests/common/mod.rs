//! Helpers shared by the integration tests: where the fixtures are.
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
